"""
O que a `coluna` já entregou dentro da janela da folga, por dataset, em disco.

A janela (`> marca - folga`) é relida de propósito, e o que nela já foi
entregue com o mesmo valor de mudança não vai de novo: a identidade de cada
linha entregue (chave + valor de mudança, `marca_agua.identidade`) fica
lembrada até a marca passar da folga dela. Numa hora cheia (1.000 mudanças/s
numa folga de 180 s) são centenas de milhares: em memória e no JSON do estado
elas custavam RSS e um arquivo regravado a cada ciclo, e acima de um teto o
dataset ia para a varredura da noite. Aqui elas moram num SQLite por dataset
(`<estado>/janelas/<dataset>.sqlite3`, sqlite3 da biblioteca padrão): sem teto,
a memória do ouvinte não depende do tamanho da janela, a pergunta "já foi
entregue?" é feita em lotes pela chave primária e a poda é um DELETE pelo
índice do carimbo.

A ordem de gravação garante que nada entregue fique por entregar nem o
contrário: uma identidade só entra aqui DEPOIS do envio confirmado (o
`confirmar` da captura), e a marca do estado só é gravada depois. Morto o
ouvinte entre as duas, a janela relida acha a linha já lembrada e não a
reenvia; morto antes, ela vai de novo (o upsert do Contextia é idempotente).

No seco (`--dry-run`) nada vai ao disco: a janela é uma cópia em memória do
arquivo (o seco não grava nada).
"""

from __future__ import annotations

import datetime
import decimal
import os
import sqlite3
from collections.abc import Iterable, Iterator

PASTA_JANELAS = 'janelas'

_ESQUEMA = (
    # `ordem`: o carimbo como número (segundos UTC, ou o próprio número), para a poda.
    'CREATE TABLE IF NOT EXISTS entregue ('
    ' ident TEXT PRIMARY KEY, valor TEXT NOT NULL, ordem REAL) WITHOUT ROWID',
    'CREATE INDEX IF NOT EXISTS entregue_por_ordem ON entregue (ordem)',
    # A próxima janela, montada antes da varredura e trocada depois dela.
    'CREATE TABLE IF NOT EXISTS proxima ('
    ' ident TEXT PRIMARY KEY, valor TEXT NOT NULL, ordem REAL) WITHOUT ROWID',
    # As entregues com o segundo do carimbo talvez ainda aberto (o carimbo sem
    # fração de segundo): o resumo do conteúdo entregue e quando foi lida (hora
    # do relógio, time.time()). Relidas depois de o segundo fechar, vão para
    # `entregue` -- e de novo ao Contextia só se o conteúdo mudou.
    'CREATE TABLE IF NOT EXISTS provisoria ('
    ' ident TEXT PRIMARY KEY, valor TEXT NOT NULL, ordem REAL, resumo TEXT NOT NULL,'
    ' lida_em REAL NOT NULL) WITHOUT ROWID',
    # Uma linha só: 1 = sabe-se o que foi entregue; 0 = não se sabe (a contagem
    # de atrasadas fica suspensa e a janela inteira vai de novo).
    'CREATE TABLE IF NOT EXISTS conhecida (sim INTEGER NOT NULL)',
)
_LOTE = 500  # parâmetros por consulta: abaixo do limite do SQLite antigo (999)
_EPOCA = datetime.datetime(1970, 1, 1)

MarcaTexto = str | int | float


def ordem_da_marca(valor: object) -> float | None:
    """O carimbo (texto ISO, data, número) como número que ordena igual; None se não dá."""
    if isinstance(valor, bool):
        return float(valor)
    if isinstance(valor, (int, float, decimal.Decimal)):
        return float(valor)
    if isinstance(valor, datetime.datetime):
        if valor.tzinfo is not None:
            valor = valor.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return (valor - _EPOCA).total_seconds()
    if isinstance(valor, datetime.date):
        return ordem_da_marca(datetime.datetime(valor.year, valor.month, valor.day))
    if isinstance(valor, str):
        try:
            return ordem_da_marca(datetime.datetime.fromisoformat(valor))
        except ValueError:
            pass
        try:
            return float(valor)
        except ValueError:
            return None
    return None


