"""
provisionar.py de verdade (subprocesso), origem SQLite/PostgreSQL, Contextia local real.

O programa roda pelo provisionar.py da raiz (como o ouvinte e o cron o chamam);
`python -m contextia_sync.cli.provisionar` e o mesmo `main`, conferido a parte.

Os crashes são de verdade: CONTEXTIA_TESTE_MORRER_EM faz o processo se matar
com SIGKILL no ponto pedido, e a recuperação e provada rodando de novo.
"""

import os
import re
import signal
import stat
import subprocess
import sys

import pytest

from contextia_sync import __version__
from contextia_sync.intake import cliente
from contextia_sync.provisionamento import plano
from contextia_sync.provisionamento.chaves import ErroChaves, ler_chaves, ler_registros
from tests.dados import erp as erp_teste

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEGREDO = 'segredo-de-teste-webhook'


@pytest.fixture
def erp(banco_sqlite):
    return erp_teste.Erp(banco_sqlite)


@pytest.fixture
def mapa(tmp_path, ambiente_contextia):
    return erp_teste.mapeamento(
        tmp_path,
        webhook={
            'url': '%s/receptor/{escopo}' % ambiente_contextia.url,
            'secret_env': 'CONTEXTIA_WEBHOOK_TESTE',
        },
    )


def provisionar_cli(
    erp: erp_teste.Erp,
    mapa: str,
    arquivo: object,
    *extra: str,
    ambiente: dict[str, str] | None = None,
    programa: tuple[str, ...] = ('provisionar.py',),
) -> tuple[int, str]:
    env = dict(os.environ, CONTEXTIA_ORIGEM=erp.url, CONTEXTIA_WEBHOOK_TESTE=SEGREDO)
    env.pop('CONTEXTIA_API_KEY', None)
    env.update(ambiente or {})
    feito = subprocess.run(
        [
            sys.executable,
            *programa,
            '--mapping=' + mapa,
            '--source=generic',
            '--chaves=' + str(arquivo),
        ]
        + list(extra),
        cwd=RAIZ,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=120,
    )
    return feito.returncode, feito.stdout.decode('utf-8', 'replace')


def chaves_ativas(admin, escopo):
    projeto = admin.buscar_projeto(escopo)
    return [c for c in admin.listar_chaves(projeto['id']) if not c['revogada']]


def test_provisiona_as_novas_grava_0600_e_segunda_vez_nada(erp, mapa, tmp_path, ambiente_contextia):
    arquivo = tmp_path / 'chaves.tsv'
    codigo, saida = provisionar_cli(erp, mapa, arquivo, '--grupo=rede-teste')
    assert codigo == 0, saida
    assert stat.S_IMODE(os.stat(arquivo).st_mode) == 0o600
    registros = ler_registros(str(arquivo))
    assert sorted(registros) == sorted(erp.escopos)
    assert {r.situacao for r in registros.values()} == {'pronto'}
    assert "recusada ...: %s (ATIVA='N' (exige 'S'))" % erp.inativa in saida
    assert 'resumo: 2 criada(s), 0 reparada(s), 0 com falha' in saida
    for registro in registros.values():
        assert registro.chave not in saida  # a chave nunca vai para a saida
        dono = cliente.quem_sou(registro.chave)
        assert dono['external_id'] == registro.escopo

    admin = ambiente_contextia.admin()
    grupos = {g['slug']: g['projetos'] for g in admin.listar_grupos()}
    primeira = registros[erp.escopos[0]]
    assert primeira.projeto_id in grupos['rede-teste']
    assert primeira.projeto_id in grupos['grupo-sul']  # do group_column
    assert registros[erp.escopos[1]].projeto_id not in grupos['grupo-sul']
    ganchos = admin.listar_webhooks(primeira.projeto_id)
    assert [w['url'] for w in ganchos] == [
        '%s/receptor/%s' % (ambiente_contextia.url, erp.escopos[0])
    ]
    assert admin.buscar_projeto(erp.inativa) is None
    assert ler_chaves(str(arquivo)) == {e: r.chave for e, r in registros.items()}

    codigo, saida = provisionar_cli(erp, mapa, arquivo, '--grupo=rede-teste')
    assert codigo == 0, saida
    assert 'resumo: nada a fazer' in saida
    assert ler_registros(str(arquivo)) == registros


