"""
Adaptador de origem generico: le o ERP do cliente, e so le.

    CONTEXTIA_ORIGEM=postgresql+psycopg://leitor:SENHA@erp:5432/erp
    CONTEXTIA_ORIGEM_TIMEOUT=300        (segundos por consulta; 0 desliga)

URLs SQLAlchemy aceitas: oracle+oracledb://, mssql+pyodbc://, mysql+pymysql://
(MySQL e MariaDB), postgresql+psycopg://, sqlite:///. A operacao, por dialeto,
esta em docs/origem.md.

O que o ouvinte, o conector e o provisionador chamam (funcoes de MODULO):

    conectar()                                    engine proprio, sessao so-leitura
    fetch(source_object, columns, scope=, since=) iterador de dicts, em streaming
    contar(source_object, scope=, since=)         int
    maximo(source_object, coluna)                 maior valor (None se vazio)
    colunas(source_object)                        nomes como estao no banco
    escopos(source_object, coluna)                valores distintos, nao nulos
    renovar()                                     retrato novo na proxima leitura
    fechar()                                      solta tudo; a proxima chamada reconecta

Tres garantias, e o porque de cada uma:
  * SO LEITURA na propria sessao (PostgreSQL, MySQL/MariaDB, Oracle, SQLite): o
    login do cliente pode ter mais direitos do que devia. SQL Server nao tem como
    travar a sessao: la a garantia e o login (db_datareader).
  * ENGINE PROPRIO: sessao marcada READ ONLY continua assim ao voltar ao pool;
    nada de fora pode pegar uma conexao daqui (nem este adaptador uma de fora).
  * TRANSACAO CURTA: cada chamada pega uma conexao, le e devolve (o pool faz
    rollback na devolucao). Nenhum retrato fica aberto entre ciclos -- ver
    `renovar()`.
"""

import datetime
import decimal
import os
import re
import sys
from contextlib import contextmanager
from urllib.parse import quote, quote_plus

try:
    from contextia_sync import filtro
except ImportError:                       # rodando de fora da raiz do repositorio
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from contextia_sync import filtro
from contextia_sync.registro import logger

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import mssql as _mssql
from sqlalchemy.types import NullType

# Linhas por ida ao servidor no streaming. 2.000 linhas de uma view de 200
# colunas ainda cabem folgado na memoria; mais que isso so poupa idas.
LINHAS_POR_LOTE = 2000
TIMEOUT_PADRAO = 300
POOL_TAMANHO = 2
POOL_EXTRA = 4
UTC = datetime.timezone.utc


class ErroOrigem(Exception):
    """A origem nao respondeu como devia (conexao, permissao, objeto, consulta)."""


class ErroIdentificador(ErroOrigem, filtro.ErroIdentificador):
    """Nome de objeto/coluna do mapeamento recusado antes de virar SQL."""


# ---------------------------------------------------------------------------
# Segredos fora de mensagens
# ---------------------------------------------------------------------------

# usuario:senha@ em qualquer lugar (inclusive numa URL torta que nem parseia).
_SENHA_EM_URL = re.compile(r'([^:/@\s]+:)[^\s/]*@')


def mascarar(texto, senha=None):
    """Tira a senha de um texto (crua, codificada na URL, e qualquer user:senha@)."""
    texto = str(texto)
    if senha:
        for forma in {senha, quote_plus(senha), quote(senha, safe='')}:
            texto = texto.replace(forma, '***')
    return _SENHA_EM_URL.sub(r'\1***@', texto)


def _erro_do_driver(erro):
    """A mensagem do driver sem o SQL e os parametros que o SQLAlchemy anexa."""
    origem = getattr(erro, 'orig', None) or erro
    texto = str(origem).strip().splitlines()
    return '%s: %s' % (type(origem).__name__, texto[0] if texto else '')


# ---------------------------------------------------------------------------
# O que cada banco precisa ouvir ao conectar
# ---------------------------------------------------------------------------

def comandos_de_sessao(dialeto, timeout, mariadb=False):
    """
    SQL rodado em cada conexao nova, por dialeto: so-leitura, fuso, timeout.

    O fuso da sessao e UTC onde o banco converte (timestamptz, TIMESTAMP do
    MySQL, WITH LOCAL TIME ZONE do Oracle): a marca de agua nao pode mudar de
    significado porque alguem trocou o fuso padrao do servidor.
    """
    if dialeto == 'postgresql':
        return ['SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY',
                "SET TIME ZONE 'UTC'",
                'SET statement_timeout = %d' % (int(timeout) * 1000)]
    if dialeto == 'mysql':
        return ['SET SESSION TRANSACTION READ ONLY',
                "SET time_zone = '+00:00'",
                comando_timeout_mysql(timeout, mariadb)]
    if dialeto == 'oracle':
        # SET TRANSACTION READ ONLY vale por transacao: vai no inicio de cada
        # uma (evento `begin`), nao aqui.
        return ["ALTER SESSION SET TIME_ZONE = 'UTC'"]
    if dialeto == 'sqlite':
        return ['PRAGMA query_only = ON']
    # SQL Server: sem comando de sessao que impeca escrita; o timeout vai pelo
    # atributo `timeout` do pyodbc.
    return []


