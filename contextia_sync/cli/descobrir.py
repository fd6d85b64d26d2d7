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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

from contextia_sync.linha_de_comando import novo_parser, recusar
from contextia_sync.erros import SAIDA_CONFIGURACAO, SAIDA_FALHA, SAIDA_OK, ErroConfiguracao

if TYPE_CHECKING:
    from sqlalchemy.engine import URL, Dialect

    from contextia_sync.descoberta.catalogo import Catalogo, Conferencia, Objeto
    from contextia_sync.descoberta.esqueleto import Esqueleto
    from contextia_sync.origem.generico import Origem
    from contextia_sync.tipos import JsonDecodificado

PROG = 'descobrir'
DESCRICAO = (
    'Lê o catálogo da origem (CONTEXTIA_ORIGEM, com o login somente leitura) e'
    ' escreve um esqueleto de mapeamento: key, watch_column, scope_column, as colunas'
    ' que o intake aceita e a regra de projeto, com um relatório dos palpites.'
)
EPILOGO = 'Nada é gravado na origem, e um mapeamento existente nunca é sobrescrito.'
SAIDAS = {
    SAIDA_OK: 'esqueleto escrito, ou o mapeamento existente ainda casa com o catálogo'
    ' (a diferença foi mostrada)',
    SAIDA_FALHA: 'a origem não respondeu, ou o mapeamento existente cita o que sumiu do catálogo',
    SAIDA_CONFIGURACAO: 'erro de configuração (nada gravado)',
}


def argumentos(argv: list[str] | None = None) -> argparse.Namespace:
    """Os argumentos de `descobrir` (argparse sai com 2 se estão errados)."""
    p = novo_parser(PROG, DESCRICAO, EPILOGO, saidas=SAIDAS)
    p.add_argument(
        '--saida',
        metavar='ARQ',
        help='o mapeamento a escrever (ex.: mappings/cliente.json). Se já existe,'
        ' mostra a diferença (colunas novas e sumidas) e não o sobrescreve.'
        ' Sem --saida, o JSON vai para a saída padrão e o relatório para a'
        ' de erro',
    )
    p.add_argument(
        '--cadastro',
        metavar='TABELA',
        help='o cadastro de empresas (TABELA ou ESQUEMA.TABELA, tabela ou view):'
        ' vira a regra de projeto (projects). Sem ele, o descobrir adivinha e'
        ' diz',
    )
    p.add_argument(
        '--escopo',
        metavar='COLUNA',
        help='a coluna com o código da empresa (scope_column). Objeto sem ela vira'
        ' domínio (scope_column null). Sem ela, o descobrir adivinha e diz',
    )
    p.add_argument(
        '--incluir',
        action='append',
        default=[],
        metavar='PADRÃO',
        help='só os objetos cujo nome casa com o padrão glob (ex.: "VW_CTX_*");'
        ' repita para mais de um. Padrão: todos',
    )
    p.add_argument(
        '--excluir',
        action='append',
        default=[],
        metavar='PADRÃO',
        help='tira os objetos cujo nome casa com o padrão glob (ex.: "*_BKP");'
        ' repita para mais de um',
    )
    p.add_argument(
        '--esquema',
        action='append',
        default=[],
        metavar='NOME',
        help='o esquema a ler (o nome vai como ESQUEMA.OBJETO no mapeamento);'
        ' repita para mais de um. Padrão: o esquema padrão do login',
    )
    p.add_argument(
        '--cliente', metavar='NOME', help='o client do mapeamento (padrão: o nome do banco)'
    )
    p.add_argument(
        '--sem-conferir-chaves',
        action='store_true',
        help='não confere na origem a chave adivinhada de cada view (a conferência'
        ' lê a view inteira: um COUNT e um GROUP BY, com o tempo máximo de'
        ' CONTEXTIA_ORIGEM_TIMEOUT); as views ficam sem key',
    )
    return p.parse_args(argv)


# ---------------------------------------------------------------------------
# O mapeamento que ja existe
# ---------------------------------------------------------------------------


def ler_existente(caminho: str) -> dict[str, JsonDecodificado]:
    """O mapeamento em --saida, lido como JSON (a diferença não exige que ele valide)."""
    try:
        with open(caminho, encoding='utf-8') as arquivo:
            mapa = json.load(arquivo)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as erro:
        raise ErroConfiguracao(
            '--saida %s já existe e não é um mapeamento legível (%s: %s) -- o descobrir não'
            ' sobrescreve: mova o arquivo ou escolha outro --saida.'
            % (caminho, type(erro).__name__, erro)
        ) from None
    if not isinstance(mapa, dict):
        raise ErroConfiguracao(
            '--saida %s já existe e não é um objeto JSON de mapeamento --'
            ' mova o arquivo ou escolha outro --saida.' % caminho
        )
    return mapa


def _esquema_de(source_object: str) -> str | None:
    esquema, _, _nome = source_object.rpartition('.')
    return esquema or None


