"""
A demo: o ERP de demonstração, o mapeamento dele e o roteiro inteiro rodando.

O teste caro roda `demo/demo.py --duracao` como o `make demo` roda, numa pasta
de saída temporária, e confere na saída cada etapa do roteiro, o código 0 e que
nenhum processo ficou para trás. Roda duas vezes na mesma pasta (a segunda,
curta), porque "rodar de novo funciona" e promessa da demo.
"""

import datetime
import decimal
import json
import os
import re
import sqlite3
import subprocess
import sys
import time

import pytest

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(RAIZ, 'demo')
if DEMO not in sys.path:
    sys.path.insert(0, DEMO)

import erp  # noqa: E402
import movimento  # noqa: E402


@pytest.fixture(scope='module')
def banco(tmp_path_factory):
    caminho = str(tmp_path_factory.mktemp('erp') / 'erp.sqlite')
    totais = erp.construir(caminho, escala=0.1)
    conexao = sqlite3.connect(caminho)
    yield caminho, totais, conexao
    conexao.close()


def test_erp_tem_o_cadastro_que_o_roteiro_pede(banco):
    _, totais, conexao = banco
    empresas = dict(conexao.execute('SELECT EMPRESA_ID, ATIVA FROM EMPRESAS').fetchall())
    assert empresas == {10: 'S', 20: 'S', 30: 'S', 40: 'N', 99: 'S'}
    with open(os.path.join(RAIZ, 'mappings', 'demo.json'), encoding='utf-8') as f:
        mapa = json.load(f)
    assert mapa['source']['excluded_scopes'] == ['99']
    assert mapa['projects']['filters'] == [{'column': 'ATIVA', 'equals': 'S'}]
    for tabela in ('CLIENTES', 'TITULOS_RECEBER', 'TITULOS_PAGAR', 'PEDIDOS'):
        por_empresa = dict(
            conexao.execute('SELECT EMPRESA_ID, COUNT(*) FROM %s GROUP BY 1' % tabela).fetchall()
        )
        assert sorted(por_empresa) == [10, 20, 30, 40, 99], tabela
    assert totais['PRODUTOS'] == 150 and totais['STATUS_PEDIDO'] == 6


def test_erp_na_escala_padrao_tem_dezenas_de_milhares_de_linhas():
    volume = sum(erp.VOLUME[t] for t in erp.VOLUME if t != 'PRODUTOS') * len(erp.EMPRESAS)
    assert volume + erp.VOLUME['PRODUTOS'] > 50000


def test_erp_tem_dados_com_cara_de_brasil(banco):
    _, _, conexao = banco
    documentos = conexao.execute('SELECT TIPO_PESSOA, CPF_CNPJ FROM CLIENTES').fetchall()
    assert {t for t, _ in documentos} == {'F', 'J'}
    for tipo, documento in documentos:
        assert erp.documento_valido(documento), documento
        formato = (
            r'\d{3}\.\d{3}\.\d{3}-\d{2}' if tipo == 'F' else r'\d{2}\.\d{3}\.\d{3}/\d{4}-\d{2}'
        )
        assert re.fullmatch(formato, documento), documento
    for (cnpj,) in conexao.execute('SELECT CNPJ FROM EMPRESAS'):
        assert erp.documento_valido(cnpj)
    ufs = {uf for (uf,) in conexao.execute('SELECT DISTINCT UF FROM CLIENTES')}
    assert {'SP', 'MG', 'RJ'} <= ufs
    situacoes = {s for (s,) in conexao.execute('SELECT DISTINCT SITUACAO FROM TITULOS_RECEBER')}
    assert situacoes == {'A', 'P', 'C'}


def test_digito_verificador_confere_documentos_conhecidos():
    # CPF e CNPJ de exemplo amplamente publicados (validos).
    assert erp.documento_valido('529.982.247-25')
    assert erp.documento_valido('11.222.333/0001-81')
    assert not erp.documento_valido('529.982.247-26')
    assert not erp.documento_valido('11.222.333/0001-80')


