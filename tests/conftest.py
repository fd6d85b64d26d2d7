"""Fixtures compartilhadas: cada modulo de `tests/apoio/` cuida de uma coisa real."""

import os
import sys

RAIZ = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for _caminho in (RAIZ, os.path.join(RAIZ, 'sources')):
    if _caminho not in sys.path:
        sys.path.insert(0, _caminho)

pytest_plugins = [
    'tests.apoio.servidor',     # o Contextia local num processo de verdade
    'tests.apoio.bancos',       # PostgreSQL, MariaDB e SQLite de verdade
]
