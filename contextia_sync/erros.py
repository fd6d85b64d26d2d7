"""
A base dos erros de configuracao: o que o operador corrige antes de rodar.

Todo erro que quer dizer "a configuracao esta errada" (mapeamento, arquivo de
chaves, estrategia, hora da varredura, variavel de ambiente, adaptador) herda
de `ErroConfiguracao`. Cada CLI pega esta base UMA vez e sai com o codigo 2,
imprimindo so a mensagem -- que ja diz o que e, por que e como corrigir. Quem
le e o operador, nao o programador: sem traceback.
"""

SAIDA_OK = 0
SAIDA_FALHA = 1
SAIDA_CONFIGURACAO = 2


class ErroConfiguracao(Exception):
    """A configuracao impede de comecar; a mensagem diz a correcao."""


def resumir(texto: str, limite: int = 300) -> str:
    """
    O texto de um erro cabendo em `limite`: o comeco e o FIM, cortando o meio.

    A causa do driver ou do requests costuma vir no fim ("... Connection
    refused"); cortar so o fim jogaria fora justamente o porque.
    """
    texto = ' '.join(str(texto).split())
    if len(texto) <= limite:
        return texto
    metade = (limite - 5) // 2
    return '%s ... %s' % (texto[:metade], texto[-metade:])
