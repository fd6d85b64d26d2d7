"""
Os comandos do operador para o slot lógico: `--criar-slot` e `--remover-slot`.

Rodados à mão, uma vez (nunca em silêncio na subida: a partir do slot o banco
do cliente retém WAL por nós), com o login de CONTEXTIA_ORIGEM_DBA se definido
(o dono das tabelas cria a publicação). Idempotentes: cada um devolve as
linhas do que fez, que `cli/ouvinte.py` mostra.

A publicação nunca quebra o ERP: o que ela incluiria (as filhas por herança e
as partições também) é conferido antes de qualquer DDL (`slot_publicacao.py`),
e o que o `--criar-slot` fez nela fica em `<estado>/slot-criado.json`, para o
`--remover-slot` desfazer só isso.
"""

from __future__ import annotations

import datetime
import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from contextia_sync.arquivos import gravar_atomico
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
from contextia_sync.captura.slot_publicacao import (
    Incluida,
    Inclusao,
    ler_inclusao,
    recusas,
    texto_da_recusa,
)

if TYPE_CHECKING:  # tipos.py importa o sqlalchemy, que o autoteste não tem
    from contextia_sync.tipos import ConexaoDoDriver, Mapa

ARQUIVO_REGISTRO = 'slot-criado.json'

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


def criar_slot(mapa: Mapa, alvos: list[DatasetVivo], estado: str | None = None) -> list[str]:
    """
    `--criar-slot`: confere tudo o que a publicação incluiria (slot_publicacao.py)
    ANTES de qualquer DDL, cria ou amplia a publicação numa transação (comitada,
    com o que ela fez anotado em `<estado>/slot-criado.json`) e DEPOIS o slot --
    o pgoutput procura a publicação no catálogo da época de cada mudança, e
    pg_create_logical_replication_slot não roda numa transação que escreveu.
    Idempotente. Devolve as linhas do que fez.
    """
    slot = nome_do_slot(mapa)
    tabelas = tabelas_seguidas(alvos)
    if not tabelas:
        raise ErroSlot(
            'nenhum dataset ao vivo no mapeamento: não há tabela para o slot'
            ' seguir. Declare `watch_column` (e `key`) nos datasets.'
        )
    registro = _caminho_do_registro(estado)
    url, variavel = _url_do_dba()
    with conectar(url, somente_leitura=False, variavel=variavel) as conn:
        problemas = conferir_origem(conn, usuario_da_captura=False)
        if problemas:
            raise ErroSlot('\n'.join(problemas))
        tabelas, so_varredura = _seguidas_no_catalogo(conn, alvos)
        versao = int(conn.execute('SHOW server_version_num').fetchone()[0])
        # Só as chaves (esquema, tabela): o que cada dataset faz delas não importa aqui.
        inclusao = ler_inclusao(conn, tabelas.keys())
        recusado = recusas(inclusao, versao)
        if recusado:
            raise ErroSlot(texto_da_recusa(slot, recusado))
        _conferir_o_slot(conn, slot)
        feito = _publicar(conn, slot, inclusao, versao, registro)
        feito.append(_criar_o_slot(conn, slot, registro))
        problemas = conferir_tabelas(conn, tabelas, slot)
    feito.append(_PROTECAO_DO_DISCO)
    feito += so_varredura
    feito += ['AINDA FALTA: %s' % p for p in problemas]
    return feito


def _seguidas_no_catalogo(
    conn: ConexaoDoDriver, alvos: list[DatasetVivo]
) -> tuple[Tabelas, list[str]]:
    """
    As `base_tables` no catálogo (captura/tabelas_base.py), como na subida: o
    nome errado recusa; a view sem elas fica fora da publicação, dita (só a
    varredura a leva), e o resto segue -- a publicação não espera por ela.
    """
    from contextia_sync.captura.tabelas_base import conferir_no_postgres

    conferencia = conferir_no_postgres(conn, alvos)
    if conferencia.recusas:
        raise ErroSlot('\n'.join(conferencia.recusas))
    tabelas = tabelas_seguidas(conferencia.vivos)
    if not tabelas:
        raise ErroSlot(
            'nenhum dataset do mapeamento pode ser seguido pelo log: %s'
            % '; '.join(motivo for _, motivo in conferencia.so_varredura)
        )
    return tabelas, [
        'SÓ VARREDURA (fora da publicação): %s -- %s' % (alvo.nome, motivo)
        for alvo, motivo in conferencia.so_varredura
    ]


