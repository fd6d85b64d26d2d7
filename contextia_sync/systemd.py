"""
O ouvinte sob o systemd: o aviso de prontidao, o status, o vigia e o journal.

Só biblioteca padrão (socket, os, struct, fcntl): importa num `python3 -S`
sem pacote nenhum, como o `--autoteste` exige. Nada daqui levanta -- um aviso
que não chegou ao systemd nunca para o serviço: a falha vai ao log uma vez
(e de novo só depois que voltar a funcionar e cair outra vez).

O aviso (sd_notify(3)), um datagrama AF_UNIX para $NOTIFY_SOCKET:

    pronto()            READY=1, uma vez, quando o preparo terminou
    status(*partes)     STATUS=<uma linha>, o que `systemctl status` mostra
    vigia()             WATCHDOG=1 (só com WatchdogSec= na unit), no máximo
                        uma vez por segundo; chame de todo lugar que prova que
                        o laço anda
    vigiando(função)    `funcao` (o "parar?" do ouvinte) que também chama vigia():
                        o ouvinte pergunta "parar?" entre datasets, entre
                        empresas, nas esperas do transporte e a cada 0,25 s
                        enquanto uma ferramenta roda
    parando(texto)      STOPPING=1, uma vez, quando a parada começou; daí em
                        diante todo status() sai com 'parando; ' na frente

Sem NOTIFY_SOCKET (cron, terminal, testes) tudo isso não faz nada. A primeira
chamada lê NOTIFY_SOCKET, WATCHDOG_USEC e WATCHDOG_PID e os TIRA de
`os.environ` (o `unset_environment` do sd_notify): as ferramentas filhas
(provisionar, connector, carregar-todas.sh) não herdam o canal. A unit também
diz `NotifyAccess=main`; são as duas redes.

O journal (systemd.exec(5), JOURNAL_STREAM): quando a stderr do processo E o
fluxo que o systemd ligou ao journal (o `dispositivo:inode` de JOURNAL_STREAM
confere com o da stderr -- uma ferramenta filha herda a variável, mas a stderr
dela e o pipe do supervisor, e não confere), `manipulador_journal()` devolve um
logging.Handler que manda cada registro ao socket nativo do journald
(/run/systemd/journal/socket): um registro, uma entrada, com PRIORITY, o
traceback inteiro dentro de MESSAGE e CODE_FILE/CODE_LINE/CODE_FUNC. Mensagem
maior que um datagrama vai num memfd selado, como o sd_journal_send faz. Se o
socket nativo não responde, o mesmo registro vai para a stderr com o prefixo
`<N>` de prioridade e as quebras de linha dobradas em `\\n`: continua uma
entrada só, com a prioridade certa.
"""

from __future__ import annotations

import array
import errno
import logging
import os
import re
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterable, MutableMapping
from typing import IO, TypeVar

T = TypeVar('T')

# -- o aviso ------------------------------------------------------------------
VARIAVEIS_AVISO = ('NOTIFY_SOCKET', 'WATCHDOG_USEC', 'WATCHDOG_PID')
# O vigia manda no maximo um WATCHDOG=1 por este intervalo (ou por metade do
# WatchdogSec, se for menor). NAO e o "metade do intervalo" do sd_watchdog_enabled(3):
# aquilo e para quem pinga por um relogio proprio. Aqui o ping sai de pontos de
# progresso; limitar a WatchdogSec/2 comeria metade do prazo da unit.
MINIMO_ENTRE_VIGIAS = 1.0
MAXIMO_STATUS = 400
PRAZO_ENVIO = 2.0

# -- o journal ----------------------------------------------------------------
SOCKET_JOURNAL = '/run/systemd/journal/socket'
# Para os testes apontarem o socket nativo para um socket deles; nenhum outro uso.
VARIAVEL_SOCKET_TESTE = 'CONTEXTIA_TESTE_SOCKET_JOURNAL'
FORMATO_JOURNAL = '[%(levelname).1s] %(message)s'
# Depois de o socket nativo falhar, quanto tempo os registros vao pela stderr
# antes de tentar o socket de novo (journald reiniciado volta sozinho).
PAUSA_NATIVO = 60.0
BUFFER_ENVIO = 8 * 1024 * 1024
# <linux/fcntl.h>: F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE
SELOS_MEMFD = 0x0001 | 0x0002 | 0x0004 | 0x0008


def _log() -> logging.Logger:
    # O mesmo logger do registro.py, sem importa-lo (ele importa este modulo).
    return logging.getLogger('contextia')


def _endereco(bruto: str | None) -> str | None:
    """$NOTIFY_SOCKET como endereço de socket: caminho, ou '@nome' (abstrato)."""
    if not bruto:
        return None
    if bruto.startswith('/'):
        return bruto
    if bruto.startswith('@') and len(bruto) > 1:
        return '\0' + bruto[1:]
    return None


