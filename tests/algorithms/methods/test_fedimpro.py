"""FedImpro: defining properties of the method (spec shared/papers/fedimpro.md) and one CLI run (its recipes:
tests/papers/test_fedimpro_tables.py)."""

from __future__ import annotations

import textwrap

import pytest
import torch
import torch.nn.functional as F
from typer.testing import CliRunner

from algorithm_fixtures import engine_options
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import ClientUpdate
from fedbench.algorithms.context import ClientContext, ServerState
from fedbench.checkpoint.format import load_checkpoint
from fedbench.cli import app
from fedbench.engine import EngineOptions, run
from fedbench.errors import ConfigError
from fedbench.models import build_model
from fedbench.spec import RunSpec

BASE = {
    "dataset": "digits",
    "model": "digits_cnn",
    "model_params": {"width": 8, "hidden": 32},
    "partition": "dirichlet",
    "partition_params": {"alpha": 0.5, "min_size": 5},
    "num_clients": 4,
    "clients_per_round": 2,
    "rounds": 3,
    "batch_size": 32,
    "optimizer": {"lr": 0.05, "momentum": 0.9},
}


SHAPE = (1, 8, 8)


def final(spec, tmp_path, sink, **kwargs):
    path = tmp_path / f"{spec.spec_hash}.pt"
    result = run(spec, sink, engine_options(checkpoint_path=path, **kwargs))
    return result, load_checkpoint(path, spec.spec_hash, torch.device("cpu"))


def bound(params: dict, split: str = "pool", seed: int = 0):
    """A FedImpro instance bound to a digits CNN, with its server state."""
    torch.manual_seed(seed)
    model = build_model("digits_cnn", 10, SHAPE, width=4, hidden=16)
    spec = RunSpec(
        algorithm="fedimpro",
        algorithm_params={"split": split, **params},
        seed=seed,
        **{k: v for k, v in BASE.items() if k not in ("model_params",)},
    )
    algorithm = build_algorithm("fedimpro", spec.algorithm_params)
    algorithm.bind_model(spec, model, SHAPE, 10)
    server = ServerState(params=torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone(), buffers={})
    algorithm.init_server(server)
    return algorithm, model, spec, server


def context(algorithm, model, spec, server, round_index=1, client_id=0):
    from fedbench.data.store import TensorData

    empty = torch.zeros(0)
    ctx = ClientContext(
        spec=spec,
        client_id=client_id,
        round_index=round_index,
        model=model,
        server=server,
        payload=algorithm.payload(server, round_index),
        state={},
        data=TensorData(empty, empty, empty, empty),
        indices=torch.arange(0),
        generator=torch.Generator(),
        device=torch.device("cpu"),
        lr=0.1,
    )
    algorithm.begin_local(ctx)
    return ctx


def test_feature_weight_zero_equals_fedavg(tmp_path, sink):
    from conftest import ListSink

    _, a = final(RunSpec(algorithm="fedavg", **BASE), tmp_path, sink)
    _, b = final(RunSpec(algorithm="fedimpro", algorithm_params={"feature_weight": 0.0}, **BASE), tmp_path, ListSink())
    _, c = final(
        RunSpec(algorithm="fedimpro", algorithm_params={"feature_weight_sched": "constant"}, **BASE),
        tmp_path,
        ListSink(),
    )
    assert torch.equal(a["server"]["params"], b["server"]["params"])
    assert not torch.equal(a["server"]["params"], c["server"]["params"])
    assert b["server"]["state"]["mu"].shape == (10, 8 * 2 * 4 * 4)  # C × D, D = 2·width·4·4 at "pool"


