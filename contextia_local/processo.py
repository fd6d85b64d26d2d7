"""
ServidorLocal: o Contextia local num processo de verdade, para testes, demo,
bench e o teste de tortura.

    from contextia_local.processo import ServidorLocal

    with ServidorLocal('/tmp/dados', falhas=True) as servidor:
        chave = servidor.criar_projeto_com_chave('297', 'Empresa 297')
        os.environ.update(servidor.ambiente())     # CONTEXTIA_URL, CONTEXTIA_ADMIN_TOKEN
        servidor.injetar('503', 2)                  # as 2 proximas respostas do intake
        ...
        servidor.falhas_injetadas()                 # {'503': 2, '500': 0, ...}

API estavel (outros modulos dependem dela):

    ServidorLocal(dados, admin_token='admin-local', porta=None, falhas=False,
                  max_registros_lote=None, max_bytes_lote=None, host='127.0.0.1',
                  espera=20, remove=True, processos=1)
        dados        pasta do SQLite (sobrevive a parar/iniciar/reiniciar)
        porta        None = uma porta livre, escolhida no primeiro iniciar() e
                     mantida nos reinicios (a URL nao muda)
        remove       False imita o Contextia de hoje (sem `remove` no envelope)
        processos    N > 1: `--processos N` (não combina com falhas=True); .pid é
                     o do principal, que leva os filhos junto ao parar ou morrer
    .url .admin_token .dados .porta .pid (None parado) .log (arquivo de saida)
    iniciar()      sobe e espera GET /saude responder (levanta RuntimeError com
                   o fim do log se nao subir em `espera` segundos)
    parar()        SIGTERM, espera ate 5 s, depois SIGKILL; idempotente
    reiniciar()    parar() + iniciar() na mesma porta
    matar()        SIGKILL direto (simula queda)
    ambiente()     dict com CONTEXTIA_URL e CONTEXTIA_ADMIN_TOKEN
    admin()        contextia_sync.intake.admin.Admin apontado para este servidor
    criar_projeto_com_chave(escopo, nome=None) -> chave (ctx_...)
    injetar(tipo, quantidade=1, **opcoes)  tipos '500' '503' '429' 'atraso'
                   'derrubar' 'corpo_invalido'; opcoes: retry_after (429/503),
                   segundos (atraso), quando='depois'|'antes' (derrubar,
                   corpo_invalido), corpo (o texto do 200 de corpo_invalido),
                   caminho (prefixo de URL afetado; padrao '/api/v1/intake')
    taxa_de_falhas({'503': 0.1, 'derrubar': 0.05}, caminho=None, semente=None)
    falhas_injetadas() -> {tipo: contagem}
    limpar_falhas()
As falhas exigem falhas=True (senao o servidor responde 404).
"""

import atexit
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Self

from contextia_sync.tipos import Json, ObjetoJson

if TYPE_CHECKING:
    from contextia_local.falhas import ResumoDasFalhas
    from contextia_sync.intake.admin import Admin

