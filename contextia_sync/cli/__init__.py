"""
A linha de comando de cada programa: argumentos, mensagens e códigos de saída.

Cada módulo aqui é a casca de um programa (`ouvinte`, `conector`,
`provisionar`, `carregar_todas`, `estado`, `descobrir`) e a lógica mora no
subpacote do assunto. As regras comuns a todos estão em
`contextia_sync/linha_de_comando.py` (na raiz do pacote, porque a saúde e o
`chaves executar` também as usam e não podem importar daqui): o argparse em
português, `--version`, os códigos de saída no `--help`, e o erro de
configuração pego UMA vez, impresso sem traceback, saída 2.
"""
