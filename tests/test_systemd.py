"""
O ouvinte sob o systemd, com sockets de verdade no lugar do systemd e do journald.

O aviso (sd_notify): um socket AF_UNIX de datagrama ligado por nos, com
SO_PASSCRED -- o mesmo que o systemd recebe, inclusive o pid de quem mandou, que
e o que NotifyAccess=main confere. O journal: JOURNAL_STREAM com o
dispositivo:inode de um arquivo ou pipe de verdade dado como stderr ao filho,
e (para o caminho nativo) um socket de datagrama nosso no lugar de
/run/systemd/journal/socket, apontado por CONTEXTIA_TESTE_SOCKET_JOURNAL.

Os testes de processo rodam o modulo num filho de verdade; o que fala com o
laco do ouvinte (READY/STATUS/WATCHDOG/STOPPING do ouvinte.py inteiro) esta no
fim.
"""

import array
import json
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid

import pytest

from contextia_sync import systemd
from tests.apoio.log import coletar_log

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def pasta():
    """Pasta de caminho curto: endereco AF_UNIX tem no maximo 108 bytes."""
    caminho = tempfile.mkdtemp(prefix='sd-', dir='/tmp')
    yield caminho
    shutil.rmtree(caminho, ignore_errors=True)


class Ouvido:
    """
    Um socket AF_UNIX de datagrama que guarda (instante, pid de quem mandou,
    bytes) de cada mensagem; um descritor que chegar junto (SCM_RIGHTS, o memfd
    do journal) e lido e o conteudo dele vira os bytes da mensagem.
    """

    def __init__(self, endereco):
        self.endereco = endereco
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 * 1024 * 1024)
        self.socket.bind(endereco)
        self.recebidas = []  # (monotonic, pid, bytes, veio_por_fd, selos)
        self._fim = threading.Event()
        self._fio = threading.Thread(target=self._ouvir, daemon=True)
        self._fio.start()

    def _ouvir(self):
        anc = socket.CMSG_SPACE(struct.calcsize('iII')) + socket.CMSG_SPACE(4 * 4)
        while not self._fim.is_set():
            prontos, _, _ = select.select([self.socket], [], [], 0.1)
            if not prontos:
                continue
            dados, ancilares, _, _ = self.socket.recvmsg(8 * 1024 * 1024, anc)
            pid, fds = None, []
            for nivel, tipo, bruto in ancilares:
                if nivel == socket.SOL_SOCKET and tipo == socket.SCM_CREDENTIALS:
                    pid = struct.unpack('iII', bruto[: struct.calcsize('iII')])[0]
                elif nivel == socket.SOL_SOCKET and tipo == socket.SCM_RIGHTS:
                    fds.extend(array.array('i', bruto[: len(bruto) - len(bruto) % 4]))
            selos = None
            if fds:
                import fcntl

                selos = fcntl.fcntl(fds[0], fcntl.F_GET_SEALS)
                with os.fdopen(fds[0], 'rb') as arquivo:
                    arquivo.seek(0)
                    dados = arquivo.read()
                for extra in fds[1:]:
                    os.close(extra)
            self.recebidas.append((time.monotonic(), pid, dados, bool(fds), selos))

    def textos(self):
        return [d.decode('utf-8') for _, _, d, _, _ in self.recebidas]

    def esperar(self, condicao, segundos=30):
        fim = time.monotonic() + segundos
        while time.monotonic() < fim:
            if condicao(self):
                return True
            time.sleep(0.05)
        return False

    def fechar(self):
        self._fim.set()
        self._fio.join(5)
        self.socket.close()


@pytest.fixture
def ouvido(pasta):
    criados = []

    def criar(nome='notify.sock'):
        o = Ouvido(nome if nome.startswith('\0') else os.path.join(pasta, nome))
        criados.append(o)
        return o

    yield criar
    for o in criados:
        o.fechar()


