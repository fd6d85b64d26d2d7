"""O laço do serviço: os três ciclos na agenda, a parada limpa e o status a cada volta."""

from __future__ import annotations

import argparse
import datetime
import signal
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from types import FrameType

from contextia_sync import supervisor, systemd
from contextia_sync.erros import SAIDA_FALHA, SAIDA_OK, resumir
from contextia_sync.estado.status import escrever_status, escrever_status_json
from contextia_sync.metricas import escrever_metricas
from contextia_sync.ouvinte import agenda
from contextia_sync.ouvinte.contexto import Contexto
from contextia_sync.ouvinte.dados import ciclo_dados
from contextia_sync.ouvinte.projetos import ciclo_projetos
from contextia_sync.ouvinte.relatorio import linhas_status, status_json
from contextia_sync.ouvinte.varredura import ciclo_varredura, e_hora_de_varrer
from contextia_sync.registro import logger
from contextia_sync.tipos import ObjetoJson

# Dorme-se em fatias para o SIGTERM nao esperar o intervalo inteiro.
FATIA_SONO = 1.0


class ParadaFria(BaseException):
    """Segundo SIGTERM/SIGINT: sai já, sem terminar o passo atual."""


class Parada:
    """
    O primeiro SIGTERM/SIGINT/SIGHUP levanta a bandeira: o passo atual termina (ou a
    ferramenta em curso tem o grupo encerrado) e o ouvinte sai limpo, com o
    desfecho no log. O segundo e parada fria.
    """

    def __init__(self) -> None:
        self.pedida = False

    def __call__(self, numero: int, _quadro: FrameType | None) -> None:
        nome = signal.Signals(numero).name
        if not self.pedida:
            self.pedida = True
            systemd.parando('%s: terminando o passo atual antes de sair' % nome)
            logger.warning(
                '%s: parada pedida; terminando o passo atual antes de sair'
                ' (outro %s = parada fria)',
                nome,
                nome,
            )
            return
        pid = supervisor.matar_em_curso()
        logger.error(
            '%s de novo: PARADA FRIA. Passo atual abandonado%s; o que não'
            ' foi confirmado não avançou a marca e será relido na próxima'
            ' subida.',
            nome,
            ' (grupo da ferramenta %s morto com SIGKILL)' % pid if pid else '',
        )
        raise ParadaFria()

    def instalar(self) -> None:
        # SIGHUP tambem: fechar o terminal de um ouvinte rodado a mao o mataria na
        # hora, deixando a ferramenta em curso orfa, rodando sem dono.
        for numero in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(numero, self)


def _hora() -> str:
    return datetime.datetime.now().strftime('%H:%M:%S')


def _agora_iso() -> str:
    return datetime.datetime.now().isoformat(timespec='seconds')


@dataclass
class _Volta:
    """O que o laço leva de uma volta à outra: o resumo do status e as próximas horas."""

    resumo: dict[str, str] = field(default_factory=dict)
    ciclos: dict[str, ObjetoJson] = field(default_factory=dict)
    proximo_dados: float = 0.0
    proximo_projetos: float = 0.0
    conectado: bool = False
    saida: int = SAIDA_OK


def _pulsar(ctx: Contexto, parada: Parada, volta: _Volta) -> None:
    """O status, as métricas e o systemd, a cada volta (e durante as ferramentas)."""
    if parada.pedida and ctx.execucao.situacao == 'rodando':
        ctx.execucao.situacao = 'parando'
    dados = status_json(ctx, volta.ciclos)
    erro = (
        escrever_status(ctx.config.estado_dir, linhas_status(ctx, volta.resumo))
        or escrever_status_json(ctx.config.estado_dir, dados)
        or (escrever_metricas(ctx.config.metricas, dados) if ctx.config.metricas else None)
    )
    if erro:
        logger.warning('não foi possível gravar o status (%s)', erro)
    f = ctx.execucao.ferramenta_agora
    systemd.status(
        '%d dataset(s) ao vivo' % len(ctx.config.vivos),
        volta.resumo.get('dados'),
        'falhas seguidas: %d' % ctx.execucao.falhas if ctx.execucao.falhas else None,
        volta.resumo.get('falha'),
        'ferramenta %s (pid %s)' % (f.rotulo, f.pid) if f else None,
    )
    systemd.vigia()


def laco(ctx: Contexto, args: argparse.Namespace, parada: Parada) -> int:
    """Roda os ciclos até a parada (ou uma vez, com --once). Devolve o código de saída."""
    volta = _Volta()

    def pulsar() -> None:
        _pulsar(ctx, parada, volta)

    ctx.pulsar = pulsar
    acordador = getattr(ctx.captura, 'esperar_mudanca', None)
    while True:
        agora = time.monotonic()
        try:
            _rodar_ciclos(ctx, args, parada, volta, agora)
        except Exception as erro:  # noqa: BLE001 - o servico nao morre por um ciclo
            _volta_falhou(ctx, volta, erro)
        pulsar()
        if args.once or parada.pedida:
            break
        _esperar(ctx, args, parada, volta, acordador)
        if parada.pedida:
            break
    # Saida limpa: o status diz PARADO (e nao "ativo" com um pid morto).
    ctx.execucao.situacao = 'parado'
    pulsar()
    return volta.saida if args.once else SAIDA_OK


