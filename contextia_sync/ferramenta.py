"""
Rodar uma ferramenta do SDK (provisionar.py, connector.py, carregar-todas.sh).

Subprocesso, e nao import: as ferramentas chamam SystemExit em erro de
configuracao, e dentro de um processo que precisa ficar de pe isso derrubaria
o ouvinte junto. Isolada, a falha volta como codigo de saida.

Como um supervisor roda um filho:
  * grupo de processos proprio (`start_new_session`): o grupo inteiro e
    enderecavel pelo pid do filho, e o bash do carregar-todas.sh com os seus
    connector.py morre junto -- nenhuma carga orfa continua rodando;
  * stdin DEVNULL: ninguem vai digitar nada, e herdar o terminal faria uma
    ferramenta que le stdin esperar para sempre;
  * saida lida linha a linha AO CHEGAR e logada na hora, com prefixo: uma
    varredura de duas horas aparece no log enquanto acontece;
  * vigia de inatividade (nenhuma linha por N segundos -> encerra o grupo)
    alem do tempo total;
  * encerrar = SIGTERM no grupo, espera, SIGKILL no que sobrou;
  * depois que o filho sai, le no maximo DRENO segundos: um neto que herdou o
    pipe nao pode prender o laco do ouvinte.
"""

import os
import selectors
import signal
import subprocess
import time

from contextia_sync.registro import logger

INTERVALO_SELECT = 0.25
GRACA_TERM = 5.0
# O pipe guarda no maximo a sua capacidade quando o escritor sai; o dreno so
# precisa cobrir isso, nunca um produtor vivo.
DRENO_APOS_SAIDA = 2.0
TAMANHO_LEITURA = 8192
MAXIMO_LINHA = 4000
CODIGO_TEMPO = 124
CODIGO_NAO_EXECUTOU = 125

# O processo em curso, para a parada fria (segundo SIGTERM) poder mata-lo de
# dentro do tratador de sinal.
_em_curso = None


class Resultado:
    """Como a ferramenta terminou: codigo, sinal que a matou, e por que."""

    def __init__(self, codigo, motivo, sinal=None, duracao=0.0):
        self.codigo = codigo
        self.motivo = motivo          # ok, falhou, tempo, inatividade, parada, nao_executou
        self.sinal = sinal
        self.duracao = duracao

    @property
    def ok(self):
        return self.codigo == 0

    def descrever(self):
        if self.motivo == 'nao_executou':
            return 'nao foi possivel executar'
        como = ('morta pelo sinal %s' % self.sinal) if self.sinal else (
            'saiu com codigo %s' % self.codigo)
        por = {'tempo': ' (estourou --timeout-ferramenta)',
               'inatividade': ' (sem saida por --inatividade-ferramenta)',
               'parada': ' (encerrada pela parada do ouvinte)'}.get(self.motivo, '')
        return '%s%s em %.1fs' % (como, por, self.duracao)


def _nome_sinal(numero):
    try:
        return signal.Signals(numero).name
    except ValueError:
        return 'sinal %s' % numero


def _grupo_vivo(pgid):
    """Algum processo do grupo ainda vive? Zumbi nao conta: ja morreu."""
    if os.path.isdir('/proc/self'):
        for nome in os.listdir('/proc'):
            if not nome.isdigit():
                continue
            try:
                with open('/proc/%s/stat' % nome, 'rb') as arquivo:
                    campos = arquivo.read().rsplit(b')', 1)[1].split()
            except OSError:
                continue
            if int(campos[2]) == pgid and campos[0] != b'Z':
                return True
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def encerrar_grupo(processo, graca=GRACA_TERM):
    """
    SIGTERM no GRUPO, espera `graca`, SIGKILL no que sobrou.

    O grupo e nao o processo: o carregar-todas.sh abre connector.py, e sinalizar
    so o bash deixaria os filhos rodando com o pipe aberto. Espera o grupo todo
    sumir, nao so o filho direto: um neto que ignora SIGTERM leva SIGKILL.
    """
    pgid = processo.pid
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        processo.poll()
        return
    fim = time.monotonic() + graca
    while time.monotonic() < fim:
        if processo.poll() is not None and not _grupo_vivo(pgid):
            return
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    processo.wait()
    # SIGKILL e entregue na hora, mas o kernel leva um instante para desmontar
    # cada processo; quem chama quer o grupo FORA, nao "a caminho".
    fim = time.monotonic() + 2.0
    while _grupo_vivo(pgid) and time.monotonic() < fim:
        time.sleep(0.05)


def matar_em_curso():
    """Parada fria: SIGKILL no grupo da ferramenta em curso, sem graca."""
    processo = _em_curso
    if processo is None:
        return None
    try:
        os.killpg(processo.pid, signal.SIGKILL)
    except ProcessLookupError:
        return None
    return processo.pid


class _Linhas:
    """Linhas inteiras de um fluxo de bytes; \\r tambem fecha linha (barra do tqdm)."""

    def __init__(self, emitir):
        self._emitir = emitir
        self._pendente = b''

    def alimentar(self, pedaco):
        self._pendente += pedaco.replace(b'\r', b'\n')
        *completas, self._pendente = self._pendente.split(b'\n')
        for bruta in completas:
            self._emitir(bruta)
        if len(self._pendente) > MAXIMO_LINHA * 4:
            # Saida sem quebra de linha nenhuma: entrega em pedacos em vez de
            # acumular na memoria de um processo que precisa ficar de pe.
            self._emitir(self._pendente)
            self._pendente = b''

    def fechar(self):
        if self._pendente:
            self._emitir(self._pendente)
            self._pendente = b''


