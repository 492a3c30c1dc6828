"""AlexNet variants: FedTrip's CIFAR-10 AlexNet and the AlexNet-BN that stands in for FedTR's COVID-Net.

torchvision's AlexNet is neither (no BN; a 9216→4096→4096 classifier and an 11×11/4 stem), so both are
written out here.
"""

from __future__ import annotations

from torch import nn

from fedbench.models.base import FedModel
from fedbench.models.layers import MaxPool2d


class AlexNetCifar(FedModel):
    """FedTrip [code ``plato/models/alexnet.py``], CIFAR adaptation (FedTrip spec §2.6).

    Conv(3,64,7,p2)-ReLU-Pool(3,2) → Conv(64,192,5,p2)-ReLU-Pool(3,2) → Conv(192,384,3,p1)-ReLU →
    Conv(384,256,3,p1)-ReLU → Conv(256,256,3,p1)-ReLU → AdaptiveAvgPool(1) → Dropout(0.5) → FC 256→1024-ReLU (= z)
    → Dropout(0.5) → FC 1024→C. The second dropout ends the encoder so that the head is the last Linear alone.
    """

    def __init__(self, num_classes: int, input_shape: tuple[int, ...], dropout: float = 0.5):
        super().__init__()
        channels = input_shape[0]
        self.encoder = nn.Sequential(
            nn.Conv2d(channels, 64, 7, padding=2),
            nn.ReLU(),
            MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2),
            nn.ReLU(),
            MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(384, 256, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(256, 256, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Dropout(dropout),
            nn.Linear(256, 1024),
            nn.ReLU(),
            nn.Dropout(dropout),
        )
        self.classifier = nn.Linear(1024, num_classes)
        self.feature_dim = 1024


class AlexNetBN(FedModel):
    """FedBN / PersonalizedFL AlexNet with BatchNorm (FedTR spec §2.5, COVID-19 stand-in (a)).

    Conv(3,64,11,s4,p2)-BN-ReLU-Pool(3,2) → Conv(64,192,5,p2)-BN-ReLU-Pool(3,2) → Conv(192,384,3,p1)-BN-ReLU →
    Conv(384,256,3,p1)-BN-ReLU → Conv(256,256,3,p1)-BN-ReLU-Pool(3,2) → AdaptiveAvgPool(6,6) →
    FC 9216→4096-BN1d-ReLU → FC 4096→4096-BN1d-ReLU (= z) → FC 4096→C.
    """

    def __init__(self, num_classes: int, input_shape: tuple[int, ...]):
        super().__init__()
        channels = input_shape[0]
        self.encoder = nn.Sequential(
            nn.Conv2d(channels, 64, 11, stride=4, padding=2),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            MaxPool2d(3, 2),
            nn.Conv2d(64, 192, 5, padding=2),
            nn.BatchNorm2d(192),
            nn.ReLU(),
            MaxPool2d(3, 2),
            nn.Conv2d(192, 384, 3, padding=1),
            nn.BatchNorm2d(384),
            nn.ReLU(),
            nn.Conv2d(384, 256, 3, padding=1),
            nn.BatchNorm2d(256),
            nn.ReLU(),
            nn.Conv2d(256, 256, 3, padding=1),
            nn.BatchNorm2d(256),
            nn.ReLU(),
            MaxPool2d(3, 2),
            nn.AdaptiveAvgPool2d((6, 6)),
            nn.Flatten(),
            nn.Linear(256 * 6 * 6, 4096),
            nn.BatchNorm1d(4096),
            nn.ReLU(),
            nn.Linear(4096, 4096),
            nn.BatchNorm1d(4096),
            nn.ReLU(),
        )
        self.classifier = nn.Linear(4096, num_classes)
        self.feature_dim = 4096
