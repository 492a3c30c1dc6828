"""``fedbench status``: where the runs in the registry stand, one line per recipe and scale (library:
``fedbench.report.progress``)."""

from __future__ import annotations

import time
from typing import Any

import typer
from rich.table import Table as RichTable

from fedbench.cli.common import RegistryOption, console, err_console, note_unmatched, print_json, user_errors
from fedbench.vocab.status import RunStatus

# The status columns in the order a run lives them.
COLUMNS: tuple[RunStatus, ...] = (
    RunStatus.DONE,
    RunStatus.RUNNING,
    RunStatus.PENDING,
    RunStatus.INTERRUPTED,
    RunStatus.FAILED,
    RunStatus.DIVERGED,
)


def duration(seconds: float | None) -> str:
    """``seconds`` as a person reads a remaining time: "–" (no estimate), "0 s", "42 s", "7 min", "3 h 05 min"."""
    if seconds is None:
        return "–"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes} min"
    return f"{minutes // 60} h {minutes % 60:02d} min"


# Marks a time left that costs some waiting runs at other cells' rounds (their own cell has recorded none yet).
ROUGH = "*"


def progress_table(progress: list[Any]) -> RichTable:
    """One row per recipe and scale: runs per status (a column for each status some run is in), the rounds the
    running runs trained of their planned rounds, the estimated time left (marked, with a caption counting them,
    where some waiting runs were costed at other cells' rounds). Names are never cut."""
    statuses = [status for status in COLUMNS if any(p.counts.get(status) for p in progress)]
    rough = sum(p.estimated_from_other_cells for p in progress)
    caption = f"{ROUGH} rougher: {rough} waiting run{'s' if rough != 1 else ''} costed at other cells' rounds"
    table = RichTable(title=f"{sum(p.runs for p in progress)} runs", caption=caption if rough else None)
    table.add_column("recipe", no_wrap=True)
    table.add_column("scale", no_wrap=True)
    for status in statuses:
        table.add_column(str(status), justify="right", no_wrap=True)
    table.add_column("rounds running", justify="right")
    table.add_column("time left", justify="right")
    for p in progress:
        rounds = f"{p.running_rounds_done}/{p.running_rounds}" if p.counts.get(RunStatus.RUNNING) else ""
        table.add_row(
            p.recipe or p.paper or "(none)",
            p.scale,
            *(str(p.counts.get(status, "")) for status in statuses),
            rounds,
            f"≈ {duration(p.seconds_left)}{ROUGH if p.estimated_from_other_cells else ''}" if p.waiting else "",
        )
    return table


@user_errors
def status(
    paper: str | None = typer.Option(None, "--paper", help="Only the runs of this paper."),
    recipe: str | None = typer.Option(None, "--recipe", help="Only the runs of the recipe with this name."),
    watch: bool = typer.Option(
        False, "--watch", help="Refresh in place until no selected run is pending, running or interrupted."
    ),
    interval: float = typer.Option(2.0, "--interval", min=0.1, help="Seconds between refreshes with --watch."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output (see docs/cli.md)."),
    registry: str | None = RegistryOption,
) -> None:
    """Where the runs stand, per recipe and scale: runs done, running, pending, interrupted, failed and diverged, the
    running runs' rounds, and an estimate of the time left: each waiting run's rounds at the mean time of the rounds
    its cell has recorded so far (a cell with none yet: at its model's, else the recipe's; marked *). Reads only the
    registry, so it follows local, Ray and Slurm workers alike.

    Example: `fedbench status` · `fedbench status --paper fedtrip --watch`
    """
    from fedbench.registry import Registry
    from fedbench.report.progress import recipe_progress

    store = Registry.open_existing(registry)
    if store is None:
        err_console.print(
            f"no registry at {Registry.shown_url(registry)} yet: `fedbench run` creates it", soft_wrap=True
        )
        if as_json:
            print_json([])
        return
    progress = recipe_progress(store, paper=paper, recipe=recipe)
    if not progress:  # a misspelt --paper or --recipe should not look like a registry without runs
        note_unmatched(store, registry, paper, recipe)
    if as_json:
        print_json([_json(p) for p in progress])
        return
    if not watch:
        console.print(progress_table(progress))
        return
    from rich.live import Live

    with Live(console=console, auto_refresh=False) as live:
        while True:
            progress = recipe_progress(store, paper=paper, recipe=recipe)
            live.update(progress_table(progress), refresh=True)
            if not any(p.waiting for p in progress):
                return
            time.sleep(interval)


def _json(p: Any) -> dict[str, Any]:
    return {
        "paper": p.paper,
        "recipe": p.recipe,
        "scale": p.scale,
        "counts": {str(status): count for status, count in p.counts.items()},
        "running_rounds_done": p.running_rounds_done,
        "running_rounds": p.running_rounds,
        "rounds_left": p.rounds_left,
        "workers": p.workers,
        "seconds_per_round": p.seconds_per_round,
        "seconds_left": p.seconds_left,
        "estimated_from_other_cells": p.estimated_from_other_cells,
    }
