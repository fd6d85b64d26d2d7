"""A hora da varredura diária (`--varredura HH:MM`, `--janela-varredura`). Módulo puro."""

from __future__ import annotations

import datetime

from contextia_sync import padroes
from contextia_sync.erros import ErroConfiguracao

# Espera entre falhas seguidas: dobra a cada falha e para aqui. 15 minutos nao
# martela uma origem fora do ar e ainda volta sozinho quando ela voltar.
TETO_ESPERA = padroes.TETO_ESPERA

DESLIGADA = ('nao', 'não', 'no', 'off', 'nenhuma')


class ErroVarredura(ErroConfiguracao, ValueError):
    """`--varredura` não é HH:MM nem "nao"."""


def ler_hora(texto: str | None) -> tuple[int, int] | None:
    """'03:30' -> (3, 30); 'nao' -> None (varredura desligada)."""
    if not texto or texto.strip().lower() in DESLIGADA:
        return None
    partes = texto.strip().split(':')
    try:
        if len(partes) != 2 or not all(p.isdigit() for p in partes):
            raise ValueError
        hora, minuto = int(partes[0]), int(partes[1])
        if not (0 <= hora <= 23 and 0 <= minuto <= 59):
            raise ValueError
    except ValueError:
        raise ErroVarredura(
            '--varredura espera HH:MM (ex.: 03:30) ou "nao" para desligar; recebi %r.' % texto
        ) from None
    return hora, minuto


def hora_de_varrer(
    varredura: tuple[int, int] | None,
    janela_min: int,
    feita_em: str | None,
    agora: datetime.datetime | None = None,
) -> bool:
    """
    Chegou a hora da varredura de hoje?

    Compara com o DIA já varrido, não com um intervalo: "as 03:30" acontece uma
    vez por dia mesmo com três reinícios, e não duas porque ele subiu 03:29.

    E só dentro da JANELA depois da hora: sem ela, um ouvinte que sobe as 14h
    com o estado zerado veria "ainda não varri hoje" e faria a carga completa
    em pleno horário comercial. A janela também recupera atraso: fora do ar as
    03:30 e de volta as 05:00, ainda varre.
    """
    if not varredura:
        return False
    agora = agora or datetime.datetime.now()
    if feita_em == agora.date().isoformat():
        return False
    hora, minuto = varredura
    marcada = agora.replace(hour=hora, minute=minuto, second=0, microsecond=0)
    return marcada <= agora <= marcada + datetime.timedelta(minutes=janela_min)


def descrever(varredura: tuple[int, int] | None, janela_min: int) -> str:
    if not varredura:
        return 'DESLIGADA -- exclusão na origem NUNCA sai do Contextia'
    return '%02d:%02d (+%smin de janela; a ÚNICA que remove)' % (
        varredura[0],
        varredura[1],
        janela_min,
    )


def espera_apos_falhas(intervalo: int, falhas: int) -> int:
    """Segundos até a próxima tentativa: o intervalo, dobrando a cada falha seguida."""
    if falhas <= 0:
        return intervalo
    # min antes da potencia: 2**falhas cresce sem limite num ouvinte fora do ar ha dias.
    fator: int = 2 ** min(falhas, 20)
    return min(intervalo * fator, TETO_ESPERA)
