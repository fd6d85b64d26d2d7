"""
O lado do Contextia na tortura, com código PRÓPRIO: HTTP simples (urllib, sem
proxy) para a API de leitura e a de admin do servidor, o arquivo de chaves lido
por um leitor de poucas linhas, a quarentena e o estado lidos do disco.

Nada aqui importa o pacote do produto (`contextia_sync`): um verificador que lê
pelo cliente do produto herda os erros dele -- uma paginação errada ou um
parser de chaves errado no produto sumiriam dos dois lados da comparação.
"""

import http.client
import json
import os
import time
import unicodedata
import urllib.error
import urllib.parse
import urllib.request

# Nunca via proxy do ambiente: o servidor da tortura é local por definição.
_ABRIDOR = urllib.request.build_opener(urllib.request.ProxyHandler({}))
BOM = '\ufeff'


class ErroHttp(Exception):
    """O Contextia respondeu um status de erro (o corpo vai na mensagem)."""

    def __init__(self, status, metodo, caminho, corpo):
        super().__init__('%s %s: HTTP %s %s' % (metodo, caminho, status, corpo[:300]))
        self.status = status


class Contextia:
    """
    A API do servidor, pedido a pedido. A leitura (/api/v1/datasets...) e o
    admin não passam pela injeção de falhas (ela só toca /api/v1/intake); as
    poucas retentativas aqui cobrem um servidor ocupado, não uma falha de
    propósito.
    """

    def __init__(self, url, admin_token, tentativas=5, prazo=30):
        self.url = url.rstrip('/')
        self.admin_token = admin_token
        self.tentativas = tentativas
        self.prazo = prazo
        self.pedidos = 0

    def _pedir(self, metodo, caminho, token, consulta=None):
        endereco = self.url + caminho
        if consulta:
            endereco += '?' + urllib.parse.urlencode(consulta)
        ultimo = None
        for tentativa in range(self.tentativas):
            pedido = urllib.request.Request(
                endereco,
                method=metodo,
                headers={'Authorization': 'Bearer ' + token, 'Accept': 'application/json'},
            )
            try:
                self.pedidos += 1
                with _ABRIDOR.open(pedido, timeout=self.prazo) as resposta:
                    return json.loads(resposta.read())
            except urllib.error.HTTPError as erro:
                corpo = erro.read().decode('utf-8', 'replace')
                if erro.code < 500:
                    raise ErroHttp(erro.code, metodo, caminho, corpo) from None
                ultimo = ErroHttp(erro.code, metodo, caminho, corpo)
            except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as erro:
                ultimo = erro
            time.sleep(0.2 * (tentativa + 1))
        raise RuntimeError(
            'Contextia em %s não respondeu %s %s: %s' % (self.url, metodo, caminho, ultimo)
        )

    # -- admin -----------------------------------------------------------------
    def projetos(self, external_id=None):
        consulta = {'external_id': external_id} if external_id is not None else None
        return self._pedir('GET', '/api/v1/admin/projetos', self.admin_token, consulta)['projetos']

    def chaves_do_projeto(self, projeto_id):
        return self._pedir(
            'GET', '/api/v1/admin/projetos/%s/chaves' % projeto_id, self.admin_token
        )['chaves']

    # -- com a chave de um projeto -----------------------------------------------
    def quem_sou(self, chave):
        return self._pedir('GET', '/api/v1/projeto', chave)

    def datasets(self, chave):
        return self._pedir('GET', '/api/v1/datasets', chave)['datasets']

    def registros(self, chave, dataset, pagina=5000):
        """Todos os registros do dataset, página por página (`next`)."""
        saida, apos = [], 0
        while True:
            resposta = self._pedir(
                'GET',
                '/api/v1/datasets/%s/registros' % dataset,
                chave,
                {'after': apos, 'limit': pagina},
            )
            saida.extend(resposta['records'])
            if resposta.get('next') is None:
                return saida
            apos = resposta['next']


def ler_arquivo_de_chaves(caminho):
    """
    {escopo: chave} do arquivo de chaves (TSV: escopo, chave, ...). Aceita BOM
    no começo e CRLF, como o operador que edita no Bloco de Notas deixa. Só
    serve para LER o Contextia de volta: quais empresas verificar vem da origem.
    """
    with open(caminho, 'rb') as arquivo:
        texto = arquivo.read().decode('utf-8')
    if texto.startswith(BOM):
        texto = texto[1:]
    chaves = {}
    for linha in texto.split('\n'):
        linha = linha.rstrip('\r')
        if not linha.strip() or linha.lstrip().startswith('#'):
            continue
        partes = linha.split('\t')
        if len(partes) >= 2:
            chaves[partes[0].strip()] = partes[1].strip()
    return chaves


def gravar_atomico(caminho, dados, modo=0o600):
    """Grava bytes inteiros (temporário, fsync, rename), com o modo antes do conteúdo."""
    temporario = '%s.tortura-%d' % (caminho, os.getpid())
    descritor = os.open(temporario, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, modo)
    try:
        os.fchmod(descritor, modo)
        os.write(descritor, dados)
        os.fsync(descritor)
    finally:
        os.close(descritor)
    os.replace(temporario, caminho)


def itens_da_quarentena(estado_dir):
    """
    [{'dataset', 'escopo', 'chave', 'motivo', 'arquivo'}] de
    `<estado>/quarentena/parado/` -- um arquivo JSON por registro recusado de vez.
    """
    pasta = os.path.join(estado_dir, 'quarentena', 'parado')
    if not os.path.isdir(pasta):
        return []
    itens = []
    for nome in sorted(os.listdir(pasta)):
        if not nome.endswith('.json'):
            continue
        try:
            with open(os.path.join(pasta, nome), encoding='utf-8') as arquivo:
                dados = json.load(arquivo)
        except (OSError, ValueError):
            # Sumiu entre o listdir e o open (o ouvinte tirou): não está mais lá.
            continue
        itens.append(
            {
                'dataset': dados.get('dataset'),
                'escopo': str(dados.get('escopo')),
                'chave': None
                if dados.get('chave_valor') is None
                else str(dados.get('chave_valor')),
                'motivo': str(dados.get('motivo', ''))[:200],
                'arquivo': nome,
            }
        )
    return itens


def sem_acentos(texto):
    """Para casar mensagens do produto com ou sem acento (um mutirão vai reacentuá-las)."""
    decomposto = unicodedata.normalize('NFKD', texto)
    return ''.join(c for c in decomposto if not unicodedata.combining(c))
