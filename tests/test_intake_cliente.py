"""
O cliente contra o Contextia local de verdade (HTTP em 127.0.0.1, sem mock).

Um servidor por módulo; cada teste usa um projeto próprio (chave_contextia),
então os datasets não se misturam.
"""

import datetime
import decimal
import io
import logging
import threading
import time
import uuid

import pytest

from contextia_sync.intake import cliente
from contextia_sync.intake import transporte
from contextia_sync.intake.admin import Admin
from contextia_sync.registro import logger as logger_sdk


def registros(quantidade, inicio=0, sufixo=''):
    for i in range(inicio, inicio + quantidade):
        yield {
            'ID': i,
            'NOME': 'registro %d%s' % (i, sufixo),
            'VALOR': decimal.Decimal('%d.%02d' % (i, i % 100)),
            'VENCIMENTO': datetime.date(2026, 1, 1) + datetime.timedelta(days=i % 365),
        }


def test_upsert_repetir_o_envio_da_so_duplicates(chave_contextia):
    chave = chave_contextia()
    primeiro = cliente.enviar_dataset(
        'Titulos a Receber', registros(1200), key='ID', chunk=500, api_key=chave
    )
    assert (primeiro.registros, primeiro.inserted, primeiro.lotes_ok, primeiro.lotes_erro) == (
        1200,
        1200,
        3,
        0,
    )
    segundo = cliente.enviar_dataset(
        'Titulos a Receber', registros(1200), key='ID', chunk=500, api_key=chave
    )
    assert (segundo.inserted, segundo.updated, segundo.duplicates) == (0, 0, 1200)
    # 10 alterados + 5 novos
    alterados = list(registros(10, sufixo=' alterado')) + list(registros(5, inicio=1200))
    terceiro = cliente.enviar_dataset('Titulos a Receber', alterados, key='ID', api_key=chave)
    assert (terceiro.inserted, terceiro.updated, terceiro.duplicates) == (5, 10, 0)
    [dataset] = cliente.listar_datasets(chave)
    assert (dataset['dataset'], dataset['records'], dataset['key']) == (
        'titulos_a_receber',
        1205,
        'ID',
    )


def test_sem_key_deduplica_por_hash_e_alteracao_vira_registro_novo(chave_contextia):
    chave = chave_contextia()
    base = [{'CODIGO': 'A', 'DESCRICAO': 'ativo'}, {'CODIGO': 'B', 'DESCRICAO': 'baixado'}]
    assert cliente.enviar_dataset('status', base, api_key=chave).inserted == 2
    # Mesmo conteudo em outra ordem de colunas: o hash e do JSON canonico.
    reordenado = [{'DESCRICAO': r['DESCRICAO'], 'CODIGO': r['CODIGO']} for r in base]
    repetido = cliente.enviar_dataset('status', reordenado, api_key=chave)
    assert (repetido.inserted, repetido.duplicates) == (0, 2)
    alterado = cliente.enviar_dataset(
        'status', [{'CODIGO': 'A', 'DESCRICAO': 'ATIVO'}], api_key=chave
    )
    assert (alterado.inserted, alterado.updated) == (1, 0)
    assert cliente.listar_datasets(chave)[0]['records'] == 3


def test_leitura_devolve_os_valores_como_enviados(chave_contextia):
    chave = chave_contextia()
    uid = uuid.uuid4()
    enviado = {
        'ID': 1,
        'VALOR': decimal.Decimal('10.50'),
        'QUANDO': datetime.datetime(2026, 9, 2, 10, 5),
        'ARQ': b'\x00\x01',
        'UID': uid,
        'NADA': None,
    }
    cliente.enviar_dataset(
        'tipos',
        [enviado],
        key='ID',
        api_key=chave,
        description='tipos',
        fields={'VALOR': 'valor em reais'},
    )
    [lido] = list(cliente.ler_registros('tipos', chave))
    assert lido == {
        'ID': 1,
        'VALOR': '10.50',
        'QUANDO': '2026-09-02T10:05:00',
        'ARQ': 'AAE=',
        'UID': str(uid),
        'NADA': None,
    }
    assert cliente.bytes_de(lido['ARQ']) == b'\x00\x01'
    [info] = cliente.listar_datasets(chave)
    assert info['fields'] == {'VALOR': 'valor em reais'} and info['description'] == 'tipos'


