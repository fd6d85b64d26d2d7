"""Resolver a configuracao do ouvinte na ordem certa e montar o `Contexto`."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from contextia_sync.captura.ao_vivo import datasets_ao_vivo
from contextia_sync.captura.estrategias import (
    criar_captura,
    exigir_estrategia,
    resolver_estrategia,
)
from contextia_sync.erros import ErroConfiguracao
from contextia_sync.estado.estado import ARQUIVO_ESTADO, Estado
from contextia_sync.estado.trava import travar
from contextia_sync.intake import cliente
from contextia_sync.mapeamento import carregar_mapeamento
from contextia_sync.origem import carregar_origem
from contextia_sync.ouvinte import agenda
from contextia_sync.ouvinte.contexto import Contexto
from contextia_sync.provisionamento import regra_projeto
from contextia_sync.provisionamento.chaves import ler_chaves
from contextia_sync.registro import logger


def preparar(args: argparse.Namespace, parar: Callable[[], bool]) -> Contexto:
    """Monta o Contexto. Levanta ErroConfiguracao (a CLI sai com 2)."""
    # A ESTRATEGIA vem antes de tudo: e a decisao tomada com o DBA, e
    # `--estrategia=binlog` e a pergunta "o que isso exigiria?" -- a resposta
    # nao pode depender de URL, chaves ou mapeamento valido.
    if args.estrategia:
        exigir_estrategia(args.estrategia)
    mapping = os.path.abspath(args.mapping)
    mapa = carregar_mapeamento(mapping)
    nome_estrategia, de_onde = resolver_estrategia(args.estrategia, mapa)
    info = exigir_estrategia(nome_estrategia)

    varredura = agenda.ler_hora(args.varredura)
    if not cliente.url_destino():
        raise ErroConfiguracao(
            'Falta CONTEXTIA_URL (a instalacao do Contextia DESTE cliente).\n'
            'Nao ha padrao embutido: um valor default mandaria o dado para a'
            ' instalacao de outro cliente, sem erro nenhum. Defina-a no ambiente do'
            ' servico (ex.: no EnvironmentFile da unidade systemd).')
    chaves = os.path.abspath(args.chaves)
    if not os.path.exists(chaves):
        raise ErroConfiguracao(
            'Arquivo de chaves nao existe: %s\n'
            'O ouvinte precisa de uma chave por empresa. Rode o provisionar.py antes'
            ' -- ou aponte --chaves para o arquivo que ele gerou.' % args.chaves)
    quantas_chaves = len(ler_chaves(chaves))

    os.makedirs(args.estado, exist_ok=True)
    trava = travar(args.estado)
    estado = Estado(os.path.join(args.estado, ARQUIVO_ESTADO))
    vivos, fora = datasets_ao_vivo(mapa)
    regra = regra_projeto.resolver(mapa)
    origem = carregar_origem(args.source)
    captura = criar_captura(nome_estrategia, origem=origem, estado=estado,
                            folga=args.folga, maximo=args.maximo_por_ciclo)

    ctx = Contexto(
        mapa=mapa, vivos=vivos, fora=fora, regra=regra, origem=origem, estado=estado,
        estado_dir=args.estado, mapping=mapping, source=args.source, chaves=chaves,
        captura=captura, folga=args.folga, maximo=args.maximo_por_ciclo,
        grupos=args.grupo, seco=args.dry_run, varredura=varredura,
        janela=args.janela_varredura, timeout=args.timeout_ferramenta or None,
        inatividade=args.inatividade_ferramenta or None, parar=parar,
        estrategia=nome_estrategia, trava=trava)

    logger.info('===== ouvinte (pid %s) =====', os.getpid())
    logger.info('cliente ..........: %s', mapa.get('client') or '(sem nome)')
    logger.info('destino ..........: %s', cliente.url_destino())
    logger.info('chaves ...........: %s (%s empresa(s))', args.chaves, quantas_chaves)
    logger.info('estrategia .......: %s (%s) -- %s', nome_estrategia, de_onde,
                info['o_que_e'])
    if not info['ve_delete']:
        logger.warning('esta estrategia NAO ve exclusao: linha apagada na origem so sai'
                       ' do Contextia na varredura. O cliente precisa saber disso.')
    logger.info('dados ............: a cada %ss, folga de %ss, teto de %s linhas',
                args.intervalo_dados, args.folga, args.maximo_por_ciclo)
    logger.info('projetos .........: a cada %ss', args.intervalo_projetos)
    logger.info('varredura ........: %s', agenda.descrever(varredura, args.janela_varredura))
    logger.info('ferramentas ......: tempo maximo %ss, inatividade maxima %s',
                args.timeout_ferramenta,
                '%ss' % args.inatividade_ferramenta if args.inatividade_ferramenta
                else 'desligada')
    if varredura and not estado.varredura_feita_em() and not args.varrer_agora:
        logger.warning('nenhuma varredura registrada ainda. O ouvinte NAO faz carga'
                       ' completa fora da janela (cairia no horario comercial). Para'
                       ' a carga inicial agora, suba com --varrer-agora.')
    if args.dry_run:
        logger.warning('MODO SECO: nada e enviado, nada e criado, a marca de agua nao'
                       ' avanca e o estado nao e gravado')
    logger.info('datasets ao vivo .: %s de %s', len(vivos), len(mapa.get('datasets') or []))
    for nome, motivo in fora:
        logger.info('   fora do ao-vivo: %-28s %s (so muda na varredura)', nome, motivo)
    logger.info('regra de projeto:\n%s', regra_projeto.descrever(regra))
    if not vivos:
        logger.warning('NENHUM dataset tem coluna de mudanca: o ouvinte so fara'
                       ' varredura, o que o cron ja fazia. Declare `watch_column` no'
                       ' mapeamento para o ao-vivo valer a pena.')
    return ctx