def comando_timeout_mysql(timeout, mariadb):
    """MariaDB conta em segundos (`max_statement_time`); MySQL em ms, so SELECT."""
    if mariadb:
        return 'SET SESSION max_statement_time = %d' % int(timeout)
    return 'SET SESSION max_execution_time = %d' % (int(timeout) * 1000)


COMANDO_INICIO_TRANSACAO = {'oracle': 'SET TRANSACTION READ ONLY'}


def _timeout_do_ambiente():
    bruto = os.environ.get('CONTEXTIA_ORIGEM_TIMEOUT', '').strip()
    if not bruto:
        return TIMEOUT_PADRAO
    try:
        valor = int(bruto)
    except ValueError:
        raise ErroOrigem(
            'CONTEXTIA_ORIGEM_TIMEOUT=%r nao e numero inteiro de segundos.'
            ' Ex.: 300 (0 desliga).' % bruto) from None
    if valor < 0:
        raise ErroOrigem('CONTEXTIA_ORIGEM_TIMEOUT=%d negativo. Use 0 para desligar.'
                         % valor)
    return valor


# ---------------------------------------------------------------------------
# Valores: do mapeamento para o bind, do driver para o Python
# ---------------------------------------------------------------------------

def _eh_rowversion(tipo):
    return isinstance(tipo, _mssql.TIMESTAMP)


def _tipo_python(tipo):
    try:
        return tipo.python_type
    except (NotImplementedError, AttributeError):
        return None


def coagir(valor, tipo, dialeto, campo='since'):
    """
    O valor do filtro no tipo da coluna, para o banco comparar sem adivinhar.

    O escopo chega como texto ('297', da linha de comando) e a marca como o que
    o estado guardou (ISO, numero). Comparar TEXTO com DATA deixa o banco
    escolher a conversao -- e cada banco escolhe diferente.
    """
    if _eh_rowversion(tipo) and isinstance(valor, int) and not isinstance(valor, bool):
        # rowversion e binary(8) big-endian: comparar bytes e exato.
        return valor.to_bytes(8, 'big')
    alvo = _tipo_python(tipo)
    if isinstance(valor, str) and alvo is not None:
        texto = valor.strip()
        try:
            if alvo is datetime.datetime:
                return datetime.datetime.fromisoformat(texto)
            if alvo is datetime.date:
                if len(texto) > 10:
                    return datetime.datetime.fromisoformat(texto)
                return datetime.date.fromisoformat(texto)
            if alvo is int and re.fullmatch(r'[+-]?\d+', texto):
                return int(texto)
            if alvo is decimal.Decimal:
                return decimal.Decimal(texto)
        except (ValueError, decimal.InvalidOperation):
            raise ErroOrigem(
                '%s: %r nao e valor valido para uma coluna %s. Confira a marca de'
                ' agua no estado ou o tipo da coluna na view.' % (campo, valor, tipo)) from None
    if alvo is int and isinstance(valor, (decimal.Decimal, float)) \
            and valor == int(valor):
        return int(valor)
    if alvo is str and isinstance(valor, (int, decimal.Decimal)) \
            and not isinstance(valor, bool):
        return str(valor)
    return valor


def _texto_sqlite(valor):
    """Data para o TEXT do SQLite, no formato que ele guarda ('YYYY-MM-DD HH:MM:SS')."""
    if isinstance(valor, datetime.datetime):
        return valor.replace(tzinfo=None).isoformat(' ')
    if isinstance(valor, datetime.date):
        return valor.isoformat()
    return valor


# Tipos declarados no SQLite que guardam data em TEXT.
_DATA_SQLITE = re.compile(r'^\s*(DATETIME|TIMESTAMP|DATE)\b', re.I)


# Como cada banco diz "cancelei pelo tempo": PostgreSQL, MariaDB, MySQL,
# oracledb (call_timeout) e ODBC (HYT00).
_MARCAS_DE_TIMEOUT = re.compile(
    r'statement timeout|max_statement_time|maximum statement execution time'
    r'|DPY-4024|ORA-03156|HYT00|Query timeout', re.I)


class _Avisos:
    """Um aviso por coluna, nao um por linha: 1M de linhas nao vira 1M de avisos."""

    def __init__(self):
        self.vistos = set()

    def uma_vez(self, chave, mensagem, *args):
        if chave not in self.vistos:
            self.vistos.add(chave)
            logger.warning(mensagem, *args)


