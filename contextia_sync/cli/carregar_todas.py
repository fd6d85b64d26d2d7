"""
A linha de comando `contextia-carregar-todas`: a carga completa de cada empresa.

E o `carregar-todas.sh` empacotado (contextia_sync/carga/carregar_todas.sh),
rodado pelo bash no lugar deste processo (o mesmo pid: quem o supervisiona
sinaliza o bash). Argumentos, ambiente, saida e codigos de saida sao os dele;
so `--version` e respondido aqui.
"""

from __future__ import annotations

import os
import shutil
import sys

from contextia_sync.cli.comum import novo_parser
from contextia_sync.erros import SAIDA_CONFIGURACAO

PROG = 'carregar-todas'
SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      'carga', 'carregar_todas.sh')


def main(argv: list[str] | None = None) -> int:
    """Troca este processo pelo `bash carregar_todas.sh argv...`; so volta se nao der."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ['--version']:
        # A mesma linha de versao de todos os programas (sai com 0).
        novo_parser(PROG, 'A carga completa de cada empresa do arquivo de chaves.').parse_args(
            ['--version'])
    bash = shutil.which('bash')
    if bash is None:
        print('%s: bash nao encontrado no PATH -- o carregar-todas e um script bash.' % PROG,
              file=sys.stderr)
        return SAIDA_CONFIGURACAO
    # Instalado com pip, o python deste comando e o que tem o pacote: e ele que
    # roda o connector, salvo CONTEXTIA_PYTHON dizendo outro.
    ambiente = dict(os.environ)
    if sys.executable:
        ambiente.setdefault('CONTEXTIA_PYTHON', sys.executable)
    os.execve(bash, [bash, SCRIPT] + argv, ambiente)


if __name__ == '__main__':
    sys.exit(main())
