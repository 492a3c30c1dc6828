# fedbench — the two front-door commands are `make quickstart` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# torch/torchvision: pip takes the releases pinned by the machine's constraints when present.
INSTALL_STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

.PHONY: install install-dev quickstart lint fix test test-fast fuzz benchmark gpu-wheels gpu-check mutation mutation-changed mutation-ci reproduce-all ledger clean

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

# ruff (lint + format check), mypy and the import layers (lint-imports), configured in pyproject.toml.
lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

# Fix what the linters can fix by themselves: ruff's autofixes, then the formatter.
fix: $(DEV_STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

test: lint
	$(BIN)/python -m pytest tests

# The inner loop: every test but those marked slow (subprocess runs, multi-second trainings).
test-fast: $(DEV_STAMP)
	$(BIN)/python -m pytest tests -m "not slow"

# Property-based fuzzing of recipes and --set/--only/--seeds (tests/integration/test_fuzz_recipes.py) with 5,000 examples instead
# of the 200 of `make test`; FUZZ_PROFILE=fuzz-random explores new examples on each run.
FUZZ_PROFILE ?= fuzz
fuzz: $(DEV_STAMP)
	HYPOTHESIS_PROFILE=$(FUZZ_PROFILE) $(BIN)/python -m pytest tests/integration/test_fuzz_recipes.py --hypothesis-show-statistics

benchmark: $(INSTALL_STAMP)
	$(BIN)/python benchmarks/round_overhead.py

# The GPU check (docs/gpu.md). `gpu-wheels` downloads the Python 3.12 manylinux x86-64 wheels of what fedbench needs
# beyond a GPU machine's PyTorch stack (tools/gpu-requirements.txt, pinned) and a pip to install them ($(GPU_PIP)), into
# $(GPU_WHEELS) (git-ignored, ~12 MB: it travels with the working tree). `gpu-check` runs tools/gpu_check.py:
# installs them when fedbench's imports fail, checks and measures the CUDA paths, writes $(GPU_OUT)/gpu_check.json;
# `make gpu-check DEVICE=cpu QUICK=1` rehearses it on the CPU in about 2–3 minutes.
GPU_WHEELS ?= .gpu-wheels
GPU_PIP := pip==26.3
GPU_OUT ?= reports/gpu-check
DEVICE ?= cuda
QUICK ?=
gpu-wheels:
	$(PYTHON) -m pip download --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
	  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
	  -r tools/gpu-requirements.txt $(GPU_PIP) \
	  --disable-pip-version-check --quiet -d $(GPU_WHEELS)
	@du -sh $(GPU_WHEELS)

gpu-check:
	$(PYTHON) tools/gpu_check.py --out $(GPU_OUT) --device $(DEVICE) $(if $(QUICK),--quick) --wheels $(GPU_WHEELS)

# Mutation testing (tools/mutation.py): mutmut's mutants of algorithms/, engine/, registry/, spec.py, recipes/,
# report/table.py and cost.py, each against its own test file (tests/<package>/test_<module>.py) and the tests
# tests/mutation_map.toml adds; a killed/total table per module
# and benchmarks/results/mutation.json. Equivalent mutants: tests/mutation_equivalents.toml. The full run takes hours
# (MODULES="fedbench/spec.py fedbench/cost.py" runs some); `mutation-changed` mutates only the functions changed
# since $(BASE) and fails if one of their mutants survives; a mutant runs only the mapped tests that call its function
# (a one-function change of a method: under a minute on 2 cores). `mutation-ci` (run by .ci/run after `make test`)
# mutates the functions changed since each module's recorded run in benchmarks/results/mutation.json, at most
# $(CI_MUTANTS) mutants (a sample that changes elsewhere leave alone), and fails if one survives: the recorded
# scores stay true of the code.
MODULES ?=
BASE ?= main
CI_MUTANTS ?= 40
mutation: $(DEV_STAMP)
	nice -n 19 $(BIN)/python tools/mutation.py --fail-under 85 $(MODULES)

mutation-changed: $(DEV_STAMP)
	nice -n 19 $(BIN)/python tools/mutation.py --changed-since $(BASE) $(MODULES)

mutation-ci: $(DEV_STAMP)
	$(BIN)/python tools/mutation.py --changed-since-record --max-mutants $(CI_MUTANTS) $(MODULES)

JOBS ?= 2
# Papers with recipes (and `bench`, the benchmark set-ups: recipes/bench_*.toml); `make reproduce-all` runs every
# recipe and writes each one's report.
PAPERS := quickstart fedtrip fedtr fedimpro lgmix feddrplus bench

reproduce-all: $(INSTALL_STAMP)
	$(BIN)/fedbench run recipes/*.toml --jobs $(JOBS)
	for paper in $(PAPERS); do \
	  $(BIN)/fedbench report --paper $$paper --format markdown --out reports/$$paper/report.md --plots reports/$$paper || exit 1; \
	done

# The committed evidence (reproductions/): after `fedbench export --recipe recipes/R.toml -o reproductions/PAPER/R.jsonl`,
# `make ledger` renders its report and the ledger (reproductions/README.md); the test suite runs the --check.
ledger: $(INSTALL_STAMP)
	$(BIN)/fedbench ledger reproductions

# Per paper (fedtrip, fedtr, fedimpro, lgmix, feddrplus):
#   make reproduce-PAPER [SCALE=quick]  runs the paper's recipes on real data and writes
#                                       reports/PAPER/report.md and its plots;
#   make smoke-PAPER                    runs them at the smoke scale on synthetic data (no downloads).
# Data each paper needs (`fedbench datasets info NAME` says where files go):
#   fedtrip   MNIST, FMNIST, EMNIST, CIFAR-10
#   fedtr     CIFAR-10, PAMAP2, COVID-19 (curated CXR), OrganA/C/S-MNIST
#   fedimpro  CIFAR-10, FMNIST, SVHN, CIFAR-100, FEMNIST (TFF h5) (ResNet runs want a GPU)
#   lgmix     Digits5, Office-Caltech10, DomainNet, Camelyon17, retinal fundus sites (GPU advised)
#   feddrplus CIFAR-10, CIFAR-100 (VGG11/MobileNet, 320 rounds: GPU advised)
SCALE ?= full
reproduce-%: $(INSTALL_STAMP)
	$(BIN)/fedbench run recipes/$*_*.toml --scale $(SCALE) --jobs $(JOBS)
	$(BIN)/fedbench report --paper $* --scale $(SCALE) --format markdown --out reports/$*/report.md --plots reports/$*

smoke-%: $(INSTALL_STAMP)
	$(BIN)/fedbench run recipes/$*_*.toml --scale smoke --synthetic --jobs $(JOBS)
	$(BIN)/fedbench report --paper $* --scale smoke --synthetic --format markdown --out reports/$*-smoke/report.md --plots reports/$*-smoke

clean:
	rm -rf $(VENV) build dist *.egg-info
