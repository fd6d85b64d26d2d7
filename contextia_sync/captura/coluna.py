"""
A estrategia `coluna`: uma SONDA CURTA numa coluna de mudanca da propria view.

    SELECT COUNT(*) FROM <view> WHERE <coluna> > <marca - folga>

com a credencial de leitura que ja usamos, em qualquer banco, sem pedir nada ao
DBA. A posicao e a marca de agua do dataset; as regras dela (quando fixar,
quanto recuar, quando avancar) sao as funcoes puras de marca_agua.py -- aqui so
se le a origem e se guarda o que elas decidem. Exclusao NAO e vista: sai do
Contextia so na varredura.

Tambem mede as CHEGADAS ATRASADAS (linhas lidas pela primeira vez abaixo da
marca anterior: so vieram por causa da folga), que o status mostra.
"""

from __future__ import annotations

import datetime
from types import ModuleType
from typing import Any

from contextia_sync.captura import DatasetVivo, Leitura, Situacao
from contextia_sync.captura import marca_agua
from contextia_sync.estado.estado import Estado
from contextia_sync.registro import logger


def _agora_texto() -> str:
    return datetime.datetime.now().strftime('%Y-%m-%d %H:%M:%S')


class CapturaColuna:
    """`coluna`: a posicao de cada dataset e a sua marca de agua, no estado."""

    nome = 'coluna'

    def __init__(self, origem: ModuleType, estado: Estado, folga: int, maximo: int) -> None:
        self.origem = origem
        self.estado = estado
        self.folga = folga
        self.maximo = maximo

    def _watch(self, alvo: DatasetVivo) -> str:
        if not alvo.watch:
            raise ValueError('dataset %s sem coluna de mudanca na estrategia coluna'
                             % alvo.nome)
        return alvo.watch

    # -- Captura ----------------------------------------------------------------
    def ler(self, alvo: DatasetVivo) -> Leitura:
        watch = self._watch(alvo)
        acomp = self.estado.acompanhamento(alvo.nome)
        marca = self.estado.marca(alvo.nome)

        if marca_agua.primeira_vez(marca, acomp.vazia_no_inicio):
            inicial = self.origem.maximo(alvo.source_object, watch)
            if inicial is None:
                acomp.vazia_no_inicio = True
                logger.info('%-28s vazia agora: o proximo ciclo envia tudo o que aparecer',
                            alvo.nome)
            else:
                self.estado.definir_marca(alvo.nome, inicial)
                logger.info('%-28s marca inicial = %s (nada enviado; a carga completa e'
                            ' da varredura)', alvo.nome, marca_agua.texto_marca(inicial))
            # Sem saber o que ja foi lido na janela, a contagem de atrasadas comeca
            # no ciclo seguinte, depois de uma leitura da janela inteira.
            self.estado.definir_vistos(alvo.nome, None)
            return Leitura(Situacao.INICIO)

        desde = marca_agua.desde(marca, self.folga)
        filtro = (watch, desde) if desde is not None else None
        quantos = self.origem.contar(alvo.source_object, since=filtro)
        if quantos == 0:
            return Leitura(Situacao.NADA)
        if marca_agua.passa_do_teto(quantos, self.maximo):
            return Leitura(Situacao.GRANDE, quantos=quantos)

        # Lista, e nao gerador: repartir por empresa e avancar a marca percorrem as
        # mesmas linhas, e o teto acima limita o tamanho.
        linhas = list(self.origem.fetch(alvo.source_object, alvo.colunas, since=filtro))
        atrasadas = self._contar_atrasadas(alvo, linhas, marca)
        self._podar_vistos(alvo.nome, marca, limitar=False)
        return Leitura(Situacao.MUDANCAS, upserts=linhas, quantos=quantos,
                       atrasadas=atrasadas,
                       posicao=marca_agua.marca_apos_envio(linhas, watch, marca,
                                                           todos_ok=True, seco=False))

    def confirmar(self, alvo: DatasetVivo, leitura: Leitura) -> None:
        self.estado.definir_marca(alvo.nome, leitura.posicao)
        self.estado.acompanhamento(alvo.nome).vazia_no_inicio = False
        # Poda pela marca FINAL do ciclo: a que vale para a proxima leitura.
        self._podar_vistos(alvo.nome, self.estado.marca(alvo.nome))

    def posicao_atual(self, alvo: DatasetVivo) -> Any:
        return self.origem.maximo(alvo.source_object, self._watch(alvo))

    def saltar(self, alvo: DatasetVivo, posicao: Any) -> Any:
        nova = marca_agua.marca_apos_varredura(self.estado.marca(alvo.nome), posicao,
                                               self._watch(alvo), fechou=True)
        self.estado.definir_marca(alvo.nome, nova)
        self.estado.definir_vistos(alvo.nome, None)
        return nova

    # -- chegadas atrasadas -------------------------------------------------------
    def _contar_atrasadas(self, alvo: DatasetVivo, linhas: list[dict[str, Any]],
                          marca: Any) -> int:
        """Chegadas atrasadas: so vistas por causa da folga. Ver marca_agua.py."""
        vistos = self.estado.vistos(alvo.nome)
        acomp = self.estado.acompanhamento(alvo.nome)
        quantas, maior, novas = marca_agua.contar_atrasadas(
            linhas, self._watch(alvo), alvo.chave, marca, vistos)
        if novas:
            acomp.ultima_mudanca_vista = _agora_texto()
        # Lembradas mesmo se o envio falhar: a contagem e sobre o que foi LIDO, e
        # a releitura do proximo ciclo nao pode contar a mesma linha de novo.
        juntos = dict(vistos or {})
        juntos.update(novas)
        self.estado.definir_vistos(alvo.nome, juntos)
        if not quantas:
            return 0
        acomp.atrasadas_total += quantas
        if maior is not None:
            acomp.maior_atraso_s = max(acomp.maior_atraso_s or 0, maior)
        margem = marca_agua.margem_efetiva(marca, self.folga)
        logger.warning('%-28s %s CHEGADA(S) ATRASADA(S): lidas pela primeira vez abaixo'
                       ' da marca anterior, maior atraso %ss (recuo %ss). So vieram'
                       ' por causa da --folga.', alvo.nome, quantas,
                       '?' if maior is None else int(maior),
                       '?' if margem is None else int(margem))
        if maior is not None and margem is not None and \
                marca_agua.atraso_preocupante(maior, marca, self.folga):
            logger.error('%-28s ATENCAO: o atraso (%ss) passou da METADE da folga (%ss).'
                         ' A margem esta sendo comida -- um pouco mais e linhas se perdem'
                         ' ate a varredura. Aumente --folga ou pergunte ao DBA sobre'
                         ' transacoes longas nesta tabela.', alvo.nome, int(maior),
                         int(margem))
        return quantas

    def _podar_vistos(self, nome: str, marca: Any, limitar: bool = True) -> None:
        """
        Esquece o que a proxima leitura nao pode mais trazer (a marca nunca desce).

        O teto de MAXIMO_VISTOS vale pela marca FINAL (a de `confirmar`): podar
        pela marca velha guardaria mais do que a proxima leitura pode trazer.
        """
        vistos = self.estado.vistos(nome)
        if vistos is None or marca is None:
            return
        podados: dict[str, Any] | None = marca_agua.podar_vistos(vistos, marca, self.folga)
        if limitar and podados is not None and len(podados) > marca_agua.MAXIMO_VISTOS:
            logger.warning('%-28s mais de %s linhas na janela da folga: contagem de'
                           ' chegadas atrasadas suspensa neste ciclo', nome,
                           marca_agua.MAXIMO_VISTOS)
            podados = None
        self.estado.definir_vistos(nome, podados)
