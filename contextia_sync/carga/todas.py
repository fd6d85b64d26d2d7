"""
A carga completa de TODAS as empresas do arquivo de chaves numa execução do
connector (`connector.py --todas`, o que o carregar-todas.sh roda): UMA leitura
por dataset, repartida para a chave de cada empresa.

Antes eram um processo e D leituras por empresa (D×S leituras para S
empresas); agora, um processo e D leituras (mais, com o progresso ligado --
o `connector.py` sempre o liga --, um `COUNT(*)` por dataset para o total e a
estimativa, como na carga de uma empresa). O que continua por empresa:

  * o `sync` dela e o `complete` dela, com o teto de remoção dela: cada empresa
    é um projeto, e o servidor confere o teto contra o dataset daquele projeto;
  * lote que falha numa empresa (o Contextia recusando a chave dela, um 500 só
    para ela) impede o `complete` NELA; as linhas seguintes dela são lidas e
    descartadas, e as outras seguem na mesma leitura;
  * o `complete` de cada empresa só sai depois que a leitura do dataset chegou
    ao fim. Uma leitura que cai no meio não fecha empresa nenhuma: na leitura
    sem ordem, qualquer empresa ainda pode ter linha por vir;
  * o Contextia que fica indisponível no meio (um lote ou um `complete` sem
    resposta, ou sobrecarregado, durante todo o prazo: `ResultadoEnvio.
    interrompido`, `ErroIndisponivel`) para a EXECUÇÃO inteira (`ContextiaFora`):
    ele é o mesmo para todas as empresas, e seguir faria cada lote e cada
    `complete` de cada empresa, e depois cada dataset, esperar o próprio prazo
    (com 50 empresas, horas) para falhar igual. As empresas que já tinham
    fechado o dataset valem; as outras não fecham, todas ficam de fora dos
    datasets seguintes com a causa dita, e o próximo ciclo tenta de novo.

A leitura é SEM ORDER BY (`_Reparticao`): a varredura sequencial custa o mesmo
com 1 ou com 50 empresas, e a leitura em ordem de empresa não -- com as
empresas intercaladas no disco o PostgreSQL a faz pelo índice da empresa,
saltando no heap: 1,8× a mesma leitura de uma empresa só (bench/bench_varredura.py,
linhas "crua ORDER BY"; a carga inteira em ordem custava 1,5×). Cada linha vai
para o buffer da empresa dela; o buffer sai como lote ao chegar ao chunk, e os
lotes de todas as empresas dividem os mesmos `em_voo` envios ao mesmo tempo.
A linha vira o JSON dela AO SER LIDA (`cliente.preparador_de_prontos`, o
mesmo plano e o mesmo corpo do envio): guardada como dict até o lote sair,
ela esfriava no cache entre as linhas das outras 49 empresas, e serializá-la
depois custava ~1/3 a mais de CPU (medido: mesma leitura, 50 buffers contra 1).
O JSON (~310 bytes numa linha de 12 colunas) ocupa ~1/3 do dict (~980). A
soma dos buffers tem teto (padroes.LINHAS_REPARTIDAS): passando dele, os
maiores saem antes, incompletos -- a memória não cresce com o número de
empresas (no máximo o teto, mais os lotes em voo). Medido (1M linhas,
PostgreSQL, mediana de 3, duas rodadas): 50 empresas custam 0,92× e 1,07× uma
(com a leitura em ordem de antes, 1,32× e 1,49×); a de uma empresa, o mesmo
que antes, dentro do ruído.

Lotes de uma empresa em voo juntos podem chegar fora de ordem, como os
`em_voo` da carga de uma empresa: numa leitura completa cada key
aparece uma vez (e sem key o servidor deduplica por hash), então nenhuma versão
ultrapassa outra. Sem filtro na leitura: a empresa sem chave nesta execução é
lida e contada (a linha do dataset a diz), como a leitura em ordem já fazia; um
`IN (empresas)` dá o mesmo plano no PostgreSQL (varredura sequencial com o
filtro, medido: o mesmo tempo) quando o arquivo tem quase todas as empresas,
que é o caso do carregar-todas. O tamanho do FETCH do cursor de servidor
(`yield_per` do adaptador) não pesa: a leitura crua sem ordem com 500 e com
2000 linhas por FETCH deu o mesmo tempo.

A empresa de cada linha é `texto_escopo` da coluna de escopo, a regra do ao
vivo (captura/ao_vivo.py: agrupar_por_escopo): ' 297' e '297' são a mesma
empresa e caem no mesmo buffer. Linha de empresa sem chave (fora do arquivo,
ou recusada nesta execução) não vai a lugar nenhum; a contagem delas é dita na
linha do dataset.

O dataset sem recorte (domínio, `scope_column: null`) vai inteiro para cada
empresa: lido uma vez para um arquivo temporário (a memória não cresce com ele)
e reenviado dali a cada empresa.
"""

from __future__ import annotations

import pickle
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Literal, cast

from contextia_sync.origem import AdaptadorDeOrigem
from contextia_sync import mapeamento, padroes
from contextia_sync.carga.completa import (
    Conferencia,
    ResultadoCarga,
    ErroKeyNaoUnica,
    _conferir_linhas,
    _contando,
    anotar_chaves,
    argumentos_do_envio,
    avisar_chaves,
    contar_para_o_progresso,
    encurtar,
    enviar_sob_sync,
    fechar_carga,
    linha_de_progresso,
    somar_envio,
    texto_das_apagadas,
    triagem_da_carga,
)
from contextia_sync.escopos import REGRA, codigo_invalido, problema_no_escopo, texto_escopo
from contextia_sync.origem.marca_apagada import MarcaDeApagado, argumento
from contextia_sync.registro import limpo, logger
from contextia_sync.tipos import DatasetDoMapa, Linha, Mapa, ValorDoBanco

