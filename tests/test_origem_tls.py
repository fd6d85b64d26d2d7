"""
TLS até a origem, em TODA conexão (issue 28, item 3): o engine do SQLAlchemy, as
conexões da `binlog` (a de controle e as do leitor do log) e a da `slot_logico`,
e o `--criar-slot` com CONTEXTIA_ORIGEM_DBA -- todas com o TLS lido da URL num
lugar só (contextia_sync/origem/url.py: `tls_da_url`).

Os servidores são de verdade e só aceitam TLS: um PostgreSQL privado com
`ssl=on` e pg_hba só de `hostssl` (o DBA `postgres` só com certificado de
cliente) e um MariaDB privado com `require_secure_transport=ON` (o leitor com
`REQUIRE X509`), ambos com um CA autoassinado feito aqui pelo openssl. Com o CA
certo cada caminho conecta (e a conexão é TLS); com um segundo CA, autoassinado,
cada caminho é recusado com uma mensagem em português que diz a variável e a
correção, nunca um traceback.
"""

import json
import os
import shutil
import ssl
import subprocess
import tempfile
import uuid
from dataclasses import dataclass

import pytest

from contextia_sync.captura.ao_vivo import datasets_ao_vivo
from contextia_sync.captura.binlog import CapturaBinlog, ErroBinlog
from contextia_sync.captura.slot_logico import CapturaSlotLogico, ErroSlot, _conectar
from contextia_sync.estado.estado import Estado
from contextia_sync.origem import ErroOrigem, generico
from tests.apoio.bancos import em_ci
from tests.apoio.mariadb_binlog import SENHA as SENHA_MARIADB
from tests.apoio.mariadb_binlog import MariadbBinlog
from tests.apoio.ouvinte import DATASET, Ouvinte
from tests.apoio.postgres_logico import SENHA as SENHA_POSTGRES
from tests.apoio.postgres_logico import PostgresLogico, binarios, criar_slot_pelo_ouvinte
from tests.dados import erp as erp_teste

# Nenhum teste daqui passa de ~2 s (os servidores sobem uma vez por módulo): sem `lento`.


# ------------------------------------------------------------------ os certificados
@dataclass
class Certificados:
    ca: str
    servidor: str
    chave_servidor: str
    cliente: str
    chave_cliente: str
    ca_errado: str  # outro CA autoassinado: não assinou nada daqui


_CONFIG = """[req]
distinguished_name = dn
prompt = no
[dn]
CN = {cn}
[ext]
{ext}
"""


def _openssl(pasta, *argv):
    subprocess.run(['openssl', *argv], cwd=pasta, check=True, capture_output=True, timeout=60)


def _config(pasta, nome, cn, ext):
    caminho = os.path.join(pasta, nome + '.cnf')
    with open(caminho, 'w') as arquivo:
        arquivo.write(_CONFIG.format(cn=cn, ext=ext))
    return caminho


def _ca(pasta, nome):
    config = _config(
        pasta,
        nome,
        'CA de teste %s' % nome,
        'basicConstraints = critical, CA:TRUE\n'
        'keyUsage = critical, keyCertSign, cRLSign\n'
        'subjectKeyIdentifier = hash',
    )
    _openssl(
        pasta,
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-days',
        '2',
        '-config',
        config,
        '-extensions',
        'ext',
        '-keyout',
        nome + '.key',
        '-out',
        nome + '.pem',
    )


def _assinado(pasta, nome, cn, ext):
    config = _config(pasta, nome, cn, ext + '\nauthorityKeyIdentifier = keyid')
    _openssl(
        pasta,
        'req',
        '-new',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-config',
        config,
        '-keyout',
        nome + '.key',
        '-out',
        nome + '.csr',
    )
    _openssl(
        pasta,
        'x509',
        '-req',
        '-in',
        nome + '.csr',
        '-CA',
        'ca.pem',
        '-CAkey',
        'ca.key',
        '-CAcreateserial',
        '-days',
        '2',
        '-extfile',
        config,
        '-extensions',
        'ext',
        '-out',
        nome + '.pem',
    )
    os.chmod(os.path.join(pasta, nome + '.key'), 0o600)


