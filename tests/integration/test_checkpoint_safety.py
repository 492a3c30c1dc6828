"""Checkpoints are data, not code (fedbench.checkpoint.format, docs/security.md "Checkpoint storage").

A run is interrupted (Ctrl-C after round 2 of 4), its checkpoint on disk is replaced — by a pickle that would
create a marker file when unpickled, by an old-format (torch.save) checkpoint, by a truncated copy, by a valid
checkpoint of another spec, by a valid checkpoint of this spec whose bytes the registry never recorded — and the
run is started again: the marker never appears, the command prints exactly one warning naming the file and the
reason, and the run ends with exactly the curve of an uninterrupted run (trained again from round 0). A registry
from before the recorded checkpoint hashes is upgraded on opening and keeps its runs. (The file format on its own:
tests/checkpoint/test_format.py.)"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from fedbench.checkpoint.format import (
    load_checkpoint,
    save_checkpoint,
)
from fedbench.cli import app
from fedbench.engine import EngineOptions, run
from fedbench.execution import worker
from fedbench.registry import Registry
from fedbench.spec import RunSpec

RECIPE = """
paper = "ckpttest"
name = "ckpt"
seeds = [0]

[setup]
algorithm = "scaffold"
dataset = "digits"
model = "digits_mlp"
model_params = { hidden = 16 }
partition = "dirichlet"
partition_params = { alpha = 0.5, min_size = 5 }
num_clients = 4
clients_per_round = 2
rounds = 4
batch_size = 64
optimizer = { lr = 0.1 }
"""


class CreatesMarker:
    """Unpickling this creates the file ``path``: what an attacker's command would do."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


def curve(url: str) -> list[tuple[int, float | None, float | None]]:
    registry = Registry(url)
    (row,) = registry.runs()
    assert row.status == "done"
    return [(r.round, r.test_acc, r.train_loss) for r in registry.curve(row.id)]


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> list:
    folder = tmp_path_factory.mktemp("straight")
    recipe = folder / "ckpt.toml"
    recipe.write_text(RECIPE)
    url = f"sqlite:///{folder / 'straight.db'}"
    assert CliRunner().invoke(app, ["run", str(recipe), "--registry", url]).exit_code == 0
    return curve(url)


def interrupted_run(tmp_path: Path, monkeypatch) -> tuple[Path, str, Path]:
    """A run stopped by Ctrl-C after round 2 of 4: (recipe, registry URL, its checkpoint file)."""
    recipe = tmp_path / "ckpt.toml"
    recipe.write_text(RECIPE)
    url = f"sqlite:///{tmp_path / 'registry' / 'fedbench.db'}"
    real = worker.run_engine

    def stop_after_two(spec, sink, options):
        def on_round(record):
            options.on_round(record)
            if record.round == 2:  # Ctrl-C once round 2 is logged and checkpointed
                raise KeyboardInterrupt

        return real(spec, sink, replace(options, on_round=on_round))

    with monkeypatch.context() as patch:
        patch.setattr(worker, "run_engine", stop_after_two)
        assert CliRunner().invoke(app, ["run", str(recipe), "--registry", url]).exit_code == 130
    registry = Registry(url)
    (row,) = registry.runs()
    path = registry.checkpoint_path(row.spec_hash)
    assert row.status == "interrupted" and path.exists()
    assert row.checkpoint_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()  # recorded when written
    return recipe, url, path


def rerun(recipe: Path, url: str) -> tuple[str, dict]:
    result = CliRunner().invoke(app, ["run", str(recipe), "--registry", url])
    assert result.exit_code == 0, result.output
    (row,) = Registry(url).runs()
    return result.output, row.provenance["data"]


def test_an_untouched_checkpoint_resumes_without_warning(tmp_path, monkeypatch, straight):
    recipe, url, _ = interrupted_run(tmp_path, monkeypatch)
    output, data = rerun(recipe, url)
    assert "warning" not in output and data["resumed_from"] == 2
    assert curve(url) == straight


def pickled(obj) -> bytes:
    return pickle.dumps(obj)