def _citados(mapa: Mapping[str, JsonDecodificado] | None) -> list[str]:
    """Os source_object do mapeamento existente (datasets e cadastro)."""
    if not mapa:
        return []
    nomes = [
        row.get('source_object') for row in mapa.get('datasets') or () if isinstance(row, dict)
    ]
    projetos = mapa.get('projects')
    if isinstance(projetos, dict):
        nomes.append(projetos.get('source_object'))
    return [n for n in nomes if isinstance(n, str) and n]


def casa(nome: str, esquema: str | None, incluir: Sequence[str], excluir: Sequence[str]) -> bool:
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


def _cliente(args: argparse.Namespace, url: URL) -> str:
    if args.cliente:
        cliente: str = args.cliente
        return cliente
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


@dataclass(frozen=True)
class _Escolha:
    """O que refletir e o que vira dataset: --esquema, --incluir/--excluir, e o que não sai."""

    esquemas: list[str]
    """Os --esquema pedidos, como vieram."""
    incluir: Sequence[str]
    excluir: Sequence[str]
    sempre: frozenset[str]
    """Os nomes (sem esquema, em minúsculas) do cadastro e do mapeamento existente."""

    def refletir(self, esquema: str | None, nome: str) -> bool:
        # O cadastro e os objetos do mapeamento existente sao refletidos mesmo
        # fora dos padroes: a regra de projeto e a diferenca precisam deles.
        return nome.lower() in self.sempre or (
            (
                esquema is None
                or esquema in self.esquemas
                or esquema.lower() in {e.lower() for e in self.esquemas}
            )
            and casa(nome, esquema, self.incluir, self.excluir)
        )

    def entra(self, objeto: Objeto) -> bool:
        pedido = objeto.esquema is None or objeto.esquema.lower() in {
            e.lower() for e in self.esquemas
        }
        return pedido and casa(objeto.nome, objeto.esquema, self.incluir, self.excluir)


def _esquemas_a_ler(pedidos: list[str], nomes: list[str]) -> list[str | None]:
    """Os --esquema (ou o padrão do login, None), mais os que o cadastro e o mapeamento citam."""
    esquemas: list[str | None] = list(dict.fromkeys(pedidos)) or [None]
    for nome in nomes:
        esquema = _esquema_de(nome)
        if esquema and esquema not in esquemas:
            esquemas.append(esquema)
    return esquemas


@dataclass
class _Descoberta:
    """O que a origem deu: o catálogo refletido e o esqueleto montado dele."""

    origem: Origem
    catalogo: Catalogo
    dialeto: Dialect
    segundos: float
    esqueleto: Esqueleto


def _descobrir(args: argparse.Namespace) -> int:
    """As etapas: a --saida, a origem (catálogo e esqueleto), a validação, o relato."""
    from contextia_sync.mapeamento import problemas_do_mapa

    existente = _conferir_saida(args.saida)
    citados = _citados(existente)
    cadastro = (args.cadastro or '').strip() or None
    pedidos = ([cadastro] if cadastro else []) + citados
    esquemas = _esquemas_a_ler(args.esquema, pedidos)
    escolha = _Escolha(
        args.esquema,
        args.incluir,
        args.excluir,
        frozenset(n.rpartition('.')[2].lower() for n in citados + ([cadastro] if cadastro else [])),
    )
    descoberta = _ler_a_origem(args, esquemas, escolha, cadastro)
    if descoberta is None:
        return SAIDA_FALHA

    problemas = problemas_do_mapa(descoberta.esqueleto.mapa)
    if problemas:
        # Erro do descobrir, nao do operador: o esqueleto tem de validar sempre.
        print(
            '%s: o esqueleto montado não valida (defeito do descobrir; nada foi gravado):'
            '\n%s' % (PROG, '\n'.join('  - %s' % p for p in problemas)),
            file=sys.stderr,
        )
        return SAIDA_FALHA
    return _relatar(args, descoberta, existente)


def _conferir_saida(saida: str | None) -> dict[str, JsonDecodificado] | None:
    """O mapeamento que já está em --saida (None se não há), e a pasta dela existe."""
    existente = ler_existente(saida) if saida and os.path.exists(saida) else None
    if saida and not os.path.isdir(os.path.dirname(os.path.abspath(saida))):
        raise ErroConfiguracao(
            '--saida %s: a pasta %s não existe -- crie-a ou aponte --saida'
            ' para uma pasta que existe (mappings/, normalmente).'
            % (saida, os.path.dirname(os.path.abspath(saida)))
        )
    return existente


