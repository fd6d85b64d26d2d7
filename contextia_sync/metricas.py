"""
As métricas do ouvinte para o Prometheus: o `ouvinte.prom`, no formato de
texto do Prometheus, para o *textfile collector* do node_exporter.

O laço chama `escrever_metricas(pasta, dados)` a cada volta (e a cada 30 s
enquanto uma ferramenta roda), com o mesmo dicionário do `ouvinte-status.json`
(`ouvinte/relatorio.py: status_json`). O arquivo e trocado inteiro
(`arquivos.gravar_atomico`): o temporário, `.ouvinte.prom.<aleatório>.tmp` na
mesma pasta, não termina em `.prom`, e o node_exporter o ignora.

Decisões (a lista das métricas, para o operador: docs/ouvinte.md, "As métricas
(Prometheus)"; o node_exporter e os alertas: docs/implantacao.md, Etapa 6):

- Hora de acontecimento vai como INSTANTE Unix (`..._timestamp_seconds`), não
  como "segundos atrás": o arquivo de um ouvinte morto continua sendo servido
  pelo node_exporter, e um "há 12 s" congelado diria que está tudo bem para
  sempre. `time() - ouvinte_dataset_ultima_sonda_ok_timestamp_seconds` cresce
  sozinho. As horas do status são do relógio local do ouvinte, sem fuso, e
  viram instante pelo fuso deste processo (o mesmo que as gravou).
- Valor desconhecido (dataset que ainda não foi sondado, marca que não é data)
  não vira NaN: a amostra fica de fora.
- Os contadores (`_total`) moram na memória deste módulo, porque o status só
  tem o ÚLTIMO ciclo de cada dataset: cada sonda nova de um dataset (a hora
  `ultima_sonda_ok_em` mudou, e o ciclo de dados que a fez já terminou) soma
  uma vez, não importa quantas vezes o arquivo e regravado. Recomeçam do zero
  a cada subida do processo -- o `rate()`/`increase()` do Prometheus trata a
  volta a zero como reinício. As exceções são `ouvinte_dataset_chegadas_atrasadas_total`
  e as chaves removidas e incluídas pela reconciliacao, que já são totais no
  estado e sobrevivem ao reinício.
- Este módulo só usa a biblioteca padrão (o laço o importa) e
  `escrever_metricas` nunca levanta: devolve o erro como texto, e disco cheio
  não para o ouvinte.
"""

from __future__ import annotations

import datetime
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sized
from dataclasses import dataclass, field
from typing import NamedTuple, cast

from contextia_sync import __version__
from contextia_sync.arquivos import gravar_atomico

ARQUIVO_METRICAS = 'ouvinte.prom'
# O node_exporter roda com outro usuario (`prometheus` no Debian) e o ouvinte
# com UMask=0077: sem isto o arquivo nasceria 600 e ninguem o leria. Nada
# nele e segredo (nomes de dataset, contagens, horas).
MODO_ARQUIVO = 0o644
# Temporario de uma gravacao morta no meio (kill -9) mais velho que isto e lixo.
IDADE_TEMPORARIO_ORFAO = 60.0

GAUGE, COUNTER = 'gauge', 'counter'
SITUACOES = ('rodando', 'parando', 'parado')
RESULTADOS = (('novo', 'novos'), ('atualizado', 'atualizados'), ('igual', 'iguais'))

