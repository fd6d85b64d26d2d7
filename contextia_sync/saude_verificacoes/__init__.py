"""
As verificações da saúde, como uma tabela: cada uma é uma função pequena do
status já lido (`Retrato`) que devolve um `Resultado` -- os motivos (nível e
texto) e as medidas (os dados de desempenho depois da barra). `avaliar` dobra a
tabela `VERIFICACOES` num `Veredito`; a linha de comando (`saude.py`) só lê o
arquivo, imprime a linha e devolve o código.

Para acrescentar uma regra: uma função `(Retrato) -> Resultado` (ou, se é de um
dataset, `(Retrato, dataset) -> Resultado` em `VERIFICACOES_DO_DATASET`), posta
na tabela no lugar em que o motivo deve aparecer na linha (dentro do mesmo
nível, a ordem da tabela é a ordem da linha); a medida nova entra em
`ORDEM_DAS_MEDIDAS`. A regra vai também para `REGRAS` (saude.py) e para
docs/implantacao.md (Etapa 6).

Só biblioteca padrão (e `estado.status`, `padroes`): roda ao lado do ouvinte,
em milissegundos.
"""

from contextia_sync.saude_verificacoes.registros import (
    ALERTA,
    CRITICO,
    DESCONHECIDO,
    NOMES,
    OK,
    Limites,
    Medida,
    Motivo,
    Resultado,
    Veredito,
    erro_curto,
    limpo,
)
from contextia_sync.saude_verificacoes.retrato import Retrato, ler_retrato, pid_vivo
from contextia_sync.saude_verificacoes.tabela import (
    ORDEM_DAS_MEDIDAS,
    VERIFICACOES,
    VERIFICACOES_DO_DATASET,
    Verificacao,
    avaliar,
    resultados,
)

__all__ = [
    'ALERTA',
    'CRITICO',
    'DESCONHECIDO',
    'NOMES',
    'OK',
    'ORDEM_DAS_MEDIDAS',
    'VERIFICACOES',
    'VERIFICACOES_DO_DATASET',
    'Limites',
    'Medida',
    'Motivo',
    'Resultado',
    'Retrato',
    'Veredito',
    'Verificacao',
    'avaliar',
    'erro_curto',
    'ler_retrato',
    'limpo',
    'pid_vivo',
    'resultados',
]
