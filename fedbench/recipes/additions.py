"""One more row in a paper's table without editing its recipe: ``--add AXIS=VALUE`` and ``--set-for
AXIS=LABEL:KEY=VALUE`` on ``run``, ``plan`` and ``report``.

``--add`` appends an item to a matrix axis, written as a recipe writes its items: a scalar on an axis named by a
setup key (``algorithm=scaffold``, ``partition_params.alpha=0.05``), or a table with a ``label`` and the setup keys
it sets (``case={ label = "CNN CIFAR", model = "cnn", dataset = "cifar10" }``). The grid then holds the added cells
too: every combination with an added value, at the recipe's seeds and scale, with the cell's other settings (the
setup, the other axes' items and their overrides, the combination rules that match it). No ``[overrides.AXIS.X]``
of another value applies to an added value (they are keyed by label), and no combination rule names it. The
recipe's own cells are untouched: they compile to the runs (spec hashes) they compile to without ``--add``.

Each added cell carries the label ``added`` (``ADDED_LABEL``: the axes whose value is an added one), so the
registry, ``runs`` and ``export`` tell it apart; the report shows it with a mark, compares it with the table's
baseline like every row, and never attaches a published value to it.

``--set-for`` merges setup values into the cells whose label on AXIS is LABEL (an added value or the recipe's
own), last: after ``--set`` (the merge order in docs/recipes.md). ``--set-for AXIS=LABEL:target=VALUE`` instead gives
the row or column LABEL its target in every table view that counts rounds (or GFLOPs, bytes) to a target and shows
AXIS in its rows or columns (the view's ``target_by``, for each row or column key holding LABEL): an added case of
FedTrip Table IV has none of its own. It is not a setup key, so the runs are the same; it is refused for a row or
column that has a target already (the paper's), whose published value and baseline test are at that target. Typer cannot declare an option that takes two
values and repeats, so the selector and the setting are one argument, joined by the first ``:`` that is followed
by a setup key and ``=``.

With several recipes (``report --paper``), a value is added to each recipe that varies its axis, and a setting to
each recipe that has its selector's label; an axis no recipe varies, or a label no recipe has, is an error.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedbench.errors import ConfigError, RecipeError
from fedbench.recipes.assignments import label_filters, parse_assignment
from fedbench.recipes.expand import assignments_to_dict
from fedbench.recipes.schema import ADDED_LABEL, Combination, Recipe
from fedbench.recipes.validate import check_recipe
from fedbench.recipes.views import TableView
from fedbench.vocab.figures import FIGURES
from fedbench.vocab.metrics import display_unit

# AXIS=LABEL:KEY=VALUE: the selector ends at the first ":" followed by a (dotted) setup key and "="
SET_FOR = re.compile(r"(?P<selector>[^=]+=.*?):(?P<setting>\s*[A-Za-z_][\w.]*\s*=.*)", re.DOTALL)
SET_FOR_EXAMPLE = "--set-for algorithm=mymethod:algorithm_params.mu=0.5"
# ``--set-for AXIS=LABEL:target=VALUE``: a table target, not a setup key
TARGET_KEY = "target"
TARGET_EXAMPLE = '--set-for "case=CNN CIFAR:target=60"'


@dataclass(frozen=True)
class Added:
    """An ``--add``: the item appended to ``axis`` (a scalar or a table, as parsed from the option's TOML value)."""

    axis: str
    item: Any
    text: str  # the option as given, for messages


@dataclass(frozen=True)
class Setting:
    """A ``--set-for``: setup values merged into the cells whose ``axis`` label is ``label``."""

    axis: str
    label: str
    values: dict[str, Any]
    text: str
    target: float | None = None  # ``:target=VALUE``: the label's target in the to-target table views


@dataclass(frozen=True)
class Additions:
    """The ``--add`` and ``--set-for`` options of one command, parsed (``parse``) and applied to its recipes
    (``extend``)."""

    values: tuple[Added, ...] = ()
    settings: tuple[Setting, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.values or self.settings)

    @classmethod
    def parse(cls, add: Iterable[str] = (), set_for: Iterable[str] = ()) -> Additions:
        """The options' syntax, checked before any recipe is read: ``KEY=VALUE`` with a TOML value (the one parser
        of ``fedbench.recipes.assignments``), and for ``--set-for`` a setting whose key is a setup key (as
        ``run --set``). Bad input is a one-line ``ConfigError`` naming the option."""
        values = tuple(_added(text) for text in add)
        return cls(values, tuple(_setting(text) for text in set_for))

    def extend(self, recipes: Sequence[Recipe]) -> list[Recipe]:
        """``recipes`` with the added items on their axes and the settings among their ``set_for`` rules (copies;
        the recipes given are not changed)."""
        out = list(recipes)
        for added in self.values:
            varying = [i for i, recipe in enumerate(out) if added.axis in recipe.matrix]
            if not varying:
                raise ConfigError(
                    f"--add {added.text}: {added.axis!r} is not an axis of {_axes_text(out)}; add a value to one of "
                    "these axes"
                )
            for i in varying:
                out[i] = _with_item(out[i], added)
        for setting in self.settings:
            selected = [i for i, r in enumerate(out) if setting.label in _labels(r, setting.axis)]
            if not selected:
                raise ConfigError(f"--set-for {setting.text}: {_no_selector(out, setting)}")
            if setting.target is not None:
                _with_target(out, selected, setting)
                continue
            for i in selected:
                rule = Combination(match={setting.axis: setting.label}, set=setting.values)
                out[i] = out[i].model_copy(update={"set_for": [*out[i].set_for, rule]})
        return out


def _with_target(recipes: list[Recipe], selected: list[int], setting: Setting) -> None:
    """Give ``setting.label`` its target in every to-target view of the ``selected`` recipes that shows its axis as
    (part of) its rows or columns: ``target_by`` of each row or column key holding the label (in place). A recipe's
    own value that a view already gives a target (the paper's) keeps it: another would be judged against the
    paper's figure for the paper's target."""
    assert setting.target is not None  # called for a target setting only
    found = False
    for i in selected:
        recipe, views = recipes[i], []
        for view in recipe.tables:
            keys = _target_keys(recipe, view, setting.axis, setting.label)
            if keys:
                found = True
                _check_target(recipe, view, setting, keys)
                view = view.model_copy(update={"target_by": {**view.target_by, **dict.fromkeys(keys, setting.target)}})
            views.append(view)
        recipes[i] = recipe.model_copy(update={"tables": views})
    if not found:
        names = ", ".join(str(_source(recipes[i])) for i in selected)
        raise ConfigError(
            f"--set-for {setting.text}: no table view of {names} counts to a target by {setting.axis!r} (in its rows "
            "or columns), so there is no target to set"
        )


def _target_keys(recipe: Recipe, view: TableView, axis: str, label: str) -> list[str]:
    """The row (or column) keys of ``view`` whose label on ``axis`` is ``label``, as the report joins a side's
    labels (" / "); none when the view counts to no target or shows ``axis`` on neither side."""
    if not FIGURES[view.figure].needs_target:
        return []
    side = view.rows if axis in view.rows else view.columns if axis in view.columns else None
    return [] if side is None else _side_keys(recipe, view, side, {axis: label})


def _side_keys(recipe: Recipe, view: TableView, side: list[str], fixed: dict[str, str]) -> list[str]:
    """Every key of a side of ``view`` (its rows' or columns' axes), with the labels of ``fixed`` on their axes."""
    parts = []
    for key in side:
        if key in fixed:
            parts.append([fixed[key]])
        elif key in recipe.matrix:
            parts.append(recipe.axis_labels(key))
        elif key == "round":
            parts.append([str(r) for r in view.at_rounds])
        elif key == "metric":
            parts.append(list(view.metrics))
        else:  # the "client" pseudo-axis: the view's clients and their average (report.table._with_clients)
            parts.append([*view.clients, "Avg."])
    return [" / ".join(p) for p in itertools.product(*parts)]


def _check_target(recipe: Recipe, view: TableView, setting: Setting, keys: list[str]) -> None:
    """A target in the unit the view shows (a % accuracy, never a fraction), for a row or column whose cells the view
    gives no target: one that has one (the paper's, or the view's ``target``) keeps it, so its published value is
    judged, and it is tested against the baseline, at the target the recipe gives."""
    assert setting.target is not None  # called for a target setting only
    if display_unit(view.metric, view.percent) == "%" and not 1 < setting.target <= 100:
        raise ConfigError(
            f"--set-for {setting.text}: table {view.name!r} of {_source(recipe)} counts to a target in % (e.g. "
            f"target=60 for 60 %); {setting.target:g} is not one"
        )
    other = _side_keys(recipe, view, view.columns if setting.axis in view.rows else view.rows, {})
    named = [key for key in [*keys, *other] if key in view.target_by]  # a cell's target: its row's, its column's
    if view.target is None and not named:
        return
    has = (
        f"target = {view.target:g}"
        if view.target is not None
        else f"target_by {named[0]!r} = {view.target_by[named[0]]:g}"
    )
    raise ConfigError(
        f"--set-for {setting.text}: {setting.label!r} already has a target in table {view.name!r} of "
        f"{_source(recipe)} ({has}); target= gives one to a row or column that has none, such as a value added "
        "with --add"
    )


def _added(text: str) -> Added:
    if "=" not in text:
        raise ConfigError(f"--add {text!r}: expected AXIS=VALUE, e.g. --add algorithm=scaffold")
    return Added(*parse_assignment(text, "--add"), text)


def _setting(text: str) -> Setting:
    match = SET_FOR.fullmatch(text)
    if match is None:
        raise ConfigError(f"--set-for {text!r}: expected AXIS=LABEL:KEY=VALUE, e.g. {SET_FOR_EXAMPLE}")
    ((axis, labels),) = label_filters([match["selector"]], "--set-for").items()
    key, value = parse_assignment(match["setting"].strip(), "--set-for")
    if key == TARGET_KEY:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(
                f"--set-for {text!r}: target must be a number, in the unit the table shows (e.g. {TARGET_EXAMPLE})"
            )
        return Setting(axis, labels.pop(), {}, text, float(value))
    return Setting(axis, labels.pop(), assignments_to_dict([match["setting"].strip()], "--set-for"), text)


def _with_item(recipe: Recipe, added: Added) -> Recipe:
    """``recipe`` with ``added.item`` appended to its axis, its label among ``recipe.added``."""
    axis = added.axis
    if ADDED_LABEL in recipe.matrix:  # the label of added cells would collide with the recipe's own axis
        raise ConfigError(
            f"--add {added.text}: {recipe.source} has an axis named {ADDED_LABEL!r}, the label --add uses"
        )
    try:
        label, _ = recipe.axis_item(axis, added.item)
    except RecipeError as exc:  # a scalar on an axis of tables, a table without a label or with a key of no setup
        raise ConfigError(f"--add {added.text}: {exc}") from None
    if label in recipe.axis_labels(axis):
        raise ConfigError(
            f"--add {added.text}: {label!r} is already a value of axis {axis!r} in {recipe.source} "
            f"({', '.join(recipe.axis_labels(axis))})"
        )
    extended = recipe.model_copy(
        update={
            "matrix": {**recipe.matrix, axis: [*recipe.matrix[axis], added.item]},
            "added": {**recipe.added, axis: [*recipe.added.get(axis, []), label]},
        }
    )
    try:  # the recipe's rules hold with the new value too (e.g. it is not a row the paper quotes: published_only)
        check_recipe(extended)
    except RecipeError as exc:
        raise ConfigError(f"--add {added.text}: {exc}") from None
    return extended


def _labels(recipe: Recipe, axis: str) -> list[str]:
    return recipe.axis_labels(axis) if axis in recipe.matrix else []


def _axes_text(recipes: Sequence[Recipe]) -> str:
    """ "recipes/a.toml (axes: algorithm, case)", one such part per recipe."""

    def one(recipe: Recipe) -> str:
        return f"{_source(recipe)} (axes: {', '.join(recipe.matrix) or 'none'})"

    return "; ".join(one(r) for r in recipes) if recipes else "the recipes (none given)"


def _no_selector(recipes: Sequence[Recipe], setting: Setting) -> str:
    """Why a ``--set-for`` selects no cell: its axis is not one of the recipes', or its label is not on it."""
    with_axis = [r for r in recipes if setting.axis in r.matrix]
    if not with_axis:
        return f"{setting.axis!r} is not an axis of {_axes_text(recipes)}"
    where = "; ".join(f"{_source(r)}: {', '.join(r.axis_labels(setting.axis))}" for r in with_axis)
    return f"no value {setting.label!r} on axis {setting.axis!r} ({where}); --add it, or name one of these"


def _source(recipe: Recipe) -> str | Path:
    return recipe.source or recipe.name


__all__ = ["Additions", "Added", "Setting", "SET_FOR", "SET_FOR_EXAMPLE"]
