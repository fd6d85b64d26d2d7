"""
A estrategia `reconciliacao`: a diferenca do conjunto de CHAVES.

    SELECT <escopo>, <key> FROM <view> ORDER BY <escopo>, <key>

lido inteiro a cada `--intervalo-reconciliacao`, comparado -- empresa por
empresa, andando nas duas sequencias ao mesmo tempo -- com o conjunto ENTREGUE
da ultima vez (no disco, em <estado>/conjuntos/; captura/conjuntos.py). O que
sumiu vai ao Contextia como `remove`; o que apareceu e lido inteiro (`key IN`)
e enviado. Pega INCLUSAO e EXCLUSAO com a credencial de leitura, em qualquer
banco; ALTERACAO nao (a chave nao muda) -- para isso ha a `coluna`, e as duas
andam juntas em `coluna+reconciliacao` (combinada.py).

Remocao errada e pior que remocao atrasada. Por isso:
  * so uma leitura que terminou sem erro e comparada: conexao derrubada, tempo
    esgotado, ordem que nao cresce (a collation do banco que o ORDER BY nao
    domou) -- a leitura inteira e recusada, nada e removido, e a proxima tenta;
  * o TETO do `complete` da varredura (padroes.MAX_REMOCAO) vale por empresa:
    a view que de repente volta vazia ou com uma fracao (GRANT revogado,
    manutencao no ERP) e RECUSADA alto, no log, no status, na saude e nas
    metricas, e nada e removido;
  * antes de remover, cada chave e procurada de novo na origem (`key IN`): a
    que reapareceu entre a leitura e agora fica;
  * empresa sem conjunto entregue ainda nao e comparada: o conjunto dela nasce
    da carga inicial (lido ANTES dela, guardado depois que ela fechou --
    `antes_da_carga`/`depois_da_carga`), ou, na primeira vez que a
    reconciliacao a ve, da leitura de agora, sem remover nada;
  * empresa com carga inicial pendente, sem chave ou em `excluded_scopes` fica
    de fora da comparacao.

O conjunto entregue muda so no `confirmar`, com o que foi de fato entregue: o
anterior, menos as remocoes entregues, mais as inclusoes entregues. Passou do
`--maximo-por-ciclo`? Vao as primeiras; o resto fica para a proxima.

O que pode estar no Contextia FORA do conjunto -- as linhas de um envio que não
se confirmou (falhou noutra empresa, kill -9 no meio) e as que entraram durante
uma carga (o conjunto é o de antes dela) -- fica anotado como chaves TENTADAS
(`antes_de_enviar`, `depois_da_carga`); a reconciliação seguinte confere cada
uma na origem e remove as que sumiram. Remover o que nunca chegou e inofensivo;
deixar o que chegou e foi apagado, até a varredura, nao.
"""

from __future__ import annotations

import collections
import datetime
import os
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from contextia_sync.origem import AdaptadorDeOrigem
from contextia_sync import padroes
from contextia_sync.arquivos import GravacaoAtomica
from contextia_sync.captura import DatasetVivo, Leitura, Situacao, conjuntos
from contextia_sync.captura.conjuntos import ErroConjunto, ErroConjuntoGuardado, Identidade
from contextia_sync.escopos import texto_escopo
from contextia_sync.estado.estado import Estado, Reconciliacao
from contextia_sync.origem import FUNCOES_RECONCILIACAO, ErroAdaptador, faltando
from contextia_sync.origem.marca_apagada import argumento
from contextia_sync.registro import logger

if TYPE_CHECKING:  # so a anotacao: o topo fica puro (autoteste)
    from contextia_sync.tipos import Linha, ValorDoBanco


def _agora_texto() -> str:
    return datetime.datetime.now().strftime('%Y-%m-%d %H:%M:%S')


@dataclass
class OpcoesReconciliacao:
    """O que a reconciliacao precisa além da origem e do estado."""

    pasta: str  # <estado>/conjuntos
    intervalo: int = padroes.INTERVALO_RECONCILIACAO
    max_remocao: float = padroes.MAX_REMOCAO
    seco: bool = False
    # As empresas que recebem o ao-vivo (com chave, fora de excluded_scopes).
    escopos: Callable[[], Collection[str]] = field(default=lambda: ())


@dataclass
class _Empresa:
    """A comparação de uma empresa (ou do dataset sem recorte: escopo None)."""

    escopo: str | None
    anteriores: int = 0
    atuais: int = 0
    removidas: list[ValorDoBanco] = field(default_factory=list)  # as que vao agora
    incluidas: list[ValorDoBanco] = field(default_factory=list)
    removidas_total: int = 0  # todas que a leitura viu
    incluidas_total: int = 0
    recusa: str | None = None
    torto: bool = False  # o conjunto guardado nao servia: apagado, recomeca
    tentadas: list[ValorDoBanco] = field(default_factory=list)  # as chaves tentadas (conferir)


@dataclass
class _Diario:
    """As chaves que a `coluna` entregou a uma empresa desde a última reconciliação."""

    arquivo: str  # o `dobrando`: sai quando o conjunto as tiver
    chaves: list[ValorDoBanco]
    so_nele: list[int]  # [n]: quantas o conjunto no disco ainda não tem


@dataclass
class _Antes:
    """O conjunto lido antes de uma carga: de que empresa (None: de todas) e as fotos."""

    escopo: str | None
    fotos: dict[str | None, _Gravacao]


@dataclass
class _Plano:
    """O que `confirmar` grava: as inclusões entregues, por empresa (None: sem recorte),
    e os diários que o conjunto novo soma; e os arquivos de chaves tentadas que esta
    leitura conferiu, que saem quando as remoções dela forem entregues."""

    incluidas: dict[str | None, list[ValorDoBanco]]
    diarios: dict[str | None, _Diario] = field(default_factory=dict)
    tentadas: list[str] = field(default_factory=list)
    com_remocoes: bool = False


