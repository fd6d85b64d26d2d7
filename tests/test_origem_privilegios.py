"""
O login do cliente e SO-SELECT, com os GRANTs de docs/origem.md -- não root.
O adaptador tem de ler (e reconhecer os tipos) só com isso.
"""

import datetime
import decimal

import pytest
import sqlalchemy as sa

from contextia_sync.origem import ErroOrigem
from contextia_sync.origem.generico import Origem


@pytest.mark.mariadb
def test_mariadb_login_so_select_na_view(fabrica_de_bancos):
    banco = fabrica_de_bancos('mariadb')
    usuario = 'leitor_' + banco.nome[-8:]
    banco.executar(
        'CREATE TABLE base (ID INT, EMPRESA_ID INT, VALOR DECIMAL(16,2),'
        ' DIA DATE, ALT DATETIME, MARCA TIMESTAMP NULL, NOME VARCHAR(20))'
    )
    banco.executar(
        "INSERT INTO base VALUES (1, 297, 12345678901234.56, '0000-00-00',"
        " '2026-09-02 10:00:00', '2026-09-02 10:00:00', 'a'),"
        " (2, 301, 1.10, '2026-09-03', '2026-09-02 10:05:00', NULL, 'b')"
    )
    banco.executar('CREATE VIEW v_titulos AS SELECT * FROM base')
    banco.executar("CREATE USER '%s'@'127.0.0.1' IDENTIFIED BY 'leitura'" % usuario)
    try:
        # o GRANT de docs/origem.md: SELECT na view, nada mais
        banco.executar("GRANT SELECT ON `%s`.v_titulos TO '%s'@'127.0.0.1'" % (banco.nome, usuario))
        url = sa.engine.make_url(banco.url_origem).set(username=usuario, password='leitura')
        origem = Origem(url.render_as_string(hide_password=False), timeout=30)
        try:
            cols = ['ID', 'EMPRESA_ID', 'VALOR', 'DIA', 'ALT', 'MARCA', 'NOME']
            linhas = {
                lida['ID']: lida
                for lida in origem.fetch('v_titulos', cols, scope=('EMPRESA_ID', '297'))
            }
            assert list(linhas) == [1]
            assert linhas[1]['VALOR'] == decimal.Decimal('12345678901234.56')
            assert linhas[1]['DIA'] is None  # data zero
            assert linhas[1]['MARCA'].tzinfo is datetime.timezone.utc
            assert origem.maximo('v_titulos', 'DIA') == datetime.date(2026, 9, 3)
            assert origem.contar('v_titulos', since=('ALT', '2026-09-02T10:00:00')) == 1
            assert origem.escopos('v_titulos', 'EMPRESA_ID') == [297, 301]
            with pytest.raises(ErroOrigem, match='não tem SELECT'):
                origem.contar('base')  # sem GRANT
        finally:
            origem.fechar()
    finally:
        banco.executar("DROP USER IF EXISTS '%s'@'127.0.0.1'" % usuario)


@pytest.mark.postgres
def test_postgres_login_so_select_na_view(fabrica_de_bancos):
    banco = fabrica_de_bancos('postgres')
    papel = 'leitor_' + banco.nome[-8:]
    banco.executar('CREATE SCHEMA erp')
    banco.executar('CREATE TABLE erp.base (id INT, empresa_id INT, alt TIMESTAMPTZ)')
    banco.executar("INSERT INTO erp.base VALUES (1, 297, '2026-09-02 10:00:00+00')")
    banco.executar('CREATE VIEW erp.v_titulos AS SELECT * FROM erp.base')
    banco.executar('CREATE ROLE %s LOGIN' % papel)
    try:
        banco.executar('GRANT CONNECT ON DATABASE %s TO %s' % (banco.nome, papel))
        banco.executar('GRANT USAGE ON SCHEMA erp TO %s' % papel)
        banco.executar('GRANT SELECT ON erp.v_titulos TO %s' % papel)
        url = sa.engine.make_url(banco.url_origem).set(username=papel)
        origem = Origem(url.render_as_string(hide_password=False), timeout=30)
        try:
            # o mapeamento em maiusculas acha a view minuscula, como um SQL sem aspas
            linhas = list(origem.fetch('ERP.V_TITULOS', ['ID', 'ALT'], scope=('EMPRESA_ID', 297)))
            assert linhas == [
                {'ID': 1, 'ALT': datetime.datetime(2026, 9, 2, 10, 0, tzinfo=datetime.timezone.utc)}
            ]
            with pytest.raises(ErroOrigem):
                origem.contar('erp.base')
        finally:
            origem.fechar()
    finally:
        banco.executar('DROP OWNED BY %s' % papel)
        banco.derrubar()
        from tests.apoio import bancos as _b

        motor = _b._motor_admin('postgres', None)
        with motor.connect() as conn:
            conn.exec_driver_sql('DROP ROLE IF EXISTS %s' % papel)
        motor.dispose()
