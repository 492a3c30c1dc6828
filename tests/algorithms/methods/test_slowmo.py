"""SlowMo (Wang et al., ICLR 2020): the slow server momentum (under a learning-rate schedule), and zero momentum with a
unit slow learning rate equal to FedAvg; checked against the paper's formula written out by hand in float64 (to
within F64_ATOL) and against the method it must reduce to."""

from __future__ import annotations

import pytest
import torch

from algorithm_fixtures import (
    LinearModel,
    make_spec,
    train,
)
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import weighted_average
from fedbench.algorithms.context import ClientUpdate, ServerState
from global_formula_fixtures import CLASSES, DIM, algorithm_flops, close


# ------------------------------------------------------------------------------------------- SlowMo
@pytest.mark.usefixtures("linear_model")
@pytest.mark.usefixtures("float64")
def test_slowmo_with_zero_momentum_and_unit_slow_lr_equals_fedavg(tmp_path):
    _, _, fedavg = train(make_spec("fedavg", rounds=3), tmp_path, "a.pt")
    _, _, slowmo = train(make_spec("slowmo", {"beta": 0.0, "slow_lr": 1.0}, rounds=3), tmp_path, "s.pt")
    assert torch.equal(slowmo["server"]["params"], fedavg["server"]["params"])  # w̄ itself, bit for bit


@pytest.mark.usefixtures("linear_model")
@pytest.mark.parametrize(("beta", "alpha"), [(0.0, 1.0), (0.0, 1.5), (0.5, 1.0)])
def test_slowmo_returns_the_average_itself_at_zero_momentum_and_unit_slow_lr_only(beta, alpha):
    """In float32, over two rounds: at β = 0, α = 1 (its FedAvg setting) the new weights are w̄ bit for bit, where
    Alg. 1's line 7 written out, w − γ·(w − w̄)/γ, rounds otherwise; any other β or α takes line 7 as it reads."""
    lr = 0.05
    algorithm = build_algorithm("slowmo", {"beta": beta, "slow_lr": alpha})
    algorithm.spec = make_spec("slowmo", optimizer={"lr": lr})
    torch.manual_seed(3)
    server = ServerState(torch.randn(200), {})
    algorithm.init_server(server)
    u = torch.zeros(200)
    for round_index in (1, 2):
        w = server.params
        updates = [ClientUpdate(k, w + 0.1 * torch.randn(200), {}, n, 3, 0.0) for k, n in enumerate((10, 30))]
        averaged = weighted_average([x.params for x in updates], torch.tensor([0.25, 0.75], dtype=torch.float64))
        algorithm.aggregate(server, updates, round_index)
        u = beta * u + (w - averaged) / lr
        line_7 = w - alpha * lr * u
        assert server.params.dtype == torch.float32 and not torch.equal(line_7, averaged)  # line 7 rounds otherwise
        assert torch.equal(server.params, averaged if (beta, alpha) == (0.0, 1.0) else line_7), round_index
        assert torch.equal(server.state["momentum"], u)  # u kept either way


@pytest.mark.usefixtures("linear_model")
@pytest.mark.usefixtures("float64")
def test_slowmo_server_momentum_by_hand():
    torch.manual_seed(4)
    beta, alpha, lr = 0.5, 1.5, 0.05
    algorithm = build_algorithm("slowmo", {"beta": beta, "slow_lr": alpha})
    algorithm.spec = make_spec("slowmo", optimizer={"lr": lr})
    server = ServerState(torch.randn(20), {})
    algorithm.init_server(server)
    w, u = server.params.clone(), torch.zeros(20)
    for round_index in (1, 2):
        updates = [ClientUpdate(k, server.params + 0.1 * torch.randn(20), {}, 10, 3, 0.0) for k in range(2)]
        algorithm.aggregate(server, updates, round_index)
        averaged = (updates[0].params + updates[1].params) / 2
        u = beta * u + (w - averaged) / lr
        w = w - alpha * lr * u
        assert torch.allclose(server.params, w, rtol=0, atol=F64_ATOL)


# ------------------------------------------------------------------------------------------- SlowMo
@pytest.mark.usefixtures("linear_model", "float64")
def test_slowmo_slow_momentum_under_an_lr_schedule_by_hand():
    """SlowMo Alg. 1 lines 6–7 with γ_t the round's client lr (an exponential schedule, so it changes):
    u ← β·u + (w − w̄)/γ_t, w ← w − α·γ_t·u; w̄ sample-weighted."""
    beta, alpha, lr, gamma = 0.7, 1.3, 0.05, 0.5
    algorithm = build_algorithm("slowmo", {"beta": beta, "slow_lr": alpha})
    spec = make_spec("slowmo", {"beta": beta, "slow_lr": alpha}, optimizer={"lr": lr},
                     lr_schedule={"name": "exponential", "gamma": gamma})  # fmt: skip
    algorithm.bind_model(spec, LinearModel(CLASSES, (DIM,)), (DIM,), CLASSES)
    torch.manual_seed(8)
    server = ServerState(torch.randn(15), {})
    algorithm.init_server(server)
    w, u = server.params.clone(), torch.zeros(15)
    for round_index in (1, 2, 3):
        updates = [ClientUpdate(k, w + 0.1 * torch.randn(15), {}, n, 3, 0.0) for k, n in enumerate((10, 30))]
        algorithm.aggregate(server, updates, round_index)
        averaged = 0.25 * updates[0].params + 0.75 * updates[1].params
        gamma_t = lr * gamma ** (round_index - 1)
        u = beta * u + (w - averaged) / gamma_t
        w = w - alpha * gamma_t * u
        assert close(server.params, w), round_index
    assert algorithm_flops("slowmo") == 0.0 and algorithm_flops("fedavg") == 0.0
