"""A paper table's cells from fixed curves, figure by figure: runs registered in a real registry with
curves written by hand, the table built by ``build_table`` and every number compared with the figure worked out
from those curves (best, best_round, final, rounds/bytes/GFLOPs to target, value at a round, the seed mean and its
population std, the count of diverged runs, the ``%`` unit rule, per-client cells, the published value and std)."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pytest

from fedbench.engine.loop import RoundRecord
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.recipes.views import TableView
from fedbench.registry import Registry
from fedbench.report.stats import BOOTSTRAP_DRAWS
from fedbench.report.table import build_table
from fedbench.spec import RunSpec


@pytest.mark.usefixtures("linear_model", "float64")
@pytest.mark.parametrize(
    "setup,steps,processed",
    [
        ({"local_epochs": 2}, 2 * math.ceil(600 / 50), 600 * 2),
        ({"local_epochs": 1, "batch_size": 64}, math.ceil(600 / 64), 600),
        ({"local_epochs": 1, "batch_size": 64, "drop_last": True}, 600 // 64, 600),
        ({"local_steps": 7}, 7, 7 * 50),
    ],
)
def test_cost_per_round_is_forward_flops_of_the_samples_plus_the_attaching_operations(setup, steps, processed):
    """FedTrip §4: one client's round costs (samples processed)·FP + A_method, FP the forward MACs per sample,
    K = E·⌈n/B⌉ local iterations (⌊n/B⌋ with drop_last, the budget with local_steps); n = the mean client size."""
    from fedbench.cost import model_card
    from fedbench.report.table import cost_per_round_flops
    from fedbench.spec import RunSpec

    card = model_card("mlp", num_classes=10, input_shape=[1, 28, 28])
    setup = {"batch_size": 50, **setup}
    for name, attach in (("fedprox", 2 * steps * card["params"]), ("moon", steps * setup["batch_size"] * 2)):
        spec = RunSpec(algorithm=name, dataset="mnist", model="mlp", partition="iid", **setup)
        if name == "moon":
            attach *= card["macs_forward"]
        cost = cost_per_round_flops(spec, [500, 700])  # mean 600
        assert cost == pytest.approx(processed * card["macs_forward"] + attach, rel=1e-12)


# Per (algorithm, seed): test accuracy, test loss, bytes up/down and wall seconds per round, the run's status.
CURVES = {
    ("fedavg", 0): dict(
        acc=[0.5, 0.8, 0.7], loss=[1.2, 0.5, 0.6], up=[100, 100, 100], down=[10, 20, 30], secs=[1.0, 2.0, 3.0]
    ),
    ("fedavg", 1): dict(
        acc=[0.6, 0.7, 0.9], loss=[1.0, 0.7, 0.3], up=[100, 100, 100], down=[10, 20, 30], secs=[2.0, 2.0, 2.0]
    ),
    ("fedprox", 0): dict(
        acc=[0.4, 0.85, 0.85], loss=[1.5, 0.4, 0.4], up=[7, 7, 7], down=[1, 2, 4], secs=[4.0, 4.0, 4.0]
    ),
    ("fedprox", 1): dict(acc=[0.3, 0.2], loss=[2.0, 3.0], up=[7, 7], down=[1, 2], secs=[1.0, 1.0]),
}


STATUS = {("fedprox", 1): "diverged"}


PER_CLIENT = [0.25, 0.75]  # two clients' personal accuracies, every round


@pytest.fixture
def stored(write_recipe, registry_url):
    """The TINY_RECIPE (fedavg and fedprox, seeds 0 and 1) with the curves above in a fresh registry."""
    recipe = load_recipe(write_recipe())
    registry = Registry(registry_url)
    planned = expand(recipe)
    registry.ensure_runs([p.registry_entry() for p in planned])
    for p in planned:
        key = (p.spec.algorithm, p.spec.seed)
        curve = CURVES[key]
        run_id = registry.claim(p.spec_hash)
        for i, acc in enumerate(curve["acc"]):
            registry.log_round(
                run_id,
                RoundRecord(
                    round=i + 1,
                    train_loss=0.1,
                    wall_seconds=curve["secs"][i],
                    bytes_up=curve["up"][i],
                    bytes_down=curve["down"][i],
                    test_acc=acc,
                    test_loss=curve["loss"][i],
                    personal_mean=sum(PER_CLIENT) / 2,
                    personal_per_client=PER_CLIENT,
                    personal_val_mean=[0.1, 0.3, 0.2][i],
                ),
            )
        registry.finish(run_id, STATUS.get(key, "done"))
    return recipe, registry


def table(stored, **view):
    recipe, registry = stored
    base = recipe.tables[0].model_dump()
    return build_table(recipe, TableView(**{**base, **view}), registry)


def cell(built, row: str, column: str = ""):
    return built.cells[(row, column)]


def population_std(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def test_best_mean_population_std_and_diverged_count(stored):
    built = table(stored, figure="best")
    fedavg, fedprox = cell(built, "fedavg"), cell(built, "fedprox")
    assert fedavg.values == pytest.approx([80.0, 90.0]) and fedavg.mean == pytest.approx(85.0)
    assert fedavg.std == pytest.approx(population_std([80.0, 90.0]))  # 5, not the sample std 7.07
    assert (fedavg.n, fedavg.diverged, fedavg.expected, fedavg.partial) == (2, 0, 2, False)
    # a diverged run counts as a finished seed, with its figure, and is counted as diverged
    assert fedprox.values == pytest.approx([85.0, 30.0]) and fedprox.std == pytest.approx(27.5)
    assert (fedprox.n, fedprox.diverged) == (2, 1)
    assert (fedavg.seeds, fedavg.rounds_limit) == ([0, 1], 3)
    assert built.unit == "%"


def test_a_failed_or_running_run_is_not_a_finished_seed(stored):
    recipe, registry = stored
    fedavg_seed1 = next(r for r in registry.runs() if r.algorithm == "fedavg" and r.seed == 1)
    registry.finish(fedavg_seed1.id, "failed")
    built = table(stored, figure="best")
    fedavg = cell(built, "fedavg")
    assert (fedavg.n, fedavg.values, fedavg.std, fedavg.partial) == (1, pytest.approx([80.0]), None, True)
    assert fedavg.mean == pytest.approx(80.0)


def test_units_follow_the_figure_and_the_percent_rule(stored):
    assert table(stored, figure="best").unit == "%"
    fraction = table(stored, figure="best", percent=False)
    assert fraction.unit == "" and cell(fraction, "fedavg").values == pytest.approx([0.8, 0.9])
    assert table(stored, figure="final").unit == "%" and table(stored, figure="last_k_mean", k=2).unit == "%"
    assert table(stored, figure="best_round").unit == ""  # a round, not an accuracy
    assert table(stored, figure="rounds_to_target", target=75).unit == ""
    assert table(stored, figure="wall_seconds").unit == "s" and table(stored, figure="seconds_per_round").unit == "s"
    loss = table(stored, figure="best", metric="test_loss")
    assert loss.unit == "" and cell(loss, "fedavg").values == pytest.approx([0.5, 0.3])  # a loss: the lowest, ×1


def test_best_round_is_the_first_round_at_the_best_value(stored):
    built = table(stored, figure="best_round")
    assert cell(built, "fedavg").values == [2, 3]
    assert cell(built, "fedprox").values == [2, 1]  # 0.85 at rounds 2 and 3: the first
    loss = table(stored, figure="best_round", metric="test_loss")
    assert cell(loss, "fedavg").values == [2, 3] and cell(loss, "fedprox").values == [2, 1]  # the lowest loss


def test_final_last_k_and_value_at_round(stored):
    assert cell(table(stored, figure="final"), "fedavg").values == pytest.approx([70.0, 90.0])
    assert cell(table(stored, figure="last_k_mean", k=2), "fedavg").values == pytest.approx([75.0, 80.0])
    at_two = table(stored, figure="value_at_round", at_round=2)
    assert cell(at_two, "fedavg").values == pytest.approx([80.0, 70.0])
    assert cell(table(stored, figure="value_at_round", at_round=3), "fedprox").values == [pytest.approx(85.0), None]


def test_rounds_and_bytes_to_target(stored):
    rounds = table(stored, figure="rounds_to_target", target=75)
    assert cell(rounds, "fedavg").values == [2, 3] and cell(rounds, "fedavg").mean == pytest.approx(2.5)
    fedprox = cell(rounds, "fedprox")
    assert fedprox.values == [2, None] and fedprox.not_reached == 1 and fedprox.mean == 2  # the mean of those reached
    # bytes: Σ over rounds 1..R of (up + down) of that run
    total = table(stored, figure="total_bytes_to_target", target=75)
    assert cell(total, "fedavg").values == [(100 + 10) + (100 + 20), (100 + 10) + (100 + 20) + (100 + 30)]
    assert cell(total, "fedprox").values == [(7 + 1) + (7 + 2), None]
    exact = table(stored, figure="rounds_to_target", target=80)  # reached at exactly the target
    assert cell(exact, "fedavg").values == [2, 3]
    per_row = table(stored, figure="rounds_to_target", target=75, target_by={"fedprox": 84})
    assert cell(per_row, "fedprox").values == [2, None] and cell(per_row, "fedavg").values == [2, 3]
    per_row = table(stored, figure="rounds_to_target", target=75, target_by={"fedprox": 86})
    assert cell(per_row, "fedprox").values == [None, None] and cell(per_row, "fedprox").not_reached == 2


def test_mean_curve_summary_takes_the_figure_of_the_seed_mean_curve(stored):
    built = table(stored, figure="rounds_to_target", target=75, summary="mean_curve")
    # fedavg's mean curve: 55, 75, 80 → reaches 75 at round 2; per seed the rounds were 2 and 3
    assert cell(built, "fedavg").mean == 2 and cell(built, "fedavg").std is None
    best = table(stored, figure="best", summary="mean_curve")
    assert cell(best, "fedavg").mean == pytest.approx(80.0)
    assert cell(best, "fedprox").mean == pytest.approx(52.5)  # rounds 1–2, common to both seeds: 35, 52.5
    counted = table(stored, figure="rounds_to_target", target=56, summary="mean_curve", target_rule="count_not_above")
    assert cell(counted, "fedavg").mean == 1  # 55 ≤ 56 once before exceeding it


def test_wall_time_figures(stored):
    assert cell(table(stored, figure="wall_seconds"), "fedavg").values == pytest.approx([6.0, 6.0])
    assert cell(table(stored, figure="wall_hours"), "fedprox").values == pytest.approx([12 / 3600, 2 / 3600])
    assert cell(table(stored, figure="seconds_per_round"), "fedavg").values == pytest.approx([2.0, 2.0])


def test_published_value_std_and_ratios(stored):
    built = table(stored, figure="best", published={"fedavg": 50.0, "fedprox": 60.0}, published_std={"fedavg": 1.5})
    fedavg, fedprox = cell(built, "fedavg"), cell(built, "fedprox")
    assert (fedavg.published, fedavg.published_std, fedprox.published_std) == (50.0, 1.5, None)
    assert fedavg.difference == pytest.approx(85.0 - 50.0)
    ratios = table(stored, figure="best", published={"fedavg": 50.0, "fedprox": 60.0}, ratio_to="fedavg")
    assert cell(ratios, "fedprox").ratio == pytest.approx(57.5 / 85.0)
    assert cell(ratios, "fedprox").published_ratio == pytest.approx(60.0 / 50.0)
    assert cell(ratios, "fedavg").ratio == pytest.approx(1.0)


def test_per_client_cells_and_the_client_index_bound(stored):
    """Clients A, B, C named, two stored per round: A and B get their own values, C (beyond the stored list)
    none, and "Avg." the mean over clients."""
    built = table(stored, figure="final", metric="personal_mean", columns=["client"], clients=["A", "B", "C"])
    assert built.columns == ["A", "B", "C", "Avg."]
    assert cell(built, "fedavg", "A").values == pytest.approx([25.0, 25.0])
    assert cell(built, "fedavg", "B").values == pytest.approx([75.0, 75.0])
    assert cell(built, "fedavg", "C").values == [None, None] and cell(built, "fedavg", "C").mean is None
    assert cell(built, "fedavg", "Avg.").values == pytest.approx([50.0, 50.0])


def test_gflops_to_target_uses_each_runs_client_sizes(stored):
    """Rounds to the target × one client's round: n̄·E·FP + the method's attaching FLOPs (FedTrip §4), with n̄ the
    mean of the run's recorded client sizes. digits_mlp with 32 hidden units: FP = 64·32 + 32·10 MACs,
    |w| = 64·32 + 32 + 32·10 + 10; batch 64, so K = ⌈40/64⌉ = 1 step."""
    recipe, registry = stored
    for run in registry.runs():
        registry.set_provenance(run.id, {"data": {"client_sizes": [30, 50]}})
    built = table(stored, figure="gflops_to_target", target=75)
    macs, params = 64 * 32 + 32 * 10, 64 * 32 + 32 + 32 * 10 + 10
    per_round = {"fedavg": 40 * macs, "fedprox": 40 * macs + 2 * 1 * params}
    assert cell(built, "fedavg").values == pytest.approx([2 * per_round["fedavg"] / 1e9, 3 * per_round["fedavg"] / 1e9])
    assert cell(built, "fedprox").values == [pytest.approx(2 * per_round["fedprox"] / 1e9), None]


def test_peak_memory_figure_and_its_note(stored):
    recipe, registry = stored
    for i, run in enumerate(registry.runs()):
        registry.set_provenance(run.id, {"peak_memory": {"bytes": (i + 1) * 2**20, "measure": "cpu_rss"}})
    built = table(stored, figure="peak_memory_mb")
    assert sorted(v for c in built.cells.values() for v in c.values) == [1.0, 2.0, 3.0, 4.0]
    assert built.notes == ["peak memory measured as: cpu_rss (4 runs)."]
    assert table(stored, figure="best").notes == []


def test_synthetic_runs_are_counted_beside_a_real_data_cell(stored):
    recipe, registry = stored
    synthetic = expand(recipe, synthetic=True)
    registry.ensure_runs([p.registry_entry() for p in synthetic])
    for p in synthetic:
        run_id = registry.claim(p.spec_hash)
        registry.finish(run_id, "done" if p.spec.algorithm == "fedavg" else "failed")
    built = table(stored, figure="best")
    assert cell(built, "fedavg").synthetic_available == 2 and cell(built, "fedprox").synthetic_available == 0
    assert cell(built, "fedavg").values == pytest.approx([80.0, 90.0])  # the real runs, not the synthetic ones


def test_the_metric_and_round_pseudo_axes(stored):
    both = table(stored, figure="final", columns=["metric"], metrics={"Acc": "test_acc", "Loss": "test_loss"})
    assert both.columns == ["Acc", "Loss"]
    assert cell(both, "fedavg", "Acc").values == pytest.approx([70.0, 90.0])
    assert cell(both, "fedavg", "Loss").values == pytest.approx([0.6, 0.3])  # a loss is not ×100
    assert both.unit == ""  # % and a plain loss: no common unit
    same = table(stored, figure="final", columns=["metric"], metrics={"Acc": "test_acc", "Personal": "personal_mean"})
    assert same.unit == "%"
    rounds = table(stored, figure="value_at_round", columns=["round"], at_rounds=[1, 3])
    assert rounds.columns == ["1", "3"]
    assert cell(rounds, "fedavg", "1").values == pytest.approx([50.0, 60.0])
    assert cell(rounds, "fedprox", "3").values == [pytest.approx(85.0), None]


def test_where_and_published_only_rows(stored):
    only = table(stored, figure="best", where={"algorithm": "fedprox"})
    assert only.rows == ["fedprox"] and list(only.cells) == [("fedprox", "")]
    quoted = table(
        stored, figure="best", published={"FedX": 70.0, "fedavg": 50.0}, published_only=["FedX"], published_std={}
    )
    assert quoted.rows == ["FedX", "fedavg", "fedprox"]  # in the order of `published`, runs without a value last
    fedx = cell(quoted, "FedX")
    assert (fedx.published_only, fedx.published, fedx.n, fedx.expected, fedx.mean) == (True, 70.0, 0, 0, None)
    assert cell(quoted, "fedavg").expected == 2 and not cell(quoted, "fedavg").published_only


def test_value_at_round_and_val_selected_cells_are_in_percent(stored):
    """Both figures are a value of the metric itself: shown ×100 with the unit %."""
    at_two = table(stored, figure="value_at_round", at_round=2)
    assert at_two.unit == "%" and cell(at_two, "fedavg").values == pytest.approx([80.0, 70.0])
    # personal_val_mean is 0.1, 0.3, 0.2: the best validation round is 2, where the test accuracy is read
    selected = table(stored, figure="val_selected")
    assert selected.unit == "%"
    assert cell(selected, "fedavg").values == pytest.approx([80.0, 70.0])
    assert cell(selected, "fedprox").values == pytest.approx([85.0, 20.0])


def test_a_row_of_two_keys_is_labelled_by_both_joined_with_a_slash(stored):
    built = table(
        stored, figure="final", rows=["algorithm", "metric"], metrics={"Acc": "test_acc", "Loss": "test_loss"}
    )
    assert built.rows == ["fedavg / Acc", "fedavg / Loss", "fedprox / Acc", "fedprox / Loss"]
    assert cell(built, "fedavg / Loss").values == pytest.approx([0.6, 0.3])
    assert cell(built, "fedprox / Acc").labels == {"algorithm": "fedprox", "metric": "Acc"}


def test_a_round_costs_the_partitions_fixed_client_size_without_recorded_sizes():
    """FedTrip §4 with n the partition's samples_per_client when the run recorded no client sizes: the MLP on
    MNIST, n = 600, B = 50, E = 1: K = 12 steps, cost n·FP + 2K|w| for FedProx; with no size at all n = 0."""
    from fedbench.cost import model_card
    from fedbench.report.table import cost_per_round_flops

    card = model_card("mlp", num_classes=10, input_shape=[1, 28, 28])
    common = dict(algorithm="fedprox", dataset="mnist", model="mlp", batch_size=50)
    fixed = RunSpec(**common, partition="orthogonal", partition_params={"samples_per_client": 600})
    expected = 600 * card["macs_forward"] + 2 * 12 * card["params"]
    assert cost_per_round_flops(fixed, None) == pytest.approx(expected, rel=1e-12)
    assert cost_per_round_flops(fixed, []) == pytest.approx(expected, rel=1e-12)
    assert cost_per_round_flops(RunSpec(**common, partition="iid"), None) == 0.0


def test_a_reports_shared_cache_keeps_each_scale_and_data_kind_apart(stored):
    """One report builds many tables with one cache (``collect``): the real-data, synthetic and smoke-scale tables
    built with it are those built without it. Smoke scale has seed 0 only and no run stored; the synthetic runs
    (fedavg done, fedprox failed) have no rounds, so no figure."""
    recipe, registry = stored
    synthetic = expand(recipe, synthetic=True)
    registry.ensure_runs([p.registry_entry() for p in synthetic])
    for p in synthetic:
        registry.finish(registry.claim(p.spec_hash), "done" if p.spec.algorithm == "fedavg" else "failed")
    view, cache = recipe.tables[0], {}
    for _ in range(2):  # the second time from the cache
        real = build_table(recipe, view, registry, cache=cache)
        assert cell(real, "fedavg").values == pytest.approx([80.0, 90.0])
        assert (cell(real, "fedavg").synthetic_available, cell(real, "fedprox").synthetic_available) == (2, 0)
        fake = build_table(recipe, view, registry, synthetic=True, cache=cache)
        assert (cell(fake, "fedavg").n, cell(fake, "fedavg").values, cell(fake, "fedprox").n) == (2, [None, None], 0)
        smoke = build_table(recipe, view, registry, scale="smoke", cache=cache)
        assert [(c.expected, c.n) for c in smoke.cells.values()] == [(1, 0), (1, 0)]


def test_a_view_shows_the_full_scale_real_data_runs_by_default(stored):
    from fedbench.report.table import planned_for_view

    recipe, _ = stored
    planned = planned_for_view(recipe, recipe.tables[0])
    assert [(p.labels["algorithm"], p.spec.seed, p.spec.rounds) for p in planned] == [
        ("fedavg", 0, 3),
        ("fedavg", 1, 3),
        ("fedprox", 0, 3),
        ("fedprox", 1, 3),
    ]
    assert {p.spec.dataset for p in planned} == {"digits"}
    assert {p.spec_hash for p in planned} == {p.spec_hash for p in expand(recipe)}


def test_a_table_is_built_without_checking_the_recipe_against_the_data(write_recipe, registry_url):
    """A report reads the registry and needs no data set: a recipe that `fedbench run` refuses (a Cutout square
    larger than digits' 8×8 images) still gets its table, of runs not stored."""
    from conftest import TINY_RECIPE
    from fedbench.errors import ConfigError

    recipe = load_recipe(
        write_recipe(TINY_RECIPE.replace("optimizer = {", "augmentation = { cutout = 9 }\noptimizer = {"))
    )
    with pytest.raises(ConfigError, match="cutout"):
        expand(recipe)
    built = build_table(recipe, recipe.tables[0], Registry(registry_url))
    assert built.rows == ["fedavg", "fedprox"] and [c.expected for c in built.cells.values()] == [2, 2]


def test_an_unfinished_first_seed_is_skipped_and_the_next_seeds_counted(stored):
    """Seed 0 failed, seed 1 done: the cell has seed 1's figure. Seed 0 of fedprox diverged too, as seed 1 did:
    two diverged runs in the cell, each still a finished seed with its figure."""
    recipe, registry = stored
    runs = {(r.algorithm, r.seed): r for r in registry.runs()}
    registry.finish(runs[("fedavg", 0)].id, "failed")
    registry.finish(runs[("fedprox", 0)].id, "diverged")
    built = table(stored, figure="best")
    fedavg, fedprox = cell(built, "fedavg"), cell(built, "fedprox")
    assert (fedavg.n, fedavg.seeds, fedavg.values, fedavg.diverged) == (1, [1], pytest.approx([90.0]), 0)
    assert (fedprox.n, fedprox.diverged, fedprox.values) == (2, 2, pytest.approx([85.0, 30.0]))


def test_gflops_to_target_of_the_seed_mean_curve(stored):
    """summary = "mean_curve": fedavg's mean curve 55, 75, 80 % reaches 75 % at round 2, so 2 rounds × one client's
    round (40·FP, n̄ = 40 from the client sizes 30 and 50: see test_gflops_to_target_uses_each_runs_client_sizes)."""
    recipe, registry = stored
    for run in registry.runs():
        registry.set_provenance(run.id, {"data": {"client_sizes": [30, 50]}})
    built = table(stored, figure="gflops_to_target", target=75, summary="mean_curve")
    macs = 64 * 32 + 32 * 10
    assert cell(built, "fedavg").mean == pytest.approx(2 * 40 * macs / 1e9) and cell(built, "fedavg").std is None


def test_published_only_rows_keep_the_tables_columns_even_without_runs(stored):
    """The rows the paper quotes get a cell in every column; a view with no column keeps its single column ""
    also when ``where`` leaves no run to show."""
    quoted = {"published": {"FedX": 70.0}, "published_only": ["FedX"], "published_std": {}}
    empty = table(stored, figure="best", where={"algorithm": "fedyy"}, **quoted)
    assert (empty.rows, empty.columns) == (["FedX"], [""])
    assert cell(empty, "FedX").published == 70.0 and cell(empty, "FedX").published_only
    by_metric = table(
        stored, figure="final", columns=["metric"], metrics={"Acc": "test_acc", "Loss": "test_loss"}, **quoted
    )
    assert by_metric.columns == ["Acc", "Loss"] and by_metric.rows == ["FedX", "fedavg", "fedprox"]
    assert cell(by_metric, "FedX", "Acc").published_only and cell(by_metric, "FedX", "Loss").published_only


def test_each_cell_is_compared_with_fedavgs_seed_by_seed_and_with_the_paper(stored):
    """FedProx − FedAvg per seed: 85 − 80 = 5 and 30 − 90 = −60, mean −27.5. Against the paper's 50 % (the
    recipe's published FedAvg value): FedAvg's 80 and 90 give ours − paper = 35 with the 95 % t interval
    35 ± t(0.975, 1)·5 = 35 ± 63.53 and the 90 % one 35 ± 31.57: neither inside ±1 point nor beyond it
    (inconclusive); against a published 10, the 95 % interval 75 ± 63.53 lies above +1, so ours is higher."""
    built = table(stored, figure="best")
    assert built.baseline == "fedavg" and cell(built, "fedavg").comparison is None
    comparison = cell(built, "fedprox").comparison
    assert (comparison.baseline, comparison.pairs, comparison.difference) == ("fedavg", 2, pytest.approx(-27.5))
    t = 12.706204736174707  # t(0.975) with one degree of freedom
    verdict = cell(built, "fedavg").verdict
    assert verdict.status == "inconclusive" and verdict.ci_low == pytest.approx(35 - 5 * t, rel=1e-9)
    assert (verdict.difference, verdict.margin) == (pytest.approx(35.0), 1.0)
    assert cell(built, "fedprox").verdict is None  # no published value
    assert cell(table(stored, figure="best", published={"fedavg": 10.0}), "fedavg").verdict.status == "higher"


def test_the_baseline_label_of_a_view():
    """``baseline`` given, "none", or unset: the one label spelled FedAvg (any case), else the one label whose runs
    all train FedAvg; none when the axis is not shown or the choice is ambiguous."""

    from fedbench.report.table import baseline_label

    def runs(*pairs):
        return [SimpleNamespace(labels=labels, spec=SimpleNamespace(algorithm=a)) for labels, a in pairs]

    view = TableView(name="v", rows=["algorithm"], columns=["dataset"])
    mixed = runs(({"algorithm": "Ours", "dataset": "d"}, "fedprox"), ({"algorithm": "Base", "dataset": "d"}, "fedavg"))
    assert baseline_label(view, mixed) == "Base"
    assert baseline_label(view.model_copy(update={"baseline": "Ours"}), mixed) == "Ours"
    assert baseline_label(view.model_copy(update={"baseline": "none"}), mixed) is None
    assert baseline_label(view.model_copy(update={"rows": ["seed"]}), mixed) is None  # the axis is not shown
    assert baseline_label(view.model_copy(update={"baseline_axis": "dataset"}), mixed) is None  # d: two methods
    named = runs(({"algorithm": "FEDAVG"}, "fedprox"), ({"algorithm": "Base"}, "fedavg"), ({"dataset": "d"}, "fedavg"))
    assert baseline_label(view, named) == "FEDAVG"  # the name wins over what its runs train
    two = runs(({"algorithm": "A"}, "fedavg"), ({"algorithm": "B"}, "fedavg"), ({"algorithm": "C"}, "fedprox"))
    assert baseline_label(view, two) is None
    assert baseline_label(view, runs(({"algorithm": "FedAvg"}, "fedavg"), ({"algorithm": "fedavg"}, "fedavg"))) is None
    both = runs(({"algorithm": "Base"}, "fedavg"), ({"algorithm": "Base"}, "fedprox"), ({"algorithm": "X"}, "fedprox"))
    assert baseline_label(view, both) is None  # Base's runs do not all train FedAvg
    # a run of an added column still names the recipe's baseline row (--only on the added column keeps only such
    # runs); a value added on the baseline axis itself is never the baseline
    added_column = ({"algorithm": "Base", "dataset": "new", "added": "dataset"}, "fedavg")
    assert (
        baseline_label(view, runs(added_column, ({"algorithm": "X", "dataset": "new", "added": "dataset"}, "x")))
        == "Base"
    )
    assert (
        baseline_label(view, runs(({"algorithm": "Mine", "dataset": "new", "added": "dataset,algorithm"}, "fedavg")))
        is None
    )
    assert baseline_label(view, runs(({"algorithm": "Mine", "added": "algorithm"}, "fedavg"), added_column)) == "Base"


def test_a_view_without_a_baseline_compares_nothing(stored):
    built = table(stored, figure="best", baseline="none")
    assert built.baseline is None and all(c.comparison is None for c in built.cells.values())
    chosen = table(stored, figure="best", baseline="fedprox")
    assert chosen.baseline == "fedprox" and cell(chosen, "fedavg").comparison.difference == pytest.approx(27.5)


def test_a_ratio_needs_both_numbers(stored):
    """FedProx ÷ FedAvg: FedProx has no finished run (no mean) and the paper prints no FedAvg value, so neither
    ratio exists; FedAvg ÷ itself is 1."""
    recipe, registry = stored
    for run in registry.runs():
        if run.algorithm == "fedprox":
            registry.finish(run.id, "failed")
    built = table(stored, figure="best", published={"fedprox": 60.0}, ratio_to="fedavg")
    fedprox = cell(built, "fedprox")
    assert (fedprox.mean, fedprox.ratio, fedprox.published_ratio) == (None, None, None)
    assert cell(built, "fedavg").ratio == 1.0


RATIO_RECIPE = """
paper = "testpaper"
name = "ratios"
seeds = [0]

[setup]
dataset = "digits"
model = "digits_mlp"
num_clients = 4
clients_per_round = 2
rounds = 3

[matrix]
algorithm = ["fedavg", "fedprox"]
local_epochs = [1, 2]

[[combination]]
match = { algorithm = "fedprox", local_epochs = "1" }
skip = true

[[tables]]
name = "ratios"
rows = ["algorithm"]
columns = ["local_epochs"]
ratio_to = "fedprox"

[tables.published]
fedavg = { "1" = 30.0, "2" = 40.0 }
fedprox = { "2" = 80.0 }
"""


def test_a_cell_without_a_reference_cell_leaves_the_others_ratios(write_recipe, registry_url):
    """FedProx at E = 1 is not run, so FedAvg's E = 1 cell has no reference (and no ratio); the E = 2 cells after it
    still get theirs: the paper's 40 ÷ 80 and 80 ÷ 80."""
    recipe = load_recipe(write_recipe(RATIO_RECIPE))
    built = build_table(recipe, recipe.tables[0], Registry(registry_url))
    assert list(built.cells) == [("fedavg", "1"), ("fedavg", "2"), ("fedprox", "2")]
    assert cell(built, "fedavg", "1").published_ratio is None
    assert cell(built, "fedavg", "2").published_ratio == 0.5 and cell(built, "fedprox", "2").published_ratio == 1.0


def test_bytes_to_target_of_the_seed_mean_curve(stored):
    """fedavg's mean curve 55, 75, 80 % reaches 75 % at round 2: the bytes of rounds 1 and 2 (the same for every
    seed), (100 + 10) + (100 + 20) = 230."""
    built = table(stored, figure="total_bytes_to_target", target=75, summary="mean_curve")
    assert cell(built, "fedavg").mean == 230.0


def test_the_peak_memory_note_lists_each_measure_with_its_runs(stored):
    recipe, registry = stored
    for run in registry.runs():
        measure = "cuda_max_allocated" if run.seed == 0 else "cpu_rss"
        registry.set_provenance(run.id, {"peak_memory": {"bytes": 3 * 2**20, "measure": measure}})
    built = table(stored, figure="peak_memory_mb")
    assert built.notes == ["peak memory measured as: cpu_rss (2 runs), cuda_max_allocated (2 runs)."]
    assert cell(built, "fedavg").values == [3.0, 3.0]


def test_a_seed_mean_curve_cell_gets_its_bootstrap_only_where_it_gets_a_verdict(stored):
    """FedAvg's seed-mean curve reaches 75 % at round 2 (see test_gflops_to_target_of_the_seed_mean_curve): with a
    published value at the paper's scale on real data, the cell carries the figure of BOOTSTRAP_DRAWS resampled
    mean curves and is judged by them; on another scale, on synthetic data or without a published value it has
    none (no verdict needs it)."""
    recipe, registry = stored
    view = TableView(
        **{
            **recipe.tables[0].model_dump(),
            "figure": "rounds_to_target",
            "target": 75,
            "summary": "mean_curve",
            "published": {"fedavg": 2.0},
        }
    )
    judged = build_table(recipe, view, registry).cells[("fedavg", "")]
    assert judged.mean == 2 and len(judged.bootstrap) == BOOTSTRAP_DRAWS
    # resampled seeds (0, 0), (0, 1) or (1, 0) reach 75 % at round 2, (1, 1) at round 3 (seed 1 alone)
    assert set(judged.bootstrap) == {2, 3}
    assert judged.verdict.interval == "bootstrap over seeds" and judged.verdict.margin == 1.0
    assert build_table(recipe, view, registry).cells[("fedprox", "")].bootstrap is None  # no published value
    smoke = build_table(recipe, view, registry, scale="smoke").cells
    assert all(c.bootstrap is None for c in smoke.values())
    assert build_table(recipe, view, registry, synthetic=True).cells[("fedavg", "")].bootstrap is None


def test_the_views_claims_and_rank_agreement_are_evaluated_on_the_built_cells(stored):
    from fedbench.recipes.views import Claim

    claim = Claim(best="fedavg", quote="FedAvg is best.", location="§1")
    built = table(stored, figure="best", published={"fedavg": 90.0, "fedprox": 80.0}, claims=[claim])
    assert [result.claim for result in built.claims] == [claim]
    group = built.claims[0].groups[0]
    comparison = group.comparisons[0]
    assert (group.group, comparison.better, comparison.worse, comparison.pairs) == ("", "fedavg", "fedprox", 2)
    assert comparison.difference == pytest.approx(27.5)  # seeds 0, 1: (80 − 85 + 90 − 30) / 2
    assert [(e.group, e.n, e.tau) for e in built.rank_agreement] == [("", 2, pytest.approx(1.0))]
    plain = table(stored, figure="best")
    assert (plain.claims, plain.rank_agreement) == ([], [])


def test_a_tables_tasks_are_its_runs_data_sets_and_classification_without_runs(stored):
    """``Table.tasks``: what the table's metric is called (a Dice on segmentation data, an accuracy otherwise)."""
    from fedbench.report.collect import EmptyRegistry

    recipe, registry = stored
    assert table(stored).tasks == ("classification",)  # digits
    assert build_table(recipe, recipe.tables[0], registry, seeds=[]).tasks == ("classification",)  # no run planned
    lgmix = load_recipe(Path(__file__).resolve().parents[2] / "recipes" / "lgmix_table3.toml")
    assert build_table(lgmix, lgmix.table("dice"), EmptyRegistry()).tasks == ("segmentation",)
