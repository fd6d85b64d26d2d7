"""
`--criar-slot` nunca quebra a escrita do próprio ERP (issue 30, item 1).

Uma publicação `FOR TABLE pai` leva as filhas por herança, e a de uma tabela
particionada leva as partições: publicada sem REPLICA IDENTITY usável, a tabela
passa a recusar o UPDATE e o DELETE do ERP ("cannot update table ... because it
does not have a replica identity and publishes updates"). Num PostgreSQL
privado com wal_level=logical (tests/apoio/postgres_logico.py), o ouvinte.py
de verdade e o Contextia local:

  * herança com filhas sem chave primária: recusado, cada filha nomeada com
    as saídas do DBA, e NADA criado (nem publicação, nem slot); a filha que o
    mapeamento não segue também é recusada (a mudança nela seria ignorada);
  * partições declarativas (com subpartição) sem identidade: recusado nomeando
    cada partição folha; com a chave primária na raiz: criado com
    publish_via_partition_root;
  * depois do `--criar-slot` que deu certo, o UPDATE e o DELETE do dono nas
    filhas e partições funcionam, e o ouvinte leva ao Contextia o insert, o
    update e o delete feitos nelas;
  * `--remover-slot` desfaz só o que o `--criar-slot` fez (a publicação que o
    DBA já tinha fica, com o que ela tinha), pelo registro em
    `<estado>/slot-criado.json`; sem ele, remove tudo e diz o que assumiu.
"""

import json
import os
import uuid

import pytest

from tests.apoio.captura_log import ids_sem_duplicata as _ids
from tests.apoio.captura_log import parar as _parar
from tests.apoio.ouvinte import Ouvinte, esperar
from tests.apoio.postgres_logico import comando_do_dba
from tests.apoio.postgres_logico import postgres_logico  # noqa: F401 - fixture de sessao
from tests.dados import erp as erp_teste

pytestmark = [pytest.mark.postgres, pytest.mark.lento]

FILHAS = ['TITULOS_2025', 'TITULOS_2026', 'TITULOS_2026_12']  # a última é neta
FOLHAS = ['TITULOS_E0', 'TITULOS_E1_A', 'TITULOS_E1_B', 'TITULOS_OUTRAS']


@pytest.fixture
def banco(postgres_logico):  # noqa: F811
    banco = postgres_logico.banco_de_teste()
    yield banco
    # Slot esquecido retém WAL do cluster inteiro: nenhum sobra de um teste.
    postgres_logico.admin(
        'SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots'
        " WHERE database = '%s' AND NOT active" % banco.nome
    )


def _ouvinte(tmp_path, banco, contextia, chave_contextia, base_tables=None):
    erp = erp_teste.Erp(banco, titulos_por_empresa=(3, 2))
    erp.executar('ALTER TABLE {TITULOS} REPLICA IDENTITY FULL')
    ouvinte = Ouvinte(tmp_path, erp, contextia, chave_contextia)
    ouvinte.slot = 'contextia_part_' + uuid.uuid4().hex[:8]  # o slot é do cluster inteiro
    ouvinte.banco = banco
    _mapear(ouvinte, base_tables)
    return ouvinte


def _mapear(ouvinte, base_tables):
    with open(ouvinte.mapa, encoding='utf-8') as arquivo:
        mapa = json.load(arquivo)
    mapa['client'] = ouvinte.slot[len('contextia_') :]
    mapa['listener'] = {'strategy': 'slot_logico'}
    mapa['datasets'][0].pop('base_tables', None)
    if base_tables:
        mapa['datasets'][0]['base_tables'] = base_tables
    with open(ouvinte.mapa, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo)


def _registro(ouvinte):
    return os.path.join(ouvinte.estado_dir, 'slot-criado.json')


def _publicacao(ouvinte):
    """(existe, pubviaroot, as tabelas listadas nela) -- pg_publication_rel, sem expandir."""
    linha = ouvinte.banco.admin(
        "SELECT pubviaroot FROM pg_publication WHERE pubname = '%s'" % ouvinte.slot
    )
    if not linha:
        return False, None, set()
    listadas = ouvinte.banco.admin(
        'SELECT c.relname FROM pg_publication_rel r JOIN pg_publication p ON p.oid = r.prpubid'
        " JOIN pg_class c ON c.oid = r.prrelid WHERE p.pubname = '%s'" % ouvinte.slot
    )
    return True, linha[0][0], {nome for (nome,) in listadas}


