"""The model zoo: every built-in architecture's builder, registered by name with the paper configuration it is
listed for (``register_model(name, **info)``: ``papers``, ``input_shape``, ``num_classes``, ``description``,
``feature`` — which activation ``features(x)`` returns — and optionally ``faithful=False``, a stand-in for the
paper's model, and ``task="segmentation"``).

A builder's keyword parameters and their defaults are the model's ``model_params``: compiling a recipe reads them
from these signatures, so this module imports no torch. Each builder imports its architecture (``fedbench/models/
<family>.py``, torch modules) when it is called, and only constructs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from fedbench.models._registry import register_model
from fedbench.spec import HashNeutral

if TYPE_CHECKING:
    from fedbench.models.base import FedModel


@register_model(
    "alexnet_cifar",
    papers=("fedtrip",),
    input_shape=(3, 32, 32),
    num_classes=10,
    description="FedTrip's CIFAR-10 AlexNet (5 conv, avg-pool to 256, FC 1024, dropout 0.5, no BN)",
    feature="1024-d, FC 256→1024 after ReLU (and dropout in train mode)",
)
def alexnet_cifar(num_classes: int, input_shape: tuple[int, ...], dropout: float = 0.5) -> FedModel:
    from fedbench.models.alexnet import AlexNetCifar  # local: keeps torch out of compiling recipes

    return AlexNetCifar(num_classes, input_shape, dropout)


@register_model(
    "alexnet_bn",
    papers=("fedtr",),
    input_shape=(3, 224, 224),
    num_classes=4,
    description="NOT FAITHFUL: stand-in for FedTR's COVID-Net; PersonalizedFL/FedBN AlexNet with BatchNorm (~57M params)",
    feature="4096-d, FC 4096→4096 after BN and ReLU",
    faithful=False,
)
def alexnet_bn(num_classes: int, input_shape: tuple[int, ...]) -> FedModel:
    from fedbench.models.alexnet import AlexNetBN  # local: keeps torch out of compiling recipes

    return AlexNetBN(num_classes, input_shape)


@register_model(
    "fedtr_cifar_cnn",
    papers=("fedtr",),
    input_shape=(3, 32, 32),
    num_classes=10,
    description="FedTR's unnamed CIFAR-10 CNN; proposal: FedDyn/FedDC cifar10_LeNet (2 conv + 3 FC)",
    feature="192-d, FC 384→192 after ReLU",
)
def fedtr_cifar_cnn(num_classes: int, input_shape: tuple[int, ...]) -> FedModel:
    from fedbench.models.cnn import FedDCCifarCNN  # local: keeps torch out of compiling recipes

    return FedDCCifarCNN(num_classes, input_shape)


@register_model(
    "pamap2_net",
    papers=("fedtr",),
    input_shape=(27, 1, 200),
    num_classes=10,
    description="FedTR's PAMAP2-Net; proposal: PersonalizedFL PamapModel on 27-channel 200-step IMU windows",
    feature="64-d, FC 1408→64 after ReLU",
)
def pamap2_net(num_classes: int, input_shape: tuple[int, ...]) -> FedModel:
    from fedbench.models.cnn import PamapNet  # local: keeps torch out of compiling recipes

    return PamapNet(num_classes, input_shape)


@register_model(
    "fedbn_digit_cnn",
    papers=("lgmix",),
    input_shape=(3, 28, 28),
    num_classes=10,
    description="FedBN DigitModel for Digits5: 3 conv + 3 FC, BN after the first five layers",
    feature="512-d, FC 2048→512 after BN and ReLU",
)
def fedbn_digit_cnn(num_classes: int, input_shape: tuple[int, ...]) -> FedModel:
    from fedbench.models.cnn import FedBNDigitCNN  # local: keeps torch out of compiling recipes

    return FedBNDigitCNN(num_classes, input_shape)


@register_model(
    "covidnet_small",
    papers=("fedtr",),
    input_shape=(3, 224, 224),
    num_classes=4,
    description="NOT FAITHFUL: small COVID-Net-like CNN (4 PEPX stages) standing in for FedTR's COVID-Net",
    feature="256-d, FC after global pooling, after ReLU",
    faithful=False,
)
def covidnet_small(num_classes: int, input_shape: tuple[int, ...]) -> FedModel:
    from fedbench.models.covidnet import SmallCovidNet  # local: keeps torch out of compiling recipes

    return SmallCovidNet(num_classes, input_shape)


@register_model(
    "densenet121",
    papers=("lgmix",),
    input_shape=(3, 96, 96),
    num_classes=2,
    description="torchvision DenseNet-121, from scratch, for Camelyon17 96×96 tumour patches",
    feature="1024-d, global average pool after the final BN and ReLU",
)
def densenet121(num_classes: int, input_shape: tuple[int, ...], pretrained: bool = False) -> FedModel:
    from fedbench.models.densenet import DenseNet121  # local: keeps torch out of compiling recipes

    return DenseNet121(num_classes, input_shape, pretrained)


@register_model(
    "digits_mlp",
    papers=("quickstart",),
    input_shape=(1, 8, 8),
    num_classes=10,
    description="quickstart MLP for scikit-learn's 8×8 digits: 64→128→ReLU→10",
    feature="128-d hidden layer after ReLU",
)
def digits_mlp(num_classes: int, input_shape: tuple[int, ...], hidden: int = 128) -> FedModel:
    from fedbench.models.digits import DigitsMLP  # local: keeps torch out of compiling recipes

    return DigitsMLP(num_classes, input_shape, hidden)


@register_model(
    "digits_cnn",
    papers=("quickstart",),
    input_shape=(1, 8, 8),
    num_classes=10,
    description="quickstart CNN for scikit-learn's 8×8 digits: 2 conv (32, 64), pool, FC 128, FC 10",
    feature="128-d hidden layer after ReLU",
)
def digits_cnn(num_classes: int, input_shape: tuple[int, ...], width: int = 32, hidden: int = 128) -> FedModel:
    from fedbench.models.digits import DigitsCNN  # local: keeps torch out of compiling recipes

    return DigitsCNN(num_classes, input_shape, width, hidden)


@register_model(
    "lenet5",
    papers=("fedtr",),
    input_shape=(1, 28, 28),
    num_classes=11,
    description="LeNet-5 with BatchNorm (PersonalizedFL lenet5v) for OrganA/C/SMNIST; FedTR spec §2.5",
    feature="84-d, FC 120→84 after ReLU",
)
def lenet5(num_classes: int, input_shape: tuple[int, ...]) -> FedModel:
    from fedbench.models.lenet import LeNet5  # local: keeps torch out of compiling recipes

    return LeNet5(num_classes, input_shape)


@register_model(
    "fedtrip_cnn",
    papers=("fedtrip",),
    input_shape=(1, 28, 28),
    num_classes=10,
    description="FedTrip's modified LeNet-5 (3 conv + FC 84 + FC C, no BN) for MNIST/FMNIST/EMNIST-47",
    feature="84-d, FC 120→84 after ReLU",
)
def fedtrip_cnn(num_classes: int, input_shape: tuple[int, ...]) -> FedModel:
    from fedbench.models.lenet import LeNet5Conv3  # local: keeps torch out of compiling recipes

    return LeNet5Conv3(num_classes, input_shape)


@register_model(
    "mlp",
    papers=("fedtrip",),
    input_shape=(1, 28, 28),
    num_classes=10,
    description="FedTrip MLP: 784→100→ReLU→10 (MNIST/FMNIST); hidden widths configurable",
    feature="100-d, first FC after ReLU",
)
def mlp(
    num_classes: int,
    input_shape: tuple[int, ...],
    hidden: tuple[int, ...] | list[int] = (100,),
    batch_norm: Annotated[bool, HashNeutral(False)] = False,  # added later (LG-Mix BCI): existing specs keep their hash
) -> FedModel:
    """``batch_norm``: a BatchNorm1d after each hidden Linear, as the FC layers of FedBN's DigitModel (so that FedBN
    and LG-Mix's mixed BN statistics mean something on vector inputs)."""
    from fedbench.models.mlp import MLP  # local: keeps torch out of compiling recipes

    return MLP(num_classes, input_shape, tuple(int(h) for h in hidden), batch_norm)


