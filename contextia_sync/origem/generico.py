"""
Adaptador de origem genérico: lê o ERP do cliente, e só lê.

    CONTEXTIA_ORIGEM=postgresql+psycopg://leitor:SENHA@erp:5432/erp
    CONTEXTIA_ORIGEM_TIMEOUT=300        (segundos por consulta; 0 desliga)

URLs SQLAlchemy aceitas: oracle+oracledb://, mssql+pyodbc://, mysql+pymysql://
ou mysql+mysqldb:// (MySQL e MariaDB; o mysqlclient e o rápido), postgresql+psycopg://,
sqlite:///. A operação, por dialeto,
está em docs/origem.md.

O que o ouvinte, o conector e o provisionador chamam (funções de MODULO):

    conectar()                                    engine próprio, sessão so-leitura
    fetch(source_object, columns, scope=, since=) iterador de dicts, em streaming
    contar(source_object, scope=, since=)         int
    maximo(source_object, coluna)                 maior valor (None se vazio)
    colunas(source_object)                        nomes como estão no banco
    escopos(source_object, coluna)                valores distintos, não nulos
    renovar()                                     retrato novo na próxima leitura
    fechar()                                      solta tudo; a próxima chamada reconecta

Três garantias, e o porque de cada uma:
  * SÓ LEITURA na própria sessão (PostgreSQL, MySQL/MariaDB, Oracle, SQLite): o
    login do cliente pode ter mais direitos do que devia. SQL Server não tem como
    travar a sessão: la a garantia e o login (db_datareader).
  * ENGINE PROPRIO: sessão marcada READ ONLY continua assim ao voltar ao pool;
    nada de fora pode pegar uma conexão daqui (nem este adaptador uma de fora).
    A sessão é montada UMA vez por conexão e conferida a cada retirada; no
    MariaDB e no PostgreSQL (14+) conferir não custa ida ao servidor, e a
    leitura ociosa é um comando só (issue 31: `_ao_conectar`).
  * TRANSACAO CURTA: cada chamada pega uma conexão, lê e devolve (o pool faz
    rollback na devolução; no MariaDB e no PostgreSQL 14+, autocommit: cada
    comando é a sua transação). Nenhum retrato fica aberto entre ciclos -- ver
    `renovar()`.

O resto mora ao lado, em contextia_sync/origem/, um módulo por assunto (importe
de la): __init__ (ErroOrigem, ErroIdentificador), sessão (comandos de sessão e
timeout por dialeto), valores (coagir, conversor) e consultas (Objeto e o SQL
de cada leitura). As exceções ficam expostas aqui também porque fazem parte do
contrato do adaptador (docs/origem.md).
"""

from __future__ import annotations

import datetime
import itertools
import os
import weakref
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from operator import itemgetter
from typing import Literal, cast, overload

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection
from sqlalchemy.sql.compiler import Compiled

from contextia_sync.origem import (
    ErroConfiguracaoOrigem,
    ErroIdentificador,
    ErroOrigem,
    Relogio,
    filtro,
    validado,
)
from contextia_sync.escopos import texto_escopo
from contextia_sync.origem.marca_apagada import MarcaDeApagado
from contextia_sync.origem.consultas import (
    ColunaLida,
    ColunaReal,
    Consulta,
    Objeto,
    colunas_pelo_select_mysql,
    consulta_contar,
    consulta_escopos,
    consulta_fetch,
    consulta_maximo,
    consulta_relogio,
    consulta_sem_valor,
    valor_do_escopo,
)
from contextia_sync.origem.sessao import (
    COMANDO_INICIO_TRANSACAO,
    INICIO_LEITURA_POSTGRES,
    MARCAS_DE_TIMEOUT,
    comando_timeout_mysql,
    comandos_de_sessao,
    prefixo_mariadb,
    timeout_do_ambiente,
)
from contextia_sync.origem.url import (
    argumentos_do_engine,
    correcao_tls,
    descrever_url,
    falha_de_tls,
    familia_da_url,
    ler_url,
    mascarar,
    sem_tls,
    tls_da_url,
)
from contextia_sync.origem.valores import (
    DATA_SQLITE,
    Avisos,
    Conversor,
    conversor,
    familia_do_tipo,
    familia_json,
)
from contextia_sync.registro import logger
from contextia_sync.tipos import ConexaoDoDriver, CursorDoDriver, Linha, Resultado, ValorDoBanco

# Os nomes publicos: as funcoes do contrato (`--source=generic`), as excecoes que
# ele promete (docs/origem.md) e a Origem avulsa (testes, bench).
__all__ = [
    'ErroIdentificador',
    'ErroOrigem',
    'Origem',
    'agora',
    'colunas',
    'conectar',
    'conjunto',
    'contar',
    'contar_sem_valor',
    'escopos',
    'fechar',
    'fetch',
    'mascarar',
    'maximo',
    'renovar',
    'tipo_coluna',
]

# O que `fetch` devolve: um gerador (`close()` larga a leitura no meio, e a
# conexao volta ao pool na hora).
Linhas = Generator[Linha, None, None]

# Uma key repetida (`chaves_repetidas`): a menor e a maior empresa como a view as
# escreve, a key e quantas linhas a têm.
Repetida = tuple[ValorDoBanco, ValorDoBanco, ValorDoBanco, int]

# A familia JSON de cada coluna de uma leitura em curso (`familias`): o cliente
# escolhe o conversor de cada coluna uma vez, pelo tipo do resultado.
# (Chave `object`: `familias` pergunta por qualquer iterável, e só o `fetch` daqui está.)
_FAMILIAS: weakref.WeakKeyDictionary[object, dict[str, str]] = weakref.WeakKeyDictionary()

# Linhas por ida ao servidor no streaming. 2.000 linhas de uma view de 200
# colunas ainda cabem folgado na memoria; mais que isso so poupa idas.
LINHAS_POR_LOTE = 2000
POOL_TAMANHO = 2
POOL_EXTRA = 4

# ---------------------------------------------------------------------------
# Segredos fora de mensagens
# ---------------------------------------------------------------------------

# A URL lida e mostrada sem a senha, e o texto do driver sem ela: origem/url.py
# (`mascarar` fica exposto aqui tambem, como sempre esteve).


def _sem_fuso(valor: ValorDoBanco) -> datetime.datetime:
    """A hora do relógio da origem como datetime sem fuso (SQLite devolve texto)."""
    if isinstance(valor, str):
        valor = datetime.datetime.fromisoformat(valor.strip())
    if not isinstance(valor, datetime.datetime):
        raise ErroOrigem('a origem devolveu %r como hora atual; esperava data e hora' % (valor,))
    return (
        valor.replace(tzinfo=None)
        if valor.tzinfo is None
        else valor.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    )


def _erro_do_driver(erro: BaseException) -> str:
    """A mensagem do driver sem o SQL e os parâmetros que o SQLAlchemy anexa."""
    origem = getattr(erro, 'orig', None) or erro
    texto = str(origem).strip().splitlines()
    return '%s: %s' % (type(origem).__name__, texto[0] if texto else '')


# ---------------------------------------------------------------------------
# A origem
# ---------------------------------------------------------------------------


