"""
O corpo do pedido no Contextia local: quem pode mandar, quanto e o que.

O FastAPI lê o corpo inteiro para a memória **antes** de rodar as dependências
(a autenticação inclusive) e só depois olharia `Content-Length`. Sem isto, um
pedido chunked de 300 MB sem chave nenhuma fazia o servidor crescer 765 MiB
antes do 401, e 2 milhões de registros pequenos viravam 2 GiB de objetos antes
de qualquer limite. Aqui, na ordem, para toda rota que tem corpo:

1. a autenticação que a rota exige (a mesma função da dependência dela), antes
   de ler um byte do corpo -- recusa sem chave responde já e fecha a conexão;
2. `Content-Length` acima do limite da rota: 413 sem ler nada;
3. o corpo lido em pedaços, contando os bytes que chegam de fato (chunked, ou
   um `Content-Length` que mente): passou do limite, 413 na hora, sem ler o
   resto;
4. o JSON lido estrito: NaN, Infinity e número fora do alcance do float
   (`1e400`) são 422 nomeando o campo (viravam 500 ao gravar); no envelope do
   intake, os registros são lidos um a um e a leitura para no primeiro além do
   limite de registros (413) -- milhões de registros nunca viram objetos.

O lote comum é lido de uma vez pelo `orjson`: o mesmo documento, ~3× mais
rápido. Tudo o que o `orjson` lê diferente do `json` volta ao leitor estrito
acima, que dá o resultado e as recusas de sempre: o que ele recusa (NaN,
Infinity, `1e400`, surrogate solto, UTF-16, aninhamento fundo) e o inteiro de
19 dígitos ou mais (ele o leria como float). O limite de registros vale igual,
contado depois da leitura -- e por isso só lê assim o corpo que não pode virar
milhões de objetos: com menos vírgulas que o limite de registros (nenhuma lista
dele passa do limite), ou de até `LIMITE_LEITURA_RAPIDA` bytes (o pior caso,
só `{}`, fica em ~25 MiB de objetos).

`classe_de_rota` devolve a `APIRoute` que faz isso; `dependencias.py` diz, rota
a rota, a regra (`RegraDoCorpo`).
"""

import dataclasses
import json
import math
import re
import types
from collections.abc import Awaitable, Callable, Coroutine, Iterable

from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.datastructures import Headers

from contextia_local.armazenamento import ErroRegra, registros_simples
from contextia_sync.tipos import JsonDecodificado

LIMITE_DRENAGEM = 64 * 1024
"""Corpo declarado até este tamanho é descartado pelo uvicorn depois de uma
recusa (a conexão segue); maior, ou chunked, a conexão é fechada sem ler o
resto. Fechar com bytes não lidos faz o kernel mandar RST, e o cliente pode
perder a resposta: para o corpo pequeno, já no buffer, não vale o risco."""

LIMITE_LEITURA_RAPIDA = 1024 * 1024
"""Corpo até este tamanho (ou com menos vírgulas que o limite de registros) é
lido de uma vez pelo orjson; maior, registro a registro."""

_ESPACO = re.compile(r'[ \t\n\r]*')

try:
    import orjson as _orjson_importado

    _orjson: types.ModuleType | None = _orjson_importado
except ImportError:  # sem o pacote: sempre o leitor estrito
    _orjson = None

# O corpo traduzido byte a byte para achar inteiro longo sem um regex (lento):
# dígito vira '0', espaço em branco vira ' ', o que pode preceder um número fora
# de texto (`:`, `,`, `[`, `-`) fica, e todo o resto vira 'x'.
_TRADUCAO = bytes(
    ord('0')
    if chr(i).isdigit() and i < 128
    else ord(' ')
    if i in b' \t\n\r'
    else i
    if i in b':,[-'
    else ord('x')
    for i in range(256)
)
_DIGITOS_LONGOS = b'0' * 19


@dataclasses.dataclass(frozen=True)
class RegraDoCorpo:
    """O que vale para o corpo de uma rota antes de o FastAPI o ler."""

    # Levanta ErroRegra (401/403) se o pedido não pode mandar corpo a esta rota.
    autenticar: Callable[[Request], Awaitable[None]] | None
    max_bytes: int
    # Só no envelope do intake: quantos itens de `records` ele pode ter.
    max_registros: int | None = None


RegraDoPedido = Callable[[Request], RegraDoCorpo]
"""A regra de uma rota para um pedido: os limites do lote vêm do app que o recebe."""


