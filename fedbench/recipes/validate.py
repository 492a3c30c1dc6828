"""The rules of a recipe that its pydantic models cannot state: a key or label must name something that exists (a
setup key, a matrix axis, a value on an axis, a row or column of a view), a view's figure needs its settings, seeds
are a non-empty list. Each rule is a function raising a one-line ``RecipeError`` that names the file, the key and
the value; ``check_recipe`` runs them in a fixed order, so a recipe with several errors always reports the same one.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from fedbench.errors import ConfigError, RecipeError, UnknownNameError
from fedbench.recipes.schema import RUN_META_KEYS, SPEC_SETUP_KEYS, Recipe, check_setup_keys
from fedbench.recipes.views import Claim, TableView, alternatives
from fedbench.spec import RunSpec, seed_out_of_range
from fedbench.vocab.diagnostics import DIAGNOSTIC_NAMES, DIAGNOSTICS
from fedbench.vocab.figures import FIGURES


def check_recipe(recipe: Recipe) -> None:
    """Every rule, in order: the setup, the matrix, overrides, combination rules, seeds, scales, then each view."""
    _check_setup(recipe)
    _check_matrix(recipe)
    _check_overrides(recipe)
    _check_combinations(recipe)
    _check_seeds(recipe.seeds, "seeds", recipe.source)
    _check_scales(recipe)
    for view in recipe.tables:
        _check_view(recipe, view)


# ---------------------------------------------------------------------------------------- the grid
def _check_setup(recipe: Recipe) -> None:
    for key in recipe.setup:
        if key not in SPEC_SETUP_KEYS and key not in RUN_META_KEYS:
            raise RecipeError(
                f"{recipe.source}: unknown setup key {key!r}; valid keys: {', '.join(SPEC_SETUP_KEYS + RUN_META_KEYS)}"
            )


def _check_matrix(recipe: Recipe) -> None:
    """Every axis has items, each with a label of its own (the label names the cell in tables and ``--only``)."""
    for axis, values in recipe.matrix.items():
        if not values:
            raise RecipeError(f"{recipe.source}: matrix.{axis} is empty")
        labels = recipe.axis_labels(axis)
        if len(set(labels)) != len(labels):
            raise RecipeError(
                f"{recipe.source}: matrix.{axis} has duplicate labels {labels}; give each item a distinct label"
            )


def _check_overrides(recipe: Recipe) -> None:
    """``overrides.AXIS.LABEL`` names a matrix axis and one of its labels, and sets setup keys."""
    for axis, per_value in recipe.overrides.items():
        if axis not in recipe.matrix:
            raise RecipeError(f"{recipe.source}: overrides.{axis}: {axis!r} is not a matrix axis")
        labels = set(recipe.axis_labels(axis))
        for label, values in per_value.items():
            if label not in labels:
                raise RecipeError(
                    f"{recipe.source}: overrides.{axis}.{label}: no such value on axis {axis!r} "
                    f"({', '.join(sorted(labels))})"
                )
            check_setup_keys(values, f"overrides.{axis}.{label}", recipe.source)


def _check_combinations(recipe: Recipe) -> None:
    """A combination rule matches labels that exist (a rule that can never match is a typo, not a no-op) and sets
    setup keys."""
    for i, combo in enumerate(recipe.combination):
        for axis, value in combo.match.items():
            _check_match(recipe, f"combination[{i}].match.{axis}", axis, value)
        check_setup_keys(combo.set, f"combination[{i}].set", recipe.source)


def _check_match(recipe: Recipe, key: str, axis: str, value: str) -> None:
    if axis == "scale":  # `scale` matches the chosen scale profile
        return
    if axis not in recipe.matrix:
        raise RecipeError(f"{recipe.source}: {key}: {axis!r} is not a matrix axis")
    labels = recipe.axis_labels(axis)
    if value not in labels:
        raise RecipeError(f"{recipe.source}: {key} = {value!r}: no such value on axis {axis!r} ({', '.join(labels)})")


def _check_seeds(seeds: Any, key: str, where: Path | None) -> None:
    """A non-empty list of integers: an empty one would compile to no runs and look like a recipe without any."""
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
    ):
        raise RecipeError(f"{where}: {key} = {seeds!r}: expected a non-empty list of integers, e.g. {key} = [0, 1, 2]")
    unstorable = seed_out_of_range(seeds)
    if unstorable:
        raise RecipeError(f"{where}: {key}: {unstorable}")


def _check_scales(recipe: Recipe) -> None:
    """A scale profile sets setup keys, and may replace the seeds."""
    for name, profile in recipe.scale.items():
        check_setup_keys({k: v for k, v in profile.items() if k != "seeds"}, f"scale.{name}", recipe.source)
        if "seeds" in profile:
            _check_seeds(profile["seeds"], f"scale.{name}.seeds", recipe.source)


# ---------------------------------------------------------------------------------------- the views
def _view_error(recipe: Recipe, view: TableView, text: str) -> RecipeError:
    return RecipeError(f"{recipe.source}: tables '{view.name}': {text}")


def _check_view(recipe: Recipe, view: TableView) -> None:
    """An analytic view (models, overheads) needs its static rows; a view of runs, every rule below in turn."""
    _check_reproduces(recipe, view)
    _check_derived(recipe, view)
    _check_diagnostic(recipe, view)
    if view.claims and view.kind != "runs":
        raise _view_error(
            recipe, view, f"claims are about a table of runs (this view is of kind {view.kind!r}): drop them"
        )
    if view.kind in ("models", "overheads"):
        if not view.static_rows:
            raise _view_error(recipe, view, f"kind {view.kind!r} needs static_rows")
        return
    _check_rows(recipe, view)
    _check_partition(recipe, view)
    _check_published_ratio(recipe, view)
    _check_at_round(recipe, view)
    _check_keys(recipe, view)
    _check_where(recipe, view)
    _check_metrics(recipe, view)
    _check_peak_memory(recipe, view)
    _check_target(recipe, view)
    _check_cell_labels(recipe, view)
    _check_baseline(recipe, view)
    for i, claim in enumerate(view.claims):
        _check_claim(recipe, view, f"claims[{i}]", claim)


def _check_reproduces(recipe: Recipe, view: TableView) -> None:
    """Each paper item a view declares is named once, without blanks around it (the coverage check compares names)."""
    seen: set[str] = set()
    for item in view.reproduces:
        if not item or item != item.strip():
            raise _view_error(recipe, view, f"reproduces: {item!r} is not a table or figure label")
        if item in seen:
            raise _view_error(recipe, view, f"reproduces: {item!r} is declared twice")
        seen.add(item)


def _check_derived(recipe: Recipe, view: TableView) -> None:
    """A derived mark names a published value: a mark on a cell without one is a typo."""
    has_columns = bool(view.columns) or view.kind != "runs"  # analytic tables have columns of their own
    for std, name in ((False, "published_derived"), (True, "published_std_derived")):
        marked = view.published_std_derived if std else view.published_derived
        if marked and isinstance(marked, list) and has_columns:
            raise _view_error(
                recipe,
                view,
                f"{name} is a list of rows only in a view without columns; "
                'here mark cells as { row = ["column", ...] }',
            )
        if marked and isinstance(marked, dict) and not has_columns:
            raise _view_error(recipe, view, f'the view has no columns, so {name} lists rows: ["row", ...]')
        for row, column in view.derived_cells(std):
            _check_derived_cell(recipe, view, name, std, row, column)


def _check_derived_cell(recipe: Recipe, view: TableView, name: str, std: bool, row: str, column: str | None) -> None:
    """A marked cell has a published value (or std): a row's in a view without columns, a cell's in one with them."""
    entry = (view.published_std if std else view.published).get(row)
    value = entry.get(column) if isinstance(entry, dict) and column is not None else entry
    if value is None or isinstance(entry, dict) is (column is None):
        cell = repr(row) if column is None else f"{row!r}.{column!r}"
        what = "published_std" if std else "published"
        raise _view_error(recipe, view, f"{name} marks {cell}, which has no {what} value")


def _check_rows(recipe: Recipe, view: TableView) -> None:
    if not view.rows:
        raise _view_error(recipe, view, "rows must name at least one matrix axis")


def _check_partition(recipe: Recipe, view: TableView) -> None:
    if view.kind == "partition" and (view.columns or not recipe.setup):
        raise _view_error(
            recipe,
            view,
            "a partition view draws one panel per row of the recipe's runs: it needs a setup and takes no columns",
        )


def _check_published_ratio(recipe: Recipe, view: TableView) -> None:
    if view.published_ratio and view.ratio_to is None:
        raise _view_error(recipe, view, "published_ratio needs ratio_to (the reference cell)")


def _check_at_round(recipe: Recipe, view: TableView) -> None:
    if view.figure == "value_at_round" and view.at_round is None and not view.at_rounds:
        raise _view_error(recipe, view, "figure 'value_at_round' needs at_round or at_rounds")


def _check_keys(recipe: Recipe, view: TableView) -> None:
    """Every row and column key is a matrix axis, or a pseudo-axis the view defines."""
    for key in view.rows + view.columns:
        if key not in recipe.matrix and not _is_pseudo_axis(view, key):
            raise _view_error(recipe, view, f"{key!r} is not a matrix axis ({', '.join(sorted(recipe.matrix))})")


def _is_pseudo_axis(view: TableView, key: str) -> bool:
    """ "client", "round" and "metric" are keys of a view that names its clients, at_rounds or metrics."""
    return (
        (key == "client" and bool(view.clients))
        or (key == "round" and bool(view.at_rounds))
        or (key == "metric" and bool(view.metrics))
    )


def _check_where(recipe: Recipe, view: TableView) -> None:
    """``where`` filters on matrix axes by their labels (a filter that matches nothing is a typo that empties the
    view)."""
    for key, value in view.where.items():
        if key not in recipe.matrix:
            raise _view_error(
                recipe, view, f"where.{key}: {key!r} is not a matrix axis ({', '.join(sorted(recipe.matrix))})"
            )
        labels = recipe.axis_labels(key)
        for label in alternatives(value):
            if label not in labels:
                raise _view_error(
                    recipe, view, f"where.{key} = {label!r}: no such value on axis {key!r} ({', '.join(labels)})"
                )


def _check_diagnostic(recipe: Recipe, view: TableView) -> None:
    """A diagnostics view names its diagnostic, and every run it selects records it, at every scale (a figure
    of runs that record nothing would stay empty after days of training); a view of another kind names none.
    ``layout`` is one of the diagnostic's own (the catalogue's ``layouts``), ``layers`` picks the lines of a
    per_layer layout."""
    if view.kind != "diagnostics":
        if view.diagnostic is not None or view.layout != "default" or view.layers:
            key = "diagnostic" if view.diagnostic is not None else "layout" if view.layout != "default" else "layers"
            raise _view_error(
                recipe, view, f"{key} is for a view of kind 'diagnostics' (this one is {view.kind!r}): drop it"
            )
        return
    name = view.diagnostic
    if name is None:
        raise _view_error(
            recipe, view, f"kind 'diagnostics' needs diagnostic = one of {', '.join(map(repr, DIAGNOSTIC_NAMES))}"
        )
    if view.layout != "default" and view.layout not in DIAGNOSTICS[name].layouts:
        arranged = ", ".join(n for n, d in DIAGNOSTICS.items() if view.layout in d.layouts)
        raise _view_error(recipe, view, f"layout {view.layout!r} arranges {arranged} only; drop it")
    if view.layers and view.layout != "per_layer":
        raise _view_error(recipe, view, "layers picks the lines of layout 'per_layer'; set it or drop layers")
    from fedbench.recipes.expand import cell_setups  # local: expand imports this module

    for scale in recipe.scale_names():
        for labels, setup in cell_setups(recipe, scale):
            if view.selects(labels) and name not in setup.get("diagnostics", ()):
                cell = ", ".join(f"{k}={v}" for k, v in labels.items()) or "all"
                raise _view_error(
                    recipe,
                    view,
                    f"diagnostic {name!r} is not recorded by run {cell} (scale {scale}): add it to the setup's "
                    f'diagnostics (diagnostics = ["{name}"]) or leave that run out of the view (where)',
                )


def _check_metrics(recipe: Recipe, view: TableView) -> None:
    if view.metrics and "metric" not in view.rows + view.columns:
        raise _view_error(recipe, view, 'metrics needs "metric" in rows or columns')


def _check_peak_memory(recipe: Recipe, view: TableView) -> None:
    if view.figure == "peak_memory_mb" and view.summary != "mean_std":
        raise _view_error(recipe, view, "figure 'peak_memory_mb' is a value per run; use summary = 'mean_std'")


def _check_target(recipe: Recipe, view: TableView) -> None:
    if FIGURES[view.figure].needs_target and view.target is None and not view.target_by:
        raise _view_error(recipe, view, f"figure {view.figure!r} needs a target")


def _check_cell_labels(recipe: Recipe, view: TableView) -> None:
    """Published values, ``ratio_to`` and ``target_by`` name rows and columns; a name that is not one is a
    typo that would silently drop a number from the report."""
    rows, columns = _cell_labels(recipe, view, view.rows), _cell_labels(recipe, view, view.columns)
    _check_published_only(recipe, view, rows)
    if rows is not None:
        rows |= set(view.published_only)
    _check_named_cells(recipe, view, rows, columns)
    _check_published_cells(recipe, view, rows, columns)


def _cell_labels(recipe: Recipe, view: TableView, keys: list[str]) -> set[str] | None:
    """Every row (or column) label a table can have: its axes' labels joined by " / " as the report joins
    them; None when one axis is the "client" pseudo-axis (its labels come from the data)."""
    parts = []
    for key in keys:
        if key in recipe.matrix:
            parts.append(recipe.axis_labels(key))
        elif key == "round":
            parts.append([str(r) for r in view.at_rounds])
        elif key == "metric":
            parts.append(list(view.metrics))
        else:
            return None
    return {" / ".join(p) for p in itertools.product(*parts)}


def _check_published_only(recipe: Recipe, view: TableView, rows: set[str] | None) -> None:
    """A row quoted from another paper has a published value and is not also a row of runs."""
    for row in view.published_only:
        if row not in view.published:
            raise _view_error(recipe, view, f"published_only row {row!r} has no published value")
        if rows is not None and row in rows:
            raise _view_error(recipe, view, f"published_only row {row!r} is a row of runs")


def _check_named_cells(recipe: Recipe, view: TableView, rows: set[str] | None, columns: set[str] | None) -> None:
    """Each label of ``target_by``, and ``ratio_to``, is a row or a column."""
    if rows is None or columns is None:
        return
    either = sorted(rows | columns)
    named = [(f"target_by.{label!r}", label) for label in view.target_by]
    if view.ratio_to is not None:
        named.append(("ratio_to", view.ratio_to))
    for key, value in named:
        if value not in either:
            raise _view_error(recipe, view, f"{key}: {value!r} is not a row or column ({', '.join(either)})")


def _check_published_cells(recipe: Recipe, view: TableView, rows: set[str] | None, columns: set[str] | None) -> None:
    """Each published value (std, printed ratio) sits in a row, and a column where it names one."""
    for name, published in (
        ("published", view.published),
        ("published_std", view.published_std),
        ("published_ratio", view.published_ratio),
    ):
        for row, entry in published.items():
            if rows is not None and row not in rows:
                raise _view_error(recipe, view, f"{name}.{row!r} is not a row ({', '.join(sorted(rows))})")
            unknown = [c for c in entry if c not in columns] if isinstance(entry, dict) and columns is not None else []
            if unknown:
                raise _view_error(
                    recipe, view, f"{name}.{row!r}.{unknown[0]!r} is not a column ({', '.join(sorted(columns or ()))})"
                )


def _check_baseline(recipe: Recipe, view: TableView) -> None:
    """A named baseline is a label of the baseline axis, which must be a row or column key of the view."""
    if view.baseline in (None, "none"):
        return
    if view.baseline_axis not in view.rows + view.columns:
        raise _view_error(
            recipe,
            view,
            f"baseline = {view.baseline!r} needs baseline_axis {view.baseline_axis!r} among rows or columns "
            f'({", ".join(view.rows + view.columns)}), or baseline = "none"',
        )
    if view.baseline_axis in recipe.matrix:
        labels = recipe.axis_labels(view.baseline_axis)
        if view.baseline not in labels:
            raise _view_error(
                recipe,
                view,
                f"baseline = {view.baseline!r} is not a label of axis {view.baseline_axis!r} ({', '.join(labels)})",
            )


def _key_labels(recipe: Recipe, view: TableView, key: str) -> list[str]:
    """The labels a row or column key takes in the view: a matrix axis's (those its ``where`` keeps) or a
    pseudo-axis's ("client": the named clients and "Avg.", as the table builder expands them)."""
    if key == "client":
        return [*view.clients, "Avg."]
    if key == "round":
        return [str(r) for r in view.at_rounds]
    if key == "metric":
        return list(view.metrics)
    labels = recipe.axis_labels(key)
    kept = alternatives(view.where[key]) if key in view.where else labels
    return [label for label in labels if label in kept]


