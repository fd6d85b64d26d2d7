"""
Ferramenta órfã (issue 12, item 9): `kill -9` do ouvinte no meio de uma
varredura deixava carregar-todas.sh e connector.py rodando, adotados pelo
PID 1, e o connector órfão mandava `complete` sozinho.

Duas redes, cada uma provada com processos de verdade:
  * PR_SET_PDEATHSIG: o filho direto (o bash do carregar-todas) recebe SIGTERM
    quando o ouvinte morre, e o repassa ao connector;
  * o arquivo de grupos no diretório de estado: a subida seguinte acha o grupo
    que sobrou, confere que é o MESMO e o encerra antes de qualquer outra
    coisa, nomeando-o no log. Pid reciclado não é morto.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from contextia_sync import supervisor
from tests.apoio.ouvinte import esperar
from tests.dados import erp as erp_teste

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class Log:
    """Um logger que só anota as mensagens."""

    def __init__(self) -> None:
        self.linhas: list[str] = []

    def _anotar(self, formato: str, *args: object) -> None:
        self.linhas.append(formato % args if args else formato)

    info = warning = error = _anotar

    def texto(self) -> str:
        return '\n'.join(self.linhas)


def stat(pid: int) -> list[str] | None:
    """Os campos de /proc/<pid>/stat depois do nome (o 0 e o estado), ou None."""
    try:
        with open('/proc/%s/stat' % pid) as arquivo:
            return arquivo.read().rsplit(')', 1)[1].split()
    except (OSError, IndexError):
        return None


def vivos(pgid: int) -> list[int]:
    """Pids vivos (não zumbis) do grupo `pgid`, lidos do /proc (sem o código testado)."""
    achados = []
    for nome in os.listdir('/proc'):
        campos = stat(int(nome)) if nome.isdigit() else None
        if campos and int(campos[2]) == pgid and campos[0] != 'Z':
            achados.append(int(nome))
    return sorted(achados)


def comando(pid: int) -> str:
    try:
        with open('/proc/%s/cmdline' % pid, 'rb') as arquivo:
            return arquivo.read().replace(b'\0', b' ').decode('utf-8', 'replace')
    except OSError:
        return ''


def inicio_de(pid: int) -> int:
    """starttime (campo 22 de /proc/<pid>/stat): o que o arquivo de grupos anota."""
    campos = stat(pid)
    assert campos is not None
    return int(campos[19])


def boot() -> str:
    with open('/proc/sys/kernel/random/boot_id') as arquivo:
        return arquivo.read().strip()


def gravar_arquivo(caminho: str, **entrada: object) -> None:
    base = {
        'boot': boot(),
        'marca': 'nao-e-nossa',
        'rotulo': 'teste',
        'comando': 'sleep',
        'desde': '2026-09-01T03:00:00',
        'ouvinte': 1,
    }
    base.update(entrada)
    with open(caminho, 'w', encoding='utf-8') as arquivo:
        json.dump({'grupos': [base]}, arquivo)


@pytest.fixture
def grupo_alheio():
    """Um grupo de processos de outro programa (um sleep em sessão própria)."""
    processo = subprocess.Popen(['sleep', '120'], start_new_session=True)
    yield processo
    processo.kill()
    processo.wait()


# ------------------------------------------------------ encerrar_sobra, unidade


@pytest.mark.parametrize('diferenca', ['inicio', 'boot'])
def test_pid_reciclado_nao_e_morto(tmp_path, grupo_alheio, diferenca):
    """O número anotado agora e de outro programa: nasceu em outra hora (ou outro boot)."""
    arquivo = str(tmp_path / 'ouvinte-ferramenta.json')
    pid = grupo_alheio.pid
    if diferenca == 'inicio':
        gravar_arquivo(arquivo, pgid=pid, inicio=inicio_de(pid) - 1)
    else:
        gravar_arquivo(arquivo, pgid=pid, inicio=inicio_de(pid), boot='outro-boot')
    log = Log()
    assert supervisor.encerrar_sobra(arquivo, log, graca=0.5) is None
    time.sleep(0.3)
    assert grupo_alheio.poll() is None  # continua vivo
    assert 'pid reciclado' in log.texto() and str(pid) in log.texto()
    assert not os.path.exists(arquivo)


def test_grupo_sem_lider_e_sem_a_marca_nao_e_morto(tmp_path):
    """Líder morto: só um membro com a nossa marca no ambiente prova que o grupo e nosso."""
    lider = subprocess.Popen(
        ['bash', '-c', 'sleep 120 & echo $!'], start_new_session=True, stdout=subprocess.PIPE
    )
    neto = int(lider.stdout.readline())
    lider.wait()
    try:
        arquivo = str(tmp_path / 'ouvinte-ferramenta.json')
        gravar_arquivo(arquivo, pgid=lider.pid, inicio=inicio_de(neto))
        log = Log()
        assert supervisor.encerrar_sobra(arquivo, log, graca=0.5) is None
        assert vivos(lider.pid) == [neto]  # intocado
        assert 'pid reciclado' in log.texto()
    finally:
        os.kill(neto, signal.SIGKILL)


def sobra(tmp_path, corpo: str, rotulo: str = 'varredura/carregar-todas'):
    """
    Um "ouvinte" de verdade (outro processo) roda `corpo` por supervisor.rodar com
    o arquivo de grupos e morre com SIGKILL. Devolve (arquivo, pgid).
    """
    arquivo = str(tmp_path / 'ouvinte-ferramenta.json')
    pronto = tmp_path / 'pronto'
    programa = (
        'import sys\n'
        'from contextia_sync import supervisor\n'
        'supervisor.rodar(["bash", "-c", sys.argv[1]], sys.argv[2],'
        ' arquivo_grupo=sys.argv[3])\n'
    )
    pai = subprocess.Popen(
        [sys.executable, '-c', programa, '%s\ntouch %s\nwait' % (corpo, pronto), rotulo, arquivo],
        cwd=RAIZ,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    esperar(lambda: pronto.exists() and os.path.exists(arquivo), 30, 0.1)
    with open(arquivo, encoding='utf-8') as f:
        [entrada] = json.load(f)['grupos']
    pai.kill()
    pai.wait()
    return arquivo, entrada['pgid']


def test_filho_direto_recebe_sigterm_quando_o_pai_morre(tmp_path):
    arquivo, pgid = sobra(tmp_path, 'sleep 300 &')
    # O bash (filho direto, sem trap) morre pelo PR_SET_PDEATHSIG; o neto nao
    # recebe nada do kernel -- e o que o arquivo de grupos existe para achar.
    esperar(lambda: pgid not in vivos(pgid), 10)
    assert len(vivos(pgid)) == 1
    log = Log()
    assert supervisor.encerrar_sobra(arquivo, log, graca=1) == pgid
    assert vivos(pgid) == []
    # Lider morto: provado nosso pela marca no ambiente do neto.
    assert 'SOBRA DE UM OUVINTE ANTERIOR' in log.texto()


def test_sobra_com_o_lider_vivo_e_encerrada_e_nomeada(tmp_path):
    # O lider ignora SIGTERM: o PR_SET_PDEATHSIG nao o derruba, e so SIGKILL resolve.
    arquivo, pgid = sobra(tmp_path, 'trap "" TERM; sleep 300 &', rotulo='varredura/teste')
    time.sleep(0.5)
    membros = vivos(pgid)
    assert pgid in membros and len(membros) == 2
    log = Log()
    assert supervisor.encerrar_sobra(arquivo, log, graca=1) == pgid
    assert vivos(pgid) == []
    texto = log.texto()
    assert "a ferramenta 'varredura/teste'" in texto and 'grupo %s' % pgid in texto
    for pid in membros:
        assert str(pid) in texto
    assert 'encerrado com SIGKILL' in texto
    assert not os.path.exists(arquivo)
    # Rodar de novo nao acha nada.
    assert supervisor.encerrar_sobra(arquivo, Log()) is None


def test_rodar_anota_e_tira_o_grupo(tmp_path):
    arquivo = str(tmp_path / 'ouvinte-ferramenta.json')
    visto = {}

    def ao_iniciar(pid: int) -> None:
        with open(arquivo, encoding='utf-8') as f:
            visto.update(json.load(f)['grupos'][0], pid=pid)

    r = supervisor.rodar(
        ['bash', '-c', 'echo "$%s"' % supervisor.VARIAVEL_MARCA],
        'curta',
        arquivo_grupo=arquivo,
        ao_iniciar=ao_iniciar,
        log=Log(),
    )
    assert r.ok
    assert visto['pgid'] == visto['pid'] and visto['rotulo'] == 'curta'
    assert isinstance(visto['inicio'], int) and visto['marca']
    assert not os.path.exists(arquivo)  # o grupo acabou: anotacao tirada


# ------------------------------------------------- o ouvinte de verdade


def completes(contextia, escopos: list[str]) -> list[tuple[str, str, str]]:
    """Os `complete` que o Contextia local aceitou para estas empresas."""
    caminho = os.path.join(contextia.dados, 'contextia.sqlite3')
    con = sqlite3.connect('file:%s?mode=ro' % caminho, uri=True, timeout=30)
    try:
        return con.execute(
            'SELECT p.external_id, s.dataset, s.completado_em FROM syncs s JOIN projetos p'
            ' ON p.id = s.projeto_id WHERE s.completado_em IS NOT NULL AND p.external_id IN'
            ' (%s) ORDER BY 1, 2, 3' % ','.join('?' * len(escopos)),
            escopos,
        ).fetchall()
    finally:
        con.close()


class Ouvinte:
    def __init__(self, tmp_path, erp, contextia, chave_contextia):
        self.erp = erp
        self.contextia = contextia
        self.estado = tmp_path / 'estado'
        self.mapa = erp_teste.mapeamento(tmp_path)
        self.arquivo_chaves = tmp_path / 'chaves.tsv'
        with open(self.arquivo_chaves, 'w') as arquivo:
            arquivo.writelines('%s\t%s\n' % (e, chave_contextia(e)) for e in erp.escopos)
        os.chmod(self.arquivo_chaves, 0o600)
        self.pasta = tmp_path

    def argv(self, *extra: str) -> list[str]:
        return [
            sys.executable,
            'ouvinte.py',
            '--mapping=' + self.mapa,
            '--source=generic',
            '--chaves=%s' % self.arquivo_chaves,
            '--estado=%s' % self.estado,
            '--varredura=nao',
            '--timeout-ferramenta=120',
        ] + list(extra)

    def env(self) -> dict[str, str]:
        env = dict(os.environ, CONTEXTIA_ORIGEM=self.erp.url, **self.contextia.ambiente())
        env.pop('CONTEXTIA_API_KEY', None)
        return env

    def iniciar(self, *extra: str) -> subprocess.Popen[bytes]:
        self.log = open(self.pasta / ('ouvinte-%d.log' % time.monotonic_ns()), 'w+b')
        return subprocess.Popen(
            self.argv(*extra), cwd=RAIZ, env=self.env(), stdout=self.log, stderr=subprocess.STDOUT
        )

    def rodar(self, *extra: str) -> tuple[int, str]:
        feito = subprocess.run(
            self.argv(*extra),
            cwd=RAIZ,
            env=self.env(),
            timeout=180,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        return feito.returncode, feito.stdout.decode('utf-8', 'replace')

    def pgid_da_varredura(self) -> int:
        status = self.estado / 'ouvinte-status.txt'
        achado = esperar(
            lambda: re.search(
                r'ferramenta agora ..: varredura/carregar-todas \(pid (\d+)',
                status.read_text() if status.exists() else '',
            ),
            120,
        )
        return int(achado.group(1))


@pytest.fixture
def ouvinte(tmp_path, ambiente_contextia, chave_contextia):
    erp = erp_teste.erp_sqlite(tmp_path)
    yield Ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia)
    erp.fechar()


def varredura_no_meio(o: Ouvinte) -> tuple[subprocess.Popen[bytes], int, int]:
    """Sobe o ouvinte com a varredura; devolve (ouvinte, pgid, pid do connector) enviando."""
    # Cada lote segura 3 s no servidor: o connector fica no meio do primeiro
    # dataset (5 lotes antes do complete) por bastante tempo.
    o.contextia.injetar('atraso', quantidade=300, segundos=3)
    processo = o.iniciar('--varrer-agora', '--intervalo-dados=600')
    pgid = o.pgid_da_varredura()
    esperar(lambda: o.contextia.falhas_injetadas()['atraso'] >= 1, 60)
    [conector] = esperar(
        lambda: [
            p for p in vivos(pgid) if p != pgid and 'contextia_sync.cli.conector' in comando(p)
        ]
    )
    return processo, pgid, conector


@pytest.mark.lento
def test_kill_9_na_varredura_o_connector_morre_junto(ouvinte):
    o = ouvinte
    antes = completes(o.contextia, o.erp.escopos)
    processo, pgid, conector = varredura_no_meio(o)
    try:
        processo.kill()  # kill -9: nenhum finally do ouvinte roda
        processo.wait()
        # PR_SET_PDEATHSIG: o kernel manda SIGTERM ao bash, que o repassa ao connector.
        esperar(lambda: vivos(pgid) == [], 10)
    finally:
        for pid in vivos(pgid):
            os.kill(pid, signal.SIGKILL)
        o.contextia.limpar_falhas()
    time.sleep(3)  # um orfao teria agora o servidor livre
    assert completes(o.contextia, o.erp.escopos) == antes

    # A subida seguinte acha a anotacao e ve que o grupo ja acabou.
    codigo, saida = o.rodar('--once')
    assert codigo == 0, saida
    assert "a ferramenta 'varredura/carregar-todas'" in saida and 'já tinha terminado' in saida
    assert 'SOBRA' not in saida
    assert not (o.estado / supervisor.ARQUIVO_GRUPO).exists()


@pytest.mark.lento
def test_connector_orfao_e_encerrado_na_subida_seguinte_antes_de_tudo(ouvinte):
    """
    O bash morreu sem repassar nada (SIGKILL nele também, como um OOM): o
    connector fica órfão, e só a subida seguinte pode acha-lo.
    """
    o = ouvinte
    antes = completes(o.contextia, o.erp.escopos)
    processo, pgid, conector = varredura_no_meio(o)
    try:
        os.kill(pgid, signal.SIGKILL)  # o bash primeiro: o SIGTERM do kernel nao o acha
        processo.kill()
        processo.wait()
        time.sleep(0.5)
        assert vivos(pgid) == [conector]  # orfao, adotado, ainda enviando
        codigo, saida = o.rodar('--once')
    finally:
        for pid in vivos(pgid):
            os.kill(pid, signal.SIGKILL)
        o.contextia.limpar_falhas()
    assert codigo == 0, saida
    assert vivos(pgid) == []
    linha = next(x for x in saida.splitlines() if 'SOBRA DE UM OUVINTE ANTERIOR' in x)
    assert "a ferramenta 'varredura/carregar-todas'" in linha
    assert 'grupo %s' % pgid in linha and '%s (' % conector in linha
    assert 'contextia_sync.cli.conector' in linha and 'ouvinte pid %s' % processo.pid in linha
    assert 'grupo %s (varredura/carregar-todas) encerrado com SIGTERM' % pgid in saida
    # Antes de qualquer outra coisa: antes do cabecalho e de qualquer ferramenta.
    assert saida.index('SOBRA DE UM OUVINTE') < saida.index('===== ouvinte (pid')
    assert '$ ' not in saida.split('SOBRA DE UM OUVINTE')[0]
    time.sleep(3)
    assert completes(o.contextia, o.erp.escopos) == antes
