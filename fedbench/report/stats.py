"""The statistics of a report: each cell against the table's baseline, against the paper, and two registries'
cells against each other. One function per formula; the t distribution comes from scipy.

Against the baseline (``compare_with_baseline``): the cell's per-seed figures are paired with the baseline
cell's by seed (same seed = same partition, model init and client schedule, fedbench.seeding), so the test is
a paired t-test on the per-seed differences ``cell − baseline``, with its 95 % t confidence interval; the
p-values of a table are Holm-corrected together (``holm``). A mark says whether the cell is significantly
better (▲) or worse (▼) than the baseline after the correction, or neither (·); "better" follows the figure's
direction (``better_sign``: higher accuracy, fewer rounds, less time or memory).

Rounds-to-target (and the GFLOPs / bytes to the target) where a seed never reached the target within the run's
R rounds (``CENSORED_RULE``): its value is censored at R + 1 (it needed at least R + 1 rounds); a pair in which
both seeds never reached it is left out (it says nothing about the difference); the test then runs on the
remaining pairs, and the comparison counts its censored pairs (the difference is a bound in their direction).

Against the paper (``verdict``): reproduced when the published value lies inside our 95 % t interval of the
per-seed figures or within the view's ``tolerance`` of our value; higher / lower when it lies outside
(ours above / below it); not comparable for synthetic data, a non-paper scale, partial seeds, fewer than two
seeds, a seed without a value, or a published value that is not a number.

Two registries (``welch``): the same cell's per-seed figures from registry A and registry B, Welch's unequal-
variance t-test (the registries need not hold the same seeds, so no pairing); "within seed noise" when
p ≥ 0.05 (uncorrected, so a real difference is flagged rather than hidden).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from fedbench.report.cells import Cell, Comparison, Verdict
from fedbench.vocab.figures import FIGURES
from fedbench.vocab.figures import better_sign as figure_sign
from fedbench.vocab.metrics import METRICS

if TYPE_CHECKING:
    from fedbench.recipes.views import TableView

CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE
CENSORED_RULE = (
    "a seed that never reached the target counts as R + 1 rounds (censored: it needed more than the run's R); "
    "pairs where neither seed reached it are left out"
)


# ------------------------------------------------------------------------------------------ formulas
def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(mean, low, high): the t confidence interval of the mean of ``values`` (n ≥ 2), sample std (ddof 1)."""
    x = np.asarray(values, dtype=np.float64)
    n = len(x)
    if n < 2:
        raise ValueError("a t interval needs at least two values")
    from scipy import special  # local: scipy (0.3 s) is imported by the first test, not by every report

    mean = float(x.mean())
    # scipy.special's Student t functions are what scipy.stats.t calls, without its per-call argument handling (a
    # report computes hundreds of intervals: benchmarks/report_scale.py)
    half = float(special.stdtrit(n - 1, 0.5 + confidence / 2)) * float(x.std(ddof=1)) / math.sqrt(n)
    return mean, mean - half, mean + half


def one_sample_p(differences: Sequence[float]) -> float:
    """Two-sided p of the t-test that the mean of ``differences`` is 0 (the paired t-test on pair differences).
    Differences without spread: p = 1 when they are all 0, else 0 (t is infinite: every seed moved alike)."""
    d = np.asarray(differences, dtype=np.float64)
    n = len(d)
    sd = float(d.std(ddof=1))
    if sd == 0.0:
        return 1.0 if float(d.mean()) == 0.0 else 0.0
    t = float(d.mean()) / (sd / math.sqrt(n))
    from scipy import special  # local: scipy (0.3 s) is imported by the first test, not by every report

    return float(2 * special.stdtr(n - 1, -abs(t)))


