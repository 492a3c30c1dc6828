"""FedExP's server step (Jhunjhunwala et al., ICLR 2023, Alg. 1 / Eq. 9) against hand computations.

Two clients with fixed three-dimensional updates Δ_i = w_i − w^t and sample weights p = (3/4, 1/4), the arithmetic
done on paper in the comments: the original rule η_g = max{1, Σ_i p_i‖Δ_i‖² / (2(‖Δ̄‖² + ε))} and FedDr+'s [code]
variant η_g = min{1, 0.5·mean_i‖Δ_i‖ / (‖Δ̄‖ + N·ε)}, each in a setting where it extrapolates (or is clipped) and
one where it does not, then w^{t+1} = w^t + η_g·Δ̄ and the buffers averaged with the same weights.
"""

from __future__ import annotations

import math

import pytest
import torch

from algorithm_fixtures import (
    make_spec,
)
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm, validate_algorithm_params
from fedbench.algorithms.context import ClientUpdate, ServerState
from fedbench.errors import ConfigError

W = [1.0, -2.0, 0.5]  # w^t


DISAGREEING = ([0.4, 0.1, -0.2], [-0.6, 0.3, 0.2])  # Δ_1, Δ_2


AGREEING = ([0.4, 0.1, -0.2], [0.2, 0.3, -0.1])


def aggregate(params: dict, deltas, num_clients: int = 10) -> ServerState:
    """Two clients of 30 and 10 samples (p = 3/4, 1/4) with updates ``deltas``, aggregated by fedexp; each client
    also uploads a float buffer (averaged with p) and an integer one (taken from the first client)."""
    algorithm = build_algorithm("fedexp", params)
    algorithm.spec = make_spec("fedexp", params, num_clients=num_clients, clients_per_round=2)
    w = torch.tensor(W)
    server = ServerState(w.clone(), {"bn.running_mean": torch.zeros(2), "bn.num_batches_tracked": torch.tensor(0)})
    algorithm.init_server(server)
    assert float(server.state["server_lr"]) == 1.0  # before any round: no extrapolation yet
    updates = [
        ClientUpdate(
            k,
            w + torch.tensor(delta),
            {"bn.running_mean": torch.tensor(buffer), "bn.num_batches_tracked": torch.tensor(steps)},
            n,
            steps,
            0.0,
        )
        for k, (delta, n, buffer, steps) in enumerate(zip(deltas, (30, 10), ([1.0, 2.0], [5.0, -2.0]), (7, 3)))
    ]
    algorithm.aggregate(server, updates, 1)
    return server


def assert_step(server: ServerState, eta: float, mean_delta: list[float]) -> None:
    assert float(server.state["server_lr"]) == pytest.approx(eta, rel=0, abs=F64_ATOL)
    expected = torch.tensor([w + eta * d for w, d in zip(W, mean_delta)])
    assert torch.allclose(server.params, expected, rtol=0, atol=F64_ATOL)
    # buffers: ¾·(1, 2) + ¼·(5, −2) = (2, 1); the step count is the first client's
    assert torch.allclose(server.buffers["bn.running_mean"], torch.tensor([2.0, 1.0]), rtol=0, atol=F64_ATOL)
    assert int(server.buffers["bn.num_batches_tracked"]) == 7


@pytest.mark.usefixtures("float64")
def test_original_rule_extrapolates_when_the_clients_disagree():
    """Δ̄ = ¾(0.4, 0.1, −0.2) + ¼(−0.6, 0.3, 0.2) = (0.15, 0.15, −0.1), ‖Δ̄‖² = 0.055; ‖Δ_1‖² = 0.21, ‖Δ_2‖² = 0.49,
    Σ p_i‖Δ_i‖² = 0.1575 + 0.1225 = 0.28; with ε = 0.001: η_g = 0.28 / (2·0.056) = 2.5."""
    server = aggregate({"epsilon": 0.001}, DISAGREEING)
    assert_step(server, 2.5, [0.15, 0.15, -0.1])


@pytest.mark.usefixtures("float64")
def test_original_rule_epsilon_enters_the_denominator():
    """The same updates with ε = 0.045: η_g = 0.28 / (2·(0.055 + 0.045)) = 1.4."""
    server = aggregate({"epsilon": 0.045}, DISAGREEING)
    assert_step(server, 1.4, [0.15, 0.15, -0.1])


