"""The round loop (DESIGN.md §3): sample → broadcast → local training → aggregate → evaluate → log →
checkpoint. The engine never reads TOML, never prints tables and never touches the registry: it
reports each finished round to a ``RunSink``.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np
import torch
from torch import nn

from fedbench.algorithms import build_algorithm
from fedbench.data import dataset_meta, load_dataset
from fedbench.data.partition import (
    PARTITIONERS,
    class_matched_test_sets,
    make_partition,
    natural_test_sets,
    partition_fingerprint,
)
from fedbench.data.store import TensorData
from fedbench.data.synthetic import synthetic_dataset
from fedbench.engine.checkpoint import load_checkpoint, save_checkpoint
from fedbench.engine.context import ClientContext, ServerState, SpareModels, load_weights
from fedbench.engine.evaluation import evaluate
from fedbench.engine.personal import check_finetune, finetune_evaluation, personal_evaluation, track_finetune_start
from fedbench.errors import ConfigError, RunDiverged
from fedbench.models import build_model
from fedbench.seeding import derive_seed, numpy_rng, torch_generator
from fedbench.spec import RunSpec


@dataclass
class RoundRecord:
    round: int
    train_loss: float
    wall_seconds: float
    bytes_up: int
    bytes_down: int
    test_acc: float | None = None
    test_loss: float | None = None
    personal_mean: float | None = None
    personal_weighted_mean: float | None = None
    personal_std: float | None = None
    personal_per_client: list[float] | None = None
    personal_val_mean: float | None = None
    personal_val_per_client: list[float] | None = None
    personal_metrics: dict[str, list[float | None]] | None = None
    finetune_mean: float | None = None
    finetune_weighted_mean: float | None = None
    finetune_std: float | None = None
    finetune_per_client: list[float] | None = None


class RunSink(Protocol):
    def log_round(self, record: RoundRecord) -> None: ...
    def truncate(self, after_round: int) -> None: ...


@dataclass
class RunResult:
    status: str                      # "done" or "diverged"
    rounds_done: int
    diverged_round: int | None = None
    message: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class FederatedData:
    tensors: TensorData
    client_train: list[torch.Tensor]
    client_test: list[torch.Tensor]
    num_classes: int
    input_shape: tuple[int, ...]
    info: dict[str, Any]
    client_val: list[torch.Tensor] = field(default_factory=list)   # per-client validation splits (may be empty)
    client_test_from_test: bool = False   # client_test indexes the global test set (spec.client_test != "split")

    def client_test_data(self, client: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A client's test inputs and labels: from the training pool (``client_test = split``) or the global test set."""
        index = self.client_test[client]
        if self.client_test_from_test:
            return self.tensors.test_x[index], self.tensors.test_y[index]
        return self.tensors.train_x[index], self.tensors.train_y[index]


_ARRAYS_CACHE: dict[str, Any] = {}


def load_arrays(spec: RunSpec, data_root: str | Path | None = None, verify: bool = True):
    """The run's data set as arrays; the last one loaded stays cached in the process, since a
    recipe's runs usually share it. Synthetic stand-ins depend on the dataset (and its ``image_size``) only,
    not on the run seed, so every run of a table sees the same stand-in data, as it would a real data set."""
    key = repr((spec.dataset, sorted(spec.dataset_params.items()), spec.synthetic, str(data_root), verify))
    if key not in _ARRAYS_CACHE:
        _ARRAYS_CACHE.clear()
        if spec.synthetic:
            _ARRAYS_CACHE[key] = synthetic_dataset(spec.dataset, image_size=spec.dataset_params.get("image_size"))
        else:
            _ARRAYS_CACHE[key] = load_dataset(spec.dataset, data_root, verify=verify, **spec.dataset_params)
    return _ARRAYS_CACHE[key]


def partition_clients(spec: RunSpec, arrays) -> list[np.ndarray]:
    if arrays.meta.task != "classification" and not PARTITIONERS.info(spec.partition).get("label_free"):
        raise ConfigError(
            f"partition {spec.partition!r} splits by class labels, but dataset {spec.dataset!r} is a {arrays.meta.task} "
            "task whose labels are masks; use partition 'natural' (one site per client) or 'iid'"
        )
    return make_partition(
        spec.partition, arrays.train_y, arrays.train_groups, spec.num_clients,
        numpy_rng(spec.seed, "partition"), dict(spec.partition_params),
    )


