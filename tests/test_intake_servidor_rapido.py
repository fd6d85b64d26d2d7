"""
O caminho rápido do Contextia local (issue 18): o lote lido pelo orjson, o JSON
canônico pelo orjson, os registros validados uma vez pelo lote, a gravação em
bloco -- com o MESMO resultado do caminho de sempre.

As equivalências rodam em processo (o leitor e o canônico são funções puras; o
Banco é um SQLite de verdade num diretório temporário); o resto contra o
servidor de verdade em 127.0.0.1.
"""

import hashlib
import json
import math
import sqlite3
import threading
import time

import pytest
import requests

from contextia_local import corpo as corpo_mod
from contextia_local import armazenamento
from contextia_local.armazenamento import Banco, canonico, canonico_bytes

MIB = 1024 * 1024

# Corpos em que o orjson poderia ler diferente do json: inteiros além de 64
# bits (ele os leria como float), floats de toda magnitude, texto com dígitos
# longos (a chave de uma NF-e), escapes, surrogate, espaço em volta.
CORPOS = [
    b'{"dataset":"a","records":[{"ID":18446744073709551616,"V":-9223372036854775809}]}',
    b'{"dataset":"a","records":[{"ID": 123456789012345678901234567890}]}',
    b'{"dataset":"a","records":[{"ID":[1, 99999999999999999999]}]}',
    b'{"dataset":"a","records":[{"ID":9223372036854775807,"X":18446744073709551615}]}',
    b'{"dataset":"a","records":[{"NFE":"35260112345678000199550010000012341000012345"}]}',
    b'{"dataset":"a","records":[{"T":"x:12345678901234567890123","U":"-1234567890123456789012"}]}',
    b'{"dataset":"a","records":[{"F":1e-05,"G":1.5e+300,"H":0.1,"I":-0.0,"J":1E2}]}',
    '{"dataset":"a","records":[{"T":"Peças \\u00e7 \\ud83d\\ude00 \\u0000 \\" \\\\"}]}'.encode(),
    b'{"dataset":"a","records":[{"T":"\\ud800"}]}',
    b' \n{"dataset" : "a" , "records" : [ {"a" : 1 , "a" : 2} ] } \n',
    b'{"dataset":"a","records":[{"n":-0,"m":[],"o":{},"p":null,"q":true,"r":false}]}',
]


def _tipado(valor):
    """O valor com o tipo de cada folha: 1 e 1.0 (e True e 1) não se confundem."""
    if isinstance(valor, dict):
        return {k: _tipado(v) for k, v in valor.items()}
    if isinstance(valor, list):
        return [_tipado(v) for v in valor]
    if isinstance(valor, float) and math.copysign(1, valor) < 0 and valor == 0:
        return ('float', '-0.0')
    return (type(valor).__name__, valor)


@pytest.mark.parametrize('corpo', CORPOS)
def test_leitura_rapida_da_o_mesmo_documento_que_a_estrita(corpo, monkeypatch):
    rapido = corpo_mod._ler(corpo, 10000)[0]
    monkeypatch.setattr(corpo_mod, '_orjson', None)
    estrito = corpo_mod._ler(corpo, 10000)[0]
    assert _tipado(rapido) == _tipado(estrito)


