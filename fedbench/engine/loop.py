"""The round loop (DESIGN.md §3): sample → broadcast → local training → aggregate → evaluate → log →
checkpoint. The engine never reads TOML, never prints tables and never touches the registry: it
reports each finished round to a ``RunSink``.

``run`` is ``set_up`` (round 0), then ``train``: ``resume`` (from the run's checkpoint, if any) and for each round
``train_round``, ``evaluate_round``, the sink's ``log_round`` and ``checkpoint_round``. The engine contract's checks
(``fedbench/execution/contract/``) call ``set_up`` and ``train`` themselves, to change one thing in between.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.context import ServerState, SpareModels, load_weights
from fedbench.algorithms.functional import flat_parameters
from fedbench.checkpoint.format import (
    CheckpointLedger,
    CheckpointRejected,
    read_checkpoint,
    save_checkpoint,
)
from fedbench.checkpoint.location import client_state_folder
from fedbench.data.federated import prepare_data
from fedbench.engine import packed
from fedbench.engine.accel import (
    compiled_forward,
    optimizer_options,
    prepare_model,
    set_precision,
)
from fedbench.engine.client_states import ClientStateError, ClientStates
from fedbench.engine.diagnostics import check_diagnostics, round_diagnostics
from fedbench.engine.diagnostics.base import Aggregated
from fedbench.engine.diagnostics.divergence import layer_slices
from fedbench.engine.evaluation import evaluate
from fedbench.engine.options import EngineOptions
from fedbench.engine.packed import TrainingPath, choose_training_path
from fedbench.engine.personal import check_finetune, finetune_evaluation, personal_evaluation, track_finetune_start
from fedbench.engine.state import RunState
from fedbench.errors import FedbenchError, RunDiverged, WriteFailed
from fedbench.models import build_model
from fedbench.seeding import derive_seed, numpy_rng
from fedbench.spec import RunSpec
from fedbench.vocab.status import RunStatus


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
    # {name: JSON value} on the rounds the spec diagnoses (``fedbench.engine.diagnostics``); None on the others
    diagnostics: dict[str, Any] | None = None


class RunSink(Protocol):
    def log_round(self, record: RoundRecord) -> None: ...
    def truncate(self, after_round: int) -> None: ...


@dataclass
class RunResult:
    status: RunStatus  # DONE or DIVERGED
    rounds_done: int
    # non-spec choices recorded in provenance: "packing" (``TrainingPath.as_dict``: which path trained it and
    # why), "acceleration" (``Acceleration.as_dict``), "precision" and "tf32" (``accel.set_precision``)
    settings: dict[str, Any] = field(default_factory=dict)
    diverged_round: int | None = None
    message: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


def client_schedule(spec: RunSpec) -> list[list[int]]:
    """The clients of every round, drawn up front from the run's sampling stream (uniform without
    replacement), so every algorithm in a table sees the same clients in the same order."""
    rng = numpy_rng(spec.seed, "sampling")
    return [
        sorted(rng.choice(spec.num_clients, spec.clients_per_round, replace=False).tolist()) for _ in range(spec.rounds)
    ]


def check_client_loss(update, round_index: int) -> None:
    if not math.isfinite(update.train_loss):
        raise RunDiverged(round_index, f"client {update.client_id} training loss is {update.train_loss}")


def init_model(spec: RunSpec, num_classes: int, input_shape: tuple[int, ...], device: torch.device) -> nn.Module:
    """Deterministic init from the run's init stream: every method of a table starts from the same w^0."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derive_seed(spec.seed, "init"))
        model = build_model(spec.model, num_classes, input_shape, **spec.model_params)
    return model.to(device)


