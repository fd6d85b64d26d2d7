"""
ouvinte -- o SDK de sincronizacao do Contextia: leva os dados do ERP do cliente
ao Contextia em segundos, com um login SOMENTE LEITURA.

Os programas que o operador roda ficam na raiz do repositorio (`ouvinte.py`,
`connector.py`, `provisionar.py`, `carregar-todas.sh`) e, instalado com pip,
como comandos (`ouvinte`, `contextia-connector`, ...). Sao cascas finas sobre
este pacote, que tem um subpacote por assunto:

    origem/            ler o ERP (adaptador, sessao travada, valores, SQL, filtro)
    intake/            falar com o Contextia (cliente, transporte, serializacao)
    captura/           descobrir o que mudou (estrategias, marca de agua)
    ouvinte/           os tres ciclos, a agenda e o laco do servico
    estado/            os arquivos do diretorio de estado (estado, status, trava)
    carga/             a carga completa de uma empresa (teto, historico)
    provisionamento/   empresa nova vira projeto (regra, chaves, plano)
    cli/               a linha de comando de cada programa
    supervisor.py      rodar uma ferramenta filha (subprocess) como o seed 001

O mapa inteiro, e como uma linha do ERP chega ao Contextia: docs/arquitetura.md.
"""

__version__ = '0.5.0'
