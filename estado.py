#!/usr/bin/env python3
"""
ESTADO -- ver e mudar a mão onde cada dataset do ouvinte está.

    python3 estado.py mostrar --estado=/opt/contextia/estado [--json] [--mapping=...]
    python3 estado.py marcar titulos_a_receber max --mapping=mappings/<cliente>.json \\
        --estado=/opt/contextia/estado
    python3 estado.py esquecer-carga 297 --estado=/opt/contextia/estado

`mostrar` lê sem a trava e roda com o ouvinte de pe. `marcar` e
`esquecer-carga` pegam a trava do ouvinte (ouvinte.lock): com ele rodando,
recusam (saída 2) -- pare o serviço, mude, suba de novo. Antes de gravar,
`marcar` diz o que será relido ou pulado e pede confirmação (ou --sim).

Códigos de saída:
    0  feito (ou nada a mudar)
    1  não confirmado, ou a origem não respondeu; nada mudou
    2  erro de configuração, ouvinte rodando, ou sem terminal e sem --sim;
       nada mudou

Guia: docs/ouvinte.md (ver e mudar o estado a mão). A linha de comando mora em
contextia_sync/cli/estado.py; a lógica, em contextia_sync/ouvinte/estado_a_mao.py.
"""

import sys

from contextia_sync.cli.estado import main

if __name__ == '__main__':
    sys.exit(main())
