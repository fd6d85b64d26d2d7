"""O que toda linha de comando do SDK faz igual: versao, recusa e codigos de saida."""

from __future__ import annotations

import argparse
import sys

from contextia_sync import __version__
from contextia_sync.erros import SAIDA_CONFIGURACAO, ErroConfiguracao

CODIGOS_DE_SAIDA = ('Saida: 0 ok; 1 algo falhou (o que falhou ficou como estava);'
                    ' 2 erro de configuracao (nada foi feito).')


def novo_parser(prog: str, descricao: str, epilog: str | None = None) -> argparse.ArgumentParser:
    """Um ArgumentParser com `--version` (o mesmo numero em todos os programas)."""
    parser = argparse.ArgumentParser(prog=prog, description=descricao, epilog=epilog)
    parser.add_argument('--version', action='version',
                        version='%s (contextia_sync %s)' % (prog, __version__))
    return parser


def recusar(prog: str, erro: ErroConfiguracao | str) -> int:
    """Imprime o erro de configuracao (ja diz a correcao) e devolve o codigo 2."""
    print('%s: %s' % (prog, erro), file=sys.stderr)
    return SAIDA_CONFIGURACAO
