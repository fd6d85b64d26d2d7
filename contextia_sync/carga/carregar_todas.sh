#!/usr/bin/env bash
# CARREGAR-TODAS -- a carga completa de cada empresa do arquivo de chaves.
#
# O corpo do `carregar-todas.sh` da raiz e do comando `contextia-carregar-todas`:
# mora no pacote (vai junto no `pip install`), e roda o connector e o
# verificador de chaves como modulos (`python -m`), sem precisar do repositorio.
# Uso, ambiente e codigos de saida: o cabecalho do carregar-todas.sh da raiz.
#
# CONTEXTIA_COLETA e a pasta que CONTEM o pacote contextia_sync (padrao: a do
# pacote onde este script esta); vai na frente do PYTHONPATH dos filhos.

set -euo pipefail

uso() {
    echo "uso: CONTEXTIA_MAPPING=mappings/<cliente>.json bash carregar-todas.sh CHAVES [--dry-run] [opções do connector]" >&2
    echo "(a ajuda inteira, com o ambiente e os códigos de saída: bash carregar-todas.sh --help)" >&2
    exit 2
}

python="${CONTEXTIA_PYTHON:-python3}"
# Este script e contextia_sync/carga/carregar_todas.sh: duas pastas acima esta
# quem contem o pacote (a raiz do repositorio, ou o site-packages).
coleta="${CONTEXTIA_COLETA:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"

[ "$#" -ge 1 ] || uso
case "$1" in
    # A ajuda e a versao moram no pacote (contextia_sync/cli/carregar_todas.py):
    # o mesmo texto, e os mesmos codigos de saida, do comando instalado.
    -h|--help|--version)
        PYTHONPATH="$coleta${PYTHONPATH:+:$PYTHONPATH}" exec "$python" \
            -m contextia_sync.cli.carregar_todas "$1" ;;
    # --chaves ARQ / --chaves=ARQ: o nome que as outras ferramentas usam.
    --chaves=*) chaves_arg="${1#--chaves=}"; shift ;;
    --chaves) [ "$#" -ge 2 ] || uso; chaves_arg="$2"; shift 2 ;;
    -*) uso ;;
    *) chaves_arg="$1"; shift ;;
esac
[ -n "$chaves_arg" ] || uso
fonte="${CONTEXTIA_SOURCE:-generic}"
mapeamento_arg="${CONTEXTIA_MAPPING:-}"

if [ -z "$mapeamento_arg" ]; then
    echo "carregar-todas: falta CONTEXTIA_MAPPING (o mapeamento do cliente, ex.: mappings/demo.json)." >&2
    exit 2
fi
if [ ! -f "$coleta/contextia_sync/__init__.py" ]; then
    echo "carregar-todas: $coleta/contextia_sync não existe -- CONTEXTIA_COLETA deve apontar para a pasta que contém o pacote contextia_sync." >&2
    exit 2
fi
# So a existencia: pasta, link e arquivo de outro dono sao recusados (com a
# correcao) pelo leitor de chaves, logo abaixo -- o mesmo do resto do SDK.
if [ ! -e "$chaves_arg" ] && [ ! -L "$chaves_arg" ]; then
    echo "carregar-todas: arquivo de chaves não existe: $chaves_arg -- rode o provisionar.py antes." >&2
    exit 2
fi

# Caminhos absolutos antes do cd: relativos eram relativos a quem chamou.
chaves="$(cd "$(dirname "$chaves_arg")" && pwd)/$(basename "$chaves_arg")"
case "$mapeamento_arg" in
    /*) mapeamento="$mapeamento_arg" ;;
    *) mapeamento="$(pwd)/$mapeamento_arg" ;;
esac
coleta="$(cd "$coleta" && pwd)"
cd "$coleta"
# O pacote de CONTEXTIA_COLETA, e nao outro que o python ache antes.
export PYTHONPATH="$coleta${PYTHONPATH:+:$PYTHONPATH}"
# Mesmo nome que contextia_sync/carga/historico.py:caminho_padrao (o ouvinte le dali).
export CONTEXTIA_HISTORICO="${CONTEXTIA_HISTORICO:-$chaves.historico.json}"

# O arquivo de chaves so e lido por contextia_sync/provisionamento/chaves.py, o
# MESMO leitor do provisionar e do ouvinte: este script nunca o abre. Permissao
# aberta ou linha que ele nao le param tudo aqui -- pular a linha ruim deixaria
# uma empresa sem carga, calada; le-la de outro jeito faria o bash carregar uma
# "empresa" que o resto do SDK nao conhece.
if ! escopos="$("$python" -m contextia_sync.provisionamento.chaves verificar "$chaves")"; then
    echo "carregar-todas: arquivo de chaves recusado (acima); nada foi carregado." >&2
    exit 2
fi
total="$(printf '%s\n' "$escopos" | grep -c . || true)"
echo "===== carregar-todas: $total empresa(s) de $chaves ====="

# SIGTERM/SIGINT/SIGHUP (o ouvinte parando, o kernel avisando que o ouvinte
# morreu -- PR_SET_PDEATHSIG --, Ctrl-C) vao tambem para o connector em curso.
# Sem isto o bash morreria sozinho e o connector seguiria orfao, podendo mandar
# o `complete` de uma carga que ninguem mais acompanha. O connector roda em
# segundo plano com `wait` porque o bash so atende um trap depois que o comando
# em primeiro plano termina; o `wait` e interrompido na hora.
filho=''
# Chamada pelos traps logo abaixo (o shellcheck nao ve a chamada dentro da string do trap).
# shellcheck disable=SC2329
encerrar() {
    trap - TERM INT HUP
    # Quem lia a nossa saida pode ter morrido: escrever no pipe daria SIGPIPE
    # antes de o connector ser encerrado. Primeiro o sinal, depois a mensagem.
    trap '' PIPE
    if [ -n "$filho" ]; then
        kill -TERM "$filho" 2>/dev/null || true
        wait "$filho" 2>/dev/null || true
        echo "carregar-todas: recebi SIG$1 -- connector (pid $filho) encerrado; a empresa em curso e as seguintes não tiveram complete neste dataset (nada removido nelas)." >&2 || true
    else
        echo "carregar-todas: recebi SIG$1 -- encerrado." >&2 || true
    fi
    exit "$2"
}
trap 'encerrar TERM 143' TERM
trap 'encerrar INT 130' INT
trap 'encerrar HUP 129' HUP

# UM connector para todas as empresas (--todas): uma leitura por dataset, em
# ordem de empresa, repartida para a chave de cada uma; cada empresa com o seu
# sync, o seu complete e o seu teto, e o resumo por empresa no fim. Ele le as
# chaves do arquivo pelo mesmo leitor do SDK (nunca passam por este bash nem
# pela linha de comando) e se livra de qualquer segredo herdado no ambiente.
"$python" -m contextia_sync.cli.conector --mapping="$mapeamento" --source="$fonte" \
    --chaves="$chaves" --todas "$@" </dev/null &
filho=$!
codigo=0
wait "$filho" || codigo=$?
filho=''
case "$codigo" in
    0|1) exit "$codigo" ;;
    2) echo "carregar-todas: o connector recusou a configuração (acima); nada foi carregado." >&2
       exit 2 ;;
    *) echo "carregar-todas: o connector saiu com $codigo sem terminar (acima); as empresas que ele não fechou ficam para a próxima carga." >&2
       exit 1 ;;
esac
