"""
Uma fila durável entre processos: um diretório, e o estado de cada item e a
pasta onde ele está (o seed 004).

    <raiz>/pronto/   esperando quem o tome, em ordem de chegada
    <raiz>/tomado/   alguém o tomou e esta entregando agora
    <raiz>/parado/   não anda sozinho (recusado de vez): espera uma pessoa ou
                     um reenvio pedido -- a quarentena e esta parte
    entregue         o arquivo e apagado: quem guarda o dado e o destino

Por que um diretório e não memória, socket ou banco: sobrevive ao processo,
não pede porta nem dependência, e a atomicidade vem do sistema de arquivos --
um rename no mesmo volume e atômico, então um item esta sempre em exatamente
uma pasta. Conteúdo novo entra por `gravar_atomico` (temporário + fsync +
rename): um leitor vê o arquivo antigo ou o novo, nunca metade.

O nome do arquivo e `<sequência de 12 dígitos>-<chave>.json`. A sequência da a
ordem (nomes ordenam como texto; sem os zeros o decimo viria antes do
segundo). A chave e a identidade: por de novo a mesma chave substitui o
conteúdo no lugar, não duplica -- o ouvinte relê a mesma linha a cada ciclo
dentro da folga, e cada releitura não pode virar um item a mais. A chave vira
parte do nome, por isso só [A-Za-z0-9._-], com ponta alfanumerica (sem '..',
sem '/', sem arquivo oculto); o valor verdadeiro mora dentro do arquivo.

Limitada em itens e em bytes: cheia, `por` levanta ErroFilaCheia e não
descarta nada -- quem chama decide (a quarentena faz o lote falhar e a marca
ficar). Nunca um limite silencioso.

Destino desconhecido: um item em tomado/ quando ninguém trabalha na fila e de
um processo que morreu no meio da entrega -- pode ter chegado, pode não ter. O
seed 004 o para em stuck/ porque la reenviar duplicaria uma mensagem a um
comprador. Aqui o destino e o intake, que é idempotente (upsert por key,
deduplicação por hash sem key): reenviar da o mesmo estado final. Por isso o
dono da fila diz para onde o item volta (`devolver_tomados_para`), e cada um e
NOMEADO no log ao abrir -- nunca movido em silêncio.

Quem trabalha (toma itens) segura a trava `.trabalho` durante todo o passe
(`trabalhando()`); o kernel solta a trava se o processo morrer. Abrir a fila
só devolve os tomados se conseguir essa trava: os itens tomados por um
processo vivo não são de destino desconhecido. Mudanças curtas (por, tomar,
devolver) passam pela trava `.trava`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from contextia_sync.arquivos import GravacaoAtomica, fsync_pasta, gravar_atomico
from contextia_sync.erros import ErroConfiguracao
from contextia_sync.tipos import Json, JsonDecodificado

PRONTO = 'pronto'
TOMADO = 'tomado'
PARADO = 'parado'
ESTADOS = (PRONTO, TOMADO, PARADO)

LARGURA_SEQUENCIA = 12
"""Dígitos da sequência no nome do arquivo (zeros a esquerda: a ordem e a do texto)."""

PADRAO_CHAVE = re.compile(r'^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,118}[A-Za-z0-9])?$')
"""O que uma chave pode ter: vira parte do nome do arquivo."""

_NOME = re.compile(r'^(\d{%d})-(.+)\.json$' % LARGURA_SEQUENCIA)
_TRAVA = '.trava'
_TRABALHO = '.trabalho'


class ErroFila(Exception):
    """A fila recusou uma operação."""


class ErroFilaCheia(ErroFila):
    """A fila chegou ao limite de itens ou de bytes; nada foi descartado."""

    def __init__(
        self, mensagem: str, *, itens: int, ocupados: int, maximo_itens: int, maximo_bytes: int
    ) -> None:
        super().__init__(mensagem)
        self.itens = itens
        self.ocupados = ocupados
        self.maximo_itens = maximo_itens
        self.maximo_bytes = maximo_bytes


class ErroFilaOcupada(ErroFila):
    """Outro processo está trabalhando nesta fila agora."""


class ErroFilaInacessivel(ErroFila, ErroConfiguracao):
    """A pasta da fila não pode ser criada ou escrita (erro de configuração: saída 2)."""


def parte_segura(valor: object, limite: int = 40) -> str:
    """Um pedaco de chave para o nome do arquivo: só [A-Za-z0-9._-], pontas alfanumericas."""
    texto = re.sub(r'[^A-Za-z0-9._-]+', '_', str(valor))[:limite]
    texto = re.sub(r'^[^A-Za-z0-9]+|[^A-Za-z0-9]+$', '', texto)
    return texto or 'x'


def _mib(quantidade: int) -> str:
    return '%.1f MiB' % (quantidade / (1024 * 1024))


def _conferir_lote(itens: Sequence[tuple[str, str]], estado: str) -> None:
    """ValueError no lote que não se grava: chave que não vira nome, estado de entrada, repetida."""
    for chave, _ in itens:
        if not PADRAO_CHAVE.fullmatch(chave):
            raise ValueError(
                'chave %r não serve para nome de arquivo (só [A-Za-z0-9._-],'
                ' pontas alfanumericas, até 120)' % (chave,)
            )
    if estado not in (PRONTO, PARADO):
        raise ValueError('estado %r: itens entram em PRONTO ou PARADO' % (estado,))
    if len({chave for chave, _ in itens}) != len(itens):
        raise ValueError('por_lote: chave repetida no mesmo lote')


@dataclass(frozen=True)
class ItemDaFila:
    """Um arquivo da fila: onde está agora, a sequência, a chave e o tamanho."""

    caminho: Path
    estado: str
    sequencia: int
    chave: str
    tamanho: int

    def ler(self) -> dict[str, JsonDecodificado] | None:
        """O conteúdo (um objeto JSON), ou None se o arquivo sumiu ou não é legível."""
        try:
            bruto = json.loads(self.caminho.read_text(encoding='utf-8'))
        except (OSError, ValueError, RecursionError):
            return None
        return bruto if isinstance(bruto, dict) else None


class FilaEmDiretorio:
    """
    A fila em `raiz` (criada se falta). Ver o topo do módulo.

    `devolver_tomados_para`: para onde volta, ao abrir, o item achado em
    tomado/ sem ninguém trabalhando (PRONTO para um spool, PARADO para a
    quarentena). `somente_leitura`: não cria nada nem devolve tomados (para o
    status lido por outro processo); contar e listar funcionam igual.
    """

    def __init__(
        self,
        raiz: str | os.PathLike[str],
        *,
        maximo_itens: int,
        maximo_bytes: int,
        devolver_tomados_para: str = PRONTO,
        rotulo: str = 'fila',
        logger: logging.Logger | None = None,
        somente_leitura: bool = False,
    ) -> None:
        if maximo_itens < 1 or maximo_bytes < 1:
            # Zero leria como "nao aceita nada"; sem limite, a fila comeria o disco.
            raise ValueError(
                'limites da %s: itens e bytes precisam ser positivos (%r, %r)'
                % (rotulo, maximo_itens, maximo_bytes)
            )
        if devolver_tomados_para not in (PRONTO, PARADO):
            raise ValueError(
                'devolver_tomados_para: %r (use PRONTO ou PARADO)' % (devolver_tomados_para,)
            )
        self._raiz = Path(raiz)
        self._maximo_itens = maximo_itens
        self._maximo_bytes = maximo_bytes
        self._volta = devolver_tomados_para
        self._rotulo = rotulo
        if logger is None:
            from contextia_sync.registro import logger as do_sdk

            logger = do_sdk
        self._log = logger
        self._trabalhando = False
        # Os itens achados em tomado/ ao abrir (destino desconhecido): o log os
        # nomeia, e quem e dono da fila os mostra tambem no status.
        self.devolvidos: list[str] = []
        if somente_leitura:
            return
        try:
            for estado in ESTADOS:
                (self._raiz / estado).mkdir(parents=True, exist_ok=True)
            self._recuperar_tomados()
        except OSError as erro:
            raise ErroFilaInacessivel(
                'a pasta da %s (%s) não pode ser criada ou escrita: %s. Ela guarda o que'
                ' não pode se perder entre dois ciclos; de ao usuário do serviço permissão'
                ' de escrita nela (ou aponte --estado para uma pasta gravável) e espaço'
                ' em disco.' % (rotulo, self._raiz, erro)
            ) from None

    # ------------------------------------------------------------ leitura
    @property
    def raiz(self) -> Path:
        """A pasta da fila."""
        return self._raiz

    @property
    def maximo_itens(self) -> int:
        """Quantos itens a fila aceita antes de recusar."""
        return self._maximo_itens

    @property
    def maximo_bytes(self) -> int:
        """Quantos bytes a fila ocupa antes de recusar."""
        return self._maximo_bytes

    def itens(self, estado: str | None = None) -> list[ItemDaFila]:
        """Os itens (de um estado, ou de todos), em ordem de sequência."""
        achados = []
        for nome_estado in ESTADOS if estado is None else (estado,):
            pasta = self._raiz / nome_estado
            try:
                nomes = os.listdir(pasta)
            except (FileNotFoundError, NotADirectoryError):
                continue
            for nome in nomes:
                # Temporarios de gravar_atomico comecam com '.' e nao casam.
                casado = _NOME.match(nome)
                if casado is None:
                    continue
                caminho = pasta / nome
                try:
                    tamanho = caminho.stat().st_size
                except FileNotFoundError:
                    continue
                achados.append(
                    ItemDaFila(caminho, nome_estado, int(casado.group(1)), casado.group(2), tamanho)
                )
        achados.sort(key=lambda item: (item.sequencia, item.estado))
        return achados

    def contar(self, estado: str | None = None) -> int:
        """Quantos itens há (num estado, ou em todos)."""
        return len(self.itens(estado))

    def bytes_ocupados(self) -> int:
        """Bytes dos arquivos de todos os estados."""
        return sum(item.tamanho for item in self.itens())

    # ------------------------------------------------------------ travas
    @contextlib.contextmanager
    def _travado(self, nome: str, esperar: bool = True) -> Iterator[bool]:
        """flock exclusivo em `<raiz>/<nome>`; rende False se não `esperar` e outro a tem."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            yield True
            return
        with open(self._raiz / nome, 'a+', encoding='utf-8') as arquivo:
            try:
                fcntl.flock(arquivo.fileno(), fcntl.LOCK_EX | (0 if esperar else fcntl.LOCK_NB))
                livre = True
            except BlockingIOError:
                livre = False
            if not livre:
                yield False
                return
            try:
                yield True
            finally:
                fcntl.flock(arquivo.fileno(), fcntl.LOCK_UN)

    @contextlib.contextmanager
    def trabalhando(self) -> Iterator[None]:
        """
        Dentro do `with`, este processo e quem toma itens (trava `.trabalho`).

        Levanta ErroFilaOcupada se outro processo já trabalha na fila: dois
        entregando os mesmos itens mandariam cada um duas vezes.
        """
        if self._trabalhando:
            yield
            return
        with self._travado(_TRABALHO, esperar=False) as livre:
            if not livre:
                raise ErroFilaOcupada(
                    'outro processo está trabalhando na %s (%s) agora (trava %s). Espere'
                    ' ele terminar; se ele morreu, a trava já foi solta pelo sistema.'
                    % (self._rotulo, self._raiz, self._raiz / _TRABALHO)
                )
            self._trabalhando = True
            try:
                yield
            finally:
                self._trabalhando = False

    # ------------------------------------------------------------ escrita
    def por(
        self, chave: str, conteudo: Mapping[str, Json], *, estado: str = PRONTO
    ) -> tuple[Path, bool]:
        """
        Grava o item `chave` em `estado`; devolve (caminho, novo).

        Chave que já está em `estado` (ou tomada agora) tem o conteúdo trocado
        no mesmo arquivo, com a mesma sequência: novo=False. Levanta
        ErroFilaCheia se o item novo passaria do limite de itens ou de bytes.
        """
        texto = (
            json.dumps(
                dict(conteudo), ensure_ascii=False, sort_keys=True, indent=1, allow_nan=False
            )
            + '\n'
        )
        return self.por_lote([(chave, texto)], estado=estado)[0]

    def por_lote(
        self, itens: Sequence[tuple[str, str]], *, estado: str = PRONTO
    ) -> list[tuple[Path, bool]]:
        """
        Grava vários itens de uma vez: (chave, texto JSON de um objeto) cada um.

        A pasta é listada UMA vez para o lote inteiro (não uma por item), cada
        arquivo tem o seu fsync e a pasta um só no fim, depois de todos os
        renames: quem chama pode contar com o lote inteiro no disco quando isto
        volta. Tudo ou nada no limite: se o lote não cabe, ErroFilaCheia e nada
        foi gravado. Cada chave segue a regra de `por` (a que já existe troca o
        conteúdo no lugar, com a mesma sequência).
        """
        _conferir_lote(itens, estado)
        tamanhos = [len(texto.encode('utf-8')) for _, texto in itens]
        with self._travado(_TRAVA):
            todos = self.itens()
            no_estado = {i.chave: i for i in todos if i.estado == estado}
            tomados = {i.chave: i for i in todos if i.estado == TOMADO}
            substituidos = [no_estado[c] for c, _ in itens if c in no_estado]
            self._recusar_se_nao_cabe(todos, substituidos, tamanhos)
            proxima = max((i.sequencia for i in todos), default=0) + 1
            feitos: list[tuple[Path, bool]] = []
            gravacoes: list[GravacaoAtomica] = []
            try:
                for chave, texto in itens:
                    if chave in no_estado:
                        nome = no_estado[chave].caminho.name
                    elif chave in tomados:
                        # A versao nova fica com a sequencia da tomada; quem a tomou
                        # ve que ja ha uma mais nova ao devolver.
                        nome = tomados[chave].caminho.name
                    else:
                        nome = '%0*d-%s.json' % (LARGURA_SEQUENCIA, proxima, chave)
                        proxima += 1
                    caminho = self._raiz / estado / nome
                    gravacao = GravacaoAtomica(str(caminho))
                    gravacoes.append(gravacao)
                    gravacao.escrever(texto)
                    gravacao.fechar()  # o fsync do conteudo, um por arquivo
                    feitos.append((caminho, chave not in no_estado))
                for gravacao in gravacoes:
                    os.replace(gravacao.temporario, gravacao.caminho)
            except BaseException:
                for gravacao in gravacoes:
                    gravacao.desistir()
                raise
            if gravacoes:
                fsync_pasta(self._raiz / estado)  # um so para todos os renames
        return feitos

    def _recusar_se_nao_cabe(
        self, todos: list[ItemDaFila], substituidos: list[ItemDaFila], tamanhos: list[int]
    ) -> None:
        """ErroFilaCheia se o lote passaria do limite (o item substituído sai da conta)."""
        ocupados = sum(i.tamanho for i in todos) - sum(i.tamanho for i in substituidos)
        quantos = len(todos) - len(substituidos)
        if (
            quantos + len(tamanhos) <= self._maximo_itens
            and ocupados + sum(tamanhos) <= self._maximo_bytes
        ):
            return
        raise ErroFilaCheia(
            '%s cheia em %s: %d item(ns), %s (limite %d itens, %s); %s não foi'
            ' guardado'
            % (
                self._rotulo,
                self._raiz,
                len(todos),
                _mib(ocupados),
                self._maximo_itens,
                _mib(self._maximo_bytes),
                'este item (%s)' % _mib(sum(tamanhos))
                if len(tamanhos) == 1
                else 'este lote (%d itens, %s)' % (len(tamanhos), _mib(sum(tamanhos))),
            ),
            itens=len(todos),
            ocupados=ocupados,
            maximo_itens=self._maximo_itens,
            maximo_bytes=self._maximo_bytes,
        )

    def tomar(self, item: ItemDaFila) -> ItemDaFila | None:
        """Move `item` para tomado/ (só dentro de `trabalhando()`); None se ele já saiu."""
        if not self._trabalhando:
            raise RuntimeError(
                'tomar() só dentro de trabalhando(): sem a trava, abrir a'
                ' fila em outro processo devolveria o item no meio da entrega'
            )
        destino = self._raiz / TOMADO / item.caminho.name
        with self._travado(_TRAVA):
            try:
                os.rename(item.caminho, destino)
            except FileNotFoundError:
                return None
        fsync_pasta(destino.parent)
        return ItemDaFila(destino, TOMADO, item.sequencia, item.chave, item.tamanho)

    def proximo(self, estado: str = PRONTO) -> ItemDaFila | None:
        """Toma o item mais antigo de `estado`; None se não há."""
        for item in self.itens(estado):
            tomado = self.tomar(item)
            if tomado is not None:
                return tomado
        return None

    def concluir(self, item: ItemDaFila) -> None:
        """Entregue: apaga o arquivo (o destino guarda o dado). Sumido já é concluido."""
        with self._travado(_TRAVA):
            try:
                item.caminho.unlink()
            except FileNotFoundError:
                pass

    def devolver(
        self, item: ItemDaFila, estado: str, conteudo: Mapping[str, Json] | None = None
    ) -> Path | None:
        """
        Volta um item tomado para `estado`, com `conteudo` novo se dado.

        Se enquanto ele estava tomado entrou uma versão mais nova da mesma chave
        em `estado`, a mais nova fica e a tomada e apagada. Devolve o caminho
        final, ou None se o item sumiu enquanto tomado (foi superado e apagado).
        """
        destino = self._raiz / estado / item.caminho.name
        with self._travado(_TRAVA):
            if destino.exists():
                with contextlib.suppress(FileNotFoundError):
                    item.caminho.unlink()
                return destino
            if not item.caminho.exists():
                return None
            if conteudo is not None:
                gravar_atomico(
                    str(item.caminho),
                    json.dumps(
                        dict(conteudo),
                        ensure_ascii=False,
                        sort_keys=True,
                        indent=1,
                        allow_nan=False,
                    )
                    + '\n',
                )
            try:
                os.rename(item.caminho, destino)
            except FileNotFoundError:
                return None
        fsync_pasta(destino.parent)
        return destino

    # ------------------------------------------------------------ abrir
    def _recuperar_tomados(self) -> None:
        """O que está em tomado/ sem ninguém trabalhando volta, nomeado no log."""
        with self._travado(_TRABALHO, esperar=False) as livre:
            if not livre:
                return  # outro processo vivo esta entregando esses itens
            with self._travado(_TRAVA):
                for estado in ESTADOS:
                    pasta = self._raiz / estado
                    for nome in os.listdir(pasta):
                        # Temporario de uma gravacao que morreu antes do rename.
                        if nome.startswith('.') and nome.endswith('.tmp'):
                            with contextlib.suppress(FileNotFoundError):
                                (pasta / nome).unlink()
                for item in self.itens(TOMADO):
                    destino = self._raiz / self._volta / item.caminho.name
                    if destino.exists():
                        item.caminho.unlink()
                        self._log.warning(
                            '%s: %s estava em %s/ (destino desconhecido: o processo que o'
                            ' tomou morreu no meio) e já há versão mais nova em %s/; a'
                            ' tomada foi descartada',
                            self._rotulo,
                            item.caminho.name,
                            TOMADO,
                            self._volta,
                        )
                        continue
                    os.rename(item.caminho, destino)
                    self.devolvidos.append(item.caminho.name)
                    self._log.warning(
                        '%s: %s estava em %s/ sem ninguém trabalhando -- o processo que o'
                        ' tomou morreu no meio da entrega e o destino e desconhecido (pode'
                        ' ter chegado ou não). Devolvido a %s/: o intake é idempotente e'
                        ' reenviar da o mesmo estado final.',
                        self._rotulo,
                        item.caminho.name,
                        TOMADO,
                        self._volta,
                    )
                fsync_pasta(self._raiz / self._volta)