def test_envelope_de_registros_simples_nao_e_varrido_e_diz_que_e_simples(monkeypatch):
    simples = b'{"dataset":"a","key":"ID","sync":{"id":"s","part":3},"records":[{"ID":1,"T":"x"}]}'
    varridos = []
    original = corpo_mod._inteiro_longo
    monkeypatch.setattr(corpo_mod, '_inteiro_longo', lambda c: varridos.append(c) or original(c))
    documento, e_simples = corpo_mod._ler(simples, 10000)
    # Tipado: um inteiro lido como float (1 == 1.0) não passaria despercebido.
    assert _tipado(documento) == _tipado(json.loads(simples)) and e_simples is True
    assert varridos == []
    # Um float em qualquer lugar (é como o orjson leria um inteiro além de 64
    # bits) leva à varredura de sempre; o inteiro longo, ao leitor estrito.
    for corpo, esperado in [
        (b'{"dataset":"a","records":[{"ID":1,"F":1.5}]}', False),
        (b'{"dataset":"a","records":[{"ID":1}],"sync":{"id":"s","part":1.0}}', True),
        (b'{"dataset":"a","records":[{"ID":1}],"fields":{"a":[[{"b":2.5}]]}}', True),
        (b'{"dataset":"a","records":[{"ID":1, "L":[1]}]}', False),
    ]:
        varridos.clear()
        documento, e_simples = corpo_mod._ler(corpo, 10000)
        assert _tipado(documento) == _tipado(json.loads(corpo)) and e_simples is esperado
        assert varridos == [corpo]
    longo = b'{"dataset":"a","records":[{"ID":1}],"remove":[18446744073709551617]}'
    documento, simples = corpo_mod._ler(longo, 10000)
    assert documento['remove'] == [18446744073709551617] and simples is False
    assert corpo_mod._tem_float([[[[[]]]], {'a': {'b': [None, 1]}}, 'x']) is False
    fundo = []
    for _ in range(5000):
        fundo = [fundo]
    assert corpo_mod._tem_float([fundo, 0.5]) is True


def test_inteiro_longo_fora_de_texto_vai_ao_leitor_estrito():
    assert corpo_mod._inteiro_longo(b'{"a":[1, -1234567890123456789]}')
    assert corpo_mod._inteiro_longo(b'{"a":\n  12345678901234567890}')
    # Dentro de texto não conta (a chave de uma NF-e fica no caminho rápido).
    assert not corpo_mod._inteiro_longo(b'{"a":"35260112345678000199550010000012341000012345"}')
    assert not corpo_mod._inteiro_longo(
        b'{"a":"NF 12345678901234567890","b":1.2345678901234567890}'
    )


@pytest.mark.parametrize(
    'registro',
    [
        {
            'ID': 1,
            'NOME': 'Peças \u00e7 \U0001f600 \x00\x1f\x7f\u2028 " \\',
            'OBS': None,
            'OK': True,
        },
        {'b': 1, 'a': 2, 'B': 3, '\u00e7': 4, '\U0001f600': 5, '': 6, 'aa': -(2**63)},
        {'F': 1e-05, 'G': 0.1, 'H': 1e16, 'I': 2.5e-300},
        {'L': [1, 'a', None], 'D': {'z': 1, 'a': [{'y': 2, 'b': 0.00001}]}},
        {'BIG': 2**64, 'NEG': -(2**63) - 1},
        {'ID': 2**63 - 1, 'U': 2**64 - 1},
        'texto',
        17,
        2**70,
        0.00002,
        True,
        None,
    ],
)
def test_canonico_rapido_e_o_texto_de_sempre(registro):
    assert canonico_bytes(registro) == canonico(registro).encode('utf-8')


# Lotes inteiros: o canônico do lote de valores simples sai de uma vez (o
# orjson registro a registro, sem conferir o tipo de cada um); qualquer outro
# valor no lote -- float, lista, objeto, inteiro além de 64 bits -- leva o lote
# ao caminho de cada registro. Os bytes guardados são os de sempre.
LOTES = [
    [
        {
            'ID': i,
            'NOME': 'Peças %d \u00e7 \U0001f600 " \\ \x00' % i,
            'OBS': None,
            'OK': i % 2 == 0,
            'NEG': -(2**63),
        }
        for i in range(50)
    ],
    [{'ID': 1, 'V': 'a'}, {'ID': 2, 'F': 1e-05}, {'ID': 3, 'V': 'c'}],
    [{'ID': 1}, {'ID': 2, 'L': [1, 0.1, {'b': 1, 'a': 2}]}],
    [{'ID': 1}, {'ID': 2**64}, {'ID': 3, 'U': 2**64 - 1}],
    [{'z': 1, 'a': 2, 'B': 3, '': 4, '\u00e7': 5, 'aa': 6}],
    [{}],
]


