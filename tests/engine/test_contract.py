"""The engine contract's checks on one method (``fedbench.engine.contract``): they pass for methods that keep the
contract (FedAvg, FedProx with its packed step and FedAvg setting, SCAFFOLD with client state, FedRep and Ditto
with personal models) and fail, naming the property, what differed and how to fix it, for methods written wrong on
purpose: evaluation that changes a client's state, randomness from a global generator, state the checkpoint does
not hold, a packed step that is not the method's, a FedAvg setting that is not FedAvg, a division by an empty
client's sample count. Every built-in passes them (tests/engine/test_engine_contract.py)."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fedbench.algorithms import ALGORITHMS
from fedbench.algorithms.base import weighted_average
from fedbench.algorithms.fedavg import FedAvg
from fedbench.algorithms.fedprox import FedProx
from fedbench.algorithms.functional import proximal
from fedbench.engine.contract import (
    PROPERTIES,
    SETUP,
    PropertyResult,
    _difference,
    _empty_first_client,
    _not_finite,
    _state_difference,
    check_method,
    contract_spec,
    fedavg_setting_spec,
)
from fedbench.errors import ConfigError


def register(monkeypatch, name: str, cls: type, **info) -> str:
    """A test-only method, registered for one test (as a plug-in registers, with its info)."""
    monkeypatch.setitem(ALGORITHMS._entries, name, cls)
    monkeypatch.setitem(ALGORITHMS._info, name, {"papers": ("tests",), "params": cls.Params, **info})
    return name


def check(name: str, *properties: str, **setup) -> dict[str, object]:
    results = check_method(contract_spec(name, **setup), properties or None)
    assert [r.name for r in results] == list(properties or PROPERTIES)
    return {r.name: r for r in results}


# ------------------------------------------------------------------------ methods that keep the contract
@pytest.mark.parametrize(
    ("name", "packed", "fedavg_setting"),
    [
        ("fedavg", "pass", "skip"),
        ("fedprox", "pass", "pass"),  # packed, and FedAvg at μ = 0
        ("scaffold", "pass", "skip"),  # client state (c_i) through order, resume and the packed step
        ("fedrep", "skip", "skip"),  # personal models, two phases
        ("ditto", "skip", "pass"),  # personal models beside a FedAvg global model
    ],
)
def test_methods_that_keep_the_contract_pass_it(name, packed, fedavg_setting):
    results = check(name)
    assert {n: r.status for n, r in results.items()} == {
        "evaluation": "pass",
        "keyed-streams": "pass",
        "resume": "pass",
        "packed": packed,
        "fedavg-setting": fedavg_setting,
        "empty-client": "pass",
        "diagnostics": "pass",
    }, {n: r.detail for n, r in results.items()}
    assert "bit for bit" in results["resume"].detail
    assert results["keyed-streams"].detail == (
        "each round's clients trained last to first, after the process's global random generators were seeded "
        "otherwise: the same curve, global weights and client states, bit for bit"
    )
    assert results["empty-client"].detail == (
        "with client 0 holding no training sample: the run finished, its losses, weights and states finite"
    )
    if fedavg_setting == "pass":  # how close, said last: bit for bit, or the largest gap in float64
        assert re.fullmatch(
            r"in its declared setting \(.+\) it trains as FedAvg, in float64 "
            r"(bit for bit|to within \S+ \(F64_ATOL = \S+\))",
            results["fedavg-setting"].detail,
        ), results["fedavg-setting"].detail
    if packed == "skip":
        assert (
            results["packed"].detail == f"trains sequentially only: method {name} does not declare a packed local step"
        )


def test_a_method_that_declares_no_fedavg_setting_skips_that_check_saying_how_to_declare_one():
    detail = check("scaffold", "fedavg-setting")["fedavg-setting"].detail
    assert detail == "scaffold declares no setting in which it is FedAvg (fedavg_setting, docs/plugins.md)"


# ------------------------------------------------------------------------ methods that break it
class EvaluationCounter(FedAvg):
    """Counts each client's evaluations on the method object and writes the count into the client's state when it
    trains: the evaluation schedule changes the client state (the engine hands evaluation a copy of ctx.state, so a
    method can only break the promise through state of its own)."""

    def __init__(self, params):
        super().__init__(params)
        self.evaluations: dict[int, int] = {}

    def eval_model(self, ctx):
        self.evaluations[ctx.client_id] = self.evaluations.get(ctx.client_id, 0) + 1
        return ctx.model

    def end_local(self, ctx, update):
        ctx.state["evaluations"] = torch.tensor(self.evaluations.get(ctx.client_id, 0))


def test_evaluation_that_changes_a_client_state_fails_the_evaluation_property(monkeypatch):
    result = check(register(monkeypatch, "evaluation_counter", EvaluationCounter), "evaluation")["evaluation"]
    assert result.status == "fail"
    assert result.detail.startswith("evaluating every round changed training: client ")
    assert re.search(r"client \d's ctx.state\['evaluations'\] is [12] in one run and 0 in the other", result.detail)
    assert "must not change anything training reads next: attributes of the method object (self)" in result.detail


class NoisyAggregate(FedAvg):
    """Central-DP-style noise on the aggregate, drawn from torch's global generator: its state there is what the last
    client trained left, so it depends on the order the clients trained in."""

    def aggregate(self, server, updates, round_index):
        super().aggregate(server, updates, round_index)
        server.params = server.params + 1e-3 * torch.randn(server.params.shape)


def test_a_draw_from_torchs_global_generator_in_a_server_hook_fails_on_client_order(monkeypatch):
    results = check(register(monkeypatch, "noisy_aggregate", NoisyAggregate), "evaluation", "keyed-streams")
    assert results["evaluation"].status == "pass"  # evaluation's own streams leave training's alone
    detail = results["keyed-streams"].detail
    assert results["keyed-streams"].status == "fail"
    assert detail.startswith("training each round's clients in another order changed the results: round 1's ")
    assert "fedbench.seeding.torch_generator(spec.seed, 'a name', round_index)" in detail


class NumpyJitter(FedAvg):
    """Scales its loss by a draw from numpy's global generator: unseeded by the run, so another process (another
    worker, a resumed run) trains it otherwise."""

    def loss(self, ctx, x, y, logits):
        return super().loss(ctx, x, y, logits) * float(1 + 0.1 * np.random.rand())


def test_a_draw_from_numpys_global_generator_fails_as_depending_on_the_process(monkeypatch):
    result = check(register(monkeypatch, "numpy_jitter", NumpyJitter), "keyed-streams")["keyed-streams"]
    assert result.status == "fail"
    assert result.detail.startswith(
        "the same run gave other results after the process's global random generators were seeded otherwise"
    )
    assert "from numpy's or Python's global generator" in result.detail
    assert result.detail.endswith(  # how to fix it, said last
        "Draw from ctx.generator in client hooks, and from fedbench.seeding.torch_generator(spec.seed, 'a name', "
        "round_index) or numpy_rng(...) in server hooks"
    )


class RemembersOnItself(FedAvg):
    """A proximal pull towards the client's previous local model (as FedTrip's history), kept on the method object
    instead of ctx.state: the checkpoint does not hold it, so a resumed run has lost it."""

    def __init__(self, params):
        super().__init__(params)
        self.previous: dict[int, list[torch.Tensor]] = {}

    def begin_local(self, ctx):
        ctx.scratch["previous"] = self.previous.get(ctx.client_id)

    def loss(self, ctx, x, y, logits):
        loss = super().loss(ctx, x, y, logits)
        previous = ctx.scratch["previous"]
        if previous is None:
            return loss
        return loss + 0.5 * proximal(ctx.model.parameters(), [p.detach() for p in previous])

    def end_local(self, ctx, update):
        self.previous[ctx.client_id] = [p.detach().clone() for p in ctx.model.parameters()]


def test_state_the_checkpoint_does_not_hold_fails_resume(monkeypatch):
    results = check(register(monkeypatch, "remembers", RemembersOnItself), "evaluation", "keyed-streams", "resume")
    assert results["evaluation"].status == results["keyed-streams"].status == "pass"
    result = results["resume"]
    assert result.status == "fail"
    assert result.detail.startswith(
        "stopped after round 2 and resumed from its checkpoint, the run differs from the uninterrupted one: round 3's "
        "train_loss is "
    )
    assert "not on the method object (self), which a resumed run builds anew" in result.detail


class ProxWithoutPackedTerm(FedProx):
    """Declares a packed step whose objective leaves FedProx's proximal term out."""

    packed_step = True

    def packed_objective(self, call, params, inputs, x, y, mask):
        return FedAvg.packed_objective(self, call, params, inputs, x, y, mask)


