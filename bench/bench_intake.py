#!/usr/bin/env python3
"""
Quanto custa o caminho cliente -> Contextia local, em registros/s.

    .venv/bin/python bench/bench_intake.py [--registros 100000] [--repeticoes 3]

Mede, na MESMA execução e com os mesmos registros (~12 colunas, tipos de um
título a receber: int, texto, Decimal, date, datetime):

    linha de base   serializar_registro + json.dumps em lotes (o mínimo que
                    qualquer envio paga, sem rede nem servidor)
    chunk 500       enviar_dataset para um ServidorLocal, lotes de 500
    chunk 2000      idem, lotes de 2000

Cada repetição usa um dataset novo (todos os registros são `inserted`). Mostra
a mediana e a RAZAO contra a linha de base: ela diz quanto HTTP + servidor
(validação, hash, SQLite) custam além de serializar. Não é teste cronometrado.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import decimal
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, RAIZ)

from contextia_local.processo import ServidorLocal           # noqa: E402
from contextia_sync.intake import cliente       # noqa: E402
from contextia_sync.intake.serializacao import serializar_registro  # noqa: E402


def titulos(quantidade: int) -> Iterator[dict[str, Any]]:
    base = datetime.datetime(2026, 1, 1, 8, 0, 0)
    for i in range(quantidade):
        yield {
            'ID': i,
            'EMPRESA_ID': 297,
            'NUMERO': 'NF-%08d' % i,
            'PARCELA': i % 12 + 1,
            'CLIENTE': 'Cliente %05d Comercio de Peças Ltda' % (i % 5000),
            'EMISSAO': (base + datetime.timedelta(days=i % 400)).date(),
            'VENCIMENTO': (base + datetime.timedelta(days=i % 400 + 30)).date(),
            'VALOR': decimal.Decimal('%d.%02d' % (100 + i % 90000, i % 100)),
            'SALDO': decimal.Decimal('%d.%02d' % (i % 5000, (i * 7) % 100)),
            'SITUACAO': 'ABCP'[i % 4],
            'ALTERADO_EM': base + datetime.timedelta(seconds=i * 13),
            'OBS': None if i % 3 else 'renegociado em %d' % (i % 31),
        }


def linha_de_base(quantidade: int, chunk: int) -> tuple[float, int]:
    inicio = time.perf_counter()
    lote: list[dict[str, Any]] = []
    total_bytes = 0
    for registro in titulos(quantidade):
        lote.append(serializar_registro(registro))
        if len(lote) == chunk:
            total_bytes += len(json.dumps({'dataset': 'x', 'records': lote},
                                          ensure_ascii=False, separators=(',', ':')).encode())
            lote = []
    if lote:
        total_bytes += len(json.dumps({'dataset': 'x', 'records': lote}).encode())
    return quantidade / (time.perf_counter() - inicio), total_bytes


def envio(quantidade: int, chunk: int, chave: str, dataset: str) -> float:
    inicio = time.perf_counter()
    resultado = cliente.enviar_dataset(dataset, titulos(quantidade), key='ID', chunk=chunk,
                                       api_key=chave)
    segundos = time.perf_counter() - inicio
    if resultado.lotes_erro or resultado.inserted != quantidade:
        contagens = {k: v for k, v in dataclasses.asdict(resultado).items() if k != 'erros'}
        raise SystemExit('envio falhou: %r' % contagens)
    return quantidade / segundos


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--registros', type=int, default=100000)
    p.add_argument('--repeticoes', type=int, default=3)
    args = p.parse_args()

    with tempfile.TemporaryDirectory(prefix='bench-intake-') as pasta, \
            ServidorLocal(pasta) as servidor:
        os.environ.update(servidor.ambiente())
        chave = servidor.criar_projeto_com_chave('bench')
        medidas: dict[str, list[float]] = {'linha de base (serializar+JSON)': [],
                                           'chunk 500': [], 'chunk 2000': []}
        tamanho = 0
        for repeticao in range(args.repeticoes):
            # Alterna a ordem para o aquecimento nao favorecer sempre o mesmo.
            taxa, tamanho = linha_de_base(args.registros, 500)
            medidas['linha de base (serializar+JSON)'].append(taxa)
            for chunk in ((500, 2000) if repeticao % 2 == 0 else (2000, 500)):
                medidas['chunk %d' % chunk].append(
                    envio(args.registros, chunk, chave, 'bench_%d_%d' % (chunk, repeticao)))
            print('repetição %d/%d ok' % (repeticao + 1, args.repeticoes), file=sys.stderr)

    base = statistics.median(medidas['linha de base (serializar+JSON)'])
    print('\n%d registros de 12 colunas (~%d bytes de JSON por registro), %d repetições,'
          ' mediana:' % (args.registros, tamanho // args.registros, args.repeticoes))
    print('%-34s %14s %18s' % ('caminho', 'registros/s', 'razão vs base'))
    for nome, valores in medidas.items():
        mediana = statistics.median(valores)
        print('%-34s %14.0f %17.2fx' % (nome, mediana, mediana / base))
    print('\n(razão 0.30x = o envio real faz 30% da vazao de só serializar; o resto e'
          ' HTTP, validação, hash e SQLite no servidor local, num processo a parte)')


if __name__ == '__main__':
    main()
