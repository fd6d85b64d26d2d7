"""
A URL da origem (CONTEXTIA_ORIGEM) lida e mostrada sem a senha.

A URL só aparece em mensagem depois de PARSEADA pelo SQLAlchemy, e mostrada
por ele com a senha e os parâmetros secretos da query trocados por `***`
(`descrever_url`). A que não parseia -- ou parseia errado: um `@` sem
codificar na senha joga o resto dela no host -- e recusada sem que nada dela
seja mostrado (`ler_url`). Texto livre (a mensagem do driver) não é varrido
por pedaco da senha: uma senha de uma letra estragaria a mensagem inteira
('cannot e***ecute'); só a senha como palavra inteira e um `usuário:senha@`
embutido são trocados (`mascarar`).
"""

from __future__ import annotations

import os
import re
import ssl
from dataclasses import dataclass, field
from typing import TypeAlias, TypedDict
from urllib.parse import quote, quote_plus

import sqlalchemy as sa

from contextia_sync.origem import ErroConfiguracaoOrigem

# Parametros da query que guardam segredo: `?password=` (psycopg, pymysql),
# `odbc_connect=...PWD=...` (pyodbc), e o que se parecer com eles.
_QUERY_SEGREDO = re.compile(r'pass|pwd|senha|secret|token|key|odbc_connect|auth', re.I)

# usuario:senha@ dentro de um texto livre (uma URL que o driver repetiu).
_SENHA_EM_URL = re.compile(r'([^:/@\s]+:)[^\s/]*@')
# O que separa uma palavra inteira numa mensagem de driver.
_SEPARADOR = r"""\s'"`=:,;()\[\]{}<>/@"""

FORMATO = (
    'Formato: postgresql+psycopg://usuario:senha@host:5432/banco (um por banco em'
    ' docs/origem.md); senha com @, :, / ou # vai codificada (%40, %3A, %2F, %23).'
)


def ler_url(texto: str | sa.URL, variavel: str = 'CONTEXTIA_ORIGEM') -> sa.URL:
    """
    A URL de `variavel` parseada, ou ErroConfiguracaoOrigem que não repete nada dela.

    O `@` sem codificar na senha: o SQLAlchemy lê `leitor:abc@def@host` como
    senha `abc` e host `def@host`, e o driver poria `def` -- o resto da senha
    -- na mensagem de "host não encontrado". Recusado antes de conectar.
    `postgres://` (o apelido do libpq, que o SQLAlchemy não conhece) vira
    `postgresql://`.
    """
    if isinstance(texto, sa.URL):
        url = texto
    else:
        try:
            url = sa.engine.make_url(texto)
        except Exception:  # noqa: BLE001
            # A mensagem do SQLAlchemy repete a URL inteira -- com a senha.
            raise ErroConfiguracaoOrigem(
                '%s não é URL SQLAlchemy válida%s; ela não é mostrada aqui'
                ' porque pode conter a senha. %s' % (variavel, _dica(str(texto)), FORMATO)
            ) from None
    if url.host and '@' in url.host:
        raise ErroConfiguracaoOrigem(
            '%s tem "@" sem codificar antes do host (%s): a senha ou o'
            ' usuário tem um "@", e o banco receberia parte da senha como nome do host.'
            ' Codifique cada "@" da senha como %%40. %s'
            % (variavel, descrever_url(url.set(host=url.host.rpartition('@')[2])), FORMATO)
        )
    banco, mais, driver = url.drivername.partition('+')
    if banco == 'postgres':
        url = url.set(drivername='postgresql' + mais + driver)
    return url


def _dica(texto: str) -> str:
    """O que falta numa URL que não parseia, sem repetir nada dela."""
    if '://' not in texto:
        if re.match(r'[^:/@\s]+/[^@\s/]*@', texto):
            return (
                ' (o jeito usuario/senha@host do Oracle não vale aqui: use'
                ' oracle+oracledb://usuario:senha@host:1521/?service_name=...)'
            )
        return ' (falta o "://" depois do nome do banco)'
    return ''


def descrever_url(url: sa.URL) -> str:
    """A URL para mensagem e log: senha e parâmetros secretos da query como ***."""
    ocultos = sorted(k for k in url.query if _QUERY_SEGREDO.search(k))
    seguros = {k: v for k, v in url.query.items() if k not in ocultos}
    texto = url.set(query=seguros).render_as_string(hide_password=True)
    if ocultos:
        texto += ('&' if seguros else '?') + '&'.join('%s=***' % quote_plus(k) for k in ocultos)
    return texto


