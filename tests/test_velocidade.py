"""
O caminho rápido do cliente (issue 18) contra o Contextia local de verdade:
o mesmo guardado que o caminho de sempre, lotes em voo com falhas reais, e a
compressão negociada por capacidades (nunca a quem não anuncia; bomba de gzip
barrada no servidor local).
"""

import datetime
import decimal
import gzip
import json
import time
import urllib.error
import urllib.request
import uuid

import pytest

from contextia_sync.intake import cliente, serializacao, transporte
from tests.apoio.hostil import Pedido, ServidorHostil

UTC = datetime.timezone.utc
FUSO_DE_SEGUNDOS = datetime.timezone(datetime.timedelta(hours=5, minutes=30, seconds=15))
MENOS_3 = datetime.timezone(-datetime.timedelta(hours=3))


def hostis():
    """Registros com todo tipo que o ERP entrega, trocando de tipo na mesma coluna."""
    valores = [
        decimal.Decimal('123456789012345678901234567890.123456789'),
        decimal.Decimal('-0.00'),
        decimal.Decimal('1E+3'),
        decimal.Decimal('0E-10'),
        datetime.datetime(2026, 9, 2, 10, 5, 0, 123),
        datetime.datetime(1, 1, 1),
        datetime.datetime(2026, 9, 2, 10, 5, tzinfo=UTC),
        datetime.datetime(2026, 9, 2, 10, 5, tzinfo=MENOS_3),
        datetime.datetime(2026, 9, 2, 10, 5, tzinfo=FUSO_DE_SEGUNDOS),
        datetime.date(1, 1, 1),
        datetime.date(2026, 12, 31),
        datetime.time(23, 59, 59, 999999),
        datetime.time(1, 2, tzinfo=UTC),
        b'\x00\xff',
        bytearray(b'abc'),
        memoryview(b'\x01\x02'),
        'ação 😀 \u2028 \x00 "aspas" \\ / \t',
        '',
        None,
        True,
        False,
        2**63,
        2**70,
        -(2**64),
        0,
        0.1,
        1e16,
        -0.0,
        5e-324,
        uuid.UUID('12345678-1234-5678-1234-567812345678'),
    ]
    for i, valor in enumerate(valores):
        yield {
            'ID': i,
            'V': valor,
            'NOME': 'linha %d ç' % i,
            'DIA': datetime.date(2026, 1, 1) + datetime.timedelta(days=i),
            'PRECO': decimal.Decimal('%d.%02d' % (i, i % 100)),
            'FLAG': i % 2 == 0,
        }


def _pelo_caminho_antigo(chave, dataset, registros):
    """O corpo exatamente como o cliente o montava antes: serializar_registro + json.dumps."""
    url = cliente._url_intake()
    envelope = {
        'dataset': dataset,
        'key': 'ID',
        'records': [serializacao.serializar_registro(r) for r in registros],
    }
    resposta = transporte.pedir(
        'POST', url, autorizacao=chave, corpo=envelope, contexto='caminho antigo'
    )
    assert resposta.status_code == 200, resposta.text


def _guardados(chave, dataset):
    return {r['ID']: r for r in cliente.ler_registros(dataset, chave)}


def test_caminho_rapido_guarda_o_mesmo_que_o_de_sempre(chave_contextia):
    chave = chave_contextia()
    linhas = list(hostis())
    _pelo_caminho_antigo(chave, 'antigo', linhas)
    # chunk 4: lotes que vao pelo orjson e lotes com inteiro > 64 bits (volta ao json);
    # com sync e em voo, e comprimido (o servidor local anuncia gzip).
    sync = cliente.gerar_sync()
    novo = cliente.enviar_dataset(
        'novo', iter(linhas), key='ID', chunk=4, api_key=chave, sync=sync, em_voo=4
    )
    assert (novo.lotes_erro, novo.inserted) == (0, len(linhas)), novo.erros
    antigo, rapido = _guardados(chave, 'antigo'), _guardados(chave, 'novo')
    assert len(antigo) == len(linhas)
    for ident, registro in antigo.items():
        assert rapido[ident] == registro, ident
    # Reenviar pelo caminho antigo no dataset novo: tudo igual, nada atualizado.
    repetido = transporte.pedir(
        'POST',
        cliente._url_intake(),
        autorizacao=chave,
        contexto='repetir',
        corpo={
            'dataset': 'novo',
            'key': 'ID',
            'records': [serializacao.serializar_registro(r) for r in linhas],
        },
    )
    assert (repetido.json()['updated'], repetido.json()['duplicates']) == (0, len(linhas))
    # Os valores que o orjson escreveria diferente do contrato saem como o contrato manda.
    assert rapido[8]['V'] == '2026-09-02T10:05:00+05:30:15'
    assert rapido[0]['V'] == '123456789012345678901234567890.123456789'
    assert rapido[22]['V'] == 2**70


