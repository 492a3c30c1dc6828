"""FedTR: defining properties of the method and one CLI run (spec ../shared/papers/fedtr.md; its recipes:
tests/papers/test_fedtr_tables.py)."""

from __future__ import annotations

import pytest
import torch
from typer.testing import CliRunner

from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import ClientUpdate
from fedbench.algorithms.context import ClientContext, ServerState
from fedbench.checkpoint.format import load_checkpoint
from fedbench.cli import app
from fedbench.engine import EngineOptions, run
from fedbench.spec import RunSpec

BASE = {
    "dataset": "digits",
    "model": "digits_mlp",
    "model_params": {"hidden": 16},
    "partition": "dirichlet",
    "partition_params": {"alpha": 0.5, "min_size": 5},
    "num_clients": 4,
    "clients_per_round": 4,
    "rounds": 3,
    "batch_size": 32,
    "optimizer": {"lr": 0.05},
}


def final(spec, tmp_path):
    from conftest import ListSink

    path = tmp_path / f"{spec.spec_hash}.pt"
    run(spec, ListSink(), EngineOptions(checkpoint_path=path))
    return load_checkpoint(path, spec.spec_hash, torch.device("cpu"))


@pytest.mark.parametrize("drift_update", ["feddc", "grad"])
def test_no_centroid_and_no_drift_term_is_fedavg(tmp_path, drift_update):
    fedavg = final(RunSpec(algorithm="fedavg", **BASE), tmp_path)
    off = final(
        RunSpec(
            algorithm="fedtr", algorithm_params={"lambda_r": 0.0, "alpha_g": 0.0, "drift_update": drift_update}, **BASE
        ),
        tmp_path,
    )
    on = final(RunSpec(algorithm="fedtr", algorithm_params={"drift_update": drift_update}, **BASE), tmp_path)
    assert torch.equal(fedavg["server"]["params"], off["server"]["params"])
    assert not torch.equal(fedavg["server"]["params"], on["server"]["params"])
    assert "centroids" in on["server"]["state"] and all("drift" in s for s in on["client_states"].values())
    # α_G = 0 switches drift releasing off entirely: no d_i is kept (spec §1.6's per-client state) or uploaded
    assert not any("drift" in s for s in off["client_states"].values())


class TinyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU())
        self.classifier = torch.nn.Linear(4, 3)

    def features(self, x):
        return self.encoder(x)

    def head(self, z):
        return self.classifier(z)

    def forward(self, x):
        return self.head(self.features(x))


def _context(model, server, state, payload, x, y, round_index=2, lr=0.1):
    from fedbench.data.store import TensorData

    spec = RunSpec(
        algorithm="fedtr",
        dataset="digits",
        model="digits_mlp",
        num_clients=2,
        clients_per_round=2,
        local_steps=1,
        batch_size=len(y),
        optimizer={"lr": lr},
    )
    return ClientContext(
        spec=spec,
        client_id=0,
        round_index=round_index,
        model=model,
        server=server,
        payload=payload,
        state=state,
        data=TensorData(x, y, x[:0], y[:0]),
        indices=torch.arange(len(y)),
        generator=torch.Generator().manual_seed(0),
        device=torch.device("cpu"),
        lr=lr,
    )


def _vector(model):
    return torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()


# FedTR's centroids are accumulated in float64 and stored in float32: a float64 run's centroids are its exact
# means rounded once to float32 (relative error ≤ 2⁻²⁴), twice after Eq. 9's merge.
FLOAT32_ROUNDING = torch.finfo(torch.float32).eps / 2


