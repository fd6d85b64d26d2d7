"""A linha de comando do ouvinte (`ouvinte.py`, ou o comando `ouvinte`)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from contextia_sync import padroes
from contextia_sync.linha_de_comando import novo_parser
from contextia_sync.erros import SAIDA_CONFIGURACAO, SAIDA_FALHA, SAIDA_OK, ErroConfiguracao

DESCRICAO = (
    'Ouvinte: leva ao Contextia o que mudou na origem, em segundos.'
    ' Guia do operador: docs/ouvinte.md'
)
SAIDAS = {
    SAIDA_OK: 'tudo certo (o serviço parado por SIGTERM também sai com 0)',
    SAIDA_FALHA: 'no --once, algum ciclo falhou; no --reenviar-quarentena, sobrou registro'
    ' na quarentena; no serviço, a parada fria (segundo sinal). O que falhou é'
    ' tentado de novo no próximo ciclo',
}


def _segundos(texto: str) -> int:
    """Um inteiro de segundos, 0 ou mais (a mensagem do argparse e a de um `type`)."""
    try:
        valor = int(texto)
    except ValueError:
        raise argparse.ArgumentTypeError('%r não é um número inteiro de segundos' % texto) from None
    if valor < 0:
        raise argparse.ArgumentTypeError('%r: segundos não podem ser negativos' % texto)
    return valor


def argumentos(argv: list[str]) -> argparse.Namespace:
    """Os argumentos do ouvinte; o `--help` os lista na ordem de `_GRUPOS`."""
    p = novo_parser('ouvinte', DESCRICAO, saidas=SAIDAS)
    for grupo in _GRUPOS:
        grupo(p)
    return p.parse_args(argv)


def _entrada(p: argparse.ArgumentParser) -> None:
    """O que o ouvinte lê e onde guarda o estado."""
    p.add_argument('--mapping', required=True, help='mappings/<cliente>.json')
    p.add_argument(
        '--source',
        default=padroes.SOURCE,
        help='adaptador em sources/ sem .py (padrão %s)' % padroes.SOURCE,
    )
    p.add_argument(
        '--chaves',
        required=True,
        metavar='ARQ',
        help='o arquivo de chaves do provisionador (uma por empresa)',
    )
    p.add_argument(
        '--estado', required=True, help='diretório das marcas de água, do status e da trava'
    )


def _ritmo(p: argparse.ArgumentParser) -> None:
    """De quanto em quanto tempo cada ciclo roda, e a hora da varredura."""
    p.add_argument(
        '--intervalo-dados',
        type=int,
        default=padroes.INTERVALO_DADOS,
        metavar='S',
        help='segundos entre leituras do que mudou (padrão %d)' % padroes.INTERVALO_DADOS,
    )
    p.add_argument(
        '--intervalo-projetos',
        type=int,
        default=padroes.INTERVALO_PROJETOS,
        metavar='S',
        help='segundos entre buscas por empresa nova (padrão %d)' % padroes.INTERVALO_PROJETOS,
    )
    p.add_argument(
        '--varredura',
        default=padroes.HORA_VARREDURA,
        metavar='HH:MM',
        help='hora da carga completa diária, a ÚNICA que remove'
        ' (padrão %s; "nao" desliga)' % padroes.HORA_VARREDURA,
    )
    p.add_argument(
        '--janela-varredura',
        type=int,
        default=padroes.JANELA_VARREDURA,
        metavar='MIN',
        help='por quantos minutos depois da hora a varredura ainda pode'
        ' disparar (padrão %d); fora dela espera o dia seguinte' % padroes.JANELA_VARREDURA,
    )


def _captura(p: argparse.ArgumentParser) -> None:
    """Como se descobre o que mudou, e quanto se lê por ciclo."""
    from contextia_sync.captura.estrategias import ESTRATEGIAS, IMPLEMENTACOES

    p.add_argument(
        '--estrategia',
        default=None,
        metavar='NOME',
        help='como detectar o que mudou: %s. Implementadas: %s'
        ' (`coluna+reconciliacao` põe o DELETE no Contextia em até um'
        ' --intervalo-reconciliacao). Padrão: `listener.strategy`'
        ' do mapeamento, ou `%s`'
        % (', '.join(sorted(ESTRATEGIAS)), ', '.join(sorted(IMPLEMENTACOES)), padroes.ESTRATEGIA),
    )
    p.add_argument(
        '--intervalo-reconciliacao',
        type=_segundos,
        default=padroes.INTERVALO_RECONCILIACAO,
        metavar='S',
        help='com a reconciliação (`reconciliacao`, `coluna+reconciliacao`):'
        ' segundos entre duas leituras do conjunto de chaves de um dataset,'
        ' o que põe a exclusão no Contextia (padrão %d; 0 = a cada ciclo'
        ' de dados)' % padroes.INTERVALO_RECONCILIACAO,
    )
    p.add_argument(
        '--folga',
        type=int,
        default=padroes.FOLGA,
        metavar='S',
        help='quanto a leitura recua atrás da marca de água, para pegar'
        ' transação que comitou atrasada (padrão %d)' % padroes.FOLGA,
    )
    p.add_argument(
        '--maximo-por-ciclo',
        type=int,
        default=padroes.MAXIMO_POR_CICLO,
        metavar='N',
        help='acima disso o dataset e entregue a varredura (padrão %d)' % padroes.MAXIMO_POR_CICLO,
    )


def _ferramentas(p: argparse.ArgumentParser) -> None:
    """A empresa nova e as ferramentas filhas (provisionar, carga completa)."""
    p.add_argument(
        '--grupo',
        action='append',
        default=[],
        metavar='SLUG',
        help='grupo de empresas para o projeto de empresa nova; repita',
    )
    p.add_argument(
        '--timeout-ferramenta',
        type=int,
        default=padroes.TIMEOUT_FERRAMENTA,
        metavar='S',
        help='tempo máximo de uma ferramenta (carga completa),'
        ' padrão %d' % padroes.TIMEOUT_FERRAMENTA,
    )
    p.add_argument(
        '--inatividade-ferramenta',
        type=int,
        default=padroes.INATIVIDADE_FERRAMENTA,
        metavar='S',
        help='encerra a ferramenta que ficar S segundos sem escrever'
        ' nenhuma linha (padrão %d; 0 desliga)' % padroes.INATIVIDADE_FERRAMENTA,
    )


def _observar(p: argparse.ArgumentParser) -> None:
    """O log, as métricas e a saúde vista de fora."""
    p.add_argument('--log', default=None, help='arquivo de log rotativo (além da tela)')
    p.add_argument(
        '--metricas',
        default=None,
        metavar='DIR',
        help='pasta do arquivo ouvinte.prom (métricas para o textfile collector'
        ' do node_exporter), reescrito a cada volta. Padrão: a pasta --estado',
    )
    p.add_argument(
        '--saude',
        action='store_true',
        help='não roda o ouvinte: lê o status de --estado e diz OK, ALERTA ou'
        ' CRITICO, com os códigos de um plugin de monitoramento (0/1/2/3);'
        ' ver `ouvinte.py --saude --help`',
    )


def _modos(p: argparse.ArgumentParser) -> None:
    """O que roda em vez do serviço: uma volta, o seco, a quarentena, o autoteste."""
    p.add_argument(
        '--varrer-agora',
        action='store_true',
        help='roda a varredura completa nesta subida, sem esperar a hora',
    )
    p.add_argument(
        '--once', action='store_true', help='um ciclo de cada e sai (código 1 se algum falhou)'
    )
    p.add_argument(
        '--dry-run',
        action='store_true',
        help='lê tudo e não envia, não cria e não grava marca de água',
    )
    p.add_argument(
        '--reenviar-quarentena',
        action='store_true',
        help='tenta de novo os registros que o intake recusou de vez'
        ' (<estado>/quarentena) e sai (código 1 se algum ficou)',
    )
    p.add_argument(
        '--autoteste', action='store_true', help='prova a lógica pura sem banco e sem rede'
    )


def _slot(p: argparse.ArgumentParser) -> None:
    """Os comandos do `slot_logico` (instalação e desinstalação)."""
    p.add_argument(
        '--criar-slot',
        action='store_true',
        help='`slot_logico`: cria a publicação e o slot `contextia_<cliente>` na'
        ' origem (uma vez, na instalação) e sai; a partir dali o banco retém'
        ' WAL até o ouvinte consumir. Usa CONTEXTIA_ORIGEM_DBA se definida'
        ' (o dono das tabelas), senão CONTEXTIA_ORIGEM. Só --mapping e'
        ' --estado importam',
    )
    p.add_argument(
        '--remover-slot',
        action='store_true',
        help='`slot_logico`: remove o slot e o que o --criar-slot pôs na publicação'
        ' (anotado em --estado: a publicação que ele criou sai inteira; na do DBA,'
        ' só as tabelas dele) -- o PRIMEIRO passo da desinstalação: slot'
        ' abandonado enche o disco do cliente -- e sai; com o ouvinte parado',
    )


# Os grupos de opções, na ordem do `--help`.
_GRUPOS: tuple[Callable[[argparse.ArgumentParser], None], ...] = (
    _entrada,
    _ritmo,
    _captura,
    _ferramentas,
    _observar,
    _modos,
    _slot,
)


def comando_do_slot(argv: list[str]) -> int:
    """`--criar-slot` / `--remover-slot`: só precisam do mapeamento e da origem."""
    from contextia_sync.captura import slot_logico
    from contextia_sync.captura.ao_vivo import datasets_ao_vivo
    from contextia_sync.estado.trava import travar
    from contextia_sync.mapeamento import carregar_mapeamento

    p = novo_parser('ouvinte', DESCRICAO, saidas=SAIDAS)
    p.add_argument('--mapping', required=True)
    p.add_argument('--estado', required=True)
    p.add_argument('--criar-slot', action='store_true')
    p.add_argument('--remover-slot', action='store_true')
    args, _resto = p.parse_known_args(argv)
    try:
        if args.criar_slot and args.remover_slot:
            raise ErroConfiguracao('--criar-slot e --remover-slot juntos: escolha um.')
        mapa = carregar_mapeamento(args.mapping)
        if args.criar_slot:
            # O que ele cria fica anotado em --estado: o --remover-slot desfaz só isso.
            feito = slot_logico.criar_slot(
                mapa, datasets_ao_vivo(mapa, 'slot_logico')[0], estado=args.estado
            )
        else:
            # Com o ouvinte rodando ele acusaria o slot apagado (CRÍTICO): pare antes.
            trava = travar(args.estado) if os.path.isdir(args.estado) else None
            try:
                feito = slot_logico.remover_slot(mapa, estado=args.estado)
            finally:
                if trava is not None:
                    trava.close()
    except ErroConfiguracao as erro:
        print(str(erro), file=sys.stderr)
        return SAIDA_CONFIGURACAO
    for linha in feito:
        print(linha)
    return SAIDA_OK


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    # O autoteste nao usa mapeamento, chaves nem estado: atendido antes do
    # argparse, que exigiria inventar valores para eles.
    if '--autoteste' in argv:
        from contextia_sync.ouvinte.autoteste import rodar

        return rodar()
    # A saude le os arquivos de status de outro ouvinte (o que esta rodando): nao
    # precisa de mapeamento nem trava, e tem os codigos de um plugin de monitoramento.
    if '--saude' in argv:
        from contextia_sync.saude import main as saude

        return saude([a for a in argv if a != '--saude'])
    # O slot do PostgreSQL: um comando do operador, não o serviço.
    if '--criar-slot' in argv or '--remover-slot' in argv:
        return comando_do_slot(argv)
    args = argumentos(argv)

    from contextia_sync import systemd
    from contextia_sync.ouvinte.laco import Parada, ParadaFria, laco
    from contextia_sync.ouvinte.preparo import preparar
    from contextia_sync.registro import arquivo_de_log, logger

    if args.log:
        arquivo_de_log(args.log)

    parada = Parada()
    parada.instalar()
    # A primeira chamada tira NOTIFY_SOCKET do ambiente antes de qualquer filho.
    systemd.status('subindo: lendo a configuração')
    try:
        # `parar` e olhado entre datasets, empresas e nas esperas do transporte:
        # cada olhada tambem e um WATCHDOG=1 (no maximo um por segundo).
        ctx = preparar(args, systemd.vigiando(lambda: parada.pedida))
    except ErroConfiguracao as erro:
        # A mensagem ja diz o que e, por que e como corrigir. Sem traceback:
        # quem le e o operador, nao o programador.
        print(str(erro), file=sys.stderr)
        return SAIDA_CONFIGURACAO
    except ParadaFria:
        return SAIDA_FALHA

    try:
        if args.reenviar_quarentena:
            from contextia_sync.ouvinte.dados import reenviar_quarentena

            resultado = reenviar_quarentena(ctx)
            if resultado is None:
                logger.info('quarentena vazia: nada a reenviar')
            return SAIDA_FALHA if resultado is not None and resultado.restantes else 0
        systemd.pronto('de pe: %d dataset(s) ao vivo' % len(ctx.config.vivos))
        return laco(ctx, args, parada)
    except ParadaFria:
        return SAIDA_FALHA
    finally:
        systemd.parando('encerrando')
        try:
            ctx.origem.fechar()
        except Exception:  # noqa: BLE001 - fechar nunca mascara o erro
            pass
        if ctx.trava is not None:
            ctx.trava.close()
        logger.info('ouvinte encerrado')


if __name__ == '__main__':
    sys.exit(main())