class _Grupos:
    """
    A leitura do conjunto repartida por empresa, conferindo a ordem das empresas.

    A ordem das chaves dentro de cada empresa quem confere e quem consome
    (conjuntos.em_ordem / conjuntos.comparar). A mesma empresa em dois pedacos
    (297 e '297' numa coluna de tipo misto) e recusada: os dois pedacos seriam
    comparados cada um contra o conjunto inteiro.
    """

    def __init__(self, linhas: Iterable[Sequence[ValorDoBanco]], com_escopo: bool) -> None:
        # Cada linha e (escopo, chave), ou (chave,) no dataset sem recorte.
        self.linhas = iter(linhas)
        self.com_escopo = com_escopo
        self.atual = next(self.linhas, None)

    def __iter__(self) -> Iterator[tuple[str | None, Iterator[ValorDoBanco]]]:
        anterior: tuple[int, ValorDoBanco] | None = None
        vistos: set[str] = set()
        if not self.com_escopo:
            grupo = self._chaves(None)
            yield None, grupo
            collections.deque(grupo, maxlen=0)
            return
        while self.atual is not None:
            valor = self.atual[0]
            ordem = conjuntos.ordem(valor)
            texto = texto_escopo(valor)
            if anterior is not None and not conjuntos.cresce(anterior, ordem):
                raise ErroConjunto(
                    'a origem fora de ordem: a empresa %r veio depois de outra maior' % (valor,)
                )
            if texto in vistos:
                raise ErroConjunto(
                    'a empresa %s aparece em dois valores de escopo (%r e outro)'
                    ' na mesma coluna: converta o escopo na view para um tipo'
                    ' só' % (texto, valor)
                )
            vistos.add(texto)
            anterior = ordem
            grupo = self._chaves(valor)
            yield texto, grupo
            collections.deque(grupo, maxlen=0)  # o que o consumidor nao leu

    def _chaves(self, valor: ValorDoBanco) -> Iterator[ValorDoBanco]:
        linhas, atual = self.linhas, self.atual
        if not self.com_escopo:
            while atual is not None:
                yield atual[0]
                atual = self.atual = next(linhas, None)
            return
        while atual is not None and atual[0] == valor:
            yield atual[1]
            atual = self.atual = next(linhas, None)


