"""
A saúde (`ouvinte.py --saude`, contextia_sync/saude.py): uma linha, os dados de
desempenho depois da barra, e o código de um plugin de monitoramento (0 OK,
1 ALERTA, 2 CRITICO, 3 DESCONHECIDO).

Os testes caros são processos de verdade: o ouvinte.py contra o Contextia local
e um ERP SQLite, e a saúde lendo o `ouvinte-status.json` que ele escreveu --
cada um confere o código de saída E a linha. Os de baixo (`avaliar` sobre um
status montado a mão) cobrem as regras que um processo de verdade levaria
horas para mostrar (varredura de 27 h, ferramenta de duas horas).
"""

import datetime
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import pytest

from contextia_sync import padroes, saude
from tests.apoio.ouvinte import DATASET, RAIZ, Ouvinte, esperar
from tests.dados import erp as erp_teste

VIEW = 'titulos_view'
LINHA = re.compile(r'^OUVINTE (OK|ALERTA|CRITICO|DESCONHECIDO) - (.+?)(?: \| (.+))?$')
CODIGOS = {'OK': 0, 'ALERTA': 1, 'CRITICO': 2, 'DESCONHECIDO': 3}


# ---------------------------------------------------------------- ajudantes
def rodar_saude(estado, *extra, programa=('ouvinte.py', '--saude')):
    """(código, linha) de `ouvinte.py --saude --estado DIR ...`: UMA linha, sempre."""
    argv = (
        [sys.executable]
        + list(programa)
        + (['--estado=' + str(estado)] if estado is not None else [])
        + list(extra)
    )
    feito = subprocess.run(argv, cwd=RAIZ, capture_output=True, text=True, timeout=60)
    assert feito.stderr == '', feito.stderr
    assert feito.stdout.endswith('\n') and feito.stdout.count('\n') == 1, feito.stdout
    linha = feito.stdout.rstrip('\n')
    print(linha)  # o pytest mostra as linhas do teste que falhou
    achado = LINHA.match(linha)
    assert achado, linha
    # O codigo e o da palavra da linha (o Nagios mostra uma e age pelo outro).
    assert feito.returncode == CODIGOS[achado.group(1)], (feito.returncode, linha)
    return feito.returncode, linha


def perf(linha):
    """{rotulo: valor} dos dados de desempenho ('idade_status=12s;;1200;0' -> 12)."""
    dados = {}
    for item in linha.split(' | ', 1)[1].split():
        rotulo, _, resto = item.partition('=')
        dados[rotulo] = float(re.match(r'-?[\d.]+', resto).group(0))
    return dados


def status_json(o):
    try:
        with open(os.path.join(o.estado_dir, 'ouvinte-status.json')) as arquivo:
            return json.load(arquivo)
    except (OSError, ValueError):
        return None


def dataset_no_status(o, nome):
    dados = status_json(o) or {'datasets': []}
    return next((d for d in dados['datasets'] if d['dataset'] == nome), None)


def porta_fechada():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def hora_longe():
    """Uma --varredura HH:MM a 12 h daqui: fora da janela, nunca dispara sozinha."""
    return (datetime.datetime.now() + datetime.timedelta(hours=12)).strftime('%H:%M')


def parar(processo, sinal=signal.SIGTERM, prazo=60):
    if processo.poll() is None:
        processo.send_signal(sinal)
    try:
        return processo.wait(timeout=prazo)
    finally:
        if processo.poll() is None:
            processo.kill()
            processo.wait()


@pytest.fixture
def ouvinte(tmp_path, fabrica_de_bancos, ambiente_contextia, chave_contextia):
    erp = erp_teste.Erp(fabrica_de_bancos('sqlite', 'erp'))
    yield Ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia)
    erp.fechar()


@pytest.fixture
def processos():
    """Os ouvintes em serviço que o teste subiu: nenhum fica para trás."""
    subidos = []
    yield subidos
    for processo in subidos:
        if processo.poll() is None:
            processo.kill()
            processo.wait()


