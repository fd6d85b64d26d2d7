"""
Transporte HTTP do cliente do Contextia: como um pedido chega la, a política de
retentativas INTEIRA, e o que nunca sai daqui.

A política (uma só, `PoliticaDeRetentativas`; os números em padroes.py):

  * `pedir` -- um pedido, com UM prazo (PRAZO_RETENTATIVAS) contado do início
    da chamada: tentativas, esperas e Retry-After somados. Re-tentado, até
    RETENTATIVAS vezes, com espera exponencial (BACKOFF, dobrando até
    BACKOFF_MAXIMO):
      - status passageiro (STATUS_RETENTAVEIS: sobrecarga, gateway), com o
        Retry-After do servidor no lugar do backoff quando vier;
      - conexão recusada ou caída, timeout de conexão ou de leitura;
      - conexão que cai no meio do corpo da resposta (o lote pode ter sido
        gravado; o reenvio é idempotente e resolve);
      - corpo da resposta maior que RESPOSTA_MAXIMA_BYTES, ou que não terminou
        de chegar dentro do prazo (`ler_corpo`: a conexão é fechada ali e o
        resto nunca é lido -- um corpo sem fim não cresce a memória, um que
        pinga um byte por vez não segura o pedido além do prazo).
    POST entra porque o intake é idempotente (upsert por key, hash sem key).
    Espera que terminaria depois do prazo não é feita: o pedido desiste ali
    (devolve o último status, ou levanta ErroContextia se nem resposta houve).
    TLS que não confere nunca é re-tentado. `deve_parar`, se dado, e olhado
    durante as esperas: parada pedida desiste do pedido na hora, como falha.
  * `remessa.enviar_em_lotes` (remessa.py) -- um envio em varios lotes: 413
    divide o lote ao meio até passar ou sobrar um registro; com a quarentena,
    a recusa permanente do conteúdo (400/413/422) divide até o registro
    recusado ficar sozinho, e só ele sai do lote; com `em_voo` > 1 (só a carga
    completa), até tantos lotes ficam em voo enquanto os seguintes são lidos e
    montados, e as respostas são contadas na ordem dos lotes; servidor que não
    respondeu, seguiu sobrecarregado dentro do prazo, ou respondeu 2xx que não
    é do intake interrompe o envio: os lotes seguintes não saem e a origem
    para de ser lida. Falha passageira nunca vai para a quarentena.
  * Corpo comprimido (gzip, `Content-Encoding: gzip`) só quando quem chama
    diz que o intake anunciou `compressão: ["gzip"]` em capacidades; a quem
    não anuncia, nunca.
  * TLS sempre verificado. As CAs confiáveis são o bundle do certifi (o do
    requests) ou, se definida, SÓ a de CONTEXTIA_CA_BUNDLE: REQUESTS_CA_BUNDLE e
    CURL_CA_BUNDLE do ambiente não trocam as CAs em silêncio (um aviso diz que
    foram ignoradas). Destino local (loopback) nunca passa por proxy.
  * Endereço recusado antes de qualquer conexão (`conferir_url`, ErroDestino):
    HTTP puro só em loopback (127.0.0.0/8, ::1, localhost).
  * Redirecionamento nunca é seguido: um 3xx e ErroRedirecionamento nomeando o
    `Location` -- seguir um 307 re-POSTaria os registros em outro endereço (até
    de HTTPS para HTTP) e contaria o lote como entregue.
  * Segredo nunca em log, exceção, estado ou status: todo texto que veio do
    servidor passa por `texto_da_resposta` (mascarado e cortado); `mascarar`
    esconde chaves `ctx_...` (só o prefixo `ctx_abcd...`), qualquer `Bearer ...`,
    a autorização enviada e os segredos do ambiente (contextia_sync/segredos.py);
    o filtro que `preparar_logger` põe no logger aplica a mesma mascara.

O que o servidor responde (contagens, 401, teto de remoção) e assunto de
respostas.py; o provisionamento (token de admin), de admin.py.
"""

from __future__ import annotations

import email.utils
import gzip
import heapq
import ipaddress
import itertools
import json
import logging
import os
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, NamedTuple

from contextia_sync import padroes, segredos
from contextia_sync.erros import ErroConfiguracao
from contextia_sync.tipos import Json

if TYPE_CHECKING:
    import requests
    import requests.adapters

