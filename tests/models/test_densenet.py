"""DenseNet-121 (``fedbench/models/densenet.py``, LG-Mix Camelyon17): it computes torchvision's ``densenet121``
exactly (features → ReLU → global average pool → classifier), at the recipes' 96×96 and 2 classes; another channel
count replaces the stem; the ImageNet weights go through ``_pretrained.torchvision_imagenet``."""

from __future__ import annotations

import pytest
import torch
from torchvision.models import densenet121

from fedbench.errors import ConfigError
from fedbench.models import densenet as module
from fedbench.models.densenet import DenseNet121


def test_it_computes_torchvisions_densenet121_with_the_same_weights():
    torch.manual_seed(0)
    reference = densenet121(num_classes=2).eval()
    model = DenseNet121(2, (3, 96, 96)).eval()
    model.encoder.features.load_state_dict(reference.features.state_dict())
    model.classifier.load_state_dict(reference.classifier.state_dict())
    x = torch.randn(2, 3, 96, 96)
    with torch.no_grad():
        expected = reference(x)
        torch.testing.assert_close(model(x), expected, rtol=0, atol=1e-6)
        z = model.features(x)
        assert z.shape == (2, model.feature_dim) == (2, 1024)
        torch.testing.assert_close(model.head(z), model(x), rtol=0, atol=0)


def test_another_channel_count_replaces_the_stem():
    with torch.device("meta"):
        model = DenseNet121(2, (1, 96, 96))
        stem = model.encoder.features.conv0
        assert (stem.in_channels, stem.out_channels, stem.kernel_size, stem.stride) == (1, 64, (7, 7), (2, 2))
        assert model(torch.empty(2, 1, 96, 96)).shape == (2, 2)


def test_pretrained_loads_imagenet_weights_and_replaces_the_head(monkeypatch):
    calls = []

    def fake(builder, weights, name, channels):
        calls.append((weights, name, channels))
        return builder(weights=None)  # the 1000-class torchvision network, as the weights would give

    monkeypatch.setattr(module, "torchvision_imagenet", fake)
    with torch.device("meta"):
        model = DenseNet121(2, (3, 96, 96), pretrained=True)
    assert calls == [(module.DenseNet121_Weights.IMAGENET1K_V1, "densenet121", 3)]
    assert (model.classifier.in_features, model.classifier.out_features) == (1024, 2)


def test_pretrained_with_one_channel_is_a_config_error_before_any_download():
    with pytest.raises(ConfigError, match="3 input channels"):
        DenseNet121(2, (1, 96, 96), pretrained=True)
