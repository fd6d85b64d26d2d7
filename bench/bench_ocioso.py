#!/usr/bin/env python3
"""
O ciclo OCIOSO numa tabela estilo Sakila, ANTES e DEPOIS da issue 12, numa execução só.

    .venv/bin/python bench/bench_ocioso.py [--ociosos 5] [--linhas 20000] [--folga 30]
        [--antes 7c068bf] [--bancos postgres,mariadb] [--manter]

O caso da issue 12 item 1: uma tabela cujas linhas dividem UM `last_update`
(a migração do ERP; no Sakila o `inventory` inteiro tem 2006-02-15 05:09:17).
A janela da `--folga` e relida a cada ciclo; antes, ela era REENVIADA inteira
ao Contextia a cada ciclo, mesmo sem nada mudar. Depois, o ciclo ocioso envia
0 registros e a releitura custa a origem uma leitura estreita (chave + coluna
de mudança).

Montagem (tudo descartável, tudo em 127.0.0.1):
  * no PostgreSQL e no MariaDB da máquina, um banco novo (tests/apoio/bancos.py)
    com `store` (o cadastro de empresas da regra de projeto: uma loja = uma
    empresa) e duas tabelas do formato do `inventory` do Sakila, com índice em
    `last_update`:
        inventory            N linhas com O MESMO carimbo (a migração)
        inventory_controle   N linhas com carimbos DISTINTOS (1 ms entre elas),
                             todas dentro da folga: o caso normal, de controle
  * ANTES = o ouvinte.py de um commit anterior a issue 12 (padrão 7c068bf; se
    ele não rodar, 30fd574), num `git worktree` em /tmp, com o mesmo Python e
    PYTHONPATH/cwd apontando para o worktree (conferido: o filho imprime o
    contextia_sync.__file__). DEPOIS = o ouvinte.py desta árvore.
  * para cada banco x tabela x versão: um Contextia local novo (ServidorLocal),
    um projeto e uma chave por loja (API de admin), diretório de estado e
    arquivo de chaves novos; um `ouvinte.py --once --folga 30 --varredura nao`
    de primeira vista (fixa a marca) e depois N `--once` OCIOSOS (nada muda no
    ERP).

O que se mede em cada ciclo ocioso (tabela final: medianas dos N):
  registros, bytes   POST /api/v1/intake contados num proxy HTTP entre o
                     ouvinte e o Contextia local (CONTEXTIA_URL aponta para
                     ele): bytes do corpo e len(records) de cada envelope
  linhas lidas       o que o processo leu da tabela: PostgreSQL, delta de
                     pg_stat_user_tables (seq_tup_read + idx_tup_fetch) e
                     blocos de pg_statio (heap + índice), lidos depois que o
                     backend do ouvinte saiu (a estatistica e descarregada na
                     saída do backend); MariaDB, delta de ROWS_READ em
                     information_schema.TABLE_STATISTICS (SET GLOBAL
                     userstat=1 neste servidor de teste; o valor anterior e
                     devolvido no fim)
  bytes da origem    o que o banco mandou ao ouvinte, num proxy TCP entre os
                     dois (CONTEXTIA_ORIGEM aponta para ele): processo inteiro,
                     com conexão, catálogo e o cadastro de lojas
  ciclo ms           o ciclo de dados, logado pelo próprio filho: ciclo_dados
                     embrulhado com um cronometro que escreve no log do SDK
                     (não conta a subida do processo nem o ciclo de projetos)

Linhas lidas e bytes da origem são do processo `--once` inteiro: a subida do
DEPOIS confere o tipo da coluna e conta as linhas sem carimbo (COUNT ... IS
NULL, pelo índice: ~0 linhas); o resto e o ciclo ocioso.

Sai com 1 se algum ciclo ocioso do DEPOIS enviou registro ou byte ao intake,
ou se algum ouvinte falhou. Não é teste: nada aqui é cronometrado pela suíte.
"""

import argparse
import datetime
import gzip
import http.client
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if RAIZ not in sys.path:
    sys.path.insert(0, RAIZ)