def _nada_criado(ouvinte):
    assert _publicacao(ouvinte) == (False, None, set())
    assert ouvinte.slot not in ouvinte.banco.slots()
    assert not os.path.exists(_registro(ouvinte))


def _posicao_gravada(ouvinte):
    try:
        with open(os.path.join(ouvinte.estado_dir, 'slot-posicao.json')) as arquivo:
            return json.load(arquivo).get('lsn')
    except (FileNotFoundError, ValueError):
        return None


def _inserir(ouvinte, tabela, ident, escopo, valor='10.00'):
    ouvinte.banco.admin(
        "INSERT INTO \"%s\" VALUES (%d, %d, 'Cliente %d', %s, DATE '2026-10-01',"
        " TIMESTAMP '2026-10-01 10:00:00')" % (tabela, ident, int(escopo), ident, valor)
    )


def _valor(ouvinte, escopo, ident):
    return str(ouvinte.no_contextia(escopo).get(ident, {}).get('VALOR'))


# ------------------------------------------------------------------ herança
def _criar_filhas(ouvinte):
    banco = ouvinte.banco
    # INHERITS não copia a chave primária: as filhas nascem sem identidade usável.
    banco.admin('CREATE TABLE "TITULOS_2025" () INHERITS ("TITULOS")')
    banco.admin('CREATE TABLE "TITULOS_2026" () INHERITS ("TITULOS")')
    banco.admin('CREATE TABLE "TITULOS_2026_12" () INHERITS ("TITULOS_2026")')
    # Um índice único em coluna NOT NULL (herdada do pai): a saída USING INDEX.
    banco.admin('CREATE UNIQUE INDEX "TITULOS_2025_ID" ON "TITULOS_2025" ("ID")')
    e0 = ouvinte.erp.escopos[0]
    for n, filha in enumerate(FILHAS):
        _inserir(ouvinte, filha, ouvinte.erp.base * 1000 + 500 + n, e0)


def test_heranca_sem_identidade_recusa_cada_filha_nada_cria_e_corrigida_captura(
    tmp_path, banco, ambiente_contextia, chave_contextia
):
    o = _ouvinte(
        tmp_path, banco, ambiente_contextia, chave_contextia, base_tables=['TITULOS'] + FILHAS
    )
    _criar_filhas(o)
    codigo, saida = comando_do_dba(o, '--criar-slot')
    assert codigo == 2 and 'NADA foi criado' in saida, saida
    for filha, pai in zip(FILHAS, ['TITULOS', 'TITULOS', 'TITULOS_2026'], strict=True):
        assert (
            'public.%s (herda de public.%s): REPLICA IDENTITY DEFAULT sem chave primária'
            % (filha, pai)
            in saida
        ), saida
        assert 'ALTER TABLE "public"."%s" REPLICA IDENTITY FULL;' % filha in saida, saida
    assert 'REPLICA IDENTITY USING INDEX "TITULOS_2025_ID";' in saida, saida
    assert 'Traceback' not in saida, saida
    _nada_criado(o)
    # O ERP continua escrevendo nelas (nada foi publicado).
    banco.admin('UPDATE "TITULOS" SET "VALOR" = "VALOR" + 1')

    # A filha que o mapeamento não segue: a mudança nela seria ignorada -- recusada também.
    _mapear(o, None)
    for filha in FILHAS:
        banco.admin('ALTER TABLE "%s" REPLICA IDENTITY FULL' % filha)
    codigo, saida = comando_do_dba(o, '--criar-slot')
    assert codigo == 2, saida
    for filha in FILHAS:
        assert 'public.%s herda de' % filha in saida and 'não a segue' in saida, saida
    _nada_criado(o)

    # Corrigido (as filhas seguidas, com REPLICA IDENTITY FULL): criado.
    _mapear(o, ['TITULOS'] + FILHAS)
    codigo, saida = comando_do_dba(o, '--criar-slot')
    assert codigo == 0 and 'slot %s criado' % o.slot in saida, saida
    assert 'AINDA FALTA' not in saida, saida
    assert _publicacao(o) == (True, False, {'TITULOS', 'STATUS', *FILHAS})
    # O UPDATE e o DELETE do dono nas filhas funcionam com elas publicadas.
    banco.admin('UPDATE "TITULOS" SET "VALOR" = "VALOR" + 1')
    banco.admin('UPDATE "TITULOS_2026_12" SET "VALOR" = "VALOR" + 1')
    banco.admin('DELETE FROM "TITULOS_2025"')
    _captura_nas_tabelas(o, 'TITULOS_2026', 'TITULOS_2026_12')

    codigo, saida = comando_do_dba(o, '--remover-slot')
    assert codigo == 0 and 'publicação %s removida' % o.slot in saida, saida
    assert _publicacao(o)[0] is False and o.slot not in banco.slots()
    assert not os.path.exists(_registro(o))


