"""
A estratégia `slot_logico` (PostgreSQL): a decodificação lógica, com o spool no meio.

    WAL da origem --(peek)--> spool (<estado>/spool) --(entrega)--> Contextia
                     |                                     |
        o slot avança (pg_replication_slot_advance)   arquivo apagado só depois
        só depois do fsync do spool                   que o intake confirmou

Cada `ler(alvo)` primeiro BOMBEIA o slot por SQL comum (psycopg 3 não fala o
protocolo de replicação; NOTAS-AMBIENTE): `pg_logical_slot_peek_binary_changes`
até a posição do WAL já gravado em disco (`pg_current_wal_flush_lsn()`, lida
antes), põe cada linha mudada de uma tabela seguida no spool e só então avança
o slot até lá. Peek e não get: o get consumiria o slot ANTES do spool ter a
mudança; o peek deixa o slot onde estava até o advance. Depois, como no
`binlog`, toma do spool as mudanças do dataset e RELÊ essas chaves pela view
com o login somente leitura; a linha que sumiu vira `remove`.

O plugin é o `pgoutput`: está no núcleo de todo PostgreSQL ≥ 10 (o
`test_decoding` é um exemplo do contrib, que nem toda instalação tem; o
`wal2json` é um pacote à parte), filtra no servidor pela publicação (só as
tabelas do mapeamento saem do banco) e manda os valores no formato de texto do
próprio PostgreSQL, sem aspas para desfazer. O protocolo dele é binário, mas
pelo `..._binary_changes` ele vem como bytea numa consulta comum: decodificado
em `pgoutput.py` (o protocolo versão 1, puro) e juntado em transações em
`slot_mudancas.py`. A conexão e as conferências moram em `slot_banco.py`.

O slot (`contextia_<cliente>`) e a publicação de mesmo nome são criados por um
comando que o operador roda uma vez (`ouvinte.py --criar-slot`), nunca em
silêncio na subida: a partir dali o banco do cliente retém WAL por nós. E
`--remover-slot` os desfaz (o primeiro passo da desinstalação). Os dois moram
em `comandos_slot.py`.

Disco: o WAL retido pelo slot (`pg_wal_lsn_diff(pg_current_wal_lsn(),
restart_lsn)`) é medido a cada bomba e vai ao status, à saúde e às métricas.
Com o Contextia fora o ouvinte continua bombeando para o spool, então o WAL
retido não cresce -- até o spool encher, e aí a captura pausa e diz alto. Slot
invalidado pelo `max_slot_wal_keep_size`, apagado, ou movido por outro
processo: detectado, os datasets vão para a varredura e a saúde fica CRÍTICA
até ela rodar com um slot de pé.

Pontos de teste: com CONTEXTIA_TESTE_MORRER_EM=slot-lido (depois do peek, antes
do spool), slot-no-spool (depois do fsync do spool e da intenção gravada, antes
do advance) ou slot-entregue (o intake confirmou, antes de concluir no spool) o
processo se mata com SIGKILL ali. Existe só para o teste provar a retomada com
um processo morto de verdade (como em provisionamento/plano.py); não use em produção.
"""

from __future__ import annotations

import datetime
import os
import signal
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from contextia_sync.origem import AdaptadorDeOrigem
from contextia_sync import padroes
from contextia_sync.captura import DatasetVivo, Leitura
from contextia_sync.captura.comandos_slot import criar_slot, remover_slot
from contextia_sync.captura.do_spool import (
    CapturaPeloSpool,
    MarcaCritica,
    linhas_que_nao_sao_do_dataset,
)
from contextia_sync.captura.pgoutput import (
    Mensagem,
    Relacao,
    decodificar,
    int_para_lsn,
    lsn_para_int,
)
from contextia_sync.captura.slot_banco import (
    PLUGIN,
    ErroSlot,
    SlotNoBanco,
    conectar,
    conferir_origem,
    conferir_tabelas,
    ler_slot,
    nome_do_slot,
    tabelas_seguidas,
)
from contextia_sync.captura.slot_mudancas import LidoDoSlot
from contextia_sync.estado.estado import Estado
from contextia_sync.fila.spool import ErroSpoolCheio, Mudanca
from contextia_sync.registro import logger

