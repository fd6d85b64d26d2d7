"""
O Contextia local contra quem ataca (issue 14): corpo sem chave, corpo grande
demais (chunked, Content-Length que mente, milhões de registros), números que
o SQLite e o JSON não guardam, webhook que redireciona, o token de admin na
linha de comando e o modo do arquivo do banco.

Tudo contra o servidor de verdade num processo em 127.0.0.1, com pedidos
feitos por socket cru (para mandar o que um cliente educado não manda) ou por
requests. A memória é a do processo do servidor, lida em /proc/<pid>/status:
VmHWM é o pico do RSS desde que ele subiu, e é o que um corpo lido inteiro
faria crescer.
"""

import http.server
import json
import os
import select
import socket
import stat
import subprocess
import sys
import threading
import time

import pytest
import requests

from contextia_local.processo import ServidorLocal

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1024 * 1024


# ---------------------------------------------------------------- apoio
def _memoria_mib(pid):
    """{'VmHWM': pico, 'VmRSS': agora} do processo, em MiB."""
    valores = {}
    with open('/proc/%d/status' % pid, encoding='ascii') as f:
        for linha in f:
            nome, _, resto = linha.partition(':')
            if nome in ('VmHWM', 'VmRSS'):
                valores[nome] = int(resto.split()[0]) / 1024
    return valores


def _ler_resposta(conexao, prazo=15):
    """(status, cabeçalhos em minúsculas, corpo) de uma resposta HTTP/1.1 no socket."""
    conexao.settimeout(prazo)
    dados = b''
    while b'\r\n\r\n' not in dados:
        pedaco = conexao.recv(65536)
        assert pedaco, 'o servidor fechou sem responder: %r' % dados
        dados += pedaco
    cabeca, _, corpo = dados.partition(b'\r\n\r\n')
    linhas = cabeca.decode('latin-1').split('\r\n')
    cabecalhos = dict(
        (n.strip().lower(), v.strip()) for n, _, v in (linha.partition(':') for linha in linhas[1:])
    )
    tamanho = int(cabecalhos.get('content-length', 0))
    while len(corpo) < tamanho:
        pedaco = conexao.recv(65536)
        if not pedaco:
            break
        corpo += pedaco
    return int(linhas[0].split()[1]), cabecalhos, corpo


def _post_chunked(servidor, total, cabecalhos=b'', inicio=b'', pedaco=b'x' * MIB):
    """
    POST chunked de até `total` bytes ao intake, por socket cru. Antes de cada
    pedaço olha se a resposta já chegou e para ali (como um cliente que lê
    enquanto manda). Devolve (bytes enviados, status, cabeçalhos, corpo JSON).
    """
    conexao = socket.create_connection(('127.0.0.1', servidor.porta), timeout=15)
    with conexao:
        conexao.sendall(
            b'POST /api/v1/intake HTTP/1.1\r\nHost: 127.0.0.1\r\n'
            b'Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n'
            + cabecalhos
            + b'\r\n'
        )
        enviados = 0
        try:
            for parte in [inicio] if inicio else []:
                conexao.sendall(b'%x\r\n%s\r\n' % (len(parte), parte))
                enviados += len(parte)
            while enviados < total:
                prontos, _, _ = select.select([conexao], [], [], 0)
                if prontos:
                    break
                conexao.sendall(b'%x\r\n%s\r\n' % (len(pedaco), pedaco))
                enviados += len(pedaco)
            else:
                conexao.sendall(b'0\r\n\r\n')
        except (BrokenPipeError, ConnectionResetError):
            pass  # o servidor respondeu e fechou: a resposta esta no socket
        status, resposta, corpo = _ler_resposta(conexao)
    return enviados, status, resposta, json.loads(corpo)


def _autorizacao(chave):
    return b'Authorization: Bearer %s\r\n' % chave.encode()


