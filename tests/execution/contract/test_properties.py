"""The engine contract's properties checked on one method (``fedbench.execution.contract``): they pass for methods that keep the
contract (FedAvg, FedProx with its packed step and FedAvg setting, SCAFFOLD with client state, FedRep and Ditto
with personal models) and fail, naming the property, what differed and how to fix it, for methods written wrong on
purpose: evaluation that changes a client's state, randomness from a global generator, state the checkpoint does
not hold, a packed step that is not the method's, a FedAvg setting that is not FedAvg, a division by an empty
client's sample count. Every built-in passes them (tests/execution/contract/test_builtin_methods.py)."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from pydantic import Field

from fedbench.algorithms import ALGORITHMS
from fedbench.algorithms.base import weighted_average
from fedbench.algorithms.context import ServerState
from fedbench.algorithms.functional import proximal
from fedbench.algorithms.methods.fedavg import FedAvg
from fedbench.algorithms.methods.fedprox import FedProx
from fedbench.algorithms.params import NoParams
from fedbench.engine.loop import RoundRecord, RunResult
from fedbench.errors import ConfigError
from fedbench.execution.contract.check import check_method
from fedbench.execution.contract.properties import (
    PROPERTIES,
    _Broken,
    _empty_client,
    _empty_first_client,
    _fedavg_setting,
    docs_table,
)
from fedbench.execution.contract.runs import _Run
from fedbench.execution.contract.setting import contract_spec
from fedbench.vocab.status import RunStatus

EPS = 2.0**-23  # float32's eps


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
        assert result.detail.endswith(f"test_properties.py:{raised_at}, in end_local)"), result.detail


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
    result = check(
        register(monkeypatch, "plugin_momentum", FedAvgMDrifting, fedavg_setting=MOMENTUM_ZERO), "fedavg-setting"
    )
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
    name = register(monkeypatch, "plugin_momentum", FedAvgMExact, fedavg_setting=MOMENTUM_ZERO)
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
    assert trained == [("plugin_momentum", 8, True, False), ("fedavg", 8, True, False), ("plugin_momentum", 8, False, True),
                       ("fedavg", 8, False, True)]  # fmt: skip
    assert str(broken.value).endswith(
        "round 8 is the first not FedAvg's bit for bit: the global weights' w differs by up to 2.38e-07 (max |Δ|, "
        "over 1 of 2 entries), at most 2 ulp of a tensor's largest entry (rounding: within 4); its curve is still "
        "FedAvg's after 8 rounds. In float64 it trains as FedAvg to within 0 (F64_ATOL = 1e-09)"
    ), str(broken.value)


def test_a_fedavg_setting_made_exact_passes_bit_for_bit(monkeypatch):
    result = check(
        register(monkeypatch, "plugin_momentum", FedAvgMExact, fedavg_setting=MOMENTUM_ZERO), "fedavg-setting"
    )
    assert (result["fedavg-setting"].status, result["fedavg-setting"].detail) == (
        "pass",
        "in its declared setting (beta=0.0) it trains as FedAvg bit for bit in float32 for 8 rounds: every parameter "
        "and buffer after every round, and the curve",
    )


def test_a_fedavg_setting_is_checked_over_the_runs_rounds_when_they_are_more_than_8(monkeypatch):
    result = check(
        register(monkeypatch, "plugin_momentum", FedAvgMExact, fedavg_setting=MOMENTUM_ZERO), "fedavg-setting", rounds=9
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


def test_the_docs_tables_of_the_properties_are_made_of_the_properties_own_texts():
    """docs/plugins.md's table is ``docs_table()`` (each property's one-line holds and breaks texts, in order);
    docs/cli.md's lists the same properties in the same order."""
    root = Path(__file__).resolve().parents[3]
    table = docs_table()
    assert table in (root / "docs" / "plugins.md").read_text()
    assert (
        table.splitlines()[2]
        == f"| `evaluation` | {PROPERTIES['evaluation'].holds} | {PROPERTIES['evaluation'].breaks} |"
    )
    assert all(p.holds and p.breaks and "\n" not in p.holds + p.breaks for p in PROPERTIES.values())
    cli = (root / "docs" / "cli.md").read_text()
    listed = re.findall(r"^\| `([a-z-]+)` \| ", cli[cli.index("| property | holds when |") :], re.MULTILINE)
    assert listed[: len(PROPERTIES)] == list(PROPERTIES)


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
