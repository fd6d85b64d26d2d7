"""
A carga completa de TODAS as empresas do arquivo de chaves numa execução do
connector (`connector.py --todas`, o que o carregar-todas.sh roda): UMA leitura
por dataset, em ordem de empresa, repartida para a chave de cada uma.

Antes eram um processo e D leituras por empresa (D×S leituras para S
empresas); agora, um processo e D leituras. O que continua por empresa:

  * o `sync` dela e o `complete` dela, com o teto de remoção dela: cada empresa
    é um projeto, e o servidor confere o teto contra o dataset daquele projeto;
  * lote que falha numa empresa (o Contextia recusando a chave dela, um 500 só
    para ela) impede o `complete` NELA; as outras seguem na mesma leitura;
  * o `complete` de cada empresa só sai depois que a leitura do dataset chegou
    ao fim. Uma leitura que cai no meio não fecha empresa nenhuma -- nem as que
    já tinham passado: a ordem só está provada no fim (ver `_fora_de_ordem`).

A empresa de cada linha é `texto_escopo` da coluna de escopo, a regra do ao
vivo (captura/ao_vivo.py: agrupar_por_escopo). Linha de empresa sem chave (fora
do arquivo, ou recusada nesta execução) não vai a lugar nenhum; a contagem
delas é dita na linha do dataset.

O dataset sem recorte (domínio, `scope_column: null`) vai inteiro para cada
empresa: lido uma vez para um arquivo temporário (a memória não cresce com ele)
e reenviado dali a cada empresa.

Adaptador cujo `fetch` não aceita `ordem=` (um sources/*.py escrito antes
disto): uma leitura por empresa, como antes, mas no mesmo processo -- dito no log.
"""

from __future__ import annotations

import inspect
import itertools
import pickle
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import IO, TYPE_CHECKING, Any

from contextia_sync import mapeamento, padroes
from contextia_sync.carga.completa import (
    ResultadoCarga,
    _conferir_linhas,
    _contando,
    contar_para_o_progresso,
    encurtar,
    enviar_sob_sync,
    fechar_carga,
    linha_de_progresso,
)
from contextia_sync.escopos import texto_escopo
from contextia_sync.registro import logger

if TYPE_CHECKING:
    from contextia_sync.carga.historico import Historico

# Linhas por bloco no arquivo temporário do dataset de domínio.
BLOCO_DA_COPIA = 1000
# Quantas empresas sem chave a linha do dataset nomeia (todas são contadas).
SEM_CHAVE_NOMEADAS = 5


@dataclass
class Empresa:
    """Uma empresa do arquivo de chaves nesta execução, e o que aconteceu com ela."""

    escopo: str
    chave: str | None = None
    """None no seco (nada é enviado)."""
    projeto: str = '-'
    recusa: str | None = None
    """Por que ela fica de fora, com a correção (excluída, chave recusada ou de outra
    empresa, fora do cadastro): o código 2 que o connector dela daria."""
    falha: str | None = None
    """Por que ela não pôde começar sem ser configuração (o Contextia fora): código 1."""
    aviso: str | None = None
    """A regra de projeto a recusa (inativa), mas ela existe e carrega."""
    resultados: list[ResultadoCarga] = field(default_factory=list)

    @property
    def ativa(self) -> bool:
        return self.recusa is None and self.falha is None

    @property
    def codigo(self) -> int:
        """O código de saída que o connector só dela daria (0, 1 ou 2)."""
        if self.recusa is not None:
            return 2
        return 1 if self.falha is not None or any(not r.ok for r in self.resultados) else 0

    @property
    def segundos(self) -> float:
        return sum(r.segundos for r in self.resultados)

    def motivo_curto(self) -> str:
        """Por que ela falhou, numa frase: o que o resumo da execução leva ao lado dela."""
        if self.recusa is not None or self.falha is not None:
            return encurtar(self.recusa or self.falha or '', 100)
        falhos = [r for r in self.resultados if not r.ok]
        return encurtar('; '.join('%s: %s' % (r.dataset, r.motivo_curto) for r in falhos), 160)


