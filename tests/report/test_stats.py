"""The report's statistics against independent computations: scipy's own tests and intervals on fixed numbers,
Holm's correction by hand, the never-reached rule of rounds-to-target, and the paper verdict's rules."""

from __future__ import annotations

import math

import pytest
from scipy import stats as scipy_stats

from fedbench.recipes.views import TableView
from fedbench.report.cells import Cell, reproduction_counts
from fedbench.report.stats import (
    compare_cell,
    compare_with_baseline,
    holm,
    one_sample_p,
    reproduction_line,
    t_interval,
    verdict,
    welch,
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


def test_t_interval_is_scipys_one_sample_interval():
    mean, low, high = t_interval(METHOD)
    ci = scipy_stats.ttest_1samp(METHOD, 0.0).confidence_interval(0.95)
    assert mean == pytest.approx(sum(METHOD) / 5, rel=1e-12)
    assert (low, high) == pytest.approx((ci.low, ci.high), rel=1e-12)


def test_paired_difference_ci_and_p_are_scipys_paired_t_test():
    comparison = compare_cell(cell("fedprox", METHOD), cell("fedavg", BASE), "fedavg", "best")
    reference = scipy_stats.ttest_rel(METHOD, BASE)
    ci = reference.confidence_interval(0.95)
    assert comparison.pairs == 5 and comparison.seeds == [0, 1, 2, 3, 4]
    assert comparison.difference == pytest.approx(sum(m - b for m, b in zip(METHOD, BASE)) / 5, rel=1e-12)
    assert (comparison.ci_low, comparison.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-12)
    assert comparison.p_value == pytest.approx(reference.pvalue, rel=1e-10)


def test_pairs_are_matched_by_seed_not_by_position():
    # the baseline ran seeds in another order and one seed more: only common seeds pair, each with its own seed
    base = cell("fedavg", [BASE[3], BASE[0], 99.0, BASE[1], BASE[2], BASE[4]], seeds=[3, 0, 7, 1, 2, 4])
    comparison = compare_cell(cell("fedprox", METHOD), base, "fedavg", "best")
    assert comparison.pairs == 5
    assert comparison.p_value == pytest.approx(scipy_stats.ttest_rel(METHOD, BASE).pvalue, rel=1e-10)


def test_welch_is_scipys_unequal_variance_test():
    difference, p = welch(BASE, METHOD[:4])
    reference = scipy_stats.ttest_ind(METHOD[:4], BASE, equal_var=False)
    assert difference == pytest.approx(sum(METHOD[:4]) / 4 - sum(BASE) / 5, rel=1e-12)
    assert p == pytest.approx(reference.pvalue, rel=1e-10)


def test_holm_by_hand():
    # sorted: 0.005 ×4 = 0.02, 0.01 ×3 = 0.03, 0.03 ×2 = 0.06, 0.04 ×1 = 0.04 → running max 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02], rel=1e-12)
    assert holm([0.3, 0.6]) == pytest.approx([0.6, 0.6])  # 0.3 ×2 = 0.6; 0.6 ×1 = 0.6
    assert holm([0.5, 0.9, 0.7]) == [1.0, 1.0, 1.0]  # capped at 1
    assert holm([0.02]) == [0.02] and holm([]) == []


def test_differences_without_spread():
    assert one_sample_p([2.0, 2.0, 2.0]) == 0.0
    assert one_sample_p([0.0, 0.0]) == 1.0
    assert welch([1.0, 1.0], [1.0, 1.0]) == (0.0, 1.0)


def test_rounds_never_reached_are_censored_at_r_plus_one_and_double_misses_dropped():
    method = cell("fedprox", [12.0, None, 15.0, None, 11.0], rounds_limit=20)
    base = cell("fedavg", [14.0, 18.0, 16.0, None, 16.0], rounds_limit=20)
    comparison = compare_cell(method, base, "fedavg", "rounds_to_target")
    # seed 1: 21 (censored) vs 18; seed 3: both missing → dropped
    a, b = [12.0, 21.0, 15.0, 11.0], [14.0, 18.0, 16.0, 16.0]
    assert (comparison.pairs, comparison.censored, comparison.dropped) == (4, 1, 1)
    assert comparison.p_value == pytest.approx(scipy_stats.ttest_rel(a, b).pvalue, rel=1e-10)


def test_other_figures_leave_seeds_without_a_value_out():
    comparison = compare_cell(cell("x", [1.0, None, 3.0]), cell("fedavg", [0.5, 2.0, 2.0]), "fedavg", "final")
    assert comparison.pairs == 2 and comparison.censored == 0
    one = compare_cell(cell("x", [1.0]), cell("fedavg", [0.5]), "fedavg", "best")
    assert one.p_value is None and "needs two" in one.reason and one.difference == pytest.approx(0.5)


def table_cells(figure_values: dict[str, list[float | None]], **fields) -> dict[tuple[str, str], Cell]:
    return {(row, "c"): cell(row, values, **fields) for row, values in figure_values.items()}


def test_holm_across_the_table_and_marks_follow_the_figures_direction():
    view = TableView(name="t", rows=["algorithm"], columns=["case"], figure="best")
    far = [v + 3.0 for v in BASE]
    far[0] += 0.4  # not constant: a finite t
    worse = [v - 5.0 + 0.1 * i for i, v in enumerate(BASE)]
    cells = table_cells({"fedavg": BASE, "better": far, "close": METHOD, "worse": worse})
    compare_with_baseline(view, cells, "algorithm", "fedavg")
    assert cells[("fedavg", "c")].comparison is None
    raw = [scipy_stats.ttest_rel(v, BASE).pvalue for v in (far, METHOD, worse)]
    adjusted = holm(raw)
    got = [cells[(r, "c")].comparison for r in ("better", "close", "worse")]
    assert [c.p_holm for c in got] == pytest.approx(adjusted, rel=1e-10)
    expected = [
        "better" if p < 0.05 and d > 0 else "worse" if p < 0.05 else "same" for p, d in zip(adjusted, (1, 1, -1))
    ]
    assert [c.outcome for c in got] == expected
    assert expected[0] == "better" and expected[2] == "worse"
    assert [c.mark for c in got] == [{"better": "▲", "worse": "▼", "same": "·"}[e] for e in expected]

    # fewer rounds to the target is better: the same lower numbers mark ▲
    rounds_view = TableView(name="t", rows=["algorithm"], columns=["case"], figure="rounds_to_target", target=50)
    cells = table_cells({"fedavg": BASE, "fast": worse}, rounds_limit=100)
    compare_with_baseline(rounds_view, cells, "algorithm", "fedavg")
    assert cells[("fast", "c")].comparison.outcome == "better"


# ------------------------------------------------------------------------------------------ paper verdicts
SPREAD = [70.0, 72.0, 74.0]  # mean 72, sample std 2: 95% t interval 72 ± t(0.975, 2) × 2/√3 = [67.03, 76.97]
HALF = float(scipy_stats.t.ppf(0.975, 2)) * 2 / math.sqrt(3)


@pytest.mark.parametrize(
    "values, published, context, tolerance, status, reason",
    [
        (SPREAD, 72.0, {}, 0.0, "reproduced", ""),
        (SPREAD, 72.0 + HALF - 0.01, {}, 0.0, "reproduced", ""),  # just inside the interval
        (SPREAD, 72.0 + HALF + 0.01, {}, 0.0, "lower", ""),  # ours below the paper
        (SPREAD, 72.0 - HALF - 0.01, {}, 0.0, "higher", ""),
        (SPREAD, 72.0 + HALF + 0.5, {}, 6.0, "reproduced", ""),  # outside the CI, within the tolerance (|Δ| 5.47)
        ([72.0, 72.0, 72.0], 72.5, {}, 0.0, "lower", ""),  # no spread: the interval is the value
        (SPREAD, 72.0, {"synthetic": True}, 0.0, "not_comparable", "synthetic"),
        (SPREAD, 72.0, {"scale": "smoke"}, 0.0, "not_comparable", "scale"),
        (SPREAD, "—", {}, 0.0, "not_comparable", "not a number"),
        ([72.0], 72.0, {}, 0.0, "not_comparable", "one seed"),
        (SPREAD, 72.0, {"expected": 5}, 0.0, "not_comparable", "partial"),
        ([70.0, None, 74.0], 72.0, {}, 0.0, "not_comparable", "no value"),
    ],
)
def test_verdict_rules(values, published, context, tolerance, status, reason):
    c = cell("fedavg", values, published=published)
    c.expected = context.get("expected", c.expected)
    got = verdict(
        c,
        synthetic=context.get("synthetic", False),
        scale=context.get("scale", "full"),
        figure="best",
        tolerance=tolerance,
    )
    assert got is not None and got.status == status and reason in got.reason


@pytest.mark.parametrize(
    "values, published, status",
    [
        ([None, None, None], 80.0, "higher"),  # no seed reached it in 100 rounds; the paper needed 80
        ([None, None, None], 150.0, "not_comparable"),  # the paper needed more rounds than ours ran
        ([40.0, None, 44.0], 42.0, "not_comparable"),  # censored: some seeds never reached it
        ([40.0, 42.0, 44.0], 42.0, "reproduced"),
    ],
)
def test_verdict_of_rounds_to_target(values, published, status):
    c = cell("fedavg", values, published=published, rounds_limit=100)
    assert verdict(c, synthetic=False, scale="full", figure="rounds_to_target").status == status


def test_no_verdict_without_a_published_value_and_the_summary_line():
    assert verdict(cell("x", SPREAD), synthetic=False, scale="full", figure="best") is None
    verdicts = [
        verdict(cell("x", SPREAD, published=p), synthetic=False, scale="full", figure="best") for p in (72, 73, 90)
    ] + [None]
    counts = reproduction_counts(verdicts)
    assert counts == {"reproduced": 2, "higher": 0, "lower": 1, "not_comparable": 0, "cells": 3}
    assert reproduction_line(counts).startswith("2 of 3 cells with a published number reproduced")
    assert "no verdict" in reproduction_line(counts, synthetic=True)
    assert "no verdict" in reproduction_line(counts, scale="smoke")
