"""
A origem da tortura: o banco de teste, o esquema, a carga hostil e o matador de
conexões.

O relógio da coluna de mudança e o do BANCO (`now()` dentro da transação), como
num ERP de verdade: e exatamente esse relógio que faz a transação longa gravar
um carimbo anterior ao seu commit -- o caso que a `--folga` existe para cobrir.
"""

import datetime
import decimal
import itertools
import random
import threading
import time
import typing
import uuid

import sqlalchemy as sa
from sqlalchemy.dialects import mysql, postgresql

ADMIN_URL = {
    'postgres': 'postgresql+psycopg://postgres@127.0.0.1:5432/postgres',
    'mariadb': 'mysql+pymysql://root@127.0.0.1:3306/',
}
ORIGEM_URL = {
    'postgres': 'postgresql+psycopg://postgres@127.0.0.1:5432/{banco}',
    'mariadb': 'mysql+pymysql://root@127.0.0.1:3306/{banco}',
}

# Empresas do cadastro. 99 esta em `excluded_scopes`; 8 e inativa (a regra
# recusa); 7 aparece no meio da carga.
EMPRESAS_INICIAIS = (1, 2, 3, 4, 5)
EMPRESA_EXCLUIDA = 99
EMPRESA_INATIVA = 8
EMPRESA_NOVA = 7


def _texto_longo():
    # O registro acima do limite de bytes do intake mora aqui: TEXT do MariaDB
    # guarda so 64 KiB, o MEDIUMTEXT 16 MiB.
    return sa.Text().with_variant(mysql.MEDIUMTEXT(), 'mysql', 'mariadb')


def _carimbo():
    # TIMESTAMP(6)/DATETIME(6): microssegundos nos dois bancos, para que a
    # latencia medida nao tenha degraus de um segundo.
    return (
        sa.DateTime()
        .with_variant(postgresql.TIMESTAMP(precision=6), 'postgresql')
        .with_variant(mysql.DATETIME(fsp=6), 'mysql', 'mariadb')
    )


