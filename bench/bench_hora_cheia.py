#!/usr/bin/env python3
"""
A hora cheia da `coluna` (issue 31): mudança sustentada, e o carimbo em massa.

    .venv/bin/python bench/bench_hora_cheia.py [--bancos postgres,mariadb]
        [--taxas 100,1000] [--duracao 60] [--folga 180] [--intervalo-dados 1]
    .venv/bin/python bench/bench_hora_cheia.py --mesmo-carimbo [1000000] [--bancos postgres]

Tudo de verdade, em 127.0.0.1: o PostgreSQL (5432, trust) e o MariaDB (3306,
root sem senha) da máquina, um banco novo por rodada (derrubado no fim); o
Contextia local num processo; o ouvinte.py como processo (`--intervalo-dados`,
`--folga`, sem varredura), estratégia `coluna`.

SUSTENTADA (uma rodada por banco e taxa): MOVIMENTO com --linhas linhas da
empresa 1 (carimbos de ontem para trás, um por segundo) e um lote de linhas da empresa 2. Escritores
(--escritores fios, uma conexão cada, um COMMIT por mudança) comitam R
mudanças/s por --duracao s: 3/4 alterações de linhas ao acaso da tabela, 1/4
inclusões; toda mudança põe a hora do banco na coluna de mudança e um token
único em VALOR. --amostras mudanças espalhadas pela rodada caem em linhas da
empresa 2 (cada uma numa linha só dela): um leitor lê o projeto da empresa 2
a cada 0,25 s (barato: só as amostras) e anota quando cada (ID, token) ficou
visível. Mede: a taxa atingida; commit -> visível (p50, p95) das amostras; o
pico de RSS do ouvinte (VmRSS dele e dos filhos a cada 0,5 s, e o VmHWM); a
CPU dele; se o dataset foi ENTREGUE À VARREDURA (o `entregues_a_varredura` do
ouvinte-status.json, e os avisos do log); e, 2 intervalos depois do último
COMMIT, quantas linhas mudadas não estão no Contextia na última versão (a
origem inteira contra os dois projetos), de novo depois de --espera-extra s.
Linha de base na mesma rodada, com o ouvinte já parado: o mesmo escritor na
mesma taxa (--duracao-base s) e sem ritmo, o mais rápido que consegue
(--duracao-bruta s): as razões com/sem ouvinte, e o piso do leitor (envio
direto -> visível, bench_latencia.linha_de_base).

MESMO CARIMBO (--mesmo-carimbo N, padrão 1 000 000): uma tabela de N linhas;
fase A, o ouvinte de pé e 20 mudanças avulsas (a latência e o RSS de sempre);
então UM UPDATE põe o mesmo carimbo nas N linhas e um ouvinte novo sobe (a
primeira vista: a marca é esse carimbo, e a janela da folga tem as N linhas,
como depois de uma migração do ERP ou de uma varredura que devolve o dataset);
fase B, mais 20 mudanças avulsas. Mede o pico de RSS, o tamanho do
ouvinte-estado.json e commit -> visível das 20, contra a fase A.
Com --ouvinte-antes o ouvinte da fase A fica de pé durante o UPDATE.

--raiz DIR roda o ouvinte.py de outra cópia do código (ex.: um `git archive`
do main de antes), com o mesmo .venv: a coluna "antes" e "depois" da issue 31
saem do mesmo bench. Não é teste: nada aqui é cronometrado pela suíte; a
máquina pode estar carregada, e a carga média vai junto na tabela.
"""

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, RAIZ)

from bench.bench_latencia import (  # noqa: E402
    Leitor,
    cpu_do_processo,
    linha_de_base,
    mapa_do_movimento,
    percentil,
)
from contextia_sync import padroes  # noqa: E402

DATASET = 'movimento'
PASSO_LEITOR = 0.25
PASSO_AMOSTRA = 0.5
# IDs: 1..N da empresa 1; N+1.. o lote da empresa 2; as inclusões, por fase.
ID_INCLUIDA = 10_000_000
TOKEN_FASE = 1_000_000_000  # VALOR = fase * TOKEN_FASE + índice + 1
FASE_MEDIDA, FASE_BASE, FASE_BRUTA = 0, 1, 2

AVISO_VARREDURA = 'entregue a VARREDURA'
AVISO_VISTOS = 'deixa de ser lembrado'


# ---------------------------------------------------------------------------
# Os dois bancos
# ---------------------------------------------------------------------------