# nome -> (tipo, ajuda). A ordem e a do arquivo; docs/ouvinte.md lista todas
# (tests/test_metricas.py confere).
METRICAS: dict[str, tuple[str, str]] = {
    # -- o processo
    'ouvinte_info': (
        GAUGE,
        'Sempre 1; os rótulos dizem a versão do SDK, a estratégia de'
        ' captura, o modo (serviço, once, seco) e o cliente.',
    ),
    'ouvinte_situacao': (
        GAUGE,
        '1 na situação atual do ouvinte (rodando, parando, parado), 0 nas outras.',
    ),
    'ouvinte_iniciado_timestamp_seconds': (GAUGE, 'Quando este processo do ouvinte subiu (Unix).'),
    'ouvinte_status_atualizado_timestamp_seconds': (
        GAUGE,
        'Quando o ouvinte gravou este retrato (Unix); velho = ouvinte parado.',
    ),
    'ouvinte_intervalo_dados_seconds': (
        GAUGE,
        'O --intervalo-dados: segundos entre leituras do que mudou.',
    ),
    'ouvinte_folga_seconds': (GAUGE, 'A --folga: quanto a leitura recua atrás da marca de agua.'),
    'ouvinte_intervalo_reconciliacao_seconds': (
        GAUGE,
        'O --intervalo-reconciliacao: segundos entre duas leituras do conjunto de'
        ' chaves de um dataset (só com a reconciliação).',
    ),
    'ouvinte_falhas_seguidas': (
        GAUGE,
        'Voltas seguidas do laço com alguma falha (dataset,'
        ' empresa, ferramenta ou o ciclo inteiro).',
    ),
    'ouvinte_datasets_ao_vivo': (GAUGE, 'Datasets do mapeamento que estão no ao-vivo.'),
    'ouvinte_datasets': (GAUGE, 'Datasets do mapeamento.'),
    'ouvinte_cargas_iniciais_pendentes': (GAUGE, 'Empresas com carga inicial por refazer.'),
    'ouvinte_saude_nivel': (
        GAUGE,
        'O veredito da saúde no último status (0 OK, 1 ALERTA, 2 CRÍTICO,'
        ' 3 DESCONHECIDO): a mesma tabela de verificações do ouvinte.py --saude.',
    ),
    'ouvinte_empresas_recusadas': (
        GAUGE,
        'Empresas que não recebem dado por recusa: código'
        ' inválido no cadastro (onde="cadastro") ou chave'
        ' de outro projeto no arquivo (onde="chave").',
    ),
    'ouvinte_ferramenta_rodando': (
        GAUGE,
        '1 enquanto uma ferramenta (provisionamento, carga, varredura) roda.',
    ),
    'ouvinte_ferramenta_inicio_timestamp_seconds': (
        GAUGE,
        'Quando a ferramenta em curso começou (Unix); só enquanto ela roda.',
    ),
    # -- os ciclos
    'ouvinte_ciclo_ultimo_timestamp_seconds': (
        GAUGE,
        'Quando o último ciclo de cada tipo terminou neste processo (Unix).',
    ),
    'ouvinte_ciclos_total': (COUNTER, 'Ciclos terminados neste processo, por tipo.'),
    'ouvinte_ciclo_erros_total': (
        COUNTER,
        'Erros contados pelos ciclos (dataset, lote, empresa, fase), por tipo de ciclo.',
    ),
    'ouvinte_laco_falhas_total': (
        COUNTER,
        'Voltas do laço que falharam inteiras (origem fora do ar, por exemplo).',
    ),
    # -- por dataset
    'ouvinte_dataset_ao_vivo': (
        GAUGE,
        '1 se o dataset está no ao-vivo, 0 se está fora (o motivo está no ouvinte-status.json).',
    ),
    'ouvinte_dataset_so_varredura': (
        GAUGE,
        'Só nos datasets fora do ao-vivo: 1 se é correção por fazer (a captura pelo log não'
        ' pode segui-lo: a view sem base_tables), 0 se é escolha do mapeamento.',
    ),
    'ouvinte_dataset_atraso_origem_seconds': (
        GAUGE,
        'Hora da origem menos a marca de água, na última sonda (só marca de data).',
    ),
    'ouvinte_dataset_ultima_sonda_ok_timestamp_seconds': (
        GAUGE,
        'Quando o dataset foi sondado com sucesso pela última vez (Unix).',
    ),
    'ouvinte_dataset_ultima_mudanca_vista_timestamp_seconds': (
        GAUGE,
        'Quando o ouvinte leu uma linha nova do dataset pela última vez (Unix).',
    ),
    'ouvinte_dataset_falhas_seguidas': (
        GAUGE,
        'Falhas seguidas do dataset (leitura ou envio); 0 depois de um ciclo bom.',
    ),
    'ouvinte_dataset_erro_desde_timestamp_seconds': (
        GAUGE,
        'Desde quando o dataset esta falhando (Unix); só enquanto falha.',
    ),
    'ouvinte_dataset_falhas_total': (
        COUNTER,
        'Ciclos em que o dataset falhou (leitura ou envio), neste processo.',
    ),
    'ouvinte_dataset_quarentena_registros': (
        GAUGE,
        'Registros do dataset na quarentena (recusados de vez pelo intake).',
    ),
    'ouvinte_captura_atraso_origem_segundos': (
        GAUGE,
        'binlog/slot_logico: segundos atrás da origem (hora do último evento lido do log).',
    ),
    'ouvinte_spool_mudancas': (GAUGE, 'binlog/slot_logico: mudanças no spool esperando entrega.'),
    'ouvinte_spool_bytes': (GAUGE, 'binlog/slot_logico: bytes do spool no disco.'),
    'ouvinte_spool_mais_velha_segundos': (
        GAUGE,
        'binlog/slot_logico: idade da mudança mais velha ainda não entregue.',
    ),
    'ouvinte_captura_pausada': (GAUGE, 'binlog/slot_logico: 1 se a captura pausou (spool cheio).'),
    'ouvinte_captura_critica': (
        GAUGE,
        'binlog/slot_logico: 1 se a posição do log foi perdida (apagada; o slot'
        ' invalidado, apagado ou movido) e a varredura ainda não rodou.',
    ),
    'ouvinte_slot_wal_retido_bytes': (
        GAUGE,
        'slot_logico: bytes de WAL que o slot retém no disco da origem.',
    ),
    'ouvinte_slot_wal_seguro_bytes': (
        GAUGE,
        'slot_logico: bytes até o PostgreSQL invalidar o slot'
        ' (max_slot_wal_keep_size; ausente se ilimitado).',
    ),
    'ouvinte_dataset_chaves_nulas_linhas': (
        GAUGE,
        'Linhas com a key nula que ficaram de fora do Contextia (a view sem key para elas).',
    ),
    'ouvinte_dataset_chaves_repetidas': (
        GAUGE,
        'Keys repetidas na view (na mesma empresa) no último ciclo: vai uma linha por key.',
    ),
    'ouvinte_dataset_sem_carimbo_registros': (
        GAUGE,
        'Linhas com a coluna de mudança nula (só a varredura as leva).',
    ),
    'ouvinte_dataset_carimbo_futuro_registros': (
        GAUGE,
        'Linhas com carimbo além da hora da origem no último ciclo.',
    ),
    'ouvinte_dataset_maior_atraso_seconds': (
        GAUGE,
        'Maior atraso de uma chegada atrasada já vista (segundos abaixo da marca).',
    ),
    'ouvinte_dataset_atraso_preocupante': (
        GAUGE,
        '1 se o maior atraso passou da metade da --folga.',
    ),
    'ouvinte_dataset_chegadas_atrasadas_total': (
        COUNTER,
        'Chegadas atrasadas vistas (só vieram por causa da --folga); do estado,'
        ' sobrevive ao reinício.',
    ),
    'ouvinte_dataset_entregue_a_varredura': (
        GAUGE,
        '1 se o dataset passou do teto e espera a varredura.',
    ),
    'ouvinte_dataset_registros_enviados_total': (
        COUNTER,
        'Registros enviados ao intake pelo ao-vivo, neste processo.',
    ),
    'ouvinte_dataset_registros_aceitos_total': (
        COUNTER,
        'O que o intake disse dos registros enviados: novo, atualizado ou igual'
        ' (reenviado sem mudança), neste processo.',
    ),
    # -- a reconciliacao, por dataset
    'ouvinte_dataset_reconciliacao_ativa': (
        GAUGE,
        '1 se a reconciliação acompanha o dataset, 0 se ele está fora dela (sem key).',
    ),
    'ouvinte_dataset_reconciliacao_ultima_timestamp_seconds': (
        GAUGE,
        'Quando a última reconciliação do dataset leu e comparou o conjunto inteiro (Unix).',
    ),
    'ouvinte_dataset_reconciliacao_duracao_seconds': (
        GAUGE,
        'Quanto durou a última reconciliação do dataset (leitura e comparação).',
    ),
    'ouvinte_dataset_reconciliacao_chaves': (
        GAUGE,
        'Chaves lidas na origem na última reconciliação (das empresas com chave).',
    ),
    'ouvinte_dataset_reconciliacao_recusada': (
        GAUGE,
        '1 se o teto de remoção recusou a última reconciliação (nada removido).',
    ),
    'ouvinte_dataset_reconciliacao_falhas_seguidas': (
        GAUGE,
        'Reconciliações seguidas do dataset que falharam (nada removido).',
    ),
    'ouvinte_dataset_chaves_removidas_total': (
        COUNTER,
        'Chaves removidas do Contextia pela reconciliação; do estado, sobrevive ao reinício.',
    ),
    'ouvinte_dataset_chaves_incluidas_total': (
        COUNTER,
        'Linhas novas que a reconciliação viu e enviou; do estado, sobrevive ao reinício.',
    ),
    # -- a varredura
    'ouvinte_varredura_habilitada': (GAUGE, '1 se há varredura diária (--varredura HH:MM).'),
    'ouvinte_varredura_iniciada_timestamp_seconds': (
        GAUGE,
        'Quando a última varredura começou (Unix).',
    ),
    'ouvinte_varredura_terminada_timestamp_seconds': (
        GAUGE,
        'Quando a última varredura terminou (Unix).',
    ),
    'ouvinte_varredura_ok': (
        GAUGE,
        '1 se a última varredura terminou sem erro e fechou tudo, 0 se não; ausente em curso.',
    ),
    'ouvinte_varredura_ultima_ok_timestamp_seconds': (
        GAUGE,
        'Quando terminou a última varredura sem erro nenhum (Unix).',
    ),
    'ouvinte_varredura_erros': (GAUGE, 'Fases com erro na última varredura.'),
    'ouvinte_varredura_empresas_nao_fechadas': (
        GAUGE,
        'Empresas em que a última varredura não fechou a carga do dataset.',
    ),
}