def _captura_nas_tabelas(o, onde_inserir, onde_mudar):
    """O ouvinte de pé: insert, update e delete feitos numa filha ou partição chegam."""
    e0 = o.erp.escopos[0]
    processo = o.iniciar()
    try:
        esperar(lambda: _posicao_gravada(o), 30)
        novo = o.erp.base * 1000 + 800
        _inserir(o, onde_inserir, novo, e0, valor='11.00')
        esperar(lambda: novo in _ids(o, e0), 30)
        o.banco.admin('UPDATE "%s" SET "VALOR" = 77.25 WHERE "ID" = %d' % (onde_inserir, novo))
        esperar(lambda: _valor(o, e0, novo) == '77.25', 30)
        outro = o.erp.base * 1000 + 801
        _inserir(o, onde_mudar, outro, e0, valor='12.00')
        esperar(lambda: outro in _ids(o, e0), 30)
        o.banco.admin('DELETE FROM "%s" WHERE "ID" = %d' % (onde_mudar, outro))
        esperar(lambda: outro not in _ids(o, e0), 30)
    finally:
        _parar(processo)


# ------------------------------------------------------------------ partições
def _particionar(ouvinte):
    """TITULOS vira particionada por empresa, uma partição subparticionada por ID."""
    banco, (e0, e1) = ouvinte.banco, ouvinte.erp.escopos
    meio = ouvinte.erp.base * 1000 + 700
    comandos = [
        'ALTER TABLE "TITULOS" RENAME TO "TITULOS_VELHA"',
        'CREATE TABLE "TITULOS" (LIKE "TITULOS_VELHA") PARTITION BY LIST ("EMPRESA_ID")',
        'CREATE TABLE "TITULOS_E0" PARTITION OF "TITULOS" FOR VALUES IN (%s)' % e0,
        'CREATE TABLE "TITULOS_E1" PARTITION OF "TITULOS" FOR VALUES IN (%s)'
        ' PARTITION BY RANGE ("ID")' % e1,
        'CREATE TABLE "TITULOS_E1_A" PARTITION OF "TITULOS_E1"'
        ' FOR VALUES FROM (MINVALUE) TO (%d)' % meio,
        'CREATE TABLE "TITULOS_E1_B" PARTITION OF "TITULOS_E1"'
        ' FOR VALUES FROM (%d) TO (MAXVALUE)' % meio,
        'CREATE TABLE "TITULOS_OUTRAS" PARTITION OF "TITULOS" DEFAULT',
        'INSERT INTO "TITULOS" SELECT * FROM "TITULOS_VELHA"',
        'DROP TABLE "TITULOS_VELHA"',
    ]
    for comando in comandos:
        banco.admin(comando)


