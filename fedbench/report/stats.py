"""The statistics of a report: each cell against the table's baseline, against the paper, and two registries'
cells against each other. One function per formula; the permutation tests and the t distribution come from scipy.

Against the baseline (``compare_with_baseline``): the cell's per-seed figures are paired with the baseline
cell's by seed (same seed = same partition, model init and client schedule, fedbench.seeding), and the test is
the exact sign-flip permutation test of the mean paired difference ``cell − baseline`` (``sign_flip_test``): under
"no difference" each pair's difference is as likely to have either sign, so the 2^n sign assignments of n pairs
are equally likely, and p is the share of them whose mean difference is at least as far from 0 as ours. It is
exact and distribution-free for any n (no normality over 3 seeds), it tests the mean (the effect size we show,
unlike the signed-rank test's ranks), and its p is never 0: at least 2 of the 2^n assignments (ours and its
mirror) are as extreme, so p ≥ 2^(1−n) (``smallest_paired_p``): 2 seeds cannot go below 0.5, 3 below 0.25, and
p < 0.05 needs 6 pairs. Equal differences are not a special case. The effect size (mean difference) keeps its
95 % t interval. The p-values of a table are Holm-corrected together (``holm``). A mark says whether the cell is
significantly better (▲) or worse (▼) than the baseline after the correction, or neither (·); "better" follows
the figure's direction (``better_sign``: higher accuracy, fewer rounds, less time or memory);
``unreachable_significance`` says when a table's seed count cannot mark any cell at all.

Rounds-to-target (and the GFLOPs / bytes to the target) where a seed never reached the target within the run's
R rounds (``CENSORED_RULE``): its value is censored at R + 1 (it needed at least R + 1 rounds); a pair in which
both seeds never reached it is left out (it says nothing about the difference); the test then runs on the
remaining pairs, and the comparison counts its censored pairs (the difference is a bound in their direction).

Against the paper (``verdict``): an equivalence test against the figure's margin δ (fedbench.vocab.figures
``default_margin``; a view's ``tolerance`` overrides it). Reproduced when the 90 % interval of ours − published lies
inside ±δ (two one-sided tests at 0.05); higher / lower when the 95 % interval lies entirely above +δ / below −δ;
inconclusive otherwise, with the seed count that would likely decide it at our observed spread. The interval is
the one-sample t interval of our per-seed figures minus the published value; where the paper gives its std and
the recipe its trial count, Welch's interval of the difference of two means; for a figure of the seed-mean curve
(``summary = "mean_curve"``), a seeded bootstrap over seeds. Not comparable for synthetic data, a non-paper scale,
partial seeds, fewer than two seeds, a seed without a value, or a published value that is not a number.

Two registries (``two_sample_permutation_test``): the same cell's per-seed figures from registry A and registry B,
the exact permutation test of the difference of the means over the ways of splitting the pooled figures into
groups of A's and B's sizes (the registries need not hold the same seeds, so no pairing); "within seed noise" when
p ≥ 0.05 (uncorrected, so a real difference is flagged rather than hidden); no answer where the seed counts cannot
reach 0.05 at all.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from fedbench.report.cells import Cell, Comparison, Verdict
from fedbench.vocab.figures import FIGURES, default_margin
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


# The permutation tests enumerate every assignment where there are at most this many (exact: 13 seed pairs, or
# 7 + 7 seeds of two registries), else draw this many at random from a fixed seed (``MONTE_CARLO_SEED``), so a
# report is the same every time it is rendered.
PERMUTATIONS = 9999
MONTE_CARLO_SEED = 0
PAIRED_TEST = "exact sign-flip permutation test of the mean paired difference"
TWO_SAMPLE_TEST = "exact two-sample permutation test of the difference of means"


@dataclass(frozen=True)
class PermutationTest:
    """A permutation test's outcome: its name, its statistic (a mean difference), its two-sided p, the number of
    assignments it counted over and whether those were all of them (exact) or a seeded random draw."""

    name: str
    statistic: float
    p_value: float
    assignments: int
    exact: bool


# Values closer than this share of the figures' magnitude are the float rounding of the same arithmetic (a sum in
# another order), not data: an assignment whose statistic is that close to ours counts as a tie, as it is in exact
# arithmetic. Accuracies differ by at least one test sample in 10^4–10^5 (a 1e-5 share of 100 %), far above it.
# (scipy's ``permutation_test`` takes a tolerance relative to the statistic, which misses such ties when the mean
# difference is small beside the figures: for accuracy, the usual case; so the enumeration is done here.)
RESOLUTION = 1e-9


def _p_value(null: np.ndarray, observed: float, tolerance: float, exact: bool) -> float:
    """Two-sided p: the share of the assignments' statistics at least as far from 0 as ours (ties within
    ``tolerance``); a random draw counts ours as one more assignment, so p is never 0 either way."""
    extreme = int(np.count_nonzero(np.abs(null) >= abs(observed) - tolerance))
    return extreme / len(null) if exact else (extreme + 1) / (len(null) + 1)


def _label(name: str, exact: bool, assignments: int) -> str:
    return name if exact else name.replace("exact ", "") + f" (Monte Carlo, {assignments:,} random assignments)"


def sign_flip_test(differences: Sequence[float], scale: float | None = None) -> PermutationTest:
    """The sign-flip permutation test of the mean of paired ``differences`` (n ≥ 1): statistic their mean, p the share
    of the 2^n sign assignments whose mean is as far from 0 as ours (every one of them up to ``PERMUTATIONS``, else
    that many drawn from ``MONTE_CARLO_SEED``). ``scale``: the magnitude of the figures whose differences these
    are (default the largest difference), which sets the tie tolerance (``RESOLUTION``)."""
    d = np.asarray(differences, dtype=np.float64)
    n = len(d)
    exact = 2**n <= PERMUTATIONS
    if exact:  # row k: the signs of the bits of k, so every assignment once
        signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)) & 1)
    else:
        signs = np.random.default_rng(MONTE_CARLO_SEED).choice([-1.0, 1.0], size=(PERMUTATIONS, n))
    observed = float(d.mean())
    magnitude = float(np.max(np.abs(d))) if scale is None else scale
    p = _p_value(signs @ d / n, observed, RESOLUTION * magnitude, exact)
    return PermutationTest(_label(PAIRED_TEST, exact, len(signs)), observed, p, len(signs), exact)


def two_sample_permutation_test(a: Sequence[float], b: Sequence[float]) -> PermutationTest:
    """The permutation test of mean(b) − mean(a) over the splits of the pooled values into groups of the sizes of
    ``a`` and ``b`` (unpaired samples): every split up to ``PERMUTATIONS``, else that many random ones."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    pooled = np.concatenate([x, y])
    exact = math.comb(len(pooled), len(x)) <= PERMUTATIONS
    if exact:
        chosen = np.array(list(itertools.combinations(range(len(pooled)), len(x))), dtype=np.int64)
    else:
        draws = np.tile(np.arange(len(pooled)), (PERMUTATIONS, 1))
        chosen = np.random.default_rng(MONTE_CARLO_SEED).permuted(draws, axis=1)[:, : len(x)]
    in_a = pooled[chosen].sum(axis=1)
    null = (pooled.sum() - in_a) / len(y) - in_a / len(x)
    observed = float(y.mean() - x.mean())
    p = _p_value(null, observed, RESOLUTION * float(np.max(np.abs(pooled))), exact)
    return PermutationTest(_label(TWO_SAMPLE_TEST, exact, len(chosen)), observed, p, len(chosen), exact)