def subir(o, processos, *extra, env=None):
    """O ouvinte em serviço (intervalo de 1 s); volta quando o status JSON existe."""
    if env is None:
        processo = o.iniciar(*extra)
    else:
        o.log = open(str(o.pasta / ('ouvinte-%d.log' % time.monotonic_ns())), 'w+b')
        processo = subprocess.Popen(
            o.argv(*extra), cwd=RAIZ, env=env, stdout=o.log, stderr=subprocess.STDOUT
        )
    processos.append(processo)
    esperar(
        lambda: (
            processo.poll() is not None
            or (status_json(o) or {}).get('ouvinte', {}).get('pid') == processo.pid
        ),
        90,
    )
    assert processo.poll() is None, o.saida()
    return processo


# ---------------------------------------------------------------- argumentos
@pytest.mark.parametrize(
    'argumentos',
    [
        [],
        ['--estado'],
        ['--estado=/tmp', '--opcao-que-nao-existe'],
        ['--estado=/tmp', '--max-idade', 'vinte'],
        ['--estado=/tmp', '--max-falhas', '0'],
        ['--estado=/tmp', '--intervalos=1.5'],
        ['--estado=/tmp', 'sobra'],
        ['--estado=/tmp', '--max-idade'],
        ['--estado=/tmp', '--sem-pid=sim'],
    ],
)
def test_argumento_invalido_e_desconhecido_3(argumentos):
    # Com o argparse cru seria 2 -- que para o Nagios quer dizer CRITICO.
    feito = subprocess.run(
        [sys.executable, 'ouvinte.py', '--saude'] + argumentos,
        cwd=RAIZ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert feito.returncode == 3, feito.stdout + feito.stderr
    assert feito.stdout.startswith('OUVINTE DESCONHECIDO - argumento inválido: ')
    assert feito.stdout.count('\n') == 1 and feito.stderr == ''
    assert 'ouvinte.py --saude --help' in feito.stdout
    # Em portugues, como o resto do que o operador le.
    assert 'required' not in feito.stdout and 'unrecognized' not in feito.stdout


def test_pasta_de_estado_que_nao_existe_e_desconhecido(tmp_path):
    codigo, linha = rodar_saude(tmp_path / 'nao-existe')
    assert codigo == 3 and 'não existe' in linha and 'nao-existe' in linha
    # O modulo direto (o que o verificar-saude.sh chama) diz o mesmo.
    codigo, linha = rodar_saude(tmp_path / 'nao-existe', programa=('-m', 'contextia_sync.saude'))
    assert codigo == 3


def test_pasta_sem_status_e_critico(tmp_path):
    codigo, linha = rodar_saude(tmp_path)
    assert codigo == 2 and 'ouvinte-status.json não existe' in linha
    assert 'nunca completou' in linha
    (tmp_path / 'ouvinte-status.json').write_text('{"versao": 1, "ouvi')
    codigo, linha = rodar_saude(tmp_path)
    assert codigo == 2 and 'ilegível' in linha


def test_help_em_portugues_com_os_codigos():
    feito = subprocess.run(
        [sys.executable, 'ouvinte.py', '--saude', '--help'],
        cwd=RAIZ,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, COLUMNS='200'),
    )
    assert feito.returncode == 0, feito.stderr
    texto = feito.stdout
    assert texto.startswith('uso: ouvinte.py --saude')
    for trecho in (
        '0 OK',
        '1 ALERTA',
        '2 CRITICO',
        '3 DESCONHECIDO',
        '--max-idade',
        '--max-sem-sonda',
        '--max-falhas',
        '--max-varredura',
        '--max-ferramenta',
        '--sem-pid',
        '--intervalos',
        'mostra esta ajuda',
    ):
        assert trecho in texto, trecho
    assert 'show this help' not in texto
    # Os padroes do --help sao os de padroes.py.
    assert 'padrão %d' % padroes.SAUDE_FALHAS in texto
    assert '%d s' % padroes.SAUDE_IDADE_MINIMA in texto
    assert 'padrão %d s' % padroes.SAUDE_VARREDURA in texto


