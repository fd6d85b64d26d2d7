#!/usr/bin/env python3
"""
A reconciliacao (`coluna+reconciliacao`): quanto demora um DELETE para sumir do
Contextia, quanto custa uma reconciliacao, e se a memória fica plana.

    .venv/bin/python bench/bench_reconciliacao.py [--intervalo 10] [--exclusoes 30]
        [--chaves 1000000] [--pequeno 100000] [--grande 5000000] [--partes latencia,custo,rss]

Tudo de verdade, em 127.0.0.1: o PostgreSQL da máquina (um banco novo, derrubado
no fim), o Contextia local num processo, e o ouvinte.py como processo.

1. LATENCIA: DELETE comitado -> registro sumido do Contextia, com
   --intervalo-reconciliacao=10. Uma tabela de 2 000 linhas carregada pela
   varredura (`--once --varrer-agora`); o ouvinte de pe; um escritor apaga
   --exclusoes linhas, uma a cada ~1,5 s; um leitor lê o Contextia a cada 0,2 s
   e anota quando cada uma sumiu. Esperado: p50 perto de meio intervalo, p95
   perto de um intervalo, mais o ciclo. Linha de base (mesma execução): a
   remoção mandada direto pelo cliente (`remove`), sem ouvinte -- o piso do que
   o Contextia e o leitor conseguem medir.
2. CUSTO de uma reconciliacao de uma tabela de --chaves linhas (12 colunas de
   ERP; PK em ID, índice em (EMPRESA_ID, ID); 10 empresas), contra uma leitura
   completa da mesma tabela (o que a varredura lê): o tempo no servidor
   (EXPLAIN ANALYZE da consulta de cada uma), o tempo e os bytes que a origem
   manda ao ouvinte (num proxy TCP na frente do banco), a reconciliacao inteira
   (ler, comparar com o conjunto entregue em disco, sem diferenças) e a
   leitura completa pelo adaptador (cada linha até dict, sem enviar).
3. MEMORIA: o pico de RSS de um processo que faz a reconciliacao (a primeira,
   que grava o conjunto, e a segunda, com 100 exclusões a comparar), num
   conjunto de --pequeno e num de --grande chaves; cada medida no seu processo.
   Alvo: o grande no máximo 1,3x o pequeno. A base (o processo com tudo
   importado e a origem conectada, antes de ler) e medida junto.

Não é teste: nada aqui é cronometrado pela suíte. A máquina pode estar
carregada: as razões são da mesma execução.
"""

import argparse
import json
import os
import random
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, RAIZ)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_latencia  # noqa: E402 - o leitor do Contextia e o percentil, de la
from bench_latencia import PASSO_LEITOR, URL_ADMIN, percentil  # noqa: E402

DATASET = 'movimento'
EMPRESAS = 10


# ---------------------------------------------------------------------------
# o banco
# ---------------------------------------------------------------------------


