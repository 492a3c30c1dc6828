"""`fedbench export` / `fedbench import` (fedbench.registry.transfer): finished runs move between registries
(SQLite and PostgreSQL) and report the same tables there; importing twice adds nothing; a conflicting result is
reported and not overwritten; a malformed file is refused (exit 2, naming line and key) with nothing written;
passwords in URLs never leave the registry."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import TINY_RECIPE
from fedbench.cli import app
from fedbench.registry import Registry

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> tuple[Path, str, Path]:
    """A registry with the tiny recipe's two smoke runs trained, and its export."""
    folder = tmp_path_factory.mktemp("source")
    recipe = folder / "tiny.toml"
    recipe.write_text(TINY_RECIPE)
    url = f"sqlite:///{folder / 'source.db'}"
    trained = invoke("run", recipe, "--scale", "smoke", "--registry", url)
    assert trained.exit_code == 0, trained.output
    exported = invoke("export", "--paper", "testpaper", "--registry", url)
    assert exported.exit_code == 0, exported.output
    runs_file = folder / "runs.jsonl"
    runs_file.write_text(exported.stdout)
    return recipe, url, runs_file


def report(recipe: Path, url: str) -> dict:
    result = invoke("report", "--recipe", recipe, "--scale", "smoke", "--registry", url, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["tables"]


def snapshot(url: str) -> list[tuple]:
    registry = Registry(url)
    return [
        (
            r.spec_hash,
            r.status,
            json.dumps(r.summary, sort_keys=True),
            [(x.round, x.test_acc) for x in registry.curve(r.id)],
        )
        for r in registry.runs()
    ]


def test_the_export_is_a_header_and_one_json_object_per_finished_run(source):
    _, url, runs_file = source
    header, *lines = runs_file.read_text().splitlines()
    assert json.loads(header)["format"] == "fedbench-runs" and json.loads(header)["version"] == 2  # rounds' diagnostics
    records = [json.loads(line) for line in lines]
    stored = {r.spec_hash: r for r in Registry(url).runs()}
    assert sorted(r["spec_hash"] for r in records) == sorted(stored) and len(records) == 2
    for record in records:
        run = stored[record["spec_hash"]]
        assert record["spec"] == run.spec and record["labels"] == run.labels and record["status"] == "done"
        assert [x["round"] for x in record["rounds"]] == [1, 2]
        assert [x["test_acc"] for x in record["rounds"]] == [x.test_acc for x in Registry(url).curve(run.id)]


def test_imported_runs_report_the_same_tables_and_importing_twice_adds_nothing(source, any_registry_url):
    recipe, url, runs_file = source
    first = invoke("import", runs_file, "--registry", any_registry_url)
    assert first.exit_code == 0, first.output
    assert "imported 2 new run(s)" in first.stdout
    assert report(recipe, any_registry_url) == report(recipe, url)
    assert snapshot(any_registry_url) == snapshot(url)

    again = invoke("import", runs_file, "--registry", any_registry_url)
    assert again.exit_code == 0, again.output
    assert "imported 0 new run(s), completed 0, 2 already there, 0 conflict(s)" in again.stdout
    assert len(Registry(any_registry_url).runs()) == 2
    # and the imported runs are done for `fedbench run`: nothing is trained again
    rerun = invoke("run", recipe, "--scale", "smoke", "--registry", any_registry_url)
    assert rerun.exit_code == 0 and "2 of 2 runs already done" in rerun.output


def test_an_unfinished_run_is_completed_by_the_imported_result(source, tmp_path):
    recipe, url, runs_file = source
    target = f"sqlite:///{tmp_path / 'target.db'}"
    dry = invoke("run", recipe, "--scale", "smoke", "--registry", target, "--only", "algorithm=nothing")
    assert dry.exit_code == 2  # (no registry made by a failed filter)
    from fedbench.recipes.expand import expand
    from fedbench.recipes.load import load_recipe

    registry = Registry(target)
    registry.ensure_runs([p.registry_entry() for p in expand(load_recipe(recipe), scale="smoke")])
    result = invoke("import", runs_file, "--registry", target)
    assert result.exit_code == 0, result.output
    assert "imported 0 new run(s), completed 2" in result.stdout
    assert snapshot(target) == snapshot(url)


def test_a_conflicting_finished_result_is_reported_and_not_overwritten(source, tmp_path):
    _, url, runs_file = source
    header, first, second = runs_file.read_text().splitlines()
    changed = json.loads(second)
    changed["rounds"][1]["test_acc"] = changed["rounds"][1]["test_acc"] / 2
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join([header, first, json.dumps(changed)]) + "\n")
    before = snapshot(url)
    result = invoke("import", edited, "--registry", url)
    assert result.exit_code == 1, result.output
    assert "1 already there, 1 conflict(s)" in result.stdout
    assert f"line 3: run {changed['spec_hash']}: round 2 test_acc" in result.stderr
    assert snapshot(url) == before


