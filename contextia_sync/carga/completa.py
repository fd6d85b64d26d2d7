"""
A carga completa de UMA empresa: cada dataset lido da origem e entregue sob um
ciclo de carga (`sync` + `complete`). E a unica operacao do SDK que remove.

As regras que protegem o dado, cada uma ao lado da linha que a cumpre:

  * um `sync` por dataset, e `complete` so se TODOS os lotes daquele dataset
    deram certo. `complete` remove o que a carga nao trouxe; completar uma carga
    que perdeu um lote apagaria os registros daquele lote.
  * `complete` leva o teto de remocao (`max_remocao`, padrao
    `padroes.MAX_REMOCAO`). View que de repente devolve nada (manutencao do ERP,
    GRANT revogado, filtro errado) nao pode esvaziar o dataset: o servidor
    recusa e nada sai. O teto e ACUMULADO: a carga tambem e comparada com a
    maior carga aceita do dataset na empresa nos ultimos
    `padroes.JANELA_TETO_REMOCAO_DIAS` dias (o historico), senao rodadas
    seguidas, cada uma dentro do teto, esvaziariam o dataset aos poucos. No
    dataset SEM key so essa comparacao vale (ver `teto_do_complete`). Limpeza
    real acima do teto se pede com --max-remocao=1, e ela vira a nova base (ver
    docs/carga-e-provisionamento.md). `fechar_carga` e o unico lugar que decide:
    o conector por empresa e a carga de todas (todas.py) passam por ele.
  * tabela de dominio (`scope_column: null`) vai inteira para a empresa; com
    coluna de recorte, so as linhas da empresa (WHERE coluna = escopo).
  * a linha marcada como apagada (`deleted_when`, origem/marca_apagada.py) nao
    e lida (o WHERE a tira): o `complete` a remove do Contextia como a linha
    que sumiu. O seco conta quantas sao (`texto_das_apagadas`).

O que o seco (`connector.py --dry-run`) prova, e onde:

  * `conferir_colunas` / `conferir_catalogo`: toda coluna do mapeamento (columns,
    key, watch_column, scope_column, fields e as do cadastro `projects`) existe
    no catalogo da origem, sem caixa como o adaptador resolve -- todas as
    ausentes numa lista, com o nome mais parecido. O `ouvinte.py --dry-run`
    chama a mesma funcao.
  * `conferir_escopo`: a empresa esta no cadastro (`projects`); desconhecida e
    recusada (ErroEscopoDesconhecido, saida 2), no seco e na carga real.
  * `carregar_dataset(seco=True)`: cada linha passa por `conferir_registro`, a
    MESMA serializacao do envio real (serializar_registro + o json.dumps do
    envelope, allow_nan=False); as que nao passam sao contadas e as primeiras
    ditas com o motivo e a correcao.

O conector (contextia_sync/cli/conector.py) e a casca de linha de comando; aqui
so ha logica.
"""

from __future__ import annotations

import datetime
import decimal
import difflib
import json
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, TypedDict, TypeVar

from contextia_sync.origem import AdaptadorDeOrigem
from contextia_sync import mapeamento, padroes
from contextia_sync.erros import ErroConfiguracao
from contextia_sync.escopos import texto_escopo
from contextia_sync.origem.marca_apagada import MarcaDeApagado, argumento
from contextia_sync.registro import limpo, logger
from contextia_sync.tipos import DatasetDoMapa, Mapa, ValorDoBanco

if TYPE_CHECKING:
    from contextia_sync.carga.historico import CargaAceita, Historico
    from contextia_sync.intake.chaves import Triagem
    from contextia_sync.intake.cliente import ResultadoEnvio

T = TypeVar('T')


@dataclass
class ResultadoCarga:
    """O que `carregar_dataset` fez com um dataset de uma empresa."""

    dataset: str
    ok: bool = False
    registros: int = 0
    novos: int = 0
    atualizados: int = 0
    iguais: int = 0
    removidos: int = 0
    campos: int = 0
    """Campos com descrição semantica no mapeamento."""
    dominio: bool = False
    """Sem coluna de recorte: a tabela vai inteira para a empresa."""
    erro: str | None = None
    segundos: float = 0.0
    sem_key: bool = False
    base: int | None = None
    """Os registros da carga aceita contra a qual o teto comparou (a maior da janela)."""
    nova_base: bool = False
    """Aceita com o teto acima do padrão: no histórico ela recomeça a janela (a nova base)."""
    aviso: str | None = None
    """A carga valeu, mas algo ao lado dela não (ex.: o histórico não foi gravado)."""
    recusadas: int = 0
    """Seco: linhas que não viram JSON (a carga real recusaria o dataset nelas)."""
    detalhes: list[str] = field(default_factory=list)
    """As primeiras recusas (ou problemas), uma por linha, com o motivo e a correção."""
    motivo: str | None = None
    """O erro em poucas palavras, para a linha de resumo (None: o `erro` encurtado)."""
    interrompido: bool = False
    """O envio parou porque o Contextia não respondeu dentro do prazo (ResultadoEnvio)."""
    apagadas: str | None = None
    """Seco: quantas linhas a marca de apagado deixa fora da carga (`texto_das_apagadas`)."""
    chaves_nulas: int = 0
    """Linhas com a key nula (o LEFT JOIN da view): de fora, o resto vai (intake/chaves.py)."""
    repetidas: list[str] = field(default_factory=list)
    """As keys repetidas nesta empresa, nomeadas (a regra de intake/chaves.py)."""
    repetidas_de_fora: int = 0
    """As linhas das keys repetidas que a regra deixou de fora."""

    @property
    def linhas_da_view(self) -> int:
        """
        O que a view devolveu para a empresa: as linhas entregues mais as de fora
        por key nula ou repetida. É a contagem da carga -- a que o teto compara
        com a base e a que o histórico guarda --: a linha de fora não sumiu da
        view, e contá-la como remoção recusaria a carga por engano.
        """
        return self.registros + self.chaves_nulas + self.repetidas_de_fora

    @property
    def motivo_curto(self) -> str:
        """O porque da falha numa frase curta: o que o resumo leva ao lado do nome."""
        return encurtar(self.motivo or self.erro or 'motivo desconhecido')


# Quantas recusas de linha o seco mostra por dataset (todas sao contadas).
DETALHES_POR_DATASET = 3
# Tamanho do motivo que vai no resumo (a linha inteira do dataset tem o erro todo).
MOTIVO_NO_RESUMO = 140


def encurtar(texto: str, limite: int = MOTIVO_NO_RESUMO) -> str:
    """O texto numa linha só, escapado (`registro.limpo`), cortado em `limite` caracteres."""
    uma = limpo(' '.join(str(texto).split()))
    return uma if len(uma) <= limite else uma[: limite - 3].rstrip() + '...'


