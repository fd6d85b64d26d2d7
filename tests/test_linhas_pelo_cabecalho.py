"""
As linhas de um ERP pelo cabeçalho, ao vivo pelo log (`binlog` e `slot_logico`).

O formato de um ERP de verdade: o item da nota não tem a coluna da empresa; a
empresa vem do cabeçalho, e a view do DBA junta os dois. O dataset segue as
duas tabelas (`base_tables`): o item pela key, a nota pela coluna que o item
guarda (`{"table": "NOTAS", "column": "ID", "dataset_column": "NOTA_ID"}`).

Mostra, com um MariaDB com binlog e um PostgreSQL com wal_level=logical
privados, o ouvinte.py como processo e o Contextia local:
  * o item apagado sai do Contextia, da empresa em que foi entregue (antes:
    nunca saía, e a mudança ficava no spool para sempre);
  * a nota que troca de empresa leva os itens: saem da antiga, chegam à nova;
  * a nota alterada reenvia só os itens dela (nunca a nota como se fosse item:
    antes, o id da nota ia ao spool como key de item);
  * a nota apagada sem os itens (a view não os mostra mais): eles saem;
  * no fim, nada tomado nem pronto no spool, e a captura sem CRÍTICO.
"""

import json
import os
import re
import subprocess
import uuid

import pytest

from contextia_sync.intake import cliente
from tests.apoio.captura_log import arquivos_do_spool, parar
from tests.apoio.mariadb_binlog import mariadb_binlog  # noqa: F401 - fixture de sessao
from tests.apoio.ouvinte import RAIZ, Ouvinte, esperar
from tests.apoio.postgres_logico import postgres_logico  # noqa: F401 - fixture de sessao
from tests.dados import erp as erp_teste

pytestmark = [pytest.mark.lento]

ITENS = 'itens_de_nota'

DDL = [
    'CREATE TABLE {NOTAS} ({ID} INTEGER PRIMARY KEY, {EMPRESA_ID} INTEGER, {NUMERO} VARCHAR(20))',
    'CREATE TABLE {NOTA_ITENS} ({ID} INTEGER PRIMARY KEY, {NOTA_ID} INTEGER,'
    ' {PRODUTO} VARCHAR(40), {VALOR} NUMERIC(12,2), {CANCELADO} CHAR(1))',
    'CREATE VIEW {V_ITENS} AS SELECT i.{ID}, n.{EMPRESA_ID}, i.{NOTA_ID}, n.{NUMERO},'
    ' i.{PRODUTO}, i.{VALOR}, i.{CANCELADO} FROM {NOTA_ITENS} i'
    ' JOIN {NOTAS} n ON n.{ID} = i.{NOTA_ID}',
]


def _dataset_de_itens():
    return {
        'dataset': 'Itens de Nota',
        'source_object': 'V_ITENS',
        'columns': ['ID', 'EMPRESA_ID', 'NOTA_ID', 'NUMERO', 'PRODUTO', 'VALOR', 'CANCELADO'],
        'key': 'ID',
        'scope_column': 'EMPRESA_ID',
        'watch_column': None,
        # O item cancelado é apagado por marca: sai do Contextia ao vivo.
        'deleted_when': {'column': 'CANCELADO', 'equals': 'S'},
        'base_tables': [
            'NOTA_ITENS',
            {'table': 'NOTAS', 'column': 'ID', 'dataset_column': 'NOTA_ID'},
        ],
    }


def _preparar(tmp_path, banco, contextia, chave_contextia, estrategia):
    erp = erp_teste.Erp(banco, titulos_por_empresa=(1, 1))
    for comando in DDL:
        erp.executar(comando)
    ouvinte = Ouvinte(tmp_path, erp, contextia, chave_contextia)
    with open(ouvinte.mapa, encoding='utf-8') as arquivo:
        mapa = json.load(arquivo)
    mapa['client'] = 'teste_' + uuid.uuid4().hex[:8]
    mapa['listener'] = {'strategy': estrategia}
    mapa['datasets'] = [_dataset_de_itens()]
    with open(ouvinte.mapa, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo)
    ouvinte.banco = banco
    ouvinte.slot = 'contextia_' + mapa['client']
    return ouvinte


def _status(ouvinte):
    try:
        with open(os.path.join(ouvinte.estado_dir, 'ouvinte-status.json')) as arquivo:
            return json.load(arquivo)
    except (FileNotFoundError, ValueError):
        return {}


def _itens(ouvinte, escopo):
    """{ID: registro} dos itens no projeto da empresa, sem duplicata."""
    registros = list(cliente.ler_registros(ITENS, ouvinte.chaves[escopo]))
    ids = [int(r['ID']) for r in registros]
    assert len(ids) == len(set(ids)), ids
    return {int(r['ID']): r for r in registros}


