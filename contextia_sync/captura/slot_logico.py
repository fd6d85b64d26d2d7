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
aqui (`decodificar`, o protocolo versão 1).

O slot (`contextia_<cliente>`) e a publicação de mesmo nome são criados por um
comando que o operador roda uma vez (`ouvinte.py --criar-slot`), nunca em
silêncio na subida: a partir dali o banco do cliente retém WAL por nós. E
`--remover-slot` os desfaz (o primeiro passo da desinstalação).

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
import re
import signal
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from contextia_sync import padroes
from contextia_sync.captura import DatasetVivo, Leitura
from contextia_sync.captura.do_spool import CapturaPeloSpool
from contextia_sync.erros import ErroConfiguracao
from contextia_sync.escopos import texto_escopo
from contextia_sync.estado.estado import Estado
from contextia_sync.fila.spool import ErroSpoolCheio, Mudanca
from contextia_sync.registro import logger

if TYPE_CHECKING:                       # o autoteste importa captura/ sem SQLAlchemy
    from sqlalchemy import URL

    from contextia_sync.origem.url import TlsOrigem

ARQUIVO_POSICAO = 'slot-posicao.json'
PLUGIN = 'pgoutput'
_INTERVALO_BOMBA = 0.2                # segundos: uma bomba serve a todos os datasets
_MUDANCAS_POR_GUARDA = 500            # o spool grava em lotes; o slot avança por lote
_EPOCA_PG = datetime.datetime(2000, 1, 1, tzinfo=datetime.timezone.utc).timestamp()
# Tipos cuja key vira int (a mesma que a releitura pela view devolve).
_TIPOS_INTEIROS = {20, 21, 23, 26}     # int8, int2, int4, oid


def _morrer_se(ponto: str) -> None:
    if os.environ.get('CONTEXTIA_TESTE_MORRER_EM') == ponto:
        os.kill(os.getpid(), signal.SIGKILL)


class ErroSlot(ErroConfiguracao):
    """A origem não serve para a estratégia `slot_logico` (o DBA precisa mudar algo)."""


def nome_do_slot(mapa: dict[str, Any]) -> str:
    """`contextia_<cliente>`: o que um nome de slot aceita (a-z, 0-9, _, até 63)."""
    cliente = re.sub(r'[^a-z0-9_]+', '_', str(mapa.get('client') or 'ouvinte').lower())
    return ('contextia_' + cliente.strip('_'))[:63]


def lsn_para_int(texto: str | None) -> int:
    if not texto:
        return 0
    alto, _, baixo = str(texto).partition('/')
    return (int(alto, 16) << 32) | int(baixo or '0', 16)


def int_para_lsn(valor: int) -> str:
    return '%X/%X' % (valor >> 32, valor & 0xFFFFFFFF)


# ------------------------------------------------------------------ o pgoutput, versão 1
@dataclass
class Relacao:
    """Uma mensagem 'R': a tabela e as colunas (nome, oid do tipo) na ordem das tuplas."""

    esquema: str
    tabela: str
    colunas: list[tuple[str, int]]


@dataclass
class Mensagem:
    """Uma mensagem do pgoutput já decodificada (só o que a captura usa)."""

    tipo: str                                   # B C R I U D T (outras: ignoradas)
    relacao: int = 0
    imagens: list[list[Any]] = field(default_factory=list)   # antes/depois, por coluna
    relacao_nova: Relacao | None = None
    truncadas: list[int] = field(default_factory=list)
    quando: float = 0.0                         # C: a hora do commit (epoch)


class _Leitor:
    def __init__(self, dados: bytes) -> None:
        self.dados = dados
        self.pos = 0

    def byte(self) -> str:
        self.pos += 1
        return chr(self.dados[self.pos - 1])

    def inteiro(self, tamanho: int) -> int:
        formato = {1: '>b', 2: '>h', 4: '>i', 8: '>q'}[tamanho]
        (valor,) = struct.unpack_from(formato, self.dados, self.pos)
        self.pos += tamanho
        return int(valor)

    def texto(self) -> str:
        fim = self.dados.index(b'\0', self.pos)
        valor = self.dados[self.pos:fim].decode('utf-8')
        self.pos = fim + 1
        return valor

    def tupla(self) -> list[Any]:
        colunas: list[Any] = []
        for _ in range(self.inteiro(2)):
            marca = self.byte()
            if marca == 't':
                tamanho = self.inteiro(4)
                colunas.append(self.dados[self.pos:self.pos + tamanho].decode('utf-8'))
                self.pos += tamanho
            else:                   # 'n' nulo, 'u' TOAST sem mudança: não é key nem empresa
                colunas.append(None)
        return colunas


