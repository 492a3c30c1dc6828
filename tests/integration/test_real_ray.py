"""`fedbench run --executor ray --address` on a real Ray cluster of two nodes (``ray start --head`` and a second
``ray start --address``, one CPU each, tests/cluster_fixtures.py): runs spread over both nodes, the second node lost
mid-run (its raylet killed) and its run taken over on the head node, a cluster that refuses the driver's token.
Each ends with every run done once and the curves of a calm in-process run of the same specs, bit for bit.

The node is killed when the registry shows a run mid-way on it, and that run is then still far from its end whatever
the machine's load: the batch loads a plug-in that pauses 1 s after every round its workers record
(``slow_rounds_plugin``: no name registered, so the same spec hashes and curves as the calm run without it)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from cluster_fixtures import (
    curves,
    fedbench_command,
    run_fedbench,
    running_run,
    slow_rounds_plugin,
    start_ray,
    wait_for,
)

from fedbench.registry import Registry

pytestmark = pytest.mark.slow


def calm_curves(tmp_path: Path, recipe: Path, *args: str) -> dict[str, list[tuple]]:
    url = f"sqlite:///{tmp_path / 'calm.db'}"
    done = run_fedbench("run", str(recipe), *args, "--registry", url)
    assert done.returncode == 0, done.stdout + done.stderr
    return curves(url)


def test_the_quickstart_runs_on_the_two_node_cluster(ray_nodes, tmp_path):
    quickstart = Path(__file__).parents[2] / "recipes" / "quickstart.toml"
    url = f"sqlite:///{tmp_path / 'ray.db'}"
    args = ("--scale", "smoke", "--registry", url, "--executor", "ray", "--address", ray_nodes.address, "--jobs", "2")
    done = run_fedbench("run", str(quickstart), *args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2/2 runs" in done.stdout, done.stdout
    runs = Registry(url).runs()
    assert len(runs) == 2 and {r.status for r in runs} == {"done"}
    assert all(r.provenance["ray"]["node_id"] and r.provenance["ray"]["node_ip"] for r in runs)
    status = run_fedbench("status", "--registry", url)
    assert status.returncode == 0 and "done" in status.stdout, status.stdout + status.stderr
    assert curves(url) == calm_curves(tmp_path, quickstart, "--scale", "smoke")


def test_the_second_node_lost_mid_run_leaves_its_run_to_the_head_node(ray_nodes, tmp_path, write_recipe):
    recipe, url = write_recipe(), f"sqlite:///{tmp_path / 'ray.db'}"
    two = ("--scale", "smoke", "--set", "rounds=20")  # fedavg and fedprox: one run per node, 20 s at least each
    args = ("run", str(recipe), *two, "--registry", url, "--executor", "ray", "--address", ray_nodes.address)
    second = ray_nodes.second_node_id()
    slowed = ("--plugin", str(slow_rounds_plugin(tmp_path, seconds=1.0)))
    batch = subprocess.Popen(
        fedbench_command(*args, "--jobs", "2", *slowed), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:

        def on_second_node():  # the two runs train at once: the one of the second node, not the first found
            return running_run(url, where=lambda run: run.provenance.get("ray", {}).get("node_id") == second)

        lost = wait_for("a run in progress on the second node", on_second_node, process=batch)
        os.kill(ray_nodes.second_raylet(), signal.SIGKILL)
        out, err = batch.communicate(timeout=300)
    finally:
        batch.kill()
    assert batch.returncode == 0, out + err
    assert "2/2 runs" in out and "3/2 runs" not in out, out
    runs = Registry(url).runs()
    assert len(runs) == 2 and {r.status for r in runs} == {"done"}
    taken = next(r for r in runs if r.spec_hash == lost.spec_hash)
    assert taken.provenance["ray"]["node_id"] != second  # finished on the head node
    assert taken.provenance["data"].get("resumed_from", 0) >= 1
    assert curves(url) == calm_curves(tmp_path, recipe, *two)


def test_a_cluster_that_refuses_the_token_is_a_user_error_with_nothing_registered(tmp_path, write_recipe, monkeypatch):
    """A head started with token authentication, and a driver holding another token: Ray refuses it (and says only
    that it could not connect); `fedbench run` exits 2 before registering anything (it registered the runs first)."""
    nodes, reason = start_ray(1, {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "a" * 32})
    if nodes is None:
        pytest.skip(f"real-Ray tests skipped: {reason}")
    try:
        monkeypatch.setenv("RAY_AUTH_MODE", "token")
        monkeypatch.setenv("RAY_AUTH_TOKEN", "b" * 32)
        url = f"sqlite:///{tmp_path / 'ray.db'}"
        args = ("--registry", url, "--executor", "ray", "--address", nodes.address)
        refused = run_fedbench("run", str(write_recipe()), *args)
    finally:
        nodes.stop()
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "cannot reach a Ray cluster there, or it refused" in refused.stderr, refused.stderr
    assert not Path(url.removeprefix("sqlite:///")).exists() or Registry(url).runs() == []
