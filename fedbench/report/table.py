"""Build a paper table from the registry: a recipe's table view, cell by cell.

A cell gathers the runs of every seed whose labels match the cell, computes the view's figure from
each stored curve (or from the seed-mean curve when ``summary = "mean_curve"``) and puts the paper's
published value beside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from fedbench.recipes.expand import PlannedRun, added_axes, expand
from fedbench.recipes.schema import ADDED_LABEL, Recipe
from fedbench.recipes.views import TableView
from fedbench.registry import Registry
from fedbench.report.cells import Cell, Table
from fedbench.report.claims import evaluate_claims, rank_agreement
from fedbench.report.figure_values import figure_value
from fedbench.report.stats import bootstrap_figures, compare_with_baseline, judges_figures, verdict
from fedbench.spec import RunSpec
from fedbench.vocab.figures import FIGURES
from fedbench.vocab.metrics import (
    display_factor,
    display_unit,
    metric_curve,
    metric_fields,
)
from fedbench.vocab.provenance import peak_memory
from fedbench.vocab.status import FINISHED, RunStatus

__all__ = ["Cell", "Table", "build_table", "cell_of", "figure_of", "planned_for_view"]


def _key(labels: dict[str, str], keys: list[str]) -> str:
    return " / ".join(labels[k] for k in keys)


def cell_of(view: TableView, labels: dict[str, str]) -> tuple[str, str]:
    """The (row, column) of ``view``'s table that a run with ``labels`` is counted in."""
    return _key(labels, view.rows), _key(labels, view.columns)


def _scale_factor(view: TableView) -> float:
    return display_factor(view.metric, view.percent)


def cost_per_round_flops(spec: RunSpec, client_sizes: list[int] | None) -> float:
    """Forward FLOPs (MACs, thop-style, as FedTrip counts them) of one participating client in one round plus the
    method's attaching operations: n_k·E·FP + A_method (FedTrip §4, Table V), for the mean client size of the run
    (its recorded client sizes, else the partition's samples_per_client)."""
    # local: a cost figure builds the model and the method (torch); keeps torch out of the other tables' report
    from fedbench.algorithms import build_algorithm
    from fedbench.cost import client_round_work, model_card
    from fedbench.data import dataset_meta

    meta = dataset_meta(spec.dataset)
    card = model_card(spec.model, num_classes=meta.num_classes, input_shape=list(meta.input_shape), **spec.model_params)
    samples = (
        float(np.mean(client_sizes)) if client_sizes else float(spec.partition_params.get("samples_per_client", 0))
    )
    algorithm = build_algorithm(spec.algorithm, spec.algorithm_params)
    return client_round_work(spec, samples, card, algorithm, unit="macs")


# The view's figure of one run: one function per figure of the catalogue (report/figure_values.py).
figure_of = figure_value


def round_fields(view: TableView) -> list[str]:
    """The rounds fields the view's cells read: its metrics' and its figure's."""
    fields = [f for _, metric in view.view_metrics() for f in metric_fields(metric)]
    return list(dict.fromkeys([*fields, *FIGURES[view.figure].fields]))


def _with_clients(view: TableView, planned: list[PlannedRun]) -> list[PlannedRun]:
    """Expand the "client" pseudo-axis: one entry per named client and one for "Avg." (client None)."""
    if "client" not in view.rows + view.columns:
        return planned
    out = []
    for p in planned:
        for index, name in [*enumerate(view.clients), (None, "Avg.")]:
            out.append(replace(p, labels={**p.labels, "client": name}, extra={**p.extra, "client_index": index}))
    return out


def _with_metrics(view: TableView, planned: list[PlannedRun]) -> list[PlannedRun]:
    """Expand the "metric" pseudo-axis: one entry per label of ``view.metrics``, each reading its own metric."""
    if "metric" not in view.rows + view.columns:
        return planned
    return [
        replace(p, labels={**p.labels, "metric": label}, extra={**p.extra, "metric": metric})
        for p in planned
        for label, metric in view.metrics.items()
    ]


