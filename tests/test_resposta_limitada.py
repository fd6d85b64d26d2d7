"""
Issue 28, item 2: toda resposta que o SDK lê tem limite de bytes e prazo.

Um intake hostil de verdade em 127.0.0.1 (tests/apoio/hostil.py) responde ao
cliente (a) 200 com um corpo que nunca termina, (b) um byte a cada 0,5 s para
sempre, (c) um JSON válido de 2 MiB. Para cada um: o envio falha como falha
PASSAGEIRA (o caminho de um timeout: re-tentado dentro do prazo, nada contado
como entregue) dentro do prazo mais uma folga, o log nomeia a causa e o
caminho, e a memória do cliente (medida num processo filho, ru_maxrss) fica
limitada. Sem o limite, (a) crescia o cliente até o teto de memória, (b)
segurava o envio para sempre e (c) passava por resposta boa.

Os filhos rodam com RLIMIT_AS e timeout: o código sem a defesa morre ali,
em vez de levar a memória da máquina.
"""

import json
import os
import resource
import shutil
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from contextia_sync import padroes
from contextia_sync.intake import cliente, transporte
from contextia_sync.intake.admin import Admin
from tests.apoio.servidor import sem_o_contextia
from tests.apoio.hostil import (
    Pedido,
    ServidorHostil,
    corpo_grande,
    corpo_sem_fim,
    gotejar,
    intake_falso,
    tls_autoassinado,
)
from tests.dados import erp as erp_teste

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 1024 * 1024
PRAZO = 3  # CONTEXTIA_PRAZO_ENVIO dos testes, em segundos
FOLGA = 2.0  # o que passa do prazo: processo, log, fechar a conexão
LIMITE = padroes.RESPOSTA_MAXIMA_BYTES
MAIOR = 'resposta maior que %d bytes' % LIMITE
FORA_DO_PRAZO = 'prazo de %d s' % PRAZO
# Teto de memória virtual dos filhos: o cliente sem limite morre aqui, não a máquina.
TETO_DO_FILHO = 2048 * MIB
CHAVE = 'ctx_teste-resposta-limitada-0123456789'

# caso -> (o intake hostil, a causa que o log tem de nomear)
CASOS = {
    'sem_fim': (corpo_sem_fim, MAIOR),
    'gotejando_chunked': (lambda: gotejar(0.5), FORA_DO_PRAZO),
    'gotejando_ate_fechar': (lambda: gotejar(0.5, chunked=False), FORA_DO_PRAZO),
    'grande_com_tamanho': (lambda: corpo_grande(2 * MIB), MAIOR),
    'grande_chunked': (lambda: corpo_grande(2 * MIB, declarado=False), MAIOR),
}


def _aquecer_ou(hostil):
    """O intake hostil, menos em /aquecer (o pedido que o filho faz antes de medir)."""
    bom = intake_falso()

    def responder(pedido: Pedido):
        return bom(pedido) if pedido.caminho.startswith('/aquecer') else hostil(pedido)

    return responder


def _com_teto_de_memoria():
    resource.setrlimit(resource.RLIMIT_AS, (TETO_DO_FILHO, TETO_DO_FILHO))


def _ambiente(url, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith('CONTEXTIA_')}
    env.update(CONTEXTIA_URL=url, CONTEXTIA_PRAZO_ENVIO=str(PRAZO), PYTHONPATH=RAIZ)
    env.update(extra)
    return env


# O cliente num processo só dele: o ru_maxrss é o dele, antes e depois do envio.
FILHO = textwrap.dedent("""
    import json, os, resource, sys, time
    from contextia_sync.intake import cliente, transporte

    def pico():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB no Linux

    url = os.environ['CONTEXTIA_URL']
    # Aquecido: requests importado, pool e buffers do primeiro pedido fora da conta.
    transporte.pedir('GET', url + '/aquecer', autorizacao='k', contexto='aquecer')
    antes = pico()
    inicio = time.monotonic()
    resultado = cliente.enviar_dataset('titulos', [{'ID': 1}], key='ID',
                                       api_key=os.environ['CHAVE'])
    print(json.dumps({'segundos': time.monotonic() - inicio, 'antes': antes,
                      'depois': pico(), 'lotes_ok': resultado.lotes_ok,
                      'lotes_erro': resultado.lotes_erro, 'erros': resultado.erros}))
""")


