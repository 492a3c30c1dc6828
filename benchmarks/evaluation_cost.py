"""What a FedTrip Table IV round costs on the CPU: evaluation of the full 10,000-image test set versus
a round's local training (4 clients × 12 steps of 50 for MNIST; 20 steps for FMNIST), for the MLP and
the CNN, with PyTorch's max-pool kernel and with fedbench's exact evaluation fast path.

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
from fedbench.models.layers import MaxPool2d


def best_of(fn, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        began = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - began)
    return best


def with_torch_pooling(model: nn.Module) -> nn.Module:
    for name, module in model.named_modules():
        for child_name, child in module.named_children():
            if isinstance(child, MaxPool2d):
                setattr(module, child_name, nn.MaxPool2d(child.kernel_size, child.stride))
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    x, y = torch.randn(10_000, 1, 28, 28), torch.randint(0, 10, (10_000,))
    print(f"threads={torch.get_num_threads()}; seconds per round")
    for name in ("mlp", "fedtrip_cnn"):
        torch.manual_seed(0)
        model = build_model(name, 10, (1, 28, 28))
        fast = best_of(lambda: evaluate(model, x, y, 1000))
        slow = best_of(lambda: evaluate(with_torch_pooling(build_model(name, 10, (1, 28, 28))), x, y, 1000))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

        def train(steps: int) -> None:
            model.train()
            for step in range(steps):
                batch = slice(step * 50 % 9950, step * 50 % 9950 + 50)
                loss = F.cross_entropy(model(x[batch]), y[batch])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()

        mnist, fmnist = best_of(lambda: train(48)), best_of(lambda: train(80))
        print(f"{name:12s} eval 10k: {fast:.3f} (torch max-pool {slow:.3f})   train MNIST round {mnist:.3f}, "
              f"FMNIST round {fmnist:.3f}   → 100 rounds ≈ {100 * (fast + mnist):.0f} s (MNIST), "
              f"{100 * (fast + fmnist):.0f} s (FMNIST)")


if __name__ == "__main__":
    main()
