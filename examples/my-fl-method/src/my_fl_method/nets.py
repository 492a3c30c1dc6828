"""The network of ``tiny_cnn``: a ``FedModel``, i.e. ``head ∘ features`` (``encoder``, ``classifier``,
``feature_dim``), so the methods that treat the classifier or the features apart (FedRep, MOON, FedBABU, …) train
it too."""

from fedbench.models.base import FedModel
from torch import nn


class TinyCNN(FedModel):
    """Conv 3×3 (``channels``) → ReLU → max-pool 2 → Linear(``hidden``) → ReLU (the features) → Linear(classes)."""

    def __init__(self, num_classes: int, input_shape: tuple[int, ...], channels: int = 8, hidden: int = 32):
        super().__init__()
        depth, height, width = input_shape
        self.encoder = nn.Sequential(
            nn.Conv2d(depth, channels, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(channels * (height // 2) * (width // 2), hidden),
            nn.ReLU(),
        )
        self.classifier = nn.Linear(hidden, num_classes)
        self.feature_dim = hidden