def caminho_da_janela(pasta_estado: str, dataset: str) -> str:
    """Onde mora a janela entregue de um dataset."""
    return os.path.join(pasta_estado, PASTA_JANELAS, '%s.sqlite3' % dataset)


def tamanho_lembrado(caminho: str) -> int | None:
    """
    Quantas identidades a janela do arquivo lembra, lida sem mudar nada (o
    `estado.py mostrar`, com o ouvinte rodando); None se não há janela conhecida.
    """
    if not os.path.exists(caminho):
        return None
    conn = sqlite3.connect('file:%s?mode=ro' % caminho, uri=True)
    try:
        conhecida = conn.execute('SELECT sim FROM conhecida').fetchone()
        if not (conhecida and conhecida[0]):
            return None
        return int(conn.execute('SELECT COUNT(*) FROM entregue').fetchone()[0])
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def _em_lotes(itens: list[str]) -> Iterator[list[str]]:
    for inicio in range(0, len(itens), _LOTE):
        yield itens[inicio : inicio + _LOTE]


class JanelaEntregue:
    """As identidades entregues na janela da folga de UM dataset (identidade -> carimbo)."""

    def __init__(self, caminho: str, seco: bool = False) -> None:
        self.caminho = caminho
        if seco:
            self._conn = sqlite3.connect(':memory:', isolation_level=None)
            if os.path.exists(caminho):
                disco = sqlite3.connect('file:%s?mode=ro' % caminho, uri=True)
                try:
                    disco.backup(self._conn)
                finally:
                    disco.close()
        else:
            os.makedirs(os.path.dirname(caminho), mode=0o700, exist_ok=True)
            self._conn = sqlite3.connect(caminho, isolation_level=None)
            # A perda do último lote numa queda de energia só faz reenviar (idempotente).
            self._conn.execute('PRAGMA synchronous=NORMAL')
        for comando in _ESQUEMA:
            self._conn.execute(comando)
        # Lida uma vez: só este processo (com a trava da pasta) muda a janela.
        linha = self._conn.execute('SELECT sim FROM conhecida').fetchone()
        self._conhecida = bool(linha and linha[0])

    def fechar(self) -> None:
        self._conn.close()

    # -- o que se sabe ----------------------------------------------------------
    @property
    def conhecida(self) -> bool:
        """False: não se sabe o que já foi entregue (nunca gravada, ou esquecida)."""
        return self._conhecida

    def __len__(self) -> int:
        return int(self._conn.execute('SELECT COUNT(*) FROM entregue').fetchone()[0])

    def entregues(self, idents: Iterable[str]) -> set[str]:
        """As identidades, entre `idents`, que já foram entregues (em lotes pela chave)."""
        achadas: set[str] = set()
        for lote in _em_lotes(list(idents)):
            marcas = ','.join('?' * len(lote))
            achadas.update(
                linha[0]
                for linha in self._conn.execute(
                    'SELECT ident FROM entregue WHERE ident IN (%s)' % marcas, lote
                )
            )
        return achadas

    def esperando(self, desde: float) -> set[str]:
        """As provisórias lidas depois de `desde` (hora do relógio): o segundo delas corre."""
        return {
            linha[0]
            for linha in self._conn.execute(
                'SELECT ident FROM provisoria WHERE lida_em > ?', (desde,)
            )
        }

    def resumos(self, idents: Iterable[str]) -> dict[str, str]:
        """{identidade: resumo do conteúdo entregue} das provisórias entre `idents`."""
        achados: dict[str, str] = {}
        for lote in _em_lotes(list(idents)):
            marcas = ','.join('?' * len(lote))
            achados.update(
                self._conn.execute(
                    'SELECT ident, resumo FROM provisoria WHERE ident IN (%s)' % marcas, lote
                ).fetchall()
            )
        return achados

    def itens(self) -> Iterator[tuple[str, str]]:
        """(identidade, carimbo em texto) de tudo o que está lembrado."""
        yield from self._conn.execute('SELECT ident, valor FROM entregue ORDER BY ident')

    # -- mudar ------------------------------------------------------------------
    def juntar(
        self,
        novas: Iterable[tuple[str, MarcaTexto]],
        provisorias: Iterable[tuple[str, MarcaTexto, str]] = (),
        lida_em: float = 0.0,
    ) -> None:
        """
        Lembra as identidades entregues agora (e a janela passa a ser conhecida);
        as `provisorias` (identidade, carimbo, resumo) esperam o segundo fechar.
        """
        with self._transacao():
            firmes = list(novas)
            self._inserir('entregue', firmes)
            self._conn.executemany(
                'DELETE FROM provisoria WHERE ident = ?', ((i,) for i, _ in firmes)
            )
            self._conn.executemany(
                'INSERT OR REPLACE INTO provisoria VALUES (?, ?, ?, ?, ?)',
                (
                    (ident, str(valor), ordem_da_marca(valor), resumo, lida_em)
                    for ident, valor, resumo in provisorias
                ),
            )
            self._definir_conhecida(True)
        self._conhecida = True  # só depois do COMMIT

    def trocar(self, itens: Iterable[tuple[str, MarcaTexto]] | None) -> None:
        """Troca tudo pelo que `itens` diz; None = não se sabe mais o que foi entregue."""
        with self._transacao():
            self._conn.execute('DELETE FROM entregue')
            self._conn.execute('DELETE FROM provisoria')
            if itens is not None:
                self._inserir('entregue', itens)
            self._definir_conhecida(itens is not None)
        self._conhecida = itens is not None

    def preparar_proxima(self, itens: Iterable[tuple[str, MarcaTexto]]) -> None:
        """Monta a janela que a varredura vai entregar (trocada só em `assumir_proxima`)."""
        with self._transacao():
            self._conn.execute('DELETE FROM proxima')
            self._inserir('proxima', itens)

    def assumir_proxima(self) -> None:
        """A varredura entregou a janela montada antes dela: ela vira a lembrada."""
        with self._transacao():
            self._conn.execute('DELETE FROM entregue')
            self._conn.execute('DELETE FROM provisoria')
            self._conn.execute('INSERT INTO entregue SELECT * FROM proxima')
            self._conn.execute('DELETE FROM proxima')
            self._definir_conhecida(True)
        self._conhecida = True

    def podar(self, limite: object) -> int:
        """
        Esquece o que a próxima leitura não traz mais: carimbo em ou abaixo de `limite`.

        O carimbo que não vira número (`ordem` nula) sai na primeira poda: no
        pior caso a linha vai de novo, nunca fica sem ir.
        """
        ordem = ordem_da_marca(limite)
        if ordem is None:
            return 0
        with self._transacao():
            cursor = self._conn.execute(
                'DELETE FROM entregue WHERE ordem IS NULL OR ordem <= ?', (ordem,)
            )
            self._conn.execute('DELETE FROM provisoria WHERE ordem IS NULL OR ordem <= ?', (ordem,))
        return int(cursor.rowcount)

    # -- por dentro -------------------------------------------------------------
    def _inserir(self, tabela: str, itens: Iterable[tuple[str, MarcaTexto]]) -> None:
        self._conn.executemany(
            'INSERT OR REPLACE INTO %s VALUES (?, ?, ?)' % tabela,
            ((ident, str(valor), ordem_da_marca(valor)) for ident, valor in itens),
        )

    def _definir_conhecida(self, sim: bool) -> None:
        self._conn.execute('DELETE FROM conhecida')
        self._conn.execute('INSERT INTO conhecida VALUES (?)', (int(sim),))

    def _transacao(self) -> _Transacao:
        return _Transacao(self._conn)


class _Transacao:
    """BEGIN ... COMMIT (ROLLBACK na exceção) numa conexão em autocommit."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __enter__(self) -> None:
        self._conn.execute('BEGIN')

    def __exit__(self, tipo: object, *_: object) -> None:
        self._conn.execute('ROLLBACK' if tipo is not None else 'COMMIT')
