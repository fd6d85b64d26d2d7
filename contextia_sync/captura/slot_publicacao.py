"""
O que a publicação do slot lógico incluiria, e se o ERP continua escrevendo depois dela.

Publicar uma tabela muda o ERP: o PostgreSQL passa a recusar o UPDATE e o
DELETE do próprio ERP numa tabela publicada sem REPLICA IDENTITY usável
("cannot update table ... because it does not have a replica identity and
publishes updates"). E a publicação inclui mais do que o mapeamento nomeia:

- as filhas por herança (`INHERITS`, pg_inherits) de cada tabela, a fundo --
  o `FOR TABLE pai` as põe na publicação uma a uma, na hora (as criadas depois
  ficam de fora);
- as partições declarativas de uma tabela particionada, a fundo, também as
  criadas depois (implícitas: só a raiz está em pg_publication_rel).

Medido no PostgreSQL 15 (tests/test_criar_slot_particoes.py): com
`publish_via_partition_root = true` a mudança sai com o nome da RAIZ (o que o
decodificador procura), mas a partição onde a linha mora ainda precisa de
identidade própria -- o UPDATE na raiz falha na partição, e `ALTER TABLE raiz
REPLICA IDENTITY FULL` não desce a ela. A tabela particionada em si não tem
linhas e não é conferida (PostgreSQL 13.9/14.6/15+; antes disso era, por
engano, e então é conferida também: `_PARTICIONADA_CONFERIDA`).

Daqui saem: `ler_inclusao` (a caminhada no catálogo, uma consulta),
`recusas` (o que impede de publicar, uma frase por tabela, com as saídas do
DBA) e `texto_da_recusa` (a mensagem inteira do `--criar-slot` recusado).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from contextia_sync.captura.slot_banco import ident

if TYPE_CHECKING:  # tipos.py importa o sqlalchemy, que o autoteste não tem
    from contextia_sync.tipos import ConexaoDoDriver

_IDENTIDADES = {'d': 'DEFAULT', 'i': 'USING INDEX', 'n': 'NOTHING', 'f': 'FULL'}

# Cada tabela seguida e o que herda dela, a fundo (pg_inherits liga também as
# partições), com o que a conferência e a recusa leem: a identidade usável
# (FULL; USING INDEX com o índice marcado; DEFAULT com chave primária) e o
# índice único em colunas NOT NULL que o DBA pode dar como identidade.
_SQL_INCLUSAO = """
WITH RECURSIVE arvore(oid, pai, raiz, nivel) AS (
    SELECT c.oid, 0::oid, c.oid, 0
      FROM unnest(%s::text[], %s::text[]) AS s(esquema, tabela)
      JOIN pg_namespace n ON n.nspname = s.esquema
      JOIN pg_class c ON c.relnamespace = n.oid AND c.relname = s.tabela
    UNION ALL
    SELECT i.inhrelid, i.inhparent, a.raiz, a.nivel + 1
      FROM pg_inherits i JOIN arvore a ON i.inhparent = a.oid
)
SELECT a.oid, a.nivel, n.nspname, c.relname, c.relkind, c.relreplident,
       c.relispartition, c.relpersistence, pn.nspname, pc.relname,
       rn.nspname || '.' || rc.relname,
       CASE c.relreplident
           WHEN 'f' THEN true
           WHEN 'i' THEN EXISTS (SELECT 1 FROM pg_index x
                                 WHERE x.indrelid = c.oid AND x.indisreplident)
           WHEN 'd' THEN EXISTS (SELECT 1 FROM pg_index x
                                 WHERE x.indrelid = c.oid AND x.indisprimary)
           ELSE false
       END,
       (SELECT ic.relname FROM pg_index x JOIN pg_class ic ON ic.oid = x.indexrelid
         WHERE x.indrelid = c.oid AND x.indisunique AND x.indimmediate AND x.indisvalid
           AND x.indpred IS NULL AND x.indexprs IS NULL
           AND NOT EXISTS (SELECT 1 FROM pg_attribute t WHERE t.attrelid = c.oid
                           AND t.attnum = ANY (x.indkey) AND NOT t.attnotnull)
         ORDER BY x.indisprimary DESC, x.indnatts, ic.relname LIMIT 1)
  FROM arvore a
  JOIN pg_class c ON c.oid = a.oid
  JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_class pc ON pc.oid = a.pai
  LEFT JOIN pg_namespace pn ON pn.oid = pc.relnamespace
  JOIN pg_class rc ON rc.oid = a.raiz
  JOIN pg_namespace rn ON rn.oid = rc.relnamespace
 ORDER BY a.nivel DESC, n.nspname, c.relname
