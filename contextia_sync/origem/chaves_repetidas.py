"""
As keys que se repetem numa view, por empresa: o que a carga pergunta antes de ler.

    SELECT MIN(<escopo>), MAX(<escopo>), MIN(<key>), COUNT(*) FROM <view>
     WHERE <key> IS NOT NULL AND <escopo> IS NOT NULL [AND <escopo> = :escopo]
       [AND a linha não está marcada como apagada]
     GROUP BY TRIM(<escopo>), <key em ordem binária>
    HAVING COUNT(*) > 1
     LIMIT :limite

Um GROUP BY no banco: a carga não guarda a key de cada linha para achar as
repetidas (a memória cresceria com a view) -- só as linhas dos pares daqui
esperam o fim da leitura (intake/chaves.py: `Triagem`). A empresa agrupa pelo
texto sem o espaço das pontas (`TRIM`, como `escopos.texto_escopo`: ' 297' e
'297' são a mesma empresa); a key, byte a byte (a collation sem caixa do MySQL
diria 'a' = 'A', que o Contextia guarda como dois registros). Sem escopo (o
dataset de domínio), só a key. A linha marcada como apagada não entra: a viva
vence a marcada (`origem/marca_apagada.py`), e a carga nem a lê.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.types import NullType

from contextia_sync.origem import filtro, validado
from contextia_sync.origem.conjunto import ordem_binaria
from contextia_sync.origem.consultas import (
    ColunaReal,
    Consulta,
    Expressao,
    Objeto,
    _filtrado,
    _marcadas,
)
from contextia_sync.tipos import ValorDoBanco

if TYPE_CHECKING:
    from contextia_sync.origem.marca_apagada import MarcaDeApagado


def _empresa_agrupada(coluna: ColunaReal, dialeto: str) -> Expressao:
    """A coluna de escopo como o GROUP BY a junta: texto sem o espaço das pontas."""
    tipo = coluna.type
    texto = isinstance(tipo, sa.String) or (dialeto == 'sqlite' and isinstance(tipo, NullType))
    return sa.func.trim(coluna) if texto else coluna


def consulta_repetidas(
    objeto: Objeto,
    chave: str,
    escopo: str | None,
    dialeto: str,
    so_escopo: ValorDoBanco = None,
    sem_apagadas: MarcaDeApagado | None = None,
    limite: int = 1001,
) -> tuple[Consulta, list[ColunaReal]]:
    """
    O SELECT dos pares repetidos -- (MIN(escopo), MAX(escopo), key, linhas); sem
    escopo, (key, linhas) -- e as colunas reais ([escopo,] key), para os conversores.
    """
    validado(filtro.validar_nome, chave, 'key')
    real_chave = objeto.coluna(chave, 'key')
    reais: list[ColunaReal] = []
    grupos: list[Expressao] = []
    if escopo is not None:
        validado(filtro.validar_nome, escopo, 'scope_column')
        real_escopo = objeto.coluna(escopo, 'scope_column')
        reais.append(real_escopo)
        grupos.append(_empresa_agrupada(real_escopo, dialeto))
    reais.append(real_chave)
    grupos.append(ordem_binaria(real_chave, dialeto))
    extremos = [sa.func.min(real_escopo), sa.func.max(real_escopo)] if escopo is not None else []
    sql: Consulta = (
        sa.select(*extremos, sa.func.min(real_chave), sa.func.count())
        .select_from(objeto.tabela)
        .where(*[real.is_not(None) for real in reais])
    )
    if so_escopo is not None and escopo is not None:
        sql = _filtrado(sql, objeto, (escopo, so_escopo), None, dialeto)
    sql = _marcadas(sql, objeto, dialeto, sem_apagadas)
    return sql.group_by(*grupos).having(sa.func.count() > 1).limit(limite), reais