def _rodar_ciclos(
    ctx: Contexto, args: argparse.Namespace, parada: Parada, volta: _Volta, agora: float
) -> None:
    """Uma volta: a origem conectada e renovada, e cada ciclo que está na hora."""
    if not volta.conectado:
        ctx.origem.conectar()
        volta.conectado = True
    # Retrato novo a cada rodada: sem isto Oracle e MySQL devolveriam
    # para sempre o banco do instante em que o ouvinte subiu.
    ctx.origem.renovar()
    erros_da_volta = 0
    if not parada.pedida and (agora >= volta.proximo_projetos or args.once):
        erros_da_volta += _ciclo_projetos(ctx, args, volta)
    if not parada.pedida and (agora >= volta.proximo_dados or args.once):
        erros_da_volta += _ciclo_dados(ctx, args, volta)
    if not parada.pedida and (args.varrer_agora or e_hora_de_varrer(ctx)):
        # Uma vez por subida: sem isto varreria a cada ciclo.
        args.varrer_agora = False
        erros_da_volta += _ciclo_varredura(ctx, volta)
    volta.saida = volta.saida or (SAIDA_FALHA if erros_da_volta else SAIDA_OK)
    # TODA falha conta (um dataset, uma empresa, uma fase da varredura), nao
    # so o ciclo inteiro: e isto que o status e a saude mostram.
    ctx.execucao.falhas = ctx.execucao.falhas + 1 if erros_da_volta else 0
    ctx.execucao.falhas_do_ciclo = 0
    volta.resumo.pop('falha', None)
    volta.ciclos.pop('falha', None)


def _ciclo_projetos(ctx: Contexto, args: argparse.Namespace, volta: _Volta) -> int:
    p = ciclo_projetos(ctx)
    volta.proximo_projetos = time.monotonic() + args.intervalo_projetos
    volta.resumo['projetos'] = 'projetos ..........: %s criados=%s carregados=%s erros=%s' % (
        _hora(),
        p.criados,
        p.carregados,
        p.erros,
    )
    volta.ciclos['projetos'] = dict(asdict(p), em=_agora_iso())
    return int(p.erros)


def _ciclo_dados(ctx: Contexto, args: argparse.Namespace, volta: _Volta) -> int:
    d = ciclo_dados(ctx)
    volta.proximo_dados = time.monotonic() + args.intervalo_dados
    volta.resumo['dados'] = (
        'dados .............: %s datasets=%s registros=%s'
        ' erros=%s atrasadas=%s quarentena=%s%s'
        % (
            _hora(),
            d.datasets,
            d.registros,
            d.erros,
            d.atrasadas,
            d.quarentenados,
            ' removidas=%s' % d.removidas if ctx.config.intervalo_reconciliacao is not None else '',
        )
    )
    volta.ciclos['dados'] = dict(asdict(d), em=_agora_iso())
    return int(d.erros)


def _ciclo_varredura(ctx: Contexto, volta: _Volta) -> int:
    v = ciclo_varredura(ctx)
    volta.resumo['varredura'] = 'varredura .........: %s erros=%s' % (_hora(), v.erros)
    volta.ciclos['varredura'] = dict(asdict(v), em=_agora_iso())
    return int(v.erros)


def _volta_falhou(ctx: Contexto, volta: _Volta, erro: Exception) -> None:
    # Origem fora do ar, tunel caido, Contextia em manutencao -- tudo
    # passa, e um servico que morre no primeiro soluco so volta quando
    # alguem percebe.
    ctx.execucao.falhas += 1
    ctx.execucao.falhas_do_ciclo += 1
    logger.exception(
        'ciclo falhou (%sa vez seguida): %s: %s',
        ctx.execucao.falhas_do_ciclo,
        type(erro).__name__,
        erro,
    )
    volta.resumo['falha'] = 'ÚLTIMA FALHA ......: %s %s: %s' % (
        _hora(),
        type(erro).__name__,
        resumir(str(erro)),
    )
    volta.ciclos['falha'] = {
        'em': _agora_iso(),
        'erro': '%s: %s' % (type(erro).__name__, resumir(str(erro))),
    }
    # Conexao possivelmente morta: reabre no proximo ciclo em vez de
    # insistir num handle quebrado.
    try:
        ctx.origem.fechar()
    except Exception:  # noqa: BLE001 - fechar nunca mascara o erro
        pass
    volta.conectado = False
    volta.saida = SAIDA_FALHA


def _esperar(
    ctx: Contexto,
    args: argparse.Namespace,
    parada: Parada,
    volta: _Volta,
    acordador: Callable[[float], bool] | None,
) -> None:
    """A espera até a próxima volta, em fatias (o SIGTERM não espera o intervalo inteiro)."""
    espera = agenda.espera_apos_falhas(args.intervalo_dados, ctx.execucao.falhas_do_ciclo)
    if ctx.execucao.falhas_do_ciclo:
        logger.warning(
            'esperando %ss antes de tentar de novo (dobra a cada falha, teto de %ss)',
            espera,
            agenda.TETO_ESPERA,
        )
    fim = time.monotonic() + espera
    while time.monotonic() < fim and not parada.pedida:
        systemd.vigia()
        fatia = min(FATIA_SONO, max(0.0, fim - time.monotonic()))
        # A captura que le um log (binlog, slot_logico) espera NO log e acorda
        # o ciclo de dados quando chega mudanca; depois de uma volta com erro
        # continua lendo (o log nao envelhece) mas nao acorda: o Contextia
        # fora do ar nao vira um ciclo por evento.
        if acordador is None:
            time.sleep(fatia)
        elif acordador(fatia) and not ctx.execucao.falhas:
            volta.proximo_dados = 0.0
            break
