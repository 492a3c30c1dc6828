"""FedDyn (Acar et al., ICLR 2021): two rounds of the dynamic regulariser and its server state, its linear state and
loss gradient, and vanishing α training clients as FedAvg; checked against the paper's formula written out by hand
in float64 (to within F64_ATOL) and against the method it must reduce to."""

from __future__ import annotations

import pytest
import torch

from algorithm_fixtures import (
    LINEAR,
    LinearModel,
    client_context,
    fresh_server,
    initial_params,
    make_spec,
    train,
)
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.context import load_weights
from fedbench.data.store import TensorData
from global_formula_fixtures import (
    algorithm_flops,
    ce_grad,
    ce_value,
    close,
    heavy_ball,
    problem,
    server_and_model,
    softmax_regression_grad,
)


# ------------------------------------------------------------------------------------------- FedDyn
@pytest.mark.usefixtures("linear_model")
@pytest.mark.usefixtures("float64")
def test_feddyn_with_vanishing_alpha_trains_clients_as_fedavg(tmp_path):
    """α → 0: the client objective is CE (g_k = 0 in round 1, the prox term vanishes), so round 1's
    client average is FedAvg's; the server then adds −h/α = (|P|/N)(θ̄ − θ^0), which does not vanish.
    (The prox term moves the clients by O(α): about 1e-14 here, well inside F64_ATOL.)"""
    alpha = 1e-12
    common = dict(rounds=1, num_clients=4, clients_per_round=2)
    _, _, fedavg = train(make_spec("fedavg", **common), tmp_path, "a.pt")
    _, _, feddyn = train(make_spec("feddyn", {"alpha": alpha}, **common), tmp_path, "d.pt")
    w0, averaged = initial_params(make_spec("fedavg", **common)), fedavg["server"]["params"]
    assert torch.allclose(feddyn["server"]["params"], averaged + (2 / 4) * (averaged - w0), rtol=0, atol=F64_ATOL)
    assert torch.allclose(feddyn["server"]["state"]["h"] / alpha, -(2 / 4) * (averaged - w0), rtol=0, atol=F64_ATOL)
    sampled = [k for k, state in feddyn["client_states"].items() if "linear" in state]
    assert len(sampled) == 2  # g_k = −α(θ_k − θ^0) is kept for the sampled clients only
    assert all(state["linear"].abs().max() < 1e-8 for state in feddyn["client_states"].values() if state)


@pytest.mark.usefixtures("linear_model")
@pytest.mark.usefixtures("float64")
def test_feddyn_linear_state_and_loss_gradient():
    torch.manual_seed(2)
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    spec = make_spec("feddyn", {"alpha": 0.5}, model=LINEAR, local_steps=2, batch_size=8, optimizer={"lr": 0.1})
    algorithm = build_algorithm("feddyn", {"alpha": 0.5})
    model = LinearModel(3, (4,))
    server = fresh_server(model)
    algorithm.init_server(server)
    g_k = torch.randn_like(server.params)
    state = {"linear": g_k.clone()}
    ctx = client_context(algorithm, spec, model, server, TensorData(x, y, x, y), torch.arange(8), state)
    algorithm.begin_local(ctx)
    # at θ = θ^{t−1} the prox term has zero gradient: ∇ = ∇CE − g_k
    loss = algorithm.loss(ctx, x, y, model(x))
    grad = torch.cat([g.flatten() for g in torch.autograd.grad(loss, list(model.parameters()))])
    expected = softmax_regression_grad(server.params, x, y, 3) - g_k
    assert torch.allclose(grad, expected, rtol=0, atol=F64_ATOL)
    update = algorithm.local_train(ctx)
    assert torch.allclose(state["linear"], g_k - 0.5 * (update.params - server.params), rtol=0, atol=F64_ATOL)


# ------------------------------------------------------------------------------------------- FedDyn
@pytest.mark.usefixtures("linear_model", "float64")
@pytest.mark.parametrize("first_h", ["participation", "unscaled"])
def test_feddyn_two_rounds_by_hand(first_h):
    """FedDyn Alg. 1: client objective L_k(θ) − ⟨g_k, θ⟩ + (α/2)‖θ − θ^{t−1}‖², g_k ← g_k − α(θ_k − θ^{t−1}),
    h ← h − α(|P|/N)(θ̄ − θ^{t−1}) with θ̄ = Σ p_k θ_k, θ^t = θ̄ − h/α. N = 4, |P| = 2, client 0 in both rounds
    (so its g_k ≠ 0 in round 2), unequal sizes. ``first_h = "unscaled"`` (FedTrip's code): round 1's h without
    the |P|/N factor, round 2's with it."""
    alpha, lr, steps, num_clients = 0.3, 0.1, 3, 4
    params = {"alpha": alpha, "first_h": first_h}
    x, y, data = problem(6, samples=12)
    clients = {0: torch.arange(0, 4), 1: torch.arange(4, 12), 2: torch.arange(2, 8)}
    spec = make_spec(
        "feddyn", params, model=LINEAR, num_clients=num_clients, clients_per_round=2, local_steps=steps,
        batch_size=64, optimizer={"lr": lr},
    )  # fmt: skip
    algorithm = build_algorithm("feddyn", params)
    model, server = server_and_model(algorithm, spec)
    states: dict[int, dict] = {k: {} for k in clients}
    theta, h = server.params.clone(), torch.zeros_like(server.params)
    g = {k: torch.zeros_like(theta) for k in clients}
    for round_index, chosen in ((1, [0, 1]), (2, [0, 2])):
        if round_index == 2:  # the loss value: linear term (minus sign) and quadratic term (½α)
            ctx = client_context(algorithm, spec, model, server, data, clients[0], states[0], 0, 2)
            algorithm.begin_local(ctx)
            displaced = theta + torch.linspace(-0.4, 0.6, theta.numel())
            load_weights(model, displaced)
            value = algorithm.loss(ctx, x[clients[0]], y[clients[0]], model(x[clients[0]]))
            expected = (
                ce_value(displaced, x[clients[0]], y[clients[0]])
                - (g[0] * displaced).sum()
                + 0.5 * alpha * ((displaced - theta) ** 2).sum()
            )
            assert float(value.detach()) == pytest.approx(float(expected.detach()), rel=0, abs=F64_ATOL)
        updates = [
            algorithm.local_train(
                client_context(algorithm, spec, model, server, data, clients[k], states[k], k, round_index)
            )
            for k in chosen
        ]
        algorithm.aggregate(server, updates, round_index)
        trained = []
        for update, k in zip(updates, chosen):
            idx, g_k, start = clients[k], g[k], theta

            def grad(v, idx=idx, g_k=g_k, start=start):
                return ce_grad(v, x[idx], y[idx]) - g_k + alpha * (v - start)

            theta_k = heavy_ball(theta, grad, steps, lr)
            assert close(update.params, theta_k), (round_index, k)
            g[k] = g_k - alpha * (theta_k - theta)
            trained.append(theta_k)
        sizes = torch.tensor([float(len(clients[k])) for k in chosen])
        averaged = sum((n / sizes.sum()) * t for n, t in zip(sizes, trained))
        fraction = 1.0 if first_h == "unscaled" and round_index == 1 else len(chosen) / num_clients
        h = h - alpha * fraction * (averaged - theta)
        theta = averaged - h / alpha
        assert close(server.params, theta), round_index
    assert g[0].abs().max() > 1e-3 and h.abs().max() > 1e-3
    assert algorithm_flops("feddyn", {"alpha": 0.1}) == 4 * 5 * 1000  # Table VIII: 4K|w|
