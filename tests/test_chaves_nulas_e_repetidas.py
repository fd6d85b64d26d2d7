"""
A key nula e a key repetida numa view (issue 30, itens 5 e 7; a regra em
contextia_sync/intake/chaves.py).

Processos de verdade: o connector.py (`--scope`, `--todas` pelo
carregar-todas.sh, e o `--dry-run`), o ouvinte.py (`--once` e `--dry-run`), o
Contextia local e os bancos (SQLite, PostgreSQL, MariaDB). A view é um LEFT
JOIN: o título sem linha em CHAVES vem com a key nula; dois títulos da mesma
empresa com a mesma chave em CHAVES dão a key repetida.

Prova:

  * key nula: a carga (de uma empresa, de todas) entrega o resto e COMPLETA; a
    contagem "N linha(s) com a key nula em <dataset>" sai na linha do dataset,
    no seco e no log; a linha cuja key virou nula sai do Contextia no complete
    (dentro do teto), e a carga conta a de fora como lida, não como sumida;
  * ao vivo (`coluna`): a linha de key nula na janela é dita no log, contada no
    status (.json e .txt), e as outras do ciclo chegam; o seco a conta na subida;
  * key repetida: nomeada com a empresa das linhas e a key (linha do dataset,
    seco, log, status); o Contextia fica com o registro da regra (a linha de
    menor conteúdo serializado) depois da carga de uma empresa, da de todas e
    de um ciclo ao vivo em que a OUTRA linha mudou;
  * a mesma key em duas empresas não é repetida: cada uma recebe a sua.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from contextia_sync.intake import cliente
from contextia_sync.provisionamento.chaves import Registro, gravar_registros
from tests.apoio.ouvinte import Ouvinte
from tests.dados import erp as erp_teste

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATASET = 'titulos_v'
COLUNAS = ['CTX_CHAVE', 'EMPRESA_ID', 'CLIENTE', 'VALOR', 'VENCIMENTO', 'ALTERADO_EM']


@pytest.fixture(
    params=[
        'sqlite',
        pytest.param('postgres', marks=pytest.mark.postgres),
        pytest.param('mariadb', marks=pytest.mark.mariadb),
    ]
)
def erp(request, fabrica_de_bancos):
    """
    O ERP de teste com a view V_TITULOS (LEFT JOIN em CHAVES). Na empresa e0:
    2 títulos sem chave (key nula), 2 com a chave 'DUP' (o de ID menor tem o
    carimbo mais antigo: a regra o escolhe; lido primeiro, hoje o outro vencia
    por ser lido por último) e 1 com 'X'; na e1, 1 com 'X' também.
    """
    banco = erp_teste.Erp(fabrica_de_bancos(request.param))
    banco.executar('CREATE TABLE {CHAVES} ({ID_TITULO} INTEGER, {CTX_CHAVE} VARCHAR(20))')
    banco.executar(
        'CREATE VIEW {V_TITULOS} AS SELECT c.{CTX_CHAVE} AS {CTX_CHAVE}, t.{EMPRESA_ID}'
        ' AS {EMPRESA_ID}, t.{CLIENTE} AS {CLIENTE}, t.{VALOR} AS {VALOR}, t.{VENCIMENTO}'
        ' AS {VENCIMENTO}, t.{ALTERADO_EM} AS {ALTERADO_EM} FROM {TITULOS} t'
        ' LEFT JOIN {CHAVES} c ON c.{ID_TITULO} = t.{ID}'
    )
    e0, e1 = banco.escopos
    ids = {
        e: [
            i
            for (i,) in banco.executar(
                'SELECT {ID} FROM {TITULOS} WHERE {EMPRESA_ID} = :e ORDER BY {ID}', e=int(e)
            )
        ]
        for e in (e0, e1)
    }
    banco.ids = ids
    banco.nulas = ids[e0][2:4]
    banco.fica, banco.sai = ids[e0][0], ids[e0][1]
    chaves = {i: 'T%d' % i for e in (e0, e1) for i in ids[e]}
    chaves.update({banco.fica: 'DUP', banco.sai: 'DUP', ids[e0][4]: 'X', ids[e1][0]: 'X'})
    for i in banco.nulas:
        del chaves[i]
    banco.executar(
        'INSERT INTO {CHAVES} VALUES (:i, :c)', lote=[{'i': i, 'c': c} for i, c in chaves.items()]
    )
    banco.executar(
        'UPDATE {TITULOS} SET {CLIENTE} = :c, {ALTERADO_EM} = :a WHERE {ID} = :i',
        lote=[
            {'c': 'Fica', 'a': '2026-09-01 09:00:00', 'i': banco.fica},
            {'c': 'Sai', 'a': '2026-09-01 10:30:00', 'i': banco.sai},
        ],
    )
    yield banco
    banco.fechar()


def _mapa(tmp_path):
    return erp_teste.mapeamento(
        tmp_path,
        datasets=[
            {
                'dataset': 'Titulos V',
                'source_object': 'V_TITULOS',
                'columns': COLUNAS,
                'key': 'CTX_CHAVE',
            }
        ],
    )


def _conector(erp, mapa, *extra, chave=None):
    env = dict(os.environ, CONTEXTIA_ORIGEM=erp.url)
    env.pop('CONTEXTIA_API_KEY', None)
    if chave is not None:
        env['CONTEXTIA_API_KEY'] = chave
    feito = subprocess.run(
        [sys.executable, 'connector.py', '--mapping=' + mapa, '--source=generic', *extra],
        cwd=RAIZ,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=180,
    )
    return feito.returncode, feito.stdout.decode('utf-8', 'replace')


def _carregar_todas(erp, mapa, tmp_path, chaves):
    arquivo = tmp_path / 'chaves.tsv'
    gravar_registros(
        str(arquivo), [Registro(e, k, None, None, 'pronto', None) for e, k in chaves.items()]
    )
    env = dict(
        os.environ,
        CONTEXTIA_MAPPING=mapa,
        CONTEXTIA_ORIGEM=erp.url,
        CONTEXTIA_PYTHON=sys.executable,
    )
    env.pop('CONTEXTIA_API_KEY', None)
    feito = subprocess.run(
        ['bash', os.path.join(RAIZ, 'carregar-todas.sh'), str(arquivo)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=300,
    )
    return feito.returncode, feito.stdout.decode('utf-8', 'replace')


def _numeros(saida, dataset=DATASET):
    for linha in saida.splitlines():
        if linha.strip().startswith(dataset + ' '):
            achados = {
                k: int(v)
                for k, v in re.findall(r'(\w+)=(\d+)', linha)
                if k in ('registros', 'novos', 'atualizados', 'iguais', 'removidos')
            }
            if 'registros' in achados:
                return achados
    raise AssertionError('%s não aparece na saída:\n%s' % (dataset, saida))


def _registros(chave):
    return {r['CTX_CHAVE']: r for r in cliente.ler_registros(DATASET, chave)}


def _repetida(escopo):
    return "key 'DUP' repetida em 2 linhas de %s na empresa %s (empresa das linhas na view: %s)" % (
        DATASET,
        escopo,
        escopo,
    )


# -- a carga de uma empresa --------------------------------------------------------


def test_carga_de_uma_empresa_entrega_o_resto_completa_e_diz_as_chaves(
    erp, tmp_path, chave_contextia
):
    e0, e1 = erp.escopos
    mapa = _mapa(tmp_path)

    # O seco diz as duas antes, e passa (a carga real passa também).
    codigo, saida = _conector(erp, mapa, '--scope=' + e0, '--dry-run')
    assert codigo == 0, saida
    assert '2 linha(s) com a key nula em %s ficaram de fora' % DATASET in saida
    assert _repetida(e0) in saida
    assert 'registros=42' in saida

    chave = chave_contextia(e0)
    codigo, saida = _conector(erp, mapa, '--scope=' + e0, chave=chave)
    # Antes: HTTP 422 (records[i].CTX_CHAVE nulo) e o dataset inteiro sem complete.
    assert codigo == 0, saida
    assert 'FALHOU' not in saida
    assert _numeros(saida) == {
        'registros': 42,
        'novos': 42,
        'atualizados': 0,
        'iguais': 0,
        'removidos': 0,
    }
    assert '2 linha(s) com a key nula em %s ficaram de fora' % DATASET in saida
    assert _repetida(e0) in saida
    registros = _registros(chave)
    assert len(registros) == 42
    # A regra: a linha de menor conteúdo serializado (o carimbo mais antigo aqui).
    assert registros['DUP']['CLIENTE'] == 'Fica'
    assert registros['X']['EMPRESA_ID'] == int(e0)

    # O título que perdeu a chave (key nula agora) sai no complete, como o que
    # sumiu da view; a carga conta a linha de fora como lida (o teto não a vê sumir).
    erp.executar('DELETE FROM {CHAVES} WHERE {ID_TITULO} = :i', i=erp.ids[e0][5])
    codigo, saida = _conector(erp, mapa, '--scope=' + e0, chave=chave)
    assert codigo == 0, saida
    assert _numeros(saida)['removidos'] == 1
    assert '3 linha(s) com a key nula em %s ficaram de fora' % DATASET in saida
    assert 'T%d' % erp.ids[e0][5] not in _registros(chave)

    # A mesma key em outra empresa não é repetida: e1 recebe o 'X' dela.
    chave1 = chave_contextia(e1)
    codigo, saida = _conector(erp, mapa, '--scope=' + e1, chave=chave1)
    assert codigo == 0, saida
    assert 'repetida' not in saida and 'key nula' not in saida
    assert _registros(chave1)['X']['EMPRESA_ID'] == int(e1)


# -- a carga de todas (a varredura) -------------------------------------------------


def test_carga_de_todas_entrega_o_resto_completa_e_diz_as_chaves(erp, tmp_path, chave_contextia):
    e0, e1 = erp.escopos
    chaves = {e: chave_contextia(e) for e in (e0, e1)}
    codigo, saida = _carregar_todas(erp, _mapa(tmp_path), tmp_path, chaves)
    assert codigo == 0, saida
    assert '2 linha(s) com a key nula em %s ficaram de fora' % DATASET in saida
    assert _repetida(e0) in saida
    registros = {e: _registros(chaves[e]) for e in (e0, e1)}
    assert (len(registros[e0]), len(registros[e1])) == (42, 30)
    assert registros[e0]['DUP']['CLIENTE'] == 'Fica'
    assert (registros[e0]['X']['EMPRESA_ID'], registros[e1]['X']['EMPRESA_ID']) == (
        int(e0),
        int(e1),
    )


# -- ao vivo (coluna) -----------------------------------------------------------


@pytest.fixture
def ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia):
    o = Ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia)
    o.mapa = _mapa(tmp_path)
    return o


def _status_json(o):
    with open(os.path.join(o.estado_dir, 'ouvinte-status.json'), encoding='utf-8') as arquivo:
        return next(d for d in json.load(arquivo)['datasets'] if d['dataset'] == DATASET)


@pytest.mark.lento
def test_ao_vivo_a_key_nula_e_dita_e_o_resto_chega(ouvinte):
    o, erp = ouvinte, ouvinte.erp
    e0 = erp.escopos[0]

    # O seco conta as da view na subida, sem enviar nada.
    codigo, saida = o.rodar('--once', '--dry-run')
    assert codigo == 0, saida
    assert '2 linha(s) com a key nula em %s' % DATASET in saida

    assert o.rodar('--once')[0] == 0  # a marca de partida
    nova, viva = erp.ids[e0][6], erp.ids[e0][7]
    erp.executar('DELETE FROM {CHAVES} WHERE {ID_TITULO} = :i', i=nova)
    erp.executar(
        'UPDATE {TITULOS} SET {ALTERADO_EM} = :a, {CLIENTE} = :c WHERE {ID} IN (:i, :j)',
        a='2026-09-01 11:40:00',
        c='Mudou',
        i=nova,
        j=viva,
    )
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    # Antes: a linha de key nula ficava fora do `key IN` da releitura, calada.
    assert '1 linha(s) com a key nula em %s ficaram de fora' % DATASET in saida
    assert _registros(o.chaves[e0])['T%d' % viva]['CLIENTE'] == 'Mudou'
    assert _status_json(o)['chaves_nulas'] == 3
    assert 'KEY NULA ..........: 3 linha(s) com a key nula em %s' % DATASET in o.status()


@pytest.mark.lento
def test_ao_vivo_a_key_repetida_fica_com_o_registro_da_regra(ouvinte, tmp_path):
    o, erp = ouvinte, ouvinte.erp
    e0 = erp.escopos[0]
    codigo, saida = _conector(erp, o.mapa, '--scope=' + e0, chave=o.chaves[e0])
    assert codigo == 0, saida
    assert _registros(o.chaves[e0])['DUP']['CLIENTE'] == 'Fica'

    assert o.rodar('--once')[0] == 0  # a marca de partida
    # Muda a linha que a regra NÃO escolhe: só ela está na janela.
    erp.executar(
        'UPDATE {TITULOS} SET {ALTERADO_EM} = :a, {CLIENTE} = :c WHERE {ID} = :i',
        a='2026-09-01 11:40:00',
        c='Sai de novo',
        i=erp.sai,
    )
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    # Antes: a releitura trazia só a linha da janela, e o Contextia ficava com ela.
    assert _registros(o.chaves[e0])['DUP']['CLIENTE'] == 'Fica'
    assert _repetida(e0) in saida
    assert _repetida(e0) in ' '.join(_status_json(o)['chaves_repetidas'])
    assert 'KEY REPETIDA ......: ' + _repetida(e0) in o.status()


def test_carga_de_todas_junta_a_empresa_escrita_com_espaco(erp, tmp_path, chave_contextia):
    """
    A empresa vem como texto, e numa das duas linhas 'DUP' com um espaço antes
    (' 9001'): a mesma empresa (o código sem os espaços das pontas), então as
    duas são a mesma key no mesmo projeto -- nomeadas com as duas formas.
    """
    e0, e1 = erp.escopos
    tipo = erp.banco.tipo
    texto = {'mariadb': 'CHAR(10)', 'postgres': 'VARCHAR(10)', 'sqlite': 'TEXT'}[tipo]
    emenda = "CONCAT(' ', t.{EMPRESA_ID})" if tipo == 'mariadb' else "' ' || t.{EMPRESA_ID}"
    erp.executar(
        'CREATE VIEW {V_TEXTO} AS SELECT c.{CTX_CHAVE} AS {CTX_CHAVE}, CASE WHEN t.{ID} = %d'
        ' THEN %s ELSE CAST(t.{EMPRESA_ID} AS %s) END AS {EMPRESA}, t.{CLIENTE} AS {CLIENTE},'
        ' t.{ALTERADO_EM} AS {ALTERADO_EM} FROM {TITULOS} t'
        ' LEFT JOIN {CHAVES} c ON c.{ID_TITULO} = t.{ID}' % (erp.fica, emenda, texto)
    )
    mapa = erp_teste.mapeamento(
        tmp_path,
        datasets=[
            {
                'dataset': 'Titulos T',
                'source_object': 'V_TEXTO',
                'columns': ['CTX_CHAVE', 'EMPRESA', 'CLIENTE', 'ALTERADO_EM'],
                'key': 'CTX_CHAVE',
                'scope_column': 'EMPRESA',
            }
        ],
    )
    chaves = {e: chave_contextia(e) for e in (e0, e1)}
    codigo, saida = _carregar_todas(erp, mapa, tmp_path, chaves)
    assert codigo == 0, saida
    linha = next(x for x in saida.splitlines() if "key 'DUP' repetida" in x)
    assert 'em 2 linhas de titulos_t na empresa %s' % e0 in linha
    assert "' %s'" % e0 in linha and "'%s'" % e0 in linha
    registros = {r['CTX_CHAVE']: r for r in cliente.ler_registros('titulos_t', chaves[e0])}
    # A regra: o menor conteúdo serializado (ALTERADO_EM vem antes; o de 'Fica' é o mais antigo).
    assert registros['DUP']['CLIENTE'] == 'Fica'
    assert len(registros) == 42


def test_a_regra_nao_depende_da_ordem_de_leitura():
    """A regra pura (intake/chaves.py): a mesma escolha em qualquer ordem."""
    from contextia_sync.escopos import texto_escopo
    from contextia_sync.intake.chaves import Triagem

    a = {'K': 5, 'EMP': '297', 'V': 'b'}
    b = {'K': 5, 'EMP': ' 297', 'V': 'a'}
    c = {'K': 5, 'EMP': '300', 'V': 'z'}  # outra empresa: não é repetida
    d = {'K': None, 'EMP': '297', 'V': 'x'}
    for ordem in ([a, b, c, d], [d, c, b, a], [b, d, a, c]):
        triagem = Triagem('ds', 'K', None, 'EMP')
        vao = triagem.triar(ordem, lambda linha: texto_escopo(linha['EMP']))
        assert sorted(linha['V'] for linha in vao) == ['a', 'z']
        assert triagem.nulas == {'297': 1} and triagem.de_fora == {'297': 1}
        [repetida] = triagem.repetidas
        assert repetida.texto().startswith('key 5 repetida em 2 linhas de ds na empresa 297 (')
        assert sorted(repetida.na_view) == ["' 297'", "'297'"]
