"""
A estratégia `binlog` de ponta a ponta: um MariaDB privado com o binlog
(tests/apoio/mariadb_binlog.py), o ouvinte.py como processo e o Contextia
local de verdade. Insert, update, delete e troca de empresa chegam; kill -9
com o Contextia fora não perde nem duplica; spool cheio pausa e diz; posição
apagada do binlog e detectada e entregue a varredura; origem sem o que o
binlog exige e recusada com a linha do DBA.
"""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.apoio.mariadb_binlog import mariadb_binlog  # noqa: F401 - fixture de sessao
from tests.apoio.captura_log import acorda_no_log_e_sai_no_sigterm as _acorda_e_sai
from tests.apoio.captura_log import arquivos_do_spool as _spool
from tests.apoio.captura_log import chaves_no_spool as _chaves_no_spool
from tests.apoio.captura_log import escoa_em_ciclos_seguidos
from tests.apoio.captura_log import ids_sem_duplicata as _ids
from tests.apoio.captura_log import (
    insert_update_delete_e_troca_de_empresa as _insert_update_delete_e_troca,
)
from tests.apoio.captura_log import no_spool as _no_spool
from tests.apoio.captura_log import parar as _parar
from tests.apoio.ouvinte import DATASET, RAIZ, Ouvinte, esperar
from tests.dados import erp as erp_teste

pytestmark = [pytest.mark.mariadb, pytest.mark.lento]


def _ouvinte(tmp_path, banco, contextia, chave_contextia, sem_coluna_de_mudanca=False):
    erp = erp_teste.Erp(banco, titulos_por_empresa=(3, 2))
    ouvinte = Ouvinte(tmp_path, erp, contextia, chave_contextia)
    with open(ouvinte.mapa, encoding='utf-8') as arquivo:
        mapa = json.load(arquivo)
    mapa['listener'] = {'strategy': 'binlog'}
    if sem_coluna_de_mudanca:
        # O log diz qual linha mudou: basta a `key` (nem o defaults nem o dataset
        # têm coluna de mudança; o Status já não tinha).
        mapa['defaults'].pop('watch_column')
    with open(ouvinte.mapa, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo)
    return ouvinte


def _posicao(ouvinte):
    try:
        with open(os.path.join(ouvinte.estado_dir, 'binlog-posicao.json')) as arquivo:
            return json.load(arquivo)
    except (FileNotFoundError, ValueError):
        return None


def _status_json(ouvinte):
    try:
        with open(os.path.join(ouvinte.estado_dir, 'ouvinte-status.json')) as arquivo:
            return json.load(arquivo)
    except (FileNotFoundError, ValueError):
        return None


@pytest.fixture
def banco(mariadb_binlog):  # noqa: F811
    return mariadb_binlog.banco_de_teste()


def test_insert_update_delete_e_troca_de_empresa_chegam(
    tmp_path, banco, ambiente_contextia, chave_contextia
):
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia, sem_coluna_de_mudanca=True)
    processo = o.iniciar()
    try:
        esperar(lambda: _posicao(o), 30)
        _insert_update_delete_e_troca(o)
        status = esperar(lambda: (_status_json(o) or {}).get('captura'), 30)
        assert status['estrategia'] == 'binlog' and status['posicao']
        # Cada dataset diz que e o log que o acompanha (antes: '' -- nem coluna nem nada).
        assert {d['captura'] for d in _status_json(o)['datasets'] if d.get('ao_vivo')} == {'binlog'}
        assert 'posição do log' in o.status() and 'spool ....' in o.status()
        with open(os.path.join(o.estado_dir, 'ouvinte.prom')) as arquivo:
            metricas = arquivo.read()
        assert 'ouvinte_spool_mudancas ' in metricas
        assert 'ouvinte_captura_atraso_origem_segundos ' in metricas
    finally:
        _parar(processo)
    assert not _spool(o, 'pronto') and not _spool(o, 'tomado')


