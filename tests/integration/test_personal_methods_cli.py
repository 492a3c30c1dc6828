"""Every personalised method through the CLI: one run each on the digits data, reported per client and after
fine-tuning."""

from __future__ import annotations

import json

import pytest

# ------------------------------------------------------------------------------------ CLI
METHODS = [
    "local",
    "fedper",
    "fedrep",
    "ditto",
    "apfl",
    "perfedavg",
    "fedbn",
    "l2sgd",
    "fedalt",
    "fedfomo",
    "fedhkd",
    "pfedme",
    "fedproto",
    "fedrod",
    "fedala",
]


CLI_RECIPE = """
paper = "testpaper"
name = "personal"
seeds = [0]

[setup]
dataset = "digits"
model = "digits_mlp"
model_params = {{ hidden = 32 }}
partition = "dirichlet"
partition_params = {{ alpha = 0.5, min_size = 20 }}
num_clients = 3
clients_per_round = 3
rounds = 2
batch_size = 32
optimizer = {{ lr = 0.1 }}
eval_mode = "both"
client_test_fraction = 0.2
client_val_fraction = 0.2

[matrix]
algorithm = {methods}

[overrides.algorithm.fedbn]
model = "fedbn_digit_cnn"
local_steps = 2

[[combination]]
match = {{ algorithm = "fedavg" }}
set = {{ finetune = {{ epochs = 1, lr = 0.01, start = "best_val" }} }}

[[tables]]
name = "clients"
rows = ["algorithm"]
columns = ["client"]
clients = ["A", "B", "C"]
figure = "val_selected"
metric = "personal_mean"

[[tables]]
name = "ft"
rows = ["algorithm"]
columns = []
figure = "final"
metric = "finetune_mean"
"""


def test_cli_runs_every_personal_method_and_reports_per_client(tmp_path, write_recipe):
    from typer.testing import CliRunner

    from fedbench.cli import app
    from fedbench.registry import Registry

    recipe = write_recipe(CLI_RECIPE.format(methods=json.dumps(METHODS + ["fedavg"])), "personal.toml")
    url = f"sqlite:///{tmp_path / 'r.db'}"
    runner = CliRunner()
    result = runner.invoke(app, ["run", str(recipe), "--registry", url, "--device", "cpu"])
    assert result.exit_code == 0, result.output
    registry = Registry(url)
    runs = registry.runs(paper="testpaper")
    assert sorted(r.labels["algorithm"] for r in runs) == sorted(METHODS + ["fedavg"])
    assert all(r.status == "done" for r in runs), [(r.labels, r.error) for r in runs]

    result = runner.invoke(
        app, ["report", "--recipe", str(recipe), "--registry", url, "--format", "json", "--table", "clients"]
    )
    assert result.exit_code == 0, result.output
    table = json.loads(result.output)["tables"][0]
    assert table["columns"] == ["A", "B", "C", "Avg."]
    cells = {(c["row"], c["column"]): c["mean"] for c in table["cells"]}
    fedavg = next(r for r in runs if r.labels["algorithm"] == "fedavg")
    curve = registry.curve(fedavg.id)
    chosen = max(curve, key=lambda x: (x.personal_val_mean, -x.round))  # first round with the best validation
    assert cells[("fedavg", "Avg.")] == pytest.approx(100 * chosen.personal_mean)
    assert cells[("fedavg", "B")] == pytest.approx(100 * chosen.personal_per_client[1])
    assert curve[-1].finetune_mean is not None
    result = runner.invoke(app, ["report", "--recipe", str(recipe), "--registry", url, "--format", "markdown"])
    assert result.exit_code == 0 and "Avg." in result.output, result.output
