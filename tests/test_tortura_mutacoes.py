"""
A tortura prova que PODE falhar: numa cópia descartável da árvore do produto,
uma mutação de uma linha que quebra o produto de um jeito que já passou
despercebido -- e o modo curto tem de dizer FALHOU, nomeando o motivo.

Nenhuma chave no código de produção: a mutação é uma substituição de texto
conferida (o trecho tem de aparecer exatamente uma vez; se o código mudou e ele
sumiu, o teste falha dizendo que a mutação ficou velha -- e quem mudou o código
a atualiza, em vez de o teste passar sem mutar nada).

Uma por teste (cada uma com seu banco, seu Contextia local e sua pasta): o
xdist as espalha pelos processos, e o grupo de cada uma (tests/conftest.py)
deixa no máximo duas torturas rodando juntas; ver docs/tortura.md.
"""

import json
import os
import shutil
import subprocess
import sys
from typing import NamedTuple

import pytest

from tests.apoio.bancos import exigir_servidor

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Menos carga que o curto padrao (40 s): cada mutacao aparece bem antes disso.
DURACAO = 30

# O que nao vai para a copia: historico do git, ambiente, caches e saidas.
FORA_DA_COPIA = {
    '.git',
    '.venv',
    '__pycache__',
    '.mypy_cache',
    '.pytest_cache',
    '.ruff_cache',
    'build',
}


class Mutacao(NamedTuple):
    nome: str
    arquivo: str  # relativo a raiz do repositorio
    antes: str  # tem de aparecer EXATAMENTE uma vez
    depois: str
    motivo: str  # o codigo que a tortura tem de dar para reprovar
    descricao: str


MUTACOES = (
    Mutacao(
        'sem_provisionar',
        'contextia_sync/ouvinte/projetos.py',
        '        novos.append((escopo, regra_projeto.nome_de(linha, regra)))\n',
        '        continue  # MUTACAO: empresa nova nunca é provisionada\n',
        'empresa_sem_projeto',
        'o ciclo de projetos pula toda empresa nova: ela só chega na varredura',
    ),
    Mutacao(
        'entregue_ate_varrer',
        'contextia_sync/ouvinte/dados.py',
        '    grande = leitura.situacao is Situacao.GRANDE\n',
        "    if alvo.nome == 'movimentos' and not ctx.estado.varredura_feita_em():  # MUTACAO\n"
        '        leitura = Leitura(Situacao.GRANDE, quantos=len(leitura.upserts))\n'
        '    grande = leitura.situacao is Situacao.GRANDE\n',
        'entregue_sem_rajada',
        'movimentos fica entregue a varredura até a primeira varredura: ao-vivo morto',
    ),
    Mutacao(
        'lote_descartado',
        'contextia_sync/ouvinte/dados.py',
        '        if ctx.config.seco:\n            logger.info(\n'
        "                '%-28s [SECO] escopo=%-8s %s registro(s)',",
        "        if ctx.config.seco or escopo == '3':  # MUTACAO\n            logger.info(\n"
        "                '%-28s [SECO] escopo=%-8s %s registro(s)',",
        'linhas_perdidas',
        'o lote ao vivo da empresa 3 e descartado em silêncio e a marca avança',
    ),
)


# O grupo do xdist (--dist loadgroup, Makefile): cada grupo pesado roda num processo
# so, e as torturas nunca passam de duas ao mesmo tempo nos 2 nucleos.
GRUPOS = ('pesado_a', 'pesado_a', 'pesado_b')


def _copiar_arvore(destino):
    def ignorar(pasta, nomes):
        return [
            n
            for n in nomes
            if n in FORA_DA_COPIA
            or n.endswith('.egg-info')
            or os.path.join(os.path.relpath(pasta, RAIZ), n) == os.path.join('demo', 'saida')
        ]

    shutil.copytree(RAIZ, destino, ignore=ignorar, symlinks=True)


