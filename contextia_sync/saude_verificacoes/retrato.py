"""
O `ouvinte-status.json` lido uma vez, com tolerância (campo que falta ou tem
o tipo errado vale o neutro), no `Retrato`: o que várias verificações usam --
os limites automáticos, a idade do status, o processo no ar, a hora de
referência dos datasets, a última varredura.
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from contextia_sync import padroes
from contextia_sync.estado.status import ARQUIVO_STATUS_JSON, VERSAO_STATUS
from contextia_sync.saude_verificacoes.registros import Limites

if TYPE_CHECKING:  # só o tipo: medir é do saude.py, que abre a origem
    from contextia_sync.captura.medida_do_log import LogMedido
    from contextia_sync.tipos import Json, ObjetoJson


# ------------------------------------------------------------------ leitura tolerante
def quando(valor: object) -> datetime.datetime | None:
    """Texto ISO (com 'T' ou espaço) -> datetime ingenuo (hora local), ou None."""
    if not isinstance(valor, str) or not valor:
        return None
    try:
        momento = datetime.datetime.fromisoformat(valor)
    except ValueError:
        return None
    if momento.tzinfo is not None:
        momento = momento.astimezone().replace(tzinfo=None)
    return momento


def inteiro(valor: object) -> int:
    return valor if isinstance(valor, int) and not isinstance(valor, bool) else 0


def numero(valor: object) -> float | None:
    if isinstance(valor, (int, float)) and not isinstance(valor, bool):
        return float(valor)
    return None


def secao(dados: Mapping[str, Json], nome: str) -> ObjetoJson:
    valor = dados.get(nome)
    return valor if isinstance(valor, dict) else {}


def seg(segundos: float) -> str:
    return '%ds' % round(segundos)


def horas(segundos: float) -> str:
    return '%.1fh' % (segundos / 3600.0)


def pid_vivo(pid: int) -> bool | None:
    """O pid e de um ouvinte vivo? None = não da para saber daqui."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # existe, de outro usuario
    except OSError:
        return None
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as arquivo:
            comando = arquivo.read()
    except OSError:
        return True
    # Zumbi (linha de comando vazia) ou pid reciclado por outro programa: morto.
    return b'ouvinte' in comando or b'contextia' in comando


# ------------------------------------------------------------------ o retrato
@dataclass(frozen=True)
class Varredura:
    """A seção `varredura` do status, com o que duas verificações e o resumo usam."""

    secao: ObjetoJson
    hora: Json  # None = varredura diária desligada
    iniciada: datetime.datetime | None
    terminada: datetime.datetime | None
    ok: Json  # True, False, ou None (em curso/interrompida)
    em_curso: bool
    ultima_ok: datetime.datetime | None
    idade_ok: float | None  # segundos desde a última boa


def _ler_varredura(status: Mapping[str, Json], no_ar: bool, agora: datetime.datetime) -> Varredura:
    dados = secao(status, 'varredura')
    iniciada = quando(dados.get('iniciada_em'))
    terminada = quando(dados.get('terminada_em'))
    ok = dados.get('ok')
    em_curso = bool(iniciada and not terminada and ok is None and no_ar)
    ultima_ok = quando(dados.get('ultima_ok_em'))
    idade_ok: float | None = None
    if ultima_ok:
        # A varredura em curso é medida do começo dela: ela mesma não a envelhece.
        idade_ok = max(
            0.0, ((iniciada if em_curso and iniciada else agora) - ultima_ok).total_seconds()
        )
    return Varredura(
        dados, dados.get('hora'), iniciada, terminada, ok, em_curso, ultima_ok, idade_ok
    )


@dataclass(frozen=True)
class Retrato:
    """
    O `ouvinte-status.json` lido uma vez, com o que várias verificações usam
    (os limites automáticos, a idade, o processo no ar, a hora de referência).
    """

    status: Mapping[str, Json]
    limites: Limites
    agora: datetime.datetime
    ouvinte: ObjetoJson
    intervalo_rec: float | None
    modo: str
    situacao: str
    pid: int
    max_idade: float
    max_sem_sonda: float
    atualizado_txt: Json
    idade: float | None
    no_ar: bool
    pid_ok: bool | None
    ferramenta: ObjetoJson
    ferramenta_desde: datetime.datetime | None
    referencia: datetime.datetime
    iniciado: datetime.datetime | None
    varredura: Varredura
    # O log medido agora na origem, com o ouvinte parado (None: usa-se o do status).
    log_medido: LogMedido | None = None

    @property
    def servico(self) -> bool:
        return self.modo == 'servico'

    @property
    def max_falhas(self) -> int:
        return self.limites.max_falhas

    @property
    def parou_no_servico(self) -> bool:
        """O serviço morreu ou parou: isso já diz tudo, a idade do status não."""
        return self.servico and (self.pid_ok is False or self.situacao == 'parado')

    @property
    def vivos(self) -> list[ObjetoJson]:
        # As listas do status (relatorio.status_json) são listas: os casts daqui o dizem.
        datasets = [
            d for d in cast('list[Json]', self.status.get('datasets') or []) if isinstance(d, dict)
        ]
        return [d for d in datasets if d.get('ao_vivo')]


