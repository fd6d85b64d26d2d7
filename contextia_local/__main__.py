"""python3 -m contextia_local -- sobe o servidor Contextia local."""

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from contextia_local.configuracao import Configuracao


def _argumentos(argv: Sequence[str] | None) -> argparse.Namespace:
    """Os argumentos do servidor; o `--help` os lista na ordem de `_GRUPOS`."""
    # O parser de toda CLI do SDK: em portugues, com --version e os codigos de saida.
    from contextia_sync.linha_de_comando import novo_parser

    p = novo_parser(
        'python3 -m contextia_local',
        'Servidor Contextia local: o contrato do intake (docs/contrato-intake.md)'
        ' sobre SQLite, para testes, demo e ensaio antes da produção.',
        saidas={
            0: 'parado (Ctrl-C, SIGTERM) ou --openapi impresso',
            1: 'o servidor não subiu (porta ocupada?) ou caiu',
        },
    )
    for grupo in _GRUPOS:
        grupo(p)
    args = p.parse_args(argv)
    _conferir_processos(p, args)
    _dados_e_token(p, args)
    return args


def _servidor(p: argparse.ArgumentParser) -> None:
    """Onde escuta e onde guarda os dados."""
    p.add_argument('--porta', type=int, default=8765, help='porta TCP (padrão 8765)')
    p.add_argument(
        '--host',
        default='127.0.0.1',
        help='endereço de escuta (padrão 127.0.0.1; só mude sabendo que a API fica exposta a rede)',
    )
    p.add_argument(
        '--dados', help='pasta do banco SQLite (criada se faltar); os dados sobrevivem a reinício'
    )


def _admin(p: argparse.ArgumentParser) -> None:
    """De onde vem o token das rotas de admin (nunca da linha de comando)."""
    p.add_argument(
        '--admin-token-arquivo',
        metavar='ARQUIVO',
        help='arquivo com o token das rotas de admin (só o dono pode ler: chmod'
        ' 600). Sem ele, o token vem de CONTEXTIA_ADMIN_TOKEN. Nunca na'
        ' linha de comando: ela aparece no ps para todo usuário da máquina',
    )
    # A opcao antiga so existe para recusar com a correcao (e para que argparse
    # nao a tome por abreviacao de --admin-token-arquivo).
    p.add_argument('--admin-token', action=_RecusarTokenNaLinha, nargs='?', help=argparse.SUPPRESS)


def _ensaio(p: argparse.ArgumentParser) -> None:
    """O que o teste e o ensaio mudam no contrato: falhas, limites do lote, `remove`."""
    from contextia_local.configuracao import MAX_REGISTROS_LOTE

    p.add_argument(
        '--falhas',
        action='store_true',
        help='liga a injeção de falhas (rotas /api/v1/admin/falhas). Só para teste',
    )
    p.add_argument(
        '--max-registros-lote',
        type=_positivo,
        default=None,
        help='lote com mais registros que isto recebe 413 (padrão %d, o maior'
        ' chunk que o mapeamento aceita)' % MAX_REGISTROS_LOTE,
    )
    p.add_argument(
        '--max-bytes-lote',
        type=_positivo,
        default=None,
        help='lote com mais bytes que isto recebe 413 (padrão 32 MiB)',
    )
    p.add_argument(
        '--sem-remove',
        action='store_true',
        help='imita o Contextia de hoje: sem `remove` no envelope (capacidades'
        ' anuncia remove=false e o campo recebe 422)',
    )


def _processos(p: argparse.ArgumentParser) -> None:
    """Quantos processos servem a porta."""
    p.add_argument(
        '--processos',
        type=_positivo,
        default=PROCESSOS_PADRAO,
        metavar='N',
        help='processos que servem a porta (padrão %d). Num ensaio de carga,'
        ' 2 ou o número de núcleos: a gravação no SQLite é de um por vez,'
        ' o resto (ler o JSON, o HTTP) corre em paralelo. Não combina com'
        ' --falhas' % PROCESSOS_PADRAO,
    )


