"""The engine contract's checks on one method (``fedbench.engine.contract``): they pass for methods that keep the
contract (FedAvg, FedProx with its packed step and FedAvg setting, SCAFFOLD with client state, FedRep and Ditto
with personal models) and fail, naming the property, what differed and how to fix it, for methods written wrong on
purpose: evaluation that changes a client's state, randomness from a global generator, state the checkpoint does
not hold, a packed step that is not the method's, a FedAvg setting that is not FedAvg, a division by an empty
client's sample count. Every built-in passes them (tests/engine/test_engine_contract.py)."""

from __future__ import annotations

import dataclasses
import math
import re
import time
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from pydantic import Field

from fedbench.algorithms import ALGORITHMS
from fedbench.algorithms.base import weighted_average
from fedbench.algorithms.context import ServerState
from fedbench.algorithms.fedavg import FedAvg
from fedbench.algorithms.fedprox import FedProx
from fedbench.algorithms.functional import proximal
from fedbench.algorithms.params import NoParams
from fedbench.engine.contract import (
    PROPERTIES,
    ROUNDING_ULPS,
    SETUP,
    Checker,
    PropertyResult,
    _Broken,
    _curve_difference,
    _difference,
    _empty_client,
    _empty_first_client,
    _fedavg_setting,
    _first_inexact,
    _Inexact,
    _not_finite,
    _Run,
    _Sink,
    _state_difference,
    _ulps,
    _unfinished,
    check_method,
    contract_spec,
    fedavg_setting_spec,
    setting_text,
)
from fedbench.engine.loop import RoundRecord, RunResult
from fedbench.errors import ConfigError
from fedbench.vocab.status import RunStatus


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
    assert results["evaluation"].detail == (
        "evaluated every round or after round 3 only: the same training losses, last-round figures, global weights "
        "and client states, bit for bit"
    )
    assert results["resume"].detail == (
        "stopped after round 2 and resumed from its checkpoint: the uninterrupted run's curve, global weights and "
        "client states, bit for bit"
    )
    assert results["keyed-streams"].detail == (
        "each round's clients trained last to first, after the process's global random generators were seeded "
        "otherwise: the same curve, global weights and client states, bit for bit"
    )
    assert results["empty-client"].detail == (
        "with client 0 holding no training sample: the run finished, its losses, weights and states finite"
    )
    if fedavg_setting == "pass":  # the declared setting in words, then what was compared: in float32, bit for bit
        setting = {"fedprox": "mu=0.0", "ditto": "as it is"}[name]
        assert results["fedavg-setting"].detail == (
            f"in its declared setting ({setting}) it trains as FedAvg bit for bit in float32 for 8 rounds: every "
            "parameter and buffer after every round, and the curve"
        )
    if packed == "skip":
        assert (
            results["packed"].detail == f"trains sequentially only: method {name} does not declare a packed local step"
        )
    else:
        assert results["packed"].detail == (
            "packed and sequential agree in float64 to within 1e-09: curve, global weights, client states"
        )
    if name == "fedavg":  # no setting to declare: it is FedAvg
        assert results["fedavg-setting"].detail == "FedAvg itself"
    assert results["diagnostics"].detail.endswith(
        "every round: the curve, global weights and client states of the run without diagnostics, bit for bit; the "
        "same diagnostics after a stop and resume"
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
    assert result.detail.endswith(  # what evaluation must leave alone, said last
        "it must not change anything training reads next: attributes of the method object (self), ctx.global_params "
        "or ctx.global_buffers in place, module-level variables"
    )


class DivergesOnceEvaluated(FedAvg):
    """Poisons its aggregate once it has evaluated a model: evaluated every round, the run diverges at round 2;
    evaluated after its last round only, it finishes."""

    def eval_model(self, ctx):
        self.evaluated = True
        return ctx.model

    def aggregate(self, server, updates, round_index):
        super().aggregate(server, updates, round_index)
        if getattr(self, "evaluated", False):
            server.params = server.params * float("nan")


def test_evaluation_that_makes_the_run_diverge_fails_naming_the_unfinished_run(monkeypatch):
    """A run that does not finish is the difference reported (not the rounds it left out of its curve)."""
    result = check(register(monkeypatch, "diverges_once_evaluated", DivergesOnceEvaluated), "evaluation")["evaluation"]
    assert result.status == "fail"
    assert result.detail.startswith(
        "evaluating every round changed training: the run diverged at round 2: aggregated global weights contain NaN/inf"
    ), result.detail


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
    assert detail.endswith(  # how to fix it, said last
        "A client's training must depend on its own context only: draw randomness from ctx.generator (a server hook "
        "that draws from torch's global generator gets the state the last client trained left: use "
        "fedbench.seeding.torch_generator(spec.seed, 'a name', round_index) there), and keep per-client values in "
        "ctx.state, not on the method object"
    )


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
    assert re.match(r"[^:]+ \(as in another worker\): round \d's train_loss is ", result.detail), result.detail
    assert result.detail.endswith(  # the generators it may have drawn from, then how to fix it
        "The method draws randomness outside the run's keyed streams: from numpy's or Python's global generator, from "
        "torch's outside a client hook (the engine seeds it per client only for local training and evaluation), or "
        "from an unseeded generator. Draw from ctx.generator in client hooks, and from "
        "fedbench.seeding.torch_generator(spec.seed, 'a name', round_index) or numpy_rng(...) in server hooks"
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


class TensorKeyedServerState(FedAvg):
    """Keeps a per-round figure in server.state keyed by a 0-d tensor (a round index left as a tensor): the checkpoint
    writes it, but a dict key must read back as a number or a string, so the checkpoint is rejected on resume."""

    def aggregate(self, server, updates, round_index):
        super().aggregate(server, updates, round_index)
        server.state["clients"] = {torch.tensor(round_index): torch.tensor(float(len(updates)))}


def test_a_checkpoint_that_cannot_be_resumed_fails_resume_naming_the_round_it_restarted_from_and_why(monkeypatch):
    result = check(register(monkeypatch, "tensor_keyed", TensorKeyedServerState), "resume")["resume"]
    assert result.status == "fail"
    assert result.detail.startswith(
        "the run stopped after round 2 did not resume from its checkpoint (it started again from round 0: its "
        "structure has an unhashable key"
    ), result.detail
    assert result.detail.endswith(  # what a checkpoint stores, said last
        "Keep in ctx.state and server.state only what a checkpoint stores: tensors, numbers, strings, and lists and "
        "dicts of them"
    )


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
    assert result.detail.endswith(
        "Either the setting does not reduce the method to FedAvg (correct fedavg_setting where it registers), or the "
        "method does more in it: a term that does not vanish, an extra draw from ctx.generator (it shifts the "
        "batches), a server step that is not the average"
    )


def test_a_fedavg_setting_that_is_not_a_valid_setting_fails_saying_so(monkeypatch):
    name = register(monkeypatch, "bad_setting", FedProx, fedavg_setting={"algorithm_params": {"mu": -1.0}})
    result = check(name, "fedavg-setting")["fedavg-setting"]
    assert result.status == "fail"
    assert result.detail.startswith(  # the setting as declared, then what is wrong with it
        "its declared fedavg_setting {'algorithm_params': {'mu': -1.0}} is not a valid setting: algorithm "
        "'bad_setting': algorithm_params.mu"
    ), result.detail


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
        "aggregated global weights contain NaN/inf. "
    )
    assert result.detail.endswith(  # how to fix it, said last
        "Such a client takes no step (ctx.num_samples == 0, update.num_steps == 0): give its update zero weight or "
        "skip it, and never divide by its sample or step count"
    )


class Crashes(FedAvg):
    def end_local(self, ctx, update):
        raise RuntimeError("a bug in the method")


def test_an_exception_in_the_method_fails_each_property_naming_where_it_was_raised(monkeypatch):
    results = check(register(monkeypatch, "crashes", Crashes), "evaluation", "resume")
    for result in results.values():
        assert result.status == "fail"
        assert result.detail.startswith("training raised RuntimeError: a bug in the method (at ")
        raised_at = Crashes.end_local.__code__.co_firstlineno + 1  # the line of the raise
        assert result.detail.endswith(f"test_contract.py:{raised_at}, in end_local)"), result.detail


class AlwaysDiverges(FedProx):
    """Its aggregate is NaN from round 1 on; it declares μ = 0 its FedAvg setting."""

    def aggregate(self, server, updates, round_index):
        super().aggregate(server, updates, round_index)
        server.params = server.params * float("nan")


def test_a_run_that_diverges_is_named_as_the_failure_of_resume_and_of_the_fedavg_setting(monkeypatch):
    """A run that does not finish is the difference reported, not the rounds it left out of its curve."""
    name = register(monkeypatch, "always_diverges", AlwaysDiverges, fedavg_setting={"algorithm_params": {"mu": 0.0}})
    results = check(name, "resume", "fedavg-setting")
    diverged = "the run diverged at round 1: aggregated global weights contain NaN/inf"
    assert (results["resume"].status, results["resume"].detail) == (
        "fail",
        f"the run to be stopped after round 2 did not get there: {diverged}",
    )
    assert results["fedavg-setting"].status == "fail"
    assert results["fedavg-setting"].detail.startswith(
        f"in its declared FedAvg setting (mu=0.0) it does not train as FedAvg (float64, F64_ATOL = 1e-09): {diverged}. "
    ), results["fedavg-setting"].detail


class ShiftedLogits(FedProx):
    """Adds 1 to every output bias after aggregating: the softmax, hence every loss, accuracy and gradient, is that of
    FedAvg (at μ = 0), but the global weights are not."""

    def aggregate(self, server, updates, round_index):
        super().aggregate(server, updates, round_index)
        server.params = server.params.clone()
        server.params[-10:] += 1.0  # digits_mlp's last parameter: the classifier's bias, one per class


def test_a_fedavg_setting_with_fedavgs_curve_but_other_weights_fails_naming_the_weights(monkeypatch):
    """1 added to the output biases each round, for the 8 rounds the setting is checked over: 8 by the end."""
    name = register(monkeypatch, "shifted_logits", ShiftedLogits, fedavg_setting={"algorithm_params": {"mu": 0.0}})
    result = check(name, "fedavg-setting")["fedavg-setting"]
    assert result.status == "fail"
    assert re.match(
        r"in its declared FedAvg setting \(mu=0\.0\) it does not train as FedAvg \(float64, F64_ATOL = 1e-09\): the "
        r"global weights differs by up to 8 \(max \|Δ\|, over 10 of \d+ entries\)\. ",
        result.detail,
    ), result.detail


class NudgedLastRound(FedProx):
    """FedProx that moves the global weights by 2⁻²⁰ of themselves (8 float32 ulps) after round 3, in float32 only:
    its float64 runs are FedAvg's at μ = 0, bit for bit, its float32 runs differ by more than rounding."""

    def aggregate(self, server, updates, round_index):
        super().aggregate(server, updates, round_index)
        if round_index == 3 and server.params.dtype == torch.float32:
            server.params = server.params * (1 + 2**-20)


def test_a_fedavg_setting_missed_in_float32_only_fails_beyond_rounding(monkeypatch):
    name = register(monkeypatch, "nudged", NudgedLastRound, fedavg_setting={"algorithm_params": {"mu": 0.0}})
    result = check(name, "fedavg-setting")["fedavg-setting"]
    assert result.status == "fail"
    assert re.match(
        r"in its declared FedAvg setting \(mu=0\.0\) it does not train as FedAvg \(float32 for 8 rounds, bit for bit, "
        r"(\d\.\d+) ulps: beyond rounding \(within 4\); float64 agrees\): after round 3, the global weights' "
        r"encoder\.1\.weight differs by up to [\d.e-]+ \(max \|Δ\|, over \d+ of 1024 entries\)\. Either the setting",
        result.detail,
    ), result.detail
    # 2⁻²⁰ of the largest entry is 8 ulps of it, give or take the rounding of the product
    assert 7.5 <= float(re.search(r"(\d\.\d+) ulps", result.detail).group(1)) <= 8.5


class DivergesInFloat32(FedProx):
    """FedProx whose float32 runs diverge after round 2 (its float64 runs are FedAvg's at μ = 0)."""

    def aggregate(self, server, updates, round_index):
        super().aggregate(server, updates, round_index)
        if round_index == 2 and server.params.dtype == torch.float32:
            server.params = server.params * float("nan")


def test_a_fedavg_setting_that_diverges_in_float32_only_fails_naming_the_run(monkeypatch):
    name = register(monkeypatch, "diverges_in_f32", DivergesInFloat32, fedavg_setting={"algorithm_params": {"mu": 0.0}})
    result = check(name, "fedavg-setting")["fedavg-setting"]
    assert result.detail.startswith(
        "in its declared FedAvg setting (mu=0.0) it does not train as FedAvg (float32 for 8 rounds, bit for bit; "
        "float64 agrees): the run diverged at round 2: aggregated global weights contain NaN/inf. Either the setting"
    ), result.detail


class MomentumParams(NoParams):
    beta: float = Field(0.9, ge=0, lt=1)


class FedAvgMDrifting(FedAvg):
    """FedAvgM (server momentum, server lr 1) as its update reads: v ← β·v + (w − w̄), w ← w − lr·v. At β = 0 it is
    w − (w − w̄): FedAvg's average w̄ in exact arithmetic, not in floating point."""

    Params = MomentumParams
    lr = 1.0

    def init_server(self, server):
        server.state["velocity"] = torch.zeros_like(server.params)

    def aggregate(self, server, updates, round_index):
        old = server.params
        super().aggregate(server, updates, round_index)  # server.params = w̄
        server.state["velocity"] = self.params.beta * server.state["velocity"] + (old - server.params)
        server.params = self.step(old, server.params, server.state["velocity"])

    def step(self, old, averaged, velocity):
        return old - self.lr * velocity


class FedAvgMExact(FedAvgMDrifting):
    """FedAvgM that returns w̄ itself where β = 0 makes its update FedAvg's."""

    def step(self, old, averaged, velocity):
        return averaged if self.params.beta == 0 else super().step(old, averaged, velocity)


MOMENTUM_ZERO = {"algorithm_params": {"beta": 0.0}}


def test_a_fedavg_setting_equal_to_fedavg_up_to_rounding_fails_saying_float32_runs_drift(monkeypatch):
    """FedAvgM written old − lr·velocity: at β = 0 its float64 runs are FedAvg's to within 1e-16, its float32 weights
    differ from round 1 on by under an ulp, and its curve leaves FedAvg's a few rounds later."""
    result = check(register(monkeypatch, "fedavgm", FedAvgMDrifting, fedavg_setting=MOMENTUM_ZERO), "fedavg-setting")
    detail = result["fedavg-setting"].detail
    assert result["fedavg-setting"].status == "fail"
    assert detail.startswith(
        "equal up to rounding: float32 runs will drift from FedAvg's curve; make the update exact (e.g. where the "
        "setting reduces the method to FedAvg, compute what FedAvg computes: return the clients' average itself, "
        "base.weighted_average, instead of an algebraically equal form such as old − lr·velocity). In its declared "
        "setting (beta=0.0), trained in float32 for 8 rounds, round 1 is the first not FedAvg's bit for bit: the "
        "global weights' encoder.1.weight differs by up to "
    ), detail
    found = re.search(
        r"entries\), at most ([\d.e-]+) ulp of a tensor's largest entry \(rounding: within 4\); its curve leaves "
        r"FedAvg's: round ([2-8])'s \w+ is [^;]+\. In float64 it trains as FedAvg to within ([\d.e-]+) "
        r"\(F64_ATOL = 1e-09\)$",
        detail,
    )
    assert found, detail
    assert 0 < float(found.group(1)) <= 4 and 0 < float(found.group(3)) <= 1e-9


def test_a_fedavg_setting_whose_weights_left_fedavgs_but_not_yet_its_curve_fails_saying_so(monkeypatch):
    """Weights one ulp off FedAvg's after the last round, the curve still FedAvg's: still a failure, since later
    rounds would compound it; said in those words."""
    name = register(monkeypatch, "fedavgm", FedAvgMExact, fedavg_setting=MOMENTUM_ZERO)
    fedavg = history_run([[1.0, 1.0, 1.0]] * 9)
    method = history_run([[1.0, 1.0, 1.0]] * 8 + [[1.0, 1.0 + 2 * EPS, 1.0]])
    for run in (fedavg, method):
        run.result = RunResult(status=RunStatus.DONE, rounds_done=8)
    trained = []

    def train(spec, history=False, float64=False):
        trained.append((spec.algorithm, spec.rounds, history, float64))
        return fedavg if spec.algorithm == "fedavg" or float64 else method

    checker = SimpleNamespace(spec=contract_spec(name), train=train)
    with pytest.raises(_Broken) as broken:
        _fedavg_setting(checker)
    assert trained == [("fedavgm", 8, True, False), ("fedavg", 8, True, False), ("fedavgm", 8, False, True),
                       ("fedavg", 8, False, True)]  # fmt: skip
    assert str(broken.value).endswith(
        "round 8 is the first not FedAvg's bit for bit: the global weights' w differs by up to 2.38e-07 (max |Δ|, "
        "over 1 of 2 entries), at most 2 ulp of a tensor's largest entry (rounding: within 4); its curve is still "
        "FedAvg's after 8 rounds. In float64 it trains as FedAvg to within 0 (F64_ATOL = 1e-09)"
    ), str(broken.value)


def test_a_fedavg_setting_made_exact_passes_bit_for_bit(monkeypatch):
    result = check(register(monkeypatch, "fedavgm", FedAvgMExact, fedavg_setting=MOMENTUM_ZERO), "fedavg-setting")
    assert (result["fedavg-setting"].status, result["fedavg-setting"].detail) == (
        "pass",
        "in its declared setting (beta=0.0) it trains as FedAvg bit for bit in float32 for 8 rounds: every parameter "
        "and buffer after every round, and the curve",
    )


def test_a_fedavg_setting_is_checked_over_the_runs_rounds_when_they_are_more_than_8(monkeypatch):
    result = check(
        register(monkeypatch, "fedavgm", FedAvgMExact, fedavg_setting=MOMENTUM_ZERO), "fedavg-setting", rounds=9
    )
    assert result["fedavg-setting"].detail.startswith(
        "in its declared setting (beta=0.0) it trains as FedAvg bit for bit in float32 for 9 rounds"
    )


class CountsRoundsInBatchNorm(FedProx):
    """Adds 1 to BatchNorm's num_batches_tracked after aggregating: with BatchNorm's momentum set the count changes
    neither training nor evaluation, so the curve and weights are FedAvg's (at μ = 0), but the global buffers are not."""

    def aggregate(self, server, updates, round_index):
        super().aggregate(server, updates, round_index)
        server.buffers = {k: v + 1 if k.endswith("num_batches_tracked") else v for k, v in server.buffers.items()}


def test_a_fedavg_setting_with_fedavgs_weights_but_other_buffers_fails_naming_the_buffer(monkeypatch):
    name = register(
        monkeypatch, "counts_rounds", CountsRoundsInBatchNorm, fedavg_setting={"algorithm_params": {"mu": 0.0}}
    )
    bn = {"model": "fedbn_digit_cnn", "local_steps": 2, "batch_size": 16}
    result = check(name, "fedavg-setting", **bn)["fedavg-setting"]
    assert result.status == "fail"
    assert re.match(
        r"in its declared FedAvg setting \(mu=0\.0\) it does not train as FedAvg \(float64, F64_ATOL = 1e-09\): the "
        r"global buffers\['[\w.]+num_batches_tracked'\] is \d+ in one run and \d+ in the other\. ",
        result.detail,
    ), result.detail


def test_a_fedavg_setting_keeps_the_methods_regularizers_on_fedavg():
    """FedProx at μ = 0 with a regularizer is FedAvg with the same regularizer (not plain FedAvg)."""
    params = {"mu": 0.5, "regularizers": [{"name": "ld", "weight": 0.2}]}
    result = check("fedprox", "fedavg-setting", algorithm_params=params)["fedavg-setting"]
    assert result.status == "pass", result.detail


# ------------------------------------------------------------------------ the setting and the comparisons
def test_the_check_setting_has_clients_that_skip_a_round_and_clients_that_return():
    """3 rounds of 3 of 4 clients: a client trains again with the state it kept, and another sits a round out."""
    from fedbench.engine.loop import client_schedule

    spec = contract_spec("fedavg")
    schedule = client_schedule(spec)
    assert (spec.rounds, spec.num_clients, spec.clients_per_round) == (3, 4, 3)
    assert any(set(a) & set(b) for a, b in zip(schedule, schedule[1:]))  # a client returns
    assert all(len(set(clients)) < spec.num_clients for clients in schedule)  # and one sits out, every round


def test_the_check_setting_trains_all_but_one_client_unless_told_and_takes_tables_it_lacks():
    assert [contract_spec("fedavg", num_clients=n).clients_per_round for n in (1, 2, 5)] == [1, 1, 4]
    assert contract_spec("fedavg", num_clients=5, clients_per_round=2).clients_per_round == 2
    finetune = {"epochs": 1, "lr": 0.1, "loss": "ce", "start": "final"}
    spec = contract_spec("fedavg", finetune=finetune)  # a table SETUP does not have: taken as it is
    assert (spec.finetune.epochs, spec.finetune.lr) == (1, 0.1)


def test_a_fedavg_setting_with_an_unknown_part_is_a_config_error_naming_it():
    with pytest.raises(ConfigError) as error:
        fedavg_setting_spec(contract_spec("fedprox"), {"algorithm_param": {"mu": 0.0}, "set_up": {}})
    assert str(error.value) == (
        "fedprox: fedavg_setting has key(s) algorithm_param, set_up; expected algorithm_params and/or setup"
    )


def test_a_declared_fedavg_setting_reads_as_its_values():
    assert setting_text({"algorithm_params": {"mu": 0.0}, "setup": {"local_steps": 2}}) == "mu=0.0, local_steps=2"
    assert setting_text({"setup": {"local_steps": 2}}) == "local_steps=2"
    assert setting_text({}) == "as it is"


def test_the_sink_keeps_one_record_per_round_as_a_registry_does():
    def record(round_, loss):
        return RoundRecord(round=round_, train_loss=loss, wall_seconds=0.0, bytes_up=0, bytes_down=0)

    sink = _Sink()
    for round_, loss in [(1, 0.5), (2, 0.4), (3, 0.3)]:
        sink.log_round(record(round_, loss))
    sink.truncate(1)
    sink.log_round(record(2, 0.25))  # a resumed run redoes round 2
    sink.log_round(record(2, 0.2))  # and logs it again: the last one stays
    assert [(r.round, r.train_loss) for r in sink.records] == [(1, 0.5), (2, 0.2)]


def test_the_checks_train_on_the_cpu_with_the_callers_data_options_and_one_thread_by_default(monkeypatch):
    """The caller's data root and verification reach the runs (nothing else of theirs); the runs use ``threads``
    threads (1 unless told) and leave the process's setting as it was."""
    from fedbench.engine import contract

    seen = []

    def set_up(spec, options):  # the preflight's set-up: stop there
        seen.append((options.settings.data_root, options.settings.verify, options.device, torch.get_num_threads()))
        raise ConfigError("stop")

    monkeypatch.setattr(contract, "set_up", set_up)
    before = torch.get_num_threads()
    for kwargs in ({}, {"data_root": "/data", "verify": False, "threads": 2}):
        with pytest.raises(ConfigError, match="^stop$"):
            check_method(contract_spec("fedavg"), ["evaluation"], **kwargs)
        assert torch.get_num_threads() == before
    assert seen == [(None, True, "cpu", 1), ("/data", False, "cpu", 2)]


def test_the_checks_runs_train_in_the_default_dtype_unless_asked_for_float64(tmp_path):
    checker = Checker(contract_spec("fedavg", rounds=1), tmp_path)
    assert checker.options.device == "cpu"
    assert checker.reference().server.params.dtype == torch.float32
    assert checker.train(checker.spec, float64=True).server.params.dtype == torch.float64


def test_a_run_trained_with_history_keeps_the_global_model_of_every_round_and_where_each_parameter_lies(tmp_path):
    checker = Checker(contract_spec("fedavg", rounds=3), tmp_path)
    run = checker.train(checker.spec, history=True)
    assert [r.round for r in run.records] == [1, 2, 3] and len(run.history) == 4  # w^0, then every round's
    assert torch.equal(run.history[-1].params, run.server.params) and run.history[-1].buffers == run.server.buffers
    assert all(not torch.equal(a.params, b.params) for a, b in zip(run.history, run.history[1:]))
    assert run.parameters == [
        ("encoder.1.weight", 0, 1024),
        ("encoder.1.bias", 1024, 1040),
        ("classifier.weight", 1040, 1200),
        ("classifier.bias", 1200, 1210),
    ]
    assert run.parameters[-1][2] == run.server.params.numel()
    assert torch.equal(run.history[0].params, checker.train(checker.spec, stop_after=1, history=True).history[0].params)
    stopped = checker.train(checker.spec, stop_after=2, history=True)  # a stop still stops, with the rounds it trained
    assert stopped.result is None and len(stopped.history) == 3
    assert torch.equal(stopped.history[2].params, run.history[2].params)
    plain = checker.train(checker.spec)
    assert (plain.history, plain.parameters) == ([], [])
    by_hand = _Run(None, [], plain.server, {})  # as the comparisons' tests build runs: no history unless given
    assert (by_hand.history, by_hand.parameters) == ([], [])


def test_each_result_is_heard_as_it_is_done_and_times_its_own_check():
    heard = []
    began = time.perf_counter()
    results = check_method(
        contract_spec("fedavg", rounds=1, num_clients=1), ["resume", "empty-client"], on_result=heard.append
    )
    took = time.perf_counter() - began
    assert heard == results
    assert [(r.status, r.detail) for r in results] == [
        ("skip", "needs 2 rounds or more (--rounds)"),
        ("skip", "needs 2 clients or more (--clients)"),
    ]
    assert all(0 <= r.seconds <= took for r in results)


def test_a_result_and_a_property_are_values_nobody_changes():
    result = PropertyResult("resume", "t", "pass", "d", 0.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.status = "fail"
    with pytest.raises(dataclasses.FrozenInstanceError):
        PROPERTIES["resume"].check = lambda checker: "pass"
    assert len({result, PropertyResult("resume", "t", "pass", "d", 0.0)}) == 1  # hashable, equal by value


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
    assert result.detail.endswith(
        "round_diagnostics only reads: it draws no random number from a training stream and writes nothing to "
        "ctx.state, server or self"
    )


class PoisoningDiagnostics(FedAvg):
    """Reports a mixing weight, and leaves NaN in the global weights while it reads them: the diagnosed run diverges
    when the round is evaluated, the run without diagnostics finishes."""

    reported_diagnostics = frozenset({"mixing_weights"})

    def round_diagnostics(self, names, server, contexts):
        server.params = server.params * float("nan")
        return {"mixing_weights": {"clients": [], "weight": [], "symbol": "m"}}


def test_diagnostics_that_make_the_run_diverge_fail_naming_the_unfinished_run(monkeypatch):
    result = check(register(monkeypatch, "poisoning", PoisoningDiagnostics), "diagnostics", rounds=2)["diagnostics"]
    assert result.status == "fail"
    assert re.match(
        r"recording diagnostics \([^)]*\) changed training: the run diverged at round 1: test loss ", result.detail
    ), result.detail


def test_a_declared_diagnostic_that_is_never_returned_fails(monkeypatch):
    result = check(register(monkeypatch, "forgetful", ForgetfulDiagnostics), "diagnostics")["diagnostics"]
    assert result.status == "fail"
    assert result.detail.startswith(
        "round 1 recorded diagnostics [\x27activations\x27, \x27feature_snapshot\x27, \x27feature_stats\x27, \x27personal_divergence\x27, "
        "\x27val_loss\x27, \x27weight_divergence\x27], not ["
    )
    assert result.detail.endswith(
        "a method whose reported_diagnostics names one must return it from round_diagnostics every round asked"
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


NAN = float("nan")


@pytest.mark.parametrize(
    ("test_loss", "params", "buffers", "client_states", "named"),
    [
        ([0.5, NAN], [0.0], {}, {}, "round 2's test_loss is nan"),
        ([0.5, 0.5], [0.0, NAN], {}, {}, "the global weights holds NaN or inf"),
        (
            [0.5, 0.5],
            [0.0],
            {"bn.running_var": [1.0, float("inf")]},
            {},
            "the global buffers['bn.running_var'] holds NaN or inf",
        ),
        ([0.5, 0.5], [0.0], {}, {0: {"c": [NAN]}}, "the client states[0]['c'] holds NaN or inf"),
    ],
)
def test_the_empty_client_property_names_the_figure_or_tensor_that_is_not_finite(
    test_loss, params, buffers, client_states, named
):
    """Whatever of the finished run is not finite fails the property, named: a round's loss, the global weights, a
    BatchNorm statistic of the global model, a client's state (a division by the empty client's count there)."""
    spec = contract_spec("fedavg")
    records = [
        RoundRecord(round=r, train_loss=0.5, wall_seconds=0.0, bytes_up=0, bytes_down=0, test_loss=loss)
        for r, loss in enumerate(test_loss, 1)
    ]
    finished = _Run(
        result=RunResult(status=RunStatus.DONE, rounds_done=len(records)),
        records=records,
        server=ServerState(params=torch.tensor(params), buffers={k: torch.tensor(v) for k, v in buffers.items()}),
        client_states={c: {k: torch.tensor(v) for k, v in state.items()} for c, state in client_states.items()},
    )
    trained = []

    def train(spec, prepare):
        trained.append((spec.clients_per_round, prepare))
        return finished

    with pytest.raises(_Broken) as broken:
        _empty_client(SimpleNamespace(spec=spec, train=train))
    assert str(broken.value) == (
        f"with client 0 holding no training sample (every client training every round), {named}. Such a client "
        "takes no step (ctx.num_samples == 0, update.num_steps == 0): give its update zero weight or skip it, and "
        "never divide by its sample or step count"
    )
    assert trained == [(spec.num_clients, _empty_first_client)]  # every client trains, client 0 emptied


def test_the_empty_client_property_checks_from_two_clients_on():
    result = check("fedavg", "empty-client", num_clients=2, rounds=1)["empty-client"]
    assert result.status == "pass", result.detail


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
    skipped = check("fedavg", "resume", rounds=1)["resume"]
    assert (skipped.status, skipped.detail) == ("skip", "needs 2 rounds or more (--rounds)")


class CountingDiagnostics(FedAvg):
    """Reports how many rounds this object has diagnosed: a count the checkpoint does not hold."""

    reported_diagnostics = frozenset({"mixing_weights"})

    def round_diagnostics(self, names, server, contexts):
        self.calls = getattr(self, "calls", 0) + 1
        return {"mixing_weights": {"clients": [0], "weight": [float(self.calls)], "symbol": "m"}}


class ForgetsOnResume(FedAvg):
    """Diverges in any round after the first that its method object did not train round 1 in: a run resumed after
    round 2 diverges at round 3 (a flag on the method object, which the checkpoint does not hold)."""

    def aggregate(self, server, updates, round_index):
        super().aggregate(server, updates, round_index)
        if round_index == 1:
            self.trained_round_1 = True
        elif not getattr(self, "trained_round_1", False):
            server.params = server.params * float("nan")


def test_a_resumed_run_that_records_fewer_rounds_fails_the_diagnostics_property(monkeypatch):
    """Run uninterrupted, it trains and records every round; resumed after round 2, it records no round 3."""
    result = check(register(monkeypatch, "forgets_on_resume", ForgetsOnResume), "diagnostics")["diagnostics"]
    assert result.status == "fail", result.detail


@pytest.mark.parametrize("rounds", [2, 3])  # checked from 2 rounds on
def test_a_diagnostic_the_checkpoint_cannot_restore_fails_after_a_stop_and_resume(monkeypatch, rounds):
    name = register(monkeypatch, "counting", CountingDiagnostics)
    result = check(name, "diagnostics", rounds=rounds)["diagnostics"]
    assert result.status == "fail"
    assert result.detail.startswith(
        f"stopped after round {rounds - 1} and resumed, the run records other diagnostics: round {rounds}'s "
        "diagnostics['mixing_weights']"
    ), result.detail
    assert result.detail.endswith("A diagnostic must be computed from what the checkpoint restores")
