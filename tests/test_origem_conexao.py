"""
O adaptador quando a vida real atrapalha: conexão que cai no meio, consulta
lenta, senha errada, data zero do MySQL, fuso, e as funções de módulo.
"""

import datetime
import logging
import socket
import time

import pytest

from contextia_sync import origem as contrato
from contextia_sync.erros import ErroConfiguracao
from contextia_sync.origem import ErroConfiguracaoOrigem, ErroOrigem, generico
from contextia_sync.origem.generico import Origem
from contextia_sync.origem.sessao import COMANDO_INICIO_TRANSACAO
from contextia_sync.registro import logger
from tests.apoio import bancos
from tests.apoio.log import coletar_log

SENHA = 'Segredo-Muito-9'


def porta_livre():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@pytest.fixture
def avisos():
    with coletar_log(logging.DEBUG, logger) as registros:
        yield registros


GRANDE = 100000


def _grande(banco):
    if banco.tipo == 'postgres':
        banco.executar(
            "CREATE TABLE grande AS SELECT g AS ID, repeat('x', 200) AS PAD"
            ' FROM generate_series(1, %d) g' % GRANDE
        )
    else:
        banco.executar(
            "CREATE TABLE grande AS SELECT seq AS ID, REPEAT('x', 200) AS PAD"
            ' FROM seq_1_to_%d' % GRANDE
        )


def _matar_conexoes_do_adaptador(banco):
    if banco.tipo == 'postgres':
        banco.executar(
            'SELECT pg_terminate_backend(pid) FROM pg_stat_activity'
            ' WHERE datname = current_database() AND pid <> pg_backend_pid()'
        )
    else:
        for (ident,) in banco.executar(
            'SELECT id FROM information_schema.processlist WHERE db = :b AND id <> CONNECTION_ID()',
            {'b': banco.nome},
        ):
            banco.executar('KILL %d' % int(ident))


SERVIDORES = [
    pytest.param('postgres', marks=pytest.mark.postgres, id='postgres'),
    pytest.param('mariadb', marks=pytest.mark.mariadb, id='mariadb'),
]


@pytest.mark.parametrize('tipo', SERVIDORES)
def test_conexao_perdida_no_meio_da_leitura_e_erro_claro_e_a_proxima_reconecta(
    tipo, fabrica_de_bancos
):
    banco = fabrica_de_bancos(tipo)
    _grande(banco)
    origem = Origem(banco.url_origem, timeout=30, linhas_por_lote=100)
    try:
        linhas = origem.fetch('grande', ['ID', 'PAD'])
        for _ in range(10):
            next(linhas)
        _matar_conexoes_do_adaptador(banco)
        with pytest.raises(ErroOrigem) as erro:
            for _ in linhas:
                pass
        texto = str(erro.value)
        assert 'grande' in texto and 'interrompida' in texto and 'reconecta' in texto
        # pre-ping: a proxima chamada nao tropeca na conexao morta do pool
        assert origem.contar('grande') == GRANDE
        assert origem.maximo('grande', 'ID') == GRANDE
    finally:
        origem.fechar()


@pytest.mark.parametrize('tipo', SERVIDORES)
def test_conexao_ociosa_morta_no_pool_e_trocada_sem_erro(tipo, fabrica_de_bancos):
    banco = fabrica_de_bancos(tipo)
    banco.executar('CREATE TABLE t (ID INTEGER)')
    origem = Origem(banco.url_origem, timeout=30)
    try:
        assert origem.contar('t') == 0
        _matar_conexoes_do_adaptador(banco)  # a conexao parada no pool morreu
        assert origem.contar('t') == 0
    finally:
        origem.fechar()


@pytest.mark.parametrize('tipo', SERVIDORES)
def test_timeout_cancela_a_sonda_lenta(tipo, fabrica_de_bancos):
    banco = fabrica_de_bancos(tipo)
    if tipo == 'postgres':
        banco.executar('CREATE VIEW v_lenta AS SELECT 1 AS ID FROM pg_sleep(5)')
    else:
        banco.executar('CREATE TABLE t (ID INT)')
        banco.executar('INSERT INTO t VALUES (1), (2), (3), (4), (5)')
        banco.executar('CREATE VIEW v_lenta AS SELECT ID FROM t WHERE SLEEP(1) = 0')
    origem = Origem(banco.url_origem, timeout=1)
    try:
        inicio = time.monotonic()
        with pytest.raises(ErroOrigem, match='CONTEXTIA_ORIGEM_TIMEOUT=1s'):
            origem.contar('v_lenta')
        assert time.monotonic() - inicio < 4
    finally:
        origem.fechar()


