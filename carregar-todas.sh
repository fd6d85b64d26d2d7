#!/usr/bin/env bash
# CARREGAR-TODAS -- a carga completa de cada empresa do arquivo de chaves.
#
#   CONTEXTIA_MAPPING=mappings/<cliente>.json bash carregar-todas.sh CHAVES [--dry-run] [opcoes do connector]
#
# Ambiente:
#   CONTEXTIA_MAPPING  o mapeamento (obrigatorio)
#   CONTEXTIA_PYTHON   o python que roda o connector (padrao: python3)
#   CONTEXTIA_COLETA   a raiz do SDK, onde esta o connector.py (padrao: a pasta deste script)
#   CONTEXTIA_SOURCE   o adaptador de origem (padrao: generic)
#   CONTEXTIA_HISTORICO  o historico de cargas aceitas (padrao: CHAVES.historico.json);
#                      no dataset sem key o teto de remocao compara com ele
# Opcoes depois de CHAVES vao para cada connector.py (ex.: --dry-run, --max-remocao=1).
#
# A chave de cada empresa vai no AMBIENTE do connector (CONTEXTIA_API_KEY), nunca
# na linha de comando: ali ela apareceria no `ps` de qualquer usuario.
# Uma empresa que falha nao para as outras; o resumo diz quais falharam.
#
# Saida: 0 todas ok; 1 alguma empresa falhou; 2 erro de configuracao (nada rodou).

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
coleta="${CONTEXTIA_COLETA:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
fonte="${CONTEXTIA_SOURCE:-generic}"
mapeamento_arg="${CONTEXTIA_MAPPING:-}"

if [ -z "$mapeamento_arg" ]; then
    echo "carregar-todas: falta CONTEXTIA_MAPPING (o mapeamento do cliente, ex.: mappings/demo.json)." >&2
    exit 2
fi
if [ ! -f "$coleta/connector.py" ]; then
    echo "carregar-todas: $coleta/connector.py nao existe -- CONTEXTIA_COLETA deve apontar para a raiz do SDK." >&2
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
cd "$coleta"
# Mesmo nome que contextia_sync/historico.py:caminho_padrao (o ouvinte le dali).
export CONTEXTIA_HISTORICO="${CONTEXTIA_HISTORICO:-$chaves.historico.json}"

# Permissao e formato conferidos pelo MESMO codigo que o provisionar e o ouvinte
# usam. Arquivo aberto para outros ou linha corrompida param tudo aqui: pular a
# linha ruim deixaria uma empresa sem carga, calada.
if ! escopos="$("$python" -m contextia_sync.chaves verificar "$chaves")"; then
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
    CONTEXTIA_API_KEY="$chave" "$python" connector.py \
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
