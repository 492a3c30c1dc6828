"""Shared fixtures. Tests run single-threaded: on a 2-core machine that is fastest for tiny models."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture
def registry_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'registry' / 'fedbench.db'}"


TINY_RECIPE = """
paper = "testpaper"
name = "tiny"
title = "Tiny digits recipe"
seeds = [0, 1]

[setup]
dataset = "digits"
model = "digits_mlp"
model_params = { hidden = 32 }
partition = "dirichlet"
partition_params = { alpha = 0.5, min_size = 5 }
num_clients = 4
clients_per_round = 2
rounds = 3
batch_size = 64
optimizer = { lr = 0.1 }
targets = [50]

[matrix]
algorithm = ["fedavg", "fedprox"]

[overrides.algorithm.fedprox]
algorithm_params = { mu = 0.01 }

[scale.smoke]
rounds = 2
seeds = [0]

[[tables]]
name = "acc"
title = "Best accuracy"
rows = ["algorithm"]
columns = []
figure = "best"

[tables.published]
fedavg = 50.0
"""


@pytest.fixture
def write_recipe(tmp_path: Path):
    def write(text: str = TINY_RECIPE, name: str = "tiny.toml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


class ListSink:
    """A RunSink keeping the records in memory (for engine tests)."""

    def __init__(self):
        self.records = []

    def log_round(self, record) -> None:
        self.records = [r for r in self.records if r.round < record.round] + [record]

    def truncate(self, after_round: int) -> None:
        self.records = [r for r in self.records if r.round <= after_round]


@pytest.fixture
def sink() -> ListSink:
    return ListSink()


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: whole-recipe or multi-process runs (deselect with -m 'not slow')")
