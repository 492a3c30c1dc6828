"""FedAdagrad (Reddi et al., ICLR 2021, Alg. 2): m, v = τ² + Σ Δ² and the step η·m/(√v + τ), by hand in float64 (to
within F64_ATOL) with unequal client sizes; the family never reduces to FedAvg; packed == sequential."""

from __future__ import annotations

import pytest
import torch

from fedbench.algorithms import ALGORITHMS, build_algorithm
from fedbench.algorithms.context import ClientUpdate, ServerState
from global_formula_fixtures import adaptive_rounds, assert_packed_equals_sequential, packing_spec


@pytest.mark.usefixtures("float64")
def test_fedadagrad_server_step_by_hand():
    adaptive_rounds("fedadagrad", {"server_lr": 0.3, "beta1": 0.8, "tau": 0.02}, lambda v, d: v + d * d)


def test_the_defaults_are_the_papers():
    p = build_algorithm("fedadam", {}).params
    assert (p.beta1, p.beta2, p.tau, p.server_lr) == (0.9, 0.99, 1e-3, 0.01)
    assert not hasattr(build_algorithm("fedadagrad", {}).params, "beta2")  # Adagrad's v has no decay


@pytest.mark.parametrize("name", ["fedadagrad", "fedadam", "fedyogi"])
def test_the_adaptive_family_declares_no_fedavg_setting_and_never_returns_the_average(name):
    """The step divides by √v + τ element-wise, so no single η, β1, τ gives w̄ for every coordinate at once: none is
    declared, and with β1 = 0, η = 1 (the closest) one round lands away from the average."""
    assert ALGORITHMS.info(name).get("fedavg_setting") is None
    algorithm = build_algorithm(name, {"beta1": 0.0, "server_lr": 1.0})
    torch.manual_seed(6)
    server = ServerState(torch.randn(50, dtype=torch.float64), {})
    algorithm.init_server(server)
    updates = [
        ClientUpdate(k, server.params + 0.1 * torch.randn(50, dtype=torch.float64), {}, 10, 3, 0.0) for k in range(2)
    ]
    averaged = (updates[0].params + updates[1].params) / 2
    algorithm.aggregate(server, updates, 1)
    assert not torch.allclose(server.params, averaged, rtol=0, atol=1e-3)


@pytest.mark.usefixtures("float64")
def test_fedadagrad_packed_equals_sequential(tmp_path):
    assert_packed_equals_sequential(packing_spec("fedadagrad", {"server_lr": 0.05}), tmp_path)
