#!/usr/bin/env python3
"""
PROVISIONAR -- um projeto no Contextia para cada empresa nova do ERP.

    CONTEXTIA_URL=... CONTEXTIA_ADMIN_TOKEN=... python3 provisionar.py \\
        --mapping=mappings/<cliente>.json --source=generic --arquivo=/opt/contextia/chaves.tsv

Le o cadastro de empresas (secao `projects` do mapeamento), e para cada empresa
que a regra aceita, que nao esta excluida e que o arquivo de chaves ainda nao
tem: cria o projeto (idempotente), emite a chave, GRAVA A CHAVE NO ARQUIVO antes
de qualquer outra coisa, e so entao poe nos grupos (--grupo e/ou group_column)
e registra o webhook (secao `webhook`; segredo pela variavel que ela nomeia).

Rodar de novo e sempre seguro: e assim que se conserta uma execucao
interrompida, e a saida diz o que foi reparado. Ver
docs/carga-e-provisionamento.md.

Codigos de saida:
    0  nada a fazer, ou tudo feito
    1  alguma empresa falhou (as outras foram feitas) ou a origem nao respondeu
    2  erro de configuracao (mapeamento, arquivo de chaves com permissao aberta ou
       linha corrompida, token de admin ausente/recusado, segredo do webhook
       ausente); nada foi mudado
"""

import argparse
import os
import sys

from contextia_sync.chaves import ler_chaves  # noqa: F401 - reexportado para o ouvinte

OK, FALHA, CONFIGURACAO = 0, 1, 2


def argumentos(argv=None):
    p = argparse.ArgumentParser(
        description='Cria projeto, chave, grupos e webhook para cada empresa nova.',
        epilog='Saida: 0 ok; 1 alguma empresa falhou; 2 erro de configuracao.'
               ' Rodar de novo conserta uma execucao interrompida.')
    p.add_argument('--mapping', required=True, help='mappings/<cliente>.json')
    p.add_argument('--source', default='generic',
                   help='adaptador em sources/ sem .py (padrao generic)')
    p.add_argument('--arquivo', required=True, metavar='CHAVES',
                   help='arquivo de chaves (TSV, modo 600); criado se nao existe')
    p.add_argument('--somente-escopo', metavar='ESCOPO',
                   help='so esta empresa (o ouvinte chama assim para cada empresa nova)')
    p.add_argument('--grupo', action='append', default=[], metavar='SLUG',
                   help='grupo para os projetos novos; repita para mais de um (soma-se ao'
                        ' group_column do cadastro)')
    p.add_argument('--dry-run', action='store_true',
                   help='mostra o plano; nao cria, nao emite, nao grava nada')
    return p.parse_args(argv)


