"""
O conjunto de chaves entregue no disco e a diferença em streaming
(contextia_sync/captura/conjuntos.py), com arquivos de verdade:

  * cada tipo de chave volta do disco igual, e na ordem da regra;
  * a diferença andando nas duas sequências da o mesmo que a diferença de
    conjuntos, em milhares de casos sorteados;
  * arquivo de outra identidade, torto, sem a linha de fim: recusado (quem lê
    recomeça da origem, sem remover nada);
  * sequência da origem fora de ordem ou com chave repetida: recusada no meio.
"""

import datetime
import decimal
import os
import random
import uuid

import pytest

from contextia_sync.arquivos import GravacaoAtomica
from contextia_sync.captura import conjuntos
from contextia_sync.captura.conjuntos import (
    Contagem,
    ErroConjunto,
    ErroConjuntoGuardado,
    Identidade,
)

IDENTIDADE = Identidade('titulos', 'V_TITULOS', 'ID', 'EMPRESA_ID')


def gravar(caminho, chaves, escopo='297', identidade=IDENTIDADE):
    os.makedirs(os.path.dirname(caminho), exist_ok=True)
    gravacao = GravacaoAtomica(caminho)
    for linha in conjuntos.linhas_do_arquivo(chaves, identidade.cabecalho(escopo)):
        gravacao.escrever(linha)
    gravacao.trocar()


VALORES = [
    -5,
    0,
    7,
    2**70,
    decimal.Decimal('10.50'),
    1.25,
    'a',
    'B',
    'ç',
    'linha\ncom quebra',
    'aspas "e" \\barra',
    '',
    b'\x00\xff',
    datetime.datetime(2026, 9, 2, 10, 5, 0, 123),
    datetime.datetime(2026, 9, 2, 10, 5, tzinfo=datetime.timezone.utc),
    datetime.date(2026, 9, 2),
    uuid.UUID('12345678-1234-5678-1234-567812345678'),
]


@pytest.mark.parametrize('valor', VALORES, ids=[repr(v)[:30] for v in VALORES])
def test_cada_tipo_de_chave_volta_do_disco_igual(valor):
    volta = conjuntos.decodificar(conjuntos.codificar(valor))
    assert volta == valor and type(volta) is type(valor)
    assert '\n' not in conjuntos.codificar(valor)


def test_o_arquivo_volta_em_ordem_e_inteiro(tmp_path):
    chaves = sorted([3, 1, 2, 'b', 'A', decimal.Decimal('1.5')], key=conjuntos.ordem)
    caminho = conjuntos.caminho(str(tmp_path), 'titulos', '297')
    gravar(caminho, chaves)
    assert list(conjuntos.abrir_arquivo(caminho, IDENTIDADE, '297')) == chaves
    assert conjuntos.existentes(str(tmp_path), 'titulos') == {'297': caminho}


def test_escopo_com_barra_e_espaco_vira_nome_de_arquivo_e_volta(tmp_path):
    for escopo in ('01/02', 'filial 9', '..', None):
        gravar(conjuntos.caminho(str(tmp_path), 'd', escopo), [1], escopo)
    assert set(conjuntos.existentes(str(tmp_path), 'd')) == {'01/02', 'filial 9', '..', None}
    assert os.listdir(str(tmp_path)) == ['d']


def test_arquivo_de_outra_identidade_e_recusado_antes_de_comparar(tmp_path):
    caminho = str(tmp_path / 'c.chaves')
    gravar(caminho, [1, 2], identidade=Identidade('titulos', 'V_TITULOS', 'OUTRA', 'EMPRESA_ID'))
    with pytest.raises(ErroConjunto, match='outra identidade'):
        conjuntos.abrir_arquivo(caminho, IDENTIDADE, '297')
    with pytest.raises(ErroConjunto, match='outra identidade'):
        conjuntos.abrir_arquivo(caminho, IDENTIDADE, '298')