def _linha(partes: Iterable[str | None]) -> str:
    """Uma linha só, sem os pontos de alinhamento do status em arquivo."""
    juntas = '; '.join(p.strip() for p in partes if p and p.strip())
    juntas = re.sub(r'\s*\.{2,}\s*:', ':', juntas)
    juntas = re.sub(r'\s+', ' ', juntas).strip()
    if len(juntas) > MAXIMO_STATUS:
        juntas = juntas[: MAXIMO_STATUS - 3] + '...'
    return juntas


class Notificador:
    """
    O canal com o systemd de UM processo. `ambiente` (padrão os.environ) e lido
    na construção e, com `limpar`, perde as três variáveis do aviso.
    """

    def __init__(
        self, ambiente: MutableMapping[str, str] | None = None, limpar: bool = True
    ) -> None:
        amb: MutableMapping[str, str] = os.environ if ambiente is None else ambiente
        bruto = amb.get('NOTIFY_SOCKET') or None
        usec, pid = amb.get('WATCHDOG_USEC'), amb.get('WATCHDOG_PID')
        if limpar:
            for nome in VARIAVEIS_AVISO:
                amb.pop(nome, None)
        self._pid = os.getpid()
        self.endereco = _endereco(bruto)
        self._sem_suporte = bruto if bruto and self.endereco is None else None
        self.intervalo_vigia: float | None = None
        if (
            self.endereco
            and usec
            and usec.isdigit()
            and int(usec) > 0
            and (not pid or (pid.isdigit() and int(pid) == self._pid))
        ):
            self.intervalo_vigia = int(usec) / 1e6
        self._socket: socket.socket | None = None
        self._falhando = False
        self._ultima_vigia: float | None = None
        self._parando = False

    @property
    def ativo(self) -> bool:
        return self.endereco is not None and os.getpid() == self._pid

    def enviar(self, *atribuicoes: str) -> bool:
        """Manda `CHAVE=valor` (uma por linha) num datagrama. Nunca levanta."""
        if self._sem_suporte is not None:
            _log().warning(
                'NOTIFY_SOCKET=%r: endereço que este ouvinte não sabe usar'
                ' (só caminho ou @abstrato); o systemd não recebe os avisos',
                self._sem_suporte,
            )
            self._sem_suporte = None
            return False
        endereco = self.endereco
        if endereco is None or not self.ativo or not atribuicoes:
            return False
        dados = '\n'.join(atribuicoes).encode('utf-8', 'replace')
        try:
            if self._socket is None:
                self._socket = socket.socket(
                    socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC
                )
                self._socket.settimeout(PRAZO_ENVIO)
            self._socket.sendto(dados, endereco)
        except Exception as erro:  # noqa: BLE001 - o aviso nunca derruba o servico
            self._fechar()
            if not self._falhando:
                self._falhando = True
                _log().warning(
                    'aviso ao systemd falhou (%s: %s) em %s; o serviço segue,'
                    ' mas sem READY/WATCHDOG o systemd pode reinicia-lo. Próximas'
                    ' falhas não vão ao log.',
                    type(erro).__name__,
                    erro,
                    endereco.replace('\0', '@'),
                )
            return False
        if self._falhando:
            self._falhando = False
            _log().info('aviso ao systemd voltou a funcionar')
        return True

    def _fechar(self) -> None:
        _fechar_socket(self._socket)
        self._socket = None

    def pronto(self, texto: str | None = None) -> bool:
        linhas = ['READY=1']
        if texto:
            linhas.append('STATUS=' + _linha([texto]))
        if self.intervalo_vigia:
            linhas.append('WATCHDOG=1')
            self._ultima_vigia = time.monotonic()
        return self.enviar(*linhas)

    def status(self, *partes: str | None) -> bool:
        linha = _linha(partes)
        if linha and self._parando and not linha.startswith('parando'):
            # O pulso do status segue durante a parada: nao pode parecer normal.
            linha = _linha(['parando', linha])
        return self.enviar('STATUS=' + linha) if linha else False

    def vigia(self) -> bool:
        if not self.intervalo_vigia or not self.ativo:
            return False
        agora = time.monotonic()
        minimo = min(MINIMO_ENTRE_VIGIAS, self.intervalo_vigia / 2)
        if self._ultima_vigia is not None and agora - self._ultima_vigia < minimo:
            return False
        self._ultima_vigia = agora
        return self.enviar('WATCHDOG=1')

    def parando(self, texto: str | None = None) -> bool:
        linhas = [] if self._parando else ['STOPPING=1']
        self._parando = True
        if texto:
            linhas.append('STATUS=' + _linha([texto]))
        return self.enviar(*linhas) if linhas else False


