"""
O conjunto de chaves ENTREGUE de cada dataset e empresa, no disco, e a comparacao
dele com a leitura da origem -- sem nunca ter um conjunto inteiro na memoria.

    <estado>/conjuntos/<dataset>/e-<empresa>.chaves     um por empresa
    <estado>/conjuntos/<dataset>/todas.chaves           dataset sem recorte

Cada arquivo e uma linha de cabecalho, uma chave por linha EM ORDEM, e uma
linha de fim com a contagem (arquivo sem ela nao foi escrito ate o fim). E
trocado inteiro (arquivos.GravacaoAtomica): um `kill -9` deixa o antigo ou o
novo, nunca metade.

A ordem e a regra `ordem()`: numero < texto < bytes < data e hora < data <
UUID, e dentro de cada familia a comparacao do Python (texto por code point).
A origem devolve o conjunto ordenado pelo banco em ordem binaria
(origem/conjunto.py), e quem le CONFERE, elemento por elemento, que as duas
sequencias crescem por esta mesma regra: se a do banco nao cresce (collation
que o ORDER BY nao domou), a leitura e recusada inteira e nada e removido.
Com as duas em ordem, a diferenca sai andando nelas ao mesmo tempo (`comparar`).

Modulo puro: so biblioteca padrao (o autoteste roda num `python3 -S`).
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import os
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING
from urllib.parse import quote, unquote

if TYPE_CHECKING:  # so a anotacao: o modulo fica puro (autoteste)
    from contextia_sync.tipos import ValorDoBanco

FORMATO = 'contextia-conjunto 1'
_CABECALHO = '#' + FORMATO + ' '
_FIM = '#fim '
_SUFIXO = '.chaves'
# O diario ao lado de cada conjunto: as chaves que a `coluna` entregou desde a
# ultima reconciliacao (acrescentadas, fora de ordem). Dobrando = o que a
# reconciliacao esta somando ao conjunto agora (renomeado antes, para o que a
# coluna acrescentar enquanto isso cair num diario novo).
_DIARIO = '.diario'
_DOBRANDO = '.dobrando'
# As chaves de um envio, anotadas ANTES dele, um arquivo por envio: o que pode
# estar no Contextia sem estar no conjunto nem no diario (o envio que falhou no
# meio, o kill -9 depois da primeira empresa). Sai quando o envio e confirmado,
# ou quando a reconciliacao conferiu cada chave na origem e removeu as que sumiram.
_TENTADAS = '.tentadas-'
_PREFIXO_EMPRESA = 'e-'
_TODAS = 'todas' + _SUFIXO


class ErroConjunto(ValueError):
    """Uma sequência de chaves fora de ordem, repetida, ou um valor que não se guarda."""


class ErroConjuntoGuardado(ErroConjunto):
    """O conjunto guardado no disco (o nosso arquivo) esta torto: recomeca-se da origem."""


# ---------------------------------------------------------------- a regra de ordem
def ordem(valor: ValorDoBanco) -> tuple[int, ValorDoBanco]:
    """
    A chave de comparação de um valor de `key` (ou de escopo): (família, valor).

    A família separa tipos que o Python não compara entre si (o SQLite aceita
    texto e número na mesma coluna, e ordena número antes de texto antes de
    blob -- a mesma ordem das familias daqui).
    """
    if isinstance(valor, (int, float, decimal.Decimal)):
        return (0, valor)
    if isinstance(valor, str):
        return (1, valor)
    if isinstance(valor, (bytes, bytearray, memoryview)):
        return (2, bytes(valor))
    if isinstance(valor, datetime.datetime):
        return (3, valor)
    if isinstance(valor, datetime.date):
        return (4, valor)
    if isinstance(valor, uuid.UUID):
        return (5, valor)
    raise ErroConjunto(
        'um valor do tipo %s não serve de chave na reconciliação: %r'
        % (type(valor).__name__, valor)
    )


def cresce(antes: tuple[int, ValorDoBanco], depois: tuple[int, ValorDoBanco]) -> bool:
    """`depois` vem estritamente depois de `antes` pela regra (tipos incomparáveis: não)."""
    try:
        return antes < depois
    except TypeError:  # ex.: datetime com e sem fuso na mesma coluna
        return False


# ---------------------------------------------------------------- uma chave numa linha
def codificar(valor: ValorDoBanco) -> str:
    """O valor numa linha de texto que volta ao mesmo valor (e ao mesmo tipo)."""
    if isinstance(valor, bool):
        return 'i%d' % int(valor)
    if isinstance(valor, int):
        return 'i%d' % valor
    if isinstance(valor, decimal.Decimal):
        return 'n' + str(valor)
    if isinstance(valor, float):
        return 'f' + repr(valor)
    if isinstance(valor, str):
        # json.dumps escapa quebra de linha e controle; o resto vai cru (UTF-8).
        return 's' + json.dumps(valor, ensure_ascii=False)
    if isinstance(valor, (bytes, bytearray, memoryview)):
        return 'b' + base64.b64encode(bytes(valor)).decode('ascii')
    if isinstance(valor, datetime.datetime):
        return 't' + valor.isoformat()
    if isinstance(valor, datetime.date):
        return 'd' + valor.isoformat()
    if isinstance(valor, uuid.UUID):
        return 'u' + str(valor)
    raise ErroConjunto(
        'um valor do tipo %s não serve de chave na reconciliação: %r'
        % (type(valor).__name__, valor)
    )


def decodificar(linha: str) -> ValorDoBanco:
    """O inverso de `codificar`; linha torta levanta ErroConjunto."""
    etiqueta, resto = linha[:1], linha[1:]
    try:
        if etiqueta == 'i':
            return int(resto)
        if etiqueta == 's':
            texto = json.loads(resto)
            if not isinstance(texto, str):
                raise ValueError('não é texto')
            return texto
        if etiqueta == 'n':
            return decimal.Decimal(resto)
        if etiqueta == 'f':
            return float(resto)
        if etiqueta == 'b':
            return base64.b64decode(resto, validate=True)
        if etiqueta == 't':
            return datetime.datetime.fromisoformat(resto)
        if etiqueta == 'd':
            return datetime.date.fromisoformat(resto)
        if etiqueta == 'u':
            return uuid.UUID(resto)
    except (ValueError, decimal.InvalidOperation) as erro:
        raise ErroConjunto('linha %r ilegível: %s' % (linha[:80], erro)) from None
    raise ErroConjunto('linha %r com etiqueta desconhecida' % linha[:80])


# ---------------------------------------------------------------- os arquivos
@dataclass(frozen=True)
class Identidade:
    """De onde o conjunto veio: outro objeto, outra `key` ou outro recorte = outro conjunto."""

    dataset: str
    source_object: str
    chave: str
    escopo_coluna: str | None

    def cabecalho(self, escopo: str | None) -> str:
        return (
            _CABECALHO
            + json.dumps(
                {
                    'dataset': self.dataset,
                    'source_object': self.source_object,
                    'key': self.chave,
                    'scope_column': self.escopo_coluna,
                    'escopo': escopo,
                },
                ensure_ascii=False,
                sort_keys=True,
            )
            + '\n'
        )


def pasta_do_dataset(pasta: str, dataset: str) -> str:
    return os.path.join(pasta, dataset)


def caminho(pasta: str, dataset: str, escopo: str | None) -> str:
    """O arquivo do conjunto de `dataset` na empresa `escopo` (None: sem recorte)."""
    nome = _TODAS if escopo is None else _PREFIXO_EMPRESA + quote(escopo, safe='') + _SUFIXO
    return os.path.join(pasta_do_dataset(pasta, dataset), nome)


def caminho_diario(pasta: str, dataset: str, escopo: str | None) -> str:
    """O diário das chaves entregues pela `coluna` ao lado do conjunto de `escopo`."""
    return caminho(pasta, dataset, escopo) + _DIARIO


def caminho_tentadas(pasta: str, dataset: str, escopo: str | None, envio: str) -> str:
    """O arquivo das chaves tentadas de `escopo` no `envio` (um nome novo por envio)."""
    return caminho(pasta, dataset, escopo) + _TENTADAS + envio


def tentadas(pasta: str, dataset: str) -> dict[str | None, list[str]]:
    """
    {escopo: arquivos} das chaves tentadas e não confirmadas de `dataset` (None: sem
    recorte), cada lista do envio mais velho ao mais novo. Uma listagem só da pasta.
    """
    try:
        nomes = os.listdir(pasta_do_dataset(pasta, dataset))
    except FileNotFoundError:
        return {}
    achados: dict[str | None, list[str]] = {}
    for nome in sorted(nomes):
        conjunto, _, envio = nome.partition(_TENTADAS)
        if not envio:
            continue
        if conjunto == _TODAS:
            escopo: str | None = None
        elif conjunto.startswith(_PREFIXO_EMPRESA) and conjunto.endswith(_SUFIXO):
            escopo = unquote(conjunto[len(_PREFIXO_EMPRESA) : -len(_SUFIXO)])
        else:
            continue
        achados.setdefault(escopo, []).append(os.path.join(pasta_do_dataset(pasta, dataset), nome))
    return achados


def existentes(pasta: str, dataset: str) -> dict[str | None, str]:
    """{escopo: arquivo} dos conjuntos guardados deste dataset (None: sem recorte)."""
    try:
        nomes = os.listdir(pasta_do_dataset(pasta, dataset))
    except FileNotFoundError:
        return {}
    achados: dict[str | None, str] = {}
    for nome in nomes:
        if nome == _TODAS:
            achados[None] = os.path.join(pasta_do_dataset(pasta, dataset), nome)
        elif nome.startswith(_PREFIXO_EMPRESA) and nome.endswith(_SUFIXO):
            escopo = unquote(nome[len(_PREFIXO_EMPRESA) : -len(_SUFIXO)])
            achados[escopo] = os.path.join(pasta_do_dataset(pasta, dataset), nome)
    return achados


def linhas_do_arquivo(conjunto: Iterable[ValorDoBanco], cabecalho: str) -> Iterator[str]:
    """O texto de um arquivo de conjunto, linha a linha: cabeçalho, chaves, fim."""
    yield cabecalho
    quantas = 0
    for valor in conjunto:
        yield codificar(valor) + '\n'
        quantas += 1
    yield '%s%d\n' % (_FIM, quantas)


def abrir_arquivo(
    arquivo: str, identidade: Identidade, escopo: str | None
) -> Iterator[ValorDoBanco]:
    """
    As chaves guardadas em `arquivo`, em ordem, em streaming.

    O cabeçalho e conferido AGORA: arquivo de outra identidade (a `key`, a view
    ou o recorte mudaram no mapeamento) levanta ErroConjunto antes de qualquer
    comparação -- quem chama recomeça o conjunto da origem, sem remover nada.
    Linha torta, fora de ordem ou a falta da linha de fim aparecem no meio da
    leitura, como ErroConjuntoGuardado.
    """
    esperado = identidade.cabecalho(escopo)
    entrada = open(arquivo, encoding='utf-8', newline='\n')
    try:
        primeira = entrada.readline()
    except BaseException:
        entrada.close()
        raise
    if primeira != esperado:
        entrada.close()
        raise ErroConjunto(
            '%s é de outra identidade (cabeçalho %r, esperado %r)'
            % (arquivo, primeira.strip()[:200], esperado.strip()[:200])
        )
    return _chaves_do_arquivo(entrada, arquivo)


def _chaves_do_arquivo(entrada: IO[str], arquivo: str) -> Iterator[ValorDoBanco]:
    with entrada:
        quantas = 0
        for linha in entrada:
            etiqueta = linha[:1]
            if etiqueta == 'i':  # o caso de quase toda chave: um inteiro
                try:
                    valor: ValorDoBanco = int(linha[1:])
                except ValueError:
                    raise ErroConjuntoGuardado(
                        '%s: linha %r ilegível' % (arquivo, linha[:80])
                    ) from None
            elif etiqueta == '#':
                if not linha.startswith(_FIM) or linha.rstrip('\n') != '%s%d' % (_FIM, quantas):
                    raise ErroConjuntoGuardado(
                        '%s: a linha de fim diz %r e o arquivo tem %d chave(s)'
                        % (arquivo, linha.strip(), quantas)
                    )
                return
            elif not linha.endswith('\n'):
                break
            else:
                try:
                    valor = decodificar(linha[:-1])
                except ErroConjunto as erro:
                    raise ErroConjuntoGuardado('%s: %s' % (arquivo, erro)) from None
            quantas += 1
            yield valor
    raise ErroConjuntoGuardado('%s termina sem a linha de fim: não foi escrito até o fim' % arquivo)


# ---------------------------------------------------------------- a comparacao
@dataclass
class Contagem:
    """O que a comparação de um conjunto viu."""

    anteriores: int = 0
    atuais: int = 0
    removidas: int = 0
    incluidas: int = 0


# Tipos que se comparam entre si como o `ordem` compara (a mesma familia): a
# comparacao direta, sem montar a tupla, e o caminho de quase toda chave.
_DIRETOS = frozenset(
    (int, str, decimal.Decimal, float, datetime.datetime, datetime.date, uuid.UUID, bytes)
)


def _antes(a: ValorDoBanco, b: ValorDoBanco) -> bool:
    """`a` vem estritamente antes de `b` pela regra (incomparáveis: não)."""
    if type(a) is type(b) and type(a) in _DIRETOS:
        try:
            return bool(a < b)
        except TypeError:  # datetime com e sem fuso na mesma coluna
            return False
    return cresce(ordem(a), ordem(b))


def _iguais(a: ValorDoBanco, b: ValorDoBanco) -> bool:
    if type(a) is type(b) and type(a) in _DIRETOS:
        return bool(a == b)
    return ordem(a) == ordem(b)


def _fora_de_ordem(
    lado: str, antes: ValorDoBanco, valor: ValorDoBanco, erro: type[ErroConjunto]
) -> ErroConjunto:
    try:
        repetida = _iguais(antes, valor)
    except ErroConjunto:
        repetida = False
    if repetida:
        return erro(
            '%s tem a chave %r repetida: a `key` do dataset não é única na view'
            ' (por empresa), e a reconciliação não sabe qual remover' % (lado, valor)
        )
    return erro(
        '%s fora de ordem: %r veio depois de %r -- a ordem do banco (a'
        ' collation) não é a que o ouvinte compara' % (lado, valor, antes)
    )


def em_ordem(
    valores: Iterable[ValorDoBanco],
    lado: str,
    erro: type[ErroConjunto] = ErroConjunto,
    juntar_iguais: bool = False,
) -> Iterator[ValorDoBanco]:
    """
    Os valores, conferindo que crescem pela regra; se não, `erro` no meio.
    `juntar_iguais` (a origem): a key repetida na view dentro da empresa
    existe -- vai uma vez, em vez de parar a reconciliação do dataset (a
    carga e o ao-vivo a nomeiam e escolhem a linha: intake/chaves.py).
    """
    vazio = anterior = object()
    diretos = _DIRETOS
    for valor in valores:
        tipo = type(valor)
        if tipo is type(anterior) and tipo in diretos:
            try:
                cresceu = anterior < valor
            except TypeError:  # datetime com e sem fuso na mesma coluna
                cresceu = False
            if not cresceu:
                if juntar_iguais and anterior == valor:
                    continue
                raise _fora_de_ordem(lado, anterior, valor, erro)
        else:
            try:
                if anterior is not vazio and not _antes(anterior, valor):
                    if juntar_iguais and _iguais(anterior, valor):
                        continue
                    raise _fora_de_ordem(lado, anterior, valor, erro)
                if tipo not in diretos:
                    ordem(valor)  # tipo que nao se guarda: recusado aqui, nao no disco
            except ErroConjunto as problema:
                if isinstance(problema, erro):
                    raise
                raise erro('%s: %s' % (lado, problema)) from None
        anterior = valor
        yield valor


def comparar(
    anteriores: Iterable[ValorDoBanco], atuais: Iterable[ValorDoBanco], contagem: Contagem
) -> Iterator[tuple[str, ValorDoBanco]]:
    """
    A diferença entre dois conjuntos em ordem: ('-', chave) saiu, ('+', chave) entrou.

    Anda nas duas sequências ao mesmo tempo (memória constante) e confere a
    ordem de cada uma ('o conjunto entregue', 'a origem') -- a que não cresce
    levanta ErroConjunto no meio, e quem chama não pode dar nada por feito.
    """
    velhos = em_ordem(anteriores, 'o conjunto entregue', ErroConjuntoGuardado)
    novos = em_ordem(atuais, 'a origem', juntar_iguais=True)
    fim = object()
    velho: ValorDoBanco = next(velhos, fim)
    novo: ValorDoBanco = next(novos, fim)
    iguais = removidas = incluidas = 0
    while velho is not fim and novo is not fim:
        tipo = type(velho)
        if tipo is type(novo) and tipo in _DIRETOS:
            try:
                mesmo = velho == novo
                sai = not mesmo and velho < novo
            except TypeError:
                mesmo, sai = False, False
        else:
            mesmo = _iguais(velho, novo)
            sai = not mesmo and _antes(velho, novo)
        if mesmo:
            iguais += 1
            velho, novo = next(velhos, fim), next(novos, fim)
        elif sai:
            removidas += 1
            yield '-', velho
            velho = next(velhos, fim)
        else:
            incluidas += 1
            yield '+', novo
            novo = next(novos, fim)
    while velho is not fim:
        removidas += 1
        yield '-', velho
        velho = next(velhos, fim)
    while novo is not fim:
        incluidas += 1
        yield '+', novo
        novo = next(novos, fim)
    contagem.anteriores += iguais + removidas
    contagem.atuais += iguais + incluidas
    contagem.removidas += removidas
    contagem.incluidas += incluidas


def aplicar(
    anteriores: Iterable[ValorDoBanco],
    incluidas: Iterable[ValorDoBanco],
    removidas: Iterable[ValorDoBanco],
) -> Iterator[ValorDoBanco]:
    """
    O conjunto novo, em ordem: o anterior menos `removidas`, mais `incluidas`.

    `incluidas` e `removidas` são as ENTREGUES (pequenas: o teto por ciclo);
    o anterior vem do disco, em streaming.
    """
    fora = {codificar(v) for v in removidas}
    extras = sorted(incluidas, key=ordem)
    i = 0
    for valor in em_ordem(anteriores, 'o conjunto entregue', ErroConjuntoGuardado):
        while i < len(extras) and _antes(extras[i], valor):
            yield extras[i]
            i += 1
        if i < len(extras) and _iguais(extras[i], valor):
            i += 1  # ja estava: uma vez so
        if not fora or codificar(valor) not in fora:
            yield valor
    yield from extras[i:]


# ------------------------------------------- o diario da coluna, e as chaves tentadas
def anotar_diario(
    arquivo: str, identidade: Identidade, escopo: str | None, valores: Iterable[ValorDoBanco]
) -> None:
    """
    Acrescenta ao diário as chaves que a `coluna` acabou de entregar (ou, no
    mesmo formato, ao arquivo das chaves que um envio vai tentar).

    Sem fsync de propósito: um diário perdido num crash só devolve o caso
    antigo (a chave apagada antes da próxima leitura sai na varredura), e o
    ciclo da coluna não paga um sync por lote. Linha pela metade no fim (kill
    -9 no meio do write) é ignorada na leitura.
    """
    linhas = [codificar(v) + '\n' for v in valores]
    if not linhas:
        return
    os.makedirs(os.path.dirname(arquivo), exist_ok=True)
    with open(arquivo, 'a', encoding='utf-8', newline='\n') as saida:
        if saida.tell() == 0:
            saida.write(identidade.cabecalho(escopo))
        saida.write(''.join(linhas))


def ler_diario(arquivo: str, identidade: Identidade, escopo: str | None) -> list[ValorDoBanco]:
    """
    As chaves de um diário, em ordem e sem repetidas ([] sem diário).

    Diário de outra identidade (a `key` ou a view mudaram) é largado inteiro:
    chave de outra coluna no conjunto viraria remoção errada.
    """
    try:
        entrada = open(arquivo, encoding='utf-8', newline='\n')
    except FileNotFoundError:
        return []
    with entrada:
        if entrada.readline() != identidade.cabecalho(escopo):
            return []
        vistos: dict[str, ValorDoBanco] = {}
        for linha in entrada:
            if not linha.endswith('\n'):
                break  # a ultima, pela metade
            codigo = linha[:-1]
            if codigo not in vistos:
                try:
                    vistos[codigo] = decodificar(codigo)
                except ErroConjunto:
                    continue
    return sorted(vistos.values(), key=ordem)


def tomar_diario(pasta: str, dataset: str, escopo: str | None) -> str | None:
    """
    O diário passa a `dobrando` (o que a reconciliação soma agora); None sem nenhum.

    Um `dobrando` de antes (crash no meio de uma soma) continua valendo: o
    diário de agora é acrescentado a ele.
    """
    diario = caminho_diario(pasta, dataset, escopo)
    dobrando = diario + _DOBRANDO
    if not os.path.exists(dobrando):
        try:
            os.replace(diario, dobrando)
        except FileNotFoundError:
            return None
        return dobrando
    try:
        with open(diario, encoding='utf-8', newline='\n') as entrada:
            entrada.readline()  # o cabecalho: o do dobrando ja vale
            resto = entrada.read()
    except FileNotFoundError:
        return dobrando
    with open(dobrando, 'a', encoding='utf-8', newline='\n') as saida:
        saida.write(resto[: resto.rfind('\n') + 1])
    os.unlink(diario)
    return dobrando


def juntar(
    guardadas: Iterable[ValorDoBanco],
    do_diario: list[ValorDoBanco],
    contador: list[int] | None = None,
) -> Iterator[ValorDoBanco]:
    """
    O conjunto guardado mais as chaves do diário, em ordem e sem repetidas.

    `contador[0]` soma as chaves que só o diário tinha: zero quer dizer que o
    conjunto no disco já as tinha todas, e não precisa ser regravado.
    """
    fim = object()
    extras = iter(do_diario)
    extra: ValorDoBanco = next(extras, fim)
    for valor in guardadas:
        while extra is not fim and _antes(extra, valor):
            if contador is not None:
                contador[0] += 1
            yield extra
            extra = next(extras, fim)
        if extra is not fim and _iguais(extra, valor):
            extra = next(extras, fim)
        yield valor
    while extra is not fim:
        if contador is not None:
            contador[0] += 1
        yield extra
        extra = next(extras, fim)
