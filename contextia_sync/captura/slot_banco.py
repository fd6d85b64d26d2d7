"""
O PostgreSQL do slot lógico: a conexão, o slot como o catálogo o mostra e o que se confere.

O que a captura (`slot_logico.py`) e os comandos do operador
(`comandos_slot.py`) têm igual: a conexão psycopg própria, com o TLS da URL e a
recusa em uma linha de português; o nome do slot e da publicação
(`contextia_<cliente>`); a linha do slot em `pg_replication_slots`
(`SlotNoBanco`); e as conferências que dizem ao DBA o que falta -- wal_level,
o privilégio REPLICATION, a publicação e a REPLICA IDENTITY de cada tabela seguida.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NamedTuple

from contextia_sync.captura.slot_mudancas import tabela_do_nome
from contextia_sync.captura import DatasetVivo
from contextia_sync.erros import ErroConfiguracao

if TYPE_CHECKING:  # o autoteste importa captura/ sem SQLAlchemy
    from sqlalchemy import URL

    from contextia_sync.origem.url import TlsOrigem
    from contextia_sync.tipos import ConexaoDoDriver, Mapa, Tupla

PLUGIN = 'pgoutput'
Tabelas = dict[tuple[str, str], list[DatasetVivo]]


class ErroSlot(ErroConfiguracao):
    """A origem não serve para a estratégia `slot_logico` (o DBA precisa mudar algo)."""


def nome_do_slot(mapa: Mapa) -> str:
    """`contextia_<cliente>`: o que um nome de slot aceita (a-z, 0-9, _, até 63)."""
    cliente = re.sub(r'[^a-z0-9_]+', '_', str(mapa.get('client') or 'ouvinte').lower())
    return ('contextia_' + cliente.strip('_'))[:63]


# ------------------------------------------------------------------ a conexão
def conectar(
    url_texto: str, somente_leitura: bool = True, variavel: str = 'CONTEXTIA_ORIGEM'
) -> ConexaoDoDriver:
    """
    Uma conexão psycopg própria (fora do pool do adaptador), autocommit, com o
    TLS da URL lido como o engine da origem o lê (origem/url.py).

    A captura com a origem fora do ar agora recebe o erro do driver (o ciclo
    tenta de novo); a recusa no TLS, a URL que o libpq não aceita e -- nos
    comandos do operador (`somente_leitura=False`) -- qualquer falha ao conectar
    viram ErroSlot: uma linha em português, com a variável e a correção.
    """
    import psycopg

    from contextia_sync.origem.url import argumentos_psycopg, falha_de_tls, ler_url, tls_da_url

    url = ler_url(url_texto, variavel)
    if url.get_backend_name() != 'postgresql':
        raise ErroSlot(
            'a estratégia `slot_logico` é só para PostgreSQL; %s aponta para %s.'
            ' Use `coluna` (ou `binlog` no MySQL/MariaDB)%s.'
            % (
                variavel,
                url.get_backend_name(),
                ''
                if variavel == 'CONTEXTIA_ORIGEM'
                else ', ou corrija %s para o mesmo PostgreSQL de CONTEXTIA_ORIGEM' % variavel,
            )
        )
    tls = tls_da_url(url, variavel)
    opcoes: dict[str, str | int] = {
        'host': url.host or '127.0.0.1',
        'port': int(url.port or 5432),
        'user': url.username or '',
        'dbname': url.database or '',
        'connect_timeout': 10,
        'application_name': 'contextia-ouvinte',
        **argumentos_psycopg(tls),
    }
    if url.password:
        opcoes['password'] = url.password
    if somente_leitura:
        # Nada aqui escreve: o peek e o advance funcionam numa sessão READ ONLY.
        opcoes['options'] = '-c default_transaction_read_only=on'
    try:
        # As chaves de `opcoes` são só parâmetros do libpq (o **kwargs do connect);
        # o mypy confere um **dict contra todo parâmetro nomeado (autocommit, ...).
        return psycopg.connect(autocommit=True, **opcoes)  # type: ignore[arg-type]
    except psycopg.Error as erro:
        if (
            somente_leitura
            and isinstance(erro, psycopg.OperationalError)
            and not falha_de_tls(erro)
        ):
            raise
        raise ErroSlot(_recusa_da_conexao(url, tls, erro)) from None


def _recusa_da_conexao(url: URL, tls: TlsOrigem, erro: BaseException) -> str:
    """A conexão que não abriu, numa linha: a URL e o driver sem a senha, e a correção."""
    from contextia_sync.erros import resumir
    from contextia_sync.origem.url import correcao_tls, descrever_url, falha_de_tls, mascarar

    correcao = (
        correcao_tls(tls)
        if falha_de_tls(erro)
        else (
            'confira host, porta, usuário e senha em %s e se o banco aceita conexão desta'
            ' máquina' % tls.variavel
        )
    )
    return 'slot_logico: não conectou ao PostgreSQL de %s (%s): %s -- %s. Nada foi feito.' % (
        tls.variavel,
        descrever_url(url),
        resumir(mascarar(erro, url.password), 240),
        correcao,
    )


_tabela = tabela_do_nome


def tabelas_seguidas(alvos: list[DatasetVivo]) -> Tabelas:
    """(esquema, tabela) -> os datasets que a seguem (`base_tables`, padrão o source_object)."""
    tabelas: Tabelas = {}
    for alvo in alvos:
        for base in alvo.tabelas_base:
            tabelas.setdefault(_tabela(base.nome), []).append(alvo)
    return tabelas


def ident(esquema: str, tabela: str) -> str:
    return '"%s"."%s"' % (esquema.replace('"', '""'), tabela.replace('"', '""'))


def conferir_origem(conn: ConexaoDoDriver, usuario_da_captura: bool) -> list[str]:
    """wal_level e o privilégio REPLICATION, cada um com a linha do DBA."""
    problemas: list[str] = []
    versao = int(conn.execute('SHOW server_version_num').fetchone()[0])
    if versao < 100000:
        return [
            'a origem é PostgreSQL %d: a decodificação lógica com o pgoutput pede'
            ' PostgreSQL 10 ou mais novo. Use `coluna`.' % (versao // 10000)
        ]
    nivel = conn.execute('SHOW wal_level').fetchone()[0]
    if nivel != 'logical':
        problemas.append(
            'wal_level=%s na origem: o slot lógico pede wal_level=logical. Peça ao DBA:'
            ' `ALTER SYSTEM SET wal_level = logical;` e REINICIAR o PostgreSQL (é só'
            ' depois do reinício que vale), com max_replication_slots e max_wal_senders'
            ' de pelo menos 1 livre.' % nivel
        )
    usuario, pode = conn.execute(
        'SELECT current_user, rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user'
    ).fetchone()
    if not pode:
        problemas.append(
            'o login %s não tem o privilégio REPLICATION (o slot só se lê com ele). Peça'
            ' ao DBA: `ALTER ROLE %s REPLICATION;` (nenhuma escrita: ler o slot não muda'
            ' dado)%s.'
            % (
                usuario,
                usuario,
                ''
                if usuario_da_captura
                else ', ou rode o comando com CONTEXTIA_ORIGEM_DBA de um login que o tenha',
            )
        )
    return problemas


class SlotNoBanco(NamedTuple):
    """A linha do slot em pg_replication_slots, com o WAL retido (bytes)."""

    plugin: str
    banco: str
    confirmado: str
    reinicio: str
    wal_retido: int | None
    ativo: bool
    wal_status: str | None  # PostgreSQL 13+: 'lost' = invalidado
    wal_seguro: int | None


def ler_slot(conn: ConexaoDoDriver, nome: str) -> SlotNoBanco | None:
    """A linha do slot em pg_replication_slots, com o WAL retido; None se não existe."""
    versao = int(conn.execute('SHOW server_version_num').fetchone()[0])
    extra = ', wal_status, safe_wal_size' if versao >= 130000 else ', NULL, NULL'
    linha = conn.execute(
        'SELECT plugin, database, confirmed_flush_lsn::text, restart_lsn::text,'
        ' pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, active'
        + extra
        + ' FROM pg_replication_slots WHERE slot_name = %s',
        (nome,),
    ).fetchone()
    if linha is None:
        return None
    return SlotNoBanco(*linha)


class _TabelaSeguida(NamedTuple):
    """Uma tabela seguida como o catálogo a mostra: o que as conferências dela leem."""

    esquema: str
    tabela: str
    identidade: str  # relreplident: d(efault), i(ndex), f(ull), n(othing)
    oid: int

    @property
    def nome(self) -> str:
        return '%s.%s' % (self.esquema, self.tabela)


_IDENTIDADES = {'d': 'DEFAULT', 'i': 'USING INDEX', 'n': 'NOTHING'}
"""relreplident como o DBA o escreve no ALTER TABLE."""


def conferir_tabelas(conn: ConexaoDoDriver, tabelas: Tabelas, publicacao: str) -> list[str]:
    """
    Cada tabela seguida: existe, é tabela, está na publicação, e a imagem antiga
    (REPLICA IDENTITY) traz a coluna por onde a linha chega ao dataset (a key,
    ou a do cabeçalho): um DELETE sem ela não diz que linha saiu. A empresa
    não precisa vir: a remoção vai à empresa em que a linha foi entregue (o
    índice de entregas, captura/indice_entregas.py).
    """
    problemas: list[str] = []
    publicadas, existe_pub = _ler_publicacao(conn, publicacao)
    faltam_pub: list[str] = []
    for (esquema, tabela), alvos in sorted(tabelas.items()):
        linha = conn.execute(
            'SELECT c.relkind, c.relreplident, c.oid FROM pg_class c JOIN pg_namespace n'
            ' ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s',
            (esquema, tabela),
        ).fetchone()
        recusa = _recusa_do_catalogo(esquema, tabela, alvos, linha)
        if recusa is not None:
            problemas.append(recusa)
            continue
        seguida = _TabelaSeguida(esquema, tabela, linha[1], linha[2])
        if (esquema, tabela) not in publicadas:
            faltam_pub.append(ident(esquema, tabela))
        if seguida.identidade == 'f':
            continue  # FULL: a imagem antiga traz a linha inteira
        colunas = _colunas_da_identidade(conn, seguida)
        for alvo in alvos:
            falta = _imagem_antiga_sem(seguida, alvo, colunas)
            if falta is not None:
                problemas.append(falta)
    recusa_pub = _recusa_da_publicacao(publicacao, existe_pub, faltam_pub)
    return problemas if recusa_pub is None else problemas + [recusa_pub]


def _ler_publicacao(conn: ConexaoDoDriver, publicacao: str) -> tuple[set[tuple[str, str]], bool]:
    """As (esquema, tabela) que a publicação cobre, e se ela existe."""
    publicadas = {
        (e, t)
        for e, t in conn.execute(
            'SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s',
            (publicacao,),
        ).fetchall()
    }
    existe = (
        conn.execute('SELECT 1 FROM pg_publication WHERE pubname = %s', (publicacao,)).fetchone()
        is not None
    )
    return publicadas, existe


def _recusa_do_catalogo(
    esquema: str, tabela: str, alvos: list[DatasetVivo], linha: Tupla | None
) -> str | None:
    """A tabela que não existe, ou que não é tabela (o slot vê só tabelas); None se serve."""
    nome = '%s.%s' % (esquema, tabela)
    if linha is None:
        return (
            'a tabela %s (seguida por %s) não existe na origem. Corrija'
            ' `base_tables` (ou o `source_object`) no mapeamento.'
            % (nome, ', '.join(a.nome for a in alvos))
        )
    tipo = linha[0]
    if tipo not in ('r', 'p'):
        return (
            '%s (dataset %s) não é tabela (relkind %s): o slot vê TABELAS. Declare'
            ' no dataset `base_tables` com a(s) tabela(s) por trás da view; a view é'
            ' relida pela chave.' % (nome, ', '.join(a.nome for a in alvos), tipo)
        )
    return None


def _colunas_da_identidade(conn: ConexaoDoDriver, seguida: _TabelaSeguida) -> set[str]:
    """As colunas que a imagem antiga traz: as do índice da identidade (nenhuma em NOTHING)."""
    if seguida.identidade not in ('d', 'i'):
        return set()
    return {
        c
        for (c,) in conn.execute(
            'SELECT a.attname FROM pg_index i JOIN pg_attribute a'
            ' ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)'
            ' WHERE i.indrelid = %s AND'
            + (' i.indisprimary' if seguida.identidade == 'd' else ' i.indisreplident'),
            (seguida.oid,),
        ).fetchall()
    }


def _imagem_antiga_sem(seguida: _TabelaSeguida, alvo: DatasetVivo, colunas: set[str]) -> str | None:
    """A coluna da tabela base que a imagem antiga não traz; None se traz."""
    base = alvo.base_seguida((seguida.esquema, seguida.tabela), tabela_do_nome)
    precisa = [base.coluna] if base is not None else [c for c in (alvo.chave,) if c]
    faltam = [c for c in precisa if c not in colunas]
    if not faltam:
        return None
    return (
        'a tabela %s tem REPLICA IDENTITY %s, e a imagem antiga de um DELETE ou'
        ' UPDATE não traz %s (dataset %s): sem ela não se sabe que linha saiu.'
        ' Peça ao DBA: `ALTER TABLE'
        ' %s REPLICA IDENTITY FULL;` (o WAL de UPDATE/DELETE dessa tabela passa'
        ' a levar a linha antiga inteira).'
        % (
            seguida.nome,
            _IDENTIDADES.get(seguida.identidade, seguida.identidade),
            ', '.join(faltam),
            alvo.nome,
            ident(seguida.esquema, seguida.tabela),
        )
    )


def _recusa_da_publicacao(publicacao: str, existe: bool, faltam: list[str]) -> str | None:
    """A publicação que não existe, ou que não cobre todas as tabelas; None se serve."""
    if not existe:
        return (
            'a publicação %s não existe (o slot lê só as tabelas dela). Rode'
            ' `ouvinte.py ... --criar-slot`, que a cria com o slot.' % publicacao
        )
    if faltam:
        return (
            'a publicação %s não cobre %s: a mudança nelas não sairia do banco. Peça ao DBA:'
            ' `ALTER PUBLICATION %s ADD TABLE %s;` e rode a varredura depois (o que mudou'
            ' antes disso não está no slot).'
            % (publicacao, ', '.join(faltam), publicacao, ', '.join(faltam))
        )
    return None