if TYPE_CHECKING:
    from contextia_sync.carga.historico import Historico
    from contextia_sync.intake.chaves import Triagem
    from orjson import Fragment

    from contextia_sync.intake.cliente import ResultadoEnvio
    from contextia_sync.intake.lotes import Lido

# Linhas por bloco no arquivo temporário do dataset de domínio.
BLOCO_DA_COPIA = 1000
# Quantas empresas sem chave a linha do dataset nomeia (todas são contadas).
SEM_CHAVE_NOMEADAS = 5
# Quantas empresas sem chave uma leitura conta uma a uma; as linhas das seguintes
# são contadas juntas. Uma coluna de escopo com um valor por linha (o mapeamento
# apontando a coluna errada) não enche a memória de contadores.
SEM_CHAVE_CONTADAS = 10000


class ContextiaFora(Exception):
    """O Contextia não respondeu a um lote dentro do prazo: a carga de todas para."""


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
    sem_chave_alem: int = 0
    """As linhas das empresas sem chave além das SEM_CHAVE_CONTADAS primeiras, juntas."""
    sem_escopo: int = 0
    """Linhas com a coluna de escopo vazia: de empresa nenhuma."""
    invalidos: dict[str, int] = field(default_factory=dict)
    """Código de empresa inválido (`escopos.codigo_invalido`) -> linhas que ficaram de fora."""
    erro: str | None = None
    segundos: float = 0.0
    lotes: int = 0
    """Lotes enviados (ou conferidos, no seco) de todas as empresas juntas."""
    lotes_incompletos: int = 0
    """Deles, os que saíram antes do chunk porque a soma dos buffers chegou ao teto."""
    maior_retencao: int = 0
    """O máximo de linhas nos buffers por empresa ao mesmo tempo (nunca passa do teto)."""
    teto: int = 0
    """O teto daquela soma nesta leitura."""
    fora: str | None = None
    """O Contextia ficou indisponível nesta leitura (o erro do lote): a execução para."""
    apagadas: str | None = None
    """Seco: quantas linhas a marca de apagado deixa fora (`completa.texto_das_apagadas`)."""
    chaves_nulas: int = 0
    """Linhas com a key nula, de todas as empresas: ficaram de fora (intake/chaves.py)."""
    repetidas: list[str] = field(default_factory=list)
    """As keys repetidas nomeadas; de cada uma foi só a linha da regra (intake/chaves.py)."""


class _Erros:
    """O erro da LEITURA, se houve: separa a origem que caiu do envio que falhou."""

    erro: BaseException | None = None


def _guardando(linhas: Iterable[Linha], erros: _Erros) -> Iterator[Linha]:
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

    def guardar(self, linhas: Iterable[Linha]) -> None:
        bloco: list[Linha] = []
        for linha in linhas:
            bloco.append(linha)
            self.linhas += 1
            if len(bloco) >= BLOCO_DA_COPIA:
                pickle.dump(bloco, self._arquivo, pickle.HIGHEST_PROTOCOL)
                bloco = []
        if bloco:
            pickle.dump(bloco, self._arquivo, pickle.HIGHEST_PROTOCOL)
        self._arquivo.flush()

    def ler(self) -> Iterator[Linha]:
        # Cada empresa recebe dicts novos: o envio converte as linhas no lugar.
        self._arquivo.seek(0)
        while True:
            try:
                bloco = pickle.load(self._arquivo)  # noqa: S301 - o arquivo e nosso, temporario
            except EOFError:
                return
            yield from bloco

    def fechar(self) -> None:
        self._arquivo.close()


def carregar_dataset_todas(
    mapa: Mapa,
    row: DatasetDoMapa,
    origem: AdaptadorDeOrigem,
    empresas: Sequence[Empresa],
    *,
    seco: bool = False,
    max_remocao: float = padroes.MAX_REMOCAO,
    barra: bool = False,
    progresso: Callable[[str], None] | None = None,
    intervalo_progresso: float = padroes.INTERVALO_PROGRESSO,
    historico: Historico | None = None,
    execucao: str | None = None,
    em_voo: int = padroes.LOTES_EM_VOO,
    teto_linhas: int = padroes.LINHAS_REPARTIDAS,
) -> LeituraDoDataset:
    """
    Um dataset para todas as empresas ativas: uma leitura, repartida.

    Acrescenta um ResultadoCarga a `resultados` de cada empresa ativa no início
    (a que tem a chave recusada no meio fica recusada para os datasets
    seguintes, como o connector dela parava) e devolve o que a leitura fez.
    Nunca levanta: a leitura que cai vira o erro de cada empresa, sem complete.
    `teto_linhas`: o teto da soma dos buffers por empresa (ver `_Reparticao`).
    """
    opcoes = _Opcoes(
        seco=seco,
        max_remocao=max_remocao,
        barra=barra,
        progresso=progresso,
        intervalo_progresso=intervalo_progresso,
        historico=historico,
        execucao=execucao,
        em_voo=em_voo,
        teto_linhas=teto_linhas,
    )
    carga = _CargaDoDataset(mapa, row, origem, empresas, opcoes)
    if carga.ativas:
        carga.rodar()
    return carga.leitura


@dataclass(frozen=True)
class _Opcoes:
    """As opções da execução que valem para cada dataset (as de `carregar_dataset_todas`)."""

    seco: bool
    max_remocao: float
    barra: bool
    progresso: Callable[[str], None] | None
    intervalo_progresso: float
    historico: Historico | None
    execucao: str | None
    em_voo: int
    teto_linhas: int


