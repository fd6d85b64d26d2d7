"""
As `base_tables` de cada dataset ao vivo pelo log, conferidas no catálogo da origem.

O log de transação (`binlog`, `slot_logico`) só mostra linha mudada de TABELA:
nunca uma mudança "na view". O dataset segue as tabelas de `base_tables`
(padrão: o próprio `source_object`), e um nome errado ali não dá erro nenhum --
o dataset simplesmente nunca muda ao vivo. Por isso a subida lê o catálogo
(somente leitura, com o login do ouvinte) e confere:

    recusa (saída 2)     o nome errado: a tabela listada que não existe, que
                         não é tabela, sem a `column` que acha a linha, ou que
                         a view não lê (onde o catálogo diz o que a view lê); o
                         `source_object` que não existe
    só varredura         o `source_object` que é view (ou outro objeto que não
                         é tabela) sem `base_tables`: o dataset sai do ao-vivo
                         com o motivo e a correção, e o resto fica ao vivo

O que a view lê: no PostgreSQL, `pg_rewrite` + `pg_depend` (as relações da regra
da view, através das views que ela lê; `information_schema.view_table_usage` só
mostra as tabelas de que o login é dono). Uma view que chama função não diz
tudo o que lê (a função lê o que quiser): ali a conferência não recusa. No
MySQL 8, `information_schema.VIEW_TABLE_USAGE`; o MariaDB (até o 11) não tem
essa tabela nem outra que diga o que uma view lê -- lá só o texto da definição,
e adivinhar pelo texto não é conferir: não se confere (docs/ouvinte.md).

`conferir_bases` é puro (o `Catalogo` dentro, a `Conferencia` fora);
`catalogo_postgres` e `catalogo_mariadb` leem o catálogo por uma conexão ou um
cursor já abertos, e `conferir_no_postgres`/`conferir_no_mariadb` juntam as duas
coisas para as estratégias chamarem no `conferir`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from contextia_sync.captura import DatasetVivo, TabelaBase

if TYPE_CHECKING:  # tipos.py importa o sqlalchemy, que o autoteste não tem
    from contextia_sync.tipos import ConexaoDoDriver, CursorDoDriver

Nome = tuple[str, str]
"""(esquema, objeto) como a origem os compara (no MariaDB, em minúsculas, como o binlog)."""

TABELA, VIEW = 'tabela', 'view'

_RELKIND = {
    'r': TABELA,
    'p': TABELA,
    'v': VIEW,
    'm': 'view materializada',
    'f': 'tabela estrangeira',
    'S': 'sequência',
}
"""O relkind do pg_class como a mensagem o diz."""

_TIPO_MARIADB = {'BASE TABLE': TABELA, 'SYSTEM VERSIONED': TABELA, 'VIEW': VIEW}
"""O TABLE_TYPE do information_schema como a mensagem o diz (o resto, em minúsculas)."""


@dataclass(frozen=True)
class Objeto:
    """Um objeto da origem como o catálogo o mostra."""

    nome: str  # 'esquema.objeto', escrito como no catálogo
    tipo: str  # TABELA, VIEW, ou o que ele é (ex.: 'view materializada')
    colunas: frozenset[str] = frozenset()


@dataclass
class Catalogo:
    """O que a conferência lê da origem: os objetos pedidos e o que cada view lê."""

    nomear: Callable[[str], Nome]  # o nome do mapeamento -> a chave (esquema padrão, caixa)
    login: str
    objetos: dict[Nome, Objeto] = field(default_factory=dict)
    # view -> as relações que ela lê direto; o tipo de cada uma em `tipos`
    lidas: dict[Nome, set[Nome]] = field(default_factory=dict)
    tipos: dict[Nome, str] = field(default_factory=dict)
    opacas: set[Nome] = field(default_factory=set)  # views que chamam função
    dependencias: bool = True  # False: o catálogo não diz o que uma view lê


@dataclass
class Conferencia:
    """O que a conferência decidiu: quem segue ao vivo, quem fica só na varredura, as recusas."""

    vivos: list[DatasetVivo] = field(default_factory=list)
    so_varredura: list[tuple[DatasetVivo, str]] = field(default_factory=list)
    recusas: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ a regra (pura)
def conferir_bases(alvos: Iterable[DatasetVivo], catalogo: Catalogo) -> Conferencia:
    """Cada dataset ao vivo pelo log contra o catálogo: ao vivo, só varredura, ou recusado."""
    conferencia = Conferencia()
    for alvo in alvos:
        fonte = catalogo.objetos.get(catalogo.nomear(alvo.source_object))
        if fonte is None:
            conferencia.recusas.append(_recusa_da_fonte(alvo, catalogo))
        elif fonte.tipo != TABELA and not alvo.row.get('base_tables'):
            conferencia.so_varredura.append((alvo, _sem_base_tables(fonte, catalogo)))
        else:
            # Sem `base_tables`, a única é o próprio source_object (tabela), pela key.
            recusas = [r for t in alvo.tabelas_base if (r := _recusa(alvo, t, fonte, catalogo))]
            conferencia.recusas += recusas
            if not recusas:
                conferencia.vivos.append(alvo)
    return conferencia


def tabelas_lidas(view: Nome, catalogo: Catalogo) -> tuple[list[Nome], bool]:
    """
    As tabelas que a view lê, também através das views que ela lê (em ordem), e
    se alguma delas chama função (então a lista pode não ser tudo).
    """
    lidas: set[Nome] = set()
    opaca = False
    pilha, vistas = [view], set()
    while pilha:
        atual = pilha.pop()
        if atual in vistas:
            continue
        vistas.add(atual)
        opaca = opaca or atual in catalogo.opacas
        for nome in catalogo.lidas.get(atual, ()):
            if catalogo.tipos.get(nome) == VIEW:
                pilha.append(nome)
            else:
                lidas.add(nome)
    return sorted(lidas), opaca


def _escritas(nomes: Iterable[Nome]) -> str:
    return ', '.join('%s.%s' % nome for nome in nomes) or 'nenhuma'


def _o_que_a_view_le(fonte: Objeto, catalogo: Catalogo) -> str:
    """'; a view X lê A, B' (o que o catálogo diz), ou '' se ele não diz."""
    if fonte.tipo != VIEW or not catalogo.dependencias:
        return ''
    lidas, _ = tabelas_lidas(catalogo.nomear(fonte.nome), catalogo)
    return '; a view %s lê %s' % (fonte.nome, _escritas(lidas))


def _recusa_da_fonte(alvo: DatasetVivo, catalogo: Catalogo) -> str:
    return (
        'dataset %s: o source_object %s não existe na origem (ou o login %s não o vê).'
        ' Corrija `source_object` no mapeamento, ou peça ao DBA `GRANT SELECT` nele'
        ' para %s.' % (alvo.nome, alvo.source_object, catalogo.login, catalogo.login)
    )


def _sem_base_tables(fonte: Objeto, catalogo: Catalogo) -> str:
    """O motivo (e a correção) do dataset cujo source_object não é tabela, sem `base_tables`."""
    if fonte.tipo == VIEW:
        lidas = (
            ' (%s)' % _escritas(tabelas_lidas(catalogo.nomear(fonte.nome), catalogo)[0])
            if catalogo.dependencias
            else ''
        )
        return (
            '%s é uma view, e o log só traz mudança de tabela: sem `base_tables` nada'
            ' o faz mudar ao vivo. Correção: declare `base_tables` no dataset com as'
            ' tabelas que a view lê%s e suba o ouvinte de novo' % (fonte.nome, lidas)
        )
    return (
        '%s é %s, não tabela, e o log só traz mudança de tabela. Correção: aponte'
        ' `source_object` para uma tabela, ou para uma view comum com `base_tables`'
        % (fonte.nome, _com_artigo(fonte.tipo))
    )


def _recusa(alvo: DatasetVivo, base: TabelaBase, fonte: Objeto, catalogo: Catalogo) -> str | None:
    """O que está errado numa tabela base do dataset (no catálogo), ou None."""
    nome = catalogo.nomear(base.nome)
    tabela = catalogo.objetos.get(nome)
    if tabela is None:
        return (
            'dataset %s: `base_tables` lista %s, que não existe na origem (ou o login %s'
            ' não a vê)%s. Corrija o nome em `base_tables`.'
            % (alvo.nome, base.nome, catalogo.login, _o_que_a_view_le(fonte, catalogo))
        )
    if tabela.tipo != TABELA:
        return (
            'dataset %s: `base_tables` lista %s, que é %s, não tabela: o log só traz'
            ' mudança de tabela%s. Liste no lugar dela as tabelas que ela lê.'
            % (alvo.nome, tabela.nome, _com_artigo(tabela.tipo), _o_que_a_view_le(tabela, catalogo))
        )
    if base.coluna not in tabela.colunas:
        return _recusa_da_coluna(alvo, base, tabela)
    if fonte.tipo != VIEW or not catalogo.dependencias or nome == catalogo.nomear(fonte.nome):
        return None
    lidas, opaca = tabelas_lidas(catalogo.nomear(fonte.nome), catalogo)
    if nome in lidas or opaca:
        return None
    return (
        'dataset %s: a view %s não lê a tabela %s de `base_tables` (ela lê %s): a'
        ' mudança nessa tabela não mexe no dataset, e a das tabelas que a view lê'
        ' não seria vista. Corrija `base_tables` com as tabelas que a view lê.'
        % (alvo.nome, fonte.nome, tabela.nome, _escritas(lidas))
    )


def _com_artigo(tipo: str) -> str:
    return ('uma %s' if tipo.split()[0] in ('view', 'tabela', 'sequência') else 'um %s') % tipo


def _recusa_da_coluna(alvo: DatasetVivo, base: TabelaBase, tabela: Objeto) -> str:
    parecida = [c for c in sorted(tabela.colunas) if c.lower() == base.coluna.lower()]
    return (
        'dataset %s: a tabela %s (`base_tables`) não tem a coluna %s%s: é por ela que'
        ' a linha mudada chega ao dataset. Corrija %s.'
        % (
            alvo.nome,
            tabela.nome,
            base.coluna,
            ' (lá ela se chama %s)' % parecida[0] if parecida else '',
            'a `key` do dataset, ou dê o item na forma {"table": ..., "column": ...,'
            ' "dataset_column": ...}'
            if base.pela_chave and base.coluna == alvo.chave
            else '`column` do item',
        )
    )


# ------------------------------------------------------------------ os nomes pedidos
def _dividir(nome: str, esquema_padrao: str, minusculas: bool) -> Nome:
    esquema, _, objeto = nome.rpartition('.')
    chave = (esquema or esquema_padrao, objeto)
    return (chave[0].lower(), chave[1].lower()) if minusculas else chave


def _pedidos(alvos: Iterable[DatasetVivo], nomear: Callable[[str], Nome]) -> set[Nome]:
    """Os source_object e as tabelas base de todos os datasets, como chaves do catálogo."""
    nomes: set[Nome] = set()
    for alvo in alvos:
        nomes.add(nomear(alvo.source_object))
        nomes.update(nomear(base.nome) for base in alvo.tabelas_base)
    return nomes


# ------------------------------------------------------------------ PostgreSQL
def catalogo_postgres(conn: ConexaoDoDriver, alvos: list[DatasetVivo]) -> Catalogo:
    """O catálogo dos objetos que `alvos` citam, lido por uma conexão psycopg aberta."""

    def nomear(nome: str) -> Nome:
        return _dividir(nome, 'public', minusculas=False)

    pedidos = sorted(_pedidos(alvos, nomear))
    catalogo = Catalogo(nomear, str(conn.execute('SELECT current_user').fetchone()[0]))
    linhas = conn.execute(
        'SELECT n.nspname, c.relname, c.relkind, c.oid::bigint FROM pg_class c'
        ' JOIN pg_namespace n ON n.oid = c.relnamespace'
        ' JOIN unnest(%s::text[], %s::text[]) AS p(esquema, nome)'
        ' ON p.esquema = n.nspname AND p.nome = c.relname',
        ([e for e, _ in pedidos], [o for _, o in pedidos]),
    ).fetchall()
    colunas: dict[int, set[str]] = {int(linha[3]): set() for linha in linhas}
    for oid, coluna in conn.execute(
        'SELECT attrelid::bigint, attname FROM pg_attribute WHERE attrelid = ANY(%s::oid[])'
        ' AND attnum > 0 AND NOT attisdropped',
        (list(colunas),),
    ).fetchall():
        colunas[int(oid)].add(str(coluna))
    views: dict[int, Nome] = {}
    for esquema, relacao, relkind, oid in linhas:
        tipo = _RELKIND.get(str(relkind), 'relkind %s' % relkind)
        catalogo.objetos[(esquema, relacao)] = Objeto(
            '%s.%s' % (esquema, relacao), tipo, frozenset(colunas[int(oid)])
        )
        catalogo.tipos[(esquema, relacao)] = tipo
        if tipo == VIEW:
            views[int(oid)] = (esquema, relacao)
    _lidas_postgres(conn, views, catalogo)
    return catalogo


def _lidas_postgres(conn: ConexaoDoDriver, views: dict[int, Nome], catalogo: Catalogo) -> None:
    """
    O que cada view lê (pg_rewrite -> pg_depend), nível por nível até as
    tabelas: as relações da regra da view e as funções que ela chama.
    """
    vistas: set[int] = set()
    while views:
        vistas |= set(views)
        seguintes: dict[int, Nome] = {}
        for view, funcao, oid, relkind, esquema, relacao in conn.execute(
            "SELECT r.ev_class::bigint, d.refclassid = 'pg_proc'::regclass, c.oid::bigint,"
            ' c.relkind, n.nspname, c.relname FROM pg_rewrite r'
            " JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid"
            " LEFT JOIN pg_class c ON d.refclassid = 'pg_class'::regclass AND c.oid = d.refobjid"
            ' LEFT JOIN pg_namespace n ON n.oid = c.relnamespace'
            ' WHERE r.ev_class = ANY(%s::oid[]) AND d.refobjid <> r.ev_class'
            " AND d.refclassid IN ('pg_class'::regclass, 'pg_proc'::regclass)",
            (list(views),),
        ).fetchall():
            dona = views[int(view)]
            if funcao:
                catalogo.opacas.add(dona)
                continue
            lida = (str(esquema), str(relacao))
            catalogo.lidas.setdefault(dona, set()).add(lida)
            catalogo.tipos[lida] = _RELKIND.get(str(relkind), str(relkind))
            if relkind == 'v' and int(oid) not in vistas:
                seguintes[int(oid)] = lida
        views = seguintes


def conferir_no_postgres(conn: ConexaoDoDriver, alvos: list[DatasetVivo]) -> Conferencia:
    """`slot_logico`: o catálogo lido pela conexão da captura, e a conferência."""
    return conferir_bases(alvos, catalogo_postgres(conn, alvos))


# ------------------------------------------------------------------ MariaDB / MySQL
def catalogo_mariadb(cursor: CursorDoDriver, banco: str, alvos: list[DatasetVivo]) -> Catalogo:
    """
    O catálogo dos objetos que `alvos` citam, lido por um cursor PyMySQL aberto.
    Os nomes se comparam em minúsculas, como o binlog os casa (`binlog_eventos.tabela`).
    """

    def nomear(nome: str) -> Nome:
        return _dividir(nome, banco, minusculas=True)

    pedidos = _pedidos(alvos, nomear)
    cursor.execute("SELECT SUBSTRING_INDEX(CURRENT_USER(), '@', 1)")
    catalogo = Catalogo(nomear, str(cursor.fetchone()[0]))
    esquemas = sorted({e for e, _ in pedidos})
    lista = ', '.join(['%s'] * len(esquemas))
    cursor.execute(
        'SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_TYPE FROM information_schema.TABLES'
        ' WHERE TABLE_SCHEMA IN (%s)' % lista,
        esquemas,
    )
    achados = {
        (str(e).lower(), str(t).lower()): (str(e), str(t), str(tipo))
        for e, t, tipo in cursor.fetchall()
        if (str(e).lower(), str(t).lower()) in pedidos
    }
    colunas: dict[Nome, set[str]] = {nome: set() for nome in achados}
    if achados:
        cursor.execute(
            'SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS'
            ' WHERE TABLE_SCHEMA IN (%s) AND TABLE_NAME IN (%s)'
            % (lista, ', '.join(['%s'] * len(achados))),
            esquemas + sorted({t for _, t, _ in achados.values()}),
        )
        for e, t, coluna in cursor.fetchall():
            colunas.get((str(e).lower(), str(t).lower()), set()).add(str(coluna))
    for nome, (esquema, tabela, tipo) in achados.items():
        texto = _TIPO_MARIADB.get(tipo.upper(), tipo.lower())
        catalogo.objetos[nome] = Objeto(
            '%s.%s' % (esquema, tabela), texto, frozenset(colunas[nome])
        )
        catalogo.tipos[nome] = texto
    _lidas_mariadb(cursor, esquemas, catalogo)
    return catalogo


def _lidas_mariadb(cursor: CursorDoDriver, esquemas: list[str], catalogo: Catalogo) -> None:
    """
    O que cada view lê, se o servidor tem `information_schema.VIEW_TABLE_USAGE`
    (MySQL 8.0.13+). O MariaDB 10.11 (o desta máquina) não tem: `dependencias` fica False.
    """
    cursor.execute(
        "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'information_schema'"
        " AND TABLE_NAME = 'VIEW_TABLE_USAGE'"
    )
    if not cursor.fetchone()[0]:
        catalogo.dependencias = False
        return
    cursor.execute(
        'SELECT u.VIEW_SCHEMA, u.VIEW_NAME, u.TABLE_SCHEMA, u.TABLE_NAME, t.TABLE_TYPE'
        ' FROM information_schema.VIEW_TABLE_USAGE u LEFT JOIN information_schema.TABLES t'
        ' ON t.TABLE_SCHEMA = u.TABLE_SCHEMA AND t.TABLE_NAME = u.TABLE_NAME'
        ' WHERE u.VIEW_SCHEMA IN (%s)' % ', '.join(['%s'] * len(esquemas)),
        esquemas,
    )
    for view_esquema, view, esquema, tabela, tipo in cursor.fetchall():
        lida = (str(esquema).lower(), str(tabela).lower())
        catalogo.lidas.setdefault((str(view_esquema).lower(), str(view).lower()), set()).add(lida)
        catalogo.tipos[lida] = _TIPO_MARIADB.get(str(tipo).upper(), str(tipo).lower())


def conferir_no_mariadb(
    cursor: CursorDoDriver, banco: str, alvos: list[DatasetVivo]
) -> Conferencia:
    """`binlog`: o catálogo lido pelo cursor da captura, e a conferência."""
    return conferir_bases(alvos, catalogo_mariadb(cursor, banco, alvos))
