#!/usr/bin/env python3
"""
Quantos comandos o servidor de origem recebe por ciclo OCIOSO do `coluna`, por
dataset (issue 31, item 5), no PostgreSQL e no MariaDB da máquina.

    .venv/bin/python bench/bench_ocioso_sessao.py [--ciclos 10] [--datasets 2]
        [--bancos postgres,mariadb] [--raiz /tmp/antes] [--mostrar]

Montagem (descartável, tudo em 127.0.0.1): um banco novo por servidor
(tests/apoio/bancos.py) com `lojas` (o cadastro de empresas) e `--datasets`
tabelas `dados_N` (id, loja, valor, alterado), 300 linhas cada, um carimbo por
segundo -- a janela da folga (30 s) sempre tem linhas, como depois de qualquer
mudança: o ciclo ocioso é a sonda (`contar`) e a releitura estreita da janela.
Um Contextia local novo (ServidorLocal) com um projeto e uma chave por loja.

O `ouvinte.py` da `--raiz` (padrão: esta árvore; o "antes" é um `git archive
HEAD` extraído numa pasta) roda como processo, `--intervalo-dados=1
--varredura=nao --folga 30`, com CONTEXTIA_ORIGEM apontando para um proxy TCP
que lê o protocolo do banco (tests/test_sessao_reusada.py: ProxyContador) e
anota cada comando com a hora em que chegou. O filho embrulha `ciclo_dados` e
escreve no log a hora do começo e do fim de cada ciclo de dados: cada comando
cai no ciclo em que chegou. Os 2 primeiros ciclos (primeira vista) ficam de
fora; a tabela mostra a mediana e o máximo dos `--ciclos` seguintes.

Comando = o que o servidor executa: no MariaDB um COM_QUERY, no PostgreSQL um
`Q` (consulta simples) ou um `E` (execução do protocolo estendido). A ida ao
servidor que não é comando (COM_PING; a consulta vazia `;` do pre-ping do
PostgreSQL) sai na coluna "pings". Não é teste: nada aqui entra na suíte.

Medido (2026-12-08, 2 datasets, 10 ciclos, carga 3.5 numa máquina de 2 núcleos;
"antes" = `git archive HEAD` antes da issue 31, item 5):

    banco     árvore   mediana  máx  por dataset  pings
    postgres  antes         20   23         10.0      4
    postgres  esta           4    5          2.0      4
    mariadb   antes         28   34         14.0      4
    mariadb   esta           4    5          2.0      4

Depois de a `coluna` largar a sonda `COUNT(*)` (a leitura estreita da janela é o
único comando; mesma rodada, carga 1.6, "antes" = 271e00b):

    postgres  antes         20   23         10.0      4
    postgres  esta           2    3          1.0      2
    mariadb   antes         28   34         14.0      4
    mariadb   esta           2    3          1.0      2

O máximo tem o relógio da origem (`agora`, lido pelo `coluna` a cada 5 s, um por
ciclo e não por dataset): antes 3 (PostgreSQL) e 6 (MariaDB) comandos, agora 1.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if RAIZ not in sys.path:
    sys.path.insert(0, RAIZ)

from tests.test_sessao_reusada import Comando, ProxyContador  # noqa: E402

LOJAS = (1, 2)
LINHAS = 300
CARIMBO = datetime.datetime(2026, 1, 1, 10, 0, 0)
IGNORADOS = 2

# O filho: o ouvinte.py da raiz, com ciclo_dados embrulhado por um relógio de
# parede (o mesmo do proxy). Roda com cwd = raiz (sys.path[0] = '').
EMBRULHO = r"""
import runpy, sys, time
import contextia_sync
import contextia_sync.ouvinte.laco as alvo
original = alvo.ciclo_dados
def medido(ctx):
    sys.stderr.write('BENCH inicio %.6f\n' % time.time()); sys.stderr.flush()
    try:
        return original(ctx)
    finally:
        sys.stderr.write('BENCH fim %.6f\n' % time.time()); sys.stderr.flush()