def test_crash_entre_emitir_e_gravar_e_reparado(erp, mapa, tmp_path, ambiente_contextia):
    arquivo = tmp_path / 'chaves.tsv'
    escopo = erp.escopos[0]
    codigo, saida = provisionar_cli(
        erp,
        mapa,
        arquivo,
        '--somente-escopo=' + escopo,
        ambiente={'CONTEXTIA_TESTE_MORRER_EM': 'chave-emitida'},
    )
    assert codigo == -signal.SIGKILL, saida
    # Morreu com a chave emitida e nao gravada: a empresa nao esta no arquivo...
    assert escopo not in ler_registros(str(arquivo))
    admin = ambiente_contextia.admin()
    orfas = chaves_ativas(admin, escopo)
    assert len(orfas) == 1  # ...e ha uma chave valida sem dono.

    codigo, saida = provisionar_cli(erp, mapa, arquivo, '--somente-escopo=' + escopo)
    assert codigo == 0, saida
    assert 'já existia e a empresa não está no arquivo' in saida
    assert 'REPARO -- revogada a chave %s' % orfas[0]['key_id'] in saida
    assert 'resumo: 0 criada(s), 1 reparada(s), 0 com falha' in saida
    registro = ler_registros(str(arquivo))[escopo]
    assert registro.situacao == 'pronto'
    ativas = chaves_ativas(admin, escopo)
    assert [c['key_id'] for c in ativas] == [registro.key_id]
    assert cliente.quem_sou(registro.chave)['external_id'] == escopo
    # Nenhum projeto duplicado.
    assert (
        len(
            admin._pedido('GET', '/api/v1/admin/projetos', params={'external_id': escopo})[
                'projetos'
            ]
        )
        == 1
    )


def test_crash_entre_gravar_e_grupos_e_concluido(erp, mapa, tmp_path, ambiente_contextia):
    arquivo = tmp_path / 'chaves.tsv'
    escopo = erp.escopos[0]
    codigo, saida = provisionar_cli(
        erp,
        mapa,
        arquivo,
        '--somente-escopo=' + escopo,
        '--grupo=rede-crash',
        ambiente={'CONTEXTIA_TESTE_MORRER_EM': 'chave-gravada'},
    )
    assert codigo == -signal.SIGKILL, saida
    registro = ler_registros(str(arquivo))[escopo]
    assert registro.situacao == 'pendente'
    # A chave gravada ja serve (carga pode rodar), mas grupos e webhook nao foram feitos.
    assert cliente.quem_sou(registro.chave)['external_id'] == escopo
    admin = ambiente_contextia.admin()
    assert 'rede-crash' not in {g['slug'] for g in admin.listar_grupos()}
    assert admin.listar_webhooks(registro.projeto_id) == []

    codigo, saida = provisionar_cli(erp, mapa, arquivo, '--grupo=rede-crash')
    assert codigo == 0, saida
    assert 'REPARO -- concluindo provisionamento interrompido' in saida
    registros = ler_registros(str(arquivo))
    assert registros[escopo].chave == registro.chave  # a mesma chave, nao outra
    assert registros[escopo].situacao == 'pronto'
    grupos = {g['slug']: g['projetos'] for g in admin.listar_grupos()}
    assert registro.projeto_id in grupos['rede-crash']
    assert len(admin.listar_webhooks(registro.projeto_id)) == 1
    assert [c['key_id'] for c in chaves_ativas(admin, escopo)] == [registro.key_id]
    # A outra empresa, que ainda nao existia, foi criada na mesma execucao.
    assert erp.escopos[1] in registros