def _ler_a_origem(
    args: argparse.Namespace, esquemas: list[str | None], escolha: _Escolha, cadastro: str | None
) -> _Descoberta | None:
    """Conecta, reflete o catálogo e monta o esqueleto; None (a causa impressa) se ela caiu."""
    from contextia_sync.descoberta.catalogo import conferir_unica, refletir
    from contextia_sync.descoberta.esqueleto import montar
    from contextia_sync.origem import ErroOrigem
    from contextia_sync.origem.generico import conectar

    inicio = time.monotonic()
    try:
        origem = conectar()
    except ErroConfiguracao:
        raise
    except ErroOrigem as erro:
        print('%s: %s. Nada foi gravado.' % (PROG, erro), file=sys.stderr)
        return None
    try:
        with origem.sessao() as conn:
            catalogo = refletir(conn, esquemas, escolha.refletir)
            dialeto = conn.dialect
        segundos = time.monotonic() - inicio

        def conferir(objeto: Objeto, coluna: str, escopo: str | None) -> Conferencia:
            with origem.sessao() as conn:
                return conferir_unica(conn, objeto, coluna, escopo)

        esqueleto = montar(
            catalogo,
            dialeto,
            cliente=_cliente(args, origem.url),
            entra=escolha.entra,
            escopo_pedido=(args.escopo or '').strip() or None,
            cadastro_pedido=cadastro,
            conferir=None if args.sem_conferir_chaves else conferir,
            referencia_schema=_referencia_schema(args.saida),
        )
    except ErroConfiguracao:
        raise
    except ErroOrigem as erro:
        print(
            '%s: a origem não respondeu ao ler o catálogo (%s). Nada foi gravado.' % (PROG, erro),
            file=sys.stderr,
        )
        return None
    finally:
        origem.fechar()
    return _Descoberta(origem, catalogo, dialeto, segundos, esqueleto)


def _relatar(
    args: argparse.Namespace,
    descoberta: _Descoberta,
    existente: Mapping[str, JsonDecodificado] | None,
) -> int:
    """O relato (e o esqueleto gravado, ou a diferença contra o existente): o código de saída."""
    catalogo, esqueleto = descoberta.catalogo, descoberta.esqueleto
    relato: TextIO = sys.stdout if args.saida else sys.stderr
    tabelas = sum(1 for o in catalogo.objetos if not o.view)
    escrever = [
        '===== descobrir =====',
        'origem ............: %s (sessão somente leitura)' % descoberta.origem.descricao,
        'catálogo ..........: %d objeto(s) refletido(s): %d tabela(s), %d view(s), em %s s'
        % (
            len(catalogo.objetos),
            tabelas,
            len(catalogo.objetos) - tabelas,
            ('%.2f' % descoberta.segundos).replace('.', ','),
        ),
        'escopo ............: %s' % (esqueleto.escopo.coluna or 'nenhum (tudo é domínio)'),
        'cadastro ..........: %s' % (esqueleto.mapa['projects']['source_object']),
    ]
    saida = SAIDA_OK
    if existente is not None:
        quebrado = _diferenca(args.saida, existente, descoberta, escrever)
        saida = SAIDA_FALHA if quebrado else SAIDA_OK
    else:
        _gravar_esqueleto(args.saida, esqueleto, escrever)
    print('\n'.join(escrever), file=relato, flush=True)
    return saida


def _diferenca(
    saida: str,
    existente: Mapping[str, JsonDecodificado],
    descoberta: _Descoberta,
    escrever: list[str],
) -> bool:
    """O mapeamento existente fica; a diferença vai ao relato. True: ele cita o que sumiu."""
    from contextia_sync.descoberta.esqueleto import diferencas

    diferenca = diferencas(existente, descoberta.esqueleto, descoberta.catalogo, descoberta.dialeto)
    escrever.append(
        'mapeamento .......: %s já existe: NÃO sobrescrito; a diferença contra'
        ' o catálogo de agora:' % saida
    )
    escrever += ['  - %s' % linha for linha in diferenca.linhas] or [
        '  (nenhuma: o mapeamento cita só o que existe, e nenhum objeto ou coluna novo)'
    ]
    escrever.append('Para um esqueleto novo ao lado dele: --saida OUTRO.json.')
    return diferenca.quebrado


def _gravar_esqueleto(saida: str | None, esqueleto: Esqueleto, escrever: list[str]) -> None:
    """O esqueleto em --saida (ou na saída padrão), e o relatório dos palpites."""
    from contextia_sync.descoberta.esqueleto import relatorio, texto_json

    texto = texto_json(esqueleto.mapa) + '\n'
    destino = saida or '(saída padrão)'
    escrever.append('esqueleto .........: %d dataset(s) em %s' % (len(esqueleto.datasets), destino))
    if saida:
        from contextia_sync.arquivos import gravar_atomico

        gravar_atomico(saida, texto, 0o644)
    else:
        sys.stdout.write(texto)
        sys.stdout.flush()
    escrever += relatorio(esqueleto)
    escrever += [
        '',
        'Próximo passo: python3 connector.py --mapping=%s --scope=<uma empresa>'
        ' --dry-run (lê e serializa cada linha, sem enviar nada).' % (saida or 'ARQUIVO'),
    ]


if __name__ == '__main__':
    sys.exit(main())
