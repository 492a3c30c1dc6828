"""The drawers of the feature diagnostics (``fedbench.report.diagnostics.feature_plots``): FedDr+ Figs. 2–5 one panel
each, the methods overlaid with observed classes solid and unobserved dashed, each point the mean over seeds of the
stored mean over the sampled clients; LG-Mix Fig. 2(b) one box per client and method from the stored quantiles."""

from __future__ import annotations

import math

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure

from conftest import ListSink
from fedbench.engine import EngineOptions, run
from fedbench.execution.contract import contract_spec
from fedbench.recipes.views import TableView
from fedbench.report.diagnostics.drawers import DRAWERS
from fedbench.report.diagnostics.feature_plots import (
    FEATURE_PANELS,
    activation_boxes,
    draw_activations,
    draw_feature_stats,
    method_label,
)
from fedbench.report.diagnostics.series import RunDiagnostics

QUANTITIES = ("alignment", "alignment_gap", "accuracy", "accuracy_gap", "distance", "angle", "norm", "norm_gap")


def stats_value(scale: float, unobserved: bool = True) -> dict:
    """A feature_stats value whose means are ``scale`` × (1, 2, …) on O and their negatives on U."""
    mean = {
        "observed": {q: scale * (k + 1) for k, q in enumerate(QUANTITIES)},
        "unobserved": {q: (-scale * (k + 1) if unobserved else None) for k, q in enumerate(QUANTITIES)},
    }
    return {"clients": [0], "test_points": 10, "observed_classes": [2], "mean": mean}


def view(diagnostic: str, reproduces=(), **fields) -> TableView:
    return TableView(
        name="v", kind="diagnostics", diagnostic=diagnostic, rows=["algorithm"], reproduces=list(reproduces), **fields
    )


def feature_runs() -> list[RunDiagnostics]:
    return [
        RunDiagnostics({"algorithm": "DR"}, 0, {1: stats_value(0.1), 2: stats_value(0.2)}),
        RunDiagnostics({"algorithm": "DR"}, 1, {1: stats_value(0.3), 2: stats_value(0.4, unobserved=False)}),
        RunDiagnostics({"algorithm": "Dr+"}, 0, {1: stats_value(1.0), 2: stats_value(2.0)}),
    ]


def lines(fig: Figure) -> dict[str, tuple[list, list]]:
    (ax,) = fig.axes
    return {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in ax.get_lines()}


def test_a_view_declaring_no_panel_draws_every_panel_of_figs_2_to_5():
    drawn = draw_feature_stats(view("feature_stats"), feature_runs())
    assert [stem for stem, _ in drawn] == [p.stem for p in FEATURE_PANELS]
    assert [stem for stem, _ in drawn] == [
        "fig2a_alignment",
        "fig2b_accuracy",
        "fig3a_alignment_gap",
        "fig3b_accuracy_gap",
        "fig4a_distance",
        "fig4b_angle",
        "fig4c_norm_gap",
        "fig5_alignment",
        "fig5_accuracy",
    ]
    assert all(isinstance(fig, Figure) for _, fig in drawn)


def test_a_view_draws_the_panels_it_declares():
    drawn = draw_feature_stats(view("feature_stats", ["Fig. 4(b)", "Fig. 5 (accuracy)"]), feature_runs())
    assert [stem for stem, _ in drawn] == ["fig4b_angle", "fig5_accuracy"]


def test_the_lines_are_the_seed_means_of_the_stored_client_means():
    """O solid, U dashed, one colour per method; a round where a seed has no value averages the others."""
    drawn = dict(draw_feature_stats(view("feature_stats"), feature_runs()))
    distance = lines(drawn["fig4a_distance"])  # the 5th quantity: 5 × scale
    assert set(distance) == {"DR (O)", "DR (U)", "Dr+ (O)", "Dr+ (U)"}
    assert distance["DR (O)"][0] == [1, 2]
    assert distance["DR (O)"][1] == pytest.approx([5 * 0.2, 5 * 0.3])  # mean of seeds (0.1, 0.3) and (0.2, 0.4)
    assert distance["DR (U)"][1] == pytest.approx([-5 * 0.2, -5 * 0.2])  # round 2: seed 1 has no unobserved points
    assert distance["Dr+ (U)"][1] == pytest.approx([-5.0, -10.0])
    (ax,) = drawn["fig4a_distance"].axes
    styles = {line.get_label(): (line.get_linestyle(), line.get_color()) for line in ax.get_lines()}
    assert styles["DR (O)"][0] == "-" and styles["DR (U)"][0] == "--" and styles["DR (O)"][1] == styles["DR (U)"][1]
    assert styles["DR (O)"][1] != styles["Dr+ (O)"][1]


