"""
A origem: o banco do ERP do cliente, lido com um login SOMENTE LEITURA.

O que mora aqui, e o que cada módulo pode importar:

    __init__     o contrato do adaptador (`FUNCOES`, `carregar_origem`) e as
                 exceções que todo adaptador levanta. Puro.
    filtro       identificadores validados e o PLANO do WHERE. Puro (autoteste).
    condicao     uma condição do mapeamento ({"column", "equals"...}) e a
                 comparação como texto: filtros de projeto e marca de apagado. Puro.
    marca_apagada  a linha que o ERP apaga marcando (`deleted_when`): NULL é
                 viva, a viva vence a marcada de mesma chave. Puro.
    sessão       o que cada dialeto ouve ao conectar (so-leitura, UTC, timeout). Puro.
    valores      valores nos dois sentidos (bind e driver -> Python), e o escopo
                 exatamente no tipo da coluna (`coagir_exato`). SQLAlchemy.
    url          CONTEXTIA_ORIGEM lida e mostrada sem a senha. SQLAlchemy.
    consultas    o SQL de cada leitura, montado sem servidor. SQLAlchemy.
    conjunto     o conjunto de chaves em ordem binária (a reconciliacao). SQLAlchemy.
    genérico     o adaptador `--source=generic`: engine próprio, sessão travada,
                 leituras curtas em streaming. SQLAlchemy + drivers.

Nada daqui fala com o Contextia nem conhece o ouvinte: a origem só lê.
"""

from __future__ import annotations

import datetime
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar, TypeVarTuple, Unpack, cast

from contextia_sync.erros import ErroConfiguracao
from contextia_sync.origem import filtro

if TYPE_CHECKING:  # so a anotacao: o __init__ fica puro (autoteste)
    from contextia_sync.origem.marca_apagada import MarcaDeApagado
    from contextia_sync.tipos import Linha, ValorDoBanco

RAIZ = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PASTA_SOURCES = os.path.join(RAIZ, 'sources')

# O que ouvinte, conector e provisionador chamam no adaptador.
FUNCOES = ('conectar', 'fetch', 'contar', 'maximo', 'renovar', 'fechar')
# O que a estrategia `coluna` pede a mais: a hora da ORIGEM (a marca nunca passa
# dela), o tipo da coluna de mudanca no catalogo, e quantas linhas estao sem ela.
FUNCOES_COLUNA = ('agora', 'tipo_coluna', 'contar_sem_valor')
# O que a `reconciliacao` pede a mais: o conjunto de chaves em ordem (origem/conjunto.py).
FUNCOES_RECONCILIACAO = ('conjunto',)


@dataclass(frozen=True)
class Relogio:
    """A hora da origem, sem fuso: em UTC e na hora local do servidor dela."""

    utc: datetime.datetime
    local: datetime.datetime

    @property
    def maior(self) -> datetime.datetime:
        """O mais adiantado dos dois: o limite seguro para uma coluna de qualquer fuso."""
        return max(self.utc, self.local)


class AdaptadorDeOrigem(Protocol):
    """
    A origem como o SDK a vê: um objeto, carregado uma vez por execução
    (`carregar_origem`), que o ouvinte, o conector, o provisionar e as capturas
    recebem já pronto -- o adaptador `--source=` (o módulo `sources/<nome>.py`
    que o integrador escreveu, ou o embutido, `origem.generico`).

    O contrato (`FUNCOES`) todo adaptador tem; o que uma estratégia pede a mais
    (`FUNCOES_COLUNA`: o relógio e o catálogo da coluna de mudança;
    `FUNCOES_RECONCILIACAO`: o conjunto de chaves) é conferido por `faltando`
    antes de a estratégia ser escolhida.
    """

    def conectar(self, url: str | None = None, timeout: int | None = None) -> object:
        """Conecta (ou devolve a conexão que já existe)."""

    def fetch(
        self,
        source_object: str,
        columns: Sequence[str],
        scope: Sequence[ValorDoBanco] | None = None,
        since: Sequence[ValorDoBanco] | None = None,
        chaves: Sequence[ValorDoBanco] | None = None,
        sem_apagadas: MarcaDeApagado | None = None,
    ) -> Iterable[Linha]:
        """
        As linhas, em streaming: a empresa (`scope`), a janela (`since`), as chaves.

        `sem_apagadas` (só passado quando o dataset declara `deleted_when`): sem as
        linhas que a marca diz apagadas (origem/marca_apagada.py).
        """

    def contar(
        self,
        source_object: str,
        scope: Sequence[ValorDoBanco] | None = None,
        since: Sequence[ValorDoBanco] | None = None,
        sem_apagadas: MarcaDeApagado | None = None,
        so_apagadas: MarcaDeApagado | None = None,
    ) -> int:
        """A sonda: quantas linhas (sem as apagadas, ou só elas, se a marca é dada)."""

    def maximo(self, source_object: str, coluna: str) -> ValorDoBanco:
        """O maior valor da coluna (o ponto de partida da marca)."""

    def renovar(self) -> None:
        """Um retrato novo da origem (a próxima leitura vê o que comitou até agora)."""

    def fechar(self) -> None:
        """Solta as conexões."""

    def agora(self) -> Relogio:
        """A hora da origem (`FUNCOES_COLUNA`)."""

    def tipo_coluna(self, source_object: str, coluna: str) -> str:
        """O tipo da coluna de mudança no catálogo (`FUNCOES_COLUNA`)."""

    def colunas(self, source_object: str) -> list[str]:
        """Os nomes das colunas como o banco os guarda."""

    def contar_sem_valor(self, source_object: str, coluna: str) -> int:
        """Quantas linhas sem a coluna de mudança (`FUNCOES_COLUNA`)."""

    def conjunto(
        self,
        source_object: str,
        chave: str,
        escopo: str | None = None,
        so_escopo: ValorDoBanco = None,
        sem_apagadas: MarcaDeApagado | None = None,
    ) -> Iterable[Sequence[ValorDoBanco]]:
        """As linhas (escopo, chave) em ordem binária (`FUNCOES_RECONCILIACAO`)."""


