"""
Cliente do Contextia: envio em lotes, fechamento de carga, leitura e admin.

O contrato HTTP esta em docs/contrato-intake.md. O que este modulo garante:

  * Ambiente lido NA HORA DA CHAMADA: CONTEXTIA_URL (sem padrao -- um padrao
    mandaria os dados de um cliente para a instalacao de outro),
    CONTEXTIA_INTAKE_URL (opcional, troca so o endpoint do intake),
    CONTEXTIA_API_KEY, CONTEXTIA_ADMIN_TOKEN, CONTEXTIA_CA_BUNDLE.
  * `enviar_dataset` consome qualquer iteravel em lotes de `chunk`, sem
    materializar o dataset, e NUNCA chama `complete`: quem decide e quem
    chamou (carga com lote falho nunca e completada). 413 divide o lote ao meio.
  * Chave nunca em log nem em excecao: so o prefixo mascarado (`ctx_abcd...`).

Como o pedido chega la (Session, retentativas com prazo, TLS, mascara de
chaves) esta em transporte.py; os nomes publicos de la sao reexportados aqui.
"""

import base64
import binascii
import datetime
import hashlib
import hmac
import itertools
import json
import re
import secrets
import unicodedata

from contextia_sync.serializacao import ErroSerializacao, serializar_registro
from contextia_sync.transporte import (  # noqa: F401 - reexportados
    BACKOFF,
    BACKOFF_MAXIMO,
    PRAZO_RETENTATIVAS,
    RETENTATIVAS,
    STATUS_RETENTAVEIS,
    TIMEOUT,
    ErroContextia,
    FiltroDeChaves,
    do_ambiente,
    mascarar,
    mascarar_chave,
    pedir,
    preparar_logger,
    servidor,
)

CAMINHO_INTAKE = '/api/v1/intake'
CABECALHO_ASSINATURA = 'X-Contextia-Assinatura'


class ErroAutenticacao(ErroContextia):
    """Chave de projeto ou token de admin recusado (401/403)."""


class ErroRemocaoAcimaDoTeto(ErroContextia):
    """O `complete` removeria mais que o teto pedido; o servidor nao removeu nada."""


# ---------------------------------------------------------------- ambiente
def url_base():
    """A URL da instalacao do Contextia deste cliente (CONTEXTIA_URL), ou None."""
    base = do_ambiente('CONTEXTIA_URL')
    if base:
        return base.rstrip('/')
    intake = do_ambiente('CONTEXTIA_INTAKE_URL')
    if intake and intake.rstrip('/').endswith(CAMINHO_INTAKE):
        return intake.rstrip('/')[:-len(CAMINHO_INTAKE)]
    return None


def url_destino():
    """O que mostrar ao operador como destino: o intake explicito ou a base."""
    intake = do_ambiente('CONTEXTIA_INTAKE_URL')
    return intake.rstrip('/') if intake else url_base()


def _url_intake():
    intake = do_ambiente('CONTEXTIA_INTAKE_URL')
    if intake:
        return intake.rstrip('/')
    return _exigir_base() + CAMINHO_INTAKE


def _exigir_base():
    base = url_base()
    if not base:
        raise ErroContextia(
            'CONTEXTIA_URL nao esta definida. Ela e a URL da instalacao do Contextia DESTE'
            ' cliente e nao tem padrao de proposito (um padrao mandaria os dados para outro'
            ' cliente). Defina CONTEXTIA_URL=https://<instalacao> no ambiente do servico.')
    return base


def _chave(api_key):
    chave = api_key or do_ambiente('CONTEXTIA_API_KEY')
    if not chave:
        raise ErroAutenticacao('nenhuma chave de projeto: passe api_key ou defina'
                               ' CONTEXTIA_API_KEY (arquivo de chaves do provisionar.py).')
    return chave


# ---------------------------------------------------------------- nomes
def normalizar_dataset(nome):
    """'Títulos a Receber' -> 'titulos_a_receber': ASCII minusculo, deterministico."""
    sem_acento = unicodedata.normalize('NFKD', str(nome)).encode('ascii', 'ignore').decode()
    normalizado = re.sub(r'[^a-z0-9]+', '_', sem_acento.lower()).strip('_')
    if not normalizado:
        raise ValueError('nome de dataset %r fica vazio depois de normalizado; use letras'
                         ' ou numeros no "dataset" do mapeamento.' % (nome,))
    return normalizado[:120]