def _sem_servir(p: argparse.ArgumentParser) -> None:
    """O que não é servir: imprimir o OpenAPI, e morrer com o processo que nos subiu."""
    p.add_argument(
        '--openapi',
        action='store_true',
        help='imprime o documento OpenAPI e sai (e o docs/openapi.json)',
    )
    p.add_argument('--vigiar-pai', type=int, default=None, metavar='PID', help=argparse.SUPPRESS)


_GRUPOS: tuple[Callable[[argparse.ArgumentParser], None], ...] = (
    _servidor,
    _admin,
    _ensaio,
    _processos,
    _sem_servir,
)
"""Os grupos de opções, na ordem em que o `--help` os lista."""


def _conferir_processos(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Mais de um processo: sem injeção de falhas, e só onde o distribuidor roda."""
    if args.processos > 1:
        from contextia_local.distribuidor import suportado

        if args.falhas:
            p.error(
                '--falhas guarda as falhas injetadas na memória de um processo: com'
                ' --processos %d o pedido que injeta e o lote que devia falhar cairiam'
                ' em processos diferentes. Use --processos 1 (o padrão) para injetar'
                ' falhas.' % args.processos
            )
        problema = suportado()
        if problema:
            p.error('--processos %d: %s' % (args.processos, problema))


def _dados_e_token(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Servindo (não --openapi): a pasta dos dados e o token de admin, lido agora."""
    args.admin_token = None
    if not args.openapi:
        if not args.dados:
            p.error(
                '--dados é obrigatório: e onde o servidor guarda os dados'
                ' (ex.: --dados /tmp/contextia-local).'
            )
        try:
            args.admin_token = _token_de_admin(args.admin_token_arquivo)
        except ValueError as erro:
            p.error(str(erro))


class _RecusarTokenNaLinha(argparse.Action):
    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,  # noqa: ARG002
        values: object,  # noqa: ARG002
        option_string: str | None = None,  # noqa: ARG002
    ) -> None:  # noqa: ARG002
        # Nunca repete o valor: ele e o segredo que nao devia estar ali.
        parser.error(
            '--admin-token não existe mais: o token na linha de comando aparece'
            ' no ps (e em /proc/<pid>/cmdline) para todo usuário da máquina.'
            ' Passe-o em CONTEXTIA_ADMIN_TOKEN ou num arquivo só seu'
            ' (chmod 600) com --admin-token-arquivo ARQUIVO.'
        )


PROCESSOS_PADRAO = 1
"""Um processo: a injeção de falhas (o uso de todo teste) vive na memória dele."""

BACKLOG = 2048
"""A fila de conexões da porta com --processos (o padrão do uvicorn)."""


def _positivo(texto: str) -> int:
    valor = int(texto)
    if valor < 1:
        raise argparse.ArgumentTypeError('tem de ser um inteiro maior que zero')
    return valor


def _token_de_admin(arquivo: str | None) -> str:
    """O token de admin, do arquivo ou de CONTEXTIA_ADMIN_TOKEN; ValueError diz o que falta."""
    do_ambiente = os.environ.get('CONTEXTIA_ADMIN_TOKEN') or None
    if arquivo is None:
        if not do_ambiente:
            raise ValueError(
                'falta o token de admin: defina CONTEXTIA_ADMIN_TOKEN ou use'
                ' --admin-token-arquivo ARQUIVO. Sem ele as rotas de admin'
                ' ficariam abertas.'
            )
        return do_ambiente
    try:
        with open(arquivo, encoding='utf-8') as f:
            modo = os.fstat(f.fileno()).st_mode
            token = f.read().strip()
    except (OSError, UnicodeDecodeError) as erro:
        raise ValueError(
            '--admin-token-arquivo %s: não consegui ler (%s).'
            % (arquivo, getattr(erro, 'strerror', None) or erro)
        ) from None
    if modo & 0o077:
        raise ValueError(
            '--admin-token-arquivo %s: o arquivo é legível por outros usuários'
            ' (modo %o). Restrinja-o ao dono: chmod 600 %s.' % (arquivo, modo & 0o777, arquivo)
        )
    if not token or any(c.isspace() for c in token):
        raise ValueError(
            '--admin-token-arquivo %s: o arquivo tem de ter o token numa linha'
            ' só, sem espaços (está vazio ou tem mais de uma palavra).' % arquivo
        )
    if do_ambiente and do_ambiente != token:
        raise ValueError(
            '--admin-token-arquivo %s e CONTEXTIA_ADMIN_TOKEN dizem tokens'
            ' diferentes: deixe um só, para não haver dúvida de qual vale.' % arquivo
        )
    return token


