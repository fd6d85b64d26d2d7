"""
Cliente do Contextia: envio em lotes, fechamento de carga e leitura.

O contrato HTTP esta em docs/contrato-intake.md. O que este modulo garante:

  * Ambiente lido NA HORA DA CHAMADA: CONTEXTIA_URL (sem padrao -- um padrao
    mandaria os dados de um cliente para a instalacao de outro),
    CONTEXTIA_INTAKE_URL (opcional, troca so o endpoint do intake),
    CONTEXTIA_API_KEY, CONTEXTIA_CA_BUNDLE.
  * `enviar_dataset` consome qualquer iteravel em lotes de `chunk`, sem
    materializar o dataset, e NUNCA chama `complete`: quem decide e quem
    chamou (carga com lote falho nunca e completada).
  * Chave nunca em log nem em excecao: so o prefixo mascarado (`ctx_abcd...`).

Como o pedido chega la -- Session, a politica de retentativas com prazo, o 413
que divide o lote, a sobrecarga que interrompe o envio, TLS, mascara de chaves
-- esta em transporte.py; o provisionamento (token de admin), em admin.py.
"""

from __future__ import annotations

import base64
import binascii
import datetime
import hashlib
import hmac
import itertools
import json
import logging
import re
import secrets
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from contextia_sync import padroes
from contextia_sync.intake.serializacao import ErroSerializacao, serializar_registro
from contextia_sync.intake.transporte import (
    ErroContextia,
    do_ambiente,
    enviar_em_lotes,
    mascarar,
    mascarar_chave,
    pedir,
    preparar_logger,
    servidor,
)

if TYPE_CHECKING:
    import requests

CAMINHO_INTAKE = '/api/v1/intake'
CABECALHO_ASSINATURA = 'X-Contextia-Assinatura'

T = TypeVar('T')


class ErroAutenticacao(ErroContextia):
    """Chave de projeto ou token de admin recusado (401/403)."""


class ErroRemocaoAcimaDoTeto(ErroContextia):
    """O `complete` removeria mais que o teto pedido; o servidor nao removeu nada."""


@dataclass
class ResultadoEnvio:
    """
    O que `enviar_dataset` fez: registros lidos, as contagens do servidor e os lotes.

    `lotes_erro` > 0 quer dizer que algo nao chegou (e a carga nao deve ser
    completada); `erros` diz o que, uma mensagem por problema.
    """

    dataset: str
    registros: int = 0
    inserted: int = 0
    updated: int = 0
    duplicates: int = 0
    removed: int = 0
    lotes_ok: int = 0
    lotes_erro: int = 0
    erros: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- ambiente
def url_base() -> str | None:
    """A URL da instalacao do Contextia deste cliente (CONTEXTIA_URL), ou None."""
    base = do_ambiente('CONTEXTIA_URL')
    if base:
        return base.rstrip('/')
    intake = do_ambiente('CONTEXTIA_INTAKE_URL')
    if intake and intake.rstrip('/').endswith(CAMINHO_INTAKE):
        return intake.rstrip('/')[:-len(CAMINHO_INTAKE)]
    return None


def url_destino() -> str | None:
    """O que mostrar ao operador como destino: o intake explicito ou a base."""
    intake = do_ambiente('CONTEXTIA_INTAKE_URL')
    return intake.rstrip('/') if intake else url_base()


def _url_intake() -> str:
    intake = do_ambiente('CONTEXTIA_INTAKE_URL')
    if intake:
        return intake.rstrip('/')
    return exigir_base() + CAMINHO_INTAKE


def exigir_base() -> str:
    """A URL da instalacao (CONTEXTIA_URL); ErroContextia dizendo como definir, se falta."""
    base = url_base()
    if not base:
        raise ErroContextia(
            'CONTEXTIA_URL nao esta definida. Ela e a URL da instalacao do Contextia DESTE'
            ' cliente e nao tem padrao de proposito (um padrao mandaria os dados para outro'
            ' cliente). Defina CONTEXTIA_URL=https://<instalacao> no ambiente do servico.')
    return base


def _chave(api_key: str | None) -> str:
    chave = api_key or do_ambiente('CONTEXTIA_API_KEY')
    if not chave:
        raise ErroAutenticacao('nenhuma chave de projeto: passe api_key ou defina'
                               ' CONTEXTIA_API_KEY (arquivo de chaves do provisionar.py).')
    return chave