@register_model(
    "mobilenet",
    papers=("feddrplus",),
    input_shape=(3, 32, 32),
    num_classes=100,
    description="MobileNet v1, CIFAR variant (FedBABU MobileNetCifar), BN without running stats; "
    "classifier linear/etf/orthonormal/fedetf",
    feature="1024-d, average-pooled last block",
)
def mobilenet(
    num_classes: int,
    input_shape: tuple[int, ...],
    classifier: str = "linear",
    classifier_bias: bool | None = None,
    normalize_features: bool | None = None,
    track_running_stats: bool = False,
) -> FedModel:
    from fedbench.models.mobilenet import MobileNetCifar  # local: keeps torch out of compiling recipes

    return MobileNetCifar(
        num_classes, input_shape, classifier, classifier_bias, normalize_features, track_running_stats
    )


@register_model(
    "pfl_cnn",
    papers=("bench",),
    input_shape=(3, 32, 32),
    num_classes=10,
    description="pfl-research's CIFAR-10 benchmark CNN (simple_cnn): 2 conv (32, 64), max-pool, FC 128, "
    "dropout 0.25/0.5, Xavier-uniform weights",
    feature="128-d, FC 12544→128 after ReLU (and dropout in train mode)",
)
def pfl_cnn(num_classes: int, input_shape: tuple[int, ...]) -> FedModel:
    from fedbench.models.pfl_cnn import PflSimpleCNN  # local: keeps torch out of compiling recipes

    return PflSimpleCNN(num_classes, input_shape)


