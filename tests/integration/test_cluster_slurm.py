"""`fedbench run --executor slurm` (fedbench.execution.cluster): worker jobs submitted as one submitit array, each running
the local claim loop. The sbatch script is checked by a stand-in `sbatch` that keeps what it is given; the whole
path (submission, workers claiming runs, progress from the registry) runs with submitit's local executor."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.errors import FedbenchError
from fedbench.execution.cluster import slurm_executor, submit_slurm_workers
from fedbench.execution.options import ExecutionOptions, SlurmOptions
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.registry import Registry
from fedbench.settings import Settings

submitit = pytest.importorskip("submitit", reason="submitit not installed (pip install 'fedbench-repro[slurm]')")
runner = CliRunner()


def test_the_sbatch_script_holds_partition_time_array_and_the_worker(tmp_path, write_recipe, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    captured = tmp_path / "submitted.sh"
    fake = bin_dir / "sbatch"  # keeps the script it is given and answers as sbatch does
    fake.write_text(f'#!/bin/sh\ncp "$1" {captured}\necho "Submitted batch job 4242"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    srun = bin_dir / "srun"  # submitit looks for it to tell a Slurm cluster; never run here
    srun.write_text("#!/bin/sh\nexit 1\n")
    srun.chmod(srun.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")

    planned = expand(load_recipe(write_recipe()))
    options = ExecutionOptions(registry_url=f"sqlite:///{tmp_path / 'r.db'}", settings=Settings(threads=2))
    slurm = SlurmOptions(partition="gpu-long", time="01:30:00", gpus_per_job=1)
    executor = slurm_executor(slurm, jobs=3, threads=2, folder=tmp_path / "jobs" / "%j")
    jobs = submit_slurm_workers(executor, planned, options, 3)

    assert [job.job_id for job in jobs] == ["4242_0", "4242_1", "4242_2"]
    script = captured.read_text()
    directives = [line for line in script.splitlines() if line.startswith("#SBATCH")]
    for expected in (
        "#SBATCH --partition=gpu-long",
        "#SBATCH --time=90",
        "#SBATCH --array=0-2%3",
        "#SBATCH --cpus-per-task=2",
        "#SBATCH --gpus-per-node=1",
        "#SBATCH --job-name=fedbench-worker",
    ):
        assert expected in directives, (expected, directives)
    assert "-m submitit.core._submit" in script
    # one pickled call per array task, each the claim loop over every planned run
    assert len(list((tmp_path / "jobs").glob("4242_*/4242_*_submitted.pkl"))) == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--executor", "slurm"], "--executor slurm needs --slurm-time"),
        (["--executor", "slurm", "--slurm-time", "soon"], "--slurm-time 'soon'"),
        (["--slurm-partition", "gpu"], "--slurm-* options need --executor slurm"),
        (["--executor", "kubernetes"], "'kubernetes' is not one of"),  # Typer's check of the choices
        (["--gpus-per-run", "0.5"], "--address and --gpus-per-run need --executor ray"),
    ],
)
def test_bad_executor_options_exit_2_before_anything_is_registered(tmp_path, write_recipe, args, message):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    result = runner.invoke(app, ["run", str(write_recipe()), "--registry", url, *args])
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "r.db").exists()


def test_no_slurm_here_is_a_user_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # neither srun nor sbatch
    with pytest.raises(FedbenchError, match="not a Slurm cluster"):
        slurm_executor(SlurmOptions(time="00:10:00"), jobs=1, threads=1, folder=tmp_path)


def curves(url: str) -> dict[str, list[tuple]]:
    registry = Registry(url)
    return {
        r.spec_hash: [(x.round, x.test_acc, x.test_loss, x.train_loss) for x in registry.curve(r.id)]
        for r in registry.runs()
    }


@pytest.mark.slow
def test_slurm_array_workers_on_the_local_executor_train_every_run_once(tmp_path, write_recipe):
    recipe = write_recipe()
    url = f"sqlite:///{tmp_path / 'slurm.db'}"
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
            "slurm",
            "--slurm-cluster",
            "local",
            "--slurm-time",
            "00:10:00",
            "--jobs",
            "2",
            "--slurm-folder",
            str(tmp_path / "jobs"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "submitted 2 worker job(s)" in result.output and "4/4 runs" in result.output
    runs = Registry(url).runs()
    assert len(runs) == 4 and {r.status for r in runs} == {"done"}
    assert len({r.worker for r in runs}) >= 1 and all(r.worker for r in runs)
    assert all(r.provenance.get("host") for r in runs)
    here = f"sqlite:///{tmp_path / 'here.db'}"  # the same runs in process: bit-identical curves
    assert runner.invoke(app, ["run", str(recipe), "--set", "rounds=2", "--registry", here]).exit_code == 0
    assert curves(url) == curves(here) and all(len(c) == 2 for c in curves(url).values())
    assert len(list(Path(tmp_path / "jobs").glob("*/*_log.out"))) == 2  # two array tasks ran


def test_paths_are_made_absolute_for_workers_that_start_elsewhere(tmp_path, monkeypatch):
    from fedbench.execution.cluster import for_remote_workers

    monkeypatch.chdir(tmp_path)
    relative = ExecutionOptions(registry_url="sqlite:///registry/fedbench.db", settings=Settings(data_root="data"))
    moved = for_remote_workers(relative)
    assert moved.registry_url == f"sqlite:///{tmp_path}/registry/fedbench.db"
    assert moved.settings.data_root == str(tmp_path / "data")
    shared = ExecutionOptions(registry_url="postgresql+psycopg://me:pw@dbhost/fedbench")
    assert for_remote_workers(shared) == shared  # a server URL is the same everywhere
