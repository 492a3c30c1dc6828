"""The figures of the feature diagnostics (``fedbench/vocab/diagnostics.py``: ``feature_stats``, ``activations``), in
the papers' layout, as matplotlib Figures (no pyplot state). Each drawer returns every panel of its figure as its
own (stem suffix, Figure): those the view declares (``reproduces``), or all when it declares none of them.

- ``feature_stats``, FedDr+ Figs. 2–5: one panel per quantity against the round, the methods of the view overlaid
  (one colour each), observed classes O^i solid and unobserved U^i dashed; each point the mean over the seeds of the
  round's mean over the sampled clients. Accuracies in % (with the view's ``percent``), the angle in degrees (spec
  §8 #30: stored in radians, converted for plots).
- ``activations``, LG-Mix Fig. 2(b): per client (A–E: the view's ``clients``) one box per method of the
  distribution of its last-hidden-layer values at the last diagnosed round: the box from the 25 % to the 75 %
  quantile, the median, whiskers at 5 % and 95 %, the mean as a marker; each the mean over seeds.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from fedbench.report.diagnostics.series import RunDiagnostics
from fedbench.vocab.metrics import to_percent

if TYPE_CHECKING:
    from fedbench.recipes.views import TableView


@dataclass(frozen=True)
class Panel:
    item: str  # the paper's label of the panel (a view's ``reproduces`` entry)
    stem: str  # the file-stem suffix
    quantity: str  # the feature_stats quantity it draws
    ylabel: str
    unit: str = ""  # "percent": a fraction ×100 (with the view's ``percent``); "degrees": radians converted


FEATURE_PANELS: tuple[Panel, ...] = (
    Panel("Fig. 2(a)", "fig2a_alignment", "alignment", "alignment cos(f(x; θ_r^i), v_y)"),
    Panel("Fig. 2(b)", "fig2b_accuracy", "accuracy", "accuracy", "percent"),
    Panel("Fig. 3(a)", "fig3a_alignment_gap", "alignment_gap", "alignment gap (local − global)"),
    Panel("Fig. 3(b)", "fig3b_accuracy_gap", "accuracy_gap", "accuracy gap (local − global)", "percent"),
    Panel("Fig. 4(a)", "fig4a_distance", "distance", "feature distance ‖f(x; θ_r^i) − f(x; θ_{r−1}^g)‖₂"),
    Panel("Fig. 4(b)", "fig4b_angle", "angle", "feature angle ∠(f(x; θ_r^i), f(x; θ_{r−1}^g))", "degrees"),
    Panel("Fig. 4(c)", "fig4c_norm_gap", "norm_gap", "feature norm difference ‖f(x; θ_r^i)‖₂ − ‖f(x; θ_{r−1}^g)‖₂"),
    Panel("Fig. 5 (alignment)", "fig5_alignment", "alignment", "alignment cos(f(x; θ_r^i), v_y)"),
    Panel("Fig. 5 (accuracy)", "fig5_accuracy", "accuracy", "accuracy", "percent"),
)
SPLIT_LABELS = {"observed": "O", "unobserved": "U"}
SPLIT_STYLES = {"observed": "-", "unobserved": "--"}
ACTIVATIONS_ITEM, ACTIVATIONS_STEM = "Fig. 2(b)", "fig2b_activations"


def round_axis(ax) -> None:
    """Communication rounds on an x axis: integer ticks, and a window of at least two rounds around a single
    diagnosed round (matplotlib would otherwise spread fractional rounds over ±0.1 of it)."""
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    low, high = ax.get_xlim()
    if high - low < 2:
        middle = round((low + high) / 2)
        ax.set_xlim(middle - 1, middle + 1)


def method_label(view: TableView, labels: dict[str, str] | Any) -> str:
    """A run's line: its labels of the view's rows and columns (the method axis), or "all"."""
    return " / ".join(labels[k] for k in view.rows + view.columns if k in labels) or "all"


def _converter(view: TableView, unit: str) -> Callable[[float], float]:
    if unit == "percent" and view.percent:
        return to_percent
    if unit == "degrees":
        return math.degrees
    return lambda v: v


def feature_series(
    view: TableView, runs: list[RunDiagnostics], quantity: str, unit: str = ""
) -> dict[str, dict[str, list[tuple[int, float]]]]:
    """{method: {split: [(round, value)]}}: per diagnosed round, the mean over the method's seeds of the round's
    mean over the sampled clients (``feature_stats``' ``mean``), in the plotted unit; rounds without one skipped."""
    convert = _converter(view, unit)
    collected: dict[str, dict[str, dict[int, list[float]]]] = {}
    for run in runs:
        by_split = collected.setdefault(method_label(view, run.labels), {s: {} for s in SPLIT_LABELS})
        for round_index, value in run.rounds.items():
            for split in SPLIT_LABELS:
                found = (value or {}).get("mean", {}).get(split, {}).get(quantity)
                if found is not None:
                    by_split[split].setdefault(int(round_index), []).append(convert(found))
    return {
        method: {split: [(r, float(np.mean(v))) for r, v in sorted(points.items())] for split, points in splits.items()}
        for method, splits in collected.items()
    }


def _declared(view: TableView, items: list[str]) -> list[str]:
    """The panels a view draws: those it declares among ``items``, or all of them when it declares none."""
    chosen = [item for item in items if item in view.reproduces]
    return chosen or items


def draw_feature_stats(view: TableView, runs: list[RunDiagnostics]) -> list[tuple[str, Figure]]:
    """FedDr+ Figs. 2–5, one Figure per panel."""
    items = _declared(view, [p.item for p in FEATURE_PANELS])
    out = []
    for panel in (p for p in FEATURE_PANELS if p.item in items):
        series = feature_series(view, runs, panel.quantity, panel.unit)
        fig = Figure(figsize=(6, 4))
        ax = fig.add_subplot()
        colours = {method: f"C{k}" for k, method in enumerate(series)}
        for method, splits in series.items():
            for split, points in splits.items():
                if points:
                    rounds, values = zip(*points, strict=True)
                    ax.plot(
                        rounds,
                        values,
                        SPLIT_STYLES[split],
                        color=colours[method],
                        marker="." if len(points) < 30 else None,  # a few diagnosed rounds: each one visible
                        label=f"{method} ({SPLIT_LABELS[split]})",
                    )
        unit = " (%)" if panel.unit == "percent" and view.percent else " (°)" if panel.unit == "degrees" else ""
        ax.set_xlabel("communication round")
        ax.set_ylabel(panel.ylabel + unit)
        ax.set_title(f"{panel.item}: {panel.ylabel}")
        round_axis(ax)
        if series:
            ax.legend(fontsize="small")
        fig.tight_layout()
        out.append((panel.stem, fig))
    return out


def activation_boxes(view: TableView, runs: list[RunDiagnostics]) -> dict[str, list[dict[str, Any]]]:
    """{method: [box per client]}: from each run's last diagnosed round, each client's quantiles and mean, averaged
    over the method's seeds, as matplotlib's ``bxp`` takes them (whiskers at 5 % / 95 %)."""
    gathered: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        if not run.rounds:
            continue
        value = run.rounds[max(run.rounds)]
        gathered.setdefault(method_label(view, run.labels), []).append(value)
    boxes: dict[str, list[dict[str, Any]]] = {}
    for method, values in gathered.items():
        levels = values[0]["quantile_levels"]
        at = {p: levels.index(p) for p in (0.05, 0.25, 0.5, 0.75, 0.95)}
        boxes[method] = []
        for client in range(len(values[0]["clients"])):
            quantiles = [v["quantiles"][client] for v in values if v["quantiles"][client] is not None]
            if not quantiles:
                continue
            q = np.mean(quantiles, axis=0)
            boxes[method].append(
                {
                    "client": client,
                    "whislo": float(q[at[0.05]]),
                    "q1": float(q[at[0.25]]),
                    "med": float(q[at[0.5]]),
                    "q3": float(q[at[0.75]]),
                    "whishi": float(q[at[0.95]]),
                    "mean": float(np.mean([v["mean"][client] for v in values])),
                    "fliers": [],
                }
            )
    return boxes


def draw_activations(view: TableView, runs: list[RunDiagnostics]) -> list[tuple[str, Figure]]:
    """LG-Mix Fig. 2(b): per client, a box per method of its last-hidden-layer values."""
    boxes = activation_boxes(view, runs)
    clients = sorted({b["client"] for method_boxes in boxes.values() for b in method_boxes})
    names = {c: view.clients[c] if c < len(view.clients) else f"client {c}" for c in clients}
    width = 0.8 / max(1, len(boxes))
    fig = Figure(figsize=(min(14, max(5, 0.7 * len(clients) * max(1, len(boxes)))), 4))
    ax = fig.add_subplot()
    for k, (method, method_boxes) in enumerate(boxes.items()):
        positions = [clients.index(b["client"]) + (k - (len(boxes) - 1) / 2) * width for b in method_boxes]
        colour = f"C{k}"
        ax.bxp(
            [{key: v for key, v in b.items() if key != "client"} | {"label": method} for b in method_boxes],
            positions=positions,
            widths=width * 0.9,
            showmeans=True,
            showfliers=False,
            patch_artist=True,
            boxprops={"facecolor": colour, "alpha": 0.6},
            meanprops={"marker": "o", "markerfacecolor": "white", "markeredgecolor": colour},
            medianprops={"color": "black"},
            whiskerprops={"color": colour},
            capprops={"color": colour},
        )
        ax.plot([], [], "s", color=colour, label=method)  # the legend entry of the method's boxes
    ax.set_xticks(range(len(clients)), [names[c] for c in clients])
    ax.set_xlabel("client")
    ax.set_ylabel("last-hidden-layer value")
    # two lines: one would be wider than a figure of few clients
    ax.set_title(f"{ACTIVATIONS_ITEM}: feature values per client\nbox 25–75 %, whiskers 5–95 %, ○ mean", fontsize=10)
    if boxes:
        ax.legend(fontsize="small")
    fig.tight_layout()
    return [(ACTIVATIONS_STEM, fig)]


__all__ = [
    "FEATURE_PANELS",
    "activation_boxes",
    "draw_activations",
    "draw_feature_stats",
    "feature_series",
    "method_label",
]
