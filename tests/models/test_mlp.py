"""The MLP (``fedbench/models/mlp.py``): FedTrip's 784→100→10 (79,510 parameters, FedTrip spec §2.6) and LG-Mix's BCI
MLP (hidden 256, 128 with BatchNorm1d) — counts, shapes, head ∘ features = forward, and no hidden layer refused."""

from __future__ import annotations

import pytest
import torch

from fedbench.data import static_input_shape
from fedbench.errors import ConfigError
from fedbench.models.mlp import MLP


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_fedtrips_mlp_has_the_specs_parameter_count():
    assert n_params(MLP(10, (1, 28, 28))) == 79_510


def test_each_hidden_width_adds_a_linear_and_batch_norm_adds_one_bn_per_hidden_layer():
    model = MLP(2, (1, 1, 465), hidden=(256, 128), batch_norm=True)
    linears = [m for m in model.encoder if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(465, 256), (256, 128)]
    assert len(model.batchnorm_module_names()) == 2 and model.feature_dim == 128
    assert n_params(model) == (465 * 256 + 256) + 2 * 256 + (256 * 128 + 128) + 2 * 128 + (128 * 2 + 2)
    assert MLP(2, (1, 1, 465), hidden=(256, 128)).batchnorm_module_names() == []


@pytest.mark.parametrize(
    "classes,shape,hidden,batch_norm",
    [
        (10, (1, 28, 28), (100,), False),  # fedtrip MNIST/FMNIST
        (2, static_input_shape("bci", {"features": "tangent"}), (256, 128), True),  # lgmix_table10
    ],
)
def test_shapes_and_head_of_features_is_forward(classes, shape, hidden, batch_norm):
    torch.manual_seed(0)
    model = MLP(classes, shape, hidden, batch_norm).eval()
    x = torch.randn(4, *shape)
    with torch.no_grad():
        z = model.features(x)
        assert z.shape == (4, hidden[-1])
        torch.testing.assert_close(model.head(z), model(x), rtol=0, atol=0)
        assert model(x).shape == (4, classes)
    assert (z >= 0).all()  # z is after the last hidden ReLU


def test_an_mlp_without_hidden_layers_is_a_config_error():
    with pytest.raises(ConfigError, match="at least one hidden layer"):
        MLP(10, (1, 28, 28), hidden=())
