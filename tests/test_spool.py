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
        (1, ('10', '20'), 'update'), (2, ('10',), 'insert')]
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
    codigo = ('import os; from contextia_sync.fila.spool import Spool, Mudanca;'
              ' s = Spool(%r); s.guardar([Mudanca("d", 7, ["1"])]); s.tomar("d", 5);'
              ' os._exit(9)' % str(pasta))
    feito = subprocess.run([sys.executable, '-c', codigo], cwd=RAIZ,
                           env=dict(os.environ, PYTHONPATH=RAIZ))
    assert feito.returncode == 9
    assert len(os.listdir(pasta / 'tomado')) == 1
    spool = Spool(pasta)
    assert len(spool.devolvidos) == 1 and not os.listdir(pasta / 'tomado')
    assert [t.chave for t in spool.tomar('d', 5)] == [7]


def test_remocao_que_falhou_deixa_a_mudanca_no_spool(tmp_path):
    # O ciclo de dados tira da leitura as remoções que o Contextia não confirmou
    # (ouvinte/dados.py) e confirma o resto: a mudança da linha removida não
    # pode sair do spool, senão a remoção se perde em silêncio.
    from types import SimpleNamespace

    from contextia_sync.captura import Leitura, Situacao
    from contextia_sync.captura.binlog import CapturaBinlog

    spool = Spool(tmp_path / 'spool')
    spool.guardar([Mudanca('d', 1, ['10'], 'update'), Mudanca('d', 2, ['10'], 'delete'),
                   Mudanca('d', 3, [None], 'delete')])
    um, dois, tres = spool.tomar('d', 5)
    tomada = [(um, []), (dois, ['10']), (tres, [None])]
    falhou = Leitura(Situacao.MUDANCAS, privado=tomada)
    CapturaBinlog.confirmar(SimpleNamespace(spool=spool), None, falhou)  # type: ignore[arg-type]
    assert sorted(t.chave for t in spool.tomar('d', 5)) == [2, 3]
    dois, tres = spool.tomar('d', 5)
    entregue = Leitura(Situacao.MUDANCAS, privado=[(dois, ['10']), (tres, [None])],
                       remocoes=[3], remocoes_por_escopo={'10': [2]})
    CapturaBinlog.confirmar(SimpleNamespace(spool=spool), None, entregue)  # type: ignore[arg-type]
    assert spool.tomar('d', 5) == []
