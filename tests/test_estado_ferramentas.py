"""
As ferramentas de estado (`estado.py`) de verdade, como processo, contra o
ouvinte.py de verdade, o Contextia local e origens SQLite e PostgreSQL:

  * com o ouvinte rodando, `marcar` e `esquecer-carga` são recusados pela trava
    dele (saída 2, o estado intacto); `mostrar` lê ao lado;
  * sem ouvinte, a marca muda e o próximo `ouvinte.py --once` faz o que a linha
    de confirmação anunciou: o que ficou até a marca nova não é entregue, o que
    tem carimbo depois dela e -- avancando, com `max` e recuando;
  * `esquecer-carga` tira a empresa das pendentes e o ciclo de projetos não a
    refaz;
  * `mostrar` em tabela e em JSON; as recusas de `marcar` (tipo, futuro,
    dataset, sem terminal) e a confirmação interativa num terminal de verdade.
"""

import json
import os
import pty
import signal
import subprocess
import sys

import pytest

from contextia_sync.estado.janela import JanelaEntregue, caminho_da_janela
from tests.apoio.ouvinte import DATASET, Ouvinte, esperar
from tests.dados import erp as erp_teste

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.lento
TRAVA = 'Já existe um ouvinte rodando com este diretório de estado'


BANCOS = ['sqlite', pytest.param('postgres', marks=pytest.mark.postgres)]


@pytest.fixture
def novo_ouvinte(tmp_path, fabrica_de_bancos, ambiente_contextia, chave_contextia):
    """novo_ouvinte(tipo) -> um Ouvinte sobre um ERP de teste novo naquele banco."""
    erps = []

    def criar(tipo='sqlite'):
        erps.append(erp_teste.Erp(fabrica_de_bancos(tipo, 'erp')))
        return Ouvinte(tmp_path, erps[-1], ambiente_contextia, chave_contextia)

    yield criar
    for erp in erps:
        erp.fechar()


def estado_py(o, *argv, entrada=None):
    """`estado.py` como processo, com a origem e o --estado do ouvinte `o`."""
    comando = [sys.executable, 'estado.py'] + list(argv) + ['--estado=' + o.estado_dir]
    if argv[0] == 'marcar':
        comando.append('--mapping=' + o.mapa)
    feito = subprocess.run(
        comando, cwd=RAIZ, env=o.env(), input=entrada, text=True, capture_output=True, timeout=120
    )
    return feito.returncode, feito.stdout, feito.stderr


def _pid_no_status(o):
    from contextia_sync.estado.status import ler_status_json

    try:
        return ler_status_json(o.estado_dir)['ouvinte']['pid']
    except (OSError, ValueError):
        return None


def rodar_once(o):
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    return saida


# ---------------------------------------------------------------------------
# com o ouvinte rodando: a trava
# ---------------------------------------------------------------------------


def test_com_o_ouvinte_rodando_marcar_e_esquecer_sao_recusados_pela_trava(novo_ouvinte):
    o = novo_ouvinte()
    rodar_once(o)
    e0 = o.erp.escopos[0]
    processo = o.iniciar('--intervalo-dados=3600')
    try:
        # De pe: o status ja e deste processo (a trava foi pega antes dele).
        esperar(lambda: _pid_no_status(o) == processo.pid, 60)
        antes = o.estado()
        codigo, saida, erro = estado_py(o, 'marcar', DATASET, '2026-09-01 10:50:00', '--sim')
        assert codigo == 2, saida + erro
        assert TRAVA in erro and 'pid %s' % processo.pid in erro, erro
        codigo, saida, erro = estado_py(o, 'esquecer-carga', e0, '--sim')
        assert codigo == 2 and TRAVA in erro, saida + erro
        assert o.estado()['marca_agua'][DATASET] == antes['marca_agua'][DATASET]
        # mostrar so le: roda ao lado do ouvinte.
        codigo, saida, erro = estado_py(o, 'mostrar', '--json')
        assert codigo == 0, erro
        retrato = json.loads(saida)
        assert [d['marca_agua'] for d in retrato['datasets'] if d['dataset'] == DATASET] == [
            antes['marca_agua'][DATASET]
        ]
    finally:
        processo.send_signal(signal.SIGTERM)
        assert processo.wait(60) == 0, o.saida()
    # Parado, a mesma ferramenta pega a trava e grava.
    codigo, saida, erro = estado_py(o, 'marcar', DATASET, '2026-09-01 10:50:00', '--sim')
    assert codigo == 0, saida + erro
    assert o.estado()['marca_agua'][DATASET] == '2026-09-01T10:50:00'