def _check_claim(recipe: Recipe, view: TableView, key: str, claim: Claim) -> None:
    """A claim is of one kind (``best`` or an ``order`` of two or more labels), ranks labels of a row or column key
    of the view along a figure with a better side, names groups the view has, and quotes the paper and where."""
    if (claim.best is None) == (not claim.order):
        what = (
            "best and order are two kinds of claim: give one"
            if claim.best is not None
            else ('needs best = "<label>" (the label the paper says is best) or order = ["<label>", ...] (best first)')
        )
        raise _view_error(recipe, view, f"{key}: {what}")
    if claim.order and len(set(claim.order)) < max(2, len(claim.order)):
        raise _view_error(recipe, view, f"{key}.order = {claim.order!r}: an order needs two or more distinct labels")
    axis = view.claim_axis(claim)
    keys = view.rows + view.columns
    if axis not in keys:
        raise _view_error(recipe, view, f"{key}.axis = {axis!r} is not a row or column key ({', '.join(keys)})")
    if FIGURES[view.figure].better == "none":
        raise _view_error(recipe, view, f"{key}: figure {view.figure!r} has no better side, so nothing ranks first")
    labels = _key_labels(recipe, view, axis)
    for name, values in (("best", [claim.best] if claim.best is not None else []), ("order", claim.order)):
        for value in values:
            if value not in labels:
                raise _view_error(
                    recipe, view, f"{key}.{name} = {value!r}: no such label on {axis!r} ({', '.join(labels)})"
                )
    groups = {
        " / ".join(p) for p in itertools.product(*(_key_labels(recipe, view, k) for k in view.claim_group_keys(claim)))
    }
    noun = view.claim_group_noun(claim)
    for group in claim.within:
        if group not in groups:
            raise _view_error(
                recipe, view, f"{key}.within = {group!r}: not a {noun} of the view ({', '.join(sorted(groups))})"
            )
    for name in ("quote", "location"):
        if not getattr(claim, name).strip():
            raise _view_error(recipe, view, f"{key}.{name} is empty: give the paper's sentence and where it says it")


