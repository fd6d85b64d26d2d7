"""
O provisionamento: empresa nova no cadastro do ERP vira projeto no Contextia.

O que mora aqui:

    regra_projeto  a regra de projeto (seção `projects` do mapeamento): que linha
                   do cadastro vira projeto, com que nome e em que grupo. Puro.
    chaves         o arquivo de chaves (TSV, modo 0600, a ÚNICA copia das
                   chaves): ler, gravar inteiro, travar, e o `verificar` que o
                   carregar-todas roda (`python -m ...chaves verificar`).
    plano          o plano (`planejar`: o que fazer, sem fazer nada) e quem o
                   executa (`Provisionador`: a chave gravada antes de tudo).

A linha de comando e `contextia_sync/cli/provisionar.py`.

Pode importar: o intake (o cliente de admin), o contrato da origem
(`contextia_sync.origem`), o mapeamento e os erros (`contextia_sync.erros`).
Nunca o ouvinte: e ele que usa daqui (a regra de projeto e a leitura do
arquivo de chaves) e chama o provisionar como ferramenta, num processo filho --
criar chave tem um caminho só.
"""
