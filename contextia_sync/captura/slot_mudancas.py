"""
Das mensagens do pgoutput às mudanças do spool, transação por transação. Puro.

Um peek do slot devolve mensagens em ordem (Begin, Relation, Insert...,
Commit); `LidoDoSlot.receber` as junta: cada linha mudada de uma tabela seguida
vira uma `Mudanca` por dataset (a key, o evento, as empresas das imagens antiga
e nova) e só a transação COMITADA entra na lista -- a que o limite do peek
cortou no meio fica de fora e é lida inteira no peek seguinte.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from contextia_sync.captura import DatasetVivo, TabelaBase
from contextia_sync.captura.binlog_eventos import chave_da_mudanca, escopo_da_imagem
from contextia_sync.captura.pgoutput import TIPOS_INTEIROS, Mensagem, Relacao, lsn_para_int
from contextia_sync.fila.spool import Mudanca


def tabela_do_nome(nome: str) -> tuple[str, str]:
    """(esquema, tabela) de um nome do mapeamento (sem esquema: public)."""
    esquema, _, tabela = str(nome).rpartition('.')
    return esquema or 'public', tabela


_EVENTOS = {'I': 'insert', 'U': 'update', 'D': 'delete'}


@dataclass
class LidoDoSlot:
    """O que um peek trouxe: as transações inteiras, as tabelas esvaziadas, o último commit."""

    tabelas: dict[tuple[str, str], list[DatasetVivo]]
    relacoes: dict[int, Relacao] = field(default_factory=dict)
    # (lsn do commit, mudanças da transação): só transação inteira entra no spool.
    transacoes: list[tuple[int, list[Mudanca]]] = field(default_factory=list)
    pendente: dict[tuple[str, str], Mudanca] = field(default_factory=dict)
    truncadas: set[str] = field(default_factory=set)
    linhas: int = 0
    ultimo_ts: float = 0.0

    def receber(self, lsn: str, mensagem: Mensagem) -> None:
        self.linhas += 1
        tratar = _TRATAR.get(mensagem.tipo)
        if tratar is not None:
            tratar(self, lsn, mensagem)

    def _relacao(self, lsn: str, mensagem: Mensagem) -> None:  # noqa: ARG002
        if mensagem.relacao_nova is not None:
            self.relacoes[mensagem.relacao] = mensagem.relacao_nova

    def _begin(self, lsn: str, mensagem: Mensagem) -> None:  # noqa: ARG002
        self.pendente = {}

    def _linha(self, lsn: str, mensagem: Mensagem) -> None:
        relacao = self.relacoes.get(mensagem.relacao)
        if relacao is not None:
            seguida = (relacao.esquema, relacao.tabela)
            for alvo in self.tabelas.get(seguida) or ():
                base = alvo.base_seguida(seguida, tabela_do_nome)
                if base is not None:
                    self._mudanca(alvo, base, relacao, mensagem, lsn)

    def _truncate(self, lsn: str, mensagem: Mensagem) -> None:  # noqa: ARG002
        for oid in mensagem.truncadas:
            relacao = self.relacoes.get(oid)
            if relacao is not None:
                self.truncadas.update(
                    alvo.nome for alvo in self.tabelas.get((relacao.esquema, relacao.tabela), [])
                )

    def _commit(self, lsn: str, mensagem: Mensagem) -> None:
        self.transacoes.append((lsn_para_int(lsn), list(self.pendente.values())))
        self.pendente = {}
        self.ultimo_ts = mensagem.quando

    def _mudanca(
        self, alvo: DatasetVivo, base: TabelaBase, relacao: Relacao, mensagem: Mensagem, lsn: str
    ) -> None:
        """A linha mudada em `alvo`: uma Mudanca por key (ou cabeçalho) na transação."""
        nomes = [nome for nome, _ in relacao.colunas]
        inteira = dict(relacao.colunas).get(base.coluna) in TIPOS_INTEIROS
        evento = _EVENTOS[mensagem.tipo]
        for imagem in mensagem.imagens:
            linha = dict(zip(nomes, imagem, strict=False))
            if inteira and linha.get(base.coluna) is not None:
                linha[base.coluna] = int(linha[base.coluna])
            valor = chave_da_mudanca(base, linha)
            if valor is None:
                continue
            escopo = escopo_da_imagem(alvo, base, linha)
            mudanca = self.pendente.setdefault(
                (alvo.nome, str(valor)),
                Mudanca(dataset=alvo.nome, chave=valor, evento=evento, posicao=lsn),
            )
            mudanca.evento = evento
            if escopo not in mudanca.escopos:
                mudanca.escopos.append(escopo)


_TRATAR: dict[str, Callable[[LidoDoSlot, str, Mensagem], None]] = {
    'R': LidoDoSlot._relacao,
    'B': LidoDoSlot._begin,
    'I': LidoDoSlot._linha,
    'U': LidoDoSlot._linha,
    'D': LidoDoSlot._linha,
    'T': LidoDoSlot._truncate,
    'C': LidoDoSlot._commit,
}
