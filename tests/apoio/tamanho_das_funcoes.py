"""
Nenhuma função do pacote passa de 80 linhas (issue 29): o `make lint` roda

    python -m tests.apoio.tamanho_das_funcoes contextia_sync contextia_local

e sai com 1 nomeando cada uma que passa (a função aninhada conta dentro da de
fora: uma rota de 40 linhas dentro de `criar_app` é parte de `criar_app`). A
complexidade (15) é a do ruff (`C901`, no pyproject.toml); o tamanho o ruff
não mede em linhas, e é o que um recém-chegado lê numa tela.
"""

from __future__ import annotations

import ast
import os
import sys
from collections.abc import Iterator

LIMITE = 80


def grandes(pasta: str, limite: int = LIMITE) -> Iterator[tuple[str, int, str, int]]:
    """(arquivo, linha, nome, linhas) de cada função de `pasta` (ou do arquivo) com mais de
    `limite` linhas."""
    caminhos = (
        [pasta]
        if os.path.isfile(pasta)
        else sorted(
            os.path.join(raiz, nome) for raiz, _, arquivos in os.walk(pasta) for nome in arquivos
        )
    )
    for caminho in caminhos:
        if caminho.endswith('.py'):
            yield from _grandes_do_arquivo(caminho, limite)


def _grandes_do_arquivo(caminho: str, limite: int) -> Iterator[tuple[str, int, str, int]]:
    with open(caminho, encoding='utf-8') as arquivo:
        arvore = ast.parse(arquivo.read(), caminho)
    for no in ast.walk(arvore):
        if isinstance(no, (ast.FunctionDef, ast.AsyncFunctionDef)):
            linhas = (no.end_lineno or no.lineno) - no.lineno + 1
            if linhas > limite:
                yield caminho, no.lineno, no.name, linhas


def main(argv: list[str]) -> int:
    achadas = [g for pasta in argv for g in grandes(pasta)]
    for caminho, linha, nome, linhas in achadas:
        print(
            '%s:%d: %s tem %d linhas (o limite é %d): divida pelo que ela faz'
            % (caminho, linha, nome, linhas, LIMITE)
        )
    return 1 if achadas else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:] or ['contextia_sync', 'contextia_local']))
