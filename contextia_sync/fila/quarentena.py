"""
A quarentena: os registros que o intake recusou DE VEZ, para que um registro
envenenado não segure a marca de água de uma empresa para sempre.

E a parte `parado/` de uma `FilaEmDiretorio` (diretorio.py): no ouvinte,
`<estado>/quarentena/parado/`, um arquivo JSON por registro, legível por
gente:

    <sequência>-<dataset>-<escopo>-<valor da key>-<identidade>.json

Dataset, escopo e valor da key no nome são só para quem lista a pasta
(truncados e com o que não é [A-Za-z0-9._-] trocado por '_'); os valores
verdadeiros moram dentro do arquivo. A identidade (16 hex) e o sha256 de
(dataset, escopo, coluna da key, valor da key) -- ou do registro inteiro, sem
key ou com a key nula --, e e ela que faz guardar de novo o mesmo registro
trocar o arquivo em vez de criar outro.

Conteúdo: dataset, escopo, chave_coluna, chave_valor, registro (os valores já
em forma JSON, como seriam enviados; o valor que nem JSON tem vai como texto e
a coluna aparece em `invalidos`), motivo (o que o servidor disse, mascarado,
ou a falha de serialização), status_http, desde, ultima_vez, vezes (quantas
vezes o registro foi recusado e guardado), tentativas (quantos envios o
intake recusou, reenvios incluidos), ultimo_reenvio e ultimo_desfecho.

Como um item sai daqui:
  * `superar`: uma versão do mesmo registro (mesma identidade) foi entregue --
    o ERP corrigiu a linha e o ao-vivo a levou; o item guardado e velho.
    `enviar_dataset` faz isso sozinho a cada lote entregue.
  * `reenviar(enviar)`: cada item passa pelo `enviar` que quem chama da (o
    ouvinte da um que usa a chave da empresa do item, ex.
    `cliente.reenviar_item`); entregue sai, recusado de novo fica com
    tentativas+1 e o motivo novo, sem chave para o escopo fica e diz isso.
  * `descartar(dataset, escopos)`: depois de uma carga completa aceita
    (`complete`), todo registro vivo daquela empresa chegou; o que estava aqui
    ficou velho.

Cheia (limites em padroes.py), `guardar` levanta ErroQuarentenaCheia: quem
chama faz o lote falhar (a marca não avança), com a mensagem que diz como
esvaziar. Item tomado por um reenvio que morreu no meio volta a parado/ na
próxima abertura, nomeado no log (ver diretorio.py).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from contextia_sync import padroes
from contextia_sync.escopos import texto_escopo
from contextia_sync.fila.diretorio import (
    PARADO,
    TOMADO,
    ErroFilaCheia,
    FilaEmDiretorio,
    ItemDaFila,
    parte_segura,
)
from contextia_sync.tipos import Json, JsonDecodificado, ObjetoJson

FORMATO = 1
"""Versão do conteúdo do arquivo; outra versão e tratada como ilegível, nunca adivinhada."""

_TAMANHO_IDENTIDADE = 16

ENTREGUE = 'entregue'
RECUSADO = 'recusado'
PENDENTE = 'pendente'
FALHOU = 'falhou'


class ErroQuarentenaCheia(ErroFilaCheia):
    """A quarentena está no limite: o registro recusado não foi guardado."""


# ---------------------------------------------------------------- identidade
def _canonico(valor: object) -> str:
    return json.dumps(
        valor,
        sort_keys=True,
        separators=(',', ':'),
        ensure_ascii=False,
        allow_nan=False,
        default=repr,
    )


def _escopo(escopo: object) -> str | None:
    return None if escopo is None else texto_escopo(escopo)


def identidade(
    dataset: str, escopo: object, chave_coluna: str | None, registro: Mapping[str, Json]
) -> str:
    """
    A identidade de um registro na quarentena (16 hex).

    Com key (e valor não nulo): dataset, escopo, coluna e valor -- a linha
    corrigida no ERP tem a mesma identidade e substitui (ou supera) a guardada.
    Sem key, ou com a key nula: o registro inteiro, como o servidor deduplica.
    """
    valor = registro.get(chave_coluna) if chave_coluna else None
    if chave_coluna and valor is not None:
        base: list[Json] = ['k', chave_coluna, valor]
    else:
        base = ['h', dict(registro)]
    texto = _canonico([dataset, _escopo(escopo), base])
    return hashlib.sha256(texto.encode('utf-8')).hexdigest()[:_TAMANHO_IDENTIDADE]


def _chave_do_arquivo(
    dataset: str, escopo: str | None, chave_coluna: str | None, valor: object, ident: str
) -> str:
    if not chave_coluna:
        rotulo = 'sem-key'
    elif valor is None:
        rotulo = 'key-nula'
    else:
        rotulo = parte_segura(valor, 30)
    return '%s-%s-%s-%s' % (
        parte_segura(dataset, 40),
        parte_segura(escopo if escopo is not None else 'projeto', 20),
        rotulo,
        ident,
    )


def _agora() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')


def descrever(dataset: str, escopo: object, chave_coluna: str | None, valor: object) -> str:
    """'dataset titulos, escopo 40, ID=17': como o operador acha o registro na origem."""
    quem = 'escopo %s' % _escopo(escopo) if escopo is not None else 'projeto da chave'
    if not chave_coluna:
        registro = 'registro sem key'
    elif valor is None:
        registro = 'registro com %s nulo' % chave_coluna
    else:
        registro = '%s=%s' % (chave_coluna, _canonico(valor))
    return 'dataset %s, %s, %s' % (dataset, quem, registro)


# ---------------------------------------------------------------- itens
@dataclass(frozen=True)
class ItemQuarentena:
    """Um registro guardado na quarentena (o conteúdo do arquivo, tipado)."""

    caminho: Path
    sequencia: int
    identidade: str
    dataset: str
    escopo: str | None
    chave_coluna: str | None
    chave_valor: Json
    registro: ObjetoJson
    motivo: str
    status_http: int | None
    invalidos: dict[str, str]
    desde: str
    ultima_vez: str
    vezes: int
    tentativas: int
    ultimo_reenvio: str | None = None
    ultimo_desfecho: str | None = None
    # Uma REMOÇÃO que não pôde sair (a empresa sem chave no arquivo de chaves):
    # o `registro` é só a key; o reenvio a remove em vez de mandá-la.
    remocao: bool = False

    @property
    def reenviavel(self) -> bool:
        """False se algum valor nem JSON tem: o registro guardado não é o da origem."""
        return not self.invalidos

    def descricao(self) -> str:
        """'dataset titulos, escopo 40, ID=17'."""
        return descrever(self.dataset, self.escopo, self.chave_coluna, self.chave_valor)


def _item(meta: ItemDaFila) -> tuple[ItemQuarentena, dict[str, JsonDecodificado]] | None:
    conteudo = meta.ler()
    if conteudo is None or conteudo.get('formato') != FORMATO:
        return None
    try:
        registro = conteudo['registro']
        invalidos = conteudo.get('invalidos') or {}
        if not isinstance(registro, dict) or not isinstance(invalidos, dict):
            return None
        item = ItemQuarentena(
            caminho=meta.caminho,
            sequencia=meta.sequencia,
            identidade=meta.chave[-_TAMANHO_IDENTIDADE:],
            dataset=str(conteudo['dataset']),
            escopo=conteudo.get('escopo'),
            chave_coluna=conteudo.get('chave_coluna'),
            chave_valor=conteudo.get('chave_valor'),
            registro=registro,
            motivo=str(conteudo.get('motivo') or ''),
            status_http=conteudo.get('status_http'),
            invalidos={str(k): str(v) for k, v in invalidos.items()},
            desde=str(conteudo.get('desde') or ''),
            ultima_vez=str(conteudo.get('ultima_vez') or ''),
            vezes=int(conteudo.get('vezes') or 1),
            tentativas=int(conteudo.get('tentativas') or 1),
            ultimo_reenvio=conteudo.get('ultimo_reenvio'),
            ultimo_desfecho=conteudo.get('ultimo_desfecho'),
            remocao=bool(conteudo.get('remocao')),
        )
    except (KeyError, TypeError, ValueError):
        return None
    return item, conteudo


# ---------------------------------------------------------------- reenvio
@dataclass(frozen=True)
class Desfecho:
    """O que o `enviar` dado a `reenviar` fez com um item."""

    tipo: str
    motivo: str = ''
    interromper: bool = False

    @classmethod
    def entregue(cls) -> Desfecho:
        """O intake aceitou: o item sai da quarentena."""
        return cls(ENTREGUE)

    @classmethod
    def recusado(cls, motivo: str) -> Desfecho:
        """Recusado de vez de novo: fica, com tentativas+1 e este motivo."""
        return cls(RECUSADO, motivo)

    @classmethod
    def pendente(cls, motivo: str) -> Desfecho:
        """Não foi tentado (ex.: o escopo não tem chave): fica como estava, e diz por que."""
        return cls(PENDENTE, motivo)

    @classmethod
    def falhou(cls, motivo: str, interromper: bool = False) -> Desfecho:
        """Falha que não é do registro (5xx, servidor fora): fica; `interromper` para o passe."""
        return cls(FALHOU, motivo, interromper)


@dataclass
class ResultadoReenvio:
    """O que um `reenviar` fez: contagens, o que sobrou e uma mensagem por item que ficou."""

    entregues: int = 0
    recusados: int = 0
    pendentes: int = 0
    falhas: int = 0
    restantes: int = 0
    interrompido: bool = False
    mensagens: list[str] = field(default_factory=list)


class DestinoDeRecusas(Protocol):
    """O que `enviar_dataset` precisa de uma quarentena (a Quarentena, ou um coletor)."""

    def guardar(
        self,
        dataset: str,
        escopo: object,
        chave_coluna: str | None,
        registro: Mapping[str, Json],
        motivo: str,
        *,
        invalidos: Mapping[str, str] | None = None,
        status_http: int | None = None,
    ) -> Path | None: ...

    def identidades(self) -> set[str]: ...

    def guardado(self, ident: str) -> ItemQuarentena | None: ...

    def superar(self, ident: str, dataset: str, escopo: object) -> bool: ...


# ---------------------------------------------------------------- a quarentena
class Quarentena:
    """
    A quarentena em `pasta` (no ouvinte, `<estado>/quarentena`). Ver o topo do módulo.

    Abrir devolve a parado/ o item que um reenvio morto deixou em tomado/,
    nomeado no log. `somente_leitura=True` não cria nem move nada (para contar
    a partir de outro processo).
    """

    def __init__(
        self,
        pasta: str | os.PathLike[str],
        *,
        maximo_itens: int = padroes.QUARENTENA_MAXIMO_ITENS,
        maximo_bytes: int = padroes.QUARENTENA_MAXIMO_BYTES,
        logger: logging.Logger | None = None,
        somente_leitura: bool = False,
    ) -> None:
        if logger is None:
            from contextia_sync.registro import logger as do_sdk

            logger = do_sdk
        self._log = logger
        self._fila = FilaEmDiretorio(
            pasta,
            maximo_itens=maximo_itens,
            maximo_bytes=maximo_bytes,
            devolver_tomados_para=PARADO,
            rotulo='quarentena',
            logger=logger,
            somente_leitura=somente_leitura,
        )
        # Resumo (dataset, escopo) de cada arquivo ja lido: contar por dataset a
        # cada status nao pode reler um registro de 30 MiB a cada vez.
        self._resumos: dict[tuple[str, int, int], tuple[str, str | None] | None] = {}

    @property
    def pasta(self) -> Path:
        """A pasta da quarentena (os itens estão em `parado/`)."""
        return self._fila.raiz

    def _guardados(self) -> list[ItemDaFila]:
        return self._fila.itens(PARADO) + self._fila.itens(TOMADO)

    # ------------------------------------------------------------ guardar
    def guardar(
        self,
        dataset: str,
        escopo: object,
        chave_coluna: str | None,
        registro: Mapping[str, Json],
        motivo: str,
        *,
        invalidos: Mapping[str, str] | None = None,
        status_http: int | None = None,
        remocao: bool = False,
    ) -> Path:
        """
        Guarda um registro recusado de vez (ou, com `remocao`, a remoção de uma
        key que não pôde sair: `registro` só com ela); devolve o arquivo.

        `registro` já em forma JSON (o que seria enviado). O mesmo registro
        (mesma identidade) troca o arquivo que já existe: `vezes` + 1, o motivo e
        o registro novos, `desde` mantido. ErroQuarentenaCheia se não cabe.
        """
        escopo_txt = _escopo(escopo)
        ident = identidade(dataset, escopo, chave_coluna, registro)
        valor = registro.get(chave_coluna) if chave_coluna else None
        chave = _chave_do_arquivo(dataset, escopo_txt, chave_coluna, valor, ident)
        anterior = self._ler_identidade(ident)
        agora = _agora()
        conteudo: ObjetoJson = {
            'formato': FORMATO,
            'dataset': dataset,
            'escopo': escopo_txt,
            'chave_coluna': chave_coluna,
            'chave_valor': valor,
            'identidade': ident,
            'registro': dict(registro),
            'invalidos': dict(invalidos or {}),
            'reenviavel': not invalidos,
            'motivo': motivo,
            'status_http': status_http,
            'desde': anterior.desde if anterior else agora,
            'ultima_vez': agora,
            'vezes': anterior.vezes + 1 if anterior else 1,
            'tentativas': anterior.tentativas if anterior else 1,
            'ultimo_reenvio': anterior.ultimo_reenvio if anterior else None,
            'ultimo_desfecho': anterior.ultimo_desfecho if anterior else None,
        }
        if remocao:
            conteudo['remocao'] = True
        try:
            caminho, _novo = self._fila.por(chave, conteudo, estado=PARADO)
        except ErroFilaCheia as cheia:
            raise ErroQuarentenaCheia(
                'quarentena cheia em %s: %d registro(s), %.1f MiB (limite %d registros,'
                ' %.1f MiB). O registro %s foi recusado de vez pelo intake (%s) e NÃO pode'
                ' ser guardado: o lote conta como falho e a marca não avança (nada se'
                ' perde; o próximo ciclo tenta de novo). Para esvaziar: leia os motivos'
                ' (um arquivo por registro em %s), corrija os registros na origem -- cada'
                ' um sai sozinho quando a versão corrigida e entregue --, rode'
                ' `ouvinte.py --reenviar-quarentena` para os que o intake passou a aceitar;'
                ' apagar um arquivo a mão deixa o registro fora do Contextia até a próxima'
                ' varredura.'
                % (
                    self.pasta,
                    cheia.itens,
                    cheia.ocupados / 1048576,
                    cheia.maximo_itens,
                    cheia.maximo_bytes / 1048576,
                    descrever(dataset, escopo, chave_coluna, valor),
                    motivo[:200],
                    self.pasta / PARADO,
                ),
                itens=cheia.itens,
                ocupados=cheia.ocupados,
                maximo_itens=cheia.maximo_itens,
                maximo_bytes=cheia.maximo_bytes,
            ) from None
        return caminho

    # ------------------------------------------------------------ consultar
    def contar(self, dataset: str | None = None) -> int:
        """Quantos registros estão na quarentena (de um dataset, ou todos)."""
        if dataset is None:
            return len(self._guardados())
        return self.por_dataset().get(dataset, 0)

    def por_dataset(self) -> dict[str, int]:
        """{dataset: quantos}; arquivo ilegível conta em '?'."""
        contagem: dict[str, int] = {}
        for meta in self._guardados():
            resumo = self._resumo(meta)
            nome = resumo[0] if resumo else '?'
            contagem[nome] = contagem.get(nome, 0) + 1
        return contagem

    def bytes_ocupados(self) -> int:
        """Bytes no disco."""
        return self._fila.bytes_ocupados()

    def itens(self) -> list[ItemQuarentena]:
        """Os registros guardados, em ordem de chegada (arquivos ilegíveis ficam de fora)."""
        lidos = []
        for meta in self._guardados():
            achado = _item(meta)
            if achado is not None:
                lidos.append(achado[0])
        return lidos

    def ilegiveis(self) -> list[Path]:
        """Arquivos da quarentena que não se leem (editados a mão, formato de outra versão)."""
        return [meta.caminho for meta in self._guardados() if _item(meta) is None]

    def identidades(self) -> set[str]:
        """As identidades guardadas (só nomes de arquivo: barato, sem ler conteúdo)."""
        return {meta.chave[-_TAMANHO_IDENTIDADE:] for meta in self._guardados()}

    def guardado(self, ident: str) -> ItemQuarentena | None:
        """O item com esta identidade, ou None."""
        return self._ler_identidade(ident)

    def _ler_identidade(self, ident: str) -> ItemQuarentena | None:
        for meta in self._guardados():
            if meta.chave.endswith(ident):
                achado = _item(meta)
                if achado is not None and achado[0].identidade == ident:
                    return achado[0]
        return None

    def _resumo(self, meta: ItemDaFila) -> tuple[str, str | None] | None:
        try:
            estado = meta.caminho.stat()
        except FileNotFoundError:
            return None
        marca = (meta.caminho.name, estado.st_size, estado.st_mtime_ns)
        if marca not in self._resumos:
            achado = _item(meta)
            self._resumos[marca] = (
                (achado[0].dataset, achado[0].escopo) if achado is not None else None
            )
        return self._resumos[marca]

    # ------------------------------------------------------------ tirar
    def superar(self, ident: str, dataset: str, escopo: object) -> bool:
        """Uma versão do registro `ident` foi entregue: o guardado sai. True se saiu."""
        for meta in self._guardados():
            if not meta.chave.endswith(ident):
                continue
            achado = _item(meta)
            if achado is None:
                continue
            item = achado[0]
            if (item.identidade, item.dataset, item.escopo) != (ident, dataset, _escopo(escopo)):
                continue
            self._fila.concluir(meta)
            self._log.info(
                'quarentena: %s saiu (uma versão dele foi entregue ao intake)', item.descricao()
            )
            return True
        return False

    def descartar(self, dataset: str, escopos: Iterable[object] | None = None) -> int:
        """
        Tira os itens de `dataset` (das empresas `escopos`, ou de todas). Devolve quantos.

        Para depois de uma carga completa ACEITA (`complete`): ela entregou todo
        registro vivo da empresa, então o guardado aqui ficou velho.
        """
        alvo = None if escopos is None else {_escopo(e) for e in escopos}
        tirados = 0
        for meta in self._fila.itens(PARADO):
            achado = _item(meta)
            if achado is None or achado[0].dataset != dataset:
                continue
            if alvo is not None and achado[0].escopo not in alvo:
                continue
            self._fila.concluir(meta)
            tirados += 1
        if tirados:
            self._log.info(
                'quarentena: %d registro(s) de %s saíram depois da carga completa', tirados, dataset
            )
        return tirados

    # ------------------------------------------------------------ reenviar
    def reenviar(
        self,
        enviar: Callable[[ItemQuarentena], Desfecho],
        *,
        deve_parar: Callable[[], bool] | None = None,
    ) -> ResultadoReenvio:
        """
        Tenta de novo cada item, em ordem, por `enviar(item) -> Desfecho`.

        Entregue: o arquivo e apagado. Recusado: fica, tentativas+1, motivo
        novo. Pendente: fica como estava (o motivo vai nas mensagens). Falhou:
        fica; com `interromper` o passe para ali (servidor fora: os outros
        gastariam o prazo inteiro cada). `deve_parar()` e olhado entre itens.
        Cada item e tomado (parado/ -> tomado/) antes do envio: se este
        processo morrer no meio, a próxima abertura o devolve e o nomeia.
        ErroFilaOcupada se outro processo já reenvia.
        """
        resultado = ResultadoReenvio()
        with self._fila.trabalhando():
            for meta in self._fila.itens(PARADO):
                if deve_parar is not None and deve_parar():
                    resultado.interrompido = True
                    resultado.mensagens.append(
                        'parada pedida: o reenvio parou antes de %s' % meta.caminho.name
                    )
                    break
                tomado = self._fila.tomar(meta)
                if tomado is None:
                    continue  # superado ou descartado enquanto isso
                achado = _item(tomado)
                if achado is None:
                    self._fila.devolver(tomado, PARADO)
                    resultado.pendentes += 1
                    resultado.mensagens.append(
                        '%s: arquivo ilegível (editado a mão? de outra versão?); ficou onde'
                        ' estava' % meta.caminho.name
                    )
                    continue
                item, conteudo = achado
                try:
                    desfecho = enviar(item)
                except BaseException:
                    # Destino desconhecido (pode ter chegado): volta, e o intake
                    # idempotente faz o proximo reenvio inofensivo.
                    self._fila.devolver(tomado, PARADO)
                    raise
                self._registrar(resultado, tomado, item, conteudo, desfecho)
                if desfecho.tipo == FALHOU and desfecho.interromper:
                    resultado.interrompido = True
                    break
        resultado.restantes = self.contar()
        nivel = (
            logging.INFO
            if not (resultado.recusados or resultado.falhas or resultado.pendentes)
            else logging.WARNING
        )
        self._log.log(
            nivel,
            'quarentena: reenvio -- %d entregue(s), %d recusado(s) de novo,'
            ' %d pendente(s), %d falha(s)%s; restam %d em %s',
            resultado.entregues,
            resultado.recusados,
            resultado.pendentes,
            resultado.falhas,
            ' (interrompido)' if resultado.interrompido else '',
            resultado.restantes,
            self.pasta / PARADO,
        )
        return resultado

    def _registrar(
        self,
        resultado: ResultadoReenvio,
        tomado: ItemDaFila,
        item: ItemQuarentena,
        conteudo: dict[str, JsonDecodificado],
        desfecho: Desfecho,
    ) -> None:
        if desfecho.tipo == ENTREGUE:
            self._fila.concluir(tomado)
            resultado.entregues += 1
            self._log.info(
                'quarentena: %s entregue no reenvio; saiu da quarentena', item.descricao()
            )
            return
        novo = dict(
            conteudo,
            ultimo_reenvio=_agora(),
            ultimo_desfecho='%s: %s' % (desfecho.tipo, desfecho.motivo),
        )
        if desfecho.tipo == RECUSADO:
            novo.update(tentativas=item.tentativas + 1, motivo=desfecho.motivo)
            resultado.recusados += 1
            texto = 'recusado de novo (tentativa %d): %s' % (item.tentativas + 1, desfecho.motivo)
        elif desfecho.tipo == PENDENTE:
            resultado.pendentes += 1
            texto = 'não reenviado: %s' % desfecho.motivo
        else:
            resultado.falhas += 1
            texto = 'reenvio falhou (fica na quarentena): %s' % desfecho.motivo
        self._fila.devolver(tomado, PARADO, novo)
        resultado.mensagens.append('%s: %s' % (item.descricao(), texto))
