#!/usr/bin/env bash
# A saude do ouvinte para o Nagios/Icinga/Zabbix/NRPE/cron: uma casca sobre
# `python -m contextia_sync.saude` (o mesmo que `ouvinte.py --saude`), que le o
# <estado>/ouvinte-status.json que o ouvinte reescreve a cada volta e responde
# UMA linha, com os dados de desempenho depois do "|":
#
#   bash deploy/verificar-saude.sh [ESTADO] [MINUTOS] [opcoes da saude ...]
#
#   ESTADO    o --estado do ouvinte (padrao /var/lib/contextia/estado)
#   MINUTOS   idade maxima do status (o --max-idade da saude). Sem ele, o padrao
#             dela: o maior entre 3 intervalos de dados e 20 min -- mais que a
#             espera maxima entre falhas (15 min) e que o cron de 5 min do --once
#   o resto vai direto para a saude: --max-falhas 5, --sem-pid, ...
#             (ouvinte.py --saude --help lista as regras e os limites)
#
# Codigos (convencao dos plugins de monitoramento): 0 OK, 1 ALERTA, 2 CRITICO,
# 3 DESCONHECIDO (argumento invalido, pasta de estado que nao existe ou que este
# usuario nao le). As regras: docs/implantacao.md, Etapa 6.
#
# O python: $OUVINTE_PYTHON, senao o .venv do SDK, senao o python3 do PATH (a
# saude so usa a biblioteca padrao).
set -uo pipefail

sdk="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
uso='uso: verificar-saude.sh [ESTADO] [MINUTOS] [opções da saúde]'

estado='/var/lib/contextia/estado'
if [ "$#" -ge 1 ] && [[ "$1" != -* ]]; then
    [ -n "$1" ] && estado="$1"
    shift
fi
argumentos=(--estado "$estado")
if [ "$#" -ge 1 ] && [[ "$1" != -* ]]; then
    if [ -n "$1" ]; then
        if ! [[ "$1" =~ ^[0-9]+$ ]] || [ "$1" -lt 1 ]; then
            echo "OUVINTE DESCONHECIDO - argumento inválido: MINUTOS tem de ser um inteiro de 1 para cima, e e '$1' ($uso)"
            exit 3
        fi
        argumentos+=(--max-idade "${1}m")
    fi
    shift
fi

python="${OUVINTE_PYTHON:-}"
if [ -z "$python" ]; then
    if [ -x "$sdk/.venv/bin/python" ]; then
        python="$sdk/.venv/bin/python"
    else
        python="$(command -v python3 || true)"
    fi
fi
if [ -z "$python" ]; then
    echo "OUVINTE DESCONHECIDO - não achei um python (nem $sdk/.venv/bin/python, nem python3 no PATH; ou defina OUVINTE_PYTHON)"
    exit 3
fi

# Captura por log com o ouvinte parado (o --once do cron entre uma execução e
# outra): a saúde mede o log na origem, com o login de CONTEXTIA_ORIGEM. Fora do
# ambiente, ela vem do arquivo do serviço ($OUVINTE_ENV, padrão
# /etc/contextia/ouvinte.env) se este usuário o lê -- só essa variável, nenhum
# outro segredo. Sem ela, a saúde diz que não mediu (ALERTA), nunca adivinha.
arquivo_env="${OUVINTE_ENV:-/etc/contextia/ouvinte.env}"
if [ -z "${CONTEXTIA_ORIGEM:-}" ] && [ -r "$arquivo_env" ]; then
    linha="$(grep -E '^[[:space:]]*(export[[:space:]]+)?CONTEXTIA_ORIGEM=' "$arquivo_env" | tail -n 1)"
    if [ -n "$linha" ]; then
        valor="${linha#*=}"
        valor="${valor%$'\r'}"
        case "$valor" in
            \'*\') valor="${valor:1:${#valor}-2}" ;;
            \"*\") valor="${valor:1:${#valor}-2}" ;;
        esac
        export CONTEXTIA_ORIGEM="$valor"
    fi
fi

export PYTHONPATH="$sdk${PYTHONPATH:+:$PYTHONPATH}"
saida="$("$python" -m contextia_sync.saude "${argumentos[@]}" "$@")"
codigo=$?
# A saude sempre responde com uma linha "OUVINTE ..." (ou a ajuda, ou a versao).
# Sem ela, nem chegou a rodar (python quebrado, SDK incompleto): o erro saiu na
# stderr, e para o monitoramento isso e DESCONHECIDO, nao o codigo do python.
case "$saida" in
    'OUVINTE '* | 'uso: '* | *'(contextia_sync '*)
        printf '%s\n' "$saida"
        exit "$codigo"
        ;;
esac
echo "OUVINTE DESCONHECIDO - a saúde não rodou com $python (código $codigo; o erro saiu na stderr)"
exit 3