# Lidos na hora de cada pedido (os testes encurtam o prazo trocando-os aqui).
TIMEOUT = (padroes.TIMEOUT_CONEXAO, padroes.TIMEOUT_LEITURA)
RETENTATIVAS = padroes.RETENTATIVAS
BACKOFF = padroes.BACKOFF
BACKOFF_MAXIMO = padroes.BACKOFF_MAXIMO
PRAZO_RETENTATIVAS = padroes.PRAZO_RETENTATIVAS
STATUS_RETENTAVEIS = padroes.STATUS_RETENTAVEIS
STATUS_RECUSA_DO_REGISTRO = padroes.STATUS_RECUSA_DO_REGISTRO
RESPOSTA_MAXIMA_BYTES = padroes.RESPOSTA_MAXIMA_BYTES

# O corpo da resposta e lido nestes pedacos: a memoria de uma leitura e o
# limite mais um pedaco, nunca o que o servidor quiser mandar.
_PEDACO_DO_CORPO = 64 * 1024

# De quanto em quanto a espera olha `deve_parar`. Nao e politica (nao muda o
# que e re-tentado nem quando), so quao cedo uma parada pedida e notada.
_PASSO_DA_ESPERA = 0.05

VARIAVEL_PRAZO = 'CONTEXTIA_PRAZO_ENVIO'


def prazo_do_pedido() -> float:
    """
    O prazo de um pedido ao Contextia, tentativas e esperas somadas:
    CONTEXTIA_PRAZO_ENVIO em segundos, ou PRAZO_RETENTATIVAS. Encurtá-lo serve ao
    `--once` de um cron de minuto (o Contextia fora não segura a execução); alongá-lo,
    a um link que cai por minutos. ErroConfiguracao se não é número positivo.
    """
    bruto = os.environ.get(VARIAVEL_PRAZO, '').strip()
    if not bruto:
        return float(PRAZO_RETENTATIVAS)
    try:
        valor = float(bruto)
    except ValueError:
        valor = -1.0
    if not 0 < valor < float('inf'):  # (NaN tambem cai aqui)
        raise ErroConfiguracao(
            '%s=%r não é um número de segundos maior que zero (o padrão,'
            ' sem ela, é %d).' % (VARIAVEL_PRAZO, bruto, PRAZO_RETENTATIVAS)
        )
    return valor


class ErroContextia(Exception):
    """O Contextia recusou ou não respondeu um pedido."""


class ErroDestino(ErroContextia, ErroConfiguracao):
    """
    O endereço do Contextia e recusado antes de qualquer conexão (HTTP fora de
    loopback, intake noutro host). E ErroConfiguracao (as CLIs saem com 2) e
    ErroContextia (quem só conhece este conta o pedido como falho).
    """


class ErroIndisponivel(ErroContextia):
    """
    O Contextia não respondeu, ou seguiu sobrecarregado (429/503...), durante
    todo o prazo de retentativas: o servidor, não o pedido. Quem faz muitos
    pedidos (a carga de todas as empresas) para em vez de esperar o prazo de
    cada um.
    """


class RespostaAbandonada(Exception):
    """
    O corpo de uma resposta passou do limite de bytes ou do prazo e foi
    abandonado (`ler_corpo`). Dentro de `pedir` é falha passageira, re-tentada
    como um timeout; a mensagem nomeia a causa e o caminho.
    """


class ErroRedirecionamento(ErroContextia):
    """O servidor respondeu 3xx: o cliente nunca segue (dados e chave iriam a outro endereço)."""


# ---------------------------------------------------------------- ambiente
def do_ambiente(nome: str) -> str | None:
    """A variável de ambiente `nome` lida AGORA, sem espaços; None se vazia."""
    valor = (os.environ.get(nome) or '').strip()
    return valor or None


# ---------------------------------------------------------------- mascara
# Mais de 4 caracteres depois de `ctx_`: o prefixo ja mascarado (`ctx_abcd...`)
# nao casa de novo, e mascarar duas vezes da o mesmo texto.
_PADRAO_CHAVE = re.compile(r'ctx_[A-Za-z0-9_\-]{5,}')
# Qualquer credencial num cabecalho ecoado (`Bearer x`, `Basic x`), inclusive
# codificada numa URL (`Bearer%20x`, `Bearer+x`).
_PADRAO_CREDENCIAL = re.compile(
    r'\b(Bearer|Basic)(\s+|%20|\+)(?!\*\*\*)[^\s<>"\'&,;)]+', re.IGNORECASE
)


def mascarar_chave(chave: str | None) -> str:
    """
    'ctx_mR-BW77...' -> 'ctx_mR-B...': o prefixo que o admin lista, nunca o resto.

    Segredo que não é chave `ctx_` (token de admin, chave escrita a mão) vira
    '***': o começo dele não identifica nada para ninguém e já é um pedaco dele.
    """
    if not chave:
        return '(sem chave)'
    if chave.startswith('ctx_') and len(chave) > 12:
        return chave[:8] + '...'
    return '***'


