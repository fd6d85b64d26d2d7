"""O mapeamento: herança do defaults, e cada erro dito com caminho e correção."""

import copy
import glob
import json
import os
import subprocess
import sys

import jsonschema
import pytest

from contextia_sync.mapeamento import (
    CAMINHO_SCHEMA,
    ErroMapeamento,
    carregar_mapeamento,
    chave_de,
    chunk_de,
    coluna_de_recorte,
    grupo_de,
    semantica,
    valor_herdado,
)

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

BASE = {
    '$schema': './mapeamento.schema.json',
    'client': 'teste',
    'source': {'excluded_scopes': ['99']},
    'listener': {'strategy': 'coluna'},
    'defaults': {
        'scope_column': 'EMPRESA_ID',
        'key': 'ID',
        'watch_column': 'ALTERADO_EM',
        'chunk': 200,
    },
    'projects': {
        'source_object': 'EMPRESAS',
        'name_column': 'RAZAO_SOCIAL',
        'filters': [{'column': 'ATIVA', 'equals': 'S'}],
    },
    'datasets': [
        {
            'dataset': 'Titulos a Receber',
            'source_object': 'TITULOS',
            'columns': ['ID', 'EMPRESA_ID', 'VALOR', 'ALTERADO_EM'],
            'fields': {'VALOR': 'valor em reais'},
            'group': 'financeiro',
        },
        {
            'dataset': 'Status',
            'source_object': 'STATUS',
            'columns': ['COD', 'NOME'],
            'key': 'COD',
            'scope_column': None,
            'watch_column': None,
            'chunk': 50,
        },
    ],
}


def gravar(tmp_path, mapa, nome='m.json'):
    caminho = tmp_path / nome
    caminho.write_text(mapa if isinstance(mapa, str) else json.dumps(mapa), encoding='utf-8')
    return str(caminho)


def problemas(tmp_path, mapa):
    with pytest.raises(ErroMapeamento) as erro:
        carregar_mapeamento(gravar(tmp_path, mapa))
    return erro.value.problemas


def com(**mudancas):
    """BASE com mudanças por caminho 'datasets.0.key' -> valor (None apaga com '__apagar__')."""
    mapa = copy.deepcopy(BASE)
    for caminho, valor in mudancas.items():
        partes = caminho.split('__')
        alvo = mapa
        for parte in partes[:-1]:
            alvo = alvo[int(parte)] if parte.isdigit() else alvo[parte]
        ultimo = partes[-1]
        if valor == '__apagar__':
            del alvo[int(ultimo) if ultimo.isdigit() else ultimo]
        else:
            alvo[int(ultimo) if ultimo.isdigit() else ultimo] = valor
    return mapa


def test_mapeamento_valido_volta_como_escrito(tmp_path):
    mapa = carregar_mapeamento(gravar(tmp_path, BASE))
    assert mapa == BASE
    # O defaults NAO e copiado: o ouvinte distingue watch_column declarada de herdada.
    assert 'watch_column' not in mapa['datasets'][0]
    assert mapa['datasets'][1]['watch_column'] is None


def test_heranca_do_defaults_e_null_que_desliga():
    titulos, status = BASE['datasets']
    assert coluna_de_recorte(BASE, titulos) == 'EMPRESA_ID'
    assert coluna_de_recorte(BASE, status) is None
    assert valor_herdado(BASE, titulos, 'watch_column') == 'ALTERADO_EM'
    assert valor_herdado(BASE, status, 'watch_column') is None
    assert chave_de(BASE, titulos) == 'ID'
    assert chave_de(BASE, status) == 'COD'
    assert chunk_de(BASE, titulos) == 200 and chunk_de(BASE, status) == 50
    assert chunk_de({'datasets': []}, {'columns': []}) == 500
    assert grupo_de(BASE, titulos) == 'financeiro' and grupo_de(BASE, status) is None
    assert semantica(BASE, titulos) == (None, {'VALOR': 'valor em reais'})
    assert semantica(BASE, status) == (None, None)


