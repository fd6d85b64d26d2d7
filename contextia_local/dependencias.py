"""
O que toda rota do Contextia local recebe do FastAPI, num lugar só:

- `Servidor`: o estado do app (`EstadoDoServidor`: a configuração, o banco e
  a injeção de falhas), guardado em `app.state.servidor` por `criar_app`;
- `ProjetoAutenticado`: o projeto da chave do pedido (401 sem chave ou com
  chave desconhecida); `SO_ADMIN`: o token de admin (401 sem, 403 errado);
- `novo_roteador`: o `APIRouter` de um recurso, com a classe de rota que roda
  essa mesma autenticação e o limite de bytes antes de o corpo ser lido
  (`regra_da_rota`, aplicada por corpo.py).

As dependências são `async` de propósito: rodam no laço de eventos, sem a ida
e volta a uma thread por pedido (a chave é lida pela conexão de leitura do
Banco, que não espera escrita nenhuma; o token de admin não lê o banco).
"""

import dataclasses
import hmac
from collections.abc import Awaitable, Callable
from typing import Annotated, Optional

from fastapi import APIRouter, Depends, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from contextia_local.armazenamento import Banco, ErroRegra, Projeto
from contextia_local.configuracao import CAMINHO_INTAKE, MAX_BYTES_PEDIDO, Configuracao
from contextia_local.corpo import RegraDoCorpo, RegraDoPedido, classe_de_rota
from contextia_local.falhas import EstadoDeFalhas


# ---------------------------------------------------------------- o estado
@dataclasses.dataclass(frozen=True)
class EstadoDoServidor:
    """O que as rotas de um app dividem: criado uma vez por `criar_app`."""

    config: Configuracao
    # None sem `dados` (so o openapi_json) ou sem --falhas.
    banco_aberto: Optional[Banco]
    falhas_injetaveis: Optional[EstadoDeFalhas]

    @classmethod
    def da_configuracao(cls, config: Configuracao) -> 'EstadoDoServidor':
        return cls(
            config,
            Banco(config.dados) if config.dados else None,
            EstadoDeFalhas() if config.falhas else None,
        )

    def banco(self) -> Banco:
        # Sem `dados` (so o openapi_json) as rotas existem para o documento, nao para servir.
        if self.banco_aberto is None:
            raise RuntimeError('Contextia local sem banco: criado sem `dados`.')
        return self.banco_aberto

    def falhas(self) -> EstadoDeFalhas:
        """A injeção de falhas, ou 404 se o servidor subiu sem --falhas."""
        if self.falhas_injetaveis is None:
            raise ErroRegra(
                404,
                'falhas_desligadas',
                'injeção de falhas desligada: suba o servidor com --falhas.',
            )
        return self.falhas_injetaveis


def estado_do_pedido(request: Request) -> EstadoDoServidor:
    """O estado do app que recebeu o pedido."""
    estado: EstadoDoServidor = request.app.state.servidor
    return estado


async def _servidor(request: Request) -> EstadoDoServidor:
    return estado_do_pedido(request)


Servidor = Annotated[EstadoDoServidor, Depends(_servidor)]


# ---------------------------------------------------------------- autenticação
portador = HTTPBearer(auto_error=False)
Credenciais = Annotated[Optional[HTTPAuthorizationCredentials], Depends(portador)]


async def projeto_autenticado(request: Request, credenciais: Credenciais) -> Projeto:
    if credenciais is None:
        raise ErroRegra(
            401,
            'sem_chave',
            'falta o cabeçalho Authorization: Bearer <chave do projeto> (CONTEXTIA_API_KEY).',
        )
    projeto = estado_do_pedido(request).banco().projeto_da_chave(credenciais.credentials)
    if projeto is None:
        raise ErroRegra(
            401,
            'chave_invalida',
            'chave de projeto desconhecida ou'
            ' revogada. Emita uma nova (provisionar.py) e atualize o'
            ' arquivo de chaves.',
        )
    return projeto


async def admin(request: Request, credenciais: Credenciais) -> bool:
    if credenciais is None:
        raise ErroRegra(
            401,
            'sem_token',
            'falta o cabeçalho Authorization: Bearer <token de admin> (CONTEXTIA_ADMIN_TOKEN).',
        )
    token = estado_do_pedido(request).config.admin_token
    if not hmac.compare_digest(credenciais.credentials.encode('utf-8'), token.encode('utf-8')):
        raise ErroRegra(
            403,
            'token_invalido',
            'o token de admin não confere com o deste servidor (CONTEXTIA_ADMIN_TOKEN).',
        )
    return True


ProjetoAutenticado = Annotated[Projeto, Depends(projeto_autenticado)]
SO_ADMIN = [Depends(admin)]
"""As `dependencies` de toda rota de admin."""


# ---------------------------------------------------------------- a regra do corpo
Verificacao = Callable[[Request, Optional[HTTPAuthorizationCredentials]], Awaitable[object]]


def _antes_do_corpo(verificar: Verificacao) -> Callable[[Request], Awaitable[None]]:
    async def autenticar(request: Request) -> None:
        await verificar(request, await portador(request))

    return autenticar


# Quem a rota exige (a dependência que ela já declara) -> a mesma conferência,
# rodada antes do corpo. Na ordem: a rota de admin que também lesse a chave
# seria de admin.
_AUTENTICACOES: tuple[tuple[Verificacao, Callable[[Request], Awaitable[None]]], ...] = (
    (admin, _antes_do_corpo(admin)),
    (projeto_autenticado, _antes_do_corpo(projeto_autenticado)),
)


def regra_da_rota(rota: APIRoute) -> RegraDoPedido:
    """
    A regra do corpo de `rota` (corpo.py). A autenticação que a rota já declara
    nas dependências roda antes do corpo; a dependência roda de novo depois
    dele: a chave revogada durante o envio também é recusada. O lote do intake
    tem os limites da configuração do app; as outras rotas, `MAX_BYTES_PEDIDO`.
    """
    chamadas = _chamadas(rota.dependant)
    autenticar = next((antes for exigida, antes in _AUTENTICACOES if exigida in chamadas), None)
    if rota.path == CAMINHO_INTAKE:

        def do_lote(request: Request) -> RegraDoCorpo:
            config = estado_do_pedido(request).config
            return RegraDoCorpo(autenticar, config.max_bytes_lote, config.max_registros_lote)

        return do_lote
    regra = RegraDoCorpo(autenticar, MAX_BYTES_PEDIDO)
    return lambda _request: regra


def _chamadas(dependant: Dependant) -> list[object]:
    """Toda função que a árvore de dependências da rota chama."""
    chamadas: list[object] = [dependant.call]
    for filha in dependant.dependencies:
        chamadas += _chamadas(filha)
    return chamadas


RotaDoServidor = classe_de_rota(regra_da_rota)
"""A classe de toda rota: autentica e limita o corpo antes de o FastAPI lê-lo."""


def novo_roteador(tag: str, so_admin: bool = False) -> APIRouter:
    """
    O roteador de um recurso. As rotas não anotam o retorno como modelo: no
    FastAPI a anotação de retorno vira `response_model` (valida a resposta e
    muda o docs/openapi.json), por isso cada uma diz `response_model=None`.
    """
    return APIRouter(
        tags=[tag], dependencies=SO_ADMIN if so_admin else None, route_class=RotaDoServidor
    )
