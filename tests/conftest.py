"""Fixtures compartilhadas: cada modulo de `tests/apoio/` cuida de uma coisa real.

A raiz do repositorio entra no sys.path pelo `pythonpath` do pytest
(pyproject.toml), e o pacote pelo `pip install -e` do `make test`.
"""

pytest_plugins = [
    'tests.apoio.servidor',  # o Contextia local num processo de verdade
    'tests.apoio.bancos',  # PostgreSQL, MariaDB e SQLite de verdade
]


def pytest_collection_modifyitems(config, items):  # noqa: ARG001 - o gancho do pytest
    """
    Os testes pesados (os grupos `pesado_*` do xdist: as torturas e a demo) vão
    primeiro. Coletados em ordem alfabética, as torturas caíam no FIM da suíte, e
    os últimos minutos rodavam só os dois processos delas; primeiro, os outros
    dois processos levam o resto da suíte ao lado delas.
    """

    def pesado(item):
        return any(
            str((marca.args or [marca.kwargs.get('name', '')])[0]).startswith('pesado')
            for marca in item.iter_markers('xdist_group')
        )

    pesados = [item for item in items if pesado(item)]
    if pesados:
        marcados = set(map(id, pesados))
        items[:] = pesados + [item for item in items if id(item) not in marcados]
