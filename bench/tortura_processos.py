"""
Os processos da tortura: o ouvinte de verdade, quem o mata, e quem vigia que
nunca houve dois.

Todo processo que a tortura inicia leva no ambiente `TORTURA_MARCA=<id>`, e o
ambiente e herdado pelos netos (provisionar.py, connector.py, carregar-todas.sh
que o ouvinte roda). E assim que a limpeza os acha no fim, mesmo os que o
ouvinte pos em grupo de processos próprio.
"""

import json
import os
import random
import re
import signal
import subprocess
import threading
import time

from tortura_contextia import sem_acentos

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VARIAVEL_MARCA = 'TORTURA_MARCA'
# A recusa da trava (contextia_sync/estado/trava.py), sem acentos: o intruso tem
# de sair com 2 E dizer isto -- sair por outro motivo nao prova a trava.
MENSAGEM_DA_TRAVA = 'Já existe um ouvinte rodando com este diretório de estado'
SAIDA_DA_TRAVA = 2


def processos_marcados_com_pai(marca):
    """[(pid, ppid, cmdline)] dos processos vivos (não zumbis) que levam a marca."""
    achados = []
    alvo = ('%s=%s' % (VARIAVEL_MARCA, marca)).encode()
    for nome in os.listdir('/proc'):
        if not nome.isdigit():
            continue
        pid = int(nome)
        try:
            with open('/proc/%d/environ' % pid, 'rb') as f:
                if alvo not in f.read().split(b'\0'):
                    continue
            with open('/proc/%d/stat' % pid, 'rb') as f:
                campos = f.read().rsplit(b')', 1)[1].split()
            if campos[0] == b'Z':
                continue
            with open('/proc/%d/cmdline' % pid, 'rb') as f:
                cmd = f.read().replace(b'\0', b' ').decode('utf-8', 'replace').strip()
        except (OSError, IndexError):
            continue
        achados.append((pid, int(campos[1]), cmd))
    return achados


def processos_marcados(marca):
    """[(pid, cmdline)] dos processos vivos (não zumbis) que levam a marca."""
    return [(pid, cmd) for pid, _ppid, cmd in processos_marcados_com_pai(marca)]


def ouvintes_principais(processos):
    """
    Os processos que SÃO um ouvinte, de [(pid, ppid, cmdline)].

    Um filho do ouvinte entre o fork e o exec (o supervisor rodando uma
    ferramenta) ainda tem a linha de comando do pai: contado, ele viraria um
    "segundo ouvinte" que nunca existiu -- o alarme falso que o vigia dava. O
    filho de um ouvinte com a mesma linha de comando e o mesmo programa por um
    instante, não outro ouvinte.
    """
    ouvintes = {pid: ppid for pid, ppid, cmd in processos if 'ouvinte.py' in cmd}
    return sorted(pid for pid, ppid in ouvintes.items() if ppid not in ouvintes)


def recusa_da_trava(codigo, saida):
    """O intruso foi recusado PELA TRAVA? (saída 2 e a mensagem dela, com ou sem acento)."""
    # Os dois lados sem acento: o mutirão de acentos reacentua a constante também.
    return codigo == SAIDA_DA_TRAVA and sem_acentos(MENSAGEM_DA_TRAVA) in sem_acentos(saida)


def matar_marcados(marca, sinal=signal.SIGKILL, exceto=()):
    """Mata todo processo com a marca (menos `exceto`). Devolve os comandos mortos."""
    mortos = []
    for pid, cmd in processos_marcados(marca):
        if pid in exceto or pid == os.getpid():
            continue
        try:
            os.kill(pid, sinal)
            mortos.append(cmd)
        except ProcessLookupError:
            pass
    return mortos


def ler_estado(caminho):
    """(ok, dados|erro): o arquivo de estado e JSON legível?"""
    try:
        with open(caminho, encoding='utf-8') as f:
            return True, json.load(f)
    except FileNotFoundError:
        return True, None
    except Exception as erro:  # noqa: BLE001
        return False, '%s: %s' % (type(erro).__name__, erro)


