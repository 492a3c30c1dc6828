"""A stored curve and its figures: best, final, mean of the last k, rounds to a target, the run summary.

Accuracies are fractions in [0, 1] in the registry; tables print percentages and recipes' targets are in %
(``fedbench.vocab.metrics.to_percent`` converts).
"""

from __future__ import annotations

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
