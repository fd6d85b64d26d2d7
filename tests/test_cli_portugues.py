"""
Toda linha de comando fala português até o fim: a ajuda, o uso e os erros do
próprio argparse (que não traz tradução), o `--version` e os códigos de saída
no `--help` -- rodando os programas de verdade, com LANG=pt_BR.UTF-8.
"""

import argparse
import os
import re
import subprocess
import sys

import pytest

from contextia_sync import __version__
from contextia_sync.linha_de_comando import novo_parser

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = sys.executable

# O que o argparse (ou um uso escrito à mão) diria em inglês.
INGLES = (
    'usage:',
    'options:',
    'optional arguments',
    'positional arguments',
    'show this help',
    "show program's version",
    'error:',
    'the following arguments',
    'are required',
    'unrecognized arguments',
    'invalid int value',
    'invalid choice',
    'expected one argument',
    'ambiguous option',
    'not allowed with',
    'ignored explicit',
)

# Cada programa: como chamá-lo e o nome que aparece na linha de versão.
PROGRAMAS = {
    'ouvinte.py': ([PY, 'ouvinte.py'], 'ouvinte'),
    'connector.py': ([PY, 'connector.py'], 'connector'),
    'provisionar.py': ([PY, 'provisionar.py'], 'provisionar'),
    'carregar-todas.sh': (['bash', 'carregar-todas.sh'], 'carregar-todas'),
    'contextia-carregar-todas': ([PY, '-m', 'contextia_sync.cli.carregar_todas'], 'carregar-todas'),
    'chaves': (
        [PY, '-m', 'contextia_sync.provisionamento.chaves'],
        'python3 -m contextia_sync.provisionamento.chaves',
    ),
    'contextia_local': ([PY, '-m', 'contextia_local'], 'python3 -m contextia_local'),
    'ouvinte.py --saude': ([PY, 'ouvinte.py', '--saude'], 'ouvinte.py --saude'),
    'estado.py': ([PY, 'estado.py'], 'estado'),
    'descobrir.py': ([PY, 'descobrir.py'], 'descobrir'),
}


def rodar(argv, **extra):
    env = dict(os.environ, LANG='pt_BR.UTF-8', LC_ALL='pt_BR.UTF-8', COLUMNS='100')
    env.pop('CONTEXTIA_API_KEY', None)
    env.update(extra)
    return subprocess.run(argv, cwd=RAIZ, env=env, capture_output=True, text=True, timeout=60)


def sem_ingles(texto):
    return [frase for frase in INGLES if frase in texto.lower()]


@pytest.mark.parametrize('nome', sorted(PROGRAMAS))
def test_ajuda_em_portugues_com_versao_e_codigos_de_saida(nome):
    argv, _ = PROGRAMAS[nome]
    feito = rodar(argv + ['--help'])
    assert feito.returncode == 0, feito.stdout + feito.stderr
    texto = feito.stdout
    assert texto.startswith('uso: '), texto
    assert sem_ingles(texto + feito.stderr) == [], texto
    assert '--version' in texto and 'mostra esta ajuda' in texto, texto
    # Os códigos de saída (o texto de erros.py, ou a convenção de plugin da saúde).
    assert re.search(r'(?m)^\s+0 ', texto) or '0 OK' in texto, texto
    assert re.search(r'(?m)^\s+2 ', texto) or '2 CRITICO' in texto, texto


@pytest.mark.parametrize('nome', sorted(PROGRAMAS))
def test_version_em_toda_ferramenta(nome):
    argv, prog = PROGRAMAS[nome]
    feito = rodar(argv + ['--version'])
    assert feito.returncode == 0, feito.stdout + feito.stderr
    assert feito.stdout == '%s (contextia_sync %s)\n' % (prog, __version__)


@pytest.mark.parametrize('subcomando', ['mostrar', 'marcar', 'esquecer-carga'])
def test_ajuda_dos_subcomandos_em_portugues(subcomando):
    feito = rodar([PY, 'estado.py', subcomando, '--help'])
    assert feito.returncode == 0, feito.stdout + feito.stderr
    assert feito.stdout.startswith('uso: '), feito.stdout
    assert sem_ingles(feito.stdout + feito.stderr) == [], feito.stdout
    assert 'códigos de saída:' in feito.stdout, feito.stdout


