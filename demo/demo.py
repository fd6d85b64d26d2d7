#!/usr/bin/env python3
"""
`make demo` -- o produto funcionando, num comando, sobre os padrões embutidos.

    .venv/bin/python demo/demo.py [--duracao SEGUNDOS] [--escala 1.0] [--saida DIR]

O roteiro, do jeito que acontece num cliente:

  1. um ERP de demonstração em SQLite (demo/erp.py), recriado do zero;
  2. o Contextia local (contextia_local) num processo de verdade em 127.0.0.1;
  3. `provisionar.py`: um projeto e uma chave por empresa que a regra aceita
     (a inativa e recusada; a 99 está em `excluded_scopes`);
  4. a primeira carga completa (`carregar-todas.sh`, com barras de progresso);
  5. o `ouvinte.py` como processo real, com intervalo curto, e um gerador de
     movimento mudando o ERP: titulos novos, baixas, cancelamentos, um DELETE
     físico, uma tabela sem coluna de mudança, e uma empresa nova;
  6. para cada mudança, quanto tempo ela levou para ficar VISIVEL no Contextia
     (lida de volta do servidor, não deduzida do log do ouvinte);
  7. a varredura (o ouvinte reiniciado com --varrer-agora): o DELETE some;
  8. no Ctrl-C ou ao fim de --duracao: o resumo, e nenhum processo para trás.

Com --duracao a demo confere o próprio roteiro no fim e sai com 1 se alguma
etapa não aconteceu -- e assim que o teste (tests/test_demo.py) a usa.
"""

import argparse
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time

AQUI = os.path.dirname(os.path.abspath(__file__))
RAIZ = os.path.dirname(AQUI)
if RAIZ not in sys.path:
    sys.path.insert(1, RAIZ)

import erp  # noqa: E402
import movimento  # noqa: E402
from observador import Observador, percentil  # noqa: E402,F401
from processos import Ouvinte, rodar  # noqa: E402
from tela import dizer, mostrar, titulo  # noqa: E402

MAPEAMENTO = os.path.join(RAIZ, 'mappings', 'demo.json')

# Arquivo-marca da pasta de saida: a demo so apaga uma pasta que ela criou.
MARCA = '.saida-da-demo-ouvinte'

# O roteiro, em segundos desde o inicio do movimento.
QUANDO_EXCLUSAO = 10
QUANDO_STATUS = 14
QUANDO_EMPRESA = 30
VARREDURA_NO_MINIMO = 40  # depois que a empresa nova foi carregada...
VARREDURA_NO_MAXIMO = 60  # ...ou aqui, carregada ou nao
ESPERA_VARREDURA = 180  # quanto a demo espera a varredura terminar
ESPERA_FINAL = 120  # ...e, se o --duracao acabar no meio dela, quanto mais
DURACAO_DO_ROTEIRO = 75  # --duracao menor que isso nao cabe o roteiro inteiro


class Interrompida(Exception):
    """Ctrl-C ou SIGTERM: a demo para, resume e limpa."""


def _pedir_parada(sinal, quadro):  # noqa: ARG001
    raise Interrompida(signal.Signals(sinal).name)


# ---------------------------------------------------------------------------
# O roteiro
# ---------------------------------------------------------------------------


def preparar_saida(saida):
    """Recria a pasta de saída -- só se ela for da demo (tem a marca) ou vazia."""
    if os.path.isdir(saida) and os.listdir(saida):
        if not os.path.exists(os.path.join(saida, MARCA)):
            raise SystemExit(
                '%s existe, não está vazia e não foi criada pela demo (falta %s).\n'
                'A demo recria a pasta de saída a cada execução; aponte --saida para'
                ' outra pasta ou apague está.' % (saida, MARCA)
            )
        shutil.rmtree(saida)
    os.makedirs(saida, exist_ok=True)
    open(os.path.join(saida, MARCA), 'w').close()


