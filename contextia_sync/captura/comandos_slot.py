"""
Os comandos do operador para o slot lógico: `--criar-slot` e `--remover-slot`.

Rodados à mão, uma vez (nunca em silêncio na subida: a partir do slot o banco
do cliente retém WAL por nós), com o login de CONTEXTIA_ORIGEM_DBA se definido
(o dono das tabelas cria a publicação). Idempotentes: cada um devolve as
linhas do que fez, que `cli/ouvinte.py` mostra.
"""

from __future__ import annotations

import os
from typing import Any

from contextia_sync.captura import DatasetVivo
from contextia_sync.captura.slot_banco import (
    PLUGIN,
    ErroSlot,
    Tabelas,
    conectar,
    conferir_origem,
    conferir_tabelas,
    ident,
    ler_slot,
    nome_do_slot,
    tabelas_seguidas,
)

_PROTECAO_DO_DISCO = (
    'Proteção do disco do cliente: peça ao DBA `ALTER SYSTEM SET'
    " max_slot_wal_keep_size = '<ex.: 20GB>'; SELECT pg_reload_conf();`"
    ' (PostgreSQL 13+): acima disso o banco invalida o slot em vez de encher o'
    ' disco, e o ouvinte cai na varredura. Desinstalar: `--remover-slot` PRIMEIRO.'
)


def _url_do_dba() -> tuple[str, str]:
    """(URL, variável): CONTEXTIA_ORIGEM_DBA se definida, senão CONTEXTIA_ORIGEM."""
    dba = os.environ.get('CONTEXTIA_ORIGEM_DBA', '').strip()
    if dba:
        return dba, 'CONTEXTIA_ORIGEM_DBA'
    return os.environ.get('CONTEXTIA_ORIGEM', '').strip(), 'CONTEXTIA_ORIGEM'


def criar_slot(mapa: dict[str, Any], alvos: list[DatasetVivo]) -> list[str]:
    """
    `--criar-slot`: a publicação (as tabelas seguidas) e DEPOIS o slot -- o
    pgoutput procura a publicação no catálogo da época de cada mudança, então
    ela tem de existir antes da primeira. Idempotente. Devolve as linhas do que fez.
    """
    slot = nome_do_slot(mapa)
    tabelas = tabelas_seguidas(alvos)
    if not tabelas:
        raise ErroSlot(
            'nenhum dataset ao vivo no mapeamento: não há tabela para o slot'
            ' seguir. Declare `watch_column` (e `key`) nos datasets.'
        )
    url, variavel = _url_do_dba()
    with conectar(url, somente_leitura=False, variavel=variavel) as conn:
        problemas = conferir_origem(conn, usuario_da_captura=False)
        if problemas:
            raise ErroSlot('\n'.join(problemas))
        feito = [_publicar(conn, slot, tabelas), _criar_o_slot(conn, slot)]
        problemas = conferir_tabelas(conn, tabelas, lambda a: a.escopo, slot)
    feito.append(_PROTECAO_DO_DISCO)
    feito += ['AINDA FALTA: %s' % p for p in problemas]
    return feito


def _publicar(conn: Any, slot: str, tabelas: Tabelas) -> str:
    """A publicação `slot` criada, ou alterada para cobrir as tabelas que faltam."""
    import psycopg

    nomes = [ident(e, t) for e, t in sorted(tabelas)]
    existe = (
        conn.execute('SELECT 1 FROM pg_publication WHERE pubname = %s', (slot,)).fetchone()
        is not None
    )
    publicadas = {
        ident(e, t)
        for e, t in conn.execute(
            'SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s', (slot,)
        ).fetchall()
    }
    faltam = [n for n in nomes if n not in publicadas]
    if not faltam:
        return 'publicação %s: já cobre %s' % (slot, ', '.join(nomes))
    comando = (
        'ALTER PUBLICATION %s ADD TABLE %s' if existe else 'CREATE PUBLICATION %s FOR TABLE %s'
    ) % (slot, ', '.join(faltam))
    try:
        conn.execute(comando)
    except psycopg.errors.InsufficientPrivilege as erro:
        raise ErroSlot(
            'a publicação %s não pôde ser %s com este login (%s). Ela pede o dono'
            ' das tabelas. Peça ao DBA: `%s;` -- ou rode este comando com'
            ' CONTEXTIA_ORIGEM_DBA=<URL de um login dono das tabelas>.'
            % (slot, 'alterada' if existe else 'criada', str(erro).splitlines()[0], comando)
        ) from None
    return 'publicação %s: %s' % (slot, ', '.join(faltam))


def _criar_o_slot(conn: Any, slot: str) -> str:
    """O slot criado com o pgoutput; o que já existe fica (o invalidado é recusado)."""
    atual = ler_slot(conn, slot)
    if atual is not None and atual.wal_status == 'lost':
        raise ErroSlot(
            'o slot %s existe mas foi INVALIDADO (max_slot_wal_keep_size): não'
            ' serve mais. Rode `--remover-slot` e depois `--criar-slot`.' % slot
        )
    if atual is not None:
        return 'slot %s já existe (em %s): nada mudou' % (slot, atual.confirmado)
    lsn = conn.execute(
        'SELECT lsn::text FROM pg_create_logical_replication_slot(%s, %s)', (slot, PLUGIN)
    ).fetchone()[0]
    return (
        'slot %s criado em %s (plugin %s): a partir daqui o banco RETÉM WAL'
        ' até o ouvinte consumir' % (slot, lsn, PLUGIN)
    )


def remover_slot(mapa: dict[str, Any]) -> list[str]:
    """`--remover-slot`: o slot (o que retém WAL) e depois a publicação. Idempotente."""
    slot = nome_do_slot(mapa)
    url, variavel = _url_do_dba()
    with conectar(url, somente_leitura=False, variavel=variavel) as conn:
        return [_remover_o_slot(conn, slot), _remover_a_publicacao(conn, slot)]


def _remover_o_slot(conn: Any, slot: str) -> str:
    import psycopg

    atual = ler_slot(conn, slot)
    if atual is None:
        return 'slot %s: não existe (nada retém WAL por este ouvinte)' % slot
    try:
        conn.execute('SELECT pg_drop_replication_slot(%s)', (slot,))
    except psycopg.errors.ObjectInUse:
        raise ErroSlot(
            'o slot %s está em uso agora (outro processo o lê). Pare o'
            ' ouvinte e rode de novo.' % slot
        ) from None
    return 'slot %s removido (retinha %s bytes de WAL)' % (slot, atual.wal_retido)


def _remover_a_publicacao(conn: Any, slot: str) -> str:
    import psycopg

    if conn.execute('SELECT 1 FROM pg_publication WHERE pubname = %s', (slot,)).fetchone() is None:
        return 'publicação %s: não existe' % slot
    try:
        conn.execute('DROP PUBLICATION %s' % slot)
    except psycopg.errors.InsufficientPrivilege:
        return (
            'publicação %s NÃO removida (pede o dono): peça ao DBA `DROP'
            ' PUBLICATION %s;` (ela não retém WAL; é só limpeza)' % (slot, slot)
        )
    return 'publicação %s removida' % slot
