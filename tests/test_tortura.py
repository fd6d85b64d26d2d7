"""
A tortura (bench/tortura.py): o modo curto roda aqui, de verdade, e tem de
passar; e o verificador e provado capaz de ACUSAR perda -- um verificador que
nunca falha não prova nada. As desculpas são estreitas (só o que a tortura fez
daquele jeito), as empresas vem da origem, e a leitura de volta e o leitor de
chaves são da própria tortura. Que a tortura inteira reprova um produto
quebrado: tests/test_tortura_mutacoes.py.
"""

import datetime
import json
import os
import subprocess
import sys

import pytest

from tests.apoio.bancos import em_ci, exigir_servidor

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(RAIZ, 'bench')
if BENCH not in sys.path:
    sys.path.insert(0, BENCH)

import tortura  # noqa: E402
import tortura_contextia  # noqa: E402
import tortura_log  # noqa: E402
import tortura_origem  # noqa: E402
import tortura_processos  # noqa: E402
import tortura_verificar as verificar  # noqa: E402

T0 = datetime.datetime(2026, 11, 30, 12, 0, 0)


def _titulo(ident, empresa=1, valor='10.50', situacao='A', segundos=0):
    return {
        'ID': ident,
        'EMPRESA_ID': empresa,
        'VALOR': valor,
        'SITUACAO': situacao,
        'HISTORICO': 'h%d' % ident,
        'OBSERVACAO': None,
        'ALTERADO_EM': T0 + datetime.timedelta(seconds=segundos),
    }


def _como_enviado(linha):
    """O registro como o cliente o manda: Decimal em texto, data em ISO."""
    return {k: (v.isoformat() if isinstance(v, datetime.datetime) else v) for k, v in linha.items()}


def _lados(linhas, registros, dataset='titulos', escopo='1'):
    vazio = {d: [] for d in tortura_origem.DATASETS}
    esperado = {escopo: dict(vazio, **{dataset: linhas})}
    obtido = {escopo: dict(vazio, **{dataset: registros})}
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
    linhas = [_titulo(1, segundos=99)]  # mudou depois de fim - (folga + intervalo)
    esperado, obtido = _lados(linhas, [])
    classes = verificar.comparar(esperado, obtido, _contexto())['classes']
    assert classes == {'verificadas': 1, 'recente_ausente': 1}


def test_verificador_classifica_exclusao_rajada_e_alem_da_folga_sem_esconder():
    linhas = [_titulo(1), _titulo(5, segundos=50), _titulo(6, segundos=40)]
    registros = [_como_enviado(_titulo(1)), _como_enviado(_titulo(9))]
    esperado, obtido = _lados(linhas, registros)
    contexto = _contexto(
        apagados={'titulos': {'9'}},
        rajadas=[
            {
                'dataset': 'titulos',
                'tipo': 'rajada',
                'ids': {'5'},
                'desde': T0 + datetime.timedelta(seconds=50),
                'ate': T0 + datetime.timedelta(seconds=51),
            }
        ],
        alem_da_folga=[('titulos', '6', 15.0)],
    )
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
    esperado, obtido = _lados(
        [atual], [_como_enviado(atual), _como_enviado(velho)], dataset='movimentos'
    )
    classes = verificar.comparar(esperado, obtido, _contexto())['classes']
    assert classes['ok'] == 1 and classes['versao_antiga_sem_key'] == 1


# -- as desculpas sao estreitas -------------------------------------------------


def _visto(segundos):
    return {'marca': T0, 'visto_em': 1000.0 + segundos}


def test_entrega_a_varredura_sem_rajada_da_tortura_nao_e_desculpa():
    rajadas = [{'dataset': 'pedidos', 'tipo': 'rajada', 'inicio': 1005.0}]
    entregues = {'pedidos': _visto(6), 'movimentos': _visto(6), 'titulos': _visto(2)}
    justificados, sem_rajada = verificar.justificar_entregas(entregues, rajadas)
    assert justificados == {'pedidos': T0}
    # titulos: a rajada foi em pedidos; movimentos: nenhuma rajada nele.
    assert sem_rajada == ['movimentos', 'titulos']
    # Entregue ANTES da rajada comecar tambem nao casa com ela.
    assert verificar.justificar_entregas({'pedidos': _visto(1)}, rajadas) == ({}, ['pedidos'])
    # E a linha que mudou no dataset nao justificado fica como o que e: perdida.
    linhas = [_titulo(1, segundos=20)]
    esperado, obtido = _lados(linhas, [], dataset='titulos')
    classes = verificar.comparar(esperado, obtido, _contexto(entregues=justificados))['classes']
    assert classes.get('perdida') == 1 and 'dataset_entregue' not in classes