def gerar_sync():
    """Id de ciclo de carga: ordenavel pelo horario (UTC) e unico."""
    agora = datetime.datetime.now(datetime.timezone.utc)
    return agora.strftime('%Y%m%dT%H%M%SZ') + '-' + secrets.token_hex(4)


def verificar_assinatura(segredo, corpo, cabecalho):
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
def _detalhe(resposta):
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


def _quem(escopo, dataset=None):
    alvo = 'do escopo %s' % escopo if escopo is not None else 'do projeto desta chave'
    return alvo + (' (dataset %s)' % dataset if dataset else '')


def _erro_autenticacao(resposta, escopo, dataset, chave):
    return ErroAutenticacao(
        'Contextia recusou a chave %s [%s]: HTTP %d, %s. Correcao: confira o arquivo'
        ' de chaves ou emita outra (provisionar.py --somente-escopo=%s).'
        % (_quem(escopo, dataset), mascarar_chave(chave), resposta.status_code,
           mascarar(_detalhe(resposta), chave).rstrip('.'), escopo if escopo is not None else '<escopo>'))


# ---------------------------------------------------------------- intake
def _lotes(registros, tamanho):
    iterador = iter(registros)
    while True:
        lote = list(itertools.islice(iterador, tamanho))
        if not lote:
            return
        yield lote


