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
    recusa e nada sai. No dataset SEM key o teto compara com a ultima carga
    aceita (ver `teto_do_complete`). Limpeza real acima do teto se pede com
    --max-remocao=1 (ver docs/carga-e-provisionamento.md).
  * tabela de dominio (`scope_column: null`) vai inteira para a empresa; com
    coluna de recorte, so as linhas da empresa (WHERE coluna = escopo).

O conector (contextia_sync/cli/conector.py) e a casca de linha de comando; aqui
so ha logica.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from contextia_sync import mapeamento, padroes
from contextia_sync.erros import ErroConfiguracao
from contextia_sync.registro import logger

if TYPE_CHECKING:
    from contextia_sync.carga.historico import Historico

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
    """Campos com descricao semantica no mapeamento."""
    dominio: bool = False
    """Sem coluna de recorte: a tabela vai inteira para a empresa."""
    erro: str | None = None
    segundos: float = 0.0
    sem_key: bool = False
    base: int | None = None
    """Sem key: os registros da carga anterior aceita, contra os quais o teto comparou."""
    aviso: str | None = None
    """A carga valeu, mas algo ao lado dela nao (ex.: o historico nao foi gravado)."""


def teto_do_complete(sem_key: bool, max_remocao: float, anterior: Mapping[str, Any] | None,
                     trazidos: int) -> tuple[float | None, str | None]:
    """
    O teto que vai no `complete` e, se a carga ja deve ser recusada aqui, o motivo.

    Com key, o teto e a fracao do dataset e quem confere e o servidor: o
    ao-vivo atualiza no lugar e o dataset so tem linhas vivas.

    Sem key, o ao-vivo manda cada alteracao como registro NOVO e a versao velha
    fica ate o `complete`. Num dia movimentado elas passam da metade do dataset
    e a fracao recusaria toda varredura -- para sempre, porque cada dia soma
    mais. Versao velha nao e linha perdida; o que o teto protege (a view que
    voltou vazia) aparece na CONTAGEM: a carga de hoje contra a ultima aceita
    (`anterior`, do historico). Sem historico, fica a fracao do dataset.

    -> (max_removal para o servidor ou None, texto da recusa ou None)
    """
    if not sem_key or anterior is None:
        return max_remocao, None
    base = anterior['registros']
    if base and trazidos < (1.0 - max_remocao) * base:
        return None, (
            'complete recusado: a carga trouxe %d linhas e a ultima aceita (%s) trouxe %d,'
            ' queda de %.1f%%, acima do teto de %.1f%%. Nada foi removido. Sem key o teto'
            ' compara as cargas, porque as versoes antigas que o ao-vivo acumula nao sao'
            ' linhas perdidas. Confira a view (voltou vazia? GRANT revogado? filtro?)'
            % (trazidos, anterior.get('em') or '?', base, 100.0 * (base - trazidos) / base,
               100.0 * max_remocao))
    return None, None


class ErroSelecao(ErroConfiguracao, ValueError):
    """--dataset pediu um dataset que o mapeamento nao tem."""


def selecionar_datasets(mapa: Mapping[str, Any],
                        pedidos: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """
    Os datasets do mapeamento, ou so os `pedidos` (pelo nome escrito ou normalizado).

    Nome desconhecido e erro (com a lista dos que existem): carregar "so os que
    existem" em silencio deixaria o dataset digitado errado sem carga.
    """
    from contextia_sync.intake.cliente import normalizar_dataset

    if not pedidos:
        return list(mapa['datasets'])
    por_nome: dict[str, dict[str, Any]] = {}
    for row in mapa['datasets']:
        por_nome[row['dataset']] = row
        por_nome[normalizar_dataset(row['dataset'])] = row
    escolhidos: list[dict[str, Any]] = []
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
            '--dataset %s nao existe no mapeamento. Os que existem: %s.'
            % (', '.join(repr(d) for d in desconhecidos),
               ', '.join(normalizar_dataset(r['dataset']) for r in mapa['datasets'])))
    return escolhidos


def linha_de_progresso(dataset: str, escopo: str, lidos: int) -> str:
    """A linha que diz, sem terminal, que a carga segue viva."""
    return '%s escopo=%s: %d registros lidos ate agora' % (dataset, escopo, lidos)


