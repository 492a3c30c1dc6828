"""A cost plan before a run (``fedbench plan``): the runs of some recipes, their training and evaluation FLOPs, and
the wall time they would take on this machine.

FLOPs come from ``fedbench.cost``: a model's measured FLOPs per sample (``model_card``: forward, and forward +
backward), the samples a client processes in a round (``cost.samples_per_round``, over the engine's
``local_steps_per_round``), and the method's own extra operations (``Algorithm.attach_flops_per_round``). A run's

    training FLOPs   = rounds × clients_per_round × (samples_per_round(n̄) × FLOPs_train + attach(n̄))
    evaluation FLOPs = evaluations × samples evaluated per evaluation × FLOPs_forward

with n̄ a client's training samples: its share of the partition (the partition's ``samples_per_client`` where it
fixes them, else the data set's registered training count divided evenly over the clients; client sizes of a
skewed partition differ, but the sum of their samples is the same, only the rounding of each client's last batch
is lost) less the test and validation splits the engine cuts from it (``client_test_fraction``,
``client_val_fraction``). An evaluation passes over the global test set (eval_mode global or both) and, for
personalised evaluation, over every client's test set (the splits, or one test set's worth drawn from the global
test set) and validation split. A data set without a registered count (and not ``--synthetic``, and not present
locally to be measured) leaves its runs' FLOPs unknown; the plan counts them and says so. Fine-tuning and methods'
second models (Ditto's personal model) beyond their ``attach`` term are not counted.

Time: a short calibration times a few real training steps (forward, backward, SGD step at the spec's batch size)
and an evaluation batch of each distinct model on the chosen device, giving FLOP/s per model; a run's time is
its FLOPs divided by those rates (per-step overheads are inside the measured rate, per-round ones —
aggregation, batch gathering — are not). ``--jobs N`` workers are assumed to scale perfectly (N× the
throughput of one), which holds on a CPU with a core per worker and is optimistic on one shared GPU.
Instead of measuring, ``assumed_calibration`` applies one sustained FLOP/s figure to every model (the README's
GPU-hour table). Library code: the CLI (``cli/plan.py``) prints.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import torch

from fedbench.algorithms import build_algorithm
from fedbench.cost import client_round_work, model_card
from fedbench.data import DATASETS, dataset_meta, static_input_shape
from fedbench.data.federated import load_arrays
from fedbench.data.provision import is_present
from fedbench.data.synthetic import synthetic_sizes
from fedbench.errors import ConfigError
from fedbench.execution.devices import resolve_device
from fedbench.execution.provenance import device_name
from fedbench.execution.selection import select_runs
from fedbench.models import build_model
from fedbench.recipes.additions import Additions
from fedbench.recipes.expand import PlannedRun
from fedbench.recipes.resolve import non_default
from fedbench.spec import RunSpec


@dataclass(frozen=True)
class Workload:
    """What the calibration times: one model at one batch size (hashable; a key of ``Calibration.rates``)."""

    model: str
    model_params: str  # canonical JSON of the spec's model_params
    input_shape: tuple[int, ...]
    num_classes: int
    batch_size: int

    @classmethod
    def of(cls, spec: RunSpec) -> Workload:
        return cls(
            model=spec.model,
            model_params=json.dumps(spec.model_params, sort_keys=True),
            input_shape=tuple(static_input_shape(spec.dataset, spec.dataset_params)),
            num_classes=dataset_meta(spec.dataset).num_classes,
            batch_size=spec.batch_size,
        )

    def card(self) -> dict[str, Any]:
        return model_card(
            self.model,
            num_classes=self.num_classes,
            input_shape=list(self.input_shape),
            **json.loads(self.model_params),
        )


@dataclass(frozen=True)
class Rate:
    train_flops_per_second: float
    eval_flops_per_second: float


@dataclass
class Calibration:
    """FLOP/s per workload on a device, measured (``calibrate``) or assumed (``assumed_calibration``)."""

    device: str
    method: str  # how the rates were obtained, said in the plan
    rates: dict[Workload, Rate]


@dataclass(frozen=True)
class RunCost:
    planned: PlannedRun
    workload: Workload
    train_flops: float | None  # None: the data set's size is unknown (see the module docstring)
    eval_flops: float | None
    size_source: str  # where n̄ came from

    def seconds(self, calibration: Calibration) -> float | None:
        if self.train_flops is None or self.eval_flops is None:
            return None
        rate = calibration.rates[self.workload]
        return self.train_flops / rate.train_flops_per_second + self.eval_flops / rate.eval_flops_per_second


@dataclass
class CellPlan:
    """The runs of one table cell (one recipe's labels, every seed)."""

    recipe: str
    labels: dict[str, str]
    runs: int = 0
    unknown: int = 0  # runs whose FLOPs are unknown
    train_flops: float = 0.0
    eval_flops: float = 0.0
    seconds: float = 0.0


@dataclass
class Plan:
    cells: list[CellPlan]
    costs: list[RunCost]
    calibration: Calibration
    jobs: int
    runs: int = 0
    unknown: int = 0
    train_flops: float = 0.0
    eval_flops: float = 0.0
    seconds: float = 0.0  # one worker, every run one after another
    wall_seconds: float = 0.0  # seconds / jobs (perfect scaling assumed)
    unknown_datasets: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "device": self.calibration.device,
            "calibration": self.calibration.method,
            "jobs": self.jobs,
            "runs": self.runs,
            "runs_without_estimate": self.unknown,
            "datasets_without_size": self.unknown_datasets,
            "train_flops": self.train_flops,
            "eval_flops": self.eval_flops,
            "seconds_one_worker": self.seconds,
            "wall_seconds": self.wall_seconds,
            "cells": [
                {
                    "recipe": c.recipe,
                    "labels": c.labels,
                    "runs": c.runs,
                    "runs_without_estimate": c.unknown,
                    "train_flops": c.train_flops,
                    "eval_flops": c.eval_flops,
                    "seconds_one_worker": c.seconds,
                }
                for c in self.cells
            ],
        }


