"""
O que o `connector.py --dry-run` prova (issue 12, item 11), com processos e bancos
de verdade:

  * cada linha passa pela MESMA serialização do envio real (text[] do PostgreSQL,
    SET do MariaDB, NaN float e numeric): o seco sai com 1 nomeando dataset,
    escopo, coluna, tipo, a key da linha e a correção -- e a carga real recusa o
    mesmo;
  * toda coluna do mapeamento e conferida no catálogo ANTES de ler, todas de uma
    vez, com o nome mais parecido;
  * empresa que não está no cadastro (`projects`) e recusada (saída 2), no seco
    e na carga real; a que está mas a regra recusa (inativa) carrega, dito numa
    linha;
  * o resumo leva o motivo de cada dataset que falhou.
"""

import json
import re

import pytest

from contextia_sync.carga import completa
from contextia_sync.origem.generico import Origem
from tests.dados import erp as erp_teste
from tests.test_connector import conector, no_servidor


def mapear(pasta, mudar=None):
    """O mapeamento do ERP de teste, com `mudar(mapa)` aplicado antes de gravar."""
    caminho = erp_teste.mapeamento(pasta)
    with open(caminho, encoding='utf-8') as f:
        mapa = json.load(f)
    if mudar is not None:
        mudar(mapa)
    with open(caminho, 'w', encoding='utf-8') as f:
        json.dump(mapa, f)
    return caminho


def com_coluna(nome):
    """Mudança: `nome` entra nas colunas de Titulos a Receber."""

    def mudar(mapa):
        mapa['datasets'][0]['columns'].append(nome)

    return mudar


def linha_resumo(saida):
    achadas = [linha for linha in saida.splitlines() if linha.startswith('resumo escopo=')]
    assert len(achadas) == 1, saida
    return achadas[0]


def ids_da_empresa(erp, escopo):
    return [
        r[0]
        for r in erp.executar(
            'SELECT {ID} FROM {TITULOS} WHERE {EMPRESA_ID} = :e ORDER BY {ID}', e=int(escopo)
        )
    ]


# ------------------------------------------------------------ serializacao
TIPOS_QUE_NAO_SERIALIZAM = {
    # banco: (DDL da coluna, valor em SQL, tipo Python que o driver devolve)
    'postgres': ('text[]', "ARRAY['urgente', 'revisar']", 'list'),
    'mariadb': ("SET('urgente', 'revisar', 'pago')", "'urgente,revisar'", 'set'),
}


