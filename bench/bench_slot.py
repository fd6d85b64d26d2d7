#!/usr/bin/env python3
"""
`slot_logico` contra `coluna`, na mesma rodada: do COMMIT ao registro visível no
Contextia (p50/p95), com o mesmo --intervalo-dados.

    .venv/bin/python bench/bench_slot.py [--mudancas 40] [--intervalo-dados 2]

Tudo de verdade: um PostgreSQL privado com wal_level=logical (subido dos
binários, como em tests/apoio/postgres_logico.py), o Contextia local num
processo e dois ouvinte.py (um `coluna`, um `slot_logico`), cada um no seu
banco; o escritor comita a mesma mudança nos dois bancos a intervalos
aleatórios e um leitor anota quando cada uma ficou visível.
"""

import argparse
import os
import subprocess
import sys

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, RAIZ)

from bench.bench_latencia import (  # noqa: E402
    Leitor,
    mapa_do_movimento,
    medir_commits,
    percentil,
    rodada_privada,
)

ESTRATEGIAS = ('coluna', 'slot_logico')


def _mapa(pasta, dataset, estrategia):
    # O cliente da o nome do slot, que e do cluster inteiro: um por dataset.
    return mapa_do_movimento(
        os.path.join(pasta, 'mapa-%s.json' % dataset),
        'bench_%s_%s' % (os.getpid(), dataset),
        dataset,
        estrategia,
    )


def _banco(servidor):
    banco = servidor.banco_de_teste()
    for sql in (
        'CREATE TABLE "EMPRESAS" ("EMPRESA_ID" INT PRIMARY KEY,'
        ' "RAZAO_SOCIAL" VARCHAR(60), "ATIVA" CHAR(1))',
        """INSERT INTO "EMPRESAS" VALUES (1, 'Bench', 'S')""",
        'CREATE TABLE "MOVIMENTO" ("ID" INT PRIMARY KEY, "EMPRESA_ID" INT,'
        ' "VALOR" INT, "ALTERADO_EM" TIMESTAMP(6))',
        'CREATE INDEX ON "MOVIMENTO" ("ALTERADO_EM")',
        'ALTER TABLE "MOVIMENTO" REPLICA IDENTITY FULL',
        """INSERT INTO "MOVIMENTO" VALUES (1, 1, 0, now() - interval '1 day')""",
    ):
        banco.admin(sql)
    return banco


def arquivo_de_chaves(pasta, chave):
    """O chaves.tsv da empresa 1 (a única do _banco) com a chave dada."""
    chaves = os.path.join(pasta, 'chaves.tsv')
    with open(chaves, 'w') as arquivo:
        arquivo.write('1\t%s\n' % chave)
    os.chmod(chaves, 0o600)
    return chaves


def subir_ouvinte(
    banco,
    contextia,
    pasta,
    chaves,
    dataset,
    estrategia,
    intervalo=None,
    criar_slot=True,
    log='ouvinte',
    **ambiente,
):
    """
    O ouvinte.py do `dataset` sobre `banco`, como processo, com o estado em
    <pasta>/estado-<dataset> e o log em <pasta>/<log>-<dataset>.log; com
    `slot_logico`, o --criar-slot antes (idempotente). `ambiente`: variáveis
    a mais (CONTEXTIA_SPOOL_MAXIMO_ITENS...).
    """
    env = dict(
        os.environ,
        CONTEXTIA_ORIGEM=banco.url_origem,
        CONTEXTIA_ORIGEM_DBA=banco.url_admin,
        **contextia.ambiente(),
        **ambiente,
    )
    env.pop('CONTEXTIA_API_KEY', None)
    argv = [
        sys.executable,
        'ouvinte.py',
        '--mapping=' + _mapa(pasta, dataset, estrategia),
        '--source=generic',
        '--chaves=' + chaves,
        '--estado=' + os.path.join(pasta, 'estado-' + dataset),
        '--varredura=nao',
    ]
    if intervalo is not None:
        argv.append('--intervalo-dados=%s' % intervalo)
    if estrategia == 'slot_logico' and criar_slot:
        subprocess.run(
            argv + ['--criar-slot'], cwd=RAIZ, env=env, check=True, stdout=subprocess.DEVNULL
        )
    saida = open(os.path.join(pasta, '%s-%s.log' % (log, dataset)), 'ab')
    return subprocess.Popen(argv, cwd=RAIZ, env=env, stdout=saida, stderr=subprocess.STDOUT)


def latencias(servidor, contextia, chave, pasta, mudancas, intervalo):
    chaves = arquivo_de_chaves(pasta, chave)
    ouvintes, bancos, leitores = {}, {}, {}
    for estrategia in ESTRATEGIAS:
        banco = bancos[estrategia] = _banco(servidor)
        dataset = 'mov_%s' % estrategia
        ouvintes[estrategia] = subir_ouvinte(
            banco, contextia, pasta, chaves, dataset, estrategia, intervalo
        )
        leitores[estrategia] = Leitor(chave, dataset)
        leitores[estrategia].start()

    def inserir(banco, ident, n):
        banco.admin('INSERT INTO "MOVIMENTO" VALUES (%d, 1, %d, clock_timestamp())' % (ident, n))

    return medir_commits(bancos, leitores, ouvintes, mudancas, intervalo, inserir)


def rodada(prefixo):
    """O PostgreSQL privado com wal_level=logical e o Contextia local (rodada_privada)."""
    from tests.apoio.postgres_logico import PostgresLogico, binarios

    return rodada_privada(prefixo, lambda pasta: PostgresLogico(pasta, binarios()))


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--mudancas', type=int, default=40)
    p.add_argument('--intervalo-dados', type=float, default=2)
    args = p.parse_args()
    with rodada('bench-slot-') as (servidor, contextia, chave, pasta):
        resultado = latencias(
            servidor, contextia, chave, pasta, args.mudancas, args.intervalo_dados
        )
    print(
        'commit -> visível, --intervalo-dados %s, %d mudanças (mesma rodada):'
        % (args.intervalo_dados, args.mudancas)
    )
    for estrategia, (tempos, faltam) in resultado.items():
        if tempos:
            print(
                '  %-11s p50 %.2f s  p95 %.2f s  máx %.2f s  (não vistas: %d)'
                % (estrategia, percentil(tempos, 0.5), percentil(tempos, 0.95), max(tempos), faltam)
            )
    coluna, slot = (resultado[e][0] for e in ESTRATEGIAS)
    if coluna and slot:
        print(
            '  razão p95 slot_logico/coluna: %.2f'
            % (percentil(slot, 0.95) / percentil(coluna, 0.95))
        )


if __name__ == '__main__':
    main()
