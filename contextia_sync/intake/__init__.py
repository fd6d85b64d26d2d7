"""
Falar com o Contextia por HTTP. O envio de um dataset é uma fila de etapas,
cada uma num módulo, e `cliente.enviar_dataset` só as liga:

    registros -> `lotes` (serializar e cortar: `FonteDeLotes`)
              -> `envio` (o corpo: `Envelope`)
              -> `remessa` (os lotes em voo, a divisão do 413 e o isolamento do
                 registro recusado, a interrupção, o balanço: `Remessa`)
              -> `transporte` (um pedido: `PoliticaDeRetentativas`, prazo por
                 chamada, TLS, mascara de chaves)
              -> `envio` (o resultado: `Aceite`, `ResultadoEnvio`; a quarentena:
                 `RecusasDoEnvio`)

`respostas` lê o que o servidor respondeu (contagens, 401, o motivo da
recusa); `cliente` é a porta pública (envio, `complete`, leitura, reenvio da
quarentena); `admin` o provisionamento com o token de admin; `serializacao`
os valores do ERP para JSON exato. Pode importar só os módulos comuns do
pacote -- `padroes`, `erros`, `registro`, `escopos` -- e `fila` (a quarentena
que `enviar_dataset` recebe para os registros recusados de vez), e nunca a
origem nem o ouvinte: o intake não sabe de onde vem o dado nem quem o pediu.
"""
