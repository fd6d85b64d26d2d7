#!/usr/bin/env python3
"""
PROVISIONAR -- um projeto no Contextia para cada empresa nova do ERP.

    CONTEXTIA_URL=... CONTEXTIA_ADMIN_TOKEN=... python3 provisionar.py \\
        --mapping=mappings/<cliente>.json --source=generic --chaves=/opt/contextia/chaves.tsv

Instalado com pip, o mesmo programa e `contextia-provisionar` (ou
`python3 -m contextia_sync.cli.provisionar`), com os mesmos argumentos.

Lê o cadastro de empresas (seção `projects` do mapeamento), e para cada empresa
que a regra aceita, que não está excluída e que o arquivo de chaves ainda não
tem: cria o projeto (idempotente), emite a chave, GRAVA A CHAVE NO ARQUIVO antes
de qualquer outra coisa, e só então põe nos grupos (--grupo e/ou group_column)
e registra o webhook (seção `webhook`; segredo pela variável que ela nomeia).

Rodar de novo e sempre seguro: e assim que se conserta uma execução
interrompida, e a saída diz o que foi reparado. Ver
docs/carga-e-provisionamento.md.

Códigos de saída:
    0  nada a fazer, ou tudo feito
    1  alguma empresa falhou (as outras foram feitas) ou a origem não respondeu
    2  erro de configuração (mapeamento, arquivo de chaves com permissão aberta ou
       linha corrompida, CONTEXTIA_ORIGEM ausente ou invalida, token de admin
       ausente/recusado, segredo do webhook ausente); nada foi mudado
"""

import sys

from contextia_sync.cli.provisionar import main

if __name__ == '__main__':
    sys.exit(main())