def conversor(tipo, dialeto, rotulo, avisos, tipo_sqlite=None):
    """
    Funcao que leva o valor do driver ao valor Python que o cliente serializa,
    ou None quando o driver ja entrega certo (o caso comum, e o mais rapido).
    """
    if tipo_sqlite in ('datetime', 'date'):
        def ler_sqlite(valor, _dia=(tipo_sqlite == 'date')):
            if not isinstance(valor, str):
                return valor
            try:
                if _dia:
                    return datetime.date.fromisoformat(valor.strip()[:10])
                return datetime.datetime.fromisoformat(valor.strip())
            except ValueError:
                avisos.uma_vez(rotulo, '%s: valor %r nao e data legivel -> None'
                               ' (aviso unico por coluna)', rotulo, valor)
                return None
        return ler_sqlite

    if _eh_rowversion(tipo):
        return lambda v: int.from_bytes(v, 'big') if isinstance(v, (bytes, bytearray)) else v

    if dialeto == 'mysql' and isinstance(tipo, (sa.Date, sa.DateTime)):
        com_fuso = isinstance(tipo, sa.TIMESTAMP)

        def ler_mysql(valor):
            # O PyMySQL devolve '0000-00-00' como TEXTO: nao e data que exista.
            if isinstance(valor, str):
                avisos.uma_vez(rotulo, '%s: data zero do MySQL (%r) vira None'
                               ' (aviso unico por coluna)', rotulo, valor)
                return None
            if com_fuso and isinstance(valor, datetime.datetime) and valor.tzinfo is None:
                return valor.replace(tzinfo=UTC)   # sessao em UTC: e UTC
            return valor
        return ler_mysql

    if isinstance(tipo, sa.Numeric) and not isinstance(tipo, sa.Float):
        escala = getattr(tipo, 'scale', None)
        precisao = getattr(tipo, 'precision', None)
        if escala == 0:
            return lambda v: int(v) if isinstance(v, (decimal.Decimal, float)) else v
        if dialeto == 'oracle' and escala is None and precisao is None:
            # NUMBER sem escala: inteiro quando o valor e inteiro; fracao fica Decimal.
            return lambda v: (int(v) if isinstance(v, decimal.Decimal)
                              and v == v.to_integral_value() else v)
        return None

    if isinstance(tipo, sa.Integer) and dialeto in ('oracle', 'mssql'):
        return lambda v: int(v) if isinstance(v, (decimal.Decimal, float)) else v

    if dialeto == 'oracle' and isinstance(tipo, (sa.Text, sa.LargeBinary, sa.UnicodeText)):
        return lambda v: v.read() if hasattr(v, 'read') else v
    return None


# ---------------------------------------------------------------------------
# O objeto lido: tabela leve com os tipos do banco
# ---------------------------------------------------------------------------

class Objeto:
    """Uma view/tabela resolvida: nome real, colunas reais e seus tipos."""

    def __init__(self, tabela, source_object, tipos_sqlite=None):
        self.tabela = tabela
        self.source_object = source_object
        self.tipos_sqlite = tipos_sqlite or {}
        self._exato = {c.name: c for c in tabela.c}
        self._minusculo = {}
        for c in tabela.c:
            self._minusculo.setdefault(c.name.lower(), c)

    def coluna(self, nome, campo='columns'):
        """
        A coluna real para um nome do mapeamento: exato, senao sem caixa.

        Sem caixa porque o mapeamento escreve EMPRESA_ID e o PostgreSQL guarda
        empresa_id (e o Oracle, pelo SQLAlchemy, tambem aparece minusculo) --
        o mesmo que um SQL escrito a mao sem aspas encontraria.
        """
        c = self._exato.get(nome)
        if c is None:
            c = self._minusculo.get(nome.lower())
        if c is None:
            if not self._exato:                  # sem reflexao: o nome como veio
                return sa.column(nome)
            raise ErroOrigem(
                '%s: a coluna %s nao existe em %s. Colunas que o banco mostra: %s.'
                ' Corrija o mapeamento (ou a view).'
                % (campo, nome, self.source_object,
                   ', '.join(sorted(self._exato)[:60])))
        return c


# Codigos de tipo do protocolo MySQL (pymysql.constants.FIELD_TYPE).
_TIPOS_MYSQL = {
    0: 'numeric', 246: 'numeric', 1: 'int', 2: 'int', 3: 'int', 8: 'int', 9: 'int',
    13: 'int', 4: 'float', 5: 'float', 7: 'timestamp', 10: 'date', 14: 'date',
    12: 'datetime', 15: 'texto', 253: 'texto', 254: 'texto',
}