def resume_point(
    spec: RunSpec,
    fresh: ServerState,
    path: Path | None,
    ledger: CheckpointLedger | None,
    device: torch.device,
) -> tuple[dict[str, Any] | None, str | None]:
    """(payload, None) to resume from the checkpoint at ``path``; (None, None) to start afresh when there is none;
    (None, reason) when there is one that fails a check: not in the format (an old pickle, a planted file), of
    another spec, truncated, changed since the ledger recorded it, or laid out unlike this run's state (another
    model, another fedbench). Nothing in the file is unpickled."""
    if path is None or not path.exists():
        return None, None
    try:
        expected = ledger.checkpoint_sha256() if ledger is not None else None
        payload = read_checkpoint(path, spec.spec_hash, device, expected, bound=ledger is not None)
        check_layout(spec, payload, fresh)
    except CheckpointRejected as exc:
        return None, exc.reason
    except OSError as exc:
        return None, f"it cannot be read ({exc.strerror or exc})"
    return payload, None


def check_layout(spec: RunSpec, payload: dict[str, Any], fresh: ServerState) -> None:
    """A checkpoint's payload has the keys, types and shapes of this run's state (``fresh``: round 0's server)."""
    # "client_files" (the client-state files' manifest) is absent from checkpoints written before the store
    if set(payload) - {"client_files"} != {"spec_hash", "round", "server", "client_states", "finetune_start"}:
        raise CheckpointRejected(f"its payload has keys {sorted(payload)}, not those of this fedbench's checkpoints")
    if not 1 <= payload["round"] <= spec.rounds:
        raise CheckpointRejected(f"its round {payload['round']} is outside 1..{spec.rounds}")
    server = payload["server"]
    if not isinstance(server, dict) or set(server) != {"params", "buffers", "state"}:
        raise CheckpointRejected("its server state is not {params, buffers, state}")
    params = server["params"]
    if not isinstance(params, torch.Tensor) or params.shape != fresh.params.shape or params.dtype != fresh.params.dtype:
        raise CheckpointRejected(
            f"its global weights are not {tuple(fresh.params.shape)} {fresh.params.dtype} (another model?)"
        )
    buffers = server["buffers"]
    if not isinstance(buffers, dict) or set(buffers) != set(fresh.buffers):
        raise CheckpointRejected("its model buffers are not this model's")
    for name, buffer in fresh.buffers.items():
        found = buffers[name]
        if not isinstance(found, torch.Tensor) or found.shape != buffer.shape or found.dtype != buffer.dtype:
            raise CheckpointRejected(f"its buffer {name!r} does not have this model's shape {tuple(buffer.shape)}")
    if not isinstance(server["state"], dict):
        raise CheckpointRejected("its server state is not a dict")
    clients = payload["client_states"]
    if not isinstance(clients, dict) or not all(
        isinstance(k, int) and 0 <= k < spec.num_clients and isinstance(v, dict) for k, v in clients.items()
    ):
        raise CheckpointRejected(f"its client states are not a dict of client 0..{spec.num_clients - 1} → state")
    files = payload.get("client_files", {})
    if not isinstance(files, dict) or not all(
        isinstance(k, int)
        and 0 <= k < spec.num_clients
        and isinstance(v, list)
        and len(v) == 2
        and all(isinstance(x, str) for x in v)
        for k, v in files.items()
    ):
        raise CheckpointRejected("its client-state manifest is not a dict of client → [file name, sha256]")
    if payload["finetune_start"] is not None and not isinstance(payload["finetune_start"], dict):
        raise CheckpointRejected("its fine-tuning start point is not a dict")


@dataclass
class Training:
    """One run's working objects, built once by ``set_up`` and carried from round to round: the method, the state its
    hooks see, every round's clients, the path that trains them, and what each round record repeats."""

    spec: RunSpec
    options: EngineOptions
    algorithm: Algorithm
    state: RunState
    schedule: list[list[int]]  # ``client_schedule``
    choice: TrainingPath  # packed or sequential, and why
    frozen: torch.Tensor  # parameters the model fixes (ETF classifiers), over the flat vector (``state.frozen``)
    frozen_values: torch.Tensor  # their values at w^0, restored after every aggregation
    upload: int  # bytes one client sends per round
    download: int  # bytes one client receives per round
    settings: dict[str, Any]  # ``RunResult.settings``
    info: dict[str, Any]  # ``RunResult.info``
    finetune_start: dict[str, Any] | None = None  # global weights fine-tuning starts from (spec.finetune)
    # train each round's clients last to first (still aggregated in the schedule's order): the engine contract's
    # check that no client's result depends on the clients trained before it (``fedbench.seeding``)
    reversed_order: bool = False
    layers: list[tuple[str, int, int]] = field(default_factory=list)  # the model's layers (``layer_slices``)


