"""
O README e os documentos de docs/ acompanham o código.

  * os dois comandos vem primeiro no README;
  * toda opção de linha de comando está no guia do programa dela (a ideia e do
    sqlite-utils: opção nova sem documentação quebra a suíte, em vez de ser
    descoberta por um operador);
  * todo link relativo aponta para um arquivo que existe, e toda ancora para
    um título que existe;
  * todo caminho de módulo citado existe no pacote;
  * a solução de problemas mora num lugar só (docs/problemas.md), e cada
    mensagem citada la e em qualquer outro documento e a que o código imprime;
  * toda dependência tem o porque no README.

Os padrões (os números de cada opção) são conferidos em tests/test_padroes.py,
com as funções de leitura de markdown daqui.
"""

import ast
import functools
import glob
import json
import os
import re
import subprocess
import sys

import pytest

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = 'README.md'
GUIA_DE_IMPLANTACAO = 'docs/implantacao.md'
PROBLEMAS = 'docs/problemas.md'

# Programa -> o documento onde as opcoes dele estao documentadas.
PROGRAMAS = [
    (('ouvinte.py',), 'docs/ouvinte.md'),
    (('connector.py',), 'docs/carga-e-provisionamento.md'),
    (('provisionar.py',), 'docs/carga-e-provisionamento.md'),
    (('estado.py', 'mostrar'), 'docs/ouvinte.md'),
    (('estado.py', 'marcar'), 'docs/ouvinte.md'),
    (('estado.py', 'esquecer-carga'), 'docs/ouvinte.md'),
    (('descobrir.py',), 'docs/mapeamento.md'),
    (('demo/demo.py',), 'docs/demo.md'),
    (('-m', 'contextia_local'), 'docs/contrato-intake.md'),
]


# ---------------------------------------------------------------- arquivos
def ler(relativo):
    with open(os.path.join(RAIZ, relativo), encoding='utf-8') as arquivo:
        return arquivo.read()


def documentos():
    """README.md e todo docs/*.md, como caminhos relativos a raiz."""
    return [README] + sorted(
        os.path.relpath(c, RAIZ) for c in glob.glob(os.path.join(RAIZ, 'docs', '*.md'))
    )


# ---------------------------------------------------------------- markdown
def sem_blocos_de_codigo(texto):
    """O texto com cada linha de bloco cercado (```) trocada por vazia (a contagem fica)."""
    saida, dentro = [], False
    for linha in texto.split('\n'):
        if linha.lstrip().startswith('```'):
            dentro = not dentro
            saida.append('')
            continue
        saida.append('' if dentro else linha)
    return '\n'.join(saida)


def blocos_de_codigo(texto):
    """[(linguagem, conteúdo)] de cada bloco cercado, na ordem."""
    return re.findall(r'^```(\w*)\n(.*?)^```', texto, flags=re.S | re.M)


def celulas(linha):
    """
    As celulas de uma linha de tabela. `|` dentro de código (`a | b`) não divide,
    e `\\|` e um `|` escapado (como no GitHub, vale também dentro de código).
    """
    linha = linha.strip()
    if linha.startswith('|'):
        linha = linha[1:]
    if linha.endswith('|') and not linha.endswith('\\|'):
        linha = linha[:-1]
    saida, atual, cerca, i = [], '', None, 0
    while i < len(linha):
        c = linha[i]
        if c == '\\' and linha[i + 1 : i + 2] == '|':
            atual += '|'
            i += 2
            continue
        if c == '`':
            fim = i
            while fim < len(linha) and linha[fim] == '`':
                fim += 1
            corrida = linha[i:fim]
            if cerca is None:
                cerca = corrida
            elif corrida == cerca:
                cerca = None
            atual += corrida
            i = fim
            continue
        if c == '|' and cerca is None:
            saida.append(atual.strip())
            atual = ''
        else:
            atual += c
        i += 1
    saida.append(atual.strip())
    return saida


