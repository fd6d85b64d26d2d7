"""
A estratégia `binlog` (MariaDB): ler o log de replicação, com o spool no meio.

    log da origem --(leitura)--> spool (<estado>/spool) --(entrega)--> Contextia
                        |                                    |
               posição gravada só depois          arquivo apagado só depois
               do fsync do spool                  que o intake confirmou

Entre os ciclos o laço espera em `esperar_mudanca`: um leitor que BLOQUEIA no
log (o batimento do servidor o traz de volta a cada `_BATIMENTO` s) põe no
spool o que chega e acorda o ciclo. Sem essa espera (`--once`, ou o leitor
caiu), cada `ler(alvo)` BOMBEIA o log (do GTID guardado até o primeiro
batimento: o fim do que já foi escrito). O mesmo leitor, aberto entre uma
chamada e outra, é sempre bloqueante (ver `_novo_leitor`). Nos dois casos as
transações fechadas vão ao spool em lote e só então a posição é gravada
(`<estado>/binlog-posicao.json`, troca atômica); depois `ler` toma do spool
as mudanças do dataset e RELÊ essas chaves pela view com o login somente
leitura (`origem.fetch(..., chaves=...)`). Reler, e não usar a imagem da
linha, dá o mesmo valor que a carga completa daria (tipo, fuso, a view com
JOIN) e faz da linha que sumiu -- DELETE, ou UPDATE que a tirou do filtro da
view -- um `remove`. A imagem só diz QUAL linha mudou e de que empresa(s) ela
era (antes e depois), para o remove ir à empresa certa.

O dataset diz a(s) tabela(s) base que segue em `base_tables` (padrão: o
próprio `source_object`); a `key` e a `scope_column` têm o mesmo nome nela.

Retomada só por GTID: com `is_mariadb=True` o leitor ignora `log_file`/`log_pos`
calado e repassa o log desde o começo (NOTAS-AMBIENTE). Posição que o MariaDB
já apagou (erro 1236) é detectada, nunca adivinhada: os datasets vão para a
varredura, a saúde fica CRÍTICA até ela rodar, e a captura recomeça da posição
atual. Primeira subida: a posição é tomada antes de qualquer carga (a carga
completa é da varredura, como na `coluna`).

MySQL (não MariaDB): recusado na subida -- não há servidor MySQL aqui para
provar a retomada por arquivo/posição.
"""

from __future__ import annotations

import datetime
import functools
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol, TypedDict

from contextia_sync.origem import AdaptadorDeOrigem
from contextia_sync import padroes
from contextia_sync.captura import DatasetVivo
from contextia_sync.captura.binlog_eventos import (
    Lote,
    avancar,
    ja_guardada,
    mudancas_da_linha,
    tabela,
    tabela_truncada,
)
from contextia_sync.captura.do_spool import (
    CapturaPeloSpool,
    MarcaCritica,
    linhas_que_nao_sao_do_dataset,
)
from contextia_sync.erros import ErroConfiguracao, resumir
from contextia_sync.estado.estado import Estado
from contextia_sync.fila.spool import ErroSpoolCheio
from contextia_sync.registro import logger

if TYPE_CHECKING:  # so a anotacao: o topo fica puro (autoteste)
    from ssl import SSLContext

    from contextia_sync.tipos import EventoDoLog, ObjetoJson, Tupla, ValorDoBanco

ARQUIVO_POSICAO = 'binlog-posicao.json'
_ERRO_POSICAO_APAGADA = 1236  # ER_MASTER_FATAL_ERROR_READING_BINLOG
_EVENTOS_POR_BOMBA = 20000  # um ciclo não fica preso num log enorme
_INTERVALO_BOMBA = 0.2  # segundos: uma bomba serve a todos os datasets
_MUDANCAS_POR_LOTE = 20000  # o lote vai ao spool antes de crescer mais
_IDADE_DO_LOTE = 0.2  # segundos: nem o lote espera mais que isto
_BATIMENTO = 0.1  # segundos sem nada no log até o servidor avisar
_SEM_ESPERA = 5.0  # sem esperar_mudanca há tanto, a bomba volta ao ciclo
_PRAZO_BOMBA = 30.0  # segundos: a bomba do ciclo nunca passa disto


class ErroBinlog(ErroConfiguracao):
    """A origem não serve para a estratégia `binlog` (o DBA precisa mudar algo)."""


