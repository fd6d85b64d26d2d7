"""
O arquivo de chaves: uma linha por empresa, TSV, modo 0600.

    # escopo<TAB>chave<TAB>projeto<TAB>id_da_chave<TAB>situacao
    297	ctx_...	12	key_a1b2c3	pronto
    301	ctx_...	13	key_d4e5f6	pendente

    situacao  pronto    projeto, chave, grupos e webhook feitos
              pendente  a chave esta gravada (e ja serve para carga), mas o
                        resto do provisionamento nao terminou: a proxima
                        execucao do provisionar.py conclui e revoga chave
                        orfa do projeto

Uma linha so com `escopo<TAB>chave` tambem vale (arquivo escrito a mao): conta
como pronta e o id da chave e deduzido pelo prefixo quando preciso.

Este e o UNICO leitor do arquivo: ouvinte, provisionar, connector e o
carregar-todas.sh (que pede aqui a lista e, empresa por empresa, a chave) leem
as mesmas linhas. Arquivo escrito a mao:
  * BOM (U+FEFF) no comeco -- o "UTF-8 com BOM" do Bloco de Notas -- e tirado
    calado: e assinatura da codificacao, nao dado, e avisar a cada ciclo do
    ouvinte so ensinaria o operador a ignorar aviso;
  * CRLF (editor do Windows): o CR do fim da linha e tirado;
  * caractere invisivel no escopo (BOM no meio do arquivo, espaco de largura
    zero, controle) RECUSA o arquivo: '\ufeff40' nao e '40', e a empresa 40
    pareceria nova -- o provisionar emitiria chave nova e revogaria a valida.

O arquivo e a UNICA copia das chaves -- o servidor so guarda o hash. Por isso:
gravado inteiro (temporario + fsync + rename, modo 0600 antes do conteudo
existir), recusado se outros podem le-lo, e recusado inteiro se uma linha esta
corrompida. Pular a linha ruim deixaria aquela empresa sem carga e sem aviso.

    python3 -m contextia_sync.provisionamento.chaves verificar ARQUIVO
        confere permissao e formato; imprime as empresas, uma por linha (NUNCA
        as chaves). E o que o carregar-todas.sh roda antes de comecar.

    python3 -m contextia_sync.provisionamento.chaves executar ARQUIVO ESCOPO -- PROGRAMA [ARG...]
        le o arquivo de novo (inteiro, com as mesmas recusas), poe a chave da
        empresa em CONTEXTIA_API_KEY, tira do ambiente os outros segredos
        (CONTEXTIA_ADMIN_TOKEN, segredos de webhook: contextia_sync/segredos.py)
        e troca este processo (exec, o mesmo pid) por PROGRAMA. E como o
        carregar-todas.sh roda cada connector: a chave nunca passa pelo bash
        (nem por `bash -x`), nem pela linha de comando (o `ps` de qualquer
        usuario), so pelo ambiente do connector.

Saida dos dois: 0 ok; 2 arquivo recusado, empresa fora do arquivo ou uso errado.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import sys
import unicodedata
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from contextia_sync import segredos
from contextia_sync.arquivos import gravar_atomico
from contextia_sync.erros import SAIDA_CONFIGURACAO, SAIDA_FALHA, SAIDA_OK, ErroConfiguracao

MODO = 0o600
BOM = '\ufeff'
VARIAVEL_CHAVE = 'CONTEXTIA_API_KEY'
SITUACOES = ('pendente', 'pronto')
CABECALHO = ('# arquivo de chaves do Contextia -- gerado pelo provisionar.py. NAO copie,\n'
             '# NAO versione, mantenha em modo 600. Uma empresa por linha:\n'
             '# escopo\tchave\tprojeto\tid_da_chave\tsituacao\n')

class Registro(NamedTuple):
    """Uma linha do arquivo: a chave de uma empresa e ate onde o provisionamento foi."""

    escopo: str
    chave: str
    projeto_id: int | None
    key_id: str | None
    situacao: str            # um de SITUACOES
    linha: int | None        # numero da linha no arquivo (None: ainda nao gravado)


class ErroChaves(ErroConfiguracao):
    """O arquivo de chaves nao pode ser usado (permissao aberta, linha corrompida)."""


def verificar_permissao(caminho: str) -> None:
    """Recusa arquivo legivel/gravavel por grupo ou outros, dizendo como corrigir."""
    modo = stat.S_IMODE(os.stat(caminho).st_mode)
    if modo & 0o077:
        raise ErroChaves(
            'o arquivo de chaves %s tem permissao %s: grupo/outros podem le-lo, e cada'
            ' linha e a chave de uma empresa. Corrija com:  chmod 600 %s\n'
            'e verifique quem o leu (se houver duvida, revogue as chaves no Contextia e'
            ' rode o provisionar.py de novo).' % (caminho, oct(modo)[2:].zfill(3), caminho))


def ler_registros(caminho: str) -> dict[str, Registro]:
    """{escopo: Registro}, na ordem do arquivo. Arquivo inexistente = {} (nada provisionado)."""
    try:
        verificar_permissao(caminho)
    except FileNotFoundError:
        return {}
    try:
        with open(caminho, encoding='utf-8', newline='') as arquivo:
            texto = arquivo.read()
    except UnicodeDecodeError as erro:
        raise ErroChaves('o arquivo de chaves %s nao e texto UTF-8 (byte %d) -- foi editado'
                         ' por fora? Restaure-o de um backup ou conserte a linha.'
                         % (caminho, erro.start)) from None

    # So no comeco do arquivo o BOM e assinatura; em qualquer outro lugar ele
    # cai no escopo e _registro recusa a linha.
    if texto.startswith(BOM):
        texto = texto[len(BOM):]

    registros: dict[str, Registro] = {}
    for numero, bruta in enumerate(texto.split('\n'), start=1):
        linha = bruta[:-1] if bruta.endswith('\r') else bruta
        if not linha.strip() or linha.lstrip().startswith('#'):
            continue
        registro = _registro(caminho, numero, linha)
        if registro.escopo in registros:
            raise ErroChaves(
                '%s, linha %d: a empresa %r ja aparece na linha %s. Duas chaves para a'
                ' mesma empresa: apague a errada (na duvida, apague as duas e rode o'
                ' provisionar.py, que emite uma nova e revoga as antigas).'
                % (caminho, numero, registro.escopo, registros[registro.escopo].linha))
        registros[registro.escopo] = registro
    return registros


def _registro(caminho: str, numero: int, linha: str) -> Registro:
    campos = linha.split('\t')
    onde = '%s, linha %d' % (caminho, numero)
    if len(campos) not in (2, 5):
        # A chave nunca entra na mensagem: ela vai para log.
        raise ErroChaves(
            '%s: esperava 5 campos separados por TAB (escopo, chave, projeto, id da chave,'
            ' situacao) ou 2 (escopo, chave), encontrei %d. A linha foi editada ou'
            ' truncada; conserte-a (o arquivo inteiro e recusado: pular a linha deixaria a'
            ' empresa sem carga).' % (onde, len(campos)))
    escopo, chave = campos[0].strip(), campos[1]
    if not escopo:
        raise ErroChaves('%s: escopo vazio -- o primeiro campo e o codigo da empresa.' % onde)
    invisivel = _invisivel(escopo)
    if invisivel:
        raise ErroChaves(
            '%s: o escopo %s tem um caractere invisivel (%s) -- a linha foi editada por fora'
            ' (editor que grava "UTF-8 com BOM", arquivos emendados, texto colado).'
            ' Apague o caractere: com ele a empresa parece outra, e o provisionar a'
            ' trataria como nova (chave nova, a valida revogada). O arquivo inteiro e'
            ' recusado ate la.' % (onde, ascii(escopo), invisivel))
    if not chave or re.search(r'\s', chave) or _invisivel(chave):
        raise ErroChaves('%s: a chave da empresa %r esta vazia ou tem espaco ou caractere'
                         ' invisivel -- a linha foi editada por fora. Apague a linha e rode o'
                         ' provisionar.py (ele emite outra e revoga a antiga).' % (onde, escopo))
    if len(campos) == 2:
        return Registro(escopo, chave, None, None, 'pronto', numero)
    projeto, key_id, situacao = (c.strip() for c in campos[2:])
    if situacao not in SITUACOES:
        raise ErroChaves('%s: situacao %r desconhecida (empresa %r) -- use %s.'
                         % (onde, situacao, escopo, ' ou '.join(SITUACOES)))
    if projeto and not projeto.isdigit():
        raise ErroChaves('%s: projeto %r nao e numero (empresa %r) -- a linha foi editada'
                         ' por fora.' % (onde, projeto, escopo))
    return Registro(escopo, chave, int(projeto) if projeto else None, key_id or None,
                    situacao, numero)


def _invisivel(texto: str) -> str | None:
    """O primeiro caractere de controle/formato/espaco de `texto` (ex.: 'U+FEFF, BOM'), ou None."""
    for caractere in texto:
        categoria = unicodedata.category(caractere)
        # C*: controle, formato (BOM, largura zero, marcas de direcao); Z*:
        # separadores. Nenhum faz parte de um codigo de empresa ou de uma chave.
        if categoria[0] in 'CZ' and caractere != ' ':
            nome = 'BOM' if caractere == BOM else unicodedata.name(caractere, categoria)
            return 'U+%04X, %s' % (ord(caractere), nome)
    return None


def ler_chaves(caminho: str) -> dict[str, str]:
    """{escopo: chave} -- o que ouvinte e conector precisam. Pendente ja serve para carga."""
    return {escopo: r.chave for escopo, r in ler_registros(caminho).items()}


def gravar_registros(caminho: str, registros: Iterable[Registro]) -> None:
    """Regrava o arquivo inteiro (atomico, 0600). `registros`: iteravel de Registro."""
    linhas = [CABECALHO]
    for r in registros:
        linhas.append('%s\t%s\t%s\t%s\t%s\n' % (
            r.escopo, r.chave, '' if r.projeto_id is None else r.projeto_id,
            r.key_id or '', r.situacao))
    gravar_atomico(caminho, ''.join(linhas), modo=MODO)


@contextlib.contextmanager
def travado(caminho: str) -> Iterator[None]:
    """
    Um provisionador por arquivo de chaves.

    Dois ao mesmo tempo (o ciclo de projetos do ouvinte e alguem rodando a mao)
    leriam o mesmo arquivo, emitiriam duas chaves para a mesma empresa e o
    ultimo a gravar apagaria a linha do outro: uma chave valida sem dono.
    """
    import fcntl
    trava = '%s.trava' % caminho
    descritor = os.open(trava, os.O_RDWR | os.O_CREAT, MODO)
    try:
        try:
            fcntl.flock(descritor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise ErroChaves(
                'outro provisionar.py esta usando %s agora (trava %s). Espere ele terminar;'
                ' dois ao mesmo tempo poderiam emitir duas chaves para a mesma empresa.'
                % (caminho, trava)) from None
        yield
    finally:
        os.close(descritor)


PROG = 'python3 -m contextia_sync.provisionamento.chaves'
USO = ('uso: %s verificar ARQUIVO\n'
       '     %s executar ARQUIVO ESCOPO -- PROGRAMA [ARG...]' % (PROG, PROG))
AJUDA = """
O leitor do arquivo de chaves na linha de comando (o carregar-todas.sh o usa).

  verificar ARQUIVO    confere permissão e formato e lista as empresas, uma por
                       linha (nunca as chaves)
  executar ARQUIVO ESCOPO -- PROGRAMA [ARG...]
                       põe a chave da empresa em CONTEXTIA_API_KEY e vira
                       PROGRAMA (exec, o mesmo pid): a chave vai só no ambiente

