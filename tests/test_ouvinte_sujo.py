"""
O ao-vivo com o dado sujo do campo (issue 12): o ouvinte.py de verdade contra o
Contextia local e ERPs de verdade (SQLite, PostgreSQL, MariaDB). Cada teste
falha no código de antes da issue 12 e diz por que no seu comentário.
"""

import datetime
import json
import os
import re
import signal
import socket
import subprocess
import time

import pytest

from tests.apoio.ouvinte import DATASET, RAIZ, Ouvinte, esperar
from tests.dados import erp as erp_teste

pytestmark = pytest.mark.lento

# MariaDB guarda TIMESTAMP so ate 2038: "no futuro" aqui e 2037.
FUTURO = '2037-12-01 00:00:00'


@pytest.fixture(
    params=[
        'sqlite',
        pytest.param('postgres', marks=pytest.mark.postgres),
        pytest.param('mariadb', marks=pytest.mark.mariadb),
    ]
)
def ouvinte(request, tmp_path, fabrica_de_bancos, ambiente_contextia, chave_contextia):
    erp = erp_teste.Erp(fabrica_de_bancos(request.param, 'erp'))
    yield Ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia)
    erp.fechar()


@pytest.fixture
def ouvinte_sqlite(tmp_path, fabrica_de_bancos, ambiente_contextia, chave_contextia):
    erp = erp_teste.Erp(fabrica_de_bancos('sqlite', 'erp'))
    yield Ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia)
    erp.fechar()


def _linha_dados(status):
    return [x for x in status.splitlines() if x.startswith('dados ')][0]


# -- 1. ciclo ocioso nao reenvia a janela da folga -----------------------------


def test_ciclo_ocioso_envia_zero_registros(ouvinte):
    o = ouvinte
    assert o.rodar('--once')[0] == 0  # primeira vez: so a marca
    # Antes: a janela da folga (3 linhas) era reenviada a cada ciclo ocioso.
    for _ in range(2):
        codigo, saida = o.rodar('--once')
        assert codigo == 0, saida
        assert 'registros=0' in _linha_dados(o.status()), o.status()
        assert not re.search(r'enviados=[1-9]', saida), saida
    # E uma mudanca de verdade continua chegando.
    novo = o.inserir(o.erp.escopos[0], '2026-09-01 11:00:00')
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    assert novo in o.no_contextia(o.erp.escopos[0])
    assert 'registros=1' in _linha_dados(o.status())


def test_carimbo_de_migracao_acima_do_teto_nao_trava_o_ao_vivo(ouvinte_sqlite):
    o = ouvinte_sqlite
    e0 = o.erp.escopos[0]
    assert o.rodar('--once')[0] == 0
    # Migracao do ERP: as 75 linhas com o mesmo carimbo, teto de 20 por ciclo.
    o.erp.executar('UPDATE {TITULOS} SET {ALTERADO_EM} = :a', a='2026-09-01 12:00:00')
    codigo, saida = o.rodar('--once', '--maximo-por-ciclo=20', '--varrer-agora')
    assert codigo == 0, saida
    assert 'entregue a VARREDURA' in saida and 'carregado pela varredura' in saida
    # Antes: a janela (75 linhas no mesmo carimbo) passava do teto a cada ciclo,
    # voltava para a varredura, e a linha nova abaixo NUNCA chegava ao vivo.
    novo = o.inserir(e0, '2026-09-01 12:00:05')
    codigo, saida = o.rodar('--once', '--maximo-por-ciclo=20')
    assert codigo == 0, saida
    assert 'entregue a VARREDURA' not in saida, saida
    assert novo in o.no_contextia(e0)
    assert 'registros=1' in _linha_dados(o.status())


# -- 2. carimbo no futuro nao congela o dataset --------------------------------


