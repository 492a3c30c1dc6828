"""The engine contract, checked on one method: what the engine promises every method, and every method must keep so
that the promise holds, run on a small setting (a few rounds of a few clients on digits, on the CPU, seconds per
property). ``fedbench check-method NAME`` runs it on a method of the user's own (a plug-in); the built-ins pass it
(tests/engine/test_engine_contract.py runs it on every one).

The properties (``PROPERTIES``, in the order they run):

- ``evaluation``: evaluation leaves training unchanged. The run evaluated every round (the global model and every
  client's own) and the run evaluated after its last round only train the same, bit for bit: the same training
  losses, last-round figures, global weights and client states.
- ``keyed-streams``: a client's training randomness comes from its own keyed streams (``fedbench.seeding``), so
  results depend neither on the order the round's clients train in nor on what the process ran before (another
  worker's history): the run with every round's clients trained last to first, after the process's global random
  generators were seeded otherwise, gives the same results bit for bit.
- ``resume``: a run stopped after round R − 1 (logged and checkpointed, as a kill between rounds leaves it) and
  resumed from its checkpoint gives the uninterrupted run's curve, global weights and client states, bit for bit.
- ``packed``: a method that declares ``packed_step`` trains the same on the packed path (``engine/packed.py``) as on
  the sequential one: in float64, to within ``F64_ATOL`` (the two sum in another order).
- ``fedavg-setting``: a method that declares a setting in which it is FedAvg trains as FedAvg does in it, the same
  curve: in the runs' own dtype (float32) over at least ``FEDAVG_SETTING_ROUNDS`` rounds, every parameter and buffer
  after every round and the curve's training losses and global figures, bit for bit. A difference only at rounding
  level (``ROUNDING_ULPS``, with float64 runs agreeing to within ``F64_ATOL``) fails as "equal up to rounding": in
  float32 the rounding compounds, round after round, into another curve.
- ``empty-client``: with every client training every round and one of them holding no training sample, the run
  finishes and its losses, global weights and client states stay finite.
- ``diagnostics``: recording every diagnostic the method can have, every round (``fedbench/vocab/diagnostics.py``;
  those of source "method" only if it reports them), leaves training unchanged: the curve, global weights and
  client states of the run without diagnostics, bit for bit; every round records them all; and a run stopped after
  round R − 1 and resumed records the same diagnostics as the uninterrupted one.

**Declaring a FedAvg setting.** A method states, when it registers, the parameters (and, where needed, the run
settings) with which it is FedAvg: ``register_algorithm(name, fedavg_setting={"algorithm_params": {...}, "setup":
{...}})``, either part optional; e.g. FedProx's ``{"algorithm_params": {"mu": 0.0}}`` (Eq. 2 without its term),
FedNova's ``{"setup": {"local_steps": 2}}`` (equal step counts: every a_i equal). ``fedavg_setting_spec`` applies it.

Every result says what was compared; a failure says what differed first (the round and figure, or the tensor, and
by how much) and how to fix it. Bit for bit means in the default dtype (float32), on this machine, in one process.
"""

from __future__ import annotations

import contextlib
import math
import random
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from pydantic import ValidationError

from fedbench.algorithms import ALGORITHMS, validate_algorithm_params
from fedbench.algorithms.context import ServerState
from fedbench.data.federated import ArraysCache
from fedbench.data.store import TensorData
from fedbench.engine.diagnostics import diagnostics_of
from fedbench.engine.loop import RoundRecord, RunResult, Training, set_up, train
from fedbench.engine.options import EngineOptions
from fedbench.errors import ConfigError, FedbenchError, field_error
from fedbench.spec import RunSpec
from fedbench.vocab.status import RunStatus