# Nunca via proxy do ambiente: o servidor e local por definicao.
_ABRIDOR = urllib.request.build_opener(urllib.request.ProxyHandler({}))

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def porta_livre(host: str = '127.0.0.1') -> int:
    """Uma porta TCP livre agora (o kernel escolhe)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        porta: int = s.getsockname()[1]
        return porta


class ServidorLocal:
    """O Contextia local num subprocesso (`python -m contextia_local`)."""

    def __init__(
        self,
        dados: str | os.PathLike[str],
        admin_token: str = 'admin-local',
        porta: int | None = None,
        falhas: bool = False,
        max_registros_lote: int | None = None,
        max_bytes_lote: int | None = None,
        host: str = '127.0.0.1',
        espera: float = 20,
        remove: bool = True,
        processos: int = 1,
    ) -> None:
        self.dados = os.path.abspath(str(dados))
        self.admin_token = admin_token
        self.porta = porta
        self.falhas = falhas
        self.max_registros_lote = max_registros_lote
        self.max_bytes_lote = max_bytes_lote
        self.remove = remove
        self.processos = processos
        self.host = host
        self.espera = espera
        self.log = os.path.join(self.dados, 'servidor.log')
        self._processo: subprocess.Popen[bytes] | None = None
        self._porta_fixa = porta is not None
        atexit.register(self.parar)

    # ------------------------------------------------------------ ciclo de vida
    @property
    def url(self) -> str | None:
        return 'http://%s:%d' % (self.host, self.porta) if self.porta else None

    @property
    def pid(self) -> int | None:
        return self._processo.pid if self._processo and self._processo.poll() is None else None

    def __enter__(self) -> Self:
        self.iniciar()
        return self

    def __exit__(self, *_: object) -> None:
        self.parar()

    def iniciar(self) -> Self:
        if self.pid is not None:
            return self
        os.makedirs(self.dados, exist_ok=True)
        ultimo_erro: RuntimeError | None = None
        # Porta escolhida pelo kernel pode ser tomada por outro teste entre o
        # bind de sondagem e o do uvicorn: tenta de novo com outra.
        for _ in range(3 if not self._porta_fixa else 1):
            if self.porta is None:
                self.porta = porta_livre(self.host)
            try:
                self._subir()
                return self
            except RuntimeError as erro:
                ultimo_erro = erro
                if not self._porta_fixa and 'address already in use' in str(erro).lower():
                    self.porta = None
                    continue
                raise
        # So chega aqui depois de ao menos uma tentativa com 'address already in use'.
        assert ultimo_erro is not None
        raise ultimo_erro

    def _subir(self) -> None:
        porta = self.porta
        assert porta is not None, 'iniciar() escolhe a porta antes de subir'
        # O token vai no ambiente do filho, nunca na linha de comando: ela aparece
        # no ps (e em /proc/<pid>/cmdline) para todo usuario da maquina.
        comando = [
            sys.executable,
            '-m',
            'contextia_local',
            '--porta',
            str(porta),
            '--host',
            self.host,
            '--dados',
            self.dados,
            '--vigiar-pai',
            str(os.getpid()),
        ]
        if self.falhas:
            comando.append('--falhas')
        if not self.remove:
            comando.append('--sem-remove')
        if self.processos > 1:
            comando += ['--processos', str(self.processos)]
        if self.max_registros_lote is not None:
            comando += ['--max-registros-lote', str(self.max_registros_lote)]
        if self.max_bytes_lote is not None:
            comando += ['--max-bytes-lote', str(self.max_bytes_lote)]
        ambiente = dict(os.environ)
        ambiente['CONTEXTIA_ADMIN_TOKEN'] = self.admin_token
        ambiente['PYTHONPATH'] = os.pathsep.join(
            [RAIZ] + [p for p in [ambiente.get('PYTHONPATH')] if p]
        )
        with open(self.log, 'ab') as saida:
            self._processo = subprocess.Popen(
                comando,
                cwd=RAIZ,
                env=ambiente,
                stdout=saida,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        limite = time.monotonic() + self.espera
        while time.monotonic() < limite:
            if self._processo.poll() is not None:
                raise RuntimeError(
                    'Contextia local saiu com código %s ao subir na porta %d.'
                    ' Fim do log (%s):\n%s'
                    % (self._processo.returncode, porta, self.log, self._fim_do_log())
                )
            try:
                with _ABRIDOR.open(self._url() + '/saude', timeout=1) as resposta:
                    if resposta.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        self.parar()
        raise RuntimeError(
            'Contextia local não respondeu /saude em %ss (porta %d). Fim do'
            ' log:\n%s' % (self.espera, porta, self._fim_do_log())
        )

    def _fim_do_log(self) -> str:
        try:
            with open(self.log, 'rb') as f:
                return f.read()[-3000:].decode('utf-8', 'replace')
        except OSError:
            return '(sem log)'

    def parar(self) -> None:
        processo, self._processo = self._processo, None
        if processo is None or processo.poll() is not None:
            return
        processo.send_signal(signal.SIGTERM)
        try:
            processo.wait(timeout=5)
        except subprocess.TimeoutExpired:
            processo.kill()
            processo.wait(timeout=5)

    def matar(self) -> None:
        """SIGKILL, como uma queda de energia: o que foi comitado tem de sobreviver."""
        processo, self._processo = self._processo, None
        if processo is not None and processo.poll() is None:
            processo.kill()
            processo.wait(timeout=5)

    def reiniciar(self) -> Self:
        self.parar()
        porta, self._porta_fixa = self._porta_fixa, True
        try:
            self.iniciar()
        finally:
            self._porta_fixa = porta
        return self

    # ------------------------------------------------------------ atalhos
    def ambiente(self) -> dict[str, str | None]:
        return {'CONTEXTIA_URL': self.url, 'CONTEXTIA_ADMIN_TOKEN': self.admin_token}

    def admin(self) -> 'Admin':
        from contextia_sync.intake.admin import Admin

        return Admin(token=self.admin_token, url=self.url)

    def criar_projeto_com_chave(self, escopo: object, nome: str | None = None) -> str:
        """Projeto do escopo (idempotente) + uma chave nova. Devolve a chave."""
        admin = self.admin()
        projeto = admin.criar_projeto(str(escopo), nome or 'Empresa %s' % escopo)
        chave: str = admin.emitir_chave(projeto['id'])['key']
        return chave

    # ------------------------------------------------------------ falhas
    def _url(self) -> str:
        url = self.url
        assert url is not None, 'servidor sem porta: chame iniciar() antes'
        return url

    def _controle(self, metodo: str, caminho: str, corpo: Json = None) -> 'ResumoDasFalhas':
        """O resumo das falhas que a rota de controle responde (um objeto JSON)."""
        dados = json.dumps(corpo).encode() if corpo is not None else None
        pedido = urllib.request.Request(
            self._url() + '/api/v1/admin/falhas' + caminho,
            data=dados,
            method=metodo,
            headers={
                'Authorization': 'Bearer ' + self.admin_token,
                'Content-Type': 'application/json',
            },
        )
        try:
            with _ABRIDOR.open(pedido, timeout=10) as resposta:
                resumo: ResumoDasFalhas = json.loads(resposta.read())
                return resumo
        except urllib.error.HTTPError as erro:
            raise RuntimeError(
                'controle de falhas: HTTP %d %r (o servidor subiu com'
                ' falhas=True?)' % (erro.code, erro.read()[:300])
            ) from None

    def injetar(self, tipo: object, quantidade: int = 1, **opcoes: Json) -> 'ResumoDasFalhas':
        corpo = dict(opcoes, tipo=str(tipo), quantidade=quantidade)
        return self._controle('POST', '', corpo)

    def taxa_de_falhas(
        self,
        taxas: Mapping[str, float] | Mapping[int, float],
        caminho: str | None = None,
        semente: int | None = None,
    ) -> 'ResumoDasFalhas':
        corpo: ObjetoJson = {'taxas': {str(k): v for k, v in taxas.items()}}
        if caminho is not None:
            corpo['caminho'] = caminho
        if semente is not None:
            corpo['semente'] = semente
        return self._controle('PUT', '/taxas', corpo)

    def falhas_injetadas(self) -> dict[str, int]:
        injetadas: dict[str, int] = self._controle('GET', '')['injetadas']
        return injetadas

    def limpar_falhas(self) -> 'ResumoDasFalhas':
        return self._controle('DELETE', '')
