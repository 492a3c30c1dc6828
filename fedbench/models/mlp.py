"""Multi-layer perceptron: FedTrip's MLP for MNIST/FMNIST (Flatten → 784→100 → ReLU → 100→C)."""

from __future__ import annotations

import math
from typing import Annotated

from torch import nn

from fedbench.errors import ConfigError
from fedbench.models._registry import register_model
from fedbench.models.base import FedModel
from fedbench.spec import HashNeutral


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


@register_model(
    "mlp",
    papers=("fedtrip",),
    input_shape=(1, 28, 28),
    num_classes=10,
    description="FedTrip MLP: 784→100→ReLU→10 (MNIST/FMNIST); hidden widths configurable",
    feature="100-d, first FC after ReLU",
)
def mlp(
    num_classes: int,
    input_shape: tuple[int, ...],
    hidden: tuple[int, ...] | list[int] = (100,),
    batch_norm: Annotated[bool, HashNeutral(False)] = False,  # added later (LG-Mix BCI): existing specs keep their hash
) -> FedModel:
    """``batch_norm``: a BatchNorm1d after each hidden Linear, as the FC layers of FedBN's DigitModel (so that FedBN
    and LG-Mix's mixed BN statistics mean something on vector inputs)."""
    return MLP(num_classes, input_shape, tuple(int(h) for h in hidden), batch_norm)