def _filho(pasta, codigo, env, stderr=subprocess.PIPE, nu=True, timeout=60):
    """Roda `codigo` num python de verdade (-S: sem pacote nenhum, como o autoteste)."""
    script = os.path.join(pasta, 'filho-%s.py' % uuid.uuid4().hex[:6])
    with open(script, 'w', encoding='utf-8') as f:
        f.write('import sys\nsys.path.insert(0, %r)\n' % RAIZ + codigo)
    ambiente = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            'NOTIFY_SOCKET',
            'WATCHDOG_USEC',
            'WATCHDOG_PID',
            'JOURNAL_STREAM',
            systemd.VARIAVEL_SOCKET_TESTE,
        )
    }
    ambiente.update(env)
    argv = [sys.executable] + (['-S'] if nu else []) + [script]
    return subprocess.run(
        argv, env=ambiente, stdout=subprocess.PIPE, stderr=stderr, timeout=timeout
    )


# ---------------------------------------------------------------------------
# O aviso, de um processo de verdade
# ---------------------------------------------------------------------------

AVISOS = r"""
import os, subprocess, time
from contextia_sync import systemd
print('sob_systemd', systemd.sob_systemd(), systemd.intervalo_vigia())
print('ambiente', sorted(k for k in os.environ if k in systemd.VARIAVEIS_AVISO))
neto = subprocess.run([sys.executable, '-S', '-c', 'import os; print(sorted(k for k in'
                       ' os.environ if k in ("NOTIFY_SOCKET", "WATCHDOG_USEC",'
                       ' "WATCHDOG_PID")))'], stdout=subprocess.PIPE, text=True)
print('neto', neto.stdout.strip())
systemd.status('subindo: lendo a configuracao')
systemd.pronto('de pe')
fim = time.monotonic() + 3.5
enviados = [time.monotonic()]
while time.monotonic() < fim:
    if systemd.vigia():
        enviados.append(time.monotonic())
    time.sleep(0.02)
print('intervalos', [round(b - a, 3) for a, b in zip(enviados, enviados[1:])])
time.sleep(1.1)
parar = systemd.vigiando(lambda: 'nao')
print('parar', parar())
systemd.status('2 ao vivo', None, '', 'dados .............: 10:00:00 datasets=2 erros=0',
               'linha\ncom quebra')
systemd.parando('SIGTERM: terminando o passo atual')
systemd.status('2 ao vivo')
systemd.parando('ainda parando')
print('fim')
"""


def test_avisos_de_um_processo_de_verdade(pasta, ouvido):
    systemd_falso = ouvido()
    feito = _filho(
        pasta, AVISOS, {'NOTIFY_SOCKET': systemd_falso.endereco, 'WATCHDOG_USEC': '4000000'}
    )
    saida = feito.stdout.decode()
    assert feito.returncode == 0, saida + feito.stderr.decode()
    assert feito.stderr == b''
    assert 'sob_systemd True 4.0' in saida
    # A primeira chamada tira as variaveis do ambiente: o neto nao as herda.
    assert 'ambiente []' in saida and 'neto []' in saida
    assert 'parar nao' in saida
    assert systemd_falso.esperar(
        lambda o: len(o.recebidas) >= 1 and o.textos()[-1] == 'STATUS=ainda parando', 5
    )

    textos = systemd_falso.textos()
    assert textos[0] == 'STATUS=subindo: lendo a configuracao'
    assert textos[1] == 'READY=1\nSTATUS=de pe\nWATCHDOG=1'
    vigias = [t for t in textos[2:] if t == 'WATCHDOG=1']
    # 3,5 s chamando vigia() a cada 20 ms: no maximo um por segundo; e o vigiando().
    assert 3 <= len(vigias) <= 5, textos
    assert textos[-4:] == [
        'STATUS=2 ao vivo; dados: 10:00:00 datasets=2 erros=0; linha com quebra',
        'STOPPING=1\nSTATUS=SIGTERM: terminando o passo atual',
        'STATUS=parando; 2 ao vivo',  # o pulso depois do STOPPING nao parece normal
        'STATUS=ainda parando',
    ]
    # Tudo veio do processo principal (o que NotifyAccess=main aceita).
    pids = {pid for _, pid, _, _, _ in systemd_falso.recebidas}
    assert len(pids) == 1 and None not in pids
    # Os vigias sairam espacados de pelo menos 1 s (medido em quem manda).
    intervalos = json.loads(re.search(r'intervalos (\[.*\])', saida).group(1))
    assert len(intervalos) >= 2 and all(i >= 0.99 for i in intervalos), intervalos


