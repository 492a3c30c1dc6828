"""Workers racing on one registry, on SQLite and on a real PostgreSQL server (``any_registry_url``; the PostgreSQL
half skips, saying why, where no server can be started): concurrent claims of one run have exactly one winner,
concurrent first opens migrate once and register each run once, workers opening a 0.1.0 registry at once migrate it
once, and several workers (of one `fedbench run --jobs 2`, or two CLI processes) share a batch without duplicating or
losing a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.registry import Registry
from fedbench.registry.schema import head_revision
from registry_fixtures import compiled_hashes, old_registry, raw_rows, register_recipe


def test_concurrent_claims_of_one_run_have_exactly_one_winner(any_registry_url, write_recipe):
    registry, planned = register_recipe(any_registry_url, write_recipe())
    barrier, results = threading.Barrier(8), []

    def contend(n: int) -> None:
        mine = Registry(any_registry_url)  # a worker has its own connections
        barrier.wait()
        results.append(mine.claim(planned[0].spec_hash, worker=f"host{n}:1"))

    threads = [threading.Thread(target=contend, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 8 and sum(r is not None for r in results) == 1


def test_concurrent_first_opens_migrate_once_and_register_each_run_once(any_registry_url, write_recipe):
    planned = expand(load_recipe(write_recipe()))
    barrier, errors = threading.Barrier(4), []

    def open_and_register() -> None:
        try:
            barrier.wait()
            Registry(any_registry_url).ensure_runs([p.registry_entry() for p in planned])
        except Exception as exc:  # reported below with the thread's error
            errors.append(exc)

    threads = [threading.Thread(target=open_and_register) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(r.spec_hash for r in Registry(any_registry_url).runs()) == sorted(p.spec_hash for p in planned)


@pytest.mark.slow
def test_workers_opening_an_old_registry_at_once_migrate_it_once(tmp_path):
    url, database = old_registry(tmp_path)
    code = "import sys; from fedbench.registry import Registry; print(len(Registry(sys.argv[1]).runs()))"
    processes = [
        subprocess.Popen([sys.executable, "-c", code, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=300) for p in processes]
    assert all(p.returncode == 0 for p in processes), outputs
    assert [out.strip() for out, _ in outputs] == ["13"] * 3
    assert {h for (h,) in raw_rows(database, "SELECT spec_hash FROM runs")} == compiled_hashes()
    assert raw_rows(database, "SELECT version_num FROM alembic_version") == [(head_revision(),)]


@pytest.mark.slow
def test_two_worker_processes_share_a_batch_without_duplicates(any_registry_url, write_recipe):
    result = CliRunner().invoke(
        app, ["run", str(write_recipe()), "--jobs", "2", "--set", "rounds=2", "--registry", any_registry_url]
    )
    assert result.exit_code == 0, result.output
    registry = Registry(any_registry_url)
    rows = registry.runs()
    assert len(rows) == 4 and {r.status for r in rows} == {"done"}
    for row in rows:  # each run trained once: rounds 1..2 exactly once
        assert [r.round for r in registry.curve(row.id)] == [1, 2]


@pytest.mark.slow
def test_two_concurrent_cli_processes_never_duplicate_nor_lose_a_run(any_registry_url, write_recipe):
    command = [sys.executable, "-m", "fedbench.cli", "run", str(write_recipe()), "--set", "rounds=2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [*command, "--registry", any_registry_url],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), outputs
    registry = Registry(any_registry_url)
    rows = registry.runs()
    assert len(rows) == 4 and all(r.status == "done" for r in rows)
    for row in rows:
        assert [r.round for r in registry.curve(row.id)] == [1, 2]
    listed = json.loads(CliRunner().invoke(app, ["runs", "--registry", any_registry_url, "--json"]).stdout)
    assert len(listed) == 4
