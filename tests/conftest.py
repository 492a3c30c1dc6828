"""Shared fixtures. Tests run single-threaded: on a 2-core machine that is fastest for tiny models."""

from __future__ import annotations

import os
import textwrap
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
from cluster_fixtures import RayNodes, SlurmHost, start_ray, start_slurm

from algorithm_fixtures import head_mlp, linear_model  # noqa: F401  (fixtures the algorithm tests name in usefixtures)
from fedbench.data.store import TensorData

# Two float64 computations that agree in exact arithmetic agree to within F64_ATOL (where it comes from: its comment in
# fedbench/execution/contract/compare.py, whose checks compare that way too); the tests import it from here.
from fedbench.execution.contract import F64_ATOL  # noqa: F401
from model_fixtures import models  # noqa: F401  (a fixture: every registered model, built once per test module)
from postgres_server import server_or_skip

torch.set_num_threads(1)


def pytest_sessionstart(session):
    """Test files need unique basenames: pytest imports them by basename (rootdir-relative "prepend" mode), so a
    second tests/<package>/test_<module>.py of the same name fails collection of the whole suite. Said at once, for
    any run (a single file's too), with the names to use instead."""
    tests = Path(__file__).parent
    seen: dict[str, Path] = {}
    for path in sorted(tests.rglob("test_*.py")):
        if path.name in seen:
            clash = (seen[path.name], path)
            renames = [
                f"{p.relative_to(tests)} → test_{p.parent.name}_{p.name.removeprefix('test_')}"
                for p in clash
                if p.parent != tests
            ]
            raise pytest.UsageError(
                f"tests/{clash[0].relative_to(tests)} and tests/{clash[1].relative_to(tests)} share a basename, which "
                f"pytest cannot import twice; rename {' or '.join(renames)}"
            )
        seen[path.name] = path


@contextmanager
def float64_mode(monkeypatch):
    """Within it, models and tensors follow the default dtype, set to float64, and so do the data tensors the
    engine prepares (the data set's float32 values, exactly representable)."""
    from_arrays = TensorData.from_arrays.__func__

    def float64_arrays(cls, arrays, device):
        data = from_arrays(cls, arrays, device)
        for name in ("train_x", "train_y", "test_x", "test_y", "fill"):
            value = getattr(data, name)
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                setattr(data, name, value.to(torch.float64))
        return data

    monkeypatch.setattr(TensorData, "from_arrays", classmethod(float64_arrays))
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


@pytest.fixture
def float64(monkeypatch):
    """Run the test in float64 (``float64_mode``)."""
    with float64_mode(monkeypatch):
        yield


@pytest.fixture
def registry_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'registry' / 'fedbench.db'}"


@pytest.fixture(scope="session")
def postgres_server():
    """One throwaway PostgreSQL server for the session (tests/postgres_server.py); skips when none can be had."""
    with server_or_skip() as server:
        yield server


@pytest.fixture(scope="session")
def slurm_host():
    """One real single-host Slurm for the session (tests/cluster_fixtures.py); skips when none can be had."""
    host, reason = start_slurm()
    if host is None:
        pytest.skip(f"real-Slurm tests skipped: {reason}")
    yield host
    host.stop()


@pytest.fixture
def slurm(slurm_host: SlurmHost, monkeypatch) -> SlurmHost:
    """The session's Slurm, its clients pointed at it (``SLURM_CONF``) and its queue emptied after the test."""
    for name, value in slurm_host.env.items():
        monkeypatch.setenv(name, value)
    yield slurm_host
    slurm_host.cancel_all()


@pytest.fixture
def ray_nodes(monkeypatch) -> RayNodes:
    """A real two-node Ray cluster of its own for one test (a test may kill its second node); skips when none can
    be had. The driver (``fedbench run``) asks for what the nodes were started with (``RayNodes.env``)."""
    nodes, reason = start_ray()
    if nodes is None:
        pytest.skip(f"real-Ray tests skipped: {reason}")
    for name, value in nodes.env.items():
        monkeypatch.setenv(name, value)
    yield nodes
    nodes.stop()


@pytest.fixture
def postgres_admin_url(request) -> str:
    """A PostgreSQL URL whose role may create databases and roles: $FEDBENCH_TEST_POSTGRES_URL when set, else the
    session's throwaway server (skipped without one)."""
    if os.environ.get("FEDBENCH_TEST_POSTGRES_URL"):
        return os.environ["FEDBENCH_TEST_POSTGRES_URL"]
    return request.getfixturevalue("postgres_server").url("postgres")


@pytest.fixture(params=["sqlite", "postgresql"])
def any_registry_url(request, tmp_path: Path, monkeypatch) -> str:
    """The test once on a SQLite registry and once on a fresh PostgreSQL database (skipped without a server).
    A PostgreSQL registry keeps checkpoints under ``registry/`` of the working directory: the test's own."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'registry' / 'fedbench.db'}"
    server = request.getfixturevalue("postgres_server")
    monkeypatch.chdir(tmp_path)
    return server.create_database()


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


@pytest.fixture
def mnist_root(tmp_path, monkeypatch):
    """A data root holding tiny MNIST files in the official layout, their checksums taken as the published ones."""
    import data_fixtures as fx
    from fedbench.data import files, mnist

    fx.write_mnist_like(tmp_path)
    raw = tmp_path / "mnist" / "MNIST" / "raw"
    monkeypatch.setattr(mnist, "MNIST_MD5", tuple(files.file_digest(raw / n) for n in mnist._MNIST_NAMES))
    return tmp_path
