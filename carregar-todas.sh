#!/usr/bin/env bash
# CARREGAR-TODAS -- a carga completa de cada empresa do arquivo de chaves.
#
#   CONTEXTIA_MAPPING=mappings/<cliente>.json bash carregar-todas.sh CHAVES [--dry-run] [opcoes do connector]
#   (CHAVES também como --chaves=CHAVES; `--help` mostra a ajuda, `--version` a versão)
#
# Instalado com pip, o mesmo programa e `contextia-carregar-todas CHAVES ...`.
#
# Ambiente:
#   CONTEXTIA_MAPPING  o mapeamento (obrigatorio)
#   CONTEXTIA_PYTHON   o python que roda o connector (padrao: python3)
#   CONTEXTIA_COLETA   a pasta que contem o pacote contextia_sync, posta no PYTHONPATH
#                      do connector (padrao: a do pacote que roda; aqui, esta pasta)
#   CONTEXTIA_SOURCE   o adaptador de origem (padrao: generic)
#   CONTEXTIA_HISTORICO  o historico de cargas aceitas (padrao: CHAVES.historico.json);
#                      no dataset sem key o teto de remocao compara com ele
# Opcoes depois de CHAVES vao para o connector (ex.: --dry-run, --max-remocao=1).
#
# Um connector so (`connector --todas`) carrega todas as empresas: UMA leitura por
# dataset, em ordem de empresa, repartida para a chave de cada uma -- cada empresa
# com o seu sync, o seu complete e o seu teto de remocao. Uma empresa so ainda
# carrega com `connector.py --scope=ESCOPO`.
# O arquivo de chaves e lido so pelo leitor do SDK (contextia_sync/provisionamento/
# chaves.py), o mesmo do ouvinte e do provisionar: as mesmas linhas, as mesmas recusas.
# As chaves nunca passam por este bash nem pela linha de comando (ali apareceriam
# no `ps` de qualquer usuario): o connector as le do arquivo.
# Uma empresa que falha nao para as outras; o resumo diz quais falharam.
# SIGTERM, SIGINT ou SIGHUP encerram tambem o connector em curso (nenhum fica orfao).
#
# Saida: 0 todas ok; 1 alguma empresa falhou; 2 erro de configuracao (nada rodou);
# 143/130/129 parado por SIGTERM/SIGINT/SIGHUP.
#
# O corpo mora no pacote (contextia_sync/carga/carregar_todas.sh), para valer
# tambem sem o repositorio; este arquivo so o chama, no mesmo processo.

set -euo pipefail

exec bash "$(dirname "${BASH_SOURCE[0]}")/contextia_sync/carga/carregar_todas.sh" "$@"
