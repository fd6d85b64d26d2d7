"""
As peças do envio de um dataset que são do cliente (a remessa dos lotes está
em remessa.py, os lotes em lotes.py):

  * `ResultadoEnvio` -- o que `enviar_dataset` devolve, somado por todas;
  * `Alvo` -- dataset, escopo e key: quem o envio é, para as mensagens;
  * `Envelope` -- o corpo de um pedido: o envelope pelo json de sempre, os
    registros (quase todo o corpo) pelo caminho rápido, encaixados no fim;
  * `Aceite` -- a resposta final de um lote: a chave recusada levanta, a recusa
    vira a mensagem, o 2xx vira contagens (ou RespostaInvalida);
  * `RecusasDoEnvio` -- o lado da quarentena: o registro recusado de vez
    guardado, o já guardado e igual não reenviado, o entregue que supera a
    versão guardada.

Com a quarentena, um registro que o intake recusa DE VEZ (400/413/422 sobre
ele, ou um valor sem JSON) e isolado -- o lote é dividido até ele ficar
sozinho, os outros são entregues -- e guardado lá com o motivo; o lote conta
como ok (sem `sync`, a marca avança). Falha passageira (5xx, 429, timeout,
conexão) nunca vai para a quarentena. Quarentena cheia: o lote falha e a
mensagem diz como esvaziar. Registro já guardado e igual não é reenviado (a
releitura da folga não reabre a divisão a cada ciclo); registro entregue tira
da quarentena a versão velha dele. Sem quarentena, a recusa é um lote falho.
Com `sync`, registro na quarentena faz a carga falhar (ver ResultadoEnvio).
"""

from __future__ import annotations

import contextlib
import decimal
import itertools
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, cast

from contextia_sync.fila.diretorio import ErroFilaCheia
from contextia_sync.fila.quarentena import DestinoDeRecusas, descrever, identidade
from contextia_sync.intake.respostas import (
    contagens,
    detalhe_da_resposta,
    erro_autenticacao,
    legivel,
    motivo_da_recusa,
)
from contextia_sync.intake.serializacao import (
    ErroSerializacao,
    RegistroDoCorpo,
    json_canonico,
    valor_json,
)
from contextia_sync.intake.transporte import STATUS_RECUSA_DO_REGISTRO, mascarar
from contextia_sync.tipos import Json, ObjetoJson

if TYPE_CHECKING:
    import requests


@dataclass
class ResultadoEnvio:
    """
    O que `enviar_dataset` fez: registros lidos, as contagens do servidor e os lotes.

    `lotes_erro` > 0 quer dizer que algo não chegou (a marca não avança, a
    carga não deve ser completada); `erros` diz o que, uma mensagem por problema.

    Com a quarentena: `quarentenados` e quantos registros desta chamada estão
    na quarentena em vez de no Contextia (recusados de vez agora, ou já
    guardados e iguais), com um motivo por registro em `quarentena_motivos`.
    Sem `sync` eles NÃO contam em `lotes_erro`: a marca avança e o registro
    espera na quarentena. Com `sync` contam (uma falha a mais em `lotes_erro`):
    a carga não está completa, e um `complete` removeria esses registros.
    `quarentena_superados`: itens que saíram da quarentena porque uma versão do
    mesmo registro foi entregue agora. `interrompido`: o servidor não respondeu
    (ou respondeu algo que não é do intake) e o resto da origem não foi lido.
    """

    dataset: str
    registros: int = 0
    inserted: int = 0
    updated: int = 0
    duplicates: int = 0
    removed: int = 0
    lotes_ok: int = 0
    lotes_erro: int = 0
    erros: list[str] = field(default_factory=list)
    quarentenados: int = 0
    quarentena_motivos: list[str] = field(default_factory=list)
    quarentena_superados: int = 0
    interrompido: bool = False


