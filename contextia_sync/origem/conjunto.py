"""
O conjunto de chaves de uma view, em ordem: o que a estrategia `reconciliacao` le.

    SELECT <escopo>, <key> FROM <view>
     WHERE <key> IS NOT NULL AND <escopo> IS NOT NULL [AND <escopo> = :escopo]
     ORDER BY <escopo>, <key>

So duas colunas (com indice na `key`, o banco responde pelo indice), nenhum
privilegio alem do SELECT. Linha com `key` ou escopo nulo fica de fora: nao tem
como ser removida pela chave, nem empresa para quem remover.

A ORDEM e a parte perigosa. A reconciliacao compara esta leitura com o conjunto
entregue antes, guardado em disco em ordem, andando nas duas ao mesmo tempo
(captura/conjuntos.py); se o banco ordena texto de um jeito e o Python de outro
(collation sem caixa do MySQL, locale do PostgreSQL, NLS_SORT do Oracle), uma
chave viva pareceria sumida. Por isso a coluna de TEXTO vai no ORDER BY com a
ordem binaria de cada banco -- a do Python para texto em UTF-8 -- e quem le
CONFERE que a sequencia cresce e aborta, sem remover nada, se nao crescer.
Numero, data e UUID ja ordenam igual nos dois lados.

O adaptador generico expoe isto como `conjunto(...)` (origem/generico.py).
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import mysql as _mysql
from sqlalchemy.types import NullType

from contextia_sync.origem import filtro, validado
from contextia_sync.origem.consultas import (
    ColunaReal,
    Consulta,
    Expressao,
    Objeto,
    _filtrado,
    _marcadas,
)
from contextia_sync.origem.marca_apagada import MarcaDeApagado
from contextia_sync.tipos import ValorDoBanco

# Texto em ordem de bytes (UTF-8 = ordem de code point, a do `str` do Python).
_COLACAO_BINARIA = {'postgresql': 'C', 'sqlite': 'BINARY', 'mssql': 'Latin1_General_BIN2'}


def ordem_binaria(coluna: ColunaReal, dialeto: str) -> Expressao:
    """A coluna como vai no ORDER BY: texto em ordem binaria; o resto como e."""
    tipo = coluna.type
    texto = isinstance(tipo, sa.String) or (dialeto == 'sqlite' and isinstance(tipo, NullType))
    if not texto:
        return coluna
    if dialeto == 'mysql':
        # CAST ... AS BINARY: bytes do texto, sem caixa e sem PAD SPACE ('a' < 'a ').
        return sa.cast(coluna, _mysql.BINARY())
    if dialeto == 'oracle':
        return sa.func.nlssort(coluna, sa.literal_column("'NLS_SORT=BINARY'"))
    colacao = _COLACAO_BINARIA.get(dialeto)
    return coluna.collate(colacao) if colacao else coluna


def consulta_conjunto(
    objeto: Objeto,
    chave: str,
    escopo: str | None,
    dialeto: str,
    so_escopo: ValorDoBanco = None,
    sem_apagadas: MarcaDeApagado | None = None,
) -> tuple[Consulta, list[ColunaReal]]:
    """
    O SELECT do conjunto de chaves e as colunas reais (escopo primeiro, se houver).

    Com `sem_apagadas`, a linha marcada como apagada fica de fora: para a
    reconciliação, a chave dela sumiu.
    """
    validado(filtro.validar_nome, chave, 'key')
    real_chave = objeto.coluna(chave, 'key')
    reais: list[ColunaReal] = []
    if escopo is not None:
        validado(filtro.validar_nome, escopo, 'scope_column')
        reais.append(objeto.coluna(escopo, 'scope_column'))
    reais.append(real_chave)
    sql = sa.select(*reais).select_from(objeto.tabela).where(*[real.is_not(None) for real in reais])
    if so_escopo is not None and escopo is not None:
        sql = _filtrado(sql, objeto, (escopo, so_escopo), None, dialeto)
    sql = _marcadas(sql, objeto, dialeto, sem_apagadas)
    return sql.order_by(*[ordem_binaria(real, dialeto) for real in reais]), reais