def _abandonar_mysql(conn: Connection, resultado: Resultado) -> None:
    """
    Leitura do MySQL/MariaDB largada no meio: derruba a conexão em vez de drenar.

    Fechar o cursor sem buffer do PyMySQL (e do mysqlclient) LE O RESTO da tabela só para
    descarta-lo -- minutos de I/O na produção do cliente por uma leitura que
    ninguém quer mais. Soltar o resultado pendente (atributo do PyMySQL) e
    invalidar a conexão fecha o socket na hora.
    """
    if conn.closed:
        return
    cursor = getattr(resultado, 'cursor', None)
    pendente = getattr(cursor, '_result', None)
    pymysql = pendente is not None and hasattr(pendente, 'unbuffered_active')
    if cursor is not None and pendente is not None and pymysql:
        pendente.unbuffered_active = False  # senao o __del__ dele drena
        cursor._result = None
    try:
        conn.invalidate()
    except Exception:  # noqa: BLE001
        pass
    if cursor is not None and pendente is not None and not pymysql:
        # mysqlclient: o `close` do cursor le o resto (result.discard). Solto so
        # DEPOIS da conexao fechada, o resultado nao tem mais o que ler.
        cursor._result = None


# ---------------------------------------------------------------------------
# A sessão reusada (issue 31): montada ao conectar, conferida sem ida ao servidor
# ---------------------------------------------------------------------------

# A marca, no `info` da conexão do pool, de que a sessão dela é reusada.
_REUSADA = 'contextia_sessao_reusada'

# Bits do estado que o MySQL/MariaDB manda em cada resposta (o `server_status`
# do PyMySQL): transação aberta e autocommit.
_EM_TRANSACAO = 0x0001
_AUTOCOMMIT = 0x0002


def _reusada(conn: Connection) -> bool:
    """
    A sessão desta conexão é montada ao conectar e reusada (autocommit, conferida
    sem ida ao servidor)? MariaDB e PostgreSQL que avisa a trava: `_ao_conectar`.
    """
    return bool(conn.connection.info.get(_REUSADA))


def _em_autocommit(dbapi_conn: ConexaoDoDriver) -> bool:
    """A conexão do driver está em autocommit? (PyMySQL/mysqlclient: método; psycopg: atributo.)"""
    modo = getattr(dbapi_conn, 'get_autocommit', None)
    if callable(modo):
        return bool(modo())
    return getattr(dbapi_conn, 'autocommit', False) is True


def _ligar_autocommit(dbapi_conn: ConexaoDoDriver) -> None:
    if callable(getattr(dbapi_conn, 'get_autocommit', None)):
        dbapi_conn.autocommit(True)
        _rollback_so_com_transacao(dbapi_conn)
    else:
        dbapi_conn.autocommit = True


def _em_transacao_mysql(dbapi_conn: ConexaoDoDriver) -> bool:
    """
    Há transação aberta nesta conexão do MySQL/MariaDB? Pelo estado que o servidor
    mandou na última resposta (PyMySQL); o mysqlclient não o expõe: fora do
    autocommit, sim -- em autocommit só um BEGIN explícito abriria uma, e o
    adaptador nunca manda BEGIN (função de view não pode: nem BEGIN nem autocommit).
    """
    estado = getattr(dbapi_conn, 'server_status', None)
    if isinstance(estado, int):
        return bool(estado & _EM_TRANSACAO) or not estado & _AUTOCOMMIT
    return not dbapi_conn.get_autocommit()


def _rollback_so_com_transacao(dbapi_conn: ConexaoDoDriver) -> None:
    """
    O rollback da devolução ao pool (e do fim de cada `Connection` do
    SQLAlchemy) só fala com o servidor se há transação aberta: em autocommit o
    ROLLBACK de cada leitura era um comando a mais por leitura, sem nada a desfazer.
    """
    original = dbapi_conn.rollback

    def rollback() -> None:
        if _em_transacao_mysql(dbapi_conn):
            original()

    dbapi_conn.rollback = rollback


def _parametro_postgres(dbapi_conn: ConexaoDoDriver, nome: str) -> str | None:
    """O valor que o servidor AVISOU (ParameterStatus), sem perguntar; None se não avisa."""
    ler = getattr(getattr(dbapi_conn, 'info', None), 'parameter_status', None)
    if not callable(ler):
        return None
    valor = ler(nome)
    return valor.decode() if isinstance(valor, bytes) else valor


def _postgres_em_ordem(dbapi_conn: ConexaoDoDriver) -> bool | None:
    """
    A sessão do PostgreSQL continua somente leitura e em UTC? O servidor (14 ou
    mais novo) avisa o cliente a cada mudança de `default_transaction_read_only` e
    de `TimeZone` -- inclusive a que uma função de view faz --, e o psycopg guarda
    o último aviso: conferir não custa ida ao servidor. None: este servidor (ou
    driver) não avisa, e a sessão não pode ser reusada assim.

    O `statement_timeout` o servidor não avisa: a função de view que o muda com
    `set_config(..., false)` o deixa mudado nesta conexão até ela ser reciclada
    (pool_recycle) -- no modo transacional de antes, o ROLLBACK o desfazia.
    """
    leitura = _parametro_postgres(dbapi_conn, 'default_transaction_read_only')
    if leitura is None:
        return None
    return leitura == 'on' and _parametro_postgres(dbapi_conn, 'TimeZone') == 'UTC'


def _conversoes_mysqldb() -> dict[object, object]:
    """
    As conversões do mysqlclient, com a data que ele não lê (a data zero do
    MySQL, '0000-00-00') devolvida como TEXTO, como o PyMySQL faz: o conversor
    da coluna (origem/valores.py) a troca por None com o aviso de sempre -- o
    mysqlclient a trocaria por None calado.
    """
    from MySQLdb.constants import FIELD_TYPE
    from MySQLdb.converters import conversions

    def texto_se_nao_leu(original: Conversor) -> Conversor:
        def ler(bruto: ValorDoBanco) -> ValorDoBanco:
            valor = original(bruto)
            if valor is None and bruto is not None:
                return bruto.decode('ascii', 'replace') if isinstance(bruto, bytes) else bruto
            return valor

        return ler

    conversoes = dict(conversions)
    for tipo in (FIELD_TYPE.DATE, FIELD_TYPE.DATETIME, FIELD_TYPE.TIMESTAMP):
        conversoes[tipo] = texto_se_nao_leu(conversions[tipo])
    return conversoes


def _lote_pronto(
    lote: Sequence[Sequence[ValorDoBanco]],
    conversores: list[tuple[int, Conversor]],
    conferir: tuple[int, ValorDoBanco, str] | None,
) -> tuple[Sequence[Sequence[ValorDoBanco]], int, ValorDoBanco]:
    """
    Um lote do cursor com os conversores de coluna aplicados e sem as linhas de
    outro escopo: (lote, descartadas, exemplo de valor descartado). O mesmo que
    a conferencia linha a linha de `Origem._linhas`, mas o lote inteiro e
    olhado primeiro: uma coluna cujos valores são todos de tipos que o
    conversor devolve como estão (`funcao.passa`) e um escopo cujos valores
    distintos são todos o pedido não descem a linha nenhuma.
    """
    precisam = []
    for posicao, funcao in conversores:
        passa: frozenset[type] | None = getattr(funcao, 'passa', None)
        if passa is None or not passa.issuperset(map(type, map(itemgetter(posicao), lote))):
            precisam.append((posicao, funcao))
    if precisam:
        convertido = []
        for linha in lote:
            valores = list(linha)
            for posicao, funcao in precisam:
                valores[posicao] = funcao(valores[posicao])
            convertido.append(valores)
        lote = convertido
    if conferir is None:
        return lote, 0, None
    posicao = conferir[0]
    try:
        distintos = set(map(itemgetter(posicao), lote))
    except TypeError:  # valor sem hash: linha a linha
        distintos = None
    if distintos is not None and all(_do_escopo(valor, conferir) for valor in distintos):
        return lote, 0, None
    ficam: list[Sequence[ValorDoBanco]] = []
    fora: list[Sequence[ValorDoBanco]] = []
    for linha in lote:
        (ficam if _do_escopo(linha[posicao], conferir) else fora).append(linha)
    return ficam, len(fora), fora[0][posicao] if fora else None


