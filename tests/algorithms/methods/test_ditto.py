"""Ditto (Li et al., ICML 2021): the global and proximal personal steps and the personal objective by hand, what is
evaluated and sent, and a huge λ pinning the personal models to the global one."""

from __future__ import annotations

import pytest
import torch

from conftest import F64_ATOL
from fedbench.algorithms.context import load_weights
from personal_run_fixtures import train
from pfl_formula_fixtures import flat, gd, loss_and_grad, mlp, setup


# ------------------------------------------------------------------------------------------- Ditto
@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("personal_epochs, first_participation", [(None, False), (3, True), (0, False)])
def test_ditto_global_and_proximal_personal_steps_by_hand(personal_epochs, first_participation):
    """Ditto Alg. 1: the upload is FedAvg's local SGD from w^t (2 epochs); the personal model takes
    ``personal_epochs`` steps (None: as many as the global update) of v ← v − η(∇F(v) + λ(v − w^t)), from the
    client's v_k, or from w^0 on first participation."""
    lam, lr = 0.8, 0.3
    params = {"lam": lam, "personal_epochs": personal_epochs}
    torch.manual_seed(3)
    v0 = None if first_participation else flat(mlp()) + 0.3 * torch.randn(flat(mlp()).shape)
    state = {} if first_participation else {"personal_params": v0.clone(), "personal_buffers": {}}
    algorithm, ctx, server, w0, x, y = setup("ditto", params, state, local_epochs=2, lr=lr)
    w_t = server.params.clone()
    update = algorithm.local_train(ctx)
    assert torch.allclose(update.params, gd(ctx.model, w_t, x, y, lr, 2), rtol=0, atol=F64_ATOL)
    v = w0 if first_participation else v0
    for _ in range(2 if personal_epochs is None else personal_epochs):
        v = v - lr * (loss_and_grad(ctx.model, v, x, y)[1] + lam * (v - w_t))
    assert torch.allclose(state["personal_params"], v, rtol=0, atol=F64_ATOL)
    assert not torch.allclose(v, update.params, rtol=0, atol=1e-3)  # the personal model is not the upload


@pytest.mark.usefixtures("head_mlp", "float64")
def test_ditto_personal_objective_value_and_gradient_by_hand():
    """Ditto Eq. 2: F_k(v) + (λ/2)‖v − w^t‖² while the personal model trains, F_k alone for the global one; its
    gradient ∇F_k(v) + λ(v − w^t)."""
    lam = 0.6
    algorithm, ctx, server, _, x, y = setup("ditto", {"lam": lam})
    w_t = server.params.clone()
    v = w_t + 0.25 * torch.randn(w_t.shape, generator=torch.Generator().manual_seed(5))
    load_weights(ctx.model, v)
    ce, grad = loss_and_grad(ctx.model, v, x, y)
    plain = algorithm.objective(ctx, x, y, algorithm.forward(ctx, x)).detach()
    assert float(plain) == pytest.approx(float(ce), abs=F64_ATOL)
    ctx.scratch["personal"] = True
    objective = algorithm.objective(ctx, x, y, algorithm.forward(ctx, x))
    assert float(objective.detach()) == pytest.approx(float(ce + lam / 2 * ((v - w_t) ** 2).sum()), abs=F64_ATOL)
    ctx.model.zero_grad()
    objective.backward()
    got = torch.cat([p.grad.flatten() for p in ctx.model.parameters()])
    assert torch.allclose(got, grad + lam * (v - w_t), rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_ditto_evaluates_the_personal_model_or_the_global_one_and_sends_w0():
    algorithm, ctx, server, w0, _, _ = setup("ditto")
    assert torch.equal(ctx.payload["initial_params"], w0)  # v_k starts from w^0, not from w^t
    w_t = server.params.clone()
    assert torch.equal(flat(algorithm.eval_model(ctx)), w_t)  # a client that never trained: w^t
    v = w_t + 1.0
    ctx.state.update(personal_params=v.clone(), personal_buffers={})
    assert torch.equal(flat(algorithm.eval_model(ctx)), v)


def test_ditto_with_huge_lambda_pins_personal_models_to_the_global_one(tmp_path):
    common = {"algorithm": "ditto", "rounds": 2, "local_epochs": 3, "optimizer": {"lr": 0.05}}
    _, _, one_round = train(tmp_path, **{**common, "rounds": 1})
    received = one_round["server"]["params"]  # w^1, the global model clients receive in round 2

    def drift(lam):
        _, _, ckpt = train(tmp_path, **common, algorithm_params={"lam": lam})
        return max(float((ckpt["client_states"][k]["personal_params"] - received).norm()) for k in range(4))

    free, pinned = drift(0.0), drift(1 / 0.05)  # η·λ = 1: each step resets v to w^t − η∇F
    assert pinned < 0.1 * free
    # λ = 0 is local training of the personal model: it moves far from w^t
    assert free > 1.0