@pytest.mark.parametrize('registros', LOTES)
def test_canonico_do_lote_e_o_de_cada_registro(registros):
    idents, hashes, corpos = armazenamento._preparar(registros, None)
    assert corpos == [canonico(r).encode('utf-8') for r in registros]
    # Sem key, a identidade segue o sha256 do texto canônico (a de um banco antigo).
    assert hashes == [hashlib.sha256(c).hexdigest() for c in corpos]
    assert idents == ['h:' + h for h in hashes]


def test_identidade_da_key_e_a_de_sempre():
    registros = [
        {'ID': 7},
        {'ID': 'x\u00e7'},
        {'ID': True},
        {'ID': 2**70},
        {'ID': [1, 'a']},
        {'ID': 1.5},
    ]
    idents, hashes, _ = armazenamento._preparar(registros, 'ID')
    assert idents == ['k:7', 'k:"x\u00e7"', 'k:true', 'k:%d' % 2**70, 'k:[1,"a"]', 'k:1.5']
    assert hashes is None
    assert armazenamento._preparar([{'ID': 1}, {'ID': 2}], 'ID')[0] == ['k:1', 'k:2']
    with pytest.raises(armazenamento.ErroRegra, match=r'records\[1\]\.ID'):
        armazenamento._preparar([{'ID': 1}, {'X': 2}], 'ID')


def test_banco_antigo_com_corpo_texto_e_sha256(tmp_path):
    # As linhas gravadas antes da issue 18: o corpo como TEXT e o sha256 na coluna
    # hash. Igual ou mudado vale pelo corpo, e o reenvio delas é `duplicates`.
    banco = Banco(str(tmp_path))
    projeto = banco.criar_projeto('antigo', None)['id']
    assert (
        banco.receber_lote(projeto, {'dataset': 'd', 'key': 'ID', 'records': [{'ID': 0}]})[
            'inserted'
        ]
        == 1
    )
    antigos = [{'ID': i, 'V': 'ç%d' % i} for i in range(1, 4)]
    with banco.transacao() as con:
        for r in antigos:
            texto = canonico(r)
            con.execute(
                'INSERT INTO registros (projeto_id, dataset, ident, hash, corpo, versao)'
                ' VALUES (?, ?, ?, ?, ?, 1)',
                (projeto, 'd', 'k:%d' % r['ID'], hashlib.sha256(texto.encode()).hexdigest(), texto),
            )
    lote = [antigos[0], dict(antigos[1], V='novo'), antigos[2], {'ID': 9}]
    assert banco.receber_lote(projeto, {'dataset': 'd', 'key': 'ID', 'records': lote}) == {
        'received': 4,
        'inserted': 1,
        'updated': 1,
        'duplicates': 2,
        'removed': 0,
    }
    assert banco.receber_lote(projeto, {'dataset': 'd', 'key': 'ID', 'records': lote}) == {
        'received': 4,
        'inserted': 0,
        'updated': 0,
        'duplicates': 4,
        'removed': 0,
    }
    guardados = banco.pagina_de_registros(projeto, 'd', 0, 100)['records']
    assert sorted(guardados, key=lambda r: r['ID']) == [{'ID': 0}] + lote[:3] + [{'ID': 9}]
    banco.fechar()
    con = sqlite3.connect(str(tmp_path / 'contextia.sqlite3'))
    # Com key, o hash não é mais calculado; a linha que não mudou segue com o dela.
    assert dict(
        con.execute("SELECT ident, hash FROM registros WHERE ident IN ('k:1', 'k:2', 'k:9')")
    ) == {'k:1': hashlib.sha256(canonico(antigos[0]).encode()).hexdigest(), 'k:2': '', 'k:9': ''}
    con.close()


