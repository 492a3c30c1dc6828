"""The small CNN of pfl-research's CIFAR-10 benchmark (Granqvist et al., NeurIPS 2024 Datasets & Benchmarks;
``simple_cnn`` in pfl-research's ``benchmarks/model/pytorch/cnn.py``), the model its speed comparison with Flower,
FedML, TFF, FedScale and FLUTE trains."""

from __future__ import annotations

from typing import ClassVar

from torch import nn

from fedbench.models.base import FedModel
from fedbench.models.layers import MaxPool2d


class PflSimpleCNN(FedModel):
    """Conv2d(c→32, 3×3) → ReLU → Conv2d(32→64, 3×3) → ReLU → MaxPool 2×2 → Dropout(0.25) → Flatten →
    Linear(64·⌊(H−4)/2⌋·⌊(W−4)/2⌋ → 128) → ReLU → Dropout(0.5), then Linear(128 → classes). Unpadded
    convolutions, so a 32×32 image flattens to 14·14·64 = 12,544.

    The conv and linear weights are Glorot/Xavier-uniform, as pfl-research initialises them to match its TF2
    model (Keras' default); the biases keep PyTorch's default. Split points: ``pool`` after the max-pool
    (64×14×14 at 32×32), ``hidden`` after the hidden layer's dropout (the 128-d features)."""

    split_after: ClassVar[dict[str, str]] = {"pool": "4", "hidden": "9"}
    default_split = "pool"

    def __init__(self, num_classes: int, input_shape: tuple[int, ...]):
        super().__init__()
        channels, height, width = input_shape
        flat = 64 * ((height - 4) // 2) * ((width - 4) // 2)
        self.encoder = nn.Sequential(
            nn.Conv2d(channels, 32, 3),
            nn.ReLU(),
            nn.Conv2d(32, 64, 3),
            nn.ReLU(),
            MaxPool2d(2),
            nn.Dropout(0.25),
            nn.Flatten(),
            nn.Linear(flat, 128),
            nn.ReLU(),
            nn.Dropout(0.5),
        )
        self.classifier = nn.Linear(128, num_classes)
        self.feature_dim = 128
        for module in self.modules():
            if isinstance(module, nn.Conv2d | nn.Linear):
                nn.init.xavier_uniform_(module.weight)