@pytest.mark.parametrize(
    'tipo',
    [
        pytest.param('postgres', marks=pytest.mark.postgres),
        pytest.param('mariadb', marks=pytest.mark.mariadb),
    ],
)
def test_seco_recusa_o_que_a_carga_real_recusa(tipo, fabrica_de_bancos, tmp_path, chave_contextia):
    erp = erp_teste.Erp(fabrica_de_bancos(tipo))
    ddl, valor, tipo_python = TIPOS_QUE_NAO_SERIALIZAM[tipo]
    erp.executar('ALTER TABLE {TITULOS} ADD {TAGS} %s NULL' % ddl)
    escopo = erp.escopos[0]
    ids = ids_da_empresa(erp, escopo)
    # Duas linhas envenenadas no meio (nao na primeira): o seco conta todas.
    envenenadas = [ids[5], ids[20]]
    for ident in envenenadas:
        erp.executar('UPDATE {TITULOS} SET {TAGS} = %s WHERE {ID} = :i' % valor, i=ident)
    mapa = mapear(tmp_path, com_coluna('TAGS'))

    codigo, saida = conector(erp, mapa, escopo, None, '--dry-run')
    assert codigo == 1, saida
    assert 'FALHOU' in saida, saida
    assert '2 de 45 linha(s)' in saida, saida
    # Cada recusa nomeia dataset, escopo, coluna, tipo, a key da linha e a correcao.
    for ident in envenenadas:
        alvo = [linha for linha in saida.splitlines() if 'ID=%d' % ident in linha]
        assert alvo, saida
        assert 'titulos_a_receber' in alvo[0] and 'escopo=%s' % escopo in alvo[0], alvo[0]
        assert "coluna 'TAGS'" in alvo[0] and tipo_python in alvo[0], alvo[0]
        assert 'CAST(' in alvo[0], alvo[0]
    # O resumo leva o motivo, nao so o nome.
    resumo = linha_resumo(saida)
    assert re.search(r'FALHARAM: titulos_a_receber \(.*TAGS.*\)', resumo), resumo
    # O outro dataset (dominio) passa.
    assert re.search(r'status \(domínio\)\s+registros=3 ', saida), saida

    # A carga real recusa o mesmo: saida 1, a coluna nomeada, complete nao enviado.
    chave = chave_contextia(escopo)
    codigo, saida = conector(erp, mapa, escopo, chave)
    assert codigo == 1, saida
    assert "'TAGS'" in saida and tipo_python in saida, saida
    assert 'complete NÃO enviado' in saida, saida
    assert re.search(r'FALHARAM: titulos_a_receber \(.*TAGS.*\)', linha_resumo(saida)), saida

    # Com a view de CAST que a mensagem pede, o seco passa.
    erp.executar(
        'CREATE VIEW {TITULOS_V} AS SELECT {ID}, {EMPRESA_ID}, {CLIENTE}, {VALOR},'
        ' {VENCIMENTO}, {ALTERADO_EM}, CAST({TAGS} AS %s) AS {TAGS} FROM {TITULOS}'
        % ('TEXT' if tipo == 'postgres' else 'CHAR')
    )

    def pela_view(m):
        com_coluna('TAGS')(m)
        m['datasets'][0]['source_object'] = 'TITULOS_V'

    codigo, saida = conector(erp, mapear(tmp_path, pela_view), escopo, None, '--dry-run')
    assert codigo == 0, saida


@pytest.mark.postgres
def test_seco_nomeia_nan_float_e_numeric(banco_postgres, tmp_path):
    erp = erp_teste.Erp(banco_postgres)
    erp.executar('ALTER TABLE {TITULOS} ADD {TAXA} double precision, ADD {SALDO} numeric')
    escopo = erp.escopos[1]
    ids = ids_da_empresa(erp, escopo)
    erp.executar("UPDATE {TITULOS} SET {TAXA} = 'NaN' WHERE {ID} = :i", i=ids[3])
    erp.executar("UPDATE {TITULOS} SET {SALDO} = 'NaN' WHERE {ID} = :i", i=ids[7])
    erp.executar("UPDATE {TITULOS} SET {TAXA} = 'Infinity' WHERE {ID} = :i", i=ids[9])

    def mudar(mapa):
        mapa['datasets'][0]['columns'] += ['TAXA', 'SALDO']

    codigo, saida = conector(erp, mapear(tmp_path, mudar), escopo, None, '--dry-run')
    assert codigo == 1, saida
    assert '3 de 30 linha(s)' in saida, saida
    linhas = saida.splitlines()
    taxa = [x for x in linhas if 'ID=%d' % ids[3] in x]
    saldo = [x for x in linhas if 'ID=%d' % ids[7] in x]
    infinito = [x for x in linhas if 'ID=%d' % ids[9] in x]
    assert taxa and "coluna 'TAXA'" in taxa[0] and 'nan' in taxa[0], saida
    assert saldo and "coluna 'SALDO'" in saldo[0] and 'Decimal' in saldo[0], saida
    assert infinito and "coluna 'TAXA'" in infinito[0] and 'inf' in infinito[0], saida
    assert 'NULL' in taxa[0], taxa[0]


