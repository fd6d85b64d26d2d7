"""
Entregas de webhook, assinadas com HMAC-SHA256 do corpo cru.

Cabeçalhos de cada entrega (POST, corpo JSON):

    X-Contextia-Evento      'sync.completed' ou 'teste'
    X-Contextia-Entrega     id único da entrega (para o receptor deduplicar)
    X-Contextia-Assinatura  'sha256=' + hex(HMAC-SHA256(segredo, corpo cru))

O receptor confere com `contextia_sync.intake.cliente.verificar_assinatura`
sobre os bytes EXATOS recebidos, antes de fazer parse.

O servidor local só entrega para 127.0.0.0/8 (e `localhost`): este ambiente
não pode mandar tráfego para fora, e um servidor de teste que aceitasse
qualquer URL viraria um jeito de vazar dados por engano. Pelo mesmo motivo a
entrega nunca segue redirecionamento: um 3xx levaria o evento assinado para
um `Location` que ninguém conferiu (fora de 127.0.0.0/8, ou de https para
http); o 3xx e falha de entrega, e o erro nomeia o `Location`.
"""

import datetime
import hashlib
import hmac
import ipaddress
import json
import secrets
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from http.client import HTTPMessage
from typing import IO, TypedDict

from contextia_local.armazenamento import Webhook
from contextia_sync.tipos import Json

CABECALHO_ASSINATURA = 'X-Contextia-Assinatura'
CABECALHO_EVENTO = 'X-Contextia-Evento'
CABECALHO_ENTREGA = 'X-Contextia-Entrega'
EVENTOS = ('sync.completed', 'teste')


class Entrega(TypedDict):
    """O resultado de uma entrega: o status HTTP do receptor (None se inalcançável) e o erro."""

    status: int | None
    erro: str | None


def problema_na_url(url: str) -> str | None:
    """Texto do problema, ou None se a URL e aceitável (http(s) em 127.0.0.0/8)."""
    try:
        partes = urllib.parse.urlsplit(url)
        _ = partes.port  # porta fora de 0..65535 so aparece aqui (ValueError)
    except ValueError as erro:
        return 'url %r não é uma URL válida (%s).' % (url, erro)
    if partes.scheme not in ('http', 'https') or not partes.hostname:
        return 'url %r não é http(s)://host/...' % url
    if partes.hostname == 'localhost':
        return None
    try:
        endereco = ipaddress.ip_address(partes.hostname)
    except ValueError:
        return (
            'url %r: o servidor local só entrega para um IP em 127.0.0.0/8 ou'
            ' localhost (nada de nome de host: o ambiente não sai da máquina).' % url
        )
    if endereco not in ipaddress.ip_network('127.0.0.0/8'):
        return 'url %r: o servidor local só entrega para 127.0.0.0/8; %s fica fora.' % (
            url,
            endereco,
        )
    return None


def assinar(segredo: str, corpo: bytes) -> str:
    return 'sha256=' + hmac.new(segredo.encode('utf-8'), corpo, hashlib.sha256).hexdigest()


def entregar(webhook: Webhook, evento: str, dados: Json, timeout: float = 5.0) -> Entrega:
    """Entrega agora, de forma sincrona. Devolve {'status': int|None, 'erro': str|None}."""
    corpo = json.dumps(
        {
            'evento': evento,
            'entrega': 'ent_' + secrets.token_hex(8),
            'enviado_em': datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec='seconds'
            ),
            'project_id': webhook['project_id'],
            'dados': dados,
        },
        ensure_ascii=False,
        sort_keys=True,
    ).encode('utf-8')
    pedido = urllib.request.Request(
        webhook['url'],
        data=corpo,
        method='POST',
        headers={
            'Content-Type': 'application/json',
            CABECALHO_EVENTO: evento,
            CABECALHO_ENTREGA: json.loads(corpo)['entrega'],
            CABECALHO_ASSINATURA: assinar(webhook['_segredo'], corpo),
        },
    )
    # Nunca via proxy (a entrega e local por definicao) e nunca seguindo 3xx.
    abridor = urllib.request.build_opener(urllib.request.ProxyHandler({}), _SemRedirecionamento())
    try:
        with abridor.open(pedido, timeout=timeout) as resposta:
            return {'status': resposta.status, 'erro': None}
    except urllib.error.HTTPError as erro:
        if 300 <= erro.code < 400:
            return {
                'status': erro.code,
                'erro': (
                    'receptor respondeu HTTP %d com redirecionamento para %r: a entrega não'
                    ' segue redirecionamento e não foi feita. Registre o webhook com a URL'
                    ' final.' % (erro.code, erro.headers.get('Location'))
                ),
            }
        return {'status': erro.code, 'erro': 'receptor respondeu HTTP %d' % erro.code}
    except (urllib.error.URLError, OSError, ValueError) as erro:
        return {'status': None, 'erro': 'receptor inalcançável: %s' % erro}


class _SemRedirecionamento(urllib.request.HTTPRedirectHandler):
    """Todo 3xx chega a `entregar` como HTTPError, com o `Location` nos cabeçalhos."""

    def redirect_request(
        self,
        req: urllib.request.Request,  # noqa: ARG002
        fp: IO[bytes],  # noqa: ARG002
        code: int,  # noqa: ARG002
        msg: str,  # noqa: ARG002
        headers: HTTPMessage,  # noqa: ARG002
        newurl: str,  # noqa: ARG002
    ) -> None:  # noqa: ARG002
        return None


def entregar_em_segundo_plano(webhooks: Iterable[Webhook], evento: str, dados: Json) -> None:
    """Dispara as entregas sem segurar a resposta do intake."""
    for webhook in webhooks:
        if evento in webhook['eventos'] and problema_na_url(webhook['url']) is None:
            threading.Thread(target=entregar, args=(webhook, evento, dados), daemon=True).start()
