"""
O código de empresa que vem do ERP e a chave de cada linha do arquivo de chaves
(issue 14): o código e conferido onde entra, a chave e conferida antes de levar
dado, e nenhum valor da origem forja linha de log.

Os casos vistos: o código `'Z\\tctx_lixo\\n555'` no cadastro virou a linha
`555<TAB><chave de outro projeto>` no arquivo de chaves, e o ouvinte -- que não
conferia de quem é a chave -- mandou as linhas da empresa 555 (que a regra
recusa) para aquele outro projeto; `NOVA\\nFILIAL` fez todo programa recusar o
arquivo e o reprovisionamento duplicar linhas. Aqui os programas são os de
verdade (provisionar.py, ouvinte.py, connector.py) contra o Contextia local e
um ERP SQLite cujo cadastro guarda o código como texto.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import uuid

import pytest

from contextia_sync.intake import cliente
from contextia_sync.provisionamento.chaves import ler_registros
from tests.apoio.ouvinte import DATASET, Ouvinte, esperar
from tests.dados import erp as erp_teste

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAB_E_LINHA = 'Z\tctx_lixo\n555'
QUEBRA = 'NOVA\nFILIAL'
# Uma linha de log inteira, forjada pelo codigo da empresa (o formato do --log).
FORJADA = 'X\n[E 2026-01-01 00:00:00,000] FORJADA pelo cadastro'
HOSTIS = (TAB_E_LINHA, QUEBRA, FORJADA)
CADASTRO = 'EMPRESAS_TXT'


@pytest.fixture
def erp(tmp_path):
    banco = erp_teste.erp_sqlite(tmp_path)
    # O cadastro com o codigo como TEXTO (CHAR/VARCHAR, como o M0_CODIGO do
    # Protheus): as empresas do ERP de teste e as hostis, todas ativas.
    banco.executar(
        'CREATE TABLE {EMPRESAS_TXT} ({EMPRESA_ID} VARCHAR(80),'
        ' {RAZAO_SOCIAL} VARCHAR(60), {GRUPO} VARCHAR(30), {ATIVA} CHAR(1))'
    )
    banco.executar(
        'INSERT INTO {EMPRESAS_TXT} SELECT CAST({EMPRESA_ID} AS VARCHAR(80)),'
        ' {RAZAO_SOCIAL}, {GRUPO}, {ATIVA} FROM {EMPRESAS}'
    )
    banco.executar(
        'INSERT INTO {EMPRESAS_TXT} VALUES (:e, :n, NULL, :a)',
        lote=[{'e': e, 'n': 'Hostil %d' % i, 'a': 'S'} for i, e in enumerate(HOSTIS)],
    )
    yield banco
    banco.fechar()


def mapear(pasta: object) -> str:
    return erp_teste.mapeamento(
        pasta,
        projects={
            'source_object': CADASTRO,
            'name_column': 'RAZAO_SOCIAL',
            'group_column': 'GRUPO',
            'filters': [{'column': 'ATIVA', 'equals': 'S'}],
        },
    )


def rodar(argv: list[str], env: dict[str, str], timeout: float = 300) -> tuple[int, str]:
    feito = subprocess.run(
        argv, cwd=RAIZ, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout
    )
    return feito.returncode, feito.stdout.decode('utf-8', 'replace')


def ambiente(erp: erp_teste.Erp, contextia: object, **extra: str) -> dict[str, str]:
    env = dict(os.environ, CONTEXTIA_ORIGEM=erp.url, **extra)
    env.pop('CONTEXTIA_API_KEY', None)
    env.update(contextia.ambiente())  # type: ignore[attr-defined]
    return env


def provisionar(
    erp: erp_teste.Erp, contextia: object, mapa: str, arquivo: object, *extra: str
) -> tuple[int, str]:
    return rodar(
        [
            sys.executable,
            'provisionar.py',
            '--mapping=' + mapa,
            '--source=generic',
            '--arquivo=' + str(arquivo),
        ]
        + list(extra),
        ambiente(erp, contextia),
    )


def saude(estado: str) -> tuple[int, str]:
    return rodar([sys.executable, 'ouvinte.py', '--saude', '--estado=' + estado], dict(os.environ))


def status_json(o: Ouvinte) -> dict:
    with open(os.path.join(o.estado_dir, 'ouvinte-status.json')) as arquivo:
        return json.load(arquivo)


def sem_linha_forjada(texto: str) -> None:
    """Nenhum pedaco de código hostil começa uma linha (nem um registro de log falso)."""
    for linha in texto.splitlines():
        solta = linha.lstrip()
        assert not solta.startswith(('555', 'FILIAL', '[E 2026-01-01')), linha
        assert 'ctx_lixo\t' not in linha and not linha.startswith('ctx_lixo'), linha


# --------------------------------------------------------------- o conjunto


@pytest.mark.parametrize(
    'codigo', ['01', '0101', '297', 'MATRIZ', 'SP-01', 'EMP_01', '1.2', 'x' * 64]
)
def test_codigo_de_erp_de_verdade_passa(codigo):
    from contextia_sync.escopos import problema_no_escopo

    assert problema_no_escopo(codigo) is None


@pytest.mark.parametrize(
    'codigo, trecho',
    [
        (TAB_E_LINHA, 'U+0009, TAB'),
        (QUEBRA, 'U+000A, LINE FEED'),
        ('01\r', 'U+000D, CARRIAGE RETURN'),
        ('01 02', 'U+0020, espaço'),
        ('S\u00c3O', "'\u00c3' (U+00C3)"),
        ('\u0410BC', "'\u0410' (U+0410)"),  # o A cirilico
        ('4\u200b1', 'U+200B, ZERO WIDTH SPACE'),
        ('..', "começa com '.'"),
        ('-1', "começa com '-'"),
        ('x' * 65, 'tem 65 caracteres (o máximo é 64)'),
    ],
)
def test_codigo_fora_do_permitido_diz_o_caractere(codigo, trecho):
    from contextia_sync.escopos import problema_no_escopo

    assert trecho in (problema_no_escopo(codigo) or ''), problema_no_escopo(codigo)


# --------------------------------------------------------------- o provisionar


def test_codigo_hostil_no_cadastro_nunca_vira_linha_do_arquivo(erp, tmp_path, ambiente_contextia):
    """
    O caso da issue: TAB e quebra de linha no código. O provisionar recusa essas
    empresas alto, provisiona as outras, e o arquivo tem só as linhas delas --
    rodar de novo não duplica nada.
    """
    contextia = ambiente_contextia
    mapa = mapear(tmp_path)
    arquivo = tmp_path / 'chaves.tsv'
    codigo, saida = provisionar(erp, contextia, mapa, arquivo)
    assert codigo == 0, saida
    assert 'resumo: 2 criada(s), 0 reparada(s), 0 com falha' in saida
    assert (
        "RECUSADA ...: código de empresa inválido: 'Z\\tctx_lixo\\n555' (U+0009) -- o"
        ' código tem o caractere U+0009, TAB, fora do permitido (cadastro EMPRESAS_TXT,'
        ' coluna EMPRESA_ID). A empresa NÃO é provisionada'
    ) in saida
    assert "'NOVA\\nFILIAL' (U+000A) -- o código tem o caractere U+000A, LINE FEED" in saida
    sem_linha_forjada(saida)

    with open(arquivo, encoding='utf-8') as f:
        bruto = f.read()
    dados = [x for x in bruto.split('\n') if x and not x.startswith('#')]
    assert sorted(x.split('\t')[0] for x in dados) == sorted(erp.escopos), bruto
    assert all(len(x.split('\t')) == 5 for x in dados), bruto
    registros = ler_registros(str(arquivo))
    assert sorted(registros) == sorted(erp.escopos)
    admin = contextia.admin()
    for hostil in HOSTIS:
        assert admin.buscar_projeto(hostil) is None, hostil
    for escopo, registro in registros.items():
        assert cliente.quem_sou(registro.chave)['external_id'] == escopo

    # De novo (o da varredura do ouvinte): nada a fazer, nenhuma linha a mais.
    codigo, saida = provisionar(erp, contextia, mapa, arquivo)
    assert codigo == 0, saida
    assert 'resumo: nada a fazer' in saida and 'RECUSADA ...' in saida
    with open(arquivo, encoding='utf-8') as f:
        assert f.read() == bruto


def test_escopo_invalido_na_linha_de_comando_sai_com_2(erp, tmp_path, ambiente_contextia):
    contextia = ambiente_contextia
    mapa = mapear(tmp_path)
    arquivo = tmp_path / 'chaves.tsv'
    codigo, saida = provisionar(erp, contextia, mapa, arquivo, '--somente-escopo=' + QUEBRA)
    assert codigo == 2, saida
    assert (
        "--somente-escopo: o código 'NOVA\\nFILIAL' tem o caractere U+000A, LINE FEED,"
        ' fora do permitido.'
    ) in saida and 'nada foi feito' in saida
    assert not arquivo.exists() and 'Traceback' not in saida
    assert contextia.admin().buscar_projeto(QUEBRA) is None

    chave = contextia.criar_projeto_com_chave(erp.escopos[0])
    codigo, saida = rodar(
        [
            sys.executable,
            'connector.py',
            '--mapping=' + mapa,
            '--source=generic',
            '--scope=' + TAB_E_LINHA,
        ],
        ambiente(erp, contextia, CONTEXTIA_API_KEY=chave),
    )
    assert codigo == 2, saida
    assert "--scope: o código 'Z\\tctx_lixo\\n555' tem o caractere U+0009, TAB" in saida
    assert cliente.listar_datasets(chave) == []  # nada foi enviado
    sem_linha_forjada(saida)


# --------------------------------------------------------------- o ouvinte


def test_ouvinte_recusa_o_codigo_hostil_alto_e_o_log_nao_tem_linha_forjada(
    erp, tmp_path, ambiente_contextia, chave_contextia
):
    """
    O cadastro traz empresas com código hostil, e a tabela de titulos traz linhas
    delas: nada e provisionado para elas, o arquivo de chaves fica como estava, as
    outras empresas seguem, o status e a saúde nomeiam a recusa, e nem o log da
    saída nem o do --log tem linha que o código forjou.
    """
    o = Ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia)
    o.mapa = mapear(tmp_path)
    log = str(tmp_path / 'ouvinte.log')
    with open(o.arquivo_chaves, 'rb') as f:
        bytes_antes = f.read()
    e0 = erp.escopos[0]

    codigo, saida = o.rodar('--once', '--log=' + log)
    assert codigo == 0, saida
    novo = o.inserir(e0, '2026-09-01 11:00:00')
    for n, hostil in enumerate(HOSTIS):
        erp.executar(
            'INSERT INTO {TITULOS} VALUES (:i, :e, :c, 1, :d, :a)',
            i=erp.base * 1000 + 950 + n,
            e=hostil,
            c='Hostil\nlinha',
            d='2026-10-01',
            a='2026-09-01 11:00:0%d' % n,
        )
    codigo, saida2 = o.rodar('--once', '--log=' + log)
    assert codigo == 0, saida2

    for texto in (saida, saida2):
        assert (
            "código de empresa inválido: 'NOVA\\nFILIAL' (U+000A) -- o código tem o"
            ' caractere U+000A, LINE FEED' in texto
        ), texto
        assert 'EMPRESA(S) NOVA(S)' not in texto and '--somente-escopo' not in texto
    # A linha de dados com o código hostil vai para a quarentena, nomeada (issue 28).
    assert "linha(s) com código de empresa inválido: 'NOVA\\nFILIAL'" in saida2, saida2
    with open(log, encoding='utf-8') as f:
        arquivo_de_log = f.read()
    # O --log (formato sem recuo): toda linha e um registro; nenhuma foi forjada.
    for linha in arquivo_de_log.splitlines():
        assert re.match(r'\[[DIWEC] ', linha), linha
    assert arquivo_de_log.count('FORJADA') >= 2
    for texto in (saida, saida2, arquivo_de_log):
        sem_linha_forjada(texto)

    with open(o.arquivo_chaves, 'rb') as f:
        assert f.read() == bytes_antes
    assert novo in o.no_contextia(e0)  # as outras seguem
    admin = ambiente_contextia.admin()
    for hostil in HOSTIS:
        assert admin.buscar_projeto(hostil) is None, hostil

    recusadas = status_json(o)['empresas_recusadas']
    assert {r['escopo'] for r in recusadas} == {
        'Z\\tctx_lixo\\n555',
        'NOVA\\nFILIAL',
        'X\\n[E 2026-01-01 00:00:00,000] FORJADA pelo cadastro',
    }, recusadas
    assert {r['onde'] for r in recusadas} == {'cadastro'}
    assert "EMPRESA RECUSADA ..: 'NOVA\\nFILIAL' (cadastro): tem o caractere U+000A" in o.status()
    sem_linha_forjada(o.status())
    codigo, linha = saude(o.estado_dir)
    assert codigo == 1, linha
    assert "código(s) de empresa recusado(s) no cadastro do ERP: 'Z\\tctx_lixo\\n555'" in linha
    assert 'empresas_recusadas=3;0;;0' in linha and linha.count('\n') == 1
    with open(os.path.join(o.estado_dir, 'ouvinte.prom')) as f:
        assert 'ouvinte_empresas_recusadas{onde="cadastro"} 3' in f.read()


def test_ouvinte_confere_a_posse_da_chave_uma_vez_por_chave(
    erp, tmp_path, ambiente_contextia, chave_contextia
):
    """
    O arquivo de chaves adulterado: na linha da empresa e1, a chave do projeto de
    outra empresa. O ouvinte pergunta de quem é cada chave uma vez por execução,
    recusa a de e1 (nada de e1 vai para o outro projeto), segue com e0, nomeia a
    recusa com a correção -- e, corrigida a linha, entrega o que ficou para trás.
    """
    contextia = ambiente_contextia
    o = Ouvinte(tmp_path, erp, contextia, chave_contextia)
    e0, e1 = erp.escopos
    outra = chave_contextia('outra-' + uuid.uuid4().hex[:8], 'Outra Empresa')
    with open(o.arquivo_chaves, 'w') as f:
        f.write('%s\t%s\n%s\t%s\n' % (e0, o.chaves[e0], e1, outra))

    assert o.rodar('--once')[0] == 0  # a marca inicial
    ids0 = [o.inserir(e0, '2026-09-01 11:00:%02d' % n) for n in range(2)]
    ids1 = [o.inserir(e1, '2026-09-01 11:01:%02d' % n) for n in range(2)]
    # Conta os pedidos a GET /api/v1/projeto (o `quem_sou`): a falha "atraso de
    # 0 s" nao muda a resposta e o servidor conta cada vez que a aplica.
    contextia.injetar('atraso', quantidade=500, segundos=0, caminho='/api/v1/projeto')
    processo = o.iniciar('--intervalo-projetos=3600')
    ciclos: set[str] = set()

    def quatro_ciclos_de_dados() -> bool:
        try:
            ciclos.add(status_json(o)['ciclos']['dados']['em'])
        except (OSError, ValueError, KeyError):
            pass
        return len(ciclos) >= 4

    try:
        esperar(quatro_ciclos_de_dados, 120, passo=0.1)
        perguntas = contextia.falhas_injetadas()['atraso']
        saida = o.saida()

        nada = {int(r['ID']) for r in cliente.ler_registros(DATASET, outra)}
        assert not nada & set(ids1), 'dado da empresa %s no projeto de outra' % e1
        assert set(ids0) <= set(o.no_contextia(e0))  # a outra empresa segue
        # Duas chaves, duas perguntas -- em quatro ciclos de dados (e cada um
        # tenta de novo as duas empresas: a marca nao avancou).
        assert saida.count('envio com erro: marca de água NÃO avançou') >= 3, saida
        assert perguntas == 2, (perguntas, saida)
        assert (
            "a chave da empresa %s em %s é do projeto 'Outra Empresa' (empresa outra-"
            % (e1, o.arquivo_chaves)
        ) in saida
        assert 'recusada para a empresa %s, que NÃO recebe dado' % e1 in saida
        assert 'provisionar.py --somente-escopo=%s' % e1 in saida
        recusadas = status_json(o)['empresas_recusadas']
        assert [(r['escopo'], r['onde']) for r in recusadas] == [(e1, 'chave')], recusadas
        assert "EMPRESA RECUSADA ..: '%s' (chave): a chave da empresa %s" % (e1, e1) in o.status()
        codigo, linha = saude(o.estado_dir)
        assert codigo == 2, linha
        assert 'empresa(s) %s com a chave de outro projeto no arquivo de chaves' % e1 in linha

        # Corrigida a linha com o ouvinte de pe: nada de e1 se perdeu (a marca
        # esperou), e a recusa sai do status.
        with open(o.arquivo_chaves, 'w') as f:
            f.write('%s\t%s\n%s\t%s\n' % (e0, o.chaves[e0], e1, o.chaves[e1]))
        esperar(lambda: set(ids1) <= set(o.no_contextia(e1)), 60)
        esperar(lambda: status_json(o)['empresas_recusadas'] == [], 30)
    finally:
        processo.send_signal(signal.SIGTERM)
        processo.wait(60)
        contextia.limpar_falhas()
    assert processo.returncode == 0, o.saida()


def test_reenviar_quarentena_confere_a_posse_da_chave(
    erp, tmp_path, ambiente_contextia, chave_contextia
):
    """O reenvio da quarentena usa a mesma conferência: o item fica, e diz por que."""
    from contextia_sync.fila.quarentena import Quarentena

    o = Ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia)
    e0, e1 = erp.escopos
    outra = chave_contextia('outra-' + uuid.uuid4().hex[:8], 'Outra Empresa')
    with open(o.arquivo_chaves, 'w') as f:
        f.write('%s\t%s\n%s\t%s\n' % (e0, o.chaves[e0], e1, outra))
    assert o.rodar('--once')[0] == 0
    # Um registro de e1 que o intake recusou antes (e que hoje ele aceita).
    Quarentena(os.path.join(o.estado_dir, 'quarentena')).guardar(
        DATASET, e1, 'ID', {'ID': 424242, 'EMPRESA_ID': int(e1), 'VALOR': 1}, 'HTTP 422: exemplo'
    )
    codigo, saida = o.rodar('--reenviar-quarentena')
    assert codigo == 1, saida  # ficou um
    assert "é do projeto 'Outra Empresa' (empresa outra-" in saida, saida
    assert 424242 not in {int(r['ID']) for r in cliente.ler_registros(DATASET, outra)}
    assert len(Quarentena(os.path.join(o.estado_dir, 'quarentena')).itens()) == 1


# --------------------------------------------------------------- o log


def test_valor_da_origem_nao_forja_linha_no_log(erp, tmp_path, ambiente_contextia, chave_contextia):
    """
    Só o dado hostil, sem código hostil no cadastro: a coluna de empresa de uma
    linha de titulos traz uma linha de log inteira. O aviso de "código de empresa
    inválido" (a linha vai para a quarentena) a mostra escapada, numa linha só --
    no --log e na saída.
    """
    o = Ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia)
    log = str(tmp_path / 'ouvinte.log')
    assert o.rodar('--once', '--log=' + log)[0] == 0
    erp.executar(
        'INSERT INTO {TITULOS} VALUES (:i, :e, :c, 1, :d, :a)',
        i=erp.base * 1000 + 990,
        e=FORJADA,
        c='x',
        d='2026-10-01',
        a='2026-09-01 11:00:00',
    )
    codigo, saida = o.rodar('--once', '--log=' + log)
    assert codigo == 0, saida
    with open(log, encoding='utf-8') as f:
        texto = f.read()
    esperado = (
        "código de empresa inválido: 'X\\n[E 2026-01-01 00:00:00,000] FORJADA pelo"
        " cadastro' (U+000A)"
    )
    assert esperado in texto and esperado in saida, texto
    for pedaco in (texto, saida):
        sem_linha_forjada(pedaco)


def test_excecao_com_valor_hostil_nao_forja_linha_no_traceback(tmp_path):
    """`logger.exception`: a mensagem da exceção (o erro do driver cita o valor) numa linha."""
    from contextia_sync.registro import arquivo_de_log, logger

    caminho = tmp_path / 'log.txt'
    manipulador = arquivo_de_log(str(caminho))
    try:
        try:
            try:
                raise ValueError('invalid input syntax for type integer: "%s"' % FORJADA)
            except ValueError as erro:
                raise RuntimeError('leitura falhou: %s' % QUEBRA) from erro
        except RuntimeError as erro:
            logger.exception('ciclo falhou: %s', erro)
    finally:
        logger.removeHandler(manipulador)
        manipulador.close()
    texto = caminho.read_text(encoding='utf-8')
    assert 'Traceback (most recent call last):' in texto
    assert 'FORJADA pelo cadastro"' in texto and 'leitura falhou: NOVA\\nFILIAL' in texto
    assert texto.count('ciclo falhou: leitura falhou: NOVA\\nFILIAL') == 1
    sem_linha_forjada(texto)
