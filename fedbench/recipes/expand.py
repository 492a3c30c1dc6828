"""Expansion: a recipe's grid → the list of ``PlannedRun``s (one ``RunSpec`` per cell × seed, with its labels).

Merge order for every run: setup → axis values → overrides → combinations → scale → ``--set`` → ``--set-for``. A
scale profile may replace the seeds; ``--only`` keeps the cells (and seeds) whose labels it names. A cell with a
value ``--add`` appended (``recipe.added``, fedbench/recipes/additions.py) carries the label ``added``.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from fedbench.errors import ConfigError, RecipeError, UnknownNameError, field_error
from fedbench.recipes.assignments import nested_assignments
from fedbench.recipes.load import load_recipe
from fedbench.recipes.resolve import resolve_spec
from fedbench.recipes.schema import ADDED_LABEL, RUN_META_KEYS, SPEC_SETUP_KEYS, Recipe
from fedbench.recipes.validate import check_spec
from fedbench.spec import RunSpec

if TYPE_CHECKING:
    from fedbench.recipes.additions import Additions

PLUGIN_KEYS = ("algorithm", "dataset", "model", "partition")
# (label, setup values) of each item of one matrix axis
AxisItems = list[tuple[str, dict[str, Any]]]


@dataclass(frozen=True)
class PlannedRun:
    """One compiled run: the spec plus where it sits in the recipe's tables."""

    spec: RunSpec
    labels: dict[str, str]
    paper: str
    recipe: str
    targets: tuple[float, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    # the spec's hash: given by expansion (which writes one canonical JSON per cell for all its seeds), else
    # computed here; ``dataclasses.replace`` carries it, so never replace the spec itself
    spec_hash: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.spec_hash:
            object.__setattr__(self, "spec_hash", self.spec.spec_hash)

    def registry_entry(self) -> dict[str, Any]:
        spec = self.spec
        return {
            "spec_hash": self.spec_hash,
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


# ---------------------------------------------------------------------------------------- merging
def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def merge_setup(setup: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``values`` into ``setup``; switching a plug-in (algorithm, dataset, model,
    partition) to another name starts its ``*_params`` afresh, since the old ones belong to the old one."""
    setup = dict(setup)
    for key in PLUGIN_KEYS:
        if key in values and values[key] != setup.get(key):
            setup.pop(f"{key}_params", None)
    return deep_merge(setup, values)


def assignments_to_dict(items: list[str], option: str = "--set") -> dict[str, Any]:
    """``--set`` values: dotted setup keys, TOML values (the one parser in ``fedbench.recipes.assignments``)."""
    return nested_assignments(
        items, option, allowed=SPEC_SETUP_KEYS + RUN_META_KEYS, listed=SPEC_SETUP_KEYS, what="setup key"
    )


# ---------------------------------------------------------------------------------------- expansion
def expand(
    recipe: Recipe,
    scale: str = "full",
    seeds: list[int] | None = None,
    only: Mapping[str, str | set[str]] | None = None,
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
    if not untrained and recipe.tables and not any(view.of_runs for view in recipe.tables):
        return []  # e.g. FedTrip Fig. 4: partitions drawn from the cells' specs, no runs
    if scale not in recipe.scale_names():
        raise RecipeError(f"{recipe.source}: no scale {scale!r}; scales: {', '.join(recipe.scale_names())}")
    profile = dict(recipe.scale.get(scale, {}))
    run_seeds = seeds if seeds is not None else profile.pop("seeds", recipe.seeds)
    profile.pop("seeds", None)
    items = {axis: [recipe.axis_item(axis, v) for v in values] for axis, values in recipe.matrix.items()}
    wanted = _label_filter(recipe, only or {}, items, run_seeds)
    planned: list[PlannedRun] = []
    for labels, setup in _cells(recipe, items, wanted, scale):
        setup = merge_setup(setup, profile)
        setup = merge_setup(setup, overrides or {})
        for rule in recipe.set_for:  # --set-for, after --set: the settings of the cells it selects
            if all(labels.get(axis) == value for axis, value in rule.match.items()):
                setup = merge_setup(setup, rule.set)
        labels = _with_added(recipe, labels)
        targets = _targets(setup.pop("targets", ()), recipe.source)
        kept = [seed for seed in run_seeds if "seed" not in wanted or str(seed) in wanted["seed"]]
        for spec, spec_hash in _seed_specs(recipe, setup, kept, scale, synthetic, labels, check):
            planned.append(PlannedRun(spec, labels, recipe.paper, recipe.name, targets, spec_hash=spec_hash))
    _check_distinct(recipe, planned, scale)
    return planned


def _seed_specs(
    recipe: Recipe,
    setup: dict[str, Any],
    seeds: list[int],
    scale: str,
    synthetic: bool,
    labels: dict[str, str],
    check: bool,
) -> list[tuple[RunSpec, str]]:
    """(spec, spec_hash) of one cell at each of ``seeds``. The seed changes nothing that resolving and checking
    a spec read (plug-in defaults, result revision, the data set's shape), so the cell is resolved and checked at
    its first seed and the other seeds are substituted (``RunSpec.with_seeds``): a recipe widened to thousands of
    seeds compiles, and reports, in a fraction of the time. The same specs and hashes as ``_each_seed``
    (tests/recipes/test_seed_expansion.py), which seeds that are not plain ints (a caller's ``seeds``) take."""
    if not seeds or any(type(seed) is not int for seed in seeds):
        return _each_seed(recipe, setup, seeds, scale, synthetic, labels, check)
    return _build_spec(recipe, setup, seeds[0], scale, synthetic, labels, check).with_seeds(seeds)


def _each_seed(
    recipe: Recipe,
    setup: dict[str, Any],
    seeds: list[int],
    scale: str,
    synthetic: bool,
    labels: dict[str, str],
    check: bool,
) -> list[tuple[RunSpec, str]]:
    """(spec, spec_hash) of one cell at each of ``seeds``, each resolved, checked and hashed on its own."""
    specs = [_build_spec(recipe, setup, seed, scale, synthetic, labels, check) for seed in seeds]
    return [(spec, spec.spec_hash) for spec in specs]


def _label_filter(
    recipe: Recipe, only: Mapping[str, str | set[str]], items: dict[str, AxisItems], run_seeds: list[int]
) -> dict[str, set[str]]:
    """``--only`` as {label key: the values kept}; a key or value the recipe does not have is a ConfigError (a
    filter that matches nothing is a typo, not an empty plan)."""
    wanted = {key: {values} if isinstance(values, str) else set(values) for key, values in only.items()}
    axes = list(items)
    for key, values in wanted.items():
        if key not in axes and key != "seed":
            raise ConfigError(
                f"--only {key}=...: {key!r} is not a label of {recipe.source} (labels: {', '.join(axes + ['seed'])})"
            )
        known = [str(s) for s in run_seeds] if key == "seed" else [label for label, _ in items[key]]
        for value in sorted(values - set(known)):
            raise ConfigError(f"--only {key}={value}: no such {key} in {recipe.source} ({', '.join(known)})")
    return wanted


def _cells(
    recipe: Recipe, items: dict[str, AxisItems], wanted: dict[str, set[str]], scale: str
) -> Iterator[tuple[dict[str, str], dict[str, Any]]]:
    """(labels, setup) of each cell of the grid that ``wanted`` keeps and no combination rule skips, in grid order;
    the setup merged as setup → axis values → overrides → combinations."""
    axes = list(items)
    for combo in itertools.product(*items.values()) if axes else [()]:
        labels = {axis: label for axis, (label, _) in zip(axes, combo)}
        if any(key != "seed" and labels.get(key) not in values for key, values in wanted.items()):
            continue
        setup = dict(recipe.setup)
        for axis, (label, values) in zip(axes, combo):
            setup = merge_setup(setup, values)
            setup = merge_setup(setup, recipe.overrides.get(axis, {}).get(label, {}))
        combined = _combined(recipe, setup, {**labels, "scale": scale})
        if combined is not None:
            yield labels, combined


def cell_setups(recipe: Recipe, scale: str) -> Iterator[tuple[dict[str, str], dict[str, Any]]]:
    """(labels, setup) of every cell of the recipe at ``scale``, merged as ``expand`` merges them up to the scale
    profile, without ``--set`` and without building a spec: what a rule about the cells' settings reads (a
    diagnostics view's runs record its diagnostic, ``fedbench.recipes.validate``)."""
    profile = {key: value for key, value in recipe.scale.get(scale, {}).items() if key != "seeds"}
    items = {axis: [recipe.axis_item(axis, v) for v in values] for axis, values in recipe.matrix.items()}
    for labels, setup in _cells(recipe, items, {}, scale):
        yield labels, merge_setup(setup, profile)


def _with_added(recipe: Recipe, labels: dict[str, str]) -> dict[str, str]:
    """A cell's labels, with ``added`` (the axes on which its value is one ``--add`` appended) if it is an added
    cell."""
    axes = [axis for axis, values in recipe.added.items() if labels.get(axis) in values]
    return {**labels, ADDED_LABEL: ",".join(axes)} if axes else labels


def added_axes(labels: Mapping[str, str]) -> list[str]:
    """The axes on which a cell's value is one ``--add`` appended, read from its labels (``_with_added``); none for
    a cell of the recipe's own values."""
    return labels[ADDED_LABEL].split(",") if ADDED_LABEL in labels else []


def _combined(recipe: Recipe, setup: dict[str, Any], labels: dict[str, str]) -> dict[str, Any] | None:
    """The setup with the ``set`` of every combination rule matching ``labels`` merged in, in the recipe's order;
    None when a matching rule skips the cell."""
    for rule in recipe.combination:
        if all(labels.get(axis) == value for axis, value in rule.match.items()):
            if rule.skip:
                return None
            setup = merge_setup(setup, rule.set)
    return setup


def _targets(values: Any, source: Path | str | None) -> tuple[float, ...]:
    """The setup's ``targets``: accuracies in % that runs' summaries report the rounds to."""
    if not isinstance(values, (list, tuple)) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in values
    ):
        raise RecipeError(
            f"{source}: targets = {values!r}: expected a list of accuracies in %, e.g. targets = [80, 90]"
        )
    return tuple(float(v) for v in values)


def _build_spec(
    recipe: Recipe, setup: dict[str, Any], seed: int, scale: str, synthetic: bool, labels: dict[str, str], check: bool
) -> RunSpec:
    """One cell's spec at ``seed``, checked against its plug-ins and data (``check_spec``) when ``check``."""
    cell = ", ".join(f"{k}={v}" for k, v in labels.items())
    try:
        spec = resolve_spec({**setup, "seed": seed, "scale": scale, "synthetic": synthetic})
    except (ConfigError, UnknownNameError) as exc:  # a plug-in parameter, resolved while the spec is built
        message = f"{recipe.source}: {exc}" + (f" (run {cell})" if cell else "")
        raise (exc.reworded(message) if isinstance(exc, UnknownNameError) else type(exc)(message)) from None
    except ValidationError as exc:
        bad = field_error(exc)
        key = bad.key or "setup"
        msg = bad.message.removeprefix("Value error, ")  # a check of the spec's own: its words are the message
        if bad.kind == "missing":
            raise RecipeError(f"{recipe.source}: setup key {key!r} is required (run {cell or 'all'})") from None
        raise RecipeError(f"{recipe.source}: {key}: {msg} (run {cell or 'all'}, value {bad.value!r})") from None
    if check:
        check_spec(spec, recipe.source)
    return spec


def _check_distinct(recipe: Recipe, planned: list[PlannedRun], scale: str) -> None:
    """Two cells never compile to the same run: their difference would vanish from the table."""
    seen: dict[str, dict[str, str]] = {}
    for run in planned:
        other = seen.setdefault(run.spec_hash, run.labels)
        if other != run.labels and (ADDED_LABEL in other) != (ADDED_LABEL in run.labels):
            added, own = (other, run.labels) if ADDED_LABEL in other else (run.labels, other)
            raise RecipeError(
                f"{recipe.source}: the added cell {added} compiles to the same run as the recipe's cell {own} at "
                f"scale {scale!r}: it is already in the table"
            )
        if other != run.labels:
            raise RecipeError(
                f"{recipe.source}: cells {other} and {run.labels} compile to the same run at scale {scale!r}; "
                "an override (often a scale profile) erases the difference between them"
            )


def compile_recipes(paths: list[str | Path], additions: Additions | None = None, **kwargs: Any) -> list[PlannedRun]:
    """The runs of several recipes, each once (the same run may appear in several tables); ``additions`` (``--add``,
    ``--set-for``) extend the recipes first."""
    recipes = [load_recipe(path) for path in paths]
    if additions:
        recipes = additions.extend(recipes)
    planned: list[PlannedRun] = []
    seen: set[str] = set()
    for recipe in recipes:
        for run in expand(recipe, **kwargs):
            if run.spec_hash not in seen:
                seen.add(run.spec_hash)
                planned.append(run)
    return planned