def test_sem_notify_socket_nada_acontece(pasta):
    feito = _filho(
        pasta,
        'from contextia_sync import systemd\n'
        'r = [systemd.status("x"), systemd.pronto("y"), systemd.vigia(),'
        ' systemd.parando("z"), systemd.sob_systemd(),'
        ' systemd.intervalo_vigia()]\nprint(r)\n',
        {'WATCHDOG_USEC': '1000000'},
    )
    assert feito.returncode == 0, feito.stderr.decode()
    assert feito.stdout.decode().strip() == '[False, False, False, False, False, None]'
    assert feito.stderr == b''


def test_socket_que_sumiu_nao_derruba_e_avisa_uma_vez(pasta):
    caminho = os.path.join(pasta, 'vai-aparecer.sock')
    canal = systemd.Notificador({'NOTIFY_SOCKET': caminho, 'WATCHDOG_USEC': '2000000'})
    with coletar_log(nivel=0) as mensagens:
        assert canal.pronto('x') is False
        assert canal.status('y') is False
        assert canal.vigia() is False
    assert len([m for m in mensagens if 'aviso ao systemd falhou' in m]) == 1, mensagens
    # O systemd voltou (daemon-reexec): o proximo aviso chega, e o log diz.
    receptor = Ouvido(caminho)
    try:
        with coletar_log(nivel=0) as mensagens:
            assert canal.status('de novo') is True
        assert any('voltou' in m for m in mensagens)
        assert receptor.esperar(lambda o: o.textos() == ['STATUS=de novo'], 5)
    finally:
        receptor.fechar()


def test_socket_abstrato(ouvido):
    nome = 'contextia-teste-%s' % uuid.uuid4().hex
    receptor = ouvido('\0' + nome)
    canal = systemd.Notificador({'NOTIFY_SOCKET': '@' + nome})
    assert canal.pronto() is True
    assert receptor.esperar(lambda o: o.textos() == ['READY=1'], 5)


def test_endereco_que_nao_sabemos_usar_avisa_uma_vez_e_nao_levanta():
    canal = systemd.Notificador({'NOTIFY_SOCKET': 'vsock:2:9999'})
    with coletar_log(nivel=0) as mensagens:
        assert [canal.pronto(), canal.status('x'), canal.vigia()] == [False, False, False]
    assert len(mensagens) == 1 and 'vsock:2:9999' in mensagens[0]


@pytest.mark.parametrize(
    'usec,pid,ligado',
    [
        (None, None, False),
        ('abc', None, False),
        ('0', None, False),
        ('5000000', None, True),
        ('5000000', 'mesmo', True),
        ('5000000', '1', False),
    ],
)
def test_vigia_so_com_watchdog_deste_processo(ouvido, usec, pid, ligado):
    receptor = ouvido()
    ambiente = {'NOTIFY_SOCKET': receptor.endereco}
    if usec:
        ambiente['WATCHDOG_USEC'] = usec
    if pid:
        ambiente['WATCHDOG_PID'] = str(os.getpid()) if pid == 'mesmo' else pid
    canal = systemd.Notificador(ambiente)
    assert ambiente == {}
    assert (canal.intervalo_vigia == 5.0) is ligado
    assert canal.vigia() is ligado
    assert canal.vigia() is False  # menos de 1 s depois: nao manda outro
    if ligado:
        assert receptor.esperar(lambda o: o.textos() == ['WATCHDOG=1'], 5)


def test_limpar_falso_deixa_o_ambiente():
    ambiente = {'NOTIFY_SOCKET': '/nao/existe', 'WATCHDOG_USEC': '1', 'OUTRA': 'x'}
    systemd.Notificador(ambiente, limpar=False)
    assert set(ambiente) == {'NOTIFY_SOCKET', 'WATCHDOG_USEC', 'OUTRA'}
    systemd.Notificador(ambiente)
    assert ambiente == {'OUTRA': 'x'}


