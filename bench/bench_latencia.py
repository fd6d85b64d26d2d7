#!/usr/bin/env python3
"""
Do COMMIT na origem ao registro visível no Contextia, passando pelo ouvinte.

    .venv/bin/python bench/bench_latencia.py [--mudancas 200] [--intervalo 5]

Tudo de verdade: PostgreSQL (127.0.0.1:5432, banco novo), o Contextia local
num processo, e o ouvinte.py como processo com --intervalo-dados=5. Um
escritor faz 200 mudanças (3/4 inclusões, 1/4 alterações), cada uma comitada
num instante aleatório; um leitor consulta o Contextia a cada 0,2 s e anota
quando cada mudança ficou visível.

Esperado: latência máxima perto de um intervalo mais o tempo do ciclo.
Linha de base (mesma execução): o mesmo registro enviado direto pelo cliente,
sem ouvinte -- o piso do que o Contextia e o leitor conseguem medir.
"""

import argparse
import contextlib
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, RAIZ)

URL_ADMIN = 'postgresql+psycopg://postgres@127.0.0.1:5432/postgres'
DATASET = 'movimento'
PASSO_LEITOR = 0.2


def percentil(valores, p):
    ordenados = sorted(valores)
    return ordenados[min(len(ordenados) - 1, int(round(p * (len(ordenados) - 1))))]


def preparar_origem():
    import sqlalchemy as sa

    nome = 'bench_lat_%s' % uuid.uuid4().hex[:8]
    admin = sa.create_engine(URL_ADMIN, isolation_level='AUTOCOMMIT')
    with admin.connect() as con:
        con.execute(sa.text('CREATE DATABASE %s' % nome))
    url = URL_ADMIN.rsplit('/', 1)[0] + '/' + nome
    motor = sa.create_engine(url)
    with motor.begin() as con:
        con.execute(
            sa.text(
                'CREATE TABLE "EMPRESAS" ("EMPRESA_ID" INTEGER PRIMARY KEY,'
                ' "RAZAO_SOCIAL" VARCHAR(60), "ATIVA" CHAR(1))'
            )
        )
        con.execute(sa.text("INSERT INTO \"EMPRESAS\" VALUES (1, 'Bench', 'S')"))
        con.execute(
            sa.text(
                'CREATE TABLE "MOVIMENTO" ("ID" INTEGER PRIMARY KEY,'
                ' "EMPRESA_ID" INTEGER, "VALOR" INTEGER, "ALTERADO_EM" TIMESTAMP)'
            )
        )
        con.execute(sa.text('CREATE INDEX "MOV_ALT" ON "MOVIMENTO" ("ALTERADO_EM")'))
        con.execute(
            sa.text(
                'INSERT INTO "MOVIMENTO" SELECT i, 1, 0, clock_timestamp()'
                " - INTERVAL '1 day' FROM generate_series(1, 50) i"
            )
        )

    def derrubar():
        motor.dispose()
        with admin.connect() as con:
            con.execute(sa.text('DROP DATABASE IF EXISTS %s WITH (FORCE)' % nome))
        admin.dispose()

    return url, motor, derrubar


def mapeamento(pasta):
    return mapa_do_movimento(os.path.join(pasta, 'mapa.json'), 'bench', DATASET)


class Leitor(threading.Thread):
    """Consulta o Contextia e anota quando cada (ID, VALOR) apareceu."""

    def __init__(self, chave, dataset, pagina=1000, passo=PASSO_LEITOR):
        super().__init__(daemon=True)
        self.chave, self.dataset, self.pagina, self.passo = chave, dataset, pagina, passo
        self.vistos = {}
        self.parar = False

    def run(self):
        from contextia_sync.intake import cliente, transporte

        while not self.parar:
            try:
                registros = list(cliente.ler_registros(self.dataset, self.chave, self.pagina))
            except transporte.ErroContextia:
                registros = []
            agora = time.monotonic()
            for r in registros:
                self.vistos.setdefault((int(r['ID']), int(r['VALOR'])), agora)
            time.sleep(self.passo)


OCIOSO_S = 20
"""Segundos da janela ociosa de `medir_commits(..., ocioso=)`."""


@contextlib.contextmanager
def rodada_privada(prefixo, servidor_em):
    """
    Um banco privado (`servidor_em(pasta)`: o MariaDB com binlog, o PostgreSQL com
    wal_level=logical, de tests/apoio) e o Contextia local de pé, com o ambiente do
    cliente apontado para ele: (servidor, contextia, chave da empresa 1, pasta de
    trabalho). Tudo derrubado e apagado na saída.
    """
    import shutil

    from contextia_local.processo import ServidorLocal

    pasta = tempfile.mkdtemp(prefix=prefixo)
    servidor = servidor_em(tempfile.mkdtemp(prefix=prefixo + 'banco-'))
    servidor.iniciar()
    contextia = ServidorLocal(os.path.join(pasta, 'contextia'))
    contextia.iniciar()
    try:
        for nome, valor in contextia.ambiente().items():
            if valor is not None:
                os.environ[nome] = valor
        yield servidor, contextia, contextia.criar_projeto_com_chave('1', 'Bench'), pasta
    finally:
        contextia.parar()
        servidor.parar()
        shutil.rmtree(pasta, ignore_errors=True)
        shutil.rmtree(servidor.pasta, ignore_errors=True)


