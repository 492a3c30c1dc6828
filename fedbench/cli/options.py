"""Command-line options several commands share, each declared once as an ``Annotated`` alias.

``fedbench run`` and ``fedbench plan`` read the same recipes with the same ``--scale``, ``--seeds``, ``--only``,
``--set``, ``--synthetic``, ``--device``, ``--jobs``, ``--threads`` and ``--data-dir``, and ``report`` too with the same
``--add`` and ``--set-for``: a command declares such a parameter with the alias (``scale: Scale = "full"``), so its
names, type and bounds are written here only. A command for which an option means something more specific says so
with ``reworded`` (same option, its own help line). ``parse_seeds`` reads ``--seeds`` for both; ``additions`` reads
``--add`` and ``--set-for`` for all three; ``compile_options`` turns the options ``run`` and ``plan`` share into the
keyword arguments that compile their recipes. ``--plugin`` (``Plugins``) is on every command that compiles recipes or
lists plug-ins; ``load_plugins`` loads them (and the installed entry points) at the command's start.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from fedbench.cli import completion
from fedbench.errors import FedbenchError

if TYPE_CHECKING:
    from fedbench.recipes.additions import Additions

RECIPES: Any = typer.Argument(help="Recipe TOML files.", show_default=False, autocompletion=completion.recipe_files)
SCALE: Any = typer.Option("--scale", help="Scale profile of the recipe (e.g. smoke); 'full' is the paper's setting.")
SEEDS: Any = typer.Option("--seeds", help="Comma-separated seeds replacing the recipe's.")
ONLY: Any = typer.Option(
    "--only",
    help="Keep runs whose labels match KEY=VALUE (repeatable; values of one key are alternatives).",
    autocompletion=completion.assignments,
)
SET: Any = typer.Option(
    "--set",
    help="Override a setup key for every run, dotted for nested keys (repeatable).",
    autocompletion=completion.assignments,
)
SYNTHETIC: Any = typer.Option("--synthetic", help="Replace every dataset with generated stand-in data (smoke tests).")
DEVICE: Any = typer.Option("--device", help="auto, cpu, cuda or cuda:N.")
JOBS: Any = typer.Option(
    "--jobs", "-j", min=1, help="Worker processes claiming runs from the registry (use one per core)."
)
THREADS: Any = typer.Option(
    "--threads", min=1, help="CPU threads per run. Curves are bit-identical for the same --threads whatever --jobs is."
)
DATA_DIR: Any = typer.Option("--data-dir", help="Data root [default: $FEDBENCH_DATA or the user cache].")
PLUGIN: Any = typer.Option(
    "--plugin",
    help="Load a plug-in first (repeatable): a .py file, a package folder or a module name that registers methods, "
    "models, data sets or partitioners. Installed packages' `fedbench.plugins` entry points load too.",
    show_default=False,
)
ADD: Any = typer.Option(
    "--add",
    metavar="AXIS=VALUE",
    help="Add a value to an axis of the recipe (repeatable), e.g. algorithm=scaffold: every cell of the recipe with "
    "it too, labelled added; the recipe's own runs are unchanged.",
    autocompletion=completion.assignments,
)
SET_FOR: Any = typer.Option(
    "--set-for",
    metavar="AXIS=LABEL:KEY=VALUE",
    help="Set a setup key (as --set) only in the cells whose AXIS label is LABEL, e.g. "
    "algorithm=scaffold:optimizer.lr=0.05 (repeatable).",
)

Recipes = Annotated[list[Path], RECIPES]
Scale = Annotated[str, SCALE]
Seeds = Annotated[str | None, SEEDS]
Only = Annotated[list[str], ONLY]
Overrides = Annotated[list[str], SET]
Synthetic = Annotated[bool, SYNTHETIC]
Device = Annotated[str, DEVICE]
Jobs = Annotated[int, JOBS]
Threads = Annotated[int, THREADS]
DataDir = Annotated[Path | None, DATA_DIR]
Plugins = Annotated[list[str], PLUGIN]
Add = Annotated[list[str], ADD]
SetFor = Annotated[list[str], SET_FOR]


def parse_seeds(text: str | None) -> list[int] | None:
    """``--seeds 0,1,2``."""
    if text is None:
        return None
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        seeds = []
    if not seeds:  # an empty list would train nothing and blame the recipe or --only for it
        raise FedbenchError(f"--seeds {text!r}: expected comma-separated integers, e.g. --seeds 0,1,2")
    from fedbench.spec import seed_out_of_range

    unstorable = seed_out_of_range(seeds)
    if unstorable:
        raise FedbenchError(f"--seeds {text!r}: {unstorable}")
    return seeds


def load_plugins(sources: list[str]) -> None:
    """Load ``--plugin`` sources (paths relative to the working directory) and the installed entry points; a plug-in
    that fails is a ``PluginError`` (one line, exit 2)."""
    from fedbench.plugins import load_plugins as load

    load(sources)


def additions(add: list[str], set_for: list[str]) -> Additions:
    """``--add`` and ``--set-for``, their syntax checked (``fedbench.recipes.additions``)."""
    from fedbench.recipes.additions import Additions  # local: the CLI's start-up imports no library (cli/__init__.py)

    return Additions.parse(add, set_for)


def compile_options(
    scale: str, seeds: str | None, only: list[str], set_: list[str], synthetic: bool, add: list[str], set_for: list[str]
) -> dict[str, Any]:
    """The keyword arguments that compile recipes into runs (``plan_runs``, ``plan_recipes``) from the options
    ``run`` and ``plan`` share: ``--scale``, ``--seeds``, ``--only``, ``--set``, ``--synthetic``, ``--add`` and
    ``--set-for``, each parsed and checked in that order."""
    from fedbench.recipes.assignments import label_filters
    from fedbench.recipes.expand import assignments_to_dict  # local: the CLI's start-up imports no library

    return {
        "scale": scale,
        "seeds": parse_seeds(seeds),
        "only": label_filters(only, "--only"),
        "overrides": assignments_to_dict(set_, "--set"),
        "synthetic": synthetic,
        "additions": additions(add, set_for),
    }


def reworded(option: Any, help: str) -> Any:
    """``option`` (its names, type bounds and parsing) with another help line, for a command where it means
    something more specific (``fedbench plan --jobs``: the workers its wall time is divided over)."""
    copied = copy.copy(option)
    copied.help = help
    return copied


__all__ = [
    "Add",
    "DataDir",
    "Device",
    "Jobs",
    "Only",
    "Recipes",
    "Scale",
    "Seeds",
    "SetFor",
    "Overrides",
    "Plugins",
    "Synthetic",
    "Threads",
    "load_plugins",
    "additions",
    "compile_options",
    "parse_seeds",
    "reworded",
]
