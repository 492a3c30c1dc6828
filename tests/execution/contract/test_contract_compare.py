"""Where two of the contract's runs differ (``fedbench.execution.contract.compare``): nested values, tensors through
``torch.testing.assert_close`` (bit for bit unless given a tolerance), curves and states, and the first round two runs
differ in, measured in ulps (rounding or not)."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import pytest
import torch

from fedbench.algorithms import ALGORITHMS
from fedbench.algorithms.context import ServerState
from fedbench.engine.loop import RoundRecord
from fedbench.execution.contract.check import check_method
from fedbench.execution.contract.compare import (
    ROUNDING_ULPS,
    _curve_difference,
    _difference,
    _first_inexact,
    _Inexact,
    _not_finite,
    _state_difference,
    _ulps,
    _unfinished,
)
from fedbench.execution.contract.properties import (
    PROPERTIES,
)
from fedbench.execution.contract.runs import _Run
from fedbench.execution.contract.setting import contract_spec


def register(monkeypatch, name: str, cls: type, **info) -> str:
    """A test-only method, registered for one test (as a plug-in registers, with its info)."""
    monkeypatch.setitem(ALGORITHMS._entries, name, cls)
    monkeypatch.setitem(ALGORITHMS._info, name, {"papers": ("tests",), "params": cls.Params, **info})
    return name


def check(name: str, *properties: str, **setup) -> dict[str, object]:
    results = check_method(contract_spec(name, **setup), properties or None)
    assert [r.name for r in results] == list(properties or PROPERTIES)
    return {r.name: r for r in results}


def test_differences_are_named_where_they_first_occur():
    a = {"control": torch.tensor([1.0, 2.0, 3.0]), "count": torch.tensor([1, 2]), "seen": torch.tensor(2)}
    assert _difference(a, {**a}, "state") is None
    moved = {**a, "control": torch.tensor([1.0, 2.5, 3.25])}
    assert _difference(a, moved, "state") == "state['control'] differs by up to 0.5 (max |Δ|, over 2 of 3 entries)"
    assert _difference(a, moved, "state", atol=0.6) is None
    assert _difference(a, {**a, "count": torch.tensor([1, 3])}, "state") == "state['count']: 1 of 2 entries differ"
    assert _difference(a, {**a, "seen": torch.tensor(4)}, "state") == "state['seen'] is 2 in one run and 4 in the other"
    assert _difference(a, {"control": a["control"]}, "state").startswith("state has keys ['control', 'count', 'seen']")
    assert _difference([0.5, 0.25], [0.5, 0.125], "losses") == (
        "losses[1] is 0.25 in one run and 0.125 in the other (Δ 0.125)"
    )
    nan = torch.tensor([float("nan"), 1.0])
    assert _difference(nan, nan.clone(), "w") is None  # NaN where both have NaN
    assert _difference(torch.tensor(float("nan")), torch.tensor(float("nan")), "w") is None
    assert _difference(nan, torch.tensor([0.0, 1.0]), "w") == "w differs by up to inf (max |Δ|, over 1 of 2 entries)"


def test_differences_between_unlike_values_are_named_not_crashes():
    x = torch.tensor([1.0, 2.0])
    assert _difference(x, None, "w") == "w is a tensor in one run and NoneType in the other"
    assert _difference(None, x, "w") == "w is a tensor in one run and NoneType in the other"
    assert (
        _difference(x, torch.zeros(3), "w") == "w is (2,) torch.float32 in one run and (3,) torch.float32 in the other"
    )
    assert _difference(x, x.double(), "w") == "w is (2,) torch.float32 in one run and (2,) torch.float64 in the other"
    assert _difference([1.0], None, "losses") == "losses is [1.0] in one run and None in the other"
    assert _difference([1.0, 2.0], [1.0], "losses") == "losses has 2 entries in one run and 1 in the other"
    assert _difference(0.5, None, "loss") == "loss is 0.5 in one run and None in the other"


def test_differences_of_numbers_and_one_entry_tensors_say_by_how_much():
    assert (
        _difference(torch.tensor(1.5), torch.tensor(1.25), "w") == "w is 1.5 in one run and 1.25 in the other (Δ 0.25)"
    )
    assert _difference(torch.tensor([1, 2, 3]), torch.tensor([1, 5, 6]), "n") == "n: 2 of 3 entries differ"
    nan, inf = float("nan"), float("inf")
    assert _difference(nan, nan, "loss") is None and _difference(inf, inf, "loss") is None
    assert _difference(nan, 1.0, "loss") == "loss is nan in one run and 1.0 in the other (Δ nan)"
    assert _difference(0.5, 0.75, "loss", atol=0.25) is None  # to within atol, as for tensors
    assert _difference(0.5, 0.75, "loss", atol=0.125) == "loss is 0.5 in one run and 0.75 in the other (Δ 0.25)"


EPS = 2.0**-23  # float32's eps


@pytest.mark.parametrize(
    ("value", "reference", "before", "ulps"),
    [
        ([2.0, 1.0 + 4 * EPS], [2.0, 1.0], [4.0, -1.0], 1.0),  # in ulps of 4, the largest entry at the round's start
        ([8.0 + 8 * 6 * EPS, 1.0], [8.0, 1.0], [4.0, -1.0], 6.0),  # or after it, in FedAvg's run: 8
        ([3, 1], [2, 1], [2, 1], math.inf),  # an integer tensor (a count): no rounding
        ([2.0, 1.0], [2.0], [2.0], math.inf),  # unlike shapes
        ([2.0, 1.5], [2.0, 1.0], [2.0, 1.0, 0.0], math.inf),  # a start of another shape: no size to measure by
        ([1e-30, 0.0], [0.0, 0.0], [0.0, 0.0], math.inf),  # 0 throughout: no rounding makes anything of it
        ([float("nan"), 1.0], [1.0, 1.0], [1.0, 1.0], math.inf),
        (1.0, 1.0 - 2 * EPS, None, 2.0),  # a figure of the curve: in ulps of the larger of the two
        (2.0, 1.0, None, 0.5 / EPS),
        (float("nan"), 1.0, None, math.inf),
        (0.0, -0.0, None, math.inf),  # two zeros: no size to measure by
        (1.0, None, None, math.inf),
        ({"a": 1.0}, {"a": 2.0}, None, math.inf),
    ],
)
def test_a_difference_is_measured_in_ulps_of_the_largest_magnitude_the_round_computed_on(
    value, reference, before, ulps
):
    def tensor(x):
        return torch.tensor(x, dtype=torch.float32 if isinstance(x[0], float) else torch.int64) if x else x

    if isinstance(value, list):
        value, reference, before = tensor(value), tensor(reference), tensor(before)
    assert _ulps(value, reference, before, EPS) == ulps


def test_a_difference_of_another_dtype_or_against_no_tensor_is_no_rounding():
    x = torch.tensor([1.0, 2.0])
    assert _ulps(x.double(), x, x, EPS) == math.inf
    assert _ulps(x, None, None, EPS) == _ulps(x, x + 1, None, EPS) == _ulps(None, x, x, EPS) == math.inf


def test_rounding_is_a_difference_within_rounding_ulps():
    assert ROUNDING_ULPS == 4.0
    assert [_Inexact(1, "", ulps).rounding for ulps in (0.5, 4.0, 4.0001, math.inf)] == [True, True, False, False]
    with pytest.raises(dataclasses.FrozenInstanceError):  # a finding, as found
        _Inexact(1, "", 0.5).ulps = 0.0


def history_run(params, buffers=None, losses=None, parameters=(("w", 0, 2), ("b", 2, 3))):
    """A finished run trained with ``history``: the global weights (and buffers) at w^0 and after each round, the
    losses of the rounds (0.5 each unless given)."""
    buffers = buffers or [{} for _ in params]
    history = [
        ServerState(params=torch.tensor(p, dtype=torch.float32), buffers={k: torch.tensor(v) for k, v in b.items()})
        for p, b in zip(params, buffers)
    ]
    losses = losses or [0.5] * (len(params) - 1)
    records = [
        RoundRecord(round=r, train_loss=loss, wall_seconds=0.0, bytes_up=0, bytes_down=0, test_acc=0.5, test_loss=1.0)
        for r, loss in enumerate(losses, 1)
    ]
    return _Run(None, records, history[-1], {}, history=history, parameters=list(parameters))


def test_two_runs_differ_first_at_the_first_round_and_tensor_that_differ_and_by_that_rounds_worst_ulps():
    start, one = [4.0, 1.0, 2.0], [2.0, 1.0, 8.0]
    fedavg = history_run([start, one, [1.0, 0.5, 1.0]])
    assert _first_inexact(fedavg, history_run([start, one, [1.0, 0.5, 1.0]])) is None
    # round 2 (round 1 equal): w by 1 ulp of 2, b by 3 ulps of 8 (the largest entries at the round's start)
    method = history_run([start, one, [1.0, 0.5 + 2 * EPS, 1.0 + 24 * EPS]])
    assert _first_inexact(method, fedavg) == _Inexact(
        2, "the global weights' w differs by up to 2.38e-07 (max |Δ|, over 1 of 2 entries)", 3.0
    )


def test_the_buffers_and_the_curve_are_compared_after_the_weights_each_round():
    weights = [[1.0, 1.0, 1.0]] * 2
    fedavg = history_run(weights, [{"bn.mean": [1.0], "bn.count": 1}] * 2)
    counted = history_run(weights, [{"bn.mean": [1.0], "bn.count": 1}, {"bn.mean": [1.0 + 2 * EPS], "bn.count": 2}])
    assert _first_inexact(counted, fedavg) == _Inexact(
        1, "the global buffers['bn.count'] is 2 in one run and 1 in the other", math.inf
    )
    moved = history_run(weights, [{"bn.mean": [1.0], "bn.count": 1}, {"bn.mean": [1.0 + 2 * EPS], "bn.count": 1}])
    assert _first_inexact(moved, fedavg) == _Inexact(
        1, "the global buffers['bn.mean'] is 1.000000238418579 in one run and 1.0 in the other (Δ 2.38e-07)", 2.0
    )
    other_keys = history_run(weights, [{"bn.mean": [1.0], "bn.count": 1}, {"bn.mean": [1.0]}])
    assert _first_inexact(other_keys, fedavg) == _Inexact(
        1, "the global buffers has keys ['bn.mean'] in one run and ['bn.count', 'bn.mean'] in the other", math.inf
    )
    reported = history_run(weights, losses=[0.5 + 2**-25])  # the weights FedAvg's, the loss a rounding off
    assert _first_inexact(reported, history_run(weights)) == _Inexact(
        1, "round 1's train_loss is 0.5000000298023224 in one run and 0.5 in the other (Δ 2.98e-08)", 0.5 / (1 + 2**-24)
    )


def test_curves_and_states_differ_bit_for_bit_unless_given_a_tolerance():
    def record(round_, loss):
        return RoundRecord(round=round_, train_loss=loss, wall_seconds=0.0, bytes_up=0, bytes_down=0)

    a, b = [record(1, 0.5), record(2, 0.25)], [record(1, 0.5), record(2, 0.375)]
    assert _curve_difference(a, b) == "round 2's train_loss is 0.25 in one run and 0.375 in the other (Δ 0.125)"
    assert _curve_difference(a, b, atol=0.125) is None
    assert _curve_difference(a, a[:1]) == "the rounds logged are [1, 2] in one run and [1] in the other"

    def run(params=(0.0, 0.0), buffers=(1.0,), state=(2.0,)):
        server = ServerState(
            params=torch.tensor(params), buffers={"b": torch.tensor(buffers)}, state={"s": torch.tensor(state)}
        )
        return _Run(result=None, records=[], server=server, client_states={})

    assert _state_difference(run(), run()) is None
    assert _state_difference(run(), run(params=(0.0, 0.5))) == (
        "the global weights differs by up to 0.5 (max |Δ|, over 1 of 2 entries)"
    )
    assert _state_difference(run(), run(params=(0.0, 0.5)), atol=0.5) is None
    assert _state_difference(run(), run(buffers=(1.5,))) == (
        "the global buffers['b'] is 1.0 in one run and 1.5 in the other (Δ 0.5)"
    )
    assert (
        _state_difference(run(), run(state=(2.5,)))
        == "server.state['s'] is 2.0 in one run and 2.5 in the other (Δ 0.5)"
    )
    assert _unfinished(run()) == "the run stopped before its last round"


def test_a_mapping_in_one_run_and_none_in_the_other_is_named_not_a_crash():
    assert _difference({"x": 1.0}, None, "state") == "state is {'x': 1.0} in one run and None in the other"


def test_a_client_state_that_only_one_run_holds_is_a_difference():
    def run(client_states):
        server = SimpleNamespace(params=torch.zeros(2), buffers={}, state={})
        return SimpleNamespace(server=server, client_states=client_states)

    both = {0: {"c": torch.ones(2)}}
    assert _state_difference(run(both), run({**both})) is None
    one_more = {**both, 2: {"c": torch.ones(2)}}
    assert (
        _state_difference(run(one_more), run(both))
        == "client 2's ctx.state has keys ['c'] in one run and [] in the other"
    )
    assert (
        _state_difference(run(both), run(one_more))
        == "client 2's ctx.state has keys [] in one run and ['c'] in the other"
    )


def test_a_value_that_is_not_finite_is_named_by_where_it_sits():
    assert _not_finite([1.0, float("nan")], "losses") == "losses[1] is nan"
    assert _not_finite({"a": [torch.tensor([1.0, float("inf")])]}, "state") == "state['a'][0] holds NaN or inf"
    assert _not_finite([1.0, {"b": 2.0}], "state") is None


def test_tensors_are_equal_bit_for_bit_with_nan_and_inf_where_both_hold_them_and_a_gap_counts_only_where_they_differ():
    a = torch.tensor([math.inf, math.nan, -0.0, 1.0])
    assert _difference(a, torch.tensor([math.inf, math.nan, 0.0, 1.0]), "w") is None  # -0.0 == 0.0
    moved = torch.tensor([math.inf, math.nan, 0.0, 1.5])
    assert _difference(a, moved, "w") == "w differs by up to 0.5 (max |Δ|, over 1 of 4 entries)"
    assert _difference(a, moved, "w", atol=0.5) is None
    assert _difference(a, torch.tensor([-math.inf, math.nan, 0.0, 1.0]), "w") == (
        "w differs by up to inf (max |Δ|, over 1 of 4 entries)"
    )
    assert _difference(a, torch.tensor([math.inf, 1.0, 0.0, 1.0]), "w", atol=1.0) == (
        "w differs by up to inf (max |Δ|, over 1 of 4 entries)"  # NaN in one run only: no tolerance covers it
    )
    assert _difference(torch.tensor([1, 2]), torch.tensor([1, 2]), "n", atol=5.0) is None
    assert (
        _difference(torch.tensor([True]), torch.tensor([False]), "b") == "b is True in one run and False in the other"
    )
