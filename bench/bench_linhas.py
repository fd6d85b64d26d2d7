#!/usr/bin/env python3
"""
As linhas pelo cabeçalho (issue 30): `binlog` e `slot_logico` contra `coluna`,
na mesma rodada, numa nota com itens como a de um ERP.

    .venv/bin/python bench/bench_linhas.py [--mudancas 40] [--intervalo-dados 2]
                                           [--itens 1,10,100] [--repeticoes 5]
                                           [--bancos mariadb,postgres]

O esquema de tests/test_linhas_pelo_cabecalho.py: NOTAS (ID, EMPRESA_ID, NUMERO),
NOTA_ITENS (ID, NOTA_ID, PRODUTO, VALOR) sem a coluna da empresa, e a view
V_ITENS que junta as duas; o dataset segue as duas tabelas (`base_tables`: o
item pela key, a nota pela NOTA_ID). As duas tabelas ganham ALTERADO_EM, e a
view mostra `GREATEST(nota.ALTERADO_EM, item.ALTERADO_EM)`: é a coluna de
mudança da linha de base, a `coluna` (sem o GREATEST, a nota alterada nunca
chegaria aos itens pela coluna). As estratégias por log não a usam.

Uma rodada por banco, cada uma com o seu servidor privado e o seu Contextia
local (bench_latencia.rodada_privada): um MariaDB com o binlog (`coluna` e
`binlog`) e um PostgreSQL com wal_level=logical (`coluna` e `slot_logico`,
com o --criar-slot do DBA antes e o --remover-slot no fim). Cada estratégia
tem o seu banco e o seu ouvinte.py (tests/apoio/ouvinte.Ouvinte); o escritor
comita a mesma mudança nos dois bancos, uma logo após a outra, e um leitor por
estratégia lê os projetos das duas empresas a cada 0,2 s e anota quando cada
mudança ficou visível. Mede:

  * commit -> visível (p50, p95) de N inclusões, N alterações e N exclusões de
    item a intervalos ao acaso (a exclusão: até sumir do projeto da empresa; a
    `coluna` não vê exclusão ao vivo, só a varredura);
  * a nota de K itens alterada (NUMERO): o tempo até os K visíveis com o número
    novo, e quantos registros o ouvinte enviou por ela, lidos das linhas
    `<dataset> escopo=... enviados=N` do log do ouvinte (no log, tem de ser K);
  * a nota de K itens que troca de empresa: até os K chegarem à nova e saírem da
    antiga (a `coluna` só os leva à nova; a antiga fica até a varredura).

As estratégias por log são ditas em razão da `coluna` da mesma rodada.
"""

import argparse
import os
import pathlib
import random
import re
import statistics
import subprocess
import sys
import threading
import time
from decimal import Decimal

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, RAIZ)

from bench.bench_latencia import PASSO_LEITOR, percentil, rodada_privada  # noqa: E402

LOG_DO_BANCO = {'mariadb': 'binlog', 'postgres': 'slot_logico'}
AGORA = {'mariadb': 'NOW(6)', 'postgres': 'clock_timestamp()'}
ONTEM = {'mariadb': 'NOW(6) - INTERVAL 1 DAY', 'postgres': "clock_timestamp() - INTERVAL '1 day'"}
NA = 'n/a (só a varredura)'

DDL = [
    'CREATE TABLE {NOTAS} ({ID} INTEGER PRIMARY KEY, {EMPRESA_ID} INTEGER,'
    ' {NUMERO} VARCHAR(20), {ALTERADO_EM} TIMESTAMP(6) NULL)',
    'CREATE TABLE {NOTA_ITENS} ({ID} INTEGER PRIMARY KEY, {NOTA_ID} INTEGER,'
    ' {PRODUTO} VARCHAR(40), {VALOR} NUMERIC(12,2), {ALTERADO_EM} TIMESTAMP(6) NULL)',
    'CREATE INDEX {NOTA_ITENS_NOTA} ON {NOTA_ITENS} ({NOTA_ID})',
    'CREATE VIEW {V_ITENS} AS SELECT i.{ID}, n.{EMPRESA_ID}, i.{NOTA_ID}, n.{NUMERO},'
    ' i.{PRODUTO}, i.{VALOR}, GREATEST(n.{ALTERADO_EM}, i.{ALTERADO_EM}) AS {ALTERADO_EM}'
    ' FROM {NOTA_ITENS} i JOIN {NOTAS} n ON n.{ID} = i.{NOTA_ID}',
]

