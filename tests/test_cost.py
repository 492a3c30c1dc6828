"""Cost accounting (fedbench/cost.py): FLOPs per sample, bytes per update, parameter counts, model cards; and the
cost formulas against hand counts: local steps per round, parameter and byte counts of a small model with BatchNorm,
every figure of a model card for FedTrip's MLP (784→100→10) worked out from its layer sizes, and each method's
FLOPs and bytes per round."""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn

from fedbench import cost
from fedbench.cost import (
    buffer_count,
    client_round_work,
    flops_per_sample,
    local_steps_per_round,
    model_card,
    model_cards,
    parameter_counts,
    steps_per_epoch,
    update_bytes,
)
from fedbench.errors import ConfigError, UnknownNameError
from fedbench.models import MODELS, build_model
from fedbench.models.base import FedModel
from fedbench.spec import RunSpec


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


def test_the_pfl_benchmark_cnn_is_counted_by_its_layers():
    """pfl-research's simple_cnn at 32×32×3: 2 FLOPs per multiply-accumulate of each conv (output positions ×
    output channels × kernel taps × input channels) and linear layer."""
    card = model_card("pfl_cnn")
    conv1 = 30 * 30 * 32 * (3 * 3 * 3)
    conv2 = 28 * 28 * 64 * (3 * 3 * 32)
    assert card["flops_forward"] == 2 * (conv1 + conv2 + 12_544 * 128 + 128 * 10) == 33_670_400
    assert card["params"] == 1_626_442 and card["head_params"] == 128 * 10 + 10
    assert card["update_bytes"] == 4 * 1_626_442


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


def test_a_card_with_buffers_counts_them_in_the_bytes_with_buffers(monkeypatch):
    monkeypatch.setattr(cost, "_CARDS", {})  # built here, not taken from another test's cache
    card = model_card("lenet5")
    assert card["buffers"] == 2 * (6 + 16)  # BN(6) and BN(16): running mean and variance
    assert card["update_bytes_with_buffers"] == card["update_bytes"] + 4 * card["buffers"]
    assert card["batchnorm_params"] == 2 * (6 + 16)
    assert type(card["macs_forward"]) is int and 2 * card["macs_forward"] == card["flops_forward"]  # JSON: a count


@pytest.mark.parametrize("shape", ["1x28x28", "1×28×28", "1,28,28", [1, 28, 28], (1, 28, 28)])
def test_input_shapes_in_every_spelling(shape):
    assert model_card("mlp", input_shape=shape)["input_shape"] == [1, 28, 28]


def test_bad_card_overrides_are_config_errors(monkeypatch):
    monkeypatch.setattr(cost, "_CARDS", {})  # every card built here
    with pytest.raises(ConfigError) as raised:
        model_card("mlp", input_shape="big")
    assert str(raised.value) == "input_shape must be like [3, 32, 32] or '3x32x32', got 'big'"
    with pytest.raises(ConfigError) as raised:
        model_card("mlp", input_shape=[1, "a"])
    assert str(raised.value) == "input_shape must be like [3, 32, 32] or '3x32x32', got [1, 'a']"
    with pytest.raises(ConfigError, match="num_classes must be an integer, got 'ten'"):
        model_card("mlp", num_classes="ten")
    assert model_card("mlp", num_classes="12")["num_classes"] == 12
    assert model_card("mlp", num_classes=1)["num_classes"] == 1  # one output (a binary task's logit) is a model
    for classes in (0, -3):
        with pytest.raises(ConfigError) as raised:
            model_card("mlp", num_classes=classes)
        assert str(raised.value) == f"num_classes must be at least 1, got {classes}"
    for shape in ([], [0, 28, 28], "1x-2x28"):
        with pytest.raises(ConfigError) as raised:
            model_card("mlp", input_shape=shape)
        assert str(raised.value) == f"input_shape must be positive sizes like [3, 32, 32], got {shape!r}"
    assert model_card("mlp", input_shape=[1, 1, 1])["input_shape"] == [1, 1, 1]  # one is a size


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"input_shape": [1]}, "not enough values to unpack"),  # LeNet-5 reads (channels, height, width)
        ({"input_shape": [1, 2, 2], "num_classes": 3}, "Kernel size can't be greater than actual input size"),
    ],
)
def test_a_configuration_the_model_cannot_take_is_one_config_error_naming_it(overrides, reason):
    with pytest.raises(ConfigError) as raised:
        model_card("lenet5", **overrides)
    settings = ", ".join(f"{key}={value!r}" for key, value in overrides.items())
    message = str(raised.value)
    assert message.startswith(f"model 'lenet5' cannot be built with {settings}: ") and "\n" not in message
    assert reason in message