@pytest.mark.lento
@pytest.mark.mariadb
def test_mariadb_timeout_nao_mata_carga_completa_lida_devagar(fabrica_de_bancos):
    """
    No MariaDB o max_statement_time conta o streaming inteiro (medido: uma
    leitura lenta morre). A carga completa não pode morrer por nos sermos lentos.
    """
    banco = fabrica_de_bancos('mariadb')
    _grande(banco)
    banco.executar('CREATE VIEW v_lenta AS SELECT ID FROM grande WHERE ID < 4 AND SLEEP(1) = 0')
    origem = Origem(banco.url_origem, timeout=1, linhas_por_lote=500)
    try:
        lidas = 0
        for _ in origem.fetch('grande', ['ID', 'PAD']):
            lidas += 1
            if lidas % 40000 == 0:
                time.sleep(0.8)
        assert lidas == GRANDE
        # a conexao do fetch voltou ao pool COM o limite: a sonda lenta ainda cai
        with pytest.raises(ErroOrigem, match='CONTEXTIA_ORIGEM_TIMEOUT'):
            origem.contar('v_lenta')
    finally:
        origem.fechar()


@pytest.mark.mariadb
def test_mariadb_leitura_largada_no_meio_nao_drena_a_tabela(fabrica_de_bancos):
    banco = fabrica_de_bancos('mariadb')
    _grande(banco)
    origem = Origem(banco.url_origem, timeout=30, linhas_por_lote=100)
    try:
        linhas = origem.fetch('grande', ['ID'])
        next(linhas)
        inicio = time.monotonic()
        linhas.close()
        assert time.monotonic() - inicio < 0.5
        assert origem.contar('grande') == GRANDE
    finally:
        origem.fechar()


@pytest.mark.mariadb
def test_mariadb_data_zero_vira_none_com_um_aviso_por_coluna(fabrica_de_bancos, avisos):
    banco = fabrica_de_bancos('mariadb')
    banco.executar('CREATE TABLE datas (ID INT, DIA DATE, ALT DATETIME, MARCA TIMESTAMP NULL)')
    banco.executar(
        "INSERT INTO datas VALUES (1, '0000-00-00', '0000-00-00 00:00:00', NULL),"
        " (2, '0000-00-00', '2026-09-02 10:00:00', '2026-09-02 10:00:00'),"
        " (3, '2026-09-02', '0000-00-00 00:00:00', '0000-00-00 00:00:00')"
    )
    origem = Origem(banco.url_origem, timeout=30)
    try:
        linhas = {lida['ID']: lida for lida in origem.fetch('datas', ['ID', 'DIA', 'ALT', 'MARCA'])}
        assert linhas[1]['DIA'] is None and linhas[1]['ALT'] is None
        assert linhas[2]['DIA'] is None
        assert linhas[2]['ALT'] == datetime.datetime(2026, 9, 2, 10, 0)
        assert linhas[3]['DIA'] == datetime.date(2026, 9, 2)
        assert linhas[3]['MARCA'] is None
        zeros = [a for a in avisos if 'data zero' in a]
        assert sorted(a.split(':')[0] for a in zeros) == ['datas.ALT', 'datas.DIA', 'datas.MARCA']
        list(origem.fetch('datas', ['ID', 'DIA']))  # de novo: sem aviso novo
        assert len([a for a in avisos if 'data zero' in a]) == 3
    finally:
        origem.fechar()


@pytest.mark.parametrize('tipo', SERVIDORES)
def test_fuso_coluna_com_fuso_sai_em_utc_e_sem_fuso_sai_como_gravada(tipo, fabrica_de_bancos):
    banco = fabrica_de_bancos(tipo)
    if tipo == 'postgres':
        banco.executar('CREATE TABLE f (ID INT, COM TIMESTAMPTZ, SEM TIMESTAMP)')
        banco.executar("INSERT INTO f VALUES (1, '2026-09-02 10:00:00-03', '2026-09-02 10:00:00')")
    else:
        banco.executar('CREATE TABLE f (ID INT, COM TIMESTAMP NULL, SEM DATETIME)')
        banco.executar("SET time_zone = '-03:00'")
        # o SET acima e de outra conexao (NullPool): grava em UTC explicito
        banco.executar(
            "INSERT INTO f VALUES (1, CONVERT_TZ('2026-09-02 10:00:00', '-03:00',"
            " @@session.time_zone), '2026-09-02 10:00:00')"
        )
    origem = Origem(banco.url_origem, timeout=30)
    try:
        linha = next(origem.fetch('f', ['COM', 'SEM']))
        utc = datetime.timezone.utc
        assert linha['COM'] == datetime.datetime(2026, 9, 2, 13, 0, tzinfo=utc)
        assert linha['COM'].utcoffset() == datetime.timedelta(0)
        assert linha['SEM'] == datetime.datetime(2026, 9, 2, 10, 0)
        assert linha['SEM'].tzinfo is None
        marca = origem.maximo('f', 'COM')
        assert marca.utcoffset() == datetime.timedelta(0)
        assert origem.contar('f', since=('COM', marca)) == 0
        assert origem.contar('f', since=('COM', marca - datetime.timedelta(seconds=1))) == 1
        assert origem.contar('f', since=('COM', marca.isoformat())) == 0
    finally:
        origem.fechar()


