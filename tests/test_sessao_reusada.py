"""
A sessão somente leitura da origem reusada entre ciclos (issue 31, item 5).

O ciclo ocioso do `coluna` custava 12-16 comandos por ciclo no MariaDB, 86 %
deles a montagem da sessão refeita a cada retirada do pool. Agora a sessão é
montada uma vez por conexão (ao conectar) e a retirada só confere, sem ida ao
servidor, que ela continua somente leitura. Aqui, com PostgreSQL e MariaDB de
verdade e um proxy TCP que conta o que chega ao servidor:

  * N leituras ociosas (o `contar` e a janela do `coluna`) custam no máximo 2
    comandos cada par -- o ciclo ocioso de um dataset;
  * a conexão do pool cuja sessão foi posta em leitura e escrita por fora (no
    objeto do driver, sem o adaptador ver) nunca é usada assim: no PostgreSQL a
    retirada a trava de novo (o servidor avisa a mudança, o psycopg guarda o
    aviso); no MariaDB cada comando vai com o `SET STATEMENT` que o faz somente
    leitura e em UTC, seja qual for a sessão;
  * a view cuja função destrava a sessão não deixa a leitura seguinte gravar;
  * a escrita continua recusada pela conexão do adaptador.
"""

from __future__ import annotations

import datetime
import logging
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

import pytest
import sqlalchemy as sa

from contextia_sync.origem import ErroOrigem
from contextia_sync.origem.generico import Origem
from contextia_sync.registro import logger
from tests.apoio import bancos
from tests.apoio.log import coletar_log

# ---------------------------------------------------------------------------
# O proxy que conta comandos (também usado por bench/bench_ocioso_sessao.py)
# ---------------------------------------------------------------------------

# Comandos do protocolo do MySQL/MariaDB (o primeiro byte de um pacote de
# sequência 0 vindo do cliente).
_COMANDOS_MYSQL = {
    0x01: 'QUIT',
    0x02: 'INIT_DB',
    0x03: 'QUERY',
    0x0E: 'PING',
    0x11: 'CHANGE_USER',
    0x16: 'STMT_PREPARE',
    0x17: 'STMT_EXECUTE',
    0x19: 'STMT_CLOSE',
    0x1F: 'RESET_CONNECTION',
}
# O que o servidor conta como comando SQL (o `Questions` do MariaDB não conta o PING).
_SQL_MYSQL = {'QUERY', 'STMT_EXECUTE'}


@dataclass
class Comando:
    """Um comando que chegou ao servidor: quando, por qual conexão, e o SQL."""

    instante: float
    conexao: int
    tipo: str
    sql: str

    @property
    def e_sql(self) -> bool:
        return self.tipo in _SQL_MYSQL or self.tipo in ('Q', 'E')


@dataclass
class _Fluxo:
    """O que o cliente mandou numa conexão e ainda não formou mensagem inteira."""

    numero: int
    buffer: bytearray = field(default_factory=bytearray)
    iniciado: bool = False
    preparados: dict[bytes, str] = field(default_factory=dict)
    portais: dict[bytes, str] = field(default_factory=dict)