@dataclass
class _Contagem:
    """O que uma leitura do `fetch` contou: as linhas entregues, as de outra empresa."""

    lidas: int = 0
    descartadas: int = 0
    exemplo: ValorDoBanco = None
    completo: bool = False

    def descartar(self, valor: ValorDoBanco, quantas: int = 1) -> None:
        """`quantas` linhas de outra empresa; `valor` fica de exemplo se for o primeiro."""
        self.descartadas += quantas
        if self.exemplo is None:
            self.exemplo = valor


def _avisar_descartadas(
    source_object: str, conferir: tuple[int, ValorDoBanco, str] | None, conta: _Contagem
) -> None:
    if conta.descartadas:
        logger.warning(
            'leitura de %s com escopo %r: %d linha(s) que o banco devolveu têm outro'
            ' valor na coluna de escopo (ex.: %r) -- o banco as compara como iguais'
            ' (maiúsculas/minúsculas, acentos, espaços); não são desta empresa e'
            ' ficaram de fora',
            source_object,
            conferir[2] if conferir else '',
            conta.descartadas,
            conta.exemplo,
        )


def _convertido(funcao: Conversor | None, valor: ValorDoBanco) -> ValorDoBanco:
    """O valor pelo conversor da coluna (NULL fica NULL)."""
    return funcao(valor) if funcao is not None and valor is not None else valor


def _do_escopo(valor: ValorDoBanco, conferir: tuple[int, ValorDoBanco, str]) -> bool:
    """O valor da coluna de escopo é o do escopo pedido, como o SDK o escreve?"""
    # Igual ao valor pedido (o caso de toda linha) dispensa o texto.
    return bool(valor == conferir[1] or texto_escopo(valor) == conferir[2])


def _fechar_leitura(conn: Connection, resultado: Resultado) -> None:
    """
    Fecha o cursor ANTES da conexao: no SQLite um SELECT nao finalizado segura
    o lock de leitura mesmo depois do rollback, e o ERP nao consegue gravar.
    """
    for fechar in (resultado.close, conn.close):
        try:
            fechar()
        except Exception:  # noqa: BLE001
            pass