def test_caminho_puro_e_igual_a_serializar_registro():
    puro = serializacao.Serializador(puro=True)
    for registro in list(hostis()) * 2:  # a segunda volta usa os planos guardados
        assert puro.registro(registro) == serializacao.serializar_registro(registro)


def test_nan_e_infinito_continuam_recusados_depois_do_plano_guardado(chave_contextia):
    chave = chave_contextia()
    rapido = serializacao.Serializador()
    assert rapido.registro({'ID': 1, 'X': 1.5}) == {'ID': 1, 'X': 1.5}
    for ruim in (float('nan'), float('inf'), decimal.Decimal('NaN')):
        with pytest.raises(serializacao.ErroSerializacao, match="coluna 'X'"):
            rapido.registro({'ID': 2, 'X': ruim})
    resultado = cliente.enviar_dataset(
        'nan', [{'ID': 1, 'X': 1.5}, {'ID': 2, 'X': float('nan')}], key='ID', api_key=chave
    )
    assert resultado.lotes_erro == 1
    # Nada de null no lugar do NaN: o registro recusado nao foi guardado.
    assert 2 not in _guardados(chave, 'nan')


# ---------------------------------------------------------------- lotes em voo
def registros(quantidade, inicio=0, sufixo=''):
    for i in range(inicio, inicio + quantidade):
        yield {
            'ID': i,
            'NOME': 'registro %d%s' % (i, sufixo),
            'VALOR': decimal.Decimal('%d.%02d' % (i, i % 100)),
        }


def test_em_voo_com_500_429_e_conexao_caida_nada_se_perde(chave_contextia, ambiente_contextia):
    chave = chave_contextia()
    ambiente_contextia.injetar('derrubar', 1, quando='depois')  # grava e cai
    ambiente_contextia.injetar('429', 1, retry_after=1)
    ambiente_contextia.injetar('503', 2)
    ambiente_contextia.injetar('derrubar', 1, quando='antes')  # cai sem gravar
    sync = cliente.gerar_sync()
    resultado = cliente.enviar_dataset(
        'voo', registros(1000), key='ID', chunk=50, api_key=chave, sync=sync, em_voo=4
    )
    assert (resultado.registros, resultado.lotes_ok, resultado.lotes_erro) == (1000, 20, 0)
    assert resultado.inserted + resultado.duplicates == 1000
    injetadas = ambiente_contextia.falhas_injetadas()
    assert (injetadas['derrubar'], injetadas['429'], injetadas['503']) == (2, 1, 2)
    assert cliente.completar('voo', sync, api_key=chave)['removed'] == 0
    assert sorted(_guardados(chave, 'voo')) == list(range(1000))


def test_em_voo_lote_falho_conta_e_os_outros_chegam(chave_contextia, ambiente_contextia):
    chave = chave_contextia()
    # 500 nao e re-tentado: exatamente um lote falha, qualquer que seja a ordem de chegada.
    ambiente_contextia.injetar('atraso', 1, segundos=0.01)
    ambiente_contextia.injetar('500', 1)
    resultado = cliente.enviar_dataset(
        'falho',
        registros(1000),
        key='ID',
        chunk=50,
        api_key=chave,
        sync=cliente.gerar_sync(),
        em_voo=4,
    )
    assert (resultado.registros, resultado.lotes_ok, resultado.lotes_erro) == (1000, 19, 1)
    assert resultado.inserted == 950 and not resultado.interrompido
    assert 'HTTP 500' in resultado.erros[0]
    assert len(_guardados(chave, 'falho')) == 950


