"""O Protheus em miniatura de tests/dados/protheus_pg.sql, montado num BancoDeTeste."""

import os

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'protheus_pg.sql')


def carregar(banco):
    """Roda o script no PostgreSQL do `banco` e devolve a URL de origem."""
    with open(SCRIPT, encoding='utf-8') as f:
        script = f.read()
    conexao = banco.motor().raw_connection()
    try:
        # psycopg 3 aceita varios comandos num execute sem parametros.
        conexao.cursor().execute(script)
        conexao.commit()
    finally:
        conexao.close()
    return banco.url_origem
