"""`fedbench run --synthetic` over one recipe touching every registered data set: shapes, classes and
natural groups of each stand-in flow through partitioning, training, evaluation and the registry."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.data import DATASETS, dataset_meta
from fedbench.data.own import reads_user_path


@pytest.mark.slow
def test_synthetic_smoke_run_over_every_dataset(tmp_path):
    classification = [n for n in DATASETS.names() if dataset_meta(n).task == "classification"]
    segmentation = [n for n in DATASETS.names() if dataset_meta(n).task == "segmentation"]
    items = ", ".join(f'"{name}"' for name in classification + segmentation)
    overrides = "".join(
        f'\n[overrides.dataset.{name}]\nmodel = "unet"\nmodel_params = {{ init_features = 4 }}\n'
        for name in segmentation
    ) + "".join(  # a user's own data set needs its path, which a stand-in never reads
        f'\n[overrides.dataset.{name}]\ndataset_params = {{ path = "unread" }}\n'
        for name in classification
        if reads_user_path(name)
    )
    recipe = tmp_path / "every_dataset.toml"
    recipe.write_text(f"""
paper = "smoke"
name = "every_dataset"
seeds = [0]

[setup]
model = "digits_mlp"
model_params = {{ hidden = 8 }}
algorithm = "fedavg"
partition = "iid"
num_clients = 2
clients_per_round = 2
rounds = 1
batch_size = 16
local_steps = 2

[matrix]
dataset = [{items}]
{overrides}""")
    registry = f"sqlite:///{tmp_path / 'r.db'}"
    result = CliRunner().invoke(app, ["run", str(recipe), "--synthetic", "--registry", registry])
    assert result.exit_code == 0, result.output
    runs = json.loads(CliRunner().invoke(app, ["runs", "--registry", registry, "--json"]).stdout)
    assert {r["labels"]["dataset"] for r in runs} == set(DATASETS.names())
    assert all(r["status"] == "done" and r["synthetic"] for r in runs)