def test_em_voo_servidor_indisponivel_para_a_leitura_com_uma_mensagem(
    chave_contextia, ambiente_contextia, monkeypatch
):
    chave = chave_contextia()
    monkeypatch.setattr(transporte, 'PRAZO_RETENTATIVAS', 2)
    ambiente_contextia.injetar('atraso', 2, segundos=0.01)
    ambiente_contextia.injetar('503', 500)
    lidos = []

    def origem():
        for registro in registros(5000):
            lidos.append(registro['ID'])
            yield registro

    resultado = cliente.enviar_dataset(
        'caiu', origem(), key='ID', chunk=50, api_key=chave, sync=cliente.gerar_sync(), em_voo=4
    )
    assert resultado.interrompido and resultado.lotes_erro >= 1
    # A leitura parou: no maximo os lotes em voo (e o que estava sendo montado) a mais.
    assert len(lidos) <= 50 * (2 + 4 + 1)
    assert resultado.lotes_ok + resultado.lotes_erro == resultado.registros // 50
    interrupcoes = [e for e in resultado.erros if 'envio interrompido' in e]
    assert len(interrupcoes) == 1, resultado.erros


def test_em_voo_os_lotes_esperam_juntos(chave_contextia, ambiente_contextia):
    chave = chave_contextia()
    for _ in range(4):
        ambiente_contextia.injetar('atraso', 1, segundos=1.5)
    inicio = time.monotonic()
    resultado = cliente.enviar_dataset(
        'juntos',
        registros(200),
        key='ID',
        chunk=50,
        api_key=chave,
        sync=cliente.gerar_sync(),
        em_voo=4,
    )
    # Um de cada vez seriam 4 x 1,5 s; em voo, as quatro esperas correm juntas.
    assert time.monotonic() - inicio < 4.5
    assert (resultado.inserted, resultado.lotes_erro) == (200, 0)


def test_em_voo_o_lote_seguinte_fica_pronto_antes_da_resposta(chave_contextia, ambiente_contextia):
    chave = chave_contextia()
    # Os dois primeiros lotes demoram 1,5 s no servidor. O terceiro é lido e
    # montado enquanto eles voam: quando a vaga abre, ele sai na hora (lido só
    # depois da vaga, os lotes em voo voltavam juntos e esperavam a leitura).
    ambiente_contextia.injetar('atraso', 2, segundos=1.5)
    inicio = time.monotonic()
    lidos_em = {}

    def origem():
        for registro in registros(300):
            lidos_em[registro['ID']] = time.monotonic() - inicio
            yield registro

    resultado = cliente.enviar_dataset(
        'pronto', origem(), key='ID', chunk=50, api_key=chave, sync=cliente.gerar_sync(), em_voo=2
    )
    assert (resultado.inserted, resultado.lotes_erro) == (300, 0)
    primeiro_do_terceiro = sorted(lidos_em)[100]
    assert lidos_em[primeiro_do_terceiro] < 1.0, lidos_em[primeiro_do_terceiro]


def test_ao_vivo_sem_sync_vai_um_de_cada_vez_e_a_versao_nova_fica(
    chave_contextia, ambiente_contextia
):
    chave = chave_contextia()
    # O lote 1 (versao velha da key 1) demora; em voo, o lote 2 (a nova) chegaria antes
    # e seria sobrescrito pela velha. Sem sync (o ao vivo), um de cada vez.
    ambiente_contextia.injetar('atraso', 1, segundos=1.0)
    versoes = [
        {'ID': 1, 'NOME': 'velha'},
        {'ID': 2, 'NOME': 'x'},
        {'ID': 1, 'NOME': 'nova'},
        {'ID': 3, 'NOME': 'y'},
    ]
    resultado = cliente.enviar_dataset(
        'versoes', versoes, key='ID', chunk=2, api_key=chave, em_voo=4
    )
    assert resultado.lotes_erro == 0
    assert _guardados(chave, 'versoes')[1]['NOME'] == 'nova'


# ---------------------------------------------------------------- compressao
def _sink(anuncia):
    """Um intake mínimo de verdade: conta os registros (descomprimindo o gzip) e anota tudo."""

    def responder(pedido: Pedido):
        if pedido.caminho.startswith('/api/v1/capacidades'):
            corpo = {'remove': True, 'compressao': ['gzip']} if anuncia else {'remove': True}
            return 200, {'Content-Type': 'application/json'}, json.dumps(corpo).encode()
        bruto = pedido.corpo
        if pedido.cabecalhos.get('Content-Encoding') == 'gzip':
            if not anuncia:
                return 415, {'Content-Type': 'application/json'}, b'{"detail": "gzip?"}'
            bruto = gzip.decompress(bruto)
        recebidos = len(json.loads(bruto)['records'])
        contagens = {'inserted': recebidos, 'updated': 0, 'duplicates': 0, 'received': recebidos}
        return 200, {'Content-Type': 'application/json'}, json.dumps(contagens).encode()

    return responder


