"""
A estratégia `slot_logico` de ponta a ponta: um PostgreSQL privado com
wal_level=logical (tests/apoio/postgres_logico.py), o ouvinte.py como processo e
o Contextia local de verdade. Insert, update, delete e troca de empresa chegam;
kill -9 em cada passo (lido, no spool, entregue) não perde nem duplica; com o
Contextia fora o WAL retido fica limitado e o spool cresce (e pausa cheio),
depois escoa; o slot apagado sob o ouvinte, ou invalidado pelo
max_slot_wal_keep_size, é CRÍTICO e vai para a varredura;
`--remover-slot` não deixa slot; a origem sem o que o slot exige é recusada com
a linha do DBA.
"""

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from tests.apoio.captura_log import acorda_no_log_e_sai_no_sigterm as _acorda_e_sai
from tests.apoio.captura_log import arquivos_do_spool as _spool
from tests.apoio.captura_log import escoa_em_ciclos_seguidos
from tests.apoio.captura_log import ids_sem_duplicata as _ids
from tests.apoio.captura_log import (
    insert_update_delete_e_troca_de_empresa as _insert_update_delete_e_troca,
)
from tests.apoio.captura_log import no_spool as _no_spool
from tests.apoio.captura_log import parar as _parar
from tests.apoio.ouvinte import DATASET, RAIZ, Ouvinte, esperar
from tests.apoio.postgres_logico import comando_do_dba
from tests.apoio.postgres_logico import postgres_logico  # noqa: F401 - fixture de sessao
from tests.dados import erp as erp_teste

pytestmark = [pytest.mark.postgres, pytest.mark.lento]


def _ouvinte(
    tmp_path,
    banco,
    contextia,
    chave_contextia,
    identidade='FULL',
    criar=True,
    sem_coluna_de_mudanca=False,
):
    erp = erp_teste.Erp(banco, titulos_por_empresa=(3, 2))
    if identidade:
        erp.executar('ALTER TABLE {TITULOS} REPLICA IDENTITY %s' % identidade)
    ouvinte = Ouvinte(tmp_path, erp, contextia, chave_contextia)
    with open(ouvinte.mapa, encoding='utf-8') as arquivo:
        mapa = json.load(arquivo)
    # O slot é do cluster inteiro: um cliente por teste.
    mapa['client'] = 'teste_' + uuid.uuid4().hex[:8]
    mapa['listener'] = {'strategy': 'slot_logico'}
    if sem_coluna_de_mudanca:
        # O log diz qual linha mudou: basta a `key` (ao_vivo.ESTRATEGIAS_DE_LOG).
        mapa['defaults'].pop('watch_column')
    with open(ouvinte.mapa, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo)
    ouvinte.slot = 'contextia_' + mapa['client']
    ouvinte.banco = banco
    if criar:
        codigo, saida = comando_do_dba(ouvinte, '--criar-slot')
        assert codigo == 0, saida
        assert 'slot %s criado' % ouvinte.slot in saida and 'max_slot_wal_keep_size' in saida
    return ouvinte


def _posicao(ouvinte):
    try:
        with open(os.path.join(ouvinte.estado_dir, 'slot-posicao.json')) as arquivo:
            return json.load(arquivo)
    except (FileNotFoundError, ValueError):
        return None


def _captura(ouvinte):
    try:
        with open(os.path.join(ouvinte.estado_dir, 'ouvinte-status.json')) as arquivo:
            return json.load(arquivo).get('captura') or {}
    except (FileNotFoundError, ValueError):
        return {}


def _confirmado(ouvinte):
    return ouvinte.banco.servidor.admin(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = '%s'"
        % ouvinte.slot
    )[0][0]


