#!/usr/bin/env python3
"""
TORTURA -- a prova de que nenhuma linha se perde em silêncio.

    .venv/bin/python bench/tortura.py                      # modo curto, PostgreSQL (~2 min)
    .venv/bin/python bench/tortura.py --modo=longo --banco=ambos   # >= 20 min por banco

Roda os processos DE VERDADE sob carga hostil e confere cada linha no fim:

  * origem PostgreSQL ou MariaDB, num banco novo; varias empresas (uma excluída,
    uma inativa, uma que aparece no meio); datasets com e sem `key` e uma tabela
    de domínio;
  * carga em varias conexões: inclusões, alterações, cancelamentos
    (SITUACAO='C'), exclusões fisicas, transações que carimbam com o relógio do
    banco e comitam atrasadas até metade da `--folga`, rajada acima do
    `--maximo-por-ciclo`, e uma transação que comita DEPOIS da folga (o limite
    documentado da estratégia `coluna`);
  * o `ouvinte.py` como processo real, morto com kill -9 (as vezes SIGTERM) em
    momentos aleatórios e reiniciado; um segundo ouvinte tentado de propósito;
  * o Contextia local injetando 500/503, 429 com Retry-After, respostas lentas
    e conexões derrubadas; conexões da origem derrubadas
    (`pg_terminate_backend` / `KILL`).

Depois confere: (1) sem varredura, toda linha está no Contextia com os valores
mais novos, menos exclusões e rajadas, que são listadas; (2) depois de uma
varredura, Contextia == origem, empresa a empresa, dataset a dataset; (3) sem
duplicata onde há `key`; (4) o estado foi JSON legível depois de cada morte e
nunca rodaram dois ouvintes; (5) a tabela de números. Código de saída 0 só se
nada se perdeu. Ver docs/tortura.md.
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

import tortura_origem as origem              # noqa: E402
import tortura_processos as processos        # noqa: E402
import tortura_verificar as verificar        # noqa: E402

# Os dois modos. O curto cabe no `make test` (alvo: bem menos de 3 min); o
# longo e a prova de verdade (>= 20 min de carga por banco).
MODOS = {
    'curto': dict(duracao=40, intervalo=1, intervalo_projetos=4, folga=6, maximo=150,
                  conexoes=4, ritmo=4.0, taxa=0.02, periodo_kill=(3.0, 7.0),
                  periodo_conexao=(2.0, 5.0), fracao_sigterm=0.25, rajadas=1, rajada_em=0.45,
                  alem_da_folga=1, por_empresa=30, limite_total=230),
    'longo': dict(duracao=1200, intervalo=2, intervalo_projetos=10, folga=20, maximo=300,
                  conexoes=5, ritmo=3.0, taxa=0.02, periodo_kill=(8.0, 40.0),
                  periodo_conexao=(3.0, 15.0), fracao_sigterm=0.25, rajadas=2, rajada_em=0.8,
                  alem_da_folga=3, por_empresa=200, limite_total=1200 + 900),
}

TIPOS_DE_FALHA = ('500', '503', '429', 'atraso', 'derrubar')


def registro(mensagem, *args):
    agora = datetime.datetime.now().strftime('%H:%M:%S')
    print('[tortura %s] %s' % (agora, mensagem % args if args else mensagem), flush=True)


class Falhou(Exception):
    """A tortura não conseguiu rodar (não é perda de dado: e o ambiente ou o harness)."""


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
        self.numeros = {'banco': banco, 'semente': semente, 'modo': cfg.get('nome')}
        self.achados = []                 # problemas que NAO sao do harness
        self.nome_banco = None
        self.servidor = None
        self.ouvinte = None
        self.entregues_vistos = {}        # {dataset: marca} entregues a varredura pelo ouvinte

    # -- utilidades --------------------------------------------------------------

    def restante(self):
        return self.prazo - time.monotonic()

    def ambiente(self, **extra):
        amb = dict(os.environ)
        amb.update({
            'CONTEXTIA_URL': self.servidor.url,
            'CONTEXTIA_ADMIN_TOKEN': self.servidor.admin_token,
            'CONTEXTIA_ORIGEM': self.url,
            'CONTEXTIA_ORIGEM_TIMEOUT': '30',
            'PYTHONUNBUFFERED': '1',
            processos.VARIAVEL_MARCA: self.marca,
        })
        amb.pop('CONTEXTIA_API_KEY', None)
        amb.update(extra)
        return amb

    def rodar_ferramenta(self, argv, rotulo, ambiente=None, limite=300):
        caminho = os.path.join(self.pasta, 'ferramentas.log')
        with open(caminho, 'ab') as log:
            log.write(('\n$ %s\n' % ' '.join(argv)).encode())
            log.flush()
            codigo = subprocess.call(argv, cwd=RAIZ, env=ambiente or self.ambiente(),
                                     stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, timeout=limite)
        if codigo != 0:
            raise Falhou('%s saiu com %s (ver %s)' % (rotulo, codigo, caminho))

    # -- preparo -----------------------------------------------------------------

    def preparar(self):
        from contextia_local.processo import ServidorLocal

        registro('%s: banco novo, esquema e linhas iniciais', self.banco)
        self.nome_banco, self.url = origem.criar_banco(self.banco)
        self.carga = origem.Carga(self.banco, self.url, conexoes=self.cfg['conexoes'],
                                  folga=self.cfg['folga'], maximo=self.cfg['maximo'],
                                  semente=self.semente, ritmo=self.cfg['ritmo'],
                                  registro=registro)
        self.carga.popular(self.cfg['por_empresa'])

        self.servidor = ServidorLocal(os.path.join(self.pasta, 'contextia'), falhas=True)
        self.servidor.__enter__()
        # O verificador le o Contextia daqui mesmo; o cliente le o ambiente na hora.
        os.environ['CONTEXTIA_URL'] = self.servidor.url
        os.environ['CONTEXTIA_ADMIN_TOKEN'] = self.servidor.admin_token

        self.mapa = os.path.join(self.pasta, 'tortura.json')
        schema = os.path.join(RAIZ, 'mappings', 'mapeamento.schema.json')
        with open(self.mapa, 'w', encoding='utf-8') as f:
            json.dump(origem.mapeamento(schema if os.path.exists(schema) else None), f,
                      indent=2)
        self.chaves = os.path.join(self.pasta, 'chaves.tsv')

        # A implantacao, como o operador faz: provisiona e carrega tudo uma vez.
        registro('implantação: provisionar.py e carregar-todas.sh')
        self.rodar_ferramenta([self.python, 'provisionar.py', '--mapping=' + self.mapa,
                               '--source=generic', '--chaves=' + self.chaves],
                              'provisionar.py')
        self.rodar_ferramenta(['bash', os.path.join(RAIZ, 'carregar-todas.sh'), self.chaves],
                              'carregar-todas.sh', self.ambiente(
                                  CONTEXTIA_MAPPING=self.mapa, CONTEXTIA_PYTHON=self.python,
                                  CONTEXTIA_COLETA=RAIZ))

        estado_dir = os.path.join(self.pasta, 'estado')
        os.makedirs(estado_dir, exist_ok=True)
        cfg = self.cfg
        self.ouvinte = processos.Ouvinte(self.python, [
            '--mapping=' + self.mapa, '--source=generic', '--chaves=' + self.chaves,
            '--estado=' + estado_dir,
            '--intervalo-dados=%d' % cfg['intervalo'],
            '--intervalo-projetos=%d' % cfg['intervalo_projetos'],
            '--varredura=nao', '--folga=%d' % cfg['folga'],
            '--maximo-por-ciclo=%d' % cfg['maximo'],
            '--timeout-ferramenta=300', '--inatividade-ferramenta=120',
        ], self.ambiente(), estado_dir, os.path.join(self.pasta, 'ouvinte.log'))

    def esperar_marcas(self):
        """A primeira subida só fixa as marcas: a carga começa depois disso."""
        self.ouvinte.iniciar()
        fim = time.monotonic() + 60
        while time.monotonic() < fim:
            ok, estado = self.ouvinte.estado()
            marcas = (estado or {}).get('marca_agua') or {}
            if ok and len([v for v in marcas.values() if v is not None]) >= \
                    len(origem.DATASETS):
                return
            if not self.ouvinte.vivo():
                raise Falhou('o ouvinte saiu na primeira subida (código %s); ver %s'
                             % (self.ouvinte.codigo(), self.ouvinte.saida))
            time.sleep(0.2)
        raise Falhou('o ouvinte não fixou as marcas iniciais em 60 s; ver %s'
                     % self.ouvinte.saida)

    # -- a tortura ---------------------------------------------------------------

    def torturar(self):
        from contextia_sync.intake import cliente
        from contextia_sync.provisionamento.chaves import ler_chaves

        cfg = self.cfg
        chaves = ler_chaves(self.chaves)
        escopo_amostra = str(origem.EMPRESAS_INICIAIS[0])
        self.vigia = processos.Vigia(self.marca)
        self.vigia.permitir(principal=self.ouvinte.pid)
        self.vigia.iniciar()
        self.amostrador = verificar.Amostrador(cliente, chaves[escopo_amostra], escopo_amostra,
                                               self.carga.mudancas, self.carga.trava)
        self.amostrador.iniciar()
        self.matador = processos.Matador(
            self.ouvinte, self.vigia, self.marca, periodo=cfg['periodo_kill'],
            fracao_sigterm=cfg['fracao_sigterm'], espera_sigterm=60,
            semente=self.semente + 1, registro=registro)
        self.conexoes = origem.MatadorDeConexoes(
            self.banco, self.url, self.nome_banco, self.carga.protegidos,
            periodo=cfg['periodo_conexao'], semente=self.semente + 2)

        taxas = {t: cfg['taxa'] for t in TIPOS_DE_FALHA}
        self.servidor.taxa_de_falhas(taxas, semente=self.semente + 3)
        registro('carga por %ss: %d conexões, kill a cada %s s, falhas %s por tipo',
                 cfg['duracao'], cfg['conexoes'], cfg['periodo_kill'], cfg['taxa'])
        self.carga.iniciar()
        self.matador.iniciar()
        self.conexoes.iniciar()

        duracao = cfg['duracao']
        atraso_alem = self.atraso_alem_da_folga()
        eventos = [(0.3 * duracao, 'empresa_nova')]
        # Rajada tarde no modo longo: depois dela o dataset espera a varredura, e
        # antes disso ele tem de passar a maior parte da tortura AO VIVO.
        for n in range(cfg['rajadas']):
            inicio = cfg['rajada_em']
            eventos.append(((inicio + (0.95 - inicio) * n / max(1, cfg['rajadas'])) * duracao,
                            'rajada'))
        for n in range(cfg['alem_da_folga']):
            # Comita com a carga ainda rodando: a marca precisa seguir andando.
            momento = (0.15 + 0.6 * n / max(1, cfg['alem_da_folga'])) * duracao
            momento = min(momento, duracao - atraso_alem - 3 * cfg['intervalo'])
            eventos.append((max(1.0, momento), 'alem_da_folga'))
        eventos.sort()

        comeco = time.monotonic()
        while True:
            decorrido = time.monotonic() - comeco
            if decorrido >= duracao:
                break
            if self.restante() < 120:
                self.achados.append('prazo total curto: carga encerrada em %.0fs' % decorrido)
                break
            while eventos and eventos[0][0] <= decorrido:
                _, evento = eventos.pop(0)
                try:
                    if evento == 'empresa_nova':
                        # As mortes ao acaso esperam: a proxima e a de proposito,
                        # na carga inicial desta empresa.
                        self.matador.pausado.set()
                        self.pausa_ate = time.monotonic() + 30
                        self.carga.empresa_nova()
                    elif evento == 'rajada':
                        self.carga.rajada()
                    else:
                        self.carga.alem_da_folga_em_thread(atraso_alem)
                except Exception as erro:             # noqa: BLE001
                    self.achados.append('harness: evento %s falhou: %s' % (evento, erro))
            self._olhar_pendentes()
            self._olhar_alem_da_folga()
            self._matar_na_carga_inicial()
            time.sleep(0.2)

        registro('fim da carga; esperando as transações em voo comitarem')
        vivas = self.carga.parar(espera=atraso_alem + 30)
        if vivas:
            self.achados.append('harness: threads da carga não terminaram: %s' % vivas)
        self.matador.parar()
        self.conexoes.parar()
        injetadas = self.servidor.falhas_injetadas()
        self.numeros['falhas_injetadas'] = {t: injetadas.get(t, 0) for t in TIPOS_DE_FALHA}
        self.servidor.taxa_de_falhas({})
        self.matador.garantir_vivo()
        motor = self._motor()
        self.fim_carga = origem.agora_do_banco(motor, self.banco)
        self.fim_carga_parede = time.time()
        motor.dispose()

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
        if linha and dono and int(dono.group(1)) == self.ouvinte.pid and \
                'carga inicial %s' % origem.EMPRESA_NOVA in linha.group(1):
            if self.matador.uma_morte(so_kill=True, esperar=False):
                self.matador.pausado.clear()
                self.numeros['kill_na_carga_inicial'] = linha.group(1)
                registro('kill -9 DURANTE a carga inicial da empresa nova (%s)',
                         linha.group(1))

    def _olhar_alem_da_folga(self):
        """Para cada transação além da folga recem-comitada: a marca do ouvinte naquele instante."""
        from contextia_sync.captura.marca_agua import como_valor
        if not hasattr(self, 'marcas_no_commit'):
            self.marcas_no_commit = []
        for dataset, ident, atraso, carimbo in self.carga.alem_da_folga[
                len(self.marcas_no_commit):]:
            ok, estado = self.ouvinte.estado()
            marca = como_valor(((estado or {}).get('marca_agua') or {}).get(dataset))
            self.marcas_no_commit.append({
                'dataset': dataset, 'id': ident, 'carimbo': str(carimbo),
                'atraso_s': round(atraso, 1), 'marca_no_commit': str(marca),
                'janela_ja_passou': bool(marca and carimbo and marca - datetime.timedelta(
                    seconds=self.cfg['folga']) > carimbo)})

    def atraso_alem_da_folga(self):
        # Duas folgas e alguns ciclos: a marca gravada no estado pode estar uns
        # segundos atras (o ouvinte morto no meio do ciclo nao gravou a ultima),
        # e a demonstracao tem de valer mesmo assim.
        return 2 * self.cfg['folga'] + 5 * self.cfg['intervalo'] + 5

    def _olhar_pendentes(self):
        """
        Anota cada dataset que o OUVINTE entregou a varredura (pelo estado), com
        a marca de água daquele momento: o que mudou depois de `marca - folga`
        naquele dataset espera a varredura -- por projeto, e visível no status.
        """
        from contextia_sync.captura.marca_agua import como_valor
        ok, estado = self.ouvinte.estado()
        # Lido a cada 0,2 s com o ouvinte escrevendo: nunca pode estar pela metade.
        self.leituras_do_estado = getattr(self, 'leituras_do_estado', 0) + 1
        if not ok:
            self.matador.estados_ruins.append('leitura continua: %s' % estado)
        if ok and estado:
            for dataset in (estado.get('pendentes_varredura') or {}):
                if dataset not in self.entregues_vistos:
                    marca = como_valor((estado.get('marca_agua') or {}).get(dataset))
                    self.entregues_vistos[dataset] = marca
                    registro('o ouvinte entregou %s a varredura (marca %s)', dataset, marca)

    def _motor(self):
        import sqlalchemy as sa
        return sa.create_engine(self.url, poolclass=sa.pool.NullPool)

    # -- conferencias ------------------------------------------------------------

    def ler_dois_lados(self):
        from contextia_sync.intake import cliente
        from contextia_sync.provisionamento.chaves import ler_chaves

        chaves = ler_chaves(self.chaves)
        motor = self._motor()
        linhas = {tabela: origem.ler_tabela(motor, tabela)
                  for tabela, *_ in origem.DATASETS.values()}
        motor.dispose()
        esperado = verificar.origem_por_empresa(linhas, sorted(chaves))
        obtido = verificar.ler_contextia(cliente, chaves)
        return chaves, esperado, obtido

    def contexto(self):
        entregues = {d: m for d, m in self.entregues_vistos.items()
                     if isinstance(m, datetime.datetime)}
        sem_rajada = sorted(set(entregues) - {r['dataset'] for r in self.carga.rajadas})
        if sem_rajada and not getattr(self, '_avisou_sem_rajada', False):
            self._avisou_sem_rajada = True
            self.achados.append(
                'entregue(s) a varredura SEM rajada da carga: %s -- o movimento normal'
                ' passou do --maximo-por-ciclo dentro da janela da folga'
                % ', '.join(sem_rajada))
        return verificar.Contexto(
            fim=self.fim_carga, folga=self.cfg['folga'], intervalo=self.cfg['intervalo'],
            rajadas=self.carga.rajadas, entregues=entregues,
            alem_da_folga=self.carga.alem_da_folga, apagados=self.carga.apagados)

    def conferir_ao_vivo(self):
        """Verificação 1: o ouvinte alcancou, sem varredura nenhuma."""
        cfg = self.cfg
        limite = min(self.restante() - 60, 30 + 3 * cfg['folga'] + 10 * cfg['intervalo'])
        fim = time.monotonic() + max(10, limite)
        registro('verificação 1: esperando o ouvinte alcancar (até %.0fs), sem varredura',
                 fim - time.monotonic())
        # Pelo menos dois ciclos completos depois do fim da carga.
        self.ouvinte.esperar_status_novo(self.fim_carga_parede + 2 * cfg['intervalo'], 60)
        while True:
            self.matador.garantir_vivo()
            self._olhar_pendentes()
            chaves, esperado, obtido = self.ler_dois_lados()
            resultado = verificar.comparar(esperado, obtido, self.contexto())
            classes = resultado['classes']
            if not classes.get('perdida') and not classes.get('recente_ausente'):
                break
            if time.monotonic() >= fim:
                break
            time.sleep(max(1, cfg['intervalo']))
        self.numeros['alcance_s'] = round(time.monotonic() - self.inicio_alcance, 1)
        self.numeros['empresas'] = sorted(chaves)
        return resultado

    def varrer(self):
        """Uma varredura pelo próprio ouvinte (`--varrer-agora`)."""
        registro('varredura: reiniciando o ouvinte com --varrer-agora')
        saiu, segundos = self.ouvinte.terminar(60)
        if not saiu:
            self.achados.append('SIGTERM antes da varredura não encerrou em 60 s')
        processos.matar_marcados(self.marca)
        self.ouvinte.iniciar(['--varrer-agora'])
        self.vigia.permitir(principal=self.ouvinte.pid)
        inicio = time.monotonic()
        fim = inicio + max(30, min(600, self.restante() - 60))
        while time.monotonic() < fim:
            # A linha de status da varredura so existe depois que ELA terminou,
            # e diz quantas fases deram erro.
            achou = re.search(r'^varredura \.+: \S+ erros=(\d+)', self.ouvinte.status(),
                              re.MULTILINE)
            if achou:
                self.numeros['varredura_s'] = round(time.monotonic() - inicio, 1)
                if int(achou.group(1)):
                    self.achados.append('a varredura terminou com %s fase(s) com erro'
                                        % achou.group(1))
                    self.achados.extend(self._falhas_da_varredura())
                return True
            if not self.ouvinte.vivo():
                raise Falhou('o ouvinte saiu durante a varredura (código %s)'
                             % self.ouvinte.codigo())
            time.sleep(0.5)
        self.achados.append('a varredura não terminou em %.0f s' % (fim - inicio))
        return False

    def _falhas_da_varredura(self, quantas=4):
        """As linhas 'FALHOU --' que as ferramentas da varredura escreveram no log do ouvinte."""
        try:
            with open(self.ouvinte.saida, encoding='utf-8', errors='replace') as f:
                texto = f.read()
        except OSError:
            return []
        texto = texto[texto.rfind('===== tortura: partida'):]
        linhas = [re.sub(r'^.*?\| +', '', x).strip() for x in texto.splitlines()
                  if 'FALHOU --' in x]
        return ['varredura: %s' % x[:220] for x in linhas[:quantas]]

    def conferir_retomada(self):
        """Depois da varredura, o ao-vivo volta em TODO dataset (inclusive o da rajada)?"""
        import sqlalchemy as sa
        from contextia_sync.intake import cliente
        from contextia_sync.provisionamento.chaves import ler_chaves

        chaves = ler_chaves(self.chaves)
        escopo = str(origem.EMPRESAS_INICIAIS[1])   # a empresa da rajada
        meta = origem.esquema()
        agora = origem.agora_expr(self.banco)
        motor = self._motor()
        alvos = {}
        with motor.begin() as conexao:
            for dataset, (tabela, _chave, _colunas, recorte) in origem.DATASETS.items():
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
                else:
                    valores['DESCRICAO'] = 'Retomada %s' % uuid.uuid4().hex[:8]
                conexao.execute(t.update().where(t.c[chave] == ident).values(**valores))
                alvos[dataset] = verificar.canonico(verificar.TIPOS[dataset][chave], ident)
        motor.dispose()
        limite = time.monotonic() + 10 * self.cfg['intervalo'] + 20
        faltam = dict(alvos)
        while faltam and time.monotonic() < limite:
            _, esperado, _ = self.ler_dois_lados()
            for dataset in list(faltam):
                linha = [x for x in esperado[escopo][dataset]
                         if verificar.chave_de(dataset, x) == faltam[dataset]]
                sig = verificar.assinatura(dataset, linha[0]) if linha else None
                registros = list(cliente.ler_registros(dataset, chaves[escopo]))
                if any(verificar.assinatura(dataset, r) == sig for r in registros):
                    del faltam[dataset]
            time.sleep(1)
        return sorted(faltam)

    # -- tudo junto ----------------------------------------------------------------

    def _cao_de_guarda(self):
        """Passou do prazo total e mais um minuto: mata tudo e sai, travado ou não."""
        if self._fim_do_cao.wait(max(0, self.restante()) + 60):
            return
        registro('PRAZO TOTAL ESTOURADO: matando os processos da tortura e saindo')
        processos.matar_marcados(self.marca)
        if self.servidor is not None:
            self.servidor.parar()
        if self.nome_banco:
            try:
                origem.derrubar_banco(self.banco, self.nome_banco)
            except Exception:                         # noqa: BLE001
                pass
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
            varreu = self.varrer()
            _, esperado, obtido = self.ler_dois_lados()
            exato = verificar.comparar(esperado, obtido)
            parados = self.conferir_retomada() if varreu else ['(sem varredura)']
            self.vigia.parar()
            self.fechar_numeros(ao_vivo, exato, parados)
            self.conferir_projetos_recusados()
        finally:
            self.limpar()
            self._fim_do_cao.set()
        return self.numeros

    def conferir_projetos_recusados(self):
        """A empresa excluída e a inativa não ganharam projeto nem chave."""
        from contextia_sync.intake.admin import Admin
        from contextia_sync.provisionamento.chaves import ler_chaves
        chaves = ler_chaves(self.chaves)
        admin = Admin(token=self.servidor.admin_token, url=self.servidor.url)
        for escopo in (origem.EMPRESA_EXCLUIDA, origem.EMPRESA_INATIVA):
            if str(escopo) in chaves or admin.buscar_projeto(str(escopo)) is not None:
                self.achados.append('empresa %s (excluida/inativa) ganhou projeto ou chave'
                                    % escopo)
        if str(origem.EMPRESA_NOVA) not in chaves:
            self.achados.append('a empresa nova %s não foi provisionada' % origem.EMPRESA_NOVA)

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
        n['estado_lido_continuo'] = getattr(self, 'leituras_do_estado', 0)
        n['intrusos_recusados'] = self.matador.intrusos_recusados
        n['intrusos_aceitos'] = self.matador.intrusos_aceitos
        n['segundo_ouvinte'] = self.vigia.violacoes[:5]
        n['amostras_vigia'] = self.vigia.amostras
        n['ao_vivo'] = classes
        n['ao_vivo_exemplos'] = ao_vivo['exemplos']
        n['linhas_verificadas'] = classes.get('verificadas', 0)
        n['perdidas'] = classes.get('perdida', 0) + classes.get('recente_ausente', 0)
        n['duplicadas'] = classes.get('duplicada', 0) + exato['classes'].get('duplicada', 0)
        n['apos_varredura'] = exato['classes']
        n['apos_varredura_exemplos'] = exato['exemplos']
        n['divergencias_apos_varredura'] = (exato['classes'].get('divergente', 0)
                                            + exato['classes'].get('sobra', 0))
        n['alem_da_folga'] = {
            'transacoes': len(carga.alem_da_folga),
            'atraso_s': [round(a, 1) for _, _, a, _ in carga.alem_da_folga],
            'perdidas_pelo_ao_vivo': classes.get('alem_da_folga', 0),
            'recuperadas_pela_varredura': exato['classes'].get('divergente', 0) == 0,
        }
        n['alem_da_folga']['detalhe'] = getattr(self, 'marcas_no_commit', [])
        atrasos = [a for _, _, a, _ in carga.atrasadas] or [0]
        n['atrasadas'] = {'transacoes': len(carga.atrasadas),
                          'atraso_max_s': round(max(atrasos), 2), 'folga_s': self.cfg['folga']}
        n['rajadas'] = [{'dataset': r['dataset'], 'linhas': r['linhas']} for r in carga.rajadas]
        n['entregues_a_varredura_no_estado'] = sorted(self.entregues_vistos)
        n['ao_vivo_parado_apos_varredura'] = parados
        lat = self.amostrador.latencias
        n['latencia'] = {
            'medidas': len(lat), 'nao_medidas': self.amostrador.pendentes(),
            'p50_s': _arredondar(verificar.percentil(lat, 0.5)),
            'p95_s': _arredondar(verificar.percentil(lat, 0.95)),
            'max_s': _arredondar(max(lat) if lat else None)}
        if self.matador.orfaos_sigterm:
            self.achados.append('processos da ferramenta vivos depois do SIGTERM do ouvinte: %s'
                                % '; '.join(c[:80] for c in self.matador.orfaos_sigterm[:3]))
        if self.matador.sigterm_lentos:
            self.achados.append('SIGTERM não encerrou o ouvinte em 60 s (%d vez(es))'
                                % len(self.matador.sigterm_lentos))
        if self.matador.mortes_sozinho:
            self.achados.append('o ouvinte saiu sozinho (códigos %s)'
                                % self.matador.mortes_sozinho)
        n['achados'] = self.achados
        n['passou'] = bool(
            n['perdidas'] == 0 and n['duplicadas'] == 0
            and n['divergencias_apos_varredura'] == 0 and not n['estado_ilegivel']
            and not n['segundo_ouvinte'] and not n['intrusos_aceitos']
            and classes.get('fantasma', 0) == 0 and not parados)
        n['duracao_total_s'] = round(time.monotonic() - self.inicio, 1)

    def limpar(self):
        """Tudo que a tortura iniciou sai daqui morto, até o neto em grupo próprio."""
        for nome in ('matador', 'conexoes', 'amostrador', 'vigia'):
            objeto = getattr(self, nome, None)
            if objeto is not None:
                try:
                    objeto.parar()
                except Exception:                     # noqa: BLE001
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
            except Exception as erro:                 # noqa: BLE001
                registro('limpeza: servidor: %s', erro)
        if self.nome_banco:
            try:
                origem.derrubar_banco(self.banco, self.nome_banco)
            except Exception as erro:                 # noqa: BLE001
                registro('limpeza: banco %s: %s', self.nome_banco, erro)
        sobra = processos.processos_marcados(self.marca)
        self.numeros['processos_sobrando'] = [c for _, c in sobra]


def _arredondar(valor):
    return None if valor is None else round(valor, 2)


# ---------------------------------------------------------------------------
# A tabela
# ---------------------------------------------------------------------------

def tabela(resultados):
    """A tabela de números (verificação 5), uma coluna por banco."""
    linhas = [
        ('mudanças feitas', lambda n: n['mudancas']),
        ('  inclusoes/alteracoes/cancel.', lambda n: '%s/%s/%s' % (
            n['mudancas_por_tipo'].get('inclusao', 0), n['mudancas_por_tipo'].get('alteracao', 0),
            n['mudancas_por_tipo'].get('cancelamento', 0))),
        ('  exclusões fisicas', lambda n: n['mudancas_por_tipo'].get('exclusao', 0)),
        ('  atrasadas (max s / folga s)', lambda n: '%s (%s/%s)' % (
            n['atrasadas']['transacoes'], n['atrasadas']['atraso_max_s'],
            n['atrasadas']['folga_s'])),
        ('  rajadas acima do teto', lambda n: len(n['rajadas'])),
        ('kill -9 / SIGTERM', lambda n: '%s / %s' % (n['kills'], n['sigterms'])),
        ('segundo ouvinte recusado', lambda n: '%s (aceitos: %d)' % (
            n['intrusos_recusados'], len(n['intrusos_aceitos']))),
        ('estado legível após morte', lambda n: '%d/%d' % (
            n['estado_lido_apos_morte'] - len(n['estado_ilegivel']),
            n['estado_lido_apos_morte'])),
        ('  e lido a cada 0,2 s (ilegível)', lambda n: '%d (%d)' % (
            n['estado_lido_continuo'], len(n['estado_ilegivel']))),
        ('conexões da origem derrubadas', lambda n: n['conexoes_origem_derrubadas']),
    ]
    for tipo in TIPOS_DE_FALHA:
        linhas.append(('falhas injetadas: %s' % tipo,
                       lambda n, t=tipo: n['falhas_injetadas'].get(t, 0)))
    linhas += [
        ('linhas verificadas (ao vivo)', lambda n: n['linhas_verificadas']),
        ('LINHAS PERDIDAS (tem de ser 0)', lambda n: n['perdidas']),
        ('duplicadas com key', lambda n: n['duplicadas']),
        ('exclusões esperando varredura', lambda n: n['ao_vivo'].get('apagada_na_origem', 0)),
        ('rajada/dataset entregue', lambda n: '%s/%s' % (
            n['ao_vivo'].get('rajada', 0), n['ao_vivo'].get('dataset_entregue', 0))),
        ('além da folga: perdidas ao vivo', lambda n: '%s de %s' % (
            n['alem_da_folga']['perdidas_pelo_ao_vivo'], n['alem_da_folga']['transacoes'])),
        ('após varredura: faltando/sobrando', lambda n: '%s/%s' % (
            n['apos_varredura'].get('divergente', 0), n['apos_varredura'].get('sobra', 0))),
        ('ao-vivo parado após varredura', lambda n: ','.join(
            n['ao_vivo_parado_apos_varredura']) or '-'),
        ('latência p50 / p95 / max (s)', lambda n: '%s / %s / %s' % (
            n['latencia']['p50_s'], n['latencia']['p95_s'], n['latencia']['max_s'])),
        ('  mudanças medidas', lambda n: n['latencia']['medidas']),
        ('alcance depois da carga (s)', lambda n: n.get('alcance_s')),
        ('varredura (s)', lambda n: n.get('varredura_s')),
        ('duração total (s)', lambda n: n['duracao_total_s']),
        ('RESULTADO', lambda n: 'PASSOU' if n['passou'] else 'FALHOU'),
    ]
    cabeca = ['%-34s' % ''] + ['%-22s' % r['banco'] for r in resultados]
    saida = [' | '.join(cabeca).rstrip()]
    saida.append('-' * len(saida[0]))
    for rotulo, funcao in linhas:
        celulas = []
        for r in resultados:
            try:
                celulas.append('%-22s' % funcao(r))
            except Exception:                         # noqa: BLE001
                celulas.append('%-22s' % '?')
        saida.append(' | '.join(['%-34s' % rotulo] + celulas).rstrip())
    return '\n'.join(saida)


def _sigterm_vira_interrupcao(sinal, quadro):     # noqa: ARG001
    # SIGTERM no harness vira KeyboardInterrupt: os `finally` limpam os processos.
    raise KeyboardInterrupt('SIGTERM')


def principal(argv=None):
    p = argparse.ArgumentParser(
        description='Tortura do ouvinte: processos reais, kills, falhas e commits atrasados;'
                    ' confere cada linha no fim. Ver docs/tortura.md.')
    p.add_argument('--modo', choices=sorted(MODOS), default='curto',
                   help='curto: cabe no make test; longo: >= 20 min de carga por banco')
    p.add_argument('--longo', dest='modo', action='store_const', const='longo',
                   help='o mesmo que --modo=longo')
    p.add_argument('--banco', choices=('postgres', 'mariadb', 'ambos'), default='postgres',
                   help='a origem (padrão postgres); ambos = um depois do outro')
    p.add_argument('--duracao', type=int, default=None, metavar='S',
                   help='segundos de carga (padrão do modo)')
    p.add_argument('--semente', type=int, default=None,
                   help='semente do acaso (o relatório diz qual foi usada)')
    p.add_argument('--saida', default=None, metavar='ARQ',
                   help='grava os números em JSON neste arquivo')
    p.add_argument('--manter', action='store_true',
                   help='não apaga a pasta de trabalho (logs do ouvinte e das ferramentas)')
    args = p.parse_args(argv)

    cfg = dict(MODOS[args.modo], nome=args.modo)
    if args.duracao:
        cfg['limite_total'] += args.duracao - cfg['duracao']
        cfg['duracao'] = args.duracao
    semente = args.semente if args.semente is not None else int(time.time()) % 100000
    bancos = ['postgres', 'mariadb'] if args.banco == 'ambos' else [args.banco]
    python = os.path.join(RAIZ, '.venv', 'bin', 'python')
    if not os.path.exists(python):
        python = sys.executable

    resultados = []
    falhou_ambiente = []
    for banco in bancos:
        disponivel, motivo = origem.banco_disponivel(banco)
        if not disponivel:
            falhou_ambiente.append(motivo)
            registro('PULADO: %s', motivo)
            continue
        pasta = tempfile.mkdtemp(prefix='tortura-%s-' % banco)
        registro('%s: pasta %s, semente %s', banco, pasta, semente)
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
        print()
        print(tabela(resultados))
        for r in resultados:
            for classe in ('perdida', 'recente_ausente', 'fantasma', 'duplicada'):
                for exemplo in r['ao_vivo_exemplos'].get(classe, []):
                    print('  %s [%s]: %s' % (r['banco'], classe, exemplo))
            for exemplo in r['apos_varredura_exemplos'].get('divergente', []) + \
                    r['apos_varredura_exemplos'].get('sobra', []):
                print('  %s [após varredura]: %s' % (r['banco'], exemplo))
            for achado in r['achados']:
                print('  %s [achado]: %s' % (r['banco'], achado))
    if args.saida:
        with open(args.saida, 'w', encoding='utf-8') as f:
            json.dump({'resultados': resultados, 'nao_rodou': falhou_ambiente}, f,
                      indent=2, default=str)
    if falhou_ambiente and not resultados:
        return 3
    return 0 if resultados and all(r['passou'] for r in resultados) and \
        not falhou_ambiente else 1


if __name__ == '__main__':
    signal.signal(signal.SIGTERM, _sigterm_vira_interrupcao)
    sys.exit(principal())
