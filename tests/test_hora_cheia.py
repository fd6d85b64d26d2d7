"""
A hora cheia (issue 31): a `coluna` segue ao vivo com mais de 50.000 mudanças
dentro de uma folga, e a janela entregue não mora na memória nem no JSON.

Antes, acima de 50.000 linhas lembradas (`MAXIMO_VISTOS`) a janela deixava de
ser lembrada, o ciclo seguinte a achava inteira por entregar, acima do teto por
ciclo, e o dataset ia para a varredura da noite. Agora a janela mora num SQLite
por dataset (contextia_sync/estado/janela.py), sem teto.

O ouvinte.py de verdade, o Contextia local num processo e o ERP de teste em
SQLite e PostgreSQL; 60.000 inclusões em seis rajadas de 10.000 (abaixo do teto
por ciclo), todas com carimbo dentro de um minuto: a folga de 180 s as cobre.
"""

import os
import sqlite3
import time

import pytest

from contextia_sync.estado.janela import caminho_da_janela, tamanho_lembrado
from contextia_sync.intake import cliente
from tests.apoio.ouvinte import (
    DATASET,
    Ouvinte,
    BANCOS_DO_ERP,
    erp_no_banco,
    erp_postgres_ou_pula,
    esperar,
)
from tests.dados import erp as erp_teste

pytestmark = pytest.mark.lento

RAJADAS = 6
POR_RAJADA = 10_000


@pytest.fixture(params=BANCOS_DO_ERP)
def erp(request, tmp_path):
    yield from erp_no_banco(request.param, tmp_path)


@pytest.fixture
def ouvinte_sqlite(tmp_path, ambiente_contextia, chave_contextia):
    banco = erp_teste.erp_sqlite(tmp_path)
    yield Ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    banco.fechar()


def _no_contextia(o, escopo):
    """Quantos registros o dataset tem no projeto da empresa."""
    for dataset in cliente.listar_datasets(o.chaves[escopo]):
        if dataset['dataset'] == DATASET:
            return dataset['records']
    return 0


def _rajada(o, escopo, numero):
    """10.000 inclusões com carimbo entre 10:45:00 e 10:46:00 (dentro da folga)."""
    inicio = o.erp.base * 1000 + 100_000 + numero * POR_RAJADA
    linhas = [
        {
            'i': inicio + n,
            'e': int(escopo),
            'c': 'Rajada %d' % numero,
            'v': '1.00',
            'd': '2026-10-01',
            'a': '2026-09-01 10:45:%02d.%06d' % (numero * 9 + n // 1250, n % 1250 * 800),
        }
        for n in range(POR_RAJADA)
    ]
    o.erp.executar('INSERT INTO {TITULOS} VALUES (:i, :e, :c, :v, :d, :a)', lote=linhas)


def test_mais_de_50_mil_mudancas_numa_folga_seguem_ao_vivo(
    tmp_path, erp, ambiente_contextia, chave_contextia
):
    o = Ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia)
    e0, e1 = o.erp.escopos[:2]
    processo = o.iniciar()
    try:
        esperar(lambda: 'marca inicial' in o.saida(), 60)
        for numero in range(RAJADAS):
            _rajada(o, e0, numero)
            esperar(lambda n=numero: _no_contextia(o, e0) >= (n + 1) * POR_RAJADA, 120, 0.5)
        # Ciclos depois da última rajada: a janela (60.000 linhas) relida não vai de novo
        # e o dataset não é entregue à varredura.
        time.sleep(4)
        assert _no_contextia(o, e0) == RAJADAS * POR_RAJADA
        saida = o.saida()
        assert 'entregue a VARREDURA' not in saida, saida[-3000:]
        assert 'deixa de ser lembrado' not in saida
        assert not o.estado().get('pendentes_varredura')
        # Uma mudança depois da hora cheia chega pelo ao-vivo.
        novo = o.inserir(e1, '2026-09-01 10:46:30')
        esperar(lambda: novo in o.no_contextia(e1), 30)
    finally:
        processo.terminate()
        processo.wait(30)
    # A janela entregue mora no SQLite do dataset, não no JSON do estado.
    assert 'vistos' not in o.estado()
    caminho = caminho_da_janela(o.estado_dir, DATASET)
    assert tamanho_lembrado(caminho) >= RAJADAS * POR_RAJADA
    assert os.path.getsize(os.path.join(o.estado_dir, 'ouvinte-estado.json')) < 20_000
    with sqlite3.connect(caminho) as conn:
        assert conn.execute('PRAGMA integrity_check').fetchone() == ('ok',)