# O fundo: notas antigas com itens nas duas empresas (nunca enviadas: sem varredura).
NOTAS_POR_EMPRESA = 30
ITENS_POR_NOTA = 5
NOTA_COM_K = 10_000  # as notas de K itens: 10_000 + uma por (K, repetição)
ITEM_NOVO = 5_000_000  # os itens incluídos ao vivo
ITEM_AQUECER = 4_999_999


def item_da_nota(nota, j):
    return nota * 1000 + j


class Plano:
    """As notas carregadas antes do ouvinte subir, iguais nos dois bancos."""

    def __init__(self, ks, repeticoes):
        # (nota, índice da empresa em Erp.escopos, quantos itens)
        self.notas = [(n, n % 2, ITENS_POR_NOTA) for n in range(1, 2 * NOTAS_POR_EMPRESA + 1)]
        self.com_k = {}
        for k in ks:
            for r in range(repeticoes):
                nota = NOTA_COM_K + len(self.com_k)
                self.com_k[(k, r)] = nota
                self.notas.append((nota, 0, k))

    def carregar(self, erp):
        ontem = ONTEM[erp.banco.tipo]
        erp.executar(
            'INSERT INTO {NOTAS} VALUES (:i, :e, :n, %s)' % ontem,
            lote=[
                {'i': nota, 'e': int(erp.escopos[e]), 'n': 'NF-%d' % nota}
                for nota, e, _ in self.notas
            ],
        )
        erp.executar(
            'INSERT INTO {NOTA_ITENS} VALUES (:i, :n, :p, :v, %s)' % ontem,
            lote=[
                {'i': item_da_nota(nota, j), 'n': nota, 'p': 'Produto %d' % j, 'v': '%d.90' % j}
                for nota, _, quantos in self.notas
                for j in range(quantos)
            ],
        )


def dataset_de_itens(estrategia):
    """O dataset de tests/test_linhas_pelo_cabecalho.py, com a coluna de mudança na `coluna`."""
    dataset = {
        'dataset': 'Itens %s' % estrategia,
        'source_object': 'V_ITENS',
        'columns': ['ID', 'EMPRESA_ID', 'NOTA_ID', 'NUMERO', 'PRODUTO', 'VALOR', 'ALTERADO_EM'],
        'key': 'ID',
        'scope_column': 'EMPRESA_ID',
        'watch_column': 'ALTERADO_EM' if estrategia == 'coluna' else None,
    }
    if estrategia != 'coluna':
        dataset['base_tables'] = [
            'NOTA_ITENS',
            {'table': 'NOTAS', 'column': 'ID', 'dataset_column': 'NOTA_ID'},
        ]
    return dataset


