"""
Valores da origem, nos dois sentidos:

  * do mapeamento/estado para o bind (`coagir`): o escopo chega como texto e a
    marca de água como o estado a guardou; o banco recebe o tipo da coluna.
  * do driver para o Python que o cliente serializa (`conversor`): data zero do
    MySQL, rowversion do SQL Server, NUMBER sem escala e LOBs do Oracle, datas
    em TEXT do SQLite.

Usado pelo adaptador genérico (`origem/generico.py`) e pelo SQL de
`origem/consultas.py`.
"""

from __future__ import annotations

import datetime
import decimal
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

import sqlalchemy as sa
from sqlalchemy.dialects import mssql as _mssql
from sqlalchemy.types import NullType, TypeEngine

from contextia_sync.escopos import texto_escopo
from contextia_sync.origem import ErroOrigem
from contextia_sync.registro import logger
from contextia_sync.tipos import ValorDoBanco

UTC = datetime.timezone.utc

# Leva o valor do driver ao valor Python que o cliente serializa.
Conversor: TypeAlias = Callable[[ValorDoBanco], ValorDoBanco]

# O tipo SQLAlchemy de uma coluna da origem (o refletido do catálogo, ou o dado
# a mão): o parâmetro é o valor dela como o driver o devolve.
TipoDaColuna: TypeAlias = TypeEngine[ValorDoBanco]

# Os tipos que o conversor de data do MySQL devolve como estão (sem fuso).
_PASSA_DATA = frozenset({datetime.date, datetime.datetime, type(None)})

# Tipos declarados no SQLite que guardam data em TEXT.
DATA_SQLITE = re.compile(r'^\s*(DATETIME|TIMESTAMP|DATE)\b', re.I)


def _eh_rowversion(tipo: TipoDaColuna) -> bool:
    return isinstance(tipo, _mssql.TIMESTAMP)


def _tipo_python(tipo: TipoDaColuna) -> type | None:
    try:
        python: type = tipo.python_type
    except (NotImplementedError, AttributeError):
        return None
    return python


def familia_do_tipo(tipo: TipoDaColuna, tipo_sqlite: str | None = None) -> str:
    """
    A família do tipo de uma coluna: datetime, date, numérico, texto, uuid,
    outro, ou desconhecido (o catálogo não disse).
    """
    if tipo_sqlite in ('datetime', 'date'):
        return tipo_sqlite
    if _eh_rowversion(tipo):  # rowversion: um contador de 8 bytes
        return 'numerico'
    if isinstance(tipo, sa.DateTime):
        return 'datetime'
    if isinstance(tipo, sa.Date):
        return 'date'
    if isinstance(tipo, (sa.Integer, sa.Numeric)):
        return 'numerico'
    if isinstance(tipo, NullType):
        return 'desconhecido'
    if isinstance(tipo, (sa.String, sa.Text)):
        return 'texto'
    if isinstance(tipo, sa.Uuid):
        return 'uuid'
    return 'outro'


# O inteiro como o SDK o escreve (`escopos.texto_escopo`): sem espaco, sem +,
# sem zeros a esquerda. So esta forma vira numero; qualquer outra e recusada.
_INTEIRO = re.compile(r'-?[0-9]+')

# O que cada campo diz ao operador quando o valor nao e exato.
_CORRECAO_EXATO = {
    'scope': 'Confira o --scope e o código da empresa no arquivo de chaves; se o'
    ' cadastro de empresas guarda o código como texto e a view como número,'
    ' peça ao DBA que as duas colunas tenham o mesmo tipo.',
    'key': 'A key do mapeamento e a coluna da view têm de ser do mesmo tipo.',
}


def _inteiro_exato(valor: ValorDoBanco) -> int | None:
    """O inteiro que `valor` e EXATAMENTE, ou None (texto torto, fração, bool)."""
    if isinstance(valor, bool):
        return None
    if isinstance(valor, int):
        return valor
    if isinstance(valor, (decimal.Decimal, float)):
        try:
            inteiro = int(valor)
        except (ValueError, OverflowError, decimal.InvalidOperation):
            return None
        return inteiro if inteiro == valor else None
    if isinstance(valor, str) and _INTEIRO.fullmatch(valor):
        inteiro = int(valor)
        return inteiro if str(inteiro) == valor else None
    return None