def test_ler_registros_pagina(chave_contextia):
    chave = chave_contextia()
    cliente.enviar_dataset('paginas', registros(250), key='ID', api_key=chave)
    ids = [r['ID'] for r in cliente.ler_registros('paginas', chave, pagina=100)]
    assert sorted(ids) == list(range(250))


def test_envio_e_em_streaming_sem_materializar(chave_contextia):
    chave = chave_contextia()
    vistos_no_servidor = []

    def gerador():
        for i in range(1000):
            if i == 600:
                # Ao pedir o registro 600, os lotes 1-3 (de 200) ja chegaram.
                vistos_no_servidor.append(cliente.listar_datasets(chave)[0]['records'])
            yield {'ID': i}

    resultado = cliente.enviar_dataset('stream', gerador(), key='ID', chunk=200, api_key=chave)
    assert resultado.inserted == 1000
    assert vistos_no_servidor == [600]


def test_sync_e_complete_removem_exatamente_o_que_nao_foi_visto(chave_contextia):
    chave = chave_contextia()
    cliente.enviar_dataset('carga', registros(100), key='ID', api_key=chave)
    sync = cliente.gerar_sync()
    # A origem perdeu os IDs 90..99.
    resultado = cliente.enviar_dataset(
        'carga', registros(90), key='ID', chunk=40, api_key=chave, sync=sync
    )
    assert (resultado.duplicates, resultado.lotes_erro) == (90, 0)
    fechado = cliente.completar('carga', sync, api_key=chave, max_remocao=0.2)
    assert fechado['removed'] == 10
    ids = sorted(r['ID'] for r in cliente.ler_registros('carga', chave))
    assert ids == list(range(90))
    # complete repetido (retry) e inofensivo
    assert cliente.completar('carga', sync, api_key=chave)['removed'] == 0


def test_complete_nao_remove_o_que_chegou_por_fora_durante_a_carga(chave_contextia):
    chave = chave_contextia()
    cliente.enviar_dataset('vivo', registros(10), key='ID', api_key=chave)
    sync = cliente.gerar_sync()
    cliente.enviar_dataset('vivo', registros(5), key='ID', api_key=chave, sync=sync)
    # O ouvinte manda uma inclusao (sem sync) enquanto a varredura corre.
    cliente.enviar_dataset('vivo', registros(1, inicio=500), key='ID', api_key=chave)
    assert cliente.completar('vivo', sync, api_key=chave)['removed'] == 5
    assert sorted(r['ID'] for r in cliente.ler_registros('vivo', chave)) == [0, 1, 2, 3, 4, 500]


def test_teto_de_remocao_recusa_e_nao_remove_nada(chave_contextia):
    chave = chave_contextia()
    cliente.enviar_dataset('teto', registros(100), key='ID', api_key=chave)
    sync = cliente.gerar_sync()
    cliente.enviar_dataset('teto', registros(40), key='ID', api_key=chave, sync=sync)
    with pytest.raises(cliente.ErroRemocaoAcimaDoTeto, match='removeria 60 de 100'):
        cliente.completar('teto', sync, api_key=chave, max_remocao=0.5)
    assert cliente.listar_datasets(chave)[0]['records'] == 100


def test_sync_vazio_registra_o_sync_e_complete_desconhecido_recusa(chave_contextia):
    chave = chave_contextia()
    cliente.enviar_dataset('vazio', registros(3), key='ID', api_key=chave)
    with pytest.raises(transporte.ErroContextia, match='nunca entregou'):
        cliente.completar('vazio', 'sync-que-nao-existe', api_key=chave)
    sync = cliente.gerar_sync()
    resultado = cliente.enviar_dataset('vazio', [], key='ID', api_key=chave, sync=sync)
    assert (resultado.lotes_ok, resultado.registros) == (1, 0)
    with pytest.raises(cliente.ErroRemocaoAcimaDoTeto):
        cliente.completar('vazio', sync, api_key=chave, max_remocao=0.5)
    assert cliente.completar('vazio', sync, api_key=chave)['removed'] == 3


