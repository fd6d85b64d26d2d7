"""
A linha de comando do conector (`connector.py`, ou `python -m contextia_sync.cli.conector`).

A carga completa de UMA empresa (`--scope`) ou de TODAS as do arquivo de chaves
(`--todas`, o que o carregar-todas.sh roda: uma leitura por dataset, repartida).
Aqui só há a casca: argumentos, as recusas de configuração (pegas uma vez, saída
2, sem traceback) e a saída que o operador e o ouvinte leem. A lógica está em
contextia_sync/carga/completa.py e carga/todas.py; o guia do operador, no topo
de connector.py e em docs/carga-e-provisionamento.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from contextia_sync.origem import AdaptadorDeOrigem
from contextia_sync import padroes
from contextia_sync.linha_de_comando import novo_parser, recusar
from contextia_sync.erros import SAIDA_CONFIGURACAO, SAIDA_FALHA, SAIDA_OK, ErroConfiguracao

if TYPE_CHECKING:  # só os tipos: a carga é importada tarde, quando roda
    from contextia_sync.carga.completa import ProblemaCatalogo
    from contextia_sync.carga.historico import Historico
    from contextia_sync.carga.todas import Empresa
    from contextia_sync.tipos import DatasetDoMapa, Mapa

PROG = 'connector'
DESCRICAO = (
    'Carga completa de UMA empresa no Contextia (--scope), ou de todas as do'
    ' arquivo de chaves numa leitura por dataset (--todas --chaves=ARQ). A chave'
    ' vem de CONTEXTIA_API_KEY ou, sem ela, da linha da empresa no arquivo de'
    ' --chaves (com --todas, sempre do arquivo); nunca da linha de comando.'
)
SAIDAS = {
    SAIDA_FALHA: 'algum dataset falhou (nada removido nele); os outros foram carregados. Com'
    ' --todas: alguma empresa falhou ou ficou de fora; as outras foram carregadas',
    SAIDA_CONFIGURACAO: 'erro de configuração ou de argumento (mapeamento, chave ausente,'
    ' recusada ou de outra empresa, --dataset desconhecido); nada enviado',
}


def _fracao(texto: str) -> float:
    try:
        valor = float(texto.rstrip('%')) / (100.0 if texto.endswith('%') else 1.0)
    except ValueError:
        valor = -1
    if not 0 <= valor <= 1:
        raise argparse.ArgumentTypeError(
            '%r não é uma fração de 0 a 1 (ex.: 0.5, 50%%, ou 1 para permitir remover tudo)' % texto
        )
    return valor


def _lotes_em_voo(texto: str) -> int:
    if not texto.isdigit() or not 1 <= int(texto) <= 32:
        raise argparse.ArgumentTypeError(
            '%r não é um número de lotes de 1 a 32 (1 = um de cada vez)' % texto
        )
    return int(texto)


def _progresso(texto: str) -> None:
    """A linha de progresso de uma leitura longa, na saída já (o log do ouvinte a lê)."""
    print(texto, flush=True)


def _fechar(origem: AdaptadorDeOrigem) -> None:
    try:
        origem.fechar()
    except Exception:  # noqa: BLE001 - fechar nunca mascara o erro
        pass


def _conferir_destino() -> None:
    """O Contextia de destino: definido (sem padrão) e aceitável (cliente.conferir_destino)."""
    from contextia_sync.intake import cliente

    if not cliente.url_destino():
        raise ErroConfiguracao(
            'falta CONTEXTIA_URL (a instalação do Contextia DESTE cliente).'
            ' Não há padrão: um padrão mandaria os dados para outro cliente.'
            ' Defina CONTEXTIA_URL=https://<instalação> no ambiente do serviço.'
        )
    cliente.conferir_destino()


def intervalo_progresso(padrao: float = padroes.INTERVALO_PROGRESSO) -> float:
    """CONTEXTIA_PROGRESSO_SEGUNDOS (segundos entre linhas de progresso), ou `padrao`."""
    bruto = (os.environ.get('CONTEXTIA_PROGRESSO_SEGUNDOS') or '').strip()
    if not bruto:
        return padrao
    try:
        valor = float(bruto)
    except ValueError:
        valor = -1.0
    if not valor > 0:
        raise ErroConfiguracao(
            'CONTEXTIA_PROGRESSO_SEGUNDOS=%r não é número positivo de'
            ' segundos. Tire a variável (padrão %g) ou use, por exemplo,'
            ' 30.' % (bruto, padrao)
        )
    return valor


def argumentos(argv: list[str] | None = None) -> argparse.Namespace:
    """Os argumentos da linha de comando (argparse sai com 2 se estão errados)."""
    p = novo_parser(PROG, DESCRICAO, saidas=SAIDAS)
    for grupo in _GRUPOS:
        grupo(p)
    args = p.parse_args(argv)
    _escopo_ou_todas(p, args)
    return args


def _entrada(p: argparse.ArgumentParser) -> None:
    """O mapeamento e o adaptador da origem."""
    p.add_argument('--mapping', required=True, help='mappings/<cliente>.json')
    p.add_argument(
        '--source',
        default=padroes.SOURCE,
        help='adaptador em sources/ sem .py (padrão %s)' % padroes.SOURCE,
    )


def _o_que_carregar(p: argparse.ArgumentParser) -> None:
    """Uma empresa ou todas, e que datasets."""
    p.add_argument(
        '--scope',
        metavar='ESCOPO',
        help='a empresa (o valor da scope_column, ex.: 297); obrigatório, salvo com --todas',
    )
    p.add_argument(
        '--todas',
        action='store_true',
        help='no lugar de --scope: todas as empresas do arquivo de --chaves, numa'
        ' execução -- uma leitura por dataset, em ordem de empresa, repartida'
        ' para a chave de cada uma; cada empresa com o seu sync, o seu'
        ' complete e o seu teto (o que o carregar-todas.sh roda)',
    )
    p.add_argument(
        '--dataset',
        action='append',
        default=[],
        metavar='NOME',
        help='só este dataset (nome do mapeamento ou normalizado); repita para'
        ' mais de um. Padrão: todos',
    )


def _protecoes(p: argparse.ArgumentParser) -> None:
    """O seco, que nada envia, e o teto de remoção, que recusa o complete."""
    p.add_argument(
        '--dry-run',
        action='store_true',
        help='confere as colunas no catálogo, a empresa no cadastro e serializa'
        ' cada linha como o envio real; não envia nada e não precisa de'
        ' chave',
    )
    p.add_argument(
        '--max-remocao',
        type=_fracao,
        default=padroes.MAX_REMOCAO,
        metavar='F',
        help='fração máxima de um dataset que a carga pode remover (padrão %s),'
        ' medida também contra a maior carga aceita do dataset na empresa'
        ' nos últimos %d dias (o histórico): rodadas seguidas não o esvaziam'
        ' aos poucos. Acima disso o complete é recusado e nada sai. Para uma'
        ' limpeza real em massa: --max-remocao=1, uma vez, só no dataset'
        ' limpo (--dataset); a carga aceita com o teto acima do padrão vira'
        ' a nova base' % (padroes.MAX_REMOCAO, padroes.JANELA_TETO_REMOCAO_DIAS),
    )


def _envio(p: argparse.ArgumentParser) -> None:
    """Quantos lotes esperam o Contextia enquanto os seguintes são lidos."""
    p.add_argument(
        '--lotes-em-voo',
        type=_lotes_em_voo,
        default=padroes.LOTES_EM_VOO,
        metavar='N',
        help='lotes esperando resposta do Contextia ao mesmo tempo, enquanto os'
        ' seguintes são lidos (padrão %d; 1 = um de cada vez). Um lote que'
        ' falha continua impedindo o complete' % padroes.LOTES_EM_VOO,
    )


def _chaves_e_historico(p: argparse.ArgumentParser) -> None:
    """De onde vem a chave de cada empresa, e onde ficam as cargas aceitas."""
    p.add_argument(
        '--chaves',
        metavar='ARQ',
        help='o arquivo de chaves do provisionar.py: sem CONTEXTIA_API_KEY no'
        ' ambiente, a chave da empresa vem da linha dela ali (e o histórico'
        ' de cargas fica ao lado: ARQ.historico.json)',
    )
    p.add_argument(
        '--historico',
        default=os.environ.get('CONTEXTIA_HISTORICO') or None,
        metavar='ARQ',
        help='histórico de cargas aceitas. Padrão: CONTEXTIA_HISTORICO ou, com'
        ' --chaves, <chaves>.historico.json (o mesmo do carregar-todas.sh e'
        ' do ouvinte). Com ele, o teto mede a queda contra a maior carga'
        ' aceita do dataset nos últimos %d dias (rodadas seguidas não o'
        ' esvaziam aos poucos); sem histórico, vale só a fração da rodada'
        % padroes.JANELA_TETO_REMOCAO_DIAS,
    )


_GRUPOS: tuple[Callable[[argparse.ArgumentParser], None], ...] = (
    _entrada,
    _o_que_carregar,
    _protecoes,
    _envio,
    _chaves_e_historico,
)
"""Os grupos de opções, na ordem em que o `--help` os lista."""


def _escopo_ou_todas(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """
    Exatamente um de --scope e --todas, conferido à mão: um grupo exclusivo do
    argparse mudaria a linha de uso do `--help` e a frase da recusa.
    """
    if args.scope is None and not args.todas:
        p.error(
            'faltam os argumentos obrigatórios: --scope (a empresa; ou --todas, com'
            ' --chaves, para todas as do arquivo de chaves)'
        )
    if args.scope is not None and args.todas:
        p.error(
            '--scope e --todas não andam juntos: uma empresa (--scope=ESCOPO) ou todas'
            ' as do arquivo de chaves (--todas --chaves=ARQ)'
        )


def chave_da_empresa(chaves: str | None, escopo: str) -> tuple[str, str]:
    """
    A chave do projeto da empresa e de onde ela veio (para a recusa dizer):
    CONTEXTIA_API_KEY (o
    carregar-todas.sh e o ouvinte a põem ali) ou, sem ela, a linha da empresa no
    arquivo de chaves (a carga à mão). Nunca da linha de comando: ali ela
    apareceria no `ps` de qualquer usuário da máquina.
    """
    from contextia_sync.provisionamento import chaves as arquivo_chaves

    chave = (os.environ.get(arquivo_chaves.VARIAVEL_CHAVE) or '').strip()
    if chave:
        return chave, 'em %s' % arquivo_chaves.VARIAVEL_CHAVE
    if not chaves:
        raise ErroConfiguracao(
            'falta a chave do projeto da empresa %s: passe --chaves=ARQ (o arquivo de chaves'
            ' do provisionar.py; a chave sai da linha da empresa) ou defina %s no ambiente.'
            ' Na linha de comando ela apareceria no ps.' % (escopo, arquivo_chaves.VARIAVEL_CHAVE)
        )
    if not os.path.exists(chaves):
        raise ErroConfiguracao(
            'o arquivo de chaves %s não existe: rode o provisionar.py antes'
            ' (ou confira o caminho de --chaves).' % chaves
        )
    registro = arquivo_chaves.ler_registros(chaves).get(escopo)
    if registro is None:
        raise ErroConfiguracao(
            'a empresa %s não está no arquivo de chaves %s: ela ainda não virou projeto.'
            ' Rode provisionar.py --somente-escopo=%s (confira antes com --dry-run).'
            % (escopo, chaves, escopo)
        )
    return registro.chave, 'da linha da empresa %s em %s' % (escopo, chaves)


def caminho_do_historico(args: argparse.Namespace) -> str | None:
    """--historico (ou CONTEXTIA_HISTORICO), ou o de ao lado do arquivo de chaves."""
    if args.historico:
        return str(args.historico)
    if args.chaves:
        from contextia_sync.carga.historico import caminho_padrao

        return caminho_padrao(args.chaves)
    return None


@dataclass
class Preparo:
    """O que a carga precisa, já conferido: nada aqui é erro de configuração."""

    mapa: Mapa
    escopo: str
    datasets: list[DatasetDoMapa]
    intervalo: float
    origem: AdaptadorDeOrigem
    chave: str | None = None
    projeto: str = '-'


def preparar(args: argparse.Namespace) -> Preparo:
    """
    Confere tudo o que o operador corrige antes de rodar, na ordem em que ele
    corrigiria. Levanta ErroConfiguracao (ErroMapeamento, ErroSelecao,
    ErroAdaptador...) ou ErroAutenticacao, com a correção na mensagem;
    ErroContextia se o Contextia não respondeu.
    """
    from contextia_sync.carga import completa as carga
    from contextia_sync.escopos import exigir_escopo, texto_escopo
    from contextia_sync.intake import cliente
    from contextia_sync.mapeamento import carregar_mapeamento, escopos_excluidos
    from contextia_sync.origem import carregar_origem
    from contextia_sync.provisionamento.chaves import empresa_da_chave

    mapa = carregar_mapeamento(args.mapping)
    escopo = texto_escopo(args.scope)
    if not escopo:
        raise ErroConfiguracao('--scope vazio: diga qual empresa carregar.')
    exigir_escopo(escopo, '--scope')
    if escopo in escopos_excluidos(mapa):
        raise ErroConfiguracao(
            'a empresa %s está em source.excluded_scopes do mapeamento: ela não recebe'
            ' carga. Tire a linha dela do arquivo de chaves (e revogue a chave), ou tire-a'
            ' de excluded_scopes se a exclusão era engano.' % escopo
        )
    datasets = carga.selecionar_datasets(mapa, args.dataset)
    intervalo = intervalo_progresso()

    chave = None
    projeto = '-'
    if not args.dry_run:
        # Antes de qualquer conexao (a conferencia de dono da chave e a primeira).
        _conferir_destino()
        chave, de_onde = chave_da_empresa(args.chaves, escopo)
        # A chave e DESTA empresa? Chave trocada mandaria os titulos da 297 para o
        # projeto da 301 -- vazamento entre empresas, sem erro nenhum do servidor.
        dono = cliente.quem_sou(chave, escopo=escopo)
        externo = empresa_da_chave(dono, escopo)
        if externo is not None:
            raise ErroConfiguracao(
                'a chave %s e do projeto %r (empresa %s), não da empresa'
                ' %s. Confira a linha da empresa %s no arquivo de chaves.'
                % (de_onde, dono.get('name'), externo, escopo, escopo)
            )
        projeto = '%s (id %s)' % (dono.get('name'), dono.get('project_id'))

    origem = carregar_origem(args.source)
    return Preparo(
        mapa=mapa,
        escopo=escopo,
        datasets=datasets,
        intervalo=intervalo,
        origem=origem,
        chave=chave or None,
        projeto=projeto,
    )


def _normalizado(row: DatasetDoMapa) -> str:
    from contextia_sync.intake.cliente import normalizar_dataset

    return normalizar_dataset(row['dataset'])


def conferir_antes_de_ler(
    args: argparse.Namespace, preparo: Preparo
) -> int | dict[str | None, list[ProblemaCatalogo]]:
    """
    O que se confere com a origem conectada e antes de ler qualquer linha de dado.

      * as colunas do cadastro de empresas (sempre) e, no seco, as de cada dataset,
        no catálogo -- todas as ausentes de uma vez, com o nome mais parecido;
      * a empresa no cadastro: desconhecida sai com 2 (no seco e na carga real);
        a que existe mas a regra de projeto recusa (inativa) carrega, dito numa linha.

    Devolve o código de saída (recusa) ou, por dataset normalizado, os problemas
    de catálogo dele (o seco marca o dataset como falho sem le-lo).
    """
    from contextia_sync.carga import completa as carga
    from contextia_sync.registro import limpo

    mapa, escopo, origem = preparo.mapa, preparo.escopo, preparo.origem
    por_dataset = _conferir_catalogo(args, preparo, 'a empresa %s' % escopo)
    if isinstance(por_dataset, int):
        return por_dataset

    try:
        empresa = carga.conferir_escopo(mapa, origem, escopo)
    except ErroConfiguracao as erro:
        return recusar(PROG, erro)
    except Exception as erro:  # noqa: BLE001 - o adaptador diz a causa
        print(
            '%s: não foi possível ler o cadastro de empresas para conferir a empresa %s'
            ' (%s: %s). Nada foi enviado.' % (PROG, escopo, type(erro).__name__, erro),
            file=sys.stderr,
        )
        return SAIDA_FALHA
    # O nome vem do cadastro do ERP: escapado, como todo valor de la que se imprime.
    print('empresa ........: %s (%s)' % (empresa.escopo, limpo(empresa.nome)))
    if empresa.recusa:
        # Ela existe: quem decide que empresa carrega e o arquivo de chaves, e a que
        # ja virou projeto (desativada depois) teria os dados congelados no Contextia
        # sem ninguem saber se a carga parasse aqui. A regra so decide quem VIRA
        # projeto; parar de carregar e a exclusao explicita.
        print(
            'AVISO ..........: a regra de projeto recusa a empresa %s (%s): ela não'
            ' viraria projeto hoje, mas existe no cadastro e a carga segue (quem decide'
            ' que empresa carrega e o arquivo de chaves). Para parar de carrega-la, tire'
            ' a linha dela do arquivo de chaves (e revogue a chave) ou ponha-a em'
            ' source.excluded_scopes.' % (empresa.escopo, empresa.recusa)
        )
    sys.stdout.flush()
    return por_dataset


def main(argv: list[str] | None = None) -> int:
    """O conector: 0 tudo carregado, 1 algum dataset falhou, 2 erro de configuração."""
    args = argumentos(argv)
    if args.todas:
        return main_todas(args)

    from contextia_sync.carga import completa as carga
    from contextia_sync.intake import cliente
    from contextia_sync.intake.transporte import ErroContextia, ErroDestino

    try:
        preparo = preparar(args)
    except (cliente.ErroAutenticacao, ErroDestino) as erro:
        return recusar(PROG, str(erro))
    except ErroContextia as erro:
        print('%s: Contextia indisponível: %s' % (PROG, erro), file=sys.stderr)
        return SAIDA_FALHA
    except ErroConfiguracao as erro:
        # Mapeamento, --dataset, escopo, ambiente, adaptador: a mensagem ja diz a correcao.
        return recusar(PROG, erro)

    mapa, escopo, origem = preparo.mapa, preparo.escopo, preparo.origem
    historico = _cabecalho(
        args, preparo, 'empresa %s' % escopo, '', 'projeto ........: %s' % preparo.projeto
    )
    sys.stdout.flush()

    inicio = time.monotonic()
    resultados: list[carga.ResultadoCarga] = []
    saida = SAIDA_OK
    barra = sys.stderr.isatty()

    if not _conectar(origem):
        return SAIDA_FALHA
    try:
        conferido = conferir_antes_de_ler(args, preparo)
        if isinstance(conferido, int):
            return conferido
        for row in preparo.datasets:
            problemas = conferido.get(_normalizado(row))
            if problemas:
                # Seco: coluna que a origem nao tem, dito acima; o dataset nem e lido.
                resultados.append(carga.resultado_sem_leitura(mapa, row, problemas))
                print(carga.linha_de_resultado(resultados[-1], seco=True))
                continue
            try:
                resultado = carga.carregar_dataset(
                    mapa,
                    row,
                    origem,
                    escopo,
                    api_key=preparo.chave,
                    seco=args.dry_run,
                    max_remocao=args.max_remocao,
                    barra=barra,
                    progresso=_progresso,
                    intervalo_progresso=preparo.intervalo,
                    historico=historico,
                    em_voo=args.lotes_em_voo,
                    execucao=os.environ.get('CONTEXTIA_EXECUCAO') or None,
                )
            except cliente.ErroAutenticacao as erro:
                # A chave caiu no meio (revogada?): nenhum dataset seguinte passaria.
                saida = recusar(PROG, str(erro))
                break
            resultados.append(resultado)
            print(carga.linha_de_resultado(resultado, seco=args.dry_run))
            sys.stdout.flush()
    finally:
        _fechar(origem)

    print(carga.resumo(escopo, resultados, time.monotonic() - inicio, seco=args.dry_run))
    if saida == SAIDA_OK and any(not r.ok for r in resultados):
        saida = SAIDA_FALHA
    return saida


# ---------------------------------------------------------------------------
# --todas: as empresas do arquivo de chaves numa execução (carga/todas.py)
# ---------------------------------------------------------------------------


def _sem_segredos_herdados() -> None:
    """
    Com --todas as chaves vêm só do arquivo: um segredo herdado no ambiente (o
    token de admin, a chave de UMA empresa, o segredo do webhook -- o bash rodado
    à mão os tem) não é desta carga. O processo se troca por ele mesmo sem eles
    (exec: o mesmo pid, que o carregar-todas.sh sinaliza), como o `chaves
    executar` fazia com cada connector.
    """
    from contextia_sync import segredos

    if not any(segredos.e_segredo(nome) for nome in os.environ):
        return
    argv = list(getattr(sys, 'orig_argv', []) or [])
    if not argv or not sys.executable:
        return
    sys.stdout.flush()
    os.execve(
        sys.executable, [sys.executable] + argv[1:], segredos.ambiente_sem_segredos(os.environ)
    )


def preparar_todas(args: argparse.Namespace) -> tuple[Preparo, list[Empresa]]:
    """
    O `preparar` de --todas: o mapeamento, o arquivo de chaves (o leitor do SDK)
    e, para cada empresa, a chave conferida contra o projeto (uma pergunta por
    chave). Empresa excluída, com a chave recusada ou de outra empresa fica de
    fora com o motivo (`Empresa.recusa`); as outras carregam. Levanta
    ErroConfiguracao do que vale para todas.
    """
    from contextia_sync.carga import completa as carga
    from contextia_sync.carga.todas import Empresa
    from contextia_sync.intake import cliente
    from contextia_sync.intake.transporte import ErroContextia
    from contextia_sync.mapeamento import carregar_mapeamento, escopos_excluidos
    from contextia_sync.origem import carregar_origem
    from contextia_sync.provisionamento import chaves as arquivo_chaves

    mapa = carregar_mapeamento(args.mapping)
    if not args.chaves:
        raise ErroConfiguracao(
            '--todas carrega as empresas do arquivo de chaves: passe --chaves=ARQ (o do'
            ' provisionar.py). Para uma empresa só, --scope=ESCOPO.'
        )
    if not os.path.lexists(args.chaves):
        raise ErroConfiguracao(
            'o arquivo de chaves %s não existe: rode o provisionar.py antes'
            ' (ou confira o caminho de --chaves).' % args.chaves
        )
    registros = arquivo_chaves.ler_registros(args.chaves)
    datasets = carga.selecionar_datasets(mapa, args.dataset)
    intervalo = intervalo_progresso()
    excluidas = escopos_excluidos(mapa)
    empresas = []
    for escopo, registro in registros.items():
        empresa = Empresa(escopo, chave=None if args.dry_run else registro.chave)
        if escopo in excluidas:
            empresa.recusa = (
                'a empresa %s está em source.excluded_scopes do mapeamento: ela não recebe'
                ' carga. Tire a linha dela do arquivo de chaves (e revogue a chave), ou tire-a'
                ' de excluded_scopes se a exclusão era engano.' % escopo
            )
        empresas.append(empresa)
    if not args.dry_run:
        _conferir_destino()
        for empresa in empresas:
            if not empresa.ativa:
                continue
            # A chave e DESTA empresa? Chave trocada mandaria os titulos da 297 para o
            # projeto da 301 -- vazamento entre empresas, sem erro nenhum do servidor.
            try:
                dono = cliente.quem_sou(empresa.chave, escopo=empresa.escopo)
            except cliente.ErroAutenticacao as erro:
                empresa.recusa = str(erro)
                continue
            except ErroContextia as erro:
                empresa.falha = 'Contextia indisponível: %s' % erro
                continue
            externo = arquivo_chaves.empresa_da_chave(dono, empresa.escopo)
            if externo is not None:
                empresa.recusa = (
                    'a chave da linha da empresa %s em %s e do projeto %r (empresa %s), não'
                    ' da empresa %s. Confira a linha da empresa %s no arquivo de chaves.'
                    % (
                        empresa.escopo,
                        args.chaves,
                        dono.get('name'),
                        externo,
                        empresa.escopo,
                        empresa.escopo,
                    )
                )
                continue
            empresa.projeto = '%s (id %s)' % (dono.get('name'), dono.get('project_id'))
    origem = carregar_origem(args.source)
    return Preparo(
        mapa=mapa, escopo='todas', datasets=datasets, intervalo=intervalo, origem=origem
    ), empresas


def _cabecalho(
    args: argparse.Namespace, preparo: Preparo, titulo: str, teto_em: str, *extras: str
) -> Historico | None:
    """
    O cabeçalho da carga (cliente, destino, datasets, teto, histórico) e o
    histórico aberto, ou None (seco, ou sem --chaves nem CONTEXTIA_HISTORICO).
    """
    from contextia_sync.intake import cliente

    mapa = preparo.mapa
    print('===== carga completa: %s =====' % titulo)
    print('cliente ........: %s' % (mapa.get('client') or '-'))
    print(
        'destino ........: %s' % ('(seco: nada enviado)' if args.dry_run else cliente.url_destino())
    )
    for linha in extras:
        print(linha)
    print(
        'datasets .......: %d%s'
        % (len(preparo.datasets), ' (de %d)' % len(mapa['datasets']) if args.dataset else '')
    )
    if args.dry_run:
        return None
    caminho = caminho_do_historico(args)
    print(
        'teto de remoção : %g%% de cada dataset%s%s%s'
        % (
            100 * args.max_remocao,
            teto_em,
            ', e contra a maior carga aceita em %d dias' % padroes.JANELA_TETO_REMOCAO_DIAS
            if caminho
            else '',
            ' (remoção em massa PERMITIDA)' if args.max_remocao >= 1 else '',
        )
    )
    print(
        'histórico ......: %s'
        % (
            caminho
            or 'nenhum (sem --chaves nem CONTEXTIA_HISTORICO; sem key: teto sobre o'
            ' dataset inteiro)'
        )
    )
    if not caminho:
        return None
    from contextia_sync.carga.historico import Historico

    return Historico(caminho)


def _conectar(origem: AdaptadorDeOrigem) -> bool:
    """Conecta na origem; False (dito no stderr, nada enviado) se não deu."""
    try:
        origem.conectar()
    except Exception as erro:  # noqa: BLE001 - o adaptador diz a causa
        print(
            '%s: não foi possível conectar na origem (%s: %s). Nada foi enviado.'
            % (PROG, type(erro).__name__, erro),
            file=sys.stderr,
        )
        return False
    return True


def _conferir_catalogo(
    args: argparse.Namespace, preparo: Preparo, quem: str
) -> int | dict[str | None, list[ProblemaCatalogo]]:
    """
    O catálogo da origem antes de ler (o do cadastro sempre; no seco, o de cada
    dataset): a recusa (código de saída) ou, por dataset, os problemas dele.
    `quem` completa "sem ele não há como conferir ..." ('a empresa 297').
    """
    from contextia_sync.carga import completa as carga

    try:
        problemas = carga.conferir_catalogo(
            preparo.mapa, preparo.origem, preparo.datasets if args.dry_run else []
        )
    except ErroConfiguracao as erro:
        return recusar(PROG, erro)
    por_dataset: dict[str | None, list[ProblemaCatalogo]] = {}
    for problema in problemas:
        por_dataset.setdefault(problema.dataset, []).append(problema)
    if problemas:
        print(
            'colunas ........: %d problema(s) no catálogo da origem (antes de ler):'
            % len(problemas)
        )
        for problema in problemas:
            print('  - %s' % problema.texto)
    elif args.dry_run:
        print('colunas ........: todas as do mapeamento existem na origem')
    sys.stdout.flush()
    if None in por_dataset:
        return recusar(
            PROG,
            'o cadastro de empresas (projects) tem coluna(s) que a origem não mostra'
            ' (acima): sem ele não há como conferir %s. Corrija a seção projects do'
            ' mapeamento. Nada foi enviado.' % quem,
        )
    return por_dataset


def _conferir_cadastro_todas(
    args: argparse.Namespace, preparo: Preparo, empresas: list[Empresa]
) -> int | dict[str | None, list[ProblemaCatalogo]]:
    """`conferir_antes_de_ler` de --todas: o catálogo uma vez, o cadastro numa leitura."""
    from contextia_sync.carga import completa as carga

    mapa, origem = preparo.mapa, preparo.origem
    por_dataset = _conferir_catalogo(args, preparo, 'as empresas')
    if isinstance(por_dataset, int):
        return por_dataset
    ativas = [e for e in empresas if e.ativa]
    try:
        achadas = carga.conferir_escopos(mapa, origem, [e.escopo for e in ativas])
    except ErroConfiguracao as erro:
        return recusar(PROG, erro)
    except Exception as erro:  # noqa: BLE001 - o adaptador diz a causa
        print(
            '%s: não foi possível ler o cadastro de empresas para conferir as empresas'
            ' (%s: %s). Nada foi enviado.' % (PROG, type(erro).__name__, erro),
            file=sys.stderr,
        )
        return SAIDA_FALHA
    for empresa in ativas:
        achada = achadas[empresa.escopo]
        if isinstance(achada, carga.ErroEscopoDesconhecido):
            empresa.recusa = str(achada)
        elif achada.recusa:
            # Ela existe: quem decide que empresa carrega e o arquivo de chaves (ver
            # conferir_antes_de_ler).
            empresa.aviso = (
                'a regra de projeto recusa a empresa %s (%s): ela não viraria projeto hoje,'
                ' mas existe no cadastro e a carga segue (quem decide que empresa carrega é'
                ' o arquivo de chaves). Para parar de carregá-la, tire a linha dela do'
                ' arquivo de chaves (e revogue a chave) ou ponha-a em'
                ' source.excluded_scopes.' % (empresa.escopo, achada.recusa)
            )
    sys.stdout.flush()
    return por_dataset


def _empresa_no_fim(empresa: Empresa, seco: bool) -> str:
    """O bloco de uma empresa no fim da execução: os datasets dela e o resumo dela."""
    from contextia_sync.carga import completa as carga

    linhas = ['', '----- empresa %s -----' % empresa.escopo]
    if empresa.recusa is not None:
        linhas.append(
            '%s: empresa %s RECUSADA (código 2): %s' % (PROG, empresa.escopo, empresa.recusa)
        )
    elif empresa.falha is not None:
        linhas.append(
            '%s: empresa %s FALHOU (código 1): %s' % (PROG, empresa.escopo, empresa.falha)
        )
    if not seco and empresa.projeto != '-':
        linhas.append('projeto ........: %s' % empresa.projeto)
    if empresa.aviso:
        linhas.append('AVISO ..........: %s' % empresa.aviso)
    linhas += [carga.linha_de_resultado(r, seco=seco) for r in empresa.resultados]
    if empresa.resultados or empresa.ativa:
        linhas.append(carga.resumo(empresa.escopo, empresa.resultados, empresa.segundos, seco=seco))
    else:
        linhas.append(
            'resumo escopo=%s: nada carregado (código %d)' % (empresa.escopo, empresa.codigo)
        )
    return '\n'.join(linhas)


def main_todas(args: argparse.Namespace) -> int:
    """--todas: 0 todas carregadas, 1 alguma falhou ou ficou de fora, 2 configuração."""
    _sem_segredos_herdados()
    preparado = _preparar_todas_ou_recusar(args)
    if isinstance(preparado, int):
        return preparado
    preparo, empresas = preparado
    historico = _anunciar_todas(args, preparo, empresas)
    inicio = time.monotonic()
    if not _conectar(preparo.origem):
        return SAIDA_FALHA
    try:
        recusa = _ler_datasets_todas(args, preparo, empresas, historico)
    finally:
        _fechar(preparo.origem)
    if recusa is not None:
        return recusa
    return _fim_todas(args, empresas, inicio)


def _preparar_todas_ou_recusar(args: argparse.Namespace) -> int | tuple[Preparo, list[Empresa]]:
    """`preparar_todas`, ou o código da recusa já dita (chave, destino, configuração)."""
    from contextia_sync.intake import cliente
    from contextia_sync.intake.transporte import ErroDestino

    try:
        return preparar_todas(args)
    except (cliente.ErroAutenticacao, ErroDestino) as erro:
        return recusar(PROG, str(erro))
    except ErroConfiguracao as erro:
        return recusar(PROG, erro)


def _anunciar_todas(
    args: argparse.Namespace, preparo: Preparo, empresas: list[Empresa]
) -> Historico | None:
    """O cabeçalho e as empresas de fora, antes de conectar; o histórico aberto, ou None."""
    historico = _cabecalho(
        args,
        preparo,
        '%d empresa(s) de %s, uma leitura por dataset' % (len(empresas), args.chaves),
        ', em cada empresa',
    )
    for empresa in empresas:
        if not empresa.ativa:
            print(
                'empresa %-8s: de fora -- %s'
                % (empresa.escopo, encurtar_linha(empresa.recusa or empresa.falha))
            )
    sys.stdout.flush()
    return historico


def _ler_datasets_todas(
    args: argparse.Namespace, preparo: Preparo, empresas: list[Empresa], historico: Historico | None
) -> int | None:
    """
    Com a origem conectada: o cadastro conferido e cada dataset numa leitura
    repartida entre as empresas. O código da recusa do cadastro, ou None.
    """
    from contextia_sync.carga import completa as carga
    from contextia_sync.carga.todas import carregar_dataset_todas, linha_da_leitura

    mapa, origem = preparo.mapa, preparo.origem
    barra = sys.stderr.isatty()
    conferido = _conferir_cadastro_todas(args, preparo, empresas)
    if isinstance(conferido, int):
        return conferido
    for numero, row in enumerate(preparo.datasets):
        ativas = [e for e in empresas if e.ativa]
        problemas = conferido.get(_normalizado(row))
        if problemas:
            # Seco: coluna que a origem nao tem, dito acima; o dataset nem e lido.
            for empresa in ativas:
                empresa.resultados.append(carga.resultado_sem_leitura(mapa, row, problemas))
            continue
        leitura = carregar_dataset_todas(
            mapa,
            row,
            origem,
            empresas,
            seco=args.dry_run,
            max_remocao=args.max_remocao,
            barra=barra,
            progresso=_progresso,
            intervalo_progresso=preparo.intervalo,
            historico=historico,
            em_voo=args.lotes_em_voo,
            execucao=os.environ.get('CONTEXTIA_EXECUCAO') or None,
        )
        print(linha_da_leitura(leitura, len(ativas)), flush=True)
        if leitura.fora is not None:
            _nao_lidos(preparo.datasets[numero + 1 :])
            break
    return None


def _nao_lidos(resto: list[DatasetDoMapa]) -> None:
    """Os datasets que o Contextia fora deixou sem leitura (nenhum: nada dito)."""
    nomes = [_normalizado(r) for r in resto]
    if nomes:
        print(
            '  %-34s não lidos: o Contextia ficou indisponível (acima)' % ', '.join(nomes),
            flush=True,
        )


def _fim_todas(args: argparse.Namespace, empresas: list[Empresa], inicio: float) -> int:
    """O bloco de cada empresa e a linha de resumo; o código de saída da execução."""
    for empresa in empresas:
        print(_empresa_no_fim(empresa, args.dry_run))
    falhas = [e for e in empresas if e.codigo]
    texto = 'resumo carregar-todas: %d ok, %d com falha, em %ds' % (
        len(empresas) - len(falhas),
        len(falhas),
        round(time.monotonic() - inicio),
    )
    if args.dry_run:
        texto += ' (seco)'
    if falhas:
        texto += ' -- FALHARAM: %s' % '; '.join(
            '%s (código %d: %s)' % (e.escopo, e.codigo, e.motivo_curto()) for e in falhas
        )
    print('\n' + texto)
    return SAIDA_FALHA if falhas else SAIDA_OK


def encurtar_linha(texto: str | None) -> str:
    """Uma linha só, curta: a lista de empresas de fora no início da execução."""
    from contextia_sync.carga.completa import encurtar

    return encurtar(texto or '-', 160)


if __name__ == '__main__':
    sys.exit(main())