def rodar(argv, rotulo, *, cwd=None, env=None, timeout=None, inatividade=None,
          deve_parar=None, ao_iniciar=None, pulso=None, intervalo_pulso=30.0,
          log=None):
    """
    Roda `argv` e devolve um Resultado. Nunca levanta por causa do filho.

    `deve_parar()` e consultado a cada 0.25s: verdadeiro encerra o grupo (e o
    SIGTERM do ouvinte). `ao_iniciar(pid)` avisa quem mostra o status;
    `pulso()` e chamado a cada `intervalo_pulso` segundos enquanto roda, para o
    arquivo de status nao envelhecer durante uma varredura de horas.
    """
    global _em_curso
    log = log or logger
    inicio = time.monotonic()
    log.info('$ %s', ' '.join(argv))
    ambiente = dict(env if env is not None else os.environ)
    # Sem isto o Python do filho acumula a saida num buffer de 8 KB quando ela
    # vai para um pipe: o log so veria as linhas no fim, e o vigia de
    # inatividade mataria uma carga saudavel que so estava "calada".
    ambiente['PYTHONUNBUFFERED'] = '1'
    try:
        processo = subprocess.Popen(
            list(argv), cwd=cwd, env=ambiente, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True)
    except OSError as erro:
        log.error('%s: nao foi possivel executar (%s: %s)', rotulo,
                  type(erro).__name__, erro)
        return Resultado(CODIGO_NAO_EXECUTOU, 'nao_executou')

    _em_curso = processo
    try:
        if ao_iniciar:
            ao_iniciar(processo.pid)
        motivo = _bombear(processo, rotulo, log, inicio, timeout, inatividade,
                          deve_parar, pulso, intervalo_pulso)
    except BaseException:
        # Qualquer saida por excecao (parada fria, bug aqui): o grupo nao fica
        # rodando sem dono.
        if processo.poll() is None or _grupo_vivo(processo.pid):
            encerrar_grupo(processo, graca=1.0)
        raise
    finally:
        _em_curso = None

    codigo = processo.wait()
    sinal = None
    if codigo < 0:
        sinal = _nome_sinal(-codigo)
        codigo = 128 - codigo
    if motivo in ('tempo', 'inatividade'):
        codigo = CODIGO_TEMPO
    elif motivo is None:
        motivo = 'ok' if codigo == 0 else 'falhou'
    resultado = Resultado(codigo, motivo, sinal, time.monotonic() - inicio)
    if resultado.ok:
        log.info('%s: terminou bem em %.1fs', rotulo, resultado.duracao)
    else:
        log.error('%s: %s', rotulo, resultado.descrever())
    return resultado


def _bombear(processo, rotulo, log, inicio, timeout, inatividade, deve_parar,
             pulso, intervalo_pulso):
    """Le a saida ao chegar; devolve o motivo de encerramento forcado, ou None."""
    def emitir(bruta):
        texto = bruta.decode('utf-8', 'replace').rstrip()
        if texto:
            log.info('  %s | %s', rotulo, texto[:MAXIMO_LINHA])

    seletor = selectors.DefaultSelector()
    seletor.register(processo.stdout, selectors.EVENT_READ)
    leitor = _Linhas(emitir)
    ultima_saida = time.monotonic()
    proximo_pulso = time.monotonic() + intervalo_pulso
    prazo_dreno = None
    motivo = None
    try:
        while seletor.get_map():
            for chave, _ in seletor.select(timeout=INTERVALO_SELECT):
                pedaco = os.read(chave.fd, TAMANHO_LEITURA)
                if not pedaco:
                    seletor.unregister(chave.fileobj)
                    continue
                ultima_saida = time.monotonic()
                leitor.alimentar(pedaco)
            agora = time.monotonic()
            vivo = processo.poll() is None
            if vivo and motivo is None:
                if deve_parar and deve_parar():
                    motivo = 'parada'
                    log.warning('%s: parada pedida -- encerrando o grupo %s (SIGTERM,'
                                ' depois SIGKILL)', rotulo, processo.pid)
                elif timeout and agora - inicio >= timeout:
                    motivo = 'tempo'
                    log.error('%s: passou de %ss (--timeout-ferramenta); encerrando'
                              ' o grupo', rotulo, timeout)
                elif inatividade and agora - ultima_saida >= inatividade:
                    motivo = 'inatividade'
                    log.error('%s: %ss sem nenhuma linha de saida'
                              ' (--inatividade-ferramenta); encerrando o grupo',
                              rotulo, inatividade)
                if motivo:
                    encerrar_grupo(processo)
                    vivo = False
            if pulso and agora >= proximo_pulso:
                proximo_pulso = agora + intervalo_pulso
                pulso()
            if not vivo:
                if prazo_dreno is None:
                    # Marcado uma vez e nunca adiado: saida que chega depois e
                    # de um neto, e deixa-la esticar a espera traria de volta
                    # exatamente o travamento que isto limita.
                    prazo_dreno = agora + DRENO_APOS_SAIDA
                elif agora >= prazo_dreno:
                    log.warning('%s: saiu, mas algum processo filho ainda segura'
                                ' a saida dela; paro de ler', rotulo)
                    break
    finally:
        leitor.fechar()
        seletor.close()
        processo.stdout.close()
    return motivo
