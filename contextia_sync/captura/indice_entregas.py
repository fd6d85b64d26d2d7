"""
O índice do que foi entregue, por dataset, das capturas por log: key -> empresa.

Uma remoção vai à empresa em que a linha FOI ENTREGUE, e o log não sabe qual é
(a linha de um item de nota não tem a coluna da empresa; a empresa vem do
cabeçalho, pela view). Ler a linha que não existe mais também não diz. Então
cada entrega confirmada anota aqui a key, a empresa, o resumo do conteúdo (a
mudança do cabeçalho reenvia só o item que mudou) e os valores das colunas por
onde um cabeçalho chega ao item (`via`: a nota apagada acha os itens que
tinha). É o par, para as estratégias por log, do conjunto entregue que a
`reconciliacao` guarda.

Mora em `<estado>/indices/<dataset>.sqlite3` (sqlite3 da biblioteca padrão:
busca por key em milhões de linhas sem ler tudo, e a troca de uma empresa
inteira numa transação). Nasce da origem (`semear`: o conjunto de key, empresa
e colunas `via` lido pela view) na primeira leitura do dataset e depois de
cada carga completa das empresas que ela fechou (a leitura feita ANTES da
carga, como a da `reconciliacao`: o que mudou durante a carga está no spool e
vem por cima).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # tipos.py importa o sqlalchemy, que o autoteste não tem
    from contextia_sync.tipos import ValorDoBanco

PASTA_INDICES = 'indices'

_ESQUEMA = (
    # A key é única DENTRO da empresa (a do Protheus é por filial): o par é a identidade.
    'CREATE TABLE IF NOT EXISTS entregue ('
    ' chave TEXT NOT NULL, escopo TEXT NOT NULL, valor TEXT NOT NULL, resumo TEXT,'
    ' PRIMARY KEY (chave, escopo))',
    'CREATE TABLE IF NOT EXISTS via ('
    ' coluna TEXT NOT NULL, valor TEXT NOT NULL, chave TEXT NOT NULL, escopo TEXT NOT NULL,'
    ' PRIMARY KEY (coluna, valor, chave, escopo))',
    'CREATE INDEX IF NOT EXISTS via_por_chave ON via (chave, escopo)',
    'CREATE TABLE IF NOT EXISTS semeado (em TEXT NOT NULL)',
)
_LOTE = 500  # parâmetros por consulta: abaixo do limite do SQLite antigo (999)


def texto_da_chave(valor: object) -> str:
    """A key como o índice (e o spool) a compara: o texto dela."""
    return str(valor)


def resumo_da_linha(linha: Mapping[str, ValorDoBanco]) -> str:
    """O resumo do conteúdo de uma linha: igual se nada que o Contextia vê mudou."""
    texto = json.dumps(linha, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.blake2b(texto.encode('utf-8'), digest_size=16).hexdigest()


@dataclass(frozen=True)
class Entregue:
    """Uma key entregue a uma empresa: o valor como foi (para remover) e o resumo."""

    valor: ValorDoBanco
    escopo: str
    resumo: str | None


@dataclass(frozen=True)
class Anotacao:
    """Uma linha entregue: a key, a empresa, o resumo e os valores `via` dela."""

    valor: ValorDoBanco
    escopo: str
    resumo: str | None
    via: Mapping[str, ValorDoBanco]


class IndiceDeEntregas:
    """O índice de um dataset (ver o topo do módulo). Um processo escreve: o ouvinte."""

    def __init__(self, pasta_estado: str, dataset: str) -> None:
        pasta = os.path.join(pasta_estado, PASTA_INDICES)
        os.makedirs(pasta, exist_ok=True)
        self.caminho = os.path.join(pasta, '%s.sqlite3' % dataset)
        self._conn = sqlite3.connect(self.caminho, isolation_level=None)
        self._conn.execute('PRAGMA journal_mode=WAL')
        self._conn.execute('PRAGMA synchronous=FULL')
        for comando in _ESQUEMA:
            self._conn.execute(comando)

    def fechar(self) -> None:
        self._conn.close()

    # -- consultar ---------------------------------------------------------------
    @property
    def semeado(self) -> bool:
        """O índice já nasceu da origem (sem isso, a key ausente não diz nada)."""
        return self._conn.execute('SELECT 1 FROM semeado').fetchone() is not None

    def entregues(self, chaves: Iterable[str]) -> dict[str, list[Entregue]]:
        """As keys (em texto) que o índice conhece, cada uma com as empresas em que está."""
        achadas: dict[str, list[Entregue]] = {}
        for lote in _lotes(list(dict.fromkeys(chaves))):
            for chave, valor, escopo, resumo in self._conn.execute(
                'SELECT chave, valor, escopo, resumo FROM entregue WHERE chave IN (%s)'
                % ','.join('?' * len(lote)),
                lote,
            ):
                achadas.setdefault(chave, []).append(Entregue(json.loads(valor), escopo, resumo))
        return achadas

    def chaves_por(self, coluna: str, valores: Iterable[ValorDoBanco]) -> set[str]:
        """As keys entregues cuja coluna `via` `coluna` tinha um destes valores."""
        achadas: set[str] = set()
        for lote in _lotes([texto_da_chave(v) for v in dict.fromkeys(valores)]):
            achadas.update(
                chave
                for (chave,) in self._conn.execute(
                    'SELECT chave FROM via WHERE coluna = ? AND valor IN (%s)'
                    % ','.join('?' * len(lote)),
                    [coluna, *lote],
                )
            )
        return achadas

    def quantas(self) -> int:
        return int(self._conn.execute('SELECT COUNT(*) FROM entregue').fetchone()[0])

    # -- anotar ------------------------------------------------------------------
    def anotar(self, entregues: Iterable[Anotacao], removidas: Iterable[tuple[str, str]]) -> None:
        """
        As linhas entregues (a versão nova de cada key numa empresa) e as
        removidas ((empresa, key em texto)), numa transação.
        """
        with _transacao(self._conn) as conn:
            for escopo, chave in removidas:
                conn.execute('DELETE FROM entregue WHERE chave = ? AND escopo = ?', (chave, escopo))
                conn.execute('DELETE FROM via WHERE chave = ? AND escopo = ?', (chave, escopo))
            for anotacao in entregues:
                _gravar(conn, anotacao)

    def semear(self, linhas: Iterable[Anotacao], escopos: Collection[str] | None) -> int:
        """
        As linhas lidas da origem trocam, numa transação, as das empresas
        `escopos` (None: o índice inteiro). Devolve quantas entraram.
        """
        quantas = 0
        with _transacao(self._conn) as conn:
            _esquecer_empresas(conn, escopos)
            for anotacao in linhas:
                if escopos is None or anotacao.escopo in escopos:
                    _gravar(conn, anotacao)
                    quantas += 1
            conn.execute('DELETE FROM semeado')
            conn.execute("INSERT INTO semeado VALUES (datetime('now'))")
        return quantas

    def trocar_pela_semente(self, semente: str, escopos: Collection[str] | None) -> None:
        """
        As empresas `escopos` (None: todas) passam a ter, numa transação, o que a
        semente (um índice lido da origem antes da carga) tem delas.
        """
        self._conn.execute('ATTACH DATABASE ? AS semente', (semente,))
        try:
            with _transacao(self._conn) as conn:
                _esquecer_empresas(conn, escopos)
                filtro, parametros = _das_empresas(escopos, 'semente.entregue')
                conn.execute(
                    'INSERT OR REPLACE INTO entregue SELECT * FROM semente.entregue' + filtro,
                    parametros,
                )
                conn.execute(
                    'INSERT OR IGNORE INTO via SELECT v.* FROM semente.via v JOIN'
                    ' semente.entregue ON semente.entregue.chave = v.chave'
                    ' AND semente.entregue.escopo = v.escopo' + filtro,
                    parametros,
                )
        finally:
            self._conn.execute('DETACH DATABASE semente')


def _das_empresas(escopos: Collection[str] | None, tabela: str) -> tuple[str, list[str]]:
    """O WHERE das empresas `escopos` (None: nenhum filtro)."""
    if escopos is None:
        return '', []
    nomeadas = sorted(escopos)
    if not nomeadas:
        return ' WHERE 0', []
    return ' WHERE %s.escopo IN (%s)' % (tabela, ','.join('?' * len(nomeadas))), nomeadas


def _gravar(conn: sqlite3.Connection, anotacao: Anotacao) -> None:
    chave, escopo = texto_da_chave(anotacao.valor), anotacao.escopo
    conn.execute(
        'INSERT OR REPLACE INTO entregue VALUES (?, ?, ?, ?)',
        (chave, escopo, json.dumps(anotacao.valor, default=str), anotacao.resumo),
    )
    conn.execute('DELETE FROM via WHERE chave = ? AND escopo = ?', (chave, escopo))
    conn.executemany(
        'INSERT OR IGNORE INTO via VALUES (?, ?, ?, ?)',
        [(c, texto_da_chave(v), chave, escopo) for c, v in anotacao.via.items() if v is not None],
    )


def _esquecer_empresas(conn: sqlite3.Connection, escopos: Collection[str] | None) -> None:
    if escopos is None:
        conn.execute('DELETE FROM entregue')
        conn.execute('DELETE FROM via')
        return
    for escopo in escopos:
        conn.execute('DELETE FROM via WHERE escopo = ?', (escopo,))
        conn.execute('DELETE FROM entregue WHERE escopo = ?', (escopo,))


class _transacao:
    """BEGIN ... COMMIT (ROLLBACK na exceção): o índice nunca fica pela metade."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> sqlite3.Connection:
        self._conn.execute('BEGIN IMMEDIATE')
        return self._conn

    def __exit__(self, tipo: object, *_: object) -> None:
        self._conn.execute('ROLLBACK' if tipo is not None else 'COMMIT')


def _lotes(valores: list[str]) -> Iterator[list[str]]:
    for inicio in range(0, len(valores), _LOTE):
        yield valores[inicio : inicio + _LOTE]