_notificador: Notificador | None = None


def notificador() -> Notificador:
    """O canal deste processo, criado (e o ambiente limpo) na primeira chamada."""
    global _notificador
    if _notificador is None or _notificador._pid != os.getpid():
        _notificador = Notificador()
    return _notificador


def sob_systemd() -> bool:
    """Há um NOTIFY_SOCKET para avisar (Type=notify)?"""
    return notificador().ativo


def intervalo_vigia() -> float | None:
    """WatchdogSec= da unit em segundos, ou None se o vigia está desligado."""
    return notificador().intervalo_vigia


def pronto(texto: str | None = None) -> bool:
    """READY=1 (e STATUS=texto): o preparo terminou, o serviço esta de pe."""
    return notificador().pronto(texto)


def status(*partes: str | None) -> bool:
    """STATUS=<as partes numa linha só, separadas por '; '>. Partes vazias somem."""
    return notificador().status(*partes)


def vigia() -> bool:
    """WATCHDOG=1, no máximo uma vez por segundo; nada sem WatchdogSec na unit."""
    return notificador().vigia()


def parando(texto: str | None = None) -> bool:
    """STOPPING=1 (só na primeira chamada) e STATUS=texto."""
    return notificador().parando(texto)


def vigiando(funcao: Callable[[], T]) -> Callable[[], T]:
    """`funcao` que, antes de responder, chama vigia(): para o "parar?" do ouvinte."""

    def com_vigia() -> T:
        vigia()
        return funcao()

    return com_vigia


# -- o journal ----------------------------------------------------------------


def prioridade(nivel: int) -> int:
    """Nível do logging -> prioridade do syslog (a do `journalctl -p`)."""
    if nivel >= logging.CRITICAL:
        return 2
    if nivel >= logging.ERROR:
        return 3
    if nivel >= logging.WARNING:
        return 4
    if nivel >= logging.INFO:
        return 6
    return 7


def fluxo_do_journal(fluxo: IO[str] | None = None, valor: str | None = None) -> bool:
    """A `fluxo` (padrão: stderr) e o fluxo que JOURNAL_STREAM descreve?"""
    valor = os.environ.get('JOURNAL_STREAM') if valor is None else valor
    fluxo = sys.stderr if fluxo is None else fluxo
    if not valor or fluxo is None:
        return False
    dispositivo, _, inode = valor.partition(':')
    try:
        info = os.fstat(fluxo.fileno())
        return (info.st_dev, info.st_ino) == (int(dispositivo), int(inode))
    except (OSError, ValueError, AttributeError):
        return False


def _campo(nome: str, valor: str) -> bytes:
    """Um campo do protocolo nativo: NOME=valor, ou NOME\\n<tamanho LE64><valor> se há \\n."""
    dados = valor.encode('utf-8', 'replace')
    if b'\n' not in dados:
        return nome.encode('ascii') + b'=' + dados + b'\n'
    return nome.encode('ascii') + b'\n' + struct.pack('<Q', len(dados)) + dados + b'\n'


def entrada_nativa(campos: Iterable[tuple[str, str]]) -> bytes:
    """O datagrama do protocolo nativo do journald com estes campos."""
    return b''.join(_campo(nome, valor) for nome, valor in campos)


def ler_entrada_nativa(dados: bytes) -> dict[str, str]:
    """O inverso de entrada_nativa (para os testes e para quem depura)."""
    campos: dict[str, str] = {}
    posicao = 0
    while posicao < len(dados):
        quebra = dados.find(b'\n', posicao)
        quebra = len(dados) if quebra < 0 else quebra
        igual = dados.find(b'=', posicao, quebra)
        if igual >= 0:
            campos[dados[posicao:igual].decode('ascii')] = dados[igual + 1 : quebra].decode(
                'utf-8', 'replace'
            )
            posicao = quebra + 1
            continue
        nome = dados[posicao:quebra].decode('ascii')
        (tamanho,) = struct.unpack('<Q', dados[quebra + 1 : quebra + 9])
        inicio = quebra + 9
        campos[nome] = dados[inicio : inicio + tamanho].decode('utf-8', 'replace')
        posicao = inicio + tamanho + 1
    return campos


def _identificador() -> str:
    nome = os.path.basename(sys.argv[0] if sys.argv and sys.argv[0] else '')
    if nome.endswith('.py'):
        nome = nome[:-3]
    return nome if nome and nome not in ('-c', '-m', '__main__') else 'contextia'