class _Repassou(Exception):
    """O leitor se reconectou sozinho e repassa o log do GTID em que foi aberto."""


class _TiposDeEvento(NamedTuple):
    """As classes de evento do python-mysql-replication (import tardio: só quem lê o log)."""

    gtid: type[EventoDoLog]
    xid: type[EventoDoLog]
    query: type[EventoDoLog]
    batimento: type[EventoDoLog]
    delete: type[EventoDoLog]
    write: type[EventoDoLog]


@functools.cache
def _tipos() -> _TiposDeEvento:
    from pymysqlreplication.event import HeartbeatLogEvent, MariadbGtidEvent, QueryEvent, XidEvent
    from pymysqlreplication.row_event import DeleteRowsEvent, WriteRowsEvent

    return _TiposDeEvento(
        MariadbGtidEvent, XidEvent, QueryEvent, HeartbeatLogEvent, DeleteRowsEvent, WriteRowsEvent
    )


def _especie(evento: EventoDoLog, tipos: _TiposDeEvento) -> str:
    """'gtid', 'commit' (Xid ou a query COMMIT), 'ddl', 'batimento' ou 'linhas'."""
    if isinstance(evento, tipos.gtid):
        return 'gtid'
    if isinstance(evento, tipos.xid):
        return 'commit'
    if isinstance(evento, tipos.query):
        return 'commit' if str(evento.query).strip().upper() == 'COMMIT' else 'ddl'
    if isinstance(evento, tipos.batimento):
        return 'batimento'
    return 'linhas'


@dataclass
class _Consumo:
    """Uma chamada de `_consumir`: o lote, o modo, e o que já foi ao spool nela."""

    lote: Lote
    prazo: float  # monotônico
    acordar: bool  # a espera do laço (True) ou a bomba do ciclo
    guardadas: int = 0
    primeira: float = 0.0  # quando a primeira mudança desta chamada foi ao spool
    lidos: int = 0
    especie: str = ''  # a do último evento ('' se o leitor acabou)


class _NoServidor(NamedTuple):
    """O que a subida confere: o que a origem diz (como o driver o dá) e quem a lê."""

    versao: ValorDoBanco
    log_bin: ValorDoBanco
    formato: ValorDoBanco
    imagem: ValorDoBanco
    metadados: ValorDoBanco
    server_id: ValorDoBanco
    concessoes: str  # o SHOW GRANTS numa linha só
    # e quem lê: o login e o banco de CONTEXTIA_ORIGEM, o server id do ouvinte
    usuario: str
    banco: str
    server_id_do_ouvinte: int


class _Conexao(TypedDict, total=False):
    """Os argumentos do `pymysql.connect` (o BinLogStreamReader os repassa às conexões dele)."""

    host: str
    port: int
    user: str
    password: str
    ssl: SSLContext
    ssl_disabled: bool


class _Leitor(Protocol):
    """O BinLogStreamReader como este módulo o usa: os eventos (do driver), e fechar."""

    def __iter__(self) -> Iterator[EventoDoLog]: ...

    def close(self) -> None: ...


def _sem_chave(alvo: DatasetVivo) -> str:
    return (
        'dataset %s sem `key`: o binlog diz QUAL linha mudou pela chave; sem'
        ' ela não há como reler nem remover. Declare `key` no dataset.' % alvo.nome
    )


