#!/usr/bin/env python3
"""
Issue 18: o Contextia local deixa de ser o gargalo. Quantos registros/s ele grava.

    .venv/bin/python bench/bench_intake.py [--registros 100000] [--repeticoes 3]
        [--base DIR] [--chunk 500]

Os MESMOS lotes (registros de 12 colunas com a forma de um título a receber,
montados uma vez como o cliente os monta: `Serializador` + `corpo_de_registros`,
envelope com `key` e `sync`) são postados, na mesma execução, a:

    sink trivial        um intake mínimo noutro processo (só lê o corpo e responde
                        as contagens): o teto do HTTP nesta máquina
    servidor de hoje    o Contextia local do código de `--base DIR` (um checkout
                        do main anterior); sem `--base`, a linha sai da tabela
    servidor novo       o Contextia local deste checkout; "N processos" é ele com
                        `--processos N` (`--processos` deste bench, padrão 2)

Cada destino é um processo novo, com um dataset novo por repetição (todo
registro é `inserted`); o postador é um `http.client` com keep-alive, sem
serializar nada no relógio. "1 em voo" é um lote de cada vez (a latência do
servidor por lote); "4 em voo" são quatro conexões (o padrão da carga completa,
`--lotes-em-voo`). A coluna "CPU do servidor" é o tempo de CPU (user+sys) do
processo destino (com os filhos, em N processos) por 1 milhão de registros,
lido em /proc: menos sensível à carga da máquina que o relógio.

Depois, ponta a ponta: `enviar_dataset` (o caminho do `connector.py`, com
`sync`, 4 em voo, gzip quando anunciado) dos mesmos registros ao sink e ao
servidor novo: com o servidor fora do gargalo, as duas taxas ficam próximas
(ponta a ponta = velocidade do cliente).

Mostra as medianas, a razão contra o sink e a do servidor novo contra o de
hoje (`--base`), todas da mesma rodada. Não é teste.
"""

from __future__ import annotations

import argparse
import datetime
import decimal
import gzip
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, RAIZ)
sys.path.insert(0, os.path.join(RAIZ, 'bench'))

from bench_velocidade import Sink  # noqa: E402

from contextia_local.processo import porta_livre  # noqa: E402
from contextia_sync.intake.serializacao import (  # noqa: E402
    Serializador,
    corpo_de_registros,
)

_ABRIDOR = urllib.request.build_opener(urllib.request.ProxyHandler({}))
TOKEN = 'admin-bench'


def titulos(quantidade: int) -> Iterator[dict[str, Any]]:
    base = datetime.datetime(2026, 1, 1, 8, 0, 0)
    for i in range(quantidade):
        yield {
            'ID': i,
            'EMPRESA_ID': 297,
            'NUMERO': 'NF-%08d' % i,
            'PARCELA': i % 12 + 1,
            'CLIENTE': 'Cliente %05d Comercio de Peças Ltda' % (i % 5000),
            'EMISSAO': (base + datetime.timedelta(days=i % 400)).date(),
            'VENCIMENTO': (base + datetime.timedelta(days=i % 400 + 30)).date(),
            'VALOR': decimal.Decimal('%d.%02d' % (100 + i % 90000, i % 100)),
            'SALDO': decimal.Decimal('%d.%02d' % (i % 5000, (i * 7) % 100)),
            'SITUACAO': 'ABCP'[i % 4],
            'ALTERADO_EM': base + datetime.timedelta(seconds=i * 13),
            'OBS': None if i % 3 else 'renegociado em %d' % (i % 31),
        }