@dataclass
class Acumulado:
    """Os contadores de um processo do ouvinte (o que o status não guarda)."""

    chave: tuple[object, ...] = ()
    # dataset -> a `ultima_sonda_ok_em` ja somada (ou ja vista de antes da subida).
    sondas: dict[str, str] = field(default_factory=dict)
    # dataset -> `falhas_seguidas` na ultima gravacao.
    falhas_vistas: dict[str, int] = field(default_factory=dict)
    falhas: dict[str, int] = field(default_factory=dict)
    enviados: dict[str, int] = field(default_factory=dict)
    aceitos: dict[tuple[str, str], int] = field(default_factory=dict)
    # tipo de ciclo -> o `em` do ultimo ja somado.
    ciclos_em: dict[str, str] = field(default_factory=dict)
    ciclos: dict[str, int] = field(default_factory=dict)
    ciclo_erros: dict[str, int] = field(default_factory=dict)
    laco_falhas: int = 0

    def absorver(self, dados: Mapping[str, object]) -> None:
        """Soma ao acumulado o que `dados` tem de novo (e só o que é novo)."""
        ouvinte = _mapa(dados.get('ouvinte'))
        iniciado = _instante(ouvinte.get('iniciado_em'))
        ciclos = _mapa(dados.get('ciclos'))
        for nome, ciclo in ciclos.items():
            ciclo = _mapa(ciclo)
            em = ciclo.get('em')
            if not isinstance(em, str) or self.ciclos_em.get(nome) == em:
                continue
            self.ciclos_em[nome] = em
            if nome == 'falha':
                self.laco_falhas += 1
                continue
            self.ciclos[nome] = self.ciclos.get(nome, 0) + 1
            self.ciclo_erros[nome] = self.ciclo_erros.get(nome, 0) + _inteiro(ciclo.get('erros'))
        # Ate onde os ciclos de dados deste processo ja terminaram: uma sonda
        # posterior e de um ciclo ainda em curso, e seus envios nao acabaram.
        fins = [_instante(_mapa(ciclos.get(nome)).get('em')) for nome in ('dados', 'falha')]
        terminado = max((f for f in fins if f is not None), default=None)
        for d in _datasets(dados):
            if d.get('ao_vivo') is False:
                continue
            nome = str(d.get('dataset'))
            self._falhas(nome, d, iniciado)
            sonda = d.get('ultima_sonda_ok_em')
            quando = _instante(sonda)
            if not isinstance(sonda, str) or quando is None or self.sondas.get(nome) == sonda:
                continue
            if iniciado is not None and quando < iniciado:
                self.sondas[nome] = sonda  # de antes da subida: ja foi contada la
                continue
            if terminado is None or quando > terminado:
                continue  # o ciclo desta sonda ainda nao terminou
            self.sondas[nome] = sonda
            self.enviados[nome] = self.enviados.get(nome, 0) + _inteiro(d.get('enviados'))
            for resultado, campo in RESULTADOS:
                chave = (nome, resultado)
                self.aceitos[chave] = self.aceitos.get(chave, 0) + _inteiro(d.get(campo))

    def _falhas(self, nome: str, d: Mapping[str, object], iniciado: float | None) -> None:
        atual = _inteiro(d.get('falhas_seguidas'))
        antes = self.falhas_vistas.get(nome)
        if antes is None:
            # Primeira vista neste processo: so conta a sequencia que comecou
            # depois da subida (a de antes ja foi contada pelo processo anterior).
            desde = _instante(d.get('erro_desde'))
            novas = (
                atual
                if atual and desde is not None and (iniciado is None or desde >= iniciado)
                else 0
            )
        else:
            novas = atual - antes if atual >= antes else atual
        self.falhas_vistas[nome] = atual
        self.falhas[nome] = self.falhas.get(nome, 0) + novas