def test_a_packed_step_that_is_not_the_methods_fails_packed(monkeypatch):
    name = register(monkeypatch, "prox_without_packed_term", ProxWithoutPackedTerm)
    result = check(name, "packed", algorithm_params={"mu": 0.5})["packed"]
    assert result.status == "fail"
    assert result.detail.startswith("the packed path differs from the sequential one beyond float64 rounding")
    assert "differs by up to" in result.detail or "Δ" in result.detail
    assert result.detail.endswith(  # what the packed hooks must compute, said last
        "on one client's flat parameter vector, what begin_local, loss and adjust_gradients do (padding masked out: "
        "functional.masked_mean); if they cannot, do not declare packed_step"
    )


class DecayingProx(FedProx):
    """FedProx plus a weight decay of its own that μ = 0 leaves in place: μ = 0 is not FedAvg."""

    def loss(self, ctx, x, y, logits):
        decay = sum((p**2).sum() for p in ctx.model.parameters())
        return super().loss(ctx, x, y, logits) + 1e-3 * decay


def test_a_declared_fedavg_setting_that_is_not_fedavg_fails(monkeypatch):
    name = register(monkeypatch, "decaying_prox", DecayingProx, fedavg_setting={"algorithm_params": {"mu": 0.0}})
    result = check(name, "fedavg-setting")["fedavg-setting"]
    assert result.status == "fail"
    assert result.detail.startswith(
        "in its declared FedAvg setting (mu=0.0) it does not train as FedAvg (float64, F64_ATOL = 1e-09): round 1's "
        "train_loss is "
    )
    assert "correct fedavg_setting where it registers" in result.detail


