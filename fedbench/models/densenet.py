"""DenseNet-121 from torchvision (LG-Mix, Camelyon17 96×96 patches)."""

from __future__ import annotations

from collections import OrderedDict

from torch import nn
from torchvision.models import DenseNet121_Weights
from torchvision.models import densenet121 as torchvision_densenet121

from fedbench.models._pretrained import torchvision_imagenet
from fedbench.models.base import FedModel


class DenseNet121(FedModel):
    """torchvision ``densenet121``: ``features`` → ReLU → global average pool → 1024-d h → ``Linear(1024, C)``.

    Plain BN as in torchvision (LG-Mix spec §2.3: HarmoFL's affine-free BN and AmpNorm are not copied).
    """

    def __init__(self, num_classes: int, input_shape: tuple[int, ...], pretrained: bool = False):
        super().__init__()
        channels = input_shape[0]
        if pretrained:
            net = torchvision_imagenet(
                torchvision_densenet121, DenseNet121_Weights.IMAGENET1K_V1, "densenet121", channels
            )
            net.classifier = nn.Linear(net.classifier.in_features, num_classes)
        else:
            net = torchvision_densenet121(num_classes=num_classes)
            if channels != 3:
                net.features.conv0 = nn.Conv2d(channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
                nn.init.kaiming_normal_(net.features.conv0.weight)
        # torchvision's DenseNet.forward: features → relu → adaptive_avg_pool2d(1) → flatten → classifier
        self.encoder = nn.Sequential(
            OrderedDict(
                features=net.features,
                relu=nn.ReLU(),
                pool=nn.AdaptiveAvgPool2d(1),
                flatten=nn.Flatten(),
            )
        )
        self.classifier = net.classifier
        self.feature_dim = net.classifier.in_features
