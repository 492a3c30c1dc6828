"""`fedbench run` (fedbench/cli/run.py) through the command line: run, re-run, force and the report of what ran, bad
input (one line, exit 2, no registry), a dry run, workers sharing the work, and a claim held by another worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedbench.cli import app

runner = CliRunner()


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def db_path(url: str) -> Path:
    return Path(url.removeprefix("sqlite:///"))


def test_run_rerun_force_and_report(write_recipe, registry_url):
    recipe = write_recipe()
    first = invoke("run", recipe, "--scale", "smoke", "--registry", registry_url)
    assert first.exit_code == 0, first.output
    assert "2 done" in first.output

    again = invoke("run", recipe, "--scale", "smoke", "--registry", registry_url)
    assert again.exit_code == 0
    assert "2 of 2 runs already done" in again.output

    forced = invoke(
        "run", recipe, "--scale", "smoke", "--registry", registry_url, "--force", "--only", "algorithm=fedavg"
    )
    assert forced.exit_code == 0 and "re-running 1" in forced.output

    listed = invoke("runs", "--registry", registry_url, "--json")
    runs = json.loads(listed.stdout)
    assert len(runs) == 2 and {r["status"] for r in runs} == {"done"}
    assert all(r["provenance"]["torch"] and r["provenance"]["python"] for r in runs)
    assert all(r["summary"]["best"] is not None for r in runs)

    shown = invoke("show", runs[0]["spec_hash"][:8], "--registry", registry_url, "--json")
    detail = json.loads(shown.stdout)
    assert [p["round"] for p in detail["curve"]] == [1, 2]
    assert detail["spec"]["rounds"] == 2 and detail["labels"] == runs[0]["labels"]
    assert detail["provenance"]["data"]["partition_fingerprint"]

    report = invoke("report", "--recipe", recipe, "--scale", "smoke", "--registry", registry_url, "--format", "json")
    assert report.exit_code == 0, report.output
    cells = {c["row"]: c for c in json.loads(report.stdout)["tables"][0]["cells"]}
    fedavg = cells["fedavg"]
    assert fedavg["n"] == 1 and fedavg["published"] == 50.0
    best = max(p["test_acc"] for p in detail["curve"]) * 100 if detail["labels"]["algorithm"] == "fedavg" else None
    if best is not None:
        assert fedavg["mean"] == pytest.approx(best)
    assert fedavg["difference"] == pytest.approx(fedavg["mean"] - 50.0)

    for fmt in ("rich", "markdown", "latex", "csv", "html"):
        out = invoke("report", "--recipe", recipe, "--scale", "smoke", "--registry", registry_url, "--format", fmt)
        assert out.exit_code == 0 and "fedavg" in out.output, fmt
    markdown = invoke(
        "report", "--recipe", recipe, "--scale", "smoke", "--registry", registry_url, "--format", "markdown"
    )
    assert "paper 50.00" in markdown.output and "scale 'smoke'" in markdown.output


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda t: t.replace("rounds = 3", "roundz = 3"), "unknown setup key 'roundz'"),
        (lambda t: t.replace("rounds = 3", 'rounds = "x"'), "rounds"),
        (lambda t: t.replace('"fedprox"]', '"fedprox", "fedavgg"]'), "did you mean fedavg"),
        (lambda t: t.replace("alpha = 0.5", "alpha = -1"), "alpha must be > 0"),
        (lambda t: t.replace("targets = [50]", 'targets = ["high"]'), "targets = ['high']: expected a list"),
    ],
)
def test_bad_recipe_exits_2_with_one_line_and_no_registry(write_recipe, registry_url, edit, message):
    from conftest import TINY_RECIPE

    recipe = write_recipe(edit(TINY_RECIPE))
    result = invoke("run", recipe, "--registry", registry_url)
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not db_path(registry_url).exists()


def test_cli_user_errors(registry_url, write_recipe):
    assert invoke("run", "missing.toml", "--registry", registry_url).exit_code == 2
    bad_set = invoke("run", write_recipe(), "--set", "roundz=3", "--registry", registry_url)
    assert bad_set.exit_code == 2 and "roundz" in bad_set.stderr
    assert invoke("report", "--registry", registry_url).exit_code == 2
    assert invoke("report", "--paper", "nope", "--registry", registry_url).exit_code == 2
    assert invoke("show", "999", "--registry", registry_url).exit_code == 2
    assert invoke("run", write_recipe(), "--scale", "huge", "--registry", registry_url).exit_code == 2
    assert invoke("run", write_recipe(), "--registry", "notaurl").exit_code == 2
    assert not db_path(registry_url).exists()


def test_dry_run_lists_runs_without_training(write_recipe, registry_url):
    result = invoke("run", write_recipe(), "--dry-run", "--registry", registry_url)
    assert result.exit_code == 0 and result.output.count("new") == 4
    assert not db_path(registry_url).exists()


def test_a_narrow_dry_run_wraps_a_line_per_run_and_keeps_labels_whole(write_recipe, registry_url, monkeypatch):
    from fedbench.cli import common

    monkeypatch.setattr(common.console, "_width", 40)
    result = invoke("run", write_recipe(), "--dry-run", "--registry", registry_url)
    assert result.exit_code == 0 and "…" not in result.output
    assert max(len(line) for line in result.output.splitlines()) <= 40
    words = result.output.split()
    assert words.count("algorithm=fedavg") == 2 and words.count("algorithm=fedprox") == 2  # whole, wrapped around


@pytest.mark.slow
def test_parallel_workers_share_the_work_without_duplicates(write_recipe, registry_url):
    result = invoke("run", write_recipe(), "--jobs", "2", "--set", "rounds=2", "--registry", registry_url)
    assert result.exit_code == 0, result.output
    runs = json.loads(invoke("runs", "--registry", registry_url, "--json").stdout)
    assert len(runs) == 4 and {r["status"] for r in runs} == {"done"}
    workers = {r["spec_hash"]: r for r in runs}
    assert len(workers) == 4


@pytest.mark.slow
def test_two_concurrent_cli_processes_never_duplicate_a_run(write_recipe, registry_url, tmp_path):
    recipe = write_recipe()
    command = [
        sys.executable,
        "-m",
        "fedbench.cli",
        "run",
        str(recipe),
        "--set",
        "rounds=2",
        "--registry",
        registry_url,
    ]
    env = {"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    if "PYTHONPATH" in os.environ:  # the fedbench under test, where it is not the installed one (a git worktree)
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    procs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    from fedbench.registry import Registry

    registry = Registry(registry_url)
    rows = registry.runs()
    assert len(rows) == 4 and all(r.status == "done" for r in rows)
    for row in rows:  # each run trained once: one curve, rounds 1..2 exactly once
        assert [r.round for r in registry.curve(row.id)] == [1, 2]


def test_claim_is_exclusive(registry_url, write_recipe):
    from fedbench.recipes.expand import expand
    from fedbench.recipes.load import load_recipe
    from fedbench.registry import Registry

    planned = expand(load_recipe(write_recipe()))
    registry = Registry(registry_url)
    registry.ensure_runs([p.registry_entry() for p in planned])
    registry.ensure_runs([p.registry_entry() for p in planned])  # idempotent
    assert len(registry.runs()) == 4
    first = registry.claim(planned[0].spec_hash, worker="otherhost:1")
    assert first is not None
    assert registry.claim(planned[0].spec_hash, worker="thishost:2") is None  # held by a live worker elsewhere


@pytest.mark.slow
def test_curves_do_not_depend_on_the_number_of_workers(write_recipe, tmp_path):
    """Same spec, --jobs 1 vs --jobs 2: bit-identical curves (threads per run are fixed)."""
    from fedbench.registry import Registry

    recipe = write_recipe()
    curves = []
    for jobs in ("1", "2"):
        url = f"sqlite:///{tmp_path / f'jobs{jobs}.db'}"
        assert invoke("run", recipe, "--scale", "smoke", "--jobs", jobs, "--registry", url).exit_code == 0
        registry = Registry(url)
        curves.append(
            {
                r.spec_hash: [(x.round, x.test_acc, x.test_loss, x.train_loss) for x in registry.curve(r.id)]
                for r in registry.runs()
            }
        )
    assert curves[0] == curves[1] and len(curves[0]) == 2


def test_running_a_recipe_of_analytic_tables_only_says_so(registry_url):
    recipe = Path(__file__).resolve().parents[2] / "recipes" / "fedtrip_costs.toml"
    result = runner.invoke(app, ["run", str(recipe), "--registry", registry_url])
    assert result.exit_code == 0, result.output
    assert "nothing to train" in result.output and "fedbench report --recipe" in result.output


@pytest.mark.slow
def test_log_to_copies_each_run_into_the_tracker_as_it_finishes(write_recipe, registry_url, tmp_path):
    pytest.importorskip("tensorboard")  # the extra fedbench-repro[tensorboard] (in dev)
    logdir = tmp_path / "tb"
    trained = invoke(
        "run", write_recipe(), "--scale", "smoke", "--log-to", f"tensorboard:{logdir}", "--registry", registry_url
    )
    assert trained.exit_code == 0, trained.output
    assert len(list(logdir.rglob("fedbench-run.json"))) == 2  # both runs, copied while the batch trained
    # the copies are what `export --to` writes of the finished runs: exporting afterwards finds nothing to change
    exported = invoke("export", "--to", f"tensorboard:{logdir}", "--registry", registry_url)
    assert exported.exit_code == 0, exported.output
    assert "0 new, 0 updated, 2 unchanged" in exported.stderr


def test_a_log_to_that_cannot_be_written_is_refused_before_anything_is_registered(write_recipe, registry_url, tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("")
    result = invoke("run", write_recipe(), "--log-to", f"tensorboard:{blocked / 'tb'}", "--registry", registry_url)
    assert result.exit_code == 2 and "cannot write there" in result.stderr, result.output
    assert invoke("run", write_recipe(), "--log-to", "wandb", "--registry", registry_url).exit_code == 2
    assert not db_path(registry_url).exists()


def progress_of(monkeypatch, write_recipe, events) -> str:
    """What `fedbench run`'s progress shows for a batch of the tiny recipe's first run whose launcher reports
    ``events`` (as a cluster's registry watcher does)."""
    from types import SimpleNamespace

    from rich.console import Console

    from fedbench.cli import run as run_command
    from fedbench.recipes.expand import expand
    from fedbench.recipes.load import load_recipe

    planned = expand(load_recipe(write_recipe()))[:1]
    shown = Console(file=__import__("io").StringIO(), width=160, force_terminal=False)
    monkeypatch.setattr(run_command, "console", shown)

    def train(on_event):
        for event in events(planned[0].spec_hash):
            on_event(event)

    run_command.train_with_progress(SimpleNamespace(todo=planned, train=train))
    return shown.file.getvalue()


def test_progress_counts_a_run_taken_over_once_and_leaves_an_interrupted_run_s_rounds_untrained(
    monkeypatch, write_recipe
):
    from fedbench.execution.events import RoundDone, RunEnded, RunStarted

    def taken_over(key):
        yield RunStarted(key, 3)
        yield RoundDone(key, 1, 0.5, 0.1)
        yield RunEnded(key, "interrupted", error="stopped by SIGTERM; re-run to resume")
        yield RunStarted(key, 3)
        yield RoundDone(key, 3, 0.6, 0.1)
        yield RunEnded(key, "done", final=0.6)

    shown = progress_of(monkeypatch, write_recipe, taken_over)
    assert "1/1 runs" in shown and "2/1 runs" not in shown, shown
    assert "stopped by SIGTERM" in shown and "by the user" not in shown

    def interrupted(key):
        yield RunStarted(key, 3)
        yield RoundDone(key, 1, 0.5, 0.1)
        yield RunEnded(key, "interrupted", error="stopped by Slurm's warning before its job's time limit (SIGUSR2)")

    shown = progress_of(monkeypatch, write_recipe, interrupted)
    assert "1/3" in shown and "3/3" not in shown, shown  # the bar counts the rounds trained, not the run's all


def test_a_batch_left_interrupted_exits_3(monkeypatch, write_recipe, registry_url):
    from fedbench.execution import batch as batch_module

    def interrupt_all(self, on_event):
        for p in self.todo:
            run_id = self.store.claim(p.spec_hash, worker="node7:11")
            self.store.finish(run_id, "interrupted", error="stopped by SIGTERM; re-run to resume", worker="node7:11")

    monkeypatch.setattr(batch_module.Batch, "train", interrupt_all)
    result = invoke("run", write_recipe(), "--scale", "smoke", "--registry", registry_url)
    assert result.exit_code == 3, result.output
    assert "2 run(s) not finished: re-run the same command to resume them" in result.output


def test_a_run_left_running_by_a_dead_worker_makes_the_batch_unfinished_and_a_live_ones_does_not(
    monkeypatch, write_recipe, registry_url
):
    """A worker killed outright (``kill -9`` of a Slurm job's process) records nothing: its run stays ``running``
    under a gone pid, and nobody trains it, so the batch exits 3; a run another live batch trains exits 0."""
    import socket
    import subprocess
    import sys

    from fedbench.execution import batch as batch_module

    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = f"{socket.gethostname()}:{ended.stdout.strip()}"  # a process of this host that has exited

    def claim_as(holders):
        def train(self, on_event):
            for p, holder in zip(self.todo, holders):
                self.store.claim(p.spec_hash, worker=holder)

        return train

    monkeypatch.setattr(batch_module.Batch, "train", claim_as([gone, "node7:11"]))  # node7: beating (just claimed)
    result = invoke("run", write_recipe(), "--scale", "smoke", "--registry", registry_url)
    assert result.exit_code == 3, result.output
    assert "1 run(s) not finished: re-run the same command to resume them" in result.output
    other = registry_url.replace("fedbench.db", "other.db")
    monkeypatch.setattr(batch_module.Batch, "train", claim_as(["node7:11", "node8:12"]))
    result = invoke("run", write_recipe(), "--scale", "smoke", "--registry", other)
    assert result.exit_code == 0 and "not finished" not in result.output, result.output
