"""
O ouvinte.py de verdade como processo, com o seu diretório de estado e o seu
arquivo de chaves, sobre o ERP de teste (tests/dados/erp.py) e o Contextia local.
"""

import json
import os
import subprocess
import sys
import time

import pytest

from contextia_sync.intake import cliente, transporte
from tests.dados import erp as erp_teste

RAIZ = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATASET = 'titulos_a_receber'


class Ouvinte:
    """Um diretório de estado, um arquivo de chaves e o ouvinte.py como processo."""

    def __init__(self, tmp_path, erp, contextia, chave_contextia, escopos=None):
        self.erp = erp
        self.contextia = contextia
        self.pasta = tmp_path
        self.estado_dir = str(tmp_path / 'estado')
        self.mapa = erp_teste.mapeamento(tmp_path)
        self.arquivo_chaves = str(tmp_path / 'chaves.tsv')
        self.chaves = {e: chave_contextia(e) for e in (escopos or erp.escopos)}
        with open(self.arquivo_chaves, 'w') as arquivo:
            arquivo.writelines('%s\t%s\n' % item for item in self.chaves.items())
        os.chmod(self.arquivo_chaves, 0o600)
        self.proximo_id = erp.base * 1000 + 900

    def argv(self, *extra):
        base = [
            '--mapping=' + self.mapa,
            '--source=generic',
            '--chaves=' + self.arquivo_chaves,
            '--estado=' + self.estado_dir,
            '--varredura=nao',
            '--intervalo-dados=1',
            '--timeout-ferramenta=120',
        ]
        return [sys.executable, 'ouvinte.py'] + base + list(extra)

    def env(self):
        env = dict(os.environ, CONTEXTIA_ORIGEM=self.erp.url, **self.contextia.ambiente())
        env.pop('CONTEXTIA_API_KEY', None)
        return env

    def rodar(self, *extra, timeout=180):
        feito = subprocess.run(
            self.argv(*extra),
            cwd=RAIZ,
            env=self.env(),
            timeout=timeout,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        return feito.returncode, feito.stdout.decode('utf-8', 'replace')

    def iniciar(self, *extra):
        self.log = open(str(self.pasta / ('ouvinte-%d.log' % time.monotonic_ns())), 'w+b')
        return subprocess.Popen(
            self.argv(*extra), cwd=RAIZ, env=self.env(), stdout=self.log, stderr=subprocess.STDOUT
        )

    def saida(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode('utf-8', 'replace')

    def estado(self):
        with open(os.path.join(self.estado_dir, 'ouvinte-estado.json')) as arquivo:
            return json.load(arquivo)

    def mudar_estado(self, **secoes):
        """Edita o ouvinte-estado.json como uma pessoa faria (seções dict são mescladas)."""
        caminho = os.path.join(self.estado_dir, 'ouvinte-estado.json')
        with open(caminho) as arquivo:
            estado = json.load(arquivo)
        for secao, valor in secoes.items():
            if isinstance(valor, dict) and isinstance(estado.get(secao), dict):
                estado[secao].update(valor)
            else:
                estado[secao] = valor
        with open(caminho, 'w') as arquivo:
            json.dump(estado, arquivo)

    def status(self):
        with open(os.path.join(self.estado_dir, 'ouvinte-status.txt')) as arquivo:
            return arquivo.read()

    def inserir(self, escopo, alterado_em, valor='10.00'):
        self.proximo_id += 1
        self.erp.executar(
            'INSERT INTO {TITULOS} VALUES (:i, :e, :c, :v, :d, :a)',
            i=self.proximo_id,
            e=int(escopo),
            c='Novo %d' % self.proximo_id,
            v=valor,
            d='2026-10-01',
            a=alterado_em,
        )
        return self.proximo_id

    def no_contextia(self, escopo):
        """{ID: registro} do dataset de titulos no projeto da empresa."""
        try:
            return {int(r['ID']): r for r in cliente.ler_registros(DATASET, self.chaves[escopo])}
        except transporte.ErroContextia:
            return {}


def erp_postgres_ou_pula():
    """(ERP de teste num banco novo do PostgreSQL, derrubar); sem servidor pula (no CI falha)."""
    criado = erp_teste.erp_postgres()
    if criado is None:
        if os.environ.get('CI') == 'true':
            pytest.fail('PostgreSQL em 127.0.0.1:5432 não respondeu (CI=true exige o banco)')
        pytest.skip('PostgreSQL em 127.0.0.1:5432 não respondeu')
    return criado


# Os parâmetros de uma fixture `erp` em SQLite e no PostgreSQL (a marca pede o servidor).
BANCOS_DO_ERP = ['sqlite', pytest.param('postgres', marks=pytest.mark.postgres)]


def erp_no_banco(banco, pasta):
    """O corpo da fixture `erp`: o ERP de teste no banco pedido; depois do yield, derruba."""
    if banco == 'sqlite':
        erp = erp_teste.erp_sqlite(pasta)
        yield erp
        erp.fechar()
        return
    erp, derrubar = erp_postgres_ou_pula()
    yield erp
    derrubar()


def esperar(condicao, segundos=60, passo=0.2):
    """O valor de `condicao()` assim que for verdadeiro; AssertionError no prazo."""
    fim = time.monotonic() + segundos
    while time.monotonic() < fim:
        valor = condicao()
        if valor:
            return valor
        time.sleep(passo)
    raise AssertionError('condição não atingida em %ss' % segundos)
