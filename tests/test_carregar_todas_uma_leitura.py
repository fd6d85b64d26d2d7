"""
carregar-todas com UMA leitura por dataset para todas as empresas (carga/todas.py).

Processos de verdade: o carregar-todas.sh, o connector, o Contextia local e os
bancos (SQLite, PostgreSQL, MariaDB). Prova:

  * o mesmo resultado da carga empresa por empresa: depois dela, o connector
    `--scope` de cada empresa acha todo registro IGUAL e não remove nada;
  * a linha apagada na origem sai de cada empresa;
  * 500 só para uma empresa (um filtro HTTP de verdade entre o connector e o
    Contextia, que erra só para a chave dela): sem complete nela, as outras
    fecham na mesma execução;
  * a conexão da leitura derrubada no meio (pg_terminate_backend): complete em
    empresa nenhuma;
  * muitas empresas intercaladas no disco com chunk pequeno: nenhum lote passa
    do chunk, a soma dos buffers por empresa fica no teto, e a empresa com lote
    recusado (500) não recebe complete enquanto as outras, na mesma leitura,
    recebem.
"""

from __future__ import annotations

import gzip
import http.client
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from contextia_sync.intake import cliente
from contextia_sync.provisionamento.chaves import Registro, gravar_registros
from tests.dados import erp as erp_teste

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATASET = 'titulos_a_receber'


@pytest.fixture(
    params=[
        'sqlite',
        pytest.param('postgres', marks=pytest.mark.postgres),
        pytest.param('mariadb', marks=pytest.mark.mariadb),
    ]
)
def erp(request, fabrica_de_bancos):
    return erp_teste.Erp(fabrica_de_bancos(request.param))


def _arquivo_de_chaves(tmp_path, chaves):
    arquivo = tmp_path / 'chaves.tsv'
    gravar_registros(
        str(arquivo), [Registro(e, k, None, None, 'pronto', None) for e, k in chaves.items()]
    )
    return arquivo


def _ambiente(erp, mapa, **extra):
    env = dict(
        os.environ,
        CONTEXTIA_MAPPING=mapa,
        CONTEXTIA_ORIGEM=erp.url,
        CONTEXTIA_PYTHON=sys.executable,
        **extra,
    )
    env.pop('CONTEXTIA_API_KEY', None)
    return env


def carregar_todas(erp, mapa, arquivo, *extra, **ambiente):
    feito = subprocess.run(
        ['bash', os.path.join(RAIZ, 'carregar-todas.sh'), str(arquivo)] + list(extra),
        env=_ambiente(erp, mapa, **ambiente),
        cwd=RAIZ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=300,
    )
    return feito.returncode, feito.stdout.decode('utf-8', 'replace')


def numeros_da_empresa(saida, escopo, dataset=DATASET):
    """{'registros': 45, ...} da linha do dataset no bloco da empresa, no fim da saída."""
    bloco = saida.split('----- empresa %s -----' % escopo, 1)[1].split('-----', 1)[0]
    for linha in bloco.splitlines():
        if linha.strip().startswith(dataset + ' '):
            return {
                k: int(v)
                for k, v in re.findall(r'(\w+)=(\d+)', linha)
                if k in ('registros', 'novos', 'atualizados', 'iguais', 'removidos')
            }
    raise AssertionError('%s sem a linha de %s:\n%s' % (escopo, dataset, saida))


def no_servidor(chave):
    return {d['dataset']: d['records'] for d in cliente.listar_datasets(chave)}


def execucoes(arquivo, execucao):
    """{(empresa, dataset)} que a execução `execucao` fechou, pelo histórico."""
    try:
        with open(str(arquivo) + '.historico.json', encoding='utf-8') as f:
            cargas = json.load(f)['cargas']
    except FileNotFoundError:
        return set()
    return {
        (escopo, dataset)
        for escopo, datasets in cargas.items()
        for dataset, entrada in datasets.items()
        if entrada.get('execucao') == execucao
    }


