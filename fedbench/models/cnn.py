"""Small plain CNNs named by the specs: FedTR's CIFAR-10 CNN and PAMAP2-Net, FedBN's digits CNN (LG-Mix)."""

from __future__ import annotations

from torch import nn

from fedbench.models.base import FedModel
from fedbench.models.layers import MaxPool2d


class FedDCCifarCNN(FedModel):
    """FedDyn/FedDC ``cifar10_LeNet`` (FedTR spec §2.5, [proposal]: the co-author's codebase).

    Conv(3,64,5)-ReLU-Pool → Conv(64,64,5)-ReLU-Pool → FC 1600→384-ReLU → FC 384→192-ReLU (= z) → FC 192→C.
    """

    def __init__(self, num_classes: int, input_shape: tuple[int, ...]):
        super().__init__()
        channels, height, width = input_shape
        flat = 64 * (((height - 4) // 2 - 4) // 2) * (((width - 4) // 2 - 4) // 2)
        self.encoder = nn.Sequential(
            nn.Conv2d(channels, 64, 5),
            nn.ReLU(),
            MaxPool2d(2),
            nn.Conv2d(64, 64, 5),
            nn.ReLU(),
            MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(flat, 384),
            nn.ReLU(),
            nn.Linear(384, 192),
            nn.ReLU(),
        )
        self.classifier = nn.Linear(192, num_classes)
        self.feature_dim = 192


class PamapNet(FedModel):
    """PersonalizedFL ``PamapModel`` (FedTR spec §2.5): input (B, 27, 1, 200), IMU channels as conv channels.

    Conv(27,16,(1,9))-BN-ReLU-Pool(1,2) → Conv(16,32,(1,9))-BN-ReLU-Pool(1,2) → FC 1408→64-ReLU (= z) → FC 64→C.
    """

    def __init__(self, num_classes: int, input_shape: tuple[int, ...]):
        super().__init__()
        channels, height, length = input_shape
        flat = 32 * height * (((length - 8) // 2 - 8) // 2)
        self.encoder = nn.Sequential(
            nn.Conv2d(channels, 16, (1, 9)),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            MaxPool2d((1, 2), stride=2),
            nn.Conv2d(16, 32, (1, 9)),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            MaxPool2d((1, 2), stride=2),
            nn.Flatten(),
            nn.Linear(flat, 64),
            nn.ReLU(),
        )
        self.classifier = nn.Linear(64, num_classes)
        self.feature_dim = 64


class FedBNDigitCNN(FedModel):
    """FedBN's ``DigitModel`` (LG-Mix spec §2.3): 3 conv + 3 FC, BN after the first five layers.

    conv 3→64 k5 p2, BN, ReLU, pool → conv 64→64 k5 p2, BN, ReLU, pool → conv 64→128 k5 p2, BN, ReLU →
    FC 6272→2048, BN1d, ReLU → FC 2048→512, BN1d, ReLU (= h, 512-d) → FC 512→C.
    """

    def __init__(self, num_classes: int, input_shape: tuple[int, ...]):
        super().__init__()
        channels, height, width = input_shape
        flat = 128 * (height // 4) * (width // 4)
        self.encoder = nn.Sequential(
            nn.Conv2d(channels, 64, 5, padding=2),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            MaxPool2d(2),
            nn.Conv2d(64, 64, 5, padding=2),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            MaxPool2d(2),
            nn.Conv2d(64, 128, 5, padding=2),
            nn.BatchNorm2d(128),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(flat, 2048),
            nn.BatchNorm1d(2048),
            nn.ReLU(),
            nn.Linear(2048, 512),
            nn.BatchNorm1d(512),
            nn.ReLU(),
        )
        self.classifier = nn.Linear(512, num_classes)
        self.feature_dim = 512
