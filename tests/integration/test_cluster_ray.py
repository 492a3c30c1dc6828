"""`fedbench run --executor ray` (fedbench.execution.cluster): workers as Ray tasks on a local Ray (``ray.init()`` started by
fedbench), claiming runs from the registry like local workers; Ctrl-C cancels the tasks and their runs are
recorded as interrupted with their checkpoints (which a local worker resumes, tests/integration/test_kill_resume.py). Skipped where ray is not installed (it is an optional extra)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.execution.cluster import execute_on_ray
from fedbench.execution.events import RoundDone, RunStarted
from fedbench.execution.options import ExecutionOptions, RayOptions
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.registry import Registry

ray = pytest.importorskip("ray", reason="ray not installed (pip install 'fedbench-repro[ray]')")
runner = CliRunner()


def curves(url: str) -> dict[str, list[tuple]]:
    registry = Registry(url)
    return {
        r.spec_hash: [(x.round, x.test_acc, x.test_loss, x.train_loss) for x in registry.curve(r.id)]
        for r in registry.runs()
    }


@pytest.mark.slow
def test_ray_workers_train_every_run_once_with_the_curves_of_local_workers(tmp_path, write_recipe):
    recipe = write_recipe()
    url = f"sqlite:///{tmp_path / 'ray.db'}"
    result = runner.invoke(
        app, ["run", str(recipe), "--set", "rounds=2", "--registry", url, "--executor", "ray", "--jobs", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "4/4 runs" in result.output
    runs = Registry(url).runs()
    assert len(runs) == 4 and {r.status for r in runs} == {"done"}
    local = f"sqlite:///{tmp_path / 'local.db'}"
    assert runner.invoke(app, ["run", str(recipe), "--set", "rounds=2", "--registry", local]).exit_code == 0
    assert curves(url) == curves(local) and all([n for n, *_ in c] == [1, 2] for c in curves(url).values())


@pytest.mark.slow
def test_ctrl_c_cancels_the_ray_tasks_and_their_runs_are_interrupted_with_a_checkpoint(tmp_path, write_recipe):
    recipe = write_recipe()
    # one run, far longer than the test: it is mid-way when Ctrl-C lands
    planned = expand(load_recipe(recipe), scale="smoke", overrides={"rounds": 400}, only={"algorithm": {"fedavg"}})
    url = f"sqlite:///{tmp_path / 'ray.db'}"
    registry = Registry(url)
    registry.ensure_runs([p.registry_entry() for p in planned])
    seen = []

    def ctrl_c_after_a_checkpoint(event):
        # The driver hears of a round from the registry, where it is logged just before its checkpoint is written:
        # by the time round 2 is logged, round 1's checkpoint is on disk (whatever the machine's load)
        seen.append(event)
        if isinstance(event, RoundDone) and event.round >= 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute_on_ray(planned, ExecutionOptions(registry_url=url), 1, ctrl_c_after_a_checkpoint, RayOptions())
    (run,) = registry.runs()
    assert run.status == "interrupted" and 1 <= run.rounds_done < 400, (run.status, run.rounds_done, run.error)
    assert registry.checkpoint_path(run.spec_hash).exists()
    assert [type(e) for e in seen][:2] == [RunStarted, RoundDone]


def _stop_processes_of(temp_dir: str) -> None:
    """Stop the Ray processes this test started (those whose command line names its own temp dir), by pid:
    `ray stop` would stop every Ray process of the user on the machine."""
    import os
    import signal
    import time
    from pathlib import Path

    def ours() -> set[int]:
        named, parent = set(), {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if temp_dir.encode() in (entry / "cmdline").read_bytes():
                    named.add(int(entry.name))
                parent[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
        found, grew = set(named), True
        while grew:  # and their descendants (Ray's agents rename themselves: their command lines name no dir)
            children = {pid for pid, ppid in parent.items() if ppid in found} - found
            found |= children
            grew = bool(children)
        return found

    started = ours()  # collected once, before any parent dies and its children are re-parented
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in started:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        time.sleep(2)


@pytest.mark.slow
def test_a_ray_cluster_of_a_head_and_a_joined_worker_trains_the_runs(tmp_path, write_recipe, monkeypatch):
    """`ray start --head` on 127.0.0.1, a second node joining it, and `fedbench run --executor ray --address`."""
    import shutil
    import socket
    import subprocess
    import tempfile

    ray_cli = shutil.which("ray") or str(__import__("pathlib").Path(__import__("sys").executable).parent / "ray")
    temp_dir = tempfile.mkdtemp(prefix="fbray")  # short: Ray's socket paths must fit in 107 bytes
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # a private test cluster: no token shared between the nodes
    common = ["--node-ip-address=127.0.0.1", "--num-cpus=1", "--disable-usage-stats"]
    try:
        for args in (
            ["--head", f"--port={port}", f"--temp-dir={temp_dir}", "--include-dashboard=false"],
            [f"--address=127.0.0.1:{port}"],
        ):
            started = subprocess.run([ray_cli, "start", *args, *common], capture_output=True, text=True, timeout=300)
            assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-2000:]
        recipe = write_recipe()
        url = f"sqlite:///{tmp_path / 'ray.db'}"
        result = runner.invoke(
            app,
            [
                "run",
                str(recipe),
                "--set",
                "rounds=2",
                "--registry",
                url,
                "--executor",
                "ray",
                "--address",
                f"127.0.0.1:{port}",
                "--jobs",
                "2",
            ],
        )
        assert result.exit_code == 0, result.output
    finally:
        _stop_processes_of(temp_dir)
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert {r.status for r in Registry(url).runs()} == {"done"} and len(Registry(url).runs()) == 4
    local = f"sqlite:///{tmp_path / 'local.db'}"
    assert runner.invoke(app, ["run", str(recipe), "--set", "rounds=2", "--registry", local]).exit_code == 0
    assert curves(url) == curves(local)


@pytest.mark.slow
def test_fractional_gpus_pack_runs_onto_one_gpu(tmp_path, write_recipe, monkeypatch):
    """`--gpus-per-run 0.25` asks Ray for a quarter GPU per worker: on a node with one GPU (declared to Ray, which
    schedules GPUs as resources; this machine need not have one) every run is recorded with the quarter Ray
    assigned it and the one GPU id Ray made visible to it, and the four workers share that GPU."""
    # as the head-and-worker test above: a private cluster without a token (ray reads this once per process, so a
    # test after that one must ask for the same, or its GCS and its driver disagree about authentication)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=4, num_gpus=1, include_dashboard=False, log_to_driver=False)
    try:
        recipe = write_recipe()
        url = f"sqlite:///{tmp_path / 'ray.db'}"
        result = runner.invoke(
            app,
            ["run", str(recipe), "--set", "rounds=1", "--registry", url, "--device", "cpu"]
            + ["--executor", "ray", "--jobs", "4", "--gpus-per-run", "0.25"],
        )
        assert result.exit_code == 0, result.output
    finally:
        ray.shutdown()
    runs = Registry(url).runs()
    assert len(runs) == 4 and {r.status for r in runs} == {"done"}
    placements = [r.provenance["ray"] for r in runs]
    assert all(p["resources"].get("GPU") == 0.25 and p["gpu_ids"] == ["0"] for p in placements), placements
