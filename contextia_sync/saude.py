"""
A saúde do ouvinte, com as convenções de um plugin de monitoramento (Nagios,
Icinga, Zabbix, o `check_*` do monitoring-plugins):

    ouvinte.py --saude --estado DIR [limites]
    python -m contextia_sync.saude --estado DIR [limites]
    bash deploy/verificar-saude.sh [DIR] [MINUTOS]     (a casca para o cron e o NRPE)

Lê o `ouvinte-status.json` que o ouvinte reescreve a cada volta do laço (e a
cada 30 s enquanto uma ferramenta roda) e responde UMA linha, com os dados de
desempenho depois da barra:

    OUVINTE CRITICO - dataset titulos_view sem ciclo bom há 312s, ...: ... | idade_status=2s;...

e o código de saída 0 OK, 1 ALERTA, 2 CRITICO, 3 DESCONHECIDO. Argumento
inválido e DESCONHECIDO (3), não o 2 do argparse: 2 quer dizer CRITICO para
quem chama um plugin. As regras, cada limite e o seu padrão estão em `REGRAS`
(o `--help` as mostra) e em docs/implantacao.md (Etapa 6); os padrões, em
padroes.py.

Só biblioteca padrão: não abre a origem, não fala com o Contextia, não pega a
trava -- roda ao lado do ouvinte, como outro usuário (root, o do NRPE com
sudo) ou de dentro do cron, em milissegundos.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import stat
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from contextia_sync import __version__, padroes
from contextia_sync.linha_de_comando import ParserPt
from contextia_sync.estado.status import (
    ARQUIVO_STATUS,
    ARQUIVO_STATUS_JSON,
    VERSAO_STATUS,
    ler_status_json,
)

OK, ALERTA, CRITICO, DESCONHECIDO = 0, 1, 2, 3
NOMES = {OK: 'OK', ALERTA: 'ALERTA', CRITICO: 'CRITICO', DESCONHECIDO: 'DESCONHECIDO'}
PROG = 'ouvinte.py --saude'

# Quantos motivos cabem na linha (o resto vira "(+N)"): o Nagios guarda 4 KB da
# saida de um plugin, e a pessoa acordada as 3h le a primeira frase.
MOTIVOS_NA_LINHA = 6
TAMANHO_DO_ERRO = 160

REGRAS = """\
Regras (cada limite e uma opção; os padrões moram em contextia_sync/padroes.py):

CRITICO
  - o ouvinte-status.json não existe ou esta ilegível (o ouvinte nunca
    completou uma volta aqui, ou morreu);
  - o status não é reescrito há mais de --max-idade;
  - o serviço parou (situação "parado" no modo serviço) -- no --once do cron,
    parado e o normal e só a idade conta;
  - o pid do status não existe mais e o status diz "rodando" (kill -9, OOM;
    --sem-pid desliga, para a saúde rodando noutro namespace de pid);
  - um dataset ao vivo sem ciclo bom (sonda E envio) há mais de --max-sem-sonda,
    medido na hora do último ciclo de dados -- o Contextia fora por um ciclo
    inteiro conta, e o tempo de uma ferramenta (varredura, carga inicial) não;
  - --max-falhas voltas seguidas do laço com alguma falha, ou --max-falhas
    falhas seguidas de um dataset (ou da reconciliação dele);
  - a última varredura falhou (ok false: alguma fase com erro, ou algum
    dataset que ela não fechou em toda empresa);
  - com a varredura diária ligada, a última varredura boa tem mais de
    --max-varredura;
  - dataset entregue a varredura com a varredura diária desligada (parado até
    um --varrer-agora);
  - empresa com a chave de outro projeto no arquivo de chaves (nada vai para
    ela até a correção);
  - `slot_logico`: o WAL retido pelo slot passou de --wal-critico, ou o slot
    foi invalidado, apagado ou movido (os datasets esperam a varredura).
ALERTA
  - `slot_logico`: o WAL retido pelo slot passou de --wal-alerta;
  - falhas seguidas abaixo de --max-falhas (do laço ou de um dataset);
  - registros na quarentena; linhas sem carimbo; linhas com carimbo no
    futuro; chegada atrasada além da metade da --folga; dataset entregue a
    varredura; carga inicial de empresa nova pendente;
  - uma ferramenta rodando há mais de --max-ferramenta;
  - código de empresa recusado no cadastro do ERP (caractere fora do
    permitido: nunca provisionado);
  - reconciliação recusada pelo teto de remoção (nada removido), com falha
    (abaixo de --max-falhas), ou sem leitura completa há mais de N intervalos
    de reconciliação;
  - uma ferramenta rodando há mais de --max-ferramenta;
  - varredura interrompida (parada, ou o ouvinte morreu no meio); nenhuma
    varredura boa registrada ainda;
  - o ouvinte parando; o último status e de um --dry-run; nenhum dataset ao vivo;
  - a execução --once do pid do status morreu sem terminar.