class _CargaDoDataset:
    """
    Um dataset para todas as empresas, em etapas: `_ler` (a leitura, repartida
    ou, no domínio, copiada), `_sync_vazio` (a empresa sem linha nenhuma),
    `_fechar_todas` (o complete de cada uma, depois do fim da leitura) e o
    histórico. A queda de cada etapa vira o erro das empresas em `rodar`.
    """

    def __init__(
        self,
        mapa: Mapa,
        row: DatasetDoMapa,
        origem: AdaptadorDeOrigem,
        empresas: Sequence[Empresa],
        opcoes: _Opcoes,
    ) -> None:
        from contextia_sync.intake.cliente import normalizar_dataset

        self.mapa, self.row, self.origem, self.opcoes = mapa, row, origem, opcoes
        self.nome = normalizar_dataset(row['dataset'])
        self.coluna = mapeamento.coluna_de_recorte(mapa, row)
        # A linha marcada como apagada nem é lida: o complete de cada empresa a tira.
        self.marca = MarcaDeApagado.do_dataset(mapa, row)
        campos = mapeamento.semantica(mapa, row)[1]
        self.ativas = {e.escopo: e for e in empresas if e.ativa}
        self.resultados = {
            escopo: ResultadoCarga(
                dataset=self.nome,
                campos=len(campos or ()),
                dominio=self.coluna is None,
                sem_key=mapeamento.chave_de(mapa, row) is None,
            )
            for escopo in self.ativas
        }
        self.leitura = LeituraDoDataset(self.nome, dominio=self.coluna is None)
        self.contador = [0]
        self.total: int | None = None
        self.erros = _Erros()
        self.pendentes: dict[str, str] = {}
        """As empresas já enviadas por inteiro, esperando o fim da leitura: {escopo: sync}."""
        self.triagem: Triagem | None = None
        """A key nula e a repetida desta leitura (`completa.triagem_da_carga`)."""

    def rodar(self) -> None:
        """As etapas; nunca levanta (a queda vira o erro de cada empresa)."""
        inicio = time.monotonic()
        historico = None if self.opcoes.seco else self.opcoes.historico
        try:
            if self.opcoes.barra or self.opcoes.progresso is not None:
                self.total = contar_para_o_progresso(
                    self.origem, self.row['source_object'], None, self.marca
                )
            self.triagem = triagem_da_carga(self.mapa, self.row, self.origem, self.marca)
            self._ler()
            self.leitura.linhas = self.contador[0]
            self._anotar_chaves()
            if self.opcoes.seco:
                self.leitura.apagadas = texto_das_apagadas(
                    self.origem, self.row, None, self.marca, self.nome
                )
            self._sync_vazio()
            self._fechar_todas()
            if historico is not None:
                _gravar_historico(historico, self.resultados, self.opcoes.execucao)
        except ContextiaFora as erro:
            self.leitura.linhas = self.contador[0]
            self.leitura.fora = str(erro)
            _parar_por_contextia_fora(self.nome, str(erro), self.ativas, self.resultados)
            if historico is not None:
                # As que fecharam antes da queda valeram: a base do próximo teto delas.
                _gravar_historico(historico, self.resultados, self.opcoes.execucao)
        except ErroKeyNaoUnica as erro:
            # Antes de ler: nada enviado a empresa nenhuma, a correção é do mapeamento.
            self.leitura.repetidas = [str(erro)]
            for resultado in self.resultados.values():
                resultado.erro, resultado.motivo = str(erro), 'a key não é única na view'
        except Exception as erro:  # noqa: BLE001 - vira o erro de cada empresa
            self.leitura.linhas = self.contador[0]
            self.leitura.erro = '%s: %s' % (type(erro).__name__, erro)
            self._parou()
        finally:
            self.leitura.segundos = time.monotonic() - inicio
            for escopo, resultado in self.resultados.items():
                self.ativas[escopo].resultados.append(resultado)

    # -- as etapas ---------------------------------------------------------------
    def _ler(self) -> None:
        """A leitura inteira: copiada (domínio) ou repartida por empresa."""
        if self.coluna is None:
            _dominio(self.ler, self.entregar, self.ativas, self.triagem)
            return
        opcoes = self.opcoes
        reparticao = _Reparticao(
            self.mapa,
            self.row,
            self.ativas,
            self.resultados,
            seco=opcoes.seco,
            em_voo=opcoes.em_voo,
            teto=opcoes.teto_linhas,
        )
        reparticao.triagem = self.triagem
        comeco = time.monotonic()
        try:
            reparticao.repartir(self.leitura, self.ler, self.coluna)
        finally:
            # Cada empresa esperou a leitura inteira: o tempo dela e o da leitura.
            for resultado in self.resultados.values():
                resultado.segundos += time.monotonic() - comeco
            self.leitura.maior_retencao = reparticao.maior_retencao
            self.leitura.teto = reparticao.teto
            self.leitura.lotes = reparticao.lotes
            self.leitura.lotes_incompletos = reparticao.incompletos
        self.pendentes.update(reparticao.pendentes)

    def _anotar_chaves(self) -> None:
        """O que a triagem deixou de fora: no resultado de cada empresa, na linha e no log."""
        from contextia_sync.intake.chaves import textos_repetidas

        triagem = self.triagem
        if triagem is None:
            return
        for escopo, resultado in self.resultados.items():
            anotar_chaves(resultado, triagem, escopo, dominio=self.coluna is None)
        self.leitura.chaves_nulas = triagem.total_nulas
        self.leitura.repetidas = textos_repetidas(triagem.repetidas)
        avisar_chaves(triagem, self.nome)

    def _sync_vazio(self) -> None:
        """A leitura chegou ao fim: empresa sem linha nenhuma ainda recebe o seu
        sync vazio (o complete dele tira o que ela tinha, dentro do teto)."""
        for escopo, empresa in self.ativas.items():
            if (
                escopo not in self.pendentes
                and empresa.ativa
                and self.resultados[escopo].erro is None
            ):
                self.entregar(escopo, (), None)

    def _fechar_todas(self) -> None:
        opcoes = self.opcoes
        for escopo, sync in self.pendentes.items():
            _fechar(
                self.ativas[escopo],
                self.resultados[escopo],
                sync,
                seco=opcoes.seco,
                max_remocao=opcoes.max_remocao,
                historico=opcoes.historico,
                execucao=opcoes.execucao,
            )

    def _parou(self) -> None:
        """A carga parou no meio: cada empresa que não fechou diz por quê, sem complete."""
        erro, linhas = self.leitura.erro, self.contador[0]
        caiu = self.erros.erro is not None
        for resultado in self.resultados.values():
            if resultado.ok or resultado.erro is not None:
                continue
            if caiu:
                resultado.erro = (
                    'a leitura de %s caiu depois de %d linha(s) (%s): complete NÃO'
                    ' enviado em nenhuma empresa, nada removido'
                    % (self.row['source_object'], linhas, erro)
                )
                resultado.motivo = 'a leitura caiu: %s' % erro
            else:
                # Nem a origem nem o envio de uma empresa: um defeito do SDK.
                resultado.erro = (
                    'a carga de %s parou depois de %d linha(s) lidas, fora da leitura'
                    ' e do envio (%s): complete NÃO enviado nesta empresa, nada'
                    ' removido. É um defeito do SDK: relate com este log; o próximo'
                    ' ciclo tenta de novo.' % (self.nome, linhas, erro)
                )
                resultado.motivo = 'a carga parou: %s' % erro

    # -- o que a leitura e a entrega chamam ----------------------------------------
    def _avisar(self, lidos: int, segundos: float) -> None:
        progresso = self.opcoes.progresso
        if progresso is not None:
            progresso(linha_de_progresso(self.nome, 'todas', lidos, self.total, segundos))

    def ler(self) -> tuple[Iterator[Linha], Mapping[str, str] | None]:
        """A leitura do dataset, de todas as empresas, sem ordem nem filtro."""
        self.leitura.leituras += 1
        try:
            linhas = self.origem.fetch(
                self.row['source_object'], self.row['columns'], **argumento(self.marca)
            )
        except BaseException as erro:
            self.erros.erro = erro  # a consulta nem abriu: a leitura caiu
            raise
        # Os tipos do resultado (so o adaptador generico os da): um conversor por coluna.
        familias = getattr(self.origem, 'familias', lambda _linhas: None)(linhas)
        opcoes = self.opcoes
        avisar = self._avisar if opcoes.progresso is not None else None
        contadas = _contando(
            linhas,
            self.contador,
            opcoes.barra,
            self.nome,
            avisar,
            opcoes.intervalo_progresso,
            self.total,
        )
        return _guardando(contadas, self.erros), familias

    def entregar(
        self, escopo: str, linhas: Iterable[Linha], familias: Mapping[str, str] | None
    ) -> None:
        """As linhas de uma empresa sob o sync dela; o complete espera o fim da leitura."""
        empresa, resultado = self.ativas[escopo], self.resultados[escopo]
        comeco = time.monotonic()
        try:
            if self.opcoes.seco:
                self._conferir(escopo, resultado, linhas)
                return
            sync = enviar_sob_sync(
                resultado,
                self.mapa,
                self.row,
                linhas,
                api_key=empresa.chave,
                escopo=escopo,
                em_voo=self.opcoes.em_voo,
                familias=familias,
            )
            if sync is not None:
                self.pendentes[escopo] = sync
        except Exception as erro:
            if self.erros.erro is not None:
                raise  # a leitura caiu: o dataset inteiro falha
            _falhou(empresa, resultado, erro)
        finally:
            resultado.segundos += time.monotonic() - comeco
        if resultado.interrompido:
            raise ContextiaFora(resultado.erro or 'o Contextia não respondeu')

    def _conferir(self, escopo: str, resultado: ResultadoCarga, linhas: Iterable[Linha]) -> None:
        """O seco: cada linha da empresa conferida, nada enviado."""
        contadas = _Contadas(linhas)
        _conferir_linhas(
            resultado,
            contadas,
            escopo,
            self.row['source_object'],
            mapeamento.chave_de(self.mapa, self.row),
        )
        resultado.registros += contadas.n
        self.pendentes[escopo] = ''