# O "antes": o codigo reestruturado (issue 11) sem as mudancas de captura da
# issue 12; se ele nao rodar, a ponta do main antes desta sessao.
ANTES_PADRAO = '7c068bf'
ANTES_RESERVA = '30fd574'
# O last_update do inventory do Sakila: uma migracao, um carimbo so.
CARIMBO = datetime.datetime(2006, 2, 15, 5, 9, 17)
LOJAS = (1, 2)
COLUNAS = ['inventory_id', 'film_id', 'store_id', 'last_update']
TABELAS = (('inventory', 'inventory (1 carimbo)'), ('inventory_controle', 'controle (distintos)'))
CAMINHO_INTAKE = '/api/v1/intake'
VARIAVEIS_CONTEXTIA = (
    'CONTEXTIA_URL',
    'CONTEXTIA_INTAKE_URL',
    'CONTEXTIA_API_KEY',
    'CONTEXTIA_ADMIN_TOKEN',
    'CONTEXTIA_CA_BUNDLE',
    'CONTEXTIA_ORIGEM',
)
SALTO_DE_SALTO = (
    'connection',
    'keep-alive',
    'proxy-connection',
    'transfer-encoding',
    'te',
    'trailer',
    'upgrade',
    'content-length',
    'server',
    'date',
)

# O filho: o ouvinte.py da versao, com ciclo_dados embrulhado por um cronometro
# que escreve no log do SDK. Roda com cwd = raiz da versao (sys.path[0] = '').
EMBRULHO = r"""
import runpy, sys, time
import contextia_sync
from contextia_sync.registro import logger
try:
    import contextia_sync.ouvinte.laco as alvo
except ImportError:
    import contextia_sync.ciclos as alvo
original = alvo.ciclo_dados
def medido(ctx):
    inicio = time.perf_counter()
    try:
        return original(ctx)
    finally:
        logger.info('BENCH ciclo_dados %.3f ms', (time.perf_counter() - inicio) * 1000)
alvo.ciclo_dados = medido
logger.info('BENCH pacote %s', contextia_sync.__file__)
sys.argv = ['ouvinte.py'] + sys.argv[1:]
runpy.run_path('ouvinte.py', run_name='__main__')
"""


# ---------------------------------------------------------------------------
# Os proxies que contam
# ---------------------------------------------------------------------------


class ProxyIntake:
    """Proxy HTTP em 127.0.0.1: repassa tudo ao Contextia local e conta o intake."""

    def __init__(self, destino: str) -> None:
        alvo = destino.split('://', 1)[1].rstrip('/')
        host, porta = alvo.rsplit(':', 1)
        self.lock = threading.Lock()
        self.zerar()
        dono = self

        class Repassar(BaseHTTPRequestHandler):
            protocol_version = 'HTTP/1.1'

            def _repassar(self) -> None:
                tamanho = int(self.headers.get('Content-Length') or 0)
                corpo = self.rfile.read(tamanho) if tamanho else b''
                if self.command == 'POST' and self.path.split('?')[0] == CAMINHO_INTAKE:
                    dono.contar(corpo, self.headers.get('Content-Encoding') or '')
                cabecalhos = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in SALTO_DE_SALTO and k.lower() != 'host'
                }
                conexao = http.client.HTTPConnection(host, int(porta), timeout=300)
                try:
                    conexao.request(self.command, self.path, body=corpo or None, headers=cabecalhos)
                    resposta = conexao.getresponse()
                    dados = resposta.read()
                    self.send_response_only(resposta.status, resposta.reason)
                    for nome, valor in resposta.getheaders():
                        if nome.lower() not in SALTO_DE_SALTO:
                            self.send_header(nome, valor)
                    self.send_header('Content-Length', str(len(dados)))
                    self.end_headers()
                    self.wfile.write(dados)
                finally:
                    conexao.close()

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _repassar

            def log_message(self, *_: Any) -> None:
                pass

        self.servidor = ThreadingHTTPServer(('127.0.0.1', 0), Repassar)
        self.servidor.daemon_threads = True
        self.url = 'http://127.0.0.1:%d' % self.servidor.server_address[1]
        threading.Thread(target=self.servidor.serve_forever, daemon=True).start()

    def zerar(self) -> None:
        with self.lock:
            self.registros = 0
            self.bytes = 0
            self.envios = 0

    def contar(self, corpo: bytes, codificacao: str) -> None:
        texto = gzip.decompress(corpo) if 'gzip' in codificacao.lower() else corpo
        try:
            registros = len(json.loads(texto).get('records') or [])
        except (ValueError, AttributeError):
            registros = 0
        with self.lock:
            self.registros += registros
            self.bytes += len(corpo)
            self.envios += 1

    def fechar(self) -> None:
        self.servidor.shutdown()
        self.servidor.server_close()