DESCONHECIDO
  - argumento inválido; a pasta --estado nao existe ou este usuário não a lê
    (a saúde não sabe dizer -- não é o ouvinte que caiu); status de uma versão
    que esta saúde não conhece.
"""

SAIDAS = ('Saída (convenção dos plugins de monitoramento): 0 OK, 1 ALERTA, 2 CRITICO,'
          ' 3 DESCONHECIDO. Uma linha, com os dados de desempenho depois de "|".')


# ------------------------------------------------------------------ argumentos
class ErroArgumento(Exception):
    """Argumento inválido: a saúde responde DESCONHECIDO (3)."""


class _Parser(ParserPt):
    """
    Erro de argumento e DESCONHECIDO (3), não o 2 do argparse (2 e CRITICO).
    As frases do argparse já chegam em português (linha_de_comando.py: ParserPt).
    """

    def error(self, message: str) -> NoReturn:
        raise ErroArgumento(message)


_DURACAO = re.compile(r'^\s*(\d+(?:[.,]\d+)?)\s*(s|seg|m|min|h)?\s*$', re.I)
_UNIDADES = {None: 1, 's': 1, 'seg': 1, 'm': 60, 'min': 60, 'h': 3600}


def duracao(texto: str) -> float:
    """'1200' -> 1200; '20m', '20min' -> 1200; '26h' -> 93600; '90s' -> 90."""
    achado = _DURACAO.match(texto or '')
    if not achado:
        raise argparse.ArgumentTypeError(
            'duração invalida: %r (segundos, ou com unidade: 90s, 20m, 26h)' % texto)
    unidade = achado.group(2).lower() if achado.group(2) else None
    return float(achado.group(1).replace(',', '.')) * _UNIDADES[unidade]


def _inteiro_positivo(texto: str) -> int:
    try:
        valor = int(texto)
    except ValueError:
        raise argparse.ArgumentTypeError('inteiro inválido: %r' % texto) from None
    if valor < 1:
        raise argparse.ArgumentTypeError('tem de ser 1 ou mais: %r' % texto)
    return valor


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter, add_help=False,
        allow_abbrev=False,
        description='A saúde do ouvinte para o monitoramento: lê <estado>/%s e responde\n'
                    'uma linha e o código de um plugin de monitoramento. Não roda o ouvinte,\n'
                    'não abre a origem, não fala com o Contextia.' % ARQUIVO_STATUS_JSON,
        epilog=REGRAS + '\n' + SAIDAS)
    p.add_argument('-h', '--help', action='help', help='mostra esta ajuda e sai (código 0)')
    p.add_argument('--version', action='version', help='mostra a versão e sai',
                   version='%s (contextia_sync %s)' % (PROG, __version__))
    p.add_argument('--estado', metavar='DIR',
                   help='obrigatória: o --estado do ouvinte (onde ele escreve o %s)'
                        % ARQUIVO_STATUS_JSON)
    p.add_argument('--intervalos', type=_inteiro_positivo, default=padroes.SAUDE_INTERVALOS,
                   metavar='N',
                   help='quantos --intervalo-dados do ouvinte fazem os limites automaticos'
                        ' abaixo (padrão %d)' % padroes.SAUDE_INTERVALOS)
    p.add_argument('--max-idade', type=duracao, default=None, metavar='S',
                   help='idade máxima do status. Padrão: o maior entre N intervalos de dados'
                        ' e %d s (a espera máxima entre falhas e %d s; o cron do --once roda'
                        ' a cada 5 min)' % (padroes.SAUDE_IDADE_MINIMA, padroes.TETO_ESPERA))
    p.add_argument('--max-sem-sonda', type=duracao, default=None, metavar='S',
                   help='tempo máximo de um dataset ao vivo com falha sem ciclo bom. Padrão:'
                        ' N intervalos de dados no serviço; no --once (o ritmo e o do cron,'
                        ' que o status não sabe), o mesmo de --max-idade. Dataset sem falha'
                        ' e sem sonda nova usa o maior dos dois')
    p.add_argument('--max-falhas', type=_inteiro_positivo, default=padroes.SAUDE_FALHAS,
                   metavar='N',
                   help='falhas seguidas (voltas do laço, ou de um dataset) que viram CRITICO;'
                        ' de 1 até N-1 e ALERTA (padrão %d)' % padroes.SAUDE_FALHAS)
    p.add_argument('--max-varredura', type=duracao,
                   default=float(padroes.SAUDE_VARREDURA), metavar='S',
                   help='idade máxima da última varredura boa, com a varredura diária ligada'
                        ' (padrão %d s = %d h)' % (padroes.SAUDE_VARREDURA,
                                                   padroes.SAUDE_VARREDURA // 3600))
    p.add_argument('--max-ferramenta', type=duracao,
                   default=float(padroes.SAUDE_FERRAMENTA), metavar='S',
                   help='uma ferramenta (varredura, carga inicial) rodando há mais que isso é'
                        ' ALERTA (padrão %d s)' % padroes.SAUDE_FERRAMENTA)
    p.add_argument('--wal-alerta', type=_inteiro_positivo, default=padroes.SLOT_WAL_ALERTA,
                   metavar='BYTES',
                   help='`slot_logico`: WAL retido pelo slot acima disso é ALERTA (padrão %d'
                        ' = %d MiB)' % (padroes.SLOT_WAL_ALERTA, padroes.SLOT_WAL_ALERTA >> 20))
    p.add_argument('--wal-critico', type=_inteiro_positivo, default=padroes.SLOT_WAL_CRITICO,
                   metavar='BYTES',
                   help='`slot_logico`: WAL retido pelo slot acima disso é CRITICO: o disco do'
                        ' cliente enche por nossa causa (padrão %d = %d MiB)'
                        % (padroes.SLOT_WAL_CRITICO, padroes.SLOT_WAL_CRITICO >> 20))
    p.add_argument('--sem-pid', action='store_true',
                   help='não confere se o pid do status existe (a saúde roda noutro'
                        ' namespace de pid, ex.: fora do contêiner do ouvinte)')
    return p


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


# ------------------------------------------------------------------ o veredito
@dataclass
class Veredito:
    """O nível, os motivos (o pior primeiro) e os dados de desempenho."""

    motivos: list[tuple[int, str]] = field(default_factory=list)
    resumo: str = ''
    perf: list[str] = field(default_factory=list)
    desconhecido: str | None = None

    def anotar(self, nivel: int, texto: str) -> None:
        self.motivos.append((nivel, _limpo(texto)))

    @property
    def nivel(self) -> int:
        if self.desconhecido is not None:
            return DESCONHECIDO
        return max((n for n, _ in self.motivos), default=OK)

    def linha(self) -> str:
        nivel = self.nivel
        if nivel == DESCONHECIDO:
            texto = _limpo(self.desconhecido or '')
        elif nivel == OK:
            texto = self.resumo
        else:
            ordem = sorted((m for m in self.motivos if m[0] > OK), key=lambda m: -m[0])
            textos = [t for _, t in ordem]
            texto = '; '.join(textos[:MOTIVOS_NA_LINHA])
            if len(textos) > MOTIVOS_NA_LINHA:
                texto += '; (+%d)' % (len(textos) - MOTIVOS_NA_LINHA)
        linha = 'OUVINTE %s - %s' % (NOMES[nivel], texto)
        if self.perf:
            linha += ' | ' + ' '.join(self.perf)
        return linha


def _limpo(texto: str) -> str:
    """Uma linha só, sem "|" (que separa os dados de desempenho)."""
    return re.sub(r'\s+', ' ', str(texto).replace('|', '/')).strip()


def _erro_curto(texto: Any) -> str:
    """
    O último erro sem a hora na frente, cortado no MEIO: o começo diz o que
    falhou, o fim diz o porque (o erro do driver vem depois da descrição da origem).
    """
    texto = re.sub(r'^\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\s+', '', _limpo(texto or ''))
    if len(texto) <= TAMANHO_DO_ERRO:
        return texto
    cabeca = TAMANHO_DO_ERRO // 3
    return texto[:cabeca] + ' ... ' + texto[-(TAMANHO_DO_ERRO - cabeca - 5):]


# ------------------------------------------------------------------ leitura tolerante
def _quando(valor: Any) -> datetime.datetime | None:
    """Texto ISO (com 'T' ou espaço) -> datetime ingenuo (hora local), ou None."""
    if not isinstance(valor, str) or not valor:
        return None
    try:
        momento = datetime.datetime.fromisoformat(valor)
    except ValueError:
        return None
    if momento.tzinfo is not None:
        momento = momento.astimezone().replace(tzinfo=None)
    return momento


def _inteiro(valor: Any) -> int:
    return valor if isinstance(valor, int) and not isinstance(valor, bool) else 0


def _numero(valor: Any) -> float | None:
    if isinstance(valor, (int, float)) and not isinstance(valor, bool):
        return float(valor)
    return None


def _secao(dados: Mapping[str, Any], nome: str) -> dict[str, Any]:
    valor = dados.get(nome)
    return valor if isinstance(valor, dict) else {}


def _s(segundos: float) -> str:
    return '%ds' % round(segundos)


def _horas(segundos: float) -> str:
    return '%.1fh' % (segundos / 3600.0)


def pid_vivo(pid: int) -> bool | None:
    """O pid e de um ouvinte vivo? None = não da para saber daqui."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass                        # existe, de outro usuario
    except OSError:
        return None
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as arquivo:
            comando = arquivo.read()
    except OSError:
        return True
    # Zumbi (linha de comando vazia) ou pid reciclado por outro programa: morto.
    return b'ouvinte' in comando or b'contextia' in comando


