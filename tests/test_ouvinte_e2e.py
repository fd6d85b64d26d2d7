"""
O ouvinte.py de verdade (processo) contra o Contextia local num processo real e
origens SQLite e PostgreSQL de verdade, com provisionar.py, connector.py e
carregar-todas.sh de verdade.
"""

import json
import os
import re
import signal

import pytest

from contextia_sync.intake import cliente
from tests.apoio.ouvinte import (
    DATASET,
    Ouvinte,
    BANCOS_DO_ERP,
    erp_no_banco,
    erp_postgres_ou_pula,
    esperar as _esperar,
)
from tests.dados import erp as erp_teste

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
pytestmark = pytest.mark.lento


@pytest.fixture(params=BANCOS_DO_ERP)
def erp(request, tmp_path):
    yield from erp_no_banco(request.param, tmp_path)


@pytest.fixture
def erp_sqlite(tmp_path):
    banco = erp_teste.erp_sqlite(tmp_path)
    yield banco
    banco.fechar()


@pytest.fixture
def erp_pg():
    banco, derrubar = erp_postgres_ou_pula()
    yield banco
    derrubar()


@pytest.fixture
def ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia):
    return Ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia)


@pytest.fixture
def ouvinte_sqlite(tmp_path, erp_sqlite, ambiente_contextia, chave_contextia):
    return Ouvinte(tmp_path, erp_sqlite, ambiente_contextia, chave_contextia)


# ---------------------------------------------------------------------------


def test_inclusao_e_alteracao_chegam_num_once(ouvinte):
    e0 = ouvinte.erp.escopos[0]
    codigo, saida = ouvinte.rodar('--once')
    assert codigo == 0, saida
    # Primeira vez: so a marca, nada enviado.
    assert 'marca inicial' in saida
    assert ouvinte.estado()['marca_agua'][DATASET].startswith('2026-09-01T10:44')
    assert ouvinte.no_contextia(e0) == {}
    # O dataset sem coluna de mudanca aparece como fora do ao-vivo.
    assert 'datasets ao vivo .: 1 de 2' in saida
    assert re.search(r'fora do ao-vivo: Status\s+watch_column: null', saida)
    assert re.search(r'status\s+fora do ao-vivo: watch_column: null', ouvinte.status())

    novo = ouvinte.inserir(e0, '2026-09-01 11:00:00', '77.70')
    alterado = ouvinte.erp.base * 1000 + 1
    ouvinte.erp.executar(
        'UPDATE {TITULOS} SET {VALOR} = 999.99, {ALTERADO_EM} = :a WHERE {ID} = :i',
        a='2026-09-01 11:00:05',
        i=alterado,
    )
    codigo, saida = ouvinte.rodar('--once')
    assert codigo == 0, saida
    registros = ouvinte.no_contextia(e0)
    # Mais as linhas da janela da folga (relidas de proposito; upsert = iguais).
    assert {novo, alterado} <= set(registros)
    assert float(registros[alterado]['VALOR']) == 999.99
    assert ouvinte.estado()['marca_agua'][DATASET] == '2026-09-01T11:00:05'
    status = ouvinte.status()
    linha = [x for x in status.splitlines() if x.startswith(DATASET)][0]
    assert '2026-09-01T11:00:05' in linha
    # Nada foi removido: o incremental nunca manda complete.
    assert 'complete' not in saida.lower() or 'sem ciclo' in saida.lower()


