"""
A API do Contextia local (FastAPI). O contrato está em docs/contrato-intake.md
e o documento OpenAPI gerado daqui está commitado em docs/openapi.json.

Rotas são `def` (não `async def`) de propósito: o SQLite e sincrono, e o
FastAPI roda `def` num pool de threads -- o lock do `Banco` serializa as
escritas entre elas. A exceção é o intake: o lote é preparado e gravado no
próprio laço de eventos quando a trava de escrita está livre (o caso de quase
todo lote); quando outra escrita a tem (outra thread, ou outro processo do
mesmo servidor com `--processos`), só a espera vai a uma thread, e o lote é
gravado no laço (`_gravar_no_laco`). Ir e voltar de
uma thread custava mais que gravar um lote de 500, e as duas threads disputando
o GIL a cada linha gravada (o sqlite3 solta o GIL a cada passo) custavam o dobro.
Uma thread escritora dedicada (um executor de uma thread, o lote gravado lá
enquanto o laço prepara o seguinte) também perdeu, medida na issue 18: de 0,67
a 0,90 do laço sozinho com 4 lotes em voo e 40 a 80% mais CPU por registro, com o
intervalo de troca do GIL de 5, 1, 0,5, 0,2 ou 0,1 ms e mesmo só com o INSERT e
o COMMIT na thread.
"""

import dataclasses
import hmac
import json
from collections.abc import Callable
from typing import Annotated, Any, Dict, List, Optional

import orjson
from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool
from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema

from contextia_local import webhooks
from contextia_local.armazenamento import Banco, BancoOcupado, ErroRegra, Lote
from contextia_local.compressao import MiddlewareDeCompressao
from contextia_local.corpo import RegraDoCorpo, classe_de_rota
from contextia_local.falhas import TIPOS, EstadoDeFalhas, MiddlewareDeFalhas

VERSAO_API = '1'
PADRAO_DATASET = r'^[a-z0-9_]{1,120}$'
PADRAO_SLUG = r'^[a-z0-9][a-z0-9_-]{0,62}$'
MAX_BYTES_LOTE = 32 * 1024 * 1024
# O maior `chunk` que o schema do mapeamento aceita (tests/test_servidor_seguranca.py
# confere): um mapeamento valido nunca esbarra no limite padrao do servidor.
MAX_REGISTROS_LOTE = 10000
# As outras rotas com corpo (complete, admin) recebem JSON de poucos campos.
MAX_BYTES_PEDIDO = 1024 * 1024
# O SQLite guarda INTEGER em 64 bits: id ou cursor acima disso e 422, nao OverflowError.
MAX_INTEIRO = 2 ** 63 - 1
IdDoProjeto = Annotated[int, Path(ge=1, le=MAX_INTEIRO,
                                  description='id do projeto (inteiro de 64 bits)')]


@dataclasses.dataclass
class Configuracao:
    # None so no openapi_json: o app existe para gerar o documento, sem banco.
    dados: Optional[str]
    admin_token: str
    falhas: bool = False
    max_registros_lote: int = MAX_REGISTROS_LOTE
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
    part: int = Field(ge=0, le=MAX_INTEIRO,
                      description='número da parte (lote) dentro do sync')


# Os registros validados uma vez pelo lote, não um a um: `List[Dict[str, Any]]`
# copiaria cada registro (e cada valor) só para dizer que é um objeto. O tipo de
# cada registro é conferido na rota (`_registros_sao_objetos`), e o documento
# OpenAPI segue dizendo o que o contrato diz (uma lista de objetos).
_ESQUEMA_REGISTROS = {'items': {'additionalProperties': True, 'type': 'object'},
                      'title': 'Records', 'type': 'array'}


class Envelope(Modelo):
    dataset: str = Field(pattern=PADRAO_DATASET, description='nome normalizado')
    records: Annotated[List[Any], WithJsonSchema(_ESQUEMA_REGISTROS)] = Field(
        default_factory=list)
    key: Optional[str] = Field(None, min_length=1, description='campo do upsert')
    description: Optional[str] = None
    fields: Optional[Dict[str, str]] = Field(None, description='coluna -> significado')
    group: Optional[str] = Field(None, pattern=PADRAO_SLUG)
    sync: Optional[Sync] = None
    remove: Optional[List[Any]] = Field(None, description='valores de key a remover')


