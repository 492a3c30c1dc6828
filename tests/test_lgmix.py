"""LG-Mix: defining properties of the method (Eq. 1-2 and 4-6, history averaging), its recipes and one CLI run."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from conftest import F64_ATOL, ListSink
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.lgmix import feature_moments, gram_trace, mixing_ratio
from fedbench.cli import app
from fedbench.engine import run
from fedbench.engine.checkpoint import load_checkpoint
from fedbench.recipe import expand, load_recipe
from fedbench.registry import Registry
from fedbench.spec import RunSpec

RECIPES = Path(__file__).resolve().parent.parent / "recipes"
DEVICE = torch.device("cpu")
BASE = {
    "dataset": "digits",
    "model": "digits_mlp",
    "model_params": {"hidden": 32},
    "partition": "dirichlet",
    "partition_params": {"alpha": 0.5, "min_size": 20},
    "num_clients": 4,
    "clients_per_round": 4,
    "rounds": 3,
    "batch_size": 32,
    "optimizer": {"lr": 0.1},
    "eval_mode": "both",
    "client_test_fraction": 0.2,
}
# BatchNorm buffers are mixed too: LG-Mix's Digits model on the 8×8 digits, a few steps.
BN = {
    **BASE,
    "model": "fedbn_digit_cnn",
    "model_params": {},
    "num_clients": 3,
    "clients_per_round": 3,
    "local_steps": 2,
    "batch_size": 16,
    "rounds": 2,
}


def train(tmp_path, algorithm, params=None, stop_after_round=None, **overrides):
    spec = RunSpec(algorithm=algorithm, algorithm_params=params or {}, **{**BASE, **overrides})
    path = tmp_path / f"{spec.spec_hash}.pt"
    sink = ListSink()
    result = run(spec, sink, checkpoint_path=path, stop_after_round=stop_after_round)
    assert result.status in ("done", "interrupted"), result.message
    return sink.records, load_checkpoint(path, spec.spec_hash, DEVICE)


def personal(state):
    """A client's completed personal model (the pending share of Eq. 2 is finished at evaluation)."""
    assert "mix_params" not in state
    return state["personal_params"]


