"""
Ciclo de DADOS: o que mudou desde a última leitura, empresa por empresa.

A captura (captura/) diz o que mudou; aqui se reparte por empresa, se entrega
SEM ciclo de carga (upsert; só o que a captura viu sumir -- a reconciliacao --
e removido, pela chave, com `remove`), e só então se confirma a posição.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from contextia_sync import mapeamento, padroes
from contextia_sync.captura import DatasetVivo, Leitura, Situacao
from contextia_sync.captura.ao_vivo import Reparticao, agrupar_por_escopo
from contextia_sync.estado.estado import Acompanhamento
from contextia_sync.escopos import codigo_invalido, texto_escopo
from contextia_sync.fila.diretorio import ErroFilaCheia
from contextia_sync.fila.quarentena import (
    Desfecho,
    ErroQuarentenaCheia,
    ItemQuarentena,
    ResultadoReenvio,
)
from contextia_sync.intake import cliente
from contextia_sync.intake.serializacao import serializar_parcial
from contextia_sync.intake.transporte import ErroContextia
from contextia_sync.mapeamento import escopos_excluidos
from contextia_sync.ouvinte.contexto import Contexto
from contextia_sync.provisionamento.chaves import empresa_da_chave, ler_chaves
from contextia_sync.erros import resumir
from contextia_sync.registro import logger
from contextia_sync.tipos import Linha, Mapa, ValorDoBanco


@dataclass
class ResumoDados:
    """O que um ciclo de dados fez (a linha `dados` do status)."""

    datasets: int = 0
    registros: int = 0
    erros: int = 0
    atrasadas: int = 0
    quarentenados: int = 0
    removidas: int = 0  # chaves removidas do Contextia (a reconciliacao)


def _agora_texto() -> str:
    return datetime.datetime.now().strftime('%Y-%m-%d %H:%M:%S')


def ciclo_dados(ctx: Contexto) -> ResumoDados:
    """
    O que mudou desde a última leitura, empresa por empresa. Só é removido o
    que a captura viu sumir da origem (a reconciliacao), pela chave.
    """
    chaves = _chaves_do_ao_vivo(ctx)
    resumo = ResumoDados()
    if not chaves:
        logger.warning('ciclo de dados: nenhuma chave em %s -- nada a atualizar', ctx.config.chaves)
        return resumo

    tentados, falhas = 0, 0
    ultima: Exception | None = None
    for alvo in ctx.config.vivos:
        if ctx.parar():
            break
        tentados += 1
        try:
            _dados_de_um(ctx, alvo, chaves, resumo)
        except Exception as erro:  # noqa: BLE001 - uma view quebrada nao para as outras
            # O erro fica no dataset (o status mostra QUAL esta parado) e o
            # ciclo segue com os outros 26.
            falhas, ultima = falhas + 1, erro
            resumo.erros += 1
            ctx.estado.acompanhamento(alvo.nome).registrar_erro(
                '%s %s: %s' % (_agora_texto(), type(erro).__name__, resumir(str(erro))),
                _agora_texto(),
            )
            logger.error('%-28s leitura falhou: %s: %s', alvo.nome, type(erro).__name__, erro)

    if not ctx.config.seco:
        ctx.estado.gravar()
    if tentados and falhas == tentados and ultima is not None:
        # TODOS falharam: e a origem (ou a rede), nao um dataset. O laco faz
        # backoff e reabre a conexao.
        raise ultima
    return resumo


def _chaves_do_ao_vivo(ctx: Contexto) -> dict[str, str]:
    """
    As chaves das empresas que recebem o ao-vivo: as do arquivo, menos as de
    `excluded_scopes` -- o conector recusa essas, e o ao-vivo também.
    """
    chaves = ler_chaves(ctx.config.chaves)
    excluidos = escopos_excluidos(ctx.config.mapa)
    recusadas = sorted(set(chaves) & excluidos)
    novas = [e for e in recusadas if ('*', e) not in ctx.execucao.avisados_sem_chave]
    if novas:
        ctx.execucao.avisados_sem_chave.update(('*', e) for e in novas)
        logger.warning(
            'empresa(s) %s com chave em %s, mas em source.excluded_scopes do'
            ' mapeamento: NÃO recebem dado ao vivo (nem carga). Tire a linha do'
            ' arquivo de chaves e revogue a chave, ou tire a empresa de'
            ' excluded_scopes se a exclusão era engano.',
            ', '.join(novas),
            ctx.config.chaves,
        )
    vivas = {e: k for e, k in chaves.items() if e not in excluidos}
    # A recusa que o arquivo ja nao justifica sai do status agora (linha apagada
    # ou chave trocada), sem esperar um dado daquela empresa: so com o que ja se
    # sabe, sem perguntar nada ao Contextia. A chave nova e conferida no envio.
    for escopo in list(ctx.execucao.chaves_recusadas):
        dono = ctx.execucao.donos_das_chaves.get(vivas.get(escopo, ''))
        if dono is None or empresa_da_chave(dono, escopo) is None:
            del ctx.execucao.chaves_recusadas[escopo]
    return vivas


class ErroChaveDeOutraEmpresa(ErroContextia):
    """A chave da linha de uma empresa no arquivo de chaves e do projeto de outra."""


def conferir_dono(ctx: Contexto, escopo: str, chave: str) -> None:
    """
    A chave da linha `escopo` do arquivo de chaves e do projeto desta empresa?

    Como o conector confere antes de carregar: sem isto, uma linha trocada (a
    chave de outro projeto na linha da empresa, escrita a mão ou injetada)
    mandaria os dados desta empresa para o projeto da outra, sem erro nenhum do
    servidor. Perguntado ao Contextia uma vez por chave nesta execução
    (`ctx.execucao.donos_das_chaves`); a recusa fica em `ctx.execucao.chaves_recusadas` para o
    status e a saúde. Levanta ErroChaveDeOutraEmpresa (recusada) ou
    ErroContextia (não deu para saber agora: nada vai para essa empresa neste
    ciclo, e a marca espera).
    """
    dono = ctx.execucao.donos_das_chaves.get(chave)
    if dono is None:
        dono = ctx.execucao.donos_das_chaves[chave] = dict(
            cliente.quem_sou(chave, escopo=escopo, deve_parar=ctx.parar)
        )
    outra = empresa_da_chave(dono, escopo)
    if outra is None:
        ctx.execucao.chaves_recusadas.pop(escopo, None)
        return
    texto = (
        "a chave da empresa %s em %s é do projeto '%s' (empresa %s): recusada para a"
        ' empresa %s, que NÃO recebe dado até a correção (com ela, os dados iriam para'
        ' o projeto da outra empresa). Corrija a linha da empresa %s no arquivo de'
        ' chaves: apague-a e rode o provisionar.py --somente-escopo=%s, que emite a'
        ' chave certa.'
        % (escopo, ctx.config.chaves, dono.get('name'), outra, escopo, escopo, escopo)
    )
    ctx.execucao.chaves_recusadas[escopo] = texto
    raise ErroChaveDeOutraEmpresa(texto)


def _dados_de_um(
    ctx: Contexto, alvo: DatasetVivo, chaves: Mapping[str, str], resumo: ResumoDados
) -> None:
    """Um dataset ao vivo: ler, repartir por empresa, enviar e só então confirmar."""
    acomp = ctx.estado.acompanhamento(alvo.nome)
    leitura = ctx.captura.ler(alvo)
    if not leitura.sondou:
        # Nada foi lido (a reconciliacao fora do intervalo dela): nem sonda boa, nem o
        # fim de uma sequencia de falhas.
        return
    _sonda_respondeu(acomp)
    if leitura.situacao in (Situacao.INICIO, Situacao.NADA):
        _nada_acima_da_marca(acomp)
        return
    grande = leitura.situacao is Situacao.GRANDE
    if grande and not _entregar_a_varredura(ctx, alvo, leitura, acomp):
        return

    reparticao = _repartir(ctx, alvo, leitura, chaves, resumo)
    envio, remocoes = _entregar(ctx, alvo, leitura, reparticao, chaves, resumo)
    acomp.enviados_ultimo_ciclo = envio.enviados
    _confirmar(ctx, alvo, leitura, acomp, envio, remocoes, grande=grande)
    resumo.datasets += 1
    resumo.registros += envio.enviados


def _sonda_respondeu(acomp: Acompanhamento) -> None:
    """A sonda respondeu: é a "última sonda boa" que a saúde vigia; as contagens recomeçam."""
    acomp.ultima_sonda = _agora_texto()
    acomp.novos = acomp.atualizados = acomp.iguais = 0


def _nada_acima_da_marca(acomp: Acompanhamento) -> None:
    """Nada acima da marca: nenhum envio pendente, o erro antigo já passou."""
    acomp.enviados_ultimo_ciclo = 0
    acomp.registrar_sucesso()


def _entregar_a_varredura(
    ctx: Contexto, alvo: DatasetVivo, leitura: Leitura, acomp: Acompanhamento
) -> bool:
    """
    Operação em massa: a varredura é a ferramenta certa -- fecha a carga e
    remove o que sumiu (marca_agua.passa_do_teto). True se a reconciliação
    trouxe chaves, que seguem ao vivo mesmo assim.
    """
    da_reconciliacao = (
        len(leitura.upserts)
        + len(leitura.remocoes)
        + sum(len(v) for v in leitura.remocoes_por_escopo.values())
    )
    logger.warning(
        '%-28s %s linhas mudaram (teto %s): entregue a VARREDURA, não ao incremental%s',
        alvo.nome,
        leitura.quantos,
        ctx.config.maximo,
        '; a reconciliação segue ao vivo (%d chave(s) agora)' % da_reconciliacao
        if da_reconciliacao
        else '',
    )
    ctx.estado.entregar_a_varredura(
        alvo.nome, '%s linhas em %s' % (leitura.quantos, _agora_texto())
    )
    acomp.enviados_ultimo_ciclo = 0
    return bool(da_reconciliacao)


def _repartir(
    ctx: Contexto,
    alvo: DatasetVivo,
    leitura: Leitura,
    chaves: Mapping[str, str],
    resumo: ResumoDados,
) -> Reparticao:
    """A leitura repartida por empresa, com os avisos do que não vai (ou não vai bem)."""
    resumo.atrasadas += leitura.atrasadas
    upserts = triar_chaves(ctx, alvo, leitura.upserts)
    reparticao = agrupar_por_escopo(upserts, ctx.config.mapa, alvo.row, chaves)
    avisar_sem_chave(
        ctx.config.mapa, ctx.execucao.avisados_sem_chave, alvo.nome, reparticao.sem_chave
    )
    if alvo.chave is None:
        # Sem `key` o servidor deduplica por hash do conteudo: a linha ALTERADA
        # entra como registro novo e a antiga fica ate a varredura. Aviso, nao
        # recusa: o incremental ainda vale para as inclusoes.
        logger.warning(
            '%-28s sem `key`: alteração vira registro NOVO (dedup por'
            ' hash). Até a varredura, o antigo fica.',
            alvo.nome,
        )
    return reparticao


def triar_chaves(ctx: Contexto, alvo: DatasetVivo, linhas: list[Linha]) -> list[Linha]:
    """
    As linhas do ciclo pela regra da key (intake/chaves.py), em toda estratégia:
    a key nula fica de fora, contada; da key repetida numa empresa vai só a
    linha da regra -- a mesma que a varredura deixa no Contextia. As duas são
    ditas no log e no status. Depois da marca de apagado: a captura já tirou a
    marcada da leitura (a viva vence), e o par viva + marcada não é repetido.
    """
    from contextia_sync.intake.chaves import Empresa, Triagem, textos_repetidas

    if alvo.chave is None or not linhas:
        return linhas
    coluna = alvo.escopo

    def empresa_de(linha: Linha) -> Empresa:
        return texto_escopo(linha.get(coluna)) if coluna else None

    triagem = Triagem(alvo.nome, alvo.chave, None, coluna)
    vao = triagem.triar(linhas, empresa_de)
    acomp = ctx.estado.acompanhamento(alvo.nome)
    if triagem.nulas:
        acomp.chaves_nulas = max(acomp.chaves_nulas or 0, triagem.total_nulas)
    if triagem.repetidas:
        ja = acomp.chaves_repetidas or []
        vistas = textos_repetidas(triagem.repetidas, _REPETIDAS_NO_STATUS)
        acomp.chaves_repetidas = (ja + [t for t in vistas if t not in ja])[-_REPETIDAS_NO_STATUS:]
    for texto in triagem.textos():
        logger.warning('%-28s %s', alvo.nome, texto)
    return vao


# As keys repetidas que o status de um dataset guarda (as últimas vistas).
_REPETIDAS_NO_STATUS = 10


def _entregar(
    ctx: Contexto,
    alvo: DatasetVivo,
    leitura: Leitura,
    reparticao: Reparticao,
    chaves: Mapping[str, str],
    resumo: ResumoDados,
) -> tuple[_Envio, _Envio | None]:
    """
    Os registros a cada empresa, as linhas de código inválido à quarentena e,
    só se os registros foram, as remoções (None: não tentadas).
    """
    if not ctx.config.seco:
        ctx.captura.antes_de_enviar(alvo, leitura)
    envio = _enviar(ctx, alvo, reparticao.grupos, chaves, resumo)
    if reparticao.invalidos:
        _quarentenar_invalidos(ctx, alvo, reparticao.invalidos, envio, resumo)
    remocoes = _enviar_remocoes(ctx, alvo, leitura, chaves, resumo) if envio.ok else None
    return envio, remocoes


def _confirmar(
    ctx: Contexto,
    alvo: DatasetVivo,
    leitura: Leitura,
    acomp: Acompanhamento,
    envio: _Envio,
    remocoes: _Envio | None,
    *,
    grande: bool,
) -> None:
    """
    A POSICAO SO AVANCA SE TUDO DEU CERTO (marca_agua.marca_apos_envio): falha
    de envio mantem a posicao velha e o proximo ciclo rele. Remocao que falhou
    nao segura os registros entregues: a posicao deles avanca, e as remocoes
    ficam para a proxima reconciliacao (o conjunto entregue nao as perde) ou,
    no `binlog`, no spool (ele so conclui a mudanca cuja remocao foi entregue).
    """
    if not envio.ok:
        ctx.captura.desistir(alvo)
        acomp.registrar_erro('%s %s' % (_agora_texto(), envio.erro), _agora_texto())
        logger.warning(
            '%-28s envio com erro: marca de água NÃO avançou (o próximo ciclo relê)', alvo.nome
        )
        return
    if ctx.config.seco:
        ctx.captura.desistir(alvo)  # o seco não entrega: o que tomou volta
        return
    assert remocoes is not None
    entregue = (
        leitura
        if remocoes.ok
        else dataclasses.replace(leitura, remocoes=[], remocoes_por_escopo={})
    )
    ctx.captura.confirmar(alvo, entregue)
    if not remocoes.ok:
        acomp.registrar_erro('%s %s' % (_agora_texto(), remocoes.erro), _agora_texto())
        logger.warning(
            '%-28s remoção com erro: os registros foram entregues, as'
            ' remoções ficam para a próxima reconciliação (no binlog, ficam no'
            ' spool)',
            alvo.nome,
        )
    elif not grande:
        # O dataset entregue a varredura (grande) so ela solta.
        acomp.registrar_sucesso()
        ctx.estado.soltar_da_varredura(alvo.nome)


def avisar_sem_chave(
    mapa: Mapa, avisados: set[tuple[str, str]], nome: str, escopos: Iterable[str]
) -> None:
    """
    Dado de empresa sem chave: nada e enviado para ela, e o operador precisa saber.

    Escopo em `excluded_scopes` fica de fora por decisão do mapeamento e não é
    avisado. Os outros podem ser empresa nova (o ciclo de projetos provisiona e
    faz a carga completa) ou empresa que a regra recusa (ex.: inativa): o aviso
    diz as duas coisas, porque daqui não se sabe qual -- quem sabe e o ciclo de
    projetos, que lista os recusados pela regra. Uma vez por empresa e subida.
    """
    excluidos = escopos_excluidos(mapa)
    novos = [e for e in escopos if e not in excluidos and (nome, e) not in avisados]
    if not novos:
        return
    avisados.update((nome, e) for e in novos)
    logger.warning(
        '%-28s dado de escopo sem chave: %s -- empresa nova e provisionada'
        ' pelo ciclo de projetos; se a regra de projeto a recusa, esses'
        ' dados ficam fora do Contextia',
        nome,
        ', '.join(novos[:6]),
    )


@dataclass
class _Envio:
    """O desfecho do envio de um dataset (registros, ou remoções) a todas as empresas."""

    ok: bool = True
    enviados: int = 0
    erro: str | None = None

    def falhou(self, erro: str) -> None:
        self.ok, self.erro = False, erro


def _enviar(
    ctx: Contexto,
    alvo: DatasetVivo,
    grupos: Mapping[str, list[Linha]],
    chaves: Mapping[str, str],
    resumo: ResumoDados,
) -> _Envio:
    """Envia cada grupo a sua empresa."""
    descricao, campos = mapeamento.semantica(ctx.config.mapa, alvo.row)
    envio = _Envio()
    for escopo, registros in sorted(grupos.items()):
        if ctx.parar():
            # Parada pedida: o resto fica para a proxima subida, e a marca NAO
            # avanca sobre o que nao foi confirmado.
            envio.falhou('parada pedida antes de enviar a empresa %s' % escopo)
            break
        if ctx.config.seco:
            logger.info(
                '%-28s [SECO] escopo=%-8s %s registro(s)', alvo.nome, escopo, len(registros)
            )
            envio.enviados += len(registros)
            continue
        try:
            conferir_dono(ctx, escopo, chaves[escopo])
            res = cliente.enviar_dataset(
                alvo.nome,
                registros,
                key=alvo.chave,
                description=descricao,
                fields=campos,
                group=mapeamento.grupo_de(ctx.config.mapa, alvo.row),
                chunk=mapeamento.chunk_de(ctx.config.mapa, alvo.row) or padroes.CHUNK,
                api_key=chaves[escopo],
                logger=logger,
                deve_parar=ctx.parar,
                escopo=escopo,
                # Registro recusado de vez (NaN, grande demais, 422) vai para a
                # quarentena e a marca segue: um registro envenenado nao segura
                # a empresa para sempre. Falha passageira nunca vai para la.
                quarentena=ctx.quarentena,
                # SEM CICLO DE CARGA -- o coracao da seguranca daqui. Sem `sync`
                # o servidor faz upsert e NAO remove nada; um incremental que
                # mandasse `complete` apagaria tudo que nao mudou no ultimo
                # minuto, ou seja, o dataset inteiro.
                sync=None,
            )
        except ErroContextia as falha:
            # Chave revogada de UMA empresa nao para as outras; a marca fica.
            resumo.erros += 1
            envio.falhou('escopo %s: %s: %s' % (escopo, type(falha).__name__, falha))
            logger.error('%-28s escopo=%-8s %s', alvo.nome, escopo, envio.erro)
            continue
        if res.lotes_erro:
            resumo.erros += res.lotes_erro
            envio.falhou(
                'escopo %s: %s lote(s) com erro: %s'
                % (escopo, res.lotes_erro, resumir('; '.join(res.erros or [])))
            )
        envio.enviados += res.registros
        resumo.quarentenados += res.quarentenados
        acomp = ctx.estado.acompanhamento(alvo.nome)
        acomp.novos += res.inserted
        acomp.atualizados += res.updated
        acomp.iguais += res.duplicates
        logger.info(
            '%-28s escopo=%-8s enviados=%-5s novos=%-4s atualizados=%-4s iguais=%-4s%s',
            alvo.nome,
            escopo,
            res.registros,
            res.inserted,
            res.updated,
            res.duplicates,
            ' QUARENTENA=%s' % res.quarentenados if res.quarentenados else '',
        )
    return envio


def _quarentenar_invalidos(
    ctx: Contexto,
    alvo: DatasetVivo,
    invalidos: Mapping[str, list[Linha]],
    envio: _Envio,
    resumo: ResumoDados,
) -> None:
    """
    As linhas cujo código de empresa não serve (`escopos.codigo_invalido`), na
    quarentena: nunca vão a projeto nenhum, e ficam nomeadas no status, na saúde
    e nas métricas (a contagem da quarentena por dataset) até a correção no ERP.

    Quarentena cheia ou que não grava: o envio do dataset falha e a marca não
    avança (nada se perde calado; o próximo ciclo tenta de novo).
    """
    for codigo, linhas in sorted(invalidos.items()):
        motivo = codigo_invalido(codigo) or codigo
        logger.error(
            '%-28s %d linha(s) com %s. NÃO enviadas a empresa nenhuma: vão para a'
            ' quarentena (%s). Corrija o código no ERP: a linha corrigida chega ao vivo, e o'
            ' reenvio da quarentena (a varredura, ou --reenviar-quarentena) tira a guardada.',
            alvo.nome,
            len(linhas),
            motivo,
            ctx.quarentena.pasta if ctx.quarentena is not None else 'quarentena/',
        )
        if ctx.config.seco or ctx.quarentena is None:
            continue
        for linha in linhas:
            registro, sem_json = serializar_parcial(linha)
            try:
                ctx.quarentena.guardar(
                    alvo.nome, codigo, alvo.chave, registro, motivo, invalidos=sem_json
                )
            except (ErroFilaCheia, OSError) as erro:
                envio.falhou('%s; e a quarentena não o guardou: %s' % (motivo, erro))
                return
            resumo.quarentenados += 1


def _enviar_remocoes(
    ctx: Contexto,
    alvo: DatasetVivo,
    leitura: Leitura,
    chaves: Mapping[str, str],
    resumo: ResumoDados,
) -> _Envio:
    """
    As chaves que sumiram da origem, removidas do Contextia empresa por empresa
    (`remove`, sem registros e sem `sync`), em lotes do `chunk` do dataset.

    Depois dos registros: a linha que mudou de empresa já chegou a nova quando
    sai da antiga. Dataset sem recorte: as mesmas chaves saem de toda empresa.
    """
    envio = _Envio()
    lote = mapeamento.chunk_de(ctx.config.mapa, alvo.row) or padroes.CHUNK
    for escopo, valores in sorted(_remocoes_por_escopo(leitura, chaves).items()):
        if ctx.parar():
            envio.falhou('parada pedida antes de remover da empresa %s' % escopo)
            break
        if ctx.config.seco:
            logger.info('%-28s [SECO] escopo=%-8s %s remoção(ões)', alvo.nome, escopo, len(valores))
            continue
        if not _empresa_remove(ctx, alvo, escopo, valores, chaves, envio):
            continue
        removidas = _remover_em_lotes(
            ctx, alvo, escopo, valores, chaves[escopo], lote, envio, resumo
        )
        envio.enviados += removidas
        resumo.removidas += removidas
        logger.info(
            '%-28s escopo=%-8s removidas=%-5s (de %s chave(s) que sumiram da origem)',
            alvo.nome,
            escopo,
            removidas,
            len(valores),
        )
    return envio


def _remocoes_por_escopo(
    leitura: Leitura, chaves: Mapping[str, str]
) -> dict[str, list[ValorDoBanco]]:
    """{escopo: chaves a remover}; as do dataset sem recorte vão a toda empresa com chave."""
    por_escopo: dict[str, list[ValorDoBanco]] = {
        e: list(v) for e, v in leitura.remocoes_por_escopo.items() if v
    }
    if leitura.remocoes:
        for escopo in chaves:
            por_escopo.setdefault(escopo, []).extend(leitura.remocoes)
    return por_escopo


def _empresa_remove(
    ctx: Contexto,
    alvo: DatasetVivo,
    escopo: str,
    valores: list[ValorDoBanco],
    chaves: Mapping[str, str],
    envio: _Envio,
) -> bool:
    """
    A empresa pode receber a remoção? O código inválido não tem o que remover
    (avisado); a da empresa sem chave vai para a quarentena, nomeada, e o resto
    segue (sem quarentena, o envio falha e a remoção fica pendente).
    """
    invalido = codigo_invalido(escopo)
    if invalido:
        # Linha com codigo invalido nunca e entregue (vai para a quarentena):
        # nao ha o que remover, e a remocao nao pode ficar pendente para sempre.
        logger.warning(
            '%-28s %d remoção(ões) com %s: nada a remover (linha assim nunca é entregue)',
            alvo.nome,
            len(valores),
            invalido,
        )
        return False
    if escopo not in chaves and _sem_projeto(ctx, escopo):
        # Excluída no mapeamento, ou recusada pela regra: nunca teve projeto, e a
        # linha dela nunca foi entregue. Nada a remover (nem a esperar).
        logger.info(
            '%-28s escopo=%-8s %d remoção(ões) sem o que remover: a empresa não tem'
            ' projeto (excluída no mapeamento ou recusada pela regra de projeto)',
            alvo.nome,
            escopo,
            len(valores),
        )
        return False
    if escopo not in chaves and ctx.quarentena is not None:
        _quarentenar_remocoes(ctx, alvo, escopo, valores, envio)
        return False
    if escopo not in chaves:
        envio.falhou(
            'escopo %s: sem chave no arquivo de chaves; %d remoção(ões) não'
            ' enviada(s)' % (escopo, len(valores))
        )
        return False
    return True


def _sem_projeto(ctx: Contexto, escopo: str) -> bool:
    """A empresa que nunca tem projeto: excluída no mapeamento, ou recusada pela regra."""
    return escopo in escopos_excluidos(ctx.config.mapa) or escopo in (
        ctx.execucao.recusadas_pela_regra
    )


def _quarentenar_remocoes(
    ctx: Contexto, alvo: DatasetVivo, escopo: str, valores: list[ValorDoBanco], envio: _Envio
) -> None:
    """
    A remoção que não tem para onde ir (a empresa saiu do arquivo de chaves):
    nunca segura o spool nem o resto do dataset. Vai para a quarentena com o
    motivo; o reenvio a tira quando a empresa tiver chave, e a varredura que
    fechar a empresa a descarta. Quarentena cheia: o envio falha (fica pendente).
    """
    assert ctx.quarentena is not None
    motivo = (
        'remoção sem destino: a empresa %s não tem chave no arquivo de chaves (%s);'
        ' sai quando ela tiver (provisionar.py) ou quando a varredura a fechar'
        % (escopo, ctx.config.chaves)
    )
    try:
        for valor in valores:
            ctx.quarentena.guardar(
                alvo.nome, escopo, alvo.chave, {alvo.chave or '': valor}, motivo, remocao=True
            )
    except ErroQuarentenaCheia as cheia:
        envio.falhou(str(cheia))
        return
    logger.warning(
        '%-28s escopo=%-8s %d remoção(ões) para a QUARENTENA: %s',
        alvo.nome,
        escopo,
        len(valores),
        motivo,
    )


def _remover_em_lotes(
    ctx: Contexto,
    alvo: DatasetVivo,
    escopo: str,
    valores: list[ValorDoBanco],
    chave: str,
    lote: int,
    envio: _Envio,
    resumo: ResumoDados,
) -> int:
    """As remoções de uma empresa, lote a lote; para no primeiro que falha. Quantas saíram."""
    removidas = 0
    for inicio in range(0, len(valores), lote):
        try:
            res = cliente.enviar_dataset(
                alvo.nome,
                [],
                key=alvo.chave,
                api_key=chave,
                logger=logger,
                remove=valores[inicio : inicio + lote],
                deve_parar=ctx.parar,
                escopo=escopo,
                sync=None,
            )
        except ErroContextia as falha:
            resumo.erros += 1
            envio.falhou('escopo %s: remoção: %s: %s' % (escopo, type(falha).__name__, falha))
            logger.error('%-28s escopo=%-8s %s', alvo.nome, escopo, envio.erro)
            break
        if res.lotes_erro:
            resumo.erros += res.lotes_erro
            envio.falhou(
                'escopo %s: remoção com erro: %s' % (escopo, resumir('; '.join(res.erros or [])))
            )
            break
        removidas += res.removed
    return removidas


def _codigo_invalido_na_origem(ctx: Contexto, item: ItemQuarentena, invalido: str) -> Desfecho:
    """
    A linha guardada por código de empresa inválido ainda o tem na origem?

    Relida pela key: se nenhuma linha com essa key traz mais aquele código (o ERP
    o corrigiu, ou apagou a linha), o item sai -- a linha corrigida chega pelo
    ao-vivo ou pela varredura, com a empresa certa. Se ainda traz, ou se não dá
    para saber (dataset fora do ao-vivo, sem key, a origem fora), fica.
    """
    alvo = next((a for a in ctx.config.vivos if a.nome == item.dataset), None)
    if alvo is None or alvo.chave is None or alvo.escopo is None or item.chave_valor is None:
        return Desfecho.pendente('%s: corrija o código no ERP e apague este arquivo' % invalido)
    # A coluna da empresa vai junto mesmo fora de `columns`: é ela que se confere.
    colunas = list(dict.fromkeys([*alvo.colunas, alvo.chave, alvo.escopo]))
    try:
        linhas = list(
            ctx.origem.fetch(alvo.source_object, colunas, chaves=(alvo.chave, [item.chave_valor]))
        )
    except Exception as erro:  # noqa: BLE001 - a origem fora não tira nada da quarentena
        return Desfecho.pendente('%s; a origem não respondeu (%s)' % (invalido, resumir(str(erro))))
    if any(texto_escopo(linha.get(alvo.escopo)) == item.escopo for linha in linhas):
        return Desfecho.pendente('%s: corrija o código no ERP (a linha ainda o tem)' % invalido)
    logger.warning(
        'quarentena: %s saiu -- a origem não tem mais %s nessa linha (o código foi'
        ' corrigido ou a linha apagada); a versão certa chega pelo ao-vivo ou pela varredura',
        item.descricao(),
        invalido,
    )
    return Desfecho.entregue()


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
        escopo = texto_escopo(item.escopo)
        invalido = codigo_invalido(escopo)
        if invalido:
            return _codigo_invalido_na_origem(ctx, item, invalido)
        chave = chaves.get(escopo)
        if item.remocao and chave is None and _sem_projeto(ctx, escopo):
            return Desfecho.entregue()  # a empresa nunca terá projeto: nada a remover
        if chave is not None and item.escopo is not None:
            try:
                conferir_dono(ctx, escopo, chave)
            except (ErroChaveDeOutraEmpresa, cliente.ErroAutenticacao) as erro:
                return Desfecho.pendente(str(erro))
            except ErroContextia as erro:
                return Desfecho.falhou(str(erro), interromper=True)
        return cliente.reenviar_item(item, api_key=chave, logger=logger, deve_parar=ctx.parar)

    resultado = ctx.quarentena.reenviar(enviar, deve_parar=ctx.parar)
    logger.warning(
        'quarentena reenviada: %s entregue(s), %s recusado(s) de novo, %s'
        ' pendente(s), %s falha(s); ficam %s',
        resultado.entregues,
        resultado.recusados,
        resultado.pendentes,
        resultado.falhas,
        resultado.restantes,
    )
    for mensagem in resultado.mensagens[:20]:
        logger.warning('  quarentena: %s', mensagem)
    return resultado
