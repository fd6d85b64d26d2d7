"""
Um ERP de teste pequeno, igual em SQLite e PostgreSQL, e o mapeamento dele.

    EMPRESAS   o cadastro (regra de projeto: ATIVA = 'S')
    TITULOS    por empresa, com chave, coluna de mudanca e valor em NUMERIC
    STATUS     dominio (scope_column null): vai inteiro para toda empresa

Os codigos de empresa sao sorteados por ERP (`base`): os testes de um modulo
dividem o mesmo Contextia local, e o projeto e idempotente pelo escopo.
Os nomes sao criados entre aspas para ficarem MAIUSCULOS tambem no PostgreSQL,
como numa view de ERP.
"""

import json
import os
import random
import uuid

import sqlalchemy as sa

AQUI = os.path.dirname(os.path.abspath(__file__))

DDL = [
    'CREATE TABLE "EMPRESAS" ("EMPRESA_ID" INTEGER PRIMARY KEY, "RAZAO_SOCIAL" VARCHAR(60),'
    ' "GRUPO" VARCHAR(30), "ATIVA" CHAR(1))',
    'CREATE TABLE "TITULOS" ("ID" INTEGER PRIMARY KEY, "EMPRESA_ID" INTEGER,'
    ' "CLIENTE" VARCHAR(60), "VALOR" NUMERIC(12,2), "VENCIMENTO" DATE,'
    ' "ALTERADO_EM" TIMESTAMP)',
    'CREATE TABLE "STATUS" ("COD" VARCHAR(2) PRIMARY KEY, "NOME" VARCHAR(30))',
]


def mapeamento(pasta, chunk=10, **extra):
    """Grava o mapeamento do ERP de teste em `pasta` e devolve o caminho."""
    mapa = {
        '$schema': os.path.join(os.path.dirname(os.path.dirname(AQUI)), 'mappings',
                                'mapeamento.schema.json'),
        'client': 'teste',
        'source': {'excluded_scopes': []},
        'defaults': {'scope_column': 'EMPRESA_ID', 'key': 'ID', 'watch_column': 'ALTERADO_EM',
                     'chunk': chunk},
        'projects': {'source_object': 'EMPRESAS', 'name_column': 'RAZAO_SOCIAL',
                     'group_column': 'GRUPO', 'filters': [{'column': 'ATIVA', 'equals': 'S'}]},
        'datasets': [
            {'dataset': 'Titulos a Receber', 'source_object': 'TITULOS',
             'columns': ['ID', 'EMPRESA_ID', 'CLIENTE', 'VALOR', 'VENCIMENTO', 'ALTERADO_EM'],
             'description': 'titulos em aberto',
             'fields': {'VALOR': 'valor em reais', 'VENCIMENTO': 'data de vencimento'},
             'group': 'financeiro'},
            {'dataset': 'Status', 'source_object': 'STATUS', 'columns': ['COD', 'NOME'],
             'key': 'COD', 'scope_column': None, 'watch_column': None},
        ],
    }
    mapa.update(extra)
    caminho = os.path.join(str(pasta), 'mapeamento-%s.json' % uuid.uuid4().hex[:6])
    with open(caminho, 'w', encoding='utf-8') as f:
        json.dump(mapa, f, indent=2)
    return caminho


class Erp(object):
    """Um banco de origem com o ERP de teste; `url` vai em CONTEXTIA_ORIGEM."""

    def __init__(self, url, titulos_por_empresa=(45, 30)):
        self.url = url
        self.base = random.randrange(10, 9000) * 100
        # Duas ativas, uma inativa (recusada pela regra).
        self.escopos = [str(self.base + 1), str(self.base + 2)]
        self.inativa = str(self.base + 3)
        self.motor = sa.create_engine(url)
        with self.motor.begin() as con:
            for comando in DDL:
                con.execute(sa.text(comando))
            con.execute(sa.text('INSERT INTO "EMPRESAS" VALUES (:e, :n, :g, :a)'), [
                {'e': int(self.escopos[0]), 'n': 'Padaria Pao Quente', 'g': 'Grupo Sul', 'a': 'S'},
                {'e': int(self.escopos[1]), 'n': 'Mercado Bom Preco', 'g': None, 'a': 'S'},
                {'e': int(self.inativa), 'n': 'Empresa Fechada', 'g': None, 'a': 'N'},
            ])
            linhas = []
            ident = self.base * 1000
            for escopo, quantos in zip(self.escopos, titulos_por_empresa):
                for n in range(quantos):
                    ident += 1
                    linhas.append({'i': ident, 'e': int(escopo), 'c': 'Cliente %d' % n,
                                   'v': '%d.%02d' % (100 + n, n), 'd': '2026-09-%02d' % (n % 28 + 1),
                                   'a': '2026-09-01 10:%02d:00' % (n % 60)})
            con.execute(sa.text('INSERT INTO "TITULOS" VALUES (:i, :e, :c, :v, :d, :a)'), linhas)
            con.execute(sa.text('INSERT INTO "STATUS" VALUES (:c, :n)'),
                        [{'c': 'A', 'n': 'aberto'}, {'c': 'B', 'n': 'baixado'},
                         {'c': 'C', 'n': 'cancelado'}])

    def executar(self, sql, **parametros):
        with self.motor.begin() as con:
            return con.execute(sa.text(sql), parametros).rowcount

    def titulos(self, escopo):
        with self.motor.connect() as con:
            return con.execute(sa.text('SELECT COUNT(*) FROM "TITULOS" WHERE "EMPRESA_ID" = :e'),
                               {'e': int(escopo)}).scalar()

    def fechar(self):
        self.motor.dispose()


def erp_sqlite(pasta, **opcoes):
    return Erp('sqlite:///%s' % os.path.join(str(pasta), 'erp-%s.db' % uuid.uuid4().hex[:6]),
               **opcoes)


def erp_postgres(**opcoes):
    """Banco novo no PostgreSQL da maquina; devolve (erp, derrubar) ou None se nao ha servidor."""
    admin = sa.create_engine('postgresql+psycopg://postgres@127.0.0.1:5432/postgres',
                             isolation_level='AUTOCOMMIT')
    nome = 'ctx4_%s' % uuid.uuid4().hex[:10]
    try:
        with admin.connect() as con:
            con.execute(sa.text('CREATE DATABASE %s' % nome))
    except sa.exc.OperationalError:
        admin.dispose()
        return None
    erp = Erp('postgresql+psycopg://postgres@127.0.0.1:5432/%s' % nome, **opcoes)

    def derrubar():
        erp.fechar()
        with admin.connect() as con:
            con.execute(sa.text('DROP DATABASE IF EXISTS %s WITH (FORCE)' % nome))
        admin.dispose()
    return erp, derrubar
