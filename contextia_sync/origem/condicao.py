"""
Uma condição sobre uma coluna do ERP, como o mapeamento a escreve.

    {"column": "D_E_L_E_T_", "equals": "*"}

`column` e exatamente um de `equals`, `not_equals`, `in`, `not_in`,
`not_empty`. A mesma forma serve aos filtros da regra de projeto
(`projects.filters`) e à marca de apagado de um dataset (`deleted_when`); a
comparação mora aqui, uma vez, e o SQL da origem (`origem/consultas.py`) usa
os MESMOS textos esperados (`textos_esperados`), para a linha que o Python
julga apagada ser a mesma que o WHERE tira.

Compara TEXTO sem os espaços ASCII das pontas (`escopos.texto_escopo`): o ERP
devolve CHAR com preenchimento (o D_E_L_E_T_ do Protheus vem '*' ou ' '),
número como Decimal, e '1' == 1 precisa valer. O booleano esperado casa com as
duas grafias que os bancos dão a ele como texto: `false` é '0' (o Python, o
MariaDB) e 'false' (o CAST do PostgreSQL).

Puro (biblioteca padrão e `escopos`): a regra de projeto e a captura usam.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias, cast

from contextia_sync.escopos import texto_escopo

if TYPE_CHECKING:  # so a anotacao: a condicao fica pura
    from contextia_sync.tipos import Filtro, ValorDeFiltro

Operador: TypeAlias = Literal['equals', 'not_equals', 'in', 'not_in', 'not_empty']
"""Um operador do mapeamento (as chaves de `Filtro` além de `column`)."""

Esperado: TypeAlias = 'ValorDeFiltro | list[ValorDeFiltro]'
"""O valor que o mapeamento dá ao operador: uma lista para `in`/`not_in`."""

OPERADORES: tuple[Operador, ...] = ('equals', 'not_equals', 'in', 'not_in', 'not_empty')
"""Os operadores do mapeamento, na ordem em que `de_mapa` os procura."""

NEGATIVOS = ('not_equals', 'not_in')
"""Os que valem quando o valor NÃO está entre os esperados."""

# O texto que cada banco dá ao booleano: o Python e o MariaDB '1'/'0', o
# CAST do PostgreSQL 'true'/'false'.
_GRAFIAS_DO_BOOLEANO = {True: ('1', 'true'), False: ('0', 'false')}


def textos_de(valor: object) -> tuple[str, ...]:
    """O valor esperado como os textos com que ele casa (um, ou dois para booleano)."""
    if isinstance(valor, bool):
        return _GRAFIAS_DO_BOOLEANO[valor]
    return (texto_escopo(valor),)


@dataclass(frozen=True)
class Condicao:
    """`column` + um operador e o valor esperado, como no mapeamento."""

    coluna: str
    operador: str
    esperado: Esperado

    @classmethod
    def de_mapa(cls, item: Filtro) -> Condicao:
        """A condição do mapeamento (já validado pelo schema: um operador só)."""
        for operador in OPERADORES:
            if operador in item:
                return cls(str(item['column']), operador, item[operador])
        raise ValueError(
            'condição %r sem operador: escreva "column" e um de %s'
            % (dict(item), ', '.join(OPERADORES))
        )

    def textos_esperados(self) -> frozenset[str]:
        """Os textos com que o valor é comparado (vazio para `not_empty`)."""
        if self.operador == 'not_empty':
            return frozenset()
        # `in`/`not_in` levam uma lista (o schema do mapeamento o exige).
        valores: Sequence[object] = (
            cast('list[ValorDeFiltro]', self.esperado)
            if self.operador in ('in', 'not_in')
            else [self.esperado]
        )
        return frozenset(texto for valor in valores for texto in textos_de(valor))

    def vale(self, valor: object) -> bool:
        """
        Se o valor da coluna satisfaz a condição, comparado como texto.

        None é o texto vazio aqui (a regra de projeto sempre foi assim); quem
        dá outro sentido ao NULL (a marca de apagado) decide antes de chamar.
        """
        texto = texto_escopo(valor)
        if self.operador == 'not_empty':
            return bool(texto)
        casou = texto in self.textos_esperados()
        return not casou if self.operador in NEGATIVOS else casou

    def descrever(self) -> str:
        """A condição em texto, para log e mensagens: "D_E_L_E_T_ = '*'"."""
        if self.operador == 'equals':
            return '%s = %r' % (self.coluna, texto_escopo(self.esperado))
        if self.operador == 'not_equals':
            return '%s <> %r' % (self.coluna, texto_escopo(self.esperado))
        if self.operador == 'in':
            return '%s em (%s)' % (self.coluna, _lista(cast('list[ValorDeFiltro]', self.esperado)))
        if self.operador == 'not_in':
            return '%s fora de (%s)' % (
                self.coluna,
                _lista(cast('list[ValorDeFiltro]', self.esperado)),
            )
        return '%s preenchido' % self.coluna


def _lista(valores: Iterable[ValorDeFiltro]) -> str:
    """Os valores esperados de `in`/`not_in` como o operador os lê, na ordem do mapeamento."""
    return ', '.join(repr(texto_escopo(v)) for v in valores)
