"""Personalised FL: each method's defining property, its personal state across a resume, and one CLI run per
method."""

from __future__ import annotations

import json

import pytest
import torch

from algorithm_fixtures import run_until
from conftest import F64_ATOL, ListSink
from fedbench.algorithms.context import load_weights
from fedbench.checkpoint.format import load_checkpoint
from fedbench.data.federated import prepare_data
from fedbench.engine import EngineOptions, run
from fedbench.engine.loop import init_model
from fedbench.spec import RunSpec

DEVICE = torch.device("cpu")
BASE = {
    "dataset": "digits",
    "model": "digits_mlp",
    "model_params": {"hidden": 32},
    "partition": "dirichlet",
    "partition_params": {"alpha": 0.5, "min_size": 20},
    "num_clients": 4,
    "clients_per_round": 4,
    "rounds": 2,
    "batch_size": 32,
    "optimizer": {"lr": 0.1},
    "eval_mode": "both",
    "client_test_fraction": 0.2,
}
# FedBN needs BatchNorm: LG-Mix's Digits model (fine on 1×8×8 input), a few steps only.
BN = {
    **BASE,
    "model": "fedbn_digit_cnn",
    "model_params": {},
    "num_clients": 3,
    "clients_per_round": 3,
    "local_steps": 2,
    "batch_size": 16,
}


def train(tmp_path, sink=None, **overrides):
    spec = RunSpec(**{**BASE, **overrides})
    path = tmp_path / f"{spec.spec_hash}.pt"
    sink = sink if sink is not None else ListSink()
    result = run(spec, sink, EngineOptions(checkpoint_path=path))
    assert result.status == "done", result.message
    return spec, sink.records, load_checkpoint(path, spec.spec_hash, DEVICE)


def initial_weights(spec):
    data = prepare_data(spec, DEVICE)
    model = init_model(spec, data.num_classes, data.input_shape, DEVICE)
    return data, model, torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()


def flat_mask(model, names):
    names = set(names)
    return torch.cat([torch.full((p.numel(),), n in names) for n, p in model.named_parameters()])


# ------------------------------------------------------------------------------------ methods
def test_fedbn_keeps_batchnorm_local_and_never_averages_it(tmp_path):
    spec, _, ckpt = train(tmp_path, **{**BN, "algorithm": "fedbn"})
    _, model, w0 = initial_weights(spec)
    bn = flat_mask(model, model.batchnorm_parameter_names())
    assert bn.any()
    server, states = ckpt["server"], ckpt["client_states"]
    # The server's BN part is w^0 (never averaged) while the rest moved.
    assert torch.equal(server["params"][bn], w0[bn])
    assert not torch.equal(server["params"][~bn], w0[~bn])
    initial_buffers = dict(model.named_buffers())
    for name, value in server["buffers"].items():
        assert torch.equal(value, initial_buffers[name]), name
    # Every client holds its own BN parameters and running statistics, all different.
    local = [states[k]["local_params"] for k in range(3)]
    assert all(x.numel() == int(bn.sum()) for x in local)
    assert not torch.equal(local[0], local[1]) and not torch.equal(local[1], local[2])
    means = [states[k]["local_buffers"]["encoder.1.running_mean"] for k in range(3)]
    assert not torch.equal(means[0], means[1])
    assert set(states[0]["local_buffers"]) == {n for n, _ in model.named_buffers()}


def test_ditto_with_huge_lambda_pins_personal_models_to_the_global_one(tmp_path):
    common = {"algorithm": "ditto", "rounds": 2, "local_epochs": 3, "optimizer": {"lr": 0.05}}
    _, _, one_round = train(tmp_path, **{**common, "rounds": 1})
    received = one_round["server"]["params"]  # w^1, the global model clients receive in round 2

    def drift(lam):
        _, _, ckpt = train(tmp_path, **common, algorithm_params={"lam": lam})
        return max(float((ckpt["client_states"][k]["personal_params"] - received).norm()) for k in range(4))

    free, pinned = drift(0.0), drift(1 / 0.05)  # η·λ = 1: each step resets v to w^t − η∇F
    assert pinned < 0.1 * free
    # λ = 0 is local training of the personal model: it moves far from w^t
    assert free > 1.0


