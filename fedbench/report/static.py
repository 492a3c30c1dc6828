"""Analytic tables that need no runs: model statistics (FedTrip Table III) and per-round method
overheads in a given setting (FedTrip Table VIII), computed from the models' measured costs and the
methods' declared attaching operations; and the per-client class counts of a recipe's partitions (FedTR
Fig. 2), computed from the data set and the partition its runs train on."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedbench.algorithms import build_algorithm
from fedbench.cost import local_steps_per_round, model_card
from fedbench.data import dataset_meta
from fedbench.data.federated import ArraysCache, partition_clients
from fedbench.errors import DataError, RecipeError
from fedbench.recipes.expand import PlannedRun, expand
from fedbench.recipes.schema import Recipe
from fedbench.recipes.views import TableView
from fedbench.report.cells import Cell, Table

MODEL_COLUMNS = ("Communication (MB)", "Params (M)", "MFLOPs")
OVERHEAD_COLUMNS = ("Computation overhead (MFLOPs/round)", "Communication overhead (MB/round)")
PARTITION_COLUMNS = ("clients", "samples", "min per client", "max per client", "classes per client")
# The spec fields a partition depends on (fedbench.data.federated.partition_clients and the data set it loads).
PARTITION_FIELDS = ("dataset", "dataset_params", "synthetic", "partition", "partition_params", "num_clients", "seed")


def _card(row, setting=None):
    model = row.model or (setting or {}).get("model")
    assert model is not None, "an analytic row names its model or its setting does"
    dataset = row.dataset or (setting or {}).get("dataset")
    overrides = dict(row.model_params)
    if dataset:
        meta = dataset_meta(dataset)
        overrides.update(num_classes=meta.num_classes, input_shape=list(meta.input_shape))
    return model_card(model, **overrides)


def _model_values(row) -> dict[str, float]:
    card = _card(row)
    # FedTrip counts communication as fp32 parameters in MiB, and "MFLOPs" as forward MACs (thop).
    return {
        "Communication (MB)": card["update_bytes"] / 2**20,
        "Params (M)": card["params"] / 1e6,
        "MFLOPs": card["macs_forward"] / 1e6,
    }


def _overhead_values(row, setting: dict) -> dict[str, float]:
    card = _card(row, setting)
    samples = int(setting.get("samples_per_client", 600))
    batch = int(setting.get("batch_size", 50))
    steps = local_steps_per_round(samples, batch, local_epochs=int(setting.get("local_epochs", 1)))
    forward = card["macs_forward"]
    algorithm = build_algorithm(row.algorithm, row.algorithm_params)
    flops = algorithm.attach_flops_per_round(
        steps=steps,
        samples=samples,
        batch_size=batch,
        num_params=card["params"],
        forward_flops=forward,
        backward_flops=card["flops_train"] / 2 - forward,
    )
    floats = algorithm.extra_upload_floats(card["params"]) + algorithm.extra_download_floats(card["params"])
    return {OVERHEAD_COLUMNS[0]: flops / 1e6, OVERHEAD_COLUMNS[1]: floats * 4 / 2**20}


@dataclass
class PartitionPanel:
    """One row of a partition view: the per-client class counts of its runs' partition (None where the data set
    is not available, ``missing`` says why)."""

    run: PlannedRun
    counts: np.ndarray | None  # (clients, classes)
    missing: str = ""


def partition_panels(
    recipe: Recipe, view: TableView, scale: str = "full", synthetic: bool = False
) -> dict[str, PartitionPanel]:
    """{row label: panel} of a partition view: for each row, the partition its first seed's runs train on, drawn
    as the engine draws it (``partition_clients``: the data set or its synthetic stand-in, the run seed's
    ``partition`` stream), counted per client and class. Every run of a row (at that seed) must share it."""
    planned = [
        p
        for p in expand(recipe, scale=scale, synthetic=synthetic, check=False, untrained=True)
        if view.selects(p.labels)
    ]
    firsts: dict[str, PlannedRun] = {}
    for p in planned:
        row = " / ".join(p.labels[k] for k in view.rows)
        first = firsts.setdefault(row, p)
        if p.spec.seed == first.spec.seed and _partition_key(p) != _partition_key(first):
            raise RecipeError(
                f"{recipe.source}: tables '{view.name}': the runs of row {row!r} train on different partitions "
                f"({first.labels} and {p.labels}); choose rows (or a `where`) that fix data set and partition"
            )
    cache = ArraysCache()
    panels = {}
    for row, p in firsts.items():
        try:
            arrays = cache.load(p.spec)
        except DataError as exc:  # the table says so; runs of a missing data set cannot exist either
            panels[row] = PartitionPanel(p, None, str(exc))
            continue
        if arrays.meta.task != "classification":
            raise RecipeError(f"{recipe.source}: tables '{view.name}': {p.spec.dataset!r} has no class labels to count")
        parts = partition_clients(p.spec, arrays)
        classes = arrays.meta.num_classes
        panels[row] = PartitionPanel(p, np.stack([np.bincount(arrays.train_y[i], minlength=classes) for i in parts]))
    return panels


def _partition_key(run: PlannedRun) -> tuple:
    return tuple(repr(getattr(run.spec, name)) for name in PARTITION_FIELDS)


def _partition_values(counts: np.ndarray) -> dict[str, float]:
    per_client = counts.sum(1)
    return dict(
        zip(
            PARTITION_COLUMNS,
            (
                len(counts),
                float(per_client.sum()),
                float(per_client.min()),
                float(per_client.max()),
                float((counts > 0).sum(1).mean()),
            ),
        )
    )


def _build_partition_table(recipe: Recipe, view: TableView, scale: str, synthetic: bool) -> Table:
    panels = partition_panels(recipe, view, scale, synthetic)
    cells, notes = {}, []
    for row, panel in panels.items():
        values = _partition_values(panel.counts) if panel.counts is not None else {}
        for column in PARTITION_COLUMNS:
            value = values.get(column)
            cells[(row, column)] = Cell(
                row=row,
                column=column,
                labels={"row": row},
                expected=1,
                n=int(value is not None),
                mean=value,
                values=[value],
                static=True,
            )
        if panel.missing:
            notes.append(f"{row}: {panel.missing}")
    seeds = sorted({panel.run.spec.seed for panel in panels.values()})
    notes.insert(
        0,
        f"computed from the partition alone (the run seed's partition stream, seed {', '.join(map(str, seeds))}), "
        "no training; --plots draws client × class with marker area ∝ samples.",
    )
    if synthetic:
        notes.insert(0, "SYNTHETIC DATA: the partition of the generated stand-in data, not of the paper's data sets.")
    return Table(
        recipe.name, recipe.paper, view, scale, synthetic, list(panels), list(PARTITION_COLUMNS), cells, "", notes
    )


def build_static_table(recipe: Recipe, view: TableView, scale: str = "full", synthetic: bool = False) -> Table:
    if view.kind == "partition":
        return _build_partition_table(recipe, view, scale, synthetic)
    columns = list(MODEL_COLUMNS if view.kind == "models" else OVERHEAD_COLUMNS)
    cells = {}
    for row in view.static_rows:
        values = _model_values(row) if view.kind == "models" else _overhead_values(row, view.setting)
        for column in columns:
            cell = Cell(
                row=row.label,
                column=column,
                labels={"row": row.label},
                expected=1,
                n=1,
                mean=values[column],
                values=[values[column]],
                static=True,
            )
            cell.take_published(view)
            cells[(row.label, column)] = cell
    return Table(
        recipe.name, recipe.paper, view, "full", False, [r.label for r in view.static_rows], columns, cells, ""
    )
