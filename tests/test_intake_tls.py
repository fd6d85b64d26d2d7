"""TLS: verificação sempre ligada, com CA própria por CONTEXTIA_CA_BUNDLE."""

import http.server
import json
import shutil
import threading
import time

import pytest

from contextia_sync.intake import cliente, transporte
from tests.apoio.hostil import tls_autoassinado
from tests.apoio.log import coletar_log

pytestmark = pytest.mark.skipif(
    shutil.which('openssl') is None, reason='openssl não instalado: sem como gerar a CA de teste'
)


class _Capacidades(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - nome do http.server
        corpo = json.dumps({'remove': True, 'tls': True}).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(corpo)))
        self.end_headers()
        self.wfile.write(corpo)

    def log_message(self, *args):  # silencio no teste
        pass


@pytest.fixture
def servidor_https(tmp_path):
    contexto, certificado = tls_autoassinado(tmp_path)
    servidor = http.server.ThreadingHTTPServer(('127.0.0.1', 0), _Capacidades)
    servidor.socket = contexto.wrap_socket(servidor.socket, server_side=True)
    thread = threading.Thread(target=servidor.serve_forever, daemon=True)
    thread.start()
    yield 'https://127.0.0.1:%d' % servidor.server_address[1], certificado
    servidor.shutdown()
    servidor.server_close()


def test_certificado_desconhecido_e_recusado_e_a_ca_propria_resolve(servidor_https, monkeypatch):
    url, certificado = servidor_https
    monkeypatch.setenv('CONTEXTIA_URL', url)
    monkeypatch.delenv('CONTEXTIA_CA_BUNDLE', raising=False)
    inicio = time.monotonic()
    with pytest.raises(transporte.ErroContextia, match='CONTEXTIA_CA_BUNDLE'):
        cliente.capacidades()
    # Certificado que nao confere nao e re-tentado: a recusa e imediata.
    assert time.monotonic() - inicio < 3
    monkeypatch.setenv('CONTEXTIA_CA_BUNDLE', certificado)
    assert cliente.capacidades()['tls'] is True


def test_ca_bundle_inexistente_diz_o_que_corrigir(monkeypatch):
    monkeypatch.setenv('CONTEXTIA_URL', 'https://127.0.0.1:9')
    monkeypatch.setenv('CONTEXTIA_CA_BUNDLE', '/nao/existe.pem')
    with pytest.raises(transporte.ErroContextia, match='não existe'):
        cliente.capacidades()


@pytest.mark.parametrize('variavel', ['REQUESTS_CA_BUNDLE', 'CURL_CA_BUNDLE'])
def test_ca_do_ambiente_do_requests_nao_troca_as_cas_em_silencio(
    servidor_https, monkeypatch, variavel
):
    """
    Só CONTEXTIA_CA_BUNDLE troca as CAs: REQUESTS_CA_BUNDLE/CURL_CA_BUNDLE (de
    outro programa no mesmo ambiente) não fazem o cliente confiar num
    certificado que o bundle padrão não assina -- e um aviso diz que foram ignoradas.
    """
    url, certificado = servidor_https
    monkeypatch.setenv('CONTEXTIA_URL', url)
    monkeypatch.delenv('CONTEXTIA_CA_BUNDLE', raising=False)
    monkeypatch.setenv(variavel, certificado)
    monkeypatch.setattr(transporte, '_ca_avisada', set(), raising=False)
    # O logger do SDK não propaga ao root (logzero): o caplog só o via quando outro
    # teste do mesmo processo tinha ligado a propagação antes (falhava sozinho, -n 2).
    with coletar_log() as avisos:
        with pytest.raises(transporte.ErroContextia, match='certificado TLS'):
            cliente.capacidades()
    assert any('%s está definida e é ignorada pelo SDK' % variavel in a for a in avisos), avisos
    # O padrao e o bundle do certifi, dito e usado explicitamente.
    import certifi

    assert transporte.cas_confiaveis() == certifi.where()
    monkeypatch.setenv('CONTEXTIA_CA_BUNDLE', certificado)
    assert cliente.capacidades()['tls'] is True
