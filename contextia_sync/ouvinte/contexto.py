"""`Contexto`: tudo o que um ciclo do ouvinte precisa, montado uma vez pelo preparo."""

from __future__ import annotations

import datetime
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import IO

from contextia_sync.origem import AdaptadorDeOrigem
from contextia_sync import padroes, segredos, supervisor
from contextia_sync.captura import Captura, DatasetVivo
from contextia_sync.carga import historico
from contextia_sync.estado.estado import Estado
from contextia_sync.fila.quarentena import Quarentena
from contextia_sync.provisionamento.regra_projeto import CodigoRecusado, RegraProjeto
from contextia_sync.tipos import Mapa

# A pasta que contem o pacote contextia_sync: as ferramentas rodam como
# `python -m contextia_sync.cli.<ferramenta>`, com ela no PYTHONPATH -- no
# repositorio e a raiz dele; instalado com pip, o site-packages.
RAIZ = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT_CARREGAR_TODAS = os.path.join(RAIZ, 'contextia_sync', 'carga', 'carregar_todas.sh')


@dataclass
class FerramentaAgora:
    """A ferramenta em curso, para o status: o que, qual pid e desde quando."""

    rotulo: str
    pid: int
    desde: datetime.datetime


@dataclass(frozen=True)
class Configuracao:
    """O que o operador escolheu para esta execução (linha de comando e mapeamento): não muda."""

    mapa: Mapa
    estado_dir: str
    mapping: str
    chaves: str
    vivos: list[DatasetVivo] = field(default_factory=list)
    fora: list[tuple[str, str]] = field(default_factory=list)
    source: str = padroes.SOURCE
    estrategia: str = padroes.ESTRATEGIA
    folga: int = padroes.FOLGA
    maximo: int = padroes.MAXIMO_POR_CICLO
    grupos: list[str] = field(default_factory=list)
    seco: bool = False
    varredura: tuple[int, int] | None = None
    janela: int = padroes.JANELA_VARREDURA
    timeout: int | None = padroes.TIMEOUT_FERRAMENTA
    inatividade: int | None = padroes.INATIVIDADE_FERRAMENTA
    python: str = field(default_factory=lambda: sys.executable or 'python3')
    raiz: str = RAIZ
    intervalo_dados: int = padroes.INTERVALO_DADOS
    # O --intervalo-reconciliacao; None: a estrategia nao reconcilia.
    intervalo_reconciliacao: int | None = None
    metricas: str | None = None  # pasta do ouvinte.prom (None: sem metricas)
    modo: str = 'servico'  # servico, once, seco, reenviar-quarentena
    iniciado_em: str = field(
        default_factory=lambda: datetime.datetime.now().isoformat(timespec='seconds')
    )

    @property
    def caminho_historico(self) -> str:
        """Onde os conectores gravam (e a varredura lê) as cargas aceitas."""
        return historico.caminho_padrao(self.chaves)


@dataclass
class Execucao:
    """O que muda enquanto o ouvinte roda: o status o mostra, nada disso vai para o estado."""

    situacao: str = 'rodando'  # rodando, parando, parado
    # Voltas seguidas do laco com ALGUMA falha (dataset, empresa, ferramenta, ciclo).
    falhas: int = 0
    # Voltas seguidas em que o ciclo inteiro falhou (origem fora): a espera dobra.
    falhas_do_ciclo: int = 0
    ferramenta_agora: FerramentaAgora | None = None
    # Escopos sem chave ja avisados nesta subida: o aviso e uma vez por
    # empresa, nao a cada ciclo (60 s) enquanto ela existir.
    avisados_sem_chave: set[tuple[str, str]] = field(default_factory=set)
    # Empresas recusadas, para o status: o codigo do cadastro que nao serve
    # (ciclo de projetos) e a chave do arquivo que e de outro projeto (ciclo de dados).
    codigos_recusados: list[CodigoRecusado] = field(default_factory=list)
    chaves_recusadas: dict[str, str] = field(default_factory=dict)
    # As empresas do cadastro que a regra de projeto recusa (a inativa): nunca
    # têm projeto, e a remoção de uma linha delas não tem o que remover.
    recusadas_pela_regra: set[str] = field(default_factory=set)
    # De quem e cada chave ({chave: o `quem_sou` dela}), perguntado ao Contextia uma
    # vez por chave nesta execucao. So na memoria: nunca no estado nem no status.
    donos_das_chaves: dict[str, dict[str, object]] = field(default_factory=dict, repr=False)