@dataclass
class LeituraDoDataset:
    """A leitura de um dataset para todas as empresas (a linha que o connector imprime)."""

    dataset: str
    dominio: bool = False
    leituras: int = 0
    linhas: int = 0
    sem_chave: dict[str, int] = field(default_factory=dict)
    """Empresa fora do arquivo de chaves (ou recusada) -> linhas dela que ficaram de fora."""
    sem_escopo: int = 0
    """Linhas com a coluna de escopo vazia: de empresa nenhuma."""
    erro: str | None = None
    segundos: float = 0.0


class _Erros:
    """O erro da LEITURA, se houve: separa a origem que caiu do envio que falhou."""

    erro: BaseException | None = None


def _guardando(linhas: Iterable[Any], erros: _Erros) -> Iterator[Any]:
    """As linhas, anotando em `erros` a exceção que a origem levantar no meio."""
    iterador = iter(linhas)
    while True:
        try:
            linha = next(iterador)
        except StopIteration:
            return
        except BaseException as erro:
            erros.erro = erro
            raise
        yield linha


class _Copia:
    """O dataset de domínio lido uma vez, num arquivo temporário, relido a cada empresa."""

    def __init__(self) -> None:
        self._arquivo: IO[bytes] = tempfile.TemporaryFile(prefix='contextia-dominio-')
        self.linhas = 0

    def guardar(self, linhas: Iterable[Any]) -> None:
        bloco: list[Any] = []
        for linha in linhas:
            bloco.append(linha)
            self.linhas += 1
            if len(bloco) >= BLOCO_DA_COPIA:
                pickle.dump(bloco, self._arquivo, pickle.HIGHEST_PROTOCOL)
                bloco = []
        if bloco:
            pickle.dump(bloco, self._arquivo, pickle.HIGHEST_PROTOCOL)
        self._arquivo.flush()

    def ler(self) -> Iterator[dict[str, Any]]:
        # Cada empresa recebe dicts novos: o envio converte as linhas no lugar.
        self._arquivo.seek(0)
        while True:
            try:
                bloco = pickle.load(self._arquivo)   # noqa: S301 - o arquivo e nosso, temporario
            except EOFError:
                return
            yield from bloco

    def fechar(self) -> None:
        self._arquivo.close()


def aceita_ordem(origem: ModuleType) -> bool:
    """O `fetch` do adaptador aceita `ordem=` (a leitura em ordem de empresa)?"""
    try:
        return 'ordem' in inspect.signature(origem.fetch).parameters
    except (TypeError, ValueError):
        return False