def ambiente_da_demo(servidor, erp_path, token):
    ambiente = dict(os.environ)
    ambiente.update(
        {
            'CONTEXTIA_URL': servidor.url,
            'CONTEXTIA_ADMIN_TOKEN': token,
            'CONTEXTIA_ORIGEM': 'sqlite:///' + os.path.abspath(erp_path),
            'CONTEXTIA_MAPPING': MAPEAMENTO,
            'CONTEXTIA_PYTHON': sys.executable,
            'CONTEXTIA_COLETA': RAIZ,
            'PYTHONUNBUFFERED': '1',
        }
    )
    for nome in ('CONTEXTIA_API_KEY', 'CONTEXTIA_INTAKE_URL', 'CONTEXTIA_CA_BUNDLE'):
        ambiente.pop(nome, None)
    return ambiente


def apresentar_empresas(erp_path, chaves, excluidos):
    import sqlite3

    conexao = sqlite3.connect('file:%s?mode=ro' % erp_path, uri=True)
    try:
        linhas = conexao.execute(
            'SELECT EMPRESA_ID, RAZAO_SOCIAL, ATIVA FROM EMPRESAS ORDER BY 1'
        ).fetchall()
    finally:
        conexao.close()
    for empresa, razao, ativa in linhas:
        if str(empresa) in chaves:
            situacao = 'projeto e chave criados'
        elif str(empresa) in excluidos:
            situacao = 'fora: está em source.excluded_scopes'
        elif ativa != 'S':
            situacao = 'fora: a regra de projeto recusa (ATIVA = %r)' % ativa
        else:
            situacao = 'SEM CHAVE (inesperado)'
        dizer('  empresa %-3s %-42s %s' % (empresa, razao[:42], situacao))


def main(argv=None):
    p = argparse.ArgumentParser(
        description='Demonstração do ouvinte: ERP SQLite -> Contextia local, ao vivo.'
    )
    p.add_argument(
        '--duracao',
        type=float,
        default=0,
        metavar='SEGUNDOS',
        help='segundos de movimento ao vivo depois da carga inicial; 0 (padrão)'
        ' = até o Ctrl-C. O roteiro inteiro pede pelo menos %ss' % DURACAO_DO_ROTEIRO,
    )
    p.add_argument(
        '--escala',
        type=float,
        default=1.0,
        help='tamanho do ERP (1.0 = ~57 mil linhas; o teste usa 0.05)',
    )
    p.add_argument(
        '--saida',
        default=os.path.join(AQUI, 'saida'),
        metavar='DIR',
        help='pasta recriada a cada execução (padrão demo/saida)',
    )
    p.add_argument(
        '--intervalo',
        type=int,
        default=2,
        metavar='S',
        help='--intervalo-dados do ouvinte (padrão 2; em produção, 30 a 60)',
    )
    p.add_argument(
        '--ritmo',
        type=float,
        default=1.0,
        metavar='S',
        help='segundos entre mudanças do gerador (padrão 1.0)',
    )
    args = p.parse_args(argv)

    for sinal in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sinal, _pedir_parada)

    saida = os.path.abspath(args.saida)
    demo = Demo(args, saida)
    try:
        return demo.executar()
    except Interrompida as e:
        dizer('parada pedida (%s)' % e)
        demo.resumir(interrompida=True)
        return 0
    finally:
        # Um segundo Ctrl-C no meio da limpeza deixaria processo para tras.
        for sinal in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sinal, signal.SIG_IGN)
        demo.limpar()


