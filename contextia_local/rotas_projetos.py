"""Admin: os projetos (um por empresa, achados pelo `external_id`)."""

from typing import Optional

from fastapi.responses import JSONResponse

from contextia_local.armazenamento import Projeto
from contextia_local.dependencias import Servidor, novo_roteador
from contextia_local.modelos import NovoProjeto

roteador = novo_roteador('admin', so_admin=True)


@roteador.post('/api/v1/admin/projetos', response_model=None)
def criar_projeto(pedido: NovoProjeto, servidor: Servidor) -> JSONResponse:
    projeto = servidor.banco().criar_projeto(pedido.external_id, pedido.name)
    return JSONResponse(status_code=201 if projeto['criado'] else 200, content=projeto)


@roteador.get('/api/v1/admin/projetos', response_model=None)
def buscar_projetos(
    servidor: Servidor, external_id: Optional[str] = None
) -> dict[str, list[Projeto]]:
    return {'projetos': servidor.banco().buscar_projetos(external_id)}