def test_key_herdada_fora_de_columns_vira_none_sem_erro(tmp_path):
    # Herdada e ausente: dedup por hash (o ouvinte avisa); declarada e ausente e erro.
    mapa = com(datasets__0__columns=['EMPRESA_ID', 'VALOR', 'ALTERADO_EM'])
    carregar_mapeamento(gravar(tmp_path, mapa))
    assert chave_de(mapa, mapa['datasets'][0]) is None


# Cada caso: (mudancas, caminho esperado no inicio do problema, trecho da correcao).
ERROS = {
    'key declarada fora de columns': (
        dict(datasets__0__key='ID_TITULO'),
        "datasets[0].key: 'ID_TITULO' não está em columns",
        'acrescente-a a columns',
    ),
    'watch_column declarada fora de columns': (
        dict(datasets__0__watch_column='ALTERADO'),
        "datasets[0].watch_column: 'ALTERADO' não está em columns",
        'era essa?',
    ),
    'scope_column herdada fora de columns': (
        dict(datasets__0__columns=['ID', 'VALOR', 'ALTERADO_EM']),
        "datasets[0].scope_column: 'EMPRESA_ID' (herdada do defaults) não está em columns",
        '"scope_column": null',
    ),
    'chave desconhecida (erro de digitação)': (
        dict(datasets__0__wacth_column='ALTERADO_EM'),
        "datasets[0].wacth_column: chave desconhecida 'wacth_column'",
        "você quis dizer 'watch_column'?",
    ),
    'chave desconhecida na raiz': (
        dict(default={}),
        "default: chave desconhecida 'default'",
        "você quis dizer 'defaults'?",
    ),
    'falta columns': (
        dict(datasets__1__columns='__apagar__'),
        "datasets[1].columns: falta 'columns'",
        'acrescente "columns"',
    ),
    'falta client': (dict(client='__apagar__'), "client: falta 'client'", 'acrescente'),
    'falta a regra de projeto': (
        dict(projects='__apagar__'),
        "projects: falta 'projects'",
        'cadastro de empresas',
    ),
    'chunk como texto': (
        dict(defaults__chunk='500'),
        'defaults.chunk: esperava inteiro, veio texto',
        'número vai sem aspas',
    ),
    'chunk fora do intervalo': (
        dict(datasets__1__chunk=50000),
        'datasets[1].chunk: 50000 fora do intervalo',
        'use de 1 a 10000',
    ),
    'dataset repetido depois de normalizar': (
        dict(datasets__1__dataset='Títulos  a receber'),
        "datasets[1].dataset: 'Títulos  a receber' vira 'titulos_a_receber'",
        'de nomes diferentes',
    ),
    'fields descreve coluna que não existe': (
        dict(datasets__0__fields={'VALR': 'valor'}),
        'datasets[0].fields.VALR: descreve uma coluna que não está em columns',
        "'VALOR'",
    ),
    'estratégia inexistente': (
        dict(listener__strategy='trigger'),
        "listener.strategy: 'trigger' não é um dos valores aceitos",
        'coluna, binlog',
    ),
    'nome de coluna com espaço': (
        dict(datasets__0__columns=['ID', 'EMPRESA_ID', 'VALOR TOTAL', 'ALTERADO_EM']),
        "datasets[0].columns[2]: 'VALOR TOTAL' não é válido",
        'sem espaços',
    ),
    'coluna repetida em columns': (
        dict(datasets__0__columns=['ID', 'EMPRESA_ID', 'ID', 'ALTERADO_EM']),
        'datasets[0].columns: valor repetido',
        'uma vez só',
    ),
    'lista de datasets vazia': (dict(datasets=[]), 'datasets: lista vazia', 'pelo menos 1'),
    'grupo que não é slug': (
        dict(datasets__0__group='Financeiro Geral'),
        "datasets[0].group: 'Financeiro Geral' não é válido",
        'slug',
    ),
    'filtro com duas condições': (
        dict(projects__filters=[{'column': 'ATIVA', 'equals': 'S', 'not_equals': 'N'}]),
        'projects.filters[0]: um filtro e "column" mais EXATAMENTE uma condição',
        'separe em dois filtros',
    ),
    'webhook http fora da máquina': (
        dict(webhook={'url': 'http://exemplo.com.br/x', 'secret_env': 'CONTEXTIA_WEBHOOK_SEGREDO'}),
        "webhook.url: 'http://exemplo.com.br/x' usa http:// fora desta máquina",
        'https://',
    ),
    'webhook com secret_env do próprio SDK': (
        dict(webhook={'url': 'https://exemplo.com.br/x', 'secret_env': 'CONTEXTIA_ORIGEM'}),
        'webhook.secret_env: CONTEXTIA_ORIGEM é uma variável do próprio SDK',
        'CONTEXTIA_WEBHOOK_SEGREDO',
    ),
    'webhook com secret_env que não é de webhook': (
        dict(webhook={'url': 'https://exemplo.com.br/x', 'secret_env': 'PGPASSWORD'}),
        'webhook.secret_env: PGPASSWORD não é uma variável dedicada a segredo de webhook',
        'começar com CONTEXTIA_WEBHOOK_',
    ),
    # O segredo de outra aplicação do mesmo servidor (issue 28): só o prefixo vale.
    'webhook com secret_env de outra aplicação': (
        dict(webhook={'url': 'https://exemplo.com.br/x', 'secret_env': 'APP_WEBHOOK_SECRET'}),
        'webhook.secret_env: APP_WEBHOOK_SECRET não é uma variável dedicada a segredo de webhook',
        'começar com CONTEXTIA_WEBHOOK_',
    ),
    'webhook sem secret_env': (
        dict(webhook={'url': 'https://exemplo.com.br/x'}),
        "webhook.secret_env: falta 'secret_env'",
        'o segredo nunca vai no mapeamento',
    ),
    'source_object com espaço': (
        dict(datasets__1__source_object='MINHA VIEW'),
        "datasets[1].source_object: 'MINHA VIEW' não é válido",
        'nome da view',
    ),
    'empresa excluída repetida': (
        dict(source__excluded_scopes=['99', 99]),
        'source.excluded_scopes[1]: 99 e a mesma empresa que o item [0]',
        'deixe um só',
    ),
    'regra de projeto sem coluna de empresa': (
        dict(defaults__scope_column='__apagar__', datasets__0__scope_column='EMPRESA_ID'),
        'projects.scope_column: não declarada e sem defaults.scope_column',
        'diga qual coluna',
    ),
}