def test_venenoso_so_e_desculpa_na_quarentena_e_fora_do_contextia():
    linhas = [_titulo(1), _titulo(2), _titulo(3)]
    registros = [_como_enviado(_titulo(3, valor='0'))]
    esperado, obtido = _lados(linhas, registros)
    contexto = _contexto(
        venenosos=[
            ('titulos', '1', '1', 'nan'),
            ('titulos', '2', '1', 'bytes'),
            ('titulos', '3', '1', 'nan'),
        ],
        na_quarentena={('titulos', '1', '1')},
    )
    classes = verificar.comparar(esperado, obtido, contexto)['classes']
    assert classes['quarentena'] == 1  # 1: na quarentena e so la
    assert classes['venenoso_sumiu'] == 1  # 2: nem no Contextia nem na quarentena
    assert classes['venenoso_no_contextia'] == 1  # 3: chegou ao Contextia
    assert set(verificar.REPROVAM) >= {'venenoso_sumiu', 'venenoso_no_contextia'}


def test_nan_da_origem_nunca_e_igual_a_um_numero():
    import decimal

    assert verificar.canonico('num', decimal.Decimal('NaN')) != verificar.canonico('num', '0')
    assert verificar.canonico('num', decimal.Decimal('NaN')) != verificar.canonico('num', None)


def test_sobra_de_linha_que_mudou_de_empresa_so_e_desculpa_na_de_onde_saiu():
    linhas = [_titulo(1, empresa=2)]
    registros = [_como_enviado(_titulo(1, empresa=2)), _como_enviado(_titulo(4))]
    esperado, obtido = _lados(linhas, registros, escopo='2')
    movidos = {'titulos': {'4': {'2'}}}
    classes = verificar.comparar(esperado, obtido, _contexto(movidos=movidos))['classes']
    assert classes['mudou_de_empresa'] == 1 and 'fantasma' not in classes
    # A mesma sobra numa empresa de onde a linha NAO saiu e fantasma.
    movidos = {'titulos': {'4': {'3'}}}
    classes = verificar.comparar(esperado, obtido, _contexto(movidos=movidos))['classes']
    assert classes['fantasma'] == 1


def test_carimbo_no_futuro_e_linha_do_relogio_nao_tem_desculpa():
    # Recentes e num dataset entregue por uma rajada -- e mesmo assim reprovam.
    linhas = [_titulo(1, segundos=99), _titulo(2, segundos=99)]
    esperado, obtido = _lados(linhas, [])
    contexto = _contexto(
        entregues={'titulos': T0}, futuros=[('titulos', '1')], do_relogio=[('titulos', '2', T0)]
    )
    classes = verificar.comparar(esperado, obtido, contexto)['classes']
    assert classes == {'verificadas': 2, 'futuro_ausente': 1, 'relogio_ausente': 1}


def test_empresas_vem_do_cadastro_da_origem_pela_regra(tmp_path):
    import sqlalchemy as sa

    motor = sa.create_engine('sqlite:///%s' % (tmp_path / 'origem.db'))
    tortura_origem.esquema().tables['EMPRESAS'].create(motor)
    with motor.begin() as conexao:
        conexao.execute(
            tortura_origem.esquema().tables['EMPRESAS'].insert(),
            [
                {'EMPRESA_ID': e, 'RAZAO_SOCIAL': 'E%d' % e, 'ATIVA': a}
                for e, a in ((1, 'S'), (10, 'S'), (2, 'S'), (8, 'N'), (99, 'S'))
            ],
        )
    regra = tortura_origem.empresas_da_regra(motor, tortura_origem.mapeamento())
    assert regra.aceitas == ['1', '2', '10']
    assert regra.recusadas == ['8'] and regra.excluidas == ['99']


def test_arquivo_de_chaves_lido_pela_tortura_aceita_bom_e_crlf(tmp_path):
    caminho = tmp_path / 'chaves.tsv'
    caminho.write_bytes(
        '\ufeff# cabeçalho\r\n1\tctx_um\t3\tkey_a\tpronto\r\n\r\n20\tctx_vinte\r\n'.encode('utf-8')
    )
    assert tortura_contextia.ler_arquivo_de_chaves(str(caminho)) == {
        '1': 'ctx_um',
        '20': 'ctx_vinte',
    }


