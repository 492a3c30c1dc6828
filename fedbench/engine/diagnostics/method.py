"""The diagnostics a method reports itself (source "method" in ``fedbench/vocab/diagnostics.py``: LG-Mix's and
APFL's ``mixing_weights``), through its hook ``Algorithm.round_diagnostics`` once the round is aggregated."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fedbench.engine.diagnostics.base import Aggregated


def reported(name: str) -> Callable[[Aggregated], Any]:
    """The producer of diagnostic ``name``: the method's hook asked for it alone; None (nothing stored) for a method
    that does not report it (``Algorithm.reported_diagnostics``; a run that asks one is refused when it starts)."""

    def produce(aggregated: Aggregated) -> Any:
        if name not in aggregated.algorithm.reported_diagnostics:
            return None
        return aggregated.algorithm.round_diagnostics(frozenset({name}), aggregated.server, aggregated.contexts).get(
            name
        )

    return produce


__all__ = ["reported"]
