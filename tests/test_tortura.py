"""
A tortura (bench/tortura.py): o modo curto roda aqui, de verdade, e tem de
passar; e o verificador e provado capaz de ACUSAR perda -- um verificador que
nunca falha não prova nada.
"""

import datetime
import json
import os
import subprocess
import sys

import pytest

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(RAIZ, 'bench')
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)

import tortura_origem  # noqa: E402
import tortura_verificar as verificar  # noqa: E402

T0 = datetime.datetime(2026, 11, 30, 12, 0, 0)


def _titulo(ident, empresa=1, valor='10.50', situacao='A', segundos=0):
    return {'ID': ident, 'EMPRESA_ID': empresa, 'VALOR': valor, 'SITUACAO': situacao,
            'HISTORICO': 'h%d' % ident, 'ALTERADO_EM': T0 + datetime.timedelta(seconds=segundos)}


def _como_enviado(linha):
    """O registro como o cliente o manda: Decimal em texto, data em ISO."""
    return {k: (v.isoformat() if isinstance(v, datetime.datetime) else v)
            for k, v in linha.items()}


def _lados(linhas, registros, dataset='titulos'):
    vazio = {d: [] for d in tortura_origem.DATASETS}
    esperado = {'1': dict(vazio, **{dataset: linhas})}
    obtido = {'1': dict(vazio, **{dataset: registros})}
    return esperado, obtido


def _contexto(**extra):
    opcoes = dict(fim=T0 + datetime.timedelta(seconds=100), folga=10, intervalo=1)
    opcoes.update(extra)
    return verificar.Contexto(**opcoes)


def test_verificador_aceita_o_mesmo_valor_em_outra_grafia():
    linha = _titulo(1, valor=__import__('decimal').Decimal('10.50'))
    registro = dict(_como_enviado(linha), VALOR='10.5')
    esperado, obtido = _lados([linha], [registro])
    resultado = verificar.comparar(esperado, obtido)
    assert resultado['classes'] == {'verificadas': 1, 'ok': 1}


def test_verificador_acusa_linha_ausente_e_desatualizada_como_perda():
    linhas = [_titulo(1), _titulo(2), _titulo(3, situacao='C')]
    registros = [_como_enviado(_titulo(1)), _como_enviado(_titulo(3, situacao='A'))]
    esperado, obtido = _lados(linhas, registros)
    classes = verificar.comparar(esperado, obtido, _contexto())['classes']
    # 2 nao chegou; 3 chegou com o valor velho (o cancelamento se perdeu).
    assert classes['perdida'] == 2
    assert verificar.comparar(esperado, obtido)['classes']['divergente'] == 2


def test_verificador_separa_recente_de_perdida():
    linhas = [_titulo(1, segundos=99)]          # mudou depois de fim - (folga + intervalo)
    esperado, obtido = _lados(linhas, [])
    classes = verificar.comparar(esperado, obtido, _contexto())['classes']
    assert classes == {'verificadas': 1, 'recente_ausente': 1}


def test_verificador_classifica_exclusao_rajada_e_alem_da_folga_sem_esconder():
    linhas = [_titulo(1), _titulo(5, segundos=50), _titulo(6, segundos=40)]
    registros = [_como_enviado(_titulo(1)), _como_enviado(_titulo(9))]
    esperado, obtido = _lados(linhas, registros)
    contexto = _contexto(
        apagados={'titulos': {'9'}},
        rajadas=[{'dataset': 'titulos', 'ids': {'5'}, 'desde': T0 + datetime.timedelta(
            seconds=50), 'ate': T0 + datetime.timedelta(seconds=51)}],
        alem_da_folga=[('titulos', '6', 15.0)])
    classes = verificar.comparar(esperado, obtido, contexto)['classes']
    assert classes['apagada_na_origem'] == 1
    assert classes['rajada'] == 1
    assert classes['alem_da_folga'] == 1
    assert 'perdida' not in classes
    # Depois da varredura nada disso e desculpa: a comparacao exata acusa tudo.
    exato = verificar.comparar(esperado, obtido)['classes']
    assert exato['divergente'] == 2 and exato['sobra'] == 1


