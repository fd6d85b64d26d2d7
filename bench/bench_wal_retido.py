#!/usr/bin/env python3
"""
O WAL que o slot lógico retém com o Contextia FORA por --segundos (padrão 300),
com o spool e sem ele, na mesma rodada.

    .venv/bin/python bench/bench_wal_retido.py [--segundos 300] [--ritmo 200] [--amostra 10]

Tudo de verdade, no mesmo PostgreSQL privado com wal_level=logical (o WAL é do
cluster: os dois slots veem o mesmo WAL gerado), o Contextia local num processo
e dois ouvinte.py `slot_logico`, cada um no seu banco e no seu slot:

    com spool   o limite padrão (padroes.SPOOL_MAXIMO_ITENS/_BYTES)
    sem spool   CONTEXTIA_SPOOL_MAXIMO_ITENS=1: a primeira mudança enche o
                spool, a captura pausa e o slot não anda mais -- o que faz um
                leitor que só avança o slot depois que o Contextia confirmou

Com os dois ouvintes de pé e a carga inicial entregue, o Contextia é PARADO
(o processo, não um 503) e um escritor aplica a mesma sequência de inserts,
updates e deletes nos dois bancos, em ritmo constante (--ritmo mudanças/s por
banco, --por-transacao por COMMIT, linhas com um histórico de --linha bytes).
A cada --amostra s: o WAL gerado desde o começo, o retido por cada slot
(pg_current_wal_lsn() - restart_lsn) e o ainda não confirmado
(- confirmed_flush_lsn), e o spool do ouvinte com spool (linhas e bytes). No
fim o Contextia volta; o ouvinte sem spool é reiniciado com o limite padrão
(para alcançar, ele relê do slot todo o WAL retido) e mede-se quanto cada um
leva até o Contextia ter exatamente as linhas da origem (ID e VALOR).

O PostgreSQL privado roda com fsync=off e full_page_writes=off
(tests/apoio/postgres_logico.py): o WAL gerado é menor que o de um servidor de
produção (sem as páginas inteiras depois de cada checkpoint); valem as razões.
"""

import argparse
import json
import logging
import os
import random
import string
import sys
import threading
import time

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, RAIZ)

from bench.bench_slot import _banco, arquivo_de_chaves, rodada, subir_ouvinte  # noqa: E402
from tests.apoio.captura_log import parar as _parar  # noqa: E402
from tests.apoio.ouvinte import esperar  # noqa: E402

VARIANTES = {'com_spool': {}, 'sem_spool': {'CONTEXTIA_SPOOL_MAXIMO_ITENS': '1'}}
MIB = 1024 * 1024


def _dataset(variante):
    return 'mov_' + variante


def _estado(pasta, variante):
    # A pasta que subir_ouvinte dá ao dataset.
    return os.path.join(pasta, 'estado-' + _dataset(variante))


def preparar(servidor, linha):
    """Um banco do _banco do bench_slot, com o histórico de `linha` bytes em cada linha."""
    banco = _banco(servidor)
    banco.admin('ALTER TABLE "MOVIMENTO" ADD COLUMN "HISTORICO" VARCHAR(%d)' % (linha * 2))
    return banco