@pytest.mark.usefixtures("float64")
def test_centroids_are_per_class_mean_features_and_eq9_weights_by_counts():
    torch.manual_seed(0)
    model = TinyNet()
    x, y = torch.randn(10, 3), torch.tensor([0, 0, 1, 1, 1, 0, 1, 0, 0, 1])  # class 2 absent
    server = ServerState(params=_vector(model), buffers={})
    algorithm = build_algorithm("fedtr", {"alpha_g": 0.0})
    update = algorithm.local_train(_context(model, server, {}, {}, x, y, round_index=1))
    with torch.no_grad():
        z = model.features(x)
    expected = torch.stack([z[y == c].mean(0) for c in (0, 1)])
    assert update.extra["centroids"].dtype == torch.float32
    assert torch.allclose(update.extra["centroids"][:2].double(), expected, rtol=FLOAT32_ROUNDING, atol=F64_ATOL)
    assert update.extra["class_counts"].tolist() == [5, 5, 0]
    # Eq. 9 with a second client holding classes 1 and 2
    other = ClientUpdate(
        1,
        update.params,
        {},
        3,
        1,
        0.0,
        extra={"centroids": torch.ones(3, 4), "class_counts": torch.tensor([0.0, 15.0, 3.0], dtype=torch.float64)},
    )
    algorithm.aggregate(server, [update, other], 1)
    centroids, defined = server.state["centroids"], server.state["centroid_defined"]
    assert torch.allclose(centroids[0].double(), expected[0], rtol=FLOAT32_ROUNDING, atol=F64_ATOL)
    assert torch.allclose(
        centroids[1].double(), (5 * expected[1] + 15 * torch.ones(4)) / 20, rtol=2 * FLOAT32_ROUNDING, atol=F64_ATOL
    )
    assert defined.tolist() == [True, True, True]
    # what the server broadcasts in round 2 (spec §1.6): these centroids and their mask
    broadcast = algorithm.payload(server, 2)
    assert torch.equal(broadcast["centroids"], centroids) and torch.equal(broadcast["centroid_defined"], defined)


