"""
O verificador da tortura: a origem contra o Contextia, linha a linha, empresa a
empresa, dataset a dataset -- e o amostrador de latência.

A comparação e por TIPO de coluna (número, data, texto), não por texto: o
cliente manda Decimal como '1234.50' e datetime em ISO, e o que importa e o
valor, não a grafia.

As desculpas são ESTREITAS e contadas: uma diferença só é desculpada se cai
numa classe documentada que a estratégia `coluna` não tem como fazer melhor
antes da varredura, e só para as linhas que a própria tortura mexeu daquele
jeito (ver `DESCULPAS`). O resto reprova (`REPROVAM`).
"""

import collections
import datetime
import decimal
import threading
import time

import sqlalchemy as sa

from tortura_origem import DATASETS, esquema


def tipos_das_colunas():
    """{dataset: {coluna: 'num'|'data'|'texto'}} a partir do esquema."""
    meta = esquema()
    saida = {}
    for nome, (tabela, _chave, colunas, _recorte) in DATASETS.items():
        t = meta.tables[tabela]
        tipos = {}
        for coluna in colunas:
            tipo = t.c[coluna].type
            if isinstance(tipo, (sa.Integer, sa.Numeric)):
                tipos[coluna] = 'num'
            elif isinstance(tipo, sa.DateTime):
                tipos[coluna] = 'data'
            else:
                tipos[coluna] = 'texto'
        saida[nome] = tipos
    return saida


TIPOS = tipos_das_colunas()


# Classes de ausencia/sobra que sao desculpa (contadas na tabela, nunca escondidas):
DESCULPAS = (
    'apagada_na_origem',  # exclusao fisica: so a varredura remove
    'alem_da_folga',  # commit depois da --folga (o limite da `coluna`)
    'mudou_de_empresa',  # a copia velha fica na empresa de onde a linha saiu
    'rajada',  # linha de uma rajada (INSERT acima do teto) da tortura
    'carimbo_em_massa',  # linha do UPDATE que carimbou a tabela inteira (tortura)
    'dataset_entregue',  # mudou depois que o dataset foi entregue por causa dela
    'versao_antiga_sem_key',  # sem `key`, a versao velha fica ate a varredura
    'quarentena',  # registro envenenado que esta na quarentena, e so la
    'fora_do_ao_vivo',  # dataset que o produto declara so na varredura (o sem
    # `key` lendo o log), conferido no status
)
# Classes que reprovam a rodada.
REPROVAM = (
    'perdida',
    'recente_ausente',
    'fantasma',
    'duplicada',
    'futuro_ausente',
    'relogio_ausente',
    'venenoso_no_contextia',
    'venenoso_sumiu',
)


def canonico(tipo, valor):
    if valor is None:
        return None
    if tipo == 'num':
        try:
            numero = decimal.Decimal(str(valor))
        except decimal.InvalidOperation:
            return 'texto:%s' % valor
        if not numero.is_finite():
            return 'num:%s' % numero  # NaN da origem: nunca igual a um numero
        if numero == numero.to_integral_value():
            return str(numero.quantize(decimal.Decimal(1)))
        return str(numero.normalize())
    if tipo == 'data':
        if isinstance(valor, str):
            try:
                valor = datetime.datetime.fromisoformat(valor.replace('Z', '+00:00'))
            except ValueError:
                return 'texto:%s' % valor
        if isinstance(valor, datetime.datetime):
            if valor.tzinfo is not None:
                valor = valor.astimezone(datetime.timezone.utc).replace(tzinfo=None)
            return valor.isoformat(timespec='microseconds')
        return str(valor)
    return str(valor)


def assinatura(dataset, registro):
    tipos = TIPOS[dataset]
    return tuple(canonico(tipos[c], registro.get(c)) for c in DATASETS[dataset][2])


def chave_de(dataset, registro):
    tabela, chave, _colunas, _recorte = DATASETS[dataset]
    coluna = chave or 'DOC'  # movimentos: DOC identifica, mesmo sem `key`
    return canonico(TIPOS[dataset][coluna], registro.get(coluna))


def carimbo_de(dataset, registro):  # noqa: ARG001 -- mesma assinatura de chave_de
    return canonico('data', registro.get('ALTERADO_EM'))


# ---------------------------------------------------------------------------
# Ler os dois lados
# ---------------------------------------------------------------------------


