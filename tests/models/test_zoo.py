"""Model zoo: shapes at the paper input size, head∘features = forward, parameter counts from the specs' layer
lists, frozen classifiers, parameter-name partitions, named split points, deterministic init."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from conftest import F64_ATOL
from fedbench.errors import ConfigError
from fedbench.models import MODELS, build_model
from fedbench.models.heads import orthonormal_rows, simplex_etf
from fedbench.models.mobilenet import MOBILENET_CIFAR_CFG

NAMES = MODELS.names()


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


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


@pytest.fixture(scope="module")
def models():
    cache: dict[str, nn.Module] = {}

    def get(name: str) -> nn.Module:
        if name not in cache:
            cache[name] = build_paper(name, seed=0).eval()
        return cache[name]

    return get


# -- layer arithmetic ------------------------------------------------------------------------------------


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


def test_every_model_has_an_expected_count():
    assert sorted(EXPECTED_PARAMS) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_parameter_count_matches_layer_arithmetic(name):
    assert n_params(build_meta(name)) == EXPECTED_PARAMS[name]


def test_known_totals():
    # Spot checks of the arithmetic against numbers printed in the specs or torchvision's docs.
    assert EXPECTED_PARAMS["lenet5"] == 44_555
    assert EXPECTED_PARAMS["fedtr_cifar_cnn"] == 797_962
    assert EXPECTED_PARAMS["pamap2_net"] == 99_466
    assert EXPECTED_PARAMS["mlp"] == 79_510
    assert EXPECTED_PARAMS["fedtrip_cnn"] == 61_706
    assert EXPECTED_PARAMS["alexnet_cifar"] == 2_729_290
    assert EXPECTED_PARAMS["resnet18_imagenet"] == 11_689_512 - linear(512, 1000) + linear(512, 10)
    assert EXPECTED_PARAMS["densenet121"] == 7_978_856 - linear(1024, 1000) + linear(1024, 2)
    assert EXPECTED_PARAMS["unet"] == 7_763_041 + 33


def test_emnist_cnn_count():
    # FedTrip spec §2.6: 64,851 parameters with 47 classes.
    assert n_params(build_model("fedtrip_cnn", 47, (1, 28, 28))) == 64_851


# -- shapes and composition --------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_output_shape_and_head_of_features_is_forward(name, models):
    model = models(name)
    num_classes, input_shape = paper_config(name)
    x = torch.randn(2, *input_shape)
    with torch.inference_mode():
        z = model.features(x)
        logits = model.head(z)
        direct = model(x)
    if MODELS.info(name).get("task") == "segmentation":
        assert logits.shape == (2, num_classes, *input_shape[1:])
        assert z.shape == (2, model.feature_dim, *input_shape[1:])
    else:
        assert logits.shape == (2, num_classes)
        assert z.shape == (2, model.feature_dim)
    torch.testing.assert_close(logits, direct, rtol=0, atol=0)


@pytest.mark.parametrize("name", NAMES)
def test_registration_describes_the_model(name):
    info = MODELS.info(name)
    assert info["papers"] and info["description"] and info["feature"]
    assert len(info["input_shape"]) == 3 and info["num_classes"] >= 2


def test_models_follow_input_shape():
    # FedImpro: resnet18 on 1×28×28 FMNIST; FedTrip: the CNN on EMNIST-47; LG-Mix's DenseNet on other sizes.
    with torch.inference_mode():
        assert build_model("resnet18", 10, (1, 28, 28)).eval()(torch.randn(2, 1, 28, 28)).shape == (2, 10)
        assert build_model("fedtrip_cnn", 47, (1, 28, 28))(torch.randn(2, 1, 28, 28)).shape == (2, 47)
        assert build_model("mobilenet", 10, (3, 64, 64))(torch.randn(2, 3, 64, 64)).shape == (2, 10)
        assert build_model("unet", 3, (1, 32, 32)).eval()(torch.randn(2, 1, 32, 32)).shape == (2, 3, 32, 32)


# -- parameter groups ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_head_body_batchnorm_names_partition(name):
    model = build_meta(name)
    names = [n for n, _ in model.named_parameters()]
    head, body = model.head_parameter_names(), model.body_parameter_names()
    assert head and body
    assert set(head).isdisjoint(body)
    assert sorted(head + body) == sorted(names)
    assert all(n.startswith("classifier.") for n in head)
    bn_params = model.batchnorm_parameter_names()
    assert set(bn_params) <= set(body)
    bn_modules = dict(model.named_modules())
    for module_name in model.batchnorm_module_names():
        assert isinstance(bn_modules[module_name], nn.modules.batchnorm._BatchNorm)
    assert len(bn_params) == 2 * len(model.batchnorm_module_names())  # every BN here is affine


@pytest.mark.parametrize(
    "name,count",
    [
        ("lenet5", 2),
        ("pamap2_net", 2),
        ("fedbn_digit_cnn", 5),
        ("alexnet_bn", 7),
        ("mobilenet", 27),
        ("resnet18", 20),
        ("resnet50", 53),
        ("vgg11", 0),
        ("vgg9", 0),
        ("mlp", 0),
        ("alexnet_cifar", 0),
        ("unet", 18),
    ],
)
def test_batchnorm_module_counts(name, count):
    assert len(build_meta(name).batchnorm_module_names()) == count


def test_mobilenet_batchnorm_keeps_no_running_stats():
    # FedDr+ spec §2.4: track_running_stats=False, so there are no BN buffers to aggregate.
    assert list(build_meta("mobilenet").buffers()) == []
    assert len(list(build_meta("mobilenet", track_running_stats=True).buffers())) == 3 * 27


# -- deterministic init --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_init_is_deterministic_under_manual_seed(name, models):
    reference = models(name).state_dict()
    again = build_paper(name, seed=0).state_dict()
    assert reference.keys() == again.keys()
    for key in reference:
        assert torch.equal(reference[key], again[key]), key
    other = build_paper(name, seed=1).state_dict()
    assert any(not torch.equal(reference[k], other[k]) for k in reference if reference[k].is_floating_point())


# -- frozen classifiers (FedDr+) ------------------------------------------------------------------------


# The frozen classifiers' geometry (unit rows, cosines −1/(C−1), orthonormality) is exact in exact arithmetic;
# their QR runs in the default dtype, so these tests build them in float64 (``float64`` fixture) and check it to
# within F64_ATOL. A float32 QR's error depends on the CPU's LAPACK kernels.
def assert_simplex_etf(w: torch.Tensor, num_classes: int) -> None:
    assert w.dtype == torch.float64 and w.shape[0] == num_classes
    torch.testing.assert_close(w.norm(dim=1), torch.ones(num_classes), atol=F64_ATOL, rtol=0)
    gram = w @ w.T
    off_diagonal = gram[~torch.eye(num_classes, dtype=torch.bool)]
    torch.testing.assert_close(
        off_diagonal, torch.full_like(off_diagonal, -1 / (num_classes - 1)), atol=F64_ATOL, rtol=0
    )
    torch.testing.assert_close(w.sum(dim=0), torch.zeros(w.shape[1]), atol=F64_ATOL, rtol=0)


@pytest.mark.usefixtures("float64")
@pytest.mark.parametrize("num_classes,dim", [(10, 512), (100, 1024), (5, 5)])
def test_simplex_etf_geometry(num_classes, dim):
    torch.manual_seed(0)
    assert_simplex_etf(simplex_etf(num_classes, dim), num_classes)


@pytest.mark.usefixtures("float64")
def test_orthonormal_rows():
    torch.manual_seed(0)
    w = orthonormal_rows(10, 512)
    torch.testing.assert_close(w @ w.T, torch.eye(10), atol=F64_ATOL, rtol=0)


def test_etf_needs_enough_dimensions():
    with pytest.raises(ConfigError, match="feature dimension"):
        simplex_etf(10, 5)
    with pytest.raises(ConfigError, match="feature dimension"):
        build_model("vgg11", 1000, (3, 32, 32), classifier="etf")


def _train_one_step(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> None:
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5, weight_decay=1e-2)
    nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()


@pytest.mark.usefixtures("float64")
def test_vgg11_etf_classifier_is_frozen_and_gives_cosines():
    model = build_paper("vgg11", classifier="etf")
    head = model.classifier
    assert head.bias is None and head.normalize_features
    assert not head.weight.requires_grad
    assert_simplex_etf(head.weight.detach(), 10)
    assert model.head_parameter_names() == ["classifier.weight"]
    before = head.weight.detach().clone()
    x, y = torch.randn(2, 3, 32, 32), torch.tensor([1, 7])
    _train_one_step(model, x, y)
    assert head.weight.grad is None
    assert torch.equal(head.weight, before)
    with torch.no_grad():
        z = model.features(x)
        cosines = nn.functional.normalize(z, dim=1) @ head.weight.T
        torch.testing.assert_close(model.head(z), cosines, atol=F64_ATOL, rtol=0)
        assert model(x).abs().max() <= 1 + F64_ATOL


def test_mobilenet_etf_classifier():
    model = build_meta("mobilenet", classifier="etf")
    assert model.classifier.weight.shape == (100, 1024) and not model.classifier.weight.requires_grad
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert trainable == EXPECTED_PARAMS["mobilenet"] - linear(1024, 100)


@pytest.mark.usefixtures("float64")
def test_orthonormal_classifier_is_frozen():
    model = build_paper("vgg11", classifier="orthonormal")
    w = model.classifier.weight
    assert not w.requires_grad and model.classifier.bias is None and model.classifier.normalize_features
    torch.testing.assert_close(w @ w.T, torch.eye(10), atol=F64_ATOL, rtol=0)


@pytest.mark.usefixtures("float64")
def test_fedetf_head_projects_then_applies_a_frozen_etf():
    model = build_paper("vgg11", classifier="fedetf")
    head = model.classifier
    trainable = {n for n, p in head.named_parameters() if p.requires_grad}
    assert trainable == {"projection.weight", "temperature"}
    assert head.projection.weight.shape == (10, 512) and head.projection.bias is None
    assert_simplex_etf(head.etf.weight.detach(), 10)
    before = head.etf.weight.detach().clone()
    x = torch.randn(2, 3, 32, 32)
    _train_one_step(model, x, torch.tensor([0, 3]))
    assert head.etf.weight.grad is None and torch.equal(head.etf.weight, before)
    assert head.temperature.grad is not None
    with torch.no_grad():
        z = model.features(x)
        expected = head.temperature * nn.functional.normalize(head.projection(z), dim=1) @ head.etf.weight.T
        torch.testing.assert_close(model.head(z), expected, atol=F64_ATOL, rtol=0)


def test_linear_classifier_defaults_and_options():
    assert build_meta("vgg11").classifier.bias is not None
    assert not build_meta("vgg11").classifier.normalize_features
    plain = build_meta("vgg11", classifier_bias=False, normalize_features=True).classifier
    assert plain.bias is None and plain.normalize_features and plain.weight.requires_grad


def test_frozen_classifier_with_bias_or_unknown_kind_is_rejected():
    with pytest.raises(ConfigError, match="no bias"):
        build_meta("vgg11", classifier="etf", classifier_bias=True)
    with pytest.raises(ConfigError, match="unknown classifier"):
        build_meta("mobilenet", classifier="cosine")


def test_etf_is_the_same_for_the_same_seed():
    a = build_paper("vgg11", seed=3, classifier="etf").classifier.weight
    b = build_paper("vgg11", seed=3, classifier="etf").classifier.weight
    assert torch.equal(a, b)


# -- named split points (FedImpro) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "split,shape",
    [
        ("layer1", (64, 32, 32)),
        ("layer2", (128, 16, 16)),
        ("layer3", (256, 8, 8)),
        ("layer4", (512, 1, 1)),
    ],
)
def test_resnet18_split_points(split, shape, models):
    # FedImpro spec §1.3: after the 5th/9th/13th/17th conv; flattened D = 65,536 / 32,768 / 16,384 / 512.
    model = models("resnet18")
    assert model.split_points() == ["layer1", "layer2", "layer3", "layer4"]
    x = torch.randn(2, 3, 32, 32)
    with torch.inference_mode():
        h = model.low(x, split)
        assert h.shape == (2, *shape)
        torch.testing.assert_close(model.high(h, split), model(x), rtol=0, atol=0)


def test_resnet18_split_gradients_flow_through_both_parts():
    model = build_paper("resnet18")
    h = model.low(torch.randn(2, 3, 32, 32), "layer2")
    model.high(h, "layer2").sum().backward()
    assert model.encoder.conv1.weight.grad is not None and model.classifier.weight.grad is not None


def test_other_split_points(models):
    with torch.inference_mode():
        assert models("resnet50").low(torch.randn(2, 3, 32, 32), "layer2").shape == (2, 512, 16, 16)
        x = torch.randn(2, 3, 32, 32)
        for name, shape in (("vgg9", (256, 4, 4)), ("vgg11", (512, 1, 1))):
            model = models(name)
            assert model.split_points() == ["conv"]
            h = model.low(x, "conv")
            assert h.shape == (2, *shape)
            torch.testing.assert_close(model.high(h, "conv"), model(x), rtol=0, atol=0)


def test_unknown_split_point_is_a_config_error():
    with pytest.raises(ConfigError, match="layer2"):
        build_meta("resnet18").low(torch.empty(1, 3, 32, 32, device="meta"), "layer5")
    with pytest.raises(ConfigError, match="none"):
        build_meta("lenet5").low(torch.empty(1, 1, 28, 28, device="meta"), "layer1")


# -- configuration errors --------------------------------------------------------------------------------


def test_bad_model_params_are_config_errors():
    with pytest.raises(ConfigError, match="init"):
        build_meta("resnet18", init="xavier")
    with pytest.raises(ConfigError, match="divisible by 16"):
        build_model("unet", 2, (3, 250, 250))
    with pytest.raises(ConfigError, match="model_params accepts"):
        build_meta("mlp", width=3)
    with pytest.raises(ConfigError, match="true or false"):  # TOML "false" as a string would mean True
        build_meta("vgg11", classifier_bias="false")
    with pytest.raises(ConfigError, match="3 input channels"):  # raised before any weight download
        build_model("resnet18_imagenet", 10, (1, 64, 64), pretrained=True)


def test_resnet_init_options():
    # FedImpro [code] keeps PyTorch's default init; "torchvision" uses kaiming fan_out (std sqrt(2/fan_out)).
    weight = build_paper("resnet18", init="torchvision").encoder.layer1[0].conv1.weight
    assert abs(weight.std().item() - math.sqrt(2 / (64 * 9))) < 0.01
    weight = build_paper("resnet18").encoder.layer1[0].conv1.weight
    assert weight.abs().max().item() <= 1 / math.sqrt(64 * 9) + 1e-6  # kaiming-uniform a=√5 bound
