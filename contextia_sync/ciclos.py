"""
Os tres ciclos do ouvinte: dados (o que mudou), projetos (empresa nova) e
varredura (a carga completa diaria, a unica que remove).

O ciclo de dados e o que este SDK acrescenta; os outros dois chamam as mesmas
ferramentas que o cron chamava (provisionar.py, connector.py,
carregar-todas.sh). Toda a parte perigosa -- criar chave, fechar carga --
continua morando onde ja estava testada.
"""

import datetime
import os
import sys
import uuid

from contextia_sync import ferramenta, historico, marca_agua
from contextia_sync.agenda import hora_de_varrer
from contextia_sync.ao_vivo import agrupar_por_escopo
from contextia_sync.escopos import texto_escopo
from contextia_sync.registro import logger

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _agora_texto():
    return datetime.datetime.now().strftime('%Y-%m-%d %H:%M:%S')


class Contexto:
    """Tudo o que um ciclo precisa; montado uma vez pelo ouvinte.py."""

    def __init__(self, **campos):
        self.mapa = None
        self.vivos = []
        self.fora = []
        self.regra = None
        self.origem = None
        self.estado = None
        self.estado_dir = None
        self.mapping = None
        self.source = 'generic'
        self.chaves = None
        self.folga = 180
        self.maximo = 20000
        self.grupos = []
        self.seco = False
        self.varredura = None
        self.janela = 180
        self.timeout = 7200
        self.inatividade = 1800
        self.python = sys.executable or 'python3'
        self.raiz = RAIZ
        self.falhas = 0
        self.parar = lambda: False
        self.pulsar = lambda: None
        self.ferramenta_agora = None
        self.grandes = []
        # Escopos sem chave ja avisados nesta subida: o aviso e uma vez por
        # empresa, nao a cada ciclo (60 s) enquanto ela existir.
        self.avisados_sem_chave = set()
        self.__dict__.update(campos)

    def rodar_ferramenta(self, argv, rotulo, env=None):
        """Roda uma ferramenta mostrando no status o que, desde quando e o pid."""
        def ao_iniciar(pid):
            self.ferramenta_agora = {'rotulo': rotulo, 'pid': pid,
                                     'desde': datetime.datetime.now()}
            self.pulsar()
        try:
            return ferramenta.rodar(
                argv, rotulo, cwd=self.raiz, env=env, timeout=self.timeout,
                inatividade=self.inatividade, deve_parar=self.parar,
                ao_iniciar=ao_iniciar, pulso=self.pulsar)
        finally:
            self.ferramenta_agora = None
            self.pulsar()

    @property
    def caminho_historico(self):
        """Onde os conectores gravam (e a varredura le) as cargas aceitas."""
        return historico.caminho_padrao(self.chaves)

    def argv_provisionar(self, escopo=None):
        argv = [self.python, 'provisionar.py', '--mapping=' + self.mapping,
                '--source=' + self.source, '--arquivo=' + self.chaves]
        if escopo is not None:
            argv.append('--somente-escopo=' + escopo)
        argv += ['--grupo=' + grupo for grupo in self.grupos]
        if self.seco:
            argv.append('--dry-run')
        return argv


# ---------------------------------------------------------------------------
# Ciclo 1 -- dados
# ---------------------------------------------------------------------------

def ciclo_dados(ctx):
    """O que mudou desde a ultima leitura, empresa por empresa. Nada e removido."""
    from contextia_sync.chaves import ler_chaves
    from contextia_sync.contextia_client import normalizar_dataset

    chaves = ler_chaves(ctx.chaves)
    resumo = {'datasets': 0, 'registros': 0, 'erros': 0, 'grandes': [],
              'atrasadas': 0}
    ctx.grandes = []
    if not chaves:
        logger.warning('ciclo de dados: nenhuma chave em %s -- nada a atualizar',
                       ctx.chaves)
        return resumo

    tentados, falhas, ultima = 0, 0, None
    for row in ctx.vivos:
        if ctx.parar():
            break
        nome = normalizar_dataset(row['dataset'])
        acomp = ctx.estado.acompanhamento(nome)
        tentados += 1
        try:
            _dados_de_um(ctx, row, nome, chaves, acomp, resumo)
        except Exception as erro:             # noqa: BLE001
            # Uma view quebrada nao para as outras 26: o erro fica no dataset
            # (o status mostra QUAL esta parado) e o ciclo segue.
            falhas, ultima = falhas + 1, erro
            resumo['erros'] += 1
            acomp['ultimo_erro'] = '%s %s: %s' % (_agora_texto(), type(erro).__name__,
                                                 str(erro)[:200])
            logger.error('%-28s leitura falhou: %s: %s', nome, type(erro).__name__, erro)

    ctx.grandes = list(resumo['grandes'])
    if not ctx.seco:
        ctx.estado.gravar()
    if tentados and falhas == tentados:
        # TODOS falharam: e a origem (ou a rede), nao um dataset. O laco faz
        # backoff e reabre a conexao.
        raise ultima
    return resumo