def enviar_dataset(nome, registros, *, key=None, description=None, fields=None, group=None,
                   chunk=500, api_key=None, logger=None, sync=None, remove=None,
                   escopo=None):
    """
    Envia `registros` (qualquer iteravel de dicts) ao dataset `nome`, em lotes.

    Devolve {registros, inserted, updated, duplicates, removed, lotes_ok,
    lotes_erro, erros}. Lote recusado (422, 409, 500...) conta em `lotes_erro`
    e o envio segue; servidor que nao responde ou segue sobrecarregado depois
    das retentativas conta o lote em `lotes_erro` e INTERROMPE o envio (sem ler
    o resto da origem). So 401/403 levanta (ErroAutenticacao): com chave errada
    nenhum lote passaria. `sync` marca os lotes como parte de um ciclo de carga (parte 1,
    2, ...); quem chama decide se completa. Com `sync` e nenhum registro, um
    lote vazio e enviado para o servidor conhecer o sync. `remove` (valores de
    key) vai no primeiro lote; o servidor precisa anunciar `remove` em
    capacidades(). `escopo` so aparece em mensagens de erro.
    """
    logger = preparar_logger(logger)
    chave = _chave(api_key)
    url = _url_intake()
    dataset = normalizar_dataset(nome)
    chunk = max(1, int(chunk or 500))
    resultado = {'dataset': dataset, 'registros': 0, 'inserted': 0, 'updated': 0,
                 'duplicates': 0, 'removed': 0, 'lotes_ok': 0, 'lotes_erro': 0, 'erros': []}
    base = {'dataset': dataset}
    for campo, valor in (('key', key), ('description', description), ('fields', fields),
                         ('group', group)):
        if valor is not None:
            base[campo] = valor
    partes = itertools.count(1)
    pendente_remover = list(remove) if remove else None
    if pendente_remover and not _suporta_remove(chave, resultado, logger):
        # O Contextia de hoje nao tem `remove`: os registros seguem, a exclusao
        # nao, e isso e falha (quem chamou nao pode dar a exclusao por feita).
        mensagem = ('dataset %s: o servidor nao suporta `remove` (capacidades); %d exclusao(oes)'
                    ' NAO enviada(s) -- ficam para a carga completa (sync + complete).'
                    % (dataset, len(pendente_remover)))
        resultado['lotes_erro'] += 1
        resultado['erros'].append(mensagem)
        logger.error('%s', mensagem)
        pendente_remover = None

    indisponivel = False

    def uma_parte(lote, numero_lote):
        """Envia um lote (dividindo em 413). Devolve lista de erros (vazia = ok)."""
        nonlocal pendente_remover, indisponivel
        if indisponivel:
            return ['dataset %s, lote %d: nao enviado (servidor indisponivel)'
                    % (dataset, numero_lote)]
        envelope = dict(base, records=lote)
        if sync is not None:
            envelope['sync'] = {'id': sync, 'part': next(partes)}
        if pendente_remover:
            envelope['remove'] = pendente_remover
        contexto = 'dataset %s, lote %d (%d registros)' % (dataset, numero_lote, len(lote))
        try:
            corpo = json.dumps(envelope, ensure_ascii=False, separators=(',', ':'),
                               allow_nan=False).encode('utf-8')
            resposta = pedir('POST', url, autorizacao=chave, corpo=corpo, contexto=contexto)
        except ErroContextia as erro:
            indisponivel = True
            return [str(erro)]
        if resposta.status_code in (401, 403):
            raise _erro_autenticacao(resposta, escopo, dataset, chave)
        if resposta.status_code == 413 and len(lote) > 1:
            meio = len(lote) // 2
            logger.warning('%s: servidor recusou o tamanho (413); dividindo em %d + %d',
                           contexto, meio, len(lote) - meio)
            return uma_parte(lote[:meio], numero_lote) + uma_parte(lote[meio:], numero_lote)
        if resposta.status_code >= 300:
            # Sobrecarga que nao passou com as retentativas: os proximos lotes
            # tambem nao passariam, e cada um gastaria o prazo inteiro.
            indisponivel = resposta.status_code in STATUS_RETENTAVEIS
            return ['%s: HTTP %d, %s' % (contexto, resposta.status_code,
                                         mascarar(_detalhe(resposta), chave))]
        try:
            contagens = resposta.json()
        except ValueError:
            # 200 que nao e JSON: proxy ou pagina de erro no caminho, nao o intake.
            return ['%s: HTTP %d sem JSON de contagens (%s) -- CONTEXTIA_URL aponta'
                    ' para o intake?' % (contexto, resposta.status_code,
                                          (resposta.text or '')[:120].strip())]
        for campo in ('inserted', 'updated', 'duplicates', 'removed'):
            resultado[campo] += int(contagens.get(campo) or 0)
        pendente_remover = None
        return []

    def contar(erros):
        if erros:
            resultado['lotes_erro'] += 1
            resultado['erros'].extend(erros)
            for erro in erros:
                logger.error('%s', erro)
        else:
            resultado['lotes_ok'] += 1

    numero = 0
    try:
        lotes = _lotes((serializar_registro(r) for r in registros), chunk)
        for numero, lote in enumerate(lotes, 1):
            contar(uma_parte(lote, numero))
            resultado['registros'] += len(lote)
            if indisponivel:
                # Parar de ler a origem: a carga ja falhou e nao sera completada;
                # ler o resto so para descartar custaria a origem e o prazo.
                mensagem = ('dataset %s: envio interrompido depois do lote %d -- o servidor'
                            ' nao respondeu ou recusou por sobrecarga; registros seguintes'
                            ' (se houver) nao foram lidos nem enviados. O proximo ciclo'
                            ' reenvia.' % (dataset, numero))
                resultado['erros'].append(mensagem)
                logger.error('%s', mensagem)
                return resultado
    except ErroSerializacao as erro:
        # Registro que nao vira JSON exato para o envio: os lotes seguintes nao
        # saem, e a carga conta como falha (nunca sera completada).
        contar(['dataset %s, depois do lote %d: %s' % (dataset, numero, erro)])
        return resultado
    if numero == 0 and (sync is not None or pendente_remover):
        # Carga vazia: um lote vazio para o servidor conhecer o sync.
        contar(uma_parte([], 1))
    return resultado


def _suporta_remove(chave, resultado, logger):
    try:
        return bool(capacidades(chave).get('remove'))
    except ErroAutenticacao:
        raise
    except ErroContextia as erro:
        resultado['erros'].append('capacidades: %s' % erro)
        logger.error('capacidades: %s', erro)
        return False


