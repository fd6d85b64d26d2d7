"""
A linha de comando do provisionador (`provisionar.py`, `contextia-provisionar`).

A documentação do operador está no `provisionar.py` da raiz; o que fazer em
cada passo, em `contextia_sync/provisionamento/`. Aqui: argumentos, o que se
imprime e o código de saída.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Mapping, MutableMapping
from typing import TYPE_CHECKING

from contextia_sync.origem import AdaptadorDeOrigem
from contextia_sync import padroes
from contextia_sync.linha_de_comando import novo_parser, recusar
from contextia_sync.erros import SAIDA_FALHA, SAIDA_OK, ErroConfiguracao

if TYPE_CHECKING:
    from contextia_sync.provisionamento.chaves import Registro
    from contextia_sync.provisionamento.plano import Plano
    from contextia_sync.provisionamento.regra_projeto import RegraProjeto
    from contextia_sync.tipos import Mapa, ValorDoBanco

PROG = 'provisionar'


def argumentos(argv: list[str] | None = None) -> argparse.Namespace:
    """Os argumentos de `provisionar` (`argv` None: os da linha de comando)."""
    p = novo_parser(
        PROG,
        'Cria projeto, chave, grupos e webhook para cada empresa nova.',
        epilog='Rodar de novo conserta uma execução interrompida.',
        saidas={
            SAIDA_FALHA: 'alguma empresa falhou (rode de novo para concluir) ou o'
            ' cadastro não pôde ser lido'
        },
    )
    p.add_argument('--mapping', required=True, help='mappings/<cliente>.json')
    p.add_argument(
        '--source',
        default=padroes.SOURCE,
        help='adaptador em sources/ sem .py (padrão %s)' % padroes.SOURCE,
    )
    p.add_argument(
        '--chaves',
        '--arquivo',
        dest='chaves',
        required=True,
        metavar='ARQ',
        help='o arquivo de chaves (TSV, modo 600); criado se não existe.'
        ' --arquivo é o nome antigo, aceito igual',
    )
    p.add_argument(
        '--somente-escopo',
        metavar='ESCOPO',
        help='só esta empresa (o ouvinte chama assim para cada empresa nova)',
    )
    p.add_argument(
        '--grupo',
        action='append',
        default=[],
        metavar='SLUG',
        help='grupo para os projetos novos; repita para mais de um (soma-se ao'
        ' group_column do cadastro)',
    )
    p.add_argument(
        '--dry-run', action='store_true', help='mostra o plano; não cria, não emite, não grava nada'
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Provisiona o que o plano pede; devolve o código de saída (0, 1 ou 2)."""
    args = argumentos(argv)

    from contextia_sync.intake.cliente import ErroAutenticacao

    try:
        return _provisionar(args)
    except ErroConfiguracao as erro:
        # Mapeamento, regra, arquivo de chaves, adaptador, CONTEXTIA_ORIGEM,
        # segredo do webhook: a mensagem ja diz a correcao.
        return recusar(PROG, erro)
    except ErroAutenticacao as erro:
        # Token de admin ausente ou recusado: tambem se corrige antes de rodar.
        return recusar(PROG, str(erro))


