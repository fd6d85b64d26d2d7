"""Admin: os grupos de projetos (por slug) e quem está em cada um."""

from fastapi.responses import JSONResponse

from contextia_local.armazenamento import Grupo
from contextia_local.dependencias import Servidor, novo_roteador
from contextia_local.modelos import IdDoProjeto, NovoGrupo
from contextia_sync.tipos import ObjetoJson

roteador = novo_roteador('admin', so_admin=True)


@roteador.post('/api/v1/admin/grupos', response_model=None)
def criar_grupo(pedido: NovoGrupo, servidor: Servidor) -> JSONResponse:
    grupo = servidor.banco().criar_grupo(pedido.slug, pedido.name)
    return JSONResponse(status_code=201 if grupo['criado'] else 200, content=grupo)


@roteador.get('/api/v1/admin/grupos', response_model=None)
def listar_grupos(servidor: Servidor) -> dict[str, list[Grupo]]:
    return {'grupos': servidor.banco().listar_grupos()}


@roteador.put('/api/v1/admin/grupos/{slug}/projetos/{projeto_id}', response_model=None)
def incluir_no_grupo(slug: str, projeto_id: IdDoProjeto, servidor: Servidor) -> ObjetoJson:
    return servidor.banco().incluir_no_grupo(slug, projeto_id)