@pytest.mark.usefixtures("float64")
def test_round_one_has_no_centroid_term_and_missing_classes_are_masked():
    torch.manual_seed(0)
    model = TinyNet()
    algorithm = build_algorithm("fedtr", {"lambda_r": 1.0, "alpha_g": 0.0})
    server = ServerState(params=_vector(model), buffers={})
    assert algorithm.payload(server, 1) == {}
    x, y = torch.randn(4, 3), torch.tensor([0, 1, 2, 2])
    ctx = _context(model, server, {}, {}, x, y)
    logits = algorithm.forward(ctx, x)
    ce = torch.nn.functional.cross_entropy(logits, y)
    assert torch.equal(algorithm.loss(ctx, x, y, logits), ce)  # round 1: L_R = 0
    centroids = torch.randn(3, 4)
    payload = {"centroids": centroids, "centroid_defined": torch.tensor([True, False, True])}
    ctx = _context(model, server, {}, payload, x, y)
    logits = algorithm.forward(ctx, x)
    z, keep = ctx.scratch["features"], torch.tensor([0, 2, 3])  # class 1 masked out
    expected = ce + ((z[keep] - centroids[y[keep]]) ** 2).mean()
    assert torch.allclose(algorithm.loss(ctx, x, y, logits), expected, rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("float64")
@pytest.mark.parametrize("drift_update", ["feddc", "grad"])
def test_drift_update_follows_the_formula(drift_update):
    """One SGD step of CE + (α/2)||d + w − w_g||², then the variant's d update, by hand."""
    torch.manual_seed(0)
    model = TinyNet()
    x, y = torch.randn(6, 3), torch.tensor([0, 1, 2, 0, 1, 2])
    w_global = _vector(model)
    server = ServerState(params=w_global.clone(), buffers={})
    # start the client's model away from w_g so the drift term matters
    offset = 0.05 * torch.randn_like(w_global)
    d0 = 0.1 * torch.randn_like(w_global)
    alpha, lr = 0.5, 0.1
    algorithm = build_algorithm("fedtr", {"lambda_r": 0.0, "alpha_g": alpha, "drift_update": drift_update})
    state = {"drift": d0.clone()}
    ctx = _context(model, server, state, {}, x, y, lr=lr)
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(w_global + offset, model.parameters())
    w0 = _vector(model)
    update = algorithm.local_train(ctx)
    # hand computation
    ref = TinyNet()
    torch.nn.utils.vector_to_parameters(w0.clone(), ref.parameters())
    loss = torch.nn.functional.cross_entropy(ref(x), y)
    grad = torch.cat([g.flatten() for g in torch.autograd.grad(loss, list(ref.parameters()))])
    w1 = w0 - lr * (grad + alpha * (d0 + w0 - w_global))
    if drift_update == "feddc":
        d1 = d0 + (w1 - w_global)
    else:
        d1 = d0 - lr * alpha * (d0 + w1 - w_global)
    assert torch.allclose(_vector(model), w1, rtol=0, atol=F64_ATOL)
    assert torch.allclose(state["drift"], d1, rtol=0, atol=F64_ATOL)
    assert torch.allclose(update.params, w1 + d1, rtol=0, atol=F64_ATOL)  # the upload is w_i⁺ + d_i⁺


def test_adaptive_alpha_scales_by_mean_size_over_client_size():
    model = TinyNet()
    x, y = torch.randn(6, 3), torch.tensor([0, 1, 2, 0, 1, 2])  # |D| = 6, N = 2: mean n = 3
    server = ServerState(params=_vector(model), buffers={})
    algorithm = build_algorithm("fedtr", {"alpha_g": 0.01, "adaptive_alpha": True})
    ctx = _context(model, server, {}, {}, x, y)
    ctx.indices, ctx.num_samples = torch.arange(2), 2
    assert algorithm.client_alpha(ctx) == pytest.approx(0.01 * 3 / 2)
    ctx.indices, ctx.num_samples = torch.arange(1), 1  # a one-sample client: α_i = α_G·3/1
    assert algorithm.client_alpha(ctx) == pytest.approx(0.01 * 3)


def test_tiny_cli_run_improves_accuracy(tmp_path):
    recipe = tmp_path / "tiny.toml"
    recipe.write_text("""
paper = "testpaper"
name = "fedtr_tiny"
title = "FedTR on digits"
seeds = [0]
[setup]
dataset = "digits"
model = "digits_mlp"
model_params = { hidden = 32 }
partition = "dirichlet"
partition_params = { alpha = 0.5, min_size = 5 }
num_clients = 4
clients_per_round = 4
rounds = 4
batch_size = 32
optimizer = { lr = 0.1 }
[matrix]
algorithm = ["fedtr"]
[[tables]]
name = "acc"
title = "Best accuracy"
rows = ["algorithm"]
columns = []
figure = "best"
""")
    registry = f"sqlite:///{tmp_path / 'r.db'}"
    runner = CliRunner()
    result = runner.invoke(app, ["run", str(recipe), "--registry", registry])
    assert result.exit_code == 0, result.output
    from fedbench.registry import Registry

    reg = Registry(registry)
    (row,) = reg.runs()
    curve = [r.test_acc for r in reg.curve(row.id)]
    assert curve[-1] > curve[0] and max(curve) > 0.5


@pytest.mark.parametrize("drift_update", ["feddc", "grad"])
def test_resume_is_bit_identical(tmp_path, drift_update):
    """Drift vectors (client state) and centroids (server state) survive a checkpoint."""
    from algorithm_fixtures import run_until
    from conftest import ListSink

    spec = RunSpec(algorithm="fedtr", algorithm_params={"alpha_g": 0.1, "drift_update": drift_update}, **BASE)
    straight = final(spec, tmp_path / "a")
    path = tmp_path / "b.pt"
    run_until(spec, ListSink(), 1, EngineOptions(checkpoint_path=path))
    run(spec, ListSink(), EngineOptions(checkpoint_path=path))
    resumed = load_checkpoint(path, spec.spec_hash, torch.device("cpu"))
    assert torch.equal(straight["server"]["params"], resumed["server"]["params"])
    assert torch.equal(straight["server"]["state"]["centroids"], resumed["server"]["state"]["centroids"])


# ------------------------------------------------------------------------------------ options, by hand
@pytest.mark.usefixtures("float64")
def test_variant_a_with_its_own_drift_lr_follows_algorithm_1_line_11():
    """``drift_lr`` = η_g ≠ η_f: one step w₁ = w₀ − η_f(∇CE + α(d₀ + w₀ − w_g)), then d₁ = d₀ − η_g·α(d₀ + w₁ − w_g)."""
    torch.manual_seed(3)
    model = TinyNet()
    x, y = torch.randn(6, 3), torch.tensor([0, 1, 2, 0, 1, 2])
    w_global = _vector(model)
    server = ServerState(params=w_global.clone(), buffers={})
    offset, d0 = 0.05 * torch.randn_like(w_global), 0.1 * torch.randn_like(w_global)
    alpha, lr, eta_g = 0.5, 0.1, 0.7
    algorithm = build_algorithm("fedtr", {"lambda_r": 0.0, "alpha_g": alpha, "drift_update": "grad", "drift_lr": eta_g})
    state = {"drift": d0.clone()}
    ctx = _context(model, server, state, {}, x, y, lr=lr)
    with torch.no_grad():
        torch.nn.utils.vector_to_parameters(w_global + offset, model.parameters())
    w0 = _vector(model)
    update = algorithm.local_train(ctx)
    ref = TinyNet()
    torch.nn.utils.vector_to_parameters(w0.clone(), ref.parameters())
    grad = torch.cat(
        [g.flatten() for g in torch.autograd.grad(torch.nn.functional.cross_entropy(ref(x), y), list(ref.parameters()))]
    )
    w1 = w0 - lr * (grad + alpha * (d0 + w0 - w_global))
    d1 = d0 - eta_g * alpha * (d0 + w1 - w_global)
    assert torch.allclose(state["drift"], d1, rtol=0, atol=F64_ATOL)
    assert torch.allclose(update.params, w1 + d1, rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("float64")
def test_eq4_sum_over_dims_reduction_by_hand():
    """``r_reduction = "sum_dim_mean_batch"``: R = mean_j Σ_k (z_jk − C_{y_j,k})², weighted by λ_R."""
    torch.manual_seed(4)
    model = TinyNet()
    server = ServerState(params=_vector(model), buffers={})
    algorithm = build_algorithm("fedtr", {"lambda_r": 0.3, "alpha_g": 0.0, "r_reduction": "sum_dim_mean_batch"})
    x, y = torch.randn(5, 3), torch.tensor([0, 1, 2, 2, 0])
    centroids = torch.randn(3, 4)
    payload = {"centroids": centroids, "centroid_defined": torch.tensor([True, True, True])}
    ctx = _context(model, server, {}, payload, x, y)
    logits = algorithm.forward(ctx, x)
    with torch.no_grad():
        z = model.features(x)
    r = sum(float(((z[j] - centroids[y[j]]) ** 2).sum()) for j in range(5)) / 5
    expected = float(torch.nn.functional.cross_entropy(model(x), y).detach()) + 0.3 * r
    assert float(algorithm.loss(ctx, x, y, logits).detach()) == pytest.approx(expected, rel=0, abs=F64_ATOL)
    # no class with a centroid in the batch: R = 0
    payload["centroid_defined"] = torch.tensor([False, False, False])
    ctx = _context(model, server, {}, payload, x, y)
    logits = algorithm.forward(ctx, x)
    assert torch.equal(algorithm.loss(ctx, x, y, logits), torch.nn.functional.cross_entropy(logits, y))


@pytest.mark.usefixtures("float64")
@pytest.mark.parametrize("batch_size", [1, 3, 1000])
def test_eq7_centroids_do_not_depend_on_the_centroid_batch(batch_size):
    """Eq. 7's per-class means, accumulated over batches of any size, equal the whole-split means; the model is
    back in train mode afterwards."""
    from fedbench.algorithms.methods.fedtr import local_centroids

    torch.manual_seed(5)
    model = TinyNet()
    x, y = torch.randn(10, 3), torch.tensor([2, 0, 1, 0, 0, 0, 2, 0, 0, 2])
    with torch.no_grad():
        z = model.features(x)
    means, counts = local_centroids(model, x, y, torch.arange(10), batch_size)
    expected = torch.stack([z[y == c].mean(0) for c in range(3)])
    assert counts.tolist() == [6.0, 1.0, 3.0]  # class 1: one sample
    assert torch.allclose(means.double(), expected, rtol=FLOAT32_ROUNDING, atol=F64_ATOL)
    assert model.training


def test_communication_follows_section_1_6():
    """Spec §1.6: download |w| + M·dim(z), upload |w| + M·dim(z) + M (the counts n_ij); λ_R = 0 sends none."""
    model = TinyNet()
    model.feature_dim = 4
    spec = RunSpec(algorithm="fedtr", dataset="digits", model="digits_mlp")
    on, off = build_algorithm("fedtr", {}), build_algorithm("fedtr", {"lambda_r": 0.0})
    for algorithm in (on, off):
        algorithm.bind_model(spec, model, (3,), 3)
    assert (on.extra_download_floats(43), on.extra_upload_floats(43)) == (3 * 4, 3 * 4 + 3)
    assert (off.extra_download_floats(43), off.extra_upload_floats(43)) == (0, 0)
    # the static overhead table builds methods without a model: no centroid size is known, none is counted
    unbound = build_algorithm("fedtr", {})
    assert (unbound.extra_download_floats(43), unbound.extra_upload_floats(43)) == (0, 0)
    # what local training actually uploads besides the weights matches the accounting
    x, y = torch.randn(6, 3), torch.tensor([0, 1, 2, 0, 1, 2])
    for algorithm in (on, off):
        server = ServerState(params=_vector(model), buffers={})
        update = algorithm.local_train(_context(model, server, {}, {}, x, y))
        sent = sum(t.numel() for t in update.extra.values())
        assert sent == algorithm.extra_upload_floats(43)


def test_attaching_flops_are_the_drift_term_and_one_centroid_pass():
    """A_FedTR = 3·K·|w| for G's gradient (w − w_g + d and the scaled add) + n·FP for Eq. 7's forward pass."""
    kwargs = {"steps": 5, "samples": 250, "batch_size": 50, "num_params": 1000, "forward_flops": 300.0}
    flops = {
        (lam, alpha): build_algorithm("fedtr", {"lambda_r": lam, "alpha_g": alpha}).attach_flops_per_round(**kwargs)
        for lam in (0.0, 1.0)
        for alpha in (0.0, 0.01)
    }
    assert flops == {(0.0, 0.0): 0.0, (0.0, 0.01): 3 * 5 * 1000, (1.0, 0.0): 250 * 300.0, (1.0, 0.01): 15000 + 75000.0}


@pytest.mark.parametrize(
    "accepted, rejected",
    [
        ({"lambda_r": 0.0, "alpha_g": 0.0}, {"lambda_r": -1e-9}),
        ({"alpha_g": 0.0}, {"alpha_g": -1e-9}),
        ({"drift_lr": 1e-3}, {"drift_lr": 0.0}),
        ({"centroid_batch_size": 1}, {"centroid_batch_size": 0}),
    ],
)
def test_parameter_bounds(accepted, rejected):
    from fedbench.algorithms import validate_algorithm_params
    from fedbench.errors import ConfigError

    validate_algorithm_params("fedtr", accepted)
    with pytest.raises(ConfigError, match=next(iter(rejected))):
        validate_algorithm_params("fedtr", rejected)


def test_defaults_are_the_specs_proposals():
    """Spec §1.7: λ_R = 1 with the MSE reduction, α_G = 0.01 (FedDC), variant B, η_g = η_f; centroids in
    batches of 1000 (resolved into every spec, so a changed default cannot reuse old results)."""
    params = build_algorithm("fedtr", {}).params
    assert params.model_dump() == {
        "lambda_r": 1.0,
        "r_reduction": "mse",
        "alpha_g": 0.01,
        "adaptive_alpha": False,
        "drift_update": "feddc",
        "drift_lr": None,
        "centroid_batch_size": 1000,
        "regularizers": (),
    }


@pytest.mark.usefixtures("float64")
def test_eq9_a_class_one_sample_holds_gets_that_samples_centroid():
    """Eq. 9 over the sampled clients: C_j = Σ_i n_ij c_ij / Σ_i n_ij is defined as soon as one sample of class j
    was seen (here: one sample of class 0, two of class 1, none of class 2, which stays masked)."""
    algorithm = build_algorithm("fedtr", {"alpha_g": 0.0})
    server = ServerState(params=torch.zeros(5), buffers={})
    c0, c1 = torch.randn(3, 4), torch.randn(3, 4)
    updates = [
        ClientUpdate(
            0, torch.zeros(5), {}, 1, 1, 0.0, extra={"centroids": c0, "class_counts": torch.tensor([1.0, 0, 0])}
        ),
        ClientUpdate(
            1, torch.zeros(5), {}, 2, 1, 0.0, extra={"centroids": c1, "class_counts": torch.tensor([0.0, 2, 0])}
        ),
    ]
    algorithm.aggregate(server, updates, 1)
    assert server.state["centroid_defined"].tolist() == [True, True, False]
    assert torch.allclose(server.state["centroids"][:2].double(), torch.stack([c0[0], c1[1]]), rtol=FLOAT32_ROUNDING)