# ------------------------------------------------------------ catalogo
def test_coluna_digitada_errada_aparece_com_a_sugestao_antes_de_ler(banco_sqlite, tmp_path):
    erp = erp_teste.Erp(banco_sqlite)

    def mudar(mapa):
        titulos, status = mapa['datasets']
        # Duas erradas no mesmo dataset, uma no outro; 'cliente' em minusculas vale
        # (o adaptador resolve sem caixa, como um SQL sem aspas).
        titulos['columns'] = ['ID', 'EMPRESA_ID', 'cliente', 'VALR', 'VENCIMENTOS', 'ALTERADO_EM']
        titulos['fields'] = {'VALR': 'valor em reais'}
        status['columns'] = ['COD', 'NOMEE']

    codigo, saida = conector(erp, mapear(tmp_path, mudar), erp.escopos[0], None, '--dry-run')
    assert codigo == 1, saida
    linhas = saida.splitlines()
    valr = [i for i, x in enumerate(linhas) if "'VALR'" in x and "'VALOR'" in x]
    venc = [i for i, x in enumerate(linhas) if "'VENCIMENTOS'" in x and "'VENCIMENTO'" in x]
    nome = [i for i, x in enumerate(linhas) if "'NOMEE'" in x and "'NOME'" in x]
    assert valr and venc and nome, saida
    assert 'fields' in linhas[valr[0]], linhas[valr[0]]
    assert not any("'cliente'" in x for x in linhas), saida
    # Antes de qualquer leitura: nenhum dataset foi lido (os dois tem problema).
    primeira_leitura = [i for i, x in enumerate(linhas) if 'registros=' in x]
    assert primeira_leitura and max(valr + venc + nome) < primeira_leitura[0], saida
    assert 'registros=0' in saida
    assert re.search(r'FALHARAM: titulos_a_receber \(.*VALR', linha_resumo(saida)), saida


def test_conferir_colunas_para_o_ouvinte(banco_sqlite, tmp_path):
    """A função que o `ouvinte.py --dry-run` chama: todos os problemas numa lista."""
    from contextia_sync.mapeamento import carregar_mapeamento

    erp = erp_teste.Erp(banco_sqlite)

    def mudar(mapa):
        mapa['projects']['name_column'] = 'RAZAO'
        mapa['datasets'][0]['columns'][3] = 'valor'  # caixa diferente: vale
        mapa['datasets'][0]['fields'] = {'valor': 'x'}
        mapa['datasets'][1]['columns'] = ['COD', 'NOM']
        mapa['datasets'].append(
            {'dataset': 'Sumida', 'source_object': 'VW_QUE_NAO_HA', 'columns': ['ID', 'EMPRESA_ID']}
        )

    mapa = carregar_mapeamento(mapear(tmp_path, mudar))
    origem = Origem(erp.url).conectar()
    try:
        problemas = completa.conferir_colunas(mapa, origem)
    finally:
        origem.fechar()
    assert len(problemas) == 3, problemas
    texto = '\n'.join(problemas)
    assert 'projects' in texto and "'RAZAO'" in texto and "'RAZAO_SOCIAL'" in texto, texto
    assert 'status' in texto and "'NOM'" in texto and "'NOME'" in texto, texto
    assert 'VW_QUE_NAO_HA' in texto and 'sumida' in texto, texto
    assert "'valor'" not in texto, texto


# ------------------------------------------------------------ escopo
def test_escopo_que_nao_existe_no_cadastro_e_recusado(banco_sqlite, tmp_path, chave_contextia):
    erp = erp_teste.Erp(banco_sqlite)
    mapa = mapear(tmp_path)
    fantasma = str(erp.base + 97)
    codigo, saida = conector(erp, mapa, fantasma, None, '--dry-run')
    assert codigo == 2, saida
    assert 'empresa %s' % fantasma in saida and 'EMPRESAS' in saida, saida
    assert erp.escopos[0] in saida, saida  # as que existem, algumas
    assert 'registros=' not in saida, saida

    # Carga real: recusada antes de enviar (hoje a tabela de dominio iria inteira).
    chave = chave_contextia(fantasma)
    codigo, saida = conector(erp, mapa, fantasma, chave)
    assert codigo == 2, saida
    assert 'EMPRESAS' in saida and chave not in saida, saida
    assert no_servidor(chave) == {}


def test_empresa_que_a_regra_recusa_carrega_e_diz(banco_sqlite, tmp_path):
    erp = erp_teste.Erp(banco_sqlite)
    codigo, saida = conector(erp, mapear(tmp_path), erp.inativa, None, '--dry-run')
    assert codigo == 0, saida
    aviso = [x for x in saida.splitlines() if 'regra de projeto' in x]
    assert aviso and "ATIVA='N'" in aviso[0] and 'a carga segue' in aviso[0], saida
