"""
Oracle e SQL Server sem servidor: cada consulta que o adaptador monta, compilada
com o dialeto REAL (o mesmo objeto que o create_engine daria) -- SQL e estilo de bind.
"""

import datetime
import decimal

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mssql, oracle

from contextia_sync.origem import ErroIdentificador, ErroOrigem
from contextia_sync.origem.consultas import (
    consulta_contar,
    consulta_escopos,
    consulta_fetch,
    consulta_maximo,
    objeto_sem_reflexao,
)
from contextia_sync.origem.generico import Origem, mascarar
from contextia_sync.origem.sessao import COMANDO_INICIO_TRANSACAO, comandos_de_sessao
from contextia_sync.origem.valores import Avisos, coagir, conversor

URL_ORACLE = 'oracle+oracledb://leitor:SenhaOracle9@erp:1521/?service_name=ERP'
URL_MSSQL = 'mssql+pyodbc://leitor:SenhaMssql9@erp:1433/ERP?driver=ODBC+Driver+18+for+SQL+Server'


@pytest.fixture(scope='module')
def oracle_dialeto():
    return sa.create_engine(URL_ORACLE).dialect


@pytest.fixture(scope='module')
def mssql_dialeto():
    return sa.create_engine(URL_MSSQL).dialect


def compilar(sql, dialeto):
    c = sql.compile(dialect=dialeto)
    return ' '.join(str(c).split()), c


def test_drivers_importam():
    import oracledb
    import pyodbc

    assert oracledb.is_thin_mode()  # thin: sem Instant Client
    assert pyodbc.version


def test_oracle_fetch_com_escopo_e_mudanca(oracle_dialeto):
    objeto = objeto_sem_reflexao('ERP.TITULOS', ['ID', 'EMPRESA_ID', 'ALT'])
    sql, nomes, posicoes, _ = consulta_fetch(
        objeto,
        ['ID', 'EMPRESA_ID', 'ALT'],
        scope=('EMPRESA_ID', 297),
        since=('ALT', datetime.datetime(2026, 9, 2, 9, 57)),
        dialeto='oracle',
    )
    texto, c = compilar(sql, oracle_dialeto)
    assert oracle_dialeto.paramstyle == 'named'
    assert texto == (
        'SELECT "ERP"."TITULOS"."ID", "ERP"."TITULOS"."EMPRESA_ID",'
        ' "ERP"."TITULOS"."ALT" FROM "ERP"."TITULOS"'
        ' WHERE "ERP"."TITULOS"."EMPRESA_ID" = :escopo'
        ' AND "ERP"."TITULOS"."ALT" > :desde'
    )
    assert c.params == {'escopo': 297, 'desde': datetime.datetime(2026, 9, 2, 9, 57)}
    assert (nomes, posicoes) == (['ID', 'EMPRESA_ID', 'ALT'], [0, 1, 2])


def test_oracle_nome_minusculo_do_reflexo_sai_sem_aspas(oracle_dialeto):
    # O SQLAlchemy devolve nomes Oracle sem caixa em minusculas: sem aspas = maiusculas.
    objeto = objeto_sem_reflexao('titulos', ['empresa_id'])
    sql = consulta_contar(objeto, scope=('EMPRESA_ID', 1), dialeto='oracle')
    texto, c = compilar(sql, oracle_dialeto)
    assert texto == 'SELECT count(*) AS count_1 FROM titulos WHERE titulos.empresa_id = :escopo'
    assert c.params == {'escopo': 1}


def test_oracle_maximo_e_escopos(oracle_dialeto):
    objeto = objeto_sem_reflexao('TITULOS', ['ALT', 'EMPRESA_ID'])
    sql, _ = consulta_maximo(objeto, 'ALT')
    assert compilar(sql, oracle_dialeto)[0] == (
        'SELECT max("TITULOS"."ALT") AS maximo FROM "TITULOS"'
    )
    sql, _ = consulta_escopos(objeto, 'EMPRESA_ID')
    assert compilar(sql, oracle_dialeto)[0] == (
        'SELECT DISTINCT "TITULOS"."EMPRESA_ID" FROM "TITULOS"'
        ' WHERE "TITULOS"."EMPRESA_ID" IS NOT NULL ORDER BY "TITULOS"."EMPRESA_ID"'
    )