def gerar_certificados(pasta):
    """Um CA, o certificado do servidor (127.0.0.1), um de cliente e um segundo CA."""
    _ca(pasta, 'ca')
    _ca(pasta, 'ca-errado')
    _assinado(
        pasta,
        'servidor',
        '127.0.0.1',
        'basicConstraints = CA:FALSE\nkeyUsage = digitalSignature, keyEncipherment\n'
        'extendedKeyUsage = serverAuth\nsubjectAltName = IP:127.0.0.1, DNS:localhost',
    )
    _assinado(
        pasta,
        'cliente',
        'postgres',
        'basicConstraints = CA:FALSE\nkeyUsage = digitalSignature, keyEncipherment\n'
        'extendedKeyUsage = clientAuth',
    )
    em = lambda nome: os.path.join(pasta, nome)  # noqa: E731
    return Certificados(
        ca=em('ca.pem'),
        servidor=em('servidor.pem'),
        chave_servidor=em('servidor.key'),
        cliente=em('cliente.pem'),
        chave_cliente=em('cliente.key'),
        ca_errado=em('ca-errado.pem'),
    )


def _faltando(binarios_):
    faltam = [b for b in binarios_ if shutil.which(b) is None]
    if faltam:
        if em_ci():
            pytest.fail('CI=true e faltam %s para os servidores com TLS' % ', '.join(faltam))
        pytest.skip('sem %s: teste pulado (com CI=true seria falha)' % ', '.join(faltam))


@pytest.fixture(scope='module')
def certificados(tmp_path_factory):
    _faltando(['openssl'])
    pasta = tmp_path_factory.mktemp('tls')
    return gerar_certificados(str(pasta))


@pytest.fixture(scope='module')
def postgres_tls(certificados):
    bin_dir = binarios()
    if bin_dir is None:
        _faltando(['initdb'])
    _faltando(['runuser'])
    pasta = tempfile.mkdtemp(prefix='postgres-tls-')
    servidor = PostgresLogico(pasta, bin_dir, tls=certificados)
    try:
        yield servidor.iniciar()
    finally:
        servidor.parar()
        shutil.rmtree(pasta, ignore_errors=True)


@pytest.fixture(scope='module')
def mariadb_tls(certificados):
    _faltando(['mariadbd', 'mariadb-install-db'])
    pasta = tempfile.mkdtemp(prefix='mariadb-tls-')
    servidor = MariadbBinlog(pasta, tls=certificados)
    try:
        yield servidor.iniciar()
    finally:
        servidor.parar()
        shutil.rmtree(pasta, ignore_errors=True)


@pytest.fixture(autouse=True)
def _origem_solta():
    """O adaptador guarda a origem do módulo: cada teste começa e termina sem ela."""
    generico.fechar()
    yield
    generico.fechar()


# ------------------------------------------------------------------ ajudantes
def _mapa(tmp_path, estrategia, erp):  # noqa: ARG001 - o ERP já existe no banco
    caminho = erp_teste.mapeamento(tmp_path)
    with open(caminho, encoding='utf-8') as arquivo:
        mapa = json.load(arquivo)
    mapa['client'] = 'tls_' + uuid.uuid4().hex[:8]  # o slot é do cluster inteiro
    mapa['listener'] = {'strategy': estrategia}
    with open(caminho, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo)
    return caminho, mapa


def _alvo(mapa, estrategia):
    return next(a for a in datasets_ao_vivo(mapa, estrategia)[0] if a.nome == DATASET)


def _trocar_ca(url, certo, errado):
    assert certo in url
    return url.replace(certo, errado)


def _sem_traceback_e_sem_senha(texto, senha):
    assert 'Traceback' not in texto, texto
    assert senha not in texto, texto


def _ouvinte_once(tmp_path, erp, estrategia, contextia, chave_contextia):
    """O ouvinte.py de verdade, um ciclo: (código, saída)."""
    ouvinte = Ouvinte(tmp_path, erp, contextia, chave_contextia)
    with open(ouvinte.mapa, encoding='utf-8') as arquivo:
        mapa = json.load(arquivo)
    mapa['client'] = 'tls_' + uuid.uuid4().hex[:8]
    mapa['listener'] = {'strategy': estrategia}
    with open(ouvinte.mapa, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo)
    return ouvinte.rodar('--once', timeout=90)


# ------------------------------------------------------------------ PostgreSQL
@pytest.mark.postgres
def test_postgres_so_aceita_tls_e_a_origem_sem_tls_diz_o_porque(postgres_tls):
    """O servidor do teste recusa conexão sem TLS (o pg_hba só tem hostssl)."""
    banco = postgres_tls.banco_de_teste()
    sem_tls = banco.url_origem.split('?')[0] + '?sslmode=disable'
    with pytest.raises(ErroOrigem) as recusa:
        generico.Origem(sem_tls).conectar()
    texto = str(recusa.value)
    assert 'no encryption' in texto and 'recusada no TLS' in texto, texto
    assert 'CONTEXTIA_ORIGEM' in texto and 'sslrootcert' in texto, texto
    _sem_traceback_e_sem_senha(texto, SENHA_POSTGRES)


