#!/usr/bin/env bash
# Cria o .venv e instala o SDK numa maquina Debian nova.
#
# Uso: bash deploy/preparar-ambiente.sh [opções] [python3] [.venv]
#
#   (nada)           produção: o SDK e o requirements.txt, mais nada (sem pytest, sem shellcheck)
#   --local          mais o Contextia local (FastAPI, uvicorn): o `make demo`
#   --dev            mais o Contextia local, testes, lint e tipos e o mysqlclient: o `make test`
#   --wheels DIR     sem internet: instala só do wheelhouse DIR (pip --no-index --find-links DIR)
#   --usuario NOME   o usuário do serviço, que tem de conseguir rodar o .venv (padrão contextia)
#   --atualizar-pip  atualiza o pip do .venv antes (por padrão fica o que o venv trouxe)
#   -h, --help       mostra esta ajuda e sai
#
# Códigos de saída: 0 pronto; 1 faltam pacotes do sistema ou o pip falhou;
# 2 uso errado, ou um interpretador (ou .venv) que o usuário do serviço não roda.
#
# O SDK entra em modo editavel (`pip install -e .`): os comandos `ouvinte`,
# `contextia-connector`, ... do .venv/bin e os `ouvinte.py`, `connector.py`, ...
# da raiz rodam o mesmo codigo, o desta pasta; atualizar os arquivos basta (so
# dependencia nova pede rodar este script de novo).
#
# O wheelhouse (--wheels) e montado numa maquina com internet, com o mesmo
# Debian e o mesmo Python do cliente (os drivers tem partes compiladas):
#   python3 -m pip wheel --wheel-dir wheels -r requirements.txt 'setuptools>=70.1'
# (com --local, acrescente -r requirements-local.txt). O setuptools e o que
# constroi o modo editavel aqui, sem rede. docs/implantacao.md, Etapa 1.
#
# O usuario do servico (User= da deploy/ouvinte.service) roda o .venv/bin/python:
# um venv feito de um Python que so o root alcanca (o pyenv em /root, modo 700)
# subiria aqui e cairia no servico com "Permission denied". Se esse usuario
# existe, este script roda o interpretador COMO ele antes de criar o .venv, o
# .venv existente e, no fim, o import do SDK -- e recusa com a correcao. Sem o
# usuario (maquina de desenvolvimento), so avisa quando "outros" nao chegam ao
# interpretador; com --usuario explicito, o usuario tem de existir.
set -euo pipefail

uso() {
    sed -n '4,15s/^# \{0,1\}//p' "$0"
}

recusar() {
    echo "preparar-ambiente: $*" >&2
    exit 2
}