class Observador(threading.Thread):
    """
    Lê o dataset nos projetos das empresas a cada PASSO_LEITOR e anota, de cada
    condição esperada, quantos segundos depois do commit ela valeu pela primeira vez.
    Uma leitura com erro não conta (a foto incompleta faria a remoção "sumir").
    """

    def __init__(self, dataset, chaves):
        super().__init__(daemon=True)
        self.dataset, self.chaves = dataset, chaves
        self.trava = threading.Lock()
        self.pendentes, self.tempos = [], {}
        self.parar = False

    def esperar_por(self, nome, condicao, commit):
        with self.trava:
            self.pendentes.append((nome, condicao, commit))

    def ocioso(self):
        with self.trava:
            return not self.pendentes

    def colher(self):
        """({nome: segundos}, [nomes não vistos]); zera para a próxima fase."""
        with self.trava:
            tempos, faltam = self.tempos, [nome for nome, _, _ in self.pendentes]
            self.tempos, self.pendentes = {}, []
        return tempos, faltam

    def _foto(self):
        from contextia_sync.intake import cliente, transporte

        try:
            return {
                escopo: {int(r['ID']): r for r in cliente.ler_registros(self.dataset, chave)}
                for escopo, chave in self.chaves.items()
            }
        except transporte.ErroContextia:
            return None

    def run(self):
        while not self.parar:
            foto = self._foto()
            agora = time.monotonic()
            if foto is not None:
                with self.trava:
                    restam = []
                    for nome, condicao, commit in self.pendentes:
                        if condicao(foto):
                            self.tempos[nome] = agora - commit
                        else:
                            restam.append((nome, condicao, commit))
                    self.pendentes = restam
            time.sleep(PASSO_LEITOR)


# As condições sobre a foto {escopo: {ID: registro}}.
def com_valor(escopo, item, valor):
    def condicao(foto):
        registro = foto[escopo].get(item)
        return registro is not None and Decimal(str(registro['VALOR'])) == valor

    return condicao


def sumiu(item):
    return lambda foto: all(item not in registros for registros in foto.values())


def com_numero(escopo, itens, numero):
    return lambda foto: all(
        i in foto[escopo] and foto[escopo][i]['NUMERO'] == numero for i in itens
    )


def trocou(nova, antiga, itens, saiu):
    return lambda foto: (
        all(i in foto[nova] for i in itens)
        and (not saiu or not any(i in foto[antiga] for i in itens))
    )


class Lado:
    """Uma estratégia da rodada: o banco, o ERP, o ouvinte.py e o observador."""

    def __init__(self, estrategia, erp, ouvinte, processo):
        from contextia_sync.mapeamento import normalizar_dataset

        self.estrategia, self.erp, self.ouvinte, self.processo = (
            estrategia,
            erp,
            ouvinte,
            processo,
        )
        self.dataset = normalizar_dataset('Itens %s' % estrategia)
        self.observador = Observador(self.dataset, ouvinte.chaves)
        self.observador.start()

    @property
    def por_log(self):
        return self.estrategia != 'coluna'

    def escopo(self, indice):
        return self.erp.escopos[indice]

    def executar(self, sql, **parametros):
        self.erp.executar(sql % {'agora': AGORA[self.erp.banco.tipo]}, **parametros)

    def log(self):
        # Lido pelo nome: o arquivo aberto do Ouvinte divide a posição com o filho.
        with open(self.ouvinte.log.name, 'rb') as arquivo:
            return arquivo.read()

    def contas_desde(self, marca):
        """(enviados, removidas) das linhas do dataset no log do ouvinte depois de `marca`."""
        texto = self.log()[marca:].decode('utf-8', 'replace')
        contar = r'%s\s+escopo=\S+\s+%s=(\d+)'
        return tuple(
            sum(int(n) for n in re.findall(contar % (re.escape(self.dataset), campo), texto))
            for campo in ('enviados', 'removidas')
        )

    def pronto(self):
        if self.processo.poll() is not None:
            raise SystemExit(
                'o ouvinte %s saiu:\n%s' % (self.estrategia, self.log().decode('utf-8', 'replace'))
            )
        if not self.por_log:
            return b'marca inicial' in self.log()
        return _posicao_no_status(self.ouvinte)


def _posicao_no_status(ouvinte):
    import json

    try:
        with open(os.path.join(ouvinte.estado_dir, 'ouvinte-status.json')) as arquivo:
            return bool((json.load(arquivo).get('captura') or {}).get('posicao'))
    except (FileNotFoundError, ValueError):
        return False


def _slot(ouvinte, banco, comando):
    """--criar-slot / --remover-slot com o login do DBA, como o teste das linhas faz."""
    env = dict(ouvinte.env(), CONTEXTIA_ORIGEM_DBA=banco.url_admin)
    return subprocess.run(ouvinte.argv(comando), cwd=RAIZ, env=env, capture_output=True, timeout=60)


