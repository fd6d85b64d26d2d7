"""
O supervisor de ferramentas: roda um programa filho (subprocess) como o seed 001.

E assim que o ouvinte roda provisionar, connector e carregar-todas.sh.
Subprocesso, e não import: as ferramentas chamam SystemExit em erro de
configuração, e dentro de um processo que precisa ficar de pe isso derrubaria
o ouvinte junto. Isolada, a falha volta como código de saída.

Como um supervisor roda um filho:
  * grupo de processos próprio (`start_new_session`): o grupo inteiro e
    endereçável pelo pid do filho, e o bash do carregar-todas.sh com os seus
    connector.py morre junto -- nenhuma carga órfã continua rodando;
  * stdin DEVNULL: ninguém vai digitar nada, e herdar o terminal faria uma
    ferramenta que lê stdin esperar para sempre;
  * saída lida linha a linha AO CHEGAR e logada na hora, com prefixo: uma
    varredura de duas horas aparece no log enquanto acontece;
  * vigia de inatividade (nenhuma linha por N segundos -> encerra o grupo)
    além do tempo total;
  * encerrar = SIGTERM no grupo, espera, SIGKILL no que sobrou;
  * depois que o filho sai, lê no máximo DRENO segundos: um neto que herdou o
    pipe não pode prender o laço do ouvinte.

Quando o próprio supervisor morre sem poder encerrar nada (kill -9, OOM,
queda), duas redes:
  * o filho direto pede ao kernel SIGTERM quando o pai morrer
    (PR_SET_PDEATHSIG, Linux); o carregar-todas.sh repassa o sinal ao seu
    connector. Só o filho direto recebe: netos são da segunda rede;
  * `rodar(..., arquivo_grupo=...)` anota o grupo (pgid, o instante em que o
    líder nasceu, uma marca no ambiente de todo o grupo, o rótulo) num arquivo
    do diretório de estado; `encerrar_sobra` o lê na subida seguinte e
    encerra o grupo que ainda estiver vivo -- se for o MESMO: pid reciclado por
    outro programa não é morto.

O arquivo de grupos (JSON, trocado inteiro):

    {"grupos": [{"pgid": 4242, "inicio": 123456, "boot": "<boot_id>",
                 "marca": "<hex>", "rotulo": "varredura/carregar-todas",
                 "comando": "bash .../carregar_todas.sh ...",
                 "desde": "2026-09-01T03:00:00", "ouvinte": 4200}]}

    início   campo 22 de /proc/<pgid>/stat (starttime, em ticks desde o boot)
    marca    também em CONTEXTIA_GRUPO_FERRAMENTA no ambiente do filho, que
             todo neto herda: prova de dono quando o líder já morreu
"""

from __future__ import annotations

import datetime
import enum
import json
import logging
import os
import selectors
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Required, TypedDict

from contextia_sync.arquivos import gravar_atomico
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
VARIAVEL_MARCA = 'CONTEXTIA_GRUPO_FERRAMENTA'
# O arquivo de grupos do ouvinte, no diretorio de estado dele.
ARQUIVO_GRUPO = 'ouvinte-ferramenta.json'
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
MAXIMO_COMANDO = 300

# O processo em curso, para a parada fria (segundo SIGTERM) poder mata-lo de
# dentro do tratador de sinal.
_em_curso: subprocess.Popen[bytes] | None = None


class Motivo(str, enum.Enum):
    """Por que a ferramenta terminou."""

    OK = 'ok'
    FALHOU = 'falhou'
    TEMPO = 'tempo'  # estourou --timeout-ferramenta
    INATIVIDADE = 'inatividade'  # calada por --inatividade-ferramenta
    PARADA = 'parada'  # encerrada pela parada do ouvinte
    NAO_EXECUTOU = 'nao_executou'  # nem comecou (programa ausente, permissao)


_POR_QUE = {
    Motivo.TEMPO: ' (estourou --timeout-ferramenta)',
    Motivo.INATIVIDADE: ' (sem saída por --inatividade-ferramenta)',
    Motivo.PARADA: ' (encerrada pela parada do ouvinte)',
}


