"""Arquivos que outro processo lê enquanto este escreve: trocados inteiros, nunca pela metade."""

from __future__ import annotations

import os
import tempfile
from typing import IO


class GravacaoAtomica:
    """
    Um arquivo novo escrito aos poucos num temporário da mesma pasta e trocado
    inteiro no fim (`trocar`), ou largado sem deixar rastro (`desistir`).

    Para o que não cabe numa string só (o conjunto de chaves de um dataset de
    milhões de linhas) e para o que só vale depois de outra coisa dar certo:
    o temporário pode ser fechado agora e trocado mais tarde. `modo` e
    aplicado ANTES do conteúdo existir no disco.
    """

    def __init__(self, caminho: str, modo: int | None = None) -> None:
        self.caminho = caminho
        self.pasta = os.path.dirname(os.path.abspath(caminho))
        descritor, self.temporario = tempfile.mkstemp(
            prefix='.' + os.path.basename(caminho) + '.', suffix='.tmp', dir=self.pasta
        )
        try:
            if modo is not None:
                os.fchmod(descritor, modo)
            self.arquivo: IO[str] | None = os.fdopen(descritor, 'w', encoding='utf-8')
        except BaseException:
            os.close(descritor)
            os.unlink(self.temporario)
            raise

    def escrever(self, texto: str) -> None:
        assert self.arquivo is not None, 'gravação já fechada'
        self.arquivo.write(texto)

    def fechar(self) -> None:
        """Conteúdo no disco (fsync); o arquivo de destino ainda é o antigo."""
        if self.arquivo is not None:
            arquivo, self.arquivo = self.arquivo, None
            try:
                arquivo.flush()
                os.fsync(arquivo.fileno())
            finally:
                arquivo.close()

    def trocar(self) -> None:
        """O temporário vira `caminho` (rename atômico) e o rename fica durável."""
        try:
            self.fechar()
            os.replace(self.temporario, self.caminho)
        except BaseException:
            self.desistir()
            raise
        fsync_pasta(self.pasta)

    def desistir(self) -> None:
        """Larga o temporário: `caminho` continua como estava. Nunca levanta."""
        try:
            self.fechar()
        except OSError:
            pass
        try:
            os.unlink(self.temporario)
        except FileNotFoundError:
            pass
        except OSError:
            pass


def gravar_atomico(caminho: str, texto: str, modo: int | None = None) -> None:
    """
    Grava `texto` em `caminho` via arquivo temporário + fsync + rename.

    Um leitor (alerta, outro ouvinte, o próximo `start`) vê o arquivo antigo ou
    o novo, nunca metade: um estado truncado faria o ouvinte recomeçar do zero e
    pular o que aconteceu enquanto estava fora. `modo` (ex.: 0o600 para o
    arquivo de chaves) e aplicado ANTES do conteúdo existir no disco, para que
    nem por um instante a chave fique legível por outros.
    """
    gravacao = GravacaoAtomica(caminho, modo)
    try:
        gravacao.escrever(texto)
    except BaseException:
        gravacao.desistir()
        raise
    gravacao.trocar()


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
