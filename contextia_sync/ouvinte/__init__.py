"""
O ouvinte: o serviço que fica de pe e leva ao Contextia o que mudou, em segundos.

    contexto.py    `Contexto`: tudo o que um ciclo precisa, montado uma vez
    preparo.py     resolve a configuração na ordem certa e monta o Contexto
    dados.py       ciclo de DADOS: o que mudou (pela captura), empresa por empresa
    projetos.py    ciclo de PROJETOS: empresa nova ganha projeto, chave e carga
    varredura.py   VARREDURA: a carga completa diária, a única que remove
    agenda.py      a hora da varredura e a espera depois de falhas (puro)
    laco.py        o laço do serviço: ciclos, parada, status
    relatorio.py   o conteúdo do ouvinte-status.txt
    autoteste.py   `--autoteste`: a lógica pura provada num `python3 -S`
    estado_a_mao.py  o estado visto e mudado pelo operador (`estado.py`): o
                   retrato, a marca posta a mão, a carga pendente esquecida

Pode importar todos os outros subpacotes: e quem os junta. As ferramentas
(provisionar, connector, carregar-todas) rodam como processos filhos, pelo
supervisor (supervisor.py), nunca importadas: uma falha delas volta como
código de saída e não derruba o serviço.
"""
