"""Per-round diagnostics of what a model's features do (``fedbench/vocab/diagnostics.py``): ``feature_stats``
(FedDr+ §3, Figs. 2–5) and ``activations`` (LG-Mix §5.3, Fig. 2(b)). Both only read: the models are loaded into
one spare model of the run (``SpareModels``, no copy per client) or are the ones personal evaluation scores, they
run in eval mode without gradients, and the only random draw, the fixed sample of test points ``feature_stats``
evaluates on, comes from a stream of its own (``SAMPLE_STREAM``), so recording them never changes training.

``feature_stats``: for each sampled client i of a round, its locally trained model Θ_r^i = (θ_r^i, V^i) (the
parameters it uploads) and the global model it started from Θ_{r−1}^g, on the test points of the classes it
observed (O^i: those present in the training samples it trained on) and of the others (U^i). FedDr+ §1.2's
analysis quantities, each averaged over the test points of O^i (and of U^i):

- alignment cos(f(x;θ_r^i), v_y) and its gap to the global model's cos(f(x;θ_{r−1}^g), v_y);
- accuracy and its gap (local minus the global model it started from);
- feature distance ‖f(x;θ_r^i) − f(x;θ_{r−1}^g)‖₂ and angle ∠(f(x;θ_r^i), f(x;θ_{r−1}^g)) in radians;
- feature norm ‖f(x;θ_r^i)‖₂ and its difference to the global model's, ‖f(x;θ_r^i)‖₂ − ‖f(x;θ_{r−1}^g)‖₂.

f is the model's penultimate representation (``FedModel.features``), v_y the row of the linear classifier for class
y (``FedModel.classifier.weight``, C×d; each model's own, which is the same frozen matrix for FedDr+'s ETF).

``activations``: each client's own model (``Algorithm.eval_model``) on its test set: the distribution of its
last-hidden-layer feature values (after the model's last ReLU: ``FedModel.features``), as LG-Mix Fig. 2(b) plots
it — mean, std, the fraction of zeros and quantiles.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fedbench.algorithms.context import ClientContext, ClientUpdate
from fedbench.engine.diagnostics.base import Aggregated, Evaluated, rounded
from fedbench.engine.state import RunState
from fedbench.models.base import FedModel
from fedbench.seeding import numpy_rng
from fedbench.settings import EVAL_BATCH_SIZE
from fedbench.spec import RunSpec
from fedbench.vocab.diagnostics import ActivationsValue, FeatureStatsValue

# Test points feature_stats evaluates each model on: a fixed sample of the global test set (the whole set when it is
# smaller), drawn once per run from the stream (seed, SAMPLE_STREAM), the same every round and for every method of
# a seed. 2,000 of CIFAR-100's 10,000 leave ~200 points of a client's 10 observed classes (shard s = 10).
FEATURE_SAMPLE = 2000
SAMPLE_STREAM = "feature-sample"
# The spare-model slot feature_stats loads the global and each local model into (``ClientContext.frozen_model``).
SLOT = "feature-stats"

SPLITS = ("observed", "unobserved")  # O^i, U^i
QUANTITIES = ("alignment", "alignment_gap", "accuracy", "accuracy_gap", "distance", "angle", "norm", "norm_gap")
# the quantiles of the activations' distribution (LG-Mix Fig. 2(b) draws it; 0 and 1 are the min and max)
QUANTILES = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)
QUANTILE_VALUES = 1 << 22  # values at most the quantiles are computed from (every k-th of more)


def sample_indices(spec: RunSpec, size: int) -> torch.Tensor:
    """The test points ``feature_stats`` evaluates on: all ``size`` of them up to ``FEATURE_SAMPLE``, else a fixed
    sample of ``FEATURE_SAMPLE`` (in test-set order) from the run seed's ``SAMPLE_STREAM``."""
    if size <= FEATURE_SAMPLE:
        return torch.arange(size)
    chosen = numpy_rng(spec.seed, SAMPLE_STREAM).choice(size, FEATURE_SAMPLE, replace=False)
    return torch.from_numpy(np.sort(chosen))


