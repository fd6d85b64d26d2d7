"""
Os segredos que o SDK lê do ambiente: quais são, quem os recebe, e o nome que
um segredo de webhook pode ter.

Três regras, num lugar só (a mascara de texto mora em intake/transporte.py e
pergunta aqui QUAIS valores esconder):

  * segredo e `CONTEXTIA_API_KEY` (a chave de UMA empresa), `CONTEXTIA_ADMIN_TOKEN`
    (o token de admin, só o provisionamento usa) e toda variável com nome de
    segredo de webhook (abaixo). `ambiente_sem_segredos` tira todos de um
    ambiente, menos os que o filho precisa: o ouvinte da ao provisionar o token
    e o segredo do webhook; ao connector, só a chave da empresa dele; ao
    carregar-todas.sh, nenhum (o connector --todas lê a chave de cada empresa do
    arquivo de chaves).
  * `webhook.secret_env` só pode nomear uma variável DEDICADA a segredo de
    webhook: o nome começa com `CONTEXTIA_WEBHOOK_` ou termina em
    `_WEBHOOK_SECRET`. O valor dela vai ao Contextia; com qualquer outro nome
    (`CONTEXTIA_ORIGEM`, `PGPASSWORD`, `CONTEXTIA_ADMIN_TOKEN`) o mapeamento
    mandaria a senha do banco ou o token como "segredo de assinatura".
  * os outros nomes `CONTEXTIA_*` são do próprio SDK (VARIAVEIS_DO_SDK) e nunca
    são segredo de webhook.

Só biblioteca padrão: o mapeamento (que o `--autoteste` importa num `python3 -S`)
usa a regra do nome.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping

CHAVE_DO_PROJETO = 'CONTEXTIA_API_KEY'
TOKEN_DE_ADMIN = 'CONTEXTIA_ADMIN_TOKEN'

# As variaveis que o proprio SDK le ou escreve (o prefixo CONTEXTIA_ e dele, salvo
# CONTEXTIA_WEBHOOK_*, que e do segredo do webhook).
VARIAVEIS_DO_SDK = (
    'CONTEXTIA_URL', 'CONTEXTIA_INTAKE_URL', CHAVE_DO_PROJETO, TOKEN_DE_ADMIN,
    'CONTEXTIA_CA_BUNDLE', 'CONTEXTIA_ORIGEM', 'CONTEXTIA_ORIGEM_TIMEOUT', 'CONTEXTIA_PRAZO_ENVIO',
    'CONTEXTIA_MAPPING', 'CONTEXTIA_SOURCE', 'CONTEXTIA_HISTORICO', 'CONTEXTIA_COLETA',
    'CONTEXTIA_PYTHON', 'CONTEXTIA_EXECUCAO', 'CONTEXTIA_PROGRESSO_SEGUNDOS',
    'CONTEXTIA_GRUPO_FERRAMENTA', 'CONTEXTIA_TESTE_MORRER_EM',
    'CONTEXTIA_TESTE_SOCKET_JOURNAL',
)

PREFIXO_WEBHOOK = 'CONTEXTIA_WEBHOOK_'
SUFIXO_WEBHOOK = '_WEBHOOK_SECRET'
_NOME_DE_SEGREDO_DE_WEBHOOK = re.compile(
    r'^(%s[A-Z0-9_]+|[A-Z][A-Z0-9_]*%s)$' % (PREFIXO_WEBHOOK, SUFIXO_WEBHOOK))

# Valor curto demais nao e mascarado: trocar "abc" em todo texto so estragaria
# as mensagens (e segredo desse tamanho ja nao protege nada).
TAMANHO_MINIMO_MASCARADO = 8


def e_segredo_de_webhook(nome: str) -> bool:
    """O nome segue a regra de variável dedicada a segredo de webhook?"""
    # O teste barato antes da regex: a mascara pergunta isto de cada variavel
    # do ambiente a cada mensagem de log.
    if not (nome.startswith(PREFIXO_WEBHOOK) or nome.endswith(SUFIXO_WEBHOOK)):
        return False
    return bool(_NOME_DE_SEGREDO_DE_WEBHOOK.match(nome)) and nome not in VARIAVEIS_DO_SDK


def e_segredo(nome: str) -> bool:
    """`nome` guarda um segredo do SDK (chave de projeto, token de admin, segredo de webhook)?"""
    return nome in (CHAVE_DO_PROJETO, TOKEN_DE_ADMIN) or e_segredo_de_webhook(nome)


def problema_do_secret_env(nome: str) -> str | None:
    """Por que `nome` não pode ser o `webhook.secret_env` (com a correção), ou None se pode."""
    if nome in VARIAVEIS_DO_SDK:
        return ('%s é uma variável do próprio SDK, não um segredo de webhook: o valor dela'
                ' iria ao Contextia como segredo de assinatura -- crie uma variável só para'
                ' isso, ex.: CONTEXTIA_WEBHOOK_SEGREDO' % nome)
    if not e_segredo_de_webhook(nome):
        return ('%s não é uma variável dedicada a segredo de webhook: qualquer outra (senha'
                ' do banco, token) iria ao Contextia como segredo de assinatura -- o nome tem'
                ' de começar com %s ou terminar em %s (ex.: CONTEXTIA_WEBHOOK_SEGREDO)'
                % (nome, PREFIXO_WEBHOOK, SUFIXO_WEBHOOK))
    return None


def valores_secretos(ambiente: Mapping[str, str] | None = None) -> list[str]:
    """Os valores dos segredos presentes AGORA no ambiente (para a mascara de texto)."""
    fonte = os.environ if ambiente is None else ambiente
    # So os nomes primeiro: ler cada valor do os.environ custa (e decodificado).
    valores = (str(fonte.get(nome) or '').strip() for nome in list(fonte) if e_segredo(nome))
    return [valor for valor in valores if len(valor) >= TAMANHO_MINIMO_MASCARADO]


def ambiente_sem_segredos(ambiente: Mapping[str, str],
                          manter: Iterable[str] = ()) -> dict[str, str]:
    """
    Uma copia de `ambiente` sem os segredos, menos os nomeados em `manter`.

    E o ambiente de um processo filho: cada um recebe só o segredo de que
    precisa -- um connector com o token de admin, ou com o segredo do webhook,
    poria os dois ao alcance de tudo o que ele roda (driver, `/proc/<pid>/environ`
    de quem tem o mesmo usuário) sem usa-los.
    """
    fica = set(manter)
    return {nome: valor for nome, valor in ambiente.items()
            if nome in fica or not e_segredo(nome)}


def segredo_repetido(valor: str, ambiente: Mapping[str, str] | None = None) -> str | None:
    """
    O nome de outra variável do SDK que guarda (ou contém) `valor`, ou None.

    Um segredo de webhook igual ao token de admin, ou que está dentro de
    CONTEXTIA_ORIGEM (a senha do banco), tem origem ambígua: nunca é enviado.
    """
    fonte = os.environ if ambiente is None else ambiente
    for nome in VARIAVEIS_DO_SDK:
        outro = (fonte.get(nome) or '').strip()
        if outro and len(valor) >= TAMANHO_MINIMO_MASCARADO and valor in outro:
            return nome
    return None
