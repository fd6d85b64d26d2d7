"""
A exclusão ao vivo com nada além de SELECT: a estratégia `reconciliacao`, sozinha e
junto com a `coluna` (`coluna+reconciliacao`), com processos de verdade -- o
ouvinte.py, o Contextia local e origens PostgreSQL, MariaDB e SQLite:

  * um DELETE some do Contextia dentro de um intervalo de reconciliacao (com o
    ouvinte de pe), e só ele: nenhuma linha viva sai; a chave que volta volta;
  * a view que de repente volta vazia não remove nada e e dita no status, na
    saúde e nas métricas; quando a view volta, a recusa some;
  * a conexão derrubada no meio da leitura das chaves (pg_terminate_backend,
    KILL no MariaDB, de uma conexão de teste separada) não remove nada;
  * a linha que muda de empresa termina em exatamente uma empresa;
  * texto como `key` numa collation que não é a do Python (ICU no PostgreSQL,
    sem caixa no MariaDB, NOCASE no SQLite) não vira remoção falsa;
  * a empresa nova ganha o conjunto de chaves da carga inicial dela;
  * um Contextia sem `remove` (`--sem-remove`) e recusado com a mensagem que ensina.
"""

import json
import os
import re
import subprocess
import sys
import threading
import time

import pytest

from contextia_sync.estado.status import ler_status_json
from contextia_sync.intake import cliente, transporte
from contextia_sync.provisionamento.chaves import ler_chaves
from tests.apoio.ouvinte import DATASET, RAIZ, Ouvinte, esperar
from tests.dados import erp as erp_teste

pytestmark = pytest.mark.lento

COMBINADA = '--estrategia=coluna+reconciliacao'
BANCOS = [
    'sqlite',
    pytest.param('postgres', marks=pytest.mark.postgres),
    pytest.param('mariadb', marks=pytest.mark.mariadb),
]
SERVIDORES = [
    pytest.param('postgres', marks=pytest.mark.postgres),
    pytest.param('mariadb', marks=pytest.mark.mariadb),
]


def _mapa(o, **troca):
    """O mapeamento do ERP de teste, com o dataset de titulos alterado por `troca`."""
    with open(o.mapa, encoding='utf-8') as arquivo:
        mapa = json.load(arquivo)
    mapa['datasets'][0].update(troca)
    caminho = o.mapa.replace('.json', '-r.json')
    with open(caminho, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo)
    o.mapa = caminho


@pytest.fixture
def novo(tmp_path, fabrica_de_bancos, ambiente_contextia, chave_contextia):
    """novo(tipo) -> um Ouvinte sobre um ERP de teste novo naquele banco."""
    erps = []

    def criar(tipo='sqlite'):
        erps.append(erp_teste.Erp(fabrica_de_bancos(tipo, 'erp')))
        pasta = tmp_path / ('o%d' % len(erps))
        pasta.mkdir()
        return Ouvinte(pasta, erps[-1], ambiente_contextia, chave_contextia)

    yield criar
    for erp in erps:
        erp.fechar()


def once(o, *extra):
    codigo, saida = o.rodar('--once', COMBINADA, '--intervalo-reconciliacao=0', *extra)
    assert codigo == 0, saida
    return saida


def ids(o, escopo):
    return set(o.no_contextia(escopo))


def ids_na_origem(o, escopo):
    return {
        int(linha[0])
        for linha in o.erp.executar(
            'SELECT {ID} FROM {TITULOS} WHERE {EMPRESA_ID} = :e', e=int(escopo)
        )
    }


def status_do_dataset(o, nome=DATASET):
    return [d for d in ler_status_json(o.estado_dir)['datasets'] if d['dataset'] == nome][0]


