"""
Bancos de origem de verdade para testes, bench, demo e tortura.

Cada uso ganha um banco NOVO com nome único (varios ajudantes rodam testes ao
mesmo tempo nesta máquina) e o derruba no fim. Sem servidor, o teste PULA com o
motivo; com CI=true, falta de banco e FALHA -- CI verde sem banco não prova nada.

Funções comuns (sem pytest), para bench/ e demo:

    banco = criar_banco('postgres')      # ou 'mariadb', ou 'sqlite' (pasta=...)
    banco.url_admin    -> monta dados (escreve)
    banco.url_origem   -> o que vai em CONTEXTIA_ORIGEM (o adaptador trava em leitura)
    banco.executar("INSERT ...", {...}) / banco.executar_varios([...])
    derrubar_banco(banco)

Servidores: PostgreSQL 127.0.0.1:5432 (postgres, trust) e MariaDB
127.0.0.1:3306 (root sem senha); outra instância via OUVINTE_TESTE_POSTGRES_URL /
OUVINTE_TESTE_MARIADB_URL (URL do servidor, sem banco).
"""

import os
import socket
import tempfile
import uuid

import pytest

POSTGRES_URL = os.environ.get(
    'OUVINTE_TESTE_POSTGRES_URL', 'postgresql+psycopg://postgres@127.0.0.1:5432'
)
MARIADB_URL = os.environ.get('OUVINTE_TESTE_MARIADB_URL', 'mysql+pymysql://root@127.0.0.1:3306')
PREFIXO = 'ouvinte_t_'
TIPOS = ('postgres', 'mariadb', 'sqlite')


def em_ci():
    return os.environ.get('CI', '').lower() == 'true'


def nome_unico(rotulo='t'):
    """ouvinte_t_<rótulo>_<pid>_<aleatório>: único entre processos paralelos."""
    rotulo = ''.join(c for c in rotulo.lower() if c.isalnum())[:16] or 't'
    return '%s%s_%d_%s' % (PREFIXO, rotulo, os.getpid(), uuid.uuid4().hex[:8])


def _url_servidor(tipo):
    import sqlalchemy as sa

    return sa.engine.make_url(POSTGRES_URL if tipo == 'postgres' else MARIADB_URL)


def servidor_disponivel(tipo):
    """(True, '') ou (False, motivo) -- sem levantar."""
    if tipo == 'sqlite':
        return True, ''
    url = _url_servidor(tipo)
    host, porta = url.host or '127.0.0.1', url.port or (5432 if tipo == 'postgres' else 3306)
    try:
        socket.create_connection((host, porta), timeout=2).close()
    except OSError as erro:
        return False, '%s em %s:%s não responde (%s)' % (tipo, host, porta, erro)
    try:
        motor = _motor_admin(tipo, None)
        with motor.connect() as conn:
            conn.exec_driver_sql('SELECT 1')
        motor.dispose()
    except Exception as erro:  # noqa: BLE001
        return False, '%s em %s:%s recusou a conexão de teste (%s)' % (
            tipo,
            host,
            porta,
            str(erro).splitlines()[0],
        )
    return True, ''


def _motor_admin(tipo, banco):
    import sqlalchemy as sa

    url = _url_servidor(tipo)
    if tipo == 'postgres':
        url = url.set(database=banco or 'postgres')
    else:
        url = url.set(database=banco).update_query_dict({'charset': 'utf8mb4'})
    # NullPool: o setup nunca divide pool com ninguem (ver NOTAS-AMBIENTE).
    return sa.create_engine(url, poolclass=sa.pool.NullPool, isolation_level='AUTOCOMMIT')


class BancoDeTeste:
    """Um banco descartável: URLs, um executor de setup e o derrubar."""

    def __init__(self, tipo, nome, url_admin, url_origem, arquivo=None):
        self.tipo = tipo
        self.nome = nome
        self.url_admin = url_admin
        self.url_origem = url_origem
        self.arquivo = arquivo
        self._motor = None

    def motor(self):
        """Engine de setup (escreve; AUTOCOMMIT; NullPool), separado do adaptador."""
        import sqlalchemy as sa

        if self._motor is None:
            if self.tipo == 'sqlite':
                self._motor = sa.create_engine(self.url_admin, poolclass=sa.pool.NullPool)
            else:
                self._motor = _motor_admin(self.tipo, self.nome)
        return self._motor

    def executar(self, sql, parametros=None):
        """Roda um SQL (texto com :nomes) e devolve as linhas, se houver."""
        import sqlalchemy as sa

        with self.motor().begin() as conn:
            if self.tipo == 'mariadb':
                conn.exec_driver_sql("SET SESSION sql_mode = ''")  # permite data zero
            resultado = conn.execute(sa.text(sql), parametros or {})
            return resultado.fetchall() if resultado.returns_rows else None

    def executar_varios(self, comandos):
        for comando in comandos:
            self.executar(comando)

    def derrubar(self):
        derrubar_banco(self)

    def __repr__(self):
        return 'BancoDeTeste(%s, %s)' % (self.tipo, self.nome)


def criar_banco(tipo, rotulo='t', pasta=None):
    """Cria um banco novo é vazio. `pasta` só para sqlite (padrão: tempdir)."""
    if tipo not in TIPOS:
        raise ValueError('tipo %r: use um de %s' % (tipo, ', '.join(TIPOS)))
    nome = nome_unico(rotulo)
    if tipo == 'sqlite':
        pasta = pasta or tempfile.mkdtemp(prefix=PREFIXO)  # derrubar_banco remove
        arquivo = os.path.join(str(pasta), nome + '.db')
        url = 'sqlite:///' + arquivo
        banco = BancoDeTeste(tipo, nome, url, url, arquivo)
        banco.executar('CREATE TABLE _criado (x INTEGER)')
        banco.executar('DROP TABLE _criado')
        return banco
    motor = _motor_admin(tipo, None)
    try:
        with motor.connect() as conn:
            if tipo == 'postgres':
                conn.exec_driver_sql(
                    'CREATE DATABASE "%s" ENCODING \'UTF8\' TEMPLATE template0' % nome
                )
            else:
                conn.exec_driver_sql('CREATE DATABASE `%s` CHARACTER SET utf8mb4' % nome)
    finally:
        motor.dispose()
    url = _url_servidor(tipo).set(database=nome)
    texto = url.render_as_string(hide_password=False)
    return BancoDeTeste(tipo, nome, texto, texto)


