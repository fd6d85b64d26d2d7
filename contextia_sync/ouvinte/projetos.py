"""
Ciclo de PROJETOS: empresa nova no ERP ganha projeto, chave, grupo, webhook e
carga completa.

Não reimplementa o provisionamento: chama o provisionar (processo filho), onde
a chave e gravada antes de qualquer coisa. Um segundo caminho para criar chave
seria um segundo caminho para perder uma.
"""

from __future__ import annotations

from dataclasses import dataclass

from contextia_sync.mapeamento import escopos_excluidos
from contextia_sync.ouvinte.contexto import Contexto
from contextia_sync.provisionamento import regra_projeto
from contextia_sync.provisionamento.chaves import ler_chaves
from contextia_sync.registro import logger


@dataclass
class ResumoProjetos:
    """O que um ciclo de projetos fez (a linha `projetos` do status)."""

    criados: int = 0
    carregados: int = 0
    erros: int = 0


def ciclo_projetos(ctx: Contexto) -> ResumoProjetos:
    """Empresa nova: provisionar, depois a carga inicial dela. Refaz as que ficaram pela metade."""
    resumo = ResumoProjetos()
    _refazer_cargas_pendentes(ctx, resumo)

    regra = ctx.regra
    conhecidos = set(ler_chaves(ctx.config.chaves))
    excluidos = escopos_excluidos(ctx.config.mapa)
    novos: list[tuple[str, str]] = []
    recusados: list[str] = []
    linhas, ctx.execucao.codigos_recusados = regra_projeto.separar_codigos(
        ctx.origem.fetch(regra.source_object, regra.columns), regra
    )
    for codigo in ctx.execucao.codigos_recusados:
        # Alto uma vez por subida (o status e a saude o mostram a cada volta):
        # a cada 5 minutos o mesmo ERRO so ensinaria a ignora-lo.
        if ('cadastro', codigo.codigo) not in ctx.execucao.avisados_sem_chave:
            ctx.execucao.avisados_sem_chave.add(('cadastro', codigo.codigo))
            logger.error('*** %s', regra_projeto.texto_da_recusa(codigo, regra))
    for linha in linhas:
        escopo = regra_projeto.escopo_de(linha, regra)
        if escopo in conhecidos or escopo in excluidos:
            continue
        aceito, motivo = regra_projeto.aceita(linha, regra)
        if not aceito:
            recusados.append('%s (%s)' % (escopo or '?', motivo))
            ctx.execucao.recusadas_pela_regra.add(escopo)
            continue
        ctx.execucao.recusadas_pela_regra.discard(escopo)
        novos.append((escopo, regra_projeto.nome_de(linha, regra)))

    if recusados:
        logger.info(
            'ciclo de projetos: %s escopo(s) recusados pela regra: %s',
            len(recusados),
            '; '.join(recusados[:5]),
        )
    if not novos:
        return resumo
    logger.warning(
        '*** %s EMPRESA(S) NOVA(S): %s',
        len(novos),
        ', '.join('%s=%s' % (e, (n or '')[:24]) for e, n in novos),
    )

    for escopo, _ in novos:
        if ctx.parar():
            break
        if not ctx.config.seco:
            # Anotada ANTES de provisionar: a partir do momento em que a chave
            # existe, a empresa deixa de ser "nova" e nada mais a carregaria ate
            # a varredura -- enquanto a marca de agua ja passou pelo historico
            # dela. Morte no meio (kill -9) ou carga que falhou: o proximo ciclo
            # de projetos ve a anotacao e refaz (a carga completa e idempotente).
            ctx.estado.marcar_carga_pendente(escopo)
            ctx.estado.gravar()
        # Uma chamada por empresa: com `group_column` os grupos diferem.
        if not ctx.rodar_ferramenta(
            ctx.argv_provisionar(escopo),
            'provisionar %s' % escopo,
            segredos=ctx.segredos_do_provisionar(),
        ).ok:
            resumo.erros += 1
            continue
        resumo.criados += 1
        if ctx.config.seco:
            continue
        _carga_inicial(ctx, escopo, resumo)
    return resumo


