"""
As `base_tables` conferidas no catálogo da origem na subida das estratégias por
log (captura/tabelas_base.py), com bancos de verdade: o MariaDB privado com o
binlog (tests/apoio/mariadb_binlog.py) e o PostgreSQL privado com
wal_level=logical (tests/apoio/postgres_logico.py), o ouvinte.py como processo e
o Contextia local.

O log nunca mostra mudança "numa view": o dataset cujo source_object é view e
não tem `base_tables` não muda ao vivo nunca. Ele fica SÓ NA VARREDURA, dito com
o motivo e a correção na subida (a contagem "ao vivo N de M" é a verdade), no
status (.txt e .json), no `estado.py mostrar`, no `--saude` (ALERTA) e nas
métricas -- e o resto fica ao vivo. O nome errado em `base_tables` (a tabela
que não existe, a coluna que ela não tem, a tabela que a view não lê) recusa a
subida (saída 2) com a correção.
"""

import json
import os
import re
import subprocess
import sys
import uuid

import pytest

from tests.apoio.mariadb_binlog import mariadb_binlog  # noqa: F401 - fixture de sessao
from tests.apoio.ouvinte import RAIZ, Ouvinte, esperar
from tests.apoio.postgres_logico import postgres_logico  # noqa: F401 - fixture de sessao
from tests.dados import erp as erp_teste

pytestmark = [pytest.mark.lento]

DATASET_VIEW = 'titulos_pela_view'


def _ouvinte(tmp_path, banco, contextia, chave_contextia, estrategia):
    erp = erp_teste.Erp(banco, titulos_por_empresa=(3, 2))
    o = Ouvinte(tmp_path, erp, contextia, chave_contextia)
    o.banco = banco
    _mudar_mapa(o, listener={'strategy': estrategia}, client='teste_' + uuid.uuid4().hex[:8])
    return o


def _mudar_mapa(o, dataset=None, **topo):
    with open(o.mapa, encoding='utf-8') as arquivo:
        mapa = json.load(arquivo)
    mapa.update(topo)
    if dataset is not None:
        mapa['datasets'].append(dataset)
    with open(o.mapa, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo)
    return mapa


def _dataset_da_view(**extra):
    """O dataset lido pela view V_TITULOS (key, empresa e coluna de mudança do defaults)."""
    return dict(
        {
            'dataset': 'Titulos pela View',
            'source_object': 'V_TITULOS',
            'columns': ['ID', 'EMPRESA_ID', 'CLIENTE', 'VALOR', 'ALTERADO_EM'],
        },
        **extra,
    )