def test_uma_leitura_da_o_mesmo_que_a_carga_por_empresa_e_remove_o_apagado(
    erp, tmp_path, chave_contextia
):
    e0, e1 = erp.escopos
    chaves = {e: chave_contextia(e) for e in (e0, e1)}
    arquivo = _arquivo_de_chaves(tmp_path, chaves)
    mapa = erp_teste.mapeamento(tmp_path)

    codigo, saida = carregar_todas(erp, mapa, arquivo)
    assert codigo == 0, saida
    assert '%-34s 1 leitura(s), 75 linha(s) para 2 empresa(s)' % DATASET in saida
    assert '%-34s 1 leitura(s), 3 linha(s) para 2 empresa(s)' % 'status (domínio)' in saida
    assert numeros_da_empresa(saida, e0)['novos'] == 45
    assert numeros_da_empresa(saida, e1)['novos'] == 30
    assert numeros_da_empresa(saida, e1, 'status')['novos'] == 3
    assert {e: no_servidor(chaves[e]) for e in (e0, e1)} == {
        e0: {DATASET: 45, 'status': 3},
        e1: {DATASET: 30, 'status': 3},
    }
    guardados = {
        e: sorted(json.dumps(r, sort_keys=True) for r in cliente.ler_registros(DATASET, chaves[e]))
        for e in (e0, e1)
    }

    # A carga de UMA empresa (o connector dela, --scope) acha tudo igual: o que a
    # leitura repartida guardou e, registro a registro, o que a carga dela guardaria.
    for escopo in (e0, e1):
        feito = subprocess.run(
            [
                sys.executable,
                'connector.py',
                '--mapping=' + mapa,
                '--source=generic',
                '--scope=' + escopo,
                '--chaves=' + str(arquivo),
            ],
            cwd=RAIZ,
            env=_ambiente(erp, mapa),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=120,
        )
        texto = feito.stdout.decode('utf-8', 'replace')
        assert feito.returncode == 0, texto
        assert (
            ' novos=0 atualizados=0 iguais=%d removidos=0' % (45 if escopo == e0 else 30) in texto
        ), texto
    assert {
        e: sorted(json.dumps(r, sort_keys=True) for r in cliente.ler_registros(DATASET, chaves[e]))
        for e in (e0, e1)
    } == guardados

    # Uma linha apagada em cada empresa: a leitura seguinte a tira de cada uma.
    for escopo in (e0, e1):
        erp.executar(
            'DELETE FROM {TITULOS} WHERE {ID} = (SELECT MIN({ID}) FROM {TITULOS}'
            ' WHERE {EMPRESA_ID} = :e)'
            if erp.banco.tipo != 'mariadb'
            else 'DELETE FROM {TITULOS} WHERE {EMPRESA_ID} = :e ORDER BY {ID} LIMIT 1',
            e=int(escopo),
        )
    codigo, saida = carregar_todas(erp, mapa, arquivo, CONTEXTIA_EXECUCAO='apagou')
    assert codigo == 0, saida
    assert numeros_da_empresa(saida, e0) == {
        'registros': 44,
        'novos': 0,
        'atualizados': 0,
        'iguais': 44,
        'removidos': 1,
    }
    assert numeros_da_empresa(saida, e1)['removidos'] == 1
    assert {e: no_servidor(chaves[e])[DATASET] for e in (e0, e1)} == {e0: 44, e1: 29}
    assert execucoes(arquivo, 'apagou') == {(e, d) for e in (e0, e1) for d in (DATASET, 'status')}