def test_remove_no_envelope(chave_contextia):
    chave = chave_contextia()
    assert cliente.capacidades(chave)['remove'] is True
    cliente.enviar_dataset('rem', registros(5), key='ID', api_key=chave)
    resultado = cliente.enviar_dataset('rem', [], key='ID', api_key=chave, remove=[1, 3, 77])
    assert resultado.removed == 2
    assert sorted(r['ID'] for r in cliente.ler_registros('rem', chave)) == [0, 2, 4]


def test_um_lote_que_falha_conta_em_lotes_erro_e_o_resto_segue(chave_contextia, ambiente_contextia):
    chave = chave_contextia()
    cliente.enviar_dataset('falha', registros(1), key='ID', api_key=chave)
    # 500 nao e re-tentado (erro do servidor, nao sobrecarga): o 2o lote falha.
    ambiente_contextia.injetar('500', 1)
    resultado = cliente.enviar_dataset(
        'falha', registros(300, inicio=1), key='ID', chunk=100, api_key=chave
    )
    assert (resultado.lotes_ok, resultado.lotes_erro) == (2, 1)
    assert 'HTTP 500' in resultado.erros[0]
    assert cliente.listar_datasets(chave)[0]['records'] == 201


def test_5xx_e_retentado_e_depois_passa(chave_contextia, ambiente_contextia):
    chave = chave_contextia()
    ambiente_contextia.injetar('503', 3)
    resultado = cliente.enviar_dataset('retry', registros(10), key='ID', api_key=chave)
    assert (resultado.inserted, resultado.lotes_erro) == (10, 0)
    assert ambiente_contextia.falhas_injetadas()['503'] == 3


def test_429_respeita_retry_after(chave_contextia, ambiente_contextia):
    chave = chave_contextia()
    ambiente_contextia.injetar('429', 1, retry_after=2)
    inicio = time.monotonic()
    resultado = cliente.enviar_dataset('limite', registros(10), key='ID', api_key=chave)
    assert time.monotonic() - inicio >= 1.9
    assert (resultado.inserted, resultado.lotes_erro) == (10, 0)
    assert ambiente_contextia.falhas_injetadas()['429'] == 1


def test_conexao_derrubada_no_meio_e_reenviada_sem_duplicar(chave_contextia, ambiente_contextia):
    chave = chave_contextia()
    # O servidor GRAVA e derruba a resposta: o reenvio tem de dar o mesmo estado.
    ambiente_contextia.injetar('derrubar', 1, quando='depois')
    ambiente_contextia.injetar('derrubar', 1, quando='antes')
    resultado = cliente.enviar_dataset('queda', registros(50), key='ID', api_key=chave)
    assert resultado.lotes_erro == 0
    assert ambiente_contextia.falhas_injetadas()['derrubar'] == 2
    # A contagem do reenvio diz "duplicates": a primeira gravacao valeu.
    assert resultado.inserted + resultado.duplicates == 50
    assert cliente.listar_datasets(chave)[0]['records'] == 50


def test_retentativas_tem_prazo_total(chave_contextia, ambiente_contextia, monkeypatch):
    chave = chave_contextia()
    monkeypatch.setattr(transporte, 'PRAZO_RETENTATIVAS', 3)
    monkeypatch.setattr(transporte._local, 'sessoes', {}, raising=False)
    ambiente_contextia.injetar('429', 50, retry_after=60)
    inicio = time.monotonic()
    resultado = cliente.enviar_dataset('prazo', registros(5), key='ID', api_key=chave)
    assert time.monotonic() - inicio < 15
    assert resultado.lotes_erro == 1
    monkeypatch.setattr(transporte._local, 'sessoes', {}, raising=False)


def test_401_nomeia_o_escopo_e_nunca_a_chave(chave_contextia, ambiente_contextia):
    chave = chave_contextia('escopo-401')
    admin = ambiente_contextia.admin()
    projeto = admin.buscar_projeto('escopo-401')
    [registro_chave] = admin.listar_chaves(projeto['id'])
    admin.revogar_chave(registro_chave['key_id'])
    with pytest.raises(cliente.ErroAutenticacao) as erro:
        cliente.enviar_dataset('x', registros(3), api_key=chave, escopo='escopo-401')
    mensagem = str(erro.value)
    assert 'escopo escopo-401' in mensagem and 'HTTP 401' in mensagem
    assert chave not in mensagem and chave[8:] not in mensagem
    with pytest.raises(cliente.ErroAutenticacao):
        cliente.quem_sou(chave)


