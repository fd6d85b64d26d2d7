"""
Coleta as mensagens do logger do SDK (o logzero nao propaga para o root, e o
caplog nao as ve).
"""

import contextlib
import logging

from contextia_sync.registro import logger as LOGGER_SDK


@contextlib.contextmanager
def coletar_log(nivel=logging.WARNING, logger=LOGGER_SDK):
    """Dentro do `with`, a lista devolvida recebe cada mensagem de `nivel` para cima."""
    mensagens = []

    class Coletor(logging.Handler):
        def emit(self, registro):
            mensagens.append(registro.getMessage())

    coletor = Coletor(level=nivel)
    logger.addHandler(coletor)
    try:
        yield mensagens
    finally:
        logger.removeHandler(coletor)