def saude(o):
    feito = subprocess.run(
        [sys.executable, 'ouvinte.py', '--saude', '--estado=' + o.estado_dir],
        cwd=RAIZ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return feito.returncode, feito.stdout


def metricas(o):
    with open(os.path.join(o.estado_dir, 'ouvinte.prom'), encoding='utf-8') as arquivo:
        return arquivo.read()


def carregar(o):
    """A carga completa pela varredura (`--varrer-agora`): o Contextia igual a origem."""
    saida = once(o, '--varrer-agora')
    for escopo in o.erp.escopos:
        assert ids(o, escopo) == ids_na_origem(o, escopo), saida
    return saida


class Vigia(threading.Thread):
    """
    Confere SEM PARAR que nenhuma linha viva na origem sai do Contextia: uma linha
    que estava no Contextia numa volta e sumiu dele na seguinte, estando na origem
    em todas as leituras dessas duas voltas, foi removida viva.
    """

    def __init__(self, o):
        super().__init__(daemon=True)
        self.o = o
        self.parar = threading.Event()
        self.perdidas = []
        self.voltas = 0

    def run(self):
        anterior = {}
        while not self.parar.is_set():
            for escopo in self.o.erp.escopos:
                antes = ids_na_origem(self.o, escopo)
                no_contextia = ids(self.o, escopo)
                depois = ids_na_origem(self.o, escopo)
                if escopo in anterior:
                    na_origem, estavam = anterior[escopo]
                    vivas = (estavam - no_contextia) & na_origem & antes & depois
                    if vivas:
                        self.perdidas.append((escopo, sorted(vivas)))
                anterior[escopo] = (antes & depois, no_contextia)
            self.voltas += 1


# ---------------------------------------------------------------------------
# DELETE ao vivo
# ---------------------------------------------------------------------------


@pytest.mark.parametrize('tipo', BANCOS)
def test_delete_some_do_contextia_dentro_de_um_intervalo_de_reconciliacao(novo, tipo):
    o = novo(tipo)
    e0, e1 = o.erp.escopos
    carregar(o)
    intervalo = 4
    processo = o.iniciar(COMBINADA, '--intervalo-reconciliacao=%d' % intervalo)
    vigia = Vigia(o)
    try:
        # De pe: uma reconciliacao deste processo ja terminou.
        esperar(
            lambda: (
                (status_do_dataset(o).get('reconciliacao') or {}).get('ultima_em')
                and ler_status_json(o.estado_dir)['ouvinte']['pid'] == processo.pid
            ),
            90,
        )
        vigia.start()
        apagar = sorted(ids_na_origem(o, e0))[:2] + sorted(ids_na_origem(o, e1))[:1]
        o.erp.executar(
            'DELETE FROM {TITULOS} WHERE {ID} IN (%s)' % ','.join(str(i) for i in apagar)
        )
        o.erp.executar("DELETE FROM {STATUS} WHERE {COD} = 'C'")
        inicio = time.monotonic()
        esperar(lambda: not (set(apagar) & (ids(o, e0) | ids(o, e1))), 120)
        levou = time.monotonic() - inicio
        # Um intervalo, mais o ciclo (a maquina dos testes e dividida: a folga e larga).
        assert levou < intervalo + 30, levou
        assert ids(o, e0) == ids_na_origem(o, e0) and ids(o, e1) == ids_na_origem(o, e1)
        # O dataset sem recorte (STATUS, so com `key`): sai de toda empresa.
        esperar(
            lambda: all(
                'C' not in {r['COD'] for r in cliente.ler_registros('status', o.chaves[e])}
                for e in (e0, e1)
            ),
            60,
        )
        # A chave removida que reaparece e enviada de novo, logo.
        volta = apagar[0]
        o.erp.executar(
            "INSERT INTO {TITULOS} VALUES (:i, :e, 'De volta', '1.00',"
            " '2026-10-01', '2026-09-01 10:00:00')",
            i=volta,
            e=int(e0),
        )
        esperar(lambda: volta in ids(o, e0), intervalo + 60)
        vigia.parar.set()
        vigia.join(60)
        assert vigia.voltas > 3 and vigia.perdidas == [], vigia.perdidas
        rec = status_do_dataset(o)['reconciliacao']
        assert rec['ativa'] and rec['removidas_total'] >= 3 and rec['recusa'] is None, rec
        assert status_do_dataset(o)['captura'] == 'coluna+reconciliacao'
        assert re.search(
            r'ouvinte_dataset_chaves_removidas_total\{dataset="%s"\} [3-9]' % DATASET, metricas(o)
        ), metricas(o)
    finally:
        vigia.parar.set()
        processo.terminate()
        assert processo.wait(60) == 0, o.saida()
    assert 'RECUSADA' not in o.saida()


# ---------------------------------------------------------------------------
# a view que volta vazia
# ---------------------------------------------------------------------------


def _trocar_view(erp, condicao):
    if erp.banco.tipo == 'sqlite':
        erp.executar('DROP VIEW IF EXISTS {V_TITULOS}')
        erp.executar('CREATE VIEW {V_TITULOS} AS SELECT * FROM {TITULOS} WHERE %s' % condicao)
    else:
        erp.executar(
            'CREATE OR REPLACE VIEW {V_TITULOS} AS SELECT * FROM {TITULOS} WHERE %s' % condicao
        )


@pytest.mark.parametrize('tipo', BANCOS)
def test_view_que_volta_vazia_nao_remove_nada_e_e_dita_alto(novo, tipo):
    o = novo(tipo)
    e0, e1 = o.erp.escopos
    _trocar_view(o.erp, '1 = 1')
    _mapa(o, source_object='V_TITULOS')
    carregar(o)
    antes = {e: ids(o, e) for e in (e0, e1)}
    # GRANT revogado, filtro trocado: a view devolve nada (ou uma fracao).
    _trocar_view(o.erp, '1 = 0')
    saida = once(o)
    assert {e: ids(o, e) for e in (e0, e1)} == antes
    assert 'RECUSADA' in saida and 'acima do teto de 50%' in saida, saida
    rec = status_do_dataset(o)['reconciliacao']
    assert rec['recusa'] and 'NADA removido' in rec['recusa'] and rec['recusa_desde'], rec
    codigo, linha = saude(o)
    assert codigo == 1 and 'RECUSADA pelo teto' in linha, linha
    assert 'ouvinte_dataset_reconciliacao_recusada{dataset="%s"} 1' % DATASET in metricas(o)
    with open(os.path.join(o.estado_dir, 'ouvinte-status.txt'), encoding='utf-8') as arquivo:
        assert 'RECUSADA desde' in arquivo.read()
    # Uma fracao so (a empresa e0 some inteira, e1 fica): e0 recusada, e1 nao.
    _trocar_view(o.erp, '{EMPRESA_ID} = %d' % int(e1))
    saida = once(o)
    assert {e: ids(o, e) for e in (e0, e1)} == antes, saida
    assert 'empresa %s' % e0 in status_do_dataset(o)['reconciliacao']['recusa']
    # A view volta: a recusa acaba, nada saiu.
    _trocar_view(o.erp, '1 = 1')
    once(o)
    assert status_do_dataset(o)['reconciliacao']['recusa'] is None
    assert {e: ids(o, e) for e in (e0, e1)} == antes
    assert 'ouvinte_dataset_reconciliacao_recusada{dataset="%s"} 0' % DATASET in metricas(o)


# ---------------------------------------------------------------------------
# a conexao derrubada no meio da leitura
# ---------------------------------------------------------------------------


def _view_lenta(erp):
    """Uma view que demora ~50 ms por linha: a leitura das chaves leva segundos."""
    if erp.banco.tipo == 'postgres':
        erp.executar(
            'CREATE VIEW {V_TITULOS} AS SELECT t.* FROM {TITULOS} t CROSS JOIN'
            ' LATERAL (SELECT pg_sleep(0.05) WHERE t.{ID} IS NOT NULL) AS devagar'
        )
    else:
        erp.executar('CREATE VIEW {V_TITULOS} AS SELECT * FROM {TITULOS} WHERE SLEEP(0.05) = 0')


def _derrubar_leitura_das_chaves(erp, marco):
    """
    Derruba, de uma conexão de teste separada, a conexão do ouvinte que está no meio
    da leitura do conjunto de chaves -- a consulta longa (mais de meio segundo) sobre a
    view lenta, numa transação que começou depois de `marco` (ela vê o DELETE).
    """
    if erp.banco.tipo == 'postgres':
        linhas = erp.banco.executar(
            'SELECT pid FROM pg_stat_activity WHERE datname = current_database()'
            " AND state = 'active' AND pid <> pg_backend_pid() AND xact_start > :t"
            " AND now() - query_start > interval '0.5 seconds'",
            {'t': marco},
        )
        for (pid,) in linhas:
            erp.banco.executar('SELECT pg_terminate_backend(:p)', {'p': pid})
        return len(linhas)
    desde = (time.monotonic() - marco) * 1000
    linhas = erp.banco.executar(
        'SELECT id FROM information_schema.processlist WHERE db = DATABASE()'
        " AND info LIKE '%ORDER BY%' AND id <> CONNECTION_ID()"
        ' AND time_ms > 500 AND time_ms < :ms',
        {'ms': desde},
    )
    for (ident,) in linhas:
        erp.banco.executar('KILL %d' % int(ident))
    return len(linhas)


def _marco(erp):
    """O instante do DELETE, no relógio de quem compara (o banco, ou o monotonico)."""
    if erp.banco.tipo == 'postgres':
        return erp.banco.executar('SELECT clock_timestamp()')[0][0]
    return time.monotonic()


@pytest.mark.parametrize('tipo', SERVIDORES)
def test_conexao_derrubada_no_meio_da_leitura_nao_remove_nada(novo, tipo):
    o = novo(tipo)
    e0 = o.erp.escopos[0]
    _view_lenta(o.erp)
    _mapa(o, source_object='V_TITULOS')
    # So a reconciliacao: o conjunto nasce da primeira leitura, e o que entra depois
    # ela mesma envia.
    codigo, saida = o.rodar('--once', '--estrategia=reconciliacao', '--intervalo-reconciliacao=0')
    assert codigo == 0, saida
    novas = [o.inserir(e0, '2026-09-01 11:00:00') for _ in range(3)]
    codigo, saida = o.rodar('--once', '--estrategia=reconciliacao', '--intervalo-reconciliacao=0')
    assert codigo == 0 and set(novas) <= ids(o, e0), saida

    processo = o.iniciar('--estrategia=reconciliacao', '--intervalo-reconciliacao=1')
    try:
        esperar(lambda: ler_status_json(o.estado_dir)['ouvinte']['pid'] == processo.pid, 60)
        marco = _marco(o.erp)
        o.erp.executar('DELETE FROM {TITULOS} WHERE {ID} IN (%s)' % ','.join(str(i) for i in novas))
        # A primeira leitura das chaves que comecou depois do DELETE e derrubada no meio.
        esperar(lambda: _derrubar_leitura_das_chaves(o.erp, marco), 60, passo=0.02)
        rec = esperar(
            lambda: (lambda r: r if r.get('falhas_seguidas') else None)(
                status_do_dataset(o)['reconciliacao']
            ),
            60,
        )
        assert 'ErroOrigem' in rec['ultimo_erro'], rec
        # Nada removido pela leitura que caiu.
        assert set(novas) <= ids(o, e0)
        # A proxima leitura, inteira, remove.
        esperar(lambda: not set(novas) & ids(o, e0), 120)
        assert ids(o, e0) == set()  # so as tres novas tinham ido ao Contextia
    finally:
        processo.terminate()
        assert processo.wait(60) == 0, o.saida()
    assert 'NADA removido' in o.saida(), o.saida()


# ---------------------------------------------------------------------------
# a linha que muda de empresa
# ---------------------------------------------------------------------------


@pytest.mark.parametrize('tipo', BANCOS)
def test_linha_que_muda_de_empresa_termina_em_exatamente_uma(novo, tipo):
    o = novo(tipo)
    e0, e1 = o.erp.escopos
    carregar(o)
    quieta, carimbada = sorted(ids_na_origem(o, e0))[:2]
    # Uma muda de empresa SEM mexer no carimbo (so a reconciliacao a ve); a outra com
    # o carimbo (a coluna a leva a nova, a reconciliacao a tira da antiga).
    o.erp.executar('UPDATE {TITULOS} SET {EMPRESA_ID} = :e WHERE {ID} = :i', e=int(e1), i=quieta)
    o.erp.executar(
        'UPDATE {TITULOS} SET {EMPRESA_ID} = :e, {ALTERADO_EM} ='
        " '2026-09-01 11:30:00' WHERE {ID} = :i",
        e=int(e1),
        i=carimbada,
    )
    once(o)
    for linha in (quieta, carimbada):
        onde = [e for e in (e0, e1) if linha in ids(o, e)]
        assert onde == [e1], (linha, onde)
    assert ids(o, e0) == ids_na_origem(o, e0) and ids(o, e1) == ids_na_origem(o, e1)
    # E volta: a linha volta a e0, sai de e1.
    o.erp.executar('UPDATE {TITULOS} SET {EMPRESA_ID} = :e WHERE {ID} = :i', e=int(e0), i=quieta)
    once(o)
    assert [e for e in (e0, e1) if quieta in ids(o, e)] == [e0]


# ---------------------------------------------------------------------------
# a ordem: texto como key numa collation que nao e a do Python
# ---------------------------------------------------------------------------

# Distintos na collation de cada banco (a PRIMARY KEY recusaria os iguais): o ICU
# do PostgreSQL distingue tudo; o NOCASE do SQLite iguala so caixa ASCII; o
# utf8mb4_general_ci do MariaDB iguala caixa, acento e espaco no fim.
CODIGOS = {
    'postgres': ['a', 'B', 'b', 'A', 'á', 'Z', 'z ', 'z', 'ç', 'C', '10', '9', 'Ab', 'aB'],
    'sqlite': ['a', 'B', 'Z', 'ç', 'c', '10', '9', 'Ab', 'z ', 'á', 'Ç'],
    'mariadb': ['a', 'B', 'Z', 'ç', '10', '9', 'Ab'],
}


@pytest.mark.parametrize('tipo', BANCOS)
def test_texto_em_collation_que_nao_e_a_do_python_nao_vira_remocao_falsa(novo, tipo):
    o = novo(tipo)
    e0 = o.erp.escopos[0]
    colacao = {
        'postgres': ' COLLATE "pt-BR-x-icu"',
        'mariadb': ' COLLATE utf8mb4_general_ci',
        'sqlite': ' COLLATE NOCASE',
    }[tipo]
    o.erp.executar(
        'CREATE TABLE {CODIGOS} ({COD} VARCHAR(10)%s PRIMARY KEY,'
        ' {EMPRESA_ID} INTEGER, {NOME} VARCHAR(30))' % colacao
    )
    codigos = CODIGOS[tipo]
    o.erp.executar(
        'INSERT INTO {CODIGOS} VALUES (:c, :e, :n)',
        lote=[{'c': c, 'e': int(e0), 'n': 'código %s' % c} for c in codigos],
    )
    with open(o.mapa, encoding='utf-8') as arquivo:
        mapa = json.load(arquivo)
    mapa['datasets'].append(
        {
            'dataset': 'Codigos',
            'source_object': 'CODIGOS',
            'columns': ['COD', 'EMPRESA_ID', 'NOME'],
            'key': 'COD',
            'watch_column': None,
        }
    )
    with open(o.mapa, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo)

    def no_contextia():
        try:
            return {r['COD'] for r in cliente.ler_registros('codigos', o.chaves[e0])}
        except transporte.ErroContextia:
            return set()

    carregar(o)
    assert no_contextia() == set(codigos)
    for _ in range(2):
        saida = once(o)
        assert no_contextia() == set(codigos), saida
        assert 'fora de ordem' not in saida and 'RECUSADA' not in saida, saida
    o.erp.executar('DELETE FROM {CODIGOS} WHERE {COD} = :c', c='B')
    once(o)
    assert no_contextia() == set(codigos) - {'B'}


# ---------------------------------------------------------------------------
# empresa nova: o conjunto nasce da carga inicial dela
# ---------------------------------------------------------------------------


def test_empresa_nova_ganha_o_conjunto_da_carga_inicial(novo):
    o = novo('sqlite')
    carregar(o)
    nova = str(int(o.erp.escopos[1]) + 10)
    o.erp.executar("INSERT INTO {EMPRESAS} VALUES (:e, 'Loja Nova', NULL, 'S')", e=int(nova))
    base = int(nova) * 1000
    o.erp.executar(
        'INSERT INTO {TITULOS} VALUES (:i, :e, :c, :v, :d, :a)',
        lote=[
            {
                'i': base + n,
                'e': int(nova),
                'c': 'Cliente %d' % n,
                'v': '1.00',
                'd': '2026-09-01',
                'a': '2026-09-01 10:00:00',
            }
            for n in range(5)
        ],
    )
    saida = once(o)
    assert 'carga inicial %s' % nova in saida, saida
    assert 'lido antes da carga completa' in saida, saida
    # Nunca o conjunto "inicial" da leitura de agora: ele nasceu da carga.
    assert 'conjunto inicial de %s' % nova not in saida, saida
    chave = ler_chaves(o.arquivo_chaves)[nova]
    lidos = {int(r['ID']) for r in cliente.ler_registros(DATASET, chave)}
    assert lidos == {base + n for n in range(5)}
    o.erp.executar('DELETE FROM {TITULOS} WHERE {ID} = :i', i=base + 4)
    once(o)
    assert {int(r['ID']) for r in cliente.ler_registros(DATASET, chave)} == {
        base + n for n in range(4)
    }


@pytest.mark.parametrize('tipo', BANCOS[:2])
def test_linha_entregue_pela_coluna_e_apagada_antes_da_reconciliacao_sai_nela(novo, tipo):
    """
    A chave que a `coluna` entregou DEPOIS da última leitura do conjunto e que foi
    apagada ANTES da seguinte: o conjunto guardado não a tem, e só o diário da
    coluna (conjuntos.anotar_diario) a põe na comparação. Sem ele, ela ficaria no
    Contextia até a varredura.
    """
    o = novo(tipo)
    e0 = o.erp.escopos[0]
    carregar(o)
    nova = max(ids_na_origem(o, e0)) + 1000
    agora = time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(time.time() - 2))
    o.erp.executar(
        "INSERT INTO {TITULOS} VALUES (:i, :e, 'Entre duas leituras', '1.00', '2026-10-01', :a)",
        i=nova,
        e=int(e0),
        a=agora,
    )
    # So a coluna: a reconciliacao nao venceu (uma hora de intervalo).
    codigo, saida = o.rodar('--once', COMBINADA, '--intervalo-reconciliacao=3600')
    assert codigo == 0, saida
    assert 'reconciliação:' not in saida, saida
    assert nova in ids(o, e0), saida
    diario = os.path.join(o.estado_dir, 'conjuntos', DATASET, 'e-%s.chaves.diario' % e0)
    assert os.path.exists(diario), os.listdir(os.path.dirname(diario))
    o.erp.executar('DELETE FROM {TITULOS} WHERE {ID} = :i', i=nova)
    saida = once(o)
    assert nova not in ids(o, e0), saida
    assert ids(o, e0) == ids_na_origem(o, e0), saida
    # O conjunto somou o diario (e ja sem a removida); o diario saiu.
    assert not os.path.exists(diario) and not os.path.exists(diario + '.dobrando')
    # Nada de novo: a proxima reconciliacao nao remove nem reenvia nada.
    saida = once(o)
    assert 'a remover' not in saida, saida