class CapturaReconciliacao:
    """`reconciliacao`: a posição de cada dataset e o conjunto de chaves entregue."""

    nome = 'reconciliacao'

    def __init__(
        self,
        origem: AdaptadorDeOrigem,
        estado: Estado,
        folga: int,  # noqa: ARG002
        maximo: int,
        opcoes: OpcoesReconciliacao,
    ) -> None:
        faltam = faltando(origem, FUNCOES_RECONCILIACAO)
        if faltam:
            raise ErroAdaptador(
                'o adaptador de origem (%s) não expõe %s, que a estratégia `reconciliacao`'
                ' precisa: o conjunto de chaves da view em ordem. Use --source=generic ou'
                ' acrescente essa função ao adaptador (docs/origem.md).'
                % (getattr(origem, '__name__', '?'), ', '.join('`%s`' % f for f in faltam))
            )
        self.origem = origem
        self.estado = estado
        self.maximo = maximo
        self.opcoes = opcoes
        # Tentativas nesta subida (relogio monotonico): o intervalo conta daqui.
        self._tentada: dict[str, float] = {}
        # Os arquivos de chaves tentadas do envio em curso de cada dataset.
        self._tentadas_agora: dict[str, list[str]] = {}
        if not opcoes.seco:
            _limpar_temporarios(opcoes.pasta)

    # -- o que a origem precisa ter -------------------------------------------------
    def conferir(self, alvos: list[DatasetVivo]) -> list[str]:  # noqa: ARG002 - o protocolo
        """Nada na subida: a `key` já foi exigida (sem ela o dataset fica de fora)."""
        return []

    # -- o intervalo ------------------------------------------------------------------
    def vencida(self, alvo: DatasetVivo) -> bool:
        """Passou um --intervalo-reconciliacao desde a última tentativa deste dataset?"""
        ultima = self._tentada.get(alvo.nome)
        if ultima is not None:
            return time.monotonic() - ultima >= self.opcoes.intervalo
        # Primeira vez nesta subida (o --once do cron): a ultima tentativa do estado.
        tentada = self.estado.reconciliacao(alvo.nome).tentada_em
        try:
            quando = datetime.datetime.fromisoformat(tentada) if tentada else None
        except ValueError:
            quando = None
        if quando is None:
            return True
        passados = (datetime.datetime.now() - quando).total_seconds()
        # Um decimo de folga: o cron de 5 min com intervalo de 300 s nao pula uma vez
        # sim, outra nao. Relogio que voltou (passados < 0): reconcilia ja.
        return passados >= 0.9 * self.opcoes.intervalo or passados < 0

    def _identidade(self, alvo: DatasetVivo) -> Identidade:
        assert alvo.chave is not None
        return Identidade(alvo.nome, alvo.source_object, alvo.chave, alvo.escopo)

    # -- Captura ----------------------------------------------------------------
    def ler(self, alvo: DatasetVivo) -> Leitura:
        if alvo.chave is None or not self.vencida(alvo):
            return Leitura(Situacao.NADA, sondou=False)
        self._tentada[alvo.nome] = time.monotonic()
        r = self.estado.reconciliacao(alvo.nome)
        r.tentada_em = _agora_texto()
        inicio = time.monotonic()
        try:
            leitura = self._reconciliar(alvo, r)
        except Exception as erro:
            r.registrar_erro(
                '%s %s: %s' % (_agora_texto(), type(erro).__name__, erro), _agora_texto()
            )
            logger.error(
                '%-28s reconciliação: a leitura do conjunto de chaves falhou (%s: %s)'
                ' -- NADA removido; a próxima reconciliação tenta de novo',
                alvo.nome,
                type(erro).__name__,
                erro,
            )
            raise
        r.registrar_sucesso()
        r.ultima_em = _agora_texto()
        r.duracao_s = round(time.monotonic() - inicio, 3)
        if leitura.situacao is Situacao.NADA:
            r.removidas = r.incluidas = 0  # a ultima nao teve diferenca
        return leitura

    def desistir(self, alvo: DatasetVivo) -> None:  # noqa: ARG002 - o protocolo
        """Nada a devolver: a posição só anda no `confirmar`."""

    def confirmar(self, alvo: DatasetVivo, leitura: Leitura) -> None:
        """O conjunto entregue de cada empresa vira o anterior, menos as remoções e mais as
        inclusões entregues (as que `leitura` ainda traz: o ciclo tira as que falharam)."""
        plano = leitura.privado
        if isinstance(plano, _Plano) and not self._gravar_entregue(alvo, leitura, plano):
            # Um conjunto não regravado: as chaves tentadas ficam, e a próxima
            # reconciliação as confere de novo.
            self._tentadas_agora.pop(alvo.nome, None)
            return
        # Só agora, com o conjunto e o diário gravados: um kill -9 antes disto deixa
        # as chaves tentadas, nunca uma chave entregue fora de todo arquivo.
        self.soltar_tentadas(alvo)

    def _gravar_entregue(self, alvo: DatasetVivo, leitura: Leitura, plano: _Plano) -> bool:
        """O conjunto de cada empresa com o que foi entregue; False se algum não se gravou."""
        r = self.estado.reconciliacao(alvo.nome)
        identidade = self._identidade(alvo)
        removidas: dict[str | None, list[ValorDoBanco]] = {
            e: v for e, v in leitura.remocoes_por_escopo.items()
        }
        if leitura.remocoes:
            removidas[None] = list(leitura.remocoes)
        total_removidas = total_incluidas = 0
        gravados = True
        for escopo in sorted(
            set(removidas) | set(plano.incluidas) | set(plano.diarios), key=lambda e: e or ''
        ):
            saem, entram = removidas.get(escopo, []), plano.incluidas.get(escopo, [])
            diario = plano.diarios.get(escopo)
            if not saem and not entram:
                if diario is not None:
                    self._somar_diario(identidade, escopo, diario)
                continue
            if self._regravar(identidade, escopo, entram, saem, diario):
                total_removidas += len(saem)
                total_incluidas += len(entram)
            else:
                gravados = False
        r.removidas, r.incluidas = total_removidas, total_incluidas
        r.removidas_total += total_removidas
        r.incluidas_total += total_incluidas
        if gravados and (not plano.com_remocoes or removidas):
            # Conferidas na origem, e as que sumiram removidas: nada mais a ver nelas.
            for arquivo in plano.tentadas:
                _apagar(arquivo)
        return gravados

    def antes_de_enviar(self, alvo: DatasetVivo, leitura: Leitura) -> None:
        """
        As chaves que este envio vai levar, anotadas ANTES dele, por empresa.

        Sem isto, a linha que chegou ao Contextia num envio que não se confirmou
        (outra empresa falhou depois, o ouvinte morreu no meio) não está no
        conjunto nem no diário; apagada antes do próximo envio, nenhuma
        comparação a veria, e ela ficaria até a varredura. A próxima
        reconciliação confere cada chave tentada na origem (`key IN`), e a que
        sumiu é removida. Envio confirmado: `confirmar` apaga estas.
        """
        self._tentadas_agora[alvo.nome] = []
        if alvo.chave is None or self.opcoes.seco:
            return
        identidade = self._identidade(alvo)
        envio = '%020d-%d' % (time.time_ns(), os.getpid())
        for escopo, valores in self._por_escopo(alvo, leitura.upserts).items():
            arquivo = conjuntos.caminho_tentadas(self.opcoes.pasta, alvo.nome, escopo, envio)
            try:
                conjuntos.anotar_diario(arquivo, identidade, escopo, valores)
            except (ErroConjunto, OSError) as erro:
                self._exclusao_atrasada(
                    alvo,
                    'as chaves tentadas de %s não foram anotadas' % (escopo or 'todas as empresas'),
                    erro,
                )
                continue
            self._tentadas_agora[alvo.nome].append(arquivo)

    def soltar_tentadas(self, alvo: DatasetVivo) -> None:
        """O envio em curso foi confirmado: as chaves dele estão no conjunto ou no diário."""
        for arquivo in self._tentadas_agora.pop(alvo.nome, []):
            _apagar(arquivo)

    def _por_escopo(
        self, alvo: DatasetVivo, linhas: Iterable[Mapping[str, ValorDoBanco]]
    ) -> dict[str | None, list[ValorDoBanco]]:
        """Os valores de `key` das linhas, por empresa (None: o dataset sem recorte)."""
        assert alvo.chave is not None
        por_escopo: dict[str | None, list[ValorDoBanco]] = {}
        for linha in linhas:
            valor = linha.get(alvo.chave)
            if valor is None:
                continue
            escopo = texto_escopo(linha.get(alvo.escopo)) if alvo.escopo else None
            por_escopo.setdefault(escopo, []).append(valor)
        return por_escopo

    def _exclusao_atrasada(
        self, alvo: DatasetVivo, o_que: str, erro: Exception, conserto: str | None = None
    ) -> None:
        """Um arquivo ao lado do conjunto que não se gravou: no log e na reconciliação
        do dataset (status, saúde, métricas) -- a exclusão pode chegar atrasada."""
        texto = (
            '%s (%s: %s): uma dessas chaves apagada antes da próxima leitura só sai'
            ' na varredura. %s'
            % (
                o_que,
                type(erro).__name__,
                erro,
                conserto or 'Confira o disco de %s (cheio? sem permissão?)' % self.opcoes.pasta,
            )
        )
        logger.warning('%-28s reconciliação: %s', alvo.nome, texto)
        self.estado.reconciliacao(alvo.nome).registrar_erro(
            '%s %s' % (_agora_texto(), texto), _agora_texto()
        )

    def anotar_entregues(
        self, alvo: DatasetVivo, linhas: Iterable[Mapping[str, ValorDoBanco]]
    ) -> None:
        """
        As chaves que a `coluna` entregou, no diário de cada empresa.

        Sem isto, a linha entregue pela coluna DEPOIS da última leitura do
        conjunto e apagada ANTES da próxima não estaria em conjunto nenhum: a
        diferença não a veria, e ela só sairia na varredura. A próxima
        reconciliação compara a origem com o conjunto MAIS o diário.
        """
        if alvo.chave is None or self.opcoes.seco:
            return
        identidade = self._identidade(alvo)
        for escopo, valores in self._por_escopo(alvo, linhas).items():
            arquivo = conjuntos.caminho_diario(self.opcoes.pasta, alvo.nome, escopo)
            try:
                conjuntos.anotar_diario(arquivo, identidade, escopo, valores)
            except (ErroConjunto, OSError) as erro:
                self._exclusao_atrasada(
                    alvo, 'o diário de %s não foi gravado' % (escopo or 'todas as empresas'), erro
                )
                # As chaves tentadas deste envio ficam no disco: a próxima
                # reconciliação as confere na origem no lugar do diário.
                self._tentadas_agora.pop(alvo.nome, None)

    def posicao_atual(self, alvo: DatasetVivo) -> None:  # noqa: ARG002 - o protocolo
        """Nada a saltar: o conjunto renasce pela carga (`antes_da_carga`)."""
        return None

    def saltar(self, alvo: DatasetVivo, posicao: object) -> object:  # noqa: ARG002 - o protocolo
        return posicao

    # -- cargas completas: o conjunto nasce delas ----------------------------------
    def antes_da_carga(self, alvo: DatasetVivo, escopo: str | None) -> _Antes | None:
        """
        O conjunto lido ANTES da carga (de `escopo`, ou de todas), em temporarios.

        Lido antes e não depois: o que entrou entre esta leitura e a carga volta
        na próxima reconciliacao como inclusão (reenviado: inofensivo), e o que
        saiu nesse meio-tempo volta como remoção (de algo que a carga já não
        levou: inofensivo). Lido DEPOIS, a linha que entrasse no meio nunca
        seria enviada, e a que saisse nunca seria removida. A que entrou no
        meio e sai depois, `depois_da_carga` anota.
        """
        if alvo.chave is None or self.opcoes.seco or (escopo is not None and not alvo.escopo):
            return None
        identidade = self._identidade(alvo)
        linhas = self.origem.conjunto(
            alvo.source_object, alvo.chave, alvo.escopo, escopo, **argumento(alvo.marca)
        )
        fotos: dict[str | None, _Gravacao] = {}
        try:
            for texto, chaves in _Grupos(linhas, alvo.escopo is not None):
                fotos[texto] = self._gravar(identidade, texto, chaves)
        except BaseException:
            for gravacao in fotos.values():
                gravacao.desistir()
            raise
        return _Antes(escopo, fotos)

    def depois_da_carga(
        self, alvo: DatasetVivo, antes: object, fechados: Collection[str | None]
    ) -> None:
        """As empresas que a carga fechou passam a ter o conjunto lido antes dela."""
        if not isinstance(antes, _Antes):
            return
        renascidas: list[str | None] = []
        for escopo, gravacao in antes.fotos.items():
            if escopo in fechados:
                gravacao.trocar()
                renascidas.append(escopo)
            else:
                gravacao.desistir()
        if renascidas:
            logger.info(
                '%-28s reconciliação: conjunto de chaves de %s lido antes da carga'
                ' completa (que fechou)',
                alvo.nome,
                ', '.join((e or 'todas') for e in renascidas[:10]),
            )
            self._anotar_entradas_da_carga(alvo, antes.escopo, set(renascidas))

    def _anotar_entradas_da_carga(
        self, alvo: DatasetVivo, escopo: str | None, renascidas: set[str | None]
    ) -> None:
        """
        As chaves que entraram na origem DURANTE a carga, como chaves tentadas.

        O conjunto guardado é o de antes da carga, e a carga levou o que havia
        quando leu: a linha que entrou no meio está no Contextia e fora do
        conjunto. Apagada antes da próxima reconciliação, nenhuma comparação a
        veria. A origem relida agora, contra o conjunto de antes: o que está e
        não estava vai para as chaves tentadas, que a próxima reconciliação
        confere. Sobra a linha que entrou e saiu dentro da própria carga sem a
        coluna a ver (segundos): essa sai na varredura seguinte.
        """
        assert alvo.chave is not None
        identidade = self._identidade(alvo)
        envio = 'carga-%020d-%d' % (time.time_ns(), os.getpid())
        try:
            linhas = self.origem.conjunto(
                alvo.source_object, alvo.chave, alvo.escopo, escopo, **argumento(alvo.marca)
            )
            for texto, chaves in _Grupos(linhas, alvo.escopo is not None):
                if texto not in renascidas:
                    collections.deque(chaves, maxlen=0)
                    continue
                antes = conjuntos.abrir_arquivo(
                    conjuntos.caminho(self.opcoes.pasta, alvo.nome, texto), identidade, texto
                )
                entraram = [
                    valor
                    for sinal, valor in conjuntos.comparar(antes, chaves, conjuntos.Contagem())
                    if sinal == '+'
                ]
                conjuntos.anotar_diario(
                    conjuntos.caminho_tentadas(self.opcoes.pasta, alvo.nome, texto, envio),
                    identidade,
                    texto,
                    entraram,
                )
        except Exception as erro:  # noqa: BLE001 - a carga ja fechou
            self._exclusao_atrasada(
                alvo,
                'as chaves que entraram durante a carga não foram relidas na origem',
                erro,
                'Se foi a origem (conexão caída, tempo esgotado), nada a fazer: a'
                ' próxima carga relê. Se foi o disco, confira %s (cheio? sem permissão?)'
                % self.opcoes.pasta,
            )

    # -- a comparacao -------------------------------------------------------------
    def _reconciliar(self, alvo: DatasetVivo, r: Reconciliacao) -> Leitura:
        assert alvo.chave is not None
        identidade = self._identidade(alvo)
        empresas: list[_Empresa] = []
        novas: list[tuple[str | None, _Gravacao, int]] = []
        diarios: dict[str | None, _Diario] = {}
        try:
            atuais = self._comparar_todas(alvo, identidade, empresas, novas, diarios)
        except BaseException:
            for _, gravacao, _ in novas:
                gravacao.desistir()
            raise
        self._valer_novas(alvo, novas)
        self._anotar_recusas(alvo, r, empresas)
        r.chaves, r.empresas = atuais, len(empresas) + len(novas)
        # Conjunto guardado torto (apagado em _comparar): o diario dele tambem sai.
        for empresa in empresas:
            if empresa.torto and empresa.escopo in diarios:
                _apagar(diarios.pop(empresa.escopo).arquivo)
        tentadas = self._tentadas(identidade, empresas)
        leitura = self._leitura(alvo, empresas, atuais)
        self._fechar_plano(leitura, identidade, diarios, tentadas)
        return leitura

    def _comparar_todas(
        self,
        alvo: DatasetVivo,
        identidade: Identidade,
        empresas: list[_Empresa],
        novas: list[tuple[str | None, _Gravacao, int]],
        diarios: dict[str | None, _Diario],
    ) -> int:
        """
        A leitura do conjunto na origem, empresa a empresa, contra o guardado:
        cada comparada vai a `empresas`, cada sem conjunto guardado (o inicial,
        gravado aqui) a `novas`. Devolve quantas chaves a origem tem agora.
        """
        assert alvo.chave is not None
        com_escopo = alvo.escopo is not None
        elegiveis = set(self.opcoes.escopos())
        pendentes = set(self.estado.cargas_pendentes())

        def fora(texto: str | None) -> bool:
            # Sem chave, excluida, ou com a carga inicial por fazer: fora da
            # comparacao (o conjunto dela nasce da carga).
            return com_escopo and (texto not in elegiveis or texto in pendentes)

        guardados = {
            e: a
            for e, a in conjuntos.existentes(self.opcoes.pasta, alvo.nome).items()
            if (e is not None) == com_escopo
        }
        vagas = [self.maximo, self.maximo]  # remocoes, inclusoes nesta vez
        atuais = 0
        # A linha marcada como apagada (deleted_when) fica fora do conjunto: a
        # chave dela sumiu, e a diferença a remove.
        linhas = self.origem.conjunto(
            alvo.source_object, alvo.chave, alvo.escopo, **argumento(alvo.marca)
        )
        for texto, chaves in _Grupos(linhas, com_escopo):
            if fora(texto):
                # A ordem se confere mesmo assim.
                collections.deque(
                    conjuntos.em_ordem(chaves, 'a origem', juntar_iguais=True), maxlen=0
                )
                continue
            arquivo = guardados.pop(texto, None)
            anteriores = self._anteriores(identidade, texto, arquivo, diarios)
            if anteriores is None:
                gravacao = self._gravar(identidade, texto, chaves)
                novas.append((texto, gravacao, gravacao.quantas))
                atuais += gravacao.quantas
                continue
            empresa = self._comparar(alvo, texto, anteriores, chaves, vagas)
            atuais += empresa.atuais
            empresas.append(empresa)
        # Empresa com conjunto guardado que sumiu inteira da leitura: tudo saiu.
        for texto, arquivo in sorted(guardados.items(), key=lambda item: item[0] or ''):
            anteriores = (
                None if fora(texto) else self._anteriores(identidade, texto, arquivo, diarios)
            )
            if anteriores is not None:
                empresas.append(self._comparar(alvo, texto, anteriores, iter(()), vagas))
        return atuais

    def _valer_novas(
        self, alvo: DatasetVivo, novas: list[tuple[str | None, _Gravacao, int]]
    ) -> None:
        """
        A leitura foi ate o fim e em ordem: os conjuntos novos valem. O diario de
        uma empresa que recomeca da origem sai: o conjunto de agora ja tem as
        chaves vivas dele (e o que saiu antes disto sai na varredura).
        """
        for texto, gravacao, quantas in novas:
            gravacao.trocar()
            if not self.opcoes.seco:
                tomado = conjuntos.tomar_diario(self.opcoes.pasta, alvo.nome, texto)
                if tomado:
                    _apagar(tomado)
            logger.info(
                '%-28s reconciliação: conjunto inicial de %s com %s chave(s) -- nada'
                ' removido (o que saiu antes disto sai na varredura)',
                alvo.nome,
                texto or 'todas as empresas',
                quantas,
            )

    def _fechar_plano(
        self,
        leitura: Leitura,
        identidade: Identidade,
        diarios: dict[str | None, _Diario],
        tentadas: list[str],
    ) -> None:
        """Os diarios e as tentadas vao com o plano ao `confirmar`; sem mudanca, somam ja."""
        plano = leitura.privado
        assert isinstance(plano, _Plano)
        if leitura.situacao is Situacao.NADA:
            # Sem `confirmar` a seguir: o conjunto soma o diario agora, e as chaves
            # tentadas, todas ainda na origem, ja nao tem o que dizer.
            for escopo, diario in diarios.items():
                self._somar_diario(identidade, escopo, diario)
            if not self.opcoes.seco:
                for arquivo in tentadas:
                    _apagar(arquivo)
        else:
            plano.diarios = diarios
            plano.tentadas = tentadas

    def _tentadas(self, identidade: Identidade, empresas: list[_Empresa]) -> list[str]:
        """
        As chaves de envios não confirmados de cada empresa comparada (em
        `empresa.tentadas`); devolve os arquivos lidos. A empresa recusada pelo
        teto ou de conjunto torto fica com os dela para a próxima vez.
        """
        arquivos: list[str] = []
        por_escopo = conjuntos.tentadas(self.opcoes.pasta, identidade.dataset)
        for empresa in empresas:
            if empresa.recusa or empresa.torto:
                continue
            for arquivo in por_escopo.get(empresa.escopo, ()):
                # De outra identidade (a `key` ou a view mudaram): [] e o arquivo sai.
                empresa.tentadas.extend(conjuntos.ler_diario(arquivo, identidade, empresa.escopo))
                arquivos.append(arquivo)
        return arquivos

    def _anteriores(
        self,
        identidade: Identidade,
        escopo: str | None,
        arquivo: str | None,
        diarios: dict[str | None, _Diario],
    ) -> Iterator[ValorDoBanco] | None:
        """
        O conjunto entregue desta empresa -- o guardado mais o diário da coluna --
        ou None (nenhum, ou de outra identidade).
        """
        if arquivo is None:
            return None
        try:
            guardadas = conjuntos.abrir_arquivo(arquivo, identidade, escopo)
        except (ErroConjunto, OSError, UnicodeDecodeError) as erro:
            logger.warning(
                '%-28s reconciliação: o conjunto guardado de %s não serve (%s):'
                ' recomeçado da origem de agora, sem remover nada',
                identidade.dataset,
                escopo or 'todas as empresas',
                erro,
            )
            return None
        if self.opcoes.seco:
            # O seco nao mexe no disco: le o diario sem toma-lo.
            chaves = conjuntos.ler_diario(
                conjuntos.caminho_diario(self.opcoes.pasta, identidade.dataset, escopo),
                identidade,
                escopo,
            )
            return conjuntos.juntar(guardadas, chaves)
        tomado = conjuntos.tomar_diario(self.opcoes.pasta, identidade.dataset, escopo)
        if tomado is None:
            return guardadas
        diario = _Diario(tomado, conjuntos.ler_diario(tomado, identidade, escopo), [0])
        diarios[escopo] = diario
        return conjuntos.juntar(guardadas, diario.chaves, diario.so_nele)

    def _gravar(
        self, identidade: Identidade, escopo: str | None, chaves: Iterable[ValorDoBanco]
    ) -> _Gravacao:
        """O conjunto lido agora num temporário (conferida a ordem), para `trocar` depois."""
        arquivo = conjuntos.caminho(self.opcoes.pasta, identidade.dataset, escopo)
        gravacao = _Gravacao(arquivo, self.opcoes.seco)
        try:
            for texto in conjuntos.linhas_do_arquivo(
                conjuntos.em_ordem(chaves, 'a origem', juntar_iguais=True),
                identidade.cabecalho(escopo),
            ):
                gravacao.escrever(texto)
            gravacao.fechar()
        except BaseException:
            gravacao.desistir()
            raise
        return gravacao

    def _comparar(
        self,
        alvo: DatasetVivo,
        escopo: str | None,
        anteriores: Iterator[ValorDoBanco],
        chaves: Iterator[ValorDoBanco],
        vagas: list[int],
    ) -> _Empresa:
        """A diferença de uma empresa, guardando só o que cabe nas `vagas` desta vez."""
        empresa = _Empresa(escopo)
        contagem = conjuntos.Contagem()
        try:
            for sinal, valor in conjuntos.comparar(anteriores, chaves, contagem):
                if sinal == '-':
                    empresa.removidas_total += 1
                    if vagas[0] > 0:
                        empresa.removidas.append(valor)
                        vagas[0] -= 1
                else:
                    empresa.incluidas_total += 1
                    if vagas[1] > 0:
                        empresa.incluidas.append(valor)
                        vagas[1] -= 1
        except ErroConjuntoGuardado as erro:
            # O arquivo e nosso: torto, ele e largado e a empresa recomeca da origem na
            # proxima vez, sem remover nada (o que a comparacao viu ate aqui nao vale).
            logger.warning(
                '%-28s reconciliação: o conjunto guardado de %s está torto (%s):'
                ' apagado; a próxima reconciliação recomeça da origem, sem remover'
                ' nada',
                alvo.nome,
                escopo or 'todas as empresas',
                erro,
            )
            collections.deque(chaves, maxlen=0)
            vagas[0] += len(empresa.removidas)
            vagas[1] += len(empresa.incluidas)
            _apagar(conjuntos.caminho(self.opcoes.pasta, alvo.nome, escopo))
            return _Empresa(escopo, torto=True)
        empresa.anteriores, empresa.atuais = contagem.anteriores, contagem.atuais
        teto = self.opcoes.max_remocao
        if empresa.anteriores and empresa.removidas_total > teto * empresa.anteriores:
            empresa.recusa = (
                'a reconciliação removeria %d de %d chave(s) de %s (%.1f%%), acima do teto de'
                ' %.0f%% (o mesmo do complete da varredura): NADA removido'
                % (
                    empresa.removidas_total,
                    empresa.anteriores,
                    'empresa %s' % escopo if escopo is not None else 'todas as empresas',
                    100.0 * empresa.removidas_total / empresa.anteriores,
                    100.0 * teto,
                )
            )
            vagas[0] += len(empresa.removidas)
            empresa.removidas = []
        return empresa

    def _anotar_recusas(
        self, alvo: DatasetVivo, r: Reconciliacao, empresas: list[_Empresa]
    ) -> None:
        """A recusa do teto: alta no log (quando muda), no status, na saúde e nas métricas."""
        recusas = [e.recusa for e in empresas if e.recusa]
        if not recusas:
            if r.recusa:
                logger.warning(
                    '%-28s reconciliação: a recusa do teto acabou (a origem voltou'
                    ' a ter as chaves, ou o conjunto recomeçou)',
                    alvo.nome,
                )
            r.recusa = r.recusa_desde = None
            return
        texto = '; '.join(recusas[:3]) + (
            '; (+%d)' % (len(recusas) - 3) if len(recusas) > 3 else ''
        )
        arquivo = conjuntos.pasta_do_dataset(self.opcoes.pasta, alvo.nome)
        mensagem = (
            '%s reconciliação RECUSADA: %s. Uma view que de repente volta vazia ou com uma'
            ' fração das linhas é GRANT revogado, filtro mudado ou manutenção no ERP, não'
            ' exclusão. Confira a view; se a exclusão é de verdade, rode a carga completa da'
            ' empresa com o teto que você aceita (connector.py --scope=<empresa>'
            ' --max-remocao 1) e apague o conjunto dela em %s: a próxima reconciliação'
            ' recomeça da origem de agora.' % (alvo.nome, texto, arquivo)
        )
        if texto != r.recusa:
            logger.error('%s', mensagem)
        else:
            logger.warning(
                '%-28s reconciliação ainda RECUSADA pelo teto (desde %s): %s',
                alvo.nome,
                r.recusa_desde,
                texto,
            )
        r.recusa = texto
        r.recusa_desde = r.recusa_desde or _agora_texto()

    def _leitura(self, alvo: DatasetVivo, empresas: list[_Empresa], atuais: int) -> Leitura:
        """Remoções conferidas de novo na origem e inclusões lidas inteiras: a Leitura."""
        assert alvo.chave is not None
        candidatas = [(e.escopo, v) for e in empresas for v in e.removidas]
        # As chaves de envios não confirmados: só as que a origem já não tem saem.
        ja = {(escopo, conjuntos.codificar(v)) for escopo, v in candidatas}
        tentadas = {
            (e.escopo, conjuntos.codificar(v)): (e.escopo, v) for e in empresas for v in e.tentadas
        }
        tentadas = {par: item for par, item in tentadas.items() if par not in ja}
        presentes = self._ainda_na_origem(
            alvo, [v for _, v in candidatas] + [v for _, v in tentadas.values()]
        )
        remocoes: dict[str | None, list[ValorDoBanco]] = {}
        voltaram = 0
        for escopo, valor in candidatas:
            if (escopo, conjuntos.codificar(valor)) in presentes:
                voltaram += 1
                continue
            remocoes.setdefault(escopo, []).append(valor)
        if voltaram:
            logger.info(
                '%-28s reconciliação: %s chave(s) sumidas na leitura estavam de volta'
                ' na origem ao conferir: NÃO removidas',
                alvo.nome,
                voltaram,
            )
        sumidas = [item for par, item in tentadas.items() if par not in presentes]
        for escopo, valor in sumidas:
            remocoes.setdefault(escopo, []).append(valor)
        if sumidas:
            logger.info(
                '%-28s reconciliação: %s chave(s) tentadas (de um envio não confirmado,'
                ' ou que entraram durante uma carga) já não estão na origem: removidas'
                ' também',
                alvo.nome,
                len(sumidas),
            )
        pedidas = {(e.escopo, conjuntos.codificar(v)): v for e in empresas for v in e.incluidas}
        linhas, entregues = self._inteiras(alvo, pedidas)
        vistas = sum(e.removidas_total for e in empresas if not e.recusa)
        vao = sum(len(v) for v in remocoes.values())
        incluidas = sum(e.incluidas_total for e in empresas)
        if vistas > vao - len(sumidas) + voltaram or incluidas > len(pedidas):
            logger.warning(
                '%-28s reconciliação: %s exclusão(ões) e %s inclusão(ões); vão agora'
                ' %s e %s (teto --maximo-por-ciclo %s), o resto na próxima',
                alvo.nome,
                vistas,
                incluidas,
                vao - len(sumidas),
                len(pedidas),
                self.maximo,
            )
        if vao or linhas:
            logger.info(
                '%-28s reconciliação: %s chave(s) a remover, %s linha(s) nova(s) a'
                ' enviar (%s chave(s) na origem)',
                alvo.nome,
                vao,
                len(linhas),
                atuais,
            )
        plano = _Plano(incluidas=entregues, com_remocoes=bool(vao))
        situacao = Situacao.MUDANCAS if (vao or linhas) else Situacao.NADA
        return Leitura(
            situacao,
            upserts=linhas,
            remocoes=remocoes.pop(None, []) if alvo.escopo is None else [],
            remocoes_por_escopo={e: v for e, v in remocoes.items() if e is not None},
            quantos=vao + len(linhas),
            privado=plano,
        )

    def _por_chave(
        self, alvo: DatasetVivo, colunas: list[str], valores: list[ValorDoBanco]
    ) -> Iterator[Linha]:
        """As linhas com essas chaves (`key IN`, em lotes de CHAVES_POR_LEITURA)."""
        assert alvo.chave is not None
        passo = padroes.CHAVES_POR_LEITURA
        for inicio in range(0, len(valores), passo):
            yield from self.origem.fetch(
                alvo.source_object,
                colunas,
                chaves=(alvo.chave, valores[inicio : inicio + passo]),
                **argumento(alvo.marca),  # a marcada não está "ainda na origem"
            )

    def _ainda_na_origem(
        self, alvo: DatasetVivo, valores: list[ValorDoBanco]
    ) -> set[tuple[str | None, str]]:
        """(empresa, chave codificada) das chaves a remover que a origem ainda tem."""
        assert alvo.chave is not None
        if not valores:
            return set()
        colunas = [alvo.chave] + (
            [alvo.escopo] if alvo.escopo and alvo.escopo != alvo.chave else []
        )
        return {
            (
                texto_escopo(linha.get(alvo.escopo)) if alvo.escopo else None,
                conjuntos.codificar(linha[alvo.chave]),
            )
            for linha in self._por_chave(alvo, colunas, valores)
        }

    def _inteiras(
        self, alvo: DatasetVivo, pedidas: dict[tuple[str | None, str], ValorDoBanco]
    ) -> tuple[list[Linha], dict[str | None, list[ValorDoBanco]]]:
        """As linhas inteiras das chaves que entraram, e o que será dado por entregue."""
        assert alvo.chave is not None
        linhas: list[Linha] = []
        entregues: dict[str | None, list[ValorDoBanco]] = {}
        if not pedidas:
            return linhas, entregues
        valores = list({codigo: v for (_, codigo), v in pedidas.items()}.values())
        for linha in self._por_chave(alvo, alvo.colunas, valores):
            par = (
                texto_escopo(linha.get(alvo.escopo)) if alvo.escopo else None,
                conjuntos.codificar(linha[alvo.chave]),
            )
            if par in pedidas:
                # Linha que mudou de empresa entre as duas leituras nao e dada por
                # entregue na empresa pedida: a proxima reconciliacao acerta.
                linhas.append(linha)
                entregues.setdefault(par[0], []).append(pedidas[par])
        return linhas, entregues

    def _somar_diario(self, identidade: Identidade, escopo: str | None, diario: _Diario) -> None:
        """O conjunto no disco passa a ter as chaves do diário (regravado só se faltava alguma)."""
        if not diario.so_nele[0] or self._regravar(identidade, escopo, [], [], diario):
            _apagar(diario.arquivo)

    def _regravar(
        self,
        identidade: Identidade,
        escopo: str | None,
        entram: list[ValorDoBanco],
        saem: list[ValorDoBanco],
        diario: _Diario | None = None,
    ) -> bool:
        """
        O conjunto entregue novo desta empresa no disco (o guardado, mais o diário,
        menos `saem`, mais `entram`); False se não deu (fica o velho, e o diário).
        """
        arquivo = conjuntos.caminho(self.opcoes.pasta, identidade.dataset, escopo)
        try:
            anteriores: Iterable[ValorDoBanco] = conjuntos.abrir_arquivo(
                arquivo, identidade, escopo
            )
            if diario is not None:
                anteriores = conjuntos.juntar(anteriores, diario.chaves)
            gravacao = _Gravacao(arquivo, self.opcoes.seco)
            try:
                for texto in conjuntos.linhas_do_arquivo(
                    conjuntos.aplicar(anteriores, entram, saem), identidade.cabecalho(escopo)
                ):
                    gravacao.escrever(texto)
            except BaseException:
                gravacao.desistir()
                raise
            gravacao.trocar()
            if diario is not None:
                _apagar(diario.arquivo)
        except (ErroConjunto, OSError, UnicodeDecodeError) as erro:
            # Fica o conjunto velho: a proxima reconciliacao ve as mesmas diferencas de
            # novo e as reenvia (remover o ja removido, reenviar o ja enviado: inofensivo).
            logger.warning(
                '%-28s reconciliação: o conjunto de %s não foi regravado (%s): a'
                ' próxima reconciliação repete o envio',
                identidade.dataset,
                escopo or 'todas as empresas',
                erro,
            )
            return False
        return True


