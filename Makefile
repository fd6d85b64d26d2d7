# make demo  -- o produto funcionando sobre os padroes embutidos (ERP SQLite + Contextia local)
# make test  -- a suite inteira
# Os dois criam o .venv e instalam o que precisam.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PRONTO := $(VENV)/.instalado

.PHONY: demo test bench autoteste limpar ambiente

ambiente: $(PRONTO)

$(PRONTO): requirements.txt requirements-dev.txt
	@bash deploy/preparar-ambiente.sh "$(PYTHON)" "$(VENV)"
	@touch $(PRONTO)

demo: $(PRONTO)
	$(BIN)/python demo/demo.py $(ARGS)

test: $(PRONTO)
	$(BIN)/python -m pytest $(ARGS)

autoteste:
	$(PYTHON) ouvinte.py --autoteste

bench: $(PRONTO)
	$(BIN)/python bench/rodar.py $(ARGS)

limpar:
	rm -rf $(VENV) .pytest_cache demo/saida
