#!/usr/bin/env python3
"""
Bench do adaptador de origem: streaming de 1.000.000 de linhas via `fetch`.

    .venv/bin/python bench/bench_origem.py [--linhas 1000000] [--repeticoes 3]
        [--bancos postgres,mariadb]

Mede, no PostgreSQL e no MariaDB da máquina (banco novo, derrubado no fim):
  * PICO DE RSS do processo lendo 100k e 1M linhas. Cada medida roda num
    SUBPROCESSO próprio: o pico de um processo nunca desce, então medir 1M
    depois de 100k no mesmo processo mentiria. Tem de ser plano, não 10x.
  * LINHAS/S do `fetch` como RAZAO contra um laço cru do driver (cursor de
    servidor do psycopg / SSCursor do PyMySQL) na mesma consulta, na mesma
    execução -- mediana de N repetições, alternadas. Duas linhas de base: o
    laço só com tuplas, e o laço montando o mesmo dict que o fetch entrega.
Não é teste (nada aqui é cronometrado pela suíte).
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if RAIZ not in sys.path:
    sys.path.insert(0, RAIZ)

COLUNAS = ['ID', 'EMPRESA_ID', 'VALOR', 'ALTERADO_EM', 'HISTORICO']
LOTE = 2000


def montar(banco: Any, linhas: int) -> None:
    """Tabela de ~150 bytes por linha: inteiro, escopo, Decimal, timestamp, texto."""
    if banco.tipo == 'postgres':
        banco.executar(
            'CREATE TABLE bench AS SELECT g AS "ID", g %% 11 AS "EMPRESA_ID",'
            ' (g * 1.37)::numeric(16,2) AS "VALOR",'
            " timestamp '2026-01-01' + g * interval '1 second' AS \"ALTERADO_EM\","
            ' md5(g::text) || md5((g+1)::text) || \'historico\' AS "HISTORICO"'
            ' FROM generate_series(1, %d) g' % linhas
        )
        banco.executar('ALTER TABLE bench ADD PRIMARY KEY ("ID")')
        banco.executar('VACUUM ANALYZE bench')
    else:
        banco.executar(
            'CREATE TABLE bench (ID INT PRIMARY KEY, EMPRESA_ID INT, VALOR DECIMAL(16,2),'
            ' ALTERADO_EM DATETIME, HISTORICO VARCHAR(100))'
        )
        banco.executar(
            'INSERT INTO bench SELECT seq, MOD(seq, 11), seq * 1.37,'
            " TIMESTAMP '2026-01-01 00:00:00' + INTERVAL seq SECOND,"
            " CONCAT(MD5(seq), MD5(seq + 1), 'historico') FROM seq_1_to_%d" % linhas
        )


# ---------------------------------------------------------------------------
# Filho: uma leitura, um processo
# ---------------------------------------------------------------------------


def _laco_cru(tipo: str, url: str, desde: int, como_dict: bool = False) -> tuple[int, float]:
    import sqlalchemy as sa

    u = sa.engine.make_url(url)
    sql = 'SELECT %s FROM bench WHERE %s > %%s' % (
        ', '.join(('"%s"' if tipo == 'postgres' else '`%s`') % c for c in COLUNAS),
        '"ID"' if tipo == 'postgres' else '`ID`',
    )
    conn: Any
    cur: Any
    if tipo == 'postgres':
        import psycopg

        conn = psycopg.connect(host=u.host, port=u.port, user=u.username, dbname=u.database)
        cur = conn.cursor(name='bench_cru')
        cur.itersize = LOTE
    else:
        import pymysql
        import pymysql.cursors

        conn = pymysql.connect(
            host=u.host,
            port=u.port or 3306,
            user=u.username,
            database=u.database,
            charset='utf8mb4',
            cursorclass=pymysql.cursors.SSCursor,
        )
        cur = conn.cursor()
    inicio = time.perf_counter()
    cur.execute(sql, (desde,))
    lidas = 0
    chaves = tuple(COLUNAS)
    if como_dict:
        # o mesmo dict que o fetch entrega: separa o custo do dict do custo do SDK
        for linha in cur:
            dict(zip(chaves, linha, strict=False))  # como o fetch: sem conferir por linha
            lidas += 1
    else:
        for _linha in cur:
            lidas += 1
    segundos = time.perf_counter() - inicio
    cur.close()
    conn.close()
    return lidas, segundos


def _laco_fetch(url: str, desde: int, em_lista: bool = False) -> tuple[int, float]:
    from contextia_sync.origem.generico import Origem

    origem = Origem(url, timeout=0, linhas_por_lote=LOTE).conectar()
    origem.colunas('bench')  # reflexao fora do cronometro (e cacheada)
    inicio = time.perf_counter()
    lidas = 0
    linhas: Any = origem.fetch('bench', COLUNAS, since=('ID', desde))
    if em_lista:
        # CONTROLE: quem materializa a leitura cresce com ela -- prova que o
        # medidor enxerga crescimento quando ele existe.
        linhas = list(linhas)
    for _linha in linhas:
        lidas += 1
    segundos = time.perf_counter() - inicio
    origem.fechar()
    return lidas, segundos


def pico_kib() -> int:
    """
    Pico de RSS deste processo: VmHWM do /proc (Linux).

    Não `ru_maxrss`: no Linux ele passa do pai para o filho através do
    fork+exec, e o filho de um pai de 68 MiB já "nasce" com pico de 68 MiB.
    """
    try:
        with open('/proc/self/status') as arquivo:
            for linha in arquivo:
                if linha.startswith('VmHWM:'):
                    return int(linha.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def filho(modo: str, tipo: str, url: str, total: int, linhas: int) -> None:
    # importa tudo ANTES de medir a base: o pico que interessa e o da leitura
    import sqlalchemy  # noqa: F401
    import psycopg  # noqa: F401
    import pymysql  # noqa: F401
    import contextia_sync.origem.generico  # noqa: F401

    base = pico_kib()
    desde = total - linhas
    if modo in ('fetch', 'lista'):
        lidas, segundos = _laco_fetch(url, desde, em_lista=(modo == 'lista'))
    else:
        lidas, segundos = _laco_cru(tipo, url, desde, como_dict=(modo == 'cru_dict'))
    pico = pico_kib()
    print(json.dumps({'lidas': lidas, 'segundos': segundos, 'pico_kib': pico, 'base_kib': base}))


def rodar_filho(modo: str, tipo: str, url: str, total: int, linhas: int) -> dict[str, Any]:
    saida = subprocess.run(
        [
            sys.executable,
            os.path.abspath(__file__),
            '--filho',
            modo,
            tipo,
            url,
            str(total),
            str(linhas),
        ],
        capture_output=True,
        text=True,
        check=True,
        env=dict(os.environ, PYTHONHASHSEED='0'),
    )
    dado = json.loads(saida.stdout.strip().splitlines()[-1])
    if dado['lidas'] != linhas:
        raise SystemExit('%s/%s leu %s linhas, esperava %s' % (tipo, modo, dado['lidas'], linhas))
    return dado


# ---------------------------------------------------------------------------
# Pai
# ---------------------------------------------------------------------------


def medir(tipo: str, total: int, repeticoes: int, controle: bool = False) -> dict[str, Any] | None:
    from tests.apoio import bancos

    ok, motivo = bancos.servidor_disponivel(tipo)
    if not ok:
        print('%-9s PULADO: %s' % (tipo, motivo))
        return None
    banco = bancos.criar_banco(tipo, 'bench')
    try:
        t0 = time.perf_counter()
        montar(banco, total)
        print('%-9s %d linhas montadas em %.1fs' % (tipo, total, time.perf_counter() - t0))
        menor = total // 10
        res: dict[str, Any] = {'tipo': tipo}
        for modo in ('fetch', 'cru'):
            res['rss_%s_menor' % modo] = rodar_filho(modo, tipo, banco.url_origem, total, menor)
        vazao: dict[str, list[float]] = {'fetch': [], 'cru': [], 'cru_dict': []}
        picos: dict[str, list[dict[str, Any]]] = {'fetch': [], 'cru': [], 'cru_dict': []}
        for _ in range(repeticoes):
            # alternados: a mesma carga na maquina
            for modo in ('cru', 'fetch', 'cru_dict'):
                d = rodar_filho(modo, tipo, banco.url_origem, total, total)
                vazao[modo].append(d['lidas'] / d['segundos'])
                picos[modo].append(d)
        res['vazao'] = vazao
        if controle:
            res['controle'] = [
                rodar_filho('lista', tipo, banco.url_origem, total, n) for n in (menor, total)
            ]
        res['rss_maior'] = {m: max(picos[m], key=lambda d: d['pico_kib']) for m in picos}
        return res
    finally:
        bancos.derrubar_banco(banco)


def _rotulo(n: int) -> str:
    return '%dM' % (n // 1000000) if n % 1000000 == 0 else '%dk' % (n // 1000)


def relatorio(res: list[dict[str, Any]], total: int) -> None:
    mib = 1024.0
    print()
    menor, maior = _rotulo(total // 10), _rotulo(total)
    print(
        'pico = VmHWM do processo filho; (+x) = acima do RSS do mesmo processo'
        ' depois dos imports e antes de ler'
    )
    print(
        '%-9s %-6s %20s %20s %10s %12s'
        % (
            'banco',
            'leitor',
            'pico ' + menor,
            'pico ' + maior,
            '%s/%s' % (maior, menor),
            'linhas/s',
        )
    )
    for r in res:
        for modo in ('fetch', 'cru'):
            d_menor, d_maior = r['rss_%s_menor' % modo], r['rss_maior'][modo]
            menor = d_menor['pico_kib'] / mib
            maior = d_maior['pico_kib'] / mib
            print(
                '%-9s %-6s %8.1f MiB (+%5.1f) %8.1f MiB (+%5.1f) %9.2fx %12.0f'
                % (
                    r['tipo'],
                    modo,
                    menor,
                    menor - d_menor['base_kib'] / mib,
                    maior,
                    maior - d_maior['base_kib'] / mib,
                    maior / menor,
                    statistics.median(r['vazao'][modo]),
                )
            )
        razao = statistics.median(r['vazao']['fetch']) / statistics.median(r['vazao']['cru'])
        base = r['rss_maior']['fetch']['base_kib'] / mib
        razao_dict = statistics.median(r['vazao']['fetch']) / statistics.median(
            r['vazao']['cru_dict']
        )
        if 'controle' in r:
            a, b = [d['pico_kib'] / mib for d in r['controle']]
            print(
                '%-9s CONTROLE list(fetch): %.1f MiB -> %.1f MiB (%.1fx): o medidor vê'
                ' crescimento quando há' % (r['tipo'], a, b, b / a)
            )
        print(
            '%-9s fetch/cru = %.2f; fetch/(cru + dict) = %.2f (medianas de %d;'
            ' cru+dict = %.0f linhas/s) | RSS base antes de ler: %.1f MiB'
            % (
                r['tipo'],
                razao,
                razao_dict,
                len(r['vazao']['fetch']),
                statistics.median(r['vazao']['cru_dict']),
                base,
            )
        )


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == '--filho':
        modo, tipo, url, total, linhas = sys.argv[2:7]
        filho(modo, tipo, url, int(total), int(linhas))
        return 0
    p = argparse.ArgumentParser(description=(__doc__ or '').split('\n')[1])
    p.add_argument('--linhas', type=int, default=1000000)
    p.add_argument('--repeticoes', type=int, default=3)
    p.add_argument('--bancos', default='postgres,mariadb')
    p.add_argument(
        '--controle',
        action='store_true',
        help='mede também list(fetch), que TEM de crescer (prova o medidor)',
    )
    args = p.parse_args()
    resultados = [
        r
        for r in (
            medir(t, args.linhas, args.repeticoes, args.controle) for t in args.bancos.split(',')
        )
        if r
    ]
    relatorio(resultados, args.linhas)
    return 0


if __name__ == '__main__':
    sys.exit(main())
