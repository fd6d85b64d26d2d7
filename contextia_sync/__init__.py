"""
ouvinte -- o SDK de sincronização do Contextia: leva os dados do ERP do cliente
ao Contextia em segundos, com um login SOMENTE LEITURA.

Os programas que o operador roda ficam na raiz do repositório (`ouvinte.py`,
`connector.py`, `provisionar.py`, `carregar-todas.sh`) e, instalado com pip,
como comandos (`ouvinte`, `contextia-connector`, ...). São cascas finas sobre
este pacote, que tem um subpacote por assunto:

    origem/            ler o ERP (adaptador, sessão travada, valores, SQL, filtro)
    intake/            falar com o Contextia (cliente, transporte, serialização)
    captura/           descobrir o que mudou (estratégias, marca de água)
    ouvinte/           os três ciclos, a agenda e o laço do serviço
    estado/            os arquivos do diretório de estado (estado, status, trava)
    carga/             a carga completa de uma empresa (teto, histórico)
    provisionamento/   empresa nova vira projeto (regra, chaves, plano)
    cli/               a linha de comando de cada programa
    supervisor.py      rodar uma ferramenta filha (subprocess) como o seed 001

O mapa inteiro, e como uma linha do ERP chega ao Contextia: docs/arquitetura.md.
"""

__version__ = '0.5.0'