class ProxyContador:
    """
    Proxy TCP em 127.0.0.1 na frente do banco que lê o protocolo do cliente e
    anota cada comando que chega ao servidor (sem TLS: o banco de teste local).

    MySQL/MariaDB: cada pacote de sequência 0 é um comando (QUERY com o SQL,
    PING, QUIT...). PostgreSQL: cada `Q` (consulta simples) e cada `E` (execução
    do protocolo estendido, com o SQL do `P` que a preparou) é um comando.
    """

    def __init__(self, host: str, porta: int, protocolo: str) -> None:
        if protocolo not in ('mysql', 'postgresql'):
            raise ValueError(protocolo)
        self.destino = (host, porta)
        self.protocolo = protocolo
        self.lock = threading.Lock()
        self.comandos: list[Comando] = []
        self._conexoes = 0
        self.escuta = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.escuta.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.escuta.bind(('127.0.0.1', 0))
        self.escuta.listen(32)
        self.porta = self.escuta.getsockname()[1]
        self.aberto = True
        threading.Thread(target=self._aceitar, daemon=True).start()

    # -- leitura do que foi contado -------------------------------------------
    def marcar(self) -> int:
        """A posição de agora na lista de comandos (para contar a partir dela)."""
        with self.lock:
            return len(self.comandos)

    def desde(self, marca: int) -> list[Comando]:
        with self.lock:
            return list(self.comandos[marca:])

    def sql_desde(self, marca: int) -> list[str]:
        """O SQL de cada comando SQL desde `marca` (PING e QUIT não entram)."""
        return [c.sql for c in self.desde(marca) if c.e_sql]

    def conexoes(self) -> int:
        with self.lock:
            return self._conexoes

    # -- o proxy ----------------------------------------------------------------
    def _aceitar(self) -> None:
        while self.aberto:
            try:
                cliente, _ = self.escuta.accept()
            except OSError:
                return
            try:
                banco = socket.create_connection(self.destino, timeout=10)
            except OSError:
                cliente.close()
                continue
            banco.settimeout(None)
            with self.lock:
                self._conexoes += 1
                fluxo = _Fluxo(self._conexoes)
            threading.Thread(target=self._subir, args=(cliente, banco, fluxo), daemon=True).start()
            threading.Thread(target=self._bombear, args=(banco, cliente), daemon=True).start()

    def _subir(self, cliente: socket.socket, banco: socket.socket, fluxo: _Fluxo) -> None:
        """Cliente -> servidor: anota os comandos e repassa os bytes como vieram."""
        try:
            while True:
                dados = cliente.recv(65536)
                if not dados:
                    break
                fluxo.buffer += dados
                if self.protocolo == 'mysql':
                    self._ler_mysql(fluxo)
                else:
                    self._ler_postgres(fluxo)
                banco.sendall(dados)
        except OSError:
            pass
        finally:
            _fechar(cliente, banco)

    def _bombear(self, de: socket.socket, para: socket.socket) -> None:
        try:
            while True:
                dados = de.recv(65536)
                if not dados:
                    break
                para.sendall(dados)
        except OSError:
            pass
        finally:
            _fechar(de, para)

    def _anotar(self, fluxo: _Fluxo, tipo: str, sql: str) -> None:
        with self.lock:
            self.comandos.append(Comando(time.time(), fluxo.numero, tipo, sql))

    def _ler_mysql(self, fluxo: _Fluxo) -> None:
        buffer = fluxo.buffer
        while len(buffer) >= 4:
            tamanho = buffer[0] | buffer[1] << 8 | buffer[2] << 16
            if len(buffer) < 4 + tamanho:
                return
            sequencia, corpo = buffer[3], bytes(buffer[4 : 4 + tamanho])
            del buffer[: 4 + tamanho]
            if sequencia != 0 or not corpo:
                continue  # a resposta do handshake e da autenticação
            tipo = _COMANDOS_MYSQL.get(corpo[0], '0x%02x' % corpo[0])
            sql = corpo[1:].decode('utf-8', 'replace') if tipo == 'QUERY' else ''
            self._anotar(fluxo, tipo, sql)

    def _ler_postgres(self, fluxo: _Fluxo) -> None:
        buffer = fluxo.buffer
        while True:
            if not fluxo.iniciado:
                # StartupMessage, SSLRequest ou GSSENCRequest: sem o byte de tipo.
                if len(buffer) < 8:
                    return
                tamanho, codigo = struct.unpack('!ii', bytes(buffer[:8]))
                if len(buffer) < tamanho:
                    return
                del buffer[:tamanho]
                fluxo.iniciado = codigo not in (80877103, 80877104)
                continue
            if len(buffer) < 5:
                return
            tipo, tamanho = chr(buffer[0]), struct.unpack('!i', bytes(buffer[1:5]))[0]
            if len(buffer) < 1 + tamanho:
                return
            corpo = bytes(buffer[5 : 1 + tamanho])
            del buffer[: 1 + tamanho]
            self._mensagem_postgres(fluxo, tipo, corpo)

    def _mensagem_postgres(self, fluxo: _Fluxo, tipo: str, corpo: bytes) -> None:
        if tipo == 'Q':
            sql = corpo.rstrip(b'\0').decode('utf-8', 'replace')
            # A consulta vazia do pre-ping do SQLAlchemy: uma ida, nenhum comando.
            self._anotar(fluxo, 'PING' if sql.strip() in ('', ';') else 'Q', sql)
        elif tipo == 'P':
            nome, resto = corpo.split(b'\0', 1)
            fluxo.preparados[nome] = resto.split(b'\0', 1)[0].decode('utf-8', 'replace')
        elif tipo == 'B':
            portal, resto = corpo.split(b'\0', 1)
            fluxo.portais[portal] = fluxo.preparados.get(resto.split(b'\0', 1)[0], '?')
        elif tipo == 'E':
            portal = corpo.split(b'\0', 1)[0]
            self._anotar(fluxo, 'E', fluxo.portais.get(portal, '?'))

    def fechar(self) -> None:
        self.aberto = False
        self.escuta.close()


