"""
`--source=generic`: o adaptador embutido, para qualquer banco que o SQLAlchemy fale.

A lógica mora em `contextia_sync/origem/generico.py` (engine próprio, sessão
somente leitura, leituras curtas em streaming); este arquivo e a porta de
entrada que `--source=generic` encontra em sources/. Um adaptador próprio do
integrador fica ao lado dele, com as mesmas funções (docs/origem.md).
"""

from contextia_sync.origem import ErroIdentificador, ErroOrigem
from contextia_sync.origem.generico import (
    agora,
    chaves_repetidas,
    colunas,
    conectar,
    conjunto,
    contar,
    contar_sem_valor,
    escopos,
    familias,
    fechar,
    fetch,
    maximo,
    renovar,
    tipo_coluna,
)

# `familias` e opcional no contrato, mas sem ela o cliente converte valor a valor
# (o caminho lento): o adaptador embutido a expõe.
__all__ = [
    'ErroIdentificador',
    'ErroOrigem',
    'agora',
    'chaves_repetidas',
    'colunas',
    'conectar',
    'conjunto',
    'contar',
    'contar_sem_valor',
    'escopos',
    'familias',
    'fechar',
    'fetch',
    'maximo',
    'renovar',
    'tipo_coluna',
]