@pytest.mark.postgres
def test_postgres_com_o_ca_certo_origem_slot_e_dba_conectam_por_tls(
    tmp_path, postgres_tls, monkeypatch
):
    banco = postgres_tls.banco_de_teste()
    erp = erp_teste.Erp(banco, titulos_por_empresa=(2, 1))
    erp.executar('ALTER TABLE {TITULOS} REPLICA IDENTITY FULL')
    caminho, mapa = _mapa(tmp_path, 'slot_logico', erp)
    # (c) o --criar-slot pelo DBA, que o servidor só aceita com certificado de cliente.
    codigo, saida, erros = criar_slot_pelo_ouvinte(
        tmp_path, caminho, banco.url_origem, banco.url_admin
    )
    assert codigo == 0, saida + erros
    assert 'slot contextia_%s criado' % mapa['client'] in saida, saida

    # (a) o engine da origem: conecta, e a sessão é TLS.
    origem = generico.Origem(banco.url_origem).conectar()
    with origem.sessao() as conn:
        assert (
            conn.exec_driver_sql(
                'SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()'
            ).scalar()
            is True
        )
    origem.fechar()
    # (a) a conexão da captura `slot_logico` (a mesma função que o comando do DBA usa).
    with _conectar(banco.url_origem) as conn:
        assert (
            conn.execute('SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()').fetchone()[0]
            is True
        )

    # E a captura inteira: o slot lido, a linha relida pela origem.
    monkeypatch.setenv('CONTEXTIA_ORIGEM', banco.url_origem)
    (tmp_path / 'estado').mkdir(exist_ok=True)
    captura = CapturaSlotLogico(generico, Estado(str(tmp_path / 'estado' / 'e.json')), 0, 1000)
    captura.usar_mapa(mapa)
    alvo = _alvo(mapa, 'slot_logico')
    assert captura.conferir([alvo]) == []
    captura.ler(alvo)  # a primeira: a posição
    novo = erp.base * 1000 + 901
    erp.executar(
        "INSERT INTO {TITULOS} VALUES (:i, :e, 'TLS', 1, '2026-10-01', NULL)",
        i=novo,
        e=int(erp.escopos[0]),
    )
    captura._bombeado = 0.0
    leitura = captura.ler(alvo)
    assert novo in {linha['ID'] for linha in leitura.upserts}, leitura


@pytest.mark.postgres
def test_postgres_com_o_ca_errado_cada_caminho_recusa_em_portugues(
    tmp_path, postgres_tls, certificados, monkeypatch
):
    banco = postgres_tls.banco_de_teste()
    erp = erp_teste.Erp(banco, titulos_por_empresa=(1, 1))
    caminho, mapa = _mapa(tmp_path, 'slot_logico', erp)
    origem = _trocar_ca(banco.url_origem, certificados.ca, certificados.ca_errado)
    dba = _trocar_ca(banco.url_admin, certificados.ca, certificados.ca_errado)

    # O engine da origem.
    with pytest.raises(ErroOrigem) as recusa:
        generico.Origem(origem).conectar()
    texto = str(recusa.value)
    assert 'certificate verify failed' in texto and 'recusada no TLS' in texto, texto
    assert 'CONTEXTIA_ORIGEM' in texto and 'sslrootcert' in texto, texto
    _sem_traceback_e_sem_senha(texto, SENHA_POSTGRES)

    # A captura `slot_logico`: a conferência da subida é erro de configuração (saída 2).
    monkeypatch.setenv('CONTEXTIA_ORIGEM', origem)
    (tmp_path / 'estado').mkdir(exist_ok=True)
    captura = CapturaSlotLogico(generico, Estado(str(tmp_path / 'estado' / 'e.json')), 0, 1000)
    captura.usar_mapa(mapa)
    with pytest.raises(ErroSlot) as recusa:
        captura.conferir([_alvo(mapa, 'slot_logico')])
    texto = str(recusa.value)
    assert 'recusada no TLS' in texto and 'CONTEXTIA_ORIGEM (' in texto, texto
    _sem_traceback_e_sem_senha(texto, SENHA_POSTGRES)

    # O --criar-slot pelo DBA: uma linha, a variável certa, saída 2, nada criado.
    codigo, saida, erros = criar_slot_pelo_ouvinte(tmp_path, caminho, origem, dba)
    assert codigo == 2, saida + erros
    assert erros.count('\n') == 1 and 'CONTEXTIA_ORIGEM_DBA' in erros, erros
    assert 'certificate verify failed' in erros and 'recusada no TLS' in erros, erros
    _sem_traceback_e_sem_senha(saida + erros, SENHA_POSTGRES)
    assert banco.slots() == {}


