"""O plano do WHERE e a validação de nomes, sem banco (contextia_sync/origem/filtro.py)."""

import os
import subprocess
import sys

import pytest

from contextia_sync.origem import filtro

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

HOSTIS = [
    'X; DROP TABLE Y',
    'TITULOS"',
    "TIT'ULOS",
    'A--B',
    'A/*x*/',
    'COL UNA',
    'COL\tUNA',
    'COL\nUNA',
    '1COLUNA',
    '',
    ' ID',
    'ID ',
    '[ID]',
    '`ID`',
    'A.B.C',
    'x' * 129,
    'ID)',
    'ID,SENHA',
]


def test_escopo_primeiro_e_mudanca_depois():
    assert filtro.plano(scope=('E', 1), since=('ALT', 'x')) == [
        ('E', '=', 'escopo', 1),
        ('ALT', '>', 'desde', 'x'),
    ]


def test_so_escopo_so_mudanca_e_nenhum():
    assert filtro.plano(scope=('EMPRESA_ID', 297)) == [('EMPRESA_ID', '=', 'escopo', 297)]
    assert filtro.plano(since=('ALT', 5)) == [('ALT', '>', 'desde', 5)]
    assert filtro.plano() == []


def test_descrever_nos_dois_estilos():
    plano = filtro.plano(scope=('E', 1), since=('ALT', 'x'))
    assert filtro.descrever(plano) == ('E = :escopo AND ALT > :desde', {'escopo': 1, 'desde': 'x'})
    assert filtro.descrever(plano, 'format') == ('E = %s AND ALT > %s', (1, 'x'))
    assert filtro.descrever([]) == ('', {})


@pytest.mark.parametrize('nome', HOSTIS)
def test_nome_hostil_recusado_nomeando_o_campo(nome):
    with pytest.raises(filtro.ErroIdentificador) as erro:
        filtro.validar_colunas(['ID', nome])
    assert 'columns[1]' in str(erro.value)
    with pytest.raises(filtro.ErroIdentificador, match='since'):
        filtro.plano(since=(nome, 1))
    with pytest.raises(filtro.ErroIdentificador, match='scope'):
        filtro.plano(scope=(nome, 1))


def test_objeto_com_e_sem_schema():
    assert filtro.validar_objeto('TITULOS') == (None, 'TITULOS')
    assert filtro.validar_objeto('ERP.V_TITULOS$2') == ('ERP', 'V_TITULOS$2')
    for ruim in ('X; DROP TABLE Y', 'A.B.C', '.X', 'X.', 'ERP."X"', None):
        with pytest.raises(filtro.ErroIdentificador, match='source_object'):
            filtro.validar_objeto(ruim)


def test_nome_com_acento_de_erp_brasileiro_passa():
    assert filtro.validar_nome('DESCRICAO_SITUACAO', 'c') == 'DESCRICAO_SITUACAO'
    assert filtro.validar_nome('SITUAÇÃO', 'c') == 'SITUAÇÃO'


def test_valor_none_no_filtro_recusado():
    with pytest.raises(filtro.ErroIdentificador, match='NULL'):
        filtro.plano(scope=('E', None))
    with pytest.raises(filtro.ErroIdentificador, match='since'):
        filtro.plano(since=('ALT', None))


def test_filtro_e_puro_roda_em_python_sem_site():
    """
    O --autoteste importa filtro num `python3 -S` sem pacote nenhum (e o
    contrato da origem e a sessão, que vem junto: puros também).
    """
    codigo = (
        'import sys; sys.path.insert(0, %r); from contextia_sync.origem import filtro;'
        ' from contextia_sync.origem import sessao, ErroConfiguracaoOrigem;'
        ' print(filtro.descrever(filtro.plano(("E", 1), ("A", 2)))[0]);'
        ' print(sorted(m for m in sys.modules if m.split(".")[0] in'
        ' ("sqlalchemy", "jsonschema", "requests", "logzero")))' % RAIZ
    )
    saida = subprocess.run(
        [sys.executable, '-S', '-c', codigo], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert saida == ['E = :escopo AND A > :desde', '[]']