class Demo:
    def __init__(self, args, saida):
        self.args = args
        self.saida = saida
        self.erp_path = os.path.join(saida, 'erp.sqlite')
        self.chaves_path = os.path.join(saida, 'chaves.tsv')
        self.estado_dir = os.path.join(saida, 'estado')
        self.servidor = None
        self.ouvinte = None
        self.gerador = None
        self.mudancas = []
        self.marcos = {}  # nome -> segundos desde o inicio do movimento
        self.inicio_movimento = None
        self.resumido = False

    # -- etapas -------------------------------------------------------------

    def executar(self):
        args = self.args
        titulo('1. O ERP do cliente (SQLite de demonstração)')
        preparar_saida(self.saida)
        totais = erp.construir(self.erp_path, args.escala)
        dizer(
            '%s linhas em %s: %s'
            % (
                '{:,}'.format(sum(totais.values())).replace(',', '.'),
                mostrar(self.erp_path),
                ', '.join('%s %s' % (t, n) for t, n in totais.items()),
            )
        )
        dizer('datas como TEXT "YYYY-MM-DD HH:MM:SS" (DATETIME), dinheiro DECIMAL(14,2)')

        titulo('2. O Contextia (servidor local, processo real em 127.0.0.1)')
        from contextia_local.processo import ServidorLocal

        token = secrets.token_hex(16)
        self.servidor = ServidorLocal(os.path.join(self.saida, 'contextia'), admin_token=token)
        self.servidor.__enter__()
        dizer(
            'Contextia local em %s (pid %s), dados em %s'
            % (self.servidor.url, self.servidor.pid, mostrar(self.servidor.dados))
        )
        self.ambiente = ambiente_da_demo(self.servidor, self.erp_path, token)
        # O observador le o servidor com o cliente do SDK, que le o ambiente na hora.
        os.environ['CONTEXTIA_URL'] = self.servidor.url
        os.environ.pop('CONTEXTIA_INTAKE_URL', None)
        os.environ['CONTEXTIA_ORIGEM'] = self.ambiente['CONTEXTIA_ORIGEM']

        titulo('3. Provisionamento: um projeto e uma chave por empresa')
        rodar(
            [
                sys.executable,
                os.path.join(RAIZ, 'provisionar.py'),
                '--mapping=' + MAPEAMENTO,
                '--source=generic',
                '--chaves=' + self.chaves_path,
            ],
            self.ambiente,
            'provisionar.py',
        )
        self.observador = Observador(self.chaves_path)
        chaves = self.observador.chaves()
        with open(MAPEAMENTO, encoding='utf-8') as f:
            excluidos = [str(e) for e in json.load(f)['source']['excluded_scopes']]
        apresentar_empresas(self.erp_path, chaves, excluidos)
        dizer(
            'arquivo de chaves: %s (modo %o)'
            % (mostrar(self.chaves_path), os.stat(self.chaves_path).st_mode & 0o777)
        )

        titulo('4. Primeira carga completa (a mesma que a varredura diária faz)')
        rodar(
            ['bash', os.path.join(RAIZ, 'carregar-todas.sh'), self.chaves_path],
            self.ambiente,
            'carregar-todas.sh',
        )

        titulo('5. O ouvinte no ar')
        dizer(
            'intervalo de dados %ss, de projetos 10s, folga 30s; a varredura diária fica'
            ' desligada na demo (--varredura=nao): a demo a dispara com --varrer-agora'
            % args.intervalo
        )
        self.ouvinte = Ouvinte(
            [
                sys.executable,
                os.path.join(RAIZ, 'ouvinte.py'),
                '--mapping=' + MAPEAMENTO,
                '--source=generic',
                '--chaves=' + self.chaves_path,
                '--estado=' + self.estado_dir,
                '--intervalo-dados=%d' % args.intervalo,
                '--intervalo-projetos=10',
                '--folga=30',
                '--varredura=nao',
            ],
            self.ambiente,
            os.path.join(self.saida, 'ouvinte.log'),
        )
        self.ouvinte.iniciar()
        self.esperar_primeiro_ciclo()

        titulo('6. Movimento no ERP, e quando cada mudança fica visível no Contextia')
        dizer(
            'inclusão e alteração: no próximo ciclo de dados (a cada %ss);'
            ' exclusão física: só na varredura' % args.intervalo
        )
        if args.duracao:
            dizer(
                'a demo termina sozinha em %ss (--duracao); Ctrl-C encerra antes'
                % int(args.duracao)
            )
            if args.duracao < DURACAO_DO_ROTEIRO:
                dizer(
                    'AVISO: o roteiro inteiro (empresa nova, varredura) pede --duracao'
                    ' de pelo menos %s' % DURACAO_DO_ROTEIRO
                )
        else:
            dizer('Ctrl-C encerra e mostra o resumo')
        self.movimentar()
        return self.resumir()

    def esperar_primeiro_ciclo(self):
        """O ouvinte fixa as marcas de água no 1o ciclo; mexer antes disso não vale."""
        status = os.path.join(self.estado_dir, 'ouvinte-status.txt')
        limite = time.monotonic() + 120
        while not os.path.exists(status):
            if not self.ouvinte.vivo():
                raise SystemExit(
                    'o ouvinte saiu antes do primeiro ciclo. Fim do log:\n  '
                    + '\n  '.join(self.ouvinte.ultimas[-15:])
                )
            if time.monotonic() > limite:
                raise SystemExit(
                    'o ouvinte não completou o primeiro ciclo em 120s; ver %s' % self.ouvinte.log
                )
            time.sleep(0.2)
        dizer(
            'primeiro ciclo feito: marcas de água fixadas (nada reenviado: a carga'
            ' completa já foi feita)'
        )

    def varredura_registrada(self):
        """O status do ouvinte diz que a varredura terminou (ela grava o dia no estado)."""
        try:
            with open(os.path.join(self.estado_dir, 'ouvinte-status.txt'), encoding='utf-8') as f:
                for linha in f:
                    if linha.startswith('última varredura'):
                        return 'nenhuma' not in linha
        except FileNotFoundError:
            pass
        return False

    def registrar(self, m):
        self.mudancas.append(m)
        onde = ('todas (%s)' % len(m.escopos)) if len(m.escopos) > 1 else m.escopos[0]
        dizer('ERP       #%-3s %-18s empresa %-10s %s' % (m.numero, m.dataset, onde, m.descricao))
        if m.remocao:
            dizer(
                '          #%-3s exclusão NÃO tem coluna de mudança: o ouvinte não a vê;'
                ' o registro continua no Contextia até a varredura' % m.numero
            )
        elif not m.ao_vivo:
            dizer(
                '          #%-3s tabela fora do ao-vivo: esta mudança espera a varredura' % m.numero
            )

    def agora(self):
        return time.monotonic() - self.inicio_movimento

    def movimentar(self):
        args = self.args
        chaves = self.observador.chaves()
        self.gerador = movimento.Gerador(self.erp_path, sorted(chaves, key=int))
        self.inicio_movimento = time.monotonic()
        fim = self.inicio_movimento + args.duracao if args.duracao else None
        proxima_mudanca = self.inicio_movimento + 1
        proxima_conferencia = self.inicio_movimento + 0.5
        varredura_em = None
        empresa_nova = None  # {dataset: linhas esperadas}
        nova = str(erp.EMPRESA_NOVA[0])
        pendentes = []

        while fim is None or time.monotonic() < fim:
            if not self.ouvinte.vivo() and varredura_em != 'reiniciando':
                raise SystemExit(
                    'o ouvinte morreu (código %s). Fim do log:\n  %s'
                    % (self.ouvinte.processo.returncode, '\n  '.join(self.ouvinte.ultimas[-15:]))
                )
            t = self.agora()
            chaves = self.observador.chaves()
            escopos = sorted(chaves, key=int)
            pausado = varredura_em is not None and 'varredura_fim' not in self.marcos

            # -- o roteiro --------------------------------------------------
            if 'exclusao' not in self.marcos and t >= QUANDO_EXCLUSAO:
                self.marcos['exclusao'] = t
                self.registrar(self.gerador.exclusao_fisica())
                pendentes.append(self.mudancas[-1])
            if 'status' not in self.marcos and t >= QUANDO_STATUS:
                self.marcos['status'] = t
                self.registrar(self.gerador.status_sem_coluna(escopos))
                pendentes.append(self.mudancas[-1])
            if 'empresa' not in self.marcos and t >= QUANDO_EMPRESA:
                self.marcos['empresa'] = t
                empresa_nova = self.gerador.empresa_nova(max(0.02, args.escala * 0.3))
                dizer(
                    'ERP       empresa NOVA %s (%s) cadastrada, ativa, com %s linhas'
                    ' -- o ciclo de projetos do ouvinte vai achar'
                    % (nova, erp.EMPRESA_NOVA[1], sum(empresa_nova.values()))
                )
            if empresa_nova and 'empresa_chave' not in self.marcos and nova in chaves:
                self.marcos['empresa_chave'] = t
                dizer(
                    'Contextia empresa %s PROVISIONADA (projeto + chave no arquivo)'
                    ' %.1fs depois do cadastro' % (nova, t - self.marcos['empresa'])
                )
            if 'empresa_chave' in self.marcos and 'empresa_carga' not in self.marcos:
                contagens = self.observador.contagens(chaves[nova])
                if all((contagens.get(d) or 0) >= n for d, n in empresa_nova.items()):
                    self.marcos['empresa_carga'] = t
                    dizer(
                        'Contextia empresa %s CARREGADA (%s) %.1fs depois do cadastro'
                        % (
                            nova,
                            ', '.join('%s %s' % (d, contagens[d]) for d in sorted(empresa_nova)),
                            t - self.marcos['empresa'],
                        )
                    )
                    self.gerador.empresas.append(int(nova))
            if (
                varredura_em is None
                and 'exclusao' in self.marcos
                and (
                    ('empresa_carga' in self.marcos and t >= VARREDURA_NO_MINIMO)
                    or t >= VARREDURA_NO_MAXIMO
                )
            ):
                varredura_em = 'reiniciando'
                self.varrer()
                varredura_em = t
                self.marcos['varredura'] = t
            if varredura_em not in (None, 'reiniciando') and 'varredura_fim' not in self.marcos:
                esperam = [m for m in self.mudancas if not m.ao_vivo]
                if all(m.entregue for m in esperam) and self.varredura_registrada():
                    self.marcos['varredura_fim'] = t
                    dizer(
                        'Contextia varredura concluida em %.1fs: o DELETE sumiu e a tabela'
                        ' sem coluna de mudança chegou; o gerador volta' % (t - varredura_em)
                    )
                elif t - varredura_em > ESPERA_VARREDURA:
                    self.marcos['varredura_fim'] = t
                    dizer(
                        'AVISO: a varredura não terminou em %ss; o gerador volta assim'
                        ' mesmo' % ESPERA_VARREDURA
                    )

            # -- o expediente ------------------------------------------------
            if not pausado and time.monotonic() >= proxima_mudanca:
                m = self.gerador.qualquer(escopos)
                self.registrar(m)
                pendentes.append(m)
                proxima_mudanca += args.ritmo
                if time.monotonic() > proxima_mudanca:
                    proxima_mudanca = time.monotonic() + args.ritmo

            # -- o que ja chegou ---------------------------------------------
            if time.monotonic() >= proxima_conferencia:
                chegaram = self.observador.conferir(
                    pendentes, varredura_comecou=varredura_em not in (None, 'reiniciando')
                )
                for m in chegaram:
                    pendentes.remove(m)
                    self.anunciar(m)
                proxima_conferencia = time.monotonic() + 0.5

            time.sleep(0.05)

        # Fim do tempo com a varredura no meio: ela e parte do roteiro, entao a
        # demo espera ela terminar (numa maquina lenta ela pode passar do fim).
        comecou = varredura_em not in (None, 'reiniciando')
        if comecou and 'varredura_fim' not in self.marcos:
            dizer(
                'fim do tempo com a varredura em andamento: esperando ela terminar'
                ' (até %ss)' % ESPERA_FINAL
            )
            limite = time.monotonic() + ESPERA_FINAL
            while time.monotonic() < limite and self.ouvinte.vivo():
                for m in self.observador.conferir(pendentes, True):
                    pendentes.remove(m)
                    self.anunciar(m)
                if (
                    all(m.entregue for m in self.mudancas if not m.ao_vivo)
                    and self.varredura_registrada()
                ):
                    self.marcos['varredura_fim'] = self.agora()
                    dizer('Contextia varredura concluida em %.1fs' % (self.agora() - varredura_em))
                    break
                time.sleep(0.5)

        # Uma ultima conferencia, para nao contar como "a caminho" o que chegou
        # no ultimo meio segundo.
        for m in self.observador.conferir(pendentes, comecou):
            pendentes.remove(m)
            self.anunciar(m)

    def anunciar(self, m):
        if m.remocao:
            dizer(
                'Contextia #%-3s %-18s ID %s REMOVIDO pela varredura (%.1fs depois do'
                ' DELETE)' % (m.numero, m.dataset, m.chave, m.latencia())
            )
        elif not m.ao_vivo:
            dizer(
                'Contextia #%-3s %-18s chegou com a varredura, em todas as empresas'
                % (m.numero, m.dataset)
            )
        else:
            dizer(
                'Contextia #%-3s %-18s ID %-7s visível em %4.1fs'
                % (m.numero, m.dataset, m.chave, m.latencia())
            )

    def varrer(self):
        """A varredura diária, agora: o ouvinte reinicia com --varrer-agora."""
        dizer(
            'VARREDURA: o gerador pausa; o ouvinte recebe SIGTERM, termina o ciclo e'
            ' volta com --varrer-agora (a carga completa que as 03:30 roda sozinha)'
        )
        codigo = self.ouvinte.parar()
        dizer(
            'ouvinte encerrado (código %s); marcas de água ficam em %s'
            % (codigo, mostrar(self.estado_dir))
        )
        self.ouvinte.iniciar(['--varrer-agora'])

    # -- fim ----------------------------------------------------------------

    def mostrar_status(self):
        """O arquivo que o alerta lê em produção (find -mmin), como ele está agora."""
        caminho = os.path.join(self.estado_dir, 'ouvinte-status.txt')
        try:
            with open(caminho, encoding='utf-8') as f:
                linhas = f.read().splitlines()
        except FileNotFoundError:
            return
        titulo('O status do ouvinte (%s, o que um alerta lê)' % mostrar(caminho))
        for linha in linhas:
            print('  ' + linha)

    def resumir(self, interrompida=False):
        if self.resumido or self.inicio_movimento is None:
            return 0
        self.resumido = True
        self.mostrar_status()
        titulo('Resumo')
        ao_vivo = [m for m in self.mudancas if m.ao_vivo]
        entregues = [m for m in ao_vivo if m.entregue]
        latencias = [m.latencia() for m in entregues]
        so_varredura = [m for m in self.mudancas if not m.ao_vivo]
        print(
            'mudanças feitas no ERP .......: %d (%d ao vivo, %d só pela varredura)'
            % (len(self.mudancas), len(ao_vivo), len(so_varredura))
        )
        print(
            'entregues ao vivo ............: %d de %d%s'
            % (
                len(entregues),
                len(ao_vivo),
                ''
                if len(entregues) == len(ao_vivo)
                else ' (as outras ainda estavam a caminho ao encerrar)',
            )
        )
        if latencias:
            print(
                'até ficar visível no Contextia: p50 %.1fs   p95 %.1fs   max %.1fs'
                '   (ouvinte a cada %ss)'
                % (
                    percentil(latencias, 0.5),
                    percentil(latencias, 0.95),
                    max(latencias),
                    self.args.intervalo,
                )
            )
        m = self.marcos
        if 'empresa' in m:
            print(
                'empresa nova %s ..............: %s'
                % (
                    erp.EMPRESA_NOVA[0],
                    'provisionada em %.1fs, carregada em %.1fs depois do cadastro'
                    % (m['empresa_chave'] - m['empresa'], m['empresa_carga'] - m['empresa'])
                    if 'empresa_carga' in m
                    else 'cadastrada; carga ainda não visível',
                )
            )
        for x in so_varredura:
            print(
                '%s: %s'
                % (
                    'DELETE fisico ................'
                    if x.remocao
                    else 'tabela sem coluna de mudança .',
                    'resolvido pela varredura' if x.entregue else 'esperando a varredura',
                )
            )
        faltou = []
        if not entregues:
            faltou.append('nenhuma mudança entregue ao vivo')
        for marco, texto in (
            ('empresa_carga', 'empresa nova carregada'),
            ('varredura_fim', 'varredura aplicada'),
        ):
            if marco not in m:
                faltou.append(texto)
        if so_varredura and not all(x.entregue for x in so_varredura):
            faltou.append('DELETE/tabela sem coluna resolvidos pela varredura')
        curta = bool(self.args.duracao) and self.args.duracao < DURACAO_DO_ROTEIRO
        if not faltou:
            print('roteiro ......................: completo')
        elif interrompida:
            print('roteiro ......................: interrompido antes de: %s' % '; '.join(faltou))
        elif curta or not self.args.duracao:
            print('roteiro ......................: não coube (%s)' % '; '.join(faltou))
        else:
            print('roteiro ......................: incompleto -- faltou: %s' % '; '.join(faltou))
        # So a execucao com --duracao suficiente promete o roteiro inteiro: e ela
        # que o teste usa, e um roteiro que nao aconteceu tem de sair com 1.
        if interrompida or not self.args.duracao or curta:
            return 0
        return 1 if faltou else 0

    def saude(self):
        """(código, linha) de `ouvinte.py --saude`: o que o monitoramento lê; None sem estado."""
        if not os.path.isdir(self.estado_dir):
            return None
        try:
            feito = subprocess.run(
                [
                    sys.executable,
                    os.path.join(RAIZ, 'ouvinte.py'),
                    '--saude',
                    '--estado=' + self.estado_dir,
                ],
                cwd=RAIZ,
                capture_output=True,
                text=True,
                timeout=60,
            )
        except (OSError, subprocess.SubprocessError) as erro:
            return None, 'a saúde não rodou: %s' % erro
        return feito.returncode, (feito.stdout.strip() or feito.stderr.strip())

    def limpar(self):
        # A saude com o ouvinte ainda no ar: e o retrato que o monitoramento veria
        # (depois do SIGTERM ela diria, com razao, "ouvinte PARADO").
        no_ar = self.ouvinte is not None and self.ouvinte.vivo()
        saude = self.saude() if no_ar else None
        if self.gerador is not None:
            self.gerador.fechar()
        if self.ouvinte is not None:
            self.ouvinte.parar()
        if self.servidor is not None:
            self.servidor.__exit__(None, None, None)
            self.servidor = None
        if saude is None:
            saude = self.saude()
        print(
            'processos ....................: ouvinte e Contextia local encerrados;'
            ' nada ficou rodando',
            flush=True,
        )
        onde = mostrar(self.saida)
        print('para olhar depois ............: %s (ERP, estado, log do ouvinte)' % onde, flush=True)
        if saude is not None:
            codigo, linha = saude
            print(
                'saúde (o que o monitoramento lê, %s; código %s):'
                % ('com o ouvinte no ar' if no_ar else 'depois de parar', codigo)
            )
            print('  $ ouvinte.py --saude --estado=%s' % mostrar(self.estado_dir))
            print('  ' + linha, flush=True)


if __name__ == '__main__':
    sys.exit(main())