# ------------------------------------------------------------------ a avaliacao
def _idade(v: Veredito, idade: float | None, maxima: float, atualizado: Any, modo: str,
           servico: bool, no_ar: bool, pid: int, pid_ok: bool | None) -> None:
    """O status velho: CRITICO, com a causa provável."""
    if idade is None:
        v.anotar(CRITICO, '%s sem atualizado_em' % ARQUIVO_STATUS_JSON)
        return
    if idade <= maxima:
        return
    if no_ar and pid_ok:
        causa = 'com o pid %d vivo: o ouvinte travou' % pid
    elif servico or no_ar:
        causa = 'o ouvinte parou ou travou (journalctl -u ouvinte)'
    else:
        causa = 'nenhuma execução %s desde então: o cron parou?' % modo
    v.anotar(CRITICO, 'status de %s não é atualizado há %s (limite %s): %s'
                      % (atualizado, _s(idade), _s(maxima), causa))


def avaliar(status: Mapping[str, Any], limites: Limites, agora: datetime.datetime,
            idade_arquivo: float | None = None,
            vivo: Callable[[int], bool | None] = pid_vivo) -> Veredito:
    """
    O veredito sobre um `ouvinte-status.json` já lido. `idade_arquivo` (segundos
    desde o mtime) serve quando `atualizado_em` falta ou está no futuro (relógio
    acertado para trás).
    """
    v = Veredito()
    versao = status.get('versao')
    if not isinstance(versao, int) or versao > VERSAO_STATUS:
        v.desconhecido = ('%s de versão %r; esta saúde conhece até a %d: atualize o SDK'
                          ' onde a saúde roda' % (ARQUIVO_STATUS_JSON, versao, VERSAO_STATUS))
        return v
    ouvinte = _secao(status, 'ouvinte')
    if not ouvinte:
        v.desconhecido = '%s sem a seção "ouvinte"' % ARQUIVO_STATUS_JSON
        return v

    intervalo = _numero(ouvinte.get('intervalo_dados_s')) or float(padroes.INTERVALO_DADOS)
    intervalo_rec = _numero(ouvinte.get('intervalo_reconciliacao_s'))
    modo = str(ouvinte.get('modo') or 'servico')
    servico = modo == 'servico'
    situacao = str(ouvinte.get('situacao') or 'rodando')
    pid = _inteiro(ouvinte.get('pid'))
    max_idade = limites.max_idade if limites.max_idade is not None else max(
        limites.intervalos * intervalo, float(padroes.SAUDE_IDADE_MINIMA))
    if limites.max_sem_sonda is not None:
        max_sem_sonda = limites.max_sem_sonda
    else:
        max_sem_sonda = limites.intervalos * intervalo if servico else max_idade
    k = limites.max_falhas

    # -- o processo e a idade do status -------------------------------------
    atualizado_txt = ouvinte.get('atualizado_em')
    atualizado = _quando(atualizado_txt)
    idade = (agora - atualizado).total_seconds() if atualizado else None
    if idade is None or idade < -60:
        idade = idade_arquivo
    idade = max(0.0, idade) if idade is not None else None
    no_ar = situacao in ('rodando', 'parando')
    pid_ok: bool | None = None
    if no_ar and limites.conferir_pid and pid > 0:
        pid_ok = vivo(pid)
    if pid_ok is False:
        no_ar = False
    if pid_ok is False and servico:
        v.anotar(CRITICO, 'o ouvinte (pid %d) morreu sem parar: o status de %s ainda diz'
                          ' "%s"' % (pid, atualizado_txt, situacao))
    elif situacao == 'parado' and servico:
        v.anotar(CRITICO, 'ouvinte PARADO: o serviço saiu em %s (systemctl status ouvinte)'
                          % atualizado_txt)
    else:
        if pid_ok is False:
            v.anotar(ALERTA, 'a execução %s (pid %d) morreu sem terminar (status de %s);'
                             ' a próxima execução recomeça' % (modo, pid, atualizado_txt))
        _idade(v, idade, max_idade, atualizado_txt, modo, servico, no_ar, pid, pid_ok)
    if situacao == 'parando' and pid_ok is not False:
        v.anotar(ALERTA, 'ouvinte parando (parada pedida em curso)')
    if modo == 'seco':
        v.anotar(ALERTA, 'o último status e de um --dry-run (nada foi enviado)')

    ciclos = _secao(status, 'ciclos')
    falha = _secao(ciclos, 'falha')
    falhas = _inteiro(ouvinte.get('falhas_seguidas'))

    # -- a ferramenta em curso ------------------------------------------------
    ferramenta = _secao(status, 'ferramenta')
    ferramenta_desde = _quando(ferramenta.get('desde'))
    if ferramenta and ferramenta_desde and no_ar:
        rodando = (agora - ferramenta_desde).total_seconds()
        if rodando > limites.max_ferramenta:
            v.anotar(ALERTA, 'ferramenta %s (pid %s) rodando há %s (limite %s)' % (
                ferramenta.get('rotulo'), ferramenta.get('pid'), _s(rodando),
                _s(limites.max_ferramenta)))

    # -- os datasets ------------------------------------------------------------
    # A hora de referencia e a do ultimo ciclo de dados (ou da ultima volta que
    # falhou inteira): o dataset e julgado pelo que aconteceu nos ciclos, nao
    # pelo relogio de agora -- entre um ciclo e outro (o cron de 5 min, uma
    # varredura de duas horas) quem fala e a idade do status.
    referencias = [t for t in (_quando(_secao(ciclos, 'dados').get('em')),
                               _quando(falha.get('em'))) if t]
    if referencias:
        referencia = max(referencias)
    else:
        referencia = atualizado or agora
        if ferramenta_desde and ferramenta_desde < referencia:
            referencia = ferramenta_desde
    iniciado = _quando(ouvinte.get('iniciado_em'))
    varredura = _secao(status, 'varredura')
    hora_varredura = varredura.get('hora')
    quarentena = _secao(status, 'quarentena')
    datasets = [d for d in status.get('datasets') or [] if isinstance(d, dict)]
    vivos = [d for d in datasets if d.get('ao_vivo')]
    maior_lacuna = 0.0
    maior_falhas = 0
    sem_carimbo_total = futuras_total = 0
    maior_atraso = 0.0
    removidas_total = reconciliacoes_recusadas = 0
    pendentes_em_curso = str(ferramenta.get('rotulo') or '') if no_ar else ''
    for d in vivos:
        nome = d.get('dataset')
        falhas_ds = _inteiro(d.get('falhas_seguidas'))
        sonda = _quando(d.get('ultima_sonda_ok_em'))
        if falhas_ds:
            candidatos = [t for t in (_quando(d.get('erro_desde')), sonda) if t]
            desde = min(candidatos) if candidatos else (iniciado if servico else None)
            limite = max_sem_sonda
        else:
            desde = sonda or (iniciado if servico else None)
            limite = max(max_sem_sonda, max_idade)
            if d.get('captura') == 'reconciliacao' and intervalo_rec is not None:
                # So a reconciliacao le este dataset: a sonda e a dela, no ritmo dela.
                limite = max(limite, limites.intervalos * intervalo_rec)
        lacuna = max(0.0, (referencia - desde).total_seconds()) if desde else None
        if lacuna is not None and falhas_ds:
            maior_lacuna = max(maior_lacuna, lacuna)
        maior_falhas = max(maior_falhas, falhas_ds)
        if falhas_ds:
            critico = falhas_ds >= k or (lacuna is not None and lacuna > limite)
            v.anotar(CRITICO if critico else ALERTA, 'dataset %s sem ciclo bom%s, %d falha(s)'
                     ' seguida(s) (limites: %s, %d falhas): %s' % (
                         nome, '' if lacuna is None else ' há %s' % _s(lacuna), falhas_ds,
                         _s(limite), k,
                         _erro_curto(d.get('ultimo_erro')) or 'sem erro registrado'))
        elif lacuna is not None and lacuna > limite:
            v.anotar(CRITICO, 'dataset %s sem sonda boa há %s (limite %s)%s' % (
                nome, _s(lacuna), _s(limite), '' if sonda else ': nunca sondado nesta subida'))
        sem = _inteiro(d.get('sem_carimbo'))
        if sem:
            sem_carimbo_total += sem
            v.anotar(ALERTA, 'dataset %s com %d linha(s) sem carimbo (só a varredura as leva)'
                     % (nome, sem))
        fut = _inteiro(d.get('futuras'))
        if fut:
            futuras_total += fut
            v.anotar(ALERTA, 'dataset %s com %d linha(s) com carimbo no futuro' % (nome, fut))
        atraso = _numero(d.get('maior_atraso_s'))
        if atraso is not None:
            maior_atraso = max(maior_atraso, atraso)
        if d.get('atraso_preocupante'):
            v.anotar(ALERTA, 'dataset %s: chegada atrasada de %s passou da metade da folga'
                             ' (%ss): aumente --folga' % (nome, _s(atraso or 0),
                                                         ouvinte.get('folga_s')))
        rec = d.get('reconciliacao')
        if isinstance(rec, dict) and rec.get('ativa'):
            removidas_total += _inteiro(rec.get('removidas'))
            reconciliacoes_recusadas += _reconciliacao(
                v, nome, rec, k, referencia, iniciado if servico else None, intervalo_rec,
                limites.intervalos, max_idade)
        entregue = d.get('entregue_a_varredura')
        if entregue:
            if hora_varredura:
                v.anotar(ALERTA, 'dataset %s entregue a varredura das %s (%s)'
                         % (nome, hora_varredura, _limpo(entregue)))
            else:
                v.anotar(CRITICO, 'dataset %s entregue a varredura (%s), e a varredura diária'
                                  ' está desligada: parado até um --varrer-agora'
                         % (nome, _limpo(entregue)))
    if not vivos:
        v.anotar(ALERTA, 'nenhum dataset ao vivo (só a varredura leva dado)')

    # -- a captura por log (`binlog`, `slot_logico`): posicao perdida, spool cheio -
    bruto = status.get('captura')
    captura: Mapping[str, Any] = bruto if isinstance(bruto, dict) else {}
    if captura.get('critico'):
        v.anotar(CRITICO, _limpo(captura['critico']))
    if captura.get('pausada'):
        # A recusa do spool inteira: quanto, o que a pausa custa na origem e o conserto.
        v.anotar(CRITICO, 'captura do log pausada: %s' % _limpo(captura['pausada']))
    # O `slot_logico`: o WAL que o slot segura no disco do cliente.
    wal = _numero(captura.get('wal_retido_bytes'))
    if wal is not None and wal >= limites.wal_alerta:
        v.anotar(CRITICO if wal >= limites.wal_critico else ALERTA,
                 'o slot %s retém %.1f MiB de WAL no disco da origem (limite %.0f MiB):'
                 ' o ouvinte não está consumindo (veja o spool e os erros acima)'
                 % (_limpo(str(captura.get('slot'))), wal / 1048576,
                    (limites.wal_critico if wal >= limites.wal_critico
                     else limites.wal_alerta) / 1048576))

    # -- as falhas do laco (depois dos datasets: eles dizem qual) ---------------
    if falhas:
        texto = '%d volta(s) seguida(s) do laço com falha' % falhas
        if falha.get('erro'):
            texto += ' (última: %s)' % _erro_curto(falha['erro'])
        v.anotar(CRITICO if falhas >= k else ALERTA, texto)

    total_quarentena = _inteiro(quarentena.get('total'))
    if total_quarentena:
        por = quarentena.get('por_dataset')
        detalhe = ', '.join('%s %s' % item for item in sorted(por.items())) \
            if isinstance(por, dict) else ''
        v.anotar(ALERTA, '%d registro(s) na quarentena%s: recusados de vez pelo intake, ou'
                         ' com código de empresa inválido; o motivo de cada um está no'
                         ' arquivo dele; corrija na origem e rode ouvinte.py'
                         ' --reenviar-quarentena'
                 % (total_quarentena, ' (%s)' % detalhe if detalhe else ''))
    cargas = [str(e) for e in status.get('cargas_iniciais_pendentes') or []
              if not pendentes_em_curso.endswith(' %s' % e)]
    if cargas:
        v.anotar(ALERTA, 'carga inicial pendente da(s) empresa(s) %s (refeita no próximo ciclo'
                         ' de projetos)' % ', '.join(cargas[:10]))

    # -- as empresas recusadas (ouvinte/relatorio.py: empresas_recusadas) ---------
    recusadas = [r for r in status.get('empresas_recusadas') or [] if isinstance(r, dict)]
    trocadas = [str(r.get('escopo')) for r in recusadas if r.get('onde') == 'chave']
    invalidas = ["'%s'" % r.get('escopo') for r in recusadas if r.get('onde') == 'cadastro']
    if trocadas:
        v.anotar(CRITICO, 'empresa(s) %s com a chave de outro projeto no arquivo de chaves:'
                          ' NÃO recebem dado; corrija a linha (o ouvinte-status.txt diz como)'
                 % ', '.join(trocadas[:10]))
    if invalidas:
        v.anotar(ALERTA, 'código(s) de empresa recusado(s) no cadastro do ERP: %s (caractere'
                         ' fora do permitido; nunca provisionados): corrija o código no ERP'
                 % ', '.join(invalidas[:10]))

    # -- a varredura --------------------------------------------------------------
    iniciada = _quando(varredura.get('iniciada_em'))
    terminada = _quando(varredura.get('terminada_em'))
    ok = varredura.get('ok')
    em_curso = bool(iniciada and not terminada and ok is None and no_ar)
    erros = [_erro_curto(e) for e in varredura.get('erros') or []]
    if iniciada and not terminada and ok is None and not no_ar:
        v.anotar(ALERTA, 'a varredura de %s não terminou: o ouvinte parou ou morreu no meio'
                         ' (não conta como feita)' % varredura.get('iniciada_em'))
    elif ok is False:
        partes = list(erros[:2])
        nao_fechados = varredura.get('nao_fechados')
        if isinstance(nao_fechados, dict) and nao_fechados:
            partes.append('não fechou %s' % ', '.join(
                '%s (%d empresa(s))' % (n, len(e) if isinstance(e, list) else 0)
                for n, e in sorted(nao_fechados.items())[:4]))
        v.anotar(CRITICO, 'a varredura de %s falhou%s' % (
            varredura.get('iniciada_em'), ': ' + '; '.join(partes) if partes else ''))
    elif ok is None and terminada:
        v.anotar(ALERTA, 'a varredura de %s foi interrompida%s' % (
            varredura.get('iniciada_em'), ': ' + erros[0] if erros else ''))
    ultima_ok = _quando(varredura.get('ultima_ok_em'))
    idade_varredura: float | None = None
    if ultima_ok:
        idade_varredura = max(0.0, ((iniciada if em_curso and iniciada else agora)
                                    - ultima_ok).total_seconds())
    if hora_varredura and ok is not False:
        if idade_varredura is not None and idade_varredura > limites.max_varredura:
            v.anotar(CRITICO, 'a última varredura boa foi há %s (%s; limite %s; a diária roda'
                              ' as %s)' % (_horas(idade_varredura), varredura.get('ultima_ok_em'),
                                           _horas(limites.max_varredura), hora_varredura))
        elif ultima_ok is None and not em_curso and not (iniciada and ok is None):
            no_ar_ha = (agora - iniciado).total_seconds() if iniciado and servico else 0.0
            v.anotar(CRITICO if no_ar_ha > limites.max_varredura else ALERTA,
                     'nenhuma varredura boa registrada (a diária roda as %s; para a carga'
                     ' completa agora: --varrer-agora)' % hora_varredura)

    # -- o resumo (a linha do OK) e os dados de desempenho ---------------------------
    quando = '%s (há %s)' % (atualizado_txt, _s(idade or 0))
    if servico:
        v.resumo = 'ouvinte %s (serviço, pid %d), %d dataset(s) ao vivo, status de %s' % (
            'ativo' if situacao == 'rodando' else situacao, pid, len(vivos), quando)
    else:
        v.resumo = 'última execução %s de %s, %d dataset(s) ao vivo' % (modo, quando, len(vivos))
    if em_curso:
        v.resumo += ', varredura em curso desde %s' % varredura.get('iniciada_em')
    elif ultima_ok:
        v.resumo += ', última varredura boa em %s' % varredura.get('ultima_ok_em')
    elif not hora_varredura:
        v.resumo += ', varredura diária desligada'

    v.perf = [
        'idade_status=%ds;;%d;0' % (round(idade or 0), max_idade),
        'datasets_ao_vivo=%d;;;0' % len(vivos),
        'falhas_seguidas=%d;0;%d;0' % (falhas, k - 1),
        'falhas_dataset_max=%d;0;%d;0' % (maior_falhas, k - 1),
        'sem_ciclo_bom_max=%ds;;%d;0' % (round(maior_lacuna), max_sem_sonda),
        'quarentena=%d;0;;0' % total_quarentena,
        'sem_carimbo=%d;0;;0' % sem_carimbo_total,
        'futuras=%d;0;;0' % futuras_total,
        'maior_atraso=%ds;;;0' % round(maior_atraso),
        'empresas_recusadas=%d;0;;0' % len(recusadas),
    ]
    if intervalo_rec is not None:
        v.perf += ['chaves_removidas=%d;;;0' % removidas_total,
                   'reconciliacoes_recusadas=%d;0;;0' % reconciliacoes_recusadas]
    if wal is not None:
        v.perf.append('wal_retido=%dB;%d;%d;0' % (wal, limites.wal_alerta,
                                                   limites.wal_critico))
    if idade_varredura is not None:
        v.perf.append('idade_varredura_ok=%ds;;%d;0' % (round(idade_varredura),
                                                         limites.max_varredura))
    return v