def test_a_fedavg_setting_that_is_not_a_valid_setting_fails_saying_so(monkeypatch):
    name = register(monkeypatch, "bad_setting", FedProx, fedavg_setting={"algorithm_params": {"mu": -1.0}})
    result = check(name, "fedavg-setting")["fedavg-setting"]
    assert result.status == "fail" and "is not a valid setting: algorithm 'bad_setting': algorithm_params.mu" in (
        result.detail
    )


class StepNormalised(FedAvg):
    """Averages the per-step moves (w − w_k)/τ_k, as FedNova does, without FedNova's guard for τ_k = 0."""

    def aggregate(self, server, updates, round_index):
        moves = [(server.params - u.params) / u.num_steps for u in updates]
        steps = sum(u.num_steps for u in updates) / len(updates)
        server.params = server.params - steps * weighted_average(moves, self.aggregation_weights(updates))


def test_a_division_by_an_empty_clients_step_count_fails_the_empty_client_property(monkeypatch):
    results = check(register(monkeypatch, "step_normalised", StepNormalised), "evaluation", "empty-client")
    assert results["evaluation"].status == "pass"
    result = results["empty-client"]
    assert result.status == "fail"
    assert result.detail.startswith(
        "with client 0 holding no training sample (every client training every round), the run diverged at round 1: "
        "aggregated global weights contain NaN/inf"
    )