def montar_lado(servidor, contextia, pasta, estrategia, plano, intervalo):
    from contextia_sync import padroes
    from tests.apoio.ouvinte import Ouvinte
    from tests.dados import erp as erp_teste

    banco = servidor.banco_de_teste()
    erp = erp_teste.Erp(banco, titulos_por_empresa=(1, 1))
    for comando in DDL:
        erp.executar(comando)
    plano.carregar(erp)
    pasta = pathlib.Path(pasta) / estrategia
    pasta.mkdir()
    ouvinte = Ouvinte(
        pasta, erp, contextia, lambda e: contextia.criar_projeto_com_chave(e, 'Empresa %s' % e)
    )
    ouvinte.mapa = erp_teste.mapeamento(
        pasta,
        chunk=padroes.CHUNK,
        # O slot é do cluster inteiro: um nome por processo e estratégia.
        client='bench_%d_%s' % (os.getpid(), estrategia),
        listener={'strategy': estrategia},
        datasets=[dataset_de_itens(estrategia)],
    )
    if estrategia == 'slot_logico':
        feito = _slot(ouvinte, banco, '--criar-slot')
        if feito.returncode:
            raise SystemExit((feito.stdout + feito.stderr).decode('utf-8', 'replace'))
    return Lado(estrategia, erp, ouvinte, ouvinte.iniciar('--intervalo-dados=%s' % intervalo))


def desmontar_lado(lado):
    from tests.apoio.captura_log import parar

    lado.observador.parar = True
    if lado.processo.poll() is None:
        parar(lado.processo)
    if lado.estrategia == 'slot_logico':
        feito = _slot(lado.ouvinte, lado.erp.banco, '--remover-slot')
        if feito.returncode:
            print((feito.stdout + feito.stderr).decode('utf-8', 'replace'), file=sys.stderr)
    lado.erp.fechar()


def _aguardar(lados, prazo):
    fim = time.monotonic() + prazo
    while time.monotonic() < fim and not all(lado.observador.ocioso() for lado in lados):
        time.sleep(0.2)


def aquecer(lados, intervalo):
    """A primeira volta de cada ouvinte (marca, posição) e um item que chega a todos."""
    from tests.apoio.ouvinte import esperar

    esperar(lambda: all(lado.pronto() for lado in lados), 120)
    for lado in lados:
        lado.executar(
            'INSERT INTO {NOTA_ITENS} VALUES (:i, 1, :p, 1, %(agora)s)', i=ITEM_AQUECER, p='aquece'
        )
        nota_1 = lado.escopo(1)  # a nota 1 é da empresa de índice 1 (Plano)
        lado.observador.esperar_por('aquece', com_valor(nota_1, ITEM_AQUECER, 1), 0)
    _aguardar(lados, intervalo * 3 + 60)
    for lado in lados:
        _, faltam = lado.observador.colher()
        if faltam:
            raise SystemExit(
                'o ouvinte %s (saída: %s) não entregou o item de aquecer; o log dele:\n%s'
                % (
                    lado.estrategia,
                    lado.processo.poll(),
                    lado.log().decode('utf-8', 'replace')[-6000:],
                )
            )


def fase(lados, quantas, mudar, intervalo, sorteio):
    """
    `quantas` mudanças em cada lado, intercaladas, a intervalos ao acaso;
    `mudar(lado, n)` comita a n-ésima e devolve a condição de visível.
    {estrategia: (segundos de cada uma, não vistas)}.
    """
    for n in range(quantas):
        for lado in lados:
            condicao = mudar(lado, n)
            lado.observador.esperar_por(n, condicao, time.monotonic())
        time.sleep(sorteio.uniform(0.1, 0.6))
    _aguardar(lados, intervalo * 3 + 30)
    resultado = {}
    for lado in lados:
        tempos, faltam = lado.observador.colher()
        resultado[lado.estrategia] = (list(tempos.values()), len(faltam))
    return resultado