def _reconciliacao(v: Veredito, nome: Any, rec: Mapping[str, Any], k: int,
                   referencia: datetime.datetime, iniciado: datetime.datetime | None,
                   intervalo: float | None, intervalos: int, max_idade: float) -> int:
    """A reconciliacao de um dataset: recusa, falhas, e a leitura que não vem. 1 se recusada."""
    falhas = _inteiro(rec.get('falhas_seguidas'))
    if falhas:
        v.anotar(CRITICO if falhas >= k else ALERTA,
                 'dataset %s: reconciliação falhou %d vez(es) seguida(s) desde %s (nada'
                 ' removido): %s' % (nome, falhas, rec.get('erro_desde'),
                                     _erro_curto(rec.get('ultimo_erro')) or '?'))
    elif intervalo is not None:
        desde = _quando(rec.get('ultima_em')) or iniciado
        limite = max(intervalos * intervalo, max_idade)
        lacuna = (referencia - desde).total_seconds() if desde else None
        if lacuna is not None and lacuna > limite:
            v.anotar(ALERTA, 'dataset %s: reconciliação sem leitura completa há %s (limite %s)'
                     % (nome, _s(lacuna), _s(limite)))
    if rec.get('recusa'):
        v.anotar(ALERTA, 'dataset %s: reconciliação RECUSADA pelo teto desde %s (nada'
                         ' removido): %s' % (nome, rec.get('recusa_desde'),
                                             _erro_curto(rec['recusa'])))
        return 1
    return 0