def test_sqlite_texto_de_data_ilegivel_vira_none_com_aviso(tmp_path, avisos):
    banco = bancos.criar_banco('sqlite', pasta=tmp_path)
    banco.executar('CREATE TABLE t (ID INTEGER, ALT TIMESTAMP, DIA DATE)')
    banco.executar(
        "INSERT INTO t VALUES (1, '2026-09-02 10:00:00', '2026-09-02'),"
        " (2, 'ontem', 'nunca'), (3, '2026-09-02T11:00:00', '2026-09-03 00:00:00')"
    )
    origem = Origem(banco.url_origem, timeout=30)
    try:
        linhas = {lida['ID']: lida for lida in origem.fetch('t', ['ID', 'ALT', 'DIA'])}
        assert linhas[1] == {
            'ID': 1,
            'ALT': datetime.datetime(2026, 9, 2, 10, 0),
            'DIA': datetime.date(2026, 9, 2),
        }
        assert linhas[2]['ALT'] is None and linhas[2]['DIA'] is None
        assert linhas[3]['ALT'] == datetime.datetime(2026, 9, 2, 11, 0)
        assert linhas[3]['DIA'] == datetime.date(2026, 9, 3)
        assert len([a for a in avisos if 'não é data legível' in a]) == 2
    finally:
        origem.fechar()
        bancos.derrubar_banco(banco)


@pytest.mark.parametrize(
    'url',
    [
        'postgresql+psycopg://leitor:%s@127.0.0.1:{porta}/erp' % SENHA,
        'mysql+pymysql://leitor:%s@127.0.0.1:{porta}/erp' % SENHA,
        'postgresql+psycopg://leitor:%s@127.0.0.1:{porta}' % SENHA.replace('-', '%2D'),
        'postgresql+psycopg//leitor:%s@127.0.0.1:{porta}/erp' % SENHA,  # URL torta
        'bancoinventado://leitor:%s@127.0.0.1:{porta}/erp' % SENHA,
    ],
)
def test_senha_nunca_em_excecao_nem_em_log(url, avisos):
    url = url.format(porta=porta_livre())
    with pytest.raises(ErroOrigem) as erro:
        Origem(url, timeout=5).conectar()
    assert SENHA not in str(erro.value) and SENHA.replace('-', '%2D') not in str(erro.value)
    assert erro.value.__cause__ is None and erro.value.__suppress_context__
    assert not any(SENHA in a for a in avisos)


@pytest.mark.mariadb
def test_senha_errada_de_verdade_no_mariadb(avisos):
    bancos.exigir_servidor('mariadb')
    with pytest.raises(ErroOrigem) as erro:
        Origem(
            'mysql+pymysql://ninguem_%s:%s@127.0.0.1:3306/x' % (porta_livre(), SENHA), timeout=5
        ).conectar()
    assert 'Access denied' in str(erro.value) and SENHA not in str(erro.value)


def test_funcoes_de_modulo_leem_o_ambiente_e_reconectam_depois_de_fechar(tmp_path, monkeypatch):
    banco = bancos.criar_banco('sqlite', pasta=tmp_path)
    banco.executar('CREATE TABLE t (ID INTEGER, ALT DATETIME)')
    banco.executar("INSERT INTO t VALUES (1, '2026-09-02 10:00:00')")
    monkeypatch.setenv('CONTEXTIA_ORIGEM', banco.url_origem)
    monkeypatch.setenv('CONTEXTIA_ORIGEM_TIMEOUT', '7')
    generico.fechar()
    try:
        assert generico.conectar().timeout == 7
        assert [linha['ID'] for linha in generico.fetch('t', ['ID'])] == [1]
        assert generico.contar('t', since=('ALT', '2026-09-01T00:00:00')) == 1
        assert generico.maximo('t', 'ALT') == datetime.datetime(2026, 9, 2, 10, 0)
        assert generico.colunas('t') == ['ID', 'ALT']
        assert generico.escopos('t', 'ID') == [1]
        generico.renovar()
        generico.fechar()  # o ouvinte fecha depois de uma falha...
        assert generico.contar('t') == 1  # ...e o proximo ciclo reconecta sozinho
    finally:
        generico.fechar()
        bancos.derrubar_banco(banco)


