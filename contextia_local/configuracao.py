"""
A configuração do Contextia local e os limites do contrato: o que o
`__main__` lê da linha de comando e o que as rotas e os modelos conferem.

Sem FastAPI aqui: o `--help` do servidor lê os padrões sem subir o app.
"""

import dataclasses
from typing import Optional

VERSAO_API = '1'
PADRAO_DATASET = r'^[a-z0-9_]{1,120}$'
PADRAO_SLUG = r'^[a-z0-9][a-z0-9_-]{0,62}$'
MAX_BYTES_LOTE = 32 * 1024 * 1024
# O maior `chunk` que o schema do mapeamento aceita (tests/test_servidor_seguranca.py
# confere): um mapeamento valido nunca esbarra no limite padrao do servidor.
MAX_REGISTROS_LOTE = 10000
# As outras rotas com corpo (complete, admin) recebem JSON de poucos campos.
MAX_BYTES_PEDIDO = 1024 * 1024
# O SQLite guarda INTEGER em 64 bits: id ou cursor acima disso e 422, nao OverflowError.
MAX_INTEIRO = 2**63 - 1
CAMINHO_INTAKE = '/api/v1/intake'
"""A rota do lote: o limite de bytes e de registros dela é o da configuração."""


@dataclasses.dataclass
class Configuracao:
    # None so no openapi_json: o app existe para gerar o documento, sem banco.
    dados: Optional[str]
    admin_token: str
    falhas: bool = False
    max_registros_lote: int = MAX_REGISTROS_LOTE
    max_bytes_lote: int = MAX_BYTES_LOTE
    # False imita o Contextia de producao de hoje, que nao tem `remove`.
    remove: bool = True