def _provisionar(args: argparse.Namespace) -> int:
    """As etapas: conferir os pedidos, ler o cadastro, mostrar o plano, executá-lo."""
    from contextia_sync.intake.cliente import conferir_destino
    from contextia_sync.mapeamento import carregar_mapeamento
    from contextia_sync.origem import carregar_origem
    from contextia_sync.provisionamento import chaves as arquivo_chaves
    from contextia_sync.provisionamento import plano as provisionamento
    from contextia_sync.provisionamento import regra_projeto

    mapa = carregar_mapeamento(args.mapping)
    regra = regra_projeto.resolver(mapa)
    if not args.dry_run:
        # Endereco inseguro e recusado antes de ler a origem e de qualquer conexao (2).
        conferir_destino()
    grupos = _grupos_pedidos(args.grupo)
    somente = _somente_escopo(args.somente_escopo)
    _exigir_pasta_das_chaves(args.chaves)

    origem = carregar_origem(args.source)

    with contextlib.ExitStack() as pilha:
        if not args.dry_run:
            # A trava vem antes da leitura: o que se le tem de ser o que se regrava.
            pilha.enter_context(arquivo_chaves.travado(args.chaves))
        registros = arquivo_chaves.ler_registros(args.chaves)
        linhas = _ler_cadastro(origem, regra)
        if linhas is None:
            return SAIDA_FALHA
        plano = provisionamento.planejar(mapa, linhas, registros, somente, grupos)
        _mostrar(args, mapa, regra, registros, linhas, plano)

        if args.dry_run:
            print(
                'resumo: SECO -- %d seriam criadas, %d pendentes seriam concluidas'
                % (len(plano.novas), len(plano.pendentes))
            )
            return SAIDA_FALHA if plano.nao_encontrada else SAIDA_OK
        if not plano.novas and not plano.pendentes:
            print('resumo: nada a fazer')
            return SAIDA_FALHA if plano.nao_encontrada else SAIDA_OK
        falhas = _executar(args, mapa, registros, plano)
        return SAIDA_FALHA if falhas or plano.nao_encontrada else SAIDA_OK


def _grupos_pedidos(pedidos: list[str]) -> list[str]:
    """Os `--grupo`, cada um conferido: um slug, escrito como slug."""
    from contextia_sync.provisionamento import regra_projeto
    from contextia_sync.provisionamento.plano import ErroProvisionamento

    grupos: list[str] = []
    for grupo in pedidos:
        slug = regra_projeto.slug(grupo)
        if slug is None:
            raise ErroProvisionamento(
                '--grupo=%r não tem letra nem dígito: um grupo é um slug'
                ' (minúsculas, dígitos, - e _), como rede-sul.' % grupo
            )
        if slug != grupo:
            raise ErroProvisionamento(
                '--grupo=%r não é slug (minúsculas, dígitos, - e _); use %r.' % (grupo, slug)
            )
        grupos.append(slug)
    return grupos


def _somente_escopo(pedido: str | None) -> str | None:
    """O `--somente-escopo` como código de empresa (None: todas as novas)."""
    from contextia_sync.escopos import exigir_escopo, texto_escopo
    from contextia_sync.provisionamento.plano import ErroProvisionamento

    if pedido is None:
        return None
    somente = texto_escopo(pedido)
    # Vazio nao e "todas": `--somente-escopo=` com a variavel do script vazia
    # provisionaria o cadastro inteiro.
    if not somente:
        raise ErroProvisionamento(
            '--somente-escopo vazio: diga qual empresa provisionar'
            ' (ou tire a opção para provisionar todas as novas).'
            ' Nada foi feito.'
        )
    exigir_escopo(somente, '--somente-escopo')
    return somente


def _exigir_pasta_das_chaves(chaves: str) -> None:
    from contextia_sync.provisionamento.plano import ErroProvisionamento

    pasta = os.path.dirname(os.path.abspath(chaves))
    if not os.path.isdir(pasta):
        raise ErroProvisionamento(
            'a pasta do arquivo de chaves não existe: %s -- crie-a (mkdir -m 700).' % pasta
        )


def _ler_cadastro(
    origem: AdaptadorDeOrigem, regra: RegraProjeto
) -> list[Mapping[str, ValorDoBanco]] | None:
    """O cadastro de empresas lido da origem; None (e a causa impressa) se ela falhou."""
    try:
        origem.conectar()
        return list(origem.fetch(regra.source_object, regra.columns))
    except ErroConfiguracao:
        raise  # CONTEXTIA_ORIGEM ausente ou invalida: 2
    except Exception as erro:  # noqa: BLE001 - o adaptador diz a causa
        print(
            'provisionar: não foi possível ler o cadastro %s na origem (%s: %s).'
            ' Nada foi mudado.' % (regra.source_object, type(erro).__name__, erro),
            file=sys.stderr,
        )
        return None
    finally:
        try:
            origem.fechar()
        except Exception:  # noqa: BLE001 - fechar nunca mascara o erro
            pass


