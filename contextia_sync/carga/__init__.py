"""
A carga completa de UMA empresa: `completa` lê cada dataset da origem e o entrega
sob um ciclo de carga (`sync` + `complete`, a única operação do SDK que remove),
com o teto de remoção; `historico` guarda o que a última carga aceita de cada
dataset trouxe (a base do teto sem key, e o que a varredura do ouvinte fechou).
Pode importar o `intake`, o contrato da origem (`contextia_sync.origem`), o
`mapeamento` e os módulos comuns (`padroes`, `erros`, `registro`, `arquivos`,
`escopos`); nunca o ouvinte nem a captura -- a dependência e no outro sentido:
o ouvinte lê o `historico` daqui e roda a carga como ferramenta (connector.py).
"""
