"""ImageNet weights for torchvision backbones (``fedbench/models/_pretrained.py``): the builder gets the weights
without a progress bar; a non-RGB input and weights that cannot be loaded are one-line errors that say what to do."""

from __future__ import annotations

import types

import pytest
import torch

from fedbench.errors import ConfigError, DataError
from fedbench.models._pretrained import torchvision_imagenet

WEIGHTS = types.SimpleNamespace(url="https://download.pytorch.org/models/net-1234.pth")


def test_the_builder_gets_the_weights_quietly():
    calls = []
    net = torch.nn.Linear(2, 2)

    def builder(**kwargs):
        calls.append(kwargs)
        return net

    assert torchvision_imagenet(builder, WEIGHTS, "net", 3) is net
    assert calls == [{"weights": WEIGHTS, "progress": False}]


def test_weights_need_three_channels_and_nothing_is_built():
    def builder(**kwargs):
        raise AssertionError("built")

    with pytest.raises(
        ConfigError, match=r"^net: ImageNet weights need 3 input channels, got 1; set pretrained = false$"
    ):
        torchvision_imagenet(builder, WEIGHTS, "net", 1)


def test_unavailable_weights_name_the_file_where_to_put_it_and_the_alternative():
    def offline(**kwargs):
        raise OSError("no network")

    with pytest.raises(DataError) as error:
        torchvision_imagenet(offline, WEIGHTS, "net", 3)
    message = str(error.value)
    assert message.startswith("net: cannot load ImageNet weights (OSError: no network)")
    assert f"place net-1234.pth from {WEIGHTS.url} in {torch.hub.get_dir()}/checkpoints" in message
    assert message.endswith("or set pretrained = false") and "\n" not in message
    assert isinstance(error.value.__cause__, OSError)