def test_every_panel_draws_the_stored_means_of_its_own_quantity():
    drawn = dict(draw_feature_stats(view("feature_stats"), feature_runs()))
    for panel in FEATURE_PANELS:
        k = QUANTITIES.index(panel.quantity)  # Dr+'s means are (k + 1) × 1.0 and × 2.0 on O
        convert = {"percent": lambda v: 100 * v, "degrees": math.degrees}.get(panel.unit, lambda v: v)
        expected = [convert((k + 1) * 1.0), convert((k + 1) * 2.0)]
        assert lines(drawn[panel.stem])["Dr+ (O)"][1] == pytest.approx(expected), panel.item


def test_a_runs_line_is_named_by_its_labels_of_the_views_axes_or_all():
    both = TableView(name="v", kind="diagnostics", diagnostic="feature_stats", rows=["algorithm"], columns=["data"])
    assert method_label(both, {"data": "C10", "algorithm": "DR", "seed_group": "x"}) == "DR / C10"  # rows first
    assert method_label(both, {"other": "x"}) == "all"


def test_accuracies_are_drawn_in_percent_and_angles_in_degrees():
    drawn = dict(draw_feature_stats(view("feature_stats"), feature_runs()))
    accuracy = lines(drawn["fig2b_accuracy"])["Dr+ (O)"][1]  # the 3rd quantity
    assert accuracy == pytest.approx([100 * 3 * 1.0, 100 * 3 * 2.0])
    angle = lines(drawn["fig4b_angle"])["Dr+ (O)"][1]  # the 6th
    assert angle == pytest.approx([math.degrees(6 * 1.0), math.degrees(6 * 2.0)])
    as_fraction = dict(draw_feature_stats(view("feature_stats", percent=False), feature_runs()))
    assert lines(as_fraction["fig2b_accuracy"])["Dr+ (O)"][1] == pytest.approx([3.0, 6.0])


def activation_value(shift: float, clients: int = 3) -> dict:
    levels = [0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0]
    return {
        "clients": list(range(clients)),
        "quantile_levels": levels,
        "mean": [shift + c for c in range(clients)],
        "std": [1.0] * clients,
        "zero_fraction": [0.5] * clients,
        "quantiles": [[shift + c + p for p in levels] for c in range(clients)],
    }


def test_activation_boxes_are_the_last_rounds_quantiles_averaged_over_seeds():
    runs = [
        RunDiagnostics({"algorithm": "LG-Mix"}, 0, {10: activation_value(100.0), 20: activation_value(1.0)}),
        RunDiagnostics({"algorithm": "LG-Mix"}, 1, {20: activation_value(3.0)}),
        RunDiagnostics({"algorithm": "FedAvg"}, 0, {20: activation_value(0.0)}),
    ]
    boxes = activation_boxes(view("activations"), runs)
    assert list(boxes) == ["LG-Mix", "FedAvg"]
    client_1 = boxes["LG-Mix"][1]
    assert client_1["med"] == pytest.approx(2.0 + 1 + 0.5)  # mean of shifts 1 and 3, client 1, level 0.5
    assert (client_1["whislo"], client_1["q1"], client_1["q3"], client_1["whishi"]) == pytest.approx(
        (3.05, 3.25, 3.75, 3.95)
    )
    assert client_1["mean"] == pytest.approx(3.0)
    ((stem, fig),) = draw_activations(view("activations", clients=["A", "B", "C"]), runs)
    assert stem == "fig2b_activations"
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["A", "B", "C"]
    medians = sorted(
        line.get_ydata()[0] for line in ax.get_lines() if line.get_color() == "black" and len(line.get_ydata()) == 2
    )
    assert medians == pytest.approx(sorted([2.5, 3.5, 4.5, 0.5, 1.5, 2.5]))  # a box per client and method


