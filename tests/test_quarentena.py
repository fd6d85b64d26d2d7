"""
A quarentena contra o Contextia local de verdade (HTTP em 127.0.0.1, sem mock):
um registro envenenado vai para `<pasta>/parado/` com o motivo, os bons do
mesmo lote chegam, e a marca pode avançar (lotes_erro 0). Falha passageira
nunca vai para la. Um reenvio morto no meio (kill -9) deixa o item tomado, e a
próxima abertura o devolve e o nomeia.
"""

import decimal
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from contextia_sync.fila.diretorio import PARADO, TOMADO
from contextia_sync.fila.quarentena import Desfecho, Quarentena
from contextia_sync.intake import cliente, transporte
from tests.apoio.log import coletar_log

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bons(ids, **extra):
    return [
        dict({'ID': i, 'NOME': 'registro %d' % i, 'VALOR': decimal.Decimal('%d.50' % i)}, **extra)
        for i in ids
    ]


def arquivos(quarentena, estado=PARADO):
    return sorted(os.listdir(quarentena.pasta / estado))


def conteudo(caminho):
    with open(caminho, encoding='utf-8') as f:
        return json.load(f)


def ids_no_servidor(dataset, chave):
    return sorted(r['ID'] for r in cliente.ler_registros(dataset, chave))


@pytest.fixture
def quarentena(tmp_path):
    return Quarentena(tmp_path / 'quarentena')


# ---------------------------------------------------------------- isolar
def test_nan_entre_bons_vai_para_a_quarentena_e_os_bons_chegam(chave_contextia, quarentena):
    chave = chave_contextia()
    registros = bons(range(10))
    registros[4]['VALOR'] = float('nan')
    registros[7]['VALOR'] = decimal.Decimal('NaN')
    resultado = cliente.enviar_dataset(
        'Titulos', registros, key='ID', chunk=4, api_key=chave, escopo='40', quarentena=quarentena
    )
    assert (resultado.quarentenados, resultado.lotes_erro, resultado.inserted) == (2, 0, 8)
    assert ids_no_servidor('titulos', chave) == [0, 1, 2, 3, 5, 6, 8, 9]
    nomes = arquivos(quarentena)
    assert len(nomes) == 2 and quarentena.contar() == 2
    assert nomes[0].startswith('000000000001-titulos-40-4-') and nomes[0].endswith('.json')
    assert nomes[1].startswith('000000000002-titulos-40-7-')
    guardado = conteudo(quarentena.pasta / PARADO / nomes[0])
    assert (
        guardado['dataset'],
        guardado['escopo'],
        guardado['chave_coluna'],
        guardado['chave_valor'],
    ) == ('titulos', '40', 'ID', 4)
    assert 'VALOR' in guardado['motivo'] and 'nan' in guardado['motivo']
    # O que tem JSON vai como seria enviado; o que nao tem, como texto, nomeado.
    assert guardado['registro'] == {'ID': 4, 'NOME': 'registro 4', 'VALOR': 'nan'}
    assert list(guardado['invalidos']) == ['VALOR'] and guardado['reenviavel'] is False
    assert guardado['tentativas'] == 1 and guardado['desde']
    assert any('ID=7' in m and 'Decimal' in m for m in resultado.quarentena_motivos)
    assert quarentena.por_dataset() == {'titulos': 2}


def test_registro_acima_do_limite_de_bytes_vai_sozinho_para_a_quarentena(
    fabrica_contextia, monkeypatch, quarentena
):
    servidor = fabrica_contextia(max_bytes_lote=3000)
    monkeypatch.setenv('CONTEXTIA_URL', servidor.url)
    chave = servidor.criar_projeto_com_chave('bytes-q')
    registros = bons(range(6))
    registros[3]['TEXTO'] = 'x' * 5000
    resultado = cliente.enviar_dataset(
        'notas', registros, key='ID', chunk=6, api_key=chave, escopo='12', quarentena=quarentena
    )
    assert (resultado.quarentenados, resultado.lotes_erro, resultado.lotes_ok) == (1, 0, 1)
    assert ids_no_servidor('notas', chave) == [0, 1, 2, 4, 5]
    [nome] = arquivos(quarentena)
    assert '-notas-12-3-' in nome
    guardado = conteudo(quarentena.pasta / PARADO / nome)
    assert guardado['status_http'] == 413 and guardado['registro']['TEXTO'] == 'x' * 5000
    assert 'SOZINHO' in guardado['motivo'] and "'TEXTO'" in guardado['motivo']
    assert 'Diminuir o chunk não resolve' in guardado['motivo']