@pytest.mark.postgres
def test_postgres_ca_errado_no_ouvinte_sai_com_2_e_uma_mensagem(
    tmp_path, postgres_tls, certificados, ambiente_contextia, chave_contextia
):
    """O serviço de verdade: a captura recusada no TLS na subida é saída 2, sem traceback."""
    banco = postgres_tls.banco_de_teste()
    banco.url_origem = _trocar_ca(banco.url_origem, certificados.ca, certificados.ca_errado)
    erp = erp_teste.Erp(banco, titulos_por_empresa=(1, 1))
    codigo, saida = _ouvinte_once(tmp_path, erp, 'slot_logico', ambiente_contextia, chave_contextia)
    assert codigo == 2, saida
    assert 'recusada no TLS' in saida and 'sslrootcert' in saida, saida
    _sem_traceback_e_sem_senha(saida, SENHA_POSTGRES)


# ------------------------------------------------------------------ MariaDB
@pytest.mark.mariadb
def test_mariadb_so_aceita_tls(mariadb_tls):
    """
    O servidor do teste recusa TCP sem TLS (require_secure_transport). O MariaDB
    diz isso como "Access denied" (1045), o mesmo texto da senha errada: por isso
    a origem não o chama de recusa de TLS.
    """
    import pymysql

    banco = mariadb_tls.banco_de_teste()
    sem_tls = banco.url_admin.split('?')[0] + '?ssl_disabled=true'
    with pytest.raises(ErroOrigem, match='não conectou a origem.*1045'):
        generico.Origem(sem_tls).conectar()
    sem_verificar = ssl.create_default_context()
    sem_verificar.check_hostname = False
    sem_verificar.verify_mode = ssl.CERT_NONE
    pymysql.connect(
        host='127.0.0.1', port=mariadb_tls.porta, user='root', ssl=sem_verificar
    ).close()


@pytest.mark.mariadb
def test_mariadb_com_o_ca_certo_origem_e_as_conexoes_do_binlog_usam_tls(
    tmp_path, mariadb_tls, monkeypatch
):
    banco = mariadb_tls.banco_de_teste()
    erp = erp_teste.Erp(banco, titulos_por_empresa=(2, 1))
    _caminho, mapa = _mapa(tmp_path, 'binlog', erp)

    # (a) o engine da origem (o leitor é REQUIRE X509: o certificado de cliente foi junto).
    origem = generico.Origem(banco.url_origem).conectar()
    with origem.sessao() as conn:
        cifra = conn.exec_driver_sql("SHOW SESSION STATUS LIKE 'Ssl_cipher'").fetchone()[1]
    assert cifra, 'a sessão da origem não é TLS'
    origem.fechar()

    # (a) a conexão de controle e as duas do leitor do log (BinLogStreamReader).
    monkeypatch.setenv('CONTEXTIA_ORIGEM', banco.url_origem)
    (tmp_path / 'estado').mkdir(exist_ok=True)
    captura = CapturaBinlog(generico, Estado(str(tmp_path / 'estado' / 'e.json')), 0, 1000)
    alvo = _alvo(mapa, 'binlog')
    assert captura.conferir([alvo]) == []
    assert captura._sql("SHOW SESSION STATUS LIKE 'Ssl_cipher'")[0][1]
    captura.ler(alvo)  # a primeira: a posição
    novo = erp.base * 1000 + 901
    erp.executar(
        "INSERT INTO {TITULOS} VALUES (:i, :e, 'TLS', 1, '2026-10-01', NULL)",
        i=novo,
        e=int(erp.escopos[0]),
    )
    captura._bombeado = 0.0
    leitura = captura.ler(alvo)
    # A linha veio do log: o leitor conectou (o servidor só aceita TLS e o leitor
    # só entra com o certificado de cliente da URL).
    assert novo in {linha['ID'] for linha in leitura.upserts}, leitura
    captura._fechar_leitor()