def test_the_drawers_draw_what_a_run_records(tmp_path):
    """From the engine's records to the panels: a run's stored means are the points of the lines."""
    spec = contract_spec("fedavg", rounds=2, diagnostics=["feature_stats", "activations"])
    sink = ListSink()
    assert run(spec, sink, EngineOptions(checkpoint_path=tmp_path / "c.pt")).status == "done"
    runs = {
        name: [RunDiagnostics({"algorithm": "FedAvg"}, 0, {r.round: r.diagnostics[name] for r in sink.records})]
        for name in ("feature_stats", "activations")
    }
    drawn = dict(DRAWERS["feature_stats"](view("feature_stats"), runs["feature_stats"]))
    stored = [r.diagnostics["feature_stats"]["mean"]["observed"]["norm_gap"] for r in sink.records]
    assert lines(drawn["fig4c_norm_gap"])["FedAvg (O)"][1] == pytest.approx(stored)
    ((_, fig),) = DRAWERS["activations"](view("activations"), runs["activations"])
    assert len(fig.axes[0].get_xticklabels()) == spec.num_clients


def test_a_single_diagnosed_round_is_drawn_on_a_window_of_whole_rounds():
    from matplotlib.figure import Figure

    from fedbench.report.diagnostics.feature_plots import round_axis

    ax = Figure().add_subplot()
    ax.plot([2], [0.5], ".")
    round_axis(ax)
    assert ax.get_xlim() == (1.0, 3.0)
    ticks = [t for t in ax.get_xticks() if 1 <= t <= 3]
    assert ticks and all(float(t).is_integer() for t in ticks)
    wide = Figure().add_subplot()
    wide.plot([1, 10], [0.0, 1.0])
    before = wide.get_xlim()
    round_axis(wide)
    assert wide.get_xlim() == before  # several rounds: matplotlib's own window


def test_the_panels_are_frozen_and_each_is_drawn_by_the_papers_label_for_it():
    from dataclasses import FrozenInstanceError

    with pytest.raises(FrozenInstanceError):
        FEATURE_PANELS[0].ylabel = "x"  # type: ignore[misc]  # the catalogue every view draws from
    items = ["Fig. 2(a)", "Fig. 2(b)", "Fig. 3(a)", "Fig. 3(b)", "Fig. 4(a)", "Fig. 4(b)", "Fig. 4(c)"]
    items += ["Fig. 5 (alignment)", "Fig. 5 (accuracy)"]
    for item, panel in zip(items, FEATURE_PANELS, strict=True):
        assert [stem for stem, _ in draw_feature_stats(view("feature_stats", [item]), feature_runs())] == [panel.stem]


def test_each_panel_says_its_quantity_and_unit_on_its_axis_and_title():
    drawn = dict(draw_feature_stats(view("feature_stats"), feature_runs()))
    ylabels = {stem: fig.axes[0].get_ylabel() for stem, fig in drawn.items()}
    assert ylabels == {
        "fig2a_alignment": "alignment cos(f(x; θ_r^i), v_y)",
        "fig2b_accuracy": "accuracy (%)",
        "fig3a_alignment_gap": "alignment gap (local − global)",
        "fig3b_accuracy_gap": "accuracy gap (local − global) (%)",
        "fig4a_distance": "feature distance ‖f(x; θ_r^i) − f(x; θ_{r−1}^g)‖₂",
        "fig4b_angle": "feature angle ∠(f(x; θ_r^i), f(x; θ_{r−1}^g)) (°)",
        "fig4c_norm_gap": "feature norm difference ‖f(x; θ_r^i)‖₂ − ‖f(x; θ_{r−1}^g)‖₂",
        "fig5_alignment": "alignment cos(f(x; θ_r^i), v_y)",
        "fig5_accuracy": "accuracy (%)",
    }
    assert drawn["fig3a_alignment_gap"].axes[0].get_title() == "Fig. 3(a): alignment gap (local − global)"
    assert all(fig.axes[0].get_xlabel() == "communication round" for fig in drawn.values())
    fractions = dict(draw_feature_stats(view("feature_stats", ["Fig. 2(b)"], percent=False), feature_runs()))
    assert fractions["fig2b_accuracy"].axes[0].get_ylabel() == "accuracy"  # no % on fractions


def test_a_window_of_two_rounds_or_more_is_left_as_matplotlib_set_it():
    from fedbench.report.diagnostics.feature_plots import round_axis

    ax = Figure().add_subplot()
    ax.plot([1, 2], [0.0, 1.0])
    ax.set_xlim(0.5, 2.5)  # exactly two rounds wide
    round_axis(ax)
    assert ax.get_xlim() == (0.5, 2.5)