if TYPE_CHECKING:  # tipos.py importa o sqlalchemy, que o autoteste não tem
    from contextia_sync.tipos import ConexaoDoDriver, Mapa, ObjetoJson

# Os nomes de sempre, importáveis daqui (cli/ouvinte.py, os testes): o decodificador
# mora em pgoutput.py, a conexão e as conferências em slot_banco.py, os comandos do
# operador em comandos_slot.py.
_conectar = conectar
__all__ = [
    'ARQUIVO_POSICAO',
    'PLUGIN',
    'CapturaSlotLogico',
    'ErroSlot',
    'Mensagem',
    'Relacao',
    'conferir_tabelas',
    'criar_slot',
    'decodificar',
    'int_para_lsn',
    'lsn_para_int',
    'nome_do_slot',
    'remover_slot',
    'tabelas_seguidas',
]

ARQUIVO_POSICAO = 'slot-posicao.json'
_INTERVALO_BOMBA = 0.2  # segundos: uma bomba serve a todos os datasets
_MUDANCAS_POR_GUARDA = 500  # o spool grava em lotes; o slot avança por lote


def _morrer_se(ponto: str) -> None:
    if os.environ.get('CONTEXTIA_TESTE_MORRER_EM') == ponto:
        os.kill(os.getpid(), signal.SIGKILL)