@pytest.mark.usefixtures("float64")
def test_original_rule_never_steps_below_one():
    """Δ̄ = ¾(0.4, 0.1, −0.2) + ¼(0.2, 0.3, −0.1) = (0.35, 0.15, −0.175), ‖Δ̄‖² = 0.175625; Σ p_i‖Δ_i‖² = ¾·0.21 + ¼·0.14
    = 0.1925; 0.1925 / (2·0.176625) ≈ 0.545 < 1, so η_g = 1 (FedAvg's step)."""
    server = aggregate({}, AGREEING)  # the default ε = 0.001
    assert_step(server, 1.0, [0.35, 0.15, -0.175])


@pytest.mark.usefixtures("float64")
def test_feddrplus_code_variant_scales_by_the_unsquared_norm_ratio():
    """[code]: η_g = min{1, 0.5·mean_i‖Δ_i‖ / (‖Δ̄‖ + N·ε)} with N = 10 clients, ε = 0.01 and the agreeing updates:
    mean_i‖Δ_i‖ = (√0.21 + √0.14)/2 (unweighted), ‖Δ̄‖ = √0.175625; η_g ≈ 0.4009 < 1: the step shrinks."""
    server = aggregate({"variant": "feddrplus_code", "epsilon": 0.01}, AGREEING)
    eta = 0.5 * (math.sqrt(0.21) + math.sqrt(0.14)) / 2 / (math.sqrt(0.175625) + 10 * 0.01)
    assert 0.40 < eta < 0.41
    assert_step(server, eta, [0.35, 0.15, -0.175])


@pytest.mark.usefixtures("float64")
def test_feddrplus_code_variant_never_steps_above_one():
    """The disagreeing updates: 0.5·(√0.21 + 0.7)/2 / (√0.055 + 10·0.001) ≈ 1.18, clipped to η_g = 1."""
    assert 0.5 * (math.sqrt(0.21) + 0.7) / 2 / (math.sqrt(0.055) + 0.01) > 1.1
    server = aggregate({"variant": "feddrplus_code"}, DISAGREEING)
    assert_step(server, 1.0, [0.15, 0.15, -0.1])


@pytest.mark.usefixtures("float64")
def test_defaults_and_bounds():
    """ε = 0.001 (FedDr+ spec), the original rule by default; ε ≥ 0; the variant is one of the two rules."""
    params = build_algorithm("fedexp", {}).params
    assert (params.epsilon, params.variant) == (0.001, "original")
    for variant in ("original", "feddrplus_code"):
        assert validate_algorithm_params("fedexp", {"epsilon": 0.0, "variant": variant}).variant == variant
    with pytest.raises(ConfigError, match="epsilon"):
        validate_algorithm_params("fedexp", {"epsilon": -1e-9})


# ------------------------------------------------------------------------------------------- FedExP
@pytest.mark.usefixtures("linear_model")
@pytest.mark.usefixtures("float64")
def test_fedexp_server_step_is_at_least_one_in_the_original_rule():
    torch.manual_seed(5)
    algorithm = build_algorithm("fedexp", {"epsilon": 1e-3})
    code_variant = build_algorithm("fedexp", {"variant": "feddrplus_code"})
    code_variant.spec = make_spec("fedexp", num_clients=10, clients_per_round=5)
    for trial in range(40):
        clients = 2 + trial % 4
        w = torch.randn(30)
        spread = [0.0, 0.01, 1.0, 10.0][trial % 4]  # identical updates … nearly orthogonal ones
        common = torch.randn(30)
        updates = [
            ClientUpdate(k, w + common + spread * torch.randn(30), {}, int(torch.randint(5, 50, ())), 2, 0.0)
            for k in range(clients)
        ]
        server = ServerState(w.clone(), {})
        algorithm.aggregate(server, updates, 1)
        p = torch.tensor([u.num_samples for u in updates], dtype=torch.float64)
        p = p / p.sum()
        deltas = [u.params - w for u in updates]
        mean_delta = sum(p[k] * deltas[k] for k in range(clients))
        ratio = sum(p[k] * deltas[k].norm() ** 2 for k in range(clients)) / (2 * (mean_delta.norm() ** 2 + 1e-3))
        eta = float(server.state["server_lr"])
        assert eta >= 1.0 and eta == pytest.approx(max(1.0, float(ratio)), rel=0, abs=F64_ATOL)
        assert torch.allclose(server.params, w + eta * mean_delta, rtol=0, atol=F64_ATOL)
        if spread == 0.0:
            assert eta == 1.0  # identical updates: ratio ½, no extrapolation
        if spread == 10.0:
            assert eta > 1.5  # disagreeing clients: extrapolate
        code_server = ServerState(w.clone(), {})
        code_variant.aggregate(code_server, updates, 1)
        assert float(code_server.state["server_lr"]) <= 1.0
