"""
Logica compartilhada do SDK de sincronizacao do Contextia.

Os programas que o operador roda ficam na raiz (`ouvinte.py`, `connector.py`,
`provisionar.py`, `carregar-todas.sh`); aqui mora o que eles tem em comum, um
modulo pequeno por assunto. As regras da marca de agua estao em `marca_agua.py`.

Nenhum modulo deste pacote importa dependencia pesada no topo quando o
`--autoteste` precisa dele: o autoteste roda num `python3 -S` sem pacote nenhum.
"""
