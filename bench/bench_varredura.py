#!/usr/bin/env python3
"""
Issue 18: o custo da varredura independente do número de empresas.

    .venv/bin/python bench/bench_varredura.py [--linhas 1000000] [--empresas 50]
        [--repeticoes 3] [--bancos postgres] [--base DIR]

O carregar-todas.sh de verdade (bash + connector, o que a varredura do ouvinte
roda) sobre as MESMAS linhas de 12 colunas (a forma de um título a receber),
em duas tabelas do mesmo banco novo (derrubado no fim):

    1 empresa     toda linha da empresa 1
    N empresas    as mesmas linhas repartidas entre N empresas (g %% N + 1),
                  intercaladas no disco (o pior caso para a leitura em ordem)

A "leitura crua" é só o SELECT pelo driver, nas mesmas duas tabelas, medido na
mesma rodada: sem ordem (a varredura sequencial, o que a carga de todas as
empresas lê -- o piso da razão) e com `ORDER BY` da empresa (o que a leitura em
ordem custava: o banco salta no heap pelo índice para entregar em ordem as
linhas intercaladas). O destino é um intake mínimo
noutro processo (responde 200 com contagens, o `complete` e o dono de cada
chave): o tempo medido é o do cliente, não o de um servidor de mentira. Cada
carga roda num processo novo, alternando a ordem a cada repetição; a tabela
mostra a MEDIANA e a razão N empresas / 1 empresa da mesma rodada (o alvo da
issue: <= 1,25). `--base DIR`: o mesmo com o
carregar-todas.sh de um checkout anterior (um connector por empresa, D×S
leituras), na mesma rodada. Não é teste.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if RAIZ not in sys.path:
    sys.path.insert(0, RAIZ)

# O intake minimo noutro processo: o mesmo do bench_velocidade.py.
from bench.bench_velocidade import Sink, montar  # noqa: E402

COLUNAS = [
    'ID',
    'EMPRESA_ID',
    'NUMERO',
    'PARCELA',
    'CLIENTE',
    'EMISSAO',
    'VENCIMENTO',
    'VALOR',
    'SALDO',
    'SITUACAO',
    'ALTERADO_EM',
    'OBS',
]


def montar_cadastro(banco: Any, empresas: int) -> None:
    aspas = '"' if banco.tipo == 'postgres' else '`'
    banco.executar(
        'CREATE TABLE empresas ({a}EMPRESA_ID{a} INT PRIMARY KEY, {a}RAZAO{a} VARCHAR(40))'.format(
            a=aspas
        )
    )
    banco.executar(
        'INSERT INTO empresas VALUES %s'
        % ', '.join("(%d, 'Empresa %d')" % (e, e) for e in range(1, empresas + 1))
    )


# ---------------------------------------------------------------------------
# Uma carga: o carregar-todas.sh de um checkout, num processo novo
# ---------------------------------------------------------------------------
def preparar_pasta(pasta: str, tabela: str, empresas: int) -> tuple[str, str]:
    """(mapeamento, arquivo de chaves) de uma carga de `tabela` para `empresas` empresas."""
    from contextia_sync.provisionamento.chaves import Registro, gravar_registros

    os.makedirs(pasta, exist_ok=True)
    mapa = {
        'client': 'bench',
        'defaults': {
            'scope_column': 'EMPRESA_ID',
            'key': 'ID',
            'watch_column': 'ALTERADO_EM',
            'chunk': 500,
        },
        'projects': {
            'source_object': 'empresas',
            'scope_column': 'EMPRESA_ID',
            'name_column': 'RAZAO',
        },
        'datasets': [{'dataset': 'titulos', 'source_object': tabela, 'columns': COLUNAS}],
    }
    caminho_mapa = os.path.join(pasta, 'mapeamento.json')
    with open(caminho_mapa, 'w', encoding='utf-8') as f:
        json.dump(mapa, f)
    chaves = os.path.join(pasta, 'chaves.tsv')
    gravar_registros(
        chaves,
        [
            Registro(str(e), 'ctx_bench_%d' % e, e, None, 'pronto', None)
            for e in range(1, empresas + 1)
        ],
    )
    return caminho_mapa, chaves


def carga(codigo: str, pasta: str, url: str, sink_url: str, empresas: int) -> float:
    """Segundos de parede de um `bash carregar-todas.sh` (o de `codigo`), conferido."""
    mapa, chaves = os.path.join(pasta, 'mapeamento.json'), os.path.join(pasta, 'chaves.tsv')
    for sobra in (chaves + '.historico.json',):
        if os.path.exists(sobra):
            os.unlink(sobra)
    env = dict(
        os.environ,
        CONTEXTIA_MAPPING=mapa,
        CONTEXTIA_ORIGEM=url,
        CONTEXTIA_URL=sink_url,
        CONTEXTIA_PYTHON=sys.executable,
        CONTEXTIA_COLETA=codigo,
        CONTEXTIA_PROGRESSO_SEGUNDOS='3600',
    )
    env.pop('CONTEXTIA_API_KEY', None)
    inicio = time.perf_counter()
    feito = subprocess.run(
        ['bash', os.path.join(codigo, 'carregar-todas.sh'), chaves],
        env=env,
        cwd=codigo,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=3600,
    )
    segundos = time.perf_counter() - inicio
    saida = feito.stdout.decode('utf-8', 'replace')
    if feito.returncode != 0 or 'resumo carregar-todas: %d ok, 0 com falha' % empresas not in saida:
        raise SystemExit('carga falhou (%s, %d empresas):\n%s' % (codigo, empresas, saida[-3000:]))
    registros = sum(int(n) for n in re.findall(r'resumo escopo=\S+: .*?registros=(\d+)', saida))
    return segundos if registros else float('nan')


def leitura_crua(url: str, tabela: str, ordem: bool = False) -> float:
    """Segundos da leitura sozinha pelo driver (sem ordem: o piso da carga)."""
    import sqlalchemy as sa

    motor = sa.create_engine(url)
    try:
        with motor.connect() as conn:
            inicio = time.perf_counter()
            resultado = conn.execution_options(stream_results=True, yield_per=2000).execute(
                sa.text(
                    'SELECT * FROM %s' % tabela
                    + (
                        ' ORDER BY %s'
                        % ('"EMPRESA_ID"' if motor.dialect.name == 'postgresql' else 'EMPRESA_ID')
                        if ordem
                        else ''
                    )
                )
            )
            for _ in resultado:
                pass
            return time.perf_counter() - inicio
    finally:
        motor.dispose()


def rodada(
    tipo: str, linhas: int, empresas: int, repeticoes: int, base: str | None
) -> dict[str, list[float]]:
    from tests.apoio import bancos

    banco = bancos.criar_banco(tipo, 'varredura')
    destino = Sink()
    try:
        montar(banco, linhas, 'bench_1', 1)
        montar(banco, linhas, 'bench_n', empresas)
        montar_cadastro(banco, empresas)
        url = banco.url_origem
        with tempfile.TemporaryDirectory(prefix='bench-varredura-') as pasta:
            # (rotulo, codigo, pasta, empresas)
            casos = []
            for codigo, nome in ((RAIZ, 'novo'),) + (((base, 'antigo'),) if base else ()):
                um = os.path.join(pasta, nome + '-1')
                varias = os.path.join(pasta, nome + '-n')
                preparar_pasta(um, 'bench_1', 1)
                preparar_pasta(varias, 'bench_n', empresas)
                casos += [
                    ('%s: 1 empresa' % nome, codigo, um, 1),
                    ('%s: %d empresas' % (nome, empresas), codigo, varias, empresas),
                ]
            medidas: dict[str, list[float]] = {c[0]: [] for c in casos}
            crua = {
                '%s: 1 empresa' % nome: ('bench_1', ordem)
                for nome, ordem in (('leitura crua', False), ('crua ORDER BY', True))
            }
            crua.update(
                {
                    '%s: %d empresas' % (nome, empresas): ('bench_n', ordem)
                    for nome, ordem in (('leitura crua', False), ('crua ORDER BY', True))
                }
            )
            medidas.update({rotulo: [] for rotulo in crua})
            for volta in range(repeticoes):
                for rotulo, (tabela_lida, ordem) in (
                    list(crua.items()) if volta % 2 == 0 else list(reversed(crua.items()))
                ):
                    medidas[rotulo].append(leitura_crua(url, tabela_lida, ordem))
                # Alterna a ordem: o aquecimento (cache do banco) nao favorece um lado.
                for rotulo, codigo, alvo, quantas in (
                    casos if volta % 2 == 0 else list(reversed(casos))
                ):
                    segundos = carga(codigo, alvo, url, destino.url, quantas)
                    medidas[rotulo].append(segundos)
                    print(
                        '  [%s %d/%d] %-24s %7.1f s  %8.0f linhas/s'
                        % (tipo, volta + 1, repeticoes, rotulo, segundos, linhas / segundos),
                        flush=True,
                    )
            return medidas
    finally:
        destino.parar()
        bancos.derrubar_banco(banco)


def tabela(tipo: str, linhas: int, empresas: int, medidas: dict[str, list[float]]) -> None:
    print(
        '\n%s, %d linhas de 12 colunas, carregar-todas.sh -> intake mínimo, mediana de %d:'
        % (tipo, linhas, len(next(iter(medidas.values()))))
    )
    print('%-26s %10s %12s %14s' % ('carga', 'segundos', 'linhas/s', '÷ 1 empresa'))
    for nome in ('leitura crua', 'crua ORDER BY', 'novo', 'antigo'):
        um = medidas.get('%s: 1 empresa' % nome)
        if not um:
            continue
        base = statistics.median(um)
        for rotulo in ('%s: 1 empresa' % nome, '%s: %d empresas' % (nome, empresas)):
            mediana = statistics.median(medidas[rotulo])
            print(
                '%-26s %10.1f %12.0f %13.2fx' % (rotulo, mediana, linhas / mediana, mediana / base)
            )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--linhas', type=int, default=1000000)
    p.add_argument('--empresas', type=int, default=50)
    p.add_argument('--repeticoes', type=int, default=3)
    p.add_argument('--bancos', default='postgres')
    p.add_argument('--base', help='checkout do código de antes (um connector por empresa)')
    args = p.parse_args()
    print(
        'carga da máquina no início: %s' % ' '.join('%.2f' % x for x in os.getloadavg()), flush=True
    )
    resultados = []
    for tipo in args.bancos.split(','):
        resultados.append(
            (
                tipo,
                rodada(
                    tipo,
                    args.linhas,
                    args.empresas,
                    args.repeticoes,
                    os.path.abspath(args.base) if args.base else None,
                ),
            )
        )
    for tipo, medidas in resultados:
        tabela(tipo, args.linhas, args.empresas, medidas)
    print('\ncarga da máquina no fim: %s' % ' '.join('%.2f' % x for x in os.getloadavg()))
    return 0


if __name__ == '__main__':
    sys.exit(main())
