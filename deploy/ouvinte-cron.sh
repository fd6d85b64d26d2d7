#!/usr/bin/env bash
# Uma execucao do ouvinte em modo --once, com o mesmo ambiente da unit do
# systemd (/etc/contextia/ouvinte.env). Chamado pelo deploy/ouvinte.cron.
#
#   OUVINTE_ENV=/etc/contextia/ouvinte.env  OUVINTE_SDK=/opt/contextia/ouvinte
#   OUVINTE_ESTADO=/var/lib/contextia       OUVINTE_LOG=/var/log/contextia/ouvinte-cron.log
#   (os padroes abaixo)
#
# O cron manda e-mail de TUDO que o job escreve, qualquer que seja o codigo de
# saida. Por isso a saida do ouvinte vai para um arquivo temporario, e daqui:
#   - vai SEMPRE para o fim do $OUVINTE_LOG (rotacionado pelo deploy/ouvinte.logrotate);
#   - so e escrita na tela (= e-mail do cron) quando
#       a) o ouvinte saiu com codigo diferente de 0 (1: algum ciclo falhou;
#          2: erro de configuracao; outro: morreu) -- toda execucao que falha
#          manda e-mail, ou
#       b) apareceu uma linha de aviso ou erro ([W ...], [E ...], [C ...]) que a
#          execucao anterior nao tinha (empresa nova sem chave, varredura que
#          ainda nao rodou, estrategia que nao ve exclusao ...). O aviso que se
#          repete a cada 5 minutos vai so para o log: um e-mail por aviso, nao
#          288 por dia. Os avisos da execucao anterior ficam em
#          $OUVINTE_ESTADO/ouvinte-cron-avisos.txt.
#   Execucao ociosa e sem aviso novo: nada na tela, nenhum e-mail.
#
# Sai com o codigo do ouvinte: 0 tudo certo, diferente de 0 algum ciclo falhou.
# SIGTERM/SIGINT/SIGHUP neste script sao repassados ao ouvinte, que termina o
# passo atual e sai; a saida dele vai para o log e para o e-mail do mesmo jeito.
set -euo pipefail

env_file="${OUVINTE_ENV:-/etc/contextia/ouvinte.env}"
sdk="${OUVINTE_SDK:-/opt/contextia/ouvinte}"
estado="${OUVINTE_ESTADO:-/var/lib/contextia}"
log="${OUVINTE_LOG:-/var/log/contextia/ouvinte-cron.log}"
avisos="$estado/ouvinte-cron-avisos.txt"

if [ ! -r "$env_file" ]; then
    echo "ouvinte-cron: não consigo ler $env_file (existe? o usuário $(id -un) está no grupo dele?)" >&2
    exit 2
fi
set -a
# shellcheck source=/dev/null
. "$env_file"
set +a

umask 077
cd "$sdk"

saida="$(mktemp "${TMPDIR:-/tmp}/ouvinte-cron.XXXXXXXX")"
trap 'rm -f "$saida" "$saida.avisos"' EXIT

# Em segundo plano + wait, e nao exec: o script precisa da saida depois que o
# ouvinte termina. O trap repassa o sinal (o bash so roda um trap entre comandos,
# e o wait e interrompivel; um comando em primeiro plano nao seria).
# shellcheck disable=SC2086  # OUVINTE_OPCOES sao varias opcoes, separadas por espaco
"$sdk/.venv/bin/python" "$sdk/ouvinte.py" --once \
    --mapping="$OUVINTE_MAPEAMENTO" --source=generic \
    --chaves="$estado/chaves.tsv" --estado="$estado/estado" \
    ${OUVINTE_OPCOES:-} </dev/null >"$saida" 2>&1 &
filho=$!
trap 'kill -TERM "$filho" 2>/dev/null || true' TERM INT HUP
codigo=0
while :; do
    wait "$filho" && codigo=0 || codigo=$?
    kill -0 "$filho" 2>/dev/null || break    # o wait voltou pelo sinal: o ouvinte ainda sai
done

# Os avisos desta execucao, sem a hora (e sem modulo:linha): "W mensagem".
grep -E '^\[[WEC]' "$saida" | sed -E 's/^\[([WEC])[^]]*\] ?/\1 /' | sort -u \
    >"$saida.avisos" || true
novos="$(comm -13 <(sort -u "$avisos" 2>/dev/null || true) "$saida.avisos")"

motivo=''
if [ "$codigo" -ne 0 ]; then
    motivo="o ouvinte saiu com $codigo (1: algum ciclo falhou; 2: erro de configuração)"
elif [ -n "$novos" ]; then
    motivo="aviso novo, que a execução anterior não tinha (repetido, ele vai só para o log):"
    motivo+=$'\n'"$novos"
fi
veredito=''
if [ -n "$motivo" ]; then
    veredito="$(printf '[ouvinte-cron %s] %s' "$(date '+%Y-%m-%d %H:%M:%S')" "$motivo")"$'\n'
fi

problemas=''
# (o 2> por fora: a falha do proprio >> e do bash, e iria para o e-mail de novo)
if ! { { cat "$saida"; printf '%s' "$veredito"; } >>"$log"; } 2>/dev/null; then
    problemas+="ouvinte-cron: não consigo acrescentar ao log $log (a pasta existe? e do usuário $(id -un)?): a saída vai só neste e-mail"$'\n'
fi
if ! cp "$saida.avisos" "$avisos" 2>/dev/null; then
    problemas+="ouvinte-cron: não consigo gravar $avisos: todo aviso vira e-mail"$'\n'
fi

# A tela e o e-mail do cron: o porque primeiro, depois a saida inteira.
if [ -n "$veredito" ] || [ -n "$problemas" ]; then
    printf '%s%s' "$problemas" "$veredito"
    cat "$saida"
fi
exit "$codigo"
