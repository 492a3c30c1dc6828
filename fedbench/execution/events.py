"""Progress of a batch, as events: what a worker reports while it trains (``worker.py``), what the registry shows of
remote workers (``cluster.RegistryWatcher``), and what ``fedbench run`` draws its progress bars from. Every launcher
emits the same events, so the command line shows the same progress whatever trained the runs.

Events are plain, picklable data: a local worker process puts them on a queue for its parent (``local.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class RunStarted:
    """A worker began (or resumed) a run; ``rounds`` is the spec's number of rounds."""

    spec_hash: str
    rounds: int


@dataclass(frozen=True)
class RoundDone:
    """A run recorded round ``round``: its test accuracy (None on a round without evaluation) and seconds taken."""

    spec_hash: str
    round: int
    test_acc: float | None
    seconds: float


@dataclass(frozen=True)
class RunWarning:
    """One line the user should see about a run that goes on (e.g. a checkpoint not used: docs/security.md)."""

    spec_hash: str
    message: str


@dataclass(frozen=True)
class RunEnded:
    """A run stopped: its registry status (``taken over`` when another worker took its claim), the last line of its
    error if any, and its final figure (``vocab.metrics.SUMMARY_METRIC``) when a local worker knows it."""

    spec_hash: str
    status: str
    error: str | None = None
    final: float | None = None


@dataclass(frozen=True)
class Note:
    """A line about the batch rather than one run: jobs submitted, a remote worker that failed."""

    message: str


Event = RunStarted | RoundDone | RunWarning | RunEnded | Note
Emit = Callable[[Event], None]

__all__ = ["Emit", "Event", "Note", "RoundDone", "RunEnded", "RunStarted", "RunWarning"]
