"""The VGG family (``fedbench/models/vgg.py``): VGG-11 (FedDr+ CIFAR-10, every classifier kind the recipes use;
FedImpro's dropout variant) and VGG-9 = FedMA's ModerateCNN — shapes, head ∘ features = forward, the ``conv`` split
point composing to the whole model, the conv init FedDr+'s code uses."""

from __future__ import annotations

import math

import pytest
import torch

from fedbench.models.vgg import VGG9, VGG11


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("classifier", ["linear", "etf", "orthonormal", "fedetf"])  # feddrplus_table2
def test_vgg11_with_each_classifier_the_recipes_use(classifier):
    torch.manual_seed(0)
    model = VGG11(10, (3, 32, 32), classifier=classifier).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        z = model.features(x)
        assert z.shape == (2, 512) and model.feature_dim == 512
        logits = model(x)
        assert logits.shape == (2, 10)
        torch.testing.assert_close(model.head(z), logits, rtol=0, atol=0)
    body = n_params(model) - sum(p.numel() for p in model.classifier.parameters())
    convs = [(3, 64), (64, 128), (128, 256), (256, 256), (256, 512), (512, 512), (512, 512), (512, 512)]
    assert body == sum(9 * i * o + o for i, o in convs) + 2 * (512 * 512 + 512)


@pytest.mark.parametrize("build,flat", [(VGG11, 512), (VGG9, 4096)])
def test_the_conv_split_point_composes_to_the_whole_model(build, flat):
    torch.manual_seed(0)
    model = build(10, (3, 32, 32)).eval()
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        h = model.low(x, "conv")
        assert h.flatten(1).shape == (2, flat)
        torch.testing.assert_close(model.high(h, "conv"), model(x), rtol=0, atol=0)
        torch.testing.assert_close(model.high_features(h, "conv"), model.features(x), rtol=0, atol=0)


def test_vgg11_dropout_puts_one_dropout_before_each_hidden_fc():
    assert not any(isinstance(m, torch.nn.Dropout) for m in VGG11(10, (3, 32, 32)).modules())
    fc = VGG11(10, (3, 32, 32), dropout=0.5).encoder.fc
    assert [type(m).__name__ for m in fc] == ["Dropout", "Linear", "ReLU", "Dropout", "Linear", "ReLU"]
    assert all(m.p == 0.5 for m in fc if isinstance(m, torch.nn.Dropout))


def test_vgg11_conv_init_is_feddrplus_code():
    """FedDr+ spec §2.4 [code]: conv weights ~ N(0, √(2/(k·k·out))), conv biases 0."""
    torch.manual_seed(0)
    model = VGG11(10, (3, 32, 32))
    convs = [m for m in model.encoder.conv if isinstance(m, torch.nn.Conv2d)]
    assert len(convs) == 8
    for conv in convs[1:]:  # (the first has too few weights for a close estimate)
        assert torch.equal(conv.bias, torch.zeros_like(conv.bias))
        assert conv.weight.std().item() == pytest.approx(math.sqrt(2 / (9 * conv.out_channels)), rel=0.05)


def test_other_channel_counts_and_vgg9_shapes():
    with torch.device("meta"):
        assert VGG11(10, (1, 32, 32))(torch.empty(2, 1, 32, 32)).shape == (2, 10)
        model = VGG9(10, (3, 32, 32)).eval()  # fedimpro_table9: CIFAR-10
        x = torch.empty(2, 3, 32, 32)
        assert model.features(x).shape == (2, 512) and model(x).shape == (2, 10)
        assert VGG9(10, (1, 32, 32))(torch.empty(2, 1, 32, 32)).shape == (2, 10)
