"""
O que os testes das capturas por log (`binlog`, `slot_logico`) olham do lado de
fora, igual nas duas: os arquivos do spool (um arquivo é um lote,
contextia_sync/fila/spool.py), o que está no Contextia sem duplicata, a parada.
"""

import json
import os
import signal

from contextia_sync.intake import cliente
from tests.apoio.ouvinte import DATASET


def arquivos_do_spool(ouvinte, *estados):
    """Os arquivos do spool nesses estados (padrão: pronto e tomado), em ordem."""
    nomes = []
    for estado in estados or ('pronto', 'tomado'):
        pasta = os.path.join(ouvinte.estado_dir, 'spool', estado)
        nomes += sorted(os.listdir(pasta)) if os.path.isdir(pasta) else []
    return nomes


def _linhas_do_spool(ouvinte):
    for estado in ('pronto', 'tomado'):
        for nome in arquivos_do_spool(ouvinte, estado):
            with open(os.path.join(ouvinte.estado_dir, 'spool', estado, nome)) as arquivo:
                conteudo = json.load(arquivo)
            for mudanca in conteudo['mudancas']:
                yield conteudo['dataset'], mudanca['chave']


def chaves_no_spool(ouvinte):
    """As keys que os arquivos do spool guardam, em pronto/ e tomado/."""
    return {chave for _, chave in _linhas_do_spool(ouvinte)}


def no_spool(ouvinte):
    """Quantas linhas (dataset + key) o spool guarda: a conta do próprio spool."""
    return len({(dataset, json.dumps(chave)) for dataset, chave in _linhas_do_spool(ouvinte)})


def parar(processo):
    processo.send_signal(signal.SIGTERM)
    processo.wait(60)


def ids_sem_duplicata(ouvinte, escopo):
    """Os IDs no Contextia, conferindo que nenhum veio duas vezes."""
    registros = cliente.ler_registros(DATASET, ouvinte.chaves[escopo])
    ids = [int(r['ID']) for r in registros]
    assert len(ids) == len(set(ids)), 'registro duplicado no Contextia: %s' % ids
    return set(ids)


def escoa_em_ciclos_seguidos(ouvinte, escopo, ids, prazo):
    """
    Com o atraso já no log (o ouvinte parado), sobe com o teto de 20 por ciclo e o
    --intervalo-dados de 10 min: `ids` no Contextia em `prazo` s e o spool vazio só
    se o lote no teto entregue acorda o ciclo seguinte (captura/do_spool.py: TetoDoSpool).
    """
    from tests.apoio.ouvinte import esperar
    processo = ouvinte.iniciar('--intervalo-dados=600', '--maximo-por-ciclo=20')
    try:
        esperar(lambda: ids <= ids_sem_duplicata(ouvinte, escopo), prazo, passo=1)
        assert not arquivos_do_spool(ouvinte)
    finally:
        parar(processo)
