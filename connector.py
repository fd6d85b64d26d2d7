#!/usr/bin/env python3
"""
CONECTOR -- a carga completa de uma empresa, da origem ao Contextia.

    python3 connector.py --mapping=mappings/<cliente>.json --scope=297 \\
        --chaves=/var/lib/contextia/chaves.tsv

A chave vem de CONTEXTIA_API_KEY (o carregar-todas.sh e o ouvinte a passam
assim) ou, sem ela, da linha da empresa no arquivo de --chaves -- NUNCA da
linha de comando, onde apareceria no `ps` de qualquer usuário da máquina. Com
--chaves, a carga aceita entra no histórico ao lado dele (<chaves>.historico.json).

Cada dataset e lido da origem (só as linhas da empresa; tabela de domínio
inteira) e enviado sob um ciclo de carga próprio. O `complete` -- que remove do
Contextia o que a origem não tem mais -- só é enviado se todos os lotes daquele
dataset chegaram, e leva o teto de remoção: view que de repente volta vazia não
esvazia o dataset. Detalhes em docs/carga-e-provisionamento.md.

Progresso: as linhas da empresa são contadas antes de cada dataset. Num
terminal, uma barra por dataset com o total e o tempo que falta (fica na tela).
Sem terminal (ouvinte, cron, carregar-todas.sh), uma linha "<dataset>
escopo=S: N de M (P%), faltam ~T" a cada CONTEXTIA_PROGRESSO_SEGUNDOS (padrão
30) durante a leitura -- o ouvinte encerra ferramenta calada por
--inatividade-ferramenta.

Códigos de saída:
    0  todos os datasets carregados
    1  algum dataset falhou (origem, rede, lote recusado, teto de remoção);
       os outros foram carregados e o que falhou ficou como estava
    2  erro de configuração (mapeamento, chave ausente/recusada/de outra
       empresa, escopo excluído, --dataset desconhecido); nada foi enviado

A linha de comando mora em contextia_sync/cli/conector.py (também
`python3 -m contextia_sync.cli.conector`); a lógica, em contextia_sync/carga/.
"""

import sys

from contextia_sync.cli.conector import main

if __name__ == '__main__':
    sys.exit(main())
