"""
A linha de comando do `descobrir` (`descobrir.py`, `contextia-descobrir`, ou
`python -m contextia_sync.cli.descobrir`).

Conecta na origem de CONTEXTIA_ORIGEM pela sessão somente leitura do adaptador
genérico, reflete o catálogo e escreve um esqueleto de mapeamento -- ou, se o
arquivo de --saida ja existe, mostra a diferença e não toca nele. Aqui: os
argumentos, o que se imprime e o código de saída; as decisões moram em
contextia_sync/descoberta/.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from contextia_sync.linha_de_comando import novo_parser, recusar
from contextia_sync.erros import SAIDA_CONFIGURACAO, SAIDA_FALHA, SAIDA_OK, ErroConfiguracao

PROG = 'descobrir'
DESCRICAO = ('Lê o catálogo da origem (CONTEXTIA_ORIGEM, com o login somente leitura) e'
             ' escreve um esqueleto de mapeamento: key, watch_column, scope_column, as colunas'
             ' que o intake aceita e a regra de projeto, com um relatório dos palpites.')
EPILOGO = 'Nada é gravado na origem, e um mapeamento existente nunca é sobrescrito.'
SAIDAS = {SAIDA_OK: 'esqueleto escrito, ou o mapeamento existente ainda casa com o catálogo'
                    ' (a diferença foi mostrada)',
          SAIDA_FALHA: 'a origem não respondeu, ou o mapeamento existente cita o que sumiu'
                       ' do catálogo',
          SAIDA_CONFIGURACAO: 'erro de configuração (nada gravado)'}


def argumentos(argv: list[str] | None = None) -> argparse.Namespace:
    """Os argumentos de `descobrir` (argparse sai com 2 se estão errados)."""
    p = novo_parser(PROG, DESCRICAO, EPILOGO, saidas=SAIDAS)
    p.add_argument('--saida', metavar='ARQ',
                   help='o mapeamento a escrever (ex.: mappings/cliente.json). Se já existe,'
                        ' mostra a diferença (colunas novas e sumidas) e não o sobrescreve.'
                        ' Sem --saida, o JSON vai para a saída padrão e o relatório para a'
                        ' de erro')
    p.add_argument('--cadastro', metavar='TABELA',
                   help='o cadastro de empresas (TABELA ou ESQUEMA.TABELA, tabela ou view):'
                        ' vira a regra de projeto (projects). Sem ele, o descobrir adivinha e'
                        ' diz')
    p.add_argument('--escopo', metavar='COLUNA',
                   help='a coluna com o código da empresa (scope_column). Objeto sem ela vira'
                        ' domínio (scope_column null). Sem ela, o descobrir adivinha e diz')
    p.add_argument('--incluir', action='append', default=[], metavar='PADRÃO',
                   help='só os objetos cujo nome casa com o padrão glob (ex.: "VW_CTX_*");'
                        ' repita para mais de um. Padrão: todos')
    p.add_argument('--excluir', action='append', default=[], metavar='PADRÃO',
                   help='tira os objetos cujo nome casa com o padrão glob (ex.: "*_BKP");'
                        ' repita para mais de um')
    p.add_argument('--esquema', action='append', default=[], metavar='NOME',
                   help='o esquema a ler (o nome vai como ESQUEMA.OBJETO no mapeamento);'
                        ' repita para mais de um. Padrão: o esquema padrão do login')
    p.add_argument('--cliente', metavar='NOME',
                   help='o client do mapeamento (padrão: o nome do banco)')
    p.add_argument('--sem-conferir-chaves', action='store_true',
                   help='não confere na origem a chave adivinhada de cada view (a conferência'
                        ' lê a view inteira: um COUNT e um GROUP BY, com o tempo máximo de'
                        ' CONTEXTIA_ORIGEM_TIMEOUT); as views ficam sem key')
    return p.parse_args(argv)


# ---------------------------------------------------------------------------
# O mapeamento que ja existe
# ---------------------------------------------------------------------------

def ler_existente(caminho: str) -> dict[str, Any]:
    """O mapeamento em --saida, lido como JSON (a diferença não exige que ele valide)."""
    try:
        with open(caminho, encoding='utf-8') as arquivo:
            mapa = json.load(arquivo)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as erro:
        raise ErroConfiguracao(
            '--saida %s já existe e não é um mapeamento legível (%s: %s) -- o descobrir não'
            ' sobrescreve: mova o arquivo ou escolha outro --saida.'
            % (caminho, type(erro).__name__, erro)) from None
    if not isinstance(mapa, dict):
        raise ErroConfiguracao('--saida %s já existe e não é um objeto JSON de mapeamento --'
                               ' mova o arquivo ou escolha outro --saida.' % caminho)
    return mapa


def _esquema_de(source_object: str) -> str | None:
    esquema, _, _nome = source_object.rpartition('.')
    return esquema or None


def _citados(mapa: dict[str, Any] | None) -> list[str]:
    """Os source_object do mapeamento existente (datasets e cadastro)."""
    if not mapa:
        return []
    nomes = [row.get('source_object') for row in mapa.get('datasets') or ()
             if isinstance(row, dict)]
    projetos = mapa.get('projects')
    if isinstance(projetos, dict):
        nomes.append(projetos.get('source_object'))
    return [n for n in nomes if isinstance(n, str) and n]


def casa(nome: str, esquema: str | None, incluir: Sequence[str],
         excluir: Sequence[str]) -> bool:
    """O objeto passa por --incluir/--excluir? (glob, sem caixa, no NOME ou ESQUEMA.NOME)."""
    formas = [nome.lower()] + (['%s.%s' % (esquema.lower(), nome.lower())] if esquema else [])

    def algum(padroes: Sequence[str]) -> bool:
        return any(fnmatch.fnmatchcase(f, p.lower()) for p in padroes for f in formas)
    return (not incluir or algum(incluir)) and not algum(excluir)


def _referencia_schema(saida: str | None) -> str:
    """O `$schema` do arquivo: o link ao lado dele, ou o caminho até o do pacote."""
    from contextia_sync.mapeamento import CAMINHO_SCHEMA

    if not saida:
        return './mapeamento.schema.json'
    pasta = os.path.dirname(os.path.abspath(saida))
    if os.path.exists(os.path.join(pasta, 'mapeamento.schema.json')):
        return './mapeamento.schema.json'
    return os.path.relpath(CAMINHO_SCHEMA, pasta)


def _cliente(args: argparse.Namespace, url: Any) -> str:
    if args.cliente:
        return args.cliente
    banco = os.path.splitext(os.path.basename(url.database or ''))[0]
    return banco or 'cliente'


# ---------------------------------------------------------------------------
# O programa
# ---------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    """O descobrir: 0 esqueleto escrito (ou nada sumiu), 1 origem/sumiu, 2 configuração."""
    args = argumentos(argv)
    try:
        return _descobrir(args)
    except ErroConfiguracao as erro:
        # CONTEXTIA_ORIGEM, --cadastro, --escopo, --esquema, --saida ilegivel: a
        # mensagem ja diz a correcao.
        return recusar(PROG, erro)


def _descobrir(args: argparse.Namespace) -> int:
    from contextia_sync.descoberta.catalogo import conferir_unica, refletir
    from contextia_sync.descoberta.esqueleto import diferencas, montar, relatorio, texto_json
    from contextia_sync.mapeamento import problemas_do_mapa
    from contextia_sync.origem import ErroOrigem
    from contextia_sync.origem.generico import conectar

    existente = ler_existente(args.saida) if args.saida and os.path.exists(args.saida) \
        else None
    if args.saida and not os.path.isdir(os.path.dirname(os.path.abspath(args.saida))):
        raise ErroConfiguracao('--saida %s: a pasta %s não existe -- crie-a ou aponte --saida'
                               ' para uma pasta que existe (mappings/, normalmente).'
                               % (args.saida, os.path.dirname(os.path.abspath(args.saida))))
    citados = _citados(existente)
    cadastro = (args.cadastro or '').strip() or None
    esquemas: list[str | None] = list(dict.fromkeys(args.esquema)) or [None]
    for nome in ([cadastro] if cadastro else []) + citados:
        esquema = _esquema_de(nome)
        if esquema and esquema not in esquemas:
            esquemas.append(esquema)
    sempre = {n.rpartition('.')[2].lower() for n in citados + ([cadastro] if cadastro else [])}

    def refletir_este(esquema: str | None, nome: str) -> bool:
        # O cadastro e os objetos do mapeamento existente sao refletidos mesmo
        # fora dos padroes: a regra de projeto e a diferenca precisam deles.
        return nome.lower() in sempre or (
            (esquema is None or esquema in args.esquema
             or esquema.lower() in {e.lower() for e in args.esquema})
            and casa(nome, esquema, args.incluir, args.excluir))

    def entra(objeto: Any) -> bool:
        pedido = objeto.esquema is None or objeto.esquema.lower() in {
            e.lower() for e in args.esquema}
        return pedido and casa(objeto.nome, objeto.esquema, args.incluir, args.excluir)

    inicio = time.monotonic()
    try:
        origem = conectar()
    except ErroConfiguracao:
        raise
    except ErroOrigem as erro:
        print('%s: %s. Nada foi gravado.' % (PROG, erro), file=sys.stderr)
        return SAIDA_FALHA
    try:
        with origem.sessao() as conn:
            catalogo = refletir(conn, esquemas, refletir_este)
            dialeto = conn.dialect
        segundos = time.monotonic() - inicio

        def conferir(objeto: Any, coluna: str, escopo: str | None) -> Any:
            with origem.sessao() as conn:
                return conferir_unica(conn, objeto, coluna, escopo)
        esqueleto = montar(catalogo, dialeto, cliente=_cliente(args, origem.url), entra=entra,
                           escopo_pedido=(args.escopo or '').strip() or None,
                           cadastro_pedido=cadastro,
                           conferir=None if args.sem_conferir_chaves else conferir,
                           referencia_schema=_referencia_schema(args.saida))
    except ErroConfiguracao:
        raise
    except ErroOrigem as erro:
        print('%s: a origem não respondeu ao ler o catálogo (%s). Nada foi gravado.'
              % (PROG, erro), file=sys.stderr)
        return SAIDA_FALHA
    finally:
        origem.fechar()

    problemas = problemas_do_mapa(esqueleto.mapa)
    if problemas:
        # Erro do descobrir, nao do operador: o esqueleto tem de validar sempre.
        print('%s: o esqueleto montado não valida (defeito do descobrir; nada foi gravado):'
              '\n%s' % (PROG, '\n'.join('  - %s' % p for p in problemas)), file=sys.stderr)
        return SAIDA_FALHA

    relato: TextIO = sys.stdout if args.saida else sys.stderr
    tabelas = sum(1 for o in catalogo.objetos if not o.view)
    escrever = [
        '===== descobrir =====',
        'origem ............: %s (sessão somente leitura)' % origem.descricao,
        'catálogo ..........: %d objeto(s) refletido(s): %d tabela(s), %d view(s), em %s s'
        % (len(catalogo.objetos), tabelas, len(catalogo.objetos) - tabelas,
           ('%.2f' % segundos).replace('.', ',')),
        'escopo ............: %s' % (esqueleto.escopo.coluna or 'nenhum (tudo é domínio)'),
        'cadastro ..........: %s' % (esqueleto.mapa['projects']['source_object']),
    ]
    saida = SAIDA_OK
    texto = texto_json(esqueleto.mapa) + '\n'
    if existente is not None:
        diferenca = diferencas(existente, esqueleto, catalogo, dialeto)
        escrever.append('mapeamento .......: %s já existe: NÃO sobrescrito; a diferença contra'
                        ' o catálogo de agora:' % args.saida)
        escrever += ['  - %s' % linha for linha in diferenca.linhas] or [
            '  (nenhuma: o mapeamento cita só o que existe, e nenhum objeto ou coluna novo)']
        if diferenca.quebrado:
            saida = SAIDA_FALHA
        escrever.append('Para um esqueleto novo ao lado dele: --saida OUTRO.json.')
    else:
        destino = args.saida or '(saída padrão)'
        escrever.append('esqueleto .........: %d dataset(s) em %s'
                        % (len(esqueleto.datasets), destino))
        if args.saida:
            from contextia_sync.arquivos import gravar_atomico
            gravar_atomico(args.saida, texto, 0o644)
        else:
            sys.stdout.write(texto)
            sys.stdout.flush()
        escrever += relatorio(esqueleto)
        escrever += ['', 'Próximo passo: python3 connector.py --mapping=%s --scope=<uma empresa>'
                         ' --dry-run (lê e serializa cada linha, sem enviar nada).'
                     % (args.saida or 'ARQUIVO')]
    print('\n'.join(escrever), file=relato, flush=True)
    return saida


if __name__ == '__main__':
    sys.exit(main())
