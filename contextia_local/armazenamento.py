"""
O banco do Contextia local: um SQLite em `--dados`, com as regras do intake.

Toda escrita passa por `Banco.transacao()`: um lock do processo, a trava de
arquivo da pasta (`contextia.sqlite3-escrita`) e BEGIN IMMEDIATE. O lock
serializa as threads do uvicorn (oito clientes no mesmo dataset dão contagens
exatas); a trava de arquivo, os processos do mesmo servidor (`--processos`):
quem espera por ela dorme no kernel e acorda quando ela solta, e não nas
pausas de 1 a 100 ms com que o SQLite espera a dele. O BEGIN IMMEDIATE protege
contra qualquer outro processo apontado para a mesma pasta. WAL deixa a
leitura correr durante a escrita e sobrevive a um SIGKILL sem perder o que já
foi comitado. O banco novo nasce com páginas de 16 KiB (`TAMANHO_DA_PAGINA`);
o existente fica com a dele.

A chave de cada pedido é conferida por uma segunda conexão, só de leitura
(`projeto_da_chave`): no WAL ela nunca espera uma escrita em curso, e por isso
a autenticação roda no laço de eventos, sem passar por uma thread.
"""

import contextlib
import dataclasses
import datetime
import fcntl
import functools
import hashlib
import itertools
import json
import os
import secrets
import sqlite3
import threading
from collections.abc import Collection, Iterator
from typing import Required, TypedDict, cast

import orjson

from contextia_sync.tipos import Json, JsonDecodificado, ObjetoJson

ESQUEMA = """
CREATE TABLE IF NOT EXISTS projetos (
    id           INTEGER PRIMARY KEY,
    external_id  TEXT NOT NULL UNIQUE,
    nome         TEXT NOT NULL,
    criado_em    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS chaves (
    key_id       TEXT PRIMARY KEY,
    projeto_id   INTEGER NOT NULL REFERENCES projetos(id),
    hash         TEXT NOT NULL UNIQUE,
    prefixo      TEXT NOT NULL,
    criada_em    TEXT NOT NULL,
    revogada_em  TEXT
);
CREATE TABLE IF NOT EXISTS grupos (
    slug         TEXT PRIMARY KEY,
    nome         TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS grupo_projetos (
    slug         TEXT NOT NULL REFERENCES grupos(slug),
    projeto_id   INTEGER NOT NULL REFERENCES projetos(id),
    PRIMARY KEY (slug, projeto_id)
);
CREATE TABLE IF NOT EXISTS webhooks (
    id           TEXT PRIMARY KEY,
    projeto_id   INTEGER NOT NULL REFERENCES projetos(id),
    url          TEXT NOT NULL,
    segredo      TEXT NOT NULL,
    eventos      TEXT NOT NULL,
    criado_em    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS datasets (
    projeto_id   INTEGER NOT NULL REFERENCES projetos(id),
    nome         TEXT NOT NULL,
    chave        TEXT,
    descricao    TEXT,
    campos       TEXT,
    grupo        TEXT,
    atualizado_em TEXT NOT NULL,
    PRIMARY KEY (projeto_id, nome)
);
-- Cada lote recebido ganha um numero crescente: e a "versao" gravada nos
-- registros que ele tocou, e o que o `complete` usa para nao remover o que
-- chegou por fora do sync depois que ele comecou.
CREATE TABLE IF NOT EXISTS lotes (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    projeto_id   INTEGER NOT NULL,
    dataset      TEXT NOT NULL,
    sync_id      TEXT,
    parte        INTEGER,
    recebido_em  TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS syncs (
    projeto_id   INTEGER NOT NULL,
    dataset      TEXT NOT NULL,
    sync_id      TEXT NOT NULL,
    primeiro_lote INTEGER NOT NULL,
    completado_em TEXT,
    removidos    INTEGER,
    PRIMARY KEY (projeto_id, dataset, sync_id)
);
-- `hash`: o sha256 do corpo canônico, que é a identidade do registro sem key
-- (`ident` = 'h:' + hash). Com key, '' desde a issue 18: o registro mudou ou
-- não é decidido comparando o próprio corpo (linhas antigas guardam o sha256,
-- que nada mais lê).
CREATE TABLE IF NOT EXISTS registros (
    id           INTEGER PRIMARY KEY,
    projeto_id   INTEGER NOT NULL,
    dataset      TEXT NOT NULL,
    ident        TEXT NOT NULL,
    hash         TEXT NOT NULL,
    corpo        TEXT NOT NULL,
    versao       INTEGER NOT NULL,
    ultimo_sync  TEXT,
    UNIQUE (projeto_id, dataset, ident)
);
"""


ESPERA_DA_TRAVA = 30
"""Segundos que uma escrita espera a trava do SQLite tomada por outro processo."""

TAMANHO_DA_PAGINA = 16384
"""Bytes por página do SQLite num banco novo (o existente guarda a dele)."""

SUFIXO_DA_TRAVA = '-escrita'
"""O arquivo da trava de escrita entre processos: `contextia.sqlite3-escrita`."""

BYTES_ATE_O_CHECKPOINT = 10000 * 4096
"""Tamanho do WAL (~40 MiB) que leva o SQLite a devolvê-lo ao banco."""


class BancoOcupado(Exception):
    """A trava de escrita não está livre agora (`transacao(esperar=False)`); nada foi feito."""


# ---------------------------------------------------------------- os recursos
# O que o `Banco` lê e devolve às rotas (o JSON das respostas do admin).
class Projeto(TypedDict):
    """Um projeto como o `Banco` o lê (`_projeto`)."""

    id: int
    external_id: str
    name: str
    criado_em: str


class ProjetoCriado(Projeto):
    criado: bool


class ChaveEmitida(TypedDict):
    """A única vez que a chave sai em claro (`emitir_chave`)."""

    key_id: str
    key: str
    project_id: int


class Chave(TypedDict):
    """Uma chave listada: sem ela, só o prefixo."""

    key_id: str
    prefixo: str
    criada_em: str
    revogada: bool


class GrupoCriado(TypedDict):
    slug: str
    name: str
    criado: bool