@pytest.mark.parametrize('tipo', BANCOS[:2])
def test_dataset_entregue_a_varredura_segue_com_a_exclusao_ao_vivo(novo, tipo):
    """
    Uma alteração em massa acima do --maximo-por-ciclo entrega o dataset à varredura
    (a marca da coluna para até ela), mas a reconciliação segue nele: o DELETE e a
    linha nova chegam ao vivo, a alteração em massa não, e o dataset continua
    entregue até a varredura. Antes, a leitura da reconciliação era descartada, e
    a exclusão esperava a varredura do dia (achado da tortura).
    """
    o = novo(tipo)
    e0 = o.erp.escopos[0]
    carregar(o)
    antes = sorted(ids_na_origem(o, e0))
    apagada, nova = antes[0], antes[-1] + 1000
    agora = time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(time.time() - 2))
    o.erp.executar(
        "UPDATE {TITULOS} SET {CLIENTE} = 'Em massa', {ALTERADO_EM} = :a"
        ' WHERE {EMPRESA_ID} = :e AND {ID} <> :i',
        a=agora,
        e=int(e0),
        i=apagada,
    )
    o.erp.executar('DELETE FROM {TITULOS} WHERE {ID} = :i', i=apagada)
    o.erp.executar(
        "INSERT INTO {TITULOS} VALUES (:i, :e, 'Nova', '1.00', '2026-10-01', NULL)",
        i=nova,
        e=int(e0),
    )
    for volta in range(2):
        saida = once(o, '--maximo-por-ciclo=5')
        assert 'entregue a VARREDURA' in saida, saida
        assert 'entregues a varredura: %s' % DATASET in o.status(), o.status()
        no_contextia = o.no_contextia(e0)
        assert apagada not in no_contextia and nova in no_contextia, saida
        assert set(no_contextia) == set(ids_na_origem(o, e0)), saida
        # A alteração em massa é da varredura: nenhuma chegou pelo ao-vivo.
        assert not [r for r in no_contextia.values() if r['CLIENTE'] == 'Em massa'], saida
        if volta == 0:
            assert 'a reconciliação segue ao vivo (2 chave(s) agora)' in saida, saida
        else:
            assert 'a remover' not in saida and 'a reconciliação segue' not in saida, saida
    rec = status_do_dataset(o)['reconciliacao']
    assert rec['removidas_total'] >= 1 and rec['recusa'] is None, rec
    # A varredura leva a alteração e solta o dataset.
    carregar(o)
    assert 'entregues a varredura' not in o.status()
    assert {r['CLIENTE'] for i, r in o.no_contextia(e0).items() if i != nova} == {'Em massa'}