def test_status_e_uma_linha_curta(ouvido):
    receptor = ouvido()
    canal = systemd.Notificador({'NOTIFY_SOCKET': receptor.endereco})
    assert canal.status(None, '', '  ') is False
    assert canal.status('a' * 1000) is True
    assert receptor.esperar(lambda o: len(o.recebidas) == 1, 5)
    texto = receptor.textos()[0]
    assert texto.startswith('STATUS=aaa') and texto.endswith('...') and '\n' not in texto
    assert len(texto) == len('STATUS=') + systemd.MAXIMO_STATUS


# ---------------------------------------------------------------------------
# O journal, de um processo de verdade
# ---------------------------------------------------------------------------

REGISTROS = r"""
from contextia_sync.registro import logger, no_journal
print('no_journal', no_journal())
logger.info('linha de info')
logger.warning('um aviso\ncom duas linhas')
def quebrar():
    return {}['nao tem']
try:
    quebrar()
except KeyError:
    logger.exception('ciclo falhou: %s', 'de proposito')
logger.critical('critico')
"""


def _journal_stream(fd):
    info = os.fstat(fd)
    return '%d:%d' % (info.st_dev, info.st_ino)


def test_journal_pela_stderr_com_prefixo_quando_o_socket_nativo_falta(pasta):
    """python3 -S (sem logzero): o socket nativo nao existe; tudo pela stderr, prefixado."""
    caminho = os.path.join(pasta, 'stderr.txt')
    with open(caminho, 'w+b') as stderr:
        feito = _filho(
            pasta,
            REGISTROS,
            {
                'JOURNAL_STREAM': _journal_stream(stderr.fileno()),
                systemd.VARIAVEL_SOCKET_TESTE: os.path.join(pasta, 'nao-existe.sock'),
            },
            stderr=stderr,
        )
        stderr.seek(0)
        linhas = stderr.read().decode('utf-8').splitlines()
    assert feito.returncode == 0, linhas
    assert 'no_journal True' in feito.stdout.decode()
    # Cada registro uma linha, e toda linha com a prioridade: nada "solto" no journal.
    assert all(re.match(r'<[0-7]>', linha) for linha in linhas), linhas
    assert linhas[0].startswith('<4>journal nativo (') and 'nao-existe.sock' in linhas[0]
    assert linhas[1] == '<6>[I] linha de info'
    assert linhas[2] == '<4>[W] um aviso\\ncom duas linhas'
    assert linhas[3].startswith('<3>[E] ciclo falhou: de proposito\\nTraceback (most recent')
    assert 'in quebrar\\n' in linhas[3] and linhas[3].endswith("KeyError: 'nao tem'")
    assert linhas[4] == '<2>[C] critico'
    assert len(linhas) == 5


def test_journal_nativo_uma_entrada_por_registro(pasta, ouvido):
    """Com logzero instalado; stderr e um pipe de verdade, como o do systemd."""
    journald = ouvido('journal.sock')
    leitura, escrita = os.pipe()
    try:
        feito = _filho(
            pasta,
            REGISTROS + 'import os\nprint("pid", os.getpid())\n',
            {
                'JOURNAL_STREAM': _journal_stream(escrita),
                systemd.VARIAVEL_SOCKET_TESTE: journald.endereco,
            },
            stderr=escrita,
            nu=False,
        )
        os.close(escrita)
        escrita = None
        with os.fdopen(leitura, 'rb') as pipe:
            leitura = None
            stderr = pipe.read()
    finally:
        for fd in (leitura, escrita):
            if fd is not None:
                os.close(fd)
    saida = feito.stdout.decode()
    assert feito.returncode == 0, saida
    assert stderr == b''  # nada pela stderr: tudo pelo socket
    assert journald.esperar(lambda o: len(o.recebidas) == 4, 5), journald.textos()
    entradas = [systemd.ler_entrada_nativa(d) for _, _, d, _, _ in journald.recebidas]
    assert [e['PRIORITY'] for e in entradas] == ['6', '4', '3', '2']
    assert [e['SYSLOG_IDENTIFIER'] for e in entradas] == [entradas[0]['SYSLOG_IDENTIFIER']] * 4
    assert entradas[1]['MESSAGE'] == '[W] um aviso\ncom duas linhas'
    erro = entradas[2]
    assert erro['MESSAGE'].startswith('[E] ciclo falhou: de proposito\nTraceback (most recent')
    assert 'in quebrar\n' in erro['MESSAGE'] and erro['MESSAGE'].endswith("KeyError: 'nao tem'")
    assert erro['EXCEPTION'] == 'KeyError' and erro['CODE_FUNC'] == '<module>'
    assert erro['CODE_FILE'].endswith('.py') and int(erro['CODE_LINE']) > 0
    pid = int(re.search(r'pid (\d+)', saida).group(1))
    assert {p for _, p, _, _, _ in journald.recebidas} == {pid}


