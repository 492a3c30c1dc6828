"""Cost formulas against hand counts (issue 19): local steps per round, parameter and byte counts of a small model
with BatchNorm, and every figure of a model card for FedTrip's MLP (784→100→10) worked out from its layer sizes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedbench.cost import (
    buffer_count,
    local_steps_per_round,
    model_card,
    parameter_counts,
    steps_per_epoch,
    update_bytes,
)
from fedbench.errors import ConfigError
from fedbench.models import MODELS
from fedbench.models.base import FedModel


@pytest.mark.parametrize(
    "samples, batch, drop_last, steps",
    [
        (0, 16, False, 0),
        (0, 16, True, 0),
        (5, 16, False, 1),  # a client smaller than a batch trains on its one partial batch
        (5, 16, True, 1),
        (16, 16, False, 1),
        (16, 16, True, 1),
        (17, 16, False, 2),  # ⌈17/16⌉
        (17, 16, True, 1),  # ⌊17/16⌋
        (32, 16, True, 2),
        (70, 16, False, 5),
        (70, 16, True, 4),
    ],
)
def test_steps_per_epoch_by_hand(samples, batch, drop_last, steps):
    assert steps_per_epoch(samples, batch, drop_last) == steps


@pytest.mark.parametrize(
    "samples, epochs, budget, drop_last, steps",
    [
        (70, 3, None, False, 3 * 5),
        (70, 3, None, True, 3 * 4),
        (70, 1, 7, False, 7),  # a step budget replaces the epochs
        (70, 3, 7, True, 7),
        (0, 3, 7, False, 0),  # no samples: no steps, whatever the budget
        (5, 2, None, True, 2),
    ],
)
def test_local_steps_per_round_by_hand(samples, epochs, budget, drop_last, steps):
    assert local_steps_per_round(samples, 16, local_epochs=epochs, local_steps=budget, drop_last=drop_last) == steps


class SmallBN(FedModel):
    """Linear(6→4) → BatchNorm1d(4) → ReLU, then the classifier Linear(4→3)."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(6, 4), nn.BatchNorm1d(4), nn.ReLU())
        self.classifier = nn.Linear(4, 3)
        self.feature_dim = 4


def test_parameter_buffer_and_byte_counts_by_hand():
    model = SmallBN()
    body, bn, head = 6 * 4 + 4, 4 + 4, 4 * 3 + 3
    counts = parameter_counts(model)
    assert counts == {
        "params": body + bn + head,
        "trainable_params": body + bn + head,
        "head_params": head,
        "body_params": body + bn,
        "batchnorm_params": bn,
    }
    assert buffer_count(model) == 4 + 4  # running mean and variance; num_batches_tracked is an integer
    assert update_bytes(model) == 4 * (body + bn + head)
    assert update_bytes(model, include_buffers=True) == 4 * (body + bn + head + 8)
    model.classifier.weight.requires_grad_(False)  # a fixed classifier is never sent
    assert parameter_counts(model)["trainable_params"] == body + bn + 3
    assert update_bytes(model, trainable_only=True) == 4 * (body + bn + 3)
    assert update_bytes(model) == 4 * (body + bn + head)  # unless every parameter is asked for
    assert parameter_counts(nn.Linear(2, 2)) == {"params": 6, "trainable_params": 6}  # not a FedModel: no parts


def test_every_figure_of_the_mlp_card_by_hand():
    """FedTrip's MLP 784→100→ReLU→10: |w| = 784·100 + 100 + 100·10 + 10; forward FLOPs 2 per multiply-accumulate;
    the backward pass computes both weight gradients and the hidden layer's input gradient, not the input's."""
    card = model_card("mlp")
    hidden, out = 784 * 100 + 100, 100 * 10 + 10
    forward = 2 * (784 * 100 + 100 * 10)
    backward = 2 * (100 * 10) + 2 * (100 * 10) + 2 * (784 * 100)  # ∂W₂, ∂h, ∂W₁
    info = MODELS.info("mlp")
    assert card == {
        "name": "mlp",
        "papers": list(info["papers"]),
        "description": info["description"],
        "faithful": info.get("faithful", True),
        "task": "classification",
        "input_shape": [1, 28, 28],
        "num_classes": 10,
        "model_params": {},
        "feature_dim": 100,
        "feature": info["feature"],
        "split_points": card["split_points"],
        "params": hidden + out,
        "trainable_params": hidden + out,
        "head_params": out,
        "body_params": hidden,
        "batchnorm_params": 0,
        "buffers": 0,
        "update_bytes": 4 * (hidden + out),
        "update_bytes_with_buffers": 4 * (hidden + out),
        "flops_forward": forward,
        "flops_train": forward + backward,
        "macs_forward": forward // 2,
    }
    assert card["papers"] == ["fedtrip"] and card["description"] and card["feature"]
    counts = ("params", "update_bytes", "flops_forward", "flops_train", "macs_forward")
    assert all(type(card[key]) is int for key in counts)  # whole numbers in `fedbench models --json`


