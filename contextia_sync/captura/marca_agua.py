"""
A marca de água: TODAS as regras num só lugar, em funções puras.

Cada dataset guarda a maior mudança já lida. Três jeitos conhecidos de perder
linha em silêncio, e a regra que evita cada um:

  1. A marca avança para o MAIOR VALOR LIDO, nunca para o relógio da máquina
     (um relógio adiantado cinco minutos pularia cinco minutos de movimento).
  2. A leitura RECUA a marca em `--folga` segundos: a transação que começou
     antes e comitou depois grava um valor ANTERIOR a marca já avancada.
  3. A marca só avança se TODOS os envios do dataset no ciclo deram certo
     (`marca_apos_envio`), e nunca no modo seco.

E as decisões de quando mexer nela: a primeira vista (`primeira_vez`: só fixa
o ponto de partida), o teto por ciclo (`passa_do_teto`) e o pulo depois da
varredura (`marca_apos_varredura`). Quem chama (captura/coluna.py, o ciclo de
varredura) decide com estas funções e só guarda o resultado; a tabela de casos
que as prova está em casos_marca.py.

E uma medida que nenhuma ferramenta de polling da: as CHEGADAS ATRASADAS --
linhas lidas pela primeira vez com valor abaixo da marca do ciclo anterior.
Só foram vistas por causa da folga; o maior atraso diz quanto da folga já foi
comido. Módulo puro (roda no `python3 -S` do autoteste).
"""

from __future__ import annotations

import datetime
import decimal
import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

# A marca como o estado a grava mora com o estado (que a captura usa, nunca o contrario).
from contextia_sync.estado.estado import texto_marca as texto_marca

if TYPE_CHECKING:  # so a anotacao: o topo fica puro (autoteste)
    from contextia_sync.estado.estado import MarcaTexto
    from contextia_sync.tipos import ValorDoBanco

_NUMERO = re.compile(r'^-?\d+(\.\d+)?$')

# Quanto do recuo efetivo um atraso pode comer antes do aviso alto.
FRACAO_ALERTA = 0.5


def como_valor(marca: ValorDoBanco) -> ValorDoBanco:
    """Texto do estado de volta a datetime/date/numero; texto opaco fica texto."""
    if marca is None or isinstance(marca, (datetime.date, int, float, decimal.Decimal)):
        return marca
    if not isinstance(marca, str):
        return marca
    texto = marca.strip()
    if _NUMERO.match(texto):
        # Numero nao inteiro (NUMBER do Oracle) volta ao estado como texto para
        # nao perder precisao em float.
        return int(texto) if '.' not in texto else decimal.Decimal(texto)
    if len(texto) == 10:
        try:
            return datetime.date.fromisoformat(texto)
        except ValueError:
            return marca
    try:
        # fromisoformat aceita 'T' ou espaco, fracao e fuso (timestamptz).
        return datetime.datetime.fromisoformat(texto)
    except ValueError:
        return marca


def comparavel(valor: ValorDoBanco) -> ValorDoBanco:
    """
    Chave de ordenação que não explode com `date` contra `datetime`.

    Uma coluna que devolve os dois existe (driver diferente, view com CAST), e
    um TypeError derrubaria o ciclo inteiro por causa de uma linha.
    """
    v = como_valor(valor)
    if isinstance(v, datetime.datetime):
        return v
    if isinstance(v, datetime.date):
        return datetime.datetime(v.year, v.month, v.day)
    return v


def _maior(a: ValorDoBanco, b: ValorDoBanco) -> bool:
    """a > b sem explodir; tipos incomparáveis não são 'maior'."""
    ca, cb = comparavel(a), comparavel(b)
    try:
        maior: bool = ca > cb
    except TypeError:
        # datetime com fuso contra sem fuso: compara no relogio de parede.
        if isinstance(ca, datetime.datetime) and isinstance(cb, datetime.datetime):
            return ca.replace(tzinfo=None) > cb.replace(tzinfo=None)
        return False
    return maior


