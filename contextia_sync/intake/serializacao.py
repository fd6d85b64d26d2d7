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

Módulo puro: só biblioteca padrão.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
import uuid
from typing import Any


class ErroSerializacao(ValueError):
    """Um valor do registro não tem representação JSON exata."""


def valor_json(valor: object, coluna: object = '?') -> Any:
    """Converte um valor de coluna do ERP para algo que `json.dumps` escreve exato."""
    # bool antes de int: bool e subclasse de int e deve continuar true/false.
    if valor is None or isinstance(valor, (str, bool, int)):
        return valor
    if isinstance(valor, float):
        if math.isfinite(valor):
            return valor
        raise ErroSerializacao(
            'coluna %r tem o valor %r, que JSON não representa. Corrija na view'
            ' (ex.: CASE para NULL) ou no ERP.' % (coluna, valor))
    if isinstance(valor, decimal.Decimal):
        if not valor.is_finite():
            raise ErroSerializacao(
                'coluna %r tem o valor Decimal(%r), que JSON não representa. Corrija'
                ' na view (ex.: CASE para NULL) ou no ERP.' % (coluna, str(valor)))
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
        ' view para texto, número ou data.' % (coluna, type(valor).__name__))


def serializar_registro(registro: Any) -> dict[str, Any]:
    """Um registro (dict coluna -> valor) com todos os valores já em forma JSON."""
    try:
        itens = registro.items()
    except AttributeError:
        raise ErroSerializacao(
            'registro do tipo %s não é um dict coluna -> valor. O adaptador deve'
            ' entregar dicts.' % type(registro).__name__) from None
    saida: dict[str, Any] = {}
    for coluna, valor in itens:
        if not isinstance(coluna, str):
            raise ErroSerializacao('coluna %r não é texto: nomes de coluna viram chaves'
                                   ' JSON e precisam ser str.' % (coluna,))
        saida[coluna] = valor_json(valor, coluna)
    return saida


def serializar_parcial(registro: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """
    O que der do registro em forma JSON, e {coluna: motivo} do que não deu.

    Para a quarentena guardar um registro que `serializar_registro` recusou: o
    valor sem JSON vai como o texto do repr (para o operador ver qual era), e a
    coluna fica nomeada nos motivos -- o registro guardado não é reenviável.
    """
    try:
        itens = list(registro.items())
    except AttributeError:
        return ({'(registro)': repr(registro)[:1000]},
                {'(registro)': 'registro do tipo %s não é um dict coluna -> valor'
                               % type(registro).__name__})
    saida: dict[str, Any] = {}
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


def json_canonico(objeto: Any) -> str:
    """
    O texto JSON canônico: chaves ordenadas, sem espaços, UTF-8 cru.

    E o mesmo texto que o servidor usa para o hash de deduplicação; por isso
    ficar estável entre versões e parte do contrato.
    """
    return json.dumps(objeto, sort_keys=True, separators=(',', ':'),
                      ensure_ascii=False, allow_nan=False)
