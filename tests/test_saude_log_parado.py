"""
O log da captura com o ouvinte PARADO: o status congela no número da última
volta, e o banco do cliente segue andando. A saúde (`ouvinte.py --saude`) mede
agora na origem, somente leitura, com o login de CONTEXTIA_ORIGEM: o WAL que o
slot retém (`slot_logico`, num PostgreSQL privado com wal_level=logical) e o
binlog depois da posição salva (`binlog`, num MariaDB privado) -- e alerta no
número de verdade, dizendo que mediu. Com o ouvinte de pé, o número é o do
status. Sem como medir (sem a variável, a origem fora), diz, sem traceback.
"""

import json
import os
import re
import subprocess
import sys
import uuid

import pytest

from contextia_local.processo import porta_livre
from tests.apoio.captura_log import parar as _parar
from tests.apoio.mariadb_binlog import mariadb_binlog  # noqa: F401 - fixture de sessao
from tests.apoio.ouvinte import RAIZ, Ouvinte, esperar
from tests.apoio.postgres_logico import postgres_logico  # noqa: F401 - fixture de sessao
from tests.dados import erp as erp_teste

pytestmark = [pytest.mark.lento]

MIB = 1024 * 1024


def _saude(ouvinte, *limites, origem=None):
    """`ouvinte.py --saude` de verdade: (código, a linha). `origem` None: sem a variável."""
    env = dict(os.environ)
    env.pop('CONTEXTIA_ORIGEM', None)
    if origem is not None:
        env['CONTEXTIA_ORIGEM'] = origem
    feito = subprocess.run(
        [sys.executable, 'ouvinte.py', '--saude', '--estado=' + ouvinte.estado_dir] + list(limites),
        cwd=RAIZ,
        env=env,
        timeout=60,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    return feito.returncode, feito.stdout.decode('utf-8', 'replace')


def _perf(linha, nome):
    achado = re.search(r'\b%s=(\d+)B' % nome, linha)
    return int(achado.group(1)) if achado else None


def _captura_no_status(ouvinte):
    try:
        with open(os.path.join(ouvinte.estado_dir, 'ouvinte-status.json')) as arquivo:
            return json.load(arquivo).get('captura') or {}
    except FileNotFoundError:  # a primeira volta ainda não terminou
        return {}


def _ouvinte(tmp_path, banco, contextia, chave_contextia, estrategia):
    ouvinte = Ouvinte(
        tmp_path, erp_teste.Erp(banco, titulos_por_empresa=(3, 2)), contextia, chave_contextia
    )
    with open(ouvinte.mapa, encoding='utf-8') as arquivo:
        mapa = json.load(arquivo)
    # O slot é do cluster inteiro: um cliente por teste.
    mapa['client'] = 'teste_' + uuid.uuid4().hex[:8]
    mapa['listener'] = {'strategy': estrategia}
    with open(ouvinte.mapa, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo)
    ouvinte.slot = 'contextia_' + mapa['client']
    ouvinte.banco = banco
    return ouvinte


def _escrever(ouvinte, linhas):
    """`linhas` títulos novos numa transação só (na tabela seguida), ~100 bytes cada."""
    primeiro = ouvinte.proximo_id + 1
    ouvinte.proximo_id += linhas
    ouvinte.erp.executar(
        'INSERT INTO {TITULOS} VALUES (:i, :e, :c, :v, :d, :a)',
        lote=[
            {
                'i': i,
                'e': int(ouvinte.erp.escopos[0]),
                'c': 'Lote %d %s' % (i, 'x' * 45),
                'v': '10.00',
                'd': '2026-10-01',
                'a': '2026-10-01 10:00:00',
            }
            for i in range(primeiro, primeiro + linhas)
        ],
    )


# ================================================================ slot_logico
@pytest.fixture
def banco_pg(postgres_logico):  # noqa: F811
    banco = postgres_logico.banco_de_teste()
    yield banco
    # Slot esquecido retém WAL do cluster inteiro: nenhum sobra de um teste.
    postgres_logico.admin(
        'SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots'
        " WHERE database = '%s' AND NOT active" % banco.nome
    )


def _slot_pronto(tmp_path, banco, contextia, chave_contextia):
    o = _ouvinte(tmp_path, banco, contextia, chave_contextia, 'slot_logico')
    o.erp.executar('ALTER TABLE {TITULOS} REPLICA IDENTITY FULL')
    feito = subprocess.run(
        o.argv('--criar-slot'),
        cwd=RAIZ,
        env=dict(o.env(), CONTEXTIA_ORIGEM_DBA=banco.url_admin),
        timeout=60,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    assert feito.returncode == 0, feito.stdout
    return o


def _retido_no_banco(o):
    return int(
        o.banco.servidor.admin(
            'SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint'
            " FROM pg_replication_slots WHERE slot_name = '%s'" % o.slot
        )[0][0]
    )


@pytest.mark.postgres
def test_slot_com_o_ouvinte_parado_mede_o_wal_na_origem_e_alerta(
    tmp_path, banco_pg, ambiente_contextia, chave_contextia
):
    o = _slot_pronto(tmp_path, banco_pg, ambiente_contextia, chave_contextia)
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    no_status = _captura_no_status(o)['wal_retido_bytes']
    assert no_status is not None and no_status < MIB, no_status
    # Parado, o banco segue: mais de 1 MiB de WAL na tabela seguida, que ninguém consome.
    _escrever(o, 20000)
    antes = _retido_no_banco(o)
    assert antes > MIB, antes
    limites = ('--wal-alerta=%d' % MIB, '--wal-critico=%d' % (1024 * MIB))
    codigo, linha = _saude(o, *limites, origem=o.erp.url)
    medido = _perf(linha, 'wal_retido')
    assert codigo == 1 and 'medido agora na origem' in linha, linha
    assert 'o slot %s retém' % o.slot in linha and 'o ouvinte não está rodando' in linha, linha
    # O número é o do banco agora (a saúde mesma gera um pouco de WAL), não o do status.
    assert antes <= medido <= _retido_no_banco(o) and medido > 4 * no_status, (antes, medido)
    assert _captura_no_status(o)['wal_retido_bytes'] == no_status  # o status não é reescrito
    # Cresce com o banco, e o CRÍTICO vem do número medido.
    _escrever(o, 20000)
    codigo, linha = _saude(
        o, '--wal-alerta=%d' % MIB, '--wal-critico=%d' % (2 * MIB), origem=o.erp.url
    )
    assert codigo == 2 and _perf(linha, 'wal_retido') > medido + MIB, (medido, linha)
    # Abaixo dos limites: OK, e a linha diz que o número foi medido agora.
    codigo, linha = _saude(o, origem=o.erp.url)
    assert codigo == 0 and 'WAL retido pelo slot %s' % o.slot in linha, linha
    assert 'medido agora na origem' in linha, linha


@pytest.mark.postgres
def test_slot_sem_como_medir_diz_e_o_slot_apagado_e_critico(
    tmp_path, banco_pg, ambiente_contextia, chave_contextia
):
    o = _slot_pronto(tmp_path, banco_pg, ambiente_contextia, chave_contextia)
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    # Sem CONTEXTIA_ORIGEM no ambiente da saúde: ALERTA dizendo, com o número do status.
    codigo, linha = _saude(o)
    assert codigo == 1 and 'não medido agora na origem' in linha, linha
    assert 'CONTEXTIA_ORIGEM não está definida' in linha and 'Traceback' not in linha, linha
    assert _perf(linha, 'wal_retido') is not None, linha
    # A origem fora do ar (uma porta onde nada escuta): ALERTA, sem traceback.
    fora = re.sub(r'@127\.0\.0\.1:\d+/', '@127.0.0.1:%d/' % porta_livre(), o.erp.url)
    codigo, linha = _saude(o, origem=fora)
    assert codigo == 1 and 'não mediu na origem de CONTEXTIA_ORIGEM' in linha, linha
    assert 'Traceback' not in linha and 'leitor-slot' not in linha, linha  # nem a senha
    # O slot apagado com o ouvinte parado: o status nada sabe; a medida diz CRÍTICO.
    banco_pg.servidor.admin("SELECT pg_drop_replication_slot('%s')" % o.slot)
    codigo, linha = _saude(o, origem=o.erp.url)
    assert codigo == 2 and 'o slot %s não existe na origem' % o.slot in linha, linha
    assert '--criar-slot' in linha, linha


@pytest.mark.postgres
def test_slot_com_o_ouvinte_rodando_usa_o_status(
    tmp_path, banco_pg, ambiente_contextia, chave_contextia
):
    o = _slot_pronto(tmp_path, banco_pg, ambiente_contextia, chave_contextia)
    processo = o.iniciar()
    try:
        esperar(lambda: (_captura_no_status(o).get('wal_retido_bytes') or 0) > 0, 60)
        # A origem apontada para onde nada escuta: com o ouvinte de pé a saúde nem tenta.
        fora = re.sub(r'@127\.0\.0\.1:\d+/', '@127.0.0.1:%d/' % porta_livre(), o.erp.url)
        codigo, linha = _saude(o, '--wal-alerta=1', origem=fora)
        assert codigo == 1 and 'lido do status de' in linha, linha
        assert 'medido agora' not in linha and 'não mediu' not in linha, linha
    finally:
        _parar(processo)


# ================================================================ binlog
@pytest.fixture
def banco_mariadb(mariadb_binlog):  # noqa: F811
    return mariadb_binlog.banco_de_teste()


@pytest.mark.mariadb
def test_binlog_com_o_ouvinte_parado_mede_a_distancia_e_a_posicao_apagada(
    tmp_path,
    banco_mariadb,
    mariadb_binlog,  # noqa: F811
    ambiente_contextia,
    chave_contextia,
):
    o = _ouvinte(tmp_path, banco_mariadb, ambiente_contextia, chave_contextia, 'binlog')
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    with open(os.path.join(o.estado_dir, 'binlog-posicao.json')) as arquivo:
        salva = json.load(arquivo)['gtid']
    assert salva
    # O DBA roda o log: a posição salva fica no começo do arquivo novo, e a conta é exata.
    mariadb_binlog.admin('FLUSH BINARY LOGS')
    limites = ('--wal-alerta=%d' % MIB, '--wal-critico=%d' % (1024 * MIB))
    codigo, linha = _saude(o, *limites, origem=o.erp.url)
    assert codigo == 0 and _perf(linha, 'binlog_pendente') == 0, linha
    arquivo_da_posicao, inicio = mariadb_binlog.admin('SHOW MASTER STATUS')[0][:2]
    _escrever(o, 20000)
    escrito = int(mariadb_binlog.admin('SHOW MASTER STATUS')[0][1]) - int(inicio)
    assert escrito > MIB, escrito
    codigo, linha = _saude(o, *limites, origem=o.erp.url)
    medido = _perf(linha, 'binlog_pendente')
    assert codigo == 1 and 'medido agora na origem' in linha, linha
    assert 'o binlog tem' in linha and salva in linha and arquivo_da_posicao in linha, linha
    assert escrito <= medido <= escrito + 64 * 1024, (escrito, medido)
    # Cresce; e atravessa a rotação do log (os arquivos depois do da posição somam).
    mariadb_binlog.admin('FLUSH BINARY LOGS')
    _escrever(o, 20000)
    codigo, linha = _saude(
        o, '--wal-alerta=%d' % MIB, '--wal-critico=%d' % (2 * MIB), origem=o.erp.url
    )
    assert codigo == 2 and _perf(linha, 'binlog_pendente') > medido + MIB, (medido, linha)
    # Sem CONTEXTIA_ORIGEM: diz que não mediu.
    codigo, linha = _saude(o, *limites)
    assert codigo == 1 and 'não medido agora na origem' in linha, linha
    # O DBA apaga os arquivos até o atual: a posição salva sumiu da origem -- CRÍTICO
    # já, antes da volta do ouvinte (o status nada sabe disso).
    mariadb_binlog.admin('FLUSH BINARY LOGS')
    atual = mariadb_binlog.admin('SHOW MASTER STATUS')[0][0]

    def apagado():
        # O MariaDB só apaga o arquivo antigo depois do checkpoint do InnoDB nele.
        mariadb_binlog.admin("PURGE BINARY LOGS TO '%s'" % atual)
        return [linha[0] for linha in mariadb_binlog.admin('SHOW BINARY LOGS')] == [atual]

    esperar(apagado, 30)
    codigo, linha = _saude(o, origem=o.erp.url)
    assert codigo == 2 and 'já foi APAGADA da origem' in linha and salva in linha, linha
    assert not (_captura_no_status(o).get('critico')), 'o status não sabia: a medida disse'
