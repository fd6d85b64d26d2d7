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

Como o pedido chega la -- Session, a política de retentativas com prazo, o 413
que divide o lote, a sobrecarga que interrompe o envio, TLS, mascara de chaves
-- está em transporte.py; o provisionamento (token de admin), em admin.py.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime
import decimal
import hashlib
import hmac
import itertools
import json
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from contextia_sync import padroes
from contextia_sync.fila.diretorio import ErroFilaCheia
from contextia_sync.fila.quarentena import (
    DestinoDeRecusas,
    Desfecho,
    ItemQuarentena,
    descrever,
    identidade,
)
# O nome do dataset e regra do mapeamento; `cliente.normalizar_dataset` continua valendo.
from contextia_sync.mapeamento import normalizar_dataset as normalizar_dataset
from contextia_sync.intake.serializacao import (
    ErroSerializacao,
    PlanoFixo,
    Serializador,
    conversor_de_linha,
    corpo_de_registros,
    corpo_direto,
    json_canonico,
    serializar_parcial,
    valor_json,
)
from contextia_sync.intake.transporte import (
    STATUS_RECUSA_DO_REGISTRO,
    STATUS_RETENTAVEIS,
    ErroContextia,
    ErroDestino,
    ErroIndisponivel,
    RespostaInvalida,
    autorizacao_enviada,
    conferir_url,
    do_ambiente,
    enviar_em_lotes,
    mascarar,
    mascarar_chave,
    pedir,
    prazo_do_pedido,
    preparar_logger,
    servidor,
    texto_da_resposta,
)

try:
    import orjson as _orjson
    _Fragmento: Any = _orjson.Fragment
except ImportError:                      # sem o orjson: sem registros prontos
    _Fragmento = None

if TYPE_CHECKING:
    import requests

CAMINHO_INTAKE = '/api/v1/intake'
CABECALHO_ASSINATURA = 'X-Contextia-Assinatura'

T = TypeVar('T')


class ErroAutenticacao(ErroContextia):
    """Chave de projeto ou token de admin recusado (401/403)."""


class ErroRemocaoAcimaDoTeto(ErroContextia):
    """O `complete` removeria mais que o teto pedido; o servidor não removeu nada."""


