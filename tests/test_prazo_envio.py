"""
CONTEXTIA_PRAZO_ENVIO: o prazo de um pedido ao Contextia (tentativas e esperas
somadas), com processos de verdade. Torto, a subida recusa (saída 2) nomeando a
variável; curto, o `--once` com o Contextia fora desiste no prazo dado, não nos
~24 s das retentativas do padrão.
"""

import subprocess
import time

import pytest

from contextia_local.processo import porta_livre
from tests.apoio.ouvinte import RAIZ, Ouvinte
from tests.dados import erp as erp_teste


@pytest.fixture
def ouvinte(tmp_path, fabrica_de_bancos, ambiente_contextia, chave_contextia):
    erp = erp_teste.Erp(fabrica_de_bancos('sqlite', 'erp'))
    yield Ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia)
    erp.fechar()


def _rodar(ouvinte, **troca):
    feito = subprocess.run(
        ouvinte.argv('--once'),
        cwd=RAIZ,
        env=dict(ouvinte.env(), **troca),
        timeout=180,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    return feito.returncode, feito.stdout.decode('utf-8', 'replace')


@pytest.mark.parametrize('valor', ['abc', '0', '-5', 'nan'])
def test_prazo_torto_e_recusado_na_subida(ouvinte, valor):
    codigo, saida = _rodar(ouvinte, CONTEXTIA_PRAZO_ENVIO=valor)
    assert codigo == 2, saida
    assert 'CONTEXTIA_PRAZO_ENVIO=%r' % valor in saida and 'maior que zero' in saida, saida


def test_prazo_curto_desiste_do_contextia_fora_no_prazo(ouvinte):
    assert ouvinte.rodar('--once')[0] == 0
    ouvinte.inserir(ouvinte.erp.escopos[0], '2026-09-01 11:00:00')
    inicio = time.monotonic()
    # Porta livre: ninguém escuta nela (o Contextia fora do ar).
    codigo, saida = _rodar(
        ouvinte, CONTEXTIA_URL='http://127.0.0.1:%d' % porta_livre(), CONTEXTIA_PRAZO_ENVIO='1.5'
    )
    levou = time.monotonic() - inicio
    assert codigo == 1 and 'marca de água NÃO avançou' in saida, saida
    # O padrao levaria ~24 s (0,5 + 1 + 2 + 4 + 8 + 8 de espera) so no envio.
    assert levou < 15, (levou, saida)