# ------------------------------------------------------- o registro do que se criou
class Registro(NamedTuple):
    """O que o `--criar-slot` criou na publicação: o que o `--remover-slot` desfaz."""

    slot: str
    publicacao_criada: bool  # False: ela já existia (do DBA); só se acrescentou
    tabelas: list[str]  # as acrescentadas por ele, citadas ("esquema"."tabela")
    via_raiz_ligada: bool  # ele ligou publish_via_partition_root numa que já existia


def _caminho_do_registro(estado: str | None) -> str | None:
    """`<estado>/slot-criado.json`, com a pasta pronta para gravar (antes de qualquer DDL)."""
    if estado is None:
        return None
    try:
        os.makedirs(estado, exist_ok=True)
        if not os.access(estado, os.W_OK):
            raise PermissionError(13, 'sem permissão de escrita')
    except OSError as erro:
        raise ErroSlot(
            'a pasta de estado %s não aceita gravação (%s), e o --criar-slot anota nela'
            ' o que criou (%s, para o --remover-slot desfazer só isso). Nada foi criado.'
            ' Dê permissão de escrita a este usuário ou aponte --estado para a pasta do'
            ' ouvinte.' % (estado, erro.strerror or erro, ARQUIVO_REGISTRO)
        ) from None
    return os.path.join(estado, ARQUIVO_REGISTRO)


def _ler_registro(caminho: str | None, slot: str) -> tuple[Registro | None, str]:
    """O registro deste slot, ou (None, por que não há um)."""
    if caminho is None:
        return None, 'sem --estado'
    try:
        with open(caminho, encoding='utf-8') as arquivo:
            dados = json.load(arquivo)
        registro = Registro(
            str(dados['slot']),
            bool(dados['publicacao_criada']),
            [str(t) for t in dados['tabelas_acrescentadas']],
            bool(dados['via_raiz_ligada']),
        )
    except FileNotFoundError:
        return None, 'sem o registro %s' % caminho
    except (OSError, ValueError, KeyError, TypeError) as erro:
        return None, 'o registro %s está ilegível (%s)' % (caminho, erro)
    if registro.slot != slot:
        return None, 'o registro %s é do slot %s, não deste' % (caminho, registro.slot)
    return registro, ''


def _gravar_registro(caminho: str | None, registro: Registro) -> None:
    if caminho is None:
        return
    texto = json.dumps(
        {
            'slot': registro.slot,
            'publicacao': registro.slot,
            'publicacao_criada': registro.publicacao_criada,
            'tabelas_acrescentadas': registro.tabelas,
            'via_raiz_ligada': registro.via_raiz_ligada,
            'atualizado_em': datetime.datetime.now(datetime.timezone.utc).isoformat(),
        },
        ensure_ascii=False,
        indent=2,
    )
    try:
        gravar_atomico(caminho, texto + '\n')
    except OSError as erro:
        # Dentro da transação da publicação: o ErroSlot a desfaz (nada fica sem registro).
        raise ErroSlot(
            'o registro %s não foi gravado (%s): sem ele o --remover-slot não saberia o'
            ' que desfazer, e nada foi criado. Libere espaço ou dê escrita na pasta de'
            ' estado e rode `--criar-slot` de novo.' % (caminho, erro.strerror or erro)
        ) from None