# ------------------------------------------------------------------------------------------ FLOPs
# loader parameters that change how samples look, not how many there are (registered counts still hold)
SIZE_NEUTRAL_PARAMS = {"normalization", "normalize", "image_size", "size", "format", "labels"}


class DataSizes:
    """(training, test) samples of a run's data set: the stand-in's for ``synthetic``; else the registered
    ``counts`` of the default configuration (where the run changes no loader parameter but size-neutral ones); else, where the data set is present under ``data_root``, the sizes of
    the loaded arrays (loaded once per data set configuration); else None."""

    def __init__(self, data_root: str | None = None):
        self.data_root = data_root
        self.loaded: dict[str, tuple[int, int] | None] = {}

    def __call__(self, spec: RunSpec) -> tuple[tuple[int, int] | None, str]:
        info = DATASETS.info(spec.dataset)
        if spec.synthetic:
            shape = static_input_shape(spec.dataset, spec.dataset_params)
            return synthetic_sizes(shape, info.get("num_groups")), "synthetic stand-in size"
        counts = info.get("counts")
        if counts and set(non_default("dataset", spec.dataset, spec.dataset_params)) <= SIZE_NEUTRAL_PARAMS:
            return (int(counts[0]), int(counts[1])), "registered size"
        key = json.dumps([spec.dataset, spec.dataset_params], sort_keys=True)
        if key not in self.loaded:
            self.loaded[key] = self._load(spec)
        return self.loaded[key], "local data"

    def _load(self, spec: RunSpec) -> tuple[int, int] | None:
        if not is_present(spec.dataset, self.data_root):
            return None
        arrays = load_arrays(spec, self.data_root, False)
        return len(arrays.train_y), len(arrays.test_y)


def evaluations(spec: RunSpec) -> int:
    """Rounds the engine evaluates (``RunSpec.evaluates``)."""
    return sum(spec.evaluates(r) for r in range(1, spec.rounds + 1))


def client_splits(spec: RunSpec, part: int) -> tuple[int, int, int]:
    """(training, test, validation) samples of a client whose partition holds ``part``: the cut of
    ``data.federated.prepare_data``."""
    n_test = int(round(part * spec.client_test_fraction))
    n_val = int(round(part * spec.client_val_fraction))
    return part - n_test - n_val, n_test, n_val