def origem_por_empresa(linhas_por_tabela, escopos):
    """{escopo: {dataset: [linhas]}}: o que cada empresa DEVE ter."""
    saida = {e: {} for e in escopos}
    for dataset, (tabela, _chave, _colunas, recorte) in DATASETS.items():
        for escopo in escopos:
            if recorte:
                saida[escopo][dataset] = [
                    x for x in linhas_por_tabela[tabela] if str(x['EMPRESA_ID']) == escopo
                ]
            else:
                saida[escopo][dataset] = list(linhas_por_tabela[tabela])
    return saida


def ler_contextia(contextia, chaves):
    """
    {escopo: {dataset: [registros]}} lidos pela API de leitura do servidor, com
    o cliente HTTP da PROPRIA tortura (tortura_contextia.Contextia).
    """
    saida = {}
    for escopo, chave in sorted(chaves.items()):
        existentes = {d.get('dataset') for d in contextia.datasets(chave)}
        saida[escopo] = {}
        for dataset in DATASETS:
            if dataset in existentes:
                saida[escopo][dataset] = contextia.registros(chave, dataset)
            else:
                saida[escopo][dataset] = []
    return saida


def justificar_entregas(entregues, rajadas):
    """
    Separa os datasets que o ouvinte entregou a varredura em (justificados,
    sem_rajada). A palavra do produto ("entreguei este dataset") não é desculpa
    sozinha: só vale se a PROPRIA tortura injetou, naquele dataset, uma
    operação acima do teto que começou antes de a entrega ser vista.

    entregues: {dataset: {'marca': datetime|None, 'visto_em': monotonic}}
    rajadas:   [{'dataset', 'inicio' (monotonic), ...}]
    Devolve ({dataset: marca}, [dataset, ...]).
    """
    justificados, sem_rajada = {}, []
    for dataset, visto in sorted(entregues.items()):
        casa = [r for r in rajadas if r['dataset'] == dataset and r['inicio'] <= visto['visto_em']]
        if casa:
            justificados[dataset] = visto['marca']
        else:
            sem_rajada.append(dataset)
    return justificados, sem_rajada


# ---------------------------------------------------------------------------
# Comparar
# ---------------------------------------------------------------------------


class Contexto:
    """O que a carga sabe e que classifica uma ausência (nunca a esconde)."""

    def __init__(
        self,
        *,
        fim,
        folga,
        intervalo,
        rajadas=(),
        entregues=None,
        alem_da_folga=(),
        apagados=None,
        movidos=None,
        venenosos=(),
        na_quarentena=(),
        futuros=(),
        do_relogio=(),
        fora_do_ao_vivo=(),
    ):
        self.fim = fim  # relogio do BANCO ao fim da carga
        self.folga = folga
        self.intervalo = intervalo
        self.rajadas = list(rajadas)  # [{'dataset', 'ids', 'desde', 'ate'}]
        # {dataset: marca quando foi entregue} -- SO os justificados por uma
        # rajada da tortura (justificar_entregas).
        self.entregues = dict(entregues or {})
        self.alem_da_folga = {(d, i) for d, i, *_ in alem_da_folga}
        self.apagados = apagados or {}
        self.movidos = movidos or {}  # {dataset: {ident: {empresa de onde saiu}}}
        self.venenosos = {(d, i) for d, i, *_ in venenosos}
        self.na_quarentena = set(na_quarentena)  # {(dataset, escopo, ident)}
        self.futuros = {(d, i) for d, i, *_ in futuros}
        self.do_relogio = {(d, i) for d, i, *_ in do_relogio}
        # Os datasets que a estrategia nao acompanha (so na varredura): o que a
        # tortura confere neles e que o status o diz, nao as linhas.
        self.fora_do_ao_vivo = set(fora_do_ao_vivo)

    def limite(self):
        return self.fim - datetime.timedelta(seconds=self.folga + self.intervalo)

    def classificar_ausencia(self, dataset, linha, escopo=None):
        ident = chave_de(dataset, linha)
        carimbo = linha.get('ALTERADO_EM')
        if (dataset, ident) in self.venenosos:
            return (
                'quarentena'
                if (dataset, str(escopo), ident) in self.na_quarentena
                else 'venenoso_sumiu'
            )
        if dataset in self.fora_do_ao_vivo:
            return 'fora_do_ao_vivo'
        if (dataset, ident) in self.alem_da_folga:
            return 'alem_da_folga'
        # Carimbo no futuro e linha depois do relogio voltar: nenhuma desculpa
        # vale para elas (e a condicao de aprovacao daquela falha).
        if (dataset, ident) in self.futuros:
            return 'futuro_ausente'
        if (dataset, ident) in self.do_relogio:
            return 'relogio_ausente'
        for rajada in self.rajadas:
            # Linha da rajada (ou do carimbo em massa) que nao mudou depois dela.
            if (
                rajada['dataset'] == dataset
                and ident in rajada['ids']
                and rajada['desde'] <= carimbo <= rajada['ate']
            ):
                return rajada.get('tipo', 'rajada')
        # Dataset que o ouvinte entregou a varredura por causa de uma rajada da
        # tortura, com a marca daquele momento: o que mudou depois de marca - folga
        # espera a varredura.
        marca = self.entregues.get(dataset)
        if marca is not None and carimbo > marca - datetime.timedelta(seconds=self.folga):
            return 'dataset_entregue'
        if carimbo <= self.limite():
            return 'perdida'
        return 'recente_ausente'


