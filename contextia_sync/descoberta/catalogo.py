"""
O catalogo da origem, refletido pelo inspector do SQLAlchemy, em registros tipados.

    refletir(conn, esquemas, escolher)    tabelas e views de cada esquema, com
                                          colunas, tipos, chave primaria,
                                          unicas e indices
    conferir_unica(conn, objeto, coluna, escopo)
                                          a chave adivinhada de uma view e
                                          unica e nao nula dentro de cada escopo?

A conexao e a da sessao somente leitura do adaptador generico
(`Origem.sessao()`): a trava e o tempo maximo por consulta valem aqui tambem.
A reflexao usa as chamadas em lote do inspector (`get_multi_*`): no PostgreSQL
sao quatro consultas ao catalogo para o esquema inteiro, em vez de quatro por
tabela. Se o lote falha (MySQL/MariaDB sem SHOW VIEW para refletir uma view), o
esquema e refletido objeto a objeto, e a view sem SHOW VIEW tem as colunas pelo
`SELECT * ... WHERE 1 = 0` do adaptador.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection
from sqlalchemy.engine.reflection import ObjectKind

from contextia_sync.descoberta import ErroDescoberta
from contextia_sync.origem.consultas import ColunaLida, colunas_pelo_select_mysql
from contextia_sync.origem.valores import DATA_SQLITE, TipoDaColuna

if TYPE_CHECKING:
    from sqlalchemy.engine import Dialect
    from sqlalchemy.engine.interfaces import (
        ReflectedColumn,
        ReflectedIndex,
        ReflectedPrimaryKeyConstraint,
        ReflectedUniqueConstraint,
    )
    from sqlalchemy.engine.reflection import Inspector

# O que o SQLAlchemy avisa ao refletir um tipo que ele nao conhece (point,
# geometry, xml): o nome do tipo so aparece aqui.
_TIPO_DESCONHECIDO = re.compile(r"Did not recognize type '([^']+)' of column '([^']+)'")


@dataclass(frozen=True)
class Coluna:
    """Uma coluna como o catálogo a mostra."""

    nome: str
    tipo: TipoDaColuna
    """O tipo SQLAlchemy refletido (o DOMAIN do PostgreSQL já trocado pelo tipo de base)."""
    nula: bool
    tipo_sqlite: str | None = None
    """SQLite: 'datetime'/'date' quando o tipo declarado guarda data em TEXT."""
    desconhecido: str | None = None
    """O nome do tipo que o SQLAlchemy não reconheceu ('point', 'geometry')."""
    declarado: str = ''
    """O tipo no SQL do banco ('TEXT[]', 'SET(...)'), para o operador reconhecer."""

    @property
    def texto_tipo(self) -> str:
        """O tipo como o operador o reconhece ('TEXT[]', 'SET', 'point')."""
        return self.desconhecido or self.declarado or type(self.tipo).__name__


@dataclass(frozen=True)
class Indice:
    """Um índice (ou a chave primária, ou uma única): as colunas na ordem."""

    nome: str | None
    colunas: tuple[str, ...]
    unico: bool


@dataclass
class Objeto:
    """Uma tabela ou view da origem."""

    esquema: str | None
    """None: o esquema padrão da conexão (o nome vai sem prefixo no mapeamento)."""
    nome: str
    view: bool
    colunas: list[Coluna] = field(default_factory=list)
    chave_primaria: tuple[str, ...] = ()
    unicas: list[tuple[str, ...]] = field(default_factory=list)
    indices: list[Indice] = field(default_factory=list)
    problema: str | None = None
    """A reflexão falhou (permissão): o objeto fica fora do esqueleto com isto."""

    @property
    def source_object(self) -> str:
        """Como o mapeamento o nomeia: NOME ou ESQUEMA.NOME."""
        return '%s.%s' % (self.esquema, self.nome) if self.esquema else self.nome

    @property
    def genero(self) -> str:
        return 'view' if self.view else 'tabela'

    def coluna(self, nome: str) -> Coluna | None:
        """A coluna pelo nome, exato e depois sem caixa (como o adaptador resolve)."""
        for coluna in self.colunas:
            if coluna.nome == nome:
                return coluna
        minusculo = nome.lower()
        for coluna in self.colunas:
            if coluna.nome.lower() == minusculo:
                return coluna
        return None


@dataclass
class Catalogo:
    """O que a reflexão trouxe, na ordem (esquema, nome)."""

    dialeto: str
    objetos: list[Objeto]
    esquema_padrao: str | None

    def achar(self, nome: str) -> Objeto | None:
        """Um objeto por NOME ou ESQUEMA.NOME, exato e depois sem caixa."""
        esquema, _, proprio = nome.rpartition('.')
        for sem_caixa in (False, True):
            for objeto in self.objetos:
                if _mesmo(objeto.nome, proprio, sem_caixa) and (
                    not esquema
                    or _mesmo(objeto.esquema or self.esquema_padrao or '', esquema, sem_caixa)
                ):
                    return objeto
        return None


def _mesmo(a: str, b: str, sem_caixa: bool) -> bool:
    return a.lower() == b.lower() if sem_caixa else a == b


def _listar(inspetor: Inspector, esquema: str | None) -> list[tuple[str, bool]]:
    """(nome, view?) de cada tabela, view e view materializada do esquema."""
    nomes = [(n, False) for n in inspetor.get_table_names(schema=esquema)]
    nomes += [(n, True) for n in inspetor.get_view_names(schema=esquema)]
    try:
        nomes += [(n, True) for n in inspetor.get_materialized_view_names(schema=esquema)]
    except NotImplementedError:
        pass  # so o PostgreSQL e o Oracle as tem
    return nomes


def refletir(
    conn: Connection, esquemas: Sequence[str | None], escolher: Callable[[str | None, str], bool]
) -> Catalogo:
    """
    O catálogo dos `esquemas` (None = o padrão), só com os objetos que `escolher`
    aceita (os padrões de --incluir/--excluir, e o cadastro).
    """
    inspetor = sa.inspect(conn)
    dialeto = conn.dialect.name
    padrao = inspetor.default_schema_name
    objetos: list[Objeto] = []
    existentes = inspetor.get_schema_names() if any(esquemas) else []
    for esquema in esquemas:
        # O esquema pedido que e o padrao vai sem prefixo no mapeamento, como o
        # operador escreveria.
        proprio = (
            None
            if esquema is None or (padrao and esquema.lower() == padrao.lower())
            else _esquema_real(esquema, existentes)
        )
        nomes = [(n, v) for n, v in _listar(inspetor, proprio) if escolher(proprio, n)]
        if not nomes:
            continue
        objetos += _refletir_esquema(conn, inspetor, proprio, nomes)
    if dialeto == 'oracle':
        # O SQLAlchemy mostra o nome sem aspas do Oracle em minusculas; o
        # mapeamento o escreve como o banco o guarda (maiusculas).
        _desnormalizar(conn.dialect, objetos)
    objetos.sort(key=lambda o: ((o.esquema or '').lower(), o.nome.lower()))
    return Catalogo(dialeto, objetos, padrao)


def _esquema_real(pedido: str, existentes: Sequence[str]) -> str:
    """O esquema como o banco o guarda (`ctx` pedido, `CTX` criado entre aspas)."""
    for sem_caixa in (False, True):
        for nome in existentes:
            if _mesmo(nome, pedido, sem_caixa):
                return nome
    raise ErroDescoberta(
        '--esquema %s: a origem não tem esse esquema (ou este login não o vê). Os que ela'
        ' mostra: %s.' % (pedido, ', '.join(sorted(existentes)[:30]) or '(nenhum)')
    )


class _OpcoesDoLote(TypedDict):
    """O que as chamadas em lote do inspector (`get_multi_*`) recebem aqui."""

    schema: str | None
    filter_names: list[str]
    kind: ObjectKind


def _refletir_esquema(
    conn: Connection, inspetor: Inspector, esquema: str | None, nomes: list[tuple[str, bool]]
) -> list[Objeto]:
    filtro = [n for n, _ in nomes]
    opcoes = _OpcoesDoLote(schema=esquema, filter_names=filtro, kind=ObjectKind.ANY)
    desconhecidos: dict[str, str] = {}
    try:
        with warnings.catch_warnings(record=True) as avisos:
            warnings.simplefilter('always', sa_exc.SAWarning)
            colunas = inspetor.get_multi_columns(**opcoes)
            chaves = inspetor.get_multi_pk_constraint(**opcoes)
            unicas = inspetor.get_multi_unique_constraints(**opcoes)
            indices = inspetor.get_multi_indexes(**opcoes)
        desconhecidos = _desconhecidos(avisos)
    except sa_exc.DBAPIError:
        # Um objeto que este login nao pode refletir derruba o lote inteiro:
        # objeto a objeto, o problema fica so com quem o tem.
        if conn.in_transaction():
            conn.rollback()  # PostgreSQL: a transacao abortada nao le mais
        return [_refletir_um(conn, esquema, nome, view) for nome, view in nomes]
    saida = []
    for nome, view in nomes:
        chave = (esquema, nome)
        objeto = Objeto(esquema, nome, view)
        objeto.colunas = [
            _coluna(info, conn.dialect, desconhecidos) for info in colunas.get(chave, ())
        ]
        _restricoes(objeto, chaves.get(chave), unicas.get(chave, ()), indices.get(chave, ()))
        saida.append(objeto)
    return saida


def _refletir_um(conn: Connection, esquema: str | None, nome: str, view: bool) -> Objeto:
    inspetor = sa.inspect(conn)  # novo: o anterior guardou o erro no cache
    objeto = Objeto(esquema, nome, view)
    desconhecidos: dict[str, str] = {}
    infos: list[ReflectedColumn] | list[ColunaLida]
    try:
        with warnings.catch_warnings(record=True) as avisos:
            warnings.simplefilter('always', sa_exc.SAWarning)
            infos = inspetor.get_columns(nome, schema=esquema)
        desconhecidos = _desconhecidos(avisos)
    except sa_exc.DBAPIError as erro:
        if conn.in_transaction() and conn.dialect.name != 'mysql':
            conn.rollback()
        if conn.dialect.name != 'mysql':
            objeto.problema = _primeira_linha(erro)
            return objeto
        # MySQL/MariaDB: refletir view pede SHOW VIEW, que um login so-SELECT
        # nao tem (nem deve ter); o SELECT vazio do adaptador da nomes e tipos.
        try:
            infos = colunas_pelo_select_mysql(conn, esquema, nome)
        except sa_exc.DBAPIError as erro_select:
            objeto.problema = _primeira_linha(erro_select)
            return objeto
        objeto.colunas = [_coluna({**info, 'nullable': True}, conn.dialect, {}) for info in infos]
        return objeto
    objeto.colunas = [_coluna(info, conn.dialect, desconhecidos) for info in infos]
    try:
        _restricoes(
            objeto,
            inspetor.get_pk_constraint(nome, schema=esquema),
            inspetor.get_unique_constraints(nome, schema=esquema),
            inspetor.get_indexes(nome, schema=esquema),
        )
    except (sa_exc.DBAPIError, NotImplementedError):
        if conn.in_transaction() and conn.dialect.name != 'mysql':
            conn.rollback()
    return objeto


def _primeira_linha(erro: BaseException) -> str:
    origem = getattr(erro, 'orig', None) or erro
    linhas = str(origem).strip().splitlines()
    return '%s: %s' % (type(origem).__name__, linhas[0] if linhas else '')


def _desconhecidos(avisos: Iterable[warnings.WarningMessage]) -> dict[str, str]:
    """{coluna: nome do tipo} dos avisos de tipo não reconhecido."""
    saida: dict[str, str] = {}
    for aviso in avisos:
        achado = _TIPO_DESCONHECIDO.search(str(aviso.message))
        if achado:
            saida.setdefault(achado.group(2), achado.group(1))
    return saida


class _ColunaDoSelect(ColunaLida):
    """A coluna do SELECT vazio do MySQL (`colunas_pelo_select_mysql`), dada como anulável."""

    nullable: bool


def _coluna(
    info: ReflectedColumn | _ColunaDoSelect, dialeto: Dialect, desconhecidos: dict[str, str]
) -> Coluna:
    tipo = info['type']
    base = getattr(tipo, 'data_type', None)
    if base is not None and type(tipo).__name__ == 'DOMAIN':
        tipo = base  # o DOMAIN do PostgreSQL vale pelo tipo de base
    tipo_sqlite = None
    if dialeto.name == 'sqlite':
        try:
            de_data = DATA_SQLITE.match(str(tipo))
        except Exception:  # noqa: BLE001 - tipo sem texto
            de_data = None
        if de_data:
            tipo_sqlite = 'date' if de_data.group(1).upper() == 'DATE' else 'datetime'
    desconhecido = desconhecidos.get(info['name']) if isinstance(tipo, sa.types.NullType) else None
    try:
        declarado = tipo.compile(dialect=dialeto)
    except Exception:  # noqa: BLE001 - so para exibir
        declarado = type(tipo).__name__
    if len(declarado) > 40:
        declarado = declarado.split('(')[0]  # SET('a', 'b', ...) -> SET
    return Coluna(
        info['name'], tipo, bool(info.get('nullable', True)), tipo_sqlite, desconhecido, declarado
    )


def _restricoes(
    objeto: Objeto,
    chave: ReflectedPrimaryKeyConstraint | None,
    unicas: Iterable[ReflectedUniqueConstraint],
    indices: Iterable[ReflectedIndex],
) -> None:
    objeto.chave_primaria = tuple((chave.get('constrained_columns') if chave else None) or ())
    vistas: set[tuple[str, ...]] = set()
    for unica in unicas:
        colunas = tuple(c for c in unica.get('column_names') or () if c)
        if colunas and colunas not in vistas:
            vistas.add(colunas)
            objeto.unicas.append(colunas)
    for indice in indices:
        # Indice de expressao (lower(x)) traz None no lugar da coluna: nao
        # cobre a sonda, que compara a coluna crua.
        colunas = tuple(c if c else '' for c in indice.get('column_names') or ())
        unico = bool(indice.get('unique'))
        objeto.indices.append(Indice(indice.get('name'), colunas, unico))
        if unico and colunas and all(colunas) and colunas not in vistas:
            vistas.add(colunas)
            objeto.unicas.append(colunas)


def _desnormalizar(dialeto: Dialect, objetos: list[Objeto]) -> None:
    def nome(texto: str | None) -> str | None:
        return dialeto.denormalize_name(texto) if texto else texto

    for objeto in objetos:
        objeto.nome = nome(objeto.nome) or objeto.nome
        objeto.esquema = nome(objeto.esquema)
        objeto.colunas = [
            Coluna(
                nome(c.nome) or c.nome, c.tipo, c.nula, c.tipo_sqlite, c.desconhecido, c.declarado
            )
            for c in objeto.colunas
        ]
        objeto.chave_primaria = tuple(nome(c) or c for c in objeto.chave_primaria)
        objeto.unicas = [tuple(nome(c) or c for c in u) for u in objeto.unicas]
        objeto.indices = [
            Indice(i.nome, tuple(nome(c) or c for c in i.colunas), i.unico) for i in objeto.indices
        ]


# ---------------------------------------------------------------------------
# A chave adivinhada de uma view
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Conferencia:
    """O que a origem disse da coluna candidata a key de uma view."""

    linhas: int
    nulas: int
    repetida: bool
    """Algum valor aparece duas vezes dentro do mesmo escopo."""

    @property
    def serve(self) -> bool:
        return self.linhas > 0 and self.nulas == 0 and not self.repetida


def conferir_unica(
    conn: Connection, objeto: Objeto, coluna: str, escopo: str | None
) -> Conferencia:
    """
    A coluna e unica e nao nula dentro de cada escopo? Le a view inteira (uma
    contagem e um GROUP BY), com o tempo maximo por consulta da sessao.

    Dentro do escopo, nao na view inteira: cada empresa e um projeto, e a view
    que repete o cadastro compartilhado para cada filial (a SA1 do Protheus)
    tem a mesma chave uma vez por filial -- o que e certo.
    """
    nomes = [coluna] + ([escopo] if escopo and escopo != coluna else [])
    tabela = sa.table(objeto.nome, *[sa.column(n) for n in nomes], schema=objeto.esquema)
    alvo = tabela.c[coluna]
    linhas, preenchidas = conn.execute(
        sa.select(sa.func.count(), sa.func.count(alvo)).select_from(tabela)
    ).one()
    grupos = [alvo] + ([tabela.c[nomes[1]]] if len(nomes) > 1 else [])
    repetidas = (
        sa.select(sa.literal(1))
        .select_from(tabela)
        .where(alvo.is_not(None))
        .group_by(*grupos)
        .having(sa.func.count() > 1)
        .limit(1)
    )
    repetida = conn.execute(repetidas).first() is not None
    return Conferencia(int(linhas), int(linhas) - int(preenchidas), repetida)
