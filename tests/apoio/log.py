"""
Coleta as mensagens do logger do SDK (o logzero não propaga para o root, e o
caplog não as vê).
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