def test_arquivo_aberto_para_outros_e_recusado(erp, mapa, tmp_path, ambiente_contextia):
    arquivo = tmp_path / 'chaves.tsv'
    arquivo.write_text('# vazio\n')
    os.chmod(arquivo, 0o644)
    codigo, saida = provisionar_cli(erp, mapa, arquivo)
    assert codigo == 2, saida
    assert 'chmod 600 %s' % arquivo in saida
    assert ambiente_contextia.admin().buscar_projeto(erp.escopos[0]) is None
    with pytest.raises(ErroChaves, match='chmod 600'):
        ler_chaves(str(arquivo))


@pytest.mark.parametrize(
    'linha, trecho',
    [
        ('297\tctx_abc\t12\n', 'esperava 5 campos'),
        ('297\tctx_abc\t12\tkey_1\tquase\n', "situação 'quase' desconhecida"),
        ('\tctx_abc\n', 'escopo vazio'),
        ('297\tctx abc\n', 'está vazia ou tem espaço'),
    ],
)
def test_linha_corrompida_e_erro_nomeando_a_linha(
    erp, mapa, tmp_path, ambiente_contextia, linha, trecho
):
    arquivo = tmp_path / 'chaves.tsv'
    arquivo.write_text('# cabeçalho\n301\tctx_boa\n' + linha)
    os.chmod(arquivo, 0o600)
    codigo, saida = provisionar_cli(erp, mapa, arquivo)
    assert codigo == 2, saida
    assert '%s, linha 3' % arquivo in saida and trecho in saida
    assert 'ctx_abc' not in saida and 'ctx_boa' not in saida
    assert ambiente_contextia.admin().buscar_projeto(erp.escopos[0]) is None


def test_escopo_repetido_no_arquivo_e_erro(tmp_path):
    arquivo = tmp_path / 'chaves.tsv'
    arquivo.write_text('301\tctx_a\n301\tctx_b\n')
    os.chmod(arquivo, 0o600)
    with pytest.raises(ErroChaves, match=r'linha 2: a empresa .301. já aparece na linha 1'):
        ler_registros(str(arquivo))


def test_seco_mostra_o_plano_e_nao_muda_nada(erp, mapa, tmp_path, ambiente_contextia):
    arquivo = tmp_path / 'chaves.tsv'
    codigo, saida = provisionar_cli(erp, mapa, arquivo, '--dry-run', '--grupo=g1')
    assert codigo == 0, saida
    assert "criar ......: %s 'Padaria Pao Quente' grupos=g1,grupo-sul" % erp.escopos[0] in saida
    assert 'SECO' in saida
    assert not arquivo.exists()
    assert not os.path.exists(str(arquivo) + '.trava')
    assert ambiente_contextia.admin().buscar_projeto(erp.escopos[0]) is None


@pytest.mark.parametrize(
    'segredo, trecho', [('', 'não está definida'), ('curto', 'exige pelo menos 16')]
)
def test_segredo_do_webhook_ausente_ou_curto_para_antes_de_criar(
    erp, mapa, tmp_path, ambiente_contextia, segredo, trecho
):
    arquivo = tmp_path / 'chaves.tsv'
    codigo, saida = provisionar_cli(
        erp, mapa, arquivo, ambiente={'CONTEXTIA_WEBHOOK_TESTE': segredo}
    )
    assert codigo == 2, saida
    assert 'CONTEXTIA_WEBHOOK_TESTE' in saida and trecho in saida
    assert not arquivo.exists()
    assert ambiente_contextia.admin().buscar_projeto(erp.escopos[0]) is None


def test_sem_token_de_admin_sai_com_2(erp, mapa, tmp_path, ambiente_contextia):
    codigo, saida = provisionar_cli(
        erp, mapa, tmp_path / 'chaves.tsv', ambiente={'CONTEXTIA_ADMIN_TOKEN': ''}
    )
    assert codigo == 2 and 'CONTEXTIA_ADMIN_TOKEN' in saida, saida


def test_somente_escopo_inexistente_sai_com_1(erp, mapa, tmp_path, ambiente_contextia):
    codigo, saida = provisionar_cli(
        erp, mapa, tmp_path / 'chaves.tsv', '--somente-escopo=' + erp.inativa
    )
    assert codigo == 1, saida
    assert 'NÃO ACHADA .: %s' % erp.inativa in saida


