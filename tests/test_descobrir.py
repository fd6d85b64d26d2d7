"""
`descobrir` de verdade (subprocesso, como o operador roda) contra PostgreSQL,
MariaDB e SQLite reais: o esqueleto valida pelo mesmo carregar_mapeamento do
ouvinte, e o `connector.py --dry-run` -- que lê e serializa cada linha como o
envio real -- sai limpo sem editar nada além de escolher o cadastro.

Os esquemas: o Sakila em miniatura (tests/dados/sakila.py: views, tabela sem
chave primária, tabela sem coluna de alteração, array/SET, índice faltando),
o ERP da demo (demo/erp.py), o Protheus dos testes (tests/dados/protheus_pg.sql,
comparado com mappings/protheus.json) e o ERP de teste (tests/dados/erp.py).
"""

import json
import os
import subprocess
import sys

import pytest
import sqlalchemy as sa

from contextia_sync.mapeamento import carregar_mapeamento
from tests.dados import erp as erp_teste
from tests.dados import protheus as protheus_dados
from tests.dados import sakila

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BANCOS = [
    'sqlite',
    pytest.param('postgres', marks=pytest.mark.postgres),
    pytest.param('mariadb', marks=pytest.mark.mariadb),
]


def rodar(programa, url, *argv, ambiente=None):
    env = dict(os.environ, CONTEXTIA_ORIGEM=url) if url else dict(os.environ)
    if not url:
        env.pop('CONTEXTIA_ORIGEM', None)
    env.pop('CONTEXTIA_API_KEY', None)
    env.update(ambiente or {})
    feito = subprocess.run(
        [sys.executable, programa] + list(argv),
        cwd=RAIZ,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        timeout=180,
    )
    return (
        feito.returncode,
        feito.stdout.decode('utf-8', 'replace'),
        feito.stderr.decode('utf-8', 'replace'),
    )


def descobrir(url, saida, *argv, ambiente=None):
    return rodar('descobrir.py', url, '--saida=%s' % saida, *argv, ambiente=ambiente)


def seco(url, mapa, escopo):
    codigo, saida, erro = rodar(
        'connector.py', url, '--mapping=%s' % mapa, '--scope=%s' % escopo, '--dry-run'
    )
    return codigo, saida + erro


def por_objeto(mapa):
    return {row['source_object']: row for row in mapa['datasets']}


def mesmas_decisoes(gerado, exemplo):
    """O esqueleto decidiu como o humano que escreveu mappings/<exemplo>: dataset a dataset."""
    with open(os.path.join(RAIZ, 'mappings', exemplo), encoding='utf-8') as f:
        escrito = json.load(f)
    objetos = por_objeto(gerado)
    for row in escrito['datasets']:
        achado = objetos[row['source_object']]
        assert achado['columns'] == row['columns'], row['source_object']
        for campo in ('key', 'watch_column', 'scope_column'):
            assert achado[campo] == com_herda(escrito, row, campo), (row['source_object'], campo)
    for campo in ('source_object', 'scope_column', 'name_column', 'group_column'):
        assert gerado['projects'][campo] == escrito['projects'][campo], campo


def com_herda(mapa, row, campo):
    """O valor que vale para o dataset: o declarado, ou o herdado (key/watch herdada e fora
    de columns não vale -- docs/mapeamento.md, Herança)."""
    if campo in row:
        return row[campo]
    herdado = (mapa.get('defaults') or {}).get(campo)
    if campo != 'scope_column' and herdado not in row['columns']:
        return None
    return herdado