def comparar(esperado, obtido, contexto=None):
    """
    Compara origem x Contextia. Sem `contexto`, a comparação e EXATA (depois da
    varredura): toda diferença e divergência. Com ele (antes da varredura), cada
    ausência e classificada e cada sobra explicada.
    Devolve dict com contagens por classe e exemplos.
    """
    classes = collections.Counter()
    exemplos = collections.defaultdict(list)
    por_dataset = collections.defaultdict(collections.Counter)

    def anotar(classe, escopo, dataset, detalhe):
        classes[classe] += 1
        por_dataset[dataset][classe] += 1
        if len(exemplos[classe]) < 8:
            exemplos[classe].append('empresa %s, %s: %s' % (escopo, dataset, detalhe))

    for escopo in sorted(esperado):
        for dataset in DATASETS:
            linhas = esperado[escopo].get(dataset, [])
            registros = obtido.get(escopo, {}).get(dataset, [])
            com_chave = DATASETS[dataset][1] is not None
            classes['verificadas'] += len(linhas)
            por_dataset[dataset]['verificadas'] += len(linhas)

            if com_chave:
                indice = collections.defaultdict(list)
                for registro in registros:
                    indice[chave_de(dataset, registro)].append(registro)
                for ident, lista in indice.items():
                    if len(lista) > 1:
                        anotar('duplicada', escopo, dataset, 'chave %s x%d' % (ident, len(lista)))
            else:
                indice = collections.Counter(assinatura(dataset, r) for r in registros)

            vistos = set()
            for linha in linhas:
                ident = chave_de(dataset, linha)
                vistos.add(ident)
                sig = assinatura(dataset, linha)
                if contexto is not None and (dataset, ident) in contexto.venenosos:
                    # O envenenado nao pode estar no Contextia em versao nenhuma.
                    if indice.get(ident) if com_chave else None:
                        anotar('venenoso_no_contextia', escopo, dataset, 'chave %s' % ident)
                        continue
                if com_chave:
                    lista = indice.get(ident) or []
                    if lista and assinatura(dataset, lista[0]) == sig:
                        classes['ok'] += 1
                        continue
                    falta = 'desatualizada' if lista else 'ausente'
                elif indice.get(sig, 0) > 0:
                    indice[sig] -= 1
                    classes['ok'] += 1
                    continue
                else:
                    falta = 'ausente'
                if contexto is None:
                    anotar('divergente', escopo, dataset, '%s %s' % (falta, ident))
                else:
                    classe = contexto.classificar_ausencia(dataset, linha, escopo)
                    anotar(
                        classe,
                        escopo,
                        dataset,
                        '%s %s (alterado em %s)' % (falta, ident, linha.get('ALTERADO_EM')),
                    )

            # Sobras: o que o Contextia tem e a origem nao.
            if com_chave:
                sobras = [(i, lista[0]) for i, lista in indice.items() if i not in vistos]
            else:
                sobras = []
                for registro in registros:
                    sig = assinatura(dataset, registro)
                    if indice.get(sig, 0) > 0:
                        indice[sig] -= 1
                        sobras.append((chave_de(dataset, registro), registro))
            for ident, _registro in sobras:
                if contexto is None:
                    anotar('sobra', escopo, dataset, ident)
                elif dataset in contexto.fora_do_ao_vivo:
                    anotar('fora_do_ao_vivo', escopo, dataset, ident)
                elif ident in contexto.apagados.get(dataset, ()):
                    anotar('apagada_na_origem', escopo, dataset, ident)
                elif escopo in contexto.movidos.get(dataset, {}).get(ident, ()):
                    anotar('mudou_de_empresa', escopo, dataset, ident)
                elif not com_chave and ident in vistos:
                    anotar('versao_antiga_sem_key', escopo, dataset, ident)
                else:
                    anotar('fantasma', escopo, dataset, ident)

    return {
        'classes': dict(classes),
        'exemplos': dict(exemplos),
        'por_dataset': {d: dict(c) for d, c in por_dataset.items()},
    }


