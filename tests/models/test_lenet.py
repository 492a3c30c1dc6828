"""LeNet-5 family (``fedbench/models/lenet.py``): FedTR's BN LeNet-5 and FedTrip's 3-conv LeNet-5 — the counts the
specs print, the shapes of every configuration the recipes train (OrganMNIST 11 classes, MNIST/FMNIST 10, EMNIST-47),
head ∘ features = forward, and MOON's representation being the FC-84 output before its ReLU."""

from __future__ import annotations

import pytest
import torch

from fedbench.models.lenet import LeNet5, LeNet5Conv3


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_parameter_counts_are_the_specs():
    with torch.device("meta"):
        assert n_params(LeNet5(11, (1, 28, 28))) == 44_555  # FedTR spec §2.5, BN affine included
        assert n_params(LeNet5Conv3(10, (1, 28, 28))) == 61_706  # FedTrip spec §2.6, C = 10
        assert n_params(LeNet5Conv3(47, (1, 28, 28))) == 64_851  # C = 47 (EMNIST balanced)


@pytest.mark.parametrize(
    "build,classes",
    [(LeNet5, 11), (LeNet5Conv3, 10), (LeNet5Conv3, 47)],  # fedtr_table1 OrganA/C/SMNIST; fedtrip MNIST/FMNIST, EMNIST
)
def test_shapes_and_head_of_features_is_forward(build, classes):
    torch.manual_seed(0)
    model = build(classes, (1, 28, 28)).eval()
    x = torch.randn(3, 1, 28, 28)
    with torch.no_grad():
        z = model.features(x)
        assert z.shape == (3, model.feature_dim) == (3, 84)
        logits = model(x)
        assert logits.shape == (3, classes)
        torch.testing.assert_close(model.head(z), logits, rtol=0, atol=0)


def test_moons_representation_is_fc84_before_its_relu():
    """FedTrip [code]: MOON's representation is ``encoder[:-1]``, the FC 120→84 output before the ReLU."""
    model = LeNet5Conv3(10, (1, 28, 28))
    last = model.encoder[-2]
    assert isinstance(last, torch.nn.Linear) and (last.in_features, last.out_features) == (120, 84)
    assert isinstance(model.encoder[-1], torch.nn.ReLU)
    x = torch.randn(2, 1, 28, 28)
    with torch.no_grad():
        torch.testing.assert_close(model.encoder[:-1](x).relu(), model.features(x), rtol=0, atol=0)


def test_bn_lenet_has_two_batchnorm_layers_and_conv3_none():
    assert len(LeNet5(11, (1, 28, 28)).batchnorm_module_names()) == 2
    assert LeNet5Conv3(10, (1, 28, 28)).batchnorm_module_names() == []