class CapturaBinlog(CapturaPeloSpool):
    """`binlog`: a posição é um GTID (um por domínio), o que mudou passa pelo spool."""

    nome = 'binlog'
    ARQUIVO_POSICAO = ARQUIVO_POSICAO
    RISCO_DO_SPOOL = (
        'enquanto o binlog da origem não expirar (a retenção do MariaDB:'
        ' expire_logs_days / binlog_expire_logs_seconds)'
    )
    MARCA_CRITICA = 'expirada'

    def __init__(
        self,
        origem: AdaptadorDeOrigem,
        estado: Estado,
        folga: int,  # noqa: ARG002
        maximo: int,
    ) -> None:
        # `folga` nao serve aqui: o log nao tem janela de commit atrasado.
        from contextia_sync.origem.url import argumentos_pymysql, ler_url, tls_da_url

        super().__init__(origem, estado, maximo)
        url = ler_url(os.environ.get('CONTEXTIA_ORIGEM', ''))
        self.url = url
        self.banco = url.database or ''
        # O TLS da URL, o mesmo do engine da origem: vale para a conexão de controle
        # (`_sql`) e para as duas do leitor do log (o BinLogStreamReader repassa
        # estes argumentos a ambas).
        self.tls = tls_da_url(url)
        self.conexao: _Conexao = {
            'host': url.host or '127.0.0.1',
            'port': int(url.port or 3306),
            'user': url.username or '',
            'password': url.password or '',
            **(argumentos_pymysql(self.tls) if self.tls.familia == 'mysql' else {}),
        }
        self.server_id = int(
            os.environ.get('CONTEXTIA_BINLOG_SERVER_ID') or padroes.BINLOG_SERVER_ID
        )
        self._leitor: _Leitor | None = None  # o leitor continuo de esperar_mudanca
        self._lote_continuo = Lote()
        self._continuo_falhou = False
        self._despejado = 0.0
        self._esperou = 0.0
        self._ultimo_ts = 0.0

    # -- o arquivo da posição --------------------------------------------------
    def _recusa_da_posicao(self, motivo: str) -> Exception:
        return ErroBinlog(
            'a posição do binlog em %s não se lê (%s). Não se adivinha posição: apague'
            ' o arquivo para recomeçar da posição atual E rode a varredura'
            ' (`ouvinte.py --varrer-agora`), que entrega o que mudou nesse meio-tempo.'
            % (self._caminho_posicao(), motivo)
        )

    @property
    def gtid(self) -> str | None:
        return self._posicao.gtid

    # -- conferências na subida --------------------------------------------------
    def _recusa_tls(self, erro: BaseException) -> ErroBinlog | None:
        """
        A conexão recusada no TLS (CA errado, servidor que exige TLS): erro de
        configuração dito em português, nunca "fora do ar agora"; None se não é isso.
        """
        from contextia_sync.origem.url import correcao_tls, descrever_url, falha_de_tls, mascarar

        if not falha_de_tls(erro):
            return None
        return ErroBinlog(
            'binlog: não conectou ao MariaDB de CONTEXTIA_ORIGEM (%s): %s -- %s.'
            % (
                descrever_url(self.url),
                resumir(mascarar(erro, self.url.password), 240),
                correcao_tls(self.tls),
            )
        )

    def _sql(self, comando: str) -> list[Tupla]:
        import pymysql

        try:
            conn = pymysql.connect(**self.conexao, connect_timeout=10)
        except pymysql.err.OperationalError as erro:
            recusa = self._recusa_tls(erro)
            if recusa is not None:
                raise recusa from None
            raise
        try:
            with conn.cursor() as cursor:
                cursor.execute(comando)
                return list(cursor.fetchall())
        finally:
            conn.close()

    def conferir(self, alvos: list[DatasetVivo]) -> list[str]:
        """O que o DBA precisa mudar para o binlog servir; [] se serve."""
        import pymysql

        self._mapear(alvos)
        problemas = [_sem_chave(alvo) for alvo in alvos if not alvo.chave]
        if self.tls.familia != 'mysql':  # mysql:// e mariadb://
            return problemas + [
                'a estratégia `binlog` é só para MySQL/MariaDB; a origem'
                ' é %s. Use `coluna`.' % self.url.get_backend_name()
            ]
        try:
            servidor = self._ler_servidor()
        except pymysql.err.OperationalError as erro:
            if erro.args and erro.args[0] in (2003, 2006, 2013):
                return problemas  # fora do ar agora: confere de novo na leitura
            raise
        for conferencia in _CONFERENCIAS:
            linha = conferencia(servidor)
            if linha is not None:
                problemas.append(linha)
        # As base_tables no catálogo: o nome errado recusa; a view sem elas fica só na varredura.
        from contextia_sync.captura.tabelas_base import conferir_no_mariadb

        with pymysql.connect(**self.conexao, connect_timeout=10) as conn, conn.cursor() as cursor:
            bases = conferir_no_mariadb(cursor, self.banco, alvos)
        self.so_varredura = bases.so_varredura
        self._mapear(bases.vivos)
        for alvo in bases.vivos:
            problemas += linhas_que_nao_sao_do_dataset(self.origem, alvo, alvo.source_object)
        return problemas + bases.recusas

    def _ler_servidor(self) -> _NoServidor:
        """As variáveis e as concessões que as conferências leem, nesta ordem de consultas."""
        versao, log_bin, formato, imagem, server_id = self._sql(
            'SELECT VERSION(), @@log_bin, @@binlog_format, @@binlog_row_image, @@server_id'
        )[0]
        # @@binlog_row_metadata é só do MariaDB: no MySQL nem se pergunta.
        metadados = (
            self._sql('SELECT @@binlog_row_metadata')[0][0]
            if 'mariadb' in str(versao).lower()
            else 'FULL'
        )
        concessoes = ' '.join(str(linha[0]) for linha in self._sql('SHOW GRANTS'))
        return _NoServidor(
            versao,
            log_bin,
            formato,
            imagem,
            metadados,
            server_id,
            concessoes,
            self.conexao['user'],
            self.banco,
            self.server_id,
        )

    def _mapear(self, alvos: list[DatasetVivo]) -> None:
        self._tabelas = {}
        for alvo in alvos:
            for base in alvo.tabelas_base:
                self._tabelas.setdefault(self._resolver(base.nome), []).append(alvo)

    def _resolver(self, nome: str) -> tuple[str, str]:
        """(banco, tabela) em minúsculas de um nome do mapeamento (sem banco: o da URL)."""
        return tabela(nome, self.banco)

    # -- a bomba: log -> spool -> posição ------------------------------------------
    def _gtid_atual(self) -> str:
        return str(self._sql('SELECT @@gtid_binlog_pos')[0][0] or '')

    def _bombear(self) -> None:
        if self._leitor is not None and time.monotonic() - self._esperou < _SEM_ESPERA:
            return  # a espera do laco (esperar_mudanca) le o log agora
        if time.monotonic() - self._bombeado < _INTERVALO_BOMBA:
            return
        self._bombeado = time.monotonic()
        if self.gtid is None:
            # Primeira subida: a posição ANTES de tudo; a carga é da varredura.
            self._posicao.gtid = self._gtid_atual()
            self._gravar_posicao()
            logger.info(
                'binlog: posição inicial %s (nada enviado; a carga completa é da varredura)',
                self.gtid or '(vazia)',
            )
            return
        import pymysql

        try:
            for _ in range(2):
                try:
                    # Até o batimento: o servidor só o manda quando não há mais log.
                    self._ler(time.monotonic() + _PRAZO_BOMBA, acordar=False)
                    break
                except _Repassou:
                    continue  # relido do GTID guardado, com um leitor novo
        except pymysql.err.OperationalError as erro:
            self._fechar_leitor()
            if erro.args and erro.args[0] == _ERRO_POSICAO_APAGADA:
                self._posicao_apagada(str(erro.args[1:] or ''))
                return
            recusa = self._recusa_tls(erro)
            if recusa is not None:
                raise recusa from None
            raise
        except BaseException:
            self._fechar_leitor()
            raise
        self._continuo_falhou = False

    # -- a espera entre ciclos: o leitor que bloqueia no log -------------------------
    def esperar_mudanca(self, segundos: float) -> bool:
        """
        A espera do laço entre dois ciclos: lê o log por até `segundos` (o
        servidor manda um batimento a cada `_BATIMENTO` s sem nada no log, e o
        leitor volta para olhar o prazo), pondo no spool e gravando a posição
        como a bomba do ciclo. Devolve True quando há mudança de um dataset
        seguido no spool e o log parou: o laço roda o ciclo de dados já, sem
        esperar o `--intervalo-dados` (a latência do commit ao Contextia fica em
        décimos de segundo).
        Também logo depois de um lote no teto entregue (`TetoDoSpool`): o resto
        do spool vai no ciclo seguinte.

        Sem posição ainda, com a captura pausada (spool cheio) ou depois de uma
        falha do leitor, só dorme: a bomba do ciclo seguinte é quem tenta de
        novo e diz o erro. O leitor fica aberto entre uma espera e outra (não
        relê o log a cada volta).
        """
        if self._teto.acordar():
            return True
        prazo = time.monotonic() + segundos
        if self.gtid is None or self.pausada or self._continuo_falhou or not self._tabelas:
            time.sleep(max(0.0, segundos))
            return False
        try:
            guardadas = self._ler(prazo, acordar=True)
        except _Repassou:
            return False  # o proximo pedaco da espera abre um leitor novo
        except Exception as erro:  # noqa: BLE001 - a bomba do ciclo dira o erro
            logger.warning(
                'binlog: a leitura contínua do log parou (%s: %s); o próximo'
                ' ciclo relê do GTID guardado (%s)',
                type(erro).__name__,
                erro,
                self.gtid,
            )
            self._fechar_leitor()
            self._continuo_falhou = True
            return False
        self._esperou = time.monotonic()
        return guardadas > 0

    def _ler(self, prazo: float, acordar: bool) -> int:
        """O leitor aberto (ou um novo, do GTID guardado) consumido até o prazo."""
        if self._leitor is None:
            self._leitor, self._lote_continuo = self._novo_leitor(), Lote()
        try:
            guardadas = self._consumir(
                iter(self._leitor), self._lote_continuo, prazo, acordar=acordar
            )
        except _Repassou:
            self._fechar_leitor()
            raise
        if self.pausada:
            # A transacao que nao coube ja saiu do leitor: relida do GTID guardado.
            self._fechar_leitor()
        return guardadas

    def _fechar_leitor(self) -> None:
        """Fecha o leitor; o lote que não foi ao spool é relido do GTID guardado."""
        leitor, self._leitor = self._leitor, None
        self._lote_continuo = Lote()
        if leitor is not None:
            try:
                leitor.close()
            except Exception:  # noqa: BLE001 - fechar nunca mascara nada
                pass

    def _novo_leitor(self) -> _Leitor:
        """
        Um leitor que BLOQUEIA, com o batimento do servidor. Nunca o modo sem
        bloquear: nele o MariaDB fecha a conexão ao chegar ao fim do log, e com
        o leitor atrás (uma transação grande leva segundos em Python) a conexão
        cai com dado ainda no caminho (ECONNRESET, medido com 20000 linhas).
        """
        from pymysqlreplication import BinLogStreamReader
        from pymysqlreplication.event import (
            HeartbeatLogEvent,
            MariadbGtidEvent,
            QueryEvent,
            XidEvent,
        )
        from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

        leitor: _Leitor = BinLogStreamReader(
            connection_settings=dict(self.conexao),
            server_id=self.server_id,
            blocking=True,
            is_mariadb=True,
            auto_position=self.gtid or None,
            slave_heartbeat=_BATIMENTO,
            only_events=[
                MariadbGtidEvent,
                XidEvent,
                QueryEvent,
                HeartbeatLogEvent,
                WriteRowsEvent,
                UpdateRowsEvent,
                DeleteRowsEvent,
            ],
            only_schemas=sorted({esquema for esquema, _ in self._tabelas}),
        )
        return leitor

    def _truncadas_por(self, evento: EventoDoLog) -> list[str]:
        """Os datasets cuja tabela um QueryEvent de TRUNCATE esvaziou (nenhum se não é)."""
        nome = tabela_truncada(str(evento.query), evento.schema)
        if nome is None:
            return []
        return sorted({alvo.nome for alvo in self._tabelas.get(tabela(nome, self.banco), ())})

    def _consumir(
        self, eventos: Iterator[EventoDoLog], lote: Lote, prazo: float, acordar: bool
    ) -> int:
        """
        Lê eventos até o prazo (monotônico); devolve quantas mudanças foram ao
        spool. `lote` guarda a transação aberta entre duas chamadas com o mesmo
        leitor. Sem `acordar` (a bomba do ciclo), volta no primeiro batimento:
        o log inteiro foi lido.

        As transações fechadas (o COMMIT no log) se juntam no lote; o lote vai
        ao spool de uma vez (um arquivo por dataset e empresa) e só então a
        posição avança até a última transação dele. Vai ao spool no batimento
        (o log parou), no prazo, quando passa de `_MUDANCAS_POR_LOTE` ou quando
        o último despejo tem mais de `_IDADE_DO_LOTE` segundos (a primeira
        transação depois de um silêncio vai já; sob carga as seguintes se
        juntam -- um fsync por lote, não por transação). Spool cheio: a posição
        fica na última transação que entrou inteira, `pausada` diz por quê.
        `acordar`: volta quando há mudanças no spool e o log parou (ou elas já
        esperam `_IDADE_DO_LOTE`).

        O leitor que perde a conexão se reconecta sozinho do GTID em que foi
        ABERTO e repassa o log: o primeiro GTID que ele deu, visto de novo, é
        isso -- `_Repassou`, e quem chama relê do GTID guardado com um leitor novo
        (a transação meio lida nunca é fechada como se estivesse inteira).
        """
        consumo = _Consumo(lote, prazo, acordar)
        tipos = _tipos()
        try:
            while True:
                evento = next(eventos, None)
                if evento is None:
                    consumo.especie = ''
                    break
                consumo.lidos += 1
                consumo.especie = _especie(evento, tipos)
                if _TRATAR[consumo.especie](self, evento, consumo) or self._basta(consumo):
                    break
            consumo.guardadas += self._despejar(lote)
            self._em_dia(consumo.especie == 'batimento')
        except ErroSpoolCheio as cheio:
            self._pausar(cheio)
        return consumo.guardadas

    # Cada espécie de evento: devolve True quando a leitura para já.
    def _no_gtid(self, evento: EventoDoLog, consumo: _Consumo) -> bool:
        lote = consumo.lote
        gtid = str(evento.gtid)
        if gtid == lote.primeiro:
            logger.warning(
                'binlog: a conexão com o log caiu e o leitor se reconectou'
                ' sozinho, repassou o log desde %s; o que não estava no spool é'
                ' relido do GTID guardado (%s)',
                gtid,
                self.gtid,
            )
            raise _Repassou(gtid)
        lote.fechar()  # um GTID novo fecha o anterior
        lote.primeiro = lote.primeiro or gtid
        lote.abrir(gtid, ja_guardada(self.gtid, gtid))
        self._ultimo_ts = float(evento.timestamp)
        # Um ciclo não fica preso num log enorme: o mesmo leitor continua desta
        # transação na próxima vez.
        return not consumo.acordar and consumo.lidos >= _EVENTOS_POR_BOMBA

    def _no_commit(self, evento: EventoDoLog, consumo: _Consumo) -> bool:  # noqa: ARG002
        consumo.lote.fechar()
        return False

    def _no_ddl(self, evento: EventoDoLog, consumo: _Consumo) -> bool:
        # Um DDL (CREATE, ALTER, TRUNCATE...): sem linhas no log, num GTID só dele, e
        # de qualquer banco do servidor (o only_schemas filtra só as linhas). O
        # TRUNCATE de uma tabela seguida vai à varredura.
        truncadas = [] if consumo.lote.pular else self._truncadas_por(evento)
        if truncadas:
            self._truncadas(truncadas)
        return False

    def _no_batimento(self, evento: EventoDoLog, consumo: _Consumo) -> bool:  # noqa: ARG002
        # O log parou: a transação sem COMMIT no log (DDL) também fecha.
        consumo.lote.fechar()
        consumo.guardadas += self._despejar(consumo.lote)
        return not consumo.acordar

    def _nas_linhas(self, evento: EventoDoLog, consumo: _Consumo) -> bool:
        lote = consumo.lote
        if lote.transacao is None or lote.pular:
            return False
        seguida = (str(evento.schema).lower(), str(evento.table).lower())
        alvos = self._tabelas.get(seguida)
        if not alvos:
            return False
        tipos = _tipos()
        tipo = (
            'delete'
            if isinstance(evento, tipos.delete)
            else 'insert'
            if isinstance(evento, tipos.write)
            else 'update'
        )
        for linha in evento.rows:
            imagens = [linha[k] for k in ('before_values', 'after_values', 'values') if k in linha]
            for alvo in alvos:
                base = alvo.base_seguida(seguida, self._resolver)
                if base is None:
                    continue
                lote.pendente.extend(
                    mudancas_da_linha(
                        alvo, base, imagens, tipo, lote.transacao, float(evento.timestamp)
                    )
                )
        return False

    def _basta(self, consumo: _Consumo) -> bool:
        """Depois de cada evento: o lote vai ao spool se já é hora, e a leitura para?"""
        lote = consumo.lote
        if lote.fechadas and (
            len(lote.mudancas) >= _MUDANCAS_POR_LOTE
            or time.monotonic() - self._despejado >= _IDADE_DO_LOTE
        ):
            consumo.guardadas += self._despejar(lote)
        if consumo.guardadas and not consumo.primeira:
            consumo.primeira = time.monotonic()
        # Acorda o ciclo quando o log parou (o batimento) ou o que foi ao spool já
        # espera há `_IDADE_DO_LOTE`: uma rajada de transações vai num ciclo só, e
        # não um ciclo para a primeira delas.
        if (
            consumo.acordar
            and consumo.guardadas
            and (
                consumo.especie == 'batimento'
                or time.monotonic() - consumo.primeira >= _IDADE_DO_LOTE
            )
        ):
            return True
        return time.monotonic() >= consumo.prazo

    def _em_dia(self, no_batimento: bool) -> None:
        """O fim de uma leitura que não encheu o spool: o atraso medido e a pausa desfeita."""
        self.atraso_s = (
            0.0
            if no_batimento or not self._ultimo_ts
            else round(max(0.0, time.time() - self._ultimo_ts), 1)
        )
        self.pausada = None

    def _pausar(self, cheio: ErroSpoolCheio) -> None:
        """Spool cheio: a posição ficou na última transação inteira; a captura pausa e diz."""
        if self.pausada != str(cheio):
            logger.error('binlog: %s', cheio)
        self.pausada = str(cheio)
        self.atraso_s = (
            round(max(0.0, time.time() - self._ultimo_ts), 1) if self._ultimo_ts else None
        )

    def _despejar(self, lote: Lote) -> int:
        """O lote fechado vai ao spool (fsync) e SÓ ENTÃO a posição avança sobre ele."""
        if not lote.fechadas:
            return 0
        try:
            self.spool.guardar(lote.mudancas)
        except ErroSpoolCheio as cheio:
            cabidas = [g for g, n in lote.fechadas if n <= cheio.guardadas]
            for gtid in cabidas:
                self._posicao.gtid = avancar(self.gtid, gtid)
            if cabidas:
                self._gravar_posicao()
            raise
        for gtid, _ in lote.fechadas:
            self._posicao.gtid = avancar(self.gtid, gtid)
        self._gravar_posicao()
        self._despejado = time.monotonic()
        quantas = len(lote.mudancas)
        lote.esvaziar()
        return quantas

    def _posicao_apagada(self, detalhe: str) -> None:
        atual = self._gtid_atual()
        nomes = sorted({alvo.nome for alvos in self._tabelas.values() for alvo in alvos})
        logger.error(
            'binlog: a posição guardada (%s) já foi APAGADA do binlog da origem (%s): o'
            ' ouvinte ficou parado mais tempo que a retenção e NÃO sabe o que perdeu. Os'
            ' datasets %s foram entregues à varredura (a saúde fica CRÍTICA até ela rodar)'
            ' e a captura recomeça da posição atual (%s). Para não repetir: aumente a'
            ' retenção (expire_logs_days / binlog_expire_logs_seconds) ou não deixe o'
            ' ouvinte parado tanto tempo.',
            self.gtid,
            detalhe,
            ', '.join(nomes),
            atual,
        )
        for nome in nomes:
            self.estado.entregar_a_varredura(
                nome,
                'posição do binlog apagada em %s'
                % datetime.datetime.now().isoformat(' ', 'seconds'),
            )
        self.estado.gravar()
        self._posicao.critica = MarcaCritica(
            desde=self.gtid,
            datasets=nomes,
            em=datetime.datetime.now().isoformat(timespec='seconds'),
        )
        self._posicao.gtid = atual
        self._gravar_posicao()

    # -- Captura -------------------------------------------------------------------
    def _bombear_para(self, alvo: DatasetVivo) -> None:
        todos = {a.nome: a for v in self._tabelas.values() for a in v}
        if alvo.nome not in todos:
            self._mapear(list(todos.values()) + [alvo])
            self._fechar_leitor()  # o leitor continuo filtra pelas tabelas de antes
        self._bombear()

    def posicao_atual(self, alvo: DatasetVivo) -> str:  # noqa: ARG002
        return self._gtid_atual()

    def saltar(self, alvo: DatasetVivo, posicao: object) -> object:
        """A varredura fechou o dataset: se a posição tinha expirado, ele sai do CRÍTICO."""
        self._sair_do_critico(alvo)
        return posicao

    # -- status e saúde ---------------------------------------------------------------
    def para_o_status(self) -> ObjetoJson:
        """O bloco `captura` do ouvinte-status.json (a saúde e as métricas leem daqui)."""
        expirada = self._posicao.critica
        return {
            'estrategia': self.nome,
            'posicao': self.gtid,
            **self._status_do_spool(),
            'critico': (
                'posição do binlog apagada (desde %s): datasets %s esperam a'
                ' varredura; rode o ouvinte com --varrer-agora (ou espere a'
                ' varredura agendada) e peça ao DBA uma retenção maior'
                ' (binlog_expire_logs_seconds) que a maior parada do ouvinte'
                % (expirada.desde, ', '.join(expirada.datasets))
            )
            if expirada
            else None,
        }


