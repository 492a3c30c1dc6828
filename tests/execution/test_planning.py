"""``fedbench plan`` (``fedbench.execution.planning``): the FLOPs of a recipe's runs equal the hand sums of the cost formulas,
a time estimate is the calibration's rate applied to that work, and bad input is one line with exit code 2.
No timing anywhere: the calibrations here are fakes with fixed rates."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from fedbench.cli import app
from fedbench.execution import planning
from fedbench.execution.selection import select_runs
from fedbench.spec import RunSpec

# TINY_RECIPE (conftest): digits (1,437 training / 360 test images, registered), digits_mlp with 32 hidden units,
# 4 clients, 2 per round, 3 rounds evaluated every round, batch 64, E = 1; fedavg and fedprox × seeds 0 and 1.
FORWARD = 2 * (64 * 32 + 32 * 10)  # two matrix products, 2 FLOPs per multiply-accumulate
# backward: both weight gradients, and the input gradient of the second layer (the first needs none)
TRAIN = FORWARD + 2 * (64 * 32 + 32 * 10) + 2 * 32 * 10
PARAMS = 64 * 32 + 32 + 32 * 10 + 10
PER_CLIENT = 1437 // 4
STEPS = -(-PER_CLIENT // 64)


def _fake(plan_items, train_rate=1e9, eval_rate=4e9):
    rate = planning.Rate(train_rate, eval_rate)
    return planning.Calibration("fake", "fake", {w: rate for w in planning.workloads(plan_items)})


def test_flops_of_a_tiny_recipe_equal_the_hand_sums(write_recipe):
    planned = select_runs([write_recipe()])
    plan = planning.build_plan(planned, _fake(planned), jobs=1)
    fedavg_run = 3 * 2 * PER_CLIENT * TRAIN
    fedprox_run = 3 * 2 * (PER_CLIENT * TRAIN + 2 * STEPS * PARAMS)  # FedProx's attach: 2K|w| (FedTrip Table VIII)
    eval_run = 3 * 360 * FORWARD
    assert plan.runs == 4 and plan.unknown == 0
    assert plan.train_flops == 2 * fedavg_run + 2 * fedprox_run
    assert plan.eval_flops == 4 * eval_run
    cells = {c.labels["algorithm"]: c for c in plan.cells}
    assert cells["fedavg"].runs == cells["fedprox"].runs == 2
    assert cells["fedprox"].train_flops == 2 * fedprox_run


def test_time_estimate_is_the_calibrated_rate_applied_to_the_work(write_recipe):
    planned = select_runs([write_recipe()])
    one = planning.build_plan(planned, _fake(planned, 1e9, 4e9), jobs=1)
    assert one.seconds == pytest.approx(one.train_flops / 1e9 + one.eval_flops / 4e9, rel=1e-12)
    assert sum(c.seconds for c in one.cells) == pytest.approx(one.seconds, rel=1e-12)
    three = planning.build_plan(planned, _fake(planned, 1e9, 4e9), jobs=3)
    assert three.wall_seconds == pytest.approx(one.seconds / 3, rel=1e-12)
    faster = planning.build_plan(planned, _fake(planned, 2e9, 8e9), jobs=1)
    assert faster.seconds == pytest.approx(one.seconds / 2, rel=1e-12)


def test_assumed_throughput_is_one_rate_for_every_workload(write_recipe):
    planned = select_runs([write_recipe()])
    calibration = planning.assumed_calibration(planning.workloads(planned), 5e12, "H100 (assumed)")
    plan = planning.build_plan(planned, calibration)
    assert plan.seconds == pytest.approx((plan.train_flops + plan.eval_flops) / 5e12, rel=1e-12)


@pytest.mark.parametrize(
    ("load", "cpus", "threads", "busy"),
    [(0.2, 2, 1, False), (1.0, 2, 1, False), (1.9, 2, 1, True), (2.0, 16, 8, False), (9.0, 16, 8, True)],
)
def test_a_calibration_on_busy_cpus_says_its_times_overstate(write_recipe, monkeypatch, load, cpus, threads, busy):
    monkeypatch.setattr(planning.os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(planning.os, "cpu_count", lambda: cpus)
    items = planning.workloads(select_runs([write_recipe()]))
    calibration = planning.calibrate(items, "cpu", threads=threads, seconds=0.01, max_steps=3)
    assert calibration.method.startswith("measured: ~0.01 s of training steps")
    assert ("the CPUs were busy" in calibration.method) is busy
    if busy:
        assert f"load average {load:.1f} on {cpus} CPUs, {threads} thread(s) measuring" in calibration.method


def test_a_calibration_without_a_load_average_says_nothing_of_it(write_recipe, monkeypatch):
    def unavailable():
        raise OSError("no load average")

    monkeypatch.setattr(planning.os, "getloadavg", unavailable)
    items = planning.workloads(select_runs([write_recipe()]))
    calibration = planning.calibrate(items, "cpu", seconds=0.01, max_steps=3)
    assert calibration.method == "measured: ~0.01 s of training steps and of evaluation batches per model"


def test_the_plan_command_prints_the_busy_caveat(write_recipe, monkeypatch):
    monkeypatch.setattr(planning.os, "getloadavg", lambda: (3.0, 3.0, 3.0))
    monkeypatch.setattr(planning.os, "cpu_count", lambda: 2)
    result = CliRunner().invoke(app, ["plan", str(write_recipe()), "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert "the CPUs were busy while it measured (load average 3.0 on 2 CPUs" in " ".join(result.output.split())


def test_step_budget_and_fixed_client_sizes_follow_the_engines_formulas(write_recipe):
    planned = select_runs([write_recipe()], overrides={"local_steps": 5, "eval_every": 2})
    plan = planning.build_plan(planned, _fake(planned))
    # 5 full batches of 64 per client and round; evaluated after rounds 2 and 3 (the last)
    assert plan.train_flops == 2 * 3 * 2 * 5 * 64 * TRAIN + 2 * 3 * 2 * (5 * 64 * TRAIN + 2 * 5 * PARAMS)
    assert plan.eval_flops == 4 * 2 * 360 * FORWARD


@pytest.mark.parametrize("eval_mode", ["personal", "both"])
def test_client_splits_leave_training_and_are_evaluated_with_the_validation_splits(write_recipe, eval_mode):
    overrides = {"client_test_fraction": 0.25, "client_val_fraction": 0.125, "eval_mode": eval_mode}
    planned = select_runs([write_recipe()], overrides=overrides)
    plan = planning.build_plan(planned, _fake(planned))
    n_test, n_val = round(PER_CLIENT * 0.25), round(PER_CLIENT * 0.125)  # 90 and 45 of each client's 359
    train = PER_CLIENT - n_test - n_val
    steps = -(-train // 64)
    assert plan.train_flops == 2 * 3 * 2 * train * TRAIN + 2 * 3 * 2 * (train * TRAIN + 2 * steps * PARAMS)
    per_evaluation = 4 * (n_test + n_val) + (360 if eval_mode == "both" else 0)  # "both" scores the test set too
    assert plan.eval_flops == 4 * 3 * per_evaluation * FORWARD


def test_client_test_sets_drawn_from_the_test_set_are_one_pass_over_it(write_recipe):
    overrides = {"client_test": "class_matched", "eval_mode": "personal"}
    planned = select_runs([write_recipe()], overrides=overrides)
    plan = planning.build_plan(planned, _fake(planned))
    assert plan.eval_flops == 4 * 3 * 360 * FORWARD
    assert plan.train_flops == 2 * 3 * 2 * PER_CLIENT * TRAIN + 2 * 3 * 2 * (PER_CLIENT * TRAIN + 2 * STEPS * PARAMS)


def test_a_data_set_without_a_known_size_is_counted_not_guessed(tmp_path):
    spec = RunSpec(
        algorithm="fedavg",
        dataset="pamap2",
        model="pamap2_net",
        partition="dirichlet",
        num_clients=4,
        clients_per_round=2,
        rounds=2,
    )
    cost = planning.run_cost(_planned(spec), planning.DataSizes(str(tmp_path)))  # nothing under tmp_path
    assert cost.train_flops is None and cost.eval_flops is None
    plan = planning.build_plan(
        [_planned(spec)], planning.Calibration("fake", "fake", {}), data_sizes=planning.DataSizes(str(tmp_path))
    )
    assert plan.unknown == 1 and plan.train_flops == 0 and plan.unknown_datasets == ["pamap2"]


def _planned(spec):
    from fedbench.recipes.expand import PlannedRun

    return PlannedRun(spec=spec, labels={"algorithm": "fedavg"}, paper="t", recipe="t")


def test_plan_command_json_and_bad_input(write_recipe, tmp_path):
    runner = CliRunner()
    recipe = write_recipe()
    result = runner.invoke(app, ["plan", str(recipe), "--throughput", "2", "--jobs", "2", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    planned = select_runs([recipe])
    expected = planning.build_plan(planned, planning.assumed_calibration(planning.workloads(planned), 2e12, "x"), 2)
    assert data["runs"] == 4 and data["train_flops"] == expected.train_flops
    assert data["wall_seconds"] == pytest.approx(expected.wall_seconds, rel=1e-12)
    (tmp_path / "bad.toml").write_text('paper = "x"\nname = "bad"\n[setup]\nroundz = 3\n')
    for bad in (["plan", str(tmp_path / "bad.toml")], ["plan", "missing.toml"], ["plan", str(recipe), "--seeds", "a"]):
        outcome = runner.invoke(app, bad)
        assert outcome.exit_code == 2, outcome.output
        assert len(outcome.output.strip().splitlines()) == 1
