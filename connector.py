#!/usr/bin/env python3
"""
CONECTOR -- a carga completa de uma empresa, da origem ao Contextia.

    CONTEXTIA_API_KEY=<chave da empresa> python3 connector.py \\
        --mapping=mappings/<cliente>.json --source=generic --scope=297

A chave vem SO do ambiente: na linha de comando ela apareceria no `ps` de
qualquer usuario da maquina. O carregar-todas.sh e o ouvinte ja a passam assim.

Cada dataset e lido da origem (so as linhas da empresa; tabela de dominio
inteira) e enviado sob um ciclo de carga proprio. O `complete` -- que remove do
Contextia o que a origem nao tem mais -- so e enviado se todos os lotes daquele
dataset chegaram, e leva o teto de remocao: view que de repente volta vazia nao
esvazia o dataset. Detalhes em docs/carga-e-provisionamento.md.

Progresso: num terminal, uma barra por dataset (fica na tela). Sem terminal
(ouvinte, cron, carregar-todas.sh), uma linha "<dataset> escopo=S: N registros
lidos ate agora" a cada CONTEXTIA_PROGRESSO_SEGUNDOS (padrao 30) durante a
leitura -- o ouvinte encerra ferramenta calada por --inatividade-ferramenta.

Codigos de saida:
    0  todos os datasets carregados
    1  algum dataset falhou (origem, rede, lote recusado, teto de remocao);
       os outros foram carregados e o que falhou ficou como estava
    2  erro de configuracao (mapeamento, chave ausente/recusada/de outra
       empresa, escopo excluido, --dataset desconhecido); nada foi enviado
"""

import argparse
import os
import sys
import time

from contextia_sync.mapeamento import (  # noqa: F401 - reexportados para o ouvinte
    ErroMapeamento,
    carregar_mapeamento,
    coluna_de_recorte,
    semantica,
)

OK, FALHA, CONFIGURACAO = 0, 1, 2


def _fracao(texto):
    try:
        valor = float(texto.rstrip('%')) / (100.0 if texto.endswith('%') else 1.0)
    except ValueError:
        valor = -1
    if not 0 <= valor <= 1:
        raise argparse.ArgumentTypeError(
            '%r nao e uma fracao de 0 a 1 (ex.: 0.5, 50%%, ou 1 para permitir remover'
            ' tudo)' % texto)
    return valor


def _intervalo_progresso(padrao):
    """CONTEXTIA_PROGRESSO_SEGUNDOS (segundos entre linhas de progresso), ou `padrao`."""
    bruto = (os.environ.get('CONTEXTIA_PROGRESSO_SEGUNDOS') or '').strip()
    if not bruto:
        return padrao
    try:
        valor = float(bruto)
    except ValueError:
        valor = -1.0
    if not valor > 0:
        raise ValueError('CONTEXTIA_PROGRESSO_SEGUNDOS=%r nao e numero positivo de segundos.'
                         ' Tire a variavel (padrao %g) ou use, por exemplo, 30.'
                         % (bruto, padrao))
    return valor


def argumentos(argv=None):
    from contextia_sync.carga import MAX_REMOCAO_PADRAO

    p = argparse.ArgumentParser(
        description='Carga completa de UMA empresa no Contextia (a chave vem de'
                    ' CONTEXTIA_API_KEY, nunca da linha de comando).',
        epilog='Saida: 0 ok; 1 algum dataset falhou (nada removido nele); 2 erro de'
               ' configuracao (nada enviado).')
    p.add_argument('--mapping', required=True, help='mappings/<cliente>.json')
    p.add_argument('--source', default='generic',
                   help='adaptador em sources/ sem .py (padrao generic)')
    p.add_argument('--scope', required=True, metavar='ESCOPO',
                   help='a empresa (o valor da scope_column, ex.: 297)')
    p.add_argument('--dataset', action='append', default=[], metavar='NOME',
                   help='so este dataset (nome do mapeamento ou normalizado); repita para'
                        ' mais de um. Padrao: todos')
    p.add_argument('--dry-run', action='store_true',
                   help='le e conta da origem; nao envia nada e nao precisa de chave')
    p.add_argument('--max-remocao', type=_fracao, default=MAX_REMOCAO_PADRAO, metavar='F',
                   help='fracao maxima de um dataset que a carga pode remover (padrao %s).'
                        ' Acima disso o Contextia recusa o complete e nada sai. Para uma'
                        ' limpeza real em massa: --max-remocao=1' % MAX_REMOCAO_PADRAO)
    p.add_argument('--historico', default=os.environ.get('CONTEXTIA_HISTORICO') or None,
                   metavar='ARQ',
                   help='historico de cargas aceitas (padrao: CONTEXTIA_HISTORICO; o'
                        ' carregar-todas.sh usa <chaves>.historico.json). No dataset sem key'
                        ' o teto compara com a carga anterior dele; sem historico, vale a'
                        ' fracao do dataset')
    return p.parse_args(argv)


