"""MoFedSAM (Qu et al., ICML 2022, Alg. 2): local steps with v = α g̃ + (1 − α) Δ^t, g̃ FedSAM's gradient, and the
server's new direction Δ^{t+1} = (w^t − w̄)/(η_l K̄), by hand in float64 (to within F64_ATOL)."""

from __future__ import annotations

import pytest
import torch

from algorithm_fixtures import LINEAR, client_context, make_spec
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.context import ClientUpdate, ServerState
from global_formula_fixtures import ce_grad, close, heavy_ball, problem, sam_grad, server_and_model


@pytest.mark.usefixtures("linear_model", "float64")
@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_mofedsam_local_steps_mix_the_global_direction_by_hand(momentum):
    alpha, rho, lr = 0.3, 0.5, 0.3
    x, y, data = problem(5)
    params = {"alpha": alpha, "rho": rho}
    spec = make_spec(
        "mofedsam", params, model=LINEAR, local_steps=3, batch_size=64, optimizer={"lr": lr, "momentum": momentum}
    )
    algorithm = build_algorithm("mofedsam", params)
    model, server = server_and_model(algorithm, spec)
    torch.manual_seed(6)
    direction = 0.5 * torch.randn_like(server.params)
    server.state["direction"] = direction
    w = server.params.clone()
    update = algorithm.local_train(client_context(algorithm, spec, model, server, data, torch.arange(len(y)), {}))
    sam = sam_grad(lambda t: ce_grad(t, x, y), rho)
    expected = heavy_ball(w, lambda t: alpha * sam(t) + (1 - alpha) * direction, 3, lr, momentum)
    assert close(update.params, expected)


@pytest.mark.usefixtures("float64")
@pytest.mark.parametrize("eta_g", [1.0, 1.5, 2.0])
def test_mofedsam_server_direction_and_step_by_hand(eta_g):
    """Unequal sizes (p = 1/4, 3/4) and step counts (2, 6): K̄ = 5; the round's client lr under a schedule."""
    lr, gamma = 0.1, 0.5
    algorithm = build_algorithm("mofedsam", {"server_lr": eta_g})
    algorithm.spec = make_spec("mofedsam", optimizer={"lr": lr}, lr_schedule={"name": "exponential", "gamma": gamma})
    torch.manual_seed(7)
    server = ServerState(torch.randn(9), {})
    algorithm.init_server(server)
    assert not server.state["direction"].any()  # Δ^0 = 0
    w = server.params.clone()
    updates = [
        ClientUpdate(k, w + 0.1 * torch.randn(9), {"running_mean": torch.full((2,), float(k))}, n, s, 0.0)
        for k, n, s in ((0, 10, 2), (1, 30, 6))
    ]
    algorithm.aggregate(server, updates, 2)
    averaged = 0.25 * updates[0].params + 0.75 * updates[1].params
    assert close(server.state["direction"], (w - averaged) / (lr * gamma * 5))
    assert close(server.params, w + eta_g * (averaged - w))
    assert close(server.buffers["running_mean"], torch.full((2,), 0.75))  # FedAvg's buffer average
    assert algorithm.payload(server, 3)["direction"] is server.state["direction"]


@pytest.mark.usefixtures("float64")
@pytest.mark.parametrize(("steps", "updated"), [(0, False), (1, True)])
def test_the_direction_is_kept_when_no_client_took_a_step(steps, updated):
    """K̄ = 0 leaves Δ as it was (there is no displacement to divide); K̄ = 1 is a step like any other."""
    algorithm = build_algorithm("mofedsam", {})
    algorithm.spec = make_spec("mofedsam", optimizer={"lr": 0.1})
    server = ServerState(torch.zeros(4), {})
    algorithm.init_server(server)
    server.state["direction"] = torch.full((4,), 3.0)
    moved = torch.full((4,), -0.5)
    algorithm.aggregate(server, [ClientUpdate(0, moved, {}, 10, steps, 0.0)], 1)
    expected = torch.full((4,), 5.0) if updated else torch.full((4,), 3.0)  # (0 − (−0.5)) / (0.1 · 1)
    assert close(server.state["direction"], expected)
