"""
O spool da captura por log (`binlog`, `slot_logico`): as mudanças lidas do log
ficam aqui, no disco, antes de ir ao Contextia.

Por que existe: o log tem de ser consumido mesmo com o Contextia fora do ar,
senão a posição envelhece além da retenção (o MariaDB apaga o binlog) ou o
slot retém WAL no disco do cliente, e o ouvinte não sabe mais o que perdeu.
Então a leitura do log e a entrega se separam: a leitura põe aqui e só então
grava a posição; a entrega tira daqui e só apaga depois que o intake confirmou.

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

Um arquivo é um LOTE: o que uma leitura do log trouxe de um dataset e de uma
empresa (até `MUDANCAS_POR_ARQUIVO` mudanças), com um fsync só para o arquivo
e um para a pasta -- e não um arquivo com dois fsyncs por mudança (medido:
~17 mudanças/s assim, contra milhares por lote; bench/bench_binlog.py). A
chave do arquivo é o hash do conteúdo (as linhas e as posições do log): reler
do log o mesmo lote depois de um `kill -9` antes de gravar a posição dá a
mesma chave e não duplica o arquivo. A sequência no nome dá a ordem de entrega
por dataset e empresa.

A conta do spool é por LINHA (dataset + valor da key), não por evento nem por
arquivo: a mesma linha mudada dez vezes antes da entrega é uma mudança só (o
conteúdo é relido da origem na entrega: vale o estado mais novo) -- `tomar`
junta os arquivos do dataset e entrega cada linha uma vez, com as empresas das
imagens da linha (antes e depois) de todos eles: a linha que mudou de empresa
sai da antiga. `concluir` apaga o arquivo cujas linhas foram todas entregues
e regrava (troca atômica) o que ficou pela metade, com o que falta.

O índice (que linha está em que arquivo, bytes, idades) mora na memória deste
processo, lido do disco uma vez ao abrir: contar e medir não listam a pasta.

Cheio (itens ou bytes): `guardar` grava o começo que cabe, levanta
`ErroSpoolCheio` (com `guardadas`: quantas mudanças da lista entraram) e nada
é descartado -- a captura pausa (a posição não avança além do que entrou) e
diz isso alto.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import logging
import os
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple, NotRequired, TypedDict

from contextia_sync import padroes
from contextia_sync.arquivos import gravar_atomico
from contextia_sync.fila.diretorio import (
    PRONTO,
    TOMADO,
    ErroFilaCheia,
    FilaEmDiretorio,
    ItemDaFila,
    parte_segura,
)
from contextia_sync.tipos import Json, JsonDecodificado, ValorDoBanco

FORMATO = 2
"""Versão do conteúdo de cada arquivo do spool (2: um lote; o 1, uma linha, ainda se lê)."""

MUDANCAS_POR_ARQUIVO = 5000
"""Teto de mudanças num arquivo: `tomar` pega arquivos inteiros, e isto limita o passo."""

_SOBRA_DO_ARQUIVO = 256
"""Bytes do cabeçalho de um arquivo, na conta do limite antes de gravar."""


class ErroSpoolCheio(ErroFilaCheia):
    """O spool chegou ao limite: a captura pausa, nada é descartado."""

    def __init__(
        self,
        mensagem: str,
        *,
        itens: int,
        ocupados: int,
        maximo_itens: int,
        maximo_bytes: int,
        guardadas: int = 0,
    ) -> None:
        super().__init__(
            mensagem,
            itens=itens,
            ocupados=ocupados,
            maximo_itens=maximo_itens,
            maximo_bytes=maximo_bytes,
        )
        self.guardadas = guardadas
        """Quantas mudanças do começo da lista entraram antes do limite."""


@dataclass
class Mudanca:
    """Uma linha que mudou no log: o dataset, o valor da key e as empresas das imagens."""

    dataset: str
    chave: ValorDoBanco
    escopos: list[str | None] = field(default_factory=list)
    evento: str = 'update'  # insert | update | delete (o último visto)
    posicao: str = ''  # a posição do log do evento (GTID no MariaDB)
    quando: float = 0.0  # a hora do evento na origem (epoch)


@dataclass(frozen=True)
class ItemDoSpool:
    """Uma mudança tomada para entrega: o arquivo (o primeiro em que está) e o conteúdo."""

    meta: ItemDaFila
    dataset: str
    chave: Json  # a key como o arquivo do spool a guarda (o que não é JSON, como texto)
    escopos: tuple[str | None, ...]
    evento: str
    desde: str


def chave_do_arquivo(dataset: str, chave: object) -> str:
    """A identidade de uma linha num nome de arquivo: legível na frente, exata no hash."""
    exata = json.dumps([dataset, chave], sort_keys=True, default=str)
    return '%s-%s' % (
        parte_segura(dataset, 40),
        hashlib.sha256(exata.encode('utf-8')).hexdigest()[:20],
    )


def _identidade(dataset: str, chave: object) -> tuple[str, str]:
    """
    A identidade de uma linha no índice (barata: sem hash). A mesma antes e
    depois do JSON do arquivo: o que não é escalar do JSON vai como texto.
    """
    if isinstance(chave, str):
        return dataset, chave
    if chave is None or isinstance(chave, (int, float)):
        return dataset, '\x00' + repr(chave)
    if isinstance(chave, (list, tuple, dict)):
        return dataset, '\x01' + json.dumps(chave, default=str, sort_keys=True)
    return dataset, str(chave)  # Decimal, data: o arquivo os guarda como texto


def _agora() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')


def _mudancas_de(conteudo: dict[str, JsonDecodificado]) -> list[dict[str, JsonDecodificado]]:
    """As mudanças de um arquivo: o lote (formato 2) ou a linha só (formato 1)."""
    if isinstance(conteudo.get('mudancas'), list):
        return [m for m in conteudo['mudancas'] if isinstance(m, dict)]
    if 'chave' in conteudo:
        return [conteudo]
    return []


def _linha_json(mudanca: Mudanca) -> str:
    """Uma mudança como ela vai no arquivo (as empresas sem repetição, na ordem vista)."""
    return json.dumps(
        {
            'chave': mudanca.chave,
            'escopos': list(dict.fromkeys(mudanca.escopos)),
            'evento': mudanca.evento,
            'posicao': mudanca.posicao,
            'quando': mudanca.quando,
        },
        ensure_ascii=False,
        sort_keys=True,
        allow_nan=False,
        default=str,
    )


def _chave_do_lote(dataset: str, escopo: str | None, corpo: str) -> str:
    # A chave e o hash do conteudo: o mesmo lote relido do log e o
    # mesmo arquivo (nao um segundo).
    resumo = hashlib.sha256(json.dumps([dataset, escopo]).encode('utf-8'))
    resumo.update(corpo.encode('utf-8'))
    return '%s-%s-%s' % (
        parte_segura(dataset, 40),
        parte_segura(escopo, 20),
        resumo.hexdigest()[:20],
    )


def _texto_do_lote(dataset: str, escopo: str | None, desde: str, corpo: str) -> str:
    return '{"formato": %d, "dataset": %s, "escopo": %s, "desde": %s, "mudancas": [%s]}\n' % (
        FORMATO,
        json.dumps(dataset, ensure_ascii=False),
        json.dumps(escopo, ensure_ascii=False),
        json.dumps(desde),
        corpo,
    )


@dataclass
class _OQueCabe:
    """O começo da lista que cabe no limite: cada mudança em JSON, por dataset e empresa."""

    ocupados: int  # os bytes do spool com as que cabem
    linhas_json: list[str] = field(default_factory=list)
    novas: set[tuple[str, str]] = field(default_factory=set)  # linhas que não esperavam
    grupos: dict[tuple[str, str | None], list[int]] = field(default_factory=dict)

    @property
    def quantas(self) -> int:
        return len(self.linhas_json)


class _ArquivoNovo(NamedTuple):
    """Um arquivo a gravar: a chave (o hash do conteúdo), o texto e as linhas dele."""

    chave: str
    texto: str
    dataset: str
    identidades: list[tuple[str, str]]


@dataclass
class _Arquivo:
    """O que o índice sabe de um arquivo do spool."""

    meta: ItemDaFila
    dataset: str
    desde: str
    linhas: set[tuple[str, str]]  # as identidades ainda não entregues nele


class _Junta(TypedDict):
    """Uma linha em `tomar`: as empresas de todos os arquivos tomados em que ela está."""

    chave: Json
    escopos: list[str | None]
    meta: ItemDaFila
    desde: str
    evento: NotRequired[str]  # o do último arquivo em que ela está


class Spool:
    """
    O spool em `pasta` (no ouvinte, `<estado>/spool`). Ver o topo do módulo.

    Este processo é o único que entrega: abrir segura a trava de trabalho da
    fila até `fechar()` (um segundo ouvinte no mesmo estado já é recusado pela
    trava do estado). `somente_leitura` só conta (status de outro processo).
    Os métodos são seguros entre threads do mesmo processo (uma trava só).
    """

    def __init__(
        self,
        pasta: str | os.PathLike[str],
        *,
        maximo_itens: int = padroes.SPOOL_MAXIMO_ITENS,
        maximo_bytes: int = padroes.SPOOL_MAXIMO_BYTES,
        logger: logging.Logger | None = None,
        somente_leitura: bool = False,
        risco: str = 'enquanto o log da origem guardar a posição',
    ) -> None:
        # O que a pausa custa na origem, dito na recusa: o binlog expira, o slot
        # retém WAL no disco do cliente (cada captura diz o seu).
        self._risco = risco
        if logger is None:
            from contextia_sync.registro import logger as do_sdk

            logger = do_sdk
        self._log = logger
        # Cada arquivo tem ao menos uma mudanca: o limite de itens da fila (de
        # arquivos) nunca e o primeiro a recusar; e so a rede de seguranca.
        self._fila = FilaEmDiretorio(
            pasta,
            maximo_itens=maximo_itens,
            maximo_bytes=maximo_bytes,
            devolver_tomados_para=PRONTO,
            rotulo='spool',
            logger=logger,
            somente_leitura=somente_leitura,
        )
        self._maximo_itens = maximo_itens
        self._maximo_bytes = maximo_bytes
        self._somente_leitura = somente_leitura
        self._trava = threading.RLock()
        self._arquivos: dict[str, _Arquivo] = {}
        self._onde: dict[tuple[str, str], list[str]] = {}
        # Por dataset: cada linha tomada e os arquivos em tomado/ de onde ela veio.
        self._tomadas: dict[str, dict[tuple[str, str], list[str]]] = {}
        self._pilha = contextlib.ExitStack()
        if not somente_leitura:
            self._pilha.enter_context(self._fila.trabalhando())
        self._indexar()

    @property
    def pasta(self) -> Path:
        return self._fila.raiz

    @property
    def devolvidos(self) -> list[str]:
        """Os arquivos achados em tomado/ ao abrir (destino desconhecido), re-enfileirados."""
        return list(self._fila.devolvidos)

    def fechar(self) -> None:
        self._pilha.close()

    # ------------------------------------------------------------ o índice
    def _indexar(self) -> None:
        """Lê o disco uma vez: que linha está em que arquivo."""
        self._arquivos.clear()
        self._onde.clear()
        for meta in self._fila.itens():
            conteudo = meta.ler()
            if conteudo is None:
                # Nunca apagado calado: fica no lugar (e nos bytes), nomeado.
                self._log.error(
                    'spool: %s não se lê como JSON (disco ou mão alheia?); fica'
                    ' onde está, fora da entrega -- confira e apague à mão',
                    meta.caminho,
                )
                conteudo = {}
            dataset = str(conteudo.get('dataset') or '')
            self._registrar(
                meta,
                dataset,
                str(conteudo.get('desde') or ''),
                [_identidade(dataset, m.get('chave')) for m in _mudancas_de(conteudo)],
            )

    def _registrar(
        self, meta: ItemDaFila, dataset: str, desde: str, linhas: Iterable[tuple[str, str]]
    ) -> None:
        nome = meta.caminho.name
        if nome in self._arquivos:
            self._esquecer(nome)
        arquivo = self._arquivos[nome] = _Arquivo(meta, dataset, desde, set(linhas))
        for identidade in arquivo.linhas:
            self._onde.setdefault(identidade, []).append(nome)

    def _esquecer(self, nome: str, linhas: Iterable[tuple[str, str]] | None = None) -> None:
        """Tira do índice o arquivo inteiro, ou só `linhas` dele."""
        arquivo = self._arquivos.get(nome)
        if arquivo is None:
            return
        saem = set(arquivo.linhas if linhas is None else linhas) & arquivo.linhas
        for identidade in saem:
            nomes = self._onde.get(identidade, [])
            if nome in nomes:
                nomes.remove(nome)
            if not nomes:
                self._onde.pop(identidade, None)
        if linhas is None:
            del self._arquivos[nome]
        else:
            arquivo.linhas -= saem

    def _medir(self) -> None:
        if self._somente_leitura:
            self._indexar()  # outro processo escreve: o retrato de agora

    # ------------------------------------------------------------ guardar
    def guardar(self, mudancas: Iterable[Mudanca]) -> int:
        """
        Põe as mudanças no spool: um arquivo por dataset e empresa (a da imagem
        mais nova), cada um com fsync, e a pasta com um fsync no fim. Devolve
        quantas linhas novas (a linha que já esperava entrega não conta de
        novo). Quando isto volta, tudo está no disco: quem chama pode gravar a
        posição do log.

        ErroSpoolCheio se não cabe tudo: o começo que cabe foi gravado
        (`guardadas` diz quantas), o resto não -- quem chama não avança a
        posição sobre elas.
        """
        with self._trava:
            return self._guardar(list(mudancas))

    def _guardar(self, mudancas: list[Mudanca]) -> int:
        cabe = self._o_que_cabe(mudancas)
        desde = _agora()
        novos = self._arquivos_novos(mudancas, cabe, desde)
        if novos:
            self._gravar(novos, desde)
        if cabe.quantas < len(mudancas):
            raise self._cheio(len(self._onde), cabe.ocupados, cabe.quantas)
        return len(cabe.novas)

    def _o_que_cabe(self, mudancas: list[Mudanca]) -> _OQueCabe:
        """O começo de `mudancas` que cabe no limite de linhas e de bytes, em JSON."""
        cabe = _OQueCabe(sum(a.meta.tamanho for a in self._arquivos.values()))
        for mudanca in mudancas:
            identidade = _identidade(mudanca.dataset, mudanca.chave)
            linha = _linha_json(mudanca)
            grupo = (mudanca.dataset, mudanca.escopos[-1] if mudanca.escopos else None)
            tamanho = (
                len(linha.encode('utf-8'))
                + 1
                + (0 if grupo in cabe.grupos else _SOBRA_DO_ARQUIVO + len(mudanca.dataset))
            )
            nova = identidade not in self._onde and identidade not in cabe.novas
            if (
                nova and len(self._onde) + len(cabe.novas) + 1 > self._maximo_itens
            ) or cabe.ocupados + tamanho > self._maximo_bytes:
                break
            cabe.ocupados += tamanho
            if nova:
                cabe.novas.add(identidade)
            cabe.grupos.setdefault(grupo, []).append(len(cabe.linhas_json))
            cabe.linhas_json.append(linha)
        return cabe

    def _arquivos_novos(
        self, mudancas: list[Mudanca], cabe: _OQueCabe, desde: str
    ) -> list[_ArquivoNovo]:
        """Os arquivos do que cabe: por dataset e empresa, até MUDANCAS_POR_ARQUIVO cada."""
        novos: list[_ArquivoNovo] = []
        for (dataset, escopo), indices in cabe.grupos.items():
            for inicio in range(0, len(indices), MUDANCAS_POR_ARQUIVO):
                parte = indices[inicio : inicio + MUDANCAS_POR_ARQUIVO]
                corpo = ','.join(cabe.linhas_json[i] for i in parte)
                chave = _chave_do_lote(dataset, escopo, corpo)
                if chave in self._arquivos or any(chave == n.chave for n in novos):
                    continue  # ja esta no spool, inteiro e no disco
                novos.append(
                    _ArquivoNovo(
                        chave,
                        _texto_do_lote(dataset, escopo, desde, corpo),
                        dataset,
                        [_identidade(mudancas[i].dataset, mudancas[i].chave) for i in parte],
                    )
                )
        return novos

    def _gravar(self, novos: list[_ArquivoNovo], desde: str) -> None:
        """Todos de uma vez no disco (`por_lote`), e só então no índice."""
        try:
            gravados = self._fila.por_lote([(novo.chave, novo.texto) for novo in novos])
        except ErroFilaCheia as cheia:
            raise self._cheio(len(self._onde), cheia.ocupados, 0) from None
        for (caminho, _), novo in zip(gravados, novos, strict=True):
            meta = ItemDaFila(
                caminho,
                PRONTO,
                int(caminho.name.split('-', 1)[0]),
                novo.chave,
                len(novo.texto.encode('utf-8')),
            )
            self._registrar(meta, novo.dataset, desde, novo.identidades)

    def _cheio(self, itens: int, ocupados: int, guardadas: int) -> ErroSpoolCheio:
        return ErroSpoolCheio(
            'spool cheio em %s: %d mudança(s), %.1f MiB (limite %d, %.1f MiB). A'
            ' captura do log está PAUSADA: a posição não avança e nada se perde'
            ' %s. Causa: o Contextia não'
            ' recebe (veja os erros de envio acima) ou recebe mais devagar do que'
            ' a origem muda. Correção: traga o Contextia de volta (o spool drena'
            ' sozinho, em ordem), ou aumente o limite se o disco tem espaço'
            ' (CONTEXTIA_SPOOL_MAXIMO_ITENS, CONTEXTIA_SPOOL_MAXIMO_BYTES).'
            % (
                self.pasta,
                itens,
                ocupados / 1048576,
                self._maximo_itens,
                self._maximo_bytes / 1048576,
                self._risco,
            ),
            itens=itens,
            ocupados=ocupados,
            maximo_itens=self._maximo_itens,
            maximo_bytes=self._maximo_bytes,
            guardadas=guardadas,
        )

    # ------------------------------------------------------------ entregar
    def tomar(self, dataset: str, maximo: int) -> list[ItemDoSpool]:
        """
        As mudanças de `dataset`, em ordem, com os arquivos movidos para tomado/:
        arquivos inteiros até passar de `maximo` linhas (ao menos um; um
        arquivo tem no máximo `MUDANCAS_POR_ARQUIVO`). Cada linha vem uma vez,
        com as empresas de todos os arquivos tomados em que ela está.

        Antes, o que ficou tomado deste dataset de uma entrega que falhou volta a
        pronto/: a leitura seguinte é a nova tentativa.
        """
        with self._trava:
            self._devolver(dataset)
            juntas: dict[tuple[str, str], _Junta] = {}
            origens: dict[tuple[str, str], list[str]] = {}
            for nome, arquivo in sorted(
                self._arquivos.items(), key=lambda par: par[1].meta.sequencia
            ):
                if len(juntas) >= maximo:
                    break
                if arquivo.meta.estado != PRONTO or arquivo.dataset != dataset:
                    continue
                tomado = self._fila.tomar(arquivo.meta)
                if tomado is None:
                    self._esquecer(nome)
                    continue
                arquivo.meta = tomado
                conteudo = tomado.ler() or {}
                for mudanca in _mudancas_de(conteudo):
                    identidade = _identidade(dataset, mudanca.get('chave'))
                    if identidade not in arquivo.linhas:
                        continue
                    junta = juntas.get(identidade)
                    if junta is None:
                        junta = juntas[identidade] = {
                            'chave': mudanca.get('chave'),
                            'escopos': [],
                            'meta': tomado,
                            'desde': str(conteudo.get('desde') or ''),
                        }
                    for escopo in mudanca.get('escopos') or []:
                        if escopo not in junta['escopos']:
                            junta['escopos'].append(escopo)
                    junta['evento'] = str(mudanca.get('evento') or '')
                    if nome not in origens.setdefault(identidade, []):
                        origens[identidade].append(nome)
            self._tomadas[dataset] = origens
            return [
                ItemDoSpool(
                    meta=j['meta'],
                    dataset=dataset,
                    chave=j['chave'],
                    escopos=tuple(j['escopos']),
                    evento=j['evento'],
                    desde=j['desde'],
                )
                for j in juntas.values()
            ]

    def devolver(self, dataset: str) -> None:
        """
        O que ficou tomado de `dataset` (a entrega que falhou, a mudança cuja
        remoção não saiu) volta a pronto/ já: o destino é conhecido (não foi
        entregue), e a subida seguinte não o conta como de um processo que morreu.
        """
        with self._trava:
            self._devolver(dataset)

    def _devolver(self, dataset: str) -> None:
        self._tomadas.pop(dataset, None)
        for nome, arquivo in sorted(self._arquivos.items()):
            if arquivo.meta.estado == TOMADO and arquivo.dataset == dataset:
                destino = self._fila.devolver(arquivo.meta, PRONTO)
                self._esquecer(nome)
                if destino is not None:
                    self._reler(destino)

    def _reler(self, caminho: Path) -> None:
        """Põe no índice o arquivo em `caminho` (voltou de tomado/), lido do disco."""
        estado = caminho.parent.name
        try:
            tamanho = caminho.stat().st_size
        except FileNotFoundError:
            return
        meta = ItemDaFila(
            caminho,
            estado,
            int(caminho.name.split('-', 1)[0]),
            caminho.name[len('000000000000-') : -len('.json')],
            tamanho,
        )
        conteudo = meta.ler() or {}
        dataset = str(conteudo.get('dataset') or '')
        self._registrar(
            meta,
            dataset,
            str(conteudo.get('desde') or ''),
            [_identidade(dataset, m.get('chave')) for m in _mudancas_de(conteudo)],
        )

    def concluir(self, itens: Iterable[ItemDoSpool]) -> None:
        """
        O intake confirmou estas linhas: o arquivo com todas as linhas entregues
        sai; o que ficou pela metade é regravado (troca atômica) só com as que
        faltam e volta a pronto/ na próxima `tomar`. A versão mais nova da
        mesma linha em pronto/ fica.
        """
        with self._trava:
            feitas: dict[str, set[tuple[str, str]]] = {}
            for item in itens:
                identidade = _identidade(item.dataset, item.chave)
                nomes = self._tomadas.get(item.dataset, {}).pop(
                    identidade, [item.meta.caminho.name]
                )
                for nome in nomes:
                    feitas.setdefault(nome, set()).add(identidade)
            for nome, identidades in feitas.items():
                arquivo = self._arquivos.get(nome)
                if arquivo is None or arquivo.meta.estado != TOMADO:
                    continue
                restam = arquivo.linhas - identidades
                if not restam:
                    self._fila.concluir(arquivo.meta)
                    self._esquecer(nome)
                    continue
                conteudo = arquivo.meta.ler() or {}
                conteudo['mudancas'] = [
                    m
                    for m in _mudancas_de(conteudo)
                    if _identidade(arquivo.dataset, m.get('chave')) in restam
                ]
                conteudo['formato'] = FORMATO
                for velho in ('chave', 'escopos', 'evento', 'posicao', 'quando'):
                    conteudo.pop(velho, None)
                texto = (
                    json.dumps(conteudo, ensure_ascii=False, allow_nan=False, default=str) + '\n'
                )
                gravar_atomico(str(arquivo.meta.caminho), texto)
                self._esquecer(nome, identidades)
                arquivo.meta = replace(arquivo.meta, tamanho=len(texto.encode('utf-8')))

    # ------------------------------------------------------------ medir
    def profundidade(self) -> int:
        """Linhas esperando entrega (em pronto/ e tomado/), cada uma uma vez."""
        with self._trava:
            self._medir()
            return len(self._onde)

    def bytes_ocupados(self) -> int:
        with self._trava:
            self._medir()
            return sum(a.meta.tamanho for a in self._arquivos.values())

    def idade_do_mais_velho(self) -> float | None:
        """Segundos desde que a mudança mais antiga ainda não entregue entrou; None se vazio."""
        with self._trava:
            self._medir()
            datas = []
            for arquivo in self._arquivos.values():
                if not arquivo.linhas or not arquivo.desde:
                    continue
                try:
                    datas.append(datetime.datetime.fromisoformat(arquivo.desde))
                except ValueError:
                    continue
        if not datas:
            return None
        agora = datetime.datetime.now(datetime.timezone.utc)
        return max(0.0, round((agora - min(datas)).total_seconds(), 1))