def test_leitura_de_volta_com_http_da_tortura_pagina_tudo(chave_contextia, contextia):
    from contextia_sync.intake import cliente

    chave = chave_contextia()
    registros = [{'ID': i, 'NOME': 'r%d' % i} for i in range(23)]
    cliente.enviar_dataset('paginas', registros, key='ID', api_key=chave)
    leitor = tortura_contextia.Contextia(contextia.url, contextia.admin_token)
    lidos = leitor.registros(chave, 'paginas', pagina=5)
    assert sorted(r['ID'] for r in lidos) == list(range(23))
    assert [d['dataset'] for d in leitor.datasets(chave)] == ['paginas']
    dono = leitor.quem_sou(chave)['external_id']
    assert [p['id'] for p in leitor.projetos(dono)] == [leitor.quem_sou(chave)['project_id']]


def test_filho_do_ouvinte_entre_fork_e_exec_nao_e_segundo_ouvinte():
    cmd = '/venv/bin/python /repo/ouvinte.py --mapping=m.json --estado=/e'
    processos = [(10, 1, cmd), (11, 10, cmd), (12, 11, 'bash carregar-todas.sh')]
    # O 11 e o supervisor do 10 entre o fork e o exec: o mesmo programa, nao outro.
    assert tortura_processos.ouvintes_principais(processos) == [10]
    assert tortura_processos.ouvintes_principais(processos + [(20, 1, cmd)]) == [10, 20]


def test_intruso_so_conta_como_recusado_pela_trava():
    msg = 'Já existe um ouvinte rodando com este diretório de estado (/e/ouvinte.lock, pid 10).'
    assert tortura_processos.recusa_da_trava(2, msg)
    assert tortura_processos.recusa_da_trava(
        2, msg.replace('Ja', 'J\u00e1').replace('diretorio', 'diret\u00f3rio')
    )
    assert not tortura_processos.recusa_da_trava(1, msg)  # saiu por outra coisa
    assert not tortura_processos.recusa_da_trava(2, 'Falta CONTEXTIA_URL')
    assert not tortura_processos.recusa_da_trava(0, '')


def test_todo_achado_reprova():
    veredito = tortura.Veredito()
    assert veredito.passou()
    veredito.falhar('ouvinte_saiu_sozinho', 'o ouvinte saiu sozinho (códigos [1])')
    veredito.falhar('ouvinte_saiu_sozinho', 'o ouvinte saiu sozinho (códigos [1])')
    assert not veredito.passou() and len(veredito.motivos) == 1
    assert veredito.codigos() == ['ouvinte_saiu_sozinho']


