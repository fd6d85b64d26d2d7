#!/usr/bin/env python3
"""
OUVINTE -- o dado chega ao Contextia em segundos, nao na madrugada seguinte.

    python3 ouvinte.py --mapping=mappings/<cliente>.json --source=generic \\
        --chaves=/opt/contextia/chaves.tsv --estado=/opt/contextia/estado

Um processo que fica de pe e faz sozinho tudo o que o cron da recarga fazia,
mais acompanhar a origem de perto:

    ciclo de DADOS       a cada 60s     o que mudou desde a ultima leitura
    ciclo de PROJETOS    a cada 300s    empresa nova ganha projeto, chave e carga
    VARREDURA            1x por dia     a carga completa -- a UNICA que remove

"Ao vivo" aqui e uma SONDA CURTA numa coluna de mudanca
(`SELECT COUNT(*) FROM <view> WHERE <coluna> > <marca>`), com a credencial de
leitura que ja usamos, em qualquer um dos quatro bancos, sem pedir nada ao DBA.
Latencia: o intervalo do ciclo. Exclusao na origem NAO e vista: sai do
Contextia so na varredura. Detalhes e razoes: docs/ouvinte.md; as regras da
marca de agua: contextia_sync/marca_agua.py.

Arquivos em --estado: ouvinte-estado.json (marcas), ouvinte-status.txt (o que
um alerta le), ouvinte.lock (um ouvinte por implantacao).
"""

import argparse
import datetime
import os
import signal
import sys
import time

# Dorme-se em fatias para o SIGTERM nao esperar o intervalo inteiro.
FATIA_SONO = 1.0
# Teto de linhas por ciclo: acima disso nao e movimento, e operacao em massa
# (juros, fechamento de mes, correcao em lote), que costuma vir com exclusao --
# que o incremental nao ve. Vai para a varredura.
MAXIMO_POR_CICLO = 20000

SAIDA_OK, SAIDA_FALHA, SAIDA_CONFIGURACAO = 0, 1, 2


class ParadaFria(BaseException):
    """Segundo SIGTERM/SIGINT: sai ja, sem terminar o passo atual."""


class _Parada:
    """
    O primeiro SIGTERM/SIGINT/SIGHUP levanta a bandeira: o passo atual termina (ou a
    ferramenta em curso tem o grupo encerrado) e o ouvinte sai limpo, com o
    desfecho no log. O segundo e parada fria.
    """

    def __init__(self):
        self.pedida = False

    def __call__(self, numero, _quadro):
        from contextia_sync import ferramenta
        from contextia_sync.registro import logger
        nome = signal.Signals(numero).name
        if not self.pedida:
            self.pedida = True
            logger.warning('%s: parada pedida; terminando o passo atual antes de sair'
                           ' (outro %s = parada fria)', nome, nome)
            return
        pid = ferramenta.matar_em_curso()
        logger.error('%s de novo: PARADA FRIA. Passo atual abandonado%s; o que nao'
                     ' foi confirmado nao avancou a marca e sera relido na proxima'
                     ' subida.', nome,
                     ' (grupo da ferramenta %s morto com SIGKILL)' % pid if pid else '')
        raise ParadaFria()