@pytest.mark.parametrize('anuncia', [False, True])
def test_gzip_so_para_quem_anuncia(anuncia, monkeypatch):
    for nome in ('CONTEXTIA_INTAKE_URL', 'CONTEXTIA_API_KEY'):
        monkeypatch.delenv(nome, raising=False)
    with ServidorHostil(_sink(anuncia)) as sink:
        monkeypatch.setenv('CONTEXTIA_URL', sink.url)
        resultado = cliente.enviar_dataset(
            'g',
            registros(2000),
            key='ID',
            chunk=200,
            api_key='ctx_' + uuid.uuid4().hex,
            sync=cliente.gerar_sync(),
            em_voo=2,
        )
        assert (resultado.inserted, resultado.lotes_erro) == (2000, 0), resultado.erros
        posts = [p for p in sink.pedidos if p.metodo == 'POST']
        comprimidos = [p for p in posts if p.cabecalhos.get('Content-Encoding') == 'gzip']
        assert len(posts) == 10
        if not anuncia:
            assert comprimidos == []
        else:
            # So depois do primeiro lote aceito (e da pergunta): os primeiros vao crus.
            assert len(comprimidos) >= 10 - 3
            crus = sum(len(p.corpo) for p in comprimidos)
            descomprimidos = sum(len(gzip.decompress(p.corpo)) for p in comprimidos)
            assert descomprimidos >= 4 * crus
        assert [p.caminho for p in sink.pedidos].count('/api/v1/capacidades') == 1


def _post_cru(servidor, chave, corpo, codificacao):
    pedido = urllib.request.Request(
        servidor.url + '/api/v1/intake',
        data=corpo,
        method='POST',
        headers={
            'Authorization': 'Bearer ' + chave,
            'Content-Type': 'application/json',
            'Content-Encoding': codificacao,
        },
    )
    try:
        with urllib.request.urlopen(pedido, timeout=30) as resposta:
            return resposta.status, json.loads(resposta.read())
    except urllib.error.HTTPError as erro:
        return erro.code, json.loads(erro.read())


def test_servidor_local_barra_bomba_de_gzip_e_codificacao_desconhecida(fabrica_contextia):
    servidor = fabrica_contextia(max_bytes_lote=1024 * 1024)
    with urllib.request.urlopen(servidor.url + '/api/v1/capacidades', timeout=30) as resposta:
        assert json.loads(resposta.read())['compressao'] == ['gzip']
    chave = servidor.criar_projeto_com_chave('bomba')
    # ~100 KB de gzip que viram 100 MB: parada no limite, depois de descomprimir.
    cabeca = b'{"dataset":"b","records":[{"X":"'
    bomba = gzip.compress(cabeca + b'0' * (100 * 1024 * 1024) + b'"}]}', compresslevel=9)
    assert len(bomba) < 200 * 1024
    status, corpo = _post_cru(servidor, chave, bomba, 'gzip')
    assert status == 413 and 'DEPOIS de descomprimido' in corpo['detail']
    assert _post_cru(servidor, chave, b'nao e gzip', 'gzip')[0] == 400
    assert (
        _post_cru(servidor, chave, gzip.compress(b'{"dataset":"b","records":[]}')[:-8], 'gzip')[0]
        == 400
    )
    assert _post_cru(servidor, chave, b'{}', 'br')[0] == 415
    # O servidor segue de pe, e um gzip honesto entra.
    status, corpo = _post_cru(
        servidor, chave, gzip.compress(b'{"dataset":"b","records":[{"X":"1"}]}'), 'gzip'
    )
    assert (status, corpo['inserted']) == (200, 1)


def test_gzip_com_limite_pequeno_divide_pelo_tamanho_descomprimido(fabrica_contextia, monkeypatch):
    servidor = fabrica_contextia(max_bytes_lote=64 * 1024)
    for nome, valor in servidor.ambiente().items():
        if valor is None:
            monkeypatch.delenv(nome, raising=False)
        else:
            monkeypatch.setenv(nome, valor)
    chave = servidor.criar_projeto_com_chave('limite')
    linhas = [{'ID': i, 'TEXTO': 'x' * 300} for i in range(2000)]
    resultado = cliente.enviar_dataset(
        'grande', linhas, key='ID', chunk=500, api_key=chave, sync=cliente.gerar_sync(), em_voo=4
    )
    assert (resultado.inserted, resultado.lotes_erro) == (2000, 0), resultado.erros
    assert len(_guardados(chave, 'grande')) == 2000


