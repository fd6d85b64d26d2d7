"""
A saúde do ouvinte, com as convenções de um plugin de monitoramento (Nagios,
Icinga, Zabbix, o `check_*` do monitoring-plugins):

    ouvinte.py --saude --estado DIR [limites]
    python -m contextia_sync.saude --estado DIR [limites]
    bash deploy/verificar-saude.sh [DIR] [MINUTOS]     (a casca para o cron e o NRPE)

Lê o `ouvinte-status.json` que o ouvinte reescreve a cada volta do laço (e a
cada 30 s enquanto uma ferramenta roda) e responde UMA linha, com os dados de
desempenho depois da barra:

    OUVINTE CRITICO - dataset titulos_view sem ciclo bom há 312s, ...: ... | idade_status=2s;...

e o código de saída 0 OK, 1 ALERTA, 2 CRITICO, 3 DESCONHECIDO. Argumento
inválido e DESCONHECIDO (3), não o 2 do argparse: 2 quer dizer CRITICO para
quem chama um plugin. As regras, cada limite e o seu padrão estão em `REGRAS`
(o `--help` as mostra) e em docs/implantacao.md (Etapa 6); os padrões, em
padroes.py. Cada regra é uma função pequena na tabela `VERIFICACOES` de
`saude_verificacoes.py`, que `avaliar` dobra; este módulo é a linha de comando:
os argumentos, a leitura do arquivo, a linha impressa e o código de saída.

Só biblioteca padrão: não fala com o Contextia, não pega a trava -- roda ao
lado do ouvinte, como outro usuário (root, o do NRPE com sudo) ou de dentro do
cron, em milissegundos. A origem, só num caso: captura por log (`slot_logico`,
`binlog`) com o ouvinte parado, quando o status congelou no número da última
volta e o banco do cliente segue andando -- aí o log é medido agora, somente
leitura, com o login de CONTEXTIA_ORIGEM (captura/medida_do_log.py; o driver
vem do python do SDK). O `ouvinte.prom` é do ouvinte: com ele parado a métrica
congela, e a verdade é esta linha.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import stat
import sys
from collections.abc import Callable
from typing import NoReturn

from contextia_sync import __version__, padroes
from contextia_sync.captura.medida_do_log import LogMedido, medir_log
from contextia_sync.linha_de_comando import ParserPt
from contextia_sync.estado.status import ARQUIVO_STATUS, ARQUIVO_STATUS_JSON, ler_status_json

# As regras moram na tabela de verificações; aqui, só a linha de comando. Os
# nomes de lá continuam à mão por aqui (os testes e quem chama `saude.avaliar`).
from contextia_sync.saude_verificacoes import (
    ALERTA,
    CRITICO,
    DESCONHECIDO,
    NOMES,
    OK,
    Limites,
    Retrato,
    Veredito,
    avaliar,
    erro_curto,
    limpo,
    pid_vivo,
)

__all__ = [
    'ALERTA',
    'CRITICO',
    'DESCONHECIDO',
    'NOMES',
    'OK',
    'Limites',
    'Veredito',
    'avaliar',
    'duracao',
    'main',
    'parser',
    'pid_vivo',
    'verificar',
]

PROG = 'ouvinte.py --saude'

REGRAS = """\
Regras (cada limite e uma opção; os padrões moram em contextia_sync/padroes.py):

CRITICO
  - o ouvinte-status.json não existe ou esta ilegível (o ouvinte nunca
    completou uma volta aqui, ou morreu);
  - o status não é reescrito há mais de --max-idade;
  - o serviço parou (situação "parado" no modo serviço) -- no --once do cron,
    parado e o normal e só a idade conta;
  - o pid do status não existe mais e o status diz "rodando" (kill -9, OOM;
    --sem-pid desliga, para a saúde rodando noutro namespace de pid);
  - um dataset ao vivo sem ciclo bom (sonda E envio) há mais de --max-sem-sonda,
    medido na hora do último ciclo de dados -- o Contextia fora por um ciclo
    inteiro conta, e o tempo de uma ferramenta (varredura, carga inicial) não;
  - --max-falhas voltas seguidas do laço com alguma falha, ou --max-falhas
    falhas seguidas de um dataset (ou da reconciliação dele);
  - a última varredura falhou (ok false: alguma fase com erro, ou algum
    dataset que ela não fechou em toda empresa);
  - com a varredura diária ligada, a última varredura boa tem mais de
    --max-varredura;
  - dataset entregue a varredura com a varredura diária desligada (parado até
    um --varrer-agora);
  - empresa com a chave de outro projeto no arquivo de chaves (nada vai para
    ela até a correção);
  - `slot_logico`: o WAL retido pelo slot passou de --wal-critico, ou o slot
    foi invalidado, apagado ou movido (os datasets esperam a varredura);
  - `binlog`, com o ouvinte parado: o binlog depois da posição salva passou de
    --wal-critico, ou a posição já foi apagada da origem.
    Com o ouvinte parado, o log é medido AGORA na origem (CONTEXTIA_ORIGEM,
    somente leitura), não lido do status que congelou.
