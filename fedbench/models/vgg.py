"""VGG family: VGG-11 (FedDr+ CIFAR-10; FedImpro [code]) and VGG-9 = FedMA's ModerateCNN (FedImpro Table 9)."""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import ClassVar

from torch import nn
from torchvision.models.vgg import cfgs, make_layers

from fedbench.models.base import FedModel
from fedbench.models.heads import build_classifier
from fedbench.models.layers import MaxPool2d


class VGG11(FedModel):
    """FedNTD-repo VGG-11 (FedDr+ spec §2.4): torchvision's cfg "A" conv stack without BN (3×3 convs with bias,
    ReLU, 5 max-pools) → flatten (512 at 32×32) → FC 512→512-ReLU → FC 512→512-ReLU (= z, d = 512) → classifier.

    ``dropout`` > 0 puts ``Dropout`` before each hidden FC, which is FedImpro's [code] ``vggmodel.vgg11``
    (p = 0.5); FedDr+'s [code] has ``use_dropout=False``. Split point ``conv``: after the conv stack
    (FedImpro [code], D = 512).
    """

    split_after: ClassVar[dict[str, str]] = {"conv": "conv"}

    def __init__(
        self,
        num_classes: int,
        input_shape: tuple[int, ...],
        classifier: str = "linear",
        classifier_bias: bool | None = None,
        normalize_features: bool | None = None,
        dropout: float = 0.0,
    ):
        super().__init__()
        channels, height, width = input_shape
        conv = make_layers(cfgs["A"], batch_norm=False)
        if channels != 3:
            conv[0] = nn.Conv2d(channels, 64, kernel_size=3, padding=1)
        flat = 512 * (height // 32) * (width // 32)
        fc: list[nn.Module] = []
        for in_features in (flat, 512):
            if dropout:
                fc.append(nn.Dropout(dropout))
            fc += [nn.Linear(in_features, 512), nn.ReLU()]
        self.encoder = nn.Sequential(OrderedDict(conv=conv, flatten=nn.Flatten(), fc=nn.Sequential(*fc)))
        # FedDr+ spec §2.4 [code]: conv weights ~ N(0, sqrt(2/(k·k·out))), conv bias 0; Linear keeps its default.
        for module in conv.modules():
            if isinstance(module, nn.Conv2d):
                fan_out = module.kernel_size[0] * module.kernel_size[1] * module.out_channels
                nn.init.normal_(module.weight, 0.0, math.sqrt(2.0 / fan_out))
                assert module.bias is not None  # make_layers builds its convolutions with a bias
                nn.init.zeros_(module.bias)
        self.classifier = build_classifier(classifier, 512, num_classes, classifier_bias, normalize_features)
        self.feature_dim = 512


class VGG9(FedModel):
    """FedMA/FedML ``vgg-9`` = ``ModerateCNN`` (FedImpro spec §2.6 [proposal]).

    conv 32, 64, M, 128, 128, M, Dropout2d(0.05), 256, 256, M (3×3, pad 1, ReLU) → flatten (4096 at 32×32) →
    Dropout(0.1) → FC 4096→512-ReLU → FC 512→512-ReLU (= z) → Dropout(0.1) → FC 512→C.
    Split point ``conv``: the conv/FC boundary (D = 4096).
    """

    split_after: ClassVar[dict[str, str]] = {"conv": "conv"}

    def __init__(self, num_classes: int, input_shape: tuple[int, ...]):
        super().__init__()
        channels, height, width = input_shape

        def conv3(cin: int, cout: int) -> list[nn.Module]:
            return [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU()]

        conv = nn.Sequential(
            *conv3(channels, 32),
            *conv3(32, 64),
            MaxPool2d(2),
            *conv3(64, 128),
            *conv3(128, 128),
            MaxPool2d(2),
            nn.Dropout2d(0.05),
            *conv3(128, 256),
            *conv3(256, 256),
            MaxPool2d(2),
        )
        flat = 256 * (height // 8) * (width // 8)
        fc = nn.Sequential(
            nn.Dropout(0.1),
            nn.Linear(flat, 512),
            nn.ReLU(),
            nn.Linear(512, 512),
            nn.ReLU(),
            nn.Dropout(0.1),
        )
        self.encoder = nn.Sequential(OrderedDict(conv=conv, flatten=nn.Flatten(), fc=fc))
        self.classifier = nn.Linear(512, num_classes)
        self.feature_dim = 512
