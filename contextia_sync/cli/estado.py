"""
A linha de comando das ferramentas de estado (`estado.py`, `contextia-estado`,
`python -m contextia_sync.cli.estado`).

    mostrar [--json]          onde cada dataset esta (lê sem a trava)
    marcar DATASET max|VALOR  põe a marca de água de um dataset (com a trava)
    esquecer-carga EMPRESA    esquece a carga inicial pendente (com a trava)

Aqui: argumentos, a confirmação do operador, o que se imprime e o código de
saída. A lógica mora em contextia_sync/ouvinte/estado_a_mao.py; o guia, em
docs/ouvinte.md (ver e mudar o estado a mão).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Callable

from contextia_sync import padroes
from contextia_sync.linha_de_comando import ParserPt, novo_parser, recusar
from contextia_sync.erros import (
    SAIDA_CONFIGURACAO,
    SAIDA_FALHA,
    SAIDA_OK,
    ErroConfiguracao,
    texto_das_saidas,
)

PROG = 'estado'
DESCRICAO = (
    'Ver e mudar à mão o estado do ouvinte: onde cada dataset está, a marca de água'
    ' de um dataset, a carga inicial pendente de uma empresa. Quem muda pega a'
    ' trava do ouvinte: com ele rodando, recusa. Guia: docs/ouvinte.md'
)
SAIDAS = {
    SAIDA_OK: 'feito (ou nada a mudar)',
    SAIDA_FALHA: 'não confirmado, ou a origem não respondeu (nada mudou)',
    SAIDA_CONFIGURACAO: 'erro de configuração, ouvinte rodando ou sem confirmação (nada mudou)',
}
EPILOGO = texto_das_saidas(SAIDAS)


def argumentos(argv: list[str] | None = None) -> argparse.Namespace:
    """Os argumentos de `estado` (argparse sai com 2 se estão errados)."""
    p = novo_parser(PROG, DESCRICAO, saidas=SAIDAS)
    # As opcoes comuns valem depois do subcomando (`estado.py marcar ... --estado DIR`).
    base = ParserPt(add_help=False)
    base.add_argument(
        '--estado',
        required=True,
        metavar='DIR',
        help='o diretório de estado do ouvinte (o --estado dele)',
    )
    sub = p.add_subparsers(dest='comando', required=True, metavar='COMANDO')

    mostrar = sub.add_parser(
        'mostrar',
        parents=[base],
        description='Onde cada dataset está: marca de água, última'
        ' sonda boa, entregue à varredura, quarentena; e as cargas iniciais pendentes. Lê'
        ' sem a trava (roda com o ouvinte de pé) e não muda nada.',
        epilog=EPILOGO,
        help='onde cada dataset está (tabela, ou --json)',
    )
    mostrar.add_argument(
        '--mapping',
        help='mappings/<cliente>.json: mostra todo dataset dele, inclusive os de fora do ao-vivo',
    )
    mostrar.add_argument('--json', action='store_true', help='JSON em vez da tabela')

    marcar = sub.add_parser(
        'marcar',
        parents=[base],
        description='Põe a marca de água de um dataset em `max` (o'
        ' máximo da coluna de mudança na origem agora, lido com o login somente leitura) ou'
        ' num valor, conferido contra o tipo da coluna. Depois de dizer o que será relido ou'
        ' pulado, pede confirmação (ou --sim).',
        epilog=EPILOGO,
        help='põe a marca de água de um dataset (max ou um valor)',
    )
    marcar.add_argument(
        'dataset', metavar='DATASET', help='o dataset (nome do mapeamento ou normalizado)'
    )
    marcar.add_argument(
        'valor', metavar='max|VALOR', help='`max`, ou a marca nova (ex.: "2026-09-01 10:30:00")'
    )
    marcar.add_argument('--mapping', required=True, help='mappings/<cliente>.json')
    marcar.add_argument(
        '--source',
        default=padroes.SOURCE,
        help='adaptador em sources/ sem .py (padrão %s)' % padroes.SOURCE,
    )
    marcar.add_argument(
        '--folga',
        type=int,
        default=padroes.FOLGA,
        metavar='S',
        help='a --folga do ouvinte: a janela antes da marca nova lembrada como'
        ' entregue (padrão %d)' % padroes.FOLGA,
    )
    marcar.add_argument(
        '--maximo-por-ciclo',
        type=int,
        default=padroes.MAXIMO_POR_CICLO,
        metavar='N',
        help='o --maximo-por-ciclo do ouvinte, para avisar se o'
        ' que a marca nova entrega passa dele (padrão %d)' % padroes.MAXIMO_POR_CICLO,
    )
    marcar.add_argument('--sim', action='store_true', help='não pergunta: confirma')

    esquecer = sub.add_parser(
        'esquecer-carga',
        parents=[base],
        description='Esquece a carga inicial pendente de uma'
        ' empresa (`cargas_iniciais_pendentes`): o ouvinte deixa de refazê-la a cada ciclo de'
        ' projetos. Pede confirmação (ou --sim).',
        epilog=EPILOGO,
        help='esquece a carga inicial pendente de uma empresa',
    )
    esquecer.add_argument('empresa', metavar='EMPRESA', help='o escopo (ex.: 297)')
    esquecer.add_argument('--sim', action='store_true', help='não pergunta: confirma')
    return p.parse_args(argv)


def confirmar(sim: bool, perguntar: Callable[[str], str] = input) -> int | None:
    """None = confirmado; senão o código de saída (sem terminal, ou o operador disse não)."""
    if sim:
        return None
    if not sys.stdin.isatty():
        print(
            '%s: sem terminal para confirmar: nada mudou. Repita com --sim para confirmar'
            ' sem pergunta.' % PROG,
            file=sys.stderr,
        )
        return SAIDA_CONFIGURACAO
    try:
        resposta = perguntar('Confirma? [s/N] ')
    except EOFError:
        resposta = ''
    if resposta.strip().lower() in ('s', 'sim'):
        return None
    print('não confirmado: nada mudou.')
    return SAIDA_FALHA


def _mostrar(args: argparse.Namespace) -> int:
    from contextia_sync.fila.quarentena import Quarentena
    from contextia_sync.mapeamento import carregar_mapeamento
    from contextia_sync.ouvinte import estado_a_mao
    from contextia_sync.ouvinte.preparo import PASTA_QUARENTENA

    mapa = carregar_mapeamento(args.mapping) if args.mapping else None
    pasta_quarentena = os.path.join(args.estado, PASTA_QUARENTENA)
    quarentena = (
        Quarentena(pasta_quarentena, somente_leitura=True).por_dataset()
        if os.path.isdir(pasta_quarentena)
        else {}
    )
    retrato = estado_a_mao.retratar(args.estado, mapa, quarentena)
    if args.json:
        print(json.dumps(retrato.para_json(), ensure_ascii=False, indent=1))
    else:
        print('\n'.join(retrato.tabela()))
    return SAIDA_OK


def _marcar(args: argparse.Namespace) -> int:
    from contextia_sync.captura.coluna import CapturaColuna
    from contextia_sync.mapeamento import carregar_mapeamento
    from contextia_sync.origem import ErroOrigem, carregar_origem
    from contextia_sync.ouvinte import estado_a_mao

    mapa = carregar_mapeamento(args.mapping)
    alvo = estado_a_mao.achar_dataset(mapa, args.dataset)
    origem = carregar_origem(args.source)
    try:
        with estado_a_mao.com_trava(args.estado) as estado:
            captura = CapturaColuna(origem, estado, args.folga, args.maximo_por_ciclo)
            try:
                mudanca = estado_a_mao.planejar_marca(captura, estado, alvo, args.valor)
            except ErroConfiguracao:
                raise  # CONTEXTIA_ORIGEM ausente, coluna de texto: 2
            except ErroOrigem as erro:
                print(
                    '%s: a origem não respondeu (%s): nada mudou.' % (PROG, erro), file=sys.stderr
                )
                return SAIDA_FALHA
            print('\n'.join(mudanca.anuncio()))
            if mudanca.sentido == 'igual':
                return SAIDA_OK
            recusa = confirmar(args.sim)
            if recusa is not None:
                return recusa
            estado_a_mao.aplicar_marca(estado, mudanca)
            print(
                'feito: a marca de água de %s agora é %s (%s).'
                % (mudanca.dataset, mudanca.depois, estado.caminho)
            )
            return SAIDA_OK
    finally:
        # Fechar nunca mascara o erro (nem o codigo de saida) de quem veio antes.
        with contextlib.suppress(Exception):
            origem.fechar()


def _esquecer_carga(args: argparse.Namespace) -> int:
    from contextia_sync.ouvinte import estado_a_mao

    with estado_a_mao.com_trava(args.estado) as estado:
        escopo, anuncio = estado_a_mao.anuncio_esquecer_carga(estado, args.empresa)
        print(anuncio)
        recusa = confirmar(args.sim)
        if recusa is not None:
            return recusa
        estado_a_mao.esquecer_carga(estado, escopo)
        print(
            'feito: a empresa %s não tem mais carga inicial pendente (%s).'
            % (escopo, estado.caminho)
        )
        return SAIDA_OK


def main(argv: list[str] | None = None) -> int:
    args = argumentos(argv)
    comando = {'mostrar': _mostrar, 'marcar': _marcar, 'esquecer-carga': _esquecer_carga}
    try:
        return comando[args.comando](args)
    except ErroConfiguracao as erro:
        # A trava (ouvinte rodando), o mapeamento, o valor, o estado ilegivel: a
        # mensagem ja diz o que e e como corrigir.
        return recusar(PROG, erro)


if __name__ == '__main__':
    sys.exit(main())
