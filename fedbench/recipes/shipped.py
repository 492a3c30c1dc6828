"""The recipes shipped with fedbench, reachable by name from an installed package: ``fedbench run quickstart``,
``fedbench recipes list``, ``fedbench recipes copy``.

The repository keeps them in ``recipes/`` at its top; ``fedbench/recipes/recipe_files`` is a symbolic link to that
folder, so a clone (editable install) and a wheel, which carries the files as package data (``pyproject.toml``'s
``[tool.setuptools.package-data]``), read the same files from the same place.
"""

from __future__ import annotations

import difflib
import shutil
from dataclasses import dataclass
from pathlib import Path

from fedbench.errors import RecipeError

SHIPPED_DIR = Path(__file__).resolve().parent / "recipe_files"
SUFFIX = ".toml"


@dataclass(frozen=True)
class ShippedRecipe:
    """One shipped recipe: its name (the file's stem, what ``fedbench run NAME`` takes), paper and title."""

    name: str
    paper: str
    title: str
    path: Path


def shipped_names() -> list[str]:
    """The names of the shipped recipes, sorted."""
    return sorted(path.stem for path in SHIPPED_DIR.glob(f"*{SUFFIX}"))


def is_recipe_name(argument: str | Path) -> bool:
    """Whether a recipe argument is a bare name (``quickstart``) rather than a path: no folder, no ``.toml``."""
    path = Path(argument)
    return path.parent == Path(".") and path.suffix != SUFFIX and not path.exists()


def shipped_path(name: str) -> Path:
    """The file of the shipped recipe ``name``; an unknown name is a ``RecipeError`` with the close matches."""
    path = SHIPPED_DIR / f"{name}{SUFFIX}"
    if path.is_file():
        return path
    names = shipped_names()
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}?" if close else "`fedbench recipes list` lists them"
    raise RecipeError(f"{name}: neither a recipe file nor a shipped recipe's name; {hint}")


def shipped_recipes() -> list[ShippedRecipe]:
    """Every shipped recipe with its paper and title, read from its TOML (its ``extends`` applied: a variant takes
    its paper from its base) without compiling it (no plug-ins)."""
    from fedbench.recipes.extends import read_recipe_table  # local: extends imports this module (it finds bases here)

    recipes = []
    for name in shipped_names():
        path = SHIPPED_DIR / f"{name}{SUFFIX}"
        raw = read_recipe_table(path)
        recipes.append(ShippedRecipe(name, str(raw.get("paper", "")), str(raw.get("title", "")), path))
    return recipes


def copy_shipped(names: list[str], folder: Path, overwrite: bool = False) -> list[Path]:
    """Copy the shipped recipes ``names`` (every one when empty) into ``folder`` (created); the files written. A
    file already there that differs is a ``RecipeError`` before anything is copied, unless ``overwrite``."""
    sources = [shipped_path(name) for name in (names or shipped_names())]
    targets = [folder / source.name for source in sources]
    if not overwrite:
        for source, target in zip(sources, targets):
            if target.exists() and target.read_bytes() != source.read_bytes():
                raise RecipeError(f"{target}: exists and differs from the shipped recipe; pass --force to replace it")
    if folder.exists() and not folder.is_dir():
        raise RecipeError(f"{folder}: not a folder; give --to a folder to copy the recipes into")
    folder.mkdir(parents=True, exist_ok=True)
    for source, target in zip(sources, targets):
        shutil.copyfile(source, target)
    return targets
