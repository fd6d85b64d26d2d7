"""
Roda um comando sob o filtro de chamadas de sistema que a unit pede
(`SystemCallFilter=`, `SystemCallErrorNumber=`, `MemoryDenyWriteExecute=`),
sem o systemd como PID 1: pela libseccomp, a mesma biblioteca que o systemd usa.

    python seccomp.py FILTRO.json -- programa argumentos...

FILTRO.json (montado por `filtro_da_unit`, no processo do teste):
    {"permitidas": ["read", ...], "erro": 1 | null, "mdwe": true | false}

`erro` e o errno devolvido a chamada fora da lista (SystemCallErrorNumber=
EPERM -> 1); null mata o processo, como o systemd sem SystemCallErrorNumber.
`mdwe` recusa com EPERM o que o MemoryDenyWriteExecute=yes recusa: mmap
gravável E executável, mprotect/pkey_mprotect que pede execução, shmat com
SHM_EXEC. O filtro vale para o programa e para todo filho dele.

Este arquivo roda SOZINHO (só a biblioteca padrão), copiado para uma pasta
que o usuário descartável do teste consegue ler; `filtro_da_unit` e o único
trecho que o pytest importa.
"""

import ctypes
import json
import os
import re
import subprocess
import sys

# systemd: sempre permitidas, mesmo fora da lista (execve, saida, relogio, sono...).
IMPLICITAS = (
    'execve',
    'execveat',
    'exit',
    'exit_group',
    'getrlimit',
    'rt_sigreturn',
    'sigreturn',
    'clock_gettime',
    'clock_getres',
    'clock_nanosleep',
    'gettimeofday',
    'nanosleep',
    'time',
)

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_ACT_KILL_PROCESS = 0x80000000
SCMP_CMP_MASKED_EQ = 7
PROT_WRITE, PROT_EXEC, SHM_EXEC = 0x2, 0x4, 0o100000


def _acao_erro(errno):
    return 0x00050000 | (errno & 0xFFFF)


class _Comparacao(ctypes.Structure):
    _fields_ = [
        ('arg', ctypes.c_uint),
        ('op', ctypes.c_int),
        ('datum_a', ctypes.c_uint64),
        ('datum_b', ctypes.c_uint64),
    ]


def _grupos():
    """{'@grupo': [membros]} como o `systemd-analyze syscall-filter` os lista."""
    saida = subprocess.run(
        ['systemd-analyze', 'syscall-filter'], capture_output=True, text=True, check=True
    ).stdout
    grupos, atual = {}, None
    for linha in saida.splitlines():
        texto = linha.strip()
        if linha.startswith('@'):
            atual = texto
            grupos[atual] = []
        elif texto and not texto.startswith('#') and atual:
            grupos[atual].append(texto)
    return grupos


def _expandir(nomes, grupos):
    resultado = set()
    for nome in nomes:
        if nome.startswith('@'):
            resultado |= _expandir(grupos[nome], grupos)
        else:
            resultado.add(nome)
    return resultado


def filtro_da_unit(servico):
    """
    O filtro de `servico` ({chave: [valores]} da seção [Service]) como o systemd
    o monta: a primeira lista sem `~` e a permitida; cada `~lista` tira dela.
    """
    grupos = _grupos()
    permitidas = None
    for linha in servico.get('SystemCallFilter', []):
        negar = linha.startswith('~')
        nomes = linha.lstrip('~').split()
        if permitidas is None:
            if negar:
                raise ValueError(
                    'SystemCallFilter começando por ~: lista de recusa pura não é emulada aqui'
                )
            permitidas = _expandir(nomes, grupos)
        elif negar:
            permitidas -= _expandir(nomes, grupos)
        else:
            permitidas |= _expandir(nomes, grupos)
    erro = None
    numero = (servico.get('SystemCallErrorNumber') or [None])[-1]
    if numero:
        import errno as _errno

        erro = int(numero) if re.fullmatch(r'\d+', numero) else getattr(_errno, numero)
    mdwe = (servico.get('MemoryDenyWriteExecute') or ['no'])[-1] in ('yes', 'true', '1')
    return {
        'permitidas': sorted((permitidas or set()) | set(IMPLICITAS)),
        'erro': erro,
        'mdwe': mdwe,
    }


def _biblioteca():
    lib = ctypes.CDLL('libseccomp.so.2', use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.restype = ctypes.c_int
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.restype = ctypes.c_int
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_Comparacao),
    ]
    lib.seccomp_load.restype = ctypes.c_int
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def _regra(lib, ctx, acao, nome, *comparacoes):
    numero = lib.seccomp_syscall_resolve_name(nome.encode())
    if numero == -1:  # __NR_SCMP_ERROR: nao existe nesta arquitetura
        return
    vetor = (_Comparacao * len(comparacoes))(*comparacoes) if comparacoes else None
    # Erro aqui e pseudo-chamada de outra arquitetura (socketcall no x86-64): ignorada.
    lib.seccomp_rule_add_array(ctx, acao, numero, len(comparacoes), vetor)


def aplicar(filtro):
    """Carrega os filtros neste processo (e, pelo exec, no programa e nos filhos)."""
    lib = _biblioteca()
    if filtro['mdwe']:
        # Filtro proprio, carregado ANTES da lista (que nao permite a chamada
        # seccomp): o kernel aplica todos, e o mais restritivo vence.
        ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
        eperm = _acao_erro(1)
        escrita_exec = PROT_WRITE | PROT_EXEC
        _regra(
            lib, ctx, eperm, 'mmap', _Comparacao(2, SCMP_CMP_MASKED_EQ, escrita_exec, escrita_exec)
        )
        for nome in ('mprotect', 'pkey_mprotect'):
            _regra(lib, ctx, eperm, nome, _Comparacao(2, SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC))
        _regra(lib, ctx, eperm, 'shmat', _Comparacao(2, SCMP_CMP_MASKED_EQ, SHM_EXEC, SHM_EXEC))
        if lib.seccomp_load(ctx) != 0:
            raise OSError(ctypes.get_errno(), 'seccomp_load (MemoryDenyWriteExecute) falhou')
        lib.seccomp_release(ctx)
    padrao = SCMP_ACT_KILL_PROCESS if filtro['erro'] is None else _acao_erro(filtro['erro'])
    ctx = lib.seccomp_init(padrao)
    for nome in filtro['permitidas']:
        _regra(lib, ctx, SCMP_ACT_ALLOW, nome)
    if lib.seccomp_load(ctx) != 0:
        raise OSError(ctypes.get_errno(), 'seccomp_load (lista permitida) falhou')
    lib.seccomp_release(ctx)


def main(argv):
    if len(argv) < 3 or argv[1] != '--':
        print('uso: seccomp.py FILTRO.json -- programa argumentos...', file=sys.stderr)
        return 2
    with open(argv[0], encoding='utf-8') as arquivo:
        aplicar(json.load(arquivo))
    os.execv(argv[2], argv[2:])
    return 127


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
