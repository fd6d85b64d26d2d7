"""
As estrategias de deteccao de mudanca -- a decisao que vem antes de tudo.

"Como eu descubro o que mudou" tem cinco respostas, e qual serve depende do
que o banco do cliente oferece e do que o DBA aceita liberar. A tabela vive no
codigo porque e ela que o ouvinte imprime quando recusa: uma recusa que diz o
que seria preciso resolve a conversa com o DBA na hora.

Implementada e a que tem classe em `IMPLEMENTACOES` (o registro): hoje so
`coluna`. As outras estao DECLARADAS, com o que exigiriam -- a recusa ensina.
Uma estrategia nova implementa o protocolo `Captura` (captura/__init__.py) e
entra no registro; os ciclos nao mudam. Modulo puro (autoteste).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from contextia_sync import padroes
from contextia_sync.erros import ErroConfiguracao

if TYPE_CHECKING:
    from contextia_sync.captura import Captura
    from contextia_sync.estado.estado import Estado

# Estrategia -> 'modulo:Classe' que a implementa. Estar aqui E estar implementada.
IMPLEMENTACOES = {
    'coluna': 'contextia_sync.captura.coluna:CapturaColuna',
    'binlog': 'contextia_sync.captura.binlog:CapturaBinlog',
}

ESTRATEGIAS: dict[str, dict[str, Any]] = {
    'coluna': {
        'o_que_e': 'sonda numa coluna de alteracao da propria view (`watch_column`)',
        'exige': 'uma coluna que a origem atualize a cada alteracao. Nada mais:'
                 ' SELECT com a credencial de leitura que ja usamos',
        've_delete': False,
        'nota': 'exclusao so na varredura diaria',
    },
    'binlog': {
        'o_que_e': 'MySQL/MariaDB: ler o binlog pelo protocolo de replicacao',
        'exige': 'log_bin=ON, binlog_format=ROW, binlog_row_image=FULL,'
                 ' binlog_row_metadata=FULL e GRANT REPLICATION SLAVE, BINLOG MONITOR.'
                 ' NENHUM DDL e NENHUMA escrita -- e virar uma replica de leitura.'
                 ' Em Python puro (python-mysql-replication), sem client nativo',
        've_delete': True,
        'nota': 'o melhor caso. Cuidado com a expiracao do binlog: fora do ar por'
                ' mais tempo que a retencao, o ouvinte NAO sabe o que perdeu e'
                ' precisa cair na varredura',
    },
    'change_tracking': {
        'o_que_e': 'SQL Server: CHANGETABLE(CHANGES <tabela>, @versao)',
        'exige': 'ALTER DATABASE ... CHANGE_TRACKING = ON uma vez (DDL do DBA, sem'
                 ' trigger) + permissao VIEW CHANGE TRACKING',
        've_delete': True,
        'nota': 'rastreia TABELA, nao view -- e o mapeamento aponta para views.'
                ' Le-se a chave que mudou e rele-se a view por ela',
    },
    'slot_logico': {
        'o_que_e': 'PostgreSQL: pg_logical_slot_get_changes(), por SQL comum',
        'exige': 'wal_level=logical (EXIGE REINICIO do banco do cliente) +'
                 ' privilegio REPLICATION',
        've_delete': True,
        'nota': 'PERIGO OPERACIONAL: slot nao consumido RETEM WAL. Ouvinte morto e'
                ' sem ninguem olhando enche o disco do cliente. Slot abandonado e'
                ' incidente, nao inconveniente',
    },
    'flashback': {
        'o_que_e': 'Oracle: VERSIONS BETWEEN SCN :a AND :b',
        'exige': 'privilegio FLASHBACK no objeto + undo_retention MAIOR que o'
                 ' intervalo do ciclo',
        've_delete': True,
        'nota': 'nao confunda com ORA_ROWSCN, que custa so um SELECT e parece a'
                ' solucao magica: a granularidade e de BLOCO e a Oracle NAO garante'
                ' o valor para deteccao de mudanca (delayed block cleanout deixa o'
                ' SCN atras do commit). Falso positivo e inofensivo -- o upsert'
                ' deduplica --, mas falso negativo PERDE LINHA em silencio',
    },
    'reconciliacao': {
        'o_que_e': 'diferenca do conjunto de CHAVES: SELECT <pk> FROM <view>',
        'exige': 'nada. Uma coluna, index-only, barato mesmo com 100 mil linhas,'
                 ' em qualquer banco, sem DDL e sem privilegio nenhum',
        've_delete': True,
        'nota': 'a saida universal para quem nao tem coluna nem privilegio: pega'
                ' INCLUSAO e EXCLUSAO ao vivo, e nao pega ALTERACAO. DEPENDE de um'
                ' campo `remove:` no envelope do intake, que o ouvinte ainda NAO'
                ' usa -- hoje ela veria a exclusao e nao teria como conta-la',
    },
}


class ErroEstrategia(ErroConfiguracao):
    """A estrategia pedida nao existe ou nao esta implementada."""


def implementada(nome: str) -> bool:
    return nome in IMPLEMENTACOES


def exigir_estrategia(nome: str) -> dict[str, Any]:
    """
    Resolve a estrategia pedida, ou recusa dizendo o que seria preciso.

    A recusa e o produto: quem pede `binlog` num MySQL nao esta errado (e a
    melhor escolha ali), e a resposta util e a linha que ele leva ao DBA.
    """
    info = ESTRATEGIAS.get(nome)
    if info is None:
        raise ErroEstrategia(
            'Estrategia %r nao existe. As que existem: %s.\n'
            'Corrija --estrategia ou `listener.strategy` no mapeamento.'
            % (nome, ', '.join(sorted(ESTRATEGIAS))))
    if implementada(nome):
        return info
    linhas = [
        'Estrategia %r ainda NAO esta implementada no ouvinte.' % nome,
        '',
        '  o que e ..: %s' % info['o_que_e'],
        '  exigiria .: %s' % info['exige'],
        '  ve DELETE : %s' % ('sim' if info['ve_delete'] else 'nao'),
        '  atencao ..: %s' % info['nota'],
        '',
        'Implementada hoje: %s -- %s.' % (
            ', '.join('`%s`' % n for n in sorted(IMPLEMENTACOES)),
            ESTRATEGIAS['coluna']['exige']),
        '',
        'Se este cliente nao tem coluna de alteracao, isso NAO e detalhe de',
        'configuracao: e uma decisao a tomar com o DBA antes de prometer dado',
        'ao vivo. Ver a tabela de estrategias em docs/ouvinte.md.',
    ]
    raise ErroEstrategia('\n'.join(linhas))


def resolver_estrategia(da_linha_de_comando: str | None,
                        mapa: Mapping[str, Any] | None) -> tuple[str, str]:
    """
    --estrategia, senao `listener.strategy` do mapeamento, senao `coluna`.

    A linha de comando vence: quem digitou esta olhando a tela agora, e o
    mapeamento foi escrito semanas atras. Devolve (nome, de_onde_veio).
    """
    if da_linha_de_comando:
        return da_linha_de_comando, '--estrategia'
    do_mapa = ((mapa or {}).get('listener') or {}).get('strategy')
    if do_mapa:
        return do_mapa, 'mapeamento (listener.strategy)'
    return padroes.ESTRATEGIA, 'padrao'


def criar_captura(nome: str, *, origem: ModuleType, estado: Estado, folga: int,
                  maximo: int) -> Captura:
    """A captura da estrategia `nome` (ja exigida), pelo registro."""
    exigir_estrategia(nome)
    modulo, classe = IMPLEMENTACOES[nome].split(':')
    fabrica = getattr(importlib.import_module(modulo), classe)
    captura: Captura = fabrica(origem=origem, estado=estado, folga=folga, maximo=maximo)
    return captura