class ProxyTcp:
    """Proxy TCP em 127.0.0.1 na frente do banco: conta os bytes que a origem manda."""

    def __init__(self, host: str, porta: int) -> None:
        self.destino = (host, porta)
        self.lock = threading.Lock()
        self.descida = 0
        self.escuta = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.escuta.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.escuta.bind(('127.0.0.1', 0))
        self.escuta.listen(16)
        self.porta = self.escuta.getsockname()[1]
        self.aberto = True
        threading.Thread(target=self._aceitar, daemon=True).start()

    def zerar(self) -> None:
        with self.lock:
            self.descida = 0

    def _aceitar(self) -> None:
        while self.aberto:
            try:
                cliente, _ = self.escuta.accept()
            except OSError:
                return
            try:
                banco = socket.create_connection(self.destino, timeout=10)
            except OSError:
                cliente.close()
                continue
            banco.settimeout(None)
            threading.Thread(
                target=self._bombear, args=(cliente, banco, False), daemon=True
            ).start()
            threading.Thread(target=self._bombear, args=(banco, cliente, True), daemon=True).start()

    def _bombear(self, de: socket.socket, para: socket.socket, da_origem: bool) -> None:
        try:
            while True:
                dados = de.recv(65536)
                if not dados:
                    break
                if da_origem:
                    with self.lock:
                        self.descida += len(dados)
                para.sendall(dados)
        except OSError:
            pass
        finally:
            for lado in (de, para):
                try:
                    lado.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                lado.close()

    def fechar(self) -> None:
        self.aberto = False
        self.escuta.close()


# ---------------------------------------------------------------------------
# O ERP estilo Sakila
# ---------------------------------------------------------------------------


def montar(banco: Any, linhas: int) -> None:
    """store + inventory (um carimbo) + inventory_controle (carimbos distintos)."""
    pg = banco.tipo == 'postgres'
    carimbo = CARIMBO.strftime('%Y-%m-%d %H:%M:%S')
    # Como no Sakila do MySQL: TIMESTAMP com DEFAULT/ON UPDATE; o controle precisa
    # de milissegundos para caber N carimbos distintos dentro da folga.
    tipo = (
        'TIMESTAMP'
        if pg
        else ('TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP')
    )
    tipo_ms = (
        'TIMESTAMP(3)'
        if pg
        else ('TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3)')
    )
    banco.executar(
        'CREATE TABLE store (store_id INTEGER PRIMARY KEY, manager_staff_id'
        ' INTEGER NOT NULL, address_id INTEGER NOT NULL, last_update %s)' % tipo
    )
    for loja in LOJAS:
        banco.executar('INSERT INTO store VALUES (:s, :s, :s, :c)', {'s': loja, 'c': carimbo})
    for tabela, coluna in (('inventory', tipo), ('inventory_controle', tipo_ms)):
        banco.executar(
            'CREATE TABLE %s (inventory_id INTEGER PRIMARY KEY, film_id INTEGER'
            ' NOT NULL, store_id INTEGER NOT NULL, last_update %s)' % (tabela, coluna)
        )
        if tabela == 'inventory':
            valor = "TIMESTAMP '%s'" % carimbo
        elif pg:
            valor = "TIMESTAMP '%s' - (g - 1) * INTERVAL '1 millisecond'" % carimbo
        else:
            valor = "TIMESTAMP '%s.000' - INTERVAL ((g - 1) * 1000) MICROSECOND" % carimbo
        origem = (
            'generate_series(1, %d) AS s(g)' % linhas
            if pg
            else '(SELECT seq AS g FROM seq_1_to_%d) AS s' % linhas
        )
        banco.executar(
            'INSERT INTO %s SELECT g, 1 + MOD(g * 7, 1000), 1 + MOD(g, %d), %s'
            ' FROM %s' % (tabela, len(LOJAS), valor, origem)
        )
        banco.executar('CREATE INDEX idx_%s_last_update ON %s (last_update)' % (tabela, tabela))
        banco.executar(
            'CREATE INDEX idx_%s_store_film ON %s (store_id, film_id)' % (tabela, tabela)
        )
    with banco.motor().connect() as con:
        for tabela in ('store', 'inventory', 'inventory_controle'):
            con.exec_driver_sql(('VACUUM ANALYZE %s' if pg else 'ANALYZE TABLE %s') % tabela)


