#!/usr/bin/env python3
"""
Issue 18: a carga completa na velocidade do driver. Uma rodada, uma tabela.

    .venv/bin/python bench/bench_velocidade.py [--linhas 200000] [--repeticoes 3]
        [--bancos postgres,mariadb] [--base DIR] [--rss] [--dlt PYTHON]

Tabela de 12 colunas com a forma de um título a receber (int, texto, Decimal,
date, timestamp, NULL), no PostgreSQL e no MariaDB da máquina (banco novo,
derrubado no fim). Cada medida roda num SUBPROCESSO próprio (o pico de RSS de
um processo nunca desce), alternando as medidas a cada repetição; a tabela
mostra a MEDIANA e a razão contra o driver cru da mesma rodada:

    driver cru              cursor de servidor do psycopg / SSCursor do driver
    fetch                   o `fetch` do adaptador genérico
    fetch + serialização    antigo: serializar_registro + json.dumps por lote de 500;
                            novo: Serializador + corpo_de_registros (orjson)
    envio -> sink livre     enviar_dataset(fetch, sync) para um intake mínimo
                            (outro processo em 127.0.0.1 que só lê o corpo e
                            responde 200 com contagens), chunk 500
    envio -> sink 20 ms     idem, o sink dormindo 20 ms antes de cada resposta
                            (o cliente falando com um intake na nuvem)
    envio -> Contextia local  idem, ao Contextia local de verdade (um processo, e
                            `--processos 2`): ponta a ponta, servidor nos mesmos
                            2 núcleos que o cliente e o banco
    bytes no fio            o que o sink recebeu, com e sem gzip anunciado

"antigo" e o código de `--base DIR` (um checkout do main anterior: o
caminho de hoje) rodando no mesmo processo-filho, com o mesmo sink; sem
`--base`, as linhas "antigo" saem da tabela. `--rss`: pico de RSS do envio
novo com 100 mil e 1 milhão de linhas (PostgreSQL).

`--dlt PYTHON`: o python de um venv PRÓPRIO com o dlt (nunca o do projeto, nunca
em requirements), para os pares na mesma tabela e na mesma rodada (PostgreSQL):
o dlt com o backend sqlalchemy e com o connectorx, escrevendo jsonl num
diretório temporário. Montado assim:

    python3 -m venv /tmp/venv-dlt
    /tmp/venv-dlt/bin/pip install 'dlt[sql-database]' connectorx psycopg2-binary pyarrow

Não é teste.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# O filho usa so o codigo do PYTHONPATH (este ou o de --base).
if RAIZ not in sys.path and '--filho' not in sys.argv:
    sys.path.insert(0, RAIZ)

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
CHUNK = 500


def montar(banco: Any, linhas: int, tabela: str = 'bench', empresas: int | None = None) -> None:
    """
    `tabela` com `linhas` linhas de 12 colunas com a forma de um título a receber:
    todas da empresa 297, ou (`empresas`) repartidas, intercaladas no disco, entre
    as empresas 1..N, com o índice da empresa que todo ERP tem (bench_varredura).
    """
    if banco.tipo == 'postgres':
        empresa = '297' if empresas is None else 'g %% %d + 1' % empresas
        banco.executar(
            'CREATE TABLE %s AS SELECT g AS "ID", %s AS "EMPRESA_ID",'
            ' \'NF-\' || lpad(g::text, 8, \'0\') AS "NUMERO", g %% 12 + 1 AS "PARCELA",'
            " 'Cliente ' || (g %% 5000) || ' Comercio de Pecas Ltda' AS \"CLIENTE\","
            ' date \'2026-01-01\' + g %% 400 AS "EMISSAO",'
            ' date \'2026-01-31\' + g %% 400 AS "VENCIMENTO",'
            ' (100 + g %% 90000 + (g %% 100) / 100.0)::numeric(16,2) AS "VALOR",'
            ' ((g %% 5000) + (g * 7 %% 100) / 100.0)::numeric(16,2) AS "SALDO",'
            ' substr(\'ABCP\', g %% 4 + 1, 1) AS "SITUACAO",'
            " timestamp '2026-01-01 08:00' + g * interval '13 second' AS \"ALTERADO_EM\","
            ' CASE WHEN g %% 3 = 0 THEN \'renegociado em \' || (g %% 31) END AS "OBS"'
            ' FROM generate_series(1, %d) g' % (tabela, empresa, linhas)
        )
        banco.executar('ALTER TABLE %s ADD PRIMARY KEY ("ID")' % tabela)
        if empresas is not None:
            # O indice que todo ERP tem na empresa (o WHERE da carga por empresa o usa).
            banco.executar('CREATE INDEX ON %s ("EMPRESA_ID")' % tabela)
        banco.executar('VACUUM ANALYZE %s' % tabela)
    else:
        empresa = '297' if empresas is None else 'MOD(seq, %d) + 1' % empresas
        banco.executar(
            'CREATE TABLE %s (ID INT PRIMARY KEY, EMPRESA_ID INT, NUMERO VARCHAR(20),'
            ' PARCELA INT, CLIENTE VARCHAR(80), EMISSAO DATE, VENCIMENTO DATE,'
            ' VALOR DECIMAL(16,2), SALDO DECIMAL(16,2), SITUACAO CHAR(1),'
            ' ALTERADO_EM DATETIME, OBS VARCHAR(40)%s)'
            % (tabela, '' if empresas is None else ', KEY (EMPRESA_ID)')
        )
        banco.executar(
            "INSERT INTO %s SELECT seq, %s, CONCAT('NF-', LPAD(seq, 8, '0')),"
            " MOD(seq, 12) + 1, CONCAT('Cliente ', MOD(seq, 5000), ' Comercio de Pecas Ltda'),"
            " DATE '2026-01-01' + INTERVAL MOD(seq, 400) DAY,"
            " DATE '2026-01-31' + INTERVAL MOD(seq, 400) DAY,"
            ' 100 + MOD(seq, 90000) + MOD(seq, 100) / 100,'
            ' MOD(seq, 5000) + MOD(seq * 7, 100) / 100,'
            " SUBSTR('ABCP', MOD(seq, 4) + 1, 1),"
            " TIMESTAMP '2026-01-01 08:00:00' + INTERVAL seq * 13 SECOND,"
            " CASE WHEN MOD(seq, 3) = 0 THEN CONCAT('renegociado em ', MOD(seq, 31)) END"
            ' FROM seq_1_to_%d' % (tabela, empresa, linhas)
        )


# ---------------------------------------------------------------------------
# O sink: um intake minimo noutro processo
# ---------------------------------------------------------------------------
def sink(porta: int, atraso_ms: float, anuncia_gzip: bool) -> None:
    """
    Um intake mínimo (também o do bench_varredura.py e do bench_intake.py): lê o
    corpo inteiro, conta os bytes, responde as contagens, o `complete` e a posse
    da chave `ctx_bench_<escopo>`.

    HTTP/1.1 com keep-alive escrito à mão sobre o asyncio, sem framework: o
    sink é a linha de base "de graça" e tem de custar perto de nada. O
    http.server da biblioteca padrão (o de antes) gastava ~0,3 ms por pedido de
    500 linhas lendo cabeçalhos pelo parser de e-mail; na mesma máquina de 2
    núcleos, esse tempo era CPU roubada do cliente medido e espera dele.
    """
    import asyncio

    recebidos = [0]
    contagens = json.dumps({'inserted': 0, 'updated': 0, 'duplicates': 0}).encode()

    def resposta(corpo: bytes) -> bytes:
        return (
            b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n'
            b'Content-Length: %d\r\n\r\n' % len(corpo)
        ) + corpo

    def responder_get(caminho: str, cabecalhos: dict[str, str]) -> bytes:
        if caminho.startswith('/bytes'):
            return json.dumps({'bytes': recebidos[0]}).encode()
        if caminho.startswith('/api/v1/projeto'):
            # A posse da chave (o connector pergunta): ctx_bench_<escopo> e da empresa.
            escopo = cabecalhos.get('authorization', '').rsplit('_', 1)[-1]
            return json.dumps(
                {'project_id': int(escopo), 'external_id': escopo, 'name': 'Empresa %s' % escopo}
            ).encode()
        return json.dumps(
            {'remove': False, 'compressao': ['gzip']} if anuncia_gzip else {'remove': False}
        ).encode()

    async def atender(leitor: asyncio.StreamReader, escritor: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    cabeca = await leitor.readuntil(b'\r\n\r\n')
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                linhas = cabeca.decode('latin-1').split('\r\n')
                metodo, caminho = linhas[0].split(' ')[:2]
                cabecalhos = {}
                for linha in linhas[1:]:
                    nome, _, valor = linha.partition(':')
                    cabecalhos[nome.strip().lower()] = valor.strip()
                tamanho = int(cabecalhos.get('content-length') or 0)
                if tamanho:
                    # Lido antes de somar: `recebidos[0] += await ...` leria o
                    # total antes da espera e perderia o que outra conexão somou.
                    corpo_lido = await leitor.readexactly(tamanho)
                    recebidos[0] += len(corpo_lido)
                if metodo == 'POST':
                    if atraso_ms:
                        await asyncio.sleep(atraso_ms / 1000.0)
                    corpo = b'{"removed": 0}' if caminho.endswith('/complete') else contagens
                else:
                    corpo = responder_get(caminho, cabecalhos)
                escritor.write(resposta(corpo))
                await escritor.drain()
        finally:
            escritor.close()

    async def servir() -> None:
        servidor = await asyncio.start_server(atender, '127.0.0.1', porta, limit=1 << 20)
        async with servidor:
            await servidor.serve_forever()

    asyncio.run(servir())


class Sink:
    def __init__(self, atraso_ms: float = 0, gzip: bool = False) -> None:
        with socket.socket() as s:
            s.bind(('127.0.0.1', 0))
            self.porta = s.getsockname()[1]
        self.url = 'http://127.0.0.1:%d' % self.porta
        self.processo = subprocess.Popen(
            [sys.executable, __file__, '--sink', str(self.porta), '--atraso-ms', str(atraso_ms)]
            + (['--gzip'] if gzip else [])
        )
        for _ in range(100):
            try:
                socket.create_connection(('127.0.0.1', self.porta), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError('sink não subiu')

    def bytes(self) -> int:
        import urllib.request

        with urllib.request.urlopen(self.url + '/bytes', timeout=10) as resposta:
            return int(json.loads(resposta.read())['bytes'])

    def parar(self) -> None:
        self.processo.terminate()
        self.processo.wait(10)


class ContextiaLocal:
    """
    O Contextia local de verdade como destino (`--processos N`), com um projeto
    e a chave dele: a carga ponta a ponta. Cada repetição reenvia o mesmo
    dataset com outro sync (a carga completa de todo dia: os registros voltam
    iguais). Os bytes no fio não são contados (o servidor não os expõe).
    """

    def __init__(self, processos: int) -> None:
        import tempfile

        from contextia_local.processo import ServidorLocal

        self._pasta = tempfile.TemporaryDirectory(prefix='bench-velocidade-')
        self._servidor = ServidorLocal(self._pasta.name, processos=processos).iniciar()
        self.url = self._servidor.url
        self.chave = self._servidor.criar_projeto_com_chave('bench')

    def bytes(self) -> None:
        return None

    def parar(self) -> None:
        self._servidor.parar()
        self._pasta.cleanup()


# ---------------------------------------------------------------------------
# Filho: uma medida, um processo
# ---------------------------------------------------------------------------
def _cru(url: str, driver: str) -> int:
    import sqlalchemy as sa

    u = sa.engine.make_url(url)
    lista = ', '.join(('"%s"' if driver == 'psycopg' else '`%s`') % c for c in COLUNAS)
    conn: Any
    if driver == 'psycopg':
        import psycopg

        conn = psycopg.connect(host=u.host, port=u.port, user=u.username, dbname=u.database)
        cur = conn.cursor(name='bench_cru')
        cur.itersize = 10000
    elif driver == 'mysqldb':
        import MySQLdb
        import MySQLdb.cursors

        conn = MySQLdb.connect(
            host=u.host,
            port=u.port or 3306,
            user=u.username,
            database=u.database,
            charset='utf8mb4',
        )
        cur = conn.cursor(MySQLdb.cursors.SSCursor)
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
    cur.execute('SELECT %s FROM bench' % lista)
    linhas = 0
    for _ in cur:
        linhas += 1
    cur.close()
    conn.close()
    return linhas


def _dlt(backend: str, url: str) -> dict[str, Any]:
    """O dlt (no venv dele) lendo a tabela inteira para jsonl: um par da medida."""
    import tempfile

    import dlt
    from dlt.sources.sql_database import sql_table

    os.environ.setdefault('RUNTIME__LOG_LEVEL', 'WARNING')
    # O SQLAlchemy 2.1 do venv do dlt leva postgresql:// ao psycopg 3; o dlt usa o psycopg2.
    url = url.replace('postgresql+psycopg://', 'postgresql+psycopg2://', 1)
    with tempfile.TemporaryDirectory(prefix='bench-dlt-') as pasta:
        inicio = time.perf_counter()
        pipeline = dlt.pipeline(
            pipeline_name='bench_%s' % backend,
            pipelines_dir=os.path.join(pasta, 'p'),
            destination=dlt.destinations.filesystem(bucket_url='file://' + pasta + '/saida'),
            dataset_name='bench',
        )
        pipeline.run(
            sql_table(credentials=url, table='bench', backend=backend, chunk_size=10000),
            loader_file_format='jsonl',
        )
        segundos = time.perf_counter() - inicio
        linhas = pipeline.last_trace.last_normalize_info.row_counts.get('bench')
    return {
        'linhas': linhas,
        'segundos': segundos,
        'rss_mib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }


def filho(modo: str, url: str, sink_url: str | None, em_voo: int) -> dict[str, Any]:
    if modo.startswith('dlt-'):
        return _dlt(modo[4:], url)
    # Os imports antes do relogio: a medida e a leitura e o envio, nao a partida.
    import sqlalchemy

    from contextia_sync.intake import cliente, serializacao  # noqa: F401
    from contextia_sync.origem import generico

    if modo == 'cru-psycopg':
        import psycopg  # noqa: F401
    elif modo == 'cru-mysqldb':
        import MySQLdb  # noqa: F401
    elif modo == 'cru-pymysql':
        import pymysql  # noqa: F401
    else:
        # O driver da URL tambem antes do relogio, como o do driver cru: a
        # partida (o import do psycopg/MySQLdb) nao e a leitura.
        sqlalchemy.engine.make_url(url).get_dialect().import_dbapi()
    inicio = time.perf_counter()
    if modo.startswith('cru-'):
        linhas = _cru(url, modo[4:])
    else:
        from contextia_sync.origem.generico import Origem

        origem = Origem(url, timeout=0)
        fetch = origem.fetch('bench', COLUNAS)
        linhas = 0
        if modo == 'fetch':
            for _ in fetch:
                linhas += 1
        elif modo == 'ser':
            import itertools

            try:
                from contextia_sync.intake.serializacao import PlanoFixo, corpo_de_registros

                try:
                    # O de hoje: o Decimal no corpo, o lote inteiro pelo orjson.
                    from contextia_sync.intake.serializacao import corpo_direto

                    direto = PlanoFixo(generico.familias(fetch) or {}, decimal_no_corpo=True)

                    def corpo(lote: list[Any]) -> bytes:
                        for r in lote:
                            direto.registro(r)
                        return corpo_direto(lote) or corpo_de_registros(lote)
                except ImportError:  # o de antes: o conversor por linha
                    fixo = PlanoFixo(generico.familias(fetch) or {})

                    def corpo(lote: list[Any]) -> bytes:
                        return corpo_de_registros([fixo.registro(r) for r in lote])
            except ImportError:  # o codigo de --base: o caminho de hoje
                from contextia_sync.intake.serializacao import serializar_registro

                def corpo(lote: list[Any]) -> bytes:
                    return json.dumps(
                        [serializar_registro(r) for r in lote],
                        ensure_ascii=False,
                        separators=(',', ':'),
                        allow_nan=False,
                    ).encode('utf-8')

            while True:
                lote = list(itertools.islice(fetch, CHUNK))
                if not lote:
                    break
                linhas += len(lote)
                corpo(lote)
        else:  # envio
            os.environ['CONTEXTIA_URL'] = sink_url or ''
            from contextia_sync.intake import cliente

            opcoes: dict[str, Any] = {}
            if 'em_voo' in cliente.enviar_dataset.__code__.co_varnames:
                # O caminho da carga completa (carga/completa.py): lotes em voo e os
                # tipos do resultado.
                opcoes['em_voo'] = em_voo
                opcoes['familias'] = generico.familias(fetch)
            resultado = cliente.enviar_dataset(
                'bench',
                fetch,
                key='ID',
                chunk=CHUNK,
                api_key=os.environ.get('BENCH_CHAVE', 'ctx_bench' + 'x' * 20),
                sync=cliente.gerar_sync(),
                **opcoes,
            )
            assert resultado.lotes_erro == 0, resultado.erros[:3]
            linhas = resultado.registros
        origem.fechar()
    segundos = time.perf_counter() - inicio
    return {
        'linhas': linhas,
        'segundos': segundos,
        'rss_mib': resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }


def medir(
    codigo: str,
    modo: str,
    url: str,
    sink: Sink | ContextiaLocal | None = None,
    em_voo: int = 1,
    python: str | None = None,
) -> dict[str, Any]:
    ambiente = dict(os.environ, PYTHONPATH=codigo)
    if isinstance(sink, ContextiaLocal):
        ambiente['BENCH_CHAVE'] = sink.chave
    argv = [
        python or sys.executable,
        __file__,
        '--filho',
        modo,
        '--url',
        url,
        '--em-voo',
        str(em_voo),
    ]
    if sink is not None:
        argv += ['--sink-url', sink.url]
    antes = sink.bytes() if sink is not None else None
    saida = subprocess.run(
        argv, env=ambiente, cwd=codigo, stdout=subprocess.PIPE, check=True, timeout=3600
    ).stdout
    medida: dict[str, Any] = json.loads(saida.decode().strip().splitlines()[-1])
    depois = sink.bytes() if sink is not None else None
    if depois is not None and antes is not None:
        medida['bytes'] = depois - antes
    return medida


# ---------------------------------------------------------------------------
# A rodada
# ---------------------------------------------------------------------------
def rodada(
    tipo: str, linhas: int, repeticoes: int, base: str | None, python_dlt: str | None = None
) -> list[tuple[str, Any]]:
    from tests.apoio import bancos

    banco = bancos.criar_banco(tipo, 'velocidade')
    sinks: list[Sink | ContextiaLocal] = []
    try:
        montar(banco, linhas)
        url = banco.url_origem
        url_rapido = url.replace('mysql+pymysql://', 'mysql+mysqldb://', 1)
        livre, livre_gzip = Sink(), Sink(gzip=True)
        lento, lento_gzip = Sink(20), Sink(20, gzip=True)
        sinks += [livre, livre_gzip, lento, lento_gzip]
        um, dois = ContextiaLocal(1), ContextiaLocal(2)
        sinks += [um, dois]
        # (rotulo, codigo, modo, url, sink, em_voo)
        casos: list[tuple[str, str, str, str, Sink | ContextiaLocal | None, int]] = []
        if tipo == 'postgres':
            casos.append(('driver cru (psycopg)', RAIZ, 'cru-psycopg', url, None, 1))
        else:
            casos.append(('driver cru (mysqlclient)', RAIZ, 'cru-mysqldb', url, None, 1))
            casos.append(('driver cru (PyMySQL)', RAIZ, 'cru-pymysql', url, None, 1))
        rotulo_driver = '' if tipo == 'postgres' else ' (PyMySQL)'
        if base:
            casos += [
                ('antigo: fetch' + rotulo_driver, base, 'fetch', url, None, 1),
                ('antigo: fetch + serialização' + rotulo_driver, base, 'ser', url, None, 1),
                ('antigo: envio -> sink livre' + rotulo_driver, base, 'envio', url, livre, 1),
                ('antigo: envio -> sink 20 ms' + rotulo_driver, base, 'envio', url, lento, 1),
            ]
        if tipo != 'postgres':
            casos.append(('novo: fetch (PyMySQL)', RAIZ, 'fetch', url, None, 1))
        rotulo_novo = '' if tipo == 'postgres' else ' (mysqlclient)'
        casos += [
            ('novo: fetch' + rotulo_novo, RAIZ, 'fetch', url_rapido, None, 1),
            ('novo: fetch + serialização' + rotulo_novo, RAIZ, 'ser', url_rapido, None, 1),
            (
                'novo: envio -> sink livre, 1 em voo, sem gzip' + rotulo_novo,
                RAIZ,
                'envio',
                url_rapido,
                livre,
                1,
            ),
            (
                'novo: envio -> sink livre, 4 em voo, sem gzip' + rotulo_novo,
                RAIZ,
                'envio',
                url_rapido,
                livre,
                4,
            ),
            (
                'novo: envio -> sink livre, 4 em voo, gzip' + rotulo_novo,
                RAIZ,
                'envio',
                url_rapido,
                livre_gzip,
                4,
            ),
            # Um lote por vez, sem gzip: como o envio era antes da issue 18 (a base
            # do "≥ 3× contra um intake a 20 ms", medida na mesma rodada).
            (
                'novo: envio -> sink 20 ms, 1 em voo, sem gzip' + rotulo_novo,
                RAIZ,
                'envio',
                url_rapido,
                lento,
                1,
            ),
            (
                'novo: envio -> sink 20 ms, 4 em voo, gzip' + rotulo_novo,
                RAIZ,
                'envio',
                url_rapido,
                lento_gzip,
                4,
            ),
            (
                'novo: envio -> sink 20 ms, 8 em voo, gzip' + rotulo_novo,
                RAIZ,
                'envio',
                url_rapido,
                lento_gzip,
                8,
            ),
            (
                'novo: envio -> Contextia local, 4 em voo, gzip' + rotulo_novo,
                RAIZ,
                'envio',
                url_rapido,
                um,
                4,
            ),
            (
                'novo: envio -> Contextia local --processos 2, 4 em voo, gzip' + rotulo_novo,
                RAIZ,
                'envio',
                url_rapido,
                dois,
                4,
            ),
        ]
        if python_dlt and tipo == 'postgres':
            casos += [
                ('par: dlt, backend sqlalchemy -> jsonl', RAIZ, 'dlt-sqlalchemy', url, None, 1),
                ('par: dlt, backend connectorx -> jsonl', RAIZ, 'dlt-connectorx', url, None, 1),
            ]
        medidas: dict[str, list[dict[str, Any]]] = {c[0]: [] for c in casos}
        for volta in range(repeticoes):
            for rotulo, codigo, modo, alvo, destino, em_voo in casos:
                medida = medir(
                    codigo,
                    modo,
                    alvo,
                    destino,
                    em_voo,
                    python_dlt if modo.startswith('dlt-') else None,
                )
                assert medida['linhas'] == linhas, (rotulo, medida)
                medidas[rotulo].append(medida)
                print(
                    '  [%s %d/%d] %-62s %8.0f linhas/s'
                    % (tipo, volta + 1, repeticoes, rotulo, linhas / medida['segundos']),
                    flush=True,
                )
        return [(rotulo, medidas[rotulo]) for rotulo, *_ in casos]
    finally:
        for s in sinks:
            s.parar()
        bancos.derrubar_banco(banco)


def tabela(tipo: str, linhas: int, resultado: list[tuple[str, Any]]) -> None:
    cru = statistics.median(m['segundos'] for m in resultado[0][1])
    print(
        '\n### %s, %d linhas, 12 colunas (medianas de %d)\n' % (tipo, linhas, len(resultado[0][1]))
    )
    print('| caminho | linhas/s | x driver cru | MB no fio |')
    print('|---|---|---|---|')
    for rotulo, medidas in resultado:
        segundos = statistics.median(m['segundos'] for m in medidas)
        fio = ['%.1f' % (m['bytes'] / 1e6) for m in medidas if 'bytes' in m][:1]
        print(
            '| %s | %s | %.2f | %s |'
            % (rotulo, '{:,}'.format(int(linhas / segundos)), cru / segundos, fio[0] if fio else '')
        )


def rss(linhas_grande: int) -> None:
    from tests.apoio import bancos

    print('\n### pico de RSS do envio novo (PostgreSQL, sink livre, 4 em voo, gzip)\n')
    picos = {}
    for linhas in (linhas_grande // 10, linhas_grande):
        banco = bancos.criar_banco('postgres', 'velocidade_rss')
        destino = Sink(gzip=True)
        try:
            montar(banco, linhas)
            medida = medir(RAIZ, 'envio', banco.url_origem, destino, 4)
            picos[linhas] = medida['rss_mib']
            print(
                '| %d linhas | %.0f MiB | %.0f linhas/s |'
                % (linhas, medida['rss_mib'], linhas / medida['segundos']),
                flush=True,
            )
        finally:
            destino.parar()
            bancos.derrubar_banco(banco)
    pequeno, grande = sorted(picos)
    print('\nrazao %d/%d: %.2f' % (grande, pequeno, picos[grande] / picos[pequeno]))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--linhas', type=int, default=200000)
    p.add_argument('--repeticoes', type=int, default=3)
    p.add_argument('--bancos', default='postgres,mariadb')
    p.add_argument('--base', help='checkout do código de antes (o caminho de hoje)')
    p.add_argument('--rss', action='store_true', help='só o pico de RSS 100k x 1M')
    p.add_argument('--dlt', metavar='PYTHON', help='python de um venv próprio com o dlt (os pares)')
    p.add_argument('--filho', help=argparse.SUPPRESS)
    p.add_argument('--url', help=argparse.SUPPRESS)
    p.add_argument('--sink-url', help=argparse.SUPPRESS)
    p.add_argument('--em-voo', type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument('--sink', type=int, help=argparse.SUPPRESS)
    p.add_argument('--atraso-ms', type=float, default=0, help=argparse.SUPPRESS)
    p.add_argument('--gzip', action='store_true', help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.sink:
        sink(args.sink, args.atraso_ms, args.gzip)
        return 0
    if args.filho:
        print(json.dumps(filho(args.filho, args.url, args.sink_url, args.em_voo)))
        return 0
    if args.rss:
        rss(1000000)
        return 0
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
                    args.repeticoes,
                    os.path.abspath(args.base) if args.base else None,
                    args.dlt,
                ),
            )
        )
    for tipo, resultado in resultados:
        tabela(tipo, args.linhas, resultado)
    print('\ncarga da máquina no fim: %s' % ' '.join('%.2f' % x for x in os.getloadavg()))
    return 0


if __name__ == '__main__':
    sys.exit(main())