@pytest.mark.postgres
def test_transacao_longa_com_valor_antigo_e_pega_pela_folga(
    erp_pg, ambiente_contextia, chave_contextia, tmp_path
):
    import psycopg

    ouvinte = Ouvinte(tmp_path, erp_pg, ambiente_contextia, chave_contextia)
    e0 = erp_pg.escopos[0]
    assert ouvinte.rodar('--once')[0] == 0
    dsn = erp_pg.url.replace('postgresql+psycopg://', 'postgresql://')
    longa = psycopg.connect(dsn)  # transacao A: abre antes, comita depois
    curta = psycopg.connect(dsn, autocommit=True)
    try:
        a = ouvinte.proximo_id = ouvinte.proximo_id + 1
        longa.execute(
            'INSERT INTO "TITULOS" VALUES (%s, %s, %s, 1, %s, %s)',
            (a, int(e0), 'longa', '2026-10-01', '2026-09-01 11:00:00'),
        )
        # C: tambem abre antes, e comita com valor 100s atras -- alem da folga.
        c = a + 1
        longa.execute(
            'INSERT INTO "TITULOS" VALUES (%s, %s, %s, 1, %s, %s)',
            (c, int(e0), 'longa demais', '2026-10-01', '2026-09-01 10:59:00'),
        )
        b = c + 1
        curta.execute(
            'INSERT INTO "TITULOS" VALUES (%s, %s, %s, 1, %s, %s)',
            (b, int(e0), 'curta', '2026-10-01', '2026-09-01 11:00:40'),
        )
        codigo, saida = ouvinte.rodar('--once', '--folga=60')
        assert codigo == 0, saida
        chegou = set(ouvinte.no_contextia(e0))
        assert b in chegou and a not in chegou and c not in chegou
        assert ouvinte.estado()['marca_agua'][DATASET] == '2026-09-01T11:00:40'
        longa.commit()  # so agora A e C existem para os outros
    finally:
        longa.close()
        curta.close()
    codigo, saida = ouvinte.rodar('--once', '--folga=60')
    assert codigo == 0, saida
    # A (40s atras da marca, folga 60s) foi pega; C (100s atras) nao -- a folga
    # e exatamente o que separa uma da outra, e C fica para a varredura.
    chegou = set(ouvinte.no_contextia(e0))
    assert a in chegou and b in chegou and c not in chegou
    assert '1 CHEGADA(S) ATRASADA(S)' in saida and 'maior atraso 40s' in saida
    assert 'passou da METADE da folga' in saida  # 40 > 60/2
    acomp = ouvinte.estado()['acompanhamento'][DATASET]
    assert acomp['atrasadas_total'] == 1 and acomp['maior_atraso_s'] == 40.0
    assert 'ATENÇÃO FOLGA' in ouvinte.status()
    # Ciclo seguinte rele A e B (folga) e nao conta de novo.
    codigo, saida = ouvinte.rodar('--once', '--folga=60')
    assert (
        'ATRASADA' not in saida
        and ouvinte.estado()['acompanhamento'][DATASET]['atrasadas_total'] == 1
    )


def test_intake_500_mantem_a_marca_e_o_proximo_ciclo_entrega(ouvinte_sqlite):
    o = ouvinte_sqlite
    e0 = o.erp.escopos[0]
    assert o.rodar('--once')[0] == 0
    marca = o.estado()['marca_agua'][DATASET]
    novo = o.inserir(e0, '2026-09-01 11:00:00')
    o.contextia.taxa_de_falhas({'500': 1.0})
    try:
        codigo, saida = o.rodar('--once')
    finally:
        o.contextia.limpar_falhas()
    assert codigo == 1, saida
    assert 'marca de água NÃO avançou' in saida
    assert o.estado()['marca_agua'][DATASET] == marca
    assert 'HTTP 500' in o.estado()['acompanhamento'][DATASET]['ultimo_erro']
    assert 'HTTP 500' in o.status()
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    assert novo in o.no_contextia(e0)
    assert o.estado()['marca_agua'][DATASET] == '2026-09-01T11:00:00'
    assert 'ultimo_erro' not in o.estado()['acompanhamento'][DATASET]


def test_kill_9_no_meio_do_ciclo_e_reinicio_sem_perda(ouvinte_sqlite):
    o = ouvinte_sqlite
    e0, e1 = o.erp.escopos
    assert o.rodar('--once')[0] == 0
    novos = [o.inserir(e0 if n % 2 else e1, '2026-09-01 11:%02d:00' % n) for n in range(30)]
    o.contextia.injetar('atraso', quantidade=50, segundos=1)
    processo = o.iniciar()
    try:
        # Um lote ja chegou ao servidor e esta sendo segurado: meio do ciclo.
        _esperar(lambda: o.contextia.falhas_injetadas()['atraso'] >= 2, 60)
    finally:
        processo.kill()
        processo.wait()
    o.contextia.limpar_falhas()
    estado = o.estado()  # JSON integro (gravacao atomica)
    assert estado['marca_agua'][DATASET].startswith('2026-09-01T10:44')
    codigo, saida = o.rodar('--once')  # a trava morreu com o processo
    assert codigo == 0, saida
    chegou = set(o.no_contextia(e0)) | set(o.no_contextia(e1))
    assert set(novos) <= chegou