def client_test_sets(spec: RunSpec, arrays, train_parts: list[np.ndarray]) -> list[np.ndarray]:
    """Per-client test sets drawn from the global test set (``spec.client_test``), as indices into test_x/test_y:
    ``class_matched`` follows each client's training class counts (FedDr+ §2.3: sharding's ``rand_set_all`` with
    ``disjoint = true``, LDA's ``lda_test`` with ``disjoint = false``); ``natural`` gives each client the test
    samples of its natural group (site, hospital, domain)."""
    if spec.client_test == "natural":
        if arrays.train_groups is None or arrays.test_groups is None:
            raise ConfigError(f"client_test = 'natural' needs a dataset with natural groups in train and test; "
                              f"{spec.dataset!r} has none")
        return natural_test_sets(train_parts, arrays.train_groups, arrays.test_groups)
    if arrays.meta.task != "classification":
        raise ConfigError(f"client_test = 'class_matched' matches class labels, but dataset {spec.dataset!r} is a "
                          f"{arrays.meta.task} task; use client_test 'natural' or 'split'")
    return class_matched_test_sets(train_parts, arrays.train_y, arrays.test_y, numpy_rng(spec.seed, "client-test"),
                                   **spec.client_test_params)


def prepare_data(spec: RunSpec, device: torch.device, data_root: str | Path | None = None,
                 verify: bool = True) -> FederatedData:
    """Load (or synthesise) the data set, partition the training pool, move everything to ``device``."""
    arrays = load_arrays(spec, data_root, verify)
    parts = partition_clients(spec, arrays)
    client_train, client_test, client_val, train_parts = [], [], [], []
    for client, part in enumerate(parts):
        if spec.client_test_fraction > 0 or spec.client_val_fraction > 0:
            # test first, then validation, from one shuffle: adding a validation split keeps the test split
            shuffled = numpy_rng(spec.seed, "client-split", client).permutation(part)
            n_test = int(round(len(part) * spec.client_test_fraction))
            n_val = int(round(len(part) * spec.client_val_fraction))
            train_part, test_part = np.sort(shuffled[n_test + n_val:]), np.sort(shuffled[:n_test])
            val_part = np.sort(shuffled[n_test: n_test + n_val])
        else:
            train_part, test_part, val_part = part, part[:0], part[:0]
        train_parts.append(train_part)
        client_train.append(torch.from_numpy(train_part).to(device))
        client_test.append(torch.from_numpy(test_part).to(device))
        client_val.append(torch.from_numpy(val_part).to(device))
    if spec.client_test != "split":
        client_test = [torch.from_numpy(t).to(device) for t in client_test_sets(spec, arrays, train_parts)]
    info = dict(arrays.info)
    info["partition_fingerprint"] = partition_fingerprint(parts)
    info["client_sizes"] = [len(p) for p in parts]
    return FederatedData(
        TensorData.from_arrays(arrays, device), client_train, client_test,
        arrays.meta.num_classes, tuple(arrays.meta.input_shape), info, client_val,
        client_test_from_test=spec.client_test != "split",
    )


def client_schedule(spec: RunSpec) -> list[list[int]]:
    """The clients of every round, drawn up front from the run's sampling stream (uniform without
    replacement), so every algorithm in a table sees the same clients in the same order."""
    rng = numpy_rng(spec.seed, "sampling")
    return [sorted(rng.choice(spec.num_clients, spec.clients_per_round, replace=False).tolist())
            for _ in range(spec.rounds)]


