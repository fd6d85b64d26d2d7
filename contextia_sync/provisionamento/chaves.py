"""
O arquivo de chaves: uma linha por empresa, TSV, modo 0600.

    # escopo<TAB>chave<TAB>projeto<TAB>id_da_chave<TAB>situação
    297	ctx_...	12	key_a1b2c3	pronto
    301	ctx_...	13	key_d4e5f6	pendente

    situação  pronto    projeto, chave, grupos e webhook feitos
              pendente  a chave esta gravada (e já serve para carga), mas o
                        resto do provisionamento não terminou: a próxima
                        execução do provisionar.py conclui e revoga chave
                        órfã do projeto

Uma linha só com `escopo<TAB>chave` também vale (arquivo escrito a mão): conta
como pronta e o id da chave e deduzido pelo prefixo quando preciso.

Este e o ÚNICO leitor do arquivo: ouvinte, provisionar, connector e o
carregar-todas.sh (que pede aqui a lista e, empresa por empresa, a chave) leem
as mesmas linhas. Arquivo escrito a mão:
  * BOM (U+FEFF) no começo -- o "UTF-8 com BOM" do Bloco de Notas -- e tirado
    calado: e assinatura da codificação, não dado, e avisar a cada ciclo do
    ouvinte só ensinaria o operador a ignorar aviso;
  * CRLF (editor do Windows): o CR do fim da linha e tirado;
  * caractere invisível no escopo (BOM no meio do arquivo, espaço de largura
    zero, controle) RECUSA o arquivo: '\ufeff40' não é '40', e a empresa 40
    pareceria nova -- o provisionar emitiria chave nova e revogaria a valida.

O arquivo e a ÚNICA copia das chaves -- o servidor só guarda o hash. Por isso:
gravado inteiro (temporário + fsync + rename, modo 0600 antes do conteúdo
existir), recusado se outros podem le-lo, e recusado inteiro se uma linha esta
corrompida. Pular a linha ruim deixaria aquela empresa sem carga e sem aviso.
Recusado também (leitura e gravação, saída 2 com a correção) se não é um
arquivo comum do usuário que roda: link simbólico (o rename trocaria o link por
um arquivo e o alvo ficaria velho -- escolha: recusar, e não gravar no alvo,
porque quem troca o link escolheria de onde as chaves são lidas), pasta,
arquivo especial, arquivo de outro dono; ilegível vira mensagem, não traceback.
O código de empresa de cada linha segue `escopos.problema_no_escopo`, e a
gravação confere cada campo antes: um TAB ou uma quebra de linha viraria outra
linha (a chave de um projeto na linha de outra empresa).

    python3 -m contextia_sync.provisionamento.chaves verificar ARQUIVO
        confere permissão e formato; imprime as empresas, uma por linha (NUNCA
        as chaves). E o que o carregar-todas.sh roda antes de começar.

    python3 -m contextia_sync.provisionamento.chaves executar ARQUIVO ESCOPO -- PROGRAMA [ARG...]
        lê o arquivo de novo (inteiro, com as mesmas recusas), põe a chave da
        empresa em CONTEXTIA_API_KEY, tira do ambiente os outros segredos
        (CONTEXTIA_ADMIN_TOKEN, segredos de webhook: contextia_sync/segredos.py)
        e troca este processo (exec, o mesmo pid) por PROGRAMA: para rodar uma
        ferramenta de uma empresa só com a chave dela sem que a chave passe
        pelo bash (nem por `bash -x`) nem pela linha de comando (o `ps` de
        qualquer usuário). O carregar-todas.sh não o usa mais: ele roda um
        connector --todas, que lê as chaves deste arquivo por conta própria.

Saída dos dois: 0 ok; 2 arquivo recusado, empresa fora do arquivo ou uso errado.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import sys
import unicodedata
from collections.abc import Iterable, Iterator, Mapping
from typing import NamedTuple

from contextia_sync import segredos
from contextia_sync.arquivos import gravar_atomico
from contextia_sync.erros import SAIDA_CONFIGURACAO, SAIDA_FALHA, SAIDA_OK, ErroConfiguracao
from contextia_sync.escopos import REGRA, problema_no_escopo, texto_escopo
from contextia_sync.registro import limpo

MODO = 0o600
BOM = '\ufeff'
VARIAVEL_CHAVE = 'CONTEXTIA_API_KEY'
SITUACOES = ('pendente', 'pronto')
CABECALHO = (
    '# arquivo de chaves do Contextia -- gerado pelo provisionar.py. NÃO copie,\n'
    '# NÃO versione, mantenha em modo 600. Uma empresa por linha:\n'
    '# escopo\tchave\tprojeto\tid_da_chave\tsituacao\n'
)


class Registro(NamedTuple):
    """Uma linha do arquivo: a chave de uma empresa e até onde o provisionamento foi."""

    escopo: str
    chave: str
    projeto_id: int | None
    key_id: str | None
    situacao: str  # um de SITUACOES
    linha: int | None  # numero da linha no arquivo (None: ainda nao gravado)


class ErroChaves(ErroConfiguracao):
    """O arquivo de chaves não pode ser usado (permissão aberta, linha corrompida)."""


def verificar_permissao(caminho: str, info: os.stat_result | None = None) -> None:
    """
    Recusa o que não é o arquivo de chaves deste usuário, dizendo como corrigir:
    link simbólico, pasta ou arquivo especial, arquivo de outro dono, e arquivo
    legivel/gravavel por grupo ou outros. `info`: o stat já tirado (do
    descritor aberto); sem ele, o do caminho, sem seguir link.
    """
    if info is None:
        info = os.lstat(caminho)
    _conferir_tipo_e_dono(caminho, info)
    modo = stat.S_IMODE(info.st_mode)
    if modo & 0o077:
        raise ErroChaves(
            'o arquivo de chaves %s tem permissão %s: grupo/outros podem le-lo, e cada'
            ' linha e a chave de uma empresa. Corrija com:  chmod 600 %s\n'
            'e verifique quem o leu (se houver duvida, revogue as chaves no Contextia e'
            ' rode o provisionar.py de novo).' % (caminho, oct(modo)[2:].zfill(3), caminho)
        )


def _conferir_tipo_e_dono(caminho: str, info: os.stat_result) -> None:
    """
    O arquivo de chaves e um arquivo comum, não um link, e do usuário que roda.

    Link simbólico: a gravação (temporário + rename) troca o LINK por um arquivo
    comum e o alvo fica velho -- a chave nova num lugar, os leitores do alvo no
    outro; e quem pode trocar o link escolhe de onde as chaves são lidas. Outro
    dono: quem grava (root, outro usuário) deixaria o arquivo com o dono dele, e
    o serviço, que roda como o dono de verdade, não o leria mais; e o dono de
    verdade pode trocar as chaves por baixo de quem roda.
    """
    if stat.S_ISLNK(info.st_mode):
        raise ErroChaves(
            'o arquivo de chaves %s é um link simbólico (para %s): recusado. Gravar nele'
            ' trocaria o link por um arquivo comum e o alvo ficaria velho. Aponte o'
            ' programa para o arquivo de verdade: %s'
            % (caminho, _alvo(caminho), os.path.realpath(caminho))
        )
    if stat.S_ISDIR(info.st_mode):
        raise ErroChaves(
            'o arquivo de chaves %s é uma pasta, não um arquivo: aponte para o arquivo'
            ' (TSV) que o provisionar.py gerou, por exemplo %s'
            % (caminho, os.path.join(caminho, 'chaves.tsv'))
        )
    if not stat.S_ISREG(info.st_mode):
        raise ErroChaves(
            'o arquivo de chaves %s não é um arquivo comum (é um %s): aponte para o'
            ' arquivo (TSV) que o provisionar.py gerou.' % (caminho, _tipo(info.st_mode))
        )
    euid = os.geteuid()
    if info.st_uid != euid:
        dono = _usuario(info.st_uid)
        raise ErroChaves(
            'o arquivo de chaves %s é do usuário %s (uid %d), e este programa roda como %s'
            ' (uid %d): recusado. Gravado por outro usuário, o arquivo mudaria de dono e o'
            ' serviço deixaria de lê-lo; e quem é dono dele pode trocar as chaves. Rode'
            ' como o dono (ex.: sudo -u %s ...) ou, se o arquivo é mesmo deste usuário,'
            ' corrija com:  chown %s %s'
            % (caminho, dono, info.st_uid, _usuario(euid), euid, dono, _usuario(euid), caminho)
        )


def _alvo(caminho: str) -> str:
    try:
        return os.readlink(caminho)
    except OSError:
        return '?'


def _tipo(modo: int) -> str:
    for teste, nome in (
        (stat.S_ISFIFO, 'pipe'),
        (stat.S_ISSOCK, 'socket'),
        (stat.S_ISCHR, 'dispositivo'),
        (stat.S_ISBLK, 'dispositivo'),
    ):
        if teste(modo):
            return nome
    return 'arquivo especial'


def _usuario(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _abrir(caminho: str) -> int | None:
    """
    O descritor do arquivo de chaves aberto para leitura, ou None se ele não existe.

    O_NOFOLLOW: o link e recusado no próprio open (entre conferir e abrir ninguém
    troca o arquivo por um link); O_NONBLOCK: um pipe no lugar do arquivo não
    trava o programa -- ele é recusado pelo tipo logo depois.
    """
    try:
        return os.open(caminho, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as erro:
        if erro.errno == errno.ELOOP:
            verificar_permissao(caminho)  # o link: recusado com a mensagem dele
        if isinstance(erro, PermissionError):
            raise ErroChaves(
                'sem permissão para ler o arquivo de chaves %s (%s): rode como o dono do'
                ' arquivo (o usuário do serviço, ex.: sudo -u contextia ...) ou corrija o'
                ' dono e o modo (chown e chmod 600).' % (caminho, erro.strerror)
            ) from None
        raise ErroChaves(
            'não foi possível abrir o arquivo de chaves %s (%s: %s).'
            % (caminho, type(erro).__name__, erro.strerror or erro)
        ) from None


# O arquivo lido por ultimo em cada caminho: (identidade, registros). O ouvinte
# pergunta as chaves a cada ciclo de dados; reler e reconferir cada linha a
# cada segundo nao traz nada enquanto o arquivo nao muda.
_LIDOS: dict[str, tuple[tuple[int, ...], dict[str, Registro]]] = {}


def _identidade(estado: os.stat_result) -> tuple[int, ...]:
    """O que muda quando o arquivo muda: trocado (rename), reescrito, ou o modo."""
    return (estado.st_dev, estado.st_ino, estado.st_size, estado.st_mtime_ns, estado.st_ctime_ns)


def ler_registros(caminho: str) -> dict[str, Registro]:
    """
    {escopo: Registro}, na ordem do arquivo. Arquivo inexistente = {} (nada provisionado).

    Lido de novo só quando muda (a identidade do `fstat`); o open sem seguir link
    e a conferência do dono e do modo valem a cada chamada.
    """
    descritor = _abrir(caminho)
    if descritor is None:
        _LIDOS.pop(caminho, None)
        return {}
    try:
        estado = os.fstat(descritor)
        verificar_permissao(caminho, estado)
        lido = _LIDOS.get(caminho)
        if lido is not None and lido[0] == _identidade(estado):
            return dict(lido[1])
        with open(descritor, encoding='utf-8', newline='', closefd=False) as arquivo:
            texto = arquivo.read()
    except UnicodeDecodeError as erro:
        raise ErroChaves(
            'o arquivo de chaves %s não é texto UTF-8 (byte %d) -- foi editado'
            ' por fora? Restaure-o de um backup ou conserte a linha.' % (caminho, erro.start)
        ) from None
    except OSError as erro:
        raise ErroChaves(
            'não foi possível ler o arquivo de chaves %s (%s: %s).'
            % (caminho, type(erro).__name__, erro.strerror or erro)
        ) from None
    finally:
        os.close(descritor)

    # So no comeco do arquivo o BOM e assinatura; em qualquer outro lugar ele
    # cai no escopo e _registro recusa a linha.
    if texto.startswith(BOM):
        texto = texto[len(BOM) :]

    registros: dict[str, Registro] = {}
    for numero, bruta in enumerate(texto.split('\n'), start=1):
        linha = bruta[:-1] if bruta.endswith('\r') else bruta
        if not linha.strip() or linha.lstrip().startswith('#'):
            continue
        registro = _registro(caminho, numero, linha)
        if registro.escopo in registros:
            raise ErroChaves(
                '%s, linha %d: a empresa %r já aparece na linha %s. Duas chaves para a'
                ' mesma empresa: apague a errada (na duvida, apague as duas e rode o'
                ' provisionar.py, que emite uma nova e revoga as antigas).'
                % (caminho, numero, registro.escopo, registros[registro.escopo].linha)
            )
        registros[registro.escopo] = registro
    _LIDOS[caminho] = (_identidade(estado), dict(registros))
    return registros


def _registro(caminho: str, numero: int, linha: str) -> Registro:
    campos = linha.split('\t')
    onde = '%s, linha %d' % (caminho, numero)
    if len(campos) not in (2, 5):
        # A chave nunca entra na mensagem: ela vai para log.
        raise ErroChaves(
            '%s: esperava 5 campos separados por TAB (escopo, chave, projeto, id da chave,'
            ' situação) ou 2 (escopo, chave), encontrei %d. A linha foi editada ou'
            ' truncada; conserte-a (o arquivo inteiro e recusado: pular a linha deixaria a'
            ' empresa sem carga).' % (onde, len(campos))
        )
    # A forma canonica (so o espaco ASCII sai): o NBSP ou o TAB que um editor
    # deixou no codigo e recusado abaixo, nunca apagado em silencio.
    escopo, chave = texto_escopo(campos[0]), campos[1]
    if not escopo:
        raise ErroChaves('%s: escopo vazio -- o primeiro campo e o código da empresa.' % onde)
    invisivel = _invisivel(escopo)
    if invisivel:
        raise ErroChaves(
            '%s: o escopo %s tem um caractere invisível (%s) -- a linha foi editada por fora'
            ' (editor que grava "UTF-8 com BOM", arquivos emendados, texto colado).'
            ' Apague o caractere: com ele a empresa parece outra, e o provisionar a'
            ' trataria como nova (chave nova, a valida revogada). O arquivo inteiro e'
            ' recusado até la.' % (onde, ascii(escopo), invisivel)
        )
    problema = problema_no_escopo(escopo)
    if problema:
        raise ErroChaves(
            "%s: o escopo '%s' %s. %s; um código assim não vem do cadastro (o provisionar"
            ' o recusa lá) -- a linha foi editada por fora. Corrija-a para o código como o'
            ' ERP o traz. O arquivo inteiro é recusado até lá.'
            % (onde, limpo(escopo), problema, REGRA)
        )
    if not chave or re.search(r'\s', chave) or _invisivel(chave):
        raise ErroChaves(
            '%s: a chave da empresa %r está vazia ou tem espaço ou caractere'
            ' invisível -- a linha foi editada por fora. Apague a linha e rode o'
            ' provisionar.py (ele emite outra e revoga a antiga).' % (onde, escopo)
        )
    if len(campos) == 2:
        return Registro(escopo, chave, None, None, 'pronto', numero)
    projeto, key_id, situacao = (c.strip() for c in campos[2:])
    if situacao not in SITUACOES:
        raise ErroChaves(
            '%s: situação %r desconhecida (empresa %r) -- use %s.'
            % (onde, situacao, escopo, ' ou '.join(SITUACOES))
        )
    if projeto and not projeto.isdigit():
        raise ErroChaves(
            '%s: projeto %r não é número (empresa %r) -- a linha foi editada'
            ' por fora.' % (onde, projeto, escopo)
        )
    return Registro(
        escopo, chave, int(projeto) if projeto else None, key_id or None, situacao, numero
    )


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
    """{escopo: chave} -- o que ouvinte e conector precisam. Pendente já serve para carga."""
    return {escopo: r.chave for escopo, r in ler_registros(caminho).items()}


def empresa_da_chave(dono: Mapping[str, object], escopo: str) -> str | None:
    """
    A empresa do projeto de uma chave quando ela NÃO é `escopo`; None se a chave
    e de `escopo` -- ou se o projeto não diz de que empresa e (sem external_id:
    nada a comparar). `dono`: o que `intake.cliente.quem_sou` devolve.

    O conector e o ouvinte conferem assim a linha do arquivo antes de mandar
    dado: chave trocada mandaria os titulos da 297 para o projeto da 301 --
    vazamento entre empresas, sem erro nenhum do servidor.
    """
    externo = texto_escopo(dono.get('external_id'))
    return externo if externo and externo != escopo else None


def gravar_registros(caminho: str, registros: Iterable[Registro]) -> None:
    """
    Regrava o arquivo inteiro (atômico, 0600). `registros`: iterável de Registro.

    Cada campo e conferido ANTES de gravar: um TAB ou uma quebra de linha num
    código de empresa (ou numa chave ou id que o servidor devolveu) viraria
    outra linha -- a chave de um projeto na linha de outra empresa. Campo que
    não serve: ErroChaves, e nada e gravado. O caminho também: link simbólico ou
    arquivo de outro dono são recusados aqui, antes do rename que os trocaria.
    """
    linhas = [CABECALHO]
    for r in registros:
        _conferir_para_gravar(caminho, r)
        linhas.append(
            '%s\t%s\t%s\t%s\t%s\n'
            % (
                r.escopo,
                r.chave,
                '' if r.projeto_id is None else r.projeto_id,
                r.key_id or '',
                r.situacao,
            )
        )
    try:
        _conferir_tipo_e_dono(caminho, os.lstat(caminho))
    except FileNotFoundError:
        pass
    gravar_atomico(caminho, ''.join(linhas), modo=MODO)


def _conferir_para_gravar(caminho: str, r: Registro) -> None:
    problema = problema_no_escopo(r.escopo) if r.escopo else 'está vazio'
    ruins = []
    if problema:
        ruins.append("o código da empresa '%s' %s (%s)" % (limpo(r.escopo), problema, REGRA))
    if not r.chave or re.search(r'\s', r.chave) or _invisivel(r.chave):
        ruins.append('a chave está vazia ou tem espaço ou caractere invisível')
    if r.key_id is not None and (
        not r.key_id or re.search(r'\s', r.key_id) or _invisivel(r.key_id)
    ):
        ruins.append("o id da chave '%s' tem espaço ou caractere invisível" % limpo(r.key_id))
    if r.projeto_id is not None and not isinstance(r.projeto_id, int):
        ruins.append("o projeto '%s' não é número" % limpo(str(r.projeto_id)))
    if r.situacao not in SITUACOES:
        ruins.append("a situação '%s' não é %s" % (limpo(str(r.situacao)), ' nem '.join(SITUACOES)))
    if ruins:
        raise ErroChaves(
            'nada foi gravado em %s: %s. Gravada assim, a linha viraria outra(s) no arquivo'
            ' de chaves.' % (caminho, '; '.join(ruins))
        )


@contextlib.contextmanager
def travado(caminho: str) -> Iterator[None]:
    """
    Um provisionador por arquivo de chaves.

    Dois ao mesmo tempo (o ciclo de projetos do ouvinte e alguém rodando a mão)
    leriam o mesmo arquivo, emitiriam duas chaves para a mesma empresa e o
    último a gravar apagaria a linha do outro: uma chave valida sem dono.
    """
    import fcntl

    trava = '%s.trava' % caminho
    try:
        # O_NOFOLLOW: um link posto no lugar da trava nao faz o open criar outro arquivo.
        descritor = os.open(trava, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, MODO)
    except OSError as erro:
        raise ErroChaves(
            'não foi possível abrir a trava %s do arquivo de chaves (%s: %s): ela tem de'
            ' ser um arquivo comum numa pasta em que este usuário grava.'
            % (trava, type(erro).__name__, erro.strerror or erro)
        ) from None
    try:
        try:
            fcntl.flock(descritor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise ErroChaves(
                'outro provisionar.py está usando %s agora (trava %s). Espere ele terminar;'
                ' dois ao mesmo tempo poderiam emitir duas chaves para a mesma empresa.'
                % (caminho, trava)
            ) from None
        yield
    finally:
        os.close(descritor)


PROG = 'python3 -m contextia_sync.provisionamento.chaves'
USO = 'uso: %s verificar ARQUIVO\n     %s executar ARQUIVO ESCOPO -- PROGRAMA [ARG...]' % (
    PROG,
    PROG,
)
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
    if not os.path.lexists(caminho):
        print(
            'arquivo de chaves não existe: %s -- rode o provisionar.py antes.' % caminho,
            file=sys.stderr,
        )
        return None
    try:
        return ler_registros(caminho)
    except ErroChaves as erro:
        print(str(erro), file=sys.stderr)
        return None


def _executar(caminho: str, escopo: str, comando: list[str]) -> int:
    """Troca este processo por `comando`, com a chave de `escopo` só no ambiente."""
    registros = _ler_para_a_linha_de_comando(caminho)
    if registros is None:
        return SAIDA_CONFIGURACAO
    registro = registros.get(escopo)
    if registro is None:
        # Lido de novo aqui (e nao passado pelo bash): se o arquivo mudou desde
        # o `verificar`, vale o que esta nele agora.
        print(
            'a empresa %r não está em %s (o arquivo mudou desde a verificação?);'
            ' nada foi carregado para ela.' % (escopo, caminho),
            file=sys.stderr,
        )
        return SAIDA_CONFIGURACAO
    # So a chave DESTA empresa: o token de admin e o segredo do webhook que o
    # bash tenha herdado (rodado a mao) nao chegam ao connector.
    ambiente = segredos.ambiente_sem_segredos(os.environ)
    ambiente[VARIAVEL_CHAVE] = registro.chave
    try:
        os.execvpe(comando[0], comando, ambiente)
    except OSError as erro:
        print('não foi possível executar %s: %s' % (comando[0], erro), file=sys.stderr)
    return SAIDA_CONFIGURACAO


def _principal(argv: list[str]) -> int:
    if argv[:1] in (['-h'], ['--help'], ['--version']):
        # So aqui: o texto da versao e o dos codigos de saida sao os de toda CLI.
        from contextia_sync.linha_de_comando import linha_de_versao
        from contextia_sync.erros import texto_das_saidas

        if argv[0] == '--version':
            print(linha_de_versao(PROG))
        else:
            print(
                USO
                + '\n'
                + AJUDA
                + '\n'
                + texto_das_saidas(
                    {
                        SAIDA_OK: 'tudo certo (no executar, o código é o do PROGRAMA)',
                        SAIDA_FALHA: None,
                        SAIDA_CONFIGURACAO: 'arquivo recusado, empresa fora dele ou uso errado',
                    }
                )
            )
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