@pytest.mark.mariadb
def test_mariadb_com_o_ca_errado_cada_caminho_recusa_em_portugues(
    tmp_path, mariadb_tls, certificados, monkeypatch
):
    banco = mariadb_tls.banco_de_teste()
    erp = erp_teste.Erp(banco, titulos_por_empresa=(1, 1))
    _caminho, mapa = _mapa(tmp_path, 'binlog', erp)
    errada = _trocar_ca(banco.url_origem, certificados.ca, certificados.ca_errado)

    with pytest.raises(ErroOrigem) as recusa:
        generico.Origem(errada).conectar()
    texto = str(recusa.value)
    assert 'CERTIFICATE_VERIFY_FAILED' in texto and 'recusada no TLS' in texto, texto
    assert 'ssl_ca' in texto, texto
    _sem_traceback_e_sem_senha(texto, SENHA_MARIADB)

    monkeypatch.setenv('CONTEXTIA_ORIGEM', errada)
    (tmp_path / 'estado').mkdir(exist_ok=True)
    captura = CapturaBinlog(generico, Estado(str(tmp_path / 'estado' / 'e.json')), 0, 1000)
    alvo = _alvo(mapa, 'binlog')
    # A conexão de controle, na conferência da subida: configuração (saída 2).
    with pytest.raises(ErroBinlog) as recusa:
        captura.conferir([alvo])
    texto = str(recusa.value)
    assert 'recusada no TLS' in texto and 'CONTEXTIA_ORIGEM' in texto, texto
    _sem_traceback_e_sem_senha(texto, SENHA_MARIADB)
    # O leitor do log (com uma posição já guardada, ele é o primeiro a conectar).
    captura._posicao.gtid = str(mariadb_tls.admin('SELECT @@gtid_binlog_pos')[0][0])
    captura._bombeado = 0.0
    with pytest.raises(ErroBinlog) as recusa:
        captura.ler(alvo)
    assert 'recusada no TLS' in str(recusa.value), recusa.value
    _sem_traceback_e_sem_senha(str(recusa.value), SENHA_MARIADB)


@pytest.mark.mariadb
def test_mariadb_ca_errado_no_ouvinte_sai_com_2_e_uma_mensagem(
    tmp_path, mariadb_tls, certificados, ambiente_contextia, chave_contextia
):
    banco = mariadb_tls.banco_de_teste()
    banco.url_origem = _trocar_ca(banco.url_origem, certificados.ca, certificados.ca_errado)
    erp = erp_teste.Erp(banco, titulos_por_empresa=(1, 1))
    codigo, saida = _ouvinte_once(tmp_path, erp, 'binlog', ambiente_contextia, chave_contextia)
    assert codigo == 2, saida
    assert 'recusada no TLS' in saida and 'ssl_ca' in saida, saida
    _sem_traceback_e_sem_senha(saida, SENHA_MARIADB)


# ------------------------------------------------------------------ a leitura da URL (sem servidor)
@pytest.mark.parametrize(
    'query, modo',
    [
        ('', 'preferido'),
        ('?ssl_ca={ca}', 'verificar_nome'),  # como o SQLAlchemy: cadeia E nome
        ('?ssl_ca={ca}&ssl_check_hostname=false', 'verificar_ca'),
        ('?ssl_ca={ca}&ssl_verify_identity=false', 'verificar_ca'),
        ('?ssl_verify_cert=true', 'verificar_ca'),
        ('?ssl_verify_cert=false', 'exigido'),
        ('?ssl_mode=VERIFY_IDENTITY', 'verificar_nome'),
        ('?ssl_mode=required', 'exigido'),
        ('?ssl_disabled=true', 'desligado'),
    ],
)
def test_o_modo_do_mysql_e_um_so_para_todo_driver(certificados, query, modo):
    from contextia_sync.origem.url import (
        argumentos_mysqldb,
        argumentos_pymysql,
        ler_url,
        tls_da_url,
    )

    tls = tls_da_url(
        ler_url('mysql+pymysql://l:s@127.0.0.1/erp' + query.format(ca=certificados.ca))
    )
    assert tls.modo == modo
    pymysql = argumentos_pymysql(tls)
    mysqldb = argumentos_mysqldb(tls)
    if modo == 'preferido':
        assert pymysql == {} and mysqldb == {}
    elif modo == 'desligado':
        assert pymysql == {'ssl_disabled': True} and mysqldb == {'ssl_mode': 'DISABLED'}
    else:
        contexto = pymysql['ssl']
        assert contexto.check_hostname is (modo == 'verificar_nome')
        assert (contexto.verify_mode == ssl.CERT_REQUIRED) is (modo != 'exigido')
        assert (
            mysqldb['ssl_mode']
            == {
                'verificar_nome': 'VERIFY_IDENTITY',
                'verificar_ca': 'VERIFY_CA',
                'exigido': 'REQUIRED',
            }[modo]
        )