@pytest.mark.parametrize('tipo', BANCOS[:2])
def test_linha_de_envio_que_falhou_noutra_empresa_e_apagada_depois_sai_na_reconciliacao(novo, tipo):
    """
    O envio chega à empresa A e falha na B: o ciclo não se confirma (a marca fica, e
    nada entra no conjunto nem no diário), mas a linha de A JÁ está no Contextia.
    Apagada na origem antes do ciclo seguinte, a coluna não a relê, e nenhuma
    comparação a veria: ficava até a varredura (achado da tortura, com o 200 sem
    JSON injetado numa empresa). As chaves do envio são anotadas antes dele
    (`.tentadas-*`), e a reconciliação seguinte confere cada uma na origem.
    """
    o = novo(tipo)
    e0, e1 = o.erp.escopos
    carregar(o)
    agora = time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(time.time() - 2))
    nova_a, nova_b = max(ids_na_origem(o, e0)) + 1000, max(ids_na_origem(o, e1)) + 1000
    for ident, escopo in ((nova_a, e0), (nova_b, e1)):
        o.erp.executar(
            "INSERT INTO {TITULOS} VALUES (:i, :e, 'Envio torto', '1.00', '2026-10-01', :a)",
            i=ident,
            e=int(escopo),
            a=agora,
        )
    with open(o.arquivo_chaves, 'w') as arquivo:
        arquivo.write(
            '%s\t%s\n%s\tctx_chave_que_o_contextia_nao_conhece\n' % (e0, o.chaves[e0], e1)
        )
    codigo, saida = o.rodar('--once', COMBINADA, '--intervalo-reconciliacao=0')
    assert nova_a in ids(o, e0) and nova_b not in ids(o, e1), saida
    assert 'marca de água NÃO avançou' in saida, saida
    pasta = os.path.join(o.estado_dir, 'conjuntos', DATASET)
    assert [n for n in os.listdir(pasta) if '.tentadas-' in n], os.listdir(pasta)

    o.erp.executar('DELETE FROM {TITULOS} WHERE {ID} = :i', i=nova_a)
    with open(o.arquivo_chaves, 'w') as arquivo:
        arquivo.writelines('%s\t%s\n' % item for item in o.chaves.items())
    saida = once(o)
    assert (
        'tentadas (de um envio não confirmado, ou que entraram durante uma carga) já'
        ' não estão na origem' in saida
    ), saida
    assert nova_a not in ids(o, e0) and nova_b in ids(o, e1), saida
    assert ids(o, e0) == ids_na_origem(o, e0) and ids(o, e1) == ids_na_origem(o, e1)
    # Conferidas e entregues: nenhum arquivo de chaves tentadas sobra.
    assert not [n for n in os.listdir(pasta) if '.tentadas-' in n], os.listdir(pasta)
    saida = once(o)
    assert 'a remover' not in saida, saida


