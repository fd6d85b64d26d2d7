"""
Cada valor padrão mora num lugar só: contextia_sync/padroes.py (como o
defaults.py do rq). A ajuda do argparse e montada dali; aqui se confere que

  (a) o `--help` de cada programa mostra o mesmo número, e
  (b) toda linha de tabela -- e toda frase -- do README e de docs/*.md que diz
      o padrão de uma opção diz o mesmo número;
  (c) os números do transporte HTTP e do teto de espera, onde a documentação
      os diz em texto corrido, também.

Quem muda um padrão muda padroes.py; o teste aponta cada documento que ficou
para trás, com o arquivo, a linha e os dois números.

Como a documentação diz um padrão (o que (b) reconhece), com a opção em código:
  * numa tabela com coluna "padrão": `--folga S` | 180 | ...
  * logo depois da opção, entre parênteses: `--intervalo-dados` (60 s)
  * depois da opção, na mesma frase: `--folga` ..., padrão 180 s
Número em português: "20 000", "20.000" e "20000" são o mesmo; "0,5" e 0.5;
"50%" e 0.5 numa fração; "15 min" e 900 numa opção em segundos.
"""

import os
import re
import unicodedata
from collections import namedtuple

import pytest

from contextia_sync import padroes
from tests.test_readme import (
    RAIZ,
    ajuda,
    documentos,
    ler,
    sem_blocos_de_codigo,
    tabelas,
    trechos_de_codigo,
)

OUVINTE = ('ouvinte.py',)
CONECTOR = ('connector.py',)
PROVISIONAR = ('provisionar.py',)
ESTADO_MARCAR = ('estado.py', 'marcar')

# constante em padroes.py, o nome que a documentacao usa, os programas cujo
# --help mostra o padrao, e o tipo do valor ('s' segundos, 'min' minutos,
# 'n' numero, 'fracao', 'hora' HH:MM, 'texto').
Padrao = namedtuple('Padrao', 'constante nome programas tipo')

PADROES = [
    Padrao('INTERVALO_DADOS', '--intervalo-dados', [OUVINTE], 's'),
    Padrao('INTERVALO_PROJETOS', '--intervalo-projetos', [OUVINTE], 's'),
    Padrao('HORA_VARREDURA', '--varredura', [OUVINTE], 'hora'),
    Padrao('JANELA_VARREDURA', '--janela-varredura', [OUVINTE], 'min'),
    Padrao('FOLGA', '--folga', [OUVINTE, ESTADO_MARCAR], 's'),
    Padrao('MAXIMO_POR_CICLO', '--maximo-por-ciclo', [OUVINTE, ESTADO_MARCAR], 'n'),
    Padrao('TIMEOUT_FERRAMENTA', '--timeout-ferramenta', [OUVINTE], 's'),
    Padrao('INATIVIDADE_FERRAMENTA', '--inatividade-ferramenta', [OUVINTE], 's'),
    Padrao('ESTRATEGIA', '--estrategia', [OUVINTE], 'texto'),
    Padrao('INTERVALO_RECONCILIACAO', '--intervalo-reconciliacao', [OUVINTE], 's'),
    Padrao('MAX_REMOCAO', '--max-remocao', [CONECTOR], 'fracao'),
    Padrao('SOURCE', '--source', [OUVINTE, CONECTOR, PROVISIONAR, ESTADO_MARCAR], 'texto'),
    # Sem opcao de linha de comando: so a documentacao diz o padrao.
    Padrao('CHUNK', 'chunk', [], 'n'),
    Padrao('INTERVALO_PROGRESSO', 'CONTEXTIA_PROGRESSO_SEGUNDOS', [], 's'),
    Padrao('TIMEOUT_ORIGEM', 'CONTEXTIA_ORIGEM_TIMEOUT', [], 's'),
]


# ---------------------------------------------------------------- numeros
_NUMERO = (
    r'(?P<numero>\d{1,2}:\d{2}(?!\d)'
    r'|\d{1,3}(?:[ \u00a0\u202f.]\d{3})+(?![\d,.]\d)'
    r'|\d+(?:[.,]\d+)?)'
)
_UNIDADE = r'(?:\s*(?P<unidade>segundos|minutos|horas|min\b|s\b|h\b|%))?'
VALOR = _NUMERO + _UNIDADE