def completar(nome, sync, *, api_key=None, max_remocao=None, escopo=None):
    """
    Fecha o ciclo de carga `sync`: o servidor remove do dataset o que o sync nao
    trouxe. `max_remocao` (0..1) e o teto: acima dele o servidor recusa, nada e
    removido e levanta ErroRemocaoAcimaDoTeto.
    """
    chave = _chave(api_key)
    dataset = normalizar_dataset(nome)
    pedido = {'dataset': dataset, 'sync': sync}
    if max_remocao is not None:
        pedido['max_removal'] = float(max_remocao)
    contexto = 'complete do dataset %s (sync %s)' % (dataset, sync)
    resposta = pedir('POST', _url_intake() + '/complete', autorizacao=chave, corpo=pedido,
                      contexto=contexto)
    if resposta.status_code in (401, 403):
        raise _erro_autenticacao(resposta, escopo, dataset, chave)
    if resposta.status_code == 409 and _codigo(resposta) == 'remocao_acima_do_teto':
        raise ErroRemocaoAcimaDoTeto('%s %s: %s' % (contexto, _quem(escopo),
                                                       _detalhe(resposta)))
    if resposta.status_code >= 300:
        raise ErroContextia('%s %s: HTTP %d, %s' % (contexto, _quem(escopo),
                                                       resposta.status_code,
                                                       mascarar(_detalhe(resposta), chave)))
    return _json(resposta)


def _json(resposta):
    try:
        return resposta.json()
    except ValueError:
        raise ErroContextia('%s respondeu HTTP %d sem JSON (%s). CONTEXTIA_URL aponta para'
                            ' o Contextia?' % (servidor(resposta.url or ''),
                                               resposta.status_code,
                                               (resposta.text or '')[:120].strip())) from None


def _codigo(resposta):
    try:
        return resposta.json().get('erro')
    except (ValueError, AttributeError):
        return None


def _get(caminho, chave, contexto, escopo=None, params=None):
    resposta = pedir('GET', _exigir_base() + caminho, autorizacao=chave, params=params,
                      contexto=contexto)
    if resposta.status_code in (401, 403):
        raise _erro_autenticacao(resposta, escopo, None, chave)
    if resposta.status_code >= 300:
        raise ErroContextia('%s: HTTP %d, %s' % (contexto, resposta.status_code,
                                                 mascarar(_detalhe(resposta), chave)))
    return _json(resposta)


def capacidades(api_key=None):
    """O que o servidor suporta (ex.: {'remove': True, ...}). Servidor antigo: {}."""
    resposta = pedir('GET', _exigir_base() + '/api/v1/capacidades',
                      autorizacao=api_key or do_ambiente('CONTEXTIA_API_KEY') or '',
                      contexto='capacidades')
    if resposta.status_code == 404:
        # O Contextia de hoje nao tem a rota: nada alem do basico.
        return {'remove': False}
    if resposta.status_code >= 300:
        raise ErroContextia('capacidades: HTTP %d, %s' % (resposta.status_code,
                                                          _detalhe(resposta)))
    return _json(resposta)


def quem_sou(api_key=None, escopo=None):
    """{'project_id', 'external_id', 'name'} do projeto da chave; ErroAutenticacao se nao vale."""
    return _get('/api/v1/projeto', _chave(api_key), 'identificar a chave', escopo)


def listar_datasets(api_key=None):
    """[{dataset, records, key, description, fields, group, updated_at}] do projeto."""
    return _get('/api/v1/datasets', _chave(api_key), 'listar datasets')['datasets']


def ler_registros(nome, api_key=None, pagina=1000):
    """Itera os registros do dataset como foram guardados, pagina a pagina."""
    chave = _chave(api_key)
    dataset = normalizar_dataset(nome)
    apos = 0
    while True:
        resposta = _get('/api/v1/datasets/%s/registros' % dataset, chave,
                        'ler registros de %s' % dataset,
                        params={'after': apos, 'limit': pagina})
        for registro in resposta['records']:
            yield registro
        if resposta.get('next') is None:
            return
        apos = resposta['next']