def _dados_de_um(ctx, row, nome, chaves, acomp, resumo):
    from contextia_sync import mapeamento

    origem = ctx.origem
    watch = row['_watch']
    fonte = row['source_object']
    marca = ctx.estado.marca(nome)

    # PRIMEIRA VEZ: so fixa o ponto de partida, nao despeja a tabela. A carga
    # completa e do conector (ja rodou, ou roda na varredura); reenviar a base
    # toda pela porta incremental, sem `complete`, pareceria um servico louco.
    if marca is None and not acomp.get('vazia_no_inicio'):
        inicial = origem.maximo(fonte, watch)
        if inicial is None:
            # Tabela vazia: a proxima leitura traz TUDO. Sem isto a marca
            # ficaria None, cada ciclo repetiria "primeira vez" e as primeiras
            # linhas da tabela so chegariam na varredura.
            acomp['vazia_no_inicio'] = True
            logger.info('%-28s vazia agora: o proximo ciclo envia tudo o que aparecer',
                        nome)
        else:
            ctx.estado.definir_marca(nome, inicial)
            logger.info('%-28s marca inicial = %s (nada enviado; a carga completa e'
                        ' da varredura)', nome, marca_agua.texto_marca(inicial))
        # Sem saber o que ja foi lido na janela, a contagem de atrasadas comeca
        # no ciclo seguinte, depois de uma leitura da janela inteira.
        ctx.estado.definir_vistos(nome, None)
        acomp['enviados_ultimo_ciclo'] = 0
        return

    desde = marca_agua.recuar(marca, ctx.folga) if marca is not None else None
    filtro = (watch, desde) if desde is not None else None

    quantos = origem.contar(fonte, since=filtro)
    acomp['ultima_sonda'] = _agora_texto()
    if quantos == 0:
        acomp['enviados_ultimo_ciclo'] = 0
        # Nada acima da marca: nenhum envio pendente, o erro antigo ja passou.
        acomp.pop('ultimo_erro', None)
        return

    if quantos > ctx.maximo:
        # Operacao em massa (juros, fechamento, correcao em lote): a varredura e
        # a ferramenta certa -- fecha a carga, remove o que sumiu, e nao passa
        # isso pela memoria de um processo que precisa ficar de pe.
        logger.warning('%-28s %s linhas mudaram (teto %s): entregue a VARREDURA,'
                       ' nao ao incremental', nome, quantos, ctx.maximo)
        resumo['grandes'].append('%s (%s linhas)' % (nome, quantos))
        ctx.estado.pendentes()[nome] = '%s linhas em %s' % (quantos, _agora_texto())
        acomp['enviados_ultimo_ciclo'] = 0
        return

    # Lista, e nao gerador: repartir por empresa e avancar a marca percorrem as
    # mesmas linhas, e o teto acima limita o tamanho.
    linhas = list(origem.fetch(fonte, row['columns'], since=filtro))
    chave = mapeamento.chave_de(ctx.mapa, row)
    _contar_atrasadas(ctx, nome, linhas, watch, chave, marca, acomp, resumo)

    grupos, novos = agrupar_por_escopo(linhas, ctx.mapa, row, chaves)
    _avisar_sem_chave(ctx, nome, novos)
    if chave is None:
        # Sem `key` o servidor deduplica por hash do conteudo: a linha ALTERADA
        # entra como registro novo e a antiga fica ate a varredura. Aviso, nao
        # recusa: o incremental ainda vale para as inclusoes.
        logger.warning('%-28s sem `key`: alteracao vira registro NOVO (dedup por'
                       ' hash). Ate a varredura, o antigo fica.', nome)

    ok, enviados, erro = _enviar(ctx, row, nome, grupos, chaves, chave, resumo)
    acomp['enviados_ultimo_ciclo'] = enviados

    # A MARCA SO AVANCA SE TUDO DEU CERTO: falha de envio mantem a marca velha
    # e o proximo ciclo rele. Avancar sobre um envio que falhou perderia
    # aquelas linhas ate a varredura.
    if ok and not ctx.seco:
        # Sobre as linhas LIDAS, nao as ENVIADAS: as de empresa sem chave ficam
        # para tras de proposito (senao o dataset releria o mesmo intervalo para
        # sempre). Nada se perde porque o ciclo de projetos faz CARGA COMPLETA
        # da empresa nova. Mexeu numa regra, reveja a outra.
        nova = marca_agua.avancar(linhas, watch, marca)
        ctx.estado.definir_marca(nome, nova)
        acomp.pop('vazia_no_inicio', None)
        acomp.pop('ultimo_erro', None)
        ctx.estado.pendentes().pop(nome, None)
    elif not ok:
        acomp['ultimo_erro'] = '%s %s' % (_agora_texto(), erro)
        logger.warning('%-28s envio com erro: marca de agua NAO avancou (o proximo'
                       ' ciclo rele)', nome)

    _podar_vistos(ctx, nome)
    resumo['datasets'] += 1
    resumo['registros'] += enviados


