"""O conteudo do ouvinte-status.txt: saude geral, ferramenta agora, e cada dataset."""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping

from contextia_sync.captura import marca_agua
from contextia_sync.intake import cliente
from contextia_sync.ouvinte.contexto import Contexto


def linhas_status(ctx: Contexto, resumos: Mapping[str, str]) -> list[str]:
    """As linhas do status; `resumos` sao as linhas do ultimo ciclo de cada tipo."""
    agora = datetime.datetime.now()
    linhas = [
        'ouvinte ...........: %s' % ('SECO (nao envia)' if ctx.seco else 'ativo'),
        'pid ...............: %s' % os.getpid(),
        'atualizado em .....: %s' % agora.strftime('%Y-%m-%d %H:%M:%S'),
        'cliente ...........: %s' % (ctx.mapa.get('client') or '-'),
        'destino ...........: %s' % cliente.url_destino(),
        'estrategia ........: %s' % ctx.estrategia,
        'datasets ao vivo ..: %s de %s' % (len(ctx.vivos), len(ctx.mapa.get('datasets') or [])),
        'falhas seguidas ...: %s' % ctx.falhas,
        'ultima varredura ..: %s' % (ctx.estado.varredura_feita_em() or 'nenhuma'),
    ]
    tabela, alerta = tabela_datasets(ctx)
    if alerta:
        linhas.append('ATENCAO FOLGA .....: chegadas atrasadas passaram da metade da'
                      ' --folga em %s -- aumente --folga ou fale com o DBA'
                      % ', '.join(alerta))
    f = ctx.ferramenta_agora
    if f:
        linhas.append('ferramenta agora ..: %s (pid %s, desde %s, ha %ss)' % (
            f.rotulo, f.pid, f.desde.strftime('%Y-%m-%d %H:%M:%S'),
            int((agora - f.desde).total_seconds())))
    else:
        linhas.append('ferramenta agora ..: nenhuma')
    linhas.extend(resumos.values())
    cargas = ctx.estado.cargas_pendentes()
    if cargas:
        linhas.append('cargas iniciais pendentes: %s (refeitas no proximo ciclo de projetos)'
                      % ', '.join(cargas))
    pendentes = ctx.estado.pendentes()
    if pendentes:
        linhas.append('entregues a varredura: %s' % ', '.join(
            '%s (%s)' % (n, t) for n, t in sorted(pendentes.items())))
    linhas.append('')
    linhas.extend(tabela)
    return linhas


def tabela_datasets(ctx: Contexto) -> tuple[list[str], list[str]]:
    """Uma linha por dataset: qual esta parado se ve sem ler o log."""
    formato = '%-28s %-26s %-20s %-20s %8s %9s %9s  %s'
    linhas = [formato % ('dataset', 'marca de agua', 'ultima sonda', 'ultima mudanca vista',
                         'enviados', 'atrasadas', 'maior(s)', 'ultimo erro')]
    alerta = []
    for alvo in ctx.vivos:
        a = ctx.estado.acompanhamento(alvo.nome)
        marca = ctx.estado.marca(alvo.nome)
        maior = a.maior_atraso_s
        if marca_agua.atraso_preocupante(maior, marca, ctx.folga):
            alerta.append(alvo.nome)
        linhas.append(formato % (
            alvo.nome, marca if marca is not None else '(ainda nao)',
            a.ultima_sonda or '-', a.ultima_mudanca_vista or '-',
            '-' if a.enviados_ultimo_ciclo is None else a.enviados_ultimo_ciclo,
            a.atrasadas_total, '-' if maior is None else int(maior), a.ultimo_erro or ''))
    for nome, motivo in ctx.fora:
        linhas.append('%-28s fora do ao-vivo: %s' % (cliente.normalizar_dataset(nome), motivo))
    return linhas, alerta
