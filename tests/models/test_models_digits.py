"""The quickstart's models for scikit-learn's 8×8 digits (``fedbench/models/digits.py``): counts by layer arithmetic,
the widths they take, and DigitsCNN's named split points composing to the whole model."""

from __future__ import annotations

import pytest
import torch

from fedbench.models.digits import DigitsCNN, DigitsMLP


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def test_parameter_counts_follow_the_widths():
    assert n_params(DigitsMLP(10, (1, 8, 8))) == (64 * 128 + 128) + (128 * 10 + 10)
    assert n_params(DigitsMLP(10, (1, 8, 8), hidden=32)) == (64 * 32 + 32) + (32 * 10 + 10)
    conv = (32 * 9 + 32) + (64 * 32 * 9 + 64)
    assert n_params(DigitsCNN(10, (1, 8, 8))) == conv + (64 * 4 * 4 * 128 + 128) + (128 * 10 + 10)
    assert n_params(DigitsCNN(10, (1, 8, 8), width=8, hidden=16)) == (
        (8 * 9 + 8) + (16 * 8 * 9 + 16) + (16 * 4 * 4 * 16 + 16) + (16 * 10 + 10)
    )


@pytest.mark.parametrize("build", [DigitsMLP, DigitsCNN])
def test_shapes_and_head_of_features_is_forward(build):
    torch.manual_seed(0)
    model = build(10, (1, 8, 8)).eval()
    x = torch.randn(5, 1, 8, 8)
    with torch.no_grad():
        z = model.features(x)
        assert z.shape == (5, model.feature_dim) == (5, 128)
        torch.testing.assert_close(model.head(z), model(x), rtol=0, atol=0)


@pytest.mark.parametrize("split,shape", [("pool", (64, 4, 4)), ("hidden", (128,))])
def test_cnn_split_points_compose_to_the_whole_model(split, shape):
    torch.manual_seed(0)
    model = DigitsCNN(10, (1, 8, 8)).eval()
    assert model.split_points() == ["pool", "hidden"] and model.default_split == "pool"
    x = torch.randn(3, 1, 8, 8)
    with torch.no_grad():
        h = model.low(x, split)
        assert h.shape == (3, *shape)
        torch.testing.assert_close(model.high(h, split), model(x), rtol=0, atol=0)
        torch.testing.assert_close(model.high_features(h, split), model.features(x), rtol=0, atol=0)
