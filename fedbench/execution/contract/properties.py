"""The properties of the engine contract, each with what it checks (``holds``) and what breaks it (``breaks``): the
table of docs/plugins.md (``docs_table``), and the check that runs it on a method (``Checker``'s runs, compared by
``compare``). Each check returns what it compared, or raises ``_Broken`` (what differed, how to fix it) or ``_Skip``
(why it does not apply)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fedbench.algorithms import ALGORITHMS
from fedbench.engine.diagnostics import diagnostics_of
from fedbench.engine.loop import Training
from fedbench.errors import FedbenchError
from fedbench.execution.contract.compare import (
    F64_ATOL,
    FEDAVG_FIGURES,
    ROUNDING_ULPS,
    _curve_difference,
    _difference,
    _first_inexact,
    _not_finite,
    _run_difference,
    _state_difference,
    _unfinished,
)
from fedbench.execution.contract.runs import Checker, _Sink
from fedbench.execution.contract.setting import _variant, fedavg_setting_spec, setting_text, with_method

# A declared FedAvg setting is checked in the runs' own dtype (float32, as real runs train), bit for bit, over at
# least FEDAVG_SETTING_ROUNDS rounds. Why 8: a rule equal to FedAvg's only up to rounding differs in the weights from
# round 1 on (measured: a FedAvgM written old − lr·velocity, SlowMo at β = 0, FedNova with equal step counts, a loss
# on logits·3/3), and its curve leaves FedAvg's by round 2–6 (the loss 2, FedAvgM 4, SlowMo 4, FedNova 6; one such
# plug-in was reported leaving at round 7): 8 rounds show both. They also let every client of the 3-of-4 schedule return at least
# three times (with 3 rounds one trains once), so a term that needs a client's previous round (FedTrip's history,
# MOON's previous model) has run. Cost: two runs of 8 rounds on the tiny MLP, about a second.
FEDAVG_SETTING_ROUNDS = 8


class _Broken(Exception):
    """The property does not hold: what differed and how to fix it."""


class _Skip(Exception):
    """The property does not apply to this method or setting: why."""


def _evaluation(checker: Checker) -> str:
    every_round = checker.reference()
    at_the_end = checker.train(_variant(checker.spec, eval_every=checker.spec.rounds))
    problem = (
        _unfinished(every_round)
        or _unfinished(at_the_end)
        or _curve_difference(every_round.records, at_the_end.records, ("train_loss",))
        or _curve_difference(every_round.records[-1:], at_the_end.records[-1:])
        or _state_difference(every_round, at_the_end)
    )
    if problem:
        raise _Broken(
            f"evaluating every round changed training: {problem}. Evaluation (eval_model, and local_train when it "
            "adapts a personal model) gets a copy of ctx.state, whatever it writes there is dropped; it must not "
            "change anything training reads next: attributes of the method object (self), ctx.global_params or "
            "ctx.global_buffers in place, module-level variables"
        )
    return (
        f"evaluated every round or after round {checker.spec.rounds} only: the same training losses, last-round "
        "figures, global weights and client states, bit for bit"
    )


def _keyed_streams(checker: Checker) -> str:
    reference = checker.reference()
    reordered = checker.train(checker.spec, reversed_order=True, random_seed=1)
    problem = _run_difference(reference, reordered)
    if problem is None:
        return (
            "each round's clients trained last to first, after the process's global random generators were seeded "
            "otherwise: the same curve, global weights and client states, bit for bit"
        )
    elsewhere = checker.train(checker.spec, random_seed=1)
    other_process = _run_difference(reference, elsewhere)
    if other_process:
        raise _Broken(
            f"the same run gave other results after the process's global random generators were seeded otherwise "
            f"(as in another worker): {other_process}. The method draws randomness outside the run's keyed streams: "
            "from numpy's or Python's global generator, from torch's outside a client hook (the engine seeds it per "
            "client only for local training and evaluation), or from an unseeded generator. Draw from "
            "ctx.generator in client hooks, and from fedbench.seeding.torch_generator(spec.seed, 'a name', "
            "round_index) or numpy_rng(...) in server hooks"
        )
    raise _Broken(
        f"training each round's clients in another order changed the results: {problem}. A client's training must "
        "depend on its own context only: draw randomness from ctx.generator (a server hook that draws from torch's "
        "global generator gets the state the last client trained left: use "
        "fedbench.seeding.torch_generator(spec.seed, 'a name', round_index) there), and keep per-client values in "
        "ctx.state, not on the method object"
    )


def _resume(checker: Checker) -> str:
    rounds = checker.spec.rounds
    if rounds < 2:
        raise _Skip("needs 2 rounds or more (--rounds)")
    stop = rounds - 1
    path, sink = checker.path(), _Sink()
    first = checker.train(checker.spec, stop_after=stop, path=path, sink=sink)
    if first.result is not None:
        raise _Broken(f"the run to be stopped after round {stop} did not get there: {_unfinished(first)}")
    resumed = checker.train(checker.spec, path=path, sink=sink)
    info = resumed.result.info if resumed.result is not None else {}
    if info.get("resumed_from") != stop:
        raise _Broken(
            f"the run stopped after round {stop} did not resume from its checkpoint (it started again from round "
            f"{info.get('resumed_from')}: {info.get('checkpoint_rejected', 'no checkpoint')}). Keep in ctx.state and "
            "server.state only what a checkpoint stores: tensors, numbers, strings, and lists and dicts of them"
        )
    problem = _run_difference(checker.reference(), resumed)
    if problem:
        raise _Broken(
            f"stopped after round {stop} and resumed from its checkpoint, the run differs from the uninterrupted "
            f"one: {problem}. Everything a later round reads must be in the checkpoint: per-client values in "
            "ctx.state, server values in server.state, not on the method object (self), which a resumed run "
            "builds anew, nor in module-level variables"
        )
    return (
        f"stopped after round {stop} and resumed from its checkpoint: the uninterrupted run's curve, global weights "
        "and client states, bit for bit"
    )


def _require_packed(training: Training) -> None:
    if not training.choice.packed:
        raise _Skip(f"trains sequentially only: {training.choice.reason.removeprefix('fallback: ')}")


def _packed(checker: Checker) -> str:
    together = checker.train(checker.spec, float64=True, packing="packed", prepare=_require_packed)
    one_by_one = checker.train(checker.spec, float64=True)
    problem = _run_difference(one_by_one, together, atol=F64_ATOL)
    if problem:
        raise _Broken(
            f"the packed path differs from the sequential one beyond float64 rounding (F64_ATOL = {F64_ATOL:g}): "
            f"{problem}. packed_inputs, packed_objective and packed_adjust_gradients must compute, on one client's "
            "flat parameter vector, what begin_local, loss and adjust_gradients do (padding masked out: "
            "functional.masked_mean); if they cannot, do not declare packed_step"
        )
    return f"packed and sequential agree in float64 to within {F64_ATOL:g}: curve, global weights, client states"


def _not_fedavg(text: str, how: str, problem: str) -> _Broken:
    """The failure of a declared FedAvg setting that is not FedAvg (``how``: compared in which dtype, to what)."""
    return _Broken(
        f"in its declared FedAvg setting ({text}) it does not train as FedAvg ({how}): {problem}. Either the setting "
        "does not reduce the method to FedAvg (correct fedavg_setting where it registers), or the method does more "
        "in it: a term that does not vanish, an extra draw from ctx.generator (it shifts the batches), a server step "
        "that is not the average"
    )


def _fedavg_setting(checker: Checker) -> str:
    name = checker.spec.algorithm
    if name == "fedavg":
        raise _Skip("FedAvg itself")
    setting = ALGORITHMS.info(name).get("fedavg_setting")
    if setting is None:
        raise _Skip(f"{name} declares no setting in which it is FedAvg (fedavg_setting, docs/plugins.md)")
    rounds = max(checker.spec.rounds, FEDAVG_SETTING_ROUNDS)
    try:
        spec = fedavg_setting_spec(_variant(checker.spec, rounds=rounds), setting)
        regularizers = spec.algorithm_params.get("regularizers", [])  # FedAvg with the same regularizers
        fedavg_spec = with_method(spec, "fedavg", {"regularizers": regularizers})
    except FedbenchError as exc:
        raise _Broken(f"its declared fedavg_setting {setting!r} is not a valid setting: {exc}") from None
    text = setting_text(setting)
    # In the runs' own dtype (real runs train in it: float32), bit for bit: any difference, however small, is a
    # different curve once the rounds compound it.
    method, fedavg = checker.train(spec, history=True), checker.train(fedavg_spec, history=True)
    dtype = str(fedavg.server.params.dtype).removeprefix("torch.")
    unfinished = _unfinished(method) or _unfinished(fedavg)
    inexact = None if unfinished else _first_inexact(method, fedavg)
    if unfinished is None and inexact is None:
        return (
            f"in its declared setting ({text}) it trains as FedAvg bit for bit in {dtype} for {spec.rounds} rounds: "
            "every parameter and buffer after every round, and the curve"
        )
    # They differ: the same runs in float64 tell the maths (another method) from the rounding of the same maths.
    method64, fedavg64 = checker.train(spec, float64=True), checker.train(fedavg_spec, float64=True)
    problem = (
        _unfinished(method64)
        or _unfinished(fedavg64)
        or _curve_difference(method64.records, fedavg64.records, FEDAVG_FIGURES, F64_ATOL)
        or _difference(method64.server.params, fedavg64.server.params, "the global weights", F64_ATOL)
        or _difference(method64.server.buffers, fedavg64.server.buffers, "the global buffers", F64_ATOL)
    )
    if problem:
        raise _not_fedavg(text, f"float64, F64_ATOL = {F64_ATOL:g}", problem)
    if inexact is None or not inexact.rounding:  # None: a run that did not finish (float64's did)
        what = unfinished if inexact is None else f"after round {inexact.round}, {inexact.difference}"
        beyond = "" if inexact is None else f", {inexact.ulps:.3g} ulps: beyond rounding (within {ROUNDING_ULPS:g})"
        raise _not_fedavg(text, f"{dtype} for {spec.rounds} rounds, bit for bit{beyond}; float64 agrees", str(what))
    curve = _curve_difference(method.records, fedavg.records, FEDAVG_FIGURES)
    left = f"its curve leaves FedAvg's: {curve}" if curve else f"its curve is still FedAvg's after {spec.rounds} rounds"
    gap = float((method64.server.params - fedavg64.server.params).abs().max())
    raise _Broken(
        f"equal up to rounding: {dtype} runs will drift from FedAvg's curve; make the update exact (e.g. where the "
        "setting reduces the method to FedAvg, compute what FedAvg computes: return the clients' average itself, "
        "base.weighted_average, instead of an algebraically equal form such as old − lr·velocity). In its declared "
        f"setting ({text}), trained in {dtype} for {spec.rounds} rounds, round {inexact.round} is the first not "
        f"FedAvg's bit for bit: {inexact.difference}, at most {inexact.ulps:.2g} ulp of a tensor's largest entry "
        f"(rounding: within {ROUNDING_ULPS:g}); {left}. In float64 it trains as FedAvg to within {gap:.2g} "
        f"(F64_ATOL = {F64_ATOL:g})"
    )


def _empty_first_client(training: Training) -> None:
    """Client 0 holds no training sample (a site whose data are all in its test split, or a skewed split at a small
    Dirichlet α); nor any test or validation sample of its own, as a partition that gave it nothing would leave it."""
    data = training.state.data
    data.client_train[0] = data.client_train[0][:0]
    if data.client_val:
        data.client_val[0] = data.client_val[0][:0]
    if not data.client_test_from_test:
        data.client_test[0] = data.client_test[0][:0]


def _empty_client(checker: Checker) -> str:
    if checker.spec.num_clients < 2:
        raise _Skip("needs 2 clients or more (--clients)")
    spec = _variant(checker.spec, clients_per_round=checker.spec.num_clients)
    run = checker.train(spec, prepare=_empty_first_client)
    problem = _unfinished(run)
    for record in run.records:
        for name in ("train_loss", "test_loss"):
            problem = problem or _not_finite(getattr(record, name), f"round {record.round}'s {name}")
    problem = (
        problem
        or _not_finite(run.server.params, "the global weights")
        or _not_finite(run.server.buffers, "the global buffers")
        or _not_finite(run.client_states, "the client states")
    )
    if problem:
        raise _Broken(
            f"with client 0 holding no training sample (every client training every round), {problem}. Such a "
            "client takes no step (ctx.num_samples == 0, update.num_steps == 0): give its update zero weight or "
            "skip it, and never divide by its sample or step count"
        )
    return "with client 0 holding no training sample: the run finished, its losses, weights and states finite"


def _diagnostics(checker: Checker) -> str:
    names = diagnostics_of(checker.spec)
    spec = _variant(checker.spec, diagnostics=list(names))
    diagnosed = checker.train(spec)
    problem = _run_difference(checker.reference(), diagnosed)
    if problem:
        raise _Broken(
            f"recording diagnostics ({', '.join(names)}) changed training: {problem}. round_diagnostics only reads: "
            "it draws no random number from a training stream and writes nothing to ctx.state, server or self"
        )
    for record in diagnosed.records:
        recorded = sorted(record.diagnostics or {})
        if recorded != sorted(names):
            raise _Broken(
                f"round {record.round} recorded diagnostics {recorded}, not {sorted(names)}: a method whose "
                "reported_diagnostics names one must return it from round_diagnostics every round asked"
            )
    if spec.rounds >= 2:
        path, sink = checker.path(), _Sink()
        checker.train(spec, stop_after=spec.rounds - 1, path=path, sink=sink)
        resumed = checker.train(spec, path=path, sink=sink)
        for a, b in zip(diagnosed.records, resumed.records, strict=True):
            found = _difference(a.diagnostics, b.diagnostics, f"round {a.round}'s diagnostics")
            if found:
                raise _Broken(
                    f"stopped after round {spec.rounds - 1} and resumed, the run records other diagnostics: {found}. "
                    "A diagnostic must be computed from what the checkpoint restores"
                )
    return (
        f"recording {', '.join(names)} every round: the curve, global weights and client states of the run without "
        "diagnostics, bit for bit; the same diagnostics after a stop and resume"
    )


@dataclass(frozen=True)
class Property:
    """A property of the engine contract: its title (check-method's line), what it checks when it holds and what
    breaks it, in a line each (docs/plugins.md's table, ``docs_table``), and its check."""

    title: str
    holds: str
    breaks: str
    check: Callable[[Checker], str]  # returns what was compared; raises _Broken or _Skip


PROPERTIES: dict[str, Property] = {
    "evaluation": Property(
        "evaluation leaves training unchanged",
        "evaluating every round (global and personal models) or only after the last trains the same, bit for bit",
        "evaluation (`eval_model`, a personal adaptation) changing what training reads: attributes of the method object, `ctx.global_params` in place. Evaluation gets a copy of `ctx.state`: what it writes there is dropped",
        _evaluation,
    ),
    "keyed-streams": Property(
        "results independent of client order and of the process",
        "the round's clients trained in another order, in a process whose global random generators were seeded otherwise, give the same run",
        "randomness outside the run's keyed streams (`fedbench.seeding`): numpy's or Python's global generator, torch's in a server hook (`payload`, `aggregate`, `after_aggregation`), an unseeded generator; a value carried from one client to the next on the method object. Client hooks draw from `ctx.generator`; server hooks from `fedbench.seeding.torch_generator(spec.seed, \"a name\", round_index)`",
        _keyed_streams,
    ),
    "resume": Property(
        "kill and resume gives the same curve",
        "stopped after round R − 1 and resumed from its checkpoint, the run is the uninterrupted one, bit for bit",
        "state a later round reads kept outside the checkpoint: on the method object (a resumed run builds it anew) or in a module. Per-client state goes in `ctx.state`, server state in `server.state` (tensors, numbers, strings, lists and dicts of them)",
        _resume,
    ),
    "packed": Property(
        "packed == sequential",
        "a method that declares `packed_step = True` trains the same packed as sequentially (float64, to within 1e-9)",
        "`packed_inputs` / `packed_objective` / `packed_adjust_gradients` computing something else than `begin_local` / `loss` / `adjust_gradients`",
        _packed,
    ),
    "fedavg-setting": Property(
        "its declared FedAvg setting is FedAvg",
        "a method that declares a setting in which it is FedAvg trains as FedAvg there, the same curve: in float32 over 8 rounds, every parameter and buffer after every round, the losses and global figures, bit for bit",
        'a wrong declaration, or a method that does more in it (a term that does not vanish, an extra draw from `ctx.generator`); or an update equal to FedAvg\'s only in exact arithmetic (`old − lr·velocity` at zero momentum): "equal up to rounding", below',
        _fedavg_setting,
    ),
    "empty-client": Property(
        "a client with no training sample",
        "with client 0 holding no training sample (every client training every round) the run finishes with finite losses, weights and states",
        "dividing by a client's sample or step count (0 there)",
        _empty_client,
    ),
    "diagnostics": Property(
        "diagnostics leave training unchanged",
        "recording the per-round diagnostics (`fedbench/vocab/diagnostics.py`) every round trains as without them, bit for bit, and a resumed run records the same ones",
        "`round_diagnostics` writing to `ctx.state`, `server` or the method object, or drawing from a training stream; declaring a diagnostic in `reported_diagnostics` and not returning it",
        _diagnostics,
    ),
}


def docs_table() -> str:
    """The table of the properties in docs/plugins.md (Markdown): name, what it checks, what breaks it."""
    rows = [f"| `{name}` | {p.holds} | {p.breaks} |" for name, p in PROPERTIES.items()]
    return "\n".join(["| property | what it checks | what breaks it |", "|---|---|---|", *rows])