alvo.ciclo_dados = medido
sys.stderr.write('BENCH pacote %s\n' % contextia_sync.__file__); sys.stderr.flush()
sys.argv = ['ouvinte.py'] + sys.argv[1:]
runpy.run_path('ouvinte.py', run_name='__main__')
"""


def montar(banco: object, datasets: int) -> list[str]:
    """lojas + dados_1..N; devolve os nomes das tabelas de dados."""
    executar = banco.executar  # type: ignore[attr-defined]
    executar('CREATE TABLE lojas (loja INTEGER PRIMARY KEY, nome VARCHAR(40))')
    for loja in LOJAS:
        executar('INSERT INTO lojas VALUES (:l, :n)', {'l': loja, 'n': 'Loja %d' % loja})
    tabelas = []
    for n in range(1, datasets + 1):
        tabela = 'dados_%d' % n
        executar(
            'CREATE TABLE %s (id INTEGER PRIMARY KEY, loja INTEGER NOT NULL,'
            ' valor NUMERIC(12,2), alterado TIMESTAMP NULL)' % tabela
        )
        executar('CREATE INDEX idx_%s_alterado ON %s (alterado)' % (tabela, tabela))
        for inicio in range(0, LINHAS, 100):
            for i in range(inicio, inicio + 100):
                executar(
                    'INSERT INTO %s VALUES (:i, :l, :v, :a)' % tabela,
                    {
                        'i': i + 1,
                        'l': LOJAS[i % len(LOJAS)],
                        'v': '%d.50' % i,
                        'a': CARIMBO + datetime.timedelta(seconds=i),
                    },
                )
        tabelas.append(tabela)
    return tabelas


def mapeamento(pasta: str, tabelas: list[str]) -> str:
    mapa = {
        'client': 'bench-ocioso-sessao',
        'source': {'excluded_scopes': []},
        'defaults': {'scope_column': 'loja', 'key': 'id', 'watch_column': 'alterado', 'chunk': 500},
        'projects': {'source_object': 'lojas', 'name_column': 'nome'},
        'datasets': [
            {
                'dataset': tabela,
                'source_object': tabela,
                'columns': ['id', 'loja', 'valor', 'alterado'],
                'description': 'bench do ciclo ocioso',
            }
            for tabela in tabelas
        ],
    }
    caminho = os.path.join(pasta, 'mapeamento.json')
    with open(caminho, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo, indent=2)
    return caminho


def ciclos_do_log(texto: str) -> list[tuple[float, float]]:
    inicios = [float(x) for x in re.findall(r'BENCH inicio ([0-9.]+)', texto)]
    fins = [float(x) for x in re.findall(r'BENCH fim ([0-9.]+)', texto)]
    return list(zip(inicios, fins, strict=False))


def _e_ping(comando: Comando) -> bool:
    """A ida ao servidor que não é comando: COM_PING, a consulta vazia do pre-ping."""
    return comando.tipo == 'PING'


def rodar(tipo: str, raiz: str, args: argparse.Namespace) -> dict[str, object]:
    import sqlalchemy as sa

    from contextia_local.processo import ServidorLocal
    from tests.apoio import bancos

    pasta = tempfile.mkdtemp(prefix='bench_sessao_')
    banco = bancos.criar_banco(tipo, 'sessao')
    proxy = servidor = filho = None
    try:
        tabelas = montar(banco, args.datasets)
        url = sa.engine.make_url(banco.url_origem)
        proxy = ProxyContador(
            url.host or '127.0.0.1',
            url.port or (5432 if tipo == 'postgres' else 3306),
            'postgresql' if tipo == 'postgres' else 'mysql',
        )
        servidor = ServidorLocal(os.path.join(pasta, 'contextia'))
        servidor.iniciar()
        chaves = os.path.join(pasta, 'chaves.tsv')
        with open(chaves, 'w') as arquivo:
            for loja in LOJAS:
                chave = servidor.criar_projeto_com_chave(str(loja), 'Loja %s' % loja)
                arquivo.write('%s\t%s\n' % (loja, chave))
        os.chmod(chaves, 0o600)
        argv = [
            sys.executable,
            '-c',
            EMBRULHO,
            '--mapping=' + mapeamento(pasta, tabelas),
            '--source=generic',
            '--chaves=' + chaves,
            '--estado=' + os.path.join(pasta, 'estado'),
            '--varredura=nao',
            '--intervalo-dados=1',
            '--folga',
            '30',
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith('CONTEXTIA_')}
        env.update(
            PYTHONPATH=raiz,
            NO_PROXY='127.0.0.1,localhost',
            no_proxy='127.0.0.1,localhost',
            CONTEXTIA_URL=servidor.url or '',
            CONTEXTIA_ADMIN_TOKEN=servidor.admin_token,
            CONTEXTIA_ORIGEM=url.set(host='127.0.0.1', port=proxy.porta).render_as_string(
                hide_password=False
            ),
        )
        log = os.path.join(pasta, 'ouvinte.log')
        with open(log, 'wb') as saida:
            filho = subprocess.Popen(
                argv, cwd=raiz, env=env, stdout=saida, stderr=subprocess.STDOUT
            )
            fim = time.monotonic() + 60 + 3 * args.ciclos
            while time.monotonic() < fim and filho.poll() is None:
                with open(log, encoding='utf-8', errors='replace') as arquivo:
                    if len(ciclos_do_log(arquivo.read())) >= IGNORADOS + args.ciclos:
                        break
                time.sleep(0.2)
            filho.terminate()
            filho.wait(30)
        with open(log, encoding='utf-8', errors='replace') as arquivo:
            texto = arquivo.read()
        ciclos = ciclos_do_log(texto)[IGNORADOS : IGNORADOS + args.ciclos]
        if len(ciclos) < args.ciclos or 'BENCH pacote %s' % raiz not in texto:
            raise SystemExit(
                'ouvinte de %s: %d ciclos. Fim do log:\n%s' % (raiz, len(ciclos), texto[-3000:])
            )
        return medir(proxy.desde(0), ciclos, tabelas)
    finally:
        if filho is not None and filho.poll() is None:
            filho.kill()
        if servidor is not None:
            servidor.parar()
        if proxy is not None:
            proxy.fechar()
        bancos.derrubar_banco(banco)
        if not args.manter:
            shutil.rmtree(pasta, ignore_errors=True)


def medir(
    comandos: list[Comando], ciclos: list[tuple[float, float]], tabelas: list[str]
) -> dict[str, object]:
    por_ciclo: list[list[Comando]] = [
        [c for c in comandos if inicio <= c.instante <= fim] for inicio, fim in ciclos
    ]
    sqls = [len([c for c in ciclo if not _e_ping(c) and c.e_sql]) for ciclo in por_ciclo]
    pings = [len([c for c in ciclo if _e_ping(c)]) for ciclo in por_ciclo]
    por_tabela = {
        t: [len([c for c in ciclo if re.search(r'\b%s\b' % t, c.sql)]) for ciclo in por_ciclo]
        for t in tabelas
    }
    return {
        'sql': sqls,
        'pings': pings,
        'por_tabela': por_tabela,
        'amostra': [
            '%s %s' % (c.tipo, ' '.join(c.sql.split())[:120])
            for c in por_ciclo[len(por_ciclo) // 2]
        ],
    }


def imprimir(
    tipo: str, rotulo: str, medida: dict[str, object], datasets: int, mostrar: bool
) -> None:
    sqls: list[int] = medida['sql']  # type: ignore[assignment]
    pings: list[int] = medida['pings']  # type: ignore[assignment]
    print(
        '%-9s %-7s %8s %6d %14.1f %8s'
        % (
            tipo,
            rotulo,
            '%g' % statistics.median(sqls),
            max(sqls),
            statistics.median(sqls) / datasets,
            '%g' % statistics.median(pings),
        )
    )
    if mostrar:
        for linha in medida['amostra']:  # type: ignore[attr-defined]
            print('        ', linha)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--ciclos', type=int, default=10)
    parser.add_argument('--datasets', type=int, default=2)
    parser.add_argument('--bancos', default='postgres,mariadb')
    parser.add_argument(
        '--raiz', action='append', help='árvore do ouvinte.py (repita: antes e depois)'
    )
    parser.add_argument('--mostrar', action='store_true', help='lista os comandos de um ciclo')
    parser.add_argument('--manter', action='store_true', help='não apaga a pasta (log do ouvinte)')
    args = parser.parse_args()
    raizes = [os.path.abspath(r) for r in (args.raiz or [RAIZ])]
    print(
        'CICLO OCIOSO do coluna: comandos SQL que o servidor recebe por ciclo de dados'
        ' (%d datasets; mediana e máximo de %d ciclos; carga da máquina %s)'
        % (args.datasets, args.ciclos, ' '.join('%.2f' % x for x in os.getloadavg()))
    )
    print(
        '%-9s %-7s %8s %6s %14s %8s' % ('banco', 'árvore', 'mediana', 'máx', 'por dataset', 'pings')
    )
    for tipo in args.bancos.split(','):
        for raiz in raizes:
            rotulo = 'esta' if raiz == RAIZ else os.path.basename(raiz.rstrip('/'))
            imprimir(tipo, rotulo, rodar(tipo, raiz, args), args.datasets, args.mostrar)
    return 0


if __name__ == '__main__':
    sys.exit(main())