# pasta absoluta -> o acumulado do processo que grava nela.
_ACUMULADOS: dict[str, Acumulado] = {}
_TRAVA = threading.RLock()


def escrever_metricas(diretorio: str, dados: Mapping[str, object]) -> str | None:
    """
    Troca `<diretório>/ouvinte.prom` inteiro. Devolve o erro (texto) ou None.

    Nunca levanta (fora BaseException, como a parada fria): métricas que não
    se gravam não são motivo para parar de levar dado.
    """
    caminho = os.path.join(diretorio, ARQUIVO_METRICAS)
    try:
        with _TRAVA:
            acumulado = _acumulado_de(diretorio, dados)
            acumulado.absorver(dados)
            texto = texto_metricas(dados, acumulado)
        gravar_atomico(caminho, texto, modo=MODO_ARQUIVO)
    except Exception as erro:  # noqa: BLE001 - metrica nunca derruba o ouvinte
        return 'métricas %s: %s: %s' % (caminho, type(erro).__name__, erro)
    return None


def _acumulado_de(diretorio: str, dados: Mapping[str, object]) -> Acumulado:
    """O acumulado desta pasta; outro processo do ouvinte (outra subida) recomeça do zero."""
    ouvinte = _mapa(dados.get('ouvinte'))
    chave = (ouvinte.get('pid'), ouvinte.get('iniciado_em'))
    pasta = os.path.abspath(diretorio)
    acumulado = _ACUMULADOS.get(pasta)
    if acumulado is None or acumulado.chave != chave:
        acumulado = _ACUMULADOS[pasta] = Acumulado(chave=chave)
        _limpar_temporarios(pasta)
    return acumulado


