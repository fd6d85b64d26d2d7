"""
A estrategia `coluna`: uma SONDA CURTA numa coluna de mudanca da propria view.

    SELECT COUNT(*) FROM <view> WHERE <coluna> > <marca - folga>

com a credencial de leitura que ja usamos, em qualquer banco, sem pedir nada ao
DBA. A posicao e a marca de agua do dataset; as regras dela (quando fixar,
quanto recuar, quando avancar, ate onde o relogio da origem deixa ir) sao as
funcoes puras de marca_agua.py -- aqui so se le a origem e se guarda o que elas
decidem. Exclusao (DELETE) NAO e vista: sai do Contextia so na varredura. A
linha que o ERP apaga MARCANDO (`deleted_when`, origem/marca_apagada.py) e vista:
a marca muda a coluna de mudanca, a janela a traz, e ela sai como remocao da
empresa dela -- nunca como upsert; a viva de mesma chave vence (`_separar_apagadas`).

A janela da folga e relida de proposito a cada ciclo, e numa tabela cujas
linhas dividem um carimbo (migracao do ERP, Sakila) ela tem milhares de linhas
que nao mudaram. Por isso o que ja foi ENTREGUE fica lembrado (a janela
entregue: a identidade chave + valor de mudanca de cada linha, num SQLite por
dataset, estado/janela.py, sem teto), a releitura custa a origem uma leitura
ESTREITA (chave + coluna de mudanca), lida em fluxo e conferida em lotes contra
o que ja foi entregue, e so o que ainda nao foi entregue e lido inteiro,
enviado e contado no teto por ciclo. Ciclo ocioso: zero registros enviados. A
memoria nao depende do tamanho da janela: uma hora cheia (centenas de milhares
de mudancas numa folga) continua ao vivo.

Tambem mede as CHEGADAS ATRASADAS (linhas lidas pela primeira vez abaixo da
marca anterior: so vieram por causa da folga), que o status mostra.
"""

from __future__ import annotations

import datetime
import itertools
import time
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from contextia_sync.origem import AdaptadorDeOrigem
from contextia_sync import padroes
from contextia_sync.captura import DatasetVivo, Leitura, Situacao, marca_agua
from contextia_sync.captura.indice_entregas import resumo_da_linha
from contextia_sync.erros import ErroConfiguracao
from contextia_sync.origem import FUNCOES_COLUNA, ErroAdaptador, faltando
from contextia_sync.origem.marca_apagada import argumento, identidade
from contextia_sync.estado.estado import Estado, Vistos
from contextia_sync.estado.janela import JanelaEntregue
from contextia_sync.registro import logger

if TYPE_CHECKING:  # so a anotacao: o topo fica puro (autoteste)
    from contextia_sync.estado.estado import MarcaTexto
    from contextia_sync.tipos import Linha, ValorDoBanco

# O relogio da origem e lido uma vez por ciclo, nao uma por dataset.
_VALIDADE_RELOGIO = 5.0
# As linhas da janela conferidas de uma vez contra o que ja foi entregue.
_LOTE_DA_JANELA = 2000
# A releitura da janela atras da marca ocupa no maximo 1/N do tempo (_releitura_vencida).
_CUSTO_DA_RELEITURA = 4
# Depois disto (s) o segundo do carimbo de uma linha lida ja fechou: a releitura
# ve a ultima versao dela (_Entrega).
_SEGUNDO_FECHADO = 1.5
# As keys nulas ja ditas nesta subida (so para nao repetir o aviso): teto da memoria.
_MAXIMO_NULAS_DITAS = 50000
# Tipos aceitos como coluna de mudanca. Texto compara como texto
# ('31/12/2026' > '01/01/2027'): a marca pararia em silencio.
_FAMILIAS_ACEITAS = ('datetime', 'date', 'numerico')


class ErroColunaDeMudanca(ErroConfiguracao):
    """A coluna de mudança de um dataset não tem um tipo que se compare como mudança."""


def _agora_texto() -> str:
    return datetime.datetime.now().strftime('%Y-%m-%d %H:%M:%S')


@dataclass
class _JanelaLida:
    """A janela de um ciclo: o que falta entregar, as do futuro e a marca que ela dá."""

    posicao: ValorDoBanco
    pendentes: dict[str, Linha] = field(default_factory=dict)
    alem_do_teto: int = 0  # pendentes só contadas: passou do teto, o ciclo não as lê
    futuras: int = 0
    subsegundo: bool = False  # algum carimbo com fração de segundo

    def pendente(self, ident: str, linha: Linha, maximo: int) -> None:
        if ident in self.pendentes or len(self.pendentes) <= maximo:
            self.pendentes[ident] = linha
        else:
            self.alem_do_teto += 1