def acima(valor: ValorDoBanco, marca: ValorDoBanco) -> bool:
    """`valor` depois de `marca` (sem explodir com tipos diferentes; None nunca está acima)."""
    return valor is not None and marca is not None and _maior(valor, marca)


def recuar(marca: ValorDoBanco, folga: float) -> ValorDoBanco:
    """
    A marca menos a folga: o valor que vai no `WHERE coluna > ?`.

    DATE (granularidade de dia) recua um dia inteiro: recuar segundos não muda
    nada, e `> hoje` perderia toda alteração de hoje. Número (sequence,
    ROWVERSION) ou texto opaco não recua: a folga não tem unidade ali, e quem
    cobre transação em voo e a varredura.
    """
    v = como_valor(marca)
    if isinstance(v, datetime.datetime):
        return v - datetime.timedelta(seconds=folga)
    if isinstance(v, datetime.date):
        return v - datetime.timedelta(days=1)
    return v


def avancar(
    linhas: Iterable[Mapping[str, ValorDoBanco]], coluna: str, marca_atual: ValorDoBanco
) -> ValorDoBanco:
    """
    O maior valor da coluna de mudança entre as linhas LIDAS.

    Nenhuma linha com valor: a marca velha continua. E nunca retrocede: uma
    linha com data futura (digitação errada) eleva a marca, e a seguinte,
    normal, não pode baixa-la de volta -- isso reprocessaria em laço.
    """
    maior: ValorDoBanco = None
    for linha in linhas:
        valor = linha.get(coluna)
        if valor is None:
            continue
        if maior is None or _maior(valor, maior):
            maior = valor
    if maior is None:
        return marca_atual
    if marca_atual is not None and _maior(marca_atual, maior):
        return marca_atual
    return maior


# ---------------------------------------------------------------------------
# Quando mexer na marca
# ---------------------------------------------------------------------------


def primeira_vez(marca: ValorDoBanco, vazia_no_inicio: bool) -> bool:
    """
    Sem marca (e sem ter visto a tabela vazia): a leitura só FIXA o ponto de partida.

    A carga completa e do conector (já rodou, ou roda na varredura); reenviar a
    base toda pela porta incremental, sem `complete`, pareceria um serviço
    louco. Tabela vazia na primeira vez é diferente: aí a próxima leitura traz
    TUDO (`desde` None), senão as primeiras linhas só chegariam na varredura.
    """
    return marca is None and not vazia_no_inicio


def desde(marca: ValorDoBanco, folga: float) -> ValorDoBanco:
    """O valor do `WHERE coluna > ?` deste ciclo; None = ler tudo (tabela nasceu vazia)."""
    return recuar(marca, folga) if marca is not None else None


def passa_do_teto(quantos: int, maximo: int) -> bool:
    """
    Mais linhas que o teto por ciclo: operação em massa, e da varredura.

    Juros, fechamento de mês, correção em lote costumam vir com exclusão -- que o
    incremental não vê -- e não devem passar pela memória de um processo que
    precisa ficar de pe.
    """
    return quantos > maximo


def marca_apos_envio(
    linhas: Iterable[Mapping[str, ValorDoBanco]],
    coluna: str,
    marca_atual: ValorDoBanco,
    *,
    todos_ok: bool,
    seco: bool,
) -> ValorDoBanco:
    """
    A marca depois de entregar as linhas lidas neste ciclo.

    Só avança se TODOS os envios deram certo: falha mantém a marca velha e o
    próximo ciclo relê (avançar sobre um envio que falhou perderia aquelas
    linhas até a varredura). Avança sobre as linhas LIDAS, não as ENVIADAS: as
    de empresa sem chave ficam para trás de propósito, senão o dataset releria
    o mesmo intervalo para sempre -- nada se perde porque o ciclo de projetos
    faz carga completa da empresa nova. Seco nunca avança.
    """
    if not todos_ok or seco:
        return marca_atual
    return avancar(linhas, coluna, marca_atual)