@pytest.mark.parametrize(
    'url, variavel, trecho',
    [
        (
            'mysql+pymysql://l:{senha}@h/erp?sslrootcert={ca}',
            'CONTEXTIA_ORIGEM',
            'sslrootcert, parâmetro de TLS de outro banco',
        ),
        (
            'postgresql://l:{senha}@h/erp?ssl_ca={ca}',
            'CONTEXTIA_ORIGEM_DBA',
            'ssl_ca, parâmetro de TLS de outro banco',
        ),
        ('postgresql://l:{senha}@h/erp?sslmode=verificar', 'CONTEXTIA_ORIGEM', 'sslmode=verificar'),
        (
            'postgresql://l:{senha}@h/erp?sslmode=verify-ca&sslrootcert=/nao/existe.pem',
            'CONTEXTIA_ORIGEM',
            'sslrootcert=/nao/existe.pem não é arquivo',
        ),
        (
            'mysql+pymysql://l:{senha}@h/erp?ssl_verify_cert=talvez',
            'CONTEXTIA_ORIGEM',
            'ssl_verify_cert=talvez: use true ou false',
        ),
        (
            'mysql+pymysql://l:{senha}@h/erp?ssl_disabled=true&ssl_ca={ca}',
            'CONTEXTIA_ORIGEM',
            'desliga o TLS e pede ssl_ca',
        ),
    ],
)
def test_tls_mal_escrito_e_recusado_antes_de_conectar(certificados, url, variavel, trecho):
    from contextia_sync.origem import ErroConfiguracaoOrigem
    from contextia_sync.origem.url import ler_url, tls_da_url

    senha = 'segredo-da-url'
    with pytest.raises(ErroConfiguracaoOrigem) as recusa:
        tls_da_url(ler_url(url.format(senha=senha, ca=certificados.ca), variavel), variavel)
    texto = str(recusa.value)
    assert texto.startswith(variavel + ' ') or texto.startswith(variavel + ':'), texto
    assert trecho in texto and senha not in texto, texto


def test_o_engine_recebe_o_tls_pelo_connect_args_e_nao_pela_query(certificados):
    """A query sem os parâmetros de TLS: nenhum driver os lê do jeito dele por trás."""
    from contextia_sync.origem.url import argumentos_do_engine, ler_url, sem_tls, tls_da_url

    url = ler_url(
        'mysql+pymysql://l:s@127.0.0.1/erp?charset=utf8mb4&ssl_ca=%s'
        '&ssl_check_hostname=false' % certificados.ca
    )
    assert dict(sem_tls(url).query) == {'charset': 'utf8mb4'}
    argumentos = argumentos_do_engine(url, tls_da_url(url))
    assert argumentos is not None and argumentos['ssl'].check_hostname is False
    url = ler_url(
        'postgres://l:s@127.0.0.1/erp?sslmode=verify-full&sslrootcert=%s'
        '&application_name=x' % certificados.ca
    )
    assert url.drivername == 'postgresql'
    assert dict(sem_tls(url).query) == {'application_name': 'x'}
    assert argumentos_do_engine(url, tls_da_url(url)) == {
        'sslmode': 'verify-full',
        'sslrootcert': certificados.ca,
    }


@pytest.mark.mariadb
def test_mariadb_pelo_mysqlclient_o_mesmo_tls(mariadb_tls, certificados):
    """`mysql+mysqldb://` recebe o mesmo TLS (o `ssl` e o `ssl_mode` do mysqlclient)."""
    pytest.importorskip('MySQLdb', reason='mysqlclient (extra [mysqlclient]) não instalado')
    banco = mariadb_tls.banco_de_teste()
    url = banco.url_origem.replace('mysql+pymysql://', 'mysql+mysqldb://', 1)
    origem = generico.Origem(url).conectar()
    with origem.sessao() as conn:
        assert conn.exec_driver_sql("SHOW SESSION STATUS LIKE 'Ssl_cipher'").fetchone()[1]
    origem.fechar()
    with pytest.raises(ErroOrigem, match='recusada no TLS'):
        generico.Origem(_trocar_ca(url, certificados.ca, certificados.ca_errado)).conectar()