def conferir_montagem(banco: Any, linhas: int) -> None:
    for tabela, distintos in (('inventory', 1), ('inventory_controle', linhas)):
        total, carimbos, menor, maior = banco.executar(
            'SELECT COUNT(*), COUNT(DISTINCT last_update), MIN(last_update), MAX(last_update)'
            ' FROM %s' % tabela
        )[0]
        if total != linhas or carimbos != distintos:
            raise SystemExit(
                '%s: %s linhas e %s carimbos, esperava %s e %s'
                % (tabela, total, carimbos, linhas, distintos)
            )
        print(
            '    %-20s %6d linhas, %6d carimbo(s) de %s a %s'
            % (tabela, total, carimbos, menor, maior)
        )


def mapeamento(pasta: str, tabela: str) -> str:
    mapa = {
        'client': 'bench-ocioso',
        'source': {'excluded_scopes': []},
        'defaults': {
            'scope_column': 'store_id',
            'key': 'inventory_id',
            'watch_column': 'last_update',
            'chunk': 500,
        },
        'projects': {'source_object': 'store'},
        'datasets': [
            {
                'dataset': tabela,
                'source_object': tabela,
                'columns': COLUNAS,
                'description': 'estoque por loja (Sakila)',
            }
        ],
    }
    caminho = os.path.join(pasta, 'mapeamento.json')
    with open(caminho, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo, indent=2)
    return caminho


# ---------------------------------------------------------------------------
# O custo na origem
# ---------------------------------------------------------------------------


class Medidor:
    """Os contadores de leitura da tabela no banco, e a espera pela saída do ouvinte."""

    def __init__(self, banco: Any) -> None:
        self.banco = banco
        self.pg = banco.tipo == 'postgres'
        self.userstat_antes: str | None = None
        if not self.pg:
            with banco.motor().connect() as con:
                self.userstat_antes = con.exec_driver_sql('SELECT @@GLOBAL.userstat').scalar()
                con.exec_driver_sql('SET GLOBAL userstat = 1')

    def devolver(self) -> None:
        if not self.pg and self.userstat_antes is not None:
            with self.banco.motor().connect() as con:
                con.exec_driver_sql('SET GLOBAL userstat = %d' % int(self.userstat_antes))

    def esperar_saida(self) -> None:
        """Até nenhuma conexão de cliente sobrar no banco (a do ouvinte descarrega a
        estatistica do PostgreSQL ao sair)."""
        if self.pg:
            sql = (
                'SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database()'
                " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
            )
        else:
            sql = (
                'SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE DB = DATABASE()'
                ' AND ID <> CONNECTION_ID()'
            )
        fim = time.monotonic() + 15
        with self.banco.motor().connect() as con:
            while con.exec_driver_sql(sql).scalar() and time.monotonic() < fim:
                time.sleep(0.05)

    def ler(self, tabela: str) -> dict[str, int]:
        with self.banco.motor().connect() as con:
            if self.pg:
                con.exec_driver_sql('SELECT pg_stat_clear_snapshot()')
                linha = con.exec_driver_sql(
                    'SELECT t.seq_scan + COALESCE(t.idx_scan, 0),'
                    ' t.seq_tup_read + COALESCE(t.idx_tup_fetch, 0),'
                    ' s.heap_blks_read + s.heap_blks_hit'
                    ' + COALESCE(s.idx_blks_read, 0) + COALESCE(s.idx_blks_hit, 0)'
                    ' FROM pg_stat_user_tables t JOIN pg_statio_user_tables s USING (relid)'
                    ' WHERE t.relname = %(t)s',
                    {'t': tabela},
                ).one()
                return {
                    'varreduras': int(linha[0]),
                    'linhas': int(linha[1]),
                    'blocos': int(linha[2]),
                }
            lidas = con.exec_driver_sql(
                'SELECT COALESCE(SUM(ROWS_READ), 0) FROM information_schema.TABLE_STATISTICS'
                ' WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %(t)s',
                {'t': tabela},
            ).scalar()
            return {'linhas': int(lidas or 0)}


