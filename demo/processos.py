"""
Os processos que a demo sobe: cada um no seu grupo, e nenhum fica para trás.

O ouvinte roda como processo de verdade (o mesmo `ouvinte.py` de produção), com
o log inteiro num arquivo e só as linhas que contam a historia na tela.
"""

import contextlib
import os
import re
import signal
import subprocess
import threading

from tela import RAIZ, curto, dizer, mostrar


PARADAS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def sinais_adiados():
    """
    O Ctrl-C que chega DENTRO do Popen o interromperia com o filho já criado e
    sem o objeto que o nomeia: o filho (num grupo próprio) ficaria órfão,
    segurando a saída da demo. O sinal espera o Popen voltar e é dado na saída
    do bloco, quando quem chamou já tem o processo para encerrar.
    """
    chegaram = []
    antigos = {sinal: signal.getsignal(sinal) for sinal in PARADAS}
    for sinal in PARADAS:
        signal.signal(sinal, lambda numero, _quadro: chegaram.append(numero))
    try:
        yield
    finally:
        for sinal, tratador in antigos.items():
            signal.signal(sinal, tratador)
        for numero in chegaram[:1]:
            tratador = antigos[numero]
            if callable(tratador):
                tratador(numero, None)


def encerrar_grupo(processo, espera=20):
    """SIGTERM no grupo inteiro, espera, SIGKILL. Devolve o código de saída."""
    if processo.poll() is None:
        try:
            os.killpg(processo.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            processo.wait(espera)
        except subprocess.TimeoutExpired:
            pass
    # Mesmo com o lider morto, um neto (a carga que o ouvinte rodava) pode
    # seguir vivo no grupo: SIGKILL no grupo e inofensivo se ele ja esta vazio.
    try:
        os.killpg(processo.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return processo.wait()


def rodar(argv, ambiente, rotulo, prazo=1800):
    """Roda uma ferramenta do SDK com a saída no terminal (as barras de progresso)."""
    dizer('$ %s' % ' '.join(curto(a) for a in argv))
    processo = None
    try:
        with sinais_adiados():
            processo = subprocess.Popen(argv, cwd=RAIZ, env=ambiente, start_new_session=True)
        codigo = processo.wait(prazo)
    except BaseException:
        if processo is not None:
            encerrar_grupo(processo, 5)
        raise
    if codigo != 0:
        raise SystemExit(
            '%s saiu com %s: a demo não pode seguir. A saída acima diz o motivo.' % (rotulo, codigo)
        )
    return codigo


class Ouvinte:
    """O ouvinte.py num processo de verdade; o log inteiro vai para um arquivo."""

    # O que a demo repete na tela do log do ouvinte (o resto fica no arquivo).
    PREFIXO = re.compile(r'^\[([A-Z]) \d{6} \d\d:\d\d:\d\d [^\]]*\] ')
    ECOAR = re.compile(r'EMPRESA|ao.vivo|varredura|terminou|encerrado|recusad|falhou', re.I)
    # Da saida das ferramentas (prefixada pelo ouvinte com "rotulo | "), so o
    # que conta a historia: projeto criado, resumo, e o que a varredura removeu.
    ECOAR_FERRAMENTA = re.compile(r'criado projeto|^resumo|removidos=[1-9]')

    def __init__(self, argv, ambiente, log):
        self.argv = argv
        self.ambiente = ambiente
        self.log = log
        self.processo = None
        self.leitor = None
        self.ultimas = []
        self.vistas = set()

    def iniciar(self, extras=()):
        argv = list(self.argv) + list(extras)
        dizer('$ %s' % ' '.join(curto(a) for a in argv[1:]))
        with sinais_adiados():  # o Ctrl-C dado aqui encontra self.processo para parar
            self.processo = subprocess.Popen(
                argv,
                cwd=RAIZ,
                env=self.ambiente,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.leitor = threading.Thread(target=self._ler, args=(self.processo,), daemon=True)
        self.leitor.start()
        dizer('ouvinte no ar (pid %s); log completo em %s' % (self.processo.pid, mostrar(self.log)))

    def _ler(self, processo):
        with open(self.log, 'ab') as arquivo:
            for bruta in iter(processo.stdout.readline, b''):
                arquivo.write(bruta)
                arquivo.flush()
                linha = bruta.decode('utf-8', 'replace').rstrip()
                self.ultimas = (self.ultimas + [linha])[-40:]
                texto = self.filtrar(linha)
                if texto:
                    print('           ouvinte | %s' % texto[:160], flush=True)

    def filtrar(self, linha):
        """O texto a mostrar desta linha do log do ouvinte, ou None."""
        prefixo = self.PREFIXO.match(linha)
        if not prefixo:
            return None
        nivel, corpo = prefixo.group(1), linha[prefixo.end() :]
        if ' | ' in corpo:
            rotulo, saida = corpo.split(' | ', 1)
            if self.ECOAR_FERRAMENTA.search(saida.strip()):
                return '%s | %s' % (rotulo.strip(), saida.strip())
            return None
        if nivel not in 'WE' and not self.ECOAR.search(corpo):
            return None
        # Repetir a mesma frase a cada ciclo so esconderia as novidades.
        if corpo in self.vistas:
            return None
        self.vistas.add(corpo)
        return ('AVISO: ' if nivel == 'W' else 'ERRO: ' if nivel == 'E' else '') + corpo.strip()

    def vivo(self):
        return self.processo is not None and self.processo.poll() is None

    def parar(self):
        if self.processo is None:
            return None
        codigo = encerrar_grupo(self.processo, 60)
        if self.leitor is not None:
            self.leitor.join(5)
        self.processo = None
        return codigo