# ---------------------------------------------------------------- Sakila
@pytest.mark.lento
@pytest.mark.parametrize('tipo', BANCOS)
def test_sakila_esqueleto_valida_e_o_seco_sai_limpo(tipo, fabrica_de_bancos, tmp_path):
    banco = fabrica_de_bancos(tipo, 'sakila')
    sakila.criar(banco)
    arquivo = tmp_path / 'sakila.json'

    codigo, relatorio, erro = descobrir(banco.url_origem, arquivo, '--cadastro=store')
    assert codigo == 0, relatorio + erro
    mapa = carregar_mapeamento(str(arquivo))  # valida: schema e regras entre campos
    objetos = por_objeto(mapa)
    assert set(objetos) == {
        'actor',
        'address',
        'customer',
        'customer_list',
        'film',
        'film_actor',
        'film_list',
        'film_text',
        'inventory',
        'language',
        'payment',
        'staff',
        'store',
    }
    assert mapa['projects'] == {'source_object': 'store', 'scope_column': 'store_id'}

    # key: PK; composta e sem PK ficam sem, com o porque; view conferida na origem
    assert objetos['customer']['key'] == 'customer_id'
    assert objetos['film_actor']['key'] is None
    assert objetos['film_text']['key'] is None
    assert objetos['customer_list']['key'] == 'id'
    assert objetos['film_list']['key'] == 'fid'
    assert 'chave primária composta (actor_id, film_id)' in relatorio
    assert 'film_text: sem chave primária nem coluna única não nula' in relatorio
    # watch_column e indices
    assert objetos['customer']['watch_column'] == 'last_update'
    assert objetos['payment']['watch_column'] is None
    assert objetos['film_text']['watch_column'] is None
    assert objetos['film_list']['watch_column'] is None
    so_varredura = relatorio.split('só varredura')[1].split('\n\n')[0]
    for nome in ('film_text', 'payment', 'film_list'):
        assert nome in so_varredura, relatorio
    faltando = relatorio.split('índices faltando')[1].split('\n\n')[0]
    assert 'actor.last_update: CREATE INDEX' in faltando, relatorio
    # (store_id, last_update) nao serve a sonda: last_update nao e a primeira
    assert 'inventory.last_update: CREATE INDEX' in faltando, relatorio
    assert 'customer.last_update' not in faltando and 'film.last_update' not in faltando
    # escopo: por loja; o resto e dominio
    assert objetos['customer']['scope_column'] == 'store_id'
    assert objetos['customer_list']['scope_column'] == 'store_id'
    assert objetos['inventory']['scope_column'] == 'store_id'
    for dominio in ('actor', 'film', 'film_actor', 'film_list', 'payment', 'language'):
        assert objetos[dominio]['scope_column'] is None, dominio
    # colunas que o intake nao aceita ficam de fora, com o CAST no relatorio
    assert 'picture' not in objetos['staff']['columns']
    assert 'staff.picture' in relatorio
    if tipo != 'sqlite':
        assert 'special_features' not in objetos['film']['columns']
        assert 'special_features' not in objetos['film_list']['columns']
        assert 'location' not in objetos['address']['columns']
        expressao = (
            "array_to_string(special_features, ',') AS special_features"
            if tipo == 'postgres'
            else 'CAST(special_features AS CHAR)'
        )
        assert 'film.special_features' in relatorio and expressao in relatorio, relatorio
    if tipo == 'postgres':
        assert 'rental_period' not in objetos['film']['columns']
        assert 'preferencias' not in objetos['customer']['columns']
        assert 'fulltext' in objetos['film']['columns']  # tsvector vira texto

    # O seco le e serializa cada linha de cada dataset: limpo, sem editar nada.
    codigo, saida = seco(banco.url_origem, arquivo, '1')
    assert codigo == 0, saida
    assert '13 dataset(s), 13 ok, 0 com falha' in saida, saida

    if tipo == 'sqlite':
        return
    # A prova de que deixar de fora era preciso: com a coluna de volta, o seco recusa.
    objetos['film']['columns'].append('special_features')
    arquivo.write_text(json.dumps(mapa), encoding='utf-8')
    codigo, saida = seco(banco.url_origem, arquivo, '1')
    assert codigo == 1 and "coluna 'special_features'" in saida, saida