# Two computations that agree in exact arithmetic but not operation for operation (another summation order or
# SIMD kernel, an algebraically equal update rule, a few SGD steps that amplify a rounding difference) are
# compared in float64 to within F64_ATOL, never in float32 with a tolerance that happens to pass on one CPU. Where
# it comes from: float64 rounds by at most 1.1e-16 (relative) per operation, and the short trainings of these checks
# amplify a rounding difference by at most ~1e4 (in float32 the same runs differ by up to 4e-4 ≈ 1e4 × float32's
# 6e-8 with AVX-512 kernels), so two float64 paths agree to ~1e-12 at worst; measured with PyTorch's default, AVX2
# and AVX-512 kernels, they agree to 2e-15. A genuine difference is far larger: LG-Mix with λ = 1e-7 instead of 0
# already moves the weights by 4e-8.
F64_ATOL = 1e-9

# A declared FedAvg setting is checked in the runs' own dtype (float32, as real runs train), bit for bit, over at
# least FEDAVG_SETTING_ROUNDS rounds. Why 8: a rule equal to FedAvg's only up to rounding differs in the weights from
# round 1 on (measured: a FedAvgM written old − lr·velocity, SlowMo at β = 0, FedNova with equal step counts, a loss
# on logits·3/3), and its curve leaves FedAvg's by round 2–6 (the loss 2, FedAvgM 4, SlowMo 4, FedNova 6; one such
# plug-in was reported leaving at round 7): 8 rounds show both. They also let every client of the 3-of-4 schedule return at least
# three times (with 3 rounds one trains once), so a term that needs a client's previous round (FedTrip's history,
# MOON's previous model) has run. Cost: two runs of 8 rounds on the tiny MLP, about a second.
FEDAVG_SETTING_ROUNDS = 8

# Two runs that differ there differ "only by rounding" when, in the first round that differs (every earlier round
# equal, so both trained it from the same model), no parameter or buffer differs by more than ROUNDING_ULPS ulps of
# its largest entry (eps of the dtype × the largest |entry| before or after the round), and the same two runs in
# float64 agree to within F64_ATOL. Why 4: the same maths written another way (old − lr·((old − w̄)/lr) for w̄)
# rounds each of its few operations by at most half an ulp of magnitudes up to twice the largest entry, so a rule of
# up to 4 operations stays within 4 ulps; measured, the rules above stay within 0.8. The float64 runs tell apart a
# genuine change too small for float32 (a relative 1e-7 term moves the weights by about one float32 ulp).
ROUNDING_ULPS = 4.0

# The setting the checks train (``contract_spec``): 3 rounds of 3 of 4 clients (so clients return with their state
# and others skip a round) on digits with a tiny MLP; unequal client sizes (Dirichlet 0.5), momentum, client test
# and validation splits, and both global and personal evaluation.
SETUP: dict[str, Any] = {
    "dataset": "digits",
    "model": "digits_mlp",
    "model_params": {"hidden": 16},
    "partition": "dirichlet",
    "partition_params": {"alpha": 0.5, "min_size": 20},
    "num_clients": 4,
    "clients_per_round": 3,
    "rounds": 3,
    "batch_size": 32,
    "optimizer": {"lr": 0.05, "momentum": 0.5},
    "eval_mode": "both",
    "client_test_fraction": 0.2,
    "client_val_fraction": 0.1,
}

# The figures of a round record the checks compare (not its wall time, nor its diagnostics: the ``diagnostics``
# property compares those).
FIGURES = tuple(f.name for f in fields(RoundRecord) if f.name not in ("round", "wall_seconds", "diagnostics"))

Status = Literal["pass", "fail", "skip"]


@dataclass(frozen=True)
class PropertyResult:
    """One property checked: ``detail`` says what was compared (pass), what differed and how to fix it (fail), or
    why it does not apply to this method (skip)."""

    name: str  # a key of PROPERTIES
    title: str
    status: Status
    detail: str
    seconds: float

    @property
    def failed(self) -> bool:
        return self.status == "fail"

    def as_dict(self) -> dict[str, Any]:
        return {
            "property": self.name,
            "title": self.title,
            "status": self.status,
            "detail": self.detail,
            "seconds": round(self.seconds, 3),
        }