class Banco:
    """Um banco novo no PostgreSQL da máquina; `derrubar()` no fim."""

    def __init__(self):
        import sqlalchemy as sa

        self.nome = 'bench_rec_%s' % uuid.uuid4().hex[:8]
        self.admin = sa.create_engine(URL_ADMIN, isolation_level='AUTOCOMMIT')
        with self.admin.connect() as con:
            con.execute(sa.text('CREATE DATABASE %s' % self.nome))
        self.url = URL_ADMIN.rsplit('/', 1)[0] + '/' + self.nome
        self.motor = sa.create_engine(self.url, isolation_level='AUTOCOMMIT')

    def executar(self, sql, **parametros):
        import sqlalchemy as sa

        with self.motor.connect() as con:
            resultado = con.execute(sa.text(sql), parametros)
            return resultado.fetchall() if resultado.returns_rows else None

    def tabela_erp(self, nome, linhas, empresas=EMPRESAS):
        """12 colunas com cara de título a receber; PK em ID, índice em (EMPRESA_ID, ID)."""
        inicio = time.monotonic()
        self.executar(
            'CREATE TABLE "%s" ("ID" BIGINT PRIMARY KEY, "EMPRESA_ID" INTEGER,'
            ' "CLIENTE" VARCHAR(60), "DOCUMENTO" VARCHAR(20), "PARCELA" INTEGER,'
            ' "VALOR" NUMERIC(14,2), "SALDO" NUMERIC(14,2), "EMISSAO" DATE,'
            ' "VENCIMENTO" DATE, "SITUACAO" CHAR(1), "HISTORICO" VARCHAR(80),'
            ' "ALTERADO_EM" TIMESTAMP)' % nome
        )
        self.executar(
            'INSERT INTO "%s" SELECT i, 1 + i %% %d, \'Cliente \' || (i %% 5000),'
            " 'NF-' || i, 1 + i %% 6, (i %% 100000) / 100.0, (i %% 70000) / 100.0,"
            " DATE '2025-01-01' + (i %% 365), DATE '2025-02-01' + (i %% 365),"
            " 'A', repeat('h', 40), TIMESTAMP '2025-01-01' + i * INTERVAL '1 second'"
            ' FROM generate_series(1, :n) AS i' % (nome, empresas),
            n=linhas,
        )
        self.executar('CREATE INDEX "%s_EMP_ID" ON "%s" ("EMPRESA_ID", "ID")' % (nome, nome))
        self.executar('CREATE INDEX "%s_ALT" ON "%s" ("ALTERADO_EM")' % (nome, nome))
        self.executar('VACUUM ANALYZE "%s"' % nome)
        print(
            '  %s: %s linhas criadas em %.1fs' % (nome, linhas, time.monotonic() - inicio),
            flush=True,
        )

    def empresas(self, quantas=EMPRESAS):
        self.executar(
            'CREATE TABLE "EMPRESAS" ("EMPRESA_ID" INTEGER PRIMARY KEY,'
            ' "RAZAO_SOCIAL" VARCHAR(60), "ATIVA" CHAR(1))'
        )
        for n in range(1, quantas + 1):
            self.executar('INSERT INTO "EMPRESAS" VALUES (:e, :r, \'S\')', e=n, r='Empresa %d' % n)

    def derrubar(self):
        import sqlalchemy as sa

        self.motor.dispose()
        with self.admin.connect() as con:
            con.execute(sa.text('DROP DATABASE IF EXISTS %s WITH (FORCE)' % self.nome))
        self.admin.dispose()


def mapeamento(pasta, tabela, estrategia='coluna+reconciliacao'):
    caminho = os.path.join(pasta, 'mapa-%s.json' % tabela)
    with open(caminho, 'w') as arquivo:
        json.dump(
            {
                '$schema': os.path.join(RAIZ, 'mappings', 'mapeamento.schema.json'),
                'client': 'bench',
                'listener': {'strategy': estrategia},
                'defaults': {
                    'scope_column': 'EMPRESA_ID',
                    'key': 'ID',
                    'watch_column': 'ALTERADO_EM',
                },
                'projects': {
                    'source_object': 'EMPRESAS',
                    'scope_column': 'EMPRESA_ID',
                    'name_column': 'RAZAO_SOCIAL',
                    'filters': [{'column': 'ATIVA', 'equals': 'S'}],
                },
                'datasets': [
                    {
                        'dataset': DATASET,
                        'source_object': tabela,
                        'columns': [
                            'ID',
                            'EMPRESA_ID',
                            'CLIENTE',
                            'DOCUMENTO',
                            'PARCELA',
                            'VALOR',
                            'SALDO',
                            'EMISSAO',
                            'VENCIMENTO',
                            'SITUACAO',
                            'HISTORICO',
                            'ALTERADO_EM',
                        ],
                    }
                ],
            },
            arquivo,
        )
    return caminho


# ---------------------------------------------------------------------------
# 1. latencia DELETE -> sumiu
# ---------------------------------------------------------------------------