def set_up(spec: RunSpec, options: EngineOptions) -> Training:
    """Round 0: the data, the model at w^0 and the method bound to it (a model or fine-tuning loss the method cannot
    take fails now, before round 1), the run state and the path that trains the clients."""
    device = torch.device(options.device)
    settings, acceleration = options.settings, options.accelerated(device)
    algorithm = build_algorithm(spec.algorithm, spec.algorithm_params)
    data = prepare_data(spec, device, settings.data_root, settings.verify, options.arrays)
    precision = set_precision(spec.precision, device)
    model = prepare_model(init_model(spec, data.num_classes, data.input_shape, device), acceleration)
    num_params = sum(p.numel() for p in model.parameters())
    frozen = torch.cat([torch.full((p.numel(),), not p.requires_grad, device=device) for p in model.parameters()])
    frozen_values = flat_parameters(model.parameters()).detach()[frozen].clone()
    path = options.checkpoint_path
    state = RunState(
        spec=spec,
        data=data,
        model=model,
        device=device,
        spare_models=SpareModels(model),
        eval_batch_size=settings.eval_batch_size,
        frozen=frozen,
        client_states=ClientStates(
            folder=client_state_folder(path) if path is not None else None,
            spec_hash=spec.spec_hash,
            device=device,
            memory_budget=settings.client_state_memory,
        ),
        optimizer_options=optimizer_options(acceleration, device),
        server=ServerState(
            params=flat_parameters(model.parameters()).detach().clone(),
            buffers={name: b.detach().clone() for name, b in model.named_buffers()},
        ),
    )
    algorithm.bind_model(spec, model, data.input_shape, data.num_classes)
    algorithm.check_model(model, spec.algorithm)
    check_finetune(spec, algorithm, model)
    check_diagnostics(spec, algorithm, data.tensors.task, model)
    algorithm.init_server(state.server)
    choice = choose_training_path(settings.packing, algorithm, spec, model, device)
    compiled_forward(model, acceleration)  # in place: the module keeps its parameters, hooks and methods
    return Training(
        spec=spec,
        options=options,
        algorithm=algorithm,
        state=state,
        schedule=client_schedule(spec),
        choice=choice,
        frozen=frozen,
        frozen_values=frozen_values,
        upload=(num_params + algorithm.extra_upload_floats(num_params)) * 4,
        download=(num_params + algorithm.extra_download_floats(num_params)) * 4,
        settings={"packing": choice.as_dict(), "acceleration": acceleration.as_dict(), **precision},
        info=dict(data.info, num_params=num_params),
        layers=layer_slices(model),
    )


