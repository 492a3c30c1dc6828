"""Time fedbench's checkpoint format (safetensors + JSON, fedbench.checkpoint.format) against the pickle it
replaced (``torch.save`` / ``torch.load(weights_only=False)``), on the payloads of real runs.

Payloads (what the engine checkpoints after a round, built from the real models):
  * SCAFFOLD, 20 clients, LeNet-5 (CIFAR-10 shape): global weights, buffers, server control c, 20 client c_i;
  * FedAvg, ResNet-18 (CIFAR-10): global weights and BN buffers;
  * SCAFFOLD, 20 clients, ResNet-18: as the first, ~1 GB.
Each save is the whole atomic write (temp file, fsync, rename) to ``--dir``; each load reads the file back onto
the CPU (the new format also hashes it, as a resume does). Median of ``--repeat`` runs, after one warm-up.

    python benchmarks/checkpoint_format.py [--repeat 5] [--dir /tmp] [--skip-large]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

from fedbench.checkpoint.format import read_checkpoint, save_checkpoint
from fedbench.models import build_model


def payload(model_name: str, clients: int) -> dict:
    torch.manual_seed(0)
    model = build_model(model_name, 10, (3, 32, 32))
    params = nn.utils.parameters_to_vector(model.parameters()).detach().clone()
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    state = {"control": torch.randn_like(params)} if clients else {}
    client_states = {i: {"control": torch.randn_like(params)} for i in range(clients)}
    return {
        "spec_hash": "0123456789abcdef",
        "round": 7,
        "server": {"params": params, "buffers": buffers, "state": state},
        "client_states": client_states,
        "finetune_start": None,
    }


def old_save(path: Path, data: dict) -> None:
    """fedbench 0.2's save_checkpoint, as it was: torch.save into a temp file, fsync, rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "wb") as handle:
        torch.save(data, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def timed(fn, repeat: int) -> float:
    fn()  # warm-up: page cache, allocator
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--skip-large", action="store_true", help="leave out SCAFFOLD on ResNet-18 (~1 GB)")
    args = parser.parse_args()
    cases = [("SCAFFOLD, 20 clients, LeNet-5", "lenet5", 20), ("FedAvg, ResNet-18", "resnet18", 0)]
    if not args.skip_large:
        cases.append(("SCAFFOLD, 20 clients, ResNet-18", "resnet18", 20))
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        print(
            "| payload | size (MB) old / new | torch.save | torch.load | fedbench save | fedbench load | sha256 of the file alone |"
        )
        print("|---|---|---|---|---|---|---|")
        for title, model, clients in cases:
            print(measure(title, payload(model, clients), Path(folder), args.repeat))


def measure(title: str, data: dict, folder: Path, repeat: int) -> str:
    """One table row: both formats' save and load times for ``data``."""
    old, new = folder / "old.pt", folder / "new.pt"
    save_old = timed(lambda: old_save(old, data), repeat)
    load_old = timed(lambda: torch.load(old, map_location="cpu", weights_only=False), repeat)
    save_new = timed(lambda: save_checkpoint(new, data), repeat)
    digest = save_checkpoint(new, data)
    load_new = timed(lambda: read_checkpoint(new, data["spec_hash"], "cpu", digest, bound=True), repeat)
    raw = new.read_bytes()
    sha = timed(lambda: hashlib.sha256(raw).hexdigest(), repeat)
    back = read_checkpoint(new, data["spec_hash"], "cpu", digest, bound=True)
    assert torch.equal(back["server"]["params"], data["server"]["params"])
    return (
        f"| {title} | {old.stat().st_size / 1e6:.1f} / {new.stat().st_size / 1e6:.1f} | "
        f"{save_old * 1e3:.1f} ms | {load_old * 1e3:.1f} ms | {save_new * 1e3:.1f} ms | {load_new * 1e3:.1f} ms | "
        f"{sha * 1e3:.1f} ms |"
    )


if __name__ == "__main__":
    main()
