"""
O cliente do Contextia contra servidores hostis de verdade em 127.0.0.1
(tests/apoio/hostil.py): um proxy que ecoa os cabeçalhos, um servidor que
redireciona, e endereços que o cliente tem de recusar antes de conectar.

Nenhum tráfego sai de 127.0.0.0/8: o host que não é loopback (`.invalid`, que
nunca resolve) só é usado com um proxy do ambiente apontado para um gravador
local -- se o cliente tentasse a conexão, o gravador a veria.
"""

import glob
import os
import re
import secrets
import subprocess
import sys

import pytest

from contextia_sync.erros import ErroConfiguracao
from contextia_sync.intake import cliente, transporte
from contextia_sync.intake.admin import Admin
from tests.apoio.servidor import sem_o_contextia
from tests.apoio.hostil import ServidorHostil, eco_html, intake_falso, redirecionar
from tests.apoio.ouvinte import Ouvinte
from tests.dados import erp as erp_teste

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Um `Bearer` seguido de qualquer coisa que nao seja a mascara.
BEARER_ABERTO = re.compile(r'Bearer(\s|%20|\+)(?!\*\*\*)\S')


@pytest.fixture
def sem_ambiente_do_contextia(monkeypatch):
    sem_o_contextia(monkeypatch, 3)


def _sem_segredo(texto, *segredos_):
    """Levanta AssertionError dizendo qual segredo apareceu em `texto`."""
    for segredo in segredos_:
        assert segredo not in texto, 'segredo %s... apareceu: %s' % (segredo[:6], texto[:400])
    assert not BEARER_ABERTO.search(texto), 'Bearer sem mascara: %s' % texto[:400]


# ================================================================ 1. o eco de segredos
def _chamadas(chave, token):
    """(rótulo, função) de cada chamada do cliente; a função devolve o texto do erro."""

    def enviar():
        resultado = cliente.enviar_dataset('titulos', [{'ID': 1}], key='ID', api_key=chave)
        assert resultado.lotes_erro == 1 and resultado.lotes_ok == 0
        return '\n'.join(resultado.erros)

    def levantar(funcao):
        def chamar():
            with pytest.raises(transporte.ErroContextia) as erro:
                funcao()
            return str(erro.value)

        return chamar

    return [
        ('enviar_dataset', enviar),
        ('completar', levantar(lambda: cliente.completar('titulos', 'sync-1', api_key=chave))),
        ('quem_sou', levantar(lambda: cliente.quem_sou(chave))),
        ('capacidades', levantar(lambda: cliente.capacidades(chave))),
        (
            'admin',
            levantar(
                lambda: Admin(token=token, url=os.environ['CONTEXTIA_URL']).criar_projeto('297')
            ),
        ),
    ]


@pytest.mark.parametrize('status', [200, 500])
@pytest.mark.parametrize(
    'chamada', ['enviar_dataset', 'completar', 'quem_sou', 'capacidades', 'admin']
)
def test_servidor_que_ecoa_os_cabecalhos_nao_poe_segredo_na_mensagem(
    sem_ambiente_do_contextia, monkeypatch, capfd, status, chamada
):
    # Chave que nao tem a cara `ctx_` (arquivo escrito a mao) e token qualquer:
    # a mascara nao pode depender do formato, so do que foi enviado.
    chave = 'chave-propria-' + secrets.token_hex(12)
    token = 'token-admin-' + secrets.token_hex(12)
    with ServidorHostil(eco_html(status)) as hostil:
        monkeypatch.setenv('CONTEXTIA_URL', hostil.url)
        texto = dict(_chamadas(chave, token))[chamada]()
        enviado = [p.cabecalhos.get('Authorization') for p in hostil.pedidos]
    # O servidor recebeu o segredo (e o ecoou); a mensagem nao o tem.
    assert any(chave in (a or '') or token in (a or '') for a in enviado)
    assert 'HTTP %d' % status in texto, texto
    saida, erro = capfd.readouterr()
    _sem_segredo(texto + saida + erro, chave, token)