# ------------------------------------------------------------------ a publicação
class _PublicacaoNoBanco(NamedTuple):
    existe: bool
    todas: bool  # FOR ALL TABLES: cobre tudo, e não aceita ADD TABLE
    via_raiz: bool
    cobertas: set[int]  # os oids que ela já lista ou publica


def _publicacao_no_banco(conn: ConexaoDoDriver, slot: str, versao: int) -> _PublicacaoNoBanco:
    via = 'pubviaroot' if versao >= 130000 else 'false'
    linha = conn.execute(
        'SELECT oid, puballtables, %s FROM pg_publication WHERE pubname = %%s' % via, (slot,)
    ).fetchone()
    if linha is None:
        return _PublicacaoNoBanco(False, False, False, set())
    cobertas = {
        oid
        for (oid,) in conn.execute(
            'SELECT prrelid FROM pg_publication_rel WHERE prpubid = %s'
            ' UNION SELECT c.oid FROM pg_publication_tables t'
            ' JOIN pg_namespace n ON n.nspname = t.schemaname'
            ' JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = t.tablename'
            ' WHERE t.pubname = %s',
            (linha[0], slot),
        ).fetchall()
    }
    return _PublicacaoNoBanco(True, bool(linha[1]), bool(linha[2]), cobertas)


def _comandos_da_publicacao(
    slot: str, atual: _PublicacaoNoBanco, faltam: list[Incluida], via_raiz: bool
) -> list[str]:
    """
    Cada tabela com ONLY: a lista é exatamente o que ela ganha (as filhas por
    herança vão nomeadas, conferidas; as partições vêm com a raiz).
    """
    lista = ', '.join('ONLY %s' % t.citada for t in faltam)
    if not atual.existe:
        return [
            'CREATE PUBLICATION %s FOR TABLE %s%s'
            % (slot, lista, ' WITH (publish_via_partition_root = true)' if via_raiz else '')
        ]
    comandos = ['ALTER PUBLICATION %s ADD TABLE %s' % (slot, lista)] if faltam else []
    if via_raiz and not atual.via_raiz:
        comandos.append('ALTER PUBLICATION %s SET (publish_via_partition_root = true)' % slot)
    return comandos


def _publicar(
    conn: ConexaoDoDriver, slot: str, inclusao: Inclusao, versao: int, caminho: str | None
) -> list[str]:
    """A publicação criada, ou ampliada, numa transação só, com o registro gravado nela."""
    atual = _publicacao_no_banco(conn, slot, versao)
    faltam = [t for t in inclusao.explicitas if not atual.todas and t.oid not in atual.cobertas]
    comandos = _comandos_da_publicacao(slot, atual, faltam, inclusao.via_raiz)
    anterior, _ = _ler_registro(caminho, slot)
    registro = _registro_novo(slot, atual, anterior, faltam, comandos)
    if not comandos:
        _gravar_registro(caminho, registro)
        return [
            'publicação %s: já cobre %s' % (slot, ', '.join(t.citada for t in inclusao.explicitas))
        ] + _de_quem(atual, anterior, slot)
    _executar(conn, slot, comandos, atual.existe, lambda: _gravar_registro(caminho, registro))
    feito = (
        ['publicação %s: %s' % (slot, ', '.join(t.citada for t in faltam))] if faltam else []
    ) + _de_quem(atual, anterior, slot)
    if inclusao.via_raiz:
        feito.append(
            'publicação %s: publish_via_partition_root = true (a mudança numa partição'
            ' sai com o nome da raiz)' % slot
        )
    return feito


def _registro_novo(
    slot: str,
    atual: _PublicacaoNoBanco,
    anterior: Registro | None,
    faltam: list[Incluida],
    comandos: list[str],
) -> Registro:
    """O registro depois desta rodada: o de antes (se a publicação é a mesma) e o de agora."""
    if anterior is None or not atual.existe:
        anterior = Registro(slot, not atual.existe, [], False)
    ligou = atual.existe and any('publish_via_partition_root' in c for c in comandos)
    return Registro(
        slot,
        anterior.publicacao_criada,
        anterior.tabelas + [t.citada for t in faltam if t.citada not in anterior.tabelas],
        anterior.via_raiz_ligada or ligou,
    )


