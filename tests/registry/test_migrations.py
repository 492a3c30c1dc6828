"""The migrations (fedbench/registry/migrations): registries written by older fedbench versions still open, report and
resume. ``fixtures/registry_v0.1.0.sql`` is a registry made by fedbench 0.1.0 (the runs it holds:
``registry_fixtures.RUNS_IN_FIXTURE``)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import torch
from sqlalchemy import create_engine, insert, select
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.curves import summarize
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.recipes.resolve import resolve_spec
from fedbench.registry import Registry
from fedbench.registry.schema import MIGRATIONS, _config, current_revision, head_revision
from fedbench.registry.tables import rounds, runs
from fedbench.spec import RESOLVED_KEYS, RunSpec
from registry_fixtures import FIXTURE, RECIPES, compiled_hashes, entry, old_registry, raw_rows


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


# ------------------------------------------------------------------------ 0005: summaries recomputed from the curves
# Quickstart's two smoke runs as a registry at revision 0004 left them: the worker compared accuracies stored as
# fractions with targets in %, so no target was ever reached. {algorithm: (curve of test_acc, its rounds to 80 % and
# 90 %)}; 0.8 reaches 80 % exactly.
OLD_CURVES = {"fedavg": ([0.61, 0.8, 0.95], {"80": 2, "90": 3}), "fedprox": ([0.3, 0.7, 0.85], {"80": 3, "90": None})}


def registry_at_0004(tmp_path) -> tuple[str, Path]:
    """A registry migrated to revision 0004 holding runs with the summaries fedbench wrote before 0005: quickstart's
    smoke runs (rounds to target null) and, by hand, a run summarised with other targets than its ``targets``
    column, a finished run without a summary, a failed and a pending run."""
    from alembic import command

    database = tmp_path / "registry" / "fedbench.db"
    database.parent.mkdir()
    engine = create_engine(f"sqlite:///{database}")
    with engine.begin() as connection:
        config = _config()
        config.attributes["connection"] = connection
        command.upgrade(config, "0004_round_diagnostics")
    planned = expand(load_recipe(RECIPES / "quickstart.toml"), scale="smoke")
    curve = [0.2, 0.6]
    with engine.begin() as connection:
        for p in planned:
            values, _ = OLD_CURVES[p.spec.algorithm]
            old = summarize(list(enumerate(values, 1)))  # the fractions were right, the targets never reached
            old["rounds_to_target"] = {"80": None, "90": None}
            connection.execute(insert(runs).values(**p.registry_entry(), status="done", rounds_done=3, summary=old))
        made = [
            # summarised with the target 30 (its recipe's then), registered with 50: the summary's own targets
            entry(1, targets=[50.0], status="done", summary={**summarize([]), "rounds_to_target": {"30": None}}),
            entry(2, targets=[50.0], status="done", summary={}),
            entry(3, targets=[50.0], status="failed", summary={}),
            entry(4, targets=[50.0], status="pending", summary={}),
        ]
        for values in made:
            connection.execute(insert(runs).values(rounds_done=2, provenance={}, **values))
        ids = dict(connection.execute(select(runs.c.spec_hash, runs.c.id)).all())
        for p in planned:
            values, _ = OLD_CURVES[p.spec.algorithm]
            for number, value in enumerate(values, 1):
                connection.execute(insert(rounds).values(run_id=ids[p.spec_hash], round=number, test_acc=value))
        for index in (1, 2, 3, 4):
            for number, value in enumerate(curve, 1):
                connection.execute(insert(rounds).values(run_id=ids[f"{index:016x}"], round=number, test_acc=value))
    engine.dispose()
    return f"sqlite:///{database}", database


def test_a_0004_registry_gets_every_finished_summary_recomputed_from_its_curve(tmp_path):
    url, database = registry_at_0004(tmp_path)
    rounds_before = raw_rows(database, "SELECT * FROM rounds ORDER BY run_id, round")
    registry = Registry(url)
    assert current_revision(registry.engine) == head_revision()
    by_hash = {run.spec_hash: run for run in registry.runs()}
    for run in by_hash.values():
        if run.recipe == "quickstart":
            values, reached = OLD_CURVES[run.algorithm]
            assert run.summary == {
                "best": max(values),
                "best_round": 3,
                "final": values[-1],
                "last5_mean": pytest.approx(sum(values) / 3, rel=1e-12),
                "last10_mean": pytest.approx(sum(values) / 3, rel=1e-12),
                "rounds_to_target": reached,
                "evaluated_rounds": 3,
            }
    made = [by_hash[f"{index:016x}"].summary for index in (1, 2, 3, 4)]
    assert made[0]["rounds_to_target"] == {"30": 2} and made[0]["best"] == 0.6 and made[0]["evaluated_rounds"] == 2
    assert made[1]["rounds_to_target"] == {"50": 2} and made[1]["final"] == 0.6  # from its targets column
    assert made[2:] == [{}, {}]  # unfinished: its worker writes the summary when it finishes
    assert raw_rows(database, "SELECT * FROM rounds ORDER BY run_id, round") == rounds_before


def test_show_and_report_of_a_repaired_registry_give_the_same_rounds_to_target(tmp_path):
    url, _ = registry_at_0004(tmp_path)
    runner = CliRunner()
    report = runner.invoke(
        app,
        ["report", "--recipe", str(RECIPES / "quickstart.toml"), "--scale", "smoke", "--registry", url]
        + ["--format", "json"],
    )
    assert report.exit_code == 0, report.output
    [speed] = [t for t in json.loads(report.stdout)["tables"] if t["table"] == "speed"]  # rounds to 90 %
    assert {cell["row"]: cell["values"] for cell in speed["cells"]} == {"fedavg": [3], "fedprox": [None]}
    for run in Registry(url).runs(paper="quickstart"):
        shown = runner.invoke(app, ["show", str(run.id), "--registry", url], env={"COLUMNS": "200"})
        assert shown.exit_code == 0, shown.output
        reached = OLD_CURVES[run.algorithm][1]
        words = " · ".join(f"rounds to {t} %: {'not reached' if r is None else r}" for t, r in reached.items())
        assert words in shown.stdout, shown.stdout


def migration_0005():
    import importlib.util

    path = Path(MIGRATIONS / "versions" / "0005_recomputed_summaries.py")
    spec = importlib.util.spec_from_file_location("migration_0005", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_0005_takes_the_summarys_own_targets_and_counts_a_nan_equal_to_a_nan():
    module = migration_0005()
    assert module.summary_targets({"rounds_to_target": {"30": None, "82.5": 4}}, [50]) == [30.0, 82.5]
    assert module.summary_targets({"rounds_to_target": {}}, [50]) == [50.0]
    assert module.summary_targets({}, [50, 90]) == [50.0, 90.0]
    assert module.summary_targets({}, None) == []
    nan = float("nan")
    assert module.same_summary(
        {"best": nan, "rounds_to_target": {"80": None}}, {"best": nan, "rounds_to_target": {"80": None}}
    )
    assert not module.same_summary({"best": nan}, {"best": 0.5})
    assert not module.same_summary({"rounds_to_target": {"80": None}}, {"rounds_to_target": {"80": 2}})
    assert module._json('{"a": 1}') == {"a": 1} and module._json({"a": 1}) == {"a": 1} and module._json(None) is None