def _nota_do_item(plano, n):
    """A nota (e o índice da empresa) do n-ésimo item incluído: uma do fundo, ao acaso."""
    nota, empresa, _ = plano.notas[random.Random(n).randrange(2 * NOTAS_POR_EMPRESA)]
    return nota, empresa


def fases_de_item(lados, plano, mudancas, intervalo):
    sorteio = random.Random(30)

    def incluir(lado, n):
        nota, empresa = _nota_do_item(plano, n)
        valor = Decimal('%d.50' % n)
        lado.executar(
            'INSERT INTO {NOTA_ITENS} VALUES (:i, :n, :p, :v, %(agora)s)',
            i=ITEM_NOVO + n,
            n=nota,
            p='Novo %d' % n,
            v=valor,
        )
        return com_valor(lado.escopo(empresa), ITEM_NOVO + n, valor)

    def alterar(lado, n):
        _, empresa = _nota_do_item(plano, n)
        valor = Decimal('%d.25' % (n + 1000))
        lado.executar(
            'UPDATE {NOTA_ITENS} SET {VALOR} = :v, {ALTERADO_EM} = %(agora)s WHERE {ID} = :i',
            i=ITEM_NOVO + n,
            v=valor,
        )
        return com_valor(lado.escopo(empresa), ITEM_NOVO + n, valor)

    def apagar(lado, n):
        lado.executar('DELETE FROM {NOTA_ITENS} WHERE {ID} = :i', i=ITEM_NOVO + n)
        return sumiu(ITEM_NOVO + n)

    por_log = [lado for lado in lados if lado.por_log]
    return {
        'inclusão de item': fase(lados, mudancas, incluir, intervalo, sorteio),
        'alteração de item': fase(lados, mudancas, alterar, intervalo, sorteio),
        'exclusão de item': fase(por_log, mudancas, apagar, intervalo, sorteio),
    }


def evento(lados, mudar, intervalo):
    """
    Uma mudança de nota em cada lado; `mudar(lado)` comita e devolve
    [(nome, condição)]. {estrategia: ({nome: segundos}, enviados, removidas)},
    contados no log do ouvinte até um intervalo depois de tudo visível.
    """
    # Um instante ao acaso do ciclo da `coluna`, como nas fases de item.
    time.sleep(random.uniform(0, intervalo))
    marcas = {}
    for lado in lados:
        marcas[lado.estrategia] = len(lado.log())
        esperas = mudar(lado)
        commit = time.monotonic()
        for nome, condicao in esperas:
            lado.observador.esperar_por(nome, condicao, commit)
    _aguardar(lados, intervalo * 3 + 30)
    time.sleep(intervalo + 1.5)  # o ciclo que ainda mandasse algo dessa nota
    resultado = {}
    for lado in lados:
        tempos, _ = lado.observador.colher()
        resultado[lado.estrategia] = (tempos,) + lado.contas_desde(marcas[lado.estrategia])
    return resultado


def eventos_de_nota(lados, plano, intervalo):
    """{(k, 'alterada'|'trocou'): [resultado de `evento` por repetição]}."""
    resultados = {}
    for (k, r), nota in plano.com_k.items():
        itens = [item_da_nota(nota, j) for j in range(k)]
        numero = 'NF-%d-r%d' % (nota, r)

        def alterar(lado, nota=nota, itens=itens, numero=numero):
            lado.executar(
                'UPDATE {NOTAS} SET {NUMERO} = :n, {ALTERADO_EM} = %(agora)s WHERE {ID} = :i',
                i=nota,
                n=numero,
            )
            return [('visível', com_numero(lado.escopo(0), itens, numero))]

        def trocar(lado, nota=nota, itens=itens):
            nova, antiga = lado.escopo(1), lado.escopo(0)
            lado.executar(
                'UPDATE {NOTAS} SET {EMPRESA_ID} = :e, {ALTERADO_EM} = %(agora)s WHERE {ID} = :i',
                i=nota,
                e=int(nova),
            )
            esperas = [('chegou', trocou(nova, antiga, itens, saiu=False))]
            if lado.por_log:
                esperas.append(('chegou e saiu', trocou(nova, antiga, itens, saiu=True)))
            return esperas

        resultados.setdefault((k, 'alterada'), []).append(evento(lados, alterar, intervalo))
        resultados.setdefault((k, 'trocou'), []).append(evento(lados, trocar, intervalo))
    return resultados