def _avisar_sem_chave(ctx, nome, escopos):
    """
    Dado de empresa sem chave: nada e enviado para ela, e o operador precisa saber.

    Escopo em `excluded_scopes` fica de fora por decisao do mapeamento e nao e
    avisado. Os outros podem ser empresa nova (o ciclo de projetos provisiona e
    faz a carga completa) ou empresa que a regra recusa (ex.: inativa): o aviso
    diz as duas coisas, porque daqui nao se sabe qual -- quem sabe e o ciclo de
    projetos, que lista os recusados pela regra.
    """
    excluidos = {texto_escopo(e) for e in
                 ((ctx.mapa.get('source') or {}).get('excluded_scopes') or [])}
    novos = [e for e in escopos
             if e not in excluidos and (nome, e) not in ctx.avisados_sem_chave]
    if not novos:
        return
    ctx.avisados_sem_chave.update((nome, e) for e in novos)
    logger.warning('%-28s dado de escopo sem chave: %s -- empresa nova e provisionada'
                   ' pelo ciclo de projetos; se a regra de projeto a recusa, esses'
                   ' dados ficam fora do Contextia', nome, ', '.join(novos[:6]))


def _podar_vistos(ctx, nome):
    """Poda pela marca FINAL do ciclo: a que vale para a proxima leitura."""
    vistos, marca = ctx.estado.vistos(nome), ctx.estado.marca(nome)
    if vistos is None or marca is None:
        return
    vistos = marca_agua.podar_vistos(vistos, marca, ctx.folga)
    if len(vistos) > marca_agua.MAXIMO_VISTOS:
        logger.warning('%-28s mais de %s linhas na janela da folga: contagem de'
                       ' chegadas atrasadas suspensa neste ciclo', nome,
                       marca_agua.MAXIMO_VISTOS)
        vistos = None
    ctx.estado.definir_vistos(nome, vistos)


def _contar_atrasadas(ctx, nome, linhas, watch, chave, marca, acomp, resumo):
    """Chegadas atrasadas: so vistas por causa da folga. Ver marca_agua.py."""
    vistos = ctx.estado.vistos(nome)
    quantas, maior, novas = marca_agua.contar_atrasadas(linhas, watch, chave, marca,
                                                         vistos)
    if novas:
        acomp['ultima_mudanca_vista'] = _agora_texto()
    # Lembradas mesmo se o envio falhar: a contagem e sobre o que foi LIDO, e
    # a releitura do proximo ciclo nao pode contar a mesma linha de novo.
    juntos = dict(vistos or {})
    juntos.update(novas)
    ctx.estado.definir_vistos(nome, juntos)
    if not quantas:
        return
    resumo['atrasadas'] += quantas
    acomp['atrasadas_total'] = acomp.get('atrasadas_total', 0) + quantas
    acomp['ultima_atrasada_em'] = _agora_texto()
    if maior is not None:
        acomp['maior_atraso_s'] = max(acomp.get('maior_atraso_s') or 0, maior)
    margem = marca_agua.margem_efetiva(marca, ctx.folga)
    logger.warning('%-28s %s CHEGADA(S) ATRASADA(S): lidas pela primeira vez abaixo'
                   ' da marca anterior, maior atraso %ss (recuo %ss). So vieram'
                   ' por causa da --folga.', nome, quantas,
                   '?' if maior is None else int(maior),
                   '?' if margem is None else int(margem))
    if marca_agua.atraso_preocupante(maior, marca, ctx.folga):
        logger.error('%-28s ATENCAO: o atraso (%ss) passou da METADE da folga (%ss).'
                     ' A margem esta sendo comida -- um pouco mais e linhas se perdem'
                     ' ate a varredura. Aumente --folga ou pergunte ao DBA sobre'
                     ' transacoes longas nesta tabela.', nome, int(maior), int(margem))