def mascarar(texto: object, *conhecidos: str | None) -> str:
    """
    `texto` sem segredo: chaves `ctx_...`, qualquer `Bearer ...`/`Basic ...`, os
    segredos `conhecidos` (ex.: a chave em uso) e os do ambiente, lidos agora
    (CONTEXTIA_API_KEY, CONTEXTIA_ADMIN_TOKEN, segredos de webhook).
    """
    valores = {s for s in conhecidos if s and len(s) >= 4}
    valores.update(segredos.valores_secretos())
    # Antes da regex das chaves: todo pedaco de 8+ caracteres de um segredo
    # conhecido some, mesmo quebrado em linhas (o eco dobrado de um cabecalho).
    mascarado = segredos.mascarar_pedacos(str(texto), valores, mascarar_chave)
    # O segredo curto (4 a 7 caracteres, dito por quem chama) so inteiro; o mais
    # longo primeiro: um que contem outro nao fica pela metade.
    for valor in sorted(valores, key=len, reverse=True):
        if len(valor) < segredos.TAMANHO_MINIMO_MASCARADO:
            mascarado = mascarado.replace(valor, mascarar_chave(valor))
    mascarado = _PADRAO_CHAVE.sub(lambda m: mascarar_chave(m.group(0)), mascarado)
    return _PADRAO_CREDENCIAL.sub(lambda m: m.group(1) + ' ***', mascarado)


def autorizacao_enviada(resposta: requests.Response) -> str | None:
    """A credencial que foi no pedido desta resposta (o que um eco devolveria)."""
    pedido = getattr(resposta, 'request', None)
    valor = str((pedido.headers.get('Authorization') if pedido is not None else '') or '')
    return valor.split(' ', 1)[1] if ' ' in valor else (valor or None)


def texto_da_resposta(resposta: requests.Response, limite: int = 120) -> str:
    """
    O corpo que o servidor mandou, em uma linha, MASCARADO e depois cortado.

    E o único jeito de citar texto do servidor numa mensagem: um proxy ou página
    de depuração que ecoa os cabeçalhos poria a chave e o token no log, no
    estado e no status. A mascara vem antes do corte: cortado no meio, o
    segredo não seria mais reconhecido. Só o começo do corpo e lido (uma página
    de 10 MB não é decodificada inteira para citar 120 caracteres); a janela
    e bem maior que `limite`, então segredo cortado na borda dela já cai fora.
    """
    janela = (resposta.content or b'')[: max(16 * limite, 4096)]
    texto = ' '.join(janela.decode(resposta.encoding or 'utf-8', 'replace').split())
    return mascarar(texto, autorizacao_enviada(resposta))[:limite].strip()


class FiltroDeChaves:
    """Filtro de logging: mascara chaves em qualquer mensagem do logger."""

    def filter(self, registro: logging.LogRecord) -> bool:
        try:
            mensagem = registro.getMessage()
        except Exception:  # noqa: BLE001 - filtro nunca derruba o log
            return True
        mascarada = mascarar(mensagem)
        if mascarada != mensagem:
            registro.msg, registro.args = mascarada, None
        return True


def preparar_logger(logger: logging.Logger | None) -> logging.Logger:
    """O logger dado (ou o do SDK) com o filtro que mascara chaves, posto uma vez."""
    if logger is None:
        from contextia_sync.registro import logger as do_sdk

        logger = do_sdk
    if not any(isinstance(f, FiltroDeChaves) for f in getattr(logger, 'filters', [])):
        logger.addFilter(FiltroDeChaves())
    return logger


# ---------------------------------------------------------------- sessao
_local = threading.local()

# Variaveis com que o requests (trust_env) trocaria as CAs confiaveis em
# silencio: aqui nao valem, e um aviso diz isso uma vez.
VARIAVEIS_CA_IGNORADAS = ('REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE')
_ca_avisada: set[str] = set()


