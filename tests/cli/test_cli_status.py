"""``fedbench status``: one line per recipe and scale, read from the registry alone; ``--watch`` follows a batch
that other processes train until it ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.cli.status import duration
from fedbench.engine.loop import RoundRecord
from fedbench.registry import Registry
from fedbench.vocab.status import RunStatus

runner = CliRunner()
RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "quickstart.toml"


def invoke(*args: object):
    return runner.invoke(app, [str(arg) for arg in args], env={"COLUMNS": "120"})


def test_no_registry_is_said_and_creates_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'none.db'}"
    result = invoke("status", "--registry", url)
    assert result.exit_code == 0 and "no registry" in result.output
    assert not (tmp_path / "none.db").exists()
    assert json.loads(invoke("status", "--json", "--registry", url).stdout) == []


def test_a_finished_recipe_shows_its_counts_and_nothing_left(write_recipe, registry_url):
    recipe = write_recipe()
    assert invoke("run", recipe, "--set", "rounds=2", "--registry", registry_url).exit_code == 0
    [line] = json.loads(invoke("status", "--json", "--registry", registry_url).stdout)
    done = Registry.open_existing(registry_url).runs()
    assert line["counts"] == {"done": len(done)} and line["rounds_left"] == 0 and line["seconds_left"] == 0
    assert line["recipe"] == done[0].recipe and line["scale"] == done[0].scale
    table = invoke("status", "--registry", registry_url).output
    header = next(line for line in table.splitlines() if "recipe" in line)
    assert "done" in header and "pending" not in header  # a column only for the statuses some run is in
    assert (
        invoke("status", "--recipe", "nothing-by-that-name", "--json", "--registry", registry_url).stdout.strip()
        == "[]"
    )


def test_runs_costed_at_other_cells_rounds_are_marked_and_counted(registry_url):
    """Cell A done after 2 rounds of 3 s; cell B (same dataset and model) pending with 4 rounds and none recorded:
    its time left is A's rate (12 s), marked rougher in the table and counted in --json."""
    store = Registry(registry_url)
    store.ensure_runs(
        [
            dict(
                spec_hash=f"{index:016x}",
                spec={"rounds": rounds, "model": "cnn"},
                labels={"case": case},
                paper="p",
                recipe="r",
                algorithm="fedavg",
                dataset="digits",
                seed=0,
                scale="full",
                synthetic=False,
                targets=[],
            )
            for index, case, rounds in ((0, "A", 2), (1, "B", 4))
        ]
    )
    run_id = store.claim(f"{0:016x}", worker="host:1")
    for number in (1, 2):
        record = RoundRecord(round=number, train_loss=1.0, wall_seconds=3.0, bytes_up=0, bytes_down=0)
        store.log_round(run_id, record, worker="host:1")
    store.finish(run_id, RunStatus.DONE, worker="host:1")
    [line] = json.loads(invoke("status", "--json", "--registry", registry_url).stdout)
    assert (line["seconds_left"], line["estimated_from_other_cells"], line["rounds_left"]) == (12.0, 1, 4)
    table = invoke("status", "--registry", registry_url).output
    assert "≈ 12 s*" in table and "1 waiting run costed at other cells' rounds" in table


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(None, "–"), (0, "0 s"), (42.4, "42 s"), (60 * 7 + 10, "7 min"), (3 * 3600 + 300, "3 h 05 min")],
)
def test_durations_read_as_a_person_says_them(seconds, shown):
    assert duration(seconds) == shown


@pytest.mark.slow
def test_watch_follows_a_two_worker_batch_until_it_ends(tmp_path):
    """A batch trained by ``run --jobs 2`` in another process; ``status --watch`` started once its runs are
    registered exits by itself when the last one finishes, its last table showing them all done."""
    url = f"sqlite:///{tmp_path / 'fedbench.db'}"
    env = {**os.environ, "COLUMNS": "120"}
    cli = [sys.executable, "-m", "fedbench.cli"]
    batch = subprocess.Popen(
        [*cli, "run", str(RECIPE), "--scale", "smoke", "--set", "rounds=4", "--jobs", "2", "--registry", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        # wait until the batch has registered its runs (or ended): --watch of an empty selection has nothing to follow
        while batch.poll() is None and not ((store := Registry.open_existing(url)) and store.runs()):
            subprocess.run([sys.executable, "-c", "import time; time.sleep(0.2)"], check=True)
        watch = subprocess.run(
            [*cli, "status", "--watch", "--interval", "0.2", "--registry", url],
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
    finally:
        batch_error = batch.communicate(timeout=600)[1]
    assert batch.returncode == 0, batch_error
    assert watch.returncode == 0, watch.stderr
    runs = Registry.open_existing(url).runs()
    assert len(runs) == 2 and {r.status for r in runs} == {"done"}
    last_header = [line for line in watch.stdout.splitlines() if "recipe" in line][-1]
    assert "quickstart" in watch.stdout and "done" in last_header and "┃ running" not in last_header
