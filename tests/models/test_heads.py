"""The classifier heads (``fedbench/models/heads.py``, FedDr+ and FedETF): the simplex ETF's and orthonormal rows'
geometry, frozen classifiers that stay frozen, FedETF's projection, and the linear head's options."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from conftest import F64_ATOL
from fedbench.errors import ConfigError
from fedbench.models import build_model
from fedbench.models.heads import orthonormal_rows, simplex_etf
from model_fixtures import (
    EXPECTED_PARAMS,
    build_meta,
    build_paper,
    linear,
)


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
