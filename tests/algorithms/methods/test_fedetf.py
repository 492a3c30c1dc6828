"""FedETF (Li et al., ICCV 2023): the balanced softmax uses each client's local class counts."""

from __future__ import annotations

import pytest
import torch

from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm

pytestmark = pytest.mark.usefixtures("linear_model")


@pytest.mark.usefixtures("float64")
def test_fedetf_balanced_softmax_uses_local_class_counts():
    algorithm = build_algorithm("fedetf", {"beta": 1.0})
    logits = torch.randn(4, 3)
    y = torch.tensor([0, 0, 1, 1])
    ctx = type("Ctx", (), {})()
    ctx.scratch = {"log_prior": torch.tensor([3.0, 1.0, 0.0]).log()}  # class 2 absent locally
    by_hand = -torch.log(
        torch.stack([3 * logits[b, 0].exp() if y[b] == 0 else logits[b, 1].exp() for b in range(4)])
        / (3 * logits[:, 0].exp() + logits[:, 1].exp())
    ).mean()
    assert float(algorithm.loss(ctx, None, y, logits)) == pytest.approx(float(by_hand), rel=0, abs=F64_ATOL)