def _saude(ouvinte):
    feito = subprocess.run(
        [sys.executable, 'ouvinte.py', '--saude', '--estado=' + ouvinte.estado_dir],
        cwd=RAIZ,
        timeout=60,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    return feito.returncode, feito.stdout.decode('utf-8', 'replace')


@pytest.fixture
def banco(postgres_logico):  # noqa: F811
    banco = postgres_logico.banco_de_teste()
    yield banco
    # Slot esquecido retém WAL do cluster inteiro: nenhum sobra de um teste.
    postgres_logico.admin(
        'SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots'
        " WHERE database = '%s' AND NOT active" % banco.nome
    )


def test_insert_update_delete_chegam_e_remover_slot_nao_deixa_slot(
    tmp_path, banco, ambiente_contextia, chave_contextia
):
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia, sem_coluna_de_mudanca=True)
    processo = o.iniciar()
    try:
        esperar(lambda: (_posicao(o) or {}).get('lsn'), 30)
        # A troca de empresa sai da antiga pela REPLICA IDENTITY FULL.
        _insert_update_delete_e_troca(o)
        captura = esperar(
            lambda: _captura(o).get('wal_retido_bytes') is not None and _captura(o), 30
        )
        assert captura['estrategia'] == 'slot_logico' and captura['slot'] == o.slot
        assert 'slot lógico' in o.status() and 'WAL retido' in o.status()
        with open(os.path.join(o.estado_dir, 'ouvinte.prom')) as arquivo:
            assert 'ouvinte_slot_wal_retido_bytes ' in arquivo.read()
        # Com o ouvinte de pé, remover o slot é recusado (ele acusaria o slot apagado).
        codigo, saida = comando_do_dba(o, '--remover-slot')
        assert codigo == 2 and 'ouvinte rodando' in saida, saida
    finally:
        _parar(processo)
    assert not _spool(o)
    codigo, saida = comando_do_dba(o, '--remover-slot')
    assert codigo == 0 and 'slot %s removido' % o.slot in saida, saida
    assert o.slot not in banco.slots()
    assert not banco.admin("SELECT 1 FROM pg_publication WHERE pubname = '%s'" % o.slot)
    # De novo: nada a remover, e diz.
    codigo, saida = comando_do_dba(o, '--remover-slot')
    assert codigo == 0 and 'não existe' in saida, saida


def test_mudanca_no_slot_acorda_o_ciclo_e_o_sigterm_sai_logo(
    tmp_path, banco, ambiente_contextia, chave_contextia
):
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    _acorda_e_sai(o, lambda: (_posicao(o) or {}).get('lsn'))


def test_kill9_em_cada_passo_nada_perdido_nada_duplicado(
    tmp_path, banco, ambiente_contextia, chave_contextia, monkeypatch
):
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    e0 = o.erp.escopos[0]
    processo = o.iniciar()
    esperar(lambda: (_posicao(o) or {}).get('lsn'), 30)
    _parar(processo)
    ids = set()
    antes = _confirmado(o)
    # 1. Lido do slot, ainda não no spool: morre; o slot não andou, o spool está vazio.
    monkeypatch.setenv('CONTEXTIA_TESTE_MORRER_EM', 'slot-lido')
    processo = o.iniciar()
    ids |= {o.inserir(e0, '2026-10-01 10:00:00') for _ in range(5)}
    assert processo.wait(30) == -signal.SIGKILL
    assert not _spool(o) and _confirmado(o) == antes
    # 2. No spool (fsync) e a intenção gravada, antes do advance: morre; o slot não andou.
    monkeypatch.setenv('CONTEXTIA_TESTE_MORRER_EM', 'slot-no-spool')
    processo = o.iniciar()
    assert processo.wait(30) == -signal.SIGKILL
    assert _no_spool(o) == 5 and _confirmado(o) == antes
    # 3. Entregue ao Contextia, antes de concluir no spool: morre; o spool ainda o tem.
    monkeypatch.setenv('CONTEXTIA_TESTE_MORRER_EM', 'slot-entregue')
    processo = o.iniciar()
    assert processo.wait(30) == -signal.SIGKILL
    tomados = _spool(o, 'tomado')
    assert ids <= _ids(o, e0) and tomados
    monkeypatch.delenv('CONTEXTIA_TESTE_MORRER_EM')
    processo = o.iniciar()
    try:
        ids |= {o.inserir(e0, '2026-10-01 10:00:00') for _ in range(3)}
        esperar(lambda: ids <= _ids(o, e0), 30)
        esperar(lambda: not _spool(o), 30)
        # O destino desconhecido (tomado/ depois do kill -9) é nomeado no log.
        saida = o.saida()
        assert all(nome in saida for nome in tomados), saida
    finally:
        _parar(processo)
    assert ids <= _ids(o, e0)  # _ids confere: nenhum registro duplicado
    assert _confirmado(o) != antes and not (_captura(o) or {}).get('critico')