def test_fedrep_shares_the_body_and_keeps_heads_distinct(tmp_path):
    spec, records, ckpt = train(tmp_path, algorithm="fedrep", algorithm_params={"head_epochs": 1, "body_epochs": 1})
    data, model, w0 = initial_weights(spec)
    head = flat_mask(model, model.head_parameter_names())
    server, states = ckpt["server"], ckpt["client_states"]
    assert torch.equal(server["params"][head], w0[head])  # heads are never averaged
    assert not torch.equal(server["params"][~head], w0[~head])  # the body is trained and shared
    heads = [states[k]["local_params"] for k in range(4)]
    assert all(not torch.equal(heads[0], h) for h in heads[1:])
    # Personalised accuracy of each client = (shared body, own head) on its test split, computed here.
    for k in range(4):
        params = server["params"].clone()
        params[head] = heads[k]
        load_weights(model, params, server["buffers"])
        idx = data.client_test[k]
        predictions = model(data.tensors.train_x[idx]).argmax(1)
        expected = int((predictions == data.tensors.train_y[idx]).sum()) / len(idx)
        assert records[-1].personal_per_client[k] == expected


def test_fedrep_phases_train_only_their_part(tmp_path):
    spec, _, ckpt = train(tmp_path, algorithm="fedrep", rounds=1, algorithm_params={"head_epochs": 2, "body_epochs": 0})
    _, model, w0 = initial_weights(spec)
    head = flat_mask(model, model.head_parameter_names())
    assert torch.equal(ckpt["server"]["params"], w0)  # body frozen in the head phase, head kept local
    assert not torch.equal(ckpt["client_states"][0]["local_params"], w0[head])


def test_fedfomo_scores_and_mixes_peers_with_their_own_batchnorm_statistics():
    """FedFomo Eq. 6–7 on a BatchNorm model: each peer θ_j is scored on client i's validation split with its own
    running statistics, and they are mixed with the same weights as the parameters (FL-bench [code] loads and
    mixes every state_dict entry); num_batches_tracked stays the client's own. (Result revision 1 scored peers
    with client i's statistics and mixed only the weights.)"""
    import copy

    from fedbench.algorithms import build_algorithm
    from fedbench.algorithms.context import RunState, ServerState, SpareModels
    from fedbench.algorithms.losses import task_loss

    spec = RunSpec(**{**BASE, **BN, "algorithm": "fedfomo", "rounds": 1})
    data = prepare_data(spec, DEVICE)
    model = init_model(spec, data.num_classes, data.input_shape, DEVICE)
    algorithm = build_algorithm("fedfomo", {})
    algorithm.bind_model(spec, model, data.input_shape, data.num_classes)
    base = torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()
    buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
    generator = torch.Generator().manual_seed(0)

    def variant(scale, mean_shift, var):
        params = base + scale * torch.randn(base.shape, generator=generator)
        state = {
            n: (
                b + mean_shift
                if n.endswith("running_mean")
                else torch.full_like(b, var)
                if n.endswith("running_var")
                else b + 3
            )
            for n, b in buffers.items()
        }
        return params, state

    own = variant(0.02, 0.0, 1e-4)  # running variances far too small: a poor model on its own data
    peers = {1: variant(0.02, 0.0, 1.0), 2: variant(0.02, 0.3, 2.0)}
    server = ServerState(params=base.clone(), buffers=copy.deepcopy(buffers))
    algorithm.init_server(server)
    server.state["client_models"].update(peers)
    run = RunState(
        spec=spec,
        data=data,
        model=model,
        server=server,
        device=DEVICE,
        spare_models=SpareModels(model),
        client_states={0: {"personal_params": own[0].clone(), "personal_buffers": copy.deepcopy(own[1])}},
    )
    ctx = run.client_context(algorithm, 0, 1, lr=0.1, payload=algorithm.payload(server, 1))
    algorithm.begin_local(ctx)

    scorer = copy.deepcopy(model).eval()
    x, y = data.tensors.train_x[ctx.holdout], data.tensors.train_y[ctx.holdout]

    def loss(params, state):
        load_weights(scorer, params, state)
        with torch.no_grad():
            return task_loss("classification", scorer(x), y).item()

    own_loss = loss(*own)
    raw = {j: max(0.0, (own_loss - loss(*peer)) / float((peer[0] - own[0]).norm())) for j, peer in peers.items()}
    assert all(w > 0 for w in raw.values()) and len(ctx.holdout) > 0
    weights = {j: w / sum(raw.values()) for j, w in raw.items()}  # Eq. 7, normalised
    expected = own[0] + sum(w * (peers[j][0] - own[0]) for j, w in weights.items())
    assert torch.allclose(ctx.current_params(), expected, atol=1e-6)
    assert ctx.scratch["fomo_weights"] == pytest.approx(weights)
    mixed = ctx.current_buffers()
    for name, b in own[1].items():
        if b.is_floating_point():
            expected_b = b + sum(w * (peers[j][1][name] - b) for j, w in weights.items())
            assert torch.allclose(mixed[name], expected_b, atol=1e-6), name
        else:
            assert torch.equal(mixed[name], b), name


