"""
O teto de remoção acumulado (issue 28, item 5).

Antes o teto comparava a carga só com a anterior aceita: uma view que perde 30%
por rodada ia de 100 a 2 linhas em 7 rodadas, cada uma dentro do
`--max-remocao`. Agora a base é a MAIOR carga aceita do dataset, na empresa,
nos últimos `padroes.JANELA_TETO_REMOCAO_DIAS` dias (o histórico de cargas).

Processo real do connector.py (`--scope` e `--todas`), Contextia local real,
origem SQLite real; as datas antigas são escritas no próprio histórico.
"""

import datetime
import json
import os
import subprocess
import sys

import pytest

from contextia_sync import padroes
from contextia_sync.carga.historico import Historico
from contextia_sync.provisionamento.chaves import Registro, gravar_registros
from tests.dados import erp as erp_teste
from tests.test_connector import RAIZ, conector, no_servidor, numeros

DATASET = 'titulos_a_receber'


@pytest.fixture
def cem(fabrica_de_bancos, tmp_path, chave_contextia, monkeypatch):
    """(erp, mapa, escopo, chave, historico): a empresa com 100 títulos (key ID)."""
    erp = erp_teste.Erp(fabrica_de_bancos('sqlite'), titulos_por_empresa=(100, 30))
    mapa = erp_teste.mapeamento(tmp_path)
    escopo = erp.escopos[0]
    monkeypatch.setenv('CONTEXTIA_ORIGEM', erp.url)
    return erp, mapa, escopo, chave_contextia(escopo), str(tmp_path / 'historico.json')


def _encolher(erp, escopo, para):
    """Apaga na origem os títulos de maior ID da empresa até sobrarem `para`."""
    ids = [
        i
        for (i,) in erp.executar(
            'SELECT {ID} FROM {TITULOS} WHERE {EMPRESA_ID} = :e ORDER BY {ID}', e=int(escopo)
        )
    ]
    for ident in ids[para:]:
        erp.executar('DELETE FROM {TITULOS} WHERE {ID} = :i', i=ident)
    assert erp.titulos(escopo) == para


def _rodar(cem, *extra):
    erp, mapa, escopo, chave, historico = cem
    return conector(erp, mapa, escopo, chave, '--historico=' + historico, *extra)


def _encolher_e_rodar(cem, para, *extra):
    _encolher(cem[0], cem[2], para)
    return _rodar(cem, *extra)


def _entrada(historico, escopo):
    with open(historico, encoding='utf-8') as arquivo:
        return json.load(arquivo)['cargas'][escopo][DATASET]


def test_view_que_perde_30_por_cento_por_rodada_e_recusada_abaixo_da_maior_da_janela(cem):
    erp, _mapa, escopo, chave, historico = cem
    codigo, saida = _rodar(cem)
    assert codigo == 0, saida
    em_da_base = _entrada(historico, escopo)['em']

    # -30%: dentro do teto contra a maior (100).
    codigo, saida = _encolher_e_rodar(cem, 70)
    assert codigo == 0, saida
    assert numeros(saida, DATASET)['removidos'] == 30
    assert no_servidor(chave)[DATASET] == 70

    # -30% de novo: contra a anterior (70) passaria; contra a maior da janela
    # (100) é queda de 51%: recusado, e a recusa diz a base, a data, a janela e
    # a correção.
    codigo, saida = _encolher_e_rodar(cem, 49)
    assert codigo == 1, saida
    assert 'a carga trouxe 49 linhas' in saida
    assert 'a maior carga aceita nos últimos %d dias' % padroes.JANELA_TETO_REMOCAO_DIAS in saida
    assert 'trouxe 100' in saida and em_da_base in saida
    assert 'queda de 51.0%' in saida
    assert '--dataset=%s --max-remocao=1' % DATASET in saida
    # Nada removido nesta rodada, e a recusa não vira base.
    assert no_servidor(chave)[DATASET] == 70
    assert Historico(historico).anterior(escopo, DATASET)['registros'] == 70
    assert Historico(historico).base(escopo, DATASET)['registros'] == 100

    # A rodada seguinte, igual, continua recusada: repetir não desgasta o teto.
    codigo, saida = _rodar(cem)
    assert codigo == 1 and 'queda de 51.0%' in saida, saida
    assert no_servidor(chave)[DATASET] == 70


