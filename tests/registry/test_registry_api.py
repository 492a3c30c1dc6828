"""The registry's retries, claims and chunked queries, without waiting on the clock.

Opening a registry retries a migration that lost a race, claims take over a worker that stopped beating
after ``STALE_AFTER``, and queries over many runs go to the database in chunks. These tests put a fake
``time.sleep`` and a fake clock (``claims.now``) in place of the real ones, so they check exactly the same
rules in milliseconds however busy the machine is (the subprocess races in test_cli.py and
test_registry_migration.py stay, marked slow)."""

from __future__ import annotations

import socket
import threading
from datetime import datetime, timedelta

import pytest
from sqlalchemy import insert, update
from sqlalchemy.exc import OperationalError, ProgrammingError

from fedbench.engine.loop import RoundRecord
from fedbench.errors import RegistryError
from fedbench.registry import Registry, claims, connection
from fedbench.registry.tables import rounds, runs


# ------------------------------------------------------------------------------------------- opening: retries
class FlakyUpgrade:
    """``schema.upgrade`` that fails ``failures`` times with ``error`` (as a racing worker makes it), then works."""

    def __init__(self, failures: int, error: Exception):
        self.failures, self.error, self.calls = failures, error, 0

    def __call__(self, engine, checkpoint_dir=None) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error


def operational(message: str) -> OperationalError:
    return OperationalError("UPDATE alembic_version", {}, Exception(message))


@pytest.fixture
def slept(monkeypatch) -> list[float]:
    """A fake time.sleep: records how long the registry would have waited, returns at once."""
    waits: list[float] = []
    monkeypatch.setattr(connection.time, "sleep", waits.append)
    return waits


@pytest.mark.parametrize(
    "error",
    [
        operational("database is locked"),
        ProgrammingError("CREATE TABLE runs", {}, Exception('relation "runs" already exists')),
        ProgrammingError("INSERT", {}, Exception("duplicate key value violates unique constraint")),
    ],
    ids=["sqlite-locked", "postgres-exists", "postgres-duplicate"],
)
def test_a_migration_that_lost_a_race_is_retried_with_growing_waits(monkeypatch, slept, registry_url, error):
    upgrade = FlakyUpgrade(4, error)
    monkeypatch.setattr(connection.schema, "upgrade", upgrade)
    Registry(registry_url)  # opens: the fifth attempt works
    assert upgrade.calls == 5
    assert slept == pytest.approx([0.1, 0.2, 0.3, 0.4])  # a growing back-off, 1 s in all


def test_the_retries_end_with_a_one_line_registry_error(monkeypatch, slept, registry_url):
    upgrade = FlakyUpgrade(5, operational("database is\nlocked"))
    monkeypatch.setattr(connection.schema, "upgrade", upgrade)
    with pytest.raises(RegistryError) as raised:
        Registry(registry_url)
    assert upgrade.calls == 5 and len(slept) == 4  # five attempts, no wait after the last
    assert str(raised.value) == f"cannot open registry {registry_url!r}: database is locked"


def test_other_errors_are_not_retried(monkeypatch, slept, registry_url):
    upgrade = FlakyUpgrade(1, operational("no such table: runs"))
    monkeypatch.setattr(connection.schema, "upgrade", upgrade)
    with pytest.raises(RegistryError, match="no such table: runs"):
        Registry(registry_url)
    assert upgrade.calls == 1 and slept == []


def test_a_registry_with_leftover_wal_files_says_so(monkeypatch, tmp_path, slept):
    database = tmp_path / "fedbench.db"
    monkeypatch.setattr(connection.schema, "upgrade", FlakyUpgrade(100, operational("disk I/O error")))
    with pytest.raises(RegistryError) as bare:
        Registry(f"sqlite:///{database}")
    assert "belong to a registry file that was deleted" not in str(bare.value)
    (tmp_path / "fedbench.db-wal").write_bytes(b"")
    with pytest.raises(RegistryError, match=r"fedbench.db-wal belong to a registry file that was deleted"):
        Registry(f"sqlite:///{database}")
    (tmp_path / "fedbench.db-shm").write_bytes(b"")
    with pytest.raises(RegistryError, match=r"fedbench.db-wal and .*fedbench.db-shm belong"):
        Registry(f"sqlite:///{database}")


