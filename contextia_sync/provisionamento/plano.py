"""
Provisionar: empresa nova no cadastro do ERP ganha projeto, chave, grupos e webhook.

A ordem e o produto, porque o servidor só guarda o HASH da chave -- a chave em
claro existe uma vez, na resposta de `emitir_chave`, e o arquivo de chaves e a
única copia dela:

    1. criar_projeto     idempotente por external_id (= escopo): rodar de novo
                         nunca duplica projeto
    2. emitir_chave
    3. GRAVAR A CHAVE    no arquivo, antes de qualquer outra coisa, com a linha
                         marcada `pendente`
    4. revogar órfãs     chaves ativas do projeto que não são a do arquivo
    5. grupos, webhook   idempotentes (confere antes de criar)
    6. marcar `pronto`

Um crash em qualquer ponto e consertado rodando de novo:

    morreu entre 2 e 3   a chave emitida tem destino desconhecido (ninguém a
                         tem; mas ela vale). A empresa continua fora do arquivo;
                         a próxima execução acha o projeto já existente, emite
                         chave NOVA, grava, e revoga a antiga -- dizendo qual.
    morreu entre 3 e 6   a linha esta `pendente`: a próxima execução faz 4-6
                         para ela, e diz que reparou.

Pontos de teste: com CONTEXTIA_TESTE_MORRER_EM=chave-emitida (ou chave-gravada)
o processo se mata com SIGKILL logo depois do passo 2 (ou 3). Existe só para o
teste provar a recuperação com um processo morto de verdade; não use em produção.
"""

from __future__ import annotations

import os
import signal
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from contextia_sync import segredos
from contextia_sync.erros import ErroConfiguracao
from contextia_sync.mapeamento import escopos_excluidos
from contextia_sync.provisionamento import chaves as arquivo_chaves
from contextia_sync.provisionamento import regra_projeto
from contextia_sync.provisionamento.chaves import Registro

if TYPE_CHECKING:
    from contextia_sync.intake.admin import Admin, ChaveListada
    from contextia_sync.tipos import Mapa, ValorDoBanco

PONTO_DE_TESTE = 'CONTEXTIA_TESTE_MORRER_EM'

# O minimo que o Contextia aceita para o segredo de assinatura de um webhook.
TAMANHO_MINIMO_SEGREDO = 16

# Uma empresa a provisionar: (escopo, nome do projeto, slugs dos grupos). O nome
# e None numa pendente que o cadastro nao traz mais (o projeto ja existe).
Empresa = tuple[str, str | None, list[str]]


class ErroProvisionamento(ErroConfiguracao):
    """Falta algo para provisionar (token de admin, segredo do webhook...)."""


@dataclass
class Plano:
    """O que o provisionamento vai fazer, decidido antes de fazer qualquer coisa."""

    novas: list[Empresa] = field(default_factory=list)
    """Aceitas pela regra e fora do arquivo: projeto, chave, grupos, webhook."""
    pendentes: list[Empresa] = field(default_factory=list)
    """No arquivo como `pendente`: a chave existe, falta concluir (passos 4-6)."""
    prontas: list[str] = field(default_factory=list)
    """Já provisionadas: nada a fazer."""
    excluidas: list[str] = field(default_factory=list)
    """Aceitas pela regra, mas em source.excluded_scopes."""
    recusadas: list[tuple[str, str]] = field(default_factory=list)
    """(escopo, motivo) das linhas que a regra recusa."""
    fora_da_regra: list[str] = field(default_factory=list)
    """No arquivo, mas o cadastro não as aceita mais (a chave continua valendo)."""
    nao_encontrada: str | None = None
    """O `somente_escopo` pedido que o cadastro não trouxe (ou a regra recusa)."""
    codigos_recusados: list[regra_projeto.CodigoRecusado] = field(default_factory=list)
    """Empresas do cadastro cujo código não serve (TAB, quebra de linha...): nunca gravadas."""