def test_journal_entrada_maior_que_um_datagrama_vai_num_memfd_selado(pasta, ouvido):
    # O socket pede 8 MB de buffer de envio (o kernel dobra: ate 16 MB); 20 MB nao cabem.
    journald = ouvido('journal.sock')
    with open(os.path.join(pasta, 'stderr.txt'), 'w+b') as stderr:
        feito = _filho(
            pasta,
            'from contextia_sync.registro import logger\n'
            'logger.warning("GRANDE " + "x" * 20000000 + " FIM")\n'
            'logger.warning("depois")\n',
            {
                'JOURNAL_STREAM': _journal_stream(stderr.fileno()),
                systemd.VARIAVEL_SOCKET_TESTE: journald.endereco,
            },
            stderr=stderr,
        )
        stderr.seek(0)
        assert stderr.read() == b''
    assert feito.returncode == 0
    assert journald.esperar(lambda o: len(o.recebidas) == 2, 10)
    (_, _, grande, por_fd, selos), (_, _, depois, por_fd2, _) = journald.recebidas
    assert por_fd and not por_fd2
    import fcntl

    assert selos & fcntl.F_SEAL_WRITE and selos & fcntl.F_SEAL_SHRINK
    entrada = systemd.ler_entrada_nativa(grande)
    assert entrada['PRIORITY'] == '4'
    assert entrada['MESSAGE'] == '[W] GRANDE ' + 'x' * 20000000 + ' FIM'
    assert systemd.ler_entrada_nativa(depois)['MESSAGE'] == '[W] depois'


def test_stderr_que_nao_e_o_journal_loga_como_sempre(pasta, ouvido):
    """A ferramenta filha herda JOURNAL_STREAM, mas a stderr dela e o pipe do supervisor."""
    journald = ouvido('journal.sock')
    with (
        open(os.path.join(pasta, 'outro.txt'), 'wb') as outro,
        open(os.path.join(pasta, 'stderr.txt'), 'w+b') as stderr,
    ):
        feito = _filho(
            pasta,
            REGISTROS,
            {
                'JOURNAL_STREAM': _journal_stream(outro.fileno()),
                systemd.VARIAVEL_SOCKET_TESTE: journald.endereco,
            },
            stderr=stderr,
        )
        stderr.seek(0)
        texto = stderr.read().decode('utf-8')
    assert feito.returncode == 0
    assert 'no_journal False' in feito.stdout.decode()
    assert re.search(r'^\[W \d{4}-\d\d-\d\d .*\] um aviso$', texto, flags=re.M), texto
    assert 'Traceback (most recent call last):\n' in texto and '<' not in texto[:3]
    time.sleep(0.3)
    assert journald.recebidas == []


def test_prioridades():
    import logging

    assert [
        systemd.prioridade(n)
        for n in (
            logging.DEBUG,
            logging.INFO,
            logging.WARNING,
            logging.ERROR,
            logging.CRITICAL,
            25,
            45,
        )
    ] == [7, 6, 4, 3, 2, 6, 3]