_TRATAR: dict[str, Callable[[CapturaBinlog, ValorDoBanco, _Consumo], bool]] = {
    'gtid': CapturaBinlog._no_gtid,
    'commit': CapturaBinlog._no_commit,
    'ddl': CapturaBinlog._no_ddl,
    'batimento': CapturaBinlog._no_batimento,
    'linhas': CapturaBinlog._nas_linhas,
}


# -- as conferências da subida: cada uma devolve a linha do DBA, ou None --------------
def _so_mariadb(servidor: _NoServidor) -> str | None:
    if 'mariadb' in str(servidor.versao).lower():
        return None
    return (
        'a origem é MySQL (%s): a estratégia `binlog` está provada só no MariaDB'
        ' (retomada por GTID). Use `coluna` neste servidor.' % servidor.versao
    )


def _log_bin_ligado(servidor: _NoServidor) -> str | None:
    if str(servidor.log_bin) in ('1', 'ON'):
        return None
    return (
        'binlog desligado na origem (log_bin=OFF). Peça ao DBA: `log_bin=ON` no'
        ' my.cnf (exige reiniciar o banco), com binlog_format=ROW,'
        ' binlog_row_image=FULL e binlog_row_metadata=FULL.'
    )


def _formato_row(servidor: _NoServidor) -> str | None:
    if str(servidor.formato).upper() == 'ROW':
        return None
    return (
        'binlog_format=%s na origem: só ROW diz que linha mudou. Peça ao DBA:'
        ' `SET GLOBAL binlog_format=ROW` e `binlog_format=ROW` no my.cnf.' % servidor.formato
    )


