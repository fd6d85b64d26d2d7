"""
Um PostgreSQL PRIVADO com `wal_level=logical` (o do serviço não tem), subido dos
binários instalados uma vez por sessão de teste e derrubado no fim (NOTAS-AMBIENTE).

    postgres_logico   o servidor: `.admin(sql, banco=...)` como postgres,
                      `.banco_de_teste()` um banco novo com o login `leitor`
                      (LOGIN REPLICATION, SELECT nas tabelas que o dono criar)
                      na forma que tests/dados/erp.py usa

initdb e pg_ctl recusam rodar como root: rodam como `postgres` (runuser), com a
pasta de dados e a do socket dele. Sem os binários o teste pula dizendo; com
CI=true falha.

Com `tls=Certificados(...)` (tests/test_origem_tls.py) o servidor sobe com
`ssl=on` e um pg_hba SÓ de `hostssl` (a conexão sem TLS é recusada): o `leitor`
entra com senha, o `postgres` (o DBA) só com certificado de cliente
(`clientcert=verify-ca`). O `.admin` vai então pelo socket Unix, e as URLs dos
bancos levam os parâmetros de TLS (`url_origem`: o CA; `url_admin`: o CA e o
certificado de cliente).
"""

import glob
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

from contextia_local.processo import porta_livre
from tests.apoio.bancos import em_ci

SENHA = 'leitor-slot'


def binarios():
    """A pasta bin/ do PostgreSQL instalado mais novo, ou None."""
    pastas = sorted(
        glob.glob('/usr/lib/postgresql/*/bin'),
        key=lambda p: int(p.split('/')[-2]) if p.split('/')[-2].isdigit() else 0,
    )
    for pasta in reversed(pastas):
        if all(os.access(os.path.join(pasta, b), os.X_OK) for b in ('initdb', 'pg_ctl')):
            return pasta
    return None


class BancoLogico:
    """Um banco no PostgreSQL privado, com a cara de tests/apoio/bancos.BancoDeTeste."""

    tipo = 'postgres'

    def __init__(self, servidor, nome, usuario):
        self.servidor = servidor
        self.nome = nome
        self.usuario = usuario
        self.url_origem = 'postgresql+psycopg://%s:%s@127.0.0.1:%d/%s%s' % (
            usuario,
            SENHA,
            servidor.porta,
            nome,
            servidor.query_tls(),
        )
        # O login do DBA: o dono das tabelas (cria a publicação, muda REPLICA IDENTITY).
        self.url_admin = 'postgresql+psycopg://postgres@127.0.0.1:%d/%s%s' % (
            servidor.porta,
            nome,
            servidor.query_tls(cliente=True),
        )
        self._motor = None

    def motor(self):
        import sqlalchemy as sa

        if self._motor is None:
            self._motor = sa.create_engine(
                self.url_admin, poolclass=sa.pool.NullPool, isolation_level='AUTOCOMMIT'
            )
        return self._motor

    def admin(self, sql):
        return self.servidor.admin(sql, banco=self.nome)

    def slots(self):
        """Os slots deste banco: {nome: (wal_status, ativo)}."""
        return {
            nome: (status, ativo)
            for nome, status, ativo in self.servidor.admin(
                'SELECT slot_name, wal_status, active FROM pg_replication_slots'
                " WHERE database = '%s'" % self.nome
            )
        }