def evaluated_samples(spec: RunSpec, part: int, test_size: int) -> int:
    """Samples one evaluation passes over: the global test set unless the evaluation is personal only; for
    personalised evaluation every client's test set (its split, else one test set's worth drawn from the global
    test set: class-matched or natural sets share it out) and its validation split."""
    _, n_test, n_val = client_splits(spec, part)
    samples = test_size if spec.eval_mode != "personal" else 0
    if spec.eval_mode != "global":
        samples += spec.num_clients * n_test if spec.client_test == "split" else test_size
        samples += spec.num_clients * n_val
    return samples


def run_cost(planned: PlannedRun, data_sizes: DataSizes | None = None) -> RunCost:
    spec = planned.spec
    workload = Workload.of(spec)
    sizes, origin = (data_sizes or DataSizes())(spec)
    if sizes is None:  # the test set's size is unknown too: no estimate rather than a partial one
        return RunCost(planned, workload, None, None, "unknown data set size")
    fixed = spec.partition_params.get("samples_per_client")
    if fixed:
        part, source = int(fixed), "partition samples_per_client"
    else:
        part, source = sizes[0] // spec.num_clients, f"{origin} / clients"
    per_client = client_splits(spec, part)[0]
    card = workload.card()
    client_round = client_round_work(spec, per_client, card, build_algorithm(spec.algorithm, spec.algorithm_params))
    train = float(spec.rounds * spec.clients_per_round * client_round)
    evaluation = float(evaluations(spec) * evaluated_samples(spec, part, sizes[1]) * card["flops_forward"])
    return RunCost(planned, workload, train, evaluation, source)


def build_plan(
    planned: list[PlannedRun], calibration: Calibration, jobs: int = 1, data_sizes: DataSizes | None = None
) -> Plan:
    """Costs of ``planned`` per run, per table cell and in total, with times from ``calibration``."""
    if jobs < 1:
        raise ConfigError(f"--jobs {jobs}: expected a positive number of workers")
    data_sizes = data_sizes or DataSizes()
    costs = [run_cost(p, data_sizes) for p in planned]
    plan = Plan(cells=[], costs=costs, calibration=calibration, jobs=jobs)
    cells: dict[tuple[str, str], CellPlan] = {}
    unknown_datasets: set[str] = set()
    for cost in costs:
        p = cost.planned
        key = (p.recipe, json.dumps(p.labels, sort_keys=True))
        cell = cells.setdefault(key, CellPlan(p.recipe, dict(p.labels)))
        cell.runs += 1
        plan.runs += 1
        seconds = cost.seconds(calibration)
        if cost.train_flops is None or cost.eval_flops is None or seconds is None:
            cell.unknown += 1
            plan.unknown += 1
            unknown_datasets.add(p.spec.dataset)
            continue
        cell.train_flops += cost.train_flops
        cell.eval_flops += cost.eval_flops
        cell.seconds += seconds
        plan.train_flops += cost.train_flops
        plan.eval_flops += cost.eval_flops
        plan.seconds += seconds
    plan.cells = list(cells.values())
    plan.wall_seconds = plan.seconds / jobs
    plan.unknown_datasets = sorted(unknown_datasets)
    return plan


# ------------------------------------------------------------------------------------------ calibration
def workloads(planned: Iterable[PlannedRun]) -> list[Workload]:
    return list(dict.fromkeys(Workload.of(p.spec) for p in planned))


def assumed_calibration(items: Iterable[Workload], flops_per_second: float, device: str) -> Calibration:
    """Every workload at one assumed sustained FLOP/s, training and evaluation alike."""
    if not flops_per_second > 0:
        raise ConfigError(f"--throughput {flops_per_second / 1e12:g}: expected a positive TFLOP/s figure")
    rate = Rate(flops_per_second, flops_per_second)
    return Calibration(device, f"assumed {flops_per_second / 1e12:g} TFLOP/s sustained", {w: rate for w in items})