def marca_apos_varredura(
    marca_atual: ValorDoBanco, maximo_antes: ValorDoBanco, coluna: str, *, fechou: bool
) -> ValorDoBanco:
    """
    O pulo da marca de um dataset entregue a varredura.

    `maximo_antes` e o MAX da coluna lido ANTES da varredura: tudo até ali a
    carga completa levou, e a marca pode pular para ca -- sem isto a rajada
    ficaria acima do teto para sempre. Só se a varredura FECHOU a carga desse
    dataset em todas as empresas; e nunca para trás.
    """
    if not fechou:
        return marca_atual
    return avancar([{coluna: maximo_antes}], coluna, marca_atual)


def limite_do_relogio(
    agora_origem: datetime.datetime | None, familia: str, tolerancia: float
) -> datetime.date | None:
    """
    Até onde a marca pode ir: a hora da ORIGEM mais uma tolerância.

    Uma linha com carimbo no futuro (`2099-03-01`, digitação errada) levaria a
    marca para 2099, e nenhuma mudança depois dela seria vista até alguém
    consertar o estado. Coluna de DIA: o dia de hoje na origem mais um.
    Número (sequence, ROWVERSION) não tem relógio: sem limite (None).
    """
    if agora_origem is None or familia not in ('datetime', 'date'):
        return None
    if familia == 'date':
        return agora_origem.date() + datetime.timedelta(days=1)
    return agora_origem + datetime.timedelta(seconds=tolerancia)


def no_futuro(valor: ValorDoBanco, limite: datetime.date | None) -> bool:
    """O carimbo passou do limite do relógio da origem (entregue, mas não sobe a marca)."""
    return acima(valor, limite)


def marca_limitada(marca: ValorDoBanco, limite: datetime.date | None) -> ValorDoBanco:
    """
    A marca puxada de volta ao limite se está além dele (estado gravado com uma
    marca no futuro); senão a mesma.
    """
    if no_futuro(marca, limite):
        return limite
    return marca


def marca_do_maximo(
    maximo: ValorDoBanco, agora_origem: datetime.datetime | None, familia: str
) -> ValorDoBanco:
    """
    A marca que parte do MAX da origem (a marca inicial, o salto da varredura,
    `estado.py marcar DATASET max`): nunca além da hora da origem AGORA.

    O MAX traz a linha com carimbo no futuro, e puxá-lo só até o limite do
    relógio (agora mais a tolerância) deixaria a marca minutos à frente: o que
    mudasse na origem nesse tempo ganharia carimbo ABAIXO da marca e só
    chegaria na varredura seguinte, sem aviso. Parando em agora, a leitura
    seguinte (`> agora - folga`) vê tudo o que mudar depois; a linha do futuro
    está na janela lida junto (dada por entregue) e segue pelo caminho de
    sempre: entregue se mudar, sem subir a marca. Coluna de DIA: hoje na
    origem. Número, ou sem relógio: o MAX como veio.
    """
    if agora_origem is None or familia not in ('datetime', 'date'):
        return maximo
    presente = agora_origem.date() if familia == 'date' else agora_origem
    return presente if acima(maximo, presente) else maximo


def recuo_do_relogio(
    maior_visto: datetime.datetime | None, agora_origem: datetime.datetime
) -> float:
    """
    Quantos segundos o relógio da origem voltou desde o maior valor já visto.

    Horário de verao que acaba (carimbo local sem fuso: 01:59 volta a 01:00), ou
    o relógio do banco acertado para trás: as linhas gravadas depois levam
    carimbos ANTERIORES a marca, e a folga sozinha não as alcancaria. O ciclo
    alarga a leitura por este tanto, até o relógio passar do que já tinha visto.
    Menos de 2 s e ruido de leitura, não passo.
    """
    if maior_visto is None:
        return 0.0
    passo = (maior_visto - agora_origem).total_seconds()
    return passo if passo >= 2.0 else 0.0


