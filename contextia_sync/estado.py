"""
Os tres arquivos do diretorio de estado: estado JSON, status e trava.

    ouvinte-estado.json   marcas de agua, escopos vistos, ultima varredura
    ouvinte-status.txt    o arquivo que um alerta le (`find -mmin`)
    ouvinte.lock          um ouvinte por implantacao (flock)
"""

import io
import json
import os

from contextia_sync.arquivos import gravar_atomico
from contextia_sync.marca_agua import texto_marca

ARQUIVO_ESTADO = 'ouvinte-estado.json'
ARQUIVO_STATUS = 'ouvinte-status.txt'
ARQUIVO_TRAVA = 'ouvinte.lock'


class ErroEstado(Exception):
    """O arquivo de estado existe e nao da para le-lo."""


class ErroTrava(Exception):
    """Outro ouvinte ja usa este diretorio de estado."""


class Estado:
    """
    Marcas de agua e o que o ouvinte sabe da origem, num JSON gravado atomico.

    Atomico porque o ouvinte pode morrer a qualquer instante: um estado truncado
    faria a proxima subida comecar do MAX() da origem, pulando tudo o que
    aconteceu enquanto ele estava fora.
    """

    def __init__(self, caminho):
        self.caminho = caminho
        self.dados = {'versao': 2, 'marca_agua': {}, 'escopos_vistos': [],
                      'ultima_varredura': None, 'vistos': {}, 'acompanhamento': {},
                      'pendentes_varredura': {}}
        if not os.path.exists(caminho):
            return
        try:
            with io.open(caminho, encoding='utf-8') as arquivo:
                lido = json.load(arquivo)
            if not isinstance(lido, dict):
                raise ValueError('o conteudo nao e um objeto JSON')
        except Exception as erro:            # noqa: BLE001
            # Nao apaga e nao segue as cegas: continuar zerado reprocessaria ou
            # pularia dado sem ninguem saber qual dos dois. Decisao de pessoa.
            raise ErroEstado(
                'Estado ilegivel em %s (%s: %s).\n'
                'Conserte ou mova o arquivo. Comecar do zero faria o ouvinte'
                ' pular tudo que aconteceu desde a ultima leitura.'
                % (caminho, type(erro).__name__, erro)) from None
        self.dados.update(lido)

    # marcas
    def marca(self, dataset):
        return (self.dados.get('marca_agua') or {}).get(dataset)

    def definir_marca(self, dataset, valor):
        self.dados.setdefault('marca_agua', {})[dataset] = texto_marca(valor)

    # o que ja foi lido dentro da janela da folga (chegadas atrasadas)
    def vistos(self, dataset):
        """{identidade: valor}, ou None se nao se sabe (contagem suspensa)."""
        todos = self.dados.setdefault('vistos', {})
        return todos.get(dataset)

    def definir_vistos(self, dataset, vistos):
        self.dados.setdefault('vistos', {})[dataset] = vistos

    # o que o status mostra por dataset
    def acompanhamento(self, dataset):
        return self.dados.setdefault('acompanhamento', {}).setdefault(dataset, {})

    # entregues a varredura por excesso de linhas
    def pendentes(self):
        return self.dados.setdefault('pendentes_varredura', {})

    # cargas iniciais de empresa nova ainda nao confirmadas
    def cargas_pendentes(self):
        return self.dados.setdefault('cargas_iniciais_pendentes', [])

    def marcar_carga_pendente(self, escopo, pendente=True):
        lista = [e for e in self.cargas_pendentes() if e != escopo]
        if pendente:
            lista.append(escopo)
        self.dados['cargas_iniciais_pendentes'] = lista

    # escopos e varredura
    def escopos(self):
        return set(self.dados.get('escopos_vistos') or [])

    def registrar_escopos(self, escopos):
        self.dados['escopos_vistos'] = sorted(self.escopos() | set(escopos))

    def varredura_feita_em(self):
        return self.dados.get('ultima_varredura')

    def registrar_varredura(self, dia):
        self.dados['ultima_varredura'] = dia

    def gravar(self):
        gravar_atomico(self.caminho, json.dumps(
            self.dados, ensure_ascii=False, indent=2, sort_keys=True) + '\n')


def travar(diretorio):
    """
    Um ouvinte por diretorio de estado, por flock (o kernel solta se ele morrer).

    Dois ouvintes disputariam a mesma marca: cada um avancaria sem ver o que o
    outro leu, e o intervalo lido por um seria dado como lido pelo outro.
    Devolve o arquivo aberto (manter vivo = manter a trava), ou None sem fcntl.
    """
    caminho = os.path.join(diretorio, ARQUIVO_TRAVA)
    try:
        import fcntl
    except ImportError:                       # pragma: no cover - Windows
        return None
    # 'a+' e nao 'w': abrir com 'w' apagaria o pid de quem tem a trava antes de
    # sabermos se ela esta livre.
    arquivo = io.open(caminho, 'a+', encoding='utf-8')
    try:
        fcntl.flock(arquivo.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        arquivo.seek(0)
        dono = arquivo.read().strip() or '?'
        arquivo.close()
        raise ErroTrava(
            'Ja existe um ouvinte rodando com este diretorio de estado (%s, pid %s).\n'
            'Dois ouvintes disputariam a mesma marca de agua, e o intervalo lido'
            ' por um seria dado como lido pelo outro. Pare o outro (systemctl stop'
            ' ...) ou use outro --estado.' % (caminho, dono)) from None
    arquivo.seek(0)
    arquivo.truncate()
    arquivo.write('%s\n' % os.getpid())
    arquivo.flush()
    return arquivo


def escrever_status(diretorio, linhas):
    """
    Troca o arquivo de status inteiro. Devolve o erro (texto) ou None.

    E um ARQUIVO e nao um log: alerta que precisa varrer log para saber se o
    servico esta vivo nao e alerta. `find <estado>/ouvinte-status.txt -mmin +10`
    sem saida = vivo. Falha aqui nao derruba o ouvinte: disco cheio nao e
    motivo para parar de levar dado.
    """
    try:
        gravar_atomico(os.path.join(diretorio, ARQUIVO_STATUS),
                       ''.join('%s\n' % linha for linha in linhas))
    except OSError as erro:
        return '%s: %s' % (type(erro).__name__, erro)
    return None
