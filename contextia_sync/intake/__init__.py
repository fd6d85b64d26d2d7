"""
Falar com o Contextia por HTTP: `transporte` (como um pedido chega la e a
política de retentativas inteira -- prazo por chamada, backoff, 413 que divide o
lote, sobrecarga que interrompe o envio, TLS, mascara de chaves), `cliente`
(envio em lotes, `complete`, leitura, as respostas do servidor), `admin` (o
provisionamento com o token de admin) e `serializacao` (valores do ERP para JSON
exato). Pode importar só os módulos comuns do pacote -- `padroes`, `erros`,
`registro`, `escopos` -- e `fila` (a quarentena que `enviar_dataset` recebe
para os registros recusados de vez), e nunca a origem nem o ouvinte: o intake
não sabe de onde vem o dado nem quem o pediu.
"""
