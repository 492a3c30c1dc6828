"""FedAdam (Reddi et al., ICLR 2021, Alg. 2): Adam's second moment v ← β2 v + (1 − β2) Δ², by hand in float64 (to
within F64_ATOL); packed == sequential. (It never reduces to FedAvg: tests/algorithms/methods/test_fedadagrad.py.)"""

from __future__ import annotations

import pytest

from global_formula_fixtures import adaptive_rounds, assert_packed_equals_sequential, packing_spec


@pytest.mark.usefixtures("float64")
def test_fedadam_server_step_by_hand():
    params = {"server_lr": 0.3, "beta1": 0.8, "beta2": 0.7, "tau": 0.02}
    adaptive_rounds("fedadam", params, lambda v, d: 0.7 * v + 0.3 * d * d)


@pytest.mark.usefixtures("float64")
def test_fedadam_packed_equals_sequential(tmp_path):
    assert_packed_equals_sequential(
        packing_spec("fedadam", {"server_lr": 0.05}, optimizer={"lr": 0.05, "momentum": 0.9}), tmp_path
    )
