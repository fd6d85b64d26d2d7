"""
Cada processo filho do ouvinte recebe só o segredo dele (contextia_sync/segredos.py).

O ouvinte de verdade roda o provisionar (empresa nova e varredura), o connector
(carga inicial) e o carregar-todas.sh (que roda `chaves verificar` e um connector
`--todas` para todas as empresas). Um `sitecustomize.py` no PYTHONPATH faz
CADA processo Python dessa árvore gravar o próprio ambiente ao nascer -- o
ambiente que o kernel deu a ele, o mesmo de /proc/<pid>/environ.
"""

import glob
import json
import os
import secrets

import pytest

from contextia_sync.provisionamento.chaves import ler_chaves
from tests.apoio.ouvinte import Ouvinte
from tests.dados import erp as erp_teste

pytestmark = pytest.mark.lento

ESPIAO = """
import json, os, sys, uuid
_pasta = os.environ.get('ESPIAO_AMBIENTE')
if _pasta:
    with open(os.path.join(_pasta, '%d-%s.json' % (os.getpid(), uuid.uuid4().hex)), 'w') as _f:
        json.dump({'argv': list(getattr(sys, 'orig_argv', sys.argv)),
                   'env': dict(os.environ)}, _f)
"""

TOKEN = 'CONTEXTIA_ADMIN_TOKEN'
CHAVE = 'CONTEXTIA_API_KEY'
WEBHOOK = 'CONTEXTIA_WEBHOOK_TESTE'
DBA = 'CONTEXTIA_ORIGEM_DBA'
URL_DBA = 'postgresql://dono:senha-do-dono-da-base@127.0.0.1:9/erp'


def _ambientes(pasta):
    """[(argv, env)] de cada processo Python que nasceu sob o espiao."""
    saida = []
    for caminho in glob.glob(os.path.join(pasta, '*.json')):
        with open(caminho) as arquivo:
            registro = json.load(arquivo)
        saida.append((' '.join(registro['argv']), registro['env']))
    return saida


def test_cada_filho_do_ouvinte_recebe_so_o_segredo_dele(
    tmp_path, ambiente_contextia, chave_contextia
):
    erp = erp_teste.erp_sqlite(tmp_path)
    o = Ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia)
    o.mapa = erp_teste.mapeamento(
        tmp_path,
        webhook={'url': ambiente_contextia.url + '/receptor/{escopo}', 'secret_env': WEBHOOK},
    )
    espiao = tmp_path / 'espiao'
    espiao.mkdir()
    (espiao / 'sitecustomize.py').write_text(ESPIAO)
    gravados = tmp_path / 'ambientes'
    gravados.mkdir()
    segredo_webhook = 'segredo-webhook-' + secrets.token_hex(12)
    # Uma chave perdida no ambiente do ouvinte (a de outra empresa) tambem nao desce.
    perdida = o.chaves[erp.escopos[0]]
    # A URL do DBA (so o --criar-slot a usa): nenhum filho a recebe (issue 28).
    env = dict(
        o.env(),
        ESPIAO_AMBIENTE=str(gravados),
        **{WEBHOOK: segredo_webhook, CHAVE: perdida, DBA: URL_DBA},
    )
    env['PYTHONPATH'] = os.pathsep.join(p for p in (str(espiao), env.get('PYTHONPATH')) if p)
    o.env = lambda: env

    nova = str(erp.base + 7)
    erp.executar(
        'INSERT INTO {EMPRESAS} VALUES (:e, :n, NULL, :a)', e=int(nova), n='Loja Nova', a='S'
    )
    codigo, saida = o.rodar('--once', '--varrer-agora')
    erp.fechar()
    assert codigo == 0, saida
    chaves = ler_chaves(o.arquivo_chaves)
    assert nova in chaves

    vistos = {'provisionar': 0, 'conector': 0, 'todas': 0, 'verificar': 0, 'executar': 0}
    for argv, ambiente in _ambientes(str(gravados)):
        modulo = argv.split(' -m ')[1].split()[0] if ' -m ' in argv else argv
        if modulo == 'contextia_sync.cli.provisionar':
            vistos['provisionar'] += 1
            # O token e o segredo do webhook: exatamente o que ele usa.
            assert ambiente.get(TOKEN) == ambiente_contextia.admin_token, argv
            assert ambiente.get(WEBHOOK) == segredo_webhook, argv
            assert CHAVE not in ambiente, argv
        elif modulo == 'contextia_sync.cli.conector' and '--todas' in argv:
            vistos['todas'] += 1
            # As chaves ele le do arquivo: nenhum segredo no ambiente.
            assert not {TOKEN, WEBHOOK, CHAVE} & set(ambiente), argv
        elif modulo == 'contextia_sync.cli.conector':
            vistos['conector'] += 1
            escopo = argv.split('--scope=')[1].split()[0]
            assert ambiente.get(CHAVE) == chaves[escopo], argv  # a chave DELA
            assert TOKEN not in ambiente and WEBHOOK not in ambiente, argv
        elif modulo == 'contextia_sync.provisionamento.chaves':
            vistos['verificar' if ' verificar ' in argv else 'executar'] += 1
            # O ambiente do carregar-todas.sh: nenhum segredo.
            assert not {TOKEN, WEBHOOK, CHAVE} & set(ambiente), argv
        else:
            assert 'ouvinte.py' in argv, argv
            continue
        assert DBA not in ambiente, argv
    # Provisionar: empresa nova + varredura; connector: a carga inicial da nova, e
    # UM connector --todas na varredura (as 3 com chave); verificar uma vez.
    assert vistos == {'provisionar': 2, 'conector': 1, 'todas': 1, 'verificar': 1, 'executar': 0}, (
        vistos
    )