@pytest.mark.postgres
def test_provisiona_de_origem_postgres(tmp_path, mapa, banco_postgres, ambiente_contextia):
    banco = erp_teste.Erp(banco_postgres)
    arquivo = tmp_path / 'chaves.tsv'
    codigo, saida = provisionar_cli(banco, mapa, arquivo)
    assert codigo == 0, saida
    assert sorted(ler_registros(str(arquivo))) == sorted(banco.escopos)


def test_dois_provisionadores_no_mesmo_arquivo_o_segundo_e_recusado(
    erp, mapa, tmp_path, ambiente_contextia
):
    from contextia_sync.provisionamento.chaves import travado

    arquivo = tmp_path / 'chaves.tsv'
    with travado(str(arquivo)):
        codigo, saida = provisionar_cli(erp, mapa, arquivo)
    assert codigo == 2, saida
    assert 'outro provisionar.py está usando' in saida
    assert ambiente_contextia.admin().buscar_projeto(erp.escopos[0]) is None


def test_grupo_que_nao_e_slug_e_recusado(erp, mapa, tmp_path):
    codigo, saida = provisionar_cli(erp, mapa, tmp_path / 'chaves.tsv', '--grupo=Rede Sul')
    assert codigo == 2 and "use 'rede-sul'" in saida, saida
    codigo, saida = provisionar_cli(erp, mapa, tmp_path / 'chaves.tsv', '--grupo=!!!')
    assert codigo == 2 and 'como rede-sul' in saida and 'None' not in saida, saida


def test_somente_escopo_vazio_e_recusado_e_nada_e_provisionado(
    erp, mapa, tmp_path, ambiente_contextia
):
    """Vazio não é "todas": a variável vazia de um script não provisiona o cadastro inteiro."""
    arquivo = tmp_path / 'chaves.tsv'
    codigo, saida = provisionar_cli(erp, mapa, arquivo, '--somente-escopo=')
    assert codigo == 2 and '--somente-escopo vazio' in saida, saida
    assert not arquivo.exists() or ler_registros(str(arquivo)) == {}
    assert all(ambiente_contextia.admin().buscar_projeto(e) is None for e in erp.escopos)


@pytest.mark.parametrize(
    'ambiente, trecho',
    [
        ({'CONTEXTIA_ORIGEM': ''}, 'Falta CONTEXTIA_ORIGEM'),
        ({'CONTEXTIA_ORIGEM_TIMEOUT': 'cinco'}, 'CONTEXTIA_ORIGEM_TIMEOUT'),
        (
            {'CONTEXTIA_ORIGEM': 'postgresql+psycopg//leitor:SenhaTorta9@erp/erp'},
            'não é URL SQLAlchemy válida',
        ),
    ],
)
def test_origem_mal_configurada_e_erro_de_configuracao(
    erp, mapa, tmp_path, ambiente_contextia, ambiente, trecho
):
    """CONTEXTIA_ORIGEM ausente ou invalida não é a origem fora do ar: sai com 2."""
    arquivo = tmp_path / 'chaves.tsv'
    codigo, saida = provisionar_cli(erp, mapa, arquivo, ambiente=ambiente)
    assert codigo == 2, saida
    assert trecho in saida and 'SenhaTorta9' not in saida
    assert 'Traceback' not in saida
    assert not arquivo.exists()
    assert ambiente_contextia.admin().buscar_projeto(erp.escopos[0]) is None


def test_origem_fora_do_ar_sai_com_1(erp, mapa, tmp_path):
    """Origem que não responde (aqui, um SQLite que não abre) continua sendo 1."""
    codigo, saida = provisionar_cli(
        erp,
        mapa,
        tmp_path / 'chaves.tsv',
        '--dry-run',
        ambiente={'CONTEXTIA_ORIGEM': 'sqlite:///%s' % (tmp_path / 'nao' / 'existe.db')},
    )
    assert codigo == 1, saida
    assert 'não foi possível ler o cadastro EMPRESAS na origem' in saida
    assert 'Nada foi mudado' in saida


