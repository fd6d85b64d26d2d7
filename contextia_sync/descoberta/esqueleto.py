"""
O esqueleto de mapeamento, o relatório para o operador e a diferença contra o
mapeamento que já existe.

    montar(catálogo, ...)        o mapeamento (dict) e, por objeto, o que foi
                                 decidido e por que (`DatasetDescoberto`)
    relatorio(esqueleto, ...)    as linhas que o operador lê: palpites, objetos
                                 só de varredura, índices faltando, colunas de fora
    diferencas(existente, ...)   colunas novas e sumidas, objetos novos e sumidos
    texto_json(mapa)             o JSON como um humano o escreveria (listas curtas
                                 numa linha), para o arquivo ir ao git legível

O esqueleto só leva o que o catálogo prova ou o que foi conferido na origem;
o que é palpite vai dito no relatório e no `$comment` do dataset.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from contextia_sync.descoberta import ErroDescoberta, regras
from contextia_sync.descoberta.catalogo import Catalogo, Conferencia, Objeto
from contextia_sync.descoberta.regras import Escolha, Sonda
from contextia_sync.descoberta.tipos import Fora, fora
from contextia_sync.origem import filtro

if TYPE_CHECKING:
    from sqlalchemy.engine import Dialect

    from contextia_sync.tipos import CadastroDoMapa, DatasetDoMapa, JsonDecodificado, Mapa

# (objeto, coluna candidata, coluna de escopo ou None) -> o que a origem disse.
ConferirChave = Callable[[Objeto, str, str | None], Conferencia]

# O cadastro que falta escolher: valida no schema, e o seco diz que nao existe.
SEM_CADASTRO = 'ESCOLHA_O_CADASTRO'
SEM_COLUNA = 'ESCOLHA_A_COLUNA'


@dataclass
class DatasetDescoberto:
    """Um objeto do catálogo virando dataset: o que entrou, o que ficou de fora e por que."""

    objeto: Objeto
    nome: str
    colunas: list[str]
    fora: list[Fora]
    chave: Escolha
    carimbo: Escolha
    sonda: Sonda | None
    escopo: str | None
    notas: list[str] = field(default_factory=list)

    def comentario(self) -> str:
        """O `$comment` do dataset: o que o descobrir decidiu, para quem edita o arquivo."""
        partes = [
            'key %s (%s)' % (self.chave.coluna, self.chave.porque)
            if self.chave.coluna
            else 'sem key: %s' % self.chave.porque
        ]
        if self.carimbo.coluna:
            partes.append('watch_column %s%s' % (self.carimbo.coluna, _texto_sonda(self.sonda)))
        else:
            partes.append('só varredura (sem coluna de alteração)')
        if self.escopo is None:
            partes.append('domínio: vai inteira para cada empresa')
        for coluna in self.fora:
            partes.append(
                'fora: %s (%s) -- %s; na view: %s'
                % (coluna.coluna, coluna.tipo, coluna.motivo, coluna.correcao)
            )
        return 'descobrir: ' + '; '.join(partes)

    def entrada(self) -> DatasetDoMapa:
        """A entrada de `datasets` no mapeamento."""
        return {
            'dataset': self.nome,
            'source_object': self.objeto.source_object,
            '$comment': self.comentario(),
            'columns': list(self.colunas),
            'key': self.chave.coluna,
            'watch_column': self.carimbo.coluna,
            'scope_column': self.escopo,
        }


def _texto_sonda(sonda: Sonda | None) -> str:
    if sonda is None:
        return ''
    if sonda.situacao == 'coberta':
        return ' (índice %s)' % sonda.indice
    if sonda.situacao == 'view':
        return ' (view: o índice tem de estar na tabela de base)'
    return ' (SEM índice: a sonda varreria a tabela; %s)' % sonda.criar


@dataclass
class Esqueleto:
    """O mapeamento montado e tudo o que o relatório conta."""

    mapa: Mapa
    datasets: list[DatasetDescoberto]
    escopo: Escolha
    cadastro: Objeto | None
    palpites: list[str] = field(default_factory=list)
    avisos: list[str] = field(default_factory=list)
    ignorados: list[tuple[str, str]] = field(default_factory=list)
    """(objeto, motivo) do que o catálogo mostrou e não virou dataset."""


def colunas_do_objeto(objeto: Objeto, dialeto: Dialect) -> tuple[list[str], list[Fora]]:
    """As colunas que entram (na ordem do catálogo) e as que ficam de fora, com o motivo."""
    dentro: list[str] = []
    de_fora: list[Fora] = []
    for coluna in objeto.colunas:
        try:
            filtro.validar_nome(coluna.nome, 'columns')
        except filtro.ErroIdentificador:
            de_fora.append(
                Fora(
                    coluna.nome,
                    coluna.texto_tipo,
                    'o mapeamento só aceita letras, dígitos, _, $ e # no nome',
                    '%s AS %s' % (coluna.nome, _nome_limpo(coluna.nome)),
                )
            )
            continue
        recusa = fora(coluna, dialeto)
        if recusa is not None:
            de_fora.append(recusa)
        else:
            dentro.append(coluna.nome)
    return dentro, de_fora


def _nome_limpo(nome: str) -> str:
    ascii_ = unicodedata.normalize('NFKD', nome).encode('ascii', 'ignore').decode()
    limpo = re.sub(r'[^A-Za-z0-9_]+', '_', ascii_).strip('_') or 'COLUNA'
    return limpo if limpo[0].isalpha() or limpo[0] == '_' else 'C_' + limpo


def _nome_do_dataset(objeto: Objeto, usados: set[str]) -> str:
    from contextia_sync.intake.cliente import normalizar_dataset

    palavras = objeto.nome.replace('_', ' ').split()
    nome = ' '.join(p[:1].upper() + p[1:].lower() for p in palavras) or objeto.nome
    if normalizar_dataset(nome) in usados and objeto.esquema:
        nome = '%s %s' % (objeto.esquema, nome)
    base, n = nome, 2
    while normalizar_dataset(nome) in usados:
        nome = '%s %d' % (base, n)
        n += 1
    usados.add(normalizar_dataset(nome))
    return nome


def _problema_do_nome(objeto: Objeto) -> str | None:
    try:
        filtro.validar_objeto(objeto.source_object)
    except filtro.ErroIdentificador:
        return (
            'o nome não é aceito no mapeamento (só letras, dígitos, _, $ e #): crie uma'
            ' view com um nome simples sobre ela'
        )
    return None


def _chave_da_view(
    objeto: Objeto, dentro: set[str], escopo: str | None, conferir: ConferirChave | None
) -> Escolha:
    candidatas = regras.candidatas_de_chave(objeto, dentro)
    if not candidatas:
        return Escolha(None, 'view sem coluna com nome de chave (ID, CHAVE, CTX_CHAVE...)')
    if conferir is None:
        return Escolha(
            None,
            'view: %s tem nome de chave, mas a unicidade não foi conferida'
            ' (--sem-conferir-chaves)' % ', '.join(candidatas),
        )
    motivos = []
    for candidata in candidatas:
        try:
            resultado = conferir(objeto, candidata, escopo)
        except Exception as erro:  # noqa: BLE001 - vira motivo, nao traceback
            motivos.append('%s: não deu para conferir (%s)' % (candidata, _curto(erro)))
            continue
        if resultado.serve:
            onde = ' dentro de cada %s' % escopo if escopo else ''
            return Escolha(
                candidata,
                'adivinhada pelo nome e conferida agora: única e não'
                ' nula%s em %d linha(s)' % (onde, resultado.linhas),
                palpite=True,
            )
        if resultado.linhas == 0:
            motivos.append('%s: a view está vazia, não há como conferir' % candidata)
        elif resultado.nulas:
            motivos.append('%s tem %d linha(s) nula(s)' % (candidata, resultado.nulas))
        else:
            motivos.append('%s se repete%s' % (candidata, ' dentro do escopo' if escopo else ''))
    return Escolha(None, 'view: ' + '; '.join(motivos))


def _curto(erro: BaseException) -> str:
    texto = ' '.join(str(erro).split())
    return texto if len(texto) <= 160 else texto[:157] + '...'


def montar(
    catalogo: Catalogo,
    dialeto: Dialect,
    *,
    cliente: str,
    entra: Callable[[Objeto], bool],
    escopo_pedido: str | None = None,
    cadastro_pedido: str | None = None,
    conferir: ConferirChave | None = None,
    referencia_schema: str = './mapeamento.schema.json',
) -> Esqueleto:
    """
    O esqueleto a partir do catálogo, em etapas: o cadastro pedido, os objetos
    úteis, o escopo (e o cadastro adivinhado), um dataset por objeto útil.
    `entra`: o objeto vira dataset (--incluir/--excluir; os outros do catálogo
    estão la só para a diferença e o cadastro). Levanta ErroDescoberta quando
    --cadastro ou --escopo nao casam com o catálogo.
    """
    cadastro = _cadastro_pedido(catalogo, cadastro_pedido)
    esqueleto = Esqueleto({}, [], Escolha(None, ''), cadastro)
    uteis = _objetos_uteis(catalogo, dialeto, entra, esqueleto)
    escopo = _escolher_escopo(esqueleto, [o for o, _d, _f in uteis], escopo_pedido)
    usados: set[str] = set()
    for objeto, dentro, de_fora in uteis:
        esqueleto.datasets.append(
            _dataset(objeto, dentro, de_fora, escopo, dialeto, conferir, usados)
        )
    esqueleto.mapa = {
        '$schema': referencia_schema,
        '$comment': 'Esqueleto escrito pelo descobrir: confira os palpites do relatório e o'
        ' $comment de cada dataset (docs/mapeamento.md, "Começar com descobrir").',
        'client': cliente,
        'listener': {'strategy': 'coluna'},
        'projects': _projetos(esqueleto, esqueleto.cadastro, escopo, bool(cadastro_pedido)),
        'datasets': [d.entrada() for d in esqueleto.datasets],
    }
    return esqueleto


def _cadastro_pedido(catalogo: Catalogo, pedido: str | None) -> Objeto | None:
    """O objeto do --cadastro (None sem ele); o nome que não está no catálogo é recusado."""
    if not pedido:
        return None
    cadastro = catalogo.achar(pedido)
    if cadastro is None:
        raise ErroDescoberta(
            '--cadastro %s: nenhuma tabela ou view com esse nome no catálogo%s. Os objetos'
            ' que ele mostra: %s.'
            % (pedido, _onde_procurou(catalogo), _alguns(o.source_object for o in catalogo.objetos))
        )
    return cadastro


def _objetos_uteis(
    catalogo: Catalogo, dialeto: Dialect, entra: Callable[[Objeto], bool], esqueleto: Esqueleto
) -> list[tuple[Objeto, list[str], list[Fora]]]:
    """Os objetos que viram dataset, com as colunas de dentro e de fora; os outros, ignorados."""
    uteis: list[tuple[Objeto, list[str], list[Fora]]] = []
    for objeto in (o for o in catalogo.objetos if entra(o)):
        problema = objeto.problema or _problema_do_nome(objeto)
        if problema:
            esqueleto.ignorados.append((objeto.source_object, problema))
            continue
        dentro, de_fora = colunas_do_objeto(objeto, dialeto)
        if not dentro:
            esqueleto.ignorados.append(
                (
                    objeto.source_object,
                    'nenhuma coluna que o intake'
                    ' aceite'
                    + (
                        ' (%s)' % ', '.join('%s: %s' % (f.coluna, f.tipo) for f in de_fora)
                        if de_fora
                        else ''
                    ),
                )
            )
            continue
        uteis.append((objeto, dentro, de_fora))
    if not uteis:
        raise ErroDescoberta(
            'nenhum objeto do catálogo virou dataset%s: confira --incluir/--excluir e o'
            ' --esquema. Os objetos que o catálogo mostra: %s.'
            % (_onde_procurou(catalogo), _alguns(o.source_object for o in catalogo.objetos))
        )
    return uteis


def _escolher_escopo(
    esqueleto: Esqueleto, objetos: list[Objeto], escopo_pedido: str | None
) -> Escolha:
    """A coluna de escopo (pedida ou adivinhada) e, sem --cadastro, o cadastro adivinhado."""
    escopo = regras.escolher_escopo(objetos, escopo_pedido, esqueleto.cadastro)
    if escopo_pedido and not any(o.coluna(escopo_pedido) for o in objetos):
        raise ErroDescoberta(
            '--escopo %s: nenhum objeto do catálogo tem essa coluna. Confira o nome (o valor'
            ' da coluna é o código da empresa) ou tire --escopo para o descobrir adivinhar.'
            % escopo_pedido
        )
    esqueleto.escopo = escopo
    if escopo.palpite:
        esqueleto.palpites.append('scope_column: %s (%s)' % (escopo.coluna, escopo.porque))
    elif escopo.coluna is None:
        esqueleto.avisos.append(
            'NENHUMA coluna de escopo: todo objeto vai inteiro para cada empresa (%s). Se o'
            ' ERP tem mais de uma empresa, diga a coluna com --escopo COLUNA.' % escopo.porque
        )
    if esqueleto.cadastro is None:
        esqueleto.cadastro = regras.adivinhar_cadastro(objetos, escopo.coluna)
        if esqueleto.cadastro is not None:
            esqueleto.palpites.append(
                'cadastro de empresas: %s (confirme com --cadastro)'
                % esqueleto.cadastro.source_object
            )
    return escopo


def _dataset(
    objeto: Objeto,
    dentro: list[str],
    de_fora: list[Fora],
    escopo: Escolha,
    dialeto: Dialect,
    conferir: ConferirChave | None,
    usados: set[str],
) -> DatasetDescoberto:
    """Um objeto útil virando dataset: o recorte, a key, a coluna de mudança e a sonda."""
    aceitas = set(dentro)
    coluna_escopo = objeto.coluna(escopo.coluna) if escopo.coluna else None
    recorte = coluna_escopo.nome if coluna_escopo and coluna_escopo.nome in aceitas else None
    chave = regras.escolher_chave(objeto, aceitas, dialeto)
    if objeto.view:
        chave = _chave_da_view(objeto, aceitas, recorte, conferir)
    carimbo, notas = regras.escolher_carimbo(objeto, aceitas)
    sonda = regras.sonda(objeto, carimbo.coluna, dialeto) if carimbo.coluna else None
    return DatasetDescoberto(
        objeto,
        _nome_do_dataset(objeto, usados),
        dentro,
        de_fora,
        chave,
        carimbo,
        sonda,
        recorte,
        notas,
    )


def _projetos(
    esqueleto: Esqueleto, cadastro: Objeto | None, escopo: Escolha, pedido: bool
) -> CadastroDoMapa:
    if cadastro is not None:
        coluna = regras.escopo_do_cadastro(cadastro, escopo.coluna)
        if coluna.coluna is not None:
            if coluna.palpite:
                esqueleto.palpites.append(
                    'projects.scope_column: %s (%s)' % (coluna.coluna, coluna.porque)
                )
            regra, palpites = regras.regra_de_projeto(cadastro, coluna.coluna)
            esqueleto.palpites += palpites
            return regra
        if pedido:
            raise ErroDescoberta(
                '--cadastro %s: %s -- diga a coluna com o código da empresa com --escopo'
                ' COLUNA.' % (cadastro.source_object, coluna.porque)
            )
    esqueleto.avisos.append(
        'sem cadastro de empresas: a seção projects ficou com %s -- rode de novo com'
        ' --cadastro TABELA (a tabela ou view com uma linha por empresa).' % SEM_CADASTRO
    )
    return {
        '$comment': 'Escolha o cadastro de empresas: rode o descobrir com --cadastro.',
        'source_object': SEM_CADASTRO,
        'scope_column': escopo.coluna or SEM_COLUNA,
    }


def _onde_procurou(catalogo: Catalogo) -> str:
    esquemas = sorted(
        {o.esquema or catalogo.esquema_padrao or '(padrão)' for o in catalogo.objetos}
    )
    return ' (esquema(s) %s)' % ', '.join(esquemas) if esquemas else ''


def _alguns(nomes: Iterable[str], quantos: int = 30) -> str:
    lista = list(nomes)
    if not lista:
        return '(nenhum)'
    return ', '.join(lista[:quantos]) + (' ...' if len(lista) > quantos else '')


# ---------------------------------------------------------------------------
# O relatorio
# ---------------------------------------------------------------------------


def relatorio(esqueleto: Esqueleto) -> list[str]:
    """As seções do relatório (sem o cabeçalho da origem, que a linha de comando escreve)."""
    linhas: list[str] = []

    def secao(titulo: str, itens: Sequence[str]) -> None:
        if itens:
            linhas.append('')
            linhas.append(titulo)
            linhas.extend('  - %s' % item for item in itens)

    secao('AVISOS:', esqueleto.avisos)
    palpites = list(esqueleto.palpites)
    for d in esqueleto.datasets:
        if d.chave.palpite:
            palpites.append(
                '%s.key: %s (%s)' % (d.objeto.source_object, d.chave.coluna, d.chave.porque)
            )
        if d.carimbo.palpite:
            palpites.append(
                '%s.watch_column: %s (%s)'
                % (d.objeto.source_object, d.carimbo.coluna, d.carimbo.porque)
            )
        palpites += ['%s: %s' % (d.objeto.source_object, n) for n in d.notas]
    secao('palpites (confira):', palpites)
    secao(
        'só varredura (sem coluna de alteração: mudança só chega na carga diária):',
        [
            '%s (%s)' % (d.objeto.source_object, d.objeto.genero)
            for d in esqueleto.datasets
            if not d.carimbo.coluna
        ],
    )
    secao(
        'índices faltando (a sonda do ouvinte varreria a tabela inteira a cada ciclo;'
        ' o DBA rodaria):',
        [
            '%s.%s: %s' % (d.objeto.source_object, d.carimbo.coluna, d.sonda.criar)
            for d in esqueleto.datasets
            if d.sonda and d.sonda.situacao == 'falta'
        ],
    )
    secao(
        'views ao vivo (o índice da coluna de alteração tem de estar na tabela de base;'
        ' o catálogo não diz):',
        [
            '%s.%s' % (d.objeto.source_object, d.carimbo.coluna)
            for d in esqueleto.datasets
            if d.sonda and d.sonda.situacao == 'view'
        ],
    )
    secao(
        'sem key (o Contextia deduplica por hash: uma alteração vira registro novo até a'
        ' varredura):',
        [
            '%s: %s' % (d.objeto.source_object, d.chave.porque)
            for d in esqueleto.datasets
            if not d.chave.coluna
        ],
    )
    secao(
        'colunas deixadas de fora (o intake não as aceita como estão):',
        [
            '%s.%s (%s): %s -- na view: %s'
            % (d.objeto.source_object, f.coluna, f.tipo, f.motivo, f.correcao)
            for d in esqueleto.datasets
            for f in d.fora
        ],
    )
    secao(
        'domínio (scope_column null: vão inteiras para cada empresa):',
        [d.objeto.source_object for d in esqueleto.datasets if d.escopo is None],
    )
    secao(
        'objetos que não viraram dataset:',
        ['%s: %s' % (nome, motivo) for nome, motivo in esqueleto.ignorados],
    )
    return linhas


# ---------------------------------------------------------------------------
# A diferenca contra o mapeamento existente
# ---------------------------------------------------------------------------


@dataclass
class Diferencas:
    """O que mudou entre o mapeamento gravado e o catálogo de agora."""

    linhas: list[str] = field(default_factory=list)
    quebrado: bool = False
    """Algo do mapeamento sumiu do catálogo: a carga dele falharia."""


def _colunas_citadas(row: Mapping[str, JsonDecodificado]) -> list[str]:
    citadas = [c for c in row.get('columns') or () if isinstance(c, str)]
    for campo in ('key', 'watch_column', 'scope_column'):
        valor = row.get(campo)
        if isinstance(valor, str) and valor not in citadas:
            citadas.append(valor)
    return citadas


def diferencas(
    existente: Mapping[str, JsonDecodificado],
    esqueleto: Esqueleto,
    catalogo: Catalogo,
    dialeto: Dialect,
) -> Diferencas:
    """Colunas novas e sumidas de cada dataset, e objetos novos e sumidos."""
    saida = Diferencas()
    mapeados: set[int] = set()
    for indice, row in enumerate(existente.get('datasets') or ()):
        if not isinstance(row, dict) or not isinstance(row.get('source_object'), str):
            continue
        rotulo = 'datasets[%d] %s (%s)' % (indice, row.get('dataset'), row['source_object'])
        objeto = catalogo.achar(row['source_object'])
        if objeto is None or objeto.problema:
            saida.quebrado = True
            saida.linhas.append(
                '%s: o objeto sumiu do catálogo (ou este login perdeu o SELECT'
                ' nele)%s'
                % (rotulo, ' -- %s' % objeto.problema if objeto and objeto.problema else '')
            )
            continue
        mapeados.add(id(objeto))
        nomes = {c.nome.lower() for c in objeto.colunas}
        citadas = _colunas_citadas(row)
        sumidas = [c for c in citadas if c.lower() not in nomes]
        if sumidas:
            saida.quebrado = True
            saida.linhas.append(
                '%s: coluna(s) que sumiram do catálogo: %s -- a carga falharia;'
                ' tire-as do mapeamento ou peça-as de volta na view' % (rotulo, ', '.join(sumidas))
            )
        dentro, _fora = colunas_do_objeto(objeto, dialeto)
        ja = {c.lower() for c in citadas}
        novas = [c for c in dentro if c.lower() not in ja]
        if novas:
            saida.linhas.append(
                '%s: coluna(s) novas no catálogo, fora de columns: %s' % (rotulo, ', '.join(novas))
            )
    projetos = existente.get('projects')
    if isinstance(projetos, dict) and isinstance(projetos.get('source_object'), str):
        objeto = catalogo.achar(projetos['source_object'])
        if objeto is None:
            saida.quebrado = True
            saida.linhas.append(
                'projects (%s): o cadastro de empresas sumiu do catálogo'
                % projetos['source_object']
            )
        else:
            mapeados.add(id(objeto))
            nomes = {c.nome.lower() for c in objeto.colunas}
            do_cadastro: list[JsonDecodificado] = [
                projetos.get(c) for c in ('scope_column', 'name_column', 'group_column')
            ]
            do_cadastro += [
                f.get('column') for f in projetos.get('filters') or () if isinstance(f, dict)
            ]
            sumidas = [c for c in do_cadastro if isinstance(c, str) and c.lower() not in nomes]
            if sumidas:
                saida.quebrado = True
                saida.linhas.append(
                    'projects (%s): coluna(s) que sumiram do catálogo: %s'
                    % (projetos['source_object'], ', '.join(sumidas))
                )
    novos = [
        '%s (%s)' % (d.objeto.source_object, d.objeto.genero)
        for d in esqueleto.datasets
        if id(d.objeto) not in mapeados
    ]
    if novos:
        saida.linhas.append(
            'objeto(s) novos no catálogo, fora do mapeamento: %s' % ', '.join(novos)
        )
    return saida


# ---------------------------------------------------------------------------
# O JSON
# ---------------------------------------------------------------------------

LARGURA = 100


def texto_json(valor: object, recuo: int = 0) -> str:
    """JSON com recuo de 2; lista de valores simples numa linha (quebrada na LARGURA)."""
    espaco = ' ' * recuo
    dentro = ' ' * (recuo + 2)
    if isinstance(valor, dict):
        if not valor:
            return '{}'
        if all(not isinstance(v, (dict, list)) for v in valor.values()):
            linha = json.dumps(valor, ensure_ascii=False)
            if len(linha) + recuo + 16 <= LARGURA // 2:
                return linha
        itens = [
            '%s%s: %s' % (dentro, json.dumps(k, ensure_ascii=False), texto_json(v, recuo + 2))
            for k, v in valor.items()
        ]
        return '{\n%s\n%s}' % (',\n'.join(itens), espaco)
    if isinstance(valor, list):
        if all(not isinstance(v, (dict, list)) for v in valor):
            partes = [json.dumps(v, ensure_ascii=False) for v in valor]
            linha = '[%s]' % ', '.join(partes)
            if len(linha) + recuo + 16 <= LARGURA:
                return linha
            linhas: list[str] = []
            atual: list[str] = []
            for parte in partes:
                if atual and len(dentro) + len(', '.join(atual + [parte])) + 1 > LARGURA:
                    linhas.append(', '.join(atual))
                    atual = []
                atual.append(parte)
            linhas.append(', '.join(atual))
            return '[\n%s\n%s]' % (',\n'.join(dentro + x for x in linhas), espaco)
        return '[\n%s\n%s]' % (',\n'.join(dentro + texto_json(v, recuo + 2) for v in valor), espaco)
    return json.dumps(valor, ensure_ascii=False)
