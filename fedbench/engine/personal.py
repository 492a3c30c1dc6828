"""Personalised evaluation and fine-tune-then-evaluate.

Personalised (``eval_mode = personal | both``): every client's own model (``Algorithm.eval_model``) on that
client's own test set (``spec.client_test``: a split of its partition, or drawn from the global test set to
match its classes or its natural group), and on its validation split when ``client_val_fraction > 0``. For
segmentation the primary per-client figure is the mean Dice, as ``evaluate``'s. A round records the
plain and the sample-weighted mean, the std over clients and every client's value (LG-Mix's "Avg." is the
plain mean over clients; FedDr+ Table 3 prints mean ± std over clients), the mean validation accuracy (LG-Mix
selects the reported round by it, ``figure = "val_selected"``) and the extra per-client metrics of
``spec.eval_metrics`` (AUC, balanced accuracy, sensitivity, specificity, macro F1, Dice, IoU, Hausdorff).

Fine-tune then evaluate (``spec.finetune``; FedDr+'s two-step "-FT" methods): after the last round every
client fine-tunes the start model (final or best-round global model) on its own training split and is
evaluated on its own test split; the figures go into the last round's ``finetune_*`` fields. The fine-tuning
objective (``finetune.loss``) is plain CE, the run's own method (``method``), or one named explicitly
(``finetune_trainer``: FedDr+'s L_DR / L_Dr+, so that Table 8 crosses the GFL method and the FT loss).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from fedbench.algorithms import build_algorithm, finetune_objective
from fedbench.algorithms.base import only_trainable
from fedbench.algorithms.context import ServerState
from fedbench.engine import scores
from fedbench.engine.diagnostics import evaluation_collectors
from fedbench.engine.diagnostics.base import Evaluated
from fedbench.engine.evaluation import dice_scores, evaluate
from fedbench.engine.evaluation import eval_batch_size as capped_batch_size
from fedbench.engine.state import RunState
from fedbench.models.base import FedModel
from fedbench.settings import EVAL_BATCH_SIZE
from fedbench.spec import RunSpec, ScheduleSpec


@torch.inference_mode()
def predict(model: nn.Module, x: torch.Tensor, batch_size: int = EVAL_BATCH_SIZE) -> torch.Tensor:
    was_training = model.training
    model.eval()
    # an empty split still goes through the model once: its output keeps the shape of logits, (0, classes) or
    # (0, C, H, W), which extra_metrics reads (a 1-D empty tensor made it fail on a client without test samples)
    starts = range(0, len(x), batch_size) or [0]
    out = torch.cat([model(x[s : s + batch_size]) for s in starts])
    model.train(was_training)
    return out


def extra_metrics(names, logits: torch.Tensor, y: torch.Tensor) -> dict[str, float | None]:
    """``spec.eval_metrics`` of one client: classification (logits N×C, labels N) or segmentation
    (logits and binary masks N×C×H×W, a sigmoid > 0.5 per channel as LG-Mix [code])."""
    labels = y.cpu().numpy()
    if y.ndim > 1:
        pred = (torch.sigmoid(logits) > 0.5).cpu().numpy()
        masks: dict[str, Callable[..., float | None]] = {
            "dice": scores.dice,
            "iou": scores.iou,
            "hausdorff": scores.hausdorff,
        }
        return {n: masks[n](pred, labels > 0) if n in masks and len(labels) else None for n in names}
    probabilities = torch.softmax(logits.double(), dim=1).cpu().numpy()
    predictions, num_classes = probabilities.argmax(1), probabilities.shape[1]
    fns: dict[str, Callable[[], float | None]] = {
        "auc": lambda: scores.auc(labels, probabilities),
        "balanced_accuracy": lambda: scores.balanced_accuracy(labels, predictions),
        "sensitivity": lambda: scores.sensitivity(labels, predictions, num_classes),
        "specificity": lambda: scores.specificity(labels, predictions, num_classes),
        "f1": lambda: scores.f1_macro(labels, predictions),
    }
    # segmentation metrics on a classification task, and any metric of an empty test split, are None (as above)
    return {name: fns[name]() if name in fns and len(labels) else None for name in names}


def client_scores(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, names, batch_size: int, task: str = "classification"
) -> tuple[float, dict]:
    """The primary metric (accuracy; mean Dice for segmentation, as ``evaluate``) and the extra metrics of one
    model on one client split."""
    if not names:
        return evaluate(model, x, y, batch_size, task)[0], {}
    logits = predict(model, x, capped_batch_size(batch_size, x, task))
    if task == "segmentation":
        primary = float(dice_scores(logits, y).mean()) if len(y) else 0.0
    else:
        primary = float((logits.argmax(1) == y).float().mean()) if len(y) else 0.0
    return primary, extra_metrics(names, logits, y)


def _summary(values: list[float], sizes: list[int]) -> tuple[float, float | None, float]:
    return (
        float(np.mean(values)),
        float(np.average(values, weights=sizes)) if sum(sizes) else None,
        float(np.std(values)),
    )


def personal_evaluation(run: RunState, algorithm, record, lr: float = 0.0) -> None:
    """Every client's own model (``Algorithm.eval_model``) on its own test (and validation) split. The contexts are
    built for evaluation (``RunState.client_context``): a copy of each client's state and evaluation's own random
    streams, so evaluating never changes what training does next."""
    spec, data = run.spec, run.data
    accuracies, sizes, validation = [], [], []
    extra: dict[str, list] = {name: [] for name in spec.eval_metrics}
    x_all, y_all, task = data.tensors.train_x, data.tensors.train_y, data.tensors.task
    collectors = evaluation_collectors(run, record.round)  # the round's diagnostics of these passes and models
    for client in range(spec.num_clients):
        ctx = run.client_context(algorithm, client, record.round, purpose="eval", lr=lr)
        personal = algorithm.eval_model(ctx)  # may adapt (Per-FedAvg) or load a personal model
        test_x, test_y = data.client_test_data(client)  # from the training pool or the global test set
        accuracy, scores = client_scores(personal, test_x, test_y, spec.eval_metrics, run.eval_batch_size, task)
        accuracies.append(accuracy)
        sizes.append(len(test_y))
        for name in spec.eval_metrics:
            extra[name].append(scores[name])
        loss = None
        if spec.client_val_fraction > 0:
            val_idx = data.client_val[client]
            val_accuracy, loss = evaluate(personal, x_all[val_idx], y_all[val_idx], run.eval_batch_size, task)
            validation.append(val_accuracy)
        seen = Evaluated(client, personal, test_x, test_y, capped_batch_size(run.eval_batch_size, test_x, task), loss)
        for collector in collectors.values():
            collector.add(seen)
    record.personal_per_client = accuracies
    record.personal_mean, record.personal_weighted_mean, record.personal_std = _summary(accuracies, sizes)
    if validation:
        record.personal_val_per_client = validation
        record.personal_val_mean = float(np.mean(validation))  # LG-Mix: mean over clients
    if extra:
        record.personal_metrics = extra
    if collectors:
        found = {name: collector.value() for name, collector in collectors.items()}
        record.diagnostics = {**(record.diagnostics or {}), **found}


def track_finetune_start(spec: RunSpec, record, server: ServerState, current: dict[str, Any] | None):
    """Keep the global weights of the best evaluated round for ``finetune.start = best | best_val`` (the
    first round reaching the best value); stored in the checkpoint, so a resumed run keeps it."""
    if spec.finetune is None or spec.finetune.start == "final":
        return current
    value = record.test_acc if spec.finetune.start == "best" else record.personal_val_mean
    if value is None or (current is not None and value <= current["value"]):
        return current
    return {
        "round": record.round,
        "value": value,
        "params": server.params.clone(),
        "buffers": {name: b.clone() for name, b in server.buffers.items()},
    }


def finetune_spec(spec: RunSpec) -> RunSpec:
    """The spec clients fine-tune under: ``finetune.epochs`` epochs (no step budget) with its optimizer and batch
    size, a constant lr."""
    ft = spec.finetune
    assert ft is not None  # called only for a run that fine-tunes
    return spec.model_copy(
        update={
            "local_epochs": ft.epochs,
            "local_steps": None,
            "optimizer": ft.optimizer_spec(),
            "batch_size": ft.batch_size or spec.batch_size,
            "lr_schedule": ScheduleSpec(),
        }
    )


def finetune_trainer(spec: RunSpec, algorithm):
    """The Algorithm whose ``local_train`` fine-tunes (``finetune.loss``): the run's own for ``method``, else the
    method that declares the loss as its objective (``fedbench.algorithms.finetune_objective``: plain CE is
    FedAvg's; FedDr+'s L_DR / L_Dr+ are Dot-Regression's with β = 1 / 0.9). A teacher (L_Dr+'s feature
    distillation) or prox target is the start model."""
    assert spec.finetune is not None  # called only for a run that fine-tunes
    if spec.finetune.loss == "method":
        return algorithm
    return build_algorithm(*finetune_objective(spec.finetune.loss))


def check_finetune(spec: RunSpec, algorithm, model: nn.Module) -> None:
    """Called when a run starts: a fine-tuning objective the model cannot take (one that needs a fixed
    classifier the model lacks) fails then, not after the last round."""
    if spec.finetune is not None and spec.finetune.loss != "method":
        finetune_trainer(spec, algorithm).check_model(model, f"finetune.loss = {spec.finetune.loss!r}")


def finetune_evaluation(run: RunState, algorithm, start: dict[str, Any] | None, record) -> None:
    """FedDr+ §1.6/§3.2: each client fine-tunes a copy of the start model for ``finetune.epochs`` epochs on
    its training split (``part``: whole model, head or body; ``loss``: CE, the method's own objective, or FedDr+'s
    L_DR / L_Dr+ (``finetune_trainer``); a teacher/prox target is the start model), then is evaluated on its test
    split. Parameters fixed by the model (ETF classifiers, ``run.frozen``) stay fixed; a head frozen by the method
    during FL (FedBABU) is fine-tuned. Clients fine-tune a copy of their state: the run's is left as it was."""
    spec, model, data, ft = run.spec, cast(FedModel, run.model), run.data, run.spec.finetune
    assert ft is not None  # called only for a run that fine-tunes
    params, buffers = (start["params"], start["buffers"]) if start else (run.server.params, run.server.buffers)
    start_server = ServerState(params=params, buffers=buffers, state=run.server.state)
    ft_spec = finetune_spec(spec)
    trainer = finetune_trainer(spec, algorithm)
    if trainer is not algorithm:  # an objective of its own: bound to the fine-tuning spec
        trainer.bind_model(ft_spec, model, data.input_shape, data.num_classes)
    payload = trainer.payload(start_server, spec.rounds)
    fixed, offset = set(), 0  # parameters the model itself fixes (``run.frozen``: the loop's mask at w^0)
    for name, p in model.named_parameters():
        if run.frozen is not None and bool(run.frozen[offset : offset + p.numel()].all()):
            fixed.add(name)
        offset += p.numel()
    if ft.part == "head":
        names = model.head_parameter_names()
    elif ft.part == "body":
        names = model.body_parameter_names()
    else:
        names = [n for n, _ in model.named_parameters()]
    names = [n for n in names if n not in fixed]
    accuracies, sizes = [], []
    for client in range(spec.num_clients):
        ctx = run.client_context(
            trainer,
            client,
            spec.rounds,
            purpose="finetune",
            lr=ft.lr,
            payload=payload,
            spec=ft_spec,
            server=start_server,
        )
        with only_trainable(model, names, respect_frozen=False):
            trainer.local_train(ctx)
        test_x, test_y = data.client_test_data(client)
        accuracies.append(evaluate(model, test_x, test_y, run.eval_batch_size, data.tensors.task)[0])
        sizes.append(len(test_y))
    record.finetune_per_client = accuracies
    record.finetune_mean, record.finetune_weighted_mean, record.finetune_std = _summary(accuracies, sizes)