@pytest.mark.parametrize(
    'estrago,motivo',
    [
        (lambda t: t.replace('#fim 3\n', ''), 'sem a linha de fim'),
        (lambda t: t.replace('#fim 3', '#fim 4'), 'linha de fim diz'),
        (lambda t: t.replace('i2\n', 'x2\n'), 'etiqueta desconhecida'),
        (lambda t: t.replace('i2\n', 'i9\n'), 'fora de ordem'),
        (lambda t: t[:-3], 'linha de fim'),
    ],
)
def test_arquivo_torto_e_recusado_no_meio(tmp_path, estrago, motivo):
    caminho = str(tmp_path / 'c.chaves')
    gravar(caminho, [1, 2, 3])
    with open(caminho, encoding='utf-8') as arquivo:
        texto = arquivo.read()
    with open(caminho, 'w', encoding='utf-8') as arquivo:
        arquivo.write(estrago(texto))
    with pytest.raises(ErroConjuntoGuardado, match=motivo):
        list(
            conjuntos.comparar(
                conjuntos.abrir_arquivo(caminho, IDENTIDADE, '297'), [1, 2, 3], Contagem()
            )
        )


def test_a_diferenca_em_streaming_e_a_diferenca_de_conjuntos():
    sorteio = random.Random(17)
    for _ in range(2000):
        universo = [sorteio.randrange(60) for _ in range(sorteio.randrange(40))] + [
            chr(65 + sorteio.randrange(50)) for _ in range(sorteio.randrange(10))
        ]
        antes = sorted(
            set(sorteio.sample(universo, min(len(universo), sorteio.randrange(30)))),
            key=conjuntos.ordem,
        )
        agora = sorted(
            set(sorteio.sample(universo, min(len(universo), sorteio.randrange(30)))),
            key=conjuntos.ordem,
        )
        contagem = Contagem()
        diferenca = list(conjuntos.comparar(iter(antes), iter(agora), contagem))
        assert {v for s, v in diferenca if s == '-'} == set(antes) - set(agora)
        assert {v for s, v in diferenca if s == '+'} == set(agora) - set(antes)
        assert (contagem.anteriores, contagem.atuais) == (len(antes), len(agora))
        # O conjunto novo: o anterior menos o que saiu, mais o que entrou = o de agora.
        saiu = [v for s, v in diferenca if s == '-']
        entrou = [v for s, v in diferenca if s == '+']
        assert list(conjuntos.aplicar(antes, entrou, saiu)) == agora
        # So parte entregue: o que nao foi continua de fora (ou dentro).
        assert list(conjuntos.aplicar(antes, entrou[:1], saiu[:1])) == sorted(
            (set(antes) - set(saiu[:1])) | set(entrou[:1]), key=conjuntos.ordem
        )


def test_origem_fora_de_ordem_e_recusada_no_meio_e_a_repetida_vai_uma_vez():
    with pytest.raises(ErroConjunto, match='fora de ordem') as erro:
        list(conjuntos.comparar([1, 2], [1, 3, 2], Contagem()))
    assert not isinstance(erro.value, ErroConjuntoGuardado)
    # A key repetida na view (dentro da empresa) existe: entra uma vez, e a
    # reconciliação do dataset segue (antes, parava até a view ser corrigida).
    assert list(conjuntos.comparar([], ['a', 'a', 'b'], Contagem())) == [('+', 'a'), ('+', 'b')]
    assert list(conjuntos.comparar(['a'], ['a', 'a'], Contagem())) == []
    # No conjunto entregue (que o ouvinte grava) a repetida é defeito: recusada.
    with pytest.raises(ErroConjuntoGuardado, match='repetida'):
        list(conjuntos.comparar(['a', 'a'], [], Contagem()))
    # Collation sem caixa (a ordem de um banco que o ORDER BY nao domou): recusada.
    with pytest.raises(ErroConjunto, match='collation'):
        list(conjuntos.comparar([], ['a', 'B', 'c'], Contagem()))
    # Tipos que nao se comparam (datetime com e sem fuso na mesma coluna): recusada.
    with pytest.raises(ErroConjunto):
        list(
            conjuntos.comparar(
                [],
                [
                    datetime.datetime(2026, 1, 1),
                    datetime.datetime(2026, 1, 2, tzinfo=datetime.timezone.utc),
                ],
                Contagem(),
            )
        )


# ---------------------------------------------------------------------------
# o diario da coluna
# ---------------------------------------------------------------------------