@dataclass(frozen=True)
class Resultado:
    """Como a ferramenta terminou: código, sinal que a matou, e por que."""

    codigo: int
    motivo: Motivo
    sinal: str | None = None
    duracao: float = 0.0

    @property
    def ok(self) -> bool:
        return self.codigo == 0

    def descrever(self) -> str:
        if self.motivo is Motivo.NAO_EXECUTOU:
            return 'não foi possível executar'
        como = (
            ('morta pelo sinal %s' % self.sinal)
            if self.sinal
            else ('saiu com código %s' % self.codigo)
        )
        return '%s%s em %.1fs' % (como, _POR_QUE.get(self.motivo, ''), self.duracao)


def _nome_sinal(numero: int) -> str:
    try:
        return signal.Signals(numero).name
    except ValueError:
        return 'sinal %s' % numero


def _stat(pid: int) -> tuple[str, int, int] | None:
    """(estado, pgid, início) de /proc/<pid>/stat, ou None se o processo não existe."""
    try:
        with open('/proc/%s/stat' % pid, 'rb') as arquivo:
            # O nome do programa (campo 2) pode ter espaco e ')': corta no ultimo.
            campos = arquivo.read().rsplit(b')', 1)[1].split()
    except (OSError, IndexError):
        return None
    return campos[0].decode(), int(campos[2]), int(campos[19])


def _membros(pgid: int) -> list[tuple[int, int]]:
    """(pid, início) de cada processo vivo do grupo `pgid`. Zumbi não conta: já morreu."""
    membros = []
    for nome in os.listdir('/proc'):
        if nome.isdigit():
            dados = _stat(int(nome))
            if dados and dados[1] == pgid and dados[0] != 'Z':
                membros.append((int(nome), dados[2]))
    return membros


def _grupo_vivo(pgid: int) -> bool:
    """Algum processo do grupo ainda vive? Zumbi não conta: já morreu."""
    if os.path.isdir('/proc/self'):
        return bool(_membros(pgid))
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

    O grupo e não o processo: o carregar-todas.sh abre connector.py, e sinalizar
    só o bash deixaria os filhos rodando com o pipe aberto. Espera o grupo todo
    sumir, não só o filho direto: um neto que ignora SIGTERM leva SIGKILL.
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
    """Parada fria: SIGKILL no grupo da ferramenta em curso, sem graça."""
    processo = _em_curso
    if processo is None:
        return None
    try:
        os.killpg(processo.pid, signal.SIGKILL)
    except ProcessLookupError:
        return None
    return processo.pid


