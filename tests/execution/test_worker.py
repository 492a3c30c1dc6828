"""A worker's claim loop (``fedbench/execution/worker.py``): the registry sink writes only while the claim is held,
``execute_one`` records each outcome (a user's error as one scrubbed line, a bug with its traceback, a takeover
writing nothing more), and ``work_through`` trains each claimed run inside a heartbeat."""

from __future__ import annotations

import pytest

from fedbench.errors import ClaimLost, FedbenchError, RegistryUnreachable, Stopped
from fedbench.execution import worker
from fedbench.execution.events import RunEnded, RunStarted
from fedbench.execution.options import ExecutionOptions
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.registry import Registry, claims


class Beat:
    def __init__(self, lost=False):
        self.lost, self.worker = lost, "host:9"


def test_the_sink_writes_as_the_claims_worker_and_nothing_once_the_claim_is_lost():
    written = []

    class Store:
        def log_round(self, run_id, record, worker=None):
            written.append((run_id, record, worker))

        def finish(self, run_id, status, worker=None, **outcome):
            raise ClaimLost(run_id, worker)

    beat = Beat()
    sink = worker.RegistrySink(Store(), 4, beat)
    sink.log_round("r1")
    assert written == [(4, "r1", "host:9")]
    with pytest.raises(ClaimLost):
        sink.finish("done")  # the registry saw the takeover first: the heartbeat learns it
    assert beat.lost
    with pytest.raises(ClaimLost):
        sink.log_round("r2")  # the heartbeat's flag: not even tried
    assert written == [(4, "r1", "host:9")]
    worker.RegistrySink(Store(), 5).log_round("r3")  # without a heartbeat: no worker named
    assert written[-1] == (5, "r3", None)


def test_a_checkpoint_mirror_only_for_a_storage_url(tmp_path):
    assert worker.checkpoint_mirror(ExecutionOptions(), "abc") is None
    assert worker.checkpoint_mirror(ExecutionOptions(checkpoints=str(tmp_path)), "abc") is None
    mirror = worker.checkpoint_mirror(ExecutionOptions(checkpoints="memory://bucket/ckpt/"), "abc")
    assert (mirror.url, mirror.spec_hash) == ("memory://bucket/ckpt", "abc")


@pytest.fixture
def claimed(registry_url, write_recipe):
    planned = expand(load_recipe(write_recipe()), scale="smoke")[0]
    registry = Registry(registry_url)
    registry.ensure_runs([planned.registry_entry()])
    run_id = registry.claim(planned.spec_hash, "host:1")
    return registry, planned, run_id, ExecutionOptions(registry_url=registry_url, device="cpu")


@pytest.mark.parametrize(
    "raised,stored,shown",
    [
        (FedbenchError("bad data at sqlite://u:secret@h/db"), "bad data at", "bad data at"),
        (ValueError("a bug"), "Traceback", "ValueError: a bug"),
    ],
)
def test_a_failing_run_is_recorded_failed_and_the_worker_goes_on(claimed, monkeypatch, raised, stored, shown):
    registry, planned, run_id, options = claimed

    def fail(*args, **kwargs):
        raise raised

    monkeypatch.setattr(worker, "train", fail)
    monkeypatch.setattr(registry, "scrub", lambda text: text.replace("secret", "***"))
    events = []
    assert worker.execute_one(registry, planned, run_id, options, events.append) == "failed"
    run = registry.get_run(run_id)
    assert run.status == "failed" and stored in run.error and "secret" not in run.error
    assert events[0] == RunStarted(planned.spec_hash, planned.spec.rounds)
    assert isinstance(events[-1], RunEnded) and events[-1].status == "failed" and shown in events[-1].error
    assert "secret" not in events[-1].error


def test_a_run_taken_over_is_left_to_its_new_worker(claimed, monkeypatch):
    registry, planned, run_id, options = claimed

    def lost(*args, **kwargs):
        raise ClaimLost(run_id, "host:1")

    monkeypatch.setattr(worker, "train", lost)
    events = []
    assert worker.execute_one(registry, planned, run_id, options, events.append) == "taken over"
    assert registry.get_run(run_id).status == "running"  # nothing written for it
    assert events[-1].status == "taken over" and "wrote nothing more" in events[-1].error


def test_a_registry_unreachable_through_its_retries_stops_the_worker_and_leaves_the_run_resumable(claimed, monkeypatch):
    """Nothing can be recorded (not even ``failed``, which would only retry again): the error goes up to stop the
    worker, and the run stays ``running`` under it, to be taken over once the worker is gone, as after a kill."""
    registry, planned, run_id, options = claimed
    gone = RegistryUnreachable("postgresql://u:***@h/db", 12, 60.0, "connection refused")

    def unreachable(*args, **kwargs):
        raise gone

    monkeypatch.setattr(worker, "train", unreachable)
    finished = []
    monkeypatch.setattr(registry, "finish", lambda *args, **kwargs: finished.append(args))
    with pytest.raises(RegistryUnreachable):
        worker.execute_one(registry, planned, run_id, options, lambda event: None)
    assert finished == [] and registry.get_run(run_id).status == "running"


@pytest.mark.parametrize(
    ("raised", "reason"),
    [
        (KeyboardInterrupt(), "interrupted by the user; re-run to resume"),
        (
            Stopped("stopped by SIGTERM (its Slurm job cancelled)"),
            "stopped by SIGTERM (its Slurm job cancelled); re-run",
        ),
    ],
)
def test_an_interrupted_run_is_stored_with_what_stopped_it(claimed, monkeypatch, raised, reason):
    registry, planned, run_id, options = claimed

    def stop(*args, **kwargs):
        raise raised

    monkeypatch.setattr(worker, "train", stop)
    with pytest.raises(KeyboardInterrupt):
        worker.execute_one(registry, planned, run_id, options, lambda event: None)
    run = registry.get_run(run_id)
    assert run.status == "interrupted" and run.error.startswith(reason), run.error


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


def test_a_worker_whose_code_changed_on_disk_stops_before_its_next_run(registry_url, write_recipe, monkeypatch):
    """The code is fingerprinted when the worker starts and checked before each claimed run: once it differs, the
    run is left interrupted (untrained, resumable by the next `fedbench run`) and the worker stops."""
    from fedbench.errors import CodeChanged
    from fedbench.execution import provenance

    monkeypatch.setattr(worker, "code_fingerprint", lambda: "at start")
    on_disk = iter(["at start", "edited"])  # before the first run, before the second
    monkeypatch.setattr(provenance, "code_fingerprint", lambda: next(on_disk))
    planned = expand(load_recipe(write_recipe()), scale="smoke")[:2]
    registry = Registry(registry_url)
    registry.ensure_runs([p.registry_entry() for p in planned])
    events = []
    with pytest.raises(CodeChanged, match="changed on disk since this worker started"):
        worker.work_through(planned, ExecutionOptions(registry_url=registry_url, device="cpu"), events.append)
    first, second = (registry.get_run(p.spec_hash) for p in planned)
    assert first.status == "done"
    assert second.status == "interrupted" and "run `fedbench run` again" in second.error
    assert registry.curve(second.id) == []  # not a round of it trained
    assert [e.status for e in events if isinstance(e, RunEnded)] == ["done", "interrupted"]


def test_a_worker_outside_a_checkout_is_not_checked(monkeypatch):
    from fedbench.execution import provenance

    monkeypatch.setattr(provenance, "code_fingerprint", lambda: pytest.fail("no fingerprint to compare with"))
    provenance.check_code_unchanged(None)
