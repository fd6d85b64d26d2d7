"""
O estado do ouvinte visto e mudado a mão: a lógica de `estado.py`
(`contextia-estado`, `python -m contextia_sync.cli.estado`).

    retratar        onde cada dataset esta (marca de água, última sonda boa,
                    entregue a varredura, quarentena) e as cargas iniciais
                    pendentes -- lê sem a trava: o estado e trocado inteiro, e
                    o que se vê e o último gravado
    planejar_marca  o que muda se a marca de um dataset for posta em `max` (o
                    MAX da origem agora) ou num valor: lido da origem com o
                    login somente leitura, pela estratégia `coluna`, antes de
                    qualquer gravação -- o anuncio diz o que será relido ou pulado
    aplicar_marca   grava a mudança planejada
    esquecer_carga  tira uma empresa de `cargas_iniciais_pendentes`

Quem muda o estado faz isso dentro de `com_trava`: a mesma trava do ouvinte
(estado/trava.py). Um ouvinte rodando guarda o estado na memória e o regrava a
cada ciclo; mudar o arquivo pelas costas dele não valeria nada (ele gravaria
por cima) ou valeria pela metade.

A marca posta a mão quer dizer uma coisa só, nos dois sentidos: o que tem
carimbo até ela conta como entregue, e o que tem carimbo depois dela o próximo
ciclo entrega. Para isso a janela da folga até a marca nova fica lembrada como
entregue (`CapturaColuna.entregue_ate`), como depois de uma varredura.

Vive em ouvinte/ e não em estado/ porque lê a origem, o mapeamento e a
quarentena: estado/ fica abaixo de todos eles.
"""

from __future__ import annotations

import contextlib
import datetime
import decimal
import os
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field

from contextia_sync.captura import DatasetVivo, marca_agua
from contextia_sync.captura.ao_vivo import datasets_ao_vivo, e_so_varredura
from contextia_sync.captura.coluna import CapturaColuna
from contextia_sync.erros import ErroConfiguracao
from contextia_sync.escopos import texto_escopo
from contextia_sync.estado.estado import ARQUIVO_ESTADO, Estado, MarcaTexto, Vistos
from contextia_sync.estado.janela import caminho_da_janela, tamanho_lembrado
from contextia_sync.estado.status import ler_status_json
from contextia_sync.estado.trava import travar
from contextia_sync.tipos import Mapa, ObjetoJson, ValorDoBanco

VERSAO_RETRATO = 1
"""A versão do JSON de `estado.py mostrar --json` (sobe quando um campo muda de sentido)."""

# O que o operador digita em `marcar DATASET max`.
MAX = 'max'


class ErroMarca(ErroConfiguracao):
    """O pedido de `marcar` não serve (dataset, valor, tipo da coluna): nada foi gravado."""


def exigir_pasta(pasta: str) -> None:
    """A pasta de estado existe: um --estado errado não vira um estado novo é vazio."""
    if not os.path.isdir(pasta):
        raise ErroConfiguracao(
            'A pasta de estado %s não existe.\n'
            'Aponte --estado para a pasta que o ouvinte usa (a do --estado dele, na unidade'
            ' systemd ou no cron).' % pasta
        )


@contextlib.contextmanager
def com_trava(pasta: str) -> Iterator[Estado]:
    """
    O estado lido e mudado com a trava do ouvinte na mão (ErroTrava se ele roda).

    A trava fica pega do começo ao fim -- leitura, pergunta ao operador e
    gravação --: um ouvinte que subisse no meio leria o estado velho e o
    regravaria por cima da mudança.
    """
    exigir_pasta(pasta)
    trava = travar(pasta)
    estado = None
    try:
        estado = Estado(os.path.join(pasta, ARQUIVO_ESTADO))
        yield estado
    finally:
        if estado is not None:
            estado.fechar_janelas()  # antes de soltar a trava: nada escreve depois dela
        if trava is not None:
            trava.close()


# ---------------------------------------------------------------------------
# mostrar
# ---------------------------------------------------------------------------


@dataclass
class RetratoDataset:
    """Onde um dataset está, no estado (e no mapeamento, se foi dado)."""

    dataset: str
    ao_vivo: bool | None = None  # None: sem --mapping nao se sabe
    motivo: str | None = None  # fora do ao-vivo: por que
    watch_column: str | None = None
    marca_agua: MarcaTexto | None = None
    ultima_sonda_ok_em: str | None = None
    entregue_a_varredura: str | None = None
    quarentena: int = 0
    falhas_seguidas: int = 0
    ultimo_erro: str | None = None
    # Linhas da janela da folga lembradas como entregues; None = nao lembra
    # (a janela e reenviada no proximo ciclo).
    janela_lembrada: int | None = None
    # Fora do ao-vivo por correção por fazer (a view sem `base_tables` no log).
    so_varredura: bool = False