def test_carimbo_no_futuro_e_entregue_e_nao_sobe_a_marca(ouvinte):
    o = ouvinte
    e0 = o.erp.escopos[0]
    assert o.rodar('--once')[0] == 0
    torto = o.erp.base * 1000 + 1
    o.erp.executar('UPDATE {TITULOS} SET {ALTERADO_EM} = :a WHERE {ID} = :i', a=FUTURO, i=torto)
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    assert torto in o.no_contextia(e0)
    assert '1 linha(s) com carimbo no FUTURO' in saida
    assert not o.estado()['marca_agua'][DATASET].startswith('2037'), o.estado()
    assert o.estado()['acompanhamento'][DATASET]['futuras'] == 1
    # Antes: a marca ia para 2037 e nenhuma mudanca depois era vista.
    novo = o.inserir(e0, '2026-09-01 11:00:00')
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    assert novo in o.no_contextia(e0)
    # A linha do futuro ja entregue nao e reenviada.
    assert 'registros=0' in _linha_dados(o.status()) or 'registros=1' in _linha_dados(o.status())


def test_marca_do_futuro_no_estado_volta_para_a_hora_da_origem(ouvinte_sqlite):
    o = ouvinte_sqlite
    e0 = o.erp.escopos[0]
    assert o.rodar('--once')[0] == 0
    o.mudar_estado(marca_agua={DATASET: '2037-12-01T00:00:00'})
    agora = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    novo = o.inserir(e0, (agora - datetime.timedelta(seconds=60)).isoformat(' ', 'seconds'))
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    assert 'está no FUTURO da origem' in saida
    # Puxada para a hora da origem; a proxima mudanca (um minuto atras, dentro da
    # folga) chega. Antes: nada depois de 2037 seria visto.
    assert not o.estado()['marca_agua'][DATASET].startswith('2037')
    codigo, saida = o.rodar('--once')
    assert novo in o.no_contextia(e0)


# -- 3. coluna de mudanca em texto; linhas sem carimbo --------------------------


def test_coluna_de_mudanca_em_texto_e_recusada_na_subida(ouvinte, tmp_path):
    o = ouvinte
    o.erp.executar(
        'CREATE TABLE {NOTAS} ({ID} INTEGER PRIMARY KEY, {EMPRESA_ID} INTEGER,'
        ' {ALTERADO} VARCHAR(19))'
    )
    o.erp.executar(
        'INSERT INTO {NOTAS} VALUES (1, :e, :a)', e=int(o.erp.escopos[0]), a='31/12/2026 23:50:00'
    )
    with open(o.mapa) as arquivo:
        mapa = json.load(arquivo)
    mapa['datasets'].append(
        {
            'dataset': 'Notas',
            'source_object': 'NOTAS',
            'columns': ['ID', 'EMPRESA_ID', 'ALTERADO'],
            'watch_column': 'ALTERADO',
        }
    )
    with open(o.mapa, 'w') as arquivo:
        json.dump(mapa, arquivo)
    # Antes: aceita, e a marca '31/12/2026 23:50:00' (texto) nunca via 01/01/2027.
    for extra in ((), ('--dry-run',)):
        codigo, saida = o.rodar('--once', *extra)
        assert codigo == 2, saida
        assert 'notas' in saida and 'ALTERADO' in saida and 'texto' in saida
        assert 'CAST' in saida and 'Traceback' not in saida


def test_linhas_sem_carimbo_sao_contadas_e_mostradas(ouvinte_sqlite):
    o = ouvinte_sqlite
    o.erp.executar(
        'UPDATE {TITULOS} SET {ALTERADO_EM} = NULL WHERE {ID} <= :i', i=o.erp.base * 1000 + 2
    )
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    assert '2 linha(s) sem carimbo' in saida
    assert o.estado()['acompanhamento'][DATASET]['sem_carimbo'] == 2
    linha = [x for x in o.status().splitlines() if x.startswith(DATASET)][0]
    assert re.search(r'\s2\s', linha), linha


# -- 5. relogio da origem que volta -------------------------------------------


def test_relogio_da_origem_que_volta_alarga_a_leitura(ouvinte_sqlite):
    o = ouvinte_sqlite
    e0 = o.erp.escopos[0]
    assert o.rodar('--once')[0] == 0  # marca 10:44
    # O maior relogio da origem ja visto estava uma hora a frente do de agora:
    # como no fim do horario de verao (carimbo local sem fuso volta uma hora).
    uma_hora = datetime.timedelta(hours=1)
    utc = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) + uma_hora
    local = datetime.datetime.now() + uma_hora
    o.mudar_estado(relogio_origem={'utc': utc.isoformat(), 'local': local.isoformat()})
    # Gravada "depois do passo" com carimbo 30 min atras da marca: alem da folga (180 s).
    novo = o.inserir(e0, '2026-09-01 10:14:00')
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    assert 'relógio da ORIGEM voltou' in saida
    # Antes: a linha ficava abaixo de marca - folga e so a varredura a levaria.
    assert novo in o.no_contextia(e0)