def test_mssql_fetch_usa_qmark_na_ordem_escopo_mudanca(mssql_dialeto):
    objeto = objeto_sem_reflexao('dbo.TITULOS', ['ID', 'EMPRESA_ID', 'ALT'])
    sql, *_ = consulta_fetch(
        objeto, ['ID', 'ALT'], scope=('EMPRESA_ID', '297'), since=('ALT', 10), dialeto='mssql'
    )
    texto, c = compilar(sql, mssql_dialeto)
    assert mssql_dialeto.paramstyle == 'qmark'
    assert texto == (
        'SELECT dbo.[TITULOS].[ID], dbo.[TITULOS].[ALT]'
        ' FROM dbo.[TITULOS] WHERE dbo.[TITULOS].[EMPRESA_ID] = ?'
        ' AND dbo.[TITULOS].[ALT] > ?'
    )
    assert c.positiontup == ['escopo', 'desde']
    assert c.construct_params() == {'escopo': '297', 'desde': 10}


def test_mssql_contar_maximo_escopos(mssql_dialeto):
    objeto = objeto_sem_reflexao('TITULOS', ['ALT', 'EMPRESA_ID'])
    texto, c = compilar(consulta_contar(objeto, since=('ALT', 5), dialeto='mssql'), mssql_dialeto)
    assert texto == 'SELECT count(*) AS count_1 FROM [TITULOS] WHERE [TITULOS].[ALT] > ?'
    assert c.positiontup == ['desde']
    sql, _ = consulta_maximo(objeto, 'ALT')
    assert compilar(sql, mssql_dialeto)[0] == 'SELECT max([TITULOS].[ALT]) AS maximo FROM [TITULOS]'
    sql, _ = consulta_escopos(objeto, 'EMPRESA_ID')
    assert compilar(sql, mssql_dialeto)[0] == (
        'SELECT DISTINCT [TITULOS].[EMPRESA_ID] FROM [TITULOS]'
        ' WHERE [TITULOS].[EMPRESA_ID] IS NOT NULL ORDER BY [TITULOS].[EMPRESA_ID]'
    )


def test_mssql_rowversion_compara_como_binario_de_8_bytes(mssql_dialeto):
    objeto = objeto_sem_reflexao('TITULOS', ['RV'], tipos={'RV': mssql.ROWVERSION()})
    texto, c = compilar(consulta_contar(objeto, since=('RV', 4660), dialeto='mssql'), mssql_dialeto)
    assert texto.endswith('WHERE [TITULOS].[RV] > ?')
    assert c.construct_params() == {'desde': b'\x00\x00\x00\x00\x00\x00\x12\x34'}
    ler = conversor(mssql.ROWVERSION(), 'mssql', 'T.RV', Avisos())
    assert ler is not None
    assert ler(b'\x00\x00\x00\x00\x00\x00\x12\x34') == 4660


def test_identificador_hostil_nunca_vira_sql(oracle_dialeto):
    with pytest.raises(ErroIdentificador, match='source_object'):
        objeto_sem_reflexao('X; DROP TABLE Y', ['ID'])
    objeto = objeto_sem_reflexao('TITULOS', ['ID'])
    with pytest.raises(ErroIdentificador, match=r'columns\[1\]'):
        consulta_fetch(objeto, ['ID', 'ID" --'], dialeto='oracle')
    with pytest.raises(ErroIdentificador, match='since'):
        consulta_contar(objeto, since=("ALT'; DELETE", 1), dialeto='oracle')
    assert issubclass(ErroIdentificador, ErroOrigem)


