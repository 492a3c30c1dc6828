"""``ExecutionOptions`` is one frozen, torch-free object (``fedbench/execution/options.py``), and the engine gets
from it what ``engine.run`` takes (``worker.train``); ``--slurm-time`` is read as sbatch reads it."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from fedbench.errors import ConfigError
from fedbench.execution.options import ExecutionOptions, slurm_minutes


def test_the_options_are_frozen():
    options = ExecutionOptions(registry_url="sqlite://")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.device = "cpu"


def test_the_options_events_and_checkpoint_location_import_no_torch():
    code = (
        "import sys; import fedbench.execution.options, fedbench.execution.events, fedbench.checkpoint.location; "
        "import fedbench.cli.options; sys.exit('torch' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_what_the_engine_gets_is_what_engine_run_takes(monkeypatch, tmp_path):
    from fedbench.algorithms.context import EVAL_BATCH_SIZE
    from fedbench.engine import EngineOptions
    from fedbench.execution import worker

    calls: list[EngineOptions] = []
    monkeypatch.setattr(worker, "run_engine", lambda spec, sink, settings: calls.append(settings))
    options = ExecutionOptions(eval_batch_size=7, verify=False, packing="packed", data_root="d", fast=False)
    for memory, batch in ((None, 7), (9, None)):
        options = dataclasses.replace(options, client_state_memory=memory, eval_batch_size=batch)
        spec = SimpleNamespace(spec_hash="abc")  # read only by the progress callbacks
        worker.train(spec, None, options, torch.device("cpu"), tmp_path / "c.pt", None, None, lambda e: None)
    given, with_memory = calls
    assert (given.eval_batch_size, given.verify, given.packing, given.data_root) == (7, False, "packed", "d")
    assert given.checkpoint_path == tmp_path / "c.pt" and given.device == torch.device("cpu")
    # None: the engine's defaults
    assert given.client_state_memory == EngineOptions().client_state_memory and with_memory.client_state_memory == 9
    assert with_memory.eval_batch_size == EVAL_BATCH_SIZE


@pytest.mark.parametrize(
    ("text", "minutes"), [("01:30:00", 90), ("00:00:01", 1), ("1-00:00:00", 1440), ("45:30", 46), ("12:00:00", 720)]
)
def test_slurm_time_is_read_as_sbatch_reads_it(text, minutes):
    assert slurm_minutes(text) == minutes


@pytest.mark.parametrize("text", ["90", "1h", "00:00:00", "1:2:3:4", ""])
def test_a_bad_slurm_time_is_a_user_error(text):
    with pytest.raises(ConfigError, match="--slurm-time"):
        slurm_minutes(text)
