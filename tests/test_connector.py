"""
connector.py de verdade (subprocesso) contra origens SQLite e PostgreSQL e o
Contextia local num processo real.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from contextia_sync.intake import cliente
from tests.dados import erp as erp_teste

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(
    params=[
        'sqlite',
        pytest.param('postgres', marks=pytest.mark.postgres),
        pytest.param('mariadb', marks=pytest.mark.mariadb),
    ]
)
def erp(request, fabrica_de_bancos):
    return erp_teste.Erp(fabrica_de_bancos(request.param))


@pytest.fixture
def mapa(tmp_path):
    return erp_teste.mapeamento(tmp_path)


def conector(erp, mapa, escopo, chave, *extra, ambiente=None):
    env = dict(os.environ, CONTEXTIA_ORIGEM=erp.url)
    env.pop('CONTEXTIA_API_KEY', None)
    if chave is not None:
        env['CONTEXTIA_API_KEY'] = chave
    env.update(ambiente or {})
    feito = subprocess.run(
        [
            sys.executable,
            'connector.py',
            '--mapping=' + mapa,
            '--source=generic',
            '--scope=' + escopo,
        ]
        + list(extra),
        cwd=RAIZ,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=120,
    )
    return feito.returncode, feito.stdout.decode('utf-8', 'replace')


def numeros(saida, dataset):
    """{'registros': 45, 'novos': ...} da linha do dataset na saída."""
    for linha in saida.splitlines():
        if linha.strip().startswith(dataset + ' ') or linha.strip().startswith(dataset + '  '):
            achados = dict(
                (k, int(v))
                for k, v in re.findall(r'(\w+)=(\d+)', linha)
                if k in ('registros', 'novos', 'atualizados', 'iguais', 'removidos')
            )
            if 'registros' in achados:
                return achados
    raise AssertionError('dataset %s não aparece na saída:\n%s' % (dataset, saida))


def no_servidor(chave):
    return {d['dataset']: d['records'] for d in cliente.listar_datasets(chave)}


def test_carga_completa_repetida_e_remocao(erp, mapa, chave_contextia):
    escopo = erp.escopos[0]
    chave = chave_contextia(escopo)

    codigo, saida = conector(erp, mapa, escopo, chave)
    assert codigo == 0, saida
    assert numeros(saida, 'titulos_a_receber') == {
        'registros': 45,
        'novos': 45,
        'atualizados': 0,
        'iguais': 0,
        'removidos': 0,
    }
    assert 'campos descritos=2' in saida
    assert 'resumo escopo=%s: 2 dataset(s), 2 ok, 0 com falha' % escopo in saida
    assert no_servidor(chave) == {'titulos_a_receber': 45, 'status': 3}

    # Logo em seguida: nada mudou, tudo volta como igual.
    codigo, saida = conector(erp, mapa, escopo, chave)
    assert codigo == 0, saida
    assert numeros(saida, 'titulos_a_receber') == {
        'registros': 45,
        'novos': 0,
        'atualizados': 0,
        'iguais': 45,
        'removidos': 0,
    }

    # Linha apagada e linha alterada na origem: a carga seguinte remove e atualiza.
    menor, maior = erp.executar(
        'SELECT MIN({ID}), MAX({ID}) FROM {TITULOS} WHERE {EMPRESA_ID} = :e', e=int(escopo)
    )[0]
    erp.executar('DELETE FROM {TITULOS} WHERE {ID} = :i', i=menor)
    erp.executar('UPDATE {TITULOS} SET {VALOR} = 1.50 WHERE {ID} = :i', i=maior)
    codigo, saida = conector(erp, mapa, escopo, chave)
    assert codigo == 0, saida
    assert numeros(saida, 'titulos_a_receber') == {
        'registros': 44,
        'novos': 0,
        'atualizados': 1,
        'iguais': 43,
        'removidos': 1,
    }
    assert no_servidor(chave)['titulos_a_receber'] == 44
    valores = {float(r['VALOR']) for r in cliente.ler_registros('titulos_a_receber', chave)}
    assert 1.5 in valores


def test_falha_no_meio_do_dataset_nao_remove_nada(erp, mapa, ambiente_contextia, chave_contextia):
    escopo = erp.escopos[0]
    chave = chave_contextia(escopo)
    assert conector(erp, mapa, escopo, chave)[0] == 0
    erp.executar('DELETE FROM {TITULOS} WHERE {EMPRESA_ID} = :e AND {ID} % 10 = 0', e=int(escopo))
    restantes = erp.titulos(escopo)
    assert restantes < 45

    # O primeiro lote passa (atraso curto), o segundo leva 500: o dataset para no meio.
    ambiente_contextia.injetar('atraso', 1, segundos=0.01)
    ambiente_contextia.injetar('500', 1)
    codigo, saida = conector(erp, mapa, escopo, chave, '--dataset=Titulos a Receber')
    assert codigo == 1, saida
    assert 'complete NÃO enviado, nada removido' in saida
    assert 'FALHARAM: titulos_a_receber' in saida
    # Intocado: os apagados na origem continuam la, nada saiu.
    assert no_servidor(chave)['titulos_a_receber'] == 45

    # Sem a falha, a carga seguinte fecha e remove.
    codigo, saida = conector(erp, mapa, escopo, chave, '--dataset=titulos_a_receber')
    assert codigo == 0, saida
    assert numeros(saida, 'titulos_a_receber')['removidos'] == 45 - restantes


def test_teto_de_remocao_recusa_esvaziar_e_permite_com_1(erp, mapa, chave_contextia):
    escopo = erp.escopos[1]
    chave = chave_contextia(escopo)
    assert conector(erp, mapa, escopo, chave)[0] == 0
    # A view "volta vazia" para esta empresa (manutencao, GRANT revogado...).
    erp.executar('DELETE FROM {TITULOS} WHERE {EMPRESA_ID} = :e', e=int(escopo))

    codigo, saida = conector(erp, mapa, escopo, chave)
    assert codigo == 1, saida
    assert 'teto' in saida and '--max-remocao=1' in saida
    assert no_servidor(chave)['titulos_a_receber'] == 30
    # O outro dataset (dominio) nao e afetado pela falha deste.
    assert numeros(saida, 'status (domínio)')['iguais'] == 3

    codigo, saida = conector(erp, mapa, escopo, chave, '--max-remocao=1')
    assert codigo == 0, saida
    assert 'remoção em massa PERMITIDA' in saida
    assert numeros(saida, 'titulos_a_receber')['removidos'] == 30
    assert no_servidor(chave)['titulos_a_receber'] == 0


def test_dominio_vai_inteiro_e_recorte_so_da_empresa(erp, mapa, chave_contextia):
    chaves = {e: chave_contextia(e) for e in erp.escopos}
    for escopo, chave in chaves.items():
        assert conector(erp, mapa, escopo, chave)[0] == 0
    assert no_servidor(chaves[erp.escopos[0]]) == {'titulos_a_receber': 45, 'status': 3}
    assert no_servidor(chaves[erp.escopos[1]]) == {'titulos_a_receber': 30, 'status': 3}
    empresas = {
        r['EMPRESA_ID'] for r in cliente.ler_registros('titulos_a_receber', chaves[erp.escopos[1]])
    }
    assert empresas == {int(erp.escopos[1])}


def test_seco_le_e_conta_sem_chave_e_sem_enviar(erp, mapa, ambiente_contextia):
    codigo, saida = conector(erp, mapa, erp.escopos[0], None, '--dry-run')
    assert codigo == 0, saida
    assert numeros(saida, 'titulos_a_receber')['registros'] == 45
    assert 'SECO' in saida
    assert ambiente_contextia.admin().buscar_projeto(erp.escopos[0]) is None


@pytest.fixture
def erp_sqlite(banco_sqlite):
    return erp_teste.Erp(banco_sqlite)


def test_chave_de_outra_empresa_e_recusada(erp_sqlite, mapa, chave_contextia):
    outra = chave_contextia(erp_sqlite.escopos[1])
    codigo, saida = conector(erp_sqlite, mapa, erp_sqlite.escopos[0], outra)
    assert codigo == 2, saida
    assert 'não da empresa %s' % erp_sqlite.escopos[0] in saida
    assert outra not in saida
    assert no_servidor(outra) == {}


def _arquivo_de_chaves(pasta, chaves):
    from contextia_sync.provisionamento.chaves import Registro, gravar_registros

    arquivo = pasta / 'chaves.tsv'
    gravar_registros(
        str(arquivo), [Registro(e, c, None, None, 'pronto', None) for e, c in chaves.items()]
    )
    return arquivo


def test_carga_a_mao_le_a_chave_do_arquivo_e_grava_o_historico(
    erp_sqlite, mapa, tmp_path, chave_contextia
):
    """`connector.py --scope=X --chaves=ARQ`, sem CONTEXTIA_API_KEY: a linha da empresa."""
    escopo, outra = erp_sqlite.escopos[0], erp_sqlite.escopos[1]
    chave = chave_contextia(escopo)
    arquivo = _arquivo_de_chaves(tmp_path, {outra: chave_contextia(outra), escopo: chave})
    codigo, saida = conector(erp_sqlite, mapa, escopo, None, '--chaves=%s' % arquivo)
    assert codigo == 0, saida
    assert chave not in saida
    assert numeros(saida, 'titulos_a_receber')['registros'] == 45
    assert no_servidor(chave)['titulos_a_receber'] == 45
    # O historico por padrao: ao lado do arquivo de chaves, como o do carregar-todas.sh.
    historico = '%s.historico.json' % arquivo
    assert 'histórico ......: %s' % historico in saida, saida
    with open(historico, encoding='utf-8') as f:
        cargas = json.load(f)['cargas']
    assert cargas[escopo]['titulos_a_receber']['registros'] == 45
    assert outra not in cargas

    # Empresa que o arquivo nao tem: recusa com a correcao, nada enviado.
    (tmp_path / 'so-outra').mkdir()
    arquivo_outra = _arquivo_de_chaves(tmp_path / 'so-outra', {outra: 'ctx_x'})
    codigo, saida = conector(erp_sqlite, mapa, escopo, None, '--chaves=%s' % arquivo_outra)
    assert codigo == 2, saida
    assert 'a empresa %s não está no arquivo de chaves' % escopo in saida
    assert 'provisionar.py --somente-escopo=%s' % escopo in saida


def test_sem_chave_no_ambiente_nem_arquivo_diz_as_duas_saidas(
    erp_sqlite, mapa, tmp_path, ambiente_contextia
):
    codigo, saida = conector(erp_sqlite, mapa, erp_sqlite.escopos[0], None)
    assert codigo == 2, saida
    assert 'passe --chaves=ARQ' in saida and 'CONTEXTIA_API_KEY' in saida, saida
    codigo, saida = conector(
        erp_sqlite, mapa, erp_sqlite.escopos[0], None, '--chaves=%s' % (tmp_path / 'nao.tsv')
    )
    assert codigo == 2 and 'não existe: rode o provisionar.py' in saida, saida


@pytest.mark.parametrize(
    'caso, extra, trecho',
    [
        ('sem chave', [], 'falta a chave do projeto da empresa'),
        ('chave revogada', ['revogada'], 'recusou a chave'),
        ('dataset desconhecido', ['--dataset=titulos'], "--dataset 'titulos' não existe"),
        ('teto inválido', ['--max-remocao=2'], 'não é uma fração de 0 a 1'),
    ],
)
def test_erros_de_configuracao_saem_com_2(
    erp_sqlite, mapa, ambiente_contextia, caso, extra, trecho
):
    chave = None
    if caso != 'sem chave':
        chave = ambiente_contextia.criar_projeto_com_chave(erp_sqlite.escopos[0])
    if extra == ['revogada']:
        admin = ambiente_contextia.admin()
        projeto = admin.buscar_projeto(erp_sqlite.escopos[0])
        for c in admin.listar_chaves(projeto['id']):
            admin.revogar_chave(c['key_id'])
        extra = []
    codigo, saida = conector(erp_sqlite, mapa, erp_sqlite.escopos[0], chave, *extra)
    assert codigo == 2, saida
    assert trecho in saida
    if chave:
        assert chave not in saida


def test_sem_terminal_carga_longa_imprime_progresso_com_o_que_falta(
    erp_sqlite, mapa, chave_contextia
):
    # O ouvinte encerra ferramenta calada; sem terminal (aqui, um pipe) o conector
    # diz quanto ja leu, de quanto (contado na origem antes) e quanto falta.
    # Intervalo curto para a carga de 45 registros em lotes de 10 caber em varios
    # intervalos (cada lote e um POST real).
    escopo = erp_sqlite.escopos[0]
    chave = chave_contextia(escopo)
    codigo, saida = conector(
        erp_sqlite, mapa, escopo, chave, ambiente={'CONTEXTIA_PROGRESSO_SEGUNDOS': '0.001'}
    )
    assert codigo == 0, saida
    achados = re.findall(
        r'^titulos_a_receber escopo=%s: (\d+) de 45 \((\d+)%%\), faltam ~(\d+)s$' % escopo,
        saida,
        re.M,
    )
    assert achados, saida
    lidos = [int(n) for n, _, _ in achados]
    assert lidos == sorted(set(lidos)) and 0 < lidos[-1] <= 45, lidos
    assert all(int(p) == 100 * int(n) // 45 for n, p, _ in achados), achados
    assert numeros(saida, 'titulos_a_receber')['registros'] == 45
    assert '\r' not in saida  # sem terminal, nada de barra do tqdm

    # Com o padrao (30 s) uma carga curta nao imprime progresso nenhum.
    codigo, saida = conector(erp_sqlite, mapa, escopo, chave)
    assert codigo == 0 and ' de 45 (' not in saida, saida

    codigo, saida = conector(
        erp_sqlite, mapa, escopo, chave, ambiente={'CONTEXTIA_PROGRESSO_SEGUNDOS': 'meia hora'}
    )
    assert codigo == 2 and 'CONTEXTIA_PROGRESSO_SEGUNDOS' in saida, saida


def test_linha_de_progresso_e_o_tempo_que_falta():
    from contextia_sync.carga.completa import linha_de_progresso, tempo_curto

    assert (
        linha_de_progresso('t', '297', 250, 1000, 10.0) == 't escopo=297: 250 de 1000'
        ' (25%), faltam ~30s'
    )
    assert linha_de_progresso('t', '297', 999, 1000, 999.0).endswith('(99%), faltam ~1s')
    assert linha_de_progresso('t', '297', 10, 7200 * 10 + 10, 1.0).endswith('faltam ~2h 00min')
    # A origem cresceu depois da contagem; o adaptador nao conseguiu contar.
    assert (
        linha_de_progresso('t', '297', 12, 10, 1.0)
        == 't escopo=297: 12 lidos, mais que os 10 contados no início'
    )
    assert linha_de_progresso('t', '297', 12) == 't escopo=297: 12 registros lidos até agora'
    assert linha_de_progresso('t', '297', 0, 0, 1.0) == 't escopo=297: 0 de 0 (100%)'
    assert [tempo_curto(s) for s in (0, 59.4, 60, 185, 3600, 7260)] == [
        '0s',
        '59s',
        '1min 00s',
        '3min 05s',
        '1h 00min',
        '2h 01min',
    ]


def _no_pty(argv, env):
    """Roda `argv` com a stderr num terminal de verdade (pty); devolve (feito, tela)."""
    import fcntl
    import pty
    import struct
    import termios

    mestre, escravo = pty.openpty()
    # Terminal de 120 colunas: um pty novo tem 0, e o tqdm nao desenharia nada.
    fcntl.ioctl(escravo, termios.TIOCSWINSZ, struct.pack('HHHH', 24, 120, 0, 0))
    try:
        feito = subprocess.run(
            argv, cwd=RAIZ, env=env, stdout=subprocess.PIPE, stderr=escravo, timeout=120
        )
        os.close(escravo)
        tela = b''
        while True:
            try:
                pedaco = os.read(mestre, 65536)
            except OSError:  # Linux: EIO quando o escravo fecha
                break
            if not pedaco:
                break
            tela += pedaco
    finally:
        os.close(mestre)
    return feito, tela.decode('utf-8', 'replace')


def test_no_terminal_a_barra_tem_o_total_e_o_tempo_que_falta(erp_sqlite, mapa, chave_contextia):
    escopo = erp_sqlite.escopos[0]
    chave = chave_contextia(escopo)
    env = dict(os.environ, CONTEXTIA_ORIGEM=erp_sqlite.url, CONTEXTIA_API_KEY=chave)
    feito, tela = _no_pty(
        [
            sys.executable,
            'connector.py',
            '--mapping=' + mapa,
            '--source=generic',
            '--scope=' + escopo,
        ],
        env,
    )
    assert feito.returncode == 0, feito.stdout
    # leave=True: o ultimo desenho da barra termina em nova linha, nao e apagado
    # (o pty troca \n por \r\n; o que vale e o desenho depois do ultimo \r).
    finais = [t.rstrip('\r').rsplit('\r', 1)[-1] for t in tela.split('\n')]
    barra = [t for t in finais if t.startswith('titulos_a_receber: ')]
    assert barra, tela
    # Com o total contado antes: a porcentagem, N/M e o tempo que falta (ETA).
    assert re.match(r'titulos_a_receber: 100%\|.*\| 45/45 \[\d\d:\d\d<00:00', barra[0]), barra
    assert b' de 45 (' not in feito.stdout


def test_escopo_excluido_e_recusado(erp_sqlite, tmp_path, ambiente_contextia):
    mapa = erp_teste.mapeamento(tmp_path, source={'excluded_scopes': [int(erp_sqlite.escopos[0])]})
    codigo, saida = conector(erp_sqlite, mapa, erp_sqlite.escopos[0], 'ctx_qualquer')
    assert codigo == 2 and 'excluded_scopes' in saida, saida


def test_mapeamento_invalido_sai_com_2_listando_problemas(erp_sqlite, tmp_path):
    mapa = erp_teste.mapeamento(tmp_path, defaults={'scope_column': 'EMPRESA', 'kye': 'ID'})
    codigo, saida = conector(erp_sqlite, mapa, erp_sqlite.escopos[0], 'ctx_x', '--dry-run')
    assert codigo == 2
    assert "defaults.kye: chave desconhecida 'kye' -- você quis dizer 'key'?" in saida


def test_view_que_nao_existe_falha_so_aquele_dataset(erp_sqlite, tmp_path, chave_contextia):
    mapa = erp_teste.mapeamento(tmp_path)
    with open(mapa) as f:
        conteudo = json.load(f)
    conteudo['datasets'].insert(
        0, {'dataset': 'Sumida', 'source_object': 'VW_QUE_NAO_HA', 'columns': ['ID', 'EMPRESA_ID']}
    )
    with open(mapa, 'w') as f:
        json.dump(conteudo, f)
    escopo = erp_sqlite.escopos[0]
    chave = chave_contextia(escopo)
    codigo, saida = conector(erp_sqlite, mapa, escopo, chave)
    assert codigo == 1, saida
    assert 'sumida' in saida and 'FALHOU' in saida and 'VW_QUE_NAO_HA' in saida
    assert '3 dataset(s), 2 ok, 1 com falha' in saida
    assert no_servidor(chave) == {'titulos_a_receber': 45, 'status': 3}


def test_origem_inalcancavel_sai_com_1_sem_enviar(erp_sqlite, mapa, chave_contextia):
    escopo = erp_sqlite.escopos[0]
    chave = chave_contextia(escopo)
    codigo, saida = conector(
        erp_sqlite,
        mapa,
        escopo,
        chave,
        ambiente={'CONTEXTIA_ORIGEM': 'postgresql+psycopg://leitor:senha-secreta@127.0.0.1:1/erp'},
    )
    assert codigo == 1, saida
    assert 'não foi possível conectar na origem' in saida
    assert 'senha-secreta' not in saida
    assert no_servidor(chave) == {}


def test_resumo_da_carga_real_leva_o_motivo_de_cada_falha(
    erp_sqlite, tmp_path, ambiente_contextia, chave_contextia
):
    # O resumo e a linha que o log do ouvinte guarda: so o nome do dataset nao diz
    # ao operador o que corrigir. Um dataset falha no Contextia (500), outro na origem.
    mapa = erp_teste.mapeamento(tmp_path)
    with open(mapa) as f:
        conteudo = json.load(f)
    conteudo['datasets'].append(
        {'dataset': 'Sumida', 'source_object': 'VW_QUE_NAO_HA', 'columns': ['ID', 'EMPRESA_ID']}
    )
    with open(mapa, 'w') as f:
        json.dump(conteudo, f)
    escopo = erp_sqlite.escopos[0]
    chave = chave_contextia(escopo)
    ambiente_contextia.injetar('500', 1)
    codigo, saida = conector(erp_sqlite, mapa, escopo, chave)
    assert codigo == 1, saida
    resumo = [linha for linha in saida.splitlines() if linha.startswith('resumo escopo=')]
    assert len(resumo) == 1, saida
    assert re.search(
        r'FALHARAM: titulos_a_receber \(.*HTTP 500.*\); sumida \(.*VW_QUE_NAO_HA', resumo[0]
    ), resumo[0]
