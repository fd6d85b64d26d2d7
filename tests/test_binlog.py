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

from contextia_sync.intake import cliente
from tests.apoio.mariadb_binlog import mariadb_binlog  # noqa: F401 - fixture de sessao
from tests.apoio.ouvinte import DATASET, RAIZ, Ouvinte, esperar
from tests.dados import erp as erp_teste

pytestmark = [pytest.mark.mariadb, pytest.mark.lento]


def _ouvinte(tmp_path, banco, contextia, chave_contextia):
    erp = erp_teste.Erp(banco, titulos_por_empresa=(3, 2))
    ouvinte = Ouvinte(tmp_path, erp, contextia, chave_contextia)
    with open(ouvinte.mapa, encoding='utf-8') as arquivo:
        mapa = json.load(arquivo)
    mapa['listener'] = {'strategy': 'binlog'}
    with open(ouvinte.mapa, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo)
    return ouvinte


def _posicao(ouvinte):
    try:
        with open(os.path.join(ouvinte.estado_dir, 'binlog-posicao.json')) as arquivo:
            return json.load(arquivo)
    except (FileNotFoundError, ValueError):
        return None


def _spool(ouvinte, estado):
    pasta = os.path.join(ouvinte.estado_dir, 'spool', estado)
    return sorted(os.listdir(pasta)) if os.path.isdir(pasta) else []


def _no_spool(ouvinte):
    """Quantas linhas os arquivos do spool guardam (um arquivo é um lote)."""
    linhas = set()
    for estado in ('pronto', 'tomado'):
        for nome in _spool(ouvinte, estado):
            with open(os.path.join(ouvinte.estado_dir, 'spool', estado, nome)) as arquivo:
                conteudo = json.load(arquivo)
            linhas.update((conteudo['dataset'], json.dumps(m['chave']))
                          for m in conteudo['mudancas'])
    return len(linhas)


def _status_json(ouvinte):
    try:
        with open(os.path.join(ouvinte.estado_dir, 'ouvinte-status.json')) as arquivo:
            return json.load(arquivo)
    except (FileNotFoundError, ValueError):
        return None


def _parar(processo):
    processo.send_signal(signal.SIGTERM)
    processo.wait(60)


def _ids(ouvinte, escopo):
    """Os IDs no Contextia, conferindo que nenhum veio duas vezes."""
    registros = cliente.ler_registros(DATASET, ouvinte.chaves[escopo])
    ids = [int(r['ID']) for r in registros]
    assert len(ids) == len(set(ids)), 'registro duplicado no Contextia: %s' % ids
    return set(ids)


@pytest.fixture
def banco(mariadb_binlog):  # noqa: F811
    return mariadb_binlog.banco_de_teste()


def test_insert_update_delete_e_troca_de_empresa_chegam(tmp_path, banco, ambiente_contextia,
                                                         chave_contextia):
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    e0, e1 = o.erp.escopos
    processo = o.iniciar()
    try:
        esperar(lambda: _posicao(o), 30)
        novo = o.inserir(e0, '2026-10-01 10:00:00', valor='11.00')
        outro = o.inserir(e0, '2026-10-01 10:00:00', valor='12.00')
        esperar(lambda: {novo, outro} <= _ids(o, e0), 30)
        o.erp.executar('UPDATE {TITULOS} SET {VALOR} = 99.50 WHERE {ID} = :i', i=novo)
        esperar(lambda: str(o.no_contextia(e0).get(novo, {}).get('VALOR')) in ('99.5', '99.50'),
                30)
        o.erp.executar('DELETE FROM {TITULOS} WHERE {ID} = :i', i=novo)
        esperar(lambda: novo not in _ids(o, e0), 30)
        # A linha que mudou de empresa chega a nova e SAI da antiga.
        o.erp.executar('UPDATE {TITULOS} SET {EMPRESA_ID} = :e WHERE {ID} = :i',
                       e=int(e1), i=outro)
        esperar(lambda: outro in _ids(o, e1) and outro not in _ids(o, e0), 30)
        status = esperar(lambda: (_status_json(o) or {}).get('captura'), 30)
        assert status['estrategia'] == 'binlog' and status['posicao']
        assert 'posição do log' in o.status() and 'spool ....' in o.status()
        with open(os.path.join(o.estado_dir, 'ouvinte.prom')) as arquivo:
            metricas = arquivo.read()
        assert 'ouvinte_spool_mudancas ' in metricas
        assert 'ouvinte_captura_atraso_origem_segundos ' in metricas
    finally:
        _parar(processo)
    assert not _spool(o, 'pronto') and not _spool(o, 'tomado')


