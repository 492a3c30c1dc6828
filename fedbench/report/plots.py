"""Accuracy-vs-round plots (matplotlib): the methods of a table overlaid, one figure per value of the table's
other keys (per column, where methods are rows: FedTR Fig. 3, FedTrip Fig. 5), a line per method with its seed
mean and a min–max band over seeds, integer round ticks and the target as a dashed line; optional EMA smoothing
(FedTrip Fig. 5 convention). A table without a method axis draws one figure per row (or column, ``plot_by``).
Box plots of a figure over seeds (FedTrip Fig. 6), and per-client label distributions of a partition view
(FedTR Fig. 2). ``figures`` builds matplotlib Figures (no pyplot state); ``plot_table`` writes them as PNGs."""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from fedbench.curves import ema
from fedbench.recipes.schema import Recipe
from fedbench.recipes.views import TableView
from fedbench.registry import Registry
from fedbench.report.diagnostics.drawers import draw
from fedbench.report.diagnostics.series import diagnostic_runs, figure_and_line
from fedbench.report.render.notes import figure_heading
from fedbench.report.static import partition_panels
from fedbench.report.table import build_table, cell_of, planned_for_view
from fedbench.vocab.figures import FIGURES
from fedbench.vocab.metrics import axis_label, display_factor, metric_curve, metric_fields
from fedbench.vocab.status import FINISHED

Curve = list[tuple[int, float]]


def curve_series(
    recipe: Recipe,
    view: TableView,
    registry: Registry,
    scale: str = "full",
    synthetic: bool = False,
    seeds: list[int] | None = None,
    only: Mapping[str, str | set[str]] | None = None,
) -> dict[str, dict[str, list[Curve]]]:
    """What the curve plots of a view draw: {figure: {line: [one curve per seed]}}, values in the unit the
    view's table shows (×100 for a fraction metric when ``percent``), read through the metric catalogue."""
    planned = planned_for_view(recipe, view, scale, synthetic, seeds=seeds, only=only)
    runs = {
        r.spec_hash: r for r in registry.run_states(dict.fromkeys(p.spec_hash for p in planned)) if r.status in FINISHED
    }
    fields = [f for _, metric in view.view_metrics() for f in metric_fields(metric)]
    curves = registry.curves([r.id for r in runs.values()], fields)
    by_row: dict[str, dict[str, list[Curve]]] = {}
    for p in planned:
        if p.spec_hash not in runs:
            continue
        # pseudo-axes of a table ("round", "client") are not run labels: a curve spans all rounds (and is the
        # metric itself, e.g. the mean over clients); a "metric" axis draws each of its metrics
        for label, metric in view.view_metrics():
            labels = {**p.labels, "metric": label} if label is not None else p.labels
            row, column = figure_and_line(view, labels)
            factor = display_factor(metric, view.percent)
            curve = [(r, v * factor) for r, v in metric_curve(curves[runs[p.spec_hash].id], metric)]
            if curve:  # a run that does not record the metric (no eval_metrics, a segmentation-only one) draws nothing
                by_row.setdefault(row, {}).setdefault(column, []).append(curve)
    return by_row


BAND = "min–max over seeds"


