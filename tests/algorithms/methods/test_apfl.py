"""APFL (Deng et al., 2020): two local steps of the personal and mixed models by hand, evaluation of the mixed model
(with the personal BatchNorm statistics), and α staying in [0, 1]."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from torch.func import functional_call
from torch.nn import functional as F

from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.context import load_weights, param_views
from personal_run_fixtures import train
from pfl_formula_fixtures import BNModel, flat, gd, loss_and_grad, mlp, setup


# ------------------------------------------------------------------------------------------- APFL
@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize(
    "params, start, clipped",
    [
        ({}, "w0", None),  # first participation: α = 0.5, η_α = η, v from w^0
        ({"alpha": 0.3, "alpha_lr": 0.7}, "noisy", None),
        ({"alpha": 0.3, "adaptive_alpha": False}, "noisy", None),
        ({"alpha_lr": 400.0}, "noisy", 0.0),  # a worse v: α steps below 0 and is clipped
        ({"alpha_lr": 400.0}, "trained", 1.0),  # a better v: α steps above 1 and is clipped
    ],
)
def test_apfl_two_local_steps_by_hand(params, start, clipped):
    """APFL Alg. 1 per step: w ← w − η∇f(w); v̄ = αv + (1 − α)w (Eq. 3, with the new w);
    v ← v − ηα∇f(v̄); α ← clip[0,1](α − η_α⟨v − w, ∇f(v̄)⟩) (Eq. 6, with the v before its step)."""
    lr = 0.3
    torch.manual_seed(4)
    v0 = flat(mlp()) + 0.5 * torch.randn(flat(mlp()).shape)
    a0 = 0.6  # the client's α from an earlier round (state), not the configured start
    first_participation = start == "w0"
    state = {} if first_participation else {"personal_params": v0, "personal_buffers": {}, "alpha": torch.tensor(a0)}
    algorithm, ctx, server, w0, x, y = setup("apfl", params, state, local_epochs=2, lr=lr)
    if start == "trained":
        v0 = gd(ctx.model, server.params, x, y, 0.5, 20)
        state["personal_params"] = v0.clone()
    update = algorithm.local_train(ctx)
    w, v = server.params.clone(), (w0 if first_participation else v0)
    a = params.get("alpha", 0.5) if first_participation else a0
    adaptive, alpha_lr = params.get("adaptive_alpha", True), params.get("alpha_lr", lr)
    for _ in range(2):
        w = w - lr * loss_and_grad(ctx.model, w, x, y)[1]
        g = loss_and_grad(ctx.model, a * v + (1 - a) * w, x, y)[1]
        v, a = v - lr * a * g, min(1.0, max(0.0, a - alpha_lr * float((v - w) @ g))) if adaptive else a
    assert torch.allclose(update.params, w, rtol=0, atol=F64_ATOL)
    assert torch.allclose(state["personal_params"], v, rtol=0, atol=F64_ATOL)
    assert float(state["alpha"]) == pytest.approx(a, abs=F64_ATOL)
    if clipped is not None:
        assert a == clipped
    elif adaptive:
        assert 0.0 < a < 1.0 and a != pytest.approx(params.get("alpha", 0.5) if first_participation else a0)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_apfl_evaluates_the_mixed_model_with_the_current_global_model():
    """Evaluation: v̄_k = α_k v_k + (1 − α_k) w^t; a client that never trained is evaluated with w^t."""
    algorithm, ctx, server, w0, _, _ = setup("apfl")
    assert torch.equal(ctx.payload["initial_params"], w0)
    w_t = server.params.clone()
    assert torch.equal(flat(algorithm.eval_model(ctx)), w_t)
    v = w_t + torch.linspace(-1.0, 2.0, w_t.numel())
    ctx.state.update(personal_params=v.clone(), personal_buffers={}, alpha=torch.tensor(0.3))
    assert torch.allclose(flat(algorithm.eval_model(ctx)), 0.3 * v + 0.7 * w_t, rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_apfl_mixed_model_runs_with_the_personal_batchnorm_statistics():
    """v̄'s forward pass in the personal step runs with v_k's own BN buffers (FL-bench keeps them with v_k), in
    training mode: it normalises with the batch statistics and moves v_k's running statistics, which the client
    keeps; the global copy's BN statistics are the model's own."""
    torch.manual_seed(6)
    model = BNModel()
    buffers = {n: b.clone() for n, b in model.named_buffers()}
    buffers["encoder.2.running_mean"] += 0.5
    v0 = flat(model) + 0.2
    state = {"personal_params": v0.clone(), "personal_buffers": buffers, "alpha": torch.tensor(0.4)}
    algorithm, ctx, server, _, x, y = setup("apfl", {"adaptive_alpha": False}, state, model=model, local_steps=1)
    w_t = server.params.clone()
    algorithm.local_train(ctx)
    reference = BNModel()
    load_weights(reference, w_t, dict(reference.named_buffers()))
    w = gd(reference, w_t, x, y, 0.3, 1)
    names = [n for n, _ in reference.named_parameters()]
    mixed = (0.4 * v0 + 0.6 * w).requires_grad_(True)
    personal_buffers = {n: b.clone() for n, b in buffers.items()}
    tensors = dict(zip(names, param_views(mixed, reference)), **personal_buffers)  # updated in place by BN
    (g,) = torch.autograd.grad(F.cross_entropy(functional_call(reference, tensors, (x,)), y), mixed)
    assert torch.allclose(state["personal_params"], v0 - 0.3 * 0.4 * g, rtol=0, atol=F64_ATOL)
    assert not torch.equal(personal_buffers["encoder.2.running_mean"], buffers["encoder.2.running_mean"])
    for name, b in personal_buffers.items():
        assert torch.allclose(state["personal_buffers"][name], b, rtol=0, atol=F64_ATOL), name


def test_apfl_alpha_stays_in_unit_interval(tmp_path):
    _, _, ckpt = train(tmp_path, algorithm="apfl", rounds=3, algorithm_params={"alpha_lr": 50.0})
    alphas = [float(ckpt["client_states"][k]["alpha"]) for k in range(4)]
    assert all(0.0 <= a <= 1.0 for a in alphas)
    assert any(a in (0.0, 1.0) for a in alphas)  # the step is large enough to hit the clip
    _, _, fixed = train(tmp_path, algorithm="apfl", algorithm_params={"adaptive_alpha": False, "alpha": 0.3})
    assert all(float(fixed["client_states"][k]["alpha"]) == pytest.approx(0.3) for k in range(4))


def test_apfl_reports_each_clients_alpha_when_asked_and_nothing_otherwise():
    """LG-Mix Fig. 2(a)'s APFL curve: α_k of each client of the round that holds one."""
    apfl = build_algorithm("apfl", {})
    contexts = [SimpleNamespace(client_id=0, state={}), SimpleNamespace(client_id=2, state={"alpha": 0.5})]
    weights = {"clients": [2], "weight": [0.5], "symbol": "α"}
    assert apfl.round_diagnostics({"mixing_weights"}, None, contexts) == {"mixing_weights": weights}
    assert apfl.round_diagnostics(set(), None, contexts) == {}


def test_a_spec_may_ask_apfl_for_its_mixing_weights():
    """APFL declares the mixing weights it reports (``reported_diagnostics``): a spec asking for them starts."""
    from algorithm_fixtures import make_spec
    from fedbench.engine.diagnostics import check_diagnostics, diagnostics_of

    spec = make_spec("apfl", diagnostics=("mixing_weights",))
    assert build_algorithm("apfl", {}).reported_diagnostics == frozenset({"mixing_weights"})
    check_diagnostics(spec, build_algorithm("apfl", spec.algorithm_params))
    assert "mixing_weights" in diagnostics_of(spec)