def esquema():
    """As tabelas da tortura, com nomes em maiúsculas como no ERP (sempre quotados)."""
    meta = sa.MetaData()
    sa.Table(
        'EMPRESAS',
        meta,
        sa.Column('EMPRESA_ID', sa.Integer, primary_key=True, autoincrement=False),
        sa.Column('RAZAO_SOCIAL', sa.String(60), nullable=False),
        sa.Column('ATIVA', sa.String(1), nullable=False),
    )
    sa.Table(
        'TITULOS',
        meta,
        sa.Column('ID', sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column('EMPRESA_ID', sa.Integer, nullable=False),
        sa.Column('VALOR', sa.Numeric(14, 2), nullable=False),
        sa.Column('SITUACAO', sa.String(1), nullable=False),
        sa.Column('HISTORICO', sa.String(80), nullable=False),
        sa.Column('OBSERVACAO', _texto_longo(), nullable=True),
        sa.Column('ALTERADO_EM', _carimbo(), nullable=False),
        sa.Index('IX_TITULOS_ALTERADO_EM', 'ALTERADO_EM'),
    )
    sa.Table(
        'PEDIDOS',
        meta,
        sa.Column('ID', sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column('EMPRESA_ID', sa.Integer, nullable=False),
        sa.Column('CLIENTE', sa.String(40), nullable=False),
        sa.Column('TOTAL', sa.Numeric(14, 2), nullable=False),
        sa.Column('STATUS', sa.String(1), nullable=False),
        sa.Column('ALTERADO_EM', _carimbo(), nullable=False),
        sa.Index('IX_PEDIDOS_ALTERADO_EM', 'ALTERADO_EM'),
    )
    # Sem `key` no mapeamento: o servidor deduplica por hash do conteudo.
    sa.Table(
        'MOVIMENTOS',
        meta,
        sa.Column('DOC', sa.String(24), primary_key=True),
        sa.Column('EMPRESA_ID', sa.Integer, nullable=False),
        sa.Column('VALOR', sa.Numeric(14, 2), nullable=False),
        sa.Column('TIPO', sa.String(1), nullable=False),
        sa.Column('ALTERADO_EM', _carimbo(), nullable=False),
        sa.Index('IX_MOVIMENTOS_ALTERADO_EM', 'ALTERADO_EM'),
    )
    # O carimbo em massa: todas as linhas com o mesmo carimbo, acima do teto, e
    # depois a tabela fica quieta (a migracao de um ERP faz isso).
    sa.Table(
        'ESTOQUES',
        meta,
        sa.Column('ID', sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column('EMPRESA_ID', sa.Integer, nullable=False),
        sa.Column('PRODUTO', sa.String(30), nullable=False),
        sa.Column('SALDO', sa.Numeric(14, 3), nullable=False),
        sa.Column('ALTERADO_EM', _carimbo(), nullable=False),
        sa.Index('IX_ESTOQUES_ALTERADO_EM', 'ALTERADO_EM'),
    )
    # Dominio: sem recorte, vai inteiro para toda empresa.
    sa.Table(
        'SITUACOES',
        meta,
        sa.Column('CODIGO', sa.String(4), primary_key=True),
        sa.Column('DESCRICAO', sa.String(60), nullable=False),
        sa.Column('ALTERADO_EM', _carimbo(), nullable=False),
    )
    return meta


# Dataset do mapeamento -> (tabela, chave ou None, colunas, com recorte?)
DATASETS = {
    'titulos': (
        'TITULOS',
        'ID',
        ['ID', 'EMPRESA_ID', 'VALOR', 'SITUACAO', 'HISTORICO', 'OBSERVACAO', 'ALTERADO_EM'],
        True,
    ),
    'pedidos': (
        'PEDIDOS',
        'ID',
        ['ID', 'EMPRESA_ID', 'CLIENTE', 'TOTAL', 'STATUS', 'ALTERADO_EM'],
        True,
    ),
    'movimentos': ('MOVIMENTOS', None, ['DOC', 'EMPRESA_ID', 'VALOR', 'TIPO', 'ALTERADO_EM'], True),
    'estoques': ('ESTOQUES', 'ID', ['ID', 'EMPRESA_ID', 'PRODUTO', 'SALDO', 'ALTERADO_EM'], True),
    'situacoes': ('SITUACOES', 'CODIGO', ['CODIGO', 'DESCRICAO', 'ALTERADO_EM'], False),
}


def mapeamento(esquema_json=None):
    """O mapeamento da tortura (formato da issue 4)."""
    datasets = []
    for nome, (tabela, chave, colunas, recorte) in DATASETS.items():
        row = {
            'dataset': nome,
            'source_object': tabela,
            'columns': list(colunas),
            'key': chave,
            'description': 'tortura: %s' % tabela.lower(),
        }
        if not recorte:
            row['scope_column'] = None
        datasets.append(row)
    mapa = {
        'client': 'tortura',
        'source': {'excluded_scopes': [str(EMPRESA_EXCLUIDA)]},
        'listener': {'strategy': 'coluna'},
        'defaults': {
            'scope_column': 'EMPRESA_ID',
            'key': 'ID',
            'watch_column': 'ALTERADO_EM',
            'chunk': 200,
        },
        'projects': {
            'source_object': 'EMPRESAS',
            'scope_column': 'EMPRESA_ID',
            'name_column': 'RAZAO_SOCIAL',
            'filters': [{'column': 'ATIVA', 'equals': 'S'}],
        },
        'datasets': datasets,
    }
    if esquema_json:
        mapa = dict({'$schema': esquema_json}, **mapa)
    return mapa


# ---------------------------------------------------------------------------
# O banco de teste
# ---------------------------------------------------------------------------


def banco_disponivel(tipo):
    """(True, '') se o servidor responde; (False, motivo) se não."""
    try:
        motor = sa.create_engine(
            ADMIN_URL[tipo], poolclass=sa.pool.NullPool, connect_args={'connect_timeout': 3}
        )
        with motor.connect() as conexao:
            conexao.execute(sa.text('SELECT 1'))
        motor.dispose()
        return True, ''
    except Exception as erro:  # noqa: BLE001
        return False, '%s em %s não responde (%s)' % (
            tipo,
            ADMIN_URL[tipo].split('@')[-1],
            type(erro).__name__,
        )


def criar_banco(tipo, prefixo='tortura', nome=None, url=None):
    """
    Cria um banco novo, de nome único, com o esquema. Devolve (nome, url).
    Com `nome` e `url` (o banco que o servidor privado dos modos por log já
    criou, com o login só leitura dele), só cria o esquema, pelo dono.
    """
    if nome is None:
        nome = '%s_%s' % (prefixo, uuid.uuid4().hex[:10])
        admin = sa.create_engine(
            ADMIN_URL[tipo], isolation_level='AUTOCOMMIT', poolclass=sa.pool.NullPool
        )
        with admin.connect() as conexao:
            quotado = admin.dialect.identifier_preparer.quote_identifier(nome)
            conexao.execute(sa.text('CREATE DATABASE %s' % quotado))
        admin.dispose()
        url = ORIGEM_URL[tipo].format(banco=nome)
    motor = sa.create_engine(url, poolclass=sa.pool.NullPool)
    esquema().create_all(motor)
    motor.dispose()
    return nome, url


def derrubar_banco(tipo, nome):
    admin = sa.create_engine(
        ADMIN_URL[tipo], isolation_level='AUTOCOMMIT', poolclass=sa.pool.NullPool
    )
    quotado = admin.dialect.identifier_preparer.quote_identifier(nome)
    with admin.connect() as conexao:
        if tipo == 'postgres':
            conexao.execute(sa.text('DROP DATABASE IF EXISTS %s WITH (FORCE)' % quotado))
        else:
            conexao.execute(sa.text('DROP DATABASE IF EXISTS %s' % quotado))
    admin.dispose()


def agora_expr(tipo):
    """O relógio do BANCO, de dentro da transação."""
    # Postgres: now() e o inicio da transacao (o que um trigger usaria).
    # MariaDB: NOW(6) e o inicio do comando -- na transacao atrasada o carimbo
    # e o primeiro comando, entao da no mesmo.
    return sa.literal_column('now()' if tipo == 'postgres' else 'NOW(6)')


def agora_do_banco(motor, tipo):
    """O relógio do banco, sem fuso (como a coluna de mudança guarda)."""
    expressao = 'LOCALTIMESTAMP' if tipo == 'postgres' else 'NOW(6)'
    with motor.connect() as conexao:
        return conexao.execute(sa.select(sa.literal_column(expressao))).scalar()


def ler_tabela(motor, tabela):
    """Todas as linhas de uma tabela como dicts (a verdade no fim da carga)."""
    meta = esquema()
    with motor.connect() as conexao:
        return [dict(r._mapping) for r in conexao.execute(sa.select(meta.tables[tabela]))]


class EmpresasDaRegra(typing.NamedTuple):
    """O que o cadastro da origem diz, lido pelo SQL da tortura (nunca pelo produto)."""

    aceitas: list  # a regra aceita e nao estao em excluded_scopes: TEM de ter projeto
    recusadas: list  # a regra recusa (ex.: inativa): NAO pode ter projeto
    excluidas: list  # em excluded_scopes: NAO pode ter projeto


def empresas_da_regra(motor, mapa):
    """
    As empresas a verificar, calculadas do cadastro da origem e da regra de
    projeto do mapeamento (`projects`: tabela, coluna da empresa, filtros
    `equals`) menos `source.excluded_scopes` -- com SQL próprio, não com o
    arquivo de chaves nem com o código de regra do produto.
    """
    regra = mapa['projects']
    coluna = regra['scope_column']
    filtros = regra.get('filters') or []
    for filtro in filtros:
        if set(filtro) != {'column', 'equals'}:
            raise ValueError('a tortura só sabe filtros `equals` na regra de projeto: %r' % filtro)
    excluidas = {str(e) for e in (mapa.get('source') or {}).get('excluded_scopes') or []}
    tabela = sa.table(
        regra['source_object'], sa.column(coluna), *[sa.column(f['column']) for f in filtros]
    )
    aceitas_sql = sa.select(tabela.c[coluna])
    for filtro in filtros:
        aceitas_sql = aceitas_sql.where(tabela.c[filtro['column']] == filtro['equals'])
    with motor.connect() as conexao:
        todas = {str(r[0]) for r in conexao.execute(sa.select(tabela.c[coluna]))}
        aceitas = {str(r[0]) for r in conexao.execute(aceitas_sql)}

    def ordem(escopos):
        return sorted(escopos, key=lambda e: (len(e), e))

    return EmpresasDaRegra(
        aceitas=ordem(aceitas - excluidas),
        recusadas=ordem(todas - aceitas),
        excluidas=ordem(aceitas & excluidas),
    )


# ---------------------------------------------------------------------------
# A carga
# ---------------------------------------------------------------------------


class Carga:
    """
    Gerador de movimento em várias conexões, com o relógio do banco.

    A verdade que o verificador usa no fim e a ORIGEM, não o que a carga acha
    que fez: um commit de destino incerto não vira falso positivo. O que a carga
    anota serve para classificar (rajada, atrasada, além da folga) e para medir
    latência.
    """

    def __init__(self, tipo, url, *, conexoes, folga, maximo, semente, ritmo, registro=None):
        self.tipo = tipo
        self.motor = sa.create_engine(url, poolclass=sa.pool.NullPool)
        self.conexoes = conexoes
        self.folga = folga
        self.maximo = maximo
        self.ritmo = ritmo  # operacoes por segundo por conexao
        self.aleatorio = random.Random(semente)
        self.meta = esquema()
        self.agora = agora_expr(tipo)
        self.registro = registro or (lambda *_a: None)
        self._ids = itertools.count(1)
        self.trava = threading.Lock()
        self._parar = threading.Event()
        self._threads = []
        self.empresas = list(EMPRESAS_INICIAIS) + [EMPRESA_EXCLUIDA, EMPRESA_INATIVA]
        self.vivos = {'TITULOS': [], 'PEDIDOS': [], 'MOVIMENTOS': [], 'ESTOQUES': []}
        self.protegidos = set()  # backends da carga: o matador nao os toca
        # Anotacoes para o relatorio e para a latencia.
        self.mudancas = []  # (dataset, ident, empresa, commit_monotonic, valores)
        self.contagem = {}
        self.atrasadas = []  # (dataset, ident, atraso_s, carimbo)
        self.alem_da_folga = []  # (dataset, ident, atraso_s, carimbo)
        self.rajadas = []  # dict(dataset, ids, carimbo, linhas)
        self.apagados = {'titulos': set(), 'pedidos': set(), 'movimentos': set(), 'estoques': set()}
        # {dataset: {ident: {empresa de onde saiu}}}: a copia velha fica la ate a varredura.
        self.movidos = {'titulos': {}, 'pedidos': {}, 'estoques': {}}
        self.quietas = set()  # tabelas que a carga nao toca mais
        self.futuros = []  # (dataset, ident): carimbo no futuro da origem
        self.venenosos = []  # (dataset, ident, empresa, tipo): quarentena
        self.do_relogio = []  # (dataset, ident, carimbo): depois do passo atras
        self.erros = []
        self.empresa_nova_em = None

    # -- preparo -------------------------------------------------------------

    def popular(self, por_empresa=40):
        """Linhas iniciais: a carga completa de implantação leva estas."""
        t = self.meta.tables
        # Historico espalhado no passado (a partir do relogio do BANCO), longe
        # da janela da folga e com carimbos distintos -- como a base de um ERP no
        # dia da implantacao. Carimbo unico para tudo poria a base inteira na
        # janela da primeira leitura, acima do teto.
        base = agora_do_banco(self.motor, self.tipo) - datetime.timedelta(hours=1)
        passos = itertools.count()

        def carimbo():
            return base - datetime.timedelta(seconds=7 * next(passos))

        with self.motor.begin() as conexao:
            conexao.execute(
                t['EMPRESAS'].insert(),
                [
                    {
                        'EMPRESA_ID': e,
                        'RAZAO_SOCIAL': 'Empresa %d Ltda' % e,
                        'ATIVA': 'N' if e == EMPRESA_INATIVA else 'S',
                    }
                    for e in self.empresas
                ],
            )
            conexao.execute(
                t['SITUACOES'].insert(),
                [
                    {'CODIGO': c, 'DESCRICAO': d, 'ALTERADO_EM': carimbo()}
                    for c, d in (
                        ('A', 'Aberto'),
                        ('B', 'Baixado'),
                        ('C', 'Cancelado'),
                        ('P', 'Parcial'),
                        ('V', 'Vencido'),
                    )
                ],
            )
            for tabela in ('TITULOS', 'PEDIDOS', 'MOVIMENTOS', 'ESTOQUES'):
                linhas = []
                # ESTOQUES em dobro: o carimbo em massa tem de passar do teto.
                vezes = 2 * por_empresa if tabela == 'ESTOQUES' else por_empresa
                for e in self.empresas:
                    for _ in range(vezes):
                        linha = dict(self._valores(tabela, e), ALTERADO_EM=carimbo())
                        ident = self._novo_id()
                        if tabela == 'MOVIMENTOS':
                            ident = 'MV%08d' % ident
                        linha[self._chave(tabela)] = ident
                        linhas.append(linha)
                        self.vivos[tabela].append((ident, e))
                conexao.execute(t[tabela].insert(), linhas)

    # -- operacoes -------------------------------------------------------------

    def _novo_id(self):
        return next(self._ids)

    def _valores(self, tabela, empresa):
        a = self.aleatorio
        if tabela == 'TITULOS':
            return {
                'EMPRESA_ID': empresa,
                'VALOR': '%d.%02d' % (a.randint(1, 99999), a.randint(0, 99)),
                'SITUACAO': a.choice('AAABP'),
                'HISTORICO': 'título %s' % uuid.uuid4().hex[:12],
                'OBSERVACAO': a.choice((None, '', 'obs %d' % a.randint(1, 999))),
            }
        if tabela == 'ESTOQUES':
            return {
                'EMPRESA_ID': empresa,
                'PRODUTO': 'produto %d' % a.randint(1, 300),
                'SALDO': '%d.%03d' % (a.randint(0, 9999), a.randint(0, 999)),
            }
        if tabela == 'PEDIDOS':
            return {
                'EMPRESA_ID': empresa,
                'CLIENTE': 'Cliente %d' % a.randint(1, 500),
                'TOTAL': '%d.%02d' % (a.randint(1, 9999), a.randint(0, 99)),
                'STATUS': a.choice('ANF'),
            }
        return {
            'EMPRESA_ID': empresa,
            'VALOR': '%d.%02d' % (a.randint(1, 9999), a.randint(0, 99)),
            'TIPO': a.choice('DC'),
        }

    def _chave(self, tabela):
        return 'DOC' if tabela == 'MOVIMENTOS' else 'ID'

    def _inserir(self, conexao, tabela, empresa, valores=None, mexivel=True):
        ident = self._novo_id()
        if tabela == 'MOVIMENTOS':
            ident = 'MV%08d' % ident
        linha = dict(valores or self._valores(tabela, empresa))
        linha[self._chave(tabela)] = ident
        instrucao = self.meta.tables[tabela].insert()
        if 'ALTERADO_EM' not in linha:
            instrucao = instrucao.values(ALTERADO_EM=self.agora)
        conexao.execute(instrucao, [linha])
        if mexivel:
            with self.trava:
                self.vivos[tabela].append((ident, empresa))
        return ident, linha

    def _sortear_vivo(self, tabela):
        with self.trava:
            lista = self.vivos[tabela]
            if not lista:
                return None
            return lista[self.aleatorio.randrange(len(lista))]

    def _atualizar(self, conexao, tabela, cancelar=False):
        alvo = self._sortear_vivo(tabela)
        if alvo is None:
            return None
        ident, empresa = alvo
        t = self.meta.tables[tabela]
        valores = self._valores(tabela, empresa)
        valores.pop('EMPRESA_ID')
        if cancelar:
            valores = {'SITUACAO': 'C'} if tabela == 'TITULOS' else {'STATUS': 'C'}
        chave = self._chave(tabela)
        conexao.execute(
            t.update().where(t.c[chave] == ident).values(ALTERADO_EM=self.agora, **valores)
        )
        return ident, empresa

    def _apagar(self, conexao, tabela):
        with self.trava:
            lista = self.vivos[tabela]
            if not lista:
                return None
            ident, empresa = lista.pop(self.aleatorio.randrange(len(lista)))
        t = self.meta.tables[tabela]
        conexao.execute(t.delete().where(t.c[self._chave(tabela)] == ident))
        self.apagados[tabela.lower()].add(str(ident))
        return ident, empresa

    def _empresa(self):
        return self.aleatorio.choice(self.empresas)

    def _contar(self, tipo):
        with self.trava:
            self.contagem[tipo] = self.contagem.get(tipo, 0) + 1

    def _carimbo_de(self, conexao, tabela, ident):
        # Lido DENTRO da transacao: e o valor que o ouvinte vai comparar.
        t = self.meta.tables[tabela]
        chave = 'CODIGO' if tabela == 'SITUACOES' else self._chave(tabela)
        return conexao.execute(sa.select(t.c.ALTERADO_EM).where(t.c[chave] == ident)).scalar()

    def _anotar(self, tabela, resultado, carimbo):
        """Uma mudança comitada agora: (dataset, ident, empresa, carimbo, commit)."""
        if resultado is None or carimbo is None:
            return
        ident, empresa = resultado
        with self.trava:
            self.mudancas.append((tabela.lower(), str(ident), empresa, carimbo, time.monotonic()))

    def _mudar_de_empresa(self, conexao, tabela):
        """A linha passa para outra empresa (o ERP corrige um lancamento)."""
        with self.trava:
            lista = self.vivos[tabela]
            if not lista:
                return None
            posicao = self.aleatorio.randrange(len(lista))
            ident, empresa = lista[posicao]
            destinos = [
                e
                for e in self.empresas
                if e != empresa and e not in (EMPRESA_EXCLUIDA, EMPRESA_INATIVA)
            ]
            nova = self.aleatorio.choice(destinos)
            lista[posicao] = (ident, nova)
            self.movidos[tabela.lower()].setdefault(str(ident), set()).add(str(empresa))
        t = self.meta.tables[tabela]
        conexao.execute(
            t.update()
            .where(t.c[self._chave(tabela)] == ident)
            .values(EMPRESA_ID=nova, ALTERADO_EM=self.agora)
        )
        return ident, nova

    def _tabela_da_vez(self):
        # TITULOS pesa o dobro; uma tabela quieta (depois do carimbo em massa) sai da roda.
        with self.trava:
            roda = [
                t
                for t in ('TITULOS', 'TITULOS', 'PEDIDOS', 'MOVIMENTOS', 'ESTOQUES')
                if t not in self.quietas
            ]
        return self.aleatorio.choice(roda)

    def _uma_operacao(self, conexao):
        a = self.aleatorio
        sorteio = a.random()
        tabela = self._tabela_da_vez()
        com_situacao = tabela in ('TITULOS', 'PEDIDOS')
        with conexao.begin():
            if sorteio < 0.30:
                empresa = self._empresa()
                res = (self._inserir(conexao, tabela, empresa)[0], empresa)
                tipo = 'inclusao'
            elif sorteio < 0.63:
                res = self._atualizar(conexao, tabela)
                tipo = 'alteracao'
            elif sorteio < 0.73 and com_situacao:
                res = self._atualizar(conexao, tabela, cancelar=True)
                tipo = 'cancelamento'
            elif sorteio < 0.83:
                self._apagar(conexao, tabela)
                self._contar('exclusao')
                return
            elif sorteio < 0.85 and tabela != 'MOVIMENTOS':
                res = self._mudar_de_empresa(conexao, tabela)
                tipo = 'mudanca_de_empresa'
            elif sorteio < 0.87:
                t = self.meta.tables['SITUACOES']
                codigo = a.choice('ABCPV')
                conexao.execute(
                    t.update()
                    .where(t.c.CODIGO == codigo)
                    .values(
                        DESCRICAO='Situação %s v%d' % (codigo, a.randint(1, 10**6)),
                        ALTERADO_EM=self.agora,
                    )
                )
                res = (codigo, None)
                tabela = 'SITUACOES'
                tipo = 'dominio'
            else:
                empresa = self._empresa()
                res = (self._inserir(conexao, tabela, empresa)[0], empresa)
                tipo = 'inclusao'
            carimbo = None if res is None else self._carimbo_de(conexao, tabela, res[0])
        self._contar(tipo)
        self._anotar(tabela, res, carimbo)

    def _transacao_atrasada(self, conexao, atraso, alem=False, pronta=None):
        """
        Carimba agora e comita `atraso` segundos depois (transação longa do ERP).
        `pronta(carimbo)`: depois do atraso, só comita quando ela diz que sim (a
        transação além da folga espera a marca do ouvinte passar de carimbo +
        folga: um ouvinte atrasado ainda a pegaria, e nada seria demonstrado).
        """
        inicio = time.monotonic()
        # A alem da folga vai sempre para TITULOS: PEDIDOS recebe as rajadas, e
        # um dataset entregue a varredura confundiria a demonstracao.
        tabela = 'TITULOS' if alem else self.aleatorio.choice(('TITULOS', 'PEDIDOS'))
        with conexao.begin():
            if alem:
                empresa = EMPRESAS_INICIAIS[0]
                valores = self._valores(tabela, empresa)
                if tabela == 'TITULOS':
                    valores['HISTORICO'] = 'ALÉM DA FOLGA %s' % uuid.uuid4().hex[:8]
                # Fora de `vivos`: uma alteracao posterior a levaria pelo ao-vivo
                # e esconderia a demonstracao.
                ident = self._inserir(conexao, tabela, empresa, valores=valores, mexivel=False)[0]
            else:
                res = self._atualizar(conexao, tabela)
                if res is None:
                    return
                ident, empresa = res
            carimbo = self._carimbo_de(conexao, tabela, ident)
            self._dormir(atraso)
            limite = time.monotonic() + atraso
            while pronta is not None and not pronta(carimbo) and time.monotonic() < limite:
                time.sleep(0.2)
        real = time.monotonic() - inicio
        with self.trava:
            (self.alem_da_folga if alem else self.atrasadas).append(
                (tabela.lower(), str(ident), real, carimbo)
            )
        if alem:
            self.registro(
                'além da folga: %s %s carimbado %s, comitado %.1fs depois',
                tabela.lower(),
                ident,
                carimbo,
                real,
            )
        self._contar('alem_da_folga' if alem else 'atrasada')
        if not alem:
            self._anotar(tabela, (ident, empresa), carimbo)

    def rajada(self):
        """Uma transação acima do `--maximo-por-ciclo`: o ouvinte a entrega a varredura."""
        linhas = self.maximo + max(20, self.maximo // 4)
        empresa = EMPRESAS_INICIAIS[1]
        ids = []
        inicio = time.monotonic()
        with self.motor.connect() as conexao:
            self._proteger(conexao)
            with conexao.begin():
                for _ in range(linhas):
                    ids.append(str(self._inserir(conexao, 'PEDIDOS', empresa)[0]))
                # No MariaDB NOW(6) e por comando: a rajada vai da 1a a ultima linha.
                desde = self._carimbo_de(conexao, 'PEDIDOS', int(ids[0]))
                ate = self._carimbo_de(conexao, 'PEDIDOS', int(ids[-1]))
        with self.trava:
            self.rajadas.append(
                {
                    'dataset': 'pedidos',
                    'tipo': 'rajada',
                    'ids': set(ids),
                    'desde': desde,
                    'ate': ate,
                    'linhas': linhas,
                    'inicio': inicio,
                    'em': time.monotonic(),
                }
            )
        self._contar('rajada')
        with self.trava:
            self.contagem['linhas_de_rajada'] = self.contagem.get('linhas_de_rajada', 0) + linhas
        self.registro('rajada de %d linhas em pedidos (teto %d)', linhas, self.maximo)

    # -- dado sujo -------------------------------------------------------------

    def _inserir_fixo(self, tabela, empresa, **valores):
        """Uma linha fora de `vivos` (a carga não a muda depois): (ident, carimbo)."""
        with self.motor.connect() as conexao:
            self._proteger(conexao)
            with conexao.begin():
                linha = dict(self._valores(tabela, empresa), **valores)
                ident = self._inserir(conexao, tabela, empresa, valores=linha, mexivel=False)[0]
                carimbo = self._carimbo_de(conexao, tabela, ident)
        return str(ident), carimbo

    def futuro(self, dias=1):
        """Linhas carimbadas no FUTURO da origem (relógio errado na estação do ERP)."""
        futuro = agora_do_banco(self.motor, self.tipo) + datetime.timedelta(days=dias)
        for dataset, tabela, empresa in (
            ('titulos', 'TITULOS', EMPRESAS_INICIAIS[0]),
            ('titulos', 'TITULOS', EMPRESAS_INICIAIS[2]),
            ('movimentos', 'MOVIMENTOS', EMPRESAS_INICIAIS[1]),
        ):
            ident, _ = self._inserir_fixo(tabela, empresa, ALTERADO_EM=futuro)
            with self.trava:
                self.futuros.append((dataset, ident))
        self._contar('futuro')
        self.registro('carimbo no futuro: %d linhas em %s', len(self.futuros), futuro)

    def envenenar(self, bytes_grande):
        """
        Registros que o intake recusa de vez: NUMERIC NaN (so o PostgreSQL tem) e
        um registro maior que o limite de bytes do lote do servidor.
        """
        feitos = []
        if self.tipo == 'postgres':
            ident, _ = self._inserir_fixo(
                'TITULOS', EMPRESAS_INICIAIS[0], VALOR=decimal.Decimal('NaN')
            )
            feitos.append(('titulos', ident, str(EMPRESAS_INICIAIS[0]), 'nan'))
        # Texto sem repeticao (o transporte poderia comprimir um 'xxxx...').
        grande = ''.join(uuid.uuid4().hex for _ in range(bytes_grande // 32 + 1))
        ident, _ = self._inserir_fixo(
            'TITULOS', EMPRESAS_INICIAIS[2], OBSERVACAO=grande[:bytes_grande]
        )
        feitos.append(('titulos', ident, str(EMPRESAS_INICIAIS[2]), 'bytes'))
        with self.trava:
            self.venenosos.extend(feitos)
        self._contar('venenoso')
        self.registro('venenosos: %s', ', '.join('%s %s (%s)' % (d, i, t) for d, i, _, t in feitos))

    def corrigir_venenosos(self):
        """O ERP corrige as linhas envenenadas: a versão nova tem de chegar e sair da quarentena."""
        t = self.meta.tables['TITULOS']
        ids = [int(i) for d, i, _, _ in self.venenosos if d == 'titulos']
        if not ids:
            return
        with self.motor.connect() as conexao:
            self._proteger(conexao)
            with conexao.begin():
                conexao.execute(
                    t.update()
                    .where(t.c.ID.in_(ids))
                    .values(VALOR='1.00', OBSERVACAO='corrigido', ALTERADO_EM=self.agora)
                )

    def carimbo_em_massa(self, tabela='ESTOQUES'):
        """
        Um UPDATE que carimba a tabela INTEIRA de uma vez (acima do teto), e
        depois ela fica quieta: o ao-vivo tem de voltar logo depois da varredura.
        """
        with self.trava:
            self.quietas.add(tabela)
        time.sleep(0.5)  # a operacao em voo nesta tabela comita antes
        t = self.meta.tables[tabela]
        inicio = time.monotonic()
        with self.motor.connect() as conexao:
            self._proteger(conexao)
            with conexao.begin():
                conexao.execute(t.update().values(ALTERADO_EM=self.agora))
                linhas = conexao.execute(sa.select(t.c.ID, t.c.ALTERADO_EM)).all()
        carimbos = [c for _, c in linhas]
        with self.trava:
            self.rajadas.append(
                {
                    'dataset': tabela.lower(),
                    'tipo': 'carimbo_em_massa',
                    'ids': {str(i) for i, _ in linhas},
                    'desde': min(carimbos),
                    'ate': max(carimbos),
                    'linhas': len(linhas),
                    'inicio': inicio,
                    'em': time.monotonic(),
                }
            )
            self.contagem['linhas_carimbo_em_massa'] = len(linhas)
        self._contar('carimbo_em_massa')
        self.registro(
            'carimbo em massa: %d linhas de %s (teto %d); a tabela fica quieta',
            len(linhas),
            tabela.lower(),
            self.maximo,
        )
        return len(linhas)

    def linhas_do_relogio(self, carimbo, quantas=3):
        """Linhas gravadas "depois" do relógio da origem voltar: carimbo abaixo da marca - folga."""
        for n in range(quantas):
            ident, _ = self._inserir_fixo('TITULOS', EMPRESAS_INICIAIS[n % 3], ALTERADO_EM=carimbo)
            with self.trava:
                self.do_relogio.append(('titulos', ident, carimbo))
        self._contar('relogio_voltou')
        self.registro('relógio: %d linhas carimbadas %s', quantas, carimbo)

    def empresa_nova(self):
        t = self.meta.tables['EMPRESAS']
        with self.motor.connect() as conexao:
            self._proteger(conexao)
            with conexao.begin():
                conexao.execute(
                    t.insert(),
                    [
                        {
                            'EMPRESA_ID': EMPRESA_NOVA,
                            'ATIVA': 'S',
                            'RAZAO_SOCIAL': 'Empresa Nova %d SA' % EMPRESA_NOVA,
                        }
                    ],
                )
                # A empresa chega COM historico (migrada de outro sistema): linhas
                # carimbadas bem antes da folga, que so a carga inicial leva.
                antigo = agora_do_banco(self.motor, self.tipo) - datetime.timedelta(days=2)
                for n in range(10):
                    for tabela in ('TITULOS', 'PEDIDOS', 'MOVIMENTOS', 'ESTOQUES'):
                        if tabela in self.quietas:
                            continue
                        valores = dict(
                            self._valores(tabela, EMPRESA_NOVA),
                            ALTERADO_EM=antigo + datetime.timedelta(minutes=n),
                        )
                        self._inserir(conexao, tabela, EMPRESA_NOVA, valores=valores)
        with self.trava:
            self.empresas.append(EMPRESA_NOVA)
            self.empresa_nova_em = time.monotonic()
        self._contar('empresa_nova')
        self.registro('empresa nova %d no cadastro', EMPRESA_NOVA)

    # -- as threads -----------------------------------------------------------

    def _proteger(self, conexao):
        if self.tipo == 'postgres':
            ident = conexao.execute(sa.text('SELECT pg_backend_pid()')).scalar()
        else:
            ident = conexao.execute(sa.text('SELECT CONNECTION_ID()')).scalar()
        with self.trava:
            self.protegidos.add(int(ident))
        conexao.commit()

    def _dormir(self, segundos):
        # Dorme o atraso inteiro mesmo com a parada pedida: a transacao atrasada
        # comita atrasada, e `parar()` espera por ela.
        time.sleep(segundos)

    def _trabalhador(self, numero):
        aleatorio = random.Random(self.aleatorio.random())
        conexao = None
        while not self._parar.is_set():
            try:
                if conexao is None:
                    conexao = self.motor.connect()
                    self._proteger(conexao)
                if numero == 0 and aleatorio.random() < 0.08:
                    # Transacao atrasada ate METADE da folga: a folga tem de cobri-la.
                    self._transacao_atrasada(conexao, aleatorio.uniform(0.2, self.folga / 2.0))
                else:
                    self._uma_operacao(conexao)
            except Exception as erro:  # noqa: BLE001
                with self.trava:
                    self.erros.append('%s: %s' % (type(erro).__name__, str(erro)[:160]))
                try:
                    conexao.close()
                except Exception:  # noqa: BLE001
                    pass
                conexao = None
                time.sleep(0.2)
            time.sleep(aleatorio.expovariate(self.ritmo))
        if conexao is not None:
            conexao.close()

    def iniciar(self):
        for numero in range(self.conexoes):
            thread = threading.Thread(
                target=self._trabalhador, args=(numero,), name='carga-%d' % numero, daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def alem_da_folga_em_thread(self, atraso, pronta=None):
        """A transação que comita DEPOIS da folga: o limite documentado da `coluna`."""

        def rodar():
            try:
                with self.motor.connect() as conexao:
                    self._proteger(conexao)
                    self._transacao_atrasada(conexao, atraso, alem=True, pronta=pronta)
            except Exception as erro:  # noqa: BLE001
                with self.trava:
                    self.erros.append('além da folga: %s: %s' % (type(erro).__name__, erro))

        thread = threading.Thread(target=rodar, name='alem-da-folga', daemon=True)
        thread.start()
        self._threads.append(thread)
        return thread

    def parar(self, espera=None):
        """Para e espera toda transação em voo comitar (inclusive as atrasadas)."""
        self._parar.set()
        for thread in self._threads:
            thread.join(espera)
        vivas = [t.name for t in self._threads if t.is_alive()]
        self.motor.dispose()
        return vivas

    def total_mudancas(self):
        """Linhas mudadas: cada operação conta uma, a rajada conta as suas linhas."""
        with self.trava:
            return sum(
                v
                for k, v in self.contagem.items()
                if k
                not in (
                    'empresa_nova',
                    'rajada',
                    'carimbo_em_massa',
                    'futuro',
                    'venenoso',
                    'relogio_voltou',
                )
            )


# ---------------------------------------------------------------------------
# O matador de conexoes da origem
# ---------------------------------------------------------------------------


class MatadorDeConexoes:
    """
    Derruba, a esmo, uma conexão da origem que NÃO é da carga: a do ouvinte, a
    do conector, a do provisionador. `pg_terminate_backend` no PostgreSQL,
    `KILL` no MariaDB.
    """

    def __init__(self, tipo, url, banco, protegidos, *, periodo, semente, replicacao=False):
        self.tipo = tipo
        self.banco = banco
        # Com o binlog: a conexao de dump do log tambem (ela nao tem banco no
        # PROCESSLIST); derrubada, o leitor tem de reler do GTID guardado.
        self.replicacao = replicacao
        self.protegidos = protegidos
        self.periodo = periodo
        self.aleatorio = random.Random(semente)
        self.motor = sa.create_engine(url, isolation_level='AUTOCOMMIT', poolclass=sa.pool.NullPool)
        self.mortas = 0
        self.erros = 0
        # As conexoes vistas na volta anterior: so elas podem morrer. A da carga
        # da tortura se protege milissegundos depois de abrir (`Carga._proteger`);
        # sem esta espera, o matador a derrubava nesse meio-tempo (visto na suite
        # carregada: o carimbo em massa morreu no `SELECT pg_backend_pid()`).
        self._vistas = set()
        self._parar = threading.Event()
        self._thread = None

    def _candidatas(self, conexao):
        if self.tipo == 'postgres':
            linhas = conexao.execute(
                sa.text(
                    'SELECT pid FROM pg_stat_activity WHERE datname = :banco'
                    ' AND pid <> pg_backend_pid()'
                ),
                {'banco': self.banco},
            )
        else:
            dump = " OR COMMAND LIKE 'Binlog Dump%'" if self.replicacao else ''
            linhas = conexao.execute(
                sa.text(
                    'SELECT ID FROM information_schema.PROCESSLIST WHERE (DB = :banco%s)'
                    ' AND ID <> CONNECTION_ID()' % dump
                ),
                {'banco': self.banco},
            )
        agora = {int(r[0]) for r in linhas}
        antes, self._vistas = self._vistas, agora
        return [p for p in sorted(agora & antes) if p not in self.protegidos]

    def matar_uma(self):
        with self.motor.connect() as conexao:
            candidatas = self._candidatas(conexao)
            if not candidatas:
                return False
            vitima = self.aleatorio.choice(candidatas)
            if self.tipo == 'postgres':
                conexao.execute(sa.text('SELECT pg_terminate_backend(:p)'), {'p': vitima})
            else:
                try:
                    conexao.execute(sa.text('KILL %d' % vitima))
                except Exception:  # noqa: BLE001
                    return False  # ja tinha saido
            self.mortas += 1
            return True

    def _laco(self):
        while not self._parar.wait(self.aleatorio.uniform(*self.periodo)):
            try:
                self.matar_uma()
            except Exception:  # noqa: BLE001
                self.erros += 1

    def iniciar(self):
        self._thread = threading.Thread(target=self._laco, name='matador-conexoes', daemon=True)
        self._thread.start()

    def parar(self):
        self._parar.set()
        if self._thread:
            self._thread.join(10)
        self.motor.dispose()


def texto_data(valor):
    if isinstance(valor, datetime.datetime):
        return valor.isoformat(sep=' ')
    return str(valor)
