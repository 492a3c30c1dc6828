"""FedTR's tables and figures: its recipes compile at every scale and carry the spec's setting
(shared/papers/fedtr.md), and Fig. 2's partition view counts the partition the runs train on."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.recipes.resolve import non_default

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


@pytest.mark.parametrize("name", ["fedtr_table1.toml", "fedtr_table2.toml"])
def test_recipes_compile_at_every_scale(name):
    recipe = load_recipe(RECIPES / name)
    for scale in recipe.scale_names():
        assert expand(recipe, scale=scale)


def test_table1_recipe_matches_the_paper_setting():
    runs = expand(load_recipe(RECIPES / "fedtr_table1.toml"))
    assert len(runs) == 7 * 6 * 5
    by = {(r.labels["algorithm"], r.labels["dataset"]): r.spec for r in runs if r.spec.seed == 0}
    assert all(s.num_clients == 20 and s.clients_per_round == 20 and s.rounds == 200 for s in by.values())
    assert all(s.partition_params["alpha"] == 0.1 for s in by.values())
    assert (
        non_default("algorithm", by[("fedprox", "CIFAR10")].algorithm, by[("fedprox", "CIFAR10")].algorithm_params)
        == {}
        and by[("fedprox", "CIFAR10")].algorithm_params["mu"] == 0.01
    )  # FedProx's default μ
    assert by[("fedtr", "OrganS.")].model == "lenet5"
    runs2 = expand(load_recipe(RECIPES / "fedtr_table2.toml"))
    assert {r.spec.partition_params["alpha"] for r in runs2} == {0.5}


def test_fig2_partition_view_counts_the_partition_the_runs_train_on():
    """Fig. 2 comes from the partition alone: each data set's per-client class counts are those of the partition its
    seed-0 runs train on (the engine's own data preparation), and the scatter draws exactly those counts."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from fedbench.data.federated import prepare_data
    from fedbench.data.partition import make_partition
    from fedbench.data.synthetic import synthetic_dataset
    from fedbench.report.plots import draw_partition
    from fedbench.report.static import partition_panels
    from fedbench.seeding import numpy_rng

    recipe = load_recipe(RECIPES / "fedtr_table1.toml")
    panels = partition_panels(recipe, recipe.table("partition"), "smoke", synthetic=True)
    assert list(panels) == ["CIFAR10", "PAMAP2", "COVID-19", "OrganA.", "OrganC.", "OrganS."]
    for row, panel in panels.items():
        spec = panel.run.spec
        assert (spec.seed, spec.synthetic, spec.num_clients, panel.run.labels["dataset"]) == (0, True, 20, row)
        arrays = synthetic_dataset(spec.dataset, image_size=spec.dataset_params.get("image_size"))
        parts = make_partition(
            "dirichlet", arrays.train_y, None, 20, numpy_rng(0, "partition"), {"alpha": 0.1, "min_size": 2}
        )
        classes = arrays.meta.num_classes
        expected = [[int(np.sum(arrays.train_y[part] == k)) for k in range(classes)] for part in parts]
        assert panel.counts.tolist() == expected

    cifar = panels["CIFAR10"]
    data = prepare_data(cifar.run.spec, torch.device("cpu"))
    labels = data.tensors.train_y.numpy()
    assert [np.bincount(labels[i.numpy()], minlength=10).tolist() for i in data.client_train] == cifar.counts.tolist()

    fig, ax = plt.subplots()
    collection = draw_partition(ax, cifar.counts, max_area=300.0)
    drawn = np.zeros(cifar.counts.shape)
    clients, classes = collection.get_offsets().T.astype(int)
    drawn[clients, classes] = collection.get_sizes() / 300.0 * cifar.counts.max()
    plt.close(fig)
    assert len(clients) == np.count_nonzero(cifar.counts) and np.allclose(drawn, cifar.counts)


def test_fig2_through_the_cli_with_and_without_data(tmp_path, monkeypatch):
    """The partition view renders and plots without any registry; a data set that is missing is said, not fatal."""
    import json

    monkeypatch.setenv("FEDBENCH_DATA", str(tmp_path / "data"))
    runner = CliRunner()
    recipe = str(RECIPES / "fedtr_table1.toml")
    common = ["report", "--recipe", recipe, "--table", "partition", "--format", "json"]
    common += ["--registry", f"sqlite:///{tmp_path / 'none.db'}"]
    result = runner.invoke(app, [*common, "--scale", "smoke", "--synthetic", "--plots", str(tmp_path / "plots")])
    assert result.exit_code == 0, result.output
    (table,) = json.loads(result.stdout.split("\nwrote ")[0])["tables"]
    cells = {(c["row"], c["column"]): c["mean"] for c in table["cells"]}
    assert cells[("CIFAR10", "clients")] == 20 and cells[("CIFAR10", "samples")] == 2000  # the stand-in's pool
    assert len(list((tmp_path / "plots").glob("fedtr_table1_partition_*.png"))) == 6
    missing = runner.invoke(app, common)  # the paper's data sets are not in FEDBENCH_DATA
    assert missing.exit_code == 0, missing.output
    (table,) = json.loads(missing.stdout)["tables"]
    assert all(c["mean"] is None for c in table["cells"])
    assert any("fedbench datasets download cifar10" in note for note in table["notes"])
