"""Workers of ``fedbench run --device cuda --jobs N`` spread over the GPUs (``fedbench.execution.devices``), tested with a
fake number of visible GPUs: no GPU is needed."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.errors import FedbenchError
from fedbench.execution import local
from fedbench.execution.devices import parse_gpus, place_workers
from fedbench.execution.options import ExecutionOptions


def test_workers_go_round_robin_over_every_visible_gpu():
    assert place_workers("cuda", 5, None, 2) == ["cuda:0", "cuda:1", "cuda:0", "cuda:1", "cuda:0"]
    assert place_workers("auto", 3, None, 4) == ["cuda:0", "cuda:1", "cuda:2"]
    assert place_workers("cuda", 1, None, 8) == ["cuda:0"]


def test_listed_gpus_are_used_in_their_order_several_workers_each():
    assert place_workers("cuda", 7, parse_gpus("0,2,3"), 4) == [
        "cuda:0",
        "cuda:2",
        "cuda:3",
        "cuda:0",
        "cuda:2",
        "cuda:3",
        "cuda:0",
    ]
    assert place_workers("cuda", 2, parse_gpus("3"), 4) == ["cuda:3", "cuda:3"]


def test_one_named_gpu_and_the_cpu():
    assert place_workers("cuda:1", 3, None, 2) == ["cuda:1"] * 3
    assert place_workers("cpu", 2, None, 4) == ["cpu", "cpu"]
    assert place_workers("auto", 2, None, 0) == ["cpu", "cpu"]


@pytest.mark.parametrize("text", ["a", "", "0,,1", "-1", "0,0", "1.5"])
def test_bad_gpu_lists_are_user_errors(text):
    with pytest.raises(FedbenchError, match="--gpus"):
        parse_gpus(text)


@pytest.mark.parametrize(
    ("device", "gpus", "visible", "message"),
    [
        ("cpu", (0,), 2, "--gpus needs --device cuda"),
        ("auto", (0,), 0, "--gpus needs --device cuda"),
        ("cuda", (0, 3), 2, "GPU 3 is not visible"),
        ("cuda", None, 0, "CUDA is not available"),
        ("cuda:2", None, 2, "GPU 2 is not visible"),
        ("cuda:1", (0,), 2, "both choose GPUs"),
    ],
)
def test_impossible_placements_are_user_errors(device, gpus, visible, message):
    with pytest.raises(FedbenchError, match=message):
        place_workers(device, 2, gpus, visible)


def test_execute_hands_each_worker_its_gpu(monkeypatch):
    """The executor starts one worker per placed device (the worker processes themselves are faked)."""
    started: list[str] = []
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    monkeypatch.setattr(
        local, "_execute_in_workers", lambda planned, options, emit: started.extend(o.device for o in options)
    )
    options = ExecutionOptions(registry_url="sqlite://", device="cuda")
    local.execute([], options, 4, lambda event: None)
    assert started == ["cuda:0", "cuda:1", "cuda:2", "cuda:0"]
    started.clear()
    local.execute([], ExecutionOptions(registry_url="sqlite://", device="cuda", gpus=(2, 0)), 3, print)
    assert started == ["cuda:2", "cuda:0", "cuda:2"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--device", "cpu", "--gpus", "0,x"], "--gpus '0,x'"),
        (["--device", "cpu", "--gpus", "0"], "--gpus needs"),
        (["--device", "gpu"], "--device 'gpu': not a device; use auto, cpu, cuda or cuda:N"),  # torch's own: 20 names
        (["--device", "gpu", "--dry-run"], "--device 'gpu': not a device"),  # a dry run checks it too
    ],
)
def test_bad_device_options_exit_2_with_one_line_and_no_registry(write_recipe, registry_url, args, message):
    result = CliRunner().invoke(app, ["run", str(write_recipe()), *args, "--registry", registry_url])
    assert result.exit_code == 2
    assert message in result.output and len(result.output.strip().splitlines()) == 1
    assert not Path(registry_url.removeprefix("sqlite:///")).exists()
