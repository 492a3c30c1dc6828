"""Analytic tables that need no runs: model statistics (FedTrip Table III) and per-round method
overheads in a given setting (FedTrip Table VIII), computed from the models' measured costs and the
methods' declared attaching operations."""

from __future__ import annotations

from fedbench.recipe import Recipe, TableView
from fedbench.report.cells import Cell, Table

MODEL_COLUMNS = ("Communication (MB)", "Params (M)", "MFLOPs")
OVERHEAD_COLUMNS = ("Computation overhead (MFLOPs/round)", "Communication overhead (MB/round)")


def _card(row, setting=None):
    from fedbench.cost import model_card
    from fedbench.data import dataset_meta

    model = row.model or (setting or {}).get("model")
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
    from fedbench.algorithms import build_algorithm
    from fedbench.cost import local_steps_per_round

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


def build_static_table(recipe: Recipe, view: TableView) -> Table:
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
