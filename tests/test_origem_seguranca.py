"""
A origem contra quem tenta alargar a leitura ou vazar a senha (issue 14), com
PostgreSQL, MariaDB e SQLite de verdade e as CLIs como processos:

  * o escopo (e cada key do `IN`) vai ao banco EXATAMENTE no tipo da coluna,
    ou e recusado: `297x`, `297 OR 1=1`, `0297` nunca leem a empresa 297 numa
    coluna inteira (o MariaDB e a afinidade do SQLite os converteriam); numa
    coluna de texto, '0297' e '297' são empresas diferentes;
  * a collation do banco (`_ci` do MariaDB) não põe a empresa 'ABC' na
    leitura da 'abc';
  * uma view cuja função roda `SET SESSION TRANSACTION READ WRITE` não deixa
    a conexão do pool gravável (nem sem limite de tempo, nem em outro fuso);
  * a senha do banco nunca sai pelo `connector.py --dry-run` nem pelo
    `ouvinte.py --once`, com URLs hostis: `@` sem codificar, URL que não
    parseia, senha na query, senha de uma letra.
"""

import decimal
import glob
import logging
import os
import socket
import subprocess
import sys

import pytest
from sqlalchemy import exc as sa_exc

from contextia_sync.origem import ErroOrigem
from contextia_sync.origem.generico import Origem
from contextia_sync.registro import logger
from tests.apoio import bancos
from tests.apoio.log import coletar_log
from tests.dados import erp as erp_teste

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIPOS = [
    pytest.param('sqlite', id='sqlite'),
    pytest.param('postgres', id='postgres', marks=pytest.mark.postgres),
    pytest.param('mariadb', id='mariadb', marks=pytest.mark.mariadb),
]

DDL = [
    'CREATE TABLE titulos (ID INTEGER PRIMARY KEY, EMPRESA_ID INTEGER,'
    ' EMPRESA_NUM NUMERIC(10,0), FILIAL VARCHAR(10))',
    "INSERT INTO titulos VALUES (1, 297, 297, '297'), (2, 297, 297, '0297'),"
    " (3, 301, 301, 'ABC'), (4, 301, 301, 'abc')",
    'CREATE VIEW v_titulos AS SELECT * FROM titulos',
]


@pytest.fixture(scope='module', params=TIPOS)
def origem(request, tmp_path_factory):
    yield from bancos.origem_de_teste(request.param, 'seg', DDL, tmp_path_factory)


def ids(linhas):
    return sorted(linha['ID'] for linha in linhas)


# ------------------------------------------------------------------ escopo exato
TORTOS = [
    '297x',
    '301abc',
    '297 OR 1=1',
    '0297',
    '+297',
    ' 297',
    '297 ',
    '297.0',
    '2.97e2',
    '297\n',
    '',
    decimal.Decimal('297.5'),
    297.5,
    True,
]


@pytest.mark.parametrize('coluna', ['EMPRESA_ID', 'EMPRESA_NUM'])
def test_escopo_que_nao_e_exatamente_o_inteiro_e_recusado_e_nada_e_lido(origem, coluna):
    """MariaDB leu a 297 com '297x'; SQLite e PostgreSQL recusavam ou liam nada, calados."""
    for torto in TORTOS:
        with pytest.raises(ErroOrigem) as erro:
            list(origem.fetch('v_titulos', ['ID'], scope=(coluna, torto)))
        texto = str(erro.value)
        assert 'não é um valor exato da coluna' in texto, (torto, texto)
        assert 'sem zeros à esquerda' in texto and 'Nada foi lido' in texto
        assert repr(torto) in texto
        with pytest.raises(ErroOrigem, match='não é um valor exato'):
            origem.contar('v_titulos', scope=(coluna, torto))


@pytest.mark.parametrize('coluna', ['EMPRESA_ID', 'EMPRESA_NUM'])
def test_escopo_numerico_so_na_forma_canonica_e_texto_compara_texto(origem, coluna):
    # inteiro: '297' (como texto_escopo o escreve), 297, Decimal('297') e 297.0 -- a 297 e so ela
    for certo in ('297', 297, decimal.Decimal('297'), 297.0):
        assert ids(origem.fetch('v_titulos', ['ID'], scope=(coluna, certo))) == [1, 2], certo
    assert ids(origem.fetch('v_titulos', ['ID'], scope=(coluna, '301'))) == [3, 4]
    assert origem.contar('v_titulos', scope=(coluna, '297')) == 2
    # '0297' numa coluna inteira: recusado (seria a 297 por outro nome no arquivo de chaves)
    with pytest.raises(ErroOrigem, match='não é um valor exato'):
        list(origem.fetch('v_titulos', ['ID'], scope=(coluna, '0297')))
    # texto: '0297' e '297' sao empresas diferentes; o numero vira o texto dele
    assert ids(origem.fetch('v_titulos', ['ID'], scope=('FILIAL', '0297'))) == [2]
    assert ids(origem.fetch('v_titulos', ['ID'], scope=('FILIAL', '297'))) == [1]
    assert ids(origem.fetch('v_titulos', ['ID'], scope=('FILIAL', 297))) == [1]
    assert ids(origem.fetch('v_titulos', ['ID'], scope=('FILIAL', '297x'))) == []