# ---------------------------------------------------------------------------
# Latencia: do commit na origem ate o registro aparecer no Contextia
# ---------------------------------------------------------------------------


class Amostrador:
    """
    Lê, a cada `periodo`, os datasets de UMA empresa pela API de leitura (que a
    injeção de falhas não toca: ela só afeta /api/v1/intake) e marca quando
    cada mudança anotada pela carga apareceu: registro com a mesma chave e
    carimbo igual ou mais novo. Resolução: o período.
    """

    def __init__(self, contextia, chave, escopo, mudancas, trava, *, periodo=0.5):
        self.contextia = contextia
        self.chave = chave
        self.escopo = str(escopo)
        self.mudancas = mudancas  # lista compartilhada com a carga
        self.trava = trava
        self.periodo = periodo
        self.latencias = []
        self.lidas = 0
        self.erros = 0
        self._proxima = 0  # indice da proxima mudanca ainda nao vista
        self._pendentes = []
        self._parar = threading.Event()
        self._thread = None

    def _relevante(self, dataset, empresa):
        return dataset == 'situacoes' or str(empresa) == self.escopo

    def uma_leitura(self):
        with self.trava:
            novas = self.mudancas[self._proxima :]
            self._proxima = len(self.mudancas)
        for dataset, ident, empresa, carimbo, commit in novas:
            if self._relevante(dataset, empresa):
                self._pendentes.append((dataset, ident, canonico('data', carimbo), commit))
        if not self._pendentes:
            return
        agora = time.monotonic()
        atuais = {}
        for dataset in {p[0] for p in self._pendentes}:
            atuais[dataset] = {}
            for registro in self.contextia.registros(self.chave, dataset):
                ident = chave_de(dataset, registro)
                carimbo = carimbo_de(dataset, registro)
                if carimbo > atuais[dataset].get(ident, ''):
                    atuais[dataset][ident] = carimbo
        self.lidas += 1
        restantes = []
        for dataset, ident, carimbo, commit in self._pendentes:
            visto = atuais.get(dataset, {}).get(ident)
            if visto is not None and visto >= carimbo:
                self.latencias.append(max(0.0, agora - commit))
            else:
                restantes.append((dataset, ident, carimbo, commit))
        self._pendentes = restantes

    def _laco(self):
        while not self._parar.wait(self.periodo):
            try:
                self.uma_leitura()
            except Exception:  # noqa: BLE001
                self.erros += 1

    def iniciar(self):
        self._thread = threading.Thread(target=self._laco, name='amostrador', daemon=True)
        self._thread.start()

    def parar(self):
        self._parar.set()
        if self._thread:
            self._thread.join(30)

    def pendentes(self):
        return len(self._pendentes)


def percentil(valores, fracao):
    if not valores:
        return None
    ordenados = sorted(valores)
    posicao = min(len(ordenados) - 1, max(0, int(round(fracao * (len(ordenados) - 1)))))
    return ordenados[posicao]


# ---------------------------------------------------------------------------
# Remoção de linha viva: conferida SEM PARAR, não só no fim
# ---------------------------------------------------------------------------

COM_KEY = tuple(d for d, (_t, chave, _c, _r) in DATASETS.items() if chave is not None)


def chaves_da_origem(conexao, escopos):
    """{(escopo, dataset): {chave}} de cada dataset com `key`, pelo SQL da tortura."""
    meta = esquema()
    saida = {(e, d): set() for e in escopos for d in COM_KEY}
    for dataset in COM_KEY:
        tabela, chave, _colunas, recorte = DATASETS[dataset]
        t = meta.tables[tabela]
        colunas = [t.c[chave]] + ([t.c.EMPRESA_ID] if recorte else [])
        for linha in conexao.execute(sa.select(*colunas)):
            ident = chave_de(dataset, {chave: linha[0]})
            if recorte:
                alvo = saida.get((str(linha[1]), dataset))
                if alvo is not None:
                    alvo.add(ident)
            else:
                for escopo in escopos:
                    saida[(escopo, dataset)].add(ident)
    return saida