# ------------------------------------------------------------------ a linha de comando
def verificar(estado: str, limites: Limites,
              agora: datetime.datetime | None = None) -> Veredito:
    """Lê o status de `estado` e o avalia (o que `main` imprime)."""
    v = Veredito()
    caminho = os.path.join(estado, ARQUIVO_STATUS_JSON)
    sem_permissao = ('sem permissão para ler %s: rode a saúde como o usuário do ouvinte'
                     ' (contextia) ou root')
    try:
        pasta = os.stat(estado)
    except PermissionError:
        v.desconhecido = sem_permissao % estado
        return v
    except OSError:
        pasta = None
    if pasta is None or not stat.S_ISDIR(pasta.st_mode):
        v.desconhecido = ('a pasta --estado %s não existe (ou não é pasta): confira o caminho'
                          ' -- e o --estado do ouvinte?' % estado)
        return v
    if not os.access(estado, os.R_OK | os.X_OK):
        v.desconhecido = sem_permissao % estado
        return v
    try:
        status = ler_status_json(estado)
        idade_arquivo = datetime.datetime.now().timestamp() - os.stat(caminho).st_mtime
    except FileNotFoundError:
        antigo = os.path.exists(os.path.join(estado, ARQUIVO_STATUS))
        v.anotar(CRITICO, '%s não existe: o ouvinte nunca completou uma volta aqui%s' % (
            caminho, ' (há só o %s: um ouvinte de versão antiga?)' % ARQUIVO_STATUS
            if antigo else ''))
        return v
    except PermissionError:
        v.desconhecido = sem_permissao % caminho
        return v
    except (OSError, ValueError) as erro:
        v.anotar(CRITICO, '%s ilegível (%s: %s): o ouvinte grava inteiro (atômico); arquivo'
                          ' torto e disco com problema ou mão humana'
                 % (caminho, type(erro).__name__, _erro_curto(erro)))
        return v
    return avaliar(status, limites, agora or datetime.datetime.now(), idade_arquivo)


