"""
As métricas do Prometheus (`ouvinte.prom`, contextia_sync/metricas.py): o
ouvinte.py de verdade contra o Contextia local e um ERP SQLite, e o arquivo lido
por parsers de verdade.

    prometheus_client   `text_string_to_metric_families`, o parser da biblioteca
                        oficial (requirements-dev.txt): OBRIGATORIO, todo teste
                        que lê o arquivo passa por ele.
    promtool            `promtool check metrics` (pacote `prometheus` do Debian):
                        o parser do próprio Prometheus mais o lint de nomes
                        (`_total`, unidades, HELP). Opcional: sem ele o teste
                        PULA dizendo como instalar -- o pacote tem ~100 MB e não
                        entra no `make test` de toda máquina.
    node_exporter       `prometheus-node-exporter` do Debian com só o textfile
                        collector, numa porta livre: quem lê o arquivo em
                        produção. Opcional do mesmo jeito.
"""

import datetime
import json
import re
import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from contextia_sync import metricas
from tests.apoio.ouvinte import DATASET, RAIZ, Ouvinte, esperar
from tests.dados import erp as erp_teste

DOC_OUVINTE = os.path.join(RAIZ, 'docs', 'ouvinte.md')


# -- ler o arquivo ------------------------------------------------------------


def familias(texto):
    """{nome da família: Metric} pelo parser do prometheus_client (levanta se torto)."""
    return {f.name: f for f in text_string_to_metric_families(texto)}


