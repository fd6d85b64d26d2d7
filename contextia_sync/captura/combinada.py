"""
`coluna+reconciliacao`: as duas estratégias num ouvinte só, cada uma no seu ritmo.

    a cada --intervalo-dados          a `coluna`: inclusão e alteração, em segundos
    a cada --intervalo-reconciliacao  a `reconciliacao`: a exclusão (e a inclusão
                                      que a coluna não viu), em minutos

Um dataset com coluna de mudança e `key` tem as duas; só com a coluna, só a
`coluna` (a exclusão dele fica para a varredura, e o status diz por que); só
com `key`, só a reconciliacao (inclusão e exclusão; alteração na varredura).

Quando as duas leem no mesmo ciclo, o conjunto de chaves e lido PRIMEIRO e a
janela da coluna depois: uma chave que a reconciliacao viu sumir e que a
coluna lê de volta, na mesma empresa, comitou depois da leitura das chaves --
está viva, e não é removida. A linha que as duas trazem vai uma vez só (a da
coluna, lida por último).

A coluna acima do `--maximo-por-ciclo` entrega o dataset à varredura (a marca
dela para até lá), e a reconciliação NÃO para com ela: a exclusão e a inclusão
daquele dataset seguem ao vivo (`_acima_do_teto`); só a alteração espera a
varredura.

Uma falha da reconciliacao (a leitura das chaves caiu no meio) não para a
coluna: fica no status da reconciliacao do dataset, e a coluna segue.

O que a coluna entrega vai também para o diário da empresa
(`reconciliacao.anotar_entregues`): a próxima comparação usa o conjunto MAIS o
diário, e a linha entregue pela coluna entre duas leituras do conjunto e
apagada antes da segunda sai na reconciliação, não só na varredura.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING

from contextia_sync.origem import AdaptadorDeOrigem
from contextia_sync.captura import DatasetVivo, Leitura, Situacao, conjuntos
from contextia_sync.captura.coluna import CapturaColuna
from contextia_sync.captura.reconciliacao import CapturaReconciliacao, OpcoesReconciliacao
from contextia_sync.escopos import texto_escopo
from contextia_sync.estado.estado import Estado

if TYPE_CHECKING:  # tipos.py importa o sqlalchemy, que o autoteste não tem
    from contextia_sync.tipos import Linha, ValorDoBanco


@dataclass
class _Juntas:
    """As duas leituras de um ciclo, para o `confirmar` devolver cada uma a sua dona."""

    coluna: Leitura | None
    reconciliacao: Leitura | None


class CapturaCombinada:
    """`coluna+reconciliacao`: a `coluna` a cada ciclo, a reconciliacao no intervalo dela."""

    nome = 'coluna+reconciliacao'

    def __init__(
        self,
        origem: AdaptadorDeOrigem,
        estado: Estado,
        folga: int,
        maximo: int,
        opcoes: OpcoesReconciliacao,
    ) -> None:
        self.coluna = CapturaColuna(origem, estado, folga, maximo)
        self.reconciliacao = CapturaReconciliacao(origem, estado, folga, maximo, opcoes)

    def conferir(self, alvos: list[DatasetVivo]) -> list[str]:
        return self.coluna.conferir([a for a in alvos if a.watch]) + self.reconciliacao.conferir(
            [a for a in alvos if a.reconcilia]
        )

    def ler(self, alvo: DatasetVivo) -> Leitura:
        rec: Leitura | None = None
        if alvo.reconcilia:
            try:
                rec = self.reconciliacao.ler(alvo)
            except Exception:  # noqa: BLE001 - a coluna nao para por ela
                # A falha ja esta no log e no status da reconciliacao; sem coluna de
                # mudanca, ela e a leitura inteira do dataset, e o ciclo a registra.
                if not alvo.watch:
                    raise
        if not alvo.watch:
            return rec if rec is not None else Leitura(Situacao.NADA, sondou=False)
        col = self.coluna.ler(alvo)
        if rec is None:
            return col
        if col.situacao is Situacao.GRANDE:
            return _acima_do_teto(col, rec)
        return _juntar(alvo, col, rec)

    def antes_de_enviar(self, alvo: DatasetVivo, leitura: Leitura) -> None:
        if alvo.reconcilia:
            # As linhas da coluna também: entregues sem confirmar e apagadas antes do
            # próximo ciclo, a coluna não as relê, e só a reconciliação as tira.
            self.reconciliacao.antes_de_enviar(alvo, leitura)

    def desistir(self, alvo: DatasetVivo) -> None:  # noqa: ARG002 - o protocolo
        """Nada a devolver: a posição só anda no `confirmar`."""

    def confirmar(self, alvo: DatasetVivo, leitura: Leitura) -> None:
        self._confirmar(alvo, leitura)
        if alvo.reconcilia:
            # Depois do diário e do conjunto: as chaves deste envio já estão neles.
            self.reconciliacao.soltar_tentadas(alvo)

    def _confirmar(self, alvo: DatasetVivo, leitura: Leitura) -> None:
        juntas = leitura.privado
        if not isinstance(juntas, _Juntas):
            # Uma leitura so (a outra nao leu neste ciclo): de quem for.
            if alvo.reconcilia and not alvo.watch:
                self.reconciliacao.confirmar(alvo, leitura)
            else:
                self.coluna.confirmar(alvo, leitura)
                if alvo.reconcilia and leitura.situacao is Situacao.MUDANCAS:
                    self.reconciliacao.anotar_entregues(alvo, leitura.upserts)
            return
        if juntas.coluna is not None and juntas.coluna.situacao is Situacao.MUDANCAS:
            self.coluna.confirmar(alvo, juntas.coluna)
            # Antes do confirmar da reconciliacao: o conjunto que ela regrava agora
            # ja nao inclui este diario (tomado na leitura), que fica para a proxima.
            self.reconciliacao.anotar_entregues(alvo, juntas.coluna.upserts)
        if juntas.reconciliacao is not None and juntas.reconciliacao.situacao is Situacao.MUDANCAS:
            # As remocoes que o ciclo de fato entregou (ele tira as que falharam).
            self.reconciliacao.confirmar(
                alvo,
                dataclasses.replace(
                    juntas.reconciliacao,
                    remocoes=leitura.remocoes,
                    remocoes_por_escopo=leitura.remocoes_por_escopo,
                ),
            )

    def posicao_atual(self, alvo: DatasetVivo) -> object:
        return self.coluna.posicao_atual(alvo) if alvo.watch else None

    def saltar(self, alvo: DatasetVivo, posicao: object) -> object:
        return self.coluna.saltar(alvo, posicao) if alvo.watch else posicao

    def antes_da_carga(self, alvo: DatasetVivo, escopo: str | None) -> object:
        return self.reconciliacao.antes_da_carga(alvo, escopo) if alvo.reconcilia else None

    def depois_da_carga(
        self, alvo: DatasetVivo, antes: object, fechados: Collection[str | None]
    ) -> None:
        if alvo.reconcilia:
            self.reconciliacao.depois_da_carga(alvo, antes, fechados)


def _acima_do_teto(col: Leitura, rec: Leitura) -> Leitura:
    """
    A coluna acima do teto entrega o dataset à varredura e a marca dela para; a
    reconciliação segue no mesmo dataset, e o que ela achou vai agora.

    Descartada, a exclusão do dataset ficaria para a varredura do dia (até 24 h
    depois de uma operação em massa às 10 h). Sem a coluna para casar, a
    proteção é a da própria reconciliação: a chave a remover é conferida de
    novo na origem (`key IN`) logo antes de ir.
    """
    if rec.situacao is not Situacao.MUDANCAS:
        return col
    return Leitura(
        Situacao.GRANDE,
        upserts=rec.upserts,
        remocoes=rec.remocoes,
        remocoes_por_escopo=rec.remocoes_por_escopo,
        quantos=col.quantos,
        privado=_Juntas(None, rec),
    )


def _juntar(alvo: DatasetVivo, col: Leitura, rec: Leitura) -> Leitura:
    """As duas leituras numa só: a linha repetida uma vez, a chave viva não removida."""
    if col.situacao is not Situacao.MUDANCAS and rec.situacao is not Situacao.MUDANCAS:
        return col
    vistas: set[tuple[str | None, str]] = set()
    if alvo.chave is not None:
        for linha in col.upserts:
            if linha.get(alvo.chave) is not None:
                vistas.add(
                    (
                        texto_escopo(linha.get(alvo.escopo)) if alvo.escopo else None,
                        conjuntos.codificar(linha[alvo.chave]),
                    )
                )

    # A linha que a coluna leu marcada como apagada (deleted_when) sai como
    # remoção; lida depois, vence o upsert da mesma chave vindo da reconciliação.
    apagadas: set[tuple[str | None, str]] = {(None, conjuntos.codificar(v)) for v in col.remocoes}
    for escopo, valores in col.remocoes_por_escopo.items():
        apagadas.update((escopo, conjuntos.codificar(v)) for v in valores)

    def lida_pela_coluna(escopo: str | None, valor: ValorDoBanco) -> bool:
        return (escopo, conjuntos.codificar(valor)) in vistas

    def da_coluna(linha: Linha) -> bool:
        assert alvo.chave is not None
        escopo = texto_escopo(linha.get(alvo.escopo)) if alvo.escopo else None
        identidade = (escopo, conjuntos.codificar(linha[alvo.chave]))
        return identidade in vistas or identidade in apagadas

    upserts = list(col.upserts) + [
        linha for linha in rec.upserts if alvo.chave is None or not da_coluna(linha)
    ]
    por_escopo = {
        escopo: [v for v in valores if not lida_pela_coluna(escopo, v)]
        for escopo, valores in rec.remocoes_por_escopo.items()
    }
    for escopo, valores in col.remocoes_por_escopo.items():
        ja = {conjuntos.codificar(v) for v in por_escopo.get(escopo, [])}
        por_escopo.setdefault(escopo, []).extend(
            v for v in valores if conjuntos.codificar(v) not in ja
        )
    return Leitura(
        Situacao.MUDANCAS,
        upserts=upserts,
        remocoes=[v for v in rec.remocoes if not lida_pela_coluna(None, v)] + col.remocoes,
        remocoes_por_escopo={e: v for e, v in por_escopo.items() if v},
        quantos=col.quantos + rec.quantos,
        atrasadas=col.atrasadas,
        posicao=col.posicao,
        privado=_Juntas(col, rec),
    )
