"""
O adaptador contra PostgreSQL, MariaDB e SQLite de verdade (um banco novo por
módulo e por tipo): filtros, contagem, máximo por tipo de coluna de mudança,
retrato novo, escrita recusada, nomes hostis, Decimal, view de 200 colunas.
"""

import datetime
import decimal
import logging

import pytest
from sqlalchemy import exc as sa_exc

from contextia_sync.origem import ErroIdentificador, ErroOrigem
from contextia_sync.registro import logger
from tests.apoio import bancos
from tests.apoio.log import coletar_log

DT = datetime.datetime
TIPOS = [
    pytest.param('sqlite', id='sqlite'),
    pytest.param('postgres', id='postgres', marks=pytest.mark.postgres),
    pytest.param('mariadb', id='mariadb', marks=pytest.mark.mariadb),
]

LARGA = 200


def _ddl(tipo):
    ts = {'postgres': 'TIMESTAMP', 'mariadb': 'DATETIME', 'sqlite': 'DATETIME'}[tipo]
    texto = {'postgres': 'TEXT', 'mariadb': 'LONGTEXT', 'sqlite': 'TEXT'}[tipo]
    comandos = [
        'CREATE TABLE titulos_receber (ID INTEGER PRIMARY KEY, EMPRESA_ID INTEGER,'
        ' VALOR NUMERIC(16,2), ALTERADO_EM %s, DIA DATE, SEQ BIGINT, OBS %s)' % (ts, texto),
        'INSERT INTO titulos_receber VALUES'
        " (1, 297, 12345678901234.56, '2026-09-02 10:00:00', '2026-09-01', 100, 'a'),"
        " (2, 297, 0.01, '2026-09-02 10:05:00', '2026-09-02', 101, NULL),"
        " (3, 301, 7.50, '2026-09-02 10:10:00', '2026-09-03', 102, 'c'),"
        ' (4, 301, NULL, NULL, NULL, NULL, NULL)',
        'CREATE VIEW v_titulos AS SELECT * FROM titulos_receber',
        'CREATE TABLE larga (%s)' % ', '.join('C%03d INTEGER' % i for i in range(LARGA)),
        'INSERT INTO larga VALUES (%s)' % ', '.join(str(i) for i in range(LARGA)),
        'CREATE VIEW v_larga AS SELECT * FROM larga',
        'CREATE TABLE vitima (ID INTEGER)',
    ]
    return comandos


@pytest.fixture(scope='module', params=TIPOS)
def origem(request, tmp_path_factory):
    yield from bancos.origem_de_teste(request.param, 'orig', _ddl(request.param), tmp_path_factory)


@pytest.fixture
def avisos():
    """Captura os avisos do logger do adaptador."""
    with coletar_log(logging.WARNING, logger) as registros:
        yield registros


COLS = ['ID', 'EMPRESA_ID', 'VALOR', 'ALTERADO_EM', 'DIA', 'SEQ', 'OBS']


def ids(linhas):
    return sorted(linha['ID'] for linha in linhas)


def test_fetch_devolve_iterador_de_dicts_com_os_nomes_do_mapeamento(origem):
    linhas = origem.fetch('V_TITULOS', COLS)
    assert not isinstance(linhas, (list, tuple))  # streaming, nao lista pronta
    linhas = list(linhas)
    assert ids(linhas) == [1, 2, 3, 4]
    primeira = [linha for linha in linhas if linha['ID'] == 1][0]
    assert list(primeira) == COLS
    assert primeira['ALTERADO_EM'] == DT(2026, 9, 2, 10, 0)
    assert primeira['DIA'] == datetime.date(2026, 9, 1)
    assert type(primeira['DIA']) is datetime.date
    assert primeira['SEQ'] == 100 and primeira['OBS'] == 'a'


def test_decimal_preservado_exato(origem):
    linha = [lida for lida in origem.fetch('v_titulos', ['ID', 'VALOR']) if lida['ID'] == 1][0]
    assert linha['VALOR'] == decimal.Decimal('12345678901234.56')
    assert isinstance(linha['VALOR'], decimal.Decimal)
    assert str(linha['VALOR']) == '12345678901234.56'