def test_segundo_ouvinte_recusado_e_sigterm_sai_limpo(ouvinte_sqlite):
    o = ouvinte_sqlite
    primeiro = o.iniciar()
    try:
        _esperar(lambda: os.path.exists(os.path.join(o.estado_dir, 'ouvinte-status.txt')))
        codigo, saida = o.rodar('--once')
        assert codigo == 2
        assert 'Já existe um ouvinte rodando' in saida and 'pid %s' % primeiro.pid in saida
        primeiro.send_signal(signal.SIGTERM)
        assert primeiro.wait(timeout=30) == 0
    finally:
        if primeiro.poll() is None:
            primeiro.kill()
    assert 'parada pedida' in o.saida() and 'ouvinte encerrado' in o.saida()


def _grupo_vivo(pgid):
    vivos = []
    for nome in os.listdir('/proc'):
        if nome.isdigit():
            try:
                with open('/proc/%s/stat' % nome) as arquivo:
                    campos = arquivo.read().rsplit(')', 1)[1].split()
            except OSError:
                continue
            if int(campos[2]) == pgid and campos[0] != 'Z':
                vivos.append(int(nome))
    return vivos


def test_sigterm_durante_ferramenta_lenta_nao_deixa_o_grupo_vivo(ouvinte_sqlite):
    o = ouvinte_sqlite
    o.contextia.injetar('atraso', quantidade=200, segundos=2)
    processo = o.iniciar('--varrer-agora', '--intervalo-dados=60')
    try:
        achado = _esperar(
            lambda: re.search(
                r'ferramenta agora ..: varredura/carregar-todas \(pid (\d+)',
                o.status()
                if os.path.exists(os.path.join(o.estado_dir, 'ouvinte-status.txt'))
                else '',
            ),
            120,
        )
        pgid = int(achado.group(1))
        # O connector.py (neto, no mesmo grupo) ja esta enviando.
        _esperar(lambda: o.contextia.falhas_injetadas()['atraso'] >= 1, 60)
        assert len(_grupo_vivo(pgid)) >= 2
        processo.send_signal(signal.SIGTERM)
        assert processo.wait(timeout=60) == 0
    finally:
        if processo.poll() is None:
            processo.kill()
        o.contextia.limpar_falhas()
    assert _grupo_vivo(pgid) == []
    saida = o.saida()
    assert 'encerrando o grupo' in saida and 'ouvinte encerrado' in saida
    # Varredura interrompida nao e registrada como feita.
    assert o.estado().get('ultima_varredura') is None


def test_estado_corrompido_para_a_subida_com_a_mensagem(ouvinte_sqlite):
    o = ouvinte_sqlite
    os.makedirs(o.estado_dir)
    caminho = os.path.join(o.estado_dir, 'ouvinte-estado.json')
    with open(caminho, 'w') as arquivo:
        arquivo.write('{"marca_agua": {"titulos_a_rec')
    codigo, saida = o.rodar('--once')
    assert codigo == 2
    assert 'Estado ilegível em %s' % caminho in saida
    assert 'Conserte ou mova o arquivo' in saida
    with open(caminho) as arquivo:
        assert arquivo.read() == '{"marca_agua": {"titulos_a_rec'


def test_empresa_nova_e_provisionada_e_carregada_num_ciclo(ouvinte_sqlite):
    o = ouvinte_sqlite
    assert o.rodar('--once')[0] == 0
    nova = str(o.erp.base + 7)
    o.erp.executar(
        'INSERT INTO {EMPRESAS} VALUES (:e, :n, NULL, :a)', e=int(nova), n='Loja Nova', a='S'
    )
    ids = [o.inserir(nova, '2026-09-01 09:00:00') for _ in range(3)]
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    assert 'EMPRESA(S) NOVA(S): %s=Loja Nova' % nova in saida
    assert '--somente-escopo=%s' % nova in saida
    # A saida das ferramentas aparece no log com prefixo.
    assert 'provisionar %s | ' % nova in saida and 'carga inicial %s | ' % nova in saida
    from contextia_sync.provisionamento.chaves import ler_chaves

    chave = ler_chaves(o.arquivo_chaves)[nova]
    registros = {int(r['ID']) for r in cliente.ler_registros(DATASET, chave)}
    assert set(ids) <= registros
    assert nova in o.estado()['escopos_vistos']