@pytest.mark.parametrize('caso', sorted(ERROS))
def test_erro_de_mapeamento_diz_caminho_e_correcao(tmp_path, caso):
    mudancas, inicio, correcao = ERROS[caso]
    achados = problemas(tmp_path, com(**mudancas))
    alvo = [p for p in achados if p.startswith(inicio)]
    assert alvo, 'nenhum problema começa com %r: %r' % (inicio, achados)
    assert ' -- ' in alvo[0], 'sem correção: %r' % alvo[0]
    assert correcao in alvo[0].split(' -- ', 1)[1] or correcao in alvo[0], alvo[0]


def test_todos_os_problemas_de_uma_vez(tmp_path):
    mapa = com(
        datasets__0__key='ID_TITULO',
        datasets__1__watch_column='ALT',
        datasets__0__fields={'NADA': 'x'},
    )
    achados = problemas(tmp_path, mapa)
    assert len(achados) == 3, achados
    # E a mensagem da excecao lista todos, para o operador que so ve o texto.
    with pytest.raises(ErroMapeamento) as erro:
        carregar_mapeamento(gravar(tmp_path, mapa))
    assert str(erro.value).count('\n  - ') == 3


def test_json_invalido_diz_linha(tmp_path):
    achados = problemas(tmp_path, '{\n  "client": "x",\n  "datasets": [],\n}\n')
    assert achados[0].startswith('(linha 4, coluna 1): JSON inválido'), achados
    assert '$comment' in achados[0]


