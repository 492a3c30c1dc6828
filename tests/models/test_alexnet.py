"""AlexNet variants (``fedbench/models/alexnet.py``): FedTrip's CIFAR-10 AlexNet and FedTR's AlexNet-BN stand-in —
the parameter counts the specs print, the output shape of each configuration the recipes train, head ∘ features =
forward, and dropout acting in training mode only."""

from __future__ import annotations

import pytest
import torch

from fedbench.models.alexnet import AlexNetBN, AlexNetCifar


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_parameter_counts_are_the_specs():
    with torch.device("meta"):
        # FedTrip spec §2.6: 2,729,290 parameters (Table III: 2.72 M); FedTR spec §2.5: "about 57M" with 4 classes.
        assert n_params(AlexNetCifar(10, (3, 32, 32))) == 2_729_290
        assert n_params(AlexNetBN(4, (3, 224, 224))) == 57_038_916


@pytest.mark.parametrize(
    "build,shape,classes",
    [
        (AlexNetCifar, (3, 32, 32), 10),  # fedtrip_table4: CIFAR-10
        (AlexNetBN, (3, 224, 224), 4),  # FedTR's COVID-19 stand-in (a)
        (AlexNetBN, (1, 224, 224), 2),  # the channel count follows the input
    ],
)
def test_output_and_feature_shapes_of_each_configuration(build, shape, classes):
    with torch.device("meta"):
        model = build(classes, shape).eval()
        x = torch.empty(2, *shape)
        assert model.features(x).shape == (2, model.feature_dim)
        assert model(x).shape == (2, classes)


def test_head_of_features_is_forward_and_dropout_acts_only_in_training():
    torch.manual_seed(0)
    model = AlexNetCifar(10, (3, 32, 32), dropout=0.5)
    x = torch.randn(4, 3, 32, 32)
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model.head(model.features(x)), model(x), rtol=0, atol=0)
        assert torch.equal(model(x), model(x))  # eval: no dropout
        model.train()
        torch.manual_seed(1)
        first = model(x)
        torch.manual_seed(2)
        assert not torch.equal(first, model(x))  # train: dropout draws differ
        without = AlexNetCifar(10, (3, 32, 32), dropout=0.0)
        without.load_state_dict(model.state_dict())
        assert torch.equal(without.train()(x), without.eval()(x))


def test_the_head_is_the_last_linear_alone():
    """The second dropout ends the encoder, so that methods replacing or freezing the head touch one Linear."""
    model = AlexNetCifar(10, (3, 32, 32))
    assert isinstance(model.classifier, torch.nn.Linear) and model.classifier.in_features == model.feature_dim == 1024
    assert isinstance(model.encoder[-1], torch.nn.Dropout)
    with torch.device("meta"):
        bn = AlexNetBN(4, (3, 224, 224))
    assert isinstance(bn.classifier, torch.nn.Linear) and bn.classifier.in_features == bn.feature_dim == 4096
    assert len(bn.batchnorm_module_names()) == 7  # five conv BNs and two FC BN1ds