def _nota(ouvinte, nota, escopo, numero, itens):
    ouvinte.erp.executar('INSERT INTO {NOTAS} VALUES (:i, :e, :n)', i=nota, e=int(escopo), n=numero)
    ouvinte.erp.executar(
        'INSERT INTO {NOTA_ITENS} VALUES (:i, :n, :p, :v, :c)',
        lote=[
            {'i': i, 'n': nota, 'p': 'Produto %d' % i, 'v': '%d.50' % i, 'c': 'N'} for i in itens
        ],
    )


def _enviados_por_ciclo(saida):
    """Os `enviados=N` das linhas do dataset de itens, na ordem do log."""
    return [int(n) for n in re.findall(r'itens_de_nota\s+escopo=\S+\s+enviados=(\d+)', saida)]


def _percorrer(ouvinte, processo):
    e0, e1 = ouvinte.erp.escopos
    esperar(lambda: (_status(ouvinte).get('captura') or {}).get('posicao'), 60)
    _nota(ouvinte, 1, e0, 'NF-1', [11, 12, 13])
    _nota(ouvinte, 2, e1, 'NF-2', [21, 22])
    esperar(lambda: set(_itens(ouvinte, e0)) == {11, 12, 13}, 60)
    esperar(lambda: set(_itens(ouvinte, e1)) == {21, 22}, 60)

    # O item apagado sai da empresa em que foi entregue (o item não tem empresa).
    ouvinte.erp.executar('DELETE FROM {NOTA_ITENS} WHERE {ID} = 12')
    esperar(lambda: set(_itens(ouvinte, e0)) == {11, 13}, 60)

    # A nota alterada reenvia só os itens dela, com o número novo.
    antes = len(_enviados_por_ciclo(ouvinte.saida()))
    ouvinte.erp.executar("UPDATE {NOTAS} SET {NUMERO} = 'NF-2b' WHERE {ID} = 2")
    esperar(lambda: {r['NUMERO'] for r in _itens(ouvinte, e1).values()} == {'NF-2b'}, 60)
    assert _enviados_por_ciclo(ouvinte.saida())[antes:] == [2]

    # A nota que troca de empresa leva os itens.
    ouvinte.erp.executar('UPDATE {NOTAS} SET {EMPRESA_ID} = :e WHERE {ID} = 1', e=int(e1))
    esperar(lambda: set(_itens(ouvinte, e1)) == {11, 13, 21, 22}, 60)
    esperar(lambda: not _itens(ouvinte, e0), 60)

    # A nota apagada sem os itens: a view não os mostra mais, e eles saem.
    ouvinte.erp.executar('DELETE FROM {NOTAS} WHERE {ID} = 2')
    esperar(lambda: set(_itens(ouvinte, e1)) == {11, 13}, 60)

    # O item marcado como apagado (`deleted_when`) sai; desmarcado, volta.
    ouvinte.erp.executar("UPDATE {NOTA_ITENS} SET {CANCELADO} = 'S' WHERE {ID} = 13")
    esperar(lambda: set(_itens(ouvinte, e1)) == {11}, 60)
    ouvinte.erp.executar("UPDATE {NOTA_ITENS} SET {CANCELADO} = 'N' WHERE {ID} = 13")
    esperar(lambda: set(_itens(ouvinte, e1)) == {11, 13}, 60)

    esperar(lambda: not arquivos_do_spool(ouvinte), 30)
    captura = _status(ouvinte)['captura']
    assert not captura['critico'], captura
    parar(processo)
    assert not arquivos_do_spool(ouvinte)
    # Saída limpa: a subida seguinte não acha nada tomado "de um processo que morreu".
    codigo, saida = ouvinte.rodar('--once')
    assert codigo == 0, saida
    assert 'morreu' not in saida, saida


@pytest.mark.mariadb
def test_binlog_itens_pela_nota(tmp_path, mariadb_binlog, ambiente_contextia, chave_contextia):  # noqa: F811
    banco = mariadb_binlog.banco_de_teste()
    ouvinte = _preparar(tmp_path, banco, ambiente_contextia, chave_contextia, 'binlog')
    processo = ouvinte.iniciar()
    try:
        _percorrer(ouvinte, processo)
    finally:
        if processo.poll() is None:
            parar(processo)


