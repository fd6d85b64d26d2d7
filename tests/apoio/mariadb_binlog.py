"""
Um MariaDB PRIVADO com o binlog ligado (o do serviço não tem), subido do binário
instalado uma vez por sessão de teste e derrubado no fim (NOTAS-AMBIENTE).

    mariadb_binlog   o servidor: `.admin(sql)` como root, `.banco_de_teste()`
                     um banco novo com o login `leitor` (SELECT, REPLICATION
                     SLAVE, BINLOG MONITOR) na forma que tests/dados/erp.py usa

Sem `mariadbd`/`mariadb-install-db` o teste pula dizendo; com CI=true falha.

Com `tls=Certificados(...)` (tests/test_origem_tls.py) o servidor sobe com o
certificado e `require_secure_transport=ON` (a conexão TCP sem TLS é recusada);
o `leitor` é criado com `REQUIRE X509` (só entra com certificado de cliente), o
`.admin` vai pelo socket Unix e as URLs levam `ssl_ca`, `ssl_cert` e `ssl_key`.
"""

import os
import shutil
import subprocess
import tempfile
import time
import uuid

import pytest

from contextia_local.processo import porta_livre
from tests.apoio.bancos import em_ci

SENHA = 'leitor-binlog'


class BancoBinlog:
    """Um banco no MariaDB privado, com a cara de tests/apoio/bancos.BancoDeTeste."""

    tipo = 'mariadb'

    def __init__(self, servidor, nome, usuario):
        self.servidor = servidor
        self.nome = nome
        self.usuario = usuario
        self.url_origem = 'mysql+pymysql://%s:%s@127.0.0.1:%d/%s%s' % (
            usuario,
            SENHA,
            servidor.porta,
            nome,
            servidor.query_tls(),
        )
        # O dono (root): cria as tabelas e escreve, como o ERP.
        self.url_admin = 'mysql+pymysql://root@127.0.0.1:%d/%s%s' % (
            servidor.porta,
            nome,
            servidor.query_tls(),
        )
        self._motor = None

    def motor(self):
        import sqlalchemy as sa

        if self._motor is None:
            self._motor = sa.create_engine(self.url_admin)
        return self._motor


class MariadbBinlog:
    def __init__(self, pasta, tls=None):
        self.pasta = pasta
        self.porta = porta_livre()
        self.processo = None
        self.tls = tls
        self.socket = os.path.join(pasta, 'run', 'm.sock')

    def query_tls(self, ca=None):
        """A query de TLS das URLs ('' sem TLS); `ca` troca o CA (o errado, no teste)."""
        if self.tls is None:
            return ''
        return '?ssl_ca=%s&ssl_cert=%s&ssl_key=%s' % (
            ca or self.tls.ca,
            self.tls.cliente,
            self.tls.chave_cliente,
        )

    def _opcoes_tls(self):
        if self.tls is None:
            return []
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
            shutil.chown(copias[nome], 'mysql')
            os.chmod(copias[nome], 0o600)
        shutil.chown(pasta, 'mysql')
        return [
            '--ssl-ca=' + copias['ca.pem'],
            '--ssl-cert=' + copias['servidor.pem'],
            '--ssl-key=' + copias['servidor.key'],
            '--require-secure-transport=ON',
        ]

    def iniciar(self):
        dados = os.path.join(self.pasta, 'dados')
        run = os.path.join(self.pasta, 'run')
        # Um tmpdir por instancia: dois mariadb-install-db ao mesmo tempo (dois
        # processos do pytest -n) batem nas tabelas temporarias do /tmp comum
        # ("Unknown table 'mysql.tmp_proxies_priv'").
        temporarios = os.path.join(self.pasta, 'tmp')
        os.makedirs(run)
        os.makedirs(temporarios)
        for pasta in (self.pasta, run, temporarios):
            shutil.chown(pasta, 'mysql')
        feito = subprocess.run(
            [
                'mariadb-install-db',
                '--no-defaults',
                '--user=mysql',
                '--datadir=' + dados,
                '--auth-root-authentication-method=normal',
                '--skip-test-db',
            ],
            capture_output=True,
            env=dict(os.environ, TMPDIR=temporarios),
        )
        if feito.returncode != 0:
            raise RuntimeError(
                'mariadb-install-db saiu com %d: %s'
                % (
                    feito.returncode,
                    (feito.stdout + feito.stderr).decode('utf-8', 'replace')[-2000:],
                )
            )
        self.log = open(os.path.join(self.pasta, 'mariadbd.log'), 'wb')
        self.processo = subprocess.Popen(
            [
                'mariadbd',
                '--no-defaults',
                '--user=mysql',
                '--datadir=' + dados,
                '--port=%d' % self.porta,
                '--bind-address=127.0.0.1',
                '--socket=' + os.path.join(run, 'm.sock'),
                '--tmpdir=' + temporarios,
                '--pid-file=' + os.path.join(run, 'm.pid'),
                '--log-bin=' + os.path.join(dados, 'binlog'),
                '--binlog-format=ROW',
                '--server-id=1',
                '--binlog-row-image=FULL',
                '--binlog-row-metadata=FULL',
            ]
            + self._opcoes_tls(),
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        fim = time.monotonic() + 30
        while time.monotonic() < fim:
            try:
                self.admin('SELECT 1')
                return self
            except Exception:  # noqa: BLE001 - ainda subindo
                time.sleep(0.1)
        raise RuntimeError('MariaDB privado não subiu (veja %s)' % self.log.name)

    def admin(self, sql):
        import pymysql

        # Com TLS, a preparação vai pelo socket Unix (o require_secure_transport o aceita).
        onde = (
            {'unix_socket': self.socket}
            if self.tls is not None
            else {'host': '127.0.0.1', 'port': self.porta}
        )
        conn = pymysql.connect(user='root', autocommit=True, **onde)
        try:
            with conn.cursor() as cursor:
                cursor.execute(sql)
                return cursor.fetchall()
        finally:
            conn.close()

    def banco_de_teste(self, concessoes=('REPLICATION SLAVE', 'BINLOG MONITOR')):
        nome = 'erp_' + uuid.uuid4().hex[:8]
        usuario = 'l' + uuid.uuid4().hex[:8]
        self.admin('CREATE DATABASE %s' % nome)
        self.admin(
            "CREATE USER '%s'@'%%' IDENTIFIED BY '%s'%s"
            % (usuario, SENHA, ' REQUIRE X509' if self.tls is not None else '')
        )
        self.admin("GRANT SELECT ON %s.* TO '%s'@'%%'" % (nome, usuario))
        if concessoes:
            self.admin("GRANT %s ON *.* TO '%s'@'%%'" % (', '.join(concessoes), usuario))
        return BancoBinlog(self, nome, usuario)

    def parar(self):
        if self.processo is not None:
            self.processo.terminate()
            try:
                self.processo.wait(30)
            except subprocess.TimeoutExpired:
                self.processo.kill()
            self.log.close()


@pytest.fixture(scope='session')
def mariadb_binlog():
    faltam = [b for b in ('mariadbd', 'mariadb-install-db') if shutil.which(b) is None]
    if faltam:
        if em_ci():
            pytest.fail('CI=true e faltam %s para o MariaDB privado com binlog' % faltam)
        pytest.skip('sem %s: apt-get install mariadb-server' % ', '.join(faltam))
    pasta = tempfile.mkdtemp(prefix='mariadb-binlog-')
    servidor = MariadbBinlog(pasta).iniciar()
    yield servidor
    servidor.parar()
    shutil.rmtree(pasta, ignore_errors=True)
