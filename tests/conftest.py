"""Fixtures compartilhadas: cada modulo de `tests/apoio/` cuida de uma coisa real.

A raiz do repositorio entra no sys.path pelo `pythonpath` do pytest
(pyproject.toml), e o pacote pelo `pip install -e` do `make test`.
"""

pytest_plugins = [
    'tests.apoio.servidor',     # o Contextia local num processo de verdade
    'tests.apoio.bancos',       # PostgreSQL, MariaDB e SQLite de verdade
]