def test_mudanca_no_log_acorda_o_ciclo_e_o_sigterm_sai_logo(
    tmp_path, banco, ambiente_contextia, chave_contextia
):
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    # Bloqueado no log, o SIGTERM ainda sai em segundos (o batimento do servidor).
    _acorda_e_sai(o, lambda: _posicao(o) and ('esperando' in o.saida() or _status_json(o)))


def test_atraso_no_spool_acima_do_teto_vai_em_ciclos_seguidos(
    tmp_path, banco, ambiente_contextia, chave_contextia
):
    # O mesmo do slot_logico (TetoDoSpool): o spool com mais arquivos do que um
    # ciclo toma escoa em ciclos seguidos, não um por --intervalo-dados (10 min aqui).
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    e0 = o.erp.escopos[0]
    codigo, saida = o.rodar('--once')
    assert codigo == 0 and _posicao(o), saida
    # Parado, o log guarda três transações de 5000 (um arquivo do spool tem no
    # máximo 5000 linhas; o ciclo, com o teto de 20, toma um arquivo inteiro).
    primeiro = o.proximo_id + 1
    for lote in range(3):
        o.erp.executar(
            'INSERT INTO {TITULOS} VALUES (:i, :e, :c, :v, :d, :a)',
            lote=[
                {
                    'i': i,
                    'e': int(e0),
                    'c': 'Lote',
                    'v': '10.00',
                    'd': '2026-10-01',
                    'a': '2026-10-01 10:00:00',
                }
                for i in range(primeiro + 5000 * lote, primeiro + 5000 * (lote + 1))
            ],
        )
    ids = set(range(primeiro, primeiro + 15000))
    escoa_em_ciclos_seguidos(o, e0, ids, 90)


def test_ddl_no_log_nao_trava_a_captura(
    tmp_path,
    banco,
    mariadb_binlog,  # noqa: F811
    ambiente_contextia,
    chave_contextia,
):
    # Um DDL (ALTER, CREATE, TRUNCATE de outra tabela) é um QueryEvent sem linhas
    # e sem COMMIT no binlog, de qualquer banco do servidor: a captura passa por
    # ele, e o insert seguinte chega.
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    e0 = o.erp.escopos[0]
    processo = o.iniciar()
    try:
        esperar(lambda: _posicao(o), 30)
        antes = o.inserir(e0, '2026-10-01 10:00:00')
        esperar(lambda: antes in _ids(o, e0), 30)
        o.erp.executar('CREATE TABLE ddl_no_log (x INT)')
        o.erp.executar('ALTER TABLE ddl_no_log ADD COLUMN y INT')
        depois = o.inserir(e0, '2026-10-01 10:00:00')
        esperar(lambda: depois in _ids(o, e0), 30)
        # O TRUNCATE da tabela seguida não tem linhas no log: o dataset vai à varredura.
        o.erp.executar('TRUNCATE TABLE {TITULOS}')
        esperar(lambda: DATASET in (_status_json(o) or {}).get('entregues_a_varredura', {}), 30)
    finally:
        _parar(processo)
    assert 'AttributeError' not in o.saida()
    assert 'TRUNCATE na origem' in o.saida()


def test_kill9_com_o_contextia_fora_nada_perdido_nada_duplicado(
    tmp_path, banco, ambiente_contextia, chave_contextia
):
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    e0 = o.erp.escopos[0]
    processo = o.iniciar()
    try:
        esperar(lambda: _posicao(o), 30)
        ambiente_contextia.parar()
        antes = (_posicao(o) or {}).get('gtid')
        ids = {o.inserir(e0, '2026-10-01 10:00:00') for _ in range(12)}
        # Capturado com o Contextia fora: o spool cresce e a posicao anda.
        esperar(lambda: _no_spool(o) == 12, 30)
        esperar(lambda: (_posicao(o) or {}).get('gtid') != antes, 30)
        # Entre o spool e a entrega: itens tomados no meio da tentativa de envio.
        tomados = esperar(lambda: _spool(o, 'tomado'), 30)
    finally:
        processo.send_signal(signal.SIGKILL)
        processo.wait(30)
    assert _no_spool(o) == 12
    ambiente_contextia.iniciar()
    processo = o.iniciar()
    try:
        esperar(lambda: ids <= _ids(o, e0), 60)
        esperar(lambda: not _spool(o, 'pronto') and not _spool(o, 'tomado'), 30)
        saida = o.saida()
        # O destino desconhecido e NOMEADO: cada arquivo que estava em tomado/.
        for nome in tomados:
            assert nome in saida
    finally:
        _parar(processo)
    assert _ids(o, e0) >= ids


