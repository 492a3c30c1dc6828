"""Claims and heartbeats: a live worker in a long round keeps its claim (its heartbeat comes from a background
thread, not from finished rounds); a hung one (pid alive, heartbeat stopped) or a gone one is taken over, and
``fedbench runs --stale`` shows such runs. Time is a fake clock (``fedbench.registry.claims.now`` patched); the
background thread is waited on through an event, never through sleeps."""

from __future__ import annotations

import json
import os
import socket
import threading
from datetime import datetime, timedelta

import pytest
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.registry import Registry, claims

runner = CliRunner()
LOCAL_ALIVE = f"{socket.gethostname()}:{os.getpid()}"  # this test process: a local worker whose pid lives


class Clock:
    def __init__(self) -> None:
        self.value = datetime(2026, 1, 1, 12, 0, 0)

    def __call__(self) -> datetime:
        return self.value

    def advance(self, **delta: float) -> None:
        self.value += timedelta(**delta)


@pytest.fixture
def clock(monkeypatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(claims, "now", fake)
    return fake


@pytest.fixture
def registered(registry_url, write_recipe):
    planned = expand(load_recipe(write_recipe()))
    registry = Registry(registry_url)
    registry.ensure_runs([p.registry_entry() for p in planned])
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


@pytest.mark.parametrize("holder", ["otherhost:4242", LOCAL_ALIVE])
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
    assert registry.get_run(run_id).worker == holder and registry.get_run(run_id).heartbeat_at == clock.value


def test_without_the_background_heartbeat_the_same_long_round_would_be_taken_over(registered, clock):
    """The control of the test above: the claim timeout does take a silent remote claim over."""
    registry, spec_hash = registered
    run_id = registry.claim(spec_hash, worker="otherhost:4242")
    clock.advance(hours=3)
    assert registry.claim(spec_hash, worker="thief:1") == run_id


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


def test_runs_stale_without_a_registry_lists_nothing(tmp_path):
    url = f"sqlite:///{tmp_path / 'none' / 'fedbench.db'}"
    result = runner.invoke(app, ["runs", "--stale", "--registry", url, "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout) == []
    assert not (tmp_path / "none").exists()


def test_workers_beat_while_they_train(registry_url, write_recipe, monkeypatch):
    """work_through runs each claimed run inside a Heartbeat (the thread is what keeps long rounds alive)."""
    from fedbench.execution import worker
    from fedbench.execution.options import ExecutionOptions

    started = []

    class Recording(claims.Heartbeat):
        def __enter__(self):
            started.append((self.run_id, self.worker))
            return super().__enter__()

    monkeypatch.setattr(worker, "Heartbeat", Recording)
    planned = expand(load_recipe(write_recipe()), scale="smoke")[:1]
    Registry(registry_url).ensure_runs([p.registry_entry() for p in planned])
    options = ExecutionOptions(registry_url=registry_url, device="cpu")
    worker.work_through(planned, options, lambda event: None)
    assert started == [(1, claims.worker_id())]
    assert Registry(registry_url).get_run(1).status == "done"
