#!/usr/bin/env python3
"""
Bench do adaptador de origem: streaming de 1.000.000 de linhas via `fetch`.

    .venv/bin/python bench/bench_origem.py [--linhas 1000000] [--repeticoes 3]
        [--bancos postgres,mariadb]

Mede, no PostgreSQL e no MariaDB da maquina (banco novo, derrubado no fim):
  * PICO DE RSS do processo lendo 100k e 1M linhas. Cada medida roda num
    SUBPROCESSO proprio: o pico de um processo nunca desce, entao medir 1M
    depois de 100k no mesmo processo mentiria. Tem de ser plano, nao 10x.
  * LINHAS/S do `fetch` como RAZAO contra um laco cru do driver (cursor de
    servidor do psycopg / SSCursor do PyMySQL) na mesma consulta, na mesma
    execucao -- mediana de N repeticoes, alternadas.
Nao e teste (nada aqui e cronometrado pela suite).
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _caminho in (RAIZ, os.path.join(RAIZ, 'sources')):
    if _caminho not in sys.path:
        sys.path.insert(0, _caminho)

COLUNAS = ['ID', 'EMPRESA_ID', 'VALOR', 'ALTERADO_EM', 'HISTORICO']
LOTE = 2000


def montar(banco, linhas):
    """Tabela de ~150 bytes por linha: inteiro, escopo, Decimal, timestamp, texto."""
    if banco.tipo == 'postgres':
        banco.executar(
            'CREATE TABLE bench AS SELECT g AS "ID", g %% 11 AS "EMPRESA_ID",'
            ' (g * 1.37)::numeric(16,2) AS "VALOR",'
            " timestamp '2026-01-01' + g * interval '1 second' AS \"ALTERADO_EM\","
            " md5(g::text) || md5((g+1)::text) || 'historico' AS \"HISTORICO\""
            ' FROM generate_series(1, %d) g' % linhas)
        banco.executar('ALTER TABLE bench ADD PRIMARY KEY ("ID")')
        banco.executar('VACUUM ANALYZE bench')
    else:
        banco.executar(
            'CREATE TABLE bench (ID INT PRIMARY KEY, EMPRESA_ID INT, VALOR DECIMAL(16,2),'
            ' ALTERADO_EM DATETIME, HISTORICO VARCHAR(100))')
        banco.executar(
            'INSERT INTO bench SELECT seq, MOD(seq, 11), seq * 1.37,'
            " TIMESTAMP '2026-01-01 00:00:00' + INTERVAL seq SECOND,"
            " CONCAT(MD5(seq), MD5(seq + 1), 'historico') FROM seq_1_to_%d" % linhas)


# ---------------------------------------------------------------------------
# Filho: uma leitura, um processo
# ---------------------------------------------------------------------------

def _laco_cru(tipo, url, desde):
    import sqlalchemy as sa
    u = sa.engine.make_url(url)
    sql = 'SELECT %s FROM bench WHERE %s > %%s' % (
        ', '.join(('"%s"' if tipo == 'postgres' else '`%s`') % c for c in COLUNAS),
        '"ID"' if tipo == 'postgres' else '`ID`')
    if tipo == 'postgres':
        import psycopg
        conn = psycopg.connect(host=u.host, port=u.port, user=u.username,
                               dbname=u.database)
        cur = conn.cursor(name='bench_cru')
        cur.itersize = LOTE
    else:
        import pymysql
        import pymysql.cursors
        conn = pymysql.connect(host=u.host, port=u.port or 3306, user=u.username,
                               database=u.database, charset='utf8mb4',
                               cursorclass=pymysql.cursors.SSCursor)
        cur = conn.cursor()
    inicio = time.perf_counter()
    cur.execute(sql, (desde,))
    lidas = 0
    for _linha in cur:
        lidas += 1
    segundos = time.perf_counter() - inicio
    cur.close()
    conn.close()
    return lidas, segundos


def _laco_fetch(url, desde):
    import generic
    origem = generic.Origem(url, timeout=0, linhas_por_lote=LOTE).conectar()
    origem.colunas('bench')            # reflexao fora do cronometro (e cacheada)
    inicio = time.perf_counter()
    lidas = 0
    for _linha in origem.fetch('bench', COLUNAS, since=('ID', desde)):
        lidas += 1
    segundos = time.perf_counter() - inicio
    origem.fechar()
    return lidas, segundos


def filho(modo, tipo, url, total, linhas):
    # importa tudo ANTES de medir a base: o pico que interessa e o da leitura
    import sqlalchemy  # noqa: F401
    import psycopg     # noqa: F401
    import pymysql     # noqa: F401
    import generic     # noqa: F401
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    desde = total - linhas
    if modo == 'fetch':
        lidas, segundos = _laco_fetch(url, desde)
    else:
        lidas, segundos = _laco_cru(tipo, url, desde)
    pico = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({'lidas': lidas, 'segundos': segundos,
                      'pico_kib': pico, 'base_kib': base}))


def rodar_filho(modo, tipo, url, total, linhas):
    saida = subprocess.run(
        [sys.executable, os.path.abspath(__file__), '--filho', modo, tipo, url,
         str(total), str(linhas)],
        capture_output=True, text=True, check=True, env=dict(os.environ, PYTHONHASHSEED='0'))
    dado = json.loads(saida.stdout.strip().splitlines()[-1])
    if dado['lidas'] != linhas:
        raise SystemExit('%s/%s leu %s linhas, esperava %s' % (tipo, modo, dado['lidas'], linhas))
    return dado


# ---------------------------------------------------------------------------
# Pai
# ---------------------------------------------------------------------------

def medir(tipo, total, repeticoes):
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
        res = {'tipo': tipo}
        for modo in ('fetch', 'cru'):
            res['rss_%s_menor' % modo] = rodar_filho(modo, tipo, banco.url_origem, total, menor)
        vazao = {'fetch': [], 'cru': []}
        picos = {'fetch': [], 'cru': []}
        for _ in range(repeticoes):
            for modo in ('cru', 'fetch'):          # alternados: a mesma carga na maquina
                d = rodar_filho(modo, tipo, banco.url_origem, total, total)
                vazao[modo].append(d['lidas'] / d['segundos'])
                picos[modo].append(d)
        res['vazao'] = vazao
        res['rss_maior'] = {m: max(picos[m], key=lambda d: d['pico_kib']) for m in picos}
        return res
    finally:
        bancos.derrubar_banco(banco)


def _rotulo(n):
    return '%dM' % (n // 1000000) if n % 1000000 == 0 else '%dk' % (n // 1000)


def relatorio(res, total):
    mib = 1024.0
    print()
    menor, maior = _rotulo(total // 10), _rotulo(total)
    print('%-9s %-6s %12s %12s %10s %12s' % ('banco', 'leitor', 'pico ' + menor,
                                             'pico ' + maior, '%s/%s' % (maior, menor),
                                             'linhas/s'))
    for r in res:
        for modo in ('fetch', 'cru'):
            menor = r['rss_%s_menor' % modo]['pico_kib'] / mib
            maior = r['rss_maior'][modo]['pico_kib'] / mib
            print('%-9s %-6s %9.1f MiB %9.1f MiB %9.2fx %12.0f' % (
                r['tipo'], modo, menor, maior, maior / menor,
                statistics.median(r['vazao'][modo])))
        razao = statistics.median(r['vazao']['fetch']) / statistics.median(r['vazao']['cru'])
        base = r['rss_maior']['fetch']['base_kib'] / mib
        print('%-9s fetch/cru (mediana de %d): %.2f  | RSS base do processo antes de ler:'
              ' %.1f MiB' % (r['tipo'], len(r['vazao']['fetch']), razao, base))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == '--filho':
        modo, tipo, url, total, linhas = sys.argv[2:7]
        return filho(modo, tipo, url, int(total), int(linhas))
    p = argparse.ArgumentParser(description=__doc__.split('\n')[1])
    p.add_argument('--linhas', type=int, default=1000000)
    p.add_argument('--repeticoes', type=int, default=3)
    p.add_argument('--bancos', default='postgres,mariadb')
    args = p.parse_args()
    resultados = [r for r in (medir(t, args.linhas, args.repeticoes)
                              for t in args.bancos.split(',')) if r]
    relatorio(resultados, args.linhas)
    return 0


if __name__ == '__main__':
    sys.exit(main())
