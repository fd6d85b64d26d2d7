"""
O decodificador do pgoutput (captura/pgoutput.py) com bytes GRAVADOS.

As mensagens abaixo saíram de `pg_logical_slot_peek_binary_changes(...,
'proto_version', '1', 'publication_names', ...)` no PostgreSQL privado dos
testes (tests/apoio/postgres_logico.py), uma vez, com este roteiro:

    CREATE TABLE public.pedido (id int4 PRIMARY KEY, empresa text, obs text, grande text);
    ALTER TABLE public.pedido ALTER COLUMN grande SET STORAGE EXTERNAL;
    CREATE TABLE public.item (id int8, empresa text, nome text);
    ALTER TABLE public.item REPLICA IDENTITY FULL;
    INSERT INTO public.pedido VALUES (1, 'ACME', NULL, repeat('x', 5000));
    UPDATE public.pedido SET id = 2, obs = 'nova' WHERE id = 1;   -- K + N, TOAST 'u'
    INSERT INTO public.item VALUES (7, 'ACME', 'pá');
    UPDATE public.item SET empresa = 'BETA' WHERE id = 7;         -- O + N
    DELETE FROM public.pedido WHERE id = 2;                        -- K
    TRUNCATE public.item;

Cada transação é Begin ... Commit. Nada aqui conecta: roda sem PostgreSQL.
"""

import datetime

from contextia_sync.captura import DatasetVivo
from contextia_sync.captura.pgoutput import decodificar, int_para_lsn, lsn_para_int
from contextia_sync.captura.slot_mudancas import LidoDoSlot

BEGIN = '42000000000194d4780003050c28fe2cde000002da'
RELACAO_PEDIDO = (
    '52000040017075626c69630070656469646f006400040169640000000017ffffffff00656d70726573'
    '610000000019ffffffff006f62730000000019ffffffff006772616e64650000000019ffffffff'
)
# A coluna `grande` (5000 'x') gravada inteira: o prefixo e o valor repetido.
INSERT_PEDIDO = '49000040014e0004740000000131740000000441434d456e7400001388' + '78' * 5000
COMMIT = '4300000000000194d478000000000194d4a80003050c28fe2cde'
UPDATE_COM_KEY = (
    '55000040014b00047400000001316e6e6e4e0004740000000132740000000441434d4574000000046e6f766175'
)
RELACAO_ITEM = (
    '52000040087075626c6963006974656d006600030169640000000014ffffffff01656d70726573610000'
    '000019ffffffff016e6f6d650000000019ffffffff'
)
INSERT_ITEM = '49000040084e0003740000000137740000000441434d45740000000370c3a1'
UPDATE_COM_LINHA_ANTIGA = (
    '55000040084f0003740000000137740000000441434d45740000000370c3a14e00037400000001377400'
    '00000442455441740000000370c3a1'
)
DELETE_COM_KEY = '44000040014b00047400000001326e6e6e'
TRUNCATE = '54000000010000004008'

# (lsn, mensagem) na ordem do peek: seis transações.
GRAVADO = [
    ('0/194D380', BEGIN),
    ('0/194D380', RELACAO_PEDIDO),
    ('0/194D380', INSERT_PEDIDO),
    ('0/194D4A8', COMMIT),
    ('0/194D4E0', '42000000000194d5900003050c28fe5a89000002db'),
    ('0/194D4E0', UPDATE_COM_KEY),
    ('0/194D5C0', '4300000000000194d590000000000194d5c00003050c28fe5a89'),
    ('0/194D5C0', '42000000000194d6080003050c28fe8f67000002dc'),
    ('0/194D5C0', RELACAO_ITEM),
    ('0/194D5C0', INSERT_ITEM),
    ('0/194D638', '4300000000000194d608000000000194d6380003050c28fe8f67'),
    ('0/194D638', '42000000000194d6a80003050c28feeec6000002dd'),
    ('0/194D638', UPDATE_COM_LINHA_ANTIGA),
    ('0/194D6D8', '4300000000000194d6a8000000000194d6d80003050c28feeec6'),
    ('0/194D6D8', '42000000000194d7c00003050c28ff6a0f000002de'),
    ('0/194D6D8', DELETE_COM_KEY),
    ('0/194D7F0', '4300000000000194d7c0000000000194d7f00003050c28ff6a0f'),
    ('0/194E038', '42000000000194e0680003050c28ffc07e000002df'),
    ('0/194E038', RELACAO_ITEM),
    ('0/194E038', TRUNCATE),
    ('0/194E178', '4300000000000194e068000000000194e1780003050c28ffc07e'),
]

PEDIDO, ITEM = 16385, 16392  # os oids das duas tabelas no banco gravado


def _m(texto):
    return decodificar(bytes.fromhex(texto))


def test_begin_so_o_tipo():
    mensagem = _m(BEGIN)
    assert mensagem.tipo == 'B'
    assert (mensagem.relacao, mensagem.imagens, mensagem.relacao_nova) == (0, [], None)


