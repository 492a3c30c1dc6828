"""Accuracy-vs-round plots (matplotlib): one figure per table row, a line per column, mean ± std
band over seeds; optional EMA smoothing (FedTrip Fig. 5 convention). Box plots of a figure over seeds
(FedTrip Fig. 6), and per-client label distributions of a partition view (FedTR Fig. 2)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fedbench.metric_catalog import axis_label, display_factor, metric_curve
from fedbench.metrics import ema
from fedbench.recipe import Recipe, TableView
from fedbench.registry import Registry
from fedbench.report.render import figure_name
from fedbench.report.table import build_table, planned_for_view

Curve = list[tuple[int, float]]


def curve_series(
    recipe: Recipe, view: TableView, registry: Registry, scale: str = "full", synthetic: bool = False
) -> dict[str, dict[str, list[Curve]]]:
    """What the curve plots of a view draw: {figure: {line: [one curve per seed]}}, values in the unit the
    view's table shows (×100 for a fraction metric when ``percent``), read through the metric catalogue."""
    planned = planned_for_view(recipe, view, scale, synthetic)
    runs = {
        r.spec_hash: r
        for r in registry.runs(spec_hashes=[p.spec_hash for p in planned])
        if r.status in ("done", "diverged")
    }
    curves = registry.curves([r.id for r in runs.values()])
    by_row: dict[str, dict[str, list[Curve]]] = {}
    for p in planned:
        if p.spec_hash not in runs:
            continue
        # pseudo-axes of a table ("round", "client") are not run labels: a curve spans all rounds (and is the
        # metric itself, e.g. the mean over clients); a "metric" axis draws each of its metrics
        for label, metric in view.view_metrics():
            labels = {**p.labels, "metric": label} if label is not None else p.labels
            row = " / ".join(labels[k] for k in view.rows if k in labels)
            column = " / ".join(labels[k] for k in view.columns if k in labels)
            if view.plot_by == "columns":  # one figure per column value, a line per row value
                row, column = column, row
            factor = display_factor(metric, view.percent)
            curve = [(r, v * factor) for r, v in metric_curve(curves[runs[p.spec_hash].id], metric)]
            if curve:  # a run that does not record the metric (no eval_metrics, a segmentation-only one) draws nothing
                by_row.setdefault(row, {}).setdefault(column, []).append(curve)
    return by_row


def plot_table(
    recipe: Recipe,
    view: TableView,
    registry: Registry,
    out_dir: Path,
    scale: str = "full",
    synthetic: bool = False,
    smoothing: float = 0.0,
) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if view.plot == "none":
        return []
    if view.kind == "partition":
        return _partition_plots(recipe, view, out_dir, scale, synthetic, plt)
    if view.kind != "runs":
        return []
    if view.plot == "box":
        return _box_plots(recipe, view, registry, out_dir, scale, synthetic, plt)
    smoothing = smoothing or view.smoothing
    by_row = curve_series(recipe, view, registry, scale, synthetic)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for row, columns in by_row.items():
        fig, ax = plt.subplots(figsize=(6, 4))
        for column, seed_curves in columns.items():
            rounds = sorted(set.intersection(*(set(r for r, _ in c) for c in seed_curves)))
            values = np.array([[dict(c)[r] for r in rounds] for c in seed_curves])
            if smoothing:
                values = np.array([ema(v, smoothing) for v in values])
            mean, std = values.mean(0), values.std(0)
            ax.plot(rounds, mean, label=f"{column} (n={len(seed_curves)})")
            ax.fill_between(rounds, mean - std, mean + std, alpha=0.2)
        target = view.target_by.get(row, view.target)
        if target is not None and view.figure in ("rounds_to_target", "gflops_to_target", "total_bytes_to_target"):
            ax.axhline(target, color="grey", linestyle="--", linewidth=0.8)
        ax.set_xlabel("round")
        ax.set_ylabel(", ".join(dict.fromkeys(axis_label(m, view.percent) for _, m in view.view_metrics())))
        ax.set_title(f"{recipe.name} · {view.name} · {row}" + (" [synthetic]" if synthetic else ""))
        ax.legend(fontsize=8)
        written.append(_save(fig, plt, out_dir, f"{recipe.name}_{view.name}_{row}"))
    return written


def _save(fig, plt, out_dir: Path, stem: str) -> Path:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in stem)
    path = out_dir / f"{safe}.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _box_plots(recipe, view, registry, out_dir: Path, scale: str, synthetic: bool, plt) -> list[Path]:
    """One box per column of the per-seed figure values (FedTrip Fig. 6: final accuracy over trials)."""
    table = build_table(recipe, view, registry, scale=scale, synthetic=synthetic)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for row in table.rows:
        columns = [c for c in table.columns if table.cells.get((row, c)) and table.cells[(row, c)].n]
        if not columns:
            continue
        fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(columns)), 4))
        data = [[v for v in table.cells[(row, c)].values if v is not None] for c in columns]
        ax.boxplot(data)
        ax.set_xticks(range(1, len(columns) + 1), columns)
        ax.set_ylabel(figure_name(view) + (f" ({table.unit})" if table.unit else ""))
        ax.set_title(f"{recipe.name} · {view.name} · {row}" + (" [synthetic]" if synthetic else ""))
        ax.tick_params(axis="x", rotation=30)
        written.append(_save(fig, plt, out_dir, f"{recipe.name}_{view.name}_{row}_box"))
    return written


def draw_partition(ax, counts: np.ndarray, max_area: float = 300.0):
    """Client × class scatter of a partition's counts (clients, classes), marker area ∝ count (FedTR Fig. 2);
    empty (client, class) pairs are not drawn. Returns the scatter's collection."""
    from matplotlib.ticker import MaxNLocator

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


def _partition_plots(recipe, view, out_dir: Path, scale: str, synthetic: bool, plt) -> list[Path]:
    from fedbench.report.static import partition_panels

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for row, panel in partition_panels(recipe, view, scale, synthetic).items():
        if panel.counts is None:  # the data set is not available (the table says so)
            continue
        fig, ax = plt.subplots(figsize=(max(4, 0.3 * panel.counts.shape[0] + 2), 4))
        draw_partition(ax, panel.counts)
        ax.set_title(
            f"{recipe.name} · {view.name} · {row} (seed {panel.run.spec.seed})" + (" [synthetic]" if synthetic else "")
        )
        written.append(_save(fig, plt, out_dir, f"{recipe.name}_{view.name}_{row}"))
    return written
