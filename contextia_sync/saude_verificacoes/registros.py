"""
Os registros da saúde: os níveis de um plugin de monitoramento, os `Limites`,
o `Resultado` de uma verificação (os `Motivo`s e as `Medida`s) e o `Veredito`
que a tabela dobrada dá -- a linha que o `--saude` imprime.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

from contextia_sync import padroes

OK, ALERTA, CRITICO, DESCONHECIDO = 0, 1, 2, 3
NOMES = {OK: 'OK', ALERTA: 'ALERTA', CRITICO: 'CRITICO', DESCONHECIDO: 'DESCONHECIDO'}

# Quantos motivos cabem na linha (o resto vira "(+N)"): o Nagios guarda 4 KB da
# saida de um plugin, e a pessoa acordada as 3h le a primeira frase.
MOTIVOS_NA_LINHA = 6
TAMANHO_DO_ERRO = 160


@dataclass
class Limites:
    """Os limites da avaliação (os da linha de comando; None = automático)."""

    intervalos: int = padroes.SAUDE_INTERVALOS
    max_idade: float | None = None
    max_sem_sonda: float | None = None
    max_falhas: int = padroes.SAUDE_FALHAS
    max_varredura: float = float(padroes.SAUDE_VARREDURA)
    max_ferramenta: float = float(padroes.SAUDE_FERRAMENTA)
    conferir_pid: bool = True
    wal_alerta: int = padroes.SLOT_WAL_ALERTA
    wal_critico: int = padroes.SLOT_WAL_CRITICO


# ------------------------------------------------------------------ os registros
class Motivo(NamedTuple):
    """Um motivo da linha: o nível e a frase (já numa linha só, sem "|")."""

    nivel: int
    texto: str


@dataclass(frozen=True)
class Medida:
    """
    Um dado de desempenho (`nome=valor[unidade];alerta;critico;0`). Em segundos
    o valor sai arredondado; nas outras unidades, truncado (como o `%d`).
    `maior` diz como as medidas de cada dataset viram uma: a maior, ou a soma.
    """

    nome: str
    valor: float
    unidade: str = ''
    alerta: float | None = None
    critico: float | None = None
    maior: bool = False

    def texto(self) -> str:
        valor = round(self.valor) if self.unidade == 's' else self.valor
        return '%s=%d%s;%s;%s;0' % (
            self.nome,
            valor,
            self.unidade,
            _limite(self.alerta),
            _limite(self.critico),
        )


def _limite(valor: float | None) -> str:
    return '' if valor is None else '%d' % valor


@dataclass
class Resultado:
    """O que uma verificação achou: os motivos (nenhum = tudo bem) e as medidas."""

    motivos: list[Motivo] = field(default_factory=list)
    medidas: list[Medida] = field(default_factory=list)

    def anotar(self, nivel: int, texto: str) -> Resultado:
        self.motivos.append(Motivo(nivel, limpo(texto)))
        return self

    def medir(self, medida: Medida) -> Resultado:
        self.medidas.append(medida)
        return self

    def juntar(self, outro: Resultado) -> None:
        self.motivos.extend(outro.motivos)
        self.medidas.extend(outro.medidas)

    @property
    def nivel(self) -> int:
        return max((m.nivel for m in self.motivos), default=OK)


@dataclass
class Veredito:
    """O nível, os motivos (o pior primeiro) e os dados de desempenho."""

    motivos: list[Motivo] = field(default_factory=list)
    resumo: str = ''
    perf: list[str] = field(default_factory=list)
    desconhecido: str | None = None

    def anotar(self, nivel: int, texto: str) -> None:
        self.motivos.append(Motivo(nivel, limpo(texto)))

    @property
    def nivel(self) -> int:
        if self.desconhecido is not None:
            return DESCONHECIDO
        return max((m.nivel for m in self.motivos), default=OK)

    def linha(self) -> str:
        nivel = self.nivel
        if nivel == DESCONHECIDO:
            texto = limpo(self.desconhecido or '')
        elif nivel == OK:
            texto = self.resumo
        else:
            ordem = sorted((m for m in self.motivos if m.nivel > OK), key=lambda m: -m.nivel)
            textos = [m.texto for m in ordem]
            texto = '; '.join(textos[:MOTIVOS_NA_LINHA])
            if len(textos) > MOTIVOS_NA_LINHA:
                texto += '; (+%d)' % (len(textos) - MOTIVOS_NA_LINHA)
        linha = 'OUVINTE %s - %s' % (NOMES[nivel], texto)
        if self.perf:
            linha += ' | ' + ' '.join(self.perf)
        return linha


def limpo(texto: object) -> str:
    """Uma linha só, sem "|" (que separa os dados de desempenho)."""
    return re.sub(r'\s+', ' ', str(texto).replace('|', '/')).strip()


def erro_curto(texto: object) -> str:
    """
    O último erro sem a hora na frente, cortado no MEIO: o começo diz o que
    falhou, o fim diz o porque (o erro do driver vem depois da descrição da origem).
    """
    curto = re.sub(r'^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\s+', '', limpo(texto or ''))
    if len(curto) <= TAMANHO_DO_ERRO:
        return curto
    cabeca = TAMANHO_DO_ERRO // 3
    return curto[:cabeca] + ' ... ' + curto[-(TAMANHO_DO_ERRO - cabeca - 5) :]
