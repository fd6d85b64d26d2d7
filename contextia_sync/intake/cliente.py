"""
Cliente do Contextia: envio em lotes, fechamento de carga e leitura.

O contrato HTTP está em docs/contrato-intake.md. O que este módulo garante:

  * Ambiente lido NA HORA DA CHAMADA: CONTEXTIA_URL (sem padrão -- um padrão
    mandaria os dados de um cliente para a instalação de outro),
    CONTEXTIA_INTAKE_URL (opcional, troca só o endpoint do intake),
    CONTEXTIA_API_KEY, CONTEXTIA_CA_BUNDLE. `conferir_destino` recusa, antes de
    qualquer conexão, HTTP puro fora de loopback e um CONTEXTIA_INTAKE_URL noutro
    host que CONTEXTIA_URL (a conferência de dono da chave falaria com um
    servidor e os dados iriam para outro).
  * `enviar_dataset` consome qualquer iterável em lotes de `chunk`, sem
    materializar o dataset, e NUNCA chama `complete`: quem decide e quem
    chamou (carga com lote falho nunca é completada).
  * Chave nunca em log nem em exceção: só o prefixo mascarado (`ctx_abcd...`);
    texto do servidor só entra numa mensagem por `texto_da_resposta` (mascarado).
  * Toda resposta é lida com limite de bytes e dentro do prazo do pedido
    (`transporte.ler_corpo`, por `pedir`); só a página de `ler_registros` tem
    limite maior (`padroes.RESPOSTA_MAXIMA_BYTES_REGISTROS`).

O envio é uma fila de etapas, cada uma num módulo, e `enviar_dataset` só as
liga: registros -> serializar -> lotes (lotes.py: `FonteDeLotes`) -> corpo
(envio.py: `Envelope`) -> remessa (remessa.py: lotes em voo, a divisão e o
isolamento do recusado, o balanço) -> pedido (transporte.py: a política de
retentativas com prazo, TLS, mascara de chaves) -> resultado (envio.py:
`Aceite`, `ResultadoEnvio`; a quarentena em `RecusasDoEnvio`). As respostas do
servidor são lidas em respostas.py; o provisionamento (token de admin), em admin.py.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import hmac
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypedDict

from contextia_sync import padroes
from contextia_sync.fila.quarentena import DestinoDeRecusas, Desfecho, ItemQuarentena

# O nome do dataset e regra do mapeamento; `cliente.normalizar_dataset` continua valendo.
from contextia_sync.mapeamento import normalizar_dataset as normalizar_dataset
from contextia_sync.intake.envio import (
    Aceite,
    Alvo,
    Envelope,
    RecusasDoEnvio,
    ResultadoEnvio as ResultadoEnvio,
)
from contextia_sync.intake.lotes import (
    FonteDeLotes,
    Lido,
    preparador_de_prontos as preparador_de_prontos,
)
from contextia_sync.intake.remessa import enviar_em_lotes
from contextia_sync.intake.respostas import (
    ErroAutenticacao as ErroAutenticacao,
    codigo_de_erro,
    detalhe_da_resposta as detalhe_da_resposta,
    erro_autenticacao,
    json_da_resposta as json_da_resposta,
    quem,
)
from contextia_sync.intake.serializacao import valor_json
from contextia_sync.intake.transporte import (
    STATUS_RETENTAVEIS,
    ErroContextia,
    ErroDestino,
    ErroIndisponivel,
    conferir_url,
    do_ambiente,
    mascarar,
    pedir,
    prazo_do_pedido,
    preparar_logger,
    servidor,
    texto_da_resposta,
)
from contextia_sync.tipos import Json, JsonDecodificado, ObjetoJson, ValorDoBanco

CAMINHO_INTAKE = '/api/v1/intake'
CABECALHO_ASSINATURA = 'X-Contextia-Assinatura'


class ErroRemocaoAcimaDoTeto(ErroContextia):
    """O `complete` removeria mais que o teto pedido; o servidor não removeu nada."""


# As respostas lidas por campo, como docs/contrato-intake.md as descreve.


class Fechamento(TypedDict, total=False):
    """A resposta do `complete`: quantos saíram e quantos há antes e depois."""

    removed: int
    records_before: int
    records: int
    dataset: str
    sync: str


class DonoDaChave(TypedDict, total=False):
    """O projeto da chave (`GET /api/v1/projeto`)."""

    project_id: int
    external_id: str
    name: str


# ---------------------------------------------------------------- ambiente
def url_base() -> str | None:
    """A URL da instalação do Contextia deste cliente (CONTEXTIA_URL), ou None."""
    base = do_ambiente('CONTEXTIA_URL')
    if base:
        return base.rstrip('/')
    intake = do_ambiente('CONTEXTIA_INTAKE_URL')
    if intake and intake.rstrip('/').endswith(CAMINHO_INTAKE):
        return intake.rstrip('/')[: -len(CAMINHO_INTAKE)]
    return None


def url_destino() -> str | None:
    """O que mostrar ao operador como destino: o intake explícito ou a base."""
    intake = do_ambiente('CONTEXTIA_INTAKE_URL')
    return intake.rstrip('/') if intake else url_base()


def _url_intake() -> str:
    conferir_destino()
    intake = do_ambiente('CONTEXTIA_INTAKE_URL')
    if intake:
        return intake.rstrip('/')
    return exigir_base() + CAMINHO_INTAKE


def conferir_destino() -> None:
    """
    Recusa (ErroDestino, antes de qualquer conexão) o destino do ambiente:
    CONTEXTIA_URL ou CONTEXTIA_INTAKE_URL em HTTP puro fora de loopback, ou um
    CONTEXTIA_INTAKE_URL noutro host que CONTEXTIA_URL. Só confere o que está
    definido; a falta de CONTEXTIA_URL e de `exigir_base`.
    """
    import urllib.parse

    base = do_ambiente('CONTEXTIA_URL')
    intake = do_ambiente('CONTEXTIA_INTAKE_URL')
    for nome, valor in (('CONTEXTIA_URL', base), ('CONTEXTIA_INTAKE_URL', intake)):
        if valor:
            conferir_url(valor, nome)
    if base and intake:
        host_base = (urllib.parse.urlsplit(base).hostname or '').lower()
        host_intake = (urllib.parse.urlsplit(intake).hostname or '').lower()
        if host_base != host_intake:
            raise ErroDestino(
                'CONTEXTIA_INTAKE_URL (%s) aponta para outro host que CONTEXTIA_URL (%s): a'
                ' conferência de dono da chave falaria com um servidor e os registros iriam'
                ' para outro. Use o mesmo host nas duas (CONTEXTIA_INTAKE_URL só troca o'
                ' caminho do intake) ou apague CONTEXTIA_INTAKE_URL. Nada foi enviado.'
                % (servidor(intake), servidor(base))
            )
    # O prazo dos pedidos torto e recusado na subida (saida 2), nao no primeiro envio.
    prazo_do_pedido()


def exigir_base() -> str:
    """A URL da instalação (CONTEXTIA_URL); ErroContextia dizendo como definir, se falta."""
    conferir_destino()
    base = url_base()
    if not base:
        raise ErroContextia(
            'CONTEXTIA_URL não está definida. Ela é a URL da instalação do Contextia DESTE'
            ' cliente e não tem padrão de propósito (um padrão mandaria os dados para outro'
            ' cliente). Defina CONTEXTIA_URL=https://<instalação> no ambiente do serviço.'
        )
    return base


def _chave(api_key: str | None) -> str:
    chave = api_key or do_ambiente('CONTEXTIA_API_KEY')
    if not chave:
        raise ErroAutenticacao(
            'nenhuma chave de projeto: passe api_key ou defina'
            ' CONTEXTIA_API_KEY (arquivo de chaves do provisionar.py).'
        )
    return chave


# ---------------------------------------------------------------- nomes
def gerar_sync() -> str:
    """Id de ciclo de carga: ordenável pelo horário (UTC) e único."""
    agora = datetime.datetime.now(datetime.timezone.utc)
    return agora.strftime('%Y%m%dT%H%M%SZ') + '-' + secrets.token_hex(4)


def verificar_assinatura(segredo: str | None, corpo: bytes | str, cabecalho: str | None) -> bool:
    """
    Confere a assinatura de uma entrega de webhook (cabeçalho X-Contextia-Assinatura).

    `corpo` são os BYTES crus recebidos (antes de qualquer parse); `cabecalho`
    e 'sha256=<hex>'. Devolve True/False; comparação em tempo constante.
    """
    if not segredo or not cabecalho or not cabecalho.startswith('sha256='):
        return False
    if isinstance(corpo, str):
        corpo = corpo.encode('utf-8')
    esperado = hmac.new(segredo.encode('utf-8'), corpo, hashlib.sha256).hexdigest()
    return hmac.compare_digest(esperado, cabecalho[len('sha256=') :].strip().lower())


def _falha(resultado: ResultadoEnvio, mensagem: str, logger: logging.Logger) -> None:
    """Um problema fora de um lote que conta como lote falho (o envio não vale inteiro)."""
    resultado.lotes_erro += 1
    resultado.erros.append(mensagem)
    logger.error('%s', mensagem)


# ---------------------------------------------------------------- intake
def enviar_dataset(
    nome: str,
    registros: Iterable[Lido],
    *,
    key: str | None = None,
    description: str | None = None,
    fields: Mapping[str, str] | None = None,
    group: str | None = None,
    chunk: int | None = padroes.CHUNK,
    api_key: str | None = None,
    logger: logging.Logger | None = None,
    sync: str | None = None,
    remove: Iterable[ValorDoBanco] | None = None,
    escopo: object = None,
    deve_parar: Callable[[], bool] | None = None,
    quarentena: DestinoDeRecusas | None = None,
    em_voo: int = 1,
    familias: Mapping[str, str] | None = None,
    parte: int = 1,
    prontos: bool = False,
) -> ResultadoEnvio:
    """
    Envia `registros` (qualquer iterável de dicts) ao dataset `nome`, em lotes.

    Devolve um ResultadoEnvio; nada do que o servidor responde levanta, só
    401/403 (ErroAutenticacao: com chave errada nenhum lote passaria). Lote
    recusado (422, 409, 500...) conta em `lotes_erro` e o envio segue;
    servidor que não responde, segue sobrecarregado depois das retentativas,
    ou responde 2xx que não é do intake conta o lote em `lotes_erro` e
    INTERROMPE o envio (sem ler o resto da origem) -- ver remessa.py.

    Cada opção é dita na etapa que a usa: `sync`, `parte` e `remove` em
    `_envelope`; `em_voo` em `_lotes_em_voo`; `quarentena` (o registro recusado
    de vez isolado e guardado lá) em envio.py; `familias` e `prontos` em
    lotes.py; o gzip, só a quem anuncia, em `_Compressao`. `escopo` aparece nas
    mensagens e identifica a empresa na quarentena; `deve_parar()`, se dado, e
    olhado nas esperas entre retentativas.
    """
    log = preparar_logger(logger)
    chave = _chave(api_key)
    url = _url_intake()
    alvo = Alvo(normalizar_dataset(nome), escopo, key)
    tamanho = max(1, int(chunk or padroes.CHUNK))
    resultado = ResultadoEnvio(alvo.dataset)
    primeira = max(1, int(parte))
    remover = _a_remover(remove, alvo, chave, resultado, log)
    recusas = RecusasDoEnvio(quarentena, alvo, chave, resultado) if quarentena is not None else None
    fonte = FonteDeLotes(
        registros,
        tamanho,
        resultado=resultado,
        recusas=recusas,
        familias=familias,
        prontos=prontos,
        # Com `sync` (ou `remove`) e nenhum registro, um lote vazio: o servidor conhece o sync.
        anunciar_vazio=sync is not None or bool(remover),
    )
    envelope = _envelope(
        alvo, description, fields, group, fonte, sync=sync, parte=primeira, remover=remover
    )
    aceite = Aceite(alvo, chave, resultado, envelope, recusas)
    resultado.interrompido = enviar_em_lotes(
        fonte,
        url,
        autorizacao=chave,
        montar=envelope.montar,
        aceitar=aceite.aceitar,
        rotulo='dataset %s' % alvo.dataset,
        balanco=resultado,
        logger=log,
        deve_parar=deve_parar,
        isolar=recusas.isolar if recusas is not None else None,
        em_voo=_lotes_em_voo(em_voo, sync, remover, quarentena),
        comprimir=_Compressao(chave, url, aceite, parte > 1).decidir,
        primeiro=primeira,
    )
    _concluir(resultado, fonte.recusado, recusas, alvo, sync, log)
    return resultado


def _envelope(
    alvo: Alvo,
    description: str | None,
    fields: Mapping[str, str] | None,
    group: str | None,
    fonte: FonteDeLotes,
    *,
    sync: str | None,
    parte: int,
    remover: list[Json] | None,
) -> Envelope:
    """
    O corpo de cada lote: o dataset e o que foi dado dele, comum a todo lote.

    `sync` marca os lotes como parte de um ciclo de carga (parte 1, 2, ...);
    quem chama `enviar_dataset` decide se completa. `parte`: o número
    (`sync.part`) do primeiro lote. A carga de todas as empresas
    (carga/todas.py) manda cada lote de uma empresa numa chamada, com o mesmo
    `sync`: a numeração continua. `remover` (valores de key, de `remove`; o
    servidor precisa anunciar `remove` em capacidades(), ver `_a_remover`) vai
    no primeiro lote.
    """
    base: dict[str, object] = {'dataset': alvo.dataset}
    for campo, valor in (
        ('key', alvo.key),
        ('description', description),
        ('fields', fields),
        ('group', group),
    ):
        if valor is not None:
            base[campo] = valor
    return Envelope(
        base, sync=sync, parte=parte, remover=remover, registros_json=fonte.registros_json
    )


def _lotes_em_voo(
    em_voo: int, sync: str | None, remover: list[Json] | None, quarentena: DestinoDeRecusas | None
) -> int:
    """
    Até quantos lotes esperam resposta enquanto os seguintes são lidos e
    montados (a carga completa passa padroes.LOTES_EM_VOO). Só vale com `sync`
    e sem `remove` nem quarentena; fora disso os lotes vão um de cada vez: no
    ao vivo duas versões da mesma key podem estar em lotes seguidos, e com
    lotes em voo a mais nova poderia chegar antes e ser sobrescrita pela velha.
    """
    if sync is None or remover or quarentena is not None:
        return 1
    return max(1, int(em_voo))


def _a_remover(
    remove: Iterable[ValorDoBanco] | None,
    alvo: Alvo,
    chave: str,
    resultado: ResultadoEnvio,
    log: logging.Logger,
) -> list[Json] | None:
    """As keys a remover, se o servidor tem `remove`; sem ele, a falha contada."""
    # A chave a remover na mesma forma JSON em que o registro a levou (Decimal como
    # texto, data ISO): o servidor remove pela chave como a guardou.
    pendente = [valor_json(v, alvo.key or 'key') for v in remove] if remove else None
    if pendente and not _suporta_remove(chave, resultado, log):
        # O Contextia de hoje nao tem `remove`: os registros seguem, a exclusao
        # nao, e isso e falha (quem chamou nao pode dar a exclusao por feita).
        _falha(
            resultado,
            'dataset %s: o servidor não suporta `remove` (capacidades); %d'
            ' exclusao(ões) NÃO enviada(s) -- ficam para a carga completa'
            ' (sync + complete).' % (alvo.dataset, len(pendente)),
            log,
        )
        return None
    return pendente


def _concluir(
    resultado: ResultadoEnvio,
    recusado: str | None,
    recusas: RecusasDoEnvio | None,
    alvo: Alvo,
    sync: str | None,
    log: logging.Logger,
) -> None:
    """O que fica depois dos lotes: a leitura que parou, a quarentena, a carga incompleta."""
    novos = recusas.novos if recusas is not None else 0
    if recusado is not None:
        _falha(resultado, 'dataset %s, %s' % (alvo.dataset, recusado), log)
    if resultado.quarentenados:
        log.warning(
            'dataset %s%s: %d registro(s) na quarentena (%d agora, %d já estavam) -- %s',
            alvo.dataset,
            ' escopo %s' % alvo.escopo if alvo.escopo is not None else '',
            resultado.quarentenados,
            novos,
            resultado.quarentenados - novos,
            '; '.join(resultado.quarentena_motivos[:3])[:600],
        )
    if sync is not None and resultado.quarentenados:
        # A regra da carga completa: faltou registro, nada de `complete` (ele
        # removeria do Contextia os que estao na quarentena).
        _falha(
            resultado,
            'dataset %s: %d registro(s) na quarentena; a carga (sync %s) NÃO'
            ' está completa -- complete não deve ser enviado'
            % (alvo.dataset, resultado.quarentenados, sync),
            log,
        )


class _Compressao:
    """
    O `comprimir` da remessa: gzip só para quem anuncia. A pergunta
    (capacidades) só é feita depois do primeiro lote aceito e se há outro lote:
    o envio de um lote só (o ao vivo, quase sempre) não paga um pedido a mais, e
    um destino que nem é o intake não recebe pedido nenhum além do primeiro
    lote. A continuação de um sync (`parte` > 1) já é um envio de muitos lotes.
    """

    def __init__(self, chave: str, url: str, aceite: Aceite, continuacao: bool) -> None:
        self.chave, self.url, self.aceite, self.continuacao = chave, url, aceite, continuacao
        self._decidido: list[bool] = []
        self._trava = threading.Lock()

    def decidir(self) -> bool:
        if self._decidido:
            return self._decidido[0]
        with self._trava:
            if not self._decidido:
                anuncia = _anuncia_gzip(
                    self.chave, self.url, consultar=self.continuacao or self.aceite.aceitou
                )
                if anuncia is None:
                    return False
                self._decidido.append(anuncia)
        return self._decidido[0]


def reenviar_item(
    item: ItemQuarentena,
    *,
    api_key: str | None,
    logger: logging.Logger | None = None,
    deve_parar: Callable[[], bool] | None = None,
) -> Desfecho:
    """
    O `enviar` de `Quarentena.reenviar` que usa o intake: manda o registro guardado.

    `api_key` e a chave da empresa do item (`item.escopo`); None com escopo
    dado -> pendente (nunca cai na CONTEXTIA_API_KEY do ambiente: a chave de
    outra empresa mandaria o registro ao projeto errado). Item com valor sem
    JSON -> pendente (só a origem corrigida o traz). Recusado de vez de novo ->
    recusado, com o motivo novo. Falha passageira -> falhou (interrompe o passe
    se o servidor não respondeu). Chave recusada (401/403) -> pendente.
    """
    if not item.reenviavel:
        return Desfecho.pendente(
            'valor sem JSON em %s: o registro guardado não é o da origem. Corrija na'
            ' origem (view com CASE para NULL, ou no ERP); a versão corrigida sai da'
            ' quarentena sozinha quando o ouvinte a entregar' % ', '.join(sorted(item.invalidos))
        )
    if api_key is None and item.escopo is not None:
        return Desfecho.pendente(
            'o escopo %s não tem chave no arquivo de chaves; o item'
            ' fica até a empresa ter chave (provisionar.py)' % item.escopo
        )
    coletor = _Coletor()
    try:
        resultado = enviar_dataset(
            item.dataset,
            [] if item.remocao else [item.registro],
            remove=[item.chave_valor] if item.remocao else None,
            key=item.chave_coluna,
            chunk=1,
            api_key=api_key,
            logger=logger,
            escopo=item.escopo,
            deve_parar=deve_parar,
            quarentena=coletor,
        )
    except ErroAutenticacao as erro:
        return Desfecho.pendente(str(erro))
    except ErroContextia as erro:
        return Desfecho.falhou(str(erro), interromper=True)
    if coletor.motivos:
        return Desfecho.recusado(coletor.motivos[-1])
    if resultado.lotes_erro:
        return Desfecho.falhou('; '.join(resultado.erros)[:600], interromper=resultado.interrompido)
    return Desfecho.entregue()


class _Coletor:
    """Uma quarentena em memória para o reenvio: guarda as recusas, nada no disco."""

    def __init__(self) -> None:
        self.recusas: list[dict[str, object]] = []

    @property
    def motivos(self) -> list[str]:
        return [str(recusa['motivo']) for recusa in self.recusas]

    def guardar(
        self,
        dataset: str,
        escopo: object,
        chave_coluna: str | None,
        registro: Mapping[str, Json],
        motivo: str,
        *,
        invalidos: Mapping[str, str] | None = None,
        status_http: int | None = None,
    ) -> None:
        self.recusas.append(
            {
                'dataset': dataset,
                'escopo': escopo,
                'chave_coluna': chave_coluna,
                'registro': dict(registro),
                'motivo': motivo,
                'invalidos': dict(invalidos or {}),
                'status_http': status_http,
            }
        )

    def identidades(self) -> set[str]:
        return set()

    def guardado(self, ident: str) -> ItemQuarentena | None:  # noqa: ARG002 - o protocolo
        return None

    def superar(
        self,
        ident: str,  # noqa: ARG002
        dataset: str,  # noqa: ARG002 - o protocolo
        escopo: object,  # noqa: ARG002
    ) -> bool:  # noqa: ARG002
        return False


# (instante, anunciou gzip) por (intake, chave): uma consulta a cada VALIDADE_CAPACIDADES.
_gzip_anunciado: dict[tuple[str, str], tuple[float, bool]] = {}


def _anuncia_gzip(chave: str, url: str, consultar: bool = True) -> bool | None:
    """
    O intake anunciou `compressão: ["gzip"]` em capacidades? Na duvida (servidor
    antigo, 404, erro, resposta torta), NÃO: corpo comprimido a quem não anuncia
    seria recusado ou, pior, guardado como lixo. Sem `consultar`, só o que já
    se sabe (None: ainda não perguntado).
    """
    agora = time.monotonic()
    guardado = _gzip_anunciado.get((url, chave))
    if guardado is not None and agora - guardado[0] < padroes.VALIDADE_CAPACIDADES:
        return guardado[1]
    if not consultar:
        return None
    try:
        anunciadas = capacidades(chave)
    except ErroContextia:
        anunciadas = {}
    formas = anunciadas.get('compressao')
    anuncia = isinstance(formas, list) and 'gzip' in formas
    _gzip_anunciado[(url, chave)] = (agora, anuncia)
    return anuncia


def _suporta_remove(chave: str, resultado: ResultadoEnvio, logger: logging.Logger) -> bool:
    try:
        anunciadas = capacidades(chave)
    except ErroAutenticacao:
        raise
    except ErroContextia as erro:
        resultado.erros.append('capacidades: %s' % erro)
        logger.error('capacidades: %s', erro)
        return False
    return bool(anunciadas.get('remove'))


def completar(
    nome: str,
    sync: str,
    *,
    api_key: str | None = None,
    max_remocao: float | None = None,
    escopo: object = None,
) -> Fechamento:
    """
    Fecha o ciclo de carga `sync`: o servidor remove do dataset o que o sync não
    trouxe. `max_remocao` (0..1) e o teto: acima dele o servidor recusa, nada e
    removido e levanta ErroRemocaoAcimaDoTeto.
    """
    chave = _chave(api_key)
    dataset = normalizar_dataset(nome)
    pedido: ObjetoJson = {'dataset': dataset, 'sync': sync}
    if max_remocao is not None:
        pedido['max_removal'] = float(max_remocao)
    contexto = 'complete do dataset %s (sync %s)' % (dataset, sync)
    resposta = pedir(
        'POST', _url_intake() + '/complete', autorizacao=chave, corpo=pedido, contexto=contexto
    )
    if resposta.status_code in (401, 403):
        raise erro_autenticacao(resposta, escopo, dataset, chave)
    if resposta.status_code == 409 and codigo_de_erro(resposta) == 'remocao_acima_do_teto':
        raise ErroRemocaoAcimaDoTeto(
            '%s %s: %s' % (contexto, quem(escopo), detalhe_da_resposta(resposta))
        )
    if resposta.status_code >= 300:
        # O passageiro que durou o prazo inteiro: o servidor, não este complete.
        erro = ErroIndisponivel if resposta.status_code in STATUS_RETENTAVEIS else ErroContextia
        raise erro(
            '%s %s: HTTP %d, %s'
            % (
                contexto,
                quem(escopo),
                resposta.status_code,
                mascarar(detalhe_da_resposta(resposta), chave),
            )
        )
    fechamento: Fechamento = json_da_resposta(resposta)
    return fechamento


def _get(
    caminho: str,
    chave: str,
    contexto: str,
    escopo: object = None,
    params: dict[str, str | int] | None = None,
    deve_parar: Callable[[], bool] | None = None,
    limite: int | None = None,
) -> JsonDecodificado:
    # `limite`: bytes da resposta (None: transporte.RESPOSTA_MAXIMA_BYTES).
    resposta = pedir(
        'GET',
        exigir_base() + caminho,
        autorizacao=chave,
        params=params,
        contexto=contexto,
        deve_parar=deve_parar,
        limite=limite,
    )
    if resposta.status_code in (401, 403):
        raise erro_autenticacao(resposta, escopo, None, chave)
    if resposta.status_code >= 300:
        raise ErroContextia(
            '%s: HTTP %d, %s'
            % (contexto, resposta.status_code, mascarar(detalhe_da_resposta(resposta), chave))
        )
    return json_da_resposta(resposta)


def capacidades(api_key: str | None = None) -> ObjetoJson:
    """O que o servidor suporta (ex.: {'remove': True, ...}). Servidor antigo: {}."""
    resposta = pedir(
        'GET',
        exigir_base() + '/api/v1/capacidades',
        autorizacao=api_key or do_ambiente('CONTEXTIA_API_KEY') or '',
        contexto='capacidades',
    )
    if resposta.status_code == 404:
        # O Contextia de hoje nao tem a rota: nada alem do basico.
        return {'remove': False}
    if resposta.status_code >= 300:
        raise ErroContextia(
            'capacidades: HTTP %d, %s' % (resposta.status_code, detalhe_da_resposta(resposta))
        )
    anunciadas = json_da_resposta(resposta)
    if not isinstance(anunciadas, dict):
        raise ErroContextia(
            'capacidades: HTTP %d com um JSON que não é um objeto (%s).'
            ' CONTEXTIA_URL aponta para o Contextia?'
            % (resposta.status_code, texto_da_resposta(resposta))
        )
    return anunciadas


def quem_sou(
    api_key: str | None = None, escopo: object = None, deve_parar: Callable[[], bool] | None = None
) -> DonoDaChave:
    """{'project_id', 'external_id', 'name'} do projeto da chave; ErroAutenticacao se não vale."""
    dono: DonoDaChave = _get(
        '/api/v1/projeto', _chave(api_key), 'identificar a chave', escopo, deve_parar=deve_parar
    )
    return dono


def listar_datasets(api_key: str | None = None) -> list[ObjetoJson]:
    """[{dataset, records, key, description, fields, group, updated_at}] do projeto."""
    datasets: list[ObjetoJson] = _get('/api/v1/datasets', _chave(api_key), 'listar datasets')[
        'datasets'
    ]
    return datasets


def ler_registros(
    nome: str, api_key: str | None = None, pagina: int = 1000
) -> Iterator[ObjetoJson]:
    """Itera os registros do dataset como foram guardados, página a página."""
    chave = _chave(api_key)
    dataset = normalizar_dataset(nome)
    apos = 0
    while True:
        resposta = _get(
            '/api/v1/datasets/%s/registros' % dataset,
            chave,
            'ler registros de %s' % dataset,
            params={'after': apos, 'limit': pagina},
            # Uma página de registros passa do limite das outras respostas.
            limite=padroes.RESPOSTA_MAXIMA_BYTES_REGISTROS,
        )
        yield from resposta['records']
        if resposta.get('next') is None:
            return
        apos = resposta['next']


# O que o decodificador de bytes do outro lado precisa, para quem le de volta.
def bytes_de(texto: str) -> bytes:
    """Volta um campo bytes (base64) ao valor original."""
    try:
        return base64.b64decode(texto, validate=True)
    except (binascii.Error, TypeError) as erro:
        raise ValueError('valor %r não é base64 válido: %s' % (texto, erro)) from None
