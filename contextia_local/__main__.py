"""python3 -m contextia_local -- sobe o servidor Contextia local."""

import argparse
import os
import sys
import threading
import time
from collections.abc import Sequence


def _argumentos(argv: Sequence[str] | None) -> argparse.Namespace:
    # O parser de toda CLI do SDK: em portugues, com --version e os codigos de saida.
    from contextia_sync.cli.comum import novo_parser
    p = novo_parser(
        'python3 -m contextia_local',
        'Servidor Contextia local: o contrato do intake (docs/contrato-intake.md)'
        ' sobre SQLite, para testes, demo e ensaio antes da producao.',
        saidas={0: 'parado (Ctrl-C, SIGTERM) ou --openapi impresso',
                1: 'o servidor não subiu (porta ocupada?) ou caiu'})
    p.add_argument('--porta', type=int, default=8765, help='porta TCP (padrao 8765)')
    p.add_argument('--host', default='127.0.0.1',
                   help='endereco de escuta (padrao 127.0.0.1; so mude sabendo que a API'
                        ' fica exposta a rede)')
    p.add_argument('--dados', help='pasta do banco SQLite (criada se faltar); os dados'
                                   ' sobrevivem a reinicio')
    p.add_argument('--admin-token', default=os.environ.get('CONTEXTIA_ADMIN_TOKEN'),
                   help='token das rotas de admin (padrao: CONTEXTIA_ADMIN_TOKEN)')
    p.add_argument('--falhas', action='store_true',
                   help='liga a injecao de falhas (rotas /api/v1/admin/falhas). So para teste')
    p.add_argument('--max-registros-lote', type=int, default=None,
                   help='lote com mais registros que isto recebe 413 (padrao: sem limite)')
    p.add_argument('--max-bytes-lote', type=int, default=None,
                   help='lote com mais bytes que isto recebe 413 (padrao 32 MiB)')
    p.add_argument('--sem-remove', action='store_true',
                   help='imita o Contextia de hoje: sem `remove` no envelope (capacidades'
                        ' anuncia remove=false e o campo recebe 422)')
    p.add_argument('--openapi', action='store_true',
                   help='imprime o documento OpenAPI e sai (e o docs/openapi.json)')
    p.add_argument('--vigiar-pai', type=int, default=None, metavar='PID',
                   help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not args.openapi:
        if not args.dados:
            p.error('--dados e obrigatorio: e onde o servidor guarda os dados'
                    ' (ex.: --dados /tmp/contextia-local).')
        if not args.admin_token:
            p.error('--admin-token (ou CONTEXTIA_ADMIN_TOKEN) e obrigatorio: sem ele as rotas'
                    ' de admin ficariam abertas.')
    return args


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
    from contextia_local.app import MAX_BYTES_LOTE, Configuracao, criar_app, openapi_json
    if args.openapi:
        sys.stdout.write(openapi_json())
        return 0
    import uvicorn
    if args.vigiar_pai:
        threading.Thread(target=_vigiar_pai, args=(args.vigiar_pai,), daemon=True).start()
    config = Configuracao(dados=args.dados, admin_token=args.admin_token,
                          falhas=args.falhas, max_registros_lote=args.max_registros_lote,
                          max_bytes_lote=args.max_bytes_lote or MAX_BYTES_LOTE,
                          remove=not args.sem_remove)
    app = criar_app(config)
    print('Contextia local em http://%s:%d  dados=%s  falhas=%s' % (
        args.host, args.porta, os.path.abspath(args.dados),
        'LIGADAS' if args.falhas else 'desligadas'), flush=True)
    uvicorn.run(app, host=args.host, port=args.porta, log_level='warning',
                access_log=False)
    return 0


if __name__ == '__main__':
    sys.exit(main())