def lotes_prontos(quantidade: int, chunk: int, dataset: str) -> list[bytes]:
    """Os corpos dos lotes, como o cliente os monta (envelope + corpo_de_registros)."""
    serializador = Serializador()
    corpos = []
    lote: list[dict[str, Any]] = []
    parte = 0

    def fechar() -> None:
        nonlocal parte
        parte += 1
        cabeca = json.dumps(
            {'dataset': dataset, 'key': 'ID', 'sync': {'id': 'bench-%s' % dataset, 'part': parte}},
            separators=(',', ':'),
        ).encode()
        corpos.append(cabeca[:-1] + b',"records":' + corpo_de_registros(lote) + b'}')

    for registro in titulos(quantidade):
        lote.append(serializador.registro(registro))
        if len(lote) == chunk:
            fechar()
            lote = []
    if lote:
        fechar()
    return corpos


# ---------------------------------------------------------------- destinos
class Contextia:
    """`python -m contextia_local` do código em `codigo`, num processo próprio."""

    def __init__(self, codigo: str, dados: str, processos: int = 1) -> None:
        self.porta = porta_livre()
        self.url = 'http://127.0.0.1:%d' % self.porta
        ambiente = dict(os.environ, CONTEXTIA_ADMIN_TOKEN=TOKEN, PYTHONPATH=codigo)
        # O código de antes (--base) não tem a opção: só vai quando pedida.
        varios = ['--processos', str(processos)] if processos > 1 else []
        self.processo = subprocess.Popen(
            [
                sys.executable,
                '-m',
                'contextia_local',
                '--porta',
                str(self.porta),
                '--dados',
                dados,
                '--vigiar-pai',
                str(os.getpid()),
                *varios,
            ],
            cwd=codigo,
            env=ambiente,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        for _ in range(400):
            try:
                with _ABRIDOR.open(self.url + '/saude', timeout=1):
                    break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError('Contextia local de %s não subiu' % codigo)
        self.chave = self._chave()

    def _admin(self, caminho: str, corpo: Any) -> Any:
        pedido = urllib.request.Request(
            self.url + caminho,
            data=json.dumps(corpo).encode(),
            method='POST',
            headers={'Authorization': 'Bearer ' + TOKEN, 'Content-Type': 'application/json'},
        )
        with _ABRIDOR.open(pedido, timeout=30) as resposta:
            return json.loads(resposta.read())

    def _chave(self) -> str:
        projeto = self._admin('/api/v1/admin/projetos', {'external_id': 'bench'})
        return str(self._admin('/api/v1/admin/projetos/%d/chaves' % projeto['id'], {})['key'])

    def cpu(self) -> float:
        """CPU (user+sys) do servidor: o processo e os filhos dele (`--processos`)."""
        return sum(map(_cpu_de, [self.processo.pid, *_filhos(self.processo.pid)]))

    def parar(self) -> None:
        self.processo.terminate()
        self.processo.wait(10)


def _cpu_de(pid: int) -> float:
    with open('/proc/%d/stat' % pid, encoding='ascii') as f:
        campos = f.read().rsplit(')', 1)[1].split()
    return (int(campos[11]) + int(campos[12])) / os.sysconf('SC_CLK_TCK')


def _filhos(pid: int) -> list[int]:
    with open('/proc/%d/task/%d/children' % (pid, pid), encoding='ascii') as f:
        return [int(filho) for filho in f.read().split()]


class DestinoSink:
    """O sink de bench_velocidade.py, com a mesma interface do Contextia acima."""

    def __init__(self, gzip_: bool = False) -> None:
        self.sink = Sink(gzip=gzip_)
        self.url = self.sink.url
        self.porta = self.sink.porta
        self.chave = 'ctx_bench' + 'x' * 20
        self.processo = self.sink.processo

    def cpu(self) -> float:
        return Contextia.cpu(self)  # type: ignore[arg-type]

    def parar(self) -> None:
        self.sink.parar()


# ---------------------------------------------------------------- medidas
def postar(destino: Any, corpos: list[bytes], em_voo: int, comprimir: bool) -> float:
    """Posta os corpos (em `em_voo` conexões); devolve os segundos de relógio."""
    cabecalhos = {'Authorization': 'Bearer ' + destino.chave, 'Content-Type': 'application/json'}
    if comprimir:
        corpos = [gzip.compress(c, compresslevel=1, mtime=0) for c in corpos]
        cabecalhos['Content-Encoding'] = 'gzip'
    falhas: list[str] = []

    def trabalhar(meus: list[bytes]) -> None:
        conexao = http.client.HTTPConnection('127.0.0.1', destino.porta, timeout=120)
        for corpo in meus:
            conexao.request('POST', '/api/v1/intake', body=corpo, headers=cabecalhos)
            resposta = conexao.getresponse()
            texto = resposta.read()
            if resposta.status != 200:
                falhas.append('HTTP %d %r' % (resposta.status, texto[:300]))
                return
        conexao.close()

    fatias = [corpos[i::em_voo] for i in range(em_voo)]
    linhas = [threading.Thread(target=trabalhar, args=(fatia,)) for fatia in fatias]
    inicio = time.perf_counter()
    for linha in linhas:
        linha.start()
    for linha in linhas:
        linha.join()
    segundos = time.perf_counter() - inicio
    if falhas:
        raise SystemExit('postagem falhou: %s' % falhas[0])
    return segundos


def ponta_a_ponta(destino: Any, quantidade: int, chunk: int, dataset: str) -> float:
    from contextia_sync.intake import cliente

    os.environ['CONTEXTIA_URL'] = destino.url
    inicio = time.perf_counter()
    resultado = cliente.enviar_dataset(
        dataset,
        titulos(quantidade),
        key='ID',
        chunk=chunk,
        api_key=destino.chave,
        sync=cliente.gerar_sync(),
        em_voo=4,
    )
    segundos = time.perf_counter() - inicio
    if resultado.lotes_erro:
        raise SystemExit('ponta a ponta falhou: %s' % resultado.erros[:2])
    return segundos


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--registros', type=int, default=100000)
    p.add_argument('--repeticoes', type=int, default=3)
    p.add_argument('--chunk', type=int, default=500)
    p.add_argument('--base', help='checkout do código de antes (o servidor de hoje)')
    p.add_argument(
        '--processos',
        type=int,
        default=2,
        help='processos do servidor novo nas linhas "N processos" (padrão 2; 1 tira as linhas)',
    )
    args = p.parse_args()
    print(
        'carga da máquina no início: %s' % ' '.join('%.2f' % x for x in os.getloadavg()), flush=True
    )

    # (rótulo, fábrica do destino, em voo, gzip, processos do servidor)
    casos: list[tuple[str, str, int, bool, int]] = [('sink trivial', 'sink', 1, False, 1)]
    if args.base:
        casos.append(('servidor de hoje', os.path.abspath(args.base), 1, False, 1))
    casos += [('servidor novo', RAIZ, 1, False, 1), ('sink trivial, 4 em voo', 'sink', 4, False, 1)]
    if args.base:
        casos.append(('servidor de hoje, 4 em voo', os.path.abspath(args.base), 4, False, 1))
    casos += [
        ('servidor novo, 4 em voo', RAIZ, 4, False, 1),
        ('servidor novo, 4 em voo, gzip', RAIZ, 4, True, 1),
    ]
    if args.processos > 1:
        varios = ', %d processos' % args.processos
        casos += [
            ('servidor novo, 4 em voo' + varios, RAIZ, 4, False, args.processos),
            ('servidor novo, 4 em voo, gzip' + varios, RAIZ, 4, True, args.processos),
        ]
    medidas: dict[str, list[tuple[float, float]]] = {c[0]: [] for c in casos}
    ponta: dict[str, list[float]] = {
        'ponta a ponta -> sink trivial (gzip)': [],
        'ponta a ponta -> servidor novo (gzip)': [],
    }
    with tempfile.TemporaryDirectory(prefix='bench-intake-') as pasta:
        for volta in range(args.repeticoes):
            ordem = casos if volta % 2 == 0 else list(reversed(casos))
            for caso in ordem:
                rotulo, codigo, em_voo, comprimir, processos = caso
                dataset = 'bench_%d_%d' % (volta, casos.index(caso))
                corpos = lotes_prontos(args.registros, args.chunk, dataset)
                destino: Any = (
                    DestinoSink()
                    if codigo == 'sink'
                    else Contextia(codigo, os.path.join(pasta, 'd%s' % dataset), processos)
                )
                try:
                    cpu = destino.cpu()
                    segundos = postar(destino, corpos, em_voo, comprimir)
                    cpu = destino.cpu() - cpu
                finally:
                    destino.parar()
                medidas[rotulo].append((segundos, cpu))
                print(
                    '  [%d/%d] %-46s %9.0f registros/s  %5.2f s de CPU/1M'
                    % (
                        volta + 1,
                        args.repeticoes,
                        rotulo,
                        args.registros / segundos,
                        cpu * 1e6 / args.registros,
                    ),
                    flush=True,
                )
            for numero, rotulo in enumerate(ponta if volta % 2 == 0 else reversed(list(ponta))):
                destino = (
                    DestinoSink(gzip_=True)
                    if 'sink' in rotulo
                    else Contextia(RAIZ, os.path.join(pasta, 'p%d_%d' % (volta, numero)))
                )
                try:
                    segundos = ponta_a_ponta(
                        destino, args.registros, args.chunk, 'ponta_%d' % volta
                    )
                finally:
                    destino.parar()
                ponta[rotulo].append(segundos)
                print(
                    '  [%d/%d] %-46s %9.0f registros/s'
                    % (volta + 1, args.repeticoes, rotulo, args.registros / segundos),
                    flush=True,
                )

    def taxa(segundos: list[float]) -> float:
        return args.registros / statistics.median(segundos)

    print(
        '\n%d registros de 12 colunas, lotes de %d, medianas de %d\n'
        % (args.registros, args.chunk, args.repeticoes)
    )

    def taxa_de(rotulo: str) -> float:
        return taxa([s for s, _ in medidas[rotulo]])

    def cpu_por_milhao(rotulo: str) -> float:
        return statistics.median(c for _, c in medidas[rotulo]) * 1e6 / args.registros

    # "× hoje": o servidor novo contra o de hoje com os mesmos lotes em voo, na
    # mesma rodada (o gzip contra o de hoje sem gzip); a CPU, a razão inversa
    # (quantas vezes menos CPU por registro).
    print(
        '| destino | registros/s | × sink trivial | × hoje | CPU do servidor por 1M |'
        ' CPU: hoje ÷ novo |'
    )
    print('|---|---|---|---|---|---|')
    for rotulo, *_ in casos:
        sufixo = ', 4 em voo' if '4 em voo' in rotulo else ''
        # As linhas de N processos contra o de hoje num processo: o que o operador ganha.
        sink = taxa_de('sink trivial' + sufixo)
        valor = taxa_de(rotulo)
        hoje = 'servidor de hoje' + sufixo
        razao = razao_cpu = ''
        if rotulo.startswith('servidor novo') and hoje in medidas:
            razao = '%.2f' % (valor / taxa_de(hoje))
            razao_cpu = '%.2f' % (cpu_por_milhao(hoje) / cpu_por_milhao(rotulo))
        print(
            '| %s | %s | %.2f | %s | %.1f s | %s |'
            % (
                rotulo,
                '{:,}'.format(int(valor)),
                valor / sink,
                razao,
                cpu_por_milhao(rotulo),
                razao_cpu,
            )
        )
    sink = taxa(ponta['ponta a ponta -> sink trivial (gzip)'])
    for rotulo, valores in ponta.items():
        print(
            '| %s | %s | %.2f | | | |'
            % (rotulo, '{:,}'.format(int(taxa(valores))), taxa(valores) / sink)
        )
    print('\ncarga da máquina no fim: %s' % ' '.join('%.2f' % x for x in os.getloadavg()))
    return 0


if __name__ == '__main__':
    sys.exit(main())