def _numero(texto):
    """'20 000', '20.000', '0,5', '0.5' -> 20000, 20000, 0.5, 0.5."""
    if re.fullmatch(r'\d{1,3}(?:[ \u00a0\u202f.]\d{3})+', texto):
        return int(re.sub(r'\D', '', texto))
    texto = texto.replace(',', '.')
    return float(texto) if '.' in texto else int(texto)


def converter(encontro, tipo):
    """O valor achado (um re.Match de VALOR) na unidade da constante."""
    bruto, unidade = encontro.group('numero'), encontro.group('unidade')
    if tipo == 'hora':
        return bruto if ':' in bruto else None
    if ':' in bruto:
        return None
    valor = _numero(bruto)
    if tipo == 's':
        return valor * {'min': 60, 'minutos': 60, 'h': 3600, 'horas': 3600}.get(unidade, 1)
    if tipo == 'min':
        return valor * {'h': 60, 'horas': 60}.get(unidade, 1)
    if tipo == 'fracao':
        return valor / 100.0 if unidade == '%' else valor
    return valor


def iguais(achado, esperado):
    if isinstance(esperado, str):
        return achado == esperado
    return achado is not None and abs(float(achado) - float(esperado)) < 1e-9


def valor_de(padrao):
    return getattr(padroes, padrao.constante)


def _sem_acento(texto):
    return ''.join(
        c for c in unicodedata.normalize('NFD', texto) if unicodedata.category(c) != 'Mn'
    )


# ---------------------------------------------------------------- (a) o --help
def ajuda_da_opcao(texto, opcao):
    """O texto de ajuda de `opcao` no --help (as linhas de continuação juntas)."""
    linhas = texto.split('\n')
    for i, linha in enumerate(linhas):
        if re.match(r'^\s+(?:-\w, )?%s(?![\w-])' % re.escape(opcao), linha):
            bloco = [linha]
            for seguinte in linhas[i + 1 :]:
                if not seguinte.strip() or re.match(r'^\s{0,4}-', seguinte):
                    break
                bloco.append(seguinte)
            return ' '.join(p.strip() for p in bloco)
    return None


CASOS_DO_HELP = [(p, programa) for p in PADROES for programa in p.programas]


@pytest.mark.parametrize(
    'padrao,programa', CASOS_DO_HELP, ids=['%s %s' % (pr[0], p.nome) for p, pr in CASOS_DO_HELP]
)
def test_o_help_mostra_o_padrao(padrao, programa):
    if not os.path.exists(os.path.join(RAIZ, programa[0])):
        pytest.skip('%s ainda não existe' % programa[0])
    texto = ajuda_da_opcao(ajuda(programa), padrao.nome)
    assert texto is not None, '%s --help nao tem %s' % (programa[0], padrao.nome)
    esperado = valor_de(padrao)
    if padrao.tipo == 'texto':
        assert re.search(r'padr[aã]o\b', texto, flags=re.I) and re.search(
            r'(?<![\w-])`?%s`?(?![\w-])' % re.escape(esperado), texto
        ), '%s --help, %s: %r não mostra o padrão %r (padrões.%s)' % (
            programa[0],
            padrao.nome,
            texto,
            esperado,
            padrao.constante,
        )
        return
    achado = re.search(r'padr[aã]o:?\s+' + VALOR, texto, flags=re.I)
    assert achado, '%s --help, %s: %r não mostra o padrão (padrões.%s = %r)' % (
        programa[0],
        padrao.nome,
        texto,
        padrao.constante,
        esperado,
    )
    valor = converter(achado, padrao.tipo)
    assert iguais(valor, esperado), '%s --help, %s: diz %r, e padrões.%s = %r' % (
        programa[0],
        padrao.nome,
        valor,
        padrao.constante,
        esperado,
    )


# ---------------------------------------------------------------- (b) a documentacao
def _mencoes(texto, nome):
    """Onde `nome` aparece como código: `--folga` ou `--folga S` (não `--folga=30`)."""
    for encontro in re.finditer(r'(`+)(.+?)(?<!`)\1(?!`)', texto):
        conteudo = encontro.group(2).strip()
        if conteudo == nome or conteudo.startswith(nome + ' '):
            yield encontro


_DEPOIS_ENTRE_PARENTESES = re.compile(r'\s*\(\s*(?:padr[aã]o:?\s*)?' + VALOR, flags=re.I)
_PADRAO_NA_LINHA = re.compile(r'padr[aã]o:?\s*' + VALOR, flags=re.I)


