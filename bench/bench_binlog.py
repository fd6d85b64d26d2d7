#!/usr/bin/env python3
"""
`binlog` contra `coluna`, na mesma rodada: do COMMIT ao registro visível no
Contextia, e a vazão do spool contra a entrega direta.

    .venv/bin/python bench/bench_binlog.py [--mudancas 40] [--intervalo-dados 2]
                                           [--vazao 2000] [--so-vazao]

Tudo de verdade: um MariaDB privado com o binlog (subido do binário, como em
tests/apoio/mariadb_binlog.py), o Contextia local num processo e dois
ouvinte.py (um `coluna`, um `binlog`) com o mesmo --intervalo-dados, cada um
no seu banco; o escritor comita a mesma mudança nos dois bancos a intervalos
aleatórios e um leitor anota quando cada uma ficou visível.

Vazão: N mudanças passando pelo spool (guardar com fsync -> tomar -> enviar ->
concluir) contra as mesmas N enviadas direto por `enviar_dataset`.
"""

import argparse
import os
import subprocess
import sys
import time

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, RAIZ)

from bench.bench_latencia import (  # noqa: E402
    Leitor,
    mapa_do_movimento,
    medir_commits,
    percentil,
    rodada_privada,
)


def _mapa(pasta, dataset, estrategia):
    return mapa_do_movimento(
        os.path.join(pasta, 'mapa-%s.json' % estrategia), 'bench', dataset, estrategia
    )


def _banco(servidor):
    import sqlalchemy as sa

    banco = servidor.banco_de_teste()
    with banco.motor().begin() as con:
        con.execute(
            sa.text(
                'CREATE TABLE EMPRESAS (EMPRESA_ID INT PRIMARY KEY,'
                ' RAZAO_SOCIAL VARCHAR(60), ATIVA CHAR(1))'
            )
        )
        con.execute(sa.text("INSERT INTO EMPRESAS VALUES (1, 'Bench', 'S')"))
        con.execute(
            sa.text(
                'CREATE TABLE MOVIMENTO (ID INT PRIMARY KEY, EMPRESA_ID INT,'
                ' VALOR INT, ALTERADO_EM TIMESTAMP(6) NULL, KEY (ALTERADO_EM))'
            )
        )
        con.execute(sa.text('INSERT INTO MOVIMENTO VALUES (1, 1, 0, NOW(6) - INTERVAL 1 DAY)'))
    return banco