class PedidoLimitado(Request):
    """Um `Request` cujo `body()` e `json()` obedecem a uma `RegraDoCorpo`."""

    regra: RegraDoCorpo

    async def body(self) -> bytes:
        if not hasattr(self, '_body'):
            limite = self.regra.max_bytes
            declarado = _content_length(self.headers)
            if declarado is not None and declarado > limite:
                raise _corpo_grande(
                    self.regra,
                    'o corpo declara %d bytes (Content-Length), acima do limite' % declarado,
                )
            # Os pedaços juntados uma vez no fim (o join de um só não o copia).
            pedacos: list[bytes] = []
            tamanho = 0
            async for pedaco in self.stream():
                if not pedaco:
                    continue
                pedacos.append(pedaco)
                tamanho += len(pedaco)
                if tamanho > limite:
                    raise _corpo_grande(self.regra, 'a leitura do corpo parou ao passar do limite')
            self._body = b''.join(pedacos)
        return self._body

    # Se os registros do envelope lido são só de valores simples (ver
    # `armazenamento.registros_simples`): conferido aqui, na leitura, e não de
    # novo ao gravar.
    registros_simples = False

    async def json(self) -> JsonDecodificado:
        if not hasattr(self, '_json'):
            self._json, self.registros_simples = _ler(await self.body(), self.regra.max_registros)
        return self._json


def classe_de_rota(regra_da_rota: Callable[[APIRoute], RegraDoPedido]) -> type[APIRoute]:
    """
    A classe de rota dos roteadores do app: para as rotas com corpo, aplica
    `regra_da_rota(rota)(pedido)` antes de o FastAPI ler o corpo.
    """

    class RotaComCorpoLimitado(APIRoute):
        def get_route_handler(self) -> Callable[[Request], Coroutine[object, object, Response]]:
            original = super().get_route_handler()
            if self.body_field is None:
                return original
            regra_do_pedido = regra_da_rota(self)

            async def tratar(request: Request) -> Response:
                regra = regra_do_pedido(request)
                if regra.autenticar is not None:
                    try:
                        await regra.autenticar(request)
                    except ErroRegra as erro:
                        erro.fechar_conexao = _vai_sobrar_corpo(request.headers)
                        raise
                pedido = PedidoLimitado(request.scope, request.receive)
                pedido.regra = regra
                # Lido aqui, e não dentro do FastAPI: lá qualquer exceção ao ler o
                # corpo vira um 400 genérico, e a recusa tem de dizer o porquê.
                await pedido.body()
                if _parece_json(pedido.headers):
                    try:
                        await pedido.json()
                    except json.JSONDecodeError:
                        # JSON malformado: o FastAPI responde o 422 dele (json_invalid,
                        # com a posição), como sempre respondeu.
                        pass
                return await original(pedido)

            return tratar

    return RotaComCorpoLimitado


# ---------------------------------------------------------------- JSON estrito
class _NaoFinito:
    """Marca no lugar de NaN/Infinity/1e400: o caminho dele é achado depois."""

    def __init__(self, texto: str) -> None:
        self.texto = texto


class _Leitor:
    def __init__(self) -> None:
        self.nao_finitos = 0
        self.decodificador = json.JSONDecoder(
            parse_float=self._numero, parse_constant=self._constante
        )

    def _constante(self, texto: str) -> _NaoFinito:
        self.nao_finitos += 1
        return _NaoFinito(texto)

    def _numero(self, texto: str) -> float | _NaoFinito:
        valor = float(texto)
        if math.isfinite(valor):
            return valor
        return self._constante(texto)

    def valor(self, texto: str, posicao: int) -> tuple[JsonDecodificado, int]:
        return self.decodificador.raw_decode(texto, posicao)


def _ler(corpo: bytes, max_registros: int | None) -> tuple[JsonDecodificado, bool]:
    """
    (O documento JSON de `corpo`, estrito; se os registros do envelope são
    simples). Com `max_registros`, o documento é um envelope do intake e
    `records` com mais itens que isso é 413 (sem ler o resto). Levanta
    json.JSONDecodeError para JSON malformado e ErroRegra para o que é JSON
    mas não pode ser aceito.
    """
    # O orjson só lê UTF-8 válido: o corpo que ele leu não precisa ser decodificado
    # (o que ele recusa é decodificado abaixo e dá a recusa de sempre).
    rapido = _ler_rapido(corpo, max_registros)
    if rapido is not None:
        return rapido
    try:
        texto = corpo.decode(json.detect_encoding(corpo), 'surrogatepass')
    except UnicodeDecodeError as erro:
        raise ErroRegra(
            422,
            'json_invalido',
            'o corpo não é texto UTF-8 válido (byte %d):'
            ' o JSON do pedido tem de ser UTF-8.' % erro.start,
        ) from None
    leitor = _Leitor()
    try:
        if max_registros is None:
            documento = leitor.decodificador.decode(texto)
        else:
            documento = _ler_envelope(texto, leitor, max_registros)
    except RecursionError:
        raise ErroRegra(
            422,
            'json_profundo',
            'o JSON do pedido tem listas ou objetos'
            ' aninhados fundo demais (centenas de níveis). Achate o valor'
            ' ou envie-o como texto.',
        ) from None
    except ValueError as erro:
        if isinstance(erro, json.JSONDecodeError):
            raise
        # int() do decodificador: número com mais dígitos que o Python converte.
        raise ErroRegra(
            422,
            'numero_invalido',
            'o JSON do pedido tem um número que não pode ser lido (%s). Envie-o como texto.' % erro,
        ) from None
    achado = _primeiro_nao_finito(documento, '') if leitor.nao_finitos else None
    if achado is not None:
        caminho, texto_valor = achado
        raise ErroRegra(
            422,
            'numero_nao_finito',
            '%s: o número %s não é finito. JSON não'
            ' representa NaN, Infinity nem número fora do alcance do float'
            ' (como 1e400); envie o valor como texto ou corrija-o na origem.'
            % (caminho or 'corpo', texto_valor),
        )
    return documento, False