class Origem:
    """Uma origem (uma URL): engine próprio, sessão so-leitura, leituras curtas."""

    def __init__(
        self, url: str | sa.URL, timeout: int | None = None, linhas_por_lote: int = LINHAS_POR_LOTE
    ) -> None:
        self.url = ler_url(url)
        self._senha = self.url.password
        self.url_dada = str(url)
        # O TLS lido uma vez, o mesmo que `binlog` e `slot_logico` usam (origem/url.py).
        self.tls = tls_da_url(self.url)
        # `mariadb://` é o MySQL aqui: a mesma trava de sessão, o mesmo SQL.
        self.dialeto = familia_da_url(self.url)
        if self.dialeto == 'mysql' and 'charset' not in self.url.query:
            # utf8 de 3 bytes do MySQL corta emoji e alguns ideogramas.
            self.url = self.url.update_query_dict({'charset': 'utf8mb4'})
        self.timeout = timeout_do_ambiente() if timeout is None else int(timeout)
        self.linhas_por_lote = linhas_por_lote
        self.mariadb = False
        self._engine: Engine | None = None
        self._objetos: dict[str, Objeto] = {}
        # conexao -> resultado de fetch ainda aberto
        self._abertas: dict[Connection, Resultado] = {}
        self._avisos = Avisos()

    # -- texto seguro -------------------------------------------------------
    @property
    def descricao(self) -> str:
        """A URL com a senha trocada por ***: o único jeito de mostra-la."""
        return descrever_url(self.url)

    def _do_driver(self, erro: BaseException) -> str:
        """A mensagem do driver, sem a senha (só a palavra inteira: ver origem/url.py)."""
        return mascarar(_erro_do_driver(erro), self._senha)

    def _erro(self, o_que: str, erro: BaseException, correcao: str = '') -> ErroOrigem:
        if MARCAS_DE_TIMEOUT.search(str(getattr(erro, 'orig', erro))):
            correcao = (
                'passou de CONTEXTIA_ORIGEM_TIMEOUT=%ss e o banco cancelou.'
                ' Índice na coluna de mudanca/escopo resolve; se a consulta e'
                ' legitimamente lenta, aumente o limite' % self.timeout
            )
        elif falha_de_tls(erro):
            correcao = correcao_tls(self.tls)
        return ErroOrigem(
            '%s (%s): %s%s'
            % (
                o_que,
                self.descricao,
                self._do_driver(erro),
                (' -- ' + correcao) if correcao else '',
            )
        )

    # -- conexao ------------------------------------------------------------
    def conectar(self) -> Origem:
        """Cria o engine (uma vez) e prova que conecta; devolve self."""
        if self._engine is not None:
            return self
        opcoes: dict[str, object] = {'pool_pre_ping': True, 'pool_recycle': 3600}
        if self.dialeto != 'sqlite':
            opcoes.update(pool_size=POOL_TAMANHO, max_overflow=POOL_EXTRA)
        try:
            url = self.url
            argumentos: dict[str, object] = {}
            if url.get_driver_name() == 'mysqldb':
                argumentos['conv'] = _conversoes_mysqldb()
            # O TLS vai pelo connect_args, montado de `self.tls` como nas outras
            # conexões da origem, e não pela query (cada driver a lê de um jeito).
            tls = argumentos_do_engine(url, self.tls)
            if tls is not None:
                url = sem_tls(url)
                argumentos.update(tls)
            if argumentos:
                opcoes['connect_args'] = argumentos
            engine = sa.create_engine(url, **opcoes)
        except ErroConfiguracaoOrigem:
            raise
        except Exception as erro:  # noqa: BLE001
            # Prefixo que nenhum dialeto conhece ou driver que nao esta instalado:
            # a URL (ou a instalacao) e que esta errada, nao a origem fora do ar.
            raise ErroConfiguracaoOrigem(
                'não consegui montar o acesso a origem %s: %s: %s -- confira o'
                ' prefixo da URL e se o driver está instalado (requirements.txt).'
                % (self.descricao, type(erro).__name__, mascarar(erro, self._senha))
            ) from None
        event.listen(engine, 'connect', self._ao_conectar)
        if self.dialeto in ('mysql', 'postgresql'):
            event.listen(engine, 'checkout', self._ao_retirar)
            event.listen(engine, 'before_cursor_execute', self._antes_do_comando, retval=True)
        if self.dialeto in COMANDO_INICIO_TRANSACAO:
            event.listen(engine, 'begin', self._ao_iniciar)
        self._engine = engine
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql(self._sql_ping())
        except sa_exc.DBAPIError as erro:
            self._engine = None
            engine.dispose()
            raise self._erro(
                'não conectou a origem',
                erro,
                'confira host, porta, usuário e senha em'
                ' CONTEXTIA_ORIGEM e se o banco aceita conexão'
                ' desta máquina',
            ) from None
        logger.info(
            'origem ...........: %s (somente leitura: %s; timeout: %s)',
            self.descricao,
            'pelo LOGIN (SQL Server não trava sessão)'
            if self.dialeto == 'mssql'
            else 'sessão travada',
            '%ss' % self.timeout if self.timeout else 'nenhum',
        )
        if self.dialeto == 'mssql':
            logger.warning(
                'SQL Server: o adaptador não consegue travar a sessão em'
                ' leitura. Garanta que o login só tem db_datareader'
                ' (docs/origem.md).'
            )
        return self

    def _motor(self) -> Engine:
        """O engine, criado e provado na primeira vez."""
        self.conectar()
        assert self._engine is not None  # conectar() cria ou levanta
        return self._engine

    def _sql_ping(self) -> str:
        return 'SELECT 1 FROM DUAL' if self.dialeto == 'oracle' else 'SELECT 1'

    def _ao_conectar(self, dbapi_conn: ConexaoDoDriver, registro: ConnectionPoolEntry) -> None:
        """
        A sessão montada UMA vez por conexão do pool: só leitura, UTC, limite de tempo.

        MariaDB e PostgreSQL (14 ou mais novo) ficam em autocommit e a sessão é
        reusada entre leituras sem comando nenhum de montagem: cada leitura é um
        comando só (issue 31). O que garante que ela continua somente leitura:
        no MariaDB, o `SET STATEMENT` na frente de cada comando (`_antes_do_comando`);
        no PostgreSQL, o aviso do servidor conferido a cada retirada e antes de
        cada comando (`_postgres_em_ordem`). MySQL e PostgreSQL antigo: a sessão
        travada de novo a cada retirada (MySQL) ou desfeita pelo rollback
        da devolução (PostgreSQL), como sempre.
        """
        if self.dialeto == 'mysql':
            info = getattr(dbapi_conn, 'get_server_info', lambda: '')()
            self.mariadb = 'mariadb' in str(info).lower()
        self._travar_sessao(dbapi_conn)
        if self.dialeto == 'mysql':
            reusada = self.mariadb
        else:
            reusada = self.dialeto == 'postgresql' and _postgres_em_ordem(dbapi_conn) is True
        # Por conexão (o `info` do pool vale enquanto a conexão do driver vive).
        registro.info[_REUSADA] = reusada
        if reusada:
            _ligar_autocommit(dbapi_conn)

    def _ao_retirar(
        self,
        dbapi_conn: ConexaoDoDriver,
        registro: ConnectionPoolEntry,
        _proxy: PoolProxiedConnection,
    ) -> None:
        """
        A trava conferida a CADA retirada do pool; se nem travar der, a conexão
        não é entregue: o pool a descarta e abre outra (DisconnectionError).

        Uma função chamada por uma view pode rodar `SET SESSION TRANSACTION READ
        WRITE` (ou zerar o limite de tempo, ou trocar o fuso), e a sessão fica
        assim pela vida inteira da conexão no pool. MySQL: travada de novo
        sempre (o servidor não diz se mudou). Sessão reusada: só a que o
        servidor diz ter mudado (PostgreSQL) ou que saiu do autocommit (MariaDB;
        o resto no MariaDB é do `SET STATEMENT` de cada comando). PostgreSQL que
        não avisa: o rollback da devolução já desfez o SET feito dentro da leitura.
        """
        reusada = bool(registro.info.get(_REUSADA))
        if self.dialeto == 'postgresql' and not reusada:
            return
        try:
            self._guardar(dbapi_conn, reusada)
        except Exception as erro:  # noqa: BLE001
            raise sa_exc.DisconnectionError(
                'a sessão da origem não voltou a somente leitura (%s)' % _erro_do_driver(erro)
            ) from None

    def _guardar(self, dbapi_conn: ConexaoDoDriver, reusada: bool) -> None:
        """A sessão desta conexão somente leitura, sem ida ao servidor se ela está em ordem."""
        if not reusada:
            self._travar_sessao(dbapi_conn)
        elif self.dialeto == 'postgresql':
            if _postgres_em_ordem(dbapi_conn) is not True:
                logger.warning(
                    'origem: a sessão deixou de ser somente leitura em UTC (função de'
                    ' uma view?); travada de novo antes da leitura'
                )
                self._travar_sessao(dbapi_conn)
                if _postgres_em_ordem(dbapi_conn) is not True:
                    raise ErroOrigem('o PostgreSQL não confirmou a sessão somente leitura')
        elif not _em_autocommit(dbapi_conn):
            self._travar_sessao(dbapi_conn)
            _ligar_autocommit(dbapi_conn)

    def _antes_do_comando(
        self,
        conn: Connection,
        _cursor: CursorDoDriver,
        comando: str,
        parametros: object,
        _contexto: object,
        _varios: bool,
    ) -> tuple[str, object]:
        """
        Cada comando da sessão reusada, antes de ir ao servidor. MariaDB: com o
        `SET STATEMENT` na frente (`sessao.prefixo_mariadb`), que o faz somente
        leitura, em UTC e com limite de tempo, e devolve a sessão ao que era no
        fim dele. PostgreSQL: a trava conferida pelo aviso do servidor (uma
        função da leitura anterior, na mesma retirada, pode ter destravado).
        """
        if not _reusada(conn):
            return comando, parametros
        if self.dialeto == 'postgresql':
            dbapi_conn = conn.connection.dbapi_connection
            if dbapi_conn is not None and _postgres_em_ordem(dbapi_conn) is not True:
                self._guardar(dbapi_conn, True)
            return comando, parametros
        if comando.lstrip()[:4].upper() == 'SET ':
            return comando, parametros  # os da própria sessão (não há outros)
        sem_limite = bool(conn.get_execution_options().get('contextia_sem_limite'))
        return prefixo_mariadb(self.timeout, sem_limite) + comando, parametros

    def _travar_sessao(self, dbapi_conn: ConexaoDoDriver) -> None:
        """Os comandos de `sessao.comandos_de_sessao`: só leitura, UTC, limite de tempo."""
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
            dbapi_conn.call_timeout = self.timeout * 1000  # ms por ida ao servidor
        if self.dialeto == 'mssql' and self.timeout:
            dbapi_conn.timeout = self.timeout
        if self.dialeto in ('postgresql', 'mysql') and not _em_autocommit(dbapi_conn):
            dbapi_conn.commit()

    def _ao_iniciar(self, conn: Connection) -> None:
        dbapi_conn = conn.connection.dbapi_connection
        assert dbapi_conn is not None  # transacao comecando: conexao viva
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute(COMANDO_INICIO_TRANSACAO[self.dialeto])
        finally:
            cursor.close()

    def _abrir(self) -> Connection:
        """Uma conexão do pool; a origem fora do ar vira ErroOrigem com a correção."""
        engine = self._motor()
        try:
            return engine.connect()
        except sa_exc.DBAPIError as erro:
            raise self._erro(
                'não conectou a origem', erro, 'a origem está no ar? o próximo ciclo tenta de novo'
            ) from None

    @contextmanager
    def _conexao(self) -> Iterator[Connection]:
        """Uma conexão do pool, numa transação que acaba (rollback) ao sair."""
        conn = self._abrir()
        try:
            yield conn
        except sa_exc.DBAPIError as erro:
            raise self._erro('consulta na origem falhou', erro) from None
        finally:
            conn.close()

    @contextmanager
    def sessao(self) -> Iterator[Connection]:
        """
        Uma conexão da sessão somente leitura (com o tempo máximo por consulta),
        numa transação que acaba ao sair: para quem lê o catálogo inteiro pelo
        inspector do SQLAlchemy (o `descobrir`). A trava e a mesma de toda leitura.
        """
        with self._conexao() as conn:
            yield conn

    # -- objeto ---------------------------------------------------------------
    def _objeto(self, conn: Connection, source_object: str) -> Objeto:
        if source_object in self._objetos:
            return self._objetos[source_object]
        schema, nome = validado(filtro.validar_objeto, source_object)
        inspetor = sa.inspect(conn)
        opcoes = {'oracle_resolve_synonyms': True} if self.dialeto == 'oracle' else {}
        candidatos: list[tuple[str | None, str]] = []
        for transformar in (str, str.lower, str.upper):
            par = (schema and transformar(schema), transformar(nome))
            if par not in candidatos:
                candidatos.append(par)
        ultimo_erro = ''
        reflexo: Sequence[ColunaLida]
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
                ultimo_erro = ' Último erro: %s.' % self._do_driver(erro)
                try:
                    reflexo = colunas_pelo_select_mysql(conn, cand_schema, cand_nome)
                except sa_exc.DBAPIError as erro_select:
                    ultimo_erro = ' Último erro: %s.' % self._do_driver(erro_select)
                    continue
            if reflexo:
                break
        else:
            raise ErroOrigem(
                'source_object %s não encontrado na origem %s (nem em maiúsculas/'
                'minúsculas), ou este login não tem SELECT nele. Confira o nome no'
                ' mapeamento e o GRANT (docs/origem.md).%s'
                % (source_object, self.descricao, ultimo_erro)
            )
        colunas: list[ColunaReal] = []
        tipos_sqlite: dict[str, str] = {}
        for info in reflexo:
            tipo = info['type']
            if self.dialeto == 'sqlite':
                declarado = DATA_SQLITE.match(str(tipo))
                if declarado:
                    # TEXT no disco: lido como texto e convertido aqui, sem o
                    # parser estrito do SQLAlchemy derrubar a leitura inteira
                    # por uma linha torta.
                    tipos_sqlite[info['name']] = (
                        'date' if declarado.group(1).upper() == 'DATE' else 'datetime'
                    )
                    tipo = sa.String()
            colunas.append(sa.column(info['name'], tipo))
        objeto = Objeto(
            sa.table(cand_nome, *colunas, schema=cand_schema), source_object, tipos_sqlite
        )
        self._objetos[source_object] = objeto
        return objeto

    def _conversores(
        self, objeto: Objeto, nomes: list[str], reais: list[ColunaReal]
    ) -> list[tuple[int, Conversor]]:
        lista = []
        for posicao, (nome, coluna) in enumerate(zip(nomes, reais, strict=True)):
            funcao = conversor(
                coluna.type,
                self.dialeto,
                '%s.%s' % (objeto.source_object, nome),
                self._avisos,
                objeto.tipos_sqlite.get(coluna.name),
            )
            if funcao is not None:
                lista.append((posicao, funcao))
        return lista

    # -- leituras -------------------------------------------------------------
    def fetch(
        self,
        source_object: str,
        columns: Sequence[str],
        scope: Sequence[ValorDoBanco] | None = None,
        since: Sequence[ValorDoBanco] | None = None,
        chaves: Sequence[ValorDoBanco] | None = None,
        sem_apagadas: MarcaDeApagado | None = None,
    ) -> Linhas:
        """
        As linhas como dicts (chaves = nomes de `columns`), em streaming.

        A consulta roda AQUI (erro de conexão, coluna inexistente e nome hostil
        saem já na chamada); as linhas vem a medida que o laço pede, em lotes
        de `linhas_por_lote`: a memória não cresce com o tamanho da view.
        `chaves=(coluna, [valores])` lê só essas linhas (`coluna IN (...)`);
        `sem_apagadas`, só as que a marca de apagado não tira.
        """
        nomes = validado(filtro.validar_colunas, columns)
        plano = validado(filtro.plano, scope, since, chaves)
        conn = self._abrir()
        conferir: tuple[int, ValorDoBanco, str] | None = None
        try:
            objeto = self._objeto(conn, source_object)
            # A coluna de escopo vai junto (se o mapeamento nao a le) para cada linha
            # ser conferida aqui: ver _linhas.
            lidas = nomes + [scope[0]] if scope is not None else nomes
            sql, lidas, posicoes, reais = consulta_fetch(
                objeto, lidas, scope, since, self.dialeto, chaves, sem_apagadas
            )
            if scope is not None:
                alvo = valor_do_escopo(objeto, scope)[1]
                conferir = (posicoes[-1], alvo, texto_escopo(alvo))
                lidas, posicoes = lidas[:-1], posicoes[:-1]
            nomes = lidas
            if self.dialeto == 'mysql' and self.timeout:
                # No MySQL/MariaDB o limite conta o streaming inteiro, inclusive
                # o tempo que NOS levamos para enviar ao Contextia: uma carga
                # completa legitima seria morta no meio. O limite fica para as
                # sondas (contar/maximo); a leitura ja foi dimensionada por elas.
                # (Sessão reusada: só neste comando, pelo SET STATEMENT.)
                if _reusada(conn):
                    conn.execution_options(contextia_sem_limite=True)
                else:
                    conn.exec_driver_sql(comando_timeout_mysql(0, self.mariadb))
            resultado = self._ler(conn, sql, curta=since is not None or chaves is not None)
        except sa_exc.DBAPIError as erro:
            self._devolver(conn)
            raise self._erro('leitura de %s falhou' % source_object, erro) from None
        except BaseException:
            self._devolver(conn)
            raise
        self._abertas[conn] = resultado
        rotulos = [c.name for c in reais]
        for nome, posicao in zip(nomes, posicoes, strict=True):
            rotulos[posicao] = nome
        conversores = self._conversores(objeto, rotulos, reais)
        logger.debug('fetch %s: %s', source_object, filtro.descrever(plano)[0] or '(tudo)')
        linhas = self._linhas(
            conn, resultado, source_object, nomes, posicoes, conversores, conferir
        )
        if self.dialeto != 'sqlite':
            # (No SQLite o tipo e do valor: o cliente decide pela forma de cada registro.)
            _FAMILIAS[linhas] = {
                nome: familia_json(reais[p].type, self.dialeto)
                for nome, p in zip(nomes, posicoes, strict=True)
            }
        return linhas

    # Um dict por linha (o `fetch`), ou a tupla dos valores (`tuplas`: o conjunto).
    @overload
    def _linhas(
        self,
        conn: Connection,
        resultado: Resultado,
        source_object: str,
        nomes: list[str],
        posicoes: list[int],
        conversores: list[tuple[int, Conversor]],
        conferir: tuple[int, ValorDoBanco, str] | None = None,
        tuplas: Literal[False] = False,
    ) -> Linhas: ...

    @overload
    def _linhas(
        self,
        conn: Connection,
        resultado: Resultado,
        source_object: str,
        nomes: list[str],
        posicoes: list[int],
        conversores: list[tuple[int, Conversor]],
        conferir: tuple[int, ValorDoBanco, str] | None = None,
        *,
        tuplas: Literal[True],
    ) -> Generator[Sequence[ValorDoBanco], None, None]: ...

    def _linhas(
        self,
        conn: Connection,
        resultado: Resultado,
        source_object: str,
        nomes: list[str],
        posicoes: list[int],
        conversores: list[tuple[int, Conversor]],
        conferir: tuple[int, ValorDoBanco, str] | None = None,
        tuplas: bool = False,
    ) -> Linhas | Generator[Sequence[ValorDoBanco], None, None]:
        """
        As linhas do `fetch`, e a última palavra sobre o escopo.

        `conferir=(posição, valor, escopo)`: a linha cujo valor de escopo não é,
        como o SDK o escreve (`texto_escopo`), o escopo pedido e descartada, com um
        aviso ao fim. O valor já vai exato ao banco; o que sobra e a comparação
        do próprio banco -- a collation `_ci` do MySQL/MariaDB e a do SQL Server
        acham 'abc' igual a 'ABC', outra empresa para o arquivo de chaves.

        Dois caminhos, e o laço de cada linha fica AQUI nos dois (o caminho quente
        da carga: nenhuma chamada nem gerador a mais por linha): o cursor cru, um
        lote por vez (`_lotes_crus`), e o de uma linha por vez.
        """
        conta = _Contagem()
        direto = posicoes == list(range(len(posicoes)))
        chaves = tuple(nomes)
        # O cursor do driver direto (sem o Row do SQLAlchemy) quando o SQLAlchemy
        # nao converte nenhum valor deste resultado; o `tuplas` segue o de sempre.
        # (PostgreSQL e MySQL/MariaDB: os que leem por cursor de servidor, e os medidos.)
        cru = (
            direto
            and not tuplas
            and self.dialeto in ('postgresql', 'mysql')
            and self._sem_processador(resultado)
        )
        try:
            if cru:
                # Um dict por linha feito em C, sem laco Python por linha.
                for lote in self._lotes_crus(conn, resultado, conversores, conferir, conta):
                    yield from map(dict, map(zip, itertools.repeat(chaves), lote))
            else:
                for linha in resultado:
                    valores: Sequence[ValorDoBanco] = linha
                    if conversores:
                        valores = list(linha)
                        for posicao, funcao in conversores:
                            valores[posicao] = funcao(valores[posicao])
                    if conferir is not None and not _do_escopo(valores[conferir[0]], conferir):
                        conta.descartar(valores[conferir[0]])
                        continue
                    # Do tamanho de `chaves` por construcao (consulta_fetch): sem
                    # conferir de novo a cada linha. `tuplas`: os valores na ordem do
                    # SELECT, sem dict (o conjunto de chaves: milhoes de linhas).
                    if tuplas:
                        yield valores
                    elif direto:
                        yield dict(zip(chaves, valores, strict=False))
                    else:
                        yield {nome: valores[p] for nome, p in zip(chaves, posicoes, strict=False)}
                    conta.lidas += 1
            conta.completo = True
            _avisar_descartadas(source_object, conferir, conta)
        except Exception as erro:
            substituto = self._interrompida(erro, conn, cru, source_object, conta.lidas)
            if substituto is None:
                raise
            raise substituto from None
        finally:
            self._soltar(conn, resultado, conta.completo)

    def _lotes_crus(
        self,
        conn: Connection,
        resultado: Resultado,
        conversores: list[tuple[int, Conversor]],
        conferir: tuple[int, ValorDoBanco, str] | None,
        conta: _Contagem,
    ) -> Generator[Sequence[Sequence[ValorDoBanco]], None, None]:
        """
        Os lotes do cursor do driver, prontos: o conversor de coluna e a conferência
        do escopo olham o lote inteiro e só descem à linha quando algum valor
        precisa (`_lote_pronto`). O primeiro lote vem pelo resultado: ele já
        guardou a primeira linha ao abrir o cursor. `conta.lidas` soma o lote
        depois que quem lê pede o seguinte (as linhas dele já foram entregues).
        """
        lote: Sequence[Sequence[ValorDoBanco]] = resultado.fetchmany(self.linhas_por_lote)
        while lote:
            if conversores or conferir is not None:
                lote, fora, primeiro = _lote_pronto(lote, conversores, conferir)
                if fora:
                    conta.descartar(primeiro, fora)
            yield lote
            conta.lidas += len(lote)
            if conn not in self._abertas:
                # renovar()/fechar() no meio do lote: o except de _linhas diz isso.
                raise ErroOrigem('leitura fechada')
            # Ate o driver dizer que acabou (lote vazio), como o laco de sempre: um
            # lote incompleto ainda não prova o fim da leitura (a conexão que cai
            # depois dele e uma leitura que caiu). (Sem cursor: o SQLAlchemy já viu
            # o fim no primeiro lote e o soltou.)
            cursor = resultado.cursor
            lote = cursor.fetchmany(self.linhas_por_lote) if cursor is not None else []

    def _ler(self, conn: Connection, sql: Consulta, curta: bool = False) -> Resultado:
        """
        O resultado de uma leitura em streaming (lotes de `linhas_por_lote`).

        PostgreSQL com a sessão reusada (autocommit): o cursor do servidor só
        existe numa transação, e ela custa BEGIN, DECLARE, FETCH, CLOSE e
        ROLLBACK. A leitura `curta` (a janela da marca, a releitura por key: quase
        sempre poucas linhas) tenta antes UM comando com LIMIT de um lote e
        mais uma linha, todo no cliente; se vier cheio, e lida em streaming.
        """
        dbapi_conn = conn.connection.dbapi_connection
        if self.dialeto == 'postgresql' and _reusada(conn) and _em_autocommit(dbapi_conn):
            if curta:
                resultado = conn.execute(sql.limit(self.linhas_por_lote + 1))
                if 0 <= resultado.rowcount <= self.linhas_por_lote:
                    return resultado
                resultado.close()
            conn.exec_driver_sql(INICIO_LEITURA_POSTGRES)
        return conn.execution_options(stream_results=True, yield_per=self.linhas_por_lote).execute(
            sql
        )

    def _interrompida(
        self, erro: Exception, conn: Connection, cru: bool, source_object: str, lidas: int
    ) -> ErroOrigem | None:
        """
        O erro que a leitura interrompida levanta no lugar de `erro`; None: o
        próprio `erro` sobe (não é da origem nem de um fechamento no meio).
        """
        # O erro do cursor cru o SQLAlchemy nao viu: a conexao pode ter caido, e
        # nao volta ao pool.
        do_cru = (
            cru
            and conn in self._abertas
            and isinstance(erro, self._motor().dialect.loaded_dbapi.Error)
        )
        if do_cru:
            try:
                conn.invalidate()
            except Exception:  # noqa: BLE001
                pass
        if do_cru or isinstance(erro, sa_exc.DBAPIError):
            return self._erro(
                'leitura de %s interrompida depois de %d linha(s)' % (source_object, lidas),
                erro,
                'nada desta leitura deve ser dado como completo; a próxima chamada reconecta',
            )
        if conn in self._abertas:
            return None
        return ErroOrigem(
            'leitura de %s interrompida depois de %d linha(s): fechada por'
            ' renovar()/fechar() antes do fim -- leia até o fim antes de'
            ' renovar, ou chame fetch de novo' % (source_object, lidas)
        )

    def _soltar(self, conn: Connection, resultado: Resultado, completo: bool) -> None:
        """A conexão de volta ao pool, lida até o fim ou não (o MySQL abandonado no meio)."""
        self._abertas.pop(conn, None)
        if not completo and self.dialeto == 'mysql':
            _abandonar_mysql(conn, resultado)
        try:
            resultado.close()
        except Exception:  # noqa: BLE001
            pass
        self._devolver(conn)

    def _sem_processador(self, resultado: Resultado) -> bool:
        """
        O SQLAlchemy não mexe em nenhum valor deste resultado? (Nenhum tipo das
        colunas tem conversão de resultado para este driver -- o SET do MySQL tem,
        e vira `set` --: as linhas do cursor do driver são as mesmas.) Na dúvida, não.
        """
        try:
            descricao = resultado.cursor.description
            # O de um `fetch`/`conjunto`: compilado de um SELECT (sem ele, AttributeError).
            compilado = cast(Compiled, resultado.context.compiled)
            tipos = [c.type for c in cast(Consulta, compilado.statement).selected_columns]
        except AttributeError:
            return False
        if descricao is None or len(descricao) != len(tipos):
            return False
        dialeto = self._motor().dialect
        return all(
            tipo.dialect_impl(dialeto).result_processor(dialeto, campo[1]) is None
            for tipo, campo in zip(tipos, descricao, strict=True)
        )

    def _devolver(self, conn: Connection) -> None:
        """
        Devolve a conexão do fetch ao pool com o limite de tempo de volta.

        O fetch do MySQL/MariaDB tira o limite da SESSAO; sem restaurar, a
        próxima sonda nessa conexão do pool rodaria sem limite nenhum. Se nem
        restaurar der, a conexão e descartada.
        """
        viva = not conn.closed and not conn.invalidated
        if self.dialeto == 'mysql' and self.timeout and viva and not _reusada(conn):
            try:
                conn.exec_driver_sql(comando_timeout_mysql(self.timeout, self.mariadb))
            except Exception:  # noqa: BLE001
                try:
                    conn.invalidate()
                except Exception:  # noqa: BLE001
                    pass
        try:
            conn.close()
        except Exception:  # noqa: BLE001
            pass

    def contar(
        self,
        source_object: str,
        scope: Sequence[ValorDoBanco] | None = None,
        since: Sequence[ValorDoBanco] | None = None,
        sem_apagadas: MarcaDeApagado | None = None,
        so_apagadas: MarcaDeApagado | None = None,
    ) -> int:
        """Quantas linhas casam com o filtro (a sonda barata do ouvinte), e com a marca."""
        with self._conexao() as conn:
            objeto = self._objeto(conn, source_object)
            sql = consulta_contar(objeto, scope, since, self.dialeto, sem_apagadas, so_apagadas)
            return int(conn.execute(sql).scalar_one())

    def maximo(self, source_object: str, coluna: str) -> ValorDoBanco:
        """O maior valor da coluna (ponto de partida da marca de água); None se vazia."""
        with self._conexao() as conn:
            objeto = self._objeto(conn, source_object)
            sql, real = consulta_maximo(objeto, coluna)
            valor = conn.execute(sql).scalar()
        funcao = conversor(
            real.type,
            self.dialeto,
            '%s.%s' % (source_object, coluna),
            self._avisos,
            objeto.tipos_sqlite.get(real.name),
        )
        return funcao(valor) if funcao and valor is not None else valor

    def agora(self) -> Relogio:
        """A hora da ORIGEM (nunca a desta máquina): UTC e local do servidor."""
        with self._conexao() as conn:
            utc, local = conn.execute(consulta_relogio(self.dialeto)).one()
        return Relogio(_sem_fuso(utc), _sem_fuso(local if local is not None else utc))

    def tipo_coluna(self, source_object: str, coluna: str) -> str:
        """A família do tipo da coluna no catálogo (datetime, date, numérico, texto...)."""
        with self._conexao() as conn:
            objeto = self._objeto(conn, source_object)
        real = objeto.coluna(coluna, 'watch_column')
        return familia_do_tipo(real.type, objeto.tipos_sqlite.get(real.name))

    def contar_sem_valor(self, source_object: str, coluna: str) -> int:
        """Quantas linhas tem `coluna` nula: a sonda nunca as vê, só a varredura as leva."""
        with self._conexao() as conn:
            objeto = self._objeto(conn, source_object)
            return int(conn.execute(consulta_sem_valor(objeto, coluna)).scalar_one())

    def colunas(self, source_object: str) -> list[str]:
        """Os nomes das colunas como o banco os guarda (Oracle em maiúsculas)."""
        with self._conexao() as conn:
            objeto = self._objeto(conn, source_object)
        dialeto = self._motor().dialect
        return [
            dialeto.denormalize_name(c.name) if self.dialeto == 'oracle' else c.name
            for c in objeto.tabela.c
        ]

    def escopos(self, source_object: str, coluna: str) -> list[ValorDoBanco]:
        """Os valores distintos, não nulos, de `coluna` (as empresas que existem ali)."""
        with self._conexao() as conn:
            objeto = self._objeto(conn, source_object)
            sql, real = consulta_escopos(objeto, coluna)
            valores = conn.execute(sql).scalars().all()
        funcao = conversor(
            real.type,
            self.dialeto,
            '%s.%s' % (source_object, coluna),
            self._avisos,
            objeto.tipos_sqlite.get(real.name),
        )
        return [funcao(v) for v in valores] if funcao else list(valores)

    def ler_conjunto(
        self,
        source_object: str,
        chave: str,
        escopo: str | None = None,
        so_escopo: ValorDoBanco = None,
        sem_apagadas: MarcaDeApagado | None = None,
    ) -> Generator[Sequence[ValorDoBanco], None, None]:
        """
        As linhas (escopo, chave) do conjunto -- só (chave,) sem `escopo` --, em
        streaming e em ordem (o SQL em origem/conjunto.py: `consulta_conjunto`).

        Os valores passam pelos mesmos conversores do `fetch` (a chave removida tem
        de ser a mesma que o registro levou). A consulta roda aqui; o erro no meio
        do streaming (conexão derrubada, tempo esgotado) sai como ErroOrigem -- e a
        leitura parcial nunca é dada por completa.
        """
        from contextia_sync.origem.conjunto import consulta_conjunto

        conn = self._abrir()
        try:
            objeto = self._objeto(conn, source_object)
            sql, reais = consulta_conjunto(
                objeto, chave, escopo, self.dialeto, so_escopo, sem_apagadas
            )
            resultado = self._ler(conn, sql)
        except sa_exc.DBAPIError as erro:
            self._devolver(conn)
            raise self._erro('leitura das chaves de %s falhou' % source_object, erro) from None
        except BaseException:
            self._devolver(conn)
            raise
        self._abertas[conn] = resultado
        nomes = ([escopo] if escopo is not None else []) + [chave]
        conversores = self._conversores(objeto, nomes, reais)
        logger.debug('conjunto %s: %s', source_object, sql)
        return self._linhas(
            conn, resultado, source_object, nomes, list(range(len(nomes))), conversores, tuplas=True
        )

    def chaves_repetidas(
        self,
        source_object: str,
        chave: str,
        escopo: str | None = None,
        so_escopo: ValorDoBanco = None,
        sem_apagadas: MarcaDeApagado | None = None,
        limite: int = 1001,
    ) -> list[Repetida]:
        """
        Os pares (empresa, key) que se repetem na view, no máximo `limite`, como
        (a menor e a maior empresa como a view as escreve, key, linhas) -- (None,
        None, key, linhas) sem `escopo` (origem/chaves_repetidas.py). Os valores
        pelos conversores do `fetch`: casam com as linhas lidas.
        """
        from contextia_sync.origem.chaves_repetidas import consulta_repetidas

        with self._conexao() as conn:
            objeto = self._objeto(conn, source_object)
            sql, reais = consulta_repetidas(
                objeto, chave, escopo, self.dialeto, so_escopo, sem_apagadas, limite
            )
            try:
                linhas = conn.execute(sql).all()
            except sa_exc.DBAPIError as erro:
                raise self._erro(
                    'a consulta das keys repetidas de %s falhou' % source_object, erro
                ) from None
        nomes = ([escopo] if escopo is not None else []) + [chave]
        conversores = dict(self._conversores(objeto, nomes, reais))
        do_escopo = conversores.get(0) if escopo is not None else None
        da_chave = conversores.get(len(reais) - 1)
        pares: list[Repetida] = []
        for linha in linhas:
            menor, maior = (linha[0], linha[1]) if escopo is not None else (None, None)
            valor, quantas = linha[-2], int(linha[-1])
            pares.append(
                (
                    _convertido(do_escopo, menor),
                    _convertido(do_escopo, maior),
                    _convertido(da_chave, valor),
                    quantas,
                )
            )
        return pares

    def renovar(self) -> None:
        """
        Garante que a próxima leitura vê o banco de AGORA.

        Oracle READ ONLY e MySQL REPEATABLE READ congelam o retrato no início da
        transação: uma sessão aberta desde a subida do ouvinte veria para sempre
        o banco daquele instante. Aqui cada chamada já roda numa transação que
        acaba ao fim dela (ou em autocommit, um comando por transação); o que
        sobra para renovar e a leitura que alguém deixou pela metade -- essa e fechada.
        """
        for conn, resultado in list(self._abertas.items()):
            logger.warning('origem: leitura deixada pela metade fechada ao renovar')
            self._abertas.pop(conn, None)
            if self.dialeto == 'mysql':
                _abandonar_mysql(conn, resultado)
            _fechar_leitura(conn, resultado)

    def fechar(self) -> None:
        """Solta conexões e engine. Chamar de novo qualquer leitura reconecta."""
        self.renovar()
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None
        self._objetos.clear()