class _Filtro(http.server.BaseHTTPRequestHandler):
    """
    Repassa ao Contextia, menos o intake da `chave_ruim`: esse leva 500 (só o
    lote de `sync.part` igual a `parte_ruim`, quando dada).
    """

    protocol_version = 'HTTP/1.1'
    destino: tuple[str, int] = ('127.0.0.1', 0)
    chave_ruim = ''
    status_ruim = 500
    parte_ruim: int | None = None
    fora_depois_de: int | None = None
    """Depois de tantos POSTs de intake, todo intake leva 503 (o Contextia fora)."""
    complete_fora_depois_de: int | None = None
    """Idem, contando só os `complete`: todo complete e todo intake depois levam 503."""
    intakes = 0
    completes = 0
    # Os dois conjuntos são dados por teste, pela fixture `filtro` (um conjunto da
    # classe seria dividido entre os testes).
    syncs_completados: set[str]
    """Os `sync` dos `complete` que chegaram aqui."""
    datasets_fora: set[str]
    """Os datasets dos lotes que levaram o 503 do Contextia fora."""
    recusados = 0
    maior_lote = 0
    """O maior número de registros num POST de intake que passou por aqui."""

    def log_message(self, *_args):  # o pytest mostra a saída do teste, não isto
        pass

    def _repassar(self):
        corpo = self.rfile.read(int(self.headers.get('Content-Length') or 0))
        parte = None
        if self.path.startswith('/api/v1/intake') and corpo:
            cru = (
                gzip.decompress(corpo) if self.headers.get('Content-Encoding') == 'gzip' else corpo
            )
            envelope = json.loads(cru)
            sync = envelope.get('sync')  # no complete, o id (texto)
            parte = sync.get('part') if isinstance(sync, dict) else None
            classe = type(self)
            classe.maior_lote = max(classe.maior_lote, len(envelope.get('records', [])))
            if self.path == '/api/v1/intake':
                classe.intakes += 1
                fora = self.fora_depois_de is not None and classe.intakes > self.fora_depois_de
            else:
                classe.completes += 1
                classe.syncs_completados.add(envelope.get('sync'))
                fora = False
            if fora or (
                self.complete_fora_depois_de is not None
                and classe.completes > self.complete_fora_depois_de
            ):
                classe.datasets_fora.add(envelope.get('dataset'))
                self._responder(503, b'{"detail": "fora do ar (injetado)"}')
                return
        if (
            self.path.startswith('/api/v1/intake')
            and self.chave_ruim
            and self.chave_ruim in (self.headers.get('Authorization') or '')
            and self.parte_ruim in (None, parte)
        ):
            type(self).recusados += 1
            self._responder(
                self.status_ruim,
                b'{"detail": "falha injetada: %d so para esta empresa"}' % self.status_ruim,
            )
            return
        conexao = http.client.HTTPConnection(*self.destino, timeout=60)
        cabecalhos = {
            k: v
            for k, v in self.headers.items()
            if k.lower() not in ('host', 'connection', 'content-length')
        }
        conexao.request(self.command, self.path, body=corpo or None, headers=cabecalhos)
        resposta = conexao.getresponse()
        dados = resposta.read()
        self.send_response(resposta.status)
        for nome, valor in resposta.getheaders():
            if nome.lower() not in ('transfer-encoding', 'connection', 'content-length'):
                self.send_header(nome, valor)
        self.send_header('Content-Length', str(len(dados)))
        self.end_headers()
        self.wfile.write(dados)
        conexao.close()

    def _responder(self, status, corpo):
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(corpo)))
        self.end_headers()
        self.wfile.write(corpo)

    do_GET = do_POST = do_DELETE = do_PUT = _repassar


@pytest.fixture
def filtro(ambiente_contextia) -> Iterator[type[_Filtro]]:
    classe = type('FiltroDoTeste', (_Filtro,), {'datasets_fora': set(), 'syncs_completados': set()})
    url = http.client.urlsplit(ambiente_contextia.url)
    classe.destino = (url.hostname, url.port)
    servidor = http.server.ThreadingHTTPServer(('127.0.0.1', 0), classe)
    fio = threading.Thread(target=servidor.serve_forever, daemon=True)
    fio.start()
    classe.url = 'http://127.0.0.1:%d' % servidor.server_address[1]
    yield classe
    servidor.shutdown()
    servidor.server_close()


def _erp_de_duas_empresas(tmp_path, chave_contextia):
    """O ERP de teste em SQLite, uma chave por empresa e o arquivo de chaves."""
    erp = erp_teste.erp_sqlite(tmp_path)
    chaves = {e: chave_contextia(e) for e in erp.escopos}
    return erp, chaves, _arquivo_de_chaves(tmp_path, chaves)


def _bloco(saida, escopo):
    """O bloco da empresa no fim da saída do carregar-todas."""
    return saida.split('----- empresa %s -----' % escopo, 1)[1].split('-----', 1)[0]


def test_500_so_para_uma_empresa_nao_fecha_ela_e_as_outras_fecham(
    tmp_path, chave_contextia, filtro
):
    erp, chaves, arquivo = _erp_de_duas_empresas(tmp_path, chave_contextia)
    e0, e1 = erp.escopos
    mapa = erp_teste.mapeamento(tmp_path)
    assert carregar_todas(erp, mapa, arquivo)[0] == 0
    # As duas perdem linhas na origem; a carga seguinte tem o que remover em cada uma.
    erp.executar('DELETE FROM {TITULOS} WHERE {ID} % 5 = 0')
    restantes = {e: erp.titulos(e) for e in (e0, e1)}

    # A empresa e0 leva 500 em todo lote (a leitura sem ordem mistura as duas): e1 fecha.
    filtro.chave_ruim = chaves[e0]
    codigo, saida = carregar_todas(
        erp, mapa, arquivo, CONTEXTIA_URL=filtro.url, CONTEXTIA_EXECUCAO='com-500'
    )
    assert codigo == 1, saida
    assert filtro.recusados >= 2
    assert 'resumo carregar-todas: 1 ok, 1 com falha' in saida
    assert 'FALHARAM: %s (código 1: %s' % (e0, DATASET) in saida
    bloco = _bloco(saida, e0)
    assert 'complete NÃO enviado, nada removido' in bloco and 'HTTP 500' in bloco
    # Nela, nada saiu; na outra, na mesma execução, o apagado saiu.
    assert no_servidor(chaves[e0])[DATASET] == 45
    assert no_servidor(chaves[e1])[DATASET] == restantes[e1]
    assert numeros_da_empresa(saida, e1)['removidos'] == 30 - restantes[e1]
    assert execucoes(arquivo, 'com-500') == {(e1, DATASET), (e1, 'status')}