def test_surrogate_solto_falha_como_sempre():
    with pytest.raises(UnicodeEncodeError):
        canonico(['\ud800']).encode('utf-8')
    with pytest.raises(UnicodeEncodeError):
        canonico_bytes({'T': '\ud800'})


def test_contagens_do_lote_em_bloco_e_com_key_repetida(tmp_path):
    banco = Banco(str(tmp_path))
    projeto = banco.criar_projeto('x', None)['id']

    def lote(registros, sync=None, key='ID'):
        return banco.receber_lote(
            projeto,
            {
                'dataset': 'd',
                'records': registros,
                'key': key,
                'sync': {'id': sync, 'part': 1} if sync else None,
            },
        )

    base = [{'ID': i, 'V': 'v%d' % i} for i in range(600)]
    assert lote(base, 's1') == {
        'received': 600,
        'inserted': 600,
        'updated': 0,
        'duplicates': 0,
        'removed': 0,
    }
    mudado = [dict(r, V='outro') if r['ID'] % 3 == 0 else r for r in base] + [{'ID': 600}]
    assert lote(mudado) == {
        'received': 601,
        'inserted': 1,
        'updated': 200,
        'duplicates': 400,
        'removed': 0,
    }
    # A mesma key duas vezes no lote: a segunda conta contra a primeira, e a última vale.
    repetido = [
        {'ID': 1, 'V': 'a'},
        {'ID': 1, 'V': 'a'},
        {'ID': 1, 'V': 'b'},
        {'ID': 9000, 'V': 'n'},
        {'ID': 9000, 'V': 'm'},
    ]
    assert lote(repetido) == {
        'received': 5,
        'inserted': 1,
        'updated': 3,
        'duplicates': 1,
        'removed': 0,
    }
    guardados = {r['ID']: r for r in banco.pagina_de_registros(projeto, 'd', 0, 10000)['records']}
    assert len(guardados) == 602
    assert guardados[1] == {'ID': 1, 'V': 'b'} and guardados[9000] == {'ID': 9000, 'V': 'm'}
    assert guardados[3] == {'ID': 3, 'V': 'outro'} and guardados[4] == {'ID': 4, 'V': 'v4'}
    # O complete do sync s1 remove o que ele não viu e que não foi tocado depois:
    # nada (o envio sem sync tocou todos os de s1 depois que ele começou).
    assert banco.completar(projeto, 'd', 's1', None)['removed'] == 0
    # Sem key: o mesmo conteúdo é o mesmo registro, inclusive dentro do lote.
    assert banco.receber_lote(
        projeto, {'dataset': 'h', 'records': [{'a': 1}, {'a': 1}, {'a': 2}]}
    ) == {'received': 3, 'inserted': 2, 'updated': 0, 'duplicates': 1, 'removed': 0}
    banco.fechar()


def test_inteiro_alem_de_64_bits_volta_exato_e_nfe_fica_texto(chave_contextia, ambiente_contextia):
    chave = chave_contextia()
    corpo = (
        b'{"dataset":"grandes","key":"ID","records":[{"ID":18446744073709551617,'
        b'"NFE":"35260112345678000199550010000012341000012345","V":1e-05}]}'
    )
    cabecalhos = {'Authorization': 'Bearer ' + chave, 'Content-Type': 'application/json'}
    resposta = requests.post(
        ambiente_contextia.url + '/api/v1/intake', data=corpo, headers=cabecalhos, timeout=10
    )
    assert resposta.status_code == 200 and resposta.json()['inserted'] == 1
    lido = requests.get(
        ambiente_contextia.url + '/api/v1/datasets/grandes/registros',
        headers=cabecalhos,
        timeout=10,
    ).text
    # O texto como o servidor guardou: o inteiro inteiro (não 1.8446744073709552e+19).
    assert json.loads(lido)['records'] == [
        {
            'ID': 18446744073709551617,
            'NFE': '35260112345678000199550010000012341000012345',
            'V': 1e-05,
        }
    ]
    assert '18446744073709551617' in lido
    # Reenviar o mesmo: duplicates (o hash é o do texto canônico de sempre).
    resposta = requests.post(
        ambiente_contextia.url + '/api/v1/intake', data=corpo, headers=cabecalhos, timeout=10
    )
    assert resposta.json()['duplicates'] == 1


