"""A `fedbench run` killed mid-run (SIGKILL, no chance to clean up) resumes from its last checkpoint
when run again, and finishes with exactly the curve of an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from typer.testing import CliRunner

from fedbench.cli import app
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
    process = subprocess.Popen([sys.executable, "-m", "fedbench.cli", "run", str(recipe), "--registry", killed],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
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
    assert interrupted.status == "running" and 3 <= interrupted.rounds_done < 12   # the dead worker's claim

    result = CliRunner().invoke(app, ["run", str(recipe), "--registry", killed])
    assert result.exit_code == 0, result.output
    (resumed,) = Registry(killed).runs()
    assert resumed.provenance["data"]["resumed_from"] >= 3   # it did not start over

    straight = f"sqlite:///{tmp_path / 'straight.db'}"
    assert CliRunner().invoke(app, ["run", str(recipe), "--registry", straight]).exit_code == 0
    assert curve(killed) == curve(straight)
    runs = json.loads(CliRunner().invoke(app, ["runs", "--registry", killed, "--json"]).stdout)
    assert runs[0]["summary"] == json.loads(CliRunner().invoke(app, ["runs", "--registry", straight, "--json"]).stdout)[0]["summary"]