def _merge(base: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes``, nested tables merged key by key (``optimizer.momentum`` keeps ``optimizer.lr``)."""
    merged = dict(base)
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _spec(fields_: Mapping[str, Any]) -> RunSpec:
    try:
        spec = RunSpec(**fields_)
    except ValidationError as exc:
        raise ConfigError(f"check setting: {field_error(exc).line()}") from None
    validate_algorithm_params(spec.algorithm, spec.algorithm_params)  # an unknown method or a bad value: one line
    return spec


def contract_spec(algorithm: str, algorithm_params: Mapping[str, Any] | None = None, **setup: Any) -> RunSpec:
    """The spec the checks train: ``SETUP`` with ``setup`` merged in (nested tables key by key). A model other than
    SETUP's starts from no ``model_params``; ``num_clients`` without ``clients_per_round`` trains all but one client
    per round. ``ConfigError`` (one line) for a bad value."""
    base = dict(SETUP)
    if setup.get("model", base["model"]) != base["model"]:
        base["model_params"] = {}
    if "num_clients" in setup and "clients_per_round" not in setup:
        base["clients_per_round"] = max(1, int(setup["num_clients"]) - 1)
    merged = _merge(base, setup)
    return _spec({**merged, "algorithm": algorithm, "algorithm_params": dict(algorithm_params or {})})


def _variant(spec: RunSpec, **changes: Any) -> RunSpec:
    return _spec(_merge(spec.model_dump(), changes))


def fedavg_setting_spec(spec: RunSpec, setting: Mapping[str, Any]) -> RunSpec:
    """``spec`` in a method's declared FedAvg setting (``{"algorithm_params": {...}, "setup": {...}}``)."""
    unknown = set(setting) - {"algorithm_params", "setup"}
    if unknown:
        raise ConfigError(
            f"{spec.algorithm}: fedavg_setting has key(s) {', '.join(sorted(unknown))}; "
            "expected algorithm_params and/or setup"
        )
    return _variant(spec, **dict(setting.get("setup", {})), algorithm_params=dict(setting.get("algorithm_params", {})))


# ------------------------------------------------------------------------------------------------ training runs
class _Sink:
    """The rounds a run logged, as a registry keeps them (a resumed run redoes the rounds after its checkpoint)."""

    def __init__(self) -> None:
        self.records: list[RoundRecord] = []

    def log_round(self, record: RoundRecord) -> None:
        self.records = [r for r in self.records if r.round < record.round] + [record]

    def truncate(self, after_round: int) -> None:
        self.records = [r for r in self.records if r.round <= after_round]


class _Stop(Exception):
    """Stops a run after a round, once it is logged and checkpointed, as a kill between two rounds would."""


def _stop_after(last_round: int) -> Callable[[RoundRecord], None]:
    def on_round(record: RoundRecord) -> None:
        if record.round == last_round:
            raise _Stop

    return on_round


@dataclass
class _Run:
    """A finished (or stopped) run: its result (None when stopped), the rounds logged and its final state; when
    asked for (``Checker.train(history=True)``), the global model at w^0 and after every round, and where each named
    parameter lies in the flat vector."""

    result: RunResult | None
    records: list[RoundRecord]
    server: ServerState
    client_states: dict[int, dict[str, Any]]
    history: list[ServerState] = field(default_factory=list)  # [w^0, w^1, …]: params and buffers, copied
    parameters: list[tuple[str, int, int]] = field(default_factory=list)  # (name, start, stop) over the flat vector


def _snapshot(server: ServerState) -> ServerState:
    return ServerState(params=server.params.clone(), buffers={k: v.clone() for k, v in server.buffers.items()})


@contextlib.contextmanager
def _global_random_state(seed: int) -> Iterator[None]:
    """torch's, numpy's and Python's global random generators seeded with ``seed`` for the block, restored after."""
    numpy_state, python_state = np.random.get_state(), random.getstate()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        np.random.seed(seed)
        random.seed(seed)
        try:
            yield
        finally:
            np.random.set_state(numpy_state)
            random.setstate(python_state)


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype | None) -> Iterator[None]:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype or previous)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def _in_float64(tensors: TensorData) -> TensorData:
    """The data's floating tensors in float64 (the values as loaded: float32 values are exact in float64)."""

    def convert(value: Any) -> Any:
        return value.to(torch.float64) if torch.is_tensor(value) and value.is_floating_point() else value

    return replace(
        tensors,
        train_x=convert(tensors.train_x),
        train_y=convert(tensors.train_y),
        test_x=convert(tensors.test_x),
        test_y=convert(tensors.test_y),
        fill=convert(tensors.fill),
    )


