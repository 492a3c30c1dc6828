"""What recording each per-round diagnostic costs: seconds per round with it on against off, and the bytes it stores.

Workload: the quickstart's setting (scikit-learn's 8×8 digits, the digit CNN, 10 clients of a Dirichlet-0.3
partition, all sampled every round, 1 local epoch of batch 32), trained by LG-Mix (the one method here that reports
``mixing_weights``) with personal evaluation and validation splits, so that every diagnostic of the catalogue can
be recorded. Each diagnostic is recorded on every round. Runs with and without it alternate (``--repeats`` times,
``--rounds`` rounds each), so a change of the machine's load hits both alike; the table gives the median seconds per
round of each, the difference, and the median JSON size of one round's value (what the registry stores).

    python benchmarks/diagnostics_cost.py [--rounds 4] [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from fedbench.engine import EngineOptions, run
from fedbench.spec import RunSpec
from fedbench.vocab.diagnostics import DIAGNOSTIC_NAMES

SETTING = dict(
    algorithm="lgmix",
    dataset="digits",
    model="digits_cnn",
    partition="dirichlet",
    partition_params={"alpha": 0.3, "min_size": 10},
    num_clients=10,
    clients_per_round=10,
    local_epochs=1,
    batch_size=32,
    optimizer={"name": "sgd", "lr": 0.05, "momentum": 0.9},
    eval_mode="both",
    client_test_fraction=0.2,
    client_val_fraction=0.1,
)


class RecordingSink:
    def __init__(self) -> None:
        self.records: list = []

    def log_round(self, record) -> None:
        self.records.append(record)

    def truncate(self, after_round: int) -> None:
        self.records = [r for r in self.records if r.round <= after_round]


def rounds_of(rounds: int, diagnostics: tuple[str, ...]) -> list:
    sink = RecordingSink()
    run(RunSpec(**SETTING, rounds=rounds, diagnostics=diagnostics), sink, EngineOptions(device="cpu"))
    return sink.records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rounds_of(1, ())  # warm-up: the data set's load, allocator and kernels
    print(f"threads={args.threads}, {args.rounds} rounds × {args.repeats} repeats each; median seconds per round")
    print(f"{'diagnostic':<22}{'off s':>8}{'on s':>8}{'+ s':>8}{'bytes/round':>13}")
    for name in DIAGNOSTIC_NAMES:
        off: list[float] = []
        on: list[float] = []
        sizes: list[int] = []
        for _ in range(args.repeats):
            off += [r.wall_seconds for r in rounds_of(args.rounds, ())]
            recorded = rounds_of(args.rounds, (name,))
            on += [r.wall_seconds for r in recorded]
            sizes += [len(json.dumps(r.diagnostics[name])) for r in recorded if r.diagnostics and name in r.diagnostics]
        a, b = statistics.median(off), statistics.median(on)
        size = f"{statistics.median(sizes):,.0f}" if sizes else "not recorded"
        print(f"{name:<22}{a:>8.3f}{b:>8.3f}{b - a:>8.3f}{size:>13}")


if __name__ == "__main__":
    main()