def smallest_paired_p(pairs: int) -> float:
    """The smallest two-sided p the sign-flip test can give over ``pairs`` pairs: 2 of the 2^n assignments (ours and
    its mirror) are always as extreme as ours; beyond ``PERMUTATIONS`` the Monte Carlo p's floor, 1 / (draws + 1)."""
    if pairs < 1:
        return 1.0
    if 2**pairs > PERMUTATIONS:
        return 1 / (PERMUTATIONS + 1)
    return min(1.0, 2.0 ** (1 - pairs))


def smallest_two_sample_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided p the two-sample permutation test can give: 2 / C(n_a + n_b, n_a) for equal sizes (the
    observed split and its mirror), 1 / C otherwise, or the Monte Carlo floor beyond ``PERMUTATIONS``."""
    splits = math.comb(n_a + n_b, n_a)
    if splits > PERMUTATIONS:
        return 1 / (PERMUTATIONS + 1)
    return min(1.0, (2 if n_a == n_b else 1) / splits)


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
    test = sign_flip_test(differences, scale=float(np.max(np.abs([*a, *b]))))
    out.p_value, out.test, out.statistic, out.assignments = test.p_value, test.name, test.statistic, test.assignments
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
        if cell.static or cell.published_only or not cell.n or cell.no_target:
            continue
        key = baseline_cell_key(cell, view, axis, baseline)
        base = cells.get(key) if key else None
        if base is None or not base.n or base.no_target:
            continue
        if base.target != cell.target:  # rounds to two targets: pairing them says nothing about which is faster
            cell.comparison = Comparison(
                baseline, reason=f"the baseline counts to {base.target:g}, this cell to {cell.target:g}"
            )
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


# ------------------------------------------------------------------------------------------ a table's reach
def unreachable_significance(pairs: Sequence[int], alpha: float = ALPHA) -> tuple[int, float, float, int] | None:
    """For one Holm family of paired tests over ``pairs`` seed pairs each: None when some cell could be marked;
    else (the most pairs of any test, the smallest p those allow, that p after Holm over the family, the pairs
    every test would need for a mark to be possible). Holm multiplies the smallest p by the family's size."""
    if not pairs:
        return None
    most, tests = max(pairs), len(pairs)
    smallest = smallest_paired_p(most)
    if tests * smallest < alpha:
        return None
    needed = most + 1
    while tests * smallest_paired_p(needed) >= alpha and 2**needed <= PERMUTATIONS:
        needed += 1
    return most, smallest, min(1.0, tests * smallest), needed


