"""
O lado da entrega das capturas por log (`binlog`, `slot_logico`): do spool ao ciclo.

As duas leem o log de jeitos diferentes, mas entregam igual: as mudanças
tomadas do spool são relidas pela view, por chave (o conteúdo que vai é o de
agora, não a imagem do log), e a linha que sumiu da view -- apagada, ou que
mudou de empresa -- vira `remove` nas empresas das imagens dela. O `confirmar`
só conclui no spool a mudança cujas remoções foram entregues: a que falhou
fica tomada, volta a pronto/ na próxima leitura, e a remoção vai de novo.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from contextia_sync.origem import AdaptadorDeOrigem
from contextia_sync import padroes
from contextia_sync.arquivos import gravar_atomico
from contextia_sync.captura import DatasetVivo, Leitura, Situacao
from contextia_sync.escopos import texto_escopo
from contextia_sync.estado.estado import Estado
from contextia_sync.fila.spool import ItemDoSpool, Spool
from contextia_sync.registro import logger


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
        return leitura_do_spool(
            self.origem, alvo, self._teto.tomar(self.spool, alvo.nome, self.maximo), alvo.escopo
        )

    def antes_de_enviar(
        self,
        alvo: DatasetVivo,  # noqa: ARG002 - o protocolo
        leitura: Leitura,
    ) -> None:
        """Nada: a mudança só sai do spool quando o intake a confirmou."""

    def confirmar(self, alvo: DatasetVivo, leitura: Leitura) -> None:
        """
        Conclui no spool as mudanças entregues.

        A remoção que falhou volta ao ciclo sem elas (dados.py tira as remoções da
        `leitura`): a mudança dessa linha fica tomada, volta a pronto/ na próxima
        leitura e a remoção é mandada de novo -- nada perdido em silêncio.
        """
        concluir_entregues(self.spool, leitura)
        self._teto.entregue(alvo.nome)

    def antes_da_carga(self, alvo: DatasetVivo, escopo: str | None) -> Any:  # noqa: ARG002
        # A posição é fixada antes de qualquer carga e o log guarda tudo dali em
        # diante: nada a guardar. Sem isto a carga inicial da empresa nova e a
        # varredura morriam na `binlog` (achado da tortura).
        return None

    def depois_da_carga(self, alvo: DatasetVivo, antes: Any, fechados: Any) -> None:  # noqa: ARG002
        return None

    def _sair_do_critico(self, alvo: DatasetVivo) -> None:
        """A varredura fechou `alvo`: ele sai da marca CRÍTICA (que some sem datasets)."""
        marca = self._posicao.critica
        if not marca or alvo.nome not in marca.datasets:
            return
        marca.datasets = [n for n in marca.datasets if n != alvo.nome]
        if not marca.datasets:
            self._posicao.critica = None
        self._gravar_posicao()

    def _status_do_spool(self) -> dict[str, Any]:
        """Os campos do spool e da pausa no bloco `captura` do status."""
        spool = self.spool
        return {
            'atraso_origem_s': self.atraso_s,
            'spool_itens': spool.profundidade(),
            'spool_bytes': spool.bytes_ocupados(),
            'spool_idade_s': spool.idade_do_mais_velho(),
            'spool_devolvidos': spool.devolvidos,
            'pausada': self.pausada,
        }


@dataclass
class MarcaCritica:
    """
    O log se perdeu (a posição do binlog apagada, o slot perdido): desde onde,
    quando, e os datasets entregues à varredura, que os solta um a um. O campo
    ausente (o `motivo` e o `aguardando_slot`, só do slot) fica fora do arquivo.
    """

    datasets: list[str] = field(default_factory=list)
    desde: Any = None
    em: str | None = None
    motivo: str | None = None
    aguardando_slot: bool | None = None

    @classmethod
    def do_json(cls, dados: Any) -> MarcaCritica | None:
        if not isinstance(dados, Mapping):
            return None
        return cls(
            datasets=[str(n) for n in dados.get('datasets') or []],
            desde=dados.get('desde'),
            em=dados.get('em'),
            motivo=dados.get('motivo'),
            aguardando_slot=dados.get('aguardando_slot'),
        )

    def para_json(self) -> dict[str, Any]:
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
    def do_json(cls, dados: Mapping[str, Any], chave_critica: str) -> PosicaoDoLog:
        return cls(
            gtid=dados.get('gtid'),
            lsn=dados.get('lsn'),
            slot=dados.get('slot'),
            critica=MarcaCritica.do_json(dados.get(chave_critica)),
            gravada_em=dados.get('gravada_em'),
        )

    def para_json(self, chave_critica: str) -> dict[str, Any]:
        dados: dict[str, Any] = {
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


def leitura_do_spool(
    origem: AdaptadorDeOrigem, alvo: DatasetVivo, itens: list[ItemDoSpool], recorte: str | None
) -> Leitura:
    """A `Leitura` das mudanças tomadas: as linhas relidas e as remoções por empresa."""
    if not itens:
        return Leitura(Situacao.NADA)
    chave = alvo.chave or ''
    achadas: dict[str, dict[str, Any]] = {}
    valores = [item.chave for item in itens]
    passo = padroes.CHAVES_POR_LEITURA
    for inicio in range(0, len(valores), passo):
        for lida in origem.fetch(
            alvo.source_object, alvo.colunas, chaves=(chave, valores[inicio : inicio + passo])
        ):
            achadas[str(lida.get(chave))] = lida
    remocoes: dict[str, list[Any]] = {}
    remover_de_todas: list[Any] = []
    # Cada mudança com as empresas de que a linha sai (None: de todas): o
    # `confirmar` só a conclui se essas remoções foram entregues.
    tomada: list[tuple[ItemDoSpool, list[str | None]]] = []
    for item in itens:
        linha = achadas.get(str(item.chave))
        atual = texto_escopo(linha.get(recorte)) if linha is not None and recorte else None
        sai_de: list[str | None] = []
        for escopo in item.escopos:
            if linha is not None and (escopo == atual or not recorte):
                continue
            if escopo is None:
                if not recorte:
                    remover_de_todas.append(item.chave)
                    sai_de.append(None)
            else:
                remocoes.setdefault(escopo, []).append(item.chave)
                sai_de.append(escopo)
        tomada.append((item, sai_de))
    leitura = Leitura(
        Situacao.MUDANCAS, upserts=list(achadas.values()), quantos=len(itens), privado=tomada
    )
    leitura.remocoes_por_escopo = remocoes
    leitura.remocoes = sorted(set(remover_de_todas), key=str) if not recorte else []
    return leitura


def concluir_entregues(spool: Spool, leitura: Leitura) -> None:
    """Conclui no spool as mudanças cujas remoções o ciclo entregou (todas as delas)."""
    if not leitura.privado:
        return
    entregues: set[tuple[str | None, str]] = {
        (e, str(v)) for e, valores in leitura.remocoes_por_escopo.items() for v in valores
    }
    entregues.update((None, str(v)) for v in leitura.remocoes)
    spool.concluir(
        item
        for item, removidas in leitura.privado
        if all((e, str(item.chave)) in entregues for e in removidas)
    )