class CapturaSlotLogico(CapturaPeloSpool):
    """`slot_logico`: a posição é o LSN confirmado do slot; o que mudou passa pelo spool."""

    nome = 'slot_logico'
    ARQUIVO_POSICAO = ARQUIVO_POSICAO
    RISCO_DO_SPOOL = (
        'enquanto o slot existir, mas o slot RETÉM WAL no disco do cliente a'
        ' partir daqui (o WAL retido está no status; max_slot_wal_keep_size é'
        ' a rede do DBA)'
    )
    MARCA_CRITICA = 'perdido'

    def __init__(
        self,
        origem: AdaptadorDeOrigem,
        estado: Estado,
        folga: int,  # noqa: ARG002
        maximo: int,
    ) -> None:
        # `folga` nao serve aqui: o slot nao tem janela de commit atrasado.
        self.slot = nome_do_slot({})
        super().__init__(origem, estado, maximo)
        self.url = os.environ.get('CONTEXTIA_ORIGEM', '')
        self._conn: ConexaoDoDriver = None
        # Mudancas postas no spool nesta subida: a espera entre ciclos acorda o
        # laco quando cresce. `_lido_ate`: o fim do ultimo peek completo.
        self.guardadas = 0
        self._lido_ate = 0
        self._espera_falhou = False
        self.medido: SlotNoBanco | None = None

    def usar_mapa(self, mapa: Mapa) -> None:
        """O mapeamento inteiro: o nome do slot (o `client`)."""
        self.slot = nome_do_slot(mapa)

    # -- o arquivo da posição --------------------------------------------------
    def _recusa_da_posicao(self, motivo: str) -> Exception:
        return ErroSlot(
            'a posição do slot em %s não se lê (%s). Apague o arquivo: o ouvinte'
            ' retoma do LSN confirmado no próprio slot, que é a verdade (este arquivo'
            ' só serve para notar um slot recriado ou movido por outro).'
            % (self._caminho_posicao(), motivo)
        )

    def _gravar_posicao(self) -> None:
        self._posicao.slot = self.slot
        super()._gravar_posicao()

    @property
    def lsn(self) -> str | None:
        return self._posicao.lsn

    def _conexao(self) -> ConexaoDoDriver:
        if self._conn is None or self._conn.closed:
            self._conn = conectar(self.url)
        return self._conn

    def _fechar_conexao(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - já caída
                pass
            self._conn = None

    # -- conferências na subida --------------------------------------------------
    def conferir(self, alvos: list[DatasetVivo]) -> list[str]:
        """O que o DBA (ou o operador) precisa fazer para o slot servir; [] se serve."""
        import psycopg

        problemas: list[str] = []
        self._tabelas = tabelas_seguidas(alvos)
        for alvo in alvos:
            if not alvo.chave:
                problemas.append(
                    'dataset %s sem `key`: o slot diz QUAL linha mudou pela chave; sem ela'
                    ' não há como reler nem remover. Declare `key` no dataset.' % alvo.nome
                )
        try:
            conn = self._conexao()
            problemas += conferir_origem(conn, usuario_da_captura=True)
            if problemas:
                return problemas
            problemas += self._conferir_slot(conn)
            # As base_tables no catálogo: nome errado recusa; view sem elas, só varredura.
            from contextia_sync.captura.tabelas_base import conferir_no_postgres

            bases = conferir_no_postgres(conn, alvos)
            self.so_varredura, self._tabelas = bases.so_varredura, tabelas_seguidas(bases.vivos)
            if bases.recusas:
                return problemas + bases.recusas
            problemas += conferir_tabelas(conn, self._tabelas, self.slot)
            for alvo in bases.vivos:
                problemas += linhas_que_nao_sao_do_dataset(self.origem, alvo, alvo.source_object)
        except psycopg.OperationalError:
            self._fechar_conexao()
            return problemas  # fora do ar agora: confere de novo na leitura
        return problemas

    def _conferir_slot(self, conn: ConexaoDoDriver) -> list[str]:
        slot = ler_slot(conn, self.slot)
        comando = 'ouvinte.py --mapping=... --estado=... --criar-slot'
        if slot is None:
            antes = (
                (
                    ' O ouvinte já consumia este slot até %s: o que mudou desde então vem'
                    ' da varredura, que ele agenda sozinho ao subir com o slot novo.' % self.lsn
                )
                if self.lsn
                else ''
            )
            return [
                'o slot %s não existe nesta origem. Ele é criado UMA VEZ pelo operador,'
                ' nunca em silêncio na subida (a partir dali o banco retém WAL por nós):'
                ' rode `%s` (com CONTEXTIA_ORIGEM_DBA de um login dono das tabelas, se o'
                ' do ouvinte não puder criar a publicação) e suba de novo.%s'
                % (self.slot, comando, antes)
            ]
        if slot.plugin != PLUGIN:
            return [
                'o slot %s usa o plugin %s; o ouvinte lê o %s. Remova-o'
                ' (`--remover-slot`) e crie de novo (`--criar-slot`).'
                % (self.slot, slot.plugin, PLUGIN)
            ]
        banco = conn.execute('SELECT current_database()').fetchone()[0]
        if slot.banco != banco:
            return [
                'o slot %s é do banco %s, e a origem é o banco %s: dois clientes com o'
                ' mesmo nome? Mude `client` no mapeamento ou remova o slot antigo.'
                % (self.slot, slot.banco, banco)
            ]
        return []

    # -- a bomba: slot -> spool -> advance ------------------------------------------
    def _bombear(self) -> None:
        if time.monotonic() - self._bombeado < _INTERVALO_BOMBA:
            return
        self._bombeado = time.monotonic()
        import psycopg

        try:
            self._bombear_conectado()
            # O slot respondeu: a espera entre os ciclos volta a olhá-lo.
            self._espera_falhou = False
        except (
            psycopg.errors.UndefinedObject,
            psycopg.errors.ObjectNotInPrerequisiteState,
        ) as erro:
            # O slot sumiu ou foi invalidado entre a medida e o peek.
            self._slot_perdido(str(erro).splitlines()[0])
        except psycopg.OperationalError:
            self._fechar_conexao()
            raise

    def _bombear_conectado(self) -> None:
        conn = self._conexao()
        slot = ler_slot(conn, self.slot)
        self.medido = slot
        if slot is None:
            self._slot_perdido(
                'o slot %s não existe mais (apagado: pg_drop_replication_slot,'
                ' ou a desinstalação)' % self.slot
            )
            return
        if slot.wal_status == 'lost':
            self._slot_perdido(
                'o slot %s foi INVALIDADO pelo PostgreSQL: reteve mais WAL'
                ' que max_slot_wal_keep_size' % self.slot
            )
            return
        confirmado = lsn_para_int(slot.confirmado)
        perdido = self._posicao.critica
        if self.lsn is None or (perdido is not None and perdido.aguardando_slot):
            if perdido is not None:
                perdido.aguardando_slot = False
                logger.warning(
                    'slot_logico: o slot %s está de pé de novo (em %s): a captura'
                    ' retoma dali; o que mudou antes dele vem da varredura',
                    self.slot,
                    slot.confirmado,
                )
            else:
                logger.info(
                    'slot_logico: primeira leitura do slot %s, em %s (o que mudou'
                    ' desde a criação dele vem daqui; antes dela, da carga completa)',
                    self.slot,
                    slot.confirmado,
                )
            self._posicao.lsn = slot.confirmado
            self._gravar_posicao()
        elif confirmado > lsn_para_int(self.lsn):
            # Só o ouvinte avança o slot, e grava a intenção ANTES: o slot à frente do
            # arquivo foi movido por outro processo (ou apagado e criado de novo).
            self._slot_perdido(
                'o slot %s está em %s, À FRENTE do que o ouvinte confirmou'
                ' (%s): outro processo o consumiu, ou ele foi apagado e'
                ' criado de novo' % (self.slot, slot.confirmado, self.lsn),
                aguardar=False,
            )
            self._posicao.lsn = slot.confirmado
            self._gravar_posicao()
        self._ler_slot(conn, confirmado)

    def _ler_slot(self, conn: ConexaoDoDriver, confirmado: int) -> None:
        """Um peek até o WAL já gravado: as transações inteiras ao spool, e só então o advance."""
        ate = conn.execute('SELECT pg_current_wal_flush_lsn()::text').fetchone()[0]
        limite = int(os.environ.get('CONTEXTIA_SLOT_MENSAGENS') or padroes.SLOT_MENSAGENS)
        lido = LidoDoSlot(self._tabelas)
        for lsn, dados in self._peek(conn, ate, limite):
            lido.receber(lsn, decodificar(dados))
        completo = lido.linhas < limite
        # Peek completo (abaixo do limite): tudo o que comitou antes de `ate` foi visto,
        # e o slot pode ir até lá mesmo sem mudança nossa -- senão o WAL das outras
        # tabelas ficaria retido para sempre. Cortado pelo limite: até o último commit.
        final = (
            lsn_para_int(ate)
            if completo
            else (lido.transacoes[-1][0] if lido.transacoes else confirmado)
        )
        if completo:
            self._lido_ate = lsn_para_int(ate)
        if lido.transacoes:
            _morrer_se('slot-lido')
        guardado = self._guardar(lido.transacoes, final, confirmado)
        if lido.truncadas:
            self._truncadas(sorted(lido.truncadas))
        if guardado > confirmado:
            self._avancar(conn, guardado, lido)
        self.atraso_s = (
            0.0
            if completo and not self.pausada
            else (round(max(0.0, time.time() - lido.ultimo_ts), 1) if lido.ultimo_ts else None)
        )

    def _avancar(self, conn: ConexaoDoDriver, guardado: int, lido: LidoDoSlot) -> None:
        """O slot até `guardado`: a intenção gravada ANTES do advance (ver _bombear_conectado)."""
        self._posicao.lsn = int_para_lsn(guardado)
        self._gravar_posicao()
        if any(mudancas for _, mudancas in lido.transacoes):
            _morrer_se('slot-no-spool')
        conn.execute(
            'SELECT pg_replication_slot_advance(%s, %s::pg_lsn)',
            (self.slot, int_para_lsn(guardado)),
        )
        # O WAL retido medido de novo: o status mostra o depois do avanço.
        self.medido = ler_slot(conn, self.slot) or self.medido

    def _peek(self, conn: ConexaoDoDriver, ate: str, limite: int) -> Iterator[tuple[str, bytes]]:
        publicacao = self.slot
        cursor = conn.cursor()
        yield from cursor.stream(
            'SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn,'
            " %s, 'proto_version', '1', 'publication_names', %s)",
            (self.slot, ate, limite, publicacao),
        )

    def _guardar(
        self, transacoes: list[tuple[int, list[Mudanca]]], final: int, confirmado: int
    ) -> int:
        """
        Põe as transações no spool e devolve até onde o slot pode avançar: o commit
        da última transação inteira no spool (ou `final`, se todas couberam).

        Em lotes (cada `guardar` relê a lista do spool); o lote que não coube é
        refeito transação por transação -- pôr de novo a mesma linha troca o arquivo
        no lugar -- para o slot avançar até a última que coube: cheio, o slot ainda
        anda sobre o WAL das tabelas que não seguimos até ali.
        """
        guardado = confirmado
        lote: list[tuple[int, list[Mudanca]]] = []
        for indice, transacao in enumerate(transacoes):
            lote.append(transacao)
            if sum(len(m) for _, m in lote) < _MUDANCAS_POR_GUARDA and indice < len(transacoes) - 1:
                continue
            try:
                juntas = [m for _, mudancas in lote for m in mudancas]
                self.spool.guardar(juntas)
                self.guardadas += len(juntas)
            except ErroSpoolCheio:
                for lsn, mudancas in lote:
                    try:
                        self.spool.guardar(mudancas)
                        self.guardadas += len(mudancas)
                    except ErroSpoolCheio as cheio:
                        if self.pausada != str(cheio):
                            logger.error('slot_logico: %s', cheio)
                        self.pausada = str(cheio)
                        return guardado
                    guardado = max(guardado, lsn)
            guardado = max(guardado, lote[-1][0])
            lote = []
        self.pausada = None
        return max(guardado, final)

    def _slot_perdido(self, motivo: str, aguardar: bool = True) -> None:
        perdido = self._posicao.critica
        if perdido and perdido.aguardando_slot:
            return  # já dito; a bomba só confere se voltou
        nomes = sorted({alvo.nome for alvos in self._tabelas.values() for alvo in alvos})
        logger.error(
            'slot_logico: %s. O ouvinte NÃO sabe o que mudou desde %s: os datasets %s foram'
            ' entregues à varredura (a saúde fica CRÍTICA até ela rodar com um slot de pé).'
            '%s Para não repetir: não deixe o ouvinte parado (o spool segura o Contextia'
            ' fora), e dimensione max_slot_wal_keep_size.',
            motivo,
            self.lsn or '?',
            ', '.join(nomes),
            ' Crie o slot de novo: `ouvinte.py ... --criar-slot` (a'
            ' captura retoma sozinha quando ele existir).'
            if aguardar
            else '',
        )
        agora = datetime.datetime.now().isoformat(' ', 'seconds')
        for nome in nomes:
            self.estado.entregar_a_varredura(nome, 'slot lógico perdido em %s' % agora)
        self.estado.gravar()
        anteriores = perdido.datasets if perdido else []
        self._posicao.critica = MarcaCritica(
            motivo=motivo,
            desde=self.lsn,
            em=agora,
            aguardando_slot=aguardar,
            datasets=sorted(set(anteriores) | set(nomes)),
        )
        self._gravar_posicao()

    # -- Captura -------------------------------------------------------------------
    def esperar_mudanca(self, segundos: float) -> bool:
        """
        A espera do laço entre dois ciclos (ouvinte/laco.py): olha o fim do WAL a
        cada `_INTERVALO_BOMBA` s e, quando ele andou, bombeia o slot para o
        spool como o ciclo faria. Devolve True assim que uma mudança de tabela
        seguida foi ao spool: o laço roda o ciclo de dados já (a latência do
        commit ao Contextia fica em décimos de segundo, sem esperar o
        --intervalo-dados). Com o WAL parado, é uma consulta trivial por volta.
        Também logo depois de um lote no teto entregue (`TetoDoSpool`): o resto
        do spool vai no ciclo seguinte.

        Sem posição ainda, com o slot perdido, com o spool cheio ou depois de uma
        falha aqui, só dorme: a bomba do ciclo seguinte é quem tenta de novo e
        diz o erro (um por ciclo, não um por volta).
        """
        if self._teto.acordar():
            return True
        prazo = time.monotonic() + max(0.0, segundos)
        perdido = self._posicao.critica is not None and self._posicao.critica.aguardando_slot
        if self.lsn is None or perdido or self.pausada or not self._tabelas or self._espera_falhou:
            # (Depois de uma falha, só a bomba do ciclo seguinte tenta de novo: um
            # aviso por ciclo com a origem fora, não um a cada pedaço da espera.)
            time.sleep(max(0.0, prazo - time.monotonic()))
            return False
        antes = self.guardadas
        while True:
            try:
                fim = (
                    self._conexao().execute('SELECT pg_current_wal_flush_lsn()::text').fetchone()[0]
                )
                if lsn_para_int(fim) > self._lido_ate:
                    self._bombear()
            except Exception as erro:  # noqa: BLE001 - a bomba do ciclo dira
                logger.warning(
                    'slot_logico: a espera entre os ciclos parou de olhar o slot'
                    ' (%s: %s); o próximo ciclo lê de novo',
                    type(erro).__name__,
                    str(erro).splitlines()[0] if str(erro) else '',
                )
                self._fechar_conexao()
                self._espera_falhou = True
                time.sleep(max(0.0, prazo - time.monotonic()))
                return False
            if self.guardadas > antes:
                return True
            resto = prazo - time.monotonic()
            if resto <= 0:
                return False
            time.sleep(min(_INTERVALO_BOMBA, resto))

    def _bombear_para(self, alvo: DatasetVivo) -> None:
        todos = {a.nome: a for v in self._tabelas.values() for a in v}
        if alvo.nome not in todos:
            self._tabelas = tabelas_seguidas(list(todos.values()) + [alvo])
        self._bombear()

    def confirmar(self, alvo: DatasetVivo, leitura: Leitura) -> None:
        """Conclui no spool as mudanças entregues (a remoção que falhou fica, como no binlog)."""
        if leitura.privado:
            _morrer_se('slot-entregue')
        super().confirmar(alvo, leitura)

    def _log_de_pe(self) -> bool:
        """O slot existe e não foi invalidado: o que muda durante a carga fica nele."""
        slot = ler_slot(self._conexao(), self.slot)
        return slot is not None and slot.wal_status != 'lost'

    def posicao_atual(self, alvo: DatasetVivo) -> str | None:  # noqa: ARG002
        """O LSN confirmado do slot ANTES da varredura; None se não há slot de pé."""
        slot = ler_slot(self._conexao(), self.slot)
        if slot is None or slot.wal_status == 'lost':
            return None
        return slot.confirmado

    def saltar(self, alvo: DatasetVivo, posicao: object) -> object:
        """A varredura fechou o dataset: com um slot de pé antes dela, ele sai do CRÍTICO."""
        perdido = self._posicao.critica
        if not perdido or alvo.nome not in perdido.datasets:
            return posicao
        if posicao is None:
            logger.error(
                'slot_logico: a varredura de %s rodou SEM o slot de pé: o que mudar'
                ' até ele existir não é visto. Crie o slot (`--criar-slot`) e rode a'
                ' varredura de novo (`--varrer-agora`); a saúde segue CRÍTICA.',
                alvo.nome,
            )
            return posicao
        self._sair_do_critico(alvo)
        return posicao

    # -- status e saúde ---------------------------------------------------------------
    def para_o_status(self) -> ObjetoJson:
        """O bloco `captura` do ouvinte-status.json (a saúde e as métricas leem daqui)."""
        perdido = self._posicao.critica
        medido = self.medido
        return {
            'estrategia': self.nome,
            'slot': self.slot,
            'posicao': self.lsn,
            'wal_retido_bytes': medido.wal_retido if medido else None,
            'wal_seguro_bytes': medido.wal_seguro if medido else None,
            'wal_status': medido.wal_status if medido else None,
            **self._status_do_spool(),
            'critico': (
                'slot lógico perdido (%s, em %s): datasets %s esperam a varredura%s'
                % (
                    perdido.motivo,
                    perdido.em,
                    ', '.join(perdido.datasets),
                    ' e o slot não existe: rode --criar-slot' if perdido.aguardando_slot else '',
                )
            )
            if perdido
            else None,
        }