def test_chave_nunca_aparece_no_log(chave_contextia, ambiente_contextia, capfd):
    chave = chave_contextia()
    saida = io.StringIO()
    handler = logging.StreamHandler(saida)
    logger_sdk.addHandler(handler)
    nivel = logger_sdk.level
    logger_sdk.setLevel(logging.DEBUG)
    try:
        ambiente_contextia.injetar('500', 1)
        cliente.enviar_dataset('log', registros(3), api_key=chave)
        cliente.enviar_dataset('log', [{'ID': float('nan')}], api_key=chave)
        # Um chamador descuidado que loga a chave pelo logger do SDK: o filtro mascara.
        logger_sdk.info('usando a chave %s', chave)
        with pytest.raises(cliente.ErroAutenticacao):
            cliente.enviar_dataset('log', registros(1), api_key=chave + 'X')
    finally:
        logger_sdk.removeHandler(handler)
        logger_sdk.setLevel(nivel)
    capturado = capfd.readouterr()
    texto = saida.getvalue() + capturado.out + capturado.err
    assert 'HTTP 500' in texto and 'ctx_' in texto
    assert chave not in texto and chave[8:] not in texto


def test_sem_contextia_url_recusa_sem_adivinhar(monkeypatch):
    monkeypatch.delenv('CONTEXTIA_URL', raising=False)
    monkeypatch.delenv('CONTEXTIA_INTAKE_URL', raising=False)
    assert cliente.url_base() is None and cliente.url_destino() is None
    with pytest.raises(transporte.ErroContextia, match='CONTEXTIA_URL não está definida'):
        cliente.enviar_dataset('x', [], api_key='ctx_qualquer')


def test_contextia_intake_url_troca_o_endpoint(chave_contextia, ambiente_contextia, monkeypatch):
    chave = chave_contextia()
    monkeypatch.delenv('CONTEXTIA_URL')
    monkeypatch.setenv('CONTEXTIA_INTAKE_URL', ambiente_contextia.url + '/api/v1/intake')
    assert cliente.url_destino() == ambiente_contextia.url + '/api/v1/intake'
    assert cliente.url_base() == ambiente_contextia.url
    assert cliente.enviar_dataset('outro', registros(2), api_key=chave).inserted == 2


def test_criar_projeto_e_idempotente_por_external_id(ambiente_contextia):
    admin = Admin()
    escopo = 'idem-' + uuid.uuid4().hex[:6]
    primeiro = admin.criar_projeto(escopo, 'Empresa A')
    segundo = admin.criar_projeto(escopo, 'Outro nome')
    assert primeiro['criado'] is True and segundo['criado'] is False
    assert primeiro['id'] == segundo['id']
    assert admin.buscar_projeto(escopo)['id'] == primeiro['id']
    assert admin.buscar_projeto('nao-existe-' + escopo) is None
    emitida = admin.emitir_chave(primeiro['id'])
    assert cliente.quem_sou(emitida['key'])['external_id'] == escopo
    assert admin.listar_chaves(primeiro['id'])[0]['prefixo'] == emitida['key'][:8]
    admin.criar_grupo('financeiro', 'Financeiro')
    assert admin.criar_grupo('financeiro')['criado'] is False
    admin.incluir_no_grupo('financeiro', primeiro['id'])
    admin.incluir_no_grupo('financeiro', primeiro['id'])
    [grupo] = [g for g in admin.listar_grupos() if g['slug'] == 'financeiro']
    assert grupo['projetos'].count(primeiro['id']) == 1


def test_admin_com_token_errado(ambiente_contextia):
    with pytest.raises(cliente.ErroAutenticacao, match='CONTEXTIA_ADMIN_TOKEN') as erro:
        Admin(token='token-errado-123').criar_projeto('x')
    assert 'token-errado-123' not in str(erro.value)