@pytest.mark.postgres
def test_slot_logico_itens_pela_nota(
    tmp_path,
    postgres_logico,  # noqa: F811
    ambiente_contextia,
    chave_contextia,
):
    banco = postgres_logico.banco_de_teste()
    ouvinte = _preparar(tmp_path, banco, ambiente_contextia, chave_contextia, 'slot_logico')
    env = dict(ouvinte.env(), CONTEXTIA_ORIGEM_DBA=banco.url_admin)
    feito = subprocess.run(
        ouvinte.argv('--criar-slot'), cwd=RAIZ, env=env, capture_output=True, timeout=60
    )
    assert feito.returncode == 0, feito.stdout.decode() + feito.stderr.decode()
    processo = ouvinte.iniciar()
    try:
        _percorrer(ouvinte, processo)
    finally:
        if processo.poll() is None:
            parar(processo)
        subprocess.run(
            ouvinte.argv('--remover-slot'), cwd=RAIZ, env=env, capture_output=True, timeout=60
        )


def _chaves(ouvinte, escopos):
    """O arquivo de chaves reescrito (troca atômica) só com `escopos`."""
    temporario = ouvinte.arquivo_chaves + '.novo'
    with open(temporario, 'w') as arquivo:
        arquivo.writelines('%s\t%s\n' % (e, ouvinte.chaves[e]) for e in escopos)
    os.chmod(temporario, 0o600)
    os.replace(temporario, ouvinte.arquivo_chaves)


@pytest.mark.mariadb
def test_remocao_sem_destino_vai_para_a_quarentena_e_o_resto_segue(
    tmp_path,
    mariadb_binlog,  # noqa: F811
    ambiente_contextia,
    chave_contextia,
):
    # A empresa sai do arquivo de chaves com itens entregues; o item dela apagado
    # não tem para onde ir. Antes: o envio do dataset falhava a cada ciclo, o
    # spool parava e tudo era reenviado. Agora: a remoção vai para a quarentena,
    # nomeada, e o resto segue; com a chave de volta, o reenvio a entrega.
    banco = mariadb_binlog.banco_de_teste()
    ouvinte = _preparar(tmp_path, banco, ambiente_contextia, chave_contextia, 'binlog')
    e0, e1 = ouvinte.erp.escopos
    processo = ouvinte.iniciar()
    try:
        esperar(lambda: (_status(ouvinte).get('captura') or {}).get('posicao'), 60)
        _nota(ouvinte, 1, e0, 'NF-1', [11])
        _nota(ouvinte, 2, e1, 'NF-2', [21, 22])
        esperar(lambda: set(_itens(ouvinte, e1)) == {21, 22} and _itens(ouvinte, e0), 60)
        _chaves(ouvinte, [e0])
        ouvinte.erp.executar('DELETE FROM {NOTA_ITENS} WHERE {ID} = 21')
        _nota(ouvinte, 3, e0, 'NF-3', [31])
        esperar(lambda: set(_itens(ouvinte, e0)) == {11, 31}, 60)
        esperar(lambda: (_status(ouvinte).get('quarentena') or {}).get('total') == 1, 60)
        esperar(lambda: not arquivos_do_spool(ouvinte), 30)
    finally:
        parar(processo)
    assert 'remoção(ões) para a QUARENTENA' in ouvinte.saida()
    assert set(_itens(ouvinte, e1)) == {21, 22}  # ainda lá: sem a chave, nada a fazer
    _chaves(ouvinte, [e0, e1])
    codigo, saida = ouvinte.rodar('--reenviar-quarentena')
    assert codigo == 0, saida
    assert set(_itens(ouvinte, e1)) == {22}


@pytest.mark.mariadb
def test_cabecalho_listado_como_se_fosse_a_tabela_das_linhas_e_recusado(
    tmp_path,
    mariadb_binlog,  # noqa: F811
    ambiente_contextia,
    chave_contextia,
):
    # `base_tables: ["NOTA_ITENS", "NOTAS"]` (a forma que os docs pediam): o id da
    # nota ia ao spool como key de item, e a nota alterada relia o item de mesmo
    # número. O catálogo não diz de que tabela vem a key da view; a amostra diz.
    banco = mariadb_binlog.banco_de_teste()
    ouvinte = _preparar(tmp_path, banco, ambiente_contextia, chave_contextia, 'binlog')
    e0, e1 = ouvinte.erp.escopos
    _nota(ouvinte, 1, e0, 'NF-1', [11, 12, 13])
    _nota(ouvinte, 2, e1, 'NF-2', [21, 22])
    with open(ouvinte.mapa, encoding='utf-8') as arquivo:
        mapa = json.load(arquivo)
    mapa['datasets'][0]['base_tables'] = ['NOTA_ITENS', 'NOTAS']
    with open(ouvinte.mapa, 'w', encoding='utf-8') as arquivo:
        json.dump(mapa, arquivo)
    codigo, saida = ouvinte.rodar('--once', timeout=120)
    assert codigo == 2, saida
    assert 'NOTAS está em `base_tables` pela key ID, mas as linhas dela não são' in saida, saida
    assert '"dataset_column"' in saida