def _parar_por_contextia_fora(
    dataset: str,
    causa: str,
    ativas: Mapping[str, Empresa],
    resultados: Mapping[str, ResultadoCarga],
) -> None:
    """As que não fecharam este dataset não fecham; nenhuma segue para os próximos."""
    for resultado in resultados.values():
        if not resultado.ok and resultado.erro is None:
            resultado.erro = (
                'o Contextia ficou indisponível no meio da carga de %s (%s):'
                ' complete NÃO enviado, nada removido' % (dataset, causa)
            )
            resultado.motivo = 'Contextia indisponível no meio da carga'
    for empresa in ativas.values():
        if empresa.ativa:
            empresa.falha = (
                'Contextia indisponível no meio da carga de %s: a execução parou ali, sem'
                ' esperar o prazo de cada lote de cada empresa (o próximo ciclo tenta de'
                ' novo). Confira o Contextia (CONTEXTIA_URL) e a rede. Causa: %s'
                % (dataset, encurtar(causa, 300))
            )


class _Buffer(list['Lido']):  # entre aspas: a base roda no import, e Lido só existe para o mypy
    """
    As linhas de uma empresa esperando virar lote (a lista sabe de quem é): cada
    uma já pronta (o JSON dela, de `preparar`) ou, sem `preparar` (o seco, ou
    sem o orjson), a linha como a origem a deu.
    """

    __slots__ = ('escopo',)
    descarte: Literal[False] = False

    def __init__(self, escopo: str) -> None:
        super().__init__()
        self.escopo = escopo


class _Descarte:
    """O destino das linhas de uma empresa que não recebe nada: só as conta."""

    __slots__ = ('linhas',)
    descarte: Literal[True] = True

    def __init__(self) -> None:
        self.linhas = 0