def test_contextia_fora_wal_limitado_spool_cresce_pausa_e_escoa(
    tmp_path, banco, ambiente_contextia, chave_contextia, monkeypatch
):
    monkeypatch.setenv('CONTEXTIA_SPOOL_MAXIMO_ITENS', '40')
    # Cada envio ao Contextia fora desiste em 3 s (o padrao, 120 s de prazo, faz
    # cada ciclo esperar ~24 s de retentativas).
    monkeypatch.setenv('CONTEXTIA_PRAZO_ENVIO', '3')
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    e0 = o.erp.escopos[0]
    banco.admin('CREATE TABLE lixo (x text)')
    processo = o.iniciar()
    try:
        esperar(lambda: (_posicao(o) or {}).get('lsn'), 30)
        ambiente_contextia.parar()
        inicio = banco.admin('SELECT pg_current_wal_lsn()::text')[0][0]
        ids = {o.inserir(e0, '2026-10-01 10:00:00') for _ in range(30)}
        # WAL de uma tabela que o slot NÃO segue: ele tem de andar sobre ele também.
        for _ in range(4):
            banco.admin("INSERT INTO lixo SELECT repeat('x', 200) FROM generate_series(1, 20000)")
        # O restart_lsn anda no próximo registro de transações em curso (o bgwriter o
        # escreve a cada 15 s com atividade; o CHECKPOINT o escreve já).
        banco.admin('CHECKPOINT')
        # Mais do que o spool cabe: ele enche, a captura pausa e diz -- e o slot
        # avançou até a última transação que coube, por cima do WAL do `lixo`.
        ids |= {o.inserir(e0, '2026-10-01 10:00:00') for _ in range(20)}
        gerado = int(
            banco.admin("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '%s')" % inicio)[0][0]
        )
        assert gerado > 8 * 1024 * 1024
        pausada = esperar(lambda: _captura(o).get('pausada'), 60)
        assert 'spool cheio' in pausada and 'PAUSADA' in pausada
        assert 'RETÉM WAL' in pausada and 'CONTEXTIA_SPOOL_MAXIMO_ITENS' in pausada, pausada
        assert _no_spool(o) == 40
        retido = _captura(o)['wal_retido_bytes']
        assert retido < gerado / 4, (retido, gerado)
        codigo, saude = _saude(o)
        assert codigo == 2 and 'spool cheio' in saude and 'wal_retido=' in saude, saude
        ambiente_contextia.iniciar()
        esperar(lambda: ids <= _ids(o, e0), 60)
        esperar(lambda: not _spool(o) and not _captura(o).get('pausada'), 30)
    finally:
        if ambiente_contextia.pid is None:
            ambiente_contextia.iniciar()
        _parar(processo)
    assert 'spool cheio' in o.saida()


def test_atraso_no_spool_acima_do_teto_vai_em_ciclos_seguidos(
    tmp_path, banco, ambiente_contextia, chave_contextia
):
    """
    O spool com mais do que um ciclo toma (`--maximo-por-ciclo`) -- a volta do
    Contextia depois de minutos fora, com a origem já quieta -- escoa em ciclos
    seguidos, e não um lote por `--intervalo-dados` (bench/bench_wal_retido.py:
    36 mil linhas levavam 127 s com o intervalo padrão de 60 s).
    """
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    e0 = o.erp.escopos[0]
    codigo, saida = o.rodar('--once')
    assert codigo == 0 and (_posicao(o) or {}).get('lsn'), saida
    # Com o ouvinte parado o slot guarda três transações de 600: três arquivos no
    # spool (um por lote guardado), e o ciclo toma um arquivo inteiro por vez.
    primeiro = o.proximo_id + 1
    for lote in range(3):
        o.erp.executar(
            "INSERT INTO {TITULOS} SELECT g, :e, 'Lote', 10.00, DATE '2026-10-01',"
            " TIMESTAMP '2026-10-01 10:00:00' FROM generate_series(:a, :b) g",
            e=int(e0),
            a=primeiro + 600 * lote,
            b=primeiro + 600 * lote + 599,
        )
    ids = set(range(primeiro, primeiro + 1800))
    escoa_em_ciclos_seguidos(o, e0, ids, 60)