def mapa_do_movimento(caminho, cliente, dataset, estrategia=None):
    """
    O mapeamento dos benches: um dataset sobre a tabela MOVIMENTO, com a
    `estrategia` do ouvinte (None: a padrão, a coluna). Grava em `caminho`.
    """
    import json

    mapa = {
        '$schema': os.path.join(RAIZ, 'mappings', 'mapeamento.schema.json'),
        'client': cliente,
        'defaults': {'scope_column': 'EMPRESA_ID', 'key': 'ID', 'watch_column': 'ALTERADO_EM'},
        'projects': {
            'source_object': 'EMPRESAS',
            'scope_column': 'EMPRESA_ID',
            'name_column': 'RAZAO_SOCIAL',
            'filters': [{'column': 'ATIVA', 'equals': 'S'}],
        },
        'datasets': [
            {
                'dataset': dataset,
                'source_object': 'MOVIMENTO',
                'columns': ['ID', 'EMPRESA_ID', 'VALOR', 'ALTERADO_EM'],
            }
        ],
    }
    if estrategia is not None:
        mapa['listener'] = {'strategy': estrategia}
    with open(caminho, 'w') as arquivo:
        json.dump(mapa, arquivo)
    return caminho


def cpu_do_processo(pid):
    """Segundos de CPU do processo (utime + stime de /proc/<pid>/stat)."""
    with open('/proc/%d/stat' % pid) as arquivo:
        campos = arquivo.read().rsplit(')', 1)[1].split()
    return (int(campos[11]) + int(campos[12])) / os.sysconf('SC_CLK_TCK')


def medir_commits(bancos, leitores, ouvintes, mudancas, intervalo, inserir, ocioso=None):
    """
    A medida commit -> visível de várias estratégias na mesma rodada: espera a
    primeira volta, comita `mudancas` linhas em cada banco (`inserir(banco, ident,
    n)`, intercaladas, com pausas ao acaso), espera os `leitores`
    as verem e para os `ouvintes`. {estrategia: (segundos de cada uma, não vistas)}.
    `ocioso` (um dict): antes de parar, a fração de um núcleo que cada ouvinte
    gastou em `OCIOSO_S` segundos sem nada mudar, posta ali por estratégia.
    """
    time.sleep(intervalo * 2 + 3)  # a primeira volta fixa marca e posição
    commits = {e: {} for e in bancos}
    for n in range(mudancas):
        ident = 1000 + n
        for estrategia, banco in bancos.items():
            inserir(banco, ident, n)
            commits[estrategia][(ident, n)] = time.monotonic()
        time.sleep(random.uniform(0.1, 0.6))
    fim = time.monotonic() + intervalo * 3 + 15
    while time.monotonic() < fim and not all(
        set(commits[e]) <= set(leitores[e].vistos) for e in bancos
    ):
        time.sleep(0.2)
    if ocioso is not None:
        for leitor in leitores.values():
            leitor.parar = True
        antes = {e: cpu_do_processo(p.pid) for e, p in ouvintes.items()}
        time.sleep(OCIOSO_S)
        ocioso.update(
            {e: (cpu_do_processo(p.pid) - antes[e]) / OCIOSO_S for e, p in ouvintes.items()}
        )
    resultado = {}
    for estrategia in bancos:
        tempos = [
            leitores[estrategia].vistos[k] - t
            for k, t in commits[estrategia].items()
            if k in leitores[estrategia].vistos
        ]
        resultado[estrategia] = (tempos, len(commits[estrategia]) - len(tempos))
        leitores[estrategia].parar = True
        ouvintes[estrategia].send_signal(signal.SIGTERM)
        ouvintes[estrategia].wait(60)
    return resultado


