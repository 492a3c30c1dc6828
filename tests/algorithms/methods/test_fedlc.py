"""FedLC (Zhang et al., ICML 2022): the label-count calibration of the logits and the local steps it drives, by
hand in float64; τ = 0 is FedAvg's cross-entropy."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from conftest import F64_ATOL
from fedbench.algorithms.methods.fedlc import calibration
from pfl_formula_fixtures import CLASSES, loss_and_grad, setup
from pfl_formula_fixtures import mlp_logits as logits


def test_calibration_is_tau_times_the_count_to_the_minus_quarter():
    """τ·n_c^{−1/4}, a class the client lacks counted as 10⁻⁸ (a margin of τ·100)."""
    labels = torch.tensor([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2])  # 16 of class 0, one of class 2
    got = calibration(labels, 3, 0.5, torch.float64)
    assert torch.allclose(got, torch.tensor([0.5 / 2, 0.5 * 100, 0.5], dtype=torch.float64), rtol=1e-12, atol=0)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_fedlc_local_steps_use_the_calibrated_cross_entropy():
    """Two full-batch steps on −log softmax_y(f(x) − τ n^{−1/4}) over the client's own counts (classes 0 and 1 held
    three and once, 2 and 3 not at all, so the calibration differs per class)."""
    tau, lr = 0.8, 0.3
    algorithm, ctx, server, _, x, _ = setup("fedlc", {"tau": tau}, lr=lr, local_epochs=2)
    y = torch.tensor([0, 0, 1, 0, 0, 1, 0, 0])
    ctx.data.train_y.copy_(y)
    counts = torch.tensor([6.0, 2.0, 1e-8, 1e-8], dtype=torch.float64)
    shift = tau * counts ** (-0.25)
    w = server.params.clone()
    for _ in range(2):
        w = w.detach().requires_grad_(True)
        (grad,) = torch.autograd.grad(F.cross_entropy(logits(w, x) - shift, y), w)
        w = w.detach() - lr * grad
    update = algorithm.local_train(ctx)
    assert torch.allclose(update.params, w, rtol=0, atol=F64_ATOL)
    assert not torch.allclose(w, server.params - 2 * lr * loss_and_grad(ctx.model, server.params, x, y)[1], atol=1e-4)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_fedlc_with_tau_zero_is_cross_entropy():
    algorithm, ctx, server, _, x, y = setup("fedlc", {"tau": 0.0})
    algorithm.begin_local(ctx)
    out = algorithm.forward(ctx, x)
    assert torch.equal(algorithm.loss(ctx, x, y, out), F.cross_entropy(out, y))
    assert ctx.scratch["calibration"].shape == (CLASSES,)