# -- 6. empresa excluida nao recebe ao vivo ------------------------------------


def test_empresa_em_excluded_scopes_nao_recebe_ao_vivo(ouvinte_sqlite):
    o = ouvinte_sqlite
    e0, e1 = o.erp.escopos
    with open(o.mapa) as arquivo:
        mapa = json.load(arquivo)
    mapa['source']['excluded_scopes'] = [int(e1)]
    with open(o.mapa, 'w') as arquivo:
        json.dump(mapa, arquivo)
    assert o.rodar('--once')[0] == 0
    bom, excluido = o.inserir(e0, '2026-09-01 11:00:00'), o.inserir(e1, '2026-09-01 11:00:01')
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    assert bom in o.no_contextia(e0)
    # Antes: a linha da empresa excluida ia para o projeto dela (o conector recusa).
    assert excluido not in o.no_contextia(e1)
    assert 'excluded_scopes' in saida and e1 in saida


# -- 8. SIGTERM com o Contextia fora ------------------------------------------


def _porta_fechada():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def test_sigterm_com_contextia_fora_sai_em_ate_10_segundos(ouvinte_sqlite):
    o = ouvinte_sqlite
    e0, e1 = o.erp.escopos
    assert o.rodar('--once')[0] == 0
    marca = o.estado()['marca_agua'][DATASET]
    for n in range(4):
        o.inserir(e0 if n % 2 else e1, '2026-09-01 11:0%d:00' % n)
    porta = _porta_fechada()
    env = dict(o.env(), CONTEXTIA_URL='http://127.0.0.1:%d' % porta)
    log = open(str(o.pasta / 'sigterm.log'), 'w+b')
    processo = subprocess.Popen(o.argv(), cwd=RAIZ, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        # Ja re-tentando o envio da primeira empresa.
        esperar(lambda: os.path.exists(os.path.join(o.estado_dir, 'ouvinte.lock')), 30)
        time.sleep(3)
        inicio = time.monotonic()
        processo.send_signal(signal.SIGTERM)
        codigo = processo.wait(timeout=60)
        levou = time.monotonic() - inicio
    finally:
        if processo.poll() is None:
            processo.kill()
            processo.wait()
    log.seek(0)
    saida = log.read().decode('utf-8', 'replace')
    # Antes: 47-65 s (cada empresa esgotava ~23 s de retentativas).
    assert levou <= 10, 'levou %.1fs para sair:\n%s' % (levou, saida)
    assert codigo == 0, saida
    assert o.estado()['marca_agua'][DATASET] == marca


# -- 10. estado torto e pasta de estado que nao grava --------------------------


def test_estado_com_forma_errada_e_recusado_na_subida(ouvinte_sqlite):
    o = ouvinte_sqlite
    os.makedirs(o.estado_dir)
    with open(os.path.join(o.estado_dir, 'ouvinte-estado.json'), 'w') as arquivo:
        arquivo.write('{"marca_agua": []}')
    codigo, saida = o.rodar('--once')
    # Antes: aceito, e cada ciclo falhava com AttributeError.
    assert codigo == 2, saida
    assert 'Estado ilegível' in saida and "'marca_agua'" in saida and 'Traceback' not in saida


def _montar_tmpfs(pasta, opcoes):
    os.makedirs(pasta, exist_ok=True)
    feito = subprocess.run(
        ['mount', '-t', 'tmpfs', '-o', opcoes, 'tmpfs', str(pasta)], capture_output=True, text=True
    )
    if feito.returncode != 0:
        pytest.skip('não foi possível montar um tmpfs (%s): precisa de root' % feito.stderr.strip())


@pytest.mark.parametrize('caso', ['somente-leitura', 'cheio'])
def test_pasta_de_estado_que_nao_grava_sai_com_2_e_a_correcao(ouvinte_sqlite, caso):
    o = ouvinte_sqlite
    pasta = o.pasta / 'montada'
    _montar_tmpfs(pasta, 'size=16k')
    try:
        if caso == 'cheio':
            with open(pasta / 'enche', 'wb') as arquivo:
                try:
                    arquivo.write(b'x' * 64 * 1024)
                except OSError:
                    pass
        else:
            subprocess.run(['mount', '-o', 'remount,ro', str(pasta)], check=True)
        o.estado_dir = str(pasta)
        codigo, saida = o.rodar('--once')
        # Antes: OSError cru e saida 1.
        assert codigo == 2, saida
        assert 'não aceita gravação' in saida and 'ReadWritePaths' in saida
        assert 'Traceback' not in saida
    finally:
        subprocess.run(['umount', str(pasta)], check=False)


# -- 4. registro envenenado: quarentena, e a marca segue ----------------------


@pytest.fixture
def ouvinte_pg(tmp_path, fabrica_de_bancos, ambiente_contextia, chave_contextia):
    erp = erp_teste.Erp(fabrica_de_bancos('postgres', 'erp'))
    yield Ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia)
    erp.fechar()