def _fechar(*lados: socket.socket) -> None:
    for lado in lados:
        try:
            lado.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        lado.close()


# ---------------------------------------------------------------------------
# Os testes
# ---------------------------------------------------------------------------

SERVIDORES = [
    pytest.param('postgres', marks=pytest.mark.postgres, id='postgres'),
    pytest.param('mariadb', marks=pytest.mark.mariadb, id='mariadb'),
    pytest.param('mysqlclient', marks=pytest.mark.mariadb, id='mariadb-mysqlclient'),
]
CICLOS = 10
LINHAS = 20
CARIMBO = datetime.datetime(2026, 1, 1, 10, 0, 0)
# A janela da marca (o `since` do `coluna`): as 15 linhas mais novas.
JANELA = ('alterado', CARIMBO + datetime.timedelta(seconds=4))

FUNCOES = {
    'postgres': [
        # O que a leitura VE da sessão, de dentro do comando.
        'CREATE FUNCTION sessao_leitura() RETURNS text LANGUAGE sql VOLATILE AS'
        " $$ SELECT current_setting('transaction_read_only') $$",
        'CREATE FUNCTION sessao_fuso() RETURNS text LANGUAGE sql VOLATILE AS'
        " $$ SELECT current_setting('TimeZone') $$",
        'CREATE FUNCTION sessao_conexao() RETURNS integer LANGUAGE sql VOLATILE AS'
        ' $$ SELECT pg_backend_pid() $$',
        # A função que uma view mal escrita (ou hostil) chama: grava.
        'CREATE FUNCTION escreve() RETURNS integer LANGUAGE plpgsql VOLATILE AS'
        ' $$ BEGIN INSERT INTO vitima VALUES (1); RETURN 1; END $$',
        # E a que destrava a sessão para a vida da conexão.
        'CREATE FUNCTION destrava() RETURNS integer LANGUAGE plpgsql VOLATILE AS $$ BEGIN'
        " PERFORM set_config('default_transaction_read_only', 'off', false);"
        " PERFORM set_config('TimeZone', 'Asia/Tokyo', false); RETURN 1; END $$",
    ],
    'mariadb': [
        'CREATE FUNCTION sessao_leitura() RETURNS INT NOT DETERMINISTIC NO SQL'
        ' RETURN @@tx_read_only',
        'CREATE FUNCTION sessao_fuso() RETURNS VARCHAR(64) NOT DETERMINISTIC NO SQL'
        ' RETURN @@time_zone',
        'CREATE FUNCTION sessao_conexao() RETURNS BIGINT NOT DETERMINISTIC NO SQL'
        ' RETURN CONNECTION_ID()',
        'CREATE FUNCTION escreve() RETURNS INT NOT DETERMINISTIC MODIFIES SQL DATA'
        ' BEGIN INSERT INTO vitima VALUES (1); RETURN 1; END',
        'CREATE FUNCTION destrava() RETURNS INT NOT DETERMINISTIC NO SQL BEGIN'
        " SET SESSION TRANSACTION READ WRITE; SET SESSION time_zone = '+05:00';"
        ' RETURN 1; END',
    ],
}
VIEWS = [
    'CREATE VIEW v_sessao AS SELECT id, sessao_leitura() AS leitura, sessao_fuso() AS fuso,'
    ' sessao_conexao() AS conexao FROM t',
    'CREATE VIEW v_escreve AS SELECT id, escreve() AS escrito FROM t',
    'CREATE VIEW v_destrava AS SELECT id, destrava() AS destravada FROM t',
]
# Como a sessão travada aparece de dentro do comando.
TRAVADA = {'postgres': ('on', 'UTC'), 'mariadb': (1, '+00:00')}
# O que o driver de cada banco diz ao recusar a escrita.
RECUSA = {'postgres': 'read-only transaction', 'mariadb': '1792'}
# A sessão posta em leitura e escrita POR FORA do adaptador, no objeto do driver.
DESTRAVAR = {
    'postgres': [
        'SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE',
        "SET TIME ZONE 'Asia/Tokyo'",
    ],
    'mariadb': [
        'SET SESSION TRANSACTION READ WRITE',
        "SET SESSION time_zone = '+05:00'",
        'SET SESSION max_statement_time = 0',
    ],
}