@dataclass(frozen=True)
class _Entrega:
    """
    O que uma leitura entrega, para o `confirmar` lembrar.

    Num carimbo sem fração de segundo (o DATETIME do MariaDB, o DATE do Oracle)
    a mesma linha mudada duas vezes no mesmo segundo tem a mesma identidade
    (chave + carimbo) nas duas versões: lembrada a primeira, a segunda nunca iria
    ao vivo. Então a linha lida com o segundo do carimbo talvez ainda aberto (a
    um segundo da maior da leitura) fica PROVISÓRIA, com o resumo do conteúdo
    entregue (na janela entregue, em disco): relida inteira depois de o segundo
    fechar (`_SEGUNDO_FECHADO`), vai de novo só se o conteúdo mudou, e aí é
    lembrada. Só enquanto a coluna não mostrou nenhuma fração de segundo.
    """

    firmes: Vistos
    provisorias: list[tuple[str, MarcaTexto, str]]  # (identidade, carimbo, resumo)
    lida_em: float  # hora do relógio (time.time())


class CapturaColuna:
    """`coluna`: a posição de cada dataset e a sua marca de água, no estado."""

    nome = 'coluna'

    def __init__(
        self,
        origem: AdaptadorDeOrigem,
        estado: Estado,
        folga: int,
        maximo: int,
        tolerancia: float = padroes.TOLERANCIA_FUTURO,
    ) -> None:
        faltam = faltando(origem, FUNCOES_COLUNA)
        if faltam:
            raise ErroAdaptador(
                'o adaptador de origem (%s) não expõe %s, que a estratégia `coluna` precisa:'
                ' a hora da origem (a marca nunca passa dela), o tipo da coluna de mudança'
                ' no catálogo e a contagem das linhas sem carimbo. Use --source=generic ou'
                ' acrescente essas funções ao adaptador (docs/origem.md).'
                % (getattr(origem, '__name__', '?'), ', '.join('`%s`' % f for f in faltam))
            )
        self.origem = origem
        self.estado = estado
        self.folga = folga
        self.maximo = maximo
        self.tolerancia = tolerancia
        self._familias: dict[str, str] = {}
        self._relogio: tuple[float, datetime.datetime | None, float] | None = None
        # Lidas e contadas como atrasadas nesta subida, mas ainda nao entregues: um
        # envio que falhou e relido nao conta a mesma linha duas vezes.
        self._contadas: dict[str, set[str]] = {}
        # Os datasets cuja coluna de mudança já mostrou fração de segundo.
        self._subsegundo: set[str] = set()
        # A última releitura da janela atrás da marca, por dataset: (quando acabou,
        # quanto levou), no relógio monotônico (_releitura_vencida).
        self._relida: dict[str, tuple[float, float]] = {}
        # As linhas de key nula da janela ja ditas nesta subida (identidades): a
        # janela as relê a cada ciclo, e o aviso sai uma vez por linha.
        self._nulas: dict[str, set[str]] = {}

    def _watch(self, alvo: DatasetVivo) -> str:
        if not alvo.watch:
            raise ValueError('dataset %s sem coluna de mudança na estratégia coluna' % alvo.nome)
        return alvo.watch

    # -- o que a origem precisa ter -------------------------------------------------
    def conferir(self, alvos: list[DatasetVivo]) -> list[str]:
        """Problemas de cada dataset (tipo da coluna de mudança); conta as sem carimbo."""
        problemas = []
        for alvo in alvos:
            try:
                self._conferir(alvo)
            except ErroColunaDeMudanca as erro:
                problemas.append(str(erro))
        return problemas

    def _conferir(self, alvo: DatasetVivo) -> str:
        """A família do tipo da coluna de mudança (uma vez por subida), ou recusa."""
        conhecida = self._familias.get(alvo.nome)
        if conhecida is not None:
            return conhecida
        watch = self._watch(alvo)
        familia: str = self.origem.tipo_coluna(alvo.source_object, watch)
        if familia not in _FAMILIAS_ACEITAS and familia != 'desconhecido':
            raise ErroColunaDeMudanca(
                'dataset %s: a coluna de mudança %s de %s é do tipo %s no catálogo da origem,'
                ' e só data/hora, data ou número servem -- texto compara como texto'
                " ('31/12/2026' > '01/01/2027') e a marca de água pararia em silêncio."
                ' Correção: uma view com CAST (ex.: CAST(%s AS TIMESTAMP), ou'
                " TO_TIMESTAMP(%s, 'DD/MM/YYYY HH24:MI:SS') no Oracle/PostgreSQL) e"
                ' `watch_column` apontando para a coluna convertida; ou `watch_column: null`'
                ' (o dataset sai do ao-vivo e fica só na varredura).'
                % (alvo.nome, watch, alvo.source_object, familia, watch, watch)
            )
        if familia == 'desconhecido':
            logger.warning(
                '%-28s o catálogo não diz o tipo de %s: confira que é data/hora ou'
                ' número (texto pararia a marca)',
                alvo.nome,
                watch,
            )
        self._familias[alvo.nome] = familia
        self._contar_sem_carimbo(alvo)
        self._contar_chaves(alvo)
        self._puxar_marca_do_futuro(alvo)
        return familia

    def _contar_sem_carimbo(self, alvo: DatasetVivo) -> None:
        sem = self.origem.contar_sem_valor(alvo.source_object, self._watch(alvo))
        self.estado.acompanhamento(alvo.nome).sem_carimbo = sem
        if sem:
            logger.warning(
                '%-28s %s linha(s) sem carimbo (%s nula): a sonda não as vê, só a'
                ' varredura as leva',
                alvo.nome,
                sem,
                self._watch(alvo),
            )

    def _contar_chaves(self, alvo: DatasetVivo, avisar: bool = True) -> None:
        """
        As keys nulas e as repetidas da view inteira, no status (e no log): na
        subida, depois da varredura e quando um ciclo acha uma key nula nova.
        A regra de cada uma: intake/chaves.py.
        """
        from contextia_sync.intake.chaves import (
            LIMITE_REPETIDAS,
            Repetida,
            aviso_das_nulas,
            textos_repetidas,
        )

        if not alvo.chave:
            return
        acomp = self.estado.acompanhamento(alvo.nome)
        nulas = int(self.origem.contar_sem_valor(alvo.source_object, alvo.chave))
        acomp.chaves_nulas = nulas
        textos = [aviso_das_nulas(nulas, alvo.nome)] if nulas else []
        perguntar = getattr(self.origem, 'chaves_repetidas', None)
        if callable(perguntar):
            try:
                pares = perguntar(
                    alvo.source_object,
                    alvo.chave,
                    alvo.escopo,
                    None,
                    limite=LIMITE_REPETIDAS + 1,
                    **argumento(alvo.marca),
                )
            except Exception as erro:  # noqa: BLE001 - a contagem não para o ouvinte
                logger.warning(
                    '%-28s a origem não disse as keys repetidas (%s: %s): o status não as'
                    ' mostra até a próxima contagem',
                    alvo.nome,
                    type(erro).__name__,
                    erro,
                )
                pares = []
            repetidas = [
                Repetida.do_par(alvo.nome, menor, maior, valor, linhas, alvo.escopo is None)
                for menor, maior, valor, linhas in pares
            ]
            acomp.chaves_repetidas = textos_repetidas(repetidas) or None
            textos += acomp.chaves_repetidas or []
        for texto in textos if avisar else ():
            logger.warning('%-28s %s', alvo.nome, texto)

    def _tirar_nulas(self, alvo: DatasetVivo, pendentes: dict[str, Linha]) -> None:
        """
        A linha da janela com a key nula não tem como ser lida inteira (`key IN`)
        nem entregue (o intake a recusa): sai das pendentes, e a nova é dita --
        no log e, recontada a view, no status. A varredura também a deixa de fora.
        """
        from contextia_sync.intake.chaves import aviso_das_nulas

        chave = alvo.chave
        nulas = [i for i, linha in pendentes.items() if chave and linha.get(chave) is None]
        if not nulas:
            return
        for ident in nulas:
            del pendentes[ident]
        ditas = self._nulas.setdefault(alvo.nome, set())
        if len(ditas) > _MAXIMO_NULAS_DITAS:
            ditas.clear()
        novas = [ident for ident in nulas if ident not in ditas]
        if novas:
            ditas.update(novas)
            logger.warning('%-28s %s', alvo.nome, aviso_das_nulas(len(novas), alvo.nome))
            self._contar_chaves(alvo, avisar=False)

    def _puxar_marca_do_futuro(self, alvo: DatasetVivo) -> None:
        marca = self.estado.marca(alvo.nome)
        limite = self._limite(alvo)
        nova = marca_agua.marca_limitada(marca, limite)
        agora = self._agora()
        if nova is not marca and agora is not None:
            logger.warning(
                '%-28s a marca de água do estado (%s) está no FUTURO da origem'
                ' (agora %s): puxada de volta para a hora da origem. Sem isto'
                ' nenhuma mudança seria vista até la.',
                alvo.nome,
                marca,
                agora.isoformat(' '),
            )
            self.estado.definir_marca(
                alvo.nome, agora if self._familia(alvo) == 'datetime' else agora.date()
            )

    # -- o relogio da origem ------------------------------------------------------
    def _ler_relogio(self) -> tuple[datetime.datetime | None, float]:
        """(a hora da origem, quanto ela voltou desde o maior já visto) -- por ciclo."""
        if self._relogio is not None and time.monotonic() - self._relogio[0] < _VALIDADE_RELOGIO:
            return self._relogio[1], self._relogio[2]
        relogio = self.origem.agora()
        visto = self.estado.relogio_visto()
        recuo = 0.0
        if visto is not None:
            recuo = max(
                marca_agua.recuo_do_relogio(visto[0], relogio.utc),
                marca_agua.recuo_do_relogio(visto[1], relogio.local),
            )
        if recuo:
            ja = self._relogio[2] if self._relogio else 0.0
            if recuo > ja + 1:
                logger.warning(
                    'relógio da ORIGEM voltou %ss (agora %s; já tinha visto %s):'
                    ' fim do horário de verao num carimbo sem fuso, ou o relógio'
                    ' do banco acertado para trás. A leitura recua a folga MAIS'
                    ' esse tanto até o relógio passar do que já tinha visto.',
                    int(recuo),
                    relogio.local.isoformat(' '),
                    visto[1].isoformat(' ') if visto else '?',
                )
        else:
            utc = max(relogio.utc, visto[0]) if visto else relogio.utc
            local = max(relogio.local, visto[1]) if visto else relogio.local
            self.estado.definir_relogio_visto(utc, local)
        self._relogio = (time.monotonic(), relogio.maior, recuo)
        return relogio.maior, recuo

    def _agora(self) -> datetime.datetime | None:
        return self._ler_relogio()[0]

    def _familia(self, alvo: DatasetVivo) -> str:
        return self._familias.get(alvo.nome) or self._conferir(alvo)

    def _limite(self, alvo: DatasetVivo) -> datetime.date | None:
        return marca_agua.limite_do_relogio(self._agora(), self._familia(alvo), self.tolerancia)

    # -- a marca posta a mao (estado.py marcar) ----------------------------------
    def familia(self, alvo: DatasetVivo) -> str:
        """A família do tipo da coluna de mudança; texto e recusado como na subida."""
        return self._familia(alvo)

    def limite(self, alvo: DatasetVivo) -> datetime.date | None:
        """Até onde a marca pode ir agora (hora da origem mais a tolerância); None = sem limite."""
        return self._limite(alvo)

    def marca_do_maximo(self, alvo: DatasetVivo, maximo: ValorDoBanco) -> ValorDoBanco:
        """A marca que parte do MAX da origem: nunca além da hora da origem agora."""
        return marca_agua.marca_do_maximo(maximo, self._agora(), self._familia(alvo))

    def entregue_ate(self, alvo: DatasetVivo, marca: ValorDoBanco) -> Vistos:
        """
        A janela da folga de `marca` dada por entregue, só até `marca`.

        Com isto a marca posta a mão quer dizer uma coisa só: o que tem carimbo
        até ela conta como entregue e o que tem carimbo depois dela o próximo
        ciclo entrega -- sem reenviar a janela nem conta-la como chegada
        atrasada. As linhas de depois ficam de fora de propósito (inclusive a
        que comitou entre a leitura do MAX e está).
        """
        return dict(self._identidades_da_janela(alvo, marca, ate=marca))

    # -- Captura ----------------------------------------------------------------
    def ler(self, alvo: DatasetVivo) -> Leitura:
        watch = self._watch(alvo)
        self._conferir(alvo)
        acomp = self.estado.acompanhamento(alvo.nome)
        marca = self.estado.marca(alvo.nome)
        limite = self._limite(alvo)
        recuo = self._ler_relogio()[1]

        if marca_agua.primeira_vez(marca, acomp.vazia_no_inicio):
            return self._primeira_vez(alvo)

        agora = self._agora()
        marca_valor = marca_agua.comparavel(marca)
        acomp.atraso_origem_s = (
            round((agora - marca_valor.replace(tzinfo=None)).total_seconds(), 1)
            if agora is not None and isinstance(marca_valor, datetime.datetime)
            else None
        )
        reler = recuo > 0 or self._releitura_vencida(alvo.nome, acomp.atraso_origem_s)
        desde = (
            marca_agua.desde(marca, self.folga + recuo) if reler else marca_agua.como_valor(marca)
        )
        filtro = (watch, desde) if desde is not None else None
        antes_futuras = acomp.futuras
        lembrada = self.estado.janela(alvo.nome)
        comeco, lida_em = time.monotonic(), time.time()
        lida = self._ler_janela(alvo, filtro, marca, limite, lembrada)
        if reler:
            self._relida[alvo.nome] = (time.monotonic(), time.monotonic() - comeco)
        if lida.subsegundo:
            self._subsegundo.add(alvo.nome)
        acomp.futuras, posicao, pendentes = lida.futuras, lida.posicao, lida.pendentes
        if acomp.futuras and acomp.futuras != antes_futuras:
            # Dito quando o numero muda, nao a cada ciclo: o status mostra sempre.
            logger.warning(
                '%-28s %s linha(s) com carimbo no FUTURO da origem (além de %s):'
                ' entregues, mas não sobem a marca. Corrija o carimbo no ERP.',
                alvo.nome,
                acomp.futuras,
                limite,
            )
        self._tirar_nulas(alvo, pendentes)
        if not pendentes and not lida.alem_do_teto:
            # Tudo na janela ja foi entregue com este mesmo valor de mudanca.
            return Leitura(Situacao.NADA, posicao=posicao)
        if marca_agua.passa_do_teto(len(pendentes) + lida.alem_do_teto, self.maximo):
            return Leitura(Situacao.GRANDE, quantos=len(pendentes) + lida.alem_do_teto)

        # Sem key a janela ja veio inteira (a identidade e o conteudo): nao rele.
        relidas = lembrada.resumos(pendentes) if alvo.chave else {}
        linhas = (
            self._sem_as_iguais(
                alvo, self._inteiras(alvo, filtro, pendentes, lembrada), relidas, lembrada
            )
            if alvo.chave
            else list(pendentes.values())
        )
        if not linhas:
            # Só provisórias relidas sem mudança: ficaram firmes, nada vai.
            return Leitura(Situacao.NADA, posicao=posicao)
        atrasadas = self._contar_atrasadas(
            alvo,
            [linha for ident, linha in pendentes.items() if ident not in relidas],
            marca,
            lembrada.conhecida,
        )
        upserts, remocoes, por_escopo = self._separar_apagadas(alvo, linhas)
        return Leitura(
            Situacao.MUDANCAS,
            upserts=upserts,
            remocoes=remocoes,
            remocoes_por_escopo=por_escopo,
            quantos=len(linhas),
            atrasadas=atrasadas,
            posicao=posicao,
            privado=self._entrega(alvo, linhas, posicao, lida_em, relidas),
        )

    def antes_de_enviar(
        self,
        alvo: DatasetVivo,  # noqa: ARG002 - o protocolo
        leitura: Leitura,
    ) -> None:
        """Nada: a marca não avança sem `confirmar`, e o próximo ciclo relê a janela."""

    def desistir(self, alvo: DatasetVivo) -> None:  # noqa: ARG002 - o protocolo
        """Nada a devolver: a posição só anda no `confirmar`."""

    def confirmar(self, alvo: DatasetVivo, leitura: Leitura) -> None:
        # A janela entregue antes da marca: se o disco recusar a janela, a marca não
        # anda, e o próximo ciclo relê e reenvia (upsert) em vez de contar atrasadas.
        if isinstance(leitura.privado, _Entrega):
            self._lembrar(alvo.nome, leitura.privado)
        self.estado.definir_marca(alvo.nome, leitura.posicao)
        self.estado.acompanhamento(alvo.nome).vazia_no_inicio = False
        self._contadas.pop(alvo.nome, None)
        # Poda pela marca FINAL do ciclo: a que vale para a proxima leitura.
        self._podar_vistos(alvo.nome, self.estado.marca(alvo.nome))

    def posicao_atual(self, alvo: DatasetVivo) -> ValorDoBanco:
        """
        O MAX antes da varredura (a posição); a janela dele, o que a varredura vai
        entregar, fica montada no disco (`preparar_proxima`) até o `saltar`.
        """
        maximo = self.origem.maximo(alvo.source_object, self._watch(alvo))
        limitado = self.marca_do_maximo(alvo, maximo)
        janela = self._identidades_da_janela(alvo, limitado)
        self.estado.janela(alvo.nome).preparar_proxima(janela)
        return limitado

    def saltar(self, alvo: DatasetVivo, posicao: object) -> ValorDoBanco:
        # O protocolo passa a posicao opaca: e o MAX que `posicao_atual` daqui devolveu.
        nova = marca_agua.marca_apos_varredura(
            self.estado.marca(alvo.nome), posicao, self._watch(alvo), fechou=True
        )
        self.estado.definir_marca(alvo.nome, nova)
        # A janela lida ANTES da varredura foi entregue por ela: o proximo ciclo nao a
        # reenvia. (Linha que comitou depois daquela leitura nao esta aqui: vai de novo.)
        self.estado.janela(alvo.nome).assumir_proxima()
        self._contadas.pop(alvo.nome, None)
        self._contar_sem_carimbo(alvo)
        self._contar_chaves(alvo)
        return nova

    def antes_da_carga(
        self,
        alvo: DatasetVivo,  # noqa: ARG002 - o protocolo
        escopo: str | None,  # noqa: ARG002
    ) -> None:  # noqa: ARG002
        """A marca e do dataset, não da empresa: a carga de uma empresa não a muda."""
        return None

    def depois_da_carga(
        self,
        alvo: DatasetVivo,  # noqa: ARG002
        antes: object,  # noqa: ARG002 - o protocolo
        fechados: Collection[str | None],  # noqa: ARG002
    ) -> None:  # noqa: ARG002
        """Nada: quem salta a marca depois da varredura e `saltar`."""
        return None

    # -- leituras -----------------------------------------------------------------
    def _primeira_vez(self, alvo: DatasetVivo) -> Leitura:
        """Só fixa o ponto de partida (a carga completa e do conector) e lembra a janela."""
        watch = self._watch(alvo)
        inicial = self.origem.maximo(alvo.source_object, watch)
        if inicial is None:
            self.estado.acompanhamento(alvo.nome).vazia_no_inicio = True
            logger.info('%-28s vazia agora: o próximo ciclo envia tudo o que aparecer', alvo.nome)
            self.estado.janela(alvo.nome).trocar(None)
            return Leitura(Situacao.INICIO)
        inicial = self.marca_do_maximo(alvo, inicial)
        self.estado.definir_marca(alvo.nome, inicial)
        logger.info(
            '%-28s marca inicial = %s (nada enviado; a carga completa e da varredura)',
            alvo.nome,
            marca_agua.texto_marca(inicial),
        )
        # A janela de agora e da carga completa, nao do ao-vivo: lembrada como
        # entregue, senao o proximo ciclo a reenviaria inteira (ou, acima do teto,
        # entregaria o dataset a varredura no primeiro dia).
        self.estado.janela(alvo.nome).trocar(self._identidades_da_janela(alvo, inicial))
        return Leitura(Situacao.INICIO)

    def _janela(
        self, alvo: DatasetVivo, filtro: tuple[str, ValorDoBanco] | None
    ) -> Iterator[list[Linha]]:
        """A janela em lotes, lida em fluxo: só chave + mudança; sem key, a linha inteira."""
        watch = self._watch(alvo)
        colunas = (
            [alvo.chave, watch]
            if alvo.chave and alvo.chave != watch
            else ([watch] if alvo.chave else alvo.colunas)
        )
        linhas = iter(self.origem.fetch(alvo.source_object, colunas, since=filtro))
        while lote := list(itertools.islice(linhas, _LOTE_DA_JANELA)):
            yield lote

    def _identidades_da_janela(
        self, alvo: DatasetVivo, marca: ValorDoBanco, ate: ValorDoBanco = None
    ) -> Iterator[tuple[str, MarcaTexto]]:
        """(identidade, carimbo) de cada linha da janela da folga de `marca` (até `ate`)."""
        watch = self._watch(alvo)
        desde = marca_agua.desde(marca, self.folga)
        if desde is None:
            return
        for lote in self._janela(alvo, (watch, desde)):
            if ate is not None:
                lote = [linha for linha in lote if not marca_agua.acima(linha.get(watch), ate)]
            yield from self._identidades(alvo, lote).items()

    def _releitura_vencida(self, nome: str, atraso_origem_s: float | None) -> bool:
        """
        Se este ciclo relê a janela ATRÁS da marca (`> marca - folga`), ou só o
        que passou dela (`> marca`).

        A parte de trás só traz chegada atrasada (a transação que comitou depois
        de a marca passar do carimbo dela). Pequena, é relida a todo ciclo, como
        sempre. Grande (uma hora cheia, um milhão de linhas num carimbo só), a
        releitura é espaçada pelo custo dela (no máximo 1/_CUSTO_DA_RELEITURA do
        tempo), e o que passou da marca segue chegando a cada ciclo. Com a
        origem além da marca mais a folga (nada muda há uma folga inteira), a
        parte de trás já não recebe nada que a folga cubra: relida uma vez por
        folga.
        """
        ultima = self._relida.get(nome)
        if ultima is None:
            return True
        fim, duracao = ultima
        passou = time.monotonic() - fim
        if passou < duracao * _CUSTO_DA_RELEITURA:
            return False
        if atraso_origem_s is not None and atraso_origem_s > self.folga:
            return passou >= self.folga
        return True

    def _ler_janela(
        self,
        alvo: DatasetVivo,
        filtro: tuple[str, ValorDoBanco] | None,
        marca: ValorDoBanco,
        limite: ValorDoBanco,
        lembrada: JanelaEntregue,
    ) -> _JanelaLida:
        """
        A janela lida em fluxo: o que ainda não foi entregue (até o teto por ciclo
        mais um; o resto só contado), as do futuro da origem e a marca nova -- que
        avança sobre TODA a janela lida, menos o que está no futuro da origem.
        """
        watch = self._watch(alvo)
        lida = _JanelaLida(posicao=marca)
        conhecida = lembrada.conhecida
        esperando = lembrada.esperando(time.time() - _SEGUNDO_FECHADO)
        for lote in self._janela(alvo, filtro):
            idents = {marca_agua.identidade(linha, watch, alvo.chave): linha for linha in lote}
            ja = (lembrada.entregues(idents) if conhecida else set()) | esperando
            for ident, linha in idents.items():
                if ident not in ja:
                    lida.pendente(ident, linha, self.maximo)
                valor = linha.get(watch)
                if isinstance(valor, datetime.datetime) and valor.microsecond:
                    lida.subsegundo = True
                if marca_agua.no_futuro(valor, limite):
                    lida.futuras += 1
                else:
                    lida.posicao = marca_agua.avancar((linha,), watch, lida.posicao)
        return lida

    def _sem_as_iguais(
        self,
        alvo: DatasetVivo,
        linhas: list[Linha],
        relidas: Mapping[str, str],
        lembrada: JanelaEntregue,
    ) -> list[Linha]:
        """Tira as provisórias relidas com o mesmo conteúdo: ficam firmes, sem ir de novo."""
        if not relidas:
            return linhas
        watch = self._watch(alvo)
        ficam: list[Linha] = []
        iguais: Vistos = {}
        for linha in linhas:
            ident = marca_agua.identidade(linha, watch, alvo.chave)
            texto = marca_agua.texto_marca(marca_agua.como_valor(linha.get(watch)))
            if texto is not None and relidas.get(ident) == resumo_da_linha(linha):
                iguais[ident] = texto
            else:
                ficam.append(linha)
        if iguais:
            lembrada.juntar(iguais.items())
        return ficam

    def _entrega(
        self,
        alvo: DatasetVivo,
        linhas: list[Linha],
        posicao: ValorDoBanco,
        lida_em: float,
        vencidas: Collection[str],
    ) -> _Entrega:
        """As identidades entregues: firmes, e as provisórias do segundo talvez aberto."""
        watch = self._watch(alvo)
        maior = marca_agua.comparavel(posicao)
        regra = (
            alvo.chave is not None
            and alvo.nome not in self._subsegundo
            and isinstance(maior, datetime.datetime)
        )
        aberto = maior - datetime.timedelta(seconds=1) if regra else None
        firmes: Vistos = {}
        provisorias: list[tuple[str, MarcaTexto, str]] = []
        for linha in linhas:
            valor = marca_agua.como_valor(linha.get(watch))
            texto = marca_agua.texto_marca(valor)
            if texto is None:  # sem carimbo: a sonda nunca a traz de volta
                continue
            ident = marca_agua.identidade(linha, watch, alvo.chave)
            # Acima da maior (carimbo no futuro da origem) não é o segundo que corre agora.
            no_aberto = (
                aberto is not None
                and marca_agua.acima(valor, aberto)
                and not marca_agua.acima(valor, maior)
            )
            if no_aberto and ident not in vencidas:
                provisorias.append((ident, texto, resumo_da_linha(linha)))
            else:
                firmes[ident] = texto
        return _Entrega(firmes, provisorias, lida_em)

    def _lembrar(self, nome: str, entrega: _Entrega) -> None:
        """As firmes na janela entregue; as provisórias esperam o segundo fechar."""
        self.estado.janela(nome).juntar(
            entrega.firmes.items(), entrega.provisorias, entrega.lida_em
        )

    def _identidades(self, alvo: DatasetVivo, janela: list[Linha]) -> Vistos:
        watch = self._watch(alvo)
        vistos: Vistos = {}
        for linha in janela:
            texto = marca_agua.texto_marca(marca_agua.como_valor(linha.get(watch)))
            if texto is not None:  # sem carimbo: a sonda nunca a traz de volta
                vistos[marca_agua.identidade(linha, watch, alvo.chave)] = texto
        return vistos

    def _inteiras(
        self,
        alvo: DatasetVivo,
        filtro: tuple[str, ValorDoBanco] | None,
        pendentes: dict[str, Linha],
        lembrada: JanelaEntregue,
    ) -> list[Linha]:
        """
        As linhas inteiras do que ainda não foi entregue.

        Só elas (`key IN (...)`, em lotes de CHAVES_POR_LEITURA). Uma linha
        alterada entre a leitura estreita e esta tem identidade nova e vai junto:
        e mudança de verdade. A releitura pela key não leva a janela: a key
        repetida na view vem com TODAS as linhas dela, também a de fora da
        janela, e vão juntas (se uma é nova) para a regra de intake/chaves.py
        escolher a mesma que a varredura deixa.
        """
        watch = self._watch(alvo)
        chave = alvo.chave
        if chave is None:
            return list(pendentes.values())
        if pendentes and len(pendentes) <= self.maximo:
            # (A key nula ja saiu das pendentes: _tirar_nulas.)
            valores = [linha[chave] for linha in pendentes.values() if linha.get(chave) is not None]
            linhas: list[Linha] = []
            passo = padroes.CHAVES_POR_LEITURA
            for inicio in range(0, len(valores), passo):
                linhas.extend(
                    self.origem.fetch(
                        alvo.source_object,
                        alvo.colunas,
                        chaves=(chave, valores[inicio : inicio + passo]),
                    )
                )
        else:
            linhas = list(self.origem.fetch(alvo.source_object, alvo.colunas, since=filtro))
        idents = [marca_agua.identidade(linha, watch, chave) for linha in linhas]
        ja = lembrada.entregues(idents) if lembrada.conhecida else set()
        novas = {
            marca_agua.texto_marca(linha.get(chave))
            for linha, ident in zip(linhas, idents, strict=True)
            if ident not in ja
        }
        return [linha for linha in linhas if marca_agua.texto_marca(linha.get(chave)) in novas]

    def _separar_apagadas(
        self, alvo: DatasetVivo, linhas: list[Linha]
    ) -> tuple[list[Linha], list[ValorDoBanco], dict[str, list[ValorDoBanco]]]:
        """
        (upserts, remoções do dataset sem recorte, remoções por empresa).

        A linha marcada como apagada sai como remoção da empresa da própria
        linha (ela ainda tem a coluna da empresa). A viva de mesma chave vence:
        na leitura (`MarcaDeApagado.escolher`) e fora da janela (a chave que a
        origem ainda tem viva não sai: `_vivas_na_origem`). Sem key não há por
        onde remover: a marcada só não vai, e a varredura a tira.
        """
        marca = alvo.marca
        if marca is None:
            return linhas, [], {}
        if alvo.chave is None:
            return [linha for linha in linhas if not marca.apagada(linha)], [], {}
        vivas, apagadas = marca.escolher(linhas, alvo.chave, alvo.escopo)
        vivas_fora = self._vivas_na_origem(alvo, [linha[alvo.chave] for linha in apagadas])
        remocoes: list[ValorDoBanco] = []
        por_escopo: dict[str, list[ValorDoBanco]] = {}
        for linha in apagadas:
            empresa, valor = identidade(linha, alvo.chave, alvo.escopo)
            if (empresa, valor) in vivas_fora:
                continue
            if alvo.escopo is None:
                remocoes.append(linha[alvo.chave])
            elif empresa:
                por_escopo.setdefault(empresa, []).append(linha[alvo.chave])
        return vivas, remocoes, por_escopo

    def _vivas_na_origem(
        self, alvo: DatasetVivo, valores: list[ValorDoBanco]
    ) -> set[tuple[str | None, ValorDoBanco]]:
        """
        (empresa, chave) das linhas vivas que a origem tem com esses `valores` de
        key (`key IN`, sem a janela: a viva de antes dela também vence).
        """
        if not valores or alvo.chave is None or alvo.marca is None:
            return set()
        colunas = [alvo.chave] + ([alvo.escopo] if alvo.escopo else [])
        vivas: set[tuple[str | None, ValorDoBanco]] = set()
        passo = padroes.CHAVES_POR_LEITURA
        for inicio in range(0, len(valores), passo):
            for linha in self.origem.fetch(
                alvo.source_object,
                colunas,
                chaves=(alvo.chave, valores[inicio : inicio + passo]),
                **argumento(alvo.marca),
            ):
                vivas.add(identidade(linha, alvo.chave, alvo.escopo))
        return vivas

    # -- chegadas atrasadas -------------------------------------------------------
    def _contar_atrasadas(
        self, alvo: DatasetVivo, pendentes: list[Linha], marca: ValorDoBanco, conhecida: bool
    ) -> int:
        """
        Chegadas atrasadas: só vistas por causa da folga. Ver marca_agua.py.

        As `pendentes` já são as que a janela entregue não tem; fora delas, só as
        contadas nesta subida e ainda não entregues. Janela desconhecida: suspensa.
        """
        acomp = self.estado.acompanhamento(alvo.nome)
        contadas = self._contadas.setdefault(alvo.nome, set())
        ja = dict.fromkeys(contadas, '') if conhecida else None
        quantas, maior, novas = marca_agua.contar_atrasadas(
            pendentes, self._watch(alvo), alvo.chave, marca, ja
        )
        if novas:
            acomp.ultima_mudanca_vista = _agora_texto()
        contadas.update(novas)
        if not quantas:
            return 0
        acomp.atrasadas_total += quantas
        if maior is not None:
            acomp.maior_atraso_s = max(acomp.maior_atraso_s or 0, maior)
        margem = marca_agua.margem_efetiva(marca, self.folga)
        logger.warning(
            '%-28s %s CHEGADA(S) ATRASADA(S): lidas pela primeira vez abaixo'
            ' da marca anterior, maior atraso %ss (recuo %ss). Só vieram'
            ' por causa da --folga.',
            alvo.nome,
            quantas,
            '?' if maior is None else int(maior),
            '?' if margem is None else int(margem),
        )
        if (
            maior is not None
            and margem is not None
            and marca_agua.atraso_preocupante(maior, marca, self.folga)
        ):
            logger.error(
                '%-28s ATENÇÃO: o atraso (%ss) passou da METADE da folga (%ss).'
                ' A margem está sendo comida -- um pouco mais e linhas se perdem'
                ' até a varredura. Aumente --folga ou pergunte ao DBA sobre'
                ' transações longas nesta tabela.',
                alvo.nome,
                int(maior),
                int(margem),
            )
        return quantas

    def _podar_vistos(self, nome: str, marca: MarcaTexto | None) -> None:
        """
        Esquece o que a próxima leitura não pode mais trazer (a marca nunca desce).

        Poda pela marca FINAL (a de `confirmar`): podar pela marca velha guardaria
        mais do que a próxima leitura pode trazer.
        """
        lembrada = self.estado.janela(nome)
        if marca is None or not lembrada.conhecida:
            return
        lembrada.podar(marca_agua.recuar(marca, self.folga))
