"""
`ouvinte-estado.json`: marcas de água e o que o ouvinte sabe da origem.

Um registro tipado por seção do arquivo (o JSON no disco continua o mesmo,
versão 2):

    marca_agua                 {dataset: marca}        a maior mudança já entregue
    vistos                     {dataset: {id: valor}}  só no arquivo de antes: a
                                                       janela entregue mora em
                                                       <estado>/janelas/ (janela.py)
                                                       e é levada para lá ao abrir
    acompanhamento             {dataset: Acompanhamento}  o que o status mostra
    pendentes_varredura        {dataset: motivo}       entregues a varredura
    cargas_iniciais_pendentes  [escopo]                carga de empresa nova a refazer
    reconciliacao              {dataset: Reconciliacao}  a última reconciliacao (o
                                                       conjunto de chaves mora em
                                                       <estado>/conjuntos/)
    escopos_vistos, ultima_varredura
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import json
import os
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Union

from contextia_sync.arquivos import gravar_atomico
from contextia_sync.erros import ErroConfiguracao
from contextia_sync.estado.janela import JanelaEntregue, caminho_da_janela
from contextia_sync.tipos import JsonDecodificado, ObjetoJson, ValorDoBanco


def texto_marca(valor: ValorDoBanco) -> str | int | float | None:
    """A marca como vai para o JSON: texto ISO ou número, nunca objeto."""
    if valor is None:
        return None
    if isinstance(valor, (datetime.datetime, datetime.date)):
        return valor.isoformat()
    if isinstance(valor, bool):
        return int(valor)
    if isinstance(valor, (int, float)):
        return valor
    if isinstance(valor, decimal.Decimal):
        return int(valor) if valor == valor.to_integral_value() else str(valor)
    return str(valor)


ARQUIVO_ESTADO = 'ouvinte-estado.json'
VERSAO = 2

# A marca como o JSON a guarda: texto ISO, numero inteiro ou com fracao.
MarcaTexto = Union[str, int, float]
# {identidade da linha nesta versao: valor de mudanca}; None = nao se sabe.
Vistos = dict[str, MarcaTexto]


class ErroEstado(ErroConfiguracao):
    """O arquivo de estado existe e não da para le-lo."""


class _ComFalhas:
    """A sequência de falhas de um registro: o último erro, desde quando, quantas seguidas."""

    ultimo_erro: str | None
    erro_desde: str | None
    falhas_seguidas: int

    def registrar_erro(self, texto: str, quando: str) -> None:
        """Falhou: o erro, desde quando, e mais uma falha seguida."""
        self.ultimo_erro = texto
        self.erro_desde = self.erro_desde or quando
        self.falhas_seguidas += 1

    def registrar_sucesso(self) -> None:
        """Deu certo: a sequência de falhas acaba."""
        self.ultimo_erro = None
        self.erro_desde = None
        self.falhas_seguidas = 0


@dataclass
class Acompanhamento(_ComFalhas):
    """O que o status mostra de um dataset do ao-vivo."""

    ultima_sonda: str | None = None
    ultimo_erro: str | None = None
    enviados_ultimo_ciclo: int | None = None
    # Tabela vazia na primeira sonda: a proxima leitura traz tudo (ver dados.py).
    vazia_no_inicio: bool = False
    ultima_mudanca_vista: str | None = None
    atrasadas_total: int = 0
    maior_atraso_s: float | None = None
    # Linhas com carimbo alem da hora da origem no ultimo ciclo (entregues; nao
    # sobem a marca), e linhas sem carimbo (a sonda nao as ve; so a varredura).
    futuras: int = 0
    sem_carimbo: int | None = None
    # Linhas com a key nula na view (ficam de fora; contadas na subida, depois da
    # varredura e quando um ciclo acha uma nova) e as keys repetidas, nomeadas:
    # intake/chaves.py.
    chaves_nulas: int | None = None
    chaves_repetidas: list[str] | None = None
    # O que o intake disse do ultimo ciclo deste dataset (somado nas empresas):
    # reenviado igual (`iguais`) se distingue de novo e de alterado.
    novos: int = 0
    atualizados: int = 0
    iguais: int = 0
    # A hora da origem menos a marca, em segundos, na ultima sonda (so marca de data).
    atraso_origem_s: float | None = None
    # Falhas seguidas deste dataset (leitura ou envio) e desde quando
    # (registrar_erro / registrar_sucesso).
    falhas_seguidas: int = 0
    erro_desde: str | None = None


@dataclass
class ResultadoVarredura:
    """A última varredura, no estado: sobrevive a reinício (o status e a saúde a leem)."""

    iniciada_em: str | None = None
    terminada_em: str | None = None
    ok: bool | None = None  # None: em curso, ou interrompida pela parada
    erros: list[str] = field(default_factory=list)
    # {dataset: [empresas]} que a varredura NAO fechou.
    nao_fechados: dict[str, list[str]] = field(default_factory=dict)
    ultima_ok_em: str | None = None  # a ultima que terminou sem erro nenhum


@dataclass
class Reconciliacao(_ComFalhas):
    """
    A reconciliacao de um dataset, para o status, a saúde e as métricas.

    O conjunto de chaves entregue não mora aqui (milhões de chaves num JSON
    trocado inteiro a cada ciclo): mora em <estado>/conjuntos/, um arquivo por
    empresa (captura/conjuntos.py).
    """

    # A ultima leitura do conjunto comparada ate o fim, e a ultima tentativa
    # (o --intervalo-reconciliacao conta desta).
    ultima_em: str | None = None
    tentada_em: str | None = None
    duracao_s: float | None = None
    chaves: int | None = None  # no conjunto entregue, somadas as empresas
    empresas: int | None = None
    # Da ultima reconciliacao entregue, e o total desde sempre.
    removidas: int = 0
    incluidas: int = 0
    removidas_total: int = 0
    incluidas_total: int = 0
    # O teto de remocao recusou (nada removido): o motivo e desde quando.
    recusa: str | None = None
    recusa_desde: str | None = None
    # A leitura do conjunto falhou (conexao, tempo, ordem): nada removido.
    ultimo_erro: str | None = None
    erro_desde: str | None = None
    falhas_seguidas: int = 0


# Campos que so vao para o arquivo quando nao sao zero (o arquivo fica legivel).
_ZERO_E_AUSENTE = (
    'atrasadas_total',
    'futuras',
    'novos',
    'atualizados',
    'iguais',
    'falhas_seguidas',
    'removidas',
    'incluidas',
    'removidas_total',
    'incluidas_total',
)

_TIPOS_ACOMPANHAMENTO: dict[str, tuple[type, ...]] = {
    'ultima_sonda': (str,),
    'ultimo_erro': (str,),
    'enviados_ultimo_ciclo': (int,),
    'vazia_no_inicio': (bool,),
    'ultima_mudanca_vista': (str,),
    'atrasadas_total': (int,),
    'maior_atraso_s': (int, float),
    'futuras': (int,),
    'sem_carimbo': (int,),
    'chaves_nulas': (int,),
    'chaves_repetidas': (list,),
    'novos': (int,),
    'atualizados': (int,),
    'iguais': (int,),
    'atraso_origem_s': (int, float),
    'falhas_seguidas': (int,),
    'erro_desde': (str,),
}


def _problema(caminho: str, secao: str, esperado: str, valor: object) -> ErroEstado:
    return ErroEstado(
        'Estado ilegível em %s (a seção %r deveria ser %s, e e %s).\n'
        'Conserte ou mova o arquivo. Começar do zero faria o ouvinte pular tudo que'
        ' aconteceu desde a última leitura.' % (caminho, secao, esperado, type(valor).__name__)
    )


def _marca_valida(valor: object) -> bool:
    return isinstance(valor, (str, int, float)) and not isinstance(valor, bool)


_TIPOS_RECONCILIACAO: dict[str, tuple[type, ...]] = {
    'ultima_em': (str,),
    'tentada_em': (str,),
    'duracao_s': (int, float),
    'chaves': (int,),
    'empresas': (int,),
    'removidas': (int,),
    'incluidas': (int,),
    'removidas_total': (int,),
    'incluidas_total': (int,),
    'recusa': (str,),
    'recusa_desde': (str,),
    'ultimo_erro': (str,),
    'erro_desde': (str,),
    'falhas_seguidas': (int,),
}


def _campos(
    caminho: str,
    secao: str,
    nome: str,
    bruto: JsonDecodificado,
    tipos_de: Mapping[str, tuple[type, ...]],
) -> dict[str, JsonDecodificado]:
    """Os campos conhecidos de um registro de `secao`, com o tipo conferido."""
    # Os valores seguem como o json os decodificou: o tipo de cada um é conferido
    # contra a tabela `tipos_de` (o do campo do registro), que o mypy não segue.
    if not isinstance(bruto, dict):
        raise _problema(caminho, '%s.%s' % (secao, nome), 'um objeto', bruto)
    campos: dict[str, JsonDecodificado] = {}
    for chave, valor in bruto.items():
        tipos = tipos_de.get(chave)
        if tipos is None:
            continue  # chave de versao antiga: nao usada mais
        if valor is not None and not isinstance(valor, tipos):
            raise _problema(
                caminho,
                '%s.%s.%s' % (secao, nome, chave),
                ' ou '.join(t.__name__ for t in tipos),
                valor,
            )
        campos[chave] = valor
    return campos


def _acompanhamento(caminho: str, nome: str, bruto: JsonDecodificado) -> Acompanhamento:
    return Acompanhamento(**_campos(caminho, 'acompanhamento', nome, bruto, _TIPOS_ACOMPANHAMENTO))


def _reconciliacao(caminho: str, nome: str, bruto: JsonDecodificado) -> Reconciliacao:
    return Reconciliacao(**_campos(caminho, 'reconciliacao', nome, bruto, _TIPOS_RECONCILIACAO))


def _sem_vazios(registro: Acompanhamento | Reconciliacao) -> ObjetoJson:
    """O registro sem None, False e os contadores zerados: o arquivo fica legível a olho."""
    return {
        k: v
        for k, v in dataclasses.asdict(registro).items()
        if v is not None and v is not False and not (k in _ZERO_E_AUSENTE and v == 0)
    }


@dataclass
class DadosEstado:
    """O arquivo inteiro, seção por seção."""

    versao: int = VERSAO
    marca_agua: dict[str, MarcaTexto] = field(default_factory=dict)
    escopos_vistos: list[str] = field(default_factory=list)
    ultima_varredura: str | None = None
    vistos: dict[str, Vistos | None] = field(default_factory=dict)
    acompanhamento: dict[str, Acompanhamento] = field(default_factory=dict)
    pendentes_varredura: dict[str, str] = field(default_factory=dict)
    cargas_iniciais_pendentes: list[str] = field(default_factory=list)
    # O maior relogio da origem ja lido ({'utc': iso, 'local': iso}): e contra
    # ele que se ve o relogio voltar (fim do horario de verao, acerto para tras).
    relogio_origem: dict[str, str] = field(default_factory=dict)
    varredura: ResultadoVarredura = field(default_factory=ResultadoVarredura)
    reconciliacao: dict[str, Reconciliacao] = field(default_factory=dict)

    @classmethod
    def de_json(cls, caminho: str, lido: JsonDecodificado) -> DadosEstado:
        """Confere cada seção: forma errada e recusada na subida, não a cada ciclo."""
        if not isinstance(lido, dict):
            raise _problema(caminho, '(raiz)', 'um objeto JSON', lido)
        dados = cls()

        def secao(nome: str, tipo: type, descricao: str) -> JsonDecodificado:
            valor = lido.get(nome)
            if valor is not None and not isinstance(valor, tipo):
                raise _problema(caminho, nome, descricao, valor)
            return valor

        marcas = secao('marca_agua', dict, 'um objeto {dataset: marca}') or {}
        for nome, marca in marcas.items():
            if marca is not None and not _marca_valida(marca):
                raise _problema(caminho, 'marca_agua.%s' % nome, 'texto ou número', marca)
        dados.marca_agua = {n: m for n, m in marcas.items() if m is not None}
        dados.escopos_vistos = [str(e) for e in secao('escopos_vistos', list, 'uma lista') or []]
        dados.ultima_varredura = secao('ultima_varredura', str, 'uma data AAAA-MM-DD')
        vistos = secao('vistos', dict, 'um objeto {dataset: {...}}') or {}
        for nome, valor in vistos.items():
            if valor is not None and not isinstance(valor, dict):
                raise _problema(caminho, 'vistos.%s' % nome, 'um objeto ou null', valor)
        dados.vistos = vistos
        dados.acompanhamento = {
            nome: _acompanhamento(caminho, nome, bruto)
            for nome, bruto in (
                secao('acompanhamento', dict, 'um objeto {dataset: {...}}') or {}
            ).items()
        }
        dados.pendentes_varredura = {
            str(n): str(m)
            for n, m in (
                secao('pendentes_varredura', dict, 'um objeto {dataset: motivo}') or {}
            ).items()
        }
        dados.cargas_iniciais_pendentes = [
            str(e) for e in secao('cargas_iniciais_pendentes', list, 'uma lista') or []
        ]
        relogio = secao('relogio_origem', dict, 'um objeto {"utc": ..., "local": ...}') or {}
        dados.relogio_origem = {k: str(v) for k, v in relogio.items() if k in ('utc', 'local')}
        varredura = secao('varredura', dict, 'um objeto') or {}
        dados.varredura = ResultadoVarredura(
            **{
                k: v
                for k, v in varredura.items()
                if k in {f.name for f in dataclasses.fields(ResultadoVarredura)}
            }
        )
        dados.reconciliacao = {
            nome: _reconciliacao(caminho, nome, bruto)
            for nome, bruto in (
                secao('reconciliacao', dict, 'um objeto {dataset: {...}}') or {}
            ).items()
        }
        return dados

    def para_json(self) -> ObjetoJson:
        dados = dataclasses.asdict(self)
        # Sem os campos vazios de cada dataset: o arquivo fica legivel a olho.
        dados['acompanhamento'] = {nome: _sem_vazios(a) for nome, a in self.acompanhamento.items()}
        dados['reconciliacao'] = {nome: _sem_vazios(r) for nome, r in self.reconciliacao.items()}
        if not self.vistos:
            # A janela entregue mora em <estado>/janelas/; aqui só a de antes, ainda não levada.
            del dados['vistos']
        return dados


class Estado:
    """
    Marcas de água e o que o ouvinte sabe da origem, num JSON gravado atômico.

    Atômico porque o ouvinte pode morrer a qualquer instante: um estado truncado
    faria a próxima subida começar do MAX() da origem, pulando tudo o que
    aconteceu enquanto ele estava fora.
    """

    def __init__(self, caminho: str, seco: bool = False) -> None:
        self.caminho = caminho
        self.seco = seco
        self.dados = DadosEstado()
        self._janelas: dict[str, JanelaEntregue] = {}
        if not os.path.exists(caminho):
            return
        try:
            with open(caminho, encoding='utf-8') as arquivo:
                lido = json.load(arquivo)
        except Exception as erro:  # noqa: BLE001 - qualquer falha de leitura e a mesma recusa
            # Nao apaga e nao segue as cegas: continuar zerado reprocessaria ou
            # pularia dado sem ninguem saber qual dos dois. Decisao de pessoa.
            raise ErroEstado(
                'Estado ilegível em %s (%s: %s).\n'
                'Conserte ou mova o arquivo. Começar do zero faria o ouvinte'
                ' pular tudo que aconteceu desde a última leitura.'
                % (caminho, type(erro).__name__, erro)
            ) from None
        self.dados = DadosEstado.de_json(caminho, lido)

    # marcas
    def marca(self, dataset: str) -> MarcaTexto | None:
        return self.dados.marca_agua.get(dataset)

    def definir_marca(self, dataset: str, valor: ValorDoBanco) -> None:
        texto = texto_marca(valor)
        if texto is None:
            self.dados.marca_agua.pop(dataset, None)
        else:
            self.dados.marca_agua[dataset] = texto

    # o que ja foi entregue dentro da janela da folga (a `coluna`)
    def janela(self, dataset: str) -> JanelaEntregue:
        """
        A janela entregue do dataset, em <estado>/janelas/ (aberta uma vez).

        O arquivo de estado de antes guardava a janela no JSON (`vistos`): ela é
        levada para o SQLite na primeira abertura e sai do JSON na gravação.
        """
        aberta = self._janelas.get(dataset)
        if aberta is None:
            pasta = os.path.dirname(os.path.abspath(self.caminho))
            caminho = caminho_da_janela(pasta, dataset)
            nova = not os.path.exists(caminho)
            aberta = JanelaEntregue(caminho, seco=self.seco)
            antiga = self.dados.vistos.pop(dataset, None)
            if nova and antiga is not None:
                aberta.trocar(antiga.items())
            self._janelas[dataset] = aberta
        return aberta

    def fechar_janelas(self) -> None:
        for janela in self._janelas.values():
            janela.fechar()
        self._janelas.clear()

    # o que o status mostra por dataset
    def acompanhamento(self, dataset: str) -> Acompanhamento:
        return self.dados.acompanhamento.setdefault(dataset, Acompanhamento())

    def reconciliacao(self, dataset: str) -> Reconciliacao:
        return self.dados.reconciliacao.setdefault(dataset, Reconciliacao())

    # entregues a varredura por excesso de linhas
    def pendentes(self) -> dict[str, str]:
        """{dataset: motivo} dos entregues a varredura (copia: mude pelos metodos)."""
        return dict(self.dados.pendentes_varredura)

    def entregar_a_varredura(self, dataset: str, motivo: str) -> None:
        self.dados.pendentes_varredura[dataset] = motivo

    def soltar_da_varredura(self, dataset: str) -> None:
        self.dados.pendentes_varredura.pop(dataset, None)

    # cargas iniciais de empresa nova ainda nao confirmadas
    def cargas_pendentes(self) -> list[str]:
        return list(self.dados.cargas_iniciais_pendentes)

    def marcar_carga_pendente(self, escopo: str, pendente: bool = True) -> None:
        lista = [e for e in self.dados.cargas_iniciais_pendentes if e != escopo]
        if pendente:
            lista.append(escopo)
        self.dados.cargas_iniciais_pendentes = lista

    # escopos e varredura
    def escopos(self) -> set[str]:
        return set(self.dados.escopos_vistos)

    def registrar_escopos(self, escopos: list[str]) -> None:
        self.dados.escopos_vistos = sorted(self.escopos() | set(escopos))

    def varredura_feita_em(self) -> str | None:
        return self.dados.ultima_varredura

    def relogio_visto(self) -> tuple[datetime.datetime, datetime.datetime] | None:
        """O maior relógio da origem já lido (utc, local), ou None."""
        r = self.dados.relogio_origem
        try:
            return (
                datetime.datetime.fromisoformat(r['utc']),
                datetime.datetime.fromisoformat(r['local']),
            )
        except (KeyError, ValueError):
            return None

    def definir_relogio_visto(self, utc: datetime.datetime, local: datetime.datetime) -> None:
        self.dados.relogio_origem = {'utc': utc.isoformat(), 'local': local.isoformat()}

    def registrar_varredura(self, dia: str) -> None:
        self.dados.ultima_varredura = dia

    def gravar(self) -> None:
        gravar_atomico(
            self.caminho,
            json.dumps(self.dados.para_json(), ensure_ascii=False, indent=2, sort_keys=True) + '\n',
        )
