"""
Os arquivos de status, trocados inteiros a cada volta do laço:

    ouvinte-status.txt    o que uma pessoa lê (e o `find -mmin` de um alerta antigo)
    ouvinte-status.json   o que as máquinas leem: `ouvinte.py --saude`, as métricas
                          do Prometheus, o monitoramento (esquema em docs/ouvinte.md)

Os dois saem dos mesmos dados (ouvinte/relatorio.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from contextia_sync.arquivos import gravar_atomico
from contextia_sync.tipos import Json, JsonDecodificado

ARQUIVO_STATUS = 'ouvinte-status.txt'


def escrever_status(diretorio: str, linhas: Iterable[str]) -> str | None:
    """
    Troca o arquivo de status inteiro. Devolve o erro (texto) ou None.

    E um ARQUIVO e não um log: alerta que precisa varrer log para saber se o
    serviço está vivo não é alerta. `find <estado>/ouvinte-status.txt -mmin +10`
    sem saída = vivo. Falha aqui não derruba o ouvinte: disco cheio não é
    motivo para parar de levar dado.
    """
    try:
        gravar_atomico(
            os.path.join(diretorio, ARQUIVO_STATUS), ''.join('%s\n' % linha for linha in linhas)
        )
    except OSError as erro:
        return '%s: %s' % (type(erro).__name__, erro)
    return None


ARQUIVO_STATUS_JSON = 'ouvinte-status.json'
VERSAO_STATUS = 1
"""
A versão do esquema de `ouvinte-status.json` (docs/ouvinte.md descreve cada
campo). Sobe quando um campo muda de sentido ou sai; campo novo não a muda.
"""


def escrever_status_json(diretorio: str, dados: Mapping[str, Json]) -> str | None:
    """
    Troca o `ouvinte-status.json` inteiro (o que as máquinas leem: a saúde, as
    métricas). Devolve o erro (texto) ou None, como `escrever_status`.
    """
    try:
        gravar_atomico(
            os.path.join(diretorio, ARQUIVO_STATUS_JSON),
            json.dumps(dados, ensure_ascii=False, indent=1, sort_keys=True) + '\n',
        )
    except (OSError, TypeError, ValueError) as erro:
        return '%s: %s' % (type(erro).__name__, erro)
    return None


def ler_status_json(diretorio: str) -> dict[str, JsonDecodificado]:
    """O último `ouvinte-status.json` (levanta OSError/ValueError se falta ou esta torto)."""
    with open(os.path.join(diretorio, ARQUIVO_STATUS_JSON), encoding='utf-8') as arquivo:
        dados = json.load(arquivo)
    if not isinstance(dados, dict):
        raise ValueError('%s não é um objeto JSON' % ARQUIVO_STATUS_JSON)
    return dados