# Quantos valores crus da coluna de escopo a repartição lembra (valor -> empresa).
# Coluna de escopo com um valor por linha (mapeamento errado) não enche a memória.
VALORES_LEMBRADOS = 100000


class _Reparticao:
    """
    A leitura sem ordem de um dataset, repartida por empresa em buffers.

    Cada linha vai para o buffer da empresa dela; o buffer que chega ao chunk
    sai como um lote (uma chamada de `cliente.enviar_dataset` com o `sync` da
    empresa e a parte seguinte). A soma dos buffers passando de `teto` linhas,
    os maiores saem antes, incompletos, até a soma cair à metade do teto: a
    memória fica no teto mais os lotes em voo, com 5 ou 5000 empresas. Nenhum
    lote passa do chunk.

    Os lotes de todas as empresas dividem um pool de `em_voo` envios: a leitura
    só espera quando todos estão ocupados. As respostas são somadas nesta
    thread (a da leitura), na ordem em que chegam. Lote que falha (ou chave
    recusada) tira a empresa da repartição: as linhas seguintes dela são
    contadas e descartadas, os lotes dela já em voo terminam, e ela não entra
    em `pendentes` (sem complete). As outras seguem.

    `pendentes` ({escopo: sync}) só é preenchido depois do fim da leitura e do
    último lote: a leitura que cai levanta daqui, sem empresa pendente.
    """

    def __init__(
        self,
        mapa: Mapa,
        row: DatasetDoMapa,
        ativas: Mapping[str, Empresa],
        resultados: Mapping[str, ResultadoCarga],
        *,
        seco: bool,
        em_voo: int,
        teto: int,
    ) -> None:
        from contextia_sync.intake import cliente

        self._cliente = cliente
        self.nome = cliente.normalizar_dataset(row['dataset'])
        self.row = row
        self.ativas, self.resultados = ativas, resultados
        self.seco = seco
        self.argumentos = argumentos_do_envio(mapa, row)
        # O seco confere cada linha ao le-la (nada a juntar para enviar).
        self.chunk = 1 if seco else max(1, int(self.argumentos['chunk'] or padroes.CHUNK))
        self.teto = max(1, int(teto))
        self.em_voo = max(1, int(em_voo))
        self.buffers: dict[str, _Buffer] = {}
        self.retidas = 0
        self.maior_retencao = 0
        self.lotes = 0
        self.incompletos = 0
        """Lotes que sairam antes do chunk pelo teto (o fim de cada empresa não conta)."""
        self.syncs: dict[str, str] = {}
        self.partes: dict[str, int] = {}
        self.balancos: dict[str, ResultadoEnvio] = {}
        self.conferencias: dict[str, Conferencia] = {}
        self.falhas: set[str] = set()
        self.descartes: dict[str, _Descarte] = {}
        self.destinos: dict[ValorDoBanco, _Buffer | _Descarte] = {}
        self.voo: dict[Future[ResultadoEnvio], str] = {}
        self.familias: Mapping[str, str] | None = None
        self.preparar: Callable[[Mapping[str, ValorDoBanco]], Fragment] | None = None
        self.pendentes: dict[str, str] = {}
        self.fora: str | None = None
        """O erro do primeiro lote que achou o Contextia indisponível: a leitura para."""
        self.alem = _Descarte()
        """As linhas sem chave além das SEM_CHAVE_CONTADAS empresas contadas uma a uma."""
        self.chave: str | None = self.argumentos['key']
        self.triagem: Triagem | None = None
        """A key nula e a repetida (`completa.triagem_da_carga`); quem cria a repartição a põe."""

    # -- a empresa de cada linha ------------------------------------------------
    def _destino(self, valor: ValorDoBanco) -> _Buffer | _Descarte:
        """O buffer (ou o descarte) das linhas com este valor cru de escopo."""
        escopo = texto_escopo(valor)
        if escopo in self.ativas and escopo not in self.falhas and self.ativas[escopo].ativa:
            destino: _Buffer | _Descarte | None = self.buffers.get(escopo)
            if destino is None:
                destino = self.buffers[escopo] = _Buffer(escopo)
        else:
            destino = self.descartes.get(escopo)
            if destino is None:
                if len(self.descartes) < SEM_CHAVE_CONTADAS or escopo in self.ativas:
                    destino = self.descartes[escopo] = _Descarte()
                else:
                    destino = self.alem  # contadas juntas
        try:
            if len(self.destinos) < VALORES_LEMBRADOS:
                self.destinos[valor] = destino
        except TypeError:  # valor sem hash: sem lembrar
            pass
        return destino

    def repartir(
        self,
        leitura: LeituraDoDataset,
        ler: Callable[[], tuple[Iterator[Linha], Mapping[str, str] | None]],
        coluna: str,
    ) -> None:
        """Lê o dataset inteiro, repartindo; devolve depois do último lote respondido."""
        from contextia_sync.intake.serializacao import ErroSerializacao

        linhas, self.familias = ler()
        pool = (
            ThreadPoolExecutor(max_workers=self.em_voo, thread_name_prefix='lote-todas')
            if not self.seco
            else None
        )
        self._pool = pool
        # Cada linha vira o JSON dela AO SER LIDA (ainda no cache): guardada como
        # dict ate o lote sair, ela esfria entre as linhas das outras empresas,
        # e serializa-la depois custava ~1/3 a mais (ver o docstring do modulo).
        self.preparar = None if self.seco else self._cliente.preparador_de_prontos(self.familias)
        try:
            self._distribuir(linhas, coluna, ErroSerializacao)
            self._repetidas_no_fim(ErroSerializacao)
            self._fim_da_leitura()
        finally:
            if pool is not None:
                # A leitura caiu: os lotes em voo terminam (partes de um sync que
                # nunca sera completado: inofensivos), sem esperar mais nada -- e as
                # respostas deles contam (a chave recusada no meio fica na empresa).
                pool.shutdown(wait=True)
                self._colher(todos=True)
            self._somar(leitura)
        self._anotar_pendentes()

    def _distribuir(self, linhas: Iterator[Linha], coluna: str, recusa: type[Exception]) -> None:
        """
        O laço por linha (o caminho quente: nada de chamada a mais por linha).

        Cada linha vai ao buffer da empresa dela (o destino lembrado pelo valor
        cru do escopo), já como JSON; o buffer no chunk sai como lote, e a soma
        no teto alivia os maiores.
        """
        destinos, chunk, teto, preparar = self.destinos, self.chunk, self.teto, self.preparar
        # A key nula (contada) e a que a origem disse repetida (espera o fim da
        # leitura) saem do caminho: intake/chaves.py. Sem key, nada se olha.
        triagem = self.triagem if self.chave is not None else None
        chave = self.chave if triagem is not None else None
        separar = triagem.separar if triagem is not None and triagem.suspeitas else None
        for linha in linhas:
            valor = linha.get(coluna)
            if chave is not None and linha.get(chave) is None:
                self._nula(valor, linha)
                continue
            try:
                destino = destinos.get(valor)
            except TypeError:
                destino = None
            if destino is None:
                destino = self._destino(valor)
            if destino.descarte:
                destino.linhas += 1  # sem chave, ou falhou: contada
                continue
            if separar is not None and separar(destino.escopo, linha):
                continue
            pronta: Lido = linha
            if preparar is not None:
                try:
                    pronta = preparar(linha)
                except recusa as erro:
                    self._recusar(destino.escopo, linha, erro)
                    continue
            destino.append(pronta)
            tamanho = len(destino)
            self.retidas += 1
            if tamanho >= chunk:
                self._despachar(destino)
            elif self.retidas >= teto:
                self._aliviar()
            else:
                continue
            if self.fora is not None:
                raise ContextiaFora(self.fora)

    def _nula(self, valor: ValorDoBanco, linha: Linha) -> None:
        """A linha de key nula: contada na empresa dela, fica de fora."""
        if self.triagem is not None:
            self.triagem.separar(texto_escopo(valor), linha)

    def _repetidas_no_fim(self, recusa: type[Exception]) -> None:
        """
        As linhas das keys que a origem disse repetidas esperaram o fim da
        leitura: de cada grupo, a que a regra escolhe vai ao buffer da empresa
        dela, como se lida agora (as outras ficam de fora, anotadas na triagem).
        """
        if self.triagem is None:
            return
        for escopo, linha in self.triagem.fim():
            if escopo is None or escopo in self.falhas or escopo not in self.ativas:
                continue  # a empresa falhou no meio: ela não fecha
            destino = self.buffers.get(escopo)
            if destino is None:
                destino = self.buffers[escopo] = _Buffer(escopo)
            pronta: Lido = linha
            if self.preparar is not None:
                try:
                    pronta = self.preparar(linha)
                except recusa as erro:
                    self._recusar(escopo, linha, erro)
                    continue
            destino.append(pronta)
            self.retidas += 1

    def _fim_da_leitura(self) -> None:
        """O resto de cada empresa sai; volta depois da resposta do último lote."""
        for buffer in list(self.buffers.values()):
            if buffer:
                self._despachar(buffer)
        self._colher(todos=True)
        if self.fora is not None:
            raise ContextiaFora(self.fora)

    def _anotar_pendentes(self) -> None:
        """Depois do último lote: as empresas inteiras esperam o complete ({escopo: sync})."""
        for escopo in self.ativas:
            if escopo in self.falhas or self.resultados[escopo].erro is not None:
                continue
            if escopo in self.syncs or escopo in self.conferencias:
                self.pendentes[escopo] = self.syncs.get(escopo, '')

    def _aliviar(self) -> None:
        """A soma dos buffers passou do teto: os maiores saem até ela cair à metade."""
        for buffer in sorted(self.buffers.values(), key=len, reverse=True):
            if self.retidas <= self.teto // 2:
                break
            if buffer:  # (o de uma empresa que falhou agora esta vazio)
                self.incompletos += 1
                self._despachar(buffer)

    def _despachar(self, buffer: _Buffer) -> None:
        """O buffer de uma empresa vira um lote: conferido (seco) ou enviado."""
        escopo = buffer.escopo
        if self.retidas > self.maior_retencao:
            self.maior_retencao = self.retidas
        lote = buffer.copy()
        buffer.clear()
        self.retidas -= len(lote)
        if escopo in self.falhas:
            return
        self.lotes += 1
        resultado = self.resultados[escopo]
        if self.seco:
            conferencia = self.conferencias.get(escopo)
            if conferencia is None:
                conferencia = self.conferencias[escopo] = Conferencia(
                    resultado, escopo, self.row['source_object'], self.argumentos['key']
                )
            # No seco não há `preparar`: o lote tem as linhas como a origem as deu.
            conferencia.conferir(cast('list[Linha]', lote))
            resultado.registros += len(lote)
            return
        while len(self.voo) >= self.em_voo:
            self._colher()
        if escopo in self.falhas or self.fora is not None:
            return  # falhou enquanto esperava a vaga
        self._submeter(escopo, lote)

    def _submeter(self, escopo: str, lote: list[Lido]) -> None:
        empresa = self.ativas[escopo]
        sync = self.syncs.get(escopo)
        if sync is None:
            sync = self.syncs[escopo] = self._cliente.gerar_sync()
            self.balancos[escopo] = self._cliente.ResultadoEnvio(self.nome)
        parte = self.partes.get(escopo, 0) + 1
        self.partes[escopo] = parte
        assert self._pool is not None
        futuro = self._pool.submit(
            self._cliente.enviar_dataset,
            self.nome,
            lote,
            api_key=empresa.chave,
            logger=logger,
            sync=sync,
            escopo=escopo,
            em_voo=1,
            parte=parte,
            familias=None if self.preparar is not None else self.familias,
            prontos=self.preparar is not None,
            **self.argumentos,
        )
        self.voo[futuro] = escopo

    def _colher(self, todos: bool = False) -> None:
        """Soma as respostas que chegaram (uma ao menos; `todos`: até o último lote)."""
        while self.voo:
            prontos, _ = wait(list(self.voo), return_when=FIRST_COMPLETED)
            for futuro in prontos:
                escopo = self.voo.pop(futuro)
                resultado = self.resultados[escopo]
                try:
                    envio = futuro.result()
                except Exception as erro:  # noqa: BLE001 - so esta empresa
                    self._tirar(escopo)
                    _falhou(self.ativas[escopo], resultado, erro)
                    continue
                balanco = self.balancos[escopo]
                for campo in (
                    'registros',
                    'inserted',
                    'updated',
                    'duplicates',
                    'lotes_ok',
                    'lotes_erro',
                ):
                    setattr(balanco, campo, getattr(balanco, campo) + getattr(envio, campo))
                balanco.erros.extend(envio.erros)
                if envio.interrompido and self.fora is None:
                    self.fora = (envio.erros or ['o Contextia não respondeu'])[-1]
                if envio.lotes_erro:
                    self._tirar(escopo)
            if not todos:
                return

    def _recusar(self, escopo: str, linha: Mapping[str, ValorDoBanco], erro: Exception) -> None:
        """Uma linha da empresa que não vira JSON: ela não fecha (o envio recusaria igual)."""
        from contextia_sync.fila.quarentena import descrever

        resultado = self.resultados[escopo]
        chave = self.argumentos['key']
        qual = descrever(self.nome, escopo, chave, linha.get(chave) if chave else None)
        logger.error('%s: %s -- as linhas seguintes dela não são enviadas', qual, erro)
        if resultado.erro is None:
            resultado.erro = '%s: %s -- complete NÃO enviado, nada removido' % (qual, erro)
            resultado.motivo = 'linha que não vira JSON, sem complete: %s' % erro
        self._tirar(escopo)

    def _tirar(self, escopo: str) -> None:
        """A empresa falhou: o buffer dela sai da memória e as linhas seguintes, do envio."""
        if escopo in self.falhas:
            return
        self.falhas.add(escopo)
        buffer = self.buffers.pop(escopo, None)
        descarte = self.descartes.setdefault(escopo, _Descarte())
        if buffer:
            self.retidas -= len(buffer)
            # Lidas e à espera do lote: descartadas como as que vierem depois.
            descarte.linhas += len(buffer)
            buffer.clear()
        for valor, destino in list(self.destinos.items()):
            if destino is buffer:
                self.destinos[valor] = descarte

    def _somar(self, leitura: LeituraDoDataset) -> None:
        """O que cada empresa enviou, no resultado dela; as linhas sem destino, na leitura."""
        for conferencia in self.conferencias.values():
            conferencia.fechar()
        for escopo, balanco in self.balancos.items():
            somar_envio(self.resultados[escopo], balanco)
        for escopo in self.falhas:
            resultado, descartadas = self.resultados[escopo], self.descartes.get(escopo)
            if descartadas is not None and descartadas.linhas and resultado.erro:
                resultado.erro += (
                    '; as outras %d linha(s) dela nesta leitura (as que'
                    ' esperavam o lote e as seguintes) foram lidas e'
                    ' descartadas' % descartadas.linhas
                )
        for escopo, descarte in self.descartes.items():
            if escopo in self.ativas:
                continue  # a que falhou: dito no erro dela
            if not escopo:
                leitura.sem_escopo += descarte.linhas
            elif problema_no_escopo(escopo):
                leitura.invalidos[escopo] = leitura.invalidos.get(escopo, 0) + descarte.linhas
            else:
                leitura.sem_chave[escopo] = leitura.sem_chave.get(escopo, 0) + descarte.linhas
        leitura.sem_chave_alem += self.alem.linhas


