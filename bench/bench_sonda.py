#!/usr/bin/env python3
"""
Quanto custa um ciclo de dados OCIOSO, numa tabela pequena e numa grande.

    .venv/bin/python bench/bench_sonda.py [--pequena 100000] [--grande 2000000]

PostgreSQL de verdade (127.0.0.1:5432), um banco novo com duas tabelas iguais
de tamanhos diferentes e índice na coluna de mudança. Mede o `ciclo_dados` do
ouvinte inteiro (sonda COUNT > marca - folga, estado gravado), em processo,
com a marca no MAX -- o caso de todo minuto em que nada mudou.

"Ocioso" e o ciclo real de um minuto sem movimento: a sonda acha as linhas da
janela da folga (as últimas ~11 nas duas tabelas, pelo espacamento) e o
ouvinte as relê e reenvia ao Contextia local (voltam como `iguais`) -- o
custo de reler e de propósito, e e o mesmo nas duas tabelas.

O que se espera: razão grande/pequena perto de 1. A sonda usa o índice e lê
só a janela da folga; se ela varresse a tabela, a razão seria perto de 20.
Como linha de base, na mesma execução: um COUNT(*) sem filtro (o que uma
varredura custaria) nas duas tabelas.
"""

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time
import uuid

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, RAIZ)

URL_ADMIN = 'postgresql+psycopg://postgres@127.0.0.1:5432/postgres'


def criar_banco(linhas_por_tabela):
    import sqlalchemy as sa

    nome = 'bench_sonda_%s' % uuid.uuid4().hex[:8]
    admin = sa.create_engine(URL_ADMIN, isolation_level='AUTOCOMMIT')
    with admin.connect() as con:
        con.execute(sa.text('CREATE DATABASE %s' % nome))
    url = URL_ADMIN.rsplit('/', 1)[0] + '/' + nome
    motor = sa.create_engine(url)
    for tabela, quantas in linhas_por_tabela.items():
        inicio = time.monotonic()
        with motor.begin() as con:
            con.execute(
                sa.text(
                    'CREATE TABLE "%s" ("ID" BIGINT PRIMARY KEY, "EMPRESA_ID" INTEGER,'
                    ' "VALOR" NUMERIC(12,2), "HISTORICO" VARCHAR(80), "ALTERADO_EM" TIMESTAMP)'
                    % tabela
                )
            )
            # Um ano de movimento espalhado: a janela da folga no fim tem poucas linhas.
            con.execute(
                sa.text(
                    'INSERT INTO "%s" SELECT i, 1, (i %% 100000) / 100.0,'
                    " repeat('x', 60), TIMESTAMP '2025-01-01' + i * (INTERVAL '1 second'"
                    ' * (31536000.0 / :n)) FROM generate_series(1, :n) AS i' % tabela
                ),
                {'n': quantas},
            )
            con.execute(sa.text('CREATE INDEX "%s_ALT" ON "%s" ("ALTERADO_EM")' % (tabela, tabela)))
        with motor.connect().execution_options(isolation_level='AUTOCOMMIT') as con:
            con.execute(sa.text('VACUUM ANALYZE "%s"' % tabela))
        print('  %s: %s linhas criadas em %.1fs' % (tabela, quantas, time.monotonic() - inicio))
    motor.dispose()

    def derrubar():
        with admin.connect() as con:
            con.execute(sa.text('DROP DATABASE IF EXISTS %s WITH (FORCE)' % nome))
        admin.dispose()

    return url, derrubar


def medir_ciclos(tabela, pasta, repeticoes, chave):
    from contextia_sync.captura.ao_vivo import datasets_ao_vivo
    from contextia_sync.captura.coluna import CapturaColuna
    from contextia_sync.estado.estado import Estado
    from contextia_sync.origem import carregar_origem
    from contextia_sync.ouvinte.contexto import Contexto
    from contextia_sync.ouvinte.dados import ciclo_dados
    from contextia_sync.provisionamento import regra_projeto

    mapa = {
        'defaults': {'scope_column': 'EMPRESA_ID', 'key': 'ID', 'watch_column': 'ALTERADO_EM'},
        'projects': {'source_object': tabela},
        'datasets': [
            {
                'dataset': tabela,
                'source_object': tabela,
                'columns': ['ID', 'EMPRESA_ID', 'VALOR', 'HISTORICO', 'ALTERADO_EM'],
            }
        ],
    }
    vivos, fora = datasets_ao_vivo(mapa)
    chaves = os.path.join(pasta, 'chaves-%s.tsv' % tabela)
    with open(chaves, 'w') as arquivo:
        arquivo.write('1\t%s\n' % chave)
    os.chmod(chaves, 0o600)
    origem = carregar_origem('generic')
    origem.conectar()
    estado = Estado(os.path.join(pasta, 'estado-%s.json' % tabela))
    ctx = Contexto(
        mapa=mapa,
        vivos=vivos,
        fora=fora,
        origem=origem,
        estado=estado,
        regra=regra_projeto.resolver(mapa),
        estado_dir=pasta,
        mapping='-',
        chaves=chaves,
        folga=180,
        captura=CapturaColuna(origem=origem, estado=estado, folga=180, maximo=20000),
    )
    ciclo_dados(ctx)  # primeira vez: so a marca inicial
    ciclo_dados(ctx)  # segunda: entrega a janela pela 1a vez
    tempos = []
    for _ in range(repeticoes):
        origem.renovar()
        inicio = time.perf_counter()
        resumo = ciclo_dados(ctx)
        tempos.append((time.perf_counter() - inicio) * 1000)
        if resumo.erros:
            raise RuntimeError('ciclo com erro: %s' % resumo)
    return tempos


