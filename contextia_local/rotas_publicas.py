"""As rotas sem autenticação: a saúde do servidor e o que ele sabe fazer."""

from contextia_local import webhooks
from contextia_local.configuracao import VERSAO_API
from contextia_local.dependencias import Servidor, novo_roteador
from contextia_sync.tipos import ObjetoJson

roteador = novo_roteador('publico')


@roteador.get('/saude', response_model=None)
def saude() -> dict[str, str]:
    return {'status': 'ok', 'versao': VERSAO_API}


@roteador.get('/api/v1/capacidades', response_model=None)
def capacidades(servidor: Servidor) -> ObjetoJson:
    config = servidor.config
    return {
        'versao': VERSAO_API,
        'remove': config.remove,
        'sync': True,
        'complete': True,
        'max_removal': True,
        'webhooks': list(webhooks.EVENTOS),
        'max_records_per_batch': config.max_registros_lote,
        'max_bytes_per_batch': config.max_bytes_lote,
        'decimal': 'string',
        'compressao': ['gzip'],
    }