# ---------------------------------------------------------------------------
# Funcoes de modulo: o que `--source=generic` expoe
# ---------------------------------------------------------------------------

_padrao: Origem | None = None


def conectar(url: str | None = None, timeout: int | None = None) -> Origem:
    """
    A origem de CONTEXTIA_ORIGEM (ou de `url`), conectada. Chamada de novo,
    devolve a mesma; as outras funções chamam esta sozinhas.
    """
    global _padrao
    if url is None:
        url = os.environ.get('CONTEXTIA_ORIGEM', '').strip()
        if not url:
            raise ErroConfiguracaoOrigem(
                'Falta CONTEXTIA_ORIGEM: a URL SQLAlchemy do banco do ERP, com login'
                ' SOMENTE LEITURA. Ex.: oracle+oracledb://leitor:SENHA@erp:1521/'
                '?service_name=ERP -- formatos por banco em docs/origem.md.'
            )
    if (
        _padrao is not None
        and _padrao.url_dada == str(url)
        and (timeout is None or _padrao.timeout == int(timeout))
    ):
        return _padrao.conectar()
    if _padrao is not None:
        _padrao.fechar()
    _padrao = None
    origem = Origem(url, timeout)
    origem.conectar()
    _padrao = origem
    return origem


def _origem() -> Origem:
    return _padrao.conectar() if _padrao is not None else conectar()


