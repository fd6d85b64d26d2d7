"""
As mudanças tomadas do spool relidas pela view: o que vai e de onde sai.

O log diz QUAL linha de uma tabela mudou; o que vai ao Contextia é a linha do
dataset como a view a mostra agora (o mesmo valor que a carga completa daria).
Cada mudança no spool é uma key do dataset, ou um cabeçalho
(`{'por': coluna do dataset, 'valor': X}`) que relê os itens dele. Por key:

  * as linhas vivas de agora vão (upsert) às empresas delas -- a key é única
    DENTRO da empresa (a do Protheus é por filial): pode estar em mais de uma;
  * a key sai das empresas em que FOI ENTREGUE (o índice de entregas,
    `indice_entregas.py`) e em que não está mais viva; a key que o índice não
    conhece sai da empresa da imagem do log (se a tabela tem a coluna), e a
    linha marcada como apagada (`deleted_when`), da empresa dela;
  * a linha relida por um cabeçalho vai só se mudou (o resumo do conteúdo
    contra o do índice): a nota alterada reenvia só os itens que ela mudou.

O `confirmar` anota no índice o que foi entregue e só conclui no spool a
mudança cujas remoções saíram todas.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from contextia_sync import padroes
from contextia_sync.captura import DatasetVivo, Leitura, Situacao
from contextia_sync.captura.indice_entregas import (
    Anotacao,
    Entregue,
    IndiceDeEntregas,
    resumo_da_linha,
    texto_da_chave,
)
from contextia_sync.escopos import texto_escopo
from contextia_sync.fila.spool import ItemDoSpool, Spool
from contextia_sync.origem import AdaptadorDeOrigem
from contextia_sync.registro import logger

if TYPE_CHECKING:  # tipos.py importa o sqlalchemy, que o autoteste não tem
    from contextia_sync.tipos import Json, Linha, ValorDoBanco

Remocao = tuple[str | None, str]  # (empresa, key em texto); empresa None: de todas


@dataclass
class _Releitura:
    """
    As linhas relidas pela view, por key em texto (todas as de mesma key: uma
    por empresa), as keys que o log trouxe e, de cada cabeçalho, as keys dele.
    """

    achadas: dict[str, list[Linha]] = field(default_factory=dict)
    pela_chave: set[str] = field(default_factory=set)
    do_cabecalho: dict[str, set[str]] = field(default_factory=dict)
    # A linha com a key nula (o LEFT JOIN do cabeçalho sem item): não tem
    # identidade; vai ao ciclo, que a conta e a deixa de fora (intake/chaves.py).
    key_nula: list[Linha] = field(default_factory=list)

    def juntar(self, chave: str, linhas: Iterable[Linha]) -> list[str]:
        """Põe as linhas lidas (uma só vez cada key) e devolve as keys delas."""
        novas: dict[str, list[Linha]] = {}
        for linha in linhas:
            if linha.get(chave) is None:
                self.key_nula.append(linha)
            else:
                novas.setdefault(texto_da_chave(linha.get(chave)), []).append(linha)
        self.achadas.update(novas)
        return list(novas)

    @property
    def candidatas(self) -> set[str]:
        juntas = set(self.pela_chave)
        for chaves in self.do_cabecalho.values():
            juntas.update(chaves)
        return juntas


@dataclass
class PlanoDoSpool:
    """
    O `privado` da leitura do spool: cada mudança tomada com as remoções de que
    ela depende, e o que o índice anota depois da entrega.
    """

    tomadas: list[tuple[ItemDoSpool, list[Remocao]]] = field(default_factory=list)
    anotar: list[Anotacao] = field(default_factory=list)
    sem_mudanca: int = 0  # linhas relidas por um cabeçalho iguais ao entregue: não vão


@dataclass
class _Destino:
    """Uma key relida: as linhas que vão, e as empresas de onde ela sai."""

    enviar: list[Linha]
    sai_de: list[str | None]
    iguais: int = 0


def identidade_do_cabecalho(item_chave: Json) -> tuple[str, Json] | None:
    """A mudança de um cabeçalho ({'por': coluna do dataset, 'valor': X}); None se é key."""
    if isinstance(item_chave, dict) and 'por' in item_chave:
        return str(item_chave['por']), item_chave.get('valor')
    return None


def colunas_via(alvo: DatasetVivo) -> list[str]:
    """As colunas do dataset por onde um cabeçalho chega aos itens (as `dataset_column`)."""
    return sorted({t.coluna_do_dataset for t in alvo.tabelas_base if not t.pela_chave})


# ------------------------------------------------------------------ reler
def _reler(
    origem: AdaptadorDeOrigem, alvo: DatasetVivo, coluna: str, valores: list[ValorDoBanco]
) -> Iterable[Linha]:
    """As linhas do dataset com `coluna` IN valores, em lotes (`CHAVES_POR_LEITURA`)."""
    passo = padroes.CHAVES_POR_LEITURA
    for inicio in range(0, len(valores), passo):
        yield from origem.fetch(
            alvo.source_object, alvo.colunas, chaves=(coluna, valores[inicio : inicio + passo])
        )


def _reler_tudo(
    origem: AdaptadorDeOrigem,
    alvo: DatasetVivo,
    itens: list[ItemDoSpool],
    indice: IndiceDeEntregas | None,
) -> _Releitura:
    """A releitura pela view: as keys do log, e os itens de cada cabeçalho mudado."""
    chave = alvo.chave or ''
    releitura = _Releitura()
    por_chave = [item.chave for item in itens if identidade_do_cabecalho(item.chave) is None]
    releitura.juntar(chave, _reler(origem, alvo, chave, por_chave))
    releitura.pela_chave = {texto_da_chave(v) for v in por_chave}
    cabecalhos: dict[str, list[Json]] = {}
    for item in itens:
        cabecalho = identidade_do_cabecalho(item.chave)
        if cabecalho is not None:
            cabecalhos.setdefault(cabecalho[0], []).append(cabecalho[1])
    for coluna, valores in cabecalhos.items():
        _reler_cabecalhos(origem, alvo, coluna, valores, indice, releitura)
    return releitura


def _reler_cabecalhos(
    origem: AdaptadorDeOrigem,
    alvo: DatasetVivo,
    coluna: str,
    valores: list[Json],
    indice: IndiceDeEntregas | None,
    releitura: _Releitura,
) -> None:
    """
    Os itens de cada cabeçalho mudado, pela coluna dele na view; e os que o
    índice diz que ele tinha e a view não mostra mais sob ele, relidos pela key
    (foram para outro cabeçalho, ou sumiram da view: saem).
    """
    chave = alvo.chave or ''
    for linha in _reler(origem, alvo, coluna, valores):
        if linha.get(chave) is None:
            releitura.key_nula.append(linha)
            continue
        texto = texto_da_chave(linha.get(chave))
        releitura.achadas.setdefault(texto, []).append(linha)
        releitura.do_cabecalho.setdefault(_id_cabecalho(coluna, linha.get(coluna)), set()).add(
            texto
        )
    if indice is None:
        return
    for valor in valores:
        antigas = indice.chaves_por(coluna, [valor]) - releitura.achadas.keys()
        releitura.do_cabecalho.setdefault(_id_cabecalho(coluna, valor), set()).update(antigas)
        if antigas:
            conhecidas = indice.entregues(antigas)
            chaves = [lista[0].valor for lista in conhecidas.values()]
            releitura.juntar(chave, _reler(origem, alvo, chave, chaves))


def _id_cabecalho(coluna: str, valor: object) -> str:
    return '%s=%s' % (coluna, texto_da_chave(valor))


# ------------------------------------------------------------------ decidir
def leitura_do_spool(
    origem: AdaptadorDeOrigem,
    alvo: DatasetVivo,
    itens: list[ItemDoSpool],
    indice: IndiceDeEntregas | None,
) -> Leitura:
    """A `Leitura` das mudanças tomadas: as linhas relidas (upsert) e as remoções por empresa."""
    if not itens:
        return Leitura(Situacao.NADA)
    releitura = _reler_tudo(origem, alvo, itens, indice)
    conhecidas = indice.entregues(releitura.candidatas) if indice is not None else {}
    imagens = _empresas_das_imagens(itens)
    do_log = _valores_do_log(itens)
    plano = PlanoDoSpool()
    via = colunas_via(alvo)
    upserts: list[Linha] = list(releitura.key_nula)
    remocoes: dict[str, list[ValorDoBanco]] = {}
    remover_de_todas: list[ValorDoBanco] = []
    sai_de_por_chave: dict[str, list[str | None]] = {}
    for texto in sorted(releitura.candidatas):
        antes = conhecidas.get(texto, [])
        destino = _destino(alvo, texto, releitura, antes, imagens.get(texto, []))
        upserts += destino.enviar
        plano.anotar += [_anotacao(alvo, linha, via) for linha in destino.enviar if alvo.escopo]
        plano.sem_mudanca += destino.iguais
        valor = antes[0].valor if antes else _valor_da_key(releitura, texto, do_log, alvo)
        for escopo in destino.sai_de:
            if escopo is None:
                remover_de_todas.append(valor)
            else:
                remocoes.setdefault(escopo, []).append(valor)
        sai_de_por_chave[texto] = destino.sai_de
    if plano.sem_mudanca:
        logger.info(
            '%-28s %d linha(s) relida(s) pelo cabeçalho iguais à entregue: não vão',
            alvo.nome,
            plano.sem_mudanca,
        )
    plano.tomadas = [(item, _sai_de_do_item(item, sai_de_por_chave, releitura)) for item in itens]
    leitura = Leitura(Situacao.MUDANCAS, upserts=upserts, quantos=len(itens), privado=plano)
    leitura.remocoes_por_escopo = remocoes
    leitura.remocoes = sorted(set(remover_de_todas), key=str)
    return leitura


def _destino(
    alvo: DatasetVivo,
    texto: str,
    releitura: _Releitura,
    antes: list[Entregue],
    das_imagens: list[str | None],
) -> _Destino:
    """Uma key relida: as linhas vivas que vão, e as empresas de onde ela sai."""
    lidas = releitura.achadas.get(texto, [])
    vivas, marcadas = (
        (lidas, [])
        if alvo.marca is None
        else alvo.marca.escolher(lidas, alvo.chave or '', alvo.escopo)
    )
    recorte = alvo.escopo
    if not recorte:
        # Tabela de domínio: vai a toda empresa, e sai de todas.
        return _Destino(vivas, [] if vivas else [None])
    atuais = {texto_escopo(linha.get(recorte)) for linha in vivas}
    entregue_em = {e.escopo for e in antes} or {e for e in das_imagens if e is not None}
    entregue_em |= {texto_escopo(linha.get(recorte)) for linha in marcadas}
    sai_de: list[str | None] = [*sorted(entregue_em - atuais)]
    if texto in releitura.pela_chave:
        return _Destino(vivas, sai_de)
    # Relida só pelo cabeçalho: vai a linha que mudou (ou que mudou de empresa).
    resumos = {e.escopo: e.resumo for e in antes}
    mudaram = [
        linha
        for linha in vivas
        if resumos.get(texto_escopo(linha.get(recorte))) != resumo_da_linha(linha)
    ]
    return _Destino(mudaram, sai_de, len(vivas) - len(mudaram))


def _empresas_das_imagens(itens: list[ItemDoSpool]) -> dict[str, list[str | None]]:
    """As empresas que as imagens do log trouxeram, por key (só a tabela que tem a coluna)."""
    empresas: dict[str, list[str | None]] = {}
    for item in itens:
        if identidade_do_cabecalho(item.chave) is None:
            empresas.setdefault(texto_da_chave(item.chave), []).extend(item.escopos)
    return empresas


def _valores_do_log(itens: list[ItemDoSpool]) -> dict[str, Json]:
    """A key de cada mudança como o log a deu (o tipo dela: a remoção vai com ele)."""
    return {
        texto_da_chave(item.chave): item.chave
        for item in itens
        if identidade_do_cabecalho(item.chave) is None
    }


def _valor_da_key(
    releitura: _Releitura, texto: str, do_log: dict[str, Json], alvo: DatasetVivo
) -> ValorDoBanco:
    """O valor da key para a remoção: o do log, ou o da linha relida (a marcada)."""
    if texto in do_log:
        return do_log[texto]
    lidas = releitura.achadas.get(texto)
    return lidas[0].get(alvo.chave or '') if lidas else texto


def _sai_de_do_item(
    item: ItemDoSpool, sai_de_por_chave: dict[str, list[str | None]], releitura: _Releitura
) -> list[Remocao]:
    """As remoções de que a mudança depende: as da key dela, ou as dos itens do cabeçalho."""
    cabecalho = identidade_do_cabecalho(item.chave)
    if cabecalho is None:
        texto = texto_da_chave(item.chave)
        return [(e, texto) for e in sai_de_por_chave.get(texto, [])]
    chaves = releitura.do_cabecalho.get(_id_cabecalho(*cabecalho), set())
    return [(e, texto) for texto in sorted(chaves) for e in sai_de_por_chave.get(texto, [])]


def _anotacao(alvo: DatasetVivo, linha: Linha, via: list[str]) -> Anotacao:
    """O que o índice guarda de uma linha entregue (`via`: as colunas do cabeçalho)."""
    escopo = texto_escopo(linha.get(alvo.escopo or ''))
    valores_via = {c: linha.get(c) for c in via}
    return Anotacao(linha.get(alvo.chave or ''), escopo, resumo_da_linha(linha), valores_via)


# ------------------------------------------------------------------ confirmar
def concluir_entregues(spool: Spool, leitura: Leitura, indice: IndiceDeEntregas | None) -> None:
    """
    Anota no índice o que foi entregue (as linhas enviadas, as keys removidas
    de cada empresa) e conclui no spool as mudanças cujas remoções saíram todas.
    """
    plano = leitura.privado
    if not isinstance(plano, PlanoDoSpool):
        return
    entregues: set[Remocao] = {
        (e, texto_da_chave(v))
        for e, valores in leitura.remocoes_por_escopo.items()
        for v in valores
    }
    entregues.update((None, texto_da_chave(v)) for v in leitura.remocoes)
    if indice is not None:
        removidas = [(e, v) for e, v in entregues if e is not None]
        indice.anotar(plano.anotar, removidas)
    spool.concluir(
        item for item, removidas in plano.tomadas if all(par in entregues for par in removidas)
    )


# ------------------------------------------------------------------ semear
def semear_indice(
    origem: AdaptadorDeOrigem, alvo: DatasetVivo, indice: IndiceDeEntregas, escopo: str | None
) -> int:
    """
    O índice nasce da origem: a key, a empresa e as colunas `via` de cada linha
    viva da view (da empresa `escopo`, ou de todas) -- o que a carga completa
    entrega. A linha com a key nula não entra (nunca é entregue), nem a marcada
    como apagada (a carga não a lê).
    """
    chave, recorte = alvo.chave or '', alvo.escopo or ''
    via = colunas_via(alvo)
    marca = alvo.marca
    colunas = list(dict.fromkeys([chave, recorte, *via, *([marca.coluna] if marca else [])]))
    recorte_lido = (recorte, escopo) if escopo is not None else None

    def anotacoes() -> Iterable[Anotacao]:
        for linha in origem.fetch(alvo.source_object, colunas, scope=recorte_lido):
            valor = linha.get(chave)
            if valor is not None and not (marca and marca.apagada(linha)):
                empresa = texto_escopo(linha.get(recorte))
                yield Anotacao(valor, empresa, None, {c: linha.get(c) for c in via})

    quantas = indice.semear(anotacoes(), None if escopo is None else {escopo})
    logger.info(
        '%-28s índice de entregas (key -> empresa) lido da origem: %d linha(s)%s',
        alvo.nome,
        quantas,
        '' if escopo is None else ' da empresa %s' % escopo,
    )
    return quantas
