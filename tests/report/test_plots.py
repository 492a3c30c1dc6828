"""The report's figures (``fedbench/report/plots.py``): which curves a view's figures draw (one figure per value of
the other keys, a line per method, one curve per seed, in the table's unit), the mean line and min–max band over
seeds, EMA smoothing, the target line, box plots of the per-seed figures, and what each kind of view draws. The
stored curves are written by hand (tests/report/test_table.py's), so every drawn value is known."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.colors import to_hex

from fedbench.curves import ema
from fedbench.recipes.views import TableView
from fedbench.report.plots import _published_by_line, _save, curve_series, figures, plot_table
from tests.report.test_table import CURVES, stored  # noqa: F401 (stored: a fixture)


def view_of(recipe, **fields) -> TableView:
    return TableView(**{**recipe.tables[0].model_dump(), **fields})


def test_curve_series_has_a_curve_per_seed_of_each_method_in_percent(stored):  # noqa: F811
    recipe, registry = stored
    series = curve_series(recipe, recipe.tables[0], registry)
    assert list(series) == ["all"]  # the method axis is the only key: one figure, a line per method
    lines = series["all"]
    assert set(lines) == {"fedavg", "fedprox"}
    for method, curves in lines.items():
        expected = [CURVES[(method, seed)]["acc"] for seed in (0, 1)]
        for curve, acc in zip(curves, expected, strict=True):
            assert [value for _, value in curve] == pytest.approx([100 * a for a in acc])
        assert all([r for r, _ in curve] == list(range(1, len(curve) + 1)) for curve in curves)
    unscaled = curve_series(recipe, view_of(recipe, percent=False), registry)
    assert [v for _, v in unscaled["all"]["fedavg"][0]] == pytest.approx(CURVES[("fedavg", 0)]["acc"])


def test_seeds_and_only_pick_the_curves_as_they_pick_cells(stored):  # noqa: F811
    recipe, registry = stored
    view = recipe.tables[0]
    assert {m: len(c) for m, c in curve_series(recipe, view, registry, seeds=[1])["all"].items()} == {
        "fedavg": 1,
        "fedprox": 1,
    }
    only = curve_series(recipe, view, registry, only={"algorithm": "fedprox"})
    assert list(only["all"]) == ["fedprox"]
    assert curve_series(recipe, view, registry, seeds=[7]) == {}  # no run of that seed: nothing to draw


def lines_of(fig):
    """{legend label: (x, y) of its line} of a one-axes figure (the target line included)."""
    (ax,) = fig.axes
    return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in ax.get_lines()}


def test_a_line_is_the_seed_mean_over_the_rounds_every_seed_has_and_the_band_their_range(stored):  # noqa: F811
    recipe, registry = stored
    [(stem, fig)] = figures(recipe, recipe.tables[0], registry)
    assert stem == "tiny_acc_all"
    lines = lines_of(fig)
    rounds, mean = lines["fedavg (n=2)"]
    both = np.array([CURVES[("fedavg", s)]["acc"] for s in (0, 1)]) * 100
    assert rounds == [1, 2, 3] and mean == pytest.approx(both.mean(0))
    # fedprox's seed 1 diverged after round 2: its line covers the rounds both seeds have
    rounds, mean = lines["fedprox (n=2)"]
    assert rounds == [1, 2]
    assert mean == pytest.approx((np.array(CURVES[("fedprox", 0)]["acc"][:2]) + [0.3, 0.2]) * 50)
    (ax,) = fig.axes
    band = ax.collections[0].get_paths()[0].vertices  # fedavg's min–max band: its corners span both seeds
    assert band[:, 1].min() == pytest.approx(both.min()) and band[:, 1].max() == pytest.approx(both.max())


def test_smoothing_draws_the_ema_of_each_seed(stored):  # noqa: F811
    recipe, registry = stored
    [(_, fig)] = figures(recipe, recipe.tables[0], registry, smoothing=0.5)
    _, mean = lines_of(fig)["fedavg (n=2)"]
    smoothed = [ema([100 * a for a in CURVES[("fedavg", s)]["acc"]], 0.5) for s in (0, 1)]
    assert mean == pytest.approx(np.mean(smoothed, axis=0))


def test_a_target_figure_draws_its_target_and_others_do_not(stored):  # noqa: F811
    recipe, registry = stored
    target = view_of(recipe, figure="rounds_to_target", target=75.0)
    [(_, fig)] = figures(recipe, target, registry)
    assert lines_of(fig)["target 75"][1] == [75.0, 75.0]
    [(_, plain)] = figures(recipe, view_of(recipe, target=75.0), registry)  # "best" needs no target
    assert not any(label.startswith("target") for label in lines_of(plain))


def test_box_plots_draw_one_box_per_column_of_the_per_seed_figures(stored):  # noqa: F811
    recipe, registry = stored
    boxes = figures(recipe, view_of(recipe, plot="box", rows=[], columns=["algorithm"]), registry)
    [(stem, fig)] = boxes
    assert stem == "tiny_acc__box"
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["fedavg", "fedprox"]
    # boxplot's lines per box: 2 whiskers, 2 caps, the box, the median, the outliers
    medians = [line.get_ydata()[0] for line in ax.get_lines()[5::7]]
    assert medians == pytest.approx([np.median([80.0, 90.0]), np.median([85.0, 30.0])])


def test_views_that_draw_nothing(stored, tmp_path):  # noqa: F811
    recipe, registry = stored
    assert figures(recipe, view_of(recipe, plot="none"), registry) == []
    assert plot_table(recipe, view_of(recipe, plot="none"), registry, tmp_path / "none") == []
    assert not (tmp_path / "none").exists()  # no folder for no figure
    models = view_of(recipe, kind="models", static_rows=[{"label": "m", "model": "digits_mlp"}])
    assert figures(recipe, models, registry) == []  # an analytic table has no curves


def test_written_pngs_have_safe_names(stored, tmp_path):  # noqa: F811
    recipe, registry = stored
    [path] = plot_table(recipe, recipe.tables[0], registry, tmp_path / "plots")
    assert path.name == "tiny_acc_all.png" and path.read_bytes().startswith(b"\x89PNG")
    [(_, fig)] = figures(recipe, recipe.tables[0], registry)
    odd = _save(fig, tmp_path, "a/b c:d")
    assert odd.name == "a_b_c_d.png" and odd.parent == tmp_path


def marker_points(fig) -> dict[str, tuple[list, list]]:
    """{colour (hex): (x, y)} of the paper's-value markers of a one-axes figure (the legend's empty entry left out)."""
    (ax,) = fig.axes
    return {
        to_hex(line.get_color()): (list(line.get_xdata()), list(line.get_ydata()))
        for line in ax.get_lines()
        if line.get_marker() == "D" and len(line.get_xdata())
    }


def test_the_papers_values_sit_on_the_curves_where_they_are_points_of_them(stored):  # noqa: F811
    recipe, registry = stored
    rounds = view_of(recipe, figure="rounds_to_target", target=75.0, published={"fedavg": 2, "fedprox": 3})
    [(_, fig)] = figures(recipe, rounds, registry)
    colours = {line.get_label(): to_hex(line.get_color()) for line in fig.axes[0].get_lines()}
    # a count of rounds to the target: at (those rounds, the target), in its method's colour
    assert marker_points(fig) == {colours["fedavg (n=2)"]: ([2.0], [75.0]), colours["fedprox (n=2)"]: ([3.0], [75.0])}
    assert "paper's value" in colours
    best = view_of(recipe, figure="best", published={"fedavg": 88.5})
    [(_, fig)] = figures(recipe, best, registry)
    colours = {line.get_label(): to_hex(line.get_color()) for line in fig.axes[0].get_lines()}
    assert marker_points(fig) == {colours["fedavg (n=2)"]: ([3], [88.5])}  # an accuracy figure: at the last round
    costs = view_of(recipe, figure="gflops_to_target", target=75.0, published={"fedavg": 1.4})
    [(_, fig)] = figures(recipe, costs, registry)
    assert marker_points(fig) == {} and "paper's value" not in [line.get_label() for line in fig.axes[0].get_lines()]
    # the paper's values describe its scale and data only
    assert _published_by_line(recipe, rounds, "full", False, None, None) == {
        ("all", "fedavg"): 2.0,
        ("all", "fedprox"): 3.0,
    }
    assert _published_by_line(recipe, rounds, "smoke", False, None, None) == {}
    assert _published_by_line(recipe, rounds, "full", True, None, None) == {}