@pytest.fixture(scope='module', params=SERVIDORES)
def banco(request):
    """(família, banco) com t, vitima, as funções e as views; derrubado no fim."""
    tipo = 'mariadb' if request.param == 'mysqlclient' else request.param
    if request.param == 'mysqlclient' and not bancos.em_ci():
        pytest.importorskip('MySQLdb', reason='mysqlclient não instalado (pip install mysqlclient)')
    bancos.exigir_servidor(tipo)
    criado = bancos.criar_banco(tipo, 'sessao')
    try:
        criado.executar(
            'CREATE TABLE t (id INTEGER PRIMARY KEY, loja INTEGER, alterado TIMESTAMP NULL)'
        )
        for i in range(LINHAS):
            criado.executar(
                'INSERT INTO t VALUES (:i, 1, :a)',
                {'i': i + 1, 'a': CARIMBO + datetime.timedelta(seconds=i)},
            )
        criado.executar_varios(['CREATE TABLE vitima (id INTEGER)'] + FUNCOES[tipo] + VIEWS)
        if request.param == 'mysqlclient':
            criado.url_origem = criado.url_origem.replace('+pymysql://', '+mysqldb://', 1)
        yield tipo, criado
    finally:
        bancos.derrubar_banco(criado)


@pytest.fixture
def pelo_proxy(banco):
    """(família, banco, proxy, origem): o adaptador falando com o banco pelo proxy que conta."""
    tipo, criado = banco
    url = sa.engine.make_url(criado.url_origem)
    proxy = ProxyContador(
        url.host or '127.0.0.1',
        url.port or (5432 if tipo == 'postgres' else 3306),
        'postgresql' if tipo == 'postgres' else 'mysql',
    )
    origem = Origem(url.set(host='127.0.0.1', port=proxy.porta), timeout=30)
    try:
        yield tipo, criado, proxy, origem
    finally:
        origem.fechar()
        proxy.fechar()


def _ciclo_ocioso(origem):
    """O que o `coluna` pergunta num ciclo sem mudança: a sonda e a janela da marca."""
    quantas = origem.contar('t', since=JANELA)
    janela = list(origem.fetch('t', ['id', 'alterado'], since=JANELA))
    assert quantas == len(janela) == LINHAS - 5


def _vitima(criado):
    return criado.executar('SELECT COUNT(*) FROM vitima')[0][0]


def test_leitura_ociosa_custa_um_comando_sem_montar_a_sessao(pelo_proxy):
    """
    Antes: 14 comandos por par sonda + janela no MariaDB (3 SET, COMMIT e
    ROLLBACK em cada retirada, o limite tirado e posto de volta) e 10 no
    PostgreSQL (BEGIN, ROLLBACK, DECLARE, 3 FETCH e CLOSE). Agora a sessão é a
    mesma conexão do pool, montada uma vez: um comando por leitura.
    """
    tipo, _criado, proxy, origem = pelo_proxy
    for _ in range(2):
        _ciclo_ocioso(origem)  # conecta, reflete a tabela, monta a sessão
    conexoes = proxy.conexoes()
    marca = proxy.marcar()
    for _ in range(CICLOS):
        _ciclo_ocioso(origem)
    comandos = proxy.sql_desde(marca)
    texto = '\n'.join(comandos[:16])
    assert len(comandos) <= 2 * CICLOS, '%d comandos em %d ciclos:\n%s' % (
        len(comandos),
        CICLOS,
        texto,
    )
    assert proxy.conexoes() == conexoes, 'a sessão não foi reusada: conexões novas'
    # Nenhum comando de sessão, nenhuma transação: só as duas leituras.
    assert all('count(*)' in c.lower() or 'alterado' in c for c in comandos), texto
    montagem = re.compile(r'\s*(SET (?!STATEMENT )|BEGIN|COMMIT|ROLLBACK)', re.I)
    assert not [c for c in comandos if montagem.match(c)], texto
    # A hora da origem (o relógio do `coluna`) também: um comando.
    marca = proxy.marcar()
    origem.agora()
    assert len(proxy.sql_desde(marca)) == 1, proxy.sql_desde(marca)