@pytest.mark.parametrize('caso', list(CASOS))
def test_envio_contra_resposta_hostil_falha_passageira_no_prazo_com_memoria_limitada(caso):
    hostil, causa = CASOS[caso]
    with ServidorHostil(_aquecer_ou(hostil())) as servidor:
        feito = subprocess.run(
            [sys.executable, '-c', FILHO],
            cwd=RAIZ,
            env=_ambiente(servidor.url, CHAVE=CHAVE),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=PRAZO + 20,
            preexec_fn=_com_teto_de_memoria,
        )
        posts = [p for p in servidor.pedidos if p.metodo == 'POST']
        enviados = servidor.enviados
    log = feito.stderr.decode('utf-8', 'replace')
    assert feito.returncode == 0, log[-2000:]
    medido = json.loads(feito.stdout)
    # Falhou, como falha: nada contado como entregue, a causa e o caminho ditos.
    assert (medido['lotes_ok'], medido['lotes_erro']) == (0, 1), medido
    erros = '\n'.join(medido['erros'])
    assert causa in erros and 'POST /api/v1/intake' in erros, erros
    assert 'prazo de retentativas' in erros, erros  # o fim de um pedido passageiro
    assert causa in log and 'POST /api/v1/intake' in log, log[-2000:]
    assert 'envio interrompido' in log, log[-2000:]  # o servidor, não o lote
    # Dentro do prazo da chamada, mais a folga.
    assert medido['segundos'] <= PRAZO + FOLGA, medido
    # A memória: o pico do filho mal se mexe.
    crescimento = medido['depois'] - medido['antes']
    assert crescimento < 50 * MIB, 'o cliente cresceu %.1f MiB' % (crescimento / MIB)
    if causa == MAIOR:
        # Passageira como um timeout: re-tentada dentro do prazo.
        assert len(posts) >= 2, len(posts)
    if caso == 'sem_fim':
        # O servidor mandaria para sempre; o cliente parou no limite a cada tentativa.
        assert enviados > LIMITE, enviados


@pytest.fixture
def ambiente_hostil(monkeypatch):
    sem_o_contextia(monkeypatch, PRAZO)

    def subir(responder):
        servidor = ServidorHostil(responder)
        monkeypatch.setenv('CONTEXTIA_URL', servidor.url)
        return servidor

    return subir


def test_resposta_grande_e_re_tentada_e_a_seguinte_entrega(ambiente_hostil):
    """A primeira resposta passa do limite, a segunda é a do intake: o lote é entregue."""
    grande, bom = corpo_grande(2 * MIB, declarado=False), intake_falso()
    primeira = [True]

    def responder(pedido):
        if primeira:
            primeira.clear()
            return grande(pedido)
        return bom(pedido)

    with ambiente_hostil(responder) as servidor:
        resultado = cliente.enviar_dataset(
            'titulos', [{'ID': 1}, {'ID': 2}], key='ID', api_key=CHAVE
        )
        posts = [p for p in servidor.pedidos if p.metodo == 'POST']
    assert (resultado.lotes_ok, resultado.lotes_erro) == (1, 0), resultado.erros
    assert len(posts) == 2  # o mesmo lote, de novo, como depois de um timeout
    assert posts[0].corpo == posts[1].corpo


