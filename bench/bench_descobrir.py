#!/usr/bin/env python3
"""
Quanto leva o `descobrir` num catalogo de 200 tabelas, contra o inspector puro.

    .venv/bin/python bench/bench_descobrir.py [--tabelas 200] [--views 10] [--rodadas 5]
                                              [--bancos postgres,mariadb,sqlite]

Um banco novo por tipo (tests/apoio/bancos.py), com `--tabelas` tabelas de
ERP (chave, empresa, doze colunas de tipos variados, coluna de alteracao com
indice em metade delas, uma linha cada), um cadastro EMPRESAS e `--views` views.

Mede, em processo e alternando as duas a cada rodada (mediana):

    inspector   o que o SQLAlchemy leva para refletir as mesmas tabelas e views
                (engine novo, conexao, nomes, get_multi_columns/pk/unique/indexes)
                -- a base: o descobrir nao pode ser muito mais caro que isso
    descobrir   a linha de comando inteira (`cli.descobrir.main`): conecta pela
                sessao somente leitura, reflete, decide, confere a chave de cada
                view na origem, valida o esqueleto pelo schema e grava o arquivo

e a razao descobrir/inspector na mesma rodada. Uma vez, o tempo de parede de
`python3 descobrir.py` num processo novo (o que o operador espera, com o
import de tudo).
"""

import argparse
import contextlib
import io
import os
import statistics
import subprocess
import sys
import tempfile
import time

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, RAIZ)


def montar(banco, tabelas, views):
    """As tabelas do catálogo de teste, com DDL do tipo do banco."""
    tipo = banco.tipo
    ts = {'postgres': 'TIMESTAMP', 'mariadb': 'DATETIME', 'sqlite': 'DATETIME'}[tipo]
    texto = 'TEXT' if tipo != 'mariadb' else 'VARCHAR(200)'
    banco.executar(
        'CREATE TABLE EMPRESAS (EMPRESA_ID INTEGER PRIMARY KEY, RAZAO_SOCIAL'
        ' VARCHAR(60), ATIVA CHAR(1), ALTERADO_EM %s)' % ts
    )
    banco.executar("INSERT INTO EMPRESAS VALUES (1, 'Empresa Um', 'S', '2026-09-01 10:00:00')")
    comandos = []
    for n in range(tabelas):
        nome = 'T%03d' % n
        comandos.append(
            'CREATE TABLE %s (ID INTEGER PRIMARY KEY, EMPRESA_ID INTEGER NOT NULL,'
            ' CODIGO VARCHAR(20), DESCRICAO %s, VALOR NUMERIC(14,2), QUANTIDADE INTEGER,'
            ' EMISSAO DATE, VENCIMENTO DATE, SITUACAO CHAR(1), OBS %s, PESO NUMERIC(10,3),'
            ' ORIGEM VARCHAR(10), ALTERADO_EM %s)' % (nome, texto, texto, ts)
        )
        if n % 2 == 0:
            comandos.append('CREATE INDEX IX_%s_ALT ON %s (ALTERADO_EM)' % (nome, nome))
        comandos.append('CREATE INDEX IX_%s_EMP ON %s (EMPRESA_ID)' % (nome, nome))
        comandos.append(
            'INSERT INTO %s (ID, EMPRESA_ID, CODIGO, ALTERADO_EM) VALUES'
            " (1, 1, 'A', '2026-09-01 10:00:00')" % nome
        )
    for n in range(views):
        comandos.append(
            'CREATE VIEW V%03d AS SELECT ID, EMPRESA_ID, VALOR, ALTERADO_EM FROM T%03d' % (n, n)
        )
    for comando in comandos:
        banco.executar(comando)


