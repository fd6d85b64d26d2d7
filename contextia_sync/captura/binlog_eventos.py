"""
O que a estratégia `binlog` faz com os eventos do log, sem conexão nenhuma. Puro.

O `BinLogStreamReader` (python-mysql-replication) já decodifica os bytes; aqui
mora o que vem depois: o lote de transações entre o log e o spool (`Lote`), a
posição por GTID (um por domínio) e como ela avança, a linha mudada vira
`Mudanca` (a key e as empresas das imagens antes/depois) e o TRUNCATE lido do
texto do QueryEvent. `binlog.py` é a conexão, o leitor e o laço sobre os eventos.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from contextia_sync.captura import DatasetVivo, TabelaBase
from contextia_sync.escopos import texto_escopo
from contextia_sync.fila.spool import Mudanca

if TYPE_CHECKING:  # tipos.py importa o sqlalchemy, que o autoteste não tem
    from contextia_sync.tipos import ValorDoBanco

# `TRUNCATE [TABLE] [banco.]tabela`, com ou sem crases.
_TRUNCATE = re.compile(r'\s*TRUNCATE\s+(?:TABLE\s+)?(?:`?(\w+)`?\.)?`?(\w+)`?', re.IGNORECASE)


@dataclass
class Lote:
    """As transações lidas do log e ainda não postas no spool (e a que está aberta)."""

    mudancas: list[Mudanca] = field(default_factory=list)
    fechadas: list[tuple[str, int]] = field(default_factory=list)  # (gtid, mudanças até ela)
    pendente: list[Mudanca] = field(default_factory=list)
    transacao: str | None = None
    pular: bool = False  # já no spool (posição guardada além dela)
    primeiro: str = ''  # o primeiro GTID que este leitor deu

    def abrir(self, gtid: str, pular: bool) -> None:
        self.transacao, self.pular, self.pendente = gtid, pular, []

    def fechar(self) -> None:
        if self.transacao is not None and not self.pular:
            self.mudancas.extend(self.pendente)
            self.fechadas.append((self.transacao, len(self.mudancas)))
        self.transacao, self.pendente = None, []

    def esvaziar(self) -> None:
        self.mudancas, self.fechadas = [], []


def tabela(nome: str, banco: str) -> tuple[str, str]:
    """(banco, tabela) em minúsculas; sem banco no nome, o da URL."""
    esquema, _, nome_tabela = nome.rpartition('.')
    return (esquema or banco).lower(), nome_tabela.lower()


def tabela_truncada(query: str, esquema_da_sessao: str | bytes | None) -> str | None:
    """`banco.tabela` (ou só `tabela`) que um TRUNCATE esvazia; None se a query não é um."""
    achado = _TRUNCATE.match(query)
    if achado is None:
        return None
    esquema = achado.group(1) or esquema_da_sessao or ''
    if isinstance(esquema, bytes):
        esquema = esquema.decode('utf-8', 'replace')
    return '%s.%s' % (esquema, achado.group(2)) if esquema else achado.group(2)


class CabecalhoMudado(TypedDict):
    """A mudança de um cabeçalho no spool: a coluna do dataset e o valor dela."""

    por: str
    valor: ValorDoBanco


def chave_da_mudanca(
    base: TabelaBase, imagem: Mapping[str, ValorDoBanco]
) -> ValorDoBanco | CabecalhoMudado:
    """
    O que vai ao spool de uma imagem da tabela base: a key do dataset (a
    tabela que chega pela key) ou o cabeçalho, `{'por': coluna do dataset,
    'valor': X}`, que relê os itens dele; None sem valor na imagem.
    """
    valor = imagem.get(base.coluna)
    if valor is None or base.pela_chave:
        return valor
    return {'por': base.coluna_do_dataset, 'valor': valor}


def escopo_da_imagem(
    alvo: DatasetVivo, base: TabelaBase, imagem: Mapping[str, ValorDoBanco]
) -> str | None:
    """A empresa que a imagem traz (só a tabela que chega pela key e tem a coluna)."""
    if not base.pela_chave or not alvo.escopo or alvo.escopo not in imagem:
        return None
    return texto_escopo(imagem.get(alvo.escopo))


def mudancas_da_linha(
    alvo: DatasetVivo,
    base: TabelaBase,
    imagens: list[Mapping[str, ValorDoBanco]],
    tipo: str,
    gtid: str,
    quando: float,
) -> list[Mudanca]:
    """Uma Mudanca por key (ou cabeçalho) das imagens (antes/depois), com as empresas delas."""
    chaves: dict[str, Mudanca] = {}
    for imagem in imagens:
        valor = chave_da_mudanca(base, imagem)
        if valor is None:
            continue
        escopo = escopo_da_imagem(alvo, base, imagem)
        mudanca = chaves.setdefault(
            str(valor),
            Mudanca(dataset=alvo.nome, chave=valor, evento=tipo, posicao=gtid, quando=quando),
        )
        if escopo not in mudanca.escopos:
            mudanca.escopos.append(escopo)
    return list(chaves.values())


# -- a posição: um GTID por domínio ('0-1-57,1-2-9') ----------------------------------
def partes_do_gtid(posicao: str | None) -> dict[str, str]:
    """A posição por domínio: {'0': '0-1-57', ...}."""
    return {p.split('-', 1)[0]: p for p in (posicao or '').split(',') if p}


def ja_guardada(posicao: str | None, gtid: str) -> bool:
    """A transação `gtid` está aquém da posição (o leitor que se reconecta repassa o log)."""
    dominio, _, resto = gtid.partition('-')
    atual = partes_do_gtid(posicao).get(dominio)
    try:
        return atual is not None and int(resto.rpartition('-')[2]) <= int(atual.rpartition('-')[2])
    except ValueError:
        return False


def avancar(posicao: str | None, gtid: str) -> str:
    """A posição com o domínio de `gtid` trocado por ele (domínios em ordem)."""
    partes = partes_do_gtid(posicao)
    partes[gtid.split('-', 1)[0]] = gtid
    return ','.join(partes[d] for d in sorted(partes))