class Dialeto:
    """O que muda entre PostgreSQL e MariaDB: aspas, a hora, a série, o driver."""

    def __init__(self, tipo):
        self.tipo = tipo
        pg = tipo == 'postgres'
        self.agora = 'clock_timestamp()' if pg else 'NOW(6)'
        # Um carimbo por linha, um segundo entre elas, de ontem para trás: a janela da
        # folga da marca inicial tem só as últimas (um carimbo comum a todas seria o
        # caso do --mesmo-carimbo, e a primeira vista lembraria a tabela inteira).
        self.ontem = (
            "now() - INTERVAL '1 day' - i * INTERVAL '1 second'"
            if pg
            else 'NOW(6) - INTERVAL 1 DAY - INTERVAL i SECOND'
        )
        self.mesmo = 'now()' if pg else 'NOW(6)'  # um valor só no comando inteiro
        self.carimbo = 'TIMESTAMP(6)' if pg else 'DATETIME(6)'
        self.aspas = '"' if pg else '`'

    def q(self, nome):
        return '%s%s%s' % (self.aspas, nome, self.aspas)

    def serie(self, de, ate):
        if self.tipo == 'postgres':
            return 'generate_series(%d, %d) s(i)' % (de, ate)
        return '(SELECT seq AS i FROM seq_%d_to_%d) s' % (de, ate)

    def sql(self, texto):
        """Troca {NOME} pelo identificador com as aspas do banco."""
        nomes = ('EMPRESAS', 'EMPRESA_ID', 'RAZAO_SOCIAL', 'ATIVA', 'MOVIMENTO', 'ID', 'VALOR')
        nomes += ('ALTERADO_EM', 'MOV_ALT')
        return texto.format(**{n: self.q(n) for n in nomes})

    def conectar(self, url_texto):
        """Uma conexão crua do driver (sem SQLAlchemy: o escritor fica barato)."""
        import sqlalchemy as sa

        url = sa.engine.make_url(url_texto)
        if self.tipo == 'postgres':
            import psycopg

            return psycopg.connect(
                host=url.host, port=url.port or 5432, user=url.username, dbname=url.database
            )
        import pymysql

        return pymysql.connect(
            host=url.host,
            port=url.port or 3306,
            user=url.username,
            password=url.password or '',
            database=url.database,
            autocommit=False,
        )


def preparar_tabela(banco, dial, linhas, lote):
    """EMPRESAS (1 e 2) e MOVIMENTO: `linhas` da empresa 1 e `lote` da 2, de ontem para trás."""
    comandos = [
        'CREATE TABLE {EMPRESAS} ({EMPRESA_ID} INTEGER PRIMARY KEY,'
        ' {RAZAO_SOCIAL} VARCHAR(60), {ATIVA} CHAR(1))',
        "INSERT INTO {EMPRESAS} VALUES (1, 'Bench 1', 'S'), (2, 'Bench 2', 'S')",
        'CREATE TABLE {MOVIMENTO} ({ID} BIGINT PRIMARY KEY, {EMPRESA_ID} INTEGER NOT NULL,'
        ' {VALOR} BIGINT NOT NULL, {ALTERADO_EM} %s NULL)' % dial.carimbo,
        'INSERT INTO {MOVIMENTO} SELECT i, 1, 0, %s FROM %s' % (dial.ontem, dial.serie(1, linhas)),
        'INSERT INTO {MOVIMENTO} SELECT i, 2, 0, %s FROM %s'
        % (dial.ontem, dial.serie(linhas + 1, linhas + lote)),
        'CREATE INDEX {MOV_ALT} ON {MOVIMENTO} ({ALTERADO_EM})',
        'ANALYZE {MOVIMENTO}' if dial.tipo == 'postgres' else 'ANALYZE TABLE {MOVIMENTO}',
    ]
    for comando in comandos:
        banco.executar(dial.sql(comando))


# ---------------------------------------------------------------------------
# O escritor
# ---------------------------------------------------------------------------


