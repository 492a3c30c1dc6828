"""Time ``fedbench report --paper P`` over a registry of 10,000 runs.

The registry holds every run of every shipped recipe at full scale (real data), the same runs on synthetic data,
and filler runs of another paper up to ``--runs``; every run is ``done`` with a stored curve of all its rounds
(a rising accuracy with seed noise, so best / last-k / rounds-to-target figures are defined). Rows go in with
bulk INSERTs (SQLAlchemy Core executemany), not through the Registry API, so building takes seconds.

Then it renders the paper's tables (library calls of ``fedbench report``: recipes, tables, the JSON format) a
few times and prints the median wall-clock seconds, the median CPU seconds of this process (the figure to read on
a shared, busy machine) and the number of SQL statements one report issues. The first render of a process also
imports torch (the analytic tables' model costs); the median leaves that out.

    python benchmarks/report_scale.py [--paper fedtrip] [--runs 10000] [--registry /tmp/report_scale.db]
"""

from __future__ import annotations

import argparse
import statistics
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--paper", default="fedtrip")
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--registry", default="/tmp/fedbench_report_scale.db")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

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
