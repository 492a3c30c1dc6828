"""``fedbench export`` and ``fedbench import`` (``fedbench/cli/transfer.py``): the export's count of runs, where it
writes (stdout or ``--out``), a recipe selected by file or name, and the command's one-line errors; the import's
counts line and its conflicts (exit 1, the registry's result kept). The runs file itself is
tests/registry/test_registry_transfer.py's; moving runs between registries, tests/integration/test_export_import.py's."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from cli_fixtures import assert_user_error
from fedbench.cli import app
from fedbench.recipes.resolve import resolve_spec
from fedbench.registry import Registry

runner = CliRunner()


def add_finished(url: str, seed: int, recipe: str = "tiny", accuracy: float = 0.5) -> str:
    """A finished run of the digits MLP with ``seed``, registered by ``recipe``; its spec hash."""
    from fedbench.engine.loop import RoundRecord

    spec = resolve_spec(dict(algorithm="fedavg", dataset="digits", model="digits_mlp", seed=seed))
    registry = Registry(url)
    registry.ensure_runs(
        [
            {
                "spec_hash": spec.spec_hash,
                "spec": spec.model_dump(mode="json"),
                "labels": {"seed": str(seed)},
                "paper": "testpaper",
                "recipe": recipe,
                "algorithm": spec.algorithm,
                "dataset": spec.dataset,
                "seed": seed,
                "scale": spec.scale,
                "synthetic": spec.synthetic,
                "targets": [],
            }
        ]
    )
    run_id = registry.claim(spec.spec_hash, "host:1")
    registry.log_round(
        run_id, RoundRecord(round=1, train_loss=1.0, wall_seconds=1.0, bytes_up=0, bytes_down=0, test_acc=accuracy)
    )
    registry.finish(run_id, "done", summary={"best_acc": accuracy})
    return spec.spec_hash


def test_export_counts_the_runs_not_the_header_and_writes_stdout_or_a_file(registry_url, tmp_path):
    hashes = [add_finished(registry_url, 0), add_finished(registry_url, 1, recipe="other")]
    result = runner.invoke(app, ["export", "--registry", registry_url])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["format"] == "fedbench-runs"
    assert sorted(json.loads(line)["spec_hash"] for line in lines[1:]) == sorted(hashes)
    assert result.stderr.strip() == "exported 2 finished run(s)"
    out = tmp_path / "runs.jsonl"
    written = runner.invoke(app, ["export", "--recipe", "other", "--out", str(out), "--registry", registry_url])
    assert written.exit_code == 0 and written.stdout == ""
    assert written.stderr.strip() == "exported 1 finished run(s)"
    assert [json.loads(line)["spec_hash"] for line in out.read_text().splitlines()[1:]] == [hashes[1]]


def test_a_recipe_file_selects_its_runs_by_the_recipes_name(registry_url, write_recipe):
    add_finished(registry_url, 0, recipe="tiny")
    add_finished(registry_url, 1, recipe="other")
    result = runner.invoke(app, ["export", "--recipe", str(write_recipe()), "--registry", registry_url])
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == "exported 1 finished run(s)"


def test_export_errors_are_one_line(tmp_path, registry_url):
    missing = f"sqlite:///{tmp_path / 'none.db'}"
    assert_user_error(runner.invoke(app, ["export", "--registry", missing]), "no registry at", "nothing to export")
    add_finished(registry_url, 0)
    target = tmp_path / "no_such_folder" / "runs.jsonl"
    result = runner.invoke(app, ["export", "--out", str(target), "--registry", registry_url])
    assert_user_error(result, f"--out {target}: cannot write")


def test_export_to_a_tracker_is_checked_before_the_registry_is_read(tmp_path, registry_url):
    missing = f"sqlite:///{tmp_path / 'none.db'}"  # no registry: the --to mistake is the one reported
    both = runner.invoke(app, ["export", "--to", "tensorboard:tb", "--out", "x.jsonl", "--registry", missing])
    assert_user_error(both, "--out and --to: give one")
    assert_user_error(runner.invoke(app, ["export", "--to", "wandb", "--registry", missing]), "--to wandb", "mlflow")
    nothing = runner.invoke(app, ["export", "--to", f"tensorboard:{tmp_path / 'tb'}", "--registry", missing])
    assert_user_error(nothing, "no registry at", "nothing to export")


def test_export_to_a_tracker_counts_its_runs_and_notes_a_selection_that_names_none(tmp_path, registry_url):
    pytest.importorskip("tensorboard")  # the extra fedbench-repro[tensorboard] (in dev)
    add_finished(registry_url, 0)
    result = runner.invoke(app, ["export", "--to", f"tensorboard:{tmp_path / 'tb'}", "--registry", registry_url])
    assert result.exit_code == 0, result.output
    assert (
        result.stderr.strip()
        == f"exported 1 finished run(s) to tensorboard {tmp_path / 'tb'}: 1 new, 0 updated, 0 unchanged"
    )
    args = ["export", "--recipe", "tinny", "--to", f"tensorboard:{tmp_path / 'tb'}", "--registry", registry_url]
    misspelt = runner.invoke(app, args)
    assert misspelt.exit_code == 0, misspelt.output
    assert "exported 0 finished run(s)" in misspelt.stderr and "no run of recipe 'tinny'" in misspelt.stderr


def test_import_reports_its_counts_and_a_conflict_exits_1_keeping_the_registrys_result(registry_url, tmp_path):
    source = f"sqlite:///{tmp_path / 'source.db'}"
    add_finished(source, 0)
    add_finished(source, 1, accuracy=0.75)
    runs = tmp_path / "runs.jsonl"
    assert runner.invoke(app, ["export", "--out", str(runs), "--registry", source]).exit_code == 0
    first = runner.invoke(app, ["import", str(runs), "--registry", registry_url])
    assert first.exit_code == 0, first.output
    assert first.stdout.strip() == "imported 2 new run(s), completed 0, 0 already there, 0 conflict(s)"
    theirs = f"sqlite:///{tmp_path / 'theirs.db'}"
    conflicting = add_finished(theirs, 1, accuracy=0.25)  # the same spec with another result
    numbers = {json.loads(text)["spec_hash"]: n for n, text in enumerate(runs.read_text().splitlines(), 1) if n > 1}
    mine = Registry(theirs)
    result = runner.invoke(app, ["import", str(runs), "--registry", theirs])
    assert result.exit_code == 1
    assert result.stdout.strip() == "imported 1 new run(s), completed 0, 0 already there, 1 conflict(s)"
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"conflict {runs} line {numbers[conflicting]}: run {conflicting}: ") and line.endswith(
        "(kept the registry's result)"
    )
    (run,) = [r for r in mine.runs() if r.seed == 1]
    assert run.summary == {"best_acc": 0.25}