def _expanded(view: TableView, planned: list[PlannedRun]) -> list[PlannedRun]:
    """The view's entries: the runs with the pseudo-axes ("client", "round", "metric") expanded."""
    return _with_metrics(view, _with_rounds(view, _with_clients(view, planned)))


def _with_rounds(view: TableView, planned: list[PlannedRun]) -> list[PlannedRun]:
    """Expand the "round" pseudo-axis of value_at_round tables: one entry per round of ``at_rounds``."""
    if "round" not in view.rows + view.columns:
        return planned
    return [
        replace(p, labels={**p.labels, "round": str(r)}, extra={**p.extra, "at_round": r})
        for p in planned
        for r in view.at_rounds
    ]


def planned_for_view(
    recipe: Recipe,
    view: TableView,
    scale: str = "full",
    synthetic: bool = False,
    cache: dict | None = None,
    seeds: list[int] | None = None,
    only: Mapping[str, str | set[str]] | None = None,
) -> list[PlannedRun]:
    """The recipe's runs a view shows: those whose labels match its ``where`` (without pseudo-axes), of ``seeds``
    (None: the recipe's) and matching ``only`` (``report --seeds``/``--only``, as for ``run``). ``cache`` keeps a
    recipe's expansion for its other views (``build_tables``)."""
    # the selection is part of the key: a view's baseline can widen it (``with_baseline``)
    selection = tuple(sorted((k, tuple(sorted({v} if isinstance(v, str) else v))) for k, v in (only or {}).items()))
    key = (id(recipe), scale, synthetic, selection, tuple(seeds) if seeds is not None else None)
    planned = cache.get(key) if cache is not None else None
    if planned is None:
        planned = expand(recipe, scale=scale, synthetic=synthetic, check=False, seeds=seeds, only=only)
        if cache is not None:
            cache[key] = planned
    return [p for p in planned if view.selects(p.labels)]


def _curves(registry: Any, ids: list[int], fields: Iterable[str], cache: dict | None) -> dict[int, list[Any]]:
    """The runs' stored rounds (``Registry.curves``); with ``cache`` (one report's) a run read for an earlier view
    with the same fields is not read again (FedImpro's figure views show Table 1's runs again)."""
    if cache is None:
        return registry.curves(ids, fields)
    read = cache.setdefault(("curves", tuple(fields)), {})
    missing = [i for i in ids if i not in read]
    if missing:
        read.update(registry.curves(missing, tuple(fields)))
    return {i: read[i] for i in ids}


def _run_states(registry: Any, hashes: list[str], cache: dict | None) -> dict[str, Any]:
    """{spec_hash: run state} of the runs of ``hashes`` in the registry (``Registry.run_states``); with ``cache``
    (one report's) a hash looked up for an earlier view is not looked up again (a recipe's views share its runs)."""
    if cache is None:
        return {row.spec_hash: row for row in registry.run_states(hashes)}
    read = cache.setdefault("run_states", {})
    missing = [h for h in hashes if h not in read]
    if missing:
        read.update(dict.fromkeys(missing))  # None: not in the registry
        read.update({row.spec_hash: row for row in registry.run_states(missing)})
    return {h: row for h in hashes if (row := read[h]) is not None}


def _metric_curve(rows: list[Any], metric: str, client: int | None, memo: tuple[int, dict | None]) -> list:
    """``metric_curve`` of a run's rounds, computed once per report (``memo``: the run id and the report's cache)
    for every view that shows the run; callers treat it as read-only."""
    run_id, cache = memo
    if cache is None:
        return metric_curve(rows, metric, client)
    key = ("metric_curve", run_id, metric, client)
    if key not in cache:
        cache[key] = metric_curve(rows, metric, client)
    return cache[key]