@dataclass
class ResultadoEnvio:
    """
    O que `enviar_dataset` fez: registros lidos, as contagens do servidor e os lotes.

    `lotes_erro` > 0 quer dizer que algo não chegou (a marca não avança, a
    carga não deve ser completada); `erros` diz o que, uma mensagem por problema.

    Com a quarentena: `quarentenados` e quantos registros desta chamada estão
    na quarentena em vez de no Contextia (recusados de vez agora, ou já
    guardados e iguais), com um motivo por registro em `quarentena_motivos`.
    Sem `sync` eles NÃO contam em `lotes_erro`: a marca avança e o registro
    espera na quarentena. Com `sync` contam (uma falha a mais em `lotes_erro`):
    a carga não está completa, e um `complete` removeria esses registros.
    `quarentena_superados`: itens que saíram da quarentena porque uma versão do
    mesmo registro foi entregue agora. `interrompido`: o servidor não respondeu
    (ou respondeu algo que não é do intake) e o resto da origem não foi lido.
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
    quarentenados: int = 0
    quarentena_motivos: list[str] = field(default_factory=list)
    quarentena_superados: int = 0
    interrompido: bool = False


# ---------------------------------------------------------------- ambiente
def url_base() -> str | None:
    """A URL da instalação do Contextia deste cliente (CONTEXTIA_URL), ou None."""
    base = do_ambiente('CONTEXTIA_URL')
    if base:
        return base.rstrip('/')
    intake = do_ambiente('CONTEXTIA_INTAKE_URL')
    if intake and intake.rstrip('/').endswith(CAMINHO_INTAKE):
        return intake.rstrip('/')[:-len(CAMINHO_INTAKE)]
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
                % (servidor(intake), servidor(base)))
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
            ' cliente). Defina CONTEXTIA_URL=https://<instalação> no ambiente do serviço.')
    return base


def _chave(api_key: str | None) -> str:
    chave = api_key or do_ambiente('CONTEXTIA_API_KEY')
    if not chave:
        raise ErroAutenticacao('nenhuma chave de projeto: passe api_key ou defina'
                               ' CONTEXTIA_API_KEY (arquivo de chaves do provisionar.py).')
    return chave


# ---------------------------------------------------------------- nomes
def gerar_sync() -> str:
    """Id de ciclo de carga: ordenável pelo horário (UTC) e único."""
    agora = datetime.datetime.now(datetime.timezone.utc)
    return agora.strftime('%Y%m%dT%H%M%SZ') + '-' + secrets.token_hex(4)


def verificar_assinatura(segredo: str | None, corpo: bytes | str,
                         cabecalho: str | None) -> bool:
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
    return hmac.compare_digest(esperado, cabecalho[len('sha256='):].strip().lower())


# ---------------------------------------------------------------- respostas
def detalhe_da_resposta(resposta: requests.Response) -> str:
    """
    O motivo que o servidor deu, em uma linha (422 do FastAPI vira 'campo:
    problema'), mascarado como todo texto do servidor (transporte.texto_da_resposta).
    """
    try:
        corpo = resposta.json()
    except ValueError:
        return texto_da_resposta(resposta, 300) or 'sem corpo'
    detalhe = corpo.get('detail', corpo) if isinstance(corpo, dict) else corpo
    if isinstance(detalhe, list):
        partes = []
        for item in detalhe[:5]:
            if isinstance(item, dict):
                caminho = '.'.join(str(p) for p in item.get('loc', ()) if p != 'body')
                partes.append('%s: %s' % (caminho, item.get('msg')))
            else:
                partes.append(str(item))
        detalhe = '; '.join(partes)
    # Um JSON tambem pode ecoar o pedido (cabecalhos, o segredo do webhook).
    return mascarar(' '.join(str(detalhe).split()), autorizacao_enviada(resposta))[:300]


def json_da_resposta(resposta: requests.Response) -> Any:
    """O corpo JSON da resposta; ErroContextia (a URL aponta para o Contextia?) se não é."""
    try:
        return resposta.json()
    except ValueError:
        raise ErroContextia('%s respondeu HTTP %d sem JSON (%s). CONTEXTIA_URL aponta para'
                            ' o Contextia?' % (servidor(resposta.url or ''),
                                               resposta.status_code,
                                               texto_da_resposta(resposta))) from None


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
        'Contextia recusou a chave %s [%s]: HTTP %d, %s. Correção: confira o arquivo'
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
    """Um problema fora de um lote que conta como lote falho (o envio não vale inteiro)."""
    resultado.lotes_erro += 1
    resultado.erros.append(mensagem)
    logger.error('%s', mensagem)


_CONTAGENS = ('inserted', 'updated', 'duplicates')


def _inteiro(valor: object) -> bool:
    return isinstance(valor, int) and not isinstance(valor, bool) and valor >= 0


def _contagens(resposta: requests.Response, enviados: int, contexto: str) -> dict[str, int]:
    """As contagens de um 2xx do intake; RespostaInvalida se o corpo não é isso."""
    try:
        corpo = resposta.json()
    except ValueError:
        # 200 que nao e JSON: proxy ou pagina de erro no caminho, nao o intake.
        raise RespostaInvalida(
            '%s: HTTP %d sem JSON de contagens (%s) -- CONTEXTIA_URL aponta para o'
            ' intake? O lote conta como falho (pode ter sido gravado ou não; o reenvio'
            ' é idempotente)' % (contexto, resposta.status_code,
                                 texto_da_resposta(resposta))) from None
    faltam = list(_CONTAGENS)
    if isinstance(corpo, dict):
        faltam = [c for c in _CONTAGENS if not _inteiro(corpo.get(c))]
        faltam += [c for c in ('received', 'removed') if c in corpo
                   and not _inteiro(corpo[c])]
    if faltam:
        raise RespostaInvalida(
            '%s: HTTP %d com um corpo que não são as contagens do intake (%s; sem inteiro'
            ' em %s) -- CONTEXTIA_URL aponta para o intake? O lote conta como falho (pode'
            ' ter sido gravado ou não; o reenvio é idempotente)'
            % (contexto, resposta.status_code, texto_da_resposta(resposta),
               ', '.join(faltam)))
    if 'received' in corpo and corpo['received'] != enviados:
        raise RespostaInvalida(
            '%s: o intake diz que recebeu %d registro(s) de %d enviados; o lote conta como'
            ' falho (o reenvio é idempotente)' % (contexto, corpo['received'], enviados))
    return {c: int(corpo.get(c) or 0) for c in _CONTAGENS + ('removed',)}


def _legivel(registro: Any) -> Any:
    """O registro como dict, também o pronto (o JSON dele) de `preparador_de_prontos`."""
    if _Fragmento is not None and isinstance(registro, _Fragmento):
        return json.loads(_orjson.dumps(registro))     # o Fragment so se le assim
    return registro


def preparador_de_prontos(familias: Mapping[str, str] | None
                          ) -> Callable[[Mapping[str, Any]], Any] | None:
    """
    A função que faz de uma linha da origem o registro pronto (o JSON dele, do
    jeito que `enviar_dataset` o poria no corpo: o mesmo plano por coluna de
    `familias`, ou pela forma, e o mesmo `corpo_de_registros`), para
    `enviar_dataset(..., prontos=True)`. Levanta ErroSerializacao como o envio.
    None sem o orjson (o pronto é um `orjson.Fragment`): envie as linhas.
    """
    if _Fragmento is None:
        return None
    fragmento = _Fragmento
    converter = conversor_de_linha(PlanoFixo(dict(familias)) if familias else None,
                                   Serializador(puro=False))

    def preparar(bruto: Mapping[str, Any]) -> Any:
        return fragmento(corpo_de_registros([converter(bruto)])[1:-1])
    return preparar


def _motivo_da_recusa(resposta: requests.Response, registro: Mapping[str, Any],
                      chave: str) -> str:
    """Por que o intake recusou um registro sozinho, com a correção (413: o tamanho dele)."""
    registro = _legivel(registro)
    detalhe = mascarar(detalhe_da_resposta(resposta), chave).strip()
    if resposta.status_code != 413:
        return 'HTTP %d: %s' % (resposta.status_code, detalhe)
    bytes_registro = len(json.dumps(registro, ensure_ascii=False, separators=(',', ':'),
                                    default=str).encode('utf-8'))
    tamanhos = {coluna: len(json.dumps(valor, ensure_ascii=False, default=str).encode('utf-8'))
                for coluna, valor in registro.items()}
    maior = max(tamanhos, key=lambda coluna: tamanhos[coluna]) if tamanhos else None
    return ('HTTP 413: o registro SOZINHO tem %d bytes e passa do limite de bytes do intake'
            ' (o servidor disse: %s). Diminuir o chunk não resolve. Correção: uma view que'
            ' trunque ou exclua a coluna grande%s -- ex.: LEFT/SUBSTRING na view, ou a'
            ' coluna fora de `columns` no mapeamento.'
            % (bytes_registro, detalhe.rstrip('.'),
               ' (a maior deste registro: %r, %d bytes)' % (maior, tamanhos[maior])
               if maior is not None else ''))


def enviar_dataset(nome: str, registros: Iterable[Mapping[str, Any]], *,
                   key: str | None = None, description: str | None = None,
                   fields: Mapping[str, str] | None = None, group: str | None = None,
                   chunk: int | None = padroes.CHUNK, api_key: str | None = None,
                   logger: logging.Logger | None = None, sync: str | None = None,
                   remove: Iterable[Any] | None = None, escopo: object = None,
                   deve_parar: Callable[[], bool] | None = None,
                   quarentena: DestinoDeRecusas | None = None,
                   em_voo: int = 1,
                   familias: Mapping[str, str] | None = None,
                   parte: int = 1, prontos: bool = False) -> ResultadoEnvio:
    """
    Envia `registros` (qualquer iterável de dicts) ao dataset `nome`, em lotes.

    Devolve um ResultadoEnvio; nada do que o servidor responde levanta, só
    401/403 (ErroAutenticacao: com chave errada nenhum lote passaria). Lote
    recusado (422, 409, 500...) conta em `lotes_erro` e o envio segue;
    servidor que não responde, segue sobrecarregado depois das retentativas,
    ou responde 2xx que não é do intake (sem JSON, sem as contagens) conta o
    lote em `lotes_erro` e INTERROMPE o envio (sem ler o resto da origem) -- a
    política inteira está em transporte.enviar_em_lotes. `sync` marca os lotes
    como parte de um ciclo de carga (parte 1, 2, ...); quem chama decide se
    completa. Com `sync` e nenhum registro, um lote vazio e enviado para o
    servidor conhecer o sync. `remove` (valores de key) vai no primeiro lote;
    o servidor precisa anunciar `remove` em capacidades(). `escopo` aparece nas
    mensagens e identifica a empresa na quarentena. `deve_parar()`, se dado, e
    olhado nas esperas entre retentativas: parada pedida conta o lote como
    falho e interrompe o envio.

    `quarentena` (ex.: fila.quarentena.Quarentena): um registro que o intake
    recusa DE VEZ (400/413/422 sobre ele, ou um valor sem JSON) e isolado --
    o lote e dividido até ele ficar sozinho, os outros são entregues -- e
    guardado la com o motivo; o lote conta como ok (sem `sync`, a marca
    avança). Falha passageira (5xx, 429, timeout, conexão) nunca vai para a
    quarentena. Quarentena cheia: o lote falha e a mensagem diz como
    esvaziar. Registro já guardado e igual não é reenviado (a releitura da
    folga não reabre a divisão a cada ciclo); registro entregue tira da
    quarentena a versão velha dele. Sem quarentena, a recusa e um lote falho,
    como sempre foi. Com `sync`, registro na quarentena faz a carga falhar
    (ver ResultadoEnvio).

    `em_voo` (a carga completa passa padroes.LOTES_EM_VOO): até tantos lotes
    esperando resposta enquanto os seguintes são lidos e montados. Só vale com
    `sync` e sem `remove` nem quarentena; fora disso os lotes vão um de cada vez:
    no ao vivo duas versões da mesma key podem estar em lotes seguidos, e com
    lotes em voo a mais nova poderia chegar antes e ser sobrescrita pela velha.

    `familias` ({coluna: família}, o `origem.generico.familias` de um fetch):
    os registros SÃO as linhas daquele fetch (dicts dele, com essas colunas), e
    o conversor de cada coluna e escolhido uma vez pelo tipo -- as linhas são
    convertidas no lugar. Sem ele (ou com quarentena), pela forma de cada registro.

    O corpo vai comprimido (gzip) só se o intake anuncia `compressão: ["gzip"]`
    em capacidades (consultado uma vez a cada padroes.VALIDADE_CAPACIDADES s).

    `parte`: o número (`sync.part`) do primeiro lote. A carga de todas as
    empresas (carga/todas.py) manda cada lote de uma empresa numa chamada, com
    o mesmo `sync`: a numeração continua, e a partir da parte 2 o envio já é de
    muitos lotes (a consulta do gzip vale a pena desde o primeiro pedido).
    `prontos`: os registros já são o JSON de cada um, de `preparador_de_prontos`
    (a carga de todas as empresas serializa cada linha ao lê-la e guarda só o
    texto até o lote sair); vão ao corpo como estão. Sem quarentena.
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
    partes = itertools.count(max(1, int(parte)))
    # A chave a remover na mesma forma JSON em que o registro a levou (Decimal como
    # texto, data ISO): o servidor remove pela chave como a guardou.
    pendente_remover = [valor_json(v, key or 'key') for v in remove] if remove else None
    if pendente_remover and not _suporta_remove(chave, resultado, log):
        # O Contextia de hoje nao tem `remove`: os registros seguem, a exclusao
        # nao, e isso e falha (quem chamou nao pode dar a exclusao por feita).
        _falha(resultado, 'dataset %s: o servidor não suporta `remove` (capacidades); %d'
                          ' exclusao(ões) NÃO enviada(s) -- ficam para a carga completa'
                          ' (sync + complete).' % (dataset, len(pendente_remover)), log)
        pendente_remover = None
    if sync is None or pendente_remover or quarentena is not None:
        em_voo = 1
    # gzip so para quem anuncia. A pergunta (capacidades) so e feita depois do
    # primeiro lote aceito e se ha outro lote: o envio de um lote so (o ao vivo,
    # quase sempre) nao paga um pedido a mais, e um destino que nem e o intake
    # nao recebe pedido nenhum alem do primeiro lote.
    gzip_decidido: list[bool] = []
    trava_gzip = threading.Lock()
    # A continuacao de um sync (parte > 1) ja e um envio de muitos lotes.
    aceitou = parte > 1

    def comprimir() -> bool:
        if gzip_decidido:
            return gzip_decidido[0]
        with trava_gzip:
            if not gzip_decidido:
                anuncia = _anuncia_gzip(chave, url, consultar=aceitou)
                if anuncia is None:
                    return False
                gzip_decidido.append(anuncia)
        return gzip_decidido[0]
    # So os nomes dos arquivos: sem nada guardado, nenhuma identidade e calculada.
    guardadas: set[str] = quarentena.identidades() if quarentena is not None else set()
    novos_na_quarentena = 0

    def qual(registro: Mapping[str, Any]) -> str:
        registro = _legivel(registro)
        valor = registro.get(key) if key else None
        if isinstance(valor, decimal.Decimal):
            # A key como o registro a leva no JSON (o plano fixo a deixa crua).
            with contextlib.suppress(ErroSerializacao):
                valor = valor_json(valor, key)
        return descrever(dataset, escopo, key, valor)

    # O corpo dos registros do lote que `lotes_fixos` acabou de dar: (lote, corpo).
    pronto: list[Any] = [None, b'']

    def montar(lote: list[dict[str, Any]]) -> bytes:
        envelope: dict[str, Any] = dict(base)
        if sync is not None:
            envelope['sync'] = {'id': sync, 'part': next(partes)}
        if pendente_remover:
            envelope['remove'] = pendente_remover
        # O envelope pelo json de sempre; os registros (quase todo o corpo) pelo
        # caminho rapido, encaixados no fim do objeto.
        cabeca = json.dumps(envelope, ensure_ascii=False, separators=(',', ':'),
                            allow_nan=False).encode('utf-8')
        if pronto[0] is lote:
            registros_json: bytes = pronto[1]
            pronto[:] = [None, b'']
        elif fixo is not None:
            # (Uma metade de um lote do plano fixo, com o Decimal ainda cru.)
            registros_json = corpo_direto(lote) or corpo_de_registros(lote)
        else:
            registros_json = corpo_de_registros(lote)
        return cabeca[:-1] + b',"records":' + registros_json + b'}'

    def aceitar(resposta: requests.Response, contexto: str,
                lote: list[dict[str, Any]]) -> list[str]:
        nonlocal pendente_remover, aceitou
        if resposta.status_code in (401, 403):
            raise _erro_autenticacao(resposta, escopo, dataset, chave)
        if resposta.status_code >= 300:
            if len(lote) == 1 and resposta.status_code in STATUS_RECUSA_DO_REGISTRO:
                # Um registro sozinho: dizer qual e por que (o 413 nao e o chunk).
                return ['%s: %s -- %s' % (contexto, qual(lote[0]),
                                          _motivo_da_recusa(resposta, lote[0], chave))]
            return ['%s: HTTP %d, %s' % (contexto, resposta.status_code,
                                         mascarar(detalhe_da_resposta(resposta), chave))]
        contagens = _contagens(resposta, len(lote), contexto)
        aceitou = True
        resultado.inserted += contagens['inserted']
        resultado.updated += contagens['updated']
        resultado.duplicates += contagens['duplicates']
        resultado.removed += contagens['removed']
        pendente_remover = None
        if guardadas and quarentena is not None:
            for registro in lote:
                ident = identidade(dataset, escopo, key, registro)
                if ident in guardadas and quarentena.superar(ident, dataset, escopo):
                    guardadas.discard(ident)
                    resultado.quarentena_superados += 1
        return []

    def guardar(registro: dict[str, Any], motivo: str, status_http: int | None = None,
                invalidos: Mapping[str, str] | None = None) -> list[str]:
        nonlocal novos_na_quarentena
        assert quarentena is not None
        try:
            quarentena.guardar(dataset, escopo, key, registro, motivo, invalidos=invalidos,
                               status_http=status_http)
        except ErroFilaCheia as cheia:
            return [str(cheia)]
        except OSError as erro:
            return ['%s: recusado de vez (%s) e a quarentena não pode ser gravada (%s): o'
                    ' lote conta como falho e a marca não avança'
                    % (qual(registro), motivo[:200], erro)]
        guardadas.add(identidade(dataset, escopo, key, registro))
        resultado.quarentenados += 1
        resultado.quarentena_motivos.append('%s: %s' % (qual(registro), motivo))
        novos_na_quarentena += 1
        return []

    def isolar(registro: dict[str, Any], resposta: requests.Response,
               contexto: str) -> list[str]:  # noqa: ARG001 - assinatura de enviar_em_lotes
        return guardar(registro, _motivo_da_recusa(resposta, registro, chave),
                       resposta.status_code)

    def ja_guardado(registro: dict[str, Any], invalidos: Mapping[str, str]) -> bool:
        """O mesmo registro, igual, já está na quarentena: não reenvia nem reabre a divisão."""
        if not guardadas or quarentena is None:
            return False
        ident = identidade(dataset, escopo, key, registro)
        if ident not in guardadas:
            return False
        item = quarentena.guardado(ident)
        if item is None or item.invalidos != dict(invalidos) or (
                json_canonico(item.registro) != json_canonico(registro)):
            return False
        resultado.registros += 1
        resultado.quarentenados += 1
        resultado.quarentena_motivos.append('%s: já estava na quarentena desde %s (%s)'
                                            % (qual(registro), item.desde, item.motivo))
        return True

    lidos = 0
    recusado: str | None = None
    # Com a quarentena os registros viram so tipos JSON (identidade, hash
    # canonico e o arquivo dela os leem); sem ela, data e UUID ficam para o orjson.
    serializador = Serializador(puro=quarentena is not None)
    # O plano fixo (linhas de um fetch): `fixo` deixa o Decimal para o corpo
    # (corpo_direto, o lote inteiro de uma vez); `inteiro` converte tudo, para o
    # lote que volta ao caminho de um registro por vez.
    fixo = inteiro = None
    # Os prontos (preparador_de_prontos) ja sao o JSON: nada de plano para eles.
    if familias and quarentena is None and not prontos:
        fixo = PlanoFixo(dict(familias), decimal_no_corpo=True)
        inteiro = PlanoFixo(dict(familias))

    def serializados(fonte: Iterable[Any]) -> Iterator[dict[str, Any]]:
        nonlocal lidos, recusado
        if prontos and quarentena is None:
            for json_pronto in fonte:
                lidos += 1
                yield json_pronto  # type: ignore[misc]  # o JSON do registro (Fragment)
            return
        converter = conversor_de_linha(inteiro, serializador)
        for bruto in fonte:
            lidos += 1
            try:
                registro = converter(bruto)
            except ErroSerializacao as erro:
                if quarentena is None:
                    # Registro que nao vira JSON exato: os seguintes nao saem, e
                    # a carga conta como falha (nunca sera completada).
                    recusado = ('registro %d da leitura: %s -- os seguintes não foram lidos'
                                ' nem enviados' % (lidos, erro))
                    return
                parcial, invalidos = serializar_parcial(bruto)
                if ja_guardado(parcial, invalidos):
                    continue
                erros = guardar(parcial, 'valor sem JSON: %s' % erro, invalidos=invalidos)
                if erros:
                    recusado = '; '.join(erros)
                    return
                resultado.registros += 1
                continue
            # Sem nada guardado na quarentena (quase sempre), nem a chamada.
            if not guardadas or not ja_guardado(registro, {}):
                yield registro

    def lotes_fixos(plano: PlanoFixo) -> Iterator[list[dict[str, Any]]]:
        """
        Os lotes das linhas de um fetch, cada corpo feito aqui de uma vez
        (corpo_direto, guardado em `pronto` para o `montar`). O lote que não sai
        exato por ali -- um valor sem JSON, um tipo fora do plano -- vai pelo
        caminho de um registro por vez, que diz qual registro e qual coluna, e
        nada depois dele e enviado.
        """
        nonlocal lidos
        iterador = iter(registros)
        converter = plano.registro if plano.plano else None
        while recusado is None:
            lote: list[Any] = list(itertools.islice(iterador, tamanho))
            if not lote:
                return
            corpo = None
            # Todos dicts com as colunas do plano (as linhas do fetch): sem olhar um a um.
            if set(map(type, lote)) == {dict} and set(map(len, lote)) == {plano.colunas}:
                try:
                    if converter is not None:
                        for registro in lote:
                            converter(registro)
                    corpo = corpo_direto(lote)
                except ErroSerializacao:
                    corpo = None
            if corpo is None:
                # (Os conversores do plano devolvem o que ja converteram como esta.)
                convertidos = list(serializados(lote))
                if convertidos:
                    yield convertidos
                continue
            lidos += len(lote)
            pronto[:] = [lote, corpo]
            yield lote

    def lotes() -> Iterator[list[dict[str, Any]]]:
        enviados = 0
        fonte = (lotes_fixos(fixo) if fixo is not None
                 else _lotes(serializados(registros), tamanho))
        for lote in fonte:
            enviados += 1
            yield lote
        if enviados == 0 and recusado is None and (sync is not None or pendente_remover):
            # Carga vazia: um lote vazio para o servidor conhecer o sync.
            yield []

    resultado.interrompido = enviar_em_lotes(
        lotes(), url, autorizacao=chave, montar=montar, aceitar=aceitar,
        rotulo='dataset %s' % dataset, balanco=resultado, logger=log, deve_parar=deve_parar,
        isolar=isolar if quarentena is not None else None, em_voo=max(1, int(em_voo)),
        comprimir=comprimir, primeiro=max(1, int(parte)))
    if recusado is not None:
        _falha(resultado, 'dataset %s, %s' % (dataset, recusado), log)
    if resultado.quarentenados:
        log.warning('dataset %s%s: %d registro(s) na quarentena (%d agora, %d já estavam) --'
                    ' %s', dataset, ' escopo %s' % escopo if escopo is not None else '',
                    resultado.quarentenados, novos_na_quarentena,
                    resultado.quarentenados - novos_na_quarentena,
                    '; '.join(resultado.quarentena_motivos[:3])[:600])
    if sync is not None and resultado.quarentenados:
        # A regra da carga completa: faltou registro, nada de `complete` (ele
        # removeria do Contextia os que estao na quarentena).
        _falha(resultado, 'dataset %s: %d registro(s) na quarentena; a carga (sync %s) NÃO'
                          ' está completa -- complete não deve ser enviado'
               % (dataset, resultado.quarentenados, sync), log)
    return resultado


def reenviar_item(item: ItemQuarentena, *, api_key: str | None,
                  logger: logging.Logger | None = None,
                  deve_parar: Callable[[], bool] | None = None) -> Desfecho:
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
            ' quarentena sozinha quando o ouvinte a entregar'
            % ', '.join(sorted(item.invalidos)))
    if api_key is None and item.escopo is not None:
        return Desfecho.pendente('o escopo %s não tem chave no arquivo de chaves; o item'
                                 ' fica até a empresa ter chave (provisionar.py)' % item.escopo)
    coletor = _Coletor()
    try:
        resultado = enviar_dataset(item.dataset, [item.registro], key=item.chave_coluna,
                                   chunk=1, api_key=api_key, logger=logger,
                                   escopo=item.escopo, deve_parar=deve_parar,
                                   quarentena=coletor)
    except ErroAutenticacao as erro:
        return Desfecho.pendente(str(erro))
    except ErroContextia as erro:
        return Desfecho.falhou(str(erro), interromper=True)
    if coletor.motivos:
        return Desfecho.recusado(coletor.motivos[-1])
    if resultado.lotes_erro:
        return Desfecho.falhou('; '.join(resultado.erros)[:600],
                               interromper=resultado.interrompido)
    return Desfecho.entregue()


