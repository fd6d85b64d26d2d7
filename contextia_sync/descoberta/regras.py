"""
As decisões do `descobrir`, sobre os registros do catálogo (nada de banco aqui).

    escolher_chave        key: a chave primária de uma coluna; senão uma única
                          não nula; senão nenhuma, dizendo por que
    candidatas_de_chave   view: as colunas com nome de chave, para conferir na origem
    escolher_carimbo      watch_column: data/hora ou número com nome de carimbo de
                          alteração; e `sonda`: se um índice a cobre
    escolher_escopo       scope_column: a pedida, a chave do cadastro, ou a mais
                          comum entre os nomes de empresa/filial
    adivinhar_cadastro    o cadastro de empresas, quando não foi pedido
    regra_de_projeto      a seção `projects`

Cada escolha diz o porque (`Escolha.porque`) e se foi palpite: o relatório
mostra os palpites para o operador conferir.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy.dialects import mssql as _mssql

from contextia_sync.descoberta.catalogo import Coluna, Objeto
from contextia_sync.descoberta.tipos import concatenar, familia, quotar

if TYPE_CHECKING:
    from sqlalchemy.engine import Dialect

    from contextia_sync.tipos import CadastroDoMapa

# Nomes de carimbo de alteracao, na ordem de preferencia (comparados sem caixa).
NOMES_DE_CARIMBO = (
    'ALTERADO_EM',
    'DT_ALTERACAO',
    'DATA_ALTERACAO',
    'DH_ALTERACAO',
    'DTHR_ALTERACAO',
    'DATAHORA_ALTERACAO',
    'ULTIMA_ALTERACAO',
    'DT_ULT_ALT',
    'DT_ULTIMA_ALTERACAO',
    'ATUALIZADO_EM',
    'DT_ATUALIZACAO',
    'DATA_ATUALIZACAO',
    'MODIFICADO_EM',
    'S_T_A_M_P_',
    'LAST_UPDATE',
    'LAST_UPDATED',
    'UPDATED_AT',
    'UPDATED_ON',
    'UPDATE_DATE',
    'MODIFIED_AT',
    'MODIFIED_ON',
    'MODIFIED_DATE',
    'DATE_MODIFIED',
    'LAST_MODIFIED',
    'LASTMODIFIED',
    'ROWVERSION',
    'ROW_VERSION',
    'VERSAO_LINHA',
)
# O resto que tem cara de carimbo de alteracao (DT_ALT, dh_atualiz, ts_update).
PADRAO_CARIMBO = re.compile(
    r'ALTERA|ATUALIZ|MODIFI|UPDAT|STAMP|ROWVER|(^|_)(DT|DH|DATA)_?ALT', re.I
)
# Carimbo de INCLUSAO: nao acompanha alteracao, nao serve de watch_column.
PADRAO_INCLUSAO = re.compile(r'CRIA|INCLU|INSER|CREAT', re.I)
# O numero de registro do Protheus: so cresce na inclusao (o ultimo recurso).
SO_INCLUSAO = ('R_E_C_N_O_',)

NOMES_DE_ESCOPO = (
    'EMPRESA_ID',
    'ID_EMPRESA',
    'COD_EMPRESA',
    'CD_EMPRESA',
    'CODEMPRESA',
    'EMPRESA',
    'CTX_ESCOPO',
    'ESCOPO',
    'FILIAL_ID',
    'ID_FILIAL',
    'COD_FILIAL',
    'CD_FILIAL',
    'FILIAL',
    'COMPANY_ID',
    'STORE_ID',
    'TENANT_ID',
    'BRANCH_ID',
    'ORGANIZATION_ID',
    'ORG_ID',
)
# Palavras de nome de cadastro de empresas (comparadas dentro do nome do objeto).
PALAVRAS_DE_CADASTRO = (
    'EMPRESA',
    'FILIA',
    'COMPAN',
    'STORE',
    'LOJA',
    'TENANT',
    'BRANCH',
    'SIGAMAT',
)
NOMES_DE_NOME = (
    'RAZAO_SOCIAL',
    'M0_NOMECOM',
    'NOME_EMPRESA',
    'NOME',
    'NOME_FANTASIA',
    'RAZAO',
    'FANTASIA',
    'DESCRICAO',
    'COMPANY_NAME',
    'STORE_NAME',
    'NAME',
    'TITLE',
)
NOMES_DE_GRUPO = ('GRUPO', 'GRUPO_EMPRESA', 'GRUPO_ECONOMICO', 'M0_NOME', 'GROUP_NAME')
NOMES_DE_FILTRO = (
    'ATIVA',
    'ATIVO',
    'SITUACAO',
    'STATUS',
    'BLOQUEADA',
    'BLOQUEADO',
    'CTX_BLOQUEADA',
    'INATIVA',
    'D_E_L_E_T_',
    'ACTIVE',
)
# O nome que uma view da a sua chave (conferida na origem antes de valer).
NOMES_DE_CHAVE = ('ID', 'CTX_CHAVE', 'CHAVE', 'CODIGO', 'COD')

# Ate quantas candidatas a key de uma view sao conferidas (cada uma le a view).
CANDIDATAS_POR_VIEW = 3


@dataclass(frozen=True)
class Escolha:
    """Uma decisão: a coluna (ou None) e o porque, em palavras do operador."""

    coluna: str | None
    porque: str
    palpite: bool = False


@dataclass(frozen=True)
class Sonda:
    """Se um índice cobre a coluna de mudança (a sonda do ouvinte compara `coluna > marca`)."""

    situacao: str
    """'coberta', 'falta' ou 'view' (o índice mora na tabela de base; o catálogo não diz)."""
    indice: str | None = None
    criar: str | None = None
    """O CREATE INDEX que o DBA rodaria, quando falta."""


def _nomes(colunas: Iterable[str]) -> str:
    return ', '.join(colunas)


# ---------------------------------------------------------------------------
# key
# ---------------------------------------------------------------------------


def escolher_chave(objeto: Objeto, dentro: set[str], dialeto: Dialect) -> Escolha:
    """A key de uma tabela pelo catálogo; numa view, None (quem chama confere candidatas)."""
    if objeto.view:
        return Escolha(None, 'view: o catálogo não diz a chave de uma view')
    pk = objeto.chave_primaria
    motivos = []
    if len(pk) == 1:
        if pk[0] in dentro:
            return Escolha(pk[0], 'chave primária')
        motivos.append('a chave primária %s ficou de fora pelo tipo' % pk[0])
    unicas = [u[0] for u in objeto.unicas if len(u) == 1]
    for nome in unicas:
        coluna = objeto.coluna(nome)
        if coluna is not None and nome in dentro and not coluna.nula:
            return Escolha(
                nome,
                'única e não nula%s'
                % (' (a chave primária é composta: %s)' % _nomes(pk) if len(pk) > 1 else ''),
            )
    nulas = [n for n in unicas if (c := objeto.coluna(n)) is not None and c.nula]
    if len(pk) > 1:
        motivos.append(
            'chave primária composta (%s) e o key é uma coluna só -- numa view: %s'
            % (_nomes(pk), concatenar(list(pk), dialeto, 'CTX_CHAVE'))
        )
    elif not pk:
        motivos.append('sem chave primária nem coluna única não nula')
    if nulas:
        motivos.append('%s é única mas aceita nulo' % _nomes(nulas))
    return Escolha(None, '; '.join(motivos))


def candidatas_de_chave(objeto: Objeto, dentro: set[str]) -> list[str]:
    """Colunas de uma view com nome de chave, na ordem de preferência (para conferir)."""
    candidatas: list[str] = []
    por_nome = {c.nome.upper(): c.nome for c in objeto.colunas if c.nome in dentro}
    for nome in NOMES_DE_CHAVE:
        if nome in por_nome:
            candidatas.append(por_nome[nome])
    candidatas += [
        c.nome
        for c in objeto.colunas
        if c.nome in dentro and c.nome.upper().endswith('_CHAVE') and c.nome not in candidatas
    ]
    primeira = next((c.nome for c in objeto.colunas if c.nome in dentro), None)
    if primeira and primeira not in candidatas and re.search(r'(ID|_COD|CODIGO)$', primeira, re.I):
        candidatas.append(primeira)
    return candidatas[:CANDIDATAS_POR_VIEW]


# ---------------------------------------------------------------------------
# watch_column
# ---------------------------------------------------------------------------


def _posto(coluna: Coluna) -> int | None:
    """A preferência da coluna como carimbo (menor e melhor); None se o nome não é de carimbo."""
    if isinstance(coluna.tipo, _mssql.TIMESTAMP):
        return 0  # rowversion: muda a cada gravacao, por definicao
    nome = coluna.nome.upper()
    if nome in NOMES_DE_CARIMBO:
        return 1
    if nome in SO_INCLUSAO:
        return 3
    if PADRAO_CARIMBO.search(nome) and not PADRAO_INCLUSAO.search(nome):
        return 2
    return None


_FAMILIAS = {'datetime': 0, 'numerico': 1, 'date': 2}


def escolher_carimbo(objeto: Objeto, dentro: set[str]) -> tuple[Escolha, list[str]]:
    """
    A watch_column e as notas (coluna com nome de carimbo mas tipo errado,
    carimbo que só cresce na inclusão).
    """
    notas = []
    candidatas = []
    for posicao, coluna in enumerate(objeto.colunas):
        posto = _posto(coluna)
        if posto is None or coluna.nome not in dentro:
            continue
        tipo = familia(coluna)
        if tipo not in _FAMILIAS:
            notas.append(
                '%s tem nome de carimbo, mas é do tipo %s: texto compara como texto e a marca'
                ' de água pararia -- numa view: CAST(%s AS TIMESTAMP) (ou TO_TIMESTAMP(%s,'
                " 'DD/MM/YYYY HH24:MI:SS')) e watch_column nela"
                % (coluna.nome, coluna.texto_tipo, coluna.nome, coluna.nome)
            )
            continue
        coberta = sonda(objeto, coluna.nome, None).situacao == 'coberta'
        candidatas.append((posto, _FAMILIAS[tipo], not coberta, posicao, coluna.nome))
    if not candidatas:
        return Escolha(
            None,
            'nenhuma coluna de data/hora ou número com nome de carimbo de'
            ' alteração (ALTERADO_EM, DT_ALTERACAO, last_update, updated_at,'
            ' S_T_A_M_P_...)',
        ), notas
    posto, _familia, _sem_indice, _pos, nome = min(candidatas)
    if nome.upper() in SO_INCLUSAO:
        notas.append(
            '%s só cresce na inclusão: alteração só chega na varredura -- ligue o'
            ' S_T_A_M_P_ (DBAccess) e aponte watch_column para ele' % nome
        )
    porque = 'rowversion (muda a cada gravação)' if posto == 0 else 'nome de carimbo de alteração'
    return Escolha(nome, porque, palpite=posto >= 2), notas


def sonda(objeto: Objeto, coluna: str, dialeto: Dialect | None) -> Sonda:
    """
    Um indice cobre `coluna`? So se ela e a PRIMEIRA coluna dele: a sonda
    compara `coluna > marca`, e o indice que comeca por outra nao serve para isso.
    `dialeto` None: so a situacao, sem o CREATE INDEX.
    """
    if objeto.view:
        return Sonda('view')
    alvo = coluna.lower()
    if objeto.chave_primaria and objeto.chave_primaria[0].lower() == alvo:
        return Sonda('coberta', 'chave primária')
    for indice in objeto.indices:
        if indice.colunas and indice.colunas[0].lower() == alvo:
            return Sonda('coberta', indice.nome or '(sem nome)')
    return Sonda('falta', criar=criar_indice(objeto, coluna, dialeto) if dialeto else None)


def criar_indice(objeto: Objeto, coluna: str, dialeto: Dialect) -> str:
    """O CREATE INDEX da coluna de mudanca, no SQL do banco (CONCURRENTLY no PostgreSQL)."""
    prefixo = 'ix_' if objeto.nome == objeto.nome.lower() else 'IX_'
    nome = re.sub(r'[^A-Za-z0-9_]', '_', '%s%s_%s' % (prefixo, objeto.nome, coluna))[:60]
    # O quote do dialeto (o mesmo que o SQLAlchemy usa ao compilar): so poe aspas
    # onde o banco precisa (maiuscula no PostgreSQL, palavra reservada).
    tabela = quotar(objeto.nome, dialeto)
    if objeto.esquema:
        tabela = '%s.%s' % (quotar(objeto.esquema, dialeto), tabela)
    return 'CREATE INDEX %s%s ON %s (%s);' % (
        'CONCURRENTLY ' if dialeto.name == 'postgresql' else '',
        quotar(nome, dialeto),
        tabela,
        quotar(coluna, dialeto),
    )


# ---------------------------------------------------------------------------
# scope_column e o cadastro
# ---------------------------------------------------------------------------


def _tem(objeto: Objeto, nome: str) -> bool:
    return objeto.coluna(nome) is not None


def escolher_escopo(
    objetos: Sequence[Objeto], pedido: str | None, cadastro: Objeto | None
) -> Escolha:
    """
    A coluna de escopo dos datasets: a pedida; a chave primária do cadastro, se
    outros objetos a tem; ou o nome de empresa/filial que aparece em mais objetos.
    """
    if pedido:
        return Escolha(pedido, 'pedida com --escopo')
    if cadastro is not None and len(cadastro.chave_primaria) == 1:
        chave = cadastro.chave_primaria[0]
        quantos = sum(1 for o in objetos if o is not cadastro and _tem(o, chave))
        # `ID` e a chave de quase toda tabela: recortar por ela seria recortar
        # cada tabela pela propria chave.
        if quantos and chave.upper() != 'ID':
            return Escolha(
                chave,
                'a chave primária do cadastro %s; aparece em %d outro(s)'
                ' objeto(s)' % (cadastro.source_object, quantos),
                palpite=True,
            )
    contagem = []
    for ordem, nome in enumerate(NOMES_DE_ESCOPO):
        quantos = sum(1 for o in objetos if o is not cadastro and _tem(o, nome))
        if quantos:
            contagem.append((-quantos, ordem, nome))
    if not contagem:
        return Escolha(
            None,
            'nenhuma coluna com nome de empresa ou filial (%s...)' % ', '.join(NOMES_DE_ESCOPO[:4]),
        )
    menos, _ordem, nome = min(contagem)
    real = next(c.nome for o in objetos if (c := o.coluna(nome)) is not None)
    return Escolha(real, 'nome de empresa/filial; aparece em %d objeto(s)' % -menos, palpite=True)


def escopo_do_cadastro(cadastro: Objeto, escopo: str | None) -> Escolha:
    """A coluna do cadastro com o código da empresa: a de escopo, ou a chave primária dele."""
    if escopo:
        coluna = cadastro.coluna(escopo)
        if coluna is not None:
            return Escolha(coluna.nome, 'a coluna de escopo')
    if len(cadastro.chave_primaria) == 1:
        return Escolha(
            cadastro.chave_primaria[0],
            'a chave primária do cadastro (os datasets usam %s: confira que guardam'
            ' o mesmo código)' % escopo
            if escopo
            else 'a chave primária do cadastro',
            palpite=True,
        )
    return Escolha(
        None,
        'o cadastro %s não tem %s nem chave primária de uma coluna'
        % (cadastro.source_object, escopo or 'coluna de escopo'),
    )


def adivinhar_cadastro(objetos: Sequence[Objeto], escopo: str | None) -> Objeto | None:
    """O cadastro de empresas: a chave primária e o escopo, ou o nome de cadastro."""
    if not escopo:
        return None

    def nome_de_cadastro(objeto: Objeto) -> bool:
        return any(p in objeto.nome.upper() for p in PALAVRAS_DE_CADASTRO)

    pela_chave = [
        o
        for o in objetos
        if len(o.chave_primaria) == 1 and o.chave_primaria[0].lower() == escopo.lower()
    ]
    for grupo in (pela_chave, [o for o in objetos if _tem(o, escopo)]):
        bons = [o for o in grupo if nome_de_cadastro(o)]
        if bons:
            return bons[0]
    return pela_chave[0] if pela_chave else None


def _primeira(
    objeto: Objeto, nomes: Sequence[str], menos: str | None = None, texto: bool = False
) -> str | None:
    for nome in nomes:
        coluna = objeto.coluna(nome)
        if coluna is None or (menos and coluna.nome.lower() == menos.lower()):
            continue
        if texto and familia(coluna) != 'texto':
            continue
        return coluna.nome
    return None


def regra_de_projeto(cadastro: Objeto, escopo: str) -> tuple[CadastroDoMapa, list[str]]:
    """A seção `projects` a partir do cadastro (`escopo`: a coluna dele), e os palpites."""
    coluna = cadastro.coluna(escopo)
    if coluna is None:
        raise ValueError('%s não tem a coluna %s' % (cadastro.source_object, escopo))
    regra: CadastroDoMapa = {'source_object': cadastro.source_object, 'scope_column': coluna.nome}
    palpites = []
    nome = _primeira(cadastro, NOMES_DE_NOME, menos=coluna.nome, texto=True)
    if nome:
        regra['name_column'] = nome
        palpites.append('name_column: %s (o nome que o projeto recebe)' % nome)
    else:
        palpites.append(
            'name_column: nenhuma coluna de nome no cadastro %s -- o projeto se'
            ' chamará "Empresa <código>"' % cadastro.source_object
        )
    grupo = _primeira(cadastro, NOMES_DE_GRUPO, menos=coluna.nome)
    if grupo:
        regra['group_column'] = grupo
        palpites.append('group_column: %s (o valor vira grupo do projeto)' % grupo)
    filtros = [c.nome for n in NOMES_DE_FILTRO if (c := cadastro.coluna(n)) is not None]
    if filtros:
        exemplo = (
            '{"column": "D_E_L_E_T_", "not_equals": "*"}'
            if 'D_E_L_E_T_' in filtros
            else '{"column": "%s", "equals": "S"}' % filtros[0]
        )
        palpites.append(
            'filters: nenhum escrito; %s parece dizer se a empresa vale -- toda'
            ' linha do cadastro vira projeto até você acrescentar, por exemplo,'
            ' "filters": [%s]' % (_nomes(filtros), exemplo)
        )
    return regra, palpites