def _cpu(pid):
    """Segundos de CPU do processo (utime + stime de /proc/<pid>/stat)."""
    with open('/proc/%d/stat' % pid) as arquivo:
        campos = arquivo.read().rsplit(')', 1)[1].split()
    return (int(campos[11]) + int(campos[12])) / os.sysconf('SC_CLK_TCK')


def _sequencia(gtid):
    """O número de sequência do domínio 0 num GTID do MariaDB ('0-1-57' -> 57)."""
    parte = next(p for p in (gtid or '').split(',') if p.startswith('0-'))
    return int(parte.rsplit('-', 1)[1])


def _no_meio_de_uma_transacao_grande(o, processo, servidor, cpu, quantos=6000):
    """
    Com a captura de pé e um insert pequeno já entregue, comita uma transação de
    `quantos` linhas e volta quando o ouvinte gastou `cpu` s de CPU nela (o
    ouvinte parado quase não gasta): ele está no meio da leitura dela.
    Devolve (o id pequeno, os ids grandes, o GTID depois da grande).
    """
    e0 = o.erp.escopos[0]
    base = o.proximo_id + 100
    grandes = set(range(base + 1, base + quantos + 1))
    esperar(lambda: _posicao(o), 30)
    pequeno = o.inserir(e0, '2026-10-01 10:00:00')
    esperar(lambda: pequeno in _ids(o, e0), 30)
    time.sleep(1)  # o ciclo que entregou o pequeno já terminou
    antes = _cpu(processo.pid)
    o.erp.executar(
        "INSERT INTO {TITULOS} SELECT :b + seq, :e, CONCAT('Lote ', seq), 1.00,"
        " '2026-10-01', '2026-10-01 10:00:00' FROM seq_1_to_%d" % quantos,
        b=base,
        e=int(e0),
    )
    grande = servidor.admin('SELECT @@gtid_binlog_pos')[0][0]
    o.proximo_id = base + quantos  # a próxima chamada não repete estes ids
    esperar(lambda: _cpu(processo.pid) - antes >= cpu, 30, passo=0.002)
    return pequeno, grandes, grande


def test_kill9_entre_a_leitura_do_log_e_o_spool_nada_perdido_nada_duplicado(
    tmp_path,
    banco,
    mariadb_binlog,  # noqa: F811
    ambiente_contextia,
    chave_contextia,
):  # noqa: F811
    # Uma transação de 6000 linhas leva ~0,8 s de CPU para o leitor do log
    # atravessar (20000 levam ~2,8 s, medido): o ouvinte parado quase não gasta
    # CPU, então 0,15 s de CPU depois do commit é ele no meio dela. Congelado ali
    # (SIGSTOP), o estado e o spool são conferidos e ele morre (kill -9) --
    # lida, ainda não no spool.
    # Numa máquina mais rápida que a medida, 0,15 s de CPU podem já ter passado a
    # transação inteira: essa volta não caiu no meio dela (o ouvinte segue, e a
    # entrega é conferida), e a seguinte tenta com uma transação maior.
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    e0 = o.erp.escopos[0]
    processo = o.iniciar()
    try:
        for quantos in (6000, 20000, 60000):
            pequeno, grandes, grande = _no_meio_de_uma_transacao_grande(
                o, processo, mariadb_binlog, cpu=0.15, quantos=quantos
            )
            os.kill(processo.pid, signal.SIGSTOP)
            posicao = (_posicao(o) or {}).get('gtid')
            no_spool = _chaves_no_spool(o)
            if _sequencia(posicao) < _sequencia(grande):
                break
            os.kill(processo.pid, signal.SIGCONT)
            esperar(lambda g=grandes: g <= _ids(o, e0), 60, passo=1)
        else:
            pytest.fail(
                'o ouvinte atravessou transações de até 60000 linhas em 0,15 s de CPU:'
                ' o teste nunca o pegou no meio de uma'
            )
    finally:
        processo.send_signal(signal.SIGKILL)
        processo.wait(30)
    # Lida em parte, nada dela no spool -- e por isso a posição não a cobre.
    assert _sequencia(posicao) < _sequencia(grande), (posicao, grande)
    assert not grandes & no_spool
    assert not grandes & _ids(o, e0)
    processo = o.iniciar()
    try:
        esperar(lambda: grandes <= _ids(o, e0), 60, passo=1)
        esperar(lambda: _no_spool(o) == 0, 30)
    finally:
        _parar(processo)
    assert _ids(o, e0) >= grandes | {pequeno}  # e _ids confere que nada veio duas vezes


