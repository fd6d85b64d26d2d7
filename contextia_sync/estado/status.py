"""`ouvinte-status.txt`: o arquivo que um alerta le, trocado inteiro a cada volta."""

from __future__ import annotations

import os
from collections.abc import Iterable

from contextia_sync.arquivos import gravar_atomico

ARQUIVO_STATUS = 'ouvinte-status.txt'


def escrever_status(diretorio: str, linhas: Iterable[str]) -> str | None:
    """
    Troca o arquivo de status inteiro. Devolve o erro (texto) ou None.

    E um ARQUIVO e nao um log: alerta que precisa varrer log para saber se o
    servico esta vivo nao e alerta. `find <estado>/ouvinte-status.txt -mmin +10`
    sem saida = vivo. Falha aqui nao derruba o ouvinte: disco cheio nao e
    motivo para parar de levar dado.
    """
    try:
        gravar_atomico(os.path.join(diretorio, ARQUIVO_STATUS),
                       ''.join('%s\n' % linha for linha in linhas))
    except OSError as erro:
        return '%s: %s' % (type(erro).__name__, erro)
    return None