def test_filtro_de_escopo(origem):
    assert ids(origem.fetch('v_titulos', ['ID'], scope=('EMPRESA_ID', 297))) == [1, 2]
    # o escopo chega como texto da linha de comando
    assert ids(origem.fetch('v_titulos', ['ID'], scope=('EMPRESA_ID', '301'))) == [3, 4]
    assert origem.contar('v_titulos', scope=('EMPRESA_ID', '297')) == 2


@pytest.mark.parametrize(
    'since, esperado',
    [
        (('ALTERADO_EM', DT(2026, 9, 2, 10, 0)), [2, 3]),  # > e estrito
        (('ALTERADO_EM', '2026-09-02T10:04:59'), [2, 3]),  # ISO do estado
        (('ALTERADO_EM', DT(2026, 9, 2, 10, 10)), []),
        (('DIA', datetime.date(2026, 9, 1)), [2, 3]),
        (('DIA', '2026-09-02'), [3]),
        (('SEQ', 100), [2, 3]),
        (('SEQ', '101'), [3]),
        (('SEQ', decimal.Decimal('101')), [3]),
    ],
)
def test_filtro_de_mudanca_por_tipo_de_coluna(origem, since, esperado):
    assert ids(origem.fetch('v_titulos', ['ID'], since=since)) == esperado
    assert origem.contar('v_titulos', since=since) == len(esperado)


def test_escopo_e_mudanca_juntos(origem):
    since = ('ALTERADO_EM', DT(2026, 9, 2, 10, 0))
    assert ids(origem.fetch('v_titulos', ['ID'], scope=('EMPRESA_ID', 297), since=since)) == [2]
    assert origem.contar('v_titulos', scope=('EMPRESA_ID', 301), since=since) == 1
    assert origem.contar('v_titulos') == 4


def test_maximo_por_tipo_de_coluna_de_mudanca(origem):
    assert origem.maximo('v_titulos', 'ALTERADO_EM') == DT(2026, 9, 2, 10, 10)
    dia = origem.maximo('v_titulos', 'DIA')
    assert dia == datetime.date(2026, 9, 3) and type(dia) is datetime.date
    seq = origem.maximo('v_titulos', 'SEQ')
    assert seq == 102 and type(seq) is int
    assert origem.maximo('vitima', 'ID') is None  # vazia


def test_maximo_volta_como_since_sem_perder_nada(origem):
    """O que maximo() devolve e o que o estado devolve: a ida e volta fecha."""
    for coluna in ('ALTERADO_EM', 'DIA', 'SEQ'):
        marca = origem.maximo('v_titulos', coluna)
        assert origem.contar('v_titulos', since=(coluna, marca)) == 0


def test_colunas_e_escopos(origem):
    nomes = origem.colunas('v_titulos')
    assert [n.upper() for n in nomes] == COLS
    assert origem.escopos('v_titulos', 'EMPRESA_ID') == [297, 301]


def test_view_de_200_colunas(origem):
    nomes = ['C%03d' % i for i in range(LARGA)]
    linhas = list(origem.fetch('v_larga', nomes))
    assert len(linhas) == 1
    assert list(linhas[0]) == nomes
    assert linhas[0] == {n: i for i, n in enumerate(nomes)}


def test_coluna_inexistente_ensina(origem):
    with pytest.raises(ErroOrigem) as erro:
        list(origem.fetch('v_titulos', ['ID', 'NAO_EXISTE']))
    assert 'NAO_EXISTE' in str(erro.value) and 'EMPRESA_ID' in str(erro.value).upper()
    with pytest.raises(ErroOrigem, match='não encontrado'):
        origem.contar('VIEW_QUE_NAO_HA')