def _refazer_cargas_pendentes(ctx: Contexto, resumo: ResumoProjetos) -> None:
    """Cargas iniciais que ficaram pela metade (morte, falha): refeitas agora."""
    if ctx.config.seco:
        return
    chaves = ler_chaves(ctx.config.chaves)
    for escopo in ctx.estado.cargas_pendentes():
        if ctx.parar():
            return
        if escopo not in chaves:
            # Nem o provisionamento terminou: a empresa ainda e "nova" e o
            # caminho normal (provisionar + carregar) a pega logo abaixo.
            continue
        logger.warning(
            'carga inicial da empresa %s ficou pela metade (ouvinte morto ou'
            ' carga com falha): refazendo agora',
            escopo,
        )
        _carga_inicial(ctx, escopo, resumo)


def _conjuntos_antes_da_carga(ctx: Contexto, escopo: str) -> dict[str, object] | None:
    """
    O que a captura guarda ANTES da carga inicial (o conjunto de chaves da empresa,
    na reconciliacao); None se a origem não respondeu -- a carga fica para o
    próximo ciclo de projetos, em vez de correr sem o conjunto lido antes dela.
    """
    antes: dict[str, object] = {}
    try:
        for alvo in ctx.config.vivos:
            antes[alvo.nome] = ctx.captura.antes_da_carga(alvo, escopo)
    except Exception as erro:  # noqa: BLE001 - a origem pode estar fora agora
        for alvo in ctx.config.vivos:
            if alvo.nome in antes:
                ctx.captura.depois_da_carga(alvo, antes[alvo.nome], set())
        logger.error(
            'carga inicial da empresa %s adiada: o conjunto de chaves de antes dela'
            ' não foi lido (%s: %s); tentada de novo no próximo ciclo de projetos',
            escopo,
            type(erro).__name__,
            erro,
        )
        return None
    return antes


def _carga_inicial(ctx: Contexto, escopo: str, resumo: ResumoProjetos) -> None:
    """
    CARGA COMPLETA da empresa, agora: o incremental só traz o que MUDAR daqui
    para a frente, e deixar para a varredura seria um assistente vazio até a
    madrugada no dia em que o cliente foi cadastrado.
    """
    chave = ler_chaves(ctx.config.chaves).get(escopo)
    if chave is None:
        logger.error(
            'escopo %s provisionado e sem chave em %s -- carga inicial não'
            ' feita; confira a saída do provisionar acima',
            escopo,
            ctx.config.chaves,
        )
        resumo.erros += 1
        return
    antes = _conjuntos_antes_da_carga(ctx, escopo)
    if antes is None:
        resumo.erros += 1
        return
    env = {'CONTEXTIA_API_KEY': chave, 'CONTEXTIA_HISTORICO': ctx.config.caminho_historico}
    if not ctx.rodar_ferramenta(ctx.argv_conector(escopo), 'carga inicial %s' % escopo, env).ok:
        for alvo in ctx.config.vivos:
            ctx.captura.depois_da_carga(alvo, antes.get(alvo.nome), set())
        resumo.erros += 1
        logger.error(
            'carga inicial da empresa %s falhou: tentada de novo no próximo ciclo de projetos',
            escopo,
        )
        return
    # O conjunto de chaves da empresa (a reconciliacao) nasce desta carga, e antes de
    # ela deixar de ser pendente: nenhuma comparacao corre sem ele.
    for alvo in ctx.config.vivos:
        ctx.captura.depois_da_carga(alvo, antes.get(alvo.nome), {escopo})
        if ctx.quarentena is not None:
            # A carga fechou a empresa: o que esperava por ela na quarentena (a
            # remoção de antes da chave) ficou velho -- o `complete` já o fez.
            ctx.quarentena.descartar(alvo.nome, [escopo])
    resumo.carregados += 1
    ctx.estado.marcar_carga_pendente(escopo, False)
    ctx.estado.registrar_escopos([escopo])
    ctx.estado.gravar()
