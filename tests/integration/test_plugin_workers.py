"""Every worker loads the batch's plug-ins before it claims a run (``ExecutionOptions.plugins``): ``--jobs 2``
spawned workers train a method from a ``--plugin`` file and one from an installed distribution's entry point, and
a worker whose plug-in code is not the code the run was planned with records the run as failed, saying so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from plugin_fixtures import fresh_plugins, method_source, write_method, write_plugged_recipe  # noqa: F401 (fixture)
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.execution.batch import prepare_batch
from fedbench.execution.options import ExecutionOptions
from fedbench.execution.selection import select_runs
from fedbench.registry import Registry

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("fresh_plugins")]
REPOSITORY = Path(__file__).resolve().parents[2]


def runs_of(registry_url: str) -> dict[str, dict]:
    listed = CliRunner().invoke(app, ["runs", "--registry", registry_url, "--json"])
    assert listed.exit_code == 0, listed.output
    return {run["labels"]["algorithm"]: run for run in json.loads(listed.stdout)}


def test_spawned_workers_load_a_plugin_file(tmp_path, registry_url):
    method = write_method(tmp_path)
    recipe = write_plugged_recipe(tmp_path)
    done = CliRunner().invoke(
        app, ["run", str(recipe), "--jobs", "2", "--plugin", str(method), "--registry", registry_url]
    )
    assert done.exit_code == 0, done.output
    runs = runs_of(registry_url)
    assert {name: run["status"] for name, run in runs.items()} == {"fedavg": "done", "growingprox": "done"}
    assert runs["growingprox"]["provenance"]["plugins"][0]["source"] == str(method.resolve())


def test_spawned_workers_load_an_installed_entry_point(tmp_path, registry_url):
    site = tmp_path / "site"
    site.mkdir()
    package = site / "fedbench_ep_workers"
    package.mkdir()
    (package / "__init__.py").write_text(method_source(name="epworkers"))  # the module registers on import
    info = site / "fedbench_ep_workers-0.4.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fedbench-ep-workers\nVersion: 0.4\n")
    (info / "entry_points.txt").write_text("[fedbench.plugins]\nmethods = fedbench_ep_workers\n")
    recipe = write_plugged_recipe(tmp_path, name="epworkers")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(REPOSITORY)])}
    done = subprocess.run(
        [sys.executable, "-m", "fedbench.cli", "run", str(recipe), "--jobs", "2", "--registry", registry_url],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    runs = runs_of(registry_url)
    assert {name: run["status"] for name, run in runs.items()} == {"fedavg": "done", "epworkers": "done"}
    record = runs["epworkers"]["provenance"]["plugins"][0]
    assert (record["module"], record["distribution"], record["version"]) == (
        "fedbench_ep_workers",
        "fedbench-ep-workers",
        "0.4",
    )
    assert record["source"] == "entry point methods = fedbench_ep_workers"


def test_a_worker_with_other_plugin_code_refuses_the_run(tmp_path, registry_url):
    method = write_method(tmp_path)
    recipe = write_plugged_recipe(tmp_path, plugins=f'plugins = ["{method.name}"]')
    planned = [p for p in select_runs([recipe]) if p.spec.algorithm == "growingprox"]
    batch = prepare_batch(planned, ExecutionOptions(registry_url=registry_url, device="cpu"))
    assert batch.options.plugins == (str(method.resolve()),)
    method.write_text(method_source(comment="edited after planning"))
    batch.train(lambda event: None)  # the worker loads the plug-in as it is now
    [row] = Registry(registry_url).runs()
    assert row.status == "failed"
    assert "algorithm 'growingprox': this worker has sha256:" in row.error
    assert "give every worker the same plug-in code" in row.error
