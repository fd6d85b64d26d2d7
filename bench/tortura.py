#!/usr/bin/env python3
"""
TORTURA -- a prova de que nenhuma linha se perde em silêncio.

    .venv/bin/python bench/tortura.py                      # modo curto, PostgreSQL (~2 min)
    .venv/bin/python bench/tortura.py --modo=longo --banco=ambos   # >= 20 min por banco

Roda os processos DE VERDADE sob carga hostil e confere cada linha no fim:

  * origem PostgreSQL ou MariaDB, num banco novo; várias empresas (uma excluída,
    uma inativa, uma que aparece no meio); datasets com e sem `key`, uma tabela
    de domínio e uma que recebe um carimbo em massa;
  * carga em várias conexões: inclusões, alterações, cancelamentos, exclusões
    físicas, linhas que mudam de empresa, transações atrasadas até metade da
    `--folga`, rajada acima do `--maximo-por-ciclo`, e uma transação que comita
    DEPOIS da folga (o limite documentado da estratégia `coluna`);
  * dado sujo: carimbo no futuro, registros envenenados (NaN, acima do limite de
    bytes do intake), carimbo em massa numa tabela que depois fica quieta, o
    relógio da origem voltando, o arquivo de chaves editado com BOM, `kill -9`
    no meio da varredura, e o Contextia respondendo 200 com corpo que não é do
    intake;
  * o `ouvinte.py` como processo real, morto com kill -9 (às vezes SIGTERM) em
    momentos aleatórios e reiniciado; um segundo ouvinte tentado de propósito;
  * o Contextia local injetando 500/503, 429 com Retry-After, respostas lentas,
    conexões derrubadas e 200 malformado; conexões da origem derrubadas.

`--estrategia=binlog` / `slot_logico`: o mesmo, lendo o log num servidor
privado (tortura_log.py), e nada que a `coluna` desculpa é desculpa.

O que é verificado e as desculpas são decididos pela PRÓPRIA tortura: as
empresas vêm do cadastro da origem e da regra de projeto (SQL próprio), o
Contextia é lido de volta por HTTP próprio, e uma entrega à varredura só é
desculpa se casa com uma rajada que a tortura injetou. Todo achado reprova, e
é decidido antes do veredito. Código de saída 0 só se nada falhou. Ver
docs/tortura.md.
"""

import argparse
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid

AQUI = os.path.dirname(os.path.abspath(__file__))
RAIZ = os.path.dirname(AQUI)
for _caminho in (AQUI, RAIZ, os.path.join(RAIZ, 'sources')):
    if _caminho not in sys.path:
        sys.path.insert(0, _caminho)

import tortura_contextia as contextia_http  # noqa: E402
import tortura_log as log  # noqa: E402
import tortura_origem as origem  # noqa: E402
import tortura_processos as processos  # noqa: E402
import tortura_verificar as verificar  # noqa: E402

# Os modos. O curto cabe no `make test` (alvo: bem menos de 3 min); o longo é a
# prova de verdade (>= 20 min de carga por banco); o médio (~5 min) confere o
# longo sem pagar o preço dele.
MODOS = {
    'curto': dict(
        duracao=40,
        intervalo=1,
        intervalo_projetos=4,
        folga=6,
        maximo=250,
        conexoes=4,
        ritmo=4.0,
        taxa=0.02,
        periodo_kill=(3.0, 7.0),
        periodo_conexao=(2.0, 5.0),
        fracao_sigterm=0.25,
        rajadas=1,
        rajada_em=0.45,
        alem_da_folga=1,
        por_empresa=30,
        limite_total=300,
        passo_relogio=15,
        intervalo_reconciliacao=10,
    ),
    'medio': dict(
        duracao=300,
        intervalo=2,
        intervalo_projetos=8,
        folga=15,
        maximo=300,
        conexoes=5,
        ritmo=3.0,
        taxa=0.02,
        periodo_kill=(6.0, 25.0),
        periodo_conexao=(3.0, 12.0),
        fracao_sigterm=0.25,
        rajadas=1,
        rajada_em=0.7,
        alem_da_folga=2,
        por_empresa=120,
        limite_total=300 + 600,
        passo_relogio=25,
        intervalo_reconciliacao=30,
    ),
    'longo': dict(
        duracao=1200,
        intervalo=2,
        intervalo_projetos=10,
        folga=20,
        maximo=300,
        conexoes=5,
        ritmo=3.0,
        taxa=0.02,
        periodo_kill=(8.0, 40.0),
        periodo_conexao=(3.0, 15.0),
        fracao_sigterm=0.25,
        rajadas=2,
        rajada_em=0.8,
        alem_da_folga=3,
        por_empresa=200,
        limite_total=1200 + 900,
        passo_relogio=30,
        intervalo_reconciliacao=60,
    ),
}

# As estratégias que a tortura sabe torturar. Com a reconciliação, a exclusão
# física deixa de ser desculpa (docs/tortura.md, "Exclusões ao vivo"); com as que
# leem o log (`binlog`, `slot_logico`), nada que a `coluna` desculpa é desculpa:
# nem a exclusão, nem o commit além da folga, nem a rajada acima do teto
# (docs/tortura.md, "Os modos por log").
ESTRATEGIAS = ('coluna', 'coluna+reconciliacao') + tuple(log.BANCO)
RECONCILIACAO = 'coluna+reconciliacao'

TIPOS_DE_FALHA = ('500', '503', '429', 'atraso', 'derrubar', 'corpo_invalido')
# O limite de bytes do lote no Contextia local da tortura, e o registro envenenado
# que sozinho passa dele (413 mesmo isolado: tem de acabar na quarentena).
LIMITE_BYTES_LOTE = 256 * 1024
BYTES_DO_VENENOSO = 320 * 1024

# Em que fracao da carga cada evento acontece (o relogio espera tambem as
# transacoes alem da folga comitarem: o alargamento da leitura as pegaria).
EVENTOS = (
    ('futuro', 0.2),
    ('empresa_nova', 0.3),
    ('venenosos', 0.35),
    ('intruso', 0.4),
    ('chaves_bom', 0.5),
    ('carimbo_em_massa', 0.6),
    ('relogio', 0.75),
)

# As mensagens do produto que a tortura procura no log (comparadas sem acento).
MENSAGEM_RELOGIO = 'relógio da ORIGEM voltou'
MENSAGEM_SOBRA = 'SOBRA DE UM OUVINTE ANTERIOR'


def registro(mensagem, *args):
    agora = datetime.datetime.now().strftime('%H:%M:%S')
    print('[tortura %s] %s' % (agora, mensagem % args if args else mensagem), flush=True)


class Falhou(Exception):
    """A tortura não conseguiu rodar (não é perda de dado: e o ambiente ou o harness)."""


class Veredito:
    """
    Os motivos de reprovação, cada um com um código estável (o teste de mutações
    procura por ele) e o texto que diz a coisa. Um achado que não reprova não
    existe: ou é motivo aqui, ou é um número na tabela.
    """

    def __init__(self):
        self.motivos = []

    def falhar(self, codigo, texto):
        motivo = {'codigo': codigo, 'texto': texto}
        if motivo not in self.motivos:
            self.motivos.append(motivo)
            registro('FALHA [%s] %s', codigo, texto)

    def codigos(self):
        return sorted({m['codigo'] for m in self.motivos})

    def passou(self):
        return not self.motivos


def _data(texto):
    """A marca de água do estado (ISO) como datetime, ou None."""
    if not isinstance(texto, str):
        return None
    try:
        return datetime.datetime.fromisoformat(texto.replace('Z', '+00:00')).replace(tzinfo=None)
    except ValueError:
        return None


def _vivo(pid):
    try:
        with open('/proc/%d/stat' % pid, 'rb') as f:
            return f.read().rsplit(b')', 1)[1].split()[0] != b'Z'
    except (OSError, IndexError):
        return False