def _limpar_temporarios(pasta: str) -> None:
    """Apaga `.ouvinte.prom.*.tmp` deixados por uma gravação morta no meio (kill -9)."""
    prefixo = '.%s.' % ARQUIVO_METRICAS
    try:
        nomes = os.listdir(pasta)
    except OSError:
        return
    limite = time.time() - IDADE_TEMPORARIO_ORFAO
    for nome in nomes:
        if nome.startswith(prefixo) and nome.endswith('.tmp'):
            caminho = os.path.join(pasta, nome)
            try:
                if os.stat(caminho).st_mtime < limite:
                    os.unlink(caminho)
            except OSError:
                pass


# -- as amostras e os coletores ------------------------------------------------------


class Amostra(NamedTuple):
    """Uma série: os rótulos e o valor."""

    rotulos: dict[str, str]
    valor: float | int


class Amostras:
    """As amostras de cada família, na ordem em que os coletores as deram."""

    def __init__(self) -> None:
        self.por_familia: dict[str, list[Amostra]] = {n: [] for n in METRICAS}

    def por(self, nome: str, valor: object, **rotulos: str) -> None:
        """Anota uma amostra; valor que não é número finito fica de fora (nada de NaN)."""
        numero = _numero(valor)
        if numero is not None:
            self.por_familia[nome].append(Amostra(rotulos, numero))


# Um coletor lê uma parte do status (e do acumulado) e anota as amostras dela.
Coletor = Callable[[Mapping[str, object], Acumulado, Amostras], None]


def _do_processo(dados: Mapping[str, object], _acumulado: Acumulado, a: Amostras) -> None:
    """A seção `ouvinte`: quem é, a situação, o ritmo."""
    ouvinte = _mapa(dados.get('ouvinte'))
    a.por(
        'ouvinte_info',
        1,
        versao=__version__,
        estrategia=_texto(ouvinte.get('estrategia')),
        modo=_texto(ouvinte.get('modo')),
        cliente=_texto(ouvinte.get('cliente')),
    )
    situacao = ouvinte.get('situacao')
    for s in SITUACOES:
        a.por('ouvinte_situacao', int(s == situacao), situacao=s)
    if situacao not in SITUACOES and situacao is not None:
        a.por('ouvinte_situacao', 1, situacao=_texto(situacao))
    a.por('ouvinte_iniciado_timestamp_seconds', _instante(ouvinte.get('iniciado_em')))
    a.por('ouvinte_status_atualizado_timestamp_seconds', _instante(ouvinte.get('atualizado_em')))
    a.por('ouvinte_intervalo_dados_seconds', ouvinte.get('intervalo_dados_s'))
    a.por('ouvinte_folga_seconds', ouvinte.get('folga_s'))
    a.por('ouvinte_intervalo_reconciliacao_seconds', ouvinte.get('intervalo_reconciliacao_s'))
    a.por('ouvinte_falhas_seguidas', ouvinte.get('falhas_seguidas'))
    a.por('ouvinte_datasets_ao_vivo', ouvinte.get('datasets_ao_vivo'))
    a.por('ouvinte_datasets', ouvinte.get('datasets_total'))


_NIVEIS_DA_SAUDE = {'OK': 0, 'ALERTA': 1, 'CRITICO': 2, 'DESCONHECIDO': 3}