# ---------------------------------------------------------------------------
# sem ouvinte: a marca muda e o proximo ciclo faz o anunciado
# ---------------------------------------------------------------------------


@pytest.mark.parametrize('tipo', BANCOS)
def test_marca_que_avanca_pula_o_que_ficou_para_tras_e_o_ciclo_entrega_o_depois(novo_ouvinte, tipo):
    o = novo_ouvinte(tipo)
    e0 = o.erp.escopos[0]
    rodar_once(o)  # marca inicial: 10:44:00
    assert o.estado()['marca_agua'][DATASET] == '2026-09-01T10:44:00'
    # r0 fica dentro da folga antes da marca nova, r1 entre as duas marcas: ambas
    # puladas; r2 depois da marca nova: entregue.
    r0 = o.inserir(e0, '2026-09-01 11:04:00')
    r1 = o.inserir(e0, '2026-09-01 10:50:00')
    r2 = o.inserir(e0, '2026-09-01 11:10:00')
    codigo, saida, erro = estado_py(o, 'marcar', DATASET, '2026-09-01 11:05:00', '--sim')
    assert codigo == 0, saida + erro
    assert (
        'a marca de água de titulos_a_receber vai de 2026-09-01T10:44:00 para'
        ' 2026-09-01T11:05:00: as 2 linha(s) com carimbo entre 2026-09-01T10:44:00 e'
        ' 2026-09-01T11:05:00 NÃO serão entregues ao vivo; só a varredura as trará.' in saida
    ), saida
    assert 'depois de 2026-09-01T11:05:00 (1 linha(s) agora)' in saida, saida
    assert o.estado()['marca_agua'][DATASET] == '2026-09-01T11:05:00'

    saida = rodar_once(o)
    chegou = set(o.no_contextia(e0))
    assert r2 in chegou and r0 not in chegou and r1 not in chegou, (chegou, saida)
    assert o.estado()['acompanhamento'][DATASET]['enviados_ultimo_ciclo'] == 1
    # A janela da folga dada por entregue nao volta como chegada atrasada.
    assert 'CHEGADA(S) ATRASADA(S)' not in saida
    assert o.estado()['marca_agua'][DATASET] == '2026-09-01T11:10:00'

    # `max`: o maximo da origem agora; o que entra depois dele chega.
    r3 = o.inserir(e0, '2026-09-01 11:20:00')
    codigo, saida, erro = estado_py(o, 'marcar', DATASET, 'max', '--sim')
    assert codigo == 0, saida + erro
    assert (
        'vai de 2026-09-01T11:10:00 para 2026-09-01T11:20:00: as 1 linha(s) com carimbo' in saida
    ), saida
    r4 = o.inserir(e0, '2026-09-01 11:30:00')
    rodar_once(o)
    chegou = set(o.no_contextia(e0))
    assert r4 in chegou and r3 not in chegou, chegou


@pytest.mark.parametrize('tipo', BANCOS)
def test_marca_que_recua_rele_e_reenvia_o_que_tem_carimbo_depois_dela(novo_ouvinte, tipo):
    o = novo_ouvinte(tipo)
    e0, e1 = o.erp.escopos
    rodar_once(o)  # marca inicial: 10:44:00, nada enviado
    novo = o.inserir(e0, '2026-09-01 11:00:00')
    rodar_once(o)
    assert set(o.no_contextia(e0)) == {novo}
    # Uma correcao que nao mexeu no carimbo: o ao-vivo nao a ve...
    corrigido = o.erp.base * 1000 + 41  # e0, n=40: carimbo 10:40:00
    o.erp.executar('UPDATE {TITULOS} SET {VALOR} = 555.55 WHERE {ID} = :i', i=corrigido)
    rodar_once(o)
    assert corrigido not in o.no_contextia(e0)

    # ...ate a marca recuar para antes dele.
    codigo, saida, erro = estado_py(o, 'marcar', DATASET, '2026-09-01 10:30:00', '--sim')
    assert codigo == 0, saida + erro
    # Depois de 10:30: e0 n=31..44 (14) e o novo; a outra empresa so vai ate 10:29.
    assert (
        'a marca de água de titulos_a_receber vai de 2026-09-01T11:00:00 para'
        ' 2026-09-01T10:30:00 (recua): as 15 linha(s) com carimbo depois de'
        ' 2026-09-01T10:30:00 serão relidas e reenviadas' in saida
    ), saida

    saida = rodar_once(o)
    registros = o.no_contextia(e0)
    base = o.erp.base * 1000
    assert set(registros) == {base + n + 1 for n in range(31, 45)} | {novo}, sorted(registros)
    assert float(registros[corrigido]['VALOR']) == 555.55
    assert o.no_contextia(e1) == {}
    acomp = o.estado()['acompanhamento'][DATASET]
    assert acomp['enviados_ultimo_ciclo'] == 15
    assert acomp.get('iguais', 0) == 1  # o `novo`, que ja estava la
    assert o.estado()['marca_agua'][DATASET] == '2026-09-01T11:00:00'


