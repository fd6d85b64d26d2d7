"""
Os tipos do mapeamento (contextia_sync/tipos.py) são o espelho do schema.

Um campo novo no mapeamento.schema.json que não chega ao TypedDict faria o mypy
recusar o código que o lê (ou, pior, aceitar um nome errado): aqui os dois são
comparados, chave a chave, em cada objeto do schema.
"""

import ast
import json
import os

import pytest

from contextia_sync import tipos

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _schema():
    caminho = os.path.join(RAIZ, 'contextia_sync', 'mapeamento.schema.json')
    with open(caminho, encoding='utf-8') as arquivo:
        return json.load(arquivo)


def _no(schema, caminho):
    no = schema
    for parte in caminho:
        no = no[parte]
    return no


ESPELHOS = [
    (tipos.Mapa, ()),
    (tipos.OrigemDoMapa, ('properties', 'source')),
    (tipos.OuvinteDoMapa, ('properties', 'listener')),
    (tipos.PadroesDoMapa, ('properties', 'defaults')),
    (tipos.CadastroDoMapa, ('properties', 'projects')),
    (tipos.WebhookDoMapa, ('properties', 'webhook')),
    (tipos.DatasetDoMapa, ('$defs', 'dataset')),
    (tipos.Filtro, ('$defs', 'filtro')),
    (tipos.TabelaBaseDoMapa, ('$defs', 'tabela_base', 'oneOf', 1)),
]


@pytest.mark.parametrize('tipo,caminho', ESPELHOS, ids=[t.__name__ for t, _ in ESPELHOS])
def test_cada_typeddict_tem_as_chaves_do_schema(tipo, caminho):
    no = _no(_schema(), caminho)
    assert no.get('additionalProperties') is False, 'o schema fechou este objeto'
    assert set(tipo.__annotations__) == set(no['properties'])


def _importa_any(fonte):
    for no in ast.walk(ast.parse(fonte)):
        if isinstance(no, ast.ImportFrom) and no.module in ('typing', 'typing_extensions'):
            if any(nome.name == 'Any' for nome in no.names):
                return True
        if isinstance(no, ast.Attribute) and no.attr == 'Any':
            return True
    return False


def test_o_unico_any_do_pacote_mora_em_tipos():
    """O mypy recusa `Any` escrito fora de tipos.py (disallow_any_explicit); o servidor também."""
    with open(os.path.join(RAIZ, 'pyproject.toml'), encoding='utf-8') as arquivo:
        texto = arquivo.read()
    assert '\ndisallow_any_explicit = true\n' in texto
    com_any = []
    for pasta, _, arquivos in [
        *os.walk(os.path.join(RAIZ, 'contextia_sync')),
        *os.walk(os.path.join(RAIZ, 'contextia_local')),
    ]:
        for nome in arquivos:
            if nome.endswith('.py'):
                caminho = os.path.join(pasta, nome)
                with open(caminho, encoding='utf-8') as arquivo:
                    if _importa_any(arquivo.read()):
                        com_any.append(os.path.relpath(caminho, RAIZ))
    assert com_any == [os.path.join('contextia_sync', 'tipos.py')]