# ---------------------------------------------------------------- nomes
def normalizar_dataset(nome: object) -> str:
    """'Títulos a Receber' -> 'titulos_a_receber': ASCII minusculo, deterministico."""
    sem_acento = unicodedata.normalize('NFKD', str(nome)).encode('ascii', 'ignore').decode()
    normalizado = re.sub(r'[^a-z0-9]+', '_', sem_acento.lower()).strip('_')
    if not normalizado:
        raise ValueError('nome de dataset %r fica vazio depois de normalizado; use letras'
                         ' ou numeros no "dataset" do mapeamento.' % (nome,))
    return normalizado[:120]


def gerar_sync() -> str:
    """Id de ciclo de carga: ordenavel pelo horario (UTC) e unico."""
    agora = datetime.datetime.now(datetime.timezone.utc)
    return agora.strftime('%Y%m%dT%H%M%SZ') + '-' + secrets.token_hex(4)


def verificar_assinatura(segredo: str | None, corpo: bytes | str,
                         cabecalho: str | None) -> bool:
    """
    Confere a assinatura de uma entrega de webhook (cabecalho X-Contextia-Assinatura).

    `corpo` sao os BYTES crus recebidos (antes de qualquer parse); `cabecalho`
    e 'sha256=<hex>'. Devolve True/False; comparacao em tempo constante.
    """
    if not segredo or not cabecalho or not cabecalho.startswith('sha256='):
        return False
    if isinstance(corpo, str):
        corpo = corpo.encode('utf-8')
    esperado = hmac.new(segredo.encode('utf-8'), corpo, hashlib.sha256).hexdigest()
    return hmac.compare_digest(esperado, cabecalho[len('sha256='):].strip().lower())


# ---------------------------------------------------------------- respostas
def detalhe_da_resposta(resposta: requests.Response) -> str:
    """O motivo que o servidor deu, em uma linha (422 do FastAPI vira 'campo: problema')."""
    try:
        corpo = resposta.json()
    except ValueError:
        return (resposta.text or '').strip()[:300] or 'sem corpo'
    detalhe = corpo.get('detail', corpo) if isinstance(corpo, dict) else corpo
    if isinstance(detalhe, list):
        partes = []
        for item in detalhe[:5]:
            if isinstance(item, dict):
                caminho = '.'.join(str(p) for p in item.get('loc', ()) if p != 'body')
                partes.append('%s: %s' % (caminho, item.get('msg')))
            else:
                partes.append(str(item))
        return '; '.join(partes)
    return str(detalhe)


def json_da_resposta(resposta: requests.Response) -> Any:
    """O corpo JSON da resposta; ErroContextia (a URL aponta para o Contextia?) se nao e."""
    try:
        return resposta.json()
    except ValueError:
        raise ErroContextia('%s respondeu HTTP %d sem JSON (%s). CONTEXTIA_URL aponta para'
                            ' o Contextia?' % (servidor(resposta.url or ''),
                                               resposta.status_code,
                                               (resposta.text or '')[:120].strip())) from None


def _codigo(resposta: requests.Response) -> Any:
    try:
        return resposta.json().get('erro')
    except (ValueError, AttributeError):
        return None


def _quem(escopo: object, dataset: str | None = None) -> str:
    alvo = 'do escopo %s' % escopo if escopo is not None else 'do projeto desta chave'
    return alvo + (' (dataset %s)' % dataset if dataset else '')


def _erro_autenticacao(resposta: requests.Response, escopo: object, dataset: str | None,
                       chave: str) -> ErroAutenticacao:
    return ErroAutenticacao(
        'Contextia recusou a chave %s [%s]: HTTP %d, %s. Correcao: confira o arquivo'
        ' de chaves ou emita outra (provisionar.py --somente-escopo=%s).'
        % (_quem(escopo, dataset), mascarar_chave(chave), resposta.status_code,
           mascarar(detalhe_da_resposta(resposta), chave).rstrip('.'),
           escopo if escopo is not None else '<escopo>'))


# ---------------------------------------------------------------- intake
def _lotes(registros: Iterable[T], tamanho: int) -> Iterator[list[T]]:
    iterador = iter(registros)
    while True:
        lote = list(itertools.islice(iterador, tamanho))
        if not lote:
            return
        yield lote


def _falha(resultado: ResultadoEnvio, mensagem: str, logger: logging.Logger) -> None:
    """Um problema fora de um lote que conta como lote falho (o envio nao vale inteiro)."""
    resultado.lotes_erro += 1
    resultado.erros.append(mensagem)
    logger.error('%s', mensagem)


