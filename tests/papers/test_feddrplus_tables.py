"""FedDr+'s tables: its recipes compile at every scale and carry the spec's settings and published values
(Tables 1, 2, 3, 8, 9 and Fig. 6; shared/papers/feddrplus.md), Table 3's "Local only (L_DR)" row and Table 8's
crossed fine-tuning rows "Dot-Regression FT (L_Dr+)" and "FedDr+ FT (L_DR)": the ``local`` method's
``loss = "dr"`` and ``finetune.loss = "dr" | "dr_plus"`` (§1.6, §3.2, §4, §8 #16)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from pydantic import ValidationError
from torch import nn
from typer.testing import CliRunner

from algorithm_fixtures import (
    MLP,
    Sink,
    client_context,
    fresh_server,
    initial_model,
    initial_params,
    make_spec,
    train,
)
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm, validate_algorithm_params
from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.context import SpareModels
from fedbench.algorithms.methods.dot_regression import dot_regression_loss
from fedbench.algorithms.params import FEDDR_PLUS_PARAMS, NoParams
from fedbench.cli import app
from fedbench.data.federated import prepare_data
from fedbench.data.store import TensorData
from fedbench.engine import personal
from fedbench.engine.loop import RoundRecord, init_model, run
from fedbench.engine.state import RunState
from fedbench.errors import ConfigError
from fedbench.recipes.expand import expand
from fedbench.recipes.load import load_recipe
from fedbench.recipes.resolve import non_default
from fedbench.registry import Registry
from fedbench.report.table import build_table
from fedbench.spec import RunSpec

RECIPES = Path(__file__).resolve().parents[2] / "recipes"


FEDDR_PLUS = {"regularizers": [{"name": "fd", "weight": 0.1}]}


COLUMNS = ("s=10", "s=20", "s=100", "α=0.05", "α=0.1", "α=0.3")


def cells(runs, **labels):
    return [p for p in runs if all(p.labels.get(k) == v for k, v in labels.items())]


# ------------------------------------------------------------------------------- local with L_DR
def _objective_and_gradient(name: str, params: dict, spec, model, x, y):
    """The method's local objective on one batch from w^0 and its gradient over the trainable parameters."""
    algorithm = build_algorithm(name, params)
    ctx = client_context(algorithm, spec, model, fresh_server(model), TensorData(x, y, x, y), torch.arange(len(y)), {})
    algorithm.begin_local(ctx)
    loss = algorithm.objective(ctx, x, y, algorithm.forward(ctx, x))
    grads = torch.autograd.grad(loss, [p for p in model.parameters() if p.requires_grad])
    return loss.detach(), torch.cat([g.flatten() for g in grads])


@pytest.mark.usefixtures("head_mlp", "float64")
def test_local_dr_objective_is_dot_regressions_and_differs_from_ce():
    torch.manual_seed(0)
    x, y = torch.randn(16, 1, 8, 8), torch.randint(0, 10, (16,))
    spec = make_spec("local", {"loss": "dr"}, model=MLP, model_params={"classifier": "etf"})
    model = initial_model(spec)
    dr_loss, dr = _objective_and_gradient("local", {"loss": "dr"}, spec, model, x, y)
    ref_loss, ref = _objective_and_gradient("dot_regression", {}, spec, model, x, y)
    ce_loss, ce = _objective_and_gradient("local", {}, spec, model, x, y)
    fedavg_loss, fedavg = _objective_and_gradient("fedavg", {}, spec, model, x, y)
    assert torch.equal(dr_loss, ref_loss) and torch.equal(dr, ref)  # exactly Dot-Regression's objective
    assert torch.equal(ce_loss, fedavg_loss) and torch.equal(ce, fedavg)  # the default is still plain CE
    assert not torch.allclose(dr, ce, atol=1e-4)
    with torch.no_grad():  # ½·mean (cos(f, v_y) − 1)²
        cosine = F.cosine_similarity(model.features(x), model.classifier.weight[y], dim=1)
    assert dr_loss.item() == pytest.approx(0.5 * ((cosine - 1) ** 2).mean().item(), rel=0, abs=F64_ATOL)


