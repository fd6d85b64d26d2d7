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
lista vazia). `responder(pedido)` devolve (status, cabeçalhos, corpo).
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Callable
from typing import NamedTuple


class Pedido(NamedTuple):
    metodo: str
    caminho: str
    cabecalhos: dict[str, str]
    corpo: bytes


Resposta = tuple[int, dict[str, str], bytes]


class ServidorHostil:
    """Um http.server em 127.0.0.1 (porta livre) que responde `responder` e anota os pedidos."""

    def __init__(self, responder: Callable[[Pedido], Resposta], host: str = '127.0.0.1'):
        self.pedidos: list[Pedido] = []
        # Uma conexao TCP aberta conta mesmo sem pedido HTTP completo.
        self.conexoes = 0
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
                self.send_header('Content-Length', str(len(resposta)))
                self.end_headers()
                self.wfile.write(resposta)

            do_GET = do_POST = do_PUT = do_DELETE = _atender   # noqa: N815 - nomes do http.server

            def log_message(self, *args):
                pass

        self._servidor = http.server.ThreadingHTTPServer((host, 0), Atendente)
        self._servidor.daemon_threads = True
        self.url = 'http://%s:%d' % (host, self._servidor.server_address[1])
        self._thread = threading.Thread(target=self._servidor.serve_forever, daemon=True)
        self._thread.start()

    def parar(self) -> None:
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
        linhas = ['<tr><td>%s</td><td>%s</td></tr>' % item for item in sorted(
            pedido.cabecalhos.items(), key=lambda item: item[0].lower() != 'authorization')]
        corpo = ('<html><body><h1>Proxy debug</h1><table>%s</table><pre>%s</pre>'
                 '</body></html>' % (''.join(linhas), pedido.corpo.decode('utf-8', 'replace')))
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
        corpo = {'inserted': recebidos, 'updated': 0, 'duplicates': 0, 'received': recebidos,
                 'removed': 0, 'id': 1, 'project_id': 1, 'external_id': 'x', 'name': 'x',
                 'projetos': [], 'remove': True}
        return 200, {'Content-Type': 'application/json'}, json.dumps(corpo).encode()
    return responder