@dataclass
class RetratoEstado:
    """O que `estado.py mostrar` mostra."""

    estado: str
    gravado_em: str | None = None
    ultima_varredura: str | None = None
    cargas_iniciais_pendentes: list[str] = field(default_factory=list)
    datasets: list[RetratoDataset] = field(default_factory=list)

    @property
    def quarentena_total(self) -> int:
        return sum(d.quarentena for d in self.datasets)

    def para_json(self) -> ObjetoJson:
        return {
            'versao': VERSAO_RETRATO,
            'estado': self.estado,
            'gravado_em': self.gravado_em,
            'ultima_varredura': self.ultima_varredura,
            'cargas_iniciais_pendentes': list(self.cargas_iniciais_pendentes),
            'quarentena': {
                'total': self.quarentena_total,
                'por_dataset': {d.dataset: d.quarentena for d in self.datasets if d.quarentena},
            },
            'datasets': [asdict(d) for d in self.datasets],
        }

    def tabela(self) -> list[str]:
        cargas = self.cargas_iniciais_pendentes
        linhas = [
            'estado ...........: %s (%s)'
            % (
                self.estado,
                'gravado em %s' % self.gravado_em
                if self.gravado_em
                else 'ainda não existe: o ouvinte nunca gravou aqui',
            ),
            'última varredura .: %s' % (self.ultima_varredura or 'nenhuma registrada'),
            'cargas iniciais pendentes: %s'
            % (
                '%s (o próximo ciclo de projetos as refaz)' % ', '.join(cargas)
                if cargas
                else 'nenhuma'
            ),
            'quarentena .......: %s registro(s)' % self.quarentena_total,
            '',
            '%-28s %-26s %-19s %10s %6s  %s'
            % (
                'dataset',
                'marca de água',
                'última sonda boa',
                'quarentena',
                'falhas',
                'entregue à varredura / último erro',
            ),
        ]
        for d in self.datasets:
            if d.ao_vivo is False:
                linhas.append(
                    '%-28s fora do ao-vivo: %s%s'
                    % (
                        d.dataset,
                        d.motivo,
                        ' (quarentena %s)' % d.quarentena if d.quarentena else '',
                    )
                )
                continue
            marca = '-' if d.marca_agua is None else str(d.marca_agua)
            notas = []
            if d.entregue_a_varredura:
                notas.append('ENTREGUE À VARREDURA (%s)' % d.entregue_a_varredura)
            if d.ultimo_erro:
                notas.append(d.ultimo_erro)
            linhas.append(
                '%-28s %-26s %-19s %10s %6s  %s'
                % (
                    d.dataset,
                    marca,
                    d.ultima_sonda_ok_em or '-',
                    d.quarentena,
                    d.falhas_seguidas,
                    ' | '.join(notas),
                )
            )
        if not self.datasets:
            linhas.append('(nenhum dataset no estado; com --mapping aparecem os do mapeamento)')
        return linhas


def _gravado_em(caminho: str) -> str | None:
    try:
        instante = os.stat(caminho).st_mtime
    except OSError:
        return None
    return datetime.datetime.fromtimestamp(instante).strftime('%Y-%m-%d %H:%M:%S')


