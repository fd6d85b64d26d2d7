#!/usr/bin/env python3
"""
DESCOBRIR -- do catálogo da origem a um esqueleto de mapeamento, em minutos.

    CONTEXTIA_ORIGEM=<URL do ERP, login somente leitura> python3 descobrir.py \\
        --cadastro=EMPRESAS --saida=mappings/<cliente>.json

Lê o catálogo pelo inspector do SQLAlchemy (tabelas e views, colunas, tipos,
chave primária, únicas, índices) na mesma sessão somente leitura do adaptador
genérico, e escreve um mapeamento que valida: key, watch_column (e se um
índice a cobre), scope_column, as colunas que o intake aceita (as outras ficam
de fora, com o CAST para a view) e a regra de projeto do cadastro. O relatório
diz os palpites, os objetos só de varredura e os índices que faltam. Se o
arquivo de --saida ja existe, mostra a diferença e não o sobrescreve.

Códigos de saída:
    0  esqueleto escrito, ou o mapeamento existente ainda casa com o catálogo
    1  a origem não respondeu, ou o mapeamento existente cita o que sumiu
    2  erro de configuração (CONTEXTIA_ORIGEM, --cadastro, --escopo, --esquema)

A linha de comando mora em contextia_sync/cli/descobrir.py (também
`python3 -m contextia_sync.cli.descobrir`); a lógica, em contextia_sync/descoberta/.
O guia: docs/mapeamento.md, "Começar com descobrir".
"""

import sys

from contextia_sync.cli.descobrir import main

if __name__ == '__main__':
    sys.exit(main())
