"""Every global-FL baseline through the CLI on the digits data: a few rounds improve on the initial model."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from algorithm_fixtures import MLP, head_mlp, initial_model, make_spec  # noqa: F401  (head_mlp is a fixture)
from fedbench.cli import app
from fedbench.data.federated import prepare_data
from fedbench.engine.evaluation import evaluate

RECIPE = f"""
paper = "tests"
name = "baselines"
title = "Global-FL baselines on digits"
seeds = [0]

[setup]
dataset = "digits"
model = "{MLP}"
model_params = {{ hidden = 32 }}
partition = "dirichlet"
partition_params = {{ alpha = 0.5, min_size = 5 }}
num_clients = 4
clients_per_round = 4
rounds = 3
batch_size = 32
optimizer = {{ name = "sgd", lr = 0.05, momentum = 0.5 }}

[matrix]
algorithm = ["fedavg", "fedprox", "scaffold", "feddyn", "moon", "fedntd", "fednova", "slowmo", "fedexp",
             "fedbabu", "spherefed", "fedetf", "dot_regression"]

[overrides.algorithm.fedprox]
algorithm_params = {{ mu = 0.01 }}

[overrides.algorithm.feddyn]
algorithm_params = {{ alpha = 0.01 }}

[overrides.algorithm.moon]
algorithm_params = {{ mu = 1.0, tau = 0.5 }}

[overrides.algorithm.fedntd]
algorithm_params = {{ beta = 1.0, tau = 3.0, regularizers = [{{ name = "prox", weight = 0.01 }}] }}

[overrides.algorithm.spherefed]
model_params = {{ classifier = "orthonormal" }}
optimizer = {{ lr = 1.0 }}

[overrides.algorithm.fedetf]
model_params = {{ classifier = "fedetf" }}
optimizer = {{ lr = 0.5 }}

# FedDr+ = Dot-Regression + feature distillation, 0.9·L_DR + 0.1·L_FD
[overrides.algorithm.dot_regression]
model_params = {{ classifier = "etf" }}
optimizer = {{ lr = 1.0 }}
algorithm_params = {{ regularizers = [{{ name = "fd", weight = 0.1 }}] }}

[[tables]]
name = "acc"
rows = ["algorithm"]
columns = []
figure = "best"
"""


def initial_accuracy(model_params: dict) -> float:
    spec = make_spec("fedavg", model=MLP, model_params=model_params)
    data = prepare_data(spec, torch.device("cpu"))
    model = initial_model(spec)
    return evaluate(model, data.tensors.test_x, data.tensors.test_y)[0]


@pytest.mark.usefixtures("head_mlp")
def test_every_baseline_runs_through_the_cli_and_learns(tmp_path):
    recipe = tmp_path / "baselines.toml"
    recipe.write_text(RECIPE)
    registry = f"sqlite:///{tmp_path / 'r.db'}"
    runner = CliRunner()
    result = runner.invoke(app, ["run", str(recipe), "--registry", registry])
    assert result.exit_code == 0, result.output
    assert "13 done" in result.output
    runs = json.loads(runner.invoke(app, ["runs", "--registry", registry, "--json"]).stdout)
    assert len(runs) == 13
    for run in runs:
        algorithm = run["labels"]["algorithm"]
        start = initial_accuracy(run["spec"]["model_params"])
        assert run["status"] == "done", algorithm
        assert run["summary"]["final"] > start + 0.2, (algorithm, start, run["summary"])
