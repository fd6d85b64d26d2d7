"""
Ciclo de DADOS: o que mudou desde a ultima leitura, empresa por empresa.

A captura (captura/) diz o que mudou; aqui se reparte por empresa, se entrega
SEM ciclo de carga (upsert, nada removido), e so entao se confirma a posicao.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from contextia_sync import mapeamento, padroes
from contextia_sync.captura import DatasetVivo, Leitura, Situacao
from contextia_sync.captura.ao_vivo import agrupar_por_escopo
from contextia_sync.escopos import texto_escopo
from contextia_sync.fila.quarentena import Desfecho, ItemQuarentena, ResultadoReenvio
from contextia_sync.intake import cliente
from contextia_sync.intake.transporte import ErroContextia
from contextia_sync.mapeamento import escopos_excluidos
from contextia_sync.ouvinte.contexto import Contexto
from contextia_sync.provisionamento.chaves import ler_chaves
from contextia_sync.erros import resumir
from contextia_sync.registro import logger


@dataclass
class ResumoDados:
    """O que um ciclo de dados fez (a linha `dados` do status)."""

    datasets: int = 0
    registros: int = 0
    erros: int = 0
    atrasadas: int = 0
    quarentenados: int = 0


def _agora_texto() -> str:
    return datetime.datetime.now().strftime('%Y-%m-%d %H:%M:%S')


def ciclo_dados(ctx: Contexto) -> ResumoDados:
    """O que mudou desde a ultima leitura, empresa por empresa. Nada e removido."""
    chaves = _chaves_do_ao_vivo(ctx)
    resumo = ResumoDados()
    if not chaves:
        logger.warning('ciclo de dados: nenhuma chave em %s -- nada a atualizar',
                       ctx.chaves)
        return resumo

    tentados, falhas = 0, 0
    ultima: Exception | None = None
    for alvo in ctx.vivos:
        if ctx.parar():
            break
        tentados += 1
        try:
            _dados_de_um(ctx, alvo, chaves, resumo)
        except Exception as erro:             # noqa: BLE001 - uma view quebrada nao para as outras
            # O erro fica no dataset (o status mostra QUAL esta parado) e o
            # ciclo segue com os outros 26.
            falhas, ultima = falhas + 1, erro
            resumo.erros += 1
            ctx.estado.acompanhamento(alvo.nome).registrar_erro('%s %s: %s' % (
                _agora_texto(), type(erro).__name__, resumir(str(erro))), _agora_texto())
            logger.error('%-28s leitura falhou: %s: %s', alvo.nome, type(erro).__name__, erro)

    if not ctx.seco:
        ctx.estado.gravar()
    if tentados and falhas == tentados and ultima is not None:
        # TODOS falharam: e a origem (ou a rede), nao um dataset. O laco faz
        # backoff e reabre a conexao.
        raise ultima
    return resumo


def _chaves_do_ao_vivo(ctx: Contexto) -> dict[str, str]:
    """
    As chaves das empresas que recebem o ao-vivo: as do arquivo, menos as de
    `excluded_scopes` -- o conector recusa essas, e o ao-vivo tambem.
    """
    chaves = ler_chaves(ctx.chaves)
    excluidos = escopos_excluidos(ctx.mapa)
    recusadas = sorted(set(chaves) & excluidos)
    novas = [e for e in recusadas if ('*', e) not in ctx.avisados_sem_chave]
    if novas:
        ctx.avisados_sem_chave.update(('*', e) for e in novas)
        logger.warning('empresa(s) %s com chave em %s, mas em source.excluded_scopes do'
                       ' mapeamento: NAO recebem dado ao vivo (nem carga). Tire a linha do'
                       ' arquivo de chaves e revogue a chave, ou tire a empresa de'
                       ' excluded_scopes se a exclusao era engano.', ', '.join(novas),
                       ctx.chaves)
    return {e: k for e, k in chaves.items() if e not in excluidos}


def _dados_de_um(ctx: Contexto, alvo: DatasetVivo, chaves: Mapping[str, str],
                 resumo: ResumoDados) -> None:
    acomp = ctx.estado.acompanhamento(alvo.nome)
    leitura = ctx.captura.ler(alvo)
    # A sonda respondeu: e a "ultima sonda boa" que a saude vigia.
    acomp.ultima_sonda = _agora_texto()
    acomp.novos = acomp.atualizados = acomp.iguais = 0
    if leitura.situacao in (Situacao.INICIO, Situacao.NADA):
        acomp.enviados_ultimo_ciclo = 0
        # Nada acima da marca: nenhum envio pendente, o erro antigo ja passou.
        acomp.registrar_sucesso()
        return
    if leitura.situacao is Situacao.GRANDE:
        # Operacao em massa: a varredura e a ferramenta certa -- fecha a carga e
        # remove o que sumiu (marca_agua.passa_do_teto).
        logger.warning('%-28s %s linhas mudaram (teto %s): entregue a VARREDURA,'
                       ' nao ao incremental', alvo.nome, leitura.quantos, ctx.maximo)
        ctx.estado.entregar_a_varredura(
            alvo.nome, '%s linhas em %s' % (leitura.quantos, _agora_texto()))
        acomp.enviados_ultimo_ciclo = 0
        return

    resumo.atrasadas += leitura.atrasadas
    grupos, novos = agrupar_por_escopo(leitura.upserts, ctx.mapa, alvo.row, chaves)
    avisar_sem_chave(ctx.mapa, ctx.avisados_sem_chave, alvo.nome, novos)
    if alvo.chave is None:
        # Sem `key` o servidor deduplica por hash do conteudo: a linha ALTERADA
        # entra como registro novo e a antiga fica ate a varredura. Aviso, nao
        # recusa: o incremental ainda vale para as inclusoes.
        logger.warning('%-28s sem `key`: alteracao vira registro NOVO (dedup por'
                       ' hash). Ate a varredura, o antigo fica.', alvo.nome)

    ok, enviados, erro = _enviar(ctx, alvo, grupos, chaves, leitura, resumo)
    if ok and leitura.remocoes_por_escopo:
        ok, removidas, erro = _remover_por_escopo(ctx, alvo, leitura, chaves)
        enviados += removidas
    acomp.enviados_ultimo_ciclo = enviados
    # A POSICAO SO AVANCA SE TUDO DEU CERTO (marca_agua.marca_apos_envio): falha
    # de envio mantem a posicao velha e o proximo ciclo rele.
    if ok and not ctx.seco:
        ctx.captura.confirmar(alvo, leitura)
        acomp.registrar_sucesso()
        ctx.estado.soltar_da_varredura(alvo.nome)
    elif not ok:
        acomp.registrar_erro('%s %s' % (_agora_texto(), erro), _agora_texto())
        logger.warning('%-28s envio com erro: marca de agua NAO avancou (o proximo'
                       ' ciclo rele)', alvo.nome)
    resumo.datasets += 1
    resumo.registros += enviados


def avisar_sem_chave(mapa: Mapping[str, Any], avisados: set[tuple[str, str]], nome: str,
                     escopos: Iterable[str]) -> None:
    """
    Dado de empresa sem chave: nada e enviado para ela, e o operador precisa saber.

    Escopo em `excluded_scopes` fica de fora por decisao do mapeamento e nao e
    avisado. Os outros podem ser empresa nova (o ciclo de projetos provisiona e
    faz a carga completa) ou empresa que a regra recusa (ex.: inativa): o aviso
    diz as duas coisas, porque daqui nao se sabe qual -- quem sabe e o ciclo de
    projetos, que lista os recusados pela regra. Uma vez por empresa e subida.
    """
    excluidos = escopos_excluidos(mapa)
    novos = [e for e in escopos if e not in excluidos and (nome, e) not in avisados]
    if not novos:
        return
    avisados.update((nome, e) for e in novos)
    logger.warning('%-28s dado de escopo sem chave: %s -- empresa nova e provisionada'
                   ' pelo ciclo de projetos; se a regra de projeto a recusa, esses'
                   ' dados ficam fora do Contextia', nome, ', '.join(novos[:6]))


def _enviar(ctx: Contexto, alvo: DatasetVivo, grupos: Mapping[str, list[dict[str, Any]]],
            chaves: Mapping[str, str], leitura: Leitura,
            resumo: ResumoDados) -> tuple[bool, int, str | None]:
    """Envia cada grupo a sua empresa. Devolve (tudo_ok, enviados, erro_texto)."""
    descricao, campos = mapeamento.semantica(ctx.mapa, alvo.row)
    ok, enviados = True, 0
    erro: str | None = None
    for escopo, registros in sorted(grupos.items()):
        if ctx.parar():
            # Parada pedida: o resto fica para a proxima subida, e a marca NAO
            # avanca sobre o que nao foi confirmado.
            ok = False
            erro = 'parada pedida antes de enviar a empresa %s' % escopo
            break
        if ctx.seco:
            logger.info('%-28s [SECO] escopo=%-8s %s registro(s)', alvo.nome, escopo,
                        len(registros))
            enviados += len(registros)
            continue
        try:
            res = cliente.enviar_dataset(
                alvo.nome, registros, key=alvo.chave, description=descricao, fields=campos,
                group=mapeamento.grupo_de(ctx.mapa, alvo.row),
                chunk=mapeamento.chunk_de(ctx.mapa, alvo.row) or padroes.CHUNK,
                api_key=chaves[escopo], logger=logger,
                remove=leitura.remocoes or None, deve_parar=ctx.parar, escopo=escopo,
                # Registro recusado de vez (NaN, grande demais, 422) vai para a
                # quarentena e a marca segue: um registro envenenado nao segura
                # a empresa para sempre. Falha passageira nunca vai para la.
                quarentena=ctx.quarentena,
                # SEM CICLO DE CARGA -- o coracao da seguranca daqui. Sem `sync`
                # o servidor faz upsert e NAO remove nada; um incremental que
                # mandasse `complete` apagaria tudo que nao mudou no ultimo
                # minuto, ou seja, o dataset inteiro.
                sync=None)
        except ErroContextia as falha:
            # Chave revogada de UMA empresa nao para as outras; a marca fica.
            ok = False
            resumo.erros += 1
            erro = 'escopo %s: %s: %s' % (escopo, type(falha).__name__, falha)
            logger.error('%-28s escopo=%-8s %s', alvo.nome, escopo, erro)
            continue
        if res.lotes_erro:
            ok = False
            resumo.erros += res.lotes_erro
            erro = 'escopo %s: %s lote(s) com erro: %s' % (
                escopo, res.lotes_erro, resumir('; '.join(res.erros or [])))
        enviados += res.registros
        resumo.quarentenados += res.quarentenados
        acomp = ctx.estado.acompanhamento(alvo.nome)
        acomp.novos += res.inserted
        acomp.atualizados += res.updated
        acomp.iguais += res.duplicates
        logger.info('%-28s escopo=%-8s enviados=%-5s novos=%-4s atualizados=%-4s'
                    ' iguais=%-4s%s', alvo.nome, escopo, res.registros, res.inserted,
                    res.updated, res.duplicates,
                    ' QUARENTENA=%s' % res.quarentenados if res.quarentenados else '')
    return ok, enviados, erro


def _remover_por_escopo(ctx: Contexto, alvo: DatasetVivo, leitura: Leitura,
                        chaves: Mapping[str, str]) -> tuple[bool, int, str | None]:
    """
    As chaves que a captura viu sumir, cada uma so da empresa em que estava
    (`remove`, sem registros e sem `sync`). Depois dos upserts: a linha que
    mudou de empresa ja chegou a nova quando sai da antiga.
    """
    removidas = 0
    for escopo, valores in sorted(leitura.remocoes_por_escopo.items()):
        if ctx.seco or not valores:
            continue
        if escopo not in chaves:
            return False, removidas, ('escopo %s sem chave no arquivo de chaves: %d'
                                      ' remoção(ões) esperam no spool' % (escopo, len(valores)))
        try:
            res = cliente.enviar_dataset(alvo.nome, [], key=alvo.chave, api_key=chaves[escopo],
                                         logger=logger, remove=valores, deve_parar=ctx.parar,
                                         escopo=escopo, sync=None)
        except ErroContextia as falha:
            return False, removidas, 'escopo %s: remoção: %s: %s' % (
                escopo, type(falha).__name__, falha)
        if res.lotes_erro:
            return False, removidas, 'escopo %s: remoção com erro: %s' % (
                escopo, resumir('; '.join(res.erros or [])))
        removidas += res.removed
        logger.info('%-28s escopo=%-8s removidas=%-5s', alvo.nome, escopo, res.removed)
    return True, removidas, None


def reenviar_quarentena(ctx: Contexto) -> ResultadoReenvio | None:
    """
    Tenta de novo cada registro da quarentena, com a chave da empresa dele.

    Entregue sai; recusado de novo fica (com o motivo novo); empresa sem chave
    fica e diz isso. `--reenviar-quarentena` e a varredura chamam isto.
    """
    if ctx.quarentena is None or not ctx.quarentena.contar():
        return None
    chaves = _chaves_do_ao_vivo(ctx)

    def enviar(item: ItemQuarentena) -> Desfecho:
        return cliente.reenviar_item(item, api_key=chaves.get(texto_escopo(item.escopo)),
                                     logger=logger, deve_parar=ctx.parar)

    resultado = ctx.quarentena.reenviar(enviar, deve_parar=ctx.parar)
    logger.warning('quarentena reenviada: %s entregue(s), %s recusado(s) de novo, %s'
                   ' pendente(s), %s falha(s); ficam %s', resultado.entregues,
                   resultado.recusados, resultado.pendentes, resultado.falhas,
                   resultado.restantes)
    for mensagem in resultado.mensagens[:20]:
        logger.warning('  quarentena: %s', mensagem)
    return resultado