def mascarar(texto: object, senha: str | None = None) -> str:
    """
    Tira a senha de um texto livre (a mensagem do driver).

    Um `usuário:senha@` embutido vira `usuário:***@`; a `senha` (crua ou
    codificada) vira `***` só onde aparece como palavra inteira -- nunca dentro
    de outra palavra: a senha `e` deixa `cannot execute` como está.
    """
    texto = _SENHA_EM_URL.sub(r'\1***@', str(texto))
    if senha:
        for forma in sorted(
            {senha, quote_plus(senha), quote(senha, safe='')}, key=len, reverse=True
        ):
            texto = re.sub(
                r'(?<![^%s])%s(?![^%s])' % (_SEPARADOR, re.escape(forma), _SEPARADOR), '***', texto
            )
    return texto


# ---------------------------------------------------------------------------
# TLS: lido UMA vez da URL, e dito a cada driver do jeito dele
# ---------------------------------------------------------------------------

# Os parâmetros de TLS que a URL aceita, por família. Os do PostgreSQL são os do
# libpq e vão ao driver como estão; os do MySQL/MariaDB são os do SQLAlchemy e do
# PyMySQL, lidos aqui numa semântica só (o SQLAlchemy e o PyMySQL, sozinhos, leem
# `ssl_ca` de jeitos diferentes: um verifica o certificado, o outro não).
_TLS_POSTGRES = frozenset(
    {
        'sslmode',
        'sslrootcert',
        'sslcert',
        'sslkey',
        'sslpassword',
        'sslcrl',
        'sslcrldir',
        'sslsni',
        'sslcompression',
        'sslcertmode',
        'sslnegotiation',
        'requiressl',
        'ssl_min_protocol_version',
        'ssl_max_protocol_version',
    }
)
_TLS_MYSQL = frozenset(
    {
        'ssl_ca',
        'ssl_capath',
        'ssl_cert',
        'ssl_key',
        'ssl_key_password',
        'ssl_cipher',
        'ssl_check_hostname',
        'ssl_verify_cert',
        'ssl_verify_identity',
        'ssl_disabled',
        'ssl_mode',
    }
)
_SSLMODES_POSTGRES = ('disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full')
# O `ssl_mode` do MySQL, e o modo de cada um aqui.
_SSL_MODE_MYSQL = {
    'DISABLED': 'desligado',
    'PREFERRED': 'preferido',
    'REQUIRED': 'exigido',
    'VERIFY_CA': 'verificar_ca',
    'VERIFY_IDENTITY': 'verificar_nome',
}
# Parâmetros que são caminho de arquivo (ou pasta): conferidos antes de conectar.
_ARQUIVOS = (
    'sslrootcert',
    'sslcert',
    'sslkey',
    'sslcrl',
    'sslcrldir',
    'ssl_ca',
    'ssl_capath',
    'ssl_cert',
    'ssl_key',
)
_SIM = ('1', 'true', 'yes', 'on', 'sim')
_NAO = ('0', 'false', 'no', 'off', 'nao', 'não')

# A mensagem do driver que é recusa de TLS (configuração), e não queda de rede.
_FALHA_TLS = re.compile(
    r'certificate|certificado|secure.transport|no encryption|SSL is required|'
    r'does not support SSL|SSL.*(alert|wrong version|unsupported protocol)|private key|'
    r'sslmode|ssl_mode',
    re.I,
)


@dataclass(frozen=True)
class TlsOrigem:
    """
    O TLS de uma URL de origem, lido uma vez (`tls_da_url`) e dado a cada driver
    por uma função (`argumentos_psycopg`, `argumentos_pymysql`,
    `argumentos_mysqldb`, `argumentos_do_engine`).

    `modo` é o do libpq no PostgreSQL (`sslmode`, '' se a URL não diz) e, no
    MySQL/MariaDB: desligado, preferido (o padrão do driver: TLS se o servidor
    oferece, sem verificar), exigido (TLS sem verificar), verificar_ca ou
    verificar_nome (a cadeia e o nome do host).
    """

    familia: str  # 'postgresql', 'mysql' ou o banco da URL
    variavel: str  # de onde a URL veio (para as mensagens)
    modo: str = ''
    parametros: tuple[tuple[str, str], ...] = ()  # os do libpq, como vieram
    ca: str | None = None
    ca_pasta: str | None = None
    certificado: str | None = None
    chave: str | None = None
    senha_da_chave: str | None = field(default=None, repr=False)
    cifras: str | None = None

    @property
    def verifica(self) -> bool:
        """O certificado do servidor é verificado contra um CA."""
        return self.modo in ('verify-ca', 'verify-full', 'verificar_ca', 'verificar_nome')


