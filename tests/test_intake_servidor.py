"""
O servidor Contextia local: validação, limites, persistência, webhook, OpenAPI.
HTTP de verdade em 127.0.0.1; servidores exclusivos onde o teste reinicia ou
muda limites.
"""

import http.server
import json
import os
import queue
import sqlite3
import sys
import threading

import pytest
import requests

from contextia_local.app import openapi_json
from contextia_sync.intake import cliente, transporte

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _post(servidor, caminho, corpo, chave):
    return requests.post(
        servidor.url + caminho, json=corpo, timeout=10, headers={'Authorization': 'Bearer ' + chave}
    )


def test_422_diz_o_caminho_do_campo(chave_contextia, ambiente_contextia):
    chave = chave_contextia()
    resposta = _post(
        ambiente_contextia,
        '/api/v1/intake',
        {'dataset': 'ok', 'records': [{'a': 1}], 'sync': {'id': 's', 'part': -1}},
        chave,
    )
    assert resposta.status_code == 422
    assert ['body', 'sync', 'part'] in [e['loc'] for e in resposta.json()['detail']]
    resposta = _post(
        ambiente_contextia, '/api/v1/intake', {'dataset': 'Com Espaço', 'records': []}, chave
    )
    assert resposta.status_code == 422 and resposta.json()['detail'][0]['loc'] == [
        'body',
        'dataset',
    ]
    # Campo desconhecido e erro: `keys` no lugar de `key` nao pode virar dedup por hash.
    resposta = _post(
        ambiente_contextia, '/api/v1/intake', {'dataset': 'ok', 'records': [], 'keys': 'ID'}, chave
    )
    assert resposta.status_code == 422 and resposta.json()['detail'][0]['loc'] == ['body', 'keys']
    # Registro sem o campo da key: o indice do registro no caminho.
    resultado = cliente.enviar_dataset('semkey', [{'ID': 1}, {'OUTRO': 2}], key='ID', api_key=chave)
    assert resultado.lotes_erro == 1 and 'records[1].ID' in resultado.erros[0]


def test_413_divide_o_lote_ao_meio(fabrica_contextia, monkeypatch):
    servidor = fabrica_contextia(max_registros_lote=100)
    monkeypatch.setenv('CONTEXTIA_URL', servidor.url)
    chave = servidor.criar_projeto_com_chave('413')
    resultado = cliente.enviar_dataset(
        'grande', ({'ID': i} for i in range(1000)), key='ID', chunk=500, api_key=chave
    )
    # 500 -> 250 -> 125 -> 62/63: cada lote original vira 8 pedidos aceitos.
    assert (resultado.inserted, resultado.lotes_ok, resultado.lotes_erro) == (1000, 2, 0)
    assert cliente.capacidades()['max_records_per_batch'] == 100


def test_413_de_um_registro_so_vira_lote_erro(fabrica_contextia, monkeypatch):
    servidor = fabrica_contextia(max_bytes_lote=2000)
    monkeypatch.setenv('CONTEXTIA_URL', servidor.url)
    chave = servidor.criar_projeto_com_chave('413b')
    resultado = cliente.enviar_dataset(
        'bytes', [{'ID': 1, 'T': 'x' * 5000}, {'ID': 2}], key='ID', api_key=chave
    )
    assert resultado.inserted == 1 and resultado.lotes_erro == 1
    assert 'HTTP 413' in resultado.erros[0]


def test_reinicio_e_queda_preservam_os_dados(fabrica_contextia, monkeypatch):
    servidor = fabrica_contextia()
    monkeypatch.setenv('CONTEXTIA_URL', servidor.url)
    chave = servidor.criar_projeto_com_chave('persiste')
    cliente.enviar_dataset('dados', ({'ID': i} for i in range(500)), key='ID', api_key=chave)
    url, pid = servidor.url, servidor.pid
    servidor.reiniciar()
    assert servidor.url == url and servidor.pid != pid
    assert cliente.listar_datasets(chave)[0]['records'] == 500
    segundo = cliente.enviar_dataset(
        'dados', ({'ID': i} for i in range(500)), key='ID', api_key=chave
    )
    assert segundo.duplicates == 500
    # SIGKILL: o que foi respondido como gravado estava comitado.
    cliente.enviar_dataset('dados', ({'ID': i} for i in range(500, 600)), key='ID', api_key=chave)
    servidor.matar()
    servidor.iniciar()
    assert cliente.listar_datasets(chave)[0]['records'] == 600
    assert cliente.quem_sou(chave)['external_id'] == 'persiste'


def test_chave_guardada_so_como_hash(fabrica_contextia):
    servidor = fabrica_contextia()
    chave = servidor.criar_projeto_com_chave('hash')
    servidor.parar()
    conteudo = b''
    for nome in os.listdir(servidor.dados):
        if nome.startswith('contextia.sqlite3'):
            with open(os.path.join(servidor.dados, nome), 'rb') as f:
                conteudo += f.read()
    assert chave[4:].encode() not in conteudo
    con = sqlite3.connect(os.path.join(servidor.dados, 'contextia.sqlite3'))
    assert con.execute('SELECT COUNT(*) FROM chaves').fetchone()[0] == 1
    con.close()