def test_wall_time_differences_are_not_conflicts(source, tmp_path):
    _, url, runs_file = source
    header, *lines = runs_file.read_text().splitlines()
    records = [json.loads(line) for line in lines]
    for record in records:  # the same runs trained on a slower machine
        for row in record["rounds"]:
            row["wall_seconds"] = (row["wall_seconds"] or 0) * 3 + 1
        record["provenance"]["host"] = "elsewhere"
    slower = tmp_path / "slower.jsonl"
    slower.write_text("\n".join([header, *map(json.dumps, records)]) + "\n")
    result = invoke("import", slower, "--registry", url)
    assert result.exit_code == 0 and "2 already there, 0 conflict(s)" in result.stdout


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda lines: lines[:2] + ["{not json"] + lines[2:], "line 3: not JSON"),
        (lambda lines: [lines[0], _without(lines[1], "status"), lines[2]], "line 2: key status: Field required"),
        (lambda lines: [lines[0], lines[1], _with(lines[2], "status", "running")], "line 3: key status:"),
        (lambda lines: [lines[0], _with(lines[1], "spec_hash", "0" * 16), lines[2]], "line 2: key spec_hash: 0000"),
        (lambda lines: [lines[0], _with(lines[1], "rounds", [{"round": 1, "bogus": 2}])], "line 2: key rounds.0.bogus"),
        (lambda lines: [_with(lines[0], "version", 99), *lines[1:]], "line 1: key version: runs file version 99"),
        (lambda lines: lines[1:], "line 1: key format"),
        (lambda lines: [*lines, lines[1]], "line 4: key spec_hash: run"),
        (
            lambda lines: [lines[0], _with(lines[1], "spec", {**json.loads(lines[1])["spec"], "rounds": "many"})],
            "line 2: key spec.rounds",
        ),
    ],
)
def test_a_malformed_runs_file_exits_2_naming_line_and_key_and_writes_nothing(source, tmp_path, edit, message):
    _, url, runs_file = source
    target = f"sqlite:///{tmp_path / 'target.db'}"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(edit(runs_file.read_text().splitlines())) + "\n")
    before = snapshot(url)
    for registry in (target, url):
        result = invoke("import", bad, "--registry", registry)
        assert result.exit_code == 2, result.output
        assert message in result.output and len(result.output.strip().splitlines()) == 1, result.output
    assert not (tmp_path / "target.db").exists() and snapshot(url) == before


def _without(line: str, key: str) -> str:
    data = json.loads(line)
    del data[key]
    return json.dumps(data)


def _with(line: str, key: str, value) -> str:
    return json.dumps({**json.loads(line), key: value})


def test_passwords_in_urls_are_never_exported(source, tmp_path):
    recipe, url, _ = source
    copy = f"sqlite:///{tmp_path / 'copy.db'}"
    assert invoke("import", source[2], "--registry", copy).exit_code == 0
    registry = Registry(copy)
    run = registry.runs()[0]
    secret_url = "postgresql+psycopg://alice:hunter2@dbhost:5432/fedbench"
    registry.set_provenance(run.id, {**run.provenance, "registry": secret_url, "notes": [f"from {secret_url}"]})
    exported = invoke("export", "--registry", copy, "--recipe", recipe)
    assert exported.exit_code == 0
    assert "hunter2" not in exported.stdout
    assert "postgresql+psycopg://alice:***@dbhost:5432/fedbench" in exported.stdout
    assert len(exported.stdout.splitlines()) == 3  # --recipe (a file) selects its runs
