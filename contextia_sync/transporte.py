"""
Transporte HTTP do cliente do Contextia: como um pedido chega la, e o que nunca
sai dele.

  * Uma Session (pool de conexoes) por thread e por CA; urllib3 Retry em erro
    de conexao/leitura, 502/503/504 e 429 (respeitando Retry-After), backoff
    exponencial, tudo limitado por PRAZO_RETENTATIVAS. POST entra no retry
    porque o intake e idempotente (upsert por key, hash sem key).
  * TLS sempre verificado (CONTEXTIA_CA_BUNDLE para CA propria); destino local
    (127.0.0.1) nunca passa por proxy.
  * Chave nunca em log nem em excecao: so o prefixo mascarado (`ctx_abcd...`),
    tambem pelo filtro que `preparar_logger` poe no logger.

O que o servidor responde (contagens, 401, 413, teto de remocao) e assunto de
contextia_client.py, que reexporta os nomes publicos daqui.
"""

import json
import os
import re
import threading
import time
import urllib.parse

# Espera maxima por tentativa: conectar e ler a resposta de um lote.
TIMEOUT = (5, 120)
# Tentativas por pedido (conexao, leitura e status somados).
RETENTATIVAS = 6
# Backoff do urllib3: 0, 1, 2, 4, 8... segundos entre tentativas (teto 8).
BACKOFF = 0.5
BACKOFF_MAXIMO = 8
# Tempo total que um pedido pode passar re-tentando. Um Retry-After de uma
# hora nao pode segurar o ciclo do ouvinte: passado o prazo, o lote conta
# como falho e o proximo ciclo rele.
PRAZO_RETENTATIVAS = 120
STATUS_RETENTAVEIS = (429, 502, 503, 504)


class ErroContextia(Exception):
    """O Contextia recusou ou nao respondeu um pedido."""


# ---------------------------------------------------------------- ambiente
def do_ambiente(nome):
    """A variavel de ambiente `nome` lida AGORA, sem espacos; None se vazia."""
    valor = (os.environ.get(nome) or '').strip()
    return valor or None


# ---------------------------------------------------------------- mascara
_PADRAO_CHAVE = re.compile(r'ctx_[A-Za-z0-9_\-]{4,}')


def mascarar_chave(chave):
    """'ctx_mR-BW77...' -> 'ctx_mR-B...': o prefixo que o admin lista, nunca o resto."""
    if not chave:
        return '(sem chave)'
    return chave[:8] + '...'


def mascarar(texto, *segredos):
    """Troca chaves `ctx_...` e os `segredos` dados por versoes mascaradas."""
    texto = _PADRAO_CHAVE.sub(lambda m: mascarar_chave(m.group(0)), str(texto))
    for segredo in segredos:
        if segredo and len(segredo) >= 4:
            texto = texto.replace(segredo, mascarar_chave(segredo))
    return texto


class FiltroDeChaves(object):
    """Filtro de logging: mascara chaves em qualquer mensagem do logger."""

    def filter(self, registro):
        try:
            mensagem = registro.getMessage()
        except Exception:               # noqa: BLE001 - filtro nunca derruba o log
            return True
        mascarada = mascarar(mensagem)
        if mascarada != mensagem:
            registro.msg, registro.args = mascarada, None
        return True


def preparar_logger(logger):
    """O logger dado (ou o do SDK) com o filtro que mascara chaves, posto uma vez."""
    if logger is None:
        from contextia_sync.registro import logger
    if not any(isinstance(f, FiltroDeChaves) for f in getattr(logger, 'filters', [])):
        logger.addFilter(FiltroDeChaves())
    return logger


# ---------------------------------------------------------------- transporte
_local = threading.local()


def _classe_retry():
    from urllib3.exceptions import MaxRetryError, ResponseError, SSLError
    from urllib3.util.retry import Retry

    class RetryComPrazo(Retry):
        """Retry do urllib3 com um prazo total: nenhuma espera passa do que sobra."""

        def __init__(self, *args, prazo=None, orcamento=PRAZO_RETENTATIVAS, **kwargs):
            super().__init__(*args, **kwargs)
            self.prazo = prazo
            self.orcamento = orcamento

        def new(self, **kwargs):
            kwargs.setdefault('prazo', self.prazo)
            kwargs.setdefault('orcamento', self.orcamento)
            return super().new(**kwargs)

        def increment(self, method=None, url=None, response=None, error=None,
                      _pool=None, _stacktrace=None):
            if isinstance(error, SSLError):
                # Certificado que nao confere nao melhora com o tempo: sem retry.
                raise MaxRetryError(_pool, url, error)
            novo = super().increment(method, url, response, error, _pool, _stacktrace)
            # O prazo comeca na primeira falha: o objeto do adapter e compartilhado.
            if novo.prazo is None:
                novo.prazo = time.monotonic() + self.orcamento
            elif time.monotonic() >= novo.prazo:
                raise MaxRetryError(_pool, url, error or ResponseError(
                    'prazo de %ss de retentativas esgotado' % self.orcamento))
            return novo

        def _resto(self):
            return max(0.0, self.prazo - time.monotonic()) if self.prazo else None

        def get_retry_after(self, response):
            espera = super().get_retry_after(response)
            resto = self._resto()
            return espera if espera is None or resto is None else min(espera, resto)

        def get_backoff_time(self):
            espera = super().get_backoff_time()
            resto = self._resto()
            return espera if resto is None else min(espera, resto)

    return RetryComPrazo


