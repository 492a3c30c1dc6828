"""What a FedTrip Table IV round costs on the CPU, and what Table IV's MNIST and FMNIST columns cost.

A round is a test pass over 10,000 images plus 4 clients × 12 local steps of 50 samples (MNIST, 600 per
client) or 4 × 20 (FMNIST, 1,000 per client). Each model is timed twice: built from plain PyTorch layers
in the paper's order, and as fedbench builds it (``fedbench.models.layers``: strided-maximum pooling in
evaluation, pooling before the ReLU, C5 as a matrix product, the convolutions' weight gradients as
convolutions). Both compute the same function; ``tests/models/test_layers.py`` checks it.

    python benchmarks/evaluation_cost.py [--threads 1]
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn

from fedbench.engine.evaluation import evaluate
from fedbench.models import build_model

METHODS, SEEDS, ROUNDS, WORKERS = 6, 10, 100, 2


def best_of(fn, repeats: int = 3) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - began)
    return best


def paper_order_cnn() -> nn.Module:
    """FedTrip's LeNet-5 (3 conv) from plain PyTorch layers: Conv-ReLU-Pool, C5 as a convolution."""
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(16, 120, 5),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(120, 84),
        nn.ReLU(),
        nn.Linear(84, 10),
    )


def round_cost(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float, float]:
    """(test pass over 10,000 images, MNIST round's training, FMNIST round's training) in seconds."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def train(steps: int) -> None:
        model.train()
        for step in range(steps):
            batch = slice(step * 50 % 9950, step * 50 % 9950 + 50)
            loss = F.cross_entropy(model(x[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    return best_of(lambda: evaluate(model, x, y, 1000)), best_of(lambda: train(48)), best_of(lambda: train(80))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    x, y = torch.randn(10_000, 1, 28, 28), torch.randint(0, 10, (10_000,))
    print(f"threads={torch.get_num_threads()}; seconds per round (test pass + local training)")
    per_seed_method = 0.0
    for name, build in (
        ("mlp", lambda: build_model("mlp", 10, (1, 28, 28))),
        ("cnn, PyTorch layers", paper_order_cnn),
        ("cnn, fedbench", lambda: build_model("fedtrip_cnn", 10, (1, 28, 28))),
    ):
        torch.manual_seed(0)
        test, mnist, fmnist = round_cost(build(), x, y)
        run_mnist, run_fmnist = ROUNDS * (test + mnist), ROUNDS * (test + fmnist)
        print(
            f"{name:20s} test pass {test:.3f}   train MNIST {mnist:.3f}, FMNIST {fmnist:.3f}   "
            f"→ {ROUNDS} rounds ≈ {run_mnist:.0f} s (MNIST), {run_fmnist:.0f} s (FMNIST)"
        )
        if name != "cnn, PyTorch layers":
            per_seed_method += run_mnist + run_fmnist
    runs = 4 * METHODS * SEEDS
    minutes = per_seed_method * METHODS * SEEDS / WORKERS / 60
    print(
        f"Table IV MNIST+FMNIST columns ({runs} runs) with --jobs {WORKERS}: ≈ {minutes:.0f} min of training "
        f"and evaluation (no start-up, data loading or registry time)"
    )


if __name__ == "__main__":
    main()
