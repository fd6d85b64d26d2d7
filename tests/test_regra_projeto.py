"""A regra de projeto: que linha do cadastro vira projeto, com que nome e grupo."""

import dataclasses
import decimal

import pytest

from contextia_sync.erros import ErroConfiguracao
from contextia_sync.provisionamento import regra_projeto

MAPA = {
    'defaults': {'scope_column': 'EMPRESA_ID'},
    'projects': {
        'source_object': 'EMPRESAS',
        'name_column': 'RAZAO_SOCIAL',
        'group_column': 'GRUPO',
        'filters': [
            {'column': 'ATIVA', 'equals': 'S'},
            {'column': 'D_E_L_E_T_', 'not_equals': '*'},
            {'column': 'UF', 'in': ['SP', 'RJ']},
            {'column': 'TIPO', 'not_in': [9]},
            {'column': 'CNPJ', 'not_empty': True},
        ],
    },
}
BOA = {
    'EMPRESA_ID': 297,
    'RAZAO_SOCIAL': '  Padaria   Pao Quente ',
    'GRUPO': 'Grupo Sul',
    'ATIVA': 'S ',
    'D_E_L_E_T_': ' ',
    'UF': 'SP',
    'TIPO': 1,
    'CNPJ': '123',
}


def regra():
    return regra_projeto.resolver(MAPA)


def test_resolver_herda_escopo_e_lista_colunas_sem_repetir():
    r = regra()
    assert r.source_object == 'EMPRESAS'
    assert r.scope_column == 'EMPRESA_ID'
    assert r.columns == [
        'EMPRESA_ID',
        'RAZAO_SOCIAL',
        'GRUPO',
        'ATIVA',
        'D_E_L_E_T_',
        'UF',
        'TIPO',
        'CNPJ',
    ]
    assert (r.name_column, r.group_column) == ('RAZAO_SOCIAL', 'GRUPO')
    assert r.filtros[0] == ('ATIVA', 'equals', 'S')
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.source_object = 'OUTRO'  # type: ignore[misc]


def test_sem_secao_projects_explica_o_que_escrever():
    with pytest.raises(ValueError, match='"projects"') as erro:
        regra_projeto.resolver({'datasets': []})
    # Erro de configuracao: as linhas de comando saem com 2, sem traceback.
    assert isinstance(erro.value, regra_projeto.ErroRegraProjeto)
    assert isinstance(erro.value, ErroConfiguracao)


def test_escopo_e_texto_para_qualquer_tipo_do_driver():
    r = regra()
    for valor in (297, decimal.Decimal('297'), 297.0, '297 '):
        assert regra_projeto.escopo_de(dict(BOA, EMPRESA_ID=valor), r) == '297'


def test_aceita_compara_texto_sem_preenchimento():
    assert regra_projeto.aceita(BOA, regra()) == (True, '')


@pytest.mark.parametrize(
    'mudanca, trecho',
    [
        ({'ATIVA': 'N'}, "ATIVA='N' (exige 'S')"),
        ({'D_E_L_E_T_': '*'}, "D_E_L_E_T_='*' (exige diferente)"),
        ({'UF': 'MG'}, "UF='MG' (exige um de 'SP', 'RJ')"),
        ({'TIPO': decimal.Decimal('9')}, "TIPO='9' (recusado pela regra)"),
        ({'CNPJ': '   '}, 'CNPJ vazio'),
        ({'EMPRESA_ID': None}, 'EMPRESA_ID vazio'),
    ],
)
def test_recusa_diz_o_motivo(mudanca, trecho):
    ok, motivo = regra_projeto.aceita(dict(BOA, **mudanca), regra())
    assert not ok and motivo == trecho


def test_nome_e_grupo():
    r = regra()
    assert regra_projeto.nome_de(BOA, r) == 'Padaria Pao Quente'
    assert regra_projeto.nome_de(dict(BOA, RAZAO_SOCIAL=None), r) == 'Empresa 297'
    assert regra_projeto.grupo_de_linha(BOA, r) == 'grupo-sul'
    assert regra_projeto.grupo_de_linha(dict(BOA, GRUPO='  '), r) is None
    assert regra_projeto.slug('Região Nordeste') == 'regiao-nordeste'


def test_descrever_diz_cada_filtro():
    texto = regra_projeto.descrever(regra())
    for trecho in (
        'cadastro ........: EMPRESAS',
        'coluna EMPRESA_ID',
        'coluna RAZAO_SOCIAL',
        "ATIVA = 'S'",
        "D_E_L_E_T_ <> '*'",
        "UF em ('SP', 'RJ')",
        "TIPO fora de ('9')",
        'CNPJ preenchido',
    ):
        assert trecho in texto
    sem_filtro = regra_projeto.resolver({'projects': {'source_object': 'E', 'scope_column': 'X'}})
    assert 'nenhum' in regra_projeto.descrever(sem_filtro)
    assert '"Empresa <código>"' in regra_projeto.descrever(sem_filtro)
