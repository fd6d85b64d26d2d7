"""
O que o intake aceita de cada tipo de coluna, decidido pelo catálogo.

`fora(coluna, dialeto)` diz se a coluna fica fora do esqueleto e por que, com
a expressão que a view escreveria para traze-la. O criterio e o da
serialização do envio (`intake/serializacao.py`, o que o `connector.py
--dry-run` prova linha a linha):

    recusados pela serialização   array (list), SET (set), JSON/hstore (dict),
                                  intervalo (timedelta), faixa do PostgreSQL
                                  (Range), endereço de rede (inet/cidr viram
                                  IPv4Address no psycopg)
    aceitos, mas sem sentido      binário (iria em base64) e espacial (WKB em
                                  bytes, ou o texto interno do banco): nada
                                  que quem pergunta ao Contextia leia

O rowversion do SQL Server e binário no catálogo e número no adaptador (a
coluna de mudança dele): fica.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.dialects import mssql as _mssql
from sqlalchemy.dialects import mysql as _mysql
from sqlalchemy.dialects import postgresql as _pg
from sqlalchemy.dialects.postgresql import ranges as _ranges

from contextia_sync.descoberta.catalogo import Coluna
from contextia_sync.origem.valores import familia_do_tipo

if TYPE_CHECKING:
    from sqlalchemy.engine import Dialect

    from contextia_sync.origem.valores import TipoDaColuna

# Tipos que o SQLAlchemy nao conhece e sao geometria (PostGIS, MySQL, Oracle
# Spatial, os geometricos nativos do PostgreSQL).
ESPACIAIS = frozenset(
    {
        'geometry',
        'geography',
        'point',
        'linestring',
        'polygon',
        'multipoint',
        'multilinestring',
        'multipolygon',
        'geometrycollection',
        'geomcollection',
        'line',
        'lseg',
        'box',
        'path',
        'circle',
        'sdo_geometry',
        'st_geometry',
        'raster',
    }
)

# Os geometricos nativos do PostgreSQL (nao PostGIS): CAST para texto basta.
_GEOMETRICOS_PG = frozenset({'point', 'line', 'lseg', 'box', 'path', 'polygon', 'circle'})

# O tipo de texto de cada banco, para o CAST da view.
_TEXTO = {
    'postgresql': 'TEXT',
    'mysql': 'CHAR',
    'sqlite': 'TEXT',
    'oracle': 'VARCHAR2(4000)',
    'mssql': 'NVARCHAR(MAX)',
}


@dataclass(frozen=True)
class Fora:
    """Uma coluna que o esqueleto deixa de fora."""

    coluna: str
    tipo: str
    motivo: str
    correcao: str
    """A expressão para a view (`... AS coluna`), ou o que fazer."""


def familia(coluna: Coluna) -> str:
    """datetime, date, numérico, texto, outro ou desconhecido (a de `consultas`)."""
    return familia_do_tipo(coluna.tipo, coluna.tipo_sqlite)


def quotar(nome: str, dialeto: Dialect) -> str:
    """
    O nome no SQL do banco, com aspas só onde ele precisa (maiuscula no
    PostgreSQL, palavra reservada). No Oracle o nome sem aspas e o maiusculo:
    o SQLAlchemy o conhece em minúsculas, e e assim que ele decide.
    """
    if dialeto.name == 'oracle':
        normal = dialeto.normalize_name(nome) or nome
        quotado: str = dialeto.identifier_preparer.quote(normal)
        return nome if quotado == normal else quotado
    citado: str = dialeto.identifier_preparer.quote(nome)
    return citado


def fora(coluna: Coluna, dialeto: Dialect) -> Fora | None:
    """A coluna fica fora do esqueleto? (None: fica dentro.) `dialeto`: o do SQLAlchemy."""
    tipo = coluna.tipo
    nome = quotar(coluna.nome, dialeto)
    texto = _TEXTO.get(dialeto.name, 'VARCHAR(4000)')

    def cast(como: str = texto) -> str:
        return 'CAST(%s AS %s) AS %s' % (nome, como, nome)

    def saida(motivo: str, correcao: str) -> Fora:
        return Fora(coluna.nome, coluna.texto_tipo, motivo, correcao)

    if isinstance(tipo, _mssql.TIMESTAMP):
        return None  # rowversion: numero, e coluna de mudanca
    if isinstance(tipo, _mysql.SET):
        return saida(
            'SET vira um conjunto, e JSON não tem conjunto',
            '%s (o SET vira o texto "a,b")' % cast('CHAR'),
        )
    if isinstance(tipo, sa.ARRAY):
        return saida(
            'array vira lista, e o intake não a aceita como valor de coluna',
            "array_to_string(%s, ',') AS %s" % (nome, nome),
        )
    if isinstance(tipo, (sa.JSON, _pg.HSTORE)):
        return saida(
            'JSON/hstore vira objeto, e o intake não o aceita como valor de coluna', cast()
        )
    python = _tipo_python(tipo)
    if python is datetime.timedelta:
        correcao = (
            'EXTRACT(EPOCH FROM %s) AS %s (em segundos), ou %s' % (nome, nome, cast())
            if dialeto.name == 'postgresql'
            else 'TO_CHAR(%s) AS %s' % (nome, nome)
            if dialeto.name == 'oracle'
            else cast()
        )
        return saida('intervalo vira timedelta, que JSON não representa', correcao)
    if isinstance(tipo, (_ranges.AbstractRange, _ranges.AbstractMultiRange)):
        return saida(
            'faixa (range) vira um objeto Range, que JSON não representa',
            'lower(%s) e upper(%s) em duas colunas, ou %s' % (nome, nome, cast()),
        )
    if isinstance(tipo, (_pg.INET, _pg.CIDR)):
        return saida(
            'endereço de rede vira IPv4Address/IPv6Address no driver, que o intake não aceita',
            cast(),
        )
    if python is bytes:
        return saida(
            'binário iria em base64, que não diz nada a quem lê o Contextia e pesa em cada envio',
            _correcao_binario(nome, dialeto.name),
        )
    if coluna.desconhecido and coluna.desconhecido.lower() in ESPACIAIS:
        if dialeto.name == 'postgresql' and coluna.desconhecido.lower() in _GEOMETRICOS_PG:
            return saida(
                'geométrico do PostgreSQL sai no formato interno do banco',
                '%s (o texto "(1,2)")' % cast(),
            )
        wkt = (
            'SDO_UTIL.TO_WKTGEOMETRY(%s) AS %s'
            if dialeto.name == 'oracle'
            else '%s.STAsText() AS %s'
            if dialeto.name == 'mssql'
            else 'ST_AsText(%s) AS %s'
        ) % (nome, nome)
        return saida(
            'espacial sai como bytes (WKB), que não dizem nada a quem lê',
            '%s (o texto WKT, "POINT(1 2)")' % wkt,
        )
    return None


def _tipo_python(tipo: TipoDaColuna) -> type | None:
    try:
        python: type = tipo.python_type
    except (NotImplementedError, AttributeError):
        return None
    return python


def _correcao_binario(nome: str, dialeto: str) -> str:
    texto = {
        'postgresql': "convert_from(%s, 'UTF8') AS %s",
        'mysql': 'CONVERT(%s USING utf8mb4) AS %s',
        'sqlite': 'CAST(%s AS TEXT) AS %s',
        'oracle': 'UTL_RAW.CAST_TO_VARCHAR2(%s) AS %s',
        'mssql': 'CAST(%s AS NVARCHAR(MAX)) AS %s',
    }.get(dialeto, 'CAST(%s AS TEXT) AS %s')
    return 'se é arquivo ou imagem, deixe de fora; se guarda texto, na view: %s' % (
        texto % (nome, nome)
    )


def concatenar(colunas: list[str], dialeto: Dialect, alias: str) -> str:
    """A expressão que junta uma chave composta numa coluna só (para a view)."""
    nomes = [quotar(c, dialeto) for c in colunas]
    if dialeto.name in ('mysql', 'mssql'):
        juntas = 'CONCAT(%s)' % ", '|', ".join(nomes)
    else:
        juntas = " || '|' || ".join(nomes)
    return '%s AS %s' % (juntas, alias)