def test_coluna_repetida_no_mapeamento_sai_uma_vez_no_sql(oracle_dialeto):
    objeto = objeto_sem_reflexao('T', ['ID', 'EMPRESA_ID'])
    sql, nomes, posicoes, reais = consulta_fetch(
        objeto, ['ID', 'EMPRESA_ID', 'ID'], dialeto='oracle'
    )
    assert compilar(sql, oracle_dialeto)[0] == 'SELECT "T"."ID", "T"."EMPRESA_ID" FROM "T"'
    assert posicoes == [0, 1, 0]


def test_comandos_de_sessao_por_dialeto():
    assert comandos_de_sessao('oracle', 30) == ["ALTER SESSION SET TIME_ZONE = 'UTC'"]
    assert COMANDO_INICIO_TRANSACAO['oracle'] == 'SET TRANSACTION READ ONLY'
    assert comandos_de_sessao('mssql', 30) == []  # SQL Server: o login garante
    assert comandos_de_sessao('postgresql', 30) == [
        'SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY',
        "SET TIME ZONE 'UTC'",
        'SET statement_timeout = 30000',
    ]
    assert (
        comandos_de_sessao('mysql', 30, mariadb=True)[-1] == 'SET SESSION max_statement_time = 30'
    )
    assert comandos_de_sessao('mysql', 30)[-1] == 'SET SESSION max_execution_time = 30000'
    assert comandos_de_sessao('sqlite', 30) == ['PRAGMA query_only = ON']


def test_oracle_number_sem_escala_vira_int_e_fracao_fica_decimal():
    avisos = Avisos()
    sem_escala = conversor(oracle.NUMBER(), 'oracle', 'T.N', avisos)
    assert sem_escala is not None
    assert sem_escala(decimal.Decimal('297')) == 297
    assert type(sem_escala(decimal.Decimal('297'))) is int
    assert sem_escala(decimal.Decimal('12345678901234.56')) == decimal.Decimal('12345678901234.56')
    inteiro = conversor(oracle.NUMBER(10, 0), 'oracle', 'T.I', avisos)
    assert inteiro is not None
    assert type(inteiro(decimal.Decimal('5'))) is int
    assert conversor(oracle.NUMBER(16, 2), 'oracle', 'T.V', avisos) is None


def test_oracle_lob_e_lido():
    class Lob:
        def read(self):
            return 'texto longo'

    ler = conversor(oracle.CLOB(), 'oracle', 'T.OBS', Avisos())
    assert ler is not None
    assert ler(Lob()) == 'texto longo'
    assert ler(None) is None


def test_coagir_marca_do_estado_para_o_tipo_da_coluna():
    assert coagir('2026-09-02T10:00:00', sa.DateTime(), 'oracle') == datetime.datetime(
        2026, 9, 2, 10, 0
    )
    assert coagir('2026-09-02', sa.Date(), 'mssql') == datetime.date(2026, 9, 2)
    assert coagir('297', sa.Integer(), 'oracle') == 297
    assert coagir(297, sa.String(), 'oracle') == '297'
    assert coagir('1.50', sa.Numeric(), 'oracle') == decimal.Decimal('1.50')
    with pytest.raises(ErroOrigem, match='não é valor válido'):
        coagir('ontem', sa.DateTime(), 'oracle')


def test_url_com_senha_nunca_aparece():
    origem = Origem(URL_ORACLE, timeout=10)
    assert 'SenhaOracle9' not in origem.descricao
    assert '***' in origem.descricao
    with pytest.raises(ErroOrigem) as erro:
        Origem('oracle+oracledb//leitor:SenhaOracle9@erp')
    assert 'SenhaOracle9' not in str(erro.value)
    assert mascarar('falhou em mssql+pyodbc://u:S3nh@!@h/x') == 'falhou em mssql+pyodbc://u:***@h/x'
