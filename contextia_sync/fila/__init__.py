"""
Filas duráveis em diretório: o que tem de sobreviver a um `kill -9` entre
dois passos do ouvinte.

    diretorio.py    `FilaEmDiretorio`: a fila do seed 004 -- o estado de cada
                    item e a pasta onde ele está (pronto/, tomado/, parado/;
                    entregue = apagado), rename atômico, a identidade e a
                    sequência no nome do arquivo, limitada e com recusa alta
                    quando cheia, o item de destino desconhecido nomeado no log.
                    O spool da captura por binlog/slot reusa esta fila.
    quarentena.py   `Quarentena`: a parte `parado/` dessa fila para os
                    registros que o intake recusou de vez -- um arquivo por
                    registro, com o motivo; `reenviar` tenta de novo por um
                    envio que quem chama da (o intake não mora aqui).

Pode importar só os módulos comuns do pacote (`arquivos`, `padroes`, `erros`,
`escopos`, `registro`) e a biblioteca padrão: o intake importa daqui (a
quarentena entra em `enviar_dataset`), nunca o contrario.
"""