def test_verificador_acusa_duplicata_com_key():
    linha = _titulo(1)
    esperado, obtido = _lados([linha], [_como_enviado(linha), _como_enviado(linha)])
    assert verificar.comparar(esperado, obtido)['classes']['duplicada'] == 1


def test_verificador_sem_key_compara_conteudo_e_explica_versao_antiga():
    atual = {'DOC': 'MV1', 'EMPRESA_ID': 1, 'VALOR': '5.00', 'TIPO': 'D', 'ALTERADO_EM': T0}
    velho = dict(atual, VALOR='4.00', ALTERADO_EM=T0 - datetime.timedelta(seconds=5))
    esperado, obtido = _lados([atual], [_como_enviado(atual), _como_enviado(velho)],
                              dataset='movimentos')
    classes = verificar.comparar(esperado, obtido, _contexto())['classes']
    assert classes['ok'] == 1 and classes['versao_antiga_sem_key'] == 1


@pytest.mark.lento
@pytest.mark.postgres
@pytest.mark.timeout(300)
def test_tortura_curta_postgres_nao_perde_nenhuma_linha(tmp_path):
    disponivel, motivo = tortura_origem.banco_disponivel('postgres')
    if not disponivel:
        if os.environ.get('CI') == 'true':
            pytest.fail('CI sem PostgreSQL: ' + motivo)
        pytest.skip(motivo)
    saida = tmp_path / 'numeros.json'
    # Processo proprio: a tortura mexe no ambiente (CONTEXTIA_URL) e mata processos.
    processo = subprocess.Popen(
        [sys.executable, os.path.join(BENCH, 'tortura.py'), '--modo=curto', '--banco=postgres',
         '--semente=4242', '--saida=%s' % saida],
        cwd=RAIZ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        saida_padrao, erros = processo.communicate(timeout=230)
    except subprocess.TimeoutExpired:
        # SIGTERM primeiro: a tortura limpa o que iniciou (ouvinte, servidor, banco).
        processo.terminate()
        saida_padrao, erros = processo.communicate(timeout=60)
    relatorio = saida_padrao[-6000:] + erros[-3000:]
    assert saida.exists(), relatorio
    dados = json.loads(saida.read_text())
    assert not dados['nao_rodou'], relatorio
    numeros = dados['resultados'][0]

    assert numeros['perdidas'] == 0, relatorio
    assert numeros['divergencias_apos_varredura'] == 0, relatorio
    assert numeros['duplicadas'] == 0, relatorio
    assert numeros['ao_vivo'].get('fantasma', 0) == 0, relatorio
    assert not numeros['estado_ilegivel'], relatorio
    assert not numeros['segundo_ouvinte'] and not numeros['intrusos_aceitos'], relatorio
    assert not numeros['processos_sobrando'], relatorio
    # O limite documentado da `coluna`: a transacao que comitou quando a marca
    # gravada ja tinha passado de carimbo + folga nao chega pelo ao-vivo, e a
    # varredura a recupera (divergencias = 0 acima).
    alem = numeros['alem_da_folga']
    demonstradas = [d for d in alem['detalhe'] if d['janela_ja_passou']]
    assert demonstradas, relatorio
    assert alem['perdidas_pelo_ao_vivo'] >= len(demonstradas), relatorio
    # A morte de proposito durante a carga inicial da empresa nova aconteceu, e
    # mesmo assim o historico dela esta la (perdidas == 0 acima).
    assert numeros.get('kill_na_carga_inicial'), relatorio
    # A tortura torturou: houve mortes, falhas e exclusoes de verdade.
    assert numeros['kills'] + numeros['sigterms'] >= 3, relatorio
    assert sum(numeros['falhas_injetadas'].values()) > 0, relatorio
    assert numeros['mudancas_por_tipo'].get('exclusao', 0) > 0, relatorio
    assert numeros['linhas_verificadas'] > 500, relatorio
    assert processo.returncode == 0, relatorio