def decodificar(dados: bytes) -> Mensagem:
    """Uma mensagem do protocolo do pgoutput (versão 1) no que a captura precisa."""
    leitor = _Leitor(bytes(dados))
    tipo = leitor.byte()
    mensagem = Mensagem(tipo)
    if tipo == 'R':
        mensagem.relacao = leitor.inteiro(4)
        esquema, tabela = leitor.texto() or 'pg_catalog', leitor.texto()
        leitor.inteiro(1)                       # replica identity
        colunas = []
        for _ in range(leitor.inteiro(2)):
            leitor.inteiro(1)                   # flags (1 = parte da key)
            nome = leitor.texto()
            colunas.append((nome, leitor.inteiro(4)))
            leitor.inteiro(4)                   # typmod
        mensagem.relacao_nova = Relacao(esquema, tabela, colunas)
    elif tipo in 'IUD':
        mensagem.relacao = leitor.inteiro(4)
        while leitor.pos < len(leitor.dados):
            marca = leitor.byte()               # K (key antiga), O (linha antiga), N (nova)
            mensagem.imagens.append(leitor.tupla())
            if marca == 'N':
                break
    elif tipo == 'T':
        quantas = leitor.inteiro(4)
        leitor.inteiro(1)                       # opções (CASCADE, RESTART IDENTITY)
        mensagem.truncadas = [leitor.inteiro(4) for _ in range(quantas)]
    elif tipo == 'C':
        leitor.inteiro(1)
        leitor.inteiro(8)
        leitor.inteiro(8)
        mensagem.quando = _EPOCA_PG + leitor.inteiro(8) / 1e6
    return mensagem


# ------------------------------------------------------------------ a conexão
def _conectar(url_texto: str, somente_leitura: bool = True,
              variavel: str = 'CONTEXTIA_ORIGEM') -> Any:
    """
    Uma conexão psycopg própria (fora do pool do adaptador), autocommit, com o
    TLS da URL lido como o engine da origem o lê (origem/url.py).

    A captura com a origem fora do ar agora recebe o erro do driver (o ciclo
    tenta de novo); a recusa no TLS, a URL que o libpq não aceita e -- nos
    comandos do operador (`somente_leitura=False`) -- qualquer falha ao conectar
    viram ErroSlot: uma linha em português, com a variável e a correção.
    """
    import psycopg

    from contextia_sync.origem.url import argumentos_psycopg, falha_de_tls, ler_url, tls_da_url
    url = ler_url(url_texto, variavel)
    if url.get_backend_name() != 'postgresql':
        raise ErroSlot('a estratégia `slot_logico` é só para PostgreSQL; %s aponta para %s.'
                       ' Use `coluna` (ou `binlog` no MySQL/MariaDB)%s.'
                       % (variavel, url.get_backend_name(),
                          '' if variavel == 'CONTEXTIA_ORIGEM' else
                          ', ou corrija %s para o mesmo PostgreSQL de CONTEXTIA_ORIGEM'
                          % variavel))
    tls = tls_da_url(url, variavel)
    opcoes: dict[str, Any] = {
        'host': url.host or '127.0.0.1', 'port': int(url.port or 5432),
        'user': url.username or '', 'dbname': url.database or '', 'connect_timeout': 10,
        'application_name': 'contextia-ouvinte', **argumentos_psycopg(tls)}
    if url.password:
        opcoes['password'] = url.password
    if somente_leitura:
        # Nada aqui escreve: o peek e o advance funcionam numa sessão READ ONLY.
        opcoes['options'] = '-c default_transaction_read_only=on'
    try:
        return psycopg.connect(autocommit=True, **opcoes)
    except psycopg.Error as erro:
        if somente_leitura and isinstance(erro, psycopg.OperationalError) \
                and not falha_de_tls(erro):
            raise
        raise ErroSlot(_recusa_da_conexao(url, tls, erro)) from None


def _recusa_da_conexao(url: URL, tls: TlsOrigem, erro: BaseException) -> str:
    """A conexão que não abriu, numa linha: a URL e o driver sem a senha, e a correção."""
    from contextia_sync.erros import resumir
    from contextia_sync.origem.url import correcao_tls, descrever_url, falha_de_tls, mascarar
    correcao = correcao_tls(tls) if falha_de_tls(erro) else (
        'confira host, porta, usuário e senha em %s e se o banco aceita conexão desta'
        ' máquina' % tls.variavel)
    return ('slot_logico: não conectou ao PostgreSQL de %s (%s): %s -- %s. Nada foi feito.'
            % (tls.variavel, descrever_url(url),
               resumir(mascarar(erro, url.password), 240), correcao))


def _tabela(nome: str) -> tuple[str, str]:
    esquema, _, tabela = str(nome).rpartition('.')
    return esquema or 'public', tabela