class Crashes(FedAvg):
    def end_local(self, ctx, update):
        raise RuntimeError("a bug in the method")


def test_an_exception_in_the_method_fails_each_property_naming_where_it_was_raised(monkeypatch):
    results = check(register(monkeypatch, "crashes", Crashes), "evaluation", "resume")
    for result in results.values():
        assert result.status == "fail"
        assert result.detail.startswith("training raised RuntimeError: a bug in the method (at ")
        assert "test_contract.py" in result.detail and "in end_local)" in result.detail


# ------------------------------------------------------------------------ the setting and the comparisons
def test_the_check_setting_merges_changes_into_the_small_default():
    spec = contract_spec("fedprox", {"mu": 0.1}, optimizer={"momentum": 0.0}, num_clients=6)
    assert (spec.algorithm, spec.algorithm_params) == ("fedprox", {"mu": 0.1})
    assert spec.optimizer.lr == SETUP["optimizer"]["lr"] and spec.optimizer.momentum == 0.0
    assert (spec.num_clients, spec.clients_per_round, spec.rounds, spec.dataset) == (6, 5, 3, "digits")
    assert contract_spec("fedavg", model="digits_cnn").model_params == {}  # digits_mlp's hidden size left behind
    nova = fedavg_setting_spec(contract_spec("fednova"), ALGORITHMS.info("fednova")["fedavg_setting"])
    assert nova.local_steps == 2 and nova.optimizer.momentum == SETUP["optimizer"]["momentum"]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        ({"rounds": 0}, "check setting: rounds: Input should be greater than or equal to 1"),
        ({"algorithm_params": {"mu": "much"}}, "algorithm 'fedprox': algorithm_params.mu: Input should be a valid"),
    ],
)
def test_a_bad_setting_is_one_config_error(setup, message):
    params = setup.pop("algorithm_params", None)
    with pytest.raises(ConfigError, match=f"^{message}"):
        contract_spec("fedprox", params, **setup)


def test_an_unknown_property_is_a_config_error_naming_the_properties():
    with pytest.raises(ConfigError, match="^unknown property 'speed'; expected one of evaluation, keyed-streams"):
        check_method(contract_spec("fedavg"), ["speed"])


def test_a_model_the_method_cannot_take_is_the_callers_error():
    with pytest.raises(ConfigError, match="dot_regression needs a fixed etf classifier"):
        check_method(contract_spec("dot_regression"), ["evaluation"])


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


# ------------------------------------------------------------------------ diagnostics
class MeddlingDiagnostics(FedAvg):
    """Reports a mixing weight, and nudges the global weights while it reads them: recording changes training."""

    reported_diagnostics = frozenset({"mixing_weights"})

    def round_diagnostics(self, names, server, contexts):
        server.params = server.params * 0.5
        return {"mixing_weights": {"clients": [], "weight": [], "symbol": "m"}}


class ForgetfulDiagnostics(FedAvg):
    """Declares a diagnostic it never returns."""

    reported_diagnostics = frozenset({"mixing_weights"})


def test_diagnostics_that_change_training_fail_the_diagnostics_property(monkeypatch):
    result = check(register(monkeypatch, "meddling", MeddlingDiagnostics), "diagnostics")["diagnostics"]
    assert result.status == "fail"
    assert result.detail.startswith(
        "recording diagnostics (weight_divergence, val_loss, personal_divergence, mixing_weights, feature_snapshot, "
        "feature_stats, activations) changed"
    )
    assert "round_diagnostics only reads" in result.detail


def test_a_declared_diagnostic_that_is_never_returned_fails(monkeypatch):
    result = check(register(monkeypatch, "forgetful", ForgetfulDiagnostics), "diagnostics")["diagnostics"]
    assert result.status == "fail"
    assert result.detail.startswith(
        "round 1 recorded diagnostics [\x27activations\x27, \x27feature_snapshot\x27, \x27feature_stats\x27, \x27personal_divergence\x27, "
        "\x27val_loss\x27, \x27weight_divergence\x27], not ["
    )