# ---------------------------------------------------------------- tipos do resultado
@pytest.fixture
def pg_hostil(fabrica_de_bancos):
    banco = fabrica_de_bancos('postgres')
    banco.executar(
        'CREATE TABLE hostil ("ID" int PRIMARY KEY, "N" numeric(40,10), "I" numeric(12,0),'
        ' "F" float8, "TZ" timestamptz, "TS" timestamp, "D" date, "H" time, "HZ" timetz,'
        ' "B" bytea, "U" uuid, "T" text, "L" boolean, "G" bigint)'
    )
    banco.executar(
        'INSERT INTO hostil VALUES'
        ' (1, 123456789012345678901234567890.0123456789, 12, 0.1,'
        "  '1890-01-01 00:00:00-03:06:28', '0001-01-01 00:00:00', '0001-01-01',"
        "  '23:59:59.999999', '01:02:03+05:30', '\\x00ff', '12345678-1234-5678-1234-567812345678',"
        '  \'ação 😀 \u2028 "aspas" \\ /\', true, 9223372036854775807),'
        " (2, -0.0000000001, 0, 1e16, '2026-09-02 10:05:00+00', '2026-09-02 10:05:00.123456',"
        "  '2026-12-31', '00:00:00', '00:00:00-03', '', NULL, '', false, -9223372036854775808),"
        ' (3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)'
    )
    return banco


COLUNAS_HOSTIS = ['ID', 'N', 'I', 'F', 'TZ', 'TS', 'D', 'H', 'HZ', 'B', 'U', 'T', 'L', 'G']


@pytest.mark.postgres
def test_conversor_por_coluna_do_fetch_guarda_o_mesmo_que_o_de_sempre(pg_hostil, chave_contextia):
    from contextia_sync.origem import generico

    chave = chave_contextia()
    origem = generico.Origem(pg_hostil.url_origem, timeout=30)
    try:
        _pelo_caminho_antigo(chave, 'antigo', list(origem.fetch('hostil', COLUNAS_HOSTIS)))
        linhas = origem.fetch('hostil', COLUNAS_HOSTIS)
        familias = generico.familias(linhas)
        assert familias is not None and familias['N'] == 'decimal' and familias['T'] == 'nativo'
        novo = cliente.enviar_dataset(
            'novo',
            linhas,
            key='ID',
            chunk=2,
            api_key=chave,
            sync=cliente.gerar_sync(),
            em_voo=4,
            familias=familias,
        )
    finally:
        origem.fechar()
    assert (novo.lotes_erro, novo.inserted) == (0, 3), novo.erros
    antigo, rapido = _guardados(chave, 'antigo'), _guardados(chave, 'novo')
    assert len(antigo) == 3 and rapido == antigo
    assert antigo[1]['N'] == '123456789012345678901234567890.0123456789'


@pytest.mark.postgres
def test_conversor_por_coluna_recusa_infinito_e_nan(pg_hostil, chave_contextia):
    from contextia_sync.origem import generico

    pg_hostil.executar('INSERT INTO hostil ("ID", "F") VALUES (4, \'Infinity\')')
    pg_hostil.executar('INSERT INTO hostil ("ID", "N") VALUES (5, \'NaN\')')
    chave = chave_contextia()
    origem = generico.Origem(pg_hostil.url_origem, timeout=30)
    try:
        for coluna, ident in (('F', 4), ('N', 5)):
            linhas = origem.fetch('hostil', ['ID', coluna])
            resultado = cliente.enviar_dataset(
                'ruim_' + coluna.lower(),
                linhas,
                key='ID',
                chunk=10,
                api_key=chave,
                sync=cliente.gerar_sync(),
                em_voo=4,
                familias=generico.familias(linhas),
            )
            assert resultado.lotes_erro >= 1
            assert "coluna '%s'" % coluna in ' '.join(resultado.erros)
            # Nada de null no lugar do valor sem JSON.
            guardados = list(cliente.ler_registros('ruim_' + coluna.lower(), chave))
            assert all(r['ID'] != ident for r in guardados)
    finally:
        origem.fechar()