ALERTA
  - `slot_logico`: o WAL retido pelo slot passou de --wal-alerta; `binlog`, com
    o ouvinte parado: o binlog depois da posição salva passou de --wal-alerta;
  - captura por log: a mudança mais velha do spool espera a entrega há mais de
    --max-sem-sonda (o atraso do status é o dela, nunca 0 com algo preso);
  - captura por log com o ouvinte parado e a origem que não se mediu (sem
    CONTEXTIA_ORIGEM no ambiente da saúde, sem o driver, o banco fora do ar);
  - falhas seguidas abaixo de --max-falhas (do laço ou de um dataset);
  - registros na quarentena; linhas com a key nula ou key repetida na view;
    linhas sem carimbo; linhas com carimbo no
    futuro; chegada atrasada além da metade da --folga; dataset entregue a
    varredura; carga inicial de empresa nova pendente;
  - uma ferramenta rodando há mais de --max-ferramenta;
  - código de empresa recusado no cadastro do ERP (caractere fora do
    permitido: nunca provisionado);
  - reconciliação recusada pelo teto de remoção (nada removido), com falha
    (abaixo de --max-falhas), ou sem leitura completa há mais de N intervalos
    de reconciliação;
  - uma ferramenta rodando há mais de --max-ferramenta;
  - varredura interrompida (parada, ou o ouvinte morreu no meio); nenhuma
    varredura boa registrada ainda;
  - o ouvinte parando; o último status e de um --dry-run; nenhum dataset ao vivo;
  - a execução --once do pid do status morreu sem terminar.
DESCONHECIDO
  - argumento inválido; a pasta --estado nao existe ou este usuário não a lê
    (a saúde não sabe dizer -- não é o ouvinte que caiu); status de uma versão
    que esta saúde não conhece.