class VigiaDeRemocoes:
    """
    A regra da `reconciliacao` conferida o tempo todo (o modelo é a `Vigia` de
    tests/test_reconciliacao.py): uma chave que estava no Contextia numa volta e
    sumiu dele na seguinte, estando na origem nas leituras das DUAS voltas (antes
    e depois da leitura do Contextia), foi removida VIVA. Antes de acusar, o
    Contextia é lido de novo, logo em seguida: a chave que está lá de novo foi
    uma página lida no meio de uma entrega (contada em `nao_confirmadas`), não
    uma remoção. A remoção errada que a reconciliação seguinte desfaz (ela
    reenvia a chave que reaparece) vem segundos depois e continua acusada.

    A origem é lida por uma conexão da própria tortura, protegida do matador de
    conexões; o Contextia, pelo HTTP da tortura. Uma volta que falhou não é
    comparada: a próxima recomeça do zero (comparar voltas não vizinhas inventaria
    remoções que a origem explica).

    `classificar(escopo, dataset, chave)` devolve a desculpa estreita de uma
    acusação (a chave que a tortura tirou da empresa e devolveu, a que ela
    apagou e reinseriu) ou None (a remoção viva, que reprova).
    """

    def __init__(self, contextia, motor, proteger, chaves, escopos, classificar, *, periodo=3.0):
        self.contextia = contextia
        self.motor = motor
        self.proteger = proteger  # proteger(conexao): fora do matador de conexões
        self.chaves = chaves  # chaves() -> {escopo: api_key}
        self.escopos = escopos  # escopos() -> [escopo]: as que a regra aceita
        self.classificar = classificar
        self.periodo = periodo
        self.voltas = 0
        self.voltas_com_erro = 0
        self.nao_confirmadas = 0
        self.removidas_vivas = []  # (escopo, dataset, chave)
        self.desculpadas = collections.Counter()
        self.exemplos_desculpados = []
        self._conexao = None
        self._parar = threading.Event()
        self._thread = None

    def _ler_origem(self, escopos):
        if self._conexao is None:
            self._conexao = self.motor.connect()
            self.proteger(self._conexao)
        try:
            lido = chaves_da_origem(self._conexao, escopos)
            self._conexao.commit()
            return lido
        except Exception:
            try:
                self._conexao.close()
            except Exception:  # noqa: BLE001
                pass
            self._conexao = None
            raise

    def _ler_contextia(self, chave, dataset):
        from tortura_contextia import ErroHttp

        try:
            return {chave_de(dataset, r) for r in self.contextia.registros(chave, dataset)}
        except ErroHttp as erro:
            if erro.status == 404:  # dataset ainda não criado
                return set()
            raise

    def _uma_volta(self):
        chaves = self.chaves()
        escopos = [e for e in self.escopos() if e in chaves]
        antes = self._ler_origem(escopos)
        no_contextia = {(e, d): self._ler_contextia(chaves[e], d) for e in escopos for d in COM_KEY}
        depois = self._ler_origem(escopos)
        return chaves, {k: antes[k] & depois[k] for k in no_contextia}, no_contextia

    def _laco(self):
        anterior = None
        while not self._parar.wait(self.periodo):
            try:
                chaves, na_origem, no_contextia = self._uma_volta()
            except Exception:  # noqa: BLE001
                self.voltas_com_erro += 1
                anterior = None
                continue
            self.voltas += 1
            if anterior is not None:
                origem_antes, contextia_antes = anterior
                for alvo, agora in no_contextia.items():
                    if alvo not in contextia_antes:
                        continue
                    sumiram = (contextia_antes[alvo] - agora) & origem_antes[alvo] & na_origem[alvo]
                    if sumiram:
                        self._acusar(chaves, alvo, sumiram)
            anterior = (na_origem, no_contextia)

    def _acusar(self, chaves, alvo, sumiram):
        escopo, dataset = alvo
        try:
            voltou = self._ler_contextia(chaves[escopo], dataset)
        except Exception:  # noqa: BLE001
            voltou = set()
        for chave in sorted(sumiram):
            if chave in voltou:
                # Está lá na releitura de agora: foi a página lida no meio de uma
                # entrega (o upsert muda a posição do registro), não uma remoção.
                self.nao_confirmadas += 1
                continue
            desculpa = self.classificar(escopo, dataset, chave)
            if desculpa:
                self.desculpadas[desculpa] += 1
                if len(self.exemplos_desculpados) < 8:
                    self.exemplos_desculpados.append(
                        '%s: empresa %s, %s %s' % (desculpa, escopo, dataset, chave)
                    )
            else:
                self.removidas_vivas.append((escopo, dataset, chave))

    def iniciar(self):
        self._thread = threading.Thread(target=self._laco, name='vigia-remocoes', daemon=True)
        self._thread.start()

    def parar(self):
        self._parar.set()
        if self._thread:
            self._thread.join(60)
        if self._conexao is not None:
            try:
                self._conexao.close()
            except Exception:  # noqa: BLE001
                pass
            self._conexao = None
