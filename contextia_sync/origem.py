"""
O contrato do adaptador de origem: carrega `--source=generic` ->
`sources/generic.py` e define as excecoes que todo adaptador levanta.
"""

import importlib
import os
import re
import sys

from contextia_sync import filtro

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PASTA_SOURCES = os.path.join(RAIZ, 'sources')

# O que ouvinte, conector e provisionador chamam no adaptador.
FUNCOES = ('conectar', 'fetch', 'contar', 'maximo', 'renovar', 'fechar')


class ErroAdaptador(Exception):
    """O adaptador pedido nao existe ou nao expoe o que o SDK precisa."""


class ErroOrigem(Exception):
    """A origem nao respondeu como devia (conexao, permissao, objeto, consulta)."""


class ErroIdentificador(ErroOrigem, filtro.ErroIdentificador):
    """Nome de objeto/coluna do mapeamento recusado antes de virar SQL."""


def validado(funcao, *args):
    """`funcao(*args)` de `filtro`, com a recusa dele virando ErroIdentificador."""
    try:
        return funcao(*args)
    except filtro.ErroIdentificador as erro:
        raise ErroIdentificador(str(erro)) from None


def carregar_origem(nome):
    """Importa `sources/<nome>.py` e confere que ele expoe `FUNCOES`."""
    if not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', nome or ''):
        raise ErroAdaptador(
            '--source=%r nao e nome de modulo. Use o nome do arquivo em sources/'
            ' sem o .py (normalmente --source=generic).' % nome)
    if PASTA_SOURCES not in sys.path:
        sys.path.insert(0, PASTA_SOURCES)
    try:
        modulo = importlib.import_module(nome)
    except ModuleNotFoundError as erro:
        if erro.name != nome:
            raise
        raise ErroAdaptador(
            'sources/%s.py nao existe. Use --source=generic (sources/generic.py)'
            ' ou crie o adaptador.' % nome) from None
    faltam = [f for f in FUNCOES if not callable(getattr(modulo, f, None))]
    if faltam:
        raise ErroAdaptador(
            'sources/%s.py nao expoe %s. O SDK precisa de sonda (`contar`), leitura'
            ' (`fetch`, com `since=` e `scope=`), ponto de partida (`maximo`) e'
            ' renovacao de retrato (`renovar`). Use sources/generic.py.'
            % (nome, ', '.join('`%s`' % f for f in faltam)))
    return modulo