def test_fedper_and_fedalt_keep_heads_local(tmp_path):
    for name in ("fedper", "fedalt"):
        spec, _, ckpt = train(tmp_path, algorithm=name)
        _, model, w0 = initial_weights(spec)
        head = flat_mask(model, model.head_parameter_names())
        assert torch.equal(ckpt["server"]["params"][head], w0[head])
        assert not torch.equal(ckpt["client_states"][0]["local_params"], ckpt["client_states"][1]["local_params"])


def test_apfl_alpha_stays_in_unit_interval(tmp_path):
    _, _, ckpt = train(tmp_path, algorithm="apfl", rounds=3, algorithm_params={"alpha_lr": 50.0})
    alphas = [float(ckpt["client_states"][k]["alpha"]) for k in range(4)]
    assert all(0.0 <= a <= 1.0 for a in alphas)
    assert any(a in (0.0, 1.0) for a in alphas)  # the step is large enough to hit the clip
    _, _, fixed = train(tmp_path, algorithm="apfl", algorithm_params={"adaptive_alpha": False, "alpha": 0.3})
    assert all(float(fixed["client_states"][k]["alpha"]) == pytest.approx(0.3) for k in range(4))


def test_local_training_never_shares(tmp_path):
    spec, _, ckpt = train(tmp_path, algorithm="local")
    _, _, w0 = initial_weights(spec)
    assert torch.equal(ckpt["server"]["params"], w0)
    assert not torch.equal(ckpt["client_states"][0]["personal_params"], ckpt["client_states"][1]["personal_params"])


@pytest.mark.usefixtures("float64")
def test_l2sgd_full_pull_each_round_restarts_from_the_average(tmp_path):
    # θ = ηλ/p = 1 on every round (p = 1): each round starts from x − (x − x̄) = x̄ (in exact arithmetic), so the
    # uploads are FedAvg's.
    _, _, fedavg = train(tmp_path, algorithm="fedavg", rounds=3)
    _, _, l2sgd = train(tmp_path, algorithm="l2sgd", rounds=3, algorithm_params={"lam": 10.0, "p": 1.0})
    assert torch.allclose(fedavg["server"]["params"], l2sgd["server"]["params"], rtol=0, atol=F64_ATOL)
    _, _, local = train(tmp_path, algorithm="local", rounds=3)
    _, _, apart = train(tmp_path, algorithm="l2sgd", rounds=3, algorithm_params={"lam": 0.0})
    assert torch.equal(local["client_states"][2]["personal_params"], apart["client_states"][2]["personal_params"])


def test_personal_state_survives_resume(tmp_path):
    spec = RunSpec(**{**BASE, "algorithm": "ditto", "rounds": 3})
    straight = ListSink()
    run(spec, straight, EngineOptions(checkpoint_path=tmp_path / "a.pt"))
    resumed = ListSink()
    path = tmp_path / "b.pt"
    run_until(spec, resumed, 2, EngineOptions(checkpoint_path=path))
    run(spec, resumed, EngineOptions(checkpoint_path=path))
    assert [r.personal_per_client for r in resumed.records] == [r.personal_per_client for r in straight.records]


# ------------------------------------------------------------------------------------ CLI
METHODS = ["local", "fedper", "fedrep", "ditto", "apfl", "perfedavg", "fedbn", "l2sgd", "fedalt", "fedfomo", "fedhkd"]

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
