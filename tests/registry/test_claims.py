"""Claims and heartbeats (fedbench.registry.claims): who may train a run, and when its claim is free again. A live
worker in a long round keeps its claim (its heartbeat comes from a background thread, not from finished rounds); a
hung one (pid alive, heartbeat stopped) or a gone one is taken over, and ``fedbench runs --stale`` shows such runs
with the reason; a finished run is claimed again only once reset for a rerun.

Time is a fake clock (``fedbench.registry.claims.now`` patched), so the rules are checked exactly, in milliseconds,
however busy the machine is; the background thread is waited on through an event, never through sleeps. Claims under
real concurrency (threads and processes racing for one run) are in tests/integration/test_racing_workers.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from datetime import datetime, timedelta

import pytest
from sqlalchemy import update
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.engine.loop import RoundRecord
from fedbench.registry import Registry, claims
from fedbench.registry.tables import runs
from registry_fixtures import entry, register_recipe

runner = CliRunner()
LOCAL_ALIVE = f"{socket.gethostname()}:{os.getpid()}"  # this test process: a local worker whose pid lives


class Clock:
    """A fake ``claims.now``: the registry's timestamps come from here."""

    def __init__(self) -> None:
        self.time = datetime(2026, 1, 1, 12, 0, 0)

    def __call__(self) -> datetime:
        return self.time

    def advance(self, delta: timedelta | None = None, **parts: float) -> None:
        self.time += (delta or timedelta()) + timedelta(**parts)


