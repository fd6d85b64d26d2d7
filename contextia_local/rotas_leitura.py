"""A leitura de volta do que o projeto da chave gravou: os datasets e os registros."""

from fastapi import Query

from contextia_local.configuracao import MAX_INTEIRO
from contextia_local.dependencias import ProjetoAutenticado, Servidor, novo_roteador
from contextia_sync.tipos import ObjetoJson

roteador = novo_roteador('leitura')


@roteador.get('/api/v1/datasets', response_model=None)
def listar_datasets(projeto: ProjetoAutenticado, servidor: Servidor) -> dict[str, list[ObjetoJson]]:
    return {'datasets': servidor.banco().listar_datasets(projeto['id'])}


@roteador.get('/api/v1/datasets/{dataset}/registros', response_model=None)
def ler_registros(
    dataset: str,
    projeto: ProjetoAutenticado,
    servidor: Servidor,
    after: int = Query(0, ge=0, le=MAX_INTEIRO),
    limit: int = Query(1000, ge=1, le=10000),
) -> ObjetoJson:
    return servidor.banco().pagina_de_registros(projeto['id'], dataset, after, limit)
