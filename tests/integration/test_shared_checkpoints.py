"""`--checkpoints FOLDER`: checkpoints on storage every worker sees. A worker on "machine A" (its own working
directory, where a PostgreSQL registry would keep checkpoints by default) is killed mid-run; a worker on
"machine B" (another working directory) with the same shared folder resumes the run from its last round and
finishes with the curve of an uninterrupted run, on SQLite and PostgreSQL."""

from __future__ import annotations

import signal

import pytest
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.registry import Registry
from tests.integration.test_kill_resume import RECIPE, HeldFedbench

runner = CliRunner()


def curve(url: str) -> list[tuple]:
    registry = Registry(url)
    (run,) = registry.runs()
    assert run.status == "done"
    return [(r.round, r.test_acc, r.test_loss, r.train_loss) for r in registry.curve(run.id)]


@pytest.mark.slow
def test_a_run_killed_on_one_machine_resumes_on_another_from_the_shared_checkpoints(
    tmp_path, any_registry_url, monkeypatch
):
    recipe = tmp_path / "kill.toml"
    recipe.write_text(RECIPE)
    shared = tmp_path / "shared-checkpoints"
    machine_a, machine_b = tmp_path / "machine-a", tmp_path / "machine-b"
    machine_a.mkdir()
    machine_b.mkdir()

    monkeypatch.chdir(machine_a)
    child = HeldFedbench(["run", str(recipe), "--registry", any_registry_url, "--checkpoints", str(shared)], hold=3)
    try:
        child.wait_until_held(runs=1)
        child.process.send_signal(signal.SIGKILL)
        child.process.wait()
    finally:
        child.kill()
    (killed,) = Registry(any_registry_url).runs()
    assert killed.status == "running" and killed.rounds_done == 3
    assert (shared / f"{killed.spec_hash}.pt").exists()  # in the shared folder, not on machine A
    assert not list(machine_a.rglob("*.pt"))

    monkeypatch.chdir(machine_b)
    result = runner.invoke(
        app, ["run", str(recipe), "--registry", any_registry_url, "--checkpoints", f"file://{shared}"]
    )
    assert result.exit_code == 0, result.output
    (resumed,) = Registry(any_registry_url).runs()
    assert resumed.provenance["data"]["resumed_from"] == 3  # from machine A's last round, not from scratch
    assert not (shared / f"{killed.spec_hash}.pt").exists()  # a finished run's checkpoint is removed

    straight = f"sqlite:///{tmp_path / 'straight.db'}"
    assert runner.invoke(app, ["run", str(recipe), "--registry", straight]).exit_code == 0
    assert curve(any_registry_url) == curve(straight)


@pytest.mark.slow
def test_a_cluster_worker_takes_over_the_run_of_a_worker_that_died_while_it_waited(tmp_path, monkeypatch):
    """A cluster worker that found the run held by a live worker waits (it does not leave the run to the next
    `fedbench run`); once that worker is killed, it claims the run and resumes it from the shared checkpoint."""
    import threading

    from fedbench.execution import cluster, worker
    from fedbench.execution.options import ExecutionOptions
    from fedbench.recipes.expand import expand
    from fedbench.recipes.load import load_recipe

    recipe = tmp_path / "kill.toml"
    recipe.write_text(RECIPE)
    url, shared = f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "shared"
    child = HeldFedbench(["run", str(recipe), "--registry", url, "--checkpoints", str(shared)], hold=3)
    try:
        child.wait_until_held(runs=1)
        monkeypatch.setattr(cluster, "REPASS_SECONDS", 0.2)
        monkeypatch.setattr(cluster, "WAIT_STEP_SECONDS", 0.05)
        first_pass, original = threading.Event(), worker.work_through

        def work_through(*args, **kwargs):
            original(*args, **kwargs)
            first_pass.set()  # it has tried (and failed) to claim the held run

        monkeypatch.setattr(cluster, "work_through", work_through)  # the name cluster_worker calls
        options = ExecutionOptions(registry_url=url, checkpoints=str(shared))
        planned = expand(load_recipe(recipe))
        outcome: list[str] = []
        worker = threading.Thread(target=lambda: outcome.append(cluster.cluster_worker(planned, options, False)))
        worker.start()
        assert first_pass.wait(timeout=300)
        assert Registry(url).runs()[0].worker.endswith(f":{child.process.pid}")  # still the held worker's
        child.process.send_signal(signal.SIGKILL)
        child.process.wait()
        worker.join(timeout=300)
    finally:
        child.kill()
    assert outcome and outcome[0].endswith("done")
    (run,) = Registry(url).runs()
    assert run.status == "done" and run.provenance["data"]["resumed_from"] == 3