def _ler_rapido(corpo: bytes, max_registros: int | None) -> tuple[JsonDecodificado, bool] | None:
    """
    (documento, registros simples) pelo orjson, ou None quando o leitor estrito
    tem de ler: o corpo é grande, o orjson o recusa, ou há um inteiro que ele
    leria diferente.
    """
    if _orjson is None:
        return None
    if len(corpo) > LIMITE_LEITURA_RAPIDA and (
        max_registros is None or corpo.count(b',') >= max_registros
    ):
        return None
    try:
        documento = _orjson.loads(corpo)
    except _orjson.JSONDecodeError:
        return None
    simples = False
    if max_registros is not None and type(documento) is dict:
        registros = documento.get('records')
        if type(registros) is list:
            if len(registros) > max_registros:
                raise _lote_grande(max_registros)
            simples = registros_simples(registros)
    # O inteiro que o orjson leria diferente vira float: o envelope de registros
    # simples e sem float no resto não tem nenhum, e o corpo não é varrido.
    if simples and not _tem_float(v for k, v in documento.items() if k != 'records'):
        return documento, True
    if _inteiro_longo(corpo):
        return None
    return documento, simples


def _tem_float(valores: Iterable[JsonDecodificado]) -> bool:
    """Se há um float em `valores` ou dentro deles (sem recursão: o aninhamento pode ser fundo)."""
    pendentes = [iter(valores)]
    while pendentes:
        for valor in pendentes[-1]:
            tipo = type(valor)
            if tipo is float:
                return True
            if tipo is dict or tipo is list:
                pendentes.append(iter(valor.values() if tipo is dict else valor))
                break
        else:
            pendentes.pop()
    return False


def _inteiro_longo(corpo: bytes) -> bool:
    """
    Se o corpo pode ter um número de 19 dígitos ou mais fora de texto (o orjson
    lê inteiro além de 64 bits como float). Dígitos dentro de texto (a chave de
    uma NF-e) vêm depois de aspas ou de uma letra: não contam.
    """
    traduzido = corpo.translate(_TRADUCAO)
    posicao = traduzido.find(_DIGITOS_LONGOS)
    while posicao != -1:
        antes = posicao - 1
        while antes >= 0 and traduzido[antes] in b' -':
            antes -= 1
        if antes < 0 or traduzido[antes] in b':,[':
            return True
        posicao = traduzido.find(_DIGITOS_LONGOS, posicao + len(_DIGITOS_LONGOS))
    return False


def _lote_grande(max_registros: int) -> ErroRegra:
    return ErroRegra(
        413,
        'lote_grande',
        'lote com mais de %d registros passa do'
        ' limite deste servidor (capacidades.max_records_per_batch).'
        ' Divida o lote (o cliente divide sozinho ao receber 413).' % max_registros,
    )