class _Receptor(http.server.BaseHTTPRequestHandler):
    recebidos = None

    def do_POST(self):  # noqa: N802 - nome do http.server
        corpo = self.rfile.read(int(self.headers['Content-Length']))
        self.recebidos.put((dict(self.headers), corpo))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):  # silencio no teste
        pass


@pytest.fixture
def receptor():
    fila = queue.Queue()
    classe = type('Receptor', (_Receptor,), {'recebidos': fila})
    servidor = http.server.ThreadingHTTPServer(('127.0.0.1', 0), classe)
    thread = threading.Thread(target=servidor.serve_forever, daemon=True)
    thread.start()
    yield 'http://127.0.0.1:%d/gancho' % servidor.server_address[1], fila
    servidor.shutdown()
    servidor.server_close()


def test_webhook_assinado_e_verificavel(chave_contextia, ambiente_contextia, receptor):
    url, recebidos = receptor
    chave = chave_contextia('webhook')
    admin = ambiente_contextia.admin()
    projeto = admin.buscar_projeto('webhook')
    webhook = admin.registrar_webhook(projeto['id'], url, eventos=['sync.completed', 'teste'])
    assert webhook['secret'] and admin.listar_webhooks(projeto['id'])[0]['url'] == url
    assert 'secret' not in admin.listar_webhooks(projeto['id'])[0]

    assert admin.testar_webhook(webhook['id'])['status'] == 204
    cabecalhos, corpo = recebidos.get(timeout=5)
    assinatura = cabecalhos['X-Contextia-Assinatura']
    assert cliente.verificar_assinatura(webhook['secret'], corpo, assinatura)
    assert not cliente.verificar_assinatura(
        webhook['secret'], corpo.replace(b'teste', b'TESTE'), assinatura
    )
    assert json.loads(corpo)['evento'] == 'teste'

    # complete entrega sync.completed (em segundo plano)
    sync = cliente.gerar_sync()
    cliente.enviar_dataset('gancho', [{'ID': 1}], key='ID', api_key=chave, sync=sync)
    cliente.completar('gancho', sync, api_key=chave)
    cabecalhos, corpo = recebidos.get(timeout=5)
    assert cabecalhos['X-Contextia-Evento'] == 'sync.completed'
    assert cliente.verificar_assinatura(
        webhook['secret'], corpo, cabecalhos['X-Contextia-Assinatura']
    )
    assert json.loads(corpo)['dados']['sync'] == sync


@pytest.mark.parametrize(
    'url', ['http://10.0.0.1/x', 'https://exemplo.com/gancho', 'ftp://127.0.0.1/x']
)
def test_webhook_fora_de_127_e_recusado(ambiente_contextia, url):
    admin = ambiente_contextia.admin()
    projeto = admin.criar_projeto('webhook-fora')
    with pytest.raises(transporte.ErroContextia, match='HTTP 422'):
        admin.registrar_webhook(projeto['id'], url)


def test_falhas_desligadas_sem_a_flag(fabrica_contextia):
    servidor = fabrica_contextia(falhas=False)
    with pytest.raises(RuntimeError, match='HTTP 404'):
        servidor.injetar('500')


def test_taxa_de_falhas_e_contadores(fabrica_contextia, monkeypatch):
    servidor = fabrica_contextia(falhas=True)
    monkeypatch.setenv('CONTEXTIA_URL', servidor.url)
    chave = servidor.criar_projeto_com_chave('taxa')
    servidor.taxa_de_falhas({'503': 0.3, 'derrubar': 0.1}, semente=7)
    for _ in range(2):
        resultado = cliente.enviar_dataset(
            'taxa', ({'ID': i} for i in range(200)), key='ID', chunk=20, api_key=chave
        )
        assert resultado.lotes_erro == 0
    contagem = servidor.falhas_injetadas()
    assert contagem['503'] > 0 and contagem['derrubar'] > 0
    assert cliente.listar_datasets(chave)[0]['records'] == 200
    servidor.limpar_falhas()
    assert sum(servidor.falhas_injetadas().values()) == 0


def test_servidor_sobe_pela_linha_de_comando_documentada():
    import subprocess

    saida = subprocess.run(
        [sys.executable, '-m', 'contextia_local', '--help'],
        cwd=RAIZ,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for opcao in (
        '--porta',
        '--dados',
        '--admin-token',
        '--host',
        '--falhas',
        '--max-registros-lote',
    ):
        assert opcao in saida
    erro = subprocess.run(
        [sys.executable, '-m', 'contextia_local', '--porta', '1'],
        cwd=RAIZ,
        capture_output=True,
        text=True,
    )
    assert erro.returncode == 2 and '--dados' in erro.stderr


def test_openapi_commitado_e_o_gerado():
    with open(os.path.join(RAIZ, 'docs', 'openapi.json'), encoding='utf-8') as f:
        commitado = f.read()
    assert commitado == openapi_json(), (
        'docs/openapi.json esta desatualizado. Regere com:'
        ' python3 -m contextia_local --openapi > docs/openapi.json'
    )