def figures(
    recipe: Recipe,
    view: TableView,
    registry: Registry,
    scale: str = "full",
    synthetic: bool = False,
    smoothing: float = 0.0,
    seeds: list[int] | None = None,
    only: Mapping[str, str | set[str]] | None = None,
) -> list[tuple[str, Figure]]:
    """The view's figures as (file stem, matplotlib Figure): curves, box plots, partition panels or the figures of
    a per-round diagnostic. ``seeds`` and ``only`` select runs as they select a table's cells (``report --seeds`` /
    ``--only``); a partition view draws the partitions of its rows whatever they select, as its table shows them."""
    if view.plot == "none":
        return []
    if view.kind == "partition":
        return _partition_plots(recipe, view, scale, synthetic)
    if view.kind == "diagnostics":
        return _diagnostic_plots(recipe, view, registry, scale, synthetic, seeds, only)
    if view.kind != "runs":
        return []
    if view.plot == "box":
        return _box_plots(recipe, view, registry, scale, synthetic, seeds, only)
    smoothing = smoothing or view.smoothing
    published = _published_by_line(recipe, view, scale, synthetic, seeds, only)
    out = []
    for key, lines in curve_series(recipe, view, registry, scale, synthetic, seeds, only).items():
        fig = Figure(figsize=(6, 4))
        ax = fig.subplots()
        target = view.target_by.get(key, view.target)
        paper_points = []  # drawn after the lines and the target: the methods' lines come first in the legend
        for line, seed_curves in lines.items():
            rounds = sorted(set.intersection(*(set(r for r, _ in c) for c in seed_curves)))
            by_round = [dict(c) for c in seed_curves]
            values = np.array([[d[r] for r in rounds] for d in by_round])
            if smoothing:
                values = np.array([ema(v, smoothing) for v in values])
            (drawn,) = ax.plot(rounds, values.mean(0), label=f"{line} (n={len(seed_curves)})")
            ax.fill_between(rounds, values.min(0), values.max(0), alpha=0.2)
            point = _paper_point(view, published.get((key, line)), target, rounds)
            if point is not None:
                paper_points.append((point, drawn.get_color()))
        if target is not None and FIGURES[view.figure].needs_target:
            ax.axhline(target, color="grey", linestyle="--", linewidth=0.8, label=f"target {target:g}")
        for point, colour in paper_points:
            ax.plot(*point, marker="D", color=colour, markeredgecolor="black", linestyle="none")
        if paper_points:
            ax.plot([], [], marker="D", color="white", markeredgecolor="black", linestyle="none", label=PAPER_MARK)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("round")
        ax.set_ylabel(", ".join(dict.fromkeys(axis_label(m, view.percent) for _, m in view.view_metrics())))
        ax.set_title(f"{recipe.name} · {view.name} · {key}" + (" [synthetic]" if synthetic else ""))
        ax.legend(fontsize=8, title=f"mean; band: {BAND}", title_fontsize=7)
        fig.tight_layout()
        out.append((f"{recipe.name}_{view.name}_{key}", fig))
    return out


# The legend entry of the paper's values drawn on the curves.
PAPER_MARK = "paper's value"


def _published_by_line(recipe, view, scale: str, synthetic: bool, seeds, only) -> dict[tuple[str, str], float]:
    """{(figure, line): the paper's number for that line's cell} of the view's planned runs; none for synthetic
    data or another scale than the paper's, which the paper's numbers do not describe."""
    out: dict[tuple[str, str], float] = {}
    if synthetic or scale != "full":
        return out
    for p in planned_for_view(recipe, view, scale, synthetic, seeds=seeds, only=only):
        if not set(view.rows + view.columns) <= set(p.labels):
            continue  # a pseudo-axis (client, metric, round): the table's cells are not one run's curve
        value = view.published_value(*cell_of(view, p.labels))
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[figure_and_line(view, p.labels)] = float(value)
    return out


def _paper_point(view: TableView, published: float | None, target: float | None, rounds: list[int]):
    """Where the paper's number of a line's cell sits on its accuracy curve: a count of rounds to the target at
    (those rounds, the target); an accuracy figure (best, final) at (the last round, that accuracy). None for the
    other figures (costs), whose numbers are not points of the curve."""
    if published is None or not rounds:
        return None
    number = FIGURES[view.figure].number
    if number == "rounds" and target is not None:
        return [published], [target]
    if number == "value" and len(view.view_metrics()) == 1:
        return [rounds[-1]], [published]
    return None