def test_conexao_do_log_derrubada_no_meio_de_uma_transacao_nada_perdido(
    tmp_path,
    banco,
    mariadb_binlog,  # noqa: F811
    ambiente_contextia,
    chave_contextia,
):  # noqa: F811
    # O python-mysql-replication se reconecta sozinho do GTID em que o leitor foi
    # ABERTO e repassa o log: sem reconhecer o repasse, a transação meio lida
    # seria fechada como inteira (a posição passaria por ela, o resto perdido).
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    e0 = o.erp.escopos[0]
    processo = o.iniciar()
    try:
        # Já lendo a transação (0,8 s de CPU para atravessá-la), longe do fim.
        _, grandes, _ = _no_meio_de_uma_transacao_grande(o, processo, mariadb_binlog, cpu=0.05)
        dump = [
            linha[0]
            for linha in mariadb_binlog.admin(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE COMMAND LIKE 'Binlog Dump%%'"
                " AND USER = '%s'" % banco.usuario
            )
        ]
        assert len(dump) == 1, dump
        mariadb_binlog.admin('KILL %d' % dump[0])
        esperar(lambda: grandes <= _ids(o, e0), 60, passo=1)
        esperar(lambda: _no_spool(o) == 0, 30)
    finally:
        _parar(processo)
    assert 'repassou o log' in o.saida()  # o repasse foi visto e dito


def test_spool_cheio_pausa_a_captura_e_diz(
    tmp_path, banco, ambiente_contextia, chave_contextia, monkeypatch
):
    monkeypatch.setenv('CONTEXTIA_SPOOL_MAXIMO_ITENS', '4')
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    e0 = o.erp.escopos[0]
    processo = o.iniciar()
    try:
        esperar(lambda: _posicao(o), 30)
        ambiente_contextia.parar()
        antes = _sequencia(_posicao(o)['gtid'])
        ids = {o.inserir(e0, '2026-10-01 10:00:00') for _ in range(10)}
        # Dito na hora, no log (o status espera o ciclo preso no envio).
        esperar(
            lambda: (
                'spool cheio' in o.saida()
                and 'PAUSADA' in o.saida()
                and 'binlog da origem não expirar' in o.saida()
            ),
            30,
        )
        # Cheio no limite exato: 4 linhas no spool (em lotes), e a posição só
        # passou pelas 4 transações delas -- as outras 6 esperam no log.
        assert _no_spool(o) == 4
        assert _sequencia(_posicao(o)['gtid']) == antes + 4
        ambiente_contextia.iniciar()
        # Com o Contextia de volta o spool drena em lotes de 4 e a captura retoma
        # sozinha; enquanto isso o status e a saúde dizem a pausa.
        esperar(
            lambda: (
                ((_status_json(o) or {}).get('captura') or {}).get('pausada')
                and 'CAPTURA PAUSADA' in o.status()
            ),
            30,
        )
        esperar(lambda: ids <= _ids(o, e0), 60)
        esperar(lambda: not ((_status_json(o) or {}).get('captura') or {}).get('pausada'), 30)
    finally:
        if ambiente_contextia.pid is None:
            ambiente_contextia.iniciar()
        _parar(processo)