@register_model(
    "resnet18",
    papers=("fedimpro",),
    input_shape=(3, 32, 32),
    num_classes=10,
    description="CIFAR-style ResNet-18 (3×3 stem, no max-pool) for CIFAR-10/FMNIST/SVHN; splits layer1-4",
    feature="512-d, global average pool",
)
def resnet18(num_classes: int, input_shape: tuple[int, ...], init: str = "pytorch") -> FedModel:
    from fedbench.models.resnet import cifar_resnet  # local: keeps torch out of compiling recipes

    return cifar_resnet(18, num_classes, input_shape, init)


@register_model(
    "resnet18_femnist",
    papers=("fedimpro",),
    input_shape=(1, 28, 28),
    num_classes=62,
    description="FedImpro's FEMNIST model: the CIFAR-style resnet18 with 1 input channel and 62 classes",
    feature="512-d, global average pool",
)
def resnet18_femnist(num_classes: int, input_shape: tuple[int, ...], init: str = "pytorch") -> FedModel:
    from fedbench.models.resnet import cifar_resnet  # local: keeps torch out of compiling recipes

    return cifar_resnet(18, num_classes, input_shape, init)


@register_model(
    "resnet50",
    papers=("fedimpro",),
    input_shape=(3, 32, 32),
    num_classes=100,
    description="CIFAR-style ResNet-50 (Bottleneck [3,4,6,3], 3×3 stem, no max-pool) for CIFAR-100",
    feature="2048-d, global average pool",
)
def resnet50(num_classes: int, input_shape: tuple[int, ...], init: str = "pytorch") -> FedModel:
    from fedbench.models.resnet import cifar_resnet  # local: keeps torch out of compiling recipes

    return cifar_resnet(50, num_classes, input_shape, init)


@register_model(
    "resnet18_imagenet",
    papers=("lgmix",),
    input_shape=(3, 256, 256),
    num_classes=10,
    description="torchvision ResNet-18 (7×7/2 stem + max-pool), from scratch, for Office-Caltech10/DomainNet",
    feature="512-d, global average pool",
)
def resnet18_imagenet(num_classes: int, input_shape: tuple[int, ...], pretrained: bool = False) -> FedModel:
    from fedbench.models.resnet import imagenet_resnet18  # local: keeps torch out of compiling recipes

    return imagenet_resnet18(num_classes, input_shape, pretrained)


@register_model(
    "unet",
    papers=("lgmix",),
    input_shape=(3, 256, 256),
    num_classes=2,
    task="segmentation",
    description="U-Net (med-air, 32 base features) for fundus optic disc/cup segmentation; 2 logit maps",
    feature="32 channels per pixel, decoder-1 output (input of the final 1×1 conv)",
)
def unet(num_classes: int, input_shape: tuple[int, ...], init_features: int = 32) -> FedModel:
    from fedbench.models.unet import UNet  # local: keeps torch out of compiling recipes

    return UNet(num_classes, input_shape, init_features)


@register_model(
    "vgg11",
    papers=("feddrplus", "fedimpro"),
    input_shape=(3, 32, 32),
    num_classes=10,
    description="VGG-11 without BN (FedNTD repo) for CIFAR-10; classifier linear/etf/orthonormal/fedetf",
    feature="512-d, second FC 512→512 after ReLU",
)
def vgg11(
    num_classes: int,
    input_shape: tuple[int, ...],
    classifier: str = "linear",
    classifier_bias: bool | None = None,
    normalize_features: bool | None = None,
    dropout: float = 0.0,
) -> FedModel:
    from fedbench.models.vgg import VGG11  # local: keeps torch out of compiling recipes

    return VGG11(num_classes, input_shape, classifier, classifier_bias, normalize_features, dropout)


@register_model(
    "vgg9",
    papers=("fedimpro",),
    input_shape=(3, 32, 32),
    num_classes=10,
    description="VGG-9 = FedMA ModerateCNN (6 conv + 3 FC) for FedImpro's CIFAR-10 Table 9",
    feature="512-d, FC 512→512 after ReLU (and dropout in train mode)",
)
def vgg9(num_classes: int, input_shape: tuple[int, ...]) -> FedModel:
    from fedbench.models.vgg import VGG9  # local: keeps torch out of compiling recipes

    return VGG9(num_classes, input_shape)