def _versao(erp):
    return erp.executar('SELECT VERSION()')[0][0].split(' on ')[0].split(',')[0]


def rodada(banco, args, plano):
    """Sobe o servidor privado, as duas estratégias, mede e derruba tudo."""
    from bench.bench_slot import rodada as rodada_postgres
    from tests.apoio.mariadb_binlog import MariadbBinlog

    if banco == 'mariadb':
        contexto = rodada_privada('bench-linhas-mariadb-', MariadbBinlog)
    else:
        contexto = rodada_postgres('bench-linhas-postgres-')
    lados = []
    with contexto as (servidor, contextia, _chave, pasta):
        try:
            for estrategia in ('coluna', LOG_DO_BANCO[banco]):
                lados.append(
                    montar_lado(servidor, contextia, pasta, estrategia, plano, args.intervalo_dados)
                )
            versao = _versao(lados[0].erp)
            aquecer(lados, args.intervalo_dados)
            itens = fases_de_item(lados, plano, args.mudancas, args.intervalo_dados)
            notas = eventos_de_nota(lados, plano, args.intervalo_dados)
        finally:
            for lado in lados:
                desmontar_lado(lado)
    return versao, itens, notas


def _tempos(tempos, faltam):
    if not tempos:
        return 'nada visto (não vistas: %d)' % faltam
    return 'p50 %.2f s  p95 %.2f s  máx %.2f s  (não vistas: %d)' % (
        percentil(tempos, 0.5),
        percentil(tempos, 0.95),
        max(tempos),
        faltam,
    )


def _razao(log, coluna):
    if not log or not coluna:
        return 'razão n/a'
    return 'razão p50 %.2f  p95 %.2f' % (
        percentil(log, 0.5) / percentil(coluna, 0.5),
        percentil(log, 0.95) / percentil(coluna, 0.95),
    )


def imprimir_itens(itens, log, mudancas):
    """As três fases de item; devolve quantas mudanças não foram vistas."""
    print('  commit -> visível, %d mudanças de cada, a intervalos ao acaso:' % mudancas)
    nao_vistas = 0
    coluna_inclusao = itens['inclusão de item']['coluna'][0]
    for nome, resultado in itens.items():
        print('    %s' % nome)
        coluna = resultado.get('coluna')
        print('      %-11s %s' % ('coluna', _tempos(*coluna) if coluna else NA))
        tempos, faltam = resultado[log]
        nao_vistas += faltam + (coluna[1] if coluna else 0)
        if coluna:
            razao = '%s contra a coluna' % _razao(tempos, coluna[0])
        else:
            razao = '%s contra a inclusão pela coluna' % _razao(tempos, coluna_inclusao)
        print('      %-11s %s; %s' % (log, _tempos(tempos, faltam), razao))
    return nao_vistas


def _mediana(repeticoes, estrategia, nome):
    """A mediana dos segundos de `nome` nas repetições, dita; e as não vistas."""
    tempos = [r[estrategia][0].get(nome) for r in repeticoes]
    vistos = [t for t in tempos if t is not None]
    if not vistos:
        return None, 'nunca visto'
    faltam = len(tempos) - len(vistos)
    mediana = statistics.median(vistos)
    return mediana, '%.2f s%s' % (mediana, ' (não vistas: %d)' % faltam if faltam else '')


def _contas(repeticoes, estrategia, indice):
    return [r[estrategia][indice] for r in repeticoes]


def _razao_nota(log, coluna):
    return '%.2f' % (log / coluna) if log is not None and coluna else 'n/a'