def familia_da_url(url: sa.URL) -> str:
    """'postgresql', 'mysql' (MySQL e MariaDB) ou o nome do banco como a URL diz."""
    banco = url.get_backend_name()
    return 'mysql' if banco == 'mariadb' else banco


def tls_da_url(url: sa.URL, variavel: str = 'CONTEXTIA_ORIGEM') -> TlsOrigem:
    """
    O TLS da query da URL, conferido: parâmetro da outra família, valor que não
    se lê e arquivo que não existe viram ErroConfiguracaoOrigem com o nome da
    variável e a correção -- antes de qualquer conexão.
    """
    familia = familia_da_url(url)
    query = {k: _um_valor(url.query[k], k, variavel) for k in url.query}
    if familia == 'postgresql':
        outra, dica = _TLS_MYSQL, 'sslmode=verify-ca&sslrootcert=/caminho/ca.pem'
    else:
        outra, dica = _TLS_POSTGRES, 'ssl_ca=/caminho/ca.pem'
    erradas = sorted(k for k in query if k in outra)
    if familia in ('postgresql', 'mysql') and erradas:
        raise ErroConfiguracaoOrigem(
            '%s tem %s, parâmetro de TLS de outro banco: a URL é de %s. Para ele, use %s'
            ' (docs/origem.md, "TLS").' % (variavel, ', '.join(erradas), familia, dica)
        )
    for nome in _ARQUIVOS:
        caminho = query.get(nome)
        if caminho and not (nome == 'sslrootcert' and caminho == 'system'):
            _conferir_arquivo(nome, caminho, variavel)
    if familia == 'postgresql':
        return _tls_postgres(query, variavel)
    if familia == 'mysql':
        return _tls_mysql(query, variavel)
    return TlsOrigem(familia, variavel)


def _um_valor(valor: str | tuple[str, ...], nome: str, variavel: str) -> str:
    if isinstance(valor, tuple):
        if nome in _TLS_POSTGRES | _TLS_MYSQL:
            raise ErroConfiguracaoOrigem(
                '%s repete o parâmetro %s: deixe um só.' % (variavel, nome)
            )
        return valor[-1]
    return valor


def _conferir_arquivo(nome: str, caminho: str, variavel: str) -> None:
    pasta = nome in ('ssl_capath', 'sslcrldir')
    existe = os.path.isdir(caminho) if pasta else os.path.isfile(caminho)
    if not existe or not os.access(caminho, os.R_OK):
        raise ErroConfiguracaoOrigem(
            '%s: %s=%s não é %s que este usuário lê (%s). Confira o caminho (absoluto) e'
            ' a permissão de leitura para o usuário do serviço.'
            % (
                variavel,
                nome,
                caminho,
                'pasta' if pasta else 'arquivo',
                'não existe' if not os.path.exists(caminho) else 'sem permissão ou tipo errado',
            )
        )


def _tls_postgres(query: dict[str, str], variavel: str) -> TlsOrigem:
    modo = query.get('sslmode', '')
    if modo and modo not in _SSLMODES_POSTGRES:
        raise ErroConfiguracaoOrigem(
            '%s tem sslmode=%s, que o PostgreSQL não conhece. Use um de: %s (verify-ca'
            ' confere o certificado do servidor contra sslrootcert; verify-full, também o'
            ' nome do host).' % (variavel, modo, ', '.join(_SSLMODES_POSTGRES))
        )
    parametros = tuple(sorted((k, v) for k, v in query.items() if k in _TLS_POSTGRES))
    return TlsOrigem(
        'postgresql',
        variavel,
        modo=modo,
        parametros=parametros,
        ca=query.get('sslrootcert'),
        certificado=query.get('sslcert'),
        chave=query.get('sslkey'),
        senha_da_chave=query.get('sslpassword'),
    )


def _booleano(query: dict[str, str], nome: str, variavel: str) -> bool | None:
    valor = query.get(nome)
    if valor is None:
        return None
    if valor.strip().lower() in _SIM:
        return True
    if valor.strip().lower() in _NAO:
        return False
    raise ErroConfiguracaoOrigem('%s tem %s=%s: use true ou false.' % (variavel, nome, valor))