def carregar_dataset_todas(mapa: Mapping[str, Any], row: Mapping[str, Any],
                           origem: ModuleType, empresas: Sequence[Empresa], *,
                           seco: bool = False, max_remocao: float = padroes.MAX_REMOCAO,
                           barra: bool = False,
                           progresso: Callable[[str], None] | None = None,
                           intervalo_progresso: float = padroes.INTERVALO_PROGRESSO,
                           historico: Historico | None = None, execucao: str | None = None,
                           em_voo: int = padroes.LOTES_EM_VOO) -> LeituraDoDataset:
    """
    Um dataset para todas as empresas ativas: uma leitura, repartida.

    Acrescenta um ResultadoCarga a `resultados` de cada empresa ativa no início
    (a que tem a chave recusada no meio fica recusada para os datasets
    seguintes, como o connector dela parava) e devolve o que a leitura fez.
    Nunca levanta: a leitura que cai vira o erro de cada empresa, sem complete.
    """
    from contextia_sync.intake import cliente

    nome = cliente.normalizar_dataset(row['dataset'])
    coluna = mapeamento.coluna_de_recorte(mapa, row)
    campos = mapeamento.semantica(mapa, row)[1]
    ativas = {e.escopo: e for e in empresas if e.ativa}
    resultados = {escopo: ResultadoCarga(dataset=nome, campos=len(campos or ()),
                                         dominio=coluna is None,
                                         sem_key=mapeamento.chave_de(mapa, row) is None)
                  for escopo in ativas}
    leitura = LeituraDoDataset(nome, dominio=coluna is None)
    if not ativas:
        return leitura
    inicio = time.monotonic()
    contador = [0]
    total: int | None = None
    avisar: Callable[[int, float], None] | None = None
    if progresso is not None:
        def avisar(lidos: int, segundos: float) -> None:
            progresso(linha_de_progresso(nome, 'todas', lidos, total, segundos))
    erros = _Erros()
    # As empresas ja enviadas por inteiro, esperando o fim da leitura: {escopo: sync}.
    pendentes: dict[str, str] = {}

    def ler(escopo: str | None = None) -> tuple[Iterator[Any], Mapping[str, str] | None]:
        """Uma leitura do dataset: a de todas as empresas em ordem, ou a de uma só."""
        leitura.leituras += 1
        if escopo is not None:
            linhas = origem.fetch(row['source_object'], row['columns'], scope=(coluna, escopo))
        elif coluna is not None:
            linhas = origem.fetch(row['source_object'], row['columns'], ordem=coluna)
        else:
            linhas = origem.fetch(row['source_object'], row['columns'])
        # Os tipos do resultado (so o adaptador generico os da): um conversor por coluna.
        familias = getattr(origem, 'familias', lambda _linhas: None)(linhas)
        contadas = _contando(linhas, contador, barra, nome, avisar, intervalo_progresso, total)
        return _guardando(contadas, erros), familias

    def entregar(escopo: str, linhas: Iterable[Any],
                 familias: Mapping[str, str] | None) -> None:
        """As linhas de uma empresa sob o sync dela; o complete espera o fim da leitura."""
        empresa, resultado = ativas[escopo], resultados[escopo]
        comeco = time.monotonic()
        try:
            if seco:
                contadas = _Contadas(linhas)
                _conferir_linhas(resultado, contadas, escopo, row['source_object'],
                                 mapeamento.chave_de(mapa, row))
                resultado.registros += contadas.n
                pendentes[escopo] = ''
                return
            sync = enviar_sob_sync(resultado, mapa, row, linhas, api_key=empresa.chave,
                                   escopo=escopo, em_voo=em_voo, familias=familias)
            if sync is not None:
                pendentes[escopo] = sync
        except Exception as erro:
            if erros.erro is not None:
                raise                       # a leitura caiu: o dataset inteiro falha
            _falhou(empresa, resultado, erro)
        finally:
            resultado.segundos += time.monotonic() - comeco

    try:
        if barra or progresso is not None:
            total = contar_para_o_progresso(origem, row['source_object'], None)
        if coluna is None:
            _dominio(ler, entregar, ativas)
        elif aceita_ordem(origem):
            _em_ordem(leitura, ler, entregar, coluna, ativas, resultados, pendentes)
        else:
            logger.warning('o adaptador %s não aceita fetch(..., ordem=): %s lido uma vez por'
                           ' empresa (%d leituras), no mesmo processo',
                           getattr(origem, '__name__', '?'), nome, len(ativas))
            for escopo in list(ativas):
                if ativas[escopo].ativa:
                    linhas, familias = ler(escopo)
                    entregar(escopo, linhas, familias)
        leitura.linhas = contador[0]
        # A leitura chegou ao fim: empresa sem linha nenhuma ainda recebe o seu
        # sync vazio (o complete dele tira o que ela tinha, dentro do teto).
        for escopo, empresa in ativas.items():
            if escopo not in pendentes and empresa.ativa and resultados[escopo].erro is None:
                entregar(escopo, (), None)
        for escopo, sync in pendentes.items():
            _fechar(ativas[escopo], resultados[escopo], sync, seco=seco,
                    max_remocao=max_remocao, historico=historico, execucao=execucao)
        if historico is not None and not seco:
            _gravar_historico(historico, resultados, execucao)
    except Exception as erro:                   # noqa: BLE001 - vira o erro de cada empresa
        leitura.linhas = contador[0]
        leitura.erro = '%s: %s' % (type(erro).__name__, erro)
        for resultado in resultados.values():
            if not resultado.ok and resultado.erro is None:
                resultado.erro = (
                    'a leitura de %s caiu depois de %d linha(s) (%s): complete NÃO enviado'
                    ' em nenhuma empresa, nada removido' % (row['source_object'],
                                                            contador[0], leitura.erro))
                resultado.motivo = 'a leitura caiu: %s' % leitura.erro
    finally:
        leitura.segundos = time.monotonic() - inicio
        for escopo, resultado in resultados.items():
            ativas[escopo].resultados.append(resultado)
    return leitura