@pytest.mark.parametrize('tipo', BANCOS[:2])
def test_linha_que_entrou_durante_a_carga_e_saiu_depois_sai_na_reconciliacao(novo, tipo, tmp_path):
    """
    O conjunto de uma empresa nasce do lido ANTES da carga completa; a linha que
    entrou entre essa leitura e a da carga foi levada por ela, e está no Contextia
    fora do conjunto. Apagada antes da reconciliação seguinte, nenhuma comparação a
    veria (achado da tortura: a empresa nova, carregada no meio da carga de
    linhas). `depois_da_carga` relê a origem e anota o que entrou como chave
    tentada. Aqui a captura roda no processo, sobre a origem de verdade: o INSERT
    entre o `antes_da_carga` e o `depois_da_carga` é a linha que a carga levou.
    """
    from contextia_sync.captura import DatasetVivo, Situacao
    from contextia_sync.captura.reconciliacao import CapturaReconciliacao, OpcoesReconciliacao
    from contextia_sync.estado.estado import Estado
    from contextia_sync.origem import generico

    o = novo(tipo)
    e0 = o.erp.escopos[0]
    with open(o.mapa, encoding='utf-8') as arquivo:
        row = json.load(arquivo)['datasets'][0]
    alvo = DatasetVivo(
        nome=DATASET, row=row, watch=None, chave='ID', escopo='EMPRESA_ID', reconcilia=True
    )
    generico.conectar(o.erp.url)
    try:
        captura = CapturaReconciliacao(
            generico,
            Estado(str(tmp_path / 'estado.json')),
            0,
            1000,
            OpcoesReconciliacao(
                pasta=str(tmp_path / 'conjuntos'), intervalo=0, escopos=lambda: o.erp.escopos
            ),
        )
        antes = captura.antes_da_carga(alvo, e0)
        entrou = max(ids_na_origem(o, e0)) + 1000
        o.erp.executar(
            "INSERT INTO {TITULOS} VALUES (:i, :e, 'Durante a carga', '1.00', '2026-10-01', NULL)",
            i=entrou,
            e=int(e0),
        )
        captura.depois_da_carga(alvo, antes, {e0})
        o.erp.executar('DELETE FROM {TITULOS} WHERE {ID} = :i', i=entrou)
        leitura = captura.ler(alvo)
        assert leitura.situacao is Situacao.MUDANCAS, leitura
        assert leitura.remocoes_por_escopo == {e0: [entrou]} and not leitura.upserts, leitura
        captura.confirmar(alvo, leitura)
        # Conferida e removida: nada mais a ver nela.
        assert captura.ler(alvo).situacao is Situacao.NADA
        assert not [
            n for n in os.listdir(str(tmp_path / 'conjuntos' / DATASET)) if '.tentadas-' in n
        ]
    finally:
        generico.fechar()


