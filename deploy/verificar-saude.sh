#!/usr/bin/env bash
# Alerta do ouvinte: o arquivo de status e reescrito a cada volta do laco; se
# ele envelheceu, o ouvinte parou (ou travou). Para Nagios/Zabbix/cron.
#
#   bash deploy/verificar-saude.sh [/var/lib/contextia/estado] [MINUTOS (20)]
#
# Codigos (convencao Nagios): 0 OK, 1 ALERTA (falhas seguidas no ultimo
# ciclo), 2 CRITICO (status velho ou ausente).
#
# Padrao de 20 min: mais que o intervalo do ciclo e que a espera maxima entre
# tentativas depois de falhas (15 min), quando o status fica parado de proposito.
set -euo pipefail

estado="${1:-/var/lib/contextia/estado}"
minutos="${2:-20}"
status="$estado/ouvinte-status.txt"

if [ ! -e "$status" ]; then
    echo "CRITICO: $status nao existe -- o ouvinte nunca completou um ciclo aqui"
    exit 2
fi
if [ -z "$(find "$status" -mmin "-$minutos")" ]; then
    echo "CRITICO: $status nao e atualizado ha mais de $minutos min -- o ouvinte parou"
    echo "  veja: systemctl status ouvinte; journalctl -u ouvinte -n 100"
    exit 2
fi
falhas="$(sed -n 's/^falhas seguidas[ .]*: *\([0-9][0-9]*\).*/\1/p' "$status" | head -n 1)"
if [ -n "$falhas" ] && [ "$falhas" -gt 0 ]; then
    echo "ALERTA: $falhas falha(s) seguida(s) de ciclo"
    grep -i 'falha\|erro' "$status" | head -n 5 || true
    exit 1
fi
echo "OK: ouvinte vivo (status de $(sed -n 's/^atualizado em[ .]*: *//p' "$status" | head -n 1))"
