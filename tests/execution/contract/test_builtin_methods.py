"""Every built-in method keeps the engine contract that ``fedbench check-method`` checks
(``fedbench.execution.contract``), and a method's declared FedAvg setting is the one case in which it is FedAvg."""

from __future__ import annotations

import pytest
import torch

from algorithm_fixtures import SETTINGS, head_mlp  # noqa: F401  (head_mlp: a fixture)
from fedbench.algorithms import ALGORITHMS
from fedbench.execution.contract import Checker, check_method, contract_spec


@pytest.mark.usefixtures("head_mlp")
@pytest.mark.parametrize("algorithm", ALGORITHMS.names())
def test_every_method_keeps_the_engine_contract(algorithm):
    """``fedbench check-method`` passes for every built-in (``fedbench.execution.contract``; 3 of 4 clients per round,
    3 rounds): evaluating every client's personal model and the global one every round or only after the last gives
    the same training, bit for bit (losses, last-round figures, global weights, every client's state); the clients of
    a round trained in the other order, in a process whose global generators were seeded otherwise, give the same
    run; stopped after round 2 and resumed, the run is the uninterrupted one; with client 0 holding no training
    sample and every client training every round, the run finishes with finite losses, weights and states (a method
    may skip such a client's contribution; it may not crash on it or divide by its zero count); recording every
    diagnostic it can have, every round, trains as without them, bit for bit, and a resumed run records the same
    diagnostics. A method that
    declares a packed step, or a setting in which it is FedAvg, has that checked too, never skipped."""
    results = {r.name: r for r in check_method(contract_spec(algorithm, **SETTINGS.get(algorithm, {})))}
    assert not [r for r in results.values() if r.failed], [r.detail for r in results.values() if r.failed]
    assert results["packed"].status == ("pass" if ALGORITHMS.get(algorithm).__dict__.get("packed_step") else "skip")
    declared = "fedavg_setting" in ALGORITHMS.info(algorithm)
    assert results["fedavg-setting"].status == ("pass" if declared else "skip")
    assert results["diagnostics"].status == "pass"  # recording diagnostics trains the same, bit for bit


DECLARED = [name for name in ALGORITHMS.names() if ALGORITHMS.info(name).get("fedavg_setting")]


@pytest.mark.parametrize("algorithm", DECLARED)
def test_a_declared_fedavg_setting_singles_out_the_degenerate_case(tmp_path, algorithm):
    """At its default parameters (outside its declared FedAvg setting: FedProx μ > 0, FedNova's unequal step counts)
    a method does not train as FedAvg: the declaration names the case where it reduces to FedAvg, and the check of
    that case compares two runs that differ elsewhere."""
    setting = SETTINGS.get(algorithm, {})
    checker = Checker(contract_spec(algorithm, **setting), tmp_path)
    method = checker.train(contract_spec(algorithm, **setting))
    fedavg = checker.train(contract_spec("fedavg", **setting))
    assert not torch.equal(method.server.params, fedavg.server.params)