def imprimir_nota(k, tipo, medidas, log):
    """Uma linha por estratégia da nota de K itens; o erro da conta do log, ou None."""
    enviados, removidas = _contas(medidas, log, 1), _contas(medidas, log, 2)
    esperado = [k] * len(medidas), [0 if tipo == 'alterada' else k] * len(medidas)
    confere = (enviados, removidas) == esperado
    coluna = _mediana(medidas, 'coluna', 'visível' if tipo == 'alterada' else 'chegou')
    conta = '(= K)' if confere else '(DIFERENTE: esperado %s e %s)' % esperado
    if tipo == 'alterada':
        print('    K=%-4d NUMERO alterado, até os K visíveis com o número novo' % k)
        print('      %-11s %s; enviados %s' % ('coluna', coluna[1], _contas(medidas, 'coluna', 1)))
        visivel = _mediana(medidas, log, 'visível')
        print(
            '      %-11s %s; enviados %s removidas %s %s; razão contra a coluna %s'
            % (log, visivel[1], enviados, removidas, conta, _razao_nota(visivel[0], coluna[0]))
        )
    else:
        print('    K=%-4d troca de empresa, até os K na nova (e fora da antiga)' % k)
        print(
            '      %-11s chegou %s, saiu da antiga %s; enviados %s'
            % ('coluna', coluna[1], NA, _contas(medidas, 'coluna', 1))
        )
        chegou, completo = _mediana(medidas, log, 'chegou'), _mediana(medidas, log, 'chegou e saiu')
        print(
            '      %-11s chegou %s, chegou e saiu %s; enviados %s removidas %s %s;'
            ' razão contra a coluna (chegou) %s, (chegou e saiu) %s'
            % (
                log,
                chegou[1],
                completo[1],
                enviados,
                removidas,
                conta,
                _razao_nota(chegou[0], coluna[0]),
                _razao_nota(completo[0], coluna[0]),
            )
        )
    if confere:
        return None
    return 'K=%d %s: enviados %s removidas %s' % (k, tipo, enviados, removidas)


def imprimir_notas(notas, log, repeticoes):
    """A nota alterada e a que troca de empresa; devolve as contas erradas do log."""
    print(
        '  nota de K itens, mediana de %d; enviados/removidas por repetição, somados das'
        ' linhas `<dataset> escopo=... enviados=N` / `removidas=N` do log do ouvinte:' % repeticoes
    )
    erros = [imprimir_nota(k, tipo, medidas, log) for (k, tipo), medidas in notas.items()]
    return [erro for erro in erros if erro]


def carga():
    return '%.1f %.1f %.1f' % os.getloadavg()


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--mudancas', type=int, default=40)
    p.add_argument('--intervalo-dados', type=float, default=2)
    p.add_argument('--itens', default='1,10,100', help='os K das notas, separados por vírgula')
    p.add_argument('--repeticoes', type=int, default=5, help='notas por K')
    p.add_argument('--bancos', default='mariadb,postgres')
    args = p.parse_args()
    ks = [int(k) for k in args.itens.split(',')]
    plano = Plano(ks, args.repeticoes)
    print(
        'carga da máquina no início (1, 5, 15 min): %s em %d núcleo(s)'
        % (carga(), os.cpu_count() or 0),
        flush=True,
    )
    problemas = []
    for banco in args.bancos.split(','):
        log = LOG_DO_BANCO[banco]
        versao, itens, notas = rodada(banco, args, plano)
        print(
            '\n%s: %s contra coluna, mesma rodada, --intervalo-dados %s (carga agora: %s)'
            % (versao, log, args.intervalo_dados, carga())
        )
        if imprimir_itens(itens, log, args.mudancas):
            problemas.append('%s: mudança não vista' % log)
        problemas += ['%s: %s' % (log, e) for e in imprimir_notas(notas, log, args.repeticoes)]
    print('\ncarga da máquina no fim (1, 5, 15 min): %s' % carga())
    for problema in problemas:
        print('PROBLEMA: %s' % problema)
    return 1 if problemas else 0


if __name__ == '__main__':
    sys.exit(main())