class _Contadas:
    """As linhas de uma empresa, contadas (o seco diz quantas leu)."""

    def __init__(self, linhas: Iterable[Linha]) -> None:
        self._linhas = linhas
        self.n = 0

    def __iter__(self) -> Iterator[Linha]:
        for linha in self._linhas:
            self.n += 1
            yield linha


def _falhou(empresa: Empresa, resultado: ResultadoCarga, erro: Exception) -> None:
    """O envio de UMA empresa falhou: sem complete nela; as outras seguem."""
    from contextia_sync.intake import cliente

    if isinstance(erro, cliente.ErroAutenticacao):
        # A chave caiu no meio (revogada?): nenhum dataset seguinte passaria.
        empresa.recusa = str(erro)
    if resultado.erro is not None:
        return  # a primeira causa fica (ela diz o conserto)
    if isinstance(erro, cliente.ErroAutenticacao):
        resultado.erro = '%s -- complete NÃO enviado, nada removido' % erro
        resultado.motivo = 'chave recusada pelo Contextia'
    else:
        resultado.erro = '%s: %s -- complete NÃO enviado, nada removido' % (
            type(erro).__name__,
            erro,
        )


def _fechar(
    empresa: Empresa,
    resultado: ResultadoCarga,
    sync: str,
    *,
    seco: bool,
    max_remocao: float,
    historico: Historico | None,
    execucao: str | None,
) -> None:
    """O complete de uma empresa, depois do fim da leitura; a falha dele fica nela."""
    if resultado.erro is not None:
        return
    if seco:
        resultado.ok = not resultado.recusadas
        return
    comeco = time.monotonic()
    from contextia_sync.intake.transporte import ErroIndisponivel

    try:
        fechar_carga(
            resultado,
            sync,
            api_key=empresa.chave,
            escopo=empresa.escopo,
            max_remocao=max_remocao,
            historico=historico,
            execucao=execucao,
            gravar_historico=False,
        )
    except ErroIndisponivel as erro:
        # O servidor, não esta empresa: os complete seguintes esperariam o prazo igual.
        raise ContextiaFora(str(erro)) from None
    except Exception as erro:  # noqa: BLE001 - uma empresa nao derruba as outras
        resultado.ok = False
        _falhou(empresa, resultado, erro)
    finally:
        resultado.segundos += time.monotonic() - comeco


