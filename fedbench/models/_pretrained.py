"""Building a torchvision network with its ImageNet weights (LG-Mix backbones, ``pretrained = true``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch import nn

from fedbench.errors import ConfigError, DataError

Net = TypeVar("Net", bound=nn.Module)


def torchvision_imagenet(builder: Callable[..., Net], weights: Any, model_name: str, channels: int) -> Net:
    """``builder(weights=weights)`` (1000-class head), with a one-line error when the weights are unavailable.

    torchvision reads the weights from torch hub's cache (``<torch.hub.get_dir()>/checkpoints``) and downloads them
    there when the machine is online. The caller replaces the 1000-class head.
    """
    if channels != 3:
        raise ConfigError(
            f"{model_name}: ImageNet weights need 3 input channels, got {channels}; set pretrained = false"
        )
    try:
        return builder(weights=weights, progress=False)
    except Exception as exc:  # offline without a cached file, or a corrupt file
        file_name = weights.url.rsplit("/", 1)[-1]
        raise DataError(
            f"{model_name}: cannot load ImageNet weights ({type(exc).__name__}: {exc}); place {file_name} from "
            f"{weights.url} in {torch.hub.get_dir()}/checkpoints or set pretrained = false"
        ) from exc