def _ponto_de_teste(nome: str) -> None:
    if os.environ.get(PONTO_DE_TESTE) == nome:
        # SIGKILL, nao exit: nenhum finally, nenhum flush -- como queda de energia.
        os.kill(os.getpid(), signal.SIGKILL)


def planejar(
    mapa: Mapa,
    linhas: Iterable[Mapping[str, ValorDoBanco]],
    registros: Mapping[str, Registro],
    somente_escopo: str | None = None,
    grupos_extra: Iterable[str] = (),
) -> Plano:
    """
    O que fazer, sem fazer nada. `linhas`: o cadastro de empresas (fetch da regra).

    `somente_escopo` restringe a uma empresa; `grupos_extra` (o --grupo) vem antes
    dos grupos que a `group_column` da empresa indica.
    """
    regra = regra_projeto.resolver(mapa)
    # O codigo que nao serve sai aqui: nem regra, nem plano, nem arquivo de chaves.
    linhas, codigos_recusados = regra_projeto.separar_codigos(linhas, regra)
    aceitas, recusadas = _aceitas_pela_regra(linhas, regra, somente_escopo)
    plano = Plano(
        recusadas=sorted((e, m) for e, m in recusadas.items() if e not in aceitas),
        codigos_recusados=codigos_recusados if somente_escopo is None else [],
    )
    extra = list(grupos_extra)

    def grupos_de(escopo: str) -> list[str]:
        return list(dict.fromkeys(extra + aceitas.get(escopo, ('', []))[1]))

    excluidos = escopos_excluidos(mapa)
    for escopo, (nome, _) in aceitas.items():
        if escopo in excluidos:
            plano.excluidas.append(escopo)
        elif escopo not in registros:
            plano.novas.append((escopo, nome, grupos_de(escopo)))
        elif registros[escopo].situacao == 'pronto':
            plano.prontas.append(escopo)
    for escopo, registro in registros.items():
        if somente_escopo is not None and escopo != somente_escopo:
            continue
        if registro.situacao == 'pendente':
            pendente = aceitas[escopo][0] if escopo in aceitas else None
            plano.pendentes.append((escopo, pendente, grupos_de(escopo)))
        elif escopo not in aceitas:
            plano.fora_da_regra.append(escopo)
    if (
        somente_escopo is not None
        and somente_escopo not in aceitas
        and somente_escopo not in registros
    ):
        plano.nao_encontrada = somente_escopo
    return plano


def _aceitas_pela_regra(
    linhas: Iterable[Mapping[str, ValorDoBanco]],
    regra: regra_projeto.RegraProjeto,
    somente_escopo: str | None,
) -> tuple[dict[str, tuple[str, list[str]]], dict[str, str]]:
    """
    O cadastro pela regra de projeto: ({escopo: (nome, grupos)} das aceitas,
    {escopo: motivo} das recusadas). A mesma empresa em várias linhas (uma por
    filial, no Protheus) é um projeto só, com os grupos de todas.
    """
    aceitas: dict[str, tuple[str, list[str]]] = {}
    recusadas: dict[str, str] = {}
    for linha in linhas:
        escopo = regra_projeto.escopo_de(linha, regra)
        if somente_escopo is not None and escopo != somente_escopo:
            continue
        ok, motivo = regra_projeto.aceita(linha, regra)
        if not ok:
            recusadas.setdefault(escopo or '(vazio)', motivo)
            continue
        grupo = regra_projeto.grupo_de_linha(linha, regra)
        if escopo not in aceitas:
            aceitas[escopo] = (regra_projeto.nome_de(linha, regra), [])
        if grupo and grupo not in aceitas[escopo][1]:
            aceitas[escopo][1].append(grupo)
    return aceitas, recusadas