def _tortura_curta(tmp_path, *extra, log=None):
    """
    O modo curto em PostgreSQL (ou, com `log`, no servidor privado da estratégia
    por log): (processo, saída padrão, relatório, números do JSON).
    """
    if log is None:
        exigir_servidor('postgres')
        extra = ('--banco=postgres',) + extra
    else:
        ok, motivo = tortura_log.disponivel(log)
        if not ok:
            if em_ci():
                pytest.fail('CI=true e %s' % motivo)
            pytest.skip('%s: teste pulado (com CI=true seria falha)' % motivo)
        extra = ('--estrategia=' + log,) + extra
    saida = tmp_path / 'numeros.json'
    # Processo proprio: a tortura mexe no ambiente (CONTEXTIA_URL) e mata processos.
    processo = subprocess.Popen(
        [
            sys.executable,
            os.path.join(BENCH, 'tortura.py'),
            '--modo=curto',
            '--semente=4242',
            '--saida=%s' % saida,
            *extra,
        ],
        cwd=RAIZ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Guarda contra travar, nao cronometro: o tempo do modo curto e medido e
        # dito em docs/tortura.md (teste cronometrado nao prova velocidade).
        saida_padrao, erros = processo.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        # SIGTERM primeiro: a tortura limpa o que iniciou (ouvinte, servidor, banco).
        processo.terminate()
        saida_padrao, erros = processo.communicate(timeout=60)
    relatorio = saida_padrao[-6000:] + erros[-3000:]
    assert saida.exists(), relatorio
    dados = json.loads(saida.read_text())
    assert not dados['nao_rodou'], relatorio
    return processo, saida_padrao, relatorio, dados['resultados'][0]


@pytest.mark.lento
@pytest.mark.postgres
@pytest.mark.timeout(300)
@pytest.mark.xdist_group('pesado_a')  # ver tests/test_tortura_mutacoes.py
def test_tortura_curta_postgres_nao_perde_nenhuma_linha(tmp_path):
    processo, saida_padrao, relatorio, numeros = _tortura_curta(tmp_path)

    # Todo achado reprova: nenhum motivo, e o veredito e PASSOU.
    assert numeros['motivos'] == [], relatorio
    assert numeros['passou'] and 'PASSOU' in saida_padrao, relatorio
    assert numeros['perdidas'] == 0, relatorio
    assert numeros['divergencias_apos_varredura'] == 0, relatorio
    assert numeros['duplicadas'] == 0, relatorio
    assert numeros['ao_vivo'].get('fantasma', 0) == 0, relatorio
    assert not numeros['estado_ilegivel'], relatorio
    assert not numeros['segundo_ouvinte'] and not numeros['intrusos_aceitos'], relatorio
    assert numeros['intrusos_recusados'] >= 1, relatorio
    assert numeros['sobras_no_fim'] == 0, relatorio
    # As empresas vieram da origem: as cinco iniciais e a nova, com projeto e dados.
    empresas = numeros['empresas']['ao vivo']
    assert empresas['aceitas'] == ['1', '2', '3', '4', '5', '7'], relatorio
    assert empresas['com_projeto'] == empresas['com_dados'] == 6, relatorio
    assert empresas['recusadas'] == ['8'] and empresas['excluidas'] == ['99'], relatorio
    # Cada falha de dado sujo aconteceu e passou na sua condicao.
    sujo = numeros['dado_sujo']
    assert sujo['futuro']['linhas'] == 3 and sujo['futuro']['ausentes'] == 0, relatorio
    assert sujo['quarentena']['por_tipo'] == {'nan': [1, 1], 'bytes': [1, 1]}, relatorio
    assert sujo['quarentena']['outros'] == 0 and sujo['quarentena']['corrigidos'] == 2
    assert numeros['desculpas']['quarentena'] == 2, relatorio
    assert numeros['mudancas_por_tipo']['linhas_carimbo_em_massa'] > 250, relatorio
    assert 'estoques' in numeros['entregues_a_varredura_no_estado'], relatorio
    assert 'estoques' in numeros['retomada_s'], relatorio
    assert sujo['relogio']['linhas'] == 3 and sujo['relogio']['ausentes'] == 0, relatorio
    assert sujo['relogio']['avisos'] >= 1, relatorio
    assert sujo['bom']['reprovisionadas'] == 0, relatorio
    assert sujo['kill9_varredura']['orfaos'] >= 1, relatorio
    assert sujo['kill9_varredura']['vivos_apos_subir'] == 0, relatorio
    assert numeros['falhas_injetadas']['corpo_invalido'] > 0, relatorio
    assert numeros['mudancas_por_tipo'].get('mudanca_de_empresa', 0) > 0, relatorio
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


@pytest.mark.lento
@pytest.mark.postgres
@pytest.mark.timeout(300)
@pytest.mark.xdist_group('pesado_b')
def test_tortura_curta_com_reconciliacao_nao_deixa_apagada_nem_remove_viva(tmp_path):
    processo, saida_padrao, relatorio, numeros = _tortura_curta(
        tmp_path, '--estrategia=coluna+reconciliacao', '--intervalo-reconciliacao=10'
    )
    assert numeros['estrategia'] == 'coluna+reconciliacao', relatorio
    assert numeros['motivos'] == [], relatorio
    assert numeros['passou'] and 'PASSOU' in saida_padrao, relatorio
    rec = numeros['reconciliacao']
    # Com a reconciliacao a exclusao fisica nao e desculpa: nada apagado sobrou...
    assert rec['apagadas_sobrando'] == 0, relatorio
    # ...nenhuma linha viva saiu, conferido sem parar (nao so no fim)...
    assert rec['vivas_removidas'] == 0, relatorio
    assert rec['voltas'] >= 5, relatorio
    # ...e houve exclusoes de verdade, removidas pelo ouvinte.
    assert numeros['mudancas_por_tipo'].get('exclusao', 0) > 0, relatorio
    assert rec['removidas_total'] > 0, relatorio
    assert numeros['perdidas'] == 0 and numeros['divergencias_apos_varredura'] == 0, relatorio
    assert processo.returncode == 0, relatorio


@pytest.mark.lento
@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    'estrategia,grupo',
    [
        pytest.param(
            'binlog', 'pesado_b', marks=[pytest.mark.mariadb, pytest.mark.xdist_group('pesado_b')]
        ),
        pytest.param(
            'slot_logico',
            'pesado_a',
            marks=[pytest.mark.postgres, pytest.mark.xdist_group('pesado_a')],
        ),
    ],
)
def test_tortura_curta_lendo_o_log_nao_perde_nem_deixa_apagada(tmp_path, estrategia, grupo):
    # grupo: so para o id do teste dizer onde ele roda (a marca e que vale).
    # 25 s de carga (o curto tem 40): cada evento ainda acontece -- a transação além
    # da folga comita aos ~23 s --, e a suíte cabe nos 10 minutos com as duas.
    processo, saida_padrao, relatorio, numeros = _tortura_curta(
        tmp_path, '--duracao=25', log=estrategia
    )
    assert numeros['estrategia'] == estrategia, relatorio
    assert numeros['banco'] == tortura_log.BANCO[estrategia], relatorio
    assert numeros['motivos'] == [], relatorio
    assert numeros['passou'] and 'PASSOU' in saida_padrao, relatorio
    assert numeros['perdidas'] == 0 and numeros['duplicadas'] == 0, relatorio
    assert numeros['divergencias_apos_varredura'] == 0, relatorio
    # Lendo o log nada que a `coluna` desculpa é desculpa: a exclusão, a rajada,
    # o carimbo em massa e o commit além da folga chegaram ao vivo...
    desculpas = numeros['desculpas']
    for classe in (
        'apagada_na_origem',
        'alem_da_folga',
        'rajada',
        'carimbo_em_massa',
        'dataset_entregue',
    ):
        assert desculpas[classe] == 0, (classe, relatorio)
    assert numeros['alem_da_folga']['transacoes'] >= 1, relatorio
    assert numeros['mudancas_por_tipo']['linhas_carimbo_em_massa'] > 250, relatorio
    assert numeros['rajadas'] and not numeros['entregues_a_varredura_no_estado'], relatorio
    # ...e nada apagado sobrou, nenhuma viva saiu (o vigia, sem parar).
    rec = numeros['reconciliacao']
    assert rec['apagadas_sobrando'] == 0 and rec['vivas_removidas'] == 0, relatorio
    assert rec['apagadas_na_carga'] > 0 and rec['voltas'] >= 5, relatorio
    # O dataset sem key fica fora do ao-vivo, dito no status (conferido pela
    # tortura), e a varredura o iguala (divergencias == 0 acima).
    assert numeros['captura']['estrategia'] == estrategia, relatorio
    # A empresa nova recebeu a carga inicial (morta no meio, de propósito) --
    # o achado desta tortura: a `binlog` não a fazia.
    assert numeros.get('kill_na_carga_inicial'), relatorio
    empresas = numeros['empresas']['ao vivo']
    assert empresas['com_projeto'] == empresas['com_dados'] == 6, relatorio
    assert numeros['kills'] + numeros['sigterms'] >= 3, relatorio
    assert numeros['conexoes_origem_derrubadas'] > 0, relatorio
    assert processo.returncode == 0, relatorio


