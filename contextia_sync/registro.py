"""
O logger do SDK: logzero quando instalado, `logging` puro quando nao.

O substituto existe por causa do `--autoteste`, que roda num `python3 -S` sem
pacote nenhum, na maquina de quem escreve o mapeamento. Com o logzero
instalado (o normal) nada daqui e usado alem de `logger` e `arquivo_de_log`.
"""

import logging

FORMATO = '[%(levelname).1s %(asctime)s] %(message)s'

try:
    import logzero as _logzero
except ImportError:                      # pragma: no cover - so no autoteste
    _logzero = None

if _logzero is not None:
    logger = _logzero.setup_logger(name='contextia', level=logging.INFO)
else:
    logger = logging.getLogger('contextia')
    if not logger.handlers:
        _saida = logging.StreamHandler()
        _saida.setFormatter(logging.Formatter(FORMATO))
        logger.addHandler(_saida)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def arquivo_de_log(caminho: str, max_bytes: int = 20 * 1024 * 1024,
                   copias: int = 10) -> logging.Handler:
    """Acrescenta um arquivo de log rotativo (alem da saida padrao)."""
    from logging.handlers import RotatingFileHandler
    handler = RotatingFileHandler(caminho, maxBytes=max_bytes, backupCount=copias,
                                  encoding='utf-8')
    handler.setFormatter(logging.Formatter(FORMATO))
    logger.addHandler(handler)
    return handler
