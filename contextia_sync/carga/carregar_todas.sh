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
    echo "uso: CONTEXTIA_MAPPING=mappings/<cliente>.json bash carregar-todas.sh CHAVES [--dry-run] [opcoes do connector]" >&2
    exit 2
}

[ "$#" -ge 1 ] || uso
chaves_arg="$1"
shift
case "$chaves_arg" in
    -*) uso ;;
esac

python="${CONTEXTIA_PYTHON:-python3}"
# Este script e contextia_sync/carga/carregar_todas.sh: duas pastas acima esta
# quem contem o pacote (a raiz do repositorio, ou o site-packages).
coleta="${CONTEXTIA_COLETA:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
fonte="${CONTEXTIA_SOURCE:-generic}"
mapeamento_arg="${CONTEXTIA_MAPPING:-}"

if [ -z "$mapeamento_arg" ]; then
    echo "carregar-todas: falta CONTEXTIA_MAPPING (o mapeamento do cliente, ex.: mappings/demo.json)." >&2
    exit 2
fi
if [ ! -f "$coleta/contextia_sync/__init__.py" ]; then
    echo "carregar-todas: $coleta/contextia_sync nao existe -- CONTEXTIA_COLETA deve apontar para a pasta que contem o pacote contextia_sync." >&2
    exit 2
fi
if [ ! -f "$chaves_arg" ]; then
    echo "carregar-todas: arquivo de chaves nao existe: $chaves_arg -- rode o provisionar.py antes." >&2
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

# Permissao e formato conferidos pelo MESMO codigo que o provisionar e o ouvinte
# usam. Arquivo aberto para outros ou linha corrompida param tudo aqui: pular a
# linha ruim deixaria uma empresa sem carga, calada.
if ! escopos="$("$python" -m contextia_sync.provisionamento.chaves verificar "$chaves")"; then
    echo "carregar-todas: arquivo de chaves recusado (acima); nada foi carregado." >&2
    exit 2
fi
total="$(printf '%s\n' "$escopos" | grep -c . || true)"
echo "===== carregar-todas: $total empresa(s) de $chaves ====="

ok=()
falhas=()
inicio=$SECONDS
while IFS=$'\t' read -r escopo chave _resto || [ -n "$escopo" ]; do
    # Comentario e linha em branco: o verificador ja garantiu que o resto e valido.
    case "$escopo" in
        '' | '#'*) continue ;;
    esac
    # Arquivo que passou por um editor do Windows: o CR grudaria na chave.
    chave="${chave%$'\r'}"
    echo
    echo "----- empresa $escopo -----"
    codigo=0
    CONTEXTIA_API_KEY="$chave" "$python" -m contextia_sync.cli.conector \
        --mapping="$mapeamento" --source="$fonte" --scope="$escopo" "$@" </dev/null || codigo=$?
    if [ "$codigo" -eq 0 ]; then
        ok+=("$escopo")
    else
        falhas+=("$escopo (saiu com $codigo)")
    fi
done <"$chaves"

echo
resumo="resumo carregar-todas: ${#ok[@]} ok, ${#falhas[@]} com falha, em $((SECONDS - inicio))s"
if [ "${#falhas[@]}" -gt 0 ]; then
    lista="$(printf '%s; ' "${falhas[@]}")"
    echo "$resumo -- FALHARAM: ${lista%; }"
    exit 1
fi
echo "$resumo"