def test_activation_boxes_of_each_client_sit_on_its_tick_methods_left_to_right():
    runs = [
        RunDiagnostics({"algorithm": "LG-Mix"}, 0, {5: activation_value(0.0)}),
        RunDiagnostics({"algorithm": "FedAvg"}, 0, {5: activation_value(100.0)}),
    ]
    ((_, fig),) = draw_activations(view("activations"), runs)
    (ax,) = fig.axes
    medians = {
        round(float(line.get_ydata()[0]), 6): list(line.get_xdata())
        for line in ax.get_lines()
        if line.get_color() == "black" and len(line.get_ydata()) == 2
    }
    for client in range(3):
        first, second = medians[client + 0.5], medians[100.0 + client + 0.5]  # LG-Mix's box, then FedAvg's
        assert client - 0.4 <= min(first) < max(first) <= client <= min(second) < max(second) <= client + 0.4
    five = [RunDiagnostics({"algorithm": m}, 0, {5: activation_value(0.0, clients=5)}) for m in ("LG-Mix", "FedAvg")]
    one, two = (draw_activations(view("activations"), five[:n])[0][1] for n in (1, 2))
    assert one.get_figwidth() < two.get_figwidth()  # a box per method and client: wider with more methods
    # what a box is, said on the figure (the paper's Fig. 2(b))
    assert ax.get_title() == "Fig. 2(b): feature values per client\nbox 25–75 %, whiskers 5–95 %, ○ mean"
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("client", "last-hidden-layer value")


def test_a_run_without_rounds_and_a_client_without_values_are_skipped_the_others_kept():
    """A client whose quantiles are None (no test points) gets no box, and the clients after it keep theirs; a run
    that recorded no round adds nothing, and the runs after it are drawn. Ticks past the view's ``clients`` are named
    by the client's number."""
    value = activation_value(0.0)
    value["quantiles"][1] = None
    runs = [RunDiagnostics({"algorithm": "FedAvg"}, 0, {}), RunDiagnostics({"algorithm": "LG-Mix"}, 0, {5: value})]
    boxes = activation_boxes(view("activations"), runs)
    assert list(boxes) == ["LG-Mix"] and [b["client"] for b in boxes["LG-Mix"]] == [0, 2]
    ((_, fig),) = draw_activations(view("activations", clients=["A"]), runs)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["A", "client 2"]


def test_each_methods_boxes_have_its_legend_colour_and_show_the_mean_as_a_hollow_circle():
    runs = [
        RunDiagnostics({"algorithm": m}, 0, {5: activation_value(s)}) for m, s in (("LG-Mix", 0.0), ("FedAvg", 100.0))
    ]
    ((_, fig),) = draw_activations(view("activations"), runs)
    FigureCanvasAgg(fig).draw()  # renders: every colour given is one matplotlib knows
    (ax,) = fig.axes
    legend = {
        text.get_text(): to_rgb(handle.get_color())
        for text, handle in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles, strict=True)
    }
    assert list(legend) == ["LG-Mix", "FedAvg"] and legend["LG-Mix"] != legend["FedAvg"]
    for patch in ax.patches:  # a box per client and method, filled with its method's colour
        method = "LG-Mix" if patch.get_path().vertices[:, 1].max() < 50 else "FedAvg"
        assert to_rgb(patch.get_facecolor()) == legend[method]
    means = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert sorted(float(line.get_ydata()[0]) for line in means) == pytest.approx([0, 1, 2, 100, 101, 102])
    for line in means:
        method = "LG-Mix" if line.get_ydata()[0] < 50 else "FedAvg"
        assert to_rgb(line.get_markerfacecolor()) == (1.0, 1.0, 1.0)
        assert to_rgb(line.get_markeredgecolor()) == legend[method]


@pytest.mark.parametrize("methods", [1, 2, 3])
def test_the_boxes_of_a_client_fill_most_of_its_slot_whatever_the_number_of_methods(methods):
    """The methods' boxes of one client share 80 % of the space between two ticks (a tenth of each left as gap)."""
    runs = [RunDiagnostics({"algorithm": f"m{k}"}, 0, {5: activation_value(0.0)}) for k in range(methods)]
    ((_, fig),) = draw_activations(view("activations"), runs)
    spans = [patch.get_path().vertices[:, 0] for patch in fig.axes[0].patches]
    at_client_0 = [x for x in spans if x.max() < 0.5]
    assert len(at_client_0) == methods
    assert sum(x.max() - x.min() for x in at_client_0) == pytest.approx(0.8 * 0.9)
    assert np.mean([(x.max() + x.min()) / 2 for x in at_client_0]) == pytest.approx(0.0)  # centred on the tick
