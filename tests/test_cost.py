"""Cost accounting: FLOPs per sample, bytes per update, parameter counts, model cards."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from fedbench.cost import (
    flops_per_sample,
    model_card,
    model_cards,
    parameter_counts,
    update_bytes,
)
from fedbench.errors import ConfigError, UnknownNameError
from fedbench.models import MODELS, build_model
from fedbench.models.base import FedModel


class OneLinear(FedModel):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.encoder = nn.Identity()
        self.classifier = nn.Linear(in_features, out_features)
        self.feature_dim = in_features


def test_linear_layer_flops():
    model = OneLinear(7, 5)
    assert flops_per_sample(model, (7,)) == 2 * 7 * 5
    # backward: the weight gradient costs as much again; the input needs no gradient; bias adds are not counted
    assert flops_per_sample(model, (7,), backward=True) == 2 * (2 * 7 * 5)
    assert model.classifier.weight.grad is None  # the measurement leaves no gradients behind


def test_conv_flops_and_depthwise_backward():
    conv = nn.Conv2d(4, 8, 3, padding=1)
    assert flops_per_sample(conv, (4, 6, 6)) == 2 * 8 * 4 * 9 * 6 * 6
    depthwise = nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False)
    forward = flops_per_sample(depthwise, (8, 6, 6))
    assert forward == 2 * 8 * 1 * 9 * 6 * 6
    # weight gradient = forward cost (torch 2.14's own formula would give 8 × forward here)
    assert flops_per_sample(depthwise, (8, 6, 6), backward=True) == 2 * forward


def test_flops_do_not_touch_batchnorm_statistics():
    model = build_model("lenet5", 11, (1, 28, 28))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    flops_per_sample(model, (1, 28, 28), backward=True)
    assert model.training
    for key, value in model.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_update_bytes_is_four_bytes_per_parameter():
    model = build_model("lenet5", 11, (1, 28, 28))
    params = sum(p.numel() for p in model.parameters())
    assert update_bytes(model) == 4 * params
    # running mean and variance of BN(6) and BN(16); the integer num_batches_tracked is not sent
    assert update_bytes(model, include_buffers=True) == 4 * (params + 2 * (6 + 16))


def test_update_bytes_trainable_only_skips_a_frozen_etf():
    with torch.device("meta"):
        model = build_model("vgg11", 10, (3, 32, 32), classifier="etf")
    params = sum(p.numel() for p in model.parameters())
    assert update_bytes(model, trainable_only=True) == 4 * (params - 10 * 512)


def test_parameter_counts():
    with torch.device("meta"):
        model = build_model("vgg11", 10, (3, 32, 32), classifier="etf")
    counts = parameter_counts(model)
    assert counts["params"] == counts["head_params"] + counts["body_params"]
    assert counts["head_params"] == 10 * 512
    assert counts["trainable_params"] == counts["params"] - 10 * 512
    assert counts["batchnorm_params"] == 0


def test_model_card_contents():
    card = model_card("lenet5")
    assert card["name"] == "lenet5" and card["papers"] == ["fedtr"]
    assert card["input_shape"] == [1, 28, 28] and card["num_classes"] == 11
    assert card["params"] == card["trainable_params"] == 44_555
    assert card["head_params"] == 84 * 11 + 11
    assert card["update_bytes"] == 4 * 44_555
    assert card["feature_dim"] == 84 and card["description"]
    assert card["flops_train"] > 2 * card["flops_forward"]
    json.dumps(card)  # JSON-ready


def test_model_card_matches_published_macs():
    # FedTrip Table III / spec §2.6: MLP 79,400 MACs (matches exactly).
    assert model_card("mlp")["macs_forward"] == 784 * 100 + 100 * 10
    # CNN: the spec's 422,944 counts conv bias (thop); the flop counter does not: 422,944 − 6·28² − 16·10² − 120.
    assert model_card("fedtrip_cnn")["macs_forward"] == 422_944 - (6 * 28 * 28 + 16 * 10 * 10 + 120)
    # AlexNet: the spec's 145.92 M MACs without conv bias (Table III prints 145.93 MFLOPs).
    macs = (
        30 * 30 * 64 * 3 * 49
        + 14 * 14 * 192 * 64 * 25
        + 6 * 6 * 384 * 192 * 9
        + 6 * 6 * 256 * 384 * 9
        + 6 * 6 * 256 * 256 * 9
        + 256 * 1024
        + 1024 * 10
    )
    assert model_card("alexnet_cifar")["macs_forward"] == macs == 145_922_816


def test_model_card_overrides_and_cache():
    card = model_card("lenet5", num_classes=10)
    assert card["num_classes"] == 10 and card["params"] == 44_555 - 85
    card["params"] = -1  # callers get a copy; the cache is untouched
    assert model_card("lenet5", num_classes=10)["params"] == 44_555 - 85
    etf = model_card("vgg11", classifier="etf")
    assert etf["model_params"] == {"classifier": "etf"}
    assert etf["trainable_params"] == etf["params"] - 10 * 512
    assert (
        model_card("resnet18", input_shape="1x28x28", num_classes=62)["params"]
        == model_card("resnet18_femnist")["params"]
    )


def test_model_card_does_not_consume_the_global_rng():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    model_card("vgg11", classifier="orthonormal", num_classes=9)
    assert torch.equal(torch.rand(3), expected)


def test_model_card_errors():
    with pytest.raises(UnknownNameError, match="resnet18"):
        model_card("resnet19")
    with pytest.raises(ConfigError, match="model_params accepts"):
        model_card("lenet5", width=4)
    with pytest.raises(ConfigError, match="input_shape"):
        model_card("lenet5", input_shape="big")


def test_model_cards_cover_every_model():
    cards = model_cards()
    assert [c["name"] for c in cards] == MODELS.names()
    for card in cards:
        assert card["params"] > 0 and card["flops_forward"] > 0 and card["flops_train"] > card["flops_forward"]


@pytest.mark.parametrize("samples", [0, 5, 32, 70])
@pytest.mark.parametrize("drop_last", [False, True])
@pytest.mark.parametrize("local_epochs,local_steps", [(1, None), (3, None), (1, 7)])
def test_the_mini_batch_loop_takes_exactly_the_steps_of_the_one_formula(samples, drop_last, local_epochs, local_steps):
    """``local_steps_per_round`` is the one steps-per-round formula: the client's batch loop yields that many batches
    (also for a client smaller than a batch, or an empty one), each epoch-based phase ``steps_per_epoch`` per epoch."""
    from fedbench.algorithms.context import ClientContext, ServerState
    from fedbench.cost import local_steps_per_round, steps_per_epoch
    from fedbench.data.store import TensorData
    from fedbench.spec import RunSpec

    spec = RunSpec(
        algorithm="fedavg",
        dataset="digits",
        model="digits_mlp",
        batch_size=16,
        drop_last=drop_last,
        local_epochs=local_epochs,
        local_steps=local_steps,
    )
    x, y = torch.randn(max(samples, 1), 4), torch.zeros(max(samples, 1), dtype=torch.long)
    model = OneLinear(4, 2)
    ctx = ClientContext(
        spec=spec,
        client_id=0,
        round_index=1,
        model=model,
        payload={},
        state={},
        server=ServerState(nn.utils.parameters_to_vector(model.parameters()).detach(), {}),
        data=TensorData(x, y, x, y),
        indices=torch.arange(samples),
        generator=torch.Generator(),
        device=torch.device("cpu"),
        lr=0.1,
    )
    expected = local_steps_per_round(
        samples, 16, local_epochs=local_epochs, local_steps=local_steps, drop_last=drop_last
    )
    assert len(list(ctx.batches())) == expected == ctx.planned_steps()
    assert len(list(ctx.batches(epochs=2))) == 2 * steps_per_epoch(samples, 16, drop_last)
    if samples:
        sizes = [len(b) for b, _ in ctx.batches(epochs=1)]
        assert sum(sizes) == (samples if not drop_last or samples < 16 else samples - samples % 16)
    else:
        assert expected == 0