def test_particoes_sem_identidade_recusadas_com_chave_na_raiz_criado_pela_raiz_e_capturado(
    tmp_path, banco, ambiente_contextia, chave_contextia
):
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    _particionar(o)
    codigo, saida = comando_do_dba(o, '--criar-slot')
    assert codigo == 2 and 'NADA foi criado' in saida, saida
    pais = {'TITULOS_E0': 'TITULOS', 'TITULOS_OUTRAS': 'TITULOS'}
    for folha in FOLHAS:
        assert (
            'public.%s (partição de public.%s): REPLICA IDENTITY DEFAULT sem chave primária'
            % (folha, pais.get(folha, 'TITULOS_E1'))
            in saida
        ), saida
    assert 'o ALTER TABLE na raiz não desce às partições' in saida, saida
    # A particionada não guarda linha: o PostgreSQL 13.9+ não a confere, nem nós.
    assert 'public.TITULOS_E1 (' not in saida and 'public.TITULOS (' not in saida, saida
    _nada_criado(o)

    # O DBA põe a chave primária na raiz: ela desce a toda partição, e a empresa vai nela.
    banco.admin('ALTER TABLE "TITULOS" ADD PRIMARY KEY ("ID", "EMPRESA_ID")')
    codigo, saida = comando_do_dba(o, '--criar-slot')
    assert codigo == 0 and 'slot %s criado' % o.slot in saida, saida
    assert 'publish_via_partition_root = true' in saida and 'AINDA FALTA' not in saida, saida
    assert _publicacao(o) == (True, True, {'TITULOS', 'STATUS'})
    e0, e1 = o.erp.escopos
    # O UPDATE e o DELETE do dono nas partições funcionam, também o que muda de partição.
    banco.admin('UPDATE "TITULOS" SET "VALOR" = "VALOR" + 1')
    banco.admin('UPDATE "TITULOS_E1_A" SET "VALOR" = "VALOR" + 1')
    primeiro = banco.admin('SELECT min("ID") FROM "TITULOS_E0"')[0][0]
    banco.admin('UPDATE "TITULOS" SET "EMPRESA_ID" = %s WHERE "ID" = %d' % (e1, primeiro))
    banco.admin('DELETE FROM "TITULOS" WHERE "ID" = %d' % primeiro)
    # A mudança na partição chega com o nome da raiz: o ouvinte a leva.
    _captura_nas_tabelas(o, 'TITULOS', 'TITULOS_E0')
    processo = o.iniciar()
    try:
        movido = o.erp.base * 1000 + 900
        _inserir(o, 'TITULOS', movido, e0)
        esperar(lambda: movido in _ids(o, e0), 30)
        banco.admin('UPDATE "TITULOS" SET "EMPRESA_ID" = %s WHERE "ID" = %d' % (e1, movido))
        esperar(lambda: movido in _ids(o, e1) and movido not in _ids(o, e0), 30)
        direto = o.erp.base * 1000 + 901
        _inserir(o, 'TITULOS_E1_B', direto, e1)
        esperar(lambda: direto in _ids(o, e1), 30)
    finally:
        _parar(processo)


def test_publicacao_do_dba_fica_e_sem_registro_remove_tudo_dizendo(
    tmp_path, banco, ambiente_contextia, chave_contextia
):
    o = _ouvinte(tmp_path, banco, ambiente_contextia, chave_contextia)
    _particionar(o)
    banco.admin('ALTER TABLE "TITULOS" ADD PRIMARY KEY ("ID", "EMPRESA_ID")')
    # O DBA já tinha a publicação, com outra tabela e sem publish_via_partition_root.
    banco.admin('CREATE TABLE "OUTRA" ("X" integer PRIMARY KEY)')
    banco.admin('CREATE PUBLICATION %s FOR TABLE "OUTRA", "STATUS"' % o.slot)
    codigo, saida = comando_do_dba(o, '--criar-slot')
    assert codigo == 0 and 'slot %s criado' % o.slot in saida, saida
    assert 'já existia antes deste --criar-slot' in saida, saida
    assert _publicacao(o) == (True, True, {'OUTRA', 'STATUS', 'TITULOS'})
    with open(_registro(o), encoding='utf-8') as arquivo:
        registro = json.load(arquivo)
    assert registro['publicacao_criada'] is False and registro['via_raiz_ligada'] is True
    assert registro['tabelas_acrescentadas'] == ['"public"."TITULOS"'], registro

    codigo, saida = comando_do_dba(o, '--remover-slot')
    assert codigo == 0 and 'slot %s removido' % o.slot in saida, saida
    assert 'existia antes do --criar-slot (do DBA): fica' in saida, saida
    # Ficou como o DBA a deixou: as tabelas dele, sem a raiz das partições.
    assert _publicacao(o) == (True, False, {'OUTRA', 'STATUS'})
    assert o.slot not in banco.slots() and not os.path.exists(_registro(o))

    # Sem o registro (um --criar-slot de antes dele): remove tudo e diz o que assumiu.
    codigo, saida = comando_do_dba(o, '--criar-slot')
    assert codigo == 0, saida
    os.unlink(_registro(o))
    codigo, saida = comando_do_dba(o, '--remover-slot')
    assert codigo == 0 and 'sem o registro' in saida and 'assumido' in saida, saida
    assert _publicacao(o)[0] is False and o.slot not in banco.slots()
