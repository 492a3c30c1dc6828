"""FedDC (Gao et al., CVPR 2022): the corrected local gradient ∇L + α_i(θ + h_i − w) + g/ω_i − g_i through K local
steps, the client's h_i and g_i updates, and the server's drift-corrected average and g update, by hand in float64
(to within F64_ATOL) on softmax regression with a client of relative size ω_i ≠ 1; packed == sequential."""

from __future__ import annotations

import pytest
import torch

from algorithm_fixtures import LINEAR, client_context, make_spec
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.context import ClientUpdate, ServerState
from global_formula_fixtures import (
    algorithm_flops,
    assert_packed_equals_sequential,
    ce_grad,
    close,
    heavy_ball,
    packing_spec,
    problem,
    server_and_model,
)


@pytest.mark.usefixtures("linear_model", "float64")
@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_feddc_local_steps_and_client_state_by_hand(momentum):
    alpha, lr, steps, clients = 0.4, 0.2, 3, 4
    x, y, data = problem(2)
    indices = torch.arange(6)  # 6 of the 10 samples: ω_i = 6·4/10 = 2.4, α_i = α/2.4
    spec = make_spec("feddc", {"alpha": alpha}, model=LINEAR, local_steps=steps, batch_size=64, num_clients=clients,
                     optimizer={"lr": lr, "momentum": momentum})  # fmt: skip
    algorithm = build_algorithm("feddc", {"alpha": alpha})
    model, server = server_and_model(algorithm, spec)
    torch.manual_seed(3)
    server.state["control"] = 0.3 * torch.randn_like(server.params)  # g
    h, g_i = 0.2 * torch.randn_like(server.params), 0.3 * torch.randn_like(server.params)
    state = {"drift": h.clone(), "control": g_i.clone()}
    w, g = server.params.clone(), server.state["control"].clone()
    update = algorithm.local_train(client_context(algorithm, spec, model, server, data, indices, state))

    omega = 6 * clients / 10
    xs, ys = x[:6], y[:6]
    expected = heavy_ball(
        w, lambda t: ce_grad(t, xs, ys) + alpha / omega * (t + h - w) + g / omega - g_i, steps, lr, momentum
    )
    assert close(update.params, expected)  # Eqs. 6–8: the penalty's and the correction's gradients
    assert close(state["drift"], h + expected - w)  # h_i ← h_i + (θ⁺ − w)
    new_g_i = g_i - g / omega + (w - expected) / (steps * lr)  # Eq. 9 in gradient units
    assert close(state["control"], new_g_i)
    assert close(update.extra["drift_change"], expected - w)
    assert close(update.extra["control_change"], omega * (new_g_i - g_i))


@pytest.mark.usefixtures("float64")
def test_feddc_server_drift_corrected_average_by_hand():
    """w ← Σ p_i θ_i + (1/N) Σ_all h_i and g ← g + (1/N) Σ ω_i Δg_i, with N = 5 clients of whom 2 are sampled, over two
    rounds (the drift sum keeps the first round's changes)."""
    algorithm = build_algorithm("feddc", {})
    algorithm.spec = make_spec("feddc", num_clients=5, clients_per_round=2)
    torch.manual_seed(4)
    server = ServerState(torch.randn(8), {})
    algorithm.init_server(server)
    drift_sum, g = torch.zeros(8), torch.zeros(8)
    for round_index in (1, 2):
        updates = [
            ClientUpdate(
                k,
                torch.randn(8),
                {"running_mean": torch.full((2,), float(k))},
                n,
                3,
                0.0,
                {"drift_change": torch.randn(8), "control_change": torch.randn(8)},
            )
            for k, n in enumerate((10, 30))
        ]
        algorithm.aggregate(server, updates, round_index)
        assert close(server.buffers["running_mean"], torch.full((2,), 0.75)), round_index  # FedAvg's buffer average
        drift_sum = drift_sum + updates[0].extra["drift_change"] + updates[1].extra["drift_change"]
        g = g + (updates[0].extra["control_change"] + updates[1].extra["control_change"]) / 5
        assert close(server.params, 0.25 * updates[0].params + 0.75 * updates[1].params + drift_sum / 5), round_index
        assert close(server.state["control"], g), round_index
    assert algorithm.payload(server, 3)["control"] is server.state["control"]


@pytest.mark.usefixtures("linear_model", "float64")
def test_feddc_client_without_steps_keeps_its_state():
    x, y, data = problem(3)
    spec = make_spec("feddc", model=LINEAR, local_steps=2, batch_size=64)
    algorithm = build_algorithm("feddc", {})
    model, server = server_and_model(algorithm, spec)
    state: dict = {}
    update = algorithm.local_train(client_context(algorithm, spec, model, server, data, torch.arange(0), state))
    assert update.num_steps == 0
    assert not state["drift"].any() and not state["control"].any()
    assert not update.extra["drift_change"].any() and not update.extra["control_change"].any()


@pytest.mark.usefixtures("float64")
def test_feddc_packed_equals_sequential(tmp_path):
    spec = packing_spec("feddc", {"alpha": 0.1}, optimizer={"lr": 0.05, "momentum": 0.5})
    assert_packed_equals_sequential(spec, tmp_path)


def test_feddc_sends_its_drift_and_estimate_changes_up_and_the_global_estimate_down():
    algorithm = build_algorithm("feddc", {})
    assert (algorithm.extra_upload_floats(1000), algorithm.extra_download_floats(1000)) == (2000, 1000)
    # per step: θ − w + h (2 vector operations), its scaled add, the correction's add
    assert algorithm_flops("feddc") == 4 * 5 * 1000
