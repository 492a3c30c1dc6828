"""``ExecutionOptions`` is one frozen, torch-free object (``fedbench/execution/options.py``), and the engine gets
from it what ``engine.run`` takes (``worker.train``)."""

from __future__ import annotations

import dataclasses
import inspect
import subprocess
import sys
from types import SimpleNamespace

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


def test_what_the_engine_gets_is_what_engine_run_takes(monkeypatch, tmp_path):
    from fedbench.engine import run
    from fedbench.execution import worker

    calls: list[dict] = []
    monkeypatch.setattr(worker, "run_engine", lambda spec, sink, **settings: calls.append(settings))
    options = ExecutionOptions(eval_batch_size=7, verify=False, packing="packed", data_root="d", fast=False)
    for memory in (None, 9):
        options = dataclasses.replace(options, client_state_memory=memory)
        spec = SimpleNamespace(spec_hash="abc")  # read only by the progress callbacks
        worker.train(spec, None, options, torch.device("cpu"), tmp_path / "c.pt", None, None, lambda e: None)
    given, with_memory = calls
    assert set(given) | set(with_memory) <= set(inspect.signature(run).parameters)
    assert (given["eval_batch_size"], given["verify"], given["packing"], given["data_root"]) == (
        7,
        False,
        "packed",
        "d",
    )
    assert given["checkpoint_path"] == tmp_path / "c.pt" and given["device"] == torch.device("cpu")
    assert "client_state_memory" not in given and with_memory["client_state_memory"] == 9  # None: the engine's default