def main(argv: list[str] | None = None) -> int:
    """`ouvinte.py --saude ...`: imprime uma linha e devolve 0, 1, 2 ou 3."""
    argumentos = list(sys.argv[1:] if argv is None else argv)
    try:
        args = parser().parse_args(argumentos)
    except ErroArgumento as erro:
        print('OUVINTE DESCONHECIDO - argumento inválido: %s (%s --help)'
              % (_limpo(str(erro)), PROG))
        return DESCONHECIDO
    except SystemExit as saida:             # --help e --version
        return saida.code if isinstance(saida.code, int) else OK
    if not args.estado:
        print('OUVINTE DESCONHECIDO - argumento inválido: falta --estado DIR (%s --help)' % PROG)
        return DESCONHECIDO
    limites = Limites(intervalos=args.intervalos, max_idade=args.max_idade,
                      max_sem_sonda=args.max_sem_sonda, max_falhas=args.max_falhas,
                      max_varredura=args.max_varredura, max_ferramenta=args.max_ferramenta,
                      conferir_pid=not args.sem_pid, wal_alerta=args.wal_alerta,
                      wal_critico=args.wal_critico)
    try:
        veredito = verificar(args.estado, limites)
    except Exception as erro:               # noqa: BLE001 - um plugin nunca sai com traceback
        print('OUVINTE DESCONHECIDO - a saúde falhou: %s: %s'
              % (type(erro).__name__, _limpo(str(erro))))
        return DESCONHECIDO
    print(veredito.linha(), flush=True)
    return veredito.nivel


if __name__ == '__main__':
    sys.exit(main())
