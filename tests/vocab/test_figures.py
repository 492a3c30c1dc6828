"""The figure catalogue: the figures a recipe accepts are the catalogue's, and every layer that reads a figure
behaves as its entry says — its direction in the statistics, its target rule in the recipe, its unit and the
rounds fields it reads in the table builder, its label and caption in the renderers — and it imports no torch."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import typing
from types import SimpleNamespace

import pytest

from fedbench.errors import RecipeError
from fedbench.recipes.load import load_recipe
from fedbench.recipes.views import TableView
from fedbench.report.cells import Cell
from fedbench.report.collect import EmptyRegistry
from fedbench.report.render import render
from fedbench.report.render.notes import figure_name, notes, ours_text
from fedbench.report.stats import better_sign
from fedbench.report.table import build_table, figure_of, round_fields
from fedbench.vocab.figures import FIGURE_NAMES, FIGURES, TARGET_FIGURES, figure_label
from fedbench.vocab.metrics import METRICS, ROUND_FIELDS, display_unit, metric_fields

RECIPE = """
paper = "p"
name = "figures"
seeds = [0]

[setup]
dataset = "digits"
model = "digits_mlp"
partition = "iid"
num_clients = 4
clients_per_round = 2
rounds = 3
optimizer = { lr = 0.1 }

[matrix]
algorithm = ["fedavg", "fedprox"]

