"""
A captura: como o ouvinte descobre o que mudou na origem.

Cada estrategia (`coluna` hoje; `reconciliacao`, `binlog`, `slot_logico`
depois) implementa o protocolo `Captura` abaixo, e os ciclos do ouvinte so
falam com ele: ler o que mudou desde a posicao guardada, entregar, e so entao
confirmar a posicao nova. Uma estrategia nova entra sem tocar nos ciclos.

    estrategias.py   a tabela das estrategias, a recusa que ensina, e qual
                     classe implementa cada uma (o registro)
    marca_agua.py    as regras da marca de agua, TODAS, em funcoes puras
    casos_marca.py   a tabela de casos dessas regras (autoteste e pytest)
    ao_vivo.py       que datasets ficam ao vivo; repartir linhas por empresa
    coluna.py        a estrategia `coluna`: sonda numa coluna de mudanca
    binlog.py        a estrategia `binlog` (MariaDB): o log de replicacao, pelo
                     spool de fila/spool.py

Pode importar: origem (o contrato do adaptador), estado, mapeamento, escopos.
Nao fala com o Contextia: quem entrega e o ciclo de dados (ouvinte/dados.py).
Puro no topo de cada modulo (o autoteste roda num `python3 -S`).

Como acrescentar uma estrategia: docs/arquitetura.md.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Protocol


class Situacao(str, enum.Enum):
    """O que uma leitura achou."""

    INICIO = 'inicio'        # primeira sonda: so fixou o ponto de partida, nada a enviar
    NADA = 'nada'            # nada mudou desde a posicao guardada
    GRANDE = 'grande'        # passou do teto por ciclo: o dataset vai para a varredura
    MUDANCAS = 'mudancas'    # ha o que entregar


@dataclass
class DatasetVivo:
    """Um dataset do ao-vivo: o trecho do mapeamento e o que a captura usa dele."""

    nome: str                        # normalizado, como o Contextia o conhece
    row: dict[str, Any]              # o dataset como esta no mapeamento
    watch: str | None                # a coluna de mudanca (estrategia `coluna`)
    chave: str | None                # a `key` (None: dedup por hash no servidor)

    @property
    def source_object(self) -> str:
        return str(self.row['source_object'])

    @property
    def colunas(self) -> list[str]:
        return list(self.row['columns'])


@dataclass
class Leitura:
    """O que mudou num dataset desde a posicao confirmada."""

    situacao: Situacao
    upserts: list[dict[str, Any]] = field(default_factory=list)
    # Valores de `key` que sumiram da origem (estrategias que veem DELETE).
    remocoes: list[Any] = field(default_factory=list)
    # As mesmas, mas de UMA empresa cada (o `binlog` sabe de qual empresa era a linha).
    remocoes_por_escopo: dict[str, list[Any]] = field(default_factory=dict)
    quantos: int = 0                 # linhas que a sonda contou
    atrasadas: int = 0               # chegadas atrasadas entre as lidas
    posicao: Any = None              # a posicao nova: so vale depois de confirmar()
    privado: Any = None              # o que so a estrategia usa no confirmar()


class Captura(Protocol):
    """O que uma estrategia de captura oferece aos ciclos do ouvinte."""

    nome: str

    def conferir(self, alvos: list[DatasetVivo]) -> list[str]:
        """O que a origem precisa ter para esta estrategia (na subida); problemas, ou []."""
        ...

    def ler(self, alvo: DatasetVivo) -> Leitura:
        """O que mudou desde a posicao confirmada. Nao avanca nada."""
        ...

    def confirmar(self, alvo: DatasetVivo, leitura: Leitura) -> None:
        """A leitura foi entregue inteira: a posicao avanca para `leitura.posicao`."""
        ...

    def posicao_atual(self, alvo: DatasetVivo) -> Any:
        """A posicao da origem agora (lida ANTES de uma varredura)."""
        ...

    def saltar(self, alvo: DatasetVivo, posicao: Any) -> Any:
        """A varredura entregou tudo ate `posicao`: salta para la. Devolve a nova."""
        ...