extra=""
atualizar_pip=0
wheels=""
usuario="contextia"
usuario_explicito=0
posicionais=()
while [ "$#" -gt 0 ]; do
    arg="$1"
    shift
    case "$arg" in
        --local) [ "$extra" = dev ] || extra=local ;;
        --dev) extra=dev ;;
        --atualizar-pip) atualizar_pip=1 ;;
        --wheels=*) wheels="${arg#--wheels=}" ;;
        --wheels) [ "$#" -ge 1 ] || recusar "--wheels precisa da pasta do wheelhouse"
                  wheels="$1"; shift ;;
        --usuario=*) usuario="${arg#--usuario=}"; usuario_explicito=1 ;;
        --usuario) [ "$#" -ge 1 ] || recusar "--usuario precisa do nome do usuário do serviço"
                   usuario="$1"; usuario_explicito=1; shift ;;
        -h|--help) uso; exit 0 ;;
        -*) echo "preparar-ambiente: opção desconhecida: $arg" >&2; uso >&2; exit 2 ;;
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
# Absoluto: as conferencias rodam de / (o cwd de quem chama nao conta para o servico).
case "$venv" in
    /*) ;;
    *) venv="$(pwd)/$venv" ;;
esac

# O pyproject.toml e os requirements*.txt estao na raiz do repositorio.
raiz="$(cd "$(dirname "$0")/.." && pwd)"

pip_fonte=()
if [ -n "$wheels" ]; then
    [ -d "$wheels" ] || recusar "o wheelhouse $wheels não existe (--wheels aponta para a pasta com os .whl; monte-a com 'pip wheel', ver docs/implantacao.md)."
    wheels="$(cd "$wheels" && pwd)"
    # Sem indice nenhum: so o que esta na pasta. Nada sai para a rede.
    pip_fonte=(--no-index --find-links "$wheels")
fi

# ----------------------------------------------------- o usuario do servico
usuario_existe=0
if id -u "$usuario" >/dev/null 2>&1; then
    usuario_existe=1
elif [ "$usuario_explicito" -eq 1 ]; then
    recusar "o usuário $usuario não existe. Crie-o antes (useradd --system ... $usuario, docs/implantacao.md Etapa 1) ou confira --usuario."
fi

# Da para rodar algo COMO o usuario do servico? (sendo ele, ou root com runuser)
pode_trocar=0
if [ "$usuario_existe" -eq 1 ] && { [ "$(id -un)" = "$usuario" ] || [ "$(id -u)" -eq 0 ]; }; then
    pode_trocar=1
fi

# 0 se o usuario do servico consegue rodar "$@" (de /, para o cwd nao contar).
como_usuario() {
    if [ "$(id -un)" = "$usuario" ]; then
        (cd / && "$@") >/dev/null 2>&1
    else
        (cd / && runuser -u "$usuario" -- "$@") >/dev/null 2>&1
    fi
}

# 0 se "outros" atravessam cada pasta do caminho (o dado e o real, sem links)
# e podem executar o arquivo.
outros_alcancam() {
    local caminho pasta
    for caminho in "$(cd "$(dirname "$1")" && pwd)/$(basename "$1")" "$(readlink -f "$1")"; do
        pasta="$(dirname "$caminho")"
        while [ "$pasta" != / ]; do
            [ "$(( 0$(stat -c %a "$pasta") & 1 ))" -ne 0 ] || return 1
            pasta="$(dirname "$pasta")"
        done
    done
    [ "$(( 0$(stat -L -c %a "$1") & 1 ))" -ne 0 ]
}

# Confere que o usuario do servico roda o interpretador $1 ($2: o que ele e;
# $3: a correcao). Recusa (saida 2) se nao roda; sem o usuario, so avisa.
conferir_interpretador() {
    local interpretador="$1" oque="$2" correcao="$3" real
    real="$(readlink -f "$interpretador")"
    if [ "$pode_trocar" -eq 1 ]; then
        como_usuario "$interpretador" -c 'import sys' && return 0
        recusar "o usuário $usuario não consegue rodar $oque ($interpretador -> $real): uma pasta no caminho não o deixa passar (um Python no home de alguém, como o pyenv em /root, modo 700). O serviço cairia na subida com 'Permission denied'. Correção: $correcao"
    fi
    outros_alcancam "$interpretador" && return 0
    if [ "$usuario_existe" -eq 1 ]; then
        recusar "$oque ($interpretador -> $real) não é executável por outros usuários, e sem root não dá para conferir como $usuario. Correção: $correcao"
    fi
    echo "preparar-ambiente: AVISO: $oque ($real) não é executável por outros usuários: serve para quem o criou, não para um serviço (o usuário $usuario não existe aqui). Para o serviço: $correcao" >&2
}

sistema="/usr/bin/python3"
interpretador="$(command -v "$python" || true)"
[ -n "$interpretador" ] || recusar "o interpretador $python não existe. Use o do sistema: $sistema (apt-get install python3)."
interpretador="$(cd "$(dirname "$interpretador")" && pwd)/$(basename "$interpretador")"

# Pacotes do sistema: python3-venv (o Debian nao o traz com o python3) e o
# unixODBC, sem o qual o driver do SQL Server (pyodbc) nem importa.
faltam=()
"$python" -c 'import venv, ensurepip' 2>/dev/null || faltam+=(python3-venv)
# Sem `grep -q`: ele sai no primeiro achado, o ldconfig leva SIGPIPE, e o pipefail
# dava o unixODBC instalado por faltando, de vez em quando (visto na suite).
ldconfig -p 2>/dev/null | grep 'libodbc.so.2' >/dev/null || faltam+=(unixodbc)
# O [dev] compila o mysqlclient (a suite roda o adaptador com os dois drivers do
# MariaDB): precisa dos cabecalhos da libmariadb e do pkg-config.
if [ "$extra" = dev ]; then
    command -v pkg-config >/dev/null || faltam+=(pkg-config)
    pkg-config --exists libmariadb 2>/dev/null || pkg-config --exists mysqlclient 2>/dev/null \
        || faltam+=(libmariadb-dev)
fi
if [ "${#faltam[@]}" -gt 0 ]; then
    if [ -z "$wheels" ] && [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
        echo "instalando pacotes do sistema: ${faltam[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${faltam[@]}" >/dev/null
    else
        echo "faltam pacotes do sistema: ${faltam[*]}" >&2
        echo "rode como root: apt-get install ${faltam[*]} (sem internet: do espelho ou da mídia do Debian)" >&2
        exit 1
    fi
fi

if [ ! -x "$venv/bin/python" ]; then
    conferir_interpretador "$interpretador" "o interpretador $python" \
        "crie o .venv com o Python do sistema: bash deploy/preparar-ambiente.sh $sistema $venv"
    echo "criando $venv com $python"
    "$python" -m venv "$venv"
else
    conferir_interpretador "$venv/bin/python" "o $venv existente" \
        "recrie-o com o Python do sistema: rm -rf $venv && bash deploy/preparar-ambiente.sh $sistema $venv"
fi
if [ "$atualizar_pip" -eq 1 ]; then
    "$venv/bin/python" -m pip install -q "${pip_fonte[@]}" --upgrade pip
fi

alvo="$raiz"
[ -z "$extra" ] || alvo="${raiz}[${extra}]"
"$venv/bin/python" -m pip install -q "${pip_fonte[@]}" -e "$alvo"

# O modo editavel le o SDK desta pasta: o usuario do servico tem de chegar a ela.
if [ "$pode_trocar" -eq 1 ] && ! como_usuario "$venv/bin/python" -c 'import contextia_sync'; then
    recusar "o usuário $usuario roda $venv/bin/python, mas não consegue importar o SDK de $raiz: essa pasta (ou uma acima dela) não o deixa ler. Correção: ponha o SDK numa pasta que ele alcance, como /opt/contextia/ouvinte (docs/implantacao.md, Etapa 1), e rode este script de lá."
fi
echo "ambiente pronto em $venv (${extra:-producao}${wheels:+, do wheelhouse $wheels})"