# ---------------------------------------------------------------------------
# As versoes
# ---------------------------------------------------------------------------


def ambiente_da_versao(raiz: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in VARIAVEIS_CONTEXTIA}
    env['PYTHONPATH'] = raiz
    env['NO_PROXY'] = env['no_proxy'] = '127.0.0.1,localhost'
    return env


def pacote_da_versao(raiz: str) -> str:
    """O contextia_sync.__file__ que um filho com o ambiente da versão importa."""
    feito = subprocess.run(
        [sys.executable, '-c', 'import contextia_sync; print(contextia_sync.__file__)'],
        cwd=raiz,
        env=ambiente_da_versao(raiz),
        capture_output=True,
        text=True,
        timeout=60,
    )
    if feito.returncode:
        raise RuntimeError(feito.stderr.strip()[-500:])
    return feito.stdout.strip()


def conferir_versao(raiz: str) -> str:
    arquivo = pacote_da_versao(raiz)
    if not os.path.realpath(arquivo).startswith(os.path.realpath(raiz) + os.sep):
        raise RuntimeError('o filho importou %s, e não o pacote de %s' % (arquivo, raiz))
    ajuda = subprocess.run(
        [sys.executable, 'ouvinte.py', '--help'],
        cwd=raiz,
        env=ambiente_da_versao(raiz),
        capture_output=True,
        text=True,
        timeout=60,
    )
    if ajuda.returncode or '--folga' not in ajuda.stdout or '--once' not in ajuda.stdout:
        raise RuntimeError(
            'ouvinte.py --help saiu com %s: %s'
            % (ajuda.returncode, (ajuda.stderr or ajuda.stdout)[-500:])
        )
    return arquivo


def git(*argumentos: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ['git', '-C', RAIZ] + list(argumentos), capture_output=True, text=True, timeout=120
    )


def remover_worktree(caminho: str) -> None:
    feito = git('worktree', 'remove', '--force', caminho)
    if feito.returncode or os.path.exists(caminho):
        shutil.rmtree(caminho, ignore_errors=True)
        git('worktree', 'prune')


def preparar_antes(pasta: str, pedido: str) -> tuple[str, str, str]:
    """(raiz do worktree, commit, pacote importado) do primeiro candidato que roda."""
    erros = []
    for commit in dict.fromkeys([pedido, ANTES_RESERVA]):
        caminho = os.path.join(pasta, 'antes-%s' % commit)
        feito = git('worktree', 'add', '--detach', caminho, commit)
        if feito.returncode:
            erros.append('%s: git worktree add: %s' % (commit, feito.stderr.strip()))
            continue
        try:
            return caminho, commit, conferir_versao(caminho)
        except (RuntimeError, subprocess.TimeoutExpired) as erro:
            erros.append('%s: %s' % (commit, erro))
            remover_worktree(caminho)
    raise SystemExit('nenhum "antes" roda:\n  ' + '\n  '.join(erros))


# ---------------------------------------------------------------------------
# Um cenario: banco x tabela x versao
# ---------------------------------------------------------------------------


