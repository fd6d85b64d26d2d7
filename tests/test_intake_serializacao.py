"""Serialização, nomes, mascara e assinatura: as partes puras do cliente."""

import base64
import datetime
import decimal
import hashlib
import hmac
import json
import uuid

import pytest

from contextia_sync.intake.cliente import gerar_sync, normalizar_dataset, verificar_assinatura
from contextia_sync.intake.serializacao import (
    ErroSerializacao,
    json_canonico,
    serializar_registro,
    valor_json,
)
from contextia_sync.intake.transporte import mascarar, mascarar_chave


@pytest.mark.parametrize(
    'valor, esperado',
    [
        (decimal.Decimal('1234.50'), '1234.50'),  # escala mantida
        (decimal.Decimal('0.10'), '0.10'),
        (decimal.Decimal('12345678901234567890.123456789'), '12345678901234567890.123456789'),
        (decimal.Decimal('1E+3'), '1000'),  # sem expoente
        (decimal.Decimal('-0.01'), '-0.01'),
        (datetime.datetime(2026, 9, 2, 10, 5, 0), '2026-09-02T10:05:00'),
        (
            datetime.datetime(2026, 9, 2, 10, 5, 0, 123456, tzinfo=datetime.timezone.utc),
            '2026-09-02T10:05:00.123456+00:00',
        ),
        (datetime.date(2026, 9, 2), '2026-09-02'),
        (datetime.time(23, 59, 1), '23:59:01'),
        (b'\x00\xffdado', base64.b64encode(b'\x00\xffdado').decode()),
        (uuid.UUID('12345678-1234-5678-1234-567812345678'), '12345678-1234-5678-1234-567812345678'),
        (True, True),
        (None, None),
        (7, 7),
        (2**70, 2**70),
        (1.5, 1.5),
        ('á', 'á'),
    ],
)
def test_valor_json_exato(valor, esperado):
    assert valor_json(valor, 'COL') == esperado


def test_dinheiro_nao_perde_centavo_no_caminho_ate_o_json():
    registro = serializar_registro({'VALOR': decimal.Decimal('9999999999999.99')})
    texto = json.dumps(registro)
    assert decimal.Decimal(json.loads(texto)['VALOR']) == decimal.Decimal('9999999999999.99')


@pytest.mark.parametrize(
    'ruim',
    [
        float('nan'),
        float('inf'),
        float('-inf'),
        decimal.Decimal('NaN'),
        decimal.Decimal('Infinity'),
    ],
)
def test_nan_e_infinito_recusados_nomeando_a_coluna(ruim):
    with pytest.raises(ErroSerializacao, match="'SALDO'"):
        serializar_registro({'ID': 1, 'SALDO': ruim})


def test_tipo_desconhecido_recusado_com_a_correcao():
    with pytest.raises(ErroSerializacao, match="'OBJ'.*Converta na view"):
        serializar_registro({'OBJ': object()})


def test_serializacao_deterministica():
    a = {'B': decimal.Decimal('1.10'), 'A': datetime.date(2026, 1, 1)}
    b = {'A': datetime.date(2026, 1, 1), 'B': decimal.Decimal('1.10')}
    assert json_canonico(serializar_registro(a)) == json_canonico(serializar_registro(b))
    assert json_canonico(serializar_registro(a)) == '{"A":"2026-01-01","B":"1.10"}'


@pytest.mark.parametrize(
    'nome, esperado',
    [
        ('Títulos a Receber', 'titulos_a_receber'),
        ('titulos_a_receber', 'titulos_a_receber'),
        ('  Contas-a-Pagar (2026) ', 'contas_a_pagar_2026'),
        ('AÇÃO/ÍNDICE', 'acao_indice'),
    ],
)
def test_normalizar_dataset(nome, esperado):
    assert normalizar_dataset(nome) == esperado


def test_normalizar_dataset_vazio_recusa():
    with pytest.raises(ValueError, match='vazio'):
        normalizar_dataset('***')


def test_gerar_sync_unico_e_ordenavel():
    a, b = gerar_sync(), gerar_sync()
    assert a != b and a[:8].isdigit()


def test_mascara_nunca_mostra_a_chave():
    chave = 'ctx_mR-BW77KgEwdR3NDBuOJHHH9rNvyqyTtsikoqubADSQ'
    assert mascarar_chave(chave) == 'ctx_mR-B...'
    texto = mascarar('falhou com %s no header' % chave)
    assert chave not in texto and 'ctx_mR-B...' in texto
    assert 'segredo-admin' not in mascarar('token segredo-admin', 'segredo-admin')


def test_verificar_assinatura():
    corpo = b'{"evento":"teste"}'
    cabecalho = 'sha256=' + hmac.new(b'whsec_abc', corpo, hashlib.sha256).hexdigest()
    assert verificar_assinatura('whsec_abc', corpo, cabecalho)
    assert not verificar_assinatura('whsec_abc', corpo + b' ', cabecalho)
    assert not verificar_assinatura('outro', corpo, cabecalho)
    assert not verificar_assinatura('whsec_abc', corpo, None)
    assert not verificar_assinatura('whsec_abc', corpo, 'md5=abc')


def test_valor_sem_json_que_o_plano_fixo_deixou_passar_nomeia_a_coluna():
    """O caminho rápido (orjson) não sabe de que coluna veio um `set`: o erro a procura."""
    from contextia_sync.intake.serializacao import corpo_de_registros

    with pytest.raises(ErroSerializacao, match="coluna 'TAGS'"):
        corpo_de_registros([{'ID': 1, 'TAGS': 'a'}, {'ID': 2, 'TAGS': {'x', 'y'}}])


def test_set_do_mysql_e_valor_a_valor_e_texto_e_nativo():
    import sqlalchemy as sa
    from sqlalchemy.dialects import mysql

    from contextia_sync.origem.valores import familia_json

    assert familia_json(mysql.SET('a', 'b'), 'mysql') == 'qualquer'
    assert familia_json(mysql.ENUM('a', 'b'), 'mysql') == 'nativo'
    assert familia_json(sa.String(20), 'postgresql') == 'nativo'