@pytest.mark.usefixtures("float64")
def test_local_statistics_follow_eq6_per_class():
    """β_m = 0 (the [code] rule at layer2): a class's estimate is replaced by the batch's class mean and
    unbiased std; classes absent keep the global value, single-sample classes keep their σ; σ ≤ σ0."""
    algorithm, model, spec, server = bound({"stat_weight": "beta", "beta_m": 0.0, "sigma0": 0.3})
    ctx = context(algorithm, model, spec, server)
    h = torch.randn(9, algorithm.feature_dim) * 0.2 + 1.0
    y = torch.tensor([0, 0, 0, 3, 3, 5, 0, 3, 3])  # class 5 once, classes 1, 2, 4, 6-9 absent
    algorithm.update_statistics(ctx, h, y)
    mu, sigma = ctx.scratch["mu"], ctx.scratch["sigma"]
    for c in (0, 3):
        assert torch.allclose(mu[c], h[y == c].mean(0), rtol=0, atol=F64_ATOL)
        assert torch.allclose(sigma[c], h[y == c].std(0).clamp(max=0.3), rtol=0, atol=F64_ATOL)
    assert torch.allclose(mu[5], h[y == 5][0], rtol=0, atol=F64_ATOL)
    assert torch.equal(sigma[5], server.state["sigma"][5])  # std of one sample is undefined
    for c in (1, 2, 4, 6, 7, 8, 9):
        assert torch.equal(mu[c], server.state["mu"][c]) and torch.equal(sigma[c], server.state["sigma"][c])
    assert (sigma <= 0.3).all() and (sigma[0] == 0.3).any() and (sigma[0] < 0.3).any()