def tabelas(texto):
    """
    Cada linha de dado de cada tabela: (número da linha, cabeçalho, celulas).
    Tabelas dentro de bloco de código não contam.
    """
    linhas = sem_blocos_de_codigo(texto).split('\n')
    i = 0
    while i < len(linhas) - 1:
        if linhas[i].lstrip().startswith('|') and re.match(r'^\s*\|?\s*:?-{3,}', linhas[i + 1]):
            cabecalho = [c.lower() for c in celulas(linhas[i])]
            j = i + 2
            while j < len(linhas) and linhas[j].lstrip().startswith('|'):
                yield j + 1, cabecalho, celulas(linhas[j])
                j += 1
            i = j
        else:
            i += 1


def trechos_de_codigo(texto):
    """O conteúdo de cada trecho de código em linha (`assim`, ``com ` dentro``)."""
    return [m.group(2).strip() for m in re.finditer(r'(`+)(.+?)(?<!`)\1(?!`)', texto)]


def ancora(titulo):
    """A regra do GitHub: minúsculas, sem pontuação (acento fica), espaço vira hífen."""
    titulo = re.sub(r'[^\w\- ]', '', titulo.strip().lower(), flags=re.U)
    return titulo.replace(' ', '-')


def ancoras(texto):
    vistas: dict[str, int] = {}
    saida = set()
    for titulo in re.findall(r'^#+\s+(.+?)\s*#*$', sem_blocos_de_codigo(texto), flags=re.M):
        base = ancora(titulo)
        n = vistas.get(base, 0)
        vistas[base] = n + 1
        saida.add(base if n == 0 else '%s-%d' % (base, n))
    return saida


def links(texto):
    """[(alvo, ancora)] de cada link [texto](alvo#ancora) fora de bloco de código."""
    return re.findall(r'\]\(([^)#\s]*)(?:#([^)\s]*))?\)', sem_blocos_de_codigo(texto))


# ---------------------------------------------------------------- o codigo
def _texto_literal(no):
    """O texto de um literal (str, f-string, soma de literais); o que é valor vira %s."""
    if isinstance(no, ast.Constant) and isinstance(no.value, str):
        return no.value
    if isinstance(no, ast.JoinedStr):
        return ''.join(
            v.value if isinstance(v, ast.Constant) and isinstance(v.value, str) else '%s'
            for v in no.values
        )
    if isinstance(no, ast.BinOp) and isinstance(no.op, ast.Add):
        esquerda, direita = _texto_literal(no.left), _texto_literal(no.right)
        if esquerda is None and direita is None:
            return None
        return (esquerda if esquerda is not None else '%s') + (
            direita if direita is not None else '%s'
        )
    return None


@functools.lru_cache(maxsize=None)
def textos_do_codigo():
    """
    Todo texto que o SDK pode imprimir: os literais do Python (já juntados como o
    interpretador junta 'a' 'b'; %r vira '%s', como sai) e as linhas dos scripts.
    """
    padroes_py = ('contextia_sync/**/*.py', '*.py', 'sources/*.py', 'contextia_local/*.py')
    padroes_sh = ('*.sh', 'deploy/*.sh', 'contextia_sync/**/*.sh')
    textos = []
    for padrao in padroes_py:
        for caminho in glob.glob(os.path.join(RAIZ, padrao), recursive=True):
            with open(caminho, encoding='utf-8') as arquivo:
                arvore = ast.parse(arquivo.read())
            for no in ast.walk(arvore):
                texto = _texto_literal(no)
                if texto and len(texto) > 3:
                    textos.append(texto.replace('%r', "'%s'").replace('%%', '%'))
    for padrao in padroes_sh:
        for caminho in glob.glob(os.path.join(RAIZ, padrao), recursive=True):
            with open(caminho, encoding='utf-8') as arquivo:
                textos.extend(arquivo.read().split('\n'))
    return tuple(textos)