def retratar(pasta: str, mapa: Mapa | None, quarentena: Mapping[str, int]) -> RetratoEstado:
    """
    O retrato do estado em `pasta`, sem a trava (só lê).

    Com o mapeamento, todo dataset dele aparece, na ordem dele (os de fora do
    ao-vivo com o motivo); sem, os que o estado conhece. Dataset que só o
    estado ou a quarentena conhece (saiu do mapeamento) vem no fim.
    """
    from contextia_sync.intake.cliente import normalizar_dataset

    exigir_pasta(pasta)
    caminho = os.path.join(pasta, ARQUIVO_ESTADO)
    dados = Estado(caminho).dados
    retrato = RetratoEstado(
        estado=caminho,
        gravado_em=_gravado_em(caminho),
        ultima_varredura=dados.ultima_varredura,
        cargas_iniciais_pendentes=list(dados.cargas_iniciais_pendentes),
    )
    linhas: dict[str, RetratoDataset] = {}
    if mapa is not None:
        estrategia, do_ouvinte = _segundo_o_ouvinte(pasta, mapa)
        vivos, fora = datasets_ao_vivo(mapa, estrategia)
        por_nome = {alvo.nome: alvo for alvo in vivos}
        motivos = {normalizar_dataset(nome): motivo for nome, motivo in fora} | do_ouvinte
        for row in mapa.get('datasets') or []:
            nome = normalizar_dataset(row['dataset'])
            alvo = None if nome in do_ouvinte else por_nome.get(nome)
            linhas[nome] = RetratoDataset(
                nome,
                ao_vivo=alvo is not None,
                motivo=motivos.get(nome),
                watch_column=alvo.watch if alvo else None,
                so_varredura=e_so_varredura(motivos.get(nome) or ''),
            )
    conhecidos = (
        set(dados.marca_agua)
        | set(dados.acompanhamento)
        | set(dados.pendentes_varredura)
        | set(quarentena)
    )
    for nome in sorted(conhecidos - set(linhas)):
        linhas[nome] = RetratoDataset(
            nome,
            ao_vivo=None if mapa is None else False,
            motivo=None if mapa is None else 'fora do mapeamento',
        )
    for nome, linha in linhas.items():
        acomp = dados.acompanhamento.get(nome)
        vistos = dados.vistos.get(nome)  # a janela no JSON de antes, ainda não levada
        lembrada = tamanho_lembrado(caminho_da_janela(pasta, nome))
        linha.marca_agua = dados.marca_agua.get(nome)
        linha.entregue_a_varredura = dados.pendentes_varredura.get(nome)
        linha.quarentena = int(quarentena.get(nome, 0))
        linha.janela_lembrada = (
            lembrada if lembrada is not None else (len(vistos) if vistos is not None else None)
        )
        if acomp is not None:
            linha.ultima_sonda_ok_em = acomp.ultima_sonda
            linha.falhas_seguidas = acomp.falhas_seguidas
            linha.ultimo_erro = acomp.ultimo_erro
    retrato.datasets = list(linhas.values())
    return retrato


def _segundo_o_ouvinte(pasta: str, mapa: Mapa) -> tuple[str, dict[str, str]]:
    """
    A estratégia do ouvinte e os datasets que ELE pôs fora do ao-vivo, pelo
    último ouvinte-status.json da pasta: só ele sabe o que o catálogo da origem
    disse na subida (a view sem `base_tables` no log fica só na varredura). Sem
    o arquivo: a estratégia do mapeamento, e nada de fora além do que ele diz.
    """
    from contextia_sync.captura.estrategias import resolver_estrategia

    try:
        status = ler_status_json(pasta)
    except (OSError, ValueError):
        status = {}
    ouvinte = status.get('ouvinte')
    estrategia = ouvinte.get('estrategia') if isinstance(ouvinte, dict) else None
    fora = {
        str(d.get('dataset')): str(d['motivo'])
        for d in status.get('datasets') or []
        if isinstance(d, dict) and d.get('ao_vivo') is False and d.get('motivo')
    }
    if not isinstance(estrategia, str) or not estrategia:
        estrategia = resolver_estrategia(None, mapa)[0]
    return estrategia, fora


# ---------------------------------------------------------------------------
# marcar
# ---------------------------------------------------------------------------


def achar_dataset(mapa: Mapa, pedido: str) -> DatasetVivo:
    """O dataset ao vivo pelo nome do mapeamento ou pelo normalizado; recusa o resto."""
    from contextia_sync.intake.cliente import normalizar_dataset

    vivos, fora = datasets_ao_vivo(mapa)
    try:
        nome = normalizar_dataset(pedido)
    except ValueError:
        nome = ''
    for alvo in vivos:
        if alvo.nome == nome:
            return alvo
    for rotulo, motivo in fora:
        if normalizar_dataset(rotulo) == nome:
            raise ErroMarca(
                'O dataset %s está fora do ao-vivo (%s): não tem marca de água.\n'
                'Ele vai inteiro na varredura; não há o que marcar.' % (nome, motivo)
            )
    raise ErroMarca(
        'O dataset %r não está no mapeamento.\n'
        'Os datasets ao vivo dele: %s.' % (pedido, ', '.join(a.nome for a in vivos) or '(nenhum)')
    )


_FORMATO = {
    'datetime': 'data e hora (AAAA-MM-DD HH:MM:SS, ex.: 2026-09-01 10:30:00)',
    'date': 'data (AAAA-MM-DD, ex.: 2026-09-01)',
    'numerico': 'número (ex.: 184467)',
}