def test_sem_contextia_origem_o_erro_ensina(monkeypatch):
    monkeypatch.delenv('CONTEXTIA_ORIGEM', raising=False)
    generico.fechar()
    with pytest.raises(ErroOrigem, match='Falta CONTEXTIA_ORIGEM') as erro:
        generico.contar('t')
    # Configuracao, nao origem fora do ar: as linhas de comando saem com 2.
    assert isinstance(erro.value, ErroConfiguracaoOrigem)
    assert isinstance(erro.value, ErroConfiguracao)
    monkeypatch.setenv('CONTEXTIA_ORIGEM', 'sqlite://')
    monkeypatch.setenv('CONTEXTIA_ORIGEM_TIMEOUT', 'cinco')
    with pytest.raises(ErroOrigem, match='CONTEXTIA_ORIGEM_TIMEOUT') as erro:
        generico.conectar()
    assert isinstance(erro.value, ErroConfiguracaoOrigem)
    monkeypatch.setenv('CONTEXTIA_ORIGEM_TIMEOUT', '-1')
    with pytest.raises(ErroConfiguracaoOrigem, match='negativo'):
        generico.conectar()


@pytest.mark.parametrize('com_sources', [True, False], ids=['sources-generic', 'embutido'])
def test_interface_que_o_ouvinte_exige(com_sources, tmp_path, monkeypatch):
    if not com_sources:
        # Pacote instalado com pip: nao ha sources/ ao lado; vale o embutido.
        monkeypatch.setattr(contrato, 'PASTA_SOURCES', str(tmp_path))
    modulo = contrato.carregar_origem('generic')
    if not com_sources:
        assert modulo is generico
    for nome in (
        'conectar',
        'fetch',
        'contar',
        'maximo',
        'renovar',
        'fechar',
        'colunas',
        'escopos',
        'ErroOrigem',
        'ErroIdentificador',
    ):
        assert hasattr(modulo, nome), nome
    assert modulo.ErroOrigem is ErroOrigem
    assert modulo.ErroIdentificador is contrato.ErroIdentificador
    assert modulo.conectar is generico.conectar


def test_comando_de_inicio_de_transacao_roda_em_cada_transacao(tmp_path, monkeypatch):
    """
    O gancho que no Oracle manda `SET TRANSACTION READ ONLY` a cada transação,
    exercitado num SQLite real (sem Oracle aqui): o comando roda em toda
    transação nova, inclusive depois de renovar e de fechar.
    """
    banco = bancos.criar_banco('sqlite', pasta=tmp_path)
    banco.executar('CREATE TABLE t (ID INTEGER)')
    monkeypatch.setitem(COMANDO_INICIO_TRANSACAO, 'sqlite', 'PRAGMA cache_size = -777')
    origem = Origem(banco.url_origem, timeout=30)
    try:
        for _ in range(2):
            with origem._conexao() as conn:
                assert conn.exec_driver_sql('PRAGMA cache_size').scalar() == -777
                conn.exec_driver_sql('PRAGMA cache_size = 10')  # desfaz no meio
            origem.renovar()
            with origem._conexao() as conn:  # transacao nova
                assert conn.exec_driver_sql('PRAGMA cache_size').scalar() == -777
            origem.fechar()
    finally:
        origem.fechar()
        bancos.derrubar_banco(banco)


def test_sources_generic_expoe_tudo_que_o_adaptador_embutido_oferece():
    """`--source=generic` e a porta do `origem.generico`: nada dele fica de fora (sem
    `familias`, a carga caia no caminho lento, valor a valor, sem aviso nenhum)."""
    import inspect

    from contextia_sync.origem import carregar_origem

    porta = carregar_origem('generic')
    publicas = {
        nome
        for nome, valor in vars(generico).items()
        if inspect.isfunction(valor)
        and not nome.startswith('_')
        and valor.__module__ == generico.__name__
    }
    faltam = sorted(n for n in publicas if not hasattr(porta, n))
    assert not faltam, faltam