class ErroAdaptador(ErroConfiguracao):
    """O adaptador pedido não existe ou não expõe o que o SDK precisa."""


class ErroOrigem(Exception):
    """A origem não respondeu como devia (conexão, permissão, objeto, consulta)."""


class ErroConfiguracaoOrigem(ErroOrigem, ErroConfiguracao):
    """
    CONTEXTIA_ORIGEM ou CONTEXTIA_ORIGEM_TIMEOUT ausente ou invalida.

    Ainda é um ErroOrigem (quem pega ErroOrigem continua pegando), mas não é a
    origem fora do ar: esperar o próximo ciclo não resolve, o operador corrige.
    """


class ErroIdentificador(ErroOrigem, filtro.ErroIdentificador):
    """Nome de objeto/coluna do mapeamento recusado antes de virar SQL."""


_T = TypeVar('_T')
_Ts = TypeVarTuple('_Ts')


def validado(funcao: Callable[[Unpack[_Ts]], _T], *args: Unpack[_Ts]) -> _T:
    """`funcao(*args)` de `filtro`, com a recusa dele virando ErroIdentificador."""
    try:
        return funcao(*args)
    except filtro.ErroIdentificador as erro:
        raise ErroIdentificador(str(erro)) from None


def faltando(modulo: object, funcoes: tuple[str, ...]) -> list[str]:
    """As `funcoes` que o adaptador não expõe (as do contrato, ou as de uma estratégia)."""
    return [f for f in funcoes if not callable(getattr(modulo, f, None))]


def carregar_origem(nome: str) -> AdaptadorDeOrigem:
    """
    O adaptador `--source=<nome>`, conferido: expõe `FUNCOES`?

    Procura `sources/<nome>.py` ao lado do pacote (o adaptador que o integrador
    escreveu, ou o `sources/generic.py` do repositório); `generic` sem arquivo
    (pacote instalado com pip) e o embutido, `contextia_sync.origem.generico`.
    """
    if not re.fullmatch(r'[A-Za-z_][A-Za-z0-9_]*', nome or ''):
        raise ErroAdaptador(
            '--source=%r não é nome de módulo. Use o nome do arquivo em sources/'
            ' sem o .py (normalmente --source=generic).' % nome
        )
    arquivo = os.path.join(PASTA_SOURCES, nome + '.py')
    if os.path.exists(arquivo):
        nome_modulo = 'contextia_sources_' + nome
        modulo = sys.modules.get(nome_modulo)
        if modulo is None:
            spec = importlib.util.spec_from_file_location(nome_modulo, arquivo)
            if spec is None or spec.loader is None:
                raise ErroAdaptador(
                    'sources/%s.py não pode ser carregado como módulo Python.' % nome
                )
            modulo = importlib.util.module_from_spec(spec)
            sys.modules[nome_modulo] = modulo
            try:
                spec.loader.exec_module(modulo)
            except BaseException:
                sys.modules.pop(nome_modulo, None)
                raise
    elif nome == 'generic':
        modulo = importlib.import_module('contextia_sync.origem.generico')
    else:
        raise ErroAdaptador(
            'sources/%s.py não existe. Use --source=generic (o adaptador embutido)'
            ' ou crie o adaptador em %s.' % (nome, PASTA_SOURCES)
        )
    faltam = faltando(modulo, FUNCOES)
    if faltam:
        raise ErroAdaptador(
            'sources/%s.py não expõe %s. O SDK precisa de sonda (`contar`), leitura'
            ' (`fetch`, com `since=` e `scope=`), ponto de partida (`maximo`) e'
            ' renovação de retrato (`renovar`). Use sources/generic.py.'
            % (nome, ', '.join('`%s`' % f for f in faltam))
        )
    # Conferido acima (FUNCOES); o que a estrategia pede a mais, na escolha dela.
    return cast(AdaptadorDeOrigem, modulo)
