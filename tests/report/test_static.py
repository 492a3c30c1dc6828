"""Analytic tables that need no runs (``fedbench/report/static.py``): FedTrip's model statistics (Table III) and
per-round method overheads (Table VIII) from the models' counted costs, and the per-client class counts of a
partition (FedTR Fig. 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedbench.errors import RecipeError
from fedbench.recipes.load import load_recipe
from fedbench.report.static import MODEL_COLUMNS, OVERHEAD_COLUMNS, PARTITION_COLUMNS, build_static_table

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
MNIST_CNN = 61_706  # FedTrip spec §2.6: the CNN's parameters on MNIST
STEPS = 600 // 50  # K: local iterations of one epoch of 600 samples in batches of 50


def test_model_statistics_are_the_models_counted_costs():
    recipe = load_recipe(RECIPES / "fedtrip_costs.toml")
    table = build_static_table(recipe, recipe.table("models"))
    assert (table.rows, table.columns) == (["MLP", "CNN", "AlexNet"], list(MODEL_COLUMNS))
    mlp = {column: table.cells[("MLP", column)] for column in MODEL_COLUMNS}
    # FedTrip spec §2.6: 79,510 parameters, 79,400 forward MACs per sample; communication = fp32 parameters in MiB
    assert mlp["Params (M)"].mean == pytest.approx(79_510 / 1e6)
    assert mlp["Communication (MB)"].mean == pytest.approx(79_510 * 4 / 2**20)
    assert mlp["MFLOPs"].mean == pytest.approx(79_400 / 1e6)
    assert table.cells[("AlexNet", "Params (M)")].mean == pytest.approx(2_729_290 / 1e6)
    assert all(cell.static and cell.n == 1 for cell in table.cells.values())
    assert mlp["Params (M)"].published == 0.8  # the paper's (10× too large) value, shown beside ours


def test_overheads_follow_table_viii_formulas():
    recipe = load_recipe(RECIPES / "fedtrip_costs.toml")
    table = build_static_table(recipe, recipe.table("overheads"))
    assert table.columns == list(OVERHEAD_COLUMNS)
    flops = {row: table.cells[(row, OVERHEAD_COLUMNS[0])].mean for row in table.rows}
    bytes_ = {row: table.cells[(row, OVERHEAD_COLUMNS[1])].mean for row in table.rows}
    assert flops["FedProx"] == pytest.approx(2 * STEPS * MNIST_CNN / 1e6)  # 2K|w|
    assert flops["FedDyn"] == pytest.approx(4 * STEPS * MNIST_CNN / 1e6)  # 4K|w|
    assert flops["SCAFFOLD"] == pytest.approx(2 * (STEPS + 1) * MNIST_CNN / 1e6)  # 2(K+1)|w|, option II
    assert bytes_["SCAFFOLD"] == pytest.approx(2 * MNIST_CNN * 4 / 2**20)  # control variates up and down
    assert bytes_["FedProx"] == bytes_["FedTrip"] == bytes_["MOON"] == 0.0


def test_a_partition_table_counts_clients_samples_and_classes(tmp_path):
    recipe = load_recipe(RECIPES / "fedtr_table1.toml")
    view = recipe.table("partition")
    table = build_static_table(recipe, view, "smoke", synthetic=True)
    assert table.columns == list(PARTITION_COLUMNS) and table.rows
    for row in table.rows:
        values = {column: table.cells[(row, column)].mean for column in PARTITION_COLUMNS}
        assert values["min per client"] <= values["samples"] / values["clients"] <= values["max per client"]
        assert 1 <= values["classes per client"]
    assert table.notes[0].startswith("SYNTHETIC DATA")
    assert table.notes[1].startswith("computed from the partition alone")


def test_a_partition_view_needs_rows_that_fix_the_partition():
    from fedbench.report.static import partition_panels

    recipe = load_recipe(RECIPES / "fedtr_table1.toml")
    by_method = recipe.table("partition").model_copy(update={"rows": ["algorithm"]})  # six data sets per row
    with pytest.raises(RecipeError, match="different partitions"):
        partition_panels(recipe, by_method, "smoke", synthetic=True)
