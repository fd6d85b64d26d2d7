"""
O exemplo mappings/protheus.json funciona de ponta a ponta: um Protheus em
miniatura no PostgreSQL (tests/dados/protheus_pg.sql, com as views que o DBA
criaria), provisionar.py e carregar-todas.sh de verdade, Contextia local real.
"""

import json
import os
import subprocess
import sys

import pytest

from contextia_sync.intake import cliente
from contextia_sync.provisionamento.chaves import ler_chaves
from tests.dados import protheus as protheus_dados

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.postgres


@pytest.fixture
def protheus(banco_postgres):
    return protheus_dados.carregar(banco_postgres)


def rodar(argv, ambiente):
    feito = subprocess.run(
        argv, cwd=RAIZ, env=ambiente, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300
    )
    return feito.returncode, feito.stdout.decode('utf-8', 'replace')


def test_exemplo_protheus_de_ponta_a_ponta(protheus, tmp_path, ambiente_contextia):
    with open(os.path.join(RAIZ, 'mappings', 'protheus.json'), encoding='utf-8') as f:
        mapa = json.load(f)
    # O receptor do exemplo e externo; o servidor local so entrega em 127.0.0.0/8.
    mapa['webhook']['url'] = ambiente_contextia.url + '/receptor?filial={escopo}'
    caminho = tmp_path / 'protheus.json'
    caminho.write_text(json.dumps(mapa))
    chaves = tmp_path / 'chaves.tsv'
    ambiente = dict(
        os.environ,
        CONTEXTIA_ORIGEM=protheus,
        CONTEXTIA_WEBHOOK_SEGREDO='s3gr3d0-do-receptor-protheus',
        CONTEXTIA_MAPPING=str(caminho),
        CONTEXTIA_PYTHON=sys.executable,
        CONTEXTIA_COLETA=RAIZ,
    )

    codigo, saida = rodar(
        [sys.executable, 'provisionar.py', '--mapping=%s' % caminho, '--arquivo=%s' % chaves],
        ambiente,
    )
    assert codigo == 0, saida
    assert "recusada ...: 0103 (CTX_BLOQUEADA='S' (exige 'N'))" in saida
    assert "recusada ...: 0104 (D_E_L_E_T_='*' (exige diferente))" in saida
    assert 'excluída ...: 9901' in saida
    registros = ler_chaves(str(chaves))
    assert sorted(registros) == ['0101', '0102']
    admin = ambiente_contextia.admin()
    assert admin.buscar_projeto('0101')['name'] == 'DISTRIBUIDORA EXEMPLO LTDA - MATRIZ'
    grupos = {g['slug']: g['projetos'] for g in admin.listar_grupos()}
    assert len(grupos['distribuidora-exemplo']) == 2

    codigo, saida = rodar(['bash', 'carregar-todas.sh', str(chaves)], ambiente)
    assert codigo == 0, saida
    assert 'resumo carregar-todas: 2 ok, 0 com falha' in saida

    matriz = {d['dataset']: d['records'] for d in cliente.listar_datasets(registros['0101'])}
    assert matriz == {
        'titulos_a_receber': 3,
        'titulos_a_pagar': 1,
        'clientes': 3,
        'pedidos_de_venda': 2,
        'tipos_de_titulo': 4,
    }
    campinas = {d['dataset']: d['records'] for d in cliente.listar_datasets(registros['0102'])}
    assert campinas == {
        'titulos_a_receber': 1,
        'titulos_a_pagar': 0,
        'clientes': 3,
        'pedidos_de_venda': 0,
        'tipos_de_titulo': 4,
    }
    pedidos = {r['C5_NUM']: r for r in cliente.ler_registros('pedidos_de_venda', registros['0101'])}
    assert pedidos['000321']['CTX_VALOR_TOTAL'] == '3000.00'
