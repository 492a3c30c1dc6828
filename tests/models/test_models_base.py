"""``fedbench/models/base.py``'s ``FedModel``: named split points (``low`` / ``high``) and an unknown one."""

from __future__ import annotations

import pytest
import torch

from fedbench.errors import ConfigError
from model_fixtures import build_meta


def test_other_split_points(models):
    with torch.inference_mode():
        assert models("resnet50").low(torch.randn(2, 3, 32, 32), "layer2").shape == (2, 512, 16, 16)
        x = torch.randn(2, 3, 32, 32)
        for name, shape in (("vgg9", (256, 4, 4)), ("vgg11", (512, 1, 1))):
            model = models(name)
            assert model.split_points() == ["conv"]
            h = model.low(x, "conv")
            assert h.shape == (2, *shape)
            torch.testing.assert_close(model.high(h, "conv"), model(x), rtol=0, atol=0)


def test_unknown_split_point_is_a_config_error():
    with pytest.raises(ConfigError, match="layer2"):
        build_meta("resnet18").low(torch.empty(1, 3, 32, 32, device="meta"), "layer5")
    with pytest.raises(ConfigError, match="none"):
        build_meta("lenet5").low(torch.empty(1, 1, 28, 28, device="meta"), "layer1")