def _processo(o, *argv, env=None):
    feito = subprocess.run(
        [sys.executable] + list(argv),
        cwd=RAIZ,
        env=env or o.env(),
        timeout=120,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    return feito.returncode, feito.stdout.decode('utf-8', 'replace')


def _status_json(o):
    with open(os.path.join(o.estado_dir, 'ouvinte-status.json'), encoding='utf-8') as arquivo:
        return json.load(arquivo)


def _metricas(o):
    with open(os.path.join(o.estado_dir, 'ouvinte.prom'), encoding='utf-8') as arquivo:
        return arquivo.read()


def _ids(o, escopo):
    return set(o.no_contextia(escopo))


def _so_varredura_em_todo_lugar(o, saida):
    """A view sem base_tables: só na varredura, com o motivo, em cada lugar que o operador lê."""
    # A subida: a contagem verdadeira, e a linha da view como AVISO (WARNING), com a correção.
    assert 'datasets ao vivo .: 2 de 3' in saida, saida
    linha = re.search(r'.*fora do ao-vivo: Titulos pela View\s.*', saida)
    assert linha and linha.group(0).startswith('[W '), saida
    assert 'só varredura: ' in linha.group(0) and 'V_TITULOS é uma view' in linha.group(0)
    assert 'declare `base_tables`' in linha.group(0), linha.group(0)

    # O status, .json e .txt.
    status = _status_json(o)
    assert status['ouvinte']['datasets_ao_vivo'] == 2 and status['ouvinte']['datasets_total'] == 3
    (view,) = [d for d in status['datasets'] if d['dataset'] == DATASET_VIEW]
    assert view['ao_vivo'] is False and view['so_varredura'] is True, view
    assert view['motivo'].startswith('só varredura: ') and '`base_tables`' in view['motivo']
    assert re.search(r'%s\s+fora do ao-vivo: só varredura: ' % DATASET_VIEW, o.status())

    # estado.py mostrar --mapping (tabela e JSON).
    codigo, texto = _processo(
        o, 'estado.py', 'mostrar', '--estado=' + o.estado_dir, '--mapping=' + o.mapa
    )
    assert codigo == 0, texto
    assert re.search(r'%s\s+fora do ao-vivo: só varredura: .*é uma view' % DATASET_VIEW, texto), (
        texto
    )
    codigo, texto = _processo(
        o, 'estado.py', 'mostrar', '--json', '--estado=' + o.estado_dir, '--mapping=' + o.mapa
    )
    (retrato,) = [d for d in json.loads(texto)['datasets'] if d['dataset'] == DATASET_VIEW]
    assert retrato['ao_vivo'] is False and retrato['so_varredura'] is True, retrato

    # --saude: ALERTA (WARNING, saída 1), nomeando o dataset e a correção.
    codigo, texto = _processo(o, 'ouvinte.py', '--saude', '--estado=' + o.estado_dir)
    assert codigo == 1 and texto.startswith('OUVINTE ALERTA - '), texto
    assert 'dataset %s só varredura: ' % DATASET_VIEW in texto and 'base_tables' in texto, texto
    assert 'datasets_ao_vivo=2;' in texto, texto

    # As métricas.
    prom = _metricas(o)
    assert 'ouvinte_datasets_ao_vivo 2\n' in prom, prom
    assert 'ouvinte_dataset_ao_vivo{dataset="%s"} 0\n' % DATASET_VIEW in prom
    assert 'ouvinte_dataset_so_varredura{dataset="%s"} 1\n' % DATASET_VIEW in prom
    assert 'ouvinte_dataset_so_varredura{dataset="titulos_a_receber"}' not in prom
    assert 'ouvinte_saude_nivel 1\n' in prom, prom


def _o_resto_fica_ao_vivo(o):
    """Uma linha nova em TITULOS chega pelo log (o dataset da tabela continua ao vivo)."""
    e0 = o.erp.escopos[0]
    novo = o.inserir(e0, '2026-10-01 10:00:00')
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    esperar(lambda: novo in _ids(o, e0), 30)


# ------------------------------------------------------------------ MariaDB (binlog)
@pytest.fixture
def banco_mariadb(mariadb_binlog):  # noqa: F811
    return mariadb_binlog.banco_de_teste()


def _ouvinte_mariadb(tmp_path, banco, contextia, chave_contextia):
    o = _ouvinte(tmp_path, banco, contextia, chave_contextia, 'binlog')
    o.erp.executar(
        'CREATE VIEW {V_TITULOS} AS SELECT {ID}, {EMPRESA_ID}, {CLIENTE}, {VALOR}, {ALTERADO_EM}'
        ' FROM {TITULOS}'
    )
    return o


@pytest.mark.mariadb
def test_binlog_view_sem_base_tables_fica_so_na_varredura_dito_em_todo_lugar(
    tmp_path, banco_mariadb, ambiente_contextia, chave_contextia
):
    o = _ouvinte_mariadb(tmp_path, banco_mariadb, ambiente_contextia, chave_contextia)
    _mudar_mapa(o, dataset=_dataset_da_view())
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    _so_varredura_em_todo_lugar(o, saida)
    _o_resto_fica_ao_vivo(o)


@pytest.mark.mariadb
def test_binlog_tabela_base_que_nao_existe_ou_sem_a_coluna_recusa_a_subida(
    tmp_path, banco_mariadb, ambiente_contextia, chave_contextia
):
    o = _ouvinte_mariadb(tmp_path, banco_mariadb, ambiente_contextia, chave_contextia)
    _mudar_mapa(
        o,
        dataset=_dataset_da_view(
            base_tables=[
                'TITULOZ',
                {'table': 'TITULOS', 'column': 'EMPRESAID', 'dataset_column': 'EMPRESA_ID'},
            ]
        ),
    )
    codigo, saida = o.rodar('--once')
    assert codigo == 2, saida
    assert (
        'dataset %s: `base_tables` lista TITULOZ, que não existe na origem (ou o login %s'
        ' não a vê). Corrija o nome em `base_tables`.' % (DATASET_VIEW, banco_mariadb.usuario)
    ) in saida, saida
    assert (
        'a tabela %s.TITULOS (`base_tables`) não tem a coluna EMPRESAID' % banco_mariadb.nome
    ) in saida and 'Corrija `column` do item.' in saida, saida
    assert 'Traceback' not in saida


# ------------------------------------------------------------------ PostgreSQL (slot_logico)
@pytest.fixture
def banco_postgres(postgres_logico):  # noqa: F811
    banco = postgres_logico.banco_de_teste()
    yield banco
    postgres_logico.admin(
        'SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots'
        " WHERE database = '%s' AND NOT active" % banco.nome
    )


def _ouvinte_postgres(tmp_path, banco, contextia, chave_contextia):
    """O ERP com a view (por outra view: V_TITULOS lê V_BASE, que lê TITULOS) e o slot criado."""
    o = _ouvinte(tmp_path, banco, contextia, chave_contextia, 'slot_logico')
    o.erp.executar('ALTER TABLE {TITULOS} REPLICA IDENTITY FULL')
    o.erp.executar(
        'CREATE VIEW {V_BASE} AS SELECT {ID}, {EMPRESA_ID}, {CLIENTE}, {VALOR}, {ALTERADO_EM}'
        ' FROM {TITULOS}'
    )
    o.erp.executar('CREATE VIEW {V_TITULOS} AS SELECT * FROM {V_BASE}')
    o.erp.executar('CREATE TABLE {OUTRA} ({ID} INTEGER PRIMARY KEY, {EMPRESA_ID} INTEGER)')
    o.erp.executar('GRANT SELECT ON ALL TABLES IN SCHEMA public TO %s' % banco.usuario)
    # O slot e a publicação com as tabelas do mapeamento de antes da view.
    codigo, saida = _processo(
        o, *o.argv('--criar-slot')[1:], env=dict(o.env(), CONTEXTIA_ORIGEM_DBA=banco.url_admin)
    )
    assert codigo == 0, saida
    return o


@pytest.mark.postgres
def test_slot_view_sem_base_tables_fica_so_na_varredura_dito_em_todo_lugar(
    tmp_path, banco_postgres, ambiente_contextia, chave_contextia
):
    o = _ouvinte_postgres(tmp_path, banco_postgres, ambiente_contextia, chave_contextia)
    _mudar_mapa(o, dataset=_dataset_da_view())
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    _so_varredura_em_todo_lugar(o, saida)
    # O que a view lê, através da V_BASE, está na correção.
    assert 'as tabelas que a view lê (public.TITULOS)' in saida, saida
    _o_resto_fica_ao_vivo(o)


@pytest.mark.postgres
def test_slot_tabela_base_que_a_view_nao_le_recusa_a_subida_nomeando_a(
    tmp_path, banco_postgres, ambiente_contextia, chave_contextia
):
    o = _ouvinte_postgres(tmp_path, banco_postgres, ambiente_contextia, chave_contextia)
    _mudar_mapa(o, dataset=_dataset_da_view(base_tables=['OUTRA']))
    codigo, saida = o.rodar('--once')
    assert codigo == 2, saida
    assert (
        'dataset %s: a view public.V_TITULOS não lê a tabela public.OUTRA de `base_tables`'
        ' (ela lê public.TITULOS)' % DATASET_VIEW
    ) in saida, saida
    assert 'Corrija `base_tables` com as tabelas que a view lê.' in saida
    assert 'Traceback' not in saida
