"""
O que os testes das capturas por log (`binlog`, `slot_logico`) olham do lado de
fora, igual nas duas: os arquivos do spool (um arquivo é um lote,
contextia_sync/fila/spool.py), o que está no Contextia sem duplicata, a parada.
"""

import json
import os
import signal
import time

from contextia_sync.intake import cliente
from tests.apoio.ouvinte import DATASET, esperar


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
    processo = ouvinte.iniciar('--intervalo-dados=600', '--maximo-por-ciclo=20')
    try:
        esperar(lambda: ids <= ids_sem_duplicata(ouvinte, escopo), prazo, passo=1)
        # O arquivo entregue sai do spool no `confirmar`, logo depois da entrega.
        esperar(lambda: not arquivos_do_spool(ouvinte), 10)
    finally:
        parar(processo)


def insert_update_delete_e_troca_de_empresa(ouvinte):
    """
    Com a captura de pé: insert, update, delete e a linha que troca de empresa
    chegam (ela chega à nova e SAI da antiga), igual pelo binlog e pelo slot.
    """
    o = ouvinte
    e0, e1 = o.erp.escopos
    # Todo dataset com `key` fica ao vivo, com ou sem coluna de mudança.
    assert 'datasets ao vivo .: 2 de 2' in o.saida(), o.saida()
    novo = o.inserir(e0, '2026-10-01 10:00:00', valor='11.00')
    outro = o.inserir(e0, '2026-10-01 10:00:00', valor='12.00')
    esperar(lambda: {novo, outro} <= ids_sem_duplicata(o, e0), 30)
    o.erp.executar('UPDATE {TITULOS} SET {VALOR} = 99.50 WHERE {ID} = :i', i=novo)
    esperar(lambda: str(o.no_contextia(e0).get(novo, {}).get('VALOR')) in ('99.5', '99.50'), 30)
    o.erp.executar('DELETE FROM {TITULOS} WHERE {ID} = :i', i=novo)
    esperar(lambda: novo not in ids_sem_duplicata(o, e0), 30)
    o.erp.executar('UPDATE {TITULOS} SET {EMPRESA_ID} = :e WHERE {ID} = :i', e=int(e1), i=outro)
    esperar(lambda: outro in ids_sem_duplicata(o, e1) and outro not in ids_sem_duplicata(o, e0), 30)


def acorda_no_log_e_sai_no_sigterm(ouvinte, posicao_gravada):
    """
    Com --intervalo-dados de 10 min, só a espera que olha o log entrega em segundos;
    bloqueado nela, o SIGTERM ainda sai em segundos e com código 0.
    """

    o = ouvinte
    e0 = o.erp.escopos[0]
    processo = o.iniciar('--intervalo-dados=600')
    try:
        esperar(posicao_gravada, 30)
        novo = o.inserir(e0, '2026-10-01 10:00:00')
        esperar(lambda: novo in ids_sem_duplicata(o, e0), 20)
        outro = o.inserir(e0, '2026-10-01 10:00:00')
        esperar(lambda: outro in ids_sem_duplicata(o, e0), 20)
    finally:
        inicio = time.monotonic()
        processo.send_signal(signal.SIGTERM)
        processo.wait(60)
    assert time.monotonic() - inicio < 10
    assert processo.returncode == 0, o.saida()[-2000:]
