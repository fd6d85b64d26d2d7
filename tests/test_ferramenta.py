"""
contextia_sync/ferramenta.py: rodar uma ferramenta como um supervisor roda um filho.

Os filhos aqui são scripts bash de verdade (lentos, calados, que ignoram
SIGTERM, que deixam neto segurando o pipe) -- o que a ferramenta real pode fazer.
"""

import os
import signal
import time

from contextia_sync import supervisor as ferramenta


class Registro:
    """Um logger que anota (instante, mensagem) de cada linha."""

    def __init__(self):
        self.linhas = []

    def _anotar(self, formato, *args):
        self.linhas.append((time.monotonic(), formato % args if args else formato))

    info = warning = error = _anotar

    def textos(self):
        return [t for _, t in self.linhas]


def _bash(corpo):
    return ['bash', '-c', corpo]


def _vivos_no_grupo(pgid):
    """Pids vivos (não zumbis) cujo grupo de processos e `pgid`."""
    vivos = []
    for nome in os.listdir('/proc'):
        if not nome.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % nome) as arquivo:
                campos = arquivo.read().rsplit(')', 1)[1].split()
        except OSError:
            continue
        estado, grupo = campos[0], int(campos[2])
        if grupo == pgid and estado != 'Z':
            vivos.append(int(nome))
    return vivos


def _vivo(pid):
    """Existe e não é zumbi (um zumbi já morreu; só espera quem o recolha)."""
    try:
        with open('/proc/%s/stat' % pid) as arquivo:
            return arquivo.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def test_saida_e_logada_ao_chegar_com_prefixo():
    log = Registro()
    inicio = time.monotonic()
    r = ferramenta.rodar(_bash('echo primeira; sleep 1.5; echo segunda'), 'lenta', log=log)
    fim = time.monotonic()
    assert r.ok and r.motivo == 'ok'
    [(quando, _)] = [(q, t) for q, t in log.linhas if 'lenta | primeira' in t]
    # A primeira linha foi logada antes do filho terminar, nao so no fim.
    assert quando - inicio < 1.0 and fim - quando > 1.0


def test_python_filho_nao_fica_com_saida_presa_no_buffer(tmp_path):
    # PYTHONUNBUFFERED: sem ele o print do filho so chegaria no fim.
    script = tmp_path / 'lento.py'
    script.write_text('import time\nprint("comecei")\ntime.sleep(1.5)\nprint("fim")\n')
    log = Registro()
    inicio = time.monotonic()
    r = ferramenta.rodar(['python3', str(script)], 'py', log=log)
    assert r.ok
    [quando] = [q for q, t in log.linhas if 'py | comecei' in t]
    assert quando - inicio < 1.2


def test_vigia_de_inatividade_encerra_o_grupo():
    log = Registro()
    inicio = time.monotonic()
    r = ferramenta.rodar(_bash('echo oi; sleep 60'), 'calada', inatividade=1, log=log)
    assert time.monotonic() - inicio < 10
    assert r.motivo == 'inatividade' and r.codigo == ferramenta.CODIGO_TEMPO
    assert any('--inatividade-ferramenta' in t for t in log.textos())


def test_vigia_nao_mata_quem_fala():
    r = ferramenta.rodar(
        _bash('for i in 1 2 3 4; do echo $i; sleep 0.6; done'),
        'falante',
        inatividade=1,
        log=Registro(),
    )
    assert r.ok


def test_tempo_total():
    r = ferramenta.rodar(
        _bash('while true; do echo x; sleep 0.2; done'), 'sem-fim', timeout=1, log=Registro()
    )
    assert r.motivo == 'tempo' and r.codigo == ferramenta.CODIGO_TEMPO


def test_parada_encerra_o_grupo_inteiro_mesmo_neto_que_ignora_sigterm(tmp_path):
    pids = tmp_path / 'pids'
    corpo = (
        '(trap "" TERM; echo $BASHPID >> %s; while true; do sleep 0.2; done) & '
        'sleep 300 & echo $! >> %s; echo pronto; wait' % (pids, pids)
    )
    pedido = {'parar': False, 'pid': None}

    def ao_iniciar(pid):
        pedido['pid'] = pid

    log = Registro()
    inicio = time.monotonic()

    def deve_parar():
        return time.monotonic() - inicio > 1.0

    r = ferramenta.rodar(
        _bash(corpo), 'carga', deve_parar=deve_parar, ao_iniciar=ao_iniciar, log=log
    )
    assert r.motivo == 'parada'
    assert time.monotonic() - inicio < ferramenta.GRACA_TERM + 5
    assert _vivos_no_grupo(pedido['pid']) == []
    for pid in pids.read_text().split():
        assert not _vivo(int(pid)), pid


def test_relata_o_sinal_que_matou():
    log = Registro()
    r = ferramenta.rodar(_bash('echo vou morrer; kill -KILL $$'), 'suicida', log=log)
    assert r.sinal == 'SIGKILL' and r.codigo == 128 + signal.SIGKILL
    assert any('morta pelo sinal SIGKILL' in t for t in log.textos())


def test_relata_o_codigo_de_saida():
    log = Registro()
    r = ferramenta.rodar(_bash('echo erro de configuração; exit 2'), 'conf', log=log)
    assert r.codigo == 2 and r.motivo == 'falhou' and r.sinal is None
    assert any('saiu com código 2' in t for t in log.textos())


def test_neto_segurando_o_pipe_nao_prende_o_laco():
    log = Registro()
    inicio = time.monotonic()
    # O neto herda o stdout e vive 30 s; o filho sai logo com 0.
    r = ferramenta.rodar(_bash('sleep 30 & echo filho saindo; exit 0'), 'pai', log=log)
    assert r.ok
    assert time.monotonic() - inicio < ferramenta.DRENO_APOS_SAIDA + 3
    assert any('paro de ler' in t for t in log.textos())


def test_stdin_e_devnull():
    # Uma ferramenta que le stdin recebe EOF na hora em vez de esperar para sempre.
    r = ferramenta.rodar(_bash('read linha; echo "leu:$?"'), 'leitora', timeout=10, log=Registro())
    assert r.ok and r.duracao < 5


def test_programa_inexistente():
    r = ferramenta.rodar(['/nao/existe/ferramenta'], 'nada', log=Registro())
    assert r.codigo == ferramenta.CODIGO_NAO_EXECUTOU and not r.ok


def test_pulso_chamado_durante_ferramenta_longa():
    pulsos = []
    r = ferramenta.rodar(
        _bash('sleep 1.2'),
        'longa',
        pulso=lambda: pulsos.append(1),
        intervalo_pulso=0.3,
        log=Registro(),
    )
    assert r.ok and len(pulsos) >= 2