class Tortura:
    def __init__(self, banco, cfg, semente, pasta, python):
        self.banco = banco
        self.cfg = cfg
        self.semente = semente
        self.pasta = pasta
        self.python = python
        self.marca = uuid.uuid4().hex
        self.inicio = time.monotonic()
        self.prazo = self.inicio + cfg['limite_total']
        self.numeros = {
            'banco': banco,
            'semente': semente,
            'modo': cfg.get('nome'),
            'raiz': RAIZ,
            'estrategia': cfg.get('estrategia', 'coluna'),
        }
        self.vigia_remocoes = None
        self.veredito = Veredito()
        self.nome_banco = None
        self.privado = None  # o servidor com o log ligado (modos por log)
        self.servidor = None
        self.ouvinte = None
        self.entregues_vistos = {}  # {dataset: {'marca', 'visto_em'}} (pelo estado)
        self.feitos = []  # eventos que aconteceram
        self.marcas_no_commit = []
        self.leituras_do_estado = 0
        self.chaves_no_bom = None  # {escopo: [key_id ativos]} quando o BOM entrou
        self.sujo = {}  # os numeros de cada falha de dado sujo

    # -- utilidades --------------------------------------------------------------

    def restante(self):
        return self.prazo - time.monotonic()

    def falhar(self, codigo, texto):
        self.veredito.falhar(codigo, texto)

    def ambiente(self, **extra):
        amb = dict(os.environ)
        amb.update(
            {
                'CONTEXTIA_URL': self.servidor.url,
                'CONTEXTIA_ADMIN_TOKEN': self.servidor.admin_token,
                'CONTEXTIA_ORIGEM': self.url_produto,
                'CONTEXTIA_ORIGEM_TIMEOUT': '30',
                'PYTHONUNBUFFERED': '1',
                processos.VARIAVEL_MARCA: self.marca,
            }
        )
        amb.pop('CONTEXTIA_API_KEY', None)
        amb.update(extra)
        return amb

    def rodar_ferramenta(self, argv, rotulo, ambiente=None, limite=300):
        caminho = os.path.join(self.pasta, 'ferramentas.log')
        with open(caminho, 'ab') as log:
            log.write(('\n$ %s\n' % ' '.join(argv)).encode())
            log.flush()
            codigo = subprocess.call(
                argv,
                cwd=RAIZ,
                env=ambiente or self.ambiente(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=limite,
            )
        if codigo != 0:
            raise Falhou('%s saiu com %s (ver %s)' % (rotulo, codigo, caminho))

    def _motor(self):
        import sqlalchemy as sa

        return sa.create_engine(self.url, poolclass=sa.pool.NullPool)

    def _agora_do_banco(self):
        motor = self._motor()
        try:
            return origem.agora_do_banco(motor, self.banco)
        finally:
            motor.dispose()

    def _log_do_ouvinte(self, desde_a_partida=None):
        """O log do ouvinte (sem acentos), inteiro ou a partir da partida N."""
        try:
            with open(self.ouvinte.saida, encoding='utf-8', errors='replace') as f:
                texto = f.read()
        except OSError:
            return ''
        if desde_a_partida is not None:
            achou = texto.find('===== tortura: partida %d ' % desde_a_partida)
            texto = texto[achou:] if achou >= 0 else ''
        return contextia_http.sem_acentos(texto)

    # -- preparo -----------------------------------------------------------------

    def preparar(self):
        from contextia_local.processo import ServidorLocal

        registro('%s: banco novo, esquema e linhas iniciais', self.banco)
        if self.por_log():
            # O servidor do sistema nao tem o log: um privado, com o login so
            # leitura que o DBA daria (SELECT + replicacao) para o produto.
            self.privado = log.ServidorPrivado(self.cfg['estrategia'])
            nome, dono, self.url_produto = self.privado.iniciar()
            self.nome_banco, self.url = origem.criar_banco(self.banco, nome=nome, url=dono)
        else:
            self.nome_banco, self.url = origem.criar_banco(self.banco)
            self.url_produto = self.url
        self.carga = origem.Carga(
            self.banco,
            self.url,
            conexoes=self.cfg['conexoes'],
            folga=self.cfg['folga'],
            maximo=self.cfg['maximo'],
            semente=self.semente,
            ritmo=self.cfg['ritmo'],
            registro=registro,
        )
        self.carga.popular(self.cfg['por_empresa'])

        self.servidor = ServidorLocal(
            os.path.join(self.pasta, 'contextia'), falhas=True, max_bytes_lote=LIMITE_BYTES_LOTE
        )
        self.servidor.__enter__()
        # A leitura de volta e da tortura: HTTP proprio, nao o cliente do produto.
        self.contextia = contextia_http.Contextia(self.servidor.url, self.servidor.admin_token)

        self.mapa = os.path.join(self.pasta, 'tortura.json')
        schema = os.path.join(RAIZ, 'mappings', 'mapeamento.schema.json')
        self.mapa_dados = origem.mapeamento(schema if os.path.exists(schema) else None)
        with open(self.mapa, 'w', encoding='utf-8') as f:
            json.dump(self.mapa_dados, f, indent=2)
        self.chaves = os.path.join(self.pasta, 'chaves.tsv')
        self.estado_dir = os.path.join(self.pasta, 'estado')
        os.makedirs(self.estado_dir, exist_ok=True)

        # A implantacao, como o operador faz: provisiona e carrega tudo uma vez.
        registro('implantação: provisionar.py e carregar-todas.sh')
        self.rodar_ferramenta(
            [
                self.python,
                'provisionar.py',
                '--mapping=' + self.mapa,
                '--source=generic',
                '--chaves=' + self.chaves,
            ],
            'provisionar.py',
        )
        if self.cfg.get('estrategia') == 'slot_logico':
            # O slot ANTES da carga completa (docs/ouvinte.md): o que mudar
            # desde ele vem do log; o de antes, da carga.
            self.privado.preparar_tabelas(origem.DATASETS)
            self.rodar_ferramenta(
                [
                    self.python,
                    'ouvinte.py',
                    '--mapping=' + self.mapa,
                    '--estado=' + self.estado_dir,
                    '--criar-slot',
                ],
                'ouvinte.py --criar-slot',
                self.ambiente(**self.privado.ambiente_do_dba()),
            )
        self.rodar_ferramenta(
            ['bash', os.path.join(RAIZ, 'carregar-todas.sh'), self.chaves],
            'carregar-todas.sh',
            self.ambiente(
                CONTEXTIA_MAPPING=self.mapa, CONTEXTIA_PYTHON=self.python, CONTEXTIA_COLETA=RAIZ
            ),
        )

        cfg = self.cfg
        self.ouvinte = processos.Ouvinte(
            self.python,
            [
                '--mapping=' + self.mapa,
                '--source=generic',
                '--chaves=' + self.chaves,
                '--estado=' + self.estado_dir,
                '--intervalo-dados=%d' % cfg['intervalo'],
                '--intervalo-projetos=%d' % cfg['intervalo_projetos'],
                '--varredura=nao',
                '--folga=%d' % cfg['folga'],
                '--maximo-por-ciclo=%d' % cfg['maximo'],
                '--timeout-ferramenta=300',
                '--inatividade-ferramenta=120',
            ]
            + self.argumentos_da_estrategia(),
            self.ambiente(),
            self.estado_dir,
            os.path.join(self.pasta, 'ouvinte.log'),
        )

    def reconcilia(self):
        return self.cfg.get('estrategia') == RECONCILIACAO

    def por_log(self):
        """A estratégia lê o log de transação (`binlog`, `slot_logico`)."""
        return self.cfg.get('estrategia') in log.BANCO

    def exclui_ao_vivo(self):
        """A exclusão física chega ao vivo: deixa de ser desculpa, e o vigia confere."""
        return self.reconcilia() or self.por_log()

    def sem_key(self):
        """Os datasets sem `key`: com o log, só na varredura (o produto diz por quê)."""
        return [d for d in origem.DATASETS if d not in verificar.COM_KEY]

    def argumentos_da_estrategia(self):
        if self.por_log():
            return ['--estrategia=' + self.cfg['estrategia']]
        if not self.reconcilia():
            return []
        return [
            '--estrategia=' + RECONCILIACAO,
            '--intervalo-reconciliacao=%d' % self.cfg['intervalo_reconciliacao'],
        ]

    def _desculpa_da_remocao(self, escopo, dataset, chave):
        """A classe estreita de uma remoção que a própria tortura explica, ou None."""
        if escopo in self.carga.movidos.get(dataset, {}).get(chave, ()):
            # A tortura tirou a linha desta empresa (e talvez a devolveu): a saída
            # daqui foi certa, e a volta chega pela `coluna`.
            return 'mudou_de_empresa'
        if chave in self.carga.apagados.get(dataset, ()):
            # Apagada e reinserida: o limite conhecido (a chave que volta nos
            # milissegundos entre a reconferência e o POST de remoção sai viva e
            # volta na reconciliação seguinte). A carga de hoje não reinsere chaves:
            # se aparecer, é contada aqui, nunca calada.
            return 'reinserida_na_remocao'
        return None

    def iniciar_vigia_de_remocoes(self):
        """Com a reconciliação: a remoção de linha viva é conferida sem parar."""
        self.vigia_remocoes = None
        if not self.exclui_ao_vivo():
            return
        motor = self._motor()
        self.motor_da_vigia = motor

        def escopos():
            return origem.empresas_da_regra(motor, self.mapa_dados).aceitas

        def chaves():
            return contextia_http.ler_arquivo_de_chaves(self.chaves)

        self.vigia_remocoes = verificar.VigiaDeRemocoes(
            self.contextia,
            motor,
            self.carga._proteger,
            chaves,
            escopos,
            self._desculpa_da_remocao,
            periodo=3.0,
        )
        self.vigia_remocoes.iniciar()

    def status_da_reconciliacao(self):
        """`datasets[].reconciliacao` do ouvinte-status.json (lido do disco)."""
        try:
            with open(os.path.join(self.estado_dir, 'ouvinte-status.json'), encoding='utf-8') as f:
                status = json.load(f)
        except (OSError, ValueError):
            return {}
        saida = {}
        for item in status.get('datasets') or []:
            rec = item.get('reconciliacao') or {}
            if rec:
                saida[item.get('dataset')] = {
                    c: rec.get(c)
                    for c in ('removidas_total', 'recusa', 'falhas_seguidas', 'ultima_em')
                }
        return saida

    def esperar_marcas(self):
        """
        A primeira subida só fixa as marcas (ou, por log, a posição do log): a
        carga começa depois disso.
        """
        self.ouvinte.iniciar()
        fim = time.monotonic() + 60
        while time.monotonic() < fim:
            if self.por_log():
                if self._posicao_do_log():
                    return
            else:
                ok, estado = self.ouvinte.estado()
                marcas = (estado or {}).get('marca_agua') or {}
                if ok and len([v for v in marcas.values() if v is not None]) >= len(
                    origem.DATASETS
                ):
                    return
            if not self.ouvinte.vivo():
                raise Falhou(
                    'o ouvinte saiu na primeira subida (código %s); ver %s'
                    % (self.ouvinte.codigo(), self.ouvinte.saida)
                )
            time.sleep(0.2)
        raise Falhou('o ouvinte não fixou as marcas iniciais em 60 s; ver %s' % self.ouvinte.saida)

    def _posicao_do_log(self):
        """A posição do log que o ouvinte gravou no estado, ou None."""
        caminho = os.path.join(self.estado_dir, log.ARQUIVO_DA_POSICAO[self.cfg['estrategia']])
        try:
            with open(caminho, encoding='utf-8') as f:
                return json.load(f) or None
        except (OSError, ValueError):
            return None

    # -- a tortura ---------------------------------------------------------------

    def torturar(self):
        cfg = self.cfg
        chaves = contextia_http.ler_arquivo_de_chaves(self.chaves)
        escopo_amostra = str(origem.EMPRESAS_INICIAIS[0])
        self.vigia = processos.Vigia(self.marca)
        self.vigia.permitir(principal=self.ouvinte.pid)
        self.vigia.iniciar()
        self.amostrador = verificar.Amostrador(
            self.contextia,
            chaves[escopo_amostra],
            escopo_amostra,
            self.carga.mudancas,
            self.carga.trava,
        )
        self.amostrador.iniciar()
        self.iniciar_vigia_de_remocoes()
        self.matador = processos.Matador(
            self.ouvinte,
            self.vigia,
            self.marca,
            periodo=cfg['periodo_kill'],
            fracao_sigterm=cfg['fracao_sigterm'],
            espera_sigterm=60,
            semente=self.semente + 1,
            registro=registro,
        )
        self.conexoes = origem.MatadorDeConexoes(
            self.banco,
            self.url,
            self.nome_banco,
            self.carga.protegidos,
            periodo=cfg['periodo_conexao'],
            semente=self.semente + 2,
            replicacao=cfg.get('estrategia') == 'binlog',
        )

        taxas = {t: cfg['taxa'] for t in TIPOS_DE_FALHA}
        self.servidor.taxa_de_falhas(taxas, semente=self.semente + 3)
        # O 200 malformado tambem na fila (a taxa sozinha pode nao sortear nenhum
        # no modo curto): dois antes de processar, um depois.
        self.servidor.injetar('corpo_invalido', 2)
        self.servidor.injetar('corpo_invalido', 1, quando='depois')
        registro(
            'carga por %ss: %d conexões, kill a cada %s s, falhas %s por tipo',
            cfg['duracao'],
            cfg['conexoes'],
            cfg['periodo_kill'],
            cfg['taxa'],
        )
        self.carga.iniciar()
        self.matador.iniciar()
        self.conexoes.iniciar()

        duracao = cfg['duracao']
        atraso_alem = self.atraso_alem_da_folga()
        eventos = [(fracao * duracao, nome) for nome, fracao in EVENTOS]
        # Rajada tarde no modo longo: depois dela o dataset espera a varredura, e
        # antes disso ele tem de passar a maior parte da tortura AO VIVO.
        for n in range(cfg['rajadas']):
            inicio = cfg['rajada_em']
            eventos.append(
                ((inicio + (0.95 - inicio) * n / max(1, cfg['rajadas'])) * duracao, 'rajada')
            )
        for n in range(cfg['alem_da_folga']):
            # Comita com a carga ainda rodando: a marca precisa seguir andando.
            momento = (0.15 + 0.4 * n / max(1, cfg['alem_da_folga'])) * duracao
            momento = min(momento, duracao - atraso_alem - 3 * cfg['intervalo'])
            eventos.append((max(1.0, momento), 'alem_da_folga'))
        eventos.sort()

        comeco = time.monotonic()
        while True:
            decorrido = time.monotonic() - comeco
            if decorrido >= duracao:
                break
            if self.restante() < 120:
                self.falhar(
                    'tortura_incompleta', 'prazo total curto: carga encerrada em %.0fs' % decorrido
                )
                break
            for item in [e for e in eventos if e[0] <= decorrido]:
                if (
                    item[1] == 'relogio'
                    and not self._alem_da_folga_comitadas()
                    and decorrido < duracao - 3
                ):
                    continue  # espera a transacao alem da folga comitar
                eventos.remove(item)
                self._evento(item[1], atraso_alem)
            self._olhar_pendentes()
            self._olhar_alem_da_folga()
            self._matar_na_carga_inicial()
            time.sleep(0.2)
        for _, evento in eventos:
            self.falhar('tortura_incompleta', 'o evento %s não aconteceu na carga' % evento)

        registro('fim da carga; esperando as transações em voo comitarem')
        vivas = self.carga.parar(espera=atraso_alem + 30)
        if vivas:
            self.falhar('tortura_incompleta', 'threads da carga não terminaram: %s' % vivas)
        if getattr(self, 'intruso', None) is not None:
            self.intruso.join(60)
        self.matador.parar()
        self.conexoes.parar()
        injetadas = self.servidor.falhas_injetadas()
        self.numeros['falhas_injetadas'] = {t: injetadas.get(t, 0) for t in TIPOS_DE_FALHA}
        self.servidor.taxa_de_falhas({})
        self.matador.garantir_vivo()
        self.fim_carga = self._agora_do_banco()
        self.fim_carga_parede = time.time()

    def _alem_da_folga_comitadas(self):
        return len(self.carga.alem_da_folga) >= self.cfg['alem_da_folga']

    def _evento(self, evento, atraso_alem):
        try:
            if evento == 'empresa_nova':
                # As mortes ao acaso esperam: a proxima e a de proposito, na
                # carga inicial desta empresa.
                self.matador.pausado.set()
                self.pausa_ate = time.monotonic() + 30
                self.carga.empresa_nova()
            elif evento == 'rajada':
                self.carga.rajada()
            elif evento == 'alem_da_folga':
                # Lendo o log nao ha marca a esperar: a transacao longa so comita
                # atrasada, e tem de chegar ao vivo no commit.
                self.carga.alem_da_folga_em_thread(
                    atraso_alem, None if self.por_log() else self._janela_ja_passou
                )
            elif evento == 'intruso':
                # Numa thread: o intruso leva alguns segundos para ser recusado, e o
                # laco dos eventos nao espera por ele.
                self.intruso = threading.Thread(
                    target=self.matador.tentar_intruso, name='intruso', daemon=True
                )
                self.intruso.start()
            elif evento == 'futuro':
                self.carga.futuro()
            elif evento == 'venenosos':
                self.carga.envenenar(BYTES_DO_VENENOSO)
            elif evento == 'carimbo_em_massa':
                linhas = self.carga.carimbo_em_massa('ESTOQUES')
                if linhas <= self.cfg['maximo']:
                    self.falhar(
                        'tortura_incompleta',
                        'carimbo em massa de %d linhas não passa'
                        ' do teto %d' % (linhas, self.cfg['maximo']),
                    )
            elif evento == 'chaves_bom':
                self._morte_com(self._editar_chaves_com_bom, 'arquivo de chaves com BOM')
            elif evento == 'relogio' and self.por_log():
                # O log não lê relógio nenhum: as linhas carimbadas abaixo de
                # qualquer marca menos a folga chegam como as outras.
                atras = datetime.timedelta(seconds=self.cfg['folga'] + self.cfg['passo_relogio'])
                self.carga.linhas_do_relogio(self._agora_do_banco() - atras)
                self.sujo['relogio'] = {
                    'passo_s': self.cfg['passo_relogio'],
                    'sem_estado': 'o log não tem relógio a voltar',
                }
            elif evento == 'relogio':
                self._morte_com(self._passo_do_relogio, 'relógio da origem voltou')
            self.feitos.append(evento)
        except Exception as erro:  # noqa: BLE001
            self.falhar(
                'tortura_incompleta',
                'evento %s falhou: %s: %s' % (evento, type(erro).__name__, erro),
            )

    def _morte_com(self, entre_vidas, rotulo):
        """Uma morte (kill -9) de propósito, e `entre_vidas` com o ouvinte morto."""
        antes = len(self.matador.erros_entre_vidas)
        if not self.matador.uma_morte(so_kill=True, entre_vidas=entre_vidas):
            raise RuntimeError('o ouvinte não estava vivo para a morte com %s' % rotulo)
        if len(self.matador.erros_entre_vidas) > antes:
            raise RuntimeError(self.matador.erros_entre_vidas[-1])
        registro('kill -9 com %s', rotulo)

    def _editar_chaves_com_bom(self):
        """
        O operador abre o arquivo de chaves no Bloco de Notas e salva: UTF-8 com
        BOM e CRLF. Nada pode ser reprovisionado nem revogado por isso.
        """
        with open(self.chaves, 'rb') as f:
            dados = f.read()
        texto = dados.decode('utf-8')
        if not texto.startswith(contextia_http.BOM):
            texto = contextia_http.BOM + texto
        texto = texto.replace('\r\n', '\n').replace('\n', '\r\n')
        modo = os.stat(self.chaves).st_mode & 0o777
        contextia_http.gravar_atomico(self.chaves, texto.encode('utf-8'), modo)
        self.chaves_no_bom = self._chaves_ativas()
        self.sujo['bom'] = {
            'empresas_no_arquivo': len(contextia_http.ler_arquivo_de_chaves(self.chaves))
        }

    def _chaves_ativas(self):
        """{escopo: [key_id ativo, ...]} de todo projeto, pelo admin (HTTP próprio)."""
        saida = {}
        for projeto in self.contextia.projetos():
            saida[str(projeto['external_id'])] = sorted(
                c['key_id']
                for c in self.contextia.chaves_do_projeto(projeto['id'])
                if not c.get('revogada')
            )
        return saida

    def _passo_do_relogio(self):
        """
        O relógio da origem volta (acerto para trás, fim do horário de verao num
        carimbo sem fuso). O relógio do servidor de banco desta máquina não se
        move; o que a tortura faz e o que o ouvinte veria: o estado lembra um
        relógio `passo_relogio` s a frente do de agora (o maior já lido), e as
        linhas gravadas "depois do passo" levam um carimbo ABAIXO da marca menos
        a folga. Sem o alargamento da leitura, nenhuma leitura as alcancaria.
        """
        caminho = os.path.join(self.estado_dir, 'ouvinte-estado.json')
        with open(caminho, encoding='utf-8') as f:
            estado = json.load(f)
        relogio = estado.get('relogio_origem')
        marca = _data((estado.get('marca_agua') or {}).get('titulos'))
        antes_local = _data((relogio or {}).get('local'))
        antes_utc = _data((relogio or {}).get('utc'))
        if antes_local is None or antes_utc is None or marca is None:
            raise RuntimeError(
                'o estado não tem relogio_origem {utc, local} e a marca de'
                ' titulos como a tortura espera: %r / %r'
                % (relogio, (estado.get('marca_agua') or {}).get('titulos'))
            )
        passo = datetime.timedelta(seconds=self.cfg['passo_relogio'])
        novo_local = self._agora_do_banco() + passo
        delta = novo_local - antes_local
        estado['relogio_origem'] = {
            'utc': (antes_utc + delta).isoformat(),
            'local': novo_local.isoformat(),
        }
        contextia_http.gravar_atomico(
            caminho, json.dumps(estado, indent=1).encode('utf-8'), os.stat(caminho).st_mode & 0o777
        )
        carimbo = marca - datetime.timedelta(seconds=self.cfg['folga'] + 1.5)
        self.carga.linhas_do_relogio(carimbo)
        self.partida_do_relogio = self.ouvinte.partidas + 1
        self.sujo['relogio'] = {
            'passo_s': self.cfg['passo_relogio'],
            'carimbo': str(carimbo),
            'marca': str(marca),
        }

    def _matar_na_carga_inicial(self):
        """
        Uma das mortes cai DE PROPOSITO na carga inicial da empresa nova (kill -9
        com o conector rodando): o ouvinte que volta tem de completar a carga,
        senão o histórico da empresa nova só chega na varredura.
        """
        if self.numeros.get('kill_na_carga_inicial') or self.carga.empresa_nova_em is None:
            return
        if time.monotonic() > getattr(self, 'pausa_ate', 0):
            self.matador.pausado.clear()
        status = self.ouvinte.status()
        linha = re.search(r'^ferramenta agora \.+: (.*)$', status, re.MULTILINE)
        dono = re.search(r'^pid \.+: (\d+)', status, re.MULTILINE)
        # O status tem de ser do ouvinte VIVO: o de um morto fica no disco ate o
        # proximo regravar.
        if (
            linha
            and dono
            and int(dono.group(1)) == self.ouvinte.pid
            and 'carga inicial %s' % origem.EMPRESA_NOVA in linha.group(1)
        ):
            if self.matador.uma_morte(so_kill=True, esperar=False):
                self.matador.pausado.clear()
                self.numeros['kill_na_carga_inicial'] = linha.group(1)
                registro('kill -9 DURANTE a carga inicial da empresa nova (%s)', linha.group(1))

    def _olhar_alem_da_folga(self):
        """Para cada transação além da folga recem-comitada: a marca do ouvinte naquele instante."""
        for dataset, ident, atraso, carimbo in self.carga.alem_da_folga[
            len(self.marcas_no_commit) :
        ]:
            _, estado = self.ouvinte.estado()
            marca = _data(((estado or {}).get('marca_agua') or {}).get(dataset))
            self.marcas_no_commit.append(
                {
                    'dataset': dataset,
                    'id': ident,
                    'carimbo': str(carimbo),
                    'atraso_s': round(atraso, 1),
                    'marca_no_commit': str(marca),
                    'janela_ja_passou': self._janela_ja_passou(carimbo),
                }
            )

    def _janela_ja_passou(self, carimbo):
        """
        A marca gravada pelo ouvinte já passou de carimbo + folga + passo do relógio?

        O passo conta porque o relógio que volta alarga a leitura em até esse
        tanto (a folga MAIS o recuo, `captura/coluna.py`): uma transação comitada
        com a marca só além da folga ainda seria pega pelo ao-vivo se o passo do
        relógio caísse logo depois, e nada teria sido demonstrado.
        """
        _, estado = self.ouvinte.estado()
        marca = _data(((estado or {}).get('marca_agua') or {}).get('titulos'))
        alcance = self.cfg['folga'] + self.cfg['passo_relogio']
        return bool(marca and carimbo and marca - datetime.timedelta(seconds=alcance) > carimbo)

    def atraso_alem_da_folga(self):
        # Duas folgas e alguns ciclos: a marca gravada no estado pode estar uns
        # segundos atras (o ouvinte morto no meio do ciclo nao gravou a ultima),
        # e a demonstracao tem de valer mesmo assim.
        return 2 * self.cfg['folga'] + 5 * self.cfg['intervalo'] + 5

    def _olhar_pendentes(self):
        """
        Anota cada dataset que o OUVINTE entregou a varredura (pelo estado), com
        a marca de água e o instante em que a entrega foi vista. Se e desculpa ou
        não, decide `verificar.justificar_entregas` (casando com as rajadas).
        """
        ok, estado = self.ouvinte.estado()
        # Lido a cada 0,2 s com o ouvinte escrevendo: nunca pode estar pela metade.
        self.leituras_do_estado += 1
        if not ok:
            self.matador.estados_ruins.append('leitura continua: %s' % estado)
        if ok and estado:
            for dataset in estado.get('pendentes_varredura') or {}:
                if dataset not in self.entregues_vistos:
                    marca = _data((estado.get('marca_agua') or {}).get(dataset))
                    self.entregues_vistos[dataset] = {'marca': marca, 'visto_em': time.monotonic()}
                    registro('o ouvinte entregou %s a varredura (marca %s)', dataset, marca)

    # -- conferencias ------------------------------------------------------------

    def ler_dois_lados(self):
        """(regra, chaves, esperado, obtido): a origem pela regra, o Contextia por HTTP próprio."""
        motor = self._motor()
        try:
            regra = origem.empresas_da_regra(motor, self.mapa_dados)
            linhas = {
                tabela: origem.ler_tabela(motor, tabela) for tabela, *_ in origem.DATASETS.values()
            }
        finally:
            motor.dispose()
        arquivo = contextia_http.ler_arquivo_de_chaves(self.chaves)
        # A chave so serve para LER: quem e verificado vem da regra, e a empresa
        # aceita sem chave aparece inteira como ausente (e reprova).
        chaves = {e: arquivo[e] for e in regra.aceitas if e in arquivo}
        esperado = verificar.origem_por_empresa(linhas, regra.aceitas)
        obtido = verificar.ler_contextia(self.contextia, chaves)
        return regra, chaves, esperado, obtido

    def contexto(self):
        na_quarentena = {
            (i['dataset'], i['escopo'], i['chave'])
            for i in contextia_http.itens_da_quarentena(self.estado_dir)
        }
        if self.por_log():
            # O log traz toda transação no commit, do tamanho que for: nenhuma
            # entrega à varredura tem desculpa, e a rajada, o carimbo em massa e o
            # commit além da folga têm de chegar ao vivo como o resto. Só o dataset
            # sem `key` fica de fora (o produto diz: só na varredura).
            for dataset in sorted(self.entregues_vistos):
                self.falhar(
                    'entregue_no_log',
                    'o ouvinte entregou %s a varredura lendo o log (%s): nada na'
                    ' tortura justifica isso (as linhas dele NÃO são desculpadas)'
                    % (dataset, self.cfg['estrategia']),
                )
            return verificar.Contexto(
                fim=self.fim_carga,
                folga=self.cfg['folga'],
                intervalo=self.cfg['intervalo'],
                apagados=self.carga.apagados,
                movidos=self.carga.movidos,
                venenosos=self.carga.venenosos,
                na_quarentena=na_quarentena,
                futuros=self.carga.futuros,
                do_relogio=self.carga.do_relogio,
                fora_do_ao_vivo=self.sem_key(),
            )
        justificados, sem_rajada = verificar.justificar_entregas(
            self.entregues_vistos, self.carga.rajadas
        )
        for dataset in sem_rajada:
            self.falhar(
                'entregue_sem_rajada',
                'o ouvinte entregou %s a varredura sem uma operação em massa da'
                ' tortura naquele dataset: o ao-vivo dele parou sem motivo (as'
                ' linhas dele NÃO são desculpadas)' % dataset,
            )
        return verificar.Contexto(
            fim=self.fim_carga,
            folga=self.cfg['folga'],
            intervalo=self.cfg['intervalo'],
            rajadas=self.carga.rajadas,
            entregues=justificados,
            alem_da_folga=self.carga.alem_da_folga,
            apagados=self.carga.apagados,
            movidos=self.carga.movidos,
            venenosos=self.carga.venenosos,
            na_quarentena=na_quarentena,
            futuros=self.carga.futuros,
            do_relogio=self.carga.do_relogio,
        )

    def conferir_ao_vivo(self):
        """Verificação 1: o ouvinte alcancou, sem varredura nenhuma."""
        cfg = self.cfg
        limite = min(self.restante() - 90, 20 + 2 * cfg['folga'] + 5 * cfg['intervalo'])
        fim = time.monotonic() + max(10, limite)
        registro(
            'verificação 1: esperando o ouvinte alcançar (até %.0fs), sem varredura',
            fim - time.monotonic(),
        )
        # Pelo menos dois ciclos completos depois do fim da carga.
        self.ouvinte.esperar_status_novo(self.fim_carga_parede + 2 * cfg['intervalo'], 60)
        ausencias = (
            'perdida',
            'recente_ausente',
            'futuro_ausente',
            'relogio_ausente',
            'venenoso_sumiu',
        )
        if self.reconcilia():
            # Um intervalo de reconciliação e mais um ciclo depois da última
            # exclusão (o fim da carga); o dobro e 30 s de folga numa máquina
            # dividida: o ouvinte ainda é morto e reiniciado até aqui.
            fim = max(fim, self.inicio_alcance + 2 * cfg['intervalo_reconciliacao'] + 30)
        while True:
            self.matador.garantir_vivo()
            self._olhar_pendentes()
            regra, chaves, esperado, obtido = self.ler_dois_lados()
            resultado = verificar.comparar(esperado, obtido, self.contexto())
            classes = resultado['classes']
            sobrando = self._apagadas_sobrando(esperado, obtido)
            if (
                not any(classes.get(c) for c in ausencias) and not sobrando
            ) or time.monotonic() >= fim:
                break
            time.sleep(max(1, cfg['intervalo']))
        self.numeros['alcance_s'] = round(time.monotonic() - self.inicio_alcance, 1)
        if self.exclui_ao_vivo():
            self.conferir_apagadas(esperado, obtido)
        if self.por_log():
            self.conferir_status_do_log()
        for classe in verificar.REPROVAM:
            if classes.get(classe):
                self.falhar(
                    _CODIGO_DA_CLASSE.get(classe, classe),
                    '%d linha(s) %s ao vivo; ex.: %s'
                    % (
                        classes[classe],
                        classe.replace('_', ' '),
                        '; '.join(resultado['exemplos'].get(classe, [])[:3]),
                    ),
                )
        self.conferir_projetos('ao vivo')
        self.conferir_quarentena()
        self.conferir_futuro(classes)
        self.conferir_relogio(classes)
        if 'estoques' not in self.entregues_vistos and not self.por_log():
            self.falhar(
                'carimbo_em_massa',
                'o carimbo em massa em estoques (acima do teto %d)'
                ' não foi entregue a varredura' % cfg['maximo'],
            )
        return resultado

    def _apagadas_sobrando(self, esperado, obtido):
        """
        As linhas que a tortura apagou e que seguem no Contextia, nos datasets com
        `key` (só com a exclusão ao vivo). Sem desculpa nenhuma: nem o dataset
        entregue à varredura, em que a reconciliação segue (captura/combinada.py).
        """
        if not self.exclui_ao_vivo():
            return []
        sobrando = []
        for escopo in sorted(esperado):
            for dataset in verificar.COM_KEY:
                na_origem = {
                    verificar.chave_de(dataset, linha)
                    for linha in esperado[escopo].get(dataset, [])
                }
                no_contextia = {
                    verificar.chave_de(dataset, r) for r in obtido.get(escopo, {}).get(dataset, [])
                }
                apagados = self.carga.apagados.get(dataset, set())
                sobrando.extend(
                    'empresa %s, %s %s' % (escopo, dataset, ident)
                    for ident in sorted((no_contextia - na_origem) & apagados)
                )
        return sobrando

    def conferir_apagadas(self, esperado, obtido):
        """Com a reconciliação, a exclusão física não é desculpa nos datasets com `key`."""
        lista = self._apagadas_sobrando(esperado, obtido)
        sobrando = len(lista)
        exemplos = lista[:8]
        self.rec = {
            'apagadas_sobrando': sobrando,
            'exemplos_sobrando': exemplos,
            'apagadas_zeradas_s': None if sobrando else self.numeros['alcance_s'],
        }
        if sobrando:
            como = (
                'lendo o log (%s)' % self.cfg['estrategia']
                if self.por_log()
                else 'intervalo de reconciliação %d s' % self.cfg['intervalo_reconciliacao']
            )
            self.falhar(
                'apagadas_sobrando',
                '%d linha(s) apagada(s) na origem seguem no'
                ' Contextia %.0f s depois do fim da carga (%s); ex.: %s'
                % (sobrando, self.numeros['alcance_s'], como, '; '.join(exemplos[:3])),
            )

    def conferir_status_do_log(self):
        """
        Lendo o log, o status diz a verdade de cada dataset: os com `key` ao vivo
        pelo log; o sem `key` fora, com o motivo (nada parado em silêncio).
        """
        try:
            with open(os.path.join(self.estado_dir, 'ouvinte-status.json'), encoding='utf-8') as f:
                status = json.load(f)
        except (OSError, ValueError) as erro:
            self.falhar('status_do_log', 'o ouvinte-status.json não pôde ser lido: %s' % erro)
            return
        estrategia = self.cfg['estrategia']
        por_nome = {d.get('dataset'): d for d in status.get('datasets') or []}
        for dataset in origem.DATASETS:
            item = por_nome.get(dataset) or {}
            if dataset in self.sem_key():
                if item.get('ao_vivo') is not False or 'key' not in (item.get('motivo') or ''):
                    self.falhar(
                        'status_do_log',
                        'o dataset sem key %s não aparece no status'
                        ' como fora do ao-vivo, com o motivo: %r' % (dataset, item),
                    )
            elif not item.get('ao_vivo') or item.get('captura') != estrategia:
                self.falhar(
                    'status_do_log',
                    'o dataset %s não aparece no status ao vivo pelo'
                    ' %s: %r' % (dataset, estrategia, item),
                )
        captura = status.get('captura') or {}
        if captura.get('estrategia') != estrategia:
            self.falhar(
                'status_do_log', 'o bloco captura do status não é do %s: %r' % (estrategia, captura)
            )
        self.numeros['captura'] = captura

    def conferir_remocoes(self):
        """O que o vigia de remoções viu, e o estado da reconciliação no status."""
        vigia = self.vigia_remocoes
        vigia.parar()
        status = self.status_da_reconciliacao() if self.reconcilia() else {}
        rec = getattr(self, 'rec', None) or {'apagadas_sobrando': None}
        # Lendo o log, o que prova que a exclusao ao vivo foi exercitada: as linhas
        # com `key` que a carga apagou (conferir_apagadas viu que nenhuma sobrou).
        apagadas = sum(len(self.carga.apagados.get(d, ())) for d in verificar.COM_KEY)
        rec.update(
            {
                'intervalo_s': (self.cfg['intervalo_reconciliacao'] if self.reconcilia() else None),
                'apagadas_na_carga': apagadas,
                'vivas_removidas': len(vigia.removidas_vivas),
                'exemplos_vivas': ['empresa %s, %s %s' % r for r in vigia.removidas_vivas[:8]],
                'voltas': vigia.voltas,
                'voltas_com_erro': vigia.voltas_com_erro,
                'nao_confirmadas': vigia.nao_confirmadas,
                'desculpadas': dict(vigia.desculpadas),
                'exemplos_desculpados': vigia.exemplos_desculpados,
                'status': status,
                # So a reconciliacao conta remocoes no status; lendo o log, '-'.
                'removidas_total': (
                    sum(s.get('removidas_total') or 0 for s in status.values())
                    if self.reconcilia()
                    else None
                ),
            }
        )
        self.numeros['reconciliacao'] = rec
        if vigia.removidas_vivas:
            self.falhar(
                'vivas_removidas',
                '%d linha(s) presentes na origem removidas do'
                ' Contextia (vistas pelo vigia); ex.: %s'
                % (len(vigia.removidas_vivas), '; '.join(rec['exemplos_vivas'][:3])),
            )
        if vigia.voltas < 5:
            self.falhar(
                'tortura_incompleta',
                'o vigia de remoções deu só %d volta(s)'
                ' (%d com erro): a remoção de linha viva não foi conferida'
                % (vigia.voltas, vigia.voltas_com_erro),
            )
        if self.por_log() and not apagadas:
            self.falhar(
                'tortura_incompleta',
                'a carga não apagou nenhuma linha com key:'
                ' as exclusões ao vivo pelo log não foram exercitadas',
            )
        if self.reconcilia() and not rec['removidas_total']:
            self.falhar(
                'tortura_incompleta',
                'a reconciliação não removeu nada (status: %s):'
                ' as exclusões ao vivo não foram exercitadas' % status,
            )
        recusas = {d: s['recusa'] for d, s in status.items() if s.get('recusa')}
        if recusas:
            self.falhar(
                'reconciliacao_recusada',
                'a reconciliação terminou recusada sem a'
                ' tortura esvaziar view nenhuma: %s' % recusas,
            )

    def conferir_projetos(self, momento):
        """
        Toda empresa que a regra aceita (SQL da tortura na origem) tem projeto,
        chave que é dela e dados; nenhuma recusada ou excluída tem projeto ou
        chave; nenhum projeto a mais.
        """
        motor = self._motor()
        try:
            regra = origem.empresas_da_regra(motor, self.mapa_dados)
        finally:
            motor.dispose()
        arquivo = contextia_http.ler_arquivo_de_chaves(self.chaves)
        por_externo = {}
        for projeto in self.contextia.projetos():
            por_externo.setdefault(str(projeto['external_id']), []).append(projeto)
        com_projeto, com_dados = 0, 0
        for escopo in regra.aceitas:
            projetos = por_externo.get(escopo, [])
            if not projetos:
                self.falhar(
                    'empresa_sem_projeto',
                    'empresa %s: a regra de projeto a aceita e'
                    ' ela não tem projeto no Contextia (%s)' % (escopo, momento),
                )
                continue
            com_projeto += 1
            if len(projetos) > 1:
                self.falhar(
                    'projeto_duplicado',
                    'empresa %s tem %d projetos (%s)' % (escopo, len(projetos), momento),
                )
            chave = arquivo.get(escopo)
            if chave is None:
                self.falhar(
                    'empresa_sem_chave',
                    'empresa %s tem projeto e nenhuma chave no'
                    ' arquivo de chaves (%s)' % (escopo, momento),
                )
                continue
            try:
                dono = str(self.contextia.quem_sou(chave)['external_id'])
                total = sum(d.get('records') or 0 for d in self.contextia.datasets(chave))
            except contextia_http.ErroHttp as erro:
                self.falhar(
                    'empresa_sem_chave',
                    'empresa %s: a chave do arquivo não abre o'
                    ' Contextia (%s): %s' % (escopo, momento, erro),
                )
                continue
            if dono != escopo:
                self.falhar(
                    'chave_de_outra_empresa',
                    'a chave da empresa %s no arquivo e do'
                    ' projeto da empresa %s (%s)' % (escopo, dono, momento),
                )
            elif not total:
                self.falhar(
                    'empresa_sem_dados',
                    'empresa %s tem projeto e nenhum registro'
                    ' no Contextia (%s)' % (escopo, momento),
                )
            else:
                com_dados += 1
        for escopo in regra.recusadas + regra.excluidas:
            if por_externo.get(escopo) or escopo in arquivo:
                self.falhar(
                    'empresa_recusada_com_projeto',
                    'empresa %s (%s pela regra)'
                    ' ganhou projeto ou chave (%s)'
                    % (escopo, 'excluida' if escopo in regra.excluidas else 'recusada', momento),
                )
        extras = sorted(
            set(por_externo) - set(regra.aceitas) - set(regra.recusadas) - set(regra.excluidas)
        )
        if extras:
            self.falhar(
                'projeto_inesperado',
                'projeto(s) de escopo que a origem não tem: %s (%s)' % (', '.join(extras), momento),
            )
        self.numeros.setdefault('empresas', {})[momento] = {
            'aceitas': regra.aceitas,
            'com_projeto': com_projeto,
            'com_dados': com_dados,
            'recusadas': regra.recusadas,
            'excluidas': regra.excluidas,
        }

    def conferir_quarentena(self):
        """Os envenenados estão na quarentena, e só eles (falha passageira nunca vai la)."""
        itens = contextia_http.itens_da_quarentena(self.estado_dir)
        presentes = {(i['dataset'], i['escopo'], i['chave']) for i in itens}
        esperados = {(d, e, i): tipo for d, i, e, tipo in self.carga.venenosos}
        faltam = sorted(set(esperados) - presentes)
        outros = sorted(presentes - set(esperados))
        for dataset, escopo, ident in faltam:
            self.falhar(
                'quarentena',
                'o registro envenenado (%s) %s %s da empresa %s não'
                ' está na quarentena'
                % (esperados[(dataset, escopo, ident)], dataset, ident, escopo),
            )
        if outros:
            self.falhar(
                'quarentena',
                '%d registro(s) que NÃO são envenenados na quarentena:'
                ' %s' % (len(outros), ', '.join('%s %s/%s' % x for x in outros[:5])),
            )
        por_tipo = {}
        for chave, tipo in esperados.items():
            achado = por_tipo.setdefault(tipo, [0, 0])
            achado[1] += 1
            achado[0] += chave in presentes
        self.sujo['quarentena'] = {'por_tipo': por_tipo, 'outros': len(outros), 'itens': len(itens)}

    def conferir_futuro(self, classes):
        """Carimbo no futuro: entregue, e a marca de água NÃO foi para o futuro."""
        self.sujo['futuro'] = {
            'linhas': len(self.carga.futuros),
            'ausentes': classes.get('futuro_ausente', 0),
            'marcas_no_futuro': self._marcas_no_futuro('ao vivo'),
        }

    def _marcas_no_futuro(self, momento):
        """Os datasets cuja marca de água passou do relógio da origem (reprova)."""
        _, estado = self.ouvinte.estado()
        agora = self._agora_do_banco()
        tolerancia = datetime.timedelta(seconds=5)
        no_futuro = sorted(
            d
            for d, m in ((estado or {}).get('marca_agua') or {}).items()
            if _data(m) is not None and _data(m) > agora + tolerancia
        )
        if no_futuro:
            self.falhar(
                'futuro',
                'a marca de água de %s foi para o futuro da origem (agora'
                ' %s, %s): o que mudar antes dela menos a folga só chega na'
                ' varredura' % (', '.join(no_futuro), agora, momento),
            )
        return no_futuro

    def conferir_relogio(self, classes):
        """O relógio voltou: as linhas gravadas depois do passo chegaram ao vivo."""
        partida = getattr(self, 'partida_do_relogio', None)
        avisos = (
            self._log_do_ouvinte(partida).count(contextia_http.sem_acentos(MENSAGEM_RELOGIO))
            if partida is not None
            else 0
        )
        self.sujo.setdefault('relogio', {}).update(
            linhas=len(self.carga.do_relogio),
            ausentes=classes.get('relogio_ausente', 0),
            avisos=avisos,
        )

    def corrigir_venenosos(self):
        """
        O ERP corrige as linhas envenenadas: a versão nova tem de chegar ao vivo e
        tirar o item da quarentena (senão a varredura não fecharia o dataset).
        """
        if not self.carga.venenosos:
            return
        registro('venenosos: o ERP corrige as linhas; a versão nova tem de tirar da quarentena')
        self.carga.corrigir_venenosos()
        esperados = {(d, e, i) for d, i, e, _ in self.carga.venenosos}
        fim = time.monotonic() + 5 * self.cfg['intervalo'] + 15
        while True:
            presentes = {
                (i['dataset'], i['escopo'], i['chave'])
                for i in contextia_http.itens_da_quarentena(self.estado_dir)
            }
            ainda = esperados & presentes
            chegaram = len(self._chegaram(esperados))
            if (not ainda and chegaram == len(esperados)) or time.monotonic() >= fim:
                break
            time.sleep(1)
        self.sujo.setdefault('quarentena', {}).update(
            corrigidos=chegaram, ainda_na_quarentena=len(ainda)
        )
        if ainda or chegaram < len(esperados):
            self.falhar(
                'quarentena',
                'depois de corrigidos na origem, %d de %d envenenado(s)'
                ' chegaram e %d seguem na quarentena' % (chegaram, len(esperados), len(ainda)),
            )

    def _chegaram(self, alvos):
        """Os (dataset, escopo, ident) de `alvos` que estão no Contextia com o valor da origem."""
        _, _, esperado, obtido = self.ler_dois_lados()
        feitos = set()
        for dataset, escopo, ident in alvos:
            linha = [
                x
                for x in esperado.get(escopo, {}).get(dataset, [])
                if verificar.chave_de(dataset, x) == ident
            ]
            if not linha:
                continue
            sig = verificar.assinatura(dataset, linha[0])
            if any(
                verificar.assinatura(dataset, r) == sig
                for r in obtido.get(escopo, {}).get(dataset, [])
            ):
                feitos.add((dataset, escopo, ident))
        return feitos

    def _sigterm_e_contar(self, momento):
        """
        SIGTERM no ouvinte e, ANTES de limpar qualquer coisa, quantos processos
        da tortura sobraram: o ouvinte tinha de te-los levado.
        """
        saiu, segundos = self.ouvinte.terminar(60)
        if not saiu:
            self.falhar('sigterm_lento', 'SIGTERM %s não encerrou o ouvinte em 60 s' % momento)
        time.sleep(0.5)
        sobras = processos.processos_marcados(self.marca)
        if sobras:
            self.falhar(
                'processos_apos_sigterm',
                '%d processo(s) vivos depois do SIGTERM %s'
                ' (o ouvinte saiu e os deixou): %s'
                % (len(sobras), momento, '; '.join(c[:80] for _, c in sobras[:3])),
            )
            processos.matar_marcados(self.marca)
        return segundos, len(sobras)

    def varrer(self):
        """
        A varredura pelo próprio ouvinte (`--varrer-agora`), com um kill -9 no
        meio dela: o bash do carregar-todas morre junto (como num OOM, sem
        repassar nada) e o conector fica órfão -- a subida seguinte tem de
        encerra-lo antes de qualquer outra coisa. Depois, a varredura inteira.

        O conector e morto com um lote SEGURO no servidor (20 s): solto, ele
        escreveria a linha seguinte no cano do ouvinte morto e morreria sozinho
        de EPIPE antes de a subida seguinte chegar nele.
        """
        registro('varredura: reiniciando o ouvinte com --varrer-agora (kill -9 no meio dela)')
        self._sigterm_e_contar('antes da varredura')
        self.ouvinte.iniciar(['--varrer-agora'])
        self.vigia.permitir(principal=self.ouvinte.pid)
        achado = self._esperar_conector_da_varredura(90)
        if achado is not None:
            # So o conector fala com o intake agora (o ouvinte espera o
            # carregar-todas): o proximo lote dele fica 20 s no servidor.
            antes = self.servidor.falhas_injetadas().get('atraso', 0)
            self.servidor.injetar('atraso', quantidade=1, segundos=20)
            fim = time.monotonic() + 30
            while (
                time.monotonic() < fim
                and self.servidor.falhas_injetadas().get('atraso', 0) <= antes
            ):
                time.sleep(0.1)
            achado = self._esperar_conector_da_varredura(5)
        sobras = []
        if achado is None:
            self.falhar(
                'tortura_incompleta',
                'kill -9 na varredura: nenhum conector da'
                ' varredura com um lote no servidor em 90 s',
            )
        else:
            pgid, conector = achado
            try:
                os.kill(pgid, signal.SIGKILL)  # o bash: o SIGTERM do kernel nao o acha
            except ProcessLookupError:
                pass
            self.ouvinte.matar()
            time.sleep(0.5)
            sobras = processos.processos_marcados(self.marca)
            self.matador.conferir_estado('kill -9 na varredura')
            registro(
                'kill -9 na varredura: %d processo(s) orfao(s): %s',
                len(sobras),
                '; '.join(c[-60:] for _, c in sobras),
            )
        antes_de_subir = [(p, c) for p, c in sobras if _vivo(p)]
        self.ouvinte.iniciar(['--varrer-agora'])
        self.vigia.permitir(principal=self.ouvinte.pid)
        partida = self.ouvinte.partidas
        # A sobra e encerrada logo depois da trava, antes de qualquer outra coisa:
        # o log diz "subida: ..." sobre o grupo anotado (encerrado ou ja terminado).
        fim = time.monotonic() + 60
        while (
            time.monotonic() < fim
            and self.ouvinte.vivo()
            and 'subida: ' not in self._log_do_ouvinte(partida)
        ):
            time.sleep(0.1)
        vivas = [(p, c) for p, c in sobras if _vivo(p)]
        self.servidor.limpar_falhas()
        avisou = contextia_http.sem_acentos(MENSAGEM_SOBRA) in self._log_do_ouvinte(partida)
        # O conector orfao pode morrer sozinho antes (escreve no cano do ouvinte
        # morto e leva EPIPE): entao a subida diz que ele "ja tinha terminado".
        self.sujo['kill9_varredura'] = {
            'orfaos': len(sobras),
            'vivos_ao_subir': len(antes_de_subir),
            'encerrados_pela_subida': len(antes_de_subir) if avisou else 0,
            'vivos_apos_subir': len(vivas),
            'comandos': [c[-100:] for _, c in sobras],
        }
        if vivas:
            self.falhar(
                'orfaos_apos_reinicio',
                '%d processo(s) da varredura morta seguem'
                ' vivos depois da subida seguinte: %s'
                % (len(vivas), '; '.join(c[-80:] for _, c in vivas)),
            )
            for pid, _ in vivas:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if achado is not None and not sobras:
            self.falhar(
                'tortura_incompleta',
                'o kill -9 na varredura não deixou órfão: o'
                ' caminho da subida seguinte não foi exercitado',
            )

        inicio = time.monotonic()
        fim = inicio + max(30, min(600, self.restante() - 60))
        while time.monotonic() < fim:
            # A linha de status da varredura so existe depois que ELA terminou,
            # e diz quantas fases deram erro.
            status = self.ouvinte.status()
            achou = re.search(r'^varredura \.+: \S+ erros=(\d+)', status, re.MULTILINE)
            dono = re.search(r'^pid \.+: (\d+)', status, re.MULTILINE)
            if achou and dono and int(dono.group(1)) == self.ouvinte.pid:
                self.numeros['varredura_s'] = round(time.monotonic() - inicio, 1)
                if int(achou.group(1)):
                    self.falhar(
                        'varredura',
                        'a varredura terminou com %s fase(s) com erro: %s'
                        % (achou.group(1), ' | '.join(self._falhas_da_varredura())),
                    )
                return True
            if not self.ouvinte.vivo():
                self.falhar(
                    'ouvinte_saiu_sozinho',
                    'o ouvinte saiu durante a varredura (código %s)' % self.ouvinte.codigo(),
                )
                return False
            time.sleep(0.5)
        self.falhar('varredura', 'a varredura não terminou em %.0f s' % (fim - inicio))
        return False

    def _esperar_conector_da_varredura(self, limite):
        """(pgid do carregar-todas, pid de um conector) com a varredura no meio, ou None."""
        fim = time.monotonic() + limite
        while time.monotonic() < fim:
            status = self.ouvinte.status()
            grupo = re.search(
                r'^ferramenta agora \.+: varredura/carregar-todas \(pid (\d+)', status, re.MULTILINE
            )
            dono = re.search(r'^pid \.+: (\d+)', status, re.MULTILINE)
            if grupo and dono and int(dono.group(1)) == self.ouvinte.pid:
                pgid = int(grupo.group(1))
                for pid, cmd in processos.processos_marcados(self.marca):
                    # O conector ja depois do exec (antes dele, o processo ainda e
                    # o `chaves executar` que poe a chave no ambiente).
                    if (
                        '-m contextia_sync.cli.conector' in cmd
                        and 'chaves' not in cmd.split('contextia_sync.cli.conector')[0]
                        and _pgid(pid) == pgid
                    ):
                        return pgid, pid
            if not self.ouvinte.vivo():
                return None
            time.sleep(0.2)
        return None

    def _esperar_status_do_pid(self, pid, limite):
        fim = time.monotonic() + limite
        while time.monotonic() < fim:
            dono = re.search(r'^pid \.+: (\d+)', self.ouvinte.status(), re.MULTILINE)
            if dono and int(dono.group(1)) == pid:
                return True
            if not self.ouvinte.vivo():
                return False
            time.sleep(0.2)
        return False

    def _falhas_da_varredura(self, quantas=4):
        """As linhas 'FALHOU --' que as ferramentas da varredura escreveram no log do ouvinte."""
        texto = self._log_do_ouvinte(self.ouvinte.partidas)
        linhas = [
            re.sub(r'^.*?\| +', '', x).strip() for x in texto.splitlines() if 'FALHOU --' in x
        ]
        return [x[:220] for x in linhas[:quantas]]

    def conferir_retomada(self):
        """
        Depois da varredura o ao-vivo volta em TODO dataset -- o da rajada e o do
        carimbo em massa inclusive -- no ciclo seguinte: uma alteração em cada um
        tem de chegar em poucos intervalos.
        """
        import sqlalchemy as sa

        escopo = str(origem.EMPRESAS_INICIAIS[1])  # a empresa da rajada
        meta = origem.esquema()
        agora = origem.agora_expr(self.banco)
        motor = self._motor()
        alvos = {}
        with motor.begin() as conexao:
            for dataset, (tabela, _chave, _colunas, recorte) in origem.DATASETS.items():
                if self.por_log() and dataset in self.sem_key():
                    continue  # so na varredura, e o status diz (acima)
                t = meta.tables[tabela]
                chave = 'DOC' if tabela == 'MOVIMENTOS' else t.primary_key.columns[0].name
                consulta = sa.select(t.c[chave])
                if recorte:
                    consulta = consulta.where(t.c.EMPRESA_ID == int(escopo))
                ident = conexao.execute(consulta.limit(1)).scalar()
                valores = {'ALTERADO_EM': agora}
                if tabela == 'TITULOS':
                    valores['HISTORICO'] = 'retomada %s' % uuid.uuid4().hex[:8]
                elif tabela == 'PEDIDOS':
                    valores['CLIENTE'] = 'Retomada %s' % uuid.uuid4().hex[:8]
                elif tabela == 'MOVIMENTOS':
                    valores['TIPO'] = 'R'
                elif tabela == 'ESTOQUES':
                    valores['PRODUTO'] = 'retomada %s' % uuid.uuid4().hex[:8]
                else:
                    valores['DESCRICAO'] = 'Retomada %s' % uuid.uuid4().hex[:8]
                conexao.execute(t.update().where(t.c[chave] == ident).values(**valores))
                alvos[dataset] = verificar.canonico(verificar.TIPOS[dataset][chave], ident)
        motor.dispose()
        inicio = time.monotonic()
        limite = inicio + max(5, 3 * self.cfg['intervalo']) + 10
        faltam = dict(alvos)
        tempos = {}
        while faltam and time.monotonic() < limite:
            chegaram = self._chegaram({(d, escopo, i) for d, i in faltam.items()})
            for dataset, _, _ in chegaram:
                tempos[dataset] = round(time.monotonic() - inicio, 1)
                del faltam[dataset]
            time.sleep(0.5)
        self.numeros['retomada_s'] = tempos
        if faltam:
            self.falhar(
                'ao_vivo_parado_apos_varredura',
                'depois da varredura, uma alteração'
                ' em %s não chegou ao vivo em %.0f s'
                % (', '.join(sorted(faltam)), limite - inicio),
            )
        return sorted(faltam)

    def conferir_chaves_bom(self):
        """Depois do BOM: nenhuma chave revogada, nenhuma emitida a mais."""
        if self.chaves_no_bom is None:
            return
        agora = self._chaves_ativas()
        mudaram = sorted(e for e, chaves in self.chaves_no_bom.items() if agora.get(e) != chaves)
        self.sujo.setdefault('bom', {}).update(
            reprovisionadas=len(mudaram), ativas={e: len(c) for e, c in agora.items()}
        )
        if mudaram:
            self.falhar(
                'chaves_bom',
                'depois do arquivo de chaves salvo com BOM, as chaves de'
                ' %s mudaram (reprovisionada ou revogada): %s'
                % (
                    ', '.join(mudaram),
                    '; '.join(
                        '%s: %s -> %s' % (e, self.chaves_no_bom[e], agora.get(e))
                        for e in mudaram[:3]
                    ),
                ),
            )
        varias = sorted(e for e, c in agora.items() if len(c) != 1)
        if varias:
            self.falhar(
                'chaves_bom',
                'projeto(s) sem exatamente uma chave ativa: %s'
                % ', '.join('%s (%d)' % (e, len(agora[e])) for e in varias),
            )

    # -- tudo junto ----------------------------------------------------------------

    def _cao_de_guarda(self):
        """Passou do prazo total e mais um minuto: mata tudo e sai, travado ou não."""
        if self._fim_do_cao.wait(max(0, self.restante()) + 60):
            return
        registro('PRAZO TOTAL ESTOURADO: matando os processos da tortura e saindo')
        processos.matar_marcados(self.marca)
        if self.servidor is not None:
            self.servidor.parar()
        self._derrubar_origem()
        os._exit(4)

    def rodar(self):
        self._fim_do_cao = threading.Event()
        threading.Thread(target=self._cao_de_guarda, name='cao-de-guarda', daemon=True).start()
        try:
            self.preparar()
            self.esperar_marcas()
            self.torturar()
            self.inicio_alcance = time.monotonic()
            ao_vivo = self.conferir_ao_vivo()
            self.amostrador.parar()
            self.corrigir_venenosos()
            varreu = self.varrer()
            _, _, esperado, obtido = self.ler_dois_lados()
            exato = verificar.comparar(esperado, obtido)
            parados = self.conferir_retomada() if varreu else ['(sem varredura)']
            self.sujo['futuro']['marcas_no_futuro_apos_varredura'] = self._marcas_no_futuro(
                'após varredura'
            )
            self.conferir_projetos('após varredura')
            self.conferir_chaves_bom()
            # Os orfaos sao contados ANTES da limpeza: o SIGTERM final tem de leva-los.
            sigterm_s, sobras = self._sigterm_e_contar('no fim')
            self.numeros['sigterm_final_s'] = round(sigterm_s, 1)
            self.numeros['sobras_no_fim'] = sobras
            self.vigia.parar()
            if self.exclui_ao_vivo():
                self.conferir_remocoes()
            self.fechar_numeros(ao_vivo, exato, parados)
        finally:
            self.limpar()
            self._fim_do_cao.set()
        return self.numeros

    def fechar_numeros(self, ao_vivo, exato, parados):
        n = self.numeros
        carga = self.carga
        classes = ao_vivo['classes']
        n['mudancas'] = carga.total_mudancas()
        n['mudancas_por_tipo'] = dict(sorted(carga.contagem.items()))
        n['erros_da_carga'] = len(carga.erros)
        n['kills'] = self.matador.kills
        n['sigterms'] = self.matador.sigterms
        n['sigterm_max_s'] = round(max(self.matador.sigterm_tempos or [0]), 1)
        n['mortes_sozinho'] = self.matador.mortes_sozinho
        n['netos_mortos_apos_kill'] = self.matador.orfaos_kill
        n['netos_vivos_apos_sigterm'] = len(self.matador.orfaos_sigterm)
        n['conexoes_origem_derrubadas'] = self.conexoes.mortas
        n['estado_lido_apos_morte'] = self.matador.estados_lidos
        n['estado_ilegivel'] = self.matador.estados_ruins
        n['estado_lido_continuo'] = self.leituras_do_estado
        n['intrusos_recusados'] = self.matador.intrusos_recusados
        n['intrusos_aceitos'] = self.matador.intrusos_aceitos
        n['segundo_ouvinte'] = self.vigia.violacoes[:5]
        n['amostras_vigia'] = self.vigia.amostras
        n['ao_vivo'] = classes
        n['ao_vivo_exemplos'] = ao_vivo['exemplos']
        n['linhas_verificadas'] = classes.get('verificadas', 0)
        n['perdidas'] = classes.get('perdida', 0) + classes.get('recente_ausente', 0)
        n['duplicadas'] = classes.get('duplicada', 0) + exato['classes'].get('duplicada', 0)
        n['desculpas'] = {c: classes.get(c, 0) for c in verificar.DESCULPAS}
        n['apos_varredura'] = exato['classes']
        n['apos_varredura_exemplos'] = exato['exemplos']
        n['divergencias_apos_varredura'] = exato['classes'].get('divergente', 0) + exato[
            'classes'
        ].get('sobra', 0)
        n['alem_da_folga'] = {
            'transacoes': len(carga.alem_da_folga),
            'atraso_s': [round(a, 1) for _, _, a, _ in carga.alem_da_folga],
            'perdidas_pelo_ao_vivo': classes.get('alem_da_folga', 0),
            'recuperadas_pela_varredura': exato['classes'].get('divergente', 0) == 0,
            'detalhe': self.marcas_no_commit,
        }
        atrasos = [a for _, _, a, _ in carga.atrasadas] or [0]
        n['atrasadas'] = {
            'transacoes': len(carga.atrasadas),
            'atraso_max_s': round(max(atrasos), 2),
            'folga_s': self.cfg['folga'],
        }
        n['rajadas'] = [
            {'dataset': r['dataset'], 'tipo': r['tipo'], 'linhas': r['linhas']}
            for r in carga.rajadas
        ]
        n['entregues_a_varredura_no_estado'] = sorted(self.entregues_vistos)
        n['ao_vivo_parado_apos_varredura'] = parados
        n['dado_sujo'] = self.sujo
        n['eventos_feitos'] = self.feitos
        lat = self.amostrador.latencias
        n['latencia'] = {
            'medidas': len(lat),
            'nao_medidas': self.amostrador.pendentes(),
            'p50_s': _arredondar(verificar.percentil(lat, 0.5)),
            'p95_s': _arredondar(verificar.percentil(lat, 0.95)),
            'max_s': _arredondar(max(lat) if lat else None),
        }

        # Cada achado reprova -- decidido aqui, antes de qualquer veredito impresso.
        if n['divergencias_apos_varredura']:
            self.falhar(
                'divergencias_apos_varredura',
                'depois da varredura o Contextia não é'
                ' igual a origem: %d faltando/desatualizada(s), %d sobrando; ex.: %s'
                % (
                    exato['classes'].get('divergente', 0),
                    exato['classes'].get('sobra', 0),
                    '; '.join(
                        (
                            exato['exemplos'].get('divergente', [])
                            + exato['exemplos'].get('sobra', [])
                        )[:3]
                    ),
                ),
            )
        if exato['classes'].get('duplicada'):
            self.falhar(
                'duplicadas',
                '%d chave(s) duplicadas depois da varredura' % exato['classes']['duplicada'],
            )
        if self.matador.estados_ruins:
            self.falhar(
                'estado_ilegivel',
                'o estado não era JSON legível: %s' % '; '.join(self.matador.estados_ruins[:3]),
            )
        if self.vigia.violacoes:
            self.falhar('segundo_ouvinte', '; '.join(self.vigia.violacoes[:3]))
        if self.matador.intrusos_aceitos:
            self.falhar(
                'intruso_aceito',
                'o segundo ouvinte no mesmo --estado nao foi recusado'
                ' pela trava (saída %d e a mensagem dela): %s'
                % (processos.SAIDA_DA_TRAVA, self.matador.intrusos_aceitos[0][:300]),
            )
        if not self.matador.intrusos_recusados and not self.matador.intrusos_aceitos:
            self.falhar('tortura_incompleta', 'nenhum segundo ouvinte foi tentado')
        if self.matador.orfaos_sigterm:
            self.falhar(
                'processos_apos_sigterm',
                'processos da ferramenta vivos depois do'
                ' SIGTERM do ouvinte: %s'
                % '; '.join(c[:80] for c in self.matador.orfaos_sigterm[:3]),
            )
        if self.matador.sigterm_lentos:
            self.falhar(
                'sigterm_lento',
                'SIGTERM não encerrou o ouvinte em 60 s (%d vez(es))'
                % len(self.matador.sigterm_lentos),
            )
        if self.matador.mortes_sozinho:
            self.falhar(
                'ouvinte_saiu_sozinho',
                'o ouvinte saiu sozinho (códigos %s)' % self.matador.mortes_sozinho,
            )
        if self.matador.erros_entre_vidas:
            self.falhar(
                'tortura_incompleta',
                'o que a tortura faz com o ouvinte morto falhou:'
                ' %s' % '; '.join(self.matador.erros_entre_vidas[:3]),
            )
        if (
            self.carga.empresa_nova_em is not None
            and not n.get('kill_na_carga_inicial')
            and 'empresa_sem_projeto' not in self.veredito.codigos()
        ):
            self.falhar(
                'tortura_incompleta',
                'a morte de propósito durante a carga inicial da empresa nova não aconteceu',
            )
        if not sum(n['falhas_injetadas'].values()):
            self.falhar('tortura_incompleta', 'nenhuma falha do intake foi injetada')
        if not n['falhas_injetadas'].get('corpo_invalido'):
            self.falhar('tortura_incompleta', 'nenhum 200 malformado foi injetado')
        n['motivos'] = self.veredito.motivos
        n['passou'] = self.veredito.passou()
        n['duracao_total_s'] = round(time.monotonic() - self.inicio, 1)

    def limpar(self):
        """Tudo que a tortura iniciou sai daqui morto, até o neto em grupo próprio."""
        for nome in ('matador', 'conexoes', 'amostrador', 'vigia', 'vigia_remocoes'):
            objeto = getattr(self, nome, None)
            if objeto is not None:
                try:
                    objeto.parar()
                except Exception:  # noqa: BLE001
                    pass
        carga = getattr(self, 'carga', None)
        if carga is not None:
            carga.parar(espera=5)
        if self.ouvinte is not None:
            self.ouvinte.terminar(15)
        mortos = processos.matar_marcados(self.marca)
        if mortos:
            registro('limpeza: %d processo(s) da tortura ainda vivos, mortos', len(mortos))
        if self.servidor is not None:
            try:
                self.servidor.__exit__(None, None, None)
            except Exception as erro:  # noqa: BLE001
                registro('limpeza: servidor: %s', erro)
        self._derrubar_origem()

    def _derrubar_origem(self):
        """O banco da tortura (ou o servidor privado inteiro, nos modos por log)."""
        try:
            if self.privado is not None:
                self.privado.parar()
            elif self.nome_banco:
                origem.derrubar_banco(self.banco, self.nome_banco)
        except Exception as erro:  # noqa: BLE001
            registro('limpeza: banco %s: %s', self.nome_banco, erro)


# Classe do verificador -> codigo do motivo.
_CODIGO_DA_CLASSE = {
    'perdida': 'linhas_perdidas',
    'recente_ausente': 'linhas_perdidas',
    'fantasma': 'fantasmas',
    'duplicada': 'duplicadas',
    'futuro_ausente': 'futuro',
    'relogio_ausente': 'relogio',
    'venenoso_no_contextia': 'quarentena',
    'venenoso_sumiu': 'quarentena',
}


def _pgid(pid):
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _arredondar(valor):
    return None if valor is None else round(valor, 2)


# ---------------------------------------------------------------------------
# A tabela
# ---------------------------------------------------------------------------


def _de(n, *caminho, padrao=0):
    for parte in caminho:
        if not isinstance(n, dict):
            return padrao
        n = n.get(parte, padrao)
    return n


def _quarentena(n):
    q = _de(n, 'dado_sujo', 'quarentena', padrao={}) or {}
    tipos = ' '.join(
        '%s %d/%d' % (t, a, b) for t, (a, b) in sorted((q.get('por_tipo') or {}).items())
    )
    return '%s; outros %s; corrigidos %s' % (
        tipos or '-',
        q.get('outros', '?'),
        q.get('corrigidos', '?'),
    )


def _motivos_da(n, codigos):
    return 'FALHOU' if any(m['codigo'] in codigos for m in n.get('motivos', [])) else 'ok'


def tabela(resultados):
    """A tabela de números, uma coluna por banco; cada falha de dado sujo com a sua linha."""
    linhas = [
        ('linhas mudadas (com as em massa)', lambda n: n['mudancas']),
        (
            '  inclusoes/alteracoes/cancel.',
            lambda n: (
                '%s/%s/%s'
                % (
                    n['mudancas_por_tipo'].get('inclusao', 0),
                    n['mudancas_por_tipo'].get('alteracao', 0),
                    n['mudancas_por_tipo'].get('cancelamento', 0),
                )
            ),
        ),
        (
            '  exclusões / mudou de empresa',
            lambda n: (
                '%s / %s'
                % (
                    n['mudancas_por_tipo'].get('exclusao', 0),
                    n['mudancas_por_tipo'].get('mudanca_de_empresa', 0),
                )
            ),
        ),
        (
            '  atrasadas (max s / folga s)',
            lambda n: (
                '%s (%s/%s)'
                % (
                    n['atrasadas']['transacoes'],
                    n['atrasadas']['atraso_max_s'],
                    n['atrasadas']['folga_s'],
                )
            ),
        ),
        (
            '  rajadas acima do teto',
            lambda n: len([r for r in n['rajadas'] if r['tipo'] == 'rajada']),
        ),
        ('kill -9 / SIGTERM', lambda n: '%s / %s' % (n['kills'], n['sigterms'])),
        (
            'segundo ouvinte recusado',
            lambda n: '%s (aceitos: %d)' % (n['intrusos_recusados'], len(n['intrusos_aceitos'])),
        ),
        (
            'estado legível após morte',
            lambda n: (
                '%d/%d'
                % (
                    n['estado_lido_apos_morte'] - len(n['estado_ilegivel']),
                    n['estado_lido_apos_morte'],
                )
            ),
        ),
        (
            '  e lido a cada 0,2 s (ilegível)',
            lambda n: '%d (%d)' % (n['estado_lido_continuo'], len(n['estado_ilegivel'])),
        ),
        ('conexões da origem derrubadas', lambda n: n['conexoes_origem_derrubadas']),
    ]
    for tipo in TIPOS_DE_FALHA:
        linhas.append(
            ('falhas injetadas: %s' % tipo, lambda n, t=tipo: n['falhas_injetadas'].get(t, 0))
        )
    linhas += [
        (
            'empresas: regra / projeto / dados',
            lambda n: (
                '%d / %d / %d'
                % (
                    len(_de(n, 'empresas', 'ao vivo', 'aceitas', padrao=[])),
                    _de(n, 'empresas', 'ao vivo', 'com_projeto'),
                    _de(n, 'empresas', 'ao vivo', 'com_dados'),
                )
            ),
        ),
        (
            '  recusadas/excluidas sem projeto',
            lambda n: (
                '%s %s'
                % (
                    ','.join(
                        _de(n, 'empresas', 'ao vivo', 'recusadas', padrao=[])
                        + _de(n, 'empresas', 'ao vivo', 'excluidas', padrao=[])
                    ),
                    _motivos_da(n, ('empresa_recusada_com_projeto', 'projeto_inesperado')),
                )
            ),
        ),
        ('linhas verificadas (ao vivo)', lambda n: n['linhas_verificadas']),
        ('LINHAS PERDIDAS (tem de ser 0)', lambda n: n['perdidas']),
        ('duplicadas com key', lambda n: n['duplicadas']),
        (
            'estratégia (reconciliação s)',
            lambda n: (
                '%s (%s)'
                % (
                    n.get('estrategia', 'coluna'),
                    _de(n, 'reconciliacao', 'intervalo_s', padrao='-'),
                )
            ),
        ),
        (
            'rec: apagadas que sobraram',
            lambda n: (
                '%s (zeradas em %s s)'
                % (
                    _de(n, 'reconciliacao', 'apagadas_sobrando'),
                    _de(n, 'reconciliacao', 'apagadas_zeradas_s', padrao='-'),
                )
                if 'reconciliacao' in n
                else '-'
            ),
        ),
        (
            'rec: vivas removidas (vigia)',
            lambda n: (
                '%s em %s voltas (erro %s, relidas %s)'
                % (
                    _de(n, 'reconciliacao', 'vivas_removidas'),
                    _de(n, 'reconciliacao', 'voltas'),
                    _de(n, 'reconciliacao', 'voltas_com_erro'),
                    _de(n, 'reconciliacao', 'nao_confirmadas'),
                )
                if 'reconciliacao' in n
                else '-'
            ),
        ),
        (
            'rec: desculpas (empresa/reinserida)',
            lambda n: (
                '%s / %s'
                % (
                    _de(n, 'reconciliacao', 'desculpadas', 'mudou_de_empresa'),
                    _de(n, 'reconciliacao', 'desculpadas', 'reinserida_na_remocao'),
                )
                if 'reconciliacao' in n
                else '-'
            ),
        ),
        (
            'rec: removidas pelo ouvinte',
            lambda n: (
                '-'
                if _de(n, 'reconciliacao', 'removidas_total', padrao=None) is None
                else n['reconciliacao']['removidas_total']
            ),
        ),
        (
            '  apagadas na carga (com key)',
            lambda n: _de(n, 'reconciliacao', 'apagadas_na_carga') if 'reconciliacao' in n else '-',
        ),
        ('desculpas: exclusão física', lambda n: n['desculpas']['apagada_na_origem']),
        (
            '  além da folga (perdidas/feitas)',
            lambda n: (
                '%s de %s'
                % (n['alem_da_folga']['perdidas_pelo_ao_vivo'], n['alem_da_folga']['transacoes'])
            ),
        ),
        ('  mudou de empresa', lambda n: n['desculpas']['mudou_de_empresa']),
        (
            '  rajada / carimbo em massa',
            lambda n: '%s / %s' % (n['desculpas']['rajada'], n['desculpas']['carimbo_em_massa']),
        ),
        ('  dataset entregue (pos-rajada)', lambda n: n['desculpas']['dataset_entregue']),
        ('  versão antiga sem key', lambda n: n['desculpas']['versao_antiga_sem_key']),
        ('  quarentena', lambda n: n['desculpas']['quarentena']),
        ('  fora do ao-vivo (sem key, no log)', lambda n: n['desculpas']['fora_do_ao_vivo']),
        (
            'entregue sem rajada da tortura',
            lambda n: _motivos_da(n, ('entregue_sem_rajada', 'entregue_no_log')),
        ),
        (
            'sujo: carimbo no futuro',
            lambda n: (
                '%s ausentes de %s; marca %s'
                % (
                    _de(n, 'dado_sujo', 'futuro', 'ausentes'),
                    _de(n, 'dado_sujo', 'futuro', 'linhas'),
                    'NO FUTURO'
                    if _de(n, 'dado_sujo', 'futuro', 'marcas_no_futuro', padrao=[])
                    or _de(n, 'dado_sujo', 'futuro', 'marcas_no_futuro_apos_varredura', padrao=[])
                    else 'ok',
                )
            ),
        ),
        ('sujo: venenosos na quarentena', _quarentena),
        (
            'sujo: carimbo em massa > teto',
            lambda n: (
                '%s linhas; volta em %s s'
                % (
                    n['mudancas_por_tipo'].get('linhas_carimbo_em_massa', 0),
                    (n.get('retomada_s') or {}).get('estoques', '-'),
                )
            ),
        ),
        (
            'sujo: relógio da origem voltou',
            lambda n: (
                '%s ausentes de %s; avisos %s'
                % (
                    _de(n, 'dado_sujo', 'relogio', 'ausentes'),
                    _de(n, 'dado_sujo', 'relogio', 'linhas'),
                    _de(n, 'dado_sujo', 'relogio', 'avisos'),
                )
            ),
        ),
        (
            'sujo: chaves com BOM',
            lambda n: (
                'reprovisionadas %s %s'
                % (
                    _de(n, 'dado_sujo', 'bom', 'reprovisionadas', padrao='?'),
                    _motivos_da(n, ('chaves_bom',)),
                )
            ),
        ),
        (
            'sujo: kill -9 na varredura',
            lambda n: (
                'órfãos %s/%s/%s/%s'
                % tuple(
                    _de(n, 'dado_sujo', 'kill9_varredura', c, padrao='?')
                    for c in (
                        'orfaos',
                        'vivos_ao_subir',
                        'encerrados_pela_subida',
                        'vivos_apos_subir',
                    )
                )
            ),
        ),
        (
            'sujo: 200 malformado',
            lambda n: (
                '%s injetados %s'
                % (
                    n['falhas_injetadas'].get('corpo_invalido', 0),
                    'ok' if not n['perdidas'] else 'FALHOU',
                )
            ),
        ),
        (
            'após varredura: faltando/sobrando',
            lambda n: (
                '%s/%s'
                % (n['apos_varredura'].get('divergente', 0), n['apos_varredura'].get('sobra', 0))
            ),
        ),
        (
            'ao-vivo parado após varredura',
            lambda n: ','.join(n['ao_vivo_parado_apos_varredura']) or '-',
        ),
        ('processos sobrando no fim', lambda n: n.get('sobras_no_fim', '?')),
        (
            'latência p50 / p95 / max (s)',
            lambda n: (
                '%s / %s / %s'
                % (n['latencia']['p50_s'], n['latencia']['p95_s'], n['latencia']['max_s'])
            ),
        ),
        ('  mudanças medidas', lambda n: n['latencia']['medidas']),
        ('alcance depois da carga (s)', lambda n: n.get('alcance_s')),
        ('varredura (s)', lambda n: n.get('varredura_s')),
        ('duração total (s)', lambda n: n['duracao_total_s']),
        ('motivos de reprovação', lambda n: len(n['motivos'])),
        ('RESULTADO', lambda n: 'PASSOU' if n['passou'] else 'FALHOU'),
    ]

    def celula(funcao, r):
        try:
            return str(funcao(r))
        except Exception:  # noqa: BLE001
            return '?'

    colunas = [
        ['%s %s' % (r.get('modo') or '', r['banco'])] + [celula(funcao, r) for _, funcao in linhas]
        for r in resultados
    ]
    larguras = [max(22, max(len(c) for c in coluna)) for coluna in colunas]
    rotulos = [''] + [rotulo for rotulo, _ in linhas]
    saida = []
    for numero, rotulo in enumerate(rotulos):
        celulas = [
            '%-*s' % (largura, coluna[numero])
            for largura, coluna in zip(larguras, colunas, strict=True)
        ]
        saida.append(' | '.join(['%-34s' % rotulo] + celulas).rstrip())
        if numero == 0:
            saida.append('-' * len(saida[0]))
    return '\n'.join(saida)


def imprimir(resultados):
    print()
    print(tabela(resultados))
    for r in resultados:
        for classe in verificar.REPROVAM:
            for exemplo in r['ao_vivo_exemplos'].get(classe, []):
                print('  %s [%s]: %s' % (r['banco'], classe, exemplo))
        for exemplo in r['apos_varredura_exemplos'].get('divergente', []) + r[
            'apos_varredura_exemplos'
        ].get('sobra', []):
            print('  %s [após varredura]: %s' % (r['banco'], exemplo))
        for motivo in r['motivos']:
            print('  %s FALHOU [%s]: %s' % (r['banco'], motivo['codigo'], motivo['texto']))


def _sigterm_vira_interrupcao(sinal, quadro):  # noqa: ARG001
    # SIGTERM no harness vira KeyboardInterrupt: os `finally` limpam os processos.
    raise KeyboardInterrupt('SIGTERM')


def principal(argv=None):
    p = argparse.ArgumentParser(
        description='Tortura do ouvinte: processos reais, kills, falhas, dado sujo e commits'
        ' atrasados; confere cada linha no fim. Ver docs/tortura.md.'
    )
    p.add_argument(
        '--modo',
        choices=sorted(MODOS),
        default='curto',
        help='curto: cabe no make test; médio: ~5 min; longo: >= 20 min de carga por banco',
    )
    p.add_argument(
        '--longo', dest='modo', action='store_const', const='longo', help='o mesmo que --modo=longo'
    )
    p.add_argument(
        '--banco',
        choices=('postgres', 'mariadb', 'ambos'),
        default=None,
        help='a origem (padrão postgres; com binlog, mariadb); ambos = um depois do outro',
    )
    p.add_argument(
        '--duracao', type=int, default=None, metavar='S', help='segundos de carga (padrão do modo)'
    )
    p.add_argument(
        '--semente',
        type=int,
        default=None,
        help='semente do acaso (o relatório diz qual foi usada)',
    )
    p.add_argument(
        '--estrategia',
        choices=ESTRATEGIAS,
        default='coluna',
        help='a estratégia do ouvinte (padrão coluna); com coluna+reconciliacao a'
        ' exclusão física deixa de ser desculpa e um vigia confere sem parar'
        ' que nenhuma linha viva é removida; binlog (MariaDB) e slot_logico'
        ' (PostgreSQL) leem o log num servidor privado subido pela tortura, e'
        ' nem a exclusão, nem a rajada, nem o commit além da folga têm'
        ' desculpa',
    )
    p.add_argument(
        '--intervalo-reconciliacao',
        type=int,
        default=None,
        metavar='S',
        help='segundos entre duas reconciliações (padrão do modo: 10 no curto)',
    )
    p.add_argument(
        '--saida', default=None, metavar='ARQ', help='grava os números em JSON neste arquivo'
    )
    p.add_argument(
        '--manter',
        action='store_true',
        help='não apaga a pasta de trabalho (logs do ouvinte e das ferramentas)',
    )
    p.add_argument(
        '--tabela',
        nargs='+',
        metavar='JSON',
        help='não roda nada: junta numa tabela só os JSON de --saida de rodadas'
        ' anteriores (ex.: a do PostgreSQL e a do MariaDB)',
    )
    args = p.parse_args(argv)

    if args.tabela:
        resultados = []
        for caminho in args.tabela:
            with open(caminho, encoding='utf-8') as f:
                resultados.extend(json.load(f)['resultados'])
        imprimir(resultados)
        return 0 if resultados and all(r['passou'] for r in resultados) else 1

    cfg = dict(MODOS[args.modo], nome=args.modo, estrategia=args.estrategia)
    if args.intervalo_reconciliacao:
        cfg['intervalo_reconciliacao'] = args.intervalo_reconciliacao
    if args.duracao:
        cfg['limite_total'] += args.duracao - cfg['duracao']
        cfg['duracao'] = args.duracao
    semente = args.semente if args.semente is not None else int(time.time()) % 100000
    if args.estrategia in log.BANCO:
        if args.banco not in (None, log.BANCO[args.estrategia]):
            p.error(
                '--estrategia=%s lê o log do %s: --banco=%s não serve'
                % (args.estrategia, log.BANCO[args.estrategia], args.banco)
            )
        bancos = [log.BANCO[args.estrategia]]
    elif args.banco == 'ambos':
        bancos = ['postgres', 'mariadb']
    else:
        bancos = [args.banco or 'postgres']
    python = os.path.join(RAIZ, '.venv', 'bin', 'python')
    if not os.path.exists(python):
        python = sys.executable

    resultados = []
    falhou_ambiente = []
    for banco in bancos:
        disponivel, motivo = (
            log.disponivel(args.estrategia)
            if args.estrategia in log.BANCO
            else origem.banco_disponivel(banco)
        )
        if not disponivel:
            falhou_ambiente.append(motivo)
            registro('PULADO: %s', motivo)
            continue
        pasta = tempfile.mkdtemp(prefix='tortura-%s-' % banco)
        registro('%s: pasta %s, semente %s, produto em %s', banco, pasta, semente, RAIZ)
        tortura = Tortura(banco, cfg, semente, pasta, python)
        try:
            numeros = tortura.rodar()
        except Falhou as erro:
            registro('NÃO RODOU (%s): %s', banco, erro)
            falhou_ambiente.append('%s: %s' % (banco, erro))
            args.manter = True
            continue
        numeros['pasta'] = pasta
        resultados.append(numeros)
        if not numeros['passou']:
            args.manter = True
        if not args.manter:
            shutil.rmtree(pasta, ignore_errors=True)

    if resultados:
        imprimir(resultados)
    if args.saida:
        with open(args.saida, 'w', encoding='utf-8') as f:
            json.dump(
                {'resultados': resultados, 'nao_rodou': falhou_ambiente}, f, indent=2, default=str
            )
    if falhou_ambiente and not resultados:
        return 3
    return 0 if resultados and all(r['passou'] for r in resultados) and not falhou_ambiente else 1


if __name__ == '__main__':
    signal.signal(signal.SIGTERM, _sigterm_vira_interrupcao)
    sys.exit(principal())