"""

SAIDAS = (
    'Saída (convenção dos plugins de monitoramento): 0 OK, 1 ALERTA, 2 CRITICO,'
    ' 3 DESCONHECIDO. Uma linha, com os dados de desempenho depois de "|".'
)


# ------------------------------------------------------------------ argumentos
class ErroArgumento(Exception):
    """Argumento inválido: a saúde responde DESCONHECIDO (3)."""


class _Parser(ParserPt):
    """
    Erro de argumento e DESCONHECIDO (3), não o 2 do argparse (2 e CRITICO).
    As frases do argparse já chegam em português (linha_de_comando.py: ParserPt).
    """

    def error(self, message: str) -> NoReturn:
        raise ErroArgumento(message)


_DURACAO = re.compile(r'^\s*(\d+(?:[.,]\d+)?)\s*(s|seg|m|min|h)?\s*$', re.I)
_UNIDADES = {None: 1, 's': 1, 'seg': 1, 'm': 60, 'min': 60, 'h': 3600}


def duracao(texto: str) -> float:
    """'1200' -> 1200; '20m', '20min' -> 1200; '26h' -> 93600; '90s' -> 90."""
    achado = _DURACAO.match(texto or '')
    if not achado:
        raise argparse.ArgumentTypeError(
            'duração invalida: %r (segundos, ou com unidade: 90s, 20m, 26h)' % texto
        )
    unidade = achado.group(2).lower() if achado.group(2) else None
    return float(achado.group(1).replace(',', '.')) * _UNIDADES[unidade]


def _inteiro_positivo(texto: str) -> int:
    try:
        valor = int(texto)
    except ValueError:
        raise argparse.ArgumentTypeError('inteiro inválido: %r' % texto) from None
    if valor < 1:
        raise argparse.ArgumentTypeError('tem de ser 1 ou mais: %r' % texto)
    return valor


def parser() -> argparse.ArgumentParser:
    """Os argumentos da saúde; o `--help` os lista na ordem de `_GRUPOS`."""
    p = _Parser(
        prog=PROG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        add_help=False,
        allow_abbrev=False,
        description='A saúde do ouvinte para o monitoramento: lê <estado>/%s e responde\n'
        'uma linha e o código de um plugin de monitoramento. Não roda o ouvinte e\n'
        'não fala com o Contextia; a origem, só para medir o log (`slot_logico`,\n'
        '`binlog`) com o ouvinte parado.' % ARQUIVO_STATUS_JSON,
        epilog=REGRAS + '\n' + SAIDAS,
    )
    for grupo in _GRUPOS:
        grupo(p)
    return p


def _programa(p: argparse.ArgumentParser) -> None:
    """A ajuda (à mão, para dizer o código 0 que o monitoramento vê) e a versão."""
    p.add_argument('-h', '--help', action='help', help='mostra esta ajuda e sai (código 0)')
    p.add_argument(
        '--version',
        action='version',
        help='mostra a versão e sai',
        version='%s (contextia_sync %s)' % (PROG, __version__),
    )


def _entrada(p: argparse.ArgumentParser) -> None:
    """Que ouvinte olhar, e de quantos intervalos saem os limites automáticos."""
    p.add_argument(
        '--estado',
        metavar='DIR',
        help='obrigatória: o --estado do ouvinte (onde ele escreve o %s)' % ARQUIVO_STATUS_JSON,
    )
    p.add_argument(
        '--intervalos',
        type=_inteiro_positivo,
        default=padroes.SAUDE_INTERVALOS,
        metavar='N',
        help='quantos --intervalo-dados do ouvinte fazem os limites automaticos'
        ' abaixo (padrão %d)' % padroes.SAUDE_INTERVALOS,
    )


def _prazos_e_falhas(p: argparse.ArgumentParser) -> None:
    """Os limites do status, dos datasets, das falhas e das ferramentas."""
    p.add_argument(
        '--max-idade',
        type=duracao,
        default=None,
        metavar='S',
        help='idade máxima do status. Padrão: o maior entre N intervalos de dados'
        ' e %d s (a espera máxima entre falhas e %d s; o cron do --once roda'
        ' a cada 5 min)' % (padroes.SAUDE_IDADE_MINIMA, padroes.TETO_ESPERA),
    )
    p.add_argument(
        '--max-sem-sonda',
        type=duracao,
        default=None,
        metavar='S',
        help='tempo máximo de um dataset ao vivo com falha sem ciclo bom. Padrão:'
        ' N intervalos de dados no serviço; no --once (o ritmo e o do cron,'
        ' que o status não sabe), o mesmo de --max-idade. Dataset sem falha'
        ' e sem sonda nova usa o maior dos dois',
    )
    p.add_argument(
        '--max-falhas',
        type=_inteiro_positivo,
        default=padroes.SAUDE_FALHAS,
        metavar='N',
        help='falhas seguidas (voltas do laço, ou de um dataset) que viram CRITICO;'
        ' de 1 até N-1 e ALERTA (padrão %d)' % padroes.SAUDE_FALHAS,
    )
    p.add_argument(
        '--max-varredura',
        type=duracao,
        default=float(padroes.SAUDE_VARREDURA),
        metavar='S',
        help='idade máxima da última varredura boa, com a varredura diária ligada'
        ' (padrão %d s = %d h)' % (padroes.SAUDE_VARREDURA, padroes.SAUDE_VARREDURA // 3600),
    )
    p.add_argument(
        '--max-ferramenta',
        type=duracao,
        default=float(padroes.SAUDE_FERRAMENTA),
        metavar='S',
        help='uma ferramenta (varredura, carga inicial) rodando há mais que isso é'
        ' ALERTA (padrão %d s)' % padroes.SAUDE_FERRAMENTA,
    )


def _slot(p: argparse.ArgumentParser) -> None:
    """O WAL que o `slot_logico` segura no banco do cliente."""
    p.add_argument(
        '--wal-alerta',
        type=_inteiro_positivo,
        default=padroes.SLOT_WAL_ALERTA,
        metavar='BYTES',
        help='`slot_logico`: WAL retido pelo slot acima disso é ALERTA; `binlog`, com'
        ' o ouvinte parado: o binlog depois da posição salva (padrão %d'
        ' = %d MiB)' % (padroes.SLOT_WAL_ALERTA, padroes.SLOT_WAL_ALERTA >> 20),
    )
    p.add_argument(
        '--wal-critico',
        type=_inteiro_positivo,
        default=padroes.SLOT_WAL_CRITICO,
        metavar='BYTES',
        help='`slot_logico`: WAL retido pelo slot acima disso é CRITICO: o disco do'
        ' cliente enche por nossa causa; `binlog`, com o ouvinte parado: o binlog'
        ' depois da posição salva (padrão %d = %d MiB)'
        % (padroes.SLOT_WAL_CRITICO, padroes.SLOT_WAL_CRITICO >> 20),
    )


def _processo(p: argparse.ArgumentParser) -> None:
    """Conferir o pid do status, que noutro namespace de pid não é o nosso."""
    p.add_argument(
        '--sem-pid',
        action='store_true',
        help='não confere se o pid do status existe (a saúde roda noutro'
        ' namespace de pid, ex.: fora do contêiner do ouvinte)',
    )


_GRUPOS: tuple[Callable[[argparse.ArgumentParser], None], ...] = (
    _programa,
    _entrada,
    _prazos_e_falhas,
    _slot,
    _processo,
)


# ------------------------------------------------------------------ a linha de comando
def verificar(estado: str, limites: Limites, agora: datetime.datetime | None = None) -> Veredito:
    """Lê o status de `estado` e o avalia (o que `main` imprime)."""
    v = Veredito()
    caminho = os.path.join(estado, ARQUIVO_STATUS_JSON)
    sem_permissao = (
        'sem permissão para ler %s: rode a saúde como o usuário do ouvinte (contextia) ou root'
    )
    try:
        pasta = os.stat(estado)
    except PermissionError:
        v.desconhecido = sem_permissao % estado
        return v
    except OSError:
        pasta = None
    if pasta is None or not stat.S_ISDIR(pasta.st_mode):
        v.desconhecido = (
            'a pasta --estado %s não existe (ou não é pasta): confira o caminho'
            ' -- e o --estado do ouvinte?' % estado
        )
        return v
    if not os.access(estado, os.R_OK | os.X_OK):
        v.desconhecido = sem_permissao % estado
        return v
    try:
        status = ler_status_json(estado)
        idade_arquivo = datetime.datetime.now().timestamp() - os.stat(caminho).st_mtime
    except FileNotFoundError:
        antigo = os.path.exists(os.path.join(estado, ARQUIVO_STATUS))
        v.anotar(
            CRITICO,
            '%s não existe: o ouvinte nunca completou uma volta aqui%s'
            % (
                caminho,
                ' (há só o %s: um ouvinte de versão antiga?)' % ARQUIVO_STATUS if antigo else '',
            ),
        )
        return v
    except PermissionError:
        v.desconhecido = sem_permissao % caminho
        return v
    except (OSError, ValueError) as erro:
        v.anotar(
            CRITICO,
            '%s ilegível (%s: %s): o ouvinte grava inteiro (atômico); arquivo'
            ' torto e disco com problema ou mão humana'
            % (caminho, type(erro).__name__, erro_curto(erro)),
        )
        return v
    return avaliar(
        status, limites, agora or datetime.datetime.now(), idade_arquivo, medir=_medir_o_log(estado)
    )


def _medir_o_log(estado: str) -> Callable[[Retrato], LogMedido | None]:
    """
    Com o ouvinte parado, o log da captura medido agora na origem: o status
    congelou no número da última volta. Com ele de pé, o status é dele, e fresco.
    """

    def medir(retrato: Retrato) -> LogMedido | None:
        if retrato.no_ar:
            return None
        captura = retrato.status.get('captura')
        if not isinstance(captura, dict):
            return None
        return medir_log(str(captura.get('estrategia') or ''), estado, captura)

    return medir


def main(argv: list[str] | None = None) -> int:
    """`ouvinte.py --saude ...`: imprime uma linha e devolve 0, 1, 2 ou 3."""
    argumentos = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser().parse_args(argumentos)
    except ErroArgumento as erro:
        print(
            'OUVINTE DESCONHECIDO - argumento inválido: %s (%s --help)' % (limpo(str(erro)), PROG)
        )
        return DESCONHECIDO
    except SystemExit as saida:  # --help e --version
        return saida.code if isinstance(saida.code, int) else OK
    if not args.estado:
        print('OUVINTE DESCONHECIDO - argumento inválido: falta --estado DIR (%s --help)' % PROG)
        return DESCONHECIDO
    limites = Limites(
        intervalos=args.intervalos,
        max_idade=args.max_idade,
        max_sem_sonda=args.max_sem_sonda,
        max_falhas=args.max_falhas,
        max_varredura=args.max_varredura,
        max_ferramenta=args.max_ferramenta,
        conferir_pid=not args.sem_pid,
        wal_alerta=args.wal_alerta,
        wal_critico=args.wal_critico,
    )
    try:
        veredito = verificar(args.estado, limites)
    except Exception as erro:  # noqa: BLE001 - um plugin nunca sai com traceback
        print(
            'OUVINTE DESCONHECIDO - a saúde falhou: %s: %s'
            % (type(erro).__name__, limpo(str(erro)))
        )
        return DESCONHECIDO
    print(veredito.linha(), flush=True)
    return veredito.nivel


if __name__ == '__main__':
    sys.exit(main())