@pytest.mark.parametrize(
    'programa', [('provisionar.py',), ('-m', 'contextia_sync.cli.provisionar')]
)
def test_versao_e_os_dois_jeitos_de_chamar(programa):
    feito = subprocess.run(
        [sys.executable, *programa, '--version'],
        cwd=RAIZ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=60,
    )
    assert feito.returncode == 0
    assert feito.stdout.decode() == 'provisionar (contextia_sync %s)\n' % __version__
    ajuda = subprocess.run(
        [sys.executable, *programa, '--help'],
        cwd=RAIZ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=60,
    )
    assert ajuda.returncode == 0
    assert re.search(r'(?m)^  2 +erro de configuração', ajuda.stdout.decode())


def test_modulo_da_cli_provisiona_igual(erp, mapa, tmp_path, ambiente_contextia):
    """`python -m contextia_sync.cli.provisionar` (o `contextia-provisionar`) e o mesmo."""
    arquivo = tmp_path / 'chaves.tsv'
    codigo, saida = provisionar_cli(
        erp,
        mapa,
        arquivo,
        '--somente-escopo=' + erp.escopos[0],
        programa=('-m', 'contextia_sync.cli.provisionar'),
    )
    assert codigo == 0, saida
    assert 'resumo: 1 criada(s), 0 reparada(s), 0 com falha' in saida
    registro = ler_registros(str(arquivo))[erp.escopos[0]]
    assert registro.situacao == 'pronto'
    assert cliente.quem_sou(registro.chave)['external_id'] == erp.escopos[0]
    assert ambiente_contextia.admin().buscar_projeto(erp.escopos[0]) is not None


@pytest.mark.parametrize(
    'variavel, trecho',
    [
        ('CONTEXTIA_ORIGEM', 'CONTEXTIA_ORIGEM é uma variável do próprio SDK'),
        ('CONTEXTIA_ADMIN_TOKEN', 'CONTEXTIA_ADMIN_TOKEN é uma variável do próprio SDK'),
        ('PGPASSWORD', 'PGPASSWORD não é uma variável dedicada a segredo de webhook'),
        # O segredo de outra aplicação do mesmo servidor (issue 28): só o prefixo vale.
        (
            'APP_WEBHOOK_SECRET',
            'APP_WEBHOOK_SECRET não é uma variável dedicada a segredo de webhook',
        ),
        ('CONTEXTIA_ORIGEM_DBA', 'CONTEXTIA_ORIGEM_DBA é uma variável do próprio SDK'),
    ],
)
def test_secret_env_que_nao_e_segredo_de_webhook_nunca_vai_ao_contextia(
    erp, tmp_path, ambiente_contextia, variavel, trecho
):
    """`secret_env: CONTEXTIA_ORIGEM` mandaria a URL do banco, com a senha, como segredo."""
    mapa = erp_teste.mapeamento(
        tmp_path,
        webhook={'url': '%s/receptor/{escopo}' % ambiente_contextia.url, 'secret_env': variavel},
    )
    arquivo = tmp_path / 'chaves.tsv'
    codigo, saida = provisionar_cli(
        erp,
        mapa,
        arquivo,
        ambiente={
            'PGPASSWORD': 'senha-do-banco-' + 'x' * 16,
            'APP_WEBHOOK_SECRET': 'segredo-de-outra-aplicacao-' + 'y' * 16,
        },
    )
    assert codigo == 2, saida
    assert 'webhook.secret_env: ' + trecho in saida
    assert not arquivo.exists()
    assert ambiente_contextia.admin().buscar_projeto(erp.escopos[0]) is None