def test_relation_traz_esquema_tabela_e_colunas_com_o_tipo():
    mensagem = _m(RELACAO_PEDIDO)
    assert mensagem.tipo == 'R' and mensagem.relacao == PEDIDO
    relacao = mensagem.relacao_nova
    assert (relacao.esquema, relacao.tabela) == ('public', 'pedido')
    assert relacao.colunas == [('id', 23), ('empresa', 25), ('obs', 25), ('grande', 25)]
    item = _m(RELACAO_ITEM).relacao_nova
    assert (item.tabela, item.colunas) == ('item', [('id', 20), ('empresa', 25), ('nome', 25)])


def test_insert_com_null_e_valor_longo():
    mensagem = _m(INSERT_PEDIDO)
    assert (mensagem.tipo, mensagem.relacao) == ('I', PEDIDO)
    assert mensagem.imagens == [['1', 'ACME', None, 'x' * 5000]]
    # Texto em UTF-8 (o 'á' tem dois bytes).
    assert _m(INSERT_ITEM).imagens == [['7', 'ACME', 'pá']]


def test_update_com_key_antiga_e_toast_sem_mudanca():
    mensagem = _m(UPDATE_COM_KEY)
    assert (mensagem.tipo, mensagem.relacao) == ('U', PEDIDO)
    # K: só a key antiga (o resto 'n'); N: a linha nova, `grande` em TOAST sem mudança ('u').
    assert mensagem.imagens == [['1', None, None, None], ['2', 'ACME', 'nova', None]]


def test_update_com_a_linha_antiga_inteira():
    mensagem = _m(UPDATE_COM_LINHA_ANTIGA)
    assert (mensagem.tipo, mensagem.relacao) == ('U', ITEM)
    assert mensagem.imagens == [['7', 'ACME', 'pá'], ['7', 'BETA', 'pá']]


def test_delete_com_key():
    mensagem = _m(DELETE_COM_KEY)
    assert (mensagem.tipo, mensagem.relacao) == ('D', PEDIDO)
    assert mensagem.imagens == [['2', None, None, None]]


def test_truncate_traz_os_oids():
    mensagem = _m(TRUNCATE)
    assert mensagem.tipo == 'T' and mensagem.truncadas == [ITEM]


def test_commit_traz_a_hora():
    quando = datetime.datetime.fromtimestamp(_m(COMMIT).quando, datetime.timezone.utc)
    esperado = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(
        microseconds=0x0003050C28FE2CDE
    )
    assert abs((quando - esperado).total_seconds()) < 1e-3
    assert quando.year >= 2024


def test_outra_mensagem_so_o_tipo():
    # 'O' (Origin): fora do que a captura usa; decodifica sem ler o corpo.
    assert _m('4f' + '00' * 8 + '6f7574726f00').tipo == 'O'


def test_lsn_ida_e_volta():
    assert lsn_para_int('0/194D380') == 0x194D380
    assert lsn_para_int('16/B374D848') == (0x16 << 32) | 0xB374D848
    assert int_para_lsn(lsn_para_int('16/B374D848')) == '16/B374D848'
    assert lsn_para_int(None) == 0 and lsn_para_int('') == 0


def test_o_peek_gravado_vira_transacoes_de_mudancas():
    """A junção em transações (captura/slot_mudancas.py) sobre o mesmo peek gravado."""
    pedidos = DatasetVivo('pedidos', {'source_object': 'public.pedido'}, 'x', 'id', 'empresa')
    itens = DatasetVivo('itens', {'source_object': 'public.item'}, 'x', 'id', 'empresa')
    lido = LidoDoSlot({('public', 'pedido'): [pedidos], ('public', 'item'): [itens]})
    for lsn, texto in GRAVADO:
        lido.receber(lsn, _m(texto))
    assert lido.linhas == len(GRAVADO)
    assert [lsn for lsn, _ in lido.transacoes] == [
        lsn_para_int(x)
        for x in ('0/194D4A8', '0/194D5C0', '0/194D638', '0/194D6D8', '0/194D7F0', '0/194E178')
    ]
    resumo = [
        [(m.dataset, m.chave, m.evento, m.escopos) for m in mudancas]
        for _, mudancas in lido.transacoes
    ]
    assert resumo == [
        [('pedidos', 1, 'insert', ['ACME'])],
        # A key antiga (1) e a nova (2): as duas linhas mudaram. A imagem K não traz
        # a empresa (texto_escopo(None) == ''): é o que a conferência da REPLICA
        # IDENTITY recusa na subida (slot_banco.conferir_tabelas).
        [('pedidos', 1, 'update', ['']), ('pedidos', 2, 'update', ['ACME'])],
        [('itens', 7, 'insert', ['ACME'])],
        # A linha que mudou de empresa sai da antiga e entra na nova.
        [('itens', 7, 'update', ['ACME', 'BETA'])],
        [('pedidos', 2, 'delete', [''])],
        [],
    ]
    assert lido.truncadas == {'itens'}
    assert lido.ultimo_ts == _m(GRAVADO[-1][1]).quando