# ---------------------------------------------------------------------------
# Chegadas atrasadas
# ---------------------------------------------------------------------------


def margem_efetiva(marca: ValorDoBanco, folga: float) -> float | None:
    """Quanto a leitura realmente recua, em segundos (None para numero/texto)."""
    v = como_valor(marca)
    if isinstance(v, datetime.datetime):
        return float(folga)
    if isinstance(v, datetime.date):
        return 86400.0
    return None


def atraso_em_segundos(marca_anterior: ValorDoBanco, valor: ValorDoBanco) -> float | None:
    """Quanto `valor` ficou atrás da marca; None se não da para medir."""
    a, b = comparavel(marca_anterior), comparavel(valor)
    if isinstance(a, datetime.datetime) and isinstance(b, datetime.datetime):
        if (a.tzinfo is None) != (b.tzinfo is None):
            a, b = a.replace(tzinfo=None), b.replace(tzinfo=None)
        return (a - b).total_seconds()
    return None


def identidade(linha: Mapping[str, ValorDoBanco], coluna: str, chave: str | None = None) -> str:
    """
    Quem é esta linha NESTA versão: chave + valor de mudança.

    A mesma linha relida com o mesmo valor (a folga relê de propósito) tem a
    mesma identidade e não conta como atrasada; a mesma chave alterada de novo
    ganha identidade nova. Sem `key`, o conteúdo inteiro identifica (como o
    dedup por hash do servidor). Resumida em 16 hex: o estado guarda muitas.
    """
    if chave is not None and chave in linha:
        quem = repr(texto_marca(linha.get(chave)))
    else:
        quem = repr(sorted((k, texto_marca(v)) for k, v in linha.items()))
    bruto = '%s|%s' % (quem, texto_marca(como_valor(linha.get(coluna))))
    return hashlib.sha1(bruto.encode('utf-8')).hexdigest()[:16]


def contar_atrasadas(
    linhas: Iterable[Mapping[str, ValorDoBanco]],
    coluna: str,
    chave: str | None,
    marca_anterior: ValorDoBanco,
    vistos: Mapping[str, object] | None,
) -> tuple[int, float | None, dict[str, MarcaTexto | None]]:
    """
    Devolve (quantas, maior_atraso_s, novas) das linhas lidas neste ciclo.

    Atrasada = lida pela PRIMEIRA vez (identidade fora de `vistos`) com valor
    ABAIXO da marca com que o ciclo anterior terminou: só foi pega porque a
    leitura recuou a folga. `novas` e {identidade: valor em texto} das linhas
    ainda não vistas, para o chamador juntar a `vistos`.
    `vistos=None` quer dizer "não sei o que já foi lido" (contagem suspensa).
    """
    quantas = 0
    maior: float | None = None
    novas: dict[str, MarcaTexto | None] = {}
    for linha in linhas:
        valor = linha.get(coluna)
        if valor is None:
            continue
        ident = identidade(linha, coluna, chave)
        if vistos is not None and ident in vistos:
            continue
        novas[ident] = texto_marca(como_valor(valor))
        if vistos is None or marca_anterior is None:
            continue
        if _maior(marca_anterior, valor):
            quantas += 1
            atraso = atraso_em_segundos(marca_anterior, valor)
            if atraso is not None and (maior is None or atraso > maior):
                maior = atraso
    return quantas, maior, novas


def atraso_preocupante(maior_atraso_s: float | None, marca: ValorDoBanco, folga: float) -> bool:
    """True quando o maior atraso passou da metade do recuo efetivo."""
    margem = margem_efetiva(marca, folga)
    if maior_atraso_s is None or not margem:
        return False
    return maior_atraso_s > margem * FRACAO_ALERTA