@pytest.fixture
def clock(monkeypatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(claims, "now", fake)
    return fake


@pytest.fixture
def registered(registry_url, write_recipe):
    registry, planned = register_recipe(registry_url, write_recipe())
    return registry, planned[0].spec_hash


def beats_seen(registry: Registry, times: int) -> tuple[threading.Event, list[datetime]]:
    """Wrap ``registry.heartbeat`` so the test can wait until the background thread beat ``times`` times."""
    done, seen = threading.Event(), []
    original = registry.heartbeat

    def counted(run_id: int, worker: str) -> bool:
        at = claims.now()  # the time this beat writes (read before it writes)
        alive = original(run_id, worker)
        seen.append(at)
        if len(seen) >= times:
            done.set()
        return alive

    registry.heartbeat = counted  # type: ignore[method-assign]
    return done, seen


# ------------------------------------------------------------------------------------------- heartbeats
@pytest.mark.parametrize("holder", ["otherhost:4242", LOCAL_ALIVE], ids=["remote", "local-alive"])  # ids: no pid
def test_a_live_worker_in_a_long_round_keeps_its_claim(registered, clock, holder):
    registry, spec_hash = registered
    run_id = registry.claim(spec_hash, worker=holder)
    assert run_id is not None
    done, seen = beats_seen(registry, 1)
    with claims.Heartbeat(registry, run_id, holder, every=0.001) as heartbeat:
        # a round that takes three hours: no round is logged, only the background thread beats
        clock.advance(hours=3)
        moment = claims.now()
        # a beat written at the new time: one already under way when the clock moved wrote the old time
        while not any(at >= moment for at in seen):
            done.clear()
            seen.clear()
            assert done.wait(timeout=60)  # the wait bounds a hang, it is not a timing assertion
        assert registry.claim(spec_hash, worker="thief:1") is None
        assert registry.stale_runs() == []
        assert not heartbeat.lost
    assert registry.get_run(run_id).worker == holder and registry.get_run(run_id).heartbeat_at == clock.time


def test_without_the_background_heartbeat_the_same_long_round_would_be_taken_over(registered, clock):
    """The control of the test above: the claim timeout does take a silent remote claim over."""
    registry, spec_hash = registered
    run_id = registry.claim(spec_hash, worker="otherhost:4242")
    clock.advance(hours=3)
    assert registry.claim(spec_hash, worker="thief:1") == run_id


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


def test_the_claim_timeout_is_ten_missed_heartbeats_of_thirty_seconds():
    """The documented figures (connection.py's comment, docs): a beat every 30 s, a claim free after ten missed beats."""
    assert claims.HEARTBEAT_EVERY.total_seconds() == 30 and claims.STALE_AFTER == 10 * claims.HEARTBEAT_EVERY


# ------------------------------------------------------------------------------------------- taking a claim over
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


def test_ensure_runs_is_idempotent_and_claims_are_exclusive(any_registry_url, write_recipe):
    registry, planned = register_recipe(any_registry_url, write_recipe())
    registry.ensure_runs([p.registry_entry() for p in planned])
    assert len(registry.runs()) == len(planned) == 4
    spec_hash = planned[0].spec_hash
    assert registry.claim(spec_hash, worker="otherhost:1") is not None
    assert registry.claim(spec_hash, worker="thirdhost:2") is None  # its holder beats recently
    assert registry.statuses([spec_hash]) == {spec_hash: "running"}


def test_a_stale_claim_from_another_host_and_a_dead_local_worker_are_taken_over(any_registry_url, write_recipe):
    registry, planned = register_recipe(any_registry_url, write_recipe())
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


# ------------------------------------------------------------------------------------------- stale runs
def test_a_hung_local_worker_is_reported_and_taken_over(registered, clock, registry_url):
    registry, spec_hash = registered
    run_id = registry.claim(spec_hash, worker=LOCAL_ALIVE)  # its pid lives: before, that held the claim forever
    clock.advance(seconds=claims.STALE_AFTER.total_seconds() - 1)
    assert registry.claim(spec_hash, worker="other:2") is None  # within the timeout: still its own
    assert registry.stale_runs() == []
    clock.advance(seconds=2)  # the heartbeat stopped: past the claim timeout
    [(row, reason)] = registry.stale_runs()
    assert row.id == run_id and "hung" in reason and "no heartbeat" in reason

    listed = runner.invoke(app, ["runs", "--stale", "--registry", registry_url, "--json"])
    assert listed.exit_code == 0, listed.output
    [record] = json.loads(listed.stdout)
    assert record["spec_hash"] == spec_hash and record["worker"] == LOCAL_ALIVE
    assert record["heartbeat_age_seconds"] == claims.STALE_AFTER.total_seconds() + 1
    table = runner.invoke(app, ["runs", "--stale", "--registry", registry_url])
    assert "1 stale runs" in table.output and "hung" in table.output

    assert registry.claim(spec_hash, worker="other:2") == run_id  # reclaimed
    assert registry.stale_runs() == []
    # the hung worker, should it wake up, learns that its claim is gone
    heartbeat = claims.Heartbeat(registry, run_id, LOCAL_ALIVE)
    heartbeat.beat()
    assert heartbeat.lost


def test_a_gone_local_worker_is_taken_over_at_once(registered, clock):
    registry, spec_hash = registered
    dead = f"{socket.gethostname()}:{2**22 + 12345}"  # above the kernel's pid_max: no such process
    run_id = registry.claim(spec_hash, worker=dead)
    [(_, reason)] = registry.stale_runs()
    assert "is gone" in reason
    assert registry.claim(spec_hash, worker="other:2") == run_id


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


def test_runs_stale_without_a_registry_lists_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'none' / 'fedbench.db'}"
    result = runner.invoke(app, ["runs", "--stale", "--registry", url, "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout) == []
    assert not (tmp_path / "none").exists()


# ------------------------------------------------------------------------------------------- finishing and resetting
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


def test_reset_for_rerun_skips_unfinished_and_unknown_runs_and_forgets_the_checkpoint(registry_url):
    registry = Registry(registry_url)
    registry.ensure_runs([entry(1), entry(2), entry(3)])
    for seed in (2, 3):
        run_id = registry.claim(entry(seed)["spec_hash"], worker="w:1")
        registry.record_checkpoint(run_id, "ab" * 32)
        registry.finish(run_id, "interrupted" if seed == 3 else "done", summary={"best": 1.0})
    done, interrupted = registry.get_run(entry(2)["spec_hash"]), registry.get_run(entry(3)["spec_hash"])
    assert (
        done.checkpoint_sha256 is None and interrupted.checkpoint_sha256 == "ab" * 32
    )  # (finish: only a finished run's)
    registry.record_checkpoint(done.id, "cd" * 32)
    # unknown and unfinished runs first: they are skipped, the finished one after them is still reset
    registry.reset_for_rerun(["f" * 16, entry(1)["spec_hash"], entry(3)["spec_hash"], entry(2)["spec_hash"]])
    assert registry.statuses([entry(n)["spec_hash"] for n in (1, 2, 3)]) == {
        entry(1)["spec_hash"]: "pending",
        entry(2)["spec_hash"]: "pending",
        entry(3)["spec_hash"]: "interrupted",
    }
    assert registry.checkpoint_sha256(done.id) is None  # "None if it wrote none since it was last reset"
    assert registry.checkpoint_sha256(interrupted.id) == "ab" * 32  # an unfinished run keeps its checkpoint to resume
    assert registry.get_run(done.id).summary == {}


def test_the_public_names_of_the_registry_import():
    for module, public in [
        ("fedbench.registry", ["Registry", "default_registry_url"]),
        ("fedbench.registry.claims", ["Heartbeat", "worker_id", "stale_reason", "now"]),
        ("fedbench.vocab.status", ["RunStatus", "FINISHED", "CLAIMABLE", "WAITING", "ENDED"]),
    ]:
        names: dict = {}
        exec(f"from {module} import *", names)
        assert all(name in names for name in public), module
