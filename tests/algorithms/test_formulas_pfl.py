"""The personalised-FL baselines against hand computations: FedPer, FedBN, FedBABU, FedAlt, FedRep,
local training, Per-FedAvg, Ditto, APFL and the partial-personalisation plumbing they share.

As in ``test_formulas_personal.py``: a 2-layer MLP (body = Linear + ReLU, head = Linear) on 8 samples in float64,
full-batch steps (batch size 8, so a step's gradient does not depend on the sample order), the method's rule
written out in plain torch arithmetic, compared with what fedbench's hooks (``local_train``, ``aggregate``,
``eval_model``, ``objective``) give to within F64_ATOL.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.func import functional_call
from torch.nn import functional as F

from algorithm_fixtures import (  # noqa: F401  (head_mlp: a fixture, used through usefixtures)
    MLP,
    HeadMLP,
    client_context,
    fresh_server,
    head_mlp,
    make_spec,
)
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm, validate_algorithm_params
from fedbench.algorithms.base import ClientUpdate
from fedbench.algorithms.context import ServerState, load_weights, param_views
from fedbench.data.store import TensorData
from fedbench.errors import ConfigError
from fedbench.models.base import FedModel

CLASSES, DIM, N = 4, 6, 8


def mlp(seed: int = 0) -> HeadMLP:
    torch.manual_seed(seed)
    return HeadMLP(CLASSES, (DIM,), hidden=5)


class BNModel(FedModel):
    """Flatten → Linear → BatchNorm1d → ReLU, then a linear head: FedBN's local part is the BN layer."""

    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Flatten(), nn.Linear(DIM, 5), nn.BatchNorm1d(5), nn.ReLU())
        self.classifier = nn.Linear(5, CLASSES)
        self.feature_dim = 5


def data(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(N, DIM, generator=g, dtype=torch.float64), torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])


def flat(model: nn.Module) -> torch.Tensor:
    return nn.utils.parameters_to_vector(model.parameters()).detach().clone()


def mask_of(model: nn.Module, names) -> torch.Tensor:
    names = set(names)
    return torch.cat([torch.full((p.numel(),), n in names) for n, p in model.named_parameters()])


def loss_and_grad(model: nn.Module, w: torch.Tensor, x: torch.Tensor, y: torch.Tensor):
    """Mean cross-entropy of the model with flat weights w on (x, y), and its gradient in w."""
    w = w.detach().clone().requires_grad_(True)
    names = [n for n, _ in model.named_parameters()]
    loss = F.cross_entropy(functional_call(model, dict(zip(names, param_views(w, model))), (x,)), y)
    (grad,) = torch.autograd.grad(loss, w)
    return loss.detach(), grad


def gd(model, w, x, y, lr, steps, mask=None):
    """``steps`` full-batch gradient steps on the parameters ``mask`` selects (all if None)."""
    for _ in range(steps):
        grad = loss_and_grad(model, w, x, y)[1]
        w = w - lr * (grad if mask is None else grad * mask)
    return w


def setup(name, params=None, state=None, model=None, seed=0, lr=0.3, bind=True, **spec_overrides):
    """A bound method, its server (w^0 remembered, then moved to w^t ≠ w^0) and a client context on 8 samples."""
    params = params or {}
    spec_overrides.setdefault("batch_size", N)
    spec = make_spec(name, params, model=MLP, optimizer={"lr": lr}, **spec_overrides)
    algorithm = build_algorithm(name, params)
    model = model if model is not None else mlp(seed)
    if bind:
        algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    algorithm.init_server(server)
    w0 = server.params.clone()
    server.params = w0 + 0.2 * torch.randn(w0.shape, generator=torch.Generator().manual_seed(seed + 7))
    x, y = data()
    state = {} if state is None else state
    ctx = client_context(algorithm, spec, model, server, TensorData(x, y, x, y), torch.arange(N), state)
    return algorithm, ctx, server, w0, x, y


