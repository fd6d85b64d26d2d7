"""
Servidores hostis de verdade em 127.0.0.1 (http.server numa thread) para os
testes de segurança do cliente: o que um proxy, uma página de depuração ou um
servidor comprometido no caminho faria.

    with ServidorHostil(eco_html(500)) as hostil:      # ecoa os cabeçalhos num 500 HTML
        ...hostil.url...
        hostil.pedidos                     # [Pedido(método, caminho, cabeçalhos, corpo)]

    with ServidorHostil(intake_falso()) as destino, \
         ServidorHostil(redirecionar(307, destino.url)) as origem:
        ...                                            # `destino.pedidos` tem de ficar vazio

Cada servidor anota TODO pedido que recebe (a prova de "nenhuma conexão" e a
lista vazia). `responder(pedido)` devolve (status, cabeçalhos, corpo); o corpo
pode ser um `Fluxo` (pedaços mandados um a um, chunked ou até fechar a conexão:
o corpo sem fim, o que pinga um byte por vez). `enviados` soma os bytes de
corpo que o servidor conseguiu mandar.

    with ServidorHostil(corpo_sem_fim()) as hostil:   # 200 que nunca termina
        ...
"""

from __future__ import annotations

import http.server
import json
import os
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple


def tls_autoassinado(pasta: str | os.PathLike[str]) -> tuple[ssl.SSLContext, str]:
    """
    (o contexto TLS de um servidor em 127.0.0.1, o certificado que o cliente confia):
    um certificado autoassinado feito agora pelo `openssl`, com 127.0.0.1 no SAN.
    """
    chave, certificado = os.path.join(pasta, 'chave.pem'), os.path.join(pasta, 'cert.pem')
    subprocess.run(
        ['openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1']
        + ['-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1']
        + ['-keyout', chave, '-out', certificado],
        check=True,
        capture_output=True,
    )
    contexto = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    contexto.load_cert_chain(certificado, chave)
    return contexto, certificado


class Pedido(NamedTuple):
    metodo: str
    caminho: str
    cabecalhos: dict[str, str]
    corpo: bytes


class Fluxo(NamedTuple):
    """Um corpo mandado aos pedaços: chunked, ou sem tamanho até fechar a conexão."""

    pedacos: Iterable[bytes]
    chunked: bool = True


Resposta = tuple[int, dict[str, str], bytes | Fluxo]