def descrever_plano(plano: Plano, regra: regra_projeto.RegraProjeto) -> list[str]:
    """O plano em linhas de texto (o que --dry-run imprime e o que a execução anuncia)."""
    linhas = [
        'plano ...........: %d nova(s), %d pendente(s) a concluir, %d já pronta(s),'
        ' %d recusada(s) pela regra, %d com código inválido, %d excluída(s)'
        % (
            len(plano.novas),
            len(plano.pendentes),
            len(plano.prontas),
            len(plano.recusadas),
            len(plano.codigos_recusados),
            len(plano.excluidas),
        )
    ]
    for escopo, nome, grupos in plano.novas:
        linhas.append(
            '  criar ......: %s %r%s'
            % (escopo, nome, ' grupos=%s' % ','.join(grupos) if grupos else '')
        )
    for escopo, _nome, grupos in plano.pendentes:
        linhas.append(
            '  concluir ...: %s%s (chave já gravada; provisionamento interrompido)'
            % (escopo, ' grupos=%s' % ','.join(grupos) if grupos else '')
        )
    for escopo, motivo in plano.recusadas:
        linhas.append('  recusada ...: %s (%s)' % (escopo, motivo))
    for escopo in plano.excluidas:
        linhas.append('  excluída ...: %s (source.excluded_scopes)' % escopo)
    for escopo in plano.fora_da_regra:
        linhas.append(
            '  atenção ....: %s tem chave no arquivo mas o cadastro não a aceita mais;'
            ' a chave continua valida -- revogue-a se a empresa saiu' % escopo
        )
    if plano.nao_encontrada:
        linhas.append(
            '  NÃO ACHADA .: %s não está no cadastro (ou a regra a recusa)' % plano.nao_encontrada
        )
    for recusado in plano.codigos_recusados:
        linhas.append('  RECUSADA ...: %s' % regra_projeto.texto_da_recusa(recusado, regra))
    return linhas


def segredo_do_webhook(mapa: Mapa) -> str | None:
    """
    O segredo do webhook (da variável nomeada no mapeamento), ou None se não há webhook.

    A variável tem de ser dedicada a isso (contextia_sync/segredos.py: o nome
    começa com CONTEXTIA_WEBHOOK_), e o valor não pode ser o de outra variável
    do SDK (o token, a senha dentro de CONTEXTIA_ORIGEM ou de
    CONTEXTIA_ORIGEM_DBA): segredo de origem ambígua nunca vai ao Contextia.
    """
    webhook = mapa.get('webhook')
    if not webhook:
        return None
    nome = str(webhook.get('secret_env') or '')
    problema = segredos.problema_do_secret_env(nome)
    if problema:
        # O carregar_mapeamento ja recusa; aqui vale para o mapa montado por fora.
        raise ErroProvisionamento('webhook.secret_env: %s. Nada foi criado.' % problema)
    segredo = (os.environ.get(nome) or '').strip()
    if not segredo:
        raise ErroProvisionamento(
            'o mapeamento registra webhook em cada projeto novo, e o segredo de assinatura'
            ' vem da variável %s -- que não está definida. Exporte-a (o mesmo segredo que'
            ' o receptor %s usa para conferir a assinatura) e rode de novo.'
            % (webhook['secret_env'], webhook['url'])
        )
    if len(segredo) < TAMANHO_MINIMO_SEGREDO:
        # O Contextia recusaria no registro do webhook -- depois do projeto e da
        # chave criados. Recusado aqui, nada e criado pela metade.
        raise ErroProvisionamento(
            'o segredo em %s tem %d caracteres; o Contextia exige pelo menos %d. Gere um'
            ' (ex.: openssl rand -hex 32) e combine-o com o receptor do webhook.'
            % (webhook['secret_env'], len(segredo), TAMANHO_MINIMO_SEGREDO)
        )
    repetido = segredos.segredo_repetido(segredo)
    if repetido:
        raise ErroProvisionamento(
            'o segredo em %s é o valor (ou parte do valor) de %s: a origem dele é ambígua'
            ' e ele não vai ao Contextia. Gere um só para o webhook (ex.: openssl rand -hex'
            ' 32) e combine-o com o receptor. Nada foi criado.' % (nome, repetido)
        )
    return segredo


