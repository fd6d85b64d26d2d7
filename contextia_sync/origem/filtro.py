"""
O filtro de leitura da origem, sem banco: identificadores validados e o PLANO do WHERE.

Puro (só stdlib) de propósito: o `ouvinte.py --autoteste` roda num `python3 -S`
sem pacote nenhum e confere aqui a montagem do WHERE -- a parte onde um erro
perde dado em silêncio. O adaptador genérico (`origem/consultas.py`) transforma
este plano em SQLAlchemy; a ordem, os operadores e os nomes dos parâmetros saem
daqui e de nenhum outro lugar.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:  # so a anotacao: o filtro fica puro (autoteste)
    from contextia_sync.tipos import Tupla, ValorDoBanco

# Uma condicao do WHERE: (coluna, operador, parametro, valor).
Condicao: TypeAlias = tuple[str, str, str, 'ValorDoBanco']

# Letra ou `_` primeiro; depois letras, digitos, `_`, `$` e `#` (Oracle usa os
# dois ultimos em nome de objeto de ERP). Nada de espaco, aspas, ponto-e-virgula
# ou `--`: o nome vem de um arquivo editado a mao e vai parar num SQL.
_NOME = re.compile(r'[^\W\d][\w$#]*\Z')
TAMANHO_MAXIMO = 128

# Nomes dos parametros de bind: aparecem no SQL compilado (`:escopo`, `:desde`).
PARAMETRO_ESCOPO = 'escopo'
PARAMETRO_DESDE = 'desde'
PARAMETRO_CHAVES = 'chaves'


class ErroIdentificador(ValueError):
    """Nome de objeto ou coluna do mapeamento que não pode ir para um SQL."""


def validar_nome(nome: object, campo: str) -> str:
    """Devolve `nome` se for um identificador simples; levanta ErroIdentificador."""
    if not isinstance(nome, str) or not nome:
        raise ErroIdentificador(
            '%s: %r não é nome de coluna/objeto. Escreva o nome como está no banco,'
            ' ex.: "EMPRESA_ID".' % (campo, nome)
        )
    if len(nome) > TAMANHO_MAXIMO or not _NOME.match(nome):
        raise ErroIdentificador(
            '%s: %r recusado -- só letras, dígitos, _, $ e #, começando por letra'
            ' (sem espaço, aspas, ponto-e-virgula ou comentário). O nome vem do'
            ' mapeamento e vai para um SQL na produção do cliente: corrija o'
            ' mapeamento ou peça ao DBA uma view com nomes simples.' % (campo, nome)
        )
    return nome


def validar_objeto(source_object: object, campo: str = 'source_object') -> tuple[str | None, str]:
    """
    'VIEW' ou 'SCHEMA.VIEW' -> (schema|None, nome). Qualquer outra forma e recusada.
    """
    if not isinstance(source_object, str) or not source_object:
        raise ErroIdentificador(
            '%s: %r não é nome de view/tabela. Ex.: "TITULOS_RECEBER" ou'
            ' "ERP.TITULOS_RECEBER".' % (campo, source_object)
        )
    partes = source_object.split('.')
    if len(partes) > 2:
        raise ErroIdentificador(
            '%s: %r tem mais de um ponto. Use "VIEW" ou "SCHEMA.VIEW" (banco'
            ' ligado por dblink/sinonimo: peça ao DBA um sinonimo local).' % (campo, source_object)
        )
    for parte in partes:
        validar_nome(parte, campo)
    if len(partes) == 2:
        return partes[0], partes[1]
    return None, partes[0]


def validar_colunas(colunas: Iterable[object], campo: str = 'columns') -> list[str]:
    """Lista de nomes validados; lista vazia ou nao-lista e recusada."""
    if isinstance(colunas, str) or not colunas:
        raise ErroIdentificador(
            '%s: esperava uma lista não vazia de nomes de coluna, veio %r.' % (campo, colunas)
        )
    return [validar_nome(c, '%s[%d]' % (campo, i)) for i, c in enumerate(colunas)]


def _par(par: object, campo: str) -> tuple[str, ValorDoBanco] | None:
    if par is None:
        return None
    if not isinstance(par, (tuple, list)) or len(par) != 2:
        raise ErroIdentificador('%s: esperava (coluna, valor), veio %r.' % (campo, par))
    return validar_nome(par[0], '%s (coluna)' % campo), par[1]


def plano(
    scope: Sequence[ValorDoBanco] | None = None,
    since: Sequence[ValorDoBanco] | None = None,
    chaves: Sequence[ValorDoBanco] | None = None,
) -> list[Condicao]:
    """
    O WHERE como lista de condições (coluna, operador, parâmetro, valor).

    Escopo PRIMEIRO e mudança depois: `EMPRESA_ID = :escopo AND ALT > :desde`.
    A ordem e a do SQL de antes do ouvinte (a carga por empresa), o que deixa o
    plano de execução da origem igual ao que o DBA já conhece. `>` e estrito: a
    folga (recuo da marca) e que cobre transação em voo, não um `>=`.
    Valor None no escopo e recusado: `coluna = NULL` nunca casa, e a carga
    viria vazia sem erro nenhum.
    """
    condicoes: list[Condicao] = []
    par = _par(scope, 'scope')
    if par is not None:
        if par[1] is None:
            raise ErroIdentificador(
                'scope: valor None para a coluna %s -- `= NULL` não casa com nada.'
                ' Passe o escopo da empresa (ex.: 297).' % par[0]
            )
        condicoes.append((par[0], '=', PARAMETRO_ESCOPO, par[1]))
    par = _par(since, 'since')
    if par is not None:
        if par[1] is None:
            raise ErroIdentificador(
                'since: valor None para a coluna %s. Sem marca de água, leia tudo'
                ' (since=None) ou fixe a marca com maximo().' % par[0]
            )
        condicoes.append((par[0], '>', PARAMETRO_DESDE, par[1]))
    par = _par(chaves, 'chaves')
    if par is not None:
        valores = tuple(par[1]) if isinstance(par[1], (list, tuple, set, frozenset)) else None
        if not valores or any(v is None for v in valores):
            raise ErroIdentificador(
                'chaves: esperava uma lista não vazia de valores de %s, sem None; veio %r.'
                % (par[0], par[1])
            )
        condicoes.append((par[0], 'IN', PARAMETRO_CHAVES, valores))
    return condicoes


def descrever(
    condicoes: Sequence[Condicao], estilo: str = 'named'
) -> tuple[str, dict[str, ValorDoBanco] | Tupla]:
    """
    O plano como texto de WHERE e os valores: ('E = :escopo AND ALT > :desde', {...}).

    `estilo='format'` da '%s' e uma tupla (o jeito do MySQL). Serve ao
    autoteste e ao log; o adaptador monta o SQL de verdade com SQLAlchemy.
    """
    if estilo not in ('named', 'format'):
        raise ValueError('estilo: use "named" ou "format"')
    partes = []
    nomeados: dict[str, ValorDoBanco] = {}
    posicionais: list[ValorDoBanco] = []
    for coluna, operador, parametro, valor in condicoes:
        if estilo == 'named':
            partes.append('%s %s :%s' % (coluna, operador, parametro))
            nomeados[parametro] = valor
        else:
            partes.append('%s %s %%s' % (coluna, operador))
            posicionais.append(valor)
    return ' AND '.join(partes), (nomeados if estilo == 'named' else tuple(posicionais))
