"""The U-Net (``fedbench/models/unet.py``, LG-Mix Retinal): med-air's parameter count, the per-pixel shapes at the
recipe's 3×256×256 with 2 logit maps, head ∘ features = forward, its skip connections, and sizes it cannot pool."""

from __future__ import annotations

import pytest
import torch

from fedbench.errors import ConfigError
from fedbench.models.unet import UNet


def test_parameter_count_is_med_airs_unet_with_two_outputs():
    with torch.device("meta"):
        model = UNet(2, (3, 256, 256))
    # mateuszbuda/med-air U-Net, init_features 32, 1 output: 7,763,041; a second output channel adds 32 + 1
    assert sum(p.numel() for p in model.parameters()) == 7_763_041 + 33


def test_shapes_at_the_recipes_configuration():
    with torch.device("meta"):
        model = UNet(2, (3, 256, 256)).eval()  # lgmix_table3: fundus images at 256×256, optic disc and cup
        x = torch.empty(2, 3, 256, 256)
        assert model.features(x).shape == (2, 32, 256, 256)
        assert model(x).shape == (2, 2, 256, 256)


def test_head_of_features_is_forward_and_a_pixel_sees_its_neighbourhood_through_the_skips():
    torch.manual_seed(0)
    model = UNet(2, (1, 32, 32), init_features=4).eval()
    x = torch.randn(1, 1, 32, 32)
    with torch.no_grad():
        z = model.features(x)
        torch.testing.assert_close(model.head(z), model(x), rtol=0, atol=0)
        assert z.shape == (1, 4, 32, 32)
        # the head is a 1×1 convolution: each pixel's logits depend on that pixel's features alone
        one = torch.zeros_like(z)
        one[..., 5, 7] = z[..., 5, 7]
        bias = model.classifier.bias.view(1, -1)
        torch.testing.assert_close(model.head(one)[..., 5, 7], model.head(z)[..., 5, 7], rtol=0, atol=0)
        assert torch.equal(model.head(one)[..., 0, 0], bias.expand(1, 2))


def test_unequal_sides_work_and_sizes_not_divisible_by_16_are_refused():
    with torch.device("meta"):
        assert UNet(3, (1, 32, 48))(torch.empty(1, 1, 32, 48)).shape == (1, 3, 32, 48)
    with pytest.raises(ConfigError, match="divisible by 16"):
        UNet(2, (3, 256, 250))