def test_the_diagnostics_property_names_what_it_recorded():
    result = check("fedavg", "diagnostics")["diagnostics"]
    assert result.status == "pass"
    assert result.detail.startswith(
        "recording weight_divergence, val_loss, personal_divergence, feature_snapshot, feature_stats, activations "
        "every round: the curve"
    )


def test_a_method_diagnostic_the_method_does_not_report_fails_before_round_1():
    with pytest.raises(ConfigError, match="diagnostic 'mixing_weights' is reported by the method, and fedavg does not"):
        check_method(contract_spec("fedavg", diagnostics=["mixing_weights"]), ["evaluation"])


def test_a_result_has_failed_only_when_its_property_fails():
    from fedbench.engine.contract import PropertyResult

    assert [PropertyResult("resume", "t", status, "", 0.0).failed for status in ("pass", "skip", "fail")] == [
        False,
        False,
        True,
    ]


def test_the_properties_are_those_check_method_lists_in_its_help_and_the_readme():
    """One line each in `fedbench check-method`'s report: the titles are that report's (README's table, the
    command's help)."""
    assert {name: p.title for name, p in PROPERTIES.items()} == {
        "evaluation": "evaluation leaves training unchanged",
        "keyed-streams": "results independent of client order and of the process",
        "resume": "kill and resume gives the same curve",
        "packed": "packed == sequential",
        "fedavg-setting": "its declared FedAvg setting is FedAvg",
        "empty-client": "a client with no training sample",
        "diagnostics": "diagnostics leave training unchanged",
    }


def test_a_result_reads_as_one_json_object():
    """``check-method --json`` writes each result as this object: the property, its title, status, detail and the
    seconds it took (to the millisecond)."""
    assert PropertyResult("resume", "t", "pass", "d", 1.23456).as_dict() == {
        "property": "resume",
        "title": "t",
        "status": "pass",
        "detail": "d",
        "seconds": 1.235,
    }


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


def test_the_empty_client_setting_empties_client_0_only():
    from fedbench.engine import EngineOptions
    from fedbench.engine.loop import set_up

    training = set_up(contract_spec("fedavg"), EngineOptions())
    data = training.state.data
    assert not data.client_test_from_test and data.client_val  # client 0 has test and validation splits to empty
    before = [(len(data.client_train[c]), len(data.client_test[c]), len(data.client_val[c])) for c in range(4)]
    _empty_first_client(training)
    after = [(len(data.client_train[c]), len(data.client_test[c]), len(data.client_val[c])) for c in range(4)]
    assert after[0] == (0, 0, 0) and after[1:] == before[1:] and all(before[0])


def test_resume_is_checked_from_two_rounds_on():
    assert check("fedavg", "resume", rounds=2)["resume"].status == "pass"
    assert check("fedavg", "resume", rounds=1)["resume"].status == "skip"


class CountingDiagnostics(FedAvg):
    """Reports how many rounds this object has diagnosed: a count the checkpoint does not hold."""

    reported_diagnostics = frozenset({"mixing_weights"})

    def round_diagnostics(self, names, server, contexts):
        self.calls = getattr(self, "calls", 0) + 1
        return {"mixing_weights": {"clients": [0], "weight": [float(self.calls)], "symbol": "m"}}


def test_a_diagnostic_the_checkpoint_cannot_restore_fails_after_a_stop_and_resume(monkeypatch):
    result = check(register(monkeypatch, "counting", CountingDiagnostics), "diagnostics")["diagnostics"]
    assert result.status == "fail"
    assert result.detail.startswith(
        "stopped after round 2 and resumed, the run records other diagnostics: round 3's diagnostics['mixing_weights']"
    ), result.detail
    assert result.detail.endswith("A diagnostic must be computed from what the checkpoint restores")