def _tls_mysql(query: dict[str, str], variavel: str) -> TlsOrigem:
    """
    O modo do MySQL/MariaDB. `ssl_ca` (ou `ssl_capath`) verifica a cadeia E o
    nome do host, como o SQLAlchemy sempre fez; `ssl_check_hostname=false` ou
    `ssl_verify_identity=false` deixa só a cadeia; `ssl_verify_cert=false`, TLS
    sem verificar; `ssl_mode` (DISABLED ... VERIFY_IDENTITY) diz o modo direto.
    """
    desligado = _booleano(query, 'ssl_disabled', variavel)
    verificar_cert = _booleano(query, 'ssl_verify_cert', variavel)
    verificar_nome = _booleano(query, 'ssl_verify_identity', variavel)
    conferir_nome = _booleano(query, 'ssl_check_hostname', variavel)
    ca, ca_pasta = query.get('ssl_ca'), query.get('ssl_capath')
    certificado, chave = query.get('ssl_cert'), query.get('ssl_key')
    outros = sorted(k for k in query if k in _TLS_MYSQL and k not in ('ssl_disabled', 'ssl_mode'))
    if 'ssl_mode' in query:
        modo = _SSL_MODE_MYSQL.get(query['ssl_mode'].strip().upper(), '')
        if not modo:
            raise ErroConfiguracaoOrigem(
                '%s tem ssl_mode=%s. Use um de: %s.'
                % (variavel, query['ssl_mode'], ', '.join(_SSL_MODE_MYSQL))
            )
    elif desligado:
        modo = 'desligado'
    elif verificar_cert is False:
        modo = 'exigido'
    elif verificar_nome or (
        verificar_nome is None and conferir_nome is not False and (ca or ca_pasta)
    ):
        modo = 'verificar_nome'
    elif verificar_cert or ca or ca_pasta:
        modo = 'verificar_ca'
    elif certificado or chave:
        modo = 'exigido'
    else:
        modo = 'preferido'
    if modo == 'desligado' and (desligado is False or outros):
        raise ErroConfiguracaoOrigem(
            '%s desliga o TLS e pede %s ao mesmo tempo: escolha um (tire ssl_disabled /'
            ' ssl_mode=DISABLED, ou os outros).'
            % (variavel, ', '.join(outros) or 'ssl_disabled=false')
        )
    if chave and not certificado:
        raise ErroConfiguracaoOrigem(
            '%s tem ssl_key sem ssl_cert: o certificado de cliente vai com os dois.' % variavel
        )
    return TlsOrigem(
        'mysql',
        variavel,
        modo=modo,
        ca=ca,
        ca_pasta=ca_pasta,
        certificado=certificado,
        chave=chave,
        senha_da_chave=query.get('ssl_key_password'),
        cifras=query.get('ssl_cipher'),
    )


def sem_tls(url: sa.URL) -> sa.URL:
    """A URL sem os parâmetros de TLS (o engine os recebe de `argumentos_do_engine`)."""
    return url.difference_update_query(
        sorted(k for k in url.query if k in _TLS_POSTGRES | _TLS_MYSQL)
    )


def argumentos_psycopg(tls: TlsOrigem) -> dict[str, str]:
    """Os parâmetros do libpq (psycopg 3 e psycopg2), como a URL os deu."""
    return dict(tls.parametros)


class ArgumentosPymysql(TypedDict, total=False):
    """O TLS para o `pymysql.connect`: desligado, ou o SSLContext montado aqui."""

    ssl_disabled: bool
    ssl: ssl.SSLContext


class ArgumentosMysqldb(TypedDict, total=False):
    """O TLS para o `MySQLdb.connect` (mysqlclient): o `ssl_mode` e os arquivos."""

    ssl_mode: str
    ssl: dict[str, str]


# O `connect_args` do engine da origem, conforme o driver da URL.
ArgumentosDoDriver: TypeAlias = dict[str, str] | ArgumentosPymysql | ArgumentosMysqldb


def argumentos_pymysql(tls: TlsOrigem) -> ArgumentosPymysql:
    """
    Os argumentos do `pymysql.connect` (e do BinLogStreamReader, que os repassa
    às duas conexões dele): um SSLContext montado aqui, ou nada no modo
    preferido (o padrão do PyMySQL).
    """
    if tls.modo == 'desligado':
        return {'ssl_disabled': True}
    if tls.modo in ('', 'preferido'):
        return {}
    return {'ssl': contexto_ssl(tls)}


