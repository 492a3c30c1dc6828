"""A small COVID-Net-like CNN: FedTR's COVID-19 stand-in (b) (FedTR spec §2.5).

COVID-Net (Wang et al. 2020, TF, 480×480) is built from PEPX modules — 1×1 projection, 1×1 expansion,
3×3 depthwise, 1×1 projection, 1×1 extension — with 1×1 shortcuts and FC layers at the end. This toolkit
proposal keeps that module design at a small width (one PEPX module per stage, four stages) so a 20-client
FedTR run stays cheap. It is NOT the paper's model; tables mark its cells "not faithful".
"""

from __future__ import annotations

from torch import nn

from fedbench.models.base import FedModel
from fedbench.models.layers import MaxPool2d


def _conv_bn_relu(in_channels: int, out_channels: int, kernel_size: int, groups: int = 1) -> list[nn.Module]:
    return [
        nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2, groups=groups, bias=False),
        nn.BatchNorm2d(out_channels),
        nn.ReLU(),
    ]


class PEPX(nn.Module):
    """Projection-Expansion-Projection-eXtension with a 1×1 shortcut (projection) around it."""

    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        low, mid = max(out_channels // 2, 1), max(3 * out_channels // 4, 1)
        self.body = nn.Sequential(
            *_conv_bn_relu(in_channels, low, 1),  # first-stage projection
            *_conv_bn_relu(low, mid, 1),  # expansion
            *_conv_bn_relu(mid, mid, 3, groups=mid),  # depthwise representation
            *_conv_bn_relu(mid, low, 1),  # second-stage projection
            nn.Conv2d(low, out_channels, 1, bias=False),  # extension
            nn.BatchNorm2d(out_channels),
        )
        self.shortcut = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, bias=False), nn.BatchNorm2d(out_channels))
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.body(x) + self.shortcut(x))


class SmallCovidNet(FedModel):
    """Stem Conv 7×7/2 (32) → MaxPool → PEPX 64 → Pool → PEPX 128 → Pool → PEPX 256 → Pool → PEPX 256 →
    global average pool → FC 256→256-ReLU (= z) → FC 256→C."""

    def __init__(self, num_classes: int, input_shape: tuple[int, ...], widths: tuple[int, ...] = (64, 128, 256, 256)):
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv2d(input_shape[0], 32, 7, stride=2, padding=3, bias=False),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            MaxPool2d(2),
        ]
        in_channels = 32
        for stage, width in enumerate(widths):
            if stage:
                layers.append(MaxPool2d(2))
            layers.append(PEPX(in_channels, width))
            in_channels = width
        layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(in_channels, 256), nn.ReLU()]
        self.encoder = nn.Sequential(*layers)
        self.classifier = nn.Linear(256, num_classes)
        self.feature_dim = 256
