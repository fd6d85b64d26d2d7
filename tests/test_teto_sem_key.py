"""
O teto de remoção do dataset SEM key e o histórico de cargas.

Sem key o ao-vivo manda cada alteração como registro novo; a versão velha fica
até o `complete`. O teto "fração do dataset" recusava a varredura assim que as
versões velhas passavam da metade (achado da tortura longa). Aqui: processo
real do connector.py, Contextia local real, origem SQLite real, e o envio
"ao vivo" feito pelo mesmo cliente e o mesmo adaptador que o ouvinte usa.
"""

import json
import os
import subprocess
import sys

import pytest

from contextia_sync.intake import cliente
from contextia_sync.carga.completa import teto_do_complete
from contextia_sync.carga.historico import Historico, caminho_padrao
from tests.dados import erp as erp_teste
from tests.test_connector import conector, numeros, no_servidor

DATASET = 'titulos_a_receber'


# ---------------------------------------------------------------- a regra pura


def test_com_key_o_teto_e_a_fracao_do_dataset_e_a_queda_contra_a_base():
    # Dentro do teto contra a maior carga da janela: o servidor confere a fracao.
    assert teto_do_complete(False, 0.5, {'registros': 100, 'janela_dias': 7}, 60) == (0.5, None)
    # Abaixo dela, com ou sem key, recusada aqui (issue 28: o teto acumulado).
    teto, recusa = teto_do_complete(False, 0.5, {'registros': 100}, 1)
    assert teto is None and recusa is not None and 'trouxe 100' in recusa


def test_sem_key_sem_historico_fica_a_fracao():
    assert teto_do_complete(True, 0.5, None, 0) == (0.5, None)


def test_sem_key_compara_com_a_carga_anterior():
    anterior = {'registros': 100, 'em': '2026-11-29T03:30:00'}
    # Caiu 50%: no limite, passa; sem teto no servidor (as versoes velhas saem).
    assert teto_do_complete(True, 0.5, anterior, 50) == (None, None)
    teto, recusa = teto_do_complete(True, 0.5, anterior, 49)
    assert teto is None
    assert 'trouxe 49 linhas' in recusa and 'trouxe 100' in recusa
    assert 'queda de 51.0%' in recusa and '2026-11-29T03:30:00' in recusa
    # --max-remocao=1 libera a limpeza real; base zero nao recusa nada.
    assert teto_do_complete(True, 1.0, anterior, 0) == (None, None)
    assert teto_do_complete(True, 0.5, {'registros': 0}, 0) == (None, None)


# ---------------------------------------------------------------- o arquivo


def test_historico_registra_le_e_diz_o_que_faltou(tmp_path):
    caminho = str(tmp_path / 'chaves.tsv.historico.json')
    assert caminho_padrao(str(tmp_path / 'chaves.tsv')) == caminho
    hist = Historico(caminho)
    assert hist.anterior('297', 'pedidos') is None
    hist.registrar('297', 'pedidos', 10, 1, 'varredura-a')
    hist.registrar('301', 'pedidos', 7, 0, 'varredura-a')
    hist.registrar('297', 'movimentos', 5, 0, 'varredura-a')
    assert Historico(caminho).anterior('297', 'pedidos')['registros'] == 10
    assert hist.faltando({'297', '301'}, ['pedidos', 'movimentos'], 'varredura-a') == {
        'pedidos': [],
        'movimentos': ['301'],
    }
    assert hist.faltando({'297'}, ['pedidos'], 'varredura-b') == {'pedidos': ['297']}


def test_historico_ilegivel_nao_e_base_e_vai_para_o_lado(tmp_path):
    caminho = str(tmp_path / 'h.json')
    with open(caminho, 'w') as arquivo:
        arquivo.write('{"cargas": {"297": ')
    hist = Historico(caminho)
    # Sem base: o teto volta a ser a fracao (mais rigido) e nada conta como carregado.
    assert hist.anterior('297', 'pedidos') is None
    assert hist.faltando({'297'}, ['pedidos'], 'x') == {'pedidos': ['297']}
    hist.registrar('297', 'pedidos', 3, 0, 'x')
    with open(caminho + '.ilegivel') as arquivo:
        assert arquivo.read() == '{"cargas": {"297": '
    assert hist.anterior('297', 'pedidos')['registros'] == 3


# ---------------------------------------------------------------- ponta a ponta


@pytest.fixture
def sem_key(fabrica_de_bancos, tmp_path, chave_contextia, monkeypatch):
    erp = erp_teste.Erp(fabrica_de_bancos('sqlite'))
    # Titulos SEM key (a do defaults sai); Status mantem a dele.
    mapa = erp_teste.mapeamento(
        tmp_path,
        defaults={'scope_column': 'EMPRESA_ID', 'watch_column': 'ALTERADO_EM', 'chunk': 10},
    )
    escopo = erp.escopos[0]
    monkeypatch.setenv('CONTEXTIA_ORIGEM', erp.url)
    return erp, mapa, escopo, chave_contextia(escopo), str(tmp_path / 'historico.json')