def cas_confiaveis(avisar: bool = True) -> str:
    """
    O arquivo PEM das CAs em que o cliente confia: CONTEXTIA_CA_BUNDLE, ou o
    bundle do certifi (o que o requests traz) -- nunca as CAs do sistema por
    acaso, nem o que REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE disserem. Com `avisar`
    (pedido HTTPS), a variável ignorada e dita uma vez por processo.
    """
    ca = do_ambiente('CONTEXTIA_CA_BUNDLE')
    if ca:
        if not os.path.exists(ca):
            raise ErroContextia(
                'CONTEXTIA_CA_BUNDLE=%s não existe. Aponte para o arquivo PEM'
                ' da CA que assina o certificado do Contextia.' % ca
            )
        return ca
    from requests.utils import DEFAULT_CA_BUNDLE_PATH  # o certifi.where() do requests

    for nome in VARIAVEIS_CA_IGNORADAS:
        if avisar and do_ambiente(nome) and nome not in _ca_avisada:
            _ca_avisada.add(nome)
            preparar_logger(None).warning(
                '%s está definida e é ignorada pelo SDK: o Contextia só é conferido contra'
                ' o bundle do certifi ou contra CONTEXTIA_CA_BUNDLE. Se o Contextia usa CA'
                ' própria, aponte CONTEXTIA_CA_BUNDLE para o PEM dela.',
                nome,
            )
    return str(DEFAULT_CA_BUNDLE_PATH)


def _adaptador(ca: str) -> requests.adapters.HTTPAdapter:
    """
    O pool de conexões do requests (HTTPAdapter), um por thread e por arquivo
    de CAs. O pedido vai direto a ele (`pedir`), sem a Session: a Session
    prepara o pedido de novo, junta ambiente, cookies, netrc e hooks a cada
    envio -- ~40% da CPU de um lote de 500 na carga completa, para nada que o
    intake use. O que dela importa está em `pedir`: o proxy do ambiente fora
    de loopback, as CAs por caminho, nenhum redirecionamento seguido.
    """
    from requests.adapters import HTTPAdapter

    adaptadores = getattr(_local, 'adaptadores', None)
    if adaptadores is None:
        adaptadores = _local.adaptadores = {}
    adaptador: HTTPAdapter | None = adaptadores.get(ca)
    if adaptador is None:
        # max_retries=0: o urllib3 nao re-tenta nada; a politica e o laco de `pedir`.
        adaptador = HTTPAdapter(max_retries=0, pool_connections=4, pool_maxsize=8)
        adaptadores[ca] = adaptador
    return adaptador


def _proxies(url: str, local: bool) -> dict[str, str]:
    """
    O proxy do ambiente para `url` (HTTPS_PROXY, NO_PROXY...), como a Session
    com trust_env o acharia: na rede do cliente ele pode ser o único caminho
    até o Contextia. Destino local nunca passa por proxy (nem o ambiente é lido).
    """
    if local:
        return {}
    from requests.utils import get_environ_proxies

    return dict(get_environ_proxies(url))


# ---------------------------------------------------------------- o endereco
def e_loopback(host: str | None) -> bool:
    """`host` e esta máquina (127.0.0.0/8, ::1, localhost)?"""
    if not host:
        return False
    if host.lower() == 'localhost':
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def conferir_url(url: str, nome: str | None = None) -> None:
    """
    Recusa (ErroDestino) um endereço do Contextia inseguro, ANTES de qualquer
    conexão: esquema que não é http/https, sem host, ou HTTP puro fora de
    loopback (a chave, o token e os dados do ERP passariam em claro). `nome` e a
    variável de onde veio, para a mensagem.
    """
    partes = urllib.parse.urlsplit(url)
    if partes.scheme not in ('http', 'https') or not partes.hostname:
        valor = url.rpartition('@')[2][:120]  # sem usuario:senha, se houver
        raise ErroDestino(
            '%s não é um endereço http:// ou https:// com host. Corrija para'
            ' https://<instalação do Contextia>. Nada foi enviado.'
            % ('%s=%r' % (nome, valor) if nome else 'o endereço %r' % valor)
        )
    qual = '%s (%s)' % (nome, servidor(url)) if nome else 'o endereço %s' % servidor(url)
    if partes.scheme == 'http' and not e_loopback(partes.hostname):
        raise ErroDestino(
            '%s usa HTTP sem TLS fora desta máquina: a chave do projeto, o token'
            ' de admin e os dados do ERP passariam em claro pela rede. Use'
            ' https:// (HTTP puro só vale para 127.0.0.1, ::1 e localhost).'
            ' Nada foi enviado.' % qual
        )


# ---------------------------------------------------------------- a politica
def _retry_after(resposta: requests.Response) -> float | None:
    """Os segundos que o servidor pediu (Retry-After: segundos ou data HTTP), ou None."""
    valor = (resposta.headers.get('Retry-After') or '').strip()
    if not valor:
        return None
    if valor.isdigit():
        return float(valor)
    try:
        quando = email.utils.parsedate_to_datetime(valor)
    except (TypeError, ValueError):
        return None
    if quando.tzinfo is None:
        quando = quando.replace(tzinfo=timezone.utc)
    return max(0.0, (quando - datetime.now(timezone.utc)).total_seconds())


