#!/usr/bin/env bash
# Cria o .venv e instala o que o SDK precisa numa maquina Debian nova.
# Uso: bash deploy/preparar-ambiente.sh [python3] [.venv]
set -euo pipefail

python="${1:-python3}"
venv="${2:-.venv}"

# Pacotes do sistema: python3-venv (o Debian nao o traz com o python3) e o
# unixODBC, sem o qual o driver do SQL Server (pyodbc) nem importa.
faltam=()
"$python" -c 'import venv, ensurepip' 2>/dev/null || faltam+=(python3-venv)
ldconfig -p 2>/dev/null | grep -q 'libodbc.so.2' || faltam+=(unixodbc)
if [ "${#faltam[@]}" -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        echo "instalando pacotes do sistema: ${faltam[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${faltam[@]}" >/dev/null
    else
        echo "faltam pacotes do sistema: ${faltam[*]}" >&2
        echo "rode como root: apt-get install ${faltam[*]}" >&2
        exit 1
    fi
fi

if [ ! -x "$venv/bin/python" ]; then
    echo "criando $venv com $python"
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -r requirements-dev.txt
echo "ambiente pronto em $venv"
