"""A worker whose claim another worker took over (it hung long enough to look dead, then woke up) stops the run at
the next round boundary and writes nothing more for it: no round, no checkpoint, no status, no provenance. The new
owner's curve and outcome stay exactly as it recorded them.

Time is a fake clock (``fedbench.registry.claims.now``); the takeover happens inside the old worker's progress callback
after round 2 (where a hung worker would be between two rounds), and the new owner trains the run to the end there,
before the old worker wakes up and goes on."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from fedbench.engine.loop import RoundRecord
from fedbench.errors import ClaimLost
from fedbench.execution.events import Event, RoundDone, RunEnded
from fedbench.execution.options import ExecutionOptions
from fedbench.execution.worker import execute_one
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.registry import Registry, claims

RECIPE = """
paper = "claimtest"
name = "lostclaim"
seeds = [0]

[setup]
algorithm = "scaffold"
dataset = "digits"
model = "digits_mlp"
model_params = { hidden = 16 }
partition = "dirichlet"
partition_params = { alpha = 0.5, min_size = 5 }
num_clients = 4
clients_per_round = 2
rounds = 5
batch_size = 32
optimizer = { lr = 0.05, momentum = 0.9 }
"""
NEW_OWNER = "otherhost:1"
TAKEN_AFTER = 2


class Clock:
    def __init__(self) -> None:
        self.value = datetime(2026, 1, 1, 12, 0, 0)

    def __call__(self) -> datetime:
        return self.value

    def advance(self, delta: timedelta) -> None:
        self.value += delta


@pytest.fixture
def clock(monkeypatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(claims, "now", fake)
    return fake


@pytest.fixture
def planned(tmp_path):
    recipe = tmp_path / "claims.toml"
    recipe.write_text(RECIPE)
    (item,) = expand(load_recipe(recipe))
    return item


def registered(url: str, item) -> Registry:
    registry = Registry(url)
    registry.ensure_runs([item.registry_entry()])
    return registry


def options(url: str) -> ExecutionOptions:
    return ExecutionOptions(registry_url=url, device="cpu")


def run_row(registry: Registry, run_id: int) -> tuple:
    run = registry.get_run(run_id)
    return (
        run.status,
        run.worker,
        run.error,
        run.summary,
        run.rounds_done,
        run.finished_at,
        run.heartbeat_at,
        run.checkpoint_sha256,
        run.provenance,
    )


def rounds(registry: Registry, run_id: int) -> list[tuple]:
    return [(r.round, r.test_acc, r.test_loss, r.train_loss, r.wall_seconds) for r in registry.curve(run_id)]


@pytest.fixture
def straight(tmp_path, planned, clock) -> list[tuple]:
    url = f"sqlite:///{tmp_path / 'straight' / 'fedbench.db'}"
    registry = registered(url, planned)
    run_id = registry.claim(planned.spec_hash)
    assert execute_one(registry, planned, run_id, options(url), lambda event: None) == "done"
    return [row[:4] for row in rounds(registry, run_id)]


@pytest.mark.parametrize("heartbeat_noticed", [True, False], ids=["heartbeat-noticed", "unnoticed"])
def test_a_worker_that_wakes_after_a_takeover_stops_and_writes_nothing(
    tmp_path, planned, clock, straight, heartbeat_noticed
):
    """``heartbeat_noticed``: the old worker's heartbeat thread beat once after the takeover and set ``lost`` (the
    sink refuses without asking the registry); else the takeover is found by the registry's conditional write."""
    url = f"sqlite:///{tmp_path / 'registry' / 'fedbench.db'}"
    registry = registered(url, planned)
    old_worker = claims.worker_id()  # this process: alive, so only a stopped heartbeat lets another worker take over
    run_id = registry.claim(planned.spec_hash, old_worker)
    old_heartbeat = claims.Heartbeat(registry, run_id, old_worker)  # its thread is not started: it "hangs"
    checkpoint = registry.checkpoint_path(planned.spec_hash)
    seen: dict[str, object] = {}
    old_events: list[Event] = []

    def take_over() -> None:
        clock.advance(claims.STALE_AFTER + timedelta(seconds=1))  # the old worker's heartbeat went silent
        new_registry = Registry(url)
        assert new_registry.claim(planned.spec_hash, NEW_OWNER) == run_id
        new_heartbeat = claims.Heartbeat(new_registry, run_id, NEW_OWNER)
        status = execute_one(new_registry, planned, run_id, options(url), lambda event: None, heartbeat=new_heartbeat)
        assert status == "done"
        seen["row"], seen["rounds"] = run_row(new_registry, run_id), rounds(new_registry, run_id)
        clock.advance(timedelta(minutes=1))  # anything the old worker still wrote would carry a later time
        if heartbeat_noticed:
            old_heartbeat.beat()
            assert old_heartbeat.lost

    def old_emit(event: Event) -> None:
        old_events.append(event)
        if isinstance(event, RoundDone) and event.round == TAKEN_AFTER:
            take_over()

    if heartbeat_noticed:  # the sink must not even ask the registry once the heartbeat knows
        for method in ("log_round", "record_checkpoint", "truncate_rounds", "finish", "set_provenance"):
            original = getattr(registry, method)

            def guarded(*args, _original=original, _name=method, **kwargs):
                assert not old_heartbeat.lost, f"{_name} asked the registry after the claim was lost"
                return _original(*args, **kwargs)

            setattr(registry, method, guarded)

    status = execute_one(registry, planned, run_id, options(url), old_emit, heartbeat=old_heartbeat)

    assert status == "taken over"
    assert old_heartbeat.lost
    assert [e.round for e in old_events if isinstance(e, RoundDone)] == list(range(1, TAKEN_AFTER + 1))
    assert isinstance(old_events[-1], RunEnded) and old_events[-1].status == "taken over"
    # the new owner's record is exactly as it left it: status, worker, times, summary, provenance, every round
    assert run_row(registry, run_id) == seen["row"]
    assert rounds(registry, run_id) == seen["rounds"]
    assert [row[:4] for row in rounds(registry, run_id)] == straight
    assert run_row(registry, run_id)[:2] == ("done", NEW_OWNER)
    # the new owner deleted the finished run's checkpoint; the old worker wrote none, not even a temporary file
    assert not checkpoint.exists() and not list(checkpoint.parent.glob("*.tmp"))


