# make demo  -- o produto funcionando sobre os padroes embutidos (ERP SQLite + Contextia local)
# make test  -- lint (ruff), tipos (mypy) e a suite inteira; ARGS vai para o pytest
# make lint  -- o ruff (com a complexidade), o mypy --strict, as setas entre as salas
#               (lint-imports) e o tamanho das funções
# Todos criam o .venv e instalam o que precisam (deploy/preparar-ambiente.sh):
# um carimbo por nivel (producao, local, dev), refeito quando o pyproject.toml ou
# um requirements*.txt muda.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PRONTO_PRODUCAO := $(VENV)/.instalado-producao
PRONTO_LOCAL    := $(VENV)/.instalado-local
PRONTO_DEV      := $(VENV)/.instalado-dev
PREPARAR        := deploy/preparar-ambiente.sh
BASE            := pyproject.toml requirements.txt $(PREPARAR)

.PHONY: demo test lint bench autoteste limpar ambiente

ambiente: $(PRONTO_PRODUCAO)

$(PRONTO_PRODUCAO): $(BASE)
	@bash $(PREPARAR) "$(PYTHON)" "$(VENV)"
	@touch $@

$(PRONTO_LOCAL): $(BASE) requirements-local.txt
	@bash $(PREPARAR) --local "$(PYTHON)" "$(VENV)"
	@touch $@

# O [dev] inclui o [local] e a producao: o mesmo pip install vale pelos tres.
$(PRONTO_DEV): $(BASE) requirements-local.txt requirements-dev.txt
	@bash $(PREPARAR) --dev "$(PYTHON)" "$(VENV)"
	@touch $(PRONTO_PRODUCAO) $(PRONTO_LOCAL) $@

demo: $(PRONTO_LOCAL)
	$(BIN)/python demo/demo.py $(ARGS)

lint: $(PRONTO_DEV)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/python -m tests.apoio.tamanho_das_funcoes contextia_sync contextia_local

# Quatro processos nos 2 nucleos: a suite passa a maior parte do tempo esperando
# (processos filhos, backoff, ciclos do ouvinte), nao calculando. Os testes
# pesados (torturas, demo) vao em dois grupos do xdist (xdist_group), um
# processo cada: nunca mais de duas torturas juntas.
test: lint
	$(BIN)/python -m pytest -n 4 --dist loadgroup $(ARGS)

autoteste:
	$(PYTHON) ouvinte.py --autoteste

# bench/bench_origem.py usa os bancos de tests/apoio (que importam o pytest).
bench: $(PRONTO_DEV)
	$(BIN)/python bench/rodar.py $(ARGS)

limpar:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache build *.egg-info demo/saida