def test_mudanca_no_log_acorda_o_ciclo_e_o_sigterm_sai_logo(tmp_path, banco,
                                                            ambiente_contextia,
                                                            chave_contextia):
    # Com --intervalo-dados de 10 min, só a espera que lê o log entrega em segundos.
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    e0 = o.erp.escopos[0]
    processo = o.iniciar('--intervalo-dados=600')
    try:
        esperar(lambda: _posicao(o), 30)
        esperar(lambda: 'esperando' in o.saida() or _status_json(o), 30)
        novo = o.inserir(e0, '2026-10-01 10:00:00')
        esperar(lambda: novo in _ids(o, e0), 20)
        outro = o.inserir(e0, '2026-10-01 10:00:00')
        esperar(lambda: outro in _ids(o, e0), 20)
    finally:
        inicio = time.monotonic()
        processo.send_signal(signal.SIGTERM)
        processo.wait(60)
    # Bloqueado no log, o SIGTERM ainda sai em segundos (o batimento do servidor).
    assert time.monotonic() - inicio < 10
    assert processo.returncode == 0, o.saida()[-2000:]


def test_kill9_com_o_contextia_fora_nada_perdido_nada_duplicado(tmp_path, banco,
                                                                ambiente_contextia,
                                                                chave_contextia):
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


def test_spool_cheio_pausa_a_captura_e_diz(tmp_path, banco, ambiente_contextia,
                                           chave_contextia, monkeypatch):
    monkeypatch.setenv('CONTEXTIA_SPOOL_MAXIMO_ITENS', '4')
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    e0 = o.erp.escopos[0]
    processo = o.iniciar()
    try:
        esperar(lambda: _posicao(o), 30)
        ambiente_contextia.parar()
        ids = {o.inserir(e0, '2026-10-01 10:00:00') for _ in range(10)}
        captura = esperar(lambda: ((_status_json(o) or {}).get('captura') or {}).get(
            'pausada'), 30)
        assert 'spool cheio' in captura and 'PAUSADA' in captura
        assert 'CAPTURA PAUSADA' in o.status()
        # Cheio no limite exato: 4 linhas no spool (em lotes), as outras 6 no log.
        assert _status_json(o)['captura']['spool_itens'] == 4
        assert _no_spool(o) == 4
        ambiente_contextia.iniciar()
        # Com o Contextia de volta o spool drena e a captura retoma sozinha.
        esperar(lambda: ids <= _ids(o, e0), 60)
        esperar(lambda: not ((_status_json(o) or {}).get('captura') or {}).get('pausada'), 30)
    finally:
        if ambiente_contextia.pid is None:
            ambiente_contextia.iniciar()
        _parar(processo)
    assert 'spool cheio' in o.saida()


def test_origem_sem_grant_ou_com_statement_e_recusada(tmp_path, mariadb_binlog,  # noqa: F811
                                                     ambiente_contextia, chave_contextia):
    (tmp_path / 'a').mkdir()
    (tmp_path / 'b').mkdir()
    sem_grant = mariadb_binlog.banco_de_teste(concessoes=())
    o = _ouvinte(tmp_path / 'a', sem_grant, ambiente_contextia, chave_contextia)
    codigo, saida = o.rodar(timeout=60)
    assert codigo == 2, saida
    assert 'REPLICATION SLAVE' in saida and 'Peça ao DBA' in saida
    mariadb_binlog.admin("SET GLOBAL binlog_format = 'STATEMENT'")
    try:
        o = _ouvinte(tmp_path / 'b', mariadb_binlog.banco_de_teste(), ambiente_contextia,
                     chave_contextia)
        codigo, saida = o.rodar(timeout=60)
    finally:
        mariadb_binlog.admin("SET GLOBAL binlog_format = 'ROW'")
    assert codigo == 2, saida
    assert 'binlog_format=STATEMENT' in saida and 'SET GLOBAL binlog_format=ROW' in saida


def test_posicao_apagada_e_detectada_e_vai_para_a_varredura(tmp_path, banco, mariadb_binlog,  # noqa: F811
                                                            ambiente_contextia,
                                                            chave_contextia):
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
        status = esperar(lambda: ((_status_json(o) or {}).get('captura') or {}).get('critico'),
                         30)
        assert 'apagada' in status
        assert DATASET in (_status_json(o) or {}).get('entregues_a_varredura', {})
        # Nunca adivinhada: a captura recomeca da posicao atual e segue viva.
        depois = o.inserir(e0, '2026-10-01 10:00:00')
        esperar(lambda: depois in _ids(o, e0), 30)
        feito = subprocess.run([sys.executable, 'ouvinte.py', '--saude',
                                '--estado=' + o.estado_dir], cwd=RAIZ, timeout=60,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        codigo, saude = feito.returncode, feito.stdout.decode('utf-8', 'replace')
        assert codigo == 2 and 'apagada' in saude, saude
    finally:
        _parar(processo)
    assert 'APAGADA' in o.saida()
    assert perdido not in _ids(o, e0)      # so a varredura o leva (nunca inventado)
