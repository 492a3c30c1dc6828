"""`fedbench run --executor ray` (fedbench.cluster): workers as Ray tasks on a local Ray (``ray.init()`` started by
fedbench), claiming runs from the registry like local workers; Ctrl-C cancels the tasks and their runs are
recorded as interrupted with their checkpoints (which a local worker resumes, tests/test_kill_resume.py). Skipped where ray is not installed (it is an optional extra)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.cluster import RayOptions, execute_on_ray
from fedbench.executors import ExecutionOptions
from fedbench.recipe import expand, load_recipe
from fedbench.registry import Registry

ray = pytest.importorskip("ray", reason="ray not installed (pip install 'fedbench[ray]')")
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

    def ctrl_c_after_the_first_round(event):
        seen.append(event)
        if event["kind"] == "round":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        execute_on_ray(planned, ExecutionOptions(registry_url=url), 1, ctrl_c_after_the_first_round, RayOptions())
    (run,) = registry.runs()
    assert run.status == "interrupted" and 1 <= run.rounds_done < 400, (run.status, run.rounds_done, run.error)
    assert registry.checkpoint_path(run.spec_hash).exists()
    assert [e["kind"] for e in seen][:2] == ["start", "round"]