def url_do_webhook(modelo: str, escopo: str) -> str:
    """
    A URL do webhook da empresa: `{escopo}` trocado pelo código CODIFICADO.

    O código vem do cadastro do ERP: sem codificar, `x/../../../outro?` mudaria
    o caminho e a consulta da URL (o evento iria a outro receptor).
    """
    return modelo.replace('{escopo}', urllib.parse.quote(escopo, safe=''))


class Provisionador:
    """Executa o plano. Cada empresa e independente: a falha de uma não para as outras."""

    def __init__(
        self,
        mapa: Mapa,
        admin: Admin,
        caminho: str,
        registros: MutableMapping[str, Registro],
        escrever: Callable[[str], object] = print,
    ) -> None:
        self.mapa = mapa
        self.admin = admin
        self.caminho = caminho
        self.registros = registros
        self.escrever = escrever
        self.segredo = segredo_do_webhook(mapa)

    def _gravar(self, registro: Registro) -> None:
        self.registros[registro.escopo] = registro
        arquivo_chaves.gravar_registros(self.caminho, self.registros.values())

    def _recusar_se_outra_linha_tem(
        self, chave: ChaveListada, escopo: str, projeto_id: object
    ) -> None:
        """Uma chave que o arquivo guarda nunca é revogada: levanta ErroChaves (saída 2)."""
        for outro in self.registros.values():
            if outro.escopo != escopo and _e_a_do_arquivo(chave, outro):
                raise arquivo_chaves.ErroChaves(
                    '%s, linha %s: a empresa %s tem a chave %s ativa no projeto %s (external_id'
                    ' %r), mas o arquivo a guarda com o escopo %s -- que não é o do cadastro.'
                    ' Nada foi emitido nem revogado. Corrija o escopo dessa linha para %r'
                    ' (sem espaço ou caractere invisível) e rode de novo.'
                    % (
                        self.caminho,
                        outro.linha or '?',
                        escopo,
                        chave.get('key_id', '?'),
                        projeto_id,
                        escopo,
                        ascii(outro.escopo),
                        escopo,
                    )
                )

    def criar(self, escopo: str, nome: str | None, grupos: list[str]) -> bool:
        """Empresa fora do arquivo: projeto, chave GRAVADA, depois o resto."""
        from contextia_sync.intake.transporte import mascarar_chave

        projeto = self.admin.criar_projeto(escopo, nome)
        reparo = not projeto.get('criado', True)
        if reparo:
            # Projeto existe e a empresa nao esta no arquivo: uma execucao anterior
            # morreu depois de criar -- talvez depois de emitir uma chave que
            # ninguem gravou. Essa chave tem destino desconhecido: nao a
            # reaproveitamos (nao ha como: o servidor so tem o hash) e nao a
            # deixamos valendo calada. Chave nova agora; a velha e revogada e
            # nomeada em concluir().
            # ...salvo se a chave ativa do projeto esta no arquivo com OUTRO
            # escopo (linha escrita a mao): a empresa nao e nova, o escopo da
            # linha e que nao bate. Emitir e revogar ali tiraria a chave valida.
            for chave in self.admin.listar_chaves(projeto['id']):
                if not chave.get('revogada'):
                    self._recusar_se_outra_linha_tem(chave, escopo, projeto['id'])
            self.escrever(
                '  %s: projeto %s já existia e a empresa não está no arquivo'
                ' (execução anterior interrompida): emitindo chave nova' % (escopo, projeto['id'])
            )
        emitida = self.admin.emitir_chave(projeto['id'])
        _ponto_de_teste('chave-emitida')
        # ANTES de qualquer outra coisa: daqui para frente um crash nao perde a chave.
        registro = Registro(
            escopo, emitida['key'], projeto['id'], emitida['key_id'], 'pendente', None
        )
        self._gravar(registro)
        _ponto_de_teste('chave-gravada')
        self.escrever(
            '  %s: %s projeto %s %r; chave %s (%s) gravada em %s'
            % (
                escopo,
                'REPARO --' if reparo else 'criado',
                projeto['id'],
                projeto.get('name') or nome,
                emitida['key_id'],
                mascarar_chave(emitida['key']),
                self.caminho,
            )
        )
        return self.concluir(registro, grupos, reparo=reparo, recem_gravada=True)

    def concluir(
        self,
        registro: Registro,
        grupos: list[str],
        reparo: bool = False,
        recem_gravada: bool = False,
    ) -> bool:
        """
        Passos 4-6: revogar órfãs, grupos, webhook, marcar pronto. Idempotente.
        Devolve True se houve reparo (de uma execução interrompida).
        """
        escopo = registro.escopo
        projeto_id = registro.projeto_id
        if projeto_id is None:
            projeto = self.admin.buscar_projeto(escopo)
            if projeto is None:
                raise ErroProvisionamento(
                    'empresa %s esta pendente no arquivo mas não há projeto com external_id'
                    ' %r no Contextia. Apague a linha dela e rode de novo.' % (escopo, escopo)
                )
            projeto_id = projeto['id']
        if not recem_gravada and registro.situacao == 'pendente':
            self.escrever(
                '  %s: REPARO -- concluindo provisionamento interrompido depois de'
                ' gravar a chave' % escopo
            )
            reparo = True

        for chave in self.admin.listar_chaves(projeto_id):
            if chave.get('revogada') or _e_a_do_arquivo(chave, registro):
                continue
            self._recusar_se_outra_linha_tem(chave, escopo, projeto_id)
            self.admin.revogar_chave(chave['key_id'])
            # Nomeada, nao adivinhada: o mais provavel e uma execucao que morreu
            # antes de gravar, mas pode ter sido emitida a mao -- quem a usa precisa
            # saber qual parou de valer.
            self.escrever(
                '  %s: REPARO -- revogada a chave %s (%s..., emitida em %s): estava'
                ' ativa no projeto e fora do arquivo de chaves (execução interrompida'
                ' antes de grava-la, ou emitida fora do provisionar.py); a valida e'
                ' a do arquivo'
                % (escopo, chave['key_id'], chave.get('prefixo', '?'), chave.get('criada_em', '?'))
            )
            reparo = True

        feitos = []
        if grupos:
            existentes = {g['slug'] for g in self.admin.listar_grupos()}
            for slug in grupos:
                if slug not in existentes:
                    self.admin.criar_grupo(slug)
                self.admin.incluir_no_grupo(slug, projeto_id)
            feitos.append('grupos=%s' % ','.join(grupos))

        webhook = self.mapa.get('webhook')
        if webhook:
            url = url_do_webhook(webhook['url'], escopo)
            if any(w.get('url') == url for w in self.admin.listar_webhooks(projeto_id)):
                feitos.append('webhook já registrado')
            else:
                self.admin.registrar_webhook(
                    projeto_id, url, segredo=self.segredo, eventos=webhook.get('events')
                )
                feitos.append('webhook registrado (%s)' % url)

        self._gravar(registro._replace(situacao='pronto', projeto_id=projeto_id))
        self.escrever('  %s: pronto%s' % (escopo, ' (%s)' % '; '.join(feitos) if feitos else ''))
        return reparo


def _e_a_do_arquivo(chave: ChaveListada, registro: Registro) -> bool:
    if registro.key_id:
        return bool(chave['key_id'] == registro.key_id)
    # Linha escrita a mao (so escopo e chave): casa pelo prefixo que o admin lista.
    prefixo = chave.get('prefixo') or ''
    return bool(prefixo) and registro.chave.startswith(prefixo)