def _na_frase(resto):
    """
    O valor dito em `resto` (o texto logo depois da menção), ou None: entre
    parênteses logo depois, ou "padrão N" na mesma frase (sem ponto final,
    ponto-e-virgula ou outro trecho de código no meio).
    """
    encontro = _DEPOIS_ENTRE_PARENTESES.match(resto)
    if encontro:
        return encontro
    frase = re.split(r'`|;|\.\s|\.$', resto, maxsplit=1)[0]
    return _PADRAO_NA_LINHA.search(frase)


def _declaracoes_em_tabelas(documento, texto, padrao):
    """(lugar, linha da tabela, valor dito) de cada linha de tabela que diz o padrão."""
    for numero, cabecalho, linha in tabelas(texto):
        coluna = next((i for i, c in enumerate(cabecalho) if _sem_acento(c) == 'padrao'), None)
        for indice, celula in enumerate(linha):
            for mencao in _mencoes(celula, padrao.nome):
                lugar = '%s:%d' % (documento, numero)
                crua = '| %s |' % ' | '.join(linha)
                if indice == 0 and coluna is not None and coluna < len(linha):
                    alvo = linha[coluna]
                    if padrao.tipo == 'texto':
                        citados = trechos_de_codigo(alvo)
                        if citados:
                            yield (
                                lugar,
                                crua,
                                (
                                    valor_de(padrao)
                                    if valor_de(padrao) in citados
                                    else ', '.join(citados)
                                ),
                            )
                        continue
                    encontro = re.search(VALOR, alvo)
                    if encontro:
                        yield lugar, crua, converter(encontro, padrao.tipo)
                    continue
                if padrao.tipo == 'texto':
                    continue
                encontro = _na_frase(celula[mencao.end() :])
                if encontro is None and indice == 0:
                    encontro = _PADRAO_NA_LINHA.search(' | '.join(linha[1:]))
                if encontro:
                    yield lugar, crua, converter(encontro, padrao.tipo)


def _paragrafos(texto):
    """(número da primeira linha, paragrafo numa linha só), fora de tabelas e de código."""
    atual: list[str] = []
    inicio = 0
    for numero, linha in enumerate(sem_blocos_de_codigo(texto).split('\n'), start=1):
        if not linha.strip() or linha.lstrip().startswith('|'):
            if atual:
                yield inicio, ' '.join(atual)
            atual = []
            continue
        if not atual:
            inicio = numero
        atual.append(linha.strip())
    if atual:
        yield inicio, ' '.join(atual)


def _declaracoes_no_texto(documento, texto, padrao):
    if padrao.tipo == 'texto':
        return
    for numero, paragrafo in _paragrafos(texto):
        for mencao in _mencoes(paragrafo, padrao.nome):
            encontro = _na_frase(paragrafo[mencao.end() :])
            if encontro:
                trecho = paragrafo[max(0, mencao.start() - 40) : mencao.end() + 60]
                yield '%s:%d' % (documento, numero), trecho, converter(encontro, padrao.tipo)


def declaracoes(padrao):
    for documento in documentos():
        texto = ler(documento)
        yield from _declaracoes_em_tabelas(documento, texto, padrao)
        yield from _declaracoes_no_texto(documento, texto, padrao)


@pytest.mark.parametrize('padrao', PADROES, ids=[p.constante for p in PADROES])
def test_a_documentacao_diz_o_mesmo_padrao(padrao):
    esperado = valor_de(padrao)
    ditas = list(declaracoes(padrao))
    assert ditas, (
        'nenhum documento diz o padrão de %s (padrões.%s = %r): a tabela de'
        ' opções do guia deveria dizer' % (padrao.nome, padrao.constante, esperado)
    )
    erradas = [
        '%s: %s\n    diz %r para %s, e padrões.%s = %r'
        % (lugar, trecho, valor, padrao.nome, padrao.constante, esperado)
        for lugar, trecho, valor in ditas
        if not iguais(valor, esperado)
    ]
    assert erradas == [], 'documentação com outro padrão:\n' + '\n'.join(erradas)


# ---------------------------------------------------------------- (c) em texto corrido
def _status(encontro):
    return tuple(sorted(int(n) for n in re.findall(r'\d+', encontro.group(1))))


def _com_unidade(encontro):
    return converter(re.match(VALOR, encontro.group(1)), 's')


def _simples(encontro):
    return _numero(encontro.group(1))


