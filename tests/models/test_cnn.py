"""Plain CNNs named by the specs (``fedbench/models/cnn.py``): FedTR's CIFAR-10 CNN and PAMAP2-Net, FedBN's digits
CNN — the counts the FedTR spec prints, the shapes at every configuration the recipes train, head ∘ features =
forward, and the flattened sizes following the input."""

from __future__ import annotations

import pytest
import torch

from fedbench.models.cnn import FedBNDigitCNN, FedDCCifarCNN, PamapNet


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_parameter_counts_are_the_fedtr_specs():
    with torch.device("meta"):
        assert n_params(FedDCCifarCNN(10, (3, 32, 32))) == 797_962  # FedTR spec §2.5
        assert n_params(PamapNet(10, (27, 1, 200))) == 99_466  # FedTR spec §2.5


@pytest.mark.parametrize(
    "build,shape,classes,flat",
    [
        (FedDCCifarCNN, (3, 32, 32), 10, 1600),  # fedtr_table1: CIFAR-10
        (PamapNet, (27, 1, 200), 10, 1408),  # fedtr_table1: PAMAP2 windows
        (FedBNDigitCNN, (3, 28, 28), 10, 6272),  # lgmix: Digits5 at 28×28
        (FedBNDigitCNN, (3, 32, 32), 10, 8192),  # another image size: the first FC follows it
    ],
)
def test_shapes_of_each_configuration(build, shape, classes, flat):
    with torch.device("meta"):
        model = build(classes, shape).eval()
        x = torch.empty(2, *shape)
        first_fc = next(m for m in model.encoder if isinstance(m, torch.nn.Linear))
        assert first_fc.in_features == flat
        assert model.features(x).shape == (2, model.feature_dim)
        assert model(x).shape == (2, classes)


@pytest.mark.parametrize(
    "build,shape", [(FedDCCifarCNN, (3, 32, 32)), (PamapNet, (27, 1, 200)), (FedBNDigitCNN, (3, 28, 28))]
)
def test_head_of_features_is_forward_and_features_are_after_relu(build, shape):
    torch.manual_seed(0)
    model = build(10, shape).eval()
    x = torch.randn(3, *shape)
    with torch.no_grad():
        z = model.features(x)
        torch.testing.assert_close(model.head(z), model(x), rtol=0, atol=0)
    assert (z >= 0).all()  # z is taken after the ReLU, as the specs name it


def test_batchnorm_layers_of_the_bn_models():
    assert len(FedBNDigitCNN(10, (3, 28, 28)).batchnorm_module_names()) == 5  # FedBN: BN after the first five layers
    assert len(PamapNet(10, (27, 1, 200)).batchnorm_module_names()) == 2
    assert FedDCCifarCNN(10, (3, 32, 32)).batchnorm_module_names() == []