opções:
  -h, --help           mostra esta ajuda e sai
  --version            mostra a versão e sai
"""


def _ler_para_a_linha_de_comando(caminho: str) -> dict[str, Registro] | None:
    """Os registros, ou None depois de dizer no stderr por que o arquivo foi recusado."""
    if not os.path.exists(caminho):
        print('arquivo de chaves nao existe: %s -- rode o provisionar.py antes.' % caminho,
              file=sys.stderr)
        return None
    try:
        return ler_registros(caminho)
    except ErroChaves as erro:
        print(str(erro), file=sys.stderr)
        return None


def _executar(caminho: str, escopo: str, comando: list[str]) -> int:
    """Troca este processo por `comando`, com a chave de `escopo` so no ambiente."""
    registros = _ler_para_a_linha_de_comando(caminho)
    if registros is None:
        return SAIDA_CONFIGURACAO
    registro = registros.get(escopo)
    if registro is None:
        # Lido de novo aqui (e nao passado pelo bash): se o arquivo mudou desde
        # o `verificar`, vale o que esta nele agora.
        print('a empresa %r nao esta em %s (o arquivo mudou desde a verificacao?);'
              ' nada foi carregado para ela.' % (escopo, caminho), file=sys.stderr)
        return SAIDA_CONFIGURACAO
    # So a chave DESTA empresa: o token de admin e o segredo do webhook que o
    # bash tenha herdado (rodado a mao) nao chegam ao connector.
    ambiente = segredos.ambiente_sem_segredos(os.environ)
    ambiente[VARIAVEL_CHAVE] = registro.chave
    try:
        os.execvpe(comando[0], comando, ambiente)
    except OSError as erro:
        print('nao foi possivel executar %s: %s' % (comando[0], erro), file=sys.stderr)
    return SAIDA_CONFIGURACAO


def _principal(argv: list[str]) -> int:
    if argv[:1] in (['-h'], ['--help'], ['--version']):
        # So aqui: o texto da versao e o dos codigos de saida sao os de toda CLI.
        from contextia_sync.cli.comum import linha_de_versao
        from contextia_sync.erros import texto_das_saidas
        if argv[0] == '--version':
            print(linha_de_versao(PROG))
        else:
            print(USO + '\n' + AJUDA + '\n' + texto_das_saidas({
                SAIDA_OK: 'tudo certo (no executar, o código é o do PROGRAMA)',
                SAIDA_FALHA: None,
                SAIDA_CONFIGURACAO: 'arquivo recusado, empresa fora dele ou uso errado'}))
        return SAIDA_OK
    if len(argv) == 2 and argv[0] == 'verificar':
        registros = _ler_para_a_linha_de_comando(argv[1])
        if registros is None:
            return SAIDA_CONFIGURACAO
        for escopo in registros:
            print(escopo)
        return SAIDA_OK
    if len(argv) >= 5 and argv[0] == 'executar' and argv[3] == '--':
        return _executar(argv[1], argv[2], argv[4:])
    print(USO, file=sys.stderr)
    return SAIDA_CONFIGURACAO


if __name__ == '__main__':
    sys.exit(_principal(sys.argv[1:]))
