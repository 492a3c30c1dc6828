"""Throughput of fedbench's executors on whatever device is present; writes JSON under ``benchmarks/results/``.

    python benchmarks/gpu_throughput.py [--device auto|cpu|cuda] [--rounds 6] [--repeats 2] [--seeds 1] [--threads 1]
                                        [--models fedtrip_cnn,mlp] [--algorithms fedavg,fedtrip] [--workers 1,4,8]
                                        [--pool 60000,10000] [--no-big-models] [--out PATH]
    python benchmarks/gpu_throughput.py --device cuda --rounds 100 --seeds 5    # a GPU session: accuracies over seeds

Workloads:

- **Table IV column, sequential vs packed** (every device): FedTrip Table IV's set-up — 10 clients, 4 per round,
  600 samples per client drawn Dirichlet(0.5)-weighted from a 60,000-image pool of 1×28×28 stand-in data (MNIST's
  size; fedbench's synthetic class-template-plus-noise images, so that the model learns), E = 1, batch 50, SGD
  lr 0.01 momentum 0.9 — with the CNN (``fedtrip_cnn``) and the MLP, FedAvg and FedTrip, trained by the sequential
  and by the packed executor in this process, alternately. A round's time is local training plus aggregation (the
  test set, 10,000 images, is evaluated only after the last round; the first and the last round are not timed:
  warm-up, and evaluation, the same work for both executors). On a CPU the figure is the process's CPU time per
  round (robust on a shared machine), on CUDA wall-clock time. Reported: seconds per round (median), rounds per
  second, the packed/sequential speed-up, and the final test accuracy of both paths for each of ``--seeds`` seeds
  (they should agree up to floating-point summation order).
- **Worker processes** (``--workers 1,4,8``): N processes on the device at once, as ``fedbench run --jobs N``
  places them on one GPU, each training one sequential run of the first ``--models`` / ``--algorithms`` pair (seeds
  1..N); they start training together (after building their data and CUDA context). Reported per N: each process's
  median wall-clock seconds per round and their sum of rounds per second (run-rounds per second of the device), and
  the packed executor's wall-clock run-rounds per second in one process divided by the best N's (the packed path
  is meant to beat any number of processes by a wide margin on a GPU).
- **Big-model rounds** (CUDA only; ``--no-big-models`` leaves them out): a FedImpro Table 1 CIFAR-10 ResNet-18 round and a FedDr+ Table 2 CIFAR-100
  MobileNet round, their set-up taken from the recipes' first FedAvg run, on random stand-in data of the real sizes
  (two rounds; the second, which also evaluates the 10,000 test images, is timed); seconds per round with and without
  channels-last + fused SGD (``fedbench run --fast``, the default on CUDA; ``fedbench.engine.accel``).

The JSON records the device name, torch version, thread count and every figure (rewritten after each workload, so
that a benchmark stopped early keeps what it measured); no figure is asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import platform
import statistics
import time
from pathlib import Path

import numpy as np
import torch

from fedbench.data import register_dataset
from fedbench.data.base import DatasetArrays, DatasetMeta
from fedbench.engine import EngineOptions, run
from fedbench.execution.devices import resolve_device
from fedbench.execution.provenance import device_name
from fedbench.spec import RunSpec

RESULTS = Path(__file__).resolve().parent / "results"


def _random_arrays(
    name: str, shape: tuple[int, ...], classes: int, train: int, test: int, learnable: bool = False
) -> DatasetMeta:
    """A stand-in data set of the real size: uniform noise, or (``learnable``) fedbench's synthetic stand-in — a
    class template plus noise — so that final accuracies say something when the two executors are compared."""
    from fedbench.data.synthetic import synthetic_like

    meta = DatasetMeta(name=name, num_classes=classes, input_shape=shape, mean=(0.5,) * shape[0], std=(0.5,) * shape[0])
    if learnable:
        arrays = synthetic_like(meta, seed=0, train_size=train, test_size=test)
    else:
        rng = np.random.default_rng(0)
        arrays = DatasetArrays(
            meta=meta,
            train_x=rng.integers(0, 256, (train, *shape), dtype=np.uint8),
            train_y=rng.integers(0, classes, train),
            test_x=rng.integers(0, 256, (test, *shape), dtype=np.uint8),
            test_y=rng.integers(0, classes, test),
        )
    register_dataset(meta)(lambda root, **params: arrays)
    return meta


class _Rounds:
    def __init__(self):
        self.records = []

    def log_round(self, record) -> None:
        self.records.append(record)

    def truncate(self, after_round: int) -> None:
        pass


def table4_spec(model: str, algorithm: str, rounds: int, seed: int = 1) -> RunSpec:
    params = {"mu": 0.4} if algorithm == "fedtrip" else {}
    return RunSpec(
        algorithm=algorithm,
        algorithm_params=params,
        dataset="bench_mnist_size",
        model=model,
        partition="samples_per_client",
        partition_params={"alpha": 0.5, "samples_per_client": 600},
        num_clients=10,
        clients_per_round=4,
        rounds=rounds,
        local_epochs=1,
        batch_size=50,
        optimizer={"lr": 0.01, "momentum": 0.9},
        eval_every=rounds,
        seed=seed,
    )


def time_run(spec: RunSpec, device: torch.device, executor: str, **kwargs) -> dict:
    """Seconds per round (median over the rounds before the last): wall-clock on CUDA; on a CPU the process's CPU
    time, which other processes on a shared machine do not inflate (with one thread it is the round's compute).
    Without an ``acceleration`` given, the paths are timed without the CUDA speed switches (their own effect is timed
    apart: ``acceleration=...``), as the recorded figures were."""
    from fedbench.engine.accel import Acceleration  # local: as the other timings of this module import it

    kwargs.setdefault("acceleration", Acceleration())
    sink = _Rounds()
    cpu_marks = [time.process_time()]
    result = run(
        spec,
        sink,
        EngineOptions(device=device, on_round=lambda r: cpu_marks.append(time.process_time()), **kwargs).with_settings(
            packing=executor
        ),
    )
    # rounds 2 .. R-1: round 1 warms up (allocations, kernels), round R evaluates the test set
    wall = [r.wall_seconds for r in sink.records[1:-1]] or [sink.records[-1].wall_seconds]
    cpu = [b - a for a, b in zip(cpu_marks[1:-2], cpu_marks[2:-1])] or wall
    seconds = statistics.median(wall if device.type == "cuda" else cpu)
    return {
        "measure": "wall" if device.type == "cuda" else "process_cpu_time",
        "wall_seconds_per_round": statistics.median(wall),
        "executor": result.settings["packing"]["executor"],
        "reason": result.settings["packing"]["reason"],
        "seconds_per_round": seconds,
        "rounds_per_second": 1.0 / seconds,
        "final_test_acc": sink.records[-1].test_acc,
    }


def table4_data(pool: tuple[int, int]) -> None:
    """The Table IV stand-in (``pool``: training and test images, MNIST's 60,000 and 10,000 by default)."""
    _random_arrays("bench_mnist_size", (1, 28, 28), 10, pool[0], pool[1], learnable=True)


def table4_comparison(
    device: torch.device,
    rounds: int,
    repeats: int,
    seeds: int,
    models: tuple[str, ...] = ("fedtrip_cnn", "mlp"),
    algorithms: tuple[str, ...] = ("fedavg", "fedtrip"),
    on_row=lambda rows: None,
) -> list[dict]:
    """Best-of-``repeats`` timing of seed 1 (alternating executors: the machine may be shared), and the final test
    accuracy of both executors for seeds 1..``seeds``; ``on_row`` gets the rows so far after each workload."""
    rows: list[dict] = []
    for model in models:
        for algorithm in algorithms:
            best: dict[str, dict] = {}
            final: dict[str, list[float | None]] = {"sequential": [], "packed": []}
            for seed in range(1, seeds + 1):
                spec = table4_spec(model, algorithm, rounds, seed)
                for repeat in range(repeats if seed == 1 else 1):
                    for executor in ("sequential", "packed"):
                        timing = time_run(spec, device, executor)
                        if repeat == 0:
                            final[executor].append(timing["final_test_acc"])
                        if executor not in best or timing["seconds_per_round"] < best[executor]["seconds_per_round"]:
                            best[executor] = timing
            rows.append(
                {
                    "workload": f"table4 {model} {algorithm}",
                    "sequential": best["sequential"],
                    "packed": best["packed"],
                    "packed_speedup": best["sequential"]["seconds_per_round"] / best["packed"]["seconds_per_round"],
                    "final_test_acc_by_seed": final,
                }
            )
            on_row(rows)
    return rows


def _worker_process(index: int, device: str, model: str, algorithm: str, rounds: int, pool, ready, results) -> None:
    """One of ``--workers`` processes: builds its data and CUDA context, waits for the others, trains one run."""
    torch.set_num_threads(1)
    table4_data(pool)
    where = torch.device(device)
    if where.type == "cuda":
        torch.zeros(1, device=where)  # the CUDA context, before the clock starts
    ready.wait()
    began = time.monotonic()
    timing = time_run(table4_spec(model, algorithm, rounds, seed=index + 1), where, "sequential")
    results.put({**timing, "began": began, "ended": time.monotonic()})


def worker_processes(
    device: torch.device, counts: tuple[int, ...], rounds: int, model: str, algorithm: str, pool: tuple[int, int]
) -> list[dict]:
    """Run-rounds per second of N processes, each training one sequential run on ``device`` at the same time."""
    context = multiprocessing.get_context("spawn")  # CUDA cannot be used in forked processes
    rows = []
    for count in counts:
        ready, results = context.Barrier(count), context.Queue()
        processes = [
            context.Process(
                target=_worker_process,
                args=(i, str(device), model, algorithm, rounds, pool, ready, results),
            )
            for i in range(count)
        ]
        for process in processes:
            process.start()
        timings = [results.get() for _ in processes]
        for process in processes:
            process.join()
        per_round = [t["wall_seconds_per_round"] for t in timings]
        wall = max(t["ended"] for t in timings) - min(t["began"] for t in timings)
        rows.append(
            {
                "workers": count,
                "wall_seconds_per_round": per_round,
                "run_rounds_per_second": sum(1.0 / s for s in per_round),
                "whole_runs_wall_seconds": wall,
                "whole_runs_rounds_per_second": count * rounds / wall,
            }
        )
    return rows


def packed_over_workers(table4: list[dict], workers: list[dict]) -> float | None:
    """The packed executor's wall-clock run-rounds per second (one process, the first workload) over the best
    worker-process configuration's."""
    if not table4 or not workers:
        return None
    packed = 1.0 / table4[0]["packed"]["wall_seconds_per_round"]
    return packed / max(row["run_rounds_per_second"] for row in workers)


def recipe_round_spec(recipe: str, algorithm: str, model: str, dataset: str, stand_in: str) -> RunSpec:
    """The recipe's first ``algorithm`` run of ``model`` on ``dataset`` (its clients, batch, epochs, optimizer,
    augmentation), two rounds, on the random stand-in data set ``stand_in`` of the real size."""
    from fedbench.execution.batch import select_runs

    for planned in select_runs([recipe]):
        spec = planned.spec
        if spec.algorithm == algorithm and spec.model == model and spec.dataset == dataset:
            fields = spec.model_dump()
            fields.update(dataset=stand_in, dataset_params={}, rounds=2, eval_every=2)
            return RunSpec(**fields)
    raise SystemExit(f"{recipe}: no {algorithm} run of {model} on {dataset}")


def big_model_rounds(device: torch.device) -> list[dict]:
    from fedbench.engine.accel import Acceleration

    _random_arrays("bench_cifar10_size", (3, 32, 32), 10, 50_000, 10_000)
    _random_arrays("bench_cifar100_size", (3, 32, 32), 100, 50_000, 10_000)
    root = Path(__file__).resolve().parent.parent / "recipes"
    workloads = {
        "fedimpro table1 resnet18 cifar10 round": recipe_round_spec(
            str(root / "fedimpro_table1.toml"), "fedavg", "resnet18", "cifar10", "bench_cifar10_size"
        ),
        "feddrplus table2 mobilenet cifar100 round": recipe_round_spec(
            str(root / "feddrplus_table2.toml"), "fedavg", "mobilenet", "cifar100", "bench_cifar100_size"
        ),
    }
    rows = []
    for name, spec in workloads.items():
        plain = time_run(spec, device, "sequential", acceleration=Acceleration())
        fast = time_run(spec, device, "sequential", acceleration=Acceleration.for_device(device))
        rows.append({"workload": name, "plain": plain, "channels_last_fused": fast})
    return rows


def _names(text: str) -> tuple[str, ...]:
    return tuple(name for name in text.split(",") if name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--rounds", type=int, default=6, help="rounds per run (the first and last are not timed)")
    parser.add_argument("--repeats", type=int, default=2, help="timed repeats of seed 1 (the best counts)")
    parser.add_argument("--seeds", type=int, default=1, help="seeds whose final accuracies both executors report")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--models", type=_names, default=("fedtrip_cnn", "mlp"), help="comma-separated")
    parser.add_argument("--algorithms", type=_names, default=("fedavg", "fedtrip"), help="comma-separated")
    parser.add_argument(
        "--workers", type=lambda t: tuple(int(n) for n in _names(t)), default=(), help="e.g. 1,4,8: processes at once"
    )
    parser.add_argument(
        "--pool",
        type=lambda t: tuple(int(n) for n in _names(t)),
        default=(60_000, 10_000),
        help="training,test images of the stand-in (MNIST's sizes by default)",
    )
    parser.add_argument("--no-big-models", action="store_true", help="leave out the CUDA big-model rounds")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    began = time.perf_counter()
    out = args.out or RESULTS / f"gpu_throughput_{device.type}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    result: dict = {
        "device": device_name(device),
        "device_type": device.type,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "pool": list(args.pool),
        "table4": [],
    }

    def write(**figures) -> None:
        result.update(figures, benchmark_seconds=time.perf_counter() - began)
        out.write_text(json.dumps(result, indent=2) + "\n")

    table4_data(args.pool)
    rows = table4_comparison(
        device, args.rounds, args.repeats, args.seeds, args.models, args.algorithms, lambda rows: write(table4=rows)
    )
    write(table4=rows)
    if args.workers:
        workers = worker_processes(device, args.workers, args.rounds, args.models[0], args.algorithms[0], args.pool)
        write(workers=workers, packed_over_best_workers=packed_over_workers(result["table4"], workers))
    if device.type == "cuda" and not args.no_big_models:
        write(big_models=big_model_rounds(device))
    for row in result["table4"]:
        print(
            f"{row['workload']:28s} sequential {row['sequential']['seconds_per_round']:.3f} s/round  "
            f"packed {row['packed']['seconds_per_round']:.3f} s/round  speed-up {row['packed_speedup']:.2f}×"
        )
    for row in result.get("workers", []):
        print(f"{row['workers']} worker processes: {row['run_rounds_per_second']:.2f} run-rounds/s")
    if result.get("packed_over_best_workers") is not None:
        print(f"packed / best worker processes: {result['packed_over_best_workers']:.2f}×")
    for row in result.get("big_models", []):
        print(
            f"{row['workload']:44s} {row['plain']['seconds_per_round']:.2f} s/round, channels-last + fused "
            f"{row['channels_last_fused']['seconds_per_round']:.2f} s/round"
        )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
