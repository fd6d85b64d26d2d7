"""
O conteúdo dos arquivos de status: o .txt (`linhas_status`) e o .json
(`status_json`), dos mesmos dados -- o Contexto e o estado.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from typing import cast

from contextia_sync import padroes
from contextia_sync.captura import DatasetVivo, marca_agua
from contextia_sync.captura.ao_vivo import ESTRATEGIAS_DE_LOG, e_so_varredura
from contextia_sync.erros import resumir
from contextia_sync.estado.status import VERSAO_STATUS
from contextia_sync.intake import cliente
from contextia_sync.ouvinte.contexto import Contexto
from contextia_sync.tipos import Json, ObjetoJson


def linhas_status(ctx: Contexto, resumos: Mapping[str, str]) -> list[str]:
    """As linhas do status; `resumos` são as linhas do último ciclo de cada tipo."""
    agora = datetime.datetime.now()
    linhas = _linhas_do_ouvinte(ctx, agora)
    tabela, alerta = tabela_datasets(ctx)
    if alerta:
        linhas.append(
            'ATENÇÃO FOLGA .....: chegadas atrasadas passaram da metade da'
            ' --folga em %s -- aumente --folga ou fale com o DBA' % ', '.join(alerta)
        )
    linhas.extend(_linhas_da_quarentena(ctx))
    linhas.extend(_linhas_das_chaves(ctx))
    for recusada in empresas_recusadas(ctx):
        linhas.append(
            "EMPRESA RECUSADA ..: '%s' (%s): %s"
            % (recusada['escopo'], recusada['onde'], recusada['motivo'])
        )
    linhas.append(_linha_da_ferramenta(ctx, agora))
    linhas.extend(_linhas_da_captura(captura_no_status(ctx)))
    linhas.extend(resumos.values())
    linhas.extend(_linhas_do_que_espera(ctx))
    linhas.append('')
    linhas.extend(tabela)
    if ctx.config.intervalo_reconciliacao is not None:
        linhas.append('')
        linhas.extend(tabela_reconciliacao(ctx))
    return linhas


def _linhas_do_ouvinte(ctx: Contexto, agora: datetime.datetime) -> list[str]:
    """O cabeçalho do status: o processo, o cliente, a estratégia, as falhas, a varredura."""
    situacao = {'rodando': 'ativo', 'parando': 'parando', 'parado': 'PARADO'}
    return [
        'ouvinte ...........: %s'
        % ('SECO (não envia)' if ctx.config.seco else situacao[ctx.execucao.situacao]),
        'pid ...............: %s' % os.getpid(),
        'atualizado em .....: %s' % agora.strftime('%Y-%m-%d %H:%M:%S'),
        'cliente ...........: %s' % (ctx.config.mapa.get('client') or '-'),
        'destino ...........: %s' % cliente.url_destino(),
        'estratégia ........: %s' % ctx.config.estrategia,
        'datasets ao vivo ..: %s de %s'
        % (len(ctx.config.vivos), len(ctx.config.mapa.get('datasets') or [])),
        'falhas seguidas ...: %s' % ctx.execucao.falhas,
        'última varredura ..: %s' % _texto_varredura(ctx),
    ]


def _linhas_da_quarentena(ctx: Contexto) -> list[str]:
    """A quarentena e o que fazer com ela (nenhuma linha no seco, que não tem quarentena)."""
    if ctx.quarentena is None:
        return []
    por_dataset = ctx.quarentena.por_dataset()
    total = sum(por_dataset.values())
    detalhe = (
        ' (%s) -- recusados de vez pelo intake; corrija na origem ou reenvie com'
        ' ouvinte.py --reenviar-quarentena'
        % ', '.join('%s %s' % item for item in sorted(por_dataset.items()))
    )
    return ['quarentena ........: %s registro(s)%s' % (total, detalhe if total else '')]


def _linhas_das_chaves(ctx: Contexto) -> list[str]:
    """
    As keys nulas e as repetidas de cada dataset ao vivo (a regra em
    intake/chaves.py): a linha de fora, contada e nomeada até a view ser corrigida.
    """
    from contextia_sync.intake.chaves import aviso_das_nulas

    linhas = []
    for alvo in ctx.config.vivos:
        a = ctx.estado.acompanhamento(alvo.nome)
        if a.chaves_nulas:
            linhas.append('KEY NULA ..........: %s' % aviso_das_nulas(a.chaves_nulas, alvo.nome))
        linhas.extend('KEY REPETIDA ......: %s' % texto for texto in a.chaves_repetidas or ())
    return linhas


def _linha_da_ferramenta(ctx: Contexto, agora: datetime.datetime) -> str:
    """A ferramenta filha rodando agora (a varredura, a carga), e há quanto tempo."""
    f = ctx.execucao.ferramenta_agora
    if not f:
        return 'ferramenta agora ..: nenhuma'
    return 'ferramenta agora ..: %s (pid %s, desde %s, há %ss)' % (
        f.rotulo,
        f.pid,
        f.desde.strftime('%Y-%m-%d %H:%M:%S'),
        int((agora - f.desde).total_seconds()),
    )


def _linhas_do_que_espera(ctx: Contexto) -> list[str]:
    """As cargas iniciais por refazer e os datasets entregues a varredura."""
    linhas = []
    cargas = ctx.estado.cargas_pendentes()
    if cargas:
        linhas.append(
            'cargas iniciais pendentes: %s (refeitas no próximo ciclo de projetos)'
            % ', '.join(cargas)
        )
    pendentes = ctx.estado.pendentes()
    if pendentes:
        linhas.append(
            'entregues a varredura: %s'
            % ', '.join('%s (%s)' % (n, t) for n, t in sorted(pendentes.items()))
        )
    return linhas


def empresas_recusadas(ctx: Contexto) -> list[ObjetoJson]:
    """
    As empresas que não recebem dado por recusa, para o status: `onde` diz qual.

      cadastro  o código da empresa no cadastro do ERP não serve (TAB, quebra de
                linha, ...): nunca provisionada; `motivo` diz o caractere
      chave     a chave da linha dela no arquivo de chaves e de outro projeto:
                nada vai para ela até a correção; `motivo` diz o que fazer
    """
    recusadas: list[ObjetoJson] = [
        {'escopo': c.codigo, 'onde': 'cadastro', 'motivo': c.motivo}
        for c in ctx.execucao.codigos_recusados
    ]
    recusadas += [
        {'escopo': escopo, 'onde': 'chave', 'motivo': motivo}
        for escopo, motivo in sorted(ctx.execucao.chaves_recusadas.items())
    ]
    return recusadas


def _captura_de(ctx: Contexto, alvo: DatasetVivo) -> str:
    """O que acompanha este dataset: o log (binlog, slot), a coluna, a reconciliacao."""
    nome = getattr(ctx.captura, 'nome', '')
    if nome in ESTRATEGIAS_DE_LOG:
        return nome  # todo dataset ao vivo dela e do log, com ou sem coluna
    return '+'.join(
        nome for nome, sim in (('coluna', alvo.watch), ('reconciliacao', alvo.reconcilia)) if sim
    )


def tabela_reconciliacao(ctx: Contexto) -> list[str]:
    """Uma linha por dataset da reconciliacao: a última, as chaves, o que saiu, a recusa."""
    formato = '%-28s %-20s %9s %10s %10s %10s  %s'
    linhas = [
        'reconciliação a cada %ss (teto de remoção %.0f%% por empresa):'
        % (ctx.config.intervalo_reconciliacao, 100.0 * padroes.MAX_REMOCAO),
        formato
        % (
            'dataset',
            'ultima',
            'chaves',
            'removidas',
            'incluidas',
            'total rem.',
            'recusa / último erro',
        ),
    ]
    for alvo in ctx.config.vivos:
        if not alvo.reconcilia:
            linhas.append(
                '%-28s fora da reconciliação: sem key (a exclusão só na varredura)' % alvo.nome
            )
            continue
        r = ctx.estado.reconciliacao(alvo.nome)
        problema = (
            'RECUSADA desde %s: %s' % (r.recusa_desde, r.recusa)
            if r.recusa
            else r.ultimo_erro or ''
        )
        linhas.append(
            formato
            % (
                alvo.nome,
                r.ultima_em or '(ainda não)',
                '-' if r.chaves is None else r.chaves,
                r.removidas,
                r.incluidas,
                r.removidas_total,
                problema,
            )
        )
    return linhas


def _reconciliacao_json(
    ctx: Contexto, alvo: DatasetVivo, agora: datetime.datetime
) -> ObjetoJson | None:
    """O objeto `reconciliacao` de um dataset no status (None: a estratégia não reconcilia)."""
    if ctx.config.intervalo_reconciliacao is None:
        return None
    if not alvo.reconcilia:
        return {'ativa': False, 'motivo': 'sem key: a exclusão só sai na varredura'}
    r = ctx.estado.reconciliacao(alvo.nome)
    return {
        'ativa': True,
        'ultima_em': r.ultima_em,
        'tentada_em': r.tentada_em,
        'segundos_desde_ultima': _segundos_desde(r.ultima_em, agora),
        'duracao_s': r.duracao_s,
        'chaves': r.chaves,
        'empresas': r.empresas,
        'removidas': r.removidas,
        'incluidas': r.incluidas,
        'removidas_total': r.removidas_total,
        'incluidas_total': r.incluidas_total,
        'recusa': r.recusa,
        'recusa_desde': r.recusa_desde,
        'ultimo_erro': r.ultimo_erro,
        'erro_desde': r.erro_desde,
        'falhas_seguidas': r.falhas_seguidas,
    }


def _linhas_da_captura(bloco: Mapping[str, Json] | None) -> list[str]:
    """As linhas do bloco `captura` (só o `binlog` e o `slot_logico` têm um)."""
    if not bloco:
        return []
    # O bloco é o que a captura monta (`para_o_status`): os bytes são números e
    # `spool_devolvidos` uma lista de nomes; o `Json` não o diz, os casts abaixo sim.
    linhas = [
        'posição do log ....: %s (atraso da origem %ss)'
        % (
            bloco.get('posicao') or '-',
            '?' if bloco.get('atraso_origem_s') is None else bloco['atraso_origem_s'],
        ),
        'spool .............: %s mudança(s), %.1f MiB, a mais velha há %ss'
        % (
            bloco.get('spool_itens'),
            cast(float, bloco.get('spool_bytes') or 0) / 1048576,
            '-' if bloco.get('spool_idade_s') is None else bloco['spool_idade_s'],
        ),
    ]
    if bloco.get('slot'):
        linhas.append(
            'slot lógico .......: %s, WAL retido %s%s'
            % (
                bloco['slot'],
                '?'
                if bloco.get('wal_retido_bytes') is None
                else '%.1f MiB' % (cast(float, bloco['wal_retido_bytes']) / 1048576),
                ''
                if bloco.get('wal_seguro_bytes') is None
                else ' (invalidado em mais %.1f MiB)'
                % (cast(float, bloco['wal_seguro_bytes']) / 1048576),
            )
        )
    if bloco.get('spool_devolvidos'):
        linhas.append(
            'spool re-enfileirado: %s (destino desconhecido: o ouvinte anterior'
            ' morreu no meio da entrega; reenviado, o intake é idempotente)'
            % ', '.join(cast('list[str]', bloco['spool_devolvidos'])[:10])
        )
    if bloco.get('pausada'):
        linhas.append('CAPTURA PAUSADA ...: %s' % bloco['pausada'])
    if bloco.get('critico'):
        linhas.append('CRÍTICO ...........: %s' % bloco['critico'])
    return linhas


def _texto_varredura(ctx: Contexto) -> str:
    """O dia da última varredura e como ela terminou (do estado: sobrevive a reinício)."""
    v = ctx.estado.dados.varredura
    dia = ctx.estado.varredura_feita_em() or 'nenhuma'
    if v.iniciada_em and not v.terminada_em:
        return '%s; uma EM CURSO (ou morta no meio) desde %s' % (dia, v.iniciada_em)
    if v.ok is False:
        problemas = list(v.erros) + [
            '%s não fechou em %s' % (d, ', '.join(e[:5])) for d, e in sorted(v.nao_fechados.items())
        ]
        return '%s -- FALHOU em %s: %s' % (dia, v.terminada_em, resumir('; '.join(problemas)))
    if v.ok is None and v.erros:
        return '%s -- a de %s foi %s' % (dia, v.terminada_em, resumir('; '.join(v.erros)))
    return dia + (' (ok)' if v.ok else '')


def tabela_datasets(ctx: Contexto) -> tuple[list[str], list[str]]:
    """Uma linha por dataset: qual está parado se vê sem ler o log."""
    formato = '%-28s %-26s %-20s %-20s %8s %9s %9s %7s %11s  %s'
    linhas = [
        formato
        % (
            'dataset',
            'marca de água',
            'última sonda',
            'última mudança vista',
            'enviados',
            'atrasadas',
            'maior(s)',
            'futuro',
            'sem carimbo',
            'último erro',
        )
    ]
    alerta = []
    for alvo in ctx.config.vivos:
        a = ctx.estado.acompanhamento(alvo.nome)
        marca = ctx.estado.marca(alvo.nome)
        maior = a.maior_atraso_s
        if marca_agua.atraso_preocupante(maior, marca, ctx.config.folga):
            alerta.append(alvo.nome)
        linhas.append(
            formato
            % (
                alvo.nome,
                marca if marca is not None else '(ainda não)',
                a.ultima_sonda or '-',
                a.ultima_mudanca_vista or '-',
                '-' if a.enviados_ultimo_ciclo is None else a.enviados_ultimo_ciclo,
                a.atrasadas_total,
                '-' if maior is None else int(maior),
                a.futuras,
                '-' if a.sem_carimbo is None else a.sem_carimbo,
                a.ultimo_erro or '',
            )
        )
    for nome, motivo in ctx.config.fora:
        linhas.append('%-28s fora do ao-vivo: %s' % (cliente.normalizar_dataset(nome), motivo))
    return linhas, alerta


def _segundos_desde(texto: str | None, agora: datetime.datetime) -> float | None:
    if not texto:
        return None
    try:
        return round((agora - datetime.datetime.fromisoformat(texto)).total_seconds(), 1)
    except ValueError:
        return None


def status_json(ctx: Contexto, ciclos: Mapping[str, Mapping[str, Json]]) -> ObjetoJson:
    """
    O `ouvinte-status.json`: os mesmos dados do .txt, para as máquinas.

    `ciclos` e o resumo do último ciclo de cada tipo (dados, projetos,
    varredura, falha). Esquema: docs/ouvinte.md ("ouvinte-status.json").
    """
    agora = datetime.datetime.now()
    quarentena = ctx.quarentena.por_dataset() if ctx.quarentena is not None else {}
    datasets: list[Json] = [
        _dataset_json(ctx, alvo, agora, quarentena) for alvo in ctx.config.vivos
    ]
    datasets += [
        {
            'dataset': cliente.normalizar_dataset(nome),
            'ao_vivo': False,
            'motivo': motivo,
            # Correção por fazer (a view sem `base_tables` no log): a saúde avisa.
            'so_varredura': e_so_varredura(motivo),
        }
        for nome, motivo in ctx.config.fora
    ]
    # A ordem das chaves e a do arquivo (e a que docs/ouvinte.md descreve).
    dados: ObjetoJson = {
        'versao': VERSAO_STATUS,
        'ouvinte': _ouvinte_json(ctx, agora),
        'ciclos': {nome: dict(dados) for nome, dados in ciclos.items()},
        'varredura': _varredura_json(ctx),
        'ferramenta': _ferramenta_json(ctx),
        'quarentena': {'total': sum(quarentena.values()), 'por_dataset': dict(quarentena)},
        'empresas_recusadas': list(empresas_recusadas(ctx)),
        'cargas_iniciais_pendentes': list(ctx.estado.cargas_pendentes()),
        'entregues_a_varredura': dict(ctx.estado.pendentes()),
        'captura': captura_no_status(ctx),
        'datasets': datasets,
    }
    dados['saude'] = saude_no_status(dados, agora)
    return dados


def saude_no_status(dados: Mapping[str, Json], agora: datetime.datetime) -> ObjetoJson:
    """
    O veredito da MESMA tabela de verificações do `--saude`
    (`saude_verificacoes.avaliar`), com os limites padrão, sobre o status que
    acabou de ser montado: o status e as métricas dizem o que a saúde diria
    agora. O que só quem lê de fora julga -- o arquivo parado, o processo morto
    -- continua com o `--saude`.
    """
    from contextia_sync.saude_verificacoes import NOMES, Limites, avaliar

    veredito = avaliar(dados, Limites(conferir_pid=False), agora, idade_arquivo=0.0)
    ordem = sorted(veredito.motivos, key=lambda m: -m.nivel)
    return {'nivel': NOMES[veredito.nivel], 'motivos': [m.texto for m in ordem if m.nivel > 0]}


def _ouvinte_json(ctx: Contexto, agora: datetime.datetime) -> ObjetoJson:
    """O objeto `ouvinte`: o processo, o modo e o que o operador escolheu."""
    return {
        'pid': os.getpid(),
        'situacao': ctx.execucao.situacao,
        'modo': ctx.config.modo,
        'iniciado_em': ctx.config.iniciado_em,
        'atualizado_em': agora.isoformat(timespec='seconds'),
        'cliente': ctx.config.mapa.get('client'),
        'destino': cliente.url_destino(),
        'estrategia': ctx.config.estrategia,
        'intervalo_dados_s': ctx.config.intervalo_dados,
        'intervalo_reconciliacao_s': ctx.config.intervalo_reconciliacao,
        'folga_s': ctx.config.folga,
        'falhas_seguidas': ctx.execucao.falhas,
        'datasets_ao_vivo': len(ctx.config.vivos),
        'datasets_total': len(ctx.config.mapa.get('datasets') or []),
    }


def _varredura_json(ctx: Contexto) -> ObjetoJson:
    """O objeto `varredura`: a hora marcada e como foi a última."""
    varredura = ctx.estado.dados.varredura
    return {
        'hora': ('%02d:%02d' % ctx.config.varredura) if ctx.config.varredura else None,
        'ultima_em': ctx.estado.varredura_feita_em(),
        'iniciada_em': varredura.iniciada_em,
        'terminada_em': varredura.terminada_em,
        'ok': varredura.ok,
        'erros': list(varredura.erros),
        'nao_fechados': {nome: list(e) for nome, e in varredura.nao_fechados.items()},
        'ultima_ok_em': varredura.ultima_ok_em,
    }


def _ferramenta_json(ctx: Contexto) -> ObjetoJson | None:
    """O objeto `ferramenta`: a filha rodando agora (None: nenhuma)."""
    f = ctx.execucao.ferramenta_agora
    if f is None:
        return None
    return {'rotulo': f.rotulo, 'pid': f.pid, 'desde': f.desde.isoformat(timespec='seconds')}


def _dataset_json(
    ctx: Contexto, alvo: DatasetVivo, agora: datetime.datetime, quarentena: Mapping[str, int]
) -> ObjetoJson:
    """Um dataset ao vivo no status: a marca, a sonda, os envios, os atrasos, o erro."""
    a = ctx.estado.acompanhamento(alvo.nome)
    return {
        'dataset': alvo.nome,
        'ao_vivo': True,
        'marca_agua': ctx.estado.marca(alvo.nome),
        'ultima_sonda_ok_em': a.ultima_sonda,
        'segundos_desde_sonda_ok': _segundos_desde(a.ultima_sonda, agora),
        'atraso_origem_s': a.atraso_origem_s,
        'enviados': a.enviados_ultimo_ciclo,
        'novos': a.novos,
        'atualizados': a.atualizados,
        'iguais': a.iguais,
        'ultima_mudanca_vista_em': a.ultima_mudanca_vista,
        'atrasadas_total': a.atrasadas_total,
        'maior_atraso_s': a.maior_atraso_s,
        'atraso_preocupante': marca_agua.atraso_preocupante(
            a.maior_atraso_s, ctx.estado.marca(alvo.nome), ctx.config.folga
        ),
        'quarentena': quarentena.get(alvo.nome, 0),
        'sem_carimbo': a.sem_carimbo,
        'chaves_nulas': a.chaves_nulas,
        'chaves_repetidas': list(a.chaves_repetidas or ()),
        'futuras': a.futuras,
        'ultimo_erro': a.ultimo_erro,
        'erro_desde': a.erro_desde,
        'falhas_seguidas': a.falhas_seguidas,
        'entregue_a_varredura': ctx.estado.pendentes().get(alvo.nome),
        'captura': _captura_de(ctx, alvo),
        'reconciliacao': _reconciliacao_json(ctx, alvo, agora),
    }


def captura_no_status(ctx: Contexto) -> ObjetoJson | None:
    """O bloco da estratégia (posição, spool, atraso) se ela o da (`binlog`); senão None."""
    bloco = getattr(ctx.captura, 'para_o_status', None)
    return bloco() if callable(bloco) else None