def _colunas_pelo_select_mysql(conn, schema, nome):
    """
    Nomes e tipos pelo `SELECT * ... WHERE 1 = 0`: so precisa de SELECT.

    Le a descricao do cursor (tipo do protocolo, precisao e escala) e traduz
    para o tipo SQLAlchemy que os conversores entendem.
    """
    from sqlalchemy.dialects import mysql as _mysql
    sql = sa.select(sa.text('*')).select_from(sa.table(nome, schema=schema)).where(
        sa.text('1 = 0'))
    resultado = conn.execute(sql)
    descricao = resultado.cursor.description
    resultado.close()
    colunas = []
    for nome_coluna, codigo, _exib, _interno, precisao, escala, _nulo in descricao:
        familia = _TIPOS_MYSQL.get(codigo)
        tipo = {'int': sa.Integer(), 'float': sa.Float(), 'date': sa.Date(),
                'datetime': sa.DateTime(), 'timestamp': _mysql.TIMESTAMP(),
                'texto': sa.String()}.get(familia, NullType())
        if familia == 'numeric':
            # precisao do protocolo inclui sinal e ponto; a escala e o que importa
            tipo = sa.Numeric(precisao, escala)
        colunas.append({'name': nome_coluna, 'type': tipo})
    return colunas


def objeto_sem_reflexao(source_object, colunas=(), tipos=None):
    """Tabela montada so com nomes (e tipos, se dados): para compilar SQL sem servidor."""
    try:
        schema, nome = filtro.validar_objeto(source_object)
        nomes = filtro.validar_colunas(list(colunas)) if colunas else []
    except filtro.ErroIdentificador as erro:
        raise ErroIdentificador(str(erro)) from None
    tipos = tipos or {}
    tabela = sa.table(nome, *[sa.column(n, tipos.get(n)) for n in nomes], schema=schema)
    if not nomes:
        tabela = sa.table(nome, schema=schema)
    objeto = Objeto(tabela, source_object)
    if not nomes:
        objeto._exato = {}
    return objeto


def _onde(objeto, condicoes, dialeto):
    """O plano puro de `filtro.plano` virando expressoes SQLAlchemy, com bind."""
    expressoes = []
    for nome, operador, parametro, valor in condicoes:
        coluna = objeto.coluna(nome, parametro == 'escopo' and 'scope' or 'since')
        tipo = coluna.type
        if dialeto == 'sqlite' and objeto.tipos_sqlite.get(coluna.name):
            valor = _texto_sqlite(coagir(valor, sa.DateTime() if objeto.tipos_sqlite[
                coluna.name] == 'datetime' else sa.Date(), dialeto))
            bind = sa.bindparam(parametro, valor, type_=sa.String())
        elif isinstance(tipo, NullType):
            bind = sa.bindparam(parametro, valor)
        else:
            bind = sa.bindparam(parametro, coagir(valor, tipo, dialeto), type_=tipo)
        expressoes.append(coluna == bind if operador == '=' else coluna > bind)
    return expressoes


def _plano(scope, since):
    try:
        return filtro.plano(scope, since)
    except filtro.ErroIdentificador as erro:
        raise ErroIdentificador(str(erro)) from None


def consulta_fetch(objeto, columns, scope=None, since=None, dialeto=''):
    """SELECT das colunas do mapeamento, sem repetir coluna; devolve (sql, posicoes)."""
    try:
        nomes = filtro.validar_colunas(columns)
    except filtro.ErroIdentificador as erro:
        raise ErroIdentificador(str(erro)) from None
    reais, posicoes = [], []
    for nome in nomes:
        coluna = objeto.coluna(nome)
        for i, ja in enumerate(reais):
            if ja is coluna:
                posicoes.append(i)
                break
        else:
            posicoes.append(len(reais))
            reais.append(coluna)
    sql = sa.select(*reais).select_from(objeto.tabela)
    for expr in _onde(objeto, _plano(scope, since), dialeto):
        sql = sql.where(expr)
    return sql, nomes, posicoes, reais


def consulta_contar(objeto, scope=None, since=None, dialeto=''):
    sql = sa.select(sa.func.count()).select_from(objeto.tabela)
    for expr in _onde(objeto, _plano(scope, since), dialeto):
        sql = sql.where(expr)
    return sql


def consulta_maximo(objeto, coluna):
    try:
        filtro.validar_nome(coluna, 'watch_column')
    except filtro.ErroIdentificador as erro:
        raise ErroIdentificador(str(erro)) from None
    real = objeto.coluna(coluna, 'watch_column')
    return sa.select(sa.func.max(real).label('maximo')).select_from(objeto.tabela), real


def consulta_escopos(objeto, coluna):
    try:
        filtro.validar_nome(coluna, 'scope_column')
    except filtro.ErroIdentificador as erro:
        raise ErroIdentificador(str(erro)) from None
    real = objeto.coluna(coluna, 'scope_column')
    return (sa.select(real).select_from(objeto.tabela).where(real.is_not(None))
            .distinct().order_by(real)), real


# ---------------------------------------------------------------------------
# A origem
# ---------------------------------------------------------------------------