# (documento, onde o numero e dito, constante, como ler o que o grupo 1 achou)
NO_TEXTO = [
    ('docs/contrato-intake.md', r'(\d+) s para conectar', 'TIMEOUT_CONEXAO', _simples),
    ('docs/contrato-intake.md', r'(\d+) s por leitura do socket', 'TIMEOUT_LEITURA', _simples),
    ('docs/contrato-intake.md', r'até (\d+) retentativas', 'RETENTATIVAS', _simples),
    ('docs/contrato-intake.md', r'espera exponencial de (\d+(?:,\d+)?) s', 'BACKOFF', _simples),
    ('docs/contrato-intake.md', r'dobrando até (\d+) s', 'BACKOFF_MAXIMO', _simples),
    ('docs/contrato-intake.md', r'limitado a (\d+) s por\s+pedido', 'PRAZO_RETENTATIVAS', _simples),
    (
        'docs/contrato-intake.md',
        r'erro de conexao/leitura, ([\d/ e]+),',
        'STATUS_RETENTAVEIS',
        _status,
    ),
    ('docs/ouvinte.md', r'com teto de\s+\*\*(\d+ min)\*\*', 'TETO_ESPERA', _com_unidade),
    ('docs/problemas.md', r'dobra até o teto de (\d+ min)', 'TETO_ESPERA', _com_unidade),
    ('docs/implantacao.md', r'depois de falhas seguidas \((\d+ min)', 'TETO_ESPERA', _com_unidade),
    (
        'docs/carga-e-provisionamento.md',
        r'até (\d+) caracteres \(`contextia_sync/padroes',
        'ESCOPO_MAXIMO',
        _simples,
    ),
    ('docs/mapeamento.md', r'até (\d+) caracteres: a empresa', 'ESCOPO_MAXIMO', _simples),
]


@pytest.mark.parametrize(
    'documento,onde,constante,ler_valor', NO_TEXTO, ids=['%s %s' % (c[0], c[2]) for c in NO_TEXTO]
)
def test_numeros_ditos_em_texto_corrido(documento, onde, constante, ler_valor):
    texto = re.sub(r'\s+', ' ', sem_blocos_de_codigo(ler(documento)))
    encontro = re.search(onde.replace(r'\s+', ' '), texto)
    assert encontro, (
        '%s não diz mais %s onde este teste procura (%r): se a frase mudou,'
        ' mude o padrão aqui' % (documento, constante, onde)
    )
    esperado = getattr(padroes, constante)
    if isinstance(esperado, tuple):
        esperado = tuple(sorted(esperado))
    achado = ler_valor(encontro)
    assert achado == esperado or (not isinstance(esperado, tuple) and iguais(achado, esperado)), (
        '%s: %r diz %r, e padrões.%s = %r'
        % (documento, encontro.group(0), achado, constante, esperado)
    )


# ---------------------------------------------------------------- o proprio leitor
@pytest.mark.parametrize(
    'texto,tipo,esperado',
    [
        ('20 000', 'n', 20000),
        ('20.000', 'n', 20000),
        ('20000', 'n', 20000),
        ('0,5', 'fracao', 0.5),
        ('0.5', 'fracao', 0.5),
        ('50%', 'fracao', 0.5),
        ('15 min', 's', 900),
        ('2 h', 's', 7200),
        ('180 s', 's', 180),
        ('03:30', 'hora', '03:30'),
        ('3 h', 'min', 180),
    ],
)
def test_leitura_de_numero_em_portugues(texto, tipo, esperado):
    assert iguais(converter(re.match(VALOR, texto), tipo), esperado)


def test_o_leitor_acha_cada_forma_de_dizer_o_padrao():
    folga = next(p for p in PADROES if p.constante == 'FOLGA')
    exemplos = {
        '| opção | padrão | o que faz |\n|---|---|---|\n| `--folga S` | 200 | recuo |\n': 200,
        'a leitura recua `--folga` segundos (padrão 90 s).\n': 90,
        'a cada `--folga` (30 s) relê\n': 30,
        '| x | y |\n|---|---|\n| a | aumente `--folga` (padrão 3 min) |\n': 180,
    }
    for texto, valor in exemplos.items():
        achados = [v for _, _, v in _declaracoes_em_tabelas('x.md', texto, folga)]
        achados += [v for _, _, v in _declaracoes_no_texto('x.md', texto, folga)]
        assert achados == [valor], (texto, achados)
    # exemplo de uso nao e padrao
    for texto in ('rode `--folga=30` agora\n', '`--folga` maior que a transação mais longa\n'):
        assert list(_declaracoes_no_texto('x.md', texto, folga)) == [], texto