# ------------------------------------------------------------------------------------------ against the paper
CONFIDENCE_EQUIVALENCE = 0.90  # two one-sided tests at 0.05 = the 90 % interval inside ±δ
BOOTSTRAP_DRAWS = 2000  # resamples of the seeds for a figure of the seed-mean curve
BOOTSTRAP_SEED = 0  # fixed: the same registry gives the same verdict every time
MOST_SEEDS = 10_000  # the search for the seeds that would decide an inconclusive cell stops here


def _t_quantile(dof: float, confidence: float) -> float:
    from scipy import special  # local: scipy (0.3 s) is imported by the first test, not by every report

    return float(special.stdtrit(dof, 0.5 + confidence / 2))


def _normal_quantile(confidence: float) -> float:
    from scipy import special  # local: as _t_quantile

    return float(special.ndtri(0.5 + confidence / 2))


@dataclass(frozen=True)
class Spread:
    """How (ours − published) is uncertain, and how that would shrink with more seeds: our ``n`` seeds with sample
    std ``ours``; the paper's std ``theirs`` over ``trials`` trials (Welch) where known; ``normal``: a bootstrap
    over seeds (its std scaled to one seed), read with normal quantiles."""

    n: int
    ours: float
    theirs: float = 0.0
    trials: int = 0
    normal: bool = False

    def standard_error(self, n: int | None = None) -> float:
        n = self.n if n is None else n
        return math.sqrt(self.ours**2 / n + (self.theirs**2 / self.trials if self.trials else 0.0))

    def quantile(self, confidence: float, n: int | None = None) -> float:
        n = self.n if n is None else n
        if self.normal:
            return _normal_quantile(confidence)
        if not self.trials:
            return _t_quantile(n - 1, confidence)
        va, vb = self.ours**2 / n, self.theirs**2 / self.trials
        if va + vb == 0.0:
            return _t_quantile(n - 1, confidence)
        # Welch–Satterthwaite degrees of freedom
        dof = (va + vb) ** 2 / (va**2 / (n - 1) + vb**2 / (self.trials - 1))
        return _t_quantile(dof, confidence)

    def interval(self, difference: float, confidence: float) -> tuple[float, float]:
        half = self.quantile(confidence) * self.standard_error()
        return difference - half, difference + half

    def seeds_to_decide(self, difference: float, margin: float) -> int | None:
        """The fewest seeds whose interval, at this spread and this difference, would lie inside ±δ (|difference|
        < δ) or beyond it (|difference| > δ); None when no seed count would (the difference is on the margin, or
        the paper's own spread alone is too wide)."""
        gap = abs(margin - abs(difference))
        confidence = CONFIDENCE_EQUIVALENCE if abs(difference) < margin else CONFIDENCE

        def decides(n: int) -> bool:
            return self.quantile(confidence, n) * self.standard_error(n) < gap

        if gap == 0.0:
            return None
        low, high = self.n, self.n + 1  # the half-width shrinks as n grows: double, then bisect
        while not decides(high):
            if high >= MOST_SEEDS:
                return None
            low, high = high, min(2 * high, MOST_SEEDS)
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (low, middle) if decides(middle) else (middle, high)
        return high