def _prctl() -> Callable[[int, int, int, int, int], int] | None:
    """O prctl da libc (Linux), resolvido no pai: no filho, entre fork e exec, nada de dlopen."""
    if not os.path.isdir('/proc/self'):
        return None
    try:
        import ctypes

        funcao: Callable[[int, int, int, int, int], int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return funcao


def _preparo_do_filho() -> Callable[[], None] | None:
    """
    O que o filho faz entre o fork e o exec: pedir SIGTERM quando o pai morrer.

    preexec_fn é seguro aqui: o ouvinte não tem outras threads. O sinal e o da
    morte da THREAD que criou o filho -- a principal, que só acaba com o ouvinte.
    """
    prctl = _prctl()
    if prctl is None:
        return None
    pai = os.getpid()

    def preparar() -> None:
        # O tratador de SIGTERM do ouvinte veio junto no fork: ate o exec, um
        # SIGTERM so levantaria a bandeira dele, e o filho seguiria vivo.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        # prctl(2): se o pai morreu ANTES do pedido, o sinal nunca vem -- o
        # filho ja foi adotado por outro. Faz o que o kernel faria.
        if os.getppid() != pai:
            os.kill(os.getpid(), signal.SIGTERM)

    return preparar


# Folga para comparar o instante do boot medido pelo relogio (ajustes do NTP
# mexem no relogio de parede, nao no de boot); dois boots tao proximos nao ha.
FOLGA_BOOT = 60


def _boot() -> str | None:
    """
    O id deste boot: depois de reiniciar a máquina, pid e início não provam nada.

    Sob a unit (ProcSubset=pid) o /proc/sys some: o boot passa a ser dito pelo
    instante em que ele aconteceu, `relógio:<segundos>`, o relógio de parede
    menos o de boot (comparado com FOLGA_BOOT em `_mesmo_boot`).
    """
    try:
        with open('/proc/sys/kernel/random/boot_id', encoding='ascii') as arquivo:
            return arquivo.read().strip()
    except OSError:
        pass
    try:
        return 'relogio:%d' % (time.time() - time.clock_gettime(time.CLOCK_BOOTTIME))
    except (AttributeError, OSError):
        return None


def _mesmo_boot(anotado: object, agora: str | None) -> bool:
    """O boot anotado e este? O id exato; o instante do boot, dentro da folga."""
    if anotado == agora:
        return True
    prefixo = 'relogio:'
    if (
        isinstance(anotado, str)
        and agora
        and anotado.startswith(prefixo)
        and agora.startswith(prefixo)
    ):
        try:
            return abs(int(anotado[len(prefixo) :]) - int(agora[len(prefixo) :])) <= FOLGA_BOOT
        except ValueError:
            return False
    return False


def _marcado(pid: int, marca: str) -> bool | None:
    """O processo carrega a nossa marca no ambiente? None: não deu para ler."""
    try:
        with open('/proc/%s/environ' % pid, 'rb') as arquivo:
            ambiente = arquivo.read().split(b'\0')
    except FileNotFoundError:
        return False
    except OSError:
        return None
    return ('%s=%s' % (VARIAVEL_MARCA, marca)).encode() in ambiente


def _comando(pid: int) -> str:
    """A linha de comando de `pid`, curta, para o log (nunca tem chave: ela vai no ambiente)."""
    try:
        with open('/proc/%s/cmdline' % pid, 'rb') as arquivo:
            texto = arquivo.read().replace(b'\0', b' ').decode('utf-8', 'replace').strip()
    except OSError:
        return '?'
    return texto[:120] or '?'


class GrupoAnotado(TypedDict, total=False):
    """Uma entrada do arquivo de grupos (`_anotar_grupo` a grava; `_ler_grupos` confere o pgid)."""

    pgid: Required[int]
    inicio: int | None
    boot: str | None
    marca: str
    rotulo: str
    comando: str
    desde: str
    ouvinte: int


def _ler_grupos(arquivo_grupo: str) -> list[GrupoAnotado]:
    """As entradas do arquivo de grupos; [] se não existe. Levanta ValueError se ilegível."""
    try:
        with open(arquivo_grupo, encoding='utf-8') as arquivo:
            dados = json.load(arquivo)
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as erro:
        raise ValueError('%s: %s' % (type(erro).__name__, erro)) from None
    grupos = dados.get('grupos') if isinstance(dados, dict) else None
    if not isinstance(grupos, list) or not all(
        isinstance(g, dict) and isinstance(g.get('pgid'), int) and g['pgid'] > 1 for g in grupos
    ):
        raise ValueError('formato inesperado (falta "grupos" com "pgid" inteiro)')
    return grupos


def _gravar_grupos(arquivo_grupo: str, grupos: list[GrupoAnotado]) -> None:
    if grupos:
        gravar_atomico(arquivo_grupo, json.dumps({'grupos': grupos}, indent=1) + '\n')
    else:
        try:
            os.unlink(arquivo_grupo)
        except FileNotFoundError:
            pass


def _situacao(entrada: GrupoAnotado) -> tuple[str, list[tuple[int, int]]]:
    """
    O grupo anotado, hoje: ('terminou' | 'nosso' | 'outro' | 'incerto', membros vivos).

    'nosso' exige prova: o líder vivo com o MESMO instante de nascimento, ou
    (líder morto) todo membro com a nossa marca no ambiente. O kernel não
    reusa um número enquanto houver processo com ele de grupo, mas reusa
    depois -- e um grupo novo com o mesmo número e de outro programa.
    """
    pgid = int(entrada['pgid'])
    if not os.path.isdir('/proc/self'):
        return ('incerto' if _grupo_vivo(pgid) else 'terminou'), []
    membros = _membros(pgid)
    if not membros:
        return 'terminou', []
    if not _mesmo_boot(entrada.get('boot'), _boot()):
        return 'outro', membros
    inicio = entrada.get('inicio')
    if not isinstance(inicio, int) or any(nasceu < inicio for _, nasceu in membros):
        # Alguem do grupo nasceu antes do nosso lider: o grupo nao e o nosso.
        return 'outro', membros
    lider = [nasceu for pid, nasceu in membros if pid == pgid]
    if lider:
        return ('nosso' if lider[0] == inicio else 'outro'), membros
    marcas = [_marcado(pid, str(entrada.get('marca'))) for pid, _ in membros]
    if all(marcas):
        return 'nosso', membros
    if any(m is False for m in marcas):
        return 'outro', membros
    return 'incerto', membros


def _anotar_grupo(
    arquivo_grupo: str,
    processo: subprocess.Popen[bytes],
    rotulo: str,
    argv: Sequence[str],
    marca: str,
    log: logging.Logger,
) -> None:
    """Anota o grupo que acabou de nascer; mantém os anotados que ainda são nossos e vivem."""
    dados = _stat(processo.pid)
    entrada: GrupoAnotado = {
        'pgid': processo.pid,
        'inicio': dados[2] if dados else None,
        'boot': _boot(),
        'marca': marca,
        'rotulo': rotulo,
        'comando': ' '.join(argv)[:MAXIMO_COMANDO],
        'desde': datetime.datetime.now().isoformat(timespec='seconds'),
        'ouvinte': os.getpid(),
    }
    try:
        try:
            anteriores = [
                g for g in _ler_grupos(arquivo_grupo) if _situacao(g)[0] in ('nosso', 'incerto')
            ]
        except ValueError:
            anteriores = []
        _gravar_grupos(arquivo_grupo, anteriores + [entrada])
    except OSError as erro:
        # Sem a anotacao a ferramenta roda assim mesmo; so a subida seguinte a
        # um kill -9 deixaria de acha-la (o PR_SET_PDEATHSIG continua valendo).
        log.error(
            '%s: não foi possível anotar o grupo %s em %s (%s: %s); se o ouvinte'
            ' morrer agora, a próxima subida não o encontra',
            rotulo,
            processo.pid,
            arquivo_grupo,
            type(erro).__name__,
            erro,
        )


def _soltar_grupo(arquivo_grupo: str, pgid: int, rotulo: str, log: logging.Logger) -> None:
    """Tira o grupo da anotação se ele acabou; se algum neto ainda vive, deixa anotado."""
    if _grupo_vivo(pgid):
        log.warning(
            '%s: saiu, mas o grupo %s ainda tem processo vivo (%s): continua'
            ' anotado em %s e será encerrado na próxima subida do ouvinte',
            rotulo,
            pgid,
            ', '.join(str(p) for p, _ in _membros(pgid)) or '?',
            arquivo_grupo,
        )
        return
    try:
        grupos = _ler_grupos(arquivo_grupo)
        _gravar_grupos(arquivo_grupo, [g for g in grupos if g['pgid'] != pgid])
    except (OSError, ValueError) as erro:
        log.warning('%s: não foi possível atualizar %s (%s)', rotulo, arquivo_grupo, erro)


def _encerrar_pgid(pgid: int, graca: float = GRACA_TERM) -> str:
    """SIGTERM no grupo, espera `graca`, SIGKILL no que sobrou. Devolve como acabou."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return 'já tinha acabado'
    fim = time.monotonic() + graca
    while time.monotonic() < fim:
        if not _grupo_vivo(pgid):
            return 'com SIGTERM'
        time.sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return 'com SIGTERM'
    fim = time.monotonic() + 2.0
    while _grupo_vivo(pgid) and time.monotonic() < fim:
        time.sleep(0.05)
    return 'com SIGKILL (ignorou o SIGTERM por %ss)' % graca


def encerrar_sobra(
    arquivo_grupo: str, log: logging.Logger | None = None, graca: float = GRACA_TERM
) -> int | None:
    """
    Na subida: encerra o grupo de ferramenta que um ouvinte anterior deixou vivo.

    Lê `arquivo_grupo` (o que `rodar(..., arquivo_grupo=...)` anota), encerra
    cada grupo anotado que ainda vive E e o mesmo (SIGTERM, `graca`, SIGKILL,
    como encerrar_grupo), diz no log qual era e apaga o arquivo. Um grupo que
    não é mais o mesmo (pid reciclado) não é tocado. Devolve o pgid do último
    grupo encerrado (o da ferramenta que estava em curso), ou None.
    """
    log = log or logger
    try:
        grupos = _ler_grupos(arquivo_grupo)
    except ValueError as erro:
        log.error(
            'arquivo de grupos %s ilegível (%s): apagado sem encerrar nada. Se o'
            ' ouvinte anterior morreu no meio de uma ferramenta, confira com'
            ' `ps -eo pid,pgid,lstart,cmd` se sobrou um connector.py ou'
            ' carregar_todas.sh',
            arquivo_grupo,
            erro,
        )
        grupos = []
    encerrado = None
    for entrada in grupos:
        pgid = int(entrada['pgid'])
        rotulo = entrada.get('rotulo') or '?'
        situacao, membros = _situacao(entrada)
        origem = 'a ferramenta %r do ouvinte pid %s (grupo %s, desde %s: %s)' % (
            rotulo,
            entrada.get('ouvinte', '?'),
            pgid,
            entrada.get('desde', '?'),
            entrada.get('comando', '?'),
        )
        if situacao == 'terminou':
            log.info('subida: %s já tinha terminado', origem)
            continue
        if situacao == 'outro':
            log.warning(
                'subida: %s não existe mais; o número %s agora e de outro programa'
                ' (pid reciclado) e não foi tocado',
                origem,
                pgid,
            )
            continue
        if situacao == 'incerto':
            log.error(
                'subida: %s ainda pode estar viva, mas não deu para provar que o grupo'
                ' %s e o mesmo; NÃO encerrado. Confira com `ps -o pid,lstart,cmd -g %s`'
                ' e encerre a mão (kill -TERM -- -%s)',
                origem,
                pgid,
                pgid,
                pgid,
            )
            continue
        log.error(
            '*** SOBRA DE UM OUVINTE ANTERIOR: %s continua rodando sem dono -- pids %s.'
            ' Encerrando o grupo antes de qualquer outra coisa (SIGTERM, depois'
            ' SIGKILL): uma carga órfã poderia mandar `complete` que ninguém'
            ' acompanha.',
            origem,
            '; '.join('%s (%s)' % (pid, _comando(pid)) for pid, _ in membros),
        )
        como = _encerrar_pgid(pgid, graca)
        log.warning('subida: grupo %s (%s) encerrado %s', pgid, rotulo, como)
        encerrado = pgid
    try:
        _gravar_grupos(arquivo_grupo, [])
    except OSError as erro:
        log.warning('não foi possível apagar %s (%s)', arquivo_grupo, erro)
    return encerrado


class _Linhas:
    """Linhas inteiras de um fluxo de bytes; \\r também fecha linha (barra do tqdm)."""

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


def rodar(
    argv: Sequence[str],
    rotulo: str,
    *,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    inatividade: float | None = None,
    deve_parar: Callable[[], bool] | None = None,
    ao_iniciar: Callable[[int], None] | None = None,
    pulso: Callable[[], None] | None = None,
    intervalo_pulso: float = 30.0,
    log: logging.Logger | None = None,
    arquivo_grupo: str | None = None,
) -> Resultado:
    """
    Roda `argv` e devolve um Resultado. Nunca levanta por causa do filho.

    `deve_parar()` e consultado a cada 0.25s: verdadeiro encerra o grupo (e o
    SIGTERM do ouvinte). `ao_iniciar(pid)` avisa quem mostra o status;
    `pulso()` e chamado a cada `intervalo_pulso` segundos enquanto roda, para o
    arquivo de status não envelhecer durante uma varredura de horas.
    `arquivo_grupo`: onde anotar o grupo enquanto ele vive (veja encerrar_sobra).
    """
    global _em_curso
    log = log or logger
    inicio = time.monotonic()
    log.info('$ %s', ' '.join(argv))
    marca = uuid.uuid4().hex
    try:
        processo = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=_ambiente_do_filho(env, marca if arquivo_grupo else None),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_preparo_do_filho(),
        )
    except OSError as erro:
        log.error('%s: não foi possível executar (%s: %s)', rotulo, type(erro).__name__, erro)
        return Resultado(CODIGO_NAO_EXECUTOU, Motivo.NAO_EXECUTOU)

    _em_curso = processo
    try:
        if arquivo_grupo:
            _anotar_grupo(arquivo_grupo, processo, rotulo, argv, marca, log)
        if ao_iniciar:
            ao_iniciar(processo.pid)
        motivo = _bombear(
            processo, rotulo, log, inicio, timeout, inatividade, deve_parar, pulso, intervalo_pulso
        )
    except BaseException:
        # Qualquer saida por excecao (parada fria, bug aqui): o grupo nao fica
        # rodando sem dono.
        if processo.poll() is None or _grupo_vivo(processo.pid):
            encerrar_grupo(processo, graca=1.0)
        if arquivo_grupo:
            _soltar_grupo(arquivo_grupo, processo.pid, rotulo, log)
        raise
    finally:
        _em_curso = None

    codigo = processo.wait()
    if arquivo_grupo:
        _soltar_grupo(arquivo_grupo, processo.pid, rotulo, log)
    resultado = _resultado(codigo, motivo, time.monotonic() - inicio)
    if resultado.ok:
        log.info('%s: terminou bem em %.1fs', rotulo, resultado.duracao)
    else:
        log.error('%s: %s', rotulo, resultado.descrever())
    return resultado


def _ambiente_do_filho(env: dict[str, str] | None, marca: str | None) -> dict[str, str]:
    """O ambiente do filho: `env` (ou o nosso), sem buffer na saída, e a marca do grupo."""
    ambiente = dict(env if env is not None else os.environ)
    # Sem isto o Python do filho acumula a saida num buffer de 8 KB quando ela
    # vai para um pipe: o log so veria as linhas no fim, e o vigia de
    # inatividade mataria uma carga saudavel que so estava "calada".
    ambiente['PYTHONUNBUFFERED'] = '1'
    if marca is not None:
        # Herdada por todo neto: e o que prova, depois, que o grupo e nosso.
        ambiente[VARIAVEL_MARCA] = marca
    return ambiente


def _resultado(codigo: int, motivo: Motivo | None, duracao: float) -> Resultado:
    """O código de saída do filho como o supervisor o diz: sinal em 128+n, tempo esgotado."""
    sinal = None
    if codigo < 0:
        sinal = _nome_sinal(-codigo)
        codigo = 128 - codigo
    if motivo in (Motivo.TEMPO, Motivo.INATIVIDADE):
        codigo = CODIGO_TEMPO
    elif motivo is None:
        motivo = Motivo.OK if codigo == 0 else Motivo.FALHOU
    return Resultado(codigo, motivo, sinal, duracao)


def _motivo_para_encerrar(
    processo: subprocess.Popen[bytes],
    rotulo: str,
    log: logging.Logger,
    rodando: float,
    calado: float,
    timeout: float | None,
    inatividade: float | None,
    deve_parar: Callable[[], bool] | None,
) -> Motivo | None:
    """Os vigias, nesta ordem: a parada pedida, o tempo total, o silêncio. Diz no log."""
    if deve_parar and deve_parar():
        log.warning(
            '%s: parada pedida -- encerrando o grupo %s (SIGTERM, depois SIGKILL)',
            rotulo,
            processo.pid,
        )
        return Motivo.PARADA
    if timeout and rodando >= timeout:
        log.error('%s: passou de %ss (--timeout-ferramenta); encerrando o grupo', rotulo, timeout)
        return Motivo.TEMPO
    if inatividade and calado >= inatividade:
        log.error(
            '%s: %ss sem nenhuma linha de saída (--inatividade-ferramenta); encerrando o grupo',
            rotulo,
            inatividade,
        )
        return Motivo.INATIVIDADE
    return None


def _bombear(
    processo: subprocess.Popen[bytes],
    rotulo: str,
    log: logging.Logger,
    inicio: float,
    timeout: float | None,
    inatividade: float | None,
    deve_parar: Callable[[], bool] | None,
    pulso: Callable[[], None] | None,
    intervalo_pulso: float,
) -> Motivo | None:
    """Lê a saída ao chegar; devolve o motivo de encerramento forcado, ou None."""

    def emitir(bruta: bytes) -> None:
        texto = bruta.decode('utf-8', 'replace').rstrip()
        if texto:
            log.info('  %s | %s', rotulo, texto[:MAXIMO_LINHA])

    saida = processo.stdout
    if saida is None:  # pragma: no cover - rodar() sempre pede PIPE
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
                motivo = _motivo_para_encerrar(
                    processo,
                    rotulo,
                    log,
                    agora - inicio,
                    agora - ultima_saida,
                    timeout,
                    inatividade,
                    deve_parar,
                )
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
                    log.warning(
                        '%s: saiu, mas algum processo filho ainda segura a saída dela; paro de ler',
                        rotulo,
                    )
                    break
    finally:
        leitor.fechar()
        seletor.close()
        saida.close()
    return motivo
