"""
O Contextia local em vários processos (`--processos N`, issue 18): o mesmo
contrato, as mesmas contagens e a mesma durabilidade de um processo só, com
as conexões divididas entre os filhos; parar, matar e a morte de um filho
nunca deixam processo órfão nem servidor calado com menos processos.

Tudo contra o servidor de verdade (subprocesso) em 127.0.0.1.
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
import requests

from contextia_local.armazenamento import Banco
from contextia_local.processo import RAIZ

pytestmark = pytest.mark.skipif(
    sys.platform != 'linux', reason='os filhos e a CPU deles são lidos em /proc (Linux)'
)


def _filhos(pid):
    with open('/proc/%d/task/%d/children' % (pid, pid), encoding='ascii') as f:
        return [int(filho) for filho in f.read().split()]


def _cpu(pid):
    with open('/proc/%d/stat' % pid, encoding='ascii') as f:
        campos = f.read().rsplit(')', 1)[1].split()
    return int(campos[11]) + int(campos[12])


def _vivo(pid):
    try:
        with open('/proc/%d/stat' % pid, encoding='ascii') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False


def _esperar(condicao, segundos=10.0):
    limite = time.monotonic() + segundos
    while time.monotonic() < limite:
        if condicao():
            return True
        time.sleep(0.05)
    return condicao()


def _filhos_de_pe(servidor, quantos=2):
    assert _esperar(lambda: len(_filhos(servidor.pid)) == quantos), (
        'o principal devia ter %d filhos: %s' % (quantos, _filhos(servidor.pid))
    )
    return _filhos(servidor.pid)


def _lote(dataset, inicio, quantos, sync=None, parte=0, versao=0):
    envelope = {
        'dataset': dataset,
        'key': 'ID',
        'records': [
            {'ID': i, 'NOME': 'item %d' % i, 'VERSAO': versao}
            for i in range(inicio, inicio + quantos)
        ],
    }
    if sync:
        envelope['sync'] = {'id': sync, 'part': parte}
    return envelope


def test_dois_processos_dividem_as_conexoes_e_as_contagens_ficam_exatas(fabrica_contextia):
    servidor = fabrica_contextia(processos=2)
    filhos = _filhos_de_pe(servidor)
    chave = servidor.criar_projeto_com_chave('proc-contagens')
    cabecalhos = {'Authorization': 'Bearer ' + chave}
    url = servidor.url + '/api/v1/intake'
    cpu_antes = {pid: _cpu(pid) for pid in filhos}
    somas = {'inserted': 0, 'updated': 0, 'duplicates': 0}
    erros = []
    trava = threading.Lock()

    # Quatro conexões (o padrão de lotes em voo), as mesmas 2000 keys nas
    # quatro, em ordens diferentes: cada key é inserida uma vez, depois
    # atualizada ou achada igual -- as contagens só fecham se as escritas dos
    # dois processos nunca se misturarem.
    def postar(numero):
        with requests.Session() as sessao:
            for volta in range(10):
                inicio = ((volta + numero * 3) % 10) * 200
                resposta = sessao.post(
                    url,
                    json=_lote('itens', inicio, 200, versao=volta % 2),
                    headers=cabecalhos,
                    timeout=60,
                )
                if resposta.status_code != 200:
                    erros.append(resposta.text)
                    return
                with trava:
                    for nome in somas:
                        somas[nome] += resposta.json()[nome]

    linhas = [threading.Thread(target=postar, args=(n,)) for n in range(4)]
    for linha in linhas:
        linha.start()
    for linha in linhas:
        linha.join()
    assert not erros, erros[:2]
    assert somas['inserted'] == 2000
    assert sum(somas.values()) == 4 * 10 * 200
    datasets = requests.get(
        servidor.url + '/api/v1/datasets', headers=cabecalhos, timeout=10
    ).json()['datasets']
    assert [(d['dataset'], d['records']) for d in datasets] == [('itens', 2000)]
    # As duas metades das conexões foram a filhos diferentes: os dois trabalharam.
    gastos = {pid: _cpu(pid) - cpu_antes[pid] for pid in filhos}
    assert all(gasto > 0 for gasto in gastos.values()), gastos


def test_sync_e_complete_em_processos_diferentes_removem_so_o_que_o_sync_nao_viu(fabrica_contextia):
    servidor = fabrica_contextia(processos=2)
    _filhos_de_pe(servidor)
    chave = servidor.criar_projeto_com_chave('proc-complete')
    cabecalhos = {'Authorization': 'Bearer ' + chave}
    url = servidor.url + '/api/v1/intake'
    # 1000 registros, depois um sync que só vê os 600 primeiros, em lotes por
    # conexões novas (cada uma cai no próximo filho do rodízio).
    for inicio in range(0, 1000, 250):
        assert (
            requests.post(
                url, json=_lote('carga', inicio, 250), headers=cabecalhos, timeout=30
            ).status_code
            == 200
        )
    for parte, inicio in enumerate(range(0, 600, 150)):
        assert (
            requests.post(
                url,
                json=_lote('carga', inicio, 150, sync='s2', parte=parte),
                headers=cabecalhos,
                timeout=30,
            ).status_code
            == 200
        )
    resposta = requests.post(
        url + '/complete',
        json={'dataset': 'carga', 'sync': 's2', 'max_removal': 0.5},
        headers=cabecalhos,
        timeout=30,
    )
    assert resposta.status_code == 200, resposta.text
    assert resposta.json()['removed'] == 400
    assert resposta.json()['records'] == 600


def test_sigterm_no_principal_para_os_filhos(fabrica_contextia):
    servidor = fabrica_contextia(processos=2)
    filhos = _filhos_de_pe(servidor)
    processo = servidor._processo
    servidor.parar()
    assert processo.returncode == 0
    assert _esperar(lambda: not any(map(_vivo, filhos)), 5), 'filho sobrou depois do SIGTERM'


def test_sigkill_no_principal_leva_os_filhos_e_solta_a_porta(fabrica_contextia):
    servidor = fabrica_contextia(processos=2)
    filhos = _filhos_de_pe(servidor)
    porta = servidor.porta
    servidor.matar()
    # Órfãos seguram a pasta e gravariam por fora de quem subir depois.
    assert _esperar(lambda: not any(map(_vivo, filhos)), 5), 'filho órfão vivo'
    with socket.socket() as sonda:
        # Como o servidor abre a porta (SO_REUSEADDR): só uma escuta viva a prende.
        sonda.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sonda.bind(('127.0.0.1', porta))
        sonda.listen()
    # E o que foi comitado está lá: o servidor sobe de novo na mesma pasta.
    servidor.iniciar()
    assert requests.get(servidor.url + '/saude', timeout=5).status_code == 200


def test_filho_que_morre_derruba_o_servidor_e_diz_qual(fabrica_contextia):
    servidor = fabrica_contextia(processos=2)
    filhos = _filhos_de_pe(servidor)
    processo = servidor._processo
    os.kill(filhos[0], signal.SIGKILL)
    assert processo.wait(timeout=10) == 1
    assert _esperar(lambda: not _vivo(filhos[1]), 5), 'o outro filho ficou'
    log = servidor._fim_do_log()
    assert 'o processo %d saiu (morto pelo sinal 9)' % filhos[0] in log, log


def _rodar_cli(*argumentos, dados):
    ambiente = dict(os.environ, CONTEXTIA_ADMIN_TOKEN='admin-local', PYTHONPATH=RAIZ)
    return subprocess.run(
        [sys.executable, '-m', 'contextia_local', '--dados', str(dados), *argumentos],
        cwd=RAIZ,
        env=ambiente,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_falhas_com_varios_processos_e_recusado_dizendo_por_que(tmp_path):
    resultado = _rodar_cli('--processos', '2', '--falhas', dados=tmp_path)
    assert resultado.returncode == 2
    assert '--falhas guarda as falhas injetadas na memória de um processo' in resultado.stderr
    assert 'Use --processos 1' in resultado.stderr


def test_porta_ocupada_com_varios_processos_sai_com_1_e_diz_a_porta(tmp_path):
    with socket.socket() as ocupante:
        ocupante.bind(('127.0.0.1', 0))
        ocupante.listen()
        porta = ocupante.getsockname()[1]
        resultado = _rodar_cli('--processos', '2', '--porta', str(porta), dados=tmp_path)
    assert resultado.returncode == 1
    assert 'não consegui abrir 127.0.0.1:%d' % porta in resultado.stderr
    assert '--porta' in resultado.stderr


def test_trava_de_escrita_e_de_todos_os_processos_da_pasta(tmp_path):
    # Dois Banco na mesma pasta (como dois filhos): enquanto um grava, o outro
    # não entra -- nem sem esperar (BancoOcupado), nem esperando a vez.
    from contextia_local.armazenamento import BancoOcupado

    um, outro = Banco(str(tmp_path)), Banco(str(tmp_path))
    livre = threading.Event()
    try:
        with um.transacao():
            with pytest.raises(BancoOcupado):
                with outro.transacao(esperar=False):
                    pass
            esperando = threading.Thread(target=lambda: (outro.esperar_a_vez(), livre.set()))
            esperando.start()
            time.sleep(0.3)
            assert not livre.is_set(), 'esperou a vez com a trava tomada'
        esperando.join(5)
        assert livre.is_set()
        with outro.transacao(esperar=False):
            pass
    finally:
        um.fechar()
        outro.fechar()
    assert oct(os.stat(tmp_path / 'contextia.sqlite3-escrita').st_mode & 0o777) == '0o600'


def test_sem_processos_a_mais_nada_muda(fabrica_contextia):
    # O padrão (um processo) não tem filhos: testes e demo seguem como eram.
    servidor = fabrica_contextia()
    assert _filhos(servidor.pid) == []
