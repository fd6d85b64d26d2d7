"""
O que o servidor respondeu, lido para quem chama: o motivo em uma linha, o
JSON (ou o erro que diz que não é o Contextia), a chave recusada, as contagens
de um lote aceito e o motivo de um registro recusado sozinho.

Todo texto do servidor passa por `transporte.texto_da_resposta` ou `mascarar`:
um proxy que ecoa os cabeçalhos poria a chave no log.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, cast

from contextia_sync.intake.transporte import (
    ErroContextia,
    RespostaInvalida,
    autorizacao_enviada,
    mascarar,
    mascarar_chave,
    servidor,
    texto_da_resposta,
)
from contextia_sync.tipos import JsonDecodificado

try:
    import orjson as _orjson

    # O orjson anterior ao 3.9 não tem o Fragment: como sem o orjson.
    _Fragmento: type[Fragment] | None = getattr(_orjson, 'Fragment', None)
except ImportError:  # sem o orjson: sem registros prontos
    _Fragmento = None

if TYPE_CHECKING:
    import requests
    from orjson import Fragment

    from contextia_sync.intake.serializacao import Registro, RegistroDoCorpo


class ErroAutenticacao(ErroContextia):
    """Chave de projeto ou token de admin recusado (401/403)."""


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


def json_da_resposta(resposta: requests.Response) -> JsonDecodificado:
    """O corpo JSON da resposta; ErroContextia (a URL aponta para o Contextia?) se não é."""
    try:
        return resposta.json()
    except ValueError:
        raise ErroContextia(
            '%s respondeu HTTP %d sem JSON (%s). CONTEXTIA_URL aponta para'
            ' o Contextia?'
            % (servidor(resposta.url or ''), resposta.status_code, texto_da_resposta(resposta))
        ) from None


def codigo_de_erro(resposta: requests.Response) -> JsonDecodificado:
    """O campo `erro` do JSON da resposta (ex.: 'remocao_acima_do_teto'), ou None."""
    try:
        return resposta.json().get('erro')
    except (ValueError, AttributeError):
        return None


def quem(escopo: object, dataset: str | None = None) -> str:
    """'do escopo X (dataset d)' ou 'do projeto desta chave', para as mensagens."""
    alvo = 'do escopo %s' % escopo if escopo is not None else 'do projeto desta chave'
    return alvo + (' (dataset %s)' % dataset if dataset else '')


def erro_autenticacao(
    resposta: requests.Response, escopo: object, dataset: str | None, chave: str
) -> ErroAutenticacao:
    """O 401/403 como ErroAutenticacao: de quem é a chave, o prefixo dela e a correção."""
    return ErroAutenticacao(
        'Contextia recusou a chave %s [%s]: HTTP %d, %s. Correção: confira o arquivo'
        ' de chaves ou emita outra (provisionar.py --somente-escopo=%s).'
        % (
            quem(escopo, dataset),
            mascarar_chave(chave),
            resposta.status_code,
            mascarar(detalhe_da_resposta(resposta), chave).rstrip('.'),
            escopo if escopo is not None else '<escopo>',
        )
    )


# ---------------------------------------------------------------- o lote aceito
CONTAGENS = ('inserted', 'updated', 'duplicates')


def _inteiro(valor: object) -> bool:
    return isinstance(valor, int) and not isinstance(valor, bool) and valor >= 0


def contagens(resposta: requests.Response, enviados: int, contexto: str) -> dict[str, int]:
    """As contagens de um 2xx do intake; RespostaInvalida se o corpo não é isso."""
    try:
        corpo = resposta.json()
    except ValueError:
        # 200 que nao e JSON: proxy ou pagina de erro no caminho, nao o intake.
        raise RespostaInvalida(
            '%s: HTTP %d sem JSON de contagens (%s) -- CONTEXTIA_URL aponta para o'
            ' intake? O lote conta como falho (pode ter sido gravado ou não; o reenvio'
            ' é idempotente)' % (contexto, resposta.status_code, texto_da_resposta(resposta))
        ) from None
    faltam = list(CONTAGENS)
    if isinstance(corpo, dict):
        faltam = [c for c in CONTAGENS if not _inteiro(corpo.get(c))]
        faltam += [c for c in ('received', 'removed') if c in corpo and not _inteiro(corpo[c])]
    if faltam:
        raise RespostaInvalida(
            '%s: HTTP %d com um corpo que não são as contagens do intake (%s; sem inteiro'
            ' em %s) -- CONTEXTIA_URL aponta para o intake? O lote conta como falho (pode'
            ' ter sido gravado ou não; o reenvio é idempotente)'
            % (contexto, resposta.status_code, texto_da_resposta(resposta), ', '.join(faltam))
        )
    if 'received' in corpo and corpo['received'] != enviados:
        raise RespostaInvalida(
            '%s: o intake diz que recebeu %d registro(s) de %d enviados; o lote conta como'
            ' falho (o reenvio é idempotente)' % (contexto, corpo['received'], enviados)
        )
    return {c: int(corpo.get(c) or 0) for c in CONTAGENS + ('removed',)}


# ---------------------------------------------------------------- o registro recusado
def legivel(registro: RegistroDoCorpo) -> Registro:
    """O registro como dict, também o pronto (o JSON dele) de `preparador_de_prontos`."""
    if _Fragmento is not None and isinstance(registro, _Fragmento):
        # (O pronto é o JSON de um registro, feito pelo preparador: um objeto.)
        return cast('Registro', json.loads(_orjson.dumps(registro)))  # o Fragment so se le assim
    # (Sem o orjson não há pronto: é o registro.)
    return cast('Registro', registro)


def motivo_da_recusa(resposta: requests.Response, registro: RegistroDoCorpo, chave: str) -> str:
    """Por que o intake recusou um registro sozinho, com a correção (413: o tamanho dele)."""
    registro = legivel(registro)
    detalhe = mascarar(detalhe_da_resposta(resposta), chave).strip()
    if resposta.status_code != 413:
        return 'HTTP %d: %s' % (resposta.status_code, detalhe)
    bytes_registro = len(
        json.dumps(registro, ensure_ascii=False, separators=(',', ':'), default=str).encode('utf-8')
    )
    tamanhos = {
        coluna: len(json.dumps(valor, ensure_ascii=False, default=str).encode('utf-8'))
        for coluna, valor in registro.items()
    }
    maior = max(tamanhos, key=lambda coluna: tamanhos[coluna]) if tamanhos else None
    return (
        'HTTP 413: o registro SOZINHO tem %d bytes e passa do limite de bytes do intake'
        ' (o servidor disse: %s). Diminuir o chunk não resolve. Correção: uma view que'
        ' trunque ou exclua a coluna grande%s -- ex.: LEFT/SUBSTRING na view, ou a'
        ' coluna fora de `columns` no mapeamento.'
        % (
            bytes_registro,
            detalhe.rstrip('.'),
            ' (a maior deste registro: %r, %d bytes)' % (maior, tamanhos[maior])
            if maior is not None
            else '',
        )
    )