def enviar_dataset(nome: str, registros: Iterable[Mapping[str, Any]], *,
                   key: str | None = None, description: str | None = None,
                   fields: Mapping[str, str] | None = None, group: str | None = None,
                   chunk: int | None = padroes.CHUNK, api_key: str | None = None,
                   logger: logging.Logger | None = None, sync: str | None = None,
                   remove: Iterable[Any] | None = None, escopo: object = None,
                   deve_parar: Callable[[], bool] | None = None) -> ResultadoEnvio:
    """
    Envia `registros` (qualquer iteravel de dicts) ao dataset `nome`, em lotes.

    Devolve um ResultadoEnvio. Lote recusado (422, 409, 500...) conta em
    `lotes_erro` e o envio segue; servidor que nao responde ou segue
    sobrecarregado depois das retentativas conta o lote em `lotes_erro` e
    INTERROMPE o envio (sem ler o resto da origem) -- a politica inteira esta
    em transporte.enviar_em_lotes. So 401/403 levanta (ErroAutenticacao): com
    chave errada nenhum lote passaria. `sync` marca os lotes como parte de um
    ciclo de carga (parte 1, 2, ...); quem chama decide se completa. Com `sync`
    e nenhum registro, um lote vazio e enviado para o servidor conhecer o sync.
    `remove` (valores de key) vai no primeiro lote; o servidor precisa anunciar
    `remove` em capacidades(). `escopo` so aparece em mensagens de erro.
    `deve_parar()`, se dado, e olhado nas esperas entre retentativas: parada
    pedida conta o lote como falho e interrompe o envio.
    """
    log = preparar_logger(logger)
    chave = _chave(api_key)
    url = _url_intake()
    dataset = normalizar_dataset(nome)
    tamanho = max(1, int(chunk or padroes.CHUNK))
    resultado = ResultadoEnvio(dataset)
    base: dict[str, Any] = {'dataset': dataset}
    for campo, valor in (('key', key), ('description', description), ('fields', fields),
                         ('group', group)):
        if valor is not None:
            base[campo] = valor
    partes = itertools.count(1)
    pendente_remover = list(remove) if remove else None
    if pendente_remover and not _suporta_remove(chave, resultado, log):
        # O Contextia de hoje nao tem `remove`: os registros seguem, a exclusao
        # nao, e isso e falha (quem chamou nao pode dar a exclusao por feita).
        _falha(resultado, 'dataset %s: o servidor nao suporta `remove` (capacidades); %d'
                          ' exclusao(oes) NAO enviada(s) -- ficam para a carga completa'
                          ' (sync + complete).' % (dataset, len(pendente_remover)), log)
        pendente_remover = None

    def montar(lote: list[dict[str, Any]]) -> bytes:
        envelope: dict[str, Any] = dict(base, records=lote)
        if sync is not None:
            envelope['sync'] = {'id': sync, 'part': next(partes)}
        if pendente_remover:
            envelope['remove'] = pendente_remover
        return json.dumps(envelope, ensure_ascii=False, separators=(',', ':'),
                          allow_nan=False).encode('utf-8')

    def aceitar(resposta: requests.Response, contexto: str) -> list[str]:
        nonlocal pendente_remover
        if resposta.status_code in (401, 403):
            raise _erro_autenticacao(resposta, escopo, dataset, chave)
        if resposta.status_code >= 300:
            return ['%s: HTTP %d, %s' % (contexto, resposta.status_code,
                                         mascarar(detalhe_da_resposta(resposta), chave))]
        try:
            contagens = resposta.json()
        except ValueError:
            # 200 que nao e JSON: proxy ou pagina de erro no caminho, nao o intake.
            return ['%s: HTTP %d sem JSON de contagens (%s) -- CONTEXTIA_URL aponta'
                    ' para o intake?' % (contexto, resposta.status_code,
                                          (resposta.text or '')[:120].strip())]
        resultado.inserted += int(contagens.get('inserted') or 0)
        resultado.updated += int(contagens.get('updated') or 0)
        resultado.duplicates += int(contagens.get('duplicates') or 0)
        resultado.removed += int(contagens.get('removed') or 0)
        pendente_remover = None
        return []

    lidos = 0
    recusado: ErroSerializacao | None = None

    def lotes() -> Iterator[list[dict[str, Any]]]:
        nonlocal lidos, recusado
        try:
            for lote in _lotes((serializar_registro(r) for r in registros), tamanho):
                lidos += 1
                yield lote
        except ErroSerializacao as erro:
            # Registro que nao vira JSON exato: os lotes seguintes nao saem, e a
            # carga conta como falha (nunca sera completada).
            recusado = erro
            return
        if lidos == 0 and (sync is not None or pendente_remover):
            # Carga vazia: um lote vazio para o servidor conhecer o sync.
            yield []

    enviar_em_lotes(lotes(), url, autorizacao=chave, montar=montar, aceitar=aceitar,
                    rotulo='dataset %s' % dataset, balanco=resultado, logger=log,
                    deve_parar=deve_parar)
    if recusado is not None:
        _falha(resultado, 'dataset %s, depois do lote %d: %s' % (dataset, lidos, recusado),
               log)
    return resultado


