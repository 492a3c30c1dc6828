"""Figures computed from a stored curve: best, final, mean of the last k, rounds to a target.

Accuracies are fractions in [0, 1] in the registry; tables print percentages.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

Curve = Sequence[tuple[int, float]]   # (round, value) for evaluated rounds, in round order


def best(curve: Curve) -> float | None:
    return max(v for _, v in curve) if curve else None


def best_round(curve: Curve) -> int | None:
    if not curve:
        return None
    top = best(curve)
    return next(r for r, v in curve if v == top)   # first round reaching the best value


def final(curve: Curve) -> float | None:
    return curve[-1][1] if curve else None


def last_k_mean(curve: Curve, k: int) -> float | None:
    return float(np.mean([v for _, v in curve[-k:]])) if curve else None


def rounds_to_target(curve: Curve, target: float) -> int | None:
    """First (1-indexed) round whose value is ≥ target; None if never reached."""
    return next((r for r, v in curve if v >= target), None)


def ema(values: Sequence[float], weight: float) -> list[float]:
    """Exponential moving average (TensorBoard-style smoothing) for curve plots."""
    out, last = [], None
    for v in values:
        last = v if last is None else weight * last + (1 - weight) * v
        out.append(last)
    return out


def summarize(curve: Curve, targets: Sequence[float] = ()) -> dict:
    return {
        "best": best(curve), "best_round": best_round(curve), "final": final(curve),
        "last5_mean": last_k_mean(curve, 5), "last10_mean": last_k_mean(curve, 10),
        "rounds_to_target": {f"{t:g}": rounds_to_target(curve, t) for t in targets},
        "evaluated_rounds": len(curve),
    }
