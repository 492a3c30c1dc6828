"""Each table figure of one run from a curve and rounds written by hand (``report/figure_values.py``), and the
figure functions keyed exactly by the figure catalogue."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from fedbench import curves
from fedbench.recipes.views import TableView
from fedbench.report.figure_values import FIGURE_VALUES, figure_value
from fedbench.report.table import figure_of
from fedbench.vocab.figures import FIGURES
from fedbench.vocab.provenance import PEAK_MEMORY


def test_every_figure_of_the_catalogue_has_its_function_and_no_other():
    assert set(FIGURE_VALUES) == set(FIGURES)


def test_the_tables_figure_of_is_the_lookup():
    assert figure_of is figure_value


def test_a_run_without_evaluations_has_no_figure_of_its_curve():
    view = TableView(name="v", rows=["algorithm"], target=50, at_round=3)
    for name, figure in FIGURES.items():
        if not figure.of_run:
            assert figure_value(view.model_copy(update={"figure": name}), [], [], cost=1e9) is None, name


def test_figures_in_percent_follow_the_views_percent_rule():
    curve = [(1, 0.25), (2, 0.5)]
    view = TableView(name="v", rows=["algorithm"], figure="best")
    assert figure_value(view, curve) == pytest.approx(50.0)
    assert figure_value(view.model_copy(update={"percent": False}), curve) == pytest.approx(0.5)
    last = view.model_copy(update={"figure": "last_k_mean", "k": 2})
    assert figure_value(last, curve) == pytest.approx(37.5)
    at = view.model_copy(update={"figure": "value_at_round", "at_round": 1})
    assert figure_value(at, curve) == pytest.approx(25.0)


def test_a_cells_target_overrides_the_views():
    curve = [(1, 0.2), (2, 0.6), (3, 0.9)]
    view = TableView(name="v", rows=["algorithm"], figure="rounds_to_target", target=55)
    assert figure_value(view, curve) == 2
    assert figure_value(view, curve, target=85) == 3


def test_peak_memory_in_mebibytes_from_the_runs_provenance():
    view = TableView(name="v", rows=["algorithm"], figure="peak_memory_mb")
    run = SimpleNamespace(provenance={PEAK_MEMORY: {"bytes": 3 * 2**19, "measure": "cuda_max_allocated"}})
    assert figure_value(view, [], None, run=run) == 1.5
    assert figure_value(view, [], None, run=SimpleNamespace(provenance={})) is None  # trained before it was recorded


def test_figures_of_one_curve():
    curve = [(1, 0.2), (2, 0.6), (3, 0.5), (4, 0.9)]
    view = TableView(name="v", rows=["algorithm"], figure="gflops_to_target", target=55)
    assert figure_value(view, curve, cost=2.5e9) == pytest.approx(2 * 2.5)  # rounds to 55 % × GFLOPs per round
    assert figure_value(view, curve, cost=None) is None
    assert figure_value(view.model_copy(update={"target": 95}), curve, cost=2.5e9) is None

    class Row:
        def __init__(self, round_index, val):
            self.round, self.personal_val_mean = round_index, val

    rows = [Row(1, 0.1), Row(2, 0.3), Row(3, 0.7), Row(4, 0.7)]
    selected = TableView(name="v", rows=["algorithm"], figure="val_selected")
    assert figure_value(selected, curve, rows) == pytest.approx(50.0)  # the test value at the first best-val round


class Row:
    """A stored round with only some of its fields recorded (None: not recorded, as in runs of older versions)."""

    def __init__(self, round_index, wall_seconds=None, bytes_up=None, bytes_down=None):
        self.round, self.wall_seconds, self.bytes_up, self.bytes_down = round_index, wall_seconds, bytes_up, bytes_down


def test_unrecorded_times_and_bytes_count_as_zero():
    curve = [(1, 0.5), (2, 0.9)]
    rows = [Row(1, wall_seconds=3.0, bytes_up=10), Row(2, bytes_down=5)]
    view = TableView(name="v", rows=["algorithm"])
    assert figure_value(view.model_copy(update={"figure": "wall_seconds"}), curve, rows) == 3.0
    assert figure_value(view.model_copy(update={"figure": "wall_hours"}), curve, rows) == pytest.approx(3.0 / 3600)
    assert figure_value(view.model_copy(update={"figure": "seconds_per_round"}), curve, rows) == pytest.approx(1.5)
    to_target = view.model_copy(update={"figure": "total_bytes_to_target", "target": 80})
    assert figure_value(to_target, curve, rows) == 15.0
    assert figure_value(to_target, curve, None) is None  # no stored rounds: no figure
    for figure in ("wall_seconds", "seconds_per_round"):
        assert figure_value(view.model_copy(update={"figure": figure}), curve, []) is None


def test_a_loss_target_is_reached_at_or_below_it():
    """For a lower-is-better metric "reaching" a target means falling to it: the first round at or below it."""
    loss = [(1, 1.2), (2, 0.6), (3, 0.5), (4, 0.7)]
    view = TableView(name="v", rows=["algorithm"], metric="test_loss", figure="rounds_to_target", target=0.6)
    assert figure_value(view, loss) == 2
    assert figure_value(view.model_copy(update={"target": 0.55}), loss) == 3
    assert figure_value(view.model_copy(update={"target": 0.4}), loss) is None
    assert figure_value(view.model_copy(update={"figure": "best"}), loss) == pytest.approx(0.5)
    assert figure_value(view.model_copy(update={"figure": "best_round"}), loss) == 3
    assert figure_value(view.model_copy(update={"figure": "final"}), loss) == pytest.approx(0.7)


def test_validation_selected_figure_picks_the_best_validation_round():
    rows = [SimpleNamespace(round=r, personal_val_mean=v) for r, v in [(1, 0.5), (2, 0.9), (3, 0.7), (4, 0.9)]]
    curve = [(1, 0.55), (2, 0.80), (3, 0.95), (4, 0.85)]
    view = TableView(name="t", rows=["algorithm"], columns=[], figure="val_selected", metric="personal_mean")
    assert figure_value(view, curve, rows) == pytest.approx(80.0)  # round 2: first best validation, not best test
    assert curves.value_at_best(curve, [(r.round, r.personal_val_mean) for r in rows]) == 0.80
