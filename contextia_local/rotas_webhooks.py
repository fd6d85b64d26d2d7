"""Admin: os webhooks de um projeto (registrar, listar sem o segredo, testar)."""

from contextia_local import webhooks
from contextia_local.armazenamento import ErroRegra, WebhookRegistrado
from contextia_local.dependencias import Servidor, novo_roteador
from contextia_local.modelos import IdDoProjeto, NovoWebhook

roteador = novo_roteador('admin', so_admin=True)


@roteador.post('/api/v1/admin/projetos/{projeto_id}/webhooks', status_code=201, response_model=None)
def registrar_webhook(
    projeto_id: IdDoProjeto, pedido: NovoWebhook, servidor: Servidor
) -> WebhookRegistrado:
    problema = webhooks.problema_na_url(pedido.url)
    if problema:
        raise ErroRegra(422, 'url_recusada', problema)
    desconhecidos = sorted(set(pedido.events) - set(webhooks.EVENTOS))
    if desconhecidos:
        raise ErroRegra(
            422,
            'evento_desconhecido',
            'events: %s não existe(m); os'
            ' eventos são %s.' % (desconhecidos, list(webhooks.EVENTOS)),
        )
    return servidor.banco().registrar_webhook(projeto_id, pedido.url, pedido.secret, pedido.events)


@roteador.get('/api/v1/admin/projetos/{projeto_id}/webhooks', response_model=None)
def listar_webhooks(
    projeto_id: IdDoProjeto, servidor: Servidor
) -> dict[str, list[dict[str, object]]]:
    banco = servidor.banco()
    banco.projeto(projeto_id)
    # Os campos com `_` (o segredo) nunca saem.
    return {
        'webhooks': [
            {k: v for k, v in w.items() if not k.startswith('_')}
            for w in banco.listar_webhooks(projeto_id)
        ]
    }


@roteador.post('/api/v1/admin/webhooks/{webhook_id}/teste', response_model=None)
def testar_webhook(webhook_id: str, servidor: Servidor) -> webhooks.Entrega:
    encontrados = servidor.banco().listar_webhooks(webhook_id=webhook_id)
    if not encontrados:
        raise ErroRegra(404, 'webhook_inexistente', 'webhook %s não existe.' % webhook_id)
    return webhooks.entregar(encontrados[0], 'teste', {'mensagem': 'entrega de teste'})