def test_chave_repetida_no_mesmo_objeto_e_erro(tmp_path):
    texto = json.dumps(BASE).replace(
        '"source_object": "TITULOS"', '"source_object": "TITULOS", "key": "A", "key": "ID"'
    )
    achados = problemas(tmp_path, texto)
    assert any("chave 'key' aparece duas vezes" in p for p in achados), achados


def test_arquivo_inexistente(tmp_path):
    with pytest.raises(ErroMapeamento) as erro:
        carregar_mapeamento(str(tmp_path / 'nao-ha.json'))
    assert 'não existe' in erro.value.problemas[0]


def test_comentario_e_aceito_em_todo_objeto(tmp_path):
    mapa = com(
        **{
            '$comment': 'x',
            'defaults__$comment': 'y',
            'datasets__0__$comment': 'z',
            'projects__filters': [{'column': 'ATIVA', 'equals': 'S', '$comment': 'w'}],
        }
    )
    carregar_mapeamento(gravar(tmp_path, mapa))


def test_schema_e_um_json_schema_valido():
    with open(CAMINHO_SCHEMA, encoding='utf-8') as f:
        jsonschema.Draft202012Validator.check_schema(json.load(f))


# mappings/mapeamento.schema.json e um link para o schema do pacote, nao um exemplo.
EXEMPLOS = sorted(
    c
    for c in glob.glob(os.path.join(RAIZ, 'mappings', '*.json'))
    if os.path.realpath(c) != os.path.realpath(CAMINHO_SCHEMA)
)


@pytest.mark.parametrize('caminho', EXEMPLOS, ids=os.path.basename)
def test_todo_exemplo_referencia_o_schema_e_e_valido(caminho):
    with open(caminho, encoding='utf-8') as f:
        assert json.load(f).get('$schema') == './mapeamento.schema.json'
    carregar_mapeamento(caminho)


def test_funcoes_puras_rodam_sem_pacote_nenhum():
    # O `ouvinte.py --autoteste` roda em `python3 -S`: importar o modulo nao pode
    # puxar jsonschema/requests/sqlalchemy.
    codigo = (
        'import sys; sys.path.insert(0, %r)\n'
        'from contextia_sync.mapeamento import coluna_de_recorte, semantica\n'
        'from contextia_sync.provisionamento import regra_projeto\n'
        'assert coluna_de_recorte({"defaults": {"scope_column": "E"}}, {}) == "E"\n'
        'assert not {"jsonschema", "requests", "sqlalchemy"} & set(sys.modules)\n' % RAIZ
    )
    subprocess.run([sys.executable, '-S', '-c', codigo], check=True)


# ---------------------------------------------------------------- uma passada so
def test_schema_e_semantica_numa_passada_so(tmp_path):
    # Um erro de schema (chave desconhecida) e um semantico (key fora de columns):
    # os dois na MESMA recusa, nao um por execucao.
    mapa = com(defaults__kye='ID', datasets__0__key='ID_TITULO')
    with pytest.raises(ErroMapeamento) as erro:
        carregar_mapeamento(gravar(tmp_path, mapa))
    achados = erro.value.problemas
    assert any(p.startswith("defaults.kye: chave desconhecida 'kye'") for p in achados), achados
    assert any(p.startswith("datasets[0].key: 'ID_TITULO' não está em columns") for p in achados), (
        achados
    )
    assert len(achados) == 2, achados
    assert str(erro.value).count('\n  - ') == 2


def test_forma_errada_nao_repete_o_problema_com_outras_palavras(tmp_path):
    # Sem columns, a regra "key fora de columns" nao tem o que julgar: so o schema fala.
    mapa = com(datasets__1__columns='__apagar__')
    achados = problemas(tmp_path, mapa)
    assert [p for p in achados if p.startswith('datasets[1]')] == [
        p for p in achados if p.startswith("datasets[1].columns: falta 'columns'")
    ], achados
    assert len(achados) == 1, achados
    # columns de tipo errado: idem (o schema diz o tipo; a key nao e julgada contra um texto).
    achados = problemas(tmp_path, com(datasets__0__columns='ID', datasets__0__key='ID'))
    assert len(achados) == 1 and achados[0].startswith('datasets[0].columns: esperava'), achados
    # Nome de coluna invalido na key: um problema (o do nome), nao tambem "fora de columns".
    achados = problemas(tmp_path, com(datasets__0__key='ID TITULO'))
    assert len(achados) == 1 and achados[0].startswith(
        "datasets[0].key: 'ID TITULO' não é válido"
    ), achados