def _de_quem(atual: _PublicacaoNoBanco, anterior: Registro | None, slot: str) -> list[str]:
    """A publicação que já existia sem o registro do --criar-slot: dita do DBA, e fica."""
    if not atual.existe or (anterior is not None and anterior.publicacao_criada):
        return []
    return [
        'publicação %s já existia antes deste --criar-slot (sem registro de que ele a'
        ' criou): tratada como do DBA; o --remover-slot tira dela só o que este'
        ' comando acrescentou' % slot
    ]


def _executar(
    conn: ConexaoDoDriver,
    slot: str,
    comandos: list[str],
    existe: bool,
    registrar: Callable[[], None],
) -> None:
    """Os comandos numa transação (CREATE/ALTER PUBLICATION são transacionais) e o registro."""
    import psycopg

    try:
        with conn.transaction():
            for comando in comandos:
                conn.execute(comando)
            registrar()  # antes do COMMIT: sem o registro, nada fica
    except psycopg.errors.InsufficientPrivilege as erro:
        raise ErroSlot(
            'a publicação %s não pôde ser %s com este login (%s). Ela pede o dono'
            ' das tabelas. Peça ao DBA: `%s;` -- ou rode este comando com'
            ' CONTEXTIA_ORIGEM_DBA=<URL de um login dono das tabelas>.'
            % (
                slot,
                'alterada' if existe else 'criada',
                str(erro).splitlines()[0],
                '; '.join(comandos),
            )
        ) from None
    except psycopg.Error as erro:
        raise ErroSlot(
            'a publicação %s não pôde ser %s (%s): nada foi criado. Corrija e rode'
            ' `--criar-slot` de novo; o comando era `%s;`.'
            % (
                slot,
                'alterada' if existe else 'criada',
                str(erro).splitlines()[0],
                '; '.join(comandos),
            )
        ) from None


# ------------------------------------------------------------------ o slot
def _conferir_o_slot(conn: ConexaoDoDriver, slot: str) -> None:
    """O slot invalidado é recusado antes de qualquer DDL (ele não serve mais)."""
    atual = ler_slot(conn, slot)
    if atual is not None and atual.wal_status == 'lost':
        raise ErroSlot(
            'o slot %s existe mas foi INVALIDADO (max_slot_wal_keep_size): não'
            ' serve mais. Rode `--remover-slot` e depois `--criar-slot`.' % slot
        )


def _criar_o_slot(conn: ConexaoDoDriver, slot: str, caminho: str | None) -> str:
    """O slot criado com o pgoutput, fora de transação; o que já existe fica."""
    import psycopg

    atual = ler_slot(conn, slot)
    if atual is not None:
        return 'slot %s já existe (em %s): nada mudou' % (slot, atual.confirmado)
    try:
        lsn = conn.execute(
            'SELECT lsn::text FROM pg_create_logical_replication_slot(%s, %s)', (slot, PLUGIN)
        ).fetchone()[0]
    except psycopg.Error as erro:
        raise ErroSlot(
            'o slot %s não foi criado (%s). A publicação ficou (anotada em %s: o'
            ' `--remover-slot` a desfaz); corrija -- `max_replication_slots` com um'
            ' livre, por exemplo -- e rode `--criar-slot` de novo.'
            % (slot, str(erro).splitlines()[0], caminho or 'nenhum registro: sem --estado')
        ) from None
    return (
        'slot %s criado em %s (plugin %s): a partir daqui o banco RETÉM WAL'
        ' até o ouvinte consumir' % (slot, lsn, PLUGIN)
    )