def _parameter_slices(model: torch.nn.Module) -> list[tuple[str, int, int]]:
    """(name, start, stop) of each of the model's parameters over the flat weight vector (``param_views``' order)."""
    slices, offset = [], 0
    for name, parameter in model.named_parameters():
        slices.append((name, offset, offset + parameter.numel()))
        offset += parameter.numel()
    return slices


class Checker:
    """The runs of one method's checks: each trains in ``folder`` (its checkpoint there) from its own global random
    state; the reference run (``spec`` evaluated every round) is trained once, for every check that compares with
    it. ``options``: where the data lie and whether they are verified (the rest is the checks' own)."""

    def __init__(self, spec: RunSpec, folder: Path, options: EngineOptions | None = None):
        self.spec = _variant(spec, eval_every=1)
        self.folder = folder
        self.options = replace(options or EngineOptions(), device="cpu", arrays=ArraysCache())
        self._reference: _Run | None = None
        self._paths = 0

    def path(self) -> Path:
        self._paths += 1
        return self.folder / f"run-{self._paths}.pt"

    def preflight(self) -> None:
        """Set the run up once: an unknown model or data set, a model the method cannot take or missing data is the
        caller's error (a ``FedbenchError``, raised); anything else the method raises is left to the checks."""
        try:
            with _global_random_state(0):
                set_up(self.spec, self.options)
        except FedbenchError:
            raise
        except Exception:  # the method's own error: every check that trains reports it, with where it was raised
            return

    def train(
        self,
        spec: RunSpec,
        *,
        float64: bool = False,
        reversed_order: bool = False,
        random_seed: int = 0,
        stop_after: int | None = None,
        packing: str = "sequential",
        path: Path | None = None,
        sink: _Sink | None = None,
        prepare: Callable[[Training], None] | None = None,
        history: bool = False,
    ) -> _Run:
        """Train ``spec`` (``prepare`` changes the set-up run before round 1) and return what it left (with the global
        model of every round when ``history``)."""
        sink = sink if sink is not None else _Sink()
        options = replace(
            self.options,
            checkpoint_path=path or self.path(),
            packing=packing,
            on_round=_stop_after(stop_after) if stop_after is not None else None,
        )
        with _global_random_state(random_seed), _default_dtype(torch.float64 if float64 else None):
            training = set_up(spec, options)
            if float64:
                training.state.data.tensors = _in_float64(training.state.data.tensors)
            training.reversed_order = reversed_order
            if prepare is not None:
                prepare(training)
            snapshots = [_snapshot(training.state.server)] if history else []
            if history:
                stop = training.options.on_round

                def on_round(record: RoundRecord) -> None:
                    snapshots.append(_snapshot(training.state.server))
                    if stop is not None:
                        stop(record)

                training.options = replace(training.options, on_round=on_round)
            result: RunResult | None
            try:
                result = train(training, sink)
            except _Stop:
                result = None
        states = training.state.client_states
        return _Run(
            result=result,
            records=list(sink.records),
            server=training.state.server,
            client_states={client: states.peek(client) for client in range(spec.num_clients)},
            history=snapshots,
            parameters=_parameter_slices(training.state.model) if history else [],
        )

    def reference(self) -> _Run:
        if self._reference is None:
            self._reference = self.train(self.spec)
        return self._reference