@pytest.mark.parametrize(
    'campo, chamada',
    [
        ('source_object', lambda o: o.fetch('vitima; DROP TABLE vitima', ['ID'])),
        ('source_object', lambda o: o.contar('vitima --')),
        ('columns[1]', lambda o: o.fetch('vitima', ['ID', 'ID FROM vitima; DROP TABLE vitima'])),
        ('columns[0]', lambda o: o.fetch('vitima', ['"ID"'])),
        ('scope', lambda o: o.fetch('vitima', ['ID'], scope=("ID' OR '1'='1", 1))),
        ('since', lambda o: o.contar('vitima', since=('ID/**/', 1))),
        ('watch_column', lambda o: o.maximo('vitima', 'ID); DROP TABLE vitima; --')),
    ],
)
def test_identificador_hostil_recusado_e_nada_executa(origem, campo, chamada):
    with pytest.raises(ErroIdentificador) as erro:
        chamada(origem)
    assert campo in str(erro.value)
    assert origem.banco.executar('SELECT COUNT(*) FROM vitima')[0][0] == 0  # ainda existe


def test_valor_hostil_vai_por_bind_e_nao_casa_nada(origem):
    assert origem.contar('v_titulos', scope=('OBS', "a' OR 'x'='x")) == 0
    assert (
        list(origem.fetch('v_titulos', ['ID'], scope=('OBS', "a'; DELETE FROM vitima; --"))) == []
    )
    assert origem.contar('v_titulos', scope=('OBS', 'a')) == 1


def test_escrita_pela_conexao_do_adaptador_falha(origem):
    with origem._conexao() as conn:
        with pytest.raises(sa_exc.DBAPIError) as erro:
            conn.exec_driver_sql('INSERT INTO vitima (ID) VALUES (1)')
    texto = str(erro.value).lower()
    assert (
        'read' in texto
        and 'only' in texto.replace('-', ' ').replace('_', ' ')
        or 'readonly' in texto
    )
    with origem._conexao() as conn:
        with pytest.raises(sa_exc.DBAPIError):
            conn.exec_driver_sql('CREATE TABLE intrusa (x INTEGER)')
    # e continua travada ao voltar do pool (a mesma conexao, reusada)
    for _ in range(3):
        with origem._conexao() as conn:
            with pytest.raises(sa_exc.DBAPIError):
                conn.exec_driver_sql('DELETE FROM vitima')
    assert origem.banco.executar('SELECT COUNT(*) FROM vitima')[0][0] == 0


def test_renovar_mostra_linha_comitada_por_outra_conexao(origem):
    antes = origem.contar('v_titulos')
    aberta = origem.fetch('v_titulos', ['ID'])
    next(aberta)  # leitura deixada pela metade
    # renovar fecha a leitura abandonada: no SQLite ela seguraria o lock de
    # leitura e o ERP nao conseguiria gravar; no MySQL/Oracle seguraria o retrato.
    origem.renovar()
    origem.banco.executar(
        'INSERT INTO titulos_receber (ID, EMPRESA_ID, ALTERADO_EM) VALUES'
        " (90, 297, '2026-09-02 11:00:00')"
    )
    try:
        assert origem.contar('v_titulos') == antes + 1
        assert origem.maximo('v_titulos', 'ALTERADO_EM') == DT(2026, 9, 2, 11, 0)
        assert 90 in ids(
            origem.fetch('v_titulos', ['ID'], since=('ALTERADO_EM', DT(2026, 9, 2, 10, 30)))
        )
        with pytest.raises(ErroOrigem, match='interrompida'):
            list(aberta)
    finally:
        origem.banco.executar('DELETE FROM titulos_receber WHERE ID = 90')


def test_sem_retrato_velho_entre_chamadas(origem):
    """Cada chamada e uma transação curta: mesmo sem renovar, nada fica congelado."""
    antes = origem.contar('v_titulos')
    origem.banco.executar('INSERT INTO titulos_receber (ID, EMPRESA_ID) VALUES (91, 297)')
    try:
        assert origem.contar('v_titulos') == antes + 1
    finally:
        origem.banco.executar('DELETE FROM titulos_receber WHERE ID = 91')