@pytest.mark.mariadb
def test_mariadb_login_so_select_reflete_as_views(fabrica_de_bancos, tmp_path):
    """Sem SHOW VIEW (o login que docs/origem.md pede), as views vem pelo SELECT vazio."""
    banco = fabrica_de_bancos('mariadb', 'sakila')
    sakila.criar(banco)
    usuario = 'leitor_' + banco.nome[-8:]
    banco.executar("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY 'Xq7-senha'" % usuario)
    try:
        banco.executar("GRANT SELECT ON `%s`.* TO '%s'@'127.0.0.1'" % (banco.nome, usuario))
        url = sa.engine.make_url(banco.url_origem).set(username=usuario, password='Xq7-senha')
        url = url.render_as_string(hide_password=False)
        arquivo = tmp_path / 'sakila.json'
        codigo, relatorio, erro = descobrir(url, arquivo, '--cadastro=store')
        assert codigo == 0, relatorio + erro
        objetos = por_objeto(carregar_mapeamento(str(arquivo)))
        assert objetos['customer_list']['columns'] == [
            'id',
            'name',
            'email',
            'store_id',
            'last_update',
        ]
        assert objetos['customer_list']['key'] == 'id'
        # A tabela (SHOW CREATE basta com SELECT) mostra o SET; a view, pelo SELECT vazio,
        # mostra texto -- e o adaptador, que a reflete igual, entrega texto: o seco passa.
        assert 'special_features' not in objetos['film']['columns']
        assert 'special_features' in objetos['film_list']['columns']
        assert 'Xq7-senha' not in relatorio + erro  # a senha nunca aparece
        codigo, saida = seco(url, arquivo, '2')
        assert codigo == 0, saida
    finally:
        banco.executar("DROP USER IF EXISTS '%s'@'127.0.0.1'" % usuario)


