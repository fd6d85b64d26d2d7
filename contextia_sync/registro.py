"""
O logger do SDK: logzero quando instalado, `logging` puro quando não -- e o
journal, quando a stderr e o journal.

O substituto existe por causa do `--autoteste`, que roda num `python3 -S` sem
pacote nenhum, na máquina de quem escreve o mapeamento. Com o logzero
instalado (o normal) nada daqui e usado além de `logger` e `arquivo_de_log`.

Sob o systemd (JOURNAL_STREAM confere com a stderr deste processo) a saída
padrão do logger vira `systemd.ManipuladorJournal`: cada registro uma entrada
do journal, com a prioridade (`journalctl -u ouvinte -p warning`) e o
traceback dentro da mesma entrada. O arquivo de `--log` continua igual. Uma
ferramenta filha herda JOURNAL_STREAM, mas a stderr dela e o pipe do
supervisor: ela loga como sempre, e o ouvinte põe cada linha no journal.
"""

import logging
import numbers
import traceback
from collections.abc import Mapping
from types import TracebackType

from contextia_sync import systemd

FORMATO = '[%(levelname).1s %(asctime)s] %(message)s'
# A data de toda linha de log, na tela e no arquivo: ISO, como o status e o
# historico a escrevem (o padrao do logzero, '%y%m%d', dava '261201').
FORMATO_DATA = '%Y-%m-%d %H:%M:%S'

# Escapes com nome; o resto dos invisiveis vira \xNN, \uNNNN ou \UNNNNNNNN.
_ESCAPES = {'\n': '\\n', '\r': '\\r', '\t': '\\t'}


def limpo(texto: str) -> str:
    """
    `texto` numa linha só: controles e invisíveis escapados como no Python.

    Valor que veio de fora (o código de uma empresa, um campo da origem, o texto
    de um erro do driver ou do servidor) com uma quebra de linha forjaria uma
    linha de log inteira (`NOVA\n[E ...] mentira`); com um CR ou um ESC, a
    linha que o terminal mostra. Letras acentuadas e o resto do que se vê ficam
    como estão. Caminho rápido: texto já imprimível volta sem copia.
    """
    if texto.isprintable():
        return texto
    return ''.join(c if c.isprintable() else _escapar(c) for c in texto)


def _escapar(caractere: str) -> str:
    if caractere in _ESCAPES:
        return _ESCAPES[caractere]
    codigo = ord(caractere)
    if codigo < 0x100:
        return '\\x%02x' % codigo
    if codigo < 0x10000:
        return '\\u%04x' % codigo
    return '\\U%08x' % codigo


class _Limpo:
    """Um argumento de log que se formata limpo (`%s` e `%r`), na hora de formatar."""

    __slots__ = ('valor',)

    def __init__(self, valor: object) -> None:
        self.valor = valor

    def __str__(self) -> str:
        return limpo(str(self.valor))

    def __repr__(self) -> str:
        return limpo(repr(self.valor))


def _argumento_limpo(valor: object) -> object:
    # Numero fica numero: `%d`, `%.1f` e `%x` precisam dele.
    if valor is None or isinstance(valor, (numbers.Number, _Limpo)):
        return valor
    return _Limpo(valor)


class FiltroLimpo(logging.Filter):
    """
    O lugar único onde valor de fora deixa de quebrar linha de log: cada
    argumento de cada registro do logger do SDK sai por `limpo`, e o texto da
    exceção de um `logger.exception` também. A mensagem (o formato, escrito no
    código) fica como está: as quebras de linha que o SDK põe de propósito
    continuam.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        argumentos = record.args
        if isinstance(argumentos, tuple):
            record.args = tuple(_argumento_limpo(a) for a in argumentos)
        elif isinstance(argumentos, Mapping):
            record.args = {k: _argumento_limpo(v) for k, v in argumentos.items()}
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            # O Formatter usa exc_text quando ja existe: o traceback sai com as
            # linhas dele, e a mensagem da excecao (que pode trazer um valor da
            # origem) numa linha so.
            record.exc_text = _traceback_limpo(record.exc_info[1])
        return True


def _traceback_limpo(excecao: BaseException, vistas: set[int] | None = None) -> str:
    """O traceback de `excecao` (com a cadeia), a mensagem de cada uma por `limpo`."""
    vistas = set() if vistas is None else vistas
    vistas.add(id(excecao))
    partes: list[str] = []
    causa, contexto = excecao.__cause__, excecao.__context__
    if causa is not None and id(causa) not in vistas:
        partes += [
            _traceback_limpo(causa, vistas),
            '\n\nThe above exception was the direct cause of the following exception:\n\n',
        ]
    elif contexto is not None and not excecao.__suppress_context__ and id(contexto) not in vistas:
        partes += [
            _traceback_limpo(contexto, vistas),
            '\n\nDuring handling of the above exception, another exception occurred:\n\n',
        ]
    quadro: TracebackType | None = excecao.__traceback__
    if quadro is not None:
        partes.append('Traceback (most recent call last):\n')
        partes.extend(traceback.format_tb(quadro))
    so_a_excecao = traceback.format_exception_only(type(excecao), excecao)
    partes.append(limpo(''.join(so_a_excecao).rstrip('\n')))
    return ''.join(partes)


FILTRO = FiltroLimpo()

try:
    import logzero as _logzero
except ImportError:  # pragma: no cover - so no autoteste
    _logzero = None

_journal = systemd.manipulador_journal()

if _journal is not None:
    logger = logging.getLogger('contextia')
    for _velho in list(logger.handlers):
        logger.removeHandler(_velho)
    logger.addHandler(_journal)
    logger.setLevel(logging.INFO)
    logger.propagate = False
elif _logzero is not None:
    logger = _logzero.setup_logger(
        name='contextia', level=logging.INFO, formatter=_logzero.LogFormatter(datefmt=FORMATO_DATA)
    )
else:
    logger = logging.getLogger('contextia')
    if not logger.handlers:
        _saida = logging.StreamHandler()
        _saida.setFormatter(logging.Formatter(FORMATO, FORMATO_DATA))
        logger.addHandler(_saida)
    logger.setLevel(logging.INFO)
    logger.propagate = False

logger.addFilter(FILTRO)


def no_journal() -> bool:
    """Os registros deste processo vão para o journal (e não para a stderr crua)?"""
    return _journal is not None


def arquivo_de_log(
    caminho: str, max_bytes: int = 20 * 1024 * 1024, copias: int = 10
) -> logging.Handler:
    """Acrescenta um arquivo de log rotativo (além da saída padrão)."""
    from logging.handlers import RotatingFileHandler

    handler = RotatingFileHandler(caminho, maxBytes=max_bytes, backupCount=copias, encoding='utf-8')
    handler.setFormatter(logging.Formatter(FORMATO, FORMATO_DATA))
    logger.addHandler(handler)
    return handler