def rodar_cenario(
    banco: Any,
    medidor: Medidor,
    tabela: str,
    raiz: str,
    pacote: str,
    pasta: str,
    args: argparse.Namespace,
) -> dict[str, Any]:
    import sqlalchemy as sa

    from contextia_local.processo import ServidorLocal

    os.makedirs(pasta)
    url = sa.engine.make_url(banco.url_origem)
    tcp = ProxyTcp(url.host or '127.0.0.1', url.port or (5432 if medidor.pg else 3306))
    origem = url.set(host='127.0.0.1', port=tcp.porta).render_as_string(hide_password=False)
    servidor = ServidorLocal(os.path.join(pasta, 'contextia'))
    servidor.iniciar()
    intake = ProxyIntake(servidor.url or '')
    try:
        chaves = os.path.join(pasta, 'chaves.tsv')
        with open(chaves, 'w') as arquivo:
            for loja in LOJAS:
                arquivo.write(
                    '%s\t%s\n'
                    % (loja, servidor.criar_projeto_com_chave(str(loja), 'Loja %s' % loja))
                )
        os.chmod(chaves, 0o600)
        estado = os.path.join(pasta, 'estado')
        argv = [
            sys.executable,
            '-c',
            EMBRULHO,
            '--mapping=' + mapeamento(pasta, tabela),
            '--source=generic',
            '--chaves=' + chaves,
            '--estado=' + estado,
            '--varredura=nao',
            '--once',
            '--folga',
            str(args.folga),
            '--maximo-por-ciclo',
            str(max(20000, args.linhas)),
        ]
        env = ambiente_da_versao(raiz)
        env.update(
            CONTEXTIA_URL=intake.url,
            CONTEXTIA_ADMIN_TOKEN=servidor.admin_token,
            CONTEXTIA_ORIGEM=origem,
        )

        def um_ciclo(rotulo: str) -> dict[str, Any]:
            medidor.esperar_saida()
            antes = medidor.ler(tabela)
            intake.zerar()
            tcp.zerar()
            log = os.path.join(pasta, '%s.log' % rotulo)
            inicio = time.monotonic()
            with open(log, 'wb') as saida:
                codigo = subprocess.call(
                    argv, cwd=raiz, env=env, stdout=saida, stderr=subprocess.STDOUT, timeout=600
                )
            processo = time.monotonic() - inicio
            medidor.esperar_saida()
            depois = medidor.ler(tabela)
            with open(log, encoding='utf-8', errors='replace') as arquivo:
                texto = arquivo.read()
            ciclo = re.findall(r'BENCH ciclo_dados ([0-9.]+) ms', texto)
            importado = re.findall(r'BENCH pacote (\S+)', texto)
            if codigo or not ciclo or importado != [pacote]:
                raise SystemExit(
                    'ouvinte (%s, %s) saiu com %s; pacote %s (esperado %s).'
                    ' Fim do log %s:\n%s'
                    % (raiz, rotulo, codigo, importado, pacote, log, texto[-3000:])
                )
            medida = {chave: depois[chave] - antes[chave] for chave in depois}
            with intake.lock:
                medida.update(registros=intake.registros, bytes=intake.bytes, envios=intake.envios)
            with tcp.lock:
                medida['origem'] = tcp.descida
            medida.update(
                ciclo_ms=float(ciclo[-1]),
                processo_s=processo,
                estado=os.path.getsize(os.path.join(estado, 'ouvinte-estado.json')),
            )
            return medida

        primeira = um_ciclo('primeira')
        ociosos = []
        for n in range(1, args.ociosos + 1):
            ociosos.append(um_ciclo('ocioso-%d' % n))
        return {'primeira': primeira, 'ociosos': ociosos}
    finally:
        intake.fechar()
        servidor.parar()
        tcp.fechar()


# ---------------------------------------------------------------------------
# A tabela
# ---------------------------------------------------------------------------

