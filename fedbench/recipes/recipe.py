"""TOML recipe → validated Recipe → list of PlannedRun (RunSpec + labels).

A recipe describes one paper table: a base ``setup``, a ``matrix`` of axes whose combinations are
the table's cells, per-value ``overrides`` and per-combination ``combination`` overrides, named
``scale`` profiles, ``seeds``, and one or more ``tables`` views with the paper's published values.
Merge order for every run: setup → axis values → overrides → combinations → scale → ``--set``.
Unknown keys are errors everywhere: a typo must never be silently ignored. Format: docs/recipes.md.
"""

from __future__ import annotations

import copy
import itertools
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from fedbench.errors import ConfigError, FedbenchError, RecipeError, UnknownNameError
from fedbench.recipes.assignments import nested_assignments, parse_assignment  # noqa: F401  (parse_assignment: re-export)
from fedbench.spec import SETUP_KEYS, RunSpec
from fedbench.vocab.metrics import CURVE_METRICS

# Keys a setup may hold that do not change a run's result, so they are not part of the spec hash.
RUN_META_KEYS = ("targets",)
SPEC_SETUP_KEYS = tuple(k for k in SETUP_KEYS if k not in ("seed", "scale", "synthetic"))
FIGURES = (
    "best",
    "final",
    "last_k_mean",
    "best_round",
    "rounds_to_target",
    "total_bytes_to_target",
    "gflops_to_target",
    "value_at_round",
    "wall_seconds",
    "seconds_per_round",
    "wall_hours",
    "peak_memory_mb",
    "val_selected",
)
# Figures of a whole run rather than of a metric's curve: wall-clock time (the rounds' wall_seconds) and the peak
# memory recorded in its provenance (LG-Mix Tables 8-9).
RUN_FIGURES = ("wall_seconds", "wall_hours", "peak_memory_mb")
DERIVED_MARK = "‡"  # beside a published value the paper does not print (``published_derived``)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Combination(_Strict):
    match: dict[str, str]
    set: dict[str, Any] = {}
    skip: bool = False


class StaticRow(_Strict):
    """A row of an analytic table (no runs): a model configuration or a method in a setting."""

    label: str
    model: str | None = None
    dataset: str | None = None
    model_params: dict[str, Any] = {}
    algorithm: str | None = None
    algorithm_params: dict[str, Any] = {}


