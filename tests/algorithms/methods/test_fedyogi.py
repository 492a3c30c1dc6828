"""FedYogi (Reddi et al., ICLR 2021, Alg. 2): Yogi's second moment v ← v − (1 − β2) Δ² sign(v − Δ²), by hand in
float64 (to within F64_ATOL), both signs met; packed == sequential."""

from __future__ import annotations

import pytest
import torch

from fedbench.algorithms import build_algorithm
from global_formula_fixtures import adaptive_rounds, assert_packed_equals_sequential, packing_spec


def yogi(v: float, d: float) -> float:
    return v - 0.3 * d * d if v > d * d else v + 0.3 * d * d  # sign(v − Δ²) written as a branch


@pytest.mark.usefixtures("float64")
def test_fedyogi_server_step_by_hand():
    # τ = 0.1: v starts at 0.01, near the Δ² of 0.1·N(0, 1) changes, so both branches are taken
    met = adaptive_rounds("fedyogi", {"server_lr": 0.3, "beta1": 0.8, "beta2": 0.7, "tau": 0.1}, yogi, rounds=4)
    assert any(v > d * d for v, d in met) and any(v < d * d for v, d in met)


def test_yogi_leaves_v_where_it_equals_the_squared_change():
    # sign(0) = 0: a coordinate with v = Δ² keeps v exactly; the others move by (1 − β2)·Δ² = 0.25 (exact in binary)
    yogi_step = build_algorithm("fedyogi", {"beta2": 0.75}).second_moment
    v, delta = torch.tensor([1.0, 0.5, 2.0]), torch.tensor([1.0, 1.0, 1.0])
    assert yogi_step(v, delta).tolist() == [1.0, 0.75, 1.75]


@pytest.mark.usefixtures("float64")
def test_fedyogi_packed_equals_sequential(tmp_path):
    assert_packed_equals_sequential(packing_spec("fedyogi", {"server_lr": 0.05}), tmp_path)
