"""What ``fedbench report`` renders: the recipes asked for, their tables from the registry, their plots.

``report_recipes`` finds the recipes (files, or every recipe of a paper), ``build_tables`` builds the tables
(from an empty registry when there is none yet), ``write_plots`` writes the accuracy-vs-round PNGs. Rendering
to a format is ``fedbench.report.render``; printing and writing the rendered text belong to the CLI.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fedbench.errors import FedbenchError
from fedbench.recipes.load import load_recipe
from fedbench.recipes.schema import Recipe
from fedbench.recipes.shipped import SHIPPED_DIR
from fedbench.recipes.views import TableView
from fedbench.registry import Registry
from fedbench.report.diagnostics.series import diagnostic_table
from fedbench.report.table import Table, build_table


def report_recipes(
    paper: str | None, recipe_paths: Sequence[str | Path], recipes_dir: str | Path | None = None
) -> list[Recipe]:
    """The recipe files (or shipped recipes' names) given, then every recipe in ``recipes_dir`` whose ``paper`` is
    ``paper`` (in the paper's order); without ``recipes_dir``, ``./recipes`` where it exists (a clone), else the
    recipes shipped with the package (an installed wheel)."""
    loaded = [load_recipe(p) for p in recipe_paths]
    if paper:
        default = Path("recipes")
        folder = Path(recipes_dir) if recipes_dir is not None else default if default.is_dir() else SHIPPED_DIR
        found = [load_recipe(p) for p in sorted(folder.glob("*.toml"))]
        matching = sorted((r for r in found if r.paper == paper), key=lambda r: (r.order, r.name))
        if not found:  # e.g. run outside the checkout: recipes/ is relative to the working directory
            raise FedbenchError(
                f"--paper {paper!r}: no recipes in {folder}/; run from the folder that holds recipes/ or give "
                "--recipes-dir DIR"
            )
        if not matching:
            papers = sorted({r.paper for r in found})
            raise FedbenchError(
                f"--paper {paper!r}: no recipe in {folder}/ has paper = {paper!r}; papers: {', '.join(papers)}"
            )
        loaded += matching
    return loaded


class EmptyRegistry:
    """Stands in for a registry that does not exist yet: tables show the published numbers and no runs."""

    def runs(self, **_: Any) -> list[Any]:
        return []

    def run_states(self, spec_hashes: Iterable[str]) -> list[Any]:
        return []

    def curves(self, ids: Iterable[int], fields: Iterable[str] | None = None) -> dict[int, list[Any]]:
        return {}

    def diagnostic_values(self, ids: Iterable[int], name: str) -> dict[int, dict[int, Any]]:
        return {}


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector paused: building the tables allocates hundreds of thousands of small objects
    (stored rounds, curve points) that hold no reference cycles, and the collector, triggered by the allocations,
    would traverse the growing heap again and again (a third of a 10,000-run report's time:
    benchmarks/report_scale.py). Objects are still freed as their last reference goes; cycles wait until it
    resumes."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _views(recipe: Recipe, table: str | None) -> list[TableView]:
    return [recipe.table(table)] if table else list(recipe.tables)


def build_tables(
    recipes: Iterable[Recipe],
    store: Registry | None,
    *,
    scale: str = "full",
    table: str | None = None,
    synthetic: bool = False,
    seeds: list[int] | None = None,
    only: Mapping[str, str | set[str]] | None = None,
) -> list[Table]:
    """Every table view (or only ``table``) of ``recipes`` at ``scale``, of ``seeds`` (None: each recipe's) and the
    cells matching ``only`` (``report --seeds``/``--only``, as for ``run``); recipes without that scale are left
    out, and no table at all is an error."""
    recipes = list(recipes)
    scales = {name for recipe in recipes if recipe.setup for name in recipe.scale_names()}
    if scales and scale not in scales:  # a misspelt --scale must not leave only the analytic tables, silently
        raise FedbenchError(f"--scale {scale!r}: no recipe has that scale; theirs: {', '.join(sorted(scales))}")
    source: Any = store if store is not None else EmptyRegistry()
    tables = []
    cache: dict = {}  # one report's: each recipe expanded, each run's state and rounds read, once for all views
    with _no_cycle_collection():
        for recipe in recipes:
            if recipe.setup and scale not in recipe.scale_names():
                continue
            for view in _views(recipe, table):
                if view.kind == "diagnostics":  # a figure, no cells: its table is one line about its runs
                    tables.append(
                        diagnostic_table(recipe, view, source, scale=scale, synthetic=synthetic, seeds=seeds, only=only)
                    )
                    continue
                tables.append(
                    build_table(
                        recipe, view, source, scale=scale, synthetic=synthetic, cache=cache, seeds=seeds, only=only
                    )
                )
        cache.clear()  # freed before the collector resumes: it then traverses the tables only
    if not tables:  # an unknown --table is the recipe's own error, raised above
        raise FedbenchError(f"no table to render at scale {scale!r}: the recipes define no [[tables]] there")
    return tables


def write_plots(
    recipes: Iterable[Recipe],
    store: Registry | None,
    folder: Path,
    *,
    scale: str = "full",
    table: str | None = None,
    synthetic: bool = False,
    seeds: list[int] | None = None,
    only: Mapping[str, str | set[str]] | None = None,
) -> Iterator[Path]:
    """Write the figures of every table view (or only ``table``) into ``folder`` as PNGs, drawn from the runs
    ``seeds`` and ``only`` select (as for ``build_tables``); yields each path as it is written. Without a registry
    only the views that need no runs draw (partitions)."""
    # local: keeps matplotlib out of report's start-up (only --plots draws)
    from fedbench.report.plots import plot_table

    source: Any = store if store is not None else EmptyRegistry()
    for recipe in recipes:
        if scale not in recipe.scale_names():
            continue
        for view in _views(recipe, table):
            yield from plot_table(
                recipe, view, source, folder, scale=scale, synthetic=synthetic, seeds=seeds, only=only
            )


__all__ = ["report_recipes", "build_tables", "write_plots", "EmptyRegistry"]