def test_mascara_esconde_bearer_a_autorizacao_e_os_segredos_do_ambiente(monkeypatch):
    token = 'token-admin-' + secrets.token_hex(12)
    webhook = 'segredo-webhook-' + secrets.token_hex(12)
    monkeypatch.setenv('CONTEXTIA_ADMIN_TOKEN', token)
    monkeypatch.setenv('CONTEXTIA_WEBHOOK_SEGREDO', webhook)
    chave = 'ctx_' + secrets.token_urlsafe(24)
    texto = (
        'Authorization: Bearer %s | x-admin: %s | hook=%s | Bearer%%20qualquer-coisa'
        ' | Basic dXNlcjpzZW5oYQ== | chave %s' % (token, token, webhook, chave)
    )
    mascarado = transporte.mascarar(texto)
    _sem_segredo(mascarado, token, webhook, chave, 'qualquer-coisa', 'dXNlcjpzZW5oYQ')
    assert chave[:8] + '...' in mascarado  # o prefixo que o admin lista
    assert transporte.mascarar(mascarado) == mascarado  # mascarar de novo nao muda nada


@pytest.mark.lento
def test_ouvinte_com_proxy_que_ecoa_nao_grava_segredo_em_log_estado_ou_status(tmp_path):
    """
    O ouvinte de verdade, com um provisionamento (token de admin) e um envio
    (chaves de duas empresas), contra um proxy que ecoa os cabeçalhos: nem a
    saída, nem o --log, nem o estado, nem o status, nem as métricas tem segredo.
    """
    erp = erp_teste.erp_sqlite(tmp_path)
    token = 'token-admin-' + secrets.token_hex(12)
    chaves = {
        erp.escopos[0]: 'ctx_' + secrets.token_urlsafe(24),
        erp.escopos[1]: 'chave-propria-' + secrets.token_hex(12),
    }

    def status(pedido):
        # 200 HTML no intake e no admin (o proxy que responde por eles), 500 no resto.
        return 200 if pedido.caminho.startswith(('/api/v1/intake', '/api/v1/admin')) else 500

    with ServidorHostil(eco_html(status)) as hostil:

        class Destino:
            def ambiente(self):
                return {'CONTEXTIA_URL': hostil.url, 'CONTEXTIA_ADMIN_TOKEN': token}

        o = Ouvinte(tmp_path, erp, Destino(), lambda escopo: chaves[escopo])
        assert o.rodar('--once')[0] == 0  # a marca inicial (nada enviado)
        for escopo in erp.escopos:
            o.inserir(escopo, '2026-09-01 11:00:00')
        nova = str(erp.base + 7)  # empresa nova: o provisionar roda
        erp.executar(
            'INSERT INTO {EMPRESAS} VALUES (:e, :n, NULL, :a)', e=int(nova), n='Loja Nova', a='S'
        )
        log = tmp_path / 'ouvinte.log'
        codigo, saida = o.rodar('--once', '--log=' + str(log))
        enviados = ' '.join(p.cabecalhos.get('Authorization', '') for p in hostil.pedidos)
    erp.fechar()

    assert codigo == 1, saida
    # Os tres segredos foram ao proxy, que os devolveu no corpo.
    for segredo in list(chaves.values()) + [token]:
        assert segredo in enviados
    assert 'sem JSON' in saida, saida
    textos = {'saida': saida, 'log': log.read_text()}
    for caminho in glob.glob(os.path.join(o.estado_dir, '**', '*'), recursive=True):
        if os.path.isfile(caminho):
            with open(caminho, encoding='utf-8', errors='replace') as arquivo:
                textos[caminho] = arquivo.read()
    assert any(n.endswith('ouvinte-estado.json') for n in textos)
    assert any(n.endswith('ouvinte-status.txt') for n in textos)
    for nome, texto in textos.items():
        try:
            _sem_segredo(texto, token, *chaves.values())
        except AssertionError as erro:
            raise AssertionError('%s: %s' % (nome, erro)) from None