def test_oito_clientes_concorrentes_no_mesmo_dataset(chave_contextia):
    chave = chave_contextia()
    resultados = [None] * 8
    comum = list(registros(100, inicio=100000))

    def enviar(posicao):
        proprios = list(registros(400, inicio=posicao * 1000))
        # Intercala: todos escrevem os 100 comuns ao mesmo tempo que os seus.
        lote = [r for par in zip(proprios[:100], comum, strict=True) for r in par] + proprios[100:]
        resultados[posicao] = cliente.enviar_dataset(
            'concorrente', lote, key='ID', chunk=50, api_key=chave
        )

    threads = [threading.Thread(target=enviar, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(r is not None and r.lotes_erro == 0 for r in resultados)
    assert sum(r.inserted for r in resultados) == 8 * 400 + 100
    assert sum(r.duplicates for r in resultados) == 7 * 100
    assert sum(r.updated for r in resultados) == 0
    assert cliente.listar_datasets(chave)[0]['records'] == 3300
    ids = [r['ID'] for r in cliente.ler_registros('concorrente', chave, pagina=1000)]
    assert len(ids) == len(set(ids)) == 3300


def test_trocar_a_key_so_numa_carga_completa(chave_contextia):
    chave = chave_contextia()
    cliente.enviar_dataset(
        'trocakey', [{'ID': 1, 'COD': 'a'}, {'ID': 2, 'COD': 'b'}], api_key=chave
    )
    incremental = cliente.enviar_dataset(
        'trocakey', [{'ID': 1, 'COD': 'a'}], key='ID', api_key=chave
    )
    assert incremental.lotes_erro == 1 and 'carga completa' in incremental.erros[0]
    sync = cliente.gerar_sync()
    carga = cliente.enviar_dataset(
        'trocakey',
        [{'ID': 1, 'COD': 'a'}, {'ID': 2, 'COD': 'B'}],
        key='ID',
        api_key=chave,
        sync=sync,
    )
    assert (carga.inserted, carga.lotes_erro) == (2, 0)
    assert cliente.completar('trocakey', sync, api_key=chave)['removed'] == 2
    assert sorted(r['COD'] for r in cliente.ler_registros('trocakey', chave)) == ['B', 'a']
    assert cliente.listar_datasets(chave)[0]['key'] == 'ID'


def test_servidor_sem_remove_como_o_contextia_de_hoje(fabrica_contextia, monkeypatch):
    servidor = fabrica_contextia(remove=False)
    monkeypatch.setenv('CONTEXTIA_URL', servidor.url)
    chave = servidor.criar_projeto_com_chave('sem-remove')
    assert cliente.capacidades(chave)['remove'] is False
    resultado = cliente.enviar_dataset('rem', registros(5), key='ID', api_key=chave, remove=[1, 2])
    # Os registros chegam; a exclusao nao, e isso conta como falha.
    assert (resultado.inserted, resultado.removed, resultado.lotes_erro) == (5, 0, 1)
    assert 'não suporta `remove`' in resultado.erros[0]
    assert cliente.listar_datasets(chave)[0]['records'] == 5


def test_servidor_fora_do_ar_interrompe_sem_ler_a_origem_toda(fabrica_contextia, monkeypatch):
    servidor = fabrica_contextia()
    monkeypatch.setenv('CONTEXTIA_URL', servidor.url)
    chave = servidor.criar_projeto_com_chave('fora')
    servidor.parar()
    monkeypatch.setattr(transporte, 'PRAZO_RETENTATIVAS', 2)
    monkeypatch.setattr(transporte._local, 'sessoes', {}, raising=False)
    lidos = []

    def origem():
        for i in range(1000):
            lidos.append(i)
            yield {'ID': i}

    inicio = time.monotonic()
    resultado = cliente.enviar_dataset('fora', origem(), key='ID', chunk=100, api_key=chave)
    assert time.monotonic() - inicio < 15
    assert resultado.lotes_ok == 0 and resultado.lotes_erro == 1
    assert 'interrompido' in resultado.erros[-1]
    assert len(lidos) <= 101
    monkeypatch.setattr(transporte._local, 'sessoes', {}, raising=False)


# ---------------------------------------------------------------- a politica de retentativas
# Uma politica so (transporte.pedir): um prazo por CHAMADA, contado do inicio,
# que vale para status passageiro, queda de conexao e timeout somados.


def _pedir_intake(servidor, chave, dataset='politica', **opcoes):
    return transporte.pedir(
        'POST',
        servidor.url + '/api/v1/intake',
        autorizacao=chave,
        corpo={'dataset': dataset, 'records': [{'ID': 1}], 'key': 'ID'},
        contexto='teste da política',
        **opcoes,
    )


def test_prazo_e_um_so_por_chamada_com_503_sem_fim(
    chave_contextia, ambiente_contextia, monkeypatch
):
    chave = chave_contextia()
    monkeypatch.setattr(transporte, 'PRAZO_RETENTATIVAS', 2)
    # Tentativas de sobra: quem para o pedido e o prazo, nao a contagem.
    monkeypatch.setattr(transporte, 'RETENTATIVAS', 100)
    ambiente_contextia.injetar('503', 100)
    inicio = time.monotonic()
    resposta = _pedir_intake(ambiente_contextia, chave)
    decorrido = time.monotonic() - inicio
    # O ultimo status passageiro volta para quem chamou (o lote conta como falho).
    assert resposta.status_code == 503
    # Esperas de 0.5 e 1 s cabem em 2 s; a de 2 s passaria do prazo e nao e feita.
    assert ambiente_contextia.falhas_injetadas()['503'] == 3
    assert decorrido < 2 + 1


def test_prazo_nao_recomeca_quando_a_falha_muda_de_tipo(
    chave_contextia, ambiente_contextia, monkeypatch
):
    chave = chave_contextia()
    monkeypatch.setattr(transporte, 'PRAZO_RETENTATIVAS', 2)
    monkeypatch.setattr(transporte, 'RETENTATIVAS', 100)
    # Status passageiro e conexao derrubada no meio do corpo, alternados sem fim:
    # cada tipo de falha nao ganha um prazo proprio.
    for _ in range(30):
        ambiente_contextia.injetar('derrubar', 1, quando='antes')
        ambiente_contextia.injetar('503', 1)
    inicio = time.monotonic()
    # queda (0 s), 503 (0.5 s), queda (1.5 s); a espera seguinte, de 2 s, passaria do prazo.
    with pytest.raises(transporte.ErroContextia, match='conexão caiu no meio da resposta'):
        _pedir_intake(ambiente_contextia, chave)
    assert time.monotonic() - inicio < 2 + 1
    falhas = ambiente_contextia.falhas_injetadas()
    assert (falhas['derrubar'], falhas['503']) == (2, 1)


def test_tentativa_lenta_nao_passa_do_prazo_da_chamada(
    chave_contextia, ambiente_contextia, monkeypatch
):
    chave = chave_contextia()
    monkeypatch.setattr(transporte, 'PRAZO_RETENTATIVAS', 2)
    # A resposta levaria 6 s; o timeout de leitura por tentativa (120 s) nao vale
    # mais que o prazo que sobra da chamada.
    ambiente_contextia.injetar('atraso', 1, segundos=6)
    inicio = time.monotonic()
    with pytest.raises(transporte.ErroContextia, match='não respondeu'):
        _pedir_intake(ambiente_contextia, chave, dataset='lento')
    assert time.monotonic() - inicio < 2 + 1.5


def test_queda_no_meio_do_corpo_e_retentada_no_mesmo_prazo(
    chave_contextia, ambiente_contextia, monkeypatch
):
    chave = chave_contextia()
    ambiente_contextia.injetar('derrubar', 2, quando='antes')
    resposta = _pedir_intake(ambiente_contextia, chave, dataset='queda_corpo')
    assert resposta.status_code == 200 and resposta.json()['inserted'] == 1
    assert ambiente_contextia.falhas_injetadas()['derrubar'] == 2

    # O 503 antes gastou parte do prazo: as quedas seguintes tem so o que sobra.
    monkeypatch.setattr(transporte, 'PRAZO_RETENTATIVAS', 2)
    ambiente_contextia.limpar_falhas()
    ambiente_contextia.injetar('503', 1)
    ambiente_contextia.injetar('derrubar', 10, quando='antes')
    inicio = time.monotonic()
    with pytest.raises(transporte.ErroContextia, match='prazo de retentativas acabou') as erro:
        _pedir_intake(ambiente_contextia, chave, dataset='queda_corpo')
    assert time.monotonic() - inicio < 2 + 1
    assert chave not in str(erro.value)
    falhas = ambiente_contextia.falhas_injetadas()
    assert (falhas['503'], falhas['derrubar']) == (1, 2)


def test_retentativas_somam_status_e_conexao(chave_contextia, ambiente_contextia, monkeypatch):
    chave = chave_contextia()
    monkeypatch.setattr(transporte, 'RETENTATIVAS', 2)
    ambiente_contextia.injetar('503', 1)
    ambiente_contextia.injetar('derrubar', 1, quando='antes')
    ambiente_contextia.injetar('503', 5)
    resposta = _pedir_intake(ambiente_contextia, chave)
    # 1 tentativa + 2 retentativas, qualquer que seja a falha de cada uma.
    assert resposta.status_code == 503
    falhas = ambiente_contextia.falhas_injetadas()
    assert (falhas['503'], falhas['derrubar']) == (2, 1)


def test_deve_parar_encerra_a_espera_na_hora(chave_contextia, ambiente_contextia):
    chave = chave_contextia()
    # O servidor pede 30 s; a parada pedida aos 0.3 s nao espera o resto.
    ambiente_contextia.injetar('429', 1, retry_after=30)
    inicio = time.monotonic()
    perguntas = []

    def deve_parar():
        perguntas.append(1)
        return time.monotonic() - inicio > 0.3

    with pytest.raises(transporte.ErroContextia, match='parada pedida') as erro:
        _pedir_intake(ambiente_contextia, chave, deve_parar=deve_parar)
    assert time.monotonic() - inicio < 1.5
    assert 'HTTP 429' in str(erro.value) and chave not in str(erro.value)
    assert len(perguntas) > 1  # olhado durante a espera, nao so antes
    assert ambiente_contextia.falhas_injetadas()['429'] == 1


def test_deve_parar_no_envio_interrompe_sem_ler_a_origem(chave_contextia, ambiente_contextia):
    chave = chave_contextia()
    ambiente_contextia.injetar('503', 1, retry_after=30)
    lidos = []

    def origem():
        for i in range(1000):
            lidos.append(i)
            yield {'ID': i}

    inicio = time.monotonic()
    resultado = cliente.enviar_dataset(
        'parada', origem(), key='ID', chunk=100, api_key=chave, deve_parar=lambda: True
    )
    assert time.monotonic() - inicio < 1.5
    assert isinstance(resultado, cliente.ResultadoEnvio)
    assert (resultado.lotes_ok, resultado.lotes_erro, resultado.registros) == (0, 1, 100)
    assert 'parada pedida' in resultado.erros[0] and 'interrompido' in resultado.erros[-1]
    assert len(lidos) <= 101
    assert cliente.listar_datasets(chave) == []


# ---------------------------------------------------------------- registro recusado sozinho
def test_413_de_um_registro_sozinho_diz_qual_e_o_que_fazer(fabrica_contextia, monkeypatch):
    servidor = fabrica_contextia(max_bytes_lote=2000)
    monkeypatch.setenv('CONTEXTIA_URL', servidor.url)
    chave = servidor.criar_projeto_com_chave('413-sozinho')
    # Sem quarentena: continua lote falho (a marca fica), mas a mensagem nao manda
    # diminuir o chunk -- o registro sozinho ja passa do limite.
    resultado = cliente.enviar_dataset(
        'anexos', [{'ID': 1, 'CORPO': 'x' * 5000}, {'ID': 2}], key='ID', api_key=chave, escopo='297'
    )
    assert (resultado.inserted, resultado.lotes_erro, resultado.quarentenados) == (1, 1, 0)
    [erro] = resultado.erros
    assert 'dataset anexos' in erro and 'escopo 297' in erro and 'ID=1' in erro
    assert 'HTTP 413' in erro and 'SOZINHO' in erro and "'CORPO'" in erro
    assert 'Diminuir o chunk não resolve' in erro and 'view' in erro
    assert 'chunk menor' not in erro.lower()


def test_chave_com_quebra_de_linha_e_recusada_antes_de_conectar_dizendo_o_que_conferir():
    with pytest.raises(transporte.ErroContextia) as erro:
        # Porta 9 (discard): nada escuta; o pedido nem chega a conectar.
        transporte.pedir(
            'GET',
            'http://127.0.0.1:9/api/v1/projeto',
            autorizacao='ctx_abcdefgh\nX-Outro: 1',
            contexto='teste',
        )
    mensagem = str(erro.value)
    assert 'pedido inválido' in mensagem and 'CONTEXTIA_URL' in mensagem
    assert 'abcdefgh' not in mensagem  # a chave segue mascarada