def contexto_ssl(tls: TlsOrigem) -> ssl.SSLContext:
    """O SSLContext do modo (a cadeia e o nome conferidos só quando o modo pede)."""
    try:
        contexto = ssl.create_default_context(cafile=tls.ca, capath=tls.ca_pasta)
        # Como o PyMySQL: o certificado que o MySQL gera sozinho não passa no estrito.
        contexto.verify_flags &= ~ssl.VERIFY_X509_STRICT
        contexto.check_hostname = tls.modo == 'verificar_nome'
        contexto.verify_mode = ssl.CERT_REQUIRED if tls.verifica else ssl.CERT_NONE
        if tls.certificado:
            contexto.load_cert_chain(
                tls.certificado, keyfile=tls.chave, password=tls.senha_da_chave
            )
        if tls.cifras:
            contexto.set_ciphers(tls.cifras)
    except (ssl.SSLError, OSError, ValueError) as erro:
        raise ErroConfiguracaoOrigem(
            '%s: os arquivos de TLS (ssl_ca, ssl_cert, ssl_key) não se leem como'
            ' certificado/chave PEM (%s: %s). Confira se cada um é o arquivo certo, se a'
            ' chave é a do certificado e ssl_key_password, se ela tem senha.'
            % (tls.variavel, type(erro).__name__, mascarar(erro, tls.senha_da_chave))
        ) from None
    return contexto


def argumentos_mysqldb(tls: TlsOrigem) -> ArgumentosMysqldb:
    """Os argumentos do `MySQLdb.connect` (mysqlclient): o dicionário `ssl` e o `ssl_mode`."""
    if tls.senha_da_chave:
        raise ErroConfiguracaoOrigem(
            '%s tem ssl_key_password, que o mysqlclient (mysql+mysqldb://) não aceita: use'
            ' uma chave sem senha (com permissão 0600) ou o PyMySQL (mysql+pymysql://).'
            % tls.variavel
        )
    if tls.modo in ('', 'preferido'):
        return {}
    modo = {v: k for k, v in _SSL_MODE_MYSQL.items()}[tls.modo]
    arquivos = {
        'ca': tls.ca,
        'capath': tls.ca_pasta,
        'cert': tls.certificado,
        'key': tls.chave,
        'cipher': tls.cifras,
    }
    argumentos: ArgumentosMysqldb = {'ssl_mode': modo}
    if any(arquivos.values()):
        argumentos['ssl'] = {k: v for k, v in arquivos.items() if v}
    return argumentos


def argumentos_do_engine(url: sa.URL, tls: TlsOrigem) -> ArgumentosDoDriver | None:
    """
    O `connect_args` do engine da origem para o driver da URL; None para um
    driver que este módulo não conhece (a URL segue com os parâmetros como estão).
    """
    driver = url.get_driver_name()
    if tls.familia == 'postgresql' and driver in ('psycopg', 'psycopg2'):
        return argumentos_psycopg(tls)
    if tls.familia == 'mysql' and driver == 'pymysql':
        return argumentos_pymysql(tls)
    if tls.familia == 'mysql' and driver == 'mysqldb':
        return argumentos_mysqldb(tls)
    return None


def falha_de_tls(erro: BaseException | str) -> bool:
    """A mensagem do driver é recusa de TLS (certificado, servidor que exige TLS)?"""
    return bool(_FALHA_TLS.search(str(getattr(erro, 'orig', None) or erro)))


def correcao_tls(tls: TlsOrigem) -> str:
    """O que o operador confere quando a conexão foi recusada no TLS."""
    if tls.familia == 'postgresql':
        nomes = (
            'sslmode=verify-ca (ou verify-full) e sslrootcert=<CA que assinou o'
            ' certificado do servidor>; com certificado de cliente, sslcert e sslkey'
        )
    else:
        nomes = (
            'ssl_ca=<CA que assinou o certificado do servidor>; com certificado de'
            ' cliente, ssl_cert e ssl_key'
        )
    return (
        'a conexão foi recusada no TLS: confira em %s %s (um CA errado, um'
        ' certificado vencido ou de outro host, ou TLS desligado num servidor que o'
        ' exige dá isto; docs/origem.md, "TLS")' % (tls.variavel, nomes)
    )