def latencias(servidor, contextia, chave, pasta, mudancas, intervalo, ocioso):
    import sqlalchemy as sa

    chaves = os.path.join(pasta, 'chaves.tsv')
    with open(chaves, 'w') as arquivo:
        arquivo.write('1\t%s\n' % chave)
    os.chmod(chaves, 0o600)
    ouvintes, bancos, leitores = {}, {}, {}
    for estrategia in ('coluna', 'binlog'):
        banco = bancos[estrategia] = _banco(servidor)
        dataset = 'mov_%s' % estrategia
        env = dict(os.environ, CONTEXTIA_ORIGEM=banco.url_origem, **contextia.ambiente())
        env.pop('CONTEXTIA_API_KEY', None)
        log = open(os.path.join(pasta, 'ouvinte-%s.log' % estrategia), 'wb')
        ouvintes[estrategia] = subprocess.Popen(
            [
                sys.executable,
                'ouvinte.py',
                '--mapping=' + _mapa(pasta, dataset, estrategia),
                '--source=generic',
                '--chaves=' + chaves,
                '--estado=' + os.path.join(pasta, 'estado-' + estrategia),
                '--varredura=nao',
                '--intervalo-dados=%s' % intervalo,
            ],
            cwd=RAIZ,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        leitores[estrategia] = Leitor(chave, dataset)
        leitores[estrategia].start()

    def inserir(banco, ident, n):
        with banco.motor().begin() as con:
            con.execute(
                sa.text('INSERT INTO MOVIMENTO VALUES (:i, 1, :v, NOW(6))'), {'i': ident, 'v': n}
            )

    return medir_commits(bancos, leitores, ouvintes, mudancas, intervalo, inserir, ocioso=ocioso)


def vazao(chave, pasta, quantos, repeticoes=3):
    """
    Mudanças/s: direto (`enviar_dataset`) e pelo spool (guardar o lote com
    fsync -> tomar -> enviar -> concluir), as mesmas N, alternados `repeticoes`
    vezes (medianas). E o pior caso do spool: cada mudança num lote só (uma
    transação por leitura do log), que é o fsync por arquivo.
    """
    import statistics

    from contextia_sync.fila.spool import Mudanca, Spool
    from contextia_sync.intake import cliente

    registros = [{'ID': n, 'VALOR': n} for n in range(quantos)]
    direta, pelo_spool, guardar = [], [], []
    for rodada in range(repeticoes):
        inicio = time.perf_counter()
        cliente.enviar_dataset('vazao_direta', registros, key='ID', api_key=chave)
        direta.append(time.perf_counter() - inicio)
        spool = Spool(os.path.join(pasta, 'spool-bench-%d' % rodada), maximo_itens=quantos + 1)
        inicio = time.perf_counter()
        spool.guardar(
            [Mudanca('vazao_spool', n, ['1'], 'insert', '0-1-%d' % n) for n in range(quantos)]
        )
        guardar.append(time.perf_counter() - inicio)
        tomados = spool.tomar('vazao_spool', quantos)
        cliente.enviar_dataset(
            'vazao_spool',
            [{'ID': t.chave, 'VALOR': t.chave} for t in tomados],
            key='ID',
            api_key=chave,
        )
        spool.concluir(tomados)
        pelo_spool.append(time.perf_counter() - inicio)
        assert spool.profundidade() == 0
        spool.fechar()
    um_a_um = min(quantos, 300)
    spool = Spool(os.path.join(pasta, 'spool-bench-1a1'), maximo_itens=quantos + 1)
    inicio = time.perf_counter()
    for n in range(um_a_um):
        spool.guardar([Mudanca('vazao_1a1', n, ['1'], 'insert', '0-1-%d' % n)])
    sozinha = time.perf_counter() - inicio
    spool.fechar()
    return (
        quantos / statistics.median(direta),
        quantos / statistics.median(pelo_spool),
        quantos / statistics.median(guardar),
        um_a_um / sozinha,
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--mudancas', type=int, default=40)
    p.add_argument('--intervalo-dados', type=float, default=2)
    p.add_argument('--vazao', type=int, default=2000)
    p.add_argument('--so-vazao', action='store_true', help='pula a latência')
    args = p.parse_args()
    from tests.apoio.mariadb_binlog import MariadbBinlog

    with rodada_privada('bench-binlog-', MariadbBinlog) as (servidor, contextia, chave, pasta):
        if not args.so_vazao:
            ocioso = {}
            resultado = latencias(
                servidor, contextia, chave, pasta, args.mudancas, args.intervalo_dados, ocioso
            )
            print(
                'commit -> visível, --intervalo-dados %s, %d mudanças (mesma rodada):'
                % (args.intervalo_dados, args.mudancas)
            )
            for estrategia, (tempos, faltam) in resultado.items():
                cpu = ocioso[estrategia]
                if tempos:
                    print(
                        '  %-7s p50 %.2f s  p95 %.2f s  máx %.2f s  (não vistas: %d);'
                        ' ocioso: %.2f%% de um núcleo'
                        % (
                            estrategia,
                            percentil(tempos, 0.5),
                            percentil(tempos, 0.95),
                            max(tempos),
                            faltam,
                            100 * cpu,
                        )
                    )
        direta, pelo_spool, guardar, sozinha = vazao(chave, pasta, args.vazao)
        print(
            'vazão, %d mudanças (medianas de 3, mesma rodada): direta %.0f/s; pelo spool'
            ' %.0f/s (razão spool/direta %.2f); só guardar o lote com fsync %.0f/s; uma'
            ' mudança por lote (o pior caso: fsync por arquivo) %.0f/s'
            % (args.vazao, direta, pelo_spool, pelo_spool / direta, guardar, sozinha)
        )


if __name__ == '__main__':
    main()