FORMAS_ERRADAS = {
    'datasets objeto': dict(datasets={'a': 1}),
    'dataset texto': dict(datasets__0='TITULOS'),
    'defaults lista': dict(defaults=['EMPRESA_ID']),
    'projects texto': dict(projects='EMPRESAS'),
    'webhook url número': dict(webhook={'url': 5, 'secret_env': 'CONTEXTIA_WEBHOOK_SEGREDO'}),
    'webhook lista': dict(webhook=['https://x']),
    'fields lista': dict(datasets__0__fields=['VALOR']),
    'nome do dataset número': dict(datasets__0__dataset=5),
    'scope_column número': dict(defaults__scope_column=7),
    'key lista': dict(datasets__0__key=['ID']),
    'excluidos com objeto': dict(source__excluded_scopes=[{'a': 1}, [1], '99']),
    'source lista': dict(source=['99']),
    'columns com número': dict(datasets__0__columns=['ID', 5, 'EMPRESA_ID', 'ALTERADO_EM']),
    'name_column número': dict(projects__name_column=3),
}


@pytest.mark.parametrize('caso', sorted(FORMAS_ERRADAS))
def test_forma_errada_vira_problema_e_o_semantico_ainda_aparece(tmp_path, caso):
    # As regras entre campos rodam sobre um JSON meio errado sem traceback, e o
    # problema semantico de OUTRO lugar (datasets[1].watch_column) continua la.
    mapa = com(**FORMAS_ERRADAS[caso])
    if isinstance(mapa.get('datasets'), list) and len(mapa['datasets']) > 1:
        mapa['datasets'][1]['watch_column'] = 'ALT'
    achados = problemas(tmp_path, mapa)
    assert achados and all(' -- ' in p for p in achados), achados
    if isinstance(mapa.get('datasets'), list) and len(mapa['datasets']) > 1:
        assert any(
            p.startswith("datasets[1].watch_column: 'ALT' não está em columns") for p in achados
        ), achados
    assert len(achados) == len(set(achados)), achados


# ----------------------------------------------------------- o fim do identificador
# O `$` do re do Python (o jsonschema usa re.search) casa antes de um \n no fim:
# "TITULOS\n" passava no schema. Cada nome do mapeamento, com \n no fim, e recusado.
COM_NEWLINE = [
    ('datasets__0__source_object', 'TITULOS\n', 'datasets[0].source_object'),
    ('datasets__0__source_object', 'ERP.TITULOS\n', 'datasets[0].source_object'),
    ('datasets__0__columns', ['ID', 'EMPRESA_ID\n'], 'datasets[0].columns[1]'),
    ('defaults__scope_column', 'EMPRESA_ID\n', 'defaults.scope_column'),
    ('datasets__0__key', 'ID\n', 'datasets[0].key'),
    ('projects__source_object', 'EMPRESAS\n', 'projects.source_object'),
    ('datasets__0__group', 'financeiro\n', 'datasets[0].group'),
]


@pytest.mark.parametrize('caminho, valor, onde', COM_NEWLINE)
def test_nome_com_newline_no_fim_e_recusado_pelo_schema(tmp_path, caminho, valor, onde):
    achados = problemas(tmp_path, com(**{caminho: valor}))
    assert any(p.startswith(onde + ':') and 'não é válido' in p for p in achados), achados
    # o proprio schema recusa (o editor que valida pelo $schema ve o mesmo)
    with open(CAMINHO_SCHEMA, encoding='utf-8') as f:
        schema = json.load(f)
    erros = list(jsonschema.Draft202012Validator(schema).iter_errors(com(**{caminho: valor})))
    padroes = [e.validator for e in erros] + [s.validator for e in erros for s in e.context]
    assert 'pattern' in padroes, erros