@pytest.mark.usefixtures("float64")
def test_code_statistics_weight_is_min_one_d_over_5000():
    """[code] w = min(1, D/5000) (spec §1.4): D = 2·4·4·4 = 128 at pool for width 4 → w = 0.0256."""
    algorithm, model, spec, server = bound({})
    assert algorithm.feature_dim == 128
    ctx = context(algorithm, model, spec, server)
    h, y = torch.randn(4, 128), torch.tensor([2, 2, 2, 2])
    algorithm.update_statistics(ctx, h, y)
    w = 128 / 5000
    assert torch.allclose(ctx.scratch["mu"][2], (1 - w) * server.state["mu"][2] + w * h.mean(0), rtol=0, atol=F64_ATOL)
    # D ≥ count_ref: w = 1, the batch's class statistics replace the estimate (ResNet-18's layer2, D = 32,768)
    algorithm, model, spec, server = bound({"count_ref": 100})
    ctx = context(algorithm, model, spec, server)
    algorithm.update_statistics(ctx, h, y)
    assert torch.allclose(ctx.scratch["mu"][2], h.mean(0), rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("float64")
def test_server_aggregates_uniform_mean_with_momentum():
    """FedImpro Eq. 7: μ_g ← β_g μ_g + (1 − β_g)·mean_i μ_i (uniform over the sampled clients, [code])."""
    algorithm, _, _, server = bound({"beta_g": 0.25})
    previous = {k: server.state[k].clone() for k in ("mu", "sigma")}
    updates = []
    for k, n in enumerate((10, 30, 60)):
        extra = {"mu": torch.rand(10, 128), "sigma": torch.rand(10, 128) * 0.1}
        updates.append(ClientUpdate(k, server.params + k, {}, n, 1, 0.0, extra))
    algorithm.aggregate(server, updates, 1)
    for key in ("mu", "sigma"):
        mean = sum(u.extra[key] for u in updates) / 3
        assert torch.allclose(server.state[key], 0.25 * previous[key] + 0.75 * mean, rtol=0, atol=F64_ATOL)
    # the weights themselves are FedAvg's sample-weighted mean
    assert torch.allclose(server.params, updates[0].params + (0.3 * 1 + 0.6 * 2), rtol=0, atol=F64_ATOL)


def test_sampled_features_have_the_class_moments():
    algorithm, model, spec, server = bound({"sample_from": "global"})
    server.state["sigma"] = torch.rand(10, 128) * 0.1
    ctx = context(algorithm, model, spec, server)
    features, labels = algorithm.sample_features(ctx, 32)
    assert labels.tolist() == list(range(10)) * 4  # class-balanced, C·(⌊B/C⌋+1) ([code])
    assert features.shape == (40, 8, 4, 4)
    features, labels = algorithm.sample_features(ctx, 20_000)
    flat = features.flatten(1)
    for c in (0, 7):
        rows = flat[labels == c]
        assert torch.allclose(rows.mean(0), server.state["mu"][c], atol=0.01)
        assert torch.allclose(rows.std(0), server.state["sigma"][c], atol=0.01)


@pytest.mark.usefixtures("float64")
def test_synthetic_term_trains_only_the_high_part():
    """App. B: ĥ is a sampled tensor, so the synthetic loss sends no gradient into θ_low."""
    algorithm, model, spec, server = bound({"feature_weight_sched": "constant"})
    ctx = context(algorithm, model, spec, server)
    x = torch.randn(6, *SHAPE)
    logits = algorithm.forward(ctx, x)
    assert logits.shape == (6, 10) and torch.allclose(logits, model(x), rtol=0, atol=F64_ATOL)  # real part = forward(x)
    F.cross_entropy(ctx.scratch["fake_logits"], ctx.scratch["fake_labels"]).backward()
    low = [p for name, p in model.named_parameters() if name.startswith(("encoder.0.", "encoder.2."))]
    high = [p for name, p in model.named_parameters() if not name.startswith(("encoder.0.", "encoder.2."))]
    assert all(p.grad is None or not p.grad.any() for p in low) and all(
        p.grad is not None and p.grad.abs().sum() > 0 for p in high
    )


def test_feature_weight_schedule():
    gradual = build_algorithm("fedimpro", {})
    assert [gradual.feature_weight(e) for e in (0, 250, 1000)] == [0.0, 0.5, 2.0]  # [code] uncapped e/500
    assert build_algorithm("fedimpro", {"feature_weight_sched": "capped"}).feature_weight(1000) == 1.0
    assert (
        build_algorithm("fedimpro", {"feature_weight_sched": "constant", "feature_weight": 0.5}).feature_weight(7)
        == 0.5
    )


@pytest.mark.usefixtures("float64")  # μ + σ_ε·ε recomputed here in another order: compared in float64
def test_privacy_noise_only_on_the_upload():
    algorithm, model, spec, server = bound({"noise_std": 0.05})
    ctx = context(algorithm, model, spec, server, round_index=3, client_id=2)
    update = ClientUpdate(2, server.params.clone(), {}, 10, 1, 0.0)
    algorithm.end_local(ctx, update)
    noise = update.extra["mu"] - ctx.scratch["mu"]
    assert 0.045 < noise.std().item() < 0.055 and abs(noise.mean().item()) < 0.005
    assert (update.extra["sigma"] >= 0).all()  # σ + ε clamped at 0 (spec §8 #9)
    assert torch.equal(ctx.scratch["mu"], server.state["mu"])  # the local estimate itself is clean
    assert torch.equal(update.params, server.params)
    # Eq. 7's ε: N(0, σ_ε²) from the (seed, "fedimpro-noise", round, client) stream, first for μ, then for σ
    from fedbench.seeding import torch_generator

    stream = torch_generator(spec.seed, "fedimpro-noise", 3, 2)
    eps_mu, eps_sigma = torch.randn(10, 128, generator=stream), torch.randn(10, 128, generator=stream)
    assert torch.allclose(update.extra["mu"], server.state["mu"] + 0.05 * eps_mu, rtol=0, atol=F64_ATOL)
    expected_sigma = (server.state["sigma"] + 0.05 * eps_sigma).clamp_min(0)
    assert torch.allclose(update.extra["sigma"], expected_sigma, rtol=0, atol=F64_ATOL)


def test_noise_changes_statistics_not_the_first_round_weights(tmp_path, sink):
    from conftest import ListSink

    spec = RunSpec(algorithm="fedimpro", **{**BASE, "rounds": 1})
    _, clean = final(spec, tmp_path, sink)
    _, noisy = final(spec.model_copy(update={"algorithm_params": {"noise_std": 0.1}}), tmp_path, ListSink())
    assert torch.equal(clean["server"]["params"], noisy["server"]["params"])
    assert not torch.equal(clean["server"]["state"]["mu"], noisy["server"]["state"]["mu"])


def test_resume_gives_the_same_curve(tmp_path, sink):
    from algorithm_fixtures import run_until
    from conftest import ListSink

    spec = RunSpec(algorithm="fedimpro", algorithm_params={"feature_weight_sched": "constant"}, **BASE)
    _, whole = final(spec, tmp_path / "a", sink)
    path = tmp_path / "b.pt"
    resumed = ListSink()
    run_until(spec, resumed, 1, EngineOptions(checkpoint_path=path))
    run(spec, resumed, EngineOptions(checkpoint_path=path))
    assert [r.test_acc for r in resumed.records] == [r.test_acc for r in sink.records]
    assert torch.equal(
        load_checkpoint(path, spec.spec_hash, torch.device("cpu"))["server"]["state"]["mu"],
        whole["server"]["state"]["mu"],
    )


def test_unknown_split_is_a_config_error():
    with pytest.raises(
        ConfigError,
        match=r"^fedimpro: model 'digits_cnn' has no split point 'layer2'; known split points: pool, hidden "
        r"\(set algorithm_params.split\)$",
    ):
        bound({}, split="layer2")
    # a model without named cuts (and so without a default split)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 10))
    algorithm = build_algorithm("fedimpro", {})
    spec = RunSpec(algorithm="fedimpro", **{k: v for k, v in BASE.items() if k != "model_params"}, model_params={})
    with pytest.raises(ConfigError, match=r"has no split point None; known split points: none \("):
        algorithm.bind_model(spec, model, SHAPE, 10)


def test_resnet18_split_shapes_and_upload_size():
    algorithm = build_algorithm("fedimpro", {})
    model = build_model("resnet18", 10, (3, 32, 32))
    algorithm.bind_model(RunSpec(algorithm="fedimpro", dataset="cifar10", model="resnet18"), model, (3, 32, 32), 10)
    assert algorithm.split == "layer2" and algorithm.feature_shape == (128, 16, 16)  # spec §1.3: D = 32,768
    assert algorithm.extra_upload_floats(0) == 2 * 10 * 32_768  # spec §1.11
    # the static overhead table builds methods without a model: no feature size is known, none is counted
    assert build_algorithm("fedimpro", {}).extra_upload_floats(0) == 0


def test_cli_run_improves_accuracy(tmp_path):
    recipe = tmp_path / "fedimpro_digits.toml"
    recipe.write_text(
        textwrap.dedent("""
        paper = "fedimpro"
        name = "fedimpro_digits_test"
        [setup]
        algorithm = "fedimpro"
        algorithm_params = { feature_weight_sched = "constant" }
        dataset = "digits"
        model = "digits_cnn"
        model_params = { width = 8, hidden = 32 }
        partition = "dirichlet"
        partition_params = { alpha = 0.5, min_size = 5 }
        num_clients = 4
        clients_per_round = 2
        rounds = 4
        batch_size = 32
        optimizer = { lr = 0.05, momentum = 0.9 }
    """)
    )
    runner = CliRunner()
    registry = f"sqlite:///{tmp_path / 'r.db'}"
    result = runner.invoke(app, ["run", str(recipe), "--registry", registry])
    assert result.exit_code == 0, result.output
    from fedbench.registry import Registry

    reg = Registry(registry)
    (row,) = reg.runs()
    curve = [r.test_acc for r in reg.curves([row.id])[row.id]]
    assert curve[-1] > max(0.5, curve[0] + 0.2)


# ------------------------------------------------------------------------------------ Eq. 5–6 by hand
@pytest.mark.usefixtures("float64")
@pytest.mark.parametrize("sample_from", ["local", "global"])
def test_two_local_steps_follow_eq5_and_eq6_by_hand(sample_from):
    """σ0 = 0 makes every ĥ its class mean, so two full-batch SGD steps can be written out: step k minimises
    CE(high(low(x)), y) + λ·CE(high(μ⁽ᵏ⁾_ŷ), ŷ), ŷ = 0..C−1 repeated to ⌊B/C⌋+1 per class, λ = fw·e/T with
    e = (round − 1)·E; after each step μ_c ← (1 − w)μ_c + w·mean_{y=c} low(x) (Eq. 6, w = 1 − β_m). Sampling
    from the local copy ([code]) sees that update in step 2; from H^r ([paper] Alg. 1) it does not."""
    import copy

    params = {
        "sigma0": 0.0,
        "stat_weight": "beta",
        "beta_m": 0.4,
        "feature_weight": 0.7,
        "feature_weight_epochs": 8,
        "sample_from": sample_from,
    }
    algorithm, model, spec, server = bound(params)
    setup = {k: v for k, v in BASE.items() if k not in ("model_params", "optimizer", "batch_size")}
    spec = RunSpec(
        algorithm="fedimpro",
        algorithm_params={"split": "pool", **params},
        **setup,
        local_epochs=2,
        batch_size=8,
        optimizer={"lr": 0.2},  # plain SGD
    )
    mu0 = server.state["mu"].clone()
    from fedbench.data.store import TensorData

    torch.manual_seed(3)
    x, y = torch.randn(8, *SHAPE), torch.tensor([0, 1, 1, 4, 4, 4, 9, 0])
    reference = copy.deepcopy(model)
    ctx = ClientContext(
        spec=spec,
        client_id=0,
        round_index=3,
        model=model,
        server=server,
        payload=algorithm.payload(server, 3),
        state={},
        data=TensorData(x, y, x, y),
        indices=torch.arange(8),
        generator=torch.Generator().manual_seed(0),
        device=torch.device("cpu"),
        lr=0.2,
    )
    update = algorithm.local_train(ctx)

    lam = 0.7 * ((3 - 1) * 2) / 8  # λ(e) = fw·e/T, e = (r − 1)·E (the [code] "gradual" schedule)
    fake_labels = torch.arange(10).repeat(8 // 10 + 1)
    mu = mu0.clone()
    for _ in range(2):  # E = 2 epochs of one full batch
        fake = (mu if sample_from == "local" else mu0)[fake_labels].view(-1, *algorithm.feature_shape)
        h = reference.low(x, "pool")
        loss = F.cross_entropy(reference.high(h, "pool"), y) + lam * F.cross_entropy(
            reference.high(fake, "pool"), fake_labels
        )
        grads = torch.autograd.grad(loss, list(reference.parameters()))
        with torch.no_grad():
            for p, g in zip(reference.parameters(), grads):
                p.sub_(0.2 * g)
            flat = h.detach().flatten(1)
            for c in y.unique():
                mu[c] = 0.4 * mu[c] + 0.6 * flat[y == c].mean(0)
    expected = torch.nn.utils.parameters_to_vector(reference.parameters()).detach()
    assert torch.allclose(update.params, expected, rtol=0, atol=F64_ATOL)
    assert torch.allclose(update.extra["mu"], mu, rtol=0, atol=F64_ATOL)
    assert torch.equal(update.extra["sigma"], torch.zeros_like(mu))  # σ clipped at σ0 = 0


@pytest.mark.usefixtures("float64")
def test_count_statistics_weight_is_min_one_class_count_over_the_reference():
    """``stat_weight = "count"``: w_c = min(1, n_c/count_ref) per class (Eq. 6's weight from the class count)."""
    algorithm, model, spec, server = bound({"stat_weight": "count", "count_ref": 4, "sigma0": 10.0})
    ctx = context(algorithm, model, spec, server)
    h = torch.randn(7, 128)
    y = torch.tensor([1, 1, 6, 6, 6, 6, 6])  # n_1 = 2 → w = 0.5; n_6 = 5 → w = 1
    algorithm.update_statistics(ctx, h, y)
    mu0, sigma0 = server.state["mu"], server.state["sigma"]
    assert torch.allclose(ctx.scratch["mu"][1], 0.5 * mu0[1] + 0.5 * h[:2].mean(0), rtol=0, atol=F64_ATOL)
    assert torch.allclose(ctx.scratch["mu"][6], h[2:].mean(0), rtol=0, atol=F64_ATOL)
    assert torch.allclose(ctx.scratch["sigma"][1], 0.5 * sigma0[1] + 0.5 * h[:2].std(0), rtol=0, atol=F64_ATOL)
    assert torch.allclose(ctx.scratch["sigma"][6], h[2:].std(0), rtol=0, atol=F64_ATOL)  # below the clip of 10


def test_defaults_are_the_official_codes():
    """Spec §1.10: σ0 = 0.1 (init and clip), the [code] statistics weight with its D/5000 rule (β_m = 0.9 only for
    the "beta" rule), β_g = 0, no noise, sampling from the local copy, λ = e/500 uncapped with weight 1."""
    assert build_algorithm("fedimpro", {}).params.model_dump() == {
        "split": None,
        "sigma0": 0.1,
        "clip_sigma": True,
        "stat_weight": "code",
        "beta_m": 0.9,
        "count_ref": 5000,
        "beta_g": 0.0,
        "noise_std": 0.0,
        "sample_from": "local",
        "feature_weight": 1.0,
        "feature_weight_sched": "gradual",
        "feature_weight_epochs": 500,
        "regularizers": (),
    }


@pytest.mark.parametrize(
    "accepted, rejected",
    [
        ({"sigma0": 0.0}, {"sigma0": -1e-9}),
        ({"beta_m": 0.0}, {"beta_m": -1e-9}),
        ({"beta_m": 1.0}, {"beta_m": 1.0 + 1e-9}),
        ({"count_ref": 1}, {"count_ref": 0}),
        ({"beta_g": 0.0}, {"beta_g": -1e-9}),
        ({"beta_g": 0.999}, {"beta_g": 1.0}),
        ({"noise_std": 0.0}, {"noise_std": -1e-9}),
        ({"feature_weight": 0.0}, {"feature_weight": -1e-9}),
        ({"feature_weight_epochs": 1}, {"feature_weight_epochs": 0}),
    ],
)
def test_parameter_bounds(accepted, rejected):
    from fedbench.algorithms import validate_algorithm_params

    validate_algorithm_params("fedimpro", accepted)
    with pytest.raises(ConfigError, match=next(iter(rejected))):
        validate_algorithm_params("fedimpro", rejected)


@pytest.mark.usefixtures("float64")
def test_estimates_and_samples_come_from_the_run_seeds_streams():
    """H⁰: μ ~ U[0,1)^{C×D} from the run seed's ``fedimpro-init`` stream, σ = σ0 (spec §1.5); ĥ = μ_ŷ + σ_ŷ·ε with ε
    from the (seed, ``fedimpro``, round, client) stream (fedbench.seeding: one named stream per purpose, so every
    result is reproducible from the spec). Another seed gives another H⁰."""
    from fedbench.seeding import torch_generator

    for seed in (0, 7):
        algorithm, model, spec, server = bound({"sigma0": 0.2, "sample_from": "global"}, seed=seed)
        expected_mu = torch.rand(10, 128, generator=torch_generator(seed, "fedimpro-init"))
        assert torch.equal(server.state["mu"], expected_mu) and torch.equal(
            server.state["sigma"], torch.full((10, 128), 0.2)
        )
        ctx = context(algorithm, model, spec, server, round_index=3, client_id=2)
        features, labels = algorithm.sample_features(ctx, 12)
        noise = torch.randn(20, 128, generator=torch_generator(seed, "fedimpro", 3, 2))
        assert torch.allclose(features.flatten(1), expected_mu[labels] + 0.2 * noise, rtol=0, atol=F64_ATOL)
    assert not torch.equal(bound({}, seed=0)[3].state["mu"], bound({}, seed=7)[3].state["mu"])


@pytest.mark.usefixtures("float64")
@pytest.mark.parametrize("local_epochs", [1, 3])
def test_synthetic_weight_follows_the_global_epoch(local_epochs):
    """λ(e) = fw·e/T with e = (round − 1)·E the [code] global epoch at the round's start: one batch's loss is
    CE(high(h), y) + λ·CE(high(ĥ), ŷ), ĥ = μ_ŷ + σ_ŷ·ε for the B = 12 real samples: ŷ = two of each class."""
    from fedbench.seeding import torch_generator

    algorithm, model, spec, server = bound(
        {"sigma0": 0.3, "feature_weight": 0.7, "feature_weight_epochs": 8, "sample_from": "global"}
    )
    spec = spec.model_copy(update={"local_epochs": local_epochs})
    ctx = context(algorithm, model, spec, server, round_index=3)
    torch.manual_seed(2)
    x, y = torch.randn(12, *SHAPE), torch.tensor([0, 3, 3, 9, 1, 1, 2, 5, 5, 5, 8, 0])
    logits = algorithm.forward(ctx, x)
    loss = algorithm.loss(ctx, x, y, logits)
    labels = torch.arange(10).repeat(2)  # ⌊12/10⌋ + 1 = 2 of each class
    noise = torch.randn(20, 128, generator=torch_generator(spec.seed, "fedimpro", 3, 0))
    fake = (server.state["mu"][labels] + 0.3 * noise).view(-1, *algorithm.feature_shape)
    lam = 0.7 * (3 - 1) * local_epochs / 8
    expected = F.cross_entropy(model(x), y) + lam * F.cross_entropy(model.high(fake, "pool"), labels)
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=0, abs=F64_ATOL)


@pytest.mark.usefixtures("float64")
def test_the_fd_regularizer_reads_the_real_batchs_features():
    """Every method accepts the regularizers: FedImpro with ``fd`` (weight w, convex) minimises (1 − w)·L_FedImpro +
    w·(1/d)‖f(x;θ) − f(x;θ_g)‖², f the penultimate features of the real batch. (fedbench 0.1 crashed here: FedImpro's
    forward left no features for the regularizer.)"""
    from fedbench.algorithms.context import SpareModels

    params = {"sigma0": 0.0, "feature_weight_sched": "constant", "regularizers": [{"name": "fd", "weight": 0.2}]}
    algorithm, model, spec, server = bound(params)
    teacher = build_model("digits_cnn", 10, SHAPE, width=4, hidden=16)
    teacher.load_state_dict(model.state_dict())
    ctx = context(algorithm, model, spec, server, round_index=2)
    ctx.spare_models = SpareModels(model)  # the teacher θ_g (the engine keeps these)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))  # the client moved away from θ_g
    torch.manual_seed(4)
    x, y = torch.randn(5, *SHAPE), torch.tensor([1, 2, 2, 7, 0])
    logits = algorithm.forward(ctx, x)
    objective = algorithm.objective(ctx, x, y, logits)
    labels = torch.arange(10)
    fake = ctx.payload["mu"][labels].view(-1, *algorithm.feature_shape)  # σ0 = 0: ĥ = μ_ŷ
    own = F.cross_entropy(model(x), y) + 1.0 * F.cross_entropy(model.high(fake, "pool"), labels)
    fd = F.mse_loss(model.features(x), teacher.eval().features(x))
    assert float(fd.detach()) > 0
    assert float(objective.detach()) == pytest.approx(float((0.8 * own + 0.2 * fd).detach()), rel=0, abs=F64_ATOL)
