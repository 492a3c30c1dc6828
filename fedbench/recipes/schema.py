"""The pydantic models of a recipe, and what a setup and a matrix axis may hold.

A recipe describes one paper table: a base ``setup``, a ``matrix`` of axes whose combinations are
the table's cells, per-value ``overrides`` and per-combination ``combination`` overrides, named
``scale`` profiles, ``seeds``, and one or more ``tables`` views with the paper's published values.
Unknown keys are errors everywhere: a typo must never be silently ignored. Format: docs/recipes.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from fedbench.errors import RecipeError
from fedbench.recipes.views import Strict, TableView
from fedbench.spec import SETUP_KEYS

# Keys a setup may hold that do not change a run's result, so they are not part of the spec hash.
RUN_META_KEYS = ("targets",)
SPEC_SETUP_KEYS = tuple(k for k in SETUP_KEYS if k not in ("seed", "scale", "synthetic"))
# The label a cell added on the command line (``--add``, fedbench/recipes/additions.py) carries: the axes on which
# its value is an added one. Only such cells have it, so the registry, ``runs``, ``export`` and the report tell them
# apart from the recipe's own cells.
ADDED_LABEL = "added"
# Recipe fields the command line sets (``--add``, ``--set-for``); a recipe file may not.
COMMAND_LINE_FIELDS = ("added", "set_for")


class Combination(Strict):
    """A rule for the cells whose labels ``match`` (``scale`` matches the chosen scale profile): setup values to
    ``set`` in them, or ``skip`` them."""

    match: dict[str, str]
    set: dict[str, Any] = {}
    skip: bool = False


class Recipe(Strict):
    """A recipe as its TOML file writes it (``load_recipe`` reads one and checks the rules across its keys)."""

    paper: str
    name: str
    title: str = ""
    description: str = ""
    order: int = 100  # position among the paper's recipes in `fedbench report --paper`
    seeds: list[int] = [0]
    # The trials the paper ran per cell, where its spec says (FedTrip 10, FedImpro and LG-Mix 3): the report tests
    # a cell against a published mean ± std as the difference of two means over our seeds and these trials, and
    # says how many trials the paper needed where our seeds cannot reach significance.
    trials: int | None = Field(None, ge=1)
    # The recipe (by name) whose cells this one runs again under another reading of the paper (an alternative the
    # spec names, e.g. the authors' sampler): the reproduction ledger reports it beside that recipe, not as more cells.
    variant_of: str | None = None
    setup: dict[str, Any] = {}  # empty for a recipe of analytic tables only
    matrix: dict[str, list[Any]] = {}
    overrides: dict[str, dict[str, dict[str, Any]]] = {}
    combination: list[Combination] = []
    scale: dict[str, dict[str, Any]] = {}
    tables: list[TableView] = []
    # plug-ins the recipe's runs need (``fedbench.plugins.load_plugins``): .py files or package folders, relative
    # to the recipe file, or module names; loaded by ``load_recipe``
    plugins: list[str] = []

    source: Path | None = None  # set by load_recipe
    # Set by the command line only (fedbench/recipes/additions.py): the labels ``--add`` appended to each axis, and
    # the ``--set-for`` rules (a match on one axis label and the setup values it sets, merged after ``--set``).
    added: dict[str, list[str]] = {}
    set_for: list[Combination] = []

    def scale_names(self) -> list[str]:
        return ["full", *self.scale]

    def table(self, name: str) -> TableView:
        for view in self.tables:
            if view.name == name:
                return view
        raise RecipeError(f"{self.source}: no table {name!r}; tables: {', '.join(v.name for v in self.tables)}")

    def axis_item(self, axis: str, item: Any) -> tuple[str, dict[str, Any]]:
        """(label, setup values) of an item of a matrix axis: a scalar (the value of the setup key named like the
        axis, dotted for a nested key: ``"partition_params.alpha" = [0.1, 0.05]``) or a table with a ``label`` and
        setup overrides."""
        if isinstance(item, dict):
            if "label" not in item:
                raise RecipeError(f"{self.source}: matrix.{axis}: every table item needs a 'label' ({item})")
            values = {k: v for k, v in item.items() if k != "label"}
            check_setup_keys(values, f"matrix.{axis}[{item['label']}]", self.source)
            return str(item["label"]), values
        *parents, key = axis.split(".")
        if (parents[0] if parents else key) not in SPEC_SETUP_KEYS:
            raise RecipeError(
                f"{self.source}: matrix.{axis}: {axis!r} is not a setup key, so its items must be tables "
                "with a 'label' and the setup keys they change"
            )
        nested: dict[str, Any] = {key: item}
        for parent in reversed(parents):
            nested = {parent: nested}
        return _label(item), nested

    def axis_labels(self, axis: str) -> list[str]:
        """The labels of a matrix axis's items, in order."""
        return [self.axis_item(axis, v)[0] for v in self.matrix[axis]]


def _label(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def check_setup_keys(values: dict[str, Any], where_key: str, where: Path | None) -> None:
    """Every key of ``values`` (the setup values at ``where_key`` of recipe ``where``) is a setup key."""
    for key in values:
        if key not in SPEC_SETUP_KEYS and key not in RUN_META_KEYS:
            raise RecipeError(
                f"{where}: unknown key {where_key}.{key!r}; valid keys: {', '.join(SPEC_SETUP_KEYS + RUN_META_KEYS)}"
            )