def test_esquecer_carga_e_o_ciclo_de_projetos_nao_a_refaz(novo_ouvinte):
    o = novo_ouvinte()
    e0 = o.erp.escopos[0]
    rodar_once(o)
    o.mudar_estado(cargas_iniciais_pendentes=[e0])
    codigo, saida, erro = estado_py(o, 'esquecer-carga', e0, '--sim')
    assert codigo == 0, saida + erro
    assert (
        'a carga inicial pendente da empresa %s será esquecida: o ouvinte não a refaz' % e0
    ) in saida
    assert o.estado()['cargas_iniciais_pendentes'] == []
    saida = rodar_once(o)
    assert 'ficou pela metade' not in saida and 'carga inicial %s' % e0 not in saida, saida
    assert o.no_contextia(e0) == {}
    # Esquecer de novo: nada pendente, recusa que diz o que ha.
    codigo, saida, erro = estado_py(o, 'esquecer-carga', e0, '--sim')
    assert codigo == 2
    assert 'A empresa %s não tem carga inicial pendente' % e0 in erro, erro
    assert 'Pendentes: nenhuma.' in erro


# ---------------------------------------------------------------------------
# mostrar
# ---------------------------------------------------------------------------


def test_mostrar_em_tabela_e_em_json(novo_ouvinte):
    from contextia_sync.fila.quarentena import Quarentena

    o = novo_ouvinte()
    e0 = o.erp.escopos[0]
    rodar_once(o)
    o.mudar_estado(
        pendentes_varredura={DATASET: '25000 linhas em 2026-09-01 11:00:00'},
        cargas_iniciais_pendentes=['777'],
    )
    Quarentena(os.path.join(o.estado_dir, 'quarentena')).guardar(
        DATASET, e0, 'ID', {'ID': 1, 'VALOR': 'NaN'}, 'HTTP 422: VALOR inválido', status_http=422
    )

    codigo, saida, erro = estado_py(o, 'mostrar', '--json', '--mapping=' + o.mapa)
    assert codigo == 0, erro
    retrato = json.loads(saida)
    assert retrato['versao'] == 1
    assert retrato['estado'] == os.path.join(o.estado_dir, 'ouvinte-estado.json')
    assert retrato['cargas_iniciais_pendentes'] == ['777']
    assert retrato['quarentena'] == {'total': 1, 'por_dataset': {DATASET: 1}}
    titulos, status = retrato['datasets']
    assert titulos['dataset'] == DATASET and titulos['ao_vivo'] is True
    assert titulos['watch_column'] == 'ALTERADO_EM'
    assert titulos['marca_agua'] == '2026-09-01T10:44:00'
    assert titulos['ultima_sonda_ok_em'] == o.estado()['acompanhamento'][DATASET]['ultima_sonda']
    assert titulos['entregue_a_varredura'] == '25000 linhas em 2026-09-01 11:00:00'
    assert titulos['quarentena'] == 1 and titulos['falhas_seguidas'] == 0
    # A janela entregue mora no SQLite do dataset (estado/janela.py), não no JSON.
    assert 'vistos' not in o.estado()
    janela = JanelaEntregue(caminho_da_janela(o.estado_dir, DATASET))
    assert titulos['janela_lembrada'] == len(janela) > 0
    assert status == dict(
        status, dataset='status', ao_vivo=False, motivo='watch_column: null', marca_agua=None
    )

    codigo, saida, erro = estado_py(o, 'mostrar')
    assert codigo == 0, erro
    assert 'cargas iniciais pendentes: 777 (o próximo ciclo de projetos as refaz)' in saida
    assert 'quarentena .......: 1 registro(s)' in saida
    linha = [x for x in saida.splitlines() if x.startswith(DATASET)][0]
    assert '2026-09-01T10:44:00' in linha
    assert 'ENTREGUE À VARREDURA (25000 linhas em 2026-09-01 11:00:00)' in linha
    # Sem --mapping, o dataset fora do ao-vivo nao aparece (o estado nao o conhece).
    assert not [x for x in saida.splitlines() if x.startswith('status ')], saida


