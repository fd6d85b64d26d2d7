"""
Partes do ouvinte que não precisam de banco nem servidor: estado, trava,
status, autoteste no python nu e as recusas da linha de comando.
"""

import json
import os
import subprocess
import sys

import pytest

from contextia_sync.estado import estado, status, trava

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_estado_grava_atomico_e_rele(tmp_path):
    caminho = str(tmp_path / 'ouvinte-estado.json')
    e = estado.Estado(caminho)
    e.definir_marca('titulos', '2026-09-02T10:00:00')
    e.registrar_escopos(['297'])
    e.gravar()
    assert not [n for n in os.listdir(tmp_path) if n.endswith('.tmp')]
    de_novo = estado.Estado(caminho)
    assert de_novo.marca('titulos') == '2026-09-02T10:00:00'
    assert de_novo.escopos() == {'297'}


@pytest.mark.parametrize('conteudo', ['{"marca_agua": {"x": ', '[1, 2]', '\x00\x01'])
def test_estado_ilegivel_para_com_a_mensagem(tmp_path, conteudo):
    caminho = tmp_path / 'ouvinte-estado.json'
    caminho.write_text(conteudo)
    with pytest.raises(estado.ErroEstado) as erro:
        estado.Estado(str(caminho))
    assert 'Estado ilegível' in str(erro.value)
    assert 'Conserte ou mova o arquivo' in str(erro.value)
    assert caminho.read_text() == conteudo  # nada apagado


def test_trava_recusa_o_segundo_e_diz_o_pid(tmp_path):
    primeira = trava.travar(str(tmp_path))
    try:
        with pytest.raises(trava.ErroTrava) as erro:
            trava.travar(str(tmp_path))
        assert 'pid %s' % os.getpid() in str(erro.value)
        assert 'marca de água' in str(erro.value)
    finally:
        primeira.close()
    trava.travar(str(tmp_path)).close()  # solta ao fechar


def test_status_trocado_inteiro(tmp_path):
    assert status.escrever_status(str(tmp_path), ['a', 'b']) is None
    assert (tmp_path / status.ARQUIVO_STATUS).read_text() == 'a\nb\n'


def test_status_em_pasta_sumida_devolve_erro_sem_levantar(tmp_path):
    assert status.escrever_status(str(tmp_path / 'nao-existe'), ['a'])