class _Coletor:
    """Uma quarentena em memória para o reenvio: guarda as recusas, nada no disco."""

    def __init__(self) -> None:
        self.recusas: list[dict[str, Any]] = []

    @property
    def motivos(self) -> list[str]:
        return [str(recusa['motivo']) for recusa in self.recusas]

    def guardar(self, dataset: str, escopo: object, chave_coluna: str | None,
                registro: Mapping[str, Any], motivo: str, *,
                invalidos: Mapping[str, str] | None = None,
                status_http: int | None = None) -> None:
        self.recusas.append({'dataset': dataset, 'escopo': escopo,
                             'chave_coluna': chave_coluna, 'registro': dict(registro),
                             'motivo': motivo, 'invalidos': dict(invalidos or {}),
                             'status_http': status_http})

    def identidades(self) -> set[str]:
        return set()

    def guardado(self, ident: str) -> ItemQuarentena | None:  # noqa: ARG002 - o protocolo
        return None

    def superar(self, ident: str, dataset: str,  # noqa: ARG002 - o protocolo
                escopo: object) -> bool:  # noqa: ARG002
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


def completar(nome: str, sync: str, *, api_key: str | None = None,
              max_remocao: float | None = None, escopo: object = None) -> dict[str, Any]:
    """
    Fecha o ciclo de carga `sync`: o servidor remove do dataset o que o sync não
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
        # O passageiro que durou o prazo inteiro: o servidor, não este complete.
        erro = ErroIndisponivel if resposta.status_code in STATUS_RETENTAVEIS else ErroContextia
        raise erro('%s %s: HTTP %d, %s' % (
            contexto, _quem(escopo), resposta.status_code,
            mascarar(detalhe_da_resposta(resposta), chave)))
    fechamento: dict[str, Any] = json_da_resposta(resposta)
    return fechamento


def _get(caminho: str, chave: str, contexto: str, escopo: object = None,
         params: dict[str, Any] | None = None,
         deve_parar: Callable[[], bool] | None = None, limite: int | None = None) -> Any:
    # `limite`: bytes da resposta (None: transporte.RESPOSTA_MAXIMA_BYTES).
    resposta = pedir('GET', exigir_base() + caminho, autorizacao=chave, params=params,
                     contexto=contexto, deve_parar=deve_parar, limite=limite)
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
    anunciadas = json_da_resposta(resposta)
    if not isinstance(anunciadas, dict):
        raise ErroContextia('capacidades: HTTP %d com um JSON que não é um objeto (%s).'
                            ' CONTEXTIA_URL aponta para o Contextia?'
                            % (resposta.status_code, texto_da_resposta(resposta)))
    return anunciadas


def quem_sou(api_key: str | None = None, escopo: object = None,
             deve_parar: Callable[[], bool] | None = None) -> dict[str, Any]:
    """{'project_id', 'external_id', 'name'} do projeto da chave; ErroAutenticacao se não vale."""
    dono: dict[str, Any] = _get('/api/v1/projeto', _chave(api_key), 'identificar a chave',
                                escopo, deve_parar=deve_parar)
    return dono


def listar_datasets(api_key: str | None = None) -> list[dict[str, Any]]:
    """[{dataset, records, key, description, fields, group, updated_at}] do projeto."""
    datasets: list[dict[str, Any]] = _get('/api/v1/datasets', _chave(api_key),
                                          'listar datasets')['datasets']
    return datasets


def ler_registros(nome: str, api_key: str | None = None,
                  pagina: int = 1000) -> Iterator[dict[str, Any]]:
    """Itera os registros do dataset como foram guardados, página a página."""
    chave = _chave(api_key)
    dataset = normalizar_dataset(nome)
    apos = 0
    while True:
        resposta = _get('/api/v1/datasets/%s/registros' % dataset, chave,
                        'ler registros de %s' % dataset,
                        params={'after': apos, 'limit': pagina},
                        # Uma página de registros passa do limite das outras respostas.
                        limite=padroes.RESPOSTA_MAXIMA_BYTES_REGISTROS)
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