def inspector_puro(url):
    """A base: o inspector do SQLAlchemy refletindo as mesmas tabelas e views."""
    import sqlalchemy as sa
    from sqlalchemy.engine.reflection import ObjectKind

    motor = sa.create_engine(url)
    try:
        with motor.connect() as conn:
            inspetor = sa.inspect(conn)
            nomes = inspetor.get_table_names() + inspetor.get_view_names()
            opcoes = dict(filter_names=nomes, kind=ObjectKind.ANY)
            import warnings

            with warnings.catch_warnings():
                warnings.simplefilter('ignore')
                inspetor.get_multi_columns(**opcoes)
            inspetor.get_multi_pk_constraint(**opcoes)
            inspetor.get_multi_unique_constraints(**opcoes)
            inspetor.get_multi_indexes(**opcoes)
        return len(nomes)
    finally:
        motor.dispose()


def descobrir(url, pasta):
    """A linha de comando inteira, em processo (a saída vai para um buffer)."""
    from contextia_sync.cli import descobrir as cli

    destino = os.path.join(pasta, 'esqueleto-%d.json' % time.monotonic_ns())
    os.environ['CONTEXTIA_ORIGEM'] = url
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        codigo = cli.main(['--saida', destino, '--cadastro', 'EMPRESAS'])
    if codigo != 0:
        raise SystemExit('descobrir saiu com %s' % codigo)
    os.unlink(destino)


def medir(tipo, tabelas, views, rodadas):
    from tests.apoio.bancos import criar_banco, derrubar_banco, servidor_disponivel

    ok, motivo = servidor_disponivel(tipo)
    if not ok:
        print('%-8s pulado: %s' % (tipo, motivo))
        return
    pasta = tempfile.mkdtemp(prefix='bench_descobrir_')
    banco = criar_banco(tipo, 'descobrir', pasta=pasta if tipo == 'sqlite' else None)
    try:
        inicio = time.monotonic()
        montar(banco, tabelas, views)
        print(
            '%-8s catálogo de %d tabelas + %d views + EMPRESAS montado em %.1f s'
            % (tipo, tabelas, views, time.monotonic() - inicio),
            flush=True,
        )
        url = banco.url_origem
        descobrir(url, pasta)  # aquece (imports, jsonschema)
        inspector_puro(url)
        base, nosso, razoes = [], [], []
        for _ in range(rodadas):
            t0 = time.perf_counter()
            inspector_puro(url)
            t1 = time.perf_counter()
            descobrir(url, pasta)
            t2 = time.perf_counter()
            base.append(t1 - t0)
            nosso.append(t2 - t1)
            razoes.append((t2 - t1) / (t1 - t0))
        env = dict(os.environ, CONTEXTIA_ORIGEM=url)
        t0 = time.perf_counter()
        feito = subprocess.run(
            [
                sys.executable,
                os.path.join(RAIZ, 'descobrir.py'),
                '--saida',
                os.path.join(pasta, 'processo.json'),
                '--cadastro',
                'EMPRESAS',
            ],
            cwd=RAIZ,
            env=env,
            capture_output=True,
            timeout=600,
        )
        parede = time.perf_counter() - t0
        if feito.returncode != 0:
            raise SystemExit(feito.stdout.decode() + feito.stderr.decode())
        print(
            '%-8s inspector puro: mediana %.3f s | descobrir: mediana %.3f s | razão %.2f'
            ' (min %.2f, máx %.2f) em %d rodadas | processo novo: %.2f s'
            % (
                tipo,
                statistics.median(base),
                statistics.median(nosso),
                statistics.median(razoes),
                min(razoes),
                max(razoes),
                rodadas,
                parede,
            ),
            flush=True,
        )
    finally:
        derrubar_banco(banco)
        for nome in os.listdir(pasta):
            os.unlink(os.path.join(pasta, nome))
        os.rmdir(pasta)


def main(argv=None):
    p = argparse.ArgumentParser(description='descobrir num catálogo grande vs o inspector puro')
    p.add_argument('--tabelas', type=int, default=200)
    p.add_argument('--views', type=int, default=10)
    p.add_argument('--rodadas', type=int, default=5)
    p.add_argument('--bancos', default='postgres,mariadb,sqlite')
    args = p.parse_args(argv)
    for tipo in args.bancos.split(','):
        medir(tipo.strip(), args.tabelas, args.views, args.rodadas)
    return 0


if __name__ == '__main__':
    sys.exit(main())
