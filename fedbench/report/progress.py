"""Where a batch stands, per recipe and scale: what ``fedbench status`` shows.

Read from the registry alone (two aggregate queries, whatever the number of runs), so it is the same for local,
Ray and Slurm workers. For each recipe and scale: how many runs are in each status, the rounds the running runs
have trained of their planned rounds, and an estimate of the time left.

The estimate: the rounds still to train (planned minus trained, over the runs a batch still waits for: pending,
running and interrupted; a failed run stays failed for the batch) times the mean wall time of the rounds this recipe
and scale have recorded so far, divided by the number of workers now running its runs (at least one). It assumes
the rounds to come cost what the recorded ones did and the workers stay: a guide, not a promise. With no round
recorded yet there is no estimate.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from fedbench.registry import Registry
from fedbench.vocab.status import WAITING, RunStatus


@dataclass
class RecipeProgress:
    paper: str | None
    recipe: str | None
    scale: str
    counts: dict[RunStatus, int] = field(default_factory=dict)  # runs per status (statuses with none left out)
    running_rounds_done: int = 0  # rounds trained by the running runs ...
    running_rounds: int = 0  # ... of the rounds they plan
    rounds_left: int = 0  # rounds still to train by the runs the batch waits for
    workers: int = 0  # distinct workers running this recipe's runs now
    seconds_per_round: float | None = None  # mean wall time of the recorded rounds (None: none recorded yet)

    @property
    def runs(self) -> int:
        return sum(self.counts.values())

    @property
    def waiting(self) -> int:
        """Runs a batch still waits for (pending, running, interrupted)."""
        return sum(count for status, count in self.counts.items() if status in WAITING)

    @property
    def seconds_left(self) -> float | None:
        """The module docstring's estimate; 0 when nothing is left, None when there is no basis for one."""
        if self.rounds_left == 0:
            return 0.0
        if self.seconds_per_round is None:
            return None
        return self.rounds_left * self.seconds_per_round / max(1, self.workers)


def recipe_progress(registry: Registry, paper: str | None = None, recipe: str | None = None) -> list[RecipeProgress]:
    """The progress of every recipe and scale in ``registry`` (of ``paper``, of the recipe named ``recipe``),
    ordered by paper, recipe and scale."""
    progress: dict[tuple[str | None, str | None, str], RecipeProgress] = {}
    for row in registry.status_counts(paper=paper, recipe=recipe):
        key = (row.paper, row.recipe, row.scale)
        entry = progress.setdefault(key, RecipeProgress(*key))
        status = RunStatus(row.status)
        entry.counts[status] = row.runs
        if status in WAITING:
            entry.rounds_left += max(0, row.rounds - row.rounds_done)
        if status == RunStatus.RUNNING:
            entry.running_rounds_done, entry.running_rounds, entry.workers = row.rounds_done, row.rounds, row.workers
    for row in registry.round_seconds(paper=paper, recipe=recipe):
        key = (row.paper, row.recipe, row.scale)
        if key in progress and row.rounds:
            progress[key].seconds_per_round = row.seconds / row.rounds
    return sorted(progress.values(), key=lambda p: (p.paper or "", p.recipe or "", p.scale))


def totals(progress: list[RecipeProgress]) -> dict[RunStatus, int]:
    """Runs per status over all of ``progress``."""
    counts: dict[RunStatus, int] = defaultdict(int)
    for entry in progress:
        for status, count in entry.counts.items():
            counts[status] += count
    return dict(counts)


__all__ = ["RecipeProgress", "recipe_progress", "totals"]