def test_key_do_in_exata_no_tipo_da_coluna(origem):
    """A releitura `key IN (...)`: '2x' numa key INT era 2 no MariaDB."""
    assert ids(origem.fetch('v_titulos', ['ID'], chaves=('ID', [1, 2]))) == [1, 2]
    assert ids(origem.fetch('v_titulos', ['ID'], chaves=('ID', ['1', '3']))) == [1, 3]
    for torto in ('2x', '02', '2 OR 1=1', True):
        with pytest.raises(ErroOrigem) as erro:
            list(origem.fetch('v_titulos', ['ID'], chaves=('ID', [1, torto])))
        assert 'key: %r não é um valor exato' % (torto,) in str(erro.value)
        assert 'A key do mapeamento e a coluna da view têm de ser do mesmo tipo' in str(erro.value)


@pytest.mark.mariadb
def test_collation_do_banco_nao_poe_outra_empresa_na_leitura(banco_mariadb):
    """utf8mb4_general_ci acha 'abc' = 'ABC': a linha da 'ABC' não vem na carga da 'abc'."""
    banco_mariadb.executar_varios(DDL)
    origem = Origem(banco_mariadb.url_origem, timeout=30)
    try:
        # o proprio banco alarga: a prova de que o teste mede alguma coisa
        assert (
            banco_mariadb.executar("SELECT COUNT(*) FROM titulos WHERE FILIAL = 'abc'")[0][0] == 2
        )
        with coletar_log(logging.WARNING, logger) as avisos:
            linhas = list(origem.fetch('v_titulos', ['ID', 'EMPRESA_ID'], scope=('FILIAL', 'abc')))
            assert [linha['ID'] for linha in linhas] == [4]
            assert list(linhas[0]) == ['ID', 'EMPRESA_ID']  # a coluna conferida nao sai
            assert ids(origem.fetch('v_titulos', ['ID'], scope=('FILIAL', 'ABC'))) == [3]
        descartes = [a for a in avisos if 'ficaram de fora' in a]
        assert len(descartes) == 2, avisos
        assert "com escopo 'abc': 1 linha(s)" in descartes[0] and "'ABC'" in descartes[0]
    finally:
        origem.fechar()


# ------------------------------------------------------------ somente leitura no pool
@pytest.mark.mariadb
def test_view_que_liga_a_escrita_nao_deixa_a_conexao_do_pool_gravavel(banco_mariadb):
    banco = banco_mariadb
    banco.executar_varios(
        [
            'CREATE TABLE vitima (ID INTEGER)',
            'CREATE TABLE t (ID INTEGER)',
            'INSERT INTO t VALUES (1)',
            # A funcao que uma view hostil (ou mal escrita) chama: destrava a sessao,
            # tira o limite de tempo e muda o fuso -- para a vida da conexao.
            'CREATE FUNCTION destrava() RETURNS BIGINT NOT DETERMINISTIC NO SQL BEGIN'
            ' SET SESSION TRANSACTION READ WRITE; SET SESSION max_statement_time = 0;'
            " SET SESSION time_zone = '+05:00'; RETURN CONNECTION_ID(); END",
            'CREATE VIEW v_hostil AS SELECT ID, destrava() AS CONEXAO FROM t',
        ]
    )
    origem = Origem(banco.url_origem, timeout=30)
    try:
        conexao = [linha['CONEXAO'] for linha in origem.fetch('v_hostil', ['ID', 'CONEXAO'])]
        assert len(conexao) == 1
        for _ in range(2):
            with origem._conexao() as conn:
                # a MESMA conexao do pool que rodou a funcao
                assert conn.exec_driver_sql('SELECT CONNECTION_ID()').scalar() == conexao[0]
                fuso, limite = conn.exec_driver_sql(
                    'SELECT @@session.time_zone, @@session.max_statement_time'
                ).one()
                assert fuso == '+00:00' and float(limite) == 30
                with pytest.raises(sa_exc.DBAPIError) as erro:
                    conn.exec_driver_sql('INSERT INTO vitima VALUES (1)')
                assert erro.value.orig.args[0] == 1792, erro.value
        assert origem.contar('v_hostil') == 1  # e a leitura segue normal
    finally:
        origem.fechar()
    assert banco.executar('SELECT COUNT(*) FROM vitima')[0][0] == 0


