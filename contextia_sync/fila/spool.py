"""
O spool da captura por log (`binlog`): as mudanças lidas do log ficam aqui,
no disco, antes de ir ao Contextia.

Por que existe: o log tem de ser consumido mesmo com o Contextia fora do ar,
senão a posição envelhece além da retenção (o MariaDB apaga o binlog) e o
ouvinte não sabe mais o que perdeu. Então a leitura do log e a entrega se
separam: a leitura põe aqui e só então grava a posição; a entrega tira daqui e
só apaga depois que o intake confirmou.

É a fila de `diretorio.py` (o seed 004), a mesma em que a quarentena mora --
um mecanismo, não dois:

    <estado>/spool/pronto/   mudanças esperando entrega, em ordem de captura
    <estado>/spool/tomado/   a entrega em curso; achado aqui ao abrir = destino
                             desconhecido (o ouvinte morreu no meio): volta a
                             pronto/, NOMEADO no log e no status -- o intake é
                             idempotente (upsert e remove por key), reenviar dá
                             o mesmo estado final
    entregue                 o arquivo é apagado
    recusado de vez          vai para a quarentena (`<estado>/quarentena/parado/`),
                             pelo mesmo caminho do ao-vivo (intake/cliente.py)

Um item é uma LINHA (dataset + valor da key), não um evento: a chave do
arquivo é derivada dela, então a mesma linha mudada dez vezes antes da entrega
é um item só (o conteúdo é relido da origem na entrega: vale o estado mais
novo), e reler o log depois de um `kill -9` antes de gravar a posição troca o
arquivo no lugar em vez de duplicar. A sequência no nome dá a ordem de entrega
por dataset e empresa. O item guarda as empresas das imagens da linha (antes e
depois): a linha que mudou de empresa sai da antiga.

Cheio (itens ou bytes): `guardar` levanta `ErroSpoolCheio` e nada é
descartado -- a captura pausa (a posição não avança) e diz isso alto.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contextia_sync import padroes
from contextia_sync.fila.diretorio import (
    PRONTO,
    TOMADO,
    ErroFilaCheia,
    FilaEmDiretorio,
    ItemDaFila,
    parte_segura,
)

FORMATO = 1
"""Versão do conteúdo de cada arquivo do spool."""


class ErroSpoolCheio(ErroFilaCheia):
    """O spool chegou ao limite: a captura pausa, nada é descartado."""


@dataclass
class Mudanca:
    """Uma linha que mudou no log: o dataset, o valor da key e as empresas das imagens."""

    dataset: str
    chave: Any
    escopos: list[str | None] = field(default_factory=list)
    evento: str = 'update'            # insert | update | delete (o último visto)
    posicao: str = ''                 # a posição do log do evento (GTID no MariaDB)
    quando: float = 0.0               # a hora do evento na origem (epoch)


@dataclass(frozen=True)
class ItemDoSpool:
    """Uma mudança tomada para entrega: o arquivo e o conteúdo."""

    meta: ItemDaFila
    dataset: str
    chave: Any
    escopos: tuple[str | None, ...]
    evento: str
    desde: str


def chave_do_arquivo(dataset: str, chave: Any) -> str:
    """A identidade de uma linha no nome do arquivo: legível na frente, exata no hash."""
    exata = json.dumps([dataset, chave], sort_keys=True, default=str)
    return '%s-%s' % (parte_segura(dataset, 40),
                      hashlib.sha256(exata.encode('utf-8')).hexdigest()[:20])


def _agora() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')


class Spool:
    """
    O spool em `pasta` (no ouvinte, `<estado>/spool`). Ver o topo do módulo.

    Este processo é o único que entrega: abrir segura a trava de trabalho da
    fila até `fechar()` (um segundo ouvinte no mesmo estado já é recusado pela
    trava do estado). `somente_leitura` só conta (status de outro processo).
    """

    def __init__(self, pasta: str | os.PathLike[str], *,
                 maximo_itens: int = padroes.SPOOL_MAXIMO_ITENS,
                 maximo_bytes: int = padroes.SPOOL_MAXIMO_BYTES,
                 logger: logging.Logger | None = None, somente_leitura: bool = False) -> None:
        if logger is None:
            from contextia_sync.registro import logger as do_sdk
            logger = do_sdk
        self._log = logger
        self._fila = FilaEmDiretorio(pasta, maximo_itens=maximo_itens,
                                     maximo_bytes=maximo_bytes, devolver_tomados_para=PRONTO,
                                     rotulo='spool', logger=logger,
                                     somente_leitura=somente_leitura)
        self._pilha = contextlib.ExitStack()
        if not somente_leitura:
            self._pilha.enter_context(self._fila.trabalhando())

    @property
    def pasta(self) -> Path:
        return self._fila.raiz

    @property
    def devolvidos(self) -> list[str]:
        """Os arquivos achados em tomado/ ao abrir (destino desconhecido), re-enfileirados."""
        return list(self._fila.devolvidos)

    def fechar(self) -> None:
        self._pilha.close()

    # ------------------------------------------------------------ guardar
    def guardar(self, mudancas: Iterable[Mudanca]) -> int:
        """
        Põe cada mudança no spool (a mesma linha troca o arquivo no lugar). Devolve
        quantos itens novos. Cada arquivo é gravado com fsync antes do próximo:
        quem chama pode gravar a posição do log assim que isto volta.

        ErroSpoolCheio se uma não cabe: as anteriores ficaram, esta e as
        seguintes não -- quem chama não avança a posição sobre elas.
        """
        existentes = {item.chave: item for item in self._fila.itens()}
        novos = 0
        for mudanca in mudancas:
            chave = chave_do_arquivo(mudanca.dataset, mudanca.chave)
            anterior = existentes.get(chave)
            conteudo_anterior = anterior.ler() if anterior is not None else None
            escopos: list[str | None] = []
            for escopo in list((conteudo_anterior or {}).get('escopos') or []) + \
                    list(mudanca.escopos):
                if escopo not in escopos:
                    escopos.append(escopo)
            conteudo = {
                'formato': FORMATO, 'dataset': mudanca.dataset, 'chave': mudanca.chave,
                'escopos': escopos, 'evento': mudanca.evento, 'posicao': mudanca.posicao,
                'quando': mudanca.quando,
                'desde': (conteudo_anterior or {}).get('desde') or _agora(),
            }
            try:
                caminho, novo = self._fila.por(chave, conteudo)
            except ErroFilaCheia as cheia:
                raise ErroSpoolCheio(
                    'spool cheio em %s: %d mudança(s), %.1f MiB (limite %d, %.1f MiB). A'
                    ' captura do log está PAUSADA: a posição não avança e nada se perde'
                    ' enquanto o binlog da origem não expirar. Causa: o Contextia não'
                    ' recebe (veja os erros de envio acima) ou recebe mais devagar do que'
                    ' a origem muda. Correção: traga o Contextia de volta (o spool drena'
                    ' sozinho, em ordem), ou aumente o limite se o disco tem espaço.'
                    % (self.pasta, cheia.itens, cheia.ocupados / 1048576, cheia.maximo_itens,
                       cheia.maximo_bytes / 1048576),
                    itens=cheia.itens, ocupados=cheia.ocupados,
                    maximo_itens=cheia.maximo_itens,
                    maximo_bytes=cheia.maximo_bytes) from None
            novos += int(novo)
            if anterior is None or anterior.estado != PRONTO:
                existentes[chave] = ItemDaFila(caminho, PRONTO, 0, chave, 0)
        return novos

    # ------------------------------------------------------------ entregar
    def tomar(self, dataset: str, maximo: int) -> list[ItemDoSpool]:
        """
        Até `maximo` mudanças de `dataset`, em ordem, movidas para tomado/.

        Antes, o que ficou tomado deste dataset de uma entrega que falhou volta a
        pronto/ (com a versão mais nova, se chegou uma): a leitura seguinte é a
        nova tentativa.
        """
        for meta in self._fila.itens(TOMADO):
            conteudo = meta.ler()
            if conteudo is None or conteudo.get('dataset') == dataset:
                self._fila.devolver(meta, PRONTO)
        tomados: list[ItemDoSpool] = []
        for meta in self._fila.itens(PRONTO):
            if len(tomados) >= maximo:
                break
            if not meta.chave.startswith(parte_segura(dataset, 40) + '-'):
                continue
            conteudo = meta.ler()
            if conteudo is None or conteudo.get('dataset') != dataset:
                continue
            tomado = self._fila.tomar(meta)
            if tomado is None:
                continue
            tomados.append(ItemDoSpool(
                meta=tomado, dataset=dataset, chave=conteudo.get('chave'),
                escopos=tuple(conteudo.get('escopos') or ()),
                evento=str(conteudo.get('evento') or ''),
                desde=str(conteudo.get('desde') or '')))
        return tomados

    def concluir(self, itens: Iterable[ItemDoSpool]) -> None:
        """O intake confirmou: os arquivos saem (a versão mais nova em pronto/ fica)."""
        for item in itens:
            self._fila.concluir(item.meta)

    # ------------------------------------------------------------ medir
    def profundidade(self) -> int:
        """Mudanças esperando entrega (pronto/ e tomado/)."""
        return self._fila.contar()

    def bytes_ocupados(self) -> int:
        return self._fila.bytes_ocupados()

    def idade_do_mais_velho(self) -> float | None:
        """Segundos desde que a mudança mais antiga ainda não entregue entrou; None se vazio."""
        for meta in self._fila.itens():
            conteudo = meta.ler()
            if not conteudo or not conteudo.get('desde'):
                continue
            try:
                desde = datetime.datetime.fromisoformat(str(conteudo['desde']))
            except ValueError:
                continue
            agora = datetime.datetime.now(datetime.timezone.utc)
            return max(0.0, round((agora - desde).total_seconds(), 1))
        return None
