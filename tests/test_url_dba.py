"""
A URL do DBA (CONTEXTIA_ORIGEM_DBA) no `ouvinte.py --criar-slot` (issue 28, item
4), rodado como processo de verdade: o servidor fora do ar, a URL malformada e a
senha nunca mostrada dão UMA linha em português com a variável certa e a
correção, saída 2, sem traceback; `postgres://`, `postgresql://` e
`postgresql+psycopg://` valem igual (na origem também). E `mariadb://` na origem
trava a sessão como `mysql://`.
"""

import json
import uuid

import pytest

from contextia_local.processo import porta_livre
from contextia_sync.origem import generico
from tests.apoio.bancos import exigir_servidor
from tests.apoio.postgres_logico import (  # noqa: F401 - postgres_logico: fixture de sessao
    criar_slot_pelo_ouvinte,
    postgres_logico,
)
from tests.dados import erp as erp_teste

SENHA = 'S3nha-do-DBA-nunca-impressa'


def _mapa(tmp_path):
    caminho = erp_teste.mapeamento(tmp_path)
    with open(caminho, encoding='utf-8') as arquivo:
        mapa = json.load(arquivo)
    mapa['client'] = 'dba_' + uuid.uuid4().hex[:8]  # o slot é do cluster inteiro
    mapa['listener'] = {'strategy': 'slot_logico'}
    with open(caminho, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo)
    return caminho, 'contextia_' + mapa['client']


def _uma_linha_sem_traceback(codigo, saida, erros):
    assert codigo == 2, saida + erros
    assert 'Traceback' not in saida + erros, saida + erros
    assert SENHA not in saida + erros, saida + erros
    assert erros.count('\n') == 1 and not saida, saida + erros


def test_dba_fora_do_ar_diz_a_variavel_e_a_correcao(tmp_path):
    mapa, _slot = _mapa(tmp_path)
    porta = porta_livre()  # ninguém escuta nela
    origem = 'postgresql+psycopg://leitor:outra@127.0.0.1:%d/erp' % porta
    dba = 'postgresql+psycopg://dba:%s@127.0.0.1:%d/erp' % (SENHA, porta)
    codigo, saida, erros = criar_slot_pelo_ouvinte(tmp_path, mapa, origem, dba)
    _uma_linha_sem_traceback(codigo, saida, erros)
    assert 'não conectou ao PostgreSQL de CONTEXTIA_ORIGEM_DBA' in erros, erros
    assert 'dba:***@127.0.0.1' in erros and 'confira host, porta' in erros, erros


@pytest.mark.parametrize(
    'dba, dica',
    [
        ('postgresql+psycopg://dba:abc@%s@127.0.0.1:5432/erp' % SENHA, '"@" sem codificar'),
        ('dba:%s@127.0.0.1:5432/erp' % SENHA, 'falta o "://"'),
    ],
)
def test_dba_malformada_e_culpa_de_contextia_origem_dba(tmp_path, dba, dica):
    mapa, _slot = _mapa(tmp_path)
    origem = 'postgresql+psycopg://leitor:outra@127.0.0.1:5432/erp'
    codigo, saida, erros = criar_slot_pelo_ouvinte(tmp_path, mapa, origem, dba)
    _uma_linha_sem_traceback(codigo, saida, erros.replace('\n', ' ').rstrip() + '\n')
    assert erros.startswith('CONTEXTIA_ORIGEM_DBA ') and dica in erros, erros


def test_dba_de_outro_banco_diz_qual_variavel(tmp_path):
    mapa, _slot = _mapa(tmp_path)
    origem = 'postgresql+psycopg://leitor:outra@127.0.0.1:5432/erp'
    dba = 'mysql+pymysql://dba:%s@127.0.0.1:3306/erp' % SENHA
    codigo, saida, erros = criar_slot_pelo_ouvinte(tmp_path, mapa, origem, dba)
    _uma_linha_sem_traceback(codigo, saida, erros)
    assert 'CONTEXTIA_ORIGEM_DBA aponta para mysql' in erros, erros


@pytest.mark.postgres
@pytest.mark.parametrize('prefixo', ['postgres', 'postgresql', 'postgresql+psycopg'])
def test_dba_postgres_postgresql_e_com_driver_valem_igual(
    tmp_path,
    postgres_logico,  # noqa: F811
    prefixo,
):
    banco = postgres_logico.banco_de_teste()
    erp_teste.Erp(banco, titulos_por_empresa=(1, 1))
    banco.admin('ALTER TABLE "TITULOS" REPLICA IDENTITY FULL')
    mapa, slot = _mapa(tmp_path)
    dba = '%s://postgres@127.0.0.1:%d/%s' % (prefixo, postgres_logico.porta, banco.nome)
    # A origem também aceita o mesmo prefixo.
    origem = banco.url_origem.replace('postgresql+psycopg://', prefixo + '://', 1)
    try:
        codigo, saida, erros = criar_slot_pelo_ouvinte(tmp_path, mapa, origem, dba)
        assert codigo == 0, saida + erros
        assert 'slot %s criado' % slot in saida, saida
        assert generico.Origem(origem).conectar().contar('TITULOS') == 2
    finally:
        postgres_logico.admin(
            'SELECT pg_drop_replication_slot(slot_name) FROM'
            " pg_replication_slots WHERE slot_name = '%s'" % slot
        )


@pytest.mark.mariadb
def test_origem_mariadb_trava_a_sessao_como_mysql():
    """`mariadb+pymysql://` é MySQL para a origem: a sessão é somente leitura do mesmo jeito."""
    from tests.apoio.bancos import criar_banco, derrubar_banco

    exigir_servidor('mariadb')
    banco = criar_banco('mariadb')
    try:
        url = banco.url_origem.replace('mysql+pymysql://', 'mariadb+pymysql://', 1)
        assert url.startswith('mariadb+pymysql://')
        origem = generico.Origem(url).conectar()
        try:
            with pytest.raises(generico.ErroOrigem, match='1792'), origem.sessao() as conn:
                conn.exec_driver_sql('CREATE TABLE escrita_recusada (i INT)')
        finally:
            origem.fechar()
    finally:
        derrubar_banco(banco)
