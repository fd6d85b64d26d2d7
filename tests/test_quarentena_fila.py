"""
A fila em diretório por baixo da quarentena (seed 004), no sistema de arquivos
de verdade: nomes com sequência de 12 dígitos, a mesma identidade substitui,
limites com recusa alta, nomes seguros para qualquer valor de key, e a trava de
trabalho que separa "tomado por um processo vivo" de "destino desconhecido".
"""

import json
import os

import pytest

from contextia_sync.fila.diretorio import (
    PARADO,
    PRONTO,
    TOMADO,
    ErroFilaInacessivel,
    ErroFilaOcupada,
    FilaEmDiretorio,
)
from contextia_sync.fila.quarentena import ErroQuarentenaCheia, Quarentena, identidade
from contextia_sync.erros import ErroConfiguracao
from tests.apoio.log import coletar_log


def test_sequencia_com_zeros_da_a_ordem_de_chegada(tmp_path):
    quarentena = Quarentena(tmp_path / 'q')
    for i in range(12):
        quarentena.guardar('ds', '1', 'ID', {'ID': i}, 'motivo %d' % i)
    nomes = sorted(os.listdir(quarentena.pasta / PARADO))
    assert [n[:12] for n in nomes] == ['%012d' % i for i in range(1, 13)]
    assert [item.chave_valor for item in quarentena.itens()] == list(range(12))


def test_mesmo_registro_substitui_o_arquivo(tmp_path):
    quarentena = Quarentena(tmp_path / 'q')
    primeiro = quarentena.guardar('ds', 40, 'ID', {'ID': 7, 'V': 'a'}, 'HTTP 422: um')
    # Escopo 40 (int do ERP) e '40' sao a mesma empresa.
    segundo = quarentena.guardar('ds', '40', 'ID', {'ID': 7, 'V': 'b'}, 'HTTP 422: dois')
    assert primeiro == segundo and quarentena.contar() == 1
    [item] = quarentena.itens()
    assert (item.vezes, item.motivo, item.registro['V']) == (2, 'HTTP 422: dois', 'b')
    # Outro escopo, ou a key nula, sao outros registros.
    quarentena.guardar('ds', '41', 'ID', {'ID': 7}, 'x')
    quarentena.guardar('ds', '40', 'ID', {'ID': None, 'V': 1}, 'x')
    quarentena.guardar('ds', '40', 'ID', {'ID': None, 'V': 2}, 'x')
    assert quarentena.contar() == 4


def test_nome_seguro_para_qualquer_key_e_o_valor_verdadeiro_dentro(tmp_path):
    quarentena = Quarentena(tmp_path / 'q')
    valor = '../../etc/passwd ção:*?'
    caminho = quarentena.guardar('ds', 'empresa/../x', 'COD', {'COD': valor}, 'x')
    assert caminho.parent == quarentena.pasta / PARADO
    assert '/' not in caminho.name[:-5] and not caminho.name.startswith('.')
    with open(caminho, encoding='utf-8') as f:
        guardado = json.load(f)
    assert guardado['chave_valor'] == valor and guardado['escopo'] == 'empresa/../x'
    assert guardado['identidade'] == identidade('ds', 'empresa/../x', 'COD', {'COD': valor})


def test_limite_de_itens_e_de_bytes_recusa_alto(tmp_path):
    quarentena = Quarentena(tmp_path / 'q', maximo_itens=2)
    quarentena.guardar('ds', '1', 'ID', {'ID': 1}, 'x')
    quarentena.guardar('ds', '1', 'ID', {'ID': 2}, 'x')
    with pytest.raises(ErroQuarentenaCheia) as cheia:
        quarentena.guardar('ds', '1', 'ID', {'ID': 3}, 'HTTP 413: grande')
    texto = str(cheia.value)
    assert 'quarentena cheia' in texto and 'ID=3' in texto and 'limite 2 registros' in texto
    assert '--reenviar-quarentena' in texto and 'a marca não avança' in texto
    # Substituir um que ja esta la nao cresce a contagem: cabe mesmo cheia.
    quarentena.guardar('ds', '1', 'ID', {'ID': 2, 'V': 'novo'}, 'x')

    pequena = Quarentena(tmp_path / 'p', maximo_bytes=2000)
    with pytest.raises(ErroQuarentenaCheia):
        pequena.guardar('ds', '1', 'ID', {'ID': 1, 'T': 'z' * 3000}, 'x')
    assert pequena.contar() == 0 and os.listdir(pequena.pasta / PARADO) == []


def test_somente_leitura_nao_cria_nada(tmp_path):
    quarentena = Quarentena(tmp_path / 'nao-existe', somente_leitura=True)
    assert quarentena.contar() == 0 and quarentena.por_dataset() == {}
    assert not (tmp_path / 'nao-existe').exists()


def test_pasta_que_nao_se_escreve_e_erro_de_configuracao(tmp_path):
    arquivo = tmp_path / 'arquivo'
    arquivo.write_text('não é pasta')
    with pytest.raises(ErroFilaInacessivel) as erro:
        Quarentena(arquivo / 'q')
    assert isinstance(erro.value, ErroConfiguracao) and 'permissão de escrita' in str(erro.value)


def test_tomado_por_processo_vivo_nao_e_devolvido(tmp_path):
    fila = FilaEmDiretorio(tmp_path / 'f', maximo_itens=10, maximo_bytes=10**6)
    fila.por('a', {'n': 1})
    fila.por('b', {'n': 2})
    with fila.trabalhando():
        tomado = fila.proximo(PRONTO)
        assert tomado is not None and tomado.estado == TOMADO
        # Outro "processo" (outra abertura, outra descricao de arquivo) abre agora.
        with coletar_log() as avisos:
            FilaEmDiretorio(tmp_path / 'f', maximo_itens=10, maximo_bytes=10**6)
        assert avisos == [] and fila.contar(TOMADO) == 1
        with pytest.raises(ErroFilaOcupada):
            with FilaEmDiretorio(tmp_path / 'f', maximo_itens=10, maximo_bytes=10**6).trabalhando():
                pass
        fila.devolver(tomado, PARADO, {'n': 1, 'nota': 'recusado'})
    assert [i.chave for i in fila.itens(PARADO)] == ['a']
    assert fila.itens(PARADO)[0].ler() == {'n': 1, 'nota': 'recusado'}
    assert [i.chave for i in fila.itens(PRONTO)] == ['b']


def test_tomar_fora_do_trabalho_e_recusado(tmp_path):
    fila = FilaEmDiretorio(tmp_path / 'f', maximo_itens=10, maximo_bytes=10**6)
    fila.por('a', {'n': 1})
    with pytest.raises(RuntimeError, match='trabalhando'):
        fila.tomar(fila.itens(PRONTO)[0])


def test_chave_invalida_e_recusada(tmp_path):
    fila = FilaEmDiretorio(tmp_path / 'f', maximo_itens=10, maximo_bytes=10**6)
    for ruim in ('', '.', '..', '.oculto', 'a/b', 'x' * 121, 'fim-'):
        with pytest.raises(ValueError):
            fila.por(ruim, {'n': 1})
