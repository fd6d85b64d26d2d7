"""
As estratégias de detecção de mudança -- a decisão que vem antes de tudo.

"Como eu descubro o que mudou" tem cinco respostas, e qual serve depende do
que o banco do cliente oferece e do que o DBA aceita liberar. A tabela vive no
código porque e ela que o ouvinte imprime quando recusa: uma recusa que diz o
que seria preciso resolve a conversa com o DBA na hora.

Implementada e a que tem classe em `IMPLEMENTACOES` (o registro): hoje só
`coluna`. As outras estão DECLARADAS, com o que exigiriam -- a recusa ensina.
Uma estratégia nova implementa o protocolo `Captura` (captura/__init__.py) e
entra no registro; os ciclos não mudam. Módulo puro (autoteste).
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
}

ESTRATEGIAS: dict[str, dict[str, Any]] = {
    'coluna': {
        'o_que_e': 'sonda numa coluna de alteração da própria view (`watch_column`)',
        'exige': 'uma coluna que a origem atualize a cada alteração. Nada mais:'
                 ' SELECT com a credencial de leitura que ja usamos',
        've_delete': False,
        'nota': 'exclusão só na varredura diária',
    },
    'binlog': {
        'o_que_e': 'MySQL/MariaDB: ler o binlog pelo protocolo de replicação',
        'exige': 'log_bin=ON, binlog_format=ROW e GRANT REPLICATION SLAVE.'
                 ' NENHUM DDL e NENHUMA escrita -- e virar uma replica de leitura.'
                 ' Em Python puro (python-mysql-replication), sem client nativo',
        've_delete': True,
        'nota': 'o melhor caso. Cuidado com a expiração do binlog: fora do ar por'
                ' mais tempo que a retenção, o ouvinte NÃO sabe o que perdeu e'
                ' precisa cair na varredura',
    },
    'change_tracking': {
        'o_que_e': 'SQL Server: CHANGETABLE(CHANGES <tabela>, @versao)',
        'exige': 'ALTER DATABASE ... CHANGE_TRACKING = ON uma vez (DDL do DBA, sem'
                 ' trigger) + permissao VIEW CHANGE TRACKING',
        've_delete': True,
        'nota': 'rastreia TABELA, não view -- e o mapeamento aponta para views.'
                ' Le-se a chave que mudou e rele-se a view por ela',
    },
    'slot_logico': {
        'o_que_e': 'PostgreSQL: pg_logical_slot_get_changes(), por SQL comum',
        'exige': 'wal_level=logical (EXIGE REINICIO do banco do cliente) +'
                 ' privilégio REPLICATION',
        've_delete': True,
        'nota': 'PERIGO OPERACIONAL: slot não consumido RETEM WAL. Ouvinte morto e'
                ' sem ninguém olhando enche o disco do cliente. Slot abandonado e'
                ' incidente, não inconveniente',
    },
    'flashback': {
        'o_que_e': 'Oracle: VERSIONS BETWEEN SCN :a AND :b',
        'exige': 'privilégio FLASHBACK no objeto + undo_retention MAIOR que o'
                 ' intervalo do ciclo',
        've_delete': True,
        'nota': 'nao confunda com ORA_ROWSCN, que custa so um SELECT e parece a'
                ' solução magica: a granularidade e de BLOCO e a Oracle NÃO garante'
                ' o valor para detecção de mudança (delayed block cleanout deixa o'
                ' SCN atrás do commit). Falso positivo é inofensivo -- o upsert'
                ' deduplica --, mas falso negativo PERDE LINHA em silêncio',
    },
    'reconciliacao': {
        'o_que_e': 'diferenca do conjunto de CHAVES: SELECT <pk> FROM <view>',
        'exige': 'nada. Uma coluna, index-only, barato mesmo com 100 mil linhas,'
                 ' em qualquer banco, sem DDL e sem privilégio nenhum',
        've_delete': True,
        'nota': 'a saída universal para quem não tem coluna nem privilégio: pega'
                ' INCLUSAO e EXCLUSAO ao vivo, e não pega ALTERACAO. DEPENDE de um'
                ' campo `remove:` no envelope do intake, que o ouvinte ainda NÃO'
                ' usa -- hoje ela veria a exclusão e não teria como conta-la',
    },
}


class ErroEstrategia(ErroConfiguracao):
    """A estratégia pedida não existe ou não está implementada."""


def implementada(nome: str) -> bool:
    return nome in IMPLEMENTACOES


def exigir_estrategia(nome: str) -> dict[str, Any]:
    """
    Resolve a estratégia pedida, ou recusa dizendo o que seria preciso.

    A recusa e o produto: quem pede `binlog` num MySQL não está errado (e a
    melhor escolha ali), e a resposta útil e a linha que ele leva ao DBA.
    """
    info = ESTRATEGIAS.get(nome)
    if info is None:
        raise ErroEstrategia(
            'Estratégia %r não existe. As que existem: %s.\n'
            'Corrija --estrategia ou `listener.strategy` no mapeamento.'
            % (nome, ', '.join(sorted(ESTRATEGIAS))))
    if implementada(nome):
        return info
    linhas = [
        'Estratégia %r ainda NÃO está implementada no ouvinte.' % nome,
        '',
        '  o que é ..: %s' % info['o_que_e'],
        '  exigiria .: %s' % info['exige'],
        '  vê DELETE : %s' % ('sim' if info['ve_delete'] else 'nao'),
        '  atenção ..: %s' % info['nota'],
        '',
        'Implementada hoje: %s -- %s.' % (
            ', '.join('`%s`' % n for n in sorted(IMPLEMENTACOES)),
            ESTRATEGIAS['coluna']['exige']),
        '',
        'Se este cliente não tem coluna de alteração, isso NÃO é detalhe de',
        'configuração: e uma decisão a tomar com o DBA antes de prometer dado',
        'ao vivo. Ver a tabela de estratégias em docs/ouvinte.md.',
    ]
    raise ErroEstrategia('\n'.join(linhas))


def resolver_estrategia(da_linha_de_comando: str | None,
                        mapa: Mapping[str, Any] | None) -> tuple[str, str]:
    """
    --estrategia, senão `listener.strategy` do mapeamento, senão `coluna`.

    A linha de comando vence: quem digitou está olhando a tela agora, e o
    mapeamento foi escrito semanas atrás. Devolve (nome, de_onde_veio).
    """
    if da_linha_de_comando:
        return da_linha_de_comando, '--estrategia'
    do_mapa = ((mapa or {}).get('listener') or {}).get('strategy')
    if do_mapa:
        return do_mapa, 'mapeamento (listener.strategy)'
    return padroes.ESTRATEGIA, 'padrao'


def criar_captura(nome: str, *, origem: ModuleType, estado: Estado, folga: int,
                  maximo: int) -> Captura:
    """A captura da estratégia `nome` (já exigida), pelo registro."""
    exigir_estrategia(nome)
    modulo, classe = IMPLEMENTACOES[nome].split(':')
    fabrica = getattr(importlib.import_module(modulo), classe)
    captura: Captura = fabrica(origem=origem, estado=estado, folga=folga, maximo=maximo)
    return captura