def test_autoteste_roda_em_python_nu_sem_pacote_nenhum():
    # -S: sem site-packages. -I nao: o diretorio do script precisa estar no path.
    saida = subprocess.run(
        [sys.executable, '-S', 'ouvinte.py', '--autoteste'],
        cwd=RAIZ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert saida.returncode == 0, saida.stdout + saida.stderr
    assert 'tudo passou.' in saida.stdout
    assert 'FALHOU' not in saida.stdout


def test_autoteste_nao_importa_nada_pesado():
    codigo = (
        'import sys; sys.argv=["ouvinte.py","--autoteste"]; import runpy, io, '
        'contextlib\nwith contextlib.redirect_stdout(io.StringIO()):\n'
        '    try: runpy.run_path("ouvinte.py", run_name="__main__")\n'
        '    except SystemExit: pass\n'
        'print(sorted(m for m in ("requests","jsonschema","sqlalchemy","logzero",'
        '"urllib3") if m in sys.modules))'
    )
    saida = subprocess.run(
        [sys.executable, '-c', codigo], cwd=RAIZ, capture_output=True, text=True, timeout=120
    )
    # logzero pode vir pelo registro.py (e leve e opcional); os outros nao.
    pesados = json.loads(saida.stdout.strip().splitlines()[-1].replace("'", '"'))
    assert set(pesados) <= {'logzero', 'sqlalchemy'}, saida.stderr


def _ouvinte(*args, env=None, cwd=RAIZ):
    ambiente = dict(os.environ)
    ambiente.pop('CONTEXTIA_URL', None)
    ambiente.update(env or {})
    return subprocess.run(
        [sys.executable, 'ouvinte.py'] + list(args),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        env=ambiente,
    )


@pytest.mark.parametrize('nome', ['change_tracking', 'flashback'])
def test_recusa_de_estrategia_pela_linha_de_comando(tmp_path, nome):
    # Nem mapeamento valido nem URL: a recusa vem antes de tudo.
    r = _ouvinte(
        '--mapping=nao-existe.json',
        '--source=generic',
        '--chaves=x',
        '--estado=%s' % tmp_path,
        '--estrategia=%s' % nome,
    )
    assert r.returncode == 2
    assert 'exigiria' in r.stderr and 'vê DELETE' in r.stderr
    assert 'Traceback' not in r.stderr


@pytest.mark.parametrize(
    'nome',
    sorted(
        __import__('contextia_sync.captura.estrategias', fromlist=['IMPLEMENTACOES']).IMPLEMENTACOES
    ),
)
def test_toda_estrategia_registrada_implementa_o_protocolo_inteiro(nome):
    # O registro é por texto (nenhum mypy confere a classe contra o protocolo): a
    # `binlog` sem antes_da_carga/depois_da_carga derrubava a carga inicial da
    # empresa nova e a varredura com AttributeError (achado da tortura binlog).
    import importlib
    import inspect

    from contextia_sync.captura import Captura
    from contextia_sync.captura.estrategias import IMPLEMENTACOES

    modulo, nome_da_classe = IMPLEMENTACOES[nome].split(':')
    classe = getattr(importlib.import_module(modulo), nome_da_classe)
    for metodo, do_protocolo in vars(Captura).items():
        if metodo.startswith('_') or not callable(do_protocolo):
            continue
        implementado = getattr(classe, metodo, None)
        assert callable(implementado), '%s não implementa %s' % (nome_da_classe, metodo)
        assert list(inspect.signature(implementado).parameters)[
            : len(inspect.signature(do_protocolo).parameters)
        ] == list(inspect.signature(do_protocolo).parameters), (nome_da_classe, metodo)


def test_estrategia_inventada_lista_as_validas(tmp_path):
    r = _ouvinte(
        '--mapping=x.json',
        '--source=generic',
        '--chaves=x',
        '--estado=%s' % tmp_path,
        '--estrategia=magica',
    )
    assert r.returncode == 2 and 'coluna' in r.stderr and 'binlog' in r.stderr


def test_estrategia_do_mapeamento_tambem_recusa(tmp_path):
    with open(os.path.join(RAIZ, 'mappings', 'demo.json')) as arquivo:
        mapa = json.load(arquivo)
    mapa['listener'] = {'strategy': 'flashback'}
    mapa['$schema'] = os.path.join(RAIZ, 'mappings', 'mapeamento.schema.json')
    caminho = tmp_path / 'm.json'
    caminho.write_text(json.dumps(mapa))
    r = _ouvinte(
        '--mapping=%s' % caminho, '--source=generic', '--chaves=x', '--estado=%s' % tmp_path
    )
    assert r.returncode == 2 and 'flashback' in r.stderr and 'ORA_ROWSCN' in r.stderr


def test_sem_contextia_url_recusa(tmp_path):
    r = _ouvinte(
        '--mapping=mappings/demo.json', '--source=generic', '--chaves=x', '--estado=%s' % tmp_path
    )
    assert r.returncode == 2 and 'CONTEXTIA_URL' in r.stderr


def test_varredura_invalida(tmp_path):
    r = _ouvinte(
        '--mapping=mappings/demo.json',
        '--source=generic',
        '--chaves=x',
        '--estado=%s' % tmp_path,
        '--varredura=25:00',
        env={'CONTEXTIA_URL': 'http://127.0.0.1:9'},
    )
    assert r.returncode == 2 and 'HH:MM' in r.stderr


def test_sem_arquivo_de_chaves(tmp_path):
    r = _ouvinte(
        '--mapping=mappings/demo.json',
        '--source=generic',
        '--chaves=%s' % (tmp_path / 'nao.tsv'),
        '--estado=%s' % tmp_path,
        env={'CONTEXTIA_URL': 'http://127.0.0.1:9'},
    )
    assert r.returncode == 2 and 'provisionar.py' in r.stderr


def test_toda_opcao_do_ouvinte_esta_no_guia_do_operador():
    ajuda = subprocess.run(
        [sys.executable, 'ouvinte.py', '--help'],
        cwd=RAIZ,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    import re

    opcoes = set(re.findall(r'(--[a-z][a-z-]+)', ajuda)) - {'--help'}
    with open(os.path.join(RAIZ, 'docs', 'ouvinte.md'), encoding='utf-8') as arquivo:
        guia = arquivo.read()
    assert len(opcoes) >= 18
    assert sorted(o for o in opcoes if '`%s' % o not in guia) == []


def test_aviso_de_escopo_sem_chave_poupa_os_excluidos_e_sai_uma_vez():
    import logging
    from contextia_sync.ouvinte.dados import avisar_sem_chave
    from contextia_sync.registro import logger
    from tests.apoio.log import coletar_log

    mapa = {'source': {'excluded_scopes': [99]}, 'datasets': []}
    avisados: set = set()
    with coletar_log(logging.WARNING, logger) as mensagens:
        avisar_sem_chave(mapa, avisados, 'titulos', ['99'])
        assert not mensagens
        avisar_sem_chave(mapa, avisados, 'titulos', ['7', '99'])
        avisar_sem_chave(mapa, avisados, 'titulos', ['7'])
    avisos = [m for m in mensagens if 'sem chave' in m]
    assert len(avisos) == 1
    assert ': 7 --' in avisos[0] and '99' not in avisos[0]
