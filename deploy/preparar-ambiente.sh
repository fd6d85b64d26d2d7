#!/usr/bin/env bash
# Cria o .venv e instala o SDK numa maquina Debian nova.
#
# Uso: bash deploy/preparar-ambiente.sh [--local] [--dev] [--atualizar-pip] [python3] [.venv]
#
#   (nada)           producao: o SDK e o requirements.txt, mais nada
#   --local          mais o Contextia local (FastAPI, uvicorn): o `make demo`
#   --dev            mais o Contextia local, testes, lint e tipos: o `make test`
#   --atualizar-pip  atualiza o pip do .venv antes (por padrao fica o que o venv trouxe)
#
# O SDK entra em modo editavel (`pip install -e .`): os comandos `ouvinte`,
# `contextia-connector`, ... do .venv/bin e os `ouvinte.py`, `connector.py`, ...
# da raiz rodam o mesmo codigo, o desta pasta; atualizar os arquivos basta (so
# dependencia nova pede rodar este script de novo).
set -euo pipefail

uso() {
    sed -n '4,9s/^# \{0,1\}//p' "$0"
}

extra=""
atualizar_pip=0
posicionais=()
for arg in "$@"; do
    case "$arg" in
        --local) [ "$extra" = dev ] || extra=local ;;
        --dev) extra=dev ;;
        --atualizar-pip) atualizar_pip=1 ;;
        -h|--help) uso; exit 0 ;;
        -*) echo "preparar-ambiente: opcao desconhecida: $arg" >&2; uso >&2; exit 2 ;;
        *) posicionais+=("$arg") ;;
    esac
done
if [ "${#posicionais[@]}" -gt 2 ]; then
    echo "preparar-ambiente: argumentos demais: ${posicionais[*]}" >&2
    uso >&2
    exit 2
fi
python="${posicionais[0]:-python3}"
venv="${posicionais[1]:-.venv}"

# O pyproject.toml e os requirements*.txt estao na raiz do repositorio.
raiz="$(cd "$(dirname "$0")/.." && pwd)"

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
if [ "$atualizar_pip" -eq 1 ]; then
    "$venv/bin/python" -m pip install -q --upgrade pip
fi

alvo="$raiz"
[ -z "$extra" ] || alvo="${raiz}[${extra}]"
"$venv/bin/python" -m pip install -q -e "$alvo"
echo "ambiente pronto em $venv (${extra:-producao})"