# ---------------------------------------------------------------- o lote inteiro de uma vez
def test_corpo_direto_escreve_os_mesmos_bytes_que_o_caminho_de_sempre():
    """O Decimal cru no orjson (str, ou 'f' na notação com expoente) e o texto de valor_json."""
    import random

    aleatorio = random.Random(18)
    decimais = [
        decimal.Decimal(t)
        for t in (
            '1E+3',
            '0E-10',
            '-0.00',
            '0',
            '1E-7',
            '0.000001',
            '123.4500',
            '-1.5E+30',
            '9999999999999.99',
            '123456789012345678901234567890.123456789',
            '-0E+2',
        )
    ]
    decimais += [
        decimal.Decimal(aleatorio.randint(-(10**20), 10**20)).scaleb(aleatorio.randint(-30, 12))
        for _ in range(3000)
    ]
    registros = [
        {
            'ID': i,
            'V': d,
            'T': 'ç "x"',
            'D': datetime.date(2026, 1, 1),
            'DT': datetime.datetime(2026, 9, 2, 10, 5, 0, i % 3),
            'N': None,
            'L': i % 2 == 0,
        }
        for i, d in enumerate(decimais)
    ]
    esperado = serializacao.corpo_de_registros(
        [serializacao.serializar_registro(r) for r in registros]
    )
    assert serializacao.corpo_direto([dict(r) for r in registros]) == esperado
    # O que não sai exato por ali volta ao caminho de sempre (None), nunca um null.
    for ruim in (
        decimal.Decimal('NaN'),
        decimal.Decimal('sNaN'),
        decimal.Decimal('-NaN'),
        decimal.Decimal('Infinity'),
        decimal.Decimal('-Infinity'),
        2**70,
        {'a'},
    ):
        assert (
            serializacao.corpo_direto(
                [{'ID': 1, 'V': decimal.Decimal('1.5')}, {'ID': 2, 'V': ruim}]
            )
            is None
        ), ruim


@pytest.mark.postgres
def test_decimal_sem_json_no_meio_do_lote_os_anteriores_chegam_e_nada_depois(
    fabrica_de_bancos, chave_contextia
):
    """Lote que o corpo direto recusa: registro a registro, a recusa diz qual e a coluna."""
    from contextia_sync.origem import generico

    banco = fabrica_de_bancos('postgres')
    banco.executar('CREATE TABLE t ("ID" int PRIMARY KEY, "N" numeric, "T" text)')
    # (Sem UPDATE: a leitura sem ORDER BY vem na ordem em que as linhas foram gravadas.)
    banco.executar(
        "INSERT INTO t SELECT g, CASE WHEN g = 13 THEN 'NaN' ELSE g * 1.5 END,"
        " 'x' || g FROM generate_series(1, 25) g"
    )
    chave = chave_contextia()
    origem = generico.Origem(banco.url_origem, timeout=30, linhas_por_lote=7)
    try:
        linhas = origem.fetch('t', ['ID', 'N', 'T'])
        resultado = cliente.enviar_dataset(
            'nan_meio',
            linhas,
            key='ID',
            chunk=10,
            api_key=chave,
            sync=cliente.gerar_sync(),
            em_voo=4,
            familias=generico.familias(linhas),
        )
    finally:
        origem.fechar()
    assert resultado.lotes_erro == 1, resultado.erros
    assert "registro 13 da leitura: coluna 'N'" in ' '.join(resultado.erros), resultado.erros
    guardados = _guardados(chave, 'nan_meio')
    assert sorted(guardados) == list(range(1, 13))
    assert guardados[2]['N'] == '3.0' and guardados[12]['T'] == 'x12'


def _fetch_pelos_dois_caminhos(origem, monkeypatch, objeto, colunas, **filtro):
    """(linhas pelo cursor do driver, linhas pelo Row do SQLAlchemy, o cursor cru foi usado?)."""
    from contextia_sync.origem import generico

    usado = []
    original = generico.Origem._sem_processador

    def espiar(self, resultado):
        cru = original(self, resultado)
        # O que o SQLAlchemy faria com cada coluna: nada, quando o cursor cru vale.
        assert cru == all(p is None for p in resultado._metadata._processors)
        usado.append(cru)
        return cru

    monkeypatch.setattr(generico.Origem, '_sem_processador', espiar)
    cruas = list(origem.fetch(objeto, colunas, **filtro))
    monkeypatch.setattr(generico.Origem, '_sem_processador', lambda *_: False)
    de_sempre = list(origem.fetch(objeto, colunas, **filtro))
    monkeypatch.undo()
    return cruas, de_sempre, usado[0]