class PostgresLogico:
    def __init__(self, pasta, bin_dir, tls=None):
        self.pasta = pasta
        self.bin = bin_dir
        self.porta = porta_livre()
        self.dados = os.path.join(pasta, 'dados')
        self.run = os.path.join(pasta, 'run')
        self.tls = tls
        self.iniciado = False

    def query_tls(self, cliente=False, ca=None):
        """A query de TLS das URLs ('' sem TLS); `ca` troca o CA (o errado, no teste)."""
        if self.tls is None:
            return ''
        query = '?sslmode=verify-ca&sslrootcert=%s' % (ca or self.tls.ca)
        if cliente:
            query += '&sslcert=%s&sslkey=%s' % (self.tls.cliente, self.tls.chave_cliente)
        return query

    def _preparar_tls(self):
        """Certificado e chave do servidor numa pasta do postgres (a chave 0600), e o pg_hba."""
        pasta = os.path.join(self.pasta, 'tls')
        os.makedirs(pasta)
        copias = {}
        for nome, origem in (
            ('ca.pem', self.tls.ca),
            ('servidor.pem', self.tls.servidor),
            ('servidor.key', self.tls.chave_servidor),
        ):
            copias[nome] = os.path.join(pasta, nome)
            shutil.copyfile(origem, copias[nome])
            shutil.chown(copias[nome], 'postgres')
            os.chmod(copias[nome], 0o600)
        shutil.chown(pasta, 'postgres')
        # Só hostssl: nenhuma linha `host`, então a conexão TCP sem TLS é recusada.
        with open(os.path.join(self.dados, 'pg_hba.conf'), 'w') as arquivo:
            arquivo.write(
                'local all all trust\n'
                'hostssl all postgres 127.0.0.1/32 trust clientcert=verify-ca\n'
                'hostssl all all 127.0.0.1/32 scram-sha-256\n'
            )
        return ' -c ssl=on -c ssl_ca_file=%s -c ssl_cert_file=%s -c ssl_key_file=%s' % (
            copias['ca.pem'],
            copias['servidor.pem'],
            copias['servidor.key'],
        )

    def _como_postgres(self, *argv):
        return subprocess.run(
            ['runuser', '-u', 'postgres', '--'] + list(argv),
            check=True,
            capture_output=True,
            timeout=120,
        )

    def iniciar(self):
        os.makedirs(self.run)
        for pasta in (self.pasta, self.run):
            shutil.chown(pasta, 'postgres')
        self._como_postgres(
            os.path.join(self.bin, 'initdb'),
            '-D',
            self.dados,
            '-U',
            'postgres',
            '--auth=trust',
            '-E',
            'UTF8',
            '--locale=C.UTF-8',
        )
        opcoes = (
            '-p %d -k %s -c listen_addresses=127.0.0.1 -c wal_level=logical'
            ' -c max_replication_slots=20 -c max_wal_senders=20 -c fsync=off'
            ' -c full_page_writes=off' % (self.porta, self.run)
        )
        if self.tls is not None:
            opcoes += self._preparar_tls()
        self._como_postgres(
            os.path.join(self.bin, 'pg_ctl'),
            '-D',
            self.dados,
            '-w',
            '-l',
            os.path.join(self.pasta, 'postgres.log'),
            '-o',
            opcoes,
            'start',
        )
        self.iniciado = True
        fim = time.monotonic() + 30
        while time.monotonic() < fim:
            try:
                self.admin('SELECT 1')
                return self
            except Exception:  # noqa: BLE001 - ainda subindo
                time.sleep(0.1)
        raise RuntimeError('PostgreSQL privado não subiu (veja %s/postgres.log)' % self.pasta)

    def admin(self, sql, banco='postgres'):
        import psycopg

        # Com TLS, o DBA entra pelo TCP só com certificado: a preparação vai pelo socket.
        host = self.run if self.tls is not None else '127.0.0.1'
        with psycopg.connect(
            host=host,
            port=self.porta,
            user='postgres',
            dbname=banco,
            autocommit=True,
            connect_timeout=10,
        ) as conn:
            cursor = conn.execute(sql)
            return cursor.fetchall() if cursor.description else None

    def banco_de_teste(self, replicacao=True):
        nome = 'erp_' + uuid.uuid4().hex[:8]
        usuario = 'l' + uuid.uuid4().hex[:8]
        self.admin('CREATE DATABASE %s' % nome)
        self.admin(
            "CREATE ROLE %s LOGIN %s PASSWORD '%s'"
            % (usuario, 'REPLICATION' if replicacao else '', SENHA)
        )
        # O leitor lê o que o dono (postgres) criar depois, como no ERP do cliente.
        self.admin(
            'ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO %s' % usuario,
            banco=nome,
        )
        return BancoLogico(self, nome, usuario)

    def parar(self):
        if self.iniciado:
            subprocess.run(
                [
                    'runuser',
                    '-u',
                    'postgres',
                    '--',
                    os.path.join(self.bin, 'pg_ctl'),
                    '-D',
                    self.dados,
                    '-m',
                    'immediate',
                    '-w',
                    'stop',
                ],
                capture_output=True,
                timeout=60,
            )
            self.iniciado = False


@pytest.fixture(scope='session')
def postgres_logico():
    bin_dir = binarios()
    if bin_dir is None or shutil.which('runuser') is None:
        if em_ci():
            pytest.fail(
                'CI=true e faltam initdb/pg_ctl (ou runuser) para o PostgreSQL'
                ' privado com wal_level=logical'
            )
        pytest.skip('sem /usr/lib/postgresql/*/bin/initdb e pg_ctl: apt-get install postgresql')
    pasta = tempfile.mkdtemp(prefix='postgres-logico-')
    servidor = PostgresLogico(pasta, bin_dir).iniciar()
    yield servidor
    servidor.parar()
    shutil.rmtree(pasta, ignore_errors=True)


RAIZ_DO_REPOSITORIO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def criar_slot_pelo_ouvinte(pasta, mapa, origem, dba):
    """
    `ouvinte.py --criar-slot` de verdade: (código, stdout, stderr). `dba` None tira
    CONTEXTIA_ORIGEM_DBA do ambiente (o comando usa então a CONTEXTIA_ORIGEM).
    """
    env = dict(os.environ, CONTEXTIA_ORIGEM=origem)
    env.pop('CONTEXTIA_ORIGEM_DBA', None)
    if dba is not None:
        env['CONTEXTIA_ORIGEM_DBA'] = dba
    feito = subprocess.run(
        [sys.executable, 'ouvinte.py', '--mapping=' + str(mapa)]
        + ['--estado=' + os.path.join(str(pasta), 'estado'), '--criar-slot'],
        cwd=RAIZ_DO_REPOSITORIO,
        env=env,
        timeout=60,
        capture_output=True,
    )
    return (
        feito.returncode,
        feito.stdout.decode('utf-8', 'replace'),
        feito.stderr.decode('utf-8', 'replace'),
    )


def comando_do_dba(ouvinte, *extra, timeout=60):
    """
    `ouvinte.py` com CONTEXTIA_ORIGEM_DBA do dono das tabelas (o `--criar-slot`,
    o `--remover-slot`): (código, saída com a stderr junto).
    """
    env = dict(ouvinte.env(), CONTEXTIA_ORIGEM_DBA=ouvinte.banco.url_admin)
    feito = subprocess.run(
        ouvinte.argv(*extra),
        cwd=RAIZ_DO_REPOSITORIO,
        env=env,
        timeout=timeout,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    return feito.returncode, feito.stdout.decode('utf-8', 'replace')
