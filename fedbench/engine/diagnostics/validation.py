"""The ``val_loss`` diagnostic (``fedbench/vocab/diagnostics.py``): each client's own model on its validation split,
from the losses personal evaluation computes anyway (LG-Mix Fig. 4's validation-loss panel)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from fedbench.engine.diagnostics.base import Evaluated, rounded
from fedbench.engine.state import RunState
from fedbench.vocab.diagnostics import ValLossValue


def val_loss(losses: Sequence[float]) -> ValLossValue:
    """The ``val_loss`` diagnostic from every client's validation loss (client order)."""
    return {
        "clients": list(range(len(losses))),
        "loss": [rounded(v) for v in losses],
        "mean": rounded(sum(losses) / len(losses)) if losses else None,
    }


class ValLosses:
    """``val_loss`` over one evaluated round: every client's loss on its validation split (the catalogue's need
    ``validation_split`` guarantees one)."""

    def __init__(self, run: RunState):
        self.losses: list[float] = []

    def add(self, seen: Evaluated) -> None:
        self.losses.append(cast(float, seen.val_loss))

    def value(self) -> ValLossValue:
        return val_loss(self.losses)


__all__ = ["ValLosses", "val_loss"]
