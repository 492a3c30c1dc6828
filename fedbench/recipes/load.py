"""Reading a recipe file: TOML → a ``Recipe`` whose models and cross-key rules (``validate``) all hold, with the
plug-ins it names (``plugins = [...]``) and the installed ones loaded."""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from fedbench.errors import RecipeError, field_error
from fedbench.plugins import PluginError, load_plugins
from fedbench.recipes.extends import read_recipe_table
from fedbench.recipes.schema import COMMAND_LINE_FIELDS, Recipe
from fedbench.recipes.shipped import is_recipe_name, shipped_path
from fedbench.recipes.validate import check_recipe


def load_recipe(path: str | Path) -> Recipe:
    """The recipe at ``path`` (or the shipped recipe of that name: ``quickstart``), checked; a missing file, bad
    TOML, an unknown key or a bad value is a one-line ``RecipeError`` naming the file and the key. A recipe that
    ``extends`` another is read as the other with its keys applied (``fedbench.recipes.extends``). Its plug-ins
    (paths relative to the recipe file) are loaded first, and those of the installed distributions' entry points: a
    plug-in that fails is a ``PluginError`` naming the recipe and the plug-in."""
    path = shipped_path(str(path)) if is_recipe_name(path) else Path(path)
    raw = read_recipe_table(path)
    for key in COMMAND_LINE_FIELDS:  # what `--add` and `--set-for` set: a recipe's own cells are never "added"
        if key in raw:
            raise RecipeError(f"{path}: unknown key {key!r}; see docs/recipes.md for the recipe format")
    try:
        recipe = Recipe(**raw)
    except ValidationError as exc:
        bad = field_error(exc)
        if bad.kind == "extra_forbidden":
            raise RecipeError(f"{path}: unknown key {bad.key!r}; see docs/recipes.md for the recipe format") from None
        raise RecipeError(f"{path}: {bad.line()}") from None
    recipe.source = path
    try:
        load_plugins(recipe.plugins, base=path.parent)
    except PluginError as exc:
        raise PluginError(f"{path}: {exc}") from None
    check_recipe(recipe)
    return recipe
