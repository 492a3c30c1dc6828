"""ResNets from torchvision: CIFAR-style ResNet-18/50 (FedImpro) and ImageNet-style ResNet-18 (LG-Mix).

The encoder is an ``nn.Sequential`` of torchvision's own modules (conv1, bn1, relu, [maxpool], layer1..layer4,
avgpool, flatten) and the head is torchvision's ``fc``, so parameter names read ``encoder.layer2.0.conv1.weight``
and ``classifier.weight``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import ClassVar

from torch import nn
from torchvision.models import ResNet18_Weights
from torchvision.models import resnet18 as torchvision_resnet18
from torchvision.models.resnet import BasicBlock, Bottleneck, ResNet

from fedbench.errors import ConfigError
from fedbench.models._pretrained import torchvision_imagenet
from fedbench.models.base import FedModel

RESNET_INITS = ("pytorch", "torchvision")


class TorchvisionResNet(FedModel):
    """A torchvision ``ResNet`` split into encoder (→ 512·expansion pooled feature) and head (``fc``).

    ``cifar_stem=True`` replaces the 7×7/2 stem conv by a 3×3/1 conv and drops the max-pool (FedImpro
    [code] ``resnet_v2``, kuangliu style) for 28–32 px inputs.

    Split points (FedImpro spec §1.3; the paper counts convs, shortcut 1×1 convs not counted, conv1 = 1):
    ``layer1`` = after the 5th conv, ``layer2`` = after the 9th (the paper's default), ``layer3`` = after the
    13th, ``layer4`` = after the 17th, taken after the global average pool as in the [code].
    """

    split_after: ClassVar[dict[str, str]] = {
        "layer1": "layer1",
        "layer2": "layer2",
        "layer3": "layer3",
        "layer4": "avgpool",
    }
    default_split = "layer2"

    def __init__(
        self,
        block: type,
        layers: list[int],
        num_classes: int,
        input_shape: tuple[int, ...],
        cifar_stem: bool,
        init: str = "torchvision",
        net: ResNet | None = None,
    ):
        super().__init__()
        if init not in RESNET_INITS:
            raise ConfigError(f"unknown init {init!r}; choose one of {', '.join(RESNET_INITS)}")
        if net is None:
            net = ResNet(block, layers, num_classes=num_classes)
        channels = input_shape[0]
        if cifar_stem:
            net.conv1 = nn.Conv2d(channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
        elif channels != 3:
            net.conv1 = nn.Conv2d(channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
        if net.fc.out_features != num_classes:  # ImageNet-pretrained network: a fresh head for our classes
            net.fc = nn.Linear(net.fc.in_features, num_classes)
        if init == "torchvision":
            if cifar_stem or channels != 3:
                nn.init.kaiming_normal_(net.conv1.weight, mode="fan_out", nonlinearity="relu")
        else:
            # FedImpro spec §2.6: the [code] ResNet keeps PyTorch's default layer init (no kaiming fan_out).
            for module in net.modules():
                if isinstance(module, (nn.Conv2d, nn.BatchNorm2d, nn.Linear)):
                    module.reset_parameters()
        stem = [("conv1", net.conv1), ("bn1", net.bn1), ("relu", net.relu)]
        if not cifar_stem:
            stem.append(("maxpool", net.maxpool))
        stages = [(f"layer{i}", getattr(net, f"layer{i}")) for i in range(1, 5)]
        self.encoder = nn.Sequential(OrderedDict(stem + stages + [("avgpool", net.avgpool), ("flatten", nn.Flatten())]))
        self.classifier = net.fc
        self.feature_dim = net.fc.in_features


def cifar_resnet(depth: int, num_classes: int, input_shape: tuple[int, ...], init: str) -> TorchvisionResNet:
    """CIFAR-style ResNet-18 (BasicBlock [2,2,2,2]) or ResNet-50 (Bottleneck [3,4,6,3]): 3×3 stem, no max-pool."""
    block, layers = {18: (BasicBlock, [2, 2, 2, 2]), 50: (Bottleneck, [3, 4, 6, 3])}[depth]
    return TorchvisionResNet(block, layers, num_classes, input_shape, cifar_stem=True, init=init)


def imagenet_resnet18(num_classes: int, input_shape: tuple[int, ...], pretrained: bool) -> TorchvisionResNet:
    """torchvision's ResNet-18 (7×7/2 stem + max-pool), with its ImageNet weights if ``pretrained``."""
    # LG-Mix spec A11: from scratch by default (the low accuracies rule out ImageNet pretraining); weights optional.
    net = None
    if pretrained:
        net = torchvision_imagenet(
            torchvision_resnet18, ResNet18_Weights.IMAGENET1K_V1, "resnet18_imagenet", input_shape[0]
        )
    return TorchvisionResNet(BasicBlock, [2, 2, 2, 2], num_classes, input_shape, cifar_stem=False, net=net)