def _argumentos(argv):
    from contextia_sync.estrategias import ESTRATEGIAS
    p = argparse.ArgumentParser(
        description='Ouvinte: leva ao Contextia o que mudou na origem, em segundos.'
                    ' Guia do operador: docs/ouvinte.md')
    p.add_argument('--mapping', required=True, help='mappings/<cliente>.json')
    p.add_argument('--source', required=True, help='modulo em sources/ (sem .py)')
    p.add_argument('--chaves', required=True,
                   help='o arquivo de chaves do provisionador (uma por empresa)')
    p.add_argument('--estado', required=True,
                   help='diretorio das marcas de agua, do status e da trava')
    p.add_argument('--intervalo-dados', type=int, default=60, metavar='S',
                   help='segundos entre leituras do que mudou (padrao 60)')
    p.add_argument('--intervalo-projetos', type=int, default=300, metavar='S',
                   help='segundos entre buscas por empresa nova (padrao 300)')
    p.add_argument('--varredura', default='03:30', metavar='HH:MM',
                   help='hora da carga completa diaria, a UNICA que remove'
                        ' (padrao 03:30; "nao" desliga)')
    p.add_argument('--janela-varredura', type=int, default=180, metavar='MIN',
                   help='por quantos minutos depois da hora a varredura ainda pode'
                        ' disparar (padrao 180); fora dela espera o dia seguinte')
    p.add_argument('--estrategia', default=None, metavar='NOME',
                   help='como detectar o que mudou: %s. Padrao: `listener.strategy`'
                        ' do mapeamento, ou `coluna`' % ', '.join(sorted(ESTRATEGIAS)))
    p.add_argument('--folga', type=int, default=180, metavar='S',
                   help='quanto a leitura recua atras da marca de agua, para pegar'
                        ' transacao que comitou atrasada (padrao 180)')
    p.add_argument('--maximo-por-ciclo', type=int, default=MAXIMO_POR_CICLO, metavar='N',
                   help='acima disso o dataset e entregue a varredura (padrao %d)'
                        % MAXIMO_POR_CICLO)
    p.add_argument('--grupo', action='append', default=[], metavar='SLUG',
                   help='grupo de empresas para o projeto de empresa nova; repita')
    p.add_argument('--timeout-ferramenta', type=int, default=7200, metavar='S',
                   help='tempo maximo de uma ferramenta (carga completa), padrao 7200')
    p.add_argument('--inatividade-ferramenta', type=int, default=1800, metavar='S',
                   help='encerra a ferramenta que ficar S segundos sem escrever'
                        ' nenhuma linha (padrao 1800; 0 desliga)')
    p.add_argument('--log', default=None, help='arquivo de log rotativo (alem da tela)')
    p.add_argument('--varrer-agora', action='store_true',
                   help='roda a varredura completa nesta subida, sem esperar a hora')
    p.add_argument('--once', action='store_true',
                   help='um ciclo de cada e sai (codigo 1 se algum falhou)')
    p.add_argument('--dry-run', action='store_true',
                   help='le tudo e nao envia, nao cria e nao grava marca de agua')
    p.add_argument('--autoteste', action='store_true',
                   help='prova a logica pura sem banco e sem rede')
    return p.parse_args(argv)


