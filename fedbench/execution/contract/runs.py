"""The training runs of the contract's checks: ``Checker`` trains one method's runs (each from its own global random
state, in a folder of checkpoints, on the CPU), each changed in one way (reversed client order, float64, stopped
after a round and resumed, packed, a prepared set-up) between the engine's ``set_up`` and ``train``."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from fedbench.algorithms.context import ServerState
from fedbench.data.federated import ArraysCache
from fedbench.data.store import TensorData
from fedbench.engine.loop import RoundRecord, RunResult, Training, set_up, train
from fedbench.engine.options import EngineOptions
from fedbench.errors import FedbenchError
from fedbench.execution.contract.setting import _variant
from fedbench.spec import RunSpec


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
            on_round=_stop_after(stop_after) if stop_after is not None else None,
        ).with_settings(packing=packing)
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