def test_lote_recusado_no_meio_da_empresa_e_dito_pelo_numero_dele(
    tmp_path, chave_contextia, filtro
):
    # Cada lote de uma empresa vai numa chamada ao envio: o log dizia "lote 1"
    # para todos, e o operador procurava o lote errado.
    erp, chaves, arquivo = _erp_de_duas_empresas(tmp_path, chave_contextia)
    e0 = erp.escopos[0]
    filtro.chave_ruim, filtro.parte_ruim = chaves[e0], 3
    codigo, saida = carregar_todas(
        erp, erp_teste.mapeamento(tmp_path), arquivo, CONTEXTIA_URL=filtro.url
    )
    assert codigo == 1, saida
    assert filtro.recusados == 1
    bloco = _bloco(saida, e0)
    assert re.search(r'dataset %s, lote 3 \(10 registros\): HTTP 500' % DATASET, saida), bloco
    assert 'lote 1 (' not in bloco, bloco


def _carga_com_o_contextia_caindo(tmp_path, chave_contextia, filtro, **queda):
    """
    O carregar-todas com o Contextia caindo no meio (`queda`: os atributos do
    filtro), o prazo de 2 s; confere o que vale para toda queda -- a execução
    para ali: o dataset seguinte (o domínio) nem é tentado, em empresa nenhuma,
    e todas saem com código 1 e a causa. Devolve (arquivo de chaves, saída).
    """
    erp, chaves, arquivo = _erp_de_duas_empresas(tmp_path, chave_contextia)
    for nome, valor in queda.items():
        setattr(filtro, nome, valor)
    codigo, saida = carregar_todas(
        erp,
        erp_teste.mapeamento(tmp_path),
        arquivo,
        CONTEXTIA_URL=filtro.url,
        CONTEXTIA_PRAZO_ENVIO='2',
        CONTEXTIA_EXECUCAO='com-queda',
    )
    assert codigo == 1, saida
    assert 'O CONTEXTIA FICOU INDISPONÍVEL' in saida, saida
    assert 'status' in saida.split('não lidos', 1)[0].splitlines()[-1], saida
    assert filtro.datasets_fora == {DATASET}, filtro.datasets_fora
    for escopo in erp.escopos:
        assert (
            'empresa %s FALHOU (código 1): Contextia indisponível no meio da carga de %s'
            % (escopo, DATASET)
            in saida
        ), saida
        assert no_servidor(chaves[escopo]).get('status') is None
    assert 'resumo carregar-todas: 0 ok, 2 com falha' in saida
    return arquivo, saida


def test_contextia_fora_no_meio_para_a_execucao_sem_esperar_cada_empresa(
    tmp_path, chave_contextia, filtro
):
    # O Contextia cai depois de 2 lotes: seguir faria cada lote de cada empresa,
    # e depois cada dataset, esperar o próprio prazo para falhar igual.
    arquivo, _ = _carga_com_o_contextia_caindo(tmp_path, chave_contextia, filtro, fora_depois_de=2)
    assert execucoes(arquivo, 'com-queda') == set()


def test_contextia_fora_no_complete_para_a_execucao_e_a_que_fechou_vale(
    tmp_path, chave_contextia, filtro
):
    # Os lotes passam; o primeiro complete também; o segundo acha o Contextia
    # fora: os complete seguintes, e o dataset seguinte, esperariam o prazo igual.
    arquivo, _ = _carga_com_o_contextia_caindo(
        tmp_path, chave_contextia, filtro, complete_fora_depois_de=1
    )
    assert len(filtro.syncs_completados) == 2, filtro.syncs_completados
    # A que fechou antes da queda vale, e está no histórico (a base do teto dela).
    fechadas = execucoes(arquivo, 'com-queda')
    assert len(fechadas) == 1 and next(iter(fechadas))[1] == DATASET, fechadas