def build_table(
    recipe: Recipe,
    view: TableView,
    registry: Registry,
    scale: str = "full",
    synthetic: bool = False,
    cache: dict | None = None,
    seeds: list[int] | None = None,
    only: Mapping[str, str | set[str]] | None = None,
) -> Table:
    """The view's table: one query for the runs of its cells, one for their curves (``cache``, ``seeds``, ``only``:
    see ``planned_for_view``)."""
    if view.kind != "runs":
        # local: analytic tables build models and partitions (torch); keeps torch out of the run tables' report
        from fedbench.report.static import build_static_table

        return build_static_table(recipe, view, scale, synthetic)
    only = with_baseline(recipe, view, scale, synthetic, seeds, only)
    planned = _expanded(view, planned_for_view(recipe, view, scale, synthetic, cache, seeds, only))
    other = (
        _expanded(view, planned_for_view(recipe, view, scale, not synthetic, cache, seeds, only))
        if not synthetic
        else []
    )
    found = _run_states(registry, list(dict.fromkeys(p.spec_hash for p in planned + other)), cache)
    finished = [found[p.spec_hash] for p in planned if p.spec_hash in found and found[p.spec_hash].status in FINISHED]
    curves = _curves(registry, [row.id for row in finished], round_fields(view), cache)

    rows, columns = [], []
    groups: dict[tuple[str, str], list[PlannedRun]] = {}
    for p in planned:
        r, c = _key(p.labels, view.rows), _key(p.labels, view.columns)
        if r not in rows:
            rows.append(r)
        if c not in columns:
            columns.append(c)
        groups.setdefault((r, c), []).append(p)

    synthetic_done: dict[tuple[str, str], int] = {}  # the done runs of the other data kind, per cell
    for p in other:
        if p.spec_hash in found and found[p.spec_hash].status == RunStatus.DONE:
            pair = (_key(p.labels, view.rows), _key(p.labels, view.columns))
            synthetic_done[pair] = synthetic_done.get(pair, 0) + 1

    cells: dict[tuple[str, str], Cell] = {}
    memory_measures: dict[str, int] = {}
    for (r, c), members in groups.items():
        cell_cost, example_rows = None, None
        cell_target = view.target_by.get(r, view.target_by.get(c, view.target))
        cell = Cell(
            row=r,
            column=c,
            labels={k: members[0].labels[k] for k in view.rows + view.columns},
            expected=len(members),
            added=ADDED_LABEL in members[0].labels,
        )
        if FIGURES[view.figure].needs_target:
            cell.target = cell_target
            # a to-target figure of a row or column the view gives no target (an added case of FedTrip Table IV)
            cell.no_target = cell_target is None
        if not cell.added:  # the paper published nothing for a value added on the command line
            cell.take_published(view)
        seed_curves = []
        update: dict[str, Any] = {
            key: members[0].extra[key] for key in ("at_round", "metric") if key in members[0].extra
        }
        cell_view = view.model_copy(update=update) if update else view
        for p in members:
            run = found.get(p.spec_hash)
            if run is None or run.status not in FINISHED:
                continue
            round_rows = curves[run.id]
            client = p.extra.get("client_index")
            curve = _metric_curve(round_rows, cell_view.metric, client, (run.id, cache))
            cell.n += 1
            cell.diverged += run.status == RunStatus.DIVERGED
            cell.rounds_limit = p.spec.rounds
            cell.seeds.append(p.spec.seed)
            cell.run_ids.append(run.id)
            cell.runs.append(run)
            cost = None
            if view.figure == "gflops_to_target":
                cost = cost_per_round_flops(p.spec, (run.provenance or {}).get("data", {}).get("client_sizes"))
                cell_cost = cost
            if view.figure == "peak_memory_mb":
                measure = peak_memory(run.provenance)[1]
                memory_measures[measure] = memory_measures.get(measure, 0) + 1
            cell.values.append(figure_of(cell_view, curve, round_rows, cost, cell_target, run))
            seed_curves.append(curve)
            example_rows = round_rows
        cell.synthetic_available += synthetic_done.get((r, c), 0)
        judged = judges_figures(cell, synthetic=synthetic, scale=scale)
        _summarise(cell, cell_view, seed_curves, cell_cost, cell_target, example_rows, bootstrap=judged)
        if cell.no_target:
            cell.not_reached = 0  # nothing to reach: no seed "never reached" it
        cells[(r, c)] = cell
    if view.published_only:
        columns = columns or ([] if view.columns else [""])  # a single-column view whose runs were all filtered out
        rows = _with_published_only(view, rows, columns, cells)
    if view.ratio_to:
        _ratios(view, rows, columns, cells)
    baseline = baseline_label(view, planned)
    if baseline is not None:
        compare_with_baseline(view, cells, view.baseline_axis, baseline)
    for cell in cells.values():
        cell.verdict = verdict(cell, view, synthetic=synthetic, scale=scale, trials=recipe.trials)
    units = {display_unit(metric, view.percent) for _, metric in view.view_metrics()}
    unit = FIGURES[view.figure].unit
    if unit is None:  # a value of the metric: in its displayed unit, where all the view's metrics share one
        unit = units.pop() if len(units) == 1 else ""
    added_rows, added_columns = _added_keys(planned, view.rows), _added_keys(planned, view.columns)
    added = ([r for r in rows if r in added_rows], [c for c in columns if c in added_columns])
    notes = []
    if memory_measures:
        measured = ", ".join(f"{measure} ({n} runs)" for measure, n in sorted(memory_measures.items()))
        notes.append(f"peak memory measured as: {measured}.")
    datasets = dict.fromkeys(p.spec.dataset for p in planned)
    tasks = tuple(dict.fromkeys(_task(name) for name in datasets)) or ("classification",)
    table = Table(
        recipe.name,
        recipe.paper,
        view,
        scale,
        synthetic,
        rows,
        columns,
        cells,
        unit,
        notes,
        baseline,
        *added,
        tasks,
        recipe.trials,
    )
    table.claims, table.rank_agreement = evaluate_claims(table), rank_agreement(table)
    return table


