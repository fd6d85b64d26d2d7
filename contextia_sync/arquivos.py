"""Arquivos que outro processo lê enquanto este escreve: trocados inteiros, nunca pela metade."""

from __future__ import annotations

import os
import tempfile


def gravar_atomico(caminho: str, texto: str, modo: int | None = None) -> None:
    """
    Grava `texto` em `caminho` via arquivo temporário + fsync + rename.

    Um leitor (alerta, outro ouvinte, o próximo `start`) vê o arquivo antigo ou
    o novo, nunca metade: um estado truncado faria o ouvinte recomeçar do zero e
    pular o que aconteceu enquanto estava fora. `modo` (ex.: 0o600 para o
    arquivo de chaves) e aplicado ANTES do conteúdo existir no disco, para que
    nem por um instante a chave fique legível por outros.
    """
    pasta = os.path.dirname(os.path.abspath(caminho))
    descritor, temporario = tempfile.mkstemp(
        prefix='.' + os.path.basename(caminho) + '.', suffix='.tmp', dir=pasta)
    try:
        if modo is not None:
            os.fchmod(descritor, modo)
        with os.fdopen(descritor, 'w', encoding='utf-8') as arquivo:
            arquivo.write(texto)
            arquivo.flush()
            os.fsync(arquivo.fileno())
        os.replace(temporario, caminho)
    except BaseException:
        try:
            os.unlink(temporario)
        except FileNotFoundError:
            pass
        raise
    fsync_pasta(pasta)


def fsync_pasta(pasta: str | os.PathLike[str]) -> None:
    """O rename só é durável depois do fsync da pasta (melhor esforco: nunca levanta)."""
    try:
        pasta_fd = os.open(pasta, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(pasta_fd)
    except OSError:
        pass
    finally:
        os.close(pasta_fd)