class Alvo(NamedTuple):
    """Para onde vai o envio: o dataset (já normalizado), a empresa e a coluna key."""

    dataset: str
    escopo: object
    key: str | None

    def qual(self, registro: RegistroDoCorpo) -> str:
        """'dataset titulos, escopo 40, ID=17': como o operador acha o registro na origem."""
        registro = legivel(registro)
        valor = registro.get(self.key) if self.key else None
        if isinstance(valor, decimal.Decimal) and self.key:
            # A key como o registro a leva no JSON (o plano fixo a deixa crua).
            with contextlib.suppress(ErroSerializacao):
                valor = valor_json(valor, self.key)
        return descrever(self.dataset, self.escopo, self.key, valor)


class Envelope:
    """
    O corpo de cada pedido do envio. `remover` (as keys a remover, na forma JSON
    em que o registro as levou) vai em todo lote até um ser aceito; `sync` leva
    a parte, contada de `parte` em diante -- também no envelope vazio da prova.
    `registros_json(lote)` dá o array dos registros (lotes.FonteDeLotes).
    """

    def __init__(
        self,
        base: Mapping[str, object],
        *,
        sync: str | None,
        parte: int,
        remover: list[Json] | None,
        registros_json: Callable[[list[RegistroDoCorpo]], bytes],
    ) -> None:
        self.base, self.sync, self.remover = base, sync, remover
        self._partes = itertools.count(parte)
        self._registros_json = registros_json

    def montar(self, lote: list[RegistroDoCorpo]) -> bytes:
        envelope: dict[str, object] = dict(self.base)
        if self.sync is not None:
            envelope['sync'] = {'id': self.sync, 'part': next(self._partes)}
        if self.remover:
            envelope['remove'] = self.remover
        # O envelope pelo json de sempre; os registros (quase todo o corpo) pelo
        # caminho rapido, encaixados no fim do objeto.
        cabeca = json.dumps(
            envelope, ensure_ascii=False, separators=(',', ':'), allow_nan=False
        ).encode('utf-8')
        return cabeca[:-1] + b',"records":' + self._registros_json(lote) + b'}'


def _em_json(registro: RegistroDoCorpo) -> ObjetoJson:
    """
    Um registro de um envio com a quarentena, que só tem tipos JSON: a
    FonteDeLotes o serializa com Serializador(puro=True), sem plano fixo nem
    prontos (lotes.py), ou é o `serializar_parcial` dele.
    """
    return cast('ObjetoJson', registro)


