"""
A API do Contextia local (FastAPI). O contrato está em docs/contrato-intake.md
e o documento OpenAPI gerado daqui está commitado em docs/openapi.json.

`criar_app` só monta: o estado do servidor (`dependencias.EstadoDoServidor`,
em `app.state.servidor`), os middlewares, os tratadores de erro e um roteador
por recurso, cada um no seu módulo `rotas_*.py`. Para achar uma rota, procure
o caminho dela num `rotas_*.py`; o que toda rota recebe (o banco, a chave, o
token de admin) está em dependencias.py, e os corpos em modelos.py.
"""

import json

from fastapi import APIRouter, FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from contextia_local import (
    rotas_chaves,
    rotas_falhas,
    rotas_grupos,
    rotas_intake,
    rotas_leitura,
    rotas_projetos,
    rotas_publicas,
    rotas_webhooks,
)
from contextia_local.armazenamento import ErroRegra
from contextia_local.compressao import MiddlewareDeCompressao
from contextia_local.configuracao import CAMINHO_INTAKE, VERSAO_API, Configuracao
from contextia_local.dependencias import EstadoDoServidor
from contextia_local.falhas import MiddlewareDeFalhas
from contextia_local.modelos import erros_do_envelope

ROTEADORES: tuple[APIRouter, ...] = (
    rotas_publicas.roteador,  # /saude, /api/v1/capacidades
    rotas_intake.roteador,  # o lote, o complete, o quem_sou
    rotas_leitura.roteador,  # /api/v1/datasets...
    rotas_projetos.roteador,  # admin
    rotas_chaves.roteador,
    rotas_grupos.roteador,
    rotas_webhooks.roteador,
    rotas_falhas.roteador,  # admin, só com --falhas
)
"""Os recursos da API, na ordem em que o app os casa com o caminho."""


def criar_app(config: Configuracao) -> FastAPI:
    servidor = EstadoDoServidor.da_configuracao(config)
    app = FastAPI(
        title='Contextia local',
        version=VERSAO_API,
        description='Servidor local que honra o contrato do intake do Contextia'
        ' (docs/contrato-intake.md). Para testes, demo e ensaio.',
    )
    app.state.servidor = servidor
    # Antes das falhas: a falha injetada (a mais de fora) ve o pedido primeiro.
    app.add_middleware(MiddlewareDeCompressao, max_bytes=config.max_bytes_lote)
    if servidor.falhas_injetaveis is not None:
        app.add_middleware(MiddlewareDeFalhas, estado=servidor.falhas_injetaveis)
    app.exception_handler(RequestValidationError)(_erro_validacao)
    app.exception_handler(ErroRegra)(_erro_regra)
    for roteador in ROTEADORES:
        app.include_router(roteador)
    return app


async def _erro_validacao(request: Request, erro: RequestValidationError) -> Response:
    # O envelope recusado do intake diz os erros de todos os campos, os dos
    # registros inclusive, como a validação registro a registro dizia.
    if request.url.path == CAMINHO_INTAKE and isinstance(erro.body, dict):
        return JSONResponse(
            status_code=422, content={'detail': jsonable_encoder(erros_do_envelope(erro.body))}
        )
    return await request_validation_exception_handler(request, erro)


def _erro_regra(request: Request, erro: ErroRegra) -> JSONResponse:  # noqa: ARG001
    return JSONResponse(
        status_code=erro.status,
        content={'detail': erro.mensagem, 'erro': erro.codigo},
        headers={'Connection': 'close'} if erro.fechar_conexao else None,
    )


def openapi_json() -> str:
    """O documento OpenAPI como texto estável (o que está em docs/openapi.json)."""
    app = criar_app(Configuracao(dados=None, admin_token='x'))
    return json.dumps(app.openapi(), indent=2, sort_keys=True, ensure_ascii=False) + '\n'
