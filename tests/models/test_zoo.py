"""Model zoo: shapes at the paper input size, head∘features = forward, parameter counts from the specs' layer
lists, frozen classifiers, parameter-name partitions, named split points, deterministic init."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from fedbench.errors import ConfigError
from fedbench.models import MODELS, build_model
from model_fixtures import (
    EXPECTED_PARAMS,
    build_meta,
    build_paper,
    linear,
    paper_config,
)

NAMES = MODELS.names()


def n_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


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
    assert EXPECTED_PARAMS["pfl_cnn"] == 1_626_442
    assert EXPECTED_PARAMS["alexnet_cifar"] == 2_729_290
    assert EXPECTED_PARAMS["resnet18_imagenet"] == 11_689_512 - linear(512, 1000) + linear(512, 10)
    assert EXPECTED_PARAMS["densenet121"] == 7_978_856 - linear(1024, 1000) + linear(1024, 2)
    assert EXPECTED_PARAMS["unet"] == 7_763_041 + 33


def test_emnist_cnn_count():
    # FedTrip spec §2.6: 64,851 parameters with 47 classes.
    assert n_params(build_model("fedtrip_cnn", 47, (1, 28, 28))) == 64_851


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
        ("pfl_cnn", 0),
        ("unet", 18),
    ],
)
def test_batchnorm_module_counts(name, count):
    assert len(build_meta(name).batchnorm_module_names()) == count


@pytest.mark.parametrize("name", NAMES)
def test_init_is_deterministic_under_manual_seed(name, models):
    reference = models(name).state_dict()
    again = build_paper(name, seed=0).state_dict()
    assert reference.keys() == again.keys()
    for key in reference:
        assert torch.equal(reference[key], again[key]), key
    other = build_paper(name, seed=1).state_dict()
    assert any(not torch.equal(reference[k], other[k]) for k in reference if reference[k].is_floating_point())


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


# The data set (and its parameters) each model's registered configuration is for: the recipes of its papers train it
# there (alexnet_bn, a stand-in no shipped recipe trains, is listed for FedTR's COVID-19 images).
TRAINED_ON = {
    "alexnet_cifar": ("cifar10", {}),
    "alexnet_bn": ("covid19", {"image_size": 224}),
    "fedtr_cifar_cnn": ("cifar10", {}),
    "pamap2_net": ("pamap2", {}),
    "fedbn_digit_cnn": ("digits5", {"image_size": 28}),
    "covidnet_small": ("covid19", {"image_size": 224}),
    "densenet121": ("camelyon17", {"image_size": 96}),
    "digits_mlp": ("digits", {}),
    "digits_cnn": ("digits", {}),
    "lenet5": ("organamnist", {"size": 28}),
    "fedtrip_cnn": ("mnist", {}),
    "mlp": ("mnist", {}),
    "mobilenet": ("cifar100", {}),
    "resnet18": ("cifar10", {}),
    "resnet18_femnist": ("femnist", {}),
    "resnet50": ("cifar100", {}),
    "resnet18_imagenet": ("office_caltech10", {"image_size": 256}),
    "unet": ("retinal", {"image_size": 256}),
    "vgg11": ("cifar10", {}),
    "vgg9": ("cifar10", {}),
    "pfl_cnn": ("cifar10", {}),
}
PAPERS = {"quickstart", "fedtrip", "fedtr", "fedimpro", "lgmix", "feddrplus", "bench"}  # the Makefile's PAPERS


@pytest.mark.parametrize("name", NAMES)
def test_registration_is_the_configuration_the_papers_train_and_describes_the_built_model(name):
    from fedbench.data import dataset_meta, static_input_shape

    info = MODELS.info(name)
    model = build_meta(name)  # the builder itself, at the registered configuration
    dataset, params = TRAINED_ON[name]
    assert tuple(info["input_shape"]) == static_input_shape(dataset, params)
    assert info["num_classes"] == (2 if name == "unet" else dataset_meta(dataset).num_classes)  # disc and cup maps
    assert set(info["papers"]) <= PAPERS
    unit = "channels per pixel" if info.get("task") == "segmentation" else "-d"
    assert info["feature"].startswith(f"{model.feature_dim}{' ' if unit.startswith('c') else ''}{unit}")
    assert info.get("faithful", True) == (not info["description"].startswith("NOT FAITHFUL"))


def test_the_default_mobilenet_keeps_no_batchnorm_running_statistics():
    """FedDr+'s MobileNet (FedBABU MobileNetCifar) normalises every batch by its own statistics: by default no
    BatchNorm layer tracks running statistics, so the model holds no running_mean / running_var buffers."""
    model = build_meta("mobilenet")
    norms = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    assert norms and not any(m.track_running_stats for m in norms)
    assert not any("running" in name for name, _ in model.named_buffers())


def test_the_default_vgg11_has_no_dropout():
    """FedDr+'s VGG-11 ([code] use_dropout=False): by default no Dropout layer drops anything in training mode."""
    model = build_meta("vgg11")
    assert not any(isinstance(m, nn.Dropout) and m.p > 0 for m in model.modules())
