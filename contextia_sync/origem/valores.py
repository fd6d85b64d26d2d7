"""
Valores da origem, nos dois sentidos:

  * do mapeamento/estado para o bind (`coagir`): o escopo chega como texto e a
    marca de agua como o estado a guardou; o banco recebe o tipo da coluna.
  * do driver para o Python que o cliente serializa (`conversor`): data zero do
    MySQL, rowversion do SQL Server, NUMBER sem escala e LOBs do Oracle, datas
    em TEXT do SQLite.

Usado pelo adaptador generico (`origem/generico.py`) e pelo SQL de
`origem/consultas.py`.
"""

from __future__ import annotations

import datetime
import decimal
import re
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import mssql as _mssql

from contextia_sync.origem import ErroOrigem
from contextia_sync.registro import logger

UTC = datetime.timezone.utc

# Leva o valor do driver ao valor Python que o cliente serializa.
Conversor = Callable[[Any], Any]

# Tipos declarados no SQLite que guardam data em TEXT.
DATA_SQLITE = re.compile(r'^\s*(DATETIME|TIMESTAMP|DATE)\b', re.I)


def _eh_rowversion(tipo: Any) -> bool:
    return isinstance(tipo, _mssql.TIMESTAMP)


def _tipo_python(tipo: Any) -> type | None:
    try:
        return tipo.python_type
    except (NotImplementedError, AttributeError):
        return None


def coagir(valor: Any, tipo: Any,
           dialeto: str,  # noqa: ARG001 - quem chama passa; nenhum banco precisa dele hoje
           campo: str = 'since') -> Any:
    """
    O valor do filtro no tipo da coluna, para o banco comparar sem adivinhar.

    O escopo chega como texto ('297', da linha de comando) e a marca como o que
    o estado guardou (ISO, numero). Comparar TEXTO com DATA deixa o banco
    escolher a conversao -- e cada banco escolhe diferente.
    """
    if _eh_rowversion(tipo) and isinstance(valor, int) and not isinstance(valor, bool):
        # rowversion e binary(8) big-endian: comparar bytes e exato.
        return valor.to_bytes(8, 'big')
    alvo = _tipo_python(tipo)
    if isinstance(valor, str) and alvo is not None:
        texto = valor.strip()
        try:
            if alvo is datetime.datetime:
                return datetime.datetime.fromisoformat(texto)
            if alvo is datetime.date:
                if len(texto) > 10:
                    return datetime.datetime.fromisoformat(texto)
                return datetime.date.fromisoformat(texto)
            if alvo is int and re.fullmatch(r'[+-]?\d+', texto):
                return int(texto)
            if alvo is decimal.Decimal:
                return decimal.Decimal(texto)
        except (ValueError, decimal.InvalidOperation):
            raise ErroOrigem(
                '%s: %r nao e valor valido para uma coluna %s. Confira a marca de'
                ' agua no estado ou o tipo da coluna na view.' % (campo, valor, tipo)) from None
    if alvo is int and isinstance(valor, (decimal.Decimal, float)) \
            and valor == int(valor):
        return int(valor)
    if alvo is str and isinstance(valor, (int, decimal.Decimal)) \
            and not isinstance(valor, bool):
        return str(valor)
    return valor


def texto_sqlite(valor: Any) -> Any:
    """Data para o TEXT do SQLite, no formato que ele guarda ('YYYY-MM-DD HH:MM:SS')."""
    if isinstance(valor, datetime.datetime):
        return valor.replace(tzinfo=None).isoformat(' ')
    if isinstance(valor, datetime.date):
        return valor.isoformat()
    return valor


class Avisos:
    """Um aviso por coluna, nao um por linha: 1M de linhas nao vira 1M de avisos."""

    def __init__(self) -> None:
        self.vistos: set[str] = set()

    def uma_vez(self, chave: str, mensagem: str, *args: Any) -> None:
        if chave not in self.vistos:
            self.vistos.add(chave)
            logger.warning(mensagem, *args)


def conversor(tipo: Any, dialeto: str, rotulo: str, avisos: Avisos,
              tipo_sqlite: str | None = None) -> Conversor | None:
    """
    Funcao que leva o valor do driver ao valor Python que o cliente serializa,
    ou None quando o driver ja entrega certo (o caso comum, e o mais rapido).
    """
    if tipo_sqlite in ('datetime', 'date'):
        def ler_sqlite(valor: Any, _dia: bool = (tipo_sqlite == 'date')) -> Any:
            if not isinstance(valor, str):
                return valor
            try:
                if _dia:
                    return datetime.date.fromisoformat(valor.strip()[:10])
                return datetime.datetime.fromisoformat(valor.strip())
            except ValueError:
                avisos.uma_vez(rotulo, '%s: valor %r nao e data legivel -> None'
                               ' (aviso unico por coluna)', rotulo, valor)
                return None
        return ler_sqlite

    if _eh_rowversion(tipo):
        return lambda v: int.from_bytes(v, 'big') if isinstance(v, (bytes, bytearray)) else v

    if dialeto == 'mysql' and isinstance(tipo, (sa.Date, sa.DateTime)):
        com_fuso = isinstance(tipo, sa.TIMESTAMP)

        def ler_mysql(valor: Any) -> Any:
            # O PyMySQL devolve '0000-00-00' como TEXTO: nao e data que exista.
            if isinstance(valor, str):
                avisos.uma_vez(rotulo, '%s: data zero do MySQL (%r) vira None'
                               ' (aviso unico por coluna)', rotulo, valor)
                return None
            if com_fuso and isinstance(valor, datetime.datetime) and valor.tzinfo is None:
                return valor.replace(tzinfo=UTC)   # sessao em UTC: e UTC
            return valor
        return ler_mysql

    if isinstance(tipo, sa.Numeric) and not isinstance(tipo, sa.Float):
        escala = getattr(tipo, 'scale', None)
        precisao = getattr(tipo, 'precision', None)
        if escala == 0:
            return lambda v: int(v) if isinstance(v, (decimal.Decimal, float)) else v
        if dialeto == 'oracle' and escala is None and precisao is None:
            # NUMBER sem escala: inteiro quando o valor e inteiro; fracao fica Decimal.
            return lambda v: (int(v) if isinstance(v, decimal.Decimal)
                              and v == v.to_integral_value() else v)
        return None

    if isinstance(tipo, sa.Integer) and dialeto in ('oracle', 'mssql'):
        return lambda v: int(v) if isinstance(v, (decimal.Decimal, float)) else v

    if dialeto == 'oracle' and isinstance(tipo, (sa.Text, sa.LargeBinary, sa.UnicodeText)):
        return lambda v: v.read() if hasattr(v, 'read') else v
    return None
