"""Admin: as chaves de projeto (emitidas, listadas, revogadas)."""

from contextia_local.armazenamento import Chave, ChaveEmitida
from contextia_local.dependencias import Servidor, novo_roteador
from contextia_local.modelos import IdDoProjeto
from contextia_sync.tipos import ObjetoJson

roteador = novo_roteador('admin', so_admin=True)


@roteador.post('/api/v1/admin/projetos/{projeto_id}/chaves', status_code=201, response_model=None)
def emitir_chave(projeto_id: IdDoProjeto, servidor: Servidor) -> ChaveEmitida:
    return servidor.banco().emitir_chave(projeto_id)


@roteador.get('/api/v1/admin/projetos/{projeto_id}/chaves', response_model=None)
def listar_chaves(projeto_id: IdDoProjeto, servidor: Servidor) -> dict[str, list[Chave]]:
    return {'chaves': servidor.banco().listar_chaves(projeto_id)}


@roteador.delete('/api/v1/admin/chaves/{key_id}', response_model=None)
def revogar_chave(key_id: str, servidor: Servidor) -> ObjetoJson:
    return servidor.banco().revogar_chave(key_id)