# ================================================================ 2. redirecionamento
@pytest.mark.parametrize('codigo', [301, 302, 307, 308])
def test_intake_nunca_segue_redirecionamento_e_o_lote_nao_conta(
    sem_ambiente_do_contextia, monkeypatch, codigo
):
    chave = 'ctx_' + secrets.token_urlsafe(24)
    with (
        ServidorHostil(intake_falso()) as destino,
        ServidorHostil(redirecionar(codigo, destino.url)) as origem,
    ):
        monkeypatch.setenv('CONTEXTIA_URL', origem.url)
        resultado = cliente.enviar_dataset(
            'titulos', [{'ID': i} for i in range(5)], key='ID', chunk=2, api_key=chave
        )
        assert destino.conexoes == 0 and destino.pedidos == []
        assert len(origem.pedidos) == 1  # o resto nem foi lido
    assert (resultado.lotes_ok, resultado.inserted, resultado.interrompido) == (0, 0, True)
    assert resultado.lotes_erro == 1
    texto = ' '.join(resultado.erros)
    assert 'respondeu HTTP %d mandando para %s/api/v1/intake' % (codigo, destino.url) in texto
    assert 'o SDK nunca segue redirecionamento' in texto


def test_complete_leitura_e_admin_nunca_seguem_redirecionamento(
    sem_ambiente_do_contextia, monkeypatch
):
    chave = 'ctx_' + secrets.token_urlsafe(24)
    with (
        ServidorHostil(intake_falso()) as destino,
        ServidorHostil(redirecionar(307, destino.url)) as origem,
    ):
        monkeypatch.setenv('CONTEXTIA_URL', origem.url)
        admin = Admin(token='token-admin-' + secrets.token_hex(8), url=origem.url)
        for chamar in (
            lambda: cliente.completar('titulos', 'sync-1', api_key=chave),
            lambda: cliente.quem_sou(chave),
            lambda: admin.criar_projeto('297'),
            lambda: admin.registrar_webhook(1, 'https://receptor.exemplo/x', segredo='s' * 32),
        ):
            with pytest.raises(
                transporte.ErroContextia, match='HTTP 307 mandando para %s' % destino.url
            ) as erro:
                chamar()
            assert type(erro.value).__name__ == 'ErroRedirecionamento'
        assert destino.conexoes == 0 and destino.pedidos == []
        assert len(origem.pedidos) == 4


# ================================================================ 3. o endereco
def _programa(nome, tmp_path, erp):
    """argv de uma das três CLIs, com o que cada uma precisa para chegar ao Contextia."""
    mapa = erp_teste.mapeamento(tmp_path)
    chaves = tmp_path / 'chaves.tsv'
    chaves.write_text('%s\tctx_%s\n' % (erp.escopos[0], secrets.token_urlsafe(24)))
    chaves.chmod(0o600)
    base = ['--mapping=' + mapa, '--source=generic']
    if nome == 'connector.py':
        return ['connector.py'] + base + ['--scope=' + erp.escopos[0]]
    if nome == 'provisionar.py':
        return ['provisionar.py'] + base + ['--arquivo=' + str(tmp_path / 'novo.tsv')]
    return (
        ['ouvinte.py']
        + base
        + [
            '--chaves=' + str(chaves),
            '--estado=' + str(tmp_path / 'estado'),
            '--varredura=nao',
            '--once',
        ]
    )