def test_the_paper_configuration_failing_to_build_is_a_bug_not_a_user_error(monkeypatch):
    """Only a configuration the user gave is turned into a one-line error; the registered one failing keeps its
    exception (and traceback): that is fedbench's bug to fix."""
    import fedbench.cost

    def broken(*args, **kwargs):
        raise RuntimeError("a broken builder")

    monkeypatch.setattr(fedbench.cost, "build_model", broken)
    monkeypatch.setattr(fedbench.cost, "_CARDS", {})  # no card built earlier in the session
    with pytest.raises(RuntimeError, match="a broken builder"):
        model_card("lenet5")
    with pytest.raises(ConfigError, match="a broken builder"):
        model_card("lenet5", num_classes=7)


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


# ------------------------------------------------------------------------------------------- cards of a tiny model
class TinyNet(FedModel):
    """Linear(6→hidden) → ReLU, then the classifier Linear(hidden→classes)."""

    def __init__(self, num_classes: int, input_shape: tuple[int, ...], hidden: int = 4):
        super().__init__()
        self.encoder = nn.Sequential(nn.Flatten(), nn.Linear(input_shape[-1], hidden), nn.ReLU())
        self.classifier = nn.Linear(hidden, num_classes)
        self.feature_dim = hidden


@pytest.fixture
def tiny_models(monkeypatch):
    """Two registrations of TinyNet: ``tiny_bare`` with only the required info (input shape, classes), ``tiny_full``
    with every optional one; an empty card cache, so that the test's cards are its own."""
    import fedbench.cost as cost

    def tiny(num_classes: int, input_shape: tuple[int, ...], hidden: int = 4) -> FedModel:
        return TinyNet(num_classes, input_shape, hidden)

    infos = {
        "tiny_bare": {"input_shape": (6,), "num_classes": 3},
        "tiny_full": {
            "input_shape": (6,),
            "num_classes": 3,
            "papers": ("fedtr",),
            "description": "a stand-in",
            "feature": "hidden ReLU",
            "faithful": False,
            "task": "segmentation",
        },
    }
    for name, info in infos.items():
        monkeypatch.setitem(MODELS._entries, name, tiny)
        monkeypatch.setitem(MODELS._info, name, info)
    monkeypatch.setattr(cost, "_CARDS", {})
    return cost


def test_the_card_of_a_model_registered_with_only_its_shape_by_hand(tiny_models):
    """6 → 4 → ReLU → 3: |w| = 6·4 + 4 + 4·3 + 3 = 43; 6·4 + 4·3 = 36 multiply-adds forward (72 FLOPs); backward
    ∂W₂ (12 MACs), ∂h (12) and ∂W₁ (24), not the input's gradient; what the registration leaves out takes the
    documented defaults (no papers, no description or feature text, faithful, classification)."""
    card = model_card("tiny_bare")
    assert card == {
        "name": "tiny_bare",
        "papers": [],
        "description": "",
        "faithful": True,
        "task": "classification",
        "input_shape": [6],
        "num_classes": 3,
        "model_params": {},
        "feature_dim": 4,
        "feature": "",
        "split_points": [],
        "params": 43,
        "trainable_params": 43,
        "head_params": 4 * 3 + 3,
        "body_params": 6 * 4 + 4,
        "batchnorm_params": 0,
        "buffers": 0,
        "update_bytes": 4 * 43,
        "update_bytes_with_buffers": 4 * 43,
        "flops_forward": 2 * 36,
        "flops_train": 2 * 36 + 2 * (12 + 12 + 24),
        "macs_forward": 36,
    }


