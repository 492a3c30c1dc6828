"""``fedbench export`` and ``fedbench import``: move finished runs between registries as JSON lines
(library: ``fedbench.registry.transfer``)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from fedbench.cli.common import RegistryOption, console, err_console, note_unmatched, user_errors
from fedbench.cli.options import Plugins, load_plugins
from fedbench.errors import FedbenchError


@user_errors
def export(
    paper: str | None = typer.Option(None, "--paper", help="Only runs of this paper."),
    recipe: str | None = typer.Option(
        None, "--recipe", help="Only runs registered by this recipe (a recipe file, or its name)."
    ),
    out: Path | None = typer.Option(None, "--out", "-o", help="Write to this file [default: stdout]."),
    to: str | None = typer.Option(
        None,
        "--to",
        metavar="TRACKER",
        help="Write the runs to an experiment tracker instead: `mlflow` (MLflow's default store), "
        "`mlflow:TRACKING_URI` or `tensorboard:DIR`; one tracker run per fedbench run, updated (never duplicated) "
        "by a second export. Needs the extra `fedbench-repro[mlflow]` or `fedbench-repro[tensorboard]`.",
    ),
    registry: str | None = RegistryOption,
) -> None:
    """Write the registry's finished runs (spec, provenance, summary, curve) as JSON lines, or to MLflow or
    TensorBoard (`--to`).

    Example: `fedbench export --paper fedtrip --registry postgresql+psycopg://me@dbhost/fedbench > runs.jsonl` ·
    `fedbench export --recipe quickstart --to mlflow:sqlite:///mlflow.db` · `fedbench export --to tensorboard:tb`
    """
    from fedbench.registry import Registry
    from fedbench.registry.transfer import export_lines

    if to is not None and out is not None:
        raise FedbenchError("--out and --to: give one; --to writes to the tracker, --out to a runs file")
    tracker = None
    if to is not None:
        from fedbench.registry.tracking import open_tracker

        tracker = open_tracker(to)  # before the registry is read: a wrong --to costs nothing
    store = Registry.open_existing(registry)
    if store is None:
        raise FedbenchError(f"no registry at {Registry.resolve_url(registry)}: nothing to export")
    name = recipe
    if recipe is not None and Path(recipe).is_file():
        # local, and only for a recipe file: reading one imports the recipe schema (pydantic models, the spec)
        from fedbench.recipes.load import load_recipe

        name = load_recipe(recipe).name
    if to is not None and tracker is not None:
        from fedbench.registry.tracking import export_to_tracker

        done = export_to_tracker(tracker, store, paper=paper, recipe=name)
        err_console.print(
            f"exported {done.count} finished run(s) to {to.partition(':')[0]} {done.shown}: {len(done.new)} new, "
            f"{len(done.updated)} updated, {len(done.unchanged)} unchanged",
            highlight=False,
            soft_wrap=True,
        )
        if done.count == 0:
            note_unmatched(store, registry, paper, name)
        return
    lines = export_lines(store, paper=paper, recipe=name)
    if out is None:
        count = _write(lines, sys.stdout)
    else:
        try:
            with out.open("w", encoding="utf-8") as handle:
                count = _write(lines, handle)
        except OSError as exc:
            raise FedbenchError(f"--out {out}: cannot write ({exc.strerror})") from None
    err_console.print(f"exported {count} finished run(s)", highlight=False)
    if count == 0:  # a misspelt --paper or --recipe should not look like a registry without finished runs
        note_unmatched(store, registry, paper, name)


def _write(lines, handle) -> int:
    count = -1  # the header is not a run
    for line in lines:
        handle.write(line + "\n")
        count += 1
    return count


@user_errors
def import_runs(
    runs_file: Path = typer.Argument(..., help="A runs file written by `fedbench export`.", show_default=False),
    registry: str | None = RegistryOption,
    plugin: Plugins = [],  # noqa: B006
) -> None:
    """Merge finished runs from a runs file into the registry (idempotent; conflicts are reported, not overwritten).
    Runs of a plug-in's method, model or data set need that plug-in (``--plugin``) to check their specs.

    Example: `fedbench import runs.jsonl` then `fedbench report --paper fedtrip` ·
    `fedbench import runs.jsonl --plugin my_methods.py`
    """
    from fedbench.recipes.resolve import resolve_spec
    from fedbench.registry import Registry
    from fedbench.registry.transfer import import_runs as merge
    from fedbench.registry.transfer import read_runs_file

    load_plugins(plugin)
    runs = read_runs_file(runs_file, resolve_spec)  # the whole file is checked before the registry is opened
    outcome = merge(Registry(registry), runs)
    console.print(
        f"imported {len(outcome.added)} new run(s), completed {len(outcome.completed)}, "
        f"{len(outcome.unchanged)} already there, {len(outcome.conflicts)} conflict(s)",
        highlight=False,
    )
    for conflict in outcome.conflicts:
        err_console.print(
            f"[red]conflict[/red] {runs_file} line {conflict.line}: run {conflict.spec_hash}: {conflict.reason} "
            "(kept the registry's result)",
            highlight=False,
            soft_wrap=True,
        )
    if outcome.conflicts:
        raise typer.Exit(1)