def teto_do_complete(
    sem_key: bool, max_remocao: float, base: CargaAceita | None, trazidos: int
) -> tuple[float | None, str | None]:
    """
    O teto que vai no `complete` e, se a carga já deve ser recusada aqui, o motivo.

    `base` é a maior carga aceita do dataset na empresa dentro da janela
    (`Historico.base`; {'registros', 'em', 'janela_dias'}), ou None. Em todo
    dataset, trazer menos que `(1 - max_remocao)` dela é recusado aqui, antes do
    `complete`: o teto do servidor só vê a rodada, e rodadas de -30% esvaziariam
    o dataset sem nenhuma passar do teto.

    Com key, o servidor ainda confere a fração do dataset (o ao-vivo atualiza no
    lugar e o dataset só tem linhas vivas).

    Sem key, o ao-vivo manda cada alteração como registro NOVO e a versão velha
    fica até o `complete`. Num dia movimentado elas passam da metade do dataset
    e a fração recusaria toda varredura -- para sempre, porque cada dia soma
    mais. Versão velha não é linha perdida; o que o teto protege (a view que
    voltou vazia) aparece na CONTAGEM: com base, o servidor vai sem teto. Sem
    base, fica a fração do dataset.

    -> (max_removal para o servidor ou None, texto da recusa ou None)
    """
    if (
        base is not None
        and base['registros']
        and trazidos < (1.0 - max_remocao) * base['registros']
    ):
        return None, _recusa_acumulada(sem_key, max_remocao, base, trazidos)
    if sem_key and base is not None:
        return None, None
    return max_remocao, None


def _recusa_acumulada(sem_key: bool, max_remocao: float, base: CargaAceita, trazidos: int) -> str:
    """A recusa contra a base: o tamanho, a data daquela carga, a janela e o porquê."""
    maior = base['registros']
    qual = (
        'a maior carga aceita nos últimos %d dias' % base['janela_dias']
        if base.get('janela_dias')
        else 'a última carga aceita'
    )
    texto = (
        'complete recusado: a carga trouxe %d linhas e %s (a de %s) trouxe %d,'
        ' queda de %.1f%%, acima do teto de %.1f%%. Nada foi removido. O teto mede a'
        ' queda contra essa base, não só contra a carga anterior: rodadas seguidas,'
        ' cada uma dentro do teto, não esvaziam o dataset aos poucos.'
        % (
            trazidos,
            qual,
            base.get('em') or '?',
            maior,
            100.0 * (maior - trazidos) / maior,
            100.0 * max_remocao,
        )
    )
    if sem_key:
        texto += (
            ' Sem key o teto só compara as cargas, porque as versões antigas que o'
            ' ao-vivo acumula não são linhas perdidas.'
        )
    return texto + ' Confira a view (voltou vazia? GRANT revogado? filtro?)'


class ErroSelecao(ErroConfiguracao, ValueError):
    """--dataset pediu um dataset que o mapeamento não tem."""


def selecionar_datasets(mapa: Mapa, pedidos: Sequence[str] | None = None) -> list[DatasetDoMapa]:
    """
    Os datasets do mapeamento, ou só os `pedidos` (pelo nome escrito ou normalizado).

    Nome desconhecido e erro (com a lista dos que existem): carregar "só os que
    existem" em silêncio deixaria o dataset digitado errado sem carga.
    """
    from contextia_sync.intake.cliente import normalizar_dataset

    if not pedidos:
        return list(mapa['datasets'])
    por_nome: dict[str, DatasetDoMapa] = {}
    for row in mapa['datasets']:
        por_nome[row['dataset']] = row
        por_nome[normalizar_dataset(row['dataset'])] = row
    escolhidos: list[DatasetDoMapa] = []
    desconhecidos: list[str] = []
    for pedido in pedidos:
        achado = por_nome.get(pedido)
        if achado is None:
            try:
                achado = por_nome.get(normalizar_dataset(pedido))
            except ValueError:
                achado = None
        if achado is None:
            desconhecidos.append(pedido)
        elif achado not in escolhidos:
            escolhidos.append(achado)
    if desconhecidos:
        raise ErroSelecao(
            '--dataset %s não existe no mapeamento. Os que existem: %s.'
            % (
                ', '.join(repr(d) for d in desconhecidos),
                ', '.join(normalizar_dataset(r['dataset']) for r in mapa['datasets']),
            )
        )
    return escolhidos


# ---------------------------------------------------------------------------
# O seco: o que a carga real recusaria, dito antes dela
# ---------------------------------------------------------------------------


def conferir_registro(linha: Mapping[str, ValorDoBanco]) -> bytes:
    """
    Uma linha da origem como a carga real a manda: `serializar_registro` e o
    `json.dumps` do envelope do intake (as mesmas opções, `allow_nan=False`).

    Devolve os bytes do registro; levanta ErroSerializacao (um ValueError) com o
    que a carga real levantaria. E o veredito do seco: nada além disto decide
    se a linha passa.
    """
    from contextia_sync.intake.serializacao import serializar_registro

    return json.dumps(
        {'records': [serializar_registro(linha)]},
        ensure_ascii=False,
        separators=(',', ':'),
        allow_nan=False,
    ).encode('utf-8')


def _coluna_recusada(linha: Mapping[str, ValorDoBanco]) -> tuple[str, ValorDoBanco] | None:
    """A primeira coluna cujo valor não vira JSON (o diagnostico; o veredito e o de cima)."""
    from contextia_sync.intake.serializacao import ErroSerializacao, valor_json

    for coluna, valor in linha.items():
        try:
            valor_json(valor, coluna)
        except ErroSerializacao:
            return str(coluna), valor
    return None


def _nao_finito(valor: object) -> bool:
    if isinstance(valor, float):
        return not math.isfinite(valor)
    return isinstance(valor, decimal.Decimal) and not valor.is_finite()


def correcao_de_tipo(coluna: str, valor: object, source_object: str) -> str:
    """Como a view resolve um valor que não vira JSON: a expressão e onde po-la."""
    if _nao_finito(valor):
        expressao = (
            "CASE WHEN %s IN ('NaN', 'Infinity', '-Infinity') THEN NULL ELSE %s END"
            ' AS %s' % (coluna, coluna, coluna)
        )
        return (
            'troque o valor por NULL numa view sobre %s (%s) e aponte source_object'
            ' para ela, ou corrija a linha no ERP' % (source_object, expressao)
        )
    if isinstance(valor, (list, tuple)):
        expressao = "CAST(%s AS TEXT) AS %s, ou array_to_string(%s, ',') AS %s" % (
            coluna,
            coluna,
            coluna,
            coluna,
        )
    elif isinstance(valor, (set, frozenset)):
        expressao = 'CAST(%s AS CHAR) AS %s (o SET vira o texto "a,b")' % (coluna, coluna)
    elif isinstance(valor, dict):
        expressao = 'CAST(%s AS TEXT) AS %s (o JSON vira texto)' % (coluna, coluna)
    elif isinstance(valor, datetime.timedelta):
        expressao = 'CAST(%s AS TEXT) AS %s, ou o total de segundos como número' % (coluna, coluna)
    else:
        expressao = 'CAST(%s AS TEXT) AS %s (VARCHAR/CHAR, conforme o banco)' % (coluna, coluna)
    return 'converta numa view sobre %s: %s; aponte source_object para a view' % (
        source_object,
        expressao,
    )


def _texto_da_chave(valor: object) -> str:
    if isinstance(valor, (int, str, decimal.Decimal)) and not isinstance(valor, bool):
        return encurtar(texto_escopo(valor), 60)
    return encurtar(repr(valor), 60)


