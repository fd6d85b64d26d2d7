"""
Os segredos que o SDK lê do ambiente: quais são, quem os recebe, como se
escondem no que se imprime, e o nome que um segredo de webhook pode ter.

Uma lista só (`SEGREDOS_DO_SDK` e `URLS_COM_SENHA`), usada por toda regra
(a máscara de texto mora em intake/transporte.py e pergunta aqui QUAIS valores
esconder, e `mascarar_pedacos` esconde cada pedaço deles):

  * segredo inteiro: `CONTEXTIA_API_KEY` (a chave de UMA empresa),
    `CONTEXTIA_ADMIN_TOKEN` (o token de admin, só o provisionamento usa),
    `CONTEXTIA_ORIGEM_DBA` (a URL de um login DONO das tabelas, só para
    `--criar-slot`/`--remover-slot`) e toda variável com nome de segredo de
    webhook (abaixo). `ambiente_sem_segredos` tira todos de um ambiente, menos
    os que o filho precisa: o ouvinte dá ao provisionar o token e o segredo do
    webhook; ao connector, só a chave da empresa dele; ao carregar-todas.sh,
    nenhum (o connector --todas lê a chave de cada empresa do arquivo de
    chaves). A URL do DBA nenhum filho recebe.
  * senha dentro de uma URL: `CONTEXTIA_ORIGEM` e `CONTEXTIA_ORIGEM_DBA`. A de
    `CONTEXTIA_ORIGEM` todo filho que lê a origem precisa (a variável fica),
    mas a senha é mascarada como os outros segredos e nunca pode ser o segredo
    do webhook.
  * `webhook.secret_env` só pode nomear uma variável DEDICADA a segredo de
    webhook: o nome começa com `CONTEXTIA_WEBHOOK_`. O valor dela vai ao
    Contextia; com qualquer outro nome (`CONTEXTIA_ORIGEM`, `PGPASSWORD`, o
    `APP_WEBHOOK_SECRET` de outra aplicação do mesmo servidor) editar o
    mapeamento bastaria para mandar um segredo alheio como "segredo de
    assinatura".
  * os outros nomes `CONTEXTIA_*` são do próprio SDK (VARIAVEIS_DO_SDK) e nunca
    são segredo de webhook.

Só biblioteca padrão: o mapeamento (que o `--autoteste` importa num `python3 -S`)
usa a regra do nome.
"""

from __future__ import annotations

import functools
import os
import re
import urllib.parse
from collections.abc import Callable, Iterable, Mapping

CHAVE_DO_PROJETO = 'CONTEXTIA_API_KEY'
TOKEN_DE_ADMIN = 'CONTEXTIA_ADMIN_TOKEN'
ORIGEM = 'CONTEXTIA_ORIGEM'
ORIGEM_DBA = 'CONTEXTIA_ORIGEM_DBA'

SEGREDOS_DO_SDK = (CHAVE_DO_PROJETO, TOKEN_DE_ADMIN, ORIGEM_DBA)
"""As variáveis do SDK que são segredo inteiras: mascaradas, fora dos filhos."""

URLS_COM_SENHA = (ORIGEM, ORIGEM_DBA)
"""As variáveis do SDK que são uma URL com senha: a senha é mascarada e comparada."""

# As variaveis que o proprio SDK le ou escreve (o prefixo CONTEXTIA_ e dele, salvo
# CONTEXTIA_WEBHOOK_*, que e do segredo do webhook).
VARIAVEIS_DO_SDK = (
    'CONTEXTIA_URL',
    'CONTEXTIA_INTAKE_URL',
    CHAVE_DO_PROJETO,
    TOKEN_DE_ADMIN,
    'CONTEXTIA_CA_BUNDLE',
    ORIGEM,
    ORIGEM_DBA,
    'CONTEXTIA_ORIGEM_TIMEOUT',
    'CONTEXTIA_PRAZO_ENVIO',
    'CONTEXTIA_MAPPING',
    'CONTEXTIA_SOURCE',
    'CONTEXTIA_HISTORICO',
    'CONTEXTIA_COLETA',
    'CONTEXTIA_PYTHON',
    'CONTEXTIA_EXECUCAO',
    'CONTEXTIA_PROGRESSO_SEGUNDOS',
    'CONTEXTIA_GRUPO_FERRAMENTA',
    'CONTEXTIA_TESTE_MORRER_EM',
    'CONTEXTIA_TESTE_SOCKET_JOURNAL',
)

PREFIXO_WEBHOOK = 'CONTEXTIA_WEBHOOK_'
_NOME_DE_SEGREDO_DE_WEBHOOK = re.compile(r'^%s[A-Z0-9_]+$' % PREFIXO_WEBHOOK)

# Valor curto demais nao e mascarado: trocar "abc" em todo texto so estragaria
# as mensagens (e segredo desse tamanho ja nao protege nada).
TAMANHO_MINIMO_MASCARADO = 8


def e_segredo_de_webhook(nome: str) -> bool:
    """O nome segue a regra de variável dedicada a segredo de webhook?"""
    # O teste barato antes da regex: a mascara pergunta isto de cada variavel
    # do ambiente a cada mensagem de log.
    if not nome.startswith(PREFIXO_WEBHOOK):
        return False
    return bool(_NOME_DE_SEGREDO_DE_WEBHOOK.match(nome)) and nome not in VARIAVEIS_DO_SDK


def e_segredo(nome: str) -> bool:
    """`nome` guarda um segredo inteiro (`SEGREDOS_DO_SDK`, ou um segredo de webhook)?"""
    return nome in SEGREDOS_DO_SDK or e_segredo_de_webhook(nome)