def coagir_exato(
    valor: ValorDoBanco, tipo: TipoDaColuna, coluna: str, campo: str = 'scope'
) -> ValorDoBanco:
    """
    O valor do escopo (ou de uma key do `IN`) EXATAMENTE no tipo da coluna, ou ErroOrigem.

    Texto comparado a coluna INT deixa o banco converter -- e o MariaDB lê
    '297x', '297 OR 1=1' e '0297' como 297: a leitura de uma empresa alargada
    para outra. Aqui a conversão e do SDK, e só aceita o que volta igual:
    numa coluna numérica, o inteiro escrito como `texto_escopo` o escreve
    ('297'; '0297', '+297', ' 297', '297.0' e '297x' são recusados); numa de
    texto, o texto como veio (o número vira o texto dele: 297 -> '297'); numa
    UUID, o UUID na forma canônica. Outro tipo de coluna não serve de escopo.
    """
    familia = familia_do_tipo(tipo)
    correcao = _CORRECAO_EXATO.get(campo, '')
    if familia == 'numerico':
        if (
            campo == 'key'
            and isinstance(valor, (int, decimal.Decimal, float))
            and not isinstance(valor, bool)
        ):
            return coagir(valor, tipo, '', campo)  # veio do banco, ja no tipo dele
        inteiro = _inteiro_exato(valor)
        if inteiro is None:
            raise ErroOrigem(
                '%s: %r não é um valor exato da coluna %s (%s, numérica): numa coluna'
                ' numérica o valor é o inteiro escrito sem espaço, sem sinal +, sem zeros à'
                ' esquerda e sem fração (ex.: 297) -- o banco converteria o resto por conta'
                ' própria e 297x viraria 297. Nada foi lido. %s'
                % (campo, valor, coluna, tipo, correcao)
            )
        return coagir(inteiro, tipo, '', campo)
    if familia == 'texto':
        if isinstance(valor, str):
            return valor
        if isinstance(valor, (int, decimal.Decimal, float)) and not isinstance(valor, bool):
            return texto_escopo(valor)
    if familia == 'uuid':
        try:
            convertido = valor if isinstance(valor, uuid.UUID) else uuid.UUID(str(valor))
        except ValueError:
            convertido = None
        if convertido is not None and (
            not isinstance(valor, str) or str(convertido) == valor.lower()
        ):
            return convertido
    if campo == 'key' and familia not in ('texto', 'uuid'):
        return coagir(valor, tipo, '', campo)  # data/hora: o coagir de sempre
    raise ErroOrigem(
        '%s: %r não serve para a coluna %s (%s): o SDK só compara %s com coluna inteira,'
        ' de texto ou UUID, com o valor convertido exatamente ao tipo dela -- deixar o'
        ' banco converter pode alargar a leitura. Nada foi lido. %s'
        % (
            campo,
            valor,
            coluna,
            tipo,
            campo,
            correcao or 'Peça ao DBA uma view com a coluna como inteiro ou texto.',
        )
    )