def derrubar_banco(banco):
    """Derruba o banco mesmo com conexão aberta (a do adaptador, por exemplo)."""
    if banco._motor is not None:
        banco._motor.dispose()
        banco._motor = None
    if banco.tipo == 'sqlite':
        for sufixo in ('', '-wal', '-shm', '-journal'):
            try:
                os.unlink(banco.arquivo + sufixo)
            except FileNotFoundError:
                pass
        pasta = os.path.dirname(banco.arquivo)
        if os.path.basename(pasta).startswith(PREFIXO):
            try:
                os.rmdir(pasta)  # so a pasta que criar_banco criou, se vazia
            except OSError:
                pass
        return
    motor = _motor_admin(banco.tipo, None)
    try:
        with motor.connect() as conn:
            if banco.tipo == 'postgres':
                conn.exec_driver_sql('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % banco.nome)
            else:
                # DROP espera o metadata lock de quem tem transacao aberta no
                # banco -- para sempre. Mata essas conexoes antes.
                ids = (
                    conn.exec_driver_sql(
                        'SELECT id FROM information_schema.processlist WHERE db = %s', (banco.nome,)
                    )
                    .scalars()
                    .all()
                )
                for ident in ids:
                    try:
                        conn.exec_driver_sql('KILL %d' % int(ident))
                    except Exception:  # noqa: BLE001
                        pass
                conn.exec_driver_sql('DROP DATABASE IF EXISTS `%s`' % banco.nome)
    finally:
        motor.dispose()


def origem_de_teste(tipo, rotulo, comandos, tmp_path_factory):
    """
    Gerador: um banco novo do `tipo` com `comandos` rodados e uma Origem do
    adaptador (timeout 30 s) sobre ele, com `.banco` e `.tipo`; fecha e derruba
    no fim. Para fixtures de módulo parametrizadas pelo tipo de banco.
    """
    from contextia_sync.origem.generico import Origem

    if tipo != 'sqlite':
        exigir_servidor(tipo)
    banco = criar_banco(
        tipo, rotulo, pasta=tmp_path_factory.mktemp('sq') if tipo == 'sqlite' else None
    )
    try:
        banco.executar_varios(comandos)
        origem = Origem(banco.url_origem, timeout=30)
        origem.banco = banco
        origem.tipo = tipo
        yield origem
        origem.fechar()
    finally:
        derrubar_banco(banco)


def exigir_servidor(tipo):
    """Pula (ou, com CI=true, falha) se o servidor não está de pe."""
    ok, motivo = servidor_disponivel(tipo)
    if not ok:
        if em_ci():
            pytest.fail('CI=true e %s -- sem banco real a suíte não prova nada' % motivo)
        pytest.skip('%s: teste pulado (com CI=true seria falha)' % motivo)


# ---------------------------------------------------------------------------
# Fixtures
# ---------------------------------------------------------------------------


def pytest_configure(config):
    for linha in (
        'postgres: precisa de um PostgreSQL de verdade',
        'mariadb: precisa de um MariaDB de verdade',
        'lento: teste que leva mais de alguns segundos',
    ):
        config.addinivalue_line('markers', linha)


def _fabrica(tipo, pasta):
    exigir_servidor(tipo)
    banco = criar_banco(tipo, pasta=pasta)
    return banco


@pytest.fixture
def banco_postgres():
    """Banco PostgreSQL novo é vazio, derrubado no fim do teste."""
    banco = _fabrica('postgres', None)
    yield banco
    derrubar_banco(banco)


@pytest.fixture
def banco_mariadb():
    """Banco MariaDB novo é vazio, derrubado no fim do teste."""
    banco = _fabrica('mariadb', None)
    yield banco
    derrubar_banco(banco)


@pytest.fixture
def banco_sqlite(tmp_path):
    """Arquivo SQLite novo em tmp_path."""
    banco = criar_banco('sqlite', pasta=tmp_path)
    yield banco
    derrubar_banco(banco)


@pytest.fixture(scope='module')
def banco_postgres_modulo():
    """Um PostgreSQL por módulo de teste (economiza criar/derrubar)."""
    banco = _fabrica('postgres', None)
    yield banco
    derrubar_banco(banco)


@pytest.fixture(scope='module')
def banco_mariadb_modulo():
    banco = _fabrica('mariadb', None)
    yield banco
    derrubar_banco(banco)


@pytest.fixture(scope='module')
def banco_sqlite_modulo(tmp_path_factory):
    banco = criar_banco('sqlite', pasta=tmp_path_factory.mktemp('sqlite'))
    yield banco
    derrubar_banco(banco)


@pytest.fixture
def fabrica_de_bancos(tmp_path):
    """criar(tipo) -> BancoDeTeste; todos derrubados no fim do teste."""
    criados = []

    def criar(tipo, rotulo='t'):
        if tipo != 'sqlite':
            exigir_servidor(tipo)
        banco = criar_banco(tipo, rotulo, pasta=tmp_path if tipo == 'sqlite' else None)
        criados.append(banco)
        return banco

    yield criar
    for banco in criados:
        derrubar_banco(banco)