def _ler_envelope(texto: str, leitor: _Leitor, max_registros: int) -> JsonDecodificado:
    # O nível de cima à mão; cada valor (e cada registro) pelo decodificador C do
    # json. Assim `records` cresce um registro por vez e a leitura para no
    # primeiro além do limite. Fora de objeto no topo, o documento é lido
    # inteiro: não é um envelope, e o FastAPI diz por quê.
    posicao = _pular(texto, 0)
    if texto[posicao : posicao + 1] != '{':
        return leitor.decodificador.decode(texto)
    envelope: dict[str, JsonDecodificado] = {}
    posicao = _pular(texto, posicao + 1)
    if texto[posicao : posicao + 1] == '}':
        return _fim(texto, posicao + 1, envelope)
    while True:
        if texto[posicao : posicao + 1] != '"':
            raise json.JSONDecodeError(
                'Expecting property name enclosed in double quotes', texto, posicao
            )
        chave, posicao = leitor.valor(texto, posicao)
        posicao = _pular(texto, posicao)
        if texto[posicao : posicao + 1] != ':':
            raise json.JSONDecodeError("Expecting ':' delimiter", texto, posicao)
        posicao = _pular(texto, posicao + 1)
        if chave == 'records' and texto[posicao : posicao + 1] == '[':
            valor, posicao = _ler_registros(texto, posicao, leitor, max_registros)
        else:
            valor, posicao = leitor.valor(texto, posicao)
        envelope[chave] = valor
        posicao = _pular(texto, posicao)
        separador = texto[posicao : posicao + 1]
        if separador == '}':
            return _fim(texto, posicao + 1, envelope)
        if separador != ',':
            raise json.JSONDecodeError("Expecting ',' delimiter", texto, posicao)
        posicao = _pular(texto, posicao + 1)


def _ler_registros(
    texto: str, posicao: int, leitor: _Leitor, max_registros: int
) -> tuple[list[JsonDecodificado], int]:
    registros: list[JsonDecodificado] = []
    posicao = _pular(texto, posicao + 1)
    if texto[posicao : posicao + 1] == ']':
        return registros, posicao + 1
    while True:
        if len(registros) == max_registros:
            raise _lote_grande(max_registros)
        registro, posicao = leitor.valor(texto, posicao)
        registros.append(registro)
        posicao = _pular(texto, posicao)
        separador = texto[posicao : posicao + 1]
        if separador == ']':
            return registros, posicao + 1
        if separador != ',':
            raise json.JSONDecodeError("Expecting ',' delimiter", texto, posicao)
        posicao = _pular(texto, posicao + 1)


def _pular(texto: str, posicao: int) -> int:
    fim = _ESPACO.match(texto, posicao)
    return fim.end() if fim else posicao


def _fim(texto: str, posicao: int, documento: JsonDecodificado) -> JsonDecodificado:
    posicao = _pular(texto, posicao)
    if posicao != len(texto):
        raise json.JSONDecodeError('Extra data', texto, posicao)
    return documento


def _primeiro_nao_finito(valor: object, caminho: str) -> tuple[str, str] | None:
    """(caminho, texto) da primeira marca de não finito em `valor`, ou None."""
    if isinstance(valor, _NaoFinito):
        return caminho, valor.texto
    filhos: list[tuple[str, object]]
    if isinstance(valor, dict):
        filhos = [(caminho + '.' + k if caminho else k, v) for k, v in valor.items()]
    elif isinstance(valor, list):
        filhos = [('%s[%d]' % (caminho, i), v) for i, v in enumerate(valor)]
    else:
        return None
    for caminho_filho, filho in filhos:
        achado = _primeiro_nao_finito(filho, caminho_filho)
        if achado is not None:
            return achado
    return None


# ---------------------------------------------------------------- cabeçalhos
def _content_length(cabecalhos: Headers) -> int | None:
    valor = cabecalhos.get('content-length')
    return int(valor) if valor is not None and valor.isdigit() else None


def _vai_sobrar_corpo(cabecalhos: Headers) -> bool:
    """Se a recusa deixa corpo grande (ou de tamanho desconhecido) por ler."""
    declarado = _content_length(cabecalhos)
    if declarado is None:
        return 'chunked' in cabecalhos.get('transfer-encoding', '').lower()
    return declarado > LIMITE_DRENAGEM


def _parece_json(cabecalhos: Headers) -> bool:
    # O mesmo critério do FastAPI para ler o corpo como JSON; sem Content-Type
    # ele lê como JSON nas versões sem `strict_content_type`.
    tipo = cabecalhos.get('content-type')
    if not tipo:
        return True
    principal = tipo.split(';', 1)[0].strip().lower()
    return principal == 'application/json' or (
        principal.startswith('application/') and principal.endswith('+json')
    )


def _corpo_grande(regra: RegraDoCorpo, como: str) -> ErroRegra:
    if regra.max_registros is None:
        erro = ErroRegra(
            413,
            'corpo_grande',
            'pedido grande demais: %s de %d bytes desta rota.' % (como, regra.max_bytes),
        )
    else:
        erro = ErroRegra(
            413,
            'lote_grande',
            'lote grande demais: %s de %d bytes deste'
            ' servidor (capacidades.max_bytes_per_batch). O cliente divide o'
            ' lote ao receber 413; um registro que sozinho passa do limite'
            ' precisa ficar menor na origem.' % (como, regra.max_bytes),
        )
    # O resto do corpo não é lido: a conexão fecha em vez de drenar o que falta.
    erro.fechar_conexao = True
    return erro