def test_lendo_o_log_so_o_dataset_fora_do_ao_vivo_tem_desculpa():
    # A mesma ausência que a `coluna` desculpa (além da folga) lendo o log é perda;
    # só o dataset que o produto declara fora (o sem key) espera a varredura.
    linhas = [_titulo(1), _titulo(6, segundos=40)]
    esperado, obtido = _lados(linhas, [])
    movimento = {'DOC': 'MV1', 'EMPRESA_ID': 1, 'VALOR': '5.00', 'TIPO': 'D', 'ALTERADO_EM': T0}
    esperado['1']['movimentos'] = [movimento]
    obtido['1']['movimentos'] = [_como_enviado(dict(movimento, DOC='MV9'))]
    contexto = _contexto(fora_do_ao_vivo=['movimentos'])
    classes = verificar.comparar(esperado, obtido, contexto)['classes']
    assert classes['perdida'] == 2 and classes['fora_do_ao_vivo'] == 2, classes
    assert 'fora_do_ao_vivo' in verificar.DESCULPAS


# -- achado da tortura, corrigido no produto -------------------------------------


@pytest.fixture
def ouvinte_sqlite(tmp_path, fabrica_de_bancos, ambiente_contextia, chave_contextia):
    from tests.apoio.ouvinte import Ouvinte
    from tests.dados import erp as erp_teste

    erp = erp_teste.Erp(fabrica_de_bancos('sqlite', 'erp'))
    yield Ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia)
    erp.fechar()