def test_diario_que_nao_grava_aparece_na_reconciliacao_do_dataset(novo):
    """O diário que falha (disco cheio, permissão) não passa calado: status e saúde."""
    o = novo('sqlite')
    e0 = o.erp.escopos[0]
    carregar(o)
    diario = os.path.join(o.estado_dir, 'conjuntos', DATASET, 'e-%s.chaves.diario' % e0)
    os.makedirs(diario)  # uma pasta no lugar: o append falha
    agora = time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(time.time() - 2))
    nova = max(ids_na_origem(o, e0)) + 1000
    o.erp.executar(
        "INSERT INTO {TITULOS} VALUES (:i, :e, 'Sem diario', '1.00', '2026-10-01', :a)",
        i=nova,
        e=int(e0),
        a=agora,
    )
    codigo, saida = o.rodar('--once', COMBINADA, '--intervalo-reconciliacao=3600')
    assert codigo == 0 and nova in ids(o, e0), saida
    rec = status_do_dataset(o)['reconciliacao']
    assert 'diário' in (rec['ultimo_erro'] or '') and rec['falhas_seguidas'] >= 1, rec
    assert 'diário de %s não foi gravado' % e0 in saida, saida
    assert saude(o)[0] >= 1


# ---------------------------------------------------------------------------
# as recusas que ensinam
# ---------------------------------------------------------------------------


