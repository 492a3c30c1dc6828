"""What a producer of a per-round diagnostic sees, and the shape of a producer (``fedbench.engine.diagnostics``).

A diagnostic is produced either once the round is aggregated (``Producer.after_aggregation``: a function of the ``Aggregated``
round) or during personal evaluation (``Producer.in_evaluation``: one ``Collector`` per evaluated round, fed each
client's ``Evaluated`` model and then asked for the value). Both only read: what they see is the round's own state,
and none draws from a stream training draws from. Values are JSON, rounded to ``DIGITS`` significant digits
(snapshots: float16): a diagnostic is drawn, never compared to a published number, and the rounding bounds its size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import nn

from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.context import ClientContext, ClientUpdate, ServerState
from fedbench.engine.state import RunState
from fedbench.spec import RunSpec

DIGITS = 6  # significant digits of every stored value


def rounded(value: float) -> float:
    return float(f"{value:.{DIGITS}g}")


@dataclass(frozen=True)
class Aggregated:
    """An aggregated round, as the producers of ``source`` "aggregation" and "method" read it."""

    spec: RunSpec
    state: RunState
    algorithm: Algorithm
    layers: Sequence[tuple[str, int, int]]  # the model's layers (``layer_slices``)
    server: ServerState  # w^{t+1}
    updates: Sequence[ClientUpdate]  # the round's clients' uploads, in the schedule's order
    contexts: Sequence[ClientContext]  # their contexts, same order


@dataclass(frozen=True)
class Evaluated:
    """One client's own model in personal evaluation, with the splits it was scored on."""

    client: int
    model: nn.Module  # ``Algorithm.eval_model``: the one personal evaluation scores
    test_x: torch.Tensor
    test_y: torch.Tensor
    test_batch_size: int  # the batch size evaluation takes on this test set
    val_loss: float | None  # its loss on the client's validation split; None without one


class Collector(Protocol):
    """A diagnostic of personal evaluation over one evaluated round: every client in turn, then the value."""

    def add(self, seen: Evaluated) -> None: ...

    def value(self) -> Any: ...


@dataclass(frozen=True)
class Producer:
    """How one diagnostic is computed: exactly one of ``after_aggregation`` (after aggregation; None: nothing this round) and
    ``in_evaluation`` (in personal evaluation, built from the run's state)."""

    after_aggregation: Callable[[Aggregated], Any] | None = None
    in_evaluation: Callable[[RunState], Collector] | None = None


__all__ = ["DIGITS", "Aggregated", "Collector", "Evaluated", "Producer", "rounded"]
