"""
Que datasets o ouvinte acompanha, e como uma leitura se reparte por empresa.

Módulo puro (autoteste): o recorte vem das funções puras de mapeamento.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from contextia_sync.captura import DatasetVivo
from contextia_sync.erros import ErroConfiguracao
from contextia_sync.escopos import problema_no_escopo, texto_escopo

if TYPE_CHECKING:  # tipos.py importa o sqlalchemy, que o autoteste não tem
    from contextia_sync.tipos import DatasetDoMapa, Linha, Mapa


class ErroAoVivo(ErroConfiguracao, ValueError):
    """`watch_column` declarada no dataset mas fora de `columns`."""


def datasets_ao_vivo(
    mapa: Mapa, estrategia: str = 'coluna'
) -> tuple[list[DatasetVivo], list[tuple[str, str]]]:
    """
    Devolve (acompanháveis, de_fora); a segunda lista importa tanto quanto a primeira.

    Dataset sem coluna de mudança não é erro (tabela de domínio não muda). Erro
    seria passar calado: o operador ligaria o ouvinte achando que 27 datasets
    estão ao vivo quando só 12 estão.

    Com `coluna`: `watch_column` vem do dataset ou do `defaults`; `null` no
    dataset desliga (coluna que existe mas não presta). Coluna FORA de `columns`:
      declarada no dataset -> ABORTA: alguém errou o nome de propósito.
      herdada do defaults  -> sai do ao-vivo com o motivo: nem toda view de um
                              ERP tem a mesma coluna, e derrubar tudo por uma
                              obrigaria a escrever `null` uma por uma.
    Com `reconciliacao`: fica ao vivo todo dataset com `key` (a coluna de
    mudança não importa). Com as duas, basta uma: o dataset sem `key` fica só
    na `coluna`, o sem coluna de mudança só na reconciliacao. Com uma
    estratégia que lê o log de transação (`ESTRATEGIAS_DE_LOG`): todo dataset
    com `key` -- o log diz qual linha mudou pela key, a coluna de mudança não
    serve para nada --, e o sem `key` fica de fora, com o motivo.
    Em todo caso o dataset continua na varredura diária.
    """
    from contextia_sync.intake.cliente import normalizar_dataset
    from contextia_sync.mapeamento import chave_de, coluna_de_recorte
    from contextia_sync.origem.marca_apagada import MarcaDeApagado

    partes = estrategia.split('+')
    padrao = (mapa.get('defaults') or {}).get('watch_column')
    vivos: list[DatasetVivo] = []
    fora: list[tuple[str, str]] = []
    por_log = any(parte in ESTRATEGIAS_DE_LOG for parte in partes)
    for row in mapa.get('datasets') or []:
        chave = chave_de(mapa, row)
        if por_log:
            if chave is None:
                fora.append((row['dataset'], SEM_KEY_NO_LOG))
            else:
                vivos.append(
                    DatasetVivo(
                        nome=normalizar_dataset(row['dataset']),
                        row=row,
                        watch=None,
                        chave=chave,
                        escopo=coluna_de_recorte(mapa, row),
                        marca=MarcaDeApagado.do_dataset(mapa, row),
                    )
                )
            continue
        coluna, motivo = _coluna_de_mudanca(row, padrao) if 'coluna' in partes else (None, None)
        reconcilia = 'reconciliacao' in partes and chave is not None
        if coluna is None and not reconcilia:
            if 'reconciliacao' in partes:
                motivo = '; '.join(m for m in (motivo, SEM_KEY) if m)
            fora.append((row['dataset'], motivo or SEM_KEY))
            continue
        vivos.append(
            DatasetVivo(
                nome=normalizar_dataset(row['dataset']),
                row=row,
                watch=coluna,
                chave=chave,
                escopo=coluna_de_recorte(mapa, row),
                reconcilia=reconcilia,
                marca=MarcaDeApagado.do_dataset(mapa, row),
            )
        )
    return vivos, fora


# Por que um dataset fica fora da reconciliacao (e, sozinha, fora do ao-vivo).
SEM_KEY = 'sem key (a reconciliação compara chaves)'

ESTRATEGIAS_DE_LOG = ('binlog', 'slot_logico')
"""As estratégias que leem o log de transação: seguem todo dataset com `key`."""

SEM_KEY_NO_LOG = 'sem key (o log diz qual linha mudou pela key; só na varredura)'

SO_VARREDURA = 'só varredura'
"""
O começo do motivo do dataset que a captura conferiu no catálogo e não pode
seguir (a view sem `base_tables` no log): não é escolha do mapeamento, é
correção por fazer -- a saúde avisa e as métricas o contam.
"""


def e_so_varredura(motivo: str) -> bool:
    """O motivo de fora do ao-vivo é um `só varredura` (correção por fazer)?"""
    return motivo.startswith(SO_VARREDURA + ':')


def tirar_do_ao_vivo(
    vivos: list[DatasetVivo],
    fora: list[tuple[str, str]],
    so_varredura: Iterable[tuple[DatasetVivo, str]],
) -> tuple[list[DatasetVivo], list[tuple[str, str]]]:
    """
    Os datasets que a captura conferiu na subida e não pode seguir (`so_varredura`
    dela: (dataset, motivo com a correção)) saem do ao-vivo para os de fora, com
    o motivo começando por `só varredura`: a contagem da subida fica verdadeira.
    """
    tirados = {alvo.nome: motivo for alvo, motivo in so_varredura}
    if not tirados:
        return vivos, fora
    return [a for a in vivos if a.nome not in tirados], fora + [
        (a.row['dataset'], '%s: %s' % (SO_VARREDURA, tirados[a.nome]))
        for a in vivos
        if a.nome in tirados
    ]


def _coluna_de_mudanca(row: DatasetDoMapa, padrao: str | None) -> tuple[str | None, str | None]:
    """(a coluna de mudança do dataset, None) ou (None, o motivo de ficar sem ela)."""
    declarada = 'watch_column' in row
    coluna = row['watch_column'] if declarada else padrao
    if not coluna:
        return None, 'watch_column: null' if declarada else 'sem watch_column'
    if coluna not in (row.get('columns') or []):
        if declarada:
            raise ErroAoVivo(
                'Dataset %r acompanha por %r, mas essa coluna não está em'
                ' `columns`. Sem ela na projeção a marca de água nunca avança e'
                ' o ouvinte releria o mesmo intervalo para sempre.\n'
                'Inclua %r em `columns` do dataset, ou corrija `watch_column`'
                ' (null tira o dataset do ao-vivo).' % (row['dataset'], coluna, coluna)
            )
        return None, 'não tem %s (herdada do defaults)' % coluna
    return str(coluna), None


@dataclass
class Reparticao:
    """Uma leitura repartida por empresa: o que vai, o que espera, o que nunca vai."""

    grupos: dict[str, list[Linha]] = field(default_factory=dict)
    """{escopo: [registros]} das empresas com chave."""
    sem_chave: list[str] = field(default_factory=list)
    """Escopos válidos sem chave (empresa nova, ou que a regra recusa), em ordem."""
    invalidos: dict[str, list[Linha]] = field(default_factory=dict)
    """{código inválido (canônico): [registros]}: nunca vão a projeto nenhum."""


def agrupar_por_escopo(
    linhas: Iterable[Linha], mapa: Mapa, row: DatasetDoMapa, chaves: Mapping[str, str]
) -> Reparticao:
    """
    A leitura repartida por empresa (`Reparticao`).

    UMA leitura por dataset serve TODAS as empresas: a coluna de mudança não
    sabe de empresa, e filtrar empresa a empresa multiplicaria as consultas na
    produção do cliente sem trazer nada novo.

    Sem recorte (`scope_column: null`, tabela de domínio) vai para TODAS as
    empresas, como a carga completa faz. Escopo fora do arquivo de chaves e
    empresa ainda não provisionada: não se inventa destino, ela volta em
    `sem_chave` e o ciclo de projetos resolve. Código que não serve de código
    de empresa (`escopos.codigo_invalido`: `'10\\x1c'`, `'10\\u00a0'`) volta em
    `invalidos`, com as linhas: quem chama as põe na quarentena e as nomeia --
    nunca viram a empresa 10.
    """
    from contextia_sync.mapeamento import coluna_de_recorte

    coluna = coluna_de_recorte(mapa, row)
    if not coluna:
        linhas = list(linhas)
        return Reparticao(grupos={escopo: list(linhas) for escopo in chaves})
    reparticao = Reparticao()
    grupos, invalidos = reparticao.grupos, reparticao.invalidos
    desconhecidos: set[str] = set()
    vazio = False
    for linha in linhas:
        # 297, Decimal('297'), 297.0 e '297 ' sao a mesma empresa; '297\xa0' nao.
        escopo = texto_escopo(linha.get(coluna))
        if escopo in chaves:
            grupos.setdefault(escopo, []).append(linha)
        elif escopo in invalidos:
            invalidos[escopo].append(linha)
        elif not escopo:
            vazio = True
        elif escopo in desconhecidos:
            continue
        elif problema_no_escopo(escopo):  # uma vez por código, não por linha
            invalidos[escopo] = [linha]
        else:
            desconhecidos.add(escopo)
    reparticao.sem_chave = sorted(desconhecidos | ({'(vazio)'} if vazio else set()))
    return reparticao
