"""Time ``fedbench report`` over large registries, in two shapes.

``--shape papers`` (the default): ``fedbench report --paper P`` over a registry of 10,000 runs. The registry holds
every run of every shipped recipe at full scale (real data), the same runs on synthetic data, and filler runs of
another paper up to ``--runs``; every run is ``done`` with a stored curve of all its rounds (a rising accuracy with
seed noise, so best / last-k / rounds-to-target figures are defined). It renders the paper's tables (library calls
of ``fedbench report``: recipes, tables, the JSON format) a few times in this process and prints the median
wall-clock seconds, the median CPU seconds of this process (the figure to read on a shared, busy machine) and the
number of SQL statements one report issues. The first render of a process also imports torch (the analytic
tables' model costs); the median leaves that out.

``--shape seeds``: one recipe with many seeds, recipes/quickstart.toml widened to ``--seeds`` seeds (5,000: 10,000
done runs, 200,000 rounds). It times ``fedbench report --format markdown`` and ``fedbench run --dry-run`` as a user
runs them, each in a subprocess, start-up (imports) included, wall-clock and CPU seconds, and the imports of the
report command alone; then the report's phases in this process (CPU seconds).

Both build their registry with bulk INSERTs (SQLAlchemy Core executemany), not through the Registry API, so
building takes seconds; a registry file that exists is reused. With PYTHONPATH=OTHER_TREE the subprocesses run
that tree's CLI (a before/after comparison on the same registry). Figures, with the machine they were measured
on: benchmarks/results/report_scale.json.

    python benchmarks/report_scale.py [--paper fedtrip] [--runs 10000] [--registry /tmp/report_scale.db]
    python benchmarks/report_scale.py --shape seeds [--seeds 5000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import re
import resource
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import numpy as np
from sqlalchemy import event, insert

from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.registry import Registry, tables

RECIPES = Path(__file__).resolve().parent.parent / "recipes"


def curve_rows(run_id: int, rounds: int, seed: int, rng: np.random.Generator) -> list[dict]:
    speed = rng.uniform(0.02, 0.2)
    top = rng.uniform(0.6, 0.95)
    r = np.arange(1, rounds + 1)
    acc = top * (1 - np.exp(-speed * r)) + rng.normal(0, 0.01, rounds)
    return [
        {
            "run_id": run_id,
            "round": int(k),
            "test_acc": float(a),
            "test_loss": float(1 - a),
            "train_loss": float(1 - a),
            "wall_seconds": 0.5,
            "bytes_up": 1000,
            "bytes_down": 1000,
        }
        for k, a in zip(r, acc)
    ]


def build(url: str, total: int) -> int:
    registry = Registry(url)
    planned = []
    for path in sorted(RECIPES.glob("*.toml")):
        recipe = load_recipe(path)
        for synthetic in (False, True):
            planned += expand(recipe, synthetic=synthetic, check=False)
    entries = {p.spec_hash: p for p in planned}
    rng = np.random.default_rng(0)
    now = datetime(2026, 1, 1)
    runs, rounds = [], []
    for run_id, p in enumerate(entries.values(), start=1):
        runs.append({**p.registry_entry(), "id": run_id, "status": "done", "rounds_done": p.spec.rounds})
        rounds += curve_rows(run_id, p.spec.rounds, p.spec.seed, rng)
    template = next(iter(entries.values()))
    for run_id in range(len(runs) + 1, total + 1):  # another paper's runs: never read by the report
        entry = template.registry_entry()
        runs.append(
            {
                **entry,
                "id": run_id,
                "spec_hash": f"filler{run_id:026d}",
                "paper": "filler",
                "status": "done",
                "rounds_done": 100,
            }
        )
        rounds += curve_rows(run_id, 100, run_id, rng)
    for row in runs:
        row.update(created_at=now, finished_at=now, summary={}, provenance={})
    with registry.engine.begin() as connection:
        for start in range(0, len(runs), 5000):
            connection.execute(insert(tables.runs), runs[start : start + 5000])
        for start in range(0, len(rounds), 50000):
            connection.execute(insert(tables.rounds), rounds[start : start + 50000])
    return len(rounds)


def widened_recipe(seeds: int, folder: Path) -> Path:
    """recipes/quickstart.toml with ``seeds`` seeds (0 … seeds-1) instead of its 3, written into ``folder``."""
    text = (RECIPES / "quickstart.toml").read_text()
    widened, count = re.subn(r"^seeds = \[.*\]$", f"seeds = {list(range(seeds))}", text, count=1, flags=re.M)
    assert count == 1, "recipes/quickstart.toml has no top-level seeds line"
    path = folder / "quickstart_widened.toml"
    path.write_text(widened)
    return path


def build_widened(url: str, recipe_path: Path) -> int:
    """A registry holding every run of the widened recipe at full scale, done, each with its curve."""
    registry = Registry(url)
    rng = np.random.default_rng(0)
    now = datetime(2026, 1, 1)
    runs, rounds = [], []
    for run_id, p in enumerate(expand(load_recipe(recipe_path), check=False), start=1):
        runs.append(
            {
                **p.registry_entry(),
                "id": run_id,
                "status": "done",
                "rounds_done": p.spec.rounds,
                "created_at": now,
                "finished_at": now,
                "summary": {},
                "provenance": {},
            }
        )
        rounds += curve_rows(run_id, p.spec.rounds, p.spec.seed, rng)
    with registry.engine.begin() as connection:
        for start in range(0, len(runs), 5000):
            connection.execute(insert(tables.runs), runs[start : start + 5000])
        for start in range(0, len(rounds), 50000):
            connection.execute(insert(tables.rounds), rounds[start : start + 50000])
    return len(runs)


def timed(command: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of ``python COMMAND`` in a subprocess, start-up included; its output is discarded (a
    failure raises). It runs in the tree of the fedbench this script imported (``python -m`` puts the working
    directory first on the path), so PYTHONPATH=OTHER_TREE times that tree's CLI."""
    import fedbench

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, *command],
        check=True,
        stdout=subprocess.DEVNULL,
        cwd=Path(fedbench.__file__).resolve().parents[1],
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


