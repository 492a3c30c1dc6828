"""pFedMe (T. Dinh et al., NeurIPS 2020): the inner solver for θ, the outer update of w and the server's β-step,
by hand in float64; the personal model evaluated."""

from __future__ import annotations

import pytest
import torch

from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.context import ClientUpdate, ServerState
from pfl_formula_fixtures import loss_and_grad, setup


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("inner_steps", [1, 3])
def test_pfedme_inner_solver_and_outer_update_by_hand(inner_steps):
    """Per local step: K steps θ ← θ − η_p(∇f(θ) + λ(θ − w)) from the previous step's θ (w^t at first), then
    w ← w − ηλ(w − θ); two local steps (full batches). Uploaded: w; kept for evaluation: θ."""
    lam, lr, personal_lr = 2.0, 0.05, 0.1
    params = {"lam": lam, "inner_steps": inner_steps, "personal_lr": personal_lr}
    algorithm, ctx, server, _, x, y = setup("pfedme", params, lr=lr, local_steps=2)
    w = server.params.clone()
    theta = w.clone()
    for _ in range(2):
        for _ in range(inner_steps):
            theta = theta - personal_lr * (loss_and_grad(ctx.model, theta, x, y)[1] + lam * (theta - w))
        w = w - lr * lam * (w - theta)
    update = algorithm.local_train(ctx)
    assert torch.allclose(update.params, w, rtol=0, atol=F64_ATOL)
    assert torch.allclose(ctx.state["personal_params"], theta, rtol=0, atol=F64_ATOL)
    assert update.num_steps == 2
    assert torch.equal(algorithm.eval_model(ctx)(x), ctx.model(x))
    assert torch.allclose(torch.nn.utils.parameters_to_vector(ctx.model.parameters()), theta, rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("beta", [1.0, 2.0, 0.5])
def test_pfedme_server_moves_beta_of_the_way_to_the_weighted_average(beta):
    """w^{t+1} = (1 − β) w^t + β Σ p_i w_i with p_i = n_i / Σ n; β = 1 is FedAvg's average bit for bit."""
    algorithm, _, server, _, _, _ = setup("pfedme", {"beta": beta})
    w_t = server.params.clone()
    g = torch.Generator().manual_seed(3)
    clients = [torch.randn(w_t.shape, generator=g, dtype=torch.float64) for _ in range(2)]
    updates = [ClientUpdate(k, v, {}, n, 1, 0.0) for k, (v, n) in enumerate(zip(clients, (1, 3)))]
    algorithm.aggregate(server, updates, 1)
    average = 0.25 * clients[0] + 0.75 * clients[1]
    assert torch.allclose(server.params, (1 - beta) * w_t + beta * average, rtol=0, atol=F64_ATOL)
    if beta == 1.0:
        fedavg = ServerState(params=w_t.clone(), buffers={})
        build_algorithm("fedavg", {}).aggregate(fedavg, updates, 1)
        assert torch.equal(server.params, fedavg.params)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_pfedme_evaluates_the_global_model_before_a_client_trains():
    algorithm, ctx, server, _, x, _ = setup("pfedme", {})
    before = torch.nn.utils.parameters_to_vector(ctx.model.parameters()).clone()
    assert algorithm.eval_model(ctx) is ctx.model
    assert torch.equal(torch.nn.utils.parameters_to_vector(ctx.model.parameters()), before)