def test_datas_sao_texto_com_tipo_datetime_e_dinheiro_tem_centavos(banco):
    _, _, conexao = banco
    tipos = {linha[1]: linha[2] for linha in conexao.execute('PRAGMA table_info(TITULOS_RECEBER)')}
    assert tipos['ALTERADO_EM'] == 'DATETIME' and tipos['VALOR'] == 'DECIMAL(14,2)'
    agora = datetime.datetime.now()
    for alterado, valor in conexao.execute(
        'SELECT ALTERADO_EM, VALOR FROM TITULOS_RECEBER LIMIT 500'
    ):
        assert isinstance(alterado, str)
        momento = datetime.datetime.strptime(alterado, '%Y-%m-%d %H:%M:%S')
        assert momento < agora
        assert decimal.Decimal(str(valor)) == decimal.Decimal(str(valor)).quantize(
            decimal.Decimal('0.01')
        )
    # STATUS_PEDIDO e dominio SEM coluna de mudanca (fica fora do ao-vivo).
    colunas = [linha[1] for linha in conexao.execute('PRAGMA table_info(STATUS_PEDIDO)')]
    assert 'ALTERADO_EM' not in colunas


def test_construir_de_novo_recomeca_do_zero(tmp_path):
    caminho = str(tmp_path / 'erp.sqlite')
    primeira = erp.construir(caminho, escala=0.02)
    segunda = erp.construir(caminho, escala=0.02)
    assert primeira == segunda


def test_gerador_de_movimento_carimba_alterado_em(tmp_path):
    caminho = str(tmp_path / 'erp.sqlite')
    erp.construir(caminho, escala=0.02)
    gerador = movimento.Gerador(caminho, ['10', '20', '30'])
    try:
        antes = datetime.datetime.now().replace(microsecond=0)
        baixa = gerador.baixa()
        cancelada = gerador.cancelamento()
        conexao = sqlite3.connect(caminho)
        situacao, alterado = conexao.execute(
            'SELECT SITUACAO, ALTERADO_EM FROM TITULOS_RECEBER WHERE ID = ?', (baixa.chave,)
        ).fetchone()
        assert situacao == 'P'
        assert datetime.datetime.strptime(alterado, '%Y-%m-%d %H:%M:%S') >= antes
        assert conexao.execute(
            'SELECT SITUACAO FROM TITULOS_RECEBER WHERE ID = ?', (cancelada.chave,)
        ).fetchone() == ('C',)
        apagado = gerador.exclusao_fisica()
        assert apagado.remocao and not apagado.ao_vivo
        assert conexao.execute(
            'SELECT COUNT(*) FROM TITULOS_RECEBER WHERE ID = ?', (apagado.chave,)
        ).fetchone() == (0,)
        nova = gerador.empresa_nova(0.02)
        assert conexao.execute('SELECT ATIVA FROM EMPRESAS WHERE EMPRESA_ID = 50').fetchone() == (
            'S',
        )
        assert (
            nova['titulos_a_receber']
            == conexao.execute(
                'SELECT COUNT(*) FROM TITULOS_RECEBER WHERE EMPRESA_ID = 50'
            ).fetchone()[0]
        )
        conexao.close()
    finally:
        gerador.fechar()


def test_percentil_pelo_posto_mais_proximo():
    import demo as roteiro

    assert roteiro.percentil([], 0.5) is None
    assert roteiro.percentil([3.0, 1.0, 2.0], 0.5) == 2.0
    assert roteiro.percentil(list(range(1, 101)), 0.95) == 95


def test_mapeamento_da_demo_vale_pelo_schema_e_pelo_sdk():
    import jsonschema

    with open(os.path.join(RAIZ, 'mappings', 'demo.json'), encoding='utf-8') as f:
        mapa = json.load(f)
    assert mapa['$schema'] == './mapeamento.schema.json'
    with open(os.path.join(RAIZ, 'mappings', 'mapeamento.schema.json'), encoding='utf-8') as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator(schema).validate(mapa)
    from contextia_sync.mapeamento import carregar_mapeamento

    carregado = carregar_mapeamento(os.path.join(RAIZ, 'mappings', 'demo.json'))
    assert len(carregado['datasets']) == 6


