"""
A linha de comando de cada programa: argumentos, mensagens e codigos de saida.

Cada modulo aqui e a casca de um programa (`ouvinte`, `conector`,
`provisionar`, `carregar_todas`, `estado`, `descobrir`) e a logica mora no subpacote do assunto. As
regras comuns a todos estao em `comum.py`: o argparse em portugues, `--version`,
os codigos de saida no `--help`, e o erro de configuracao pego UMA vez,
impresso sem traceback, saida 2.
"""