def _enviar(ctx, row, nome, grupos, chaves, chave, resumo):
    """Envia cada grupo a sua empresa. Devolve (tudo_ok, enviados, erro_texto)."""
    from contextia_sync import contextia_client, mapeamento

    descricao, campos = mapeamento.semantica(ctx.mapa, row)
    ok, enviados, erro = True, 0, None
    for escopo, registros in sorted(grupos.items()):
        if ctx.seco:
            logger.info('%-28s [SECO] escopo=%-8s %s registro(s)', nome, escopo,
                        len(registros))
            enviados += len(registros)
            continue
        try:
            res = contextia_client.enviar_dataset(
                nome, registros, key=chave, description=descricao, fields=campos,
                group=mapeamento.grupo_de(ctx.mapa, row),
                chunk=mapeamento.chunk_de(ctx.mapa, row) or 500,
                api_key=chaves[escopo], logger=logger,
                # SEM CICLO DE CARGA -- o coracao da seguranca daqui. Sem `sync`
                # o servidor faz upsert e NAO remove nada; um incremental que
                # mandasse `complete` apagaria tudo que nao mudou no ultimo
                # minuto, ou seja, o dataset inteiro.
                sync=None)
        except contextia_client.ErroContextia as falha:
            # Chave revogada de UMA empresa nao para as outras; a marca fica.
            ok = False
            resumo['erros'] += 1
            erro = 'escopo %s: %s: %s' % (escopo, type(falha).__name__, falha)
            logger.error('%-28s escopo=%-8s %s', nome, escopo, erro)
            continue
        if res['lotes_erro']:
            ok = False
            resumo['erros'] += res['lotes_erro']
            erro = 'escopo %s: %s lote(s) com erro: %s' % (
                escopo, res['lotes_erro'], '; '.join(res.get('erros') or [])[:200])
        enviados += res['registros']
        logger.info('%-28s escopo=%-8s enviados=%-5s novos=%-4s atualizados=%-4s'
                    ' iguais=%-4s', nome, escopo, res['registros'], res['inserted'],
                    res['updated'], res['duplicates'])
    return ok, enviados, erro


# ---------------------------------------------------------------------------
# Ciclo 2 -- projetos (empresa nova)
# ---------------------------------------------------------------------------

