"""
A linha que o ERP apaga MARCANDO (`deleted_when`): o D_E_L_E_T_ = '*' do Protheus.

Processos de verdade -- connector.py, ouvinte.py (e a varredura dele, que roda
provisionar.py e carregar-todas.sh), o Contextia local -- sobre SQLite,
PostgreSQL e MariaDB, com um login SÓ-SELECT no PostgreSQL e no MariaDB:

  * a carga completa (`--scope`, e `--todas` pela varredura) não lê a linha
    marcada, e o `sync` + `complete` tira do Contextia a linha que foi marcada;
    o seco conta as marcadas; NULL na marca é linha viva;
  * ao vivo, na `coluna`: marcar a linha (e mover o S_T_A_M_P_) a remove do
    Contextia no ciclo seguinte, da empresa dela, com SELECT e nada mais;
  * a chave reusada (a linha velha marcada, uma nova viva com a mesma chave):
    o Contextia fica com a viva, nas duas ordens de leitura, e também quando a
    marcada é lida num ciclo depois da viva, e na carga completa;
  * a `reconciliacao` conta a linha marcada como ausente: ela sai.

E, sem processo, o que decide: o Python (`MarcaDeApagado.apagada`) e o SQL
(`origem/consultas.py: estado_da_marca`) dizem a mesma coisa de cada valor em
cada banco, e o mapeamento recusa a marca fora de `columns`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import sqlalchemy as sa

from contextia_sync.intake import cliente, transporte
from contextia_sync.mapeamento import ErroMapeamento, carregar_mapeamento
from contextia_sync.origem.generico import Origem
from contextia_sync.origem.marca_apagada import MarcaDeApagado
from tests.apoio import bancos
from tests.apoio.ouvinte import RAIZ, Ouvinte
from tests.dados import erp as erp_teste

pytestmark = pytest.mark.lento

DATASET = 'titulos_protheus'
BANCOS = [
    'sqlite',
    pytest.param('postgres', marks=pytest.mark.postgres),
    pytest.param('mariadb', marks=pytest.mark.mariadb),
]
# Os testes de processo (carga, ao-vivo) rodam num banco cada: o SQL da marca em
# cada dialeto é provado pelo `test_o_sql_e_o_python_marcam_as_mesmas_linhas`, nos
# três, e o que vem depois da leitura não depende do banco (a suíte cabe em 10 min).
POSTGRES = [pytest.param('postgres', marks=pytest.mark.postgres)]
MARIADB = [pytest.param('mariadb', marks=pytest.mark.mariadb)]
MARCA = {'column': 'D_E_L_E_T_', 'equals': '*'}
TABELA = (
    'CREATE TABLE {TITULOS_SE} ({R_E_C_N_O_} INTEGER PRIMARY KEY, {EMPRESA_ID} INTEGER,'
    ' {CHAVE} VARCHAR(20), {VALOR} NUMERIC(12,2), {D_E_L_E_T_} CHAR(1) NULL,'
    ' {S_T_A_M_P_} TIMESTAMP NULL)'
)
# Linhas que só estão lá para o teto do complete (removida uma de poucas passaria dele).
ENCHIMENTO = 6


# ---------------------------------------------------------------------------
# o ERP em miniatura: a TITULOS_SE (a SE1) ao lado do cadastro do ERP de teste
# ---------------------------------------------------------------------------


def _mapeamento(pasta):
    """O mapeamento do ERP de teste: a TITULOS_SE (a SE1) no lugar dos títulos, e a marca."""
    with open(erp_teste.mapeamento(pasta), encoding='utf-8') as arquivo:
        mapa = json.load(arquivo)
    mapa['defaults']['deleted_when'] = MARCA
    status = mapa['datasets'][1]
    status['deleted_when'] = None  # o domínio não tem a marca: desliga a herdada
    mapa['datasets'] = [
        {
            'dataset': 'Titulos Protheus',
            'source_object': 'TITULOS_SE',
            'columns': ['EMPRESA_ID', 'CHAVE', 'VALOR', 'D_E_L_E_T_', 'S_T_A_M_P_'],
            'key': 'CHAVE',
            'watch_column': 'S_T_A_M_P_',
        },
        status,
    ]
    caminho = os.path.join(str(pasta), 'protheus-marca.json')
    with open(caminho, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo)
    return caminho


def _login_so_select(banco):
    """(URL de um login que só tem SELECT nas três tabelas, soltar); o SQLite não tem login."""
    if banco.tipo == 'sqlite':
        return banco.url_origem, lambda: None
    nome = 'leitor_' + banco.nome[-8:]
    url = sa.engine.make_url(banco.url_origem)
    if banco.tipo == 'postgres':
        banco.executar('CREATE ROLE %s LOGIN' % nome)
        banco.executar('GRANT CONNECT ON DATABASE %s TO %s' % (banco.nome, nome))
        banco.executar('GRANT USAGE ON SCHEMA public TO %s' % nome)
        banco.executar('GRANT SELECT ON "TITULOS_SE", "EMPRESAS", "STATUS" TO %s' % nome)

        def soltar():
            banco.executar('DROP OWNED BY %s' % nome)
            motor = bancos._motor_admin('postgres', None)
            with motor.connect() as conn:
                conn.exec_driver_sql('DROP ROLE IF EXISTS %s' % nome)
            motor.dispose()

        return url.set(username=nome).render_as_string(hide_password=False), soltar
    banco.executar("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY 'leitura'" % nome)
    for tabela in ('TITULOS_SE', 'EMPRESAS', 'STATUS'):
        banco.executar("GRANT SELECT ON `%s`.`%s` TO '%s'@'127.0.0.1'" % (banco.nome, tabela, nome))
    url = url.set(username=nome, password='leitura')
    return url.render_as_string(hide_password=False), lambda: banco.executar(
        "DROP USER IF EXISTS '%s'@'127.0.0.1'" % nome
    )


@pytest.fixture
def novo(tmp_path, fabrica_de_bancos, ambiente_contextia, chave_contextia):
    """novo(tipo) -> um Ouvinte sobre o ERP de teste com a TITULOS_SE, lendo com login só-SELECT."""
    soltar = []

    def criar(tipo):
        erp = erp_teste.Erp(fabrica_de_bancos(tipo, 'marca'), titulos_por_empresa=(1, 1))
        erp.executar(TABELA)
        erp.url, solta = _login_so_select(erp.banco)
        soltar.append((erp, solta))
        o = Ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia)
        o.mapa = _mapeamento(tmp_path)
        o.proximo = 1000
        return o

    yield criar
    for erp, solta in soltar:
        erp.fechar()
        solta()


def inserir(o, escopo, chave, valor='1.00', marca=' ', stamp='2026-11-01 10:00:00', recno=None):
    """Uma linha na TITULOS_SE; devolve o R_E_C_N_O_."""
    if recno is None:
        o.proximo += 1
        recno = o.proximo
    o.erp.executar(
        'INSERT INTO {TITULOS_SE} VALUES (:r, :e, :c, :v, :d, :s)',
        r=recno,
        e=int(escopo),
        c=chave,
        v=valor,
        d=marca,
        s=stamp,
    )
    return recno


def encher(o, escopo):
    for n in range(ENCHIMENTO):
        inserir(o, escopo, 'F%s-%d' % (escopo, n))


def marcar(o, recno, stamp=None):
    """O ERP apaga a linha: D_E_L_E_T_ = '*' (e o DBAccess move o S_T_A_M_P_, se dado)."""
    if stamp is None:
        o.erp.executar(
            "UPDATE {TITULOS_SE} SET {D_E_L_E_T_} = '*' WHERE {R_E_C_N_O_} = :r", r=recno
        )
    else:
        o.erp.executar(
            "UPDATE {TITULOS_SE} SET {D_E_L_E_T_} = '*', {S_T_A_M_P_} = :s WHERE {R_E_C_N_O_} = :r",
            r=recno,
            s=stamp,
        )


def no_contextia(o, escopo):
    """{CHAVE: registro} do dataset no projeto da empresa."""
    try:
        return {r['CHAVE']: r for r in cliente.ler_registros(DATASET, o.chaves[escopo])}
    except transporte.ErroContextia:
        return {}


def sem_enchimento(registros):
    return {c for c in registros if not c.startswith('F')}


def once(o, *extra):
    codigo, saida = o.rodar('--once', *extra)
    assert codigo == 0, saida
    return saida


def conector(o, escopo, *extra):
    env = dict(o.env(), CONTEXTIA_API_KEY=o.chaves[escopo])
    feito = subprocess.run(
        [
            sys.executable,
            'connector.py',
            '--mapping=' + o.mapa,
            '--source=generic',
            '--scope=' + escopo,
            *extra,
        ],
        cwd=RAIZ,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=180,
    )
    saida = feito.stdout.decode('utf-8', 'replace')
    assert feito.returncode == 0, saida
    return saida


# ---------------------------------------------------------------------------
# (1) a carga completa
# ---------------------------------------------------------------------------


@pytest.mark.parametrize('tipo', POSTGRES)
def test_carga_completa_nao_le_a_marcada_e_o_complete_tira_a_que_foi_marcada(novo, tipo):
    o = novo(tipo)
    e0, e1 = o.erp.escopos
    viva = inserir(o, e0, 'K1')
    inserir(o, e0, 'K2', marca='*')
    inserir(o, e0, 'K3', marca=None)  # NULL na marca: viva
    depois = inserir(o, e0, 'K4')
    inserir(o, e1, 'K5')
    apagada_depois = inserir(o, e1, 'K6')
    inserir(o, e1, 'K7', marca='*')
    encher(o, e0)
    encher(o, e1)

    saida = conector(o, e0, '--dry-run')
    assert '1 linhas marcadas como apagadas em %s' % DATASET in saida, saida
    saida = conector(o, e0)
    assert sem_enchimento(no_contextia(o, e0)) == {'K1', 'K3', 'K4'}, saida

    # O seco de todas as empresas numa leitura (carregar-todas.sh --dry-run).
    feito = subprocess.run(
        ['bash', 'carregar-todas.sh', o.arquivo_chaves, '--dry-run'],
        cwd=RAIZ,
        env=dict(o.env(), CONTEXTIA_MAPPING=o.mapa, CONTEXTIA_PYTHON=sys.executable),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=180,
    )
    saida = feito.stdout.decode('utf-8', 'replace')
    assert feito.returncode == 0 and '2 linhas marcadas como apagadas em %s' % DATASET in saida, (
        saida
    )

    # A varredura (provisionar + carregar-todas.sh --todas: uma leitura para todas).
    saida = once(o, '--varrer-agora')
    assert sem_enchimento(no_contextia(o, e0)) == {'K1', 'K3', 'K4'}, saida
    assert sem_enchimento(no_contextia(o, e1)) == {'K5', 'K6'}, saida

    # Marcadas depois da carga (sem mexer no S_T_A_M_P_: a carga não olha a marca
    # de água): o complete da carga seguinte as tira.
    marcar(o, depois)
    saida = conector(o, e0)
    assert sem_enchimento(no_contextia(o, e0)) == {'K1', 'K3'}, saida
    assert 'removidos=1' in saida, saida
    marcar(o, apagada_depois)
    saida = once(o, '--varrer-agora')
    assert sem_enchimento(no_contextia(o, e1)) == {'K5'}, saida
    assert sem_enchimento(no_contextia(o, e0)) == {'K1', 'K3'}, saida
    assert viva  # a K1 nunca saiu


# ---------------------------------------------------------------------------
# (2) ao vivo, na coluna
# ---------------------------------------------------------------------------


@pytest.mark.parametrize('tipo', MARIADB)
def test_marcar_a_linha_a_tira_do_contextia_no_ciclo_seguinte(novo, tipo):
    o = novo(tipo)
    e0, e1 = o.erp.escopos
    k1 = inserir(o, e0, 'K1')
    inserir(o, e0, 'K2')
    inserir(o, e1, 'K1')  # a mesma chave em outra empresa: não é com ela
    once(o, '--varrer-agora')
    assert sem_enchimento(no_contextia(o, e0)) == {'K1', 'K2'}

    marcar(o, k1, stamp='2026-11-01 10:05:00')
    saida = once(o)
    assert sem_enchimento(no_contextia(o, e0)) == {'K2'}, saida
    assert sem_enchimento(no_contextia(o, e1)) == {'K1'}, saida
    assert 'removidas=1' in saida, saida
    # A marca de água andou: o ciclo seguinte não manda nada de novo.
    assert o.estado()['marca_agua'][DATASET].startswith('2026-11-01T10:05'), o.estado()

    # Uma linha nova já marcada (inserida assim) nunca chega ao Contextia.
    inserir(o, e0, 'K9', marca='*', stamp='2026-11-01 10:06:00')
    saida = once(o)
    assert sem_enchimento(no_contextia(o, e0)) == {'K2'}, saida


def test_na_combinada_a_marcada_sai_uma_vez_e_a_nova_marcada_nao_entra(novo):
    o = novo('sqlite')
    e0 = o.erp.escopos[0]
    combinada = ('--estrategia=coluna+reconciliacao', '--intervalo-reconciliacao=0')
    k1 = inserir(o, e0, 'K1')
    inserir(o, e0, 'K2')
    encher(o, e0)
    once(o, '--varrer-agora', *combinada)
    assert sem_enchimento(no_contextia(o, e0)) == {'K1', 'K2'}

    # As duas leem no mesmo ciclo: a reconciliação não acha a K1 no conjunto, a
    # coluna a lê marcada. Uma remoção só; e a K3, nascida marcada, não entra.
    marcar(o, k1, stamp='2026-11-01 10:05:00')
    inserir(o, e0, 'K3', marca='*', stamp='2026-11-01 10:05:00')
    saida = once(o, *combinada)
    assert sem_enchimento(no_contextia(o, e0)) == {'K2'}, saida
    assert 'removidas=1 ' in saida, saida


# ---------------------------------------------------------------------------
# (3) a chave reusada: a viva vence
# ---------------------------------------------------------------------------


def _ordem_lida(o, chave):
    """As marcas das linhas de `chave` na ordem em que a origem as devolve pela key."""
    origem = Origem(o.erp.url, timeout=30)
    try:
        linhas = origem.fetch('TITULOS_SE', ['CHAVE', 'D_E_L_E_T_'], chaves=('CHAVE', [chave]))
        return [(linha['D_E_L_E_T_'] or ' ').strip() or 'viva' for linha in linhas]
    finally:
        origem.fechar()


@pytest.mark.parametrize('ordem', ['marcada_primeiro', 'viva_primeiro'])
@pytest.mark.parametrize('tipo', POSTGRES)
def test_chave_reusada_o_contextia_fica_com_a_viva(novo, tipo, ordem):
    o = novo(tipo)
    e0 = o.erp.escopos[0]
    velha = inserir(o, e0, 'K1', valor='1.00', recno=500)
    encher(o, e0)
    once(o, '--varrer-agora')
    assert no_contextia(o, e0)['K1']['VALOR'] == '1.00'

    # O ERP apaga a K1 (marca) e reusa a chave numa linha nova, no mesmo ciclo.
    # A ordem física (R_E_C_N_O_, e a ordem das operações no heap do PostgreSQL)
    # decide qual das duas a leitura traz primeiro. A nova tem a marca NULL (viva):
    # pela regra da key repetida (intake/chaves.py: o menor JSON canônico) a
    # marcada venceria -- o '*' vem antes do null --, e quem decide aqui é a marca.
    stamp = '2026-11-01 10:05:00'
    if ordem == 'marcada_primeiro':
        marcar(o, velha, stamp=stamp)
        inserir(o, e0, 'K1', valor='2.00', marca=None, stamp=stamp, recno=900)
        assert _ordem_lida(o, 'K1') == ['*', 'viva']
    else:
        inserir(o, e0, 'K1', valor='2.00', marca=None, stamp=stamp, recno=100)
        marcar(o, velha, stamp=stamp)
        assert _ordem_lida(o, 'K1') == ['viva', '*']
    saida = once(o)
    assert no_contextia(o, e0)['K1']['VALOR'] == '2.00', saida

    # A marcada lida num ciclo DEPOIS da viva (o S_T_A_M_P_ dela andou de novo):
    # a origem ainda tem a K1 viva, e a remoção não sai.
    o.erp.executar(
        'UPDATE {TITULOS_SE} SET {S_T_A_M_P_} = :s WHERE {R_E_C_N_O_} = :r',
        s='2026-11-01 10:10:00',
        r=velha,
    )
    saida = once(o)
    assert no_contextia(o, e0)['K1']['VALOR'] == '2.00', saida
    assert 'removidas=' not in saida, saida

    # A carga completa: a marcada nem é lida.
    saida = conector(o, e0)
    assert no_contextia(o, e0)['K1']['VALOR'] == '2.00', saida
    assert 'registros=%d ' % (1 + ENCHIMENTO) in saida and 'removidos=0' in saida, saida


# ---------------------------------------------------------------------------
# (4) a reconciliação
# ---------------------------------------------------------------------------


@pytest.mark.parametrize('tipo', MARIADB)
def test_reconciliacao_conta_a_marcada_como_apagada(novo, tipo):
    o = novo(tipo)
    e0, e1 = o.erp.escopos
    k1 = inserir(o, e0, 'K1')
    inserir(o, e0, 'K2', marca=None)
    k3 = inserir(o, e1, 'K3')
    encher(o, e0)
    encher(o, e1)
    reconciliacao = ('--estrategia=reconciliacao', '--intervalo-reconciliacao=0')
    once(o, '--varrer-agora', *reconciliacao)
    assert sem_enchimento(no_contextia(o, e0)) == {'K1', 'K2'}

    # Marcadas sem mexer no S_T_A_M_P_: a reconciliação não olha a coluna de mudança.
    marcar(o, k1)
    marcar(o, k3)
    saida = once(o, *reconciliacao)
    assert sem_enchimento(no_contextia(o, e0)) == {'K2'}, saida
    assert sem_enchimento(no_contextia(o, e1)) == set(), saida

    # A chave reusada: a K1 velha segue marcada, uma nova viva entra; fica.
    inserir(o, e0, 'K1', valor='3.00')
    saida = once(o, *reconciliacao)
    assert no_contextia(o, e0)['K1']['VALOR'] == '3.00', saida
    saida = once(o, *reconciliacao)
    assert no_contextia(o, e0)['K1']['VALOR'] == '3.00', saida


# ---------------------------------------------------------------------------
# o Python e o SQL dizem o mesmo de cada valor
# ---------------------------------------------------------------------------

CONDICOES = [
    {'column': 'TEXTO', 'equals': '*'},
    {'column': 'TEXTO', 'not_equals': ' '},
    {'column': 'TEXTO', 'in': ['*', 'c']},
    {'column': 'TEXTO', 'not_in': ['', 'A']},
    {'column': 'TEXTO', 'not_empty': True},
    {'column': 'TEXTO', 'equals': ''},
    {'column': 'NUMERO', 'equals': 9},
    {'column': 'NUMERO', 'in': ['9', 0]},
    {'column': 'ATIVO', 'equals': False},
    {'column': 'ATIVO', 'not_equals': True},
]
VALORES = [
    (1, '*', 9, True),
    (2, ' ', 0, False),
    (3, '*  ', 1, True),
    (4, ' * ', None, None),
    (5, None, 9, False),
    (6, '', 10, True),
    (7, 'C', 90, False),
    (8, 'c', 9, True),
    (9, 'A', -9, False),
]


@pytest.mark.parametrize('tipo', BANCOS)
def test_o_sql_e_o_python_marcam_as_mesmas_linhas(tipo, fabrica_de_bancos):
    banco = fabrica_de_bancos(tipo, 'paridade')
    aspa = '`' if tipo == 'mariadb' else '"'
    # O booleano do PostgreSQL vira 'true'/'false' no CAST; nos outros, 1/0.
    booleano = 'BOOLEAN' if tipo == 'postgres' else 'SMALLINT'
    banco.executar(
        'CREATE TABLE marcas (id INTEGER PRIMARY KEY, {a}TEXTO{a} VARCHAR(5) NULL,'
        ' {a}NUMERO{a} INTEGER NULL, {a}ATIVO{a} {b} NULL)'.format(a=aspa, b=booleano)
    )
    for ident, texto, numero, ativo in VALORES:
        banco.executar(
            'INSERT INTO marcas VALUES (:i, :t, :n, :a)',
            {'i': ident, 't': texto, 'n': numero, 'a': ativo},
        )
    origem = Origem(banco.url_origem, timeout=30)
    try:
        todas = list(origem.fetch('marcas', ['id', 'TEXTO', 'NUMERO', 'ATIVO']))
        assert len(todas) == len(VALORES)
        for condicao in CONDICOES:
            marca = MarcaDeApagado.do_dataset({}, {'deleted_when': condicao})
            assert marca is not None
            pelo_python = {linha['id'] for linha in todas if marca.apagada(linha)}
            vivas = {linha['id'] for linha in origem.fetch('marcas', ['id'], sem_apagadas=marca)}
            assert vivas == {linha['id'] for linha in todas} - pelo_python, (condicao, todas)
            assert origem.contar('marcas', so_apagadas=marca) == len(pelo_python), condicao
            assert origem.contar('marcas', sem_apagadas=marca) == len(vivas), condicao
            # NULL na coluna da marca é viva, seja qual for a condição.
            nulas = {linha['id'] for linha in todas if linha[condicao['column']] is None}
            assert nulas <= vivas, condicao
    finally:
        origem.fechar()


def test_a_viva_vence_a_marcada_de_mesma_chave_em_qualquer_ordem():
    marca = MarcaDeApagado.do_dataset({'defaults': {'deleted_when': MARCA}}, {})
    assert marca is not None
    velha = {'CHAVE': 'K1', 'D_E_L_E_T_': '*', 'VALOR': 1}
    nova = {'CHAVE': 'K1', 'D_E_L_E_T_': ' ', 'VALOR': 2}
    so_marcada = {'CHAVE': 'K2', 'D_E_L_E_T_': '* '}
    nula = {'CHAVE': 'K3', 'D_E_L_E_T_': None}
    sem_chave = {'CHAVE': None, 'D_E_L_E_T_': '*'}
    leitura = [velha, nova, so_marcada, nula, sem_chave]
    for linhas in (leitura, leitura[::-1]):
        vivas, apagadas = marca.escolher(linhas, 'CHAVE')
        assert sorted(v['CHAVE'] for v in vivas) == ['K1', 'K3']
        assert [v['VALOR'] for v in vivas if v['CHAVE'] == 'K1'] == [2]
        assert apagadas == [so_marcada]
    # Com a empresa: a viva de outra empresa não salva a marcada desta.
    outra = dict(nova, EMPRESA='02')
    vivas, apagadas = marca.escolher([dict(velha, EMPRESA='01 '), outra], 'CHAVE', 'EMPRESA')
    assert vivas == [outra] and apagadas == [dict(velha, EMPRESA='01 ')]
    # `null` no dataset desliga a herdada.
    herdada = {'defaults': {'deleted_when': MARCA}}
    assert MarcaDeApagado.do_dataset(herdada, {'deleted_when': None}) is None


# ---------------------------------------------------------------------------
# o mapeamento
# ---------------------------------------------------------------------------


def test_marca_fora_de_columns_e_recusada_com_a_correcao(tmp_path):
    caminho = _mapeamento(tmp_path)
    assert carregar_mapeamento(caminho)['defaults']['deleted_when'] == MARCA
    with open(caminho, encoding='utf-8') as arquivo:
        mapa = json.load(arquivo)
    del mapa['datasets'][1]['deleted_when']  # o Status herda a marca que não tem
    mapa['datasets'][0]['deleted_when'] = {'column': 'D_E_L_E_T', 'equals': '*'}
    with open(caminho, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo)
    with pytest.raises(ErroMapeamento) as erro:
        carregar_mapeamento(caminho)
    problemas = erro.value.problemas
    assert any(
        p.startswith("datasets[0].deleted_when.column: 'D_E_L_E_T' (declarada) não está em columns")
        and 'era essa?' in p
        for p in problemas
    ), problemas
    assert any(
        p.startswith("datasets[1].deleted_when.column: 'D_E_L_E_T_' (herdada do defaults)")
        and '"deleted_when": null' in p
        for p in problemas
    ), problemas