def linha_de_base(chave, repeticoes=10):
    """Envio direto (sem ouvinte) até visível: o piso da medida."""
    from contextia_sync.intake import cliente

    leitor = Leitor(chave, 'base')
    leitor.start()
    tempos = []
    for n in range(repeticoes):
        inicio = time.monotonic()
        cliente.enviar_dataset('base', [{'ID': n, 'VALOR': n}], key='ID', api_key=chave)
        while (n, n) not in leitor.vistos:
            time.sleep(0.01)
        tempos.append(leitor.vistos[(n, n)] - inicio)
    leitor.parar = True
    return tempos


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--mudancas', type=int, default=200)
    p.add_argument('--intervalo', type=int, default=5)
    p.add_argument(
        '--espaco', type=float, default=0.3, help='espaço médio entre commits, em segundos'
    )
    args = p.parse_args()

    from contextia_local.processo import ServidorLocal
    import sqlalchemy as sa

    url, motor, derrubar = preparar_origem()
    with (
        tempfile.TemporaryDirectory() as pasta,
        ServidorLocal(os.path.join(pasta, 'contextia')) as servidor,
    ):
        os.environ.update(servidor.ambiente())
        chave = servidor.criar_projeto_com_chave('1', 'Bench')
        chaves = os.path.join(pasta, 'chaves.tsv')
        with open(chaves, 'w') as arquivo:
            arquivo.write('1\t%s\n' % chave)
        os.chmod(chaves, 0o600)
        base = linha_de_base(chave)

        env = dict(os.environ, CONTEXTIA_ORIGEM=url)
        log = open(os.path.join(pasta, 'ouvinte.log'), 'w+b')
        ouvinte = subprocess.Popen(
            [
                sys.executable,
                'ouvinte.py',
                '--mapping=' + mapeamento(pasta),
                '--source=generic',
                '--chaves=' + chaves,
                '--estado=' + os.path.join(pasta, 'e'),
                '--intervalo-dados=%d' % args.intervalo,
                '--intervalo-projetos=3600',
                '--varredura=nao',
            ],
            cwd=RAIZ,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        leitor = Leitor(chave, DATASET)
        try:
            # Espera a marca inicial (primeiro ciclo) antes de comecar a mexer.
            while b'marca inicial' not in open(log.name, 'rb').read():
                if ouvinte.poll() is not None:
                    raise SystemExit('ouvinte saiu:\n' + open(log.name).read())
                time.sleep(0.1)
            leitor.start()
            sorteio = random.Random(7)
            comitado = {}
            proximo = 1000
            inicio = time.monotonic()
            with motor.connect() as con:
                for n in range(args.mudancas):
                    time.sleep(sorteio.uniform(0, 2 * args.espaco))
                    if n % 4 == 3:
                        ident = sorteio.randint(1, 50)
                        con.execute(
                            sa.text(
                                'UPDATE "MOVIMENTO" SET "VALOR" = :v,'
                                ' "ALTERADO_EM" = clock_timestamp() WHERE "ID" = :i'
                            ),
                            {'v': n + 1, 'i': ident},
                        )
                    else:
                        proximo += 1
                        ident = proximo
                        con.execute(
                            sa.text(
                                'INSERT INTO "MOVIMENTO" VALUES (:i, 1, :v, clock_timestamp())'
                            ),
                            {'i': ident, 'v': n + 1},
                        )
                    con.commit()
                    comitado[(ident, n + 1)] = time.monotonic()
            escrita = time.monotonic() - inicio
            prazo = time.monotonic() + 4 * args.intervalo + 30
            while time.monotonic() < prazo and not all(
                chave_ in leitor.vistos for chave_ in comitado
            ):
                time.sleep(0.2)
        finally:
            leitor.parar = True
            ouvinte.send_signal(signal.SIGTERM)
            ouvinte.wait(timeout=60)
            derrubar()

        # Alteracao da mesma linha que foi alterada de novo antes do ciclo nunca
        # fica visivel com o valor intermediario: so a ultima conta.
        ultima = {}
        for (ident, valor), quando in comitado.items():
            if ident not in ultima or valor > ultima[ident][0]:
                ultima[ident] = (valor, quando)
        latencias = [
            leitor.vistos[(i, v)] - q for i, (v, q) in ultima.items() if (i, v) in leitor.vistos
        ]
        faltaram = len(ultima) - len(latencias)

    print(
        'mudanças comitadas ....: %s em %.1fs (%s linhas distintas na versão final)'
        % (len(comitado), escrita, len(ultima))
    )
    print('intervalo dos dados ...: %ss' % args.intervalo)
    print(
        'linha de base (envio direto -> visível): mediana %.2fs, max %.2fs'
        % (statistics.median(base), max(base))
    )
    print('commit -> visível no Contextia pelo ouvinte:')
    print(
        '  p50 %.2fs   p95 %.2fs   max %.2fs   (faltaram %s)'
        % (percentil(latencias, 0.5), percentil(latencias, 0.95), max(latencias), faltaram)
    )
    print(
        '  razão p50/intervalo %.2f; max/intervalo %.2f (esperado max <= ~1 + ciclo)'
        % (percentil(latencias, 0.5) / args.intervalo, max(latencias) / args.intervalo)
    )
    return 1 if faltaram else 0


if __name__ == '__main__':
    sys.exit(main())