def _preparar(args, parada):
    """Resolve configuracao na ordem certa e monta o Contexto. Levanta erros de configuracao."""
    from contextia_sync import agenda, ciclos, contextia_client, estado
    from contextia_sync.ao_vivo import datasets_ao_vivo
    from contextia_sync.chaves import ler_chaves
    from contextia_sync.estrategias import exigir_estrategia, resolver_estrategia
    from contextia_sync.mapeamento import carregar_mapeamento
    from contextia_sync.origem import carregar_origem
    from contextia_sync import regra_projeto
    from contextia_sync.registro import logger

    # A ESTRATEGIA vem antes de tudo: e a decisao tomada com o DBA, e
    # `--estrategia=binlog` e a pergunta "o que isso exigiria?" -- a resposta
    # nao pode depender de URL, chaves ou mapeamento valido.
    if args.estrategia:
        exigir_estrategia(args.estrategia)
    mapa = carregar_mapeamento(args.mapping)
    nome_estrategia, de_onde = resolver_estrategia(args.estrategia, mapa)
    info = exigir_estrategia(nome_estrategia)

    varredura = agenda.ler_hora(args.varredura)
    if not contextia_client.url_destino():
        raise ValueError(
            'Falta CONTEXTIA_URL (a instalacao do Contextia DESTE cliente).\n'
            'Nao ha padrao embutido: um valor default mandaria o dado para a'
            ' instalacao de outro cliente, sem erro nenhum. Defina-a no ambiente do'
            ' servico (ex.: no EnvironmentFile da unidade systemd).')
    if not os.path.exists(args.chaves):
        raise ValueError(
            'Arquivo de chaves nao existe: %s\n'
            'O ouvinte precisa de uma chave por empresa. Rode o provisionar.py antes'
            ' -- ou aponte --chaves para o arquivo que ele gerou.' % args.chaves)
    quantas_chaves = len(ler_chaves(args.chaves))

    os.makedirs(args.estado, exist_ok=True)
    trava = estado.travar(args.estado)
    est = estado.Estado(os.path.join(args.estado, estado.ARQUIVO_ESTADO))
    vivos, fora = datasets_ao_vivo(mapa)
    regra = regra_projeto.resolver(mapa)
    origem = carregar_origem(args.source)

    ctx = ciclos.Contexto(
        mapa=mapa, vivos=vivos, fora=fora, regra=regra, origem=origem, estado=est,
        estado_dir=args.estado, mapping=args.mapping, source=args.source,
        chaves=args.chaves, folga=args.folga, maximo=args.maximo_por_ciclo,
        grupos=args.grupo, seco=args.dry_run, varredura=varredura,
        janela=args.janela_varredura, timeout=args.timeout_ferramenta or None,
        inatividade=args.inatividade_ferramenta or None,
        parar=lambda: parada.pedida, estrategia=nome_estrategia)
    ctx.trava = trava

    logger.info('===== ouvinte (pid %s) =====', os.getpid())
    logger.info('cliente ..........: %s', mapa.get('client') or '(sem nome)')
    logger.info('destino ..........: %s', contextia_client.url_destino())
    logger.info('chaves ...........: %s (%s empresa(s))', args.chaves, quantas_chaves)
    logger.info('estrategia .......: %s (%s) -- %s', nome_estrategia, de_onde,
                info['o_que_e'])
    if not info['ve_delete']:
        logger.warning('esta estrategia NAO ve exclusao: linha apagada na origem so sai'
                       ' do Contextia na varredura. O cliente precisa saber disso.')
    logger.info('dados ............: a cada %ss, folga de %ss, teto de %s linhas',
                args.intervalo_dados, args.folga, args.maximo_por_ciclo)
    logger.info('projetos .........: a cada %ss', args.intervalo_projetos)
    logger.info('varredura ........: %s', agenda.descrever(varredura, args.janela_varredura))
    logger.info('ferramentas ......: tempo maximo %ss, inatividade maxima %s',
                args.timeout_ferramenta,
                '%ss' % args.inatividade_ferramenta if args.inatividade_ferramenta
                else 'desligada')
    if varredura and not est.varredura_feita_em() and not args.varrer_agora:
        logger.warning('nenhuma varredura registrada ainda. O ouvinte NAO faz carga'
                       ' completa fora da janela (cairia no horario comercial). Para'
                       ' a carga inicial agora, suba com --varrer-agora.')
    if args.dry_run:
        logger.warning('MODO SECO: nada e enviado, nada e criado, a marca de agua nao'
                       ' avanca e o estado nao e gravado')
    logger.info('datasets ao vivo .: %s de %s', len(vivos), len(mapa.get('datasets') or []))
    for nome, motivo in fora:
        logger.info('   fora do ao-vivo: %-28s %s (so muda na varredura)', nome, motivo)
    logger.info('regra de projeto:\n%s', regra_projeto.descrever(regra))
    if not vivos:
        logger.warning('NENHUM dataset tem coluna de mudanca: o ouvinte so fara'
                       ' varredura, o que o cron ja fazia. Declare `watch_column` no'
                       ' mapeamento para o ao-vivo valer a pena.')
    return ctx