"""


class Incluida(NamedTuple):
    """Uma tabela que a publicação incluiria, como o catálogo a mostra."""

    oid: int
    esquema: str
    tabela: str
    tipo: str  # relkind: 'r' tabela, 'p' particionada (outros: só se seguida)
    identidade: str  # relreplident: d, i, n, f
    seguida: bool  # uma chave de tabelas_seguidas (o mapeamento a nomeia)
    particao: bool  # relispartition: partição declarativa
    pai: str | None  # 'esquema.tabela' de quem ela herda (None: a seguida do topo)
    raiz: str  # a seguida de onde a caminhada chegou a ela
    usavel: bool  # a identidade serve ao UPDATE/DELETE
    indice: str | None  # um índice único em colunas NOT NULL, para o DBA

    @property
    def nome(self) -> str:
        return '%s.%s' % (self.esquema, self.tabela)

    @property
    def citada(self) -> str:
        return ident(self.esquema, self.tabela)


class Inclusao(NamedTuple):
    """O que a publicação incluiria: o que se lista nela e o que vem junto."""

    seguidas_ausentes: list[tuple[str, str]]  # no mapeamento, não no banco
    incluidas: list[Incluida]  # tudo o que ela publicaria (as partições também)
    explicitas: list[Incluida]  # o que vai no FOR TABLE ONLY (as partições não)

    @property
    def via_raiz(self) -> bool:
        """Há tabela particionada: a mudança tem de sair com o nome da raiz."""
        return any(t.tipo == 'p' for t in self.explicitas)


class Problema(NamedTuple):
    """Uma tabela que impede de publicar: a seguida de onde veio e a frase para o DBA."""

    raiz: str
    texto: str


def ler_inclusao(conn: ConexaoDoDriver, seguidas: Iterable[tuple[str, str]]) -> Inclusao:
    """As tabelas seguidas e o que herda delas, a fundo: o que a publicação incluiria."""
    chaves = sorted(set(seguidas))
    linhas = conn.execute(
        _SQL_INCLUSAO, ([e for e, _ in chaves], [t for _, t in chaves])
    ).fetchall()
    # A mais funda primeiro: a seguida que herda de outra seguida diz de quem herda,
    # e a raiz dela é a seguida de cima (é essa que sai do mapeamento para a varredura).
    vistas: dict[int, Incluida] = {}
    for linha in linhas:
        oid, nivel, esquema, tabela, tipo, identidade, particao, persistencia = linha[:8]
        seguida = (esquema, tabela) in chaves
        if oid in vistas or not _publicavel(nivel, seguida, tipo, persistencia):
            continue
        pai = None if nivel == 0 else '%s.%s' % (linha[8], linha[9])
        vistas[oid] = Incluida(
            oid, esquema, tabela, tipo, identidade, seguida, particao, pai, *linha[10:13]
        )
    incluidas = sorted(vistas.values(), key=lambda t: (t.esquema, t.tabela))
    achadas = {(t.esquema, t.tabela) for t in incluidas if t.seguida}
    return Inclusao(
        seguidas_ausentes=[c for c in chaves if c not in achadas],
        incluidas=incluidas,
        explicitas=[t for t in incluidas if t.seguida or not t.particao],
    )


def _publicavel(nivel: int, seguida: bool, tipo: str, persistencia: str) -> bool:
    """
    A seguida sempre conta (a que não é tabela é recusada); a descendente só se
    a publicação a leva: tabela comum (não a estrangeira) e registrada no WAL.
    """
    if nivel == 0 or seguida:
        return True
    return tipo in ('r', 'p') and persistencia == 'p'


def _particionada_conferida(versao: int) -> bool:
    """Antes do 13.9 e do 14.6, o UPDATE conferia a identidade da particionada também."""
    return versao < 130009 or 140000 <= versao < 140006


def recusas(inclusao: Inclusao, versao: int) -> list[Problema]:
    """O que impede de publicar: uma frase por tabela, com as saídas do DBA; [] se nada."""
    problemas = [
        Problema('%s.%s' % chave, _recusa_ausente(*chave)) for chave in inclusao.seguidas_ausentes
    ]
    for tabela in inclusao.incluidas:
        if tabela.seguida and tabela.tipo not in ('r', 'p'):
            problemas.append(Problema(tabela.raiz, _recusa_nao_tabela(tabela)))
            continue
        if tabela.tipo == 'p' and tabela.seguida and versao < 130000:
            problemas.append(
                Problema(tabela.raiz, _recusa_particionada_antiga(tabela, versao, inclusao))
            )
        if not tabela.usavel and (tabela.tipo == 'r' or _particionada_conferida(versao)):
            problemas.append(Problema(tabela.raiz, _recusa_identidade(tabela)))
        if not tabela.seguida and not tabela.particao:
            problemas.append(Problema(tabela.raiz, _recusa_filha_nao_seguida(tabela)))
    return problemas


def _recusa_ausente(esquema: str, tabela: str) -> str:
    return (
        '%s.%s não existe na origem (o mapeamento a segue: `base_tables`, ou o'
        ' `source_object`). Corrija o nome no mapeamento.' % (esquema, tabela)
    )


def _recusa_nao_tabela(tabela: Incluida) -> str:
    return (
        '%s não é tabela (relkind %s): a publicação só leva tabelas. Declare no'
        ' dataset `base_tables` com a(s) tabela(s) por trás da view.' % (tabela.nome, tabela.tipo)
    )


def _de_onde(tabela: Incluida) -> str:
    if tabela.pai is None:
        return 'seguida pelo mapeamento'
    return ('partição de %s' if tabela.particao else 'herda de %s') % tabela.pai


def _aspas(nome: str) -> str:
    return '"%s"' % nome.replace('"', '""')


def _recusa_identidade(tabela: Incluida) -> str:
    """A tabela publicada em que o UPDATE e o DELETE do ERP falhariam, e as saídas do DBA."""
    sem = {'d': ' sem chave primária', 'i': ' sem o índice'}.get(tabela.identidade, '')
    full = (
        '`ALTER TABLE %s REPLICA IDENTITY FULL;` (a imagem antiga leva a linha inteira:'
        ' mais WAL em UPDATE e DELETE)' % tabela.citada
    )
    if tabela.indice is not None:
        saidas = (
            'UMA destas: `ALTER TABLE %s REPLICA IDENTITY USING INDEX %s;` (a imagem antiga'
            ' leva só as colunas desse índice único: elas precisam trazer a coluna por'
            ' onde a linha chega ao dataset, a key ou a do cabeçalho) ou %s'
            % (tabela.citada, _aspas(tabela.indice), full)
        )
    else:
        saidas = (
            '%s; o USING INDEX pede um índice único em colunas NOT NULL, que ela não tem' % full
        )
    particao = (
        ' Na própria partição: o ALTER TABLE na raiz não desce às partições (uma PRIMARY KEY'
        ' criada na raiz desce, se contiver as colunas da partição), e o'
        ' publish_via_partition_root só muda o nome com que a mudança sai.'
        if tabela.particao
        else ''
    )
    return (
        '%s (%s): REPLICA IDENTITY %s%s; publicada, o UPDATE e o DELETE do ERP nela'
        ' falhariam. Peça ao DBA %s.%s'
        % (
            tabela.nome,
            _de_onde(tabela),
            _IDENTIDADES.get(tabela.identidade, tabela.identidade),
            sem,
            saidas,
            particao,
        )
    )


def _recusa_filha_nao_seguida(tabela: Incluida) -> str:
    return (
        '%s herda de %s (INHERITS) e entraria na publicação, mas o mapeamento não a'
        ' segue: a mudança nela sai do banco com o nome dela, e o ouvinte a ignoraria'
        ' (a linha só chegaria na varredura). Acrescente "%s" a `base_tables` do'
        ' dataset que segue %s, junto com ela.' % (tabela.nome, tabela.pai, tabela.nome, tabela.pai)
    )


def _recusa_particionada_antiga(tabela: Incluida, versao: int, inclusao: Inclusao) -> str:
    particoes = [t.nome for t in inclusao.incluidas if t.pai == tabela.nome and t.particao]
    return (
        '%s é tabela particionada e o PostgreSQL %d (anterior ao 13) não a põe numa'
        ' publicação. Liste em `base_tables` as partições no lugar dela (%s), ou use'
        ' a estratégia `coluna`.' % (tabela.nome, versao // 10000, ', '.join(particoes) or '-')
    )


def texto_da_recusa(publicacao: str, problemas: list[Problema]) -> str:
    """A recusa inteira do `--criar-slot`: nada criado, cada tabela, e a saída pela varredura."""
    return (
        '--criar-slot recusado: NADA foi criado (nem a publicação %s, nem o slot).'
        ' Antes de publicar, cada tabela que a publicação incluiria (as seguidas, as'
        ' filhas por herança e as partições, a fundo) foi conferida:\n%s\n'
        'Ou deixe a tabela só para a varredura: tire %s de `base_tables` no'
        ' mapeamento, ou use outra estratégia (`coluna`). Depois rode `--criar-slot`'
        ' de novo.'
        % (
            publicacao,
            '\n'.join('  - ' + p.texto for p in problemas),
            ', '.join(sorted({p.raiz for p in problemas})),
        )
    )
