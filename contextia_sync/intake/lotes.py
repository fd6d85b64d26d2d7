"""
Os registros viram lotes: ler, serializar e cortar em lotes de `tamanho`, sem
materializar o dataset (`FonteDeLotes`). É a primeira etapa do envio; o corpo
de cada lote sai do `Envelope` (envio.py), a remessa (remessa.py) os manda.

Três caminhos, escolhidos uma vez por envio:

  * o plano fixo (`familias`: os registros SÃO as linhas de um fetch, dicts com
    essas colunas) -- o conversor de cada coluna escolhido uma vez pelo tipo, as
    linhas convertidas no lugar, e o array dos registros do lote feito de uma
    vez (`corpo_direto`). O lote que não sai exato por ali -- um valor sem
    JSON, um tipo fora do plano -- vai pelo caminho de um registro por vez;
  * os prontos (`preparador_de_prontos` do cliente): o JSON de cada registro já
    feito, que vai ao corpo como está (a carga de todas as empresas);
  * um registro por vez, pela forma dele (também com a quarentena, que precisa
    dos registros só em tipos JSON: a identidade, o hash canônico e o arquivo
    dela os leem).

Um registro que não vira JSON exato: sem quarentena, ele e os seguintes não
saem (`recusado` diz qual; a carga conta como falha e nunca será completada);
com ela, vai para a quarentena com os valores que viraram e os que não.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, TypeAlias, TypeVar, cast

from contextia_sync.intake.envio import RecusasDoEnvio, ResultadoEnvio
from contextia_sync.intake.serializacao import (
    ErroSerializacao,
    PlanoFixo,
    Serializador,
    conversor_de_linha,
    corpo_de_registros,
    corpo_direto,
    serializar_parcial,
)
from contextia_sync.tipos import Linha, ValorDoBanco

if TYPE_CHECKING:
    from orjson import Fragment

    from contextia_sync.intake.serializacao import Registro, RegistroDoCorpo

try:
    import orjson as _orjson

    # O orjson anterior ao 3.9 não tem o Fragment: como sem o orjson.
    _Fragmento: type[Fragment] | None = getattr(_orjson, 'Fragment', None)
except ImportError:  # sem o orjson: sem registros prontos
    _Fragmento = None

T = TypeVar('T')

# O que o envio lê: a linha da origem, ou o pronto de `preparador_de_prontos`.
Lido: TypeAlias = 'Mapping[str, ValorDoBanco] | Fragment'


def preparador_de_prontos(
    familias: Mapping[str, str] | None,
) -> Callable[[Mapping[str, ValorDoBanco]], Fragment] | None:
    """
    A função que faz de uma linha da origem o registro pronto (o JSON dele, do
    jeito que `enviar_dataset` o poria no corpo: o mesmo plano por coluna de
    `familias`, ou pela forma, e o mesmo `corpo_de_registros`), para
    `enviar_dataset(..., prontos=True)`. Levanta ErroSerializacao como o envio.
    None sem o orjson (o pronto é um `orjson.Fragment`): envie as linhas.
    """
    if _Fragmento is None:
        return None
    fragmento = _Fragmento
    converter = conversor_de_linha(
        PlanoFixo(dict(familias)) if familias else None, Serializador(puro=False)
    )

    def preparar(bruto: Mapping[str, ValorDoBanco]) -> Fragment:
        return fragmento(corpo_de_registros([converter(bruto)])[1:-1])

    return preparar


def lotes_de(registros: Iterable[T], tamanho: int) -> Iterator[list[T]]:
    """`registros` em listas de até `tamanho`, lidos só quando pedidos."""
    iterador = iter(registros)
    while True:
        lote = list(itertools.islice(iterador, tamanho))
        if not lote:
            return
        yield lote


class FonteDeLotes:
    """
    Os lotes de um envio (ver o topo do módulo). `lidos` conta os registros
    lidos da origem; `recusado`, se não None, diz o registro que parou a
    leitura. `anunciar_vazio`: sem nenhum lote, um lote vazio sai assim mesmo
    (o servidor conhece o sync, ou recebe o `remove`).
    """

    def __init__(
        self,
        registros: Iterable[Lido],
        tamanho: int,
        *,
        resultado: ResultadoEnvio,
        recusas: RecusasDoEnvio | None,
        familias: Mapping[str, str] | None,
        prontos: bool,
        anunciar_vazio: bool,
    ) -> None:
        self.registros, self.tamanho, self.resultado = registros, tamanho, resultado
        self.recusas, self.anunciar_vazio = recusas, anunciar_vazio
        self.prontos = prontos and recusas is None
        self.lidos = 0
        self.recusado: str | None = None
        self.serializador = Serializador(puro=recusas is not None)
        # O plano fixo (linhas de um fetch): `fixo` deixa o Decimal para o corpo
        # (corpo_direto, o lote inteiro de uma vez); `inteiro` converte tudo, para o
        # lote que volta ao caminho de um registro por vez.
        self.fixo: PlanoFixo | None = None
        self.inteiro: PlanoFixo | None = None
        # Os prontos ja sao o JSON: nada de plano para eles.
        if familias and recusas is None and not prontos:
            self.fixo = PlanoFixo(dict(familias), decimal_no_corpo=True)
            self.inteiro = PlanoFixo(dict(familias))
        # O array de registros do lote que `_lotes_fixos` acabou de dar: (lote, corpo).
        self._pronto: tuple[list[RegistroDoCorpo], bytes] | None = None

    def __iter__(self) -> Iterator[list[RegistroDoCorpo]]:
        enviados = 0
        fonte = (
            self._lotes_fixos(self.fixo)
            if self.fixo is not None
            else lotes_de(self._serializados(self.registros), self.tamanho)
        )
        for lote in fonte:
            enviados += 1
            yield lote
        if enviados == 0 and self.recusado is None and self.anunciar_vazio:
            # Carga vazia: um lote vazio para o servidor conhecer o sync.
            yield []

    def registros_json(self, lote: list[RegistroDoCorpo]) -> bytes:
        """O array JSON dos registros de `lote` (o `registros_json` do Envelope)."""
        pronto = self._pronto
        if pronto is not None and pronto[0] is lote:
            self._pronto = None
            return pronto[1]
        if self.fixo is not None:
            # (Uma metade de um lote do plano fixo, com o Decimal ainda cru.)
            return corpo_direto(lote) or corpo_de_registros(lote)
        return corpo_de_registros(lote)

    # ------------------------------------------------------------ um registro por vez
    def _serializados(self, fonte: Iterable[Lido]) -> Iterator[RegistroDoCorpo]:
        """Os registros de `fonte`, cada um já em JSON (ou pronto), contados em `lidos`."""
        # (Sem prontos, o que se lê são as linhas da origem.)
        return (
            self._contados(fonte)
            if self.prontos
            else self._convertidos(cast('Iterable[Mapping[str, ValorDoBanco]]', fonte))
        )

    def _convertidos(self, fonte: Iterable[Mapping[str, ValorDoBanco]]) -> Iterator[Registro]:
        # (Locais: o laco roda uma vez por registro.)
        lidos = self.lidos
        guardadas = self.recusas.guardadas if self.recusas is not None else None
        ja_guardado = self.recusas.ja_guardado if self.recusas is not None else _nunca
        converter = conversor_de_linha(self.inteiro, self.serializador)
        try:
            for bruto in fonte:
                lidos += 1
                try:
                    registro = converter(bruto)
                except ErroSerializacao as erro:
                    if not self._sem_json(bruto, erro, lidos):
                        return
                    continue
                # Sem nada guardado na quarentena (quase sempre), nem a chamada.
                if not guardadas or not ja_guardado(registro, {}):
                    yield registro
        finally:
            self.lidos = lidos

    def _contados(self, fonte: Iterable[Lido]) -> Iterator[RegistroDoCorpo]:
        """Os prontos, só contados: já são o JSON do registro (orjson.Fragment)."""
        lidos = self.lidos
        try:
            for json_pronto in fonte:
                lidos += 1
                yield json_pronto
        finally:
            self.lidos = lidos

    def _sem_json(
        self, bruto: Mapping[str, ValorDoBanco], erro: ErroSerializacao, lidos: int
    ) -> bool:
        """O registro que não vira JSON: à quarentena (True, a leitura segue) ou o fim."""
        if self.recusas is None:
            # Registro que nao vira JSON exato: os seguintes nao saem, e
            # a carga conta como falha (nunca sera completada).
            self.recusado = (
                'registro %d da leitura: %s -- os seguintes não foram lidos'
                ' nem enviados' % (lidos, erro)
            )
            return False
        parcial, invalidos = serializar_parcial(bruto)
        if self.recusas.ja_guardado(parcial, invalidos):
            return True
        erros = self.recusas.guardar(parcial, 'valor sem JSON: %s' % erro, invalidos=invalidos)
        if erros:
            self.recusado = '; '.join(erros)
            return False
        self.resultado.registros += 1
        return True

    # ------------------------------------------------------------ o plano fixo
    def _lotes_fixos(self, plano: PlanoFixo) -> Iterator[list[RegistroDoCorpo]]:
        """
        Os lotes das linhas de um fetch, cada array de registros feito aqui de
        uma vez (guardado em `_pronto` para o `registros_json`); o lote que não
        sai exato vai pelo caminho de um registro por vez, que diz qual registro
        e qual coluna, e nada depois dele e enviado.
        """
        iterador = iter(self.registros)
        while self.recusado is None:
            lote: list[Lido] = list(itertools.islice(iterador, self.tamanho))
            if not lote:
                return
            corpo = _corpo_direto(plano, lote)
            if corpo is None:
                # (Os conversores do plano devolvem o que ja converteram como esta.)
                convertidos = list(self._serializados(lote))
                if convertidos:
                    yield convertidos
                continue
            self.lidos += len(lote)
            self._pronto = (lote, corpo)
            yield lote


def _nunca(registro: RegistroDoCorpo, invalidos: Mapping[str, str]) -> bool:  # noqa: ARG001
    return False


def _corpo_direto(plano: PlanoFixo, lote: list[Lido]) -> bytes | None:
    """O array do lote pelo plano, de uma vez; None se o lote não sai exato por ali."""
    # Todos dicts com as colunas do plano (as linhas do fetch): sem olhar um a um.
    if set(map(type, lote)) != {dict} or set(map(len, lote)) != {plano.colunas}:
        return None
    converter = plano.registro if plano.plano else None
    try:
        if converter is not None:
            for registro in cast('list[Linha]', lote):  # (todos dicts: conferido acima)
                converter(registro)
        return corpo_direto(lote)
    except ErroSerializacao:
        return None
