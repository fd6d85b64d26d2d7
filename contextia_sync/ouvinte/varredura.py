"""
VARREDURA: a recarga completa diária, identica a do cron: provisionar, depois
carregar-todas. O único momento em que registro apagado na origem sai do
Contextia.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass

from contextia_sync.captura import DatasetVivo
from contextia_sync.captura.marca_agua import texto_marca
from contextia_sync.carga import historico
from contextia_sync.estado.estado import ResultadoVarredura
from contextia_sync.intake.cliente import normalizar_dataset
from contextia_sync.mapeamento import escopos_excluidos
from contextia_sync.ouvinte.agenda import hora_de_varrer
from contextia_sync.ouvinte.contexto import Contexto
from contextia_sync.ouvinte.dados import reenviar_quarentena
from contextia_sync.provisionamento.chaves import ErroChaves, ler_chaves
from contextia_sync.registro import logger


@dataclass
class ResumoVarredura:
    """O que uma varredura fez (a linha `varredura` do status)."""

    erros: int = 0


def e_hora_de_varrer(ctx: Contexto, agora: datetime.datetime | None = None) -> bool:
    return hora_de_varrer(
        ctx.config.varredura, ctx.config.janela, ctx.estado.varredura_feita_em(), agora
    )


def _escopos_da_varredura(ctx: Contexto) -> set[str]:
    """As empresas que o carregar-todas.sh vai carregar (as do arquivo de chaves)."""
    try:
        escopos = set(ler_chaves(ctx.config.chaves))
    except (ErroChaves, OSError):
        # O carregar-todas recusa o mesmo arquivo: nenhuma empresa fecha carga.
        return {'(arquivo de chaves recusado)'}
    # Empresa excluida no mapeamento: o conector a recusa e ela nunca fecha carga.
    return escopos - escopos_excluidos(ctx.config.mapa)


def ciclo_varredura(ctx: Contexto) -> ResumoVarredura:
    """
    Fase 1 e rede de segurança (se o ciclo de projetos vinha falhando, aparece
    aqui); fase 2 carrega tudo com sync+complete. Depois, por dataset, o que
    ela fechou: a captura salta (`_saltar_os_fechados`) e recebe o conjunto
    (`_entregar_conjuntos`); o registro da varredura no estado por último.
    """
    logger.warning('===== varredura: carga completa de todas as empresas =====')
    # A posicao de cada dataset entregue a varredura, lida ANTES dela: tudo ate
    # ali a carga completa leva, e a captura pode saltar para la
    # (marca_agua.marca_apos_varredura).
    entregues = ctx.estado.pendentes()
    antes: dict[str, tuple[DatasetVivo, object]] = {
        alvo.nome: (alvo, ctx.captura.posicao_atual(alvo))
        for alvo in ctx.config.vivos
        if alvo.nome in entregues
    }

    # O conjunto de chaves de cada dataset reconciliado, lido ANTES dela tambem: a
    # empresa que ela fechar passa a ter este conjunto (captura.depois_da_carga).
    conjuntos = _conjuntos_antes(ctx)

    registro = ctx.estado.dados.varredura
    if not ctx.config.seco:
        # Anotada ANTES: um kill -9 no meio deixa no estado uma varredura que
        # comecou e nao terminou (o status e a saude a mostram).
        registro.iniciada_em, registro.terminada_em, registro.ok = _agora(), None, None
        registro.erros, registro.nao_fechados = [], {}
        ctx.estado.gravar()
    resumo, execucao, escopos = _rodar_as_fases(ctx, registro)

    # A varredura pode ter levado horas: o retrato da nossa sessao esta velho.
    ctx.origem.renovar()

    if ctx.config.seco or ctx.parar():
        for alvo in ctx.config.vivos:
            ctx.captura.depois_da_carga(alvo, conjuntos.get(alvo.nome), set())
    if ctx.config.seco:
        return resumo
    if ctx.parar():
        # Interrompida pela parada: NAO conta como feita, e a proxima subida
        # dentro da janela varre de novo.
        logger.warning('varredura interrompida pela parada: não registrada como feita')
        registro.erros.append('interrompida pela parada do ouvinte (não conta como feita)')
        registro.terminada_em = _agora()
        ctx.estado.gravar()
        return resumo
    _saltar_os_fechados(ctx, antes, escopos, execucao)
    _entregar_conjuntos(ctx, registro, conjuntos, escopos, execucao)
    _limpar_quarentena(ctx, escopos, execucao)
    _registrar_fim(ctx, registro, resumo)
    return resumo


def _rodar_as_fases(
    ctx: Contexto, registro: ResultadoVarredura
) -> tuple[ResumoVarredura, str, set[str]]:
    """provisionar e carregar-todas, as ferramentas filhas: (resumo, execução, empresas)."""
    resumo = ResumoVarredura()
    feito = ctx.rodar_ferramenta(
        ctx.argv_provisionar(), 'varredura/provisionar', segredos=ctx.segredos_do_provisionar()
    )
    if not feito.ok:
        resumo.erros += 1
        registro.erros.append('provisionar: %s' % feito.descrever())
    # Cada conector desta varredura grava no historico as cargas aceitas com
    # este id: e assim que se sabe, dataset por dataset, o que ela fechou.
    execucao = 'varredura-' + uuid.uuid4().hex[:12]
    escopos = _escopos_da_varredura(ctx)
    if not ctx.parar():
        env = {
            'CONTEXTIA_MAPPING': ctx.config.mapping,
            'CONTEXTIA_PYTHON': ctx.config.python,
            'CONTEXTIA_COLETA': ctx.config.raiz,
            'CONTEXTIA_HISTORICO': ctx.config.caminho_historico,
            'CONTEXTIA_EXECUCAO': execucao,
        }
        feito = ctx.rodar_ferramenta(ctx.argv_carregar_todas(), 'varredura/carregar-todas', env)
        if not feito.ok:
            resumo.erros += 1
            registro.erros.append('carregar-todas: %s' % feito.descrever())
    else:
        resumo.erros += 1
    return resumo, execucao, escopos


def _saltar_os_fechados(
    ctx: Contexto, antes: dict[str, tuple[DatasetVivo, object]], escopos: set[str], execucao: str
) -> None:
    """
    O salto e POR DATASET: um dataset que a varredura fechou em todas as
    empresas volta ao ao-vivo mesmo que outro tenha falhado. Saltar junto
    deixaria um dataset bom congelado por causa do erro de outro.
    """
    faltando_por_dataset = historico.Historico(ctx.config.caminho_historico).faltando(
        escopos, antes, execucao
    )
    for nome, (alvo, posicao) in antes.items():
        faltando = faltando_por_dataset[nome]
        if faltando:
            logger.error(
                '%-28s a varredura NÃO fechou a carga nas empresas %s (veja a'
                ' saída acima): continua entregue a varredura',
                nome,
                ', '.join(faltando[:10]),
            )
            continue
        nova = ctx.captura.saltar(alvo, posicao)
        ctx.estado.soltar_da_varredura(nome)
        logger.info('%-28s carregado pela varredura: marca -> %s', nome, texto_marca(nova))


def _entregar_conjuntos(
    ctx: Contexto,
    registro: ResultadoVarredura,
    conjuntos: dict[str, object],
    escopos: set[str],
    execucao: str,
) -> None:
    """O que não fechou vai ao registro; a captura recebe, por dataset, as empresas fechadas."""
    # Todo dataset do mapeamento, nao so os entregues: a saude diz o que nao fechou.
    todos = [normalizar_dataset(row['dataset']) for row in ctx.config.mapa.get('datasets') or []]
    faltando_todos = historico.Historico(ctx.config.caminho_historico).faltando(
        escopos, todos, execucao
    )
    registro.nao_fechados = {
        nome: faltando for nome, faltando in faltando_todos.items() if faltando
    }
    for alvo in ctx.config.vivos:
        abertos = set(faltando_todos.get(alvo.nome) or ())
        fechados: set[str | None] = {e for e in escopos if e not in abertos}
        if not abertos:
            fechados.add(None)  # o dataset sem recorte: fechado em todas
        ctx.captura.depois_da_carga(alvo, conjuntos.get(alvo.nome), fechados)


def _registrar_fim(ctx: Contexto, registro: ResultadoVarredura, resumo: ResumoVarredura) -> None:
    """A varredura registrada como feita hoje, com erro ou não, e o fim no estado."""
    if resumo.erros:
        # Registrada mesmo assim, como o cron: repetir uma carga de horas a cada
        # ciclo dentro da janela martelaria a origem. Amanha ela roda de novo.
        logger.error('varredura com %s fase(s) com erro (veja a saída acima)', resumo.erros)
    ctx.estado.registrar_varredura(datetime.date.today().isoformat())
    registro.terminada_em = _agora()
    registro.ok = not registro.erros and not registro.nao_fechados
    if registro.ok:
        registro.ultima_ok_em = registro.terminada_em
    ctx.estado.gravar()


def _conjuntos_antes(ctx: Contexto) -> dict[str, object]:
    """O que a captura guarda antes da varredura, por dataset (a origem fora: nada)."""
    antes: dict[str, object] = {}
    for alvo in ctx.config.vivos:
        try:
            antes[alvo.nome] = ctx.captura.antes_da_carga(alvo, None)
        except Exception as erro:  # noqa: BLE001 - sem ele, o conjunto so nao renasce
            logger.warning(
                '%-28s conjunto de chaves não lido antes da varredura (%s: %s): ele'
                ' continua o de antes (nada se perde; só não renasce dela)',
                alvo.nome,
                type(erro).__name__,
                erro,
            )
    return antes


def _agora() -> str:
    return datetime.datetime.now().isoformat(timespec='seconds')


def _limpar_quarentena(ctx: Contexto, escopos: set[str], execucao: str) -> None:
    """
    Dataset que a varredura FECHOU em todas as empresas: toda linha viva dele
    chegou (uma recusada teria impedido o `complete`), e o que estava na
    quarentena ficou velho. O resto e reenviado uma vez.
    """
    if ctx.quarentena is None or not ctx.quarentena.contar():
        return
    nomes = [alvo.nome for alvo in ctx.config.vivos]
    faltando = historico.Historico(ctx.config.caminho_historico).faltando(escopos, nomes, execucao)
    for nome in nomes:
        if not faltando[nome]:
            descartados = ctx.quarentena.descartar(nome)
            if descartados:
                logger.info(
                    '%-28s %s registro(s) da quarentena descartado(s): a varredura'
                    ' entregou o dataset inteiro',
                    nome,
                    descartados,
                )
    reenviar_quarentena(ctx)
