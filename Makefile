# fedbench — the two front-door commands are `make quickstart` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch/torchvision: pip takes the releases pinned by the machine's constraints when present.
INSTALL_STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: install install-dev quickstart test benchmark reproduce-all reproduce-fedtrip smoke-fedtrip clean

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

JOBS ?= 2
# Papers with recipes; `make reproduce-all` runs every recipe and writes each paper's report.
PAPERS := quickstart fedtrip

reproduce-all: $(INSTALL_STAMP)
	$(BIN)/fedbench run recipes/*.toml --jobs $(JOBS)
	for paper in $(PAPERS); do \
	  $(BIN)/fedbench report --paper $$paper --format markdown --out reports/$$paper/report.md --plots reports/$$paper || exit 1; \
	done

# FedTrip (IPDPS 2023): Tables III-VIII and Figs. 5-7. Needs MNIST, FMNIST, EMNIST and CIFAR-10
# (`fedbench datasets info mnist` says where they go). SCALE=quick for a CPU-sized check.
SCALE ?= full
reproduce-fedtrip: $(INSTALL_STAMP)
	$(BIN)/fedbench run recipes/fedtrip_*.toml --scale $(SCALE) --jobs $(JOBS)
	$(BIN)/fedbench report --paper fedtrip --scale $(SCALE) --format markdown --out reports/fedtrip/report.md --plots reports/fedtrip

# Every FedTrip recipe at the smoke scale on synthetic stand-in data: a few minutes, no downloads.
smoke-fedtrip: $(INSTALL_STAMP)
	$(BIN)/fedbench run recipes/fedtrip_*.toml --scale smoke --synthetic --jobs $(JOBS)
	$(BIN)/fedbench report --paper fedtrip --scale smoke --synthetic --format markdown --out reports/fedtrip-smoke/report.md --plots reports/fedtrip-smoke

clean:
	rm -rf $(VENV) build dist *.egg-info