def _linhas_status(ctx, args, ciclos_vistos):
    """O conteudo do ouvinte-status.txt: saude geral, ferramenta agora, e cada dataset."""
    from contextia_sync import contextia_client
    agora = datetime.datetime.now()
    linhas = [
        'ouvinte ...........: %s' % ('SECO (nao envia)' if ctx.seco else 'ativo'),
        'pid ...............: %s' % os.getpid(),
        'atualizado em .....: %s' % agora.strftime('%Y-%m-%d %H:%M:%S'),
        'cliente ...........: %s' % (ctx.mapa.get('client') or '-'),
        'destino ...........: %s' % contextia_client.url_destino(),
        'estrategia ........: %s' % ctx.estrategia,
        'datasets ao vivo ..: %s de %s' % (len(ctx.vivos), len(ctx.mapa.get('datasets') or [])),
        'falhas seguidas ...: %s' % ctx.falhas,
        'ultima varredura ..: %s' % (ctx.estado.varredura_feita_em() or 'nenhuma'),
    ]
    tabela, alerta = _tabela_datasets(ctx)
    if alerta:
        linhas.append('ATENCAO FOLGA .....: chegadas atrasadas passaram da metade da'
                      ' --folga em %s -- aumente --folga ou fale com o DBA'
                      % ', '.join(alerta))
    f = ctx.ferramenta_agora
    if f:
        linhas.append('ferramenta agora ..: %s (pid %s, desde %s, ha %ss)' % (
            f['rotulo'], f['pid'], f['desde'].strftime('%Y-%m-%d %H:%M:%S'),
            int((agora - f['desde']).total_seconds())))
    else:
        linhas.append('ferramenta agora ..: nenhuma')
    linhas.extend(ciclos_vistos.values())
    cargas = ctx.estado.cargas_pendentes()
    if cargas:
        linhas.append('cargas iniciais pendentes: %s (refeitas no proximo ciclo de projetos)'
                      % ', '.join(cargas))
    pendentes = ctx.estado.pendentes()
    if pendentes:
        linhas.append('entregues a varredura: %s' % ', '.join(
            '%s (%s)' % (n, t) for n, t in sorted(pendentes.items())))
    linhas.append('')
    linhas.extend(tabela)
    return linhas


def _tabela_datasets(ctx):
    """Uma linha por dataset: qual esta parado se ve sem ler o log."""
    from contextia_sync import marca_agua
    from contextia_sync.contextia_client import normalizar_dataset
    formato = '%-28s %-26s %-20s %8s %9s %9s  %s'
    linhas = [formato % ('dataset', 'marca de agua', 'ultima mudanca vista', 'enviados',
                         'atrasadas', 'maior(s)', 'ultimo erro')]
    alerta = []
    for row in ctx.vivos:
        nome = normalizar_dataset(row['dataset'])
        a = ctx.estado.acompanhamento(nome)
        marca = ctx.estado.marca(nome)
        maior = a.get('maior_atraso_s')
        if marca_agua.atraso_preocupante(maior, marca, ctx.folga):
            alerta.append(nome)
        linhas.append(formato % (
            nome, marca if marca is not None else '(ainda nao)',
            a.get('ultima_mudanca_vista') or '-', a.get('enviados_ultimo_ciclo', '-'),
            a.get('atrasadas_total', 0), '-' if maior is None else int(maior),
            a.get('ultimo_erro') or ''))
    for nome, motivo in ctx.fora:
        linhas.append('%-28s fora do ao-vivo: %s' % (normalizar_dataset(nome), motivo))
    return linhas, alerta