def _suporta_remove(chave: str, resultado: ResultadoEnvio, logger: logging.Logger) -> bool:
    try:
        return bool(capacidades(chave).get('remove'))
    except ErroAutenticacao:
        raise
    except ErroContextia as erro:
        resultado.erros.append('capacidades: %s' % erro)
        logger.error('capacidades: %s', erro)
        return False


def completar(nome: str, sync: str, *, api_key: str | None = None,
              max_remocao: float | None = None, escopo: object = None) -> dict[str, Any]:
    """
    Fecha o ciclo de carga `sync`: o servidor remove do dataset o que o sync nao
    trouxe. `max_remocao` (0..1) e o teto: acima dele o servidor recusa, nada e
    removido e levanta ErroRemocaoAcimaDoTeto.
    """
    chave = _chave(api_key)
    dataset = normalizar_dataset(nome)
    pedido: dict[str, Any] = {'dataset': dataset, 'sync': sync}
    if max_remocao is not None:
        pedido['max_removal'] = float(max_remocao)
    contexto = 'complete do dataset %s (sync %s)' % (dataset, sync)
    resposta = pedir('POST', _url_intake() + '/complete', autorizacao=chave, corpo=pedido,
                     contexto=contexto)
    if resposta.status_code in (401, 403):
        raise _erro_autenticacao(resposta, escopo, dataset, chave)
    if resposta.status_code == 409 and _codigo(resposta) == 'remocao_acima_do_teto':
        raise ErroRemocaoAcimaDoTeto('%s %s: %s' % (contexto, _quem(escopo),
                                                       detalhe_da_resposta(resposta)))
    if resposta.status_code >= 300:
        raise ErroContextia('%s %s: HTTP %d, %s' % (
            contexto, _quem(escopo), resposta.status_code,
            mascarar(detalhe_da_resposta(resposta), chave)))
    fechamento: dict[str, Any] = json_da_resposta(resposta)
    return fechamento


def _get(caminho: str, chave: str, contexto: str, escopo: object = None,
         params: dict[str, Any] | None = None) -> Any:
    resposta = pedir('GET', exigir_base() + caminho, autorizacao=chave, params=params,
                     contexto=contexto)
    if resposta.status_code in (401, 403):
        raise _erro_autenticacao(resposta, escopo, None, chave)
    if resposta.status_code >= 300:
        raise ErroContextia('%s: HTTP %d, %s' % (contexto, resposta.status_code,
                                                 mascarar(detalhe_da_resposta(resposta),
                                                          chave)))
    return json_da_resposta(resposta)


def capacidades(api_key: str | None = None) -> dict[str, Any]:
    """O que o servidor suporta (ex.: {'remove': True, ...}). Servidor antigo: {}."""
    resposta = pedir('GET', exigir_base() + '/api/v1/capacidades',
                     autorizacao=api_key or do_ambiente('CONTEXTIA_API_KEY') or '',
                     contexto='capacidades')
    if resposta.status_code == 404:
        # O Contextia de hoje nao tem a rota: nada alem do basico.
        return {'remove': False}
    if resposta.status_code >= 300:
        raise ErroContextia('capacidades: HTTP %d, %s' % (resposta.status_code,
                                                          detalhe_da_resposta(resposta)))
    anunciadas: dict[str, Any] = json_da_resposta(resposta)
    return anunciadas


def quem_sou(api_key: str | None = None, escopo: object = None) -> dict[str, Any]:
    """{'project_id', 'external_id', 'name'} do projeto da chave; ErroAutenticacao se nao vale."""
    dono: dict[str, Any] = _get('/api/v1/projeto', _chave(api_key), 'identificar a chave',
                                escopo)
    return dono


def listar_datasets(api_key: str | None = None) -> list[dict[str, Any]]:
    """[{dataset, records, key, description, fields, group, updated_at}] do projeto."""
    datasets: list[dict[str, Any]] = _get('/api/v1/datasets', _chave(api_key),
                                          'listar datasets')['datasets']
    return datasets


def ler_registros(nome: str, api_key: str | None = None,
                  pagina: int = 1000) -> Iterator[dict[str, Any]]:
    """Itera os registros do dataset como foram guardados, pagina a pagina."""
    chave = _chave(api_key)
    dataset = normalizar_dataset(nome)
    apos = 0
    while True:
        resposta = _get('/api/v1/datasets/%s/registros' % dataset, chave,
                        'ler registros de %s' % dataset,
                        params={'after': apos, 'limit': pagina})
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
        raise ValueError('valor %r nao e base64 valido: %s' % (texto, erro)) from None