@dataclass
class Contexto:
    """
    Tudo o que um ciclo precisa, montado uma vez por ouvinte/preparo.py, em três
    partes: `config` (a configuração, congelada), os colaboradores (a origem, o
    estado, a captura, a quarentena, a regra de projeto; a trava da pasta de
    estado; `parar` e `pulsar`, do laço) e `execucao` (o que muda enquanto roda).
    """

    config: Configuracao
    regra: RegraProjeto
    origem: AdaptadorDeOrigem
    estado: Estado
    captura: Captura
    # Registros que o intake recusou de vez (<estado>/quarentena); None no seco.
    quarentena: Quarentena | None = None
    trava: IO[str] | None = None
    parar: Callable[[], bool] = lambda: False
    pulsar: Callable[[], None] = lambda: None
    execucao: Execucao = field(default_factory=Execucao)

    def rodar_ferramenta(
        self,
        argv: list[str],
        rotulo: str,
        env: dict[str, str] | None = None,
        segredos: tuple[str, ...] = (),
    ) -> supervisor.Resultado:
        """
        Roda uma ferramenta mostrando no status o que, desde quando e o pid.

        `segredos`: os nomes das variáveis secretas do ouvinte que ela recebe (o
        provisionar: `segredos_do_provisionar()`); as outras não vão (ambiente_filho).
        """

        def ao_iniciar(pid: int) -> None:
            self.execucao.ferramenta_agora = FerramentaAgora(rotulo, pid, datetime.datetime.now())
            self.pulsar()

        try:
            return supervisor.rodar(
                argv,
                rotulo,
                cwd=self.config.raiz,
                env=self.ambiente_filho(env, segredos),
                timeout=self.config.timeout,
                inatividade=self.config.inatividade,
                deve_parar=self.parar,
                ao_iniciar=ao_iniciar,
                pulso=self.pulsar,
                arquivo_grupo=os.path.join(self.config.estado_dir, supervisor.ARQUIVO_GRUPO),
            )
        finally:
            self.execucao.ferramenta_agora = None
            self.pulsar()

    def ambiente_filho(
        self, extra: dict[str, str] | None = None, manter: tuple[str, ...] = ()
    ) -> dict[str, str]:
        """
        O ambiente de uma ferramenta: o do ouvinte SEM os segredos (menos os de
        `manter`), o pacote no PYTHONPATH, e `extra`.

        Cada filho recebe só o segredo dele: o provisionar, o token de admin e o
        segredo do webhook; o connector, a chave da empresa (em `extra`); o
        carregar-todas.sh, nenhum (o connector --todas lê a chave de cada empresa do
        arquivo de chaves).
        """
        ambiente = segredos.ambiente_sem_segredos(os.environ, manter)
        caminho = ambiente.get('PYTHONPATH')
        ambiente['PYTHONPATH'] = self.config.raiz + (os.pathsep + caminho if caminho else '')
        ambiente.update(extra or {})
        return ambiente

    def segredos_do_provisionar(self) -> tuple[str, ...]:
        """O que o provisionar precisa do ambiente do ouvinte: o token e o segredo do webhook."""
        webhook = self.config.mapa.get('webhook') or {}
        return (segredos.TOKEN_DE_ADMIN,) + (
            (webhook['secret_env'],) if webhook.get('secret_env') else ()
        )

    def argv_provisionar(self, escopo: str | None = None) -> list[str]:
        argv = [
            self.config.python,
            '-m',
            'contextia_sync.cli.provisionar',
            '--mapping=' + self.config.mapping,
            '--source=' + self.config.source,
            '--chaves=' + self.config.chaves,
        ]
        if escopo is not None:
            argv.append('--somente-escopo=' + escopo)
        argv += ['--grupo=' + grupo for grupo in self.config.grupos]
        if self.config.seco:
            argv.append('--dry-run')
        return argv

    def argv_conector(self, escopo: str) -> list[str]:
        config = self.config
        return [
            config.python,
            '-m',
            'contextia_sync.cli.conector',
            '--mapping=' + config.mapping,
            '--source=' + config.source,
            '--scope=' + escopo,
        ]

    def argv_carregar_todas(self) -> list[str]:
        argv = ['bash', SCRIPT_CARREGAR_TODAS, self.config.chaves]
        if self.config.seco:
            argv.append('--dry-run')
        return argv
