"""``fedbench runs`` and ``fedbench show``: runs in the registry (library: ``fedbench.report.run_view``)."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table as RichTable

from fedbench.cli.common import (
    RegistryOption,
    console,
    err_console,
    labels_lines,
    labels_text,
    note_unmatched,
    print_json,
    print_listing,
    user_errors,
)
from fedbench.vocab.metrics import format_percent
from fedbench.vocab.status import RunStatus


@user_errors
def runs(
    paper: str | None = typer.Option(None, "--paper", help="Only runs of this paper."),
    status: RunStatus | None = typer.Option(None, "--status", help="Only runs in this status."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output (see docs/cli.md)."),
    stale: bool = typer.Option(
        False,
        "--stale",
        help="Only running claims whose worker is gone or hung (no heartbeat within the claim timeout): the next "
        "`fedbench run` takes them over and resumes them from their checkpoint.",
    ),
    registry: str | None = RegistryOption,
) -> None:
    """List runs in the registry.

    Example: `fedbench runs --paper quickstart --status done` · `fedbench runs --stale`
    """
    from fedbench.registry import Registry
    from fedbench.report.run_view import run_list
    from fedbench.vocab.summary import stored_summary

    if stale:
        show_stale(registry, paper, as_json)
        return
    records = run_list(registry, paper=paper, status=status)
    if records is None:  # a typo in --registry should not look like an empty registry
        err_console.print(
            f"no registry at {Registry.shown_url(registry)} yet: `fedbench run` creates it", soft_wrap=True
        )
    elif not records and paper is not None:  # nor a typo in --paper
        note_unmatched(Registry.open_existing(registry), registry, paper)
    if as_json:
        print_json(records or [])
        return
    records = records or []
    rows = []
    for r in records:
        summary = stored_summary(r["summary"])
        scale = r["scale"] + (" (synthetic)" if r["synthetic"] else "")
        rows.append(
            [
                str(r["id"]),
                r["spec_hash"],
                escape(r["paper"] or ""),
                escape(labels_lines(r["labels"])),
                str(r["seed"]),
                scale,
                r["status"],
                str(r["rounds_done"]),
                format_percent(summary["best"] if summary else None),
                format_percent(summary["final"] if summary else None),
            ]
        )
    columns = ("id", "spec_hash", "paper", "labels", "seed", "scale", "status", "rounds", "best", "final")
    # the paper and each label whole on a line (the hash may fold); a narrow terminal or a pipe gets a line per run
    print_listing(f"{len(records)} runs", columns, rows, whole=(2, 3), one_line=True)


def show_stale(registry_url: str | None, paper: str | None, as_json: bool) -> None:
    from fedbench.registry import Registry
    from fedbench.registry.claims import now

    store = Registry.open_existing(registry_url)
    rows = [(run, reason) for run, reason in (store.stale_runs() if store else []) if not paper or run.paper == paper]
    records: list[dict[str, Any]] = [
        {
            "id": run.id,
            "spec_hash": run.spec_hash,
            "paper": run.paper,
            "labels": run.labels,
            "worker": run.worker,
            "rounds": run.rounds_done,
            "heartbeat_age_seconds": None if run.heartbeat_at is None else (now() - run.heartbeat_at).total_seconds(),
            "reason": reason,
        }
        for run, reason in rows
    ]
    if as_json:
        print_json(records)
        return
    table = RichTable(title=f"{len(records)} stale runs (the next `fedbench run` of their recipe takes them over)")
    for column in ("id", "spec_hash", "paper", "labels", "worker", "rounds", "why"):
        table.add_column(column)
    for r in records:
        table.add_row(
            str(r["id"]),
            str(r["spec_hash"]),
            str(r["paper"] or ""),
            labels_text(r["labels"]),
            str(r["worker"] or ""),
            str(r["rounds"]),
            str(r["reason"]),
        )
    console.print(table)


@user_errors
def show(
    run_id: str = typer.Argument(..., help="Run id or spec_hash (prefix)."),
    spec: bool = typer.Option(False, "--spec", help="Also print the whole resolved spec (JSON)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output: everything (see docs/cli.md)."),
    registry: str | None = RegistryOption,
) -> None:
    """Show one run on one screen: who it is, the settings that differ from their defaults, what it reached, its
    curve (a sparkline and a few rounds) and where it was trained.

    Example: `fedbench show 3` · `fedbench show 8c99186 --spec` · `fedbench show 8c99186 --json`
    """
    from fedbench.report.run_view import show_run

    data = show_run(registry, run_id)
    if as_json:
        print_json(data)
        return
    print_overview(data)
    if spec:
        console.print("[bold]spec[/bold]")
        console.print_json(json.dumps(data["spec"]))


def print_overview(data: dict[str, Any]) -> None:
    """``fedbench show`` for a person: a few short blocks, each wrapped at the terminal's width."""
    from fedbench.report.run_view import (
        changed_settings,
        curve_sample,
        curve_table,
        provenance_lines,
        result_line,
        sparkline,
    )

    grid = RichTable.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")

    def block(title: str, parts: list[str]) -> None:
        if parts:
            grid.add_row(title, escape(" · ".join(parts)))

    where = f"{data['paper']}" + (f" (recipe {data['recipe']})" if data["recipe"] not in (None, data["paper"]) else "")
    scale = data["scale"] + (" (synthetic data)" if data["synthetic"] else "")
    block(
        f"run {data['id']}",
        [
            data["spec_hash"],
            data["status"],
            where,
            labels_text(data["labels"]),
            f"seed {data['seed']}",
            f"{scale} scale",
        ],
    )
    planned = data["spec"].get("rounds", "?")
    timing = [f"{data['rounds_done']} of {planned} rounds"]
    if data["wall_seconds"] is not None:
        timing.append(f"{data['wall_seconds']:.1f} s")
    if data["finished_at"]:
        timing.append(f"finished {data['finished_at'][:16].replace('T', ' ')} UTC")
    if data["diverged_round"] is not None:
        timing.append(f"diverged at round {data['diverged_round']}")
    block("trained", timing)
    if data["error"]:
        block("error", [data["error"].strip().splitlines()[-1]])
    block("settings", [f"{key}={_setting(value)}" for key, value in changed_settings(data["spec"])])
    block("test accuracy (%)", result_line(data["summary"], data["spec"].get("eval_mode", "global")))
    for number, line in enumerate(provenance_lines(data["provenance"])):
        block("provenance" if number == 0 else "", line)
    curve = data["curve"]
    accuracy = [entry["test_acc"] for entry in curve if entry.get("test_acc") is not None]
    if accuracy:
        block("curve", [f"test accuracy {sparkline(accuracy)} ({len(accuracy)} evaluations)"])
    console.print(grid)
    shown = curve_sample(curve)
    headers, rows = curve_table(shown)
    if rows:
        title = f"{len(shown)} of {len(curve)} rounds (`--json` has them all)" if len(shown) < len(curve) else None
        table = RichTable(title=title, title_justify="left")
        for column in headers:
            table.add_column(column, justify="right")
        for row in rows:
            table.add_row(*row)
        console.print(table)


def _setting(value: Any) -> str:
    return json.dumps(value) if isinstance(value, (dict, list)) else str(value)
