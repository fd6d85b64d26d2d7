"""
O lado da entrega das capturas por log (`binlog`, `slot_logico`): do spool ao ciclo.

As duas leem o log de jeitos diferentes, mas entregam igual (releitura.py):
as mudanças tomadas do spool são relidas pela view (o conteúdo que vai é o de
agora, não a imagem do log), e a linha que sumiu da view -- apagada, marcada
como apagada, ou que mudou de empresa -- vira `remove` nas empresas em que foi
entregue (o índice de entregas, indice_entregas.py). O `confirmar` só conclui
no spool a mudança cujas remoções foram entregues: a que falhou volta a
pronto/ já, e a remoção vai de novo. Aqui: a base `CapturaPeloSpool`, a
posição em arquivo, a marca CRÍTICA, o índice que nasce da origem antes de
cada carga, e a amostra que confere as `base_tables` pela key na subida.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from contextia_sync.origem import AdaptadorDeOrigem
from contextia_sync import padroes
from contextia_sync.arquivos import gravar_atomico
from contextia_sync.captura import DatasetVivo, Leitura
from contextia_sync.captura.indice_entregas import IndiceDeEntregas, texto_da_chave
from contextia_sync.captura.releitura import concluir_entregues, leitura_do_spool, semear_indice
from contextia_sync.estado.estado import Estado
from contextia_sync.fila.spool import ItemDoSpool, Spool
from contextia_sync.registro import logger

if TYPE_CHECKING:  # tipos.py importa o sqlalchemy, que o autoteste não tem
    from contextia_sync.tipos import Json, JsonDecodificado, Linha, ObjetoJson

PASTA_SPOOL = 'spool'


def abrir_spool(pasta: str, risco: str) -> Spool:
    """
    O spool da captura em `pasta`, com os limites do ambiente (ou os padrões);
    `risco`: o que a pausa com ele cheio custa na origem, para a recusa dizer.
    """
    return Spool(
        pasta,
        logger=logger,
        risco=risco,
        maximo_itens=int(
            os.environ.get('CONTEXTIA_SPOOL_MAXIMO_ITENS') or padroes.SPOOL_MAXIMO_ITENS
        ),
        maximo_bytes=int(
            os.environ.get('CONTEXTIA_SPOOL_MAXIMO_BYTES') or padroes.SPOOL_MAXIMO_BYTES
        ),
    )


class TetoDoSpool:
    """
    O atraso no spool maior que um ciclo toma (`--maximo-por-ciclo`): a volta
    do Contextia depois de minutos fora, com a origem já quieta. Sem isto o
    resto esperava o `--intervalo-dados` a cada lote (bench/bench_wal_retido.py:
    36 mil linhas em 127 s com o intervalo padrão); com isto, o lote no teto
    ENTREGUE acorda o ciclo seguinte já (`acordar`, na espera entre os ciclos).
    Nunca no --dry-run nem com o Contextia fora (não há entrega), e uma vez por
    entrega: não gira.
    """

    def __init__(self) -> None:
        self._no_teto: set[str] = set()
        self._sobrou = False

    def tomar(self, spool: Spool, dataset: str, maximo: int) -> list[ItemDoSpool]:
        tomadas = spool.tomar(dataset, maximo)
        if len(tomadas) >= maximo:
            self._no_teto.add(dataset)
        else:
            self._no_teto.discard(dataset)
        return tomadas

    def entregue(self, dataset: str) -> None:
        self._sobrou = self._sobrou or dataset in self._no_teto

    def acordar(self) -> bool:
        """True uma vez depois de um lote no teto entregue: o próximo ciclo vem já."""
        sobrou, self._sobrou = self._sobrou, False
        return sobrou


class CapturaPeloSpool:
    """
    O que `binlog` e `slot_logico` têm igual: a posição num arquivo do estado, o
    spool (aberto na primeira vez), a leitura que toma dele, o `confirmar` que
    conclui o entregue, a carga completa sem nada a guardar (a posição do log é
    fixada antes de qualquer carga) e a marca CRÍTICA por dataset que a
    varredura tira. Cada subclasse diz o arquivo, o risco do spool cheio, a
    recusa da posição ilegível e como lê o log (`_bombear_para`).
    """

    nome = ''
    ARQUIVO_POSICAO = ''
    RISCO_DO_SPOOL = ''
    # A chave da marca CRÍTICA no arquivo da posição (PosicaoDoLog.critica).
    MARCA_CRITICA = ''

    def __init__(self, origem: AdaptadorDeOrigem, estado: Estado, maximo: int) -> None:
        self.origem = origem
        self.estado = estado
        self.maximo = maximo
        self.pasta = os.path.dirname(os.path.abspath(estado.caminho))
        self._spool: Spool | None = None
        self._tabelas: dict[tuple[str, str], list[DatasetVivo]] = {}
        self._bombeado = 0.0
        self._teto = TetoDoSpool()
        self._indices: dict[str, IndiceDeEntregas] = {}
        self.atraso_s: float | None = None
        self.pausada: str | None = None
        self._posicao = ler_posicao(
            self._caminho_posicao(), self._recusa_da_posicao, self.MARCA_CRITICA
        )

    def _caminho_posicao(self) -> str:
        return os.path.join(self.pasta, self.ARQUIVO_POSICAO)

    def _recusa_da_posicao(self, motivo: str) -> Exception:
        raise NotImplementedError

    def _gravar_posicao(self) -> None:
        gravar_posicao(self._caminho_posicao(), self._posicao, self.MARCA_CRITICA)

    def _truncadas(self, nomes: list[str]) -> None:
        """O TRUNCATE de tabela seguida: o log não diz que linhas saíram -- a varredura diz."""
        logger.error(
            '%s: TRUNCATE na origem em %s: o log não diz que linhas saíram.'
            ' Entregue(s) à varredura, que refaz o conjunto.',
            self.nome,
            ', '.join(nomes),
        )
        for nome in nomes:
            self.estado.entregar_a_varredura(
                nome, 'TRUNCATE na origem em %s' % datetime.datetime.now().isoformat(' ', 'seconds')
            )
        self.estado.gravar()

    @property
    def spool(self) -> Spool:
        if self._spool is None:
            self._spool = abrir_spool(os.path.join(self.pasta, PASTA_SPOOL), self.RISCO_DO_SPOOL)
        return self._spool

    # -- Captura -------------------------------------------------------------------
    def _bombear_para(self, alvo: DatasetVivo) -> None:
        """Traz do log para o spool o que há (e passa a seguir `alvo`, se é novo)."""
        raise NotImplementedError

    def ler(self, alvo: DatasetVivo) -> Leitura:
        self._bombear_para(alvo)
        indice = self.indice(alvo)
        return leitura_do_spool(
            self.origem, alvo, self._teto.tomar(self.spool, alvo.nome, self.maximo), indice
        )

    def indice(self, alvo: DatasetVivo) -> IndiceDeEntregas | None:
        """
        O índice key -> empresa do dataset (None na tabela de domínio: sai de
        todas). O que ainda não nasceu nasce aqui, da origem (`semear_indice`).
        """
        if not alvo.escopo or alvo.chave is None:
            return None
        indice = self._indices.get(alvo.nome)
        if indice is None:
            indice = self._indices[alvo.nome] = IndiceDeEntregas(self.pasta, alvo.nome)
        if not indice.semeado:
            semear_indice(self.origem, alvo, indice, None)
        return indice

    def antes_de_enviar(
        self,
        alvo: DatasetVivo,  # noqa: ARG002 - o protocolo
        leitura: Leitura,
    ) -> None:
        """Nada: a mudança só sai do spool quando o intake a confirmou."""

    def confirmar(self, alvo: DatasetVivo, leitura: Leitura) -> None:
        """
        Anota no índice o entregue e conclui no spool as mudanças entregues.

        A remoção que falhou volta ao ciclo sem elas (dados.py tira as remoções da
        `leitura`): a mudança dessa linha volta a pronto/ já, e a remoção é
        mandada de novo na leitura seguinte -- nada perdido em silêncio.
        """
        concluir_entregues(self.spool, leitura, self.indice(alvo))
        self.spool.devolver(alvo.nome)
        self._teto.entregue(alvo.nome)

    def desistir(self, alvo: DatasetVivo) -> None:
        """A entrega falhou: as mudanças tomadas voltam a pronto/ já (destino conhecido)."""
        self.spool.devolver(alvo.nome)

    def antes_da_carga(self, alvo: DatasetVivo, escopo: str | None) -> AntesDaCarga:
        """
        A posição é fixada antes de qualquer carga e o log guarda tudo dali em
        diante: da posição, nada a guardar. O índice de entregas, sim: a key,
        a empresa e as colunas `via` lidas da origem AGORA, num arquivo ao lado
        -- o que a carga entregar é isto, mais o que mudou durante ela, que está
        no spool e vem por cima. E se o log está de pé: só então a carga tira o
        dataset da marca CRÍTICA.
        """
        semente = None
        if alvo.escopo and alvo.chave is not None:
            semente = IndiceDeEntregas(self.pasta, '%s.semente' % alvo.nome)
            semear_indice(self.origem, alvo, semente, escopo)
            semente.fechar()
        return AntesDaCarga(semente.caminho if semente else None, self._log_de_pe())

    def _log_de_pe(self) -> bool:
        """O log está guardando as mudanças agora (a carga pode tirar a marca CRÍTICA)."""
        return True

    def depois_da_carga(
        self, alvo: DatasetVivo, antes: object, fechados: Collection[str | None]
    ) -> None:
        """
        As empresas que a carga fechou passam a ter, no índice, o que foi lido
        antes dela; fechado em todas (None), o dataset sai da marca CRÍTICA --
        também quando ele voltou ao ao-vivo antes da varredura (a marca é do
        log perdido, e só a carga completa a repara).
        """
        if not isinstance(antes, AntesDaCarga):
            return
        if antes.semente and fechados:
            indice = self.indice(alvo)
            if indice is not None:
                # Sem None entre os fechados: só empresas (str).
                escopos = None if None in fechados else set(cast('Collection[str]', fechados))
                indice.trocar_pela_semente(antes.semente, escopos)
        if antes.semente:
            _apagar_semente(antes.semente)
        if None in fechados and antes.log_de_pe:
            self._sair_do_critico(alvo)

    def _sair_do_critico(self, alvo: DatasetVivo) -> None:
        """A varredura fechou `alvo`: ele sai da marca CRÍTICA (que some sem datasets)."""
        marca = self._posicao.critica
        if not marca or alvo.nome not in marca.datasets:
            return
        marca.datasets = [n for n in marca.datasets if n != alvo.nome]
        if not marca.datasets:
            self._posicao.critica = None
        self._gravar_posicao()

    def _status_do_spool(self) -> ObjetoJson:
        """
        Os campos do spool e da pausa no bloco `captura` do status. O atraso é o
        da mudança mais velha ainda não confirmada: o leitor em dia com o log e
        um item preso no spool não é "atraso 0" (a saúde e a métrica leem este).
        """
        spool = self.spool
        idade = spool.idade_do_mais_velho()
        atrasos = [a for a in (self.atraso_s, idade) if a is not None]
        return {
            'atraso_origem_s': round(max(atrasos), 1) if atrasos else None,
            'atraso_leitura_s': self.atraso_s,
            'spool_itens': spool.profundidade(),
            'spool_bytes': spool.bytes_ocupados(),
            'spool_idade_s': idade,
            # Os nomes dos arquivos (str): uma lista nova a cada leitura, só para o JSON.
            'spool_devolvidos': cast('list[Json]', spool.devolvidos),
            'pausada': self.pausada,
        }


_AMOSTRA_DA_TABELA_BASE = 50


def linhas_que_nao_sao_do_dataset(
    origem: AdaptadorDeOrigem, alvo: DatasetVivo, nome_da_view: str
) -> list[str]:
    """
    A tabela listada pela key (o nome só) que não é a das linhas do dataset --
    a nota listada como se fosse o item: o id dela iria ao spool como key de
    item, e a mudança da nota relia o item de mesmo número. O catálogo não diz
    de que tabela vem a key da view; os dados dizem: uma amostra das linhas da
    tabela, relida na view pela key, tem de trazer os mesmos valores nas
    colunas de mesmo nome. Sem coluna em comum além da key, não há o que
    comparar (não recusa). Somente leitura: duas consultas pequenas na subida.
    """
    problemas: list[str] = []
    chave = alvo.chave or ''
    for base in alvo.tabelas_base:
        if not base.pela_chave or base.nome == nome_da_view:
            continue
        try:
            achado = _comparar_amostra(origem, alvo, base.nome, base.coluna, chave)
        except Exception as erro:  # noqa: BLE001 - a origem fora: confere na próxima subida
            logger.warning(
                '%-28s a amostra de %s não foi lida (%s: %s): a conferência das linhas'
                ' pela key fica para a próxima subida',
                alvo.nome,
                base.nome,
                type(erro).__name__,
                erro,
            )
            continue
        if achado is not None:
            problemas.append(achado)
    return problemas


def _comparar_amostra(
    origem: AdaptadorDeOrigem, alvo: DatasetVivo, tabela: str, coluna: str, chave: str
) -> str | None:
    """A recusa, se a amostra de `tabela` não bate com a view pela key; None se bate."""
    da_tabela = set(origem.colunas(tabela))
    comuns = [c for c in alvo.colunas if c != chave and c in da_tabela]
    if not comuns:
        return None
    amostra: dict[str, Linha] = {}
    for linha in origem.fetch(tabela, [coluna, *comuns]):
        if linha.get(coluna) is not None:
            amostra[texto_da_chave(linha[coluna])] = linha
        if len(amostra) >= _AMOSTRA_DA_TABELA_BASE:
            break
    valores = [linha[coluna] for linha in amostra.values()]
    na_view = {
        texto_da_chave(v.get(chave)): v
        for v in origem.fetch(alvo.source_object, [chave, *comuns], chaves=(chave, valores))
    }
    # Só as achadas contam: a linha que o filtro da view tira não diz nada.
    achadas = [t for t in amostra if t in na_view]
    diferentes = sum(
        1 for t in achadas if any(str(na_view[t].get(c)) != str(amostra[t].get(c)) for c in comuns)
    )
    if not amostra or (achadas and diferentes * 2 <= len(achadas)):
        return None
    return (
        'dataset %s: %s está em `base_tables` pela key %s, mas as linhas dela não são as'
        ' do dataset (de %d linha(s) da amostra, %d estão na view pela mesma key, e %d'
        ' delas com outros valores em %s): a key da view vem de outra tabela. Se %s é o'
        ' cabeçalho das'
        ' linhas, declare-o pela coluna que o liga: {"table": "%s", "column": "<a key'
        ' dele>", "dataset_column": "<a coluna da view com ela>"}.'
        % (
            alvo.nome,
            tabela,
            chave,
            len(amostra),
            len(achadas),
            diferentes,
            ', '.join(comuns),
            tabela,
            tabela,
        )
    )


@dataclass(frozen=True)
class AntesDaCarga:
    """O que a captura por log guarda antes da carga: a semente do índice; o log estava de pé?"""

    semente: str | None
    log_de_pe: bool


def _apagar_semente(caminho: str) -> None:
    for sufixo in ('', '-wal', '-shm'):
        try:
            os.unlink(caminho + sufixo)
        except FileNotFoundError:
            pass


@dataclass
class MarcaCritica:
    """
    O log se perdeu (a posição do binlog apagada, o slot perdido): desde onde,
    quando, e os datasets entregues à varredura, que os solta um a um. O campo
    ausente (o `motivo` e o `aguardando_slot`, só do slot) fica fora do arquivo.
    """

    datasets: list[str] = field(default_factory=list)
    desde: str | None = None  # o GTID (binlog) ou o LSN (slot) de onde o log se perdeu
    em: str | None = None
    motivo: str | None = None
    aguardando_slot: bool | None = None

    @classmethod
    def do_json(cls, dados: object) -> MarcaCritica | None:
        if not isinstance(dados, Mapping):
            return None
        return cls(
            datasets=[str(n) for n in dados.get('datasets') or []],
            desde=dados.get('desde'),
            em=dados.get('em'),
            motivo=dados.get('motivo'),
            aguardando_slot=dados.get('aguardando_slot'),
        )

    def para_json(self) -> ObjetoJson:
        campos = dataclasses.asdict(self)
        return {k: v for k, v in campos.items() if v is not None or k in ('desde', 'em')}


@dataclass
class PosicaoDoLog:
    """
    O arquivo `<estado>/<estratégia>-posicao.json`, tipado: a posição no log
    (`gtid` no binlog; `lsn` e o nome do `slot` no slot lógico), a marca CRÍTICA
    (gravada sob a chave da estratégia: `expirada`, `perdido`) e a hora da gravação.
    """

    gtid: str | None = None
    lsn: str | None = None
    slot: str | None = None
    critica: MarcaCritica | None = None
    gravada_em: str | None = None

    @classmethod
    def do_json(cls, dados: Mapping[str, JsonDecodificado], chave_critica: str) -> PosicaoDoLog:
        return cls(
            gtid=dados.get('gtid'),
            lsn=dados.get('lsn'),
            slot=dados.get('slot'),
            critica=MarcaCritica.do_json(dados.get(chave_critica)),
            gravada_em=dados.get('gravada_em'),
        )

    def para_json(self, chave_critica: str) -> ObjetoJson:
        dados: ObjetoJson = {
            nome: valor
            for nome, valor in (('gtid', self.gtid), ('lsn', self.lsn), ('slot', self.slot))
            if valor is not None
        }
        if self.critica is not None:
            dados[chave_critica] = self.critica.para_json()
        dados['gravada_em'] = self.gravada_em
        return dados


def ler_posicao(
    caminho: str, recusa: Callable[[str], Exception], chave_critica: str
) -> PosicaoDoLog:
    """
    O arquivo da posição da captura (vazia se não existe). Ilegível: `recusa(motivo)`
    é levantada -- posição não se adivinha, e cada captura diz o que fazer.
    """
    try:
        with open(caminho, encoding='utf-8') as arquivo:
            lido = json.load(arquivo)
    except FileNotFoundError:
        return PosicaoDoLog()
    except (OSError, ValueError) as erro:
        raise recusa(str(erro)) from None
    return PosicaoDoLog.do_json(lido if isinstance(lido, dict) else {}, chave_critica)


def gravar_posicao(caminho: str, posicao: PosicaoDoLog, chave_critica: str) -> None:
    """A posição gravada atômica (temporário + fsync + rename), com a hora."""
    posicao.gravada_em = datetime.datetime.now().isoformat(timespec='seconds')
    texto = json.dumps(posicao.para_json(chave_critica), ensure_ascii=False, indent=1)
    gravar_atomico(caminho, texto + '\n')