def recusa_da_linha(
    nome: str,
    escopo: str,
    source_object: str,
    chave: str | None,
    numero: int,
    linha: Mapping[str, ValorDoBanco],
    erro: Exception,
) -> str:
    """
    Uma linha que a carga real recusaria, dita para o operador: dataset, escopo,
    a linha (o valor da key, ou a posição na leitura), a coluna, o tipo do valor
    e a correção.
    """
    if chave is not None and chave in linha:
        qual = '%s=%s' % (chave, _texto_da_chave(linha[chave]))
    else:
        qual = 'linha %d da leitura (sem key)' % numero
    achada = _coluna_recusada(linha)
    if achada is None:
        # Nao e um valor de coluna (ex.: nome de coluna que nao e texto): o erro diz.
        return '%s escopo=%s %s: %s' % (nome, escopo, qual, erro)
    coluna, valor = achada
    porque = 'que JSON não representa' if _nao_finito(valor) else 'que o SDK não sabe enviar'
    return '%s escopo=%s %s: coluna %r tem valor do tipo %s (%s), %s -- %s' % (
        nome,
        escopo,
        qual,
        coluna,
        type(valor).__name__,
        encurtar(repr(valor), 40),
        porque,
        correcao_de_tipo(coluna, valor, source_object),
    )


# ---------------------------------------------------------------------------
# O catalogo: toda coluna do mapeamento existe na origem?
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ProblemaCatalogo:
    """Uma coluna (ou objeto) do mapeamento que a origem não tem."""

    dataset: str | None
    """O dataset normalizado; None para o cadastro de empresas (`projects`)."""
    coluna: str | None
    """A coluna que falta; None quando e o próprio source_object que não se lê."""
    texto: str
    """O problema para o operador: onde, o que, o nome mais parecido e a correção."""


def _parecida(nome: str, existentes: Sequence[str]) -> str | None:
    """O nome do catálogo mais parecido com `nome` (sem caixa), ou None."""
    por_minusculo = {c.lower(): c for c in existentes}
    alvo = nome.lower()
    # Prefixo primeiro ('RAZAO' -> 'RAZAO_SOCIAL'), que o difflib acha pouco parecido.
    comecam = sorted(
        (
            c
            for c in por_minusculo
            if min(len(c), len(alvo)) >= 3 and (c.startswith(alvo) or alvo.startswith(c))
        ),
        key=lambda c: (abs(len(c) - len(alvo)), c),
    )
    if comecam:
        return por_minusculo[comecam[0]]
    achadas = difflib.get_close_matches(alvo, list(por_minusculo), n=1, cutoff=0.6)
    return por_minusculo[achadas[0]] if achadas else None


def _papeis_do_dataset(mapa: Mapa, row: DatasetDoMapa) -> dict[str, list[str]]:
    """Cada coluna que o dataset usa -> os campos do mapeamento que a citam."""
    papeis: dict[str, list[str]] = {}
    for coluna in row.get('columns') or ():
        papeis.setdefault(coluna, []).append('columns')
    usadas = (
        ('key', mapeamento.chave_de(mapa, row)),
        ('watch_column', mapeamento.valor_herdado(mapa, row, 'watch_column')),
        ('scope_column', mapeamento.coluna_de_recorte(mapa, row)),
    )
    for campo, usada in usadas:
        # Herdada e fora de columns nao e lida (o dataset so perde aquele papel).
        if usada and usada in papeis:
            papeis[usada].append(campo)
    for coluna in row.get('fields') or {}:
        papeis.setdefault(coluna, []).append('fields')
    return papeis


def _papeis_do_cadastro(mapa: Mapa) -> tuple[str, dict[str, list[str]]]:
    """(source_object do cadastro, coluna -> campos de `projects` que a citam)."""
    from contextia_sync.provisionamento import regra_projeto

    regra = regra_projeto.resolver(mapa)
    papeis: dict[str, list[str]] = {}
    for campo, coluna in (
        ('scope_column', regra.scope_column),
        ('name_column', regra.name_column),
        ('group_column', regra.group_column),
    ):
        if coluna:
            papeis.setdefault(coluna, []).append(campo)
    for indice, (coluna, _operador, _valor) in enumerate(regra.filtros):
        papeis.setdefault(coluna, []).append('filters[%d].column' % indice)
    return regra.source_object, papeis


class _AlvoDoCatalogo(NamedTuple):
    """Um objeto da origem a conferir: de que dataset, onde no mapeamento, que colunas."""

    dataset: str | None
    """O dataset normalizado; None para o cadastro de empresas (`projects`)."""
    onde: str
    source_object: str
    papeis: dict[str, list[str]]
    """Cada coluna que o mapeamento cita -> os campos que a citam."""

    def problemas(self, existentes: list[str] | str) -> list[ProblemaCatalogo]:
        """As colunas dos `papeis` que não estão em `existentes` (o texto: o objeto não se lê)."""
        if isinstance(existentes, str):
            return [ProblemaCatalogo(self.dataset, None, '%s: %s' % (self.onde, existentes))]
        exatas = set(existentes)
        minusculas = {c.lower() for c in existentes}
        return [
            ProblemaCatalogo(self.dataset, coluna, self._ausente(coluna, campos, existentes))
            for coluna, campos in self.papeis.items()
            if coluna not in exatas and coluna.lower() not in minusculas
        ]

    def _ausente(self, coluna: str, campos: list[str], existentes: list[str]) -> str:
        parecida = _parecida(coluna, existentes)
        dica = (
            'a mais parecida e %r' % parecida
            if parecida
            else 'as que existem: %s' % ', '.join(sorted(existentes)[:20])
        )
        return (
            '%s: a coluna %r (%s) não existe em %s -- %s; corrija o nome no mapeamento'
            ' (ou acrescente a coluna na view)'
            % (
                self.onde,
                coluna,
                ', '.join(campos),
                'no cadastro ' + self.source_object if self.dataset is None else self.source_object,
                dica,
            )
        )


class _Catalogos:
    """
    As colunas de cada source_object, pedidas ao adaptador uma vez só (vários
    datasets leem o mesmo objeto); a falha ao listar vira o texto do problema,
    não traceback.
    """

    def __init__(self, listar: Callable[[str], Iterable[str]]) -> None:
        self._listar = listar
        self._lidos: dict[str, list[str] | str] = {}

    def de(self, source_object: str) -> list[str] | str:
        if source_object not in self._lidos:
            try:
                nomes = list(self._listar(source_object))
            except Exception as erro:  # noqa: BLE001 - vira problema, nao traceback
                self._lidos[source_object] = '%s: %s' % (type(erro).__name__, erro)
            else:
                self._lidos[source_object] = nomes or (
                    'o catálogo da origem não mostrou coluna nenhuma de %s' % source_object
                )
        return self._lidos[source_object]


def _alvos_do_catalogo(
    mapa: Mapa, datasets: Sequence[DatasetDoMapa] | None, projetos: bool
) -> list[_AlvoDoCatalogo]:
    """O cadastro (se `projetos`) e cada dataset pedido, na ordem do relatório."""
    from contextia_sync.intake.cliente import normalizar_dataset

    alvos: list[_AlvoDoCatalogo] = []
    if projetos:
        cadastro, papeis = _papeis_do_cadastro(mapa)
        alvos.append(_AlvoDoCatalogo(None, 'projects', cadastro, papeis))
    todos = list(mapa.get('datasets') or ())
    for row in todos if datasets is None else datasets:
        indice = next((i for i, r in enumerate(todos) if r is row), None)
        normalizado = normalizar_dataset(row['dataset'])
        onde = ('datasets[%d] %s' % (indice, normalizado)) if indice is not None else normalizado
        alvos.append(
            _AlvoDoCatalogo(normalizado, onde, row['source_object'], _papeis_do_dataset(mapa, row))
        )
    return alvos


