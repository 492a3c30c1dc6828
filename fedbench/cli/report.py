"""``fedbench report``: render recipes' tables from the registry (library: ``fedbench.report``)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console

from fedbench.cli import completion
from fedbench.cli.common import RegistryOption, console, err_console, label_filters, user_errors
from fedbench.cli.options import Add, Only, Plugins, Seeds, SetFor, additions, load_plugins, parse_seeds
from fedbench.errors import FedbenchError


def writable_folder(option: str, folder: Path) -> None:
    """Create ``folder`` now, before any work: an unwritable place is a user error, not a traceback."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise FedbenchError(
            f"{option} {folder}: cannot create that folder ({exc.strerror}); choose a writable one"
        ) from None


def write_html(out: Path, pages: dict[str, str]) -> list[Path]:
    """One paper: its page at ``out``. Several: each paper's page beside ``out`` (PAPER.html) and ``out`` an
    index linking them with their reproduction lines."""
    import html

    try:
        if len(pages) == 1:
            out.write_text(next(iter(pages.values())))
            return [out]
        written = []
        for paper, text in pages.items():
            path = out.parent / f"{paper}.html"
            path.write_text(text)
            written.append(path)
        links = "".join(f'<li><a href="{html.escape(p.name)}">{html.escape(p.stem)}</a></li>' for p in written)
        out.write_text(
            "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>fedbench reports</title></head>"
            f"<body><h1>fedbench reports</h1><ul>{links}</ul></body></html>\n"
        )
    except OSError as exc:
        raise FedbenchError(f"--out {out}: cannot write it ({exc.strerror}); give a file path") from None
    return [*written, out]


def print_or_write(rendered, fmt: str, out: Path | None) -> None:
    """Rendered tables to the terminal, or to ``out`` (rich renderables through a 160-column console)."""
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


@user_errors
def report(
    paper: str | None = typer.Option(
        None, "--paper", help="Render every recipe of this paper (recipes/*.toml with paper = ID)."
    ),
    recipe: list[Path] = typer.Option(
        [], "--recipe", help="Render these recipe files (repeatable).", autocompletion=completion.recipe_files
    ),
    table: str | None = typer.Option(
        None, "--table", help="Only this table view.", autocompletion=completion.table_names
    ),
    scale: str = typer.Option("full", "--scale", help="Which scale's runs to show."),
    synthetic: bool = typer.Option(
        False, "--synthetic", help="Show runs on synthetic stand-in data (never mixed with real runs)."
    ),
    fmt: str = typer.Option(
        "rich",
        "--format",
        help="rich, markdown, latex, csv, json or html (with --out DIR/index.html: a self-contained page per paper "
        "with plots and per-run details).",
    ),
    out: Path | None = typer.Option(None, "--out", help="Write to this file instead of the terminal."),
    plots: Path | None = typer.Option(None, "--plots", help="Also write accuracy-vs-round PNGs to this folder."),
    recipes_dir: Path | None = typer.Option(
        None, "--recipes-dir", help="Where --paper looks for recipes (default: ./recipes, else the shipped ones)."
    ),
    seeds: Seeds = None,
    only: Only = [],  # noqa: B006
    add: Add = [],  # noqa: B006
    set_for: SetFor = [],  # noqa: B006
    registry: str | None = RegistryOption,
    plugin: Plugins = [],  # noqa: B006
) -> None:
    """Render recipes' tables from the registry: ours (mean ± std, n) beside the published numbers.

    Example: `fedbench report --recipe recipes/quickstart.toml` ·
    `fedbench report --recipe recipes/quickstart.toml --add algorithm=scaffold` (the row `run --add` trained) ·
    `fedbench report --paper fedtrip --format markdown --out reports/fedtrip.md --plots reports/fedtrip`
    """
    from fedbench.plugins import source_changes
    from fedbench.registry import Registry
    from fedbench.report.collect import build_tables, report_recipes, write_plots
    from fedbench.report.render import FORMATS, render
    from fedbench.report.render.html import html_pages

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
    load_plugins(plugin)
    extra = additions(add, set_for)
    recipes = extra.extend(report_recipes(paper, recipe, recipes_dir))
    store = Registry.open_existing(registry)
    if store is None:
        err_console.print(
            f"no registry at {Registry.shown_url(registry)} yet: the tables hold no runs of ours", soft_wrap=True
        )
    chosen_seeds, matching = parse_seeds(seeds), label_filters(only, "--only") or None
    tables = build_tables(
        recipes, store, scale=scale, table=table, synthetic=synthetic, seeds=chosen_seeds, only=matching
    )
    shown = (run.provenance for t in tables for cell in t.cells.values() for run in cell.runs)
    for warning in source_changes(shown):  # a plug-in that declares a revision, edited since these runs
        err_console.print(f"[yellow]warning:[/yellow] {warning}", soft_wrap=True)
    if fmt == "html" and out is not None:
        for path in write_html(
            out, html_pages(recipes, tables, store, scale=scale, synthetic=synthetic, seeds=chosen_seeds, only=matching)
        ):
            console.print(f"wrote {path}")
    else:
        print_or_write(render(tables, fmt), fmt, out)
    if plots:
        for path in write_plots(
            recipes, store, plots, scale=scale, table=table, synthetic=synthetic, seeds=chosen_seeds, only=matching
        ):
            console.print(f"wrote {path}")


