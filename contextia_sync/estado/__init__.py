"""
O diretorio de estado do ouvinte (`--estado`): tres arquivos, cada um trocado
inteiro (temporario + fsync + rename), nunca pela metade.

    estado.py    ouvinte-estado.json: marcas de agua e o que o ouvinte sabe da
                 origem, em registros tipados (um por secao do arquivo)
    status.py    ouvinte-status.txt: o que um alerta le
    trava.py     ouvinte.lock: um ouvinte por implantacao (flock)

Pode importar: arquivos, erros, captura.marca_agua (a forma de texto da marca).
Nao conhece a origem nem o Contextia. Puro (roda no `python3 -S`).
"""