class _Contadas:
    """As linhas de uma empresa, contadas (o seco diz quantas leu)."""

    def __init__(self, linhas: Iterable[Any]) -> None:
        self._linhas = linhas
        self.n = 0

    def __iter__(self) -> Iterator[Any]:
        for linha in self._linhas:
            self.n += 1
            yield linha


def _falhou(empresa: Empresa, resultado: ResultadoCarga, erro: Exception) -> None:
    """O envio de UMA empresa falhou: sem complete nela; as outras seguem."""
    from contextia_sync.intake import cliente

    if isinstance(erro, cliente.ErroAutenticacao):
        # A chave caiu no meio (revogada?): nenhum dataset seguinte passaria.
        empresa.recusa = str(erro)
        resultado.erro = '%s -- complete NÃO enviado, nada removido' % erro
        resultado.motivo = 'chave recusada pelo Contextia'
    else:
        resultado.erro = '%s: %s -- complete NÃO enviado, nada removido' % (
            type(erro).__name__, erro)


def _fechar(empresa: Empresa, resultado: ResultadoCarga, sync: str, *, seco: bool,
            max_remocao: float, historico: Historico | None, execucao: str | None) -> None:
    """O complete de uma empresa, depois do fim da leitura; a falha dele fica nela."""
    if resultado.erro is not None:
        return
    if seco:
        resultado.ok = not resultado.recusadas
        return
    comeco = time.monotonic()
    try:
        fechar_carga(resultado, sync, api_key=empresa.chave, escopo=empresa.escopo,
                     max_remocao=max_remocao, historico=historico, execucao=execucao,
                     gravar_historico=False)
    except Exception as erro:                   # noqa: BLE001 - uma empresa nao derruba as outras
        resultado.ok = False
        _falhou(empresa, resultado, erro)
    finally:
        resultado.segundos += time.monotonic() - comeco


def _gravar_historico(historico: Historico, resultados: Mapping[str, ResultadoCarga],
                      execucao: str | None) -> None:
    """As cargas aceitas do dataset, todas as empresas numa gravação (um fsync, não S)."""
    aceitas = [(escopo, r.dataset, r.registros, r.removidos)
               for escopo, r in resultados.items() if r.ok]
    try:
        historico.registrar_varias(aceitas, execucao)
    except OSError as erro:
        # As cargas valeram; so a base do proximo teto (e o aviso ao ouvinte) nao.
        for resultado in resultados.values():
            if resultado.ok:
                resultado.aviso = 'histórico não gravado em %s (%s)' % (historico.caminho, erro)