@pytest.mark.postgres
@pytest.mark.lento
def test_leitura_derrubada_no_meio_nao_fecha_empresa_nenhuma(
    fabrica_de_bancos, tmp_path, ambiente_contextia, chave_contextia
):
    # A leitura sem ordem: o cursor traz 2000 linhas por FETCH, os quatro primeiros
    # lotes da primeira empresa ficam em voo (3 s no Contextia) e a leitura espera
    # vaga para o quinto, no meio do segundo FETCH, quando a conexão cai. Nenhuma
    # empresa fecha -- nem a segunda, da qual nada chegou: sem ordem, qualquer uma
    # ainda podia ter linha por vir.
    erp = erp_teste.Erp(fabrica_de_bancos('postgres'), titulos_por_empresa=(5990, 30))
    e0, e1 = erp.escopos
    chaves = {e: chave_contextia(e) for e in (e0, e1)}
    arquivo = _arquivo_de_chaves(tmp_path, chaves)
    mapa = erp_teste.mapeamento(tmp_path, chunk=500)
    assert carregar_todas(erp, mapa, arquivo, '--dataset=' + DATASET)[0] == 0
    erp.executar('DELETE FROM {TITULOS} WHERE {ID} % 10 = 0')
    erp.fechar()

    # Os quatro lotes em voo da primeira empresa esperam 3 s no Contextia: a
    # leitura esta parada no meio, com o cursor aberto, quando a conexao cai.
    ambiente_contextia.injetar('atraso', quantidade=4, segundos=3)
    processo = subprocess.Popen(
        ['bash', os.path.join(RAIZ, 'carregar-todas.sh'), str(arquivo), '--dataset=' + DATASET],
        env=_ambiente(erp, mapa, CONTEXTIA_EXECUCAO='derrubada'),
        cwd=RAIZ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        fim = time.monotonic() + 60
        while ambiente_contextia.falhas_injetadas()['atraso'] < 1 and time.monotonic() < fim:
            time.sleep(0.05)
        derrubadas = erp.banco.executar(
            'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname ='
            ' current_database() AND pid <> pg_backend_pid()'
        )
        saida = processo.communicate(timeout=120)[0].decode('utf-8', 'replace')
    finally:
        if processo.poll() is None:
            processo.kill()
            processo.wait()
        ambiente_contextia.limpar_falhas()
    assert derrubadas, 'nenhuma conexão do connector para derrubar'
    assert processo.returncode == 1, saida
    assert 'A LEITURA CAIU' in saida
    for escopo in (e0, e1):
        bloco = saida.split('----- empresa %s -----' % escopo, 1)[1].split('-----', 1)[0]
        assert 'complete NÃO enviado em nenhuma empresa' in bloco, saida
    # Nenhum complete: o que a origem apagou continua no Contextia, nas duas.
    assert no_servidor(chaves[e0])[DATASET] == 5990
    assert no_servidor(chaves[e1])[DATASET] == 30
    assert execucoes(arquivo, 'derrubada') == set()


@pytest.mark.parametrize(
    'tipo',
    [
        'sqlite',
        pytest.param('postgres', marks=pytest.mark.postgres),
        pytest.param('mariadb', marks=pytest.mark.mariadb),
    ],
)
def test_muitas_empresas_intercaladas_buffers_no_teto_e_a_recusada_sem_complete(
    tipo, fabrica_de_bancos, tmp_path, chave_contextia, filtro, monkeypatch
):
    from contextia_sync.carga.todas import Empresa, carregar_dataset_todas, linha_da_leitura
    from contextia_sync.mapeamento import carregar_mapeamento
    from contextia_sync.origem import carregar_origem

    banco = fabrica_de_bancos(tipo)
    base = int(uuid.uuid4().int % 9000 + 1000) * 100
    empresas, por_empresa, chunk, teto = 12, 23, 5, 20
    # Linha g e da empresa base + g % 12: intercaladas, como no pior caso do bench.
    banco.executar(
        'CREATE TABLE muitas (id INTEGER PRIMARY KEY, empresa_id INTEGER, valor NUMERIC(12,2))'
    )
    linhas = [{'i': g, 'e': base + g % empresas, 'v': g / 4} for g in range(empresas * por_empresa)]
    # E 7 linhas de uma empresa que não esta no arquivo de chaves, no meio.
    linhas[40:40] = [{'i': 100000 + n, 'e': base + 99, 'v': 1} for n in range(7)]
    banco.executar('INSERT INTO muitas VALUES (:i, :e, :v)', linhas)
    mapa = carregar_mapeamento(
        erp_teste.mapeamento(
            tmp_path,
            chunk=chunk,
            datasets=[
                {
                    'dataset': 'muitas',
                    'source_object': 'muitas',
                    'columns': ['id', 'empresa_id', 'valor'],
                    'key': 'id',
                    'scope_column': 'empresa_id',
                    'watch_column': None,
                }
            ],
        )
    )
    row = mapa['datasets'][0]
    escopos = [str(base + n) for n in range(empresas)]
    chaves = {e: chave_contextia(e) for e in escopos}
    monkeypatch.setenv('CONTEXTIA_ORIGEM', banco.url_origem)
    monkeypatch.setenv('CONTEXTIA_URL', filtro.url)
    origem = carregar_origem('generic')
    origem.conectar()

    def carregar():
        lista = [Empresa(e, chave=chaves[e]) for e in escopos]
        leitura = carregar_dataset_todas(mapa, row, origem, lista, teto_linhas=teto)
        return leitura, {e.escopo: e.resultados[0] for e in lista}

    try:
        leitura, resultados = carregar()
        assert leitura.erro is None and leitura.leituras == 1
        assert leitura.linhas == empresas * por_empresa + 7
        assert leitura.sem_chave == {str(base + 99): 7}
        assert all(
            r.ok and r.registros == por_empresa and r.novos == por_empresa
            for r in resultados.values()
        ), resultados
        # Sem o teto, os 12 buffers chegariam juntos a 4 linhas cada (48 retidas):
        # com ele, os maiores saem antes, incompletos, e nenhum lote passa do chunk.
        assert 0 < leitura.maior_retencao <= teto
        assert leitura.lotes_incompletos > 0
        assert '%d de %d lote(s) saíram antes do chunk (teto de 20 linhas' % (
            leitura.lotes_incompletos,
            leitura.lotes,
        ) in linha_da_leitura(leitura, empresas)
        assert 0 < filtro.maior_lote <= chunk
        assert {e: no_servidor(chaves[e])['muitas'] for e in escopos} == {
            e: por_empresa for e in escopos
        }

        # A origem perde 1 linha em 5; uma empresa do meio leva 500 em todo lote.
        banco.executar('DELETE FROM muitas WHERE id % 5 = 0')
        ruim = escopos[5]
        filtro.chave_ruim = chaves[ruim]
        leitura, resultados = carregar()
        assert leitura.erro is None
        assert filtro.recusados >= 1
        falha = resultados.pop(ruim)
        assert not falha.ok and 'complete NÃO enviado, nada removido' in falha.erro
        assert 'HTTP 500' in falha.erro and 'lidas e descartadas' in falha.erro
        # Toda linha dela nesta leitura foi enviada (no lote que falhou) ou contada
        # como descartada -- as que esperavam no buffer inclusive.
        descartadas = int(re.search(r'as outras (\d+) linha\(s\) dela', falha.erro).group(1))
        da_ruim = sum(1 for linha in linhas if linha['e'] == int(ruim) and linha['i'] % 5 != 0)
        assert falha.registros + descartadas == da_ruim, (falha.registros, descartadas, da_ruim)
        assert all(r.ok and r.removidos > 0 for r in resultados.values()), resultados
        # Nela nada saiu; nas outras, na mesma leitura, o apagado saiu.
        assert no_servidor(chaves[ruim])['muitas'] == por_empresa
        restantes = {
            e: sum(1 for linha in linhas if linha['e'] == int(e) and linha['i'] % 5 != 0)
            for e in escopos
            if e != ruim
        }
        assert {e: no_servidor(chaves[e])['muitas'] for e in restantes} == restantes
    finally:
        origem.fechar()


@pytest.mark.parametrize('tipo', ['sqlite', pytest.param('postgres', marks=pytest.mark.postgres)])
def test_linha_que_nao_vira_json_tira_so_a_empresa_dela(
    tipo, fabrica_de_bancos, tmp_path, chave_contextia, monkeypatch
):
    # A carga de todas serializa cada linha ao lê-la: a que não vira JSON (NaN)
    # tira a empresa dela, sem complete, e as outras fecham na mesma leitura.
    from contextia_sync.carga.todas import Empresa, carregar_dataset_todas
    from contextia_sync.mapeamento import carregar_mapeamento
    from contextia_sync.origem import carregar_origem

    banco = fabrica_de_bancos(tipo)
    base = int(uuid.uuid4().int % 9000 + 1000) * 100
    escopos = [str(base + n) for n in range(3)]
    banco.executar(
        'CREATE TABLE poucas (id INTEGER PRIMARY KEY, empresa_id INTEGER,'
        ' valor %s)' % ('REAL' if tipo == 'sqlite' else 'NUMERIC')
    )
    banco.executar(
        'INSERT INTO poucas VALUES (:i, :e, :v)',
        [{'i': g, 'e': base + g % 3, 'v': g} for g in range(60)],
    )
    mapa = carregar_mapeamento(
        erp_teste.mapeamento(
            tmp_path,
            chunk=4,
            datasets=[
                {
                    'dataset': 'poucas',
                    'source_object': 'poucas',
                    'columns': ['id', 'empresa_id', 'valor'],
                    'key': 'id',
                    'scope_column': 'empresa_id',
                    'watch_column': None,
                }
            ],
        )
    )
    chaves = {e: chave_contextia(e) for e in escopos}
    monkeypatch.setenv('CONTEXTIA_ORIGEM', banco.url_origem)
    origem = carregar_origem('generic')
    origem.conectar()

    def carregar(seco=False):
        lista = [Empresa(e, chave=chaves[e]) for e in escopos]
        leitura = carregar_dataset_todas(mapa, mapa['datasets'][0], origem, lista, seco=seco)
        return leitura, {e.escopo: e.resultados[0] for e in lista}

    try:
        assert all(r.ok for r in carregar()[1].values())
        # Na empresa do meio, a linha 31 vira NaN; em todas, as de id % 10 == 0 saem.
        banco.executar(
            'UPDATE poucas SET valor = %s WHERE id = 31'
            % ('9e999' if tipo == 'sqlite' else "'NaN'")
        )
        banco.executar('DELETE FROM poucas WHERE id % 10 = 0')
        # O seco acha a mesma linha, só na empresa dela, e diz qual.
        seco = carregar(seco=True)[1]
        assert [(e, r.ok, r.registros, r.recusadas) for e, r in seco.items()] == [
            (escopos[0], True, 18, 0),
            (escopos[1], False, 18, 1),
            (escopos[2], True, 18, 0),
        ]
        assert 'id=31' in seco[escopos[1]].detalhes[0]
        leitura, resultados = carregar()
        assert leitura.erro is None
        ruim = resultados.pop(escopos[1])
        assert not ruim.ok and 'id=31' in ruim.erro and 'complete NÃO enviado' in ruim.erro
        assert all(r.ok and r.removidos == 2 for r in resultados.values()), resultados
        assert no_servidor(chaves[escopos[1]])['poucas'] == 20
        assert {e: no_servidor(chaves[e])['poucas'] for e in (escopos[0], escopos[2])} == {
            escopos[0]: 18,
            escopos[2]: 18,
        }
    finally:
        origem.fechar()


def test_registro_pronto_recusado_sozinho_diz_a_key_e_a_coluna(fabrica_contextia, monkeypatch):
    # Os lotes da carga de todas levam o JSON de cada linha (preparador_de_prontos):
    # o 413 de um registro sozinho ainda diz qual, e que coluna pesa, como o de dicts.
    servidor = fabrica_contextia(max_bytes_lote=2000)
    monkeypatch.setenv('CONTEXTIA_URL', servidor.url)
    chave = servidor.criar_projeto_com_chave('413-pronto')
    preparar = cliente.preparador_de_prontos(None)
    assert preparar is not None
    prontos = [preparar({'ID': 1, 'CORPO': 'x' * 5000}), preparar({'ID': 2})]
    resultado = cliente.enviar_dataset(
        'anexos',
        prontos,
        key='ID',
        api_key=chave,
        escopo='297',
        sync=cliente.gerar_sync(),
        parte=7,
        prontos=True,
    )
    assert (resultado.inserted, resultado.lotes_erro) == (1, 1)
    [erro] = resultado.erros
    assert 'ID=1' in erro and "'CORPO'" in erro and 'SOZINHO' in erro
    assert [r['ID'] for r in cliente.ler_registros('anexos', chave)] == [2]


def _duas_empresas_sqlite(
    fabrica_de_bancos, tmp_path, linhas, url, chaves, monkeypatch, empresas=2
):
    """
    Uma tabela SQLite com `linhas` linhas das empresas 1 e 2 (intercaladas; com
    `empresas`, de 1 a N, só a 1 e a 2 com chave), chunk 5, lida pela carga de
    todas as empresas contra `url`: (leitura, empresas).
    """
    from contextia_sync.carga import todas
    from contextia_sync.mapeamento import carregar_mapeamento
    from contextia_sync.origem import carregar_origem

    banco = fabrica_de_bancos('sqlite')
    banco.executar('CREATE TABLE duas (id INTEGER PRIMARY KEY, empresa_id INTEGER)')
    banco.executar(
        'INSERT INTO duas VALUES (:i, :e)', [{'i': g, 'e': 1 + g % empresas} for g in range(linhas)]
    )
    mapa = carregar_mapeamento(
        erp_teste.mapeamento(
            tmp_path,
            chunk=5,
            datasets=[
                {
                    'dataset': 'duas',
                    'source_object': 'duas',
                    'columns': ['id', 'empresa_id'],
                    'key': 'id',
                    'scope_column': 'empresa_id',
                    'watch_column': None,
                }
            ],
        )
    )
    monkeypatch.setenv('CONTEXTIA_ORIGEM', banco.url_origem)
    monkeypatch.setenv('CONTEXTIA_URL', url)
    origem = carregar_origem('generic')
    origem.conectar()
    try:
        lista = [todas.Empresa(e, chave=chaves[e]) for e in ('1', '2')]
        return todas.carregar_dataset_todas(mapa, mapa['datasets'][0], origem, lista), lista
    finally:
        origem.fechar()


def test_defeito_fora_da_leitura_nao_e_dito_como_leitura_que_caiu(
    fabrica_de_bancos, tmp_path, chave_contextia, ambiente_contextia, monkeypatch
):
    # A origem leu bem; quebrou a repartição (um defeito do SDK, simulado aqui):
    # nada fecha, e a mensagem não manda o operador investigar o banco.
    from contextia_sync.carga import todas

    def quebrado(self, buffer):
        raise KeyError('defeito simulado')

    monkeypatch.setattr(todas._Reparticao, '_despachar', quebrado)
    chaves = {e: chave_contextia(e) for e in ('1', '2')}
    leitura, lista = _duas_empresas_sqlite(
        fabrica_de_bancos, tmp_path, 20, ambiente_contextia.url, chaves, monkeypatch
    )
    assert leitura.erro and 'defeito simulado' in leitura.erro
    for empresa in lista:
        resultado = empresa.resultados[0]
        assert not resultado.ok and 'defeito do SDK' in resultado.erro
        assert 'caiu' not in resultado.erro and 'nada removido' in resultado.erro


def test_chave_recusada_no_meio_da_leitura_tira_so_a_empresa(
    fabrica_de_bancos, tmp_path, chave_contextia, filtro, monkeypatch
):
    # O Contextia passa a recusar a chave de uma empresa (401) com a leitura em
    # curso: ela fica sem complete e marcada como recusada (os datasets seguintes
    # não a tentam); a outra fecha.
    chaves = {e: chave_contextia(e) for e in ('1', '2')}
    filtro.chave_ruim, filtro.status_ruim = chaves['1'], 401
    leitura, lista = _duas_empresas_sqlite(
        fabrica_de_bancos, tmp_path, 60, filtro.url, chaves, monkeypatch
    )
    assert leitura.erro is None and filtro.recusados >= 1
    recusada, outra = lista
    assert recusada.recusa and not recusada.resultados[0].ok
    assert 'complete NÃO enviado' in recusada.resultados[0].erro
    assert outra.resultados[0].ok and no_servidor(chaves['2'])['duas'] == 30


def test_empresas_sem_chave_demais_sao_contadas_juntas_e_apontam_a_coluna(
    fabrica_de_bancos, tmp_path, fabrica_contextia, monkeypatch
):
    # Uma coluna de escopo com um valor por linha (a coluna errada no mapeamento)
    # não vira um contador por valor: depois de SEM_CHAVE_CONTADAS, contadas juntas.
    # (Um servidor só dele: as empresas 1 e 2 dos outros testes têm outro 'duas'.)
    from contextia_sync.carga import todas

    monkeypatch.setattr(todas, 'SEM_CHAVE_CONTADAS', 3)
    servidor = fabrica_contextia()
    chaves = {e: servidor.criar_projeto_com_chave(e) for e in ('1', '2')}
    leitura, lista = _duas_empresas_sqlite(
        fabrica_de_bancos, tmp_path, 120, servidor.url, chaves, monkeypatch, empresas=12
    )
    assert [(e.escopo, e.resultados[0].ok, e.resultados[0].registros) for e in lista] == [
        ('1', True, 10),
        ('2', True, 10),
    ]
    assert len(leitura.sem_chave) == 3
    # Nenhuma linha sumiu da conta: as das 10 empresas sem chave, 100.
    assert sum(leitura.sem_chave.values()) + leitura.sem_chave_alem == 100
    assert leitura.sem_chave_alem == 70
    assert 'confira-a' in todas.linha_da_leitura(leitura, 2)