def _vigiar_pai(pid: int) -> None:
    # Se o processo que nos subiu (pytest, demo) morrer sem parar o servidor,
    # saimos sozinhos: servidor orfao segura porta e pasta de outros testes.
    while True:
        time.sleep(1)
        try:
            os.kill(pid, 0)
        except OSError:
            os._exit(0)


def main(argv: Sequence[str] | None = None) -> int:
    args = _argumentos(argv)
    from contextia_local.app import criar_app, openapi_json
    from contextia_local.configuracao import MAX_BYTES_LOTE, MAX_REGISTROS_LOTE, Configuracao

    if args.openapi:
        sys.stdout.write(openapi_json())
        return 0
    config = Configuracao(
        dados=args.dados,
        admin_token=args.admin_token,
        falhas=args.falhas,
        max_registros_lote=args.max_registros_lote or MAX_REGISTROS_LOTE,
        max_bytes_lote=args.max_bytes_lote or MAX_BYTES_LOTE,
        remove=not args.sem_remove,
    )
    anuncio = 'Contextia local em http://%s:%d  dados=%s  falhas=%s' % (
        args.host,
        args.porta,
        os.path.abspath(args.dados),
        'LIGADAS' if args.falhas else 'desligadas',
    )
    if args.processos > 1:
        return _em_varios_processos(args, config, anuncio)
    import uvicorn

    if args.vigiar_pai:
        threading.Thread(target=_vigiar_pai, args=(args.vigiar_pai,), daemon=True).start()
    app = criar_app(config)
    print(anuncio, flush=True)
    uvicorn.run(app, host=args.host, port=args.porta, log_level='warning', access_log=False)
    return 0


def _em_varios_processos(args: argparse.Namespace, config: 'Configuracao', anuncio: str) -> int:
    """`--processos N`: a porta aberta aqui, servida por N filhos (distribuidor.py)."""
    import socket

    import uvicorn

    from contextia_local import distribuidor
    from contextia_local.app import criar_app
    from contextia_local.armazenamento import Banco

    try:
        familia = socket.getaddrinfo(
            args.host, args.porta, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0][0]
        porta = socket.create_server((args.host, args.porta), family=familia, backlog=BACKLOG)
    except OSError as erro:
        print(
            'Contextia local: não consegui abrir %s:%d (%s). A porta está ocupada por'
            ' outro processo? Escolha outra com --porta.' % (args.host, args.porta, erro),
            file=sys.stderr,
            flush=True,
        )
        return 1
    # O esquema criado uma vez, antes dos filhos (que abririam o banco novo juntos).
    Banco(args.dados).fechar()

    def servir_filho(canal: socket.socket) -> None:
        # loop='asyncio', nunca o uvloop (que o 'auto' pegaria se instalado): a
        # conexão entregue chega pelo `accept` Python do canal (distribuidor.py),
        # que o uvloop não chama -- ele aceita direto no descritor (medido: com o
        # uvloop instalado e o 'auto', nenhum pedido era atendido).
        servidor = uvicorn.Server(
            uvicorn.Config(
                criar_app(config),
                log_level='warning',
                access_log=False,
                backlog=BACKLOG,
                loop='asyncio',
            )
        )
        servidor.run(sockets=[canal])

    print('%s  processos=%d' % (anuncio, args.processos), flush=True)
    vigiar = (lambda: _vigiar_pai(args.vigiar_pai)) if args.vigiar_pai else None
    return distribuidor.servir(porta, args.processos, servir_filho, vigiar)


if __name__ == '__main__':
    sys.exit(main())
