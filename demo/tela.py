"""A tela da demo: cada linha com o tempo desde o início, caminhos curtos."""

import os
import time

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
T0 = time.monotonic()


def dizer(texto=''):
    """Uma linha da demo, com o tempo desde o início."""
    if texto:
        print('[%6.1fs] %s' % (time.monotonic() - T0, texto), flush=True)
    else:
        print(flush=True)


def mostrar(caminho):
    """Caminho curto para a tela: relativo a raiz quando está dentro dela."""
    caminho = os.path.abspath(caminho)
    return os.path.relpath(caminho, RAIZ) if caminho.startswith(RAIZ + os.sep) else caminho


def curto(argumento):
    """Um argumento de linha de comando com o caminho encurtado (--x=/a/b -> --x=a/b)."""
    nome, igual, valor = (
        argumento.rpartition('=') if argumento.startswith('--') else ('', '', argumento)
    )
    return nome + igual + (mostrar(valor) if valor.startswith('/') else valor)


def titulo(texto):
    print('\n== %s %s' % (texto, '=' * max(3, 72 - len(texto))), flush=True)