# ------------------------------------------------------------------ remover
def remover_slot(mapa: Mapa, estado: str | None = None) -> list[str]:
    """
    `--remover-slot`: o slot (o que retém WAL) e depois o que o `--criar-slot`
    fez na publicação, pelo registro: a criada por ele sai inteira; na que já
    existia, só as tabelas que ele acrescentou. Sem registro, a publicação sai
    inteira (o de antes do registro) e a saída diz que isso foi assumido. Idempotente.
    """
    slot = nome_do_slot(mapa)
    caminho = None if estado is None else os.path.join(estado, ARQUIVO_REGISTRO)
    registro, sem_registro = _ler_registro(caminho, slot)
    url, variavel = _url_do_dba()
    with conectar(url, somente_leitura=False, variavel=variavel) as conn:
        feito = [_remover_o_slot(conn, slot)]
        if registro is None:
            feito.append(
                '%s: assumido que a publicação %s é do --criar-slot (como antes do'
                ' registro existir) e removida inteira' % (sem_registro, slot)
            )
            linha, desfeita = _remover_a_publicacao(conn, slot)
        elif registro.publicacao_criada:
            linha, desfeita = _remover_a_publicacao(conn, slot)
        else:
            linha, desfeita = _tirar_o_acrescentado(conn, slot, registro)
        feito.append(linha)
    if desfeita and caminho is not None and registro is not None:
        try:
            os.unlink(caminho)
        except FileNotFoundError:
            pass
        except OSError as erro:
            feito.append('o registro %s ficou (%s): apague-o à mão' % (caminho, erro))
    return feito


def _remover_o_slot(conn: ConexaoDoDriver, slot: str) -> str:
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


def _remover_a_publicacao(conn: ConexaoDoDriver, slot: str) -> tuple[str, bool]:
    """(a linha, se ficou desfeita)."""
    import psycopg

    if conn.execute('SELECT 1 FROM pg_publication WHERE pubname = %s', (slot,)).fetchone() is None:
        return 'publicação %s: não existe' % slot, True
    try:
        conn.execute('DROP PUBLICATION %s' % slot)
    except psycopg.errors.InsufficientPrivilege:
        return (
            'publicação %s NÃO removida (pede o dono): peça ao DBA `DROP'
            ' PUBLICATION %s;` (ela não retém WAL; é só limpeza)' % (slot, slot)
        ), False
    return 'publicação %s removida' % slot, True


def _tirar_o_acrescentado(conn: ConexaoDoDriver, slot: str, registro: Registro) -> tuple[str, bool]:
    """Na publicação do DBA: só as tabelas que o --criar-slot acrescentou saem; ela fica."""
    import psycopg

    if conn.execute('SELECT 1 FROM pg_publication WHERE pubname = %s', (slot,)).fetchone() is None:
        return 'publicação %s: não existe' % slot, True
    membros = {
        ident(e, t)
        for e, t in conn.execute(
            'SELECT n.nspname, c.relname FROM pg_publication_rel r'
            ' JOIN pg_publication p ON p.oid = r.prpubid JOIN pg_class c ON c.oid = r.prrelid'
            ' JOIN pg_namespace n ON n.oid = c.relnamespace WHERE p.pubname = %s',
            (slot,),
        ).fetchall()
    }
    tirar = [t for t in registro.tabelas if t in membros]
    comandos = [
        'ALTER PUBLICATION %s DROP TABLE %s' % (slot, ', '.join('ONLY ' + t for t in tirar))
    ]
    comandos = comandos if tirar else []
    if registro.via_raiz_ligada:
        comandos.append('ALTER PUBLICATION %s SET (publish_via_partition_root = false)' % slot)
    try:
        with conn.transaction():
            for comando in comandos:
                conn.execute(comando)
    except psycopg.errors.InsufficientPrivilege:
        return (
            'publicação %s (do DBA) NÃO desfeita (pede o dono): peça ao DBA `%s;`'
            % (slot, '; '.join(comandos))
        ), False
    return (
        'publicação %s existia antes do --criar-slot (do DBA): fica; tirado dela só o que'
        ' ele acrescentou: %s' % (slot, '; '.join(comandos) or 'nada')
    ), True