def test_saida_que_nao_e_da_demo_nao_e_apagada(tmp_path):
    import demo as roteiro

    (tmp_path / 'importante.txt').write_text('não apague')
    with pytest.raises(SystemExit) as erro:
        roteiro.preparar_saida(str(tmp_path))
    assert 'não foi criada pela demo' in str(erro.value)
    assert (tmp_path / 'importante.txt').exists()


# ---------------------------------------------------------------------------
# O roteiro inteiro, como o `make demo` o roda
# ---------------------------------------------------------------------------


def _processos_com(texto):
    """PIDs vivos cuja linha de comando menciona `texto` (a pasta de saída da demo)."""
    achados = []
    for pid in os.listdir('/proc'):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as f:
                linha = f.read().replace(b'\0', b' ').decode('utf-8', 'replace')
        except OSError:
            continue
        if texto in linha:
            achados.append((int(pid), linha[:200]))
    return achados


def _rodar_demo(saida, duracao, prazo):
    inicio = time.monotonic()
    resultado = subprocess.run(
        [
            sys.executable,
            os.path.join(DEMO, 'demo.py'),
            '--duracao',
            str(duracao),
            '--escala',
            '0.05',
            '--saida',
            saida,
        ],
        cwd=RAIZ,
        capture_output=True,
        text=True,
        timeout=prazo,
        env={k: v for k, v in os.environ.items() if not k.startswith('CONTEXTIA_')},
    )
    return resultado, time.monotonic() - inicio


@pytest.mark.lento
@pytest.mark.xdist_group('pesado_b')  # ver tests/test_tortura_mutacoes.py
def test_demo_roda_o_roteiro_inteiro_e_nao_deixa_processo(tmp_path):
    saida = str(tmp_path / 'saida-demo')
    resultado, _ = _rodar_demo(saida, 80, 420)
    texto = resultado.stdout + resultado.stderr
    assert resultado.returncode == 0, texto[-6000:]

    # Cada etapa do roteiro aparece na saida.
    for trecho in (
        '1. O ERP do cliente',
        'linhas em',
        '2. O Contextia',
        'Contextia local em http://127.0.0.1:',
        '3. Provisionamento',
        'empresa 40',
        'a regra de projeto recusa',
        'empresa 99',
        'excluded_scopes',
        'arquivo de chaves: ',
        '(modo 600)',
        '4. Primeira carga completa',
        '5. O ouvinte no ar',
        'primeiro ciclo feito',
        '6. Movimento no ERP',
        'SITUACAO A -> P',
        'DELETE fisico',
        'continua no Contextia até a varredura',
        'tabela SEM coluna de mudança',
        'empresa NOVA 50',
        'PROVISIONADA',
        'CARREGADA',
        'VARREDURA',
        '--varrer-agora',
        'REMOVIDO pela varredura',
        'chegou com a varredura',
        'O status do ouvinte',
        'datasets ao vivo ..: 5 de 6',
        'fora do ao-vivo',
        'Resumo',
        'mudanças feitas no ERP',
        'entregues ao vivo',
        'p50',
        'p95',
        'roteiro ......................: completo',
        'nada ficou rodando',
    ):
        assert trecho in texto, 'faltou %r na saída da demo:\n%s' % (trecho, texto[-6000:])
    assert re.search(r'visível em +\d+\.\d+s', texto)

    # A latencia medida e a de um ouvinte com intervalo de 2 s: segundos, nao minutos.
    p95 = float(re.search(r'p95 (\d+\.\d+)s', texto).group(1))
    assert p95 < 30, texto[-3000:]

    # A demo termina com a linha da saude (`ouvinte.py --saude`), tirada com o
    # ouvinte ainda no ar: o roteiro completo deixa tudo OK.
    ultima = resultado.stdout.rstrip('\n').splitlines()[-1]
    assert re.match(
        r'^  OUVINTE OK - ouvinte ativo \(serviço, pid \d+\), 5 dataset\(s\) ao vivo,'
        r' .* \| idade_status=\d+s;',
        ultima,
    ), texto[-3000:]
    assert '$ ouvinte.py --saude --estado=' in texto

    assert _processos_com(saida) == []
    assert os.path.exists(os.path.join(saida, 'erp.sqlite'))
    assert os.path.exists(os.path.join(saida, 'estado', 'ouvinte-status.txt'))

    # De novo na mesma pasta: recriada do zero, sobe tudo outra vez e sai limpa.
    resultado, _ = _rodar_demo(saida, 3, 300)
    texto = resultado.stdout + resultado.stderr
    assert resultado.returncode == 0, texto[-4000:]
    assert 'primeiro ciclo feito' in texto and 'Resumo' in texto
    assert re.match(r'^  OUVINTE [A-Z]+ - ', resultado.stdout.rstrip('\n').splitlines()[-1])
    assert _processos_com(saida) == []