# ---------------------------------------------------------------- processos de verdade
@pytest.mark.lento
def test_view_que_falha_e_alerta_e_depois_critico(ouvinte, processos):
    o = ouvinte
    o.erp.executar('CREATE VIEW {V_TITULOS} AS SELECT * FROM {TITULOS}')
    with open(o.mapa) as arquivo:
        mapa = json.load(arquivo)
    mapa['datasets'].append(
        {
            'dataset': 'Titulos View',
            'source_object': 'V_TITULOS',
            'columns': ['ID', 'EMPRESA_ID', 'CLIENTE', 'VALOR', 'VENCIMENTO', 'ALTERADO_EM'],
        }
    )
    with open(o.mapa, 'w') as arquivo:
        json.dump(mapa, arquivo)
    processo = subir(o, processos)
    esperar(
        lambda: all(
            (dataset_no_status(o, n) or {}).get('ultima_sonda_ok_em') for n in (DATASET, VIEW)
        ),
        60,
    )
    codigo, linha = rodar_saude(o.estado_dir)
    assert codigo == 0, linha
    assert linha.startswith(
        'OUVINTE OK - ouvinte ativo (serviço, pid %d), 2 dataset(s) ao vivo' % processo.pid
    ), linha
    assert perf(linha)['datasets_ao_vivo'] == 2 and perf(linha)['falhas_seguidas'] == 0

    # A view some do ERP: a leitura DELA falha a cada ciclo, a outra segue.
    o.erp.executar('DROP VIEW {V_TITULOS}')
    esperar(lambda: (dataset_no_status(o, VIEW) or {}).get('falhas_seguidas', 0) >= 1, 60)
    # Antes (issue 13): "OK: ouvinte vivo". Com limites folgados, a falha ja e ALERTA...
    codigo, linha = rodar_saude(o.estado_dir, '--max-falhas=1000', '--max-sem-sonda=1h')
    assert codigo == 1, linha
    assert 'dataset %s sem ciclo bom' % VIEW in linha and 'V_TITULOS' in linha, linha
    assert 'dataset %s' % DATASET not in linha, linha
    # ...e com os padroes, --max-falhas (3) ciclos seguidos depois, CRITICO.
    esperar(lambda: (dataset_no_status(o, VIEW) or {}).get('falhas_seguidas', 0) >= 3, 60)
    codigo, linha = rodar_saude(o.estado_dir)
    assert codigo == 2, linha
    assert linha.startswith('OUVINTE CRITICO - dataset %s sem ciclo bom há ' % VIEW), linha
    assert 'no such table' in linha and 'falha(s) seguida(s)' in linha
    assert perf(linha)['falhas_dataset_max'] >= 3
    assert processo.poll() is None

    # A view volta: o proximo ciclo dela e bom, e a saude volta a OK sozinha.
    o.erp.executar('CREATE VIEW {V_TITULOS} AS SELECT * FROM {TITULOS}')
    esperar(
        lambda: (
            (dataset_no_status(o, VIEW) or {}).get('falhas_seguidas') == 0
            and (status_json(o) or {}).get('ouvinte', {}).get('falhas_seguidas') == 0
        ),
        60,
    )
    codigo, linha = rodar_saude(o.estado_dir)
    assert codigo == 0, linha
    assert parar(processo) == 0, o.saida()


@pytest.mark.lento
def test_contextia_fora_por_um_ciclo_e_critico(ouvinte, processos):
    o = ouvinte
    e0 = o.erp.escopos[0]
    assert o.rodar('--once')[0] == 0
    novo = o.inserir(e0, '2026-09-01 11:00:00')
    # Contextia fora: a SONDA na origem continua boa (ultima_sonda_ok_em anda), o
    # que falha e o envio -- por isso a saude olha o ciclo inteiro do dataset.
    env = dict(
        o.env(), CONTEXTIA_URL='http://127.0.0.1:%d' % porta_fechada(), CONTEXTIA_PRAZO_ENVIO='3'
    )
    processo = subir(o, processos, env=env)
    esperar(lambda: (dataset_no_status(o, DATASET) or {}).get('falhas_seguidas', 0) >= 1, 120)
    ds = dataset_no_status(o, DATASET)
    assert ds['ultimo_erro'] and ds['ultima_sonda_ok_em'], ds
    # Antes (issue 13): "falhas seguidas: 0" no status e OK na saude. Sem ciclo bom
    # por mais de --intervalos (3) x --intervalo-dados (1 s): CRITICO.
    codigo, linha = esperar(
        lambda: (lambda r: r if r[0] == 2 else None)(rodar_saude(o.estado_dir)), 30
    )
    assert codigo == 2, linha
    assert linha.startswith('OUVINTE CRITICO - dataset %s sem ciclo bom há ' % DATASET), linha
    assert 'escopo %s' % e0 in linha, linha
    assert perf(linha)['sem_ciclo_bom_max'] > 3
    # Com limites folgados ainda e ALERTA, nunca OK.
    codigo, linha = rodar_saude(o.estado_dir, '--max-sem-sonda=1h', '--max-falhas=1000')
    assert codigo == 1, linha
    assert 'dataset %s sem ciclo bom' % DATASET in linha
    assert parar(processo) == 0, o.saida()

    # O Contextia volta: um --once entrega, e a saude diz OK.
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    assert novo in o.no_contextia(e0)
    codigo, linha = rodar_saude(o.estado_dir)
    assert codigo == 0, linha
    assert linha.startswith('OUVINTE OK - última execução once de '), linha