class ManipuladorJournal(logging.Handler):
    """
    Cada registro, uma entrada do journal: pelo socket nativo, ou -- se ele não
    responde -- pela `fluxo` com o prefixo `<N>` e as quebras dobradas.
    """

    def __init__(
        self,
        fluxo: IO[str],
        socket_journal: str | None = SOCKET_JOURNAL,
        identificador: str | None = None,
    ) -> None:
        super().__init__()
        self.fluxo = fluxo
        self.socket_journal = socket_journal
        self.identificador = identificador or _identificador()
        self._socket: socket.socket | None = None
        self._nativo_depois_de = 0.0
        self._avisado = False
        self.setFormatter(logging.Formatter(FORMATO_JOURNAL))

    # -- o socket nativo
    def _abrir(self) -> socket.socket:
        if self._socket is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER_ENVIO)
            except OSError:
                pass
            s.settimeout(PRAZO_ENVIO)
            self._socket = s
        return self._socket

    def _fechar(self) -> None:
        _fechar_socket(self._socket)
        self._socket = None

    def _por_memfd(self, s: socket.socket, dados: bytes) -> None:
        """Entrada grande demais para um datagrama: num memfd selado, como o sd_journal."""
        import fcntl

        fd = os.memfd_create('contextia-journal', os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            vista = memoryview(dados)
            while vista:
                escritos = os.write(fd, vista)
                vista = vista[escritos:]
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, SELOS_MEMFD)
            s.sendmsg(
                [],
                [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array('i', [fd]))],
                0,
                self.socket_journal,
            )
        finally:
            os.close(fd)

    def _nativo(self, registro: logging.LogRecord, mensagem: str) -> bool:
        if not self.socket_journal or time.monotonic() < self._nativo_depois_de:
            return False
        campos = [
            ('MESSAGE', mensagem),
            ('PRIORITY', str(prioridade(registro.levelno))),
            ('SYSLOG_IDENTIFIER', self.identificador),
            ('CODE_FILE', registro.pathname),
            ('CODE_LINE', str(registro.lineno)),
            ('CODE_FUNC', registro.funcName),
            ('LOGGER', registro.name),
        ]
        if registro.exc_info and registro.exc_info[0] is not None:
            campos.append(('EXCEPTION', registro.exc_info[0].__name__))
        dados = entrada_nativa(campos)
        try:
            s = self._abrir()
            try:
                s.sendto(dados, self.socket_journal)
            except OSError as erro:
                if erro.errno not in (errno.EMSGSIZE, errno.ENOBUFS):
                    raise
                self._por_memfd(s, dados)
        except Exception as erro:  # noqa: BLE001 - o log nunca derruba o servico
            self._fechar()
            self._nativo_depois_de = time.monotonic() + PAUSA_NATIVO
            if not self._avisado:
                self._avisado = True
                self._escrever(
                    4,
                    'journal nativo (%s) falhou: %s: %s; os registros seguem'
                    ' pela stderr, com a prioridade no prefixo, e o socket e'
                    ' tentado de novo a cada %ss'
                    % (self.socket_journal, type(erro).__name__, erro, int(PAUSA_NATIVO)),
                )
            return False
        self._avisado = False
        return True

    # -- a stderr com prefixo
    def _escrever(self, prio: int, mensagem: str) -> None:
        dobrada = mensagem.rstrip('\n').replace('\r\n', '\n').replace('\n', '\\n')
        self.fluxo.write('<%d>%s\n' % (prio, dobrada))
        self.fluxo.flush()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            mensagem = self.format(record)
            if not self._nativo(record, mensagem):
                self._escrever(prioridade(record.levelno), mensagem)
        except RecursionError:  # pragma: no cover - como o StreamHandler
            raise
        except Exception:  # noqa: BLE001 - como o StreamHandler
            self.handleError(record)

    def close(self) -> None:
        self._fechar()
        super().close()


def manipulador_journal(
    fluxo: IO[str] | None = None, ambiente: MutableMapping[str, str] | None = None
) -> ManipuladorJournal | None:
    """
    O handler do journal, se a `fluxo` (padrão: stderr) e o fluxo do journal;
    senão None (terminal, cron, arquivo, ferramenta filha: log como sempre).
    """
    amb: MutableMapping[str, str] = os.environ if ambiente is None else ambiente
    fluxo = sys.stderr if fluxo is None else fluxo
    if not fluxo_do_journal(fluxo, amb.get('JOURNAL_STREAM') or ''):
        return None
    return ManipuladorJournal(fluxo, amb.get(VARIAVEL_SOCKET_TESTE) or SOCKET_JOURNAL)


def _fechar_socket(s: socket.socket | None) -> None:
    """Fecha um socket sem levantar (o aviso nunca derruba o serviço)."""
    if s is not None:
        try:
            s.close()
        except OSError:
            pass
