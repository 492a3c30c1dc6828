"""Where a batch stands, per recipe and scale: what ``fedbench status`` shows.

Read from the registry alone (three aggregate queries, whatever the number of runs: their rows are per status or
per cell), so it is the same for local, Ray and Slurm workers. For each recipe and scale: how many runs are in each
status, the rounds the running runs have trained of their planned rounds, and an estimate of the time left.

The estimate is made per cell (a run's dataset, model and labels: the runs of a cell differ only by seed, so a round
costs them the same): for every run the batch still waits for (pending, running and interrupted; a failed run stays
failed for the batch), its rounds still to train (planned minus trained) times the mean wall time of the rounds its
cell has recorded so far at this recipe and scale. A cell with no recorded round yet is costed at the rounds of the
cells with its dataset and model, else at those of the whole recipe and scale, and its runs are counted
(``estimated_from_other_cells``): that part of the estimate is rougher, since cells of one recipe may differ in cost
many times over (an MLP's round and a CNN's). The sum is divided by the number of workers now running the recipe's
runs (at least one). It assumes the rounds to come cost what the recorded ones did and the workers stay: a guide,
not a promise. With no round recorded at the recipe and scale yet there is no estimate.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

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
    seconds_per_round: float | None = None  # mean wall time of all its recorded rounds (None: none recorded yet)
    round_seconds_left: float | None = None  # the waiting runs' rounds left, each at its cell's rate, summed
    estimated_from_other_cells: int = 0  # waiting runs costed at other cells' rounds (theirs has none recorded)

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
        if self.round_seconds_left is None:
            return None
        return self.round_seconds_left / max(1, self.workers)


def recipe_progress(registry: Registry, paper: str | None = None, recipe: str | None = None) -> list[RecipeProgress]:
    """The progress of every recipe and scale in ``registry`` (of ``paper``, of the recipe named ``recipe``),
    ordered by paper, recipe and scale."""
    progress: dict[tuple[str | None, str | None, str], RecipeProgress] = {}
    for row in registry.status_counts(paper=paper, recipe=recipe):
        key = (row.paper, row.recipe, row.scale)
        entry = progress.setdefault(key, RecipeProgress(*key))
        status = RunStatus(row.status)
        entry.counts[status] = row.runs
        if status == RunStatus.RUNNING:
            entry.running_rounds_done, entry.running_rounds, entry.workers = row.rounds_done, row.rounds, row.workers
    # recorded (seconds, rounds) per recipe and scale, per (dataset, model) in it, per cell in it
    recorded: dict[tuple[Any, ...], list[float]] = defaultdict(lambda: [0.0, 0])
    for row in registry.round_seconds(paper=paper, recipe=recipe):
        key = (row.paper, row.recipe, row.scale)
        for basis in (key, (*key, row.dataset, row.model), (*key, row.dataset, row.model, _labels(row.labels))):
            recorded[basis][0] += row.seconds
            recorded[basis][1] += row.rounds
    for key, entry in progress.items():
        if key in recorded:
            entry.seconds_per_round = recorded[key][0] / recorded[key][1]
    for row in registry.waiting_rounds(paper=paper, recipe=recipe):
        key = (row.paper, row.recipe, row.scale)
        if key not in progress:  # registered after the counts were read: on the next read
            continue
        entry = progress[key]
        entry.rounds_left += row.rounds_left
        if entry.seconds_per_round is None:  # nothing recorded at this recipe and scale: no basis for any cell
            continue
        cell = (*key, row.dataset, row.model, _labels(row.labels))
        seconds, rounds = recorded.get(cell) or recorded.get(cell[:-1]) or recorded[key]
        if cell not in recorded:
            entry.estimated_from_other_cells += row.runs
        entry.round_seconds_left = (entry.round_seconds_left or 0.0) + row.rounds_left * seconds / rounds
    return sorted(progress.values(), key=lambda p: (p.paper or "", p.recipe or "", p.scale))


def _labels(text: str | None) -> str:
    """A cell's labels as the registry returns them (JSON text) in one spelling: the same labels may be stored with
    their keys in another order (an imported run's are sorted), and are the same cell."""
    return json.dumps(json.loads(text) if text else {}, sort_keys=True)


def totals(progress: list[RecipeProgress]) -> dict[RunStatus, int]:
    """Runs per status over all of ``progress``."""
    counts: dict[RunStatus, int] = defaultdict(int)
    for entry in progress:
        for status, count in entry.counts.items():
            counts[status] += count
    return dict(counts)


__all__ = ["RecipeProgress", "recipe_progress", "totals"]