def _esperar(segundos: float, deve_parar: Callable[[], bool] | None) -> bool:
    """Dorme `segundos`; devolve True (sem dormir o resto) assim que `deve_parar()`."""
    if deve_parar is None:
        time.sleep(segundos)
        return False
    fim = time.monotonic() + segundos
    while not deve_parar():
        resto = fim - time.monotonic()
        if resto <= 0:
            return False
        time.sleep(min(resto, _PASSO_DA_ESPERA))
    return True


def _caminho(resposta: requests.Response) -> str:
    """'POST /api/v1/intake' (sem a query: nada do pedido além do caminho vai ao log)."""
    pedido = resposta.request
    metodo = (pedido.method if pedido is not None else None) or ''
    return ('%s %s' % (metodo, urllib.parse.urlsplit(resposta.url or '').path)).strip()


def _cortar_conexao(resposta: requests.Response) -> None:
    """
    Fecha para leitura e escrita o socket da resposta, de outra thread: a
    leitura parada nele volta na hora. `socket.socket.shutdown` direto (e não
    o do SSLSocket, que solta o estado TLS por baixo da leitura em curso).
    """
    import socket

    conexao = getattr(resposta.raw, 'connection', None)
    # Corpo ate o fim da conexao: o http.client a passa a resposta e esquece o
    # socket (`sock` None); ele segue no arquivo que a resposta le.
    arquivo = getattr(getattr(getattr(resposta.raw, '_fp', None), 'fp', None), 'raw', None)
    for soquete in (getattr(conexao, 'sock', None), getattr(arquivo, '_sock', None)):
        if not isinstance(soquete, socket.socket):
            soquete = getattr(soquete, 'socket', None)  # TLS dentro de TLS (proxy)
        if isinstance(soquete, socket.socket):
            try:
                socket.socket.shutdown(soquete, socket.SHUT_RDWR)
            except OSError:
                pass  # ja fechado: nada a cortar
            return