def class_vectors(model: nn.Module) -> torch.Tensor | None:
    """V (C×d): the rows of the model's classifier when it is one linear map of the features (``nn.Linear``,
    FedDr+'s ETF and SphereFed's orthonormal heads included); None for another head (FedETF's projection), whose
    alignment is then not defined."""
    classifier = getattr(model, "classifier", None)
    if isinstance(classifier, nn.Linear) and classifier.in_features == getattr(model, "feature_dim", None):
        return classifier.weight.detach()
    return None


@torch.inference_mode()
def features_and_logits(
    model: nn.Module, x: torch.Tensor, batch_size: int = EVAL_BATCH_SIZE
) -> tuple[torch.Tensor, torch.Tensor]:
    """f(x) (N×d, flattened) and head(f(x)) of a FedModel in eval mode, in batches; its mode restored after."""
    assert isinstance(model, FedModel)  # every built-in model is head ∘ features
    was_training = model.training
    model.eval()
    features, logits = [], []
    for start in range(0, len(x), batch_size) or [0]:
        h = model.features(x[start : start + batch_size])
        features.append(h.flatten(1))
        logits.append(model.head(h))
    model.train(was_training)
    return torch.cat(features), torch.cat(logits)


def _cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.cosine_similarity(a, b, dim=1)


class _Model:
    """One model's view of the test sample: features, predictions, class vectors (all float64)."""

    def __init__(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int):
        h, z = features_and_logits(model, x, batch_size)
        self.features = h.double()
        self.norm = self.features.norm(dim=1)
        self.correct = (z.argmax(1) == y).double()
        vectors = class_vectors(model)
        self.alignment = None if vectors is None else _cosine(self.features, vectors.double()[y])


def _per_point(local: _Model, start: _Model) -> dict[str, torch.Tensor | None]:
    """Each analysis quantity of FedDr+ §1.2 at every test point (None where the heads have no class vectors)."""
    aligned = local.alignment is not None and start.alignment is not None
    cosine = _cosine(local.features, start.features).clamp(-1.0, 1.0)
    return {
        "alignment": local.alignment,
        "alignment_gap": local.alignment - start.alignment if aligned else None,  # type: ignore[operator]
        "accuracy": local.correct,
        "accuracy_gap": local.correct - start.correct,
        "distance": (local.features - start.features).norm(dim=1),
        "angle": torch.arccos(cosine),  # radians (FedDr+ spec §8 #30: logged in radians, plots convert)
        "norm": local.norm,
        "norm_gap": local.norm - start.norm,
    }


def _mean(values: torch.Tensor | None, mask: torch.Tensor) -> float | None:
    if values is None or not bool(mask.any()):
        return None
    return float(values[mask].mean())


def _client_mean(values: list[float | None]) -> float | None:
    """The plain mean over the sampled clients that have a value (FedDr+: "averaged over the clients in S_r")."""
    present = [v for v in values if v is not None]
    return rounded(sum(present) / len(present)) if present else None


def feature_stats(
    spec: RunSpec, updates: Sequence[ClientUpdate], contexts: Sequence[ClientContext], batch_size: int
) -> FeatureStatsValue:
    """The ``feature_stats`` diagnostic of an aggregated round: ``updates`` hold each sampled client's θ_r^i, its
    context (``contexts``, same order) the global weights it started from (``global_params``: aggregation put the
    new ones in a new tensor) and the training samples it trained on."""
    first = contexts[0]
    data = first.data
    chosen = sample_indices(spec, len(data.test_y)).to(data.test_y.device)
    x, y = data.test_x[chosen], data.test_y[chosen]
    start = _Model(first.frozen_model(SLOT, first.global_params, first.global_buffers), x, y, batch_size)
    values: dict[str, dict[str, list[float | None]]] = {split: {q: [] for q in QUANTITIES} for split in SPLITS}
    counts: dict[str, list[int]] = {split: [] for split in SPLITS}
    observed_classes = []
    for update, ctx in zip(updates, contexts, strict=True):
        observed = torch.unique(ctx.data.train_y[ctx.indices]).to(y.device)
        observed_classes.append(int(observed.numel()))
        local = _Model(ctx.frozen_model(SLOT, update.params, update.buffers), x, y, batch_size)
        per_point = _per_point(local, start)
        in_observed = torch.isin(y, observed)
        for split, mask in zip(SPLITS, (in_observed, ~in_observed), strict=True):
            counts[split].append(int(mask.sum()))
            for quantity in QUANTITIES:
                values[split][quantity].append(_mean(per_point[quantity], mask))
    value = {
        "clients": [u.client_id for u in updates],
        "test_points": len(chosen),
        "observed_classes": observed_classes,
        **{
            split: {
                "count": counts[split],
                **{q: [None if v is None else rounded(v) for v in values[split][q]] for q in QUANTITIES},
            }
            for split in SPLITS
        },
        "mean": {split: {q: _client_mean(values[split][q]) for q in QUANTITIES} for split in SPLITS},
    }
    return cast(FeatureStatsValue, value)  # the splits' keys are SPLITS, their quantities QUANTITIES


