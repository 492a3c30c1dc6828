"""Small models for scikit-learn's 8×8 digits (the quickstart)."""

from __future__ import annotations

import math
from typing import ClassVar

from torch import nn

from fedbench.models.base import FedModel
from fedbench.models.layers import MaxPool2d


class DigitsMLP(FedModel):
    """Flatten → Linear(64·c, hidden) → ReLU → Linear(hidden, classes)."""

    def __init__(self, num_classes: int, input_shape: tuple[int, ...], hidden: int = 128):
        super().__init__()
        self.encoder = nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), hidden), nn.ReLU())
        self.classifier = nn.Linear(hidden, num_classes)
        self.feature_dim = hidden


class DigitsCNN(FedModel):
    """Two 3×3 conv layers (32, 64 channels) with ReLU, one 2×2 max-pool, a hidden layer, a linear head.
    Split points (FedImpro tests): ``pool`` after the max-pool (64×4×4), ``hidden`` after the hidden ReLU."""

    split_after: ClassVar[dict[str, str]] = {"pool": "4", "hidden": "7"}
    default_split = "pool"

    def __init__(self, num_classes: int, input_shape: tuple[int, ...], width: int = 32, hidden: int = 128):
        super().__init__()
        channels, height, width_px = input_shape
        self.encoder = nn.Sequential(
            nn.Conv2d(channels, width, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, padding=1),
            nn.ReLU(),
            MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(2 * width * (height // 2) * (width_px // 2), hidden),
            nn.ReLU(),
        )
        self.classifier = nn.Linear(hidden, num_classes)
        self.feature_dim = hidden
