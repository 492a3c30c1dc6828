"""A `fedbench run` killed mid-run (SIGKILL, no chance to clean up) resumes from its last checkpoint
when run again, and finishes with exactly the curve of an uninterrupted run; SIGTERM stops it and its workers.

The runs hold at a known round (``tests/fedbench_held.py``) before they are signalled: the tests wait for
that, never for a length of time, so they do not depend on the machine's speed or load."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fedbench_held import MARKER
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


# Deadlines for things that take a few seconds on an idle machine: generous, so that only a hang fails them.
DEADLINE = 300
HELD = Path(__file__).resolve().parents[1] / "fedbench_held.py"


def curve(registry_url: str) -> list[tuple[int, float, float]]:
    registry = Registry(registry_url)
    (run,) = registry.runs()
    assert run.status == "done"
    return [(r.round, r.test_acc, r.train_loss) for r in registry.curve(run.id)]


class HeldFedbench:
    """`fedbench ARGS` in a subprocess whose runs hold after round ``hold`` (``tests/fedbench_held.py``); its
    stderr, shared by the parent and its workers, is read by a thread, so the test can wait for the hold
    markers and for the end of the stream (every process holding it, workers included, has exited)."""

    def __init__(self, args: list[str], hold: int):
        env = {**os.environ, "OMP_NUM_THREADS": "1", "FEDBENCH_TEST_HOLD_AFTER": str(hold)}
        self.process = subprocess.Popen(
            [sys.executable, str(HELD), *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        self.output: list[str] = []
        self.held_pids: list[int] = []
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stderr:
            self.output.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def _next_line(self, deadline: float, waiting_for: str) -> str | None:
        try:
            return self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no {waiting_for} within {DEADLINE} s; stderr so far:\n{self.stderr}") from None

    def wait_until_held(self, runs: int) -> list[str]:
        """Block until ``runs`` runs hold; returns their markers."""
        deadline, held = time.monotonic() + DEADLINE, []
        while len(held) < runs:
            line = self._next_line(deadline, f"hold of {runs} runs")
            assert line is not None, (
                f"fedbench ended (exit {self.process.wait()}) before {runs} runs held:\n{self.stderr}"
            )
            if line.startswith(MARKER):
                held.append(line.strip())
                self.held_pids.append(int(line.split("pid=")[1]))
        return held

    def wait_until_all_exited(self) -> None:
        """Block until the stream ends: the parent and every worker it started have exited."""
        deadline = time.monotonic() + DEADLINE
        while self._next_line(deadline, "exit of every fedbench process") is not None:
            pass
        self._reader.join()

    @property
    def stderr(self) -> str:
        return "".join(self.output)

    def kill(self) -> None:
        """Kill what is left: the parent and any held worker (after a failure)."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for pid in self.held_pids:
            try:  # still one of ours (not a recycled pid): it has the hold variable in its environment
                if b"FEDBENCH_TEST_HOLD_AFTER=" in Path(f"/proc/{pid}/environ").read_bytes():
                    os.kill(pid, signal.SIGKILL)
            except OSError:  # gone already, or no /proc
                pass


@pytest.fixture
def held_fedbench():
    started: list[HeldFedbench] = []

    def start(args: list[str], hold: int) -> HeldFedbench:
        started.append(HeldFedbench(args, hold))
        return started[-1]

    yield start
    for child in started:  # a failed test leaves no process behind
        child.kill()