def valor_da_marca(texto: str, familia: str, alvo: DatasetVivo) -> ValorDoBanco:
    """
    O valor digitado, conferido contra o tipo da coluna de mudança no catálogo.

    Uma marca de outro tipo (texto numa coluna de data, hora numa coluna só de
    data) compararia errado no `WHERE coluna > marca`: o ouvinte pularia ou
    releria sem ninguém saber o que.
    """
    texto = texto.strip()
    valor: ValorDoBanco = None
    try:
        if familia == 'datetime':
            valor = datetime.datetime.fromisoformat(texto)
        elif familia == 'date':
            valor = datetime.date.fromisoformat(texto)
            if len(texto) != 10:
                valor = None
        elif familia == 'numerico':
            numero = decimal.Decimal(texto)
            valor = int(numero) if numero == numero.to_integral_value() else numero
            if not numero.is_finite():
                valor = None
        else:
            # O catalogo nao disse o tipo (o ouvinte avisa o mesmo): vale a forma.
            valor = marca_agua.como_valor(texto) if texto else None
    except (ValueError, decimal.InvalidOperation):
        valor = None
    if valor is None:
        raise ErroMarca(
            'O valor %r não serve de marca para %s: a coluna de mudança %s é %s no catálogo'
            ' da origem.\nUse %s, ou `max` para o máximo atual da origem.'
            % (texto, alvo.nome, alvo.watch, familia, _FORMATO.get(familia, 'do mesmo tipo'))
        )
    return valor


@dataclass
class MudancaMarca:
    """O que `marcar` vai fazer, lido da origem antes de qualquer gravação."""

    dataset: str
    coluna: str
    antes: MarcaTexto | None
    depois: MarcaTexto
    # Linhas com carimbo depois da marca nova: o proximo ciclo as entrega.
    a_entregar: int
    # Linhas com carimbo entre a marca velha e a nova (so quando a marca avanca):
    # nunca vao ao vivo.
    puladas: int | None
    # A janela da folga ate a marca nova, dada por entregue (None: grande demais,
    # a janela e reenviada).
    entregues: Vistos | None
    # O teto do ouvinte (--maximo-por-ciclo): acima dele o proximo ciclo entrega
    # o dataset a varredura em vez de enviar.
    maximo: int
    entregue_a_varredura: str | None = None
    # `max` no futuro da origem: (o MAX lido, o limite para onde a marca foi).
    puxada: tuple[MarcaTexto, MarcaTexto] | None = None

    @property
    def sentido(self) -> str:
        """'primeira' (sem marca antes), 'avanca', 'recua' ou 'igual'."""
        if self.antes is None:
            return 'primeira'
        if marca_agua.acima(self.depois, self.antes):
            return 'avanca'
        if marca_agua.acima(self.antes, self.depois):
            return 'recua'
        return 'igual'

    def anuncio(self) -> list[str]:
        """As linhas de confirmação: o que será relido, reenviado ou pulado."""
        nome, antes, depois = self.dataset, self.antes, self.depois
        linhas = []
        if self.puxada is not None:
            linhas.append(
                'o MAX de %s na origem (%s) está no futuro da origem: a marca fica'
                ' em %s (a hora da origem agora), como o ouvinte faria.'
                % (self.coluna, self.puxada[0], self.puxada[1])
            )
        if self.sentido == 'igual':
            linhas.append('a marca de água de %s já é %s: nada muda.' % (nome, depois))
            return linhas
        if self.sentido == 'primeira':
            linhas.append(
                'a marca de água de %s vai de (nenhuma) para %s: nada com carimbo até %s vai'
                ' ao vivo (a carga completa é da varredura); as %s linha(s) com carimbo'
                ' depois de %s serão entregues no próximo ciclo do ouvinte.'
                % (nome, depois, depois, self.a_entregar, depois)
            )
        elif self.sentido == 'avanca':
            linhas.append(
                'a marca de água de %s vai de %s para %s: as %s linha(s) com carimbo entre %s'
                ' e %s NÃO serão entregues ao vivo; só a varredura as trará. O próximo ciclo'
                ' do ouvinte entrega só o que tiver carimbo depois de %s (%s linha(s) agora).'
                % (nome, antes, depois, self.puladas, antes, depois, depois, self.a_entregar)
            )
        else:
            linhas.append(
                'a marca de água de %s vai de %s para %s (recua): as %s linha(s) com carimbo'
                ' depois de %s serão relidas e reenviadas no próximo ciclo do ouvinte'
                ' (upsert: as que não mudaram voltam como iguais).'
                % (nome, antes, depois, self.a_entregar, depois)
            )
        if self.a_entregar > self.maximo:
            linhas.append(
                '%s linha(s) passam do teto de %s por ciclo (--maximo-por-ciclo):'
                ' o ouvinte não as envia pelo ao-vivo; entrega o dataset à'
                ' varredura.' % (self.a_entregar, self.maximo)
            )
        if self.entregue_a_varredura:
            linhas.append(
                '%s estava entregue à varredura (%s): volta ao ao-vivo a partir da'
                ' marca nova.' % (nome, self.entregue_a_varredura)
            )
        return linhas


