"""contextia_sync/captura/marca_agua.py: as regras, o texto no estado e as chegadas atrasadas."""

import datetime
import decimal
import json

import pytest

from contextia_sync.captura import marca_agua as m
from contextia_sync.captura.casos_marca import CASOS
from contextia_sync.estado.janela import JanelaEntregue

DT = datetime.datetime(2026, 9, 2, 10, 0, 0)
UTC = datetime.timezone.utc


@pytest.mark.parametrize(
    'rotulo, funcao, args, nomeados, esperado', CASOS, ids=[c[0] for c in CASOS]
)
def test_a_tabela_de_casos_do_autoteste(rotulo, funcao, args, nomeados, esperado):
    # A mesma tabela roda no `ouvinte.py --autoteste` (python3 -S).
    assert getattr(m, funcao)(*args, **nomeados) == esperado, rotulo


@pytest.mark.parametrize(
    'valor',
    [
        DT,
        DT.replace(microsecond=123456),
        DT.replace(tzinfo=UTC),
        datetime.date(2026, 9, 2),
        918273,
        decimal.Decimal('12.50'),
        'opaco-ABC',
    ],
)
def test_ida_e_volta_pelo_json_do_estado(valor):
    texto = json.loads(json.dumps(m.texto_marca(valor)))
    assert m.como_valor(texto) == valor


def test_decimal_inteiro_vira_int_no_estado():
    assert m.texto_marca(decimal.Decimal('297')) == 297


def test_recuar():
    assert m.recuar(DT, 180) == DT - datetime.timedelta(seconds=180)
    assert m.recuar('2026-09-02 10:00:00', 60) == DT - datetime.timedelta(seconds=60)
    assert m.recuar(datetime.date(2026, 9, 2), 180) == datetime.date(2026, 9, 1)
    assert m.recuar(918273, 180) == 918273
    assert m.recuar('opaco', 180) == 'opaco'


def test_avancar_pelo_maior_lido_e_nunca_para_tras():
    linhas = [{'A': DT}, {'A': DT + datetime.timedelta(minutes=5)}, {'A': None}]
    assert m.avancar(linhas, 'A', None) == DT + datetime.timedelta(minutes=5)
    assert m.avancar(linhas, 'A', '2027-01-01T00:00:00') == '2027-01-01T00:00:00'
    assert m.avancar([], 'A', DT) == DT


def test_avancar_com_texto_do_sqlite():
    # SQLite devolve TEXT; o texto e comparado como data, nao como string.
    linhas = [{'A': '2026-09-02 10:05:00'}, {'A': '2026-09-02 09:00:00'}]
    assert m.avancar(linhas, 'A', DT) == '2026-09-02 10:05:00'


def test_avancar_com_e_sem_fuso_nao_explode():
    linhas = [{'A': DT.replace(tzinfo=UTC) + datetime.timedelta(hours=1)}]
    assert m.avancar(linhas, 'A', DT) == linhas[0]['A']


def test_identidade_e_estavel_entre_texto_e_datetime():
    a = m.identidade({'ID': 1, 'A': DT}, 'A', 'ID')
    b = m.identidade({'ID': 1, 'A': '2026-09-02 10:00:00'}, 'A', 'ID')
    assert a == b
    assert a != m.identidade({'ID': 1, 'A': DT + datetime.timedelta(seconds=1)}, 'A', 'ID')
    # Sem key, o conteudo identifica.
    assert m.identidade({'X': 1, 'A': DT}, 'A') != m.identidade({'X': 2, 'A': DT}, 'A')


def test_contar_atrasadas_ciclo_a_ciclo():
    """Simula três ciclos: só a linha que chegou atrás da marca conta, uma vez."""
    vistos = {}
    c1 = [{'ID': 1, 'A': DT}]
    q, maior, novas = m.contar_atrasadas(c1, 'A', 'ID', DT - datetime.timedelta(minutes=1), vistos)
    assert (q, maior) == (0, None)
    vistos.update(novas)
    marca = m.avancar(c1, 'A', None)
    # Ciclo 2: rele a linha 1 (folga) e ve a 2, comitada tarde com valor antigo.
    c2 = c1 + [{'ID': 2, 'A': DT - datetime.timedelta(seconds=150)}]
    q, maior, novas = m.contar_atrasadas(c2, 'A', 'ID', marca, vistos)
    assert (q, maior) == (1, 150.0)
    vistos.update(novas)
    # Ciclo 3: as duas de novo, nada conta.
    assert m.contar_atrasadas(c2, 'A', 'ID', marca, vistos)[0] == 0
    assert m.atraso_preocupante(150.0, marca, 180) is True


def test_podar_esquece_o_que_a_leitura_nao_traz_mais(tmp_path):
    janela = JanelaEntregue(str(tmp_path / 'janelas' / 'x.sqlite3'))
    janela.juntar([('a', '2026-09-02T09:50:00'), ('b', '2026-09-02T09:59:00')])
    assert janela.podar(m.recuar(DT, 180)) == 1
    assert list(janela.itens()) == [('b', '2026-09-02T09:59:00')]


def test_data_sem_hora_mede_em_dias_e_numero_nao_mede():
    assert m.margem_efetiva(datetime.date(2026, 9, 2), 180) == 86400.0
    assert m.margem_efetiva(5, 180) is None
    assert m.atraso_em_segundos(datetime.date(2026, 9, 2), datetime.date(2026, 9, 1)) == 86400
    assert m.atraso_preocupante(10**9, 5, 180) is False
