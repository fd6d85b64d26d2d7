"""
Um código de empresa é exatamente ele mesmo (issue 28, item 1).

O caso visto: os códigos eram normalizados com `str.strip()`, que tira também
`\\u00a0`, `\\u2003` e os separadores `\\x1c`-`\\x1f`. A linha de cadastro
`'555\\u00a0'` provisionou a empresa 555 que a regra recusa, e a linha de dados
com escopo `'10\\x1c'` sobrescreveu um registro da empresa 10, pelo ouvinte e
pelo `connector.py --todas`. Aqui: PostgreSQL e MariaDB de verdade, colunas de
texto, o cadastro e os dados com cada valor hostil, e os programas de verdade
(provisionar.py, connector.py --todas, ouvinte.py) contra o Contextia local.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from contextia_sync.escopos import codigo_invalido, problema_no_escopo, texto_escopo
from contextia_sync.intake import cliente, transporte
from contextia_sync.provisionamento.chaves import ler_registros
from tests.apoio.bancos import criar_banco, derrubar_banco, exigir_servidor

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATASET = 'titulos'

# Cada um parece a empresa 10 (ou a 555) a olho, e nenhum é ela.
HOSTIS = {
    '10\x1c': 'U+001C',  # separador de arquivo: str.strip() o tirava
    '10\u00a0': 'U+00A0',  # NBSP
    '10\u2003': 'U+2003',  # EM SPACE
    '10\u200b': 'U+200B',  # ZERO WIDTH SPACE
    '\uff11\uff10': 'U+FF11',  # '１０' em dígitos de largura total (NFKC daria 10)
    '10\t': 'U+0009',  # TAB no fim
    '555\u00a0': 'U+00A0',  # o apelido da 555, que a regra recusa
}
# Uma linha de log inteira, forjada pelo código de uma linha de dados.
FORJADA = '10\n[E 2026-01-01 00:00:00,000] FALHOU forjada pelo ERP'


# --------------------------------------------------------------- a forma canônica


@pytest.mark.parametrize('hostil', sorted(HOSTIS) + [FORJADA])
def test_nenhum_valor_hostil_vira_outro_codigo(hostil):
    canonico = texto_escopo(hostil)
    assert canonico == hostil  # só o espaço ASCII sai
    assert canonico not in ('10', '555')
    assert problema_no_escopo(canonico)


@pytest.mark.parametrize('hostil, codigo', sorted(HOSTIS.items()))
def test_o_codigo_invalido_e_dito_escapado_com_o_caractere(hostil, codigo):
    texto = codigo_invalido(hostil, com_motivo=False)
    assert texto is not None and texto.startswith("código de empresa inválido: '")
    assert texto.endswith('(%s)' % codigo), texto
    assert texto.isprintable(), texto  # o terminal mostra, não interpreta


def test_so_o_preenchimento_ascii_do_char_sai():
    assert texto_escopo('01  ') == '01'  # CHAR(4) do Protheus
    assert texto_escopo('  01') == '01'
    assert texto_escopo(297) == texto_escopo('297') == texto_escopo(297.0) == '297'
    assert codigo_invalido('01') is None and codigo_invalido('') is None
    assert codigo_invalido('10\x1c') == (
        "código de empresa inválido: '10\\x1c' (U+001C) -- o código tem o caractere"
        ' U+001C, controle, fora do permitido'
    )


# --------------------------------------------------------------- o ERP de verdade


def _ddl(tipo: str) -> list[str]:
    carimbo = 'DATETIME NULL' if tipo == 'mariadb' else 'TIMESTAMP NULL'
    # Sem chave primária, como numa view: a linha hostil tem o mesmo ID de uma da 10.
    return [
        'CREATE TABLE empresas (empresa_id VARCHAR(80), razao_social VARCHAR(60), ativa CHAR(1))',
        'CREATE TABLE titulos (id INTEGER, empresa_id VARCHAR(80), cliente VARCHAR(80),'
        ' alterado_em %s)' % carimbo,
    ]


@pytest.fixture(params=['postgres', 'mariadb'])
def erp(request):
    tipo = request.param
    exigir_servidor(tipo)
    banco = criar_banco(tipo, 'codigo')
    try:
        banco.executar_varios(_ddl(tipo))
        empresas = [
            {'e': '10', 'n': 'Empresa Dez', 'a': 'S'},
            {'e': '555', 'n': 'Empresa Inativa', 'a': 'N'},
        ]
        empresas += [{'e': h, 'n': 'Apelido %d' % n, 'a': 'S'} for n, h in enumerate(HOSTIS)]
        for empresa in empresas:
            banco.executar('INSERT INTO empresas VALUES (:e, :n, :a)', empresa)
        for n in range(1, 6):
            banco.executar(
                "INSERT INTO titulos VALUES (:i, '10', :c, :a)",
                {'i': n, 'c': 'dez-%d' % n, 'a': '2026-09-01 10:00:00'},
            )
        # Cada hostil com o ID 1 (o da 10) e o mesmo carimbo: o que ia sobrescrever.
        for hostil in list(HOSTIS) + [FORJADA]:
            banco.executar(
                'INSERT INTO titulos VALUES (1, :e, :c, :a)',
                {'e': hostil, 'c': 'INTRUSO', 'a': '2026-09-01 10:00:00'},
            )
        gravado = {linha[0] for linha in banco.executar('SELECT empresa_id FROM titulos')}
        assert set(HOSTIS) | {FORJADA, '10'} == gravado  # o banco guardou exato
        yield banco
    finally:
        derrubar_banco(banco)


def _mapeamento(pasta) -> str:
    mapa = {
        '$schema': os.path.join(RAIZ, 'mappings', 'mapeamento.schema.json'),
        'client': 'teste',
        'source': {'excluded_scopes': []},
        'defaults': {
            'scope_column': 'empresa_id',
            'key': 'id',
            'watch_column': 'alterado_em',
            'chunk': 50,
        },
        'projects': {
            'source_object': 'empresas',
            'name_column': 'razao_social',
            'filters': [{'column': 'ativa', 'equals': 'S'}],
        },
        'datasets': [
            {
                'dataset': DATASET,
                'source_object': 'titulos',
                'columns': ['id', 'empresa_id', 'cliente', 'alterado_em'],
            }
        ],
    }
    caminho = os.path.join(str(pasta), 'mapeamento.json')
    with open(caminho, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo)
    return caminho


def _rodar(argv: list[str], erp, contextia, timeout: float = 180) -> tuple[int, str]:
    env = dict(os.environ, CONTEXTIA_ORIGEM=erp.url_origem, **contextia.ambiente())
    env.pop('CONTEXTIA_API_KEY', None)
    feito = subprocess.run(
        [sys.executable] + argv,
        cwd=RAIZ,
        env=env,
        timeout=timeout,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    return feito.returncode, feito.stdout.decode('utf-8', 'replace')


def _sem_linha_forjada(texto: str) -> None:
    for linha in texto.splitlines():
        assert not linha.lstrip().startswith('[E 2026-01-01'), linha


def _registros(chave: str) -> dict[int, dict]:
    try:
        return {int(r['id']): r for r in cliente.ler_registros(DATASET, chave)}
    except transporte.ErroContextia:
        return {}


def _provisionar(erp, contextia, mapa, arquivo) -> str:
    codigo, saida = _rodar(
        ['provisionar.py', '--mapping=' + mapa, '--source=generic', '--arquivo=' + str(arquivo)],
        erp,
        contextia,
    )
    assert codigo == 0, saida
    return saida


def _carga_de_todas(erp, contextia, mapa, arquivo) -> tuple[int, str]:
    """`connector.py --todas` com o arquivo de chaves: (código, saída)."""
    argv = ['connector.py', '--mapping=' + mapa, '--source=generic', '--todas']
    return _rodar(argv + ['--chaves=' + str(arquivo)], erp, contextia)


def test_cadastro_hostil_nao_provisiona_apelido_e_a_carga_nao_mistura_empresas(
    erp, tmp_path, ambiente_contextia
):
    """
    O cadastro: a 555 recusada pela regra e o apelido `'555\\u00a0'` ativo; a 10
    e os apelidos dela. Só a 10 vira projeto, o plano conta cada recusa, e a
    carga de todas leva à 10 só as linhas dela, nomeando as outras.
    """
    contextia = ambiente_contextia
    mapa = _mapeamento(tmp_path)
    arquivo = tmp_path / 'chaves.tsv'
    saida = _provisionar(erp, contextia, mapa, arquivo)
    assert '1 nova(s)' in saida and '1 recusada(s) pela regra, 7 com código inválido' in saida, (
        saida
    )
    for hostil in HOSTIS:
        texto = codigo_invalido(hostil, com_motivo=False)
        assert 'RECUSADA ...: %s' % texto in saida, (texto, saida)
        assert contextia.admin().buscar_projeto(hostil) is None
    assert contextia.admin().buscar_projeto('555') is None
    assert sorted(ler_registros(str(arquivo))) == ['10']
    _sem_linha_forjada(saida)

    codigo, saida = _carga_de_todas(erp, contextia, mapa, arquivo)
    assert codigo == 0, saida
    chave = ler_registros(str(arquivo))['10'].chave
    registros = _registros(chave)
    assert sorted(registros) == [1, 2, 3, 4, 5], registros
    assert {r['cliente'] for r in registros.values()} == {'dez-%d' % n for n in range(1, 6)}
    assert 'CÓDIGO DE EMPRESA INVÁLIDO em 8 linha(s)' in saida, saida
    assert "código de empresa inválido: '10\\x1c' (U+001C)" in saida
    _sem_linha_forjada(saida)


def test_ouvinte_poe_linha_de_codigo_invalido_na_quarentena_e_nao_na_empresa(
    erp, tmp_path, ambiente_contextia
):
    """
    Ao vivo: a linha hostil muda (o carimbo sobe) e nunca chega à 10; vai para a
    quarentena com o código escapado, e a saúde e as métricas a nomeiam.
    """
    contextia = ambiente_contextia
    mapa = _mapeamento(tmp_path)
    arquivo = tmp_path / 'chaves.tsv'
    _provisionar(erp, contextia, mapa, arquivo)
    estado = tmp_path / 'estado'
    log = tmp_path / 'ouvinte.log'
    argv = [
        'ouvinte.py',
        '--mapping=' + mapa,
        '--source=generic',
        '--chaves=' + str(arquivo),
        '--estado=' + str(estado),
        '--varredura=nao',
        '--once',
        '--log=' + str(log),
    ]
    # A carga completa da 10 (o que a varredura faz), e a marca inicial do ouvinte.
    codigo, saida = _carga_de_todas(erp, contextia, mapa, arquivo)
    assert codigo == 0, saida
    codigo, saida = _rodar(argv, erp, contextia)
    assert codigo == 0, saida
    chave = ler_registros(str(arquivo))['10'].chave
    assert {r['cliente'] for r in _registros(chave).values()} == {
        'dez-%d' % n for n in range(1, 6)
    }, saida

    erp.executar(
        "UPDATE titulos SET alterado_em = :a WHERE empresa_id <> '10'", {'a': '2026-09-02 10:00:00'}
    )
    codigo, saida = _rodar(argv, erp, contextia)
    assert codigo == 0, saida
    registros = _registros(chave)
    assert registros[1]['cliente'] == 'dez-1', registros  # nada sobrescrito
    assert "código de empresa inválido: '10\\x1c' (U+001C)" in saida, saida
    parados = list((estado / 'quarentena' / 'parado').iterdir())
    motivos = {}
    for caminho in parados:
        with open(caminho, encoding='utf-8') as f:
            item = json.load(f)
        motivos[item['escopo']] = item['motivo']
    assert set(motivos) == set(HOSTIS) | {FORJADA}, motivos
    assert motivos['10\x1c'].startswith("código de empresa inválido: '10\\x1c' (U+001C)")
    with open(log, encoding='utf-8') as f:
        arquivo_de_log = f.read()
    for linha in arquivo_de_log.splitlines():
        assert re.match(r'\[[DIWEC] ', linha), linha
    _sem_linha_forjada(saida)

    codigo, linha = _rodar(['ouvinte.py', '--saude', '--estado=' + str(estado)], erp, contextia)
    assert codigo == 1, linha
    assert '8 registro(s) na quarentena' in linha, linha
    with open(estado / 'ouvinte.prom', encoding='utf-8') as f:
        assert 'ouvinte_dataset_quarentena_registros{dataset="titulos"} 8' in f.read()

    # O ERP corrige um código (a linha apagada) e deixa os outros: o reenvio da
    # quarentena relê cada linha pela key e tira só a corrigida.
    erp.executar('DELETE FROM titulos WHERE empresa_id = :e', {'e': '10\x1c'})
    argv_reenvio = [a for a in argv if a != '--once'] + ['--reenviar-quarentena']
    codigo, saida = _rodar(argv_reenvio, erp, contextia)
    assert codigo == 1, saida  # sobrou registro: os outros 7 códigos seguem inválidos
    assert "saiu -- a origem não tem mais código de empresa inválido: '10\\x1c'" in saida, saida
    restantes = {
        json.loads(c.read_text(encoding='utf-8'))['escopo']
        for c in (estado / 'quarentena' / 'parado').iterdir()
    }
    assert restantes == (set(HOSTIS) | {FORJADA}) - {'10\x1c'}, restantes


@pytest.mark.parametrize(
    'opcao, programa', [('--scope=', 'connector.py'), ('--somente-escopo=', 'provisionar.py')]
)
def test_codigo_com_espaco_unicode_na_linha_de_comando_sai_com_2(tmp_path, opcao, programa):
    env = dict(
        os.environ,
        CONTEXTIA_ORIGEM='sqlite:///' + str(tmp_path / 'nada.db'),
        CONTEXTIA_URL='http://127.0.0.1:9',
        CONTEXTIA_API_KEY='ctx_qualquer_coisa',
    )
    extra = ['--arquivo=' + str(tmp_path / 'c.tsv')] if programa == 'provisionar.py' else []
    argv = [
        sys.executable,
        programa,
        '--mapping=' + _mapeamento(tmp_path),
        '--source=generic',
        opcao + '10\u00a0',
    ] + extra
    feito = subprocess.run(
        argv, cwd=RAIZ, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60
    )
    saida = feito.stdout.decode('utf-8', 'replace')
    assert feito.returncode == 2, saida
    assert "o código '10\\xa0' tem o caractere U+00A0, NO-BREAK SPACE" in saida, saida