# ---------------------------------------------------------------------------
# recusas e confirmacao
# ---------------------------------------------------------------------------


def test_marcar_recusa_o_que_nao_serve_e_nao_grava(novo_ouvinte):
    o = novo_ouvinte()
    rodar_once(o)
    antes = o.estado()
    casos = [
        (
            ('marcar', DATASET, '01/09/2026 10:00', '--sim'),
            "O valor '01/09/2026 10:00' não serve de marca para titulos_a_receber: a coluna de"
            ' mudança ALTERADO_EM é datetime no catálogo da origem.',
        ),
        (
            ('marcar', DATASET, '2099-01-01 00:00:00', '--sim'),
            'O valor 2099-01-01T00:00:00 está no futuro da origem',
        ),
        (
            ('marcar', 'nao_existe', 'max', '--sim'),
            "O dataset 'nao_existe' não está no mapeamento.\nOs datasets ao vivo dele:"
            ' titulos_a_receber.',
        ),
        (
            ('marcar', 'Status', 'max', '--sim'),
            'O dataset status está fora do ao-vivo (watch_column: null): não tem marca de água.',
        ),
        # Sem terminal e sem --sim: nada de confirmar por omissao.
        (('marcar', DATASET, '2026-09-01 10:00:00'), 'sem terminal para confirmar: nada mudou.'),
    ]
    for argv, mensagem in casos:
        codigo, saida, erro = estado_py(o, *argv, entrada='')
        assert codigo == 2, (argv, saida, erro)
        assert mensagem in erro, (argv, erro)
        assert 'Traceback' not in erro
    assert o.estado() == antes
    # O mesmo valor que ja esta: nada muda, nada a confirmar.
    codigo, saida, erro = estado_py(o, 'marcar', DATASET, '2026-09-01T10:44:00')
    assert codigo == 0 and 'já é 2026-09-01T10:44:00: nada muda.' in saida, saida + erro
    assert o.estado() == antes


def _num_terminal(o, argv, resposta):
    """`estado.py` com a entrada num pseudo-terminal de verdade; responde `resposta`."""
    mestre, escravo = pty.openpty()
    try:
        processo = subprocess.Popen(
            [sys.executable, 'estado.py']
            + argv
            + ['--estado=' + o.estado_dir, '--mapping=' + o.mapa],
            cwd=RAIZ,
            env=o.env(),
            stdin=escravo,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        os.write(mestre, resposta.encode() + b'\n')
        saida, erro = processo.communicate(timeout=120)
    finally:
        os.close(mestre)
        os.close(escravo)
    return processo.returncode, saida, erro


def test_confirmacao_num_terminal(novo_ouvinte):
    o = novo_ouvinte()
    rodar_once(o)
    antes = o.estado()
    codigo, saida, erro = _num_terminal(o, ['marcar', DATASET, '2026-09-01 10:00:00'], 'n')
    assert codigo == 1, saida + erro
    assert 'Confirma? [s/N]' in saida and 'não confirmado: nada mudou.' in saida
    assert o.estado() == antes
    codigo, saida, erro = _num_terminal(o, ['marcar', DATASET, '2026-09-01 10:00:00'], 's')
    assert codigo == 0, saida + erro
    assert 'feito: a marca de água de titulos_a_receber agora é 2026-09-01T10:00:00' in saida
    assert o.estado()['marca_agua'][DATASET] == '2026-09-01T10:00:00'
