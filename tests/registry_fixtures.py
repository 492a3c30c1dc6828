"""Helpers for the registry tests: a run entry made by hand, a run finished by hand, a recipe's runs registered, and a
registry as fedbench 0.1.0 left it.

``fixtures/registry_v0.1.0.sql`` is a registry made by fedbench 0.1.0 (raw ``*_params``), dumped as SQL: quickstart
at the smoke scale and at full scale (FedAvg, seed 0), and synthetic smoke runs of FedTrip Fig. 6, FedTR Table 1 and
LG-Mix Table 1 (``RUNS_IN_FIXTURE``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.registry import Registry

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "registry_v0.1.0.sql"
RECIPES = Path(__file__).resolve().parents[1] / "recipes"
# The runs the fixture holds, as `fedbench run` compiled them with 0.1.0:
RUNS_IN_FIXTURE = [
    ("quickstart.toml", "smoke", False, {}),  # 2 runs
    ("fedtrip_fig6.toml", "smoke", True, {"model": "mlp", "heterogeneity": "Dir-0.1"}),  # 6 runs
    ("fedtr_table1.toml", "smoke", True, {"dataset": "PAMAP2", "algorithm": {"fedtr", "fedprox"}}),
    ("lgmix_table1.toml", "smoke", True, {"dataset": "Digits5", "algorithm": {"lgmix", "fedbn"}}),
    ("quickstart.toml", "full", False, {"algorithm": "fedavg", "seed": "0"}),
]


def finish_run(url: str, spec_hash: str, status: str, error: str | None = None) -> None:
    """Claim the registered run ``spec_hash`` and end it with ``status`` (and ``error``), as a worker would."""
    registry = Registry(url)
    registry.finish(registry.claim(spec_hash, "host:1"), status, error=error)


def entry(index: int, **fields) -> dict:
    """A registry entry with the hash ``f"{index:016x}"`` and seed ``index``; ``fields`` replace its values."""
    return (
        dict(
            spec_hash=f"{index:016x}",
            spec={"seed": index},
            labels={},
            paper="p",
            recipe="r",
            algorithm="fedavg",
            dataset="digits",
            seed=index,
            scale="full",
            synthetic=False,
            targets=[],
        )
        | fields
    )


def register_recipe(url: str, recipe) -> tuple[Registry, list]:
    """The registry at ``url`` with the runs of ``recipe`` (full scale) registered, and those runs as planned."""
    planned = expand(load_recipe(recipe))
    registry = Registry(url)
    registry.ensure_runs([p.registry_entry() for p in planned])
    return registry, planned


def old_registry(tmp_path: Path, extra_sql: str = "") -> tuple[str, Path]:
    database = tmp_path / "registry" / "fedbench.db"
    database.parent.mkdir(parents=True)
    with sqlite3.connect(database) as connection:
        connection.executescript(FIXTURE.read_text() + extra_sql)
    return f"sqlite:///{database}", database


def compiled_hashes() -> set[str]:
    hashes = set()
    for recipe, scale, synthetic, only in RUNS_IN_FIXTURE:
        for run in expand(load_recipe(RECIPES / recipe), scale=scale, synthetic=synthetic, only=only):
            hashes.add(run.spec_hash)
    return hashes


def raw_rows(database: Path, query: str) -> list[tuple]:
    with sqlite3.connect(database) as connection:
        return connection.execute(query).fetchall()


def trained_registry(folder: Path) -> str:
    """The URL of a registry in ``folder`` holding the tiny recipe's (``conftest.TINY_RECIPE``) two smoke runs,
    trained by ``fedbench run``: FedAvg and FedProx, 2 rounds each, with real curves and summaries."""
    from typer.testing import CliRunner  # local: only the tests that train a registry need the CLI

    from conftest import TINY_RECIPE
    from fedbench.cli import app

    recipe = folder / "tiny.toml"
    recipe.write_text(TINY_RECIPE)
    url = f"sqlite:///{folder / 'fedbench.db'}"
    trained = CliRunner().invoke(app, ["run", str(recipe), "--scale", "smoke", "--registry", url])
    assert trained.exit_code == 0, trained.output
    return url