def test_slot_apagado_sob_o_ouvinte_e_critico_e_vai_para_a_varredura(
    tmp_path, banco, ambiente_contextia, chave_contextia
):
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    e0 = o.erp.escopos[0]
    processo = o.iniciar()
    try:
        esperar(lambda: (_posicao(o) or {}).get('lsn'), 30)

        def apagar():
            try:
                banco.admin("SELECT pg_drop_replication_slot('%s')" % o.slot)
                return True
            except Exception:  # noqa: BLE001 - em uso no instante do peek
                time.sleep(0.05)
                return False

        esperar(apagar, 30, passo=0)
        perdido = o.inserir(e0, '2026-10-01 10:00:00')
        critico = esperar(lambda: _captura(o).get('critico'), 30)
        assert 'perdido' in critico and '--criar-slot' in critico
        with open(os.path.join(o.estado_dir, 'ouvinte-status.json')) as arquivo:
            assert DATASET in json.load(arquivo).get('entregues_a_varredura', {})
        codigo, saude = _saude(o)
        assert codigo == 2 and 'slot' in saude, saude
        # O operador cria de novo com o ouvinte de pé: a captura retoma sozinha, e o
        # CRÍTICO fica até a varredura (a linha do meio-tempo só ela leva).
        codigo, saida = comando_do_dba(o, '--criar-slot')
        assert codigo == 0, saida
        depois = o.inserir(e0, '2026-10-01 10:00:00')
        esperar(lambda: depois in _ids(o, e0), 30)
        # O status e gravado no fim do ciclo, depois da entrega: espera-o.
        critico = esperar(
            lambda: (lambda c: c if c and '--criar-slot' not in c else None)(
                _captura(o).get('critico')
            ),
            30,
        )
        assert 'varredura' in critico, critico
    finally:
        _parar(processo)
    assert 'NÃO sabe o que mudou' in o.saida()
    assert perdido not in _ids(o, e0)  # só a varredura o leva (nunca inventado)
    # A varredura com o slot de pé repara: o CRÍTICO sai (antes, com o dataset já
    # de volta ao ao-vivo pelas mudanças de depois, nunca saía) e a linha chega.
    codigo, saida = o.rodar('--once', '--varrer-agora', timeout=300)
    assert codigo == 0, saida
    assert perdido in _ids(o, e0)
    assert not _captura(o).get('critico'), saida


def test_slot_invalidado_por_max_slot_wal_keep_size_e_critico_e_vai_para_a_varredura(
    tmp_path, banco, ambiente_contextia, chave_contextia
):
    """
    A rede de segurança do DBA: com o ouvinte parado, o slot passa de
    max_slot_wal_keep_size e o PostgreSQL o invalida no checkpoint (wal_status
    'lost'). A volta do ouvinte diz isso (CRÍTICO, os datasets para a varredura),
    e nunca finge que leu o que o WAL apagado tinha.
    """
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    e0 = o.erp.escopos[0]
    codigo, saida = o.rodar('--once')
    assert codigo == 0 and (_posicao(o) or {}).get('lsn'), saida
    servidor = banco.servidor
    servidor.admin("ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'")
    servidor.admin('SELECT pg_reload_conf()')
    try:
        perdido = o.inserir(e0, '2026-10-01 10:00:00')
        # WAL bem além do limite (segmentos de 16 MB), e o checkpoint que invalida.
        for _ in range(3):
            banco.admin(
                "CREATE TABLE lixo_%s AS SELECT g, repeat('x', 900) AS t FROM"
                ' generate_series(1, 25000) g' % uuid.uuid4().hex[:8]
            )
            servidor.admin('SELECT pg_switch_wal()')
        servidor.admin('CHECKPOINT')
        assert banco.slots()[o.slot][0] == 'lost', banco.slots()
        codigo, saida = o.rodar('--once')
        assert 'INVALIDADO' in saida and 'max_slot_wal_keep_size' in saida, saida
        assert 'critico' in _captura(o) and _captura(o)['critico'], _captura(o)
        with open(os.path.join(o.estado_dir, 'ouvinte-status.json')) as arquivo:
            assert DATASET in json.load(arquivo).get('entregues_a_varredura', {})
        codigo, saude = _saude(o)
        assert codigo == 2 and 'slot' in saude, saude
        assert perdido not in _ids(o, e0)  # so a varredura o leva
    finally:
        servidor.admin('ALTER SYSTEM RESET max_slot_wal_keep_size')
        servidor.admin('SELECT pg_reload_conf()')


