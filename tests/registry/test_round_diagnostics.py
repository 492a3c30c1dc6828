"""Per-round diagnostics in the registry (``rounds.diagnostics``, migration 0004): written with the round in one
row, dropped with it when a resumed run redoes it, carried by runs files (version 2; version 1 files still read),
shown by ``fedbench show --json``; registries of 0.1.0 and of revision 0003 open and read with none."""

from __future__ import annotations

import json
import sqlite3

from sqlalchemy import create_engine, update
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.engine.loop import RoundRecord
from fedbench.recipes.resolve import resolve_spec
from fedbench.registry import Registry
from fedbench.registry.schema import _config, current_revision, head_revision
from fedbench.registry.tables import runs
from fedbench.registry.transfer import export_lines, import_runs, read_runs_file
from fedbench.spec import RunSpec
from registry_fixtures import entry, old_registry, raw_rows

DIVERGENCE = {
    "layers": ["fc1", "fc2"],
    "clients": [2, 0],
    "distance": [[0.5, 0.25], [1.5, 0.75]],
    "mean": [1.0, 0.5],
    "global_norm": [3.0, 1.0],
}


def diagnosed_spec() -> RunSpec:
    return resolve_spec(
        RunSpec(algorithm="fedavg", dataset="digits", model="digits_mlp", rounds=2, diagnostics=("weight_divergence",))
    )


def record(round_index: int, diagnostics=None) -> RoundRecord:
    return RoundRecord(round_index, 1.0 / round_index, 0.1, 10, 20, test_acc=0.5, diagnostics=diagnostics)


def finished_run(registry: Registry) -> int:
    spec = diagnosed_spec()
    registry.ensure_runs([entry(0, spec_hash=spec.spec_hash, spec=spec.model_dump(mode="json"))])
    run_id = registry.runs()[0].id
    registry.log_round(run_id, record(1))
    registry.log_round(run_id, record(2, {"weight_divergence": DIVERGENCE}))
    with registry.engine.begin() as connection:
        connection.execute(update(runs).where(runs.c.id == run_id).values(status="done", rounds_done=2))
    return run_id


def test_diagnostics_are_stored_with_their_round_and_redone_with_it(registry_url):
    registry = Registry(registry_url)
    run_id = finished_run(registry)
    assert [r.diagnostics for r in registry.curve(run_id)] == [None, {"weight_divergence": DIVERGENCE}]
    selected = registry.curves([run_id], ["diagnostics"])[run_id]  # what a report of diagnostics reads
    assert [r.diagnostics for r in selected] == [None, {"weight_divergence": DIVERGENCE}]
    registry.truncate_rounds(run_id, 1)  # a resumed run drops the rounds after its checkpoint, diagnostics too
    registry.log_round(run_id, record(2, {"weight_divergence": {**DIVERGENCE, "mean": [2.0, 1.0]}}))
    assert registry.curve(run_id)[1].diagnostics["weight_divergence"]["mean"] == [2.0, 1.0]


def test_diagnostic_values_read_one_diagnostic_by_run_and_round(any_registry_url):
    """What a diagnostics view draws from: {run: {round: value}} of the one diagnostic asked for, only the rounds
    that recorded it, every run asked for present (empty when it recorded none); on SQLite and PostgreSQL."""
    registry = Registry(any_registry_url)
    run_id = finished_run(registry)
    registry.log_round(run_id, record(3, {"val_loss": {"clients": [0], "loss": [0.5], "mean": 0.5}}))
    registry.log_round(run_id, record(4, {"weight_divergence": {**DIVERGENCE, "mean": [3.0, 2.0]}, "val_loss": None}))
    assert registry.diagnostic_values([run_id, run_id + 1], "weight_divergence") == {
        run_id: {2: DIVERGENCE, 4: {**DIVERGENCE, "mean": [3.0, 2.0]}},
        run_id + 1: {},
    }
    assert registry.diagnostic_values([run_id], "val_loss") == {
        run_id: {3: {"clients": [0], "loss": [0.5], "mean": 0.5}}
    }
    assert list(registry.diagnostic_values([run_id], "weight_divergence")[run_id]) == [2, 4]  # round order
    assert registry.diagnostic_values([], "val_loss") == {}


