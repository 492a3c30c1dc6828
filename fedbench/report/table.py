"""Build a paper table from the registry: a recipe's table view, cell by cell.

A cell gathers the runs of every seed whose labels match the cell, computes the view's figure from
each stored curve (or from the seed-mean curve when ``summary = "mean_curve"``) and puts the paper's
published value beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from fedbench import metrics
from fedbench.recipe import PlannedRun, Recipe, TableView, expand
from fedbench.registry import Registry
from fedbench.spec import EVAL_METRICS, RunSpec

ACCURACY_METRICS = ("test_acc", "personal_mean", "personal_weighted_mean", "personal_val_mean", "finetune_mean",
                    "finetune_weighted_mean", "personal_auc", "personal_balanced_accuracy", "personal_dice",
                    "personal_iou")
ACCURACY_FIGURES = ("best", "final", "last_k_mean", "val_selected")


@dataclass
class Cell:
    row: str
    column: str
    labels: dict[str, str]
    expected: int                      # seeds the recipe asks for
    n: int = 0                         # finished runs found
    values: list[float | None] = field(default_factory=list)   # per seed (None: target not reached)
    seeds: list[int] = field(default_factory=list)
    mean: float | None = None
    std: float | None = None
    not_reached: int = 0               # rounds_to_target: seeds that never reached the target
    rounds_limit: int | None = None    # for ">R" display
    diverged: int = 0
    published: float | str | None = None
    published_std: float | None = None
    synthetic_available: int = 0       # synthetic runs exist for a real-data report
    ratio: float | None = None         # mean ÷ the reference cell's mean (view.ratio_to)
    published_ratio: float | None = None
    static: bool = False               # an analytic value, not a summary of runs

    @property
    def partial(self) -> bool:
        return 0 < self.n < self.expected

    @property
    def difference(self) -> float | None:
        if self.mean is None or not isinstance(self.published, (int, float)):
            return None
        return self.mean - float(self.published)

    def to_json(self) -> dict[str, Any]:
        return {
            "row": self.row, "column": self.column, "labels": self.labels, "n": self.n, "expected": self.expected,
            "mean": self.mean, "std": self.std, "values": self.values, "seeds": self.seeds,
            "not_reached": self.not_reached, "diverged": self.diverged, "published": self.published,
            "published_std": self.published_std, "difference": self.difference, "partial": self.partial,
            "ratio": self.ratio, "published_ratio": self.published_ratio, "static": self.static,
        }


@dataclass
class Table:
    recipe: str
    paper: str
    view: TableView
    scale: str
    synthetic: bool
    rows: list[str]
    columns: list[str]
    cells: dict[tuple[str, str], Cell]
    unit: str

    @property
    def title(self) -> str:
        return self.view.title or f"{self.recipe}: {self.view.name}"

    def to_json(self) -> dict[str, Any]:
        return {
            "paper": self.paper, "recipe": self.recipe, "table": self.view.name, "title": self.title,
            "caption": self.view.caption, "figure": self.view.figure, "metric": self.view.metric,
            "target": self.view.target, "summary": self.view.summary, "unit": self.unit, "scale": self.scale,
            "synthetic": self.synthetic, "rows": self.rows, "columns": self.columns,
            "cells": [self.cells[(r, c)].to_json() for r in self.rows for c in self.columns if (r, c) in self.cells],
        }


def _key(labels: dict[str, str], keys: list[str]) -> str:
    return " / ".join(labels[k] for k in keys)


def _scale_factor(view: TableView) -> float:
    return 100.0 if view.percent and view.metric in ACCURACY_METRICS else 1.0


def cost_per_round_flops(spec: RunSpec, client_sizes: list[int] | None) -> float:
    """Forward FLOPs (MACs, thop-style, as FedTrip counts them) of one participating client in one
    round plus the method's attaching operations: n_k·E·FP + A_method (FedTrip §4, Table V)."""
    from fedbench.algorithms import build_algorithm
    from fedbench.cost import model_card
    from fedbench.data import dataset_meta

    meta = dataset_meta(spec.dataset)
    card = model_card(spec.model, num_classes=meta.num_classes, input_shape=list(meta.input_shape), **spec.model_params)
    samples = float(np.mean(client_sizes)) if client_sizes else float(spec.partition_params.get("samples_per_client", 0))
    steps_per_epoch = -(-int(samples) // spec.batch_size)
    steps = spec.local_steps or spec.local_epochs * steps_per_epoch
    processed = steps * spec.batch_size if spec.local_steps else samples * spec.local_epochs
    forward = card["macs_forward"]
    attach = build_algorithm(spec.algorithm, spec.algorithm_params).attach_flops_per_round(
        steps=steps, samples=int(samples), batch_size=spec.batch_size, num_params=card["params"],
        forward_flops=forward, backward_flops=card["flops_train"] / 2 - forward)
    return processed * forward + attach


def figure_of(view: TableView, curve: list[tuple[int, float]], rows: list | None = None,
              cost: float | None = None, target: float | None = None) -> float | None:
    factor = _scale_factor(view)
    target = view.target if target is None else target
    scaled = [(r, v * factor) for r, v in curve]
    if view.figure == "best":
        return metrics.best(scaled)
    if view.figure == "final":
        return metrics.final(scaled)
    if view.figure == "last_k_mean":
        return metrics.last_k_mean(scaled, view.k)
    if view.figure == "best_round":
        return metrics.best_round(scaled)
    if view.figure == "rounds_to_target":
        return metrics.rounds_to_target(scaled, target, view.target_rule)
    if view.figure == "value_at_round":
        return metrics.value_at_round(scaled, view.at_round)
    if view.figure == "gflops_to_target":
        reached = metrics.rounds_to_target(scaled, target, view.target_rule)
        return None if reached is None or cost is None else reached * cost / 1e9
    if view.figure == "total_bytes_to_target":
        reached = metrics.rounds_to_target(scaled, target, view.target_rule)
        if reached is None or rows is None:
            return None
        return float(sum((r.bytes_up or 0) + (r.bytes_down or 0) for r in rows if r.round <= reached))
    if view.figure == "wall_seconds":
        return float(sum(r.wall_seconds or 0 for r in rows)) if rows else None
    if view.figure == "val_selected":   # LG-Mix: the value at the round with the best mean validation accuracy
        selector = [(x.round, x.personal_val_mean) for x in rows or [] if x.personal_val_mean is not None]
        return metrics.value_at_best(scaled, selector)
    raise ValueError(view.figure)


# Per-client source of each personal metric, for the "client" pseudo-axis (TableView.clients).
PER_CLIENT = {"personal_mean": "personal_per_client", "personal_weighted_mean": "personal_per_client",
              "personal_val_mean": "personal_val_per_client", "finetune_mean": "finetune_per_client",
              "finetune_weighted_mean": "finetune_per_client"}


def metric_value(row, metric: str, client: int | None = None) -> float | None:
    """A round's value of ``metric``; of one client's when ``client`` is set. ``personal_<m>`` for the
    extra metrics (AUC, Dice, ...) is the mean over the clients that have a value."""
    if metric.removeprefix("personal_") in EVAL_METRICS:
        values = (row.personal_metrics or {}).get(metric.removeprefix("personal_"))
        if not values:
            return None
        if client is not None:
            return values[client] if client < len(values) else None
        known = [v for v in values if v is not None]
        return float(np.mean(known)) if known else None
    if client is None or metric not in PER_CLIENT:
        return getattr(row, metric)
    values = getattr(row, PER_CLIENT[metric])
    return values[client] if values and client < len(values) else None


def _with_clients(view: TableView, planned: list[PlannedRun]) -> list[PlannedRun]:
    """Expand the "client" pseudo-axis: one entry per named client and one for "Avg." (client None)."""
    if "client" not in view.rows + view.columns:
        return planned
    out = []
    for p in planned:
        for index, name in [*enumerate(view.clients), (None, "Avg.")]:
            out.append(replace(p, labels={**p.labels, "client": name}, extra={**p.extra, "client_index": index}))
    return out


def _with_rounds(view: TableView, planned: list[PlannedRun]) -> list[PlannedRun]:
    """Expand the "round" pseudo-axis of value_at_round tables: one entry per round of ``at_rounds``."""
    if "round" not in view.rows + view.columns:
        return planned
    return [replace(p, labels={**p.labels, "round": str(r)}, extra={**p.extra, "at_round": r})
            for p in planned for r in view.at_rounds]


def build_table(recipe: Recipe, view: TableView, registry: Registry, scale: str = "full",
                synthetic: bool = False) -> Table:
    if view.kind != "runs":
        from fedbench.report.static import build_static_table

        return build_static_table(recipe, view)
    def selected(planned_runs: list[PlannedRun]) -> list[PlannedRun]:   # TableView.where
        return [p for p in planned_runs if all(p.labels.get(k) == v for k, v in view.where.items())]

    planned = _with_rounds(view, _with_clients(view, selected(expand(recipe, scale=scale, synthetic=synthetic, check=False))))
    other = _with_rounds(view, _with_clients(view, selected(expand(recipe, scale=scale, synthetic=not synthetic, check=False)))) \
        if not synthetic else []
    found = {row.spec_hash: row for row in registry.runs(spec_hashes=[p.spec_hash for p in planned + other])}
    finished = [found[p.spec_hash] for p in planned if p.spec_hash in found and found[p.spec_hash].status in ("done", "diverged")]
    curves = registry.curves([row.id for row in finished])

    rows, columns = [], []
    groups: dict[tuple[str, str], list[PlannedRun]] = {}
    for p in planned:
        r, c = _key(p.labels, view.rows), _key(p.labels, view.columns)
        if r not in rows:
            rows.append(r)
        if c not in columns:
            columns.append(c)
        groups.setdefault((r, c), []).append(p)

    cells: dict[tuple[str, str], Cell] = {}
    for (r, c), members in groups.items():
        cell_cost, example_rows = None, None
        cell_target = view.target_by.get(r, view.target_by.get(c, view.target))
        cell = Cell(row=r, column=c, labels={k: members[0].labels[k] for k in view.rows + view.columns},
                    expected=len(members))
        cell.published = view.published_value(r, c)
        cell.published_std = view.published_value(r, c, std=True)
        seed_curves = []
        cell_view = view.model_copy(update={"at_round": members[0].extra["at_round"]}) if "at_round" in members[0].extra else view
        for p in members:
            run = found.get(p.spec_hash)
            if run is None or run.status not in ("done", "diverged"):
                continue
            round_rows = curves[run.id]
            client = p.extra.get("client_index")
            curve = [(x.round, v) for x in round_rows if (v := metric_value(x, view.metric, client)) is not None]
            cell.n += 1
            cell.diverged += run.status == "diverged"
            cell.rounds_limit = p.spec.rounds
            cell.seeds.append(p.spec.seed)
            cost = None
            if view.figure == "gflops_to_target":
                cost = cost_per_round_flops(p.spec, (run.provenance or {}).get("data", {}).get("client_sizes"))
                cell_cost = cost
            cell.values.append(figure_of(cell_view, curve, round_rows, cost, cell_target))
            seed_curves.append(curve)
            example_rows = round_rows
        for p in other:
            if _key(p.labels, view.rows) == r and _key(p.labels, view.columns) == c and p.spec_hash in found \
                    and found[p.spec_hash].status == "done":
                cell.synthetic_available += 1
        _summarise(cell, cell_view, seed_curves, cell_cost, cell_target, example_rows)
        cells[(r, c)] = cell
    if view.ratio_to:
        _ratios(view, rows, columns, cells)
    unit = "%" if _scale_factor(view) == 100.0 and view.figure in ACCURACY_FIGURES else ""
    return Table(recipe.name, recipe.paper, view, scale, synthetic, rows, columns, cells, unit)


def _ratios(view: TableView, rows: list[str], columns: list[str], cells: dict[tuple[str, str], Cell]) -> None:
    """Each cell ÷ the reference cell in the same column (ratio_to names a row) or row (a column)."""
    for (r, c), cell in cells.items():
        ref = cells.get((view.ratio_to, c)) if view.ratio_to in rows else cells.get((r, view.ratio_to))
        if ref is None:
            continue
        if cell.mean is not None and ref.mean:
            cell.ratio = cell.mean / ref.mean
        if isinstance(cell.published, (int, float)) and isinstance(ref.published, (int, float)) and ref.published:
            cell.published_ratio = float(cell.published) / float(ref.published)


def _summarise(cell: Cell, view: TableView, seed_curves: list[list[tuple[int, float]]], cost: float | None = None,
               target: float | None = None, example_rows: list | None = None) -> None:
    if not cell.n:
        return
    cell.not_reached = sum(v is None for v in cell.values)
    if view.summary == "mean_curve":
        # The figure of the seed-averaged curve (FedTrip/FedTR rounds-to-target convention).
        common = set.intersection(*(set(r for r, _ in c) for c in seed_curves)) if seed_curves else set()
        mean_curve = [(r, float(np.mean([dict(c)[r] for c in seed_curves]))) for r in sorted(common)]
        # bytes per round do not depend on the seed, so any seed's rows serve the mean curve
        cell.mean = figure_of(view, mean_curve, example_rows, cost=cost, target=target)
        cell.std = None
        return
    reached = [v for v in cell.values if v is not None]
    if reached:
        cell.mean = float(np.mean(reached))
        cell.std = float(np.std(reached)) if len(reached) > 1 else None   # population std, as np.std
