"""
A API do Contextia local (FastAPI). O contrato esta em docs/contrato-intake.md
e o documento OpenAPI gerado daqui esta commitado em docs/openapi.json.

Rotas sao `def` (nao `async def`) de proposito: o SQLite e sincrono, e o
FastAPI roda `def` num pool de threads -- o lock do `Banco` serializa as
escritas entre elas.
"""

import dataclasses
import hmac
import json
from typing import Any, Dict, List, Optional

from fastapi import Depends, FastAPI, Query, Request
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field

from contextia_local import webhooks
from contextia_local.armazenamento import Banco, ErroRegra
from contextia_local.compressao import MiddlewareDeCompressao
from contextia_local.falhas import TIPOS, EstadoDeFalhas, MiddlewareDeFalhas

VERSAO_API = '1'
PADRAO_DATASET = r'^[a-z0-9_]{1,120}$'
PADRAO_SLUG = r'^[a-z0-9][a-z0-9_-]{0,62}$'
MAX_BYTES_LOTE = 32 * 1024 * 1024


@dataclasses.dataclass
class Configuracao:
    # None so no openapi_json: o app existe para gerar o documento, sem banco.
    dados: Optional[str]
    admin_token: str
    falhas: bool = False
    max_registros_lote: Optional[int] = None
    max_bytes_lote: int = MAX_BYTES_LOTE
    # False imita o Contextia de producao de hoje, que nao tem `remove`.
    remove: bool = True


# ---------------------------------------------------------------- modelos
class Modelo(BaseModel):
    # Campo desconhecido e erro, nao silencio: um `keys` digitado no lugar de
    # `key` faria o servidor deduplicar por hash sem ninguem perceber.
    model_config = ConfigDict(extra='forbid')


class Sync(Modelo):
    id: str = Field(min_length=1, max_length=200, description='id do ciclo de carga')
    part: int = Field(ge=0, description='numero da parte (lote) dentro do sync')


class Envelope(Modelo):
    dataset: str = Field(pattern=PADRAO_DATASET, description='nome normalizado')
    records: List[Dict[str, Any]] = Field(default_factory=list)
    key: Optional[str] = Field(None, min_length=1, description='campo do upsert')
    description: Optional[str] = None
    fields: Optional[Dict[str, str]] = Field(None, description='coluna -> significado')
    group: Optional[str] = Field(None, pattern=PADRAO_SLUG)
    sync: Optional[Sync] = None
    remove: Optional[List[Any]] = Field(None, description='valores de key a remover')


class Contagens(BaseModel):
    received: int
    inserted: int
    updated: int
    duplicates: int
    removed: int


class PedidoComplete(Modelo):
    dataset: str = Field(pattern=PADRAO_DATASET)
    sync: str = Field(min_length=1, max_length=200)
    max_removal: Optional[float] = Field(None, ge=0, le=1,
                                         description='teto: fracao do dataset')


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


class PedidoFalha(Modelo):
    tipo: str = Field(pattern='^(%s)$' % '|'.join(TIPOS))
    quantidade: int = Field(1, ge=1, le=100000)
    caminho: Optional[str] = None
    retry_after: Optional[float] = Field(None, ge=0)
    segundos: Optional[float] = Field(None, ge=0, le=120)
    quando: Optional[str] = Field(None, pattern='^(antes|depois)$')
    corpo: Optional[str] = Field(None, max_length=100000,
                                 description='corpo_invalido: o texto da resposta 200')


class TaxasDeFalha(Modelo):
    taxas: Dict[str, float]
    caminho: Optional[str] = None
    semente: Optional[int] = None


