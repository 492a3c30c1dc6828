"""The report's statistics against independent computations: the permutation tests against a brute-force
enumeration of every sign assignment or split, scipy's intervals on fixed numbers, Holm's correction by hand, the
never-reached rule of rounds-to-target, and the equivalence verdict's rules against intervals computed here."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as scipy_stats

from fedbench.recipes.views import TableView
from fedbench.report.cells import Cell, reproduction_counts
from fedbench.report.stats import (
    BOOTSTRAP_DRAWS,
    PAIRED_TEST,
    PERMUTATIONS,
    TWO_SAMPLE_TEST,
    Spread,
    bootstrap_figures,
    compare_cell,
    compare_with_baseline,
    holm,
    judges_figures,
    margin_of,
    reproduction_line,
    sign_flip_test,
    smallest_paired_p,
    smallest_two_sample_p,
    t_interval,
    two_sample_permutation_test,
    unreachable_significance,
    verdict,
)

# fixed per-seed numbers (seeds 0..4) of a method and of its baseline
METHOD = [71.2, 73.9, 70.4, 74.8, 72.1]
BASE = [70.1, 71.0, 70.6, 72.2, 70.3]


def cell(row: str, values: list[float | None], seeds: list[int] | None = None, **fields) -> Cell:
    seeds = list(range(len(values))) if seeds is None else seeds
    reached = [v for v in values if v is not None]
    return Cell(
        row=row,
        column="c",
        labels={"algorithm": row, "case": "c"},
        expected=len(values),
        n=len(values),
        values=values,
        seeds=seeds,
        mean=sum(reached) / len(reached) if reached else None,
        **fields,
    )


def brute_sign_flip_p(differences: list[float]) -> float:
    """Two-sided p by enumeration in exact rational arithmetic: the share of the 2^n sign assignments whose mean is
    at least as far from 0 as the observed one (the differences read as the decimals they print as)."""
    d = [Fraction(repr(round(x, 10))) for x in differences]
    observed = abs(sum(d))
    sums = [abs(sum(s * x for s, x in zip(signs, d))) for signs in itertools.product((1, -1), repeat=len(d))]
    return sum(total >= observed for total in sums) / len(sums)


def brute_two_sample_p(a: list[float], b: list[float]) -> float:
    """Two-sided p by enumeration of every split, in exact rational arithmetic."""
    pooled = [Fraction(repr(x)) for x in a + b]

    def statistic(chosen: set[int]) -> Fraction:
        first = [v for i, v in enumerate(pooled) if i in chosen]
        second = [v for i, v in enumerate(pooled) if i not in chosen]
        return sum(second) / len(second) - sum(first) / len(first)

    observed = abs(statistic(set(range(len(a)))))
    splits = [abs(statistic(set(c))) for c in itertools.combinations(range(len(pooled)), len(a))]
    return sum(s >= observed for s in splits) / len(splits)


def test_t_interval_is_scipys_one_sample_interval():
    mean, low, high = t_interval(METHOD)
    ci = scipy_stats.ttest_1samp(METHOD, 0.0).confidence_interval(0.95)
    assert mean == pytest.approx(sum(METHOD) / 5, rel=1e-12)
    assert (low, high) == pytest.approx((ci.low, ci.high), rel=1e-12)


def test_paired_difference_is_the_t_interval_and_p_the_sign_flip_test():
    comparison = compare_cell(cell("fedprox", METHOD), cell("fedavg", BASE), "fedavg", "best")
    differences = [m - b for m, b in zip(METHOD, BASE)]
    ci = scipy_stats.ttest_rel(METHOD, BASE).confidence_interval(0.95)
    assert comparison.pairs == 5 and comparison.seeds == [0, 1, 2, 3, 4]
    assert comparison.difference == pytest.approx(sum(differences) / 5, rel=1e-12)
    assert (comparison.ci_low, comparison.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-12)
    assert comparison.p_value == pytest.approx(brute_sign_flip_p(differences), rel=1e-12)
    # differences 1.1, 2.9, −0.2, 2.6, 1.8: ours, ours with −0.2 flipped, and their mirrors are as extreme
    assert comparison.p_value == 4 / 32
    assert (comparison.test, comparison.assignments) == (PAIRED_TEST, 32)
    assert comparison.statistic == pytest.approx(comparison.difference, rel=1e-12)
    document = comparison.to_json()
    assert (document["test"], document["assignments"]) == (PAIRED_TEST, 32)


def test_pairs_are_matched_by_seed_not_by_position():
    # the baseline ran seeds in another order and one seed more: only common seeds pair, each with its own seed
    base = cell("fedavg", [BASE[3], BASE[0], 99.0, BASE[1], BASE[2], BASE[4]], seeds=[3, 0, 7, 1, 2, 4])
    mixed = [71.2, 69.9, 70.4, 74.8, 70.0]  # differences of both signs: the pairing decides p
    comparison = compare_cell(cell("fedprox", mixed), base, "fedavg", "best")
    assert comparison.pairs == 5
    assert comparison.p_value == pytest.approx(brute_sign_flip_p([m - b for m, b in zip(mixed, BASE)]), rel=1e-12)


@pytest.mark.parametrize(
    "differences",
    [
        [1.2, -0.4, 0.9],
        [0.3, 0.3, -0.1, 0.5, 0.2, -0.6],
        [2.0, -1.0, 0.5, 0.25, -0.125, 1.5, 0.75, -0.3],
        [0.0, 1.0, -1.0, 2.0],  # a zero difference: its sign flips change nothing
    ],
)
def test_sign_flip_test_is_the_enumeration_of_every_sign_assignment(differences):
    test = sign_flip_test(differences)
    assert test.p_value == pytest.approx(brute_sign_flip_p(differences), rel=1e-12)
    assert test.exact and test.assignments == 2 ** len(differences) and test.name == PAIRED_TEST
    assert test.statistic == pytest.approx(float(np.mean(differences)), rel=1e-12)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 8])
def test_equal_differences_are_not_a_special_case_and_p_is_never_zero(n):
    # every seed moved alike (one test image better in every seed): p is the smallest the n pairs allow, 2^(1−n)
    test = sign_flip_test([0.01] * n)
    assert test.p_value == min(1.0, 2.0 ** (1 - n)) == smallest_paired_p(n)
    assert test.p_value > 0
    assert sign_flip_test([0.0] * n).p_value == 1.0


def test_smallest_paired_p_by_seed_count():
    assert [smallest_paired_p(n) for n in (0, 1, 2, 3, 5, 6)] == [1.0, 1.0, 0.5, 0.25, 0.0625, 0.03125]
    # beyond PERMUTATIONS assignments the test draws at random: its floor is 2 / (draws + 1)
    assert smallest_paired_p(14) == 1 / (PERMUTATIONS + 1)
    assert smallest_paired_p(13) == 2.0**-12


def test_many_pairs_draw_sign_assignments_from_a_fixed_seed():
    differences = [0.1 * ((-1) ** i) * (i + 1) + 0.05 for i in range(15)]  # 2^15 > PERMUTATIONS
    first, again = sign_flip_test(differences), sign_flip_test(differences)
    assert first == again  # the same report every time it is rendered
    assert not first.exact and first.assignments == PERMUTATIONS and "Monte Carlo" in first.name
    assert first.p_value >= 1 / (PERMUTATIONS + 1)
    assert first.p_value == pytest.approx(brute_sign_flip_p(differences), abs=0.03)  # a sample of 32,768


def test_two_sample_test_is_the_enumeration_of_every_split():
    a, b = [90.5, 91.5, 92.5, 90.1], [90.0, 91.0, 92.0]
    test = two_sample_permutation_test(a, b)
    assert test.p_value == pytest.approx(brute_two_sample_p(a, b), rel=1e-12)
    assert test.statistic == pytest.approx(np.mean(b) - np.mean(a), rel=1e-12)
    assert (test.exact, test.assignments, test.name) == (True, math.comb(7, 4), TWO_SAMPLE_TEST)
    # two samples without spread: p is the share of the splits as extreme, never 0
    assert two_sample_permutation_test([1.0, 1.0, 1.0], [2.0, 2.0, 2.0]).p_value == pytest.approx(2 / 20)


def test_smallest_two_sample_p():
    assert smallest_two_sample_p(2, 2) == pytest.approx(1 / 3)
    assert smallest_two_sample_p(3, 3) == pytest.approx(0.1)
    assert smallest_two_sample_p(4, 4) == pytest.approx(2 / 70)
    assert smallest_two_sample_p(1, 1) == 1.0
    assert smallest_two_sample_p(2, 3) == pytest.approx(1 / 10)  # unequal sizes: no mirror split
    assert smallest_two_sample_p(10, 10) == 1 / (PERMUTATIONS + 1)


def test_unreachable_significance_counts_holm_over_the_family():
    # 3 pairs: p ≥ 0.25 whatever the data; 3 tests: 0.75 after Holm; 7 pairs: 3 × 2^−6 = 0.047 < 0.05
    assert unreachable_significance([3, 3, 3]) == (3, 0.25, 0.75, 7)
    assert unreachable_significance([2]) == (2, 0.5, 0.5, 6)
    assert unreachable_significance([6]) is None  # 0.03125 < 0.05: one test of 6 pairs can be marked
    assert unreachable_significance([6, 6]) == (6, 0.03125, 0.0625, 7)
    assert unreachable_significance([3, 6]) == (6, 0.03125, 0.0625, 7)  # the most pairs of the family decide
    assert unreachable_significance([]) is None


def test_two_seeds_whose_differences_are_equal_get_no_mark():
    view = TableView(name="t", rows=["algorithm"], columns=["case"], figure="best")
    cells = {("fedavg", "c"): cell("fedavg", [90.0, 91.0]), ("better", "c"): cell("better", [90.01, 91.01])}
    compare_with_baseline(view, cells, "algorithm", "fedavg")
    comparison = cells[("better", "c")].comparison
    assert comparison.p_value == 0.5 and comparison.outcome == "same" and comparison.mark == "·"


def test_holm_by_hand():
    # sorted: 0.005 ×4 = 0.02, 0.01 ×3 = 0.03, 0.03 ×2 = 0.06, 0.04 ×1 = 0.04 → running max 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02], rel=1e-12)
    assert holm([0.3, 0.6]) == pytest.approx([0.6, 0.6])  # 0.3 ×2 = 0.6; 0.6 ×1 = 0.6
    assert holm([0.5, 0.9, 0.7]) == [1.0, 1.0, 1.0]  # capped at 1
    assert holm([0.02]) == [0.02] and holm([]) == []


def test_rounds_never_reached_are_censored_at_r_plus_one_and_double_misses_dropped():
    method = cell("fedprox", [12.0, None, 15.0, None, 11.0], rounds_limit=20)
    base = cell("fedavg", [14.0, 18.0, 16.0, None, 16.0], rounds_limit=20)
    comparison = compare_cell(method, base, "fedavg", "rounds_to_target")
    # seed 1: 21 (censored) vs 18; seed 3: both missing → dropped
    a, b = [12.0, 21.0, 15.0, 11.0], [14.0, 18.0, 16.0, 16.0]
    assert (comparison.pairs, comparison.censored, comparison.dropped) == (4, 1, 1)
    assert comparison.p_value == pytest.approx(brute_sign_flip_p([x - y for x, y in zip(a, b)]), rel=1e-12)


def test_other_figures_leave_seeds_without_a_value_out():
    comparison = compare_cell(cell("x", [1.0, None, 3.0]), cell("fedavg", [0.5, 2.0, 2.0]), "fedavg", "final")
    assert comparison.pairs == 2 and comparison.censored == 0
    one = compare_cell(cell("x", [1.0]), cell("fedavg", [0.5]), "fedavg", "best")
    assert one.p_value is None and "needs two" in one.reason and one.difference == pytest.approx(0.5)


def table_cells(figure_values: dict[str, list[float | None]], **fields) -> dict[tuple[str, str], Cell]:
    return {(row, "c"): cell(row, values, **fields) for row, values in figure_values.items()}


def test_holm_across_the_table_and_marks_follow_the_figures_direction():
    view = TableView(name="t", rows=["algorithm"], columns=["case"], figure="best")
    base = [70.1, 71.0, 70.6, 72.2, 70.3, 71.4, 69.8, 70.9]  # 8 seeds: 2^−7 × 3 tests < 0.05 is reachable
    far = [v + 3.0 + 0.1 * i for i, v in enumerate(base)]
    close = [v + (0.4 if i % 2 else -0.3) for i, v in enumerate(base)]
    worse = [v - 5.0 + 0.1 * i for i, v in enumerate(base)]
    cells = table_cells({"fedavg": base, "better": far, "close": close, "worse": worse})
    compare_with_baseline(view, cells, "algorithm", "fedavg")
    assert cells[("fedavg", "c")].comparison is None
    raw = [brute_sign_flip_p([x - y for x, y in zip(v, base)]) for v in (far, close, worse)]
    adjusted = holm(raw)
    got = [cells[(r, "c")].comparison for r in ("better", "close", "worse")]
    assert [c.p_value for c in got] == pytest.approx(raw, rel=1e-12)
    assert [c.p_holm for c in got] == pytest.approx(adjusted, rel=1e-12)
    assert adjusted[0] == adjusted[2] == pytest.approx(3 * 2 / 256) and adjusted[1] > 0.05
    assert [c.outcome for c in got] == ["better", "same", "worse"]
    assert [c.mark for c in got] == ["▲", "·", "▼"]

    # fewer rounds to the target is better: the same lower numbers mark ▲
    rounds_view = TableView(name="t", rows=["algorithm"], columns=["case"], figure="rounds_to_target", target=50)
    cells = table_cells({"fedavg": base, "fast": worse}, rounds_limit=100)
    compare_with_baseline(rounds_view, cells, "algorithm", "fedavg")
    assert cells[("fast", "c")].comparison.outcome == "better"


def test_cells_without_a_target_or_counting_to_another_than_the_baseline_are_not_tested():
    view = TableView(name="t", rows=["algorithm"], columns=["case"], figure="rounds_to_target", target=50)
    base, faster = [14.0, 15.0, 16.0, 17.0, 18.0, 19.0], [10.0, 11.0, 12.0, 13.0, 14.0, 15.0]
    cells = {
        ("fedavg", "c"): cell("fedavg", base, target=50.0),
        ("same", "c"): cell("same", faster, target=50.0),
        ("other", "c"): cell("other", faster, target=60.0),
        ("none", "c"): cell("none", [None] * 6, no_target=True),
    }
    compare_with_baseline(view, cells, "algorithm", "fedavg")
    assert cells[("same", "c")].comparison.mark == "▲" and cells[("same", "c")].comparison.p_holm == 2 / 64
    other = cells[("other", "c")].comparison  # rounds to 60 % beside rounds to 50 %: no pairing says which is faster
    assert (other.baseline, other.pairs, other.p_value, other.outcome) == ("fedavg", 0, None, "")
    assert other.reason == "the baseline counts to 50, this cell to 60"
    assert cells[("none", "c")].comparison is None  # nothing to reach: no test, not a censored one
    # a baseline cell without a target tests nothing
    cells = {("fedavg", "c"): cell("fedavg", [None] * 6, no_target=True), ("same", "c"): cell("same", faster)}
    compare_with_baseline(view, cells, "algorithm", "fedavg")
    assert cells[("same", "c")].comparison is None


# ------------------------------------------------------------------------------------------ paper verdicts
BEST = TableView(name="t", rows=["algorithm"], columns=["case"], figure="best")  # accuracy in %: δ = 1 point
SPREAD = [70.0, 72.0, 74.0]  # mean 72, sample std 2


def t_half(values: list[float], confidence: float) -> float:
    """The half-width of the t interval of the mean of ``values``, from scipy.stats."""
    return float(
        scipy_stats.t.ppf(0.5 + confidence / 2, len(values) - 1) * np.std(values, ddof=1) / math.sqrt(len(values))
    )


def judge(values, published, view=BEST, trials=None, **context):
    c = cell("fedavg", values, published=published)
    c.expected = context.pop("expected", c.expected)
    for key, value in context.pop("fields", {}).items():
        setattr(c, key, value)
    return verdict(
        c, view, synthetic=context.get("synthetic", False), scale=context.get("scale", "full"), trials=trials
    )


def test_three_seeds_that_cannot_pin_the_value_down_are_inconclusive_never_reproduced():
    # ours 72 ± 2 (3 seeds), the paper 72: the 90 % interval ±3.37 is wider than δ = 1, so no verdict either way
    got = judge(SPREAD, 72.0)
    half90, half95 = t_half(SPREAD, 0.90), t_half(SPREAD, 0.95)
    assert got.status == "inconclusive" and got.mark == "?"
    assert (got.ci90_low, got.ci90_high) == pytest.approx((-half90, half90), rel=1e-12)
    assert (got.ci_low, got.ci_high) == pytest.approx((-half95, half95), rel=1e-12)
    assert got.margin == 1.0 and got.difference == 0.0
    # the fewest seeds whose 90 % half-width at std 2 is below δ − |Δ| = 1, by scipy's quantiles
    expected = next(n for n in range(4, 100) if scipy_stats.t.ppf(0.95, n - 1) * 2 / math.sqrt(n) < 1.0)
    assert got.seeds_needed == expected == 13


def test_the_quickstart_example_95_2_does_not_reproduce_a_published_97():
    values = [94.3, 95.2, 96.1]  # 95.2 ± 0.9 over 3 seeds
    got = judge(values, 97.0)
    assert got.status == "inconclusive" and got.seeds_needed is not None
    assert got.seeds_needed == next(
        n for n in range(4, 1000) if scipy_stats.t.ppf(0.975, n - 1) * 0.9 / math.sqrt(n) < 1.8 - 1.0
    )


def test_ten_seeds_within_the_margin_reproduce():
    values = [72.3, 71.6, 72.0, 72.5, 71.8, 72.2, 71.9, 72.4, 71.7, 72.1]  # mean 72.05, std 0.30
    got = judge(values, 72.4)  # Δ −0.35, 90 % half-width 0.17: [−0.52, −0.18] inside ±1
    assert got.status == "reproduced" and got.mark == "✓" and got.seeds_needed is None
    assert got.ci90_low > -1.0 and got.ci90_high < 1.0
    # the same seeds 1.5 points below the paper: the 95 % interval lies beyond −δ
    assert judge(values, 73.6).status == "lower"
    assert judge(values, 70.5).status == "higher"
    # 1.2 below: the 90 % interval crosses −δ and the 95 % one is not beyond it
    assert judge(values, 73.25).status == "inconclusive"


@pytest.mark.parametrize(
    "values, published, context, status, reason",
    [
        ([80.0, 81.0, 79.0], 72.0, {}, "higher", ""),  # 95 % interval [5.5, 10.5] beyond +1
        ([64.0, 65.0, 63.0], 72.0, {}, "lower", ""),
        ([72.0, 72.0, 72.0], 72.5, {}, "reproduced", ""),  # no spread: the interval is Δ = −0.5 itself
        ([72.0, 72.0, 72.0], 73.5, {}, "lower", ""),
        (SPREAD, 72.0, {"synthetic": True}, "not_comparable", "synthetic"),
        (SPREAD, 72.0, {"scale": "smoke"}, "not_comparable", "scale"),
        (SPREAD, "—", {}, "not_comparable", "not a number"),
        ([72.0], 72.0, {}, "not_comparable", "one seed"),
        (SPREAD, 72.0, {"expected": 5}, "not_comparable", "partial"),
        ([70.0, None, 74.0], 72.0, {}, "not_comparable", "no value"),
    ],
)
def test_verdict_rules(values, published, context, status, reason):
    got = judge(values, published, **context)
    assert got is not None and got.status == status and reason in got.reason


def test_a_views_tolerance_overrides_the_default_margin():
    wide = BEST.model_copy(update={"tolerance": 4.0})
    assert judge(SPREAD, 72.0, view=wide).status == "reproduced"  # ±3.37 inside ±4
    assert judge(SPREAD, 72.0, view=wide).margin == 4.0
    assert judge(SPREAD, 72.0, view=BEST.model_copy(update={"tolerance": 0.0})).status == "inconclusive"


def test_default_margins_by_figure():
    c = cell("x", SPREAD, published=40.0)
    assert margin_of(BEST, c, 40.0) == 1.0
    assert margin_of(BEST.model_copy(update={"percent": False}), c, 0.4) == 0.01
    rounds = TableView(name="t", rows=["algorithm"], figure="rounds_to_target", target=50)
    assert margin_of(rounds, c, 40.0) == pytest.approx(4.0)
    assert margin_of(rounds, c, 6.0) == 1.0  # the floor of one round
    loss = TableView(name="t", rows=["algorithm"], figure="best", metric="test_loss")
    assert margin_of(loss, c, 2.0) == pytest.approx(0.4)
    costs = TableView(name="t", rows=["algorithm"], figure="gflops_to_target", target=50)
    assert margin_of(costs, c, 250.0) == pytest.approx(25.0)


def test_with_the_papers_std_and_trials_the_interval_is_welchs():
    ours = [71.0, 72.5, 73.1, 72.2]
    mean, std, trials = 72.0, 0.8, 3
    theirs = [mean - std, mean, mean + std]  # 3 values with that mean and sample std
    got = judge(ours, mean, trials=trials, fields={"published_std": std})
    for confidence, low, high in ((0.90, got.ci90_low, got.ci90_high), (0.95, got.ci_low, got.ci_high)):
        reference = scipy_stats.ttest_ind(ours, theirs, equal_var=False).confidence_interval(confidence)
        assert (low, high) == pytest.approx((reference.low, reference.high), rel=1e-10)
    assert got.interval.startswith("Welch")
    # without a trial count the paper's value is taken as fixed: the one-sample interval
    fixed = judge(ours, mean, fields={"published_std": std})
    assert (fixed.ci_low, fixed.ci_high) == pytest.approx(
        (np.mean(ours) - mean - t_half(ours, 0.95), np.mean(ours) - mean + t_half(ours, 0.95)), rel=1e-12
    )


def test_seeds_to_decide_stop_where_the_papers_spread_alone_is_too_wide():
    # the paper's std 3 over 3 trials: even infinitely many seeds leave a 90 % half-width of 2.92 × 3/√3 > δ
    assert Spread(3, 1.0, 3.0, 3).seeds_to_decide(0.0, 1.0) is None
    assert Spread(3, 1.0).seeds_to_decide(1.0, 1.0) is None  # on the margin: no seed count decides
    assert Spread(3, 2.0).seeds_to_decide(3.0, 1.0) == next(
        n for n in range(4, 100) if scipy_stats.t.ppf(0.975, n - 1) * 2 / math.sqrt(n) < 2.0
    )


@pytest.mark.parametrize(
    "values, published, status",
    [
        ([None, None, None], 80.0, "higher"),  # no seed reached it in 100 rounds; the paper needed 80 (δ 8)
        ([None, None, None], 95.0, "not_comparable"),  # 95 + 9.5 ≥ 101: beyond ours, within the margin
        ([None, None, None], 150.0, "not_comparable"),  # the paper needed more rounds than ours ran
        ([40.0, None, 44.0], 42.0, "not_comparable"),  # censored: some seeds never reached it
        ([40.0, 42.0, 44.0], 42.0, "reproduced"),  # the 90 % half-width 3.37 inside the margin ±4.2
        ([38.0, 42.0, 46.0], 42.0, "inconclusive"),  # 6.74: not inside, and not beyond
        ([41.0, 42.0, 43.0, 42.0, 41.5, 42.5], 42.0, "reproduced"),
    ],
)
def test_verdict_of_rounds_to_target(values, published, status):
    view = TableView(name="t", rows=["algorithm"], columns=["case"], figure="rounds_to_target", target=50)
    assert judge(values, published, view=view, fields={"rounds_limit": 100}).status == status


def test_a_seed_mean_curve_figure_is_judged_by_its_bootstrap():
    view = TableView(name="t", rows=["algorithm"], figure="rounds_to_target", target=50, summary="mean_curve")
    draws = [20.0] * 1940 + [None] * 60  # 3 % of the resamples never reach the target
    got = judge([20.0, 21.0], 20.0, view=view, fields={"rounds_limit": 100, "bootstrap": draws, "mean": 20.0})
    # 90 %: the 5th and 95th percentiles (20, 20) → inside ±2; 95 %: up to the 97.5th, a censored resample (≥ 101,
    # so unbounded above)
    assert (got.ci90_low, got.ci90_high) == (0.0, 0.0) and got.status == "reproduced"
    assert (got.ci_low, got.ci_high) == (0.0, math.inf) and got.interval == "bootstrap over seeds"
    far = judge([20.0, 21.0], 40.0, view=view, fields={"rounds_limit": 100, "bootstrap": [20.0] * 2000, "mean": 20.0})
    assert far.status == "lower"


def test_a_curve_that_never_reaches_the_target_reproduces_no_printed_round():
    """No resample reaches the target in R = 200 rounds: ours is ≥ 201, not 201. The paper's 184 (margin ±18.4,
    up to 202.4) might still be ours, so the cell is inconclusive, never reproduced; the paper's 157 (up to 172.7) is
    below even 201, so ours is higher."""
    view = TableView(name="t", rows=["algorithm"], figure="rounds_to_target", target=98, summary="mean_curve")
    fields = {"rounds_limit": 200, "bootstrap": [None] * 2000, "mean": None}
    near = judge([None] * 5, 184.0, view=view, fields=fields)
    assert near.status == "inconclusive" and (near.ci90_low, near.ci90_high) == (17.0, math.inf)
    assert judge([None] * 5, 157.0, view=view, fields=fields).status == "higher"


def test_bootstrap_figures_are_seeded_and_resample_whole_seeds():
    curves = [[(1, 0.2), (2, 0.6), (3, 0.9)], [(1, 0.4), (2, 0.8), (3, 1.0)]]
    figure = lambda curve: float(curve[1][1])  # noqa: E731 — the mean curve's value at round 2
    first = bootstrap_figures(curves, figure)
    assert first == bootstrap_figures(curves, figure) and len(first) == BOOTSTRAP_DRAWS
    # a resample of seeds (a, a), (a, b) or (b, b): the round-2 mean is 0.6, 0.7 or 0.8, nothing else
    assert set(np.round(first, 12)) == {0.6, 0.7, 0.8}
    assert bootstrap_figures([curves[0], curves[0]], figure) == [0.6] * BOOTSTRAP_DRAWS


def test_no_verdict_without_a_published_value_and_the_summary_line():
    assert judge(SPREAD, None) is None
    verdicts = [judge([71.9, 72.0, 72.1], p) for p in (72, 72.2, 90)] + [judge(SPREAD, 72), None]
    counts = reproduction_counts(verdicts)
    assert counts == {"reproduced": 2, "higher": 0, "lower": 1, "inconclusive": 1, "not_comparable": 0, "cells": 4}
    assert reproduction_line(counts) == (
        "2 reproduced, 0 higher, 1 lower, 1 inconclusive, 0 not comparable of 4 cells with a published number"
    )
    assert "no verdict" in reproduction_line(counts, synthetic=True)
    assert "no verdict" in reproduction_line(counts, scale="smoke")
    assert reproduction_line(dict(counts, cells=0)) == "no cell has a published number to compare with"


def test_a_verdict_reads_the_figures_only_of_real_full_scale_cells_with_a_published_number():
    assert judges_figures(cell("x", SPREAD, published=72.0), synthetic=False, scale="full")
    assert judges_figures(cell("x", SPREAD, published=3), synthetic=False, scale="full")
    assert not judges_figures(cell("x", SPREAD, published=72.0), synthetic=True, scale="full")
    assert not judges_figures(cell("x", SPREAD, published=72.0), synthetic=False, scale="quick")
    assert not judges_figures(cell("x", SPREAD, published="—"), synthetic=False, scale="full")
    assert not judges_figures(cell("x", SPREAD), synthetic=False, scale="full")
