"""Reading a recipe file's TOML, and ``extends``: a recipe written as the changes to another one.

A variant (the same cells under another reading of the paper) differs from its base recipe in a few setup keys and
its tables' titles; written out whole, it repeats every published value, which must then be kept equal by hand.
``extends = "BASE"`` takes the base recipe (a shipped recipe's name, or a path relative to this file's folder)
and applies this file's keys on top of it:

- ``name``, ``title``, ``description`` and ``order`` are each recipe's own, never taken from the base; a recipe that
  extends another must give ``name`` and ``title``;
- every other key this file writes replaces the base's value, except in four places, where it replaces the base's
  value key by key: ``setup`` and ``matrix`` (a setup key, an axis), each ``scale`` profile (``scale.smoke.rounds``),
  each override (``overrides.algorithm.fedprox.algorithm_params``), and each table view, matched by its ``name``
  (``title``, ``published``, ...; a view of a new name is added after the base's views). So
  ``setup.partition_params = {...}`` replaces the base's partition parameters whole: the recipe states every
  parameter of its partition, never a mixture of two;
- the base's plug-ins keep naming the files they named: a relative path is taken from the base's folder;
- the base may itself extend another; a cycle is an error.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from fedbench.errors import RecipeError
from fedbench.recipes.shipped import SUFFIX, is_recipe_name, shipped_path

EXTENDS_KEY = "extends"
# A recipe's identity: what it is called, how it is listed and where it stands among its paper's recipes.
OWN_KEYS = ("name", "title", "description", "order")
REQUIRED_OWN_KEYS = ("name", "title")
# How deep a key of the recipe replaces the base's value key by key (0 = the whole value), e.g. overrides:
# axis → label → setup key.
MERGE_DEPTH = {"setup": 1, "matrix": 1, "scale": 2, "overrides": 3}
TABLES_KEY = "tables"


def read_recipe_table(path: Path) -> dict[str, Any]:
    """The recipe at ``path`` as one TOML table, its ``extends`` applied; a file that cannot be read, bad TOML or a
    bad ``extends`` is a one-line ``RecipeError`` naming the file."""
    return _read(path, ())


def _read(path: Path, chain: tuple[Path, ...]) -> dict[str, Any]:
    raw = _toml(path)
    if EXTENDS_KEY not in raw:
        return raw
    base_name = raw.pop(EXTENDS_KEY)
    if not isinstance(base_name, str) or not base_name:
        raise RecipeError(
            f"{path}: extends = {base_name!r}: give the recipe this one changes, as a shipped recipe's name "
            '(extends = "fedtr_table1") or a path relative to this file'
        )
    for key in REQUIRED_OWN_KEYS:
        if key not in raw:
            raise RecipeError(f'{path}: a recipe that extends another gives its own {key!r}; add {key} = "..."')
    base_path = _base_path(path, base_name)
    seen = (*chain, path.resolve())
    if base_path.resolve() in seen:
        cycle = " → ".join(p.stem for p in (*seen, base_path.resolve()))
        raise RecipeError(f"{path}: extends = {base_name!r} makes a cycle ({cycle}); a recipe cannot extend itself")
    base = _read(base_path, seen)
    return _apply(_inherited(base, base_path.parent), raw)


def _toml(path: Path) -> dict[str, Any]:
    if path.is_dir():
        raise RecipeError(f"{path}: a folder, not a recipe file; give a .toml file (e.g. recipes/quickstart.toml)")
    if not path.is_file():
        raise RecipeError(
            f"{path}: recipe file not found; give a recipe file or a shipped recipe's name (`fedbench recipes list`)"
        )
    try:
        text = path.read_bytes().decode("utf-8")  # TOML is UTF-8, whatever the machine's locale
    except OSError as exc:
        raise RecipeError(f"{path}: cannot read the recipe file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        raise RecipeError(f"{path}: not valid TOML: not UTF-8 text (byte {exc.start})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(f"{path}: not valid TOML: {exc}") from None


def _base_path(path: Path, base_name: str) -> Path:
    """The file ``extends`` names: a path relative to the recipe's folder, else a recipe of that name beside it,
    else the shipped recipe of that name."""
    beside = path.parent / base_name
    if beside.is_file():
        return beside
    if is_recipe_name(base_name):
        named = path.parent / f"{base_name}{SUFFIX}"
        if named.is_file():
            return named
        try:
            return shipped_path(base_name)
        except RecipeError as exc:
            raise RecipeError(f"{path}: extends = {base_name!r}: {str(exc).split(': ', 1)[1]}") from None
    raise RecipeError(f"{path}: extends = {base_name!r}: no such recipe file {beside}")


def _inherited(base: dict[str, Any], base_folder: Path) -> dict[str, Any]:
    """What a recipe takes of its base: all but the base's own keys, its plug-in paths made absolute."""
    taken = {key: value for key, value in base.items() if key not in OWN_KEYS}
    if isinstance(taken.get("plugins"), list):
        taken["plugins"] = [_plugin_from(entry, base_folder) for entry in taken["plugins"]]
    return taken


def _plugin_from(entry: Any, base_folder: Path) -> Any:
    # As fedbench.plugins.loading tells a path from a module name: a .py file, a separator, or something that exists.
    if not isinstance(entry, str) or Path(entry).is_absolute():
        return entry
    if entry.endswith(".py") or "/" in entry or (base_folder / entry).exists():
        return str((base_folder / entry).resolve())
    return entry


def _apply(base: dict[str, Any], own: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in own.items():
        if key == TABLES_KEY:
            merged[key] = _merge_views(base.get(key), value)
        else:
            merged[key] = _merge(base.get(key), value, MERGE_DEPTH.get(key, 0))
    return merged


def _merge(base: Any, own: Any, depth: int) -> Any:
    if depth == 0 or not isinstance(base, dict) or not isinstance(own, dict):
        return own
    merged = dict(base)
    for key, value in own.items():
        merged[key] = _merge(base.get(key), value, depth - 1)
    return merged


def _merge_views(base: Any, own: Any) -> Any:
    """The base's table views with the recipe's applied by name, key by key; views of new names after them."""
    if not isinstance(base, list) or not isinstance(own, list):
        return own
    views = [dict(view) if isinstance(view, dict) else view for view in base]
    by_name = {view["name"]: i for i, view in enumerate(views) if isinstance(view, dict) and "name" in view}
    for view in own:
        name = view.get("name") if isinstance(view, dict) else None
        if name in by_name:
            views[by_name[name]] = {**views[by_name[name]], **view}
        else:
            views.append(view)
    return views