def _imagem_cheia(servidor: _NoServidor) -> str | None:
    if str(servidor.imagem).upper() == 'FULL':
        return None
    return (
        'binlog_row_image=%s na origem: sem FULL a imagem pode vir sem a key ou a'
        ' empresa. Peça ao DBA: `SET GLOBAL binlog_row_image=FULL` e no my.cnf.' % servidor.imagem
    )


def _metadados_cheios(servidor: _NoServidor) -> str | None:
    if str(servidor.metadados).upper() == 'FULL':
        return None
    return (
        'binlog_row_metadata=%s na origem: sem FULL o MariaDB manda as colunas como'
        ' UNKNOWN_COL0... Peça ao DBA: `SET GLOBAL binlog_row_metadata=FULL` e no'
        ' my.cnf.' % servidor.metadados
    )


_CONCESSOES = (
    ('REPLICATION SLAVE', ('REPLICATION SLAVE', 'ALL PRIVILEGES')),
    ('BINLOG MONITOR', ('BINLOG MONITOR', 'REPLICATION CLIENT', 'SUPER', 'ALL PRIVILEGES')),
    ('SELECT', ('SELECT', 'ALL PRIVILEGES')),
)
"""Cada concessão que a leitura pede e o que, no SHOW GRANTS, a cobre."""


