"""What a rendered table is made of (``fedbench/report/cells.py``): a cell's partial flag and difference to the paper,
the marks of comparisons and verdicts, the paper's value taken from the view, the reproduction counts, and the JSON
every renderer and the HTML report read."""

from __future__ import annotations

from report_fixtures import cell, small_table

from fedbench.recipes.views import TableView
from fedbench.report.cells import VERDICTS, Cell, Comparison, Verdict, reproduction_counts


def test_a_cell_is_partial_only_with_some_but_not_all_seeds():
    assert cell("a", "b", [1.0], expected=3).partial
    assert not cell("a", "b", [1.0, 2.0, 3.0], expected=3).partial
    assert not Cell("a", "b", {}, expected=3).partial  # no run at all is missing, not partial


def test_the_difference_is_ours_minus_a_numeric_published_value():
    assert cell("a", "b", [91.0, 92.0], published=90.0).difference == 1.5
    assert cell("a", "b", [91.0], published=95).difference == -4.0
    assert cell("a", "b", [91.0], published="2(K+1)|w|").difference is None  # a formula is no number
    assert cell("a", "b", [91.0]).difference is None
    assert Cell("a", "b", {}, expected=1, published=90.0).difference is None  # no mean


def test_marks_of_comparisons_and_verdicts():
    assert [Comparison("fedavg", outcome=o).mark for o in ("better", "worse", "same", "")] == ["▲", "▼", "·", ""]
    assert [Verdict(s).mark for s in VERDICTS] == ["✓", "↑", "↓", "?", ""]
    assert Comparison("fedavg", outcome="better").to_json()["mark"] == "▲"
    assert Verdict("lower", ci_low=1.0, margin=0.5).to_json() == {
        "status": "lower",
        "reason": "",
        "difference": None,
        "ci90_low": None,
        "ci90_high": None,
        "ci_low": 1.0,
        "ci_high": None,
        "margin": 0.5,
        "interval": "",
        "seeds_needed": None,
        "tolerance": 0.5,  # the margin under its earlier name
        "mark": "↓",
    }


def test_a_cell_takes_the_papers_value_std_and_derived_marks_from_its_view():
    view = TableView(
        name="t",
        rows=["algorithm"],
        columns=["dataset"],
        published={"fedavg": {"mnist": 90.0, "cifar10": 60.0}},
        published_std={"fedavg": {"mnist": 0.5}},
        published_derived={"fedavg": ["cifar10"]},
        derived_note="copied from Table 2",
    )
    mnist, cifar = Cell("fedavg", "mnist", {}, expected=1), Cell("fedavg", "cifar10", {}, expected=1)
    mnist.take_published(view)
    cifar.take_published(view)
    assert (mnist.published, mnist.published_std, mnist.published_derived) == (90.0, 0.5, False)
    assert (cifar.published, cifar.published_std, cifar.published_derived) == (60.0, None, True)
    assert not cifar.published_std_derived


def test_reproduction_counts_count_each_verdict_and_the_cells_with_one():
    verdicts = [
        Verdict("reproduced"),
        Verdict("higher"),
        Verdict("reproduced"),
        None,
        Verdict("not_comparable"),
        Verdict("inconclusive"),
    ]
    assert reproduction_counts(verdicts) == {
        "reproduced": 2,
        "higher": 1,
        "lower": 0,
        "inconclusive": 1,
        "not_comparable": 1,
        "cells": 5,
    }
    assert reproduction_counts([]) == {**dict.fromkeys(VERDICTS, 0), "cells": 0}


def test_a_tables_json_lists_its_cells_in_row_then_column_order():
    table = small_table()
    table.cells[("fedavg", "mnist")].verdict = Verdict("reproduced")
    document = table.to_json()
    assert [(c["row"], c["column"]) for c in document["cells"]] == [
        ("fedavg", "mnist"),
        ("fedavg", "cifar10"),
        ("fed_prox", "mnist"),
    ]
    first = document["cells"][0]
    assert (first["difference"], first["partial"], first["verdict"]["mark"], first["baseline"]) == (
        1.5,
        False,
        "✓",
        None,
    )
    assert document["cells"][2]["partial"] is True
    assert document["reproduction"]["reproduced"] == 1 and document["reproduction"]["cells"] == 1
    assert (document["title"], document["baseline_axis"]) == ("Best accuracy", None)
    table.view = table.view.model_copy(update={"title": ""})
    assert table.title == "tiny: acc"  # without a title: recipe and view