class Ouvinte:
    """O `ouvinte.py` de verdade, num processo real, com a saída num arquivo."""

    def __init__(self, python, argumentos, ambiente, estado_dir, saida):
        self.python = python
        self.argumentos = list(argumentos)
        self.ambiente = ambiente
        self.estado_dir = estado_dir
        self.saida = saida
        self.processo = None
        self.partidas = 0

    @property
    def pid(self):
        return self.processo.pid if self.processo else None

    def argv(self, extra=()):
        return [self.python, os.path.join(RAIZ, 'ouvinte.py')] + self.argumentos + list(extra)

    def iniciar(self, extra=()):
        with open(self.saida, 'ab') as log:
            log.write(
                (
                    '\n===== tortura: partida %d %s =====\n' % (self.partidas + 1, ' '.join(extra))
                ).encode()
            )
            log.flush()
            self.processo = subprocess.Popen(
                self.argv(extra),
                cwd=RAIZ,
                env=self.ambiente,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.partidas += 1
        return self.processo

    def vivo(self):
        return self.processo is not None and self.processo.poll() is None

    def codigo(self):
        return None if self.processo is None else self.processo.poll()

    def matar(self):
        """kill -9: sem aviso, no meio do que estiver fazendo."""
        if self.vivo():
            os.kill(self.processo.pid, signal.SIGKILL)
        if self.processo is not None:
            self.processo.wait()

    def terminar(self, espera):
        """SIGTERM e espera a saída limpa. Devolve (saiu, segundos)."""
        if not self.vivo():
            return True, 0.0
        inicio = time.monotonic()
        os.kill(self.processo.pid, signal.SIGTERM)
        try:
            self.processo.wait(espera)
            return True, time.monotonic() - inicio
        except subprocess.TimeoutExpired:
            self.matar()
            return False, time.monotonic() - inicio

    def caminho(self, nome):
        return os.path.join(self.estado_dir, nome)

    def estado(self):
        return ler_estado(self.caminho('ouvinte-estado.json'))

    def status(self):
        try:
            with open(self.caminho('ouvinte-status.txt'), encoding='utf-8') as f:
                return f.read()
        except OSError:
            return ''

    def fez_ciclo_de_dados(self):
        """O status e DESTE processo e já tem a linha de um ciclo de dados."""
        status = self.status()
        dono = re.search(r'^pid \.+: (\d+)', status, re.MULTILINE)
        return bool(
            dono
            and int(dono.group(1)) == self.pid
            and re.search(r'^dados \.+: ', status, re.MULTILINE)
        )

    def status_mtime(self):
        try:
            return os.stat(self.caminho('ouvinte-status.txt')).st_mtime
        except OSError:
            return 0.0

    def esperar_status_novo(self, depois_de, limite):
        """Espera o status ser regravado depois de `depois_de` (time.time())."""
        fim = time.monotonic() + limite
        while time.monotonic() < fim:
            if self.status_mtime() > depois_de:
                return True
            if not self.vivo():
                return False
            time.sleep(0.1)
        return False


class Vigia:
    """
    Amostra os processos `ouvinte.py` com a marca a cada 100 ms. Dois vivos ao
    mesmo tempo -- fora o intruso de propósito, que tem de ser recusado em
    segundos, e fora o filho de um ouvinte entre o fork e o exec
    (`ouvintes_principais`) -- e um SEGUNDO OUVINTE: violação. (O reinício não
    conta: o matador espera o morto sair antes de subir o novo.)
    """

    def __init__(self, marca, intervalo=0.1, tolerancia_intruso=20.0):
        self.marca = marca
        self.intervalo = intervalo
        self.tolerancia_intruso = tolerancia_intruso
        self.intruso = None
        self.intruso_desde = None
        self.violacoes = []
        self.amostras = 0
        self.maximo_simultaneos = 0
        self.trava = threading.Lock()
        self._parar = threading.Event()
        self._thread = None

    def permitir(self, principal=None, intruso=None):  # noqa: ARG002
        with self.trava:
            self.intruso = intruso
            self.intruso_desde = time.monotonic() if intruso else None

    def _laco(self):
        while not self._parar.wait(self.intervalo):
            with self.trava:
                processos = processos_marcados_com_pai(self.marca)
                comandos = {p: c for p, _, c in processos}
                ouvintes = ouvintes_principais(processos)
                self.amostras += 1
                outros = [p for p in ouvintes if p != self.intruso]
                self.maximo_simultaneos = max(self.maximo_simultaneos, len(outros))
                if len(outros) > 1:
                    self.violacoes.append(
                        '%d ouvintes vivos ao mesmo tempo: %s'
                        % (len(outros), '; '.join('%d %s' % (p, comandos[p][-80:]) for p in outros))
                    )
                if (
                    self.intruso
                    and self.intruso in ouvintes
                    and time.monotonic() - self.intruso_desde > self.tolerancia_intruso
                ):
                    self.violacoes.append(
                        'o intruso %d segue vivo depois de %.0f s'
                        % (self.intruso, self.tolerancia_intruso)
                    )

    def iniciar(self):
        self._thread = threading.Thread(target=self._laco, name='vigia', daemon=True)
        self._thread.start()

    def parar(self):
        self._parar.set()
        if self._thread:
            self._thread.join(5)


class Matador:
    """
    Mata o ouvinte em momentos aleatórios -- kill -9 quase sempre, SIGTERM as
    vezes -- e o reinicia. Depois de cada morte confere que o estado e JSON
    legível. Depois do kill -9 faz o que o systemd faz com
    `KillMode=control-group`: mata os netos que sobraram antes de reiniciar
    (e conta quantos eram). De vez em quando tenta um SEGUNDO ouvinte no mesmo
    estado, que tem de ser recusado.
    """

    def __init__(
        self,
        ouvinte,
        vigia,
        marca,
        *,
        periodo,
        fracao_sigterm,
        espera_sigterm,
        semente,
        registro,
        tentar_intruso_a_cada=4,
    ):
        self.ouvinte = ouvinte
        self.vigia = vigia
        self.marca = marca
        self.periodo = periodo
        self.fracao_sigterm = fracao_sigterm
        self.espera_sigterm = espera_sigterm
        self.aleatorio = random.Random(semente)
        self.registro = registro
        self.tentar_intruso_a_cada = tentar_intruso_a_cada
        self.kills = 0
        self.sigterms = 0
        self.sigterm_lentos = []  # segundos de SIGTERMs que nao sairam no prazo
        self.sigterm_tempos = []
        self.orfaos_kill = 0  # netos vivos apos kill -9 (o systemd os mataria)
        self.orfaos_sigterm = []  # netos vivos apos SIGTERM: o ouvinte devia te-los levado
        self.estados_lidos = 0
        self.estados_ruins = []
        self.intrusos_recusados = 0
        self.intrusos_aceitos = []
        self.mortes_sozinho = []  # o ouvinte saiu sem ninguem mandar
        self.erros_entre_vidas = []  # o que a tortura fez com o ouvinte morto e falhou
        self._parar = threading.Event()
        self.pausado = threading.Event()  # as mortes ao acaso esperam (ha uma de proposito vindo)
        self._trava_ciclo = threading.Lock()
        self._thread = None

    # -- uma rodada ------------------------------------------------------------

    def garantir_vivo(self):
        """Se o ouvinte saiu sozinho, anota (e um achado) e reinicia."""
        with self._trava_ciclo:
            if not self.ouvinte.vivo():
                codigo = self.ouvinte.codigo()
                if codigo is not None:
                    self.mortes_sozinho.append(codigo)
                    self.registro(
                        'ATENÇÃO: o ouvinte saiu sozinho com código %s; reiniciando', codigo
                    )
                self.conferir_estado('saída sozinho')
                self._reiniciar()

    def conferir_estado(self, quando):
        ok, dados = self.ouvinte.estado()
        self.estados_lidos += 1
        if not ok:
            self.estados_ruins.append('%s: %s' % (quando, dados))

    def _reiniciar(self):
        self.ouvinte.iniciar()
        self.vigia.permitir(principal=self.ouvinte.pid)

    def _de_pe(self):
        """
        O ouvinte desta vida já fez um ciclo de dados? Matar de novo antes disso
        só mede quanto o python leva para importar (e a carga inicial pendente
        refeita a cada subida): numa máquina carregada, o ouvinte nunca chegaria
        a ler nada, e o que a tortura mede deixaria de ser o ouvinte.
        """
        return self.ouvinte.fez_ciclo_de_dados()

    def uma_morte(self, so_kill=False, esperar=True, entre_vidas=None):
        """
        Uma morte e o reinício. `esperar=False`: desiste se o matador está ocupado.
        `entre_vidas`: o que fazer com o ouvinte MORTO e nenhuma ferramenta viva
        (editar o arquivo de chaves, o estado) -- como o operador entre um
        `systemctl stop` e um `start`.
        """
        if not self._trava_ciclo.acquire(blocking=esperar):
            return False
        try:
            return self._uma_morte(so_kill, entre_vidas)
        finally:
            self._trava_ciclo.release()

    def _uma_morte(self, so_kill, entre_vidas=None):
        if not self.ouvinte.vivo():
            return False
        if not so_kill and self.aleatorio.random() < self.fracao_sigterm:
            saiu, segundos = self.ouvinte.terminar(self.espera_sigterm)
            self.sigterms += 1
            self.sigterm_tempos.append(segundos)
            if not saiu:
                self.sigterm_lentos.append(segundos)
            time.sleep(0.3)
            sobras = matar_marcados(self.marca)
            if sobras:
                self.orfaos_sigterm.extend(sobras)
            tipo = 'SIGTERM'
        else:
            self.ouvinte.matar()
            self.kills += 1
            self.orfaos_kill += len(matar_marcados(self.marca))
            tipo = 'kill -9'
        self.conferir_estado(tipo)
        if entre_vidas is not None:
            try:
                entre_vidas()
            except Exception as erro:  # noqa: BLE001
                self.erros_entre_vidas.append('%s: %s' % (type(erro).__name__, erro))
        time.sleep(self.aleatorio.uniform(0, 1.0))
        self._reiniciar()
        if (
            self.tentar_intruso_a_cada
            and (self.kills + self.sigterms) % self.tentar_intruso_a_cada == 0
        ):
            self._tentar_intruso()
        return True

    def tentar_intruso(self):
        """Um intruso de propósito, agora (fora da conta das mortes)."""
        with self._trava_ciclo:
            if self.ouvinte.vivo():
                self._tentar_intruso()

    def _tentar_intruso(self):
        """Um segundo ouvinte no mesmo estado, com o primeiro de pe: tem de ser recusado."""
        # So depois que o principal passou da trava (escreveu status), senao o
        # intruso poderia ser o primeiro a travar e a conta sairia trocada.
        if not self.ouvinte.esperar_status_novo(time.time(), 30):
            return
        # Lancado com a trava do vigia na mao: uma amostra de /proc tirada entre o
        # Popen e o permitir veria o intruso como um segundo ouvinte (alarme falso).
        with self.vigia.trava:
            processo = subprocess.Popen(
                self.ouvinte.argv(),
                cwd=RAIZ,
                env=self.ouvinte.ambiente,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            self.vigia.intruso, self.vigia.intruso_desde = processo.pid, time.monotonic()
        try:
            saida, _ = processo.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            processo.kill()
            saida, _ = processo.communicate()
            self.intrusos_aceitos.append('não foi recusado em 20 s')
            self.vigia.permitir(principal=self.ouvinte.pid)
            return
        self.vigia.permitir(principal=self.ouvinte.pid)
        texto = saida.decode('utf-8', 'replace')
        if recusa_da_trava(processo.returncode, texto):
            self.intrusos_recusados += 1
        else:
            self.intrusos_aceitos.append('código %s: %s' % (processo.returncode, texto[-300:]))

    # -- a thread --------------------------------------------------------------

    def _laco(self):
        while not self._parar.wait(self.aleatorio.uniform(*self.periodo)):
            try:
                self.garantir_vivo()
                if not self.pausado.is_set() and self._de_pe():
                    self.uma_morte()
            except Exception as erro:  # noqa: BLE001
                self.registro('matador: %s: %s', type(erro).__name__, erro)

    def iniciar(self):
        self._thread = threading.Thread(target=self._laco, name='matador', daemon=True)
        self._thread.start()

    def parar(self):
        self._parar.set()
        if self._thread:
            self._thread.join(60)