def test_a_card_with_buffers_counts_them_in_the_bytes_with_buffers():
    card = model_card("lenet5")
    assert card["buffers"] == 2 * (6 + 16)  # BN(6) and BN(16): running mean and variance
    assert card["update_bytes_with_buffers"] == card["update_bytes"] + 4 * card["buffers"]
    assert card["batchnorm_params"] == 2 * (6 + 16)


@pytest.mark.parametrize("shape", ["1x28x28", "1×28×28", "1,28,28", [1, 28, 28], (1, 28, 28)])
def test_input_shapes_in_every_spelling(shape):
    assert model_card("mlp", input_shape=shape)["input_shape"] == [1, 28, 28]


def test_bad_card_overrides_are_config_errors():
    with pytest.raises(ConfigError) as raised:
        model_card("mlp", input_shape="big")
    assert str(raised.value) == "input_shape must be like [3, 32, 32] or '3x32x32', got 'big'"
    with pytest.raises(ConfigError) as raised:
        model_card("mlp", input_shape=[1, "a"])
    assert str(raised.value) == "input_shape must be like [3, 32, 32] or '3x32x32', got [1, 'a']"
    with pytest.raises(ConfigError, match="num_classes must be an integer, got 'ten'"):
        model_card("mlp", num_classes="ten")
    assert model_card("mlp", num_classes="12")["num_classes"] == 12


def test_flop_measurement_restores_the_mode_and_gradients():
    from fedbench.cost import measure_flops

    model = SmallBN()
    model.eval()
    grad = torch.ones_like(model.classifier.weight)
    model.classifier.weight.grad = grad
    forward, train = measure_flops(model, (6,), batch_size=4)
    assert not model.training and model.classifier.weight.grad is grad
    assert forward == 2 * (6 * 4 + 4 * 3)  # per sample, whatever the batch
    assert train == forward + 2 * (4 * 3) + 2 * (4 * 3) + 2 * (6 * 4)
    model.train()
    measure_flops(model, (6,))
    assert model.training


def test_defaults_of_the_step_formulas_and_a_one_sample_client():
    assert steps_per_epoch(17, 16) == 2  # without drop_last: ⌈17/16⌉
    assert local_steps_per_round(70, 16) == 5  # one epoch, no step budget, no drop_last
    assert local_steps_per_round(17, 16, drop_last=True) == 1
    assert local_steps_per_round(70, 16, local_steps=3) == 3
    assert steps_per_epoch(1, 16) == steps_per_epoch(1, 16, True) == 1  # one sample: one step
    assert local_steps_per_round(1, 16, local_epochs=2) == 2


def test_conv_backward_counts_the_input_gradient_of_a_later_layer():
    """Two stacked convolutions: the weight gradient of each costs its forward, and the second one's input gradient
    (needed by the first) costs its forward again; the first one's input gradient is not computed."""
    from fedbench.cost import flops_per_sample

    model = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.Conv2d(3, 4, 3, padding=1))
    first, second = 2 * 3 * 2 * 9 * 5 * 5, 2 * 4 * 3 * 9 * 5 * 5
    assert flops_per_sample(model, (2, 5, 5)) == first + second
    assert flops_per_sample(model, (2, 5, 5), backward=True) == (first + second) + first + 2 * second


def test_a_model_without_parameters_costs_nothing():
    from fedbench.cost import measure_flops

    assert measure_flops(nn.Flatten(), (2, 3)) == (0, 0)