class RecusasDoEnvio:
    """A quarentena vista por um envio (ver o topo do módulo)."""

    def __init__(
        self, quarentena: DestinoDeRecusas, alvo: Alvo, chave: str, resultado: ResultadoEnvio
    ) -> None:
        self.quarentena, self.alvo, self.chave, self.resultado = (
            quarentena,
            alvo,
            chave,
            resultado,
        )
        # So os nomes dos arquivos: sem nada guardado, nenhuma identidade e calculada.
        self.guardadas: set[str] = quarentena.identidades()
        self.novos = 0

    def guardar(
        self,
        registro: Mapping[str, Json],
        motivo: str,
        status_http: int | None = None,
        invalidos: Mapping[str, str] | None = None,
    ) -> list[str]:
        """Guarda o registro recusado de vez; devolve os erros (vazio = guardado)."""
        dataset, escopo, key = self.alvo
        try:
            self.quarentena.guardar(
                dataset, escopo, key, registro, motivo, invalidos=invalidos, status_http=status_http
            )
        except ErroFilaCheia as cheia:
            return [str(cheia)]
        except OSError as erro:
            return [
                '%s: recusado de vez (%s) e a quarentena não pode ser gravada (%s): o'
                ' lote conta como falho e a marca não avança'
                % (self.alvo.qual(registro), motivo[:200], erro)
            ]
        self.guardadas.add(identidade(dataset, escopo, key, registro))
        self.resultado.quarentenados += 1
        self.resultado.quarentena_motivos.append('%s: %s' % (self.alvo.qual(registro), motivo))
        self.novos += 1
        return []

    def isolar(
        self,
        registro: RegistroDoCorpo,
        resposta: requests.Response,
        contexto: str,  # noqa: ARG002
    ) -> list[str]:  # noqa: ARG002 - assinatura de enviar_em_lotes
        """O `isolar` da remessa: o registro recusado sozinho, guardado com o motivo."""
        return self.guardar(
            _em_json(registro),
            motivo_da_recusa(resposta, registro, self.chave),
            resposta.status_code,
        )

    def ja_guardado(self, registro: RegistroDoCorpo, invalidos: Mapping[str, str]) -> bool:
        """O mesmo registro, igual, já está na quarentena: não reenvia nem reabre a divisão."""
        if not self.guardadas:
            return False
        ident = identidade(*self.alvo, _em_json(registro))
        if ident not in self.guardadas:
            return False
        item = self.quarentena.guardado(ident)
        if (
            item is None
            or item.invalidos != dict(invalidos)
            or (json_canonico(item.registro) != json_canonico(_em_json(registro)))
        ):
            return False
        self.resultado.registros += 1
        self.resultado.quarentenados += 1
        self.resultado.quarentena_motivos.append(
            '%s: já estava na quarentena desde %s (%s)'
            % (self.alvo.qual(registro), item.desde, item.motivo)
        )
        return True

    def superar_entregues(self, lote: list[RegistroDoCorpo]) -> None:
        """Os registros do lote entregue tiram da quarentena a versão guardada deles."""
        if not self.guardadas:
            return
        dataset, escopo, _ = self.alvo
        for registro in lote:
            ident = identidade(*self.alvo, _em_json(registro))
            if ident in self.guardadas and self.quarentena.superar(ident, dataset, escopo):
                self.guardadas.discard(ident)
                self.resultado.quarentena_superados += 1


class Aceite:
    """O `aceitar` da remessa: lê a resposta final de um lote e soma no resultado."""

    def __init__(
        self,
        alvo: Alvo,
        chave: str,
        resultado: ResultadoEnvio,
        envelope: Envelope,
        recusas: RecusasDoEnvio | None,
    ) -> None:
        self.alvo, self.chave, self.resultado = alvo, chave, resultado
        self.envelope, self.recusas = envelope, recusas
        # Algum lote ja foi aceito (a compressao so e perguntada depois disso).
        self.aceitou = False

    def aceitar(
        self, resposta: requests.Response, contexto: str, lote: list[RegistroDoCorpo]
    ) -> list[str]:
        """Os erros do lote (vazio = aceito); a chave recusada levanta ErroAutenticacao."""
        if resposta.status_code in (401, 403):
            raise erro_autenticacao(resposta, self.alvo.escopo, self.alvo.dataset, self.chave)
        if resposta.status_code >= 300:
            if len(lote) == 1 and resposta.status_code in STATUS_RECUSA_DO_REGISTRO:
                # Um registro sozinho: dizer qual e por que (o 413 nao e o chunk).
                return [
                    '%s: %s -- %s'
                    % (
                        contexto,
                        self.alvo.qual(lote[0]),
                        motivo_da_recusa(resposta, lote[0], self.chave),
                    )
                ]
            return [
                '%s: HTTP %d, %s'
                % (
                    contexto,
                    resposta.status_code,
                    mascarar(detalhe_da_resposta(resposta), self.chave),
                )
            ]
        somadas = contagens(resposta, len(lote), contexto)
        self.aceitou = True
        resultado = self.resultado
        resultado.inserted += somadas['inserted']
        resultado.updated += somadas['updated']
        resultado.duplicates += somadas['duplicates']
        resultado.removed += somadas['removed']
        # Aceito um lote, a remocao foi junto: os seguintes nao a repetem.
        self.envelope.remover = None
        if self.recusas is not None:
            self.recusas.superar_entregues(lote)
        return []