# ------------------------------------------------------------------------------------------- defaults and bounds
@pytest.mark.parametrize(
    "name, defaults",
    [
        ("fedrep", {"head_epochs": None, "body_epochs": 1}),
        ("fedalt", {"personal_fraction": 0.5}),
        ("ditto", {"lam": 0.75, "personal_epochs": None}),
        ("apfl", {"alpha": 0.5, "adaptive_alpha": True, "alpha_lr": None}),
        ("perfedavg", {"beta": 1e-3, "adapt_steps": 1}),
        ("local", {"loss": "ce"}),
    ],
)
def test_personalised_method_defaults_are_the_documented_ones(name, defaults):
    params = build_algorithm(name, {}).params
    assert {key: getattr(params, key) for key in defaults} == defaults


@pytest.mark.parametrize(
    "name, accepted, rejected",
    [
        ("fedrep", {"head_epochs": 0, "body_epochs": 0}, {"head_epochs": -1}),
        ("fedrep", {"body_epochs": 0}, {"body_epochs": -1}),
        ("fedalt", {"personal_fraction": 0.0}, {"personal_fraction": -1e-9}),
        ("fedalt", {"personal_fraction": 1.0}, {"personal_fraction": 1 + 1e-9}),
        ("ditto", {"lam": 0.0, "personal_epochs": 0}, {"lam": -1e-9}),
        ("ditto", {"personal_epochs": 0}, {"personal_epochs": -1}),
        ("apfl", {"alpha": 0.0, "alpha_lr": 1e-9}, {"alpha": -1e-9}),
        ("apfl", {"alpha": 1.0}, {"alpha": 1 + 1e-9}),
        ("apfl", {"alpha_lr": 1e-9}, {"alpha_lr": 0.0}),
        ("perfedavg", {"beta": 1e-9, "adapt_steps": 0}, {"beta": 0.0}),
        ("perfedavg", {"adapt_steps": 0}, {"adapt_steps": -1}),
        ("local", {"loss": "dr"}, {"loss": "mse"}),
    ],
)
def test_personalised_method_parameter_bounds(name, accepted, rejected):
    validate_algorithm_params(name, accepted)
    with pytest.raises(ConfigError, match=next(iter(rejected))):
        validate_algorithm_params(name, rejected)


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


