"""Build a paper table from the registry: a recipe's table view, cell by cell.

A cell gathers the runs of every seed whose labels match the cell, computes the view's figure from
each stored curve (or from the seed-mean curve when ``summary = "mean_curve"``) and puts the paper's
published value beside it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fedbench import metrics
from fedbench.recipe import PlannedRun, Recipe, TableView, expand
from fedbench.registry import Registry

ACCURACY_METRICS = ("test_acc", "personal_mean", "personal_weighted_mean")
ACCURACY_FIGURES = ("best", "final", "last_k_mean")


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


def figure_of(view: TableView, curve: list[tuple[int, float]], rows: list | None = None) -> float | None:
    factor = _scale_factor(view)
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
        return metrics.rounds_to_target(scaled, view.target)
    if view.figure == "total_bytes_to_target":
        reached = metrics.rounds_to_target(scaled, view.target)
        if reached is None or rows is None:
            return None
        return float(sum((r.bytes_up or 0) + (r.bytes_down or 0) for r in rows if r.round <= reached))
    if view.figure == "wall_seconds":
        return float(sum(r.wall_seconds or 0 for r in rows)) if rows else None
    raise ValueError(view.figure)


def build_table(recipe: Recipe, view: TableView, registry: Registry, scale: str = "full",
                synthetic: bool = False) -> Table:
    planned = expand(recipe, scale=scale, synthetic=synthetic, check=False)
    other = expand(recipe, scale=scale, synthetic=not synthetic, check=False) if not synthetic else []
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
        cell = Cell(row=r, column=c, labels={k: members[0].labels[k] for k in view.rows + view.columns},
                    expected=len(members))
        cell.published = view.published_value(r, c)
        cell.published_std = view.published_value(r, c, std=True)
        seed_curves = []
        for p in members:
            run = found.get(p.spec_hash)
            if run is None or run.status not in ("done", "diverged"):
                continue
            round_rows = curves[run.id]
            curve = [(x.round, getattr(x, view.metric)) for x in round_rows if getattr(x, view.metric) is not None]
            cell.n += 1
            cell.diverged += run.status == "diverged"
            cell.rounds_limit = p.spec.rounds
            cell.seeds.append(p.spec.seed)
            cell.values.append(figure_of(view, curve, round_rows))
            seed_curves.append(curve)
        for p in other:
            if _key(p.labels, view.rows) == r and _key(p.labels, view.columns) == c and p.spec_hash in found \
                    and found[p.spec_hash].status == "done":
                cell.synthetic_available += 1
        _summarise(cell, view, seed_curves)
        cells[(r, c)] = cell
    unit = "%" if _scale_factor(view) == 100.0 and view.figure in ACCURACY_FIGURES else ""
    return Table(recipe.name, recipe.paper, view, scale, synthetic, rows, columns, cells, unit)


def _summarise(cell: Cell, view: TableView, seed_curves: list[list[tuple[int, float]]]) -> None:
    if not cell.n:
        return
    cell.not_reached = sum(v is None for v in cell.values)
    if view.summary == "mean_curve":
        # The figure of the seed-averaged curve (FedTrip/FedTR rounds-to-target convention).
        common = set.intersection(*(set(r for r, _ in c) for c in seed_curves)) if seed_curves else set()
        mean_curve = [(r, float(np.mean([dict(c)[r] for c in seed_curves]))) for r in sorted(common)]
        cell.mean = figure_of(view, mean_curve)
        cell.std = None
        return
    reached = [v for v in cell.values if v is not None]
    if reached:
        cell.mean = float(np.mean(reached))
        cell.std = float(np.std(reached)) if len(reached) > 1 else None   # population std, as np.std
