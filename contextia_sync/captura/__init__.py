"""
A captura: como o ouvinte descobre o que mudou na origem.

Cada estratégia (`coluna`, `reconciliacao`, as duas juntas, `binlog` e
`slot_logico`) implementa o protocolo `Captura` abaixo, e os ciclos do
ouvinte só falam com ele: ler o que mudou desde a posição guardada, entregar,
e só então confirmar a posição nova. Uma estratégia nova entra sem tocar nos
ciclos.

    estrategias.py    a tabela das estratégias, a recusa que ensina, e qual
                      classe implementa cada uma (o registro)
    marca_agua.py     as regras da marca de água, TODAS, em funções puras
    casos_marca.py    a tabela de casos dessas regras (autoteste e pytest)
    ao_vivo.py        que datasets ficam ao vivo; repartir linhas por empresa
    coluna.py         a estratégia `coluna`: sonda numa coluna de mudança
    conjuntos.py      o conjunto de chaves entregue, no disco, e a diferença
                      dele com a origem em streaming (funções puras)
    reconciliacao.py  a estratégia `reconciliacao`: a diferença do conjunto de
                      chaves; vê inclusão e exclusão
    combinada.py      `coluna+reconciliacao`: as duas num ouvinte só, cada uma
                      no seu intervalo
    do_spool.py       o que `binlog` e `slot_logico` têm igual: a base
                      `CapturaPeloSpool`, a posição em arquivo, a leitura do spool
    binlog.py         a estratégia `binlog` (MariaDB): o leitor do log de
                      replicação e o laço sobre os eventos, pelo spool de fila/spool.py
    binlog_eventos.py o que se faz com os eventos, puro: o lote, o GTID, o TRUNCATE
    slot_logico.py    a estratégia `slot_logico` (PostgreSQL): a bomba slot ->
                      spool -> advance (pgoutput por SQL), pelo mesmo spool
    pgoutput.py       o decodificador do protocolo pgoutput, puro (bytes -> Mensagem)
    slot_mudancas.py  mensagens decodificadas -> transações de mudanças, puro
    slot_banco.py     o PostgreSQL do slot: conexão, a linha do slot, as conferências
    comandos_slot.py  os comandos do operador: --criar-slot/--remover-slot
    slot_publicacao.py o que a publicação incluiria (herança, partições), conferido
                      antes de qualquer DDL
    releitura.py      as mudanças do spool relidas pela view: o que vai, e de que
                      empresas cada key sai
    indice_entregas.py o índice key -> empresa do que foi entregue (a remoção vai
                      à empresa em que a linha foi entregue)
    tabelas_base.py   as `base_tables` conferidas no catálogo da origem
    medida_do_log.py  o log medido na origem para a saúde, com o ouvinte parado

Pode importar: origem (o contrato do adaptador), estado, mapeamento, escopos.
Não fala com o Contextia: quem entrega e o ciclo de dados (ouvinte/dados.py).
Puro no topo de cada módulo (o autoteste roda num `python3 -S`).

Como acrescentar uma estratégia: docs/arquitetura.md.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass, field
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # so a anotacao: o topo fica puro (autoteste)
    from contextia_sync.origem.marca_apagada import MarcaDeApagado
    from contextia_sync.tipos import DatasetDoMapa, Linha, ValorDoBanco


class Situacao(str, enum.Enum):
    """O que uma leitura achou."""

    INICIO = 'inicio'  # primeira sonda: so fixou o ponto de partida, nada a enviar
    NADA = 'nada'  # nada mudou desde a posicao guardada
    # Passou do teto por ciclo: o dataset vai para a varredura. Pode trazer o que
    # a reconciliacao achou no mesmo dataset, que vai assim mesmo (combinada.py).
    GRANDE = 'grande'
    MUDANCAS = 'mudancas'  # ha o que entregar


@dataclass(frozen=True)
class TabelaBase:
    """
    Uma tabela base de um dataset ao vivo pelo log (`base_tables`): a linha
    mudada dela com `coluna` = X chega às linhas do dataset com
    `coluna_do_dataset` = X. Pela key (`pela_chave`): X é a key da linha do
    dataset (os itens da nota, a própria tabela). Por outra coluna: X relê as
    linhas do dataset por ela (o cabeçalho, cujos itens a view mostra).
    """

    nome: str  # como no mapeamento: 'tabela' ou 'esquema.tabela'
    coluna: str
    coluna_do_dataset: str
    pela_chave: bool


def tabelas_base_do_dataset(row: DatasetDoMapa, chave: str) -> list[TabelaBase]:
    """As `base_tables` do dataset (padrão: o próprio `source_object`, pela key)."""
    tabelas: list[TabelaBase] = []
    for item in row.get('base_tables') or [row['source_object']]:
        if isinstance(item, dict):
            nome = str(item['table'])
            coluna = str(item.get('column') or chave)
            do_dataset = str(item.get('dataset_column') or chave)
        else:
            nome, coluna, do_dataset = str(item), chave, chave
        tabelas.append(TabelaBase(nome, coluna, do_dataset, do_dataset == chave))
    return tabelas


@dataclass
class DatasetVivo:
    """Um dataset do ao-vivo: o trecho do mapeamento e o que a captura usa dele."""

    nome: str  # normalizado, como o Contextia o conhece
    row: DatasetDoMapa  # o dataset como esta no mapeamento
    watch: str | None  # a coluna de mudanca (estrategia `coluna`)
    chave: str | None  # a `key` (None: dedup por hash no servidor)
    escopo: str | None = None  # a `scope_column` (None: vai para toda empresa)
    reconcilia: bool = False  # a estrategia `reconciliacao` cuida dele
    # `deleted_when` (origem/marca_apagada.py): a linha marcada sai como remoção.
    marca: MarcaDeApagado | None = None

    @property
    def source_object(self) -> str:
        return str(self.row['source_object'])

    @property
    def colunas(self) -> list[str]:
        return list(self.row['columns'])

    @functools.cached_property
    def tabelas_base(self) -> list[TabelaBase]:
        """As tabelas cujas mudanças o log traz para este dataset (só com `key`)."""
        return tabelas_base_do_dataset(self.row, self.chave or '')

    def base_seguida(
        self, tabela: tuple[str, str], resolver: Callable[[str], tuple[str, str]]
    ) -> TabelaBase | None:
        """
        A tabela base deste dataset que é `tabela` ((esquema, nome) como `resolver`
        os dá). Chamada a cada linha do log: a resposta fica guardada por tabela
        (cada dataset é de uma captura só, com um `resolver` só).
        """
        guardadas: dict[tuple[str, str], TabelaBase | None]
        guardadas = self.__dict__.setdefault('_bases_resolvidas', {})
        if tabela not in guardadas:
            guardadas[tabela] = next(
                (b for b in self.tabelas_base if resolver(b.nome) == tabela), None
            )
        return guardadas[tabela]


@dataclass
class Leitura:
    """O que mudou num dataset desde a posição confirmada."""

    situacao: Situacao
    upserts: list[Linha] = field(default_factory=list)
    # Valores de `key` que sumiram da origem (estrategias que veem DELETE): de
    # TODAS as empresas (dataset sem recorte), e por empresa.
    remocoes: list[ValorDoBanco] = field(default_factory=list)
    remocoes_por_escopo: dict[str, list[ValorDoBanco]] = field(default_factory=dict)
    quantos: int = 0  # linhas que a sonda contou
    atrasadas: int = 0  # chegadas atrasadas entre as lidas
    posicao: object = None  # a posicao nova: so vale depois de confirmar()
    privado: object = None  # o que so a estrategia usa no confirmar()
    # False: nada foi lido da origem nesta chamada (a reconciliacao fora do
    # intervalo dela): nao conta como sonda boa, e nao apaga o erro anterior.
    sondou: bool = True


class Captura(Protocol):
    """O que uma estratégia de captura oferece aos ciclos do ouvinte."""

    nome: str

    def conferir(self, alvos: list[DatasetVivo]) -> list[str]:
        """O que a origem precisa ter para esta estratégia (na subida); problemas, ou []."""
        ...

    def ler(self, alvo: DatasetVivo) -> Leitura:
        """O que mudou desde a posição confirmada. Não avança nada."""
        ...

    def antes_de_enviar(self, alvo: DatasetVivo, leitura: Leitura) -> None:
        """
        `leitura` vai ser enviada agora. Quem precisa saber o que PODE ter chegado
        ao Contextia mesmo sem `confirmar` (o envio que falha no meio, o kill -9
        depois da primeira empresa) anota aqui; as outras não fazem nada.
        """
        ...

    def confirmar(self, alvo: DatasetVivo, leitura: Leitura) -> None:
        """A leitura foi entregue inteira: a posição avança para `leitura.posicao`."""
        ...

    def desistir(self, alvo: DatasetVivo) -> None:
        """
        A entrega da leitura de `alvo` falhou (nada confirmado): o que a leitura
        tomou volta a esperar (as por log: o spool volta a pronto/ já). A
        posição não anda, em nenhuma.
        """
        ...

    def posicao_atual(self, alvo: DatasetVivo) -> object:
        """A posição da origem agora (lida ANTES de uma varredura)."""
        ...

    def saltar(self, alvo: DatasetVivo, posicao: object) -> object:
        """A varredura entregou tudo até `posicao`: salta para la. Devolve a nova."""
        ...

    def antes_da_carga(self, alvo: DatasetVivo, escopo: str | None) -> object:
        """
        Lido ANTES de uma carga completa (de `escopo`, ou de todas com None):
        o que a estratégia guarda para depois dela. None = nada a guardar.
        """
        ...

    def depois_da_carga(
        self, alvo: DatasetVivo, antes: object, fechados: Collection[str | None]
    ) -> None:
        """
        A carga fechou as empresas `fechados` (None: o dataset sem recorte, em
        todas): a posição delas nasce de `antes`.
        """
        ...
