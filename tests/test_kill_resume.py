"""A `fedbench run` killed mid-run (SIGKILL, no chance to clean up) resumes from its last checkpoint
when run again, and finishes with exactly the curve of an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.errors import RegistryError
from fedbench.registry import Registry

RECIPE = """
paper = "killtest"
name = "kill"
seeds = [0]

[setup]
algorithm = "fedprox"
algorithm_params = { mu = 0.1 }
dataset = "digits"
model = "digits_cnn"
partition = "dirichlet"
partition_params = { alpha = 0.5, min_size = 5 }
num_clients = 4
clients_per_round = 4
rounds = 12
batch_size = 16
optimizer = { lr = 0.05, momentum = 0.9 }
"""


def curve(registry_url: str) -> list[tuple[int, float, float]]:
    registry = Registry(registry_url)
    (run,) = registry.runs()
    assert run.status == "done"
    return [(r.round, r.test_acc, r.train_loss) for r in registry.curve(run.id)]


def test_sigkill_then_rerun_resumes_with_identical_curve(tmp_path):
    recipe = tmp_path / "kill.toml"
    recipe.write_text(RECIPE)
    killed = f"sqlite:///{tmp_path / 'killed.db'}"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "fedbench.cli", "run", str(recipe), "--registry", killed],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    registry = None
    deadline = time.time() + 120
    while time.time() < deadline:
        time.sleep(0.2)
        if registry is None and (tmp_path / "killed.db").exists():
            registry = Registry(killed)
        runs = registry.runs() if registry else []
        if runs and runs[0].rounds_done >= 3:
            break
    process.send_signal(signal.SIGKILL)
    process.wait()
    (interrupted,) = Registry(killed).runs()
    assert interrupted.status == "running" and 3 <= interrupted.rounds_done < 12  # the dead worker's claim

    result = CliRunner().invoke(app, ["run", str(recipe), "--registry", killed])
    assert result.exit_code == 0, result.output
    (resumed,) = Registry(killed).runs()
    assert resumed.provenance["data"]["resumed_from"] >= 3  # it did not start over

    straight = f"sqlite:///{tmp_path / 'straight.db'}"
    assert CliRunner().invoke(app, ["run", str(recipe), "--registry", straight]).exit_code == 0
    assert curve(killed) == curve(straight)
    runs = json.loads(CliRunner().invoke(app, ["runs", "--registry", killed, "--json"]).stdout)
    assert (
        runs[0]["summary"]
        == json.loads(CliRunner().invoke(app, ["runs", "--registry", straight, "--json"]).stdout)[0]["summary"]
    )


def _wait_for(predicate, seconds: float = 120):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return False


def test_sigterm_to_a_multi_worker_run_stops_its_workers_and_rerun_resumes(tmp_path):
    """`kill PID` on `fedbench run --jobs 2`: the workers stop too (no orphan keeps training), their runs
    are recorded as interrupted with their checkpoints, and the next run resumes and finishes them."""
    recipe = tmp_path / "kill.toml"
    recipe.write_text(RECIPE.replace("seeds = [0]", "seeds = [0, 1]").replace("rounds = 12", "rounds = 40"))
    url = f"sqlite:///{tmp_path / 'term.db'}"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "fedbench.cli", "run", str(recipe), "--jobs", "2", "--registry", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
    )

    def both_training():
        if not (tmp_path / "term.db").exists():
            return False
        runs = Registry(url).runs()
        return len(runs) == 2 and all(r.rounds_done >= 2 for r in runs)

    assert _wait_for(both_training)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    runs = Registry(url).runs()
    assert {r.status for r in runs} == {"interrupted"}, [(r.status, r.error) for r in runs]
    stopped_at = [r.rounds_done for r in runs]
    time.sleep(3)  # an orphaned worker would still be logging rounds
    assert [r.rounds_done for r in Registry(url).runs()] == stopped_at
    assert all(r.rounds_done < 40 for r in runs)

    result = CliRunner().invoke(app, ["run", str(recipe), "--registry", url])
    assert result.exit_code == 0, result.output
    assert {r.status for r in Registry(url).runs()} == {"done"}
    assert all(r.provenance["data"]["resumed_from"] >= 1 for r in Registry(url).runs())


def test_a_worker_whose_parent_was_killed_stops(tmp_path):
    """SIGKILL leaves the parent no chance to stop its workers: they notice they are orphaned and stop."""
    recipe = tmp_path / "kill.toml"
    recipe.write_text(RECIPE.replace("seeds = [0]", "seeds = [0, 1]").replace("rounds = 12", "rounds = 40"))
    url = f"sqlite:///{tmp_path / 'orphan.db'}"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "fedbench.cli", "run", str(recipe), "--jobs", "2", "--registry", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    assert _wait_for(
        lambda: (
            (tmp_path / "orphan.db").exists()
            and len(Registry(url).runs()) == 2
            and all(r.rounds_done >= 2 for r in Registry(url).runs())
        )
    )
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert _wait_for(lambda: {r.status for r in Registry(url).runs()} == {"interrupted"}, seconds=30)


def test_a_registry_deleted_while_open_elsewhere_gets_a_clear_error(tmp_path):
    """Deleting a registry file that another process still holds leaves its -wal/-shm behind, and
    SQLite only says "disk I/O error" for a new registry there: the error names the files and the cause."""
    database = tmp_path / "fedbench.db"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1]); c.execute('pragma journal_mode=wal'); "
                "c.execute('create table t(a)'); c.execute('insert into t values (1)'); c.commit(); "
                "print('ready', flush=True); time.sleep(60)"
            ),
            str(database),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        database.unlink()
        with pytest.raises(RegistryError, match=r"-wal and .*-shm belong to a registry file that was deleted"):
            Registry(f"sqlite:///{database}")
    finally:
        holder.kill()
        holder.wait()