def _rodar(argv, **ambiente):
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith('CONTEXTIA_')
        and k.lower() not in ('http_proxy', 'https_proxy', 'no_proxy', 'all_proxy')
    }
    env.update(ambiente)
    feito = subprocess.run(
        [sys.executable] + argv,
        cwd=RAIZ,
        env=env,
        timeout=120,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    return feito.returncode, feito.stdout.decode('utf-8', 'replace')


@pytest.mark.parametrize('programa', ['connector.py', 'provisionar.py', 'ouvinte.py'])
def test_http_fora_de_loopback_e_recusado_antes_de_qualquer_conexao(tmp_path, programa):
    erp = erp_teste.erp_sqlite(tmp_path)
    # O proxy do ambiente e um gravador em 127.0.0.1: uma tentativa de conexao com
    # o host de fora chegaria nele (e nada sairia desta maquina).
    with ServidorHostil(intake_falso()) as proxy:
        codigo, saida = _rodar(
            _programa(programa, tmp_path, erp),
            CONTEXTIA_ORIGEM=erp.url,
            CONTEXTIA_URL='http://contextia.invalid:8080',
            CONTEXTIA_API_KEY='ctx_' + 'a' * 30,
            CONTEXTIA_ADMIN_TOKEN='token-admin-' + secrets.token_hex(8),
            HTTP_PROXY=proxy.url,
            http_proxy=proxy.url,
            HTTPS_PROXY=proxy.url,
            https_proxy=proxy.url,
        )
        assert proxy.conexoes == 0 and proxy.pedidos == [], saida
    erp.fechar()
    assert codigo == 2, saida
    assert (
        'CONTEXTIA_URL (http://contextia.invalid:8080) usa HTTP sem TLS fora desta máquina'
    ) in saida
    assert 'Use https://' in saida and 'Traceback' not in saida


def test_intake_em_outro_host_e_recusado(tmp_path, chave_contextia, ambiente_contextia):
    erp = erp_teste.erp_sqlite(tmp_path)
    escopo = erp.escopos[0]
    chave = chave_contextia(escopo)
    with ServidorHostil(intake_falso(), host='127.0.0.2') as outro:
        codigo, saida = _rodar(
            _programa('connector.py', tmp_path, erp),
            CONTEXTIA_ORIGEM=erp.url,
            CONTEXTIA_URL=ambiente_contextia.url,
            CONTEXTIA_API_KEY=chave,
            CONTEXTIA_INTAKE_URL=outro.url + '/api/v1/intake',
        )
        assert outro.conexoes == 0 and outro.pedidos == [], saida
    assert codigo == 2, saida
    assert (
        'CONTEXTIA_INTAKE_URL (%s) aponta para outro host que CONTEXTIA_URL (%s)'
        % (outro.url, ambiente_contextia.url)
    ) in saida
    assert cliente.listar_datasets(chave) == []
    # O mesmo host (maiusculas nao contam) com o caminho do intake explicito vale.
    mesmo = ambiente_contextia.url.replace('127.0.0.1', 'LocalHost')
    codigo, saida = _rodar(
        _programa('connector.py', tmp_path, erp),
        CONTEXTIA_ORIGEM=erp.url,
        CONTEXTIA_URL=ambiente_contextia.url.replace('127.0.0.1', 'localhost'),
        CONTEXTIA_API_KEY=chave,
        CONTEXTIA_INTAKE_URL=mesmo + '/api/v1/intake',
    )
    assert codigo == 0, saida
    assert {d['dataset'] for d in cliente.listar_datasets(chave)} == {'titulos_a_receber', 'status'}


@pytest.mark.parametrize(
    'url, trecho',
    [
        ('http://10.0.0.1:8080', 'usa HTTP sem TLS fora desta máquina'),
        ('http://contextia.invalid', 'usa HTTP sem TLS fora desta máquina'),
        ('ftp://contextia.invalid', 'não é um endereço http:// ou https:// com host'),
        ('contextia.invalid', 'não é um endereço http:// ou https:// com host'),
    ],
)
def test_endereco_inseguro_e_recusado_na_biblioteca(
    sem_ambiente_do_contextia, monkeypatch, url, trecho
):
    with ServidorHostil(intake_falso()) as proxy:
        for nome in ('HTTP_PROXY', 'http_proxy', 'HTTPS_PROXY', 'https_proxy'):
            monkeypatch.setenv(nome, proxy.url)
        monkeypatch.delenv('NO_PROXY', raising=False)
        monkeypatch.delenv('no_proxy', raising=False)
        monkeypatch.setenv('CONTEXTIA_URL', url)
        # ErroDestino: ErroContextia e ErroConfiguracao (as CLIs saem com 2).
        with pytest.raises(ErroConfiguracao, match=trecho):
            cliente.enviar_dataset('t', [{'ID': 1}], api_key='ctx_' + 'a' * 30)
        with pytest.raises(transporte.ErroContextia, match=trecho):
            Admin(token='x' * 20, url=url).listar_grupos()
        assert proxy.conexoes == 0 and proxy.pedidos == []
