"""
Nenhum pedaço de segredo no que se imprime, e uma lista só de segredos (issue 28,
itens 4, 6 e 7).

O caso visto: um proxy que ecoa o cabeçalho `Authorization` DOBRADO (quebrado em
linhas, como um eco de depuração de 64 colunas) deixava 34 dos 47 caracteres da
chave na mensagem de erro: a máscara procurava o segredo inteiro. Aqui o servidor
é um http.server de verdade em 127.0.0.1 que dobra o eco em pedaços de tamanhos
variados, e cada chamada do cliente é conferida: nenhuma janela de 8 caracteres
de um segredo aparece no texto do erro nem na saída.
"""

from __future__ import annotations

import secrets

import pytest

from contextia_sync import segredos
from contextia_sync.intake import cliente, transporte
from contextia_sync.intake.admin import Admin
from tests.apoio.servidor import sem_o_contextia
from tests.apoio.hostil import Pedido, ServidorHostil

JANELA = segredos.TAMANHO_MINIMO_MASCARADO


def _pedacos(segredo: str) -> set[str]:
    return {segredo[i : i + JANELA] for i in range(len(segredo) - JANELA + 1)}


def _sem_pedaco(texto: str, *segredos_: str) -> None:
    for segredo in segredos_:
        vazados = sorted(p for p in _pedacos(segredo) if p in texto)
        assert not vazados, 'pedaços de %s... apareceram: %s\n%s' % (
            segredo[:4],
            vazados[:3],
            texto[:600],
        )


def _eco_dobrado(largura: int, status: int):
    """Responde `status` com o Authorization ecoado em linhas de `largura` caracteres."""

    def responder(pedido: Pedido):
        valor = pedido.cabecalhos.get('Authorization', '')
        dobrado = '\n  '.join(valor[i : i + largura] for i in range(0, len(valor), largura))
        corpo = (
            '<html><pre>echo de depuracao\nAuthorization: %s\n</pre></html>' % dobrado
        ).encode()
        return status, {'Content-Type': 'text/html'}, corpo

    return responder


@pytest.fixture
def sem_contextia(monkeypatch):
    sem_o_contextia(monkeypatch, 2)


def _erro(funcao) -> str:
    try:
        resultado = funcao()
    except transporte.ErroContextia as erro:
        return str(erro)
    return '\n'.join(resultado.erros)


@pytest.mark.parametrize('largura', [9, 13, 20, 33])
@pytest.mark.parametrize('status', [400, 500])
def test_eco_dobrado_do_authorization_nao_deixa_pedaco_da_chave(
    sem_contextia, monkeypatch, capfd, largura, status
):
    chave = 'ctx_' + secrets.token_urlsafe(32)  # 47 caracteres, como no achado
    outra = 'chave-propria-' + secrets.token_hex(16)  # sem a cara ctx_
    token = 'token-admin-' + secrets.token_hex(16)
    with ServidorHostil(_eco_dobrado(largura, status)) as hostil:
        monkeypatch.setenv('CONTEXTIA_URL', hostil.url)
        textos = [
            _erro(lambda: cliente.enviar_dataset('t', [{'ID': 1}], key='ID', api_key=chave)),
            _erro(lambda: cliente.enviar_dataset('t', [{'ID': 1}], key='ID', api_key=outra)),
            _erro(lambda: cliente.quem_sou(chave)),
            _erro(lambda: Admin(token=token, url=hostil.url).criar_projeto('297')),
        ]
        ecoados = ' '.join(p.cabecalhos.get('Authorization', '') for p in hostil.pedidos)
    assert chave in ecoados and outra in ecoados and token in ecoados
    saida, erro = capfd.readouterr()
    assert all(textos), textos
    _sem_pedaco('\n'.join(textos) + saida + erro, chave, outra, token)


def test_mascarar_pedacos_troca_so_o_que_esta_no_segredo():
    segredo = 'abcdefghijklmnopqrstuvwxyz'
    texto = 'antes abcdefghij\n  klmnopqrst\n  uvwxyz depois; abcdefg fica (7)'
    mascarado = segredos.mascarar_pedacos(texto, [segredo], lambda _t: '***')
    assert mascarado == 'antes ***\n  ***\n  uvwxyz depois; abcdefg fica (7)'
    assert segredos.mascarar_pedacos('nada aqui', [segredo], lambda _t: '***') == 'nada aqui'


def test_a_senha_das_urls_da_origem_e_mascarada_tambem_codificada(monkeypatch):
    monkeypatch.setenv('CONTEXTIA_ORIGEM', 'postgresql://leitor:S3nha%40Leitura!@db/erp')
    monkeypatch.setenv('CONTEXTIA_ORIGEM_DBA', 'postgres://dono:Dono-Da-Base-99@db/erp')
    texto = transporte.mascarar('erro: S3nha@Leitura! ... S3nha%40Leitura! ... Dono-Da-Base-99')
    _sem_pedaco(texto, 'S3nha@Leitura!', 'S3nha%40Leitura!', 'Dono-Da-Base-99')


def test_uma_lista_de_segredos_para_toda_regra():
    assert segredos.ORIGEM_DBA in segredos.SEGREDOS_DO_SDK
    assert segredos.ORIGEM_DBA in segredos.VARIAVEIS_DO_SDK
    assert set(segredos.URLS_COM_SENHA) <= set(segredos.VARIAVEIS_DO_SDK)
    ambiente = {
        'CONTEXTIA_ORIGEM_DBA': 'postgresql://dono:x@db/erp',
        'CONTEXTIA_ORIGEM': 'postgresql://leitor:y@db/erp',
        'PATH': '/bin',
    }
    filho = segredos.ambiente_sem_segredos(ambiente)
    assert 'CONTEXTIA_ORIGEM_DBA' not in filho and filho['CONTEXTIA_ORIGEM']
    senha = 'Dono-Da-Base-' + secrets.token_hex(4)
    ambiente['CONTEXTIA_ORIGEM_DBA'] = 'postgres://dono:%s@db/erp' % senha.replace('-', '%2D')
    assert segredos.segredo_repetido(senha, ambiente) == 'CONTEXTIA_ORIGEM_DBA'


@pytest.mark.parametrize(
    'nome', ['APP_WEBHOOK_SECRET', 'ERP_WEBHOOK_SECRET', 'PGPASSWORD', 'CONTEXTIA_ORIGEM_DBA']
)
def test_secret_env_so_com_o_prefixo_dedicado(nome):
    assert segredos.problema_do_secret_env(nome)
    assert segredos.problema_do_secret_env('CONTEXTIA_WEBHOOK_SEGREDO') is None