def test_rajada_acima_do_teto_vai_para_a_varredura(ouvinte_sqlite):
    o = ouvinte_sqlite
    e0 = o.erp.escopos[0]
    assert o.rodar('--once')[0] == 0
    ids = [o.inserir(e0, '2026-09-01 11:%02d:00' % n) for n in range(12)]
    codigo, saida = o.rodar('--once', '--maximo-por-ciclo=5')
    assert codigo == 0, saida
    assert 'entregue a VARREDURA' in saida
    # So as 12 novas contam no teto: as 3 da janela da folga ja foram entregues
    # (a carga completa as levou; issue 12, item 1).
    assert re.search(r'entregues a varredura: %s \(12 linhas' % DATASET, o.status())
    assert o.no_contextia(e0) == {}
    # A varredura leva tudo e a marca pula para o MAX lido antes dela.
    codigo, saida = o.rodar('--once', '--maximo-por-ciclo=5', '--varrer-agora')
    assert codigo == 0, saida
    assert set(ids) <= set(o.no_contextia(e0))
    assert o.estado()['marca_agua'][DATASET] == '2026-09-01T11:11:00'
    assert 'entregues a varredura' not in o.status()
    assert o.estado()['ultima_varredura']


def test_varredura_com_falha_em_outro_dataset_solta_o_dataset_da_rajada(ouvinte_sqlite):
    """A marca pula por dataset: o erro de um não congela o outro (achado da tortura)."""
    o = ouvinte_sqlite
    e0, e1 = o.erp.escopos
    assert o.rodar('--once')[0] == 0
    ids = [o.inserir(e0, '2026-09-01 11:%02d:00' % n) for n in range(12)]
    assert o.rodar('--once', '--maximo-por-ciclo=5')[0] == 0
    assert 'entregues a varredura: %s' % DATASET in o.status()
    # O dataset de dominio quebra na origem: a varredura falha nele, em todas as empresas.
    o.erp.executar('ALTER TABLE {STATUS} RENAME TO {STATUS_FORA}')
    codigo, saida = o.rodar('--once', '--maximo-por-ciclo=5', '--varrer-agora')
    assert codigo == 1, saida  # --once diz que algo falhou
    assert 'FALHARAM: status' in saida
    assert 'varredura com 1 fase(s) com erro' in saida
    # ...e os titulos, que ela fechou nas duas empresas, voltam ao ao-vivo.
    assert set(ids) <= set(o.no_contextia(e0))
    assert o.estado()['marca_agua'][DATASET] == '2026-09-01T11:11:00'
    assert 'entregues a varredura' not in o.status()

    # Agora o proprio dataset da rajada nao fecha numa empresa (a view dela
    # "voltou vazia" e o teto recusa): ele continua entregue, com o nome dela.
    o.erp.executar('ALTER TABLE {STATUS_FORA} RENAME TO {STATUS}')
    [o.inserir(e0, '2026-09-01 12:%02d:00' % n) for n in range(12)]
    assert o.rodar('--once', '--maximo-por-ciclo=5')[0] == 0
    o.erp.executar('DELETE FROM {TITULOS} WHERE {EMPRESA_ID} = :e', e=int(e1))
    codigo, saida = o.rodar('--once', '--maximo-por-ciclo=5', '--varrer-agora')
    assert codigo == 1, saida  # --once diz que algo falhou
    assert re.search(
        r'%s +a varredura NÃO fechou a carga nas empresas %s' % (DATASET, e1), saida
    ), saida
    assert 'entregues a varredura: %s' % DATASET in o.status()
    assert o.estado()['marca_agua'][DATASET] == '2026-09-01T11:11:00'