def _da_saude(dados: Mapping[str, object], _acumulado: Acumulado, a: Amostras) -> None:
    """O veredito que o ouvinte pôs no status (`relatorio.saude_no_status`)."""
    nivel = _mapa(dados.get('saude')).get('nivel')
    if nivel in _NIVEIS_DA_SAUDE:
        a.por('ouvinte_saude_nivel', _NIVEIS_DA_SAUDE[nivel])


def _das_empresas(dados: Mapping[str, object], _acumulado: Acumulado, a: Amostras) -> None:
    """As empresas com carga inicial por refazer e as recusadas (por onde)."""
    cargas = dados.get('cargas_iniciais_pendentes')
    if isinstance(cargas, list):
        a.por('ouvinte_cargas_iniciais_pendentes', len(cargas))
    recusadas = dados.get('empresas_recusadas')
    if isinstance(recusadas, list):
        for onde in ('cadastro', 'chave'):
            a.por(
                'ouvinte_empresas_recusadas',
                sum(1 for r in recusadas if isinstance(r, Mapping) and r.get('onde') == onde),
                onde=onde,
            )


def _da_ferramenta(dados: Mapping[str, object], _acumulado: Acumulado, a: Amostras) -> None:
    ferramenta = dados.get('ferramenta')
    a.por('ouvinte_ferramenta_rodando', int(isinstance(ferramenta, Mapping)))
    if isinstance(ferramenta, Mapping):
        a.por('ouvinte_ferramenta_inicio_timestamp_seconds', _instante(ferramenta.get('desde')))


def _dos_ciclos(dados: Mapping[str, object], acumulado: Acumulado, a: Amostras) -> None:
    """O último de cada tipo (do status) e as contas deste processo (do acumulado)."""
    for nome, ciclo in sorted(_mapa(dados.get('ciclos')).items()):
        if nome != 'falha':
            a.por(
                'ouvinte_ciclo_ultimo_timestamp_seconds',
                _instante(_mapa(ciclo).get('em')),
                ciclo=str(nome),
            )
    for nome in sorted(acumulado.ciclos):
        a.por('ouvinte_ciclos_total', acumulado.ciclos[nome], ciclo=nome)
        a.por('ouvinte_ciclo_erros_total', acumulado.ciclo_erros.get(nome, 0), ciclo=nome)
    a.por('ouvinte_laco_falhas_total', acumulado.laco_falhas)


def _dos_datasets(dados: Mapping[str, object], acumulado: Acumulado, a: Amostras) -> None:
    """Cada dataset: fora do ao-vivo, só isso; no ao-vivo, tudo dele."""
    quarentena = _quarentena_por_dataset(dados)
    for d in _datasets(dados):
        nome = str(d.get('dataset'))
        vivo = d.get('ao_vivo') is not False
        a.por('ouvinte_dataset_ao_vivo', int(vivo), dataset=nome)
        if not vivo:
            a.por('ouvinte_dataset_so_varredura', int(d.get('so_varredura') is True), dataset=nome)
        if vivo:
            _do_dataset(a, nome, d, acumulado, em_quarentena=nome in quarentena)
            _reconciliacao(a, nome, d.get('reconciliacao'))


def _do_dataset(
    a: Amostras, nome: str, d: Mapping[str, object], acumulado: Acumulado, em_quarentena: bool
) -> None:
    """As amostras de um dataset ao vivo (a reconciliação dele à parte)."""
    a.por('ouvinte_dataset_atraso_origem_seconds', d.get('atraso_origem_s'), dataset=nome)
    a.por(
        'ouvinte_dataset_ultima_sonda_ok_timestamp_seconds',
        _instante(d.get('ultima_sonda_ok_em')),
        dataset=nome,
    )
    a.por(
        'ouvinte_dataset_ultima_mudanca_vista_timestamp_seconds',
        _instante(d.get('ultima_mudanca_vista_em')),
        dataset=nome,
    )
    a.por('ouvinte_dataset_falhas_seguidas', d.get('falhas_seguidas') or 0, dataset=nome)
    if d.get('ultimo_erro'):
        a.por(
            'ouvinte_dataset_erro_desde_timestamp_seconds',
            _instante(d.get('erro_desde')),
            dataset=nome,
        )
    a.por('ouvinte_dataset_falhas_total', acumulado.falhas.get(nome, 0), dataset=nome)
    if not em_quarentena:  # o da seção `quarentena` vale mais
        a.por('ouvinte_dataset_quarentena_registros', d.get('quarentena') or 0, dataset=nome)
    a.por('ouvinte_dataset_sem_carimbo_registros', d.get('sem_carimbo'), dataset=nome)
    a.por('ouvinte_dataset_chaves_nulas_linhas', d.get('chaves_nulas') or 0, dataset=nome)
    # `chaves_repetidas` é a lista que o status grava (relatorio.status_json).
    repetidas = cast(Sized, d.get('chaves_repetidas') or ())
    a.por('ouvinte_dataset_chaves_repetidas', len(repetidas), dataset=nome)
    a.por('ouvinte_dataset_carimbo_futuro_registros', d.get('futuras'), dataset=nome)
    a.por('ouvinte_dataset_maior_atraso_seconds', d.get('maior_atraso_s'), dataset=nome)
    a.por('ouvinte_dataset_atraso_preocupante', bool(d.get('atraso_preocupante')), dataset=nome)
    a.por('ouvinte_dataset_chegadas_atrasadas_total', d.get('atrasadas_total') or 0, dataset=nome)
    a.por(
        'ouvinte_dataset_entregue_a_varredura',
        d.get('entregue_a_varredura') is not None,
        dataset=nome,
    )
    a.por('ouvinte_dataset_registros_enviados_total', acumulado.enviados.get(nome, 0), dataset=nome)
    for resultado, _campo in RESULTADOS:
        a.por(
            'ouvinte_dataset_registros_aceitos_total',
            acumulado.aceitos.get((nome, resultado), 0),
            dataset=nome,
            resultado=resultado,
        )


