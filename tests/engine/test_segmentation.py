"""Segmentation in the engine (LG-Mix Table 3: retinal optic disc/cup, U-Net): float mask targets, the Dice loss,
Dice as the primary metric of ``evaluate`` (``test_acc``), joint image/mask augmentation, label-free partitions
only, and a synthetic run through the CLI."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fedbench.algorithms.context import ClientContext, ServerState
from fedbench.algorithms.losses import soft_dice_loss, task_loss
from fedbench.data.federated import prepare_data
from fedbench.data.store import TensorData
from fedbench.errors import ConfigError
from fedbench.models import build_model
from fedbench.spec import RunSpec

SEG = {
    "algorithm": "fedavg",
    "dataset": "retinal",
    "dataset_params": {"image_size": 16},
    "model": "unet",
    "model_params": {"init_features": 2},
    "partition": "natural",
    "num_clients": 6,
    "clients_per_round": 6,
    "rounds": 1,
    "synthetic": True,
}


def random_masks(shape, seed=0) -> torch.Tensor:
    masks = torch.from_numpy(np.random.default_rng(seed).random(shape) < 0.3).float()
    masks[0, 1] = 0.0  # an empty channel (an image without cup)
    return masks


def test_dice_loss_is_zero_for_a_perfect_prediction_and_near_one_for_the_opposite():
    masks = random_masks((3, 2, 8, 8))
    perfect = (2 * masks - 1) * 40.0  # logits ±40: sigmoid is 0/1 to float precision
    assert float(task_loss("segmentation", perfect, masks)) == pytest.approx(0.0, abs=1e-6)
    assert soft_dice_loss(perfect, masks).shape == (3, 2)
    opposite = soft_dice_loss(-perfect, masks)
    assert float(opposite[1:].min()) > 0.95  # no overlap: 1 − 1/(|T| + 1)
    assert float(opposite[0, 1]) > 0.98  # an empty mask predicted full costs ~1


def test_masks_become_float_targets_and_the_context_knows_the_task():
    data = prepare_data(RunSpec(**SEG, eval_mode="personal", client_test="natural"), torch.device("cpu"))
    assert data.tensors.task == "segmentation"
    assert data.tensors.train_y.dtype == torch.float32 and data.tensors.train_y.shape[1:] == (2, 16, 16)
    assert set(data.tensors.train_y.unique().tolist()) <= {0.0, 1.0}
    assert data.input_shape == (3, 16, 16)  # the synthetic stand-in honours dataset_params.image_size
    assert sum(len(p) for p in data.client_test) == len(data.tensors.test_y)  # natural: each site's test images
    assert data.client_test_from_test and data.client_test_data(2)[1].shape[1:] == (2, 16, 16)


def test_augmentation_moves_masks_with_their_images():
    spec = RunSpec(**{**SEG, "augmentation": {"crop_padding": 3, "horizontal_flip": True}})
    masks = random_masks((16, 2, 16, 16), seed=2)
    images = torch.cat([masks[:, :1], torch.rand(16, 2, 16, 16)], dim=1)  # image channel 0 = the disc mask
    data = TensorData(images, masks, images[:0], masks[:0], fill=0.0, task="segmentation")
    model = build_model("unet", 2, (3, 16, 16), init_features=2)
    server = ServerState(params=torch.nn.utils.parameters_to_vector(model.parameters()).detach(), buffers={})
    ctx = ClientContext(
        spec=spec,
        client_id=0,
        round_index=1,
        model=model,
        server=server,
        payload={},
        state={},
        data=data,
        indices=torch.arange(16),
        generator=torch.Generator().manual_seed(0),
        device=torch.device("cpu"),
        lr=0.1,
    )
    assert ctx.task == "segmentation"
    x, y = ctx.augment_with_masks(images, masks)
    assert not torch.equal(y, masks), "the batch was transformed"
    assert torch.equal(y[:, 0], x[:, 0]), "the mask went through the same crop and flip as its image"
    assert set(y.unique().tolist()) <= {0.0, 1.0}
    affine = RunSpec(**{**SEG, "augmentation": {"affine": {"degrees": 20, "scale": [0.9, 1.1]}}})
    ctx.spec = affine
    _, y = ctx.augment_with_masks(images, masks)
    assert set(y.unique().tolist()) <= {0.0, 1.0}, "re-binarised after bilinear resampling"


def test_label_based_partitions_and_class_matched_test_sets_are_config_errors():
    with pytest.raises(ConfigError, match="segmentation task whose labels are masks; use partition 'natural'"):
        prepare_data(RunSpec(**{**SEG, "partition": "dirichlet"}), torch.device("cpu"))
    with pytest.raises(ConfigError, match="client_test = 'class_matched' matches class labels"):
        prepare_data(RunSpec(**{**SEG, "eval_mode": "personal", "client_test": "class_matched"}), torch.device("cpu"))
    assert len(prepare_data(RunSpec(**{**SEG, "partition": "iid"}), torch.device("cpu")).client_train) == 6


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