def torch_saved(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


@pytest.mark.parametrize("writer", [pickled, torch_saved], ids=["pickle", "torch.save"])
def test_a_malicious_pickle_in_place_of_a_checkpoint_never_runs(tmp_path, monkeypatch, straight, writer):
    recipe, url, path = interrupted_run(tmp_path, monkeypatch)
    marker = tmp_path / "pwned"
    live = writer(CreatesMarker(tmp_path / "proof"))
    torch.load(io.BytesIO(live), weights_only=False) if writer is torch_saved else pickle.loads(live)
    assert (tmp_path / "proof").exists()  # the payload is live: loading it the old way runs it
    path.write_bytes(writer({"spec_hash": "x", "round": 2, "server": CreatesMarker(marker)}))
    output, data = rerun(recipe, url)
    assert not marker.exists()
    warnings = [line for line in output.splitlines() if "warning" in line]
    assert len(warnings) == 1 and str(path) in warnings[0] and "pickle" in warnings[0], output
    assert data["resumed_from"] == 0 and "pickle" in data["checkpoint_rejected"]
    assert curve(url) == straight


def test_a_checkpoint_of_the_previous_format_restarts_the_run_with_one_warning(tmp_path, monkeypatch, straight):
    """A checkpoint in the previous format, a torch.save pickle, is not loaded (even a genuine one)."""
    recipe, url, path = interrupted_run(tmp_path, monkeypatch)
    (row,) = Registry(url).runs()
    genuine = load_checkpoint(path, row.spec_hash)
    path.write_bytes(torch_saved(genuine))
    output, data = rerun(recipe, url)
    assert output.count("warning") == 1 and data["resumed_from"] == 0
    assert curve(url) == straight


@pytest.mark.parametrize("damage", ["truncated", "other spec", "edited weights", "unrecorded"])
def test_a_damaged_or_foreign_checkpoint_restarts_the_run_with_one_warning(tmp_path, monkeypatch, straight, damage):
    recipe, url, path = interrupted_run(tmp_path, monkeypatch)
    (row,) = Registry(url).runs()
    good = path.read_bytes()
    payload = load_checkpoint(path, row.spec_hash)
    if damage == "truncated":
        path.write_bytes(good[: len(good) // 2])
        reason = "truncated"
    elif damage == "other spec":
        save_checkpoint(path, {**payload, "spec_hash": "0" * 16})
        reason = "another spec"
    elif damage == "edited weights":  # the format and the spec are right; the bytes are not what the run wrote
        payload["server"]["params"][0] += 1.0
        save_checkpoint(path, payload)
        reason = "differs from the registry's record"
    else:  # a well-formed file for this spec that the registry has no hash of (e.g. copied from elsewhere)
        Registry(url).record_checkpoint(row.id, None)
        reason = "no record"
    output, data = rerun(recipe, url)
    warnings = [line for line in output.splitlines() if "warning" in line]
    assert len(warnings) == 1 and reason in output and path.name in output, output
    assert data["resumed_from"] == 0 and reason in data["checkpoint_rejected"]
    assert curve(url) == straight


def test_an_unexpected_layout_restarts_instead_of_failing_with_a_key_error(tmp_path):
    """The issue's `KeyError: 'server'`: a well-formed checkpoint of the right spec laid out otherwise."""
    from conftest import ListSink

    spec = RunSpec(
        algorithm="fedavg", dataset="digits", model="digits_mlp", num_clients=3, clients_per_round=3, rounds=2
    )
    straight = ListSink()
    run(spec, straight)
    path = tmp_path / "ckpt.pt"
    warnings: list[str] = []
    for payload in (
        {"spec_hash": spec.spec_hash, "round": 1, "weights": torch.zeros(3)},
        {
            "spec_hash": spec.spec_hash,
            "round": 1,
            "server": {"params": torch.zeros(3), "buffers": {}, "state": {}},
            "client_states": {},
            "finetune_start": None,
        },
        {"spec_hash": spec.spec_hash, "round": 7, "server": {}, "client_states": {}, "finetune_start": None},
    ):
        save_checkpoint(path, payload)
        sink = ListSink()
        result = run(spec, sink, EngineOptions(checkpoint_path=path, on_warning=warnings.append))
        assert result.info["resumed_from"] == 0
        assert [(r.round, r.test_acc) for r in sink.records] == [(r.round, r.test_acc) for r in straight.records]
    assert len(warnings) == 3 and all(str(path) in w for w in warnings)
    assert "keys" in warnings[0] and "global weights" in warnings[1] and "round 7" in warnings[2]


def test_a_registry_at_revision_0002_opens_upgrades_and_reports(tmp_path, write_recipe):
    """Revision 0003_checkpoint_hash adds ``runs.checkpoint_sha256``: a registry at revision 0002 (a current one with
    the columns of 0003 and later dropped and its version set back) is upgraded on opening, keeps its runs and
    reports them."""
    import sqlite3

    from fedbench.registry.schema import current_revision, head_revision

    database = tmp_path / "registry" / "fedbench.db"
    url = f"sqlite:///{database}"
    recipe = write_recipe()
    assert CliRunner().invoke(app, ["run", str(recipe), "--scale", "smoke", "--registry", url]).exit_code == 0
    before = CliRunner().invoke(app, ["runs", "--json", "--registry", url]).stdout
    with sqlite3.connect(database) as connection:
        connection.execute("ALTER TABLE runs DROP COLUMN checkpoint_sha256")
        connection.execute("ALTER TABLE rounds DROP COLUMN diagnostics")  # revision 0004's
        connection.execute("UPDATE alembic_version SET version_num = '0002'")
    registry = Registry(url)
    assert current_revision(registry.engine) == head_revision() == "0005_recomputed_summaries"
    with sqlite3.connect(database) as connection:
        assert "checkpoint_sha256" in {row[1] for row in connection.execute("PRAGMA table_info(runs)")}
    assert CliRunner().invoke(app, ["runs", "--json", "--registry", url]).stdout == before
    report = CliRunner().invoke(
        app, ["report", "--recipe", str(recipe), "--scale", "smoke", "--format", "json", "--registry", url]
    )
    assert report.exit_code == 0 and any(cell["n"] == 1 for cell in json.loads(report.stdout)["tables"][0]["cells"])
