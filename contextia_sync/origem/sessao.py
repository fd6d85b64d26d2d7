"""
O que cada banco de origem precisa ouvir ao conectar: somente leitura, fuso
UTC e limite de tempo por consulta (CONTEXTIA_ORIGEM_TIMEOUT).

Módulo puro (sem sqlalchemy): o adaptador genérico (`origem/generico.py`)
aplica estes comandos em cada conexão nova, e o `--autoteste` importa este
módulo num `python3 -S`.
"""

from __future__ import annotations

import os
import re

from contextia_sync import padroes
from contextia_sync.origem import ErroConfiguracaoOrigem

# SET TRANSACTION READ ONLY do Oracle vale por transacao: vai no inicio de
# cada uma (evento `begin`), nao na conexao.
COMANDO_INICIO_TRANSACAO = {'oracle': 'SET TRANSACTION READ ONLY'}

# A leitura em streaming do PostgreSQL com a sessão reusada (autocommit): o
# cursor do servidor (DECLARE) só existe dentro de uma transação, e esta nasce
# somente leitura seja qual for a sessão.
INICIO_LEITURA_POSTGRES = 'BEGIN READ ONLY'

# Como cada banco diz "cancelei pelo tempo": PostgreSQL, MariaDB, MySQL,
# oracledb (call_timeout) e ODBC (HYT00).
MARCAS_DE_TIMEOUT = re.compile(
    r'statement timeout|max_statement_time|maximum statement execution time'
    r'|DPY-4024|ORA-03156|HYT00|Query timeout',
    re.I,
)


def comandos_de_sessao(dialeto: str, timeout: int, mariadb: bool = False) -> list[str]:
    """
    SQL rodado em cada conexao nova, por dialeto: so-leitura, fuso, timeout.

    O fuso da sessao e UTC onde o banco converte (timestamptz, TIMESTAMP do
    MySQL, WITH LOCAL TIME ZONE do Oracle): a marca de agua nao pode mudar de
    significado porque alguem trocou o fuso padrao do servidor.
    """
    if dialeto == 'postgresql':
        return [
            'SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY',
            "SET TIME ZONE 'UTC'",
            'SET statement_timeout = %d' % (int(timeout) * 1000),
        ]
    if dialeto == 'mysql':
        return [
            'SET SESSION TRANSACTION READ ONLY',
            "SET time_zone = '+00:00'",
            comando_timeout_mysql(timeout, mariadb),
        ]
    if dialeto == 'oracle':
        # READ ONLY vai em COMANDO_INICIO_TRANSACAO, a cada transacao.
        return ["ALTER SESSION SET TIME_ZONE = 'UTC'"]
    if dialeto == 'sqlite':
        return ['PRAGMA query_only = ON']
    # SQL Server: sem comando de sessao que impeca escrita; o timeout vai pelo
    # atributo `timeout` do pyodbc.
    return []


def prefixo_mariadb(timeout: int, sem_limite: bool = False) -> str:
    """
    O `SET STATEMENT ... FOR` que vai na frente de cada comando do MariaDB com
    a sessão reusada: o comando roda somente leitura, em UTC e com o limite de
    tempo, seja qual for a sessão, e o servidor devolve essas variáveis ao que
    eram no fim dele -- a função de uma view que destrava a sessão
    (`SET SESSION TRANSACTION READ WRITE`, `max_statement_time = 0`, outro
    fuso) não passa do próprio comando. `sem_limite`: a leitura em streaming
    (ver `fetch`); timeout 0: o limite do servidor, como sempre.
    """
    variaveis = ['tx_read_only=1', "time_zone='+00:00'"]
    if timeout:
        variaveis.append('max_statement_time=%d' % (0 if sem_limite else int(timeout)))
    return 'SET STATEMENT %s FOR ' % ', '.join(variaveis)


def comando_timeout_mysql(timeout: int, mariadb: bool) -> str:
    """MariaDB conta em segundos (`max_statement_time`); MySQL em ms, só SELECT."""
    if mariadb:
        return 'SET SESSION max_statement_time = %d' % int(timeout)
    return 'SET SESSION max_execution_time = %d' % (int(timeout) * 1000)


def timeout_do_ambiente() -> int:
    """CONTEXTIA_ORIGEM_TIMEOUT em segundos (vazio: padroes.TIMEOUT_ORIGEM; 0 desliga)."""
    bruto = os.environ.get('CONTEXTIA_ORIGEM_TIMEOUT', '').strip()
    if not bruto:
        return padroes.TIMEOUT_ORIGEM
    try:
        valor = int(bruto)
    except ValueError:
        raise ErroConfiguracaoOrigem(
            'CONTEXTIA_ORIGEM_TIMEOUT=%r não é número inteiro de segundos.'
            ' Ex.: 300 (0 desliga).' % bruto
        ) from None
    if valor < 0:
        raise ErroConfiguracaoOrigem(
            'CONTEXTIA_ORIGEM_TIMEOUT=%d negativo. Use 0 para desligar.' % valor
        )
    return valor