def test_422_de_um_registro_isola_so_ele(chave_contextia, quarentena):
    chave = chave_contextia()
    registros = bons(range(5))
    registros[2]['ID'] = None  # sem o campo da key: 422 records[i].ID
    resultado = cliente.enviar_dataset(
        'pedidos', registros, key='ID', api_key=chave, escopo='7', quarentena=quarentena
    )
    assert (resultado.quarentenados, resultado.lotes_erro, resultado.inserted) == (1, 0, 4)
    assert ids_no_servidor('pedidos', chave) == [0, 1, 3, 4]
    [nome] = arquivos(quarentena)
    assert '-pedidos-7-key-nula-' in nome
    guardado = conteudo(quarentena.pasta / PARADO / nome)
    assert guardado['status_http'] == 422 and 'records[0].ID' in guardado['motivo']
    assert guardado['registro']['NOME'] == 'registro 2' and guardado['reenviavel'] is True


def test_recusa_do_envelope_nao_manda_todos_para_a_quarentena(chave_contextia, quarentena):
    chave = chave_contextia()
    # `group` invalido: TODO pedido recebe 422, inclusive o envelope vazio da prova.
    resultado = cliente.enviar_dataset(
        'grupo',
        bons(range(8)),
        key='ID',
        api_key=chave,
        group='Grupo Inválido',
        quarentena=quarentena,
    )
    assert (resultado.quarentenados, resultado.lotes_erro) == (0, 1)
    assert 'a recusa e do envelope' in ' '.join(resultado.erros)
    assert quarentena.contar() == 0


def test_falha_passageira_nunca_vai_para_a_quarentena(
    chave_contextia, ambiente_contextia, monkeypatch, quarentena
):
    chave = chave_contextia()
    ambiente_contextia.injetar('500', 1)
    resultado = cliente.enviar_dataset(
        'passageira', bons(range(3)), key='ID', api_key=chave, quarentena=quarentena
    )
    assert (resultado.quarentenados, resultado.lotes_erro) == (0, 1)
    assert 'HTTP 500' in resultado.erros[0]

    monkeypatch.setattr(transporte, 'PRAZO_RETENTATIVAS', 2)
    monkeypatch.setattr(transporte._local, 'sessoes', {}, raising=False)
    ambiente_contextia.injetar('429', 50, retry_after=1)
    resultado = cliente.enviar_dataset(
        'passageira', bons(range(3)), key='ID', api_key=chave, quarentena=quarentena
    )
    assert (resultado.quarentenados, resultado.lotes_erro) == (0, 1)
    assert resultado.interrompido and 'HTTP 429' in resultado.erros[0]
    assert quarentena.contar() == 0
    monkeypatch.setattr(transporte._local, 'sessoes', {}, raising=False)


def test_com_sync_registro_na_quarentena_e_carga_incompleta(chave_contextia, quarentena):
    chave = chave_contextia()
    registros = bons(range(4))
    registros[1]['VALOR'] = float('inf')
    sync = cliente.gerar_sync()
    resultado = cliente.enviar_dataset(
        'carga', registros, key='ID', api_key=chave, sync=sync, quarentena=quarentena
    )
    assert resultado.quarentenados == 1 and resultado.inserted == 3
    # A regra da carga completa: lotes_erro > 0, entao carga/completa.py nao manda complete.
    assert resultado.lotes_erro == 1
    assert 'complete não deve ser enviado' in resultado.erros[-1]


# ---------------------------------------------------------------- cheia
def test_quarentena_cheia_faz_o_lote_falhar_e_diz_como_esvaziar(chave_contextia, tmp_path):
    chave = chave_contextia()
    quarentena = Quarentena(tmp_path / 'q', maximo_itens=1)
    primeiro = cliente.enviar_dataset(
        'cheia', [{'ID': 1, 'V': float('nan')}], key='ID', api_key=chave, quarentena=quarentena
    )
    assert (primeiro.quarentenados, primeiro.lotes_erro) == (1, 0)

    # Valor sem JSON com a quarentena cheia: nao cabe, a leitura para, a marca fica.
    segundo = cliente.enviar_dataset(
        'cheia',
        [{'ID': 2, 'V': float('nan')}, {'ID': 3, 'V': 1}],
        key='ID',
        api_key=chave,
        quarentena=quarentena,
    )
    assert segundo.lotes_erro == 1 and segundo.quarentenados == 0
    texto = ' '.join(segundo.erros)
    assert 'quarentena cheia' in texto and str(quarentena.pasta) in texto
    assert '--reenviar-quarentena' in texto and 'ID=2' in texto

    # Recusa do intake com a quarentena cheia: o bom chega, o lote falha.
    terceiro = cliente.enviar_dataset(
        'cheia',
        [{'ID': 4, 'V': 1}, {'ID': None, 'V': 2}],
        key='ID',
        api_key=chave,
        quarentena=quarentena,
    )
    assert terceiro.lotes_erro == 1 and 'quarentena cheia' in ' '.join(terceiro.erros)
    assert ids_no_servidor('cheia', chave) == [4]

    # O mesmo registro de novo (a releitura da folga): ja esta la, nao falha.
    quarto = cliente.enviar_dataset(
        'cheia', [{'ID': 1, 'V': float('nan')}], key='ID', api_key=chave, quarentena=quarentena
    )
    assert (quarto.quarentenados, quarto.lotes_erro) == (1, 0)
    assert quarentena.contar() == 1


