"""
O protocolo do `pgoutput` (versão 1), decodificado: bytes -> `Mensagem`. Puro.

Nada aqui conecta nem lê o slot (isso é `slot_logico.py`): cada mensagem que o
`pg_logical_slot_peek_binary_changes` devolve como bytea vira um registro com
só o que a captura usa. Testado com bytes gravados de um PostgreSQL de verdade
(tests/test_pgoutput.py).

    B  Begin      início da transação (nada lido dela)
    R  Relation   a tabela e as colunas, na ordem das tuplas que vêm depois
    I  Insert     a linha nova
    U  Update     K (a key antiga) ou O (a linha antiga inteira), e N (a nova)
    D  Delete     K ou O
    T  Truncate   os oids das tabelas esvaziadas
    C  Commit     a hora do commit
    (outras: Origin, Type, Message... só o tipo)

Coluna de tupla: 't' texto, 'n' NULL, 'u' TOAST que não mudou -- as duas
últimas viram None (não são key nem empresa: a imagem que traz a key a traz).
Também aqui: o LSN como texto ('16/B374D848') e como inteiro.
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # tipos.py importa o sqlalchemy, que o autoteste não tem
    from contextia_sync.tipos import ValorDoBanco

# A época do PostgreSQL: os carimbos do protocolo contam microssegundos desde ela.
_EPOCA_PG = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc).timestamp()
# Tipos cuja key vira int (a mesma que a releitura pela view devolve).
TIPOS_INTEIROS = frozenset({20, 21, 23, 26})  # int8, int2, int4, oid
_FORMATOS = {1: '>b', 2: '>h', 4: '>i', 8: '>q'}


def lsn_para_int(texto: str | None) -> int:
    if not texto:
        return 0
    alto, _, baixo = str(texto).partition('/')
    return (int(alto, 16) << 32) | int(baixo or '0', 16)


def int_para_lsn(valor: int) -> str:
    return '%X/%X' % (valor >> 32, valor & 0xFFFFFFFF)


@dataclass
class Relacao:
    """Uma mensagem 'R': a tabela e as colunas (nome, oid do tipo) na ordem das tuplas."""

    esquema: str
    tabela: str
    colunas: list[tuple[str, int]]


@dataclass
class Mensagem:
    """Uma mensagem do pgoutput já decodificada (só o que a captura usa)."""

    tipo: str  # B C R I U D T (outras: ignoradas)
    relacao: int = 0
    imagens: list[list[ValorDoBanco]] = field(default_factory=list)  # antes/depois, por coluna
    relacao_nova: Relacao | None = None
    truncadas: list[int] = field(default_factory=list)
    quando: float = 0.0  # C: a hora do commit (epoch)


class _Leitor:
    """Os bytes de uma mensagem, lidos em ordem (inteiros em big-endian, como o protocolo)."""

    def __init__(self, dados: bytes) -> None:
        self.dados = dados
        self.pos = 0

    def byte(self) -> str:
        self.pos += 1
        return chr(self.dados[self.pos - 1])

    def inteiro(self, tamanho: int) -> int:
        (valor,) = struct.unpack_from(_FORMATOS[tamanho], self.dados, self.pos)
        self.pos += tamanho
        return int(valor)

    def texto(self) -> str:
        fim = self.dados.index(b'\0', self.pos)
        valor = self.dados[self.pos : fim].decode('utf-8')
        self.pos = fim + 1
        return valor

    def no_fim(self) -> bool:
        return self.pos >= len(self.dados)

    def tupla(self) -> list[ValorDoBanco]:
        colunas: list[ValorDoBanco] = []
        for _ in range(self.inteiro(2)):
            marca = self.byte()
            if marca == 't':
                tamanho = self.inteiro(4)
                colunas.append(self.dados[self.pos : self.pos + tamanho].decode('utf-8'))
                self.pos += tamanho
            else:  # 'n' nulo, 'u' TOAST sem mudança: não é key nem empresa
                colunas.append(None)
        return colunas


def _relacao(leitor: _Leitor, mensagem: Mensagem) -> None:
    mensagem.relacao = leitor.inteiro(4)
    esquema, tabela = leitor.texto() or 'pg_catalog', leitor.texto()
    leitor.inteiro(1)  # replica identity
    colunas = []
    for _ in range(leitor.inteiro(2)):
        leitor.inteiro(1)  # flags (1 = parte da key)
        nome = leitor.texto()
        colunas.append((nome, leitor.inteiro(4)))
        leitor.inteiro(4)  # typmod
    mensagem.relacao_nova = Relacao(esquema, tabela, colunas)


def _linha(leitor: _Leitor, mensagem: Mensagem) -> None:
    mensagem.relacao = leitor.inteiro(4)
    while not leitor.no_fim():
        marca = leitor.byte()  # K (key antiga), O (linha antiga), N (nova)
        mensagem.imagens.append(leitor.tupla())
        if marca == 'N':
            break


def _truncate(leitor: _Leitor, mensagem: Mensagem) -> None:
    quantas = leitor.inteiro(4)
    leitor.inteiro(1)  # opções (CASCADE, RESTART IDENTITY)
    mensagem.truncadas = [leitor.inteiro(4) for _ in range(quantas)]


def _commit(leitor: _Leitor, mensagem: Mensagem) -> None:
    leitor.inteiro(1)  # flags
    leitor.inteiro(8)  # LSN do commit
    leitor.inteiro(8)  # LSN do fim da transação
    mensagem.quando = _EPOCA_PG + leitor.inteiro(8) / 1e6


# O que cada tipo de mensagem traz além do tipo (o Begin e os outros: nada que se use).
_CORPO: dict[str, Callable[[_Leitor, Mensagem], None]] = {
    'R': _relacao,
    'I': _linha,
    'U': _linha,
    'D': _linha,
    'T': _truncate,
    'C': _commit,
}


def decodificar(dados: bytes) -> Mensagem:
    """Uma mensagem do protocolo do pgoutput (versão 1) no que a captura precisa."""
    leitor = _Leitor(bytes(dados))
    mensagem = Mensagem(leitor.byte())
    corpo = _CORPO.get(mensagem.tipo)
    if corpo is not None:
        corpo(leitor, mensagem)
    return mensagem