def _demo_interrompida(saida, escala, ate):
    """
    Roda a demo até `ate(linha)` devolver algo verdadeiro, manda SIGINT (o Ctrl-C)
    e espera o fim. Devolve (o que `ate` devolveu, a saída inteira, o código).
    """
    import signal

    processo = subprocess.Popen(
        [sys.executable, os.path.join(DEMO, 'demo.py'), '--escala', str(escala), '--saida', saida],
        cwd=RAIZ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith('CONTEXTIA_')},
    )
    linhas, achado, resto = [], None, ''
    try:
        for linha in processo.stdout:
            linhas.append(linha)
            achado = ate(linha)
            if achado:
                break
        processo.send_signal(signal.SIGINT)
        resto, _ = processo.communicate(timeout=120)
    finally:
        if processo.poll() is None:
            processo.kill()
            processo.wait()
    return achado, ''.join(linhas) + resto, processo.returncode


@pytest.mark.lento
def test_demo_interrompida_resume_e_limpa(tmp_path):
    """Ctrl-C (aqui SIGINT no processo) no meio do movimento: resumo e nada para trás."""
    saida = str(tmp_path / 'saida-ctrl-c')
    _, texto, codigo = _demo_interrompida(saida, 0.03, lambda linha: 'visível em' in linha)
    assert codigo == 0, texto[-4000:]
    assert 'parada pedida' in texto and 'Resumo' in texto and 'nada ficou rodando' in texto
    assert re.match(r'^  OUVINTE [A-Z]+ - ', texto.rstrip('\n').splitlines()[-1]), texto[-2000:]
    time.sleep(0.5)
    assert _processos_com(saida) == []


def test_demo_nao_poe_o_token_de_admin_na_linha_de_comando(tmp_path):
    """O token de admin da demo chega ao Contextia local pelo ambiente, nunca pelo ps."""

    def servidor(linha):
        achado = re.search(r'Contextia local em \S+ \(pid (\d+)\)', linha)
        if not achado:
            return None
        with open('/proc/%s/cmdline' % achado.group(1), 'rb') as f:
            linha_de_comando = f.read().replace(b'\0', b' ').decode()
        with open('/proc/%s/environ' % achado.group(1), 'rb') as f:
            ambiente = dict(v.decode().partition('=')[::2] for v in f.read().split(b'\0') if v)
        return linha_de_comando, ambiente

    achado, texto, _ = _demo_interrompida(str(tmp_path / 'saida-token'), 0.01, servidor)
    assert achado, 'a demo não disse o pid do Contextia local:\n' + texto[-3000:]
    linha_de_comando, ambiente = achado
    assert 'contextia_local' in linha_de_comando
    assert '--admin-token' not in linha_de_comando, linha_de_comando
    token = ambiente.get('CONTEXTIA_ADMIN_TOKEN')
    assert token and len(token) >= 32, 'o servidor da demo subiu sem token no ambiente'
    assert token not in linha_de_comando