# ------------------------------------------------------------------------------------------- claims and the clock
def entry(index: int) -> dict:
    return dict(
        spec_hash=f"{index:016x}",
        spec={},
        labels={},
        paper="p",
        recipe="r",
        algorithm="fedavg",
        dataset="digits",
        seed=index,
        scale="full",
        synthetic=False,
        targets=[],
    )


class Clock:
    """A fake ``claims.now``: the registry's timestamps come from here."""

    def __init__(self):
        self.time = datetime(2030, 1, 1, 12, 0, 0)

    def __call__(self) -> datetime:
        return self.time

    def advance(self, delta: timedelta) -> None:
        self.time += delta


@pytest.fixture
def clock(monkeypatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(claims, "now", fake)
    return fake


def test_a_claim_is_taken_over_only_after_the_holder_stopped_beating_for_stale_after(registry_url, clock):
    registry = Registry(registry_url)
    registry.ensure_runs([entry(1)])
    run_id = registry.claim(entry(1)["spec_hash"], worker="otherhost:7")
    assert run_id is not None
    clock.advance(claims.STALE_AFTER)
    assert registry.claim(entry(1)["spec_hash"], worker="thishost:8") is None  # exactly STALE_AFTER: still held
    registry.log_round(run_id, RoundRecord(round=1, train_loss=0.5, wall_seconds=1.0, bytes_up=1, bytes_down=1))
    clock.advance(claims.STALE_AFTER)  # the heartbeat of round 1 keeps it alive
    assert registry.claim(entry(1)["spec_hash"], worker="thishost:8") is None
    clock.advance(timedelta(seconds=1))
    assert registry.claim(entry(1)["spec_hash"], worker="thishost:8") == run_id
    (run,) = registry.runs()
    assert (run.status, run.worker, run.heartbeat_at, run.started_at) == (
        "running",
        "thishost:8",
        clock.time,
        clock.time,
    )


def test_a_claim_of_a_dead_process_on_this_host_is_taken_over_at_once(registry_url, clock):
    registry = Registry(registry_url)
    registry.ensure_runs([entry(1), entry(2)])
    host = socket.gethostname()
    dead = registry.claim(entry(1)["spec_hash"], worker=f"{host}:999999999")  # above any pid_max: no such process
    alive = registry.claim(entry(2)["spec_hash"], worker=f"{host}:{claims.os.getpid()}")
    assert dead is not None and alive is not None
    assert registry.claim(entry(1)["spec_hash"], worker=f"{host}:1") == dead
    assert registry.claim(entry(2)["spec_hash"], worker=f"{host}:1") is None  # this test's process is alive


@pytest.mark.parametrize("status", ["pending", "failed", "interrupted"])
def test_claimable_and_finished_statuses(registry_url, clock, status):
    registry = Registry(registry_url)
    registry.ensure_runs([entry(1), entry(2)])
    first, second = (registry.claim(entry(i)["spec_hash"], worker="h:1") for i in (1, 2))
    registry.finish(first, status)
    registry.finish(second, "done")
    assert registry.claim(entry(1)["spec_hash"], worker="h:2") == first
    assert registry.claim(entry(2)["spec_hash"], worker="h:2") is None
    assert registry.claim("no-such-hash", worker="h:2") is None


def test_reset_for_rerun_puts_finished_runs_back_to_pending(registry_url, clock):
    registry = Registry(registry_url)
    registry.ensure_runs([entry(1), entry(2)])
    done, running = (registry.claim(entry(i)["spec_hash"], worker="h:1") for i in (1, 2))
    registry.log_round(done, RoundRecord(round=1, train_loss=0.5, wall_seconds=1.0, bytes_up=1, bytes_down=1))
    registry.finish(done, "diverged", diverged_round=1, summary={"best": 0.5}, error="nan")
    registry.reset_for_rerun([entry(1)["spec_hash"], entry(2)["spec_hash"]])
    runs = {r.id: r for r in registry.runs()}
    assert (runs[done].status, runs[done].summary, runs[done].error, runs[done].rounds_done) == ("pending", {}, None, 0)
    assert runs[done].diverged_round is None and registry.curve(done) == []
    assert runs[running].status == "running"  # a run in progress is not reset


# ------------------------------------------------------------------------------------------- chunked queries
def test_queries_over_more_runs_than_one_chunk_return_each_run_once(registry_url):
    """statuses, runs and curves split long IN lists into chunks: every run comes back exactly once."""
    registry = Registry(registry_url)
    count = 1203  # two full chunks of 500 and a partial one
    with registry.engine.begin() as connection:
        connection.execute(insert(runs), [{"status": "done" if i % 2 else "pending", **entry(i)} for i in range(count)])
    hashes = [entry(i)["spec_hash"] for i in range(count)]
    statuses = registry.statuses(hashes + ["missing"])
    assert len(statuses) == count and statuses[hashes[7]] == "done" and statuses[hashes[8]] == "pending"
    rows = registry.runs(spec_hashes=hashes)
    assert sorted(r.spec_hash for r in rows) == sorted(hashes)  # no run missing, none twice
    ids = [r.id for r in rows]
    with registry.engine.begin() as connection:
        connection.execute(insert(rounds), [{"run_id": run_id, "round": 1, "train_loss": 0.5} for run_id in ids])
    curves = registry.curves(ids)
    assert sorted(curves) == sorted(ids) and all(len(c) == 1 and c[0].run_id == i for i, c in curves.items())
    assert [r.spec_hash for r in registry.runs(status="done")] == hashes[1::2]


def test_a_local_worker_of_another_user_is_alive_not_gone(registry_url, clock, monkeypatch):
    """Signalling another user's process is refused (EPERM): the process exists, so its claim is kept while it
    beats, and only its silence frees it."""
    registry = Registry(registry_url)
    registry.ensure_runs([entry(1)])
    host = socket.gethostname()
    run_id = registry.claim(entry(1)["spec_hash"], worker=f"{host}:4242")
    assert run_id is not None

    def not_permitted(pid: int, signal: int) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(claims.os, "kill", not_permitted)
    assert registry.claim(entry(1)["spec_hash"], worker=f"{host}:1") is None
    assert registry.stale_runs() == []
    clock.advance(claims.STALE_AFTER + timedelta(seconds=1))
    (run,) = registry.runs()
    assert (
        claims.stale_reason(run)
        == f"worker {host}:4242 hung (its process lives, its heartbeat stopped): no heartbeat for 301 s (timeout 300 s)"
    )


def test_a_takeover_takes_only_the_claim_it_judged_stale(registry_url, clock, monkeypatch):
    """Two workers find the same silent claim; one takes it over while the other is still deciding. The slower one
    must not take the claim the first one now holds (and beats): its takeover applies only to the claim it saw."""
    registry = Registry(registry_url)
    registry.ensure_runs([entry(1)])
    spec_hash = entry(1)["spec_hash"]
    run_id = registry.claim(spec_hash, worker="otherhost:7")
    clock.advance(claims.STALE_AFTER + timedelta(seconds=1))
    judged = claims.stale_reason
    raced: list[int | None] = []

    def judged_while_another_takes_over(run):
        reason = judged(run)
        if not raced:  # the other worker is faster: it takes the claim over between our look and our update
            raced.append(None)
            raced.append(registry.claim(spec_hash, worker="thirdhost:9"))
        return reason

    monkeypatch.setattr(claims, "stale_reason", judged_while_another_takes_over)
    assert registry.claim(spec_hash, worker="thishost:8") is None
    assert raced == [None, run_id]
    (run,) = registry.runs()
    assert (run.status, run.worker) == ("running", "thirdhost:9")


def test_stale_runs_say_why_each_claim_is_free(registry_url, clock):
    """The reasons `fedbench runs --stale` shows: a local worker whose process is gone, a remote one silent for more
    than STALE_AFTER (300 s), and a claim that never beat."""
    registry = Registry(registry_url)
    registry.ensure_runs([entry(1), entry(2), entry(3)])
    host = socket.gethostname()
    registry.claim(entry(1)["spec_hash"], worker=f"{host}:999999999")  # above any pid_max: no such process
    registry.claim(entry(2)["spec_hash"], worker="otherhost:7")
    never = registry.claim(entry(3)["spec_hash"], worker="otherhost:8")
    with registry.engine.begin() as connection:  # a claim made before heartbeats were recorded
        connection.execute(update(runs).where(runs.c.id == never).values(heartbeat_at=None))
    clock.advance(timedelta(minutes=7))
    reasons = {run.spec_hash: reason for run, reason in registry.stale_runs()}
    assert reasons == {
        entry(1)["spec_hash"]: f"worker {host}:999999999 is gone",
        entry(2)["spec_hash"]: "worker otherhost:7 silent: no heartbeat for 420 s (timeout 300 s)",
        entry(3)["spec_hash"]: "worker otherhost:8 never beat",
    }


def test_the_heartbeat_thread_is_named_after_its_run_and_ends_with_the_block(registry_url, clock):
    """A thread dump (py-spy, faulthandler) of a busy worker shows which run each heartbeat thread keeps alive; the
    thread ends when the block does (run in a helper thread, so that a heartbeat that never stops fails the test
    instead of hanging it)."""
    registry = Registry(registry_url)
    registry.ensure_runs([entry(1)])
    run_id = registry.claim(entry(1)["spec_hash"], worker="h:1")
    names: list[set[str]] = []

    def block() -> None:
        with claims.Heartbeat(registry, run_id, "h:1", every=3600):
            names.append({thread.name for thread in threading.enumerate()})

    helper = threading.Thread(target=block, daemon=True)
    helper.start()
    helper.join(timeout=30)
    assert not helper.is_alive()
    assert len(names) == 1 and f"heartbeat-{run_id}" in names[0]
    assert f"heartbeat-{run_id}" not in {thread.name for thread in threading.enumerate()}


@pytest.mark.parametrize("given", [True, False], ids=["every-given", "default-every"])
def test_the_heartbeat_beats_at_the_interval_given_or_else_at_heartbeat_every(registry_url, clock, monkeypatch, given):
    """every=0.001 s beats at once however long HEARTBEAT_EVERY is; without it HEARTBEAT_EVERY (here 0.001 s) sets
    the pace. Three beats are awaited (60 s bounds a hang; it is not a timing assertion): at the other interval,
    an hour, none would come."""
    registry = Registry(registry_url)
    registry.ensure_runs([entry(1)])
    run_id = registry.claim(entry(1)["spec_hash"], worker="h:1")
    monkeypatch.setattr(claims, "HEARTBEAT_EVERY", timedelta(hours=1) if given else timedelta(milliseconds=1))
    three = threading.Event()
    beats: list[bool] = []
    original = registry.heartbeat

    def counted(run: int, worker: str) -> bool:
        beats.append(original(run, worker))
        if len(beats) >= 3:
            three.set()
        return beats[-1]

    registry.heartbeat = counted  # type: ignore[method-assign]
    with claims.Heartbeat(registry, run_id, "h:1", **({"every": 0.001} if given else {})):
        assert three.wait(timeout=60)
    assert all(beats)