class ServidorHostil:
    """Um http.server em 127.0.0.1 (porta livre) que responde `responder` e anota os pedidos."""

    def __init__(
        self,
        responder: Callable[[Pedido], Resposta],
        host: str = '127.0.0.1',
        tls: ssl.SSLContext | None = None,
    ):
        self.pedidos: list[Pedido] = []
        # Uma conexao TCP aberta conta mesmo sem pedido HTTP completo.
        self.conexoes = 0
        self.enviados = 0
        self._trava = threading.Lock()
        # Um Fluxo sem fim para quando o servidor para (ou o cliente fecha).
        self.parado = threading.Event()
        dono = self

        class Atendente(http.server.BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'

            def setup(self):
                dono.conexoes += 1
                super().setup()

            def _atender(self):
                tamanho = int(self.headers.get('Content-Length') or 0)
                corpo = self.rfile.read(tamanho) if tamanho else b''
                pedido = Pedido(self.command, self.path, dict(self.headers.items()), corpo)
                dono.pedidos.append(pedido)
                status, cabecalhos, resposta = responder(pedido)
                self.send_response(status)
                for nome, valor in cabecalhos.items():
                    self.send_header(nome, valor)
                if isinstance(resposta, Fluxo):
                    self._fluxo(resposta)
                    return
                self.send_header('Content-Length', str(len(resposta)))
                self.end_headers()
                self.wfile.write(resposta)
                dono.contar(len(resposta))

            def _fluxo(self, fluxo: Fluxo):
                if fluxo.chunked:
                    self.send_header('Transfer-Encoding', 'chunked')
                else:
                    self.send_header('Connection', 'close')
                    self.close_connection = True
                self.end_headers()
                try:
                    for pedaco in fluxo.pedacos:
                        if dono.parado.is_set():
                            break
                        if fluxo.chunked:
                            pedaco = b'%x\r\n%s\r\n' % (len(pedaco), pedaco)
                        self.wfile.write(pedaco)
                        self.wfile.flush()
                        dono.contar(len(pedaco))
                    else:
                        if fluxo.chunked:
                            self.wfile.write(b'0\r\n\r\n')
                except OSError:  # o cliente fechou: o que se queria provar
                    self.close_connection = True

            do_GET = do_POST = do_PUT = do_DELETE = _atender  # noqa: N815 - nomes do http.server

            def log_message(self, *args):
                pass

        self._servidor = http.server.ThreadingHTTPServer((host, 0), Atendente)
        self._servidor.daemon_threads = True
        if tls is not None:  # `tls`: o contexto do servidor (cert e chave)
            self._servidor.socket = tls.wrap_socket(self._servidor.socket, server_side=True)
        self.url = '%s://%s:%d' % (
            'https' if tls else 'http',
            host,
            self._servidor.server_address[1],
        )
        self._thread = threading.Thread(target=self._servidor.serve_forever, daemon=True)
        self._thread.start()

    def contar(self, n: int) -> None:
        with self._trava:
            self.enviados += n

    def parar(self) -> None:
        self.parado.set()
        self._servidor.shutdown()
        self._servidor.server_close()

    def __enter__(self) -> ServidorHostil:
        return self

    def __exit__(self, *_: object) -> None:
        self.parar()


def eco_html(status: int | Callable[[Pedido], int]) -> Callable[[Pedido], Resposta]:
    """Uma página HTML de erro/depuracao que devolve os cabeçalhos e o corpo do pedido."""

    def responder(pedido: Pedido) -> Resposta:
        # Authorization primeiro: e o que cabe em qualquer corte de mensagem.
        linhas = [
            '<tr><td>%s</td><td>%s</td></tr>' % item
            for item in sorted(
                pedido.cabecalhos.items(), key=lambda item: item[0].lower() != 'authorization'
            )
        ]
        corpo = '<html><body><h1>Proxy debug</h1><table>%s</table><pre>%s</pre></body></html>' % (
            ''.join(linhas),
            pedido.corpo.decode('utf-8', 'replace'),
        )
        codigo = status(pedido) if callable(status) else status
        return codigo, {'Content-Type': 'text/html'}, corpo.encode('utf-8')

    return responder


def redirecionar(status: int, destino: str) -> Callable[[Pedido], Resposta]:
    """Responde `status` (301/302/307/308) mandando o cliente para `destino` + o mesmo caminho."""

    def responder(pedido: Pedido) -> Resposta:
        return status, {'Location': destino.rstrip('/') + pedido.caminho}, b''

    return responder


def intake_falso() -> Callable[[Pedido], Resposta]:
    """Aceita tudo como um intake (contagens validas): o destino que não pode receber nada."""

    def responder(pedido: Pedido) -> Resposta:
        try:
            recebidos = len(json.loads(pedido.corpo or b'{}').get('records') or [])
        except (ValueError, AttributeError):
            recebidos = 0
        corpo = {
            'inserted': recebidos,
            'updated': 0,
            'duplicates': 0,
            'received': recebidos,
            'removed': 0,
            'id': 1,
            'project_id': 1,
            'external_id': 'x',
            'name': 'x',
            'projetos': [],
            'remove': True,
        }
        return 200, {'Content-Type': 'application/json'}, json.dumps(corpo).encode()

    return responder


def _json_de(corpo: dict[str, object]) -> bytes:
    return json.dumps(corpo).encode()


def corpo_sem_fim(pedaco: int = 64 * 1024) -> Callable[[Pedido], Resposta]:
    """200 cujo corpo nunca termina: pedaços de `pedaco` bytes mandados o mais rápido possível."""

    def pedacos() -> Iterator[bytes]:
        bloco = b'x' * pedaco
        while True:
            yield bloco

    def responder(pedido: Pedido) -> Resposta:
        return 200, {'Content-Type': 'application/json'}, Fluxo(pedacos())

    return responder


def gotejar(intervalo: float = 0.5, chunked: bool = True) -> Callable[[Pedido], Resposta]:
    """200 que manda um byte a cada `intervalo` s, para sempre: nenhum timeout de leitura vence."""

    def pedacos() -> Iterator[bytes]:
        while True:
            yield b' '
            time.sleep(intervalo)

    def responder(pedido: Pedido) -> Resposta:
        return 200, {'Content-Type': 'application/json'}, Fluxo(pedacos(), chunked)

    return responder


def corpo_grande(tamanho: int, declarado: bool = True) -> Callable[[Pedido], Resposta]:
    """
    200 com um JSON VÁLIDO de `tamanho` bytes, com as contagens do intake e o
    que `quem_sou`, capacidades e o admin esperam: lido inteiro, passaria por
    resposta boa. `declarado`: com Content-Length; senão, chunked em pedaços.
    """

    def responder(pedido: Pedido) -> Resposta:
        resposta = json.loads(intake_falso()(pedido)[2])
        resposta['enchimento'] = ''
        vazio = len(_json_de(resposta))
        resposta['enchimento'] = 'x' * max(tamanho - vazio, 0)
        corpo = _json_de(resposta)
        if declarado:
            return 200, {'Content-Type': 'application/json'}, corpo
        pedacos = [corpo[i : i + 64 * 1024] for i in range(0, len(corpo), 64 * 1024)]
        return 200, {'Content-Type': 'application/json'}, Fluxo(pedacos)

    return responder
