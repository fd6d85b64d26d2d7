"""O spool da captura por log (fila/spool.py) sobre a fila do seed 004, sem banco."""

import os
import subprocess
import sys

import pytest

from contextia_sync.fila.spool import ErroSpoolCheio, Mudanca, Spool

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_mesma_linha_e_um_item_so_e_a_ordem_e_a_da_captura(tmp_path):
    spool = Spool(tmp_path / 'spool')
    spool.guardar([Mudanca('d', 1, ['10'], 'insert'), Mudanca('d', 2, ['10'], 'insert')])
    # A linha 1 mudou de empresa antes da entrega: um item, as duas empresas.
    assert spool.guardar([Mudanca('d', 1, ['20'], 'update'), Mudanca('e', 1, [None])]) == 1
    assert spool.profundidade() == 3
    tomados = spool.tomar('d', 10)
    assert [(t.chave, t.escopos, t.evento) for t in tomados] == [
        (1, ('10', '20'), 'update'),
        (2, ('10',), 'insert'),
    ]
    nomes = sorted(os.listdir(tmp_path / 'spool' / 'tomado'))
    assert nomes[0].startswith('000000000001-') and nomes[1].startswith('000000000002-')
    spool.concluir(tomados)
    assert spool.profundidade() == 1 and spool.idade_do_mais_velho() is not None
    spool.fechar()


def test_cheio_recusa_alto_e_nao_descarta(tmp_path):
    spool = Spool(tmp_path / 'spool', maximo_itens=2)
    with pytest.raises(ErroSpoolCheio, match='PAUSADA'):
        spool.guardar([Mudanca('d', n, ['1']) for n in range(3)])
    assert spool.profundidade() == 2


def test_tomado_de_um_processo_morto_volta_e_e_nomeado(tmp_path):
    pasta = tmp_path / 'spool'
    codigo = (
        'import os; from contextia_sync.fila.spool import Spool, Mudanca;'
        ' s = Spool(%r); s.guardar([Mudanca("d", 7, ["1"])]); s.tomar("d", 5);'
        ' os._exit(9)' % str(pasta)
    )
    feito = subprocess.run(
        [sys.executable, '-c', codigo], cwd=RAIZ, env=dict(os.environ, PYTHONPATH=RAIZ)
    )
    assert feito.returncode == 9
    assert len(os.listdir(pasta / 'tomado')) == 1
    spool = Spool(pasta)
    assert len(spool.devolvidos) == 1 and not os.listdir(pasta / 'tomado')
    assert [t.chave for t in spool.tomar('d', 5)] == [7]


def test_remocao_que_falhou_deixa_a_mudanca_no_spool(tmp_path):
    # O ciclo de dados tira da leitura as remoções que o Contextia não confirmou
    # (ouvinte/dados.py) e confirma o resto: a mudança da linha removida não
    # pode sair do spool, senão a remoção se perde em silêncio.
    from contextia_sync.captura import Leitura, Situacao
    from contextia_sync.captura.releitura import PlanoDoSpool, concluir_entregues

    spool = Spool(tmp_path / 'spool')
    spool.guardar(
        [
            Mudanca('d', 1, ['10'], 'update'),
            Mudanca('d', 2, ['10'], 'delete'),
            Mudanca('d', 3, [None], 'delete'),
        ]
    )
    um, dois, tres = spool.tomar('d', 5)
    tomada = PlanoDoSpool(tomadas=[(um, []), (dois, [('10', '2')]), (tres, [(None, '3')])])
    falhou = Leitura(Situacao.MUDANCAS, privado=tomada)
    concluir_entregues(spool, falhou, None)
    spool.devolver('d')
    # A que falhou volta a pronto/ já: nada fica tomado (a subida seguinte não
    # diria "o processo que o tomou morreu").
    assert not list((tmp_path / 'spool' / 'tomado').iterdir())
    assert sorted(t.chave for t in spool.tomar('d', 5)) == [2, 3]
    dois, tres = spool.tomar('d', 5)
    entregue = Leitura(
        Situacao.MUDANCAS,
        privado=PlanoDoSpool(tomadas=[(dois, [('10', '2')]), (tres, [(None, '3')])]),
        remocoes=[3],
        remocoes_por_escopo={'10': [2]},
    )
    concluir_entregues(spool, entregue, None)
    assert spool.tomar('d', 5) == []


def test_um_arquivo_por_lote_dataset_e_empresa_e_o_mesmo_lote_nao_duplica(tmp_path):
    spool = Spool(tmp_path / 'spool')
    lote = [Mudanca('d', n, [str(n % 2)], 'insert', '0-1-%d' % n) for n in range(2000)]
    assert spool.guardar(lote) == 2000
    nomes = sorted(os.listdir(tmp_path / 'spool' / 'pronto'))
    # Duas empresas, dois arquivos: a sequência com zeros, a empresa no nome.
    assert [n[:15] for n in nomes] == ['000000000001-d-', '000000000002-d-']
    assert {n.split('-')[2] for n in nomes} == {'0', '1'}
    # O mesmo lote relido do log (kill -9 antes da posição): o mesmo arquivo.
    assert spool.guardar(lote) == 0
    assert sorted(os.listdir(tmp_path / 'spool' / 'pronto')) == nomes
    assert spool.profundidade() == 2000
    spool.fechar()
    # Reaberto (outro processo): o índice relido do disco dá a mesma conta.
    spool = Spool(tmp_path / 'spool')
    assert spool.profundidade() == 2000 and spool.bytes_ocupados() > 0
    tomados = spool.tomar('d', 10)
    assert len(tomados) == 1000  # arquivos inteiros: a empresa 0 toda
    spool.concluir(tomados[:400])  # entregue pela metade: o arquivo é regravado
    assert spool.profundidade() == 1600
    spool.fechar()
    spool = Spool(tmp_path / 'spool')
    restantes = spool.tomar('d', 5000)
    assert len(restantes) == 1600 and tomados[400].chave in {t.chave for t in restantes}
    assert tomados[0].chave not in {t.chave for t in restantes}
    spool.concluir(restantes)
    assert spool.profundidade() == 0 and not os.listdir(tmp_path / 'spool' / 'tomado')


def test_cheio_grava_o_comeco_que_cabe_e_diz_quanto(tmp_path):
    spool = Spool(tmp_path / 'spool', maximo_itens=5)
    with pytest.raises(ErroSpoolCheio) as cheio:
        spool.guardar([Mudanca('d', n, ['1'], 'insert', '0-1-%d' % n) for n in range(8)])
    assert cheio.value.guardadas == 5 and spool.profundidade() == 5
    # A linha que já espera entrega não ocupa lugar novo.
    assert spool.guardar([Mudanca('d', 3, ['1'], 'update', '0-1-9')]) == 0
