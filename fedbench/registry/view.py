"""Runs as plain data for ``fedbench runs`` and ``fedbench show`` (their ``--json`` objects, docs/cli.md).

``run_list`` and ``run_details`` are what the two commands print, as tables or as JSON; a new form of
``show`` (e.g. one driven by a metric catalogue) replaces ``run_details`` without touching the CLI.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fedbench.errors import RegistryError
from fedbench.registry.api import Registry
from fedbench.registry.tables import RoundRow, RunRow

CURVE_COLUMNS = tuple(c.name for c in RoundRow.__table__.columns if c.name != "run_id")


def run_record(row: RunRow, curve: Sequence[RoundRow] | None = None) -> dict[str, Any]:
    """One run as the stable JSON object of ``runs --json``; with ``curve``, plus one entry per round."""
    data: dict[str, Any] = {
        "id": row.id,
        "spec_hash": row.spec_hash,
        "paper": row.paper,
        "recipe": row.recipe,
        "labels": row.labels,
        "status": row.status,
        "seed": row.seed,
        "scale": row.scale,
        "synthetic": row.synthetic,
        "rounds_done": row.rounds_done,
        "diverged_round": row.diverged_round,
        "error": row.error,
        "wall_seconds": row.wall_seconds,
        "summary": row.summary,
        "spec": row.spec,
        "provenance": row.provenance,
        "started_at": row.started_at.isoformat() if row.started_at else None,
        "finished_at": row.finished_at.isoformat() if row.finished_at else None,
    }
    if curve is not None:
        data["curve"] = [{k: getattr(r, k) for k in CURVE_COLUMNS} for r in curve]
    return data


def run_list(
    registry_url: str | None, paper: str | None = None, status: str | None = None
) -> list[dict[str, Any]] | None:
    """The registry's runs (optionally of one paper / in one status) as ``run_record``s; None when there is no
    registry at ``registry_url`` (it is not created)."""
    store = Registry.open_existing(registry_url)
    if store is None:
        return None
    return [run_record(r) for r in store.runs(paper=paper, status=status)]


def run_details(registry_url: str | None, run_id: str) -> dict[str, Any]:
    """One run (id or spec_hash prefix) with its per-round curve: the object of ``show --json``."""
    store = Registry.open_existing(registry_url)
    if store is None:
        raise RegistryError(f"no registry at {Registry.resolve_url(registry_url)}; run a recipe first")
    row = store.get_run(run_id)
    return run_record(row, store.curve(row.id))


__all__ = ["run_record", "run_list", "run_details", "CURVE_COLUMNS"]