def test_dry_run_nao_envia_e_nao_toca_no_estado(ouvinte_sqlite):
    o = ouvinte_sqlite
    e0 = o.erp.escopos[0]
    assert o.rodar('--once')[0] == 0
    caminho = os.path.join(o.estado_dir, 'ouvinte-estado.json')
    with open(caminho, 'rb') as arquivo:
        antes = arquivo.read()
    mtime = os.stat(caminho).st_mtime_ns
    with open(o.arquivo_chaves, 'rb') as arquivo:
        chaves_antes = arquivo.read()
    o.inserir(e0, '2026-09-01 11:00:00')
    nova = str(o.erp.base + 9)
    o.erp.executar(
        'INSERT INTO {EMPRESAS} VALUES (:e, :n, NULL, :a)', e=int(nova), n='Loja Seca', a='S'
    )
    codigo, saida = o.rodar('--once', '--dry-run')
    assert codigo == 0, saida
    assert '[SECO] escopo=%s' % e0 in saida
    assert o.no_contextia(e0) == {}
    # Empresa nova: o provisionar roda em --dry-run e nada e criado.
    assert '--somente-escopo=%s --dry-run' % nova in saida
    assert o.contextia.admin().buscar_projeto(nova) is None
    with open(o.arquivo_chaves, 'rb') as arquivo:
        assert arquivo.read() == chaves_antes
    with open(caminho, 'rb') as arquivo:
        assert arquivo.read() == antes
    assert os.stat(caminho).st_mtime_ns == mtime
    assert 'SECO (não envia)' in o.status()


def test_segundo_sigterm_e_parada_fria(ouvinte_sqlite):
    o = ouvinte_sqlite
    o.contextia.injetar('atraso', quantidade=200, segundos=2)
    processo = o.iniciar('--varrer-agora', '--intervalo-dados=60')
    try:
        achado = _esperar(
            lambda: re.search(
                r'ferramenta agora ..: varredura/carregar-todas \(pid (\d+)',
                o.status()
                if os.path.exists(os.path.join(o.estado_dir, 'ouvinte-status.txt'))
                else '',
            ),
            120,
        )
        pgid = int(achado.group(1))
        _esperar(lambda: o.contextia.falhas_injetadas()['atraso'] >= 1, 60)
        processo.send_signal(signal.SIGTERM)
        _esperar(lambda: 'parada pedida' in o.saida(), 10, 0.05)
        processo.send_signal(signal.SIGTERM)
        assert processo.wait(timeout=30) == 1
    finally:
        if processo.poll() is None:
            processo.kill()
        o.contextia.limpar_falhas()
    assert _grupo_vivo(pgid) == []
    assert 'PARADA FRIA' in o.saida()


@pytest.mark.postgres
def test_origem_fora_do_ar_backoff_e_volta_sozinho(
    erp_pg, ambiente_contextia, chave_contextia, tmp_path
):
    import sqlalchemy as sa

    o = Ouvinte(tmp_path, erp_pg, ambiente_contextia, chave_contextia)
    banco = erp_pg.banco.nome
    admin = sa.create_engine(
        'postgresql+psycopg://postgres@127.0.0.1:5432/postgres', isolation_level='AUTOCOMMIT'
    )
    processo = o.iniciar('--log=%s' % (tmp_path / 'ouvinte.log'))
    try:
        _esperar(lambda: 'marca inicial' in o.saida(), 60)
        with admin.connect() as con:
            con.execute(sa.text('ALTER DATABASE %s ALLOW_CONNECTIONS false' % banco))
            con.execute(
                sa.text(
                    'SELECT pg_terminate_backend(pid) FROM pg_stat_activity'
                    ' WHERE datname = :b AND pid <> pg_backend_pid()'
                ),
                {'b': banco},
            )
        _esperar(lambda: 'ciclo falhou (2a vez seguida)' in o.saida(), 60)
        # A espera e dita depois do status gravado (laco.pulsar): sob carga, um
        # instante depois da linha da falha.
        _esperar(lambda: 'esperando 4s antes de tentar de novo' in o.saida(), 30)
        assert 'falhas seguidas ...: 2' in o.status()
        with admin.connect() as con:
            con.execute(sa.text('ALTER DATABASE %s ALLOW_CONNECTIONS true' % banco))
        erp_pg.fechar()  # conexoes de setup foram derrubadas junto
        novo = o.inserir(erp_pg.escopos[1], '2026-09-01 12:00:00')
        # Volta sozinho: reconecta, le e entrega, e a contagem de falhas zera.
        _esperar(lambda: novo in o.no_contextia(erp_pg.escopos[1]), 60)
        _esperar(lambda: 'falhas seguidas ...: 0' in o.status(), 30)
        processo.send_signal(signal.SIGTERM)
        assert processo.wait(timeout=30) == 0
    finally:
        if processo.poll() is None:
            processo.kill()
        with admin.connect() as con:
            con.execute(sa.text('ALTER DATABASE %s ALLOW_CONNECTIONS true' % banco))
        admin.dispose()
    # --log: o mesmo log num arquivo.
    assert 'ciclo falhou' in (tmp_path / 'ouvinte.log').read_text()