# ---------------------------------------------------------------- corpo
def test_chunked_sem_chave_recebe_401_sem_o_servidor_ler_o_corpo(fabrica_contextia):
    servidor = fabrica_contextia()
    antes = _memoria_mib(servidor.pid)
    enviados, status, cabecalhos, corpo = _post_chunked(servidor, 256 * MIB)
    depois = _memoria_mib(servidor.pid)
    assert status == 401 and corpo['erro'] == 'sem_chave', corpo
    # Responde com os cabecalhos, antes do primeiro pedaco; e nao le o resto.
    assert enviados < 8 * MIB, '%d MiB enviados antes da resposta' % (enviados // MIB)
    assert cabecalhos['connection'] == 'close'
    assert depois['VmHWM'] - antes['VmHWM'] < 16, (antes, depois)
    # Chave que nao existe: o mesmo, antes do corpo.
    enviados, status, _, corpo = _post_chunked(servidor, 256 * MIB, _autorizacao('ctx_' + 'x' * 43))
    assert status == 401 and corpo['erro'] == 'chave_invalida', corpo
    assert enviados < 8 * MIB
    assert _memoria_mib(servidor.pid)['VmHWM'] - antes['VmHWM'] < 16
    assert requests.get(servidor.url + '/saude', timeout=5).status_code == 200


def test_rota_de_admin_autentica_antes_do_corpo(fabrica_contextia):
    servidor = fabrica_contextia()
    chave = servidor.criar_projeto_com_chave('admin-antes')
    antes = _memoria_mib(servidor.pid)
    for cabecalho, esperado in ((b'', 401), (_autorizacao(chave), 403)):
        conexao = socket.create_connection(('127.0.0.1', servidor.porta), timeout=15)
        with conexao:
            # Content-Length de 200 MB que nunca chega: a resposta nao pode esperar por ele.
            conexao.sendall(
                b'POST /api/v1/admin/projetos HTTP/1.1\r\nHost: 127.0.0.1\r\n'
                b'Content-Type: application/json\r\nContent-Length: 200000000\r\n'
                + cabecalho
                + b'\r\n{"external_id": "'
            )
            status, _, _ = _ler_resposta(conexao)
        assert status == esperado
    assert _memoria_mib(servidor.pid)['VmHWM'] - antes['VmHWM'] < 16


def test_chunked_com_chave_acima_do_limite_recebe_413_e_para_de_ler(fabrica_contextia):
    servidor = fabrica_contextia(max_bytes_lote=4 * MIB)
    chave = servidor.criar_projeto_com_chave('chunked-413')
    antes = _memoria_mib(servidor.pid)
    # Um envelope valido de 64 MiB em registros de 1 KiB, sem Content-Length.
    registro = b'{"T": "%s"},' % (b'x' * 1000)
    enviados, status, cabecalhos, corpo = _post_chunked(
        servidor,
        64 * MIB,
        _autorizacao(chave),
        inicio=b'{"dataset": "grande", "records": [',
        pedaco=registro * 1024,
    )
    depois = _memoria_mib(servidor.pid)
    assert status == 413 and corpo['erro'] == 'lote_grande', corpo
    assert 'max_bytes_per_batch' in corpo['detail'] and str(4 * MIB) in corpo['detail']
    assert cabecalhos['connection'] == 'close'
    # Leu o limite (4 MiB) e parou: o que passou disso ficou nos buffers do kernel.
    assert enviados < 16 * MIB, '%d MiB enviados antes da resposta' % (enviados // MIB)
    assert depois['VmHWM'] - antes['VmHWM'] < 40, (antes, depois)
    sessao = requests.get(
        servidor.url + '/api/v1/datasets', timeout=5, headers={'Authorization': 'Bearer ' + chave}
    )
    assert sessao.json()['datasets'] == []


def test_content_length_que_mente_nao_faz_o_servidor_ler_alem_do_limite(fabrica_contextia):
    servidor = fabrica_contextia()
    chave = servidor.criar_projeto_com_chave('cl-413')
    conexao = socket.create_connection(('127.0.0.1', servidor.porta), timeout=15)
    with conexao:
        # Declara 10 GB e nao manda nada: a recusa vem so pelo cabecalho.
        conexao.sendall(
            b'POST /api/v1/intake HTTP/1.1\r\nHost: 127.0.0.1\r\n'
            b'Content-Type: application/json\r\nContent-Length: 10000000000\r\n'
            + _autorizacao(chave)
            + b'\r\n'
        )
        status, _, corpo = _ler_resposta(conexao)
    assert status == 413 and json.loads(corpo)['erro'] == 'lote_grande'
    assert 'Content-Length' in json.loads(corpo)['detail']

    # Mente para menos: declara 40 bytes e manda 64 MiB. O servidor le os 40 (o
    # enquadramento do HTTP/1.1 manda), recusa o resto como pedido invalido e fecha.
    antes = _memoria_mib(servidor.pid)
    conexao = socket.create_connection(('127.0.0.1', servidor.porta), timeout=15)
    with conexao:
        conexao.sendall(
            b'POST /api/v1/intake HTTP/1.1\r\nHost: 127.0.0.1\r\n'
            b'Content-Type: application/json\r\nContent-Length: 40\r\n'
            + _autorizacao(chave)
            + b'\r\n'
        )
        try:
            for _ in range(64):
                conexao.sendall(b'{' * MIB)
        except (BrokenPipeError, ConnectionResetError):
            pass
        status, _, _ = _ler_resposta(conexao)
    assert 400 <= status < 500
    assert _memoria_mib(servidor.pid)['VmHWM'] - antes['VmHWM'] < 16
    assert requests.get(servidor.url + '/saude', timeout=5).status_code == 200


def test_dois_milhoes_de_registros_recusados_sem_virar_objetos(fabrica_contextia):
    servidor = fabrica_contextia()
    chave = servidor.criar_projeto_com_chave('2m')
    corpo = b'{"dataset": "miudos", "records": [' + b'{"i": 0},' * 1999999 + b'{"i": 0}]}'
    assert len(corpo) < 32 * MIB  # dentro do limite de bytes: quem recusa e a contagem
    antes = _memoria_mib(servidor.pid)
    # O prazo e folgado (o codigo antigo levava 35 s e 2 GiB); o que se mede e a memoria.
    resposta = requests.post(
        servidor.url + '/api/v1/intake',
        data=corpo,
        timeout=30,
        headers={'Authorization': 'Bearer ' + chave, 'Content-Type': 'application/json'},
    )
    depois = _memoria_mib(servidor.pid)
    assert resposta.status_code == 413, resposta.text[:300]
    assert resposta.json()['erro'] == 'lote_grande'
    limite = requests.get(servidor.url + '/api/v1/capacidades', timeout=5).json()[
        'max_records_per_batch'
    ]
    assert 'lote com mais de %s registros' % limite in resposta.json()['detail']
    # O corpo (22 MiB) lido uma vez e decodificado uma vez; nada de 2 milhoes de dicts.
    assert depois['VmHWM'] - antes['VmHWM'] < 120, (antes, depois)


def test_limite_de_registros_e_o_anunciado_e_cabe_o_maior_chunk(fabrica_contextia):
    servidor = fabrica_contextia()
    chave = servidor.criar_projeto_com_chave('limite')
    # O padrao do servidor e o maior `chunk` que o mapeamento aceita: um
    # mapeamento valido nunca esbarra nele.
    with open(
        os.path.join(RAIZ, 'contextia_sync', 'mapeamento.schema.json'), encoding='utf-8'
    ) as f:
        limite = json.load(f)['$defs']['chunk']['maximum']
    capacidades = requests.get(servidor.url + '/api/v1/capacidades', timeout=5).json()
    assert capacidades['max_records_per_batch'] == limite
    cabecalhos = {'Authorization': 'Bearer ' + chave}
    exato = {'dataset': 'limite', 'key': 'i', 'records': [{'i': i} for i in range(limite)]}
    resposta = requests.post(
        servidor.url + '/api/v1/intake', json=exato, headers=cabecalhos, timeout=60
    )
    assert resposta.status_code == 200 and resposta.json()['inserted'] == limite
    exato['records'].append({'i': -1})
    resposta = requests.post(
        servidor.url + '/api/v1/intake', json=exato, headers=cabecalhos, timeout=60
    )
    assert resposta.status_code == 413 and resposta.json()['erro'] == 'lote_grande'


# ---------------------------------------------------------------- 422, nunca 500
@pytest.mark.parametrize(
    'caminho',
    [
        '/api/v1/admin/projetos/%d/chaves' % 2**64,
        '/api/v1/admin/projetos/%d/webhooks' % 2**63,
        '/api/v1/admin/projetos/-%d/chaves' % 2**64,
    ],
)
def test_id_acima_de_64_bits_e_422(ambiente_contextia, caminho):
    admin = {'Authorization': 'Bearer ' + ambiente_contextia.admin_token}
    for metodo in ('GET', 'POST'):
        resposta = requests.request(
            metodo,
            ambiente_contextia.url + caminho,
            headers=admin,
            json={'url': 'http://127.0.0.1:1/x'},
            timeout=10,
        )
        assert resposta.status_code == 422, (metodo, resposta.status_code, resposta.text)
        assert resposta.json()['detail'][0]['loc'] == ['path', 'projeto_id']
    resposta = requests.put(
        ambiente_contextia.url + '/api/v1/admin/grupos/g/projetos/%d' % 2**64,
        headers=admin,
        timeout=10,
    )
    assert resposta.status_code == 422


def test_after_e_part_acima_de_64_bits_sao_422(chave_contextia, ambiente_contextia):
    chave = chave_contextia()
    cabecalhos = {'Authorization': 'Bearer ' + chave}
    resposta = requests.get(
        ambiente_contextia.url + '/api/v1/datasets/x/registros',
        params={'after': 2**64},
        headers=cabecalhos,
        timeout=10,
    )
    assert resposta.status_code == 422 and resposta.json()['detail'][0]['loc'] == ['query', 'after']
    resposta = requests.post(
        ambiente_contextia.url + '/api/v1/intake',
        headers=cabecalhos,
        json={'dataset': 'x', 'records': [], 'sync': {'id': 's', 'part': 2**64}},
        timeout=10,
    )
    assert resposta.status_code == 422 and resposta.json()['detail'][0]['loc'] == [
        'body',
        'sync',
        'part',
    ]


@pytest.mark.parametrize('valor', ['NaN', 'Infinity', '-Infinity', '1e400', '-1E999'])
def test_numero_nao_finito_num_registro_e_422_nomeando_o_campo(
    chave_contextia, ambiente_contextia, valor
):
    chave = chave_contextia()
    corpo = (
        '{"dataset": "nan", "key": "ID", "records": [{"ID": 1, "VALOR": 2.5},'
        ' {"ID": 2, "VALOR": %s}]}' % valor
    )
    resposta = requests.post(
        ambiente_contextia.url + '/api/v1/intake',
        data=corpo,
        timeout=10,
        headers={'Authorization': 'Bearer ' + chave, 'Content-Type': 'application/json'},
    )
    assert resposta.status_code == 422, resposta.text
    assert resposta.json()['erro'] == 'numero_nao_finito'
    assert resposta.json()['detail'].startswith('records[1].VALOR: o número %s' % valor)
    # Nada gravado: o lote e uma transacao, e este nem chegou a ela.
    datasets = requests.get(
        ambiente_contextia.url + '/api/v1/datasets',
        timeout=10,
        headers={'Authorization': 'Bearer ' + chave},
    ).json()['datasets']
    assert datasets == []


def test_numero_nao_finito_fora_do_intake_tambem_e_422(chave_contextia, ambiente_contextia):
    chave = chave_contextia()
    resposta = requests.post(
        ambiente_contextia.url + '/api/v1/intake/complete',
        timeout=10,
        data='{"dataset": "x", "sync": "s", "max_removal": NaN}',
        headers={'Authorization': 'Bearer ' + chave, 'Content-Type': 'application/json'},
    )
    assert resposta.status_code == 422 and resposta.json()['detail'].startswith(
        'max_removal: o número NaN'
    )
    # Inteiro com mais digitos do que o Python converte, e aninhamento sem fim.
    for corpo in (
        '{"dataset": "x", "records": [{"n": %s}]}' % ('9' * 5000),
        '{"dataset": "x", "records": [{"n": %s%s}]}' % ('[' * 100000, ']' * 100000),
    ):
        resposta = requests.post(
            ambiente_contextia.url + '/api/v1/intake',
            data=corpo,
            timeout=10,
            headers={'Authorization': 'Bearer ' + chave, 'Content-Type': 'application/json'},
        )
        assert resposta.status_code == 422, resposta.text[:300]


# ---------------------------------------------------------------- webhook
class _Receptor(http.server.BaseHTTPRequestHandler):
    """Responde `status` com `Location` (redirecionador) ou 200 (destino); anota tudo."""

    status = 200
    destino = None
    pedidos: list = []

    def _responder(self):
        tamanho = int(self.headers.get('Content-Length') or 0)
        self.rfile.read(tamanho)
        type(self).pedidos.append((self.command, self.path))
        self.send_response(self.status)
        if self.destino:
            self.send_header('Location', self.destino)
        self.send_header('Content-Length', '0')
        self.end_headers()

    do_GET = do_POST = _responder

    def log_message(self, *args):
        pass


def _servir(status, destino=None):
    classe = type(
        'Receptor%d' % status, (_Receptor,), {'status': status, 'destino': destino, 'pedidos': []}
    )
    servidor = http.server.ThreadingHTTPServer(('127.0.0.1', 0), classe)
    threading.Thread(target=servidor.serve_forever, daemon=True).start()
    return servidor, classe


@pytest.mark.parametrize('status', [301, 302, 303, 307, 308])
def test_webhook_nao_segue_redirecionamento(ambiente_contextia, status):
    final, recebidos = _servir(200)
    destino = 'http://127.0.0.1:%d/final' % final.server_address[1]
    redirecionador, redirecionados = _servir(status, destino)
    try:
        admin = ambiente_contextia.admin()
        projeto = admin.criar_projeto('redir-%d' % status)
        webhook = admin.registrar_webhook(
            projeto['id'], 'http://127.0.0.1:%d/gancho' % redirecionador.server_address[1]
        )
        resultado = admin.testar_webhook(webhook['id'])
    finally:
        redirecionador.shutdown()
        final.shutdown()
    assert redirecionados.pedidos == [('POST', '/gancho')]
    assert recebidos.pedidos == [], 'a entrega seguiu o redirecionamento'
    assert resultado['status'] == status
    assert 'redirecionamento para %r' % destino in resultado['erro']


# ---------------------------------------------------------------- token de admin
def _linha_de_comando(pid):
    with open('/proc/%d/cmdline' % pid, 'rb') as f:
        return f.read().replace(b'\0', b' ').decode()


def _ambiente_do_processo(pid):
    with open('/proc/%d/environ' % pid, 'rb') as f:
        return dict(v.decode().partition('=')[::2] for v in f.read().split(b'\0') if v)


def test_token_de_admin_fora_da_linha_de_comando(tmp_path):
    token = 'admin-segredo-' + os.urandom(8).hex()
    with ServidorLocal(tmp_path / 'dados', admin_token=token) as servidor:
        assert token not in _linha_de_comando(servidor.pid)
        assert 'contextia_local' in _linha_de_comando(servidor.pid)
        assert _ambiente_do_processo(servidor.pid)['CONTEXTIA_ADMIN_TOKEN'] == token
        assert servidor.admin().criar_projeto('ps')['external_id'] == 'ps'


def _rodar_servidor(args, ambiente=None):
    env = {k: v for k, v in os.environ.items() if k != 'CONTEXTIA_ADMIN_TOKEN'}
    env.update(ambiente or {})
    env['PYTHONPATH'] = RAIZ
    return subprocess.run(
        [sys.executable, '-m', 'contextia_local'] + args,
        cwd=RAIZ,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_opcao_antiga_admin_token_e_recusada_sem_repetir_o_valor(tmp_path):
    for args in (
        ['--admin-token', 'segredo-na-linha'],
        ['--admin-token=segredo-na-linha'],
        ['--admin-token'],
    ):
        resultado = _rodar_servidor(['--dados', str(tmp_path)] + args)
        assert resultado.returncode == 2, resultado.stderr
        assert '--admin-token não existe mais' in resultado.stderr
        assert 'CONTEXTIA_ADMIN_TOKEN' in resultado.stderr
        assert 'segredo-na-linha' not in resultado.stderr + resultado.stdout
    # A abreviacao nao vira --admin-token-arquivo (que leria o token como nome de arquivo).
    resultado = _rodar_servidor(['--dados', str(tmp_path), '--admin-tok', 'segredo-na-linha'])
    assert resultado.returncode == 2 and 'opção ambígua' in resultado.stderr
    assert 'segredo-na-linha' not in resultado.stderr + resultado.stdout
    resultado = _rodar_servidor(['--dados', str(tmp_path)])
    assert resultado.returncode == 2 and 'falta o token de admin' in resultado.stderr


def test_token_de_admin_por_arquivo(tmp_path):
    from contextia_local.processo import porta_livre

    arquivo = tmp_path / 'token'
    arquivo.write_text('token-do-arquivo\n')
    arquivo.chmod(0o644)
    resultado = _rodar_servidor(['--dados', str(tmp_path), '--admin-token-arquivo', str(arquivo)])
    assert resultado.returncode == 2 and 'legível por outros usuários' in resultado.stderr
    assert 'chmod 600' in resultado.stderr and 'token-do-arquivo' not in resultado.stderr
    arquivo.chmod(0o600)
    resultado = _rodar_servidor(
        ['--dados', str(tmp_path), '--admin-token-arquivo', str(arquivo)],
        {'CONTEXTIA_ADMIN_TOKEN': 'outro'},
    )
    assert resultado.returncode == 2 and 'tokens diferentes' in resultado.stderr
    porta = porta_livre()
    env = {k: v for k, v in os.environ.items() if k != 'CONTEXTIA_ADMIN_TOKEN'}
    env['PYTHONPATH'] = RAIZ
    processo = subprocess.Popen(
        [
            sys.executable,
            '-m',
            'contextia_local',
            '--porta',
            str(porta),
            '--dados',
            str(tmp_path / 'dados'),
            '--admin-token-arquivo',
            str(arquivo),
            '--vigiar-pai',
            str(os.getpid()),
        ],
        cwd=RAIZ,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = 'http://127.0.0.1:%d' % porta
        limite = time.monotonic() + 30
        while time.monotonic() < limite:
            try:
                requests.get(url + '/saude', timeout=1)
                break
            except requests.ConnectionError:
                time.sleep(0.1)
        assert (
            requests.get(
                url + '/api/v1/admin/grupos',
                timeout=5,
                headers={'Authorization': 'Bearer token-do-arquivo'},
            ).status_code
            == 200
        )
        assert (
            requests.get(
                url + '/api/v1/admin/grupos', timeout=5, headers={'Authorization': 'Bearer outro'}
            ).status_code
            == 403
        )
    finally:
        processo.terminate()
        processo.wait(10)


# ---------------------------------------------------------------- o arquivo do banco
def _modo(caminho):
    return stat.S_IMODE(os.stat(caminho).st_mode)


def test_banco_do_servidor_nasce_0600_com_wal_e_shm(tmp_path):
    dados = tmp_path / 'dados'
    antigo = os.umask(0o022)
    try:
        with ServidorLocal(dados) as servidor:
            admin = servidor.admin()
            projeto = admin.criar_projeto('modo')
            admin.registrar_webhook(projeto['id'], 'http://127.0.0.1:1/gancho')
            banco = dados / 'contextia.sqlite3'
            for caminho in (banco, str(banco) + '-wal', str(banco) + '-shm'):
                assert _modo(caminho) == 0o600, caminho
        # Um banco de antes (0644) e corrigido na subida.
        for caminho in (banco, str(banco) + '-wal', str(banco) + '-shm'):
            if os.path.exists(caminho):
                os.chmod(caminho, 0o644)
        with ServidorLocal(dados):
            for caminho in (banco, str(banco) + '-wal', str(banco) + '-shm'):
                if os.path.exists(caminho):
                    assert _modo(caminho) == 0o600, caminho
    finally:
        os.umask(antigo)