class Leitor(bench_latencia.Leitor):
    """O leitor do bench_latencia, ao contrario: anota quando cada ID SUMIU do Contextia."""

    def __init__(self, chave, dataset):
        super().__init__(chave, dataset)
        self.sumiu = {}

    def run(self):
        from contextia_sync.intake import cliente, transporte

        vistos = set()
        while not self.parar:
            try:
                agora_ids = {int(r['ID']) for r in cliente.ler_registros(self.dataset, self.chave)}
            except transporte.ErroContextia:
                agora_ids = None
            agora = time.monotonic()
            for ident in (vistos - agora_ids) if agora_ids is not None else ():
                self.sumiu.setdefault(ident, agora)
            vistos |= agora_ids or set()
            time.sleep(PASSO_LEITOR)


def linha_de_base(chave, repeticoes=10):
    """A remoção mandada direto (sem ouvinte) até sumir: o piso da medida."""
    from contextia_sync.intake import cliente

    cliente.enviar_dataset(
        'base', [{'ID': n, 'V': n} for n in range(repeticoes)], key='ID', api_key=chave
    )
    leitor = Leitor(chave, 'base')
    leitor.start()
    time.sleep(1)
    tempos = []
    for n in range(repeticoes):
        inicio = time.monotonic()
        cliente.enviar_dataset('base', [], key='ID', remove=[n], api_key=chave)
        while n not in leitor.sumiu:
            time.sleep(0.01)
        tempos.append(leitor.sumiu[n] - inicio)
    leitor.parar = True
    return tempos