# ------------------------------------------------------------------------------------ Eq. 2 limits
# LG-Mix computes u + Δw_c and w_c + λΔw_c − (1 − λ)u + (1 − λ)u', equal to FedAvg's and local training's
# weights only in exact arithmetic: compared in float64 (conftest.F64_ATOL).
@pytest.mark.usefixtures("float64")
@pytest.mark.parametrize(
    "setting", [pytest.param(BASE, id="mlp"), pytest.param(BN, id="batchnorm", marks=pytest.mark.slow)]
)
def test_lambda_zero_is_fedavg(tmp_path, setting):
    """λ = 0: every personal model is the global model and the global model follows FedAvg."""
    _, fedavg = train(tmp_path, "fedavg", **setting)
    _, lgmix = train(tmp_path, "lgmix", {"fixed_lambda": 0.0}, **setting)
    assert lgmix["server"]["params"].dtype == torch.float64
    assert torch.allclose(lgmix["server"]["params"], fedavg["server"]["params"], rtol=0, atol=F64_ATOL)
    for name, b in fedavg["server"]["buffers"].items():
        if b.is_floating_point():
            assert torch.allclose(lgmix["server"]["buffers"][name], b, rtol=0, atol=F64_ATOL), name
    for state in lgmix["client_states"].values():
        assert torch.allclose(personal(state), fedavg["server"]["params"], rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("float64")
def test_lambda_one_is_local_training(tmp_path):
    _, local = train(tmp_path, "local")
    _, lgmix = train(tmp_path, "lgmix", {"fixed_lambda": 1.0})
    for client, state in lgmix["client_states"].items():
        assert torch.allclose(personal(state), local["client_states"][client]["personal_params"], rtol=0, atol=F64_ATOL)
    assert not torch.allclose(lgmix["server"]["params"], local["server"]["params"])  # u still learns


class Scripted:
    """LG-Mix with a scripted sequence of raw λ (Eq. 6) per round, to check history averaging and Eq. 2."""

    def __init__(self, raw, **params):
        self.algorithm = build_algorithm("lgmix", params)
        self.raw = iter(raw)
        self.algorithm.round_lambda = lambda ctx: next(self.raw)


@pytest.mark.usefixtures("float64")
def test_history_averaging_and_the_mixing_rule_match_the_formulas():
    torch.manual_seed(0)
    raw = [0.9, 0.3, 0.6, 0.2]
    for history in (True, False):
        scripted = Scripted(raw, history=history)
        state: dict = {}
        w = torch.randn(6)  # w_c(0)
        u = torch.randn(6)  # u(0)
        for t, lam_raw in enumerate(raw):
            delta = torch.randn(6)  # Δw_c(t)
            server = SimpleNamespace(params=u, buffers={"bn.mean": u[:2].clone(), "bn.n": torch.tensor(t)})
            ctx = SimpleNamespace(
                state=state,
                global_params=server.params,
                global_buffers=server.buffers,
                scratch={
                    "start_params": w.clone(),
                    "start_buffers": {"bn.mean": w[:2].clone(), "bn.n": torch.tensor(0)},
                },
            )
            update = SimpleNamespace(params=w + delta, buffers={"bn.mean": w[:2] + delta[:2], "bn.n": torch.tensor(2)})
            scripted.algorithm.end_local(ctx, update)
            expected = float(np.mean(raw[: t + 1])) if history else lam_raw  # [code]: mean incl. round t
            assert float(state["lambda"]) == pytest.approx(expected)
            assert torch.allclose(update.params, u + delta, rtol=0, atol=F64_ATOL)  # upload u(t) + Δw_c
            delta_u = torch.randn(6)
            u = u + delta_u  # the server's u(t+1)
            ctx.global_params, ctx.global_buffers = u, {"bn.mean": u[:2].clone(), "bn.n": torch.tensor(t)}
            scripted.algorithm.complete_mix(ctx)
            w_next = w + expected * delta + (1 - expected) * delta_u  # LG-Mix Eq. 2
            assert torch.allclose(state["personal_params"], w_next, rtol=0, atol=F64_ATOL)
            assert torch.allclose(state["personal_buffers"]["bn.mean"], w_next[:2], rtol=0, atol=F64_ATOL)
            assert int(state["personal_buffers"]["bn.n"]) == 2  # the client's own count
            w = state["personal_params"]


# ------------------------------------------------------------------------------------ Eq. 5-6
def test_gram_traces_equal_the_closed_forms():
    torch.manual_seed(1)
    h = torch.relu(torch.randn(40, 8)).double()
    moments = None
    for chunk in h.split(16):  # accumulated batch by batch
        moments = feature_moments(chunk.float(), moments)
    n = len(h)
    assert gram_trace(moments, center=False, drop_smallest=False) == pytest.approx(float((h**2).sum()) / n)
    centered = h - h.mean(0)
    assert gram_trace(moments, center=True, drop_smallest=False) == pytest.approx(float((centered**2).sum()) / n)
    eigenvalues = np.linalg.eigvalsh((centered.T @ centered / n).numpy())
    assert gram_trace(moments) == pytest.approx(eigenvalues.sum() - eigenvalues.min())
    spatial = feature_moments(torch.ones(2, 3, 4, 4), None)  # feature maps are average-pooled
    assert spatial[0].shape == (3, 3) and spatial[2] == 2


def test_mixing_ratio_stays_in_the_unit_interval():
    assert mixing_ratio(3.0, 1.0) == pytest.approx(0.75)
    assert mixing_ratio(0.0, 2.0) == 0.0 and mixing_ratio(2.0, 0.0) == 1.0
    assert mixing_ratio(0.0, 0.0) == 0.5
    for a, b in np.random.default_rng(0).exponential(size=(20, 2)):
        assert 0.0 <= mixing_ratio(a, b) <= 1.0


def test_lambda_from_features_is_a_running_mean_in_the_unit_interval(tmp_path):
    _, history = train(tmp_path, "lgmix", rounds=3)
    for state in history["client_states"].values():
        assert int(state["lambda_count"]) == 3
        assert 0.0 <= float(state["lambda"]) <= 1.0
        assert float(state["lambda"]) == pytest.approx(float(state["lambda_sum"]) / 3)
    _, raw = train(tmp_path, "lgmix", {"history": False, "center": False, "drop_smallest": False}, rounds=3)
    assert all("lambda_count" not in s and 0 <= float(s["lambda"]) <= 1 for s in raw["client_states"].values())


@pytest.mark.slow
def test_resume_gives_the_same_curve(tmp_path):
    spec_args = {"rounds": 3, "eval_every": 2, "model": "fedbn_digit_cnn", "model_params": {}, "local_steps": 2}
    full, _ = train(tmp_path / "a", "lgmix", **spec_args)
    partial_dir = tmp_path / "b"
    first, _ = train(partial_dir, "lgmix", stop_after_round=1, **spec_args)
    second, _ = train(partial_dir, "lgmix", **spec_args)
    assert [r.personal_mean for r in first + second] == [r.personal_mean for r in full]
    assert [r.test_acc for r in first + second] == [r.test_acc for r in full]


# ------------------------------------------------------------------------------------ recipes and CLI
@pytest.mark.parametrize("name", sorted(p.name for p in RECIPES.glob("lgmix_*.toml")))
def test_every_lgmix_recipe_compiles_at_every_scale(name):
    recipe = load_recipe(RECIPES / name)
    for scale in recipe.scale_names():
        runs = expand(recipe, scale=scale)
        assert runs and all(r.spec.eval_mode != "global" for r in runs)


def test_table1_recipe_matches_the_paper_setting():
    recipe = load_recipe(RECIPES / "lgmix_table1.toml")
    runs = expand(recipe)
    assert len(runs) == 11 * 2 * 3
    by = {(r.labels["algorithm"], r.labels["dataset"]): r.spec for r in runs if r.spec.seed == 0}
    digits, office = by[("lgmix", "Digits5")], by[("lgmix", "Office-Caltech10")]
    assert (digits.batch_size, digits.rounds, office.batch_size, office.rounds) == (128, 100, 32, 200)
    assert digits.partition == "natural" and digits.num_clients == 5 and office.num_clients == 4
    assert digits.optimizer.lr == 0.01 and digits.optimizer.momentum == 0.0
    assert by[("fedbn", "Digits5")].algorithm_params == {}
    table = recipe.table("digits5")
    assert table.figure == "val_selected" and table.metric == "personal_mean"


def test_table1_views_are_one_per_dataset_with_the_papers_columns():
    recipe = load_recipe(RECIPES / "lgmix_table1.toml")
    from fedbench.report.table import build_table

    digits = build_table(recipe, recipe.table("digits5"), Registry("sqlite://"))
    office = build_table(recipe, recipe.table("office"), Registry("sqlite://"))
    assert digits.columns == ["A", "B", "C", "D", "E", "Avg."] and office.columns == ["A", "B", "C", "D", "Avg."]
    assert digits.rows[-1] == office.rows[-1] == "lgmix" and len(digits.rows) == 11
    assert digits.cells[("lgmix", "Avg.")].published == 97.10 and digits.cells[("lgmix", "Avg.")].expected == 3
    assert office.cells[("fedbn", "D")].published == 83.05 and office.cells[("l2sgd", "A")].published is None


CLI_RECIPE = """
paper = "tests"
name = "lgmix_cli"
title = "LG-Mix on digits"
seeds = [0]

[setup]
dataset = "digits"
model = "digits_mlp"
model_params = { hidden = 32 }
partition = "dirichlet"
partition_params = { alpha = 0.3, min_size = 20 }
num_clients = 4
clients_per_round = 4
rounds = 4
batch_size = 32
optimizer = { lr = 0.1 }
eval_mode = "both"
client_test_fraction = 0.2
client_val_fraction = 0.2

[matrix]
algorithm = ["lgmix"]

[[tables]]
name = "per_client"
rows = ["algorithm"]
columns = ["client"]
clients = ["A", "B", "C", "D"]
figure = "val_selected"
metric = "personal_mean"
"""


def test_cli_run_improves_personal_accuracy(tmp_path):
    recipe = tmp_path / "lgmix.toml"
    recipe.write_text(CLI_RECIPE)
    registry = f"sqlite:///{tmp_path / 'r.db'}"
    runner = CliRunner()
    result = runner.invoke(app, ["run", str(recipe), "--registry", registry])
    assert result.exit_code == 0, result.output
    reg = Registry(registry)
    (row,) = reg.runs()
    curve = reg.curve(row.id)
    assert row.status == "done" and len(curve) == 4
    assert curve[-1].personal_mean > curve[0].personal_mean + 0.05
    assert curve[-1].personal_mean > 0.5 and curve[-1].personal_val_mean is not None
    report = runner.invoke(app, ["report", "--recipe", str(recipe), "--registry", registry, "--format", "json"])
    assert report.exit_code == 0, report.output
    cells = json.loads(report.stdout)["tables"][0]["cells"]
    assert {c["column"] for c in cells} == {"A", "B", "C", "D", "Avg."}
