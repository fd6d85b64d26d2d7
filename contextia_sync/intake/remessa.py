"""
A remessa: um envio de muitos lotes já montados, do primeiro POST ao balanço.

Quem chama dá os lotes (um iterável, lido só quando há vaga) e três peças
tipadas -- `montar` (o corpo de um lote), `aceitar` (a resposta final de um
lote: os erros dela, ou as contagens somadas) e, com a quarentena, `isolar`
(guardar o registro recusado sozinho). Aqui mora o resto, cada parte num lugar:

  * `Remessa.remeter` -- um lote preparado (`LotePreparado`) vira um
    `ResultadoDoLote`; cada pedido passa por `transporte.pedir` (a política de
    retentativas e o prazo);
  * o isolamento (`Remessa._dividir`, `Remessa._isolar`) -- 413, ou a recusa
    permanente do conteúdo com a quarentena: o lote é dividido ao meio até
    passar ou o registro recusado ficar sozinho, depois da prova do envelope;
  * a interrupção (`_Interrupcao`) -- servidor indisponível num lote: nada mais
    sai, e a origem para de ser lida;
  * o balanço (`Remessa.contar`) -- cada lote conta UMA vez, ok ou falho, e o
    log tem uma linha por problema;
  * a janela (`_em_voo`) -- até `em_voo` lotes esperando resposta, o seguinte
    já montado, as respostas contadas na ordem dos lotes.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from contextia_sync.intake.transporte import (
    STATUS_RECUSA_DO_REGISTRO,
    STATUS_RETENTAVEIS,
    ErroContextia,
    RespostaInvalida,
    pedir,
)

if TYPE_CHECKING:
    import requests

T = TypeVar('T')


class Balanco(Protocol):
    """O que `enviar_em_lotes` conta (o ResultadoEnvio do cliente tem estes campos)."""

    registros: int
    lotes_ok: int
    lotes_erro: int
    erros: list[str]


@dataclass(frozen=True, slots=True)
class LotePreparado(Generic[T]):
    """Um lote a caminho: o número dele no envio, os registros e o corpo (None: montar ao sair)."""

    numero: int
    registros: list[T]
    corpo: bytes | None = None


@dataclass(frozen=True, slots=True)
class ResultadoDoLote(Generic[T]):
    """O que um lote deu: os erros dele (vazio = entregue, ou o recusado guardado por `isolar`)."""

    numero: int
    registros: list[T]
    erros: list[str]


class _Interrupcao:
    """
    Servidor indisponível (não respondeu, seguiu sobrecarregado, 2xx que não é do
    intake): nada mais sai. `causa` é o PRIMEIRO lote, na ordem, que o achou
    assim -- com lotes em voo, a mensagem de interrupção vai para ele, não para
    quem terminou antes.
    """

    def __init__(self) -> None:
        self.indisponivel = False
        self.causa = 0
        self._trava = threading.Lock()

    def parar_em(self, numero: int) -> None:
        with self._trava:
            self.causa = numero if not self.indisponivel else min(self.causa, numero)
            self.indisponivel = True

    def parou_ate(self, numero: int) -> bool:
        """O servidor ficou indisponível neste lote ou num anterior?"""
        return self.indisponivel and self.causa <= numero


class Remessa(Generic[T]):
    """Os lotes de um envio a um intake: enviar, dividir, isolar, contar (ver o topo)."""

    def __init__(
        self,
        url: str,
        *,
        autorizacao: str,
        montar: Callable[[list[T]], bytes],
        aceitar: Callable[[requests.Response, str, list[T]], list[str]],
        rotulo: str,
        logger: logging.Logger,
        deve_parar: Callable[[], bool] | None = None,
        isolar: Callable[[T, requests.Response, str], list[str]] | None = None,
        comprimir: Callable[[], bool] | None = None,
    ) -> None:
        self.url, self.autorizacao, self.rotulo = url, autorizacao, rotulo
        self._montar, self._aceitar, self._isolar_um = montar, aceitar, isolar
        self.logger, self.deve_parar, self.comprimir = logger, deve_parar, comprimir
        self.interrupcao = _Interrupcao()
        self.envelope_aceito = False
        # `montar`, `aceitar` e `isolar` nunca rodam ao mesmo tempo: o balanço
        # e a quarentena de quem chama ficam corretos com lotes em voo.
        self.trava = threading.Lock()

    def montado(self, lote: list[T]) -> bytes:
        with self.trava:
            return self._montar(lote)

    def _postar(self, corpo: bytes, contexto: str, numero: int) -> requests.Response | str:
        """A resposta final do POST, ou a mensagem do servidor que não respondeu."""
        try:
            return pedir(
                'POST',
                self.url,
                autorizacao=self.autorizacao,
                corpo=corpo,
                contexto=contexto,
                deve_parar=self.deve_parar,
                comprimir=self.comprimir is not None and self.comprimir(),
            )
        except ErroContextia as erro:
            self.interrupcao.parar_em(numero)
            return str(erro)

    def _ler(
        self, resposta: requests.Response, contexto: str, lote: list[T], numero: int
    ) -> list[str]:
        try:
            with self.trava:
                erros = self._aceitar(resposta, contexto, lote)
        except RespostaInvalida as erro:
            self.interrupcao.parar_em(numero)
            return [str(erro)]
        if not erros:
            self.envelope_aceito = True
        return erros

    # ------------------------------------------------------------ um lote
    def remeter(self, preparado: LotePreparado[T]) -> ResultadoDoLote[T]:
        """Envia um lote (dividido se preciso) e diz o que ele deu."""
        erros = self._enviar(preparado.registros, preparado.numero, corpo=preparado.corpo)
        return ResultadoDoLote(preparado.numero, preparado.registros, erros)

    def _enviar(
        self, lote: list[T], numero: int, dividido: bool = False, corpo: bytes | None = None
    ) -> list[str]:
        if self.interrupcao.indisponivel:
            return ['%s, lote %d: não enviado (servidor indisponível)' % (self.rotulo, numero)]
        if dividido and self.deve_parar is not None and self.deve_parar():
            # A divisao multiplica os pedidos; a parada nao espera todos.
            self.interrupcao.parar_em(numero)
            return [
                '%s, lote %d: parada pedida no meio da divisão do lote; o resto dele'
                ' não foi enviado' % (self.rotulo, numero)
            ]
        contexto = '%s, lote %d (%d registros)' % (self.rotulo, numero, len(lote))
        resposta = self._postar(
            corpo if corpo is not None else self.montado(lote), contexto, numero
        )
        if isinstance(resposta, str):
            return [resposta]
        status = resposta.status_code
        recusa = self._isolar_um is not None and status in STATUS_RECUSA_DO_REGISTRO
        if len(lote) > 1 and (status == 413 or recusa):
            return self._dividir(lote, numero, resposta, contexto)
        if recusa and len(lote) == 1:
            return self._isolar(lote, numero, resposta, contexto)
        if status in STATUS_RETENTAVEIS:
            # Sobrecarga que nao passou no prazo: os proximos lotes tambem nao
            # passariam, e cada um gastaria o prazo inteiro.
            self.interrupcao.parar_em(numero)
        return self._ler(resposta, contexto, lote, numero)

    # ------------------------------------------------------------ o isolamento
    def _provar(self, numero: int) -> list[str]:
        """
        O envelope sem registros passa? Devolve os erros da prova (vazio = passa).
        Antes de culpar um registro, o envelope tem de ter sido aceito: recusado
        também, a recusa e do envelope (remove não suportado, campo inválido...).
        """
        if self.envelope_aceito:
            return []
        contexto = '%s, lote %d (prova: o mesmo envelope sem registros)' % (self.rotulo, numero)
        resposta = self._postar(self.montado([]), contexto, numero)
        if isinstance(resposta, str):
            return [resposta]
        if resposta.status_code in STATUS_RETENTAVEIS:
            self.interrupcao.parar_em(numero)
        return self._ler(resposta, contexto, [], numero)

    def _dividir(
        self, lote: list[T], numero: int, resposta: requests.Response, contexto: str
    ) -> list[str]:
        """413, ou recusa do conteúdo com a quarentena: as metades vão de novo."""
        status = resposta.status_code
        if status != 413:
            prova = self._provar(numero)
            if prova:
                # Dividir mandaria cada registro a quarentena: o lote falha inteiro.
                return self._ler(resposta, contexto, lote, numero) + [
                    '%s, lote %d: o envelope sem registros também foi recusado (%s) --'
                    ' a recusa e do envelope, não de um registro; nada foi dividido'
                    % (self.rotulo, numero, '; '.join(prova)[:300])
                ]
        meio = len(lote) // 2
        if status == 413:
            self.logger.warning(
                '%s: servidor recusou o tamanho (413); dividindo em %d + %d',
                contexto,
                meio,
                len(lote) - meio,
            )
        else:
            # INFO: o registro isolado ganha um aviso so, no fim do envio.
            self.logger.info(
                '%s: servidor recusou o conteúdo (HTTP %d); dividindo em'
                ' %d + %d para isolar o registro recusado',
                contexto,
                status,
                meio,
                len(lote) - meio,
            )
        return self._enviar(lote[:meio], numero, True) + self._enviar(lote[meio:], numero, True)

    def _isolar(
        self, lote: list[T], numero: int, resposta: requests.Response, contexto: str
    ) -> list[str]:
        """O registro recusado sozinho: à quarentena (`isolar`), se o envelope passa."""
        prova = self._provar(numero)
        if not prova and self._isolar_um is not None:
            with self.trava:
                return self._isolar_um(lote[0], resposta, contexto)
        return self._ler(resposta, contexto, lote, numero) + [
            '%s, lote %d: o envelope sem registros também foi recusado (%s) -- a recusa'
            ' e do envelope, não do registro; ele não foi para a quarentena'
            % (self.rotulo, numero, '; '.join(prova)[:300])
        ]

    # ------------------------------------------------------------ o balanço
    def contar(self, resultado: ResultadoDoLote[T], balanco: Balanco, avisar: bool = True) -> bool:
        """Conta o lote no balanço e registra os erros; True se o envio parou aqui."""
        erros = resultado.erros
        if erros:
            balanco.lotes_erro += 1
            balanco.erros.extend(erros)
        else:
            balanco.lotes_ok += 1
        balanco.registros += len(resultado.registros)
        parou = self.interrupcao.parou_ate(resultado.numero)
        # (O lote vazio que so anuncia um sync nao deixou origem por ler.)
        mensagem = (
            self._interrompido(resultado.numero) if avisar and parou and resultado.registros else ''
        )
        for posicao, erro in enumerate(erros):
            if mensagem and posicao == len(erros) - 1:
                # Uma linha para a falha e a interrupcao: um problema, um registro no log.
                self.logger.error('%s -- %s', erro, mensagem)
            else:
                self.logger.error('%s', erro)
        if parou and mensagem:
            balanco.erros.append(mensagem)
            if not erros:
                self.logger.error('%s', mensagem)
        return parou

    def _interrompido(self, numero: int) -> str:
        return (
            '%s: envio interrompido depois do lote %d -- o servidor não'
            ' respondeu, recusou por sobrecarga ou respondeu algo que não é do'
            ' intake; registros seguintes (se houver) não foram lidos nem'
            ' enviados. O próximo ciclo reenvia.' % (self.rotulo, numero)
        )


# ---------------------------------------------------------------- a janela
def _um_de_cada_vez(
    remessa: Remessa[T], lotes: Iterator[tuple[int, list[T]]], balanco: Balanco
) -> bool:
    """Um lote por vez, montado ao sair (o ao vivo: as versões de uma key em ordem)."""
    for numero, lote in lotes:
        if remessa.contar(remessa.remeter(LotePreparado(numero, lote)), balanco):
            return True
    return False


def _em_voo(
    remessa: Remessa[T], lotes: Iterator[tuple[int, list[T]]], balanco: Balanco, em_voo: int
) -> bool:
    """
    Até `em_voo` lotes esperando resposta (cada um numa thread); as respostas
    contadas na ORDEM dos lotes. Servidor indisponível: nada mais é lido, os
    lotes já em voo terminam e contam (ok ou falho).
    """
    interrompido = lido_tudo = False
    voo: deque[Future[ResultadoDoLote[T]]] = deque()
    # O lote seguinte, ja lido e montado, esperando uma vaga no voo.
    pronto: LotePreparado[T] | None = None
    with ThreadPoolExecutor(max_workers=em_voo, thread_name_prefix='lote-em-voo') as pool:
        while True:
            # Lido e montado ANTES de esperar a resposta mais antiga: quando a vaga
            # abre, ele sai na hora. Lido so depois da vaga, os lotes em voo voltavam
            # juntos e esperavam os seguintes serem lidos -- contra um intake a 20 ms,
            # 4 em voo rendiam o que 2 rendem.
            if pronto is None and not lido_tudo and not remessa.interrupcao.indisponivel:
                proximo = next(lotes, None)
                lido_tudo = proximo is None
                if proximo is not None:
                    pronto = LotePreparado(proximo[0], proximo[1], remessa.montado(proximo[1]))
            if pronto is not None and len(voo) < em_voo:
                # (Servidor indisponivel desde a leitura: `remeter` nao envia, e o
                # lote conta como nao enviado, como todo lote ja tirado de `lotes`.)
                voo.append(pool.submit(remessa.remeter, pronto))
                pronto = None
                continue
            if not voo:
                return interrompido
            if remessa.contar(voo.popleft().result(), balanco, avisar=not interrompido):
                # Nada mais e lido; os que ja estao em voo terminam e contam.
                interrompido = True


def enviar_em_lotes(
    lotes: Iterable[list[T]],
    url: str,
    *,
    autorizacao: str,
    montar: Callable[[list[T]], bytes],
    aceitar: Callable[[requests.Response, str, list[T]], list[str]],
    rotulo: str,
    balanco: Balanco,
    logger: logging.Logger,
    deve_parar: Callable[[], bool] | None = None,
    isolar: Callable[[T, requests.Response, str], list[str]] | None = None,
    em_voo: int = 1,
    comprimir: Callable[[], bool] | None = None,
    primeiro: int = 1,
) -> bool:
    """
    POSTa cada lote de `lotes` em `url`; devolve True se o envio foi interrompido.

      * cada pedido passa por `pedir` (retentativas e prazo, `deve_parar`);
      * 413 (lote grande demais para o servidor): o lote e dividido ao meio e as
        metades reenviadas, recursivamente, até passar ou sobrar um registro
        (sem `isolar`, um registro sozinho recusado vira erro do lote);
      * com `isolar` (a quarentena do cliente), recusa permanente do CONTEUDO
        (STATUS_RECUSA_DO_REGISTRO: 400, 413, 422) também divide o lote ao meio
        até o registro recusado ficar sozinho: os outros são entregues e o
        sozinho vai para `isolar(registro, resposta, contexto)`, que devolve os
        erros (vazio = guardado). Antes de culpar um registro, o envelope tem de
        ter sido aceito nesta chamada; se ainda não foi, um envelope sem
        registros (`montar([])`) vai como prova -- recusado também, a recusa e
        do envelope (remove não suportado, campo inválido...) e o lote falha
        inteiro, sem dividir (dividir mandaria cada registro a quarentena);
      * servidor que não respondeu (ErroContextia, parada pedida incluida),
        seguiu num status passageiro depois do prazo, ou respondeu 2xx que não
        e do intake (`aceitar` levanta RespostaInvalida): as partes seguintes do
        lote não saem, os lotes seguintes também não, e `lotes` NÃO é mais lido
        -- a carga já falhou, e ler a origem só para descartar custaria a origem
        e mais um prazo inteiro por lote. Uma mensagem em `erros` diz isso, e o
        log tem UMA linha para o lote e a interrupção juntos.

    `montar(lote)` faz o corpo de cada pedido (chamado de novo para cada metade);
    `aceitar(resposta, contexto, lote)` lê uma resposta final e devolve os erros
    dela (vazio = ok; pode levantar, ex. chave recusada). `rotulo` ('dataset x')
    abre as mensagens. Cada lote de `lotes` conta UMA vez em `balanco.lotes_ok`
    ou `balanco.lotes_erro`, dividido ou não; um lote cujo registro recusado foi
    guardado por `isolar` conta em `lotes_ok`.

    `em_voo` > 1: o lote seguinte e lido e montado (`montar`, nesta thread)
    enquanto até `em_voo` lotes esperam resposta (cada um numa thread); as
    respostas são contadas e registradas na ORDEM dos lotes. `montar`, `aceitar`
    e `isolar` nunca rodam ao mesmo tempo (uma trava). A ordem de CHEGADA entre
    lotes em voo não é garantida: quem precisa que as versões de uma key não se
    ultrapassem (o ao vivo) usa `em_voo=1`. `comprimir()`, se dado, e perguntado
    a cada pedido: True, o corpo vai em gzip (`pedir`). `primeiro`: o número do
    primeiro lote nas mensagens (a carga de todas as empresas manda cada lote de
    uma empresa numa chamada, e o "lote N" do log tem de ser o N-ésimo dela,
    como o `sync.part`).
    """
    remessa = Remessa(
        url,
        autorizacao=autorizacao,
        montar=montar,
        aceitar=aceitar,
        rotulo=rotulo,
        logger=logger,
        deve_parar=deve_parar,
        isolar=isolar,
        comprimir=comprimir,
    )
    numerados = enumerate(lotes, primeiro)
    if em_voo <= 1:
        return _um_de_cada_vez(remessa, numerados, balanco)
    return _em_voo(remessa, numerados, balanco, em_voo)
