"""
Injeção de falhas: o servidor local erra de propósito, só com `--falhas`.

Serve para provar, contra HTTP de verdade, que o cliente sobrevive ao que a
rede e um servidor sobrecarregado fazem. Tipos:

    '500', '503'   responde o status sem processar o pedido
    '429'          responde 429 com `Retry-After: <retry_after>` (padrão 1 s)
    'atraso'       dorme `segundos` (padrão 1) e depois processa normalmente
    'derrubar'     derruba a conexão no meio da resposta: o cabeçalho promete
                   mais bytes do que chegam e o socket fecha. Com `quando=
                   'depois'` (padrão) o pedido FOI processado -- o caso que
                   prova que o reenvio é idempotente; com 'antes', não foi.
    'corpo_invalido'  responde 200 com um corpo que não são as contagens do
                   intake: `corpo` (padrão: uma página HTML, como a de um
                   proxy), dito como application/json. Com `quando='antes'`
                   (padrão) o pedido não foi processado; com 'depois', foi.

Duas formas de ligar: uma fila (`injetar`: as próximas N respostas) e uma
taxa aleatória por tipo (`taxa`: para o teste de tortura). Só os caminhos
que comecam com `caminho` (padrão '/api/v1/intake') são afetados: /saude e
o próprio controle das falhas nunca falham.
"""

import asyncio
import json
import math
import random
import threading
from typing import TypedDict, Unpack

from starlette.types import ASGIApp, Message, Receive, Scope, Send

TIPOS = ('500', '503', '429', 'atraso', 'derrubar', 'corpo_invalido')
CAMINHO_PADRAO = '/api/v1/intake'
CORPO_INVALIDO = '<html><body>Serviço temporariamente indisponível</body></html>'


class OpcoesDaFalha(TypedDict, total=False):
    """As opções de uma falha da fila (os campos opcionais de `modelos.PedidoFalha`)."""

    retry_after: float
    segundos: float
    quando: str
    corpo: str


class ResumoDasFalhas(TypedDict):
    """O que as rotas de controle das falhas respondem (`EstadoDeFalhas.resumo`)."""

    injetadas: dict[str, int]
    pendentes: int
    taxas: dict[str, float]


class EstadoDeFalhas:
    """Fila, taxas e contadores; compartilhado pelas threads do servidor."""

    def __init__(self, semente: int | None = None) -> None:
        self._lock = threading.Lock()
        self._fila: list[tuple[str, str, OpcoesDaFalha]] = []
        self._taxas: dict[str, float] = {}
        self._caminho_taxas = CAMINHO_PADRAO
        self._sorteio = random.Random(semente)
        self.contadores = {t: 0 for t in TIPOS}

    def injetar(
        self,
        tipo: str,
        quantidade: int = 1,
        caminho: str | None = None,
        **opcoes: Unpack[OpcoesDaFalha],
    ) -> None:
        with self._lock:
            for _ in range(quantidade):
                self._fila.append((tipo, caminho or CAMINHO_PADRAO, opcoes))

    def definir_taxas(
        self, taxas: dict[str, float], caminho: str | None = None, semente: int | None = None
    ) -> None:
        with self._lock:
            self._taxas = dict(taxas)
            self._caminho_taxas = caminho or CAMINHO_PADRAO
            if semente is not None:
                self._sorteio = random.Random(semente)

    def limpar(self) -> None:
        with self._lock:
            self._fila = []
            self._taxas = {}
            self.contadores = {t: 0 for t in TIPOS}

    def resumo(self) -> ResumoDasFalhas:
        with self._lock:
            return {
                'injetadas': dict(self.contadores),
                'pendentes': len(self._fila),
                'taxas': dict(self._taxas),
            }

    def sortear(self, caminho: str) -> tuple[str, OpcoesDaFalha] | None:
        """A falha a aplicar neste pedido (tipo, opções), ou None."""
        with self._lock:
            for posicao, (tipo, prefixo, opcoes) in enumerate(self._fila):
                if caminho.startswith(prefixo):
                    del self._fila[posicao]
                    self.contadores[tipo] += 1
                    return tipo, opcoes
            if self._taxas and caminho.startswith(self._caminho_taxas):
                for tipo, fracao in sorted(self._taxas.items()):
                    if self._sorteio.random() < fracao:
                        self.contadores[tipo] += 1
                        return tipo, {}
        return None