def calibrate(
    items: Iterable[Workload],
    device: Any,
    *,
    threads: int = 1,
    seconds: float = 0.5,
    max_steps: int = 50,
    warmup: int = 2,
) -> Calibration:
    """Measure FLOP/s per workload on ``device`` with ``threads`` CPU threads (as ``fedbench run --threads``): SGD
    steps at its batch size after ``warmup`` ones, until ``seconds`` have passed (at least 3, at most ``max_steps``
    steps), and evaluation batches of up to 256 samples under inference mode, likewise. Random inputs (the
    arithmetic does not depend on the values); the global RNG and the thread count are left as they were."""
    device = torch.device(device)
    rates: dict[Workload, Rate] = {}
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)

    def timed(fn) -> float:
        """Seconds per call of ``fn`` (after the warm-up calls)."""
        for _ in range(warmup):
            fn()
        sync()
        calls, began = 0, time.perf_counter()
        while calls < 3 or (calls < max_steps and time.perf_counter() - began < seconds):
            fn()
            calls += 1
            if calls >= 3:
                sync()
        return max(time.perf_counter() - began, 1e-9) / calls

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    busy = cpu_contention(threads) if device.type == "cpu" else None  # read before the measurement adds to it
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(0)
            for item in items:
                rates[item] = _measure(item, device, timed)
        name = device_name(device)  # with the calibration's thread count
    finally:
        torch.set_num_threads(previous_threads)
    method = f"measured: ~{seconds:g} s of training steps and of evaluation batches per model"
    return Calibration(name, f"{method}; {busy}" if busy else method, rates)


def cpu_contention(threads: int) -> str | None:
    """What the plan must say when other processes were using the CPUs a calibration times on (None when not):
    its steps then share cores, so every estimate overstates a quiet machine's. Busy means the 1-minute load
    average plus the calibration's own threads exceeds the CPUs (one worker of `fedbench run --jobs 2` on two
    cores already makes a 1-thread calibration share them). Unknown (no load average, e.g. Windows) is not busy."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
    cpus = os.cpu_count() or 1
    if load + threads <= cpus:
        return None
    return (
        f"the CPUs were busy while it measured (load average {load:.1f} on {cpus} CPUs, {threads} thread(s) "
        "measuring), so these times overstate a quiet machine's: plan again when nothing else runs"
    )


def _measure(item: Workload, device: Any, timed: Any) -> Rate:
    """FLOP/s of one workload: ``timed(fn)`` gives seconds per call of a training step and of an evaluation batch."""
    card = item.card()
    model = build_model(item.model, item.num_classes, item.input_shape, **json.loads(item.model_params))
    model = model.to(device).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(item.batch_size, *item.input_shape, device=device)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        model(x).float().square().mean().backward()  # a loss touching every output: a full backward
        optimizer.step()

    train_seconds = timed(step)
    model.eval()
    batch = torch.randn(256, *item.input_shape, device=device)

    def evaluate() -> None:
        with torch.inference_mode():
            model(batch)

    eval_seconds = timed(evaluate)
    return Rate(
        item.batch_size * card["flops_train"] / train_seconds, batch.shape[0] * card["flops_forward"] / eval_seconds
    )


def plan_recipes(
    recipes: list[Any],
    *,
    scale: str = "full",
    seeds: list[int] | None = None,
    only: dict[str, set[str]] | None = None,
    overrides: dict[str, Any] | None = None,
    synthetic: bool = False,
    device: str = "auto",
    jobs: int = 1,
    threads: int = 1,
    throughput_tflops: float | None = None,
    data_root: str | None = None,
    additions: Additions | None = None,
) -> Plan:
    """``fedbench plan``: compile ``recipes`` as ``fedbench run`` would (``additions``: its ``--add`` and
    ``--set-for``), then calibrate on ``device`` (or assume ``throughput_tflops`` sustained TFLOP/s) and cost every
    run."""
    if jobs < 1:
        raise ConfigError(f"--jobs {jobs}: expected a positive number of workers")
    planned = select_runs(
        recipes,
        scale=scale,
        seeds=seeds,
        only=only,
        overrides=overrides,
        synthetic=synthetic,
        device=device,
        additions=additions,
    )
    items = workloads(planned)
    if throughput_tflops is not None:
        calibration = assumed_calibration(items, throughput_tflops * 1e12, device)
    else:
        calibration = calibrate(items, resolve_device(device), threads=threads)
    return build_plan(planned, calibration, jobs, DataSizes(data_root))