class EnvelopeEstrito(Envelope):
    """O envelope com cada registro validado: só para dizer o erro (`_erros_do_envelope`)."""

    records: List[Dict[str, Any]] = Field(default_factory=list)


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
                                         description='teto: fração do dataset')


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
    retry_after: Optional[float] = Field(None, ge=0, le=3600)
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

    @app.exception_handler(RequestValidationError)
    async def _erro_validacao(request: Request, erro: RequestValidationError) -> Any:
        # O envelope recusado do intake diz os erros de todos os campos, os dos
        # registros inclusive, como a validação registro a registro dizia.
        if request.url.path == '/api/v1/intake' and isinstance(erro.body, dict):
            return JSONResponse(status_code=422, content={
                'detail': jsonable_encoder(_erros_do_envelope(erro.body))})
        return await request_validation_exception_handler(request, erro)

    @app.exception_handler(ErroRegra)
    def _erro_regra(request: Request, erro: ErroRegra) -> JSONResponse:    # noqa: ARG001
        return JSONResponse(status_code=erro.status,
                            content={'detail': erro.mensagem, 'erro': erro.codigo},
                            headers={'Connection': 'close'} if erro.fechar_conexao else None)

    # As duas autenticações são `async`: rodam no laço de eventos, sem a ida e
    # volta a uma thread por pedido (a chave é lida pela conexão de leitura do
    # Banco, que não espera escrita nenhuma; o token de admin não lê o banco).
    async def projeto_autenticado(credenciais: Optional[HTTPAuthorizationCredentials] =
                                  Depends(portador)) -> Dict[str, Any]:
        if credenciais is None:
            raise ErroRegra(401, 'sem_chave', 'falta o cabeçalho Authorization: Bearer'
                            ' <chave do projeto> (CONTEXTIA_API_KEY).')
        projeto = banco().projeto_da_chave(credenciais.credentials)
        if projeto is None:
            raise ErroRegra(401, 'chave_invalida', 'chave de projeto desconhecida ou'
                            ' revogada. Emita uma nova (provisionar.py) e atualize o'
                            ' arquivo de chaves.')
        return projeto

    async def admin(credenciais: Optional[HTTPAuthorizationCredentials] =
                    Depends(portador)) -> bool:
        if credenciais is None:
            raise ErroRegra(401, 'sem_token', 'falta o cabeçalho Authorization: Bearer'
                            ' <token de admin> (CONTEXTIA_ADMIN_TOKEN).')
        if not hmac.compare_digest(credenciais.credentials.encode('utf-8'),
                                   config.admin_token.encode('utf-8')):
            raise ErroRegra(403, 'token_invalido', 'o token de admin não confere com o'
                            ' deste servidor (CONTEXTIA_ADMIN_TOKEN).')
        return True

    def autenticar_antes_do_corpo(verificar: Callable[..., Any]) -> Callable[..., Any]:
        async def autenticar(request: Request) -> None:
            await verificar(await portador(request))
        return autenticar

    def regra_da_rota(rota: APIRoute) -> RegraDoCorpo:
        # A autenticacao que a rota ja declara nas dependencias, rodada antes do
        # corpo. A dependencia roda de novo depois dele: a chave revogada durante
        # o envio tambem e recusada.
        chamadas = _chamadas(rota.dependant)
        autenticar = None
        if admin in chamadas:
            autenticar = autenticar_antes_do_corpo(admin)
        elif projeto_autenticado in chamadas:
            autenticar = autenticar_antes_do_corpo(projeto_autenticado)
        if rota.path == '/api/v1/intake':
            return RegraDoCorpo(autenticar, config.max_bytes_lote, config.max_registros_lote)
        return RegraDoCorpo(autenticar, MAX_BYTES_PEDIDO)

    # Antes de qualquer rota: e a classe que autentica e limita o corpo antes de
    # o FastAPI le-lo (contextia_local/corpo.py).
    app.router.route_class = classe_de_rota(regra_da_rota)

    def falhas_ligadas() -> EstadoDeFalhas:
        if estado_falhas is None:
            raise ErroRegra(404, 'falhas_desligadas', 'injeção de falhas desligada: suba'
                            ' o servidor com --falhas.')
        return estado_falhas

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
    # Os limites de bytes e de registros do lote sao aplicados antes daqui, na
    # leitura do corpo (contextia_local/corpo.py).
    @app.post('/api/v1/intake', response_model=Contagens, tags=['intake'])
    async def intake(envelope: Envelope, request: Request,
                     projeto: Dict[str, Any] = Depends(projeto_autenticado)):
        if not _registros_sao_objetos(envelope.records):
            # Só os registros podem estar errados aqui: o resto o FastAPI já validou.
            raise RequestValidationError(_erros_do_envelope(envelope.model_dump()))
        if envelope.remove is not None and not config.remove:
            raise ErroRegra(422, 'remove_nao_suportado',
                            'remove: este servidor não suporta exclusão pelo envelope'
                            ' (capacidades.remove = false). A exclusão fica para a carga'
                            ' completa (sync + complete).')
        # Montado a mao: model_dump copiaria cada registro, e `null` dentro de
        # um registro e dado (nao pode sumir como some um campo opcional).
        dados = {'dataset': envelope.dataset, 'records': envelope.records,
                 'key': envelope.key, 'description': envelope.description,
                 'fields': envelope.fields, 'group': envelope.group,
                 'sync': envelope.sync.model_dump() if envelope.sync else None,
                 'remove': envelope.remove}
        # Os registros simples já foram conferidos na leitura do corpo (corpo.py).
        lote = Banco.preparar_lote(dados, getattr(request, 'registros_simples', False))
        contagens = await _gravar_no_laco(banco(), projeto['id'], lote)
        # As contagens já são as de `Contagens` (cinco inteiros, nesta ordem): o
        # JSON de sempre, sem validá-las de novo pelo modelo a cada lote.
        return Response(orjson.dumps(contagens), media_type='application/json')

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
    def ler_registros(dataset: str, after: int = Query(0, ge=0, le=MAX_INTEIRO),
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
    def emitir_chave(projeto_id: IdDoProjeto):
        return banco().emitir_chave(projeto_id)

    @app.get('/api/v1/admin/projetos/{projeto_id}/chaves', **rotas_admin)
    def listar_chaves(projeto_id: IdDoProjeto):
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
    def incluir_no_grupo(slug: str, projeto_id: IdDoProjeto):
        return banco().incluir_no_grupo(slug, projeto_id)

    @app.post('/api/v1/admin/projetos/{projeto_id}/webhooks', status_code=201,
              **rotas_admin)
    def registrar_webhook(projeto_id: IdDoProjeto, pedido: NovoWebhook):
        problema = webhooks.problema_na_url(pedido.url)
        if problema:
            raise ErroRegra(422, 'url_recusada', problema)
        desconhecidos = sorted(set(pedido.events) - set(webhooks.EVENTOS))
        if desconhecidos:
            raise ErroRegra(422, 'evento_desconhecido', 'events: %s não existe(m); os'
                            ' eventos são %s.' % (desconhecidos, list(webhooks.EVENTOS)))
        return banco().registrar_webhook(projeto_id, pedido.url, pedido.secret, pedido.events)

    @app.get('/api/v1/admin/projetos/{projeto_id}/webhooks', **rotas_admin)
    def listar_webhooks(projeto_id: IdDoProjeto):
        banco().projeto(projeto_id)
        return {'webhooks': [{k: v for k, v in w.items() if not k.startswith('_')}
                             for w in banco().listar_webhooks(projeto_id)]}

    @app.post('/api/v1/admin/webhooks/{webhook_id}/teste', **rotas_admin)
    def testar_webhook(webhook_id: str):
        encontrados = banco().listar_webhooks(webhook_id=webhook_id)
        if not encontrados:
            raise ErroRegra(404, 'webhook_inexistente', 'webhook %s não existe.' % webhook_id)
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
            raise ErroRegra(422, 'taxa_invalida', 'taxas: tipos válidos são %s, cada um'
                            ' com fração entre 0 e 1 (recebido %s).'
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


# Quantas vezes o lote tenta a trava livre no laço (esperando a vez numa thread
# entre uma e outra) antes de gravar na thread: com `--processos`, o outro
# processo pode tomá-la entre a espera e a tentativa; a última vai sempre.
TENTATIVAS_NO_LACO = 3


async def _gravar_no_laco(banco: Banco, projeto_id: int, lote: Lote) -> Dict[str, int]:
    """
    Grava o lote no laço de eventos quando a trava de escrita está livre (quase
    todo lote); ocupada (outra thread, outro processo de `--processos`), espera
    a vez numa thread que só dorme no kernel e tenta de novo no laço.
    """
    for _ in range(TENTATIVAS_NO_LACO):
        try:
            return banco.gravar_lote(projeto_id, lote, esperar=False)
        except BancoOcupado:
            await run_in_threadpool(banco.esperar_a_vez)
    return await run_in_threadpool(banco.gravar_lote, projeto_id, lote)


def _registros_sao_objetos(registros: List[Any]) -> bool:
    # Os tipos de todos num laço em C; {dict} ou nenhum (o lote vazio).
    return set(map(type, registros)) <= _SO_OBJETOS


_SO_OBJETOS = frozenset({dict})


def _erros_do_envelope(corpo: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Os erros do envelope com cada registro validado, no formato do FastAPI."""
    try:
        EnvelopeEstrito.model_validate(corpo)
    except ValidationError as erro:
        return [{**e, 'loc': ('body',) + tuple(e['loc'])} for e in erro.errors(include_url=False)]
    return []


def _chamadas(dependant: Dependant) -> List[Any]:
    """Toda função que a árvore de dependências da rota chama."""
    chamadas = [dependant.call]
    for filha in dependant.dependencies:
        chamadas += _chamadas(filha)
    return chamadas


def openapi_json() -> str:
    """O documento OpenAPI como texto estável (o que está em docs/openapi.json)."""
    app = criar_app(Configuracao(dados=None, admin_token='x'))
    return json.dumps(app.openapi(), indent=2, sort_keys=True, ensure_ascii=False) + '\n'

