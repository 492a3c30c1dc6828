"""U-Net for fundus optic disc/cup segmentation (LG-Mix, Retinal; med-air IOP-FL/HarmoFL U-Net).

torchvision has no U-Net, so it is written out: init_features = 32, four down/up levels (32-64-128-256,
bottleneck 512), each block 2 × (3×3 conv without bias → BN → ReLU), 2×2 transposed-conv upsampling with
skip concatenation, and a final 1×1 conv.
"""

from __future__ import annotations

from collections import OrderedDict

import torch
from torch import nn

from fedbench.errors import ConfigError
from fedbench.models.base import FedModel
from fedbench.models.layers import MaxPool2d


def _block(in_channels: int, features: int) -> nn.Sequential:
    return nn.Sequential(
        OrderedDict(
            conv1=nn.Conv2d(in_channels, features, 3, padding=1, bias=False),
            norm1=nn.BatchNorm2d(features),
            relu1=nn.ReLU(),
            conv2=nn.Conv2d(features, features, 3, padding=1, bias=False),
            norm2=nn.BatchNorm2d(features),
            relu2=nn.ReLU(),
        )
    )


class UNetBody(nn.Module):
    """Everything but the final 1×1 conv: image (B, c, H, W) → decoder-1 features (B, f, H, W)."""

    def __init__(self, in_channels: int, features: int):
        super().__init__()
        f = features
        self.encoder1, self.encoder2 = _block(in_channels, f), _block(f, 2 * f)
        self.encoder3, self.encoder4 = _block(2 * f, 4 * f), _block(4 * f, 8 * f)
        self.pool = MaxPool2d(2)
        self.bottleneck = _block(8 * f, 16 * f)
        self.upconv4, self.decoder4 = nn.ConvTranspose2d(16 * f, 8 * f, 2, stride=2), _block(16 * f, 8 * f)
        self.upconv3, self.decoder3 = nn.ConvTranspose2d(8 * f, 4 * f, 2, stride=2), _block(8 * f, 4 * f)
        self.upconv2, self.decoder2 = nn.ConvTranspose2d(4 * f, 2 * f, 2, stride=2), _block(4 * f, 2 * f)
        self.upconv1, self.decoder1 = nn.ConvTranspose2d(2 * f, f, 2, stride=2), _block(2 * f, f)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        enc1 = self.encoder1(x)
        enc2 = self.encoder2(self.pool(enc1))
        enc3 = self.encoder3(self.pool(enc2))
        enc4 = self.encoder4(self.pool(enc3))
        dec = self.bottleneck(self.pool(enc4))
        dec = self.decoder4(torch.cat((self.upconv4(dec), enc4), dim=1))
        dec = self.decoder3(torch.cat((self.upconv3(dec), enc3), dim=1))
        dec = self.decoder2(torch.cat((self.upconv2(dec), enc2), dim=1))
        return self.decoder1(torch.cat((self.upconv1(dec), enc1), dim=1))


class UNet(FedModel):
    """features(x) = decoder-1 output (B, f, H, W), the input of the final 1×1 conv (LG-Mix spec A15: each pixel
    is a sample, or pool it globally); head = that 1×1 conv → (B, num_classes, H, W) logits.

    The med-air code applies a sigmoid in ``forward``; here the model returns logits and the loss/metric applies
    the sigmoid (numerically safer, same predictions at threshold 0.5 ⇔ logit 0).
    """

    def __init__(self, num_classes: int, input_shape: tuple[int, ...], init_features: int = 32):
        super().__init__()
        channels, height, width = input_shape
        if height % 16 or width % 16:
            raise ConfigError(f"unet needs height and width divisible by 16 (4 poolings), got {height}×{width}")
        self.encoder = UNetBody(channels, init_features)
        self.classifier = nn.Conv2d(init_features, num_classes, kernel_size=1)
        self.feature_dim = init_features
