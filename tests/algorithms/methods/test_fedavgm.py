"""FedAvgM (Hsu et al., 2019): server momentum on the pseudo-gradient w^t − w̄, by hand in float64 (to within F64_ATOL)
with unequal client sizes, β ≠ 0 and η ≠ 1; β = 0 with η = 1 is FedAvg bit for bit; packed == sequential."""

from __future__ import annotations

import pytest
import torch

from algorithm_fixtures import make_spec, train
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.context import ClientUpdate, ServerState
from global_formula_fixtures import assert_packed_equals_sequential, close, packing_spec


@pytest.mark.usefixtures("float64")
def test_fedavgm_server_momentum_by_hand():
    """v ← β v + (w − w̄), w ← w − η v over three rounds; w̄ weighted 1/4, 3/4 by the clients' sizes 10 and 30; the
    buffers are averaged with the same weights."""
    beta, eta = 0.6, 1.7
    algorithm = build_algorithm("fedavgm", {"beta": beta, "server_lr": eta})
    torch.manual_seed(1)
    server = ServerState(torch.randn(12), {})
    algorithm.init_server(server)
    w, v = server.params.clone(), torch.zeros(12)
    for round_index in (1, 2, 3):
        updates = [
            ClientUpdate(k, w + 0.1 * torch.randn(12), {"running_mean": torch.full((2,), float(k))}, n, 3, 0.0)
            for k, n in enumerate((10, 30))
        ]
        algorithm.aggregate(server, updates, round_index)
        averaged = 0.25 * updates[0].params + 0.75 * updates[1].params
        v = beta * v + (w - averaged)
        w = w - eta * v
        assert close(server.params, w), round_index
        assert close(server.state["momentum"], v), round_index
        assert close(server.buffers["running_mean"], torch.full((2,), 0.75)), round_index  # FedAvg's buffer average


@pytest.mark.parametrize(("beta", "eta"), [(0.0, 1.0), (0.0, 1.5), (0.5, 1.0)])
def test_fedavgm_returns_the_average_itself_only_at_zero_momentum_and_unit_lr(beta, eta):
    """In float32: β = 0, η = 1 gives w̄ bit for bit (w − (w − w̄) would round); any other setting differs from w̄."""
    algorithm = build_algorithm("fedavgm", {"beta": beta, "server_lr": eta})
    torch.manual_seed(2)
    server = ServerState(torch.randn(200), {})
    algorithm.init_server(server)
    for round_index in (1, 2):
        w = server.params
        updates = [ClientUpdate(k, w + 0.1 * torch.randn(200), {}, n, 3, 0.0) for k, n in enumerate((10, 30))]
        averaged = 0.25 * updates[0].params.double() + 0.75 * updates[1].params.double()
        algorithm.aggregate(server, updates, round_index)
        assert torch.equal(server.params, averaged.float()) == ((beta, eta) == (0.0, 1.0)), round_index


@pytest.mark.slow
def test_fedavgm_with_zero_momentum_and_unit_lr_trains_as_fedavg_bit_for_bit(tmp_path):
    _, sink_a, fedavg = train(make_spec("fedavg", rounds=3), tmp_path, "a.pt")
    _, sink_m, fedavgm = train(make_spec("fedavgm", {"beta": 0.0, "server_lr": 1.0}, rounds=3), tmp_path, "m.pt")
    assert torch.equal(fedavgm["server"]["params"], fedavg["server"]["params"])
    assert [r.test_acc for r in sink_m.records] == [r.test_acc for r in sink_a.records]
    _, _, moving = train(make_spec("fedavgm", rounds=3), tmp_path, "b.pt")  # the default β = 0.9 really differs
    assert not torch.equal(moving["server"]["params"], fedavg["server"]["params"])


@pytest.mark.usefixtures("float64")
def test_fedavgm_packed_equals_sequential(tmp_path):
    assert_packed_equals_sequential(
        packing_spec("fedavgm", {"beta": 0.5}, optimizer={"lr": 0.05, "momentum": 0.9}), tmp_path
    )