def test_diario_volta_em_ordem_sem_repetidas_e_ignora_a_linha_pela_metade(tmp_path):
    diario = conjuntos.caminho_diario(str(tmp_path), 'titulos', '297')
    conjuntos.anotar_diario(diario, IDENTIDADE, '297', [9, 3, 'x', 3])
    conjuntos.anotar_diario(diario, IDENTIDADE, '297', [1, 9])
    with open(diario, 'a', encoding='utf-8') as saida:
        saida.write('i77')  # kill -9 no meio do write
    assert conjuntos.ler_diario(diario, IDENTIDADE, '297') == [1, 3, 9, 'x']
    # Outra identidade (a `key` mudou): largado inteiro, nunca vira remocao.
    outra = Identidade('titulos', 'V_TITULOS', 'OUTRO_ID', 'EMPRESA_ID')
    assert conjuntos.ler_diario(diario, outra, '297') == []
    assert conjuntos.ler_diario(diario + '-nenhum', IDENTIDADE, '297') == []
    # O diario nao e um conjunto guardado.
    assert conjuntos.existentes(str(tmp_path), 'titulos') == {}


def test_tomar_o_diario_soma_ao_dobrando_que_sobrou_de_um_crash(tmp_path):
    pasta = str(tmp_path)
    diario = conjuntos.caminho_diario(pasta, 'titulos', '297')
    assert conjuntos.tomar_diario(pasta, 'titulos', '297') is None
    conjuntos.anotar_diario(diario, IDENTIDADE, '297', [5, 1])
    tomado = conjuntos.tomar_diario(pasta, 'titulos', '297')
    assert tomado and not os.path.exists(diario)
    # A coluna segue anotando; o dobrando (crash antes de somar) continua valendo.
    conjuntos.anotar_diario(diario, IDENTIDADE, '297', [3])
    assert conjuntos.tomar_diario(pasta, 'titulos', '297') == tomado
    assert conjuntos.ler_diario(tomado, IDENTIDADE, '297') == [1, 3, 5]
    assert not os.path.exists(diario)


def test_juntar_o_conjunto_e_o_diario_conta_so_o_que_faltava():
    contador = [0]
    juntas = list(conjuntos.juntar(iter([1, 4, 6]), [0, 4, 5, 9], contador))
    assert juntas == [0, 1, 4, 5, 6, 9] and contador == [3]
    contador = [0]
    assert list(conjuntos.juntar(iter([1, 2]), [1, 2], contador)) == [1, 2]
    assert contador == [0]
    # Juntas seguem a regra de ordem: a comparacao as aceita como o conjunto entregue.
    diferenca = list(
        conjuntos.comparar(conjuntos.juntar(iter([1, 4]), [2]), iter([1, 4]), Contagem())
    )
    assert diferenca == [('-', 2)]


def test_chaves_tentadas_por_empresa_numa_listagem_so(tmp_path):
    """
    Os arquivos das chaves de envios não confirmados, por empresa: o nome com
    caractere especial volta igual, o dataset sem recorte é None, e o conjunto,
    o diário e o temporário ao lado não entram.
    """
    pasta = str(tmp_path)
    esquisita = 'filial/01 ç'
    arquivos = {
        ('1', 'a'): conjuntos.caminho_tentadas(pasta, 'titulos', '1', '%020d-7' % 2),
        ('1', 'b'): conjuntos.caminho_tentadas(pasta, 'titulos', '1', '%020d-7' % 1),
        (esquisita, 'a'): conjuntos.caminho_tentadas(pasta, 'titulos', esquisita, '9-1'),
        (None, 'a'): conjuntos.caminho_tentadas(pasta, 'titulos', None, '3-1'),
    }
    for (escopo, _), arquivo in arquivos.items():
        conjuntos.anotar_diario(arquivo, IDENTIDADE, escopo, [1, 2])
    conjuntos.anotar_diario(conjuntos.caminho_diario(pasta, 'titulos', '1'), IDENTIDADE, '1', [3])
    with open(conjuntos.caminho(pasta, 'titulos', '1'), 'w') as arquivo:
        arquivo.write('')
    with open(os.path.join(pasta, 'titulos', '.e-1.chaves.tmp'), 'w') as arquivo:
        arquivo.write('')
    achados = conjuntos.tentadas(pasta, 'titulos')
    # Do envio mais velho ao mais novo (o número do envio tem largura fixa).
    assert achados == {
        '1': [arquivos[('1', 'b')], arquivos[('1', 'a')]],
        esquisita: [arquivos[(esquisita, 'a')]],
        None: [arquivos[(None, 'a')]],
    }
    assert conjuntos.ler_diario(arquivos[(esquisita, 'a')], IDENTIDADE, esquisita) == [1, 2]
    assert conjuntos.tentadas(pasta, 'outro') == {}