def plot_table(
    recipe: Recipe,
    view: TableView,
    registry: Registry,
    out_dir: Path,
    scale: str = "full",
    synthetic: bool = False,
    smoothing: float = 0.0,
    seeds: list[int] | None = None,
    only: Mapping[str, str | set[str]] | None = None,
) -> list[Path]:
    """Write the view's figures (``figures``) as PNGs into ``out_dir``; returns their paths."""
    made = figures(recipe, view, registry, scale, synthetic, smoothing, seeds, only)
    if made:
        out_dir.mkdir(parents=True, exist_ok=True)
    return [_save(fig, out_dir, stem) for stem, fig in made]


def png_bytes(fig: Figure, dpi: int = 100) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def png_name(stem: str) -> str:
    """The file name of a figure's PNG: its stem with every character but letters, digits, - _ . made _."""
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in stem) + ".png"


def _save(fig: Figure, out_dir: Path, stem: str) -> Path:
    path = out_dir / png_name(stem)
    path.write_bytes(png_bytes(fig, dpi=120))
    return path


def _box_plots(recipe, view, registry, scale: str, synthetic: bool, seeds, only) -> list[tuple[str, Figure]]:
    """One box per column of the per-seed figure values (FedTrip Fig. 6: final accuracy over trials)."""
    table = build_table(recipe, view, registry, scale=scale, synthetic=synthetic, seeds=seeds, only=only)
    written = []
    for row in table.rows:
        columns = [c for c in table.columns if table.cells.get((row, c)) and table.cells[(row, c)].n]
        if not columns:
            continue
        fig = Figure(figsize=(max(4, 1.2 * len(columns)), 4))
        ax = fig.subplots()
        data = [[v for v in table.cells[(row, c)].values if v is not None] for c in columns]
        ax.boxplot(data)
        ax.set_xticks(range(1, len(columns) + 1), columns)
        ax.set_ylabel(figure_heading(table))
        ax.set_title(f"{recipe.name} · {view.name} · {row}" + (" [synthetic]" if synthetic else ""))
        ax.tick_params(axis="x", rotation=30)
        fig.tight_layout()
        written.append((f"{recipe.name}_{view.name}_{row}_box", fig))
    return written


def draw_partition(ax, counts: np.ndarray, max_area: float = 300.0):
    """Client × class scatter of a partition's counts (clients, classes), marker area ∝ count (FedTR Fig. 2);
    empty (client, class) pairs are not drawn. Returns the scatter's collection."""
    clients, classes = np.nonzero(counts)
    sizes = counts[clients, classes] / max(int(counts.max()), 1) * max_area
    collection = ax.scatter(clients, classes, s=sizes, alpha=0.6, edgecolors="none")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("client")
    ax.set_ylabel("class")
    ax.set_xlim(-1, counts.shape[0])
    ax.set_ylim(-1, counts.shape[1])
    return collection


def _partition_plots(recipe, view, scale: str, synthetic: bool) -> list[tuple[str, Figure]]:
    written = []
    for row, panel in partition_panels(recipe, view, scale, synthetic).items():
        if panel.counts is None:  # the data set is not available (the table says so)
            continue
        fig = Figure(figsize=(max(4, 0.3 * panel.counts.shape[0] + 2), 4))
        ax = fig.subplots()
        draw_partition(ax, panel.counts)
        ax.set_title(
            f"{recipe.name} · {view.name} · {row} (seed {panel.run.spec.seed})" + (" [synthetic]" if synthetic else "")
        )
        fig.tight_layout()
        written.append((f"{recipe.name}_{view.name}_{row}", fig))
    return written


def _diagnostic_plots(recipe, view, registry, scale: str, synthetic: bool, seeds, only) -> list[tuple[str, Figure]]:
    """The figures of a diagnostics view (``fedbench.report.diagnostics.drawers``), from its runs' recorded values."""
    made = draw(view, diagnostic_runs(recipe, view, registry, scale, synthetic, seeds, only))
    if synthetic:
        for _, fig in made:
            for ax in fig.axes:
                ax.set_title(ax.get_title() + " [synthetic]", fontsize=9)
    return [(f"{recipe.name}_{view.name}_{suffix}", fig) for suffix, fig in made]