# ---------------------------------------------------------------- ERP da demo
@pytest.mark.lento
def test_erp_da_demo_da_o_mapeamento_da_demo(tmp_path):
    erp = str(tmp_path / 'erp.sqlite')
    feito = subprocess.run(
        [sys.executable, 'demo/erp.py', '--saida', erp, '--escala', '0.02'],
        cwd=RAIZ,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert feito.returncode == 0, feito.stdout + feito.stderr
    url = 'sqlite:///' + erp
    arquivo = tmp_path / 'demo.json'
    codigo, relatorio, erro = descobrir(url, arquivo, '--cadastro=EMPRESAS')
    assert codigo == 0, relatorio + erro
    # As decisoes que um humano tomou em mappings/demo.json, uma a uma.
    mesmas_decisoes(carregar_mapeamento(str(arquivo)), 'demo.json')
    # O que o humano tambem pos, o descobrir diz: o filtro de empresa ativa.
    assert '"filters": [{"column": "ATIVA", "equals": "S"}]' in relatorio
    assert 'EMPRESAS.ALTERADO_EM: CREATE INDEX' in relatorio

    codigo, saida = seco(url, arquivo, '10')
    assert codigo == 0, saida
    assert '7 dataset(s), 7 ok, 0 com falha' in saida, saida


# ---------------------------------------------------------------- Protheus
@pytest.mark.postgres
def test_protheus_da_o_mapeamento_do_exemplo(banco_postgres, tmp_path):
    url = protheus_dados.carregar(banco_postgres)
    arquivo = tmp_path / 'protheus.json'
    # O unico pedido: o cadastro (e o esquema das views que o DBA criou).
    codigo, relatorio, erro = descobrir(
        url, arquivo, '--esquema=CTX', '--cadastro=CTX.VW_CTX_FILIAIS'
    )
    assert codigo == 0, relatorio + erro
    mesmas_decisoes(carregar_mapeamento(str(arquivo)), 'protheus.json')
    # A SA1 repete a chave por filial: unica DENTRO do escopo, e assim foi conferida.
    assert 'CTX.VW_CTX_SA1.key: CTX_CHAVE' in relatorio
    assert 'dentro de cada CTX_ESCOPO' in relatorio
    assert 'D_E_L_E_T_' in relatorio.split('filters:')[1].split('\n')[0]

    codigo, saida = seco(url, arquivo, '0101')
    assert codigo == 0, saida
    assert '6 dataset(s), 6 ok, 0 com falha' in saida, saida


# ---------------------------------------------------------------- ERP de teste
@pytest.mark.parametrize('tipo', BANCOS)
def test_erp_de_teste_com_nomes_entre_aspas(tipo, fabrica_de_bancos, tmp_path):
    erp = erp_teste.Erp(fabrica_de_bancos(tipo))
    arquivo = tmp_path / 'erp.json'
    # Sem --cadastro: adivinhado (EMPRESAS tem a chave EMPRESA_ID, que TITULOS tambem tem).
    codigo, relatorio, erro = descobrir(erp.url, arquivo)
    assert codigo == 0, relatorio + erro
    assert 'cadastro de empresas: EMPRESAS (confirme com --cadastro)' in relatorio
    gerado = carregar_mapeamento(str(arquivo))
    with open(erp_teste.mapeamento(tmp_path), encoding='utf-8') as f:
        escrito = json.load(f)
    objetos = por_objeto(gerado)
    for row in escrito['datasets']:
        achado = objetos[row['source_object']]
        assert achado['columns'] == row['columns']
        for campo in ('key', 'watch_column', 'scope_column'):
            assert achado[campo] == com_herda(escrito, row, campo), (row['source_object'], campo)
    codigo, saida = seco(erp.url, arquivo, erp.escopos[0])
    assert codigo == 0, saida


# ---------------------------------------------------------------- de novo: a diferenca
def test_rodar_de_novo_mostra_a_diferenca_e_nao_sobrescreve(banco_sqlite, tmp_path):
    erp = erp_teste.Erp(banco_sqlite)
    arquivo = tmp_path / 'erp.json'
    codigo, relatorio, erro = descobrir(erp.url, arquivo, '--cadastro=EMPRESAS')
    assert codigo == 0, relatorio + erro
    original = arquivo.read_bytes()

    codigo, relatorio, erro = descobrir(erp.url, arquivo, '--cadastro=EMPRESAS')
    assert codigo == 0, relatorio + erro
    assert 'NÃO sobrescrito' in relatorio and '(nenhuma:' in relatorio, relatorio

    erp.executar('ALTER TABLE {TITULOS} ADD {DESCONTO} NUMERIC(12,2)')
    erp.executar('ALTER TABLE {TITULOS} DROP COLUMN {CLIENTE}')
    erp.executar('CREATE TABLE {FORNECEDORES} ({ID} INTEGER PRIMARY KEY, {NOME} TEXT)')
    codigo, relatorio, erro = descobrir(erp.url, arquivo, '--cadastro=EMPRESAS')
    # Coluna sumida: a carga daquele mapeamento falharia -> saida 1, e nada gravado.
    assert codigo == 1, relatorio + erro
    assert arquivo.read_bytes() == original
    linhas = relatorio.splitlines()
    assert any(
        '(TITULOS): coluna(s) novas no catálogo, fora de columns: DESCONTO' in x for x in linhas
    ), relatorio
    assert any('(TITULOS): coluna(s) que sumiram do catálogo: CLIENTE' in x for x in linhas), (
        relatorio
    )
    assert any(
        'objeto(s) novos no catálogo, fora do mapeamento: FORNECEDORES (tabela)' in x
        for x in linhas
    ), relatorio


# ---------------------------------------------------------------- os pedidos
def test_incluir_excluir_e_o_cadastro_fora_dos_padroes(banco_sqlite, tmp_path):
    sakila.criar(banco_sqlite)
    arquivo = tmp_path / 'filmes.json'
    codigo, relatorio, erro = descobrir(
        banco_sqlite.url_origem,
        arquivo,
        '--cadastro=STORE',
        '--incluir=FILM*',
        '--excluir=film_text',
    )
    assert codigo == 0, relatorio + erro
    mapa = carregar_mapeamento(str(arquivo))
    assert sorted(por_objeto(mapa)) == ['film', 'film_actor', 'film_list']
    # o cadastro vale mesmo fora de --incluir; o nome como o banco o guarda
    assert mapa['projects']['source_object'] == 'store'
    # nenhum dos incluidos tem store_id: a coluna do escopo veio do cadastro
    assert mapa['projects']['scope_column'] == 'store_id'


def test_chave_de_view_que_se_repete_nao_vira_key(banco_sqlite, tmp_path):
    erp = erp_teste.Erp(banco_sqlite)
    # Um ID que se repete dentro da mesma empresa (o UNION de duas tabelas).
    erp.executar(
        'CREATE VIEW {V_TUDO} AS SELECT {ID}, {EMPRESA_ID}, {ALTERADO_EM} FROM'
        ' {TITULOS} UNION ALL SELECT {ID}, {EMPRESA_ID}, {ALTERADO_EM} FROM {TITULOS}'
    )
    arquivo = tmp_path / 'erp.json'
    codigo, relatorio, erro = descobrir(erp.url, arquivo, '--cadastro=EMPRESAS')
    assert codigo == 0, relatorio + erro
    objetos = por_objeto(carregar_mapeamento(str(arquivo)))
    assert objetos['V_TUDO']['key'] is None
    assert 'V_TUDO: view: ID se repete dentro do escopo' in relatorio, relatorio
    # sem conferir, nenhuma view ganha key
    outro = tmp_path / 'sem.json'
    codigo, relatorio, erro = descobrir(
        erp.url, outro, '--cadastro=EMPRESAS', '--sem-conferir-chaves'
    )
    assert codigo == 0, relatorio + erro
    assert por_objeto(carregar_mapeamento(str(outro)))['V_TUDO']['key'] is None
    assert 'a unicidade não foi conferida' in relatorio


def test_escopo_pedido_e_recusas_com_a_correcao(banco_sqlite, tmp_path):
    erp = erp_teste.Erp(banco_sqlite)
    arquivo = tmp_path / 'erp.json'
    codigo, _saida, erro = descobrir(erp.url, arquivo, '--escopo=FILIAL')
    assert codigo == 2 and '--escopo FILIAL: nenhum objeto do catálogo tem essa coluna' in erro
    codigo, _saida, erro = descobrir(erp.url, arquivo, '--cadastro=EMPRESA')
    assert codigo == 2 and '--cadastro EMPRESA: nenhuma tabela ou view' in erro, erro
    assert 'EMPRESAS' in erro  # mostra o que existe
    codigo, _saida, erro = descobrir(erp.url, arquivo, '--esquema=erp')
    assert codigo == 2 and '--esquema erp: a origem não tem esse esquema' in erro, erro
    codigo, _saida, erro = descobrir(erp.url, arquivo, '--incluir=NADA*')
    assert codigo == 2 and 'nenhum objeto do catálogo virou dataset' in erro, erro
    erp.executar('CREATE VIEW {V_NOMES} AS SELECT {RAZAO_SOCIAL} FROM {EMPRESAS}')
    codigo, _saida, erro = descobrir(erp.url, arquivo, '--cadastro=V_NOMES')
    assert codigo == 2 and '--cadastro V_NOMES: o cadastro V_NOMES não tem EMPRESA_ID' in erro
    assert 'com --escopo COLUNA' in erro, erro
    codigo, _saida, erro = descobrir(erp.url, tmp_path / 'nao-ha' / 'x.json')
    assert codigo == 2 and 'a pasta' in erro and 'não existe' in erro, erro
    codigo, _saida, erro = descobrir(None, arquivo)
    assert codigo == 2 and 'Falta CONTEXTIA_ORIGEM' in erro, erro
    assert not arquivo.exists()

    # --escopo pedido: a coluna dita vale, e quem nao a tem e dominio.
    codigo, relatorio, erro = descobrir(
        erp.url, arquivo, '--escopo=empresa_id', '--cadastro=EMPRESAS'
    )
    assert codigo == 0, relatorio + erro
    mapa = carregar_mapeamento(str(arquivo))
    assert por_objeto(mapa)['TITULOS']['scope_column'] == 'EMPRESA_ID'
    assert por_objeto(mapa)['STATUS']['scope_column'] is None
    assert 'scope_column: EMPRESA_ID' not in relatorio  # pedido nao e palpite


def test_origem_fora_do_ar_sai_com_1(tmp_path):
    codigo, saida, erro = descobrir(
        'postgresql+psycopg://leitor:segredo@127.0.0.1:9/erp', tmp_path / 'x.json'
    )
    assert codigo == 1, saida + erro
    assert 'não conectou a origem' in erro and 'segredo' not in saida + erro
    assert not (tmp_path / 'x.json').exists()


def test_sem_saida_o_json_vai_para_a_saida_padrao(banco_sqlite):
    erp = erp_teste.Erp(banco_sqlite)
    codigo, saida, erro = rodar('descobrir.py', erp.url, '--cadastro=EMPRESAS')
    assert codigo == 0, saida + erro
    mapa = json.loads(saida)  # so o JSON na saida padrao
    assert mapa['projects']['source_object'] == 'EMPRESAS'
    assert 'palpites (confira):' in erro


def test_modulo_e_casca_dao_a_mesma_ajuda():
    casca = subprocess.run(
        [sys.executable, 'descobrir.py', '--help'],
        cwd=RAIZ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    modulo = subprocess.run(
        [sys.executable, '-m', 'contextia_sync.cli.descobrir', '--help'],
        cwd=RAIZ,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert casca.returncode == modulo.returncode == 0, casca.stderr + modulo.stderr
    for opcao in (
        '--saida',
        '--cadastro',
        '--escopo',
        '--incluir',
        '--excluir',
        '--esquema',
        '--cliente',
        '--sem-conferir-chaves',
        '--version',
    ):
        assert opcao in casca.stdout and opcao in modulo.stdout, opcao


# ---------------------------------------------------------------- sem servidor
def test_sql_server_e_oracle_pelo_dialeto():
    """Sem SQL Server nem Oracle aqui: as regras sobre os tipos e o SQL dos dialetos deles."""
    from sqlalchemy.dialects import mssql, oracle

    from contextia_sync.descoberta import regras, tipos
    from contextia_sync.descoberta.catalogo import Coluna, Indice, Objeto

    servidor = mssql.dialect()
    tabela = Objeto(
        'dbo',
        'TITULOS',
        False,
        [
            Coluna('ID', sa.Integer(), False),
            Coluna('EMPRESA_ID', sa.Integer(), False),
            Coluna('VERSAO', mssql.TIMESTAMP(), False),  # rowversion: pelo tipo
            Coluna('ANEXO', mssql.VARBINARY(), True),
            Coluna('DT_ALTERACAO', sa.String(19), True),  # nome certo, tipo texto
        ],
        ('ID',),
        [],
        [Indice('IX_EMP', ('EMPRESA_ID',), False)],
    )
    assert tipos.fora(tabela.colunas[2], servidor) is None
    recusa = tipos.fora(tabela.colunas[3], servidor)
    assert recusa is not None and 'CAST([ANEXO] AS NVARCHAR(MAX))' in recusa.correcao
    dentro = {'ID', 'EMPRESA_ID', 'VERSAO', 'DT_ALTERACAO'}
    escolha, notas = regras.escolher_carimbo(tabela, dentro)
    assert escolha.coluna == 'VERSAO' and not escolha.palpite
    assert any('DT_ALTERACAO tem nome de carimbo, mas é do tipo' in n for n in notas), notas
    sonda = regras.sonda(tabela, 'VERSAO', servidor)
    assert sonda.situacao == 'falta'
    assert sonda.criar == 'CREATE INDEX [IX_TITULOS_VERSAO] ON dbo.[TITULOS] ([VERSAO]);'
    assert regras.escolher_chave(tabela, dentro, servidor).coluna == 'ID'
    composta = Objeto(
        None,
        'ITENS',
        False,
        [Coluna('PEDIDO', sa.Integer(), False), Coluna('ITEM', sa.Integer(), False)],
        ('PEDIDO', 'ITEM'),
    )
    assert (
        "CONCAT([PEDIDO], '|', [ITEM]) AS CTX_CHAVE"
        in regras.escolher_chave(composta, {'PEDIDO', 'ITEM'}, servidor).porque
    )

    intervalo = tipos.fora(Coluna('PRAZO', oracle.INTERVAL(), True), oracle.dialect())
    assert intervalo is not None and intervalo.correcao == 'TO_CHAR(PRAZO) AS PRAZO'
    espacial = tipos.fora(
        Coluna('LOCAL', sa.types.NullType(), True, desconhecido='SDO_GEOMETRY'), oracle.dialect()
    )
    assert espacial is not None and 'SDO_UTIL.TO_WKTGEOMETRY(LOCAL)' in espacial.correcao