# ---------------------------------------------------------------- sair da quarentena
def test_versao_corrigida_entregue_tira_da_quarentena(chave_contextia, quarentena):
    chave = chave_contextia()
    cliente.enviar_dataset(
        'corrigida',
        [{'ID': 5, 'V': float('nan')}],
        key='ID',
        api_key=chave,
        escopo='3',
        quarentena=quarentena,
    )
    assert quarentena.contar() == 1
    # A releitura do mesmo registro, igual, nao vai ao servidor de novo.
    repetido = cliente.enviar_dataset(
        'corrigida',
        [{'ID': 5, 'V': float('nan')}],
        key='ID',
        api_key=chave,
        escopo='3',
        quarentena=quarentena,
    )
    assert (repetido.quarentenados, repetido.lotes_ok, repetido.registros) == (1, 0, 1)
    [item] = quarentena.itens()
    assert item.vezes == 1
    # O ERP corrigiu a linha: a versao nova chega e a velha sai da quarentena.
    corrigido = cliente.enviar_dataset(
        'corrigida',
        [{'ID': 5, 'V': 0.0}],
        key='ID',
        api_key=chave,
        escopo='3',
        quarentena=quarentena,
    )
    assert (corrigido.inserted, corrigido.quarentena_superados) == (1, 1)
    assert quarentena.contar() == 0


def test_reenviar_depois_que_o_servidor_aceita(fabrica_contextia, monkeypatch, quarentena):
    servidor = fabrica_contextia(max_bytes_lote=3000)
    monkeypatch.setenv('CONTEXTIA_URL', servidor.url)
    chave = servidor.criar_projeto_com_chave('reenvio')
    grande = bons([1], TEXTO='y' * 5000)
    cliente.enviar_dataset(
        'anexos', grande, key='ID', api_key=chave, escopo='40', quarentena=quarentena
    )
    quarentena.guardar('anexos', '41', 'ID', {'ID': 9}, 'HTTP 422: exemplo')
    chaves = {'40': chave}

    def enviar(item):
        return cliente.reenviar_item(item, api_key=chaves.get(item.escopo))

    # Ainda grande demais: fica, com tentativas + 1; o escopo sem chave fica e diz.
    antes = quarentena.reenviar(enviar)
    assert (antes.entregues, antes.recusados, antes.pendentes, antes.restantes) == (0, 1, 1, 2)
    assert any('escopo 41 não tem chave' in m for m in antes.mensagens)
    [grande_guardado, _] = quarentena.itens()
    assert grande_guardado.tentativas == 2 and 'HTTP 413' in grande_guardado.motivo

    servidor.max_bytes_lote = None  # o intake passou a aceitar
    servidor.reiniciar()
    depois = quarentena.reenviar(enviar)
    assert (depois.entregues, depois.pendentes, depois.restantes) == (1, 1, 1)
    assert [r['TEXTO'] for r in cliente.ler_registros('anexos', chave)] == ['y' * 5000]
    assert [item.escopo for item in quarentena.itens()] == ['41']


_AJUDANTE = r"""
import os, sys, time
from contextia_sync.fila.quarentena import Quarentena
from contextia_sync.intake import cliente

quarentena = Quarentena(sys.argv[1])
vistos = []

def enviar(item):
    desfecho = cliente.reenviar_item(item, api_key=os.environ['CHAVE_TESTE'])
    vistos.append(item.caminho.name)
    if len(vistos) == 2:
        # O segundo ja chegou ao intake; o processo morre antes de apagar o arquivo.
        with open(sys.argv[2], 'w') as marca:
            marca.write(item.caminho.name)
        time.sleep(600)
    return desfecho

quarentena.reenviar(enviar)
"""