@pytest.mark.lento
def test_carimbo_no_futuro_num_dataset_varrido_nao_leva_a_marca_para_o_futuro(ouvinte_sqlite):
    from tests.apoio.ouvinte import DATASET

    o = ouvinte_sqlite
    e0 = o.erp.escopos[0]
    assert o.rodar('--once')[0] == 0
    # Uma operacao em massa (acima do teto) entrega o dataset a varredura, e UMA
    # linha dele tem carimbo no futuro (digitacao errada na estacao do ERP).
    o.erp.executar('UPDATE {TITULOS} SET {ALTERADO_EM} = :a', a='2026-09-01 12:00:00')
    torto = o.erp.base * 1000 + 1
    o.erp.executar(
        'UPDATE {TITULOS} SET {ALTERADO_EM} = :a WHERE {ID} = :i', a='2037-12-01 00:00:00', i=torto
    )
    codigo, saida = o.rodar('--once', '--maximo-por-ciclo=20', '--varrer-agora')
    assert codigo == 0, saida
    assert 'carregado pela varredura' in saida, saida
    agora = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    # Uma mudanca de agora tem de chegar ao vivo depois da varredura.
    novo = o.inserir(e0, (agora - datetime.timedelta(seconds=30)).isoformat(' ', 'seconds'))
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    marca = datetime.datetime.fromisoformat(o.estado()['marca_agua'][DATASET])
    assert marca <= agora + datetime.timedelta(seconds=60), (
        'a marca foi para o futuro da origem: %s (agora %s)' % (marca, agora)
    )
    assert novo in o.no_contextia(e0)


@pytest.mark.lento
def test_carimbo_no_futuro_na_primeira_subida_nao_leva_a_marca_inicial_para_o_futuro(
    ouvinte_sqlite,
):
    # O outro caminho do mesmo achado: a marca inicial (_primeira_vez) parte do
    # MAX da coluna, e uma linha no futuro já estava lá antes da primeira subida.
    from tests.apoio.ouvinte import DATASET

    o = ouvinte_sqlite
    e0 = o.erp.escopos[0]
    torto = o.erp.base * 1000 + 1
    o.erp.executar(
        'UPDATE {TITULOS} SET {ALTERADO_EM} = :a WHERE {ID} = :i', a='2037-12-01 00:00:00', i=torto
    )
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    agora = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    marca = datetime.datetime.fromisoformat(o.estado()['marca_agua'][DATASET])
    assert marca <= agora + datetime.timedelta(seconds=60), (
        'a marca inicial foi para o futuro da origem: %s (agora %s)' % (marca, agora)
    )
    novo = o.inserir(e0, (agora - datetime.timedelta(seconds=30)).isoformat(' ', 'seconds'))
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    assert novo in o.no_contextia(e0), saida


@pytest.mark.parametrize(
    'tipo',
    [
        pytest.param('postgres', marks=pytest.mark.postgres),
        pytest.param('mariadb', marks=pytest.mark.mariadb),
    ],
)
def test_matador_de_conexoes_so_derruba_a_conexao_ja_vista_e_nao_protegida(fabrica_de_bancos, tipo):
    # A conexão da carga se protege milissegundos depois de abrir: nova, ela não é
    # candidata (a suíte carregada viu o carimbo em massa morrer nesse meio-tempo).
    import sqlalchemy as sa

    banco = fabrica_de_bancos(tipo, 'matador')
    motor = sa.create_engine(banco.url_admin, poolclass=sa.pool.NullPool)
    protegidos = set()
    matador = tortura_origem.MatadorDeConexoes(
        tipo, banco.url_admin, banco.nome, protegidos, periodo=(60, 60), semente=1
    )
    pid = 'SELECT pg_backend_pid()' if tipo == 'postgres' else 'SELECT CONNECTION_ID()'
    try:
        with motor.connect() as uma, motor.connect() as outra:
            ids = [int(c.execute(sa.text(pid)).scalar()) for c in (uma, outra)]
            with matador.motor.connect() as conexao:
                assert matador._candidatas(conexao) == []  # nova: nunca
                protegidos.add(ids[1])
                assert matador._candidatas(conexao) == [ids[0]]  # vista, e não protegida
    finally:
        matador.parar()
        motor.dispose()