@pytest.mark.postgres
def test_fetch_pelo_cursor_do_driver_e_o_de_sempre_postgres(pg_hostil, monkeypatch):
    from contextia_sync.origem import generico

    pg_hostil.executar(
        'INSERT INTO hostil ("ID", "T") SELECT g, \'t\' || g FROM generate_series(10, 40) g'
    )
    origem = generico.Origem(pg_hostil.url_origem, timeout=30, linhas_por_lote=4)
    try:
        cruas, de_sempre, usado = _fetch_pelos_dois_caminhos(
            origem, monkeypatch, 'hostil', COLUNAS_HOSTIS
        )
        assert usado and len(cruas) == 34 and cruas == de_sempre
        assert [type(v) for v in cruas[0].values()] == [type(v) for v in de_sempre[0].values()]
        # Com escopo (a conferência olha o lote) e colunas repetidas (o caminho de sempre).
        cruas, de_sempre, _ = _fetch_pelos_dois_caminhos(
            origem, monkeypatch, 'hostil', ['ID', 'N'], scope=('T', 't12')
        )
        assert [r['ID'] for r in cruas] == [12] and cruas == de_sempre
    finally:
        origem.fechar()


@pytest.mark.mariadb
@pytest.mark.parametrize('driver', ['mysql+pymysql://', 'mysql+mysqldb://'])
def test_fetch_pelo_cursor_do_driver_e_o_de_sempre_mariadb(fabrica_de_bancos, monkeypatch, driver):
    """O SET do MariaDB vira `set` no SQLAlchemy: esse resultado segue pelo Row, como sempre."""
    from contextia_sync.origem import generico

    banco = fabrica_de_bancos('mariadb')
    banco.executar(
        'CREATE TABLE m (ID int PRIMARY KEY, N decimal(20,4), D date, DT datetime,'
        " TS timestamp NULL, S varchar(20), E SET('a','b'))"
    )
    banco.executar(
        "INSERT INTO m VALUES (1, 1.5, '2026-01-31', '2026-09-02 10:05:00',"
        " '2026-09-02 10:05:00', 'ç', 'a,b'), (2, NULL, NULL, NULL, NULL, NULL, NULL)"
    )
    banco.executar("INSERT INTO m (ID, S) SELECT seq, CONCAT('s', seq) FROM seq_3_to_20")
    url = banco.url_origem.replace('mysql+pymysql://', driver, 1)
    origem = generico.Origem(url, timeout=30, linhas_por_lote=3)
    try:
        sem_set = ['ID', 'N', 'D', 'DT', 'TS', 'S']
        cruas, de_sempre, usado = _fetch_pelos_dois_caminhos(origem, monkeypatch, 'm', sem_set)
        assert usado and len(cruas) == 20 and cruas == de_sempre
        assert cruas[0]['TS'].tzinfo is not None  # o conversor de coluna ainda vale
        cruas, de_sempre, usado = _fetch_pelos_dois_caminhos(origem, monkeypatch, 'm', ['ID', 'E'])
        assert not usado and cruas == de_sempre and cruas[0]['E'] == {'a', 'b'}
        linhas = origem.fetch('m', ['ID', 'E'])
        assert generico.familias(linhas)['E'] == 'qualquer'
        linhas.close()
    finally:
        origem.fechar()


def test_lote_com_escopo_sem_hash_todo_da_empresa_passa_inteiro():
    from contextia_sync.origem.generico import _lote_pronto

    # Um valor de escopo sem hash (uma lista) obriga a conferir linha a linha;
    # todas do escopo pedido: nada descartado (antes: IndexError no exemplo).
    lote = [[[7], 'a'], [[7], 'b']]
    assert _lote_pronto(lote, [], (0, [7], '[7]')) == (lote, 0, None)
    ficam, fora, exemplo = _lote_pronto(lote + [[[8], 'c']], [], (0, [7], '[7]'))
    assert (ficam, fora, exemplo) == (lote, 1, [8])
