"""`fedbench runs` (fedbench/cli/runs.py): a registry that does not exist is said, not shown as empty, and not
created."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fedbench.cli import app

runner = CliRunner()


def test_a_registry_that_does_not_exist_is_said_and_not_created(tmp_path):
    """A typo in --registry must not look like an empty registry, nor create a file."""
    url = f"sqlite:///{tmp_path / 'typo' / 'fedbench.db'}"
    result = runner.invoke(app, ["runs", "--registry", url])
    assert result.exit_code == 0
    assert f"no registry at {url} yet" in result.output and "0 runs" in result.output
    assert json.loads(runner.invoke(app, ["runs", "--registry", url, "--json"]).stdout) == []
    assert not (tmp_path / "typo").exists()


@pytest.mark.slow
def test_show_fits_one_screen_for_a_run_of_every_shipped_recipe(tmp_path):
    """``fedbench show`` of a finished run of each shipped recipe's first cell, with a long curve (up to 100 rounds,
    every round evaluated) and its provenance, fits one 120 × 50 terminal screen."""
    from pathlib import Path

    from fedbench.engine.loop import RoundRecord
    from fedbench.recipes.expand import compile_recipes
    from fedbench.registry import Registry

    url = f"sqlite:///{tmp_path / 'fedbench.db'}"
    registry = Registry(url)
    provenance = {
        "fedbench_version": "0.1.0",
        "git_commit": "0" * 40,
        "git_dirty": True,
        "python": "3.11.7",
        "torch": "2.3.0",
        "device": "cuda:NVIDIA H100 80GB HBM3",
        "host": "a-rather-long-host-name.cluster.example.org",
        "data": {
            "source": "a data source",
            "verified": True,
            "client_sizes": list(range(100, 200)),
            "num_params": 10**7,
        },
        "packing": {"executor": "packed"},
        "peak_memory": {"bytes": 2**30},
    }
    recipes = sorted((Path(__file__).resolve().parents[2] / "recipes").glob("*.toml"))
    for recipe in recipes:
        planned = compile_recipes([recipe])
        if not planned:  # an analytic recipe: no run to show
            continue
        first = planned[0]
        registry.ensure_runs([first.registry_entry()])
        run_id = registry.claim(first.spec_hash, worker="test:1")
        if run_id is None:  # two recipes share this cell: shown once
            continue
        for number in range(1, min(first.spec.rounds, 100) + 1):
            record = RoundRecord(number, 1.0, 0.5, 1, 1, test_acc=number / 100, test_loss=1.0)
            registry.log_round(run_id, record, worker="test:1")
        registry.set_provenance(run_id, provenance, worker="test:1")
        registry.finish(run_id, "done", summary={"best": 0.9, "best_round": 3, "final": 0.8}, worker="test:1")
        result = runner.invoke(app, ["show", first.spec_hash, "--registry", url], env={"COLUMNS": "120"})
        assert result.exit_code == 0, result.output
        lines = result.output.rstrip("\n").splitlines()
        assert len(lines) <= 50 and max(map(len, lines)) <= 120, (recipe.name, len(lines))


@pytest.mark.parametrize("width", [80, 160])
def test_the_list_never_cuts_a_paper_or_a_label(tmp_path, monkeypatch, width):
    """At 80 columns (piped) one wrapped line per run, wide enough a table: the paper and each label whole."""
    from fedbench.cli import common
    from fedbench.registry import Registry

    url = f"sqlite:///{tmp_path / 'fedbench.db'}"
    labels = {"algorithm": "fedavg", "case": "AlexNet CIFAR-50%"}
    entry = {
        "spec_hash": "f" * 16,
        "spec": {},
        "labels": labels,
        "paper": "fedtrip",
        "recipe": "fedtrip_table4",
        "algorithm": "fedavg",
        "dataset": "cifar10",
        "seed": 0,
        "scale": "quick",
        "synthetic": False,
        "targets": [],
    }
    Registry(url).ensure_runs([entry])
    monkeypatch.setattr(common.console, "_width", width)
    out = runner.invoke(app, ["runs", "--registry", url]).stdout
    lines = out.splitlines()
    assert "…" not in out and max(len(line) for line in lines) <= width
    for name in ("fedtrip", "algorithm=fedavg", "case=AlexNet CIFAR-50%"):
        assert any(name in line for line in lines), (name, width)
    assert any(line.startswith("┏") for line in lines) == (width == 160)


def test_status_takes_only_a_run_status(registry_url):
    """``--status`` is one of the registry's run statuses (``RunStatus``); another value is a usage error naming
    them, not an empty listing."""
    from fedbench.vocab.status import RunStatus

    result = runner.invoke(app, ["runs", "--status", "finished", "--registry", registry_url])
    assert result.exit_code == 2
    assert "'finished'" in result.output and all(f"'{status}'" in result.output for status in RunStatus)
    assert runner.invoke(app, ["runs", "--status", "done", "--registry", registry_url]).exit_code == 0