def _quarentena(o):
    pasta = os.path.join(o.estado_dir, 'quarentena', 'parado')
    return sorted(os.listdir(pasta)) if os.path.isdir(pasta) else []


@pytest.mark.postgres
def test_registro_envenenado_vai_para_a_quarentena_e_a_marca_segue(ouvinte_pg):
    o = ouvinte_pg
    e0 = o.erp.escopos[0]
    assert o.rodar('--once')[0] == 0
    bom = o.inserir(e0, '2026-09-01 11:00:00')
    envenenado = o.inserir(e0, '2026-09-01 11:00:01')
    # NUMERIC NaN do PostgreSQL: o JSON nao tem como dize-lo.
    o.erp.executar("UPDATE {TITULOS} SET {VALOR} = 'NaN' WHERE {ID} = :i", i=envenenado)
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    assert bom in o.no_contextia(e0) and envenenado not in o.no_contextia(e0)
    # Antes: o lote da empresa falhava todo ciclo e a marca nunca avancava.
    assert o.estado()['marca_agua'][DATASET] == '2026-09-01T11:00:01'
    itens = _quarentena(o)
    assert len(itens) == 1 and DATASET in itens[0] and str(envenenado) in itens[0], itens
    assert re.search(r'^quarentena \.+: 1 registro', o.status(), re.M), o.status()
    saude = subprocess.run(
        ['bash', os.path.join(RAIZ, 'deploy', 'verificar-saude.sh'), o.estado_dir],
        capture_output=True,
        text=True,
    )
    assert saude.returncode == 1 and 'quarentena' in saude.stdout, saude.stdout
    # Um ciclo ocioso nao manda de novo o envenenado (nem re-divide lotes).
    codigo, saida = o.rodar('--once')
    assert codigo == 0 and 'registros=0' in _linha_dados(o.status()), saida
    # Reenviar nao resolve (o valor guardado continua NaN): fica, e diz por que.
    codigo, saida = o.rodar('--reenviar-quarentena')
    assert codigo == 1, saida
    assert len(_quarentena(o)) == 1
    # O ERP corrige a linha: a versao nova chega e tira o item da quarentena.
    o.erp.executar(
        'UPDATE {TITULOS} SET {VALOR} = 5, {ALTERADO_EM} = :a WHERE {ID} = :i',
        a='2026-09-01 11:00:02',
        i=envenenado,
    )
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    assert envenenado in o.no_contextia(e0)
    assert _quarentena(o) == []
    assert re.search(r'^quarentena \.+: 0 registro', o.status(), re.M)


def test_falha_passageira_nunca_vai_para_a_quarentena(ouvinte_sqlite):
    o = ouvinte_sqlite
    e0 = o.erp.escopos[0]
    assert o.rodar('--once')[0] == 0
    marca = o.estado()['marca_agua'][DATASET]
    o.inserir(e0, '2026-09-01 11:00:00')
    o.contextia.taxa_de_falhas({'500': 1.0})
    try:
        codigo, saida = o.rodar('--once')
    finally:
        o.contextia.limpar_falhas()
    assert codigo == 1, saida
    assert _quarentena(o) == []
    assert o.estado()['marca_agua'][DATASET] == marca
