"""``fedbench report``: render recipes' tables from the registry (library: ``fedbench.report``)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console

from fedbench.cli.common import RegistryOption, console, err_console, user_errors
from fedbench.errors import FedbenchError


def writable_folder(option: str, folder: Path) -> None:
    """Create ``folder`` now, before any work: an unwritable place is a user error, not a traceback."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FedbenchError(
            f"{option} {folder}: cannot create that folder ({exc.strerror}); choose a writable one"
        ) from None


@user_errors
def report(
    paper: str | None = typer.Option(
        None, "--paper", help="Render every recipe of this paper (recipes/*.toml with paper = ID)."
    ),
    recipe: list[Path] = typer.Option([], "--recipe", help="Render these recipe files (repeatable)."),
    table: str | None = typer.Option(None, "--table", help="Only this table view."),
    scale: str = typer.Option("full", "--scale", help="Which scale's runs to show."),
    synthetic: bool = typer.Option(
        False, "--synthetic", help="Show runs on synthetic stand-in data (never mixed with real runs)."
    ),
    fmt: str = typer.Option("rich", "--format", help="rich, markdown, latex, csv, json or html."),
    out: Path | None = typer.Option(None, "--out", help="Write to this file instead of the terminal."),
    plots: Path | None = typer.Option(None, "--plots", help="Also write accuracy-vs-round PNGs to this folder."),
    recipes_dir: Path = typer.Option(Path("recipes"), "--recipes-dir", help="Where --paper looks for recipes."),
    registry: str | None = RegistryOption,
) -> None:
    """Render recipes' tables from the registry: ours (mean ± std, n) beside the published numbers.

    Example: `fedbench report --recipe recipes/quickstart.toml` ·
    `fedbench report --paper fedtrip --format markdown --out reports/fedtrip.md --plots reports/fedtrip`
    """
    from fedbench.registry import Registry
    from fedbench.report import FORMATS, render
    from fedbench.report.collect import build_tables, report_recipes, write_plots

    if fmt not in FORMATS:
        raise FedbenchError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if not paper and not recipe:
        raise FedbenchError("say what to report: --paper ID or --recipe FILE (e.g. --recipe recipes/quickstart.toml)")
    if out is not None and out.is_dir():
        raise FedbenchError(f"--out {out} is a folder; give a file path, e.g. --out {out / 'report.md'}")
    if out is not None:
        writable_folder("--out", out.parent)
    if plots is not None:
        writable_folder("--plots", plots)

    recipes = report_recipes(paper, recipe, recipes_dir)
    store = Registry.open_existing(registry)
    if store is None:
        err_console.print(
            f"no registry at {Registry.shown_url(registry)} yet: the tables hold no runs of ours", soft_wrap=True
        )
    tables = build_tables(recipes, store, scale=scale, table=table, synthetic=synthetic)
    rendered = render(tables, fmt)
    if out:
        try:
            if fmt == "rich":
                with out.open("w") as handle:
                    file_console = Console(file=handle, width=160)
                    for item in rendered:
                        file_console.print(item)
            else:
                out.write_text(rendered)
        except OSError as exc:  # a folder, a read-only file
            raise FedbenchError(f"--out {out}: cannot write it ({exc.strerror}); give a file path") from None
        console.print(f"wrote {out}")
    elif fmt == "rich":
        for item in rendered:
            console.print(item)
    else:
        sys.stdout.write(rendered)
    if plots:
        for path in write_plots(recipes, store, plots, scale=scale, table=table, synthetic=synthetic):
            console.print(f"wrote {path}")