def registry_url_of(argument: str) -> str:
    """A registry argument: a SQLAlchemy URL, or the path of a SQLite file."""
    return argument if "://" in argument else f"sqlite:///{Path(argument).resolve()}"


@user_errors
def compare(
    registry_a: str = typer.Argument(..., help="First registry: a SQLAlchemy URL or a SQLite file."),
    registry_b: str = typer.Argument(..., help="Second registry: a SQLAlchemy URL or a SQLite file."),
    paper: str | None = typer.Option(None, "--paper", help="Compare every recipe of this paper."),
    recipe: list[Path] = typer.Option([], "--recipe", help="Compare these recipe files (repeatable)."),
    table: str | None = typer.Option(None, "--table", help="Only this table view."),
    scale: str = typer.Option("full", "--scale", help="Which scale's runs to compare."),
    synthetic: bool = typer.Option(False, "--synthetic", help="Compare runs on synthetic stand-in data."),
    fmt: str = typer.Option("rich", "--format", help="rich, markdown or json."),
    recipes_dir: Path | None = typer.Option(
        None, "--recipes-dir", help="Where --paper looks for recipes (default: ./recipes, else the shipped ones)."
    ),
    plugin: Plugins = [],  # noqa: B006
) -> None:
    """The same cells from two registries side by side, their difference and whether it is within seed noise
    (the exact two-sample permutation test on the per-seed figures, p ≥ 0.05; no answer where the seed counts
    cannot reach 0.05).

    Example: `fedbench compare registry/cpu.db registry/gpu.db --recipe recipes/quickstart.toml`
    """
    from fedbench.registry import Registry
    from fedbench.report.collect import build_tables, report_recipes
    from fedbench.report.compare import compare_tables, render_comparison

    if fmt not in ("rich", "markdown", "json"):
        raise FedbenchError(f"--format {fmt!r}: choose one of rich, markdown, json")
    if not paper and not recipe:
        raise FedbenchError("say what to compare: --paper ID or --recipe FILE (e.g. --recipe recipes/quickstart.toml)")
    load_plugins(plugin)
    recipes = report_recipes(paper, recipe, recipes_dir)
    stores = []
    for name, argument in (("REGISTRY_A", registry_a), ("REGISTRY_B", registry_b)):
        store = Registry.open_existing(registry_url_of(argument))
        if store is None:
            raise FedbenchError(f"{name} {argument}: no registry there; give an existing registry file or URL")
        stores.append(store)
    tables_a, tables_b = (build_tables(recipes, s, scale=scale, table=table, synthetic=synthetic) for s in stores)
    rendered = render_comparison(compare_tables(tables_a, tables_b), fmt, registry_a, registry_b)
    if fmt == "rich":
        for item in rendered:
            console.print(item)
    else:
        sys.stdout.write(rendered)