def _em_ordem(leitura: LeituraDoDataset,
              ler: Callable[..., tuple[Iterator[Any], Mapping[str, str] | None]],
              entregar: Callable[[str, Iterable[Any], Mapping[str, str] | None], None],
              coluna: str, ativas: Mapping[str, Empresa],
              resultados: Mapping[str, ResultadoCarga], pendentes: dict[str, str]) -> None:
    """A leitura em ordem de empresa, cada trecho contíguo entregue à empresa dele."""
    linhas, familias = ler()
    vistas: set[str] = set()
    # groupby: ao pedir a empresa seguinte, o resto da anterior (a que falhou ou
    # nao tem chave) e lido e descartado -- a leitura nunca para no meio.
    def empresa_da(linha: Mapping[str, Any]) -> str:
        return texto_escopo(linha.get(coluna))

    for escopo, trecho in itertools.groupby(linhas, key=empresa_da):
        if not escopo:
            leitura.sem_escopo += sum(1 for _ in trecho)
            continue
        if escopo in vistas:
            _fora_de_ordem(escopo, coluna, resultados.get(escopo), pendentes)
            if escopo not in ativas:
                leitura.sem_chave[escopo] = leitura.sem_chave.get(escopo, 0) + sum(
                    1 for _ in trecho)
            continue
        vistas.add(escopo)
        empresa = ativas.get(escopo)
        if empresa is None or not empresa.ativa:
            leitura.sem_chave[escopo] = sum(1 for _ in trecho)
            continue
        entregar(escopo, trecho, familias)


def _fora_de_ordem(escopo: str, coluna: str, resultado: ResultadoCarga | None,
                   pendentes: dict[str, str]) -> None:
    """
    A empresa voltou depois de outra: valores que só viram a mesma empresa sem os
    espaços das pontas (' 297' e '297') não ficam juntos na ordem do banco. O
    trecho novo não entra no sync dela, então o complete removeria essas linhas:
    a empresa falha, sem complete (e por isso nenhum complete sai antes do fim).
    """
    logger.error('empresa %s apareceu de novo na leitura ordenada por %s: valores de escopo'
                 ' que só diferem em espaços nas pontas?', escopo, coluna)
    pendentes.pop(escopo, None)
    if resultado is not None and resultado.erro is None:
        resultado.ok = False
        resultado.erro = (
            'a empresa %s apareceu em dois trechos da leitura ordenada por %s -- valores da'
            ' coluna que só viram %s sem os espaços das pontas (ex.: " %s" e "%s"): complete'
            ' NÃO enviado, nada removido. Corrija na view (TRIM(%s) AS %s) ou carregue-a'
            ' sozinha com --scope=%s' % (escopo, coluna, escopo, escopo, escopo, coluna,
                                         coluna, escopo))
        resultado.motivo = 'empresa em dois trechos da leitura (escopo com espaços)'


def _dominio(ler: Callable[..., tuple[Iterator[Any], Mapping[str, str] | None]],
             entregar: Callable[[str, Iterable[Any], Mapping[str, str] | None], None],
             ativas: Mapping[str, Empresa]) -> None:
    """A tabela de domínio: lida uma vez inteira, e só então enviada a cada empresa."""
    linhas, familias = ler()
    copia = _Copia()
    try:
        # Lida ATE O FIM antes do primeiro envio: a leitura que cai aqui nao
        # deixou sync aberto em empresa nenhuma.
        copia.guardar(linhas)
        for escopo, empresa in ativas.items():
            if empresa.ativa:
                entregar(escopo, copia.ler(), familias)
    finally:
        copia.fechar()


def linha_da_leitura(leitura: LeituraDoDataset, empresas: int) -> str:
    """A linha que o connector imprime por dataset: a leitura, não as empresas."""
    texto = '  %-34s %d leitura(s), %d linha(s) para %d empresa(s)  %.1fs' % (
        leitura.dataset + (' (domínio)' if leitura.dominio else ''), leitura.leituras,
        leitura.linhas, empresas, leitura.segundos)
    if leitura.sem_chave:
        nomes = sorted(leitura.sem_chave)
        texto += ('; %d linha(s) de %d empresa(s) sem chave nesta execução ficaram de fora'
                  ' (%s%s)' % (sum(leitura.sem_chave.values()), len(nomes),
                               ', '.join(nomes[:SEM_CHAVE_NOMEADAS]),
                               ' ...' if len(nomes) > SEM_CHAVE_NOMEADAS else ''))
    if leitura.sem_escopo:
        texto += '; %d linha(s) sem empresa (escopo vazio) ficaram de fora' % leitura.sem_escopo
    if leitura.erro:
        texto += ' -- A LEITURA CAIU: %s' % leitura.erro
    return texto