def _abandonar_mysql(conn, resultado):
    """
    Leitura do MySQL/MariaDB largada no meio: derruba a conexao em vez de drenar.

    Fechar o cursor sem buffer do PyMySQL LE O RESTO da tabela so para
    descarta-lo -- minutos de I/O na producao do cliente por uma leitura que
    ninguem quer mais. Soltar o resultado pendente (atributo do PyMySQL) e
    invalidar a conexao fecha o socket na hora.
    """
    if conn.closed:
        return
    cursor = getattr(resultado, 'cursor', None)
    pendente = getattr(cursor, '_result', None)
    if pendente is not None:
        pendente.unbuffered_active = False     # senao o __del__ dele drena
        cursor._result = None
    try:
        conn.invalidate()
    except Exception:                                    # noqa: BLE001
        pass


def _fechar_leitura(conn, resultado):
    """
    Fecha o cursor ANTES da conexao: no SQLite um SELECT nao finalizado segura
    o lock de leitura mesmo depois do rollback, e o ERP nao consegue gravar.
    """
    for fechar in (resultado.close, conn.close):
        try:
            fechar()
        except Exception:                                # noqa: BLE001
            pass

class Origem:
    """Uma origem (uma URL): engine proprio, sessao so-leitura, leituras curtas."""

    def __init__(self, url, timeout=None, linhas_por_lote=LINHAS_POR_LOTE):
        try:
            self.url = sa.engine.make_url(url)
        except Exception:                                # noqa: BLE001
            # A mensagem do SQLAlchemy repete a URL inteira -- com a senha.
            raise ErroOrigem(
                'CONTEXTIA_ORIGEM nao e URL SQLAlchemy valida (%s). Formato:'
                ' postgresql+psycopg://usuario:senha@host:5432/banco -- ver'
                ' docs/origem.md.' % mascarar(url)) from None
        self._senha = self.url.password
        self.url_dada = str(url)
        self.dialeto = self.url.get_backend_name()
        if self.dialeto == 'mysql' and 'charset' not in self.url.query:
            # utf8 de 3 bytes do MySQL corta emoji e alguns ideogramas.
            self.url = self.url.update_query_dict({'charset': 'utf8mb4'})
        self.timeout = _timeout_do_ambiente() if timeout is None else int(timeout)
        self.linhas_por_lote = linhas_por_lote
        self.mariadb = False
        self._engine = None
        self._objetos = {}
        self._abertas = {}       # conexao -> resultado de fetch ainda aberto
        self._avisos = _Avisos()

    # -- texto seguro -------------------------------------------------------
    @property
    def descricao(self):
        """A URL com a senha trocada por ***: o unico jeito de mostra-la."""
        return self.url.render_as_string(hide_password=True)

    def _erro(self, o_que, erro, correcao=''):
        if _MARCAS_DE_TIMEOUT.search(str(getattr(erro, 'orig', erro))):
            correcao = ('passou de CONTEXTIA_ORIGEM_TIMEOUT=%ss e o banco cancelou.'
                        ' Indice na coluna de mudanca/escopo resolve; se a consulta e'
                        ' legitimamente lenta, aumente o limite' % self.timeout)
        texto = '%s (%s): %s%s' % (o_que, self.descricao, _erro_do_driver(erro),
                                   (' -- ' + correcao) if correcao else '')
        return ErroOrigem(mascarar(texto, self._senha))

    # -- conexao ------------------------------------------------------------
    def conectar(self):
        """Cria o engine (uma vez) e prova que conecta; devolve self."""
        if self._engine is not None:
            return self
        opcoes = {'pool_pre_ping': True, 'pool_recycle': 3600}
        if self.dialeto != 'sqlite':
            opcoes.update(pool_size=POOL_TAMANHO, max_overflow=POOL_EXTRA)
        try:
            engine = sa.create_engine(self.url, **opcoes)
        except Exception as erro:                        # noqa: BLE001
            raise ErroOrigem(mascarar(
                'nao consegui montar o acesso a origem %s: %s: %s -- confira o'
                ' prefixo da URL e se o driver esta instalado (requirements.txt).'
                % (self.descricao, type(erro).__name__, erro), self._senha)) from None
        event.listen(engine, 'connect', self._ao_conectar)
        if self.dialeto in COMANDO_INICIO_TRANSACAO:
            event.listen(engine, 'begin', self._ao_iniciar)
        self._engine = engine
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql(self._sql_ping())
        except sa_exc.DBAPIError as erro:
            self._engine = None
            engine.dispose()
            raise self._erro('nao conectou a origem', erro,
                             'confira host, porta, usuario e senha em'
                             ' CONTEXTIA_ORIGEM e se o banco aceita conexao'
                             ' desta maquina') from None
        logger.info('origem ...........: %s (somente leitura: %s; timeout: %s)',
                    self.descricao,
                    'pelo LOGIN (SQL Server nao trava sessao)' if self.dialeto == 'mssql'
                    else 'sessao travada', '%ss' % self.timeout if self.timeout else 'nenhum')
        if self.dialeto == 'mssql':
            logger.warning('SQL Server: o adaptador nao consegue travar a sessao em'
                           ' leitura. Garanta que o login so tem db_datareader'
                           ' (docs/origem.md).')
        return self

    def _sql_ping(self):
        return 'SELECT 1 FROM DUAL' if self.dialeto == 'oracle' else 'SELECT 1'

    def _ao_conectar(self, dbapi_conn, _registro):
        if self.dialeto == 'mysql':
            info = getattr(dbapi_conn, 'get_server_info', lambda: '')()
            self.mariadb = 'mariadb' in str(info).lower()
        comandos = comandos_de_sessao(self.dialeto, self.timeout, self.mariadb)
        if not self.timeout:
            comandos = [c for c in comandos if 'timeout' not in c and 'max_' not in c]
        cursor = dbapi_conn.cursor()
        try:
            for comando in comandos:
                cursor.execute(comando)
        finally:
            cursor.close()
        if self.dialeto == 'oracle' and self.timeout:
            dbapi_conn.call_timeout = self.timeout * 1000   # ms por ida ao servidor
        if self.dialeto == 'mssql' and self.timeout:
            dbapi_conn.timeout = self.timeout
        if self.dialeto in ('postgresql', 'mysql'):
            dbapi_conn.commit()

    def _ao_iniciar(self, conn):
        cursor = conn.connection.dbapi_connection.cursor()
        try:
            cursor.execute(COMANDO_INICIO_TRANSACAO[self.dialeto])
        finally:
            cursor.close()

    @contextmanager
    def _conexao(self):
        """Uma conexao do pool, numa transacao que acaba (rollback) ao sair."""
        self.conectar()
        try:
            conn = self._engine.connect()
        except sa_exc.DBAPIError as erro:
            raise self._erro('nao conectou a origem', erro,
                             'a origem esta no ar? o proximo ciclo tenta de novo') from None
        try:
            yield conn
        except sa_exc.DBAPIError as erro:
            raise self._erro('consulta na origem falhou', erro) from None
        finally:
            conn.close()

    # -- objeto ---------------------------------------------------------------
    def _objeto(self, conn, source_object):
        if source_object in self._objetos:
            return self._objetos[source_object]
        try:
            schema, nome = filtro.validar_objeto(source_object)
        except filtro.ErroIdentificador as erro:
            raise ErroIdentificador(str(erro)) from None
        inspetor = sa.inspect(conn)
        opcoes = {'oracle_resolve_synonyms': True} if self.dialeto == 'oracle' else {}
        candidatos = []
        for transformar in (str, str.lower, str.upper):
            par = (schema and transformar(schema), transformar(nome))
            if par not in candidatos:
                candidatos.append(par)
        ultimo_erro = ''
        for cand_schema, cand_nome in candidatos:
            try:
                reflexo = inspetor.get_columns(cand_nome, schema=cand_schema, **opcoes)
            except sa_exc.NoSuchTableError:
                continue
            except sa_exc.DBAPIError as erro:
                if self.dialeto != 'mysql':
                    raise
                # MySQL/MariaDB refletem view com SHOW CREATE, que exige SHOW VIEW
                # -- direito que um login so-SELECT nao tem (e nao deve ter).
                ultimo_erro = ' Ultimo erro: %s.' % _erro_do_driver(erro)
                try:
                    reflexo = _colunas_pelo_select_mysql(conn, cand_schema, cand_nome)
                except sa_exc.DBAPIError as erro_select:
                    ultimo_erro = ' Ultimo erro: %s.' % _erro_do_driver(erro_select)
                    continue
            if reflexo:
                break
        else:
            raise ErroOrigem(mascarar(
                'source_object %s nao encontrado na origem %s (nem em maiusculas/'
                'minusculas), ou este login nao tem SELECT nele. Confira o nome no'
                ' mapeamento e o GRANT (docs/origem.md).%s'
                % (source_object, self.descricao, ultimo_erro), self._senha))
        colunas, tipos_sqlite = [], {}
        for info in reflexo:
            tipo = info['type']
            if self.dialeto == 'sqlite':
                declarado = _DATA_SQLITE.match(str(tipo))
                if declarado:
                    # TEXT no disco: lido como texto e convertido aqui, sem o
                    # parser estrito do SQLAlchemy derrubar a leitura inteira
                    # por uma linha torta.
                    tipos_sqlite[info['name']] = ('date' if declarado.group(1).upper()
                                                  == 'DATE' else 'datetime')
                    tipo = sa.String()
            colunas.append(sa.column(info['name'], tipo))
        objeto = Objeto(sa.table(cand_nome, *colunas, schema=cand_schema),
                        source_object, tipos_sqlite)
        self._objetos[source_object] = objeto
        return objeto

    def _conversores(self, objeto, nomes, reais):
        lista = []
        for posicao, (nome, coluna) in enumerate(zip(nomes, reais)):
            funcao = conversor(coluna.type, self.dialeto,
                               '%s.%s' % (objeto.source_object, nome), self._avisos,
                               objeto.tipos_sqlite.get(coluna.name))
            if funcao is not None:
                lista.append((posicao, funcao))
        return lista

    # -- leituras -------------------------------------------------------------
    def fetch(self, source_object, columns, scope=None, since=None):
        """
        As linhas como dicts (chaves = nomes de `columns`), em streaming.

        A consulta roda AQUI (erro de conexao, coluna inexistente e nome hostil
        saem ja na chamada); as linhas vem a medida que o laco pede, em lotes
        de `linhas_por_lote`: a memoria nao cresce com o tamanho da view.
        """
        try:
            nomes = filtro.validar_colunas(columns)
            plano = filtro.plano(scope, since)
        except filtro.ErroIdentificador as erro:
            raise ErroIdentificador(str(erro)) from None
        self.conectar()
        try:
            conn = self._engine.connect()
        except sa_exc.DBAPIError as erro:
            raise self._erro('nao conectou a origem', erro,
                             'a origem esta no ar? o proximo ciclo tenta de novo') from None
        try:
            objeto = self._objeto(conn, source_object)
            sql, nomes, posicoes, reais = consulta_fetch(objeto, nomes, scope, since,
                                                         self.dialeto)
            if self.dialeto == 'mysql' and self.timeout:
                # No MySQL/MariaDB o limite conta o streaming inteiro, inclusive
                # o tempo que NOS levamos para enviar ao Contextia: uma carga
                # completa legitima seria morta no meio. O limite fica para as
                # sondas (contar/maximo); a leitura ja foi dimensionada por elas.
                conn.exec_driver_sql(comando_timeout_mysql(0, self.mariadb))
            resultado = conn.execution_options(
                stream_results=True, yield_per=self.linhas_por_lote).execute(sql)
        except sa_exc.DBAPIError as erro:
            self._devolver(conn)
            raise self._erro('leitura de %s falhou' % source_object, erro) from None
        except BaseException:
            self._devolver(conn)
            raise
        self._abertas[conn] = resultado
        conversores = self._conversores(objeto, [nomes[posicoes.index(i)]
                                                 for i in range(len(reais))], reais)
        logger.debug('fetch %s: %s', source_object, filtro.descrever(plano)[0] or '(tudo)')
        return self._linhas(conn, resultado, source_object, nomes, posicoes, conversores)

    def _linhas(self, conn, resultado, source_object, nomes, posicoes, conversores):
        lidas = 0
        direto = posicoes == list(range(len(posicoes)))
        chaves = tuple(nomes)
        completo = False
        try:
            for linha in resultado:
                if conversores:
                    linha = list(linha)
                    for posicao, funcao in conversores:
                        linha[posicao] = funcao(linha[posicao])
                if direto:
                    yield dict(zip(chaves, linha))
                else:
                    yield {nome: linha[p] for nome, p in zip(chaves, posicoes)}
                lidas += 1
            completo = True
        except sa_exc.DBAPIError as erro:
            raise self._erro('leitura de %s interrompida depois de %d linha(s)'
                             % (source_object, lidas), erro,
                             'nada desta leitura deve ser dado como completo; a'
                             ' proxima chamada reconecta') from None
        except Exception:
            if conn in self._abertas:
                raise
            raise ErroOrigem(
                'leitura de %s interrompida depois de %d linha(s): fechada por'
                ' renovar()/fechar() antes do fim -- leia ate o fim antes de'
                ' renovar, ou chame fetch de novo' % (source_object, lidas)) from None
        finally:
            self._abertas.pop(conn, None)
            if not completo and self.dialeto == 'mysql':
                _abandonar_mysql(conn, resultado)
            try:
                resultado.close()
            except Exception:                            # noqa: BLE001
                pass
            self._devolver(conn)

    def _devolver(self, conn):
        """
        Devolve a conexao do fetch ao pool com o limite de tempo de volta.

        O fetch do MySQL/MariaDB tira o limite da SESSAO; sem restaurar, a
        proxima sonda nessa conexao do pool rodaria sem limite nenhum. Se nem
        restaurar der, a conexao e descartada.
        """
        if self.dialeto == 'mysql' and self.timeout and not conn.closed \
                and not conn.invalidated:
            try:
                conn.exec_driver_sql(comando_timeout_mysql(self.timeout, self.mariadb))
            except Exception:                            # noqa: BLE001
                try:
                    conn.invalidate()
                except Exception:                        # noqa: BLE001
                    pass
        try:
            conn.close()
        except Exception:                                # noqa: BLE001
            pass

    def contar(self, source_object, scope=None, since=None):
        """Quantas linhas casam com o filtro (a sonda barata do ouvinte)."""
        with self._conexao() as conn:
            objeto = self._objeto(conn, source_object)
            return int(conn.execute(consulta_contar(objeto, scope, since,
                                                    self.dialeto)).scalar_one())

    def maximo(self, source_object, coluna):
        """O maior valor da coluna (ponto de partida da marca de agua); None se vazia."""
        with self._conexao() as conn:
            objeto = self._objeto(conn, source_object)
            sql, real = consulta_maximo(objeto, coluna)
            valor = conn.execute(sql).scalar()
        funcao = conversor(real.type, self.dialeto, '%s.%s' % (source_object, coluna),
                           self._avisos, objeto.tipos_sqlite.get(real.name))
        return funcao(valor) if funcao and valor is not None else valor

    def colunas(self, source_object):
        """Os nomes das colunas como o banco os guarda (Oracle em maiusculas)."""
        with self._conexao() as conn:
            objeto = self._objeto(conn, source_object)
        dialeto = self._engine.dialect
        return [dialeto.denormalize_name(c.name) if self.dialeto == 'oracle' else c.name
                for c in objeto.tabela.c]

    def escopos(self, source_object, coluna):
        """Os valores distintos, nao nulos, de `coluna` (as empresas que existem ali)."""
        with self._conexao() as conn:
            objeto = self._objeto(conn, source_object)
            sql, real = consulta_escopos(objeto, coluna)
            valores = conn.execute(sql).scalars().all()
        funcao = conversor(real.type, self.dialeto, '%s.%s' % (source_object, coluna),
                           self._avisos, objeto.tipos_sqlite.get(real.name))
        return [funcao(v) for v in valores] if funcao else list(valores)

    def renovar(self):
        """
        Garante que a proxima leitura ve o banco de AGORA.

        Oracle READ ONLY e MySQL REPEATABLE READ congelam o retrato no inicio da
        transacao: uma sessao aberta desde a subida do ouvinte veria para sempre
        o banco daquele instante. Aqui cada chamada ja roda numa transacao que
        acaba ao fim dela; o que sobra para renovar e a leitura que alguem
        deixou pela metade -- essa e fechada.
        """
        for conn, resultado in list(self._abertas.items()):
            logger.warning('origem: leitura deixada pela metade fechada ao renovar')
            self._abertas.pop(conn, None)
            if self.dialeto == 'mysql':
                _abandonar_mysql(conn, resultado)
            _fechar_leitura(conn, resultado)

    def fechar(self):
        """Solta conexoes e engine. Chamar de novo qualquer leitura reconecta."""
        self.renovar()
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
        self._objetos.clear()


