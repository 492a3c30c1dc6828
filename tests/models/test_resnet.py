"""ResNet (``fedbench/models/resnet.py``): FedImpro's named split points of ResNet-18 and its init options."""

from __future__ import annotations

import math

import pytest
import torch

from model_fixtures import build_paper


@pytest.mark.parametrize(
    "split,shape",
    [
        ("layer1", (64, 32, 32)),
        ("layer2", (128, 16, 16)),
        ("layer3", (256, 8, 8)),
        ("layer4", (512, 1, 1)),
    ],
)
def test_resnet18_split_points(split, shape, models):
    # FedImpro spec §1.3: after the 5th/9th/13th/17th conv; flattened D = 65,536 / 32,768 / 16,384 / 512.
    model = models("resnet18")
    assert model.split_points() == ["layer1", "layer2", "layer3", "layer4"]
    x = torch.randn(2, 3, 32, 32)
    with torch.inference_mode():
        h = model.low(x, split)
        assert h.shape == (2, *shape)
        torch.testing.assert_close(model.high(h, split), model(x), rtol=0, atol=0)


def test_resnet18_split_gradients_flow_through_both_parts():
    model = build_paper("resnet18")
    h = model.low(torch.randn(2, 3, 32, 32), "layer2")
    model.high(h, "layer2").sum().backward()
    assert model.encoder.conv1.weight.grad is not None and model.classifier.weight.grad is not None


def test_resnet_init_options():
    # FedImpro [code] keeps PyTorch's default init; "torchvision" uses kaiming fan_out (std sqrt(2/fan_out)).
    weight = build_paper("resnet18", init="torchvision").encoder.layer1[0].conv1.weight
    assert abs(weight.std().item() - math.sqrt(2 / (64 * 9))) < 0.01
    weight = build_paper("resnet18").encoder.layer1[0].conv1.weight
    assert weight.abs().max().item() <= 1 / math.sqrt(64 * 9) + 1e-6  # kaiming-uniform a=√5 bound
