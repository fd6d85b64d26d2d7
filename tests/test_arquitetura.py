"""
A regra das salas confere a si mesma (issue 29, item 3).

As camadas moram num lugar só, os contratos do import-linter no
pyproject.toml; o `make lint` roda `lint-imports`, que lê todo import de cada
módulo (também os tardios, de dentro de funções). Aqui: os contratos valem no
código de hoje; uma seta plantada para cima (um import tardio da `cli` dentro
de `escopos.py`) e um ciclo plantado os quebram; e a lista de camadas de
docs/arquitetura.md é a mesma do pyproject.toml.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINT_IMPORTS = os.path.join(os.path.dirname(sys.executable), 'lint-imports')


def _camadas() -> list[str]:
    with open(os.path.join(RAIZ, 'pyproject.toml'), 'rb') as arquivo:
        contratos = tomllib.load(arquivo)['tool']['importlinter']['contracts']
    return next(c for c in contratos if c['id'] == 'salas')['layers']


def _lint_imports(raiz: str) -> subprocess.CompletedProcess[str]:
    if not os.path.exists(LINT_IMPORTS):
        pytest.fail('lint-imports não está no venv: rode `make test` (instala o [dev])')
    env = dict(os.environ, PYTHONPATH=raiz)
    return subprocess.run(
        [LINT_IMPORTS, '--no-cache'],
        cwd=raiz,
        env=env,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=120,
    )


@pytest.fixture
def copia(tmp_path):
    """Uma cópia dos dois pacotes e do pyproject.toml, para plantar imports nela."""
    for pacote in ('contextia_sync', 'contextia_local'):
        shutil.copytree(
            os.path.join(RAIZ, pacote),
            tmp_path / pacote,
            ignore=shutil.ignore_patterns('__pycache__'),
        )
    shutil.copy(os.path.join(RAIZ, 'pyproject.toml'), tmp_path / 'pyproject.toml')
    return tmp_path


def test_os_contratos_valem_no_codigo_de_hoje():
    feito = _lint_imports(RAIZ)
    assert feito.returncode == 0, feito.stdout
    assert 'Contracts: 3 kept, 0 broken.' in feito.stdout, feito.stdout


def test_import_tardio_que_sobe_quebra_a_regra(copia):
    escopos = copia / 'contextia_sync' / 'escopos.py'
    escopos.write_text(
        escopos.read_text() + '\n\ndef _plantado() -> None:\n'
        '    from contextia_sync.cli import ouvinte  # noqa: F401\n'
    )
    feito = _lint_imports(str(copia))
    assert feito.returncode != 0, feito.stdout
    assert 'contextia_sync.escopos is not allowed to import contextia_sync.cli' in feito.stdout, (
        feito.stdout
    )


def test_ciclo_entre_irmaos_quebra_a_regra(copia):
    # origem/conjunto.py <-> generico.py era o ciclo de antes (issue 29).
    conjunto = copia / 'contextia_sync' / 'origem' / 'conjunto.py'
    conjunto.write_text(
        conjunto.read_text() + '\n\ndef _plantado() -> None:\n'
        '    from contextia_sync.origem import generico  # noqa: F401\n'
    )
    feito = _lint_imports(str(copia))
    assert feito.returncode != 0, feito.stdout
    assert 'Nenhum ciclo entre módulos irmãos, em nenhum nível BROKEN' in feito.stdout


def test_a_doc_mostra_as_camadas_do_pyproject():
    with open(os.path.join(RAIZ, 'docs', 'arquitetura.md'), encoding='utf-8') as arquivo:
        doc = arquivo.read()
    bloco = re.search(r'<!-- camadas -->\n```\n(.*?)```', doc, re.S)
    assert bloco, 'docs/arquitetura.md perdeu o bloco <!-- camadas -->'
    linhas = [linha.strip() for linha in bloco.group(1).splitlines() if linha.strip()]
    assert linhas == _camadas(), 'docs/arquitetura.md e pyproject.toml divergem nas camadas'
    # Cada sala aparece na tabela dos cômodos, com o número da camada dela.
    na_tabela = {
        m.group(1): int(m.group(2))
        for m in re.finditer(r'^\| `(\w+)(?:/|\.py)` \|.*\| (\d+) \|$', doc, re.M)
    }
    esperado = {
        sala: numero for numero, camada in enumerate(_camadas(), 1) for sala in camada.split(' | ')
    }
    assert na_tabela == esperado