class Grupo(TypedDict):
    slug: str
    name: str
    projetos: list[int]


class WebhookRegistrado(TypedDict):
    """O webhook recém-registrado, com o segredo (a única vez que ele sai)."""

    id: str
    secret: str
    url: str
    eventos: list[str]


class Webhook(TypedDict):
    """Um webhook como `listar_webhooks` o lê; os campos com `_` nunca saem na API."""

    id: str
    project_id: int
    url: str
    eventos: list[str]
    _segredo: str


# ---------------------------------------------------------------- o lote
Registro = ObjetoJson
"""Um registro do envelope: um objeto JSON (`rotas_intake.registros_sao_objetos` confere)."""


class SyncDoLote(TypedDict):
    id: str
    part: int


class EnvelopeDoLote(TypedDict, total=False):
    """O envelope do intake como a rota o monta (`rotas_intake.intake`); só `dataset` é exigido."""

    dataset: Required[str]
    records: list[Registro]
    key: str | None
    description: str | None
    fields: dict[str, str] | None
    group: str | None
    sync: SyncDoLote | None
    # Os valores de key a remover: o JSON de cada um, como o da key no registro.
    remove: list[Json] | None


@dataclasses.dataclass
class Lote:
    """Um envelope do intake já preparado para gravar (`Banco.preparar_lote`)."""

    envelope: EnvelopeDoLote
    idents: list[str]
    # O que vai à coluna `hash`: o sha256 sem key; None com key (vai '', ver o ESQUEMA).
    hashes: list[str] | None
    # bytearray, e não bytes: é o que vai ao INSERT (ver `_inserir`), feito aqui,
    # fora da trava de escrita, que os outros processos de `--processos` esperam.
    corpos: list[bytearray]


@dataclasses.dataclass(frozen=True)
class _Cabecalho:
    """O envelope de um lote sem os registros: onde e com que key ele é gravado."""

    dataset: str
    chave: str | None
    sync: SyncDoLote | None
    sync_id: str | None
    recebidos: int
    remover: list[Json] | None

    @classmethod
    def do_envelope(cls, envelope: EnvelopeDoLote) -> '_Cabecalho':
        sync = envelope.get('sync')
        return cls(
            dataset=envelope['dataset'],
            chave=envelope.get('key'),
            sync=sync,
            sync_id=sync['id'] if sync else None,
            recebidos=len(envelope.get('records') or []),
            remover=envelope.get('remove'),
        )


class ErroRegra(Exception):
    """O pedido e bem formado mas fere uma regra do intake (vira 409/422 na API)."""

    def __init__(self, status: int, codigo: str, mensagem: str) -> None:
        super().__init__(mensagem)
        self.status = status
        self.codigo = codigo
        self.mensagem = mensagem
        # Recusa dada sem ler o corpo (grande ou chunked): a resposta leva
        # `Connection: close` e o servidor nao le o resto (contextia_local/corpo.py).
        self.fechar_conexao = False


def agora() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')


def canonico(objeto: object) -> str:
    """Mesmo texto de contextia_sync.serializacao.json_canonico (o contrato do hash)."""
    return json.dumps(
        objeto, sort_keys=True, separators=(',', ':'), ensure_ascii=False, allow_nan=False
    )


# Os tipos que o orjson escreve byte a byte como o `canonico` (conferido em
# tests/test_intake_servidor.py); float não: ele escreve 1e-05 como 0.00001.
_SIMPLES: frozenset[type] = frozenset({str, int, bool, type(None)})
_ORDENADO = orjson.OPT_SORT_KEYS


def canonico_bytes(valor: Json) -> bytes:
    """
    `canonico(valor)` em UTF-8, pelo orjson quando dá o mesmo texto: um valor
    simples, ou um registro (dict) só de valores simples. O resto -- float,
    lista, objeto aninhado, inteiro além de 64 bits, texto com surrogate solto
    -- pelo `json` de sempre.
    """
    tipo = type(valor)
    if tipo in _SIMPLES or (
        tipo is dict and _SIMPLES.issuperset(map(type, cast(ObjetoJson, valor).values()))
    ):
        try:
            return orjson.dumps(valor, option=_ORDENADO)
        except orjson.JSONEncodeError:
            pass
    return canonico(valor).encode('utf-8')


def hash_chave(chave: str) -> str:
    return hashlib.sha256(chave.encode('utf-8')).hexdigest()


