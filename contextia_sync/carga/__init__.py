"""
A carga completa de UMA empresa: `completa` le cada dataset da origem e o entrega
sob um ciclo de carga (`sync` + `complete`, a unica operacao do SDK que remove),
com o teto de remocao; `historico` guarda o que a ultima carga aceita de cada
dataset trouxe (a base do teto sem key, e o que a varredura do ouvinte fechou).
Pode importar o `intake`, o contrato da origem (`contextia_sync.origem`), o
`mapeamento` e os modulos comuns (`padroes`, `erros`, `registro`, `arquivos`,
`escopos`); nunca o ouvinte nem a captura -- a dependencia e no outro sentido:
o ouvinte le o `historico` daqui e roda a carga como ferramenta (connector.py).
"""
