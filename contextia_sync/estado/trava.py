"""`ouvinte.lock`: um ouvinte por diretório de estado, por flock."""

from __future__ import annotations

import os
from typing import IO

from contextia_sync.erros import ErroConfiguracao

ARQUIVO_TRAVA = 'ouvinte.lock'


class ErroTrava(ErroConfiguracao):
    """Outro ouvinte já usa este diretório de estado."""


def travar(diretorio: str) -> IO[str] | None:
    """
    Um ouvinte por diretório de estado, por flock (o kernel solta se ele morrer).

    Dois ouvintes disputariam a mesma marca: cada um avançaria sem ver o que o
    outro leu, e o intervalo lido por um seria dado como lido pelo outro.
    Devolve o arquivo aberto (manter vivo = manter a trava), ou None sem fcntl.
    """
    caminho = os.path.join(diretorio, ARQUIVO_TRAVA)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    # 'a+' e nao 'w': abrir com 'w' apagaria o pid de quem tem a trava antes de
    # sabermos se ela esta livre.
    arquivo = open(caminho, 'a+', encoding='utf-8')
    try:
        fcntl.flock(arquivo.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        arquivo.seek(0)
        dono = arquivo.read().strip() or '?'
        arquivo.close()
        raise ErroTrava(
            'Já existe um ouvinte rodando com este diretório de estado (%s, pid %s).\n'
            'Dois ouvintes disputariam a mesma marca de água, e o intervalo lido'
            ' por um seria dado como lido pelo outro. Pare o outro (systemctl stop'
            ' ...) ou use outro --estado.' % (caminho, dono)
        ) from None
    arquivo.seek(0)
    arquivo.truncate()
    arquivo.write('%s\n' % os.getpid())
    arquivo.flush()
    return arquivo
