"""
Fixtures do Contextia local: um servidor de verdade (subprocesso) em 127.0.0.1.

    contextia            um servidor por MODULO de teste, com falhas=True
                         (as falhas injetadas são limpas antes de cada teste
                         que usa `ambiente_contextia`)
    ambiente_contextia   o `contextia`, com CONTEXTIA_URL/CONTEXTIA_ADMIN_TOKEN
                         no ambiente do teste e CONTEXTIA_API_KEY/INTAKE_URL fora
    chave_contextia      fabrica: chave_contextia(escopo=None, nome=None) -> chave
                         de um projeto novo (escopo único se não for dado) no
                         `contextia`
    fabrica_contextia    fabrica de servidores exclusivos (ex.: com
                         max_registros_lote, ou para reiniciar sem afetar
                         ninguém): fabrica_contextia(**kwargs_do_ServidorLocal);
                         todos param no fim do teste

Servidor por módulo (e não por teste) porque subir um custa ~1 s e varios
ajudantes rodam a suíte ao mesmo tempo nesta máquina de 2 cores.
"""

import uuid

import pytest

from contextia_local.processo import ServidorLocal

VARIAVEIS = (
    'CONTEXTIA_URL',
    'CONTEXTIA_INTAKE_URL',
    'CONTEXTIA_API_KEY',
    'CONTEXTIA_ADMIN_TOKEN',
    'CONTEXTIA_CA_BUNDLE',
)


def sem_o_contextia(monkeypatch, prazo):
    """
    O teste fala com um servidor seu (hostil, em 127.0.0.1): nenhuma variável do
    Contextia do ambiente vale, e o prazo de retentativas fica em `prazo` segundos.
    """
    from contextia_sync.intake import transporte

    for nome in VARIAVEIS + ('CONTEXTIA_PRAZO_ENVIO',):
        monkeypatch.delenv(nome, raising=False)
    monkeypatch.setattr(transporte, 'PRAZO_RETENTATIVAS', prazo)


@pytest.fixture(scope='module')
def contextia(tmp_path_factory):
    servidor = ServidorLocal(tmp_path_factory.mktemp('contextia'), falhas=True)
    servidor.iniciar()
    yield servidor
    servidor.parar()


@pytest.fixture
def ambiente_contextia(contextia, monkeypatch):
    for nome in VARIAVEIS:
        monkeypatch.delenv(nome, raising=False)
    for nome, valor in contextia.ambiente().items():
        monkeypatch.setenv(nome, valor)
    if contextia.pid is None:
        contextia.iniciar()
    contextia.limpar_falhas()
    yield contextia
    if contextia.pid is not None:
        contextia.limpar_falhas()


@pytest.fixture
def chave_contextia(ambiente_contextia):
    def criar(escopo=None, nome=None):
        return ambiente_contextia.criar_projeto_com_chave(
            escopo or 'teste-' + uuid.uuid4().hex[:10], nome
        )

    return criar


@pytest.fixture
def fabrica_contextia(tmp_path_factory):
    criados = []

    def criar(**opcoes):
        opcoes.setdefault('dados', tmp_path_factory.mktemp('contextia-exclusivo'))
        servidor = ServidorLocal(**opcoes)
        criados.append(servidor)
        return servidor.iniciar()

    yield criar
    for servidor in criados:
        servidor.parar()