# ------------------------------------------------------------------------------------------------ comparisons
def _difference(a: Any, b: Any, where: str, atol: float = 0.0) -> str | None:
    """Where nested values ``a`` and ``b`` (dicts, lists, tensors, numbers) first differ, in words; None where they
    are equal: tensors bit for bit (floating ones to within ``atol`` when it is not 0), numbers likewise."""
    if torch.is_tensor(a) or torch.is_tensor(b):
        if not (torch.is_tensor(a) and torch.is_tensor(b)):
            return f"{where} is a tensor in one run and {type(b if torch.is_tensor(a) else a).__name__} in the other"
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"{where} is {tuple(a.shape)} {a.dtype} in one run and {tuple(b.shape)} {b.dtype} in the other"
        if torch.equal(a, b):
            return None
        worst = 0.0
        if a.is_floating_point():
            both_nan = a.isnan() & b.isnan()
            gap = torch.where(both_nan, 0.0, (a.double() - b.double()).abs()).nan_to_num(nan=math.inf)
            worst = float(gap.max())
            if worst <= atol:  # NaN where both have NaN, a signed zero: equal values
                return None
        if a.numel() == 1:
            change = f" (Δ {worst:.3g})" if a.is_floating_point() else ""
            return f"{where} is {a.item()!r} in one run and {b.item()!r} in the other{change}"
        if not a.is_floating_point():
            return f"{where}: {int((a != b).sum())} of {a.numel()} entries differ"
        return f"{where} differs by up to {worst:.3g} (max |Δ|, over {int((gap > atol).sum())} of {a.numel()} entries)"
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if set(a) != set(b):
            return f"{where} has keys {sorted(map(str, a))} in one run and {sorted(map(str, b))} in the other"
        for key in sorted(a, key=str):
            found = _difference(a[key], b[key], f"{where}[{key!r}]", atol)
            if found:
                return found
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return f"{where} has {len(a)} entries in one run and {len(b)} in the other"
        for index, (x, y) in enumerate(zip(a, b)):
            found = _difference(x, y, f"{where}[{index}]", atol)
            if found:
                return found
        return None
    if isinstance(a, float) and isinstance(b, float):
        if a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= atol:
            return None
        return f"{where} is {a!r} in one run and {b!r} in the other (Δ {abs(a - b):.3g})"
    if a != b:
        return f"{where} is {a!r} in one run and {b!r} in the other"
    return None


def _curve_difference(
    a: Sequence[RoundRecord], b: Sequence[RoundRecord], figures: Sequence[str] = FIGURES, atol: float = 0.0
) -> str | None:
    """The first round and figure (of ``figures``) in which two curves differ."""
    if [r.round for r in a] != [r.round for r in b]:
        return f"the rounds logged are {[r.round for r in a]} in one run and {[r.round for r in b]} in the other"
    for x, y in zip(a, b):
        for name in figures:
            found = _difference(getattr(x, name), getattr(y, name), f"round {x.round}'s {name}", atol)
            if found:
                return found
    return None


def _state_difference(a: _Run, b: _Run, atol: float = 0.0) -> str | None:
    """The first tensor of the final server state or client states in which two runs differ."""
    found = (
        _difference(a.server.params, b.server.params, "the global weights", atol)
        or _difference(a.server.buffers, b.server.buffers, "the global buffers", atol)
        or _difference(a.server.state, b.server.state, "server.state", atol)
    )
    if found:
        return found
    for client in sorted(set(a.client_states) | set(b.client_states)):
        found = _difference(
            a.client_states.get(client, {}), b.client_states.get(client, {}), f"client {client}'s ctx.state", atol
        )
        if found:
            return found
    return None


def _unfinished(run: _Run) -> str | None:
    if run.result is None:
        return "the run stopped before its last round"
    if run.result.status != RunStatus.DONE:
        return f"the run {run.result.message or run.result.status}"
    return None