def test_padroes_de_nome_valem_igual_em_ecma_e_em_python():
    """
    Os `pattern` do schema rodam em dois motores: o re do Python (jsonschema,
    re.search) e o RegExp do ECMA (o editor que valida pelo $schema). O fim
    do texto tem de ser o mesmo nos dois -- o \\n final recusado, o nome certo aceito.
    """
    import re
    import shutil

    with open(CAMINHO_SCHEMA, encoding='utf-8') as f:
        defs = json.load(f)['$defs']
    casos = {
        'coluna': (['EMPRESA_ID', 'C$1', 'COD#'], ['EMPRESA_ID\n', 'A B', '1A', '']),
        'objeto': (['TITULOS', 'ERP.TITULOS'], ['TITULOS\n', 'ERP.TITULOS\n', 'A.B.C']),
        'grupo': (['financeiro', 'a-b_1'], ['financeiro\n', 'Financeiro', '']),
    }
    for nome, (bons, ruins) in casos.items():
        padrao = defs[nome]['pattern']
        for bom in bons:
            assert re.search(padrao, bom), (nome, bom)
        for ruim in ruins:
            assert not re.search(padrao, ruim), (nome, ruim)
    node = shutil.which('node')
    if node is None:
        pytest.skip('sem node para conferir os padrões no motor ECMA (apt-get install nodejs)')
    programa = (
        'const casos = JSON.parse(process.argv[1]); const saida = {};'
        'for (const [nome, [padrao, textos]] of Object.entries(casos))'
        '  saida[nome] = textos.map(t => new RegExp(padrao, "u").test(t));'
        'console.log(JSON.stringify(saida));'
    )
    entrada = {nome: [defs[nome]['pattern'], bons + ruins] for nome, (bons, ruins) in casos.items()}
    feito = subprocess.run(
        [node, '-e', programa, json.dumps(entrada)], capture_output=True, text=True, timeout=60
    )
    assert feito.returncode == 0, feito.stderr
    resultado = json.loads(feito.stdout)
    for nome, (bons, ruins) in casos.items():
        assert resultado[nome] == [True] * len(bons) + [False] * len(ruins), (nome, resultado)


def test_base_tables_pela_key_ou_pelo_cabecalho(tmp_path):
    # O item pela key, a nota pela coluna que o item guarda: aceito, e tipado.
    from contextia_sync.captura import tabelas_base_do_dataset

    bases = ['ITENS', {'table': 'NOTAS', 'column': 'ID', 'dataset_column': 'NOTA_ID'}]
    mapa = com(**{'datasets__0__base_tables': bases})
    mapa['datasets'][0]['columns'].append('NOTA_ID')
    lido = carregar_mapeamento(gravar(tmp_path, mapa))
    item, nota = tabelas_base_do_dataset(lido['datasets'][0], 'ID')
    assert (item.nome, item.coluna, item.coluna_do_dataset, item.pela_chave) == (
        'ITENS',
        'ID',
        'ID',
        True,
    )
    assert (nota.nome, nota.coluna, nota.coluna_do_dataset, nota.pela_chave) == (
        'NOTAS',
        'ID',
        'NOTA_ID',
        False,
    )


def test_base_tables_validadas_na_subida(tmp_path):
    # A coluna do dataset por onde o cabeçalho relê os itens tem de estar em columns
    # (antes, a nota mudada ia ao spool com o id dela como key de item).
    nota = {'table': 'NOTAS', 'column': 'ID', 'dataset_column': 'NOTA_ID'}
    achados = problemas(tmp_path, com(**{'datasets__0__base_tables': ['ITENS', nota]}))
    assert any(
        "base_tables[1].dataset_column: 'NOTA_ID' não está em columns" in p for p in achados
    ), achados
    # Só cabeçalhos: a inclusão e a exclusão de um item nunca viriam do log.
    mapa = com(**{'datasets__0__base_tables': [nota]})
    mapa['datasets'][0]['columns'].append('NOTA_ID')
    achados = problemas(tmp_path, mapa)
    assert any('nenhuma tabela chega pela key' in p for p in achados), achados
