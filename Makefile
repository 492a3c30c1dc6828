# fedbench — the two front-door commands are `make quickstart` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch/torchvision: pip takes the releases pinned by the machine's constraints when present.
INSTALL_STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: install install-dev quickstart test benchmark reproduce-all clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip >/dev/null

$(INSTALL_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e .
	touch $@

$(DEV_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install -e ".[dev]"
	touch $@ $(INSTALL_STAMP)

install: $(INSTALL_STAMP)

install-dev: $(DEV_STAMP)

quickstart: $(INSTALL_STAMP)
	$(BIN)/fedbench run recipes/quickstart.toml --jobs 2
	$(BIN)/fedbench report --recipe recipes/quickstart.toml

test: $(DEV_STAMP)
	$(BIN)/python -m pytest tests

benchmark: $(INSTALL_STAMP)
	$(BIN)/python benchmarks/round_overhead.py

reproduce-all: $(INSTALL_STAMP)
	$(BIN)/fedbench run recipes/*.toml
	mkdir -p reports
	$(BIN)/fedbench report --recipes-dir recipes --recipe recipes/quickstart.toml --format markdown --out reports/quickstart.md

clean:
	rm -rf $(VENV) build dist *.egg-info
