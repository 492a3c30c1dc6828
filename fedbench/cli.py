"""fedbench command line. The only module that prints for humans or exits.

Exit codes: 0 success, 2 user error (one line on stderr, nothing written to the registry),
1 a run failed unexpectedly.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any, Callable, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table as RichTable

from fedbench.errors import FedbenchError

app = typer.Typer(
    add_completion=False, no_args_is_help=True, rich_markup_mode="markdown",
    help="Reproduce the tables of published federated-learning papers: compile TOML recipes into runs, "
         "train them, record them in a registry and render the paper's tables.",
)
console = Console()
err_console = Console(stderr=True)

RegistryOption = typer.Option(None, "--registry", help="SQLAlchemy URL of the run registry "
                              "[default: $FEDBENCH_REGISTRY or sqlite:///registry/fedbench.db]")


def user_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn FedbenchError into one line on stderr and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except FedbenchError as exc:
            err_console.print(f"[red]error:[/red] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            err_console.print("interrupted: finished rounds are saved; run the same command again to resume")
            raise typer.Exit(130) from None

    return wrapper


def _parse_seeds(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise FedbenchError(f"--seeds {text!r}: expected comma-separated integers, e.g. --seeds 0,1,2") from None


def _parse_only(items: list[str]) -> dict[str, set[str]]:
    """--only KEY=VALUE filters: values of one key are alternatives, different keys must all match."""
    from fedbench.recipe import parse_assignment

    out: dict[str, set[str]] = {}
    for item in items:
        key, value = parse_assignment(item, "--only")
        out.setdefault(key, set()).add(str(value) if not isinstance(value, float) else f"{value:g}")
    return out


# ============================================================================================ run
@app.command()
@user_errors
def run(
    recipes: list[Path] = typer.Argument(..., help="Recipe TOML files.", show_default=False),
    scale: str = typer.Option("full", "--scale", help="Scale profile of the recipe (e.g. smoke); 'full' is the paper's setting."),
    seeds: Optional[str] = typer.Option(None, "--seeds", help="Comma-separated seeds replacing the recipe's."),
    only: list[str] = typer.Option([], "--only", help="Keep runs whose labels match KEY=VALUE (repeatable; values of one key are alternatives)."),
    set_: list[str] = typer.Option([], "--set", help="Override a setup key for every run, dotted for nested keys (repeatable)."),
    synthetic: bool = typer.Option(False, "--synthetic", help="Replace every dataset with generated stand-in data (smoke tests)."),
    device: str = typer.Option("auto", "--device", help="auto, cpu, cuda or cuda:N."),
    jobs: int = typer.Option(1, "--jobs", "-j", min=1, help="Worker processes claiming runs from the registry (use one per core)."),
    threads: int = typer.Option(1, "--threads", min=1, help="CPU threads per run. Curves are bit-identical for the same --threads whatever --jobs is."),
    registry: Optional[str] = RegistryOption,
    data_dir: Optional[Path] = typer.Option(None, "--data-dir", help="Data root [default: $FEDBENCH_DATA or the user cache]."),
    no_verify: bool = typer.Option(False, "--no-verify", help="Skip data checksum verification (recorded as unverified)."),
    force: bool = typer.Option(False, "--force", help="Re-run specs that are already done."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the compiled runs and whether they are done; train nothing."),
) -> None:
    """Compile recipes into runs and train the ones not done yet.

    Example: `fedbench run recipes/quickstart.toml --jobs 2` ·
    `fedbench run recipes/quickstart.toml --scale smoke --only algorithm=fedavg --set rounds=5`
    """
    from fedbench.executors import ExecutionOptions, preflight, resolve_device
    from fedbench.recipe import assignments_to_dict, compile_recipes
    from fedbench.registry import Registry

    planned = compile_recipes(
        recipes, scale=scale, seeds=_parse_seeds(seeds), only=_parse_only(only),
        overrides=assignments_to_dict(set_), synthetic=synthetic,
    )
    resolve_device(device)
    if not planned and only:
        raise FedbenchError("no runs match: check --only filters against the recipe's labels")
    if not planned:   # e.g. fedtrip_costs.toml: analytic tables only
        names = " ".join(f"--recipe {r}" for r in recipes)
        console.print(f"nothing to train: these recipes define no runs; `fedbench report {names}` renders their tables",
                      soft_wrap=True)
        return
    if dry_run:
        statuses = Registry.peek_statuses(registry, [p.spec_hash for p in planned])
        table = RichTable(title=f"{len(planned)} runs")
        for column in ("spec_hash", "labels", "seed", "rounds", "status"):
            table.add_column(column)
        for p in planned:
            labels = ", ".join(f"{k}={v}" for k, v in p.labels.items())
            table.add_row(p.spec_hash, labels, str(p.spec.seed), str(p.spec.rounds), statuses.get(p.spec_hash, "new"))
        console.print(table)
        return

    known = Registry.peek_statuses(registry, [p.spec_hash for p in planned])
    # Data and partitions are checked before the registry is touched: bad input changes nothing there.
    preflight([p for p in planned if force or known.get(p.spec_hash) not in ("done", "diverged")],
              str(data_dir) if data_dir else None, verify=not no_verify)
    store = Registry(registry)
    store.ensure_runs([p.registry_entry() for p in planned])
    statuses = store.statuses(p.spec_hash for p in planned)
    finished = [p for p in planned if statuses.get(p.spec_hash) in ("done", "diverged")]
    if force and finished:
        store.reset_for_rerun(p.spec_hash for p in finished)
        console.print(f"--force: re-running {len(finished)} finished run(s)")
    elif finished:
        console.print(f"{len(finished)} of {len(planned)} runs already done (skipped; --force re-runs them)")
    todo = [p for p in planned if force or p not in finished]
    options = ExecutionOptions(registry_url=store.url, device=device, data_root=str(data_dir) if data_dir else None,
                               verify=not no_verify, threads=threads)
    if todo:
        _run_with_progress(todo, options, jobs)
    final = store.statuses(p.spec_hash for p in planned)
    counts: dict[str, int] = {}
    for status in final.values():
        counts[status] = counts.get(status, 0) + 1
    console.print("registry: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) + f"  ({store.url})")
    failed = [p for p in planned if final.get(p.spec_hash) == "failed"]
    if failed:
        rows = {r.spec_hash: r for r in store.runs(spec_hashes=[p.spec_hash for p in failed])}
        for p in failed:
            message = (rows[p.spec_hash].error or "").strip().splitlines()
            err_console.print(f"[red]failed[/red] {p.spec_hash} {escape(str(p.labels))}: {escape(message[-1]) if message else ''}")
        raise typer.Exit(1)


def _run_with_progress(todo, options, jobs: int) -> None:
    from fedbench.executors import execute

    progress = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(), console=console, transient=False,
    )
    label_of = {p.spec_hash: ", ".join(f"{v}" for v in p.labels.values()) + f" seed {p.spec.seed}" for p in todo}
    rounds_of = {p.spec_hash: p.spec.rounds for p in todo}
    with progress:
        # The overall bar counts rounds (its time-left estimate follows the rounds actually trained); its
        # status counts runs.
        overall = progress.add_task("rounds", total=sum(rounds_of.values()), status=f"0/{len(todo)} runs")
        current: dict[str, int] = {}
        counted: dict[str, int] = {}   # rounds of each run already added to the overall bar
        finished = 0

        def count_rounds(key: str, upto: int) -> None:
            progress.advance(overall, max(0, upto - counted.get(key, 0)))
            counted[key] = max(upto, counted.get(key, 0))

        def on_event(event: dict) -> None:
            nonlocal finished
            key = event.get("spec_hash")
            if event["kind"] == "start":
                current[key] = progress.add_task(f"  {label_of.get(key, key)}", total=event["rounds"], status="")
            elif event["kind"] == "round" and key in current:
                acc = event.get("test_acc")
                status = (f"acc {acc * 100:5.2f}%  " if acc is not None else "") + f"{event['seconds']:.2f} s/round"
                progress.update(current[key], completed=event["round"], status=status)
                count_rounds(key, event["round"])
            elif event["kind"] == "end":
                if key in current:
                    progress.remove_task(current.pop(key))
                count_rounds(key, rounds_of.get(key, 0))
                finished += 1
                progress.update(overall, status=f"{finished}/{len(todo)} runs")
                if event["status"] != "done":
                    progress.console.print(f"  {escape(label_of.get(key, key))}: {event['status']} {escape(event.get('error') or '')}")

        execute(todo, options, jobs, on_event)


# ============================================================================================ report
@app.command()
@user_errors
def report(
    paper: Optional[str] = typer.Option(None, "--paper", help="Render every recipe of this paper (recipes/*.toml with paper = ID)."),
    recipe: list[Path] = typer.Option([], "--recipe", help="Render these recipe files (repeatable)."),
    table: Optional[str] = typer.Option(None, "--table", help="Only this table view."),
    scale: str = typer.Option("full", "--scale", help="Which scale's runs to show."),
    synthetic: bool = typer.Option(False, "--synthetic", help="Show runs on synthetic stand-in data (never mixed with real runs)."),
    fmt: str = typer.Option("rich", "--format", help="rich, markdown, latex, csv, json or html."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write to this file instead of the terminal."),
    plots: Optional[Path] = typer.Option(None, "--plots", help="Also write accuracy-vs-round PNGs to this folder."),
    recipes_dir: Path = typer.Option(Path("recipes"), "--recipes-dir", help="Where --paper looks for recipes."),
    registry: Optional[str] = RegistryOption,
) -> None:
    """Render recipes' tables from the registry: ours (mean ± std, n) beside the published numbers.

    Example: `fedbench report --recipe recipes/quickstart.toml` ·
    `fedbench report --paper fedtrip --format markdown --out reports/fedtrip.md --plots reports/fedtrip`
    """
    from fedbench.recipe import load_recipe
    from fedbench.registry import Registry
    from fedbench.report import FORMATS, build_table, render
    from fedbench.report.plots import plot_table

    if fmt not in FORMATS:
        raise FedbenchError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if not paper and not recipe:
        raise FedbenchError("say what to report: --paper ID or --recipe FILE (e.g. --recipe recipes/quickstart.toml)")
    if out is not None and out.is_dir():
        raise FedbenchError(f"--out {out} is a folder; give a file path, e.g. --out {out / 'report.md'}")
    for option, folder in (("--out", out.parent if out else None), ("--plots", plots)):
        if folder is not None:   # before any work: an unwritable place is a user error, not a traceback
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise FedbenchError(f"{option} {folder}: cannot create that folder ({exc.strerror}); choose a writable one") from None
    loaded = [load_recipe(p) for p in recipe]
    if paper:
        found = [load_recipe(p) for p in sorted(recipes_dir.glob("*.toml"))]
        matching = sorted((r for r in found if r.paper == paper), key=lambda r: (r.order, r.name))
        if not matching:
            papers = sorted({r.paper for r in found})
            raise FedbenchError(f"--paper {paper!r}: no recipe in {recipes_dir}/ has paper = {paper!r}; papers: {', '.join(papers)}")
        loaded += matching
    store = Registry.open_existing(registry)
    if store is None:
        err_console.print(f"no registry at {Registry.resolve_url(registry)} yet: the tables hold no runs of ours", soft_wrap=True)
    tables = []
    for rec in loaded:
        if rec.setup and scale not in rec.scale_names():
            continue
        views = [rec.table(table)] if table else rec.tables
        for view in views:
            tables.append(build_table(rec, view, store, scale=scale, synthetic=synthetic) if store else
                          build_table(rec, view, _EmptyRegistry(), scale=scale, synthetic=synthetic))
    if not tables:
        raise FedbenchError(f"no table to render (scale {scale!r} missing from the recipes, or --table {table!r} unknown)")
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
        except OSError as exc:   # a folder, a read-only file
            raise FedbenchError(f"--out {out}: cannot write it ({exc.strerror}); give a file path") from None
        console.print(f"wrote {out}")
    elif fmt == "rich":
        for item in rendered:
            console.print(item)
    else:
        sys.stdout.write(rendered)
    if plots and store:
        for rec in loaded:
            if scale not in rec.scale_names():
                continue
            for view in ([rec.table(table)] if table else rec.tables):
                for path in plot_table(rec, view, store, plots, scale=scale, synthetic=synthetic):
                    console.print(f"wrote {path}")


class _EmptyRegistry:
    def runs(self, **_: Any) -> list:
        return []

    def curves(self, ids) -> dict:
        return {}


# ============================================================================================ runs / show
def _run_json(row, curve=None) -> dict[str, Any]:
    data = {
        "id": row.id, "spec_hash": row.spec_hash, "paper": row.paper, "recipe": row.recipe, "labels": row.labels,
        "status": row.status, "seed": row.seed, "scale": row.scale, "synthetic": row.synthetic,
        "rounds_done": row.rounds_done, "diverged_round": row.diverged_round, "error": row.error,
        "wall_seconds": row.wall_seconds, "summary": row.summary, "spec": row.spec, "provenance": row.provenance,
        "started_at": row.started_at.isoformat() if row.started_at else None,
        "finished_at": row.finished_at.isoformat() if row.finished_at else None,
    }
    if curve is not None:
        from fedbench.registry.tables import RoundRow

        columns = [c.name for c in RoundRow.__table__.columns if c.name != "run_id"]
        data["curve"] = [{k: getattr(r, k) for k in columns} for r in curve]
    return data


@app.command()
@user_errors
def runs(
    paper: Optional[str] = typer.Option(None, "--paper", help="Only runs of this paper."),
    status: Optional[str] = typer.Option(None, "--status", help="pending, running, done, diverged, failed, interrupted."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output (see docs/cli.md)."),
    registry: Optional[str] = RegistryOption,
) -> None:
    """List runs in the registry.

    Example: `fedbench runs --paper quickstart --status done`
    """
    from fedbench.registry import Registry

    store = Registry.open_existing(registry)
    rows = store.runs(paper=paper, status=status) if store else []
    if as_json:
        sys.stdout.write(json.dumps([_run_json(r) for r in rows], indent=2) + "\n")
        return
    if store is None:   # a typo in --registry should not look like an empty registry
        err_console.print(f"no registry at {Registry.resolve_url(registry)} yet: `fedbench run` creates it", soft_wrap=True)
    table = RichTable(title=f"{len(rows)} runs")
    for column in ("id", "spec_hash", "paper", "labels", "seed", "scale", "status", "rounds", "best", "final"):
        table.add_column(column)
    for r in rows:
        summary = r.summary or {}
        fmt = lambda v: f"{v * 100:.2f}" if isinstance(v, (int, float)) else "–"  # noqa: E731
        scale = r.scale + (" (synthetic)" if r.synthetic else "")
        table.add_row(str(r.id), r.spec_hash, r.paper or "", ", ".join(f"{k}={v}" for k, v in (r.labels or {}).items()),
                      str(r.seed), scale, r.status, str(r.rounds_done), fmt(summary.get("best")), fmt(summary.get("final")))
    console.print(table)


@app.command()
@user_errors
def show(
    run_id: str = typer.Argument(..., help="Run id or spec_hash (prefix)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output (see docs/cli.md)."),
    registry: Optional[str] = RegistryOption,
) -> None:
    """Show one run: spec, provenance, summary and the per-round curve.

    Example: `fedbench show 3` · `fedbench show 8c99186 --json`
    """
    from fedbench.registry import Registry

    store = Registry.open_existing(registry)
    if store is None:
        raise FedbenchError(f"no registry at {Registry.resolve_url(registry)}; run a recipe first")
    row = store.get_run(run_id)
    data = _run_json(row, store.curve(row.id))
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return
    console.print(f"[bold]run {row.id}[/bold] {row.spec_hash} {row.status}  {row.labels}")
    console.print_json(json.dumps({k: data[k] for k in ("spec", "summary", "provenance")}))
    table = RichTable(title="curve")
    for column in ("round", "test_acc", "test_loss", "train_loss", "s"):
        table.add_column(column, justify="right")
    for r in data["curve"]:
        f = lambda v, d=4: "–" if v is None else f"{v:.{d}f}"  # noqa: E731
        table.add_row(str(r["round"]), f(r["test_acc"]), f(r["test_loss"]), f(r["train_loss"]), f(r["wall_seconds"], 2))
    console.print(table)


# ============================================================================================ catalogues
@app.command()
@user_errors
def algorithms(as_json: bool = typer.Option(False, "--json", help="Machine-readable output.")) -> None:
    """List the registered FL methods with their hyperparameters and defaults.

    Example: `fedbench algorithms --json`
    """
    from fedbench.algorithms import ALGORITHMS

    entries = []
    for name in ALGORITHMS.names():
        cls = ALGORITHMS.get(name)
        params = {k: f.default for k, f in cls.Params.model_fields.items()}
        doc = (cls.__doc__ or sys.modules[cls.__module__].__doc__ or "").strip().splitlines()
        entries.append({"name": name, "params": params, "papers": list(ALGORITHMS.info(name).get("papers", ())),
                        "description": doc[0] if doc else ""})
    if as_json:
        sys.stdout.write(json.dumps(entries, indent=2, default=str) + "\n")
        return
    table = RichTable(title="algorithms")
    for column in ("name", "params (defaults)", "papers", "description"):
        table.add_column(column)
    for e in entries:
        table.add_row(e["name"], ", ".join(f"{k}={v}" for k, v in e["params"].items()), ", ".join(e["papers"]), e["description"])
    console.print(table)


@app.command()
@user_errors
def models(
    name: Optional[str] = typer.Argument(None, help="Show one model."),
    set_: list[str] = typer.Option([], "--set", help="Model configuration KEY=VALUE (num_classes, input_shape, or a model parameter)."),
    as_json: bool = typer.Option(False, "--json", help="Machine-readable output."),
) -> None:
    """List registered models: parameters, FLOPs per sample, input shape, classes, papers.

    Example: `fedbench models` · `fedbench models lenet5 --set num_classes=10 --json`
    """
    from fedbench.cost import model_card
    from fedbench.models import MODELS
    from fedbench.recipe import parse_assignment

    overrides = dict(parse_assignment(item, "--set") for item in set_)
    if set_ and not name:
        raise FedbenchError("--set needs a model NAME, e.g. fedbench models lenet5 --set num_classes=10")
    names = [name] if name else MODELS.names()
    cards = [model_card(n, **(overrides if name else {})) for n in names]
    if as_json:
        sys.stdout.write(json.dumps(cards if not name else cards[0], indent=2, default=str) + "\n")
        return
    table = RichTable(title="models")
    columns = ("name", "params", "MFLOPs/sample (fwd)", "input", "classes", "papers")
    for column in columns:
        table.add_column(column)
    for c in cards:
        table.add_row(c["name"], f"{c['params']:,}", f"{c['flops_forward'] / 1e6:.2f}", "×".join(map(str, c["input_shape"])),
                      str(c["num_classes"]), ", ".join(c.get("papers", ())))
    console.print(table)


from fedbench.data.cli_commands import register_cli as _register_datasets_cli  # noqa: E402

_register_datasets_cli(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
