"""
A base dos erros de configuração: o que o operador corrige antes de rodar.

Todo erro que quer dizer "a configuração está errada" (mapeamento, arquivo de
chaves, estratégia, hora da varredura, variável de ambiente, adaptador) herda
de `ErroConfiguracao`. Cada CLI pega esta base UMA vez e sai com o código 2,
imprimindo só a mensagem -- que já diz o que é, por que é como corrigir. Quem
lê e o operador, não o programador: sem traceback.
"""

from collections.abc import Mapping

SAIDA_OK = 0
SAIDA_FALHA = 1
SAIDA_CONFIGURACAO = 2

# O que cada codigo quer dizer em toda ferramenta; cada uma pode dizer o 1 e o 2
# com as palavras dela (`significados` de `texto_das_saidas`), mas o numero e este.
SIGNIFICADO_DAS_SAIDAS = {
    SAIDA_OK: 'tudo certo',
    SAIDA_FALHA: 'algo falhou; o que falhou ficou como estava',
    SAIDA_CONFIGURACAO: 'erro de configuração ou de argumento; nada foi feito',
}


def texto_das_saidas(significados: Mapping[int, str | None] | None = None) -> str:
    """
    Os códigos de saída como o `--help` de toda ferramenta os lista (uma linha
    por código). `significados` troca ou acrescenta códigos (ex.: 143 do
    SIGTERM); None tira um código que a ferramenta nunca usa.
    """
    todos: dict[int, str | None] = dict(SIGNIFICADO_DAS_SAIDAS)
    todos.update(significados or {})
    return 'códigos de saída:\n' + '\n'.join(
        '  %-4d %s' % (codigo, texto) for codigo, texto in sorted(todos.items()) if texto
    )


class ErroConfiguracao(Exception):
    """A configuração impede de começar; a mensagem diz a correção."""


def resumir(texto: str, limite: int = 300) -> str:
    """
    O texto de um erro cabendo em `limite`: o começo e o FIM, cortando o meio.

    A causa do driver ou do requests costuma vir no fim ("... Connection
    refused"); cortar só o fim jogaria fora justamente o porque.
    """
    texto = ' '.join(str(texto).split())
    if len(texto) <= limite:
        return texto
    metade = (limite - 5) // 2
    return '%s ... %s' % (texto[:metade], texto[-metade:])