def test_contextia_sem_remove_e_recusado_com_a_mensagem_que_ensina(
    tmp_path, fabrica_de_bancos, fabrica_contextia, chave_contextia
):
    sem_remove = fabrica_contextia(remove=False)
    erp = erp_teste.Erp(fabrica_de_bancos('sqlite', 'erp'))
    o = Ouvinte(tmp_path, erp, sem_remove, chave_contextia)
    try:
        for estrategia in ('coluna+reconciliacao', 'reconciliacao'):
            codigo, saida = o.rodar('--once', '--estrategia=' + estrategia)
            assert codigo == 2, saida
            assert 'capacidades.remove = false' in saida, saida
            assert 'O que fazer: use --estrategia=coluna' in saida, saida
            assert 'Traceback' not in saida
        # A `coluna` sozinha sobe no mesmo Contextia.
        codigo, saida = o.rodar('--once', '--estrategia=coluna')
        assert codigo == 0, saida
    finally:
        erp.fechar()


def test_dataset_sem_key_fica_so_na_coluna_com_o_porque(novo):
    o = novo('sqlite')
    with open(o.mapa, encoding='utf-8') as arquivo:
        mapa = json.load(arquivo)
    mapa['datasets'][0]['key'] = None
    with open(o.mapa, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo)
    saida = once(o)
    assert 'dataset %s sem `key`: a reconciliação compara' % DATASET in saida, saida
    d = status_do_dataset(o)
    assert d['captura'] == 'coluna' and d['reconciliacao'] == {
        'ativa': False,
        'motivo': 'sem key: a exclusão só sai na varredura',
    }
    # So a reconciliacao: sem key e sem o que acompanhar, o dataset fica fora, com o porque.
    codigo, saida = o.rodar('--once', '--estrategia=reconciliacao')
    assert codigo == 0, saida
    fora = status_do_dataset(o)
    assert fora['ao_vivo'] is False and 'sem key' in fora['motivo'], fora