def test_a_card_carries_what_the_model_was_registered_with(tiny_models):
    card = model_card("tiny_full", hidden=5, num_classes=2)
    assert {key: card[key] for key in ("papers", "description", "feature", "faithful", "task")} == {
        "papers": ["fedtr"],
        "description": "a stand-in",
        "feature": "hidden ReLU",
        "faithful": False,
        "task": "segmentation",
    }
    # 6 → 5 → 2: 6·5 + 5·2 = 40 multiply-adds, |w| = 30 + 5 + 10 + 2
    assert (card["macs_forward"], card["params"], card["model_params"], card["num_classes"]) == (
        40,
        47,
        {"hidden": 5},
        2,
    )


def test_cards_are_cached_per_configuration_whatever_the_order_of_the_overrides(tiny_models, monkeypatch):
    """One build per configuration (overrides in any order); each caller gets its own deep copy, so changing a
    card's lists or dicts never reaches the cache."""
    builds = []
    real_card = tiny_models._card
    monkeypatch.setattr(
        tiny_models,
        "_card",
        lambda name, overrides: builds.append((name, dict(overrides))) or real_card(name, overrides),
    )
    first = model_card("tiny_full", hidden=5, num_classes=2)
    second = model_card("tiny_full", num_classes=2, hidden=5)
    assert first == second and builds == [("tiny_full", {"hidden": 5, "num_classes": 2})]
    model_card("tiny_full", hidden=6, num_classes=2)
    assert len(builds) == 2
    first["papers"].append("lgmix")
    first["model_params"]["hidden"] = 99
    first["input_shape"][0] = 7
    again = model_card("tiny_full", hidden=5, num_classes=2)
    assert (again["papers"], again["model_params"], again["input_shape"]) == (["fedtr"], {"hidden": 5}, [6])


def test_a_bad_number_of_classes_is_named_as_written(tiny_models):
    for value in ("ten", None, [3]):
        with pytest.raises(ConfigError) as raised:
            model_card("tiny_bare", num_classes=value)
        assert str(raised.value) == f"num_classes must be an integer, got {value!r}"


# ------------------------------------------------------------------------------------------- per-method cost
# digits_mlp with hidden = 8 on 8×8 digits: 64 → 8 → ReLU → 10.
TINY_FP = 64 * 8 + 8 * 10  # forward multiply-adds of one sample: 592
TINY_W = (64 * 8 + 8) + (8 * 10 + 10)  # parameters: 610
# two clients of 100 and 140 samples (n = 120), E = 2, B = 50: K = E·⌈n/B⌉ = 2·3 = 6 local iterations
N, E, B, K = 120, 2, 50, 6
TABLE_VIII = {  # the attaching FLOPs of one client's round (FedTrip Table VIII, p = 1 history model for MOON)
    "fedavg": 0,
    "slowmo": 0,  # server-side momentum only
    "fedprox": 2 * K * TINY_W,  # 2K|w| = 7,320
    "feddyn": 4 * K * TINY_W,  # 4K|w| = 14,640
    "fedtrip": 4 * K * TINY_W,  # 4K|w| = 14,640
    "moon": K * B * (1 + 1) * TINY_FP,  # K·M·(1+p)·FP = 355,200
    "scaffold": 2 * (K + 1) * TINY_W,  # 2(K+1)|w| = 8,540 (option II: no full-batch gradient n(FP+BP))
}


