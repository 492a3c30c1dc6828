"""Multi-layer perceptron: FedTrip's MLP for MNIST/FMNIST (Flatten → 784→100 → ReLU → 100→C)."""

from __future__ import annotations

import math

from torch import nn

from fedbench.errors import ConfigError
from fedbench.models.base import FedModel


class MLP(FedModel):
    """Flatten → [Linear → (BatchNorm1d →) ReLU] per hidden width (the last one is z) → Linear(classes)."""

    def __init__(
        self,
        num_classes: int,
        input_shape: tuple[int, ...],
        hidden: tuple[int, ...] = (100,),
        batch_norm: bool = False,
    ):
        super().__init__()
        if not hidden:
            raise ConfigError("mlp needs at least one hidden layer (hidden = [100])")
        layers: list[nn.Module] = [nn.Flatten()]
        width = math.prod(input_shape)
        for out in hidden:
            layers += [nn.Linear(width, out), *([nn.BatchNorm1d(out)] if batch_norm else []), nn.ReLU()]
            width = out
        self.encoder = nn.Sequential(*layers)
        self.classifier = nn.Linear(width, num_classes)
        self.feature_dim = width
