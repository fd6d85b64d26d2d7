"""
O log medido AGORA na origem, para a saúde (`ouvinte.py --saude`) com o ouvinte
parado: o status congela no número da última volta, e o banco do cliente segue
retendo WAL (o slot) ou andando para longe da posição salva (o binlog).

- `slot_logico`: a linha do slot em `pg_replication_slots` (`slot_banco.ler_slot`):
  `pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)` e, no PostgreSQL 13+,
  `wal_status` e `safe_wal_size`. O slot é o do status (`captura.slot`: o nome que
  o ouvinte tirou do mapeamento com `nome_do_slot`) ou o de `<estado>/slot-posicao.json`.
- `binlog`: a posição salva (`<estado>/binlog-posicao.json`) contra os arquivos do
  log. `SHOW BINARY LOGS` dá o nome e o tamanho de cada um; `BINLOG_GTID_POS(arquivo,
  4)` dá o GTID do começo dele (o Gtid_list que o MariaDB grava no cabeçalho). A
  posição está no arquivo mais novo cujo começo ela já passou; os bytes dali ao fim
  do log são a distância -- contada do COMEÇO desse arquivo: até um arquivo
  (`max_binlog_size`) a mais que o exato, nunca a menos. Se nem o mais antigo
  serve, o que vinha depois da posição já foi apagado (a volta do ouvinte recebe
  o erro 1236). Nenhuma conexão de réplica: um dump com o server id do ouvinte
  derrubaria o dele, se ele estivesse de pé.

Com o login do próprio ouvinte (`CONTEXTIA_ORIGEM`), numa sessão somente leitura;
os drivers são importados aqui dentro. Nada levanta: o que impediu a medida vira
`LogMedido.falha`, uma frase com a causa e a correção (a saúde nunca sai com
traceback).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # tipos.py importa o sqlalchemy, que o autoteste não tem
    from contextia_sync.tipos import ConexaoDoDriver

__all__ = ['ESTRATEGIAS_MEDIDAS', 'LogMedido', 'gtids', 'medir_log']

ESTRATEGIAS_MEDIDAS = ('slot_logico', 'binlog')
_PRAZO_CONEXAO = 10  # segundos: o monitoramento não espera muito mais que isso
_DRIVERS = {'slot_logico': 'psycopg', 'binlog': 'pymysql'}


class LogMedido(NamedTuple):
    """
    O que a saúde mediu na origem: `retido`, os bytes (o WAL retido pelo slot, ou o
    binlog depois da posição salva); `perdida`, a posição que não existe mais; ou
    `falha`, o porquê de não ter medido (os outros campos então não valem).
    """

    estrategia: str
    onde: str  # o slot, ou a posição e o arquivo dela
    retido: int | None = None
    perdida: str | None = None
    falha: str | None = None
    wal_status: str | None = None
    wal_seguro: int | None = None


class _NaoMediu(Exception):
    """A medida não se fez: a mensagem é a frase da `LogMedido.falha`."""


def medir_log(
    estrategia: str,
    estado: str,
    captura: Mapping[str, object],
    ambiente: Mapping[str, str] = os.environ,
) -> LogMedido | None:
    """
    O log de `estrategia` medido agora na origem; None se a estratégia não é por
    log, ou se o ouvinte nunca guardou posição (nada a medir).
    """
    if estrategia not in ESTRATEGIAS_MEDIDAS:
        return None
    onde = _o_que_medir(estrategia, estado, captura)
    if onde is None:
        return None
    medir: Callable[[str, str], LogMedido] = (
        _medir_slot if estrategia == 'slot_logico' else _medir_binlog
    )
    url = ambiente.get('CONTEXTIA_ORIGEM', '')
    try:
        if not url:
            raise _NaoMediu(
                'CONTEXTIA_ORIGEM não está definida no ambiente da saúde: rode-a com o'
                ' ambiente do ouvinte (as variáveis de /etc/contextia/ouvinte.env)'
            )
        return medir(url, onde)
    except _NaoMediu as erro:
        return LogMedido(estrategia, onde, falha=str(erro))
    except ImportError as erro:
        return LogMedido(
            estrategia,
            onde,
            falha='falta o driver %s neste python (%s: %s): rode a saúde com o python do SDK'
            ' (o .venv dele, ou OUVINTE_PYTHON no deploy/verificar-saude.sh)'
            % (_DRIVERS[estrategia], sys.executable, erro),
        )
    except Exception as erro:  # noqa: BLE001 - a saúde nunca sai com traceback
        return LogMedido(estrategia, onde, falha=_sem_senha(url, erro))


def _o_que_medir(estrategia: str, estado: str, captura: Mapping[str, object]) -> str | None:
    """O nome do slot, ou o GTID salvo; None se não há."""
    from contextia_sync.captura.do_spool import ler_posicao

    if estrategia == 'slot_logico':
        from contextia_sync.captura.slot_logico import ARQUIVO_POSICAO

        if captura.get('slot'):
            return str(captura['slot'])
    else:
        from contextia_sync.captura.binlog import ARQUIVO_POSICAO
    try:
        posicao = ler_posicao(os.path.join(estado, ARQUIVO_POSICAO), ValueError, '')
    except (ValueError, OSError):
        posicao = None  # o ouvinte o recusa na volta, com a correção
    if estrategia == 'slot_logico':
        return posicao.slot if posicao else None
    # O arquivo é a posição de verdade; o status, a da última volta.
    gtid = (posicao.gtid if posicao else None) or captura.get('posicao')
    return str(gtid) if gtid else None


def _sem_senha(url: str, erro: BaseException) -> str:
    """A falha ao conectar ou consultar, numa linha, sem a senha da URL."""
    from contextia_sync.erros import ErroConfiguracao, resumir

    if isinstance(erro, ErroConfiguracao):
        return resumir(str(erro), 400)  # já diz a variável e a correção, sem a senha
    try:
        from contextia_sync.origem.url import descrever_url, ler_url, mascarar

        lida = ler_url(url)
        texto = mascarar('%s: %s' % (type(erro).__name__, erro), lida.password)
        return (
            'não mediu na origem de CONTEXTIA_ORIGEM (%s): %s -- confira se o banco está no'
            ' ar e aceita o login do ouvinte desta máquina'
            % (descrever_url(lida), resumir(texto, 240))
        )
    except Exception:  # noqa: BLE001 - sem o SQLAlchemy, o tipo do erro basta
        return 'não mediu na origem de CONTEXTIA_ORIGEM: %s' % type(erro).__name__


# ------------------------------------------------------------------ o slot lógico
def _medir_slot(url: str, slot: str) -> LogMedido:
    """A linha do slot em pg_replication_slots, numa conexão somente leitura."""
    from contextia_sync.captura.slot_banco import conectar, ler_slot

    conn = conectar(url, somente_leitura=True)
    try:
        linha = ler_slot(conn, slot)
    finally:
        conn.close()
    onde = 'slot %s' % slot
    if linha is None:
        return LogMedido(
            'slot_logico',
            onde,
            perdida='o slot %s não existe na origem (medido agora: o ouvinte não está'
            ' rodando): apagado ou nunca criado; na volta o ouvinte recusa subir sem ele.'
            ' Rode `ouvinte.py --criar-slot` e depois a varredura (`--varrer-agora`)' % slot,
        )
    if linha.wal_status == 'lost':
        return LogMedido(
            'slot_logico',
            onde,
            perdida='o slot %s foi INVALIDADO na origem (wal_status lost, medido agora: o'
            ' ouvinte não está rodando): o WAL passou do max_slot_wal_keep_size e o'
            ' PostgreSQL o apagou; na volta os datasets vão para a varredura' % slot,
            wal_status=linha.wal_status,
        )
    return LogMedido(
        'slot_logico',
        onde,
        retido=linha.wal_retido,
        wal_status=linha.wal_status,
        wal_seguro=linha.wal_seguro,
    )


# ------------------------------------------------------------------ o binlog
def gtids(texto: object) -> dict[int, int]:
    """'0-1-11,1-2-5' -> {domínio: sequência}; o que não se lê fica de fora."""
    lidos: dict[int, int] = {}
    for parte in str(texto or '').split(','):
        pedacos = parte.strip().split('-')
        if len(pedacos) == 3 and all(p.isascii() and p.isdigit() for p in pedacos):
            lidos[int(pedacos[0])] = int(pedacos[2])
    return lidos


def _ja_passou(comeco: dict[int, int], salva: dict[int, int]) -> bool:
    """A posição salva está no começo do arquivo ou depois dele, em todo domínio."""
    return all(dominio in salva and salva[dominio] >= seq for dominio, seq in comeco.items())


def _medir_binlog(url: str, gtid: str) -> LogMedido:
    """A posição salva contra SHOW BINARY LOGS e o GTID do começo de cada arquivo."""
    conn = _conectar_mariadb(url)
    try:
        cursor = conn.cursor()
        # Nada aqui escreve; a sessão diz isso ao servidor também.
        cursor.execute('SET SESSION TRANSACTION READ ONLY')
        cursor.execute('SELECT @@gtid_binlog_pos')
        atual = cursor.fetchone()[0]
        cursor.execute('SHOW BINARY LOGS')
        arquivos = [(str(linha[0]), int(linha[1])) for linha in cursor.fetchall()]
        salva = gtids(gtid)
        if salva == gtids(atual):
            return LogMedido('binlog', 'posição %s (em dia)' % gtid, retido=0)
        comeco = ''
        for indice in range(len(arquivos) - 1, -1, -1):
            cursor.execute('SELECT BINLOG_GTID_POS(%s, 4)', (arquivos[indice][0],))
            valor = cursor.fetchone()[0]
            if valor is None:
                continue  # apagado entre o SHOW BINARY LOGS e agora
            comeco = str(valor)
            if _ja_passou(gtids(comeco), salva):
                return LogMedido(
                    'binlog',
                    'posição %s (arquivo %s)' % (gtid, arquivos[indice][0]),
                    retido=sum(tamanho for _, tamanho in arquivos[indice:]),
                )
    finally:
        conn.close()
    mais_antigo = arquivos[0][0] if arquivos else '(nenhum)'
    return LogMedido(
        'binlog',
        'posição %s' % gtid,
        perdida='a posição salva do binlog (%s) já foi APAGADA da origem (medido agora: o'
        ' ouvinte não está rodando): o arquivo mais antigo que resta, %s, começa depois'
        ' dela (%s); na volta os datasets vão para a varredura. Peça ao DBA uma retenção'
        ' (binlog_expire_logs_seconds) maior que a maior parada do ouvinte'
        % (gtid, mais_antigo, comeco),
    )


def _conectar_mariadb(url_texto: str) -> ConexaoDoDriver:
    """A conexão pymysql com o login e o TLS da URL, como a da captura `binlog`."""
    import pymysql

    from contextia_sync.origem.url import argumentos_pymysql, ler_url, tls_da_url

    url = ler_url(url_texto)
    tls = tls_da_url(url)
    if tls.familia != 'mysql':
        raise _NaoMediu(
            'o status é da estratégia `binlog` e CONTEXTIA_ORIGEM aponta para %s: rode a'
            ' saúde com a CONTEXTIA_ORIGEM do ouvinte' % url.get_backend_name()
        )
    return pymysql.connect(
        host=url.host or '127.0.0.1',
        port=int(url.port or 3306),
        user=url.username or '',
        password=url.password or '',
        connect_timeout=_PRAZO_CONEXAO,
        read_timeout=3 * _PRAZO_CONEXAO,
        **argumentos_pymysql(tls),
    )
