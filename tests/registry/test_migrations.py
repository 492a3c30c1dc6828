"""The migrations (fedbench/registry/migrations): registries written by older fedbench versions still open, report and
resume. ``fixtures/registry_v0.1.0.sql`` is a registry made by fedbench 0.1.0 (the runs it holds:
``registry_fixtures.RUNS_IN_FIXTURE``)."""

from __future__ import annotations

import json
import sqlite3

import pytest
import torch
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.recipes.resolve import resolve_spec
from fedbench.registry import Registry
from fedbench.registry.schema import current_revision, head_revision
from fedbench.spec import RESOLVED_KEYS, RunSpec
from registry_fixtures import FIXTURE, RECIPES, compiled_hashes, old_registry, raw_rows


def test_a_0_1_0_registry_is_migrated_to_resolved_specs_and_its_runs_are_found(tmp_path):
    url, database = old_registry(tmp_path)
    old_hashes = {h for (h,) in raw_rows(database, "SELECT spec_hash FROM runs")}
    rounds_before = raw_rows(database, "SELECT count(*) FROM rounds")[0][0]
    registry = Registry(url)
    assert current_revision(registry.engine) == head_revision()
    runs = registry.runs()
    assert len(runs) == 13 and raw_rows(database, "SELECT count(*) FROM rounds")[0][0] == rounds_before
    for run in runs:  # each stored spec is resolved and keyed by its own hash
        spec = RunSpec(**run.spec)
        assert spec.spec_hash == run.spec_hash and spec.model_dump(mode="json") == run.spec
    stored = {run.spec_hash for run in runs}
    assert stored == compiled_hashes()  # today's recipes find every old run...
    assert stored != old_hashes  # ...under its new (resolved) hash
    assert all(run.status == "done" for run in runs)


def test_an_old_registry_reports_and_its_done_runs_are_not_trained_again(tmp_path):
    url, database = old_registry(tmp_path)
    runner = CliRunner()
    report = runner.invoke(
        app,
        [
            "report",
            "--recipe",
            str(RECIPES / "quickstart.toml"),
            "--scale",
            "smoke",
            "--registry",
            url,
            "--format",
            "json",
        ],
    )
    assert report.exit_code == 0, report.output
    [accuracy] = [t for t in json.loads(report.stdout)["tables"] if t["table"] == "accuracy"]
    best = {cell["row"]: cell["mean"] for cell in accuracy["cells"] if cell["n"] == 1}
    stored = dict(
        raw_rows(
            database,
            "SELECT runs.algorithm, max(rounds.test_acc) FROM runs JOIN rounds ON "
            "rounds.run_id = runs.id WHERE recipe = 'quickstart' AND scale = 'smoke' "
            "GROUP BY runs.algorithm",
        )
    )
    assert best == {algorithm: 100 * value for algorithm, value in stored.items()} and len(best) == 2
    run = runner.invoke(app, ["run", str(RECIPES / "quickstart.toml"), "--scale", "smoke", "--registry", url])
    assert run.exit_code == 0, run.output
    assert "2 of 2 runs already done" in run.output


def test_runs_that_resolve_to_one_spec_become_one_run_keeping_the_finished_one(tmp_path):
    url, database = old_registry(tmp_path)
    # a pending copy of quickstart's smoke FedAvg run that spelled a default out (0.1.0 gave it another hash)
    [(run_id, spec_text)] = raw_rows(
        database, "SELECT id, spec FROM runs WHERE recipe = 'quickstart' AND scale = 'smoke' AND algorithm = 'fedavg'"
    )
    spec = json.loads(spec_text)
    spec["partition_params"] = {**spec["partition_params"], "balance": False}
    duplicate = json.dumps(spec).replace("'", "''")
    url, database = old_registry(
        tmp_path / "second",
        f"""
        INSERT INTO runs (spec_hash, spec, labels, paper, recipe, algorithm, dataset, seed, scale, synthetic, targets,
                          status, rounds_done, summary, provenance)
        VALUES ('0123456789abcdef', '{duplicate}', '{{"algorithm": "fedavg"}}', 'quickstart', 'quickstart', 'fedavg',
                'digits', 0, 'smoke', 0, '[]', 'pending', 0, '{{}}', '{{}}');
    """,
    )
    assert raw_rows(database, "SELECT count(*) FROM runs")[0][0] == 14
    runs = Registry(url).runs()
    assert len(runs) == 13
    kept = [r for r in runs if r.recipe == "quickstart" and r.scale == "smoke" and r.algorithm == "fedavg"]
    assert [r.id for r in kept] == [run_id] and kept[0].status == "done"
    assert raw_rows(database, f"SELECT count(*) FROM rounds WHERE run_id = {run_id}")[0][0] == 3