def aplicar(raiz, mutacao):
    """Aplica a mutação na árvore `raiz`; falha o teste se ela não casa mais."""
    caminho = os.path.join(raiz, mutacao.arquivo)
    with open(caminho, encoding='utf-8') as arquivo:
        texto = arquivo.read()
    vezes = texto.count(mutacao.antes)
    if vezes != 1:
        pytest.fail(
            'a mutação %r ficou velha: o trecho %r aparece %d vez(es) em %s (tem de'
            ' ser 1). O código mudou; reescreva a mutação para quebrar o mesmo'
            ' comportamento no código de hoje (%s).'
            % (mutacao.nome, mutacao.antes, vezes, mutacao.arquivo, mutacao.descricao)
        )
    with open(caminho, 'w', encoding='utf-8') as arquivo:
        arquivo.write(texto.replace(mutacao.antes, mutacao.depois))


def test_cada_mutacao_casa_com_o_codigo_de_hoje(tmp_path):
    """Rápido: a mutação que ficou velha e dita antes de gastar minutos de tortura."""
    for mutacao in MUTACOES:
        destino = tmp_path / mutacao.nome
        os.makedirs(destino / os.path.dirname(mutacao.arquivo))
        shutil.copy(os.path.join(RAIZ, mutacao.arquivo), destino / mutacao.arquivo)
        aplicar(str(destino), mutacao)
        assert mutacao.depois in (destino / mutacao.arquivo).read_text(encoding='utf-8')


@pytest.mark.lento
@pytest.mark.postgres
@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    'numero',
    [
        pytest.param(n, id=m.nome, marks=pytest.mark.xdist_group(GRUPOS[n]))
        for n, m in enumerate(MUTACOES)
    ],
)
def test_a_tortura_reprova_cada_mutacao_e_diz_por_que(tmp_path, numero):
    exigir_servidor('postgres')
    mutacao = MUTACOES[numero]
    raiz = str(tmp_path / 'repo')
    _copiar_arvore(raiz)
    aplicar(raiz, mutacao)
    saida = tmp_path / 'numeros.json'
    # A copia e o produto: nada do repositorio de verdade no caminho de import.
    ambiente = dict(os.environ, PYTHONPATH=raiz)
    with open(tmp_path / 'tortura.log', 'w+', encoding='utf-8') as log:
        processo = subprocess.Popen(
            [
                sys.executable,
                os.path.join(raiz, 'bench', 'tortura.py'),
                '--modo=curto',
                '--duracao=%d' % DURACAO,
                '--banco=postgres',
                '--semente=%d' % (5150 + numero),
                '--saida=%s' % saida,
            ],
            cwd=raiz,
            env=ambiente,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            processo.wait(timeout=540)
        except subprocess.TimeoutExpired:
            # SIGTERM primeiro: a tortura limpa o que iniciou (ouvinte, servidor, banco).
            processo.terminate()
            processo.wait(timeout=60)
        log.seek(0)
        texto = log.read()
    relatorio = '--- %s (%s) ---\n%s' % (mutacao.nome, mutacao.descricao, texto[-5000:])
    assert saida.exists(), 'a tortura não gravou os números\n' + relatorio
    dados = json.loads(saida.read_text())
    assert not dados['nao_rodou'] and dados['resultados'], 'a tortura não rodou: %s\n%s' % (
        dados['nao_rodou'],
        relatorio,
    )
    numeros = dados['resultados'][0]
    codigos = sorted({m['codigo'] for m in numeros.get('motivos', [])})
    assert processo.returncode == 1 and not numeros['passou'], (
        'a tortura PASSOU (saída %s) com o produto quebrado: %s\n%s'
        % (processo.returncode, mutacao.descricao, relatorio)
    )
    assert mutacao.motivo in codigos, 'FALHOU, mas sem o motivo %r (motivos: %s)\n%s' % (
        mutacao.motivo,
        codigos,
        relatorio,
    )
    assert 'RESULTADO' in texto and 'FALHOU [%s]' % mutacao.motivo in texto, (
        'a saída não diz FALHOU [%s]\n%s' % (mutacao.motivo, relatorio)
    )
    # Rodou a copia mutada, e nao o repositorio.
    assert numeros.get('raiz') == raiz, 'a tortura rodou o produto de %s, não a copia mutada %s' % (
        numeros.get('raiz'),
        raiz,
    )
