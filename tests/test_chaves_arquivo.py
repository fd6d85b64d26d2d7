"""
O arquivo de chaves escrito a mão (issue 12, item 7): um leitor só, BOM, e
nenhum problema de leitura vira provisionamento ou revogação.

O caso visto: o Bloco de Notas gravou o arquivo "UTF-8 com BOM"; o leitor lia
a empresa 40 como '\\ufeff40', o ouvinte a achou nova, o provisionar emitiu
chave nova e revogou a valida, e cada varredura falhava na linha. Aqui os
programas são os de verdade (ouvinte.py, provisionar.py, carregar-todas.sh)
contra o Contextia local e um ERP SQLite.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

import pytest

from contextia_sync.intake import cliente
from contextia_sync.provisionamento.chaves import (
    ErroChaves,
    Registro,
    gravar_registros,
    ler_chaves,
    ler_registros,
)
from tests.dados import erp as erp_teste

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATASET = 'titulos_a_receber'
BOM = '\ufeff'


@pytest.fixture
def erp(tmp_path):
    banco = erp_teste.erp_sqlite(tmp_path)
    yield banco
    banco.fechar()


def escrever(caminho: os.PathLike[str], texto: str) -> None:
    """Como um editor grava: bytes exatos (BOM, CRLF), modo 600."""
    with open(caminho, 'wb') as arquivo:
        arquivo.write(texto.encode('utf-8'))
    os.chmod(caminho, 0o600)


def rodar(argv: list[str], env: dict[str, str], timeout: float = 300) -> tuple[int, str]:
    feito = subprocess.run(
        argv, cwd=RAIZ, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout
    )
    return feito.returncode, feito.stdout.decode('utf-8', 'replace')


def ambiente(erp: erp_teste.Erp, contextia: object | None, **extra: str) -> dict[str, str]:
    env = dict(os.environ, CONTEXTIA_ORIGEM=erp.url, **extra)
    env.pop('CONTEXTIA_API_KEY', None)
    if contextia is not None:
        env.update(contextia.ambiente())  # type: ignore[attr-defined]
    return env


def verificar(arquivo: object) -> tuple[int, str]:
    return rodar(
        [sys.executable, '-m', 'contextia_sync.provisionamento.chaves', 'verificar', str(arquivo)],
        dict(os.environ),
    )


def provisionar(
    erp: erp_teste.Erp, contextia: object, mapa: str, arquivo: object
) -> tuple[int, str]:
    return rodar(
        [
            sys.executable,
            'provisionar.py',
            '--mapping=' + mapa,
            '--source=generic',
            '--arquivo=' + str(arquivo),
        ],
        ambiente(erp, contextia),
    )


def carregar_todas(
    erp: erp_teste.Erp, contextia: object | None, mapa: str, arquivo: object, *extra: str
) -> tuple[int, str]:
    return rodar(
        ['bash', 'carregar-todas.sh', str(arquivo)] + list(extra),
        ambiente(erp, contextia, CONTEXTIA_MAPPING=mapa, CONTEXTIA_PYTHON=sys.executable),
    )


def ouvinte(
    erp: erp_teste.Erp, contextia: object, mapa: str, arquivo: object, estado: object
) -> tuple[int, str]:
    return rodar(
        [
            sys.executable,
            'ouvinte.py',
            '--mapping=' + mapa,
            '--source=generic',
            '--chaves=' + str(arquivo),
            '--estado=' + str(estado),
            '--varredura=nao',
            '--timeout-ferramenta=120',
            '--once',
        ],
        ambiente(erp, contextia),
    )


def chaves_do_projeto(admin: object, escopo: str) -> list[tuple[str, bool]]:
    """[(key_id, revogada)] do projeto da empresa, na ordem do servidor."""
    projeto = admin.buscar_projeto(escopo)  # type: ignore[attr-defined]
    return [(c['key_id'], bool(c['revogada'])) for c in admin.listar_chaves(projeto['id'])]  # type: ignore[attr-defined]


# --------------------------------------------------------------- o leitor


def test_bom_no_comeco_e_crlf_sao_lidos_como_a_mesma_empresa(tmp_path):
    arquivo = tmp_path / 'chaves.tsv'
    escrever(arquivo, BOM + '40\tctx_quarenta\r\n# comentário\r\n\r\n41\tctx_quarenta_e_um\r\n')
    assert ler_chaves(str(arquivo)) == {'40': 'ctx_quarenta', '41': 'ctx_quarenta_e_um'}
    codigo, saida = verificar(arquivo)
    assert codigo == 0, saida
    assert saida == '40\n41\n'


@pytest.mark.parametrize(
    'linha, trecho',
    [
        (BOM + '41\tctx_b\n', 'caractere invisível (U+FEFF, BOM)'),  # arquivos emendados
        ('4\u200b1\tctx_b\n', 'caractere invisível (U+200B, ZERO WIDTH SPACE)'),  # colado
        ('41\tctx_\u200bb\n', 'tem espaço ou caractere invisível'),
    ],
)
def test_caractere_invisivel_recusa_o_arquivo_nomeando_a_linha(tmp_path, linha, trecho):
    arquivo = tmp_path / 'chaves.tsv'
    escrever(arquivo, '40\tctx_a\n' + linha)
    with pytest.raises(ErroChaves) as erro:
        ler_registros(str(arquivo))
    assert '%s, linha 2' % arquivo in str(erro.value)
    assert trecho in str(erro.value)
    assert 'ctx_' not in str(erro.value)  # a chave nunca vai para o log


def test_espaco_em_volta_do_escopo_sai_como_no_erp(tmp_path):
    # So o espaco ASCII (o CHAR com preenchimento), como em escopos.texto_escopo.
    arquivo = tmp_path / 'chaves.tsv'
    escrever(arquivo, ' 40 \tctx_a\n41\tctx_b\n')
    assert ler_chaves(str(arquivo)) == {'40': 'ctx_a', '41': 'ctx_b'}


@pytest.mark.parametrize('hostil', ['41\u00a0', '41\u2003', '41\x1c', '\uff14\uff11'])
def test_espaco_unicode_no_escopo_nao_some_recusa_o_arquivo(tmp_path, hostil):
    # str.strip() tirava o NBSP e os separadores: '41\xa0' virava a 41 (issue 28).
    arquivo = tmp_path / 'chaves.tsv'
    escrever(arquivo, '40\tctx_a\n%s\tctx_b\n' % hostil)
    with pytest.raises(ErroChaves, match=r'linha 2: o escopo .*U\+(00A0|2003|001C|FF14)'):
        ler_chaves(str(arquivo))


def test_executar_poe_a_chave_so_no_ambiente_do_programa(tmp_path):
    arquivo = tmp_path / 'chaves.tsv'
    escrever(arquivo, BOM + '40\tctx_secreta_40\r\n41\tctx_secreta_41\r\n')
    # O programa nao pode conter a chave no texto: ele esta na propria linha de comando.
    programa = (
        'import hashlib, os\n'
        'chave = os.environ["CONTEXTIA_API_KEY"]\n'
        'linha = open("/proc/self/cmdline", "rb").read()\n'
        'print("chave:", hashlib.sha256(chave.encode()).hexdigest())\n'
        'print("na linha de comando:", chave.encode() in linha)\n'
        'print("pid igual:", os.getpid() == int(os.environ["PID_DE_QUEM_CHAMOU"]))\n'
    )
    # O bash chama assim; o exec mantem o pid (quem sinaliza o bash acha o connector).
    feito = subprocess.run(
        [
            'bash',
            '-c',
            'export PID_DE_QUEM_CHAMOU=$$; exec "$0" -m'
            ' contextia_sync.provisionamento.chaves executar "$1" 40 -- "$0" -c "$2"',
            sys.executable,
            str(arquivo),
            programa,
        ],
        cwd=RAIZ,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=60,
        env=dict(os.environ, CONTEXTIA_API_KEY='outra'),
    )
    saida = feito.stdout.decode()
    assert feito.returncode == 0, saida
    assert saida == 'chave: %s\nna linha de comando: False\npid igual: True\n' % (
        hashlib.sha256(b'ctx_secreta_40').hexdigest()
    )

    codigo, saida = rodar(
        [
            sys.executable,
            '-m',
            'contextia_sync.provisionamento.chaves',
            'executar',
            str(arquivo),
            '42',
            '--',
            'true',
        ],
        dict(os.environ),
    )
    assert codigo == 2 and "a empresa '42' não está em" in saida, saida


# ------------------------------------------- os programas, de ponta a ponta


def test_bom_escrito_a_mao_nada_e_reprovisionado_nem_revogado(erp, tmp_path, ambiente_contextia):
    """
    O caso do item 7: com o arquivo "UTF-8 com BOM" o ouvinte, o provisionar e o
    carregar-todas leem a empresa como ela é; nenhuma chave nova, nenhuma revogada.
    """
    contextia = ambiente_contextia
    e0, e1 = erp.escopos
    chaves = {e: contextia.criar_projeto_com_chave(e) for e in (e0, e1)}
    admin = contextia.admin()
    antes = {e: chaves_do_projeto(admin, e) for e in (e0, e1)}
    assert all(len(v) == 1 and not v[0][1] for v in antes.values())
    arquivo = tmp_path / 'chaves.tsv'
    escrever(arquivo, BOM + '%s\t%s\r\n%s\t%s\r\n' % (e0, chaves[e0], e1, chaves[e1]))
    with open(arquivo, 'rb') as f:
        bytes_antes = f.read()
    mapa = erp_teste.mapeamento(tmp_path)
    estado = tmp_path / 'estado'

    # O ouvinte: a primeira subida so marca; a segunda entrega a mudanca com a
    # chave de sempre. A empresa nao e "nova" em nenhuma das duas.
    codigo, saida = ouvinte(erp, contextia, mapa, arquivo, estado)
    assert codigo == 0, saida
    novo = erp.base * 1000 + 901
    erp.executar(
        'INSERT INTO {TITULOS} VALUES (:i, :e, :c, :v, :d, :a)',
        i=novo,
        e=int(e0),
        c='Depois do BOM',
        v='40.00',
        d='2026-10-01',
        a='2026-09-01 11:00:00',
    )
    codigo, saida2 = ouvinte(erp, contextia, mapa, arquivo, estado)
    assert codigo == 0, saida2
    for texto in (saida, saida2):
        assert 'EMPRESA(S) NOVA(S)' not in texto and '--somente-escopo' not in texto
    assert novo in {int(r['ID']) for r in cliente.ler_registros(DATASET, chaves[e0])}

    # O provisionar (o da varredura, sem --somente-escopo): nada a fazer.
    codigo, saida = provisionar(erp, contextia, mapa, arquivo)
    assert codigo == 0, saida
    assert 'resumo: nada a fazer' in saida and 'REPARO' not in saida

    # O carregar-todas: as duas empresas, com as chaves do arquivo.
    codigo, saida = carregar_todas(erp, contextia, mapa, arquivo)
    assert codigo == 0, saida
    assert '2 empresa(s)' in saida and 'resumo carregar-todas: 2 ok, 0 com falha' in saida
    assert '----- empresa %s -----' % e0 in saida and BOM not in saida

    # Nenhuma chave emitida, nenhuma revogada; a de antes continua valendo.
    assert {e: chaves_do_projeto(admin, e) for e in (e0, e1)} == antes
    for escopo in (e0, e1):
        assert cliente.quem_sou(chaves[escopo])['external_id'] == escopo
    with open(arquivo, 'rb') as f:
        assert f.read() == bytes_antes  # ninguem regravou o arquivo


@pytest.mark.parametrize(
    'ruim',
    [
        pytest.param(BOM + '{e1}\tctx_emendada\n', id='bom-no-meio'),
        pytest.param('{e1}\tctx_abc\t12\n', id='tres-campos'),
    ],
)
def test_linha_ruim_todos_recusam_igual_e_nada_e_provisionado(
    erp, tmp_path, ambiente_contextia, ruim
):
    contextia = ambiente_contextia
    e0, e1 = erp.escopos
    chave = contextia.criar_projeto_com_chave(e0)
    admin = contextia.admin()
    antes = chaves_do_projeto(admin, e0)
    arquivo = tmp_path / 'chaves.tsv'
    # A empresa da linha ruim nao tem projeto: provisionar qualquer coisa o criaria.
    escrever(arquivo, '%s\t%s\n' % (e0, chave) + ruim.format(e1=e1))
    mapa = erp_teste.mapeamento(tmp_path)

    codigo, recusa = verificar(arquivo)
    assert codigo == 2 and '%s, linha 2' % arquivo in recusa, recusa
    recusa = recusa.strip()

    codigo, saida = carregar_todas(erp, contextia, mapa, arquivo)
    assert codigo == 2, saida
    assert recusa in saida and 'nada foi carregado' in saida
    assert '----- empresa' not in saida  # nenhum connector rodou

    codigo, saida = provisionar(erp, contextia, mapa, arquivo)
    assert codigo == 2, saida
    assert recusa in saida and 'Traceback' not in saida

    codigo, saida = ouvinte(erp, contextia, mapa, arquivo, tmp_path / 'estado')
    assert codigo == 2, saida
    assert recusa in saida and '--somente-escopo' not in saida

    assert admin.buscar_projeto(e1) is None
    assert chaves_do_projeto(admin, e0) == antes
    assert 'ctx_' not in saida


def test_escopo_escrito_diferente_nao_revoga_a_chave_que_o_arquivo_guarda(
    erp, tmp_path, ambiente_contextia
):
    """
    Linha que lê bem mas com o escopo escrito de outro jeito ('0297' para 297):
    a chave ativa do projeto está no arquivo, então o provisionar recusa (2) em
    vez de emitir outra e revogar a que o arquivo guarda.
    """
    contextia = ambiente_contextia
    e0, e1 = erp.escopos
    chaves = {e: contextia.criar_projeto_com_chave(e) for e in (e0, e1)}
    admin = contextia.admin()
    antes = chaves_do_projeto(admin, e0)
    arquivo = tmp_path / 'chaves.tsv'
    escrever(arquivo, '0%s\t%s\n%s\t%s\n' % (e0, chaves[e0], e1, chaves[e1]))
    codigo, saida = provisionar(erp, contextia, erp_teste.mapeamento(tmp_path), arquivo)
    assert codigo == 2, saida
    assert 'linha 1: a empresa %s tem a chave' % e0 in saida
    assert "Corrija o escopo dessa linha para '%s'" % e0 in saida
    assert 'Nada foi emitido nem revogado' in saida
    assert chaves_do_projeto(admin, e0) == antes
    assert cliente.quem_sou(chaves[e0])['external_id'] == e0


def test_bash_nao_roda_linha_que_o_leitor_pula(erp, tmp_path):
    """Comentário com recuo, linha só de espaços, linha só com CR: nenhuma vira empresa."""
    e0, e1 = erp.escopos
    arquivo = tmp_path / 'chaves.tsv'
    escrever(
        arquivo,
        '   # comentário com recuo\n  \n\r\n%s\tctx_nao_usada\n'
        '\t\n%s\tctx_nao_usada\r\n' % (e0, e1),
    )
    codigo, saida = carregar_todas(erp, None, erp_teste.mapeamento(tmp_path), arquivo, '--dry-run')
    assert codigo == 0, saida
    assert '2 empresa(s)' in saida
    assert saida.count('----- empresa ') == 2
    assert 'resumo carregar-todas: 2 ok, 0 com falha' in saida


# ----------------------------------- o arquivo em si: link, dono, pasta (issue 14)

NOBODY = 65534  # o dono "outro" (os testes rodam como root)


def _todos_os_programas(
    erp: erp_teste.Erp, mapa: str, arquivo: object, estado: object
) -> dict[str, list[str]]:
    """Cada programa que lê o arquivo de chaves, como o operador (ou o cron) o roda."""
    e0 = erp.escopos[0]
    return {
        # O provisionar primeiro: e ele que grava (e trocava o link por um arquivo).
        'provisionar': [
            sys.executable,
            'provisionar.py',
            '--mapping=' + mapa,
            '--source=generic',
            '--arquivo=' + str(arquivo),
        ],
        'verificar': [
            sys.executable,
            '-m',
            'contextia_sync.provisionamento.chaves',
            'verificar',
            str(arquivo),
        ],
        'connector': [
            sys.executable,
            '-m',
            'contextia_sync.provisionamento.chaves',
            'executar',
            str(arquivo),
            e0,
            '--',
            sys.executable,
            'connector.py',
            '--mapping=' + mapa,
            '--source=generic',
            '--scope=' + e0,
        ],
        'carregar-todas': ['bash', 'carregar-todas.sh', str(arquivo)],
        'ouvinte': [
            sys.executable,
            'ouvinte.py',
            '--mapping=' + mapa,
            '--source=generic',
            '--chaves=' + str(arquivo),
            '--estado=' + str(estado),
            '--varredura=nao',
            '--once',
        ],
    }


def todos_recusam(
    erp: erp_teste.Erp,
    contextia: object,
    mapa: str,
    arquivo: object,
    estado: object,
    trecho: str,
    prefixo: tuple[str, ...] = (),
) -> None:
    """Todo programa sai com 2, diz `trecho` e não mostra traceback."""
    env = ambiente(erp, contextia, CONTEXTIA_MAPPING=mapa, CONTEXTIA_PYTHON=sys.executable)
    for nome, argv in _todos_os_programas(erp, mapa, arquivo, estado).items():
        feito = subprocess.run(
            list(prefixo) + argv,
            cwd=RAIZ,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=300,
        )
        saida = feito.stdout.decode('utf-8', 'replace')
        assert feito.returncode == 2, (nome, saida)
        assert trecho in saida, (nome, saida)
        assert 'Traceback' not in saida and 'ctx_' not in saida, (nome, saida)


def test_link_simbolico_e_recusado_por_todos_e_o_alvo_nao_fica_velho(
    erp, tmp_path, ambiente_contextia
):
    """
    O caso visto: o provisionar gravava por cima do LINK (temporário + rename) e
    o alvo de verdade, que o resto lia, ficava sem a chave nova.
    """
    contextia = ambiente_contextia
    e0, e1 = erp.escopos
    chave = contextia.criar_projeto_com_chave(e0)
    (tmp_path / 'real').mkdir()
    alvo = tmp_path / 'real' / 'chaves.tsv'
    escrever(alvo, '%s\t%s\n' % (e0, chave))
    link = tmp_path / 'chaves.tsv'
    link.symlink_to(alvo)
    # e1 e nova: o provisionar de antes a criaria e gravaria no lugar do link.
    todos_recusam(
        erp,
        contextia,
        erp_teste.mapeamento(tmp_path),
        link,
        tmp_path / 'estado',
        'o arquivo de chaves %s é um link simbólico (para %s): recusado.' % (link, alvo),
    )
    assert link.is_symlink() and os.readlink(link) == str(alvo)
    assert alvo.read_text() == '%s\t%s\n' % (e0, chave)
    assert contextia.admin().buscar_projeto(e1) is None


def test_arquivo_de_outro_dono_e_recusado_por_todos(erp, tmp_path, ambiente_contextia):
    contextia = ambiente_contextia
    e0, e1 = erp.escopos
    chave = contextia.criar_projeto_com_chave(e0)
    arquivo = tmp_path / 'chaves.tsv'
    escrever(arquivo, '%s\t%s\n' % (e0, chave))
    os.chown(arquivo, NOBODY, NOBODY)
    todos_recusam(
        erp,
        contextia,
        erp_teste.mapeamento(tmp_path),
        arquivo,
        tmp_path / 'estado',
        'o arquivo de chaves %s é do usuário nobody (uid %d), e este programa roda'
        ' como root (uid 0): recusado.' % (arquivo, NOBODY),
    )
    assert os.stat(arquivo).st_uid == NOBODY  # ninguem o regravou
    assert contextia.admin().buscar_projeto(e1) is None


def test_pasta_no_lugar_do_arquivo_sai_com_2_sem_traceback(erp, tmp_path, ambiente_contextia):
    pasta = tmp_path / 'chaves.tsv'
    pasta.mkdir(mode=0o700)
    todos_recusam(
        erp,
        ambiente_contextia,
        erp_teste.mapeamento(tmp_path),
        pasta,
        tmp_path / 'estado',
        'o arquivo de chaves %s é uma pasta, não um arquivo' % pasta,
    )
    assert ambiente_contextia.admin().buscar_projeto(erp.escopos[0]) is None


def test_arquivo_ilegivel_sai_com_2_sem_traceback(erp, tmp_path, ambiente_contextia):
    """
    O arquivo e de quem roda, mas em modo 000. Os testes rodam como root, que lê
    tudo: os programas rodam sem CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH (setpriv),
    como o usuário do serviço -- o open falha de verdade, com EACCES.
    """
    import shutil

    if os.geteuid() != 0 or shutil.which('setpriv') is None:
        if os.environ.get('CI') == 'true':
            pytest.fail('o teste precisa de root e do setpriv (util-linux)')
        pytest.skip('precisa de root e do setpriv (util-linux) para tirar a leitura de root')
    arquivo = tmp_path / 'chaves.tsv'
    escrever(arquivo, '%s\tctx_nao_lida\n' % erp.escopos[0])
    os.chmod(arquivo, 0o000)
    todos_recusam(
        erp,
        ambiente_contextia,
        erp_teste.mapeamento(tmp_path),
        arquivo,
        tmp_path / 'estado',
        'sem permissão para ler o arquivo de chaves %s (Permission denied)' % arquivo,
        prefixo=('setpriv', '--bounding-set=-dac_override,-dac_read_search'),
    )


# ------------------------------ o codigo da empresa no arquivo (issue 14)


@pytest.mark.parametrize(
    'escopo, trecho',
    [('01 02', 'U+0020, espaço'), ('S\u00c3O', "'\u00c3' (U+00C3)"), ('-40', "começa com '-'")],
)
def test_escopo_fora_do_permitido_recusa_o_arquivo_nomeando_a_linha(tmp_path, escopo, trecho):
    arquivo = tmp_path / 'chaves.tsv'
    escrever(arquivo, '40\tctx_a\n%s\tctx_b\n' % escopo)
    with pytest.raises(ErroChaves) as erro:
        ler_registros(str(arquivo))
    assert "%s, linha 2: o escopo '%s' " % (arquivo, escopo) in str(erro.value)
    assert trecho in str(erro.value)
    assert 'ctx_' not in str(erro.value)
    codigo, saida = verificar(arquivo)
    assert codigo == 2 and 'linha 2' in saida and 'Traceback' not in saida, saida


@pytest.mark.parametrize(
    'registro, trecho',
    [
        (
            Registro('Z\tctx_lixo\n555', 'ctx_b', 7, 'key_b', 'pronto', None),
            "o código da empresa 'Z\\tctx_lixo\\n555' tem o caractere U+0009, TAB",
        ),
        (
            Registro('41', 'ctx_b\n555\tctx_c', 7, 'key_b', 'pronto', None),
            'a chave está vazia ou tem espaço ou caractere invisível',
        ),
        (
            Registro('41', 'ctx_b', 7, 'key_b\n555\tctx_c', 'pronto', None),
            "o id da chave 'key_b\\n555\\tctx_c' tem espaço",
        ),
    ],
)
def test_gravar_campo_que_quebraria_a_linha_nao_grava_nada(tmp_path, registro, trecho):
    """
    Defesa no escritor, além da porta do cadastro: nenhum campo (código, ou a
    chave e o id que o servidor devolveu) vira outra linha do arquivo.
    """
    arquivo = tmp_path / 'chaves.tsv'
    valida = Registro('40', 'ctx_a', 6, 'key_a', 'pronto', None)
    gravar_registros(str(arquivo), [valida])
    with open(arquivo, 'rb') as f:
        antes = f.read()
    with pytest.raises(ErroChaves) as erro:
        gravar_registros(str(arquivo), [valida, registro])
    assert ('nada foi gravado em %s: ' % arquivo) in str(erro.value)
    assert trecho in str(erro.value), str(erro.value)
    with open(arquivo, 'rb') as f:
        assert f.read() == antes
    assert list(ler_registros(str(arquivo))) == ['40']


def test_arquivo_lido_uma_vez_e_relido_quando_muda(tmp_path, monkeypatch):
    """O ouvinte pergunta as chaves a cada ciclo: o arquivo só é relido quando muda."""
    from contextia_sync.provisionamento import chaves as modulo

    arquivo = tmp_path / 'chaves.tsv'
    escrever(arquivo, '40\tctx_a\n')
    lidas = []
    original = modulo._registro
    monkeypatch.setattr(modulo, '_registro', lambda *a: lidas.append(a[2]) or original(*a))
    for _ in range(5):
        assert ler_chaves(str(arquivo)) == {'40': 'ctx_a'}
    assert lidas == ['40\tctx_a']
    # Trocado pelo rename (como o provisionar grava), editado no lugar, e o modo.
    novo = tmp_path / 'novo.tsv'
    escrever(novo, '40\tctx_a\n41\tctx_b\n')
    os.replace(novo, arquivo)
    assert ler_chaves(str(arquivo)) == {'40': 'ctx_a', '41': 'ctx_b'}
    with open(arquivo, 'a') as f:
        f.write('42\tctx_c\n')
    assert sorted(ler_chaves(str(arquivo))) == ['40', '41', '42']
    os.chmod(arquivo, 0o644)
    with pytest.raises(ErroChaves):
        ler_chaves(str(arquivo))  # a permissão vale a cada chamada
    arquivo.unlink()
    assert ler_chaves(str(arquivo)) == {}
