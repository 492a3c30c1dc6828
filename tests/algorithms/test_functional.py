"""``fedbench/algorithms/functional.py``: the proximal term skips frozen parameters."""

from __future__ import annotations

import pytest
import torch

from pfl_formula_fixtures import etf_model


@pytest.mark.usefixtures("head_mlp", "float64")
def test_proximal_term_skips_frozen_parameters():
    """The proximal term ‖Θ − Θ_g‖² counts the *trainable* parameters only: a frozen ETF classifier that differs from
    the teacher's (it never does in training; here it is moved on purpose) adds nothing."""
    from fedbench.algorithms.functional import proximal

    model = etf_model()
    reference = [p.detach().clone() for p in model.parameters()]
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert trainable < sum(p.numel() for p in model.parameters())  # the classifier is frozen
    assert float(proximal(model.parameters(), reference).detach()) == pytest.approx(trainable * 0.01, rel=1e-12)
