"""Which device each worker of ``fedbench run --jobs N`` trains on: pure functions of the options and the number of
visible GPUs, so that they are tested without a GPU (``tests/execution/test_devices.py``); and the torch device a
worker opens (``resolve_device``, which imports torch when called: this module is read by commands that train
nothing).

``--device cuda`` (or ``auto`` with a GPU present) spreads the N workers round-robin over every visible GPU, or
over the ones ``--gpus 0,2,3`` lists (indices as PyTorch numbers the visible devices, i.e. after
``CUDA_VISIBLE_DEVICES``); several workers per GPU are allowed (N > number of GPUs). ``--device cuda:K`` puts every
worker on GPU K. The CPU ignores placement. A run's provenance records the GPU it trained on (index and model).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from fedbench.errors import ConfigError, FedbenchError

if TYPE_CHECKING:
    import torch


def parse_gpus(text: str | None) -> tuple[int, ...] | None:
    """``--gpus 0,2,3`` → (0, 2, 3); None when the option is not given."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",")]
    try:
        indices = tuple(int(p) for p in parts)
    except ValueError:
        raise ConfigError(f"--gpus {text!r}: expected comma-separated GPU indices, e.g. --gpus 0,2,3") from None
    if not indices or any(i < 0 for i in indices):
        raise ConfigError(f"--gpus {text!r}: expected comma-separated GPU indices ≥ 0, e.g. --gpus 0,2,3")
    if len(set(indices)) != len(indices):
        raise ConfigError(f"--gpus {text!r}: an index is listed twice; list each GPU once (--jobs sets the workers)")
    return indices


def place_workers(device: str, jobs: int, gpus: Sequence[int] | None, visible: int) -> list[str]:
    """The device of each of ``jobs`` workers (one entry per worker; ``jobs`` ≤ 1 → one in-process worker) for
    ``--device device`` and ``--gpus gpus`` on a machine with ``visible`` CUDA devices."""
    workers = max(1, jobs)
    kind = ("cuda" if visible > 0 else "cpu") if device == "auto" else device
    if not kind.startswith("cuda"):
        if gpus is not None:
            raise ConfigError(
                f"--gpus needs --device cuda (the runs train on {kind}); drop --gpus or use --device cuda"
            )
        return [kind] * workers
    if visible == 0:
        raise ConfigError(f"--device {device}: CUDA is not available on this machine; use --device cpu")
    if kind != "cuda":  # cuda:K
        if gpus is not None:
            raise ConfigError(f"--device {kind} and --gpus both choose GPUs; use --device cuda --gpus ...")
        index = _index(kind)
        _check_visible([index], visible, f"--device {kind}")
        return [kind] * workers
    indices = list(gpus) if gpus is not None else list(range(visible))
    _check_visible(indices, visible, "--gpus " + ",".join(map(str, indices)))
    return [f"cuda:{indices[worker % len(indices)]}" for worker in range(workers)]


def _index(device: str) -> int:
    try:
        return int(device.split(":", 1)[1])
    except ValueError:
        raise ConfigError(f"--device {device!r}: expected cuda or cuda:N with N a GPU index") from None


def _check_visible(indices: Sequence[int], visible: int, option: str) -> None:
    missing = [i for i in indices if i >= visible]
    if missing:
        raise ConfigError(
            f"{option}: GPU {missing[0]} is not visible; this machine has {visible} visible GPU(s), "
            f"indices 0-{visible - 1}"
        )


def resolve_device(name: str) -> torch.device:
    """The torch device of ``--device name`` (auto: CUDA when there is one); CUDA then computes deterministically."""
    # local: keeps torch out of --help's start-up (the CLI imports this module for every command)
    import torch

    if name == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    elif name.startswith("cuda") and not torch.cuda.is_available():
        raise FedbenchError(f"--device {name}: CUDA is not available on this machine; use --device cpu")
    else:
        try:
            device = torch.device(name)
        except RuntimeError:  # torch's message lists every device type it knows: one line names the usual ones
            raise ConfigError(f"--device {name!r}: not a device; use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda":
        deterministic_cuda()
    return device


def check_device(name: str) -> None:
    """A ``--device`` this machine cannot train on is a user error before anything is registered. ``auto`` and
    ``cpu`` always can, so they are not checked: a dry run or a plan on them does not import torch."""
    if name not in ("auto", "cpu"):
        resolve_device(name)


def check_placement(device: str, gpus: tuple[int, ...] | None) -> None:
    """A bad ``--gpus`` (an index not visible, with a CPU device) is a user error before anything is registered."""
    # local: keeps torch out of --help's start-up (the CLI imports this module for every command)
    import torch

    place_workers(device, 1, gpus, torch.cuda.device_count())


def deterministic_cuda() -> None:
    """Same spec, same curve on a GPU too (a resumed run must finish with the numbers of an uninterrupted
    one): cuDNN and cuBLAS are asked for their deterministic algorithms and cuDNN's autotuner is off.
    An operation with no deterministic CUDA kernel warns instead of failing."""
    # local: keeps torch out of --help's start-up (the CLI imports this module for every command)
    import torch

    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # read when cuBLAS creates its handle
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True, warn_only=True)
