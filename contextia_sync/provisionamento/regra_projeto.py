"""
A regra de projeto: que linhas do cadastro de empresas viram projeto no Contextia.

Vem da seção `projects` do mapeamento:

    "projects": {"source_object": "EMPRESAS", "scope_column": "EMPRESA_ID",
                 "name_column": "RAZAO_SOCIAL", "group_column": "GRUPO",
                 "filters": [{"column": "ATIVA", "equals": "S"}]}

Os filtros comparam TEXTO sem espaços nas pontas: o ERP devolve CHAR com
preenchimento ('S ', o D_E_L_E_T_ do Protheus e ' '), número como Decimal, e
'1' == 1 precisa valer -- senão uma empresa ativa seria recusada pelo tipo do driver.

Módulo puro (biblioteca padrão, escopos e o `limpo` do registro): o ouvinte usa no
ciclo de projetos.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from contextia_sync.erros import ErroConfiguracao
from contextia_sync.escopos import REGRA, codigo_invalido, problema_no_escopo, texto_escopo
from contextia_sync.origem.condicao import OPERADORES, Condicao
from contextia_sync.registro import limpo

if TYPE_CHECKING:  # só o mypy: tipos.py importa o sqlalchemy, e este módulo é puro
    from contextia_sync.origem.condicao import Esperado
    from contextia_sync.tipos import Mapa, ValorDeFiltro, ValorDoBanco


class ErroRegraProjeto(ErroConfiguracao, ValueError):
    """O mapeamento não diz de onde tirar as empresas (falta a seção `projects`)."""


@dataclass(frozen=True)
class RegraProjeto:
    """A seção `projects` resolvida: o que ler do cadastro e como decidir cada linha."""

    source_object: str
    columns: list[str]  # o que ler: escopo, nome, grupo, filtros
    scope_column: str | None
    name_column: str | None
    group_column: str | None
    filtros: list[tuple[str, str, Esperado]]  # (coluna, operador, valor esperado)


def resolver(mapa: Mapa) -> RegraProjeto:
    """
    A regra, pronta para usar: source_object, columns, scope_column, name_column,
    group_column e filtros [(coluna, operador, valor)].

    Sem seção `projects`, não há regra: levanta ErroRegraProjeto (um ValueError)
    dizendo o que escrever (o provisionamento não tem de onde tirar as empresas).
    """
    projetos = mapa.get('projects')
    if not projetos:
        raise ErroRegraProjeto(
            'o mapeamento não tem a seção "projects" (a regra de projeto). Sem ela não'
            ' há de onde tirar as empresas: declare "projects": {"source_object":'
            ' "<cadastro de empresas>", "scope_column": ..., "name_column": ...}.'
        )
    escopo = projetos.get('scope_column') or (mapa.get('defaults') or {}).get('scope_column')
    filtros: list[tuple[str, str, Esperado]] = []
    for filtro in projetos.get('filters') or ():
        for operador in OPERADORES:
            if operador in filtro:
                filtros.append((filtro['column'], operador, filtro[operador]))
    colunas: list[str] = []
    for coluna in [escopo, projetos.get('name_column'), projetos.get('group_column')] + [
        f[0] for f in filtros
    ]:
        if coluna and coluna not in colunas:
            colunas.append(coluna)
    return RegraProjeto(
        source_object=projetos['source_object'],
        columns=colunas,
        scope_column=escopo,
        name_column=projetos.get('name_column'),
        group_column=projetos.get('group_column'),
        filtros=filtros,
    )


@dataclass(frozen=True)
class CodigoRecusado:
    """Uma empresa do cadastro cujo código não serve: nunca gravada, nunca provisionada."""

    codigo: str
    """O código com os controles escapados (`registro.limpo`): vai para log, plano e status."""
    motivo: str
    """Completa "o código ...": `escopos.problema_no_escopo`."""
    descricao: str
    """"código de empresa inválido: '555\\xa0' (U+00A0) -- ...": `escopos.codigo_invalido`."""


def separar_codigos(
    linhas: Iterable[Mapping[str, ValorDoBanco]], regra: RegraProjeto
) -> tuple[list[Mapping[str, ValorDoBanco]], list[CodigoRecusado]]:
    """
    O cadastro lido, separado em (linhas com código que serve, códigos recusados).

    A porta de entrada do código de empresa: o provisionador, o ciclo de
    projetos do ouvinte e a conferência da carga leem o cadastro por aqui, e
    uma linha recusada não segue para regra, plano, arquivo de chaves nem
    Contextia. Código vazio segue (a regra o recusa como "vazio", como sempre).
    """
    validas: list[Mapping[str, ValorDoBanco]] = []
    recusados: dict[str, CodigoRecusado] = {}
    for linha in linhas:
        escopo = escopo_de(linha, regra)
        problema = problema_no_escopo(escopo) if escopo else None
        if problema is None:
            validas.append(linha)
        elif escopo not in recusados:
            recusados[escopo] = CodigoRecusado(
                limpo(escopo), problema, codigo_invalido(escopo) or problema
            )
    return validas, list(recusados.values())


def texto_da_recusa(recusado: CodigoRecusado, regra: RegraProjeto) -> str:
    """A recusa de um código do cadastro, com a causa e a correção (log e plano)."""
    return (
        '%s (cadastro %s, coluna %s). A empresa NÃO é provisionada nem recebe dado;'
        ' as outras seguem. %s. Corrija o código no ERP (ou aponte a regra de projeto'
        ' e os datasets para uma view que entregue um código permitido).'
        % (recusado.descricao, regra.source_object, regra.scope_column, REGRA)
    )


def escopo_de(linha: Mapping[str, ValorDoBanco], regra: RegraProjeto) -> str:
    """O código da empresa como texto ('297' para 297, Decimal('297'), '297 ')."""
    if not regra.scope_column:  # sem coluna de empresa, nada casa
        return ''
    return texto_escopo(linha.get(regra.scope_column))


def aceita(linha: Mapping[str, ValorDoBanco], regra: RegraProjeto) -> tuple[bool, str]:
    """(True, '') se a linha vira projeto; (False, motivo) se não."""
    if not escopo_de(linha, regra):
        return False, '%s vazio' % regra.scope_column
    for coluna, operador, esperado in regra.filtros:
        # A comparação mora em origem/condicao.py (a marca de apagado usa a mesma).
        if not Condicao(coluna, operador, esperado).vale(linha.get(coluna)):
            return False, _motivo(coluna, operador, texto_escopo(linha.get(coluna)), esperado)
    return True, ''


def _motivo(coluna: str, operador: str, valor: str, esperado: Esperado) -> str:
    """Por que o filtro recusou a linha, com o valor lido e o que ele exige."""
    if operador == 'equals':
        return '%s=%r (exige %r)' % (coluna, valor, texto_escopo(esperado))
    if operador == 'not_equals':
        return '%s=%r (exige diferente)' % (coluna, valor)
    if operador == 'in':
        return '%s=%r (exige um de %s)' % (
            coluna,
            valor,
            # O schema exige a lista em `in`.
            ', '.join(repr(texto_escopo(v)) for v in cast('list[ValorDeFiltro]', esperado)),
        )
    if operador == 'not_in':
        return '%s=%r (recusado pela regra)' % (coluna, valor)
    return '%s vazio' % coluna


def nome_de(linha: Mapping[str, ValorDoBanco], regra: RegraProjeto) -> str:
    """O nome do projeto: a coluna de nome, ou 'Empresa <escopo>' se ela falta ou está vazia."""
    nome = ''
    if regra.name_column:
        valor = linha.get(regra.name_column)
        nome = '' if valor is None else ' '.join(str(valor).split())
    return nome or 'Empresa %s' % escopo_de(linha, regra)


def grupo_de_linha(linha: Mapping[str, ValorDoBanco], regra: RegraProjeto) -> str | None:
    """
    O slug do grupo que a `group_column` da linha indica, ou None.

    'Grupo Sul ' -> 'grupo-sul': o slug precisa ser estável, senão a mesma
    empresa cairia num grupo novo a cada diferença de caixa ou espaço no ERP.
    """
    if not regra.group_column:
        return None
    return slug(linha.get(regra.group_column))


def slug(valor: object) -> str | None:
    """Texto livre em slug de grupo (minúsculas, dígitos, -); None se não sobra nada."""
    import unicodedata

    texto = texto_escopo(valor)
    texto = unicodedata.normalize('NFKD', texto).encode('ascii', 'ignore').decode('ascii')
    texto = re.sub(r'[^a-z0-9]+', '-', texto.lower()).strip('-')
    return texto or None


def descrever(regra: RegraProjeto) -> str:
    """A regra em texto, para o log de subida do ouvinte e o plano do provisionador."""
    linhas = [
        '  cadastro ........: %s' % regra.source_object,
        '  empresa .........: coluna %s' % regra.scope_column,
        '  nome do projeto .: %s'
        % (
            'coluna %s' % regra.name_column
            if regra.name_column
            else '"Empresa <código>" (sem name_column)'
        ),
        '  grupo ...........: %s'
        % ('coluna %s' % regra.group_column if regra.group_column else 'só os de --grupo'),
    ]
    if regra.filtros:
        for coluna, operador, valor in regra.filtros:
            linhas.append('  só se ...........: %s' % _texto_filtro(coluna, operador, valor))
    else:
        linhas.append('  filtros .........: nenhum (toda linha com empresa vira projeto)')
    return '\n'.join(linhas)


def _texto_filtro(coluna: str, operador: str, valor: Esperado) -> str:
    return Condicao(coluna, operador, valor).descrever()