# what the report command imports before it reads the registry (cli/report.py)
REPORT_IMPORTS = "import fedbench.cli, fedbench.registry, fedbench.report.collect, fedbench.report.render.html"


def seeds_shape(args: argparse.Namespace) -> None:
    """One recipe, many seeds: time ``report --format markdown`` and ``run --dry-run`` end to end (CLI
    subprocesses), then the report's phases in this process."""
    from fedbench.recipes.expand import compile_recipes
    from fedbench.report.collect import build_tables
    from fedbench.report.render import render

    folder = Path(args.registry).parent
    recipe_path = widened_recipe(args.seeds, folder)
    path = Path(args.registry)
    url = f"sqlite:///{path}"
    if not path.exists():
        start = time.perf_counter()
        count = build_widened(url, recipe_path)
        print(f"built {path}: {count} runs in {time.perf_counter() - start:.1f} s")
    cli = ["-m", "fedbench.cli"]
    commands = {
        "report --format markdown": [*cli, "report", "--recipe", str(recipe_path), "--format", "markdown"],
        "run --dry-run": [*cli, "run", str(recipe_path), "--dry-run"],
    }
    for name, command in commands.items():
        figures = [timed([*command, "--registry", url]) for _ in range(args.repeat)]
        walls, cpus = zip(*figures)
        print(
            f"{name} ({args.seeds} seeds, CLI end to end): median {statistics.median(walls):.2f} s wall "
            f"(min {min(walls):.2f} s), median {statistics.median(cpus):.2f} s CPU over {args.repeat}"
        )
    walls, cpus = zip(*(timed(["-c", REPORT_IMPORTS]) for _ in range(args.repeat)))
    print(f"imports of report: median {statistics.median(walls):.2f} s wall, {statistics.median(cpus):.2f} s CPU")
    registry = Registry(url)
    phases: dict[str, list[float]] = {"compile (run)": [], "tables": [], "render markdown": []}
    for _ in range(args.repeat):
        start = time.process_time()
        compile_recipes([recipe_path])
        phases["compile (run)"].append(time.process_time() - start)
        start = time.process_time()
        built = build_tables([load_recipe(recipe_path)], registry)
        phases["tables"].append(time.process_time() - start)
        start = time.process_time()
        render(built, "markdown")
        phases["render markdown"].append(time.process_time() - start)
    print(
        "in process, median CPU s: "
        + ", ".join(f"{name} {statistics.median(values):.2f}" for name, values in phases.items())
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", choices=["papers", "seeds"], default="papers")
    parser.add_argument("--paper", default="fedtrip")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--seeds", type=int, default=5_000, help="--shape seeds: seeds of the widened recipe")
    parser.add_argument("--registry", default=None)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if args.registry is None:
        args.registry = f"/tmp/fedbench_report_scale_{args.shape}{args.seeds if args.shape == 'seeds' else ''}.db"
    if args.shape == "seeds":
        seeds_shape(args)
        return

    from fedbench.report.collect import build_tables, report_recipes
    from fedbench.report.render import render

    path = Path(args.registry)
    url = f"sqlite:///{path}"
    if not path.exists():
        start = time.perf_counter()
        rows = build(url, args.runs)
        print(f"built {path}: {args.runs} runs, {rows} rounds in {time.perf_counter() - start:.1f} s")
    registry = Registry(url)
    statements = []
    event.listen(registry.engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
    times, cpu = [], []
    for _ in range(args.repeat):
        statements.clear()
        start, start_cpu = time.perf_counter(), time.process_time()
        recipes = report_recipes(args.paper, [], RECIPES)
        tables = build_tables(recipes, registry)
        render(tables, "json")
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    cells = sum(len(t.cells) for t in tables)
    runs = sum(c.n for t in tables for c in t.cells.values())
    print(
        f"report --paper {args.paper}: {len(tables)} tables, {cells} cells, {runs} runs shown; "
        f"median {statistics.median(times):.2f} s over {args.repeat} (min {min(times):.2f} s; "
        f"CPU time of this process: median {statistics.median(cpu):.2f} s); "
        f"{len(statements)} SQL statements per report"
    )


if __name__ == "__main__":
    main()
