"""
O logger do SDK: logzero quando instalado, `logging` puro quando nao -- e o
journal, quando a stderr e o journal.

O substituto existe por causa do `--autoteste`, que roda num `python3 -S` sem
pacote nenhum, na maquina de quem escreve o mapeamento. Com o logzero
instalado (o normal) nada daqui e usado alem de `logger` e `arquivo_de_log`.

Sob o systemd (JOURNAL_STREAM confere com a stderr deste processo) a saida
padrao do logger vira `systemd.ManipuladorJournal`: cada registro uma entrada
do journal, com a prioridade (`journalctl -u ouvinte -p warning`) e o
traceback dentro da mesma entrada. O arquivo de `--log` continua igual. Uma
ferramenta filha herda JOURNAL_STREAM, mas a stderr dela e o pipe do
supervisor: ela loga como sempre, e o ouvinte poe cada linha no journal.
"""

import logging

from contextia_sync import systemd

FORMATO = '[%(levelname).1s %(asctime)s] %(message)s'
# A data de toda linha de log, na tela e no arquivo: ISO, como o status e o
# historico a escrevem (o padrao do logzero, '%y%m%d', dava '261201').
FORMATO_DATA = '%Y-%m-%d %H:%M:%S'

try:
    import logzero as _logzero
except ImportError:                      # pragma: no cover - so no autoteste
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
    logger = _logzero.setup_logger(name='contextia', level=logging.INFO,
                                   formatter=_logzero.LogFormatter(datefmt=FORMATO_DATA))
else:
    logger = logging.getLogger('contextia')
    if not logger.handlers:
        _saida = logging.StreamHandler()
        _saida.setFormatter(logging.Formatter(FORMATO, FORMATO_DATA))
        logger.addHandler(_saida)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def no_journal() -> bool:
    """Os registros deste processo vao para o journal (e nao para a stderr crua)?"""
    return _journal is not None


def arquivo_de_log(caminho: str, max_bytes: int = 20 * 1024 * 1024,
                   copias: int = 10) -> logging.Handler:
    """Acrescenta um arquivo de log rotativo (alem da saida padrao)."""
    from logging.handlers import RotatingFileHandler
    handler = RotatingFileHandler(caminho, maxBytes=max_bytes, backupCount=copias,
                                  encoding='utf-8')
    handler.setFormatter(logging.Formatter(FORMATO, FORMATO_DATA))
    logger.addHandler(handler)
    return handler