@pytest.mark.slow
def test_sigkill_then_rerun_resumes_with_identical_curve(tmp_path, held_fedbench):
    recipe = tmp_path / "kill.toml"
    recipe.write_text(RECIPE)
    killed = f"sqlite:///{tmp_path / 'killed.db'}"
    child = held_fedbench(["run", str(recipe), "--registry", killed], hold=3)
    child.wait_until_held(runs=1)
    child.process.send_signal(signal.SIGKILL)
    child.process.wait()
    (interrupted,) = Registry(killed).runs()
    assert interrupted.status == "running" and interrupted.rounds_done == 3  # the dead worker's claim

    result = CliRunner().invoke(app, ["run", str(recipe), "--registry", killed])
    assert result.exit_code == 0, result.output
    (resumed,) = Registry(killed).runs()
    assert resumed.provenance["data"]["resumed_from"] == 3  # it did not start over

    straight = f"sqlite:///{tmp_path / 'straight.db'}"
    assert CliRunner().invoke(app, ["run", str(recipe), "--registry", straight]).exit_code == 0
    assert curve(killed) == curve(straight)
    runs = json.loads(CliRunner().invoke(app, ["runs", "--registry", killed, "--json"]).stdout)
    assert (
        runs[0]["summary"]
        == json.loads(CliRunner().invoke(app, ["runs", "--registry", straight, "--json"]).stdout)[0]["summary"]
    )


# Two seeds, two workers: each worker trains one run and holds after round 2 of 6.
TWO_RUNS = RECIPE.replace("seeds = [0]", "seeds = [0, 1]").replace("rounds = 12", "rounds = 6")


@pytest.mark.slow
def test_sigterm_to_a_multi_worker_run_stops_its_workers_and_rerun_resumes(tmp_path, held_fedbench):
    """`kill PID` on `fedbench run --jobs 2`: the workers stop at once too (no orphan keeps training), their runs
    are recorded as interrupted with their checkpoints, and the next run resumes and finishes them."""
    recipe = tmp_path / "kill.toml"
    recipe.write_text(TWO_RUNS)
    url = f"sqlite:///{tmp_path / 'term.db'}"
    child = held_fedbench(["run", str(recipe), "--jobs", "2", "--registry", url], hold=2)
    child.wait_until_held(runs=2)
    child.process.send_signal(signal.SIGTERM)
    assert child.process.wait(timeout=DEADLINE) == 130, child.stderr
    child.wait_until_all_exited()  # the parent waited for its workers: none outlives it
    runs = Registry(url).runs()
    assert [(r.status, r.rounds_done) for r in runs] == [("interrupted", 2)] * 2, [(r.status, r.error) for r in runs]

    result = CliRunner().invoke(app, ["run", str(recipe), "--registry", url])
    assert result.exit_code == 0, result.output
    assert {r.status for r in Registry(url).runs()} == {"done"}
    assert [r.provenance["data"]["resumed_from"] for r in Registry(url).runs()] == [2, 2]


@pytest.mark.slow
def test_a_worker_whose_parent_was_killed_stops(tmp_path, held_fedbench):
    """SIGKILL leaves the parent no chance to stop its workers: they notice they are orphaned, record their
    runs as interrupted and exit."""
    recipe = tmp_path / "kill.toml"
    recipe.write_text(TWO_RUNS)
    url = f"sqlite:///{tmp_path / 'orphan.db'}"
    child = held_fedbench(["run", str(recipe), "--jobs", "2", "--registry", url], hold=2)
    child.wait_until_held(runs=2)
    child.process.send_signal(signal.SIGKILL)
    child.process.wait()
    child.wait_until_all_exited()
    runs = Registry(url).runs()
    assert [(r.status, r.rounds_done) for r in runs] == [("interrupted", 2)] * 2, [(r.status, r.error) for r in runs]


def test_a_registry_deleted_while_open_elsewhere_gets_a_clear_error(tmp_path):
    """Deleting a registry file that another process still holds leaves its -wal/-shm behind, and
    SQLite only says "disk I/O error" for a new registry there: the error names the files and the cause."""
    database = tmp_path / "fedbench.db"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('pragma journal_mode=wal'); "
                "c.execute('create table t(a)'); c.execute('insert into t values (1)'); c.commit(); "
                "print('ready', flush=True); sys.stdin.read()"
            ),
            str(database),
        ],  # holds it until killed
        stdin=subprocess.PIPE,
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