# ---------------------------------------------------------------------------
# Funcoes de modulo: o que `--source=generic` expoe
# ---------------------------------------------------------------------------

_padrao = None


def conectar(url=None, timeout=None):
    """
    A origem de CONTEXTIA_ORIGEM (ou de `url`), conectada. Chamada de novo,
    devolve a mesma; as outras funcoes chamam esta sozinhas.
    """
    global _padrao
    if url is None:
        url = os.environ.get('CONTEXTIA_ORIGEM', '').strip()
        if not url:
            raise ErroOrigem(
                'Falta CONTEXTIA_ORIGEM: a URL SQLAlchemy do banco do ERP, com login'
                ' SOMENTE LEITURA. Ex.: oracle+oracledb://leitor:SENHA@erp:1521/'
                '?service_name=ERP -- formatos por banco em docs/origem.md.')
    if _padrao is not None and _padrao.url_dada == str(url) \
            and (timeout is None or _padrao.timeout == int(timeout)):
        return _padrao.conectar()
    if _padrao is not None:
        _padrao.fechar()
    _padrao = None
    origem = Origem(url, timeout)
    origem.conectar()
    _padrao = origem
    return origem


def _origem():
    return _padrao.conectar() if _padrao is not None else conectar()


def fetch(source_object, columns, scope=None, since=None):
    return _origem().fetch(source_object, columns, scope=scope, since=since)


def contar(source_object, scope=None, since=None):
    return _origem().contar(source_object, scope=scope, since=since)


def maximo(source_object, coluna):
    return _origem().maximo(source_object, coluna)


def colunas(source_object):
    return _origem().colunas(source_object)


def escopos(source_object, coluna):
    return _origem().escopos(source_object, coluna)


def renovar():
    if _padrao is not None:
        _padrao.renovar()


def fechar():
    """Solta a origem; a proxima chamada le CONTEXTIA_ORIGEM de novo e reconecta."""
    global _padrao
    if _padrao is not None:
        _padrao.fechar()
    _padrao = None
