"""
Corpo comprimido (`Content-Encoding: gzip`) no Contextia local.

O servidor anuncia `compressão: ["gzip"]` em capacidades, e o cliente do SDK só
comprime para quem anuncia. Este middleware ASGI descomprime o corpo EM STREAMING
e conta o limite de bytes do lote (capacidades.max_bytes_per_batch) DEPOIS da
descompressao: uma bomba de gzip (poucos KB que viram GB) para no limite, com o
413 de sempre, sem nunca ter mais que o limite em memória. Outra codificação
(br, deflate...) e 415. A rota recebe o corpo já descomprimido, com o
Content-Length dele (a conferência de tamanho da rota vê o tamanho real).
"""

from __future__ import annotations

import json
import zlib

from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Pedaco maximo que o zlib devolve por vez: a memoria nunca passa do limite + isto.
_PEDACO = 256 * 1024


async def _responder(send: Send, status: int, erro: str, detalhe: str) -> None:
    corpo = json.dumps({'erro': erro, 'detail': detalhe}, ensure_ascii=False).encode('utf-8')
    await send(
        {
            'type': 'http.response.start',
            'status': status,
            'headers': [
                (b'content-type', b'application/json'),
                (b'content-length', str(len(corpo)).encode()),
            ],
        }
    )
    await send({'type': 'http.response.body', 'body': corpo})


class MiddlewareDeCompressao:
    """Descomprime `Content-Encoding: gzip` com o limite de bytes contado depois."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope['type'] != 'http':
            await self.app(scope, receive, send)
            return
        cabecalhos = [(k, v) for k, v in scope['headers']]
        codificacao = next(
            (
                v.decode('latin-1').strip().lower()
                for k, v in cabecalhos
                if k == b'content-encoding'
            ),
            '',
        )
        if codificacao in ('', 'identity'):
            await self.app(scope, receive, send)
            return
        if codificacao != 'gzip':
            await _responder(
                send,
                415,
                'codificacao_nao_suportada',
                'Content-Encoding %r não é aceito; este servidor só anuncia'
                ' compressão ["gzip"] em capacidades.' % codificacao[:40],
            )
            return
        descompressor = zlib.decompressobj(wbits=31)  # 31: cabecalho gzip
        partes: list[bytes] = []
        total = 0
        mais = True
        while mais:
            mensagem = await receive()
            if mensagem['type'] != 'http.request':
                return  # cliente desconectou
            pendente: bytes = mensagem.get('body', b'')
            mais = bool(mensagem.get('more_body', False))
            try:
                while pendente:
                    # max_length: nunca mais que o que falta para o limite (+1 para saber
                    # que passou), por vez -- a bomba nao chega a ser descomprimida.
                    pedaco = descompressor.decompress(
                        pendente, min(_PEDACO, self.max_bytes - total + 1)
                    )
                    total += len(pedaco)
                    if total > self.max_bytes:
                        await _recusar_tamanho(send, self.max_bytes)
                        return
                    partes.append(pedaco)
                    pendente = descompressor.unconsumed_tail
            except zlib.error as erro:
                await _responder(
                    send,
                    400,
                    'gzip_invalido',
                    'corpo com Content-Encoding gzip não é gzip válido (%s).'
                    ' Nada foi gravado.' % erro,
                )
                return
        if not descompressor.eof:
            await _responder(
                send, 400, 'gzip_invalido', 'corpo gzip cortado antes do fim. Nada foi gravado.'
            )
            return
        corpo = b''.join(partes)
        novos = [(k, v) for k, v in cabecalhos if k not in (b'content-encoding', b'content-length')]
        novos.append((b'content-length', str(len(corpo)).encode()))
        entregue = False

        async def receber() -> Message:
            nonlocal entregue
            if entregue:
                return await receive()
            entregue = True
            return {'type': 'http.request', 'body': corpo, 'more_body': False}

        escopo: Scope = dict(scope, headers=novos)
        await self.app(escopo, receber, send)


async def _recusar_tamanho(send: Send, limite: int) -> None:
    await _responder(
        send,
        413,
        'lote_grande',
        'lote passa de %d bytes DEPOIS de descomprimido, o limite deste servidor'
        ' (capacidades.max_bytes_per_batch). O cliente divide o lote ao'
        ' receber 413.' % limite,
    )