@pytest.mark.parametrize(
    'dias, aceita',
    [(padroes.JANELA_TETO_REMOCAO_DIAS + 1, True), (padroes.JANELA_TETO_REMOCAO_DIAS - 1, False)],
)
def test_carga_fora_da_janela_nao_conta(cem, dias, aceita):
    erp, _mapa, escopo, chave, historico = cem
    assert _rodar(cem)[0] == 0
    assert _encolher_e_rodar(cem, 70)[0] == 0
    # O histórico como se a de 100 linhas fosse de `dias` atrás e a de 70 de hoje.
    agora = datetime.datetime.now()
    velha = (agora - datetime.timedelta(days=dias)).isoformat(timespec='seconds')
    with open(historico, encoding='utf-8') as arquivo:
        dados = json.load(arquivo)
    entrada = dados['cargas'][escopo][DATASET]
    entrada['janela'] = [{'registros': 100, 'em': velha}, {'registros': 70, 'em': entrada['em']}]
    with open(historico, 'w', encoding='utf-8') as arquivo:
        json.dump(dados, arquivo)

    codigo, saida = _encolher_e_rodar(cem, 49)
    if aceita:
        # Fora da janela: a base é a de 70 (queda de 30%), e a de 100 sai do arquivo.
        assert codigo == 0, saida
        assert no_servidor(chave)[DATASET] == 49
        assert [c['registros'] for c in _entrada(historico, escopo)['janela']] == [70]
    else:
        assert codigo == 1, saida
        assert 'trouxe 100' in saida and velha in saida
        assert no_servidor(chave)[DATASET] == 70


def test_max_remocao_1_passa_e_vira_a_nova_base(cem):
    erp, _mapa, escopo, chave, historico = cem
    assert _rodar(cem)[0] == 0
    assert _encolher_e_rodar(cem, 70)[0] == 0
    assert _encolher_e_rodar(cem, 49)[0] == 1

    # A limpeza é real: uma vez com --max-remocao=1.
    codigo, saida = _rodar(cem, '--dataset=' + DATASET, '--max-remocao=1')
    assert codigo == 0, saida
    assert numeros(saida, DATASET)['removidos'] == 21
    assert no_servidor(chave)[DATASET] == 49
    assert Historico(historico).base(escopo, DATASET)['registros'] == 49

    # Dali em diante o teto mede a partir de 49, com o padrão de volta:
    # 35 é -29% de 49 (passa, embora seja -65% de 100) ...
    codigo, saida = _encolher_e_rodar(cem, 35)
    assert codigo == 0, saida
    assert no_servidor(chave)[DATASET] == 35
    # ... e 24 é -51% de 49: recusado de novo, com a nova base.
    codigo, saida = _encolher_e_rodar(cem, 24)
    assert codigo == 1, saida
    assert 'trouxe 49' in saida and 'queda de 51.0%' in saida
    assert no_servidor(chave)[DATASET] == 35


def test_todas_as_empresas_tem_o_mesmo_teto_acumulado(cem, tmp_path, chave_contextia):
    """`connector.py --todas` (o do carregar-todas.sh): o teto acumulado por empresa."""
    erp, mapa, escopo, chave, _ = cem
    outra = erp.escopos[1]
    chave_outra = chave_contextia(outra)
    arquivo = tmp_path / 'chaves.tsv'
    gravar_registros(
        str(arquivo),
        [
            Registro(e, c, None, None, 'pronto', None)
            for e, c in ((escopo, chave), (outra, chave_outra))
        ],
    )
    historico = '%s.historico.json' % arquivo

    def todas(*extra):
        env = dict(os.environ, CONTEXTIA_ORIGEM=erp.url)
        env.pop('CONTEXTIA_API_KEY', None)
        env.pop('CONTEXTIA_HISTORICO', None)
        feito = subprocess.run(
            [
                sys.executable,
                'connector.py',
                '--mapping=' + mapa,
                '--source=generic',
                '--todas',
                '--chaves=%s' % arquivo,
                *extra,
            ],
            cwd=RAIZ,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=120,
        )
        return feito.returncode, feito.stdout.decode('utf-8', 'replace')

    codigo, saida = todas()
    assert codigo == 0, saida
    _encolher(erp, escopo, 70)
    codigo, saida = todas()
    assert codigo == 0, saida
    _encolher(erp, escopo, 49)
    codigo, saida = todas()
    assert codigo == 1, saida
    assert 'a carga trouxe 49 linhas' in saida and 'trouxe 100' in saida
    assert no_servidor(chave)[DATASET] == 70
    # A outra empresa, na mesma leitura, fechou normalmente.
    assert no_servidor(chave_outra)[DATASET] == 30
    assert Historico(historico).base(escopo, DATASET)['registros'] == 100

    # A limpeza real, pelo mesmo caminho: aceita, e a nova base de cada empresa.
    codigo, saida = todas('--dataset=' + DATASET, '--max-remocao=1')
    assert codigo == 0, saida
    assert no_servidor(chave)[DATASET] == 49
    assert Historico(historico).base(escopo, DATASET)['registros'] == 49
    assert Historico(historico).base(outra, DATASET)['registros'] == 30