def _task(dataset: str) -> str:
    """The task of a data set ("classification", "segmentation"): what its metrics are called in the table."""
    from fedbench.data import DATASETS  # local: the data registry (torch-free), as resolving a spec imports it

    meta = DATASETS.info(dataset).get("meta") if dataset in DATASETS else None
    return getattr(meta, "task", "classification")


def _added_keys(planned: list[PlannedRun], keys: list[str]) -> set[str]:
    """The rows (``keys``: the view's rows) or columns of values ``--add`` appended: those of the runs whose added
    axes are among ``keys``. A row of the recipe's values is not one, even where every cell shown is added (``--only``
    on an added column)."""
    return {_key(p.labels, keys) for p in planned if set(added_axes(p.labels)) & set(keys)}


def with_baseline(
    recipe: Recipe,
    view: TableView,
    scale: str,
    synthetic: bool,
    seeds: list[int] | None,
    only: Mapping[str, str | set[str]] | None,
) -> Mapping[str, str | set[str]] | None:
    """``only`` (``report --only``) widened to keep the cells of the view's baseline: a selection on the baseline
    axis (``--only algorithm=fedprox``, or an added value alone) still shows the baseline's cells, so the cells it
    keeps are tested against them as in the whole table."""
    axis = view.baseline_axis
    if not only or axis not in only:
        return only
    # the whole view's runs (not the report's cache, which keeps the expansion of the selection)
    baseline = baseline_label(view, planned_for_view(recipe, view, scale, synthetic, None, seeds, None))
    if baseline is None:
        return only
    wanted = only[axis]
    return {**only, axis: ({wanted} if isinstance(wanted, str) else set(wanted)) | {baseline}}


