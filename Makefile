# fedbench — the two front-door commands are `make quickstart` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch/torchvision: pip takes the releases pinned by the machine's constraints when present.
INSTALL_STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: reproduce-feddrplus smoke-feddrplus reproduce-lgmix smoke-lgmix reproduce-fedimpro smoke-fedimpro reproduce-fedtr smoke-fedtr install install-dev quickstart test benchmark reproduce-all reproduce-fedtrip smoke-fedtrip clean

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
PAPERS := quickstart fedtrip fedtr fedimpro lgmix feddrplus

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

# FedTR: Table 1 and Appendix B Table 2 (a-c). Needs CIFAR-10, PAMAP2, COVID-19 (curated CXR) and
# OrganA/C/S-MNIST (`fedbench datasets info pamap2` says where they go). SCALE=quick for a CPU-sized check.
reproduce-fedtr: $(INSTALL_STAMP)
	$(BIN)/fedbench run recipes/fedtr_table*.toml --scale $(SCALE) --jobs $(JOBS)
	$(BIN)/fedbench report --paper fedtr --scale $(SCALE) --format markdown --out reports/fedtr/report.md --plots reports/fedtr

smoke-fedtr: $(INSTALL_STAMP)
	$(BIN)/fedbench run recipes/fedtr_table*.toml --scale smoke --synthetic --jobs $(JOBS)
	$(BIN)/fedbench report --paper fedtr --scale smoke --synthetic --format markdown --out reports/fedtr-smoke/report.md --plots reports/fedtr-smoke

# FedImpro (ICLR 2024): Tables 1-3 and 9. Needs CIFAR-10, FMNIST, SVHN and CIFAR-100 (`fedbench datasets
# info svhn` says where they go); ResNet-18/50 runs want a GPU. SCALE=quick for one seed of 200 rounds.
reproduce-fedimpro: $(INSTALL_STAMP)
	$(BIN)/fedbench run recipes/fedimpro_*.toml --scale $(SCALE) --jobs $(JOBS)
	$(BIN)/fedbench report --paper fedimpro --scale $(SCALE) --format markdown --out reports/fedimpro/report.md --plots reports/fedimpro

smoke-fedimpro: $(INSTALL_STAMP)
	$(BIN)/fedbench run recipes/fedimpro_*.toml --scale smoke --synthetic --jobs $(JOBS)
	$(BIN)/fedbench report --paper fedimpro --scale smoke --synthetic --format markdown --out reports/fedimpro-smoke/report.md --plots reports/fedimpro-smoke

clean:
	rm -rf $(VENV) build dist *.egg-info

# LG-Mix (ICLR 2024): Tables 1, 2, 4 and 7. Needs Digits5, Office-Caltech10, DomainNet, Camelyon17 and the
# retinal fundus sites (`fedbench datasets info digits5` says where they go); ResNet/DenseNet/U-Net runs want a GPU.
reproduce-lgmix: $(INSTALL_STAMP)
	$(BIN)/fedbench run recipes/lgmix_*.toml --scale $(SCALE) --jobs $(JOBS)
	$(BIN)/fedbench report --paper lgmix --scale $(SCALE) --format markdown --out reports/lgmix/report.md --plots reports/lgmix

smoke-lgmix: $(INSTALL_STAMP)
	$(BIN)/fedbench run recipes/lgmix_*.toml --scale smoke --synthetic --jobs $(JOBS)
	$(BIN)/fedbench report --paper lgmix --scale smoke --synthetic --format markdown --out reports/lgmix-smoke/report.md --plots reports/lgmix-smoke

# FedDr+ (arXiv 2024): Tables 1 and 2. Needs CIFAR-10 and CIFAR-100; VGG11/MobileNet runs of 320 rounds want a GPU.
reproduce-feddrplus: $(INSTALL_STAMP)
	$(BIN)/fedbench run recipes/feddrplus_*.toml --scale $(SCALE) --jobs $(JOBS)
	$(BIN)/fedbench report --paper feddrplus --scale $(SCALE) --format markdown --out reports/feddrplus/report.md --plots reports/feddrplus

smoke-feddrplus: $(INSTALL_STAMP)
	$(BIN)/fedbench run recipes/feddrplus_*.toml --scale smoke --synthetic --jobs $(JOBS)
	$(BIN)/fedbench report --paper feddrplus --scale smoke --synthetic --format markdown --out reports/feddrplus-smoke/report.md --plots reports/feddrplus-smoke
