"""
O supervisor de ferramentas: roda um programa filho (subprocess) como o seed 001.

E assim que o ouvinte roda provisionar, connector e carregar-todas.sh.
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

from __future__ import annotations

import enum
import logging
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

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
_em_curso: subprocess.Popen[bytes] | None = None


class Motivo(str, enum.Enum):
    """Por que a ferramenta terminou."""

    OK = 'ok'
    FALHOU = 'falhou'
    TEMPO = 'tempo'                   # estourou --timeout-ferramenta
    INATIVIDADE = 'inatividade'       # calada por --inatividade-ferramenta
    PARADA = 'parada'                 # encerrada pela parada do ouvinte
    NAO_EXECUTOU = 'nao_executou'     # nem comecou (programa ausente, permissao)


_POR_QUE = {Motivo.TEMPO: ' (estourou --timeout-ferramenta)',
            Motivo.INATIVIDADE: ' (sem saida por --inatividade-ferramenta)',
            Motivo.PARADA: ' (encerrada pela parada do ouvinte)'}


@dataclass(frozen=True)
class Resultado:
    """Como a ferramenta terminou: codigo, sinal que a matou, e por que."""

    codigo: int
    motivo: Motivo
    sinal: str | None = None
    duracao: float = 0.0

    @property
    def ok(self) -> bool:
        return self.codigo == 0

    def descrever(self) -> str:
        if self.motivo is Motivo.NAO_EXECUTOU:
            return 'nao foi possivel executar'
        como = ('morta pelo sinal %s' % self.sinal) if self.sinal else (
            'saiu com codigo %s' % self.codigo)
        return '%s%s em %.1fs' % (como, _POR_QUE.get(self.motivo, ''), self.duracao)


def _nome_sinal(numero: int) -> str:
    try:
        return signal.Signals(numero).name
    except ValueError:
        return 'sinal %s' % numero


def _grupo_vivo(pgid: int) -> bool:
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


def encerrar_grupo(processo: subprocess.Popen[bytes], graca: float = GRACA_TERM) -> None:
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


def matar_em_curso() -> int | None:
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

    def __init__(self, emitir: Callable[[bytes], None]) -> None:
        self._emitir = emitir
        self._pendente = b''

    def alimentar(self, pedaco: bytes) -> None:
        self._pendente += pedaco.replace(b'\r', b'\n')
        *completas, self._pendente = self._pendente.split(b'\n')
        for bruta in completas:
            self._emitir(bruta)
        if len(self._pendente) > MAXIMO_LINHA * 4:
            # Saida sem quebra de linha nenhuma: entrega em pedacos em vez de
            # acumular na memoria de um processo que precisa ficar de pe.
            self._emitir(self._pendente)
            self._pendente = b''

    def fechar(self) -> None:
        if self._pendente:
            self._emitir(self._pendente)
            self._pendente = b''


def rodar(argv: Sequence[str], rotulo: str, *, cwd: str | None = None,
          env: dict[str, str] | None = None, timeout: float | None = None,
          inatividade: float | None = None, deve_parar: Callable[[], bool] | None = None,
          ao_iniciar: Callable[[int], None] | None = None,
          pulso: Callable[[], None] | None = None, intervalo_pulso: float = 30.0,
          log: logging.Logger | None = None) -> Resultado:
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
        return Resultado(CODIGO_NAO_EXECUTOU, Motivo.NAO_EXECUTOU)

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
    if motivo in (Motivo.TEMPO, Motivo.INATIVIDADE):
        codigo = CODIGO_TEMPO
    elif motivo is None:
        motivo = Motivo.OK if codigo == 0 else Motivo.FALHOU
    resultado = Resultado(codigo, motivo, sinal, time.monotonic() - inicio)
    if resultado.ok:
        log.info('%s: terminou bem em %.1fs', rotulo, resultado.duracao)
    else:
        log.error('%s: %s', rotulo, resultado.descrever())
    return resultado


def _bombear(processo: subprocess.Popen[bytes], rotulo: str, log: logging.Logger,
             inicio: float, timeout: float | None, inatividade: float | None,
             deve_parar: Callable[[], bool] | None, pulso: Callable[[], None] | None,
             intervalo_pulso: float) -> Motivo | None:
    """Le a saida ao chegar; devolve o motivo de encerramento forcado, ou None."""
    def emitir(bruta: bytes) -> None:
        texto = bruta.decode('utf-8', 'replace').rstrip()
        if texto:
            log.info('  %s | %s', rotulo, texto[:MAXIMO_LINHA])

    saida = processo.stdout
    if saida is None:                     # pragma: no cover - rodar() sempre pede PIPE
        raise ValueError('_bombear precisa de stdout=PIPE')
    seletor = selectors.DefaultSelector()
    seletor.register(saida, selectors.EVENT_READ)
    leitor = _Linhas(emitir)
    ultima_saida = time.monotonic()
    proximo_pulso = time.monotonic() + intervalo_pulso
    prazo_dreno = None
    motivo: Motivo | None = None
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
                    motivo = Motivo.PARADA
                    log.warning('%s: parada pedida -- encerrando o grupo %s (SIGTERM,'
                                ' depois SIGKILL)', rotulo, processo.pid)
                elif timeout and agora - inicio >= timeout:
                    motivo = Motivo.TEMPO
                    log.error('%s: passou de %ss (--timeout-ferramenta); encerrando'
                              ' o grupo', rotulo, timeout)
                elif inatividade and agora - ultima_saida >= inatividade:
                    motivo = Motivo.INATIVIDADE
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
        saida.close()
    return motivo
