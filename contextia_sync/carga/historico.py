"""
O histórico de cargas: o que a última carga ACEITA de cada dataset trouxe, por
empresa. Um JSON ao lado do arquivo de chaves (`<chaves>.historico.json`).

    {"versao": 1, "cargas": {"297": {"movimentos": {
        "registros": 573, "removidos": 12, "em": "2026-11-30T03:31:07",
        "execucao": "varredura-1a2b3c4d"}}}}

Para que serve:
  * teto do dataset SEM key: la o ao-vivo manda cada alteração como registro
    novo e a versão antiga só sai no `complete`. Num dia movimentado as versões
    velhas passam da metade do dataset, e o teto "fração do dataset" recusaria a
    varredura para sempre. O teto certo compara a carga de hoje com a última
    aceita (ver `carga.teto_do_complete`).
  * o ouvinte sabe, dataset por dataset, o que a varredura carregou: uma entrada
    com a `execucao` dela, para cada empresa, quer dizer carregado e fechado.

Só carga com `complete` aceito entra: carga falha não pode virar base (uma view
vazia registrada como "0 linhas" liberaria a próxima view vazia). Perder este
arquivo não perde dado: o teto volta a ser a fração do dataset, mais rígido.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
from collections.abc import Collection, Iterable, Iterator
from typing import Any

from contextia_sync.arquivos import gravar_atomico
from contextia_sync.registro import logger

SUFIXO = '.historico.json'


def caminho_padrao(chaves: str) -> str:
    """O histórico de uma implantação: ao lado do arquivo de chaves, que a identifica.

    O carregar-todas.sh monta o mesmo nome (`$chaves.historico.json`).
    """
    return os.path.abspath(chaves) + SUFIXO


class Historico:
    """Leitura sempre do disco: outro processo (o conector) pode ter gravado agora."""

    def __init__(self, caminho: str) -> None:
        self.caminho = caminho

    def _ler(self) -> dict[str, Any] | None:
        try:
            with open(self.caminho, encoding='utf-8') as arquivo:
                dados: Any = json.load(arquivo)
            if not isinstance(dados, dict) or not isinstance(dados.get('cargas'), dict):
                raise ValueError('sem o objeto "cargas"')
            return dados
        except FileNotFoundError:
            return {'versao': 1, 'cargas': {}}
        except (OSError, ValueError) as erro:
            # Ilegivel: sem base o teto volta a ser a fracao do dataset (mais
            # rigido) e o ouvinte trata a varredura como nao carregada. Nada se perde.
            logger.warning('histórico de cargas ilegível em %s (%s: %s); tratado como vazio.'
                           ' A próxima carga aceita o regrava.', self.caminho,
                           type(erro).__name__, erro)
            return None

    @contextlib.contextmanager
    def _travado(self) -> Iterator[None]:
        # Um conector da varredura e um `connector.py` rodado a mao podem gravar
        # juntos; sem a trava um apagaria a entrada do outro.
        with open(self.caminho + '.trava', 'a') as trava:
            fcntl.flock(trava, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(trava, fcntl.LOCK_UN)

    def anterior(self, escopo: object, dataset: str) -> dict[str, Any] | None:
        """A última carga aceita ({'registros', 'em', ...}) ou None."""
        dados = self._ler() or {'cargas': {}}
        entrada = (dados['cargas'].get(str(escopo)) or {}).get(dataset)
        if not isinstance(entrada, dict) or not isinstance(entrada.get('registros'), int):
            return None
        return entrada

    def registrar(self, escopo: object, dataset: str, registros: int, removidos: int,
                  execucao: str | None = None) -> None:
        """Grava a carga ACEITA de `dataset` na empresa `escopo` (só após o `complete`)."""
        self.registrar_varias([(escopo, dataset, registros, removidos)], execucao)

    def registrar_varias(self, cargas: Iterable[tuple[object, str, int, int]],
                         execucao: str | None = None) -> None:
        """
        Grava de uma vez as cargas ACEITAS [(escopo, dataset, registros, removidos)]
        (a carga de todas as empresas: uma gravação por dataset, não uma por empresa).
        """
        cargas = list(cargas)
        if not cargas:
            return
        with self._travado():
            dados = self._ler()
            if dados is None:
                # O ilegivel vai para o lado com nome, nunca sobrescrito calado.
                os.replace(self.caminho, self.caminho + '.ilegivel')
                logger.warning('histórico ilegível movido para %s.ilegivel', self.caminho)
                dados = {'versao': 1, 'cargas': {}}
            em = datetime.datetime.now().isoformat(timespec='seconds')
            for escopo, dataset, registros, removidos in cargas:
                dados['cargas'].setdefault(str(escopo), {})[dataset] = {
                    'registros': int(registros), 'removidos': int(removidos), 'em': em,
                    'execucao': execucao}
            gravar_atomico(self.caminho, json.dumps(dados, indent=1, sort_keys=True) + '\n')

    def faltando(self, escopos: Collection[Any], datasets: Iterable[str],
                 execucao: str | None) -> dict[str, list[Any]]:
        """
        {dataset: [empresas]} em que a execução `execucao` NÃO fechou a carga.

        Uma leitura para todos os datasets: o arquivo pode ter milhares de entradas.
        """
        dados = self._ler()
        cargas = dados['cargas'] if dados is not None else {}
        return {d: sorted(e for e in escopos
                          if ((cargas.get(str(e)) or {}).get(d) or {}).get('execucao')
                          != execucao)
                for d in datasets}