class _Gravacao:
    """Uma GravacaoAtomica que conta as chaves -- e que, no seco, não grava nada."""

    def __init__(self, caminho: str, seco: bool) -> None:
        self.quantas = 0
        self._real: GravacaoAtomica | None = None
        if not seco:
            os.makedirs(os.path.dirname(caminho), exist_ok=True)
            self._real = GravacaoAtomica(caminho)

    def escrever(self, texto: str) -> None:
        if not texto.startswith('#'):  # o cabecalho e a linha de fim nao contam
            self.quantas += 1
        if self._real is not None:
            self._real.escrever(texto)

    def fechar(self) -> None:
        if self._real is not None:
            self._real.fechar()

    def trocar(self) -> None:
        if self._real is not None:
            self._real.trocar()

    def desistir(self) -> None:
        if self._real is not None:
            self._real.desistir()


def _limpar_temporarios(pasta: str) -> None:
    """
    Os temporarios de um ouvinte morto no meio de uma gravação (kill -9): o
    conjunto de verdade e o arquivo ao lado, inteiro; o temporário e lixo.
    """
    try:
        datasets = os.listdir(pasta)
    except OSError:
        return
    for dataset in datasets:
        try:
            nomes = os.listdir(os.path.join(pasta, dataset))
        except OSError:
            continue
        for nome in nomes:
            if nome.startswith('.') and nome.endswith('.tmp'):
                _apagar(os.path.join(pasta, dataset, nome))


def _apagar(arquivo: str) -> None:
    try:
        os.unlink(arquivo)
    except OSError:
        pass
