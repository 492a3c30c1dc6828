"""``ExecutionOptions`` is one frozen, torch-free object (``fedbench/execution/options.py``) holding the runs'
``Settings`` and the workers' ``Launch``; the engine gets the settings as they are (``worker.train``); a launch is
checked when built; ``--slurm-time`` is read as sbatch reads it."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from fedbench.errors import ConfigError
from fedbench.execution.options import (
    ExecutionOptions,
    Launch,
    Launcher,
    RayOptions,
    SlurmCluster,
    SlurmOptions,
    slurm_minutes,
)
from fedbench.settings import Packing, Settings


def test_the_options_are_frozen():
    options = ExecutionOptions(registry_url="sqlite://")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.device = "cpu"  # type: ignore[misc]


def test_the_options_events_and_checkpoint_location_import_no_torch():
    code = (
        "import sys; import fedbench.execution.options, fedbench.execution.events, fedbench.checkpoint.location; "
        "import fedbench.cli.options, fedbench.settings; sys.exit('torch' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_the_engine_gets_the_batch_settings_and_the_workers_own_objects(monkeypatch, tmp_path):
    from fedbench.engine import EngineOptions
    from fedbench.execution import worker

    calls: list[EngineOptions] = []
    monkeypatch.setattr(worker, "run_engine", lambda spec, sink, options: calls.append(options))
    settings = Settings(eval_batch_size=7, verify=False, packing=Packing.PACKED, data_root="d", fast=False)
    options = ExecutionOptions(settings=settings)
    spec = SimpleNamespace(spec_hash="abc")  # read only by the progress callbacks
    worker.train(spec, None, options, torch.device("cpu"), tmp_path / "c.pt", None, None, lambda e: None)
    (given,) = calls
    assert given.settings is settings
    assert given.checkpoint_path == tmp_path / "c.pt" and given.device == torch.device("cpu")
    assert given.checkpoint_ledger is None and given.acceleration is None  # the settings' switches for the device


def test_a_local_launch_is_the_default_and_has_no_cluster():
    assert Launch() == Launch(Launcher.LOCAL, jobs=1) and Launch().cluster is None
    assert ExecutionOptions().launch == Launch() and ExecutionOptions().settings == Settings()


def test_a_cluster_launch_carries_its_own_options_only():
    slurm = SlurmOptions(partition="gpu", time="02:00:00", cluster=SlurmCluster.LOCAL, gpus_per_job=1)
    assert Launch(Launcher.SLURM, jobs=3, slurm=slurm).cluster == slurm
    ray = RayOptions(address="auto", gpus_per_run=0.5)
    assert Launch("ray", ray=ray).cluster == ray and Launch("ray").launcher is Launcher.RAY


@pytest.mark.parametrize(
    ("launch", "message"),
    [
        (dict(slurm=SlurmOptions(time="01:00:00")), "--slurm-\\* options need --executor slurm"),
        (dict(slurm=SlurmOptions(cluster=SlurmCluster.LOCAL)), "--slurm-\\* options need --executor slurm"),
        (dict(launcher=Launcher.RAY, slurm=SlurmOptions(gpus_per_job=1)), "need --executor slurm"),
        (dict(ray=RayOptions(address="auto")), "--address and --gpus-per-run need --executor ray"),
        (dict(launcher=Launcher.SLURM, ray=RayOptions(gpus_per_run=1.0)), "need --executor ray"),
        (dict(launcher=Launcher.SLURM), "--executor slurm needs --slurm-time"),
        (dict(launcher=Launcher.SLURM, slurm=SlurmOptions(time="1h")), "--slurm-time '1h'"),
        (dict(jobs=0), "--jobs 0"),
        (dict(launcher="kubernetes"), "^--executor 'kubernetes': expected one of local, ray, slurm$"),
    ],
)
def test_a_launch_is_checked_when_built(launch, message):
    with pytest.raises(ConfigError, match=message):
        Launch(**launch)


def test_a_cluster_worker_s_cpus_default_to_a_run_s_threads():
    assert SlurmOptions().cpus_per_job is None and RayOptions().cpus_per_run is None
    assert SlurmOptions().folder is None and isinstance(SlurmOptions(folder=Path("f")).folder, Path)


@pytest.mark.parametrize(
    ("text", "minutes"), [("01:30:00", 90), ("00:00:01", 1), ("1-00:00:00", 1440), ("45:30", 46), ("12:00:00", 720)]
)
def test_slurm_time_is_read_as_sbatch_reads_it(text, minutes):
    assert slurm_minutes(text) == minutes


@pytest.mark.parametrize("text", ["90", "1h", "00:00:00", "1:2:3:4", ""])
def test_a_bad_slurm_time_is_a_user_error(text):
    with pytest.raises(ConfigError, match="--slurm-time"):
        slurm_minutes(text)