def conferir_catalogo(
    mapa: Mapa,
    origem: AdaptadorDeOrigem,
    datasets: Sequence[DatasetDoMapa] | None = None,
    *,
    projetos: bool = True,
) -> list[ProblemaCatalogo]:
    """
    Toda coluna do mapeamento contra o catálogo da origem (`origem.colunas`), sem
    caixa como o adaptador resolve (origem/consultas.py: Objeto.coluna). Todos
    os problemas numa lista -- nenhuma leitura de linha acontece aqui.

    `datasets`: os do mapeamento (padrão: todos); `projetos`: confere também o
    cadastro de empresas. Adaptador sem `colunas()` não tem catálogo para
    mostrar: um aviso no log e lista vazia (a leitura ainda acusa o que faltar).
    """
    listar = getattr(origem, 'colunas', None)
    if not callable(listar):
        logger.warning(
            'o adaptador %s não expõe colunas(): as colunas do mapeamento não'
            ' foram conferidas no catálogo (só a leitura acusara a que faltar)',
            getattr(origem, '__name__', type(origem).__name__),
        )
        return []
    catalogos = _Catalogos(listar)
    problemas: list[ProblemaCatalogo] = []
    for alvo in _alvos_do_catalogo(mapa, datasets, projetos):
        problemas.extend(alvo.problemas(catalogos.de(alvo.source_object)))
    return problemas


def conferir_colunas(
    mapa: Mapa,
    origem: AdaptadorDeOrigem,
    datasets: Sequence[DatasetDoMapa] | None = None,
    *,
    projetos: bool = True,
) -> list[str]:
    """
    Os problemas de `conferir_catalogo` em texto, um por coluna ausente (ou por
    objeto que não se lê), cada um com dataset, coluna e o nome mais parecido.
    Lista vazia: toda coluna do mapeamento existe na origem.
    """
    return [p.texto for p in conferir_catalogo(mapa, origem, datasets, projetos=projetos)]


def resultado_sem_leitura(
    mapa: Mapa, row: DatasetDoMapa, problemas: Sequence[ProblemaCatalogo]
) -> ResultadoCarga:
    """O dataset que o seco nem lê: colunas (ou o objeto) que a origem não tem."""
    from contextia_sync.intake.cliente import normalizar_dataset

    resultado = ResultadoCarga(
        dataset=normalizar_dataset(row['dataset']),
        dominio=mapeamento.coluna_de_recorte(mapa, row) is None,
        sem_key=mapeamento.chave_de(mapa, row) is None,
    )
    colunas = [p.coluna for p in problemas if p.coluna]
    if colunas:
        resultado.motivo = 'coluna(s) que %s não tem: %s' % (
            row['source_object'],
            ', '.join(colunas),
        )
        resultado.erro = (
            '%d coluna(s) do mapeamento não existem em %s (%s; a correção está'
            ' acima); nada lido -- a carga real falharia neste dataset'
            % (len(colunas), row['source_object'], ', '.join(colunas))
        )
    else:
        resultado.motivo = problemas[0].texto if problemas else None
        resultado.erro = (
            '%s não pode ser lido (acima); nada lido -- a carga real'
            ' falharia neste dataset' % row['source_object']
        )
    return resultado


# ---------------------------------------------------------------------------
# A empresa: esta no cadastro?
# ---------------------------------------------------------------------------


class ErroEscopoDesconhecido(ErroConfiguracao, ValueError):
    """--scope de uma empresa que o cadastro (`projects`) não tem."""


@dataclass(frozen=True)
class EmpresaNoCadastro:
    """A empresa como o cadastro a mostra."""

    escopo: str
    nome: str
    recusa: str | None
    """Por que a regra de projeto a recusa (ex.: inativa), ou None se ela a aceita."""


def conferir_escopo(mapa: Mapa, origem: AdaptadorDeOrigem, escopo: str) -> EmpresaNoCadastro:
    """
    A empresa `escopo` no cadastro de empresas do mapeamento (`projects`),
    comparada como o provisionador compara (texto sem espaços nas pontas).

    Ausente: ErroEscopoDesconhecido com o cadastro e algumas das que existem --
    uma carga de empresa que não existe não traria linha nenhuma e mandaria as
    tabelas de domínio inteiras a um projeto que não corresponde a nada.
    Presente mas recusada pela regra (inativa, bloqueada): devolvida com o
    motivo em `recusa`; quem chama decide (o conector carrega e diz).
    Erro de leitura do cadastro sobe como veio (ErroOrigem).
    """
    achada = conferir_escopos(mapa, origem, [escopo])[escopo]
    if isinstance(achada, ErroEscopoDesconhecido):
        raise achada
    return achada


def conferir_escopos(
    mapa: Mapa, origem: AdaptadorDeOrigem, escopos: Iterable[str]
) -> dict[str, EmpresaNoCadastro | ErroEscopoDesconhecido]:
    """
    `conferir_escopo` de várias empresas com UMA leitura do cadastro: para cada
    uma, a EmpresaNoCadastro ou o ErroEscopoDesconhecido (não levantado) que a
    recusa. Erro de leitura do cadastro sobe como veio (ErroOrigem).
    """
    from contextia_sync.provisionamento import regra_projeto

    regra = regra_projeto.resolver(mapa)
    pedidos = list(escopos)
    achadas: dict[str, list[Mapping[str, ValorDoBanco]]] = {escopo: [] for escopo in pedidos}
    existentes: dict[str, bool] = {}
    # O codigo que nao serve nao e empresa (nem na lista das que existem, abaixo).
    linhas, _ = regra_projeto.separar_codigos(
        origem.fetch(regra.source_object, regra.columns), regra
    )
    for linha in linhas:
        codigo = regra_projeto.escopo_de(linha, regra)
        if not codigo:
            continue
        aceita = regra_projeto.aceita(linha, regra)[0]
        existentes[codigo] = existentes.get(codigo, False) or aceita
        if codigo in achadas:
            achadas[codigo].append(linha)
    ordem = sorted(existentes, key=lambda c: (not existentes[c], len(c), c))
    mostrar = ', '.join(ordem[:10]) + (' ...' if len(ordem) > 10 else '')
    respostas: dict[str, EmpresaNoCadastro | ErroEscopoDesconhecido] = {}
    for escopo in pedidos:
        delas = achadas[escopo]
        if not delas:
            respostas[escopo] = ErroEscopoDesconhecido(
                '--scope=%s: a empresa %s não existe no cadastro de empresas %s (coluna %s,'
                ' seção projects do mapeamento). O cadastro tem %d empresa(s)%s. Confira o'
                ' código (o valor da coluna %s, como o provisionar.py o usa); se a empresa'
                ' saiu do ERP, tire a linha dela do arquivo de chaves e revogue a chave.'
                % (
                    escopo,
                    escopo,
                    regra.source_object,
                    regra.scope_column,
                    len(existentes),
                    (': ' + mostrar) if mostrar else '',
                    regra.scope_column,
                )
            )
            continue
        aceitas = [linha for linha in delas if regra_projeto.aceita(linha, regra)[0]]
        if aceitas:
            respostas[escopo] = EmpresaNoCadastro(
                escopo, regra_projeto.nome_de(aceitas[0], regra), None
            )
        else:
            respostas[escopo] = EmpresaNoCadastro(
                escopo,
                regra_projeto.nome_de(delas[0], regra),
                regra_projeto.aceita(delas[0], regra)[1],
            )
    return respostas