class Plano:
    """Que linha a mudança `i` toca, e se ela é uma amostra (empresa 2)."""

    def __init__(self, linhas, taxa, duracao, amostras, fase):
        self.linhas, self.fase = linhas, fase
        previstas = int(taxa * duracao) if taxa else 0
        self.passo = max(1, previstas // amostras) if amostras and previstas else 0
        self.amostras = min(amostras, previstas) if self.passo else 0

    def mudanca(self, i, sorteio):
        """(é inclusão, ID, empresa, token, é amostra)."""
        token = self.fase * TOKEN_FASE + i + 1
        novo = ID_INCLUIDA * (self.fase + 1) + i
        if self.passo and i % self.passo == self.passo // 2 and i // self.passo < self.amostras:
            k = i // self.passo
            if k % 4 == 3:
                return True, novo, 2, token, True
            return False, self.linhas + 1 + k, 2, token, True
        if i % 4 == 3:
            return True, novo, 1, token, False
        return False, sorteio.randint(1, self.linhas), 1, token, False


class Escrita:
    """O que os escritores fizeram: quantas, em quanto tempo, e o COMMIT das amostras."""

    def __init__(self):
        self.feitas = 0
        self.segundos = 0.0
        self.commits = []  # segundos de cada execute + commit
        self.amostras = {}  # (ID, token) -> instante do commit
        self.erros = []
        self.trava = threading.Lock()

    @property
    def taxa(self):
        return self.feitas / self.segundos if self.segundos else 0.0


def _escrever_fio(dial, url, plano, taxa, duracao, fio, fios, inicio, escrita):
    sorteio = random.Random(1000 * plano.fase + fio)
    alterar = dial.sql(
        'UPDATE {MOVIMENTO} SET {VALOR} = %%s, {ALTERADO_EM} = %s WHERE {ID} = %%s' % dial.agora
    )
    incluir = dial.sql(
        'INSERT INTO {MOVIMENTO} ({ID}, {EMPRESA_ID}, {VALOR}, {ALTERADO_EM})'
        ' VALUES (%%s, %%s, %%s, %s)' % dial.agora
    )
    fim = inicio + duracao
    tempos, amostras, feitas = [], {}, 0
    con = dial.conectar(url)
    try:
        cursor = con.cursor()
        i = fio
        while True:
            agora = time.monotonic()
            alvo = inicio + i / taxa if taxa else agora
            if alvo >= fim or agora >= fim + 5:
                break
            if alvo > agora:
                time.sleep(alvo - agora)
            inclusao, ident, empresa, token, amostra = plano.mudanca(i, sorteio)
            antes = time.monotonic()
            if inclusao:
                cursor.execute(incluir, (ident, empresa, token))
            else:
                cursor.execute(alterar, (token, ident))
            con.commit()
            depois = time.monotonic()
            tempos.append(depois - antes)
            if amostra:
                amostras[(ident, token)] = depois
            feitas += 1
            i += fios
    except Exception as erro:  # noqa: BLE001 - o erro vai para o relatório
        escrita.erros.append('%s: %s' % (type(erro).__name__, erro))
    finally:
        con.close()
    with escrita.trava:
        escrita.feitas += feitas
        escrita.commits.extend(tempos)
        escrita.amostras.update(amostras)


def escrever(dial, url, plano, taxa, duracao, fios):
    """`fios` escritores, juntos em `taxa` mudanças/s (None: sem ritmo) por `duracao` s."""
    escrita = Escrita()
    inicio = time.monotonic() + 0.2
    threads = [
        threading.Thread(
            target=_escrever_fio,
            args=(dial, url, plano, taxa, duracao, fio, fios, inicio, escrita),
            daemon=True,
        )
        for fio in range(fios)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    decorrido = time.monotonic() - inicio
    escrita.segundos = max(duracao, decorrido) if taxa else decorrido
    return escrita


# ---------------------------------------------------------------------------
# O leitor, o amostrador de memória e o ouvinte
# ---------------------------------------------------------------------------


def _campo_kib(pid, campo):
    try:
        with open('/proc/%d/status' % pid) as arquivo:
            for linha in arquivo:
                if linha.startswith(campo + ':'):
                    return int(linha.split()[1])
    except OSError:
        pass
    return 0


def _descendentes(pid):
    filhos = []
    try:
        tarefas = os.listdir('/proc/%d/task' % pid)
    except OSError:
        return filhos
    for tarefa in tarefas:
        try:
            with open('/proc/%d/task/%s/children' % (pid, tarefa)) as arquivo:
                diretos = [int(x) for x in arquivo.read().split()]
        except OSError:
            continue
        for filho in diretos:
            filhos.append(filho)
            filhos.extend(_descendentes(filho))
    return filhos


class Amostrador(threading.Thread):
    """
    A cada 0,5 s: o RSS do ouvinte com os filhos, o VmHWM dele, o tamanho do
    ouvinte-estado.json e quando o status disse o dataset entregue à varredura.
    """

    def __init__(self, pid, estado_dir):
        super().__init__(daemon=True)
        self.pid, self.estado_dir = pid, estado_dir
        self.rss_kib = self.hwm_kib = self.estado_bytes = 0
        self.varredura_t = None  # time.monotonic() em que o status o disse
        self.varredura_motivo = None
        self.parar = False

    def run(self):
        while not self.parar:
            self.amostrar()
            time.sleep(PASSO_AMOSTRA)

    def amostrar(self):
        arvore = [self.pid] + _descendentes(self.pid)
        self.rss_kib = max(self.rss_kib, sum(_campo_kib(p, 'VmRSS') for p in arvore))
        self.hwm_kib = max(self.hwm_kib, _campo_kib(self.pid, 'VmHWM'))
        try:
            tamanho = os.path.getsize(os.path.join(self.estado_dir, 'ouvinte-estado.json'))
            self.estado_bytes = max(self.estado_bytes, tamanho)
        except OSError:
            pass
        if self.varredura_t is None:
            entregues = (status_do_ouvinte(self.estado_dir) or {}).get('entregues_a_varredura')
            if entregues:
                self.varredura_t = time.monotonic()
                self.varredura_motivo = '; '.join('%s: %s' % par for par in entregues.items())

    def terminar(self):
        self.parar = True
        self.amostrar()
        return self


def status_do_ouvinte(estado_dir):
    try:
        with open(os.path.join(estado_dir, 'ouvinte-status.json'), encoding='utf-8') as arquivo:
            return json.load(arquivo)
    except (OSError, ValueError):
        return None


class Ouvinte:
    """O ouvinte.py como processo, com o seu estado e o seu log."""

    def __init__(self, pasta, args, url_origem, chaves):
        self.pasta = pasta
        self.estado_dir = os.path.join(pasta, 'estado-%d' % time.monotonic_ns())
        self.log_caminho = self.estado_dir + '.log'
        raiz = os.path.abspath(args.raiz)
        argv = [
            sys.executable,
            os.path.join(raiz, 'ouvinte.py'),
            '--mapping=' + mapa_do_movimento(os.path.join(pasta, 'mapa.json'), 'bench', DATASET),
            '--source=generic',
            '--chaves=' + chaves,
            '--estado=' + self.estado_dir,
            '--intervalo-dados=%d' % args.intervalo_dados,
            '--intervalo-projetos=3600',
            '--varredura=nao',
            '--folga=%d' % args.folga,
        ]
        env = dict(os.environ, CONTEXTIA_ORIGEM=url_origem, PYTHONPATH=raiz)
        env.pop('CONTEXTIA_API_KEY', None)
        self.log = open(self.log_caminho, 'w+b')
        self.subida = time.monotonic()
        self.processo = subprocess.Popen(
            argv, cwd=raiz, env=env, stdout=self.log, stderr=subprocess.STDOUT
        )
        self.pid = self.processo.pid
        self.amostrador = self.novo_amostrador()

    def novo_amostrador(self):
        """O amostrador de memória, de pé desde já (o da subida pega a primeira vista)."""
        self.amostrador = Amostrador(self.pid, self.estado_dir)
        self.amostrador.start()
        return self.amostrador

    def texto_do_log(self):
        with open(self.log_caminho, 'rb') as arquivo:
            return arquivo.read().decode('utf-8', 'replace')

    def esperar_primeiro_ciclo(self, prazo=600):
        """Segundos da subida ao fim do primeiro ciclo de dados (a primeira vista)."""
        fim = time.monotonic() + prazo
        while time.monotonic() < fim:
            if self.processo.poll() is not None:
                raise SystemExit('o ouvinte saiu na subida:\n' + self.texto_do_log()[-3000:])
            status = status_do_ouvinte(self.estado_dir) or {}
            if 'dados' in (status.get('ciclos') or {}):
                return time.monotonic() - self.subida
            time.sleep(0.2)
        raise SystemExit('o ouvinte não fechou o primeiro ciclo em %ss' % prazo)

    def parar(self):
        self.amostrador.terminar()
        if self.processo.poll() is None:
            self.processo.send_signal(signal.SIGTERM)
            try:
                self.processo.wait(60)
            except subprocess.TimeoutExpired:
                self.processo.kill()
                self.processo.wait(10)
        self.log.close()
        return self.processo.returncode

    def avisos(self):
        texto = self.texto_do_log()
        return {
            'varredura': texto.count(AVISO_VARREDURA),
            'vistos': texto.count(AVISO_VISTOS),
            'erros': sum(1 for linha in texto.splitlines() if 'Traceback' in linha),
        }


class Bancada:
    """Um banco novo e um Contextia local com as empresas 1 e 2, e o arquivo de chaves."""

    def __init__(self, tipo, pasta):
        from contextia_local.processo import ServidorLocal
        from tests.apoio import bancos

        self.dial = Dialeto(tipo)
        self.pasta = pasta
        self.banco = bancos.criar_banco(tipo, 'horacheia')
        self.contextia = ServidorLocal(os.path.join(pasta, 'contextia'))
        self.contextia.iniciar()
        for nome, valor in self.contextia.ambiente().items():
            if valor is not None:
                os.environ[nome] = valor
        self.chave = {e: self.contextia.criar_projeto_com_chave(e, 'Bench %s' % e) for e in '12'}
        self.chaves = os.path.join(pasta, 'chaves.tsv')
        with open(self.chaves, 'w') as arquivo:
            arquivo.writelines('%s\t%s\n' % item for item in self.chave.items())
        os.chmod(self.chaves, 0o600)

    def ouvinte(self, args):
        return Ouvinte(self.pasta, args, self.banco.url_origem, self.chaves)

    def derrubar(self):
        self.contextia.parar()
        self.banco.derrubar()


# ---------------------------------------------------------------------------
# Sustentada
# ---------------------------------------------------------------------------


def fora_da_ultima_versao(bancada):
    """(linhas mudadas na fase medida, quantas não estão no Contextia na última versão)."""
    from contextia_sync.intake import cliente, transporte

    origem = {
        int(i): int(v)
        for i, v in bancada.banco.executar(
            bancada.dial.sql(
                'SELECT {ID}, {VALOR} FROM {MOVIMENTO} WHERE {VALOR} > 0 AND {VALOR} < :t'
            ),
            {'t': TOKEN_FASE},
        )
    }
    contextia = {}
    for chave in bancada.chave.values():
        try:
            for r in cliente.ler_registros(DATASET, chave, pagina=10000):
                contextia[int(r['ID'])] = int(r['VALOR'])
        except transporte.ErroContextia:
            pass
    return len(origem), sum(1 for i, v in origem.items() if contextia.get(i) != v)


def latencias(escrita, leitor):
    tempos = [leitor.vistos[k] - t for k, t in escrita.amostras.items() if k in leitor.vistos]
    return tempos, len(escrita.amostras) - len(tempos)


def _esperar_amostras(escrita, leitor, segundos):
    fim = time.monotonic() + segundos
    while time.monotonic() < fim and not set(escrita.amostras) <= set(leitor.vistos):
        time.sleep(0.25)


def _medir_com_ouvinte(bancada, args, taxa, r):
    """A fase medida: o ouvinte de pé, o escritor em `taxa`, a espera e a conferência."""
    ouvinte = bancada.ouvinte(args)
    try:
        r['subida_s'] = ouvinte.esperar_primeiro_ciclo()
        time.sleep(args.intervalo_dados)
        leitor = Leitor(bancada.chave['2'], DATASET, pagina=10000, passo=PASSO_LEITOR)
        leitor.start()
        amostrador = ouvinte.amostrador
        cpu = cpu_do_processo(ouvinte.pid)
        inicio = time.monotonic()
        plano = Plano(args.linhas, taxa, args.duracao, args.amostras, FASE_MEDIDA)
        url = bancada.banco.url_admin
        escrita = escrever(bancada.dial, url, plano, taxa, args.duracao, args.escritores)
        r['cpu_ouvinte'] = (cpu_do_processo(ouvinte.pid) - cpu) / escrita.segundos
        time.sleep(2 * args.intervalo_dados)
        r['linhas_mudadas'], r['fora_2int'] = fora_da_ultima_versao(bancada)
        r['fora_extra'] = r['fora_2int']
        if r['fora_2int'] or not set(escrita.amostras) <= set(leitor.vistos):
            _esperar_amostras(escrita, leitor, args.espera_extra)
            r['fora_extra'] = fora_da_ultima_versao(bancada)[1]
        leitor.parar = True
        amostrador.terminar()
        r['escrita'] = escrita
        r['tempos'], r['nao_vistas'] = latencias(escrita, leitor)
        r['rss_mib'], r['hwm_mib'] = amostrador.rss_kib / 1024, amostrador.hwm_kib / 1024
        r['estado_mb'] = amostrador.estado_bytes / 1e6
        quando = amostrador.varredura_t
        r['varredura_em'] = None if quando is None else quando - inicio
        r['varredura_motivo'] = amostrador.varredura_motivo
        r['avisos'] = ouvinte.avisos()
    finally:
        r['saida_ouvinte'] = ouvinte.parar()


def rodada_sustentada(tipo, taxa, args):
    """Uma rodada: o banco, o Contextia, o piso, o ouvinte medido e as linhas de base."""
    r = {'banco': tipo, 'taxa': taxa, 'carga_inicio': os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix='bench-hora-cheia-') as pasta:
        bancada = Bancada(tipo, pasta)
        try:
            inicio = time.monotonic()
            preparar_tabela(bancada.banco, bancada.dial, args.linhas, args.amostras)
            r['preparo_s'] = time.monotonic() - inicio
            r['piso'] = statistics.median(linha_de_base(bancada.chave['2']))
            _medir_com_ouvinte(bancada, args, taxa, r)
            url = bancada.banco.url_admin
            base = Plano(args.linhas, None, 0, 0, FASE_BASE)
            r['base'] = escrever(
                bancada.dial, url, base, taxa, min(args.duracao, args.duracao_base), args.escritores
            )
            bruta = Plano(args.linhas, None, 0, 0, FASE_BRUTA)
            r['bruta'] = escrever(
                bancada.dial, url, bruta, None, args.duracao_bruta, args.escritores
            )
        finally:
            bancada.derrubar()
    r['carga_fim'] = os.getloadavg()[0]
    return r


# ---------------------------------------------------------------------------
# Mesmo carimbo
# ---------------------------------------------------------------------------


def _mudancas_avulsas(bancada, args, leitor, primeira):
    """`args.mudancas_depois` alterações, uma por COMMIT, em linhas da empresa 2."""
    dial = bancada.dial
    comando = dial.sql(
        'UPDATE {MOVIMENTO} SET {VALOR} = %%s, {ALTERADO_EM} = %s WHERE {ID} = %%s' % dial.agora
    )
    commits = {}
    con = dial.conectar(bancada.banco.url_admin)
    try:
        cursor = con.cursor()
        for n in range(args.mudancas_depois):
            ident = args.mesmo_carimbo + 1 + primeira + n
            token = TOKEN_FASE + primeira + n + 1
            cursor.execute(comando, (token, ident))
            con.commit()
            commits[(ident, token)] = time.monotonic()
            time.sleep(args.espaco)
    finally:
        con.close()
    fim = time.monotonic() + args.prazo_mesmo
    while time.monotonic() < fim and not set(commits) <= set(leitor.vistos):
        time.sleep(0.25)
    tempos = [leitor.vistos[k] - t for k, t in commits.items() if k in leitor.vistos]
    return tempos, len(commits) - len(tempos)


def _fase(bancada, args, leitor, ouvinte, primeira, medida):
    amostrador = ouvinte.amostrador
    cpu = cpu_do_processo(ouvinte.pid)
    inicio = time.monotonic()
    medida['tempos'], medida['nao_vistas'] = _mudancas_avulsas(bancada, args, leitor, primeira)
    medida['cpu_ouvinte'] = (cpu_do_processo(ouvinte.pid) - cpu) / (time.monotonic() - inicio)
    amostrador.terminar()
    medida['rss_mib'], medida['hwm_mib'] = amostrador.rss_kib / 1024, amostrador.hwm_kib / 1024
    medida['estado_mb'] = amostrador.estado_bytes / 1e6
    medida['varredura_motivo'] = amostrador.varredura_motivo
    medida['avisos'] = ouvinte.avisos()


def rodada_mesmo_carimbo(tipo, args):
    n = args.mesmo_carimbo
    r = {'banco': tipo, 'linhas': n, 'carga_inicio': os.getloadavg()[0], 'a': {}, 'b': {}}
    lote = 2 * args.mudancas_depois
    with tempfile.TemporaryDirectory(prefix='bench-mesmo-carimbo-') as pasta:
        bancada = Bancada(tipo, pasta)
        ouvintes = []
        try:
            inicio = time.monotonic()
            preparar_tabela(bancada.banco, bancada.dial, n, lote)
            r['preparo_s'] = time.monotonic() - inicio
            r['piso'] = statistics.median(linha_de_base(bancada.chave['2']))
            leitor = Leitor(bancada.chave['2'], DATASET, pagina=10000, passo=PASSO_LEITOR)
            leitor.start()
            ouvintes.append(bancada.ouvinte(args))
            r['a']['subida_s'] = ouvintes[-1].esperar_primeiro_ciclo()
            time.sleep(args.intervalo_dados)
            _fase(bancada, args, leitor, ouvintes[-1], 0, r['a'])
            if not args.ouvinte_antes:
                ouvintes[-1].parar()
            inicio = time.monotonic()
            bancada.banco.executar(
                bancada.dial.sql(
                    'UPDATE {MOVIMENTO} SET {ALTERADO_EM} = %s WHERE {EMPRESA_ID} = 1'
                    % bancada.dial.mesmo
                )
            )
            r['update_s'] = time.monotonic() - inicio
            if not args.ouvinte_antes:
                ouvintes.append(bancada.ouvinte(args))
                r['b']['subida_s'] = ouvintes[-1].esperar_primeiro_ciclo()
            else:
                ouvintes[-1].amostrador.terminar()
                ouvintes[-1].novo_amostrador()
            time.sleep(2 * args.intervalo_dados)
            _fase(bancada, args, leitor, ouvintes[-1], args.mudancas_depois, r['b'])
            leitor.parar = True
        finally:
            r['saida_ouvinte'] = [o.parar() for o in ouvintes]
            bancada.derrubar()
    r['carga_fim'] = os.getloadavg()[0]
    return r


# ---------------------------------------------------------------------------
# As tabelas
# ---------------------------------------------------------------------------


def _p(tempos, q):
    return '%.2f' % percentil(tempos, q) if tempos else '-'


def _razao(a, b):
    return '%.2f' % (a / b) if b else '-'


def _tabela(titulo, cabecalho, linhas):
    larguras = [max(len(str(c)) for c in coluna) for coluna in zip(cabecalho, *linhas, strict=True)]
    print('\n' + titulo)
    for linha in [cabecalho] + linhas:
        print('  ' + '  '.join(str(c).rjust(w) for c, w in zip(linha, larguras, strict=True)))


def imprimir_sustentada(resultados, args):
    escrita, entrega = [], []
    for r in resultados:
        com, sem, bruta = r['escrita'], r['base'], r['bruta']
        p95_com = percentil(com.commits, 0.95) if com.commits else 0
        p95_sem = percentil(sem.commits, 0.95) if sem.commits else 0
        escrita.append(
            [
                r['banco'],
                r['taxa'],
                '%.0f' % com.taxa,
                '%.0f' % sem.taxa,
                '%.0f' % bruta.taxa,
                _razao(com.taxa, r['taxa']),
                _razao(com.taxa, sem.taxa),
                _razao(com.taxa, bruta.taxa),
                '%.1f' % (p95_com * 1000),
                _razao(p95_com, p95_sem),
            ]
        )
        intervalo = args.intervalo_dados
        p95 = percentil(r['tempos'], 0.95) if r['tempos'] else None
        varredura = 'sim, %.0fs' % r['varredura_em'] if r['varredura_em'] is not None else 'não'
        entrega.append(
            [
                r['banco'],
                r['taxa'],
                _p(r['tempos'], 0.5),
                _p(r['tempos'], 0.95),
                '%.2f' % (p95 / intervalo) if p95 is not None else '-',
                '%.2f' % r['piso'],
                '%d/%d' % (r['nao_vistas'], len(r['escrita'].amostras)),
                '%.0f' % r['rss_mib'],
                '%.2f' % r['cpu_ouvinte'],
                '%d / %d de %d' % (r['fora_2int'], r['fora_extra'], r['linhas_mudadas']),
                varredura,
                '%.1f→%.1f' % (r['carga_inicio'], r['carga_fim']),
            ]
        )
    _tabela(
        'Escrita (mudanças/s; "sem ouvinte" e "bruta" na mesma rodada, com o ouvinte parado)',
        [
            'banco',
            'alvo',
            'com ouvinte',
            'sem ouvinte',
            'bruta',
            '÷alvo',
            '÷sem',
            '÷bruta',
            'commit p95 ms',
            'commit p95 com÷sem',
        ],
        escrita,
    )
    _tabela(
        'Entrega (intervalo %ds, folga %ds; commit -> visível das amostras da empresa 2)'
        % (args.intervalo_dados, args.folga),
        [
            'banco',
            'alvo',
            'p50 s',
            'p95 s',
            'p95÷intervalo',
            'piso s',
            'não vistas',
            'RSS pico MiB',
            'CPU ouvinte',
            'fora da última (2 int / +%ds)' % args.espera_extra,
            'varredura',
            'carga 1 min',
        ],
        entrega,
    )
    for r in resultados:
        print(
            '  %s %s/s: preparo %.0fs, primeira vista %.1fs, VmHWM %.0f MiB, estado até %.1f MB,'
            ' avisos "%s" %d, "%s" %d, saída do ouvinte %s%s%s'
            % (
                r['banco'],
                r['taxa'],
                r['preparo_s'],
                r['subida_s'],
                r['hwm_mib'],
                r['estado_mb'],
                AVISO_VARREDURA,
                r['avisos']['varredura'],
                AVISO_VISTOS,
                r['avisos']['vistos'],
                r['saida_ouvinte'],
                '; varredura: ' + r['varredura_motivo'] if r['varredura_motivo'] else '',
                '; ERROS DO ESCRITOR: ' + '; '.join(r['escrita'].erros[:3])
                if r['escrita'].erros
                else '',
            )
        )


def imprimir_mesmo_carimbo(resultados, args):
    linhas = []
    for r in resultados:
        for rotulo, m in (
            ('A sem carimbo comum', r['a']),
            ('B %d no mesmo carimbo' % r['linhas'], r['b']),
        ):
            p95 = percentil(m['tempos'], 0.95) if m['tempos'] else None
            linhas.append(
                [
                    r['banco'],
                    rotulo,
                    '%.1f' % m['subida_s'] if 'subida_s' in m else '-',
                    _p(m['tempos'], 0.5),
                    _p(m['tempos'], 0.95),
                    '%.2f' % (p95 / args.intervalo_dados) if p95 is not None else '-',
                    '%d/%d' % (m['nao_vistas'], args.mudancas_depois),
                    '%.0f' % m['rss_mib'],
                    '%.0f' % m['hwm_mib'],
                    '%.1f' % m['estado_mb'],
                    '%.2f' % m['cpu_ouvinte'],
                    'sim' if m['varredura_motivo'] else 'não',
                ]
            )
    _tabela(
        'Mesmo carimbo (intervalo %ds, folga %ds; %d mudanças avulsas por fase, %.1fs entre elas)'
        % (args.intervalo_dados, args.folga, args.mudancas_depois, args.espaco),
        [
            'banco',
            'fase',
            'primeira vista s',
            'p50 s',
            'p95 s',
            'p95÷intervalo',
            'não vistas',
            'RSS pico MiB',
            'VmHWM MiB',
            'estado MB',
            'CPU ouvinte',
            'varredura',
        ],
        linhas,
    )
    for r in resultados:
        a, b = r['a'], r['b']
        print(
            '  %s: preparo %.0fs, UPDATE de %d linhas %.1fs, piso %.2fs; razões B÷A: RSS %s,'
            ' p95 %s; avisos "%s" %d, "%s" %d; carga 1 min %.1f→%.1f; saída dos ouvintes %s'
            % (
                r['banco'],
                r['preparo_s'],
                r['linhas'],
                r['update_s'],
                r['piso'],
                _razao(b['rss_mib'], a['rss_mib']),
                _razao(percentil(b['tempos'], 0.95), percentil(a['tempos'], 0.95))
                if a['tempos'] and b['tempos']
                else '-',
                AVISO_VARREDURA,
                b['avisos']['varredura'],
                AVISO_VISTOS,
                b['avisos']['vistos'],
                r['carga_inicio'],
                r['carga_fim'],
                r['saida_ouvinte'],
            )
        )


# ---------------------------------------------------------------------------


def argumentos():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--bancos', default='postgres,mariadb')
    p.add_argument('--taxas', default='100,1000', help='mudanças/s, separadas por vírgula')
    p.add_argument('--duracao', type=int, default=60, help='segundos de escrita por taxa')
    p.add_argument('--folga', type=int, default=padroes.FOLGA)
    p.add_argument('--intervalo-dados', type=int, default=1)
    p.add_argument('--linhas', type=int, default=200_000, help='linhas da empresa 1')
    p.add_argument('--amostras', type=int, default=200, help='mudanças medidas por rodada')
    p.add_argument('--escritores', type=int, default=4, help='conexões escrevendo')
    p.add_argument('--duracao-base', type=int, default=20)
    p.add_argument('--duracao-bruta', type=int, default=10)
    p.add_argument('--espera-extra', type=int, default=30)
    p.add_argument(
        '--mesmo-carimbo', type=int, nargs='?', const=1_000_000, default=None, metavar='N'
    )
    p.add_argument('--mudancas-depois', type=int, default=20)
    p.add_argument('--espaco', type=float, default=1.5, help='segundos entre as avulsas')
    p.add_argument('--prazo-mesmo', type=int, default=90, help='espera pelas avulsas, s')
    p.add_argument('--ouvinte-antes', action='store_true')
    p.add_argument('--raiz', default=RAIZ, help='de onde roda o ouvinte.py')
    return p.parse_args()


def main():
    args = argumentos()
    bancos = [b.strip() for b in args.bancos.split(',') if b.strip()]
    print(
        'código do ouvinte: %s; %d núcleos; carga média %s'
        % (
            os.path.abspath(args.raiz),
            os.cpu_count(),
            ' '.join('%.2f' % c for c in os.getloadavg()),
        ),
        flush=True,
    )
    if args.mesmo_carimbo:
        resultados = []
        for tipo in bancos:
            print('-- %s, %d linhas no mesmo carimbo' % (tipo, args.mesmo_carimbo), flush=True)
            resultados.append(rodada_mesmo_carimbo(tipo, args))
        imprimir_mesmo_carimbo(resultados, args)
    else:
        resultados = []
        for tipo in bancos:
            for taxa in [int(t) for t in args.taxas.split(',')]:
                print('-- %s a %d mudanças/s por %ds' % (tipo, taxa, args.duracao), flush=True)
                resultados.append(rodada_sustentada(tipo, taxa, args))
        imprimir_sustentada(resultados, args)
    print('carga média no fim: %s' % ' '.join('%.2f' % c for c in os.getloadavg()))
    return 0


if __name__ == '__main__':
    sys.exit(main())