class Banco:
    """Acesso ao SQLite do servidor. Uma conexão, serializada por um lock."""

    def __init__(self, pasta: str) -> None:
        os.makedirs(pasta, mode=0o700, exist_ok=True)
        self.caminho = os.path.join(pasta, 'contextia.sqlite3')
        _so_do_dono(self.caminho)
        self._lock = threading.RLock()
        # A trava de escrita entre processos (flock num arquivo ao lado do banco;
        # não no próprio banco, cujas travas são do SQLite).
        self._trava = os.open(
            self.caminho + SUFIXO_DA_TRAVA, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600
        )
        self._con = sqlite3.connect(
            self.caminho, check_same_thread=False, isolation_level=None, timeout=ESPERA_DA_TRAVA
        )
        self._con.row_factory = sqlite3.Row
        # Só vale no banco novo (antes do WAL e da primeira tabela); o existente
        # fica com a página que tem. Com 16 KiB o COMMIT escreve no WAL um quarto
        # dos quadros (cada um são duas escritas): 10% menos CPU por registro
        # gravado que com 4 KiB; 32 e 64 KiB gastaram mais.
        self._con.execute('PRAGMA page_size=%d' % TAMANHO_DA_PAGINA)
        self._con.execute('PRAGMA journal_mode=WAL')
        self._con.execute('PRAGMA synchronous=NORMAL')
        self._con.execute('PRAGMA foreign_keys=ON')
        # A carga grava milhões de linhas: o índice de (projeto, dataset, ident)
        # cabe no cache (64 MiB, não os 2 do padrão), e o WAL só volta ao banco a
        # cada ~40 MiB (cada volta é um fsync), qualquer que seja a página. A
        # durabilidade do lote comitado é a mesma: o COMMIT vai ao WAL, que
        # sobrevive a um SIGKILL.
        self._con.execute('PRAGMA cache_size=-65536')
        pagina = self._con.execute('PRAGMA page_size').fetchone()[0]
        self._con.execute('PRAGMA wal_autocheckpoint=%d' % max(1, BYTES_ATE_O_CHECKPOINT // pagina))
        # executescript faz COMMIT implicito; roda fora de transacao explicita.
        with self._lock:
            self._con.executescript(ESQUEMA)
        # Aberta depois do esquema e do WAL (que fica gravado no arquivo).
        self._lock_chaves = threading.Lock()
        self._con_chaves = sqlite3.connect(
            'file:%s?mode=ro' % self.caminho,
            uri=True,
            check_same_thread=False,
            isolation_level=None,
            timeout=ESPERA_DA_TRAVA,
        )
        self._con_chaves.row_factory = sqlite3.Row
        # A espera da trava do SQLite que a conexão tem agora (o busy_timeout):
        # trocada só quando muda, e não duas vezes a cada lote do laço de eventos.
        self._espera = ESPERA_DA_TRAVA

    def _esperar_a_trava(self, segundos: int) -> None:
        if self._espera != segundos:
            self._con.execute('PRAGMA busy_timeout = %d' % (segundos * 1000))
            self._espera = segundos

    @contextlib.contextmanager
    def transacao(self, esperar: bool = True) -> Iterator[sqlite3.Connection]:
        """
        Uma transação de escrita. `esperar=False`: se a trava (a deste processo,
        a de arquivo ou a do SQLite, de outro processo) não está livre agora,
        levanta BancoOcupado sem ter feito nada -- quem chama no laço de eventos
        espera a vez numa thread (`esperar_a_vez`).
        """
        if not self._lock.acquire(blocking=esperar):
            raise BancoOcupado()
        try:
            # Dentro do try: o lock do processo sai no finally por qualquer erro
            # (soltar a trava de arquivo que não foi tomada não faz nada).
            try:
                fcntl.flock(self._trava, fcntl.LOCK_EX | (0 if esperar else fcntl.LOCK_NB))
            except BlockingIOError:
                raise BancoOcupado() from None
            if esperar:
                self._esperar_a_trava(ESPERA_DA_TRAVA)
                self._con.execute('BEGIN IMMEDIATE')
            else:
                self._esperar_a_trava(0)
                try:
                    self._con.execute('BEGIN IMMEDIATE')
                except sqlite3.OperationalError as erro:
                    if 'locked' in str(erro) or 'busy' in str(erro):
                        raise BancoOcupado() from None
                    raise
            try:
                yield self._con
            except BaseException:
                self._con.execute('ROLLBACK')
                raise
            self._con.execute('COMMIT')
        finally:
            fcntl.flock(self._trava, fcntl.LOCK_UN)
            self._lock.release()

    def esperar_a_vez(self) -> None:
        """
        Bloqueia até a trava de escrita (a deste processo e a de arquivo) ficar
        livre, e a solta. Para quem está no laço de eventos: espera numa thread
        (que só dorme no kernel) e grava no laço, em vez de gravar na thread
        disputando o GIL com o laço a cada passo do SQLite.
        """
        with self._lock:
            fcntl.flock(self._trava, fcntl.LOCK_EX)
            fcntl.flock(self._trava, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def leitura(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            # O lote do laço de eventos deixa a espera em zero; a leitura espera.
            self._esperar_a_trava(ESPERA_DA_TRAVA)
            yield self._con

    def fechar(self) -> None:
        with self._lock_chaves:
            self._con_chaves.close()
        with self._lock:
            self._con.close()
            os.close(self._trava)

    # ----------------------------------------------------------------- projetos
    def criar_projeto(self, external_id: str, nome: str | None) -> ProjetoCriado:
        with self.transacao() as con:
            linha = con.execute(
                'SELECT * FROM projetos WHERE external_id = ?', (external_id,)
            ).fetchone()
            if linha is not None:
                return {**_projeto(linha), 'criado': False}
            cursor = con.execute(
                'INSERT INTO projetos (external_id, nome, criado_em) VALUES (?, ?, ?)',
                (external_id, nome or external_id, agora()),
            )
            linha = con.execute(
                'SELECT * FROM projetos WHERE id = ?', (cursor.lastrowid,)
            ).fetchone()
            return {**_projeto(linha), 'criado': True}

    def buscar_projetos(self, external_id: str | None = None) -> list[Projeto]:
        with self.leitura() as con:
            if external_id is None:
                linhas = con.execute('SELECT * FROM projetos ORDER BY id').fetchall()
            else:
                linhas = con.execute(
                    'SELECT * FROM projetos WHERE external_id = ?', (external_id,)
                ).fetchall()
            return [_projeto(linha) for linha in linhas]

    def projeto(self, projeto_id: int) -> Projeto:
        with self.leitura() as con:
            linha = con.execute('SELECT * FROM projetos WHERE id = ?', (projeto_id,)).fetchone()
        if linha is None:
            raise ErroRegra(
                404,
                'projeto_inexistente',
                'projeto %s não existe. Crie-o antes (POST /api/v1/admin/projetos).' % projeto_id,
            )
        return _projeto(linha)

    # ------------------------------------------------------------------- chaves
    def emitir_chave(self, projeto_id: int) -> ChaveEmitida:
        self.projeto(projeto_id)
        chave = 'ctx_' + secrets.token_urlsafe(32)
        key_id = 'key_' + secrets.token_hex(6)
        with self.transacao() as con:
            con.execute(
                'INSERT INTO chaves (key_id, projeto_id, hash, prefixo, criada_em)'
                ' VALUES (?, ?, ?, ?, ?)',
                (key_id, projeto_id, hash_chave(chave), chave[:8], agora()),
            )
        # A unica vez que a chave existe em claro: o banco so guarda o hash.
        return {'key_id': key_id, 'key': chave, 'project_id': projeto_id}

    def listar_chaves(self, projeto_id: int) -> list[Chave]:
        self.projeto(projeto_id)
        with self.leitura() as con:
            linhas = con.execute(
                'SELECT * FROM chaves WHERE projeto_id = ? ORDER BY criada_em, key_id',
                (projeto_id,),
            ).fetchall()
        return [
            {
                'key_id': linha['key_id'],
                'prefixo': linha['prefixo'],
                'criada_em': linha['criada_em'],
                'revogada': linha['revogada_em'] is not None,
            }
            for linha in linhas
        ]

    def revogar_chave(self, key_id: str) -> ObjetoJson:
        with self.transacao() as con:
            cursor = con.execute(
                'UPDATE chaves SET revogada_em = COALESCE(revogada_em, ?) WHERE key_id = ?',
                (agora(), key_id),
            )
            if cursor.rowcount == 0:
                raise ErroRegra(404, 'chave_inexistente', 'chave %s não existe.' % key_id)
        return {'key_id': key_id, 'revogada': True}

    def projeto_da_chave(self, chave: str) -> Projeto | None:
        """
        O projeto dono da chave, ou None se ela não existe ou foi revogada. Pela
        conexão de leitura: não espera a escrita em curso (ver o topo do módulo).
        """
        with self._lock_chaves:
            # fetchall: a leitura termina aqui (fetchone deixaria o instantâneo aberto).
            linhas = self._con_chaves.execute(
                'SELECT p.* FROM chaves c JOIN projetos p ON p.id = c.projeto_id'
                ' WHERE c.hash = ? AND c.revogada_em IS NULL',
                (hash_chave(chave),),
            ).fetchall()
        return _projeto(linhas[0]) if linhas else None

    # ------------------------------------------------------------------- grupos
    def criar_grupo(self, slug: str, nome: str | None) -> GrupoCriado:
        with self.transacao() as con:
            existe = con.execute('SELECT * FROM grupos WHERE slug = ?', (slug,)).fetchone()
            if existe is None:
                con.execute('INSERT INTO grupos (slug, nome) VALUES (?, ?)', (slug, nome or slug))
                return {'slug': slug, 'name': nome or slug, 'criado': True}
            return {'slug': slug, 'name': existe['nome'], 'criado': False}

    def listar_grupos(self) -> list[Grupo]:
        with self.leitura() as con:
            grupos = con.execute('SELECT * FROM grupos ORDER BY slug').fetchall()
            membros = con.execute(
                'SELECT slug, projeto_id FROM grupo_projetos ORDER BY projeto_id'
            ).fetchall()
        saida: list[Grupo] = []
        for g in grupos:
            saida.append(
                {
                    'slug': g['slug'],
                    'name': g['nome'],
                    'projetos': [m['projeto_id'] for m in membros if m['slug'] == g['slug']],
                }
            )
        return saida

    def incluir_no_grupo(self, slug: str, projeto_id: int) -> ObjetoJson:
        self.projeto(projeto_id)
        with self.transacao() as con:
            if con.execute('SELECT 1 FROM grupos WHERE slug = ?', (slug,)).fetchone() is None:
                raise ErroRegra(
                    404,
                    'grupo_inexistente',
                    'grupo %r não existe. Crie-o antes (criar_grupo).' % slug,
                )
            con.execute(
                'INSERT OR IGNORE INTO grupo_projetos (slug, projeto_id) VALUES (?, ?)',
                (slug, projeto_id),
            )
        return {'slug': slug, 'project_id': projeto_id}

    # ----------------------------------------------------------------- webhooks
    def registrar_webhook(
        self, projeto_id: int, url: str, segredo: str | None, eventos: list[str]
    ) -> WebhookRegistrado:
        self.projeto(projeto_id)
        webhook_id = 'wh_' + secrets.token_hex(6)
        segredo = segredo or 'whsec_' + secrets.token_urlsafe(24)
        with self.transacao() as con:
            con.execute(
                'INSERT INTO webhooks (id, projeto_id, url, segredo, eventos, criado_em)'
                ' VALUES (?, ?, ?, ?, ?, ?)',
                (webhook_id, projeto_id, url, segredo, json.dumps(eventos), agora()),
            )
        return {'id': webhook_id, 'secret': segredo, 'url': url, 'eventos': eventos}

    def listar_webhooks(
        self, projeto_id: int | None = None, webhook_id: str | None = None
    ) -> list[Webhook]:
        with self.leitura() as con:
            if webhook_id is not None:
                linhas = con.execute(
                    'SELECT * FROM webhooks WHERE id = ?', (webhook_id,)
                ).fetchall()
            else:
                linhas = con.execute(
                    'SELECT * FROM webhooks WHERE projeto_id = ? ORDER BY criado_em, id',
                    (projeto_id,),
                ).fetchall()
        return [
            {
                'id': linha['id'],
                'project_id': linha['projeto_id'],
                'url': linha['url'],
                'eventos': json.loads(linha['eventos']),
                '_segredo': linha['segredo'],
            }
            for linha in linhas
        ]

    # ------------------------------------------------------------------- intake
    def receber_lote(self, projeto_id: int, envelope: EnvelopeDoLote) -> dict[str, int]:
        """
        Grava um lote e devolve as contagens. Tudo numa transação: um lote entra
        inteiro ou não entra, e um reenvio (retry) da o mesmo estado final.
        """
        return self.gravar_lote(projeto_id, self.preparar_lote(envelope))

    @staticmethod
    def preparar_lote(envelope: EnvelopeDoLote, registros_simples: bool = False) -> Lote:
        """
        O JSON canônico, o hash e a identidade de cada registro: a parte cara,
        que não depende do banco (fora da trava). ErroRegra: registro sem a key.
        `registros_simples`: a leitura do corpo já sabe que são (`corpo.py`).
        """
        return Lote(
            envelope,
            *_preparar(envelope.get('records') or [], envelope.get('key'), registros_simples),
        )

    def gravar_lote(self, projeto_id: int, lote: Lote, esperar: bool = True) -> dict[str, int]:
        """
        Grava um lote preparado, numa transação, e devolve as contagens.
        `esperar=False`: BancoOcupado (nada gravado) se a trava não está livre.
        """
        cabecalho = _Cabecalho.do_envelope(lote.envelope)
        contagens = {
            'received': cabecalho.recebidos,
            'inserted': 0,
            'updated': 0,
            'duplicates': 0,
            'removed': 0,
        }
        with self.transacao(esperar) as con:
            # Depois da trava (que pode esperar): a hora cresce com o número do lote.
            recebido_em = agora()
            chave_do_dataset, vazio = self._key_do_lote(con, projeto_id, cabecalho)
            versao = self._abrir_versao(con, projeto_id, cabecalho, recebido_em)
            self._gravar_dataset(con, projeto_id, lote.envelope, chave_do_dataset, recebido_em)
            contagens.update(
                self._gravar_registros(con, projeto_id, cabecalho, versao, lote, vazio)
            )
            if cabecalho.remover:
                contagens['removed'] = self._remover(con, projeto_id, cabecalho)
        return contagens

    @staticmethod
    def _key_do_lote(
        con: sqlite3.Connection, projeto_id: int, cabecalho: _Cabecalho
    ) -> tuple[str | None, bool]:
        """
        (a key com que o dataset fica, se ele está vazio); ErroRegra se a key do
        lote não pode entrar: outra que a guardada fora de uma carga completa, ou
        um `remove` num dataset sem key.
        """
        dataset, chave = cabecalho.dataset, cabecalho.chave
        # A key guardada e se o dataset tem registros, numa consulta só.
        chave_guardada, tem_registros = con.execute(
            'SELECT (SELECT chave FROM datasets WHERE projeto_id = ?1 AND nome = ?2),'
            ' EXISTS (SELECT 1 FROM registros WHERE projeto_id = ?1 AND dataset = ?2)',
            (projeto_id, dataset),
        ).fetchone()
        vazio = not tem_registros
        # Trocar a key so numa carga completa (com sync): o `complete` dela
        # remove os registros guardados pela key antiga. Fora disso, misturar
        # as duas duplicaria cada registro.
        if (
            cabecalho.recebidos
            and chave != chave_guardada
            and cabecalho.sync_id is None
            and not vazio
        ):
            raise ErroRegra(
                409,
                'key_diferente',
                'o dataset %r guarda registros por key=%r e este lote veio com key=%r.'
                ' Misturar as duas duplicaria registros. Se a key mudou de verdade,'
                ' rode uma carga completa (sync + complete) com a nova: ela substitui'
                ' os registros antigos. Senão, corrija a `key` no mapeamento.'
                % (dataset, chave_guardada, chave),
            )
        # Lote so com `remove` (sem registros) usa a key que o dataset ja tem.
        chave_do_dataset = chave if cabecalho.recebidos else (chave or chave_guardada)
        if cabecalho.remover and chave_do_dataset is None:
            raise ErroRegra(
                422,
                'remove_sem_key',
                'remove: só existe para dataset com `key` (o servidor remove'
                ' pela chave). Envie o envelope com key.',
            )
        return chave_do_dataset, vazio

    @staticmethod
    def _abrir_versao(
        con: sqlite3.Connection, projeto_id: int, cabecalho: _Cabecalho, recebido_em: str
    ) -> int:
        """O número do lote, a versão de tudo que ele grava; o primeiro de um sync o registra."""
        sync, sync_id = cabecalho.sync, cabecalho.sync_id
        versao = con.execute(
            'INSERT INTO lotes (projeto_id, dataset, sync_id, parte, recebido_em)'
            ' VALUES (?, ?, ?, ?, ?)',
            (projeto_id, cabecalho.dataset, sync_id, sync['part'] if sync else None, recebido_em),
        ).lastrowid
        assert versao is not None  # INSERT numa tabela com rowid
        if sync_id is not None:
            con.execute(
                'INSERT OR IGNORE INTO syncs (projeto_id, dataset, sync_id,'
                ' primeiro_lote) VALUES (?, ?, ?, ?)',
                (projeto_id, cabecalho.dataset, sync_id, versao),
            )
        return versao

    @staticmethod
    def _gravar_registros(
        con: sqlite3.Connection,
        projeto_id: int,
        cabecalho: _Cabecalho,
        versao: int,
        lote: Lote,
        vazio: bool,
    ) -> dict[str, int]:
        """Os registros do lote: em bloco se nenhuma key se repete, senão um a um."""
        dataset, sync_id, idents = cabecalho.dataset, cabecalho.sync_id, lote.idents
        distintos = set(idents)
        if len(distintos) == len(idents):
            return Banco._gravar_em_bloco(con, projeto_id, dataset, versao, sync_id, lote, vazio)
        return Banco._gravar_com_repetidos(
            con,
            projeto_id,
            dataset,
            versao,
            sync_id,
            lote,
            {} if vazio else _existentes(con, projeto_id, dataset, distintos),
        )

    @staticmethod
    def _remover(con: sqlite3.Connection, projeto_id: int, cabecalho: _Cabecalho) -> int:
        """O `remove` do lote, depois dos registros: quantos dos pedidos existiam."""
        removidos = 0
        for valor in cabecalho.remover or ():
            removidos += con.execute(
                'DELETE FROM registros WHERE projeto_id = ? AND dataset = ? AND ident = ?',
                (projeto_id, cabecalho.dataset, *_idents_da_key([valor])),
            ).rowcount
        return removidos

    # Sem sync, o registro guarda o sync em que foi visto por ultimo (COALESCE):
    # um envio incremental no meio de uma carga nao pode desmarcar o que a carga
    # ja viu. Igual ou mudado: o corpo canônico comparado byte a byte (é ele que
    # é guardado).
    @staticmethod
    def _gravar_em_bloco(
        con: sqlite3.Connection,
        projeto_id: int,
        dataset: str,
        versao: int,
        sync_id: str | None,
        lote: Lote,
        vazio: bool,
    ) -> dict[str, int]:
        """
        O lote sem key repetida. Na carga nova, um INSERT de muitas linhas por vez
        que pula o que já existe (ON CONFLICT DO NOTHING); só se algum já existia,
        ele é lido -- o que tem outra versão que a deste lote. No reenvio (o
        primeiro registro do lote já existe: a carga de todo dia), o que existe é
        lido ANTES e só o novo é inserido: uma busca no índice por registro, não
        duas (1,5× mais rápido no reenvio, medido em `gravar_lote`; perguntar
        antes na carga nova custaria a busca a mais). Os iguais são tocados por
        um UPDATE por id, os mudados pelo id.
        """
        idents, corpos = lote.idents, lote.corpos
        constantes = (projeto_id, dataset, versao, sync_id)
        if not vazio and _existentes(con, projeto_id, dataset, idents[:1]):
            posicoes = _posicoes(idents)
            existentes = _existentes(con, projeto_id, dataset, posicoes)
            novos = [posicao for posicao, ident in enumerate(idents) if ident not in existentes]
            inseridos = _inserir(
                con,
                constantes,
                [idents[p] for p in novos],
                [lote.hashes[p] for p in novos] if lote.hashes else None,
                [corpos[p] for p in novos],
                pular_existentes=True,
            )
        else:
            inseridos = _inserir(
                con, constantes, idents, lote.hashes, corpos, pular_existentes=not vazio
            )
            if inseridos == len(idents):
                return {'inserted': inseridos, 'updated': 0, 'duplicates': 0}
            posicoes = _posicoes(idents)
            existentes = _existentes(con, projeto_id, dataset, posicoes, fora_da_versao=versao)
        atualizar: list[tuple[str, bytearray, int, str | None, int]] = []
        tocar: list[int] = []
        for ident, (guardado, rowid) in existentes.items():
            posicao = posicoes[ident]
            if guardado == corpos[posicao]:
                tocar.append(rowid)
            else:
                atualizar.append(
                    (
                        lote.hashes[posicao] if lote.hashes else '',
                        corpos[posicao],
                        versao,
                        sync_id,
                        rowid,
                    )
                )
        for inicio in range(0, len(tocar), _IDS_POR_COMANDO):
            parte_ids = tocar[inicio : inicio + _IDS_POR_COMANDO]
            con.execute(
                'UPDATE registros SET versao = ?, ultimo_sync = COALESCE(?, ultimo_sync)'
                ' WHERE id IN (%s)' % ','.join('?' * len(parte_ids)),
                [versao, sync_id, *parte_ids],
            )
        con.executemany(
            'UPDATE registros SET hash = ?, corpo = ?, versao = ?,'
            ' ultimo_sync = COALESCE(?, ultimo_sync) WHERE id = ?',
            atualizar,
        )
        return {'inserted': inseridos, 'updated': len(atualizar), 'duplicates': len(tocar)}

    @staticmethod
    def _gravar_com_repetidos(
        con: sqlite3.Connection,
        projeto_id: int,
        dataset: str,
        versao: int,
        sync_id: str | None,
        lote: Lote,
        existentes: dict[str, tuple[bytes, int]],
    ) -> dict[str, int]:
        """
        O lote com a mesma key mais de uma vez: registro a registro, na ordem --
        a primeira vez conta contra o guardado, as seguintes contra a anterior
        do próprio lote (e vão para os UPDATE, que rodam depois do INSERT).
        """
        vistos: dict[str, bytes | bytearray] = {
            ident: anterior[0] for ident, anterior in existentes.items()
        }
        inserir, atualizar, tocar = [], [], []
        hashes = lote.hashes or [''] * len(lote.corpos)
        for ident, hash_corpo, corpo in zip(lote.idents, hashes, lote.corpos, strict=True):
            anterior = vistos.get(ident)
            if anterior is None:
                inserir.append((projeto_id, dataset, ident, hash_corpo, corpo, versao, sync_id))
            elif anterior == corpo:
                tocar.append((versao, sync_id, projeto_id, dataset, ident))
            else:
                atualizar.append((hash_corpo, corpo, versao, sync_id, projeto_id, dataset, ident))
            vistos[ident] = corpo
        con.executemany(
            'INSERT INTO registros (projeto_id, dataset, ident, hash, corpo,'
            ' versao, ultimo_sync) VALUES (?, ?, ?, ?, ?, ?, ?)',
            inserir,
        )
        con.executemany(
            'UPDATE registros SET hash = ?, corpo = ?, versao = ?,'
            ' ultimo_sync = COALESCE(?, ultimo_sync)'
            ' WHERE projeto_id = ? AND dataset = ? AND ident = ?',
            atualizar,
        )
        con.executemany(
            'UPDATE registros SET versao = ?, ultimo_sync = COALESCE(?,'
            ' ultimo_sync) WHERE projeto_id = ? AND dataset = ? AND ident = ?',
            tocar,
        )
        return {'inserted': len(inserir), 'updated': len(atualizar), 'duplicates': len(tocar)}

    def _gravar_dataset(
        self,
        con: sqlite3.Connection,
        projeto_id: int,
        envelope: EnvelopeDoLote,
        chave: str | None,
        quando: str,
    ) -> None:
        campos = envelope.get('fields')
        con.execute(
            'INSERT INTO datasets (projeto_id, nome, chave, descricao, campos, grupo,'
            ' atualizado_em) VALUES (?, ?, ?, ?, ?, ?, ?)'
            ' ON CONFLICT (projeto_id, nome) DO UPDATE SET chave = excluded.chave,'
            ' descricao = COALESCE(excluded.descricao, descricao),'
            ' campos = COALESCE(excluded.campos, campos),'
            ' grupo = COALESCE(excluded.grupo, grupo), atualizado_em = excluded.atualizado_em',
            (
                projeto_id,
                envelope['dataset'],
                chave,
                envelope.get('description'),
                json.dumps(campos, ensure_ascii=False) if campos is not None else None,
                envelope.get('group'),
                quando,
            ),
        )

    def completar(
        self, projeto_id: int, dataset: str, sync_id: str, max_remocao: float | None
    ) -> ObjetoJson:
        """
        Fecha a carga: remove do dataset o que o sync não viu. Recusa (e não
        remove nada) se isso passar de `max_remocao` (fração do dataset).
        """
        with self.transacao() as con:
            sync = con.execute(
                'SELECT * FROM syncs WHERE projeto_id = ? AND dataset = ? AND sync_id = ?',
                (projeto_id, dataset, sync_id),
            ).fetchone()
            if sync is None:
                raise ErroRegra(
                    409,
                    'sync_desconhecido',
                    'o sync %r nunca entregou um lote ao dataset %r deste projeto. Completar'
                    ' um sync que não chegou apagaria o dataset inteiro; envie os lotes'
                    ' com este sync antes (mesmo vazio) e complete depois.' % (sync_id, dataset),
                )
            total = con.execute(
                'SELECT COUNT(*) FROM registros WHERE projeto_id = ? AND dataset = ?',
                (projeto_id, dataset),
            ).fetchone()[0]
            # So sai o que o sync nao viu E que nao foi tocado depois que ele
            # comecou: um envio incremental durante a carga traz linha viva.
            filtro = (
                ' FROM registros WHERE projeto_id = ? AND dataset = ?'
                ' AND (ultimo_sync IS NULL OR ultimo_sync <> ?) AND versao < ?'
            )
            parametros = (projeto_id, dataset, sync_id, sync['primeiro_lote'])
            a_remover = con.execute('SELECT COUNT(*)' + filtro, parametros).fetchone()[0]
            if max_remocao is not None and total and a_remover / total > max_remocao:
                raise ErroRegra(
                    409,
                    'remocao_acima_do_teto',
                    'complete recusado: removeria %d de %d registros do dataset %r (%.1f%%),'
                    ' acima do teto de %.1f%%. Nada foi removido. Se a origem realmente'
                    ' perdeu esses registros, repita com um teto maior (--max-remocao);'
                    ' senão, confira a carga (filtro, escopo, view vazia).'
                    % (a_remover, total, dataset, 100.0 * a_remover / total, 100.0 * max_remocao),
                )
            removidos = con.execute('DELETE' + filtro, parametros).rowcount
            con.execute(
                'UPDATE syncs SET completado_em = ?, removidos = COALESCE(removidos, 0)'
                ' + ? WHERE projeto_id = ? AND dataset = ? AND sync_id = ?',
                (agora(), removidos, projeto_id, dataset, sync_id),
            )
        return {
            'dataset': dataset,
            'sync': sync_id,
            'removed': removidos,
            'records_before': total,
            'records': total - removidos,
        }

    # ------------------------------------------------------------------ leitura
    def listar_datasets(self, projeto_id: int) -> list[ObjetoJson]:
        with self.leitura() as con:
            linhas = con.execute(
                'SELECT d.*, (SELECT COUNT(*) FROM registros r WHERE r.projeto_id ='
                ' d.projeto_id AND r.dataset = d.nome) AS total FROM datasets d'
                ' WHERE d.projeto_id = ? ORDER BY d.nome',
                (projeto_id,),
            ).fetchall()
        return [
            {
                'dataset': linha['nome'],
                'records': linha['total'],
                'key': linha['chave'],
                'description': linha['descricao'],
                'fields': json.loads(linha['campos']) if linha['campos'] else None,
                'group': linha['grupo'],
                'updated_at': linha['atualizado_em'],
            }
            for linha in linhas
        ]

    def pagina_de_registros(
        self, projeto_id: int, dataset: str, apos: int, limite: int
    ) -> ObjetoJson:
        with self.leitura() as con:
            linhas = con.execute(
                'SELECT id, corpo FROM registros WHERE projeto_id = ? AND'
                ' dataset = ? AND id > ? ORDER BY id LIMIT ?',
                (projeto_id, dataset, apos, limite),
            ).fetchall()
        proximo = linhas[-1]['id'] if len(linhas) == limite else None
        # O corpo e TEXT nos registros antigos e os bytes UTF-8 do JSON nos novos
        # (gravados como saem do orjson, sem decodificar e recodificar).
        return {'records': [json.loads(linha['corpo']) for linha in linhas], 'next': proximo}


# Linhas por INSERT: os ?NNN de um comando não passam de 32766 (o padrão do
# SQLITE_LIMIT_VARIABLE_NUMBER desde o 3.32; os mais antigos, 999, são lidos
# na conexão).
_LINHAS_POR_INSERT = 500
# Valores por `IN (...)` das leituras e dos UPDATE por id (abaixo do limite de
# variáveis do SQLite com folga).
_IDS_POR_COMANDO = 500
# As constantes do lote (?1..?4) ligadas uma vez por comando; por linha só
# ident e corpo (e o hash, sem key). Eram 7 parâmetros por linha.
_CONSTANTES = 4


@functools.lru_cache(maxsize=64)
def _sql_inserir(linhas: int, com_hash: bool, pular_existentes: bool) -> str:
    por_linha = 3 if com_hash else 2
    modelo = '(?1,?2,?%d,?%d,?%d,?3,?4)' if com_hash else "(?1,?2,?%d,'',?%d,?3,?4)"
    return (
        'INSERT INTO registros (projeto_id, dataset, ident, hash, corpo, versao,'
        ' ultimo_sync) VALUES '
        + ','.join(
            modelo % tuple(range(i, i + por_linha))
            for i in range(_CONSTANTES + 1, _CONSTANTES + 1 + por_linha * linhas, por_linha)
        )
        + (' ON CONFLICT (projeto_id, dataset, ident) DO NOTHING' if pular_existentes else '')
    )


def _inserir(
    con: sqlite3.Connection,
    constantes: tuple[int, str, int, str | None],
    idents: list[str],
    hashes: list[str] | None,
    corpos: list[bytearray],
    pular_existentes: bool,
) -> int:
    """
    INSERT das linhas, `_LINHAS_POR_INSERT` por comando; devolve quantas entraram.
    `pular_existentes`: a que já existe (mesma identidade) fica como está.
    """
    por_linha = 2 if hashes is None else 3
    por_vez = min(
        _LINHAS_POR_INSERT,
        (con.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) - _CONSTANTES) // por_linha,
    )
    inseridos = 0
    for inicio in range(0, len(idents), por_vez):
        fim = min(inicio + por_vez, len(idents))
        # Os parâmetros intercalados por fatias (em C), sem um laço por linha.
        parametros: list[int | str | bytearray | None] = [
            *constantes,
            *([None] * (por_linha * (fim - inicio))),
        ]
        parametros[_CONSTANTES::por_linha] = idents[inicio:fim]
        if hashes is not None:
            parametros[_CONSTANTES + 1 :: por_linha] = hashes[inicio:fim]
        parametros[_CONSTANTES + por_linha - 1 :: por_linha] = corpos[inicio:fim]
        inseridos += con.execute(
            _sql_inserir(fim - inicio, hashes is not None, pular_existentes), parametros
        ).rowcount
    return inseridos


def _existentes(
    con: sqlite3.Connection,
    projeto_id: int,
    dataset: str,
    idents: Collection[str],
    fora_da_versao: int | None = None,
) -> dict[str, tuple[bytes, int]]:
    """
    ident -> (corpo, id) dos `idents` já guardados (os da versão `fora_da_versao`,
    a do lote que acabou de inseri-los, não). Cursor sem Row: uma tupla basta.
    """
    cursor = con.cursor()
    cursor.row_factory = None
    lista = list(idents)
    existentes = {}
    filtro, extra = ('', []) if fora_da_versao is None else (' AND versao <> ?', [fora_da_versao])
    for inicio in range(0, len(lista), _IDS_POR_COMANDO):
        parte = lista[inicio : inicio + _IDS_POR_COMANDO]
        for ident, guardado, rowid in cursor.execute(
            'SELECT ident, corpo, id FROM registros WHERE projeto_id = ? AND dataset = ?'
            ' AND ident IN (%s)%s' % (','.join('?' * len(parte)), filtro),
            [projeto_id, dataset, *parte, *extra],
        ):
            # TEXT nas linhas antigas, os bytes UTF-8 nas novas.
            existentes[ident] = (
                guardado if type(guardado) is bytes else guardado.encode('utf-8'),
                rowid,
            )
    return existentes


def _preparar(
    registros: list[Registro], chave: str | None, simples: bool = False
) -> tuple[list[str], list[str] | None, list[bytearray]]:
    """
    (idents, hashes, corpos) dos registros: o JSON canônico de cada um (em UTF-8,
    guardado como está) e a identidade (`k:` + a key canônica, ou `h:` + o
    sha256 do corpo sem key; o sha256 só é calculado aí). Levanta ErroRegra
    para registro sem a key.

    Cada passo é um laço em C sobre o lote inteiro: o lote comum (registros
    de valores simples, key inteira) não tem laço Python por registro.
    `simples`: quem leu o lote já sabe que ele é `registros_simples`.
    """
    # bytearray: `bytes` passa pelo protocolo de adaptação do sqlite3 (procura
    # __conform__, cria e descarta um AttributeError) a cada parâmetro -- custava
    # mais que a cópia. Comparado com o guardado (bytes), o conteúdo é o que conta.
    corpos = list(map(bytearray, _corpos(registros, simples)))
    if chave is None:
        sha256 = hashlib.sha256
        hashes = [sha256(corpo).hexdigest() for corpo in corpos]
        return ['h:' + h for h in hashes], hashes, corpos
    valores: list[Json] = list(map(dict.get, registros, itertools.repeat(chave)))
    if None in valores:
        posicao = next(i for i, valor in enumerate(valores) if valor is None)
        raise ErroRegra(
            422,
            'key_ausente',
            'records[%d].%s: o registro não tem o campo de key %r'
            ' (ou ele é null). Envie o campo ou mande o dataset'
            ' sem key.' % (posicao, chave, chave),
        )
    return _idents_da_key(valores), None, corpos


def _posicoes(idents: list[str]) -> dict[str, int]:
    """ident -> posição no lote (só quando algum já existia: a carga nova não usa)."""
    return {ident: posicao for posicao, ident in enumerate(idents)}


def _idents_da_key(valores: list[Json]) -> list[str]:
    """A identidade de cada valor de key: `k:` + o JSON canônico dele."""
    # int: o JSON dele é o repr (bool não entra: type exato).
    if set(map(type, valores)) == {int}:
        return ['k:%d' % valor for valor in cast(list[int], valores)]
    return [
        'k:%d' % valor if type(valor) is int else 'k:' + canonico_bytes(valor).decode('utf-8')
        for valor in valores
    ]


def registros_simples(registros: list[JsonDecodificado]) -> bool:
    """
    Se todo registro é um objeto só de valores simples (texto, inteiro,
    booleano, null): o lote cujo canônico o orjson escreve de uma vez. Um laço
    em C pelos valores de todos os registros.
    """
    try:
        return _SIMPLES.issuperset(
            map(type, itertools.chain.from_iterable(map(dict.values, registros)))
        )
    except TypeError:  # um registro que não é dict
        return False


def _corpos(registros: list[Registro], simples: bool) -> list[bytes]:
    """O `canonico_bytes` de cada registro; o lote simples de uma vez."""
    if simples or registros_simples(registros):
        dumps = orjson.dumps
        try:
            return [dumps(registro, option=_ORDENADO) for registro in registros]
        except orjson.JSONEncodeError:  # inteiro além de 64 bits, surrogate solto
            pass
    return [canonico_bytes(registro) for registro in registros]


def _so_do_dono(caminho: str) -> None:
    """
    O banco guarda os segredos dos webhooks: nasce 0600, e um banco antigo 0644
    e corrigido. O SQLite cria o -wal e o -shm com o modo do banco, então os
    dois também ficam 0600; os que já existem são corrigidos aqui.
    """
    descritor = os.open(caminho, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.fchmod(descritor, 0o600)
    finally:
        os.close(descritor)
    for sufixo in ('-wal', '-shm', '-journal', SUFIXO_DA_TRAVA):
        with contextlib.suppress(FileNotFoundError):
            os.chmod(caminho + sufixo, 0o600)


def _projeto(linha: sqlite3.Row) -> Projeto:
    return {
        'id': linha['id'],
        'external_id': linha['external_id'],
        'name': linha['nome'],
        'criado_em': linha['criado_em'],
    }
