"""``ExecutionOptions`` is one frozen, torch-free object (``fedbench/execution/options.py``), and the engine gets
from it exactly what ``engine.run`` takes (``worker.engine_options``)."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys

import pytest
import torch

from fedbench.execution.options import ExecutionOptions


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


def test_what_the_engine_gets_is_what_engine_run_takes():
    from fedbench.engine import run
    from fedbench.execution.worker import engine_options

    options = ExecutionOptions(eval_batch_size=7, verify=False, packing="packed", data_root="d", fast=False)
    given = engine_options(options, torch.device("cpu"))
    assert set(given) <= set(inspect.signature(run).parameters)
    assert (given["eval_batch_size"], given["verify"], given["packing"], given["data_root"]) == (
        7,
        False,
        "packed",
        "d",
    )
    assert "client_state_memory" not in given  # None: the engine's own default
    assert (
        engine_options(dataclasses.replace(options, client_state_memory=9), torch.device("cpu"))["client_state_memory"]
        == 9
    )