def resume(training: Training, sink: RunSink) -> int:
    """The round the run goes on from: its checkpoint's, with the server, the client states and the fine-tuning start
    point restored; 0 when there is none, or when it (or a client-state file it names) fails a check, which
    ``on_warning`` hears of in one line naming the file and why. The sink drops the rounds logged after it: they are
    redone."""
    spec, state, options = training.spec, training.state, training.options
    path = options.checkpoint_path
    checkpoint, rejected = resume_point(spec, state.server, path, options.checkpoint_ledger, state.device)
    try:  # the client-state files its manifest names: all there, as it recorded them
        state.client_states.restore(
            *((checkpoint["client_states"], checkpoint.get("client_files", {})) if checkpoint else ({}, {}))
        )
        state.client_states.verify_files()
    except ClientStateError as exc:
        checkpoint, rejected = None, str(exc)
        state.client_states.restore({}, {})  # from round 0: no earlier attempt's file is kept
    if rejected is not None and options.on_warning is not None:
        options.on_warning(f"checkpoint {path} not used: {rejected}; the run starts again from round 0")
    start_round = 0
    if checkpoint is not None:
        start_round = checkpoint["round"]
        state.server = ServerState(**checkpoint["server"])
        training.finetune_start = checkpoint["finetune_start"]
        try:  # client states of an earlier fedbench are brought up to date, or rejected with a reason
            training.algorithm.resume_states(
                state.server, state.client_states, start_round, training.schedule[start_round - 1]
            )
        except FedbenchError as exc:
            raise type(exc)(f"checkpoint {path}: {exc}") from None
    try:
        sink.truncate(start_round)  # drop rounds logged after the last checkpoint; they are redone
    except WriteFailed as exc:
        raise exc.resuming(spec.spec_hash, start_round) from None
    training.info["resumed_from"] = start_round
    if rejected is not None:
        training.info["checkpoint_rejected"] = rejected
    return start_round


def train_round(training: Training, round_index: int, lr: float) -> RoundRecord:
    """Sample → broadcast → local training → aggregate: the round's clients train from w^t (all at once on the
    packed path) and the method aggregates w^{t+1}. Returns the round's record, not yet evaluated. A non-finite
    client loss or global weight is divergence at this round."""
    algorithm, state = training.algorithm, training.state
    server = state.server
    clients = training.schedule[round_index - 1]
    payload = algorithm.payload(server, round_index)
    if training.choice.packed:
        updates, contexts = packed.train_round(state, algorithm, clients, round_index, lr, payload)
    else:
        updates, contexts = [], []
        for client in reversed(clients) if training.reversed_order else clients:
            ctx = state.client_context(algorithm, client, round_index, lr=lr, payload=payload)
            updates.append(algorithm.local_train(ctx))
            contexts.append(ctx)
            check_client_loss(updates[-1], round_index)
        if training.reversed_order:
            updates.reverse()
            contexts.reverse()
    for update in updates:  # the packed path checks after the round; the sequential one already did
        check_client_loss(update, round_index)
    algorithm.aggregate(server, updates, round_index)
    if training.frozen.any():  # frozen parameters (fixed ETF/orthonormal classifiers) stay exact
        server.params[training.frozen] = training.frozen_values
    if not bool(torch.isfinite(server.params).all()):
        raise RunDiverged(round_index, "aggregated global weights contain NaN/inf")
    for ctx in contexts:  # client-side steps that need w^{t+1}; evaluation only reads
        algorithm.after_aggregation(ctx, server)
    diagnostics = None
    if training.spec.diagnoses(round_index):  # reads the round's updates, weights and client states only
        aggregated = Aggregated(training.spec, state, algorithm, training.layers, server, updates, contexts)
        diagnostics = round_diagnostics(aggregated)
    return RoundRecord(
        round=round_index,
        train_loss=float(np.average([u.train_loss for u in updates], weights=[u.num_samples for u in updates])),
        wall_seconds=0.0,
        bytes_up=training.upload * len(updates),
        bytes_down=training.download * len(updates),
        diagnostics=diagnostics,
    )


def evaluate_round(training: Training, record: RoundRecord, lr: float) -> None:
    """The round's figures into ``record``, on the rounds the spec evaluates (``RunSpec.evaluates``): the global
    model's test metric and loss, every client's own model, and after the last round the fine-tuned models."""
    spec, state, algorithm = training.spec, training.state, training.algorithm
    round_index, server = record.round, state.server
    if spec.evaluates(round_index):
        load_weights(state.model, server.params, server.buffers)
        if spec.eval_mode in ("global", "both"):
            # test_acc holds the task's primary metric: accuracy, or mean Dice for segmentation
            tensors = state.data.tensors
            record.test_acc, record.test_loss = evaluate(
                state.model, tensors.test_x, tensors.test_y, state.eval_batch_size, tensors.task
            )
            if not math.isfinite(record.test_loss):
                raise RunDiverged(round_index, "test loss is not finite")
        if spec.eval_mode in ("personal", "both"):
            personal_evaluation(state, algorithm, record, lr)
        training.finetune_start = track_finetune_start(spec, record, server, training.finetune_start)
    if spec.finetune is not None and round_index == spec.rounds:
        finetune_evaluation(state, algorithm, training.finetune_start, record)