def _alterar_e_enviar_ao_vivo(erp, escopo, chave, rodada):
    """Altera todas as linhas da empresa e manda como o ciclo de dados manda."""
    from contextia_sync.origem import carregar_origem

    erp.executar(
        'UPDATE {TITULOS} SET {CLIENTE} = :c WHERE {EMPRESA_ID} = :e',
        c='Cliente alterado %d' % rodada,
        e=int(escopo),
    )
    origem = carregar_origem('generic')
    origem.conectar()
    try:
        colunas = ['ID', 'EMPRESA_ID', 'CLIENTE', 'VALOR', 'VENCIMENTO', 'ALTERADO_EM']
        linhas = origem.fetch('TITULOS', colunas, scope=('EMPRESA_ID', escopo))
        envio = cliente.enviar_dataset(DATASET, linhas, api_key=chave, escopo=escopo)
    finally:
        origem.fechar()
    assert envio.lotes_erro == 0 and envio.inserted == 45


def test_varredura_sem_key_remove_as_versoes_velhas_do_ao_vivo(sem_key):
    erp, mapa, escopo, chave, historico = sem_key
    codigo, saida = conector(
        erp,
        mapa,
        escopo,
        chave,
        '--historico=' + historico,
        ambiente={'CONTEXTIA_EXECUCAO': 'implantacao'},
    )
    assert codigo == 0, saida
    assert 'teto sobre o dataset' in saida
    assert Historico(historico).anterior(escopo, DATASET)['execucao'] == 'implantacao'

    # Duas rodadas de alteracao ao vivo: 45 vivas e 90 versoes velhas (67%).
    _alterar_e_enviar_ao_vivo(erp, escopo, chave, 1)
    _alterar_e_enviar_ao_vivo(erp, escopo, chave, 2)
    assert no_servidor(chave)[DATASET] == 135

    # Sem historico (o comportamento de antes): recusado, nada sai, e o texto
    # diz por que e o que fazer.
    codigo, saida = conector(erp, mapa, escopo, chave)
    assert codigo == 1, saida
    assert 'removeria 90 de 135' in saida
    assert 'sem key e sem carga aceita no histórico' in saida
    assert no_servidor(chave)[DATASET] == 135

    # Com o historico a carga compara 45 com 45: aceita, e o Contextia fica igual a origem.
    codigo, saida = conector(erp, mapa, escopo, chave, '--historico=' + historico)
    assert codigo == 0, saida
    assert numeros(saida, DATASET)['removidos'] == 90
    assert 'teto contra a carga anterior de 45' in saida
    registros = list(cliente.ler_registros(DATASET, chave))
    assert len(registros) == 45
    assert {r['CLIENTE'] for r in registros} == {'Cliente alterado 2'}


def test_sem_key_view_vazia_continua_recusada(sem_key):
    erp, mapa, escopo, chave, historico = sem_key
    assert conector(erp, mapa, escopo, chave, '--historico=' + historico)[0] == 0
    erp.executar('DELETE FROM {TITULOS} WHERE {EMPRESA_ID} = :e', e=int(escopo))

    codigo, saida = conector(erp, mapa, escopo, chave, '--historico=' + historico)
    assert codigo == 1, saida
    assert 'a carga trouxe 0 linhas' in saida and 'queda de 100.0%' in saida
    assert '--dataset=%s --max-remocao=1' % DATASET in saida
    assert no_servidor(chave)[DATASET] == 45
    # A recusa nao vira base: a proxima view vazia e recusada de novo.
    assert Historico(historico).anterior(escopo, DATASET)['registros'] == 45

    codigo, saida = conector(
        erp,
        mapa,
        escopo,
        chave,
        '--historico=' + historico,
        '--dataset=' + DATASET,
        '--max-remocao=1',
    )
    assert codigo == 0, saida
    assert no_servidor(chave)[DATASET] == 0
    assert Historico(historico).anterior(escopo, DATASET)['registros'] == 0


def test_carregar_todas_grava_o_historico_ao_lado_das_chaves(sem_key, tmp_path):
    erp, mapa, escopo, chave, _ = sem_key
    chaves = tmp_path / 'chaves.tsv'
    chaves.write_text('%s\t%s\n' % (escopo, chave))
    os.chmod(str(chaves), 0o600)
    env = dict(
        os.environ,
        CONTEXTIA_MAPPING=mapa,
        CONTEXTIA_EXECUCAO='cron-1',
        CONTEXTIA_PYTHON=sys.executable,
    )
    env.pop('CONTEXTIA_HISTORICO', None)
    raiz = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    feito = subprocess.run(
        ['bash', os.path.join(raiz, 'carregar-todas.sh'), str(chaves)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=120,
    )
    assert feito.returncode == 0, feito.stdout.decode()
    with open(caminho_padrao(str(chaves))) as arquivo:
        cargas = json.load(arquivo)['cargas'][escopo]
    assert cargas[DATASET]['registros'] == 45 and cargas[DATASET]['execucao'] == 'cron-1'
    assert cargas['status']['registros'] == 3
