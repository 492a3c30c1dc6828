"""``fedbench compare``'s pairing (``fedbench/report/compare.py``): the same cell of two registries, their difference
B − A, and whether it is within seed noise — the exact two-sample permutation test (checked against an enumeration of
every split here) where the seed counts can reach p < 0.05, no answer where they cannot, identical values without a
test, censored rounds-to-target seeds counted as R + 1."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from report_fixtures import cell, small_table

from fedbench.report.compare import compare_tables, pair_cells, render_comparison, summary_line


def enumerated_p(a: list[float], b: list[float]) -> float:
    """The share of the splits of the pooled values whose |mean(B) − mean(A)| is at least the observed one."""
    pooled = np.array(a + b)
    observed = abs(np.mean(b) - np.mean(a))
    splits = [
        abs(np.delete(pooled, list(c)).mean() - pooled[list(c)].mean())
        for c in itertools.combinations(range(len(pooled)), len(a))
    ]
    return float(np.mean(np.array(splits) >= observed - 1e-9))


def test_a_permutation_test_decides_whether_a_difference_is_seed_noise():
    values_a, values_b = [90.0, 91.0, 92.0, 91.2], [90.5, 91.5, 92.5, 90.9]
    pair = pair_cells(cell("x", "y", values_a), cell("x", "y", values_b), "best")
    assert pair.difference == pytest.approx(np.mean(values_b) - np.mean(values_a))
    assert pair.p_value == pytest.approx(enumerated_p(values_a, values_b), rel=1e-12) and pair.within_noise is True
    assert (pair.assignments, pair.test) == (70, "exact two-sample permutation test of the difference of means")
    far = pair_cells(cell("x", "y", values_a), cell("x", "y", [80.0, 80.1, 80.2, 80.3]), "best")
    assert far.difference == pytest.approx(80.15 - 91.05) and far.within_noise is False
    assert far.p_value == pytest.approx(2 / 70)  # the observed split and its mirror: the smallest p of 4 + 4


def test_seed_counts_that_cannot_reach_significance_give_no_answer():
    # 2 + 2 seeds without spread, B one point higher: no test over 6 splits can give p < 0.05, so no "yes" either
    pair = pair_cells(cell("x", "y", [90.0, 90.0]), cell("x", "y", [91.0, 91.0]), "best")
    assert pair.within_noise is None and pair.p_value is None and pair.too_few_seeds
    assert pair.reason == "2 + 2 seeds: the smallest possible p is 0.33, so no test can tell"
    assert pair.difference == pytest.approx(1.0)
    three = pair_cells(cell("x", "y", [90.0, 91.0, 92.0]), cell("x", "y", [80.0, 80.1, 80.2]), "best")
    assert three.within_noise is None and "0.1," in three.reason  # 3 + 3: 2 / 20


def test_identical_values_are_within_noise_without_a_test():
    a = cell("x", "y", [90.0, 91.0])
    pair = pair_cells(a, cell("x", "y", [90.0, 91.0]), "best")
    assert (pair.within_noise, pair.p_value, pair.reason, pair.difference) == (
        True,
        None,
        "identical per-seed values",
        0.0,
    )


def test_too_few_seeds_or_no_run_on_a_side_gives_no_test():
    one = pair_cells(cell("x", "y", [90.0]), cell("x", "y", [91.0, 92.0]), "best")
    assert one.within_noise is None and one.reason == "fewer than two seeds on a side: no test"
    assert one.difference == pytest.approx(1.5)
    empty = cell("x", "y", [])
    assert pair_cells(empty, cell("x", "y", [1.0]), "best").reason == "no finished run in A"
    assert pair_cells(cell("x", "y", [1.0]), empty, "best").reason == "no finished run in B"
    assert pair_cells(empty, empty, "best").reason == "no finished run in A and B"


def test_seeds_that_never_reach_the_target_count_as_r_plus_one():
    a = cell("x", "y", [10.0, None], rounds_limit=50)
    b = cell("x", "y", [12.0, 14.0], rounds_limit=50)
    pair = pair_cells(a, b, "rounds_to_target")
    assert pair.difference == pytest.approx(13.0 - (10.0 + 51.0) / 2)


def test_cells_without_a_target_are_not_compared_as_seeds_that_never_reached_it():
    a = cell("x", "y", [None, None, None, None], rounds_limit=50, no_target=True)
    b = cell("x", "y", [None, None, None, None], rounds_limit=50, no_target=True)
    pair = pair_cells(a, b, "rounds_to_target")  # not "identical per-seed values", not 51 against 51
    assert (pair.reason, pair.within_noise, pair.difference, pair.p_value) == ("no target", None, None, None)
    assert pair_cells(a, cell("x", "y", [3.0, 4.0]), "rounds_to_target").reason == "no target"
    assert pair_cells(cell("x", "y", [3.0, 4.0]), b, "rounds_to_target").reason == "no target"


def test_tables_pair_cell_by_cell_and_render_as_json_and_markdown():
    a, b = small_table(), small_table()
    b.cells[("fedavg", "mnist")] = cell("fedavg", "mnist", [70.0, 70.5, 71.0])
    pairs = compare_tables([a], [b])
    assert [(c.row, c.column) for c in pairs[0].cells] == [
        ("fedavg", "mnist"),
        ("fedavg", "cifar10"),
        ("fed_prox", "mnist"),
    ]
    # fedavg / mnist: 3 + 3 seeds, too few for any test; fedavg / cifar10 and fed_prox / mnist: identical values
    assert summary_line(pairs) == (
        "2 cells compared, 0 outside seed noise (exact two-sample permutation test, p < 0.05); "
        "1 cell with too few seeds for any test to tell"
    )
    b.cells[("fedavg", "mnist")] = cell("fedavg", "mnist", [70.0, 70.5, 71.0, 70.2])
    a.cells[("fedavg", "mnist")] = cell("fedavg", "mnist", [91.0, 91.5, 92.0, 91.2])
    pairs = compare_tables([a], [b])
    assert summary_line(pairs) == "3 cells compared, 1 outside seed noise (exact two-sample permutation test, p < 0.05)"
    document = json.loads(render_comparison(pairs, "json", "cpu.db", "gpu.db"))
    assert (document["a"], document["b"], document["summary"]) == ("cpu.db", "gpu.db", summary_line(pairs))
    first = document["tables"][0]["cells"][0]
    assert first["within_noise"] is False and first["assignments"] == 70 and first["p_value"] == pytest.approx(2 / 70)
    assert (
        first["too_few_seeds"] is False
        and first["test"] == "exact two-sample permutation test of the difference of means"
    )
    markdown = render_comparison(pairs, "markdown", "cpu.db", "gpu.db")
    assert markdown.startswith("A = cpu.db  \nB = gpu.db\n")
    assert "| fedavg / mnist |" in markdown and "NO (p=" in markdown and "yes (identical per-seed values)" in markdown
    assert markdown.rstrip().endswith(summary_line(pairs))


def test_quoted_rows_and_analytic_tables_are_not_compared():
    a, b = small_table(), small_table()
    a.cells[("fed_prox", "mnist")].published_only = True  # a row the paper quotes: no run to compare
    (pair,) = compare_tables([a, small_table(kind="models")], [b, small_table(kind="models")])
    assert [(c.row, c.column) for c in pair.cells] == [("fedavg", "mnist"), ("fedavg", "cifar10")]
