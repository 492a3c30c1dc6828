"""Many workers claiming many short runs from one PostgreSQL registry: no run claimed twice, none lost, and how fast.

Workload: ``--runs`` runs registered from a digits recipe (2 algorithms × runs/2 seeds); ``--workers`` processes,
each walking the whole list in order as fedbench's workers do (``worker.work_through``), claiming each run
(``Registry.claim``: the registry's atomic conditional update) and, when it wins one, finishing it at once as
``done`` (a "short run": the benchmark measures the registry, not training). It then checks that every run was won
by exactly one worker and is ``done``, and prints the claim latency (every attempt, won or not) and the throughput.

    python benchmarks/claim_load.py [--workers 32] [--runs 2000] [--registry postgresql+psycopg://...]

Without ``--registry`` it starts a throwaway PostgreSQL server (tests/postgres_server.py; Debian's ``postgresql``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.registry import Registry

RECIPE = """
paper = "benchmark"
name = "claim_load"
title = "Claim load"
seeds = {seeds}

[setup]
dataset = "digits"
model = "digits_mlp"
partition = "iid"
num_clients = 2
clients_per_round = 2
rounds = 1

[matrix]
algorithm = ["fedavg", "fedprox"]

[overrides.algorithm.fedprox]
algorithm_params = {{ mu = 0.01 }}
"""


def worker(url: str, hashes: list[str], name: str, start: float) -> tuple[list[str], list[float], float, float]:
    """Claim every run of ``hashes`` in order; finish those won. Returns (won, latency of each claim in s, and the
    times of its first and last claim)."""
    registry = Registry(url)
    while time.time() < start:  # every worker starts claiming at once
        time.sleep(0.001)
    won, latencies, first = [], [], time.time()
    for spec_hash in hashes:
        began = time.perf_counter()
        run_id = registry.claim(spec_hash, worker=name)
        latencies.append(time.perf_counter() - began)
        if run_id is not None:
            registry.finish(run_id, "done", worker=name)
            won.append(spec_hash)
    return won, latencies, first, time.time()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=32)
    parser.add_argument("--runs", type=int, default=2000, help="an even number")
    parser.add_argument("--registry", help="a PostgreSQL URL (default: a throwaway server)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))  # stopped: the server below is stopped too
    server = None
    url = args.registry
    if url is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from postgres_server import start_server  # type: ignore[import-not-found]  # local: the tests' throwaway server, only when no URL is given

        server, reason = start_server()
        if server is None:
            print(f"no PostgreSQL server: {reason}", file=sys.stderr)
            return 2
        url = server.create_database()
    try:
        with tempfile.TemporaryDirectory() as folder:
            recipe = Path(folder) / "claim_load.toml"
            recipe.write_text(RECIPE.format(seeds=list(range(args.runs // 2))))
            planned = expand(load_recipe(recipe))
        registry = Registry(url)
        registry.ensure_runs([p.registry_entry() for p in planned])
        hashes = [p.spec_hash for p in planned]
        start = time.time() + 5.0 + args.workers  # after every process has started and connected (2 cores: slowly)
        context = multiprocessing.get_context("spawn")
        with context.Pool(args.workers) as pool:
            results = pool.starmap(worker, [(url, hashes, f"bench:{n}", start) for n in range(args.workers)])
        wall = max(r[3] for r in results) - min(r[2] for r in results)  # from the first claim to the last
        won = [h for r in results for h in r[0]]
        latencies = sorted(x for r in results for x in r[1])
        statuses = registry.statuses(hashes)
        figures = {
            "workers": args.workers,
            "runs": len(hashes),
            "duplicates": len(won) - len(set(won)),
            "lost": sum(statuses.get(h) != "done" for h in hashes) + len(set(hashes) - set(won)),
            "wall_seconds": round(wall, 2),
            "runs_per_second": round(len(hashes) / wall, 1),
            "claims": len(latencies),
            "claim_latency_ms": {
                "median": round(1000 * statistics.median(latencies), 2),
                "p95": round(1000 * latencies[int(0.95 * (len(latencies) - 1))], 2),
                "max": round(1000 * latencies[-1], 2),
            },
        }
        print(json.dumps(figures, indent=2))
        return 0 if figures["duplicates"] == 0 and figures["lost"] == 0 else 1
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    sys.exit(main())