def latencia(args, banco, pasta):
    from contextia_local.processo import ServidorLocal
    from contextia_sync.intake import cliente

    print(
        '\n== 1. DELETE -> sumiu do Contextia, --intervalo-reconciliacao=%ds ==' % args.intervalo,
        flush=True,
    )
    banco.empresas(1)
    banco.tabela_erp('MOVIMENTO', 2000, empresas=1)
    with ServidorLocal(os.path.join(pasta, 'contextia')) as servidor:
        os.environ.update(servidor.ambiente())
        chave = servidor.criar_projeto_com_chave('1', 'Empresa 1')
        chaves = os.path.join(pasta, 'chaves.tsv')
        with open(chaves, 'w') as arquivo:
            arquivo.write('1\t%s\n' % chave)
        os.chmod(chaves, 0o600)
        base = linha_de_base(chave)
        env = dict(os.environ, CONTEXTIA_ORIGEM=banco.url)
        argv = [
            sys.executable,
            'ouvinte.py',
            '--mapping=' + mapeamento(pasta, 'MOVIMENTO'),
            '--source=generic',
            '--chaves=' + chaves,
            '--estado=' + os.path.join(pasta, 'e'),
            '--intervalo-reconciliacao=%d' % args.intervalo,
            '--intervalo-projetos=3600',
            '--varredura=nao',
        ]
        carga = subprocess.run(
            argv + ['--once', '--varrer-agora'],
            cwd=RAIZ,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        if carga.returncode:
            raise SystemExit('carga completa falhou:\n' + carga.stdout + carga.stderr)
        total = len(list(cliente.ler_registros(DATASET, chave)))
        print('  carga completa pela varredura: %d registros no Contextia' % total, flush=True)
        log = open(os.path.join(pasta, 'ouvinte.log'), 'w+b')
        ouvinte = subprocess.Popen(
            argv + ['--intervalo-dados=5'], cwd=RAIZ, env=env, stdout=log, stderr=subprocess.STDOUT
        )
        leitor = Leitor(chave, DATASET)
        comitado = {}
        try:
            leitor.start()
            time.sleep(2 * args.intervalo)  # de pe, uma reconciliacao feita
            sorteio = random.Random(7)
            alvos = sorteio.sample(range(1, 2001), args.exclusoes)
            inicio = time.monotonic()
            for ident in alvos:
                time.sleep(sorteio.uniform(0.5, 2.5))
                banco.executar('DELETE FROM "MOVIMENTO" WHERE "ID" = :i', i=ident)
                comitado[ident] = time.monotonic()
            escrita = time.monotonic() - inicio
            prazo = time.monotonic() + 3 * args.intervalo + 60
            while time.monotonic() < prazo and not all(i in leitor.sumiu for i in comitado):
                time.sleep(0.2)
        finally:
            leitor.parar = True
            ouvinte.send_signal(signal.SIGTERM)
            ouvinte.wait(timeout=60)
        latencias = [leitor.sumiu[i] - q for i, q in comitado.items() if i in leitor.sumiu]
        faltaram = len(comitado) - len(latencias)
        restantes = {int(r['ID']) for r in cliente.ler_registros(DATASET, chave)}
        vivas_removidas = total - len(comitado) - len(restantes)
    print('  exclusões comitadas ...: %s em %.1fs' % (len(comitado), escrita))
    print(
        '  linha de base (remove direto -> sumiu): mediana %.2fs, max %.2fs'
        % (statistics.median(base), max(base))
    )
    print(
        '  DELETE -> sumiu pelo ouvinte: p50 %.2fs   p95 %.2fs   max %.2fs   (faltaram %s)'
        % (percentil(latencias, 0.5), percentil(latencias, 0.95), max(latencias), faltaram)
    )
    print(
        '  razão p50/intervalo %.2f; p95/intervalo %.2f (esperado ~0,5 e ~1, mais o ciclo)'
        % (percentil(latencias, 0.5) / args.intervalo, percentil(latencias, 0.95) / args.intervalo)
    )
    print('  linhas vivas que saíram do Contextia: %d (tem de ser 0)' % vivas_removidas)
    return 1 if faltaram or vivas_removidas else 0


# ---------------------------------------------------------------------------
# 2. o custo de uma reconciliacao contra uma leitura completa
# ---------------------------------------------------------------------------


def _captura(pasta, tabela, url):
    """A reconciliacao em processo, sobre o adaptador genérico apontado para `url`."""
    os.environ['CONTEXTIA_ORIGEM'] = url
    from contextia_sync.captura.ao_vivo import datasets_ao_vivo
    from contextia_sync.captura.reconciliacao import CapturaReconciliacao, OpcoesReconciliacao
    from contextia_sync.estado.estado import Estado
    from contextia_sync.origem import carregar_origem

    os.makedirs(pasta, exist_ok=True)
    with open(mapeamento(pasta, tabela, 'reconciliacao')) as arquivo:
        mapa = json.load(arquivo)
    vivos, _ = datasets_ao_vivo(mapa, 'reconciliacao')
    origem = carregar_origem('generic')
    origem.conectar(url)
    estado = Estado(os.path.join(pasta, 'estado-%s.json' % tabela))
    opcoes = OpcoesReconciliacao(
        pasta=os.path.join(pasta, 'conjuntos-%s' % tabela),
        intervalo=0,
        escopos=lambda: {str(n) for n in range(1, EMPRESAS + 1)},
    )
    captura = CapturaReconciliacao(origem, estado, 180, 20000, opcoes)
    return captura, vivos[0], origem


def _servidor_ms(banco, sql):
    plano = banco.executar('EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ' + sql)[0][0]
    return plano[0]['Execution Time'], plano[0]['Plan']


def _passe(pasta, url, proxy, repeticoes):
    """{rotulo: (mediana do tempo, mediana dos bytes no proxy)} das três leituras."""
    captura, alvo, origem = _captura(pasta, 'GRANDE', url)
    medidas = (
        ('reconciliação: a primeira (grava o conjunto)', lambda: captura.ler(alvo), 1),
        ('reconciliação: sem diferença (lê e compara)', lambda: captura.ler(alvo), repeticoes),
        (
            'leitura completa pelo adaptador (12 colunas)',
            lambda: sum(1 for _ in origem.fetch(alvo.source_object, alvo.colunas)),
            repeticoes,
        ),
    )
    resultados = {}
    for rotulo, funcao, vezes in medidas:
        tempos, quantos = [], []
        for _ in range(vezes):
            origem.renovar()
            proxy.zerar()
            inicio = time.perf_counter()
            funcao()
            tempos.append(time.perf_counter() - inicio)
            quantos.append(proxy.descida)
        resultados[rotulo] = (statistics.median(tempos), statistics.median(quantos))
    origem.fechar()
    return resultados


def custo(args, banco, pasta):
    from bench_ocioso import ProxyTcp

    print(
        '\n== 2. uma reconciliacao de %s chaves contra uma leitura completa ==' % args.chaves,
        flush=True,
    )
    banco.tabela_erp('GRANDE', args.chaves)
    import sqlalchemy as sa

    url = sa.engine.make_url(banco.url)
    proxy = ProxyTcp(url.host or '127.0.0.1', url.port or 5432)
    via_proxy = url.set(host='127.0.0.1', port=proxy.porta).render_as_string(hide_password=False)
    # Os bytes num passe pelo proxy; o tempo noutro, direto (o proxy roda neste
    # processo e disputaria a CPU com a leitura).
    bytes_ = _passe(os.path.join(pasta, 'bytes'), via_proxy, proxy, 1)
    tempos = _passe(os.path.join(pasta, 'tempo'), banco.url, proxy, args.repeticoes)
    resultados = {rotulo: (tempos[rotulo][0], bytes_[rotulo][1]) for rotulo in tempos}
    alvo = _captura(os.path.join(pasta, 'tempo'), 'GRANDE', banco.url)[1]
    from contextia_sync.origem.conjunto import consulta_conjunto
    from contextia_sync.origem.consultas import objeto_sem_reflexao
    from sqlalchemy.dialects import postgresql

    objeto = objeto_sem_reflexao('GRANDE', ['ID', 'EMPRESA_ID'])
    sql_chaves = str(
        consulta_conjunto(objeto, 'ID', 'EMPRESA_ID', 'postgresql')[0].compile(
            dialect=postgresql.dialect()
        )
    )
    sql_tudo = 'SELECT %s FROM "GRANDE"' % ', '.join('"%s"' % c for c in alvo.colunas)
    servidor = {}
    for rotulo, sql in (('chaves', sql_chaves), ('tudo', sql_tudo)):
        medidas = [_servidor_ms(banco, sql) for _ in range(args.repeticoes)]
        servidor[rotulo] = (statistics.median(m[0] for m in medidas), medidas[0][1]['Node Type'])
    proxy.fechar()
    print('  %-46s %10s %14s' % ('', 'tempo (s)', 'bytes origem'))
    print('  (tempo: mediana de %d, conexão direta; bytes: pelo proxy TCP)' % args.repeticoes)
    for rotulo, (tempo, quantos) in resultados.items():
        print(
            '  %-46s %10.2f %14s' % (rotulo, tempo, '{:,}'.format(int(quantos)).replace(',', ' '))
        )
    rec = resultados['reconciliação: sem diferença (lê e compara)']
    tudo = resultados['leitura completa pelo adaptador (12 colunas)']
    print(
        '  no servidor (EXPLAIN ANALYZE, mediana): chaves %.0f ms (%s), tudo %.0f ms (%s)'
        % (servidor['chaves'][0], servidor['chaves'][1], servidor['tudo'][0], servidor['tudo'][1])
    )
    print(
        '  razão reconciliacao/leitura completa: tempo %.2f, bytes %.2f, servidor %.2f'
        % (rec[0] / tudo[0], rec[1] / tudo[1], servidor['chaves'][0] / servidor['tudo'][0])
    )
    tamanho = sum(
        os.path.getsize(os.path.join(r, n))
        for r, _, ns in os.walk(os.path.join(pasta, 'tempo', 'conjuntos-GRANDE'))
        for n in ns
    )
    print('  o conjunto entregue no disco: %.1f MB (%d empresas)' % (tamanho / 1e6, EMPRESAS))
    return 0


# ---------------------------------------------------------------------------
# 3. o pico de memoria
# ---------------------------------------------------------------------------


def filho_rss(pasta, tabela, url):
    """No processo filho: reconcilia duas vezes e diz o pico de RSS (JSON)."""
    captura, alvo, origem = _captura(pasta, tabela, url)
    origem.contar(alvo.source_object)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    inicio = time.perf_counter()
    captura.ler(alvo)  # a primeira: grava o conjunto
    primeira = time.perf_counter() - inicio
    import sqlalchemy as sa

    motor = sa.create_engine(url, isolation_level='AUTOCOMMIT')
    with motor.connect() as con:
        con.execute(
            sa.text(
                'DELETE FROM "%s" WHERE "ID" IN (SELECT "ID" FROM "%s"'
                ' ORDER BY "ID" LIMIT 100)' % (tabela, tabela)
            )
        )
    motor.dispose()
    inicio = time.perf_counter()
    leitura = captura.ler(alvo)  # a segunda: compara, 100 saem
    segunda = time.perf_counter() - inicio
    removidas = sum(len(v) for v in leitura.remocoes_por_escopo.values())
    pico = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                'base_kb': base,
                'pico_kb': pico,
                'primeira_s': primeira,
                'segunda_s': segunda,
                'removidas': removidas,
            }
        )
    )