def test_registro_que_nao_e_objeto_diz_o_erro_de_sempre(chave_contextia, ambiente_contextia):
    chave = chave_contextia()
    cabecalhos = {'Authorization': 'Bearer ' + chave}
    url = ambiente_contextia.url + '/api/v1/intake'
    resposta = requests.post(
        url, json={'dataset': 'ok', 'records': [{'a': 1}, 5, 'x']}, headers=cabecalhos, timeout=10
    )
    assert resposta.status_code == 422
    erros = resposta.json()['detail']
    assert [(e['loc'], e['type']) for e in erros] == [
        (['body', 'records', 1], 'dict_type'),
        (['body', 'records', 2], 'dict_type'),
    ]
    # Com outro campo errado junto, os dois erros (como a validação registro a registro).
    resposta = requests.post(
        url, json={'dataset': 'Com Espaço', 'records': [7]}, headers=cabecalhos, timeout=10
    )
    assert [e['loc'] for e in resposta.json()['detail']] == [
        ['body', 'dataset'],
        ['body', 'records', 0],
    ]
    datasets = requests.get(
        ambiente_contextia.url + '/api/v1/datasets', headers=cabecalhos, timeout=10
    ).json()['datasets']
    assert datasets == []


def _pico_mib(pid):
    with open('/proc/%d/status' % pid, encoding='ascii') as f:
        for linha in f:
            if linha.startswith('VmHWM:'):
                return int(linha.split()[1]) / 1024
    raise AssertionError('sem VmHWM')


def test_corpo_lido_de_uma_vez_nao_vira_objetos_demais(fabrica_contextia):
    # O pior caso que o caminho rápido aceita: um corpo no limite, só de `{}`.
    servidor = fabrica_contextia()
    chave = servidor.criar_projeto_com_chave('miudos')
    miudos = (corpo_mod.LIMITE_LEITURA_RAPIDA - 40) // 3
    corpo = b'{"dataset":"m","records":[' + b'{},' * (miudos - 1) + b'{}]}'
    assert len(corpo) <= corpo_mod.LIMITE_LEITURA_RAPIDA
    antes = _pico_mib(servidor.pid)
    resposta = requests.post(
        servidor.url + '/api/v1/intake',
        data=corpo,
        timeout=30,
        headers={'Authorization': 'Bearer ' + chave, 'Content-Type': 'application/json'},
    )
    assert resposta.status_code == 413 and resposta.json()['erro'] == 'lote_grande'
    assert _pico_mib(servidor.pid) - antes < 60


def test_banco_novo_nasce_com_pagina_de_16k_e_o_antigo_fica_com_a_dele(tmp_path):
    novo = Banco(str(tmp_path / 'novo'))
    assert novo._con.execute('PRAGMA page_size').fetchone()[0] == 16384
    # O WAL segue voltando ao banco a cada ~40 MiB, não a cada 10000 páginas de 16 KiB.
    assert novo._con.execute('PRAGMA wal_autocheckpoint').fetchone()[0] == 2500
    novo.fechar()
    # Um banco de antes (página de 4 KiB, já em WAL, com as tabelas) abre como está.
    (tmp_path / 'antigo').mkdir()
    caminho = str(tmp_path / 'antigo' / 'contextia.sqlite3')
    con = sqlite3.connect(caminho)
    con.execute('PRAGMA page_size=4096')
    con.execute('PRAGMA journal_mode=WAL')
    con.executescript(armazenamento.ESQUEMA)
    con.close()
    antigo = Banco(str(tmp_path / 'antigo'))
    assert antigo._con.execute('PRAGMA page_size').fetchone()[0] == 4096
    assert antigo._con.execute('PRAGMA wal_autocheckpoint').fetchone()[0] == 10000
    projeto = antigo.criar_projeto('x', None)['id']
    assert (
        antigo.receber_lote(projeto, {'dataset': 'd', 'key': 'ID', 'records': [{'ID': 1}]})[
            'inserted'
        ]
        == 1
    )
    antigo.fechar()