def planejar_marca(
    captura: CapturaColuna, estado: Estado, alvo: DatasetVivo, pedido: str
) -> MudancaMarca:
    """
    O que `marcar DATASET pedido` faria, lido da origem (nada gravado).

    `pedido` e `max` (o MAX da coluna de mudança agora, puxado para a hora da
    origem agora se estiver no futuro -- o que o ouvinte faria) ou um valor,
    conferido contra o tipo da coluna e recusado se está no futuro da origem.
    """
    origem = captura.origem
    watch = alvo.watch or ''
    familia = captura.familia(alvo)
    limite = captura.limite(alvo)
    puxada = None
    if pedido.strip().lower() == MAX:
        bruto = origem.maximo(alvo.source_object, watch)
        if bruto is None:
            raise ErroMarca(
                'dataset %s: nenhuma linha de %s tem %s preenchida, e não há máximo.\n'
                'Com a marca vazia o ouvinte a fixa sozinho na primeira linha que aparecer;'
                ' ou dê um valor: estado.py marcar %s VALOR.'
                % (alvo.nome, alvo.source_object, watch, alvo.nome)
            )
        valor = captura.marca_do_maximo(alvo, bruto)
        if valor is not bruto:
            puxada = (_texto(bruto), _texto(valor))
    else:
        valor = valor_da_marca(pedido, familia, alvo)
        if marca_agua.no_futuro(valor, limite):
            raise ErroMarca(
                'O valor %s está no futuro da origem (o limite agora é %s): o ouvinte puxaria a'
                ' marca de volta na subida.\nUse um valor até a hora da origem, ou `max`.'
                % (_texto(valor), _texto(limite))
            )
    antes = estado.marca(alvo.nome)
    a_entregar = origem.contar(alvo.source_object, since=(watch, valor))
    mudanca = MudancaMarca(
        dataset=alvo.nome,
        coluna=watch,
        antes=antes,
        depois=_texto(valor),
        a_entregar=a_entregar,
        puladas=None,
        entregues=None,
        maximo=captura.maximo,
        entregue_a_varredura=estado.pendentes().get(alvo.nome),
        puxada=puxada,
    )
    if mudanca.sentido == 'avanca':
        mudanca.puladas = (
            origem.contar(alvo.source_object, since=(watch, marca_agua.como_valor(antes)))
            - a_entregar
        )
    if mudanca.sentido != 'igual':
        mudanca.entregues = captura.entregue_ate(alvo, valor)
    return mudanca


def _texto(valor: ValorDoBanco) -> MarcaTexto:
    texto = marca_agua.texto_marca(valor)
    assert texto is not None
    return texto


def aplicar_marca(estado: Estado, mudanca: MudancaMarca) -> None:
    """Grava a marca nova, o que fica lembrado como entregue, e solta da varredura."""
    estado.definir_marca(mudanca.dataset, mudanca.depois)
    if mudanca.entregues is not None:
        estado.janela(mudanca.dataset).trocar(mudanca.entregues.items())
    # Com marca, "a tabela estava vazia na primeira vez" nao vale mais.
    estado.acompanhamento(mudanca.dataset).vazia_no_inicio = False
    estado.soltar_da_varredura(mudanca.dataset)
    estado.gravar()


# ---------------------------------------------------------------------------
# esquecer-carga
# ---------------------------------------------------------------------------


def anuncio_esquecer_carga(estado: Estado, pedido: str) -> tuple[str, str]:
    """(a empresa como o estado a escreve, a linha de confirmação); recusa se não está pendente."""
    escopo = texto_escopo(pedido)
    pendentes = estado.cargas_pendentes()
    if escopo not in pendentes:
        raise ErroConfiguracao(
            'A empresa %s não tem carga inicial pendente em %s.\n'
            'Pendentes: %s.' % (escopo, estado.caminho, ', '.join(pendentes) or 'nenhuma')
        )
    return escopo, (
        'a carga inicial pendente da empresa %s será esquecida: o ouvinte não a refaz, e o'
        ' histórico dela só chega na varredura (ou numa carga à mão: connector.py --scope=%s).'
        % (escopo, escopo)
    )


def esquecer_carga(estado: Estado, escopo: str) -> None:
    """Tira a empresa de `cargas_iniciais_pendentes` e grava."""
    estado.marcar_carga_pendente(escopo, False)
    estado.gravar()