# ------------------------------------------------------------------------------------------- FedRep / FedAlt / FedPer
def own_head_state(ctx_model: nn.Module, seed: int = 9) -> tuple[dict, torch.Tensor]:
    head = mask_of(ctx_model, ctx_model.head_parameter_names())
    own = torch.randn(int(head.sum()), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return {"local_params": own.clone(), "local_buffers": {}}, own


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize(
    "params, schedule, head_steps, body_steps",
    [
        ({}, {"local_epochs": 2}, 2, 1),  # head for the run's E epochs, then the body for 1
        ({"head_epochs": 3, "body_epochs": 2}, {"local_epochs": 1}, 3, 2),
        ({"head_epochs": 0, "body_epochs": 2}, {"local_epochs": 2}, 0, 2),
        ({}, {"local_steps": 2, "local_epochs": 3}, 2, 2),  # a step budget: each phase "epoch" is local_steps
        ({"head_epochs": 2, "body_epochs": 3}, {"local_steps": 2}, 4, 6),
    ],
)
def test_fedrep_head_then_body_phases_by_hand(params, schedule, head_steps, body_steps):
    """FedRep Alg. 1 from (φ^t, the client's own head h_k): head steps with the body fixed, then body steps with
    the head fixed; the new head stays in the client's state."""
    lr = 0.3
    model = mlp()
    state, own = own_head_state(model)
    algorithm, ctx, server, _, x, y = setup("fedrep", params, state, model=model, lr=lr, **schedule)
    head = mask_of(model, model.head_parameter_names())
    w = server.params.clone()
    w[head] = own
    update = algorithm.local_train(ctx)
    w = gd(model, w, x, y, lr, head_steps, head)
    w = gd(model, w, x, y, lr, body_steps, ~head)
    assert torch.allclose(update.params, w, rtol=0, atol=F64_ATOL)
    assert torch.allclose(state["local_params"], w[head], rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize(
    "fraction, schedule, personal_steps",
    [(None, {"local_epochs": 3}, 2), (1 / 3, {"local_epochs": 3}, 1), (0.25, {"local_steps": 4}, 1), (1.0, {}, 1)],
)
def test_fedalt_personal_then_shared_steps_by_hand(fraction, schedule, personal_steps):
    """FedAlt Alg. 1: round(personal_fraction · K) steps of the personal head v_k with u fixed, then the other
    steps of the shared body u with v_k fixed (K = the round's planned steps; the default fraction 1/2 rounds
    1.5 to 2)."""
    lr = 0.3
    params = {} if fraction is None else {"personal_fraction": fraction}
    model = mlp()
    state, own = own_head_state(model)
    algorithm, ctx, server, _, x, y = setup("fedalt", params, state, model=model, lr=lr, **schedule)
    steps = ctx.planned_steps()
    head = mask_of(model, model.head_parameter_names())
    w = server.params.clone()
    w[head] = own
    update = algorithm.local_train(ctx)
    w = gd(model, w, x, y, lr, personal_steps, head)
    w = gd(model, w, x, y, lr, steps - personal_steps, ~head)
    assert torch.allclose(update.params, w, rtol=0, atol=F64_ATOL)
    assert torch.allclose(state["local_params"], w[head], rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("bind", [True, False])
def test_fedper_trains_the_whole_model_from_the_global_body_and_its_own_head(bind):
    """FedPer: E epochs of SGD on the whole model, starting from (global body, the client's own head); the head
    is stored on the client. Without ``bind_model`` (hook-level use) the local part is the same."""
    lr = 0.3
    model = mlp()
    state, own = own_head_state(model)
    algorithm, ctx, server, _, x, y = setup("fedper", {}, state, model=model, lr=lr, bind=bind, local_epochs=2)
    head = mask_of(model, model.head_parameter_names())
    w = server.params.clone()
    w[head] = own
    update = algorithm.local_train(ctx)
    w = gd(model, w, x, y, lr, 2)
    assert torch.allclose(update.params, w, rtol=0, atol=F64_ATOL)
    assert torch.allclose(state["local_params"], w[head], rtol=0, atol=F64_ATOL)
    assert state["local_buffers"] == {}


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("name", ["fedper", "fedrep", "fedalt"])
def test_first_participation_starts_from_the_servers_head_and_eval_uses_the_own_head(name):
    """A client without a local part starts from w^t whole (the server's head is w^0's, never averaged);
    evaluation puts the client's own head on the current global body."""
    model = mlp()
    algorithm, ctx, server, _, _, _ = setup(name, {}, {}, model=model)
    head = mask_of(model, model.head_parameter_names())
    w_t = server.params.clone()
    algorithm.begin_local(ctx)
    assert torch.equal(flat(model), w_t)
    assert torch.equal(flat(algorithm.eval_model(ctx)), w_t)
    ctx.state.update(own_head_state(model)[0])
    expected = w_t.clone()
    expected[head] = ctx.state["local_params"]
    load_weights(model, w_t)
    assert torch.equal(flat(algorithm.eval_model(ctx)), expected)


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("name", ["fedper", "fedrep", "fedalt", "fedbn"])
def test_server_averages_the_shared_part_only(name):
    """Σ_k (n_k/Σn) w_k on the shared part; the local part (heads; FedBN: BN weights and all BN buffers) keeps the
    server's values."""
    torch.manual_seed(8)
    model = BNModel() if name == "fedbn" else mlp()
    algorithm, _, server, _, _, _ = setup(name, {}, model=model)
    local_names = model.batchnorm_parameter_names() if name == "fedbn" else model.head_parameter_names()
    local = mask_of(model, local_names)
    before = server.params.clone()
    old_buffers = {n: b.clone() for n, b in server.buffers.items()}
    sizes = (1, 3)
    updates = []
    for k, n in enumerate(sizes):
        buffers = {b: v + (k + 1) if v.is_floating_point() else v + 5 * (k + 1) for b, v in old_buffers.items()}
        updates.append(ClientUpdate(k, before + torch.randn(before.shape), buffers, n, 1, 0.0))
    algorithm.aggregate(server, updates, 1)
    average = 0.25 * updates[0].params + 0.75 * updates[1].params
    assert torch.allclose(server.params[~local], average[~local], rtol=0, atol=F64_ATOL)
    assert torch.equal(server.params[local], before[local])
    assert local.any() and (~local).any()
    for buffer, value in server.buffers.items():  # only FedBN's model has buffers: all of them BN's, kept
        assert torch.equal(value, old_buffers[buffer]), buffer
    if name == "fedbn":
        assert set(server.buffers) == set(old_buffers) and len(old_buffers) == 3


@pytest.mark.usefixtures("head_mlp", "float64")
def test_fedbn_trains_with_its_own_batchnorm_and_keeps_it():
    """FedBN: the client puts its own BN weights and running statistics on the global model, trains everything
    (FedAvg's step), and keeps the new BN weights and statistics; evaluation uses them with the global rest."""
    torch.manual_seed(10)
    model = BNModel()
    bn = mask_of(model, model.batchnorm_parameter_names())
    own = torch.linspace(0.5, 1.5, int(bn.sum()), dtype=torch.float64)
    own_buffers = {n: b.clone() for n, b in model.named_buffers()}
    own_buffers["encoder.2.running_mean"] += 0.3
    own_buffers["encoder.2.running_var"] += 2.0
    own_buffers["encoder.2.num_batches_tracked"] += 7
    state = {"local_params": own.clone(), "local_buffers": {n: b.clone() for n, b in own_buffers.items()}}
    algorithm, ctx, server, _, x, y = setup("fedbn", {}, state, model=model, lr=0.3, local_steps=1)
    w = server.params.clone()
    w[bn] = own
    update = algorithm.local_train(ctx)
    reference = BNModel()
    load_weights(reference, w, own_buffers)
    reference.train()
    expected = gd(reference, w, x, y, 0.3, 1)
    assert torch.allclose(update.params, expected, rtol=0, atol=F64_ATOL)
    assert torch.allclose(state["local_params"], expected[bn], rtol=0, atol=F64_ATOL)
    h = x @ reference.encoder[1].weight.detach().T + reference.encoder[1].bias.detach()
    mean = 0.9 * own_buffers["encoder.2.running_mean"] + 0.1 * h.mean(0)  # BN's momentum 0.1 on its own stats
    assert torch.allclose(state["local_buffers"]["encoder.2.running_mean"], mean, rtol=0, atol=F64_ATOL)
    assert int(state["local_buffers"]["encoder.2.num_batches_tracked"]) == 8
    load_weights(model, server.params, server.buffers)
    evaluated = algorithm.eval_model(ctx)
    w_eval = server.params.clone()
    w_eval[bn] = state["local_params"]
    assert torch.equal(flat(evaluated), w_eval)
    assert torch.equal(evaluated.encoder[2].running_mean, state["local_buffers"]["encoder.2.running_mean"])


# ------------------------------------------------------------------------------------------- FedBABU
@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("frozen_before", [False, True])
def test_fedbabu_trains_the_body_only_and_restores_the_heads_flags(frozen_before):
    """FedBABU: E epochs of SGD on the body with the head fixed; the head's requires_grad flags are what they were
    before (so that fine-tuning can train it; a head bias frozen before stays frozen)."""
    lr = 0.3
    model = mlp()
    if frozen_before:
        model.classifier.bias.requires_grad_(False)
    algorithm, ctx, server, _, x, y = setup("fedbabu", {}, {}, model=model, lr=lr, local_epochs=2)
    head = mask_of(model, model.head_parameter_names())
    update = algorithm.local_train(ctx)
    expected = gd(model, server.params.clone(), x, y, lr, 2, ~head)
    assert torch.allclose(update.params, expected, rtol=0, atol=F64_ATOL)
    assert torch.equal(update.params[head], server.params[head])
    assert model.classifier.weight.requires_grad
    assert model.classifier.bias.requires_grad is not frozen_before
    assert all(p.requires_grad for p in model.encoder.parameters())


# ------------------------------------------------------------------------------------------- local training
@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("first_participation", [True, False])
def test_local_training_continues_the_clients_own_model_and_the_server_keeps_w0(first_participation):
    lr = 0.3
    torch.manual_seed(11)
    v0 = flat(mlp()) + 0.4 * torch.randn(flat(mlp()).shape)
    state = {} if first_participation else {"personal_params": v0.clone(), "personal_buffers": {}}
    algorithm, ctx, server, _, x, y = setup("local", {}, state, lr=lr, local_epochs=2)
    start = server.params.clone() if first_participation else v0
    update = algorithm.local_train(ctx)
    expected = gd(ctx.model, start, x, y, lr, 2)
    assert torch.allclose(update.params, expected, rtol=0, atol=F64_ATOL)
    assert torch.allclose(state["personal_params"], expected, rtol=0, atol=F64_ATOL)
    load_weights(ctx.model, server.params)
    assert torch.allclose(flat(algorithm.eval_model(ctx)), expected, rtol=0, atol=F64_ATOL)
    before = server.params.clone()
    algorithm.aggregate(server, [update], 1)
    assert torch.equal(server.params, before)


@pytest.mark.usefixtures("head_mlp", "float64")
def test_local_training_with_dot_regression_needs_an_etf_and_uses_l_dr():
    from fedbench.algorithms.dot_regression import dot_regression_loss

    with pytest.raises(ConfigError, match="run with algorithm_params.loss = 'dr' needs a fixed etf classifier"):
        build_algorithm("local", {"loss": "dr"}).check_model(mlp(), "run")
    build_algorithm("local", {}).check_model(mlp(), "run")  # plain CE needs no fixed classifier
    torch.manual_seed(12)
    etf = HeadMLP(CLASSES, (DIM,), classifier="etf", hidden=5)
    build_algorithm("local", {"loss": "dr"}).check_model(etf, "run")
    x, y = data()
    for loss, expected in (("dr", dot_regression_loss), ("ce", F.cross_entropy)):
        algorithm, ctx, _, _, _, _ = setup("local", {"loss": loss}, model=etf)
        with torch.no_grad():
            logits = etf(x)
        assert float(algorithm.objective(ctx, x, y, logits)) == pytest.approx(float(expected(logits, y)), abs=1e-12)


# ------------------------------------------------------------------------------------------- the shared plumbing
def test_partial_personalisation_masks_follow_the_flat_parameter_order():
    from fedbench.algorithms.partial import parameter_mask

    model = mlp()
    mask = parameter_mask(model, ["classifier.bias", "encoder.1.bias"])
    sizes = [p.numel() for p in model.parameters()]
    expected = torch.cat([torch.full((n,), i in (1, 3)) for i, n in enumerate(sizes)])
    assert mask.dtype == torch.bool and torch.equal(mask, expected)
    assert math.prod(mask.shape) == sum(sizes)


def test_stored_models_are_copies():
    from fedbench.algorithms.partial import restore_model, store_model

    ctx = ServerState(torch.zeros(1), {})  # anything with a ``state`` dict
    params, buffers = torch.arange(3.0), {"b": torch.ones(2)}
    store_model(ctx, "personal", params, buffers)
    params += 1
    buffers["b"] += 1
    assert torch.equal(ctx.state["personal_params"], torch.arange(3.0))
    assert torch.equal(ctx.state["personal_buffers"]["b"], torch.ones(2))
    model = nn.Linear(1, 1)
    assert restore_model(ctx, "other", model) is False
    ctx.state["m_params"], ctx.state["m_buffers"] = torch.tensor([2.0, 3.0]), {}
    assert restore_model(ctx, "m", model) is True
    assert float(model.weight.detach()) == 2.0 and float(model.bias.detach()) == 3.0


# ------------------------------------------------------------------------------------------- the catalogue
@pytest.mark.parametrize(
    "name, papers",
    [
        ("fedper", {"feddrplus"}),
        ("fedbn", {"lgmix"}),
        ("fedbabu", {"feddrplus", "lgmix"}),
        ("fedalt", {"lgmix"}),
        ("fedrep", {"lgmix", "feddrplus"}),
        # LG-Mix Fig. 2b's "client standalone training" (shared/papers/lgmix.md: a figure-only baseline, no
        # recipe trains it yet); FedDr+ Table 3's "Local only" rows
        ("local", {"lgmix", "feddrplus"}),
        ("perfedavg", {"lgmix", "feddrplus"}),
        ("ditto", {"feddrplus"}),
        ("apfl", {"lgmix"}),
    ],
)
def test_each_personalised_baseline_is_listed_under_the_papers_that_compare_it(name, papers):
    from fedbench.algorithms import ALGORITHMS

    assert set(ALGORITHMS.info(name)["papers"]) == papers