@pytest.mark.lento
def test_varredura_que_falha_persiste_depois_de_reiniciar(ouvinte):
    o = ouvinte
    hora = '--varredura=' + hora_longe()
    assert o.rodar('--once', hora)[0] == 0
    # Com a varredura diaria ligada e nenhuma registrada: ALERTA, nao OK.
    codigo, linha = rodar_saude(o.estado_dir)
    assert codigo == 1 and 'nenhuma varredura boa registrada' in linha, linha

    # A varredura com o intake do Contextia recusando tudo (500): carregar-todas falha.
    o.contextia.taxa_de_falhas({'500': 1.0})
    try:
        codigo, saida = o.rodar('--once', hora, '--varrer-agora')
    finally:
        o.contextia.limpar_falhas()
    assert codigo == 1, saida
    codigo, linha = rodar_saude(o.estado_dir)
    assert codigo == 2, linha
    assert re.search(r'a varredura de \S+ falhou: ', linha), linha
    assert 'carregar-todas' in linha or 'provisionar' in linha, linha
    assert o.estado()['varredura']['ok'] is False

    # Um --once comum depois (outro processo, o Contextia de volta): o ouvinte esta
    # bem, mas a varredura falha continua no estado, e a saude continua CRITICO.
    codigo, saida = o.rodar('--once', hora)
    assert codigo == 0, saida
    codigo, linha = rodar_saude(o.estado_dir)
    assert codigo == 2 and 'falhou' in linha, linha

    # Ate uma varredura boa.
    codigo, saida = o.rodar('--once', hora, '--varrer-agora')
    assert codigo == 0, saida
    codigo, linha = rodar_saude(o.estado_dir)
    assert codigo == 0, linha
    assert 'última varredura boa em' in linha
    assert perf(linha)['idade_varredura_ok'] < 120

    # A boa envelhece (27 h, no estado): com a diaria ligada e CRITICO; desligada, nao.
    velha = (datetime.datetime.now() - datetime.timedelta(hours=27)).isoformat(timespec='seconds')
    o.mudar_estado(varredura={'ultima_ok_em': velha})
    assert o.rodar('--once', hora)[0] == 0
    codigo, linha = rodar_saude(o.estado_dir)
    assert codigo == 2 and 'a última varredura boa foi há 27.0h' in linha, linha
    codigo, linha = rodar_saude(o.estado_dir, '--max-varredura=28h')
    assert codigo == 0, linha
    assert o.rodar('--once')[0] == 0  # --varredura=nao
    codigo, linha = rodar_saude(o.estado_dir)
    assert codigo == 0 and 'varredura' in linha, linha