def checkpoint_round(training: Training, round_index: int) -> None:
    """The checkpoint of round ``round_index``, when the run has a checkpoint path. Incremental: only the client
    states that changed since the last checkpoint are written (to new files); the checkpoint names every client's
    file, and the files it supersedes go once it is recorded."""
    options, client_states, server = training.options, training.state.client_states, training.state.server
    if options.checkpoint_path is None:
        return

    def record(written: Path, digest: str) -> None:
        """A new checkpoint is durable at ``written`` and about to replace the last one: its copy on the storage
        (client files first) and then the registry's record of its hash come first, so that a failure to make either
        leaves the last checkpoint in place and still matching its record."""
        if options.checkpoint_mirror is not None:
            options.checkpoint_mirror.publish(written, client_states.last_written)
        if options.checkpoint_ledger is not None:
            options.checkpoint_ledger.record_checkpoint(digest)

    inline_states, client_files = client_states.write_changed(round_index)
    try:
        save_checkpoint(
            options.checkpoint_path,
            {
                "spec_hash": training.spec.spec_hash,
                "round": round_index,
                "server": {"params": server.params, "buffers": server.buffers, "state": server.state},
                "client_states": inline_states,
                "client_files": client_files,
                "finetune_start": training.finetune_start,
            },
            record=record,
        )
    except Exception:  # not replaced (past os.replace nothing raises): no checkpoint names these files
        client_states.abandon_written()
        raise
    superseded = client_states.commit()
    if options.checkpoint_mirror is not None:
        options.checkpoint_mirror.retire(superseded)


def run(spec: RunSpec, sink: RunSink, options: EngineOptions | None = None) -> RunResult:
    """Train ``spec`` from scratch or from its checkpoint (``resume``), round by round, reporting each finished round
    to ``sink``; ``options``: how this process trains it (``EngineOptions``; none of it changes the result).

    A round is trained, evaluated, logged, checkpointed and then reported to ``options.on_round``. An exception a
    hook or the sink raises ends the run where it is: the last checkpoint written is the one the next run resumes
    from."""
    return train(set_up(spec, options or EngineOptions()), sink)


def train(training: Training, sink: RunSink) -> RunResult:
    """``run`` after ``set_up``: resume, then train, evaluate, log and checkpoint the rounds left."""
    spec, options = training.spec, training.options
    start_round = resume(training, sink)
    round_index = start_round
    try:
        for round_index in range(start_round + 1, spec.rounds + 1):
            began = time.perf_counter()
            lr = spec.optimizer.lr * spec.lr_schedule.factor(round_index)
            record = train_round(training, round_index, lr)
            evaluate_round(training, record, lr)
            record.wall_seconds = time.perf_counter() - began
            sink.log_round(record)
            checkpoint_round(training, round_index)
            if options.on_round is not None:
                options.on_round(record)
    except WriteFailed as exc:
        # The disk under the checkpoint or the registry refused a write in this round: the checkpoint of the round
        # before (written every round, and replaced only once its hash is recorded) is the one the run resumes from.
        raise exc.resuming(spec.spec_hash, round_index - 1 if options.checkpoint_path is not None else 0) from None
    except RunDiverged as exc:
        return RunResult(
            RunStatus.DIVERGED,
            exc.round_index - 1,
            diverged_round=exc.round_index,
            message=str(exc),
            info=training.info,
            settings=training.settings,
        )
    return RunResult(RunStatus.DONE, spec.rounds, info=training.info, settings=training.settings)