def _run_difference(a: _Run, b: _Run, atol: float = 0.0) -> str | None:
    return (
        _unfinished(a)
        or _unfinished(b)
        or _curve_difference(a.records, b.records, atol=atol)
        or _state_difference(a, b, atol)
    )


# ------------------------------------------------------------------------------------------------ the properties
class _Broken(Exception):
    """The property does not hold: what differed and how to fix it."""


class _Skip(Exception):
    """The property does not apply to this method or setting: why."""


def setting_text(setting: Mapping[str, Any]) -> str:
    """A declared FedAvg setting in words: ``mu=0.0``, ``local_steps=2``; ``as it is`` for an empty one."""
    parts = [f"{k}={v!r}" for part in ("algorithm_params", "setup") for k, v in setting.get(part, {}).items()]
    return ", ".join(parts) or "as it is"


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


# The figures of the curve a method must share with FedAvg in its FedAvg setting (its personal figures are its own).
FEDAVG_FIGURES = ("train_loss", "test_acc", "test_loss")


@dataclass(frozen=True)
class _Inexact:
    """Where two runs of the same length first differ, in their own dtype: the round, the first parameter, buffer or
    figure that differs there (in words) and the round's largest difference in ulps (``_ulps``)."""

    round: int
    difference: str
    ulps: float

    @property
    def rounding(self) -> bool:
        return self.ulps <= ROUNDING_ULPS


def _ulps(value: Any, reference: Any, before: Any, eps: float) -> float:
    """max |value − reference| in units of ``eps`` times the largest magnitude the round computed on (the largest
    |entry| of ``before``, the tensor at the round's start, and of ``reference``): the norm-wise size of a rounding
    error. Infinite where no rounding explains a difference: an integer tensor (a count), unlike shapes, NaN, or a
    value that was 0 throughout."""
    if torch.is_tensor(value) and torch.is_tensor(reference) and torch.is_tensor(before):
        if not reference.is_floating_point() or value.shape != reference.shape or value.dtype != reference.dtype:
            return math.inf
        gap = float((value.double() - reference.double()).abs().max())
        scale = max(float(before.abs().max()), float(reference.abs().max())) if before.shape == value.shape else 0.0
    elif isinstance(value, float) and isinstance(reference, float):  # a figure of the curve
        gap, scale = abs(value - reference), max(abs(value), abs(reference))
    else:
        return math.inf
    return gap / (eps * scale) if scale > 0 and math.isfinite(gap) else math.inf


def _first_inexact(a: _Run, b: _Run, figures: Sequence[str] = FEDAVG_FIGURES) -> _Inexact | None:
    """The first round after which ``a`` (the method) and ``b`` (FedAvg), both trained with ``history``, differ in a
    parameter, a buffer or a figure, bit for bit; None where every round is equal. Every earlier round being equal,
    both trained that round from the same model: what differs is that round's own arithmetic."""
    eps = torch.finfo(b.server.params.dtype).eps
    for index, (x, y, start) in enumerate(zip(a.history[1:], b.history[1:], b.history), 1):
        pairs: list[tuple[str, Any, Any, Any]] = [
            (f"the global weights' {name}", x.params[lo:hi], y.params[lo:hi], start.params[lo:hi])
            for name, lo, hi in b.parameters
        ]
        if set(x.buffers) != set(y.buffers):
            pairs.append(("the global buffers", x.buffers, y.buffers, None))
        else:
            pairs += [
                (f"the global buffers[{k!r}]", x.buffers[k], y.buffers[k], start.buffers[k]) for k in sorted(y.buffers)
            ]
        pairs += [
            (f"round {index}'s {name}", getattr(a.records[index - 1], name), getattr(b.records[index - 1], name), None)
            for name in figures
        ]
        differing = [(found, _ulps(u, v, w, eps)) for where, u, v, w in pairs if (found := _difference(u, v, where))]
        if differing:
            return _Inexact(index, differing[0][0], max(ulps for _, ulps in differing))
    return None


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
        fedavg_spec = _spec(
            {**spec.model_dump(), "algorithm": "fedavg", "algorithm_params": {"regularizers": regularizers}}
        )
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


