"""
As rotas do projeto autenticado pela chave: o lote do intake, o `complete` da
carga e o `quem_sou` (`GET /api/v1/projeto`).

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

from typing import cast

import orjson
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from contextia_local import webhooks
from contextia_local.armazenamento import (
    Banco,
    BancoOcupado,
    EnvelopeDoLote,
    ErroRegra,
    Lote,
    SyncDoLote,
)
from contextia_local.configuracao import CAMINHO_INTAKE
from contextia_local.dependencias import ProjetoAutenticado, Servidor, novo_roteador
from contextia_local.modelos import Contagens, Envelope, PedidoComplete, erros_do_envelope
from contextia_sync.tipos import JsonDecodificado, ObjetoJson

roteador = novo_roteador('intake')


# Os limites de bytes e de registros do lote sao aplicados antes daqui, na
# leitura do corpo (contextia_local/corpo.py).
@roteador.post(CAMINHO_INTAKE, response_model=Contagens)
async def intake(
    envelope: Envelope, request: Request, projeto: ProjetoAutenticado, servidor: Servidor
) -> Response:
    if not registros_sao_objetos(envelope.records):
        # Só os registros podem estar errados aqui: o resto o FastAPI já validou.
        raise RequestValidationError(erros_do_envelope(envelope.model_dump()))
    if envelope.remove is not None and not servidor.config.remove:
        raise ErroRegra(
            422,
            'remove_nao_suportado',
            'remove: este servidor não suporta exclusão pelo envelope'
            ' (capacidades.remove = false). A exclusão fica para a carga'
            ' completa (sync + complete).',
        )
    # Montado a mao: model_dump copiaria cada registro, e `null` dentro de
    # um registro e dado (nao pode sumir como some um campo opcional).
    dados: EnvelopeDoLote = {
        'dataset': envelope.dataset,
        'records': envelope.records,
        'key': envelope.key,
        'description': envelope.description,
        'fields': envelope.fields,
        'group': envelope.group,
        'sync': cast(SyncDoLote, envelope.sync.model_dump()) if envelope.sync else None,
        'remove': envelope.remove,
    }
    # Os registros simples já foram conferidos na leitura do corpo (corpo.py).
    lote = Banco.preparar_lote(dados, getattr(request, 'registros_simples', False))
    contagens = await _gravar_no_laco(servidor.banco(), projeto['id'], lote)
    # As contagens já são as de `Contagens` (cinco inteiros, nesta ordem): o
    # JSON de sempre, sem validá-las de novo pelo modelo a cada lote.
    return Response(orjson.dumps(contagens), media_type='application/json')


@roteador.post('/api/v1/intake/complete', response_model=None)
def complete(pedido: PedidoComplete, projeto: ProjetoAutenticado, servidor: Servidor) -> ObjetoJson:
    banco = servidor.banco()
    resultado = banco.completar(projeto['id'], pedido.dataset, pedido.sync, pedido.max_removal)
    webhooks.entregar_em_segundo_plano(
        banco.listar_webhooks(projeto['id']), 'sync.completed', resultado
    )
    return resultado


@roteador.get('/api/v1/projeto', response_model=None)
def quem_sou(projeto: ProjetoAutenticado) -> ObjetoJson:
    return {
        'project_id': projeto['id'],
        'external_id': projeto['external_id'],
        'name': projeto['name'],
    }


# Quantas vezes o lote tenta a trava livre no laço (esperando a vez numa thread
# entre uma e outra) antes de gravar na thread: com `--processos`, o outro
# processo pode tomá-la entre a espera e a tentativa; a última vai sempre.
TENTATIVAS_NO_LACO = 3


async def _gravar_no_laco(banco: Banco, projeto_id: int, lote: Lote) -> dict[str, int]:
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


def registros_sao_objetos(registros: list[JsonDecodificado]) -> bool:
    # Os tipos de todos num laço em C; {dict} ou nenhum (o lote vazio).
    return set(map(type, registros)) <= _SO_OBJETOS


_SO_OBJETOS = frozenset({dict})