def _chamadas():
    """(rótulo, função) de cada leitura de resposta do SDK; a função levanta ou devolve erros."""

    def enviar():
        resultado = cliente.enviar_dataset('titulos', [{'ID': 1}], key='ID', api_key=CHAVE)
        assert (resultado.lotes_ok, resultado.lotes_erro) == (0, 1)
        raise transporte.ErroIndisponivel('\n'.join(resultado.erros))

    def admin():
        return Admin(token='token-admin-teste', url=os.environ['CONTEXTIA_URL'])

    return {
        'enviar_dataset': (enviar, 'POST /api/v1/intake'),
        'completar': (
            lambda: cliente.completar('titulos', 'sync-1', api_key=CHAVE),
            'POST /api/v1/intake/complete',
        ),
        'quem_sou': (lambda: cliente.quem_sou(CHAVE), 'GET /api/v1/projeto'),
        'capacidades': (lambda: cliente.capacidades(CHAVE), 'GET /api/v1/capacidades'),
        'listar_datasets': (lambda: cliente.listar_datasets(CHAVE), 'GET /api/v1/datasets'),
        'admin_criar_projeto': (
            lambda: admin().criar_projeto('297'),
            'POST /api/v1/admin/projetos',
        ),
        'admin_listar_grupos': (lambda: admin().listar_grupos(), 'GET /api/v1/admin/grupos'),
    }


@pytest.mark.parametrize('chamada', list(_chamadas()))
def test_toda_leitura_de_resposta_tem_o_limite(ambiente_hostil, chamada):
    """
    Cada caminho que lê uma resposta (intake, complete, quem_sou, capacidades,
    datasets, admin) recusa o JSON VÁLIDO de 2 MiB -- lido inteiro, passaria --
    como falha passageira (ErroIndisponivel), nomeando limite e caminho.
    """
    funcao, caminho = _chamadas()[chamada]
    with ambiente_hostil(corpo_grande(2 * MIB, declarado=False)) as servidor:
        inicio = time.monotonic()
        with pytest.raises(transporte.ErroIndisponivel) as erro:
            funcao()
        segundos = time.monotonic() - inicio
        tentativas = len(servidor.pedidos)
    assert '%s (%s)' % (MAIOR, caminho) in str(erro.value), str(erro.value)
    assert tentativas >= 2 and segundos <= PRAZO + FOLGA, (tentativas, segundos)


def _falha_passageira(funcao):
    """
    (mensagem, segundos) do ErroIndisponivel que `funcao()` levanta. Numa
    thread: sem o prazo do corpo, a chamada nunca voltaria e o teste ficaria preso.
    """
    desfecho: list[BaseException] = []

    def chamar():
        try:
            funcao()
        except BaseException as erro:  # noqa: BLE001 - o teste confere qual
            desfecho.append(erro)

    inicio = time.monotonic()
    chamada = threading.Thread(target=chamar, daemon=True)
    chamada.start()
    chamada.join(PRAZO + FOLGA + 5)
    segundos = time.monotonic() - inicio
    assert not chamada.is_alive(), 'a chamada ainda lia o corpo depois de %.0f s' % segundos
    assert len(desfecho) == 1 and isinstance(desfecho[0], transporte.ErroIndisponivel), desfecho
    return str(desfecho[0]), segundos


def test_corpo_que_pinga_e_cortado_no_prazo_mesmo_com_a_leitura_parada(ambiente_hostil):
    """O prazo vale até o último byte: a vigia corta o socket com a leitura em curso."""
    with ambiente_hostil(gotejar(0.5)):
        erro, segundos = _falha_passageira(lambda: cliente.quem_sou(CHAVE))
    assert (
        'a resposta de GET /api/v1/projeto não terminou de chegar no %s' % FORA_DO_PRAZO in erro
    ), erro
    assert PRAZO - 0.5 <= segundos <= PRAZO + FOLGA, segundos