def activation_summary(model: nn.Module, x: torch.Tensor, batch_size: int = EVAL_BATCH_SIZE) -> dict[str, Any]:
    """The distribution of one model's last-hidden-layer values over every test point and unit: mean, std and the
    fraction that is zero (a ReLU's inactive units) of all of them, and ``QUANTILES`` of all of them, or of every
    k-th when there are more than ``QUANTILE_VALUES`` (a segmentation model's feature maps); None each for an empty
    test set. Batch by batch, so the features of the whole test set are never held at once."""
    assert isinstance(model, FedModel)  # every built-in model is head ∘ features
    was_training = model.training
    model.eval()
    total, zeros, moments, kept = 0, 0, torch.zeros(2, dtype=torch.float64), []
    step = 1
    with torch.inference_mode():
        for start in range(0, len(x), batch_size):
            h = model.features(x[start : start + batch_size]).double().flatten()
            if total == 0:  # every k-th value over the whole set (k from the first batch's size per point)
                per_point = h.numel() // max(1, min(batch_size, len(x)))
                step = max(1, -(-per_point * len(x) // QUANTILE_VALUES))
            first = -total % step  # the index in this batch of the next k-th value of the whole set
            kept.append(h[first::step].cpu())
            total += h.numel()
            zeros += int((h == 0).sum())
            moments += torch.stack([h.sum(), (h * h).sum()]).cpu()
    model.train(was_training)
    if total == 0:
        return {"mean": None, "std": None, "zero_fraction": None, "quantiles": None}
    mean = float(moments[0]) / total
    variance = max(0.0, float(moments[1]) / total - mean * mean)
    return {
        "mean": rounded(mean),
        "std": rounded(variance**0.5),
        "zero_fraction": rounded(zeros / total),
        "quantiles": [rounded(float(q)) for q in np.quantile(torch.cat(kept).numpy(), QUANTILES)],
    }


def activations(summaries: Sequence[dict[str, Any]]) -> ActivationsValue:
    """The ``activations`` diagnostic from every client's ``activation_summary`` (client order)."""
    value = {
        "clients": list(range(len(summaries))),
        "quantile_levels": list(QUANTILES),
        **{key: [s[key] for s in summaries] for key in ("mean", "std", "zero_fraction", "quantiles")},
    }
    return cast(ActivationsValue, value)


def feature_stats_of(aggregated: Aggregated) -> FeatureStatsValue:
    """The ``feature_stats`` producer: the round's local models against the global one they started from."""
    return feature_stats(aggregated.spec, aggregated.updates, aggregated.contexts, aggregated.state.eval_batch_size)


class Activations:
    """``activations`` over one evaluated round: the distribution of each client's own model's last-hidden-layer
    values on its test set (LG-Mix Fig. 2(b))."""

    def __init__(self, run: RunState):
        self.summaries: list[dict[str, Any]] = []

    def add(self, seen: Evaluated) -> None:
        self.summaries.append(activation_summary(seen.model, seen.test_x, seen.test_batch_size))

    def value(self) -> ActivationsValue:
        return activations(self.summaries)


__all__ = [
    "FEATURE_SAMPLE",
    "Activations",
    "QUANTILES",
    "QUANTITIES",
    "SAMPLE_STREAM",
    "SPLITS",
    "activation_summary",
    "activations",
    "class_vectors",
    "feature_stats",
    "feature_stats_of",
    "features_and_logits",
    "sample_indices",
]
