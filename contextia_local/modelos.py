"""
Os corpos que a API do Contextia local recebe e responde (pydantic): o
envelope do intake, o `complete`, o admin e a injeção de falhas. Os nomes das
classes são os dos schemas em docs/openapi.json.
"""

from typing import Annotated, Dict, List, Optional

from fastapi import Path
from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema
from pydantic_core import ErrorDetails

from contextia_local.configuracao import MAX_INTEIRO, PADRAO_DATASET, PADRAO_SLUG
from contextia_local.falhas import TIPOS
from contextia_sync.tipos import JsonDecodificado

IdDoProjeto = Annotated[
    int, Path(ge=1, le=MAX_INTEIRO, description='id do projeto (inteiro de 64 bits)')
]


class Modelo(BaseModel):
    # Campo desconhecido e erro, nao silencio: um `keys` digitado no lugar de
    # `key` faria o servidor deduplicar por hash sem ninguem perceber.
    model_config = ConfigDict(extra='forbid')


# ---------------------------------------------------------------- intake
class Sync(Modelo):
    id: str = Field(min_length=1, max_length=200, description='id do ciclo de carga')
    part: int = Field(ge=0, le=MAX_INTEIRO, description='número da parte (lote) dentro do sync')


# Os registros validados uma vez pelo lote, não um a um: `List[Dict[str, Any]]`
# copiaria cada registro (e cada valor) só para dizer que é um objeto. O tipo de
# cada registro é conferido na rota (`rotas_intake.registros_sao_objetos`), e o
# documento OpenAPI segue dizendo o que o contrato diz (uma lista de objetos).
_ESQUEMA_REGISTROS = {
    'items': {'additionalProperties': True, 'type': 'object'},
    'title': 'Records',
    'type': 'array',
}


class Envelope(Modelo):
    dataset: str = Field(pattern=PADRAO_DATASET, description='nome normalizado')
    records: Annotated[List[JsonDecodificado], WithJsonSchema(_ESQUEMA_REGISTROS)] = Field(
        default_factory=list
    )
    key: Optional[str] = Field(None, min_length=1, description='campo do upsert')
    description: Optional[str] = None
    fields: Optional[Dict[str, str]] = Field(None, description='coluna -> significado')
    group: Optional[str] = Field(None, pattern=PADRAO_SLUG)
    sync: Optional[Sync] = None
    remove: Optional[List[JsonDecodificado]] = Field(None, description='valores de key a remover')


class EnvelopeEstrito(Envelope):
    """O envelope com cada registro validado: só para dizer o erro (`erros_do_envelope`)."""

    records: List[Dict[str, JsonDecodificado]] = Field(default_factory=list)


def erros_do_envelope(corpo: Dict[str, JsonDecodificado]) -> List[ErrorDetails]:
    """Os erros do envelope com cada registro validado, no formato do FastAPI."""
    try:
        EnvelopeEstrito.model_validate(corpo)
    except ValidationError as erro:
        return [{**e, 'loc': ('body',) + tuple(e['loc'])} for e in erro.errors(include_url=False)]
    return []


class Contagens(BaseModel):
    received: int
    inserted: int
    updated: int
    duplicates: int
    removed: int


class PedidoComplete(Modelo):
    dataset: str = Field(pattern=PADRAO_DATASET)
    sync: str = Field(min_length=1, max_length=200)
    max_removal: Optional[float] = Field(None, ge=0, le=1, description='teto: fração do dataset')


# ---------------------------------------------------------------- admin
class NovoProjeto(Modelo):
    external_id: str = Field(min_length=1, max_length=200)
    name: Optional[str] = Field(None, max_length=300)


class NovoGrupo(Modelo):
    slug: str = Field(pattern=PADRAO_SLUG)
    name: Optional[str] = Field(None, max_length=300)


class NovoWebhook(Modelo):
    url: str = Field(min_length=1, max_length=2000)
    secret: Optional[str] = Field(None, min_length=16, max_length=200)
    events: List[str] = Field(default_factory=lambda: ['sync.completed'])


# ---------------------------------------------------------------- falhas
class PedidoFalha(Modelo):
    tipo: str = Field(pattern='^(%s)$' % '|'.join(TIPOS))
    quantidade: int = Field(1, ge=1, le=100000)
    caminho: Optional[str] = None
    retry_after: Optional[float] = Field(None, ge=0, le=3600)
    segundos: Optional[float] = Field(None, ge=0, le=120)
    quando: Optional[str] = Field(None, pattern='^(antes|depois)$')
    corpo: Optional[str] = Field(
        None, max_length=100000, description='corpo_invalido: o texto da resposta 200'
    )


class TaxasDeFalha(Modelo):
    taxas: Dict[str, float]
    caminho: Optional[str] = None
    semente: Optional[int] = None