def main(argv=None):
    args = argumentos(argv)

    from contextia_sync import chaves as arquivo_chaves
    from contextia_sync import contextia_client as cliente
    from contextia_sync import provisionamento, regra_projeto
    from contextia_sync.escopos import texto_escopo
    from contextia_sync.mapeamento import ErroMapeamento, carregar_mapeamento
    from contextia_sync.origem import ErroAdaptador, carregar_origem

    def recusar(mensagem):
        print('provisionar: %s' % mensagem, file=sys.stderr)
        return CONFIGURACAO

    try:
        mapa = carregar_mapeamento(args.mapping)
        regra = regra_projeto.resolver(mapa)
    except (ErroMapeamento, ValueError) as erro:
        return recusar(str(erro))
    grupos = []
    for grupo in args.grupo:
        slug = regra_projeto.slug(grupo)
        if slug != grupo:
            return recusar('--grupo=%r nao e slug (minusculas, digitos, - e _); use %r.'
                           % (grupo, slug))
        grupos.append(slug)
    somente = texto_escopo(args.somente_escopo) if args.somente_escopo is not None else None
    pasta = os.path.dirname(os.path.abspath(args.arquivo))
    if not os.path.isdir(pasta):
        return recusar('a pasta do arquivo de chaves nao existe: %s -- crie-a (mkdir -m 700).'
                       % pasta)

    try:
        origem = carregar_origem(args.source)
    except ErroAdaptador as erro:
        return recusar(str(erro))

    trava = None
    try:
        if not args.dry_run:
            # A trava vem antes da leitura: o que se le tem de ser o que se regrava.
            trava = arquivo_chaves.travado(args.arquivo)
            trava.__enter__()
        registros = arquivo_chaves.ler_registros(args.arquivo)

        try:
            origem.conectar()
            linhas = list(origem.fetch(regra['source_object'], regra['columns']))
        except Exception as erro:               # noqa: BLE001
            print('provisionar: nao foi possivel ler o cadastro %s na origem (%s: %s).'
                  ' Nada foi mudado.' % (regra['source_object'], type(erro).__name__, erro),
                  file=sys.stderr)
            return FALHA
        finally:
            try:
                origem.fechar()
            except Exception:                   # noqa: BLE001
                pass

        plano = provisionamento.planejar(mapa, linhas, registros, somente, grupos)

        print('===== provisionamento%s =====' % (' (SECO: nada e mudado)' if args.dry_run else ''))
        print('cliente .........: %s' % (mapa.get('client') or '-'))
        print('destino .........: %s' % (cliente.url_destino() or '(CONTEXTIA_URL nao definida)'))
        print('arquivo de chaves: %s (%d empresa(s))' % (args.arquivo, len(registros)))
        print('regra de projeto :')
        print(regra_projeto.descrever(regra))
        print('cadastro ........: %d linha(s) lida(s) de %s' % (len(linhas),
                                                              regra['source_object']))
        for linha in provisionamento.descrever_plano(plano):
            print(linha)

        if args.dry_run:
            print('resumo: SECO -- %d seriam criadas, %d pendentes seriam concluidas'
                  % (len(plano['novas']), len(plano['pendentes'])))
            return FALHA if plano['nao_encontrada'] else OK

        if not plano['novas'] and not plano['pendentes']:
            print('resumo: nada a fazer')
            return FALHA if plano['nao_encontrada'] else OK

        if not cliente.url_base():
            return recusar('falta CONTEXTIA_URL (a instalacao do Contextia DESTE cliente).')
        try:
            admin = cliente.Admin()
            executor = provisionamento.Provisionador(mapa, admin, args.arquivo, registros)
        except (cliente.ErroAutenticacao, provisionamento.ErroConfiguracao) as erro:
            return recusar(str(erro))

        criadas, reparadas, falhas = 0, 0, []
        trabalho = [('nova', e) for e in plano['novas']] + \
                   [('pendente', e) for e in plano['pendentes']]
        for tipo, (escopo, nome, grupos_empresa) in trabalho:
            try:
                if tipo == 'nova':
                    reparo = executor.criar(escopo, nome, grupos_empresa)
                    criadas += 0 if reparo else 1
                else:
                    executor.concluir(registros[escopo], grupos_empresa)
                    reparo = True
                reparadas += 1 if reparo else 0
            except cliente.ErroAutenticacao as erro:
                return recusar(str(erro))
            except (cliente.ErroContextia, provisionamento.ErroConfiguracao) as erro:
                falhas.append(escopo)
                print('  %s: FALHOU -- %s (rode de novo para concluir)' % (escopo, erro))
            except arquivo_chaves.ErroChaves:
                raise
            except OSError as erro:
                # Nao conseguiu gravar o arquivo: a chave recem-emitida ficou sem
                # dono. A proxima execucao a revoga e emite outra -- mas pare aqui,
                # senao cada empresa seguinte teria o mesmo destino.
                print('  %s: FALHOU ao gravar %s (%s). A chave emitida agora nao foi'
                      ' gravada; a proxima execucao a revoga e emite outra. Corrija o'
                      ' disco/permissao da pasta e rode de novo.' % (escopo, args.arquivo, erro))
                falhas.append(escopo)
                break
        print('resumo: %d criada(s), %d reparada(s), %d com falha%s' % (
            criadas, reparadas, len(falhas), ' (%s)' % ', '.join(falhas) if falhas else ''))
        return FALHA if falhas or plano['nao_encontrada'] else OK
    except arquivo_chaves.ErroChaves as erro:
        return recusar(str(erro))
    finally:
        if trava is not None:
            trava.__exit__(None, None, None)


if __name__ == '__main__':
    sys.exit(main())