class Escritor(threading.Thread):
    """A mesma sequência de mudanças em cada banco, `ritmo` por segundo, até `parar`."""

    def __init__(self, bancos, ritmo, por_transacao, linha, semente=20):
        super().__init__(daemon=True)
        self.bancos, self.ritmo, self.por_transacao, self.linha = (
            bancos,
            ritmo,
            por_transacao,
            linha,
        )
        self.aleatorio = random.Random(semente)
        # A linha 1 do _banco é anterior ao slot (nenhuma carga a levou): fica quieta.
        self.vivos = []
        self.proximo = 2
        self.feitas = {'insert': 0, 'update': 0, 'delete': 0}
        self.parar = threading.Event()
        self.erro = None
        self.segundos = 0.0
        # Texto de onde o histórico de cada linha é cortado (sem custo por mudança).
        self._texto = ''.join(
            self.aleatorio.choice(string.ascii_letters + ' ') for _ in range(linha * 8)
        )

    def _historico(self):
        inicio = self.aleatorio.randrange(len(self._texto) - self.linha)
        return self._texto[inicio : inicio + self.linha]

    def _tirar(self):
        indice = self.aleatorio.randrange(len(self.vivos))
        self.vivos[indice], self.vivos[-1] = self.vivos[-1], self.vivos[indice]
        return self.vivos.pop()

    def _mudancas(self):
        """60 % inserts, 30 % updates, 10 % deletes (sem deixar a tabela minguar)."""
        for _ in range(self.por_transacao):
            sorteio = self.aleatorio.random()
            if sorteio < 0.6 or len(self.vivos) < 100:
                self.vivos.append(self.proximo)
                self.proximo += 1
                yield (
                    'insert',
                    ('INSERT INTO "MOVIMENTO" VALUES (%s, 1, %s, clock_timestamp(), %s)'),
                    (self.vivos[-1], self.aleatorio.randrange(10**6), self._historico()),
                )
            elif sorteio < 0.9:
                ident = self.vivos[self.aleatorio.randrange(len(self.vivos))]
                yield (
                    'update',
                    (
                        'UPDATE "MOVIMENTO" SET "VALOR" = %s, "HISTORICO" = %s,'
                        ' "ALTERADO_EM" = clock_timestamp() WHERE "ID" = %s'
                    ),
                    (self.aleatorio.randrange(10**6), self._historico(), ident),
                )
            else:
                yield 'delete', 'DELETE FROM "MOVIMENTO" WHERE "ID" = %s', (self._tirar(),)

    def run(self):
        import psycopg

        conexoes = [
            psycopg.connect(host='127.0.0.1', port=b.servidor.porta, user='postgres', dbname=b.nome)
            for b in self.bancos
        ]
        passo = self.por_transacao / self.ritmo
        inicio = proximo = time.monotonic()
        try:
            while not self.parar.is_set():
                mudancas = list(self._mudancas())
                for conn in conexoes:
                    with conn.transaction():
                        for _, sql, valores in mudancas:
                            conn.execute(sql, valores)
                for tipo, _, _ in mudancas:
                    self.feitas[tipo] += 1
                proximo += passo
                espera = proximo - time.monotonic()
                if espera > 0:
                    self.parar.wait(espera)
        except Exception as erro:  # noqa: BLE001 - dito no fim, não engolido
            self.erro = erro
        finally:
            self.segundos = time.monotonic() - inicio
            for conn in conexoes:
                conn.close()


def _slots(servidor, inicio):
    """(WAL gerado desde `inicio`, {slot: (retido, não confirmado)}), em bytes."""
    linhas = servidor.admin(
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '%s')::bigint, slot_name,"
        ' pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint,'
        ' pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint'
        ' FROM pg_replication_slots' % inicio
    )
    return linhas[0][0], {nome: (retido, atras) for _, nome, retido, atras in linhas}


def _spool(pasta, variante):
    """(linhas, bytes) do spool, pela conta do próprio spool, lido sem tocar em nada."""
    from contextia_sync.fila.spool import Spool

    calado = logging.getLogger('bench.spool')
    calado.propagate = False
    calado.addHandler(logging.NullHandler())
    spool = Spool(
        os.path.join(_estado(pasta, variante), 'spool'), logger=calado, somente_leitura=True
    )
    try:
        return spool.profundidade(), spool.bytes_ocupados()
    finally:
        spool.fechar()


def _captura(pasta, variante):
    try:
        with open(os.path.join(_estado(pasta, variante), 'ouvinte-status.json')) as arquivo:
            return json.load(arquivo).get('captura') or {}
    except (FileNotFoundError, ValueError):
        return {}


def _no_contextia(chave, variante):
    from contextia_sync.intake import cliente, transporte

    try:
        return {
            (int(r['ID']), int(r['VALOR']))
            for r in cliente.ler_registros(_dataset(variante), chave)
        }
    except transporte.ErroContextia:
        return None


