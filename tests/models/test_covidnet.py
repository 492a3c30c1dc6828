"""The small COVID-Net-like CNN (``fedbench/models/covidnet.py``), FedTR's stand-in (b): PEPX modules with their 1×1
shortcut, the shape at the recipes' 224×224 and at other sizes (global pooling), head ∘ features = forward."""

from __future__ import annotations

import torch

from fedbench.models.covidnet import PEPX, SmallCovidNet


def test_pepx_is_the_relu_of_its_body_plus_its_projection_shortcut():
    torch.manual_seed(0)
    block = PEPX(8, 16).eval()
    x = torch.randn(2, 8, 6, 6)
    with torch.no_grad():
        torch.testing.assert_close(block(x), (block.body(x) + block.shortcut(x)).relu(), rtol=0, atol=0)
        block.body[-1].weight.zero_()  # the body's last BN to zero: only the shortcut remains
        block.body[-1].bias.zero_()
        torch.testing.assert_close(block(x), block.shortcut(x).relu(), rtol=0, atol=0)
    depthwise = block.body[6]
    assert depthwise.groups == depthwise.in_channels == 12  # 3×3 depthwise on 3/4 of the output width


def test_shapes_at_the_recipes_size_and_any_other():
    with torch.device("meta"):
        model = SmallCovidNet(4, (3, 224, 224)).eval()  # fedtr_table1: COVID-19 at 224×224, 4 classes
        for size in (224, 128):
            x = torch.empty(2, 3, size, size)
            assert model.features(x).shape == (2, 256)
            assert model(x).shape == (2, 4)


def test_head_of_features_is_forward():
    torch.manual_seed(0)
    model = SmallCovidNet(4, (3, 64, 64)).eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        torch.testing.assert_close(model.head(model.features(x)), model(x), rtol=0, atol=0)
    assert model.feature_dim == 256 and len(model.batchnorm_module_names()) == 1 + 4 * 6
