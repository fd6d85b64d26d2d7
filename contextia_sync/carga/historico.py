"""
O histórico de cargas: o que as cargas ACEITAS de cada dataset trouxeram, por
empresa. Um JSON ao lado do arquivo de chaves (`<chaves>.historico.json`).

    {"versao": 1, "cargas": {"297": {"movimentos": {
        "registros": 573, "removidos": 12, "em": "2026-11-30T03:31:07",
        "execucao": "varredura-1a2b3c4d",
        "janela": [{"registros": 600, "em": "2026-11-28T03:30:55"},
                   {"registros": 573, "em": "2026-11-30T03:31:07"}]}}}}

`registros`/`em`/`execucao`: a última carga aceita. `janela`: a maior carga
aceita de cada dia, só os dias da janela (`padroes.JANELA_TETO_REMOCAO_DIAS`
dias de calendário mais hoje), em ordem; a cada gravação os dias que saíram
da janela caem, então a lista tem no máximo JANELA+1 itens por empresa e
dataset, por mais cargas que se rodem.

Para que serve:
  * a base do teto de remoção (`base`): a MAIOR carga aceita na janela, não só
    a anterior. Comparando só com a anterior, uma view que perde 30% por rodada
    ia de 100 a 2 linhas em 7 rodadas, cada uma dentro do teto. Uma carga aceita
    com o teto acima do padrão (`--max-remocao` explícito, a limpeza real)
    recomeça a janela: o tamanho que ela trouxe é a nova base.
  * teto do dataset SEM key: la o ao-vivo manda cada alteração como registro
    novo e a versão antiga só sai no `complete`. Num dia movimentado as versões
    velhas passam da metade do dataset, e o teto "fração do dataset" recusaria a
    varredura para sempre. O teto certo compara a contagem de hoje com a base
    (ver `carga.teto_do_complete`).
  * o ouvinte sabe, dataset por dataset, o que a varredura carregou: uma entrada
    com a `execucao` dela, para cada empresa, quer dizer carregado e fechado.

Só carga com `complete` aceito entra: carga falha não pode virar base (uma view
vazia registrada como "0 linhas" liberaria a próxima view vazia). Perder este
arquivo não perde dado: o teto volta a ser a fração do dataset, mais rígido.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
from collections.abc import Collection, Iterable, Iterator
from typing import Required, TypedDict, cast

from contextia_sync import padroes
from contextia_sync.arquivos import gravar_atomico
from contextia_sync.registro import logger
from contextia_sync.tipos import JsonDecodificado

SUFIXO = '.historico.json'


class CargaDaJanela(TypedDict):
    """Um item da `janela`: a maior carga aceita de um dia."""

    registros: int
    em: str


class _CargaComMomento(CargaDaJanela):
    """Um item da `janela` com o `em` já lido como data (não vai ao arquivo)."""

    _momento: datetime.datetime


class CargaAceita(TypedDict, total=False):
    """Uma carga aceita: a entrada gravada (`anterior`) ou a base do teto (`base`)."""

    registros: Required[int]
    em: str
    removidos: int
    execucao: str | None
    janela: list[CargaDaJanela]
    janela_dias: int


def _momento(texto: object) -> datetime.datetime | None:
    """O `em` de uma carga como hora local sem fuso; None se não é uma data."""
    if not isinstance(texto, str):
        return None
    try:
        momento = datetime.datetime.fromisoformat(texto)
    except ValueError:
        return None
    if momento.tzinfo is not None:
        momento = momento.astimezone().replace(tzinfo=None)
    return momento


def _janela(entrada: object, agora: datetime.datetime, dias: int) -> list[_CargaComMomento]:
    """
    As cargas da `janela` de uma entrada que ainda valem em `agora`, em ordem.

    Dias inteiros: a maior de um dia vale até o fim do dia `dias` depois dele
    (contar em horas esqueceria, na borda, as cargas menores do mesmo dia que
    vieram depois da maior; a janela um pouco mais longa só é mais rígida).
    Entrada do formato anterior (sem `janela`): a última carga aceita é a janela.
    """
    if not isinstance(entrada, dict):
        return []
    cargas = entrada.get('janela')
    if not isinstance(cargas, list):
        cargas = [entrada]
    primeiro_dia = agora.date() - datetime.timedelta(days=dias)
    validas: list[_CargaComMomento] = []
    for carga in cargas:
        momento = _momento(carga.get('em')) if isinstance(carga, dict) else None
        registros = carga.get('registros') if isinstance(carga, dict) else None
        if (
            momento is not None
            and isinstance(registros, int)
            and not isinstance(registros, bool)
            and momento.date() >= primeiro_dia
        ):
            validas.append({'registros': registros, 'em': carga['em'], '_momento': momento})
    validas.sort(key=lambda c: c['_momento'])
    return validas


def _com_a_carga(
    janela: list[_CargaComMomento], registros: int, em: str, agora: datetime.datetime, dias: int
) -> list[CargaDaJanela]:
    """A janela com a carga aceita agora: a maior de hoje fica, uma por dia."""
    hoje = [c for c in janela if c['_momento'].date() == agora.date()]
    janela = [c for c in janela if c['_momento'].date() != agora.date()]
    maior_de_hoje = max(hoje, key=lambda c: (c['registros'], c['_momento']), default=None)
    if maior_de_hoje is None or registros >= maior_de_hoje['registros']:
        maior_de_hoje = {'registros': registros, 'em': em, '_momento': agora}
    janela.append(maior_de_hoje)
    janela.sort(key=lambda c: c['_momento'])
    # Relogio que voltou pode deixar dias "do futuro": o teto do tamanho vale igual.
    return [{'registros': c['registros'], 'em': c['em']} for c in janela[-(dias + 1) :]]


def caminho_padrao(chaves: str) -> str:
    """O histórico de uma implantação: ao lado do arquivo de chaves, que a identifica.

    O carregar-todas.sh monta o mesmo nome (`$chaves.historico.json`).
    """
    return os.path.abspath(chaves) + SUFIXO


class Historico:
    """Leitura sempre do disco: outro processo (o conector) pode ter gravado agora."""

    def __init__(self, caminho: str, janela_dias: int = padroes.JANELA_TETO_REMOCAO_DIAS) -> None:
        self.caminho = caminho
        self.janela_dias = janela_dias

    def _ler(self) -> dict[str, JsonDecodificado] | None:
        try:
            with open(self.caminho, encoding='utf-8') as arquivo:
                dados: JsonDecodificado = json.load(arquivo)
            if not isinstance(dados, dict) or not isinstance(dados.get('cargas'), dict):
                raise ValueError('sem o objeto "cargas"')
            return dados
        except FileNotFoundError:
            return {'versao': 1, 'cargas': {}}
        except (OSError, ValueError) as erro:
            # Ilegivel: sem base o teto volta a ser a fracao do dataset (mais
            # rigido) e o ouvinte trata a varredura como nao carregada. Nada se perde.
            logger.warning(
                'histórico de cargas ilegível em %s (%s: %s); tratado como vazio.'
                ' A próxima carga aceita o regrava.',
                self.caminho,
                type(erro).__name__,
                erro,
            )
            return None

    @contextlib.contextmanager
    def _travado(self) -> Iterator[None]:
        # Um conector da varredura e um `connector.py` rodado a mao podem gravar
        # juntos; sem a trava um apagaria a entrada do outro.
        with open(self.caminho + '.trava', 'a') as trava:
            fcntl.flock(trava, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(trava, fcntl.LOCK_UN)

    def anterior(self, escopo: object, dataset: str) -> CargaAceita | None:
        """A última carga aceita ({'registros', 'em', ...}) ou None."""
        dados = self._ler() or {'cargas': {}}
        entrada = (dados['cargas'].get(str(escopo)) or {}).get(dataset)
        if not isinstance(entrada, dict) or not isinstance(entrada.get('registros'), int):
            return None
        # O arquivo é nosso: `registrar_varias` grava a entrada assim (registros conferido).
        return cast(CargaAceita, entrada)

    def base(
        self, escopo: object, dataset: str, agora: datetime.datetime | None = None
    ) -> CargaAceita | None:
        """
        A base do teto de remoção: a MAIOR carga aceita de `dataset` na empresa
        `escopo` dentro da janela, {'registros', 'em', 'janela_dias'}; None se
        não houve carga aceita na janela.
        """
        dados = self._ler() or {'cargas': {}}
        entrada = (dados['cargas'].get(str(escopo)) or {}).get(dataset)
        janela = _janela(entrada, agora or datetime.datetime.now(), self.janela_dias)
        if not janela:
            return None
        # Empate: a mais recente (a data que a recusa mostra é a que ainda vale mais tempo).
        maior = max(janela, key=lambda c: (c['registros'], c['_momento']))
        return {'registros': maior['registros'], 'em': maior['em'], 'janela_dias': self.janela_dias}

    def registrar(
        self,
        escopo: object,
        dataset: str,
        registros: int,
        removidos: int,
        execucao: str | None = None,
        *,
        nova_base: bool = False,
        agora: datetime.datetime | None = None,
    ) -> None:
        """Grava a carga ACEITA de `dataset` na empresa `escopo` (só após o `complete`)."""
        self.registrar_varias(
            [(escopo, dataset, registros, removidos)], execucao, nova_base=nova_base, agora=agora
        )

    def registrar_varias(
        self,
        cargas: Iterable[tuple[object, str, int, int]],
        execucao: str | None = None,
        *,
        nova_base: bool = False,
        agora: datetime.datetime | None = None,
    ) -> None:
        """
        Grava de uma vez as cargas ACEITAS [(escopo, dataset, registros, removidos)]
        (a carga de todas as empresas: uma gravação por dataset, não uma por empresa).

        `nova_base`: aceitas com o teto acima do padrão (o operador permitiu a
        remoção): a janela recomeça nelas, e o tamanho delas é a base dali em diante.
        """
        cargas = list(cargas)
        if not cargas:
            return
        with self._travado():
            dados = self._ler()
            if dados is None:
                # O ilegivel vai para o lado com nome, nunca sobrescrito calado.
                os.replace(self.caminho, self.caminho + '.ilegivel')
                logger.warning('histórico ilegível movido para %s.ilegivel', self.caminho)
                dados = {'versao': 1, 'cargas': {}}
            agora = (agora or datetime.datetime.now()).replace(microsecond=0)
            em = agora.isoformat(timespec='seconds')
            for escopo, dataset, registros, removidos in cargas:
                da_empresa = dados['cargas'].setdefault(str(escopo), {})
                janela = (
                    [] if nova_base else _janela(da_empresa.get(dataset), agora, self.janela_dias)
                )
                da_empresa[dataset] = {
                    'registros': int(registros),
                    'removidos': int(removidos),
                    'em': em,
                    'execucao': execucao,
                    'janela': _com_a_carga(janela, int(registros), em, agora, self.janela_dias),
                }
            gravar_atomico(self.caminho, json.dumps(dados, indent=1, sort_keys=True) + '\n')

    def faltando(
        self, escopos: Collection[str], datasets: Iterable[str], execucao: str | None
    ) -> dict[str, list[str]]:
        """
        {dataset: [empresas]} em que a execução `execucao` NÃO fechou a carga.

        Uma leitura para todos os datasets: o arquivo pode ter milhares de entradas.
        """
        dados = self._ler()
        cargas = dados['cargas'] if dados is not None else {}
        return {
            d: sorted(
                e
                for e in escopos
                if ((cargas.get(str(e)) or {}).get(d) or {}).get('execucao') != execucao
            )
            for d in datasets
        }
