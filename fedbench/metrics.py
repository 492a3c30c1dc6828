"""Figures computed from a stored curve: best, final, mean of the last k, rounds to a target.

Accuracies are fractions in [0, 1] in the registry; tables print percentages and recipes' targets are in %
(``fedbench.vocab.metrics.to_percent`` converts).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from fedbench.vocab.metrics import to_percent
from fedbench.vocab.summary import RunSummary

Curve = Sequence[tuple[int, float]]  # (round, value) for evaluated rounds, in round order


def best(curve: Curve) -> float | None:
    return max(v for _, v in curve) if curve else None


def best_round(curve: Curve) -> int | None:
    if not curve:
        return None
    top = best(curve)
    return next(r for r, v in curve if v == top)  # first round reaching the best value


def final(curve: Curve) -> float | None:
    return curve[-1][1] if curve else None


def last_k_mean(curve: Curve, k: int) -> float | None:
    return float(np.mean([v for _, v in curve[-k:]])) if curve else None


def rounds_to_target(curve: Curve, target: float, rule: str = "first_reach") -> int | None:
    """Rounds needed to reach ``target``; None if never reached.

    ``first_reach``: the first (1-indexed) round whose value is ≥ target.
    ``count_not_above``: the number of evaluated rounds whose value is ≤ target, counted only if the
    target is exceeded at some round — FedTrip's ``np.sum(mean_curve <= target)`` (spec §2.7; equals
    first round above the target − 1 on a monotone curve, and counts later dips).
    """
    if rule == "count_not_above":
        if not curve or max(v for _, v in curve) <= target:
            return None
        return sum(1 for _, v in curve if v <= target)
    return next((r for r, v in curve if v >= target), None)


def value_at_round(curve: Curve, round_index: int) -> float | None:
    return dict(curve).get(round_index)


def ema(values: Sequence[float], weight: float) -> list[float]:
    """Exponential moving average (TensorBoard-style smoothing) for curve plots."""
    out, last = [], None
    for v in values:
        last = v if last is None else weight * last + (1 - weight) * v
        out.append(last)
    return out


def summarize(curve: Curve, targets: Sequence[float] = ()) -> RunSummary:
    """The summary a finished run stores (``runs.summary``), from its curve of ``SUMMARY_METRIC`` (test accuracy;
    the Dice on segmentation runs) as stored: fractions in [0, 1].

    ``best``, ``final``, ``last5_mean`` and ``last10_mean`` are fractions like the curve; ``best_round`` and
    ``evaluated_rounds`` count rounds. ``rounds_to_target`` is keyed by the recipe's ``targets``, which are in %
    (``targets = [80, 90]`` gives keys "80" and "90"): the first round whose accuracy in % (``to_percent``, as a
    report's ``rounds_to_target`` figure converts it) is at least the target, None if none is. A report recomputes
    each of these from the same curve and must find the same value."""
    in_percent = [(r, to_percent(v)) for r, v in curve]
    return RunSummary(
        best=best(curve),
        best_round=best_round(curve),
        final=final(curve),
        last5_mean=last_k_mean(curve, 5),
        last10_mean=last_k_mean(curve, 10),
        rounds_to_target={f"{t:g}": rounds_to_target(in_percent, t) for t in targets},
        evaluated_rounds=len(curve),
    )


def value_at_best(curve: Curve, selector: Curve) -> float | None:
    """The value of ``curve`` at the first round where ``selector`` is best (LG-Mix: the test figure at
    the round with the best mean validation accuracy). Only rounds present in both count."""
    values = dict(curve)
    common = [(r, v) for r, v in selector if r in values]
    chosen = best_round(common)
    return None if chosen is None else values[chosen]


# ---------------------------------------------------------------------------------- per-sample metrics
# Beyond accuracy, for the data sets that need them: AUC, balanced accuracy, sensitivity, specificity and macro F1
# (Camelyon17 and BCI, LG-Mix Tables 7 and 10), Dice, IoU and Hausdorff distance for segmentation (retinal, LG-Mix
# Table 3).


def auc(labels: np.ndarray, probabilities: np.ndarray) -> float | None:
    """ROC AUC: binary on p(class 1) (LG-Mix [code] ``roc_auc_score``), one-vs-rest macro for more classes.
    None when the labels hold a single class (AUC is undefined)."""
    # local: keeps scikit-learn out of run's and report's start-up
    from sklearn.metrics import roc_auc_score

    present = np.unique(labels)
    if len(present) < 2:
        return None
    if probabilities.shape[1] == 2:
        return float(roc_auc_score(labels, probabilities[:, 1]))
    if len(present) < probabilities.shape[1]:
        probabilities = probabilities[:, present] / probabilities[:, present].sum(1, keepdims=True)
    return float(roc_auc_score(labels, probabilities, multi_class="ovr", average="macro", labels=present))


def balanced_accuracy(labels: np.ndarray, predictions: np.ndarray) -> float:
    """Mean per-class recall over the classes present in ``labels``."""
    # local: keeps scikit-learn out of run's and report's start-up
    from sklearn.metrics import balanced_accuracy_score

    with warnings.catch_warnings():  # a client's model may predict classes its test split lacks
        warnings.simplefilter("ignore", UserWarning)
        return float(balanced_accuracy_score(labels, predictions))


def _binary(labels: np.ndarray, num_classes: int, positive: int) -> bool:
    """A two-class task whose labels hold at least one sample of class ``positive``: where the recall of that
    class is defined."""
    return num_classes == 2 and bool((labels == positive).any())


def sensitivity(labels: np.ndarray, predictions: np.ndarray, num_classes: int) -> float | None:
    """Sensitivity = recall of class 1, TP / (TP + FN) (LG-Mix [code]: ``recall_score``); binary tasks only. None
    for more classes or a test split without positives."""
    # local: keeps scikit-learn out of run's and report's start-up
    from sklearn.metrics import recall_score

    if not _binary(labels, num_classes, 1):
        return None
    return float(recall_score(labels, predictions, pos_label=1, average="binary", labels=[0, 1]))


def specificity(labels: np.ndarray, predictions: np.ndarray, num_classes: int) -> float | None:
    """Specificity = TN / (TN + FP), the recall of class 0 (LG-Mix [code]: tn / (tn + fp)); binary tasks only.
    None for more classes or a test split without negatives."""
    # local: keeps scikit-learn out of run's and report's start-up
    from sklearn.metrics import recall_score

    if not _binary(labels, num_classes, 0):
        return None
    return float(recall_score(labels, predictions, pos_label=0, average="binary", labels=[0, 1]))


def f1_macro(labels: np.ndarray, predictions: np.ndarray) -> float:
    """Macro F1: the unweighted mean over classes of 2·precision·recall / (precision + recall), over the classes
    present in the labels or the predictions (scikit-learn's ``f1_score(average="macro")``, LG-Mix [code]); a
    class without true or predicted samples scores 0."""
    # local: keeps scikit-learn out of run's and report's start-up
    from sklearn.metrics import f1_score

    return float(f1_score(labels, predictions, average="macro", zero_division=0))


def _overlap(pred: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per image and channel (N, C): |P ∩ T|, |P|, |T| of boolean masks (N, C, H, W)."""
    axes = tuple(range(2, pred.ndim))
    return (pred & truth).sum(axes), pred.sum(axes), truth.sum(axes)


def dice(pred: np.ndarray, truth: np.ndarray) -> float:
    """Mean over images and channels of 2|P∩T| / (|P| + |T|) (1 when both are empty)."""
    inter, p, t = _overlap(pred.astype(bool), truth.astype(bool))
    return float(np.mean(np.where(p + t > 0, 2 * inter / np.maximum(p + t, 1), 1.0)))


def iou(pred: np.ndarray, truth: np.ndarray) -> float:
    """Mean over images and channels of |P∩T| / |P∪T| (1 when both are empty)."""
    inter, p, t = _overlap(pred.astype(bool), truth.astype(bool))
    union = p + t - inter
    return float(np.mean(np.where(union > 0, inter / np.maximum(union, 1), 1.0)))


def _surface_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distances from the border pixels of mask ``a`` to the border of mask ``b`` (medpy's definition)."""
    # local: keeps scipy out of run's start-up
    from scipy import ndimage

    structure = ndimage.generate_binary_structure(a.ndim, 1)
    border_a = a ^ ndimage.binary_erosion(a, structure=structure, border_value=1)
    border_b = b ^ ndimage.binary_erosion(b, structure=structure, border_value=1)
    return ndimage.distance_transform_edt(~border_b)[border_a]


def hausdorff(pred: np.ndarray, truth: np.ndarray, percentile: float = 95.0, empty: float = 1000.0) -> float | None:
    """Mean over images and channels of the (95th-percentile) symmetric Hausdorff distance in pixels, as
    medpy's ``hd95`` (the percentile of both directed surface-distance sets pooled; LG-Mix [code] util).
    An empty prediction of a non-empty mask scores ``empty`` (1000, [code]); empty masks are skipped."""
    pred, truth = pred.astype(bool), truth.astype(bool)
    values = []
    for p_img, t_img in zip(pred.reshape(-1, *pred.shape[2:]), truth.reshape(-1, *truth.shape[2:])):
        if not t_img.any():
            continue
        if not p_img.any():
            values.append(empty)
            continue
        pooled = np.hstack([_surface_distances(p_img, t_img), _surface_distances(t_img, p_img)])
        values.append(float(np.percentile(pooled, percentile)) if percentile < 100 else float(pooled.max()))
    return float(np.mean(values)) if values else None