def ciclo_projetos(ctx):
    """
    Empresa nova no ERP ganha projeto, chave, grupo, webhook e carga completa.

    Nao reimplementa o provisionamento: chama o provisionar.py, onde a chave e
    gravada antes de qualquer coisa. Um segundo caminho para criar chave seria
    um segundo caminho para perder uma.
    """
    from contextia_sync import regra_projeto
    from contextia_sync.chaves import ler_chaves

    resumo = {'criados': 0, 'carregados': 0, 'erros': 0}
    _refazer_cargas_pendentes(ctx, resumo)

    regra = ctx.regra
    conhecidos = set(ler_chaves(ctx.chaves))
    excluidos = {texto_escopo(e) for e in
                 ((ctx.mapa.get('source') or {}).get('excluded_scopes') or [])}
    novos, recusados = [], []
    for linha in ctx.origem.fetch(regra['source_object'], regra['columns']):
        escopo = regra_projeto.escopo_de(linha, regra)
        if escopo in conhecidos or escopo in excluidos:
            continue
        aceito, motivo = regra_projeto.aceita(linha, regra)
        if not aceito:
            recusados.append('%s (%s)' % (escopo or '?', motivo))
            continue
        novos.append((escopo, regra_projeto.nome_de(linha, regra)))

    if recusados:
        logger.info('ciclo de projetos: %s escopo(s) recusados pela regra: %s',
                    len(recusados), '; '.join(recusados[:5]))
    if not novos:
        return resumo
    logger.warning('*** %s EMPRESA(S) NOVA(S): %s', len(novos),
                   ', '.join('%s=%s' % (e, (n or '')[:24]) for e, n in novos))

    for escopo, _ in novos:
        if ctx.parar():
            break
        if not ctx.seco:
            # Anotada ANTES de provisionar: a partir do momento em que a chave
            # existe, a empresa deixa de ser "nova" e nada mais a carregaria ate
            # a varredura -- enquanto a marca de agua ja passou pelo historico
            # dela. Morte no meio (kill -9) ou carga que falhou: o proximo ciclo
            # de projetos ve a anotacao e refaz (a carga completa e idempotente).
            ctx.estado.marcar_carga_pendente(escopo)
            ctx.estado.gravar()
        # Uma chamada por empresa: com `group_column` os grupos diferem.
        if not ctx.rodar_ferramenta(ctx.argv_provisionar(escopo),
                                    'provisionar %s' % escopo).ok:
            resumo['erros'] += 1
            continue
        resumo['criados'] += 1
        if ctx.seco:
            continue
        _carga_inicial(ctx, escopo, resumo)
    return resumo


def _refazer_cargas_pendentes(ctx, resumo):
    """Cargas iniciais que ficaram pela metade (morte, falha): refeitas agora."""
    from contextia_sync.chaves import ler_chaves
    if ctx.seco:
        return
    chaves = ler_chaves(ctx.chaves)
    for escopo in list(ctx.estado.cargas_pendentes()):
        if ctx.parar():
            return
        if escopo not in chaves:
            # Nem o provisionamento terminou: a empresa ainda e "nova" e o
            # caminho normal (provisionar + carregar) a pega logo abaixo.
            continue
        logger.warning('carga inicial da empresa %s ficou pela metade (ouvinte morto ou'
                       ' carga com falha): refazendo agora', escopo)
        _carga_inicial(ctx, escopo, resumo)


def _carga_inicial(ctx, escopo, resumo):
    """
    CARGA COMPLETA da empresa, agora: o incremental so traz o que MUDAR daqui
    para a frente, e deixar para a varredura seria um assistente vazio ate a
    madrugada no dia em que o cliente foi cadastrado.
    """
    from contextia_sync.chaves import ler_chaves
    chave = ler_chaves(ctx.chaves).get(escopo)
    if chave is None:
        logger.error('escopo %s provisionado e sem chave em %s -- carga inicial nao'
                     ' feita; confira a saida do provisionar acima', escopo, ctx.chaves)
        resumo['erros'] += 1
        return
    env = dict(os.environ, CONTEXTIA_API_KEY=chave, CONTEXTIA_HISTORICO=ctx.caminho_historico)
    argv = [ctx.python, 'connector.py', '--mapping=' + ctx.mapping,
            '--source=' + ctx.source, '--scope=' + escopo]
    if not ctx.rodar_ferramenta(argv, 'carga inicial %s' % escopo, env).ok:
        resumo['erros'] += 1
        logger.error('carga inicial da empresa %s falhou: tentada de novo no proximo ciclo'
                     ' de projetos', escopo)
        return
    resumo['carregados'] += 1
    ctx.estado.marcar_carga_pendente(escopo, False)
    ctx.estado.registrar_escopos([escopo])
    ctx.estado.gravar()


# ---------------------------------------------------------------------------
# Ciclo 3 -- varredura
# ---------------------------------------------------------------------------

def e_hora_de_varrer(ctx, agora=None):
    return hora_de_varrer(ctx.varredura, ctx.janela, ctx.estado.varredura_feita_em(),
                          agora)


def _escopos_da_varredura(ctx):
    """As empresas que o carregar-todas.sh vai carregar (as do arquivo de chaves)."""
    from contextia_sync.chaves import ErroChaves, ler_chaves
    from contextia_sync.mapeamento import escopos_excluidos
    try:
        escopos = set(ler_chaves(ctx.chaves))
    except (ErroChaves, OSError):
        # O carregar-todas recusa o mesmo arquivo: nenhuma empresa fecha carga.
        return {'(arquivo de chaves recusado)'}
    # Empresa excluida no mapeamento: o conector a recusa e ela nunca fecha carga.
    return escopos - set(escopos_excluidos(ctx.mapa))