def rss(args, banco, pasta):
    print('\n== 3. pico de RSS: %s contra %s chaves ==' % (args.pequeno, args.grande), flush=True)
    medidas = {}
    for rotulo, linhas in (('pequeno', args.pequeno), ('grande', args.grande)):
        tabela = 'RSS_%s' % rotulo.upper()
        banco.executar(
            'CREATE TABLE "%s" ("ID" BIGINT PRIMARY KEY, "EMPRESA_ID" INTEGER,'
            ' "VALOR" INTEGER, "ALTERADO_EM" TIMESTAMP)' % tabela
        )
        inicio = time.monotonic()
        banco.executar(
            'INSERT INTO "%s" SELECT i, 1 + i %% %d, i, TIMESTAMP \'2025-01-01\''
            ' FROM generate_series(1, :n) AS i' % (tabela, EMPRESAS),
            n=linhas,
        )
        banco.executar('CREATE INDEX "%s_EMP_ID" ON "%s" ("EMPRESA_ID", "ID")' % (tabela, tabela))
        banco.executar('VACUUM ANALYZE "%s"' % tabela)
        print(
            '  %s: %s linhas criadas em %.1fs' % (tabela, linhas, time.monotonic() - inicio),
            flush=True,
        )
        feito = subprocess.run(
            [sys.executable, os.path.abspath(__file__), '--rss-filho', pasta, tabela, banco.url],
            capture_output=True,
            text=True,
            timeout=3600,
        )
        if feito.returncode:
            raise SystemExit('filho de %s falhou:\n%s' % (tabela, feito.stdout + feito.stderr))
        medidas[rotulo] = json.loads(feito.stdout.strip().splitlines()[-1])
    for rotulo, linhas in (('pequeno', args.pequeno), ('grande', args.grande)):
        m = medidas[rotulo]
        print(
            '  %-8s %9s chaves: base %6.1f MiB, pico %6.1f MiB; primeira %.1fs, segunda'
            ' %.1fs (%d removidas)'
            % (
                rotulo,
                linhas,
                m['base_kb'] / 1024,
                m['pico_kb'] / 1024,
                m['primeira_s'],
                m['segunda_s'],
                m['removidas'],
            )
        )
    razao = medidas['grande']['pico_kb'] / medidas['pequeno']['pico_kb']
    print(
        '  razão do pico grande/pequeno: %.2f (alvo <= 1,30); chaves %.0fx'
        % (razao, args.grande / args.pequeno)
    )
    return 0 if razao <= 1.3 else 1


