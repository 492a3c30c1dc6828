"""The value of each table figure for one run: one function per entry of the figure catalogue (``vocab.figures``).

``FIGURE_VALUES`` maps every figure name to the function that computes it from ``RunFigureInputs``: the run's
curve of the view's metric (in the view's displayed unit), its stored rounds (wall time, bytes, the validation
curve), the cost of a round (GFLOPs figures) and the run itself (its provenance). ``tests/report/test_figure_values.py``
keeps the keys equal to the catalogue's, so a figure added to the catalogue without its function fails there.
Adding a figure is one catalogue entry and one function here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedbench import curves
from fedbench.curves import Curve
from fedbench.recipes.views import TableView
from fedbench.vocab.metrics import METRICS, VALIDATION_METRIC, display_factor, metric_curve
from fedbench.vocab.provenance import peak_memory

__all__ = ["FIGURE_VALUES", "RunFigureInputs", "figure_value"]


@dataclass(frozen=True)
class RunFigureInputs:
    """What a figure of one run may read."""

    view: TableView
    curve: Curve  # the run's curve of the view's metric, as stored (fractions for a metric shown in %)
    rows: list | None  # the run's stored rounds: wall_seconds, bytes_up/down, the validation metric
    cost: float | None  # forward MACs of a client round plus the method's attaching operations
    target: float | None  # the cell's target, in the view's displayed unit
    run: Any  # the stored run: its provenance

    @property
    def scaled(self) -> Curve:
        """The curve in the view's displayed unit (% where the view shows percent)."""
        factor = display_factor(self.view.metric, self.view.percent)
        return [(r, v * factor) for r, v in self.curve]

    @property
    def sign(self) -> float:
        """+1 where higher is better for the view's metric, −1 for a loss (the catalogue's direction)."""
        return 1.0 if METRICS[self.view.metric].higher_is_better else -1.0

    @property
    def oriented(self) -> Curve:
        """The scaled curve with higher always better (negated for a loss), for "best" and "reaching the target"."""
        return [(r, self.sign * v) for r, v in self.scaled]

    def rounds_to_target(self) -> int | None:
        """The rounds until the target is reached (at or below it for a loss), by the view's rule."""
        if self.target is None:
            return None
        return curves.rounds_to_target(self.oriented, self.sign * self.target, self.view.target_rule)


def _wall_seconds(rows: list | None) -> float | None:
    """The run's wall-clock time: its rounds' wall_seconds (training and evaluation); an unrecorded one counts 0."""
    return float(sum(r.wall_seconds or 0 for r in rows)) if rows else None


def _best(x: RunFigureInputs) -> float | None:
    top = curves.best(x.oriented)
    return None if top is None else x.sign * top


def _final(x: RunFigureInputs) -> float | None:
    return curves.final(x.scaled)


def _last_k_mean(x: RunFigureInputs) -> float | None:
    return curves.last_k_mean(x.scaled, x.view.k)


def _best_round(x: RunFigureInputs) -> float | None:
    return curves.best_round(x.oriented)


def _rounds_to_target(x: RunFigureInputs) -> float | None:
    return x.rounds_to_target()


def _total_bytes_to_target(x: RunFigureInputs) -> float | None:
    rounds = x.rounds_to_target()
    if rounds is None or x.rows is None:
        return None
    return float(sum((r.bytes_up or 0) + (r.bytes_down or 0) for r in x.rows if r.round <= rounds))


def _gflops_to_target(x: RunFigureInputs) -> float | None:
    rounds = x.rounds_to_target()
    return None if rounds is None or x.cost is None else rounds * x.cost / 1e9


def _value_at_round(x: RunFigureInputs) -> float | None:
    assert x.view.at_round is not None  # the recipe's checks require at_round with this figure
    return curves.value_at_round(x.scaled, x.view.at_round)


def _wall_seconds_figure(x: RunFigureInputs) -> float | None:
    return _wall_seconds(x.rows)


def _wall_hours(x: RunFigureInputs) -> float | None:
    seconds = _wall_seconds(x.rows)
    return None if seconds is None else seconds / 3600.0


def _seconds_per_round(x: RunFigureInputs) -> float | None:
    # FedDr+ Table 9: training and evaluation, every round of the run
    return float(np.mean([r.wall_seconds or 0 for r in x.rows])) if x.rows else None


def _peak_memory_mb(x: RunFigureInputs) -> float | None:
    # LG-Mix Table 9: MB of 2^20 bytes, as torch's allocator statistics report them
    value = peak_memory(getattr(x.run, "provenance", None))[0]
    return None if value is None else value / 2**20


def _val_selected(x: RunFigureInputs) -> float | None:
    # LG-Mix: the value at the first round of the best mean validation accuracy
    return curves.value_at_best(x.scaled, metric_curve(x.rows or [], VALIDATION_METRIC))


FigureFunction = Callable[[RunFigureInputs], float | None]

FIGURE_VALUES: dict[str, FigureFunction] = {
    "best": _best,
    "final": _final,
    "last_k_mean": _last_k_mean,
    "best_round": _best_round,
    "rounds_to_target": _rounds_to_target,
    "total_bytes_to_target": _total_bytes_to_target,
    "gflops_to_target": _gflops_to_target,
    "value_at_round": _value_at_round,
    "wall_seconds": _wall_seconds_figure,
    "wall_hours": _wall_hours,
    "seconds_per_round": _seconds_per_round,
    "peak_memory_mb": _peak_memory_mb,
    "val_selected": _val_selected,
}


def figure_value(
    view: TableView,
    curve: Curve,
    rows: list | None = None,
    cost: float | None = None,
    target: float | None = None,
    run: Any = None,
) -> float | None:
    """The view's figure of one run (``target``: the cell's, else the view's)."""
    inputs = RunFigureInputs(view, curve, rows, cost, view.target if target is None else target, run)
    return FIGURE_VALUES[view.figure](inputs)