def _pico_de_memoria_mib(pid):
    """O pico de memória residente do processo (VmHWM), em MiB."""
    with open('/proc/%d/status' % pid) as arquivo:
        for linha in arquivo:
            if linha.startswith('VmHWM:'):
                return int(linha.split()[1]) / 1024
    raise AssertionError('VmHWM ausente em /proc/%d/status' % pid)


MESMO_CARIMBO = 1_000_000


@pytest.mark.postgres
def test_um_milhao_de_linhas_no_carimbo_da_marca_cabem_no_limite_de_memoria(
    tmp_path, ambiente_contextia, chave_contextia
):
    """
    Uma migração do ERP: um milhão de linhas com o mesmo carimbo, o da marca.
    A janela da folga as traz inteiras a cada releitura; o ouvinte fica abaixo
    de 150 MiB (antes: ~600 MiB) e a mudança seguinte chega pelo ao-vivo.
    """
    banco, derrubar = erp_postgres_ou_pula()
    try:
        e0, e1 = banco.escopos[:2]
        banco.executar(
            "INSERT INTO {TITULOS} SELECT g, :e, 'Migrado', 1.00, DATE '2026-10-01',"
            " TIMESTAMP '2026-09-01 10:44:00' FROM generate_series(:de, :ate) AS g",
            e=int(e0),
            de=banco.base * 1000 + 1_000_000,
            ate=banco.base * 1000 + 1_000_000 + MESMO_CARIMBO - 1,
        )
        o = Ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
        processo = o.iniciar()
        try:
            esperar(lambda: 'marca inicial' in o.saida(), 120, 0.5)
            novos = []
            for segundo in range(3):
                novos.append(o.inserir(e1, '2026-09-01 10:45:%02d' % segundo))
                esperar(lambda: novos[-1] in o.no_contextia(e1), 60, 0.5)
            pico = _pico_de_memoria_mib(processo.pid)
        finally:
            processo.terminate()
            processo.wait(30)
        assert pico < 150, 'pico de %.0f MiB com %d linhas num carimbo' % (pico, MESMO_CARIMBO)
        assert tamanho_lembrado(caminho_da_janela(o.estado_dir, DATASET)) >= MESMO_CARIMBO
    finally:
        derrubar()


def test_linha_mudada_duas_vezes_no_mesmo_segundo_chega_na_segunda_versao(ouvinte_sqlite):
    """
    Carimbo sem fração de segundo (o DATETIME do MariaDB): a segunda versão de uma
    linha no mesmo segundo tem a mesma identidade (chave + carimbo) que a primeira.
    Antes, lembrada a primeira, a segunda só chegava na varredura da noite.
    """
    o = ouvinte_sqlite
    e0 = o.erp.escopos[0]
    assert o.rodar('--once')[0] == 0
    ident = o.inserir(e0, '2026-09-01 10:46:00', valor='1.00')
    assert o.rodar('--once')[0] == 0
    assert o.no_contextia(e0)[ident]['VALOR'] in ('1.00', 1.0, '1')
    o.erp.executar('UPDATE {TITULOS} SET {VALOR} = :v WHERE {ID} = :i', v='2.00', i=ident)
    # A provisória espera o segundo do carimbo fechar (1,5 s depois da leitura).
    time.sleep(2)
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    assert o.no_contextia(e0)[ident]['VALOR'] in ('2.00', 2.0, '2')
    # Relida sem mudança, a provisória fica firme sem ir de novo: ciclo ocioso.
    time.sleep(2)
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    dados = [linha for linha in o.status().splitlines() if linha.startswith('dados')]
    assert 'registros=0' in dados[0], dados