@pytest.mark.usefixtures("head_mlp")
def test_dot_regression_loss_has_the_analytic_feature_gradient():
    """∇_f L_DR = (κ − 1)·(v_y − κ·f/‖f‖)/‖f‖ per sample (spec §1.2), divided by B for the batch mean."""
    torch.manual_seed(1)
    spec = make_spec("local", {"loss": "dr"}, model=MLP, model_params={"classifier": "etf"})
    head = initial_model(spec).classifier
    f = torch.randn(6, head.weight.shape[1], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([0, 3, 3, 9, 1, 5])
    head = head.double()
    (grad,) = torch.autograd.grad(dot_regression_loss(head(f), y), f)
    v = head.weight[y].detach()
    norm = f.detach().norm(dim=1, keepdim=True)
    kappa = (f.detach() / norm * v).sum(1, keepdim=True)
    expected = (kappa - 1) * (v - kappa * f.detach() / norm) / norm / len(y)
    assert torch.allclose(grad, expected, atol=1e-12)


@pytest.mark.usefixtures("head_mlp")
def test_local_dr_trains_personal_models_through_the_frozen_etf(tmp_path):
    common = {
        "model": MLP,
        "model_params": {"classifier": "etf"},
        "rounds": 2,
        "eval_mode": "personal",
        "client_test_fraction": 0.2,
        "optimizer": {"lr": 1.0, "momentum": 0.5},
    }
    dr_spec, ce_spec = make_spec("local", {"loss": "dr"}, **common), make_spec("local", {}, **common)
    assert (
        dr_spec.spec_hash != ce_spec.spec_hash
        and non_default("algorithm", ce_spec.algorithm, ce_spec.algorithm_params) == {}
    )
    _, dr_sink, dr_ckpt = train(dr_spec, tmp_path, "dr.pt")
    _, _, ce_ckpt = train(ce_spec, tmp_path, "ce.pt")
    w0 = initial_params(dr_spec)
    assert torch.equal(dr_ckpt["server"]["params"], w0)  # nothing is shared
    model = initial_model(dr_spec)
    etf = slice(*_param_range(model, "classifier.weight"))
    personal = [s["personal_params"] for s in dr_ckpt["client_states"].values()]
    assert len(personal) == 4 and all(torch.equal(p[etf], w0[etf]) for p in personal)  # the ETF stays frozen
    assert all(not torch.equal(p, w0) for p in personal)
    assert any(
        not torch.equal(dr_ckpt["client_states"][k]["personal_params"], ce_ckpt["client_states"][k]["personal_params"])
        for k in range(4)
    )
    assert dr_sink.records[-1].personal_mean > 0.3  # it learns (10 classes)


def _param_range(model: nn.Module, name: str) -> tuple[int, int]:
    offset = 0
    for n, p in model.named_parameters():
        if n == name:
            return offset, offset + p.numel()
        offset += p.numel()
    raise KeyError(name)


@pytest.mark.usefixtures("head_mlp")
def test_local_dr_needs_the_etf_head_and_a_known_loss(tmp_path):
    with pytest.raises(
        ConfigError, match=r"algorithm_params.loss = 'dr' needs a fixed etf classifier.*classifier = 'etf'"
    ):
        train(
            make_spec(
                "local",
                {"loss": "dr"},
                model=MLP,
                model_params={"classifier": "linear"},
                eval_mode="personal",
                client_test_fraction=0.2,
            ),
            tmp_path,
        )
    with pytest.raises(ConfigError, match=r"algorithm 'local': algorithm_params.loss: Input should be 'ce' or 'dr'"):
        validate_algorithm_params("local", {"loss": "dr_plus"})


# ------------------------------------------------------------------------------- fine-tuning loss
def finetuned(spec: RunSpec, start_shift: float = 0.0):
    """Fine-tune every client from the (shifted) initial model as the engine does after the last round; return
    the per-client accuracies and the last client's fine-tuned weights (the working model afterwards)."""
    device = torch.device("cpu")
    algorithm = build_algorithm(spec.algorithm, spec.algorithm_params)
    data = prepare_data(spec, device)
    model = init_model(spec, data.num_classes, data.input_shape, device)
    frozen = torch.cat([torch.full((p.numel(),), not p.requires_grad) for p in model.parameters()])
    server = fresh_server(model)
    if start_shift:  # a start model other than w^0 (the frozen classifier kept)
        server.params[~frozen] += start_shift * torch.randn(
            int((~frozen).sum()), generator=torch.Generator().manual_seed(3)
        )
    record = RoundRecord(round=spec.rounds, train_loss=0.0, wall_seconds=0.0, bytes_up=0, bytes_down=0)
    algorithm.bind_model(spec, model, data.input_shape, data.num_classes)
    state = RunState(
        spec=spec, data=data, model=model, server=server, device=device, spare_models=SpareModels(model), frozen=frozen
    )
    personal.finetune_evaluation(state, algorithm, None, record)
    return record.finetune_per_client, nn.utils.parameters_to_vector(model.parameters()).detach().clone()


def ft_spec(algorithm_params: dict, loss: str, model_params: dict | None = None, **finetune) -> RunSpec:
    return make_spec(
        "dot_regression",
        algorithm_params,
        model=MLP,
        model_params=model_params or {"classifier": "etf"},
        eval_mode="both",
        client_test_fraction=0.2,
        finetune={"epochs": 2, "lr": 0.5, "loss": loss, "start": "final", **finetune},
    )


@pytest.mark.usefixtures("head_mlp")
def test_finetune_loss_named_explicitly_equals_the_methods_own_and_changes_the_result():
    dr_gfl_own = finetuned(ft_spec({}, "method"), 0.1)
    dr_gfl_dr = finetuned(ft_spec({}, "dr"), 0.1)
    dr_gfl_drplus = finetuned(ft_spec({}, "dr_plus"), 0.1)
    plus_gfl_own = finetuned(ft_spec(FEDDR_PLUS, "method"), 0.1)
    plus_gfl_dr = finetuned(ft_spec(FEDDR_PLUS, "dr"), 0.1)
    plus_gfl_drplus = finetuned(ft_spec(FEDDR_PLUS, "dr_plus"), 0.1)
    # "dr" is Dot-Regression's own loss and "dr_plus" FedDr+'s, bit for bit (teacher = the start model) ...
    assert torch.equal(dr_gfl_dr[1], dr_gfl_own[1]) and dr_gfl_dr[0] == dr_gfl_own[0]
    assert torch.equal(plus_gfl_drplus[1], plus_gfl_own[1]) and plus_gfl_drplus[0] == plus_gfl_own[0]
    # ... whatever the GFL method: the explicit loss does not depend on the trained algorithm's params
    assert torch.equal(plus_gfl_dr[1], dr_gfl_dr[1]) and torch.equal(dr_gfl_drplus[1], plus_gfl_drplus[1])
    # and the crossed losses give other fine-tuned models than the method's own
    assert not torch.equal(dr_gfl_drplus[1], dr_gfl_own[1])
    assert not torch.equal(plus_gfl_dr[1], plus_gfl_own[1])
    assert not torch.equal(finetuned(ft_spec({}, "ce"), 0.1)[1], dr_gfl_dr[1])


@pytest.mark.usefixtures("head_mlp", "float64")
def test_dr_plus_fine_tuning_is_0_9_dr_plus_0_1_feature_distillation_to_the_start_model():
    spec = ft_spec({}, "dr_plus")
    trainer = personal.finetune_trainer(spec, build_algorithm("fedavg", {}))
    assert trainer.params == build_algorithm("dot_regression", FEDDR_PLUS_PARAMS).params
    assert personal.finetune_trainer(ft_spec({}, "dr"), None).params.regularizers == ()
    torch.manual_seed(0)
    x, y = torch.randn(8, 1, 8, 8), torch.randint(0, 10, (8,))
    model = initial_model(spec)
    ctx = client_context(trainer, spec, model, fresh_server(model), TensorData(x, y, x, y), torch.arange(8), {})
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(0.2 * torch.randn_like(p))  # move the student off the start model
        logits = trainer.forward(ctx, x)
        teacher = ctx.global_model()
        expected = 0.9 * dot_regression_loss(logits, y) + 0.1 * F.mse_loss(model.features(x), teacher.features(x))
        assert trainer.objective(ctx, x, y, logits).item() == pytest.approx(expected.item(), rel=0, abs=F64_ATOL)


@pytest.mark.usefixtures("head_mlp")
@pytest.mark.parametrize("loss", ["ce", "method"])
def test_ce_and_method_fine_tuning_keep_their_old_behaviour_bit_for_bit(monkeypatch, loss):
    spec = ft_spec(FEDDR_PLUS, loss)
    new = finetuned(spec, 0.1)

    def old_trainer(spec, algorithm):  # personal.finetune_evaluation's trainer before finetune.loss had dr / dr_plus
        return algorithm if spec.finetune.loss == "method" else Algorithm(NoParams())

    monkeypatch.setattr(personal, "finetune_trainer", old_trainer)
    old = finetuned(spec, 0.1)
    assert new[0] == old[0] and torch.equal(new[1], old[1])


@pytest.mark.usefixtures("head_mlp")
@pytest.mark.parametrize("loss", ["dr", "dr_plus"])
def test_fine_tuning_with_a_dr_loss_needs_the_etf_head_and_fails_before_round_one(loss):
    spec = make_spec(
        "fedavg",
        model=MLP,
        model_params={"classifier": "linear"},
        eval_mode="both",
        client_test_fraction=0.2,
        finetune={"loss": loss, "epochs": 1},
    )
    sink = Sink()
    with pytest.raises(ConfigError, match=rf"finetune.loss = '{loss}' needs a fixed etf classifier"):
        run(spec, sink)
    assert sink.records == []


def test_bad_finetune_loss_is_a_validation_error_naming_the_key():
    with pytest.raises(ValidationError, match="finetune.loss"):
        make_spec("fedavg", eval_mode="both", client_test_fraction=0.2, finetune={"loss": "l_dr"})


# ------------------------------------------------------------------------------- spec hashes
def test_feddrplus_own_loss_fine_tuning_is_one_run_in_tables_3_and_8():
    """Every cell's hash is pinned in tests/fixtures/spec_hashes.json; here: the shared run stays shared."""
    t3 = expand(load_recipe(RECIPES / "feddrplus_table3.toml"))
    t8 = expand(load_recipe(RECIPES / "feddrplus_table8.toml"))
    assert (
        cells(t3, setting="s=10", algorithm="FedDr+ FT")[0].spec_hash
        == cells(t8, setting="s=10", algorithm="FedDr+", ft_loss="own")[0].spec_hash
    )
    spec = cells(t8, setting="s=10", algorithm="FedDr+", ft_loss="own")[0].spec
    assert '"loss":"method"' in spec.canonical_json()


# ------------------------------------------------------------------------------- recipes
def test_table3_local_dr_row():
    recipe = load_recipe(RECIPES / "feddrplus_table3.toml")
    runs = expand(recipe)
    assert len(runs) == 72  # 12 methods × 6 settings
    rows = cells(runs, algorithm="Local only (DR)")
    assert sorted(p.labels["setting"] for p in rows) == sorted(COLUMNS)  # personalised protocol only
    assert {p.labels["protocol"] for p in rows} == {"personalised"}
    spec = cells(rows, setting="α=0.1")[0].spec
    assert (
        spec.algorithm,
        non_default("algorithm", "local", spec.algorithm_params),
        non_default("model", spec.model, spec.model_params),
    ) == ("local", {"loss": "dr"}, {"classifier": "etf"})
    assert (spec.rounds, spec.clients_per_round, spec.local_steps, spec.eval_mode) == (160, 100, 10, "personal")
    assert (spec.optimizer.lr, spec.optimizer.momentum, spec.lr_schedule.milestones) == (5.0, 0.9, (81, 121))
    ce_etf = cells(runs, algorithm="Local only (CE+ETF)", setting="α=0.1")[0].spec
    assert spec.model_dump(exclude={"algorithm_params", "model_params", "optimizer"}) == ce_etf.model_dump(
        exclude={"algorithm_params", "model_params", "optimizer"}
    )
    published = [60.68, 44.61, 20.98, 58.56, 46.72, 30.88]
    view = recipe.table("personalised")
    assert [view.published_value("Local only (DR)", c) for c in COLUMNS] == published
    assert "not expressible" not in (RECIPES / "feddrplus_table3.toml").read_text()
    assert len(expand(recipe, scale="smoke", synthetic=True)) == 72


def test_table8_crossed_fine_tuning_rows(tmp_path):
    recipe = load_recipe(RECIPES / "feddrplus_table8.toml")
    runs = expand(recipe)
    assert len(runs) == 24  # 2 methods × 2 FT losses × 6 settings
    losses = {(p.labels["algorithm"], p.labels["ft_loss"]): p.spec.finetune.loss for p in runs}
    assert losses == {
        ("Dot-Regression", "own"): "method",
        ("Dot-Regression", "L_Dr+"): "dr_plus",
        ("FedDr+", "own"): "method",
        ("FedDr+", "L_DR"): "dr",
    }
    for algorithm, crossed in (("Dot-Regression", "L_Dr+"), ("FedDr+", "L_DR")):
        for setting in COLUMNS:  # the same GFL training, only the fine-tuning loss differs
            own = cells(runs, algorithm=algorithm, ft_loss="own", setting=setting)[0].spec
            other = cells(runs, algorithm=algorithm, ft_loss=crossed, setting=setting)[0].spec
            assert own.model_dump(exclude={"finetune"}) == other.model_dump(exclude={"finetune"})
            assert own.finetune.model_dump(exclude={"loss"}) == other.finetune.model_dump(exclude={"loss"})
    table3 = {p.spec_hash for p in expand(load_recipe(RECIPES / "feddrplus_table3.toml"))}
    assert all(p.spec_hash in table3 for p in cells(runs, algorithm="FedDr+", ft_loss="own"))
    assert not any(p.spec_hash in table3 for p in cells(runs, ft_loss="L_DR"))
    assert "not expressible" not in (RECIPES / "feddrplus_table8.toml").read_text()

    registry = Registry(f"sqlite:///{tmp_path / 'r.db'}")
    finetuned = build_table(recipe, recipe.table("finetuned"), registry)
    assert finetuned.rows == ["Dot-Regression / own", "Dot-Regression / L_Dr+", "FedDr+ / own", "FedDr+ / L_DR"]
    published = {
        "Dot-Regression / own": [80.84, 74.18, 56.84, 72.02, 66.96, 60.34],
        "Dot-Regression / L_Dr+": [80.82, 73.73, 56.69, 71.85, 66.59, 59.87],
        "FedDr+ / own": [84.10, 75.42, 56.76, 78.55, 74.75, 62.16],
        "FedDr+ / L_DR": [84.23, 75.73, 56.90, 78.65, 74.86, 62.47],
    }
    for row, values in published.items():
        assert [finetuned.cells[(row, c)].published for c in COLUMNS] == values
        assert all(finetuned.cells[(row, c)].expected == 1 for c in COLUMNS)
    for name in ("gfl", "gfl_clients"):  # the GFL rows: one run per cell, the own-loss one
        gfl = build_table(recipe, recipe.table(name), registry)
        assert gfl.rows == ["Dot-Regression", "FedDr+"]
        assert all(cell.expected == 1 for cell in gfl.cells.values())
    assert build_table(recipe, recipe.table("gfl"), registry).cells[("FedDr+", "s=10")].published == 48.69


# ------------------------------------------------------------------------------- through the CLI
SETUP = f"""
paper = "tests"
seeds = [0]

[setup]
dataset = "digits"
model = "{MLP}"
model_params = {{ classifier = "etf" }}
partition = "dirichlet"
partition_params = {{ alpha = 0.5, min_size = 20 }}
num_clients = 3
clients_per_round = 3
rounds = 2
batch_size = 32
optimizer = {{ lr = 1.0, momentum = 0.5 }}
client_test_fraction = 0.2
"""


LOCAL_RECIPE = (
    """name = "local_dr"
"""
    + SETUP
    + """eval_mode = "personal"

[matrix]
algorithm = [{ label = "Local only (DR)", algorithm = "local", algorithm_params = { loss = "dr" } }]

[[tables]]
name = "personal"
rows = ["algorithm"]
columns = []
figure = "final"
metric = "personal_mean"

[tables.published]
"Local only (DR)" = 60.68
"""
)


CROSSED_RECIPE = (
    """name = "crossed_ft"
"""
    + SETUP
    + """eval_mode = "both"
finetune = { epochs = 1, lr = 0.5, loss = "method", start = "best" }

[matrix]
algorithm = [
  { label = "Dot-Regression", algorithm = "dot_regression" },
  { label = "FedDr+", algorithm = "dot_regression", algorithm_params = { regularizers = [{ name = "fd", weight = 0.1 }] } },
]
ft_loss = [{ label = "own" }, { label = "L_DR", finetune = { loss = "dr" } }, { label = "L_Dr+", finetune = { loss = "dr_plus" } }]

[[combination]]
match = { algorithm = "Dot-Regression", ft_loss = "L_DR" }
skip = true
[[combination]]
match = { algorithm = "FedDr+", ft_loss = "L_Dr+" }
skip = true

[[tables]]
name = "finetuned"
rows = ["algorithm", "ft_loss"]
columns = []
figure = "final"
metric = "finetune_mean"

[tables.published]
"Dot-Regression / L_Dr+" = 80.82
"FedDr+ / L_DR" = 84.23
"""
)


@pytest.mark.usefixtures("head_mlp")
def test_cli_runs_and_reports_the_new_rows(tmp_path, write_recipe):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    runner = CliRunner()
    cells_by_row = {}
    for text, name in ((LOCAL_RECIPE, "local.toml"), (CROSSED_RECIPE, "crossed.toml")):
        recipe = write_recipe(text, name)
        result = runner.invoke(app, ["run", str(recipe), "--registry", url, "--device", "cpu"])
        assert result.exit_code == 0, result.output
        result = runner.invoke(app, ["report", "--recipe", str(recipe), "--registry", url, "--format", "json"])
        assert result.exit_code == 0, result.output
        cells_by_row.update({c["row"]: c for c in json.loads(result.output)["tables"][0]["cells"]})
    runs = Registry(url).runs(paper="tests")
    assert len(runs) == 5 and all(r.status == "done" for r in runs), [(r.labels, r.error) for r in runs]
    assert set(cells_by_row) == {
        "Local only (DR)",
        "Dot-Regression / own",
        "Dot-Regression / L_Dr+",
        "FedDr+ / own",
        "FedDr+ / L_DR",
    }
    assert all(c["n"] == 1 and c["mean"] is not None for c in cells_by_row.values())
    assert cells_by_row["Local only (DR)"]["published"] == 60.68 and cells_by_row["FedDr+ / L_DR"]["published"] == 84.23


@pytest.mark.usefixtures("head_mlp")
@pytest.mark.parametrize(
    "recipe_text,assignment,key",
    [
        (CROSSED_RECIPE, "finetune.loss=l_dr", "finetune.loss"),
        (LOCAL_RECIPE, "algorithm_params.loss=mse", "algorithm_params.loss"),
    ],
)
def test_cli_rejects_bad_values_with_one_line_naming_the_key(write_recipe, tmp_path, recipe_text, assignment, key):
    recipe = write_recipe(recipe_text, "bad.toml")
    url = f"sqlite:///{tmp_path / 'bad.db'}"
    result = CliRunner().invoke(app, ["run", str(recipe), "--registry", url, "--set", assignment])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and key in lines[0], result.output
    assert not (tmp_path / "bad.db").exists() or Registry(url).runs(paper="tests") == []


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
