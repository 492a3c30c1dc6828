"""One run as data, for ``fedbench runs --json`` and ``fedbench show``: the run row, and its per-round curve
with every stored field and every catalogue metric (docs/cli.md lists the fields; a test checks the list)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fedbench.errors import RegistryError
from fedbench.registry import Registry
from fedbench.vocab.metrics import METRICS, ROUND_FIELDS, metric_value

# A curve entry: every stored round field (storage order), then the metrics read from per-client values
# (e.g. personal_auc, the mean over clients of personal_metrics["auc"]), so every metric a recipe may name
# has its own key.
DERIVED_METRICS: tuple[str, ...] = tuple(name for name, m in METRICS.items() if m.column is None)
CURVE_FIELDS: tuple[str, ...] = (*ROUND_FIELDS, *DERIVED_METRICS)


def round_json(row: Any) -> dict[str, Any]:
    """One stored round (a ``rounds`` row) as a JSON object with the keys ``CURVE_FIELDS``."""
    data = {name: getattr(row, name) for name in ROUND_FIELDS}
    data.update({name: metric_value(row, name) for name in DERIVED_METRICS})
    return data


def run_json(row: Any, curve: Sequence[Any] | None = None) -> dict[str, Any]:
    """A run (a ``runs`` row) as ``fedbench runs --json`` prints it; with ``curve`` (its ``rounds`` rows) as
    ``fedbench show --json`` prints it."""
    data = {
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
        data["curve"] = [round_json(r) for r in curve]
    return data


def run_details(registry: Any, run: str | int) -> dict[str, Any]:
    """What ``fedbench show RUN --json`` prints: the run (id or spec_hash prefix) with its curve.
    Raises the registry's error for an unknown run."""
    row = registry.get_run(run)
    return run_json(row, registry.curve(row.id))


def run_list(
    registry_url: str | None, paper: str | None = None, status: str | None = None
) -> list[dict[str, Any]] | None:
    """What ``fedbench runs`` lists: the registry's runs (of one paper / in one status) as ``run_json`` objects;
    None when there is no registry at ``registry_url`` (it is not created)."""
    store = Registry.open_existing(registry_url)
    if store is None:
        return None
    return [run_json(row) for row in store.runs(paper=paper, status=status)]


def show_run(registry_url: str | None, run: str) -> dict[str, Any]:
    """What ``fedbench show RUN`` prints: ``run_details`` of the registry at ``registry_url`` (not created)."""
    store = Registry.open_existing(registry_url)
    if store is None:
        raise RegistryError(f"no registry at {Registry.shown_url(registry_url)}; run a recipe first")
    return run_details(store, run)


def curve_table(curve: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The terminal table of ``fedbench show``: round, every catalogue metric the run recorded (a value in at
    least one round; values as stored: fractions, not %) and seconds per round."""
    names = [name for name in METRICS if any(entry.get(name) is not None for entry in curve)]
    headers = ["round", *names, "s"]

    def text(value: Any, digits: int = 4) -> str:
        return "–" if value is None else f"{value:.{digits}f}"

    rows = [
        [str(entry["round"]), *(text(entry.get(name)) for name in names), text(entry.get("wall_seconds"), 2)]
        for entry in curve
    ]
    return headers, rows