def test_kill_9_no_meio_do_reenviar_devolve_o_tomado_e_o_nomeia(
    chave_contextia, quarentena, tmp_path
):
    chave = chave_contextia()
    for i in range(3):
        quarentena.guardar('morto', '40', 'ID', {'ID': i, 'NOME': 'n%d' % i}, 'HTTP 422: antes')
    marca = tmp_path / 'marca'
    ambiente = dict(os.environ, CHAVE_TESTE=chave, PYTHONPATH=RAIZ)
    processo = subprocess.Popen(
        [sys.executable, '-c', _AJUDANTE, str(quarentena.pasta), str(marca)],
        cwd=RAIZ,
        env=ambiente,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        limite = time.monotonic() + 30
        while not marca.exists() and time.monotonic() < limite:
            assert processo.poll() is None, 'o ajudante morreu antes da hora'
            time.sleep(0.05)
        assert marca.exists()
        tomado = marca.read_text()
        os.kill(processo.pid, signal.SIGKILL)
        processo.wait(timeout=10)
    finally:
        if processo.poll() is None:
            processo.kill()
            processo.wait(timeout=10)
    # O primeiro foi entregue e apagado; o segundo ficou tomado; o terceiro nem saiu.
    assert arquivos(quarentena, TOMADO) == [tomado]
    assert len(arquivos(quarentena, PARADO)) == 1

    with coletar_log() as avisos:
        reaberta = Quarentena(quarentena.pasta)
    assert arquivos(reaberta, TOMADO) == [] and len(arquivos(reaberta, PARADO)) == 2
    assert tomado in arquivos(reaberta, PARADO)
    [aviso] = [a for a in avisos if tomado in a]
    assert 'destino e desconhecido' in aviso and 'Devolvido a parado/' in aviso

    # Reenviar o que ja tinha chegado e inofensivo (o intake e idempotente).
    fim = reaberta.reenviar(lambda item: cliente.reenviar_item(item, api_key=chave))
    assert (fim.entregues, fim.restantes) == (2, 0)
    assert ids_no_servidor('morto', chave) == [0, 1, 2]


def test_reenviar_que_levanta_devolve_o_item(quarentena):
    quarentena.guardar('x', None, 'ID', {'ID': 1}, 'HTTP 422: exemplo')

    def quebra(item):
        raise RuntimeError('bug no envio de %s' % item.descricao())

    with pytest.raises(RuntimeError):
        quarentena.reenviar(quebra)
    assert arquivos(quarentena, TOMADO) == [] and quarentena.contar() == 1
    feito = quarentena.reenviar(
        lambda item: Desfecho.falhou('fora: %s' % item.dataset, interromper=True)
    )
    assert feito.interrompido and feito.falhas == 1 and quarentena.contar() == 1


# ---------------------------------------------------------------- 200 que nao e do intake
@pytest.mark.parametrize(
    'corpo',
    [
        None,
        '[]',
        '{"ok": true}',
        '{"inserted": "1"}',
        '{"received": 7, "inserted": 7, "updated": 0, "duplicates": 0, "removed": 0}',
    ],
)
def test_200_com_corpo_invalido_e_lote_falho_sem_excecao(
    chave_contextia, ambiente_contextia, corpo, quarentena
):
    chave_a, chave_b = chave_contextia(), chave_contextia()
    opcoes = {} if corpo is None else {'corpo': corpo}
    ambiente_contextia.injetar('corpo_invalido', 1, **opcoes)
    lidos = []

    def origem():
        for i in range(500):
            lidos.append(i)
            yield {'ID': i}

    resultados = []
    with coletar_log() as mensagens:
        for chave in (chave_a, chave_b):  # duas empresas: a segunda nao e pulada
            resultados.append(
                cliente.enviar_dataset(
                    'corpo', origem(), key='ID', chunk=50, api_key=chave, quarentena=quarentena
                )
            )
    primeiro, segundo = resultados
    assert (primeiro.lotes_ok, primeiro.lotes_erro, primeiro.interrompido) == (0, 1, True)
    assert 'CONTEXTIA_URL aponta para o intake?' in primeiro.erros[0] or (
        'recebeu 7 registro(s) de 50' in primeiro.erros[0]
    )
    assert primeiro.quarentenados == 0 and quarentena.contar() == 0
    assert len(lidos) <= 500 + 51  # a primeira parou de ler a origem
    assert len([m for m in mensagens if 'dataset corpo' in m and 'lote 1' in m]) == 1
    assert (segundo.lotes_erro, segundo.inserted) == (0, 500)
