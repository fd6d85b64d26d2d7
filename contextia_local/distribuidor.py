"""
O Contextia local em vários processos (`--processos N`): um distribuidor de
conexões e N processos que servem a mesma pasta.

Por quê: um processo Python usa um núcleo (o GIL). Num registro, ler o JSON do
lote, escrever o canônico e o HTTP custam ~2/3; só a gravação no SQLite é de um
escritor por vez (a trava de escrita do `Banco`, entre processos). Com dois
processos, 4 lotes em voo gravam ~1,6× o que um grava (README, "Desempenho da
carga completa").

Como: este processo (o principal) abre a porta, aceita cada conexão e a
entrega, em rodízio, a um filho por um socket Unix (SCM_RIGHTS); o filho a
serve com o uvicorn de sempre. Por que não o accept dividido (o `--workers` do
uvicorn, o gunicorn): o laço do asyncio aceita de uma vez todas as conexões
que acharem pendentes, e as 4 conexões de um cliente com 4 lotes em voo caíam
às vezes todas no mesmo filho -- medido: 116 mil registros/s num processo só,
169 mil quando se dividiam. No rodízio elas se dividem sempre (2 e 2).

Quem para o principal (SIGTERM, Ctrl-C) para os filhos; um filho que morre
derruba o servidor inteiro, dito no log e com saída 1 (um servidor que segue
com menos processos, calado, seria um ensaio de carga que mente); o principal
morto por SIGKILL leva os filhos junto (PR_SET_PDEATHSIG no Linux; noutro
sistema, cada filho vigia o principal a cada segundo). A injeção de falhas
guarda o que injetar na memória de um processo: com ela, um processo só
(`__main__` recusa a combinação).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import selectors
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType

ESPERA_DOS_FILHOS = 4.0
"""Segundos que o principal espera os filhos saírem depois do SIGTERM (depois,
SIGKILL): menos que os 5 s que o `ServidorLocal.parar` dá ao principal."""

_PR_SET_PDEATHSIG = 1


def suportado() -> str | None:
    """None se este sistema pode servir em vários processos; senão, o porquê."""
    if not hasattr(os, 'fork') or not hasattr(socket, 'send_fds'):
        return (
            'este sistema não tem fork e SCM_RIGHTS (os.fork, socket.send_fds): use --processos 1.'
        )
    return None


class _ConexoesEntregues(socket.socket):
    """
    O lado do filho do canal com o principal, visto pelo asyncio como a porta
    de escuta: cada `accept` recebe uma conexão que o principal aceitou.
    """

    def listen(self, backlog: int = 0) -> None:  # noqa: ARG002
        # O asyncio chama listen() na porta que vai servir; a fila de conexões
        # de verdade é a da porta do principal.
        return None

    def accept(self) -> tuple[socket.socket, object]:
        _, descritores, _, _ = socket.recv_fds(self, 1, 1)
        if not descritores:
            # O principal fechou o canal: ele está saindo. O SIGTERM para o
            # uvicorn como sempre; até lá o asyncio lê isto como "nada pendente".
            os.kill(os.getpid(), signal.SIGTERM)
            raise ConnectionAbortedError('o distribuidor fechou o canal')
        conexao = socket.socket(fileno=descritores[0])
        return conexao, conexao.getpeername()


def servir(
    porta: socket.socket,
    processos: int,
    servir_filho: Callable[[socket.socket], None],
    vigiar_pai: Callable[[], None] | None = None,
) -> int:
    """
    Serve `porta` (já aberta) em `processos` filhos. `servir_filho(canal)` roda
    em cada filho depois do fork e serve as conexões de `canal` até o SIGTERM.
    `vigiar_pai`, se houver, roda numa thread do principal (depois dos forks:
    fork com threads vivas herda travas tomadas). Devolve o código de saída.
    """
    filhos: dict[int, socket.socket] = {}
    principal = os.getpid()
    for numero in range(processos):
        meu, do_filho = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:  # o filho nunca volta ao código do principal
            meu.close()
            porta.close()
            for canal in filhos.values():
                canal.close()
            os._exit(
                _rodar_filho(
                    principal,
                    numero + 1,
                    processos,
                    servir_filho,
                    _ConexoesEntregues(fileno=do_filho.detach()),
                )
            )
        do_filho.close()
        filhos[pid] = meu
    if vigiar_pai is not None:
        threading.Thread(target=vigiar_pai, daemon=True).start()
    return _distribuir(porta, filhos)


def _rodar_filho(
    principal: int,
    numero: int,
    processos: int,
    servir_filho: Callable[[socket.socket], None],
    canal: socket.socket,
) -> int:
    try:
        _morrer_com(principal)
        servir_filho(canal)
    except BaseException as erro:  # noqa: BLE001
        # Nada pode subir daqui: o resto da pilha é a do principal.
        print(
            'Contextia local: o processo %d de %d caiu: %r' % (numero, processos, erro),
            file=sys.stderr,
            flush=True,
        )
        return 1
    return 0


def _distribuir(porta: socket.socket, filhos: dict[int, socket.socket]) -> int:
    """O laço do principal: aceita e entrega em rodízio até um sinal ou a morte de um filho."""
    leitura, escrita = os.pipe()
    os.set_blocking(escrita, False)
    parar = threading.Event()
    anteriores = {}

    def ao_sinal(numero: int, quadro: FrameType | None) -> None:  # noqa: ARG001
        if numero != signal.SIGCHLD:
            parar.set()

    for numero in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
        anteriores[numero] = signal.signal(numero, ao_sinal)
    antiga_fd = signal.set_wakeup_fd(escrita)
    porta.setblocking(False)
    seletor = selectors.DefaultSelector()
    seletor.register(porta, selectors.EVENT_READ)
    seletor.register(leitura, selectors.EVENT_READ)
    canais = list(filhos.values())
    vez = 0
    saida = 0
    try:
        while not parar.is_set():
            morto = _filho_que_saiu(filhos)
            if morto is not None:
                pid, como = morto
                print(
                    'Contextia local: o processo %d saiu (%s); o servidor para inteiro'
                    ' (com menos processos ele mediria menos do que diz). Se ele disse'
                    ' o erro, está acima; morto por sinal sem dizer nada (9: o OOM'
                    ' killer do kernel? veja o dmesg), suba de novo com menos'
                    ' --processos.' % (pid, como),
                    file=sys.stderr,
                    flush=True,
                )
                saida = 1
                break
            for chave, _ in seletor.select():
                if chave.fileobj is not porta:
                    os.read(leitura, 512)  # o sinal já foi tratado acima
                    continue
                try:
                    conexao, _ = porta.accept()
                except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                    continue
                with conexao:
                    try:
                        socket.send_fds(canais[vez % len(canais)], [b'c'], [conexao.fileno()])
                    except OSError:
                        # O filho acabou de morrer: o SIGCHLD o trata na volta.
                        pass
                vez += 1
    finally:
        signal.set_wakeup_fd(antiga_fd)
        for numero, tratador in anteriores.items():
            signal.signal(numero, tratador)
        seletor.close()
        porta.close()
        _parar_filhos(filhos)
        os.close(leitura)
        os.close(escrita)
    return saida


def _colher(pid: int) -> int | None:
    """O status de saída do filho `pid` se ele já saiu (e o colhe), senão None."""
    try:
        pid_saiu, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # já colhido: saiu
        return 0
    return status if pid_saiu else None


def _filho_que_saiu(filhos: dict[int, socket.socket]) -> tuple[int, str] | None:
    """(pid, como saiu) do primeiro filho que saiu, tirado de `filhos`; None se todos vivem."""
    for pid in list(filhos):
        status = _colher(pid)
        if status is not None:
            filhos.pop(pid).close()
            if os.WIFSIGNALED(status):
                return pid, 'morto pelo sinal %d' % os.WTERMSIG(status)
            return pid, 'código %d' % os.waitstatus_to_exitcode(status)
    return None


def _parar_filhos(filhos: dict[int, socket.socket]) -> None:
    """SIGTERM a cada filho vivo, espera até ESPERA_DOS_FILHOS, depois SIGKILL."""
    for pid, canal in filhos.items():
        canal.close()
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    prazo = time.monotonic() + ESPERA_DOS_FILHOS
    pendentes = set(filhos)
    while pendentes and time.monotonic() < prazo:
        pendentes = {pid for pid in pendentes if _colher(pid) is None}
        time.sleep(0.05)
    for pid in pendentes:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def _morrer_com(principal: int) -> None:
    """O filho morre quando o principal morre, mesmo por SIGKILL."""
    libc = ctypes.util.find_library('c') if sys.platform.startswith('linux') else None
    if libc is not None:
        ctypes.CDLL(libc, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        # O principal pode ter morrido antes do prctl: aí o pai já é outro.
        if os.getppid() != principal:
            os._exit(1)
        return

    def vigiar() -> None:
        while os.getppid() == principal:
            time.sleep(1)
        os._exit(1)

    threading.Thread(target=vigiar, daemon=True).start()