def _gravar_historico(
    historico: Historico, resultados: Mapping[str, ResultadoCarga], execucao: str | None
) -> None:
    """As cargas aceitas do dataset, todas as empresas numa gravação (um fsync, não S)."""
    try:
        # Aceitas com o teto afrouxado (`nova_base`) recomeçam a janela delas; na
        # prática todas de uma execução são de um tipo só, e é uma gravação.
        for nova_base in (False, True):
            historico.registrar_varias(
                [
                    (escopo, r.dataset, r.linhas_da_view, r.removidos)
                    for escopo, r in resultados.items()
                    if r.ok and r.nova_base == nova_base
                ],
                execucao,
                nova_base=nova_base,
            )
    except OSError as erro:
        # As cargas valeram; so a base do proximo teto (e o aviso ao ouvinte) nao.
        for resultado in resultados.values():
            if resultado.ok:
                resultado.aviso = 'histórico não gravado em %s (%s)' % (historico.caminho, erro)


def _dominio(
    ler: Callable[[], tuple[Iterator[Linha], Mapping[str, str] | None]],
    entregar: Callable[[str, Iterable[Linha], Mapping[str, str] | None], None],
    ativas: Mapping[str, Empresa],
    triagem: Triagem | None = None,
) -> None:
    """A tabela de domínio: lida uma vez inteira, e só então enviada a cada empresa."""
    linhas, familias = ler()
    copia = _Copia()
    try:
        # Lida ATE O FIM antes do primeiro envio: a leitura que cai aqui nao
        # deixou sync aberto em empresa nenhuma.
        copia.guardar(triagem.filtrar(linhas, None) if triagem is not None else linhas)
        for escopo, empresa in ativas.items():
            if empresa.ativa:
                entregar(escopo, copia.ler(), familias)
    finally:
        copia.fechar()