def _concessoes(servidor: _NoServidor) -> str | None:
    faltam = [
        g
        for g, alternativas in _CONCESSOES
        if not any(a in servidor.concessoes.upper() for a in alternativas)
    ]
    if not faltam:
        return None
    usuario = servidor.usuario
    return (
        'o login %s não tem %s. Peça ao DBA: `GRANT REPLICATION SLAVE, BINLOG'
        ' MONITOR ON *.* TO %s` e `GRANT SELECT ON %s.* TO %s` (nenhuma escrita:'
        ' é ler como uma réplica).'
        % (usuario, ', '.join(faltam), usuario, servidor.banco or '<banco>', usuario)
    )


def _server_id_proprio(servidor: _NoServidor) -> str | None:
    if int(servidor.server_id) != servidor.server_id_do_ouvinte:
        return None
    return (
        'o server id do ouvinte (%d) é o mesmo da origem: o MariaDB derrubaria'
        ' uma das conexões. Defina CONTEXTIA_BINLOG_SERVER_ID com um número que'
        ' nenhuma réplica use (pergunte ao DBA).' % servidor.server_id_do_ouvinte
    )


_CONFERENCIAS: tuple[Callable[[_NoServidor], str | None], ...] = (
    _so_mariadb,
    _log_bin_ligado,
    _formato_row,
    _imagem_cheia,
    _metadados_cheios,
    _concessoes,
    _server_id_proprio,
)
"""As conferências da subida, na ordem em que as linhas saem para o DBA."""