def _na_origem(banco):
    """O que o Contextia deve ter: toda linha que o escritor deixou (a 1 é de antes do slot)."""
    return {
        (int(i), int(v))
        for i, v in banco.admin('SELECT "ID", "VALOR" FROM "MOVIMENTO" WHERE "ID" <> 1')
    }


def medir(servidor, contextia, chave, pasta, args):
    ouvintes = {}
    try:
        return _medir(servidor, contextia, chave, pasta, args, ouvintes)
    except BaseException:
        for nome in sorted(os.listdir(pasta)):
            if nome.endswith('.log'):
                with open(os.path.join(pasta, nome), 'rb') as arquivo:
                    print(
                        '--- fim de %s:\n%s'
                        % (nome, arquivo.read()[-3000:].decode('utf-8', 'replace')),
                        file=sys.stderr,
                    )
        raise
    finally:
        for processo in ouvintes.values():
            if processo.poll() is None:
                _parar(processo)


def _medir(servidor, contextia, chave, pasta, args, ouvintes):
    chaves = arquivo_de_chaves(pasta, chave)
    bancos = {}
    for variante, ambiente in VARIANTES.items():
        bancos[variante] = preparar(servidor, args.linha)
        ouvintes[variante] = subir_ouvinte(
            bancos[variante],
            contextia,
            pasta,
            chaves,
            _dataset(variante),
            'slot_logico',
            **ambiente,
        )
    slot = {v: 'contextia_bench_%s_%s' % (os.getpid(), _dataset(v)) for v in VARIANTES}
    # O slot lido uma vez (o primeiro ciclo, com o Contextia de pé): só então ele sai.
    for variante in VARIANTES:
        esperar(lambda v=variante: _captura(pasta, v).get('posicao'), 120, passo=1)
    contextia.parar()
    inicio = servidor.admin('SELECT pg_current_wal_lsn()::text')[0][0]
    escritor = Escritor([bancos[v] for v in VARIANTES], args.ritmo, args.por_transacao, args.linha)
    comeco = time.monotonic()
    escritor.start()
    amostras, proxima = [], 0.0
    while True:
        decorrido = time.monotonic() - comeco
        gerado, por_slot = _slots(servidor, inicio)
        amostras.append(
            (
                decorrido,
                gerado,
                {v: por_slot.get(slot[v], (None, None)) for v in VARIANTES},
                _spool(pasta, 'com_spool'),
                {v: _captura(pasta, v).get('pausada') for v in VARIANTES},
            )
        )
        if decorrido >= args.segundos or escritor.erro:
            break
        proxima = min(proxima + args.amostra, args.segundos)
        time.sleep(max(0.0, comeco + proxima - time.monotonic()))
    escritor.parar.set()
    escritor.join(60)
    if escritor.erro:
        raise RuntimeError('o escritor parou: %r' % escritor.erro)
    # A volta: o sem spool sobe de novo com o limite padrão (relê o WAL retido).
    _parar(ouvintes['sem_spool'])
    contextia.iniciar()
    volta = time.monotonic()
    ouvintes['sem_spool'] = subir_ouvinte(
        bancos['sem_spool'],
        contextia,
        pasta,
        chaves,
        _dataset('sem_spool'),
        'slot_logico',
        criar_slot=False,
        log='volta',
    )
    # A primeira entrega (o com spool só tenta no próximo ciclo: até --intervalo-dados
    # depois) e o Contextia igual à origem.
    comecou, escoado = {}, {}
    origem = {v: _na_origem(bancos[v]) for v in VARIANTES}
    while len(escoado) < len(VARIANTES) and time.monotonic() - volta < args.prazo_volta:
        for variante in set(VARIANTES) - set(escoado):
            vistos = _no_contextia(chave, variante)
            if vistos:
                comecou.setdefault(variante, time.monotonic() - volta)
            if vistos == origem[variante]:
                escoado[variante] = time.monotonic() - volta
        time.sleep(2)
    spool_no_fim = _spool(pasta, 'com_spool')
    return amostras, escritor, (comecou, escoado), origem, spool_no_fim


