"""
As linhas que o intake não recebe como vêm: a `key` nula e a `key` repetida.

A regra mora aqui, pura, e os três caminhos a seguem: a carga de uma empresa
(`carga/completa.py`), a de todas (`carga/todas.py`) e o ao-vivo
(`ouvinte/dados.py`; a `coluna` conta as da janela dela). O texto de cada uma
também: o log, o status e os secos dizem as duas com as mesmas palavras.

Key nula -- a view com LEFT JOIN devolve a linha sem o par, e a key vem NULL.
O intake recusa o registro (422 `records[i].<key>`) e, numa carga, o lote
inteiro: o dataset todo ficava sem `complete`. Aqui a linha fica de fora,
contada por empresa e dita por dataset (`texto_chaves_nulas`:
"N linha(s) com a key nula em <dataset>"); o resto segue e a carga fecha.

Key repetida -- duas linhas com a mesma key que vão ao MESMO projeto: a mesma
empresa pelo `texto_escopo` ('297' e ' 297' são a empresa 297), ou qualquer par
num dataset de domínio (ele vai inteiro a cada empresa). A mesma key em duas
empresas NÃO é repetida: a key é única dentro de cada empresa
(docs/mapeamento.md) e cada empresa é um projeto, onde as duas nunca se
encontram. A linha marcada como apagada (`deleted_when`) também não conta: a
viva vence a marcada antes (`origem/marca_apagada.py: escolher`), e a carga
nem lê a marcada. A regra vale depois daquela.

A regra: vai UMA linha, a primeira pelo conteúdo como o SDK o serializa (o JSON
canônico do registro: colunas em ordem de nome, cada valor como vai ao intake),
comparado em ordem de code point; as outras ficam de fora, nomeadas com a
empresa de cada uma na view e a key. Não depende da ordem de leitura: a carga
(sem ORDER BY) e o ao-vivo (que relê a key inteira) escolhem a mesma linha, e o
Contextia fica com o registro que a varredura deixaria. Recusar as duas e
remover a key seria remover um registro que existe no ERP: uma remoção errada é
pior que uma atrasada.

Numa leitura inteira (a carga) não se guarda a key de cada linha para achar as
repetidas (a memória cresceria com a view): quem chama pergunta à origem antes
quais pares (empresa, key) se repetem (`chaves_repetidas` do adaptador, um
GROUP BY) e só as linhas desses pares esperam o fim da leitura (`suspeitas`).
No ao-vivo a leitura é pequena: todas esperam (`suspeitas=None`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar, cast

from contextia_sync.escopos import texto_escopo
from contextia_sync.intake.serializacao import json_canonico, serializar_registro, valor_json
from contextia_sync.tipos import ValorDoBanco

# Pares (empresa, key) repetidos que uma carga resolve. Acima disto a key do
# mapeamento não identifica a linha (a coluna errada): a carga do dataset é
# recusada com a correção, em vez de guardar meia view na memória.
LIMITE_REPETIDAS = 1000
# Quantas repetidas uma mensagem (a linha do conector, o status) nomeia; todas são contadas.
NOMEADAS = 5

Empresa = str | None
"""A empresa (o `texto_escopo` da coluna de escopo); None no dataset de domínio."""
L = TypeVar('L', bound=Mapping[str, ValorDoBanco])


def texto_chaves_nulas(quantas: int, dataset: str) -> str:
    """O texto de sempre da key nula: o log, o status e os secos dizem assim."""
    return '%d linha(s) com a key nula em %s' % (quantas, dataset)


def aviso_das_nulas(quantas: int, dataset: str) -> str:
    """A key nula com o que foi feito e a correção: o log e a linha do conector."""
    return (
        '%s ficaram de fora: a view não lhes dá key (um LEFT JOIN sem par?) e o intake'
        ' recusaria o registro; o resto do dataset vai ao Contextia -- corrija a view'
        ' para toda linha ter key' % texto_chaves_nulas(quantas, dataset)
    )


def identidade_da_chave(valor: ValorDoBanco) -> str:
    """A key como o intake a identifica: o JSON canônico do valor que vai no registro."""
    try:
        return json_canonico(valor_json(valor, 'key'))
    except ValueError:
        return repr(valor)


def chave_solta(valor: ValorDoBanco) -> str:
    """
    A key em texto frouxo (297, Decimal('297') e '297' iguais), para casar a
    linha lida com o par que a origem disse repetido: casar a mais só faz a
    linha esperar o fim da leitura; a escolha usa `identidade_da_chave`.
    """
    return texto_escopo(valor)


def ordem_do_conteudo(linha: Mapping[str, ValorDoBanco]) -> str:
    """O conteúdo da linha como o SDK o serializa (JSON canônico): a regra o compara."""
    try:
        return json_canonico(serializar_registro(linha))
    except (ValueError, TypeError):
        # Sem JSON (o envio a recusaria): depois de toda linha que tem, pelo repr.
        return '\U0010ffff' + repr(sorted((str(k), repr(v)) for k, v in linha.items()))


def escolher(linhas: Iterable[L]) -> tuple[L, list[L]]:
    """(a linha que vai, as que ficam de fora) de um grupo com a mesma key e empresa."""
    ordenadas = sorted(linhas, key=ordem_do_conteudo)
    return ordenadas[0], ordenadas[1:]


@dataclass(frozen=True)
class Repetida:
    """Uma key repetida num projeto: quem é, as empresas das linhas na view e quantas."""

    dataset: str
    empresa: Empresa
    chave: ValorDoBanco
    linhas: int
    na_view: tuple[str, ...]
    """A empresa das linhas como a view a escreve, sem repetir (repr: ' 297' se vê)."""

    @classmethod
    def do_par(
        cls,
        dataset: str,
        menor: ValorDoBanco,
        maior: ValorDoBanco,
        chave: ValorDoBanco,
        linhas: int,
        dominio: bool,
    ) -> Repetida:
        """A repetida como a origem a contou (`chaves_repetidas` do adaptador)."""
        if dominio:
            return cls(dataset, None, chave, linhas, ('(domínio)',))
        na_view = tuple(dict.fromkeys([repr(menor), repr(maior)]))
        return cls(dataset, texto_escopo(menor), chave, linhas, na_view)

    def texto(self) -> str:
        """A repetida para o operador: a key, a empresa, as linhas e o que foi feito."""
        if self.empresa is None:
            onde = 'no domínio (vai inteiro a toda empresa)'
        else:
            onde = 'na empresa %s' % self.empresa
        return (
            'key %s repetida em %d linhas de %s %s (empresa das linhas na view: %s):'
            ' vai só a primeira pelo conteúdo serializado, as outras ficam de fora --'
            ' corrija a view, a key é única dentro de cada empresa'
            % (
                _texto_da_chave(self.chave),
                self.linhas,
                self.dataset,
                onde,
                ', '.join(self.na_view),
            )
        )


def _texto_da_chave(valor: ValorDoBanco) -> str:
    texto = valor if isinstance(valor, str) else identidade_da_chave(valor)
    texto = repr(texto) if isinstance(valor, str) else texto
    return texto if len(texto) <= 80 else texto[:77] + '...'


def textos_repetidas(repetidas: Iterable[Repetida], limite: int = NOMEADAS) -> list[str]:
    """As primeiras `limite` repetidas em texto, e uma linha com quantas mais há."""
    todas = list(repetidas)
    textos = [r.texto() for r in todas[:limite]]
    if len(todas) > limite:
        textos.append(
            'e mais %d key(s) repetida(s) (contadas, não mostradas)' % (len(todas) - limite)
        )
    return textos


class Triagem:
    """
    A triagem das linhas de UM dataset numa leitura.

    `separar(empresa, linha)` tira a linha de key nula (contada por empresa) e
    guarda a que pode ser repetida até o fim da leitura; `fim()` devolve, de
    cada grupo guardado, a linha que vai (a única, ou a escolhida pela regra).
    `suspeitas`: os pares (empresa, `chave_solta`) que a origem disse repetidos;
    só as linhas deles esperam (None: todas esperam -- a leitura pequena do
    ao-vivo). `chave` None (dataset sem key): nada a separar.
    """

    def __init__(
        self,
        dataset: str,
        chave: str | None,
        suspeitas: set[tuple[Empresa, str]] | None = None,
        coluna_escopo: str | None = None,
    ) -> None:
        self.dataset, self.chave, self.suspeitas = dataset, chave, suspeitas
        self.coluna_escopo = coluna_escopo
        self.nulas: dict[Empresa, int] = {}
        self.de_fora: dict[Empresa, int] = {}
        self.repetidas: list[Repetida] = []
        self._guardadas: dict[tuple[Empresa, str], list[Mapping[str, ValorDoBanco]]] = {}

    @property
    def ativa(self) -> bool:
        """Há o que olhar linha a linha (o dataset tem key)."""
        return self.chave is not None

    @property
    def total_nulas(self) -> int:
        return sum(self.nulas.values())

    def separar(self, empresa: Empresa, linha: Mapping[str, ValorDoBanco]) -> bool:
        """True se a linha saiu do caminho: key nula (contada) ou guardada para o fim."""
        chave = self.chave
        if chave is None:
            return False
        valor = linha.get(chave)
        if valor is None:
            self.nulas[empresa] = self.nulas.get(empresa, 0) + 1
            return True
        suspeitas = self.suspeitas
        if suspeitas is not None and (empresa, chave_solta(valor)) not in suspeitas:
            return False
        self._guardadas.setdefault((empresa, identidade_da_chave(valor)), []).append(linha)
        return True

    def fim(self) -> list[tuple[Empresa, Mapping[str, ValorDoBanco]]]:
        """As linhas guardadas que vão, (empresa, linha); as repetidas, anotadas."""
        saem: list[tuple[Empresa, Mapping[str, ValorDoBanco]]] = []
        guardadas, self._guardadas = self._guardadas, {}
        for (empresa, _identidade), linhas in guardadas.items():
            if len(linhas) == 1:
                saem.append((empresa, linhas[0]))
                continue
            vai, ficam = escolher(linhas)
            saem.append((empresa, vai))
            self.de_fora[empresa] = self.de_fora.get(empresa, 0) + len(ficam)
            na_view = tuple(dict.fromkeys(self._na_view(linha) for linha in linhas))
            self.repetidas.append(
                Repetida(self.dataset, empresa, vai.get(self.chave or ''), len(linhas), na_view)
            )
        return saem

    def _na_view(self, linha: Mapping[str, ValorDoBanco]) -> str:
        if self.coluna_escopo is None:
            return '(domínio)'
        return repr(linha.get(self.coluna_escopo))

    def filtrar(self, linhas: Iterable[L], empresa: Empresa) -> Iterator[L]:
        """As linhas de UMA empresa (None: o domínio) sem as separadas; no fim, as que vão."""
        chave = self.chave
        if chave is None:
            yield from linhas
            return
        # Sem suspeitas (quase sempre), só a key nula sai: sem chamada a mais por linha.
        todas = self.suspeitas is None or bool(self.suspeitas)
        separar = self.separar
        for linha in linhas:
            if (todas or linha.get(chave) is None) and separar(empresa, linha):
                continue
            yield linha
        for _empresa, guardada in self.fim():
            # (As guardadas são as de `linhas`, que `separar` acabou de guardar.)
            yield cast(L, guardada)

    def triar(self, linhas: Iterable[L], empresa_de: Callable[[L], Empresa]) -> list[L]:
        """Uma leitura pequena (o ao-vivo) de uma vez: as linhas que vão, na ordem lida."""
        vao = [linha for linha in linhas if not self.separar(empresa_de(linha), linha)]
        # (As guardadas são as de `linhas`, que `separar` acabou de guardar.)
        return vao + [cast(L, linha) for _empresa, linha in self.fim()]

    def textos(self) -> list[str]:
        """O que o operador lê desta triagem: a contagem das nulas e as repetidas nomeadas."""
        textos = []
        if self.nulas:
            textos.append(aviso_das_nulas(self.total_nulas, self.dataset))
        return textos + textos_repetidas(self.repetidas)
