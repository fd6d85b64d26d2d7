"""
VARREDURA: a recarga completa diaria, identica a do cron: provisionar, depois
carregar-todas. O unico momento em que registro apagado na origem sai do
Contextia.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass
from typing import Any

from contextia_sync.captura import DatasetVivo
from contextia_sync.captura.marca_agua import texto_marca
from contextia_sync.carga import historico
from contextia_sync.mapeamento import escopos_excluidos
from contextia_sync.ouvinte.agenda import hora_de_varrer
from contextia_sync.ouvinte.contexto import Contexto
from contextia_sync.provisionamento.chaves import ErroChaves, ler_chaves
from contextia_sync.registro import logger


@dataclass
class ResumoVarredura:
    """O que uma varredura fez (a linha `varredura` do status)."""

    erros: int = 0


def e_hora_de_varrer(ctx: Contexto, agora: datetime.datetime | None = None) -> bool:
    return hora_de_varrer(ctx.varredura, ctx.janela, ctx.estado.varredura_feita_em(), agora)


def _escopos_da_varredura(ctx: Contexto) -> set[str]:
    """As empresas que o carregar-todas.sh vai carregar (as do arquivo de chaves)."""
    try:
        escopos = set(ler_chaves(ctx.chaves))
    except (ErroChaves, OSError):
        # O carregar-todas recusa o mesmo arquivo: nenhuma empresa fecha carga.
        return {'(arquivo de chaves recusado)'}
    # Empresa excluida no mapeamento: o conector a recusa e ela nunca fecha carga.
    return escopos - escopos_excluidos(ctx.mapa)


def ciclo_varredura(ctx: Contexto) -> ResumoVarredura:
    """
    Fase 1 e rede de seguranca (se o ciclo de projetos vinha falhando, aparece
    aqui); fase 2 carrega tudo com sync+complete.
    """
    logger.warning('===== varredura: carga completa de todas as empresas =====')
    # A posicao de cada dataset entregue a varredura, lida ANTES dela: tudo ate
    # ali a carga completa leva, e a captura pode saltar para la
    # (marca_agua.marca_apos_varredura).
    entregues = ctx.estado.pendentes()
    antes: dict[str, tuple[DatasetVivo, Any]] = {
        alvo.nome: (alvo, ctx.captura.posicao_atual(alvo))
        for alvo in ctx.vivos if alvo.nome in entregues}

    resumo = ResumoVarredura()
    if not ctx.rodar_ferramenta(ctx.argv_provisionar(), 'varredura/provisionar').ok:
        resumo.erros += 1
    # Cada conector desta varredura grava no historico as cargas aceitas com
    # este id: e assim que se sabe, dataset por dataset, o que ela fechou.
    execucao = 'varredura-' + uuid.uuid4().hex[:12]
    escopos = _escopos_da_varredura(ctx)
    if not ctx.parar():
        env = {'CONTEXTIA_MAPPING': ctx.mapping, 'CONTEXTIA_PYTHON': ctx.python,
               'CONTEXTIA_COLETA': ctx.raiz, 'CONTEXTIA_HISTORICO': ctx.caminho_historico,
               'CONTEXTIA_EXECUCAO': execucao}
        if not ctx.rodar_ferramenta(ctx.argv_carregar_todas(), 'varredura/carregar-todas',
                                    env).ok:
            resumo.erros += 1
    else:
        resumo.erros += 1

    # A varredura pode ter levado horas: o retrato da nossa sessao esta velho.
    ctx.origem.renovar()

    if ctx.seco:
        return resumo
    if ctx.parar():
        # Interrompida pela parada: NAO conta como feita, e a proxima subida
        # dentro da janela varre de novo.
        logger.warning('varredura interrompida pela parada: nao registrada como feita')
        return resumo
    # O salto e POR DATASET: um dataset que a varredura fechou em todas as
    # empresas volta ao ao-vivo mesmo que outro tenha falhado. Saltar junto
    # deixaria um dataset bom congelado por causa do erro de outro.
    faltando_por_dataset = historico.Historico(ctx.caminho_historico).faltando(
        escopos, antes, execucao)
    for nome, (alvo, posicao) in antes.items():
        faltando = faltando_por_dataset[nome]
        if faltando:
            logger.error('%-28s a varredura NAO fechou a carga nas empresas %s (veja a'
                         ' saida acima): continua entregue a varredura', nome,
                         ', '.join(faltando[:10]))
            continue
        nova = ctx.captura.saltar(alvo, posicao)
        ctx.estado.soltar_da_varredura(nome)
        logger.info('%-28s carregado pela varredura: marca -> %s', nome, texto_marca(nova))
    if resumo.erros:
        # Registrada mesmo assim, como o cron: repetir uma carga de horas a cada
        # ciclo dentro da janela martelaria a origem. Amanha ela roda de novo.
        logger.error('varredura com %s fase(s) com erro (veja a saida acima)', resumo.erros)
    ctx.estado.registrar_varredura(datetime.date.today().isoformat())
    ctx.estado.gravar()
    return resumo