def linha_da_leitura(leitura: LeituraDoDataset, empresas: int) -> str:
    """A linha que o connector imprime por dataset: a leitura, não as empresas."""
    texto = '  %-34s %d leitura(s), %d linha(s) para %d empresa(s)  %.1fs' % (
        leitura.dataset + (' (domínio)' if leitura.dominio else ''),
        leitura.leituras,
        leitura.linhas,
        empresas,
        leitura.segundos,
    )
    if leitura.sem_chave:
        # O codigo vem de uma linha do ERP: escapado (um '\n' nele forjaria uma linha).
        nomes = [limpo(n) for n in sorted(leitura.sem_chave)]
        texto += (
            '; %d linha(s) de %d empresa(s) sem chave nesta execução ficaram de fora'
            ' (%s%s)'
            % (
                sum(leitura.sem_chave.values()),
                len(nomes),
                ', '.join(nomes[:SEM_CHAVE_NOMEADAS]),
                ' ...' if len(nomes) > SEM_CHAVE_NOMEADAS else '',
            )
        )
    if leitura.invalidos:
        invalidos = sorted(leitura.invalidos)
        texto += (
            '; CÓDIGO DE EMPRESA INVÁLIDO em %d linha(s), que NÃO foram a empresa'
            ' nenhuma: %s%s -- corrija o código no ERP (%s)'
            % (
                sum(leitura.invalidos.values()),
                '; '.join(
                    str(codigo_invalido(c, com_motivo=False))
                    for c in invalidos[:SEM_CHAVE_NOMEADAS]
                ),
                ' ...' if len(invalidos) > SEM_CHAVE_NOMEADAS else '',
                REGRA,
            )
        )
    if leitura.sem_chave_alem:
        texto += (
            '; e mais %d linha(s) de empresas sem chave além dessas %d, contadas juntas:'
            ' tantas empresas assim é quase sempre a coluna de escopo errada no'
            ' mapeamento (scope_column) -- confira-a'
            % (leitura.sem_chave_alem, len(leitura.sem_chave))
        )
    if leitura.sem_escopo:
        texto += '; %d linha(s) sem empresa (escopo vazio) ficaram de fora' % leitura.sem_escopo
    if leitura.lotes_incompletos:
        # Lotes menores que o chunk: mais pedidos. Muitas empresas para o teto.
        texto += (
            '; %d de %d lote(s) saíram antes do chunk (teto de %d linhas nos buffers'
            ' por empresa, somados, padroes.LINHAS_REPARTIDAS): nada se perdeu, só'
            ' houve mais pedidos ao Contextia; com muitas empresas, um `chunk` menor'
            ' no mapeamento mantém os lotes cheios'
            % (leitura.lotes_incompletos, leitura.lotes, leitura.teto)
        )
    if leitura.apagadas:
        texto += '; %s' % leitura.apagadas
    if leitura.erro:
        texto += ' -- A LEITURA CAIU: %s' % leitura.erro
    if leitura.fora:
        texto += ' -- O CONTEXTIA FICOU INDISPONÍVEL: %s' % leitura.fora
    return texto + _de_fora_por_key(leitura)


def _de_fora_por_key(leitura: LeituraDoDataset) -> str:
    """Embaixo da linha do dataset: as keys nulas contadas e as repetidas nomeadas."""
    from contextia_sync.intake.chaves import aviso_das_nulas

    textos = list(leitura.repetidas)
    if leitura.chaves_nulas:
        textos.insert(0, aviso_das_nulas(leitura.chaves_nulas, leitura.dataset))
    return ''.join('\n      - %s' % texto for texto in textos)