def _mostrar(
    args: argparse.Namespace,
    mapa: Mapa,
    regra: RegraProjeto,
    registros: Mapping[str, Registro],
    linhas: list[Mapping[str, ValorDoBanco]],
    plano: Plano,
) -> None:
    """O cabeçalho e o plano, antes de fazer qualquer coisa (ou no lugar dela, no seco)."""
    from contextia_sync.intake.cliente import url_destino
    from contextia_sync.provisionamento import plano as provisionamento
    from contextia_sync.provisionamento import regra_projeto

    print('===== provisionamento%s =====' % (' (SECO: nada e mudado)' if args.dry_run else ''))
    print('cliente .........: %s' % (mapa.get('client') or '-'))
    print('destino .........: %s' % (url_destino() or '(CONTEXTIA_URL não definida)'))
    print('arquivo de chaves: %s (%d empresa(s))' % (args.chaves, len(registros)))
    print('regra de projeto :')
    print(regra_projeto.descrever(regra))
    print('cadastro ........: %d linha(s) lida(s) de %s' % (len(linhas), regra.source_object))
    for linha in provisionamento.descrever_plano(plano, regra):
        print(linha)


def _executar(
    args: argparse.Namespace, mapa: Mapa, registros: MutableMapping[str, Registro], plano: Plano
) -> list[str]:
    """Cria as novas e conclui as pendentes; imprime o resumo e devolve as que falharam."""
    from contextia_sync.intake.admin import Admin
    from contextia_sync.intake.cliente import ErroAutenticacao, url_base
    from contextia_sync.intake.transporte import ErroContextia
    from contextia_sync.provisionamento import chaves as arquivo_chaves
    from contextia_sync.provisionamento import plano as provisionamento
    from contextia_sync.provisionamento.plano import ErroProvisionamento

    if not url_base():
        raise ErroProvisionamento('falta CONTEXTIA_URL (a instalação do Contextia DESTE cliente).')
    admin = Admin()
    executor = provisionamento.Provisionador(mapa, admin, args.chaves, registros)

    criadas, reparadas, falhas = 0, 0, []
    trabalho = [('nova', e) for e in plano.novas] + [('pendente', e) for e in plano.pendentes]
    for tipo, (escopo, nome, grupos_empresa) in trabalho:
        try:
            if tipo == 'nova':
                reparo = executor.criar(escopo, nome, grupos_empresa)
                criadas += 0 if reparo else 1
            else:
                executor.concluir(registros[escopo], grupos_empresa)
                reparo = True
            reparadas += 1 if reparo else 0
        except (ErroAutenticacao, arquivo_chaves.ErroChaves):
            raise  # token recusado, arquivo de chaves: 2
        except (ErroContextia, ErroProvisionamento) as erro:
            falhas.append(escopo)
            print('  %s: FALHOU -- %s (rode de novo para concluir)' % (escopo, erro))
        except OSError as erro:
            # Nao conseguiu gravar o arquivo: a chave recem-emitida ficou sem
            # dono. A proxima execucao a revoga e emite outra -- mas pare aqui,
            # senao cada empresa seguinte teria o mesmo destino.
            print(
                '  %s: FALHOU ao gravar %s (%s). A chave emitida agora não foi'
                ' gravada; a próxima execução a revoga e emite outra. Corrija o'
                ' disco/permissao da pasta e rode de novo.' % (escopo, args.chaves, erro)
            )
            falhas.append(escopo)
            break
    print(
        'resumo: %d criada(s), %d reparada(s), %d com falha%s'
        % (criadas, reparadas, len(falhas), ' (%s)' % ', '.join(falhas) if falhas else '')
    )
    return falhas


if __name__ == '__main__':
    sys.exit(main())