def test_origem_sem_grant_ou_com_statement_e_recusada(
    tmp_path,
    mariadb_binlog,  # noqa: F811
    ambiente_contextia,
    chave_contextia,
):
    (tmp_path / 'a').mkdir()
    (tmp_path / 'b').mkdir()
    sem_grant = mariadb_binlog.banco_de_teste(concessoes=())
    o = _ouvinte(tmp_path / 'a', sem_grant, ambiente_contextia, chave_contextia)
    codigo, saida = o.rodar(timeout=60)
    assert codigo == 2, saida
    assert 'REPLICATION SLAVE' in saida and 'Peça ao DBA' in saida
    mariadb_binlog.admin("SET GLOBAL binlog_format = 'STATEMENT'")
    try:
        o = _ouvinte(
            tmp_path / 'b', mariadb_binlog.banco_de_teste(), ambiente_contextia, chave_contextia
        )
        codigo, saida = o.rodar(timeout=60)
    finally:
        mariadb_binlog.admin("SET GLOBAL binlog_format = 'ROW'")
    assert codigo == 2, saida
    assert 'binlog_format=STATEMENT' in saida and 'SET GLOBAL binlog_format=ROW' in saida


def test_posicao_apagada_e_detectada_e_vai_para_a_varredura(
    tmp_path,
    banco,
    mariadb_binlog,  # noqa: F811
    ambiente_contextia,
    chave_contextia,
):
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    e0 = o.erp.escopos[0]
    processo = o.iniciar()
    try:
        esperar(lambda: _posicao(o), 30)
    finally:
        _parar(processo)
    perdido = o.inserir(e0, '2026-10-01 10:00:00')
    mariadb_binlog.admin('FLUSH BINARY LOGS')
    atual = mariadb_binlog.admin('SHOW MASTER STATUS')[0][0]

    def apagado():
        # O MariaDB so apaga o arquivo antigo depois do checkpoint do InnoDB nele.
        mariadb_binlog.admin("PURGE BINARY LOGS TO '%s'" % atual)
        return [linha[0] for linha in mariadb_binlog.admin('SHOW BINARY LOGS')] == [atual]

    esperar(apagado, 30)
    processo = o.iniciar()
    try:
        status = esperar(lambda: ((_status_json(o) or {}).get('captura') or {}).get('critico'), 30)
        assert 'apagada' in status
        assert DATASET in (_status_json(o) or {}).get('entregues_a_varredura', {})
        # Nunca adivinhada: a captura recomeca da posicao atual e segue viva.
        depois = o.inserir(e0, '2026-10-01 10:00:00')
        esperar(lambda: depois in _ids(o, e0), 30)
        feito = subprocess.run(
            [sys.executable, 'ouvinte.py', '--saude', '--estado=' + o.estado_dir],
            cwd=RAIZ,
            timeout=60,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        codigo, saude = feito.returncode, feito.stdout.decode('utf-8', 'replace')
        assert codigo == 2 and 'apagada' in saude, saude
    finally:
        _parar(processo)
    assert 'APAGADA' in o.saida()
    assert perdido not in _ids(o, e0)  # so a varredura o leva (nunca inventado)
    # A varredura repara: o CRÍTICO sai -- também com o dataset já de volta ao
    # ao-vivo pelas mudanças de depois (antes, nunca saía) --, e a linha do
    # meio-tempo chega.
    codigo, saida = o.rodar('--once', '--varrer-agora', timeout=300)
    assert codigo == 0, saida
    assert perdido in _ids(o, e0)
    assert not (_status_json(o).get('captura') or {}).get('critico'), saida
    assert 'expirada' not in _posicao(o)