def bootstrap_figures(
    seed_curves: Sequence[Sequence[tuple[int, float]]],
    figure_of_curve: Callable[[list[tuple[int, float]]], float | None],
) -> list[float | None]:
    """The figure of the seed-mean curve of ``BOOTSTRAP_DRAWS`` resamples (with replacement) of the seeds, drawn
    from ``BOOTSTRAP_SEED``: the distribution a figure of the mean curve (FedTrip's rounds to target) would have
    over other draws of the seeds."""
    rounds = sorted(set.intersection(*(set(r for r, _ in c) for c in seed_curves)))
    values = np.array([[dict(c)[r] for r in rounds] for c in seed_curves], dtype=np.float64)
    draws = np.random.default_rng(BOOTSTRAP_SEED).integers(
        0, len(seed_curves), size=(BOOTSTRAP_DRAWS, len(seed_curves))
    )
    means = values[draws].mean(axis=1)
    return [figure_of_curve(list(zip(rounds, row.tolist()))) for row in means]


def cell_metric(view: TableView, cell: Cell) -> str:
    """The curve metric of ``cell``: its row's or column's on a "metric" pseudo-axis, else the view's."""
    return view.metrics.get(cell.labels.get("metric", ""), view.metric) if view.metrics else view.metric


def margin_of(view: TableView, cell: Cell, published: float) -> float:
    """δ of ``cell``: the view's ``tolerance``, else the figure's default (fedbench.vocab.figures.default_margin)."""
    if view.tolerance is not None:
        return view.tolerance
    return default_margin(view.figure, METRICS[cell_metric(view, cell)].percent, view.percent, published)


def judges_figures(cell: Cell, *, synthetic: bool, scale: str) -> bool:
    """Whether ``cell``'s verdict reads its figures: a published number, on the paper's data at the paper's scale
    (``verdict``'s own conditions; the table builder computes a seed-mean cell's bootstrap only then)."""
    return not synthetic and scale == "full" and isinstance(cell.published, (int, float))


def verdict(cell: Cell, view: TableView, *, synthetic: bool, scale: str, trials: int | None = None) -> Verdict | None:
    """Our cell against its published value (None: the paper prints none, or the cell is not a run cell), judged
    by the equivalence margin δ (``margin_of``). ``trials``: the paper's trial count, for Welch's interval where it
    prints a std; a cell of a seed-mean-curve figure uses its bootstrap (``cell.bootstrap``)."""
    if cell.static or cell.published_only or cell.published is None:
        return None
    figure = view.figure

    def not_comparable(reason: str) -> Verdict:
        return Verdict("not_comparable", reason)

    if synthetic:
        return not_comparable("synthetic data")
    if scale != "full":
        return not_comparable(f"scale {scale!r}, not the paper's setting")
    if not isinstance(cell.published, (int, float)):
        return not_comparable(f"the paper's value {cell.published!r} is not a number")
    published = float(cell.published)
    margin = margin_of(view, cell, published)
    if cell.n == 0:
        return not_comparable("no finished run")
    if cell.partial:
        return not_comparable(f"partial: {cell.n} of {cell.expected} seeds")
    if cell.n < 2:
        return not_comparable("one seed: no confidence interval")
    if cell.bootstrap:
        return _bootstrap_verdict(cell, published, margin, figure)
    missing = sum(v is None for v in cell.values)
    if missing and FIGURES[figure].needs_target:
        if missing == cell.n and cell.rounds_limit is not None and published + margin < cell.rounds_limit + 1:
            # no seed reached the target in R rounds, the paper did in fewer than R + 1 − δ: ours is higher, for sure
            return Verdict("higher", margin=margin, interval="every seed beyond the run's rounds")
        return not_comparable(f"{missing} of {cell.n} seeds never reached the target")
    if missing:
        return not_comparable(f"{missing} of {cell.n} seeds have no value")
    values = np.asarray([float(v) for v in cell.values if v is not None], dtype=np.float64)
    difference = float(values.mean()) - published
    ours = float(values.std(ddof=1))
    if trials is not None and trials >= 2 and cell.published_std is not None:  # the paper's mean of its trials
        spread = Spread(len(values), ours, float(cell.published_std), trials)
        kind = f"Welch, the paper's std over {trials} trials"
    else:  # the paper's value taken as fixed
        spread, kind = Spread(len(values), ours), "t, ours minus the paper's value"
    return _decide(
        difference,
        spread.interval(difference, CONFIDENCE_EQUIVALENCE),
        spread.interval(difference, CONFIDENCE),
        margin,
        kind,
        spread,
    )


