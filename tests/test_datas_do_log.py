"""
As datas do log em ISO (`2026-12-01 07:26:24`), na tela e no arquivo de
`--log`, com o logzero (o normal) e sem ele (o `python3 -S` do autoteste):
o padrão do logzero, '%y%m%d', dava `261201 07:26:24`.
"""

import os
import re
import subprocess
import sys

import pytest

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = r'\d{4}-\d\d-\d\d \d\d:\d\d:\d\d'

PROGRAMA = (
    """
import sys
sys.path.insert(0, %r)
from contextia_sync.registro import arquivo_de_log, logger
arquivo_de_log(sys.argv[1])
logger.warning('um aviso')
"""
    % RAIZ
)


@pytest.mark.parametrize('opcoes', [[], ['-S']], ids=['logzero', 'sem-pacotes'])
def test_tela_e_arquivo_com_data_iso(tmp_path, opcoes):
    arquivo = tmp_path / 'ouvinte.log'
    env = {k: v for k, v in os.environ.items() if k not in ('JOURNAL_STREAM', 'PYTHONPATH')}
    feito = subprocess.run(
        [sys.executable] + opcoes + ['-c', PROGRAMA, str(arquivo)],
        cwd=str(tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert feito.returncode == 0, feito.stderr
    # Na tela (o logzero acrescenta modulo:linha); sem cor, porque a stderr e um pipe.
    assert re.search(r'(?m)^\[W %s(?: \S+:\d+)?\] um aviso$' % DATA, feito.stderr), feito.stderr
    # No arquivo: a mesma data, sem milissegundos.
    linhas = arquivo.read_text(encoding='utf-8').splitlines()
    assert len(linhas) == 1 and re.fullmatch(r'\[W %s\] um aviso' % DATA, linhas[0]), linhas
