"""Shell completion: what the shell offers after a command's option (``fedbench --install-completion`` installs it for
bash, zsh, fish or PowerShell).

Recipe files (``*.toml``, and folders to walk into), the registered names (methods, models, data sets,
partitioners; plug-ins given earlier on the line with ``--plugin`` too), ``KEY=VALUE`` pairs whose keys are the
setup keys or a recipe's axes and whose values are the axis's values, and a recipe's table names. A completer runs
on every key press: it reads the torch-free catalogues and the recipe files only, and never fails (a broken recipe
completes nothing).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import typer

SETUP_KINDS = ("algorithm", "dataset", "model", "partition")


def _matching(candidates: Iterable[str], incomplete: str) -> list[str]:
    return sorted({c for c in candidates if c.startswith(incomplete)})


def recipe_files(incomplete: str) -> list[str]:
    """``*.toml`` files and folders under the path typed so far (``recipes/`` first when nothing is typed)."""
    typed = Path(incomplete or ".")
    folder, stem = (typed, "") if incomplete.endswith("/") or not incomplete else (typed.parent, typed.name)
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    shown = []
    for entry in entries:
        if not entry.name.startswith(stem) or entry.name.startswith("."):
            continue
        text = str(entry) if incomplete else entry.name
        if entry.is_dir():
            shown.append(f"{text}/")
        elif entry.suffix == ".toml":
            shown.append(text)
    return sorted(shown)


def plugin_names(kind: str) -> list[str]:
    """The registered names of one kind (the torch-free catalogues: no plug-in module is imported)."""
    # local: completion runs only when the shell asks; the catalogues are not part of a command's start-up
    from fedbench.algorithms import ALGORITHMS
    from fedbench.data import DATASETS
    from fedbench.data.partition import PARTITIONERS
    from fedbench.models import MODELS

    registry: Any = {"algorithm": ALGORITHMS, "dataset": DATASETS, "model": MODELS, "partition": PARTITIONERS}[kind]
    return list(registry.names())


def algorithms(incomplete: str) -> list[str]:
    return _matching(plugin_names("algorithm"), incomplete)


def models(incomplete: str) -> list[str]:
    return _matching(plugin_names("model"), incomplete)


def datasets(incomplete: str) -> list[str]:
    return _matching(plugin_names("dataset"), incomplete)


def _recipes_on_the_line(ctx: typer.Context) -> list[Any]:
    """The recipes named so far on the command line (arguments or ``--recipe``), loaded; those that fail are skipped."""
    # local: completion runs only when the shell asks
    from fedbench.recipes.load import load_recipe

    named = [*(ctx.params.get("recipes") or []), *(ctx.params.get("recipe") or [])]
    loaded = []
    for path in named:
        try:
            loaded.append(load_recipe(path))
        except Exception:  # a recipe being written: it completes nothing, the command will say what is wrong
            continue
    return loaded


def table_names(ctx: typer.Context, incomplete: str) -> list[str]:
    """The table views of the recipes named so far (``report --recipe R --table <TAB>``)."""
    return _matching((view.name for recipe in _recipes_on_the_line(ctx) for view in recipe.tables), incomplete)


def _axes(recipe: Any) -> dict[str, list[str]]:
    """{axis: the labels of its values} of a loaded recipe."""
    return {axis: [str(label) for label in recipe.axis_labels(axis)] for axis in recipe.matrix}


def assignments(ctx: typer.Context, incomplete: str) -> list[str]:
    """``KEY=VALUE`` for ``--only``, ``--add``, ``--set``: before the ``=`` the recipes' axes and the setup keys, after
    it the axis's values (the registered names for algorithm, dataset, model and partition)."""
    recipes = _recipes_on_the_line(ctx)
    key, equals, value = incomplete.partition("=")
    if not equals:
        # local: completion runs only when the shell asks
        from fedbench.spec import SETUP_KEYS

        keys = {axis for recipe in recipes for axis in _axes(recipe)} | set(SETUP_KEYS)
        return [f"{k}=" for k in _matching(keys, key)]
    values: set[str] = set()
    for recipe in recipes:
        values |= set(_axes(recipe).get(key, []))
    if key in SETUP_KINDS:
        values |= set(plugin_names(key))
    return [f"{key}={v}" for v in _matching(values, value)]


__all__ = ["recipe_files", "algorithms", "models", "datasets", "table_names", "assignments"]