def test_trava_de_outro_processo_recusa_sem_esperar_e_espera_quando_pedido(tmp_path):
    # O laço de eventos pede sem esperar (BancoOcupado na hora); a thread, esperando.
    banco = Banco(str(tmp_path))
    projeto = banco.criar_projeto('x', None)['id']
    lote = Banco.preparar_lote({'dataset': 'd', 'key': 'ID', 'records': [{'ID': 1}]})
    outro = sqlite3.connect(banco.caminho, isolation_level=None)
    outro.execute('BEGIN IMMEDIATE')
    for _ in range(2):  # de novo sem esperar: recusa na hora
        inicio = time.monotonic()
        with pytest.raises(armazenamento.BancoOcupado):
            banco.gravar_lote(projeto, lote, esperar=False)
        assert time.monotonic() - inicio < 1
    resultado = []
    espera = threading.Thread(target=lambda: resultado.append(banco.gravar_lote(projeto, lote)))
    espera.start()
    time.sleep(0.5)
    assert resultado == []  # esperando a trava do outro
    outro.execute('COMMIT')
    espera.join(10)
    assert resultado[0]['inserted'] == 1
    assert banco.gravar_lote(projeto, lote, esperar=False)['duplicates'] == 1
    outro.close()
    banco.fechar()


def test_leitura_depois_do_lote_sem_espera_volta_a_esperar_a_trava(tmp_path):
    # O lote do laço de eventos grava com a espera em zero; a leitura seguinte
    # (listar datasets, páginas de registros) espera a trava como sempre.
    banco = Banco(str(tmp_path))
    projeto = banco.criar_projeto('x', None)['id']
    banco.gravar_lote(
        projeto,
        Banco.preparar_lote({'dataset': 'd', 'key': 'ID', 'records': [{'ID': 1}]}),
        esperar=False,
    )
    with banco.leitura() as con:
        espera = con.execute('PRAGMA busy_timeout').fetchone()[0]
    assert espera == armazenamento.ESPERA_DA_TRAVA * 1000
    banco.fechar()


def test_reenvio_le_antes_e_conta_igual_mudado_e_novo(tmp_path):
    # O primeiro do lote já existe (o reenvio de todo dia): lido antes, só o novo
    # inserido; as contagens e o guardado são os de sempre.
    banco = Banco(str(tmp_path))
    projeto = banco.criar_projeto('x', None)['id']
    primeiro = [{'ID': 1, 'V': 'a'}, {'ID': 2, 'V': 'b'}]
    assert (
        banco.receber_lote(projeto, {'dataset': 'd', 'key': 'ID', 'records': primeiro})['inserted']
        == 2
    )
    segundo = [{'ID': 1, 'V': 'a'}, {'ID': 2, 'V': 'B'}, {'ID': 3, 'V': 'c'}]
    contagens = banco.receber_lote(projeto, {'dataset': 'd', 'key': 'ID', 'records': segundo})
    assert (contagens['inserted'], contagens['updated'], contagens['duplicates']) == (1, 1, 1)
    sem_key = banco.receber_lote(projeto, {'dataset': 's', 'records': primeiro})
    assert sem_key['inserted'] == 2
    de_novo = banco.receber_lote(projeto, {'dataset': 's', 'records': primeiro + [{'ID': 9}]})
    assert (de_novo['inserted'], de_novo['duplicates']) == (1, 2)
    pagina = banco.pagina_de_registros(projeto, 'd', 0, 10)
    assert sorted((r['ID'], r['V']) for r in pagina['records']) == [(1, 'a'), (2, 'B'), (3, 'c')]
    banco.fechar()