@pytest.mark.skipif(shutil.which('openssl') is None, reason='openssl não instalado')
@pytest.mark.parametrize(
    'hostil, causa',
    [(gotejar, FORA_DO_PRAZO), (lambda: corpo_grande(2 * MIB, declarado=False), MAIOR)],
)
def test_sob_tls_o_corte_e_o_limite_valem_igual(
    ambiente_hostil, monkeypatch, tmp_path, hostil, causa
):
    """O corte da vigia num SSLSocket (o socket por baixo, sem soltar o TLS da leitura)."""
    contexto, certificado = tls_autoassinado(tmp_path)
    monkeypatch.setenv('CONTEXTIA_CA_BUNDLE', certificado)
    with ServidorHostil(hostil(), tls=contexto) as servidor:
        monkeypatch.setenv('CONTEXTIA_URL', servidor.url)
        erro, segundos = _falha_passageira(lambda: cliente.capacidades(CHAVE))
    assert causa in erro and 'GET /api/v1/capacidades' in erro, erro
    assert segundos <= PRAZO + FOLGA, segundos


def test_pagina_de_registros_tem_limite_proprio_e_maior(ambiente_hostil):
    """`ler_registros` lê uma página de 2 MiB (o limite dela é RESPOSTA_MAXIMA_BYTES_REGISTROS)."""
    registros = [{'ID': i, 'texto': 'x' * 1000} for i in range(2100)]

    def responder(pedido):
        corpo = json.dumps({'records': registros, 'next': None}).encode()
        return 200, {'Content-Type': 'application/json'}, corpo

    with ambiente_hostil(responder):
        assert len(list(cliente.ler_registros('titulos', CHAVE))) == 2100
    assert padroes.RESPOSTA_MAXIMA_BYTES_REGISTROS > 2 * MIB > LIMITE


# ---------------------------------------------------------------- pelo connector.py
def _intake_sem_fim_com_dono(escopo):
    """Responde quem_sou e capacidades como o intake; cada POST, com um corpo sem fim."""
    sem_fim = corpo_sem_fim()

    def responder(pedido):
        if pedido.metodo == 'POST':
            return sem_fim(pedido)
        corpo = {
            'project_id': 1,
            'external_id': str(escopo),
            'name': 'empresa %s' % escopo,
            'remove': True,
        }
        return 200, {'Content-Type': 'application/json'}, json.dumps(corpo).encode()

    return responder


def test_connector_contra_corpo_sem_fim_sai_com_erro_sem_historico(banco_sqlite, tmp_path):
    erp = erp_teste.Erp(banco_sqlite)
    mapa = erp_teste.mapeamento(tmp_path)
    escopo = erp.escopos[0]
    from contextia_sync.provisionamento.chaves import Registro, gravar_registros

    chaves = tmp_path / 'chaves.tsv'
    gravar_registros(str(chaves), [Registro(escopo, CHAVE, None, None, 'pronto', None)])
    with ServidorHostil(_intake_sem_fim_com_dono(escopo)) as servidor:
        inicio = time.monotonic()
        feito = subprocess.run(
            [
                sys.executable,
                'connector.py',
                '--mapping=' + mapa,
                '--source=generic',
                '--scope=' + escopo,
                '--chaves=%s' % chaves,
            ],
            cwd=RAIZ,
            env=_ambiente(servidor.url, CONTEXTIA_ORIGEM=erp.url),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=120,
            preexec_fn=_com_teto_de_memoria,
        )
        segundos = time.monotonic() - inicio
        posts = [p for p in servidor.pedidos if p.metodo == 'POST']
    saida = feito.stdout.decode('utf-8', 'replace')
    assert feito.returncode == 1, saida[-3000:]  # a carga falhou (não configuração)
    assert '%s (POST /api/v1/intake)' % MAIOR in saida, saida[-3000:]
    assert posts, saida[-3000:]
    # Nem complete nem histórico: a carga não conta como feita, nada é removido.
    assert 'complete NÃO enviado' in saida, saida[-3000:]
    assert not any(p.caminho.endswith('/complete') for p in posts)
    historico = '%s.historico.json' % chaves
    if os.path.exists(historico):
        with open(historico, encoding='utf-8') as f:
            assert escopo not in json.load(f).get('cargas', {})
    # Um prazo por dataset, no máximo (os datasets falham um depois do outro).
    assert segundos < 60, segundos
