"""Cutout (DeVries & Taylor 2017) as a batched training augmentation: one clipped square of zeros per image,
drawn from the run's keyed random streams; validated like the other augmentation keys; off by default without
touching any existing spec hash; on in FedImpro's CIFAR-100 cells."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from fedbench.algorithms.context import ClientContext, ServerState
from fedbench.cli import app
from fedbench.data.store import TensorData, cutout
from fedbench.errors import ConfigError
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.seeding import torch_generator
from fedbench.spec import RunSpec

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
runner = CliRunner()


def holes(original: torch.Tensor, augmented: torch.Tensor) -> torch.Tensor:
    """(B, H, W) bool: pixels that Cutout zeroed (the inputs are strictly positive, so no zero is natural)."""
    changed = augmented != original
    assert torch.equal(changed, changed[:, :1].expand_as(changed)), "a pixel was zeroed in some channels only"
    assert torch.all(augmented[changed] == 0)
    return changed[:, 0]


def expected_boxes(seed: int, batch: int, height: int, width: int, size: int) -> list[tuple[int, int, int, int]]:
    """The reference code's clipped box (y1, y2, x1, x2) for the same draws: centre uniform, clip(c - size//2)."""
    generator = torch.Generator().manual_seed(seed)
    cy = torch.randint(0, height, (batch,), generator=generator)
    cx = torch.randint(0, width, (batch,), generator=generator)
    return [
        (
            max(0, y - size // 2),
            min(height, y - size // 2 + size),
            max(0, x - size // 2),
            min(width, x - size // 2 + size),
        )
        for y, x in zip(cy.tolist(), cx.tolist())
    ]


@pytest.mark.parametrize("size", [16, 5, 1, 32])
def test_exactly_one_clipped_square_per_image_and_nothing_else_changes(size):
    batch, height, width = 256, 32, 32
    x = torch.rand(batch, 3, height, width) + 0.5
    out = cutout(x, size, torch.Generator().manual_seed(7))
    assert out.shape == x.shape and out.dtype == x.dtype
    hole = holes(x, out)
    full = 0
    for image, (y1, y2, x1, x2) in zip(hole, expected_boxes(7, batch, height, width, size)):
        box = torch.zeros(height, width, dtype=torch.bool)
        box[y1:y2, x1:x2] = True
        assert torch.equal(image, box)  # one rectangle, exactly where the draws put it
        assert 0 < y2 - y1 <= size and 0 < x2 - x1 <= size  # never empty: the centre lies in the image
        full += (y2 - y1, x2 - x1) == (size, size)
    if size <= height // 2:
        assert full > 0  # unclipped squares have side exactly `size`
    # everything outside the square is bit-identical
    keep = ~hole[:, None].expand_as(x)
    assert torch.equal(out[keep], x[keep])
    assert (x >= 0.5).all()  # the input was not modified in place


def test_side_sixteen_unclipped_is_sixteen_by_sixteen_and_clipped_at_borders():
    x = torch.ones(512, 1, 32, 32)
    hole = holes(x, cutout(x, 16, torch.Generator().manual_seed(0)))
    rows, cols = hole.any(2).sum(1), hole.any(1).sum(1)
    assert rows.max() == 16 and cols.max() == 16
    assert rows.min() >= 8 and cols.min() >= 8  # clipped at the border, at least half remains
    assert (rows < 16).any() and (cols < 16).any()  # some squares do hit the border
    assert torch.equal(hole.sum((1, 2)), rows * cols)  # each hole is one rectangle


def test_positions_vary_and_are_reproducible_with_the_same_seed():
    x = torch.rand(64, 3, 32, 32) + 0.5
    a = cutout(x, 16, torch_generator(0, "client", 1, 3))
    b = cutout(x, 16, torch_generator(0, "client", 1, 3))
    c = cutout(x, 16, torch_generator(1, "client", 1, 3))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    hole = holes(x, a)
    corners = {(int(h.any(1).nonzero()[0]), int(h.any(0).nonzero()[0])) for h in hole}
    assert len(corners) > 32  # positions differ across images


def test_channels_limits_cutout_to_the_image_part():
    x = torch.rand(16, 4, 16, 16) + 0.5
    out = cutout(x, 8, torch.Generator().manual_seed(1), channels=3)
    assert torch.equal(out[:, 3], x[:, 3])
    assert (out[:, :3] == 0).any()


def test_cutout_larger_than_the_images_fails_at_runtime_too():
    with pytest.raises(ConfigError, match="augmentation.cutout"):
        cutout(torch.ones(2, 1, 8, 8), 9, torch.Generator())


# --------------------------------------------------------------------------------------------- engine


SPEC = {
    "algorithm": "fedavg",
    "dataset": "digits",
    "model": "digits_mlp",
    "model_params": {"hidden": 16},
    "num_clients": 2,
    "clients_per_round": 2,
    "rounds": 1,
    "batch_size": 8,
}


def context(spec: RunSpec, data: TensorData, seed_keys=(1, 0)) -> ClientContext:
    model = torch.nn.Linear(1, 1)
    server = ServerState(params=torch.zeros(2), buffers={})
    return ClientContext(
        spec=spec,
        client_id=seed_keys[1],
        round_index=seed_keys[0],
        model=model,
        server=server,
        payload={},
        state={},
        data=data,
        indices=torch.arange(len(data.train_y)),
        generator=torch_generator(spec.seed, "client", *seed_keys),
        device=torch.device("cpu"),
        lr=0.1,
    )


def tensor_data(n=32, size=16, channels=3) -> TensorData:
    x = torch.rand(n, channels, size, size) + 0.5
    return TensorData(x, torch.zeros(n, dtype=torch.long), x[:4], torch.zeros(4, dtype=torch.long))


def test_engine_applies_cutout_last_from_the_client_stream():
    data = tensor_data()
    spec = RunSpec(**SPEC, augmentation={"crop_padding": 2, "horizontal_flip": True, "cutout": 6})
    plain = RunSpec(**SPEC, augmentation={"crop_padding": 2, "horizontal_flip": True})
    x = data.train_x[:16]
    with_cutout = context(spec, data).augment(x)
    without = context(plain, data).augment(x)
    # crop and flip draw first, so they are unchanged; Cutout then zeroes one square per image
    differs = with_cutout != without
    assert differs.any() and torch.all(with_cutout[differs] == 0)
    assert torch.equal(with_cutout, context(spec, data).augment(x))  # same keys, same squares
    assert not torch.equal(with_cutout, context(spec, data, (2, 0)).augment(x))  # another round, other squares


def test_segmentation_masks_are_not_cut_out():
    data = tensor_data(channels=3)
    spec = RunSpec(**SPEC, augmentation={"cutout": 8})
    images = data.train_x[:8]
    masks = torch.ones(8, 1, 16, 16)
    out_images, out_masks = context(spec, data).augment_with_masks(images, masks)
    assert (out_images == 0).any()
    assert torch.equal(out_masks, masks)


def test_training_with_cutout_is_deterministic_and_changes_the_result(tmp_path):
    from conftest import ListSink
    from fedbench.engine import EngineOptions, run

    base = {**SPEC, "rounds": 2, "num_clients": 3, "clients_per_round": 2, "model_params": {"hidden": 32}}
    spec = RunSpec(**base, augmentation={"cutout": 4})
    curves = []
    for attempt, s in enumerate((spec, spec, RunSpec(**base))):
        sink = ListSink()
        run(s, sink, EngineOptions(checkpoint_path=tmp_path / f"{attempt}.pt"))
        curves.append([(r.test_acc, r.train_loss) for r in sink.records])
    assert curves[0] == curves[1]
    assert curves[0] != curves[2]


# --------------------------------------------------------------------------------------------- spec and validation


# spec_hash of quickstart's FedAvg seed-0 run and of a FedImpro Table 1 cell (resolved specs, registry revision
# 0002); `cutout` is HashNeutral(0), so these equal the hashes of the same specs without the field
QUICKSTART_FEDAVG_SEED0 = "1dde1ecae8bb1288"
FEDIMPRO_CIFAR10_FEDAVG = "bda8a0808f882f6a"  # CIFAR-10, a=0.1 E=1 M=10, seed 0: no Cutout, must not move


def test_off_by_default_leaves_existing_hashes_unchanged():
    runs = expand(load_recipe(RECIPES / "quickstart.toml"), check=False)
    fedavg = next(r for r in runs if r.labels == {"algorithm": "fedavg"} and r.spec.seed == 0)
    assert fedavg.spec.augmentation.cutout == 0
    assert fedavg.spec_hash == QUICKSTART_FEDAVG_SEED0
    assert "cutout" not in fedavg.spec.canonical_json()
    explicit = RunSpec(**{**fedavg.spec.model_dump(), "augmentation": {"cutout": 0}})
    assert explicit.spec_hash == QUICKSTART_FEDAVG_SEED0
    on = RunSpec(**{**fedavg.spec.model_dump(), "augmentation": {"cutout": 4}})
    assert on.spec_hash != QUICKSTART_FEDAVG_SEED0 and '"cutout":4' in on.canonical_json()
    # a stored spec (model_dump includes cutout = 0) round-trips to the same hash
    assert RunSpec(**json.loads(json.dumps(fedavg.spec.model_dump(mode="json")))).spec_hash == QUICKSTART_FEDAVG_SEED0


def test_fedimpro_cifar100_cells_use_cutout_16_and_only_they_change():
    runs = expand(load_recipe(RECIPES / "fedimpro_table1.toml"), check=False)
    cell = {"algorithm": "fedavg", "setting": "a=0.1 E=1 M=10"}
    by_dataset = {
        r.labels["dataset"]: r for r in runs if r.spec.seed == 0 and all(r.labels[k] == v for k, v in cell.items())
    }
    assert by_dataset["CIFAR-10"].spec_hash == FEDIMPRO_CIFAR10_FEDAVG
    cifar100 = by_dataset["CIFAR-100"].spec
    without_cutout = RunSpec(
        **{**cifar100.model_dump(), "augmentation": {**cifar100.augmentation.model_dump(), "cutout": 0}}
    )
    assert cifar100.spec_hash != without_cutout.spec_hash
    for run in runs:
        aug = run.spec.augmentation
        assert aug.cutout == (16 if run.spec.dataset == "cifar100" else 0), run.labels
        if run.spec.dataset == "cifar100":
            assert aug.crop_padding == 4 and aug.horizontal_flip
    assert "Cutout(16)" in (RECIPES / "fedimpro_table1.toml").read_text().split("paper =")[0]


@pytest.mark.parametrize("value", [-1, 2.5, True, "16", 16.0])
def test_bad_values_are_rejected_by_the_spec(value):
    with pytest.raises(ValueError, match="cutout"):
        RunSpec(**SPEC, augmentation={"cutout": value})


def cifar100_recipe(cutout_value: str) -> str:
    return f"""
paper = "testpaper"
name = "cut"
title = "Cutout"
seeds = [0]

[setup]
algorithm = "fedavg"
dataset = "cifar100"
model = "digits_cnn"
model_params = {{ width = 4, hidden = 16 }}
num_clients = 2
clients_per_round = 2
rounds = 1
local_steps = 1
batch_size = 8
augmentation = {{ crop_padding = 4, horizontal_flip = true, cutout = {cutout_value} }}
"""


@pytest.mark.parametrize(
    "value, message",
    [
        ("-1", "greater than or equal to 0"),
        ("2.5", "integer"),
        ("true", "integer"),
        ("33", "larger than the 32×32"),
    ],
)
def test_bad_values_fail_through_the_cli_with_one_line_naming_the_key(write_recipe, registry_url, value, message):
    recipe = write_recipe(cifar100_recipe(value))
    result = runner.invoke(app, ["run", str(recipe), "--synthetic", "--registry", registry_url])
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "augmentation.cutout" in lines[0] and message in lines[0], result.stderr
    assert not Path(registry_url.removeprefix("sqlite:///")).exists()


def test_set_override_is_checked_against_the_image_size(registry_url):
    result = runner.invoke(
        app,
        [
            "run",
            str(RECIPES / "fedimpro_table1.toml"),
            "--scale",
            "smoke",
            "--synthetic",
            "--only",
            "dataset=CIFAR-10",
            "--set",
            "augmentation.cutout=40",
            "--registry",
            registry_url,
            "--dry-run",
        ],
    )
    assert result.exit_code == 2 and "augmentation.cutout = 40" in result.stderr


def test_image_size_parameter_is_taken_into_account():
    from fedbench.recipes.validate import check_spec

    small = RunSpec(
        **{**SPEC, "dataset": "fmnist", "dataset_params": {"image_size": 8}, "augmentation": {"cutout": 10}}
    )
    with pytest.raises(ConfigError, match="8×8"):
        check_spec(small)
    check_spec(
        RunSpec(**{**SPEC, "dataset": "fmnist", "dataset_params": {"image_size": 32}, "augmentation": {"cutout": 16}})
    )


def test_cli_smoke_run_of_a_cifar100_cell(tmp_path):
    url = f"sqlite:///{tmp_path / 'h2.db'}"
    args = [
        "run",
        str(RECIPES / "fedimpro_table1.toml"),
        "--scale",
        "smoke",
        "--synthetic",
        "--only",
        "dataset=CIFAR-100",
        "--only",
        "algorithm=fedavg",
        "--only",
        "setting=a=0.1 E=1 M=10",
        "--registry",
        url,
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "1 done" in result.output
    shown = runner.invoke(app, ["runs", "--registry", url, "--json"])
    run_id = json.loads(shown.stdout)[0]["id"]
    detail = json.loads(runner.invoke(app, ["show", str(run_id), "--registry", url, "--json"]).stdout)
    assert detail["spec"]["augmentation"]["cutout"] == 16 and detail["status"] == "done"