def test_entrada_nativa_ida_e_volta():
    campos = [('MESSAGE', 'a\nb=c'), ('PRIORITY', '3'), ('X', ''), ('Y', 'com = igual')]
    assert systemd.ler_entrada_nativa(systemd.entrada_nativa(campos)) == dict(campos)


# ---------------------------------------------------------------------------
# O ouvinte.py de verdade
# ---------------------------------------------------------------------------


@pytest.fixture
def erp_sqlite(tmp_path):
    from tests.dados import erp as erp_teste

    banco = erp_teste.erp_sqlite(tmp_path)
    yield banco
    banco.fechar()


@pytest.fixture
def ouvinte_sqlite(tmp_path, erp_sqlite, ambiente_contextia, chave_contextia):
    from tests.apoio.ouvinte import Ouvinte

    return Ouvinte(tmp_path, erp_sqlite, ambiente_contextia, chave_contextia)


@pytest.mark.lento
def test_ouvinte_de_verdade_no_journal_nativo(ouvinte_sqlite, pasta, ouvido):
    """A origem fora do ar: o `ciclo falhou` com traceback e UMA entrada, prioridade err."""
    from tests.apoio.ouvinte import RAIZ as RAIZ_OUVINTE

    o = ouvinte_sqlite
    journald = ouvido('journal.sock')
    env = dict(
        o.env(),
        CONTEXTIA_ORIGEM='sqlite:///%s/nao/existe/erp.sqlite' % pasta,
        **{systemd.VARIAVEL_SOCKET_TESTE: journald.endereco},
    )
    with open(os.path.join(pasta, 'stderr.txt'), 'w+b') as stderr:
        env['JOURNAL_STREAM'] = _journal_stream(stderr.fileno())
        processo = subprocess.Popen(
            o.argv('--once'), cwd=RAIZ_OUVINTE, env=env, stdout=stderr, stderr=stderr
        )
        codigo = processo.wait(120)
        stderr.seek(0)
        crua = stderr.read().decode('utf-8', 'replace')
    assert codigo == 1, crua
    assert crua == ''  # nada fora do journal
    assert journald.esperar(
        lambda o: any(b'ouvinte encerrado' in d for _, _, d, _, _ in o.recebidas), 10
    )
    entradas = [systemd.ler_entrada_nativa(d) for _, _, d, _, _ in journald.recebidas]
    assert {e['SYSLOG_IDENTIFIER'] for e in entradas} == {'ouvinte'}
    assert {p for _, p, _, _, _ in journald.recebidas} == {processo.pid}
    falhas = [e for e in entradas if 'ciclo falhou' in e['MESSAGE']]
    assert len(falhas) == 1, [e['MESSAGE'][:80] for e in entradas]
    assert falhas[0]['PRIORITY'] == '3'
    assert '\nTraceback (most recent call last):\n' in falhas[0]['MESSAGE']
    # CODE_FILE e quem logou, nao o registro nem o logging.
    assert os.sep + 'contextia_sync' + os.sep in falhas[0]['CODE_FILE']
    assert not falhas[0]['CODE_FILE'].endswith(('systemd.py', 'registro.py'))
    # Nenhuma entrada e o pedaco de um traceback.
    assert not any(e['MESSAGE'].startswith(('  File ', 'Traceback')) for e in entradas)
    assert [e['PRIORITY'] for e in entradas if 'ouvinte encerrado' in e['MESSAGE']] == ['6']


def _pid_da_ferramenta(o):
    status = os.path.join(o.estado_dir, 'ouvinte-status.txt')
    if not os.path.exists(status):
        return None
    with open(status) as f:
        achado = re.search(r'ferramenta agora ..: varredura/carregar-todas \(pid (\d+)', f.read())
    return int(achado.group(1)) if achado else None


def _ambiente_de(pid):
    try:
        with open('/proc/%d/environ' % pid, 'rb') as f:
            return dict(v.split(b'=', 1) for v in f.read().split(b'\0') if b'=' in v)
    except OSError:
        return None