def ler_retrato(
    status: Mapping[str, Json],
    limites: Limites,
    agora: datetime.datetime,
    idade_arquivo: float | None = None,
    vivo: Callable[[int], bool | None] = pid_vivo,
) -> Retrato | str:
    """O `Retrato` do status, ou o porquê (texto) de a saúde não saber avaliá-lo."""
    versao = status.get('versao')
    if not isinstance(versao, int) or versao > VERSAO_STATUS:
        return '%s de versão %r; esta saúde conhece até a %d: atualize o SDK onde a saúde roda' % (
            ARQUIVO_STATUS_JSON,
            versao,
            VERSAO_STATUS,
        )
    ouvinte = secao(status, 'ouvinte')
    if not ouvinte:
        return '%s sem a seção "ouvinte"' % ARQUIVO_STATUS_JSON
    modo = str(ouvinte.get('modo') or 'servico')
    situacao = str(ouvinte.get('situacao') or 'rodando')
    pid = inteiro(ouvinte.get('pid'))
    max_idade, max_sem_sonda = _limites_automaticos(ouvinte, limites, modo == 'servico')
    atualizado = quando(ouvinte.get('atualizado_em'))
    pid_ok: bool | None = None
    if situacao in ('rodando', 'parando') and limites.conferir_pid and pid > 0:
        pid_ok = vivo(pid)
    no_ar = situacao in ('rodando', 'parando') and pid_ok is not False
    ferramenta = secao(status, 'ferramenta')
    ferramenta_desde = quando(ferramenta.get('desde'))
    return Retrato(
        status=status,
        limites=limites,
        agora=agora,
        ouvinte=ouvinte,
        intervalo_rec=numero(ouvinte.get('intervalo_reconciliacao_s')),
        modo=modo,
        situacao=situacao,
        pid=pid,
        max_idade=max_idade,
        max_sem_sonda=max_sem_sonda,
        atualizado_txt=ouvinte.get('atualizado_em'),
        idade=_idade_do_status(agora, atualizado, idade_arquivo),
        no_ar=no_ar,
        pid_ok=pid_ok,
        ferramenta=ferramenta,
        ferramenta_desde=ferramenta_desde,
        referencia=_referencia(status, atualizado or agora, ferramenta_desde),
        iniciado=quando(ouvinte.get('iniciado_em')),
        varredura=_ler_varredura(status, no_ar, agora),
    )


def _limites_automaticos(
    ouvinte: Mapping[str, Json], limites: Limites, servico: bool
) -> tuple[float, float]:
    """O --max-idade e o --max-sem-sonda: os dados, ou os do ritmo do ouvinte."""
    intervalo = numero(ouvinte.get('intervalo_dados_s')) or float(padroes.INTERVALO_DADOS)
    max_idade = (
        limites.max_idade
        if limites.max_idade is not None
        else max(limites.intervalos * intervalo, float(padroes.SAUDE_IDADE_MINIMA))
    )
    if limites.max_sem_sonda is not None:
        return max_idade, limites.max_sem_sonda
    # No --once o ritmo é o do cron, que o status não sabe: vale o da idade.
    return max_idade, limites.intervalos * intervalo if servico else max_idade


def _idade_do_status(
    agora: datetime.datetime, atualizado: datetime.datetime | None, idade_arquivo: float | None
) -> float | None:
    """A idade pelo `atualizado_em`; sem ele, ou no futuro (relógio acertado), a do mtime."""
    idade = (agora - atualizado).total_seconds() if atualizado else None
    if idade is None or idade < -60:
        idade = idade_arquivo
    return max(0.0, idade) if idade is not None else None


def _referencia(
    status: Mapping[str, Json],
    sem_ciclo: datetime.datetime,
    ferramenta_desde: datetime.datetime | None,
) -> datetime.datetime:
    """
    A hora de referencia e a do ultimo ciclo de dados (ou da ultima volta que
    falhou inteira): o dataset e julgado pelo que aconteceu nos ciclos, nao
    pelo relogio de agora -- entre um ciclo e outro (o cron de 5 min, uma
    varredura de duas horas) quem fala e a idade do status.
    """
    ciclos = secao(status, 'ciclos')
    referencias = [
        t
        for t in (
            quando(secao(ciclos, 'dados').get('em')),
            quando(secao(ciclos, 'falha').get('em')),
        )
        if t
    ]
    if referencias:
        return max(referencias)
    if ferramenta_desde and ferramenta_desde < sem_ciclo:
        return ferramenta_desde
    return sem_ciclo
