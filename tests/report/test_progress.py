"""Where a batch stands (fedbench/report/progress.py): counts per status, the running runs' rounds and the time-left
estimate, checked by hand on a registry written through the Registry API."""

from __future__ import annotations

import pytest

from fedbench.engine.loop import RoundRecord
from fedbench.registry import Registry
from fedbench.report.progress import recipe_progress, totals
from fedbench.vocab.status import RunStatus


def entry(
    index: int,
    *,
    recipe: str = "r",
    scale: str = "full",
    rounds: int = 10,
    labels: dict[str, str] | None = None,
    model: str = "mlp",
    dataset: str = "digits",
) -> dict:
    return dict(
        spec_hash=f"{index:016x}",
        spec={"rounds": rounds, "model": model},
        labels=labels or {},
        paper="p",
        recipe=recipe,
        algorithm="fedavg",
        dataset=dataset,
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


MLP, CNN = {"case": "MLP digits"}, {"case": "CNN digits"}


@pytest.fixture
def two_cells(any_registry_url) -> Registry:
    """Recipe t at scale full, runs of 10 planned rounds in two cells: MLP (cheap) with 3 runs done, 30 recorded rounds
    of 0.1 s; CNN (costly) with run 10 running on one worker after 1 round of 3 s, runs 11 and 12 pending."""
    registry = Registry(any_registry_url)
    mlp = [entry(i, recipe="t", labels=MLP) for i in range(3)]
    cnn = [entry(i, recipe="t", labels=CNN, model="cnn") for i in range(10, 13)]
    registry.ensure_runs(mlp + cnn)
    for index in range(3):
        registry.finish(train(registry, index, 10, 0.1, "host:1"), RunStatus.DONE, worker="host:1")
    train(registry, 10, 1, 3.0, "host:2")
    return registry


def test_each_waiting_run_is_costed_at_its_own_cells_rounds(two_cells):
    """The CNN runs left (9 + 10 + 10 rounds) at the CNN cell's 3 s a round, not at the mean of all 31 recorded
    rounds (6 s / 31, which the cheap MLP rounds pull down to 0.19 s)."""
    [t] = recipe_progress(two_cells)
    assert (t.rounds_left, t.workers, t.waiting) == (29, 1, 3)
    assert t.seconds_per_round == pytest.approx(6.0 / 31)  # the recipe and scale's mean, as before
    assert t.seconds_left == pytest.approx(29 * 3.0)
    assert t.estimated_from_other_cells == 0


def test_a_cell_with_no_recorded_round_is_costed_at_its_model_or_the_recipe_and_counted(two_cells):
    """A pending run of a third cell with the CNN's dataset and model is costed at the CNN's 3 s a round; one of a
    model no cell has recorded, at the recipe and scale's mean; both are counted as estimated from other cells."""
    two_cells.ensure_runs(
        [
            entry(20, recipe="t", labels={"case": "CNN digits, 2 clients"}, model="cnn"),
            entry(21, recipe="t", labels={"case": "ResNet digits"}, model="resnet", rounds=5),
        ]
    )
    [t] = recipe_progress(two_cells)
    assert t.rounds_left == 29 + 10 + 5
    assert t.seconds_left == pytest.approx(29 * 3.0 + 10 * 3.0 + 5 * 6.0 / 31)
    assert t.estimated_from_other_cells == 2


def test_a_cell_is_its_labels_whatever_their_key_order(two_cells):
    """Labels stored with their keys in another order (an imported run's) are the same cell."""
    two_cells.ensure_runs(
        [
            entry(30, recipe="t", labels={"algorithm": "fedtrip", **CNN}, model="cnn"),
            entry(31, recipe="t", labels={**CNN, "algorithm": "fedtrip"}, model="cnn"),
        ]
    )
    train(two_cells, 30, 2, 5.0, "host:3")
    [t] = recipe_progress(two_cells)
    # cell (fedtrip, CNN): run 30 with 8 rounds left, run 31 with 10, both at 5 s a round
    assert t.seconds_left == pytest.approx((29 * 3.0 + 18 * 5.0) / 2)
    assert t.estimated_from_other_cells == 0