def test_show_json_prints_each_rounds_diagnostics(registry_url):
    finished_run(Registry(registry_url))
    result = CliRunner().invoke(app, ["show", "1", "--json", "--registry", registry_url])
    assert result.exit_code == 0, result.output
    curve = json.loads(result.stdout)["curve"]
    assert [entry["diagnostics"] for entry in curve] == [None, {"weight_divergence": DIVERGENCE}]


def test_runs_files_carry_diagnostics_and_version_1_files_still_import(registry_url, tmp_path):
    source = Registry(registry_url)
    finished_run(source)
    lines = list(export_lines(source))
    assert json.loads(lines[0])["version"] == 2
    path = tmp_path / "runs.jsonl"
    path.write_text("\n".join(lines) + "\n")
    target = Registry(f"sqlite:///{tmp_path / 'target.db'}")
    assert import_runs(target, read_runs_file(path, resolve_spec)).added == [diagnosed_spec().spec_hash]
    assert [r.diagnostics for r in target.curve(target.runs()[0].id)] == [None, {"weight_divergence": DIVERGENCE}]
    # the same run exported by a fedbench before diagnostics: version 1, no diagnostics key in its rounds
    header, run = json.loads(lines[0]), json.loads(lines[1])
    run["rounds"] = [{k: v for k, v in r.items() if k != "diagnostics"} for r in run["rounds"]]
    run["spec"] = {k: v for k, v in run["spec"].items() if k != "diagnostics"}
    run["spec_hash"] = resolve_spec(RunSpec(**run["spec"])).spec_hash
    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps({**header, "version": 1}) + "\n" + json.dumps(run) + "\n")
    [(_, line)] = read_runs_file(old, resolve_spec)
    assert [r.diagnostics for r in line.rounds] == [None, None]


def test_a_0_1_0_registry_opens_with_no_diagnostics_and_shows_them_as_null(tmp_path):
    url, database = old_registry(tmp_path)
    registry = Registry(url)
    assert current_revision(registry.engine) == head_revision() == "0005_recomputed_summaries"
    assert raw_rows(database, "SELECT count(*) FROM rounds WHERE diagnostics IS NOT NULL") == [(0,)]
    run = registry.runs()[0]
    result = CliRunner().invoke(app, ["show", str(run.id), "--json", "--registry", url])
    assert result.exit_code == 0, result.output
    curve = json.loads(result.stdout)["curve"]
    assert curve and all(entry["diagnostics"] is None for entry in curve)


def test_a_registry_at_revision_0003_gets_the_column_and_keeps_its_rounds(tmp_path):
    from alembic import command

    database = tmp_path / "r3.db"
    engine = create_engine(f"sqlite:///{database}")
    with engine.begin() as connection:
        config = _config()
        config.attributes["connection"] = connection
        command.upgrade(config, "0003_checkpoint_hash")
    with sqlite3.connect(database) as connection:
        columns = [row[1] for row in connection.execute("PRAGMA table_info(rounds)")]
        assert "diagnostics" not in columns
        connection.execute(
            "INSERT INTO runs (spec_hash, spec, labels, algorithm, dataset, seed, scale, synthetic, targets, status, "
            "rounds_done, summary, provenance) VALUES ('00000000000000aa', '{}', '{}', 'fedavg', 'digits', 0, 'full', "
            "0, '[]', 'done', 1, '{}', '{}')"
        )
        connection.execute("INSERT INTO rounds (run_id, round, test_acc) VALUES (1, 1, 0.5)")
    registry = Registry(f"sqlite:///{database}")
    assert current_revision(registry.engine) == head_revision()
    [row] = registry.curve(1)
    assert row.test_acc == 0.5 and row.diagnostics is None