@pytest.mark.parametrize("name", list(TABLE_VIII))
def test_each_methods_flops_per_round_on_a_tiny_mlp_by_hand(name):
    """FedTrip §4 / Table V: one participating client's round costs n·E·FP + A_method FLOPs (forward multiply-adds,
    thop-style); n·E·FP = 120·2·592 = 142,080."""
    from fedbench.report.table import cost_per_round_flops

    spec = RunSpec(
        algorithm=name,
        dataset="digits",
        model="digits_mlp",
        model_params={"hidden": 8},
        local_epochs=E,
        batch_size=B,
    )
    assert cost_per_round_flops(spec, [100, 140]) == N * E * TINY_FP + TABLE_VIII[name]


@pytest.mark.parametrize("name", list(TABLE_VIII))
def test_each_methods_bytes_per_round_on_a_tiny_mlp_by_hand(tmp_path, name):
    """Table VIII's communication: one model down and one up per selected client, 4 bytes per float32 parameter,
    SCAFFOLD 2|w| more (the server's c down, the client's Δc up): 3 clients × 4 × 610 = 7,320 bytes each way."""
    from algorithm_fixtures import Sink
    from fedbench.engine import EngineOptions, run

    spec = RunSpec(
        algorithm=name,
        dataset="digits",
        model="digits_mlp",
        model_params={"hidden": 8},
        num_clients=4,
        clients_per_round=3,
        rounds=1,
        batch_size=B,
    )
    sink = Sink()
    run(spec, sink, EngineOptions(checkpoint_path=tmp_path / "run.pt"))
    (record,) = sink.records
    per_client = 4 * (TINY_W + (TINY_W if name == "scaffold" else 0))
    assert (record.bytes_up, record.bytes_down) == (3 * per_client, 3 * per_client)


# ------------------------------------------------------------------------------------------- work of a client round
class _Attach:
    """An algorithm whose attaching operations are a fixed 1000, recording what it was given."""

    def __init__(self):
        self.given = {}

    def attach_flops_per_round(self, **given):
        self.given = given
        return 1000.0


CARD = {"params": 7, "flops_forward": 40, "flops_train": 120, "macs_forward": 20}  # backward: 80 FLOPs = 40 MACs


@pytest.mark.parametrize(
    "setup, samples, steps, processed",
    [
        ({"local_epochs": 2}, 130, 2 * 3, 260),  # E·⌈130/50⌉ steps, E·n samples
        ({"local_epochs": 1, "drop_last": True}, 130, 2, 130),  # ⌊130/50⌋
        ({"local_epochs": 3}, 130.5, 3 * 3, 391.5),  # a mean client size: the steps count whole samples
        ({"local_steps": 4}, 130, 4, 200),  # a step budget: 4 full batches of 50
    ],
)
def test_client_round_work_is_samples_times_one_samples_work_plus_the_attaching_operations(
    setup, samples, steps, processed
):
    """FedTrip §4: n_k·E·W + A_method, W a sample's training FLOPs (fedbench plan) or forward MACs (FedTrip's
    accounting); the method is told the steps, the whole samples and one sample's forward and backward work."""
    spec = RunSpec(algorithm="fedavg", dataset="mnist", model="mlp", partition="iid", batch_size=50, **setup)
    algorithm = _Attach()
    assert client_round_work(spec, samples, CARD, algorithm) == processed * 120 + 1000.0
    assert algorithm.given == {
        "steps": steps,
        "samples": 130,
        "batch_size": 50,
        "num_params": 7,
        "forward_flops": 40,
        "backward_flops": 80,
    }
    assert client_round_work(spec, samples, CARD, algorithm, unit="macs") == processed * 20 + 1000.0
    assert algorithm.given["forward_flops"] == 20 and algorithm.given["backward_flops"] == 40
    with pytest.raises(ValueError, match="^unit 'joules': expected 'flops' or 'macs'$"):
        client_round_work(spec, samples, CARD, algorithm, unit="joules")