[[tables]]
name = "t"
rows = ["algorithm"]
columns = []
"""


def recipe_with(write_recipe, **view):
    lines = "".join(f"{key} = {json.dumps(value)}\n" for key, value in view.items())
    return load_recipe(write_recipe(textwrap.dedent(RECIPE) + lines))


def test_recipes_accept_exactly_the_catalogue_figures():
    assert typing.get_args(TableView.model_fields["figure"].annotation) == FIGURE_NAMES
    assert len(FIGURE_NAMES) == 13
    for name, figure in FIGURES.items():
        assert figure.name == name and figure.meaning and figure.label
        assert ("{metric}" in figure.label) == (not figure.of_run), f"{name}: its label names its metric"
        assert not figure.censored or (figure.needs_target and figure.number == "rounds"), name
        assert figure.unit is None or figure.number != "value", f"{name}: a value of the metric has its unit"
        assert set(figure.fields) <= set(ROUND_FIELDS), name


@pytest.mark.parametrize("name", FIGURE_NAMES)
def test_a_figure_needs_a_target_exactly_when_the_catalogue_says(write_recipe, name):
    extra = {"at_round": 2} if name == "value_at_round" else {}
    if FIGURES[name].needs_target:
        assert name in TARGET_FIGURES
        with pytest.raises(RecipeError, match=f"figure '{name}' needs a target"):
            recipe_with(write_recipe, figure=name, **extra)
        extra["target"] = 50.0
    assert recipe_with(write_recipe, figure=name, **extra).tables[0].figure == name


@pytest.mark.parametrize("name", FIGURE_NAMES)
def test_the_statistics_follow_the_catalogue_direction(name):
    view = TableView(name="v", figure=name, metric="test_acc")
    loss = view.model_copy(update={"metric": "test_loss"})
    expected = {"metric": (1, -1), "lower": (-1, -1), "none": (0, 0)}[FIGURES[name].better]
    assert (better_sign(view), better_sign(loss)) == expected
    assert METRICS["test_acc"].higher_is_better and not METRICS["test_loss"].higher_is_better


@pytest.mark.parametrize("percent", [True, False])
@pytest.mark.parametrize("name", FIGURE_NAMES)
def test_the_table_unit_label_and_caption_follow_the_catalogue(write_recipe, name, percent):
    extra = {"at_round": 2} if name == "value_at_round" else {}
    if FIGURES[name].needs_target:
        extra["target"] = 50.0
    recipe = recipe_with(write_recipe, figure=name, percent=percent, **extra)
    table = build_table(recipe, recipe.tables[0], EmptyRegistry())
    figure = FIGURES[name]
    assert table.unit == (display_unit("test_acc", percent) if figure.of_metric_value else figure.unit)
    label = figure_name(table.view)
    metric = "test accuracy"  # the metric catalogue's human name of test_acc
    assert label == figure_label(name, metric=metric, k=10, target="50%" if percent else "50", at_round=2)
    if figure.of_metric_value and table.unit:  # the unit follows the metric: "test accuracy (%) at round 2"
        at = dict(k=10, target="50%" if percent else "50", at_round=2)
        heading = figure_label(name, metric=f"{metric} ({table.unit})", **at)
    else:
        heading = f"{label} ({table.unit})" if table.unit else label
    assert table.columns == [""] and f"| algorithm | {heading} |" in render([table], "markdown")
    (cell_line,) = [n for n in notes(table) if n.startswith("cell: ")]
    assert cell_line.startswith(f"cell: {heading}")
    assert (metric in cell_line) == (not figure.of_run), "a run figure's caption names no curve metric"
    assert "test_acc" not in render([table], "markdown"), "a person reads the metric's name, not its storage key"
    assert (figure.note in notes(table)) == bool(figure.note)


def test_labels_fill_in_the_views_parameters():
    metric = "test accuracy"
    assert figure_label("last_k_mean", metric=metric, k=3) == "mean of the last 3 evaluations of test accuracy"
    assert figure_label("rounds_to_target", metric=metric, target="97%") == "rounds to 97% test accuracy"
    assert figure_label("value_at_round", metric=metric, at_round=20) == "test accuracy at round 20"
    # at_rounds: the round is a row or column key
    assert figure_label("value_at_round", metric=metric) == "test accuracy at the row's round"
    assert figure_label("wall_seconds", metric=metric) == "wall seconds"  # a figure of the whole run
    assert len({FIGURES[name].label for name in FIGURE_NAMES}) == len(FIGURE_NAMES)


@pytest.mark.parametrize("name", FIGURE_NAMES)
def test_a_figure_reads_only_its_metrics_fields_and_its_own(name):
    """figure_of on rounds that hold only the fields the catalogue declares (and the metric's): nothing else is
    read, so a report fetches only those (``round_fields``)."""
    view = TableView(name="v", figure=name, metric="test_acc", target=55.0, at_round=2)
    fields = ("round", *metric_fields("test_acc"), *FIGURES[name].fields)
    values = {
        "test_acc": 0.5,
        "wall_seconds": 2.0,
        "bytes_up": 10,
        "bytes_down": 5,
        "personal_val_mean": 0.4,
        "personal_val_per_client": None,
    }
    rows = [SimpleNamespace(round=r, **{f: values[f] for f in fields if f != "round"}) for r in (1, 2, 3)]
    curve = [(1, 0.5), (2, 0.6), (3, 0.7)]
    run = SimpleNamespace(provenance={"peak_memory": {"bytes": 2**21, "measure": "cuda"}})
    figure_of(view, curve, rows, cost=1e9, run=run)  # an undeclared field would raise AttributeError
    assert round_fields(view) == list(dict.fromkeys([*metric_fields("test_acc"), *FIGURES[name].fields]))


def test_a_target_figure_never_reached_says_so_in_its_own_words():
    cell = Cell(row="r", column="c", labels={}, expected=1, n=1, values=[None], rounds_limit=40, not_reached=1)
    for name in FIGURE_NAMES:
        text = ours_text(cell, name)
        if not FIGURES[name].needs_target:
            assert text.startswith("– (n=1)"), name
        elif FIGURES[name].number == "rounds":
            assert text.startswith(">40 (n=1)"), name
        else:
            assert text.startswith("not reached in 40 rounds"), name


def test_the_catalogue_imports_no_torch():
    code = "import sys, fedbench.vocab.figures; assert 'torch' not in sys.modules and 'pydantic' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
