"""
Admin: a injeção de falhas (`--falhas`; sem ele, 404). O que injetar fica na
memória deste processo; contextia_local/falhas.py o aplica aos pedidos.
"""

import json

from contextia_local.armazenamento import ErroRegra
from contextia_local.dependencias import Servidor, novo_roteador
from contextia_local.falhas import TIPOS, ResumoDasFalhas
from contextia_local.modelos import PedidoFalha, TaxasDeFalha

roteador = novo_roteador('falhas', so_admin=True)


@roteador.post('/api/v1/admin/falhas', response_model=None)
def injetar(pedido: PedidoFalha, servidor: Servidor) -> ResumoDasFalhas:
    opcoes = pedido.model_dump(exclude_none=True, exclude={'tipo', 'quantidade', 'caminho'})
    falhas = servidor.falhas()
    falhas.injetar(pedido.tipo, pedido.quantidade, pedido.caminho, **opcoes)
    return falhas.resumo()


@roteador.put('/api/v1/admin/falhas/taxas', response_model=None)
def definir_taxas(pedido: TaxasDeFalha, servidor: Servidor) -> ResumoDasFalhas:
    # A taxa inválida é dita antes da falha desligada: o pedido errado é 422 sempre.
    invalidos = sorted(set(pedido.taxas) - set(TIPOS))
    if invalidos or any(not 0 <= v <= 1 for v in pedido.taxas.values()):
        raise ErroRegra(
            422,
            'taxa_invalida',
            'taxas: tipos válidos são %s, cada um'
            ' com fração entre 0 e 1 (recebido %s).' % (list(TIPOS), json.dumps(pedido.taxas)),
        )
    falhas = servidor.falhas()
    falhas.definir_taxas(pedido.taxas, pedido.caminho, pedido.semente)
    return falhas.resumo()


@roteador.get('/api/v1/admin/falhas', response_model=None)
def consultar_falhas(servidor: Servidor) -> ResumoDasFalhas:
    return servidor.falhas().resumo()


@roteador.delete('/api/v1/admin/falhas', response_model=None)
def limpar_falhas(servidor: Servidor) -> ResumoDasFalhas:
    falhas = servidor.falhas()
    falhas.limpar()
    return falhas.resumo()
