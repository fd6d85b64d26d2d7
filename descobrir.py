#!/usr/bin/env python3
"""
DESCOBRIR -- do catalogo da origem a um esqueleto de mapeamento, em minutos.

    CONTEXTIA_ORIGEM=<URL do ERP, login somente leitura> python3 descobrir.py \\
        --cadastro=EMPRESAS --saida=mappings/<cliente>.json

Le o catalogo pelo inspector do SQLAlchemy (tabelas e views, colunas, tipos,
chave primaria, unicas, indices) na mesma sessao somente leitura do adaptador
generico, e escreve um mapeamento que valida: key, watch_column (e se um
indice a cobre), scope_column, as colunas que o intake aceita (as outras ficam
de fora, com o CAST para a view) e a regra de projeto do cadastro. O relatorio
diz os palpites, os objetos so de varredura e os indices que faltam. Se o
arquivo de --saida ja existe, mostra a diferenca e nao o sobrescreve.

Codigos de saida:
    0  esqueleto escrito, ou o mapeamento existente ainda casa com o catalogo
    1  a origem nao respondeu, ou o mapeamento existente cita o que sumiu
    2  erro de configuracao (CONTEXTIA_ORIGEM, --cadastro, --escopo, --esquema)

A linha de comando mora em contextia_sync/cli/descobrir.py (tambem
`python3 -m contextia_sync.cli.descobrir`); a logica, em contextia_sync/descoberta/.
O guia: docs/mapeamento.md, "Comecar com descobrir".
"""

import sys

from contextia_sync.cli.descobrir import main

if __name__ == '__main__':
    sys.exit(main())
