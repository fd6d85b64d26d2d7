"""
Valores do ERP para JSON: exatos e deterministicos.

O que cada tipo vira, e por que (o contrato está em docs/contrato-intake.md):

    Decimal          STRING numérica com todos os dígitos e a escala de origem
                     ('1234.50', nunca 1234.5 nem 1.2345E+3). Número JSON passa
                     por float em quase todo leitor (o próprio servidor FastAPI
                     incluído) e dinheiro não pode perder centavo.
    int              número JSON (Python não perde dígito em int).
    float            número JSON (repr, que volta ao mesmo float); NaN e
                     Infinity são RECUSADOS nomeando a coluna: JSON não tem
                     como dize-los e o servidor guardaria lixo.
    datetime         ISO 8601 ('2026-09-02T10:05:00', com fuso se tiver).
    date / time      ISO 8601 ('2026-09-02', '10:05:00').
    bytes            base64 padrão (RFC 4648, com '=').
    UUID             texto canônico ('12345678-1234-...').
    str/bool/None    como são.

Deterministico quer dizer: o mesmo registro vira sempre o mesmo texto. Sem
isso, o servidor -- que deduplica por hash do JSON canônico quando não há
`key` -- veria um registro novo a cada envio do mesmo dado.

O caminho rápido (`Serializador` + `corpo_de_registros`) da o MESMO valor
guardado que o de sempre (`serializar_registro` + `json.dumps`): o conversor
de cada coluna e escolhido uma vez por forma de registro (as colunas e o tipo
de cada valor), não testado valor a valor, e o corpo sai do `orjson` quando ele
está instalado. O que o `orjson` escreveria diferente do contrato nunca chega a
ele: NaN/Infinity (ele escreve `null`) são recusados antes, Decimal e bytes vão
como texto, hora e data com fuso vão pelo `isoformat` (ele corta o fuso de
segundos); o que ele recusa (inteiro de mais de 64 bits) volta ao `json`.

As linhas de um `fetch` (o `PlanoFixo`, pelos tipos do resultado) vão mais
direto: o Decimal fica cru no dict e o lote inteiro sai de uma vez pelo
`corpo_direto` (o orjson chama o conversor do Decimal sem um laço Python por
linha); o lote com um valor que não sai exato por ali (NaN, Infinity, inteiro
grande, tipo fora do plano) volta ao caminho de um registro por vez, que
recusa nomeando a coluna -- os mesmos bytes, a mesma recusa.

Módulo puro: só biblioteca padrão (o `orjson` e usado se estiver instalado; sem ele, o `json`).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, TypeAlias, cast

from contextia_sync.tipos import Json, Linha, ObjetoJson, ValorDoBanco

if TYPE_CHECKING:
    from orjson import Fragment

# O valor de um registro a caminho do corpo: o JSON do contrato, ou o que o
# orjson escreve com o mesmo texto e o caminho rápido deixa como o driver o deu
# (data, hora sem fuso, UUID; o Decimal finito, no `corpo_direto`).
ValorNoCorpo: TypeAlias = 'Json | datetime.date | datetime.time | uuid.UUID | decimal.Decimal'
# Um registro a caminho do corpo (o de `Serializador.registro`, o do `PlanoFixo`).
Registro: TypeAlias = 'Mapping[str, ValorNoCorpo]'
# Um item do array `records`: o registro, ou o pronto (o JSON dele já feito, um
# `orjson.Fragment`, de `lotes.preparador_de_prontos`).
RegistroDoCorpo: TypeAlias = 'Registro | Fragment'
# O conversor de uma coluna: o valor do driver como vai ao corpo.
Conversor: TypeAlias = 'Callable[[ValorDoBanco], ValorNoCorpo]'


class ErroSerializacao(ValueError):
    """Um valor do registro não tem representação JSON exata."""


def valor_json(valor: object, coluna: object = '?') -> Json:
    """Converte um valor de coluna do ERP para algo que `json.dumps` escreve exato."""
    # bool antes de int: bool e subclasse de int e deve continuar true/false.
    if valor is None or isinstance(valor, (str, bool, int)):
        return valor
    if isinstance(valor, float):
        if math.isfinite(valor):
            return valor
        raise ErroSerializacao(
            'coluna %r tem o valor %r, que JSON não representa. Corrija na view'
            ' (ex.: CASE para NULL) ou no ERP.' % (coluna, valor)
        )
    if isinstance(valor, decimal.Decimal):
        if not valor.is_finite():
            raise ErroSerializacao(
                'coluna %r tem o valor Decimal(%r), que JSON não representa. Corrija'
                ' na view (ex.: CASE para NULL) ou no ERP.' % (coluna, str(valor))
            )
        # 'f' escreve sem expoente e mantem a escala: Decimal('10.50') -> '10.50'.
        return format(valor, 'f')
    # datetime antes de date: datetime e subclasse de date.
    if isinstance(valor, (datetime.datetime, datetime.date, datetime.time)):
        return valor.isoformat()
    if isinstance(valor, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(valor)).decode('ascii')
    if isinstance(valor, uuid.UUID):
        return str(valor)
    raise ErroSerializacao(
        'coluna %r tem um valor do tipo %s, que o SDK não sabe enviar. Converta na'
        ' view para texto, número ou data.' % (coluna, type(valor).__name__)
    )


def serializar_registro(registro: Mapping[str, ValorDoBanco]) -> ObjetoJson:
    """Um registro (dict coluna -> valor) com todos os valores já em forma JSON."""
    try:
        itens = registro.items()
    except AttributeError:
        raise ErroSerializacao(
            'registro do tipo %s não é um dict coluna -> valor. O adaptador deve'
            ' entregar dicts.' % type(registro).__name__
        ) from None
    saida: ObjetoJson = {}
    for coluna, valor in itens:
        if not isinstance(coluna, str):
            raise ErroSerializacao(
                'coluna %r não é texto: nomes de coluna viram chaves'
                ' JSON e precisam ser str.' % (coluna,)
            )
        saida[coluna] = valor_json(valor, coluna)
    return saida


def serializar_parcial(registro: Mapping[str, ValorDoBanco]) -> tuple[ObjetoJson, dict[str, str]]:
    """
    O que der do registro em forma JSON, e {coluna: motivo} do que não deu.

    Para a quarentena guardar um registro que `serializar_registro` recusou: o
    valor sem JSON vai como o texto do repr (para o operador ver qual era), e a
    coluna fica nomeada nos motivos -- o registro guardado não é reenviável.
    """
    try:
        itens = list(registro.items())
    except AttributeError:
        return (
            {'(registro)': repr(registro)[:1000]},
            {
                '(registro)': 'registro do tipo %s não é um dict coluna -> valor'
                % type(registro).__name__
            },
        )
    saida: ObjetoJson = {}
    invalidos: dict[str, str] = {}
    for coluna, valor in itens:
        nome = coluna if isinstance(coluna, str) else repr(coluna)
        try:
            if not isinstance(coluna, str):
                raise ErroSerializacao('coluna %r não é texto' % (coluna,))
            saida[nome] = valor_json(valor, coluna)
        except ErroSerializacao as erro:
            saida[nome] = repr(valor)[:1000]
            invalidos[nome] = str(erro)
    return saida, invalidos


def json_canonico(objeto: Json) -> str:
    """
    O texto JSON canônico: chaves ordenadas, sem espaços, UTF-8 cru.

    E o mesmo texto que o servidor usa para o hash de deduplicação; por isso
    ficar estável entre versões e parte do contrato.
    """
    return json.dumps(
        objeto, sort_keys=True, separators=(',', ':'), ensure_ascii=False, allow_nan=False
    )


# ---------------------------------------------------------------- caminho rapido
def _finito(coluna: str) -> Callable[[float], Json]:
    def conferir(valor: float) -> Json:
        # O orjson escreveria NaN/Infinity como null: recusados aqui, como sempre.
        return valor if math.isfinite(valor) else valor_json(valor, coluna)

    return conferir


def _texto_decimal(valor: decimal.Decimal) -> str | None:
    """
    O texto que `valor_json` dá ao Decimal finito, ou None para o não finito
    (que `valor_json` recusa nomeando a coluna), sem o is_finite() por valor.
    """
    # str() e format(v, 'f') são o mesmo texto, exceto na notação com expoente
    # (1E+3, 0E-10): essa vai pelo 'f'. O str é o mais barato.
    texto = str(valor)
    if 'E' in texto:
        texto = format(valor, 'f')
    # Só o não finito termina em letra ('NaN', 'sNaN', 'Infinity').
    return texto if texto[-1] not in 'Ny' else None


def _decimal(coluna: str) -> Callable[[decimal.Decimal], Json]:
    def texto(valor: decimal.Decimal) -> Json:
        finito = _texto_decimal(valor)
        return finito if finito is not None else valor_json(valor, coluna)

    return texto


def _data_hora(valor: datetime.datetime) -> datetime.datetime | str:
    # Com fuso vai pelo isoformat: o orjson escreveria '+05:30' para '+05:30:15'.
    return valor if valor.tzinfo is None else valor.isoformat()


def _base64(valor: bytes) -> str:
    return base64.b64encode(bytes(valor)).decode('ascii')


def _isoformat(valor: datetime.date | datetime.time) -> str:
    return str(valor.isoformat())


# O que o orjson escreve exatamente como o contrato manda: nenhum conversor.
_NATIVOS: frozenset[type] = frozenset({str, bool, int, type(None)})
# Nativos do orjson que o caminho puro (dicts so com tipos JSON) converte.
_NATIVOS_DO_ORJSON: dict[type, Conversor] = {datetime.date: _isoformat, uuid.UUID: str}

Plano = tuple[tuple[str, Conversor], ...]


class Serializador:
    """
    `serializar_registro` sem um teste de tipo por valor.

    A forma de um registro (os nomes das colunas e o tipo de cada valor) escolhe,
    UMA vez, o conversor de cada coluna; os registros seguintes da mesma forma
    -- numa consulta, quase todos -- só aplicam os conversores das colunas que
    precisam (Decimal, bytes, float conferido, data com fuso). Tipo que o plano
    não conhece vai por `valor_json` (recusa, subclasse): o resultado e sempre o
    de `serializar_registro`.

    `puro=False` (o corpo vai direto ao `corpo_de_registros`): data, hora sem
    fuso e UUID ficam como estão, para o orjson escrever -- o mesmo texto do
    isoformat/str. `puro=True` (quarentena, hash canônico): só tipos JSON.
    """

    LIMITE_DE_FORMAS = 512  # formas guardadas; alem disso o plano e refeito a cada vez

    def __init__(self, puro: bool = False) -> None:
        self.puro = puro
        self._planos: dict[tuple[object, ...], Plano] = {}

    def _plano(self, colunas: Sequence[object], tipos: Sequence[type]) -> Plano | None:
        plano = []
        for coluna, tipo in zip(colunas, tipos, strict=True):
            if not isinstance(coluna, str):
                return None  # o caminho de sempre diz o erro
            if tipo in _NATIVOS:
                continue
            funcao: Conversor
            if tipo is float:
                funcao = _finito(coluna)
            elif tipo is decimal.Decimal:
                funcao = _decimal(coluna)
            elif tipo is datetime.datetime:
                funcao = _isoformat if self.puro else _data_hora
            elif tipo in _NATIVOS_DO_ORJSON:
                if not self.puro:
                    continue
                funcao = _NATIVOS_DO_ORJSON[tipo]
            elif tipo is datetime.time:
                funcao = _isoformat  # o orjson recusa hora com fuso
            elif tipo in (bytes, bytearray, memoryview):
                funcao = _base64
            else:

                def funcao(valor: ValorDoBanco, _coluna: str = coluna) -> Json:
                    return valor_json(valor, _coluna)

            plano.append((coluna, funcao))
        return tuple(plano)

    def registro(self, bruto: Mapping[str, ValorDoBanco]) -> Registro:
        """O registro em forma JSON (igual a `serializar_registro`); ErroSerializacao."""
        if type(bruto) is not dict:
            return serializar_registro(bruto)
        colunas = tuple(bruto)
        tipos = tuple(map(type, bruto.values()))
        forma = colunas + tipos
        plano = self._planos.get(forma)
        if plano is None:
            plano = self._plano(colunas, tipos)
            if plano is None:
                return serializar_registro(bruto)
            if len(self._planos) < self.LIMITE_DE_FORMAS:
                self._planos[forma] = plano
        saida = bruto.copy()
        for coluna, funcao in plano:
            saida[coluna] = funcao(saida[coluna])
        return saida


try:
    import orjson as _orjson_importado

    _orjson: ModuleType | None = _orjson_importado
except ImportError:  # python3 -S (autoteste) ou sem o pacote
    _orjson = None


def _conversor_fixo(familia: str, coluna: str) -> Conversor | None:
    """O conversor de uma coluna pela família do tipo dela (origem.valores.familia_json)."""

    def qualquer(valor: ValorDoBanco) -> Json:
        return valor if valor is None else valor_json(valor, coluna)

    if familia == 'nativo':
        return None
    if familia == 'decimal':

        def decimal_(valor: ValorDoBanco) -> Json:
            if type(valor) is decimal.Decimal:
                texto = _texto_decimal(valor)
                if texto is not None:
                    return texto
            # (O não finito cai aqui: a recusa de sempre por valor_json.)
            return valor if valor is None or type(valor) is int else valor_json(valor, coluna)

        return decimal_
    if familia == 'float':

        def float_(valor: ValorDoBanco) -> Json:
            if type(valor) is float and math.isfinite(valor):
                return valor
            return qualquer(valor)

        return float_
    if familia == 'datetime':

        def data_hora(valor: ValorDoBanco) -> ValorNoCorpo:
            if type(valor) is datetime.datetime and valor.tzinfo is None:
                return valor  # o orjson escreve igual ao isoformat
            return qualquer(valor)

        return data_hora
    return qualquer  # time, bytes, qualquer: valor a valor


class PlanoFixo:
    """
    O conversor de cada coluna escolhido UMA vez pelos tipos do resultado (o
    `familias` de um fetch), aplicado no próprio dict da linha -- que é do
    fetch e de mais ninguém. Só as colunas que precisam (Decimal, float,
    data e hora, bytes, tipo desconhecido) pagam uma chamada por valor; as
    nativas (texto, inteiro, bool, date, UUID) vão direto ao orjson.

    `decimal_no_corpo`: as colunas Decimal ficam fora do plano -- o Decimal
    vai cru ao `corpo_direto`, que o escreve (o mesmo texto) sem o laço
    Python por linha; `plano` tem só o resto, e vazio e o caso comum.
    """

    def __init__(self, familias: dict[str, str], decimal_no_corpo: bool = False) -> None:
        self.colunas = len(familias)
        self.plano: Plano = tuple(
            (coluna, funcao)
            for coluna, funcao in (
                (c, _conversor_fixo(f, c))
                for c, f in familias.items()
                if not (decimal_no_corpo and f == 'decimal')
            )
            if funcao is not None
        )

    def registro(self, linha: Linha) -> Registro:
        for coluna, funcao in self.plano:
            linha[coluna] = funcao(linha[coluna])
        return linha


def conversor_de_linha(
    plano: PlanoFixo | None, serializador: Serializador
) -> Callable[[Mapping[str, ValorDoBanco]], Registro]:
    """
    O registro de cada linha: a linha de um fetch (dict com as colunas do
    `plano`) pelo plano; qualquer outra -- e tudo, sem plano -- pelo
    `serializador`. Levanta ErroSerializacao como os dois.
    """
    if plano is None:
        return serializador.registro
    pelo_plano, colunas, pela_forma = plano.registro, plano.colunas, serializador.registro

    def converter(bruto: Mapping[str, ValorDoBanco]) -> Registro:
        if type(bruto) is dict and len(bruto) == colunas:
            return pelo_plano(bruto)
        return pela_forma(bruto)

    return converter


def _json_padrao(valor: object) -> Json:
    return valor_json(valor)


class _SemCorpoDireto(TypeError):
    """Um valor que o `corpo_direto` não escreve: o lote vai pelo caminho de sempre."""


def _decimal_no_corpo(valor: object) -> str:
    """O `default` do orjson no `corpo_direto`: só o Decimal finito, como `valor_json`."""
    if type(valor) is decimal.Decimal:
        texto = _texto_decimal(valor)
        if texto is not None:
            return texto
    raise _SemCorpoDireto


def corpo_direto(registros: Sequence[RegistroDoCorpo]) -> bytes | None:
    """
    A lista JSON dos registros com o Decimal ainda cru, toda pelo orjson, ou
    None se algum valor não sai exato por aqui (Decimal não finito, tipo que o
    orjson não escreve, inteiro além de 64 bits): então o lote vai pelo caminho
    de sempre, que recusa nomeando a coluna ou escreve pelo `json`. Os registros
    são os do `PlanoFixo(..., decimal_no_corpo=True)`: o resto já convertido.
    """
    if _orjson is None:
        return None
    try:
        return bytes(_orjson.dumps(registros, default=_decimal_no_corpo))
    except TypeError:  # JSONEncodeError (o _SemCorpoDireto vem dentro dele)
        return None


def corpo_de_registros(registros: Sequence[RegistroDoCorpo]) -> bytes:
    """
    A lista JSON (UTF-8) dos registros de `Serializador.registro`.

    Com o orjson instalado, por ele; o que ele recusa (inteiro além de 64 bits)
    e o ambiente sem ele vão pelo `json`, com o mesmo resultado guardado.
    """
    if _orjson is not None:
        try:
            return bytes(_orjson.dumps(registros))
        except TypeError:  # JSONEncodeError e TypeError
            pass
    try:
        return json.dumps(
            registros,
            ensure_ascii=False,
            separators=(',', ':'),
            allow_nan=False,
            default=_json_padrao,
        ).encode('utf-8')
    except ErroSerializacao:
        # O `default` do json nao sabe de que coluna o valor veio: procura-a, para
        # o erro nomear a coluna (a do tipo que o plano fixo deixou passar cru).
        # (O pronto só existe com o orjson, que o escreve: aqui só há registros.)
        _nomear_a_coluna(cast('Sequence[Registro]', registros))
        raise


def _nomear_a_coluna(registros: Sequence[Registro]) -> None:
    """Levanta o ErroSerializacao do primeiro valor sem JSON, com o nome da coluna."""
    nativos = (str, int, float, bool, type(None), list, dict)
    for registro in registros:
        for coluna, valor in registro.items():
            if not isinstance(valor, nativos):
                valor_json(valor, coluna)
