"""
O que toda linha de comando do SDK faz igual: o argparse em português, a
versão, os códigos de saída no `--help` e a recusa de configuração.

O argparse monta as frases dele (`usage:`, `options:`, `error: the following
arguments are required`, `invalid int value` ...) com `argparse._`, o gettext
do domínio global do processo, e não traz tradução. Instalar um catálogo no
domínio global mudaria as frases de qualquer outra biblioteca que use gettext;
por isso `ParserPt` troca `argparse._` (e `argparse.ngettext`) pelo tradutor
daqui SÓ enquanto um método dele trabalha, e devolve o original ao sair. As
CLIs leem os argumentos antes de abrir qualquer thread: ninguém mais usa o
argparse nesse meio-tempo. Frase que não está em `TRADUCOES` (de uma versão
do Python que ainda não vimos) sai como o argparse a escreveu.

Todo programa monta o parser por `novo_parser`: herda as traduções, o
`--version` e a lista dos códigos de saída (o texto mora em
`contextia_sync/erros.py: texto_das_saidas`).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import NoReturn, ParamSpec, TypedDict, TypeVar, Unpack

from contextia_sync import __version__
from contextia_sync.erros import SAIDA_CONFIGURACAO, ErroConfiguracao, texto_das_saidas

T = TypeVar('T')
P = ParamSpec('P')

# As frases do argparse do Python 3.11 (e as que versões seguintes acrescentam)
# que um operador pode ver. Erros de quem escreve o parser (ação conflitante,
# dest faltando) ficam em inglês: só aparecem para o programador.
TRADUCOES: dict[str, str] = {
    'usage: ': 'uso: ',
    'positional arguments': 'argumentos posicionais',
    'options': 'opções',
    'optional arguments': 'opções',
    'subcommands': 'subcomandos',
    'show this help message and exit': 'mostra esta ajuda e sai',
    "show program's version number and exit": 'mostra a versão e sai',
    '%(prog)s: error: %(message)s\n': '%(prog)s: erro: %(message)s\n',
    'argument %(argument_name)s: %(message)s': 'argumento %(argument_name)s: %(message)s',
    'the following arguments are required: %s': 'faltam os argumentos obrigatórios: %s',
    'one of the arguments %s is required': 'é obrigatório um dos argumentos %s',
    'unrecognized arguments: %s': 'argumentos desconhecidos: %s',
    'expected one argument': 'falta o valor',
    'expected at most one argument': 'aceita no máximo um valor',
    'expected at least one argument': 'precisa de ao menos um valor',
    'not allowed with argument %s': 'não pode ser usado junto com %s',
    'ignored explicit argument %r': 'não aceita valor (recebeu %r)',
    'ambiguous option: %(option)s could match %(matches)s': (
        'opção ambígua: %(option)s pode ser %(matches)s'
    ),
    'invalid %(type)s value: %(value)r': '%(value)r não é %(type)s',
    'invalid choice: %(value)r (choose from %(choices)s)': (
        'valor inválido: %(value)r (escolha entre %(choices)s)'
    ),
    'invalid choice: %(value)r, maybe you meant %(closest)r?': (
        'valor inválido: %(value)r; seria %(closest)r?'
    ),
    'unexpected option string: %s': 'opção inesperada: %s',
    "can't open '%(filename)s': %(error)s": "não foi possível abrir '%(filename)s': %(error)s",
    'unknown parser %(parser_name)r (choices: %(choices)s)': (
        'subcomando desconhecido: %(parser_name)r (escolha entre %(choices)s)'
    ),
    'option %(option)s: %(message)s': 'opção %(option)s: %(message)s',
}

# As que o argparse pede com ngettext: (singular, plural) -> (singular, plural).
PLURAIS: dict[tuple[str, str], tuple[str, str]] = {
    ('expected %s argument', 'expected %s arguments'): (
        'precisa de %s valor',
        'precisa de %s valores',
    )
}

# O nome do tipo em `invalid %(type)s value` (a funcao de conversao), dito como
# gente diz. Tipo de quem escreve o parser levanta ArgumentTypeError com a frase
# dele e nao passa por aqui.
NOMES_DE_TIPO = {'int': 'um número inteiro', 'float': 'um número', 'str': 'um texto'}


class _ComTipo(str):
    """O modelo de `invalid %(type)s value` que troca `int` por 'um número inteiro'."""

    def __mod__(self, valores: object) -> str:
        if isinstance(valores, dict) and 'type' in valores:
            nome = str(valores['type'])
            valores = dict(valores, type=NOMES_DE_TIPO.get(nome, 'um valor aceito por %s' % nome))
        return str.__mod__(self, valores)


def traduzir(mensagem: str) -> str:
    """O gettext do argparse enquanto `ParserPt` trabalha."""
    traduzida = TRADUCOES.get(mensagem)
    if traduzida is None:
        return mensagem
    return _ComTipo(traduzida) if '%(type)s' in mensagem else traduzida


def traduzir_plural(singular: str, plural: str, n: int) -> str:
    """O ngettext do argparse enquanto `ParserPt` trabalha."""
    pt = PLURAIS.get((singular, plural))
    if pt is None:
        return singular if n == 1 else plural
    return pt[0] if n == 1 else pt[1]


@contextlib.contextmanager
def em_portugues() -> Iterator[None]:
    """O argparse fala português dentro do bloco (e volta ao que era ao sair)."""
    # Os nomes que as funcoes do argparse procuram no modulo a cada chamada.
    trocas = {'_': traduzir, 'ngettext': traduzir_plural}
    antes = {nome: vars(argparse)[nome] for nome in trocas}
    for nome, funcao in trocas.items():
        setattr(argparse, nome, funcao)
    try:
        yield
    finally:
        for nome, funcao in antes.items():
            setattr(argparse, nome, funcao)


def _portugues(metodo: Callable[P, T]) -> Callable[P, T]:
    def traduzido(*args: P.args, **kwargs: P.kwargs) -> T:
        with em_portugues():
            return metodo(*args, **kwargs)

    traduzido.__name__ = metodo.__name__
    traduzido.__doc__ = metodo.__doc__
    return traduzido


class FormatoPt(argparse.HelpFormatter):
    """
    A ajuda com a forma que a descrição e o epílogo têm no código: parágrafos
    separados por linha em branco, e a linha recuada é um item (um código de
    saída, uma variável de ambiente) que fica numa linha só dele. Tudo é
    rearrumado na largura do terminal; a continuação de um item fica sob o
    texto dele, não sob o nome.
    """

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        blocos: list[str] = []
        for linha in text.splitlines():
            if not linha.strip():
                blocos.append('')
            elif (
                linha[:1].isspace()
                or not blocos
                or not blocos[-1]
                or blocos[-1][:1].isspace()
                or blocos[-1].endswith(':')
            ):
                blocos.append(linha.rstrip())
            else:
                blocos[-1] += ' ' + linha.strip()
        saida = []
        for bloco in blocos:
            if not bloco:
                saida.append('')
                continue
            recuo = bloco[: len(bloco) - len(bloco.lstrip())]
            item = re.match(r'\s+(?:\S+\s{2,}|- )', bloco) if recuo else None
            continuacao = ' ' * item.end() if item else recuo
            saida.append(
                textwrap.fill(
                    bloco.strip(),
                    width,
                    initial_indent=indent + recuo,
                    subsequent_indent=indent + continuacao,
                )
            )
        return '\n'.join(saida)


class OpcoesDoParser(TypedDict, total=False):
    """As opções do `argparse.ArgumentParser` que `novo_parser` repassa (fora as que ele dá)."""

    usage: str | None
    parents: Sequence[argparse.ArgumentParser]
    formatter_class: type[argparse.HelpFormatter]
    prefix_chars: str
    fromfile_prefix_chars: str | None
    argument_default: object
    conflict_handler: str
    add_help: bool
    allow_abbrev: bool
    exit_on_error: bool


class _OpcoesDoParserPt(OpcoesDoParser, total=False):
    """Todas as opções do `argparse.ArgumentParser` (as do `ParserPt` e as do subcomando)."""

    prog: str | None
    description: str | None
    epilog: str | None


class ParserPt(argparse.ArgumentParser):
    """Um ArgumentParser cujas frases (ajuda, uso, erros) saem em português."""

    def __init__(self, **kwargs: Unpack[_OpcoesDoParserPt]) -> None:
        kwargs.setdefault('formatter_class', FormatoPt)
        with em_portugues():
            super().__init__(**kwargs)

    parse_args = _portugues(argparse.ArgumentParser.parse_args)  # type: ignore[assignment]
    parse_known_args = _portugues(  # type: ignore[assignment]
        argparse.ArgumentParser.parse_known_args
    )
    format_usage = _portugues(argparse.ArgumentParser.format_usage)
    format_help = _portugues(argparse.ArgumentParser.format_help)
    add_argument = _portugues(argparse.ArgumentParser.add_argument)
    add_subparsers = _portugues(argparse.ArgumentParser.add_subparsers)

    def error(self, message: str) -> NoReturn:
        with em_portugues():
            super().error(message)
        raise AssertionError('argparse.error voltou')  # pragma: no cover


def linha_de_versao(prog: str) -> str:
    """A linha de `--version`: o programa e a versão do SDK (a mesma em todos)."""
    return '%s (contextia_sync %s)' % (prog, __version__)


def novo_parser(
    prog: str,
    descricao: str,
    epilog: str | None = None,
    saidas: Mapping[int, str] | None = None,
    **opcoes: Unpack[OpcoesDoParser],
) -> argparse.ArgumentParser:
    """
    O parser de um programa do SDK: em português, com `--version` e, no fim do
    `--help`, o `epilog` e os códigos de saída (`saidas` troca o que 1 e 2
    querem dizer neste programa, ou acrescenta códigos).
    """
    partes = [epilog] if epilog else []
    partes.append(texto_das_saidas(saidas))
    parser = ParserPt(prog=prog, description=descricao, epilog='\n\n'.join(partes), **opcoes)
    parser.add_argument(
        '--version', action='version', version=linha_de_versao(prog), help='mostra a versão e sai'
    )
    return parser


def recusar(prog: str, erro: ErroConfiguracao | str) -> int:
    """Imprime o erro de configuração (já diz a correção) e devolve o código 2."""
    print('%s: %s' % (prog, erro), file=sys.stderr)
    return SAIDA_CONFIGURACAO