def welch(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """(difference mean(b) − mean(a), two-sided p) of Welch's unequal-variance t-test (both n ≥ 2). Two samples
    without spread: p = 1 when their means are equal, else 0."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    va, vb = float(x.var(ddof=1)) / len(x), float(y.var(ddof=1)) / len(y)
    diff = float(y.mean() - x.mean())
    if va + vb == 0.0:
        return diff, 1.0 if diff == 0.0 else 0.0
    t = diff / math.sqrt(va + vb)
    # Welch–Satterthwaite degrees of freedom
    dof = (va + vb) ** 2 / (va**2 / (len(x) - 1) + vb**2 / (len(y) - 1))
    from scipy import special  # local: scipy (0.3 s) is imported by the first test, not by every report

    return diff, float(2 * special.stdtr(dof, -abs(t)))


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order: the i-th smallest p times (m − i + 1), made
    monotone by a running maximum and capped at 1 (Holm 1979)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[i]))
        adjusted[i] = running
    return adjusted


# ------------------------------------------------------------------------------------------ direction
def better_sign(view: TableView, metric: str | None = None) -> int:
    """+1 when a higher figure is better, −1 when a lower one is, 0 when the figure has no direction
    (the round of the best value): the figure catalogue's direction, the metric's where the figure follows it."""
    return figure_sign(view.figure, METRICS[metric or view.metric].higher_is_better)


# ------------------------------------------------------------------------------------------ against the baseline
def paired_values(cell: Cell, base: Cell, figure: str) -> tuple[list[int], list[float], list[float], int, int]:
    """(seeds, cell values, baseline values, censored pairs, dropped pairs) of the seeds both cells ran, the
    never-reached rule (``CENSORED_RULE``) applied to to-target figures; a seed without a value in another
    figure (its run diverged before the round) is left out."""
    mine = dict(zip(cell.seeds, cell.values))
    theirs = dict(zip(base.seeds, base.values))
    seeds, a, b, censored, dropped = [], [], [], 0, 0
    for seed in sorted(set(mine) & set(theirs)):
        x, y = mine[seed], theirs[seed]
        if x is None and y is None:
            dropped += FIGURES[figure].censored
            continue
        if x is None or y is None:
            if not FIGURES[figure].censored:
                continue
            censored += 1
            x = float(cell.rounds_limit or 0) + 1 if x is None else x
            y = float(base.rounds_limit or 0) + 1 if y is None else y
        seeds.append(seed)
        a.append(float(x))
        b.append(float(y))
    return seeds, a, b, censored, dropped


def compare_cell(cell: Cell, base: Cell, baseline: str, figure: str) -> Comparison:
    """The paired comparison of ``cell`` with ``base`` (no Holm correction yet, no outcome)."""
    seeds, a, b, censored, dropped = paired_values(cell, base, figure)
    out = Comparison(baseline=baseline, pairs=len(seeds), seeds=seeds, censored=censored, dropped=dropped)
    censorless = FIGURES[figure].needs_target and not FIGURES[figure].censored
    if censorless and (None in cell.values or None in base.values):
        out.reason = f"{figure}: a seed never reached the target (censoring is defined on rounds only)"
    if len(seeds) < 2:
        out.reason = out.reason or f"{len(seeds)} seed pair(s): a paired test needs two"
        if seeds:
            out.difference = float(np.mean(np.subtract(a, b, dtype=np.float64)))
        return out
    differences = [x - y for x, y in zip(a, b)]
    out.difference, out.ci_low, out.ci_high = t_interval(differences)
    if out.reason:
        return out
    out.p_value = one_sample_p(differences)
    return out


def baseline_cell_key(cell: Cell, view: TableView, axis: str, baseline: str) -> tuple[str, str] | None:
    """The (row, column) of ``cell``'s baseline cell: the same labels with ``axis`` set to ``baseline``."""
    if axis not in cell.labels or cell.labels[axis] == baseline:
        return None
    labels = {**cell.labels, axis: baseline}
    return (" / ".join(labels[k] for k in view.rows), " / ".join(labels[k] for k in view.columns))


def compare_with_baseline(
    view: TableView, cells: dict[tuple[str, str], Cell], axis: str, baseline: str, alpha: float = ALPHA
) -> None:
    """Set ``cell.comparison`` of every run cell against its baseline cell; the p-values of the table's tests are
    Holm-corrected together, and a test significant after the correction marks the cell better or worse. The cells
    of values added on the command line (``--add``) are corrected as a family of their own, so the recipe's own
    cells keep the marks they have without them."""
    tested = []
    for cell in cells.values():
        if cell.static or cell.published_only or not cell.n:
            continue
        key = baseline_cell_key(cell, view, axis, baseline)
        base = cells.get(key) if key else None
        if base is None or not base.n:
            continue
        cell.comparison = compare_cell(cell, base, baseline, view.figure)
        if cell.comparison.p_value is not None:
            tested.append(cell)
    for family in ([c for c in tested if not c.added], [c for c in tested if c.added]):
        _holm_outcomes(view, family, alpha)


def _holm_outcomes(view: TableView, tested: list[Cell], alpha: float) -> None:
    """Holm-correct the p-values of ``tested`` (one family) and mark each cell better, worse or the same."""
    for cell, adjusted in zip(tested, holm([c.comparison.p_value for c in tested])):  # type: ignore[union-attr,misc]
        comparison = cell.comparison
        assert comparison is not None and comparison.difference is not None
        comparison.p_holm = adjusted
        metric = view.metrics.get(cell.labels.get("metric", ""), view.metric) if view.metrics else view.metric
        sign = better_sign(view, metric)
        if sign == 0:
            comparison.reason = f"figure {view.figure!r} has no better direction"
            continue
        if adjusted >= alpha or comparison.difference == 0:
            comparison.outcome = "same"
        else:
            comparison.outcome = "better" if sign * comparison.difference > 0 else "worse"


# ------------------------------------------------------------------------------------------ against the paper
def verdict(cell: Cell, *, synthetic: bool, scale: str, figure: str, tolerance: float = 0.0) -> Verdict | None:
    """Our cell against its published value (None: the paper prints none, or the cell is not a run cell)."""
    if cell.static or cell.published_only or cell.published is None:
        return None

    def not_comparable(reason: str) -> Verdict:
        return Verdict("not_comparable", reason, tolerance=tolerance)

    if synthetic:
        return not_comparable("synthetic data")
    if scale != "full":
        return not_comparable(f"scale {scale!r}, not the paper's setting")
    if not isinstance(cell.published, (int, float)):
        return not_comparable(f"the paper's value {cell.published!r} is not a number")
    published = float(cell.published)
    if cell.n == 0:
        return not_comparable("no finished run")
    if cell.partial:
        return not_comparable(f"partial: {cell.n} of {cell.expected} seeds")
    missing = sum(v is None for v in cell.values)
    if missing and FIGURES[figure].needs_target:
        if missing == cell.n and cell.rounds_limit is not None and published <= cell.rounds_limit:
            # no seed reached the target in R rounds, the paper did in fewer: ours is higher, for sure
            return Verdict("higher", tolerance=tolerance)
        return not_comparable(f"{missing} of {cell.n} seeds never reached the target")
    if missing:
        return not_comparable(f"{missing} of {cell.n} seeds have no value")
    if cell.n < 2:
        return not_comparable("one seed: no confidence interval")
    values = [float(v) for v in cell.values if v is not None]
    _, low, high = t_interval(values)
    shown = cell.mean if cell.mean is not None else float(np.mean(values))
    out = Verdict("reproduced", ci_low=low, ci_high=high, tolerance=tolerance)
    if low <= published <= high or abs(shown - published) <= tolerance:
        return out
    out.status = "higher" if published < low else "lower"
    return out


def reproduction_line(counts: dict[str, int], synthetic: bool = False, scale: str = "full") -> str:
    """ "k of n cells with a published number reproduced (…)"; for synthetic or non-paper-scale runs the line says
    no verdict is given."""
    if synthetic:
        return "no verdict on reproduction (synthetic data is not the paper's data)"
    if scale != "full":
        return f"no verdict on reproduction (scale {scale!r} is not the paper's setting)"
    if not counts["cells"]:
        return "no cell has a published number to compare with"
    return (
        f"{counts['reproduced']} of {counts['cells']} cells with a published number reproduced "
        f"({counts['higher']} higher, {counts['lower']} lower, {counts['not_comparable']} not comparable)"
    )
