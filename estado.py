#!/usr/bin/env python3
"""
ESTADO -- ver e mudar a mao onde cada dataset do ouvinte esta.

    python3 estado.py mostrar --estado=/opt/contextia/estado [--json] [--mapping=...]
    python3 estado.py marcar titulos_a_receber max --mapping=mappings/<cliente>.json \\
        --estado=/opt/contextia/estado
    python3 estado.py esquecer-carga 297 --estado=/opt/contextia/estado

`mostrar` le sem a trava e roda com o ouvinte de pe. `marcar` e
`esquecer-carga` pegam a trava do ouvinte (ouvinte.lock): com ele rodando,
recusam (saida 2) -- pare o servico, mude, suba de novo. Antes de gravar,
`marcar` diz o que sera relido ou pulado e pede confirmacao (ou --sim).

Codigos de saida:
    0  feito (ou nada a mudar)
    1  nao confirmado, ou a origem nao respondeu; nada mudou
    2  erro de configuracao, ouvinte rodando, ou sem terminal e sem --sim;
       nada mudou

Guia: docs/ouvinte.md (ver e mudar o estado a mao). A linha de comando mora em
contextia_sync/cli/estado.py; a logica, em contextia_sync/ouvinte/estado_a_mao.py.
"""

import sys

from contextia_sync.cli.estado import main

if __name__ == '__main__':
    sys.exit(main())
