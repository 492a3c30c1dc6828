"""``fedbench compare``'s pairing (``fedbench/report/compare.py``): the same cell of two registries, their difference
B − A, and whether it is within seed noise — Welch's test where both sides have two seeds or more, identical values
without a test, censored rounds-to-target seeds counted as R + 1."""

from __future__ import annotations

import json

import pytest
from report_fixtures import cell, small_table
from scipy import stats as scipy_stats

from fedbench.report.compare import compare_tables, pair_cells, render_comparison, summary_line


def test_welch_decides_whether_a_difference_is_seed_noise():
    a, b = cell("x", "y", [90.0, 91.0, 92.0]), cell("x", "y", [90.5, 91.5, 92.5])
    pair = pair_cells(a, b, "best")
    expected = scipy_stats.ttest_ind([90.5, 91.5, 92.5], [90.0, 91.0, 92.0], equal_var=False)
    assert pair.difference == pytest.approx(0.5)
    assert pair.p_value == pytest.approx(expected.pvalue) and pair.within_noise is True
    far = pair_cells(a, cell("x", "y", [80.0, 80.1, 80.2]), "best")
    assert far.difference == pytest.approx(-10.9) and far.within_noise is False and far.p_value < 0.05


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


def test_tables_pair_cell_by_cell_and_render_as_json_and_markdown():
    a, b = small_table(), small_table()
    b.cells[("fedavg", "mnist")] = cell("fedavg", "mnist", [70.0, 70.5, 71.0])
    pairs = compare_tables([a], [b])
    assert [(c.row, c.column) for c in pairs[0].cells] == [
        ("fedavg", "mnist"),
        ("fedavg", "cifar10"),
        ("fed_prox", "mnist"),
    ]
    assert summary_line(pairs) == "3 cells compared, 1 outside seed noise (Welch's t-test, p < 0.05)"
    document = json.loads(render_comparison(pairs, "json", "cpu.db", "gpu.db"))
    assert (document["a"], document["b"], document["summary"]) == ("cpu.db", "gpu.db", summary_line(pairs))
    assert document["tables"][0]["cells"][0]["within_noise"] is False
    markdown = render_comparison(pairs, "markdown", "cpu.db", "gpu.db")
    assert markdown.startswith("A = cpu.db  \nB = gpu.db\n")
    assert "| fedavg / mnist |" in markdown and "NO (p=" in markdown and "yes (identical per-seed values)" in markdown
    assert markdown.rstrip().endswith(summary_line(pairs))


def test_quoted_rows_and_analytic_tables_are_not_compared():
    a, b = small_table(), small_table()
    a.cells[("fed_prox", "mnist")].published_only = True  # a row the paper quotes: no run to compare
    (pair,) = compare_tables([a, small_table(kind="models")], [b, small_table(kind="models")])
    assert [(c.row, c.column) for c in pair.cells] == [("fedavg", "mnist"), ("fedavg", "cifar10")]