def padrao_da_citacao(citacao):
    """
    `...` e trecho omitido e `<assim>` e um valor: viram curinga; o resto tem de
    estar igual, letra por letra, num texto do código.
    """
    # O espaco em volta de `...` e parte do que foi omitido.
    pedacos = re.split(r'\.\.\.|<[^<>]*>', re.sub(r'\s*\.\.\.\s*', '...', citacao))
    return re.compile('.*?'.join(re.escape(p) for p in pedacos))


def esta_no_codigo(citacao):
    padrao = padrao_da_citacao(citacao)
    return any(padrao.search(texto) for texto in textos_do_codigo())


def mensagens_de_problemas():
    """[(linha, citação)]: os trechos de código da coluna `mensagem` de docs/problemas.md."""
    saida: list[tuple[int, str]] = []
    for numero, cabecalho, linha in tabelas(ler(PROBLEMAS)):
        if cabecalho[0] != 'mensagem' or not linha[0].startswith('`'):
            continue
        saida.extend((numero, c) for c in trechos_de_codigo(linha[0]))
    return saida


# ---------------------------------------------------------------- os programas
@functools.lru_cache(maxsize=None)
def ajuda(argv):
    """A saída de `<programa> --help`, larga o bastante para não quebrar linha a toa."""
    resultado = subprocess.run(
        [sys.executable] + list(argv) + ['--help'],
        cwd=RAIZ,
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, COLUMNS='200'),
    )
    assert resultado.returncode == 0, resultado.stdout + resultado.stderr
    return resultado.stdout


def opcoes_do_help(argv):
    opcoes = set(re.findall(r'(?<![\w-])(--[a-z][a-z0-9-]*)', ajuda(argv)))
    opcoes.discard('--help')
    return opcoes


def _existe(programa):
    return programa[0] == '-m' or os.path.exists(os.path.join(RAIZ, programa[0]))


# ================================================================ README
def test_os_dois_comandos_vem_primeiro():
    readme = ler(README)
    # O primeiro bloco de codigo e o dos dois comandos...
    primeiro = blocos_de_codigo(readme)[0][1]
    assert 'make demo' in primeiro and 'make test' in primeiro, primeiro
    # ...e ele vem antes de qualquer outro assunto: dentro da primeira secao,
    # antes do link para o guia de implantacao.
    secoes = [m.start() for m in re.finditer(r'^## ', readme, flags=re.M)]
    inicio_do_bloco = readme.index('```')
    assert len(secoes) >= 2 and inicio_do_bloco < secoes[1]
    guia = readme.find(GUIA_DE_IMPLANTACAO)
    assert 0 <= readme.find('make demo') < guia and 0 <= readme.find('make test') < guia


def test_readme_diz_o_que_e_ao_vivo_e_aponta_para_cada_guia():
    readme = ler(README)
    for trecho in (
        'O que é ao vivo e o que não é',
        'só na **varredura**',
        'segundos',
        'Dependências',
        'só no nível do SQL compilado',
    ):
        assert trecho in readme, trecho
    for guia in (
        'docs/implantacao.md',
        'docs/ouvinte.md',
        'docs/carga-e-provisionamento.md',
        'docs/mapeamento.md',
        'docs/origem.md',
        'docs/contrato-intake.md',
        'docs/demo.md',
        'docs/problemas.md',
        'docs/arquitetura.md',
    ):
        assert '](%s' % guia in readme, guia


def test_todo_documento_de_docs_e_apontado_pelo_readme():
    readme = ler(README)
    faltam = [d for d in documentos()[1:] if '](%s' % d not in readme]
    assert faltam == []


def test_readme_nao_repete_as_tabelas_dos_guias():
    """Cada fato num lugar: opções, mensagens e estratégias moram nos guias."""
    repetidas = []
    for numero, cabecalho, linha in tabelas(ler(README)):
        if linha[0].startswith('`--') or cabecalho[0] in ('mensagem', 'estratégia'):
            repetidas.append('README.md:%d: %s' % (numero, ' | '.join(linha)))
    assert repetidas == []


