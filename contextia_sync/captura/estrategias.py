"""
As estratégias de detecção de mudança -- a decisão que vem antes de tudo.

"Como eu descubro o que mudou" tem cinco respostas, e qual serve depende do
que o banco do cliente oferece e do que o DBA aceita liberar. A tabela vive no
código porque e ela que o ouvinte imprime quando recusa: uma recusa que diz o
que seria preciso resolve a conversa com o DBA na hora.

Implementada e a que tem classe em `IMPLEMENTACOES` (o registro): hoje
`coluna`, `reconciliacao`, as duas juntas (`coluna+reconciliacao`), `binlog`
e `slot_logico`. As outras
estão DECLARADAS, com o que exigiriam -- a recusa ensina.
Uma estratégia nova implementa o protocolo `Captura` (captura/__init__.py) e
entra no registro; os ciclos não mudam. Módulo puro (autoteste).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, TypedDict

from contextia_sync.origem import AdaptadorDeOrigem
from contextia_sync import padroes
from contextia_sync.erros import ErroConfiguracao

if TYPE_CHECKING:
    from contextia_sync.captura import Captura
    from contextia_sync.captura.reconciliacao import OpcoesReconciliacao
    from contextia_sync.estado.estado import Estado
    from contextia_sync.tipos import Mapa

# Estrategia -> 'modulo:Classe' que a implementa. Estar aqui E estar implementada.
IMPLEMENTACOES = {
    'coluna': 'contextia_sync.captura.coluna:CapturaColuna',
    'reconciliacao': 'contextia_sync.captura.reconciliacao:CapturaReconciliacao',
    'coluna+reconciliacao': 'contextia_sync.captura.combinada:CapturaCombinada',
    'binlog': 'contextia_sync.captura.binlog:CapturaBinlog',
    'slot_logico': 'contextia_sync.captura.slot_logico:CapturaSlotLogico',
}


class FichaDaEstrategia(TypedDict):
    """Uma linha da tabela das estratégias: o que é, o que exige, se vê DELETE, a nota."""

    o_que_e: str
    exige: str
    ve_delete: bool
    nota: str


ESTRATEGIAS: dict[str, FichaDaEstrategia] = {
    'coluna': {
        'o_que_e': 'sonda numa coluna de alteração da própria view (`watch_column`)',
        'exige': 'uma coluna que a origem atualize a cada alteração. Nada mais:'
        ' SELECT com a credencial de leitura que ja usamos',
        've_delete': False,
        'nota': 'exclusão só na varredura diária',
    },
    'binlog': {
        'o_que_e': 'MySQL/MariaDB: ler o binlog pelo protocolo de replicação',
        'exige': 'log_bin=ON, binlog_format=ROW, binlog_row_image=FULL,'
        ' binlog_row_metadata=FULL e GRANT REPLICATION SLAVE, BINLOG MONITOR.'
        ' NENHUM DDL e NENHUMA escrita -- e virar uma réplica de leitura.'
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
        'o_que_e': 'PostgreSQL: a decodificação lógica (pgoutput) por SQL comum --'
        ' pg_logical_slot_peek_binary_changes, e o slot avançado só depois do'
        ' spool',
        'exige': 'wal_level=logical (EXIGE REINICIO do banco do cliente) +'
        ' privilégio REPLICATION; o slot e a publicação criados uma vez'
        ' (`ouvinte.py --criar-slot`); REPLICA IDENTITY que traga a key e a'
        ' empresa (FULL, se a empresa não está na chave primária)',
        've_delete': True,
        'nota': 'PERIGO OPERACIONAL: slot não consumido RETEM WAL. Ouvinte morto e'
        ' sem ninguém olhando enche o disco do cliente. Slot abandonado e'
        ' incidente, não inconveniente: o WAL retido está no status e na'
        ' saúde, max_slot_wal_keep_size é a rede do DBA, e desinstalar começa'
        ' por `--remover-slot`',
    },
    'flashback': {
        'o_que_e': 'Oracle: VERSIONS BETWEEN SCN :a AND :b',
        'exige': 'privilégio FLASHBACK no objeto + undo_retention MAIOR que o intervalo do ciclo',
        've_delete': True,
        'nota': 'nao confunda com ORA_ROWSCN, que custa so um SELECT e parece a'
        ' solução magica: a granularidade e de BLOCO e a Oracle NÃO garante'
        ' o valor para detecção de mudança (delayed block cleanout deixa o'
        ' SCN atrás do commit). Falso positivo é inofensivo -- o upsert'
        ' deduplica --, mas falso negativo PERDE LINHA em silêncio',
    },
    'reconciliacao': {
        'o_que_e': 'diferença do conjunto de CHAVES: SELECT <escopo>, <key> FROM <view>'
        ' ORDER BY <escopo>, <key>, comparado com o conjunto entregue',
        'exige': 'nada da origem: uma leitura só das chaves (index-only), em qualquer'
        ' banco, sem DDL e sem privilégio nenhum. Do mapeamento, a `key`; do'
        ' Contextia, `remove` no envelope do intake (capacidades.remove)',
        've_delete': True,
        'nota': 'pega INCLUSÃO e EXCLUSÃO a cada --intervalo-reconciliacao e NÃO pega'
        ' ALTERAÇÃO: junte com a coluna (`coluna+reconciliacao`). Custa, por'
        ' intervalo, uma leitura das chaves da view inteira',
    },
    'coluna+reconciliacao': {
        'o_que_e': 'as duas juntas: a `coluna` a cada --intervalo-dados (inclusão e'
        ' alteração em segundos) e a `reconciliacao` a cada'
        ' --intervalo-reconciliacao (a exclusão em minutos)',
        'exige': 'o que cada uma exige: a coluna de mudança para a `coluna`; a `key` e'
        ' um Contextia com `remove` (capacidades.remove) para a reconciliação.'
        ' Da origem, só SELECT',
        've_delete': True,
        'nota': 'DELETE sai do Contextia em até um --intervalo-reconciliacao; dataset'
        ' sem `key` fica só na `coluna` (a exclusão dele, na varredura)',
    },
}


class ErroEstrategia(ErroConfiguracao):
    """A estratégia pedida não existe ou não está implementada."""


def implementada(nome: str) -> bool:
    return nome in IMPLEMENTACOES


def exigir_estrategia(nome: str) -> FichaDaEstrategia:
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
            % (nome, ', '.join(sorted(ESTRATEGIAS)))
        )
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
        'Implementadas hoje: %s. A `coluna` exige %s; a `reconciliacao`, %s.'
        % (
            ', '.join('`%s`' % n for n in sorted(IMPLEMENTACOES)),
            ESTRATEGIAS['coluna']['exige'],
            ESTRATEGIAS['reconciliacao']['exige'],
        ),
        '',
        'Se este cliente não tem coluna de alteração, isso NÃO é detalhe de',
        'configuração: e uma decisão a tomar com o DBA antes de prometer dado',
        'ao vivo (com `key`, a `reconciliacao` vê inclusão e exclusão sem ela).',
        'Ver a tabela de estratégias em docs/ouvinte.md.',
    ]
    raise ErroEstrategia('\n'.join(linhas))


def resolver_estrategia(da_linha_de_comando: str | None, mapa: Mapa | None) -> tuple[str, str]:
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


def partes(nome: str) -> list[str]:
    """As estratégias que `nome` junta: 'coluna+reconciliacao' -> ['coluna', 'reconciliacao']."""
    return nome.split('+')


def criar_captura(
    nome: str,
    *,
    origem: AdaptadorDeOrigem,
    estado: Estado,
    folga: int,
    maximo: int,
    reconciliacao: OpcoesReconciliacao | None = None,
) -> Captura:
    """
    A captura da estratégia `nome` (já exigida), pelo registro. `reconciliacao`
    (captura.reconciliacao.OpcoesReconciliacao) é obrigatória se ela reconcilia.
    """
    exigir_estrategia(nome)
    modulo, classe = IMPLEMENTACOES[nome].split(':')
    fabrica = getattr(importlib.import_module(modulo), classe)
    opcoes: dict[str, OpcoesReconciliacao] = {}
    if 'reconciliacao' in partes(nome):
        if reconciliacao is None:
            raise ValueError('a estratégia %s precisa das opções da reconciliacao' % nome)
        opcoes['opcoes'] = reconciliacao
    captura: Captura = fabrica(origem=origem, estado=estado, folga=folga, maximo=maximo, **opcoes)
    return captura