def _reconciliacao(a: Amostras, nome: str, rec: object) -> None:
    """As métricas da reconciliacao de um dataset (nada, se a estratégia não reconcilia)."""
    if not isinstance(rec, Mapping):
        return
    ativa = bool(rec.get('ativa'))
    a.por('ouvinte_dataset_reconciliacao_ativa', ativa, dataset=nome)
    if not ativa:
        return
    a.por(
        'ouvinte_dataset_reconciliacao_ultima_timestamp_seconds',
        _instante(rec.get('ultima_em')),
        dataset=nome,
    )
    a.por('ouvinte_dataset_reconciliacao_duracao_seconds', rec.get('duracao_s'), dataset=nome)
    a.por('ouvinte_dataset_reconciliacao_chaves', rec.get('chaves'), dataset=nome)
    a.por('ouvinte_dataset_reconciliacao_recusada', bool(rec.get('recusa')), dataset=nome)
    a.por(
        'ouvinte_dataset_reconciliacao_falhas_seguidas',
        rec.get('falhas_seguidas') or 0,
        dataset=nome,
    )
    a.por('ouvinte_dataset_chaves_removidas_total', rec.get('removidas_total') or 0, dataset=nome)
    a.por('ouvinte_dataset_chaves_incluidas_total', rec.get('incluidas_total') or 0, dataset=nome)


def _quarentena_por_dataset(dados: Mapping[str, object]) -> Mapping[str, object]:
    return _mapa(_mapa(dados.get('quarentena')).get('por_dataset'))


def _da_quarentena(dados: Mapping[str, object], _acumulado: Acumulado, a: Amostras) -> None:
    # Todo dataset que tem registro la, vivo ou nao (saiu do mapeamento, foi
    # para fora do ao-vivo): o registro continua fora do Contextia.
    for nome, quantos in sorted(_quarentena_por_dataset(dados).items()):
        a.por('ouvinte_dataset_quarentena_registros', quantos, dataset=str(nome))


def _da_captura(dados: Mapping[str, object], _acumulado: Acumulado, a: Amostras) -> None:
    """`binlog`, `slot_logico`: o atraso, o spool, a pausa, a posição perdida, o WAL."""
    captura = _mapa(dados.get('captura'))
    if not captura:
        return
    a.por('ouvinte_captura_atraso_origem_segundos', _numero(captura.get('atraso_origem_s')))
    a.por('ouvinte_spool_mudancas', _numero(captura.get('spool_itens')))
    a.por('ouvinte_spool_bytes', _numero(captura.get('spool_bytes')))
    a.por('ouvinte_spool_mais_velha_segundos', _numero(captura.get('spool_idade_s')))
    a.por('ouvinte_captura_pausada', bool(captura.get('pausada')))
    a.por('ouvinte_captura_critica', bool(captura.get('critico')))
    a.por('ouvinte_slot_wal_retido_bytes', _numero(captura.get('wal_retido_bytes')))
    a.por('ouvinte_slot_wal_seguro_bytes', _numero(captura.get('wal_seguro_bytes')))