def coagir(
    valor: ValorDoBanco,
    tipo: TipoDaColuna,
    dialeto: str,  # noqa: ARG001 - quem chama passa; nenhum banco precisa dele hoje
    campo: str = 'since',
) -> ValorDoBanco:
    """
    O valor do filtro no tipo da coluna, para o banco comparar sem adivinhar.

    O escopo chega como texto ('297', da linha de comando) e a marca como o que
    o estado guardou (ISO, número). Comparar TEXTO com DATA deixa o banco
    escolher a conversão -- e cada banco escolhe diferente.
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
            if alvo is int:
                # Texto que nao e inteiro ia cru ao banco, e o MariaDB o
                # converteria do jeito dele ('101x' -> 101).
                if not re.fullmatch(r'[+-]?\d+', texto):
                    raise ValueError(texto)
                return int(texto)
            if alvo is decimal.Decimal:
                return decimal.Decimal(texto)
        except (ValueError, decimal.InvalidOperation):
            raise ErroOrigem(
                '%s: %r não é valor válido para uma coluna %s. Confira a marca de'
                ' água no estado ou o tipo da coluna na view.' % (campo, valor, tipo)
            ) from None
    if alvo is int and isinstance(valor, (decimal.Decimal, float)) and valor == int(valor):
        return int(valor)
    if alvo is str and isinstance(valor, (int, decimal.Decimal)) and not isinstance(valor, bool):
        return str(valor)
    return valor


def familia_json(tipo: TipoDaColuna, dialeto: str) -> str:
    """
    O que o cliente precisa fazer com os valores de uma coluna deste tipo para o
    JSON do contrato (intake/serializacao.py: Serializador.plano_fixo):
    'nativo' (o driver entrega str, int, bool, date, UUID, datetime sem fuso
    ou None: nada a fazer), 'decimal', 'float' (conferir NaN/Infinity),
    'datetime' (com fuso: isoformat), 'time', 'bytes', ou 'qualquer' (valor a valor, como sempre).
    O SQLite tem tipo por VALOR, não por coluna: tudo 'qualquer'.
    """
    if dialeto == 'sqlite' or isinstance(tipo, NullType):
        return 'qualquer'
    if _eh_rowversion(tipo):
        return 'decimal'  # o conversor ja deu int; 'decimal' aceita int
    if isinstance(tipo, sa.Float):
        return 'float'
    if isinstance(tipo, sa.Numeric):
        return 'decimal'
    if isinstance(tipo, sa.DateTime):
        # Sem fuso no tipo, o driver entrega datetime sem fuso (o TIMESTAMP do
        # MySQL ganha UTC no `conversor`), que o orjson escreve como o isoformat.
        if not getattr(tipo, 'timezone', False) and (
            dialeto == 'postgresql' or (dialeto == 'mysql' and not isinstance(tipo, sa.TIMESTAMP))
        ):
            return 'nativo'
        return 'datetime'
    if isinstance(tipo, sa.Time):
        return 'time'
    if isinstance(tipo, sa.LargeBinary):
        return 'bytes'
    if isinstance(tipo, (sa.Integer, sa.Boolean, sa.Date, sa.Uuid)):
        return 'nativo'
    if isinstance(tipo, sa.String) and dialeto in ('postgresql', 'mysql'):
        # O SET do MySQL/MariaDB e String para o SQLAlchemy, mas o driver entrega um
        # `set` do Python: valor a valor, para a recusa nomear a coluna e a linha.
        if type(tipo).__name__ == 'SET':
            return 'qualquer'
        return 'nativo'  # (Oracle/SQL Server: LOB e afins, valor a valor)
    return 'qualquer'


def texto_sqlite(valor: ValorDoBanco) -> ValorDoBanco:
    """Data para o TEXT do SQLite, no formato que ele guarda ('YYYY-MM-DD HH:MM:SS')."""
    if isinstance(valor, datetime.datetime):
        return valor.replace(tzinfo=None).isoformat(' ')
    if isinstance(valor, datetime.date):
        return valor.isoformat()
    return valor


class Avisos:
    """Um aviso por coluna, não um por linha: 1M de linhas não vira 1M de avisos."""

    def __init__(self) -> None:
        self.vistos: set[str] = set()

    def uma_vez(self, chave: str, mensagem: str, *args: object) -> None:
        if chave not in self.vistos:
            self.vistos.add(chave)
            logger.warning(mensagem, *args)


@dataclass(frozen=True)
class _Coluna:
    """O que a escolha do conversor olha numa coluna do resultado."""

    tipo: TipoDaColuna
    dialeto: str
    rotulo: str
    avisos: Avisos
    tipo_sqlite: str | None


def _data_sqlite(c: _Coluna) -> Conversor:
    def ler_sqlite(valor: ValorDoBanco, _dia: bool = (c.tipo_sqlite == 'date')) -> ValorDoBanco:
        if not isinstance(valor, str):
            return valor
        try:
            if _dia:
                return datetime.date.fromisoformat(valor.strip()[:10])
            return datetime.datetime.fromisoformat(valor.strip())
        except ValueError:
            c.avisos.uma_vez(
                c.rotulo,
                '%s: valor %r não é data legível -> None (aviso único por coluna)',
                c.rotulo,
                valor,
            )
            return None

    return ler_sqlite


def _rowversion(c: _Coluna) -> Conversor:  # noqa: ARG001
    return lambda v: int.from_bytes(v, 'big') if isinstance(v, (bytes, bytearray)) else v


def _data_mysql(c: _Coluna) -> Conversor:
    com_fuso = isinstance(c.tipo, sa.TIMESTAMP)

    def ler_mysql(valor: ValorDoBanco) -> ValorDoBanco:
        # O PyMySQL devolve '0000-00-00' como TEXTO: nao e data que exista.
        if isinstance(valor, str):
            c.avisos.uma_vez(
                c.rotulo,
                '%s: data zero do MySQL (%r) vira None (aviso único por coluna)',
                c.rotulo,
                valor,
            )
            return None
        if com_fuso and isinstance(valor, datetime.datetime) and valor.tzinfo is None:
            return valor.replace(tzinfo=UTC)  # sessao em UTC: e UTC
        return valor

    if not com_fuso:
        # Data, data e hora e NULL saem como entraram: o lote que so tem
        # esses tipos nesta coluna não desce valor a valor (generico._lote_pronto).
        ler_mysql.passa = _PASSA_DATA  # type: ignore[attr-defined]
    return ler_mysql


def _numerico(c: _Coluna) -> Conversor | None:
    escala = getattr(c.tipo, 'scale', None)
    precisao = getattr(c.tipo, 'precision', None)
    if escala == 0:
        return lambda v: int(v) if isinstance(v, (decimal.Decimal, float)) else v
    if c.dialeto == 'oracle' and escala is None and precisao is None:
        # NUMBER sem escala: inteiro quando o valor e inteiro; fracao fica Decimal.
        return lambda v: (
            int(v) if isinstance(v, decimal.Decimal) and v == v.to_integral_value() else v
        )
    return None


def _inteiro(c: _Coluna) -> Conversor:  # noqa: ARG001
    return lambda v: int(v) if isinstance(v, (decimal.Decimal, float)) else v


def _lob_oracle(c: _Coluna) -> Conversor:  # noqa: ARG001
    return lambda v: v.read() if hasattr(v, 'read') else v


def _e_data_mysql(c: _Coluna) -> bool:
    return c.dialeto == 'mysql' and isinstance(c.tipo, (sa.Date, sa.DateTime))


def _e_numerico(c: _Coluna) -> bool:
    return isinstance(c.tipo, sa.Numeric) and not isinstance(c.tipo, sa.Float)


def _e_inteiro_sem_int(c: _Coluna) -> bool:
    return isinstance(c.tipo, sa.Integer) and c.dialeto in ('oracle', 'mssql')


def _e_lob_oracle(c: _Coluna) -> bool:
    return c.dialeto == 'oracle' and isinstance(c.tipo, (sa.Text, sa.LargeBinary, sa.UnicodeText))


# (a coluna é deste caso?, o conversor dela -- None: o driver já entrega certo).
# A primeira regra que vale decide; a ordem importa (a data do SQLite antes de tudo).
_REGRAS: tuple[tuple[Callable[[_Coluna], bool], Callable[[_Coluna], Conversor | None]], ...] = (
    (lambda c: c.tipo_sqlite in ('datetime', 'date'), _data_sqlite),
    (lambda c: _eh_rowversion(c.tipo), _rowversion),
    (_e_data_mysql, _data_mysql),
    (_e_numerico, _numerico),
    (_e_inteiro_sem_int, _inteiro),
    (_e_lob_oracle, _lob_oracle),
)


def conversor(
    tipo: TipoDaColuna, dialeto: str, rotulo: str, avisos: Avisos, tipo_sqlite: str | None = None
) -> Conversor | None:
    """
    Função que leva o valor do driver ao valor Python que o cliente serializa,
    ou None quando o driver já entrega certo (o caso comum, e o mais rápido).
    """
    coluna = _Coluna(tipo, dialeto, rotulo, avisos, tipo_sqlite)
    for vale, fabrica in _REGRAS:
        if vale(coluna):
            return fabrica(coluna)
    return None
