"""
A linha de comando `contextia-carregar-todas`: a carga completa de cada empresa.

E o `carregar-todas.sh` empacotado (contextia_sync/carga/carregar_todas.sh),
rodado pelo bash no lugar deste processo (o mesmo pid: quem o supervisiona
sinaliza o bash). Argumentos, ambiente, saída e códigos de saída são os dele;
só `--version` e `--help` são respondidos aqui -- também para o script, que os
repassa a este módulo: o texto da ajuda (e os códigos de saída, de erros.py)
mora num lugar só.
"""

from __future__ import annotations

import os
import shutil
import sys

import argparse

from contextia_sync.linha_de_comando import novo_parser
from contextia_sync.erros import SAIDA_CONFIGURACAO, SAIDA_FALHA

PROG = 'carregar-todas'
SCRIPT = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'carga', 'carregar_todas.sh'
)


AMBIENTE = """ambiente:
  CONTEXTIA_MAPPING    o mapeamento (obrigatório)
  CONTEXTIA_PYTHON     o python que roda o connector (padrão: python3; no comando instalado, o dele)
  CONTEXTIA_COLETA     a pasta que contém o pacote contextia_sync, posta no PYTHONPATH do connector
  CONTEXTIA_SOURCE     o adaptador de origem (padrão: generic)
  CONTEXTIA_HISTORICO  o histórico de cargas aceitas (padrão: CHAVES.historico.json)

Um connector só (connector --todas) carrega todas as empresas: uma leitura por
dataset, em ordem de empresa, repartida para a chave de cada uma; cada empresa com
o seu sync, o seu complete e o seu teto de remoção. As chaves ele lê do arquivo
pelo leitor do SDK; nunca na linha de comando. Uma empresa que falha não para as
outras; o resumo diz quais falharam. Uma empresa só: connector.py --scope=ESCOPO."""


def parser() -> argparse.ArgumentParser:
    """A ajuda do carregar-todas (o script faz o trabalho; isto só a descreve)."""
    p = novo_parser(
        PROG,
        'A carga completa de cada empresa do arquivo de chaves, numa execução do'
        ' connector: uma leitura por dataset para todas as empresas.',
        epilog=AMBIENTE,
        usage='CONTEXTIA_MAPPING=mappings/<cliente>.json %(prog)s CHAVES'
        ' [--dry-run] [opções do connector]',
        saidas={
            SAIDA_FALHA: 'alguma empresa falhou (as outras foram carregadas)',
            SAIDA_CONFIGURACAO: 'erro de configuração (mapeamento, arquivo de chaves'
            ' recusado); nada rodou',
            143: 'parado por SIGTERM (130: SIGINT; 129: SIGHUP); o connector em curso'
            ' também foi encerrado (sem complete no dataset em curso)',
        },
    )
    p.add_argument(
        'chaves',
        metavar='CHAVES',
        help='o arquivo de chaves do provisionar.py (também --chaves=CHAVES)',
    )
    p.add_argument(
        '--chaves',
        dest='chaves_opcao',
        metavar='CHAVES',
        help='o mesmo que CHAVES, com o nome que as outras ferramentas usam',
    )
    p.add_argument(
        'opcoes',
        nargs=argparse.REMAINDER,
        metavar='...',
        help='o resto vai para o connector (ex.: --dry-run, --max-remocao=1, --dataset=NOME)',
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """Troca este processo pelo `bash carregar_todas.sh argv...`; só volta se não der."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] in (['--version'], ['--help'], ['-h']):
        # A mesma linha de versao de todos os programas; a ajuda (saem com 0).
        parser().parse_args(argv[:1])
    bash = shutil.which('bash')
    if bash is None:
        print(
            '%s: bash não encontrado no PATH -- o carregar-todas e um script bash.' % PROG,
            file=sys.stderr,
        )
        return SAIDA_CONFIGURACAO
    # Instalado com pip, o python deste comando e o que tem o pacote: e ele que
    # roda o connector, salvo CONTEXTIA_PYTHON dizendo outro.
    ambiente = dict(os.environ)
    if sys.executable:
        ambiente.setdefault('CONTEXTIA_PYTHON', sys.executable)
    os.execve(bash, [bash, SCRIPT] + argv, ambiente)


if __name__ == '__main__':
    sys.exit(main())