def test_sessao_destravada_por_fora_nunca_e_usada_assim(pelo_proxy):
    """
    A conexão do pool posta em leitura e escrita (e noutro fuso) direto no
    objeto do driver, sem o adaptador ver: a próxima leitura por ela ainda é
    somente leitura e em UTC, e a view que grava não grava.
    """
    tipo, criado, _proxy, origem = pelo_proxy
    origem.conectar()
    bruta = origem._motor().raw_connection()
    try:
        cursor = bruta.dbapi_connection.cursor()
        cursor.execute(
            'SELECT pg_backend_pid()' if tipo == 'postgres' else 'SELECT CONNECTION_ID()'
        )
        conexao = cursor.fetchone()[0]
        for comando in DESTRAVAR[tipo]:
            cursor.execute(comando)
        cursor.close()
        bruta.dbapi_connection.commit()
    finally:
        bruta.close()  # de volta ao pool, destravada
    with coletar_log(logging.WARNING, logger) as avisos:
        linhas = list(origem.fetch('v_sessao', ['id', 'leitura', 'fuso', 'conexao']))
    # a MESMA conexão do pool, e a leitura a viu travada
    assert {linha['conexao'] for linha in linhas} == {conexao}, (linhas[0], conexao)
    assert {(linha['leitura'], linha['fuso']) for linha in linhas} == {TRAVADA[tipo]}
    if tipo == 'postgres':
        # o servidor avisou a mudança: a retirada travou de novo e disse
        assert any('deixou de ser somente leitura' in a for a in avisos), avisos
    with pytest.raises(ErroOrigem, match=RECUSA[tipo]):
        list(origem.fetch('v_escreve', ['id', 'escrito']))
    with origem.sessao() as conn:
        assert (
            conn.exec_driver_sql('SELECT sessao_conexao(), sessao_leitura(), sessao_fuso()').one()
            == (conexao,) + TRAVADA[tipo]
        )
        if tipo == 'postgres':  # a própria sessão, não só o comando
            assert conn.exec_driver_sql('SHOW default_transaction_read_only').scalar() == 'on'
    assert _vitima(criado) == 0


def test_view_que_destrava_a_sessao_nao_deixa_a_proxima_leitura_gravar(pelo_proxy):
    """
    Em autocommit cada comando é a sua transação: a função de uma view que
    destrava a sessão não é mais desfeita por um ROLLBACK no fim da leitura. A
    leitura seguinte pela mesma conexão continua somente leitura, e sem ROLLBACK.
    """
    tipo, criado, proxy, origem = pelo_proxy
    assert len(list(origem.fetch('v_destrava', ['id', 'destravada']))) == LINHAS
    for _ in range(2):
        linhas = list(origem.fetch('v_sessao', ['id', 'leitura', 'fuso', 'conexao']))
        assert {(linha['leitura'], linha['fuso']) for linha in linhas} == {TRAVADA[tipo]}
        with pytest.raises(ErroOrigem, match=RECUSA[tipo]):
            list(origem.fetch('v_escreve', ['id', 'escrito']))
    assert _vitima(criado) == 0
    assert proxy.conexoes() == 1, 'a conexão destravada foi trocada, não travada de novo'


def test_escrita_pela_conexao_do_adaptador_e_recusada(pelo_proxy):
    tipo, criado, _proxy, origem = pelo_proxy
    for comando in ('INSERT INTO vitima VALUES (1)', 'CREATE TABLE outra (i INTEGER)'):
        with pytest.raises(ErroOrigem, match=RECUSA[tipo]), origem.sessao() as conn:
            conn.exec_driver_sql(comando)
    with pytest.raises(ErroOrigem, match=RECUSA[tipo]):
        list(origem.fetch('v_escreve', ['id', 'escrito']))
    assert _vitima(criado) == 0
