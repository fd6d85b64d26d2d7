"""Os tipos que atravessam as salas, num lugar só.

O único `Any` do pacote mora aqui (o mypy recusa `Any` escrito em qualquer outro
módulo: `disallow_any_explicit` no pyproject.toml), e só para o que um driver
devolve sem dizer o tipo: o valor de uma coluna, a conexão e o cursor do DB-API,
o resultado do SQLAlchemy e o JSON que uma biblioteca decodifica. Todo o resto
tem tipo de verdade: o JSON que montamos (`Json`), o mapeamento (`Mapa` e seus
pedaços, espelho de mapeamento.schema.json, que o valida antes de qualquer uso).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypedDict

if TYPE_CHECKING:
    # Só para o mypy: o autoteste importa este módulo sem o SQLAlchemy (python3 -S).
    from sqlalchemy.engine import CursorResult, Row

# --- o que o driver devolve ----------------------------------------------------

# O valor de uma coluna como o driver o devolve: int, Decimal, str, bytes,
# datetime, memoryview, ... conforme o banco, o dialeto e o tipo da coluna.
# É também o de uma marca d'água, de um escopo e de uma key lidos da origem.
ValorDoBanco: TypeAlias = Any

# Uma linha lida da origem, coluna -> valor (na ordem do SELECT).
Linha: TypeAlias = dict[str, ValorDoBanco]

# Uma linha posicional (a tupla do cursor, sem os nomes).
Tupla: TypeAlias = tuple[ValorDoBanco, ...]

# A conexão e o cursor crus do DB-API (pymysql, psycopg, oracledb, pyodbc,
# sqlite3): cada driver com a sua classe, sem um tipo comum.
ConexaoDoDriver: TypeAlias = Any
CursorDoDriver: TypeAlias = Any

# O resultado de um execute do SQLAlchemy e uma linha dele.
Resultado: TypeAlias = 'CursorResult[Any]'
LinhaDoResultado: TypeAlias = 'Row[Any]'

# Um evento do log de replicação como a biblioteca o entrega (pymysqlreplication,
# sem tipos): a classe de cada evento diz os atributos, e ela não os declara.
EventoDoLog: TypeAlias = Any

# O que json.loads, orjson.loads e requests.Response.json() devolvem antes de
# conferido: quem o recebe confere a forma (isinstance ou o jsonschema) antes
# de usar, ou o trata como `Json`.
JsonDecodificado: TypeAlias = Any

# --- o JSON que montamos -------------------------------------------------------

Json: TypeAlias = 'dict[str, Json] | list[Json] | str | int | float | bool | None'
ObjetoJson: TypeAlias = dict[str, Json]

# --- o mapeamento (mapeamento.schema.json) -------------------------------------

ValorDeFiltro: TypeAlias = str | int | float | bool

Filtro = TypedDict(
    'Filtro',
    {
        'column': str,
        'equals': ValorDeFiltro,
        'not_equals': ValorDeFiltro,
        'in': list[ValorDeFiltro],
        'not_in': list[ValorDeFiltro],
        'not_empty': Literal[True],
        '$comment': str,
    },
    total=False,
)


# Uma tabela base dada como objeto: a tabela, a coluna dela e a do dataset.
TabelaBaseDoMapa = TypedDict(
    'TabelaBaseDoMapa',
    {'table': str, 'column': str, 'dataset_column': str, '$comment': str},
    total=False,
)


# Um item de `datasets` (o schema exige dataset, source_object e columns).
DatasetDoMapa = TypedDict(
    'DatasetDoMapa',
    {
        'dataset': str,
        'source_object': str,
        'columns': list[str],
        'key': str | None,
        'watch_column': str | None,
        'base_tables': list[str | TabelaBaseDoMapa],
        'scope_column': str | None,
        'fields': dict[str, str],
        'group': str | None,
        'chunk': int,
        'deleted_when': Filtro | None,
        'description': str,
        '$comment': str,
    },
    total=False,
)


# O bloco `defaults`: o que vale para o dataset que não diz.
PadroesDoMapa = TypedDict(
    'PadroesDoMapa',
    {
        'scope_column': str | None,
        'key': str | None,
        'watch_column': str | None,
        'chunk': int,
        'group': str | None,
        'deleted_when': Filtro | None,
        '$comment': str,
    },
    total=False,
)


# O bloco `projects`: de onde vêm as empresas (um projeto cada).
CadastroDoMapa = TypedDict(
    'CadastroDoMapa',
    {
        'source_object': str,
        'scope_column': str,
        'name_column': str,
        'group_column': str,
        'filters': list[Filtro],
        '$comment': str,
    },
    total=False,
)


# O bloco `webhook` que o provisionar cadastra em cada projeto.
WebhookDoMapa = TypedDict(
    'WebhookDoMapa',
    {'url': str, 'secret_env': str, 'events': list[str], '$comment': str},
    total=False,
)


# O bloco `source`.
OrigemDoMapa = TypedDict(
    'OrigemDoMapa', {'excluded_scopes': list[str | int], '$comment': str}, total=False
)


# O bloco `listener`.
OuvinteDoMapa = TypedDict('OuvinteDoMapa', {'strategy': str, '$comment': str}, total=False)


Mapa = TypedDict(
    'Mapa',
    {
        '$schema': str,
        '$comment': str,
        'client': str,
        'source': OrigemDoMapa,
        'listener': OuvinteDoMapa,
        'defaults': PadroesDoMapa,
        'projects': CadastroDoMapa,
        'webhook': WebhookDoMapa,
        'datasets': list[DatasetDoMapa],
    },
    total=False,
)