# ================================================================ opcoes
@pytest.mark.parametrize(
    'programa,guia', PROGRAMAS, ids=lambda p: ' '.join(p) if isinstance(p, tuple) else p
)
def test_toda_opcao_de_linha_de_comando_esta_no_guia_do_programa(programa, guia):
    if not _existe(programa):
        pytest.skip('%s ainda não existe' % programa[0])
    opcoes = opcoes_do_help(programa)
    assert opcoes, 'nenhuma opção achada no --help de %s' % ' '.join(programa)
    texto = ler(guia)
    faltam = sorted(
        o
        for o in opcoes
        if not re.search('`' + re.escape(o) + r'(?![a-z0-9-])', texto)
        and not re.search(
            r'[\[ ]' + re.escape(o) + r'(?![a-z0-9-])',
            '\n'.join(c for _, c in blocos_de_codigo(texto)),
        )
    )
    assert faltam == [], 'opções de %s sem documentação em %s: %s' % (
        ' '.join(programa),
        guia,
        ', '.join(faltam),
    )


# ================================================================ links
@pytest.mark.parametrize('documento', documentos())
def test_links_relativos_apontam_para_arquivos_que_existem(documento):
    pasta = os.path.dirname(os.path.join(RAIZ, documento))
    quebrados = []
    for alvo, _ in links(ler(documento)):
        if not alvo or re.match(r'[a-z]+:', alvo):
            continue
        if not os.path.exists(os.path.join(pasta, alvo)):
            quebrados.append(alvo)
    assert quebrados == [], '%s: links quebrados: %s' % (documento, quebrados)


@pytest.mark.parametrize('documento', documentos())
def test_ancoras_existem(documento):
    pasta = os.path.dirname(os.path.join(RAIZ, documento))
    faltam = []
    for alvo, marca in links(ler(documento)):
        if not marca or re.match(r'[a-z]+:', alvo):
            continue
        destino = os.path.join(pasta, alvo) if alvo else os.path.join(RAIZ, documento)
        if not destino.endswith('.md') or not os.path.exists(destino):
            continue
        with open(destino, encoding='utf-8') as arquivo:
            if marca not in ancoras(arquivo.read()):
                faltam.append('%s#%s' % (alvo, marca))
    assert faltam == [], '%s: ancoras sem título: %s' % (documento, faltam)


# Criados ao rodar (e ignorados pelo git): citados, mas nao existem num checkout limpo.
GERADOS = ('demo/saida',)


def _caminhos_citados(texto):
    """Caminhos do repositório citados em código: `contextia_sync/...`, `deploy/...`."""
    for trecho in trechos_de_codigo(sem_blocos_de_codigo(texto)):
        for caminho in re.findall(
            r'(?<![\w/.-])((?:contextia_sync|contextia_local|sources|deploy|tests|bench|'
            r'mappings|demo|docs)/[\w./-]*)',
            trecho,
        ):
            if not re.search(r'[<*]', trecho) and not caminho.startswith(GERADOS):
                yield caminho.rstrip('.')


@pytest.mark.parametrize('documento', documentos())
def test_todo_caminho_citado_existe(documento):
    """Caminho de módulo ou arquivo que não existe mais e documentação velha."""
    faltam = sorted(
        {
            c
            for c in _caminhos_citados(ler(documento))
            if not os.path.exists(os.path.join(RAIZ, c.split(':')[0]))
        }
    )
    assert faltam == [], '%s cita caminhos que não existem: %s' % (documento, faltam)


def _modulo_existe(partes):
    base = os.path.join(RAIZ, *partes)
    return os.path.exists(base + '.py') or os.path.exists(os.path.join(base, '__init__.py'))