# ---------------------------------------------------------------- app
def criar_app(config: Configuracao) -> FastAPI:
    banco_aberto = Banco(config.dados) if config.dados else None
    estado_falhas = EstadoDeFalhas() if config.falhas else None
    portador = HTTPBearer(auto_error=False)

    app = FastAPI(
        title='Contextia local',
        version=VERSAO_API,
        description='Servidor local que honra o contrato do intake do Contextia'
                    ' (docs/contrato-intake.md). Para testes, demo e ensaio.')
    # Antes das falhas: a falha injetada (a mais de fora) ve o pedido primeiro.
    app.add_middleware(MiddlewareDeCompressao, max_bytes=config.max_bytes_lote)
    if estado_falhas is not None:
        app.add_middleware(MiddlewareDeFalhas, estado=estado_falhas)

    def banco() -> Banco:
        # Sem `dados` (so o openapi_json) as rotas existem para o documento, nao para servir.
        if banco_aberto is None:
            raise RuntimeError('Contextia local sem banco: criado sem `dados`.')
        return banco_aberto

    @app.exception_handler(ErroRegra)
    def _erro_regra(request: Request, erro: ErroRegra) -> JSONResponse:    # noqa: ARG001
        return JSONResponse(status_code=erro.status,
                            content={'detail': erro.mensagem, 'erro': erro.codigo})

    def projeto_autenticado(credenciais: Optional[HTTPAuthorizationCredentials] =
                            Depends(portador)) -> Dict[str, Any]:
        if credenciais is None:
            raise ErroRegra(401, 'sem_chave', 'falta o cabecalho Authorization: Bearer'
                            ' <chave do projeto> (CONTEXTIA_API_KEY).')
        projeto = banco().projeto_da_chave(credenciais.credentials)
        if projeto is None:
            raise ErroRegra(401, 'chave_invalida', 'chave de projeto desconhecida ou'
                            ' revogada. Emita uma nova (provisionar.py) e atualize o'
                            ' arquivo de chaves.')
        return projeto

    def admin(credenciais: Optional[HTTPAuthorizationCredentials] =
              Depends(portador)) -> bool:
        if credenciais is None:
            raise ErroRegra(401, 'sem_token', 'falta o cabecalho Authorization: Bearer'
                            ' <token de admin> (CONTEXTIA_ADMIN_TOKEN).')
        if not hmac.compare_digest(credenciais.credentials.encode('utf-8'),
                                   config.admin_token.encode('utf-8')):
            raise ErroRegra(403, 'token_invalido', 'o token de admin nao confere com o'
                            ' deste servidor (CONTEXTIA_ADMIN_TOKEN).')
        return True

    def falhas_ligadas() -> EstadoDeFalhas:
        if estado_falhas is None:
            raise ErroRegra(404, 'falhas_desligadas', 'injecao de falhas desligada: suba'
                            ' o servidor com --falhas.')
        return estado_falhas

    def tamanho_do_lote(request: Request) -> None:
        tamanho = request.headers.get('content-length')
        if tamanho and tamanho.isdigit() and int(tamanho) > config.max_bytes_lote:
            raise ErroRegra(413, 'lote_grande', 'lote de %s bytes passa do limite de %d'
                            ' bytes deste servidor (capacidades.max_bytes_per_batch). O'
                            ' cliente divide o lote ao receber 413; um registro que sozinho'
                            ' passa do limite precisa ficar menor na origem.'
                            % (tamanho, config.max_bytes_lote))

    # As rotas nao anotam o retorno de proposito: no FastAPI a anotacao de retorno
    # vira response_model (valida a resposta e muda o docs/openapi.json).

    # ------------------------------------------------------------ publico
    @app.get('/saude', tags=['publico'])
    def saude():
        return {'status': 'ok', 'versao': VERSAO_API}

    @app.get('/api/v1/capacidades', tags=['publico'])
    def capacidades():
        return {'versao': VERSAO_API, 'remove': config.remove, 'sync': True, 'complete': True,
                'max_removal': True, 'webhooks': list(webhooks.EVENTOS),
                'max_records_per_batch': config.max_registros_lote,
                'max_bytes_per_batch': config.max_bytes_lote,
                'decimal': 'string', 'compressao': ['gzip']}

    # ------------------------------------------------------------ intake
    @app.post('/api/v1/intake', response_model=Contagens, tags=['intake'],
              dependencies=[Depends(tamanho_do_lote)])
    def intake(envelope: Envelope, projeto: Dict[str, Any] = Depends(projeto_autenticado)):
        if (config.max_registros_lote is not None
                and len(envelope.records) > config.max_registros_lote):
            raise ErroRegra(413, 'lote_grande',
                            'lote com %d registros passa do limite de %d deste servidor.'
                            ' Divida o lote (o cliente divide sozinho ao receber 413).'
                            % (len(envelope.records), config.max_registros_lote))
        if envelope.remove is not None and not config.remove:
            raise ErroRegra(422, 'remove_nao_suportado',
                            'remove: este servidor nao suporta exclusao pelo envelope'
                            ' (capacidades.remove = false). A exclusao fica para a carga'
                            ' completa (sync + complete).')
        # Montado a mao: model_dump copiaria cada registro, e `null` dentro de
        # um registro e dado (nao pode sumir como some um campo opcional).
        dados = {'dataset': envelope.dataset, 'records': envelope.records,
                 'key': envelope.key, 'description': envelope.description,
                 'fields': envelope.fields, 'group': envelope.group,
                 'sync': envelope.sync.model_dump() if envelope.sync else None,
                 'remove': envelope.remove}
        return banco().receber_lote(projeto['id'], dados)

    @app.post('/api/v1/intake/complete', tags=['intake'])
    def complete(pedido: PedidoComplete, projeto: Dict[str, Any] = Depends(projeto_autenticado)):
        resultado = banco().completar(projeto['id'], pedido.dataset, pedido.sync,
                                      pedido.max_removal)
        webhooks.entregar_em_segundo_plano(
            banco().listar_webhooks(projeto['id']), 'sync.completed', resultado)
        return resultado

    @app.get('/api/v1/projeto', tags=['intake'])
    def quem_sou(projeto: Dict[str, Any] = Depends(projeto_autenticado)):
        return {'project_id': projeto['id'], 'external_id': projeto['external_id'],
                'name': projeto['name']}

    @app.get('/api/v1/datasets', tags=['leitura'])
    def listar_datasets(projeto: Dict[str, Any] = Depends(projeto_autenticado)):
        return {'datasets': banco().listar_datasets(projeto['id'])}

    @app.get('/api/v1/datasets/{dataset}/registros', tags=['leitura'])
    def ler_registros(dataset: str, after: int = Query(0, ge=0),
                      limit: int = Query(1000, ge=1, le=10000),
                      projeto: Dict[str, Any] = Depends(projeto_autenticado)):
        return banco().pagina_de_registros(projeto['id'], dataset, after, limit)

    # ------------------------------------------------------------ admin
    rotas_admin: Dict[str, Any] = {'tags': ['admin'], 'dependencies': [Depends(admin)]}

    @app.post('/api/v1/admin/projetos', **rotas_admin)
    def criar_projeto(pedido: NovoProjeto):
        projeto = banco().criar_projeto(pedido.external_id, pedido.name)
        return JSONResponse(status_code=201 if projeto['criado'] else 200, content=projeto)

    @app.get('/api/v1/admin/projetos', **rotas_admin)
    def buscar_projetos(external_id: Optional[str] = None):
        return {'projetos': banco().buscar_projetos(external_id)}

    @app.post('/api/v1/admin/projetos/{projeto_id}/chaves', status_code=201, **rotas_admin)
    def emitir_chave(projeto_id: int):
        return banco().emitir_chave(projeto_id)

    @app.get('/api/v1/admin/projetos/{projeto_id}/chaves', **rotas_admin)
    def listar_chaves(projeto_id: int):
        return {'chaves': banco().listar_chaves(projeto_id)}

    @app.delete('/api/v1/admin/chaves/{key_id}', **rotas_admin)
    def revogar_chave(key_id: str):
        return banco().revogar_chave(key_id)

    @app.post('/api/v1/admin/grupos', **rotas_admin)
    def criar_grupo(pedido: NovoGrupo):
        grupo = banco().criar_grupo(pedido.slug, pedido.name)
        return JSONResponse(status_code=201 if grupo['criado'] else 200, content=grupo)

    @app.get('/api/v1/admin/grupos', **rotas_admin)
    def listar_grupos():
        return {'grupos': banco().listar_grupos()}

    @app.put('/api/v1/admin/grupos/{slug}/projetos/{projeto_id}', **rotas_admin)
    def incluir_no_grupo(slug: str, projeto_id: int):
        return banco().incluir_no_grupo(slug, projeto_id)

    @app.post('/api/v1/admin/projetos/{projeto_id}/webhooks', status_code=201,
              **rotas_admin)
    def registrar_webhook(projeto_id: int, pedido: NovoWebhook):
        problema = webhooks.problema_na_url(pedido.url)
        if problema:
            raise ErroRegra(422, 'url_recusada', problema)
        desconhecidos = sorted(set(pedido.events) - set(webhooks.EVENTOS))
        if desconhecidos:
            raise ErroRegra(422, 'evento_desconhecido', 'events: %s nao existe(m); os'
                            ' eventos sao %s.' % (desconhecidos, list(webhooks.EVENTOS)))
        return banco().registrar_webhook(projeto_id, pedido.url, pedido.secret, pedido.events)

    @app.get('/api/v1/admin/projetos/{projeto_id}/webhooks', **rotas_admin)
    def listar_webhooks(projeto_id: int):
        banco().projeto(projeto_id)
        return {'webhooks': [{k: v for k, v in w.items() if not k.startswith('_')}
                             for w in banco().listar_webhooks(projeto_id)]}

    @app.post('/api/v1/admin/webhooks/{webhook_id}/teste', **rotas_admin)
    def testar_webhook(webhook_id: str):
        encontrados = banco().listar_webhooks(webhook_id=webhook_id)
        if not encontrados:
            raise ErroRegra(404, 'webhook_inexistente', 'webhook %s nao existe.' % webhook_id)
        return webhooks.entregar(encontrados[0], 'teste', {'mensagem': 'entrega de teste'})

    # ------------------------------------------------------------ falhas
    @app.post('/api/v1/admin/falhas', tags=['falhas'], dependencies=[Depends(admin)])
    def injetar(pedido: PedidoFalha):
        opcoes = pedido.model_dump(exclude_none=True, exclude={'tipo', 'quantidade',
                                                                 'caminho'})
        falhas = falhas_ligadas()
        falhas.injetar(pedido.tipo, pedido.quantidade, pedido.caminho, **opcoes)
        return falhas.resumo()

    @app.put('/api/v1/admin/falhas/taxas', tags=['falhas'], dependencies=[Depends(admin)])
    def definir_taxas(pedido: TaxasDeFalha):
        invalidos = sorted(set(pedido.taxas) - set(TIPOS))
        if invalidos or any(not 0 <= v <= 1 for v in pedido.taxas.values()):
            raise ErroRegra(422, 'taxa_invalida', 'taxas: tipos validos sao %s, cada um'
                            ' com fracao entre 0 e 1 (recebido %s).'
                            % (list(TIPOS), json.dumps(pedido.taxas)))
        falhas = falhas_ligadas()
        falhas.definir_taxas(pedido.taxas, pedido.caminho, pedido.semente)
        return falhas.resumo()

    @app.get('/api/v1/admin/falhas', tags=['falhas'], dependencies=[Depends(admin)])
    def consultar_falhas():
        return falhas_ligadas().resumo()

    @app.delete('/api/v1/admin/falhas', tags=['falhas'], dependencies=[Depends(admin)])
    def limpar_falhas():
        falhas = falhas_ligadas()
        falhas.limpar()
        return falhas.resumo()

    app.state.banco = banco_aberto
    return app


def openapi_json() -> str:
    """O documento OpenAPI como texto estavel (o que esta em docs/openapi.json)."""
    app = criar_app(Configuracao(dados=None, admin_token='x'))
    return json.dumps(app.openapi(), indent=2, sort_keys=True, ensure_ascii=False) + '\n'

