"""
A descoberta: do catalogo da origem a um esqueleto de mapeamento (`descobrir`).

O que mora aqui, e o que cada modulo pode importar:

    catalogo     o catalogo refletido pelo inspector do SQLAlchemy (tabelas e
                 views, colunas, tipos, chave primaria, unicas, indices), em
                 registros tipados; e a unica consulta a dados, a que confere
                 a chave adivinhada de uma view. SQLAlchemy.
    tipos        o que o intake aceita de cada tipo de coluna: as que ficam de
                 fora, o motivo e o CAST para a view. SQLAlchemy (so os tipos).
    regras       as decisoes: key, watch_column (e o indice que a cobre),
                 scope_column, a regra de projeto. Sobre os registros do
                 catalogo; nada de banco.
    esqueleto    o mapeamento montado, o relatorio para o operador e a
                 diferenca contra um mapeamento que ja existe.

Pode importar `origem` (o contrato, os nomes validos, a familia do tipo),
`mapeamento` (a validacao do que vai ser gravado), `padroes` e `erros`. Quem
conecta e a linha de comando (`cli/descobrir.py`), pela sessao somente leitura
do adaptador generico: descobrir nao escreve nada na origem.
"""

from contextia_sync.erros import ErroConfiguracao


class ErroDescoberta(ErroConfiguracao):
    """O pedido do `descobrir` (--cadastro, --escopo, --esquema) nao casa com o catalogo."""