def _mib(valor):
    return '—' if valor is None else ('%.1f' % (valor / MIB)).replace('.', ',')


def _razao(parte, todo):
    return ('%.3f' % (parte / todo)).replace('.', ',') if todo else '—'


def relatar(args, amostras, escritor, volta, origem, spool_no_fim):
    comecou, escoado = volta
    feitas = sum(escritor.feitas.values())
    print(
        'Contextia fora por %d s; escritor: %d mudanças por banco em %.0f s (%.0f/s;'
        ' %s), %d por COMMIT, histórico de %d bytes; o mesmo nos dois bancos.'
        % (
            args.segundos,
            feitas,
            escritor.segundos,
            feitas / max(escritor.segundos, 1e-9),
            ', '.join('%s %d' % item for item in escritor.feitas.items()),
            args.por_transacao,
            args.linha,
        )
    )
    print()
    print(
        '| t (s) | WAL gerado (MiB) | com spool: retido / não confirmado (MiB)'
        ' | sem spool: retido / não confirmado (MiB) | spool (linhas) | spool (MiB) |'
    )
    print('|---|---|---|---|---|---|')
    for decorrido, gerado, por_variante, (linhas, ocupados), pausada in amostras:
        celulas = [
            '%s / %s%s'
            % (
                _mib(por_variante[v][0]),
                _mib(por_variante[v][1]),
                ' (pausada)' if pausada[v] else '',
            )
            for v in VARIANTES
        ]
        print(
            '| %.0f | %s | %s | %s | %d | %s |'
            % (decorrido, _mib(gerado), celulas[0], celulas[1], linhas, _mib(ocupados))
        )
    gerado = amostras[-1][1]
    print()
    for variante in VARIANTES:
        retidos = [a[2][variante][0] or 0 for a in amostras]
        print(
            '%s: pico do WAL retido %s MiB = %s do WAL gerado (%s MiB); no fim %s MiB (%s)'
            % (
                variante.replace('_', ' '),
                _mib(max(retidos)),
                _razao(max(retidos), gerado),
                _mib(gerado),
                _mib(retidos[-1]),
                _razao(retidos[-1], gerado),
            )
        )
    for variante in VARIANTES:
        if variante in escoado:
            print(
                '%s: Contextia de volta -> primeira entrega em %.0f s, igual à origem'
                ' (%d linhas) em %.0f s: escoou em %.0f s'
                % (
                    variante.replace('_', ' '),
                    comecou[variante],
                    len(origem[variante]),
                    escoado[variante],
                    escoado[variante] - comecou[variante],
                )
            )
        else:
            print(
                '%s: NÃO ficou igual à origem em %d s'
                % (variante.replace('_', ' '), args.prazo_volta)
            )
    print('spool com spool no fim: %d linhas, %s MiB' % (spool_no_fim[0], _mib(spool_no_fim[1])))
    return 0 if len(escoado) == len(VARIANTES) else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--segundos', type=int, default=300, help='tempo com o Contextia fora')
    p.add_argument('--ritmo', type=float, default=200, help='mudanças por segundo, por banco')
    p.add_argument('--por-transacao', type=int, default=10)
    p.add_argument('--linha', type=int, default=400, help='bytes do histórico de cada linha')
    p.add_argument('--amostra', type=float, default=10, help='segundos entre as amostras')
    p.add_argument(
        '--prazo-volta',
        type=int,
        default=900,
        help='segundos para o Contextia ficar igual à origem depois da volta',
    )
    args = p.parse_args()
    with rodada('bench-wal-') as (servidor, contextia, chave, pasta):
        resultado = medir(servidor, contextia, chave, pasta, args)
    return relatar(args, *resultado)


if __name__ == '__main__':
    sys.exit(main())