def contar_tudo(url, tabela, repeticoes):
    import sqlalchemy as sa

    motor = sa.create_engine(url)
    tempos = []
    with motor.connect() as con:
        for _ in range(repeticoes):
            inicio = time.perf_counter()
            con.execute(sa.text('SELECT COUNT(*) FROM "%s"' % tabela)).scalar()
            tempos.append((time.perf_counter() - inicio) * 1000)
        maior = con.execute(sa.text('SELECT MAX("ALTERADO_EM") FROM "%s"' % tabela)).scalar()
        plano = (
            con.execute(
                sa.text(
                    'EXPLAIN (ANALYZE, COSTS OFF) SELECT COUNT(*) FROM "%s"'
                    ' WHERE "ALTERADO_EM" > :v' % tabela
                ),
                {'v': maior - datetime.timedelta(seconds=180)},
            )
            .scalars()
            .all()
        )
    motor.dispose()
    return tempos, plano


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--pequena', type=int, default=100000)
    p.add_argument('--grande', type=int, default=2000000)
    p.add_argument('--repeticoes', type=int, default=30)
    args = p.parse_args()

    import logging
    from contextia_local.processo import ServidorLocal
    from contextia_sync.registro import logger

    print('criando as tabelas no PostgreSQL...')
    url, derrubar = criar_banco({'PEQUENA': args.pequena, 'GRANDE': args.grande})
    os.environ['CONTEXTIA_ORIGEM'] = url
    logger.setLevel(logging.WARNING)  # o log de cada ciclo nao entra na medida
    try:
        with (
            tempfile.TemporaryDirectory() as pasta,
            ServidorLocal(os.path.join(pasta, 'contextia')) as servidor,
        ):
            os.environ.update(servidor.ambiente())
            chave = servidor.criar_projeto_com_chave('1', 'Bench')
            resultado = {}
            for tabela in ('PEQUENA', 'GRANDE'):
                ciclo = medir_ciclos(tabela, pasta, args.repeticoes, chave)
                cheio, plano = contar_tudo(url, tabela, max(5, args.repeticoes // 3))
                resultado[tabela] = (ciclo, cheio, plano)
    finally:
        derrubar()

    print('\nciclo de dados ocioso (ms; %s repetições)' % args.repeticoes)
    print(
        '  %-8s %10s %10s %10s   %s'
        % ('tabela', 'linhas', 'mediana', 'p95', 'COUNT(*) sem filtro (linha de base)')
    )
    for tabela, linhas in (('PEQUENA', args.pequena), ('GRANDE', args.grande)):
        ciclo, cheio, _ = resultado[tabela]
        print(
            '  %-8s %10s %10.2f %10.2f   %.1f ms'
            % (
                tabela,
                linhas,
                statistics.median(ciclo),
                sorted(ciclo)[int(len(ciclo) * 0.95) - 1],
                statistics.median(cheio),
            )
        )
    razao = statistics.median(resultado['GRANDE'][0]) / statistics.median(resultado['PEQUENA'][0])
    razao_cheio = statistics.median(resultado['GRANDE'][1]) / statistics.median(
        resultado['PEQUENA'][1]
    )
    print('\nrazao grande/pequena do ciclo ocioso ..: %.2f  (esperado perto de 1)' % razao)
    print('razão grande/pequena do COUNT(*) cheio : %.2f  (o que custaria varrer)' % razao_cheio)
    print('plano da sonda na GRANDE (EXPLAIN ANALYZE):')
    for linha in resultado['GRANDE'][2]:
        print('    %s' % linha)
    return 0 if razao < 2 else 1


if __name__ == '__main__':
    sys.exit(main())
