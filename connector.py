#!/usr/bin/env python3
"""
CONECTOR -- a carga completa de uma empresa, da origem ao Contextia.

    python3 connector.py --mapping=mappings/<cliente>.json --scope=297 \\
        --chaves=/var/lib/contextia/chaves.tsv

A chave vem de CONTEXTIA_API_KEY (o carregar-todas.sh e o ouvinte a passam
assim) ou, sem ela, da linha da empresa no arquivo de --chaves -- NUNCA da
linha de comando, onde apareceria no `ps` de qualquer usuario da maquina. Com
--chaves, a carga aceita entra no historico ao lado dele (<chaves>.historico.json).

Cada dataset e lido da origem (so as linhas da empresa; tabela de dominio
inteira) e enviado sob um ciclo de carga proprio. O `complete` -- que remove do
Contextia o que a origem nao tem mais -- so e enviado se todos os lotes daquele
dataset chegaram, e leva o teto de remocao: view que de repente volta vazia nao
esvazia o dataset. Detalhes em docs/carga-e-provisionamento.md.

Progresso: as linhas da empresa sao contadas antes de cada dataset. Num
terminal, uma barra por dataset com o total e o tempo que falta (fica na tela).
Sem terminal (ouvinte, cron, carregar-todas.sh), uma linha "<dataset>
escopo=S: N de M (P%), faltam ~T" a cada CONTEXTIA_PROGRESSO_SEGUNDOS (padrao
30) durante a leitura -- o ouvinte encerra ferramenta calada por
--inatividade-ferramenta.

Codigos de saida:
    0  todos os datasets carregados
    1  algum dataset falhou (origem, rede, lote recusado, teto de remocao);
       os outros foram carregados e o que falhou ficou como estava
    2  erro de configuracao (mapeamento, chave ausente/recusada/de outra
       empresa, escopo excluido, --dataset desconhecido); nada foi enviado

A linha de comando mora em contextia_sync/cli/conector.py (tambem
`python3 -m contextia_sync.cli.conector`); a logica, em contextia_sync/carga/.
"""

import sys

from contextia_sync.cli.conector import main

if __name__ == '__main__':
    sys.exit(main())
