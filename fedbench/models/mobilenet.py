"""MobileNet v1, CIFAR variant (FedBABU / LG-FedAvg ``MobileNetCifar``): FedDr+'s CIFAR-100 model.

torchvision has no MobileNet v1, so the network is assembled from torchvision's ``Conv2dNormActivation``
(conv → BN → ReLU) blocks, the same building block its MobileNet v2/v3 use.
"""

from __future__ import annotations

from collections import OrderedDict
from functools import partial

from torch import nn
from torchvision.ops.misc import Conv2dNormActivation

from fedbench.models.base import FedModel
from fedbench.models.heads import build_classifier

# FedDr+ spec §2.4: 13 depthwise-separable blocks; (width, stride), stride 1 when only a width is given.
MOBILENET_CIFAR_CFG = (64, (128, 2), 128, (256, 2), 256, (512, 2), 512, 512, 512, 512, 512, (1024, 2), 1024)


class MobileNetCifar(FedModel):
    """Stem Conv3×3(3→32, s1, no bias)-BN-ReLU → 13 × [depthwise 3×3 (groups=in, no bias)-BN-ReLU → pointwise
    1×1-BN-ReLU] → average pool (2×2 map at 32×32 input) → flatten 1024 (= z) → classifier.

    ``track_running_stats=False`` (the default, FedDr+ [code]) makes every BN use the current batch's statistics,
    also in ``eval()``, and leaves no BN buffers. The [code] pools with ``avg_pool2d(2)`` on the 2×2 map; an
    adaptive pool to 1×1 is the same there and also works for other input sizes.
    """

    def __init__(
        self,
        num_classes: int,
        input_shape: tuple[int, ...],
        classifier: str = "linear",
        classifier_bias: bool | None = None,
        normalize_features: bool | None = None,
        track_running_stats: bool = False,
    ):
        super().__init__()
        norm = partial(nn.BatchNorm2d, track_running_stats=track_running_stats)
        blocks = []
        in_channels = 32
        for entry in MOBILENET_CIFAR_CFG:
            out_channels, stride = entry if isinstance(entry, tuple) else (entry, 1)
            blocks.append(
                nn.Sequential(
                    OrderedDict(
                        depthwise=Conv2dNormActivation(
                            in_channels, in_channels, 3, stride, groups=in_channels, norm_layer=norm
                        ),
                        pointwise=Conv2dNormActivation(in_channels, out_channels, 1, norm_layer=norm),
                    )
                )
            )
            in_channels = out_channels
        self.encoder = nn.Sequential(
            OrderedDict(
                stem=Conv2dNormActivation(input_shape[0], 32, 3, 1, norm_layer=norm),
                blocks=nn.Sequential(*blocks),
                pool=nn.AdaptiveAvgPool2d(1),
                flatten=nn.Flatten(),
            )
        )
        self.classifier = build_classifier(classifier, in_channels, num_classes, classifier_bias, normalize_features)
        self.feature_dim = in_channels