class TableView(_Strict):
    name: str
    title: str = ""
    caption: str = ""
    # runs: cells from the registry.  models: parameter/communication/FLOP statistics of `static_rows`
    # (e.g. FedTrip Table III).  overheads: per-round attaching computation and extra communication of
    # each method of `static_rows` in the `setting` (FedTrip Table VIII).  partition: each row's per-client class
    # counts, from the partition its runs train on (the first seed's partition stream), no training (FedTR Fig. 2).
    kind: Literal["runs", "models", "overheads", "partition"] = "runs"
    static_rows: list[StaticRow] = []
    setting: dict[str, Any] = {}  # overheads: model, dataset, samples_per_client, batch_size, local_epochs
    rows: list[str] = []
    columns: list[str] = []
    figure: Literal[FIGURES] = "best"  # type: ignore[valid-type]
    metric: Literal[CURVE_METRICS] = "test_acc"  # type: ignore[valid-type]
    k: int = Field(10, ge=1)  # for last_k_mean
    target: float | None = None  # for rounds_to_target (same unit as the metric)
    target_by: dict[str, float] = {}  # per row/column label targets (FedTrip Table IV)
    target_rule: Literal["first_reach", "count_not_above"] = "first_reach"
    at_round: int | None = None  # for value_at_round
    at_rounds: list[int] = []  # value_at_round at several rounds: a "round" row/column key
    ratio_to: str | None = None  # also show each cell ÷ the cell of this row/column label
    plot: Literal["curves", "box", "none"] = "curves"  # --plots: mean ± std curves, or box plots of the figure
    plot_by: Literal["rows", "columns"] = "rows"  # one figure per row (or column) value
    smoothing: float = Field(0.0, ge=0, lt=1)  # EMA weight for plotted curves (FedTrip Fig. 5 uses 0.5)
    summary: Literal["mean_std", "mean_curve"] = "mean_std"
    percent: bool = True  # print accuracies ×100
    # published[row key][column key], or published[row key] when the table has no column axes
    published: dict[str, dict[str, float | str] | float | str] = {}
    published_std: dict[str, dict[str, float] | float] = {}
    # Rows the paper quotes from other papers (no runs, e.g. FedImpro Table 10's FedDyn/CCVR rows): shown with their
    # published value only.  Each needs a `published` entry; with them the rows follow the order of `published`.
    published_only: list[str] = []
    # The ratio to the ratio_to cell the paper printed, where the recipe records it: the report recomputes the
    # paper's ratio from its published values and shows the printed one where the two differ (FedTrip Table IV).
    published_ratio: dict[str, dict[str, float] | float] = {}
    # Published values (and stds) the paper does not print: reconstructed, copied from another table, ... Cells as
    # { row = ["column", ...] }, or ["row", ...] when the view has no columns; shown with DERIVED_MARK, and
    # `derived_note` says how they were derived (the caption line of the mark).
    published_derived: dict[str, list[str]] | list[str] = {}
    published_std_derived: dict[str, list[str]] | list[str] = {}
    derived_note: str = ""
    # A "metric" pseudo-axis: { label = "curve metric", ... }; with "metric" in rows or columns each entry shows
    # its own metric (LG-Mix Table 7: Accuracy, AUC, Sensitivity, ...), and `metric` is not used.
    metrics: dict[str, Literal[CURVE_METRICS]] = {}  # type: ignore[valid-type]
    # Names of clients 0..N-1 (LG-Mix's A–E): with them, "client" may be a row or column key: one entry per
    # client (that client's value of a personal/finetune metric) and "Avg." (the metric itself).
    clients: list[str] = []
    # Only the runs whose labels match (e.g. { dataset = "Digits5" }): one view per dataset of a recipe; a list
    # gives alternatives (LG-Mix Fig. 4: { algorithm = ["fedavg", "fedalt", ...] }).
    where: dict[str, str | list[str]] = {}
    # Every cell is compared with the cell of the same labels whose `baseline_axis` label is `baseline` (paired by
    # seed, fedbench/report/stats.py). Unset: the label of that axis whose runs are all FedAvg, when there is one;
    # "none": no comparison.
    baseline: str | None = None
    baseline_axis: str = "algorithm"
    # A cell reproduces the paper when the published value is inside our 95 % interval, or within this much of
    # our value (in the cell's displayed unit, e.g. 1.0 = one percentage point of accuracy).
    tolerance: float = Field(0.0, ge=0)

    def selects(self, labels: Mapping[str, str]) -> bool:
        """Whether a run with these labels belongs to the view (its `where`)."""
        return all(labels.get(key) in _alternatives(value) for key, value in self.where.items())

    def published_value(self, row: str, column: str, std: bool = False) -> float | str | None:
        entry = (self.published_std if std else self.published).get(row)
        return entry.get(column) if isinstance(entry, dict) else entry

    def printed_ratio(self, row: str, column: str) -> float | None:
        entry = self.published_ratio.get(row)
        return entry.get(column) if isinstance(entry, dict) else entry

    def derived_cells(self, std: bool = False) -> list[tuple[str, str | None]]:
        """The (row, column) cells whose published value (or std) is marked derived; column None in a view
        without columns."""
        marked = self.published_std_derived if std else self.published_derived
        if isinstance(marked, list):
            return [(row, None) for row in marked]
        return [(row, column) for row, columns in marked.items() for column in columns]

    def is_derived(self, row: str, column: str, std: bool = False) -> bool:
        return any(r == row and c in (None, column) for r, c in self.derived_cells(std))

    def view_metrics(self) -> list[tuple[str | None, str]]:
        """(label, curve metric) of each entry of the "metric" pseudo-axis; [(None, metric)] without one."""
        return list(self.metrics.items()) if self.metrics else [(None, self.metric)]

    @field_validator("rows", "columns", mode="before")
    @classmethod
    def _listify(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


def _alternatives(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value


class Recipe(_Strict):
    paper: str
    name: str
    title: str = ""
    description: str = ""
    order: int = 100  # position among the paper's recipes in `fedbench report --paper`
    seeds: list[int] = [0]
    setup: dict[str, Any] = {}  # empty for a recipe of analytic tables only
    matrix: dict[str, list[Any]] = {}
    overrides: dict[str, dict[str, dict[str, Any]]] = {}
    combination: list[Combination] = []
    scale: dict[str, dict[str, Any]] = {}
    tables: list[TableView] = []

    source: Path | None = None  # set by load_recipe

    def scale_names(self) -> list[str]:
        return ["full", *self.scale]

    def table(self, name: str) -> TableView:
        for view in self.tables:
            if view.name == name:
                return view
        raise RecipeError(f"{self.source}: no table {name!r}; tables: {', '.join(v.name for v in self.tables)}")


@dataclass(frozen=True)
class PlannedRun:
    """One compiled run: the spec plus where it sits in the recipe's tables."""

    spec: RunSpec
    labels: dict[str, str]
    paper: str
    recipe: str
    targets: tuple[float, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def spec_hash(self) -> str:  # computed once: hashing canonical JSON dominates a large report's time
        return self.spec.spec_hash

    def registry_entry(self) -> dict[str, Any]:
        spec = self.spec
        return {
            "spec_hash": spec.spec_hash,
            "spec": spec.model_dump(mode="json"),
            "labels": self.labels,
            "paper": self.paper,
            "recipe": self.recipe,
            "algorithm": spec.algorithm,
            "dataset": spec.dataset,
            "seed": spec.seed,
            "scale": spec.scale,
            "synthetic": spec.synthetic,
            "targets": list(self.targets),
        }


# ---------------------------------------------------------------------------------------- loading
def _where(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc)


def load_recipe(path: str | Path) -> Recipe:
    path = Path(path)
    if not path.is_file():
        raise RecipeError(f"{path}: recipe file not found; recipes live in recipes/ (e.g. recipes/quickstart.toml)")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise RecipeError(f"{path}: not valid TOML: {exc}") from None
    try:
        recipe = Recipe(**raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = _where(first["loc"])
        if first["type"] == "extra_forbidden":
            raise RecipeError(f"{path}: unknown key {key!r}; see docs/recipes.md for the recipe format") from None
        raise RecipeError(f"{path}: {key}: {first['msg']}") from None
    recipe.source = path
    _check_structure(recipe)
    return recipe


def _check_structure(recipe: Recipe) -> None:
    where = recipe.source
    for key in recipe.setup:
        if key not in SPEC_SETUP_KEYS and key not in RUN_META_KEYS:
            raise RecipeError(
                f"{where}: unknown setup key {key!r}; valid keys: {', '.join(SPEC_SETUP_KEYS + RUN_META_KEYS)}"
            )
    for axis, values in recipe.matrix.items():
        if not values:
            raise RecipeError(f"{where}: matrix.{axis} is empty")
        labels = [_axis_item(recipe, axis, v)[0] for v in values]
        if len(set(labels)) != len(labels):
            raise RecipeError(f"{where}: matrix.{axis} has duplicate labels {labels}; give each item a distinct label")
    for axis, per_value in recipe.overrides.items():
        if axis not in recipe.matrix:
            raise RecipeError(f"{where}: overrides.{axis}: {axis!r} is not a matrix axis")
        labels = {_axis_item(recipe, axis, v)[0] for v in recipe.matrix[axis]}
        for label, values in per_value.items():
            if label not in labels:
                raise RecipeError(
                    f"{where}: overrides.{axis}.{label}: no such value on axis {axis!r} ({', '.join(sorted(labels))})"
                )
            _check_setup_keys(values, f"overrides.{axis}.{label}", where)
    for i, combo in enumerate(recipe.combination):
        for axis, value in combo.match.items():
            if axis == "scale":  # `scale` matches the chosen scale profile
                continue
            if axis not in recipe.matrix:
                raise RecipeError(f"{where}: combination[{i}].match.{axis}: {axis!r} is not a matrix axis")
            labels = _axis_labels(recipe, axis)
            if value not in labels:  # a rule that can never match is a typo, not a no-op
                raise RecipeError(
                    f"{where}: combination[{i}].match.{axis} = {value!r}: no such value on axis "
                    f"{axis!r} ({', '.join(labels)})"
                )
        _check_setup_keys(combo.set, f"combination[{i}].set", where)
    _check_seeds(recipe.seeds, "seeds", where)
    for name, profile in recipe.scale.items():
        _check_setup_keys({k: v for k, v in profile.items() if k != "seeds"}, f"scale.{name}", where)
        if "seeds" in profile:
            _check_seeds(profile["seeds"], f"scale.{name}.seeds", where)
    axes = set(recipe.matrix)
    for view in recipe.tables:
        _check_derived(view, where)
        if view.kind in ("models", "overheads"):
            if not view.static_rows:
                raise RecipeError(f"{where}: tables '{view.name}': kind {view.kind!r} needs static_rows")
            continue
        if not view.rows:
            raise RecipeError(f"{where}: tables '{view.name}': rows must name at least one matrix axis")
        if view.kind == "partition" and (view.columns or not recipe.setup):
            raise RecipeError(
                f"{where}: tables '{view.name}': a partition view draws one panel per row of the recipe's runs: "
                "it needs a setup and takes no columns"
            )
        if view.published_ratio and view.ratio_to is None:
            raise RecipeError(f"{where}: tables '{view.name}': published_ratio needs ratio_to (the reference cell)")
        if view.figure == "value_at_round" and view.at_round is None and not view.at_rounds:
            raise RecipeError(f"{where}: tables '{view.name}': figure 'value_at_round' needs at_round or at_rounds")
        for key in view.rows + view.columns:
            if (
                key not in axes
                and not (key == "client" and view.clients)
                and not (key == "round" and view.at_rounds)
                and not (key == "metric" and view.metrics)
            ):
                raise RecipeError(
                    f"{where}: tables '{view.name}': {key!r} is not a matrix axis ({', '.join(sorted(axes))})"
                )
        for key, value in view.where.items():
            if key not in axes:
                raise RecipeError(
                    f"{where}: tables '{view.name}': where.{key}: {key!r} is not a matrix axis ({', '.join(sorted(axes))})"
                )
            labels = _axis_labels(recipe, key)
            for label in _alternatives(value):
                if label not in labels:  # a filter that matches nothing is a typo that empties the view
                    raise RecipeError(
                        f"{where}: tables '{view.name}': where.{key} = {label!r}: no such value on axis {key!r} "
                        f"({', '.join(labels)})"
                    )
        if view.metrics and "metric" not in view.rows + view.columns:
            raise RecipeError(f"{where}: tables '{view.name}': metrics needs \"metric\" in rows or columns")
        if view.figure == "peak_memory_mb" and view.summary != "mean_std":
            raise RecipeError(
                f"{where}: tables '{view.name}': figure 'peak_memory_mb' is a value per run; use summary = 'mean_std'"
            )
        if (
            view.figure in ("rounds_to_target", "total_bytes_to_target", "gflops_to_target")
            and view.target is None
            and not view.target_by
        ):
            raise RecipeError(f"{where}: tables '{view.name}': figure {view.figure!r} needs a target")
        _check_cell_labels(recipe, view, where)
        _check_baseline(recipe, view, where)


def _check_baseline(recipe: Recipe, view: TableView, where: Path | None) -> None:
    """A named baseline is a label of the baseline axis, which must be a row or column key of the view."""
    if view.baseline in (None, "none"):
        return
    if view.baseline_axis not in view.rows + view.columns:
        raise RecipeError(
            f"{where}: tables '{view.name}': baseline = {view.baseline!r} needs baseline_axis "
            f"{view.baseline_axis!r} among rows or columns ({', '.join(view.rows + view.columns)}), "
            'or baseline = "none"'
        )
    if view.baseline_axis in recipe.matrix:
        labels = _axis_labels(recipe, view.baseline_axis)
        if view.baseline not in labels:
            raise RecipeError(
                f"{where}: tables '{view.name}': baseline = {view.baseline!r} is not a label of axis "
                f"{view.baseline_axis!r} ({', '.join(labels)})"
            )


def _axis_labels(recipe: Recipe, axis: str) -> list[str]:
    return [_axis_item(recipe, axis, v)[0] for v in recipe.matrix[axis]]


def _cell_labels(recipe: Recipe, view: TableView, keys: list[str]) -> set[str] | None:
    """Every row (or column) label a table can have: its axes' labels joined by " / " as the report joins
    them; None when one axis is the "client" pseudo-axis (its labels come from the data)."""
    parts = []
    for key in keys:
        if key in recipe.matrix:
            parts.append(_axis_labels(recipe, key))
        elif key == "round":
            parts.append([str(r) for r in view.at_rounds])
        elif key == "metric":
            parts.append(list(view.metrics))
        else:
            return None
    return {" / ".join(p) for p in itertools.product(*parts)}


def _check_cell_labels(recipe: Recipe, view: TableView, where: Path | None) -> None:
    """Published values, ``ratio_to`` and ``target_by`` name rows and columns; a name that is not one is a
    typo that would silently drop a number from the report."""
    rows, columns = _cell_labels(recipe, view, view.rows), _cell_labels(recipe, view, view.columns)
    for row in view.published_only:
        if row not in view.published:
            raise RecipeError(f"{where}: tables '{view.name}': published_only row {row!r} has no published value")
        if rows is not None and row in rows:
            raise RecipeError(f"{where}: tables '{view.name}': published_only row {row!r} is a row of runs")
    if rows is not None:
        rows |= set(view.published_only)
    either = None if rows is None or columns is None else sorted(rows | columns)
    named = [(f"target_by.{label!r}", label) for label in view.target_by]
    if view.ratio_to is not None:
        named.append(("ratio_to", view.ratio_to))
    for key, value in named:
        if either is not None and value not in either:
            raise RecipeError(
                f"{where}: tables '{view.name}': {key}: {value!r} is not a row or column ({', '.join(either)})"
            )
    for name, published in (
        ("published", view.published),
        ("published_std", view.published_std),
        ("published_ratio", view.published_ratio),
    ):
        for row, entry in published.items():
            if rows is not None and row not in rows:
                raise RecipeError(
                    f"{where}: tables '{view.name}': {name}.{row!r} is not a row ({', '.join(sorted(rows))})"
                )
            if isinstance(entry, dict) and columns is not None:
                for column in entry:
                    if column not in columns:
                        raise RecipeError(
                            f"{where}: tables '{view.name}': {name}.{row!r}.{column!r} is not a "
                            f"column ({', '.join(sorted(columns))})"
                        )


def _check_derived(view: TableView, where: Path | None) -> None:
    """A derived mark names a published value: a mark on a cell without one is a typo."""
    has_columns = bool(view.columns) or view.kind != "runs"  # analytic tables have columns of their own
    for std, name in ((False, "published_derived"), (True, "published_std_derived")):
        marked = view.published_std_derived if std else view.published_derived
        if marked and isinstance(marked, list) and has_columns:
            raise RecipeError(
                f"{where}: tables '{view.name}': {name} is a list of rows only in a view without columns; "
                'here mark cells as { row = ["column", ...] }'
            )
        if marked and isinstance(marked, dict) and not has_columns:
            raise RecipeError(
                f"{where}: tables '{view.name}': the view has no columns, so {name} lists rows: [\"row\", ...]"
            )
        for row, column in view.derived_cells(std):
            published = view.published_std if std else view.published
            entry = published.get(row)
            value = entry.get(column) if isinstance(entry, dict) and column is not None else entry
            if value is None or isinstance(entry, dict) is (column is None):
                cell = repr(row) if column is None else f"{row!r}.{column!r}"
                raise RecipeError(
                    f"{where}: tables '{view.name}': {name} marks {cell}, which has no "
                    f"{'published_std' if std else 'published'} value"
                )


def _check_seeds(seeds: Any, key: str, where: Path | None) -> None:
    """A non-empty list of integers: an empty one would compile to no runs and look like a recipe without any."""
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
    ):
        raise RecipeError(f"{where}: {key} = {seeds!r}: expected a non-empty list of integers, e.g. {key} = [0, 1, 2]")


def _check_setup_keys(values: dict[str, Any], where_key: str, where: Path | None) -> None:
    for key in values:
        if key not in SPEC_SETUP_KEYS and key not in RUN_META_KEYS:
            raise RecipeError(
                f"{where}: unknown key {where_key}.{key!r}; valid keys: {', '.join(SPEC_SETUP_KEYS + RUN_META_KEYS)}"
            )


def _axis_item(recipe: Recipe, axis: str, item: Any) -> tuple[str, dict[str, Any]]:
    """An axis item is a scalar (the value of the setup key named like the axis) or a table with a
    ``label`` and setup overrides."""
    if isinstance(item, dict):
        if "label" not in item:
            raise RecipeError(f"{recipe.source}: matrix.{axis}: every table item needs a 'label' ({item})")
        values = {k: v for k, v in item.items() if k != "label"}
        _check_setup_keys(values, f"matrix.{axis}[{item['label']}]", recipe.source)
        return str(item["label"]), values
    if axis not in SPEC_SETUP_KEYS:
        raise RecipeError(
            f"{recipe.source}: matrix.{axis}: {axis!r} is not a setup key, so its items must be tables "
            "with a 'label' and the setup keys they change"
        )
    return _label(item), {axis: item}


def _label(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


PLUGIN_KEYS = ("algorithm", "dataset", "model", "partition")


def merge_setup(setup: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``values`` into ``setup``; switching a plug-in (algorithm, dataset, model,
    partition) to another name starts its ``*_params`` afresh, since the old ones belong to the old one."""
    setup = dict(setup)
    for key in PLUGIN_KEYS:
        if key in values and values[key] != setup.get(key):
            setup.pop(f"{key}_params", None)
    return deep_merge(setup, values)


# ---------------------------------------------------------------------------------------- CLI values
def assignments_to_dict(items: list[str], option: str = "--set") -> dict[str, Any]:
    """``--set`` values: dotted setup keys, TOML values (the one parser in ``fedbench.recipes.assignments``)."""
    return nested_assignments(
        items, option, allowed=SPEC_SETUP_KEYS + RUN_META_KEYS, listed=SPEC_SETUP_KEYS, what="setup key"
    )


# ---------------------------------------------------------------------------------------- expansion
def _targets(values: Any, source: Path | str) -> tuple[float, ...]:
    """The setup's ``targets``: accuracies in % that runs' summaries report the rounds to."""
    if not isinstance(values, (list, tuple)) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
    ):
        raise RecipeError(
            f"{source}: targets = {values!r}: expected a list of accuracies in %, e.g. targets = [80, 90]"
        )
    return tuple(float(v) for v in values)


def expand(
    recipe: Recipe,
    scale: str = "full",
    seeds: list[int] | None = None,
    only: dict[str, str | set[str]] | None = None,
    overrides: dict[str, Any] | None = None,
    synthetic: bool = False,
    check: bool = True,
    untrained: bool = False,
) -> list[PlannedRun]:
    """Compile the recipe into runs: one per matrix combination × seed. ``only`` keeps the runs whose
    label for each key is one of the values given for it (several values of one key: either). A recipe whose
    views all need no training (partitions) has nothing to train: its cells compile only with ``untrained``."""
    if not recipe.setup and not recipe.matrix:
        return []  # analytic tables only
    if not untrained and recipe.tables and all(view.kind != "runs" for view in recipe.tables):
        return []  # e.g. FedTrip Fig. 4: partitions drawn from the cells' specs, no runs
    if scale not in recipe.scale_names():
        raise RecipeError(f"{recipe.source}: no scale {scale!r}; scales: {', '.join(recipe.scale_names())}")
    profile = dict(recipe.scale.get(scale, {}))
    run_seeds = seeds if seeds is not None else profile.pop("seeds", recipe.seeds)
    profile.pop("seeds", None)
    axes = list(recipe.matrix)
    items = [[_axis_item(recipe, axis, v) for v in recipe.matrix[axis]] for axis in axes]
    only = {key: {values} if isinstance(values, str) else set(values) for key, values in (only or {}).items()}
    for key, values in only.items():
        if key not in axes and key != "seed":
            raise ConfigError(
                f"--only {key}=...: {key!r} is not a label of {recipe.source} (labels: {', '.join(axes + ['seed'])})"
            )
        known = [str(s) for s in run_seeds] if key == "seed" else [label for label, _ in items[axes.index(key)]]
        for value in sorted(values - set(known)):
            raise ConfigError(f"--only {key}={value}: no such {key} in {recipe.source} ({', '.join(known)})")
    planned: list[PlannedRun] = []
    for combo in itertools.product(*items) if axes else [()]:
        labels = {axis: label for axis, (label, _) in zip(axes, combo)}
        if any(key != "seed" and labels.get(key) not in values for key, values in only.items()):
            continue
        setup = dict(recipe.setup)
        for axis, (label, values) in zip(axes, combo):
            setup = merge_setup(setup, values)
            setup = merge_setup(setup, recipe.overrides.get(axis, {}).get(label, {}))
        skip = False
        for rule in recipe.combination:
            if all({**labels, "scale": scale}.get(axis) == value for axis, value in rule.match.items()):
                skip = skip or rule.skip
                setup = merge_setup(setup, rule.set)
        if skip:
            continue
        setup = merge_setup(setup, profile)
        setup = merge_setup(setup, overrides or {})
        targets = _targets(setup.pop("targets", ()), recipe.source)
        for seed in run_seeds:
            if "seed" in only and str(seed) not in only["seed"]:
                continue
            spec = _build_spec(recipe, setup, seed, scale, synthetic, labels)
            if check:
                check_spec(spec, recipe.source)
            planned.append(PlannedRun(spec, labels, recipe.paper, recipe.name, targets))
    seen: dict[str, dict[str, str]] = {}
    for run in planned:
        other = seen.setdefault(run.spec_hash, run.labels)
        if other != run.labels:
            raise RecipeError(
                f"{recipe.source}: cells {other} and {run.labels} compile to the same run at scale {scale!r}; "
                "an override (often a scale profile) erases the difference between them"
            )
    return planned


def _build_spec(
    recipe: Recipe, setup: dict[str, Any], seed: int, scale: str, synthetic: bool, labels: dict[str, str]
) -> RunSpec:
    cell = ", ".join(f"{k}={v}" for k, v in labels.items())
    try:
        return RunSpec(**setup, seed=seed, scale=scale, synthetic=synthetic)
    except (ConfigError, UnknownNameError) as exc:  # a plug-in parameter, resolved while the spec is built
        raise type(exc)(f"{recipe.source}: {exc}" + (f" (run {cell})" if cell else "")) from None
    except ValidationError as exc:
        first = exc.errors()[0]
        key = _where(first["loc"]) or "setup"
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "missing":
            raise RecipeError(f"{recipe.source}: setup key {key!r} is required (run {cell or 'all'})") from None
        raise RecipeError(
            f"{recipe.source}: {key}: {msg} (run {cell or 'all'}, value {first.get('input')!r})"
        ) from None


def check_spec(spec: RunSpec, source: Path | str | None = None) -> None:
    """Checks that need the data set's registered shape (plug-in names and parameters were resolved when the
    spec was built), so a bad recipe fails before anything runs."""
    from fedbench.data import static_input_shape
    from fedbench.data.store import check_augmentation

    try:
        check_augmentation(spec.augmentation, static_input_shape(spec.dataset, spec.dataset_params), spec.dataset)
    except (ConfigError, UnknownNameError) as exc:
        raise type(exc)(f"{source}: {exc}" if source else str(exc)) from None


def compile_recipes(paths: list[str | Path], **kwargs: Any) -> list[PlannedRun]:
    planned: list[PlannedRun] = []
    seen: set[str] = set()
    for path in paths:
        recipe = load_recipe(path)
        for run in expand(recipe, **kwargs):
            if run.spec_hash not in seen:  # the same run may appear in several tables
                seen.add(run.spec_hash)
                planned.append(run)
    return planned


__all__ = ["Recipe", "TableView", "PlannedRun", "load_recipe", "expand", "compile_recipes", "FedbenchError"]