# ---------------------------------------------------------------------------------------- a compiled run
def check_augmentation(augmentation, input_shape: tuple[int, ...], dataset: str) -> None:
    """Bounds that depend on the data: the Cutout square must fit in the image (side ≤ height and width).
    ``augmentation`` is a ``fedbench.spec.AugmentationSpec``; ``input_shape`` is (C, H, W)."""
    size = augmentation.cutout
    if not size:
        return
    if len(input_shape) != 3:
        raise ConfigError(
            f"augmentation.cutout = {size}: dataset {dataset!r} has inputs of shape {tuple(input_shape)}, "
            "not (C, H, W) images"
        )
    height, width = int(input_shape[1]), int(input_shape[2])
    if size > min(height, width):
        raise ConfigError(
            f"augmentation.cutout = {size} is larger than the {height}×{width} images of dataset "
            f"{dataset!r}; use at most {min(height, width)} (0 = off)"
        )


def check_spec(spec: RunSpec, source: Path | str | None = None) -> None:
    """Checks that need the data set's registered shape (plug-in names and parameters were resolved when the
    spec was built), so a bad recipe fails before anything runs."""
    from fedbench.data import static_input_shape  # local: keeps numpy out of export's start-up

    try:
        check_augmentation(spec.augmentation, static_input_shape(spec.dataset, spec.dataset_params), spec.dataset)
    except (ConfigError, UnknownNameError) as exc:
        message = f"{source}: {exc}" if source else str(exc)
        raise (exc.reworded(message) if isinstance(exc, UnknownNameError) else type(exc)(message)) from None
