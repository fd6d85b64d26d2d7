#!/usr/bin/env python3
"""
OUVINTE -- o dado chega ao Contextia em segundos, nao na madrugada seguinte.

    python3 ouvinte.py --mapping=mappings/<cliente>.json --source=generic \\
        --chaves=/opt/contextia/chaves.tsv --estado=/opt/contextia/estado

Um processo que fica de pe e faz sozinho tudo o que o cron da recarga fazia,
mais acompanhar a origem de perto:

    ciclo de DADOS       a cada 60s     o que mudou desde a ultima leitura
    ciclo de PROJETOS    a cada 300s    empresa nova ganha projeto, chave e carga
    VARREDURA            1x por dia     a carga completa -- a UNICA que remove

"Ao vivo" aqui e uma SONDA CURTA numa coluna de mudanca
(`SELECT COUNT(*) FROM <view> WHERE <coluna> > <marca>`), com a credencial de
leitura que ja usamos, em qualquer um dos quatro bancos, sem pedir nada ao DBA.
Latencia: o intervalo do ciclo. Exclusao na origem NAO e vista: sai do
Contextia so na varredura. Detalhes e razoes: docs/ouvinte.md; o mapa do
codigo: docs/arquitetura.md.

Arquivos em --estado: ouvinte-estado.json (marcas), ouvinte-status.txt (o que
um alerta le), ouvinte.lock (um ouvinte por implantacao).

Este arquivo e so a porta de entrada: a linha de comando esta em
contextia_sync/cli/ouvinte.py, e o servico em contextia_sync/ouvinte/.
"""

import sys

from contextia_sync.cli.ouvinte import main

if __name__ == '__main__':
    sys.exit(main())