CAMPOS = [
    ('registros', 'registros'),
    ('bytes', 'bytes intake'),
    ('envios', 'POSTs'),
    ('linhas', 'linhas lidas'),
    ('varreduras', 'consultas'),
    ('blocos', 'blocos'),
    ('origem', 'bytes origem'),
    ('ciclo_ms', 'ciclo ms'),
    ('estado', 'estado bytes'),
]


def _numero(valor: Any) -> str:
    if valor is None:
        return '-'
    if isinstance(valor, float) and not valor.is_integer():
        return '%.1f' % valor
    return '%d' % valor


def _razao(antes: Any, depois: Any) -> str:
    if antes is None or depois is None:
        return '-'
    if antes == 0:
        return '=' if depois == 0 else 'novo'
    return '%.2f' % (depois / antes)


def medianas(medidas: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        campo: statistics.median(m[campo] for m in medidas)
        for campo, _ in CAMPOS
        if campo in medidas[0]
    }


def imprimir(
    resultados: dict[tuple[str, str, str], dict[str, Any]],
    bancos: list[str],
    rotulos: dict[str, str],
    args: argparse.Namespace,
) -> None:
    cabeca = '%-9s %-21s %-8s' % ('banco', 'tabela', 'versao') + ''.join(
        ' %12s' % titulo for _, titulo in CAMPOS
    )
    print(
        '\nCICLO OCIOSO: mediana de %d ciclos `ouvinte.py --once --folga %s`, janela de'
        ' %d linhas (depois/antes na linha "razao")' % (args.ociosos, args.folga, args.linhas)
    )
    print(cabeca)
    print('-' * len(cabeca))
    for tipo in bancos:
        for tabela, titulo in TABELAS:
            chave_antes, chave_depois = (tipo, tabela, 'antes'), (tipo, tabela, 'depois')
            if chave_antes not in resultados:
                continue
            m_antes = medianas(resultados[chave_antes]['ociosos'])
            m_depois = medianas(resultados[chave_depois]['ociosos'])
            for versao, m in (('antes', m_antes), ('depois', m_depois)):
                primeira = (
                    tipo if versao == 'antes' else '',
                    titulo if versao == 'antes' else '',
                    rotulos[versao],
                )
                print(
                    '%-9s %-21s %-8s' % primeira
                    + ''.join(' %12s' % _numero(m.get(campo)) for campo, _ in CAMPOS)
                )
            print(
                '%-9s %-21s %-8s' % ('', '', 'razao')
                + ''.join(
                    ' %12s' % _razao(m_antes.get(campo), m_depois.get(campo)) for campo, _ in CAMPOS
                )
            )
        print()
    print('PRIMEIRA VISTA (o --once que fixa a marca; uma vez por cenario)')
    print(cabeca)
    print('-' * len(cabeca))
    for tipo in bancos:
        for tabela, titulo in TABELAS:
            for versao in ('antes', 'depois'):
                resultado = resultados.get((tipo, tabela, versao))
                if resultado is None:
                    continue
                m = resultado['primeira']
                print(
                    '%-9s %-21s %-8s' % (tipo, titulo, rotulos[versao])
                    + ''.join(' %12s' % _numero(m.get(campo)) for campo, _ in CAMPOS)
                )
    print(
        '\nregistros/bytes intake/POSTs: POST %s no proxy HTTP. linhas lidas: %s.'
        ' consultas e blocos: só PostgreSQL (seq_scan + idx_scan; heap + índice).'
        ' bytes origem: banco -> ouvinte no proxy TCP, processo inteiro. ciclo ms:'
        ' ciclo_dados no log do filho. estado bytes: ouvinte-estado.json depois do ciclo.'
        % (
            CAMINHO_INTAKE,
            'PostgreSQL seq_tup_read + idx_tup_fetch; MariaDB TABLE_STATISTICS.ROWS_READ',
        )
    )


