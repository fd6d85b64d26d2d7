"""
A marca de apagado de um dataset: a linha que o ERP "apaga" marcando.

Muitos ERPs não apagam a linha: o Protheus põe `D_E_L_E_T_ = '*'`, o Odoo
`active = false`, outros um status de cancelado. O mapeamento o diz por
dataset (ou no `defaults`, herdado por todos):

    "deleted_when": {"column": "D_E_L_E_T_", "equals": "*"}

com a mesma forma e a mesma comparação dos filtros da regra de projeto
(`origem/condicao.py`). As regras, todas aqui:

  * NULL na coluna da marca é linha VIVA, seja qual for a condição (a marca
    que nunca foi escrita não apagou nada) -- `apagada`;
  * a linha marcada sai do Contextia como remoção, nunca como upsert; a carga
    completa nem a lê (o WHERE de `origem/consultas.py: estado_da_marca`);
  * a linha viva vence a marcada de mesma chave, em qualquer ordem de leitura
    (o ERP reusa a chave de negócio depois de apagar: a velha fica marcada, a
    nova entra) -- `escolher`.

Puro (biblioteca padrão, `condicao` e as funções puras do `mapeamento`): a
`coluna` e as estratégias por log (`captura/do_spool.py`) chamam daqui.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypedDict

from contextia_sync.escopos import texto_escopo
from contextia_sync.mapeamento import valor_herdado
from contextia_sync.origem.condicao import Condicao

if TYPE_CHECKING:  # so a anotacao: a marca fica pura
    from contextia_sync.tipos import DatasetDoMapa, Linha, Mapa, ValorDoBanco

CAMPO: Final = 'deleted_when'
"""O nome do campo no mapeamento (no dataset e no `defaults`)."""


@dataclass(frozen=True)
class MarcaDeApagado:
    """A condição que diz que uma linha do dataset está apagada."""

    condicao: Condicao

    @property
    def coluna(self) -> str:
        """A coluna da marca (está em `columns`: o mapeamento confere na carga)."""
        return self.condicao.coluna

    @classmethod
    def do_dataset(cls, mapa: Mapa, row: DatasetDoMapa) -> MarcaDeApagado | None:
        """
        A marca do dataset `row`: a declarada nele, ou a do `defaults`.

        None se não há marca, ou se o dataset desliga a herdada com
        `"deleted_when": null`.
        """
        item = valor_herdado(mapa, row, CAMPO)
        if not item:
            return None
        return cls(Condicao.de_mapa(item))

    def apagada(self, linha: Mapping[str, ValorDoBanco]) -> bool:
        """Se a linha lida está marcada como apagada; NULL na coluna é viva."""
        valor = linha.get(self.coluna)
        if valor is None:
            return False
        return self.condicao.vale(valor)

    def escolher(
        self, linhas: Iterable[Linha], chave: str, escopo: str | None = None
    ) -> tuple[list[Linha], list[Linha]]:
        """
        (vivas, apagadas) de uma leitura: a viva vence a marcada de mesma chave.

        As vivas saem todas, na ordem lida. Das marcadas sai uma por valor de
        `chave` (a última lida), e só as de chave que nenhuma viva da leitura
        tem: essa chave está viva no ERP, e remover apagaria a linha nova. A
        marcada de chave NULL não sai (não há o que remover por ela). Com
        `escopo` (a `scope_column`), a chave é a de cada empresa: a key do ERP
        costuma ser única só dentro da filial, e a viva de outra empresa não
        salva a marcada desta.
        """
        vivas: list[Linha] = []
        marcadas: dict[tuple[str | None, ValorDoBanco], Linha] = {}
        chaves_vivas: set[tuple[str | None, ValorDoBanco]] = set()
        for linha in linhas:
            valor = identidade(linha, chave, escopo)
            if not self.apagada(linha):
                vivas.append(linha)
                chaves_vivas.add(valor)
            elif valor[1] is not None:
                marcadas.pop(valor, None)  # a última lida, na ordem da leitura
                marcadas[valor] = linha
        apagadas = [linha for valor, linha in marcadas.items() if valor not in chaves_vivas]
        return vivas, apagadas

    def descrever(self) -> str:
        """A marca em texto, para log e mensagens: "D_E_L_E_T_ = '*'"."""
        return self.condicao.descrever()


def identidade(
    linha: Mapping[str, ValorDoBanco], chave: str, escopo: str | None = None
) -> tuple[str | None, ValorDoBanco]:
    """
    (a empresa como texto, ou None sem `escopo`; o valor da chave) de uma linha,
    como chave de dicionário (o valor sem hash vai pelo repr).
    """
    valor = linha.get(chave)
    try:
        hash(valor)
    except TypeError:
        valor = repr(valor)
    return (texto_escopo(linha.get(escopo)) if escopo else None), valor


class ArgumentoDaMarca(TypedDict, total=False):
    """`sem_apagadas=` do adaptador, quando o dataset tem marca (`argumento`)."""

    sem_apagadas: MarcaDeApagado


def argumento(marca: MarcaDeApagado | None) -> ArgumentoDaMarca:
    """
    `{'sem_apagadas': marca}` para a leitura do adaptador, ou {} sem marca.

    Só passado quando há marca: o adaptador escrito antes dela (um
    `sources/<nome>.py` sem o parâmetro) segue servindo os datasets sem marca.
    """
    return {} if marca is None else {'sem_apagadas': marca}