def _define(partes, nome):
    base = os.path.join(RAIZ, *partes)
    caminho = base + '.py' if os.path.exists(base + '.py') else os.path.join(base, '__init__.py')
    with open(caminho, encoding='utf-8') as arquivo:
        fonte = arquivo.read()
    return bool(
        re.search(
            r'^\s*(def|class)\s+%s\b|^%s\s*[:=]|import .*\b%s\b' % ((re.escape(nome),) * 3),
            fonte,
            flags=re.M,
        )
    )


@pytest.mark.parametrize('documento', documentos())
def test_todo_modulo_citado_existe(documento):
    """`contextia_sync.intake.cliente` (e `...cliente.verificar_assinatura`) existem."""
    faltam = set()
    for trecho in trechos_de_codigo(ler(documento)):
        for citado in re.findall(r'\b((?:contextia_sync|contextia_local)(?:\.\w+)+)', trecho):
            partes = citado.split('.')
            # o maior prefixo que e modulo; o que sobra (no maximo um nome) e definido nele
            for n in range(len(partes), 0, -1):
                if _modulo_existe(partes[:n]):
                    break
            resto = partes[n:]
            if (
                not _modulo_existe(partes[:n])
                or len(resto) > 1
                or (resto and not _define(partes[:n], resto[0]))
            ):
                faltam.add(citado)
    assert sorted(faltam) == [], '%s cita módulos que não existem: %s' % (documento, sorted(faltam))


# ================================================================ guias
def test_guia_de_implantacao_cobre_cada_etapa():
    guia = ler(GUIA_DE_IMPLANTACAO)
    for trecho in (
        # Etapa 0: o login de leitura (os GRANTs moram em docs/origem.md) e a janela
        'docs/origem.md',
        'somente leitura',
        '--janela-varredura',
        # mapeamento com schema, e o ensaio
        'mapeamento.md',
        '--dry-run',
        # provisionar, carga, chaves
        '--varrer-agora',
        'modo 600',
        'contextia_sync.provisionamento.chaves verificar',
        # systemd e cron
        'deploy/ouvinte.service',
        'systemd-analyze verify',
        'NoNewPrivileges',
        'ProtectSystem=strict',
        'ReadWritePaths',
        'deploy/ouvinte.cron',
        '--once',
        # monitoramento
        'ouvinte-status.txt',
        'find ',
        '-mmin',
        'Códigos de saída',
        'problemas.md',
    ):
        assert trecho in guia, trecho
    for etapa in range(7):
        assert re.search(r'^## Etapa %d ' % etapa, guia, flags=re.M), etapa


def test_grants_de_leitura_para_cada_banco():
    origem = ler('docs/origem.md')
    for trecho in (
        'GRANT CREATE SESSION',
        'GRANT SELECT ON SCHEMA::',
        'GRANT SELECT ON erp.',
        'default_transaction_read_only',
        'db_datareader',
    ):
        assert trecho in origem, trecho


def test_estrategias_estao_no_guia_do_ouvinte():
    guia = ler('docs/ouvinte.md')
    for estrategia in (
        'coluna',
        'binlog',
        'change_tracking',
        'slot_logico',
        'flashback',
        'reconciliacao',
    ):
        assert '`%s`' % estrategia in guia, estrategia


def test_exemplo_de_mapeamento_e_valido(tmp_path):
    blocos = [
        c
        for lingua, c in blocos_de_codigo(ler('docs/mapeamento.md'))
        if lingua == 'json' and '"datasets"' in c
    ]
    assert blocos, 'docs/mapeamento.md sem o exemplo completo'
    mapa = json.loads(blocos[0])
    assert mapa['$schema'] == './mapeamento.schema.json'
    caminho = tmp_path / 'cliente.json'
    caminho.write_text(blocos[0], encoding='utf-8')
    from contextia_sync.mapeamento import carregar_mapeamento

    carregado = carregar_mapeamento(str(caminho))
    assert [d['dataset'] for d in carregado['datasets']] == ['Titulos a Receber', 'Produtos']