# Os erros de argumento que o operador mais comete, em cada programa com argparse.
ERROS = [
    (
        'ouvinte.py',
        ['--mapping=m', '--chaves=c', '--estado=e', '--opcao-que-nao-existe'],
        'argumentos desconhecidos: --opcao-que-nao-existe',
    ),
    (
        'ouvinte.py',
        ['--mapping=m', '--chaves=c', '--estado=e', '--folga=dez'],
        "'dez' não é um número inteiro",
    ),
    ('ouvinte.py', ['--chaves=c'], 'faltam os argumentos obrigatórios: --mapping, --estado'),
    ('ouvinte.py', ['--mapping'], 'falta o valor'),
    ('connector.py', ['--mapping=m'], 'faltam os argumentos obrigatórios: --scope'),
    ('connector.py', ['--mapping=m', '--scope=1', '--zzz'], 'argumentos desconhecidos'),
    ('provisionar.py', ['--mapping=m'], 'faltam os argumentos obrigatórios: --chaves'),
    ('contextia_local', ['--porta=oito'], "'oito' não é um número inteiro"),
]


@pytest.mark.parametrize(
    'nome,argv,trecho', ERROS, ids=['%s %s' % (n, ' '.join(a)) for n, a, _ in ERROS]
)
def test_erro_de_argumento_em_portugues_sai_com_2(nome, argv, trecho):
    comando, prog = PROGRAMAS[nome]
    feito = rodar(comando + argv)
    assert feito.returncode == 2, feito.stdout + feito.stderr
    assert sem_ingles(feito.stderr) == [], feito.stderr
    assert feito.stderr.startswith('uso: '), feito.stderr
    assert '%s: erro: ' % prog in feito.stderr and trecho in feito.stderr, feito.stderr


def test_saude_erro_de_argumento_em_portugues():
    feito = rodar([PY, 'ouvinte.py', '--saude', '--estado=/tmp', '--max-falhas'])
    assert feito.returncode == 3
    assert sem_ingles(feito.stdout) == [] and 'falta o valor' in feito.stdout, feito.stdout


def test_as_traducoes_valem_so_dentro_do_nosso_parser():
    """Outro parser do processo (de uma biblioteca) continua como o argparse o escreve."""
    nosso = novo_parser('x', 'Teste.')
    nosso.add_argument('--n', type=int, required=True)
    assert nosso.format_help().startswith('uso: x')
    with pytest.raises(SystemExit):
        nosso.parse_args(['--n', 'um'])
    deles = argparse.ArgumentParser(prog='y')
    assert deles.format_help().startswith('usage: y')
    assert 'show this help message and exit' in deles.format_help()
    assert argparse._('usage: ') == 'usage: '


def test_um_nome_por_conceito():
    """--chaves em toda ferramenta (provisionar aceita o --arquivo antigo); --source generic."""
    ajudas = {
        nome: rodar(PROGRAMAS[nome][0] + ['--help']).stdout
        for nome in ('ouvinte.py', 'connector.py', 'provisionar.py', 'carregar-todas.sh')
    }
    for nome, texto in ajudas.items():
        assert '--chaves' in texto, nome
    assert '--arquivo' in ajudas['provisionar.py']
    for nome in ('ouvinte.py', 'connector.py', 'provisionar.py'):
        linha = re.search(r'--source SOURCE\s+(.*)', ajudas[nome]).group(1)
        assert re.search(r'padr[aã]o generic', linha), (nome, linha)
    # O apelido chega ao mesmo destino.
    from contextia_sync.cli import provisionar

    for forma in ('--chaves=/tmp/a.tsv', '--arquivo=/tmp/a.tsv'):
        assert provisionar.argumentos(['--mapping=m', forma]).chaves == '/tmp/a.tsv'