@pytest.mark.lento
def test_registro_na_quarentena_e_alerta(
    tmp_path, fabrica_de_bancos, fabrica_contextia, ambiente_contextia, monkeypatch
):
    # Um registro maior que o limite de bytes do intake: 413 sozinho, quarentena.
    servidor = fabrica_contextia(max_bytes_lote=3000)
    monkeypatch.setenv('CONTEXTIA_URL', servidor.url)
    erp = erp_teste.Erp(fabrica_de_bancos('sqlite', 'erp'))
    try:
        o = Ouvinte(tmp_path, erp, servidor, servidor.criar_projeto_com_chave)
        e0 = erp.escopos[0]
        assert o.rodar('--once')[0] == 0
        bom = o.inserir(e0, '2026-09-01 11:00:00')
        grande = o.inserir(e0, '2026-09-01 11:00:01')
        erp.executar('UPDATE {TITULOS} SET {CLIENTE} = :c WHERE {ID} = :i', c='x' * 5000, i=grande)
        codigo, saida = o.rodar('--once')
        assert codigo == 0, saida
        assert bom in o.no_contextia(e0) and grande not in o.no_contextia(e0)
    finally:
        erp.fechar()
    codigo, linha = rodar_saude(o.estado_dir)
    assert codigo == 1, linha
    assert linha.startswith('OUVINTE ALERTA - 1 registro(s) na quarentena (%s 1)' % DATASET)
    assert '--reenviar-quarentena' in linha
    assert perf(linha)['quarentena'] == 1
    # A casca do deploy diz o mesmo, com o mesmo codigo.
    feito = subprocess.run(
        ['bash', os.path.join(RAIZ, 'deploy', 'verificar-saude.sh'), o.estado_dir],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert feito.returncode == 1, feito.stdout + feito.stderr
    assert feito.stdout.count('\n') == 1 and feito.stdout.split(' | ')[0] == linha.split(' | ')[0]


@pytest.mark.lento
def test_parada_limpa_do_servico_e_critico_e_o_once_parado_nao(ouvinte, processos):
    o = ouvinte
    processo = subir(o, processos)
    codigo, linha = rodar_saude(o.estado_dir)
    assert codigo == 0 and 'ouvinte ativo (serviço, pid %d)' % processo.pid in linha, linha
    assert parar(processo) == 0, o.saida()
    dados = status_json(o)
    assert dados['ouvinte']['situacao'] == 'parado' and dados['ouvinte']['modo'] == 'servico'
    # Antes (issue 13): o status dizia "ativo" com o pid morto, e a saude, OK.
    codigo, linha = rodar_saude(o.estado_dir)
    assert codigo == 2, linha
    assert linha.startswith('OUVINTE CRITICO - ouvinte PARADO: o serviço saiu em '), linha
    # O --once do cron termina "parado" toda vez: ali parado e o normal.
    assert o.rodar('--once')[0] == 0
    codigo, linha = rodar_saude(o.estado_dir)
    assert codigo == 0, linha
    # ...e o que conta e a idade do status.
    time.sleep(2.2)
    codigo, linha = rodar_saude(o.estado_dir, '--max-idade=1')
    assert codigo == 2, linha
    assert 'não é atualizado há' in linha and 'o cron parou?' in linha, linha
    assert perf(linha)['idade_status'] >= 2


@pytest.mark.lento
def test_servico_morto_com_kill_9_e_critico_na_hora(ouvinte, processos):
    o = ouvinte
    processo = subir(o, processos)
    assert rodar_saude(o.estado_dir)[0] == 0
    assert parar(processo, signal.SIGKILL) == -signal.SIGKILL
    assert status_json(o)['ouvinte']['situacao'] == 'rodando'
    # O status ainda e novo, mas o pid dele nao existe: nao precisa esperar 20 min.
    codigo, linha = rodar_saude(o.estado_dir)
    assert codigo == 2, linha
    assert 'o ouvinte (pid %d) morreu sem parar' % processo.pid in linha, linha
    # --sem-pid (a saude noutro namespace de pid): so a idade pode dizer.
    assert rodar_saude(o.estado_dir, '--sem-pid')[0] == 0
    time.sleep(2.2)
    codigo, linha = rodar_saude(o.estado_dir, '--sem-pid', '--max-idade=2')
    assert codigo == 2 and 'o ouvinte parou ou travou' in linha, linha


# ---------------------------------------------------------------- as regras, num status montado
AGORA = datetime.datetime(2026, 12, 1, 12, 0, 0)


def _iso(segundos_atras):
    return (AGORA - datetime.timedelta(seconds=segundos_atras)).isoformat(timespec='seconds')


def _texto(segundos_atras):
    return (AGORA - datetime.timedelta(seconds=segundos_atras)).strftime('%Y-%m-%d %H:%M:%S')


def status_bom(**ouvinte):
    """Um status como o do serviço saudável: intervalo de 60 s, varredura as 03:30."""
    dados = {
        'versao': 1,
        'ouvinte': dict(
            {
                'pid': 4242,
                'situacao': 'rodando',
                'modo': 'servico',
                'iniciado_em': _iso(86400 * 3),
                'atualizado_em': _iso(5),
                'intervalo_dados_s': 60,
                'folga_s': 180,
                'falhas_seguidas': 0,
                'datasets_ao_vivo': 1,
                'datasets_total': 2,
            },
            **ouvinte,
        ),
        'ciclos': {'dados': {'em': _iso(5), 'erros': 0}},
        'varredura': {
            'hora': '03:30',
            'ultima_em': AGORA.date().isoformat(),
            'iniciada_em': _iso(30000),
            'terminada_em': _iso(29000),
            'ok': True,
            'erros': [],
            'nao_fechados': {},
            'ultima_ok_em': _iso(29000),
        },
        'ferramenta': None,
        'quarentena': {'total': 0, 'por_dataset': {}},
        'cargas_iniciais_pendentes': [],
        'entregues_a_varredura': {},
        'datasets': [
            {
                'dataset': DATASET,
                'ao_vivo': True,
                'ultima_sonda_ok_em': _texto(6),
                'segundos_desde_sonda_ok': 1.0,
                'quarentena': 0,
                'sem_carimbo': 0,
                'futuras': 0,
                'maior_atraso_s': None,
                'atraso_preocupante': False,
                'ultimo_erro': None,
                'erro_desde': None,
                'falhas_seguidas': 0,
                'entregue_a_varredura': None,
            },
            {'dataset': 'status', 'ao_vivo': False, 'motivo': 'watch_column: null'},
        ],
    }
    return dados


def avaliar(dados, vivo=True, **limites):
    return saude.avaliar(dados, saude.Limites(**limites), AGORA, vivo=lambda _pid: vivo)


def test_status_bom_e_ok_com_os_dados_de_desempenho():
    v = avaliar(status_bom())
    assert v.nivel == saude.OK, v.linha()
    linha = v.linha()
    assert linha.startswith(
        'OUVINTE OK - ouvinte ativo (serviço, pid 4242), 1 dataset(s) ao'
        ' vivo, status de %s (há 5s), última varredura boa em' % _iso(5)
    )
    assert '\n' not in linha
    dados = perf(linha)
    assert dados['idade_status'] == 5 and dados['idade_varredura_ok'] == 29000
    assert 'idade_status=5s;;1200;0' in linha and 'falhas_seguidas=0;0;2;0' in linha


def test_ferramenta_longa_nao_conta_como_dataset_sem_sonda():
    # Uma varredura de 1h50 em curso: o status e pulsado a cada 30 s, o ultimo
    # ciclo de dados foi antes dela, e nenhum dataset "ficou sem sonda".
    dados = status_bom()
    dados['ciclos'] = {'dados': {'em': _iso(6600)}}
    dados['datasets'][0]['ultima_sonda_ok_em'] = _texto(6601)
    dados['ferramenta'] = {'rotulo': 'varredura/carregar-todas', 'pid': 99, 'desde': _iso(6590)}
    dados['varredura'].update(iniciada_em=_iso(6595), terminada_em=None, ok=None)
    v = avaliar(dados)
    assert v.nivel == saude.OK, v.linha()
    assert 'varredura em curso desde' in v.linha()
    # Passou de --max-ferramenta: ALERTA (o tempo maximo dela passou e ela segue).
    v = avaliar(dados, max_ferramenta=3600)
    assert v.nivel == saude.ALERTA and 'ferramenta varredura/carregar-todas (pid 99)' in v.linha()
    # A mesma varredura sem ouvinte vivo: morreu no meio.
    v = avaliar(dados, vivo=False)
    assert v.nivel == saude.CRITICO and 'não terminou' in v.linha(), v.linha()


def test_varredura_velha_so_conta_com_a_diaria_ligada():
    dados = status_bom()
    dados['varredura']['ultima_ok_em'] = _iso(27 * 3600)
    v = avaliar(dados)
    assert v.nivel == saude.CRITICO and 'a última varredura boa foi há 27.0h' in v.linha()
    dados['varredura']['hora'] = None
    assert avaliar(dados).nivel == saude.OK


def test_entregue_a_varredura_e_alerta_e_critico_sem_a_diaria():
    dados = status_bom()
    dados['datasets'][0]['entregue_a_varredura'] = '25000 linhas em 2026-12-01 11:00:00'
    v = avaliar(dados)
    assert v.nivel == saude.ALERTA and 'entregue a varredura das 03:30' in v.linha()
    dados['varredura']['hora'] = None
    v = avaliar(dados)
    assert v.nivel == saude.CRITICO and 'parado até um --varrer-agora' in v.linha()


def test_dado_sujo_e_alerta():
    dados = status_bom()
    dados['datasets'][0].update(
        sem_carimbo=2, futuras=1, maior_atraso_s=120.0, atraso_preocupante=True
    )
    v = avaliar(dados)
    assert v.nivel == saude.ALERTA, v.linha()
    linha = v.linha()
    for trecho in (
        '2 linha(s) sem carimbo',
        '1 linha(s) com carimbo no futuro',
        'chegada atrasada de 120s passou da metade da folga (180s)',
    ):
        assert trecho in linha, linha
    assert perf(linha)['sem_carimbo'] == 2 and perf(linha)['maior_atraso'] == 120


def test_key_nula_e_key_repetida_sao_alerta():
    # Linhas fora do Contextia pela key (intake/chaves.py): o status as diz, e a
    # saúde também -- nada fica de fora calado.
    dados = status_bom()
    assert avaliar(dados).nivel == saude.OK
    dados['datasets'][0].update(
        chaves_nulas=3, chaves_repetidas=["key 'K1' repetida em 2 linhas de titulos na empresa 10"]
    )
    v = avaliar(dados)
    assert v.nivel == saude.ALERTA, v.linha()
    assert '3 linha(s) com a key nula ficaram de fora' in v.linha()
    assert "key repetida na view (key 'K1' repetida" in v.linha()


def test_falhas_do_laco_alerta_e_critico():
    dados = status_bom(falhas_seguidas=2)
    dados['ciclos']['falha'] = {'em': _iso(5), 'erro': 'OperationalError: conexão | recusada\n'}
    v = avaliar(dados)
    assert v.nivel == saude.ALERTA, v.linha()
    assert (
        '2 volta(s) seguida(s) do laço com falha (última: OperationalError: conexão /'
        ' recusada)' in v.linha()
    )
    # Um "|" no texto do erro quebraria os dados de desempenho: vira "/".
    assert v.linha().count(' | ') == 1
    dados['ouvinte']['falhas_seguidas'] = 3
    assert avaliar(dados).nivel == saude.CRITICO


def test_dataset_que_nunca_sondou_no_servico_e_critico_depois_do_limite():
    dados = status_bom(iniciado_em=_iso(1500))
    dados['datasets'][0]['ultima_sonda_ok_em'] = None
    v = avaliar(dados)
    assert v.nivel == saude.CRITICO and 'nunca sondado nesta subida' in v.linha(), v.linha()
    dados['ouvinte']['iniciado_em'] = _iso(100)
    assert avaliar(dados).nivel == saude.OK


def test_versao_desconhecida_e_secao_faltando_sao_desconhecido():
    dados = status_bom()
    dados['versao'] = 99
    v = avaliar(dados)
    assert v.nivel == saude.DESCONHECIDO and 'versão 99' in v.linha()
    assert avaliar({'versao': 1}).nivel == saude.DESCONHECIDO


def test_relogio_para_tras_usa_a_idade_do_arquivo():
    dados = status_bom(atualizado_em=_iso(-3600))
    v = saude.avaliar(dados, saude.Limites(), AGORA, idade_arquivo=4000.0, vivo=lambda _pid: True)
    assert v.nivel == saude.CRITICO and 'não é atualizado há 4000s' in v.linha(), v.linha()


def test_muitos_motivos_cabem_numa_linha():
    dados = status_bom()
    dados['datasets'] = [
        dict(dados['datasets'][0], dataset='d%d' % n, sem_carimbo=1) for n in range(20)
    ]
    linha = avaliar(dados).linha()
    assert '(+14)' in linha and '\n' not in linha


def test_once_morto_e_alerta_e_o_cron_parado_e_critico():
    # Um --once morto no meio de uma ferramenta: o status diz "rodando", o pid sumiu.
    dados = status_bom(modo='once', atualizado_em=_iso(60))
    v = avaliar(dados, vivo=False)
    assert v.nivel == saude.ALERTA and 'a execução once (pid 4242) morreu' in v.linha()
    # ...e nenhuma execucao depois dele: a idade do status ainda fala.
    dados['ouvinte']['atualizado_em'] = _iso(3600)
    v = avaliar(dados, vivo=False)
    assert v.nivel == saude.CRITICO and 'o cron parou?' in v.linha(), v.linha()


def test_parando_e_dry_run_sao_alerta():
    v = avaliar(status_bom(situacao='parando'))
    assert v.nivel == saude.ALERTA and 'ouvinte parando' in v.linha()
    v = avaliar(status_bom(modo='seco', situacao='parado'))
    assert v.nivel == saude.ALERTA and '--dry-run' in v.linha()


def _com_reconciliacao(**rec):
    """O status bom com `coluna+reconciliacao`: intervalo de 300 s, uma reconciliacao boa."""
    dados = status_bom(intervalo_reconciliacao_s=300, estrategia='coluna+reconciliacao')
    dados['datasets'][0].update(
        captura='coluna+reconciliacao',
        reconciliacao=dict(
            {
                'ativa': True,
                'ultima_em': _texto(60),
                'chaves': 75,
                'removidas': 2,
                'removidas_total': 9,
                'recusa': None,
                'recusa_desde': None,
                'ultimo_erro': None,
                'erro_desde': None,
                'falhas_seguidas': 0,
            },
            **rec,
        ),
    )
    return dados


def test_reconciliacao_boa_e_ok_e_diz_as_chaves_removidas():
    v = avaliar(_com_reconciliacao())
    assert v.nivel == saude.OK, v.linha()
    assert perf(v.linha())['chaves_removidas'] == 2
    assert perf(v.linha())['reconciliacoes_recusadas'] == 0


def test_reconciliacao_recusada_pelo_teto_e_alerta_com_o_motivo():
    recusa = (
        'a reconciliação removeria 45 de 45 chave(s) de empresa 40 (100.0%), acima do'
        ' teto de 50% (o mesmo do complete da varredura): NADA removido'
    )
    v = avaliar(_com_reconciliacao(recusa=recusa, recusa_desde=_texto(600)))
    assert v.nivel == saude.ALERTA, v.linha()
    assert 'reconciliação RECUSADA pelo teto desde %s (nada removido)' % _texto(600) in v.linha(), (
        v.linha()
    )
    assert perf(v.linha())['reconciliacoes_recusadas'] == 1


def test_reconciliacao_que_falha_e_alerta_e_depois_critico():
    erro = '%s ErroOrigem: leitura de V interrompida depois de 12 linha(s)' % _texto(30)
    v = avaliar(_com_reconciliacao(falhas_seguidas=1, ultimo_erro=erro, erro_desde=_texto(30)))
    assert v.nivel == saude.ALERTA and 'reconciliação falhou 1 vez(es)' in v.linha(), v.linha()
    assert 'interrompida depois de 12 linha(s)' in v.linha()
    v = avaliar(_com_reconciliacao(falhas_seguidas=3, ultimo_erro=erro, erro_desde=_texto(900)))
    assert v.nivel == saude.CRITICO, v.linha()


def test_reconciliacao_que_nao_termina_e_alerta():
    v = avaliar(_com_reconciliacao(ultima_em=_texto(3 * 300 + 1300)))
    assert v.nivel == saude.ALERTA and 'reconciliação sem leitura completa há' in v.linha()


def test_dataset_so_da_reconciliacao_tem_o_limite_do_intervalo_dela():
    # Com --intervalo-reconciliacao=3600, a "sonda" do dataset so da reconciliacao e de
    # hora em hora: 40 min sem ela nao e dataset parado.
    dados = _com_reconciliacao(ultima_em=_texto(2400))
    dados['ouvinte']['intervalo_reconciliacao_s'] = 3600
    dados['datasets'][0].update(captura='reconciliacao', ultima_sonda_ok_em=_texto(2400))
    assert avaliar(dados).nivel == saude.OK, avaliar(dados).linha()
    dados['datasets'][0]['captura'] = 'coluna+reconciliacao'
    assert avaliar(dados).nivel == saude.CRITICO
