"""Where a batch stands (fedbench/report/progress.py): counts per status, the running runs' rounds and the time-left
estimate, checked by hand on a registry written through the Registry API."""

from __future__ import annotations

import pytest

from fedbench.engine.loop import RoundRecord
from fedbench.registry import Registry
from fedbench.report.progress import recipe_progress, totals
from fedbench.vocab.status import RunStatus


def entry(index: int, *, recipe: str = "r", scale: str = "full", rounds: int = 10) -> dict:
    return dict(
        spec_hash=f"{index:016x}",
        spec={"rounds": rounds},
        labels={},
        paper="p",
        recipe=recipe,
        algorithm="fedavg",
        dataset="digits",
        seed=index,
        scale=scale,
        synthetic=False,
        targets=[],
    )


def train(registry: Registry, index: int, rounds: int, seconds: float, worker: str) -> int:
    """Claim run ``index`` as ``worker`` and record ``rounds`` rounds of ``seconds`` each."""
    run_id = registry.claim(f"{index:016x}", worker=worker)
    assert run_id is not None
    for number in range(1, rounds + 1):
        record = RoundRecord(round=number, train_loss=1.0, wall_seconds=seconds, bytes_up=0, bytes_down=0)
        registry.log_round(run_id, record, worker=worker)
    return run_id


@pytest.fixture
def batch(registry_url) -> Registry:
    """Recipe r at scale full, runs of 10 planned rounds: run 0 done (10 rounds of 2 s), runs 1 and 2 running on two
    workers (4 and 6 rounds of 2 s), run 3 failed after 1 round of 2 s, run 4 interrupted after 3 rounds of 2 s,
    runs 5 and 6 pending; recipe r at scale smoke: one pending run of 3 rounds, nothing recorded."""
    registry = Registry(registry_url)
    registry.ensure_runs([entry(i) for i in range(7)] + [entry(7, scale="smoke", rounds=3)])
    done = train(registry, 0, 10, 2.0, "host:1")
    registry.finish(done, RunStatus.DONE, worker="host:1")
    train(registry, 1, 4, 2.0, "host:2")
    train(registry, 2, 6, 2.0, "host:3")
    failed = train(registry, 3, 1, 2.0, "host:4")
    registry.finish(failed, RunStatus.FAILED, error="boom", worker="host:4")
    interrupted = train(registry, 4, 3, 2.0, "host:5")
    registry.finish(interrupted, RunStatus.INTERRUPTED, worker="host:5")
    return registry


def test_counts_rounds_and_the_time_left_by_hand(batch):
    full, smoke = recipe_progress(batch)
    assert (full.recipe, full.scale, smoke.scale) == ("r", "full", "smoke")
    assert full.counts == {
        RunStatus.DONE: 1,
        RunStatus.RUNNING: 2,
        RunStatus.FAILED: 1,
        RunStatus.INTERRUPTED: 1,
        RunStatus.PENDING: 2,
    }
    assert (full.running_rounds_done, full.running_rounds, full.workers) == (10, 20, 2)
    # left: running 6 + 4, interrupted 7, pending 10 + 10 (the failed run stays failed for the batch)
    assert full.rounds_left == 37
    # 24 recorded rounds of 2 s each, shared by the 2 running workers
    assert full.seconds_per_round == pytest.approx(2.0)
    assert full.seconds_left == pytest.approx(37 * 2.0 / 2)
    assert (full.runs, full.waiting) == (7, 5)


def test_no_recorded_round_gives_no_estimate_and_nothing_left_gives_zero(batch):
    smoke = recipe_progress(batch)[1]
    assert (smoke.counts, smoke.rounds_left, smoke.workers) == ({RunStatus.PENDING: 1}, 3, 0)
    assert smoke.seconds_per_round is None and smoke.seconds_left is None
    finished = recipe_progress(batch)[0]
    finished.rounds_left = 0
    assert finished.seconds_left == 0.0


def test_selection_by_paper_and_recipe_and_the_totals(batch):
    batch.ensure_runs([{**entry(8, recipe="other"), "paper": "q"}])
    assert [p.recipe for p in recipe_progress(batch, recipe="other")] == ["other"]
    assert [p.paper for p in recipe_progress(batch, paper="q")] == ["q"]
    assert recipe_progress(batch, paper="none") == []
    assert totals(recipe_progress(batch))[RunStatus.PENDING] == 4


def test_no_running_worker_counts_as_one(batch):
    """With no running run (all claims ended), the time left assumes one worker, not a division by zero."""
    full = recipe_progress(batch)[0]
    full.workers = 0
    assert full.seconds_left == pytest.approx(37 * 2.0)