def _bootstrap_verdict(cell: Cell, published: float, margin: float, figure: str) -> Verdict:
    """The verdict of a figure of the seed-mean curve, from its bootstrap over seeds: percentile intervals (the
    resample below and above each tail, no interpolation). A resample that never reaches the target is censored: it
    needed at least R + 1 rounds (a cost: more than any finite one) and possibly any number more, so it counts as
    R + 1 for the interval's lower end and as infinite for its upper end. A cell whose resamples are censored can
    then be *higher* (even R + 1 is beyond the margin), never *reproduced* or *lower*."""
    assert cell.bootstrap is not None  # called for a cell with a bootstrap only
    beyond = float(cell.rounds_limit or 0) + 1 if FIGURES[figure].censored else math.inf
    values = [None if v is None else float(v) for v in cell.bootstrap]
    at_least = np.asarray([beyond if v is None else v for v in values], dtype=np.float64) - published
    at_most = np.asarray([math.inf if v is None else v for v in values], dtype=np.float64) - published
    observed = (beyond if cell.mean is None else float(cell.mean)) - published

    def interval(confidence: float) -> tuple[float, float]:
        tail = 100 * (1 - confidence) / 2
        return float(np.percentile(at_least, tail, method="lower")), float(
            np.percentile(at_most, 100 - tail, method="higher")
        )

    finite = at_most[np.isfinite(at_most)]
    spread = Spread(cell.n, float(finite.std(ddof=1)) * math.sqrt(cell.n) if len(finite) > 1 else 0.0, normal=True)
    return _decide(
        observed, interval(CONFIDENCE_EQUIVALENCE), interval(CONFIDENCE), margin, "bootstrap over seeds", spread
    )


def _decide(
    difference: float,
    interval90: tuple[float, float],
    interval95: tuple[float, float],
    margin: float,
    kind: str,
    spread: Spread,
) -> Verdict:
    out = Verdict(
        "inconclusive",
        difference=difference,
        ci90_low=interval90[0],
        ci90_high=interval90[1],
        ci_low=interval95[0],
        ci_high=interval95[1],
        margin=margin,
        interval=kind,
    )
    if -margin < interval90[0] and interval90[1] < margin:
        out.status = "reproduced"
    elif interval95[0] > margin:
        out.status = "higher"
    elif interval95[1] < -margin:
        out.status = "lower"
    else:
        out.seeds_needed = spread.seeds_to_decide(difference, margin) if math.isfinite(difference) else None
    return out


REPRODUCTION_WORDS = (
    ("reproduced", "reproduced"),
    ("higher", "higher"),
    ("lower", "lower"),
    ("inconclusive", "inconclusive"),
    ("not_comparable", "not comparable"),
)


def reproduction_line(counts: dict[str, int], synthetic: bool = False, scale: str = "full") -> str:
    """ "r reproduced, h higher, l lower, i inconclusive, c not comparable of n cells"; for synthetic or non-paper-
    scale runs the line says no verdict is given."""
    if synthetic:
        return "no verdict on reproduction (synthetic data is not the paper's data)"
    if scale != "full":
        return f"no verdict on reproduction (scale {scale!r} is not the paper's setting)"
    if not counts["cells"]:
        return "no cell has a published number to compare with"
    parts = ", ".join(f"{counts[status]} {words}" for status, words in REPRODUCTION_WORDS)
    return f"{parts} of {counts['cells']} cells with a published number"
