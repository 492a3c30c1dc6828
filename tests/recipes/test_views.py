"""The table views of a recipe (``fedbench/recipes/views.py``): their defaults, bounds and documented choices, rows
given as a bare string, the runs a view selects, the published cells, ratios and derived marks read per cell, and
a run figure's caption."""

from __future__ import annotations

import pytest

from fedbench.recipes.load import load_recipe
from fedbench.recipes.schema import Recipe
from fedbench.recipes.views import TableView
from recipe_fixtures import GRID, with_view


def test_a_bare_string_is_a_one_key_rows_list():
    view = TableView(name="t", rows="algorithm", columns="dataset")
    assert view.rows == ["algorithm"] and view.columns == ["dataset"]


def test_published_cells_ratios_and_derived_marks_are_read_per_cell(write_recipe):
    text = with_view(
        'ratio_to = "fedavg"\nbaseline = "none"\n'
        'published = { fedavg = { "1" = 50.0, "2" = 60.0 }, fedprox = { "1" = 55.0, "2" = "n/a" } }\n'
        'published_std = { fedavg = { "1" = 0.5 } }\n'
        'published_ratio = { fedprox = { "1" = 1.1 } }\n'
        'published_derived = { fedprox = ["1"] }\npublished_std_derived = { fedavg = ["1"] }\n'
        'derived_note = "from Table 2"'
    )
    view = load_recipe(write_recipe(text)).tables[0]
    assert view.published_value("fedavg", "2") == 60.0 and view.published_value("fedprox", "2") == "n/a"
    assert (
        view.published_value("fedavg", "1", std=True) == 0.5 and view.published_value("fedprox", "1", std=True) is None
    )
    assert view.printed_ratio("fedprox", "1") == 1.1 and view.printed_ratio("fedprox", "2") is None
    assert view.printed_ratio("fedavg", "1") is None
    assert view.derived_cells() == [("fedprox", "1")] and view.derived_cells(std=True) == [("fedavg", "1")]
    assert view.is_derived("fedprox", "1") and not view.is_derived("fedprox", "2")
    assert not view.is_derived("fedavg", "1") and view.is_derived("fedavg", "1", std=True)
    # a row-only printed ratio applies to every column
    assert TableView(name="v", published_ratio={"a": 2.0}).printed_ratio("a", "any") == 2.0


def test_selects_keeps_runs_whose_labels_match_every_key():
    view = TableView(name="v", where={"algorithm": "fedavg", "local_epochs": ["1", "2"]})
    assert view.selects({"algorithm": "fedavg", "local_epochs": "2"})
    assert not view.selects({"algorithm": "fedavg", "local_epochs": "3"})
    assert not view.selects({"algorithm": "fedprox", "local_epochs": "1"})
    assert TableView(name="v").selects({"anything": "x"})


def test_a_views_defaults_and_bounds():
    view = TableView(name="v")
    assert (view.title, view.caption, view.kind, view.figure, view.metric) == ("", "", "runs", "best", "test_acc")
    assert (view.k, view.target, view.target_rule, view.at_round, view.ratio_to) == (
        10,
        None,
        "first_reach",
        None,
        None,
    )
    assert (view.plot, view.plot_by, view.smoothing, view.summary, view.percent) == (
        "curves",
        "rows",
        0.0,
        "mean_std",
        True,
    )
    assert (view.baseline, view.baseline_axis, view.tolerance, view.derived_note) == (None, "algorithm", None, "")
    assert view.rows == view.columns == view.at_rounds == view.clients == view.published_only == []
    assert view.view_metrics() == [(None, "test_acc")] and view.derived_cells() == []
    assert TableView(name="v", k=1, smoothing=0.99, tolerance=0.0).k == 1
    for bad in ({"k": 0}, {"smoothing": 1.0}, {"smoothing": -0.1}, {"tolerance": -0.1}):
        with pytest.raises(ValueError):
            TableView(name="v", **bad)
    recipe = Recipe(paper="p", name="n")
    assert (recipe.title, recipe.description, recipe.order, recipe.setup, recipe.matrix) == ("", "", 100, {}, {})


@pytest.mark.parametrize(
    "field, values",
    [
        ("kind", ["runs", "models", "overheads", "partition"]),
        ("target_rule", ["first_reach", "count_not_above"]),
        ("plot", ["curves", "box", "none"]),
        ("plot_by", ["rows", "columns"]),
        ("summary", ["mean_std", "mean_curve"]),
        (
            "figure",
            [
                "best",
                "final",
                "last_k_mean",
                "best_round",
                "rounds_to_target",
                "total_bytes_to_target",
                "gflops_to_target",
                "value_at_round",
                "wall_seconds",
                "seconds_per_round",
                "wall_hours",
                "peak_memory_mb",
                "val_selected",
            ],
        ),
    ],
)
def test_every_documented_choice_of_a_view_is_accepted_and_others_are_not(field, values):
    for value in values:
        assert getattr(TableView(name="v", **{field: value}), field) == value
    with pytest.raises(ValueError):
        TableView(name="v", **{field: "other"})


@pytest.mark.parametrize("figure", ["wall_seconds", "wall_hours", "peak_memory_mb", "best"])
def test_a_run_figures_caption_names_no_curve_metric_and_derived_values_carry_the_mark(write_recipe, figure):
    from fedbench.report.collect import EmptyRegistry
    from fedbench.report.render import render
    from fedbench.report.render.notes import notes
    from fedbench.report.table import build_table

    text = GRID.replace('columns = ["local_epochs"]', f'columns = []\nfigure = "{figure}"')
    text += 'published = { fedavg = 12.5 }\npublished_derived = ["fedavg"]\n'
    recipe = load_recipe(write_recipe(text))
    table = build_table(recipe, recipe.tables[0], EmptyRegistry())
    (cell_note,) = [n for n in notes(table) if n.startswith("cell: ")]
    assert ("test accuracy" in cell_note) == (figure == "best")
    assert "‡ paper value not printed in the paper" in render([table], "markdown")


def test_a_claims_kind_axis_groups_and_their_name():
    from fedbench.recipes.views import Claim

    best = Claim(best="fedtrip", quote="q", location="§5")
    order = Claim(order=["a", "b"], axis="case", quote="q", location="§5")
    assert (best.kind, order.kind) == ("best", "order")
    view = TableView(name="t", rows=["algorithm"], columns=["dataset", "setting"], baseline_axis="algorithm")
    assert view.claim_axis(best) == "algorithm" and view.claim_axis(order) == "case"
    assert view.claim_group_keys(best) == ["dataset", "setting"]
    assert view.claim_group_noun(best) == "column"
    swapped = TableView(name="t", rows=["dataset", "setting"], columns=["algorithm"])
    assert swapped.claim_group_keys(best) == ["dataset", "setting"] and swapped.claim_group_noun(best) == "row"
    assert TableView(name="t", rows=["algorithm"]).claim_group_noun(best) == "table"
    both = TableView(name="t", rows=["algorithm", "dataset"], columns=["setting"])
    assert both.claim_group_keys(best) == ["dataset", "setting"] and both.claim_group_noun(best) == "group"
    assert TableView(name="t", rows=["x"], columns=["algorithm", "y"]).claim_group_noun(best) == "group"
    assert TableView(name="t").claims == []