def fetch(
    source_object: str,
    columns: Sequence[str],
    scope: Sequence[ValorDoBanco] | None = None,
    since: Sequence[ValorDoBanco] | None = None,
    chaves: Sequence[ValorDoBanco] | None = None,
    sem_apagadas: MarcaDeApagado | None = None,
) -> Linhas:
    """As linhas como dicts, em streaming (ver `Origem.fetch`)."""
    return _origem().fetch(
        source_object, columns, scope=scope, since=since, chaves=chaves, sem_apagadas=sem_apagadas
    )


def familias(linhas: object) -> dict[str, str] | None:
    """
    {coluna: família JSON} das linhas de um `fetch` (origem/valores.py:
    familia_json), para `enviar_dataset(..., familias=)`; None se `linhas` não
    veio de um `fetch` deste adaptador.
    """
    try:
        return _FAMILIAS.get(linhas)
    except TypeError:  # nao aceita weakref: nao e um fetch daqui
        return None


def conjunto(
    source_object: str,
    chave: str,
    escopo: str | None = None,
    so_escopo: ValorDoBanco = None,
    sem_apagadas: MarcaDeApagado | None = None,
) -> Generator[Sequence[ValorDoBanco], None, None]:
    """As linhas (escopo, chave) em ordem, em streaming (a reconciliacao; origem/conjunto.py)."""
    return _origem().ler_conjunto(source_object, chave, escopo, so_escopo, sem_apagadas)