def _contando(iteravel: Iterable[T], contador: list[int], barra: bool, rotulo: str,
              progresso: Callable[[int], None] | None, intervalo: float) -> Iterator[T]:
    """
    Passa as linhas adiante contando -- o seco conta, a barra mostra.

    Sem barra, `progresso(n)` e chamado a cada `intervalo` segundos de leitura:
    o ouvinte mata ferramenta calada (--inatividade-ferramenta), e uma carga
    legitima de horas nao pode morrer por estar calada. So a leitura que anda
    gera a linha: uma leitura travada continua calada e o vigia a encerra.
    """
    if barra:
        from tqdm import tqdm
        # leave=True: a barra fica na tela e o operador ve quanto cada dataset leu.
        iteravel = tqdm(iteravel, desc=rotulo, unit=' reg', leave=True, dynamic_ncols=True)
        progresso = None
    proximo = time.monotonic() + intervalo
    for linha in iteravel:
        contador[0] += 1
        if progresso is not None and time.monotonic() >= proximo:
            progresso(contador[0])
            proximo = time.monotonic() + intervalo
        yield linha


def carregar_dataset(mapa: Mapping[str, Any], row: Mapping[str, Any], origem: ModuleType,
                     escopo: str, *, api_key: str | None = None, seco: bool = False,
                     max_remocao: float = padroes.MAX_REMOCAO, barra: bool = False,
                     progresso: Callable[[str], None] | None = None,
                     intervalo_progresso: float = padroes.INTERVALO_PROGRESSO,
                     historico: Historico | None = None,
                     execucao: str | None = None) -> ResultadoCarga:
    """
    Um dataset de uma empresa. Devolve o ResultadoCarga e nunca levanta, exceto
    ErroAutenticacao (chave recusada: nenhum outro dataset passaria).

    `origem` e o adaptador (o modulo de `contextia_sync.origem.carregar_origem`),
    ja conectado. `progresso(texto)`, se dado, recebe `linha_de_progresso` a cada
    `intervalo_progresso` segundos de leitura (so sem `barra`). `historico`
    (contextia_sync.carga.historico.Historico), se dado, da a base do teto sem
    key e recebe a carga aceita, com a `execucao` de quem pediu (a varredura do
    ouvinte).
    """
    from contextia_sync.intake import cliente

    nome = cliente.normalizar_dataset(row['dataset'])
    coluna = mapeamento.coluna_de_recorte(mapa, row)
    descricao, campos = mapeamento.semantica(mapa, row)
    resultado = ResultadoCarga(dataset=nome, campos=len(campos or ()), dominio=coluna is None,
                               sem_key=mapeamento.chave_de(mapa, row) is None)
    inicio = time.monotonic()
    # Com coluna de recorte, so as linhas desta empresa; sem ela (dominio), todas.
    recorte = (coluna, escopo) if coluna else None
    contador = [0]
    avisar: Callable[[int], None] | None = None
    if progresso is not None:
        def avisar(lidos: int) -> None:
            progresso(linha_de_progresso(nome, escopo, lidos))
    try:
        linhas = origem.fetch(row['source_object'], row['columns'], scope=recorte)
        linhas = _contando(linhas, contador, barra, nome, avisar, intervalo_progresso)
        if seco:
            for _ in linhas:
                pass
            resultado.ok, resultado.registros = True, contador[0]
            return resultado

        sync = cliente.gerar_sync()
        envio = cliente.enviar_dataset(
            nome, linhas, key=mapeamento.chave_de(mapa, row), description=descricao,
            fields=campos, group=mapeamento.grupo_de(mapa, row),
            chunk=mapeamento.chunk_de(mapa, row), api_key=api_key, logger=logger,
            sync=sync, escopo=escopo)
        resultado.registros = envio.registros
        resultado.novos = envio.inserted
        resultado.atualizados = envio.updated
        resultado.iguais = envio.duplicates
        if envio.lotes_erro:
            # SEM complete: ele removeria o que estava nos lotes que nao chegaram.
            resultado.erro = ('%d de %d lote(s) falharam; complete NAO enviado, nada'
                              ' removido (%s)' % (
                                  envio.lotes_erro, envio.lotes_erro + envio.lotes_ok,
                                  (envio.erros or ['?'])[0]))
            return resultado

        anterior = historico.anterior(escopo, nome) if historico is not None else None
        teto, recusa = teto_do_complete(resultado.sem_key, max_remocao, anterior,
                                        envio.registros)
        if recusa:
            resultado.erro = recusa + _repetir_permitindo(nome)
            return resultado
        if resultado.sem_key and anterior is not None:
            resultado.base = anterior['registros']
        fechamento = cliente.completar(nome, sync, api_key=api_key, max_remocao=teto,
                                       escopo=escopo)
        resultado.ok, resultado.removidos = True, int(fechamento.get('removed') or 0)
        if historico is not None:
            try:
                historico.registrar(escopo, nome, resultado.registros, resultado.removidos,
                                    execucao)
            except OSError as erro:
                # A carga valeu; so a base do proximo teto (e o aviso ao ouvinte) nao.
                resultado.aviso = 'historico nao gravado em %s (%s)' % (
                    historico.caminho, erro)
        return resultado
    except cliente.ErroAutenticacao:
        raise
    except cliente.ErroRemocaoAcimaDoTeto as erro:
        dica = ''
        if resultado.sem_key:
            # Sem base, as versoes velhas do ao-vivo contam como remocao.
            dica = (' (dataset sem key e sem carga aceita no historico%s: as versoes'
                    ' antigas que o ao-vivo acumulou contam no teto; depois de uma carga'
                    ' aceita ele passa a comparar com ela)'
                    % (' ' + historico.caminho if historico is not None else
                       ' -- sem --historico/CONTEXTIA_HISTORICO'))
        resultado.erro = str(erro).rstrip('. ') + dica + _repetir_permitindo(nome)
        return resultado
    except Exception as erro:                   # noqa: BLE001 - um dataset nao derruba os outros
        # Origem que cai no meio, view que nao existe, Contextia fora: o dataset
        # falha sem complete e os seguintes ainda tentam.
        if not resultado.registros:
            resultado.registros = contador[0]
        resultado.erro = '%s: %s' % (type(erro).__name__, erro)
        return resultado
    finally:
        resultado.segundos = time.monotonic() - inicio