def test_segredo_do_webhook_que_e_a_senha_do_banco_nao_vai_ao_contextia(
    erp, mapa, tmp_path, ambiente_contextia
):
    """Nome certo, valor de origem ambígua: o mesmo texto que está em CONTEXTIA_ORIGEM."""
    arquivo = tmp_path / 'chaves.tsv'
    senha = 'SenhaDoBanco-' + 'k' * 12
    origem = 'sqlite:///%s' % erp.url.split('///', 1)[1]
    codigo, saida = provisionar_cli(
        erp,
        mapa,
        arquivo,
        ambiente={'CONTEXTIA_ORIGEM': origem + '?senha=' + senha, 'CONTEXTIA_WEBHOOK_TESTE': senha},
    )
    assert codigo == 2, saida
    assert (
        'o segredo em CONTEXTIA_WEBHOOK_TESTE é o valor (ou parte do valor) de CONTEXTIA_ORIGEM'
    ) in saida
    assert ambiente_contextia.admin().buscar_projeto(erp.escopos[0]) is None


def test_segredo_do_webhook_que_e_a_senha_do_dba_nao_vai_ao_contextia(
    erp, mapa, tmp_path, ambiente_contextia
):
    """A senha do DBA (CONTEXTIA_ORIGEM_DBA, codificada na URL) reusada como segredo (issue 28)."""
    arquivo = tmp_path / 'chaves.tsv'
    senha = 'Dono@Da-Base-' + 'k' * 12
    codigo, saida = provisionar_cli(
        erp,
        mapa,
        arquivo,
        ambiente={
            'CONTEXTIA_ORIGEM_DBA': 'postgresql://dono:%s@127.0.0.1/erp'
            % senha.replace('@', '%40'),
            'CONTEXTIA_WEBHOOK_TESTE': senha,
        },
    )
    assert codigo == 2, saida
    assert (
        'o segredo em CONTEXTIA_WEBHOOK_TESTE é o valor (ou parte do valor) de CONTEXTIA_ORIGEM_DBA'
    ) in saida, saida
    assert senha not in saida
    assert ambiente_contextia.admin().buscar_projeto(erp.escopos[0]) is None


def test_codigo_da_empresa_vai_codificado_na_url_do_webhook():
    """
    `x/../../../outro?` nunca chega até aqui (o cadastro o recusa: test_codigo_empresa),
    mas a URL do webhook codifica o código mesmo assim: defesa em profundidade.
    """
    modelo = 'https://receptor.exemplo/{escopo}/eventos'
    assert plano.url_do_webhook(modelo, 'x/../../../outro?a=1#') == (
        'https://receptor.exemplo/x%2F..%2F..%2F..%2Foutro%3Fa%3D1%23/eventos'
    )
    assert plano.url_do_webhook(modelo, 'SP-01.2') == 'https://receptor.exemplo/SP-01.2/eventos'


def test_codigo_hostil_no_cadastro_nao_ganha_webhook(erp, tmp_path, ambiente_contextia):
    """O código com / e ? e recusado no cadastro: nem projeto, nem webhook."""
    codigo_hostil = 'x/../../../outro?a=1#'
    erp.executar('CREATE TABLE {FILIAIS} ({CODIGO} VARCHAR(40), {NOME} VARCHAR(60))')
    erp.executar('INSERT INTO {FILIAIS} VALUES (:c, :n)', c=codigo_hostil, n='Filial Torta')
    erp.executar('INSERT INTO {FILIAIS} VALUES (:c, :n)', c='SP-01', n='Filial Boa')
    mapa = erp_teste.mapeamento(
        tmp_path,
        projects={'source_object': 'FILIAIS', 'scope_column': 'CODIGO', 'name_column': 'NOME'},
        webhook={
            'url': '%s/receptor/{escopo}/eventos' % ambiente_contextia.url,
            'secret_env': 'CONTEXTIA_WEBHOOK_TESTE',
        },
    )
    arquivo = tmp_path / 'chaves.tsv'
    codigo, saida = provisionar_cli(erp, mapa, arquivo)
    assert codigo == 0, saida
    admin = ambiente_contextia.admin()
    assert admin.buscar_projeto(codigo_hostil) is None
    projeto = admin.buscar_projeto('SP-01')
    assert [w['url'] for w in admin.listar_webhooks(projeto['id'])] == [
        '%s/receptor/SP-01/eventos' % ambiente_contextia.url
    ]
