"""Segmentation through the CLI (LG-Mix Table 3: retinal optic disc/cup, U-Net, synthetic data): Dice is the
primary figure of every round and client."""

from __future__ import annotations

import math

import pytest

RECIPE = """
paper = "testpaper"
name = "seg"
seeds = [0]

[setup]
dataset = "retinal"
dataset_params = { image_size = 16 }
model = "unet"
model_params = { init_features = 4 }
partition = "natural"
num_clients = 6
clients_per_round = 6
rounds = 2
local_steps = 3
batch_size = 8
optimizer = { name = "adam", lr = 1e-3, betas = [0.9, 0.99] }
augmentation = { horizontal_flip = true }
eval_mode = "both"
client_test = "natural"
client_val_fraction = 0.2
eval_metrics = ["dice", "iou", "hausdorff"]

[matrix]
algorithm = ["fedavg", "apfl", "fedfomo"]

[[tables]]
name = "dice"
rows = ["algorithm"]
columns = []
figure = "val_selected"
metric = "personal_mean"
"""


@pytest.mark.slow
def test_synthetic_segmentation_run_through_the_cli_records_dice(tmp_path, write_recipe):
    from typer.testing import CliRunner

    from fedbench.cli import app
    from fedbench.registry import Registry

    recipe = write_recipe(RECIPE, "seg.toml")
    url = f"sqlite:///{tmp_path / 'r.db'}"
    result = CliRunner().invoke(app, ["run", str(recipe), "--synthetic", "--registry", url, "--device", "cpu"])
    assert result.exit_code == 0, result.output
    registry = Registry(url)
    runs = registry.runs(paper="testpaper")
    assert len(runs) == 3 and all(r.status == "done" for r in runs), [(r.labels, r.error) for r in runs]
    for run in runs:
        curve = registry.curve(run.id)
        assert [row.round for row in curve] == [1, 2]
        for row in curve:
            assert 0 <= row.test_acc <= 1 and math.isfinite(row.test_loss), "test_acc holds the mean Dice"
            assert 0 <= row.personal_mean <= 1 and 0 <= row.personal_val_mean <= 1
            dice = row.personal_metrics["dice"]
            assert len(dice) == 6 and all(0 <= d <= 1 for d in dice)
            assert dice == pytest.approx(row.personal_per_client), "the primary personal figure is the Dice"
            assert all(h is None or h >= 0 for h in row.personal_metrics["hausdorff"])
    result = CliRunner().invoke(
        app, ["report", "--recipe", str(recipe), "--registry", url, "--synthetic", "--format", "json"]
    )
    assert result.exit_code == 0, result.output
