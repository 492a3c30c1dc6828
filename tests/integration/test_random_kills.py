"""SIGKILL at 20 random points of one run: every restart resumes from what the kill left (registry rows and the
last checkpoint), and the run finishes with exactly the curve of an uninterrupted run.

Kill points are counted in events of the run (a round logged, a checkpoint written: ``tests/fedbench_killed.py``),
drawn from a seeded generator, each with a random extra delay during which the run goes on, so kills also land
inside registry commits and checkpoint writes. Each killed run is a fork of the test process (torch already imported: a fresh interpreter per kill would cost
more than the run itself); the test waits for it to end, never for a length of time."""

from __future__ import annotations

import os
import random
import signal

import fedbench_killed
import pytest
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.registry import Registry

RECIPE = """
paper = "killtest"
name = "randomkill"
seeds = [0]

[setup]
algorithm = "scaffold"
dataset = "digits"
model = "digits_mlp"
model_params = { hidden = 16 }
partition = "dirichlet"
partition_params = { alpha = 0.5, min_size = 5 }
num_clients = 6
clients_per_round = 3
rounds = 24
batch_size = 32
optimizer = { lr = 0.05, momentum = 0.9 }
"""
KILLS = 20
EVENTS_PER_ROUND = 4  # round logging and checkpoint writing, each announced before and after


def curve(url: str) -> list[tuple]:
    registry = Registry(url)
    (run,) = registry.runs()
    assert run.status == "done", (run.status, run.error)
    return [(r.round, r.test_acc, r.test_loss, r.train_loss) for r in registry.curve(run.id)]


def run_killed(args: list[str], kill_at: int, delay: float) -> int:
    """``fedbench ARGS`` in a forked child that SIGKILLs itself at event ``kill_at`` (+ ``delay`` s); the child's
    exit status as ``subprocess`` gives it (-9: killed)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 70
        try:
            fedbench_killed._install(kill_at, delay)
            code = CliRunner().invoke(app, args).exit_code
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


@pytest.mark.slow
def test_twenty_random_sigkills_resume_to_the_uninterrupted_curve(tmp_path):
    """20 kills in all. How far a run gets between kills depends on how fast the machine trains during a kill's
    delay, so a run may finish before the 20th kill: the kills then go on in a fresh run (another registry), and
    every run, however many kills it took, must end with the uninterrupted curve."""
    recipe = tmp_path / "kill.toml"
    recipe.write_text(RECIPE)
    straight = f"sqlite:///{tmp_path / 'straight.db'}"
    assert CliRunner().invoke(app, ["run", str(recipe), "--registry", straight]).exit_code == 0

    rng = random.Random(16)
    survived, progress, runs = 0, [], 0
    while survived < KILLS:
        url = f"sqlite:///{tmp_path / f'killed-{runs}.db'}"
        runs += 1
        while survived < KILLS:
            kill_at = rng.randint(1, 2 * EVENTS_PER_ROUND)
            delay = rng.choice([0.0, rng.uniform(0.0, 0.05)])
            returncode = run_killed(["run", str(recipe), "--registry", url], kill_at, delay)
            if returncode == 0:  # the run finished before the kill: nothing left to kill in it
                break
            assert returncode == -signal.SIGKILL, returncode
            survived += 1
            (run,) = Registry(url).runs()
            progress.append(run.rounds_done)
        result = CliRunner().invoke(app, ["run", str(recipe), "--registry", url])
        assert result.exit_code == 0, result.output
        assert curve(url) == curve(straight), f"run {runs} (rounds done after each kill so far: {progress})"
    assert survived == KILLS
    assert max(progress) > 0  # the kills interrupted runs that were progressing, not only their start