def _repetir_permitindo(nome: str) -> str:
    """O fim de toda recusa do teto: como liberar quando a limpeza e real."""
    return (' -- se a remocao e real (limpeza no ERP), repita so este dataset com'
            ' --dataset=%s --max-remocao=1' % nome)


def linha_de_resultado(resultado: ResultadoCarga, seco: bool = False) -> str:
    """A linha que o conector imprime por dataset."""
    nome = resultado.dataset + (' (dominio)' if resultado.dominio else '')
    # Sem key o servidor deduplica por hash: linha alterada entra como nova e a
    # velha so sai no complete. Dito na linha, para ninguem estranhar `novos`.
    aviso = ''
    if resultado.sem_key:
        aviso = ' [sem key: dedup por hash; teto %s]' % (
            'contra a carga anterior de %d' % resultado.base
            if resultado.base is not None else 'sobre o dataset')
    if resultado.aviso:
        aviso += ' AVISO: %s' % resultado.aviso
    if seco:
        return '  %-34s registros=%-7d (seco: lido e contado, nada enviado)  %.1fs' % (
            nome, resultado.registros, resultado.segundos)
    numeros = ('registros=%d novos=%d atualizados=%d iguais=%d removidos=%d'
               ' campos descritos=%d' % (
                   resultado.registros, resultado.novos, resultado.atualizados,
                   resultado.iguais, resultado.removidos, resultado.campos))
    if resultado.ok:
        return '  %-34s %s  %.1fs%s' % (nome, numeros, resultado.segundos, aviso)
    return '  %-34s FALHOU -- %s\n  %-34s %s' % (nome, resultado.erro, '', numeros)


def resumo(escopo: str, resultados: Sequence[ResultadoCarga], segundos: float,
           seco: bool = False) -> str:
    """A linha unica do fim: o que o log do ouvinte guarda e um humano le primeiro."""
    falhos = [r.dataset for r in resultados if not r.ok]
    texto = 'resumo escopo=%s: %d dataset(s), %d ok, %d com falha; registros=%d' % (
        escopo, len(resultados), len(resultados) - len(falhos), len(falhos),
        sum(r.registros for r in resultados))
    if not seco:
        texto += ' novos=%d atualizados=%d iguais=%d removidos=%d' % (
            sum(r.novos for r in resultados), sum(r.atualizados for r in resultados),
            sum(r.iguais for r in resultados), sum(r.removidos for r in resultados))
    texto += ' em %.1fs' % segundos
    if seco:
        texto += ' (SECO: nada enviado)'
    if falhos:
        texto += ' -- FALHARAM: %s' % ', '.join(falhos)
    return texto
