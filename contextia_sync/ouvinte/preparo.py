"""Resolver a configuração do ouvinte na ordem certa e montar o `Contexto`."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from typing import IO
from collections.abc import Callable, Mapping

from contextia_sync.origem import AdaptadorDeOrigem
from contextia_sync.arquivos import gravar_atomico
from contextia_sync.captura import Captura, DatasetVivo
from contextia_sync import padroes, supervisor
from contextia_sync.captura.ao_vivo import datasets_ao_vivo, e_so_varredura, tirar_do_ao_vivo
from contextia_sync.captura.estrategias import (
    criar_captura,
    exigir_estrategia,
    partes,
    resolver_estrategia,
)
from contextia_sync.captura.reconciliacao import OpcoesReconciliacao
from contextia_sync.erros import ErroConfiguracao
from contextia_sync.estado.estado import ARQUIVO_ESTADO, Estado
from contextia_sync.estado.trava import travar
from contextia_sync.fila.quarentena import Quarentena
from contextia_sync.intake import cliente
from contextia_sync.intake.transporte import ErroContextia
from contextia_sync.mapeamento import carregar_mapeamento, escopos_excluidos
from contextia_sync.origem import carregar_origem
from contextia_sync.ouvinte import agenda
from contextia_sync.ouvinte.contexto import Configuracao, Contexto
from contextia_sync.provisionamento import regra_projeto
from contextia_sync.provisionamento.chaves import ler_chaves
from contextia_sync.registro import logger
from contextia_sync.tipos import Mapa

# Dentro do diretorio de estado: os registros que o intake recusou de vez.
PASTA_QUARENTENA = 'quarentena'
# Dentro do diretorio de estado: o conjunto de chaves entregue de cada dataset.
PASTA_CONJUNTOS = 'conjuntos'

# A recusa que ensina, para o dataset que a reconciliacao nao pode acompanhar.
SEM_KEY_RECONCILIACAO = (
    'dataset %s sem `key`: a reconciliação compara o conjunto de chaves e não tem o que'
    ' comparar -- a exclusão dele só sai na varredura. O que fazer: declare `key` no'
    ' dataset (ou no `defaults`) com a coluna que identifica a linha (a chave primária'
    ' da view).'
)


def preparar(args: argparse.Namespace, parar: Callable[[], bool]) -> Contexto:
    """Monta o Contexto. Levanta ErroConfiguracao (a CLI sai com 2)."""
    # A ESTRATEGIA vem antes de tudo: e a decisao tomada com o DBA, e
    # `--estrategia=binlog` e a pergunta "o que isso exigiria?" -- a resposta
    # nao pode depender de URL, chaves ou mapeamento valido.
    if args.estrategia:
        exigir_estrategia(args.estrategia)
    mapping = os.path.abspath(args.mapping)
    mapa = carregar_mapeamento(mapping)
    nome_estrategia, de_onde = resolver_estrategia(args.estrategia, mapa)
    info = exigir_estrategia(nome_estrategia)

    varredura = agenda.ler_hora(args.varredura)
    _exigir_destino()
    chaves = _exigir_chaves(args.chaves)
    quantas_chaves = len(ler_chaves(chaves))
    reconcilia = 'reconciliacao' in partes(nome_estrategia)
    if reconcilia and not args.reenviar_quarentena:
        _exigir_remove(nome_estrategia)

    trava, estado = _tomar_pasta_de_estado(args.estado, seco=args.dry_run)
    vivos, fora = datasets_ao_vivo(mapa, nome_estrategia)
    regra = regra_projeto.resolver(mapa)
    origem = carregar_origem(args.source)
    captura = _criar_captura(args, nome_estrategia, mapa, origem, estado, chaves, reconcilia)

    _conferir_captura(captura, vivos)
    # O que a captura conferiu no catálogo e não pode seguir (a view sem
    # `base_tables` no log) sai do ao-vivo, dito: a contagem da subida é a verdade.
    vivos, fora = tirar_do_ao_vivo(vivos, fora, getattr(captura, 'so_varredura', None) or [])
    if args.dry_run:
        _conferir_catalogo(mapa, origem)
    quarentena = (
        None
        if args.dry_run
        else Quarentena(os.path.join(args.estado, PASTA_QUARENTENA), logger=logger)
    )

    config = _configuracao(
        args,
        mapa=mapa,
        mapping=mapping,
        chaves=chaves,
        vivos=vivos,
        fora=fora,
        varredura=varredura,
        estrategia=nome_estrategia,
        reconcilia=reconcilia,
    )
    ctx = Contexto(
        config=config,
        regra=regra,
        origem=origem,
        estado=estado,
        captura=captura,
        parar=parar,
        trava=trava,
        quarentena=quarentena,
    )

    linhas, resumo = _cabecalho(_Subida(args, ctx, info, de_onde, quantas_chaves))
    _anunciar(args, linhas, resumo)
    return ctx


def _tomar_pasta_de_estado(pasta: str, seco: bool) -> tuple[IO[str] | None, Estado]:
    """A pasta de estado gravável e travada, sem a sobra de um ouvinte anterior, e o estado dela."""
    _exigir_pasta_de_estado(pasta)
    trava = travar(pasta)
    # Antes de qualquer outra coisa: a ferramenta que um ouvinte morto deixou rodando.
    supervisor.encerrar_sobra(os.path.join(pasta, supervisor.ARQUIVO_GRUPO))
    # No seco a janela entregue é uma cópia em memória: o seco não grava nada.
    return trava, Estado(os.path.join(pasta, ARQUIVO_ESTADO), seco=seco)


def _configuracao(
    args: argparse.Namespace,
    *,
    mapa: Mapa,
    mapping: str,
    chaves: str,
    vivos: list[DatasetVivo],
    fora: list[tuple[str, str]],
    varredura: tuple[int, int] | None,
    estrategia: str,
    reconcilia: bool,
) -> Configuracao:
    """O que o operador escolheu (linha de comando e mapeamento), já resolvido."""
    return Configuracao(
        mapa=mapa,
        vivos=vivos,
        fora=fora,
        estado_dir=args.estado,
        mapping=mapping,
        source=args.source,
        chaves=chaves,
        folga=args.folga,
        maximo=args.maximo_por_ciclo,
        grupos=args.grupo,
        seco=args.dry_run,
        varredura=varredura,
        janela=args.janela_varredura,
        timeout=args.timeout_ferramenta or None,
        inatividade=args.inatividade_ferramenta or None,
        estrategia=estrategia,
        intervalo_dados=args.intervalo_dados,
        metricas=args.metricas or args.estado,
        intervalo_reconciliacao=args.intervalo_reconciliacao if reconcilia else None,
        modo=_modo(args),
    )


def _modo(args: argparse.Namespace) -> str:
    """Como esta execução roda (o `modo` do status): o seco vence, depois o reenvio, o --once."""
    if args.dry_run:
        return 'seco'
    if args.reenviar_quarentena:
        return 'reenviar-quarentena'
    if args.once:
        return 'once'
    return 'servico'


def _exigir_destino() -> None:
    """CONTEXTIA_URL definida e segura, antes de qualquer conexão (saída 2)."""
    if not cliente.url_destino():
        raise ErroConfiguracao(
            'Falta CONTEXTIA_URL (a instalação do Contextia DESTE cliente).\n'
            'Não há padrão embutido: um valor default mandaria o dado para a'
            ' instalação de outro cliente, sem erro nenhum. Defina-a no ambiente do'
            ' serviço (ex.: no EnvironmentFile da unidade systemd).'
        )
    # HTTP puro fora de loopback, intake noutro host: recusado aqui, antes de
    # qualquer conexao (ErroDestino e ErroConfiguracao: saida 2).
    cliente.conferir_destino()


def _exigir_chaves(pedido: str) -> str:
    """O caminho absoluto do arquivo de chaves, que tem de existir."""
    chaves = os.path.abspath(pedido)
    if not os.path.lexists(chaves):
        raise ErroConfiguracao(
            'Arquivo de chaves não existe: %s\n'
            'O ouvinte precisa de uma chave por empresa. Rode o provisionar.py antes'
            ' -- ou aponte --chaves para o arquivo que ele gerou.' % pedido
        )
    return chaves


def _criar_captura(
    args: argparse.Namespace,
    nome_estrategia: str,
    mapa: Mapa,
    origem: AdaptadorDeOrigem,
    estado: Estado,
    chaves: str,
    reconcilia: bool,
) -> Captura:
    """A estratégia de captura escolhida, com as opções da reconciliação se ela as usa."""
    opcoes = None
    if reconcilia:
        excluidos = escopos_excluidos(mapa)
        opcoes = OpcoesReconciliacao(
            pasta=os.path.join(args.estado, PASTA_CONJUNTOS),
            intervalo=args.intervalo_reconciliacao,
            seco=args.dry_run,
            # As empresas que recebem o ao-vivo, lidas a cada reconciliacao (o
            # ciclo de projetos acrescenta as novas ao arquivo).
            escopos=lambda: set(ler_chaves(chaves)) - excluidos,
        )
    captura = criar_captura(
        nome_estrategia,
        origem=origem,
        estado=estado,
        folga=args.folga,
        maximo=args.maximo_por_ciclo,
        reconciliacao=opcoes,
    )
    # O `slot_logico` tira do mapeamento inteiro o nome do slot (o `client`).
    usar_mapa = getattr(captura, 'usar_mapa', None)
    if callable(usar_mapa):
        usar_mapa(mapa)
    return captura


# Uma linha do cabecalho da subida: (aviso?, texto).
LinhaDoCabecalho = tuple[bool, str]


@dataclass(frozen=True)
class _Subida:
    """O que o cabeçalho da subida mostra: as opções, o Contexto e a estratégia escolhida."""

    args: argparse.Namespace
    ctx: Contexto
    info: Mapping[str, object]  # a ficha da estrategia (exigir_estrategia)
    de_onde: str  # quem escolheu a estrategia: a linha de comando, o mapeamento, o padrao
    quantas_chaves: int


def _cabecalho(subida: _Subida) -> tuple[list[LinhaDoCabecalho], str]:
    """O cabeçalho da subida, (aviso?, texto) na ordem em que sai no log, e o resumo."""
    linhas: list[LinhaDoCabecalho] = []
    for secao in _SECOES_DO_CABECALHO:
        linhas += secao(subida)
    return linhas, _resumo_da_subida(subida)


def _secao_destino(subida: _Subida) -> list[LinhaDoCabecalho]:
    """De quem, para onde, com que chaves e por que estratégia (e se ela vê exclusão)."""
    args, config, info = subida.args, subida.ctx.config, subida.info
    linhas: list[LinhaDoCabecalho] = [
        (False, 'cliente ..........: %s' % (config.mapa.get('client') or '(sem nome)')),
        (False, 'destino ..........: %s' % cliente.url_destino()),
        (False, 'chaves ...........: %s (%s empresa(s))' % (args.chaves, subida.quantas_chaves)),
        (
            False,
            'estratégia .......: %s (%s) -- %s'
            % (config.estrategia, subida.de_onde, info['o_que_e']),
        ),
    ]
    if not info['ve_delete']:
        linhas.append(
            (
                True,
                'esta estratégia NÃO vê exclusão: linha apagada na origem só'
                ' sai do Contextia na varredura. O cliente precisa saber disso.',
            )
        )
    return linhas


def _secao_ciclos(subida: _Subida) -> list[LinhaDoCabecalho]:
    """O ritmo de cada ciclo: dados, reconciliação (e quem fica fora dela), projetos, varredura."""
    args, config = subida.args, subida.ctx.config
    linhas: list[LinhaDoCabecalho] = [
        (
            False,
            'dados ............: a cada %ss, folga de %ss, teto de %s linhas'
            % (args.intervalo_dados, args.folga, args.maximo_por_ciclo),
        )
    ]
    if config.intervalo_reconciliacao is not None:
        linhas.append(
            (
                False,
                'reconciliação ....: a cada %ss; remoção acima de %.0f%% das'
                ' chaves de uma empresa é recusada (o teto do complete)'
                % (args.intervalo_reconciliacao, 100.0 * padroes.MAX_REMOCAO),
            )
        )
        linhas += [
            (True, SEM_KEY_RECONCILIACAO % alvo.nome)
            for alvo in config.vivos
            if not alvo.reconcilia
        ]
    linhas += [
        (False, 'projetos .........: a cada %ss' % args.intervalo_projetos),
        (
            False,
            'varredura ........: %s' % agenda.descrever(config.varredura, args.janela_varredura),
        ),
        (
            False,
            'ferramentas ......: tempo máximo %ss, inatividade máxima %s'
            % (
                args.timeout_ferramenta,
                '%ss' % args.inatividade_ferramenta if args.inatividade_ferramenta else 'desligada',
            ),
        ),
    ]
    return linhas


def _secao_avisos_da_execucao(subida: _Subida) -> list[LinhaDoCabecalho]:
    """O que esta execução não fará: a carga inicial fora da janela, e nada no seco."""
    args, ctx = subida.args, subida.ctx
    linhas: list[LinhaDoCabecalho] = []
    if ctx.config.varredura and not ctx.estado.varredura_feita_em() and not args.varrer_agora:
        linhas.append(
            (
                True,
                'nenhuma varredura registrada ainda. O ouvinte NÃO faz carga'
                ' completa fora da janela (cairia no horário comercial). Para'
                ' a carga inicial agora, suba com --varrer-agora.',
            )
        )
    if args.dry_run:
        linhas.append(
            (
                True,
                'MODO SECO: nada e enviado, nada e criado, a marca de água não'
                ' avança e o estado não é gravado',
            )
        )
    return linhas


def _secao_datasets(subida: _Subida) -> list[LinhaDoCabecalho]:
    """Os datasets ao vivo e os de fora, a regra de projeto, e o ao-vivo sem dataset."""
    config = subida.ctx.config
    total = len(config.mapa.get('datasets') or [])
    linhas: list[LinhaDoCabecalho] = [
        (False, 'datasets ao vivo .: %s de %s' % (len(config.vivos), total))
    ]
    # O `só varredura` é correção por fazer (AVISO) e já diz que só muda na varredura.
    linhas += [
        (True, '   fora do ao-vivo: %-28s %s' % (nome, motivo))
        if e_so_varredura(motivo)
        else (False, '   fora do ao-vivo: %-28s %s (só muda na varredura)' % (nome, motivo))
        for nome, motivo in config.fora
    ]
    # Uma linha de log por linha: o log escapa a quebra de linha dentro de um valor.
    linhas.append((False, 'regra de projeto:'))
    linhas += [(False, linha) for linha in regra_projeto.descrever(subida.ctx.regra).split('\n')]
    if not config.vivos:
        linhas.append(
            (
                True,
                'NENHUM dataset tem coluna de mudança: o ouvinte só fará'
                ' varredura, o que o cron já fazia. Declare `watch_column` no'
                ' mapeamento para o ao-vivo valer a pena.',
            )
        )
    return linhas


# As secoes do cabecalho, na ordem em que saem no log (e no ouvinte-cabecalho.txt).
_SECOES_DO_CABECALHO: tuple[Callable[[_Subida], list[LinhaDoCabecalho]], ...] = (
    _secao_destino,
    _secao_ciclos,
    _secao_avisos_da_execucao,
    _secao_datasets,
)


def _resumo_da_subida(subida: _Subida) -> str:
    """A linha única do `--once` ocioso, quando o cabeçalho não mudou."""
    config = subida.ctx.config
    return '%s -> %s: %s de %s dataset(s) ao vivo, %s empresa(s), %s, varredura %s' % (
        config.mapa.get('client') or '(sem nome)',
        cliente.url_destino(),
        len(config.vivos),
        len(config.mapa.get('datasets') or []),
        subida.quantas_chaves,
        config.estrategia,
        '%02d:%02d' % config.varredura if config.varredura else 'DESLIGADA',
    )


# Dentro do diretorio de estado: o ultimo cabecalho completo da subida.
ARQUIVO_CABECALHO = 'ouvinte-cabecalho.txt'


def _anunciar(args: argparse.Namespace, linhas: list[tuple[bool, str]], resumo: str) -> None:
    """
    O cabeçalho da subida no log: inteiro no serviço, curto no `--once` ocioso.

    No serviço (e no `--dry-run`, no `--reenviar-quarentena`) sai sempre inteiro.
    No `--once` -- o cron, a cada 5 minutos -- sai inteiro só quando mudou desde
    a execução anterior (mapeamento, opções, empresa nova no arquivo de chaves,
    aviso que apareceu ou sumiu); fora isso, uma linha (`resumo`) e o resto a
    DEBUG. Aviso sai sempre, como WARNING: nunca fica escondido. O cabeçalho
    inteiro fica em <estado>/ouvinte-cabecalho.txt (o seco não grava nada).
    """
    texto = ''.join('%s %s\n' % ('AVISO' if aviso else '     ', linha) for aviso, linha in linhas)
    mudou = True if args.dry_run else _guardar_cabecalho(args.estado, texto)
    if args.once and not mudou:
        logger.info(
            '===== ouvinte (pid %s) ===== --once: %s (cabeçalho sem mudança: %s)',
            os.getpid(),
            resumo,
            ARQUIVO_CABECALHO,
        )
        for aviso, linha in linhas:
            (logger.warning if aviso else logger.debug)('%s', linha)
        return
    logger.info('===== ouvinte (pid %s) =====', os.getpid())
    for aviso, linha in linhas:
        (logger.warning if aviso else logger.info)('%s', linha)


def _guardar_cabecalho(pasta: str, texto: str) -> bool:
    """Grava o cabeçalho em <pasta>/ouvinte-cabecalho.txt; True se mudou (ou se não deu)."""
    caminho = os.path.join(pasta, ARQUIVO_CABECALHO)
    try:
        with open(caminho, encoding='utf-8') as arquivo:
            if arquivo.read() == texto:
                return False
    except (OSError, UnicodeDecodeError):
        pass
    try:
        gravar_atomico(caminho, texto)
    except OSError as erro:
        logger.debug('cabeçalho não gravado em %s: %s', caminho, erro)
    return True


def _exigir_pasta_de_estado(pasta: str) -> None:
    """
    A pasta de estado existe (ou e criada) e aceita gravação -- provado gravando.

    Somente leitura ou disco cheio na subida e erro de configuração com a correção,
    não um OSError cru: sem gravar o estado, cada ciclo releria o mesmo intervalo.
    """
    try:
        os.makedirs(pasta, exist_ok=True)
        gravar_atomico(os.path.join(pasta, '.ouvinte-gravavel'), 'ok\n')
        os.unlink(os.path.join(pasta, '.ouvinte-gravavel'))
    except OSError as erro:
        raise ErroConfiguracao(
            'A pasta de estado %s não aceita gravação (%s: %s).\n'
            'O ouvinte grava ali a marca de água a cada ciclo; sem isso nada avança.'
            ' Correção: de permissão de escrita ao usuário do serviço (chown/chmod),'
            ' libere espaço no disco, ou aponte --estado para outra pasta (na unidade'
            ' systemd, ela precisa estar em ReadWritePaths=).'
            % (pasta, type(erro).__name__, erro.strerror or erro)
        ) from None


def _exigir_remove(estrategia: str) -> None:
    """
    A reconciliacao só serve se o Contextia aceita `remove`: senão ela veria a
    exclusão e não teria como conta-la. O Contextia fora do ar agora não é
    recusa: o envio confere de novo (e falha alto) na primeira remoção.
    """
    try:
        anunciadas = cliente.capacidades()
    except ErroContextia as erro:
        logger.warning(
            'capacidades do Contextia não lidas na subida (%s): o primeiro envio'
            ' com remoção confere de novo',
            erro,
        )
        return
    if anunciadas.get('remove'):
        return
    raise ErroConfiguracao(
        'A estratégia `%s` precisa que o Contextia aceite `remove` no envelope do intake, e o'
        ' Contextia em %s anuncia capacidades.remove = false: a reconciliação veria a exclusão'
        ' e não teria como contá-la.\n'
        'O que fazer: use --estrategia=coluna (ou `listener.strategy: "coluna"` no'
        ' mapeamento) -- inclusão e alteração continuam em segundos e a exclusão sai na'
        ' varredura diária --, ou atualize o Contextia para uma versão que anuncie `remove`'
        ' e suba o ouvinte de novo.' % (estrategia, cliente.url_destino())
    )


def _conferir_captura(captura: Captura, vivos: list[DatasetVivo]) -> None:
    """
    O que a estratégia exige da origem, conferido na subida (saída 2 se falta).

    Origem fora do ar agora não é erro de configuração: o laço tenta de novo com
    espera, e a estratégia confere cada dataset na primeira leitura dele.
    """
    if not vivos:
        return
    try:
        problemas = captura.conferir(vivos)
    except ErroConfiguracao:
        raise
    except Exception as erro:  # noqa: BLE001 - a origem pode estar fora agora
        logger.warning(
            'origem indisponível na subida (%s: %s): os datasets são conferidos'
            ' na primeira leitura de cada um',
            type(erro).__name__,
            erro,
        )
        return
    if problemas:
        raise ErroConfiguracao('\n'.join(problemas))


def _conferir_catalogo(mapa: Mapa, origem: AdaptadorDeOrigem) -> None:
    """
    `--dry-run`: toda coluna mapeada (columns, key, watch, scope, fields e o
    cadastro) conferida no catálogo da origem, todas de uma vez (saída 2).
    """
    from contextia_sync.carga.completa import conferir_colunas

    try:
        problemas = conferir_colunas(mapa, origem)
    except Exception as erro:  # noqa: BLE001 - a origem pode estar fora agora
        logger.warning(
            '[SECO] catálogo da origem não conferido (%s: %s): a origem está fora?',
            type(erro).__name__,
            erro,
        )
        return
    if problemas:
        raise ErroConfiguracao(
            '--dry-run: %d coluna(s) do mapeamento não existem na'
            ' origem:\n%s' % (len(problemas), '\n'.join('  - %s' % p for p in problemas))
        )
    logger.info('[SECO] catálogo da origem: toda coluna do mapeamento existe')