def main(argv=None):
    args = argumentos(argv)

    from contextia_sync import carga, contextia_client as cliente
    from contextia_sync.escopos import texto_escopo
    from contextia_sync.mapeamento import escopos_excluidos
    from contextia_sync.origem import ErroAdaptador, carregar_origem

    def recusar(mensagem):
        print('connector: %s' % mensagem, file=sys.stderr)
        return CONFIGURACAO

    try:
        mapa = carregar_mapeamento(args.mapping)
    except ErroMapeamento as erro:
        return recusar(str(erro))

    escopo = texto_escopo(args.scope)
    if not escopo:
        return recusar('--scope vazio: diga qual empresa carregar.')
    if escopo in escopos_excluidos(mapa):
        return recusar(
            'a empresa %s esta em source.excluded_scopes do mapeamento: ela nao recebe'
            ' carga. Tire a linha dela do arquivo de chaves (e revogue a chave), ou tire-a'
            ' de excluded_scopes se a exclusao era engano.' % escopo)
    try:
        datasets = carga.selecionar_datasets(mapa, args.dataset)
    except carga.ErroSelecao as erro:
        return recusar(str(erro))
    try:
        intervalo = _intervalo_progresso(carga.INTERVALO_PROGRESSO)
    except ValueError as erro:
        return recusar(str(erro))

    chave = None
    projeto = '-'
    if not args.dry_run:
        if not cliente.url_destino():
            return recusar('falta CONTEXTIA_URL (a instalacao do Contextia DESTE cliente).'
                           ' Nao ha padrao: um padrao mandaria os dados para outro cliente.')
        chave = (os.environ.get('CONTEXTIA_API_KEY') or '').strip()
        if not chave:
            return recusar(
                'falta CONTEXTIA_API_KEY, a chave do projeto da empresa %s. Ela vem do'
                ' arquivo de chaves do provisionar.py e vai SO no ambiente (na linha de'
                ' comando apareceria no ps).' % escopo)
        # A chave e DESTA empresa? Chave trocada mandaria os titulos da 297 para o
        # projeto da 301 -- vazamento entre empresas, sem erro nenhum do servidor.
        try:
            dono = cliente.quem_sou(chave, escopo=escopo)
        except cliente.ErroAutenticacao as erro:
            return recusar(str(erro))
        except cliente.ErroContextia as erro:
            print('connector: Contextia indisponivel: %s' % erro, file=sys.stderr)
            return FALHA
        externo = texto_escopo(dono.get('external_id'))
        if externo and externo != escopo:
            return recusar(
                'a chave em CONTEXTIA_API_KEY e do projeto %r (empresa %s), nao da empresa'
                ' %s. Confira a linha da empresa %s no arquivo de chaves.'
                % (dono.get('name'), externo, escopo, escopo))
        projeto = '%s (id %s)' % (dono.get('name'), dono.get('project_id'))

    try:
        origem = carregar_origem(args.source)
    except ErroAdaptador as erro:
        return recusar(str(erro))

    print('===== carga completa: empresa %s =====' % escopo)
    print('cliente ........: %s' % (mapa.get('client') or '-'))
    print('destino ........: %s' % ('(seco: nada enviado)' if args.dry_run
                                     else cliente.url_destino()))
    print('projeto ........: %s' % projeto)
    print('datasets .......: %d%s' % (len(datasets),
                                      ' (de %d)' % len(mapa['datasets']) if args.dataset else ''))
    historico = None
    if not args.dry_run:
        print('teto de remocao : %g%% de cada dataset%s' % (
            100 * args.max_remocao,
            ' (remocao em massa PERMITIDA)' if args.max_remocao >= 1 else ''))
        if args.historico:
            from contextia_sync.historico import Historico
            historico = Historico(args.historico)
        print('historico ......: %s' % (
            args.historico or 'nenhum (sem key: teto sobre o dataset inteiro)'))
    sys.stdout.flush()

    inicio = time.monotonic()
    resultados = []
    saida = OK
    barra = sys.stderr.isatty()

    def progresso(texto):
        print(texto, flush=True)
    try:
        origem.conectar()
    except Exception as erro:                   # noqa: BLE001 - o adaptador diz a causa
        print('connector: nao foi possivel conectar na origem (%s: %s). Nada foi enviado.'
              % (type(erro).__name__, erro), file=sys.stderr)
        return FALHA
    try:
        for row in datasets:
            try:
                resultado = carga.carregar_dataset(
                    mapa, row, origem, escopo, api_key=chave, seco=args.dry_run,
                    max_remocao=args.max_remocao, barra=barra, progresso=progresso,
                    intervalo_progresso=intervalo, historico=historico,
                    execucao=os.environ.get('CONTEXTIA_EXECUCAO') or None)
            except cliente.ErroAutenticacao as erro:
                # A chave caiu no meio (revogada?): nenhum dataset seguinte passaria.
                print('connector: %s' % erro, file=sys.stderr)
                saida = CONFIGURACAO
                break
            resultados.append(resultado)
            print(carga.linha_de_resultado(resultado, seco=args.dry_run))
            sys.stdout.flush()
    finally:
        try:
            origem.fechar()
        except Exception:                       # noqa: BLE001 - fechar nunca mascara o erro
            pass

    print(carga.resumo(escopo, resultados, time.monotonic() - inicio, seco=args.dry_run))
    if saida == OK and any(not r['ok'] for r in resultados):
        saida = FALHA
    return saida


if __name__ == '__main__':
    sys.exit(main())
