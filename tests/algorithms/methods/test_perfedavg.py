"""Per-FedAvg (Fallah et al., NeurIPS 2020): the first-order meta steps by hand, and evaluation adapting with
``adapt_steps`` SGD steps of the client learning rate."""

from __future__ import annotations

import pytest
import torch

from conftest import F64_ATOL
from pfl_formula_fixtures import N, flat, gd, loss_and_grad, setup


# ------------------------------------------------------------------------------------------- Per-FedAvg
@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize(
    "local, meta_steps", [({"local_steps": 2}, 1), ({"local_steps": 3}, 1), ({"local_epochs": 2}, 2)]
)
def test_perfedavg_first_order_meta_steps_by_hand(local, meta_steps):
    """Per-FedAvg (FO), per pair (D, D') of consecutive mini-batches of 4: w̃ = w − α∇f(w; D),
    w ← w − β∇f(w̃; D'); an unpaired last batch takes no step. The batches are the client's epoch permutations."""
    lr, beta = 0.3, 0.05
    algorithm, ctx, server, _, x, y = setup("perfedavg", {"beta": beta}, lr=lr, batch_size=4, **local)
    generator = torch.Generator()
    generator.set_state(ctx.generator.get_state())
    update = algorithm.local_train(ctx)
    w = server.params.clone()
    for _ in range(meta_steps):
        order = torch.randperm(N, generator=generator)
        d, d_prime = order[:4], order[4:]
        inner = w - lr * loss_and_grad(ctx.model, w, x[d], y[d])[1]
        w = w - beta * loss_and_grad(ctx.model, inner, x[d_prime], y[d_prime])[1]
    assert torch.allclose(update.params, w, rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("adapt_steps", [0, 1, 2])
def test_perfedavg_evaluation_adapts_with_adapt_steps_sgd_steps_of_the_client_lr(adapt_steps):
    lr = 0.3
    algorithm, ctx, server, _, x, y = setup("perfedavg", {"adapt_steps": adapt_steps}, lr=lr)
    ctx.model.eval()
    model = algorithm.eval_model(ctx)
    assert torch.allclose(flat(model), gd(ctx.model, server.params, x, y, lr, adapt_steps), rtol=0, atol=F64_ATOL)