def chaves_repetidas(
    source_object: str,
    chave: str,
    escopo: str | None = None,
    so_escopo: ValorDoBanco = None,
    sem_apagadas: MarcaDeApagado | None = None,
    limite: int = 1001,
) -> list[Repetida]:
    """Os pares (empresa, key) repetidos na view (a carga os pergunta antes de ler)."""
    return _origem().chaves_repetidas(source_object, chave, escopo, so_escopo, sem_apagadas, limite)


def agora() -> Relogio:
    """A hora da origem (UTC e local do servidor)."""
    return _origem().agora()


def tipo_coluna(source_object: str, coluna: str) -> str:
    """A família do tipo de `coluna` no catálogo."""
    return _origem().tipo_coluna(source_object, coluna)


def contar_sem_valor(source_object: str, coluna: str) -> int:
    """Quantas linhas tem `coluna` nula."""
    return _origem().contar_sem_valor(source_object, coluna)


def contar(
    source_object: str,
    scope: Sequence[ValorDoBanco] | None = None,
    since: Sequence[ValorDoBanco] | None = None,
    sem_apagadas: MarcaDeApagado | None = None,
    so_apagadas: MarcaDeApagado | None = None,
) -> int:
    """Quantas linhas casam com o filtro (e com a marca de apagado, se dada)."""
    return _origem().contar(
        source_object, scope=scope, since=since, sem_apagadas=sem_apagadas, so_apagadas=so_apagadas
    )


def maximo(source_object: str, coluna: str) -> ValorDoBanco:
    """O maior valor da coluna; None se vazia."""
    return _origem().maximo(source_object, coluna)


def colunas(source_object: str) -> list[str]:
    """Os nomes das colunas como o banco os guarda."""
    return _origem().colunas(source_object)


def escopos(source_object: str, coluna: str) -> list[ValorDoBanco]:
    """Os valores distintos, não nulos, de `coluna`."""
    return _origem().escopos(source_object, coluna)


def renovar() -> None:
    """Fecha leitura deixada pela metade: a próxima vê o banco de agora."""
    if _padrao is not None:
        _padrao.renovar()


def fechar() -> None:
    """Solta a origem; a próxima chamada lê CONTEXTIA_ORIGEM de novo e reconecta."""
    global _padrao
    if _padrao is not None:
        _padrao.fechar()
    _padrao = None
