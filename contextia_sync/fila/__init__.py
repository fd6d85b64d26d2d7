"""
Filas duraveis em diretorio: o que tem de sobreviver a um `kill -9` entre
dois passos do ouvinte.

    diretorio.py    `FilaEmDiretorio`: a fila do seed 004 -- o estado de cada
                    item e a pasta onde ele esta (pronto/, tomado/, parado/;
                    entregue = apagado), rename atomico, a identidade e a
                    sequencia no nome do arquivo, limitada e com recusa alta
                    quando cheia, o item de destino desconhecido nomeado no log.
                    O spool da captura por binlog/slot reusa esta fila.
    quarentena.py   `Quarentena`: a parte `parado/` dessa fila para os
                    registros que o intake recusou de vez -- um arquivo por
                    registro, com o motivo; `reenviar` tenta de novo por um
                    envio que quem chama da (o intake nao mora aqui).

Pode importar so os modulos comuns do pacote (`arquivos`, `padroes`, `erros`,
`escopos`, `registro`) e a biblioteca padrao: o intake importa daqui (a
quarentena entra em `enviar_dataset`), nunca o contrario.
"""
