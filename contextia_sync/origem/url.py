"""
A URL da origem (CONTEXTIA_ORIGEM) lida e mostrada sem a senha.

A URL só aparece em mensagem depois de PARSEADA pelo SQLAlchemy, e mostrada
por ele com a senha e os parâmetros secretos da query trocados por `***`
(`descrever_url`). A que não parseia -- ou parseia errado: um `@` sem
codificar na senha joga o resto dela no host -- e recusada sem que nada dela
seja mostrado (`ler_url`). Texto livre (a mensagem do driver) não é varrido
por pedaco da senha: uma senha de uma letra estragaria a mensagem inteira
('cannot e***ecute'); só a senha como palavra inteira e um `usuário:senha@`
embutido são trocados (`mascarar`).
"""

from __future__ import annotations

import re
from urllib.parse import quote, quote_plus

import sqlalchemy as sa

from contextia_sync.origem import ErroConfiguracaoOrigem

# Parametros da query que guardam segredo: `?password=` (psycopg, pymysql),
# `odbc_connect=...PWD=...` (pyodbc), e o que se parecer com eles.
_QUERY_SEGREDO = re.compile(r'pass|pwd|senha|secret|token|key|odbc_connect|auth', re.I)

# usuario:senha@ dentro de um texto livre (uma URL que o driver repetiu).
_SENHA_EM_URL = re.compile(r'([^:/@\s]+:)[^\s/]*@')
# O que separa uma palavra inteira numa mensagem de driver.
_SEPARADOR = r"""\s'"`=:,;()\[\]{}<>/@"""

FORMATO = ('Formato: postgresql+psycopg://usuario:senha@host:5432/banco (um por banco em'
           ' docs/origem.md); senha com @, :, / ou # vai codificada (%40, %3A, %2F, %23).')


def ler_url(texto: str | sa.URL) -> sa.URL:
    """
    CONTEXTIA_ORIGEM parseada, ou ErroConfiguracaoOrigem que não repete nada dela.

    O `@` sem codificar na senha: o SQLAlchemy lê `leitor:abc@def@host` como
    senha `abc` e host `def@host`, e o driver poria `def` -- o resto da senha
    -- na mensagem de "host não encontrado". Recusado antes de conectar.
    """
    if isinstance(texto, sa.URL):
        url = texto
    else:
        try:
            url = sa.engine.make_url(texto)
        except Exception:                                # noqa: BLE001
            # A mensagem do SQLAlchemy repete a URL inteira -- com a senha.
            raise ErroConfiguracaoOrigem(
                'CONTEXTIA_ORIGEM não é URL SQLAlchemy válida%s; ela não é mostrada aqui'
                ' porque pode conter a senha. %s' % (_dica(str(texto)), FORMATO)) from None
    if url.host and '@' in url.host:
        raise ErroConfiguracaoOrigem(
            'CONTEXTIA_ORIGEM tem "@" sem codificar antes do host (%s): a senha ou o'
            ' usuário tem um "@", e o banco receberia parte da senha como nome do host.'
            ' Codifique cada "@" da senha como %%40. %s'
            % (descrever_url(url.set(host=url.host.rpartition('@')[2])), FORMATO))
    return url


def _dica(texto: str) -> str:
    """O que falta numa URL que não parseia, sem repetir nada dela."""
    if '://' not in texto:
        if re.match(r'[^:/@\s]+/[^@\s/]*@', texto):
            return (' (o jeito usuario/senha@host do Oracle não vale aqui: use'
                    ' oracle+oracledb://usuario:senha@host:1521/?service_name=...)')
        return ' (falta o "://" depois do nome do banco)'
    return ''


def descrever_url(url: sa.URL) -> str:
    """A URL para mensagem e log: senha e parâmetros secretos da query como ***."""
    ocultos = sorted(k for k in url.query if _QUERY_SEGREDO.search(k))
    seguros = {k: v for k, v in url.query.items() if k not in ocultos}
    texto = url.set(query=seguros).render_as_string(hide_password=True)
    if ocultos:
        texto += ('&' if seguros else '?') + '&'.join('%s=***' % quote_plus(k)
                                                      for k in ocultos)
    return texto


def mascarar(texto: object, senha: str | None = None) -> str:
    """
    Tira a senha de um texto livre (a mensagem do driver).

    Um `usuário:senha@` embutido vira `usuário:***@`; a `senha` (crua ou
    codificada) vira `***` só onde aparece como palavra inteira -- nunca dentro
    de outra palavra: a senha `e` deixa `cannot execute` como está.
    """
    texto = _SENHA_EM_URL.sub(r'\1***@', str(texto))
    if senha:
        for forma in sorted({senha, quote_plus(senha), quote(senha, safe='')},
                            key=len, reverse=True):
            texto = re.sub(r'(?<![^%s])%s(?![^%s])' % (_SEPARADOR, re.escape(forma), _SEPARADOR),
                           '***', texto)
    return texto