def test_origem_sem_o_que_o_slot_exige_e_recusada(
    tmp_path,
    postgres_logico,  # noqa: F811
    banco_postgres,
    ambiente_contextia,
    chave_contextia,
):
    for nome in 'abcd':
        (tmp_path / nome).mkdir()
    try:
        _recusas(tmp_path, postgres_logico, banco_postgres, ambiente_contextia, chave_contextia)
    finally:
        postgres_logico.admin(
            'SELECT pg_drop_replication_slot(slot_name) FROM'
            " pg_replication_slots WHERE slot_name LIKE 'contextia_teste_%'"
            ' AND NOT active'
        )


def _recusas(
    tmp_path,
    postgres_logico,  # noqa: F811
    banco_postgres,
    ambiente_contextia,  # noqa: F811
    chave_contextia,
):
    # Sem o slot: a subida não o cria em silêncio.
    o = _ouvinte(
        tmp_path / 'a',
        postgres_logico.banco_de_teste(),
        ambiente_contextia,
        chave_contextia,
        criar=False,
    )
    codigo, saida = o.rodar('--once', timeout=60)
    assert codigo == 2 and 'não existe' in saida and '--criar-slot' in saida, saida
    assert not o.banco.slots()
    # REPLICA IDENTITY NOTHING: a imagem antiga de um DELETE não traz nem a key.
    # (DEFAULT com a empresa fora da chave primária serve: a remoção vai à
    # empresa em que a linha foi entregue, captura/indice_entregas.py.)
    o = _ouvinte(
        tmp_path / 'b',
        postgres_logico.banco_de_teste(),
        ambiente_contextia,
        chave_contextia,
        identidade=None,
    )
    o.erp.executar('ALTER TABLE {TITULOS} REPLICA IDENTITY NOTHING')
    codigo, saida = o.rodar('--once', timeout=60)
    assert codigo == 2 and 'REPLICA IDENTITY FULL' in saida and 'não traz ID' in saida, saida
    # Login sem REPLICATION.
    sem = postgres_logico.banco_de_teste(replicacao=False)
    o = _ouvinte(tmp_path / 'c', sem, ambiente_contextia, chave_contextia)
    codigo, saida = o.rodar('--once', timeout=60)
    assert codigo == 2 and 'ALTER ROLE %s REPLICATION' % sem.usuario in saida, saida
    # O PostgreSQL do serviço: wal_level=replica.
    o = Ouvinte(
        tmp_path / 'd',
        erp_teste.Erp(banco_postgres, titulos_por_empresa=(1, 1)),
        ambiente_contextia,
        chave_contextia,
    )
    with open(o.mapa, encoding='utf-8') as arquivo:
        mapa = json.load(arquivo)
    mapa['listener'] = {'strategy': 'slot_logico'}
    with open(o.mapa, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo)
    codigo, saida = o.rodar('--once', timeout=60)
    if banco_postgres.executar('SHOW wal_level')[0][0] != 'logical':
        assert codigo == 2 and 'wal_level=' in saida and 'ALTER SYSTEM SET wal_level' in saida, (
            saida
        )
