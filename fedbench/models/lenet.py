"""LeNet-5 family: FedTR's BN LeNet-5 (OrganA/C/SMNIST) and FedTrip's 3-conv LeNet-5 (MNIST/FMNIST/EMNIST)."""

from __future__ import annotations

from torch import nn

from fedbench.models.base import FedModel
from fedbench.models.layers import Conv2d, MaxPool2d


class LeNet5(FedModel):
    """Conv(1,6,5)-BN-ReLU-Pool → Conv(6,16,5)-BN-ReLU-Pool → FC 120 → FC 84 (= z) → FC classes.

    Pooling runs before the ReLU (see ``LeNet5Conv3``): the same function and gradients, less work."""

    def __init__(self, num_classes: int, input_shape: tuple[int, ...]):
        super().__init__()
        channels, height, width = input_shape
        flat = 16 * (((height - 4) // 2 - 4) // 2) * (((width - 4) // 2 - 4) // 2)
        self.encoder = nn.Sequential(
            Conv2d(channels, 6, 5),
            nn.BatchNorm2d(6),
            MaxPool2d(2),
            nn.ReLU(),
            Conv2d(6, 16, 5),
            nn.BatchNorm2d(16),
            MaxPool2d(2),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(flat, 120),
            nn.ReLU(),
            nn.Linear(120, 84),
            nn.ReLU(),
        )
        self.classifier = nn.Linear(84, num_classes)
        self.feature_dim = 84


class LeNet5Conv3(FedModel):
    """FedTrip's "modified LeNet5" [code ``plato/models/lenet5.py``]: three 5×5 convs, FC 84, FC classes.

    Conv(c,6,5,pad 2)-ReLU-Pool → Conv(6,16,5)-ReLU-Pool → Conv(16,120,5)-ReLU → FC 120→84-ReLU (= z) → FC 84→C.
    The [code] ends in ``log_softmax``; we return logits (identical under cross-entropy, FedTrip spec §2.5).
    MOON's representation in the FedTrip [code] is the FC-84 output *before* its ReLU: ``encoder[:-1]``.

    Speed, without changing the function: each max-pool runs before its ReLU instead of after it. ReLU is
    monotone, so max(relu(a), relu(b)) = relu(max(a, b)) exactly, and the gradient reaches the same
    element (a window whose maximum is ≤ 0 passes no gradient either way), while the ReLU and its
    backward touch a quarter of the elements. ``layers.Conv2d`` runs C5 (a 5×5 kernel on a 5×5 map) as the
    matrix product it is and computes the convolutions' weight gradients faster on the CPU. Parameters, their names and the state dict are unchanged.
    """

    def __init__(self, num_classes: int, input_shape: tuple[int, ...]):
        super().__init__()
        channels, height, width = input_shape
        # 28×28 → conv(pad 2) 28 → pool 14 → conv 10 → pool 5 → conv 1
        out_h, out_w = (height // 2 - 4) // 2 - 4, (width // 2 - 4) // 2 - 4
        self.encoder = nn.Sequential(
            Conv2d(channels, 6, 5, padding=2),
            MaxPool2d(2),
            nn.ReLU(),
            Conv2d(6, 16, 5),
            MaxPool2d(2),
            nn.ReLU(),
            Conv2d(16, 120, 5),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(120 * out_h * out_w, 84),
            nn.ReLU(),
        )
        self.classifier = nn.Linear(84, num_classes)
        self.feature_dim = 84