def problema_do_secret_env(nome: str) -> str | None:
    """Por que `nome` não pode ser o `webhook.secret_env` (com a correção), ou None se pode."""
    if nome in VARIAVEIS_DO_SDK:
        return (
            '%s é uma variável do próprio SDK, não um segredo de webhook: o valor dela'
            ' iria ao Contextia como segredo de assinatura -- crie uma variável só para'
            ' isso, ex.: CONTEXTIA_WEBHOOK_SEGREDO' % nome
        )
    if not e_segredo_de_webhook(nome):
        return (
            '%s não é uma variável dedicada a segredo de webhook: qualquer outra (senha'
            ' do banco, token, o segredo de outra aplicação deste servidor) iria ao'
            ' Contextia como segredo de assinatura -- o nome tem de começar com %s'
            ' (ex.: CONTEXTIA_WEBHOOK_SEGREDO)' % (nome, PREFIXO_WEBHOOK)
        )
    return None


def senha_da_url(url: str) -> str | None:
    """A senha de uma URL de banco (`dialeto://usuario:senha@host/...`), decodificada."""
    try:
        senha = urllib.parse.urlsplit(url.strip()).password
    except ValueError:
        return None
    return urllib.parse.unquote(senha) if senha else None


def valores_secretos(ambiente: Mapping[str, str] | None = None) -> list[str]:
    """
    Os valores dos segredos presentes AGORA no ambiente (para a máscara de texto):
    cada segredo inteiro e a senha de cada URL com senha, como vem e decodificada.
    """
    fonte = os.environ if ambiente is None else ambiente
    # So os nomes primeiro: ler cada valor do os.environ custa (e decodificado).
    valores = [str(fonte.get(nome) or '').strip() for nome in list(fonte) if e_segredo(nome)]
    for nome in URLS_COM_SENHA:
        url = fonte.get(nome) or ''
        senha = senha_da_url(url)
        if senha:
            valores += [senha, urllib.parse.quote(senha, safe='')]
    return [valor for valor in dict.fromkeys(valores) if len(valor) >= TAMANHO_MINIMO_MASCARADO]


@functools.lru_cache(maxsize=16)
def _pedacos(segredos: frozenset[str]) -> frozenset[str]:
    """As janelas de 8 caracteres dos segredos: os mesmos a cada mensagem de log."""
    janela = TAMANHO_MINIMO_MASCARADO
    return frozenset(
        s[i : i + janela] for s in segredos if len(s) >= janela for i in range(len(s) - janela + 1)
    )


def mascarar_pedacos(texto: str, segredos: Iterable[str], substituir: Callable[[str], str]) -> str:
    """
    `texto` com todo trecho de 8+ caracteres que está dentro de um dos `segredos`
    trocado por `substituir(trecho)`.

    Um eco do cabeçalho `Authorization` dobrado em várias linhas (um proxy que
    quebra em 64 colunas) deixava o pedaço depois da quebra inteiro: 34 de 47
    caracteres da chave. Procurar o segredo inteiro não acha os pedaços; aqui
    cada janela de `TAMANHO_MINIMO_MASCARADO` caracteres do texto é conferida
    contra as do segredo, e as que casam (e as que se emendam nelas) somem.
    """
    janela = TAMANHO_MINIMO_MASCARADO
    pedacos = _pedacos(frozenset(segredos))
    if not pedacos or len(texto) < janela:
        return texto
    coberto = bytearray(len(texto))
    for inicio in range(len(texto) - janela + 1):
        if texto[inicio : inicio + janela] in pedacos:
            coberto[inicio : inicio + janela] = b'\x01' * janela
    if not any(coberto):
        return texto
    partes: list[str] = []
    inicio = 0
    while inicio < len(texto):
        fim = inicio
        marcado = coberto[inicio]
        while fim < len(texto) and coberto[fim] == marcado:
            fim += 1
        trecho = texto[inicio:fim]
        partes.append(substituir(trecho) if marcado else trecho)
        inicio = fim
    return ''.join(partes)


def ambiente_sem_segredos(
    ambiente: Mapping[str, str], manter: Iterable[str] = ()
) -> dict[str, str]:
    """
    Uma copia de `ambiente` sem os segredos, menos os nomeados em `manter`.

    E o ambiente de um processo filho: cada um recebe só o segredo de que
    precisa -- um connector com o token de admin, ou com o segredo do webhook,
    poria os dois ao alcance de tudo o que ele roda (driver, `/proc/<pid>/environ`
    de quem tem o mesmo usuário) sem usa-los.
    """
    fica = set(manter)
    return {nome: valor for nome, valor in ambiente.items() if nome in fica or not e_segredo(nome)}


def segredo_repetido(valor: str, ambiente: Mapping[str, str] | None = None) -> str | None:
    """
    O nome de outra variável do SDK que guarda (ou contém) `valor`, ou None.

    Um segredo de webhook igual ao token de admin, ou que está dentro de
    CONTEXTIA_ORIGEM ou CONTEXTIA_ORIGEM_DBA (a senha do banco, também a
    codificada na URL), tem origem ambígua: nunca é enviado.
    """
    if len(valor) < TAMANHO_MINIMO_MASCARADO:
        return None
    fonte = os.environ if ambiente is None else ambiente
    for nome in VARIAVEIS_DO_SDK:
        outro = (fonte.get(nome) or '').strip()
        senha = senha_da_url(outro) if nome in URLS_COM_SENHA else None
        if outro and (valor in outro or (senha is not None and valor in senha)):
            return nome
    return None
