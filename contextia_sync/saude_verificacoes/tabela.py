"""
A tabela das verificações: cada uma, uma função pequena do `Retrato` que
devolve um `Resultado`; `avaliar` dobra a tabela num `Veredito`.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, NamedTuple, TypeAlias, cast

from contextia_sync.estado.status import ARQUIVO_STATUS_JSON
from contextia_sync.saude_verificacoes.registros import (
    ALERTA,
    CRITICO,
    Limites,
    Medida,
    Resultado,
    Veredito,
    erro_curto,
    limpo,
)
from contextia_sync.saude_verificacoes.retrato import (
    Retrato,
    horas,
    inteiro,
    ler_retrato,
    numero,
    pid_vivo,
    quando,
    secao,
    seg,
)

if TYPE_CHECKING:  # só o tipo: quem mede (abre a origem) é o saude.py
    from contextia_sync.captura.medida_do_log import LogMedido
    from contextia_sync.tipos import Json

# A ordem dos dados de desempenho na linha (os gráficos do monitoramento os
# acham pelo nome; a ordem só muda o que o operador lê).
ORDEM_DAS_MEDIDAS = (
    'idade_status',
    'datasets_ao_vivo',
    'falhas_seguidas',
    'falhas_dataset_max',
    'sem_ciclo_bom_max',
    'quarentena',
    'sem_carimbo',
    'futuras',
    'maior_atraso',
    'empresas_recusadas',
    'chaves_removidas',
    'reconciliacoes_recusadas',
    'wal_retido',
    'binlog_pendente',
    'idade_varredura_ok',
)


# ------------------------------------------------------------------ o processo
def _situacao(r: Retrato) -> Resultado:
    """O processo morto ou parado (o status ainda diz o contrário)."""
    if r.pid_ok is False and r.servico:
        return Resultado().anotar(
            CRITICO,
            'o ouvinte (pid %d) morreu sem parar: o status de'
            ' %s ainda diz "%s"' % (r.pid, r.atualizado_txt, r.situacao),
        )
    if r.situacao == 'parado' and r.servico:
        return Resultado().anotar(
            CRITICO,
            'ouvinte PARADO: o serviço saiu em %s (systemctl status ouvinte)' % r.atualizado_txt,
        )
    if r.pid_ok is False:
        return Resultado().anotar(
            ALERTA,
            'a execução %s (pid %d) morreu sem terminar (status'
            ' de %s); a próxima execução recomeça' % (r.modo, r.pid, r.atualizado_txt),
        )
    return Resultado()


def _idade_status(r: Retrato) -> Resultado:
    """O status velho: CRITICO, com a causa provável."""
    resultado = Resultado().medir(Medida('idade_status', r.idade or 0, 's', critico=r.max_idade))
    if r.parou_no_servico:
        return resultado
    if r.idade is None:
        return resultado.anotar(CRITICO, '%s sem atualizado_em' % ARQUIVO_STATUS_JSON)
    if r.idade <= r.max_idade:
        return resultado
    if r.no_ar and r.pid_ok:
        causa = 'com o pid %d vivo: o ouvinte travou' % r.pid
    elif r.servico or r.no_ar:
        causa = 'o ouvinte parou ou travou (journalctl -u ouvinte)'
    else:
        causa = 'nenhuma execução %s desde então: o cron parou?' % r.modo
    return resultado.anotar(
        CRITICO,
        'status de %s não é atualizado há %s (limite %s): %s'
        % (r.atualizado_txt, seg(r.idade), seg(r.max_idade), causa),
    )


def _parando(r: Retrato) -> Resultado:
    if r.situacao == 'parando' and r.pid_ok is not False:
        return Resultado().anotar(ALERTA, 'ouvinte parando (parada pedida em curso)')
    return Resultado()


def _seco(r: Retrato) -> Resultado:
    if r.modo == 'seco':
        return Resultado().anotar(ALERTA, 'o último status e de um --dry-run (nada foi enviado)')
    return Resultado()


def _ferramenta_longa(r: Retrato) -> Resultado:
    if not (r.ferramenta and r.ferramenta_desde and r.no_ar):
        return Resultado()
    rodando = (r.agora - r.ferramenta_desde).total_seconds()
    if not rodando > r.limites.max_ferramenta:
        return Resultado()
    return Resultado().anotar(
        ALERTA,
        'ferramenta %s (pid %s) rodando há %s (limite %s)'
        % (
            r.ferramenta.get('rotulo'),
            r.ferramenta.get('pid'),
            seg(rodando),
            seg(r.limites.max_ferramenta),
        ),
    )


# ------------------------------------------------------------------ cada dataset ao vivo
# Um dataset do status. As listas do status são listas (relatorio.status_json):
# os casts `list[Json]` daqui o dizem.
Dataset: TypeAlias = 'Mapping[str, Json]'


def _ciclo_bom(r: Retrato, d: Dataset) -> Resultado:
    """O dataset sem ciclo bom (sonda E envio): falhando, ou sem sonda nova."""
    nome = d.get('dataset')
    falhas = inteiro(d.get('falhas_seguidas'))
    desde, limite = _janela_do_ciclo(r, d, falhas)
    lacuna = max(0.0, (r.referencia - desde).total_seconds()) if desde else None
    resultado = Resultado().medir(Medida('falhas_dataset_max', falhas))
    if lacuna is not None and falhas:
        resultado.medir(Medida('sem_ciclo_bom_max', lacuna))
    if falhas:
        critico = falhas >= r.max_falhas or (lacuna is not None and lacuna > limite)
        return resultado.anotar(
            CRITICO if critico else ALERTA,
            'dataset %s sem ciclo bom%s, %d falha(s) seguida(s)'
            ' (limites: %s, %d falhas): %s'
            % (
                nome,
                '' if lacuna is None else ' há %s' % seg(lacuna),
                falhas,
                seg(limite),
                r.max_falhas,
                erro_curto(d.get('ultimo_erro')) or 'sem erro registrado',
            ),
        )
    if lacuna is not None and lacuna > limite:
        sonda = quando(d.get('ultima_sonda_ok_em'))
        resultado.anotar(
            CRITICO,
            'dataset %s sem sonda boa há %s (limite %s)%s'
            % (nome, seg(lacuna), seg(limite), '' if sonda else ': nunca sondado nesta subida'),
        )
    return resultado


def _janela_do_ciclo(r: Retrato, d: Dataset, falhas: int) -> tuple[datetime.datetime | None, float]:
    """Desde quando o dataset está sem ciclo bom, e o limite que vale para ele."""
    sonda = quando(d.get('ultima_sonda_ok_em'))
    subida = r.iniciado if r.servico else None
    if falhas:
        candidatos = [t for t in (quando(d.get('erro_desde')), sonda) if t]
        return (min(candidatos) if candidatos else subida), r.max_sem_sonda
    limite = max(r.max_sem_sonda, r.max_idade)
    if d.get('captura') == 'reconciliacao' and r.intervalo_rec is not None:
        # So a reconciliacao le este dataset: a sonda e a dela, no ritmo dela.
        limite = max(limite, r.limites.intervalos * r.intervalo_rec)
    return sonda or subida, limite


def _sem_carimbo(_r: Retrato, d: Dataset) -> Resultado:
    sem = inteiro(d.get('sem_carimbo'))
    if not sem:
        return Resultado()
    return Resultado(medidas=[Medida('sem_carimbo', sem)]).anotar(
        ALERTA,
        'dataset %s com %d linha(s) sem carimbo (só a varredura as leva)' % (d.get('dataset'), sem),
    )


def _chaves(_r: Retrato, d: Dataset) -> Resultado:
    """A key nula e a key repetida na view: linhas fora do Contextia, ditas (intake/chaves.py)."""
    nulas = inteiro(d.get('chaves_nulas'))
    repetidas = [str(t) for t in cast('list[Json]', d.get('chaves_repetidas') or [])]
    resultado = Resultado()
    if nulas:
        resultado.anotar(
            ALERTA,
            'dataset %s: %d linha(s) com a key nula ficaram de fora (a view não lhes dá key:'
            ' um LEFT JOIN sem par?); corrija a view' % (d.get('dataset'), nulas),
        )
    if repetidas:
        resultado.anotar(
            ALERTA,
            'dataset %s: key repetida na view (%s); vai uma linha só por key e empresa --'
            ' corrija a view ou a key' % (d.get('dataset'), limpo(repetidas[0])),
        )
    return resultado


def _futuras(_r: Retrato, d: Dataset) -> Resultado:
    futuras = inteiro(d.get('futuras'))
    if not futuras:
        return Resultado()
    return Resultado(medidas=[Medida('futuras', futuras)]).anotar(
        ALERTA, 'dataset %s com %d linha(s) com carimbo no futuro' % (d.get('dataset'), futuras)
    )


def _atraso(r: Retrato, d: Dataset) -> Resultado:
    """A chegada atrasada: a maior vista, e se passou da metade da --folga."""
    atraso = numero(d.get('maior_atraso_s'))
    resultado = Resultado()
    if atraso is not None:
        resultado.medir(Medida('maior_atraso', atraso))
    if d.get('atraso_preocupante'):
        resultado.anotar(
            ALERTA,
            'dataset %s: chegada atrasada de %s passou da metade da folga'
            ' (%ss): aumente --folga'
            % (d.get('dataset'), seg(atraso or 0), r.ouvinte.get('folga_s')),
        )
    return resultado


def _reconciliacao(r: Retrato, d: Dataset) -> Resultado:
    """A reconciliacao do dataset: falhas, a leitura que não vem, e a recusa pelo teto."""
    rec = d.get('reconciliacao')
    if not (isinstance(rec, dict) and rec.get('ativa')):
        return Resultado()
    nome = d.get('dataset')
    resultado = Resultado().medir(Medida('chaves_removidas', inteiro(rec.get('removidas'))))
    falhas = inteiro(rec.get('falhas_seguidas'))
    if falhas:
        resultado.anotar(
            CRITICO if falhas >= r.max_falhas else ALERTA,
            'dataset %s: reconciliação falhou %d vez(es) seguida(s) desde %s'
            ' (nada removido): %s'
            % (nome, falhas, rec.get('erro_desde'), erro_curto(rec.get('ultimo_erro')) or '?'),
        )
    elif r.intervalo_rec is not None:
        desde = quando(rec.get('ultima_em')) or (r.iniciado if r.servico else None)
        limite = max(r.limites.intervalos * r.intervalo_rec, r.max_idade)
        lacuna = (r.referencia - desde).total_seconds() if desde else None
        if lacuna is not None and lacuna > limite:
            resultado.anotar(
                ALERTA,
                'dataset %s: reconciliação sem leitura completa há %s'
                ' (limite %s)' % (nome, seg(lacuna), seg(limite)),
            )
    recusada = bool(rec.get('recusa'))
    if recusada:
        resultado.anotar(
            ALERTA,
            'dataset %s: reconciliação RECUSADA pelo teto desde %s (nada'
            ' removido): %s' % (nome, rec.get('recusa_desde'), erro_curto(rec['recusa'])),
        )
    return resultado.medir(Medida('reconciliacoes_recusadas', int(recusada)))


def _entregue_a_varredura(r: Retrato, d: Dataset) -> Resultado:
    entregue = d.get('entregue_a_varredura')
    if not entregue:
        return Resultado()
    if r.varredura.hora:
        return Resultado().anotar(
            ALERTA,
            'dataset %s entregue a varredura das %s (%s)'
            % (d.get('dataset'), r.varredura.hora, limpo(entregue)),
        )
    return Resultado().anotar(
        CRITICO,
        'dataset %s entregue a varredura (%s), e a varredura'
        ' diária está desligada: parado até um --varrer-agora'
        % (d.get('dataset'), limpo(entregue)),
    )


# Em cada dataset ao vivo, nesta ordem (a ordem dos motivos dele na linha).
VERIFICACOES_DO_DATASET: tuple[Callable[[Retrato, Dataset], Resultado], ...] = (
    _ciclo_bom,
    _sem_carimbo,
    _chaves,
    _futuras,
    _atraso,
    _reconciliacao,
    _entregue_a_varredura,
)


def _datasets(r: Retrato) -> Resultado:
    """Os datasets ao vivo, um a um; as medidas deles somadas (ou a maior)."""
    vivos = r.vivos
    resultado = Resultado().medir(Medida('datasets_ao_vivo', len(vivos)))
    de_cada: list[Medida] = []
    for d in vivos:
        for verificacao in VERIFICACOES_DO_DATASET:
            achado = verificacao(r, d)
            resultado.motivos.extend(achado.motivos)
            de_cada.extend(achado.medidas)
    if not vivos:
        resultado.anotar(ALERTA, 'nenhum dataset ao vivo (só a varredura leva dado)')
    resultado.medidas.extend(_somadas(_medidas_dos_datasets(r), de_cada))
    return resultado


def _medidas_dos_datasets(r: Retrato) -> list[Medida]:
    """As medidas que juntam os datasets, zeradas (e com os limites de cada uma)."""
    zeradas = [
        Medida('falhas_dataset_max', 0, alerta=0, critico=r.max_falhas - 1, maior=True),
        Medida('sem_ciclo_bom_max', 0.0, 's', critico=r.max_sem_sonda, maior=True),
        Medida('sem_carimbo', 0, alerta=0),
        Medida('futuras', 0, alerta=0),
        Medida('maior_atraso', 0.0, 's', maior=True),
    ]
    if r.intervalo_rec is not None:  # só com a reconciliação
        zeradas += [Medida('chaves_removidas', 0), Medida('reconciliacoes_recusadas', 0, alerta=0)]
    return zeradas


def _somadas(zeradas: list[Medida], de_cada: list[Medida]) -> list[Medida]:
    """Cada medida zerada mais as de cada dataset com o mesmo nome (as outras ficam de fora)."""
    por_nome = {m.nome: m for m in zeradas}
    for medida in de_cada:
        total = por_nome.get(medida.nome)
        if total is not None:
            valor = max(total.valor, medida.valor) if total.maior else total.valor + medida.valor
            por_nome[medida.nome] = replace(total, valor=valor)
    return list(por_nome.values())


def _so_varredura(r: Retrato) -> Resultado:
    """
    O dataset que a captura pelo log conferiu no catálogo e não pode seguir (a
    view sem `base_tables`): fora do ao-vivo por correção por fazer, não por escolha.
    """
    from contextia_sync.captura.ao_vivo import SO_VARREDURA

    resultado = Resultado()
    for d in cast('list[Json]', r.status.get('datasets') or []):
        if isinstance(d, dict) and d.get('ao_vivo') is False and d.get('so_varredura'):
            motivo = limpo(d.get('motivo')).removeprefix(SO_VARREDURA + ': ')
            resultado.anotar(ALERTA, 'dataset %s só varredura: %s' % (d.get('dataset'), motivo))
    return resultado


# ------------------------------------------------------------------ a captura por log
def _captura_critica(r: Retrato) -> Resultado:
    """`binlog`, `slot_logico`: a posição do log perdida (a captura diz o porquê)."""
    captura = secao(r.status, 'captura')
    if captura.get('critico'):
        return Resultado().anotar(CRITICO, limpo(captura['critico']))
    return Resultado()


def _captura_pausada(r: Retrato) -> Resultado:
    """A recusa do spool inteira: quanto, o que a pausa custa na origem e o conserto."""
    captura = secao(r.status, 'captura')
    if captura.get('pausada'):
        return Resultado().anotar(CRITICO, 'captura do log pausada: %s' % limpo(captura['pausada']))
    return Resultado()


def _spool_parado(r: Retrato) -> Resultado:
    """
    A mudança mais velha do spool sem entrega confirmada há mais de
    --max-sem-sonda: o leitor pode estar em dia com o log e ela, presa (a
    entrega que falha de novo a cada ciclo). Nunca "atraso 0" calado.
    """
    captura = secao(r.status, 'captura')
    idade = numero(captura.get('spool_idade_s'))
    if idade is None or idade <= r.max_sem_sonda:
        return Resultado()
    return Resultado().anotar(
        ALERTA,
        'a mudança mais velha do spool espera a entrega há %s (%s mudança(s) no'
        ' spool): o último erro de cada dataset está no status e no log'
        % (seg(idade), captura.get('spool_itens')),
    )


def _medido(r: Retrato, estrategia: str) -> LogMedido | None:
    """O log de `estrategia` medido agora na origem (o ouvinte parado), se mediu."""
    medido = r.log_medido
    if medido is None or medido.estrategia != estrategia or medido.falha is not None:
        return None
    return medido


def _wal_do_slot(r: Retrato) -> Resultado:
    """
    O `slot_logico`: o WAL que o slot segura no disco do cliente -- medido agora na
    origem com o ouvinte parado (o status congelou), senão o do status.
    """
    captura = secao(r.status, 'captura')
    medido = _medido(r, 'slot_logico')
    if medido is not None:
        wal = None if medido.perdida else numero(medido.retido)
        fonte, causa = (
            'medido agora na origem',
            'o ouvinte não está rodando, e o WAL cresce até ele voltar: suba o ouvinte'
            ' (desinstalando? `ouvinte.py --remover-slot`)',
        )
    else:
        wal = numero(captura.get('wal_retido_bytes'))
        fonte, causa = (
            'lido do status de %s' % r.atualizado_txt,
            'o ouvinte não está consumindo (veja o spool e os erros acima)',
        )
    if wal is None:
        return Resultado()
    alerta, critico = r.limites.wal_alerta, r.limites.wal_critico
    resultado = Resultado().medir(Medida('wal_retido', wal, 'B', alerta, critico))
    if not wal >= alerta:  # (NaN também fica de fora)
        return resultado
    return resultado.anotar(
        CRITICO if wal >= critico else ALERTA,
        'o slot %s retém %.1f MiB de WAL no disco da origem (%s; limite %.0f MiB): %s'
        % (
            limpo(str(captura.get('slot'))),
            wal / 1048576,
            fonte,
            (critico if wal >= critico else alerta) / 1048576,
            causa,
        ),
    )


def _binlog_pendente(r: Retrato) -> Resultado:
    """O `binlog` com o ouvinte parado: o log que já passou da posição salva."""
    medido = _medido(r, 'binlog')
    if medido is None or medido.retido is None:
        return Resultado()
    pendente = float(medido.retido)
    alerta, critico = r.limites.wal_alerta, r.limites.wal_critico
    resultado = Resultado().medir(Medida('binlog_pendente', pendente, 'B', alerta, critico))
    if not pendente >= alerta:
        return resultado
    return resultado.anotar(
        CRITICO if pendente >= critico else ALERTA,
        'o binlog tem %.1f MiB depois da %s, medido agora na origem (limite %.0f MiB): o'
        ' ouvinte não está rodando; suba-o antes que o MariaDB expire o arquivo da posição'
        ' (binlog_expire_logs_seconds) -- depois disso, só a varredura recupera'
        % (pendente / 1048576, medido.onde, (critico if pendente >= critico else alerta) / 1048576),
    )


def _log_da_origem(r: Retrato) -> Resultado:
    """O log que a saúde foi medir na origem: a posição perdida, ou a medida que falhou."""
    medido = r.log_medido
    if medido is None:
        return Resultado()
    if medido.falha is not None:
        return Resultado().anotar(
            ALERTA,
            '%s não medido agora na origem (o ouvinte não está rodando e o status parou em'
            ' %s): %s'
            % (
                'WAL retido pelo slot'
                if medido.estrategia == 'slot_logico'
                else 'binlog depois da posição salva',
                r.atualizado_txt,
                medido.falha,
            ),
        )
    if medido.perdida is not None:
        return Resultado().anotar(CRITICO, medido.perdida)
    return Resultado()


# ------------------------------------------------------------------ o laço e as empresas
def _falhas_do_laco(r: Retrato) -> Resultado:
    """As voltas seguidas com falha (depois dos datasets: eles dizem qual)."""
    falhas = inteiro(r.ouvinte.get('falhas_seguidas'))
    resultado = Resultado().medir(
        Medida('falhas_seguidas', falhas, alerta=0, critico=r.max_falhas - 1)
    )
    if not falhas:
        return resultado
    texto = '%d volta(s) seguida(s) do laço com falha' % falhas
    falha = secao(secao(r.status, 'ciclos'), 'falha')
    if falha.get('erro'):
        texto += ' (última: %s)' % erro_curto(falha['erro'])
    return resultado.anotar(CRITICO if falhas >= r.max_falhas else ALERTA, texto)


def _quarentena(r: Retrato) -> Resultado:
    quarentena = secao(r.status, 'quarentena')
    total = inteiro(quarentena.get('total'))
    resultado = Resultado().medir(Medida('quarentena', total, alerta=0))
    if not total:
        return resultado
    por = quarentena.get('por_dataset')
    detalhe = (
        ', '.join('%s %s' % item for item in sorted(por.items())) if isinstance(por, dict) else ''
    )
    return resultado.anotar(
        ALERTA,
        '%d registro(s) na quarentena%s: recusados de vez pelo'
        ' intake, ou com código de empresa inválido; o motivo de'
        ' cada um está no arquivo dele; corrija na origem e rode'
        ' ouvinte.py --reenviar-quarentena' % (total, ' (%s)' % detalhe if detalhe else ''),
    )


def _cargas_pendentes(r: Retrato) -> Resultado:
    """A carga inicial por refazer (a que a ferramenta em curso está fazendo não conta)."""
    em_curso = str(r.ferramenta.get('rotulo') or '') if r.no_ar else ''
    cargas = [
        str(e)
        for e in cast('list[Json]', r.status.get('cargas_iniciais_pendentes') or [])
        if not em_curso.endswith(' %s' % e)
    ]
    if not cargas:
        return Resultado()
    return Resultado().anotar(
        ALERTA,
        'carga inicial pendente da(s) empresa(s) %s (refeita no'
        ' próximo ciclo de projetos)' % ', '.join(cargas[:10]),
    )


def _empresas_recusadas(r: Retrato) -> Resultado:
    """As empresas recusadas (ouvinte/relatorio.py: empresas_recusadas)."""
    recusadas = [
        e
        for e in cast('list[Json]', r.status.get('empresas_recusadas') or [])
        if isinstance(e, dict)
    ]
    trocadas = [str(e.get('escopo')) for e in recusadas if e.get('onde') == 'chave']
    invalidas = ["'%s'" % e.get('escopo') for e in recusadas if e.get('onde') == 'cadastro']
    resultado = Resultado().medir(Medida('empresas_recusadas', len(recusadas), alerta=0))
    if trocadas:
        resultado.anotar(
            CRITICO,
            'empresa(s) %s com a chave de outro projeto no arquivo de'
            ' chaves: NÃO recebem dado; corrija a linha (o'
            ' ouvinte-status.txt diz como)' % ', '.join(trocadas[:10]),
        )
    if invalidas:
        resultado.anotar(
            ALERTA,
            'código(s) de empresa recusado(s) no cadastro do ERP: %s'
            ' (caractere fora do permitido; nunca provisionados): corrija'
            ' o código no ERP' % ', '.join(invalidas[:10]),
        )
    return resultado


# ------------------------------------------------------------------ a varredura
def _ultima_varredura(r: Retrato) -> Resultado:
    """A última varredura: morta no meio, falha ou interrompida."""
    v = r.varredura
    erros = [erro_curto(e) for e in cast('list[Json]', v.secao.get('erros') or [])]
    iniciada_em = v.secao.get('iniciada_em')
    if v.iniciada and not v.terminada and v.ok is None and not r.no_ar:
        return Resultado().anotar(
            ALERTA,
            'a varredura de %s não terminou: o ouvinte parou ou'
            ' morreu no meio (não conta como feita)' % iniciada_em,
        )
    if v.ok is False:
        partes = list(erros[:2])
        nao_fechados = v.secao.get('nao_fechados')
        if isinstance(nao_fechados, dict) and nao_fechados:
            partes.append(
                'não fechou %s'
                % ', '.join(
                    '%s (%d empresa(s))' % (n, len(e) if isinstance(e, list) else 0)
                    for n, e in sorted(nao_fechados.items())[:4]
                )
            )
        return Resultado().anotar(
            CRITICO,
            'a varredura de %s falhou%s'
            % (iniciada_em, ': ' + '; '.join(partes) if partes else ''),
        )
    if v.ok is None and v.terminada:
        return Resultado().anotar(
            ALERTA,
            'a varredura de %s foi interrompida%s'
            % (iniciada_em, ': ' + erros[0] if erros else ''),
        )
    return Resultado()


def _idade_da_varredura(r: Retrato) -> Resultado:
    """Com a diária ligada: a última varredura boa velha demais, ou nenhuma ainda."""
    v = r.varredura
    resultado = Resultado()
    if v.idade_ok is not None:
        resultado.medir(
            Medida('idade_varredura_ok', v.idade_ok, 's', critico=r.limites.max_varredura)
        )
    if not v.hora or v.ok is False:
        return resultado
    maxima = r.limites.max_varredura
    if v.idade_ok is not None and v.idade_ok > maxima:
        return resultado.anotar(
            CRITICO,
            'a última varredura boa foi há %s (%s; limite %s; a'
            ' diária roda as %s)'
            % (horas(v.idade_ok), v.secao.get('ultima_ok_em'), horas(maxima), v.hora),
        )
    if v.ultima_ok is None and not v.em_curso and not (v.iniciada and v.ok is None):
        iniciado = r.iniciado
        no_ar_ha = (r.agora - iniciado).total_seconds() if iniciado and r.servico else 0.0
        resultado.anotar(
            CRITICO if no_ar_ha > maxima else ALERTA,
            'nenhuma varredura boa registrada (a diária roda as %s; para a carga'
            ' completa agora: --varrer-agora)' % v.hora,
        )
    return resultado


# ------------------------------------------------------------------ a tabela
class Verificacao(NamedTuple):
    """Uma linha da tabela: o nome (o assunto) e a função do retrato."""

    nome: str
    verificar: Callable[[Retrato], Resultado]


# A ordem é a dos motivos na linha, dentro de cada nível (o pior nível vem primeiro).
VERIFICACOES: tuple[Verificacao, ...] = (
    Verificacao('situacao', _situacao),
    Verificacao('idade_status', _idade_status),
    Verificacao('parando', _parando),
    Verificacao('seco', _seco),
    Verificacao('ferramenta', _ferramenta_longa),
    Verificacao('datasets', _datasets),
    Verificacao('so_varredura', _so_varredura),
    Verificacao('captura_critica', _captura_critica),
    Verificacao('captura_pausada', _captura_pausada),
    Verificacao('spool_parado', _spool_parado),
    Verificacao('wal_do_slot', _wal_do_slot),
    Verificacao('binlog_pendente', _binlog_pendente),
    Verificacao('log_da_origem', _log_da_origem),
    Verificacao('falhas_do_laco', _falhas_do_laco),
    Verificacao('quarentena', _quarentena),
    Verificacao('cargas_pendentes', _cargas_pendentes),
    Verificacao('empresas_recusadas', _empresas_recusadas),
    Verificacao('ultima_varredura', _ultima_varredura),
    Verificacao('idade_da_varredura', _idade_da_varredura),
)


def resultados(retrato: Retrato) -> list[tuple[str, Resultado]]:
    """Cada verificação da tabela, na ordem, com o que achou."""
    return [(v.nome, v.verificar(retrato)) for v in VERIFICACOES]


def avaliar(
    status: Mapping[str, Json],
    limites: Limites,
    agora: datetime.datetime,
    idade_arquivo: float | None = None,
    vivo: Callable[[int], bool | None] = pid_vivo,
    medir: Callable[[Retrato], LogMedido | None] | None = None,
) -> Veredito:
    """
    O veredito sobre um `ouvinte-status.json` já lido: a tabela dobrada.
    `idade_arquivo` (segundos desde o mtime) serve quando `atualizado_em` falta
    ou está no futuro (relógio acertado para trás). `medir` (o `--saude`) mede o
    log na origem, vendo o retrato: o que ele devolve vai ao `log_medido`.
    """
    veredito = Veredito()
    retrato = ler_retrato(status, limites, agora, idade_arquivo, vivo)
    if isinstance(retrato, str):
        veredito.desconhecido = retrato
        return veredito
    if medir is not None:
        retrato = replace(retrato, log_medido=medir(retrato))
    medidas: list[Medida] = []
    for _nome, resultado in resultados(retrato):
        veredito.motivos.extend(resultado.motivos)
        medidas.extend(resultado.medidas)
    veredito.resumo = _resumo(retrato) + _log_no_resumo(retrato)
    medidas.sort(key=lambda m: ORDEM_DAS_MEDIDAS.index(m.nome))
    veredito.perf = [m.texto() for m in medidas]
    return veredito


def _log_no_resumo(r: Retrato) -> str:
    """O log medido agora na origem, na linha do OK (o perfdata sozinho não diz de onde)."""
    medido = r.log_medido
    if medido is None or medido.retido is None or medido.falha or medido.perdida:
        return ''
    return ', %s %s: %.1f MiB, medido agora na origem' % (
        'WAL retido pelo' if medido.estrategia == 'slot_logico' else 'binlog depois da',
        medido.onde,
        medido.retido / 1048576,
    )


def _resumo(r: Retrato) -> str:
    """A linha do OK: quem está no ar, desde quando, e a última varredura."""
    de_quando = '%s (há %s)' % (r.atualizado_txt, seg(r.idade or 0))
    vivos = len(r.vivos)
    if r.servico:
        resumo = 'ouvinte %s (serviço, pid %d), %d dataset(s) ao vivo, status de %s' % (
            'ativo' if r.situacao == 'rodando' else r.situacao,
            r.pid,
            vivos,
            de_quando,
        )
    else:
        resumo = 'última execução %s de %s, %d dataset(s) ao vivo' % (r.modo, de_quando, vivos)
    v = r.varredura
    if v.em_curso:
        return resumo + ', varredura em curso desde %s' % v.secao.get('iniciada_em')
    if v.ultima_ok:
        return resumo + ', última varredura boa em %s' % v.secao.get('ultima_ok_em')
    if not v.hora:
        return resumo + ', varredura diária desligada'
    return resumo
