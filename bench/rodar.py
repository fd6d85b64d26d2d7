#!/usr/bin/env python3
"""
Roda os benchmarks, um processo por benchmark (o pico de memória de um não
contamina o outro). `make bench` roda todos; `make bench ARGS="origem sonda"`
escolhe. A tortura longa não entra aqui: `python3 bench/tortura.py --longo`.
"""

import os
import subprocess
import sys
import time

AQUI = os.path.dirname(os.path.abspath(__file__))
BENCHS = {
    'intake': 'bench_intake.py',  # cliente -> Contextia local vs so serializar
    'origem': 'bench_origem.py',  # fetch em streaming vs cursor cru do driver
    'latencia': 'bench_latencia.py',  # commit -> visivel no Contextia
    'sonda': 'bench_sonda.py',  # ciclo ocioso: 100 mil vs 2 milhoes de linhas
    'ocioso': 'bench_ocioso.py',  # issue 12: ciclo ocioso Sakila, antes x depois
    'descobrir': 'bench_descobrir.py',  # issue 16: 200 tabelas, descobrir vs inspector puro
    'velocidade': 'bench_velocidade.py',  # issue 18: driver cru -> envio, em voo, gzip
    'reconciliacao': 'bench_reconciliacao.py',  # issue 17: DELETE -> sumiu, custo, memoria
    'linhas': 'bench_linhas.py',  # issue 30: itens pela nota, binlog e slot_logico x coluna
    'hora_cheia': 'bench_hora_cheia.py',  # issue 31: mudanças/s sustentadas, 1M num carimbo
    'ocioso_sessao': 'bench_ocioso_sessao.py',  # issue 31: comandos por ciclo ocioso
}


def main(argv):
    nomes = argv or list(BENCHS)
    desconhecidos = [n for n in nomes if n not in BENCHS]
    if desconhecidos:
        print(
            'benchmark desconhecido: %s. Os que existem: %s.'
            % (', '.join(desconhecidos), ', '.join(BENCHS)),
            file=sys.stderr,
        )
        return 2
    falhas = []
    for nome in nomes:
        print('===== bench %s =====' % nome, flush=True)
        inicio = time.monotonic()
        codigo = subprocess.call([sys.executable, os.path.join(AQUI, BENCHS[nome])])
        print(
            '----- %s: saiu com %s em %.0fs' % (nome, codigo, time.monotonic() - inicio), flush=True
        )
        if codigo:
            falhas.append(nome)
    if falhas:
        print('benchmarks com erro: %s' % ', '.join(falhas), file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
