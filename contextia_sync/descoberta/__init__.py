"""
A descoberta: do catálogo da origem a um esqueleto de mapeamento (`descobrir`).

O que mora aqui, e o que cada módulo pode importar:

    catálogo     o catálogo refletido pelo inspector do SQLAlchemy (tabelas e
                 views, colunas, tipos, chave primária, únicas, índices), em
                 registros tipados; e a única consulta a dados, a que confere
                 a chave adivinhada de uma view. SQLAlchemy.
    tipos        o que o intake aceita de cada tipo de coluna: as que ficam de
                 fora, o motivo e o CAST para a view. SQLAlchemy (só os tipos).
    regras       as decisões: key, watch_column (e o índice que a cobre),
                 scope_column, a regra de projeto. Sobre os registros do
                 catálogo; nada de banco.
    esqueleto    o mapeamento montado, o relatório para o operador e a
                 diferença contra um mapeamento que já existe.

Pode importar `origem` (o contrato, os nomes válidos, a família do tipo),
`mapeamento` (a validação do que vai ser gravado), `padroes` e `erros`. Quem
conecta e a linha de comando (`cli/descobrir.py`), pela sessão somente leitura
do adaptador genérico: descobrir não escreve nada na origem.
"""

from contextia_sync.erros import ErroConfiguracao


class ErroDescoberta(ErroConfiguracao):
    """O pedido do `descobrir` (--cadastro, --escopo, --esquema) não casa com o catálogo."""