def tempo_curto(segundos: float) -> str:
    """Uma duração como o operador lê: '45s', '3min 05s', '2h 10min'."""
    segundos = max(0, int(round(segundos)))
    if segundos < 60:
        return '%ds' % segundos
    if segundos < 3600:
        return '%dmin %02ds' % divmod(segundos, 60)
    horas, resto = divmod(segundos, 3600)
    return '%dh %02dmin' % (horas, resto // 60)


def linha_de_progresso(
    dataset: str, escopo: str, lidos: int, total: int | None = None, segundos: float | None = None
) -> str:
    """
    A linha que diz, sem terminal, que a carga segue viva e quanto falta:
    `N de M (P%), faltam ~T`, com M contado na origem antes da leitura e T pelo
    ritmo da leitura até aqui. Sem contagem (o adaptador não conseguiu contar),
    só quantos já foram lidos.
    """
    inicio = '%s escopo=%s: ' % (dataset, escopo)
    if total is None:
        return inicio + '%d registros lidos até agora' % lidos
    if lidos > total:
        # A origem ganhou linhas depois da contagem: a estimativa acabou.
        return inicio + '%d lidos, mais que os %d contados no início' % (lidos, total)
    # Piso, nunca arredondado para cima: 100% so no fim.
    linha = inicio + '%d de %d (%d%%)' % (lidos, total, 100 * lidos // total if total else 100)
    if lidos and segundos:
        linha += ', faltam ~%s' % tempo_curto((total - lidos) * segundos / lidos)
    return linha


def _contando(
    iteravel: Iterable[T],
    contador: list[int],
    barra: bool,
    rotulo: str,
    progresso: Callable[[int, float], None] | None,
    intervalo: float,
    total: int | None = None,
) -> Iterator[T]:
    """
    Passa as linhas adiante contando -- o seco conta, a barra mostra.

    Com barra (terminal), o tqdm com o `total` contado antes: porcentagem e o
    tempo que falta (ETA) do dataset. Sem barra, `progresso(n, segundos)` e
    chamado a cada `intervalo` segundos de leitura: o ouvinte mata ferramenta
    calada (--inatividade-ferramenta), e uma carga legitima de horas não pode
    morrer por estar calada. Só a leitura que anda gera a linha: uma leitura
    travada continua calada e o vigia a encerra.
    """
    if barra:
        from tqdm import tqdm

        # leave=True: a barra fica na tela e o operador ve quanto cada dataset leu.
        iteravel = tqdm(
            iteravel, desc=rotulo, total=total, unit=' reg', leave=True, dynamic_ncols=True
        )
        progresso = None
    comeco = time.monotonic()
    proximo = comeco + intervalo
    for linha in iteravel:
        contador[0] += 1
        if progresso is not None:
            agora = time.monotonic()
            if agora >= proximo:
                progresso(contador[0], agora - comeco)
                proximo = time.monotonic() + intervalo
        yield linha


def contar_para_o_progresso(
    origem: AdaptadorDeOrigem,
    source_object: str,
    recorte: tuple[str, str] | None,
    marca: MarcaDeApagado | None = None,
) -> int | None:
    """
    Quantas linhas a leitura vai trazer (o total da barra e das linhas de
    progresso), ou None se o adaptador não conseguiu contar: a contagem só
    serve a estimativa e nunca impede a carga (a leitura dirá o erro, se houver).
    """
    try:
        return int(origem.contar(source_object, scope=recorte, **argumento(marca)))
    except Exception as erro:  # noqa: BLE001 - so a estimativa se perde
        logger.info(
            'progresso sem total em %s: a contagem falhou (%s: %s)',
            source_object,
            type(erro).__name__,
            encurtar(str(erro)),
        )
        return None


def texto_das_apagadas(
    origem: AdaptadorDeOrigem,
    row: DatasetDoMapa,
    recorte: tuple[str, str] | None,
    marca: MarcaDeApagado | None,
    nome: str,
) -> str | None:
    """
    O seco: "N linhas marcadas como apagadas em <dataset>", ou None sem marca.

    A carga não as lê (o WHERE da marca), e o `complete` as tira do Contextia.
    """
    if marca is None:
        return None
    quantas = int(origem.contar(row['source_object'], scope=recorte, so_apagadas=marca))
    return (
        '%d linhas marcadas como apagadas em %s (%s em %s): a carga não as envia, e o'
        ' complete as tira do Contextia' % (quantas, nome, marca.descrever(), row['source_object'])
    )


# ---------------------------------------------------------------------------
# A key nula e a key repetida (a regra: intake/chaves.py)
# ---------------------------------------------------------------------------


class ErroKeyNaoUnica(ErroConfiguracao, ValueError):
    """A key do mapeamento se repete em tantos pares (empresa, key) que não identifica a linha."""


def triagem_da_carga(
    mapa: Mapa,
    row: DatasetDoMapa,
    origem: AdaptadorDeOrigem,
    marca: MarcaDeApagado | None,
    recorte: tuple[str, str] | None = None,
) -> Triagem:
    """
    A triagem de uma carga do dataset `row` (de uma empresa com `recorte`, ou
    de todas): antes de ler, os pares (empresa, key) que se repetem na view
    (`chaves_repetidas` do adaptador; sem ela, ou se ela falha -- dito no log
    --, as repetidas vão como vierem e a key nula segue de fora, contada).
    Levanta ErroKeyNaoUnica acima de LIMITE_REPETIDAS pares.
    """
    from contextia_sync.intake.chaves import LIMITE_REPETIDAS, Triagem, chave_solta
    from contextia_sync.intake.cliente import normalizar_dataset

    nome = normalizar_dataset(row['dataset'])
    chave = mapeamento.chave_de(mapa, row)
    coluna = mapeamento.coluna_de_recorte(mapa, row)
    perguntar = getattr(origem, 'chaves_repetidas', None)
    if chave is None or not callable(perguntar):
        return Triagem(nome, chave, set(), coluna)
    try:
        pares = perguntar(
            row['source_object'],
            chave,
            coluna,
            recorte[1] if recorte and coluna else None,
            limite=LIMITE_REPETIDAS + 1,
            **argumento(marca),
        )
    except Exception as erro:  # noqa: BLE001 - a consulta a mais não para a carga
        logger.warning(
            '%s: a origem não disse as keys repetidas de %s (%s: %s): nesta carga a'
            ' key repetida vai como vier (a key nula segue de fora, contada)',
            nome,
            row['source_object'],
            type(erro).__name__,
            encurtar(str(erro)),
        )
        return Triagem(nome, chave, set(), coluna)
    if len(pares) > LIMITE_REPETIDAS:
        raise ErroKeyNaoUnica(
            'a key %s de %s se repete em mais de %d pares (empresa, key) de %s: ela não'
            ' identifica a linha. Corrija a key no mapeamento, ou a view (uma coluna única'
            ' dentro de cada empresa); nada enviado, nada removido.'
            % (chave, nome, LIMITE_REPETIDAS, row['source_object'])
        )
    suspeitas = {
        (texto_escopo(empresa) if coluna else None, chave_solta(valor))
        for empresa, _maior, valor, _linhas in pares
    }
    return Triagem(nome, chave, suspeitas, coluna)


def anotar_chaves(
    resultado: ResultadoCarga, triagem: Triagem, empresa: str | None, dominio: bool
) -> None:
    """
    O que a triagem deixou de fora da empresa, no resultado dela: contado na
    carga (`ResultadoCarga.linhas_da_view`) e dito na linha do dataset. O
    domínio vai inteiro a cada empresa: o de fora dele fica de fora de todas.
    """
    from contextia_sync.intake.chaves import textos_repetidas

    if dominio:
        resultado.chaves_nulas = triagem.total_nulas
        resultado.repetidas_de_fora = sum(triagem.de_fora.values())
        repetidas = triagem.repetidas
    else:
        resultado.chaves_nulas = triagem.nulas.get(empresa, 0)
        resultado.repetidas_de_fora = triagem.de_fora.get(empresa, 0)
        repetidas = [r for r in triagem.repetidas if r.empresa == empresa]
    resultado.repetidas = textos_repetidas(repetidas)


def avisar_chaves(triagem: Triagem, onde: str) -> None:
    """O log da triagem de uma leitura: a contagem das keys nulas e as repetidas nomeadas."""
    for texto in triagem.textos():
        logger.warning('%s: %s', onde, texto)


def _abrir_triadas(
    resultado: ResultadoCarga, triagem: Triagem, leitura: _LeituraContada, escopo: str
) -> tuple[Iterator[Mapping[str, ValorDoBanco]], Mapping[str, str] | None]:
    """A leitura de uma empresa aberta, pela triagem (e as famílias de tipo dela)."""
    linhas, familias = leitura.abrir()
    return _triadas(resultado, triagem, linhas, escopo), familias


def _triadas(
    resultado: ResultadoCarga,
    triagem: Triagem,
    linhas: Iterable[Mapping[str, ValorDoBanco]],
    escopo: str,
) -> Iterator[Mapping[str, ValorDoBanco]]:
    """As linhas de uma empresa pela triagem; lidas até o fim, o que ficou de fora é anotado."""
    empresa = None if resultado.dominio else escopo
    yield from triagem.filtrar(linhas, empresa)
    anotar_chaves(resultado, triagem, empresa, dominio=resultado.dominio)
    avisar_chaves(triagem, '%s escopo=%s' % (resultado.dataset, escopo))


def carregar_dataset(
    mapa: Mapa,
    row: DatasetDoMapa,
    origem: AdaptadorDeOrigem,
    escopo: str,
    *,
    api_key: str | None = None,
    seco: bool = False,
    max_remocao: float = padroes.MAX_REMOCAO,
    barra: bool = False,
    progresso: Callable[[str], None] | None = None,
    intervalo_progresso: float = padroes.INTERVALO_PROGRESSO,
    historico: Historico | None = None,
    execucao: str | None = None,
    em_voo: int = padroes.LOTES_EM_VOO,
) -> ResultadoCarga:
    """
    Um dataset de uma empresa. Devolve o ResultadoCarga e nunca levanta, exceto
    ErroAutenticacao (chave recusada: nenhum outro dataset passaria).

    `origem` e o adaptador (o módulo de `contextia_sync.origem.carregar_origem`),
    já conectado. Com `barra` ou `progresso`, as linhas são contadas antes
    (`contar_para_o_progresso`) para dizer o total e o tempo que falta.
    `progresso(texto)`, se dado, recebe `linha_de_progresso` a cada
    `intervalo_progresso` segundos de leitura (só sem `barra`). `historico`
    (contextia_sync.carga.historico.Historico), se dado, da a base do teto sem
    key e recebe a carga aceita, com a `execucao` de quem pediu (a varredura do
    ouvinte). `em_voo`: lotes esperando resposta ao mesmo tempo (enviar_dataset).
    """
    from contextia_sync.intake import cliente

    resultado = _resultado_do_dataset(mapa, row)
    inicio = time.monotonic()
    coluna = mapeamento.coluna_de_recorte(mapa, row)
    # Com coluna de recorte, so as linhas desta empresa; sem ela (dominio), todas.
    recorte = (coluna, escopo) if coluna else None
    marca = MarcaDeApagado.do_dataset(mapa, row)
    leitura = _LeituraContada(
        origem, row, recorte, escopo, resultado.dataset, barra, progresso, intervalo_progresso
    )
    leitura.marca = marca
    try:
        triagem = triagem_da_carga(mapa, row, origem, marca, recorte)
        linhas, familias = _abrir_triadas(resultado, triagem, leitura, escopo)
        if seco:
            _carga_seca(resultado, mapa, row, linhas, escopo, leitura)
            resultado.apagadas = texto_das_apagadas(origem, row, recorte, marca, resultado.dataset)
            return resultado
        sync = enviar_sob_sync(
            resultado,
            mapa,
            row,
            linhas,
            api_key=api_key,
            escopo=escopo,
            em_voo=em_voo,
            familias=familias,
        )
        if sync is not None:
            fechar_carga(
                resultado,
                sync,
                api_key=api_key,
                escopo=escopo,
                max_remocao=max_remocao,
                historico=historico,
                execucao=execucao,
            )
        return resultado
    except cliente.ErroAutenticacao:
        raise
    except Exception as erro:  # noqa: BLE001 - um dataset nao derruba os outros
        # Origem que cai no meio, view que nao existe, Contextia fora: o dataset
        # falha sem complete e os seguintes ainda tentam.
        if not resultado.registros:
            resultado.registros = leitura.lidas
        resultado.erro = '%s: %s' % (type(erro).__name__, erro)
        return resultado
    finally:
        resultado.segundos = time.monotonic() - inicio


def _resultado_do_dataset(mapa: Mapa, row: DatasetDoMapa) -> ResultadoCarga:
    """O ResultadoCarga ainda sem leitura: o que o mapeamento diz do dataset."""
    from contextia_sync.intake import cliente

    nome = cliente.normalizar_dataset(row['dataset'])
    coluna = mapeamento.coluna_de_recorte(mapa, row)
    _descricao, campos = mapeamento.semantica(mapa, row)
    return ResultadoCarga(
        dataset=nome,
        campos=len(campos or ()),
        dominio=coluna is None,
        sem_key=mapeamento.chave_de(mapa, row) is None,
    )


@dataclass
class _LeituraContada:
    """
    A leitura de um dataset de uma empresa, contada ao passar (`_contando`): o
    seco conta, a barra e as linhas de `progresso` mostram. Com `barra` ou
    `progresso`, as linhas são contadas na origem antes, para o total e o
    tempo que falta.
    """

    origem: AdaptadorDeOrigem
    row: DatasetDoMapa
    recorte: tuple[str, str] | None
    escopo: str
    rotulo: str
    barra: bool
    progresso: Callable[[str], None] | None
    intervalo: float
    total: int | None = None
    contador: list[int] = field(default_factory=lambda: [0])
    marca: MarcaDeApagado | None = None
    """`deleted_when`: a leitura e a contagem sem as linhas marcadas como apagadas."""

    @property
    def lidas(self) -> int:
        return self.contador[0]

    def abrir(self) -> tuple[Iterator[Mapping[str, ValorDoBanco]], Mapping[str, str] | None]:
        """(as linhas contadas, as famílias de tipo do resultado, se o adaptador as dá)."""
        if self.barra or self.progresso is not None:
            self.total = contar_para_o_progresso(
                self.origem, self.row['source_object'], self.recorte, self.marca
            )
        linhas = self.origem.fetch(
            self.row['source_object'],
            self.row['columns'],
            scope=self.recorte,
            **argumento(self.marca),
        )
        # Os tipos do resultado (so o adaptador generico os da): um conversor por coluna.
        familias = getattr(self.origem, 'familias', lambda _linhas: None)(linhas)
        avisar = self._avisar if self.progresso is not None else None
        contadas = _contando(
            linhas, self.contador, self.barra, self.rotulo, avisar, self.intervalo, self.total
        )
        return contadas, familias

    def _avisar(self, lidos: int, segundos: float) -> None:
        if self.progresso is not None:
            self.progresso(
                linha_de_progresso(self.rotulo, self.escopo, lidos, self.total, segundos)
            )


def _carga_seca(
    resultado: ResultadoCarga,
    mapa: Mapa,
    row: DatasetDoMapa,
    linhas: Iterable[Mapping[str, ValorDoBanco]],
    escopo: str,
    leitura: _LeituraContada,
) -> None:
    """O seco de um dataset: cada linha conferida, nada enviado; ok se nenhuma é recusada."""
    _conferir_linhas(
        resultado, linhas, escopo, row['source_object'], mapeamento.chave_de(mapa, row)
    )
    # As de fora pela triagem (key nula ou repetida) não iriam: não contam como registros.
    resultado.registros = leitura.lidas - resultado.chaves_nulas - resultado.repetidas_de_fora
    resultado.ok = not resultado.recusadas


class ArgumentosDoEnvio(TypedDict):
    """O que o mapeamento diz a `cliente.enviar_dataset` de um dataset (`argumentos_do_envio`)."""

    key: str | None
    description: str | None
    fields: dict[str, str] | None
    group: str | None
    chunk: int


def argumentos_do_envio(mapa: Mapa, row: DatasetDoMapa) -> ArgumentosDoEnvio:
    """O que `cliente.enviar_dataset` leva do mapeamento: key, metadados e chunk do dataset."""
    descricao, campos = mapeamento.semantica(mapa, row)
    return {
        'key': mapeamento.chave_de(mapa, row),
        'description': descricao,
        'fields': campos,
        'group': mapeamento.grupo_de(mapa, row),
        'chunk': mapeamento.chunk_de(mapa, row),
    }


def enviar_sob_sync(
    resultado: ResultadoCarga,
    mapa: Mapa,
    row: DatasetDoMapa,
    linhas: Iterable[Mapping[str, ValorDoBanco]],
    *,
    api_key: str | None,
    escopo: str,
    em_voo: int = padroes.LOTES_EM_VOO,
    familias: Mapping[str, str] | None = None,
) -> str | None:
    """
    As linhas de UMA empresa sob um `sync` novo, sem `complete`: a metade da
    carga que não remove nada. Soma as contagens em `resultado` e devolve o
    `sync` se todos os lotes passaram; senão None, com o erro dito em
    `resultado` (SEM complete: ele removeria o que estava nos lotes que não
    chegaram). Levanta ErroAutenticacao (a chave recusada) e o erro da leitura.
    """
    from contextia_sync.intake import cliente

    sync = cliente.gerar_sync()
    envio = cliente.enviar_dataset(
        resultado.dataset,
        linhas,
        api_key=api_key,
        logger=logger,
        sync=sync,
        escopo=escopo,
        em_voo=em_voo,
        familias=familias,
        **argumentos_do_envio(mapa, row),
    )
    return sync if somar_envio(resultado, envio) else None


def somar_envio(resultado: ResultadoCarga, envio: ResultadoEnvio) -> bool:
    """
    As contagens de um envio (cliente.ResultadoEnvio, ou a soma dos lotes de uma
    empresa na carga de todas) em `resultado`. False se algum lote falhou, com o
    erro dito em `resultado` (se ele ainda não tinha um): sem complete.
    """
    nome = resultado.dataset
    resultado.registros += envio.registros
    resultado.novos += envio.inserted
    resultado.atualizados += envio.updated
    resultado.iguais += envio.duplicates
    resultado.interrompido = resultado.interrompido or envio.interrompido
    if not envio.lotes_erro:
        return True
    if resultado.erro is not None:
        return False
    resultado.erro = '%d de %d lote(s) falharam; complete NÃO enviado, nada removido (%s)' % (
        envio.lotes_erro,
        envio.lotes_erro + envio.lotes_ok,
        (envio.erros or ['?'])[0],
    )
    # O nome do dataset ja abre a entrada do resumo: sem repeti-lo.
    primeiro = re.sub(r'^dataset %s[,:]\s*' % re.escape(nome), '', (envio.erros or ['?'])[0])
    resultado.motivo = '%d lote(s) com falha, sem complete: %s' % (envio.lotes_erro, primeiro)
    return False


def fechar_carga(
    resultado: ResultadoCarga,
    sync: str,
    *,
    api_key: str | None,
    escopo: str,
    max_remocao: float = padroes.MAX_REMOCAO,
    historico: Historico | None = None,
    execucao: str | None = None,
    gravar_historico: bool = True,
) -> None:
    """
    A outra metade: o `complete` do `sync` com o teto de remoção da empresa, e
    a carga aceita no histórico. Só se chama com todos os lotes entregues. O
    teto recusado (aqui ou pelo servidor) vira `resultado.erro`, nada removido;
    ErroAutenticacao e o erro do Contextia sobem. `gravar_historico=False`:
    quem chama grava (a carga de todas as empresas grava todas de uma vez).
    """
    from contextia_sync.intake import cliente

    nome = resultado.dataset
    base = _base_do_teto(historico, escopo, nome, resultado.sem_key)
    teto, recusa = teto_do_complete(resultado.sem_key, max_remocao, base, resultado.linhas_da_view)
    if recusa:
        resultado.erro = recusa + _repetir_permitindo(nome)
        return
    if base is not None:
        resultado.base = base['registros']
    try:
        fechamento = cliente.completar(nome, sync, api_key=api_key, max_remocao=teto, escopo=escopo)
    except cliente.ErroRemocaoAcimaDoTeto as erro:
        dica = ''
        if resultado.sem_key:
            # Sem base, as versoes velhas do ao-vivo contam como remocao.
            dica = (
                ' (dataset sem key e sem carga aceita no histórico%s: as versões'
                ' antigas que o ao-vivo acumulou contam no teto; depois de uma carga'
                ' aceita ele passa a comparar com ela)'
                % (
                    ' ' + historico.caminho
                    if historico is not None
                    else ' -- sem --historico/CONTEXTIA_HISTORICO'
                )
            )
        resultado.erro = str(erro).rstrip('. ') + dica + _repetir_permitindo(nome)
        return
    resultado.ok, resultado.removidos = True, int(fechamento.get('removed') or 0)
    # O operador afrouxou o teto (--max-remocao=1 depois de uma limpeza real): o
    # que esta carga trouxe e o tamanho certo, e a base dali em diante; a janela
    # velha recusaria a próxima carga de rotina pela mesma limpeza, de novo.
    resultado.nova_base = max_remocao > padroes.MAX_REMOCAO
    if historico is not None and gravar_historico:
        try:
            historico.registrar(
                escopo,
                nome,
                resultado.linhas_da_view,
                resultado.removidos,
                execucao,
                nova_base=resultado.nova_base,
            )
        except OSError as erro:
            # A carga valeu; so a base do proximo teto (e o aviso ao ouvinte) nao.
            resultado.aviso = 'histórico não gravado em %s (%s)' % (historico.caminho, erro)


def _base_do_teto(
    historico: Historico | None, escopo: str, nome: str, sem_key: bool
) -> CargaAceita | None:
    """
    A maior carga aceita na janela; sem key e sem carga na janela, a última
    aceita, de qualquer data (sem base o teto sem key cairia na fração do
    dataset, que as versões antigas do ao-vivo estouram).
    """
    if historico is None:
        return None
    base = historico.base(escopo, nome)
    if base is None and sem_key:
        base = historico.anterior(escopo, nome)
    return base


def _conferir_linhas(
    resultado: ResultadoCarga,
    linhas: Iterable[Mapping[str, ValorDoBanco]],
    escopo: str,
    source_object: str,
    chave: str | None,
) -> None:
    """
    O seco: cada linha por `conferir_registro`, nada enviado. Conta TODAS as que
    a carga real recusaria (não para na primeira) e guarda as primeiras com o
    motivo em `resultado.detalhes`.
    """
    conferencia = Conferencia(resultado, escopo, source_object, chave)
    conferencia.conferir(linhas)
    conferencia.fechar()


class Conferencia:
    """
    O seco de um dataset de uma empresa, aos pedaços: `conferir` a cada trecho
    de linhas (a carga de todas as empresas confere cada linha ao lê-la, na
    empresa dela), `fechar` no fim diz as recusas em `resultado`.
    """

    def __init__(
        self, resultado: ResultadoCarga, escopo: str, source_object: str, chave: str | None
    ) -> None:
        self.resultado = resultado
        self.escopo, self.source_object, self.chave = escopo, source_object, chave
        self.lidas = 0
        # A primeira linha de cada (coluna, tipo) sempre aparece; repeticoes so ate
        # completar DETALHES_POR_DATASET. Todas sao contadas.
        self.primeiras: dict[tuple[str, str], str] = {}
        self.repetidas: list[str] = []

    def conferir(self, linhas: Iterable[Mapping[str, ValorDoBanco]]) -> None:
        resultado = self.resultado
        for linha in linhas:
            self.lidas += 1
            try:
                conferir_registro(linha)
            except (ValueError, TypeError) as erro:  # ErroSerializacao e um ValueError
                resultado.recusadas += 1
                achada = _coluna_recusada(linha)
                tipo = (
                    (achada[0], type(achada[1]).__name__) if achada else ('?', type(erro).__name__)
                )
                if tipo not in self.primeiras and len(self.primeiras) < 10:
                    self.primeiras[tipo] = recusa_da_linha(
                        resultado.dataset,
                        self.escopo,
                        self.source_object,
                        self.chave,
                        self.lidas,
                        linha,
                        erro,
                    )
                elif len(self.repetidas) < DETALHES_POR_DATASET:
                    self.repetidas.append(
                        recusa_da_linha(
                            resultado.dataset,
                            self.escopo,
                            self.source_object,
                            self.chave,
                            self.lidas,
                            linha,
                            erro,
                        )
                    )

    def fechar(self) -> None:
        resultado, primeiras = self.resultado, self.primeiras
        if resultado.recusadas:
            resultado.detalhes = (
                list(primeiras.values())
                + self.repetidas[: max(0, DETALHES_POR_DATASET - len(primeiras))]
            )
            quais = ', '.join('%s [%s]' % par for par in primeiras)
            resultado.motivo = '%d linha(s) que não viram JSON: %s' % (resultado.recusadas, quais)
            resultado.erro = (
                '%d de %d linha(s) não viram JSON (%s): a carga real recusaria este dataset'
                ' (complete não enviado, nada removido). Corrija na view; as primeiras:'
                % (resultado.recusadas, self.lidas, quais)
            )


def _repetir_permitindo(nome: str) -> str:
    """O fim de toda recusa do teto: como liberar quando a limpeza e real."""
    return (
        ' -- se a remoção é real (limpeza no ERP), repita só este dataset, uma vez, com'
        ' --dataset=%s --max-remocao=1 (a carga aceita assim vira a nova base do teto)' % nome
    )


def linha_de_resultado(resultado: ResultadoCarga, seco: bool = False) -> str:
    """A linha que o conector imprime por dataset; embaixo, o que ficou de fora por key."""
    from contextia_sync.intake.chaves import aviso_das_nulas

    de_fora = list(resultado.repetidas)
    if resultado.chaves_nulas:
        de_fora.insert(0, aviso_das_nulas(resultado.chaves_nulas, resultado.dataset))
    return _linha_do_dataset(resultado, seco) + ''.join('\n      - %s' % t for t in de_fora)


def _linha_do_dataset(resultado: ResultadoCarga, seco: bool) -> str:
    nome = resultado.dataset + (' (domínio)' if resultado.dominio else '')
    # Sem key o servidor deduplica por hash: linha alterada entra como nova e a
    # velha so sai no complete. Dito na linha, para ninguem estranhar `novos`.
    aviso = ''
    if resultado.sem_key:
        aviso = ' [sem key: dedup por hash; teto %s]' % (
            'contra a carga anterior de %d' % resultado.base
            if resultado.base is not None
            else 'sobre o dataset'
        )
    if resultado.aviso:
        aviso += ' AVISO: %s' % resultado.aviso
    if seco:
        apagadas = '\n      %s' % resultado.apagadas if resultado.apagadas else ''
        if resultado.ok:
            return (
                '  %-34s registros=%-7d (seco: lido, serializado como no envio, nada'
                ' enviado)  %.1fs%s' % (nome, resultado.registros, resultado.segundos, apagadas)
            )
        linhas = ['  %-34s FALHOU -- %s' % (nome, resultado.erro)]
        linhas += ['      - %s' % detalhe for detalhe in resultado.detalhes]
        if resultado.recusadas > len(resultado.detalhes):
            linhas.append(
                '      ... e mais %d linha(s) recusada(s) (contadas, não mostradas)'
                % (resultado.recusadas - len(resultado.detalhes))
            )
        linhas.append(
            '  %-34s registros=%d recusadas=%d (seco: nada enviado)  %.1fs'
            % ('', resultado.registros, resultado.recusadas, resultado.segundos)
        )
        return '\n'.join(linhas)
    numeros = 'registros=%d novos=%d atualizados=%d iguais=%d removidos=%d campos descritos=%d' % (
        resultado.registros,
        resultado.novos,
        resultado.atualizados,
        resultado.iguais,
        resultado.removidos,
        resultado.campos,
    )
    if resultado.ok:
        return '  %-34s %s  %.1fs%s' % (nome, numeros, resultado.segundos, aviso)
    return '  %-34s FALHOU -- %s\n  %-34s %s' % (nome, resultado.erro, '', numeros)


def resumo(
    escopo: str, resultados: Sequence[ResultadoCarga], segundos: float, seco: bool = False
) -> str:
    """A linha única do fim: o que o log do ouvinte guarda e um humano lê primeiro."""
    falhos = [r for r in resultados if not r.ok]
    texto = 'resumo escopo=%s: %d dataset(s), %d ok, %d com falha; registros=%d' % (
        escopo,
        len(resultados),
        len(resultados) - len(falhos),
        len(falhos),
        sum(r.registros for r in resultados),
    )
    if not seco:
        texto += ' novos=%d atualizados=%d iguais=%d removidos=%d' % (
            sum(r.novos for r in resultados),
            sum(r.atualizados for r in resultados),
            sum(r.iguais for r in resultados),
            sum(r.removidos for r in resultados),
        )
    texto += ' em %.1fs' % segundos
    if seco:
        texto += ' (SECO: nada enviado)'
    if falhos:
        # Com o motivo: o resumo e o que o log do ouvinte guarda, e so o nome
        # nao diz ao operador o que corrigir.
        texto += ' -- FALHARAM: %s' % '; '.join(
            '%s (%s)' % (r.dataset, r.motivo_curto) for r in falhos
        )
    return texto