# ------------------------------------------------------------ a senha nas CLIs
SEGREDO = 'Vaza9Segredo'


def porta_livre():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def _rodar_clis(tmp_path, url, chave):
    """connector.py --dry-run e ouvinte.py --once com CONTEXTIA_ORIGEM=url: (saídas, estado)."""
    mapa = erp_teste.mapeamento(tmp_path)
    chaves = tmp_path / 'chaves.tsv'
    chaves.write_text('297\t%s\n' % chave)
    os.chmod(chaves, 0o600)
    estado = tmp_path / 'estado'
    env = dict(os.environ, CONTEXTIA_ORIGEM=url, CONTEXTIA_ORIGEM_TIMEOUT='10')
    env.pop('CONTEXTIA_API_KEY', None)
    comum = ['--mapping=%s' % mapa, '--source=generic']
    saidas = []
    for argv in (
        [sys.executable, 'connector.py', '--scope=297', '--dry-run'],
        [
            sys.executable,
            'ouvinte.py',
            '--chaves=%s' % chaves,
            '--estado=%s' % estado,
            '--varredura=nao',
            '--once',
        ],
    ):
        feito = subprocess.run(
            argv + comum,
            cwd=RAIZ,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=120,
        )
        saidas.append(feito.stdout.decode('utf-8', 'replace'))
    arquivos = ''
    for caminho in glob.glob(str(estado / '*')):
        if os.path.isfile(caminho):
            with open(caminho, encoding='utf-8', errors='replace') as f:
                arquivos += f.read()
    return saidas, arquivos


@pytest.mark.parametrize(
    'url, deve, nunca',
    [
        # '@' sem codificar: o resto da senha ia para o host e o driver o repetia
        # (socket unix inexistente: nada sai da maquina, nem DNS)
        (
            'mysql+pymysql://leitor:Pri1meira@%s@localhost/erp?unix_socket=/nao/existe.sock'
            % SEGREDO,
            'tem "@" sem codificar antes do host (mysql+pymysql://leitor:***@localhost/erp',
            ['Pri1meira'],
        ),
        # nao parseia (o jeito usuario/senha@host do Oracle): saia inteira
        (
            'leitor/%s@127.0.0.1:1521/ERP' % SEGREDO,
            'não é URL SQLAlchemy válida (o jeito usuario/senha@host do Oracle',
            ['leitor/', '127.0.0.1:1521'],
        ),
        (
            'postgresql+psycopg//leitor:%s@127.0.0.1/erp' % SEGREDO,
            'não é URL SQLAlchemy válida (falta o "://"',
            ['leitor:', 'postgresql+psycopg//'],
        ),
        # a senha na query: render_as_string(hide_password) nao a esconde
        (
            'postgresql+psycopg://leitor@127.0.0.1:{porta}/erp?password=%s&sslmode=disable'
            % SEGREDO,
            'postgresql+psycopg://leitor@127.0.0.1:{porta}/erp?sslmode=disable&password=***',
            [],
        ),
    ],
)
def test_url_hostil_nao_vaza_a_senha_pelas_clis(tmp_path, chave_contextia, url, deve, nunca):
    porta = porta_livre()
    url, deve = url.replace('{porta}', str(porta)), deve.replace('{porta}', str(porta))
    saidas, arquivos = _rodar_clis(tmp_path, url, chave_contextia('297'))
    for saida in saidas:
        assert deve in saida, saida
        for proibido in [SEGREDO] + nunca:
            assert proibido not in saida, (proibido, saida)
    assert SEGREDO not in arquivos


def test_senha_de_uma_letra_nao_estraga_as_mensagens(tmp_path, chave_contextia):
    """A senha 'e' trocada em todo lugar dava 'conn***ction r***fus***d'."""
    url = 'postgresql+psycopg://leitor:e@127.0.0.1:%d/erp' % porta_livre()
    saidas, arquivos = _rodar_clis(tmp_path, url, chave_contextia('297'))
    for saida in saidas:
        assert 'Connection refused' in saida, saida
        assert 'confira host, porta, usuário e senha em CONTEXTIA_ORIGEM' in saida, saida
        assert 'postgresql+psycopg://leitor:***@127.0.0.1:' in saida, saida
        assert '***c' not in saida and 'r***' not in saida, saida
    assert 'Connection refused' in arquivos
