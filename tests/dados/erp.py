"""
Um ERP de teste pequeno, igual em SQLite, PostgreSQL e MariaDB, e o mapeamento dele.

    EMPRESAS   o cadastro (regra de projeto: ATIVA = 'S')
    TITULOS    por empresa, com chave, coluna de mudanca e valor em NUMERIC
    STATUS     dominio (scope_column null): vai inteiro para toda empresa

Monta sobre os bancos descartaveis de tests/apoio/bancos.py. Os codigos de
empresa sao sorteados por ERP: os testes de um modulo dividem o mesmo Contextia
local, e o projeto e idempotente pelo escopo. Os nomes sao MAIUSCULOS e entre
aspas (crase no MariaDB), como numa view de ERP. SQL dos testes usa {NOME}
para o identificador quotado: erp.executar('DELETE FROM {TITULOS}').
"""

import json
import os
import random
import re
import uuid

AQUI = os.path.dirname(os.path.abspath(__file__))

DDL = [
    'CREATE TABLE {EMPRESAS} ({EMPRESA_ID} INTEGER PRIMARY KEY, {RAZAO_SOCIAL} VARCHAR(60),'
    ' {GRUPO} VARCHAR(30), {ATIVA} CHAR(1))',
    'CREATE TABLE {TITULOS} ({ID} INTEGER PRIMARY KEY, {EMPRESA_ID} INTEGER,'
    ' {CLIENTE} VARCHAR(60), {VALOR} NUMERIC(12,2), {VENCIMENTO} DATE,'
    ' {ALTERADO_EM} TIMESTAMP NULL)',
    'CREATE TABLE {STATUS} ({COD} VARCHAR(2) PRIMARY KEY, {NOME} VARCHAR(30))',
]


def mapeamento(pasta, chunk=10, **extra):
    """Grava o mapeamento do ERP de teste em `pasta` e devolve o caminho."""
    mapa = {
        '$schema': os.path.join(
            os.path.dirname(os.path.dirname(AQUI)), 'mappings', 'mapeamento.schema.json'
        ),
        'client': 'teste',
        'source': {'excluded_scopes': []},
        'defaults': {
            'scope_column': 'EMPRESA_ID',
            'key': 'ID',
            'watch_column': 'ALTERADO_EM',
            'chunk': chunk,
        },
        'projects': {
            'source_object': 'EMPRESAS',
            'name_column': 'RAZAO_SOCIAL',
            'group_column': 'GRUPO',
            'filters': [{'column': 'ATIVA', 'equals': 'S'}],
        },
        'datasets': [
            {
                'dataset': 'Titulos a Receber',
                'source_object': 'TITULOS',
                'columns': ['ID', 'EMPRESA_ID', 'CLIENTE', 'VALOR', 'VENCIMENTO', 'ALTERADO_EM'],
                'description': 'titulos em aberto',
                'fields': {'VALOR': 'valor em reais', 'VENCIMENTO': 'data de vencimento'},
                'group': 'financeiro',
            },
            {
                'dataset': 'Status',
                'source_object': 'STATUS',
                'columns': ['COD', 'NOME'],
                'key': 'COD',
                'scope_column': None,
                'watch_column': None,
            },
        ],
    }
    mapa.update(extra)
    caminho = os.path.join(str(pasta), 'mapeamento-%s.json' % uuid.uuid4().hex[:6])
    with open(caminho, 'w', encoding='utf-8') as f:
        json.dump(mapa, f, indent=2)
    return caminho


class Erp:
    """O ERP de teste dentro de um BancoDeTeste; `url` vai em CONTEXTIA_ORIGEM."""

    def __init__(self, banco, titulos_por_empresa=(45, 30)):
        self.banco = banco
        self.url = banco.url_origem
        self.base = random.randrange(10, 9000) * 100
        # Duas ativas, uma inativa (recusada pela regra).
        self.escopos = [str(self.base + 1), str(self.base + 2)]
        self.inativa = str(self.base + 3)
        for comando in DDL:
            self.executar(comando)
        self.executar(
            'INSERT INTO {EMPRESAS} VALUES (:e, :n, :g, :a)',
            lote=[
                {'e': int(self.escopos[0]), 'n': 'Padaria Pao Quente', 'g': 'Grupo Sul', 'a': 'S'},
                {'e': int(self.escopos[1]), 'n': 'Mercado Bom Preço', 'g': None, 'a': 'S'},
                {'e': int(self.inativa), 'n': 'Empresa Fechada', 'g': None, 'a': 'N'},
            ],
        )
        linhas = []
        ident = self.base * 1000
        for escopo, quantos in zip(self.escopos, titulos_por_empresa, strict=False):
            for n in range(quantos):
                ident += 1
                linhas.append(
                    {
                        'i': ident,
                        'e': int(escopo),
                        'c': 'Cliente %d' % n,
                        'v': '%d.%02d' % (100 + n, n),
                        'd': '2026-09-%02d' % (n % 28 + 1),
                        'a': '2026-09-01 10:%02d:00' % (n % 60),
                    }
                )
        self.executar('INSERT INTO {TITULOS} VALUES (:i, :e, :c, :v, :d, :a)', lote=linhas)
        self.executar(
            'INSERT INTO {STATUS} VALUES (:c, :n)',
            lote=[
                {'c': 'A', 'n': 'aberto'},
                {'c': 'B', 'n': 'baixado'},
                {'c': 'C', 'n': 'cancelado'},
            ],
        )

    def _sql(self, sql):
        aspas = '`' if self.banco.tipo == 'mariadb' else '"'
        return re.sub(r'\{([A-Z_]+)\}', lambda m: aspas + m.group(1) + aspas, sql)

    def executar(self, sql, lote=None, **parametros):
        """SQL com {NOME} quotado; `lote` = lista de dicts (executemany)."""
        import sqlalchemy as sa

        with self.banco.motor().begin() as con:
            resultado = con.execute(sa.text(self._sql(sql)), lote or parametros)
            return resultado.fetchall() if resultado.returns_rows else resultado.rowcount

    def titulos(self, escopo):
        return self.executar(
            'SELECT COUNT(*) FROM {TITULOS} WHERE {EMPRESA_ID} = :e', e=int(escopo)
        )[0][0]

    def fechar(self):
        """Solta as conexões de setup (o banco continua; quem o criou o derruba)."""
        if self.banco._motor is not None:
            self.banco._motor.dispose()
            self.banco._motor = None


# Atalhos usados tambem por tests/test_ouvinte_e2e.py (issue 5): mantenha as assinaturas.
def erp_sqlite(pasta, **opcoes):
    """ERP num SQLite novo dentro de `pasta`."""
    from tests.apoio.bancos import criar_banco

    return Erp(criar_banco('sqlite', 'erp', pasta=pasta), **opcoes)


def erp_postgres(**opcoes):
    """(erp, derrubar) num banco novo do PostgreSQL, ou None se não há servidor."""
    from tests.apoio.bancos import criar_banco, derrubar_banco, servidor_disponivel

    if not servidor_disponivel('postgres')[0]:
        return None
    banco = criar_banco('postgres', 'erp')
    return Erp(banco, **opcoes), lambda: derrubar_banco(banco)