@pytest.mark.lento
def test_integracao_laco_ouvinte_avisa_o_systemd(ouvinte_sqlite, pasta, ouvido):
    """
    O ouvinte.py inteiro sob um NOTIFY_SOCKET de verdade: READY=1 depois do preparo,
    STATUS= a cada volta, WATCHDOG=1 enquanto uma ferramenta longa roda (a
    varredura, com o Contextia atrasando cada pedido), STOPPING=1 no SIGTERM --
    e tudo vindo do processo principal; a ferramenta nem ve NOTIFY_SOCKET.
    """
    o = ouvinte_sqlite
    systemd_falso = ouvido()
    o.contextia.injetar('atraso', quantidade=200, segundos=2)
    env = dict(o.env(), NOTIFY_SOCKET=systemd_falso.endereco, WATCHDOG_USEC='10000000')
    from tests.apoio.ouvinte import RAIZ as RAIZ_OUVINTE, esperar

    log = open(os.path.join(pasta, 'ouvinte.log'), 'w+b')
    processo = subprocess.Popen(
        o.argv('--varrer-agora', '--intervalo-dados=60'),
        cwd=RAIZ_OUVINTE,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )

    def saida():
        log.flush()
        log.seek(0)
        return log.read().decode('utf-8', 'replace')

    try:
        pgid = esperar(lambda: _pid_da_ferramenta(o), 120)
        # Ja esta na varredura: o preparo terminou ha tempo, e o READY veio.
        textos = systemd_falso.textos()
        assert any(t.split('\n')[0] == 'READY=1' for t in textos), (textos, saida())
        comeco = time.monotonic()
        # A ferramenta (e o connector neto, no mesmo grupo) nao herdou o canal.
        for pid in [pgid] + [p for p in _membros(pgid) if p != pgid]:
            ambiente = _ambiente_de(pid)
            assert ambiente is None or b'NOTIFY_SOCKET' not in ambiente, pid
        # WATCHDOG=1 durante a ferramenta: pelo menos dois (o pulso e de 30 s).
        assert systemd_falso.esperar(
            lambda s: (
                len([1 for t, _, d, _, _ in s.recebidas if t >= comeco and b'WATCHDOG=1' in d]) >= 2
            ),
            90,
        ), (systemd_falso.textos(), saida())
        assert _pid_da_ferramenta(o) == pgid, 'a ferramenta acabou antes dos vigias'
        processo.send_signal(signal.SIGTERM)
        assert processo.wait(timeout=60) == 0, saida()
    finally:
        if processo.poll() is None:
            processo.kill()
            processo.wait()
        o.contextia.limpar_falhas()
    assert systemd_falso.esperar(
        lambda s: any(d.startswith(b'STOPPING=1') for _, _, d, _, _ in s.recebidas), 5
    )
    textos = systemd_falso.textos()
    linhas = [linha for t in textos for linha in t.split('\n')]
    assert all(re.match(r'(READY|STATUS|WATCHDOG|STOPPING)=', linha) for linha in linhas), linhas
    assert len([t for t in linhas if t == 'READY=1']) == 1
    assert len([t for t in linhas if t == 'STOPPING=1']) == 1
    indice = {
        chave: next(i for i, t in enumerate(textos) if chave in t.split('\n'))
        for chave in ('READY=1', 'STOPPING=1')
    }
    assert indice['READY=1'] < indice['STOPPING=1']
    # STATUS a cada volta (e no pulso): uma linha so, varios diferentes.
    status = [linha for linha in linhas if linha.startswith('STATUS=')]
    assert len(status) >= 2 and all(
        len(s) <= len('STATUS=') + systemd.MAXIMO_STATUS for s in status
    )
    # So o processo principal avisou (NotifyAccess=main).
    assert {p for _, p, _, _, _ in systemd_falso.recebidas} == {processo.pid}
    log.close()


def _membros(pgid):
    membros = []
    for nome in os.listdir('/proc'):
        if nome.isdigit():
            try:
                with open('/proc/%s/stat' % nome, 'rb') as f:
                    campos = f.read().rsplit(b')', 1)[1].split()
            except OSError:
                continue
            if int(campos[2]) == pgid:
                membros.append(int(nome))
    return membros
