"""Time FedAvg rounds through fedbench and through a plain PyTorch loop on the same tensors.

Workload: 20 clients × 1,700 samples of random 1×28×28 data, 11 classes, LeNet-5,
1 local epoch, batch 64, SGD lr 0.01 momentum 0.9, evaluation of 2,000 samples every round.
Both loops run in this process, alternately, and the script prints seconds per round and the ratio.

    python benchmarks/round_overhead.py [--rounds 3] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from fedbench.data import register_dataset
from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.engine import EngineOptions, run
from fedbench.engine.loop import init_model
from fedbench.spec import RunSpec

CLIENTS, PER_CLIENT, CLASSES, TEST = 20, 1700, 11, 2000
META = DatasetMeta(name="benchmark_random", num_classes=CLASSES, input_shape=(1, 28, 28), mean=(0.5,), std=(0.5,))
_rng = np.random.default_rng(0)
ARRAYS = DatasetArrays(
    meta=META,
    train_x=_rng.integers(0, 256, (CLIENTS * PER_CLIENT, 1, 28, 28), dtype=np.uint8),
    train_y=_rng.integers(0, CLASSES, CLIENTS * PER_CLIENT),
    test_x=_rng.integers(0, 256, (TEST, 1, 28, 28), dtype=np.uint8),
    test_y=_rng.integers(0, CLASSES, TEST),
)


@register_dataset(META)
def load_benchmark_random(root: Path) -> DatasetArrays:
    return ARRAYS


def spec(rounds: int) -> RunSpec:
    return RunSpec(
        algorithm="fedavg",
        dataset="benchmark_random",
        model="lenet5",
        partition="iid",
        num_clients=CLIENTS,
        clients_per_round=CLIENTS,
        rounds=rounds,
        local_epochs=1,
        batch_size=64,
        optimizer={"lr": 0.01, "momentum": 0.9},
    )


class TimingSink:
    def __init__(self):
        self.seconds: list[float] = []

    def log_round(self, record) -> None:
        self.seconds.append(record.wall_seconds)

    def truncate(self, after_round: int) -> None:
        pass


def fedbench_rounds(rounds: int) -> list[float]:
    sink = TimingSink()
    run(spec(rounds), sink, EngineOptions(device="cpu"))
    return sink.seconds


def plain_rounds(rounds: int) -> list[float]:
    """The same computation written directly: one model, weights copied in per client, batches by index."""
    s = spec(rounds)
    x = (torch.from_numpy(ARRAYS.train_x).float() / 255 - 0.5) / 0.5
    y = torch.from_numpy(ARRAYS.train_y).long()
    tx = (torch.from_numpy(ARRAYS.test_x).float() / 255 - 0.5) / 0.5
    ty = torch.from_numpy(ARRAYS.test_y).long()
    parts = np.array_split(np.random.default_rng(1).permutation(len(y)), CLIENTS)
    parts = [torch.from_numpy(np.sort(p)) for p in parts]
    model = init_model(s, CLASSES, (1, 28, 28), torch.device("cpu"))
    global_state = {k: v.clone() for k, v in model.state_dict().items()}
    seconds = []
    for _ in range(rounds):
        began = time.perf_counter()
        summed = {k: torch.zeros_like(v, dtype=torch.float32) for k, v in global_state.items()}
        for idx in parts:
            model.load_state_dict(global_state)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
            model.train()
            order = idx[torch.randperm(len(idx))]
            for start in range(0, len(order), 64):
                batch = order[start : start + 64]
                loss = F.cross_entropy(model(x[batch]), y[batch])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            for k, v in model.state_dict().items():
                summed[k] += v.float() / CLIENTS
        global_state = {k: summed[k].to(v.dtype) for k, v in global_state.items()}
        model.load_state_dict(global_state)
        model.eval()
        with torch.inference_mode():  # the test pass a round includes; its count is not needed here
            _correct = sum(
                (model(tx[i : i + 1000]).argmax(1) == ty[i : i + 1000]).sum().item() for i in range(0, TEST, 1000)
            )
        seconds.append(time.perf_counter() - began)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    fedbench_rounds(1), plain_rounds(1)  # warm-up (allocator, kernels)
    ours, plain = [], []
    for _ in range(args.repeats):
        plain += plain_rounds(args.rounds)
        ours += fedbench_rounds(args.rounds)
    a, b = statistics.median(ours), statistics.median(plain)
    print(f"threads={torch.get_num_threads()}  rounds={len(ours)} each (median seconds per round)")
    print(f"fedbench : {a:.3f} s/round")
    print(f"plain    : {b:.3f} s/round")
    print(f"ratio    : {a / b:.3f}  (fedbench / plain)")


if __name__ == "__main__":
    main()