# ---------------------------------------------------------------- o arquivo


def test_o_historico_guarda_a_maior_de_cada_dia_e_fica_limitado(tmp_path):
    hist = Historico(str(tmp_path / 'h.json'))
    inicio = datetime.datetime(2026, 11, 1, 3, 0)
    # 30 dias, 4 cargas aceitas por dia, encolhendo: 120 cargas.
    tamanho = 1000
    for dia in range(30):
        for hora in range(4):
            agora = inicio + datetime.timedelta(days=dia, hours=hora * 5)
            hist.registrar('297', 'pedidos', tamanho, 0, 'x', agora=agora)
            tamanho -= 3
    with open(hist.caminho, encoding='utf-8') as arquivo:
        janela = json.load(arquivo)['cargas']['297']['pedidos']['janela']
    # Um por dia, só os da janela: o arquivo não cresce com o número de cargas.
    assert len(janela) <= padroes.JANELA_TETO_REMOCAO_DIAS + 1
    ultima = inicio + datetime.timedelta(days=29, hours=15)
    base = hist.base('297', 'pedidos', agora=ultima)
    # A janela conta dias inteiros: hoje (30/11) e os 7 anteriores. A maior é a
    # primeira carga de 23/11, embora seja de 7 dias e 15 horas atrás.
    dia_22 = 1000 - 3 * (22 * 4)
    assert base['registros'] == dia_22 and base['em'] == '2026-11-23T03:00:00'
    # Um dia depois sem carga nenhuma: a base anda sozinha (a velha sai da janela).
    assert (
        hist.base('297', 'pedidos', agora=ultima + datetime.timedelta(days=1))['registros'] < dia_22
    )
    # Nada na janela: sem base (com key, fica só o teto do servidor).
    assert hist.base('297', 'pedidos', agora=ultima + datetime.timedelta(days=30)) is None


def test_nova_base_descarta_a_janela_e_historico_antigo_ainda_vale(tmp_path):
    caminho = str(tmp_path / 'h.json')
    agora = datetime.datetime(2026, 12, 1, 3, 0)
    # O formato de antes (sem "janela"): a última aceita vale como a janela.
    with open(caminho, 'w', encoding='utf-8') as arquivo:
        json.dump(
            {
                'versao': 1,
                'cargas': {
                    '297': {
                        'pedidos': {
                            'registros': 100,
                            'removidos': 0,
                            'em': '2026-11-30T03:00:00',
                            'execucao': 'x',
                        }
                    }
                },
            },
            arquivo,
        )
    hist = Historico(caminho)
    assert hist.base('297', 'pedidos', agora=agora)['registros'] == 100
    hist.registrar('297', 'pedidos', 40, 60, 'y', agora=agora)
    assert hist.base('297', 'pedidos', agora=agora)['registros'] == 100
    hist.registrar('297', 'pedidos', 30, 10, 'z', nova_base=True, agora=agora)
    assert hist.base('297', 'pedidos', agora=agora) == {
        'registros': 30,
        'em': '2026-12-01T03:00:00',
        'janela_dias': padroes.JANELA_TETO_REMOCAO_DIAS,
    }
    assert hist.anterior('297', 'pedidos')['execucao'] == 'z'
    assert os.path.exists(caminho)
