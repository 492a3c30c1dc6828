"""``fedbench runs`` and ``fedbench show``: runs in the registry (library: ``fedbench.report.run_view``)."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.table import Table as RichTable

from fedbench.cli.common import RegistryOption, console, err_console, labels_text, print_json, user_errors


def _percent(value: Any) -> str:
    return f"{value * 100:.2f}" if isinstance(value, (int, float)) else "–"


@user_errors
def runs(
    paper: str | None = typer.Option(None, "--paper", help="Only runs of this paper."),
    status: str | None = typer.Option(None, "--status", help="pending, running, done, diverged, failed, interrupted."),
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

    if stale:
        show_stale(registry, paper, as_json)
        return
    records = run_list(registry, paper=paper, status=status)
    if as_json:
        print_json(records or [])
        return
    if records is None:  # a typo in --registry should not look like an empty registry
        err_console.print(
            f"no registry at {Registry.shown_url(registry)} yet: `fedbench run` creates it", soft_wrap=True
        )
        records = []
    table = RichTable(title=f"{len(records)} runs")
    for column in ("id", "spec_hash", "paper", "labels", "seed", "scale", "status", "rounds", "best", "final"):
        table.add_column(column)
    for r in records:
        summary = r["summary"] or {}
        scale = r["scale"] + (" (synthetic)" if r["synthetic"] else "")
        table.add_row(
            str(r["id"]),
            r["spec_hash"],
            r["paper"] or "",
            labels_text(r["labels"]),
            str(r["seed"]),
            scale,
            r["status"],
            str(r["rounds_done"]),
            _percent(summary.get("best")),
            _percent(summary.get("final")),
        )
    console.print(table)


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
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output (see docs/cli.md)."),
    registry: str | None = RegistryOption,
) -> None:
    """Show one run: spec, provenance, summary and the per-round curve.

    Example: `fedbench show 3` · `fedbench show 8c99186 --json`
    """
    from fedbench.report.run_view import curve_table, show_run

    data = show_run(registry, run_id)
    if as_json:
        print_json(data)
        return
    console.print(f"[bold]run {data['id']}[/bold] {data['spec_hash']} {data['status']}  {data['labels']}")
    console.print_json(json.dumps({k: data[k] for k in ("spec", "summary", "provenance")}))
    headers, rows = curve_table(data["curve"])  # round, every metric the run recorded, seconds
    table = RichTable(title="curve")
    for column in headers:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*row)
    console.print(table)