def _not_finite(value: Any, where: str) -> str | None:
    if torch.is_tensor(value):
        if value.is_floating_point() and not bool(torch.isfinite(value).all()):
            return f"{where} holds NaN or inf"
        return None
    if isinstance(value, Mapping):
        return next((f for k in sorted(value, key=str) if (f := _not_finite(value[k], f"{where}[{k!r}]"))), None)
    if isinstance(value, (list, tuple)):
        return next((f for i, v in enumerate(value) if (f := _not_finite(v, f"{where}[{i}]"))), None)
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where} is {value}"
    return None


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
    title: str
    check: Callable[[Checker], str]  # returns what was compared; raises _Broken or _Skip


PROPERTIES: dict[str, Property] = {
    "evaluation": Property("evaluation leaves training unchanged", _evaluation),
    "keyed-streams": Property("results independent of client order and of the process", _keyed_streams),
    "resume": Property("kill and resume gives the same curve", _resume),
    "packed": Property("packed == sequential", _packed),
    "fedavg-setting": Property("its declared FedAvg setting is FedAvg", _fedavg_setting),
    "empty-client": Property("a client with no training sample", _empty_client),
    "diagnostics": Property("diagnostics leave training unchanged", _diagnostics),
}


def _raised(exc: BaseException) -> str:
    """The exception and the innermost place outside torch that raised it, on one line."""
    torch_folder = str(Path(torch.__file__).parent)
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith(torch_folder)]
    where = f" (at {frames[-1].filename}:{frames[-1].lineno}, in {frames[-1].name})" if frames else ""
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}{where}"


def check_method(
    spec: RunSpec,
    properties: Sequence[str] | None = None,
    *,
    data_root: str | Path | None = None,
    verify: bool = True,
    threads: int = 1,
    on_result: Callable[[PropertyResult], None] | None = None,
) -> list[PropertyResult]:
    """Check the engine contract on ``spec``'s method (``contract_spec`` builds a small one): each of ``properties``
    (default all, in ``PROPERTIES``' order) passes, fails or does not apply; ``on_result`` hears of each as it is
    done. The runs train on the CPU with ``threads`` threads (restored after: one is fastest for these tiny models), in
    a temporary folder removed after. Raises ``FedbenchError`` for bad input (an
    unknown property, a setting the method or model cannot take, missing data); anything the method raises while
    training fails the property it broke, naming where it was raised."""
    names = list(PROPERTIES) if properties is None else list(properties)
    unknown = [name for name in names if name not in PROPERTIES]
    if unknown:
        raise ConfigError(f"unknown property {unknown[0]!r}; expected one of {', '.join(PROPERTIES)}")
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with tempfile.TemporaryDirectory(prefix="fedbench-check-") as folder:
            checker = Checker(spec, Path(folder), EngineOptions(data_root=data_root, verify=verify))
            checker.preflight()
            return [_check(checker, name, on_result) for name in names]
    finally:
        torch.set_num_threads(previous_threads)


def _check(checker: Checker, name: str, on_result: Callable[[PropertyResult], None] | None) -> PropertyResult:
    began = time.perf_counter()
    status: Status
    try:
        status, detail = "pass", PROPERTIES[name].check(checker)
    except _Skip as exc:
        status, detail = "skip", str(exc)
    except _Broken as exc:
        status, detail = "fail", str(exc)
    except Exception as exc:  # the method's own error, while training for this property
        status, detail = "fail", f"training raised {_raised(exc)}"
    result = PropertyResult(name, PROPERTIES[name].title, status, detail, time.perf_counter() - began)
    if on_result is not None:
        on_result(result)
    return result


__all__ = [
    "F64_ATOL",
    "FEDAVG_SETTING_ROUNDS",
    "PROPERTIES",
    "ROUNDING_ULPS",
    "SETUP",
    "Checker",
    "PropertyResult",
    "check_method",
    "contract_spec",
    "fedavg_setting_spec",
]
