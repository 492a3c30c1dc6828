"""The Registry API on both backends: SQLite and a real PostgreSQL server (``any_registry_url``; the PostgreSQL
half skips, saying why, where no server can be started). Claims are exclusive under real concurrency, stale
claims are taken over, curves and outcomes round-trip, and several workers share a batch without duplicating or
losing a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from datetime import timedelta

import pytest
from sqlalchemy import update
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.engine.loop import RoundRecord
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.registry import Registry, claims
from fedbench.registry.schema import current_revision, head_revision
from fedbench.registry.tables import runs


def registered(url: str, recipe) -> tuple[Registry, list]:
    planned = expand(load_recipe(recipe))
    registry = Registry(url)
    registry.ensure_runs([p.registry_entry() for p in planned])
    return registry, planned


def test_a_new_registry_is_at_the_head_revision(any_registry_url):
    registry = Registry(any_registry_url)
    assert current_revision(registry.engine) == head_revision()
    assert registry.runs() == []


def test_ensure_runs_is_idempotent_and_claims_are_exclusive(any_registry_url, write_recipe):
    registry, planned = registered(any_registry_url, write_recipe())
    registry.ensure_runs([p.registry_entry() for p in planned])
    assert len(registry.runs()) == len(planned) == 4
    spec_hash = planned[0].spec_hash
    assert registry.claim(spec_hash, worker="otherhost:1") is not None
    assert registry.claim(spec_hash, worker="thirdhost:2") is None  # its holder beats recently
    assert registry.statuses([spec_hash]) == {spec_hash: "running"}


def test_a_stale_claim_from_another_host_and_a_dead_local_worker_are_taken_over(any_registry_url, write_recipe):
    registry, planned = registered(any_registry_url, write_recipe())
    remote, local = planned[0].spec_hash, planned[1].spec_hash
    remote_id = registry.claim(remote, worker="otherhost:1")
    with registry.engine.begin() as connection:  # its worker stopped beating longer ago than STALE_AFTER
        connection.execute(
            update(runs)
            .where(runs.c.id == remote_id)
            .values(heartbeat_at=claims.now() - claims.STALE_AFTER - timedelta(minutes=1))
        )
    assert registry.claim(remote, worker="newhost:7") == remote_id
    assert registry.get_run(remote_id).worker == "newhost:7"

    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(finished.stdout)  # a process of this host that has exited
    local_id = registry.claim(local, worker=f"{claims.socket.gethostname()}:{dead_pid}")
    assert local_id is not None
    assert registry.claim(local, worker="newhost:8") == local_id


def test_concurrent_claims_of_one_run_have_exactly_one_winner(any_registry_url, write_recipe):
    registry, planned = registered(any_registry_url, write_recipe())
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


def test_curves_outcomes_and_force_round_trip(any_registry_url, write_recipe):
    registry, planned = registered(any_registry_url, write_recipe())
    run_id = registry.claim(planned[0].spec_hash)
    for n in (1, 2, 3):
        registry.log_round(
            run_id, RoundRecord(round=n, train_loss=1.0 / n, wall_seconds=0.5, bytes_up=10, bytes_down=20)
        )
    registry.log_round(run_id, RoundRecord(round=3, train_loss=0.25, wall_seconds=0.5, bytes_up=10, bytes_down=20))
    registry.truncate_rounds(run_id, 2)
    registry.set_provenance(run_id, {"host": "h", "nested": {"a": [1, 2]}})
    registry.finish(run_id, "done", summary={"best": 0.5, "rounds_to": {"50": 2}}, wall_seconds=1.5)
    run = registry.get_run(planned[0].spec_hash[:10])
    assert (run.status, run.summary, run.provenance["nested"]) == (
        "done",
        {"best": 0.5, "rounds_to": {"50": 2}},
        {"a": [1, 2]},
    )
    assert [(r.round, r.train_loss) for r in registry.curve(run_id)] == [(1, 1.0), (2, 0.5)]
    assert registry.claim(planned[0].spec_hash) is None  # finished
    registry.reset_for_rerun([planned[0].spec_hash])
    assert registry.curve(run_id) == [] and registry.statuses([planned[0].spec_hash])[planned[0].spec_hash] == "pending"


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


def test_non_finite_values_in_json_columns_are_stored_on_every_backend(any_registry_url, write_recipe):
    """PostgreSQL's json type rejects NaN (it crashed recording a diverged run's summary there): a non-finite
    value in a JSON column reads back as NaN (SQLite) or None (PostgreSQL), i.e. no value; finite ones intact."""
    import math

    registry, planned = registered(any_registry_url, write_recipe())
    run_id = registry.claim(planned[0].spec_hash)
    record = RoundRecord(
        round=1, train_loss=0.5, wall_seconds=0.1, bytes_up=1, bytes_down=1, personal_per_client=[math.nan, 0.25]
    )
    registry.log_round(run_id, record)
    registry.finish(run_id, "diverged", summary={"final": math.inf, "best": 0.25, "rounds": [math.nan]})
    (stored,) = registry.curve(run_id)
    first, second = stored.personal_per_client
    assert (first is None or math.isnan(first)) and second == 0.25
    summary = registry.get_run(run_id).summary
    assert summary["best"] == 0.25 and summary["final"] in (None, math.inf)
    assert summary["rounds"][0] is None or math.isnan(summary["rounds"][0])
