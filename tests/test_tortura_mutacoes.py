"""
A tortura prova que PODE falhar: numa cópia descartável da árvore do produto,
uma mutação de uma linha que quebra o produto de um jeito que já passou
despercebido -- e o modo curto tem de dizer FALHOU, nomeando o motivo.

Nenhuma chave no código de produção: a mutação é uma substituição de texto
conferida (o trecho tem de aparecer exatamente uma vez; se o código mudou e ele
sumiu, o teste falha dizendo que a mutação ficou velha -- e quem mudou o código
a atualiza, em vez de o teste passar sem mutar nada).

As três rodam ao mesmo tempo (cada uma com seu banco, seu Contextia local e sua
pasta); ver docs/tortura.md.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from typing import NamedTuple

import pytest

from tests.apoio.bancos import exigir_servidor

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Menos carga que o curto padrao (40 s): cada mutacao aparece bem antes disso.
DURACAO = 30
# Quantas rodam ao mesmo tempo. Medido em 2 nucleos carregados: as tres juntas
# levaram 3,6 a 4,3 min, uma a uma 5,3 a 6,3 min -- mas no `make test` o outro
# processo do pytest pode rodar a tortura curta ao lado, e quatro torturas
# juntas levaram a curta a mais de 3 min. Uma de cada vez deixa a curta no
# tempo dela (76 a 112 s com uma mutacao rodando ao lado).
AO_MESMO_TEMPO = 1

# O que nao vai para a copia: historico do git, ambiente, caches e saidas.
FORA_DA_COPIA = {'.git', '.venv', '__pycache__', '.mypy_cache', '.pytest_cache',
                 '.ruff_cache', 'build'}


class Mutacao(NamedTuple):
    nome: str
    arquivo: str          # relativo a raiz do repositorio
    antes: str            # tem de aparecer EXATAMENTE uma vez
    depois: str
    motivo: str           # o codigo que a tortura tem de dar para reprovar
    descricao: str


MUTACOES = (
    Mutacao(
        'sem_provisionar', 'contextia_sync/ouvinte/projetos.py',
        '        novos.append((escopo, regra_projeto.nome_de(linha, regra)))\n',
        '        continue  # MUTACAO: empresa nova nunca é provisionada\n',
        'empresa_sem_projeto',
        'o ciclo de projetos pula toda empresa nova: ela só chega na varredura'),
    Mutacao(
        'entregue_ate_varrer', 'contextia_sync/ouvinte/dados.py',
        '    if leitura.situacao is Situacao.GRANDE:\n',
        "    if leitura.situacao is Situacao.GRANDE or (alvo.nome == 'movimentos'"
        ' and not ctx.estado.varredura_feita_em()):  # MUTACAO\n',
        'entregue_sem_rajada',
        'movimentos fica entregue a varredura até a primeira varredura: ao-vivo morto'),
    Mutacao(
        'lote_descartado', 'contextia_sync/ouvinte/dados.py',
        "        if ctx.seco:\n            logger.info('%-28s [SECO] escopo=%-8s %s registro(s)',",
        "        if ctx.seco or escopo == '3':  # MUTACAO\n"
        "            logger.info('%-28s [SECO] escopo=%-8s %s registro(s)',",
        'linhas_perdidas',
        'o lote ao vivo da empresa 3 e descartado em silêncio e a marca avança'),
)


def _copiar_arvore(destino):
    def ignorar(pasta, nomes):
        return [n for n in nomes if n in FORA_DA_COPIA or n.endswith('.egg-info')
                or os.path.join(os.path.relpath(pasta, RAIZ), n) == os.path.join('demo', 'saida')]
    shutil.copytree(RAIZ, destino, ignore=ignorar, symlinks=True)


def aplicar(raiz, mutacao):
    """Aplica a mutação na árvore `raiz`; falha o teste se ela não casa mais."""
    caminho = os.path.join(raiz, mutacao.arquivo)
    with open(caminho, encoding='utf-8') as arquivo:
        texto = arquivo.read()
    vezes = texto.count(mutacao.antes)
    if vezes != 1:
        pytest.fail('a mutação %r ficou velha: o trecho %r aparece %d vez(es) em %s (tem de'
                    ' ser 1). O código mudou; reescreva a mutação para quebrar o mesmo'
                    ' comportamento no código de hoje (%s).'
                    % (mutacao.nome, mutacao.antes, vezes, mutacao.arquivo, mutacao.descricao))
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
@pytest.mark.timeout(900)
def test_a_tortura_reprova_cada_mutacao_e_diz_por_que(tmp_path):
    exigir_servidor('postgres')

    rodadas = {}
    prazo = time.monotonic() + 840
    for lote in range(0, len(MUTACOES), AO_MESMO_TEMPO):
        em_curso = []
        for numero, mutacao in enumerate(MUTACOES[lote:lote + AO_MESMO_TEMPO], start=lote):
            raiz = str(tmp_path / mutacao.nome / 'repo')
            _copiar_arvore(raiz)
            aplicar(raiz, mutacao)
            saida = tmp_path / mutacao.nome / 'numeros.json'
            log = open(tmp_path / mutacao.nome / 'tortura.log', 'w+', encoding='utf-8')
            # A copia e o produto: nada do repositorio de verdade no caminho de import.
            ambiente = dict(os.environ, PYTHONPATH=raiz)
            processo = subprocess.Popen(
                [sys.executable, os.path.join(raiz, 'bench', 'tortura.py'), '--modo=curto',
                 '--duracao=%d' % DURACAO, '--banco=postgres',
                 '--semente=%d' % (5150 + numero), '--saida=%s' % saida],
                cwd=raiz, env=ambiente, stdout=log, stderr=subprocess.STDOUT, text=True)
            rodadas[mutacao.nome] = (mutacao, raiz, saida, log, processo)
            em_curso.append(processo)
        for processo in em_curso:
            try:
                processo.wait(timeout=max(1, prazo - time.monotonic()))
            except subprocess.TimeoutExpired:
                # SIGTERM primeiro: a tortura limpa o que iniciou (ouvinte, servidor, banco).
                processo.terminate()
                processo.wait(timeout=60)

    problemas = []
    for mutacao, raiz, saida, log, processo in rodadas.values():
        log.seek(0)
        texto = log.read()
        log.close()
        relatorio = '--- %s (%s) ---\n%s' % (mutacao.nome, mutacao.descricao, texto[-5000:])
        if not saida.exists():
            problemas.append('%s: a tortura não gravou os números\n%s' % (mutacao.nome,
                                                                          relatorio))
            continue
        dados = json.loads(saida.read_text())
        if dados['nao_rodou'] or not dados['resultados']:
            problemas.append('%s: a tortura não rodou: %s\n%s' % (mutacao.nome,
                                                                dados['nao_rodou'], relatorio))
            continue
        numeros = dados['resultados'][0]
        codigos = sorted({m['codigo'] for m in numeros.get('motivos', [])})
        if processo.returncode != 1 or numeros['passou']:
            problemas.append('%s: a tortura PASSOU (saída %s) com o produto quebrado: %s\n%s'
                             % (mutacao.nome, processo.returncode, mutacao.descricao,
                                relatorio))
        elif mutacao.motivo not in codigos:
            problemas.append('%s: FALHOU, mas sem o motivo %r (motivos: %s)\n%s'
                             % (mutacao.nome, mutacao.motivo, codigos, relatorio))
        elif 'RESULTADO' not in texto or 'FALHOU [%s]' % mutacao.motivo not in texto:
            problemas.append('%s: a saída não diz FALHOU [%s]\n%s'
                             % (mutacao.nome, mutacao.motivo, relatorio))
        # Rodou a copia mutada, e nao o repositorio.
        if numeros.get('raiz') != raiz:
            problemas.append('%s: a tortura rodou o produto de %s, não a copia mutada %s'
                             % (mutacao.nome, numeros.get('raiz'), raiz))
    assert not problemas, '\n\n'.join(problemas)
