"""FedDr+ Table 3 "Local only (L_DR)" and Table 8's crossed fine-tuning rows "Dot-Regression FT (L_Dr+)" and
"FedDr+ FT (L_DR)": the ``local`` method's ``loss = "dr"`` and ``finetune.loss = "dr" | "dr_plus"``
(shared/papers/feddrplus.md §1.6, §3.2, §4 Tables 3 and 8, §8 #16)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from pydantic import ValidationError
from torch import nn
from typer.testing import CliRunner

from algorithm_fixtures import (  # noqa: F401  (head_mlp is a fixture)
    MLP,
    Sink,
    client_context,
    fresh_server,
    head_mlp,
    initial_model,
    initial_params,
    make_spec,
    train,
)
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm, validate_algorithm_params
from fedbench.algorithms.base import Algorithm
from fedbench.algorithms.context import RunState, SpareModels
from fedbench.algorithms.dot_regression import dot_regression_loss
from fedbench.algorithms.params import FEDDR_PLUS_PARAMS, NoParams
from fedbench.cli import app
from fedbench.data.federated import prepare_data
from fedbench.data.store import TensorData
from fedbench.engine import personal
from fedbench.engine.loop import RoundRecord, init_model, run
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
