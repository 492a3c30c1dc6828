"""Helpers for the model tests: every registered model built at its paper's configuration (on the meta device
where only names and counts matter) and the parameter count each model's layer list gives."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedbench.models import MODELS, build_model
from fedbench.models.mobilenet import MOBILENET_CIFAR_CFG


def paper_config(name: str) -> tuple[int, tuple[int, ...]]:
    info = MODELS.info(name)
    return info["num_classes"], tuple(info["input_shape"])


def build_paper(name: str, seed: int = 0, **params) -> nn.Module:
    num_classes, input_shape = paper_config(name)
    torch.manual_seed(seed)
    return build_model(name, num_classes, input_shape, **params)


def build_meta(name: str, **params) -> nn.Module:
    """Free to build (no memory, no init): enough for parameter names and counts."""
    with torch.device("meta"):
        return build_paper(name, **params)


@pytest.fixture(scope="module")
def models():
    cache: dict[str, nn.Module] = {}

    def get(name: str) -> nn.Module:
        if name not in cache:
            cache[name] = build_paper(name, seed=0).eval()
        return cache[name]

    return get


def conv(cin: int, cout: int, k: int | tuple[int, int], bias: bool = True, groups: int = 1) -> int:
    kh, kw = (k, k) if isinstance(k, int) else k
    return cout * (cin // groups) * kh * kw + (cout if bias else 0)


def bn(c: int) -> int:
    return 2 * c  # affine weight and bias


def linear(i: int, o: int, bias: bool = True) -> int:
    return i * o + (o if bias else 0)


def basic_block(cin: int, cout: int, stride: int) -> int:
    shortcut = conv(cin, cout, 1, False) + bn(cout) if stride != 1 or cin != cout else 0
    return conv(cin, cout, 3, False) + bn(cout) + conv(cout, cout, 3, False) + bn(cout) + shortcut


def bottleneck(cin: int, planes: int, stride: int) -> int:
    out = 4 * planes
    shortcut = conv(cin, out, 1, False) + bn(out) if stride != 1 or cin != out else 0
    return (
        conv(cin, planes, 1, False)
        + bn(planes)
        + conv(planes, planes, 3, False)
        + bn(planes)
        + conv(planes, out, 1, False)
        + bn(out)
        + shortcut
    )


def resnet(stem: int, block, blocks: list[int], expansion: int, num_classes: int) -> int:
    total, cin = stem + bn(64), 64
    for stage, (width, count) in enumerate(zip((64, 128, 256, 512), blocks)):
        for i in range(count):
            stride = 2 if stage > 0 and i == 0 else 1
            total += block(cin, width, stride)
            cin = width * expansion
    return total + linear(cin, num_classes)


def densenet121(num_classes: int) -> int:
    total, c = conv(3, 64, 7, False) + bn(64), 64
    for i, layers in enumerate((6, 12, 24, 16)):
        for _ in range(layers):  # BN-ReLU-conv1×1(4·32)-BN-ReLU-conv3×3(32)
            total += bn(c) + conv(c, 128, 1, False) + bn(128) + conv(128, 32, 3, False)
            c += 32
        if i < 3:  # transition: BN-ReLU-conv1×1(c/2)-avgpool
            total += bn(c) + conv(c, c // 2, 1, False)
            c //= 2
    return total + bn(c) + linear(c, num_classes)  # c = 1024


def unet(cin: int, f: int, out: int) -> int:
    def block(i: int, o: int) -> int:
        return conv(i, o, 3, False) + bn(o) + conv(o, o, 3, False) + bn(o)

    def up(i: int, o: int) -> int:  # ConvTranspose2d(i, o, 2, stride 2): weight i×o×2×2 + bias o
        return i * o * 4 + o

    down = block(cin, f) + block(f, 2 * f) + block(2 * f, 4 * f) + block(4 * f, 8 * f) + block(8 * f, 16 * f)
    decode = sum(up(2 * w, w) + block(2 * w, w) for w in (8 * f, 4 * f, 2 * f, f))
    return down + decode + conv(f, out, 1)


def mobilenet(num_classes: int, head_bias: bool = True) -> int:
    total, cin = conv(3, 32, 3, False) + bn(32), 32
    for entry in MOBILENET_CIFAR_CFG:
        cout = entry[0] if isinstance(entry, tuple) else entry
        total += conv(cin, cin, 3, False, groups=cin) + bn(cin) + conv(cin, cout, 1, False) + bn(cout)
        cin = cout
    return total + linear(1024, num_classes, head_bias)


def vgg11_body() -> int:
    convs = [(3, 64), (64, 128), (128, 256), (256, 256), (256, 512), (512, 512), (512, 512), (512, 512)]
    return sum(conv(i, o, 3) for i, o in convs) + linear(512, 512) + linear(512, 512)


def pepx(cin: int, cout: int) -> int:
    low, mid = cout // 2, 3 * cout // 4
    return (
        conv(cin, low, 1, False)
        + bn(low)
        + conv(low, mid, 1, False)
        + bn(mid)
        + conv(mid, mid, 3, False, groups=mid)
        + bn(mid)
        + conv(mid, low, 1, False)
        + bn(low)
        + conv(low, cout, 1, False)
        + bn(cout)
        + conv(cin, cout, 1, False)
        + bn(cout)
    )


EXPECTED_PARAMS = {
    "digits_mlp": linear(64, 128) + linear(128, 10),
    "digits_cnn": conv(1, 32, 3) + conv(32, 64, 3) + linear(64 * 4 * 4, 128) + linear(128, 10),
    # FedTR spec §2.5 prints 44,555 (matches).
    "lenet5": conv(1, 6, 5) + bn(6) + conv(6, 16, 5) + bn(16) + linear(256, 120) + linear(120, 84) + linear(84, 11),
    # FedTR spec §2.5 prints 797,962 (matches).
    "fedtr_cifar_cnn": conv(3, 64, 5) + conv(64, 64, 5) + linear(1600, 384) + linear(384, 192) + linear(192, 10),
    # FedTR spec §2.5 prints 99,466 (matches).
    "pamap2_net": conv(27, 16, (1, 9)) + bn(16) + conv(16, 32, (1, 9)) + bn(32) + linear(1408, 64) + linear(64, 10),
    # FedTR spec §2.5: "about 57M parameters" (matches: 57,038,916 with 4 classes).
    "alexnet_bn": (
        conv(3, 64, 11)
        + bn(64)
        + conv(64, 192, 5)
        + bn(192)
        + conv(192, 384, 3)
        + bn(384)
        + conv(384, 256, 3)
        + bn(256)
        + conv(256, 256, 3)
        + bn(256)
        + linear(9216, 4096)
        + bn(4096)
        + linear(4096, 4096)
        + bn(4096)
        + linear(4096, 4)
    ),
    "covidnet_small": (
        conv(3, 32, 7, False)
        + bn(32)
        + pepx(32, 64)
        + pepx(64, 128)
        + pepx(128, 256)
        + pepx(256, 256)
        + linear(256, 256)
        + linear(256, 4)
    ),
    # FedTrip spec §2.6 prints 79,510 (matches). Paper Table III says "0.8 M": a 10× typo, its 0.3 MB agrees with us.
    "mlp": linear(784, 100) + linear(100, 10),
    # FedTrip spec prints 61,706 (matches). Paper Table III "0.62 M" is 10× too large; its 0.24 MB agrees with us.
    "fedtrip_cnn": conv(1, 6, 5) + conv(6, 16, 5) + conv(16, 120, 5) + linear(120, 84) + linear(84, 10),
    # FedTrip spec prints 2,729,290; paper Table III "2.72 M" and 10.42 MB (matches to its rounding).
    "alexnet_cifar": (
        conv(3, 64, 7)
        + conv(64, 192, 5)
        + conv(192, 384, 3)
        + conv(384, 256, 3)
        + conv(256, 256, 3)
        + linear(256, 1024)
        + linear(1024, 10)
    ),
    # FedDr+ prints no count.
    "vgg11": vgg11_body() + linear(512, 10),
    "mobilenet": mobilenet(100),
    # FedImpro spec §2.6: "≈11.2M" (matches: 11,173,962).
    "resnet18": resnet(conv(3, 64, 3, False), basic_block, [2, 2, 2, 2], 1, 10),
    "resnet18_femnist": resnet(conv(1, 64, 3, False), basic_block, [2, 2, 2, 2], 1, 62),
    # FedImpro spec §2.6: "≈23.7M" for CIFAR-100 (matches: 23,705,252).
    "resnet50": resnet(conv(3, 64, 3, False), bottleneck, [3, 4, 6, 3], 4, 100),
    # pfl-research simple_cnn: 896 + 18,496 + 1,605,760 + 1,290 = 1,626,442.
    "pfl_cnn": conv(3, 32, 3) + conv(32, 64, 3) + linear(14 * 14 * 64, 128) + linear(128, 10),
    "vgg9": (
        conv(3, 32, 3)
        + conv(32, 64, 3)
        + conv(64, 128, 3)
        + conv(128, 128, 3)
        + conv(128, 256, 3)
        + conv(256, 256, 3)
        + linear(4096, 512)
        + linear(512, 512)
        + linear(512, 10)
    ),
    "fedbn_digit_cnn": (
        conv(3, 64, 5)
        + bn(64)
        + conv(64, 64, 5)
        + bn(64)
        + conv(64, 128, 5)
        + bn(128)
        + linear(6272, 2048)
        + bn(2048)
        + linear(2048, 512)
        + bn(512)
        + linear(512, 10)
    ),
    # torchvision resnet18 has 11,689,512 with 1000 classes; 10 classes: −507,870.
    "resnet18_imagenet": resnet(conv(3, 64, 7, False), basic_block, [2, 2, 2, 2], 1, 10),
    # torchvision densenet121 has 7,978,856 with 1000 classes; 2 classes: −1,022,950.
    "densenet121": densenet121(2),
    # mateuszbuda/med-air U-Net with 1 output has 7,763,041; one more output channel adds 33.
    "unet": unet(3, 32, 2),
}