def tabelas_seguidas(alvos: list[DatasetVivo]) -> dict[tuple[str, str], list[DatasetVivo]]:
    """(esquema, tabela) -> os datasets que a seguem (`base_tables`, padrão o source_object)."""
    tabelas: dict[tuple[str, str], list[DatasetVivo]] = {}
    for alvo in alvos:
        for nome in alvo.row.get('base_tables') or [alvo.source_object]:
            tabelas.setdefault(_tabela(str(nome)), []).append(alvo)
    return tabelas


def _ident(esquema: str, tabela: str) -> str:
    return '"%s"."%s"' % (esquema.replace('"', '""'), tabela.replace('"', '""'))


def _conferir_origem(conn: Any, usuario_da_captura: bool) -> list[str]:
    """wal_level e o privilégio REPLICATION, cada um com a linha do DBA."""
    problemas: list[str] = []
    versao = int(conn.execute('SHOW server_version_num').fetchone()[0])
    if versao < 100000:
        return ['a origem é PostgreSQL %d: a decodificação lógica com o pgoutput pede'
                ' PostgreSQL 10 ou mais novo. Use `coluna`.' % (versao // 10000)]
    nivel = conn.execute('SHOW wal_level').fetchone()[0]
    if nivel != 'logical':
        problemas.append(
            'wal_level=%s na origem: o slot lógico pede wal_level=logical. Peça ao DBA:'
            ' `ALTER SYSTEM SET wal_level = logical;` e REINICIAR o PostgreSQL (é só'
            ' depois do reinício que vale), com max_replication_slots e max_wal_senders'
            ' de pelo menos 1 livre.' % nivel)
    usuario, pode = conn.execute(
        'SELECT current_user, rolreplication OR rolsuper FROM pg_roles'
        ' WHERE rolname = current_user').fetchone()
    if not pode:
        problemas.append(
            'o login %s não tem o privilégio REPLICATION (o slot só se lê com ele). Peça'
            ' ao DBA: `ALTER ROLE %s REPLICATION;` (nenhuma escrita: ler o slot não muda'
            ' dado)%s.' % (usuario, usuario, '' if usuario_da_captura else
                           ', ou rode o comando com CONTEXTIA_ORIGEM_DBA de um login que'
                           ' o tenha'))
    return problemas


def _slot(conn: Any, nome: str) -> dict[str, Any] | None:
    """A linha do slot em pg_replication_slots, com o WAL retido; None se não existe."""
    versao = int(conn.execute('SHOW server_version_num').fetchone()[0])
    extra = ', wal_status, safe_wal_size' if versao >= 130000 else ', NULL, NULL'
    linha = conn.execute(
        'SELECT plugin, database, confirmed_flush_lsn::text, restart_lsn::text,'
        ' pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, active' + extra +
        ' FROM pg_replication_slots WHERE slot_name = %s', (nome,)).fetchone()
    if linha is None:
        return None
    return {'plugin': linha[0], 'banco': linha[1], 'confirmado': linha[2],
            'reinicio': linha[3], 'wal_retido': linha[4], 'ativo': linha[5],
            'wal_status': linha[6], 'wal_seguro': linha[7]}


# ------------------------------------------------------------------ a captura
class CapturaSlotLogico(CapturaPeloSpool):
    """`slot_logico`: a posição é o LSN confirmado do slot; o que mudou passa pelo spool."""

    nome = 'slot_logico'
    ARQUIVO_POSICAO = ARQUIVO_POSICAO
    RISCO_DO_SPOOL = ('enquanto o slot existir, mas o slot RETÉM WAL no disco do cliente a'
                      ' partir daqui (o WAL retido está no status; max_slot_wal_keep_size é'
                      ' a rede do DBA)')
    MARCA_CRITICA = 'perdido'

    def __init__(self, origem: ModuleType, estado: Estado, folga: int,  # noqa: ARG002
                 maximo: int) -> None:
        # `folga` nao serve aqui: o slot nao tem janela de commit atrasado.
        self.slot = nome_do_slot({})
        super().__init__(origem, estado, maximo)
        self.url = os.environ.get('CONTEXTIA_ORIGEM', '')
        self._conn: Any = None
        # Mudancas postas no spool nesta subida: a espera entre ciclos acorda o
        # laco quando cresce. `_lido_ate`: o fim do ultimo peek completo.
        self.guardadas = 0
        self._lido_ate = 0
        self._espera_falhou = False
        self.medido: dict[str, Any] = {}

    def usar_mapa(self, mapa: dict[str, Any]) -> None:
        """O mapeamento inteiro: o nome do slot (o `client`)."""
        self.slot = nome_do_slot(mapa)

    # -- o arquivo da posição --------------------------------------------------
    def _recusa_da_posicao(self, motivo: str) -> Exception:
        return ErroSlot(
            'a posição do slot em %s não se lê (%s). Apague o arquivo: o ouvinte'
            ' retoma do LSN confirmado no próprio slot, que é a verdade (este arquivo'
            ' só serve para notar um slot recriado ou movido por outro).'
            % (self._caminho_posicao(), motivo))

    def _gravar_posicao(self) -> None:
        self._posicao['slot'] = self.slot
        super()._gravar_posicao()

    @property
    def lsn(self) -> str | None:
        return self._posicao.get('lsn')

    def _conexao(self) -> Any:
        if self._conn is None or self._conn.closed:
            self._conn = _conectar(self.url)
        return self._conn

    def _fechar_conexao(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:                 # noqa: BLE001 - já caída
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
                    ' não há como reler nem remover. Declare `key` no dataset.' % alvo.nome)
        try:
            conn = self._conexao()
            problemas += _conferir_origem(conn, usuario_da_captura=True)
            if problemas:
                return problemas
            problemas += self._conferir_slot(conn)
            problemas += conferir_tabelas(conn, self._tabelas, lambda a: a.escopo, self.slot)
        except psycopg.OperationalError:
            self._fechar_conexao()
            return problemas            # fora do ar agora: confere de novo na leitura
        return problemas

    def _conferir_slot(self, conn: Any) -> list[str]:
        slot = _slot(conn, self.slot)
        comando = 'ouvinte.py --mapping=... --estado=... --criar-slot'
        if slot is None:
            antes = (' O ouvinte já consumia este slot até %s: o que mudou desde então vem'
                     ' da varredura, que ele agenda sozinho ao subir com o slot novo.'
                     % self.lsn) if self.lsn else ''
            return ['o slot %s não existe nesta origem. Ele é criado UMA VEZ pelo operador,'
                    ' nunca em silêncio na subida (a partir dali o banco retém WAL por nós):'
                    ' rode `%s` (com CONTEXTIA_ORIGEM_DBA de um login dono das tabelas, se o'
                    ' do ouvinte não puder criar a publicação) e suba de novo.%s'
                    % (self.slot, comando, antes)]
        if slot['plugin'] != PLUGIN:
            return ['o slot %s usa o plugin %s; o ouvinte lê o %s. Remova-o'
                    ' (`--remover-slot`) e crie de novo (`--criar-slot`).'
                    % (self.slot, slot['plugin'], PLUGIN)]
        banco = conn.execute('SELECT current_database()').fetchone()[0]
        if slot['banco'] != banco:
            return ['o slot %s é do banco %s, e a origem é o banco %s: dois clientes com o'
                    ' mesmo nome? Mude `client` no mapeamento ou remova o slot antigo.'
                    % (self.slot, slot['banco'], banco)]
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
        except (psycopg.errors.UndefinedObject, psycopg.errors.ObjectNotInPrerequisiteState) \
                as erro:
            # O slot sumiu ou foi invalidado entre a medida e o peek.
            self._slot_perdido(str(erro).splitlines()[0])
        except psycopg.OperationalError:
            self._fechar_conexao()
            raise

    def _bombear_conectado(self) -> None:
        conn = self._conexao()
        slot = _slot(conn, self.slot)
        self.medido = slot or {}
        if slot is None:
            self._slot_perdido('o slot %s não existe mais (apagado: pg_drop_replication_slot,'
                               ' ou a desinstalação)' % self.slot)
            return
        if slot['wal_status'] == 'lost':
            self._slot_perdido('o slot %s foi INVALIDADO pelo PostgreSQL: reteve mais WAL'
                               ' que max_slot_wal_keep_size' % self.slot)
            return
        confirmado = lsn_para_int(slot['confirmado'])
        if self.lsn is None or self._posicao.get('perdido', {}).get('aguardando_slot'):
            if self._posicao.get('perdido'):
                self._posicao['perdido']['aguardando_slot'] = False
                logger.warning('slot_logico: o slot %s está de pé de novo (em %s): a captura'
                               ' retoma dali; o que mudou antes dele vem da varredura',
                               self.slot, slot['confirmado'])
            else:
                logger.info('slot_logico: primeira leitura do slot %s, em %s (o que mudou'
                            ' desde a criação dele vem daqui; antes dela, da carga completa)',
                            self.slot, slot['confirmado'])
            self._posicao['lsn'] = slot['confirmado']
            self._gravar_posicao()
        elif confirmado > lsn_para_int(self.lsn):
            # Só o ouvinte avança o slot, e grava a intenção ANTES: o slot à frente do
            # arquivo foi movido por outro processo (ou apagado e criado de novo).
            self._slot_perdido('o slot %s está em %s, À FRENTE do que o ouvinte confirmou'
                               ' (%s): outro processo o consumiu, ou ele foi apagado e'
                               ' criado de novo' % (self.slot, slot['confirmado'], self.lsn),
                               aguardar=False)
            self._posicao['lsn'] = slot['confirmado']
            self._gravar_posicao()
        self._ler_slot(conn, confirmado)

    def _ler_slot(self, conn: Any, confirmado: int) -> None:
        ate = conn.execute('SELECT pg_current_wal_flush_lsn()::text').fetchone()[0]
        limite = int(os.environ.get('CONTEXTIA_SLOT_MENSAGENS') or padroes.SLOT_MENSAGENS)
        relacoes: dict[int, Relacao] = {}
        # (lsn do commit, mudanças da transação): só transação inteira entra no spool.
        transacoes: list[tuple[int, list[Mudanca]]] = []
        pendente: dict[tuple[str, str], Mudanca] = {}
        truncadas: set[str] = set()
        linhas = 0
        ultimo_ts = 0.0
        for lsn, dados in self._peek(conn, ate, limite):
            linhas += 1
            mensagem = decodificar(dados)
            if mensagem.tipo == 'R' and mensagem.relacao_nova is not None:
                relacoes[mensagem.relacao] = mensagem.relacao_nova
            elif mensagem.tipo == 'B':
                pendente = {}
            elif mensagem.tipo in 'IUD':
                relacao = relacoes.get(mensagem.relacao)
                if relacao is not None:
                    self._mudancas(relacao, mensagem, lsn, pendente)
            elif mensagem.tipo == 'T':
                for oid in mensagem.truncadas:
                    relacao = relacoes.get(oid)
                    for alvo in self._tabelas.get((relacao.esquema, relacao.tabela), []) \
                            if relacao else []:
                        truncadas.add(alvo.nome)
            elif mensagem.tipo == 'C':
                transacoes.append((lsn_para_int(lsn), list(pendente.values())))
                pendente = {}
                ultimo_ts = mensagem.quando
        # Peek completo (abaixo do limite): tudo o que comitou antes de `ate` foi visto,
        # e o slot pode ir até lá mesmo sem mudança nossa -- senão o WAL das outras
        # tabelas ficaria retido para sempre. Cortado pelo limite: até o último commit.
        final = lsn_para_int(ate) if linhas < limite else (
            transacoes[-1][0] if transacoes else confirmado)
        if linhas < limite:
            self._lido_ate = lsn_para_int(ate)
        if transacoes:
            _morrer_se('slot-lido')
        guardado = self._guardar(transacoes, final, confirmado)
        if truncadas:
            self._truncadas(sorted(truncadas))
        if guardado > confirmado:
            self._posicao['lsn'] = int_para_lsn(guardado)
            self._gravar_posicao()          # a intenção antes do advance (ver acima)
            if any(mudancas for _, mudancas in transacoes):
                _morrer_se('slot-no-spool')
            conn.execute('SELECT pg_replication_slot_advance(%s, %s::pg_lsn)',
                         (self.slot, int_para_lsn(guardado)))
            # O WAL retido medido de novo: o status mostra o depois do avanço.
            self.medido = _slot(conn, self.slot) or self.medido
        self.atraso_s = 0.0 if linhas < limite and not self.pausada else (
            round(max(0.0, time.time() - ultimo_ts), 1) if ultimo_ts else None)

    def _peek(self, conn: Any, ate: str, limite: int) -> Iterator[tuple[str, bytes]]:
        publicacao = self.slot
        cursor = conn.cursor()
        yield from cursor.stream(
            "SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn,"
            " %s, 'proto_version', '1', 'publication_names', %s)",
            (self.slot, ate, limite, publicacao))

    def _mudancas(self, relacao: Relacao, mensagem: Mensagem, lsn: str,
                  pendente: dict[tuple[str, str], Mudanca]) -> None:
        alvos = self._tabelas.get((relacao.esquema, relacao.tabela))
        if not alvos:
            return
        nomes = [nome for nome, _ in relacao.colunas]
        tipos = dict(relacao.colunas)
        evento = {'I': 'insert', 'U': 'update', 'D': 'delete'}[mensagem.tipo]
        for alvo in alvos:
            recorte = alvo.escopo
            chave_col = alvo.chave or ''
            for imagem in mensagem.imagens:
                linha = dict(zip(nomes, imagem, strict=False))
                valor = linha.get(chave_col)
                if valor is None:
                    continue
                if tipos.get(chave_col) in _TIPOS_INTEIROS:
                    valor = int(valor)
                escopo = texto_escopo(linha.get(recorte)) if recorte else None
                mudanca = pendente.setdefault((alvo.nome, str(valor)), Mudanca(
                    dataset=alvo.nome, chave=valor, evento=evento, posicao=lsn))
                mudanca.evento = evento
                if escopo not in mudanca.escopos:
                    mudanca.escopos.append(escopo)

    def _guardar(self, transacoes: list[tuple[int, list[Mudanca]]], final: int,
                 confirmado: int) -> int:
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
            if sum(len(m) for _, m in lote) < _MUDANCAS_POR_GUARDA and \
                    indice < len(transacoes) - 1:
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
        perdido = self._posicao.get('perdido')
        if perdido and perdido.get('aguardando_slot'):
            return                              # já dito; a bomba só confere se voltou
        nomes = sorted({alvo.nome for alvos in self._tabelas.values() for alvo in alvos})
        logger.error(
            'slot_logico: %s. O ouvinte NÃO sabe o que mudou desde %s: os datasets %s foram'
            ' entregues à varredura (a saúde fica CRÍTICA até ela rodar com um slot de pé).'
            '%s Para não repetir: não deixe o ouvinte parado (o spool segura o Contextia'
            ' fora), e dimensione max_slot_wal_keep_size.', motivo, self.lsn or '?',
            ', '.join(nomes), ' Crie o slot de novo: `ouvinte.py ... --criar-slot` (a'
            ' captura retoma sozinha quando ele existir).' if aguardar else '')
        agora = datetime.datetime.now().isoformat(' ', 'seconds')
        for nome in nomes:
            self.estado.entregar_a_varredura(nome, 'slot lógico perdido em %s' % agora)
        self.estado.gravar()
        anteriores = list((perdido or {}).get('datasets') or [])
        self._posicao['perdido'] = {
            'motivo': motivo, 'desde': self.lsn, 'em': agora, 'aguardando_slot': aguardar,
            'datasets': sorted(set(anteriores) | set(nomes))}
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
        perdido = (self._posicao.get('perdido') or {}).get('aguardando_slot')
        if self.lsn is None or perdido or self.pausada or not self._tabelas \
                or self._espera_falhou:
            # (Depois de uma falha, só a bomba do ciclo seguinte tenta de novo: um
            # aviso por ciclo com a origem fora, não um a cada pedaço da espera.)
            time.sleep(max(0.0, prazo - time.monotonic()))
            return False
        antes = self.guardadas
        while True:
            try:
                fim = self._conexao().execute(
                    'SELECT pg_current_wal_flush_lsn()::text').fetchone()[0]
                if lsn_para_int(fim) > self._lido_ate:
                    self._bombear()
            except Exception as erro:             # noqa: BLE001 - a bomba do ciclo dira
                logger.warning('slot_logico: a espera entre os ciclos parou de olhar o slot'
                               ' (%s: %s); o próximo ciclo lê de novo',
                               type(erro).__name__, str(erro).splitlines()[0] if str(erro)
                               else '')
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

    def posicao_atual(self, alvo: DatasetVivo) -> Any:  # noqa: ARG002
        """O LSN confirmado do slot ANTES da varredura; None se não há slot de pé."""
        slot = _slot(self._conexao(), self.slot)
        if slot is None or slot['wal_status'] == 'lost':
            return None
        return slot['confirmado']

    def saltar(self, alvo: DatasetVivo, posicao: Any) -> Any:
        """A varredura fechou o dataset: com um slot de pé antes dela, ele sai do CRÍTICO."""
        perdido = self._posicao.get('perdido')
        if not perdido or alvo.nome not in perdido.get('datasets', []):
            return posicao
        if posicao is None:
            logger.error('slot_logico: a varredura de %s rodou SEM o slot de pé: o que mudar'
                         ' até ele existir não é visto. Crie o slot (`--criar-slot`) e rode a'
                         ' varredura de novo (`--varrer-agora`); a saúde segue CRÍTICA.',
                         alvo.nome)
            return posicao
        self._sair_do_critico(alvo)
        return posicao

    # -- status e saúde ---------------------------------------------------------------
    def para_o_status(self) -> dict[str, Any]:
        """O bloco `captura` do ouvinte-status.json (a saúde e as métricas leem daqui)."""
        perdido = self._posicao.get('perdido')
        medido = self.medido
        return {
            'estrategia': self.nome, 'slot': self.slot, 'posicao': self.lsn,
            'wal_retido_bytes': medido.get('wal_retido'),
            'wal_seguro_bytes': medido.get('wal_seguro'),
            'wal_status': medido.get('wal_status'),
            **self._status_do_spool(),
            'critico': ('slot lógico perdido (%s, em %s): datasets %s esperam a varredura%s'
                        % (perdido.get('motivo'), perdido.get('em'),
                           ', '.join(perdido.get('datasets') or []),
                           ' e o slot não existe: rode --criar-slot'
                           if perdido.get('aguardando_slot') else ''))
            if perdido else None,
        }


def conferir_tabelas(conn: Any, tabelas: dict[tuple[str, str], list[DatasetVivo]],
                     recorte: Any, publicacao: str) -> list[str]:
    """
    Cada tabela seguida: existe, é tabela, está na publicação, e a imagem antiga
    (REPLICA IDENTITY) traz a key E a empresa -- um DELETE sem a empresa não sabe
    de que projeto sair, e um UPDATE que troca a empresa não sairia da antiga.
    """
    problemas: list[str] = []
    publicadas = {(e, t) for e, t in conn.execute(
        'SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s',
        (publicacao,)).fetchall()}
    existe_pub = conn.execute('SELECT 1 FROM pg_publication WHERE pubname = %s',
                              (publicacao,)).fetchone() is not None
    faltam_pub: list[str] = []
    for (esquema, tabela), alvos in sorted(tabelas.items()):
        linha = conn.execute(
            'SELECT c.relkind, c.relreplident, c.oid FROM pg_class c JOIN pg_namespace n'
            ' ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s',
            (esquema, tabela)).fetchone()
        nome = '%s.%s' % (esquema, tabela)
        if linha is None:
            problemas.append('a tabela %s (seguida por %s) não existe na origem. Corrija'
                             ' `base_tables` (ou o `source_object`) no mapeamento.'
                             % (nome, ', '.join(a.nome for a in alvos)))
            continue
        tipo, identidade, oid = linha
        if tipo not in ('r', 'p'):
            problemas.append(
                '%s (dataset %s) não é tabela (relkind %s): o slot vê TABELAS. Declare'
                ' no dataset `base_tables` com a(s) tabela(s) por trás da view; a view é'
                ' relida pela chave.' % (nome, ', '.join(a.nome for a in alvos), tipo))
            continue
        if (esquema, tabela) not in publicadas:
            faltam_pub.append(_ident(esquema, tabela))
        if identidade == 'f':
            continue
        colunas_da_identidade = {c for (c,) in conn.execute(
            'SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid'
            ' AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s AND'
            + (' i.indisprimary' if identidade == 'd' else ' i.indisreplident'),
            (oid,)).fetchall()} if identidade in ('d', 'i') else set()
        for alvo in alvos:
            precisa = [c for c in (alvo.chave, recorte(alvo)) if c]
            faltam = [c for c in precisa if c not in colunas_da_identidade]
            if faltam:
                problemas.append(
                    'a tabela %s tem REPLICA IDENTITY %s, e a imagem antiga de um DELETE ou'
                    ' UPDATE não traz %s (dataset %s): sem a key não se sabe que linha sair,'
                    ' sem a empresa não se sabe de que projeto. Peça ao DBA: `ALTER TABLE'
                    ' %s REPLICA IDENTITY FULL;` (o WAL de UPDATE/DELETE dessa tabela passa'
                    ' a levar a linha antiga inteira).'
                    % (nome, {'d': 'DEFAULT', 'i': 'USING INDEX', 'n': 'NOTHING'}.get(
                        identidade, identidade), ', '.join(faltam), alvo.nome,
                       _ident(esquema, tabela)))
    if not existe_pub:
        problemas.append('a publicação %s não existe (o slot lê só as tabelas dela). Rode'
                         ' `ouvinte.py ... --criar-slot`, que a cria com o slot.' % publicacao)
    elif faltam_pub:
        problemas.append(
            'a publicação %s não cobre %s: a mudança nelas não sairia do banco. Peça ao DBA:'
            ' `ALTER PUBLICATION %s ADD TABLE %s;` e rode a varredura depois (o que mudou'
            ' antes disso não está no slot).' % (publicacao, ', '.join(faltam_pub), publicacao,
                                                 ', '.join(faltam_pub)))
    return problemas


# ------------------------------------------------------------------ os comandos do operador
def _url_do_dba() -> tuple[str, str]:
    """(URL, variável): CONTEXTIA_ORIGEM_DBA se definida, senão CONTEXTIA_ORIGEM."""
    dba = os.environ.get('CONTEXTIA_ORIGEM_DBA', '').strip()
    if dba:
        return dba, 'CONTEXTIA_ORIGEM_DBA'
    return os.environ.get('CONTEXTIA_ORIGEM', '').strip(), 'CONTEXTIA_ORIGEM'


def criar_slot(mapa: dict[str, Any], alvos: list[DatasetVivo]) -> list[str]:
    """
    `--criar-slot`: a publicação (as tabelas seguidas) e DEPOIS o slot -- o
    pgoutput procura a publicação no catálogo da época de cada mudança, então
    ela tem de existir antes da primeira. Idempotente. Devolve as linhas do que fez.
    """
    import psycopg
    slot = nome_do_slot(mapa)
    tabelas = tabelas_seguidas(alvos)
    if not tabelas:
        raise ErroSlot('nenhum dataset ao vivo no mapeamento: não há tabela para o slot'
                       ' seguir. Declare `watch_column` (e `key`) nos datasets.')
    feito: list[str] = []
    url, variavel = _url_do_dba()
    with _conectar(url, somente_leitura=False, variavel=variavel) as conn:
        problemas = _conferir_origem(conn, usuario_da_captura=False)
        if problemas:
            raise ErroSlot('\n'.join(problemas))
        nomes = [_ident(e, t) for e, t in sorted(tabelas)]
        existe = conn.execute('SELECT 1 FROM pg_publication WHERE pubname = %s',
                              (slot,)).fetchone() is not None
        publicadas = {_ident(e, t) for e, t in conn.execute(
            'SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s',
            (slot,)).fetchall()}
        faltam = [n for n in nomes if n not in publicadas]
        comando = ('ALTER PUBLICATION %s ADD TABLE %s' if existe else
                   'CREATE PUBLICATION %s FOR TABLE %s') % (slot, ', '.join(faltam))
        if faltam:
            try:
                conn.execute(comando)
            except psycopg.errors.InsufficientPrivilege as erro:
                raise ErroSlot(
                    'a publicação %s não pôde ser %s com este login (%s). Ela pede o dono'
                    ' das tabelas. Peça ao DBA: `%s;` -- ou rode este comando com'
                    ' CONTEXTIA_ORIGEM_DBA=<URL de um login dono das tabelas>.'
                    % (slot, 'alterada' if existe else 'criada',
                       str(erro).splitlines()[0], comando)) from None
            feito.append('publicação %s: %s' % (slot, ', '.join(faltam)))
        else:
            feito.append('publicação %s: já cobre %s' % (slot, ', '.join(nomes)))
        atual = _slot(conn, slot)
        if atual is not None and atual['wal_status'] == 'lost':
            raise ErroSlot('o slot %s existe mas foi INVALIDADO (max_slot_wal_keep_size): não'
                           ' serve mais. Rode `--remover-slot` e depois `--criar-slot`.' % slot)
        if atual is None:
            lsn = conn.execute("SELECT lsn::text FROM pg_create_logical_replication_slot(%s,"
                               " %s)", (slot, PLUGIN)).fetchone()[0]
            feito.append('slot %s criado em %s (plugin %s): a partir daqui o banco RETÉM WAL'
                         ' até o ouvinte consumir' % (slot, lsn, PLUGIN))
        else:
            feito.append('slot %s já existe (em %s): nada mudou' % (slot, atual['confirmado']))
        problemas = conferir_tabelas(conn, tabelas, lambda a: a.escopo, slot)
    feito.append('Proteção do disco do cliente: peça ao DBA `ALTER SYSTEM SET'
                 ' max_slot_wal_keep_size = \'<ex.: 20GB>\'; SELECT pg_reload_conf();`'
                 ' (PostgreSQL 13+): acima disso o banco invalida o slot em vez de encher o'
                 ' disco, e o ouvinte cai na varredura. Desinstalar: `--remover-slot` PRIMEIRO.')
    feito += ['AINDA FALTA: %s' % p for p in problemas]
    return feito


def remover_slot(mapa: dict[str, Any]) -> list[str]:
    """`--remover-slot`: o slot (o que retém WAL) e depois a publicação. Idempotente."""
    import psycopg
    slot = nome_do_slot(mapa)
    feito: list[str] = []
    url, variavel = _url_do_dba()
    with _conectar(url, somente_leitura=False, variavel=variavel) as conn:
        atual = _slot(conn, slot)
        if atual is None:
            feito.append('slot %s: não existe (nada retém WAL por este ouvinte)' % slot)
        else:
            try:
                conn.execute('SELECT pg_drop_replication_slot(%s)', (slot,))
            except psycopg.errors.ObjectInUse:
                raise ErroSlot('o slot %s está em uso agora (outro processo o lê). Pare o'
                               ' ouvinte e rode de novo.' % slot) from None
            feito.append('slot %s removido (retinha %s bytes de WAL)'
                         % (slot, atual['wal_retido']))
        if conn.execute('SELECT 1 FROM pg_publication WHERE pubname = %s',
                        (slot,)).fetchone() is None:
            feito.append('publicação %s: não existe' % slot)
        else:
            try:
                conn.execute('DROP PUBLICATION %s' % slot)
                feito.append('publicação %s removida' % slot)
            except psycopg.errors.InsufficientPrivilege:
                feito.append('publicação %s NÃO removida (pede o dono): peça ao DBA `DROP'
                             ' PUBLICATION %s;` (ela não retém WAL; é só limpeza)'
                             % (slot, slot))
    return feito
