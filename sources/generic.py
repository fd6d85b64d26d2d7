"""
`--source=generic`: o adaptador embutido, para qualquer banco que o SQLAlchemy fale.

A logica mora em `contextia_sync/origem/generico.py` (engine proprio, sessao
somente leitura, leituras curtas em streaming); este arquivo e a porta de
entrada que `--source=generic` encontra em sources/. Um adaptador proprio do
integrador fica ao lado dele, com as mesmas funcoes (docs/origem.md).
"""

from contextia_sync.origem import ErroIdentificador, ErroOrigem
from contextia_sync.origem.generico import (
    agora,
    colunas,
    conectar,
    conjunto,
    contar,
    contar_sem_valor,
    escopos,
    fechar,
    fetch,
    maximo,
    renovar,
    tipo_coluna,
)

__all__ = ['ErroIdentificador', 'ErroOrigem', 'agora', 'colunas', 'conectar', 'conjunto',
           'contar', 'contar_sem_valor', 'escopos', 'fechar', 'fetch', 'maximo', 'renovar',
           'tipo_coluna']