# ================================================================ mensagens
def test_solucao_de_problemas_mora_num_lugar_so():
    outros = []
    for documento in documentos():
        if documento == PROBLEMAS:
            continue
        for numero, cabecalho, _ in tabelas(ler(documento)):
            if cabecalho[0] == 'mensagem':
                outros.append('%s:%d' % (documento, numero))
    assert sorted(set(outros)) == [], 'tabela de mensagens fora de %s' % PROBLEMAS


def test_solucao_de_problemas_cita_toda_recusa_do_ouvinte():
    """Cada erro de configuração que o operador pode ver na subida do ouvinte tem linha."""
    citadas = ' '.join(c for _, c in mensagens_de_problemas())
    for inicio in (
        'Falta CONTEXTIA_URL',
        'Arquivo de chaves não existe',
        'Já existe um ouvinte rodando',
        'Estado ilegível em',
        'ainda NÃO está implementada',
        'não existe. As que existem',
        '--varredura espera HH:MM',
        'Mapeamento',
        'acompanha por',
        'não tem a seção "projects"',
        'não é nome de módulo',
        'tem permissão',
        'Falta CONTEXTIA_ORIGEM',
        'a coluna de mudança',
        'não aceita gravação',
        'precisa que o Contextia aceite `remove`',
    ):
        assert inicio in citadas, inicio


def test_toda_mensagem_citada_em_problemas_existe_no_codigo():
    citadas = mensagens_de_problemas()
    assert len(citadas) > 60
    faltam = ['%s:%d: %s' % (PROBLEMAS, n, c) for n, c in citadas if not esta_no_codigo(c)]
    assert faltam == [], (
        'mensagens citadas que o código não imprime (a citação tem de ser'
        ' a do código, letra por letra):\n' + '\n'.join(faltam)
    )


def test_cada_mensagem_aparece_uma_vez_em_problemas():
    vistas: dict[str, int] = {}
    repetidas = []
    for numero, citacao in mensagens_de_problemas():
        if citacao in vistas:
            repetidas.append('%s (linhas %d e %d)' % (citacao, vistas[citacao], numero))
        vistas[citacao] = numero
    assert repetidas == []


def test_citacao_de_mensagem_em_outro_documento_tem_a_mesma_redacao():
    """Outro guia que cita uma mensagem (no texto, não em tabela) cita a do código."""
    inicios = set()
    for _, citacao in mensagens_de_problemas():
        primeiro = re.split(r'\.\.\.|<[^<>]*>', citacao)[0].strip()
        if len(primeiro) >= 10:
            inicios.add(primeiro)
    erradas = []
    for documento in documentos():
        if documento == PROBLEMAS:
            continue
        for trecho in trechos_de_codigo(sem_blocos_de_codigo(ler(documento))):
            if trecho.startswith(tuple(inicios)) and not esta_no_codigo(trecho):
                erradas.append('%s: %s' % (documento, trecho))
    assert erradas == []


# ================================================================ dependencias
def test_toda_dependencia_tem_o_porque_no_readme():
    readme = ler(README)
    secao = readme[readme.index('## Dependências') :]
    secao = secao[: secao.index('\n## ', 3)].lower()
    faltam = []
    for arquivo in ('requirements.txt', 'requirements-local.txt', 'requirements-dev.txt'):
        assert arquivo in secao, arquivo
        for linha in ler(arquivo).split('\n'):
            linha = linha.split('#')[0].strip()
            if not linha or linha.startswith('-'):
                continue
            nome = re.split(r'[\[<>=!~ ;]', linha)[0].lower()
            if nome not in secao:
                faltam.append(nome)
    assert faltam == [], 'dependências sem o porque no README: %s' % ', '.join(faltam)
    for extra in ('[local]', '[dev]', 'pip install .'):
        assert extra in secao, extra
