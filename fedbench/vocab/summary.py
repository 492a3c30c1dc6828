"""The layout of a finished run's stored summary (``runs.summary``, a JSON object), without numpy or torch.

``fedbench.curves.summarize`` computes it from the run's curve when the run finishes; ``fedbench runs``,
``fedbench show`` and a report's run drill-down read it back through ``stored_summary``. A report recomputes
each figure from the same curve and must find the same value (tests/integration/test_stored_summaries.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict


class RunSummary(TypedDict):
    """A finished run's stored summary (``runs.summary``, a JSON object): what ``summarize`` computes and what
    ``fedbench runs``, ``fedbench show`` and the run pages of a report print."""

    best: float | None  # a fraction, like the curve
    best_round: int | None
    final: float | None
    last5_mean: float | None
    last10_mean: float | None
    rounds_to_target: dict[str, int | None]  # keyed by the recipe's targets in % ("80"), None: not reached
    evaluated_rounds: int


def stored_summary(stored: Mapping[str, Any] | None) -> RunSummary | None:
    """A run's stored summary as a ``RunSummary``; None for a run without one (not finished). A key a summary of an
    older registry lacks reads as None (``rounds_to_target``: none; ``evaluated_rounds``: 0)."""
    if not stored:
        return None
    return RunSummary(
        best=stored.get("best"),
        best_round=stored.get("best_round"),
        final=stored.get("final"),
        last5_mean=stored.get("last5_mean"),
        last10_mean=stored.get("last10_mean"),
        rounds_to_target=dict(stored.get("rounds_to_target") or {}),
        evaluated_rounds=int(stored.get("evaluated_rounds") or 0),
    )
