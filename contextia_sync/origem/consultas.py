"""
O SQL que o adaptador generico manda a origem, montado sem servidor.

`Objeto` e a view/tabela resolvida (nomes e tipos reais); as funcoes
`consulta_*` devolvem o SELECT do SQLAlchemy Core para ela, com identificadores
validados e quotados e os valores sempre por bind (nada de texto colado).
O adaptador generico (`origem/generico.py`) executa; o `--autoteste` compila.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TypeAlias, TypedDict, Unpack

import sqlalchemy as sa
from sqlalchemy.dialects import mysql as _mysql
from sqlalchemy.engine import Connection
from sqlalchemy.sql.base import ReadOnlyColumnCollection
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.expression import ColumnClause, TableClause
from sqlalchemy.types import NullType

from contextia_sync.origem import ErroOrigem, filtro, validado
from contextia_sync.origem.condicao import NEGATIVOS
from contextia_sync.origem.marca_apagada import MarcaDeApagado
from contextia_sync.origem.valores import TipoDaColuna, coagir, coagir_exato, texto_sqlite
from contextia_sync.tipos import Tupla, ValorDoBanco

# Uma coluna real da view (o parâmetro: o valor dela como o driver o devolve).
ColunaReal: TypeAlias = ColumnClause[ValorDoBanco]

# Uma expressão SQL sobre uma coluna da origem, avaliada pelo banco.
Expressao: TypeAlias = ColumnElement[ValorDoBanco]

# A view/tabela com as colunas reais.
Tabela: TypeAlias = TableClause[ReadOnlyColumnCollection[str, ColunaReal]]

# Um SELECT na origem: cada linha dele, uma tupla de valores do driver.
Consulta: TypeAlias = sa.Select[Unpack[Tupla]]


class ColunaLida(TypedDict):
    """Nome e tipo de uma coluna, como o catálogo (ou o SELECT vazio do MySQL) os dá."""

    name: str
    type: TipoDaColuna


class Objeto:
    """Uma view/tabela resolvida: nome real, colunas reais e seus tipos."""

    def __init__(
        self, tabela: Tabela, source_object: str, tipos_sqlite: dict[str, str] | None = None
    ) -> None:
        self.tabela = tabela
        self.source_object = source_object
        self.tipos_sqlite = tipos_sqlite or {}
        self.sem_reflexao = False
        self._exato: dict[str, ColunaReal] = {c.name: c for c in tabela.c}
        self._minusculo: dict[str, ColunaReal] = {}
        for c in tabela.c:
            self._minusculo.setdefault(c.name.lower(), c)

    @property
    def refletido(self) -> bool:
        """As colunas e os tipos vieram do catálogo (não é SQL compilado sem servidor)."""
        return bool(self._exato) and not self.sem_reflexao

    def coluna(self, nome: str, campo: str = 'columns') -> ColunaReal:
        """
        A coluna real para um nome do mapeamento: exato, senão sem caixa.

        Sem caixa porque o mapeamento escreve EMPRESA_ID e o PostgreSQL guarda
        empresa_id (e o Oracle, pelo SQLAlchemy, também aparece minusculo) --
        o mesmo que um SQL escrito a mão sem aspas encontraria.
        """
        c = self._exato.get(nome)
        if c is None:
            c = self._minusculo.get(nome.lower())
        if c is None:
            if not self._exato:  # sem reflexao: o nome como veio
                return sa.column(nome)
            raise ErroOrigem(
                '%s: a coluna %s não existe em %s. Colunas que o banco mostra: %s.'
                ' Corrija o mapeamento (ou a view).'
                % (campo, nome, self.source_object, ', '.join(sorted(self._exato)[:60]))
            )
        return c


# Codigos de tipo do protocolo MySQL (pymysql.constants.FIELD_TYPE).
_TIPOS_MYSQL: dict[object, str] = {
    0: 'numeric',
    246: 'numeric',
    1: 'int',
    2: 'int',
    3: 'int',
    8: 'int',
    9: 'int',
    13: 'int',
    4: 'float',
    5: 'float',
    7: 'timestamp',
    10: 'date',
    14: 'date',
    12: 'datetime',
    15: 'texto',
    253: 'texto',
    254: 'texto',
}


def colunas_pelo_select_mysql(conn: Connection, schema: str | None, nome: str) -> list[ColunaLida]:
    """
    Nomes e tipos pelo `SELECT * ... WHERE 1 = 0`: so precisa de SELECT.

    Le a descricao do cursor (tipo do protocolo, precisao e escala) e traduz
    para o tipo SQLAlchemy que os conversores entendem.
    """
    from sqlalchemy.dialects import mysql as _mysql

    sql = sa.select(sa.text('*')).select_from(sa.table(nome, schema=schema)).where(sa.text('1 = 0'))
    resultado = conn.execute(sql)
    descricao = resultado.cursor.description
    resultado.close()
    colunas: list[ColunaLida] = []
    for nome_coluna, codigo, _exib, _interno, precisao, escala, _nulo in descricao:
        familia = _TIPOS_MYSQL.get(codigo)
        tipos: dict[str | None, TipoDaColuna] = {
            'int': sa.Integer(),
            'float': sa.Float(),
            'date': sa.Date(),
            'datetime': sa.DateTime(),
            'timestamp': _mysql.TIMESTAMP(),
            'texto': sa.String(),
        }
        tipo = tipos.get(familia, NullType())
        if familia == 'numeric':
            # precisao do protocolo inclui sinal e ponto; a escala e o que importa
            tipo = sa.Numeric(precisao, escala)
        colunas.append({'name': nome_coluna, 'type': tipo})
    return colunas


def objeto_sem_reflexao(
    source_object: str, colunas: Iterable[str] = (), tipos: Mapping[str, TipoDaColuna] | None = None
) -> Objeto:
    """Tabela montada só com nomes (e tipos, se dados): para compilar SQL sem servidor."""
    schema, nome = validado(filtro.validar_objeto, source_object)
    nomes = validado(filtro.validar_colunas, list(colunas)) if colunas else []
    tipos = tipos or {}
    tabela = sa.table(nome, *[sa.column(n, tipos.get(n)) for n in nomes], schema=schema)
    if not nomes:
        tabela = sa.table(nome, schema=schema)
    objeto = Objeto(tabela, source_object)
    objeto.sem_reflexao = True
    if not nomes:
        objeto._exato = {}
    return objeto


def valor_do_escopo(
    objeto: Objeto, scope: Sequence[ValorDoBanco]
) -> tuple[ColunaReal, ValorDoBanco]:
    """
    A coluna de escopo real e o valor EXATAMENTE no tipo dela (`coagir_exato`).

    Objeto sem reflexão (SQL compilado sem servidor, o autoteste) não tem tipo a
    que converter: o valor vai como veio.
    """
    coluna = objeto.coluna(scope[0], 'scope')
    if not objeto.refletido:
        return coluna, scope[1]
    return coluna, coagir_exato(
        scope[1], coluna.type, '%s.%s' % (objeto.source_object, coluna.name), 'scope'
    )


def _onde(
    objeto: Objeto, condicoes: Sequence[filtro.Condicao], dialeto: str
) -> list[ColumnElement[bool]]:
    """O plano puro de `filtro.plano` virando expressões SQLAlchemy, com bind."""
    expressoes: list[ColumnElement[bool]] = []
    campos = {'escopo': 'scope', 'desde': 'since', 'chaves': 'key'}
    for nome, operador, parametro, valor in condicoes:
        coluna = objeto.coluna(nome, campos.get(parametro, parametro))
        tipo = coluna.type
        sem_tipo = isinstance(tipo, NullType)
        if operador == 'IN':
            # Lista expandida pelo SQLAlchemy em binds: nenhum valor vira texto de SQL.
            # Cada valor EXATO no tipo da coluna: '17x' numa key INT seria 17 no MariaDB.
            rotulo = '%s.%s' % (objeto.source_object, coluna.name)
            valores = [
                v if sem_tipo and not objeto.refletido else coagir_exato(v, tipo, rotulo, 'key')
                for v in valor
            ]
            expressoes.append(
                coluna.in_(
                    sa.bindparam(
                        parametro, valores, expanding=True, type_=None if sem_tipo else tipo
                    )
                )
            )
            continue
        if parametro == filtro.PARAMETRO_ESCOPO:
            coluna, valor = valor_do_escopo(objeto, (nome, valor))
            bind = sa.bindparam(parametro, valor, type_=None if sem_tipo else tipo)
        elif dialeto == 'sqlite' and objeto.tipos_sqlite.get(coluna.name):
            valor = texto_sqlite(
                coagir(
                    valor,
                    sa.DateTime() if objeto.tipos_sqlite[coluna.name] == 'datetime' else sa.Date(),
                    dialeto,
                )
            )
            bind = sa.bindparam(parametro, valor, type_=sa.String())
        elif sem_tipo:
            bind = sa.bindparam(parametro, valor)
        else:
            bind = sa.bindparam(parametro, coagir(valor, tipo, dialeto), type_=tipo)
        expressoes.append(coluna == bind if operador == '=' else coluna > bind)
    return expressoes


def _filtrado(
    sql: Consulta,
    objeto: Objeto,
    scope: Sequence[ValorDoBanco] | None,
    since: Sequence[ValorDoBanco] | None,
    dialeto: str,
    chaves: Sequence[ValorDoBanco] | None = None,
) -> Consulta:
    for expr in _onde(objeto, validado(filtro.plano, scope, since, chaves), dialeto):
        sql = sql.where(expr)
    return sql


def _texto_da_marca(coluna: ColunaReal, dialeto: str) -> Expressao:
    """
    A coluna da marca como `origem/condicao.py` a compara: texto sem os espaços
    das pontas (TRIM só tira o espaço, como `texto_escopo`), byte a byte -- a
    collation sem caixa do MySQL e do SQL Server diria 'c' = 'C'.
    """
    texto: Expressao = sa.func.trim(sa.cast(coluna, sa.String(255)))
    if dialeto == 'mysql':
        return sa.cast(texto, _mysql.BINARY())
    if dialeto == 'mssql':
        return texto.collate('Latin1_General_BIN2')
    return texto


def estado_da_marca(objeto: Objeto, marca: MarcaDeApagado, dialeto: str) -> ColumnElement[int]:
    """
    1 para a linha marcada como apagada, 0 para a viva -- nunca NULL.

        CASE WHEN <coluna> IS NULL THEN 0        -- NULL na marca: viva
             WHEN <texto> IN (:textos) THEN 1    -- (0 para not_equals/not_in)
             ELSE 0 END                          -- (1 para not_equals/not_in)

    O CASE e não `NOT (cond) OR coluna IS NULL`: a lógica de três valores do
    SQL (o TRIM de um CHAR em branco é NULL no Oracle) fica toda no ELSE, e o
    WHERE nunca tira uma linha por UNKNOWN. Os textos são os de
    `Condicao.textos_esperados`, os mesmos que `MarcaDeApagado.apagada` usa.
    """
    condicao = marca.condicao
    coluna = objeto.coluna(condicao.coluna, 'deleted_when')
    texto = _texto_da_marca(coluna, dialeto)
    textos = sorted(condicao.textos_esperados())
    casou: ColumnElement[bool]
    if condicao.operador == 'not_empty':
        casou = sa.func.length(texto) > 0
    else:
        binds = [t.encode() for t in textos] if dialeto == 'mysql' else textos
        casou = texto.in_(binds)
        if '' in textos:  # o texto vazio: '' no banco, NULL depois do TRIM no Oracle
            casou = sa.or_(casou, texto.is_(None))
    negativo = condicao.operador in NEGATIVOS
    sim: ColumnElement[int] = sa.literal_column('1')
    nao: ColumnElement[int] = sa.literal_column('0')
    return sa.case(
        (coluna.is_(None), nao), (casou, nao if negativo else sim), else_=sim if negativo else nao
    )


def _marcadas(
    sql: Consulta,
    objeto: Objeto,
    dialeto: str,
    sem_apagadas: MarcaDeApagado | None,
    so_apagadas: MarcaDeApagado | None = None,
) -> Consulta:
    """O SELECT sem as linhas marcadas como apagadas (ou só com elas)."""
    if sem_apagadas is not None:
        sql = sql.where(estado_da_marca(objeto, sem_apagadas, dialeto) == 0)
    if so_apagadas is not None:
        sql = sql.where(estado_da_marca(objeto, so_apagadas, dialeto) == 1)
    return sql


def consulta_fetch(
    objeto: Objeto,
    columns: Sequence[str],
    scope: Sequence[ValorDoBanco] | None = None,
    since: Sequence[ValorDoBanco] | None = None,
    dialeto: str = '',
    chaves: Sequence[ValorDoBanco] | None = None,
    sem_apagadas: MarcaDeApagado | None = None,
) -> tuple[Consulta, list[str], list[int], list[ColunaReal]]:
    """
    SELECT das colunas do mapeamento, sem repetir coluna.

    Devolve (sql, nomes, posicoes, reais): `posicoes[i]` e o indice em `reais`
    (as colunas do SELECT) de onde sai o valor de `nomes[i]`. Com
    `sem_apagadas`, sem as linhas que a marca diz apagadas (`estado_da_marca`).
    """
    nomes = validado(filtro.validar_colunas, columns)
    reais: list[ColunaReal] = []
    posicoes: list[int] = []
    for nome in nomes:
        coluna = objeto.coluna(nome)
        for i, ja in enumerate(reais):
            if ja is coluna:
                posicoes.append(i)
                break
        else:
            posicoes.append(len(reais))
            reais.append(coluna)
    sql = _filtrado(
        sa.select(*reais).select_from(objeto.tabela), objeto, scope, since, dialeto, chaves
    )
    return _marcadas(sql, objeto, dialeto, sem_apagadas), nomes, posicoes, reais


def consulta_contar(
    objeto: Objeto,
    scope: Sequence[ValorDoBanco] | None = None,
    since: Sequence[ValorDoBanco] | None = None,
    dialeto: str = '',
    sem_apagadas: MarcaDeApagado | None = None,
    so_apagadas: MarcaDeApagado | None = None,
) -> Consulta:
    """SELECT count(*) com o filtro de `filtro.plano` (a sonda do ouvinte), e a marca."""
    return _marcadas(
        _filtrado(
            sa.select(sa.func.count()).select_from(objeto.tabela), objeto, scope, since, dialeto
        ),
        objeto,
        dialeto,
        sem_apagadas,
        so_apagadas,
    )


def consulta_maximo(objeto: Objeto, coluna: str) -> tuple[Consulta, ColunaReal]:
    """SELECT max(coluna) e a coluna real (o tipo dela converte o resultado)."""
    validado(filtro.validar_nome, coluna, 'watch_column')
    real = objeto.coluna(coluna, 'watch_column')
    return sa.select(sa.func.max(real).label('maximo')).select_from(objeto.tabela), real


def consulta_escopos(objeto: Objeto, coluna: str) -> tuple[Consulta, ColunaReal]:
    """SELECT DISTINCT dos valores nao nulos de `coluna`, em ordem."""
    validado(filtro.validar_nome, coluna, 'scope_column')
    real = objeto.coluna(coluna, 'scope_column')
    return (
        sa.select(real)
        .select_from(objeto.tabela)
        .where(real.is_not(None))
        .distinct()
        .order_by(real)
    ), real


def consulta_sem_valor(objeto: Objeto, coluna: str) -> Consulta:
    """SELECT count(*) das linhas com `coluna` nula (sem carimbo: so a varredura as leva)."""
    validado(filtro.validar_nome, coluna, 'watch_column')
    real = objeto.coluna(coluna, 'watch_column')
    return sa.select(sa.func.count()).select_from(objeto.tabela).where(real.is_(None))


# O relogio da ORIGEM, nunca o da maquina (regra 1 da marca de agua): em UTC e
# na hora local do servidor, porque uma coluna sem fuso pode guardar qualquer
# das duas, conforme o ERP grava.
_RELOGIO = {
    'postgresql': (
        "SELECT now() AT TIME ZONE 'UTC', now() AT TIME ZONE"
        " (SELECT reset_val FROM pg_settings WHERE name = 'TimeZone')"
    ),
    'mysql': (
        'SELECT UTC_TIMESTAMP(6),'
        " COALESCE(CONVERT_TZ(UTC_TIMESTAMP(6), '+00:00', @@global.time_zone),"
        ' UTC_TIMESTAMP(6))'
    ),
    'sqlite': "SELECT datetime('now'), datetime('now', 'localtime')",
    'oracle': 'SELECT SYS_EXTRACT_UTC(SYSTIMESTAMP), CAST(SYSTIMESTAMP AS TIMESTAMP) FROM DUAL',
    'mssql': 'SELECT SYSUTCDATETIME(), SYSDATETIME()',
}


def consulta_relogio(dialeto: str) -> sa.TextClause:
    """A hora da origem agora: (UTC, local do servidor), ambas sem fuso."""
    try:
        return sa.text(_RELOGIO[dialeto])
    except KeyError:
        raise ErroOrigem(
            'a origem %s não tem consulta de relógio conhecida; o ouvinte precisa'
            ' da hora da ORIGEM para a marca de água' % dialeto
        ) from None