# ---------------------------------------------------------------- admin
class Admin(object):
    """Provisionamento (token de admin). Toda operacao e idempotente onde o contrato diz."""

    def __init__(self, token=None, url=None):
        self._token = token or do_ambiente('CONTEXTIA_ADMIN_TOKEN')
        self._url = (url or '').rstrip('/') or None
        if not self._token:
            raise ErroAutenticacao('sem token de admin: defina CONTEXTIA_ADMIN_TOKEN (so o'
                                   ' provisionamento precisa dele).')

    def __repr__(self):
        return 'Admin(url=%r, token=%s)' % (self._url or url_base(), '***')

    def _pedido(self, metodo, caminho, corpo=None, params=None, aceitar_404=False):
        base = self._url or _exigir_base()
        contexto = 'admin %s %s' % (metodo, caminho)
        resposta = pedir(metodo, base + caminho, autorizacao=self._token, corpo=corpo,
                          params=params, contexto=contexto)
        if resposta.status_code in (401, 403):
            raise ErroAutenticacao('%s: Contextia recusou o token de admin (HTTP %d, %s).'
                                   ' Confira CONTEXTIA_ADMIN_TOKEN.'
                                   % (contexto, resposta.status_code,
                                      mascarar(_detalhe(resposta), self._token)))
        if aceitar_404 and resposta.status_code == 404:
            return None
        if resposta.status_code >= 300:
            raise ErroContextia('%s: HTTP %d, %s' % (contexto, resposta.status_code,
                                                     mascarar(_detalhe(resposta),
                                                              self._token)))
        return _json(resposta)

    def criar_projeto(self, external_id, nome=None):
        """Cria (ou devolve, se ja existe) o projeto do escopo. dict(id, ..., criado)."""
        return self._pedido('POST', '/api/v1/admin/projetos',
                            {'external_id': str(external_id), 'name': nome})

    def buscar_projeto(self, external_id):
        achados = self._pedido('GET', '/api/v1/admin/projetos',
                               params={'external_id': str(external_id)})['projetos']
        return achados[0] if achados else None

    def emitir_chave(self, projeto_id):
        """dict(key_id, key). A chave so existe em claro nesta resposta."""
        return self._pedido('POST', '/api/v1/admin/projetos/%s/chaves' % projeto_id)

    def listar_chaves(self, projeto_id):
        return self._pedido('GET', '/api/v1/admin/projetos/%s/chaves' % projeto_id)['chaves']

    def revogar_chave(self, key_id):
        return self._pedido('DELETE', '/api/v1/admin/chaves/%s' % key_id)

    def criar_grupo(self, slug, nome=None):
        return self._pedido('POST', '/api/v1/admin/grupos', {'slug': slug, 'name': nome})

    def listar_grupos(self):
        return self._pedido('GET', '/api/v1/admin/grupos')['grupos']

    def incluir_no_grupo(self, slug, projeto_id):
        return self._pedido('PUT', '/api/v1/admin/grupos/%s/projetos/%s' % (slug, projeto_id))

    def registrar_webhook(self, projeto_id, url, segredo=None, eventos=None):
        """dict(id, secret). O segredo assina as entregas (verificar_assinatura)."""
        corpo = {'url': url}
        if segredo is not None:
            corpo['secret'] = segredo
        if eventos is not None:
            corpo['events'] = list(eventos)
        return self._pedido('POST', '/api/v1/admin/projetos/%s/webhooks' % projeto_id, corpo)

    def listar_webhooks(self, projeto_id):
        return self._pedido('GET', '/api/v1/admin/projetos/%s/webhooks'
                            % projeto_id)['webhooks']

    def testar_webhook(self, webhook_id):
        """Pede ao servidor uma entrega de teste agora. dict(status, erro)."""
        return self._pedido('POST', '/api/v1/admin/webhooks/%s/teste' % webhook_id)


# O que o decodificador de bytes do outro lado precisa, para quem le de volta.
def bytes_de(texto):
    """Volta um campo bytes (base64) ao valor original."""
    try:
        return base64.b64decode(texto, validate=True)
    except (binascii.Error, TypeError) as erro:
        raise ValueError('valor %r nao e base64 valido: %s' % (texto, erro)) from None