def _da_varredura(dados: Mapping[str, object], _acumulado: Acumulado, a: Amostras) -> None:
    varredura = _mapa(dados.get('varredura'))
    if 'hora' in varredura:
        a.por('ouvinte_varredura_habilitada', varredura.get('hora') is not None)
    a.por('ouvinte_varredura_iniciada_timestamp_seconds', _instante(varredura.get('iniciada_em')))
    a.por('ouvinte_varredura_terminada_timestamp_seconds', _instante(varredura.get('terminada_em')))
    if isinstance(varredura.get('ok'), bool):
        a.por('ouvinte_varredura_ok', varredura['ok'])
    a.por('ouvinte_varredura_ultima_ok_timestamp_seconds', _instante(varredura.get('ultima_ok_em')))
    if isinstance(varredura.get('erros'), list):
        a.por('ouvinte_varredura_erros', len(cast('list[object]', varredura['erros'])))
    for nome, empresas in sorted(_mapa(varredura.get('nao_fechados')).items()):
        if isinstance(empresas, list):
            a.por('ouvinte_varredura_empresas_nao_fechadas', len(empresas), dataset=str(nome))


# A tabela dos coletores, como os do node_exporter: cada um uma parte do status.
# A ordem das famílias no arquivo é a de METRICAS, não esta.
COLETORES: tuple[Coletor, ...] = (
    _do_processo,
    _da_saude,
    _das_empresas,
    _da_ferramenta,
    _dos_ciclos,
    _dos_datasets,
    _da_quarentena,
    _da_captura,
    _da_varredura,
)


def texto_metricas(dados: Mapping[str, object], acumulado: Acumulado | None = None) -> str:
    """O conteúdo do `ouvinte.prom` para `dados` (o ouvinte-status.json): a tabela dobrada."""
    acumulado = acumulado if acumulado is not None else Acumulado()
    amostras = Amostras()
    for coletor in COLETORES:
        coletor(dados, acumulado, amostras)
    return _formatar(amostras.por_familia)


# -- o formato de texto (exposition format 0.0.4) ---------------------------------


def _formatar(amostras: Mapping[str, list[Amostra]]) -> str:
    linhas: list[str] = []
    for nome, (tipo, ajuda) in METRICAS.items():
        lista = amostras.get(nome) or []
        if not lista:
            continue  # familia sem amostra fica de fora (nada de NaN)
        linhas.append('# HELP %s %s' % (nome, _escapar_ajuda(ajuda)))
        linhas.append('# TYPE %s %s' % (nome, tipo))
        vistos: set[tuple[tuple[str, str], ...]] = set()
        for rotulos, valor in sorted(lista, key=lambda a: sorted(a[0].items())):
            chave = tuple(sorted(rotulos.items()))
            if chave in vistos:
                continue  # serie repetida invalidaria o arquivo inteiro
            vistos.add(chave)
            linhas.append('%s%s %s' % (nome, _rotulos(rotulos), _formatar_valor(valor)))
    return ''.join(linha + '\n' for linha in linhas)


def _rotulos(rotulos: Mapping[str, str]) -> str:
    if not rotulos:
        return ''
    return '{%s}' % ','.join(
        '%s="%s"' % (chave, escapar_rotulo(valor)) for chave, valor in sorted(rotulos.items())
    )


def escapar_rotulo(valor: str) -> str:
    """Valor de rótulo no formato de texto: barra invertida, aspas e quebra de linha."""
    return valor.replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')


def _escapar_ajuda(texto: str) -> str:
    return texto.replace('\\', '\\\\').replace('\n', '\\n')


def _formatar_valor(valor: float | int) -> str:
    if isinstance(valor, int):
        return str(valor)
    if valor.is_integer() and abs(valor) < 1e15:
        return str(int(valor))
    return repr(valor)


# -- leitura defensiva do dicionario do status ----------------------------------------


def _mapa(valor: object) -> Mapping[str, object]:
    return valor if isinstance(valor, Mapping) else {}


def _datasets(dados: Mapping[str, object]) -> Iterable[Mapping[str, object]]:
    lista = dados.get('datasets')
    if not isinstance(lista, list):
        return []
    return [d for d in lista if isinstance(d, Mapping) and d.get('dataset') is not None]


def _numero(valor: object) -> float | int | None:
    """O valor da amostra, ou None (fora do arquivo) se não é um número finito."""
    if isinstance(valor, bool):
        return int(valor)
    if isinstance(valor, int):
        return valor
    if isinstance(valor, float):
        return valor if math.isfinite(valor) else None
    return None


def _inteiro(valor: object) -> int:
    return valor if isinstance(valor, int) and not isinstance(valor, bool) and valor > 0 else 0


def _texto(valor: object) -> str:
    return '' if valor is None else str(valor)


def _instante(texto: object) -> float | None:
    """Hora ISO do status (local, sem fuso; ou com fuso) -> instante Unix, ou None."""
    if not isinstance(texto, str) or not texto:
        return None
    try:
        return datetime.datetime.fromisoformat(texto).timestamp()
    except (ValueError, OverflowError, OSError):
        return None