class MiddlewareDeFalhas:
    """Middleware ASGI puro: precisa controlar os bytes da resposta para derrubar."""

    def __init__(self, app: ASGIApp, estado: EstadoDeFalhas) -> None:
        self.app = app
        self.estado = estado

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope['type'] != 'http':
            await self.app(scope, receive, send)
            return
        falha = self.estado.sortear(scope['path'])
        if falha is None:
            await self.app(scope, receive, send)
            return
        tipo, opcoes = falha
        if tipo == 'atraso':
            await asyncio.sleep(float(opcoes.get('segundos', 1)))
            await self.app(scope, receive, send)
            return
        if tipo in ('500', '503', '429'):
            await _drenar(receive)
            cabecalhos = [(b'content-type', b'application/json')]
            if tipo == '429' or 'retry_after' in opcoes:
                # Retry-After so aceita segundos inteiros (RFC 9110).
                segundos = int(math.ceil(float(opcoes.get('retry_after', 1))))
                cabecalhos.append((b'retry-after', str(segundos).encode()))
            corpo = json.dumps(
                {'detail': 'falha injetada (%s) pelo --falhas do servidor local' % tipo}
            ).encode()
            cabecalhos.append((b'content-length', str(len(corpo)).encode()))
            await send({'type': 'http.response.start', 'status': int(tipo), 'headers': cabecalhos})
            await send({'type': 'http.response.body', 'body': corpo})
            return
        if tipo == 'corpo_invalido':
            if opcoes.get('quando', 'antes') == 'depois':
                await self.app(scope, receive, _descartar)
            else:
                await _drenar(receive)
            corpo = str(opcoes.get('corpo', CORPO_INVALIDO)).encode('utf-8')
            await send(
                {
                    'type': 'http.response.start',
                    'status': 200,
                    'headers': [
                        (b'content-type', b'application/json'),
                        (b'content-length', str(len(corpo)).encode()),
                    ],
                }
            )
            await send({'type': 'http.response.body', 'body': corpo})
            return
        # derrubar
        if opcoes.get('quando', 'depois') == 'antes':
            await _drenar(receive)
            await _meia_resposta(send, 200, [], b'{"inserted":')
            return
        capturado: Message = {}
        partes: list[bytes] = []

        async def guardar(mensagem: Message) -> None:
            if mensagem['type'] == 'http.response.start':
                capturado.update(mensagem)
            elif mensagem['type'] == 'http.response.body':
                partes.append(mensagem.get('body', b''))

        await self.app(scope, receive, guardar)
        corpo = b''.join(partes)
        cabecalhos = [
            (k, v) for k, v in capturado.get('headers', []) if k.lower() != b'content-length'
        ]
        await _meia_resposta(
            send, capturado.get('status', 200), cabecalhos, corpo[: max(1, len(corpo) // 2)]
        )


async def _meia_resposta(
    send: Send, status: int, cabecalhos: list[tuple[bytes, bytes]], pedaco: bytes
) -> None:
    # Promete o dobro e entrega a metade; ao retornar sem `more_body=False`
    # o uvicorn fecha o socket, e o cliente ve a conexao cair no meio do corpo.
    await send(
        {
            'type': 'http.response.start',
            'status': status,
            'headers': cabecalhos + [(b'content-length', str(len(pedaco) * 2 + 16).encode())],
        }
    )
    await send({'type': 'http.response.body', 'body': pedaco, 'more_body': True})


async def _descartar(mensagem: Message) -> None:  # noqa: ARG001 - um `send` que joga fora
    return None


async def _drenar(receive: Receive) -> None:
    while True:
        mensagem = await receive()
        if mensagem['type'] != 'http.request' or not mensagem.get('more_body'):
            return