def test_checkpoints_of_migrated_runs_follow_their_new_hash(tmp_path, monkeypatch):
    """Renamed, never unpickled (a checkpoint may come from anyone: docs/security.md); resuming from it is then
    refused like any checkpoint the registry has no hash of (tests/integration/test_checkpoint_safety.py)."""
    url, database = old_registry(tmp_path)
    [(old_hash,)] = raw_rows(database, "SELECT spec_hash FROM runs WHERE recipe = 'quickstart' AND scale = 'full'")
    checkpoints = database.parent / "checkpoints"
    checkpoints.mkdir()
    torch.save({"spec_hash": old_hash, "round": 7, "server": {}}, checkpoints / f"{old_hash}.pt")
    written = (checkpoints / f"{old_hash}.pt").read_bytes()
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("the migration unpickled a checkpoint"))
    registry = Registry(url)
    [run] = [r for r in registry.runs() if r.recipe == "quickstart" and r.scale == "full"]
    assert not (checkpoints / f"{old_hash}.pt").exists()
    assert registry.checkpoint_path(run.spec_hash).read_bytes() == written


def test_a_registry_older_than_0_1_0_gets_its_missing_columns(tmp_path):
    sql = FIXTURE.read_text().replace("\tpersonal_metrics JSON, \n", "").replace("\tprovenance JSON NOT NULL, \n", "")
    assert sql != FIXTURE.read_text()
    sql = "\n".join(line for line in sql.splitlines() if not line.startswith("INSERT"))  # rows named the columns
    database = tmp_path / "old.db"
    with sqlite3.connect(database) as connection:
        connection.executescript(sql)
    registry = Registry(f"sqlite:///{database}")
    columns = {row[1] for row in raw_rows(database, "PRAGMA table_info(rounds)")}
    assert "personal_metrics" in columns and registry.runs() == []


def test_an_old_run_whose_result_a_fix_changed_is_not_taken_for_the_new_result(tmp_path):
    """0.1.0's LG-Mix under partial participation let evaluation change training: such a run keeps a hash of
    its own (result revision 1), so the fixed spec (revision 2) is trained again rather than reported stale."""
    spec = resolve_spec(
        dict(
            algorithm="lgmix",
            dataset="digits",
            model="digits_mlp",
            num_clients=4,
            clients_per_round=2,
            rounds=2,
            eval_mode="both",
            client_test_fraction=0.2,
        )
    )
    raw = {
        **spec.model_dump(mode="json", exclude=set(RESOLVED_KEYS)),  # 0.1.0 stored neither
        "algorithm_params": {},
        "model_params": {},
        "dataset_params": {},
        "partition_params": {},
    }
    url, _ = old_registry(
        tmp_path,
        f"""
        INSERT INTO runs (spec_hash, spec, labels, paper, recipe, algorithm, dataset, seed, scale, synthetic, targets,
                          status, rounds_done, summary, provenance)
        VALUES ('fedcba9876543210', '{json.dumps(raw)}', '{{}}', 'lgmix', 'x', 'lgmix', 'digits', 0, 'full', 0, '[]',
                'done', 2, '{{}}', '{{}}');
    """,
    )
    [run] = [r for r in Registry(url).runs() if r.algorithm == "lgmix" and r.recipe == "x"]
    assert run.spec_hash == spec.model_copy(update={"algorithm_revision": 1}).spec_hash != spec.spec_hash
    assert RunSpec(**run.spec).spec_hash == run.spec_hash  # the stored spec says the revision it was trained at
    assert Registry(url).statuses([spec.spec_hash]) == {}
