"""pfl-research's CIFAR-10 benchmark CNN (``fedbench/models/pfl_cnn.py``): its shapes at 32×32×3, its parameter
count by layer arithmetic, the Glorot/Xavier-uniform weights (biases at PyTorch's default), dropout that acts in
training only, and the named split points composing to the whole model."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from fedbench.models import build_model
from fedbench.models.pfl_cnn import PflSimpleCNN


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_parameter_count_is_the_layer_arithmetic():
    conv1 = 3 * 32 * 9 + 32
    conv2 = 32 * 64 * 9 + 64
    fc = 12_544 * 128 + 128
    out = 128 * 10 + 10
    assert (conv1, conv2, fc, out) == (896, 18_496, 1_605_760, 1_290)
    assert n_params(PflSimpleCNN(10, (3, 32, 32))) == conv1 + conv2 + fc + out == 1_626_442
    assert n_params(build_model("pfl_cnn", 10, (3, 32, 32))) == 1_626_442
    # another input: the flattened size follows the unpadded convolutions and the pool
    assert n_params(PflSimpleCNN(62, (1, 28, 28))) == (32 * 9 + 32) + conv2 + (12 * 12 * 64 * 128 + 128) + (
        128 * 62 + 62
    )


def test_shapes_and_head_of_features_is_forward():
    torch.manual_seed(0)
    model = PflSimpleCNN(10, (3, 32, 32)).eval()
    x = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        assert model.encoder[:5](x).shape == (4, 64, 14, 14)
        assert model.encoder[:7](x).shape == (4, 12_544)
        z = model.features(x)
        assert z.shape == (4, model.feature_dim) == (4, 128)
        logits = model(x)
        assert logits.shape == (4, 10)
        torch.testing.assert_close(model.head(z), logits, rtol=0, atol=0)


def test_layers_are_the_benchmark_s():
    model = PflSimpleCNN(10, (3, 32, 32))
    kinds = [type(m).__name__ for m in model.encoder]
    assert kinds == ["Conv2d", "ReLU", "Conv2d", "ReLU", "MaxPool2d", "Dropout", "Flatten", "Linear", "ReLU", "Dropout"]
    assert [m.p for m in model.encoder if isinstance(m, nn.Dropout)] == [0.25, 0.5]
    convs = [m for m in model.encoder if isinstance(m, nn.Conv2d)]
    assert [(c.kernel_size, c.padding) for c in convs] == [((3, 3), (0, 0))] * 2


def test_weights_are_xavier_uniform_and_biases_pytorch_default():
    """Xavier-uniform draws from U(−a, a), a = √(6 / (fan_in + fan_out)), variance a²/3; PyTorch's default
    (Kaiming-uniform with a = √5) gives the weights bound 1/√fan_in instead, and the biases U(±1/√fan_in)."""
    torch.manual_seed(0)
    model = PflSimpleCNN(10, (3, 32, 32))
    layers = [m for m in model.modules() if isinstance(m, nn.Conv2d | nn.Linear)]
    assert len(layers) == 4
    for layer in layers:
        fan_in, fan_out = nn.init._calculate_fan_in_and_fan_out(layer.weight)
        bound = math.sqrt(6 / (fan_in + fan_out))
        weight = layer.weight.detach()
        assert weight.abs().max() <= bound
        assert weight.abs().max() > 0.95 * bound  # the draws reach the bound: not a narrower default
        assert weight.var().item() == pytest.approx(bound**2 / 3, rel=0.1)
        assert layer.bias.detach().abs().max() <= 1 / math.sqrt(fan_in)
    # PyTorch's default bound differs from Xavier's for every layer here, so the test tells the two apart
    for layer in layers:
        fan_in, fan_out = nn.init._calculate_fan_in_and_fan_out(layer.weight)
        assert abs(1 / math.sqrt(fan_in) - math.sqrt(6 / (fan_in + fan_out))) > 0.01 * math.sqrt(6 / (fan_in + fan_out))


def test_dropout_acts_in_training_only():
    torch.manual_seed(0)
    model = PflSimpleCNN(10, (3, 32, 32))
    x = torch.randn(8, 3, 32, 32)
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model(x), model(x), rtol=0, atol=0)
        evaluated = model.features(x)
    model.train()
    with torch.no_grad():
        first, second = model.features(x), model.features(x)
    assert not torch.equal(first, second)
    assert not torch.equal(first, evaluated)
    # dropout 0.5 after the hidden ReLU: about half of the positive units are zeroed, the rest doubled
    positive = evaluated > 0
    kept = first[positive] != 0
    assert 0.3 < kept.float().mean().item() < 0.7


@pytest.mark.parametrize("split,shape", [("pool", (64, 14, 14)), ("hidden", (128,))])
def test_split_points_compose_to_the_whole_model(split, shape):
    torch.manual_seed(0)
    model = PflSimpleCNN(10, (3, 32, 32)).eval()
    assert model.split_points() == ["pool", "hidden"] and model.default_split == "pool"
    x = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        h = model.low(x, split)
        assert h.shape == (3, *shape)
        torch.testing.assert_close(model.high(h, split), model(x), rtol=0, atol=0)
