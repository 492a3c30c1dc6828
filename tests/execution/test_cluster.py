"""Progress of remote workers read back from the registry (fedbench.execution.cluster.RegistryWatcher): the same start/round/
end events an in-process run emits, each once, and nothing for runs finished before the batch started."""

from __future__ import annotations

from fedbench.engine.loop import RoundRecord
from fedbench.execution.cluster import RegistryWatcher
from fedbench.execution.events import Event, RoundDone, RunEnded, RunStarted
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.registry import Registry


def test_the_watcher_turns_registry_changes_into_progress_events(any_registry_url, write_recipe):
    planned = expand(load_recipe(write_recipe()))
    registry = Registry(any_registry_url)
    registry.ensure_runs([p.registry_entry() for p in planned])
    trained, failing, finished_before, untouched = (p.spec_hash for p in planned)
    earlier = registry.claim(finished_before)
    registry.finish(earlier, "done", summary={"best": 0.5})
    events: list[Event] = []
    watcher = RegistryWatcher(registry, planned, events.append)

    run_id = registry.claim(trained, worker="node7:11")
    for n in (1, 2):
        registry.log_round(
            run_id,
            RoundRecord(round=n, train_loss=1.0, wall_seconds=0.5 * n, bytes_up=1, bytes_down=1, test_acc=0.25 * n),
        )
    watcher.poll()
    assert events == [
        RunStarted(trained, rounds=3),
        RoundDone(trained, round=2, test_acc=0.5, seconds=1.0),
    ]
    events.clear()
    registry.finish(run_id, "done", summary={"best": 0.5})
    failed_id = registry.claim(failing, worker="node8:12")
    registry.finish(failed_id, "failed", error="Traceback ...\nValueError: bad thing")
    watcher.poll()
    assert events == [
        RunEnded(trained, "done", error=""),
        RunStarted(failing, rounds=3),
        RunEnded(failing, "failed", error="ValueError: bad thing"),
    ]
    events.clear()
    watcher.poll()  # nothing changed: nothing to say, and never about the run finished before or the untouched one
    assert events == []
    assert untouched not in {getattr(e, "spec_hash", None) for e in events}


def test_a_run_claimed_again_after_its_end_starts_again_in_the_events(any_registry_url, write_recipe):
    """A run interrupted (scancel, a time limit) and taken over is news twice: its end, then a new start, so that
    the progress counts it once (not ``5/4 runs``)."""
    planned = expand(load_recipe(write_recipe()))[:1]
    registry = Registry(any_registry_url)
    registry.ensure_runs([p.registry_entry() for p in planned])
    (spec_hash,) = (p.spec_hash for p in planned)
    events: list[Event] = []
    watcher = RegistryWatcher(registry, planned, events.append)
    first = registry.claim(spec_hash, worker="node7:11")
    registry.finish(first, "interrupted", error="stopped by SIGTERM; re-run to resume")
    watcher.poll()
    second = registry.claim(spec_hash, worker="node8:12")
    registry.finish(second, "done", summary={"best": 0.5})
    watcher.poll()
    assert [type(e) for e in events] == [RunStarted, RunEnded, RunStarted, RunEnded]
    assert [e.status for e in events if isinstance(e, RunEnded)] == ["interrupted", "done"]


def test_slurm_warns_a_quarter_of_a_short_limit_ahead_and_90_s_ahead_of_a_long_one():
    from fedbench.execution.cluster import slurm_warning_seconds

    assert [slurm_warning_seconds(m) for m in (1, 2, 6, 240)] == [15, 30, 90, 90]