def amostras(texto):
    """{(nome da amostra, ((rótulo, valor), ...)): valor}, pelo prometheus_client."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(texto)
        for s in f.samples
    }


def valor(texto, nome, **rotulos):
    return amostras(texto).get((nome, tuple(sorted(rotulos.items()))))


def ler_prom(pasta):
    with open(os.path.join(pasta, metricas.ARQUIVO_METRICAS), encoding='utf-8') as arquivo:
        return arquivo.read()


def conferir_formato(texto):
    """O que todo ouvinte.prom tem de cumprir, além de o parser aceitar."""
    achadas = familias(texto)
    assert achadas, texto
    for nome, familia in achadas.items():
        assert familia.documentation, nome
        assert familia.type in ('gauge', 'counter'), (nome, familia.type)
        if familia.type == 'counter':
            assert all(s.name == nome + '_total' for s in familia.samples), familia
        for amostra in familia.samples:
            assert amostra.value == amostra.value, amostra  # nada de NaN
            assert amostra.timestamp is None, amostra  # o textfile as recusa
    # Toda familia do arquivo esta na tabela do modulo, com o tipo de la.
    for linha in texto.splitlines():
        if linha.startswith('# TYPE '):
            _, _, nome, tipo = linha.split(' ')
            assert metricas.METRICAS[nome][0] == tipo, linha
    return achadas


def promtool(texto):
    """`promtool check metrics`: (código, saída), ou None se não há promtool."""
    if not shutil.which('promtool'):
        return None
    feito = subprocess.run(
        ['promtool', 'check', 'metrics'], input=texto, capture_output=True, text=True, timeout=60
    )
    return feito.returncode, feito.stdout + feito.stderr


def conferir_com_promtool(texto):
    """Com promtool instalado, ele tem de aceitar o arquivo sem nenhuma queixa do lint.
    Sem ele, nada (test_promtool_aceita_o_arquivo pula e diz por que)."""
    resultado = promtool(texto)
    if resultado is not None:
        codigo, saida = resultado
        assert codigo == 0 and not saida.strip(), saida


# -- o ouvinte de verdade -----------------------------------------------------


@pytest.fixture
def ouvinte(tmp_path, fabrica_de_bancos, ambiente_contextia, chave_contextia):
    erp = erp_teste.Erp(fabrica_de_bancos('sqlite', 'erp'))
    yield Ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia)
    erp.fechar()


@pytest.fixture
def ouvinte_limitado(tmp_path, fabrica_de_bancos, fabrica_contextia, monkeypatch):
    """Um Contextia que recusa lote acima de 20 kB: um registro de 30 kB vai sozinho
    para a quarentena (HTTP 413), e os outros chegam."""
    servidor = fabrica_contextia(max_bytes_lote=20000)
    monkeypatch.setenv('CONTEXTIA_URL', servidor.url)
    erp = erp_teste.Erp(fabrica_de_bancos('sqlite', 'erp'))
    yield Ouvinte(tmp_path, erp, servidor, servidor.criar_projeto_com_chave)
    erp.fechar()


@pytest.mark.lento
def test_ouvinte_once_grava_o_prom_com_a_quarentena_e_os_contadores(ouvinte_limitado):
    o = ouvinte_limitado
    e0 = o.erp.escopos[0]
    codigo, saida = o.rodar('--once')  # provisiona, carga inicial, a marca
    assert codigo == 0, saida
    primeiro = ler_prom(o.estado_dir)
    conferir_formato(primeiro)
    o.inserir(e0, '2026-09-01 11:00:00')
    grande = o.inserir(e0, '2026-09-01 11:00:01')
    o.erp.executar('UPDATE {TITULOS} SET {CLIENTE} = :c WHERE {ID} = :i', c='x' * 30000, i=grande)
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    assert 'QUARENTENA=1' in saida, saida

    texto = ler_prom(o.estado_dir)
    achadas = conferir_formato(texto)
    # O cenario: um registro na quarentena, dois enviados, um novo aceito.
    assert valor(texto, 'ouvinte_dataset_quarentena_registros', dataset=DATASET) == 1
    assert valor(texto, 'ouvinte_dataset_ao_vivo', dataset=DATASET) == 1
    assert valor(texto, 'ouvinte_dataset_ao_vivo', dataset='status') == 0
    assert valor(texto, 'ouvinte_dataset_registros_enviados_total', dataset=DATASET) == 2
    assert (
        valor(texto, 'ouvinte_dataset_registros_aceitos_total', dataset=DATASET, resultado='novo')
        == 1
    )
    for resultado in ('atualizado', 'igual'):
        assert (
            valor(
                texto,
                'ouvinte_dataset_registros_aceitos_total',
                dataset=DATASET,
                resultado=resultado,
            )
            == 0
        )
    assert valor(texto, 'ouvinte_dataset_falhas_seguidas', dataset=DATASET) == 0
    assert valor(texto, 'ouvinte_dataset_falhas_total', dataset=DATASET) == 0
    assert valor(texto, 'ouvinte_ciclos_total', ciclo='dados') == 1
    assert valor(texto, 'ouvinte_ciclo_erros_total', ciclo='dados') == 0
    assert valor(texto, 'ouvinte_laco_falhas_total') == 0
    assert valor(texto, 'ouvinte_falhas_seguidas') == 0
    assert valor(texto, 'ouvinte_dataset_sem_carimbo_registros', dataset=DATASET) == 0
    assert valor(texto, 'ouvinte_dataset_chaves_nulas_linhas', dataset=DATASET) == 0
    assert valor(texto, 'ouvinte_dataset_chaves_repetidas', dataset=DATASET) == 0
    assert valor(texto, 'ouvinte_dataset_carimbo_futuro_registros', dataset=DATASET) == 0
    assert valor(texto, 'ouvinte_varredura_habilitada') == 0
    # O veredito da mesma tabela do --saude, no status e na métrica (issue 29).
    with open(os.path.join(o.estado_dir, 'ouvinte-status.json'), encoding='utf-8') as arquivo:
        saude = json.load(arquivo)['saude']
    assert saude['nivel'] == 'ALERTA', saude
    assert any('1 registro(s) na quarentena' in m for m in saude['motivos']), saude
    assert valor(texto, 'ouvinte_saude_nivel') == 1
    assert valor(primeiro, 'ouvinte_saude_nivel') == 0
    # O --once termina parado, e o arquivo diz.
    assert valor(texto, 'ouvinte_situacao', situacao='parado') == 1
    assert valor(texto, 'ouvinte_situacao', situacao='rodando') == 0
    [info] = achadas['ouvinte_info'].samples
    assert info.value == 1
    assert info.labels['modo'] == 'once' and info.labels['estrategia'] == 'coluna'
    assert info.labels['cliente'] == 'teste' and info.labels['versao']
    # Os instantes batem com o ouvinte-status.json (o mesmo retrato).
    with open(os.path.join(o.estado_dir, 'ouvinte-status.json'), encoding='utf-8') as f:
        status = json.load(f)
    [linha] = [d for d in status['datasets'] if d['dataset'] == DATASET]
    sonda = valor(texto, 'ouvinte_dataset_ultima_sonda_ok_timestamp_seconds', dataset=DATASET)
    assert abs(time.time() - sonda) < 120
    assert time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(sonda)) == linha['ultima_sonda_ok_em']
    atualizado = valor(texto, 'ouvinte_status_atualizado_timestamp_seconds')
    assert atualizado >= sonda and abs(time.time() - atualizado) < 120
    assert (
        valor(texto, 'ouvinte_dataset_atraso_origem_seconds', dataset=DATASET)
        == linha['atraso_origem_s']
    )
    assert valor(texto, 'ouvinte_intervalo_dados_seconds') == 1
    # Nada alem do arquivo (o temporario nao sobra, e nao termina em .prom).
    assert [n for n in os.listdir(o.estado_dir) if 'prom' in n] == ['ouvinte.prom']
    # Legivel pelo usuario do node_exporter, mesmo com o UMask=0077 da unit.
    assert os.stat(os.path.join(o.estado_dir, 'ouvinte.prom')).st_mode & 0o777 == 0o644

    conferir_com_promtool(texto)

    # A varredura com o registro grande: o conector nao fecha a carga da empresa
    # (com `sync`, registro recusado e carga incompleta), e as metricas dizem.
    codigo, saida = o.rodar('--once', '--varrer-agora')
    assert codigo == 1, saida
    texto = ler_prom(o.estado_dir)
    conferir_formato(texto)
    assert valor(texto, 'ouvinte_varredura_ok') == 0
    assert valor(texto, 'ouvinte_varredura_empresas_nao_fechadas', dataset=DATASET) == 1
    assert valor(texto, 'ouvinte_varredura_erros') >= 1
    assert valor(texto, 'ouvinte_ciclos_total', ciclo='varredura') == 1
    assert valor(texto, 'ouvinte_ciclo_erros_total', ciclo='varredura') >= 1
    assert 'ouvinte_varredura_ultima_ok_timestamp_seconds' not in texto
    assert valor(texto, 'ouvinte_varredura_terminada_timestamp_seconds') >= valor(
        texto, 'ouvinte_varredura_iniciada_timestamp_seconds'
    )
    conferir_com_promtool(texto)


@pytest.mark.lento
def test_varredura_boa_da_o_instante_da_ultima_ok(ouvinte):
    o = ouvinte
    assert o.rodar('--once')[0] == 0
    codigo, saida = o.rodar('--once', '--varrer-agora')
    assert codigo == 0, saida
    texto = ler_prom(o.estado_dir)
    conferir_formato(texto)
    assert valor(texto, 'ouvinte_varredura_ok') == 1
    ultima_ok = valor(texto, 'ouvinte_varredura_ultima_ok_timestamp_seconds')
    assert ultima_ok == valor(texto, 'ouvinte_varredura_terminada_timestamp_seconds')
    assert abs(time.time() - ultima_ok) < 300
    assert valor(texto, 'ouvinte_varredura_erros') == 0
    assert 'ouvinte_varredura_empresas_nao_fechadas' not in texto
    conferir_com_promtool(texto)


@pytest.mark.lento
def test_contadores_sobem_entre_ciclos_no_mesmo_processo(ouvinte, tmp_path):
    o = ouvinte
    e0 = o.erp.escopos[0]
    assert o.rodar('--once')[0] == 0  # provisiona e carrega antes
    pasta = str(tmp_path / 'metricas')
    os.makedirs(pasta)
    os.unlink(os.path.join(o.estado_dir, 'ouvinte.prom'))  # o do --once acima
    processo = o.iniciar('--metricas=' + pasta)
    vistos = []

    def ler():
        try:
            texto = ler_prom(pasta)
        except FileNotFoundError:
            return None
        vistos.append(amostras(texto))
        return texto

    def contador(nome, **rotulos):
        texto = ler()
        return valor(texto, nome, **rotulos) if texto else None

    try:
        esperar(lambda: (contador('ouvinte_ciclos_total', ciclo='dados') or 0) >= 2, 60)
        o.inserir(e0, '2026-09-01 11:00:00')
        esperar(
            lambda: contador('ouvinte_dataset_registros_enviados_total', dataset=DATASET) == 1, 60
        )
        ciclos = contador('ouvinte_ciclos_total', ciclo='dados')
        o.inserir(e0, '2026-09-01 11:00:01')
        o.inserir(e0, '2026-09-01 11:00:02')
        esperar(
            lambda: contador('ouvinte_dataset_registros_enviados_total', dataset=DATASET) == 3, 60
        )
        # Ciclos ociosos depois: o contador fica, nao volta a somar o ultimo ciclo.
        esperar(lambda: contador('ouvinte_ciclos_total', ciclo='dados') >= ciclos + 3, 60)
        texto = ler()
        assert valor(texto, 'ouvinte_dataset_registros_enviados_total', dataset=DATASET) == 3
        assert (
            valor(
                texto, 'ouvinte_dataset_registros_aceitos_total', dataset=DATASET, resultado='novo'
            )
            == 3
        )
        assert valor(texto, 'ouvinte_situacao', situacao='rodando') == 1
        [info] = familias(texto)['ouvinte_info'].samples
        assert info.labels['modo'] == 'servico'
        conferir_formato(texto)
        # A view some: o dataset falha (seguidas e total), e a volta inteira tambem
        # (era o unico dataset vivo).
        o.erp.executar('ALTER TABLE {TITULOS} RENAME TO {TITULOS_FORA}')
        try:
            esperar(
                lambda: (contador('ouvinte_dataset_falhas_seguidas', dataset=DATASET) or 0) >= 2, 60
            )
            texto = ler()
            assert valor(texto, 'ouvinte_dataset_falhas_total', dataset=DATASET) >= 2
            assert valor(texto, 'ouvinte_laco_falhas_total') >= 1
            assert valor(texto, 'ouvinte_falhas_seguidas') >= 1
            assert (
                valor(texto, 'ouvinte_dataset_erro_desde_timestamp_seconds', dataset=DATASET)
                <= time.time()
            )
        finally:
            o.erp.executar('ALTER TABLE {TITULOS_FORA} RENAME TO {TITULOS}')
        esperar(lambda: contador('ouvinte_dataset_falhas_seguidas', dataset=DATASET) == 0, 60)
        texto = ler()
        assert valor(texto, 'ouvinte_dataset_falhas_total', dataset=DATASET) >= 2
        assert valor(texto, 'ouvinte_falhas_seguidas') == 0
        assert 'ouvinte_dataset_erro_desde_timestamp_seconds' not in texto
        assert valor(texto, 'ouvinte_dataset_registros_enviados_total', dataset=DATASET) == 3
    finally:
        processo.send_signal(signal.SIGTERM)
        codigo = processo.wait(60)
    assert codigo == 0, o.saida()
    final = ler()
    assert valor(final, 'ouvinte_situacao', situacao='parado') == 1
    conferir_com_promtool(final)
    # Monotonicos de leitura em leitura, do primeiro arquivo ao ultimo.
    contadores = [nome for nome, (tipo, _) in metricas.METRICAS.items() if tipo == 'counter']
    assert len(vistos) > 5
    for antes, depois in zip(vistos, vistos[1:], strict=False):
        for (nome, rotulos), v in antes.items():
            if nome in contadores:
                assert depois.get((nome, rotulos), 0) >= v, (nome, rotulos, antes, depois)
    # O --metricas manda o arquivo para la; o estado fica sem ele.
    assert not os.path.exists(os.path.join(o.estado_dir, 'ouvinte.prom'))


# -- gravar que falha ---------------------------------------------------------


def _dados_minimos(**ouvinte):
    return {
        'ouvinte': dict(
            {
                'pid': 1,
                'iniciado_em': '2026-11-30T20:00:00',
                'atualizado_em': '2026-11-30T20:00:05',
                'situacao': 'rodando',
                'modo': 'servico',
                'estrategia': 'coluna',
            },
            **ouvinte,
        ),
        'ciclos': {},
        'datasets': [],
    }


def _montar_tmpfs_somente_leitura(pasta):
    os.makedirs(pasta, exist_ok=True)
    feito = subprocess.run(
        ['mount', '-t', 'tmpfs', '-o', 'size=16k,ro', 'tmpfs', str(pasta)],
        capture_output=True,
        text=True,
    )
    return feito.returncode == 0, feito.stderr.strip()


def test_gravacao_que_falha_devolve_o_erro_e_nao_levanta(tmp_path):
    dados = _dados_minimos()
    # Pasta que nao existe, e "pasta" que e um arquivo: sem root, sem mount.
    erro = metricas.escrever_metricas(str(tmp_path / 'nao-existe'), dados)
    assert erro and 'FileNotFoundError' in erro and 'ouvinte.prom' in erro, erro
    (tmp_path / 'arquivo').write_text('x')
    erro = metricas.escrever_metricas(str(tmp_path / 'arquivo'), dados)
    assert erro and 'NotADirectoryError' in erro, erro
    # Pasta somente leitura de verdade: como root, um tmpfs montado ro (chmod nao
    # para o root); sem root, chmod 555 basta.
    pasta = tmp_path / 'ro'
    if os.geteuid() == 0:
        ok, motivo = _montar_tmpfs_somente_leitura(pasta)
        if not ok:
            pytest.skip('não foi possível montar um tmpfs somente leitura (%s)' % motivo)
    else:
        pasta.mkdir()
        pasta.chmod(0o555)
    try:
        erro = metricas.escrever_metricas(str(pasta), dados)
        assert erro and ('Read-only' in erro or 'Permission' in erro), erro
        assert os.listdir(pasta) == []
    finally:
        if os.geteuid() == 0:
            subprocess.run(['umount', str(pasta)], check=False)
        else:
            pasta.chmod(0o755)
    # Dado torto (nao e o dicionario do status) tambem nao levanta.
    assert metricas.escrever_metricas(str(tmp_path), {'ouvinte': [], 'datasets': 'x'}) is None


def test_ouvinte_segue_quando_a_pasta_de_metricas_nao_grava(ouvinte, tmp_path):
    o = ouvinte
    codigo, saida = o.rodar('--once', '--metricas=' + str(tmp_path / 'nao-existe'))
    assert codigo == 0, saida
    assert 'não foi possível gravar o status' in saida and 'ouvinte.prom' in saida, saida
    assert 'Traceback' not in saida
    assert os.path.exists(os.path.join(o.estado_dir, 'ouvinte-status.json'))


# -- o formato ----------------------------------------------------------------


def test_rotulo_com_aspas_barra_e_quebra_de_linha_volta_igual_pelo_parser(tmp_path):
    nome = 'nome "estranho"\\com\nquebra'
    dados = _dados_minimos(cliente='Cliente "A"\\B')
    dados['datasets'] = [
        {
            'dataset': nome,
            'ao_vivo': True,
            'quarentena': 2,
            'atraso_origem_s': float('nan'),
            'maior_atraso_s': None,
            'ultima_sonda_ok_em': 'torto',
            'falhas_seguidas': 0,
        }
    ]
    assert metricas.escrever_metricas(str(tmp_path), dados) is None
    texto = ler_prom(tmp_path)
    conferir_formato(texto)
    assert valor(texto, 'ouvinte_dataset_quarentena_registros', dataset=nome) == 2
    assert familias(texto)['ouvinte_info'].samples[0].labels['cliente'] == 'Cliente "A"\\B'
    # NaN, None e hora torta: a amostra fica de fora (e a familia, sem amostra).
    for ausente in (
        'ouvinte_dataset_atraso_origem_seconds',
        'ouvinte_dataset_maior_atraso_seconds',
        'ouvinte_dataset_ultima_sonda_ok_timestamp_seconds',
    ):
        assert ausente not in texto
    assert 'NaN' not in texto
    conferir_com_promtool(texto)


def _dados_completos():
    """Um retrato com tudo preenchido: toda família da tabela aparece no arquivo."""
    dados = _dados_minimos(
        cliente='acme',
        intervalo_dados_s=60,
        folga_s=180,
        falhas_seguidas=1,
        datasets_ao_vivo=1,
        datasets_total=2,
        intervalo_reconciliacao_s=300,
    )
    dados['saude'] = {'nivel': 'CRITICO', 'motivos': ['uma frase da tabela']}
    dados['ciclos'] = {
        'dados': {'em': '2026-11-30T20:00:04', 'erros': 1},
        'projetos': {'em': '2026-11-30T20:00:02', 'erros': 0},
        'falha': {'em': '2026-11-30T20:00:05', 'erro': 'x'},
    }
    dados['ferramenta'] = {'rotulo': 'carga inicial 40', 'pid': 9, 'desde': '2026-11-30T20:00:03'}
    dados['cargas_iniciais_pendentes'] = ['40']
    dados['empresas_recusadas'] = [
        {'escopo': 'NOVA\\nFILIAL', 'onde': 'cadastro', 'motivo': 'tem o caractere U+000A'},
        {'escopo': '41', 'onde': 'chave', 'motivo': 'outra'},
    ]
    dados['quarentena'] = {'total': 3, 'por_dataset': {'titulos': 2, 'antigo': 1}}
    dados['captura'] = {
        'estrategia': 'binlog',
        'posicao': '0-1-9',
        'atraso_origem_s': 0.4,
        'spool_itens': 3,
        'spool_bytes': 900,
        'spool_idade_s': 1.5,
        'spool_devolvidos': [],
        'pausada': None,
        'critico': None,
        'wal_retido_bytes': 4096,
        'wal_seguro_bytes': 1 << 30,
    }
    dados['datasets'] = [
        _dataset(
            ultima_sonda_ok_em='2026-11-30 20:00:03',
            atraso_origem_s=12.5,
            ultima_mudanca_vista_em='2026-11-30 20:00:03',
            enviados=5,
            novos=3,
            atualizados=1,
            iguais=1,
            falhas_seguidas=1,
            ultimo_erro='e',
            erro_desde='2026-11-30 20:00:03',
            quarentena=2,
            sem_carimbo=4,
            futuras=1,
            maior_atraso_s=95.0,
            atraso_preocupante=True,
            atrasadas_total=7,
            entregue_a_varredura='900 linhas em 2026-11-30 19:00:00',
            reconciliacao={
                'ativa': True,
                'ultima_em': '2026-11-30 20:00:01',
                'duracao_s': 1.5,
                'chaves': 75,
                'removidas': 2,
                'removidas_total': 14,
                'incluidas_total': 3,
                'recusa': 'a reconciliação removeria ...',
                'falhas_seguidas': 1,
            },
        ),
        {'dataset': 'status', 'ao_vivo': False, 'motivo': 'watch_column: null'},
    ]
    dados['varredura'] = {
        'hora': '02:00',
        'iniciada_em': '2026-11-30T02:00:00',
        'terminada_em': '2026-11-30T03:10:00',
        'ok': False,
        'erros': ['carregar-todas: saiu com 1'],
        'nao_fechados': {'titulos': ['40', '41']},
        'ultima_ok_em': '2026-11-29T03:05:00',
    }
    return dados


def test_retrato_completo_tem_toda_metrica_da_tabela(tmp_path):
    assert metricas.escrever_metricas(str(tmp_path), _dados_completos()) is None
    texto = ler_prom(tmp_path)
    conferir_formato(texto)
    tipos = [linha.split(' ')[2] for linha in texto.splitlines() if linha.startswith('# TYPE')]
    assert tipos == list(metricas.METRICAS)  # todas, na ordem da tabela
    assert valor(texto, 'ouvinte_dataset_quarentena_registros', dataset='antigo') == 1
    assert valor(texto, 'ouvinte_varredura_empresas_nao_fechadas', dataset='titulos') == 2
    assert (
        valor(
            texto,
            'ouvinte_dataset_registros_aceitos_total',
            dataset='titulos',
            resultado='atualizado',
        )
        == 1
    )
    assert valor(texto, 'ouvinte_laco_falhas_total') == 1
    assert valor(texto, 'ouvinte_saude_nivel') == 2
    assert valor(texto, 'ouvinte_empresas_recusadas', onde='cadastro') == 1
    assert valor(texto, 'ouvinte_empresas_recusadas', onde='chave') == 1
    assert valor(texto, 'ouvinte_dataset_falhas_total', dataset='titulos') == 1
    assert valor(texto, 'ouvinte_spool_mudancas') == 3
    assert valor(texto, 'ouvinte_captura_pausada') == 0
    assert (
        valor(texto, 'ouvinte_ferramenta_inicio_timestamp_seconds')
        == datetime.datetime(2026, 11, 30, 20, 0, 3).timestamp()
    )
    # A reconciliacao: os totais vem do estado (sobrevivem ao reinicio), a recusa e 1.
    assert valor(texto, 'ouvinte_dataset_chaves_removidas_total', dataset='titulos') == 14
    assert valor(texto, 'ouvinte_dataset_reconciliacao_recusada', dataset='titulos') == 1
    assert (
        valor(texto, 'ouvinte_dataset_reconciliacao_ultima_timestamp_seconds', dataset='titulos')
        == datetime.datetime(2026, 11, 30, 20, 0, 1).timestamp()
    )
    assert valor(texto, 'ouvinte_intervalo_reconciliacao_seconds') == 300


def test_promtool_aceita_o_arquivo(tmp_path):
    """`promtool check metrics`: o parser do Prometheus e o lint dele (`_total` só em
    counter, unidade de base, HELP). Os testes acima também o chamam, se houver."""
    if not shutil.which('promtool'):
        pytest.skip(
            'promtool não instalado (apt-get install prometheus): a validação'
            ' obrigatória e a do prometheus_client, feita nos outros testes'
        )
    assert metricas.escrever_metricas(str(tmp_path), _dados_completos()) is None
    codigo, saida = promtool(ler_prom(tmp_path))
    assert codigo == 0 and not saida.strip(), saida
    # O lint esta ligado de verdade: um nome torto ele recusa.
    codigo, saida = promtool('# HELP x_total a\n# TYPE x_total gauge\nx_total 1\n')
    assert codigo != 0 and '_total' in saida, saida


def _dataset(**campos):
    return dict(
        {
            'dataset': 'titulos',
            'ao_vivo': True,
            'falhas_seguidas': 0,
            'enviados': 0,
            'novos': 0,
            'atualizados': 0,
            'iguais': 0,
        },
        **campos,
    )


def test_o_mesmo_ciclo_regravado_nao_soma_de_novo_e_a_subida_recomeca(tmp_path):
    pasta = str(tmp_path)
    dados = _dados_minimos()
    # Uma sonda de ANTES da subida (do processo anterior): nao conta aqui.
    dados['datasets'] = [_dataset(ultima_sonda_ok_em='2026-11-30 19:59:00', enviados=7, novos=7)]
    assert metricas.escrever_metricas(pasta, dados) is None
    assert (
        valor(ler_prom(pasta), 'ouvinte_dataset_registros_enviados_total', dataset='titulos') == 0
    )
    # Sonda deste processo, mas o ciclo de dados ainda nao terminou: espera.
    dados['datasets'] = [
        _dataset(ultima_sonda_ok_em='2026-11-30 20:00:10', enviados=4, novos=3, iguais=1)
    ]
    assert metricas.escrever_metricas(pasta, dados) is None
    assert (
        valor(ler_prom(pasta), 'ouvinte_dataset_registros_enviados_total', dataset='titulos') == 0
    )
    dados['ciclos'] = {'dados': {'em': '2026-11-30T20:00:11', 'erros': 0}}
    for _ in range(3):  # o laco e a ferramenta regravam o mesmo retrato
        assert metricas.escrever_metricas(pasta, dados) is None
    texto = ler_prom(pasta)
    assert valor(texto, 'ouvinte_dataset_registros_enviados_total', dataset='titulos') == 4
    assert (
        valor(
            texto, 'ouvinte_dataset_registros_aceitos_total', dataset='titulos', resultado='igual'
        )
        == 1
    )
    assert valor(texto, 'ouvinte_ciclos_total', ciclo='dados') == 1
    # Falha do dataset: conta uma vez por ciclo que falhou, e a sonda velha nao soma.
    dados['ciclos'] = {'dados': {'em': '2026-11-30T20:00:20', 'erros': 1}}
    dados['datasets'][0].update(
        falhas_seguidas=1, ultimo_erro='x', erro_desde='2026-11-30 20:00:19'
    )
    assert metricas.escrever_metricas(pasta, dados) is None
    assert metricas.escrever_metricas(pasta, dados) is None
    texto = ler_prom(pasta)
    assert valor(texto, 'ouvinte_dataset_falhas_total', dataset='titulos') == 1
    assert valor(texto, 'ouvinte_dataset_registros_enviados_total', dataset='titulos') == 4
    assert valor(texto, 'ouvinte_ciclo_erros_total', ciclo='dados') == 1
    assert valor(texto, 'ouvinte_dataset_erro_desde_timestamp_seconds', dataset='titulos')
    # Outra subida (outro pid e hora de inicio): os contadores recomecam do zero.
    novo = _dados_minimos(pid=2, iniciado_em='2026-11-30T21:00:00')
    novo['datasets'] = [_dataset(ultima_sonda_ok_em='2026-11-30 20:00:10', enviados=4)]
    assert metricas.escrever_metricas(pasta, novo) is None
    texto = ler_prom(pasta)
    assert valor(texto, 'ouvinte_dataset_registros_enviados_total', dataset='titulos') == 0
    assert valor(texto, 'ouvinte_dataset_falhas_total', dataset='titulos') == 0
    assert 'ouvinte_ciclos_total' not in texto


def test_temporario_orfao_de_uma_gravacao_morta_e_apagado(tmp_path):
    orfao = tmp_path / '.ouvinte.prom.abc123.tmp'
    orfao.write_text('meio arquivo')
    velho = time.time() - 3600
    os.utime(orfao, (velho, velho))
    recente = tmp_path / '.ouvinte.prom.def456.tmp'
    recente.write_text('outro escrevendo agora')
    outro = tmp_path / 'outro-coletor.prom'
    outro.write_text('# de outro coletor\n')
    assert metricas.escrever_metricas(str(tmp_path), _dados_minimos(pid=99)) is None
    assert sorted(os.listdir(tmp_path)) == sorted(
        ['.ouvinte.prom.def456.tmp', 'outro-coletor.prom', 'ouvinte.prom']
    )


def test_toda_metrica_esta_documentada():
    with open(DOC_OUVINTE, encoding='utf-8') as arquivo:
        doc = arquivo.read()
    faltam = [nome for nome in metricas.METRICAS if '`%s`' % nome not in doc]
    assert not faltam, 'docs/ouvinte.md não lista: %s' % faltam


# -- quem le o arquivo em producao: o node_exporter -------------------------------


def _porta_livre():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def test_node_exporter_le_o_arquivo_sem_erro(tmp_path):
    binario = shutil.which('prometheus-node-exporter') or shutil.which('node_exporter')
    if not binario:
        pytest.skip('node_exporter não instalado (apt-get install prometheus-node-exporter)')
    dados = _dados_minimos()
    dados['datasets'] = [
        _dataset(ultima_sonda_ok_em='2026-11-30 20:00:04', quarentena=1, atraso_origem_s=12.5)
    ]
    dados['ciclos'] = {'dados': {'em': '2026-11-30T20:00:05', 'erros': 0}}
    assert metricas.escrever_metricas(str(tmp_path), dados) is None
    porta = _porta_livre()
    processo = subprocess.Popen(
        [
            binario,
            '--collector.disable-defaults',
            '--collector.textfile',
            '--collector.textfile.directory=' + str(tmp_path),
            '--web.listen-address=127.0.0.1:%d' % porta,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:

        def raspar():
            try:
                with urllib.request.urlopen(
                    'http://127.0.0.1:%d/metrics' % porta, timeout=5
                ) as resposta:
                    return resposta.read().decode('utf-8')
            except OSError:
                return None

        texto = esperar(raspar, 30)
    finally:
        processo.terminate()
        processo.wait(10)
    assert valor(texto, 'node_textfile_scrape_error') == 0, texto
    assert valor(texto, 'ouvinte_dataset_quarentena_registros', dataset='titulos') == 1
    assert valor(texto, 'ouvinte_dataset_atraso_origem_seconds', dataset='titulos') == 12.5
    assert valor(texto, 'ouvinte_ciclos_total', ciclo='dados') == 1


# -- as regras de alerta de exemplo (docs/implantacao.md) ---------------------------

DOC_IMPLANTACAO = os.path.join(RAIZ, 'docs', 'implantacao.md')
MARCA_REGRAS = '<!-- regras-prometheus'

# Series sinteticas (o relogio do `promtool test rules` comeca em 0) e o que cada
# regra tem de dizer. a: o status parou aos 3 min, `titulos` sem sonda, `notas`
# falhando desde 0, `vendas` com 3 falhas seguidas, nenhuma varredura boa desde
# a subida (ha 28 h). b: varredura boa ha pouco. c: subiu agora. d: uma
# ferramenta roda (a varredura): sem sonda, e calado.
TESTE_REGRAS = """
rule_files: [regras.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - {series: 'ouvinte_status_atualizado_timestamp_seconds{instance="a"}',
         values: '0 60 120 180 180x40'}
      - {series: 'ouvinte_intervalo_dados_seconds{instance="a"}', values: '60x40'}
      - {series: 'ouvinte_ferramenta_rodando{instance="a"}', values: '0x40'}
      - séries: 'ouvinte_dataset_ultima_sonda_ok_timestamp_seconds{instance="a",dataset="titulos"}'
        values: '0x40'
      - séries: 'ouvinte_dataset_ultima_sonda_ok_timestamp_seconds{instance="a",dataset="pedidos"}'
        values: '0+60x40'
      - {series: 'ouvinte_dataset_erro_desde_timestamp_seconds{instance="a",dataset="notas"}',
         values: '0x40'}
      - {series: 'ouvinte_dataset_falhas_seguidas{instance="a",dataset="notas"}',
         values: '1x40'}
      - {series: 'ouvinte_dataset_falhas_seguidas{instance="a",dataset="vendas"}',
         values: '3x40'}
      - {series: 'ouvinte_dataset_falhas_seguidas{instance="a",dataset="pedidos"}',
         values: '0x40'}
      - {series: 'ouvinte_dataset_quarentena_registros{instance="a",dataset="titulos"}',
         values: '1x40'}
      - {series: 'ouvinte_varredura_habilitada{instance="a"}', values: '1x40'}
      - {series: 'ouvinte_iniciado_timestamp_seconds{instance="a"}',
         values: '-100000x40'}
      - {series: 'ouvinte_varredura_habilitada{instance="b"}', values: '1x40'}
      - {series: 'ouvinte_iniciado_timestamp_seconds{instance="b"}',
         values: '-200000x40'}
      - {series: 'ouvinte_varredura_ultima_ok_timestamp_seconds{instance="b"}',
         values: '-1000x40'}
      - {series: 'ouvinte_varredura_ok{instance="b"}', values: '1x40'}
      - {series: 'ouvinte_varredura_habilitada{instance="c"}', values: '1x40'}
      - {series: 'ouvinte_iniciado_timestamp_seconds{instance="c"}', values: '0x40'}
      - {series: 'ouvinte_varredura_ok{instance="c"}', values: '0x40'}
      - {series: 'ouvinte_intervalo_dados_seconds{instance="d"}', values: '60x40'}
      - {series: 'ouvinte_ferramenta_rodando{instance="d"}', values: '1x40'}
      - séries: 'ouvinte_dataset_ultima_sonda_ok_timestamp_seconds{instance="d",dataset="titulos"}'
        values: '0x40'
    alert_rule_test:
      - {eval_time: 10m, alertname: OuvinteParado}
      - eval_time: 25m
        alertname: OuvinteParado
        exp_alerts: [{exp_labels: {severity: critical, instance: a}}]
      - eval_time: 25m
        alertname: OuvinteDatasetSemSondaBoa
        exp_alerts: [{exp_labels: {severity: critical, instance: a, dataset: titulos}}]
      - eval_time: 25m
        alertname: OuvinteDatasetSemCicloBom
        exp_alerts:
          - {exp_labels: {severity: critical, instance: a, dataset: notas}}
          - {exp_labels: {severity: critical, instance: a, dataset: vendas}}
      - eval_time: 30m
        alertname: OuvinteVarreduraAtrasada
        exp_alerts: [{exp_labels: {severity: critical, instance: a}}]
      - eval_time: 5m
        alertname: OuvinteVarreduraFalhou
        exp_alerts: [{exp_labels: {severity: critical, instance: c}}]
      - eval_time: 5m
        alertname: OuvinteQuarentena
        exp_alerts: [{exp_labels: {severity: warning, instance: a, dataset: titulos}}]
"""


def _regras_do_documento():
    with open(DOC_IMPLANTACAO, encoding='utf-8') as arquivo:
        doc = arquivo.read()
    assert MARCA_REGRAS in doc, 'o bloco das regras sumiu de docs/implantacao.md'
    resto = doc[doc.index(MARCA_REGRAS) :]
    inicio = resto.index('```yaml\n') + len('```yaml\n')
    return resto[inicio : resto.index('```', inicio)]


def _sem_anotacoes(regras):
    """As regras sem `annotations:` (o teste confere os rótulos, não o texto)."""
    linhas, pulando = [], None
    for linha in regras.splitlines():
        recuo = len(linha) - len(linha.lstrip())
        if pulando is not None and linha.strip() and recuo > pulando:
            continue
        pulando = recuo if linha.strip() == 'annotations:' else None
        if pulando is None:
            linhas.append(linha)
    return '\n'.join(linhas) + '\n'


def test_regras_de_alerta_do_documento_disparam_quando_devem(tmp_path):
    if not shutil.which('promtool'):
        pytest.skip('promtool não instalado (apt-get install prometheus)')
    regras = _regras_do_documento()
    (tmp_path / 'regras-doc.yml').write_text(regras)
    feito = subprocess.run(
        ['promtool', 'check', 'rules', str(tmp_path / 'regras-doc.yml')],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert feito.returncode == 0, feito.stdout + feito.stderr
    # Toda metrica que as regras usam existe.
    usadas = set(re.findall(r'\b(ouvinte_[a-z_]+)', regras))
    assert usadas and usadas <= set(metricas.METRICAS), usadas - set(metricas.METRICAS)
    (tmp_path / 'regras.yml').write_text(_sem_anotacoes(regras))
    (tmp_path / 'teste.yml').write_text(TESTE_REGRAS)
    feito = subprocess.run(
        ['promtool', 'test', 'rules', 'teste.yml'],
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert feito.returncode == 0, feito.stdout + feito.stderr