def diario(args, pasta):
    """
    O diário da coluna (o que ela entregou entre duas reconciliações) contra a
    comparação sem ele, num conjunto de `--chaves` chaves: quanto custa anotar
    um ciclo, comparar com o diário e somá-lo ao conjunto (a regravação).
    """
    from contextia_sync.arquivos import GravacaoAtomica
    from contextia_sync.captura import conjuntos

    identidade = conjuntos.Identidade('titulos', 'V_TITULOS', 'ID', 'EMPRESA_ID')
    base = os.path.join(pasta, 'diario')
    arquivo = conjuntos.caminho(base, 'titulos', '1')
    os.makedirs(os.path.dirname(arquivo), exist_ok=True)
    chaves = list(range(0, 2 * args.chaves, 2))  # pares: o diario traz impares
    gravacao = GravacaoAtomica(arquivo)
    for linha in conjuntos.linhas_do_arquivo(chaves, identidade.cabecalho('1')):
        gravacao.escrever(linha)
    gravacao.trocar()
    novas = [2 * i + 1 for i in range(0, args.chaves, max(1, args.chaves // 300))][:300]

    def comparar(com_diario):
        guardadas = conjuntos.abrir_arquivo(arquivo, identidade, '1')
        if com_diario:
            guardadas = conjuntos.juntar(guardadas, novas)
        origem = iter(sorted(chaves + (novas if com_diario else [])))
        return sum(1 for _ in conjuntos.comparar(guardadas, origem, conjuntos.Contagem()))

    def regravar():
        gravacao = GravacaoAtomica(arquivo + '.novo')
        for linha in conjuntos.linhas_do_arquivo(
            conjuntos.juntar(conjuntos.abrir_arquivo(arquivo, identidade, '1'), novas),
            identidade.cabecalho('1'),
        ):
            gravacao.escrever(linha)
        gravacao.trocar()

    def anotar():
        alvo = conjuntos.caminho_diario(base, 'titulos', '1')
        conjuntos.anotar_diario(alvo, identidade, '1', novas)
        os.unlink(alvo)

    tempos = {}
    for nome, funcao in (
        ('sem', lambda: comparar(False)),
        ('com', lambda: comparar(True)),
        ('regravar', regravar),
        ('anotar', anotar),
    ):
        medidas = []
        for _ in range(args.repeticoes):
            inicio = time.perf_counter()
            funcao()
            medidas.append(time.perf_counter() - inicio)
        tempos[nome] = statistics.median(medidas)
    print(
        '\n== diário da coluna, %d chaves no conjunto, %d no diário (medianas de %d)'
        % (args.chaves, len(novas), args.repeticoes)
    )

    def virgula(numero, casas=2):
        return ('%.*f' % (casas, numero)).replace('.', ',')

    print('comparar sem diário ............ %s s (1,00)' % virgula(tempos['sem']))
    print(
        'comparar com o diário .......... %s s (%s)'
        % (virgula(tempos['com']), virgula(tempos['com'] / tempos['sem']))
    )
    print(
        'somar o diário (regravar) ...... %s s (%s)'
        % (virgula(tempos['regravar']), virgula(tempos['regravar'] / tempos['sem']))
    )
    print('anotar um ciclo (%d chaves) .... %s ms' % (len(novas), virgula(1000 * tempos['anotar'])))
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == '--rss-filho':
        filho_rss(*sys.argv[2:5])
        return 0
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--intervalo', type=int, default=10)
    p.add_argument('--exclusoes', type=int, default=30)
    p.add_argument('--chaves', type=int, default=1000000)
    p.add_argument('--pequeno', type=int, default=100000)
    p.add_argument('--grande', type=int, default=5000000)
    p.add_argument('--repeticoes', type=int, default=3)
    p.add_argument('--partes', default='latencia,custo,rss,diario')
    args = p.parse_args()
    import logging
    from contextia_sync.registro import logger

    logger.setLevel(logging.WARNING)
    partes = args.partes.split(',')
    print(
        'carga da máquina (1, 5, 15 min): %.1f %.1f %.1f em %d nucleo(s)'
        % (os.getloadavg() + (os.cpu_count() or 0,)),
        flush=True,
    )
    saida = 0
    with tempfile.TemporaryDirectory() as pasta:
        if 'diario' in partes:
            saida |= diario(args, pasta)
            partes.remove('diario')
            if not partes:
                return saida
        banco = Banco()
        try:
            if 'latencia' in partes:
                saida |= latencia(args, banco, pasta)
            if 'custo' in partes:
                saida |= custo(args, banco, pasta)
            if 'rss' in partes:
                saida |= rss(args, banco, pasta)
        finally:
            banco.derrubar()
    print('\ncarga da máquina no fim (1, 5, 15 min): %.1f %.1f %.1f' % os.getloadavg())
    return saida


if __name__ == '__main__':
    sys.exit(main())