def test_linha_de_empresa_sem_chave_avanca_a_marca_sem_inventar_destino(ouvinte_sqlite):
    o = ouvinte_sqlite
    assert o.rodar('--once')[0] == 0
    # A inativa e recusada pela regra: nunca ganha chave.
    sem_chave = o.inserir(o.erp.inativa, '2026-09-01 12:00:00')
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    assert 'dado de escopo sem chave: %s' % o.erp.inativa in saida
    assert o.estado()['marca_agua'][DATASET] == '2026-09-01T12:00:00'
    for escopo in o.erp.escopos:
        assert sem_chave not in o.no_contextia(escopo)


def test_view_quebrada_nao_para_as_outras(ouvinte_sqlite):
    o = ouvinte_sqlite
    with open(o.mapa) as arquivo:
        mapa = json.load(arquivo)
    mapa['datasets'].insert(
        0,
        {
            'dataset': 'Quebrado',
            'source_object': 'NAO_EXISTE',
            'columns': ['ID', 'EMPRESA_ID', 'ALTERADO_EM'],
        },
    )
    with open(o.mapa, 'w') as arquivo:
        json.dump(mapa, arquivo)
    o.rodar('--once')
    novo = o.inserir(o.erp.escopos[0], '2026-09-01 11:00:00')
    codigo, saida = o.rodar('--once')
    assert codigo == 1  # --once: houve erro
    assert 'quebrado' in saida and 'leitura falhou' in saida
    assert novo in o.no_contextia(o.erp.escopos[0])  # e o outro dataset andou
    linha = [x for x in o.status().splitlines() if x.startswith('quebrado')][0]
    assert 'NAO_EXISTE' in linha or 'Erro' in linha


def test_morte_durante_a_carga_inicial_da_empresa_nova_e_refeita(ouvinte_sqlite):
    """
    Achado da tortura: kill -9 no meio da carga inicial deixava a empresa com
    chave (deixa de ser "nova") e sem histórico até a varredura.
    """
    o = ouvinte_sqlite
    assert o.rodar('--once')[0] == 0
    nova = str(o.erp.base + 8)
    o.erp.executar(
        'INSERT INTO {EMPRESAS} VALUES (:e, :n, NULL, :a)', e=int(nova), n='Loja Lenta', a='S'
    )
    # Historico ANTIGO (abaixo da marca): so a carga inicial o leva.
    ids = [o.inserir(nova, '2026-09-01 08:00:00') for _ in range(25)]
    o.contextia.injetar('atraso', quantidade=100, segundos=2)
    processo = o.iniciar('--intervalo-projetos=3600')
    try:
        achado = _esperar(
            lambda: re.search(
                r'ferramenta agora ..: carga inicial %s \(pid (\d+)' % nova,
                o.status()
                if os.path.exists(os.path.join(o.estado_dir, 'ouvinte-status.txt'))
                else '',
            ),
            120,
        )
        _esperar(lambda: o.contextia.falhas_injetadas()['atraso'] >= 1, 60)
    finally:
        # Queda de energia: o ouvinte e o grupo da ferramenta, juntos.
        processo.kill()
        processo.wait()
        try:
            os.killpg(int(achado.group(1)), signal.SIGKILL)
        except (ProcessLookupError, NameError):
            pass
        o.contextia.limpar_falhas()
    assert nova in o.estado()['cargas_iniciais_pendentes']
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    assert 'carga inicial da empresa %s ficou pela metade' % nova in saida
    from contextia_sync.provisionamento.chaves import ler_chaves

    chave = ler_chaves(o.arquivo_chaves)[nova]
    assert set(ids) <= {int(r['ID']) for r in cliente.ler_registros(DATASET, chave)}
    assert o.estado()['cargas_iniciais_pendentes'] == []