def _laco(ctx, args, parada):
    from contextia_sync import agenda, ciclos, estado
    from contextia_sync.registro import logger

    resumo = {}

    def pulsar():
        erro = estado.escrever_status(ctx.estado_dir, _linhas_status(ctx, args, resumo))
        if erro:
            logger.warning('nao foi possivel gravar o status (%s)', erro)

    ctx.pulsar = pulsar
    proximo_dados = proximo_projetos = 0.0
    saida = SAIDA_OK
    conectado = False
    while True:
        agora = time.monotonic()
        try:
            if not conectado:
                ctx.origem.conectar()
                conectado = True
            # Retrato novo a cada rodada: sem isto Oracle e MySQL devolveriam
            # para sempre o banco do instante em que o ouvinte subiu.
            ctx.origem.renovar()
            if not parada.pedida and (agora >= proximo_projetos or args.once):
                r = ciclos.ciclo_projetos(ctx)
                proximo_projetos = time.monotonic() + args.intervalo_projetos
                resumo['projetos'] = ('projetos ..........: %s criados=%s carregados=%s'
                                      ' erros=%s' % (_hora(), r['criados'],
                                                     r['carregados'], r['erros']))
                saida = saida or (SAIDA_FALHA if r['erros'] else SAIDA_OK)
            if not parada.pedida and (agora >= proximo_dados or args.once):
                r = ciclos.ciclo_dados(ctx)
                proximo_dados = time.monotonic() + args.intervalo_dados
                resumo['dados'] = ('dados .............: %s datasets=%s registros=%s'
                                   ' erros=%s atrasadas=%s' % (
                                       _hora(), r['datasets'], r['registros'], r['erros'],
                                       r['atrasadas']))
                saida = saida or (SAIDA_FALHA if r['erros'] else SAIDA_OK)
            if not parada.pedida and (args.varrer_agora or ciclos.e_hora_de_varrer(ctx)):
                # Uma vez por subida: sem isto varreria a cada ciclo.
                args.varrer_agora = False
                r = ciclos.ciclo_varredura(ctx)
                resumo['varredura'] = 'varredura .........: %s erros=%s' % (
                    _hora(), r['erros'])
                saida = saida or (SAIDA_FALHA if r['erros'] else SAIDA_OK)
            ctx.falhas = 0
            resumo.pop('falha', None)
        except Exception as erro:             # noqa: BLE001
            # O ouvinte NAO morre por falha de ciclo: origem fora do ar, tunel
            # caido, Contextia em manutencao -- tudo passa, e um servico que
            # morre no primeiro soluco so volta quando alguem percebe.
            ctx.falhas += 1
            logger.exception('ciclo falhou (%sa vez seguida): %s: %s', ctx.falhas,
                             type(erro).__name__, erro)
            resumo['falha'] = 'ULTIMA FALHA ......: %s %s: %s' % (
                _hora(), type(erro).__name__, str(erro)[:200])
            # Conexao possivelmente morta: reabre no proximo ciclo em vez de
            # insistir num handle quebrado.
            try:
                ctx.origem.fechar()
            except Exception:                 # noqa: BLE001
                pass
            conectado = False
            saida = SAIDA_FALHA
        pulsar()
        if args.once or parada.pedida:
            break
        espera = agenda.espera_apos_falhas(args.intervalo_dados, ctx.falhas)
        if ctx.falhas:
            logger.warning('esperando %ss antes de tentar de novo (dobra a cada falha,'
                           ' teto de %ss)', espera, agenda.TETO_ESPERA)
        fim = time.monotonic() + espera
        while time.monotonic() < fim and not parada.pedida:
            time.sleep(min(FATIA_SONO, max(0.0, fim - time.monotonic())))
        if parada.pedida:
            break
    return saida if args.once else SAIDA_OK


def _hora():
    return datetime.datetime.now().strftime('%H:%M:%S')


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    # O autoteste nao usa mapeamento, chaves nem estado: atendido antes do
    # argparse, que exigiria inventar valores para eles.
    if '--autoteste' in argv:
        from contextia_sync.autoteste import rodar
        return rodar()
    args = _argumentos(argv)

    from contextia_sync.registro import arquivo_de_log, logger
    if args.log:
        arquivo_de_log(args.log)

    parada = _Parada()
    # SIGHUP tambem: fechar o terminal de um ouvinte rodado a mao o mataria na
    # hora, deixando a ferramenta em curso orfa, rodando sem dono.
    for numero in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(numero, parada)

    from contextia_sync.agenda import ErroVarredura
    from contextia_sync.ao_vivo import ErroAoVivo
    from contextia_sync.chaves import ErroChaves
    from contextia_sync.estado import ErroEstado, ErroTrava
    from contextia_sync.estrategias import ErroEstrategia
    from contextia_sync.mapeamento import ErroMapeamento
    from contextia_sync.origem import ErroAdaptador
    try:
        ctx = _preparar(args, parada)
    except (ErroEstrategia, ErroVarredura, ErroAoVivo, ErroChaves, ErroEstado, ErroTrava,
            ErroMapeamento, ErroAdaptador, ValueError) as erro:
        # Erro de configuracao: a mensagem ja diz o que e, por que e como
        # corrigir. Sem traceback: quem le e o operador, nao o programador.
        print(str(erro), file=sys.stderr)
        return SAIDA_CONFIGURACAO
    except ParadaFria:
        return SAIDA_FALHA

    try:
        return _laco(ctx, args, parada)
    except ParadaFria:
        return SAIDA_FALHA
    finally:
        try:
            ctx.origem.fechar()
        except Exception:                     # noqa: BLE001
            pass
        if ctx.trava is not None:
            ctx.trava.close()
        logger.info('ouvinte encerrado')


if __name__ == '__main__':
    sys.exit(main())
