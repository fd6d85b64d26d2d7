#!/usr/bin/env bash
# Uma execucao do ouvinte em modo --once, com o mesmo ambiente da unit do
# systemd (/etc/contextia/ouvinte.env). Chamado pelo deploy/ouvinte.cron.
#
#   OUVINTE_ENV=/etc/contextia/ouvinte.env  OUVINTE_SDK=/opt/contextia/ouvinte
#   OUVINTE_ESTADO=/var/lib/contextia       (os padroes abaixo)
#
# Sai com o codigo do ouvinte: 0 tudo certo, diferente de 0 algum ciclo falhou.
set -euo pipefail

env_file="${OUVINTE_ENV:-/etc/contextia/ouvinte.env}"
sdk="${OUVINTE_SDK:-/opt/contextia/ouvinte}"
estado="${OUVINTE_ESTADO:-/var/lib/contextia}"

if [ ! -r "$env_file" ]; then
    echo "ouvinte-cron: nao consigo ler $env_file (existe? o usuario $(id -un) esta no grupo dele?)" >&2
    exit 2
fi
set -a
# shellcheck source=/dev/null
. "$env_file"
set +a

umask 077
cd "$sdk"
# shellcheck disable=SC2086  # OUVINTE_OPCOES sao varias opcoes, separadas por espaco
exec "$sdk/.venv/bin/python" "$sdk/ouvinte.py" --once \
    --mapping="$OUVINTE_MAPEAMENTO" --source=generic \
    --chaves="$estado/chaves.tsv" --estado="$estado/estado" \
    ${OUVINTE_OPCOES:-}
