"""
O provisionamento no Contextia (token de admin): projetos, chaves, grupos, webhooks.

Só o provisionador (e os testes, e o Contextia local) precisa disto; quem só
envia dados usa cliente.py com a chave do projeto. O token vem de
CONTEXTIA_ADMIN_TOKEN, lido na hora, e nunca aparece em log nem em exceção.
Toda resposta passa por `pedir`: lida com limite de bytes e dentro do prazo
(`transporte.ler_corpo`); passada de um deles, a chamada falha como um timeout.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict

from contextia_sync.intake.cliente import (
    ErroAutenticacao,
    detalhe_da_resposta,
    exigir_base,
    json_da_resposta,
    url_base,
)
from contextia_sync.intake.transporte import ErroContextia, do_ambiente, mascarar, pedir
from contextia_sync.tipos import JsonDecodificado, ObjetoJson

# As respostas do admin, como docs/contrato-intake.md as descreve.


class Projeto(TypedDict, total=False):
    """Um projeto (`criado` só na criação: False se ele já existia)."""

    id: int
    external_id: str
    name: str
    criado_em: str
    criado: bool


class ChaveEmitida(TypedDict, total=False):
    """A chave recém-emitida: a única resposta com ela em claro."""

    key_id: str
    key: str
    project_id: int


class ChaveListada(TypedDict, total=False):
    """Uma chave do projeto na lista (nunca em claro)."""

    key_id: str
    prefixo: str
    criada_em: str
    revogada: bool


class Grupo(TypedDict, total=False):
    """Um grupo (`projetos` na lista; `criado` só na criação)."""

    slug: str
    name: str
    projetos: list[int]
    criado: bool


class Webhook(TypedDict, total=False):
    """Um webhook (`secret` só no registro)."""

    id: str
    secret: str
    url: str
    eventos: list[str]
    project_id: int


class EntregaDeTeste(TypedDict, total=False):
    """O que a entrega de teste deu: o status HTTP do receptor (None: nem respondeu) e o erro."""

    status: int | None
    erro: str | None


class Admin:
    """Provisionamento (token de admin). Toda operação é idempotente onde o contrato diz."""

    def __init__(self, token: str | None = None, url: str | None = None) -> None:
        self._token = token or do_ambiente('CONTEXTIA_ADMIN_TOKEN')
        self._url = (url or '').rstrip('/') or None
        if not self._token:
            raise ErroAutenticacao(
                'sem token de admin: defina CONTEXTIA_ADMIN_TOKEN (só o'
                ' provisionamento precisa dele).'
            )

    def __repr__(self) -> str:
        return 'Admin(url=%r, token=%s)' % (self._url or url_base(), '***')

    def _pedido(
        self,
        metodo: str,
        caminho: str,
        corpo: ObjetoJson | None = None,
        params: dict[str, str] | None = None,
        aceitar_404: bool = False,
    ) -> JsonDecodificado:
        base = self._url or exigir_base()
        contexto = 'admin %s %s' % (metodo, caminho)
        resposta = pedir(
            metodo,
            base + caminho,
            autorizacao=self._token,
            corpo=corpo,
            params=params,
            contexto=contexto,
        )
        if resposta.status_code in (401, 403):
            raise ErroAutenticacao(
                '%s: Contextia recusou o token de admin (HTTP %d, %s).'
                ' Confira CONTEXTIA_ADMIN_TOKEN.'
                % (
                    contexto,
                    resposta.status_code,
                    mascarar(detalhe_da_resposta(resposta), self._token),
                )
            )
        if aceitar_404 and resposta.status_code == 404:
            return None
        if resposta.status_code >= 300:
            raise ErroContextia(
                '%s: HTTP %d, %s'
                % (
                    contexto,
                    resposta.status_code,
                    mascarar(detalhe_da_resposta(resposta), self._token),
                )
            )
        return json_da_resposta(resposta)

    def criar_projeto(self, external_id: object, nome: str | None = None) -> Projeto:
        """Cria (ou devolve, se já existe) o projeto do escopo. dict(id, ..., criado)."""
        projeto: Projeto = self._pedido(
            'POST', '/api/v1/admin/projetos', {'external_id': str(external_id), 'name': nome}
        )
        return projeto

    def buscar_projeto(self, external_id: object) -> Projeto | None:
        """O projeto do escopo, ou None se não há."""
        achados: list[Projeto] = self._pedido(
            'GET', '/api/v1/admin/projetos', params={'external_id': str(external_id)}
        )['projetos']
        return achados[0] if achados else None

    def emitir_chave(self, projeto_id: object) -> ChaveEmitida:
        """dict(key_id, key). A chave só existe em claro nesta resposta."""
        emitida: ChaveEmitida = self._pedido(
            'POST', '/api/v1/admin/projetos/%s/chaves' % projeto_id
        )
        return emitida

    def listar_chaves(self, projeto_id: object) -> list[ChaveListada]:
        """As chaves do projeto (prefixo e id; nunca a chave em claro)."""
        chaves: list[ChaveListada] = self._pedido(
            'GET', '/api/v1/admin/projetos/%s/chaves' % projeto_id
        )['chaves']
        return chaves

    def revogar_chave(self, key_id: object) -> JsonDecodificado:
        """Revoga a chave `key_id` (pedidos com ela passam a levar 401)."""
        return self._pedido('DELETE', '/api/v1/admin/chaves/%s' % key_id)

    def criar_grupo(self, slug: str, nome: str | None = None) -> Grupo:
        """Cria (ou devolve, se já existe) o grupo `slug`. dict(..., criado)."""
        grupo: Grupo = self._pedido('POST', '/api/v1/admin/grupos', {'slug': slug, 'name': nome})
        return grupo

    def listar_grupos(self) -> list[Grupo]:
        """Os grupos, cada um com a lista de `projetos`."""
        grupos: list[Grupo] = self._pedido('GET', '/api/v1/admin/grupos')['grupos']
        return grupos

    def incluir_no_grupo(self, slug: str, projeto_id: object) -> JsonDecodificado:
        """Põe o projeto no grupo (repetir é inofensivo)."""
        return self._pedido('PUT', '/api/v1/admin/grupos/%s/projetos/%s' % (slug, projeto_id))

    def registrar_webhook(
        self,
        projeto_id: object,
        url: str,
        segredo: str | None = None,
        eventos: Iterable[str] | None = None,
    ) -> Webhook:
        """dict(id, secret). O segredo assina as entregas (verificar_assinatura)."""
        corpo: ObjetoJson = {'url': url}
        if segredo is not None:
            corpo['secret'] = segredo
        if eventos is not None:
            corpo['events'] = list(eventos)
        webhook: Webhook = self._pedido(
            'POST', '/api/v1/admin/projetos/%s/webhooks' % projeto_id, corpo
        )
        return webhook

    def listar_webhooks(self, projeto_id: object) -> list[Webhook]:
        """Os webhooks do projeto (sem o segredo)."""
        webhooks: list[Webhook] = self._pedido(
            'GET', '/api/v1/admin/projetos/%s/webhooks' % projeto_id
        )['webhooks']
        return webhooks

    def testar_webhook(self, webhook_id: object) -> EntregaDeTeste:
        """Pede ao servidor uma entrega de teste agora. dict(status, erro)."""
        entrega: EntregaDeTeste = self._pedido(
            'POST', '/api/v1/admin/webhooks/%s/teste' % webhook_id
        )
        return entrega
