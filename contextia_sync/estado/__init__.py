"""
O diretório de estado do ouvinte (`--estado`): três arquivos, cada um trocado
inteiro (temporário + fsync + rename), nunca pela metade.

    estado.py    ouvinte-estado.json: marcas de água e o que o ouvinte sabe da
                 origem, em registros tipados (um por seção do arquivo)
    status.py    ouvinte-status.txt: o que um alerta lê
    trava.py     ouvinte.lock: um ouvinte por implantação (flock)

Pode importar: arquivos, erros, captura.marca_agua (a forma de texto da marca).
Não conhece a origem nem o Contextia. Puro (roda no `python3 -S`).
"""