# ---------------------------------------------------------------------------


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0].strip())
    p.add_argument('--ociosos', type=int, default=5, help='ciclos ociosos por cenario')
    p.add_argument('--linhas', type=int, default=20000, help='linhas da janela (de cada tabela)')
    p.add_argument('--folga', type=int, default=30)
    p.add_argument('--antes', default=ANTES_PADRAO, help='commit do "antes"')
    p.add_argument('--bancos', default='postgres,mariadb')
    p.add_argument(
        '--manter',
        action='store_true',
        help='não apaga a pasta de trabalho (logs e estados) no fim',
    )
    args = p.parse_args()

    from tests.apoio import bancos as apoio

    inicio = time.monotonic()
    pasta = tempfile.mkdtemp(prefix='bench-ocioso-')
    resultados: dict[tuple[str, str, str], dict[str, Any]] = {}
    bancos: list[str] = []
    worktree = None
    try:
        worktree, commit, pacote_antes = preparar_antes(pasta, args.antes)
        pacote_depois = conferir_versao(RAIZ)
        cabeca = git('rev-parse', '--short', 'HEAD').stdout.strip()
        alterados = len(git('status', '--short', '--untracked-files=no').stdout.splitlines())
        print('antes : %s (worktree %s) -> importa %s' % (commit, worktree, pacote_antes))
        print(
            'depois: %s (HEAD %s + %d arquivo(s) alterado(s)) -> importa %s'
            % (RAIZ, cabeca, alterados, pacote_depois)
        )
        versoes = {'antes': (worktree, pacote_antes), 'depois': (RAIZ, pacote_depois)}
        rotulos = {'antes': 'antes', 'depois': 'depois'}

        for tipo in [b.strip() for b in args.bancos.split(',') if b.strip()]:
            ok, motivo = apoio.servidor_disponivel(tipo)
            if not ok:
                print('%-9s PULADO: %s' % (tipo, motivo))
                continue
            bancos.append(tipo)
            banco = apoio.criar_banco(tipo, 'ocioso')
            medidor = None
            try:
                t0 = time.monotonic()
                montar(banco, args.linhas)
                print('%s: banco %s montado em %.1fs' % (tipo, banco.nome, time.monotonic() - t0))
                conferir_montagem(banco, args.linhas)
                medidor = Medidor(banco)
                for tabela, _ in TABELAS:
                    for versao, (raiz, pacote) in versoes.items():
                        t0 = time.monotonic()
                        resultado = rodar_cenario(
                            banco,
                            medidor,
                            tabela,
                            raiz,
                            pacote,
                            os.path.join(pasta, '%s-%s-%s' % (tipo, tabela, versao)),
                            args,
                        )
                        resultados[(tipo, tabela, versao)] = resultado
                        print(
                            '  %-9s %-19s %-7s registros por ciclo ocioso %s; %.0fs'
                            % (
                                tipo,
                                tabela,
                                versao,
                                [m['registros'] for m in resultado['ociosos']],
                                time.monotonic() - t0,
                            ),
                            flush=True,
                        )
            finally:
                if medidor is not None:
                    medidor.devolver()
                apoio.derrubar_banco(banco)
    finally:
        if worktree is not None:
            remover_worktree(worktree)
        if args.manter:
            print('pasta de trabalho mantida: %s' % pasta)
        else:
            shutil.rmtree(pasta, ignore_errors=True)

    if not resultados:
        print('nenhum banco disponível: nada medido', file=sys.stderr)
        return 1
    imprimir(resultados, bancos, rotulos, args)
    falhas = [
        '%s/%s ciclo ocioso %d: %d registro(s), %d byte(s)'
        % (tipo, tabela, n, m['registros'], m['bytes'])
        for (tipo, tabela, versao), r in sorted(resultados.items())
        if versao == 'depois'
        for n, m in enumerate(r['ociosos'], 1)
        if m['registros'] or m['bytes']
    ]
    print('\ntempo total: %.0fs' % (time.monotonic() - inicio))
    if falhas:
        print(
            'FALHOU: o DEPOIS enviou ao intake em ciclo ocioso:\n  ' + '\n  '.join(falhas),
            file=sys.stderr,
        )
        return 1
    print('ok: nenhum ciclo ocioso do DEPOIS enviou registro ou byte ao intake')
    return 0


if __name__ == '__main__':
    sys.exit(main())
