"""FedDr+: its recipes compile at every scale and carry the spec's settings (shared/papers/feddrplus.md)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.recipes.resolve import non_default

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
NAMES = sorted(p.name for p in RECIPES.glob("feddrplus_*.toml"))


@cache
def compiled(name: str):
    """The recipe and its full-scale runs, compiled once per test session."""
    recipe = load_recipe(RECIPES / name)
    return recipe, expand(recipe)


def cell(runs, **labels):
    found = [p for p in runs if all(p.labels.get(k) == v for k, v in labels.items())]
    assert found, labels
    return found


@pytest.mark.parametrize("name", NAMES)
def test_every_feddrplus_recipe_compiles_at_every_scale(name):
    recipe = load_recipe(RECIPES / name)
    assert recipe.paper == "feddrplus"
    assert {"smoke", "quick"} <= set(recipe.scale)
    for scale in recipe.scale_names():
        assert expand(recipe, scale=scale)


def test_table2_grid_and_shared_setup():
    runs = compiled("feddrplus_table2.toml")[1]
    assert len(runs) == 336  # (8 CIFAR-100 + 6 CIFAR-10 settings) × 8 methods × 3 seeds
    assert {p.spec.seed for p in runs} == {0, 1, 2}
    for p in runs:
        s = p.spec
        assert (s.num_clients, s.clients_per_round, s.rounds, s.batch_size) == (100, 10, 320, 50)
        assert (s.optimizer.momentum, s.optimizer.weight_decay) == (0.9, 1e-5)
        assert s.lr_schedule.milestones == (161, 241) and s.lr_schedule.gamma == 0.1
    c100 = cell(runs, dataset="CIFAR-100")
    c10 = cell(runs, dataset="CIFAR-10")
    assert {p.spec.model for p in c100} == {"mobilenet"} and {p.spec.local_epochs for p in c100} == {3}
    assert {p.spec.model for p in c10} == {"vgg11"} and {p.spec.local_epochs for p in c10} == {10}
    assert {p.spec.dataset_params["normalization"] for p in c10} == {"imagenet"}
    assert {p.labels["setting"] for p in c100} == {"s=10", "s=20", "s=50", "s=100", "α=0.05", "α=0.1", "α=0.2", "α=0.3"}
    assert {p.labels["setting"] for p in c10} == {"s=2", "s=5", "s=10", "α=0.1", "α=0.2", "α=0.3"}
    shard = cell(runs, dataset="CIFAR-100", setting="s=20")[0].spec
    assert shard.partition == "shards" and shard.partition_params["shards_per_client"] == 20
    lda = cell(runs, dataset="CIFAR-10", setting="α=0.1")[0].spec
    assert lda.partition == "dirichlet" and lda.partition_params["alpha"] == 0.1 and lda.local_steps == 100
    assert cell(runs, dataset="CIFAR-100", setting="α=0.05")[0].spec.local_steps == 30


@pytest.mark.parametrize(
    "dataset, lrs",
    [
        (
            "CIFAR-100",
            {
                "FedAvg": 0.1,
                "SCAFFOLD": 0.1,
                "FedNTD": 0.1,
                "FedExP": 0.1,
                "FedBABU": 0.1,
                "SphereFed": 6.5,
                "FedETF": 0.5,
                "FedDr+": 5.0,
            },
        ),  # Table 7
        (
            "CIFAR-10",
            {
                "FedAvg": 0.01,
                "SCAFFOLD": 0.01,
                "FedNTD": 0.01,
                "FedExP": 0.01,
                "FedBABU": 0.01,
                "SphereFed": 0.55,
                "FedETF": 0.05,
                "FedDr+": 0.35,
            },
        ),  # Table 6
    ],
)
def test_table2_learning_rates(dataset, lrs):
    runs = compiled("feddrplus_table2.toml")[1]
    for label, lr in lrs.items():
        assert {p.spec.optimizer.lr for p in cell(runs, dataset=dataset, algorithm=label)} == {lr}, label


def test_table2_method_settings_and_published_values():
    recipe, runs = compiled("feddrplus_table2.toml")
    feddr = cell(runs, algorithm="FedDr+")[0].spec
    assert feddr.algorithm == "dot_regression" and feddr.model_params["classifier"] == "etf"
    assert feddr.algorithm_params["regularizers"] == [
        {"name": "fd", "weight": 0.1, "tau": 3.0, "combine": None}
    ]  # β = 0.9
    assert cell(runs, algorithm="SphereFed")[0].spec.model_params["classifier"] == "orthonormal"
    etf = cell(runs, algorithm="FedETF")[0].spec
    assert etf.model_params["classifier"] == "fedetf" and etf.algorithm_params["beta"] == 1.0
    ntd = cell(runs, algorithm="FedNTD")[0].spec.algorithm_params
    assert (ntd["beta"], ntd["tau"]) == (1.0, 3.0)
    assert cell(runs, algorithm="FedExP")[0].spec.algorithm_params["epsilon"] == 0.001
    c100, c10 = recipe.table("cifar100"), recipe.table("cifar10")
    assert c100.published_value("FedDr+", "s=10") == 48.21 and c100.published_value("FedDr+", "s=10", std=True) == 0.56
    assert c100.published_value("FedBABU", "α=0.05") == 41.97
    assert c10.published_value("SCAFFOLD", "α=0.1") == "(Failed)"
    assert c10.published_value("FedNTD", "s=5", std=True) == 17.10
    for view, columns in ((c100, 8), (c10, 6)):
        assert len(view.published) == 8 and all(len(row) == columns for row in view.published.values())


def test_table1_regularizers_and_published_values():
    recipe, runs = compiled("feddrplus_table1.toml")
    assert len(runs) == 60 and {p.spec.seed for p in runs} == {0}
    assert {p.spec.model for p in runs} == {"mobilenet"} and {p.spec.dataset for p in runs} == {"cifar100"}
    regs = {
        p.labels["regularizer"]: p.spec.algorithm_params.get("regularizers", [])
        for p in cell(runs, algorithm="FedAvg", setting="s=10")
    }
    assert regs["Baseline"] == []
    # resolved specs: τ = 3 and combine = None (prox adds, the others are convex) are spelled out
    assert regs["+Prox"] == [{"name": "prox", "weight": 1.0, "tau": 3.0, "combine": None}]  # μ = 1, added unweighted
    assert regs["+KD"] == [{"name": "kd", "weight": 0.1, "tau": 3.0, "combine": None}]
    assert regs["+NTD"] == [{"name": "ntd", "weight": 0.1, "tau": 3.0, "combine": None}]
    assert regs["+FD"] == [{"name": "fd", "weight": 0.1, "tau": 3.0, "combine": None}]
    dr = cell(runs, algorithm="Dot-Regression")[0].spec
    assert dr.algorithm == "dot_regression" and dr.model_params["classifier"] == "etf" and dr.optimizer.lr == 5.0
    # Dot-Regression + FD is FedDr+: the very runs of Table 2 (seed 0, CIFAR-100).
    table2 = {p.spec_hash for p in compiled("feddrplus_table2.toml")[1]}
    assert all(p.spec_hash in table2 for p in cell(runs, algorithm="Dot-Regression", regularizer="+FD"))
    assert recipe.table("shard").published_value("Dot-Regression", "+FD") == 48.69
    assert recipe.table("lda").published_value("SphereFed", "+Prox") == 1.46
    assert recipe.table("lda").published_value("Dot-Regression", "+FD") == 50.79


def test_table3_and_table8_pfl_protocols_and_shared_runs():
    recipe, runs = compiled("feddrplus_table3.toml")
    assert len(runs) == 72 and recipe.order == 3  # 12 methods × 6 settings, 1 seed
    for scale in ("smoke", "quick"):
        assert len(expand(recipe, scale=scale, synthetic=True)) == 72
    assert all(p.spec.client_test == "class_matched" for p in runs)
    lda = cell(runs, setting="α=0.1", algorithm="FedPer")[0].spec
    assert lda.client_test_params == {"disjoint": False, "cap_per_class": 100} and lda.eval_mode == "personal"
    local = cell(runs, setting="s=10", algorithm="Local only (CE+ETF)")[0].spec
    assert (local.algorithm, local.rounds, local.clients_per_round) == ("local", 160, 100)
    assert non_default("model", local.model, local.model_params) == {"classifier": "etf", "normalize_features": False}
    ft = cell(runs, setting="s=10", algorithm="FedDr+ FT")[0].spec
    assert ft.eval_mode == "both" and ft.finetune.loss == "method" and ft.finetune.epochs == 5
    assert all(
        p.spec.finetune.epochs == 1
        for p in expand(recipe, scale="smoke", synthetic=True)
        if p.labels["protocol"] == "fine-tuned"
    )
    assert recipe.table("finetuned").published_value("FedDr+ FT", "α=0.05") == 78.55
    # Table 8's FedDr+ cells are Table 3's FedDr+ FT runs.
    recipe8, runs8 = compiled("feddrplus_table8.toml")
    assert len(runs8) == 24 and recipe8.order == 8  # 2 methods × 2 FT losses × 6 settings
    table3 = {p.spec_hash for p in runs}
    assert all(p.spec_hash in table3 for p in cell(runs8, algorithm="FedDr+", ft_loss="own"))
    assert recipe8.table("gfl_clients").published_value("FedDr+", "α=0.1") == 45.83


def test_table9_is_a_view_of_table2s_cifar100_s10_runs():
    from types import SimpleNamespace

    from fedbench.report.table import figure_of, planned_for_view

    recipe, runs = compiled("feddrplus_table2.toml")
    view = recipe.table("time")
    shown = planned_for_view(recipe, view)
    assert {p.spec_hash for p in shown} == {p.spec_hash for p in cell(runs, dataset="CIFAR-100", setting="s=10")}
    assert len(shown) == 8 * 3
    assert view.published_value("s=10", "FedDr+") == 24.4 and view.published_value("s=10", "FedExP") == 20.3
    rounds = [SimpleNamespace(round=r, wall_seconds=s) for r, s in ((1, 30.0), (2, 20.0), (3, 22.0))]
    assert figure_of(view, [], rounds) == pytest.approx(24.0)  # every round: training and evaluation


def test_fig6_default_points_are_table2_runs():
    table2 = {p.spec_hash: p.labels for p in compiled("feddrplus_table2.toml")[1] if p.spec.seed == 0}
    table1 = {p.spec_hash: p.labels for p in compiled("feddrplus_table1.toml")[1]}
    for name, axis, default, count in (
        ("feddrplus_fig6a.toml", "sampling_ratio", "0.1", 40),
        ("feddrplus_fig6b.toml", "local_epochs", "3", 40),
        ("feddrplus_fig6c.toml", "beta", "0.9", 14),
    ):
        recipe, runs = compiled(name)
        assert len(runs) == count and recipe.table("accuracy").published == {}  # Fig. 6 prints no numbers
        shared = {p.labels[axis] for p in runs if p.spec_hash in table2}
        assert shared == {default}, name
        for p in cell(runs, **{axis: default}):
            assert table2[p.spec_hash]["setting"] == p.labels["setting"]
            assert table2[p.spec_hash]["algorithm"] == p.labels.get("algorithm", "FedDr+")
    # β = 1 is Dot-Regression: Table 1's baseline runs
    for p in cell(compiled("feddrplus_fig6c.toml")[1], beta="1"):
        assert table1[p.spec_hash]["algorithm"] == "Dot-Regression" and table1[p.spec_hash]["regularizer"] == "Baseline"
    beta0 = cell(compiled("feddrplus_fig6c.toml")[1], beta="0", setting="s=10")[0].spec
    assert [(r["name"], r["weight"]) for r in beta0.algorithm_params["regularizers"]] == [("fd", 1.0)]


def test_fig6_sweeps_clients_per_round_and_local_epochs():
    ratios = {p.labels["sampling_ratio"]: p.spec.clients_per_round for p in compiled("feddrplus_fig6a.toml")[1]}
    assert ratios == {"0.05": 5, "0.1": 10, "0.2": 20, "0.3": 30, "0.5": 50}
    epochs = compiled("feddrplus_fig6b.toml")[1]
    lda = {p.labels["local_epochs"]: p.spec.local_steps for p in cell(epochs, setting="α=0.1")}
    assert lda == {"1": 10, "3": 30, "5": 50, "10": 100, "15": 150}  # the [code]'s 10·E fixed steps
    shards = {(p.labels["local_epochs"], p.spec.local_epochs, p.spec.local_steps) for p in cell(epochs, setting="s=10")}
    assert shards == {("1", 1, None), ("3", 3, None), ("5", 5, None), ("10", 10, None), ("15", 15, None)}
    smoke = expand(load_recipe(RECIPES / "feddrplus_fig6a.toml"), scale="smoke", synthetic=True)
    assert {(p.labels["sampling_ratio"], p.spec.clients_per_round, p.spec.num_clients) for p in smoke} == {
        ("0.05", 1, 20),
        ("0.1", 2, 20),
        ("0.2", 4, 20),
        ("0.3", 6, 20),
        ("0.5", 10, 20),
    }