def _sessao():
    """Uma Session (pool de conexoes) por thread e por CA configurada."""
    import requests
    from requests.adapters import HTTPAdapter

    ca = do_ambiente('CONTEXTIA_CA_BUNDLE')
    sessoes = getattr(_local, 'sessoes', None)
    if sessoes is None:
        sessoes = _local.sessoes = {}
    sessao = sessoes.get(ca)
    if sessao is None:
        if ca and not os.path.exists(ca):
            raise ErroContextia('CONTEXTIA_CA_BUNDLE=%s nao existe. Aponte para o arquivo PEM'
                                ' da CA que assina o certificado do Contextia.' % ca)
        retry = _classe_retry()(
            total=RETENTATIVAS, connect=RETENTATIVAS, read=RETENTATIVAS,
            status=RETENTATIVAS, backoff_factor=BACKOFF, backoff_max=BACKOFF_MAXIMO,
            status_forcelist=STATUS_RETENTAVEIS,
            # None = todos os metodos, POST incluido: o intake e idempotente.
            allowed_methods=None, respect_retry_after_header=True,
            raise_on_status=False)
        sessao = requests.Session()
        # trust_env fica ligado: na rede do cliente, HTTPS_PROXY pode ser o unico
        # caminho ate o Contextia. `verify` vai em cada pedido (nunca False).
        sessao.verify = ca or True
        adaptador = HTTPAdapter(max_retries=retry, pool_connections=4, pool_maxsize=8)
        sessao.mount('https://', adaptador)
        sessao.mount('http://', adaptador)
        sessoes[ca] = sessao
    return sessao


def pedir(metodo, url, *, autorizacao, corpo=None, params=None, contexto=''):
    """
    Um pedido HTTP com as retentativas do contrato. Devolve a resposta (qualquer
    status final); levanta ErroContextia se nem resposta houve.

    Corpo que cai no meio (conexao derrubada depois do cabecalho) o urllib3 nao
    re-tenta; re-tentamos aqui, dentro do mesmo prazo, porque o pedido e
    idempotente e a resposta perdida nao diz se ele foi aplicado.
    """
    import requests

    cabecalhos = {'Accept': 'application/json'}
    if autorizacao:
        cabecalhos['Authorization'] = 'Bearer ' + autorizacao
    dados = None
    if corpo is not None:
        cabecalhos['Content-Type'] = 'application/json'
        dados = corpo if isinstance(corpo, bytes) else json.dumps(
            corpo, ensure_ascii=False, separators=(',', ':'), allow_nan=False).encode('utf-8')
    _avisar_sem_tls(url)
    # Destino local (Contextia local, testes) nunca passa por proxy do ambiente.
    local = urllib.parse.urlsplit(url).hostname in ('127.0.0.1', 'localhost', '::1')
    proxies = {'http': None, 'https': None} if local else None
    prazo = time.monotonic() + PRAZO_RETENTATIVAS
    espera = BACKOFF
    while True:
        try:
            resposta = _sessao().request(metodo, url, data=dados, params=params,
                                         headers=cabecalhos, timeout=TIMEOUT,
                                         verify=do_ambiente('CONTEXTIA_CA_BUNDLE') or True,
                                         proxies=proxies)
            resposta.content          # le o corpo inteiro aqui, dentro do try
            return resposta
        except (requests.exceptions.ChunkedEncodingError,
                requests.exceptions.ContentDecodingError) as erro:
            if time.monotonic() + espera >= prazo:
                raise ErroContextia('%s: conexao caiu no meio da resposta e o prazo de'
                                    ' retentativas acabou (%s)'
                                    % (contexto, mascarar(erro, autorizacao))) from None
            time.sleep(espera)
            espera = min(espera * 2, BACKOFF_MAXIMO)
        except requests.exceptions.SSLError as erro:
            raise ErroContextia(
                '%s: certificado TLS de %s nao confere (%s). Se o Contextia usa CA propria,'
                ' aponte CONTEXTIA_CA_BUNDLE para o PEM dela; a verificacao nunca e'
                ' desligada.' % (contexto, servidor(url), mascarar(erro, autorizacao))
            ) from None
        except requests.exceptions.RequestException as erro:
            raise ErroContextia('%s: %s nao respondeu (ou seguiu sobrecarregado) dentro do'
                                ' prazo de retentativas (%s)'
                                % (contexto, servidor(url),
                                   mascarar(erro, autorizacao))) from None


_avisados = set()


def _avisar_sem_tls(url, logger=None):
    partes = urllib.parse.urlsplit(url)
    if partes.scheme == 'http' and partes.hostname not in ('127.0.0.1', 'localhost', '::1') \
            and partes.netloc not in _avisados:
        _avisados.add(partes.netloc)
        preparar_logger(logger).warning(
            'Contextia em %s sem TLS: chave e dados trafegam em claro. Use https:// em'
            ' producao.', servidor(url))


def servidor(url):
    """'https://ctx.exemplo:8443/api/...' -> 'https://ctx.exemplo:8443' (para mensagens)."""
    partes = urllib.parse.urlsplit(url)
    return '%s://%s' % (partes.scheme, partes.netloc)