def init_model(spec: RunSpec, num_classes: int, input_shape: tuple[int, ...], device: torch.device) -> nn.Module:
    """Deterministic init from the run's init stream: every method of a table starts from the same w^0."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(spec.seed, "init"))
        model = build_model(spec.model, num_classes, input_shape, **spec.model_params)
    return model.to(device)


def load_global(model: nn.Module, server: ServerState) -> None:
    load_weights(model, server.params, server.buffers)


def run(
    spec: RunSpec,
    sink: RunSink,
    *,
    device: torch.device | str = "cpu",
    checkpoint_path: Path | None = None,
    data_root: str | Path | None = None,
    eval_batch_size: int = 1000,
    on_round: Callable[[RoundRecord], None] | None = None,
    stop_after_round: int | None = None,
    verify: bool = True,
) -> RunResult:
    """Train ``spec`` from scratch or from its checkpoint; ``stop_after_round`` simulates an
    interruption (tests) by returning early with status ``interrupted``."""
    device = torch.device(device)
    algorithm = build_algorithm(spec.algorithm, spec.algorithm_params)
    data = prepare_data(spec, device, data_root, verify)
    schedule = client_schedule(spec)
    model = init_model(spec, data.num_classes, data.input_shape, device)
    num_params = sum(p.numel() for p in model.parameters())
    spare_models = SpareModels(model)
    frozen = torch.cat([torch.full((p.numel(),), not p.requires_grad, device=device) for p in model.parameters()])
    frozen_values = nn.utils.parameters_to_vector(model.parameters()).detach()[frozen].clone()

    server = ServerState(
        params=nn.utils.parameters_to_vector(model.parameters()).detach().clone(),
        buffers={name: b.detach().clone() for name, b in model.named_buffers()},
    )
    algorithm.bind_model(spec, model, data.input_shape, data.num_classes)
    check_finetune(spec, model)   # a fine-tuning loss the model cannot take fails now, not after the last round
    algorithm.init_server(server)
    client_states: dict[int, dict[str, Any]] = {}
    start_round = 0
    finetune_start: dict[str, Any] | None = None   # global weights fine-tuning starts from (spec.finetune)

    checkpoint = load_checkpoint(checkpoint_path, spec.spec_hash, device) if checkpoint_path else None
    if checkpoint is not None:
        start_round = checkpoint["round"]
        server = ServerState(**checkpoint["server"])
        client_states = checkpoint["client_states"]
        finetune_start = checkpoint.get("finetune_start")
    sink.truncate(start_round)   # drop rounds logged after the last checkpoint; they are redone

    info = dict(data.info, num_params=num_params, resumed_from=start_round)
    download = (num_params + algorithm.extra_download_floats(num_params)) * 4
    upload = (num_params + algorithm.extra_upload_floats(num_params)) * 4
    round_index = start_round
    try:
        for round_index in range(start_round + 1, spec.rounds + 1):
            began = time.perf_counter()
            lr = spec.optimizer.lr * spec.lr_schedule.factor(round_index)
            payload = algorithm.payload(server, round_index)
            updates = []
            for client in schedule[round_index - 1]:
                load_global(model, server)
                torch.manual_seed(derive_seed(spec.seed, "dropout", round_index, client))
                ctx = ClientContext(
                    spec=spec, client_id=client, round_index=round_index, model=model, server=server,
                    payload=payload, state=client_states.setdefault(client, {}), data=data.tensors,
                    indices=data.client_train[client], device=device, lr=lr,
                    generator=torch_generator(spec.seed, "client", round_index, client, device=device),
                    spare_models=spare_models,
                )
                update = algorithm.local_train(ctx)
                if not math.isfinite(update.train_loss):
                    raise RunDiverged(round_index, f"client {client} training loss is {update.train_loss}")
                updates.append(update)
            algorithm.aggregate(server, updates, round_index)
            if frozen.any():   # frozen parameters (fixed ETF/orthonormal classifiers) stay exact
                server.params[frozen] = frozen_values
            if not bool(torch.isfinite(server.params).all()):
                raise RunDiverged(round_index, "aggregated global weights contain NaN/inf")

            record = RoundRecord(
                round=round_index,
                train_loss=float(np.average([u.train_loss for u in updates], weights=[u.num_samples for u in updates])),
                wall_seconds=0.0, bytes_up=upload * len(updates), bytes_down=download * len(updates),
            )
            if round_index % spec.eval_every == 0 or round_index == spec.rounds:
                load_global(model, server)
                if spec.eval_mode in ("global", "both"):
                    # test_acc holds the task's primary metric: accuracy, or mean Dice for segmentation
                    record.test_acc, record.test_loss = evaluate(model, data.tensors.test_x, data.tensors.test_y,
                                                                 eval_batch_size, data.tensors.task)
                    if not math.isfinite(record.test_loss):
                        raise RunDiverged(round_index, "test loss is not finite")
                if spec.eval_mode in ("personal", "both"):
                    personal_evaluation(spec, algorithm, model, server, client_states, data, record, device,
                                        eval_batch_size, spare_models, lr)
                finetune_start = track_finetune_start(spec, record, server, finetune_start)
            if spec.finetune is not None and round_index == spec.rounds:
                finetune_evaluation(spec, algorithm, model, server, finetune_start, client_states, data, record,
                                    device, eval_batch_size, spare_models, frozen)
            record.wall_seconds = time.perf_counter() - began
            sink.log_round(record)
            if checkpoint_path is not None:
                save_checkpoint(checkpoint_path, {
                    "spec_hash": spec.spec_hash, "round": round_index,
                    "server": {"params": server.params, "buffers": server.buffers, "state": server.state},
                    "client_states": client_states, "finetune_start": finetune_start,
                })
            if on_round is not None:
                on_round(record)
            if stop_after_round is not None and round_index >= stop_after_round and round_index < spec.rounds:
                return RunResult("interrupted", round_index, info=info)
    except RunDiverged as exc:
        return RunResult("diverged", exc.round_index - 1, diverged_round=exc.round_index, message=str(exc), info=info)
    return RunResult("done", spec.rounds, info=info)