def ciclo_varredura(ctx):
    """
    A recarga completa, identica a do cron: provisionar, depois carregar-todas.

    Fase 1 e rede de seguranca (se o ciclo de projetos vinha falhando, aparece
    aqui); fase 2 carrega tudo com sync+complete -- o unico momento em que
    registro apagado na origem sai do Contextia.
    """
    logger.warning('===== varredura: carga completa de todas as empresas =====')
    # O MAX de cada dataset entregue a varredura, lido ANTES dela: tudo ate
    # ali a carga completa leva, e a marca pode pular para ca. Sem isto a
    # rajada ficaria acima do teto para sempre, entregue a varredura todo ciclo.
    pendentes = {}
    from contextia_sync.contextia_client import normalizar_dataset
    for row in ctx.vivos:
        nome = normalizar_dataset(row['dataset'])
        if nome in ctx.estado.pendentes():
            pendentes[nome] = (row['_watch'],
                               ctx.origem.maximo(row['source_object'], row['_watch']))

    erros = 0
    if not ctx.rodar_ferramenta(ctx.argv_provisionar(), 'varredura/provisionar').ok:
        erros += 1
    # Cada conector desta varredura grava no historico as cargas aceitas com
    # este id: e assim que se sabe, dataset por dataset, o que ela fechou.
    execucao = 'varredura-' + uuid.uuid4().hex[:12]
    escopos = _escopos_da_varredura(ctx)
    if not ctx.parar():
        env = dict(os.environ, CONTEXTIA_MAPPING=ctx.mapping,
                   CONTEXTIA_PYTHON=ctx.python, CONTEXTIA_COLETA=ctx.raiz,
                   CONTEXTIA_HISTORICO=ctx.caminho_historico, CONTEXTIA_EXECUCAO=execucao)
        argv = ['bash', os.path.join(ctx.raiz, 'carregar-todas.sh'), ctx.chaves]
        if ctx.seco:
            argv.append('--dry-run')
        if not ctx.rodar_ferramenta(argv, 'varredura/carregar-todas', env).ok:
            erros += 1
    else:
        erros += 1

    # A varredura pode ter levado horas: o retrato da nossa sessao esta velho.
    ctx.origem.renovar()

    if ctx.seco:
        return {'erros': erros}
    if ctx.parar():
        # Interrompida pela parada: NAO conta como feita, e a proxima subida
        # dentro da janela varre de novo.
        logger.warning('varredura interrompida pela parada: nao registrada como feita')
        return {'erros': erros}
    # A marca pula POR DATASET: um dataset que a varredura fechou em todas as
    # empresas volta ao ao-vivo mesmo que outro tenha falhado. Pular junto
    # deixaria um dataset bom congelado por causa do erro de outro.
    faltando_por_dataset = historico.Historico(ctx.caminho_historico).faltando(
        escopos, pendentes, execucao)
    for nome, (watch, maximo) in pendentes.items():
        faltando = faltando_por_dataset[nome]
        if faltando:
            logger.error('%-28s a varredura NAO fechou a carga nas empresas %s (veja a'
                         ' saida acima): continua entregue a varredura', nome,
                         ', '.join(faltando[:10]))
            continue
        marca = ctx.estado.marca(nome)
        nova = marca_agua.avancar([{watch: maximo}], watch, marca)
        ctx.estado.definir_marca(nome, nova)
        ctx.estado.definir_vistos(nome, None)
        ctx.estado.pendentes().pop(nome, None)
        logger.info('%-28s carregado pela varredura: marca -> %s', nome,
                    marca_agua.texto_marca(nova))
    if erros:
        # Registrada mesmo assim, como o cron: repetir uma carga de horas a cada
        # ciclo dentro da janela martelaria a origem. Amanha ela roda de novo.
        logger.error('varredura com %s fase(s) com erro (veja a saida acima)', erros)
    ctx.estado.registrar_varredura(datetime.date.today().isoformat())
    ctx.estado.gravar()
    return {'erros': erros}