def baseline_label(view: TableView, planned: list[PlannedRun]) -> str | None:
    """The label of ``view.baseline_axis`` the view's cells are compared with: ``view.baseline``, or (unset) the
    label spelled "FedAvg" (any case), else the one label of that axis whose runs all train FedAvg; None without a
    baseline axis among the view's keys or without such a label."""
    axis = view.baseline_axis
    if view.baseline == "none" or axis not in view.rows + view.columns:
        return None
    if view.baseline is not None:
        return view.baseline
    algorithms: dict[str, set[str]] = {}
    for p in planned:
        # the baseline is one of the recipe's own values (of a cell whose other axes may hold added ones)
        if axis in p.labels and axis not in added_axes(p.labels):
            algorithms.setdefault(p.labels[axis], set()).add(p.spec.algorithm)
    named = [label for label in algorithms if label.lower() == "fedavg"]
    fedavg = named or [label for label, names in algorithms.items() if names == {"fedavg"}]
    return fedavg[0] if len(fedavg) == 1 else None


def _with_published_only(
    view: TableView, rows: list[str], columns: list[str], cells: dict[tuple[str, str], Cell]
) -> list[str]:
    """Add the rows the paper quotes from other papers (published value, no run) and order all rows as
    ``published`` lists them (rows without a published value last, in run order)."""
    for r in view.published_only:
        for c in columns:
            cell = Cell(row=r, column=c, labels={}, expected=0, published_only=True)
            cell.published = view.published_value(r, c)
            cells[(r, c)] = cell
    order = {r: i for i, r in enumerate(view.published)}
    return sorted(rows + list(view.published_only), key=lambda r: order.get(r, len(order)))


def _ratios(view: TableView, rows: list[str], columns: list[str], cells: dict[tuple[str, str], Cell]) -> None:
    """Each cell ÷ the reference cell in the same column (ratio_to names a row) or row (a column)."""
    assert view.ratio_to is not None  # called only for a view with ratio_to
    for (r, c), cell in cells.items():
        ref = cells.get((view.ratio_to, c)) if view.ratio_to in rows else cells.get((r, view.ratio_to))
        if ref is None:
            continue
        if cell.mean is not None and ref.mean:
            cell.ratio = cell.mean / ref.mean
        if isinstance(cell.published, (int, float)) and isinstance(ref.published, (int, float)) and ref.published:
            cell.published_ratio = float(cell.published) / float(ref.published)
        if not cell.added:
            cell.printed_ratio = view.printed_ratio(r, c)


def _summarise(
    cell: Cell,
    view: TableView,
    seed_curves: list[list[tuple[int, float]]],
    cost: float | None = None,
    target: float | None = None,
    example_rows: list | None = None,
    bootstrap: bool = False,
) -> None:
    """The cell's mean and std over its seeds, or the figure of their mean curve (``summary = "mean_curve"``), with
    that figure's bootstrap over seeds where ``bootstrap`` (the cell gets a reproduction verdict)."""
    if not cell.n:
        return
    cell.not_reached = sum(v is None for v in cell.values)
    if view.summary == "mean_curve":
        # The figure of the seed-averaged curve (FedTrip/FedTR rounds-to-target convention).
        common = set.intersection(*(set(r for r, _ in c) for c in seed_curves)) if seed_curves else set()
        by_round = [dict(c) for c in seed_curves]
        rounds = sorted(common)
        means = np.array([[d[r] for r in rounds] for d in by_round], dtype=np.float64).mean(0) if rounds else []
        mean_curve = [(r, float(m)) for r, m in zip(rounds, means)]
        # bytes per round do not depend on the seed, so any seed's rows serve the mean curve
        cell.mean = figure_of(view, mean_curve, example_rows, cost=cost, target=target)
        cell.std = None
        if bootstrap and len(seed_curves) > 1 and rounds:
            cell.bootstrap = bootstrap_figures(
                seed_curves, lambda curve: figure_of(view, curve, example_rows, cost=cost, target=target)
            )
        return
    reached = [v for v in cell.values if v is not None]
    if reached:
        cell.mean = float(np.mean(reached))
        cell.std = float(np.std(reached)) if len(reached) > 1 else None  # population std, as np.std