class _Vigia:
    """
    Uma thread para todos os pedidos do processo: guarda (instante, ação) e
    roda, no instante, cada ação que não foi desarmada. Uma threading.Timer por
    pedido custava ~0,5 ms de CPU a cada resposta; armar aqui custa um heappush.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._fila: list[tuple[float, int, Callable[[], None]]] = []
        self._armadas: set[int] = set()
        self._numeros = itertools.count()
        self._thread: threading.Thread | None = None

    def armar(self, quando: float, acao: Callable[[], None]) -> int:
        """Roda `acao()` no instante `quando` (time.monotonic); devolve o número para desarmar."""
        with self._cond:
            numero = next(self._numeros)
            heapq.heappush(self._fila, (quando, numero, acao))
            self._armadas.add(numero)
            if self._thread is None or not self._thread.is_alive():  # (e depois de um fork)
                self._thread = threading.Thread(
                    target=self._rodar, name='vigia-de-respostas', daemon=True
                )
                self._thread.start()
            if self._fila[0][1] == numero:
                self._cond.notify()
            return numero

    def desarmar(self, numero: int) -> None:
        with self._cond:
            self._armadas.discard(numero)
            # As desarmadas saem da fila quando chegam a frente; muitas, de uma vez.
            if len(self._fila) > 2 * len(self._armadas) + 64:
                self._fila = [item for item in self._fila if item[1] in self._armadas]
                heapq.heapify(self._fila)

    def _proxima(self) -> Callable[[], None]:
        """Espera a próxima ação armada vencer e a tira da fila."""
        with self._cond:
            while True:
                while self._fila and self._fila[0][1] not in self._armadas:
                    heapq.heappop(self._fila)
                if not self._fila:
                    self._cond.wait()
                    continue
                resto = self._fila[0][0] - time.monotonic()
                if resto > 0:
                    self._cond.wait(resto)
                    continue
                _, numero, acao = heapq.heappop(self._fila)
                self._armadas.discard(numero)
                return acao

    def _rodar(self) -> None:
        while True:
            acao = self._proxima()
            try:
                acao()
            except Exception:  # noqa: BLE001 - a vigia nunca morre por uma ação
                pass


_vigia = _Vigia()


def ler_corpo(resposta: requests.Response, *, limite: int, ate: float, segundos: float) -> bytes:
    """
    O corpo de `resposta` (pedida com stream=True), lido aos pedaços com dois
    limites -- a única leitura de corpo de resposta do SDK:

      * `limite` bytes, contados depois de descomprimir e enquanto chegam (um
        `Content-Length` acima dele é recusado sem ler nada);
      * o instante `ate` (time.monotonic): o timeout do requests é por leitura
        do socket, e um servidor que manda um byte a cada meio segundo nunca o
        dispara. Uma vigia corta o socket no prazo, mesmo com a leitura parada.

    Passado um deles, a conexão é fechada (o resto nunca é lido) e
    RespostaAbandonada diz qual, com o caminho. Lido inteiro, o corpo fica em
    `resposta.content`. `segundos` é o prazo de onde `ate` veio, para a mensagem.
    """
    import requests

    maior = 'resposta maior que %d bytes (%s)' % (limite, _caminho(resposta))
    declarado = (resposta.headers.get('Content-Length') or '').strip()
    if declarado.isdigit() and int(declarado) > limite:
        resposta.close()
        raise RespostaAbandonada(maior)
    cortada = threading.Event()

    def cortar() -> None:
        cortada.set()
        _cortar_conexao(resposta)

    vigiada = _vigia.armar(ate, cortar)
    partes: list[bytes] = []
    lidos = 0
    try:
        for pedaco in resposta.iter_content(_PEDACO_DO_CORPO):
            lidos += len(pedaco)
            if lidos > limite:
                raise RespostaAbandonada(maior)
            if cortada.is_set() or time.monotonic() >= ate:
                break
            partes.append(pedaco)
    except requests.exceptions.RequestException:
        if not cortada.is_set():
            raise
        # O corte da vigia aparece como conexão caída: a causa é o prazo.
    except RespostaAbandonada:
        resposta.close()
        raise
    finally:
        _vigia.desarmar(vigiada)
    if cortada.is_set() or time.monotonic() >= ate:
        # (Corpo sem tamanho, até o fim da conexão: o corte pareceria o fim.)
        resposta.close()
        raise RespostaAbandonada(
            'a resposta de %s não terminou de chegar no prazo de %g s'
            ' (%d bytes lidos até ali)' % (_caminho(resposta), segundos, lidos)
        )
    corpo = b''.join(partes)
    resposta._content = corpo
    return corpo


class PoliticaDeRetentativas(NamedTuple):
    """
    A política de `pedir` (ver o topo do módulo): até `retentativas` novas
    tentativas, a espera começando em `backoff` e dobrando até `backoff_maximo`,
    tudo dentro de `segundos` contados do início da chamada. `atual()` lê os
    números deste módulo na hora (os testes os encurtam trocando-os aqui).
    """

    retentativas: int
    backoff: float
    backoff_maximo: float
    segundos: float

    @classmethod
    def atual(cls) -> PoliticaDeRetentativas:
        return cls(RETENTATIVAS, float(BACKOFF), BACKOFF_MAXIMO, prazo_do_pedido())


class _Tentativas:
    """As tentativas de uma chamada: o prazo dela, a espera da vez e quantas já foram."""

    def __init__(self, politica: PoliticaDeRetentativas) -> None:
        self.politica = politica
        self.prazo = time.monotonic() + politica.segundos
        self.espera = politica.backoff
        self.feitas = 0

    def sobra(self) -> float:
        """O que resta do prazo (ao menos 0,1 s): nenhuma tentativa espera além dele."""
        return max(self.prazo - time.monotonic(), 0.1)

    def proxima_espera(self, pedida: float | None) -> float | None:
        """
        Quanto esperar antes da próxima tentativa (o Retry-After `pedida`, se o
        servidor disse), ou None: desistir -- as retentativas acabaram, ou a
        espera terminaria depois do prazo (ela não é feita).
        """
        self.feitas += 1
        atraso = self.espera if pedida is None else pedida
        if self.feitas > self.politica.retentativas or time.monotonic() + atraso >= self.prazo:
            return None
        self.espera = min(self.espera * 2, self.politica.backoff_maximo)
        return atraso


class _PedidoPronto(NamedTuple):
    """O pedido preparado uma vez e por onde ele sai: as tentativas reenviam o mesmo."""

    preparado: requests.PreparedRequest
    adaptador: requests.adapters.HTTPAdapter
    ca: str
    proxies: dict[str, str]
    url: str
    contexto: str
    autorizacao: str | None


class _Falha(NamedTuple):
    """
    Uma tentativa sem resposta final: a resposta passageira (None se nem houve),
    o Retry-After dela, a falha curta (para a parada pedida) e a mensagem se
    esta for a última.
    """

    resposta: requests.Response | None
    pedida: float | None
    falha: str
    desistencia: str


def pedir(
    metodo: str,
    url: str,
    *,
    autorizacao: str | None,
    corpo: Json | bytes = None,
    params: Mapping[str, str | int] | None = None,
    contexto: str = '',
    deve_parar: Callable[[], bool] | None = None,
    comprimir: bool = False,
    limite: int | None = None,
) -> requests.Response:
    """
    Um pedido HTTP sob a política de retentativas (ver o topo do módulo).

    Devolve a resposta -- qualquer status final, inclusive o passageiro que
    durou o prazo inteiro. Levanta ErroContextia se nem resposta houve dentro
    do prazo, se o TLS não confere, ou se `deve_parar()` ficou verdadeiro
    durante uma espera entre tentativas (a mensagem diz que a parada foi pedida).
    `comprimir`: o corpo vai em gzip (só para quem anunciou; ver o topo do módulo).
    `limite`: bytes lidos da resposta, no lugar de RESPOSTA_MAXIMA_BYTES; o
    corpo de cada tentativa é lido por `ler_corpo` até o fim do prazo.
    """
    pronto = _preparar(metodo, url, autorizacao, corpo, params, contexto, comprimir)
    tentativas = _Tentativas(PoliticaDeRetentativas.atual())
    maximo = RESPOSTA_MAXIMA_BYTES if limite is None else limite
    while True:
        tentativa = _tentar(pronto, tentativas, maximo)
        if not isinstance(tentativa, _Falha):
            return tentativa
        atraso = tentativas.proxima_espera(tentativa.pedida)
        if atraso is None:
            if tentativa.resposta is not None:
                return tentativa.resposta  # o status passageiro que nao passou
            raise ErroIndisponivel(tentativa.desistencia)
        if _esperar(atraso, deve_parar):
            raise ErroContextia(
                '%s: parada pedida durante as retentativas; o pedido foi'
                ' abandonado e conta como falho (última tentativa: %s)'
                % (contexto, tentativa.falha)
            )


def _corpo_e_cabecalhos(
    autorizacao: str | None, corpo: Json | bytes, comprimir: bool
) -> tuple[dict[str, str], bytes | None]:
    """Os cabeçalhos e o corpo em bytes (JSON estrito; gzip só se pedido e vale a pena)."""
    cabecalhos = {'Accept': 'application/json'}
    if autorizacao:
        cabecalhos['Authorization'] = 'Bearer ' + autorizacao
    if corpo is None:
        return cabecalhos, None
    cabecalhos['Content-Type'] = 'application/json'
    dados = (
        corpo
        if isinstance(corpo, bytes)
        else json.dumps(corpo, ensure_ascii=False, separators=(',', ':'), allow_nan=False).encode(
            'utf-8'
        )
    )
    if comprimir and len(dados) >= padroes.GZIP_A_PARTIR_DE:
        # Uma vez, antes das tentativas; o zlib solta o GIL (lotes em voo comprimem juntos).
        dados = gzip.compress(dados, compresslevel=padroes.NIVEL_GZIP, mtime=0)
        cabecalhos['Content-Encoding'] = 'gzip'
    return cabecalhos, dados


def _preparar(
    metodo: str,
    url: str,
    autorizacao: str | None,
    corpo: Json | bytes,
    params: Mapping[str, str | int] | None,
    contexto: str,
    comprimir: bool,
) -> _PedidoPronto:
    """O pedido preparado uma vez, com o pool, as CAs e o proxy do destino."""
    import requests

    cabecalhos, dados = _corpo_e_cabecalhos(autorizacao, corpo, comprimir)
    conferir_url(url)
    # Destino local (Contextia local, testes) nunca passa por proxy do ambiente.
    proxies = _proxies(url, e_loopback(urllib.parse.urlsplit(url).hostname))
    # (Em HTTP puro nao ha certificado: a CA ignorada nao merece aviso.)
    ca = cas_confiaveis(avisar=url.startswith('https:'))
    adaptador = _adaptador(ca)
    # Preparado uma vez: as tentativas reenviam o mesmo pedido (o corpo e bytes).
    # `verify` vai como o CAMINHO do PEM (nunca True, nunca False).
    preparado = requests.PreparedRequest()
    try:
        preparado.prepare(method=metodo, url=url, headers=cabecalhos, data=dados, params=params)
    except requests.exceptions.RequestException as erro:
        raise ErroContextia(
            '%s: pedido inválido para %s (%s). Confira o endereço do'
            ' Contextia (CONTEXTIA_URL) e a chave: sem espaços nem quebras'
            ' de linha.' % (contexto, servidor(url), mascarar(erro, autorizacao))
        ) from None
    return _PedidoPronto(preparado, adaptador, ca, proxies, url, contexto, autorizacao)


def _tentar(
    pronto: _PedidoPronto, tentativas: _Tentativas, maximo: int
) -> requests.Response | _Falha:
    """Uma tentativa: a resposta final, ou a falha passageira; o que não passa levanta."""
    import requests

    contexto, url, autorizacao = pronto.contexto, pronto.url, pronto.autorizacao
    segundos = tentativas.politica.segundos
    sobra = tentativas.sobra()
    try:
        ate = time.monotonic() + sobra
        # stream=True: o corpo e lido aqui, dentro do try, com limite e prazo.
        resposta = pronto.adaptador.send(
            pronto.preparado,
            stream=True,
            verify=pronto.ca,
            proxies=pronto.proxies,
            timeout=(min(TIMEOUT[0], sobra), min(TIMEOUT[1], sobra)),
        )
        ler_corpo(resposta, limite=maximo, ate=ate, segundos=segundos)
    except requests.exceptions.SSLError as erro:
        # Certificado que nao confere nao melhora com o tempo: sem retentativa.
        raise ErroContextia(
            '%s: certificado TLS de %s não confere (%s). Se o Contextia usa CA própria,'
            ' aponte CONTEXTIA_CA_BUNDLE para o PEM dela; a verificação nunca é'
            ' desligada.' % (contexto, servidor(url), mascarar(erro, autorizacao))
        ) from None
    except RespostaAbandonada as erro:
        # Como um timeout: passageiro, re-tentado dentro do prazo da chamada.
        return _Falha(
            None,
            None,
            str(erro),
            '%s: %s; o prazo de retentativas (%g s) acabou sem uma resposta'
            ' inteira' % (contexto, erro, segundos),
        )
    except (
        requests.exceptions.ChunkedEncodingError,
        requests.exceptions.ContentDecodingError,
    ) as erro:
        return _Falha(
            None,
            None,
            'conexão caiu no meio da resposta',
            '%s: conexão caiu no meio da resposta e o prazo de retentativas'
            ' acabou (%s)' % (contexto, mascarar(erro, autorizacao)),
        )
    except (requests.exceptions.ConnectionError, requests.exceptions.Timeout) as erro:
        return _Falha(
            None,
            None,
            '%s não respondeu' % servidor(url),
            '%s: %s não respondeu (ou seguiu sobrecarregado) dentro do prazo'
            ' de retentativas (%s)' % (contexto, servidor(url), mascarar(erro, autorizacao)),
        )
    except requests.exceptions.RequestException as erro:
        # URL invalida, cabecalho invalido...: tentar de novo da o mesmo.
        raise ErroContextia(
            '%s: %s não respondeu (ou seguiu sobrecarregado) dentro do'
            ' prazo de retentativas (%s)' % (contexto, servidor(url), mascarar(erro, autorizacao))
        ) from None
    if 300 <= resposta.status_code < 400:
        raise ErroRedirecionamento(_redirecionamento(resposta, contexto, url))
    if resposta.status_code not in STATUS_RETENTAVEIS:
        return resposta
    return _Falha(resposta, _retry_after(resposta), 'HTTP %d' % resposta.status_code, '')


def _redirecionamento(resposta: requests.Response, contexto: str, url: str) -> str:
    """A mensagem do 3xx: o que, para onde (mascarado) e a correção."""
    destino = mascarar(
        resposta.headers.get('Location') or '(sem Location)', autorizacao_enviada(resposta)
    )[:200]
    return (
        '%s: %s respondeu HTTP %d mandando para %s -- o SDK nunca segue'
        ' redirecionamento (a chave e os registros iriam para um endereço que ninguém'
        ' configurou, talvez sem TLS). Nada deste pedido conta como entregue. Se o'
        ' endereço novo é o certo, ponha-o em CONTEXTIA_URL.'
        % (contexto, servidor(url), resposta.status_code, destino)
    )


class RespostaInvalida(ErroContextia):
    """
    Resposta 2xx que não é a do intake (sem JSON, sem as contagens, contagem
    que não confere): o lote conta como falho e o envio para ali, como com um
    servidor fora do ar -- um proxy ou página de erro no caminho daria o mesmo
    a cada lote, e ler a origem só para descartar custaria a origem.
    """


# ---------------------------------------------------------------- mensagens
def servidor(url: str) -> str:
    """'https://u:s@ctx.exemplo:8443/api/...' -> 'https://ctx.exemplo:8443' (para mensagens)."""
    partes = urllib.parse.urlsplit(url)
    return '%s://%s' % (partes.scheme, partes.netloc.rpartition('@')[2])
