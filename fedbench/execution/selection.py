"""Which runs a command is about, before anything trains: ``select_runs`` compiles recipes with the command line's
seeds, filters, overrides and additions and checks ``--device``; ``dry_run`` gives each run's registry status
without touching the registry (``fedbench run --dry-run``). Neither imports torch (only a device other than ``auto``
or ``cpu`` needs it to be checked), so a dry run of thousands of runs starts as fast as compiling them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedbench.errors import FedbenchError, UnknownNameError
from fedbench.execution.devices import check_device
from fedbench.recipes.additions import Additions
from fedbench.recipes.expand import PlannedRun, compile_recipes
from fedbench.registry import Registry


def select_runs(
    recipes: Sequence[str | Path],
    *,
    scale: str = "full",
    seeds: list[int] | None = None,
    only: dict[str, set[str]] | None = None,
    overrides: dict[str, Any] | None = None,
    synthetic: bool = False,
    device: str = "auto",
    additions: Additions | None = None,
    registry_url: str | None = None,
) -> list[PlannedRun]:
    """Compile ``recipes`` (extended by ``additions``: ``--add``, ``--set-for``) into runs (deduplicated by
    spec_hash) and check ``device``; an ``only`` filter that keeps nothing is an error. An empty list means the
    recipes define no runs (analytic tables only). A name no plug-in loaded here registers is an
    ``UnknownNameError`` that names the plug-in which trained the runs of ``registry_url`` with it, if any."""
    try:
        planned = compile_recipes(
            list(recipes), additions, scale=scale, seeds=seeds, only=only, overrides=overrides, synthetic=synthetic
        )
    except UnknownNameError as exc:
        raise exc.reworded(f"{exc}{plugin_hint(exc, registry_url)}") from None
    check_device(device)
    if not planned and only:
        filters = " ".join(f"{key}={'|'.join(sorted(values))}" for key, values in only.items())
        raise FedbenchError(f"no runs match --only {filters}: check the filters against the recipe's labels")
    return planned


def plugin_hint(error: UnknownNameError, registry_url: str | None) -> str:
    """ "; runs of this registry were trained with it from the plug-in FILE: load it with --plugin FILE" where the
    registry's provenance knows the plug-in that registered the unknown name; else nothing."""
    registry = Registry.open_existing(registry_url) if error.kind and error.name else None
    sources = registry.plugin_sources(str(error.kind), str(error.name)) if registry else []
    if not sources:
        return ""
    return (
        f"; runs in this registry were trained with {error.kind} {error.name!r} from the plug-in "
        f"{', '.join(sources)}: load it with --plugin {sources[0]} (or a recipe's plugins = [...])"
    )


@dataclass(frozen=True)
class DryRunRow:
    spec_hash: str
    labels: dict[str, str]
    seed: int
    rounds: int
    status: str  # the registry's status, or "new"


def dry_run(planned: list[PlannedRun], registry_url: str | None) -> list[DryRunRow]:
    """Each planned run with its registry status ("new" if absent); reads the registry only if it exists."""
    statuses = Registry.peek_statuses(registry_url, [p.spec_hash for p in planned])
    return [
        DryRunRow(p.spec_hash, p.labels, p.spec.seed, p.spec.rounds, statuses.get(p.spec_hash, "new")) for p in planned
    ]


__all__ = ["select_runs", "dry_run", "DryRunRow"]
