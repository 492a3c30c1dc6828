"""SphereFed (Dong et al., ECCV 2022, as FedDr+ runs it): with a fixed orthonormal classifier on normalised features
the logits are the cosines cos(f(x), w_c), and the local loss is their mean squared error to the one-hot label over
B×C — value and gradient by hand in float64; the model must carry the orthonormal classifier. That its rows never
move in training is tests/algorithms/test_fixed_classifier.py's."""

from __future__ import annotations

import pytest
import torch

from algorithm_fixtures import HeadMLP
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.errors import ConfigError


def test_the_loss_is_the_mean_squared_error_of_the_cosines_to_the_one_hot_label():
    """L = (1 / (B·C)) · Σ_b Σ_c (cos(f(x_b), w_c) − 1[c = y_b])²; ∂L/∂cos = 2 (cos − 1[c = y]) / (B·C)."""
    torch.manual_seed(0)
    model = HeadMLP(5, (1, 4, 4), classifier="orthonormal").double()
    x, y = torch.randn(6, 1, 4, 4, dtype=torch.float64), torch.tensor([0, 1, 2, 3, 4, 0])
    z = model.features(x)
    weight = model.classifier.weight if hasattr(model.classifier, "weight") else model.classifier.linear.weight
    cosines = (z / z.norm(dim=1, keepdim=True)) @ (weight / weight.norm(dim=1, keepdim=True)).T
    logits = model.head(z)
    # the logits are the cosines (the rows are unit vectors to the float32 precision they are built in)
    assert torch.allclose(logits, cosines, rtol=0, atol=1e-6)
    algorithm = build_algorithm("spherefed", {})
    leaf = logits.detach().requires_grad_(True)
    loss = algorithm.loss(None, x, y, leaf)
    target = torch.nn.functional.one_hot(y, 5).double()
    by_hand = ((logits.detach() - target) ** 2).sum() / (6 * 5)
    assert float(loss.detach()) == pytest.approx(float(by_hand), rel=0, abs=F64_ATOL)
    (grad,) = torch.autograd.grad(loss, leaf)
    assert torch.allclose(grad, 2 * (leaf.detach() - target) / (6 * 5), rtol=0, atol=F64_ATOL)


def test_a_perfect_prediction_costs_nothing_and_the_loss_is_symmetric_in_the_classes():
    algorithm = build_algorithm("spherefed", {})
    y = torch.tensor([2, 0])
    one_hot = torch.nn.functional.one_hot(y, 3).double()
    assert float(algorithm.loss(None, None, y, one_hot)) == 0.0
    swapped = algorithm.loss(None, None, torch.tensor([0, 2]), one_hot[:, [2, 1, 0]])
    assert float(swapped) == 0.0


def test_the_model_must_have_the_fixed_orthonormal_classifier():
    algorithm = build_algorithm("spherefed", {})
    algorithm.check_model(HeadMLP(5, (1, 4, 4), classifier="orthonormal"), "spherefed")
    with pytest.raises(ConfigError, match="model_params.classifier = 'orthonormal'"):
        algorithm.check_model(HeadMLP(5, (1, 4, 4), classifier="linear"), "spherefed")