@pytest.mark.parametrize("write", ["log_round", "record_checkpoint", "truncate_rounds", "finish", "set_provenance"])
def test_a_registry_write_for_a_lost_claim_is_refused_and_changes_nothing(any_registry_url, planned, clock, write):
    registry = registered(any_registry_url, planned)
    run_id = registry.claim(planned.spec_hash, "oldhost:1")
    registry.log_round(run_id, RoundRecord(round=1, train_loss=0.5, wall_seconds=1.0, bytes_up=1, bytes_down=1))
    registry.record_checkpoint(run_id, "a" * 64)
    clock.advance(claims.STALE_AFTER + timedelta(seconds=1))
    assert registry.claim(planned.spec_hash, NEW_OWNER) == run_id
    before = (run_row(registry, run_id), rounds(registry, run_id))
    clock.advance(timedelta(minutes=1))
    arguments = {
        "log_round": (RoundRecord(round=2, train_loss=0.4, wall_seconds=1.0, bytes_up=1, bytes_down=1),),
        "record_checkpoint": ("b" * 64,),
        "truncate_rounds": (0,),
        "finish": ("done",),
        "set_provenance": ({"host": "old"},),
    }[write]
    with pytest.raises(ClaimLost):
        getattr(registry, write)(run_id, *arguments, worker="oldhost:1")
    assert (run_row(registry, run_id), rounds(registry, run_id)) == before
    getattr(registry, write)(run_id, *arguments, worker=NEW_OWNER)  # the owner's own write goes through
    assert (run_row(registry, run_id), rounds(registry, run_id)) != before
