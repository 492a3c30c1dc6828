"""Defining properties of the global-FL baselines, each checked against a hand computation or
against the method it must reduce to. Tiny models and 8×8 digits, a few rounds. Where the two sides agree
in exact arithmetic only, the test runs in float64 (``float64`` fixture) and compares to within F64_ATOL."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from algorithm_fixtures import (  # noqa: F401  (fixtures, used through usefixtures)
    LINEAR,
    MLP,
    LinearModel,
    Sink,
    client_context,
    fresh_server,
    head_mlp,
    initial_model,
    initial_params,
    interrupt,
    linear_model,
    make_spec,
    named_slices,
    train,
)
from conftest import F64_ATOL
from fedbench.algorithms import ALGORITHMS, build_algorithm, validate_algorithm_params
from fedbench.algorithms import regularizers as reg
from fedbench.algorithms.base import ClientUpdate, weighted_average
from fedbench.algorithms.context import ServerState, SpareModels
from fedbench.algorithms.fednova import normalizing_factor
from fedbench.data.store import TensorData
from fedbench.errors import ConfigError

pytestmark = pytest.mark.usefixtures("linear_model")

BASELINES = (
    "scaffold",
    "feddyn",
    "moon",
    "fedntd",
    "fednova",
    "slowmo",
    "fedexp",
    "fedbabu",
    "spherefed",
    "fedetf",
    "dot_regression",
)


# ------------------------------------------------------------------------------------------- registry
def test_every_baseline_is_registered_and_accepts_regularizers():
    for name in BASELINES + ("fedavg", "fedprox"):
        assert name in ALGORITHMS
        params = validate_algorithm_params(name, {"regularizers": [{"name": "kd", "weight": 0.1, "tau": 2}]})
        (kd,) = params.regularizers
        assert (kd.name, kd.weight, kd.tau, kd.mode) == ("kd", 0.1, 2.0, "convex")
    assert (
        validate_algorithm_params("fedavg", {"regularizers": [{"name": "prox", "weight": 1}]}).regularizers[0].mode
        == "add"
    )
    with pytest.raises(ConfigError, match="regularizers"):
        validate_algorithm_params("moon", {"regularizers": [{"name": "kdd", "weight": 0.1}]})
    with pytest.raises(ConfigError, match="sum to more than 1"):
        validate_algorithm_params(
            "fedavg", {"regularizers": [{"name": "kd", "weight": 0.6}, {"name": "fd", "weight": 0.6}]}
        )
    with pytest.raises(ConfigError, match="weight"):
        validate_algorithm_params("fedavg", {"regularizers": [{"name": "ld"}]})
    with pytest.raises(ConfigError, match="alpha"):
        validate_algorithm_params("feddyn", {"alpha": 0})
    with pytest.raises(ConfigError, match="variant"):
        validate_algorithm_params("fedexp", {"variant": "nope"})


def test_weighted_average_of_identical_vectors_is_exact():
    v = torch.randn(1000)
    weights = torch.tensor([211.0, 263.0, 496.0], dtype=torch.float64)
    assert torch.equal(weighted_average([v, v.clone(), v.clone()], weights / weights.sum()), v)


# ------------------------------------------------------------------------------------------- SCAFFOLD
def softmax_regression_grad(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, classes: int) -> torch.Tensor:
    """∇ of the mean cross-entropy of softmax regression, by hand, in the flat order (weight, bias)."""
    weight, bias = w[: classes * x.shape[1]].view(classes, -1), w[classes * x.shape[1] :]
    residual = torch.softmax(x @ weight.T + bias, dim=1) - F.one_hot(y, classes).to(w.dtype)
    return torch.cat([(residual.T @ x / len(y)).flatten(), residual.mean(0)])


@pytest.mark.usefixtures("float64")
def test_scaffold_control_variates_follow_option_two_by_hand():
    torch.manual_seed(0)
    classes, dim, steps, lr = 3, 4, 3, 0.1
    x, y = torch.randn(12, dim), torch.randint(0, classes, (12,))
    data = TensorData(x, y, x, y)
    clients = [torch.arange(0, 6), torch.arange(6, 12)]
    # N = 3 clients, 2 sampled: the server's c moves by |S|/N · mean Δc_i. Full-batch steps.
    spec = make_spec(
        "scaffold",
        model=LINEAR,
        num_clients=3,
        clients_per_round=2,
        local_steps=steps,
        batch_size=6,
        optimizer={"lr": lr},
    )
    algorithm = build_algorithm("scaffold", {})
    model = LinearModel(classes, (dim,))
    algorithm.bind_model(spec, model, (dim,), classes)  # as the engine does once: the server step reads N
    server = fresh_server(model)
    algorithm.init_server(server)
    states = [{}, {}]

    w = server.params.clone()  # the hand computation
    c, c_i = torch.zeros_like(w), [torch.zeros_like(w), torch.zeros_like(w)]
    for round_index in (1, 2):
        updates = []
        for k, indices in enumerate(clients):
            ctx = client_context(algorithm, spec, model, server, data, indices, states[k], k, round_index)
            updates.append(algorithm.local_train(ctx))
        algorithm.aggregate(server, updates, round_index)

        trained, deltas = [], []
        for k, indices in enumerate(clients):
            y_k = w.clone()
            for _ in range(steps):  # y ← y − η (g(y) − c_i + c)
                y_k = y_k - lr * (softmax_regression_grad(y_k, x[indices], y[indices], classes) - c_i[k] + c)
            new_c = c_i[k] - c + (w - y_k) / (steps * lr)  # option II
            deltas.append(new_c - c_i[k])
            c_i[k] = new_c
            trained.append(y_k)
        w = (trained[0] + trained[1]) / 2  # equal n_k
        c = c + (2 / 3) * (deltas[0] + deltas[1]) / 2
        for k in range(2):
            assert torch.allclose(states[k]["control"], c_i[k], rtol=0, atol=F64_ATOL), (round_index, k)
        assert torch.allclose(server.state["control"], c, rtol=0, atol=F64_ATOL)
        assert torch.allclose(server.params, w, rtol=0, atol=F64_ATOL)
    assert c.abs().max() > 1e-2  # the controls are not trivially zero


def test_momentum_aware_step_count_is_the_heavy_ball_displacement():
    for momentum in (0.0, 0.5, 0.9):
        for steps in (1, 4, 17):
            w = torch.zeros(1, dtype=torch.float64, requires_grad=True)
            optimizer = torch.optim.SGD([w], lr=0.1, momentum=momentum)
            for _ in range(steps):  # constant gradient 1
                optimizer.zero_grad()
                w.sum().backward()
                optimizer.step()
            assert -w.item() / 0.1 == pytest.approx(normalizing_factor(steps, momentum), rel=0, abs=F64_ATOL)


# ------------------------------------------------------------------------------------------- FedNova
@pytest.mark.usefixtures("float64")
def test_fednova_with_equal_steps_and_no_momentum_equals_fedavg(tmp_path):
    # local_steps makes every client take the same number of steps (FedAvg epochs would not).
    _, fedavg, avg_ckpt = train(make_spec("fedavg", local_steps=4, rounds=3), tmp_path, "a.pt")
    _, fednova, nova_ckpt = train(make_spec("fednova", local_steps=4, rounds=3), tmp_path, "n.pt")
    assert torch.allclose(nova_ckpt["server"]["params"], avg_ckpt["server"]["params"], rtol=0, atol=F64_ATOL)
    assert [r.test_acc for r in fednova.records] == pytest.approx([r.test_acc for r in fedavg.records], abs=0.01)


@pytest.mark.usefixtures("float64")
def test_fednova_normalised_averaging_by_hand():
    torch.manual_seed(1)
    w = torch.randn(50)
    sizes, steps, momentum = [10, 30, 60], [2, 5, 9], 0.9
    updates = [
        ClientUpdate(k, w + torch.randn(50), {}, n, tau, 0.0, {"a": normalizing_factor(tau, momentum)})
        for k, (n, tau) in enumerate(zip(sizes, steps))
    ]
    server = ServerState(w.clone(), {})
    build_algorithm("fednova", {}).aggregate(server, updates, 1)
    p = torch.tensor(sizes, dtype=torch.float64) / sum(sizes)
    a = [(tau - momentum * (1 - momentum**tau) / (1 - momentum)) / (1 - momentum) for tau in steps]
    tau_eff = sum(p[k] * a[k] for k in range(3))
    expected = w - tau_eff * sum(p[k] * (w - updates[k].params) / a[k] for k in range(3))
    assert torch.allclose(server.params, expected, rtol=0, atol=F64_ATOL)
    fedavg = weighted_average([u.params for u in updates], p)
    assert not torch.allclose(server.params, fedavg, atol=1e-3)  # unequal steps: not FedAvg


# ------------------------------------------------------------------------------------------- FedDyn
@pytest.mark.usefixtures("float64")
def test_feddyn_with_vanishing_alpha_trains_clients_as_fedavg(tmp_path):
    """α → 0: the client objective is CE (g_k = 0 in round 1, the prox term vanishes), so round 1's
    client average is FedAvg's; the server then adds −h/α = (|P|/N)(θ̄ − θ^0), which does not vanish.
    (The prox term moves the clients by O(α): about 1e-14 here, well inside F64_ATOL.)"""
    alpha = 1e-12
    common = dict(rounds=1, num_clients=4, clients_per_round=2)
    _, _, fedavg = train(make_spec("fedavg", **common), tmp_path, "a.pt")
    _, _, feddyn = train(make_spec("feddyn", {"alpha": alpha}, **common), tmp_path, "d.pt")
    w0, averaged = initial_params(make_spec("fedavg", **common)), fedavg["server"]["params"]
    assert torch.allclose(feddyn["server"]["params"], averaged + (2 / 4) * (averaged - w0), rtol=0, atol=F64_ATOL)
    assert torch.allclose(feddyn["server"]["state"]["h"] / alpha, -(2 / 4) * (averaged - w0), rtol=0, atol=F64_ATOL)
    sampled = [k for k, state in feddyn["client_states"].items() if "linear" in state]
    assert len(sampled) == 2  # g_k = −α(θ_k − θ^0) is kept for the sampled clients only
    assert all(state["linear"].abs().max() < 1e-8 for state in feddyn["client_states"].values() if state)


@pytest.mark.usefixtures("float64")
def test_feddyn_linear_state_and_loss_gradient():
    torch.manual_seed(2)
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    spec = make_spec("feddyn", {"alpha": 0.5}, model=LINEAR, local_steps=2, batch_size=8, optimizer={"lr": 0.1})
    algorithm = build_algorithm("feddyn", {"alpha": 0.5})
    model = LinearModel(3, (4,))
    server = fresh_server(model)
    algorithm.init_server(server)
    g_k = torch.randn_like(server.params)
    state = {"linear": g_k.clone()}
    ctx = client_context(algorithm, spec, model, server, TensorData(x, y, x, y), torch.arange(8), state)
    algorithm.begin_local(ctx)
    # at θ = θ^{t−1} the prox term has zero gradient: ∇ = ∇CE − g_k
    loss = algorithm.loss(ctx, x, y, model(x))
    grad = torch.cat([g.flatten() for g in torch.autograd.grad(loss, list(model.parameters()))])
    expected = softmax_regression_grad(server.params, x, y, 3) - g_k
    assert torch.allclose(grad, expected, rtol=0, atol=F64_ATOL)
    update = algorithm.local_train(ctx)
    assert torch.allclose(state["linear"], g_k - 0.5 * (update.params - server.params), rtol=0, atol=F64_ATOL)


# ------------------------------------------------------------------------------------------- MOON
def test_moon_with_zero_mu_equals_fedavg_and_keeps_the_previous_model(tmp_path):
    _, fedavg, avg_ckpt = train(make_spec("fedavg", rounds=2), tmp_path, "a.pt")
    _, moon, moon_ckpt = train(make_spec("moon", {"mu": 0.0}, rounds=2), tmp_path, "m.pt")
    assert torch.equal(moon_ckpt["server"]["params"], avg_ckpt["server"]["params"])
    assert [r.test_acc for r in moon.records] == [r.test_acc for r in fedavg.records]
    states = moon_ckpt["client_states"]
    assert len(states) == 4 and all(
        s["previous_params"].shape == avg_ckpt["server"]["params"].shape for s in states.values()
    )
    # the server holds w^0 for clients that never trained
    assert torch.equal(moon_ckpt["server"]["state"]["initial_params"], initial_params(make_spec("moon")))
    _, _, strong = train(make_spec("moon", {"mu": 5.0}, rounds=2), tmp_path, "s.pt")
    assert not torch.allclose(strong["server"]["params"], avg_ckpt["server"]["params"])


# ------------------------------------------------------------------------------------------- FedNTD
def ntd_by_hand(student, teacher, y, tau):
    total = 0.0
    for b in range(len(y)):  # per sample on purpose: an independent reference
        keep = [c for c in range(student.shape[1]) if c != y[b]]
        p_t = torch.softmax(teacher[b, keep] / tau, 0)
        log_p_s = torch.log_softmax(student[b, keep] / tau, 0)
        total += float((p_t * (p_t.log() - log_p_s)).sum())
    return tau**2 * total / len(y)


@pytest.mark.usefixtures("float64")
def test_fedntd_loss_ignores_the_true_class_logit_of_the_teacher():
    torch.manual_seed(3)
    x, y = torch.randn(6, 4), torch.tensor([0, 1, 2, 2, 1, 0])
    student, teacher = torch.randn(6, 3), torch.randn(6, 3)
    algorithm = build_algorithm("fedntd", {"beta": 0.7, "tau": 2.0})

    def loss_with(teacher_logits):
        ctx = type("Ctx", (), {"task": "classification"})()
        ctx.scratch = {"teacher_batch": (x, teacher_logits, None)}  # the per-batch teacher cache
        return algorithm.loss(ctx, x, y, student)

    expected = F.cross_entropy(student, y) + 0.7 * ntd_by_hand(student, teacher, y, 2.0)
    assert float(loss_with(teacher)) == pytest.approx(float(expected), rel=0, abs=F64_ATOL)
    moved = teacher.clone()
    moved[torch.arange(6), y] += torch.randn(6) * 10  # only the teacher's true-class logits
    assert torch.equal(loss_with(moved), loss_with(teacher))  # those logits are dropped: the same arithmetic
    other = teacher.clone()
    other[torch.arange(6), (y + 1) % 3] += 3.0  # a not-true logit does matter
    assert not torch.allclose(loss_with(other), loss_with(teacher), atol=1e-4)


# ------------------------------------------------------------------------------------------- SlowMo
@pytest.mark.usefixtures("float64")
def test_slowmo_with_zero_momentum_and_unit_slow_lr_equals_fedavg(tmp_path):
    _, _, fedavg = train(make_spec("fedavg", rounds=3), tmp_path, "a.pt")
    _, _, slowmo = train(make_spec("slowmo", {"beta": 0.0, "slow_lr": 1.0}, rounds=3), tmp_path, "s.pt")
    assert torch.allclose(slowmo["server"]["params"], fedavg["server"]["params"], rtol=0, atol=F64_ATOL)


@pytest.mark.usefixtures("float64")
def test_slowmo_server_momentum_by_hand():
    torch.manual_seed(4)
    beta, alpha, lr = 0.5, 1.5, 0.05
    algorithm = build_algorithm("slowmo", {"beta": beta, "slow_lr": alpha})
    algorithm.spec = make_spec("slowmo", optimizer={"lr": lr})
    server = ServerState(torch.randn(20), {})
    algorithm.init_server(server)
    w, u = server.params.clone(), torch.zeros(20)
    for round_index in (1, 2):
        updates = [ClientUpdate(k, server.params + 0.1 * torch.randn(20), {}, 10, 3, 0.0) for k in range(2)]
        algorithm.aggregate(server, updates, round_index)
        averaged = (updates[0].params + updates[1].params) / 2
        u = beta * u + (w - averaged) / lr
        w = w - alpha * lr * u
        assert torch.allclose(server.params, w, rtol=0, atol=F64_ATOL)


# ------------------------------------------------------------------------------------------- FedExP
@pytest.mark.usefixtures("float64")
def test_fedexp_server_step_is_at_least_one_in_the_original_rule():
    torch.manual_seed(5)
    algorithm = build_algorithm("fedexp", {"epsilon": 1e-3})
    code_variant = build_algorithm("fedexp", {"variant": "feddrplus_code"})
    code_variant.spec = make_spec("fedexp", num_clients=10, clients_per_round=5)
    for trial in range(40):
        clients = 2 + trial % 4
        w = torch.randn(30)
        spread = [0.0, 0.01, 1.0, 10.0][trial % 4]  # identical updates … nearly orthogonal ones
        common = torch.randn(30)
        updates = [
            ClientUpdate(k, w + common + spread * torch.randn(30), {}, int(torch.randint(5, 50, ())), 2, 0.0)
            for k in range(clients)
        ]
        server = ServerState(w.clone(), {})
        algorithm.aggregate(server, updates, 1)
        p = torch.tensor([u.num_samples for u in updates], dtype=torch.float64)
        p = p / p.sum()
        deltas = [u.params - w for u in updates]
        mean_delta = sum(p[k] * deltas[k] for k in range(clients))
        ratio = sum(p[k] * deltas[k].norm() ** 2 for k in range(clients)) / (2 * (mean_delta.norm() ** 2 + 1e-3))
        eta = float(server.state["server_lr"])
        assert eta >= 1.0 and eta == pytest.approx(max(1.0, float(ratio)), rel=0, abs=F64_ATOL)
        assert torch.allclose(server.params, w + eta * mean_delta, rtol=0, atol=F64_ATOL)
        if spread == 0.0:
            assert eta == 1.0  # identical updates: ratio ½, no extrapolation
        if spread == 10.0:
            assert eta > 1.5  # disagreeing clients: extrapolate
        code_server = ServerState(w.clone(), {})
        code_variant.aggregate(code_server, updates, 1)
        assert float(code_server.state["server_lr"]) <= 1.0


# ------------------------------------------------------------------------------------------- fixed heads
def head_and_body(spec, flat):
    model = initial_model(spec)
    slices = named_slices(model, flat)
    head = set(model.head_parameter_names())
    return ({n: v for n, v in slices.items() if n in head}, {n: v for n, v in slices.items() if n not in head})


def test_fedbabu_head_never_changes_while_the_body_trains(tmp_path):
    spec = make_spec(
        "fedbabu", rounds=3, clients_per_round=2, optimizer={"lr": 0.05, "momentum": 0.9, "weight_decay": 1e-2}
    )
    _, sink, ckpt = train(spec, tmp_path)
    head0, body0 = head_and_body(spec, initial_params(spec))
    head, body = head_and_body(spec, ckpt["server"]["params"])
    assert set(head) == {"classifier.weight", "classifier.bias"}
    assert all(torch.equal(head[n], head0[n]) for n in head)
    assert all(not torch.equal(body[n], body0[n]) for n in body)
    assert sink.records[-1].test_acc > 0.3


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize(
    "algorithm,classifier,lr,frozen",
    [
        ("spherefed", "orthonormal", 1.0, ["classifier.weight"]),
        ("dot_regression", "etf", 1.0, ["classifier.weight"]),
        ("fedetf", "fedetf", 0.5, ["classifier.etf.weight"]),
    ],
)
def test_fixed_classifier_rows_stay_fixed(tmp_path, algorithm, classifier, lr, frozen):
    spec = make_spec(
        algorithm,
        model=MLP,
        model_params={"classifier": classifier},
        rounds=3,
        optimizer={"lr": lr, "momentum": 0.9, "weight_decay": 1e-3},
    )
    _, sink, ckpt = train(spec, tmp_path)
    head0, _ = head_and_body(spec, initial_params(spec))
    head, _ = head_and_body(spec, ckpt["server"]["params"])
    assert sorted(n for n in head if torch.equal(head[n], head0[n])) == frozen
    rows = head[frozen[0]].view(head[frozen[0]].shape[0], -1)
    assert torch.allclose(rows.norm(dim=1), torch.ones(len(rows)), rtol=0, atol=F64_ATOL)
    if algorithm == "fedetf":  # the projection and the temperature are trained
        assert not torch.equal(head["classifier.projection.weight"], head0["classifier.projection.weight"])
        assert not torch.equal(head["classifier.temperature"], head0["classifier.temperature"])
    assert sink.records[-1].test_acc > 0.3


@pytest.mark.usefixtures("head_mlp")
@pytest.mark.parametrize(
    "algorithm,classifier", [("spherefed", "linear"), ("dot_regression", "orthonormal"), ("fedetf", "etf")]
)
def test_fixed_classifier_methods_name_the_model_setting_they_need(tmp_path, algorithm, classifier):
    spec = make_spec(algorithm, model=MLP, model_params={"classifier": classifier}, rounds=1)
    wanted = {"spherefed": "orthonormal", "dot_regression": "etf", "fedetf": "fedetf"}[algorithm]
    with pytest.raises(ConfigError, match=f"model_params.classifier = '{wanted}'"):
        train(spec, tmp_path)


@pytest.mark.usefixtures("float64")
def test_fedetf_balanced_softmax_uses_local_class_counts():
    algorithm = build_algorithm("fedetf", {"beta": 1.0})
    logits = torch.randn(4, 3)
    y = torch.tensor([0, 0, 1, 1])
    ctx = type("Ctx", (), {})()
    ctx.scratch = {"log_prior": torch.tensor([3.0, 1.0, 0.0]).log()}  # class 2 absent locally
    by_hand = -torch.log(
        torch.stack([3 * logits[b, 0].exp() if y[b] == 0 else logits[b, 1].exp() for b in range(4)])
        / (3 * logits[:, 0].exp() + logits[:, 1].exp())
    ).mean()
    assert float(algorithm.loss(ctx, None, y, logits)) == pytest.approx(float(by_hand), rel=0, abs=F64_ATOL)


# ------------------------------------------------------------------------------------------- regularizers
@pytest.mark.usefixtures("float64")
def test_regularizer_terms():
    torch.manual_seed(6)
    z, z_g, y = torch.randn(5, 4), torch.randn(5, 4), torch.tensor([0, 1, 2, 3, 0])
    for term in (reg.logit_matching, reg.feature_distillation):
        assert float(term(z, z)) == 0.0 and float(term(z, z_g)) > 0
    assert float(reg.logit_matching(z, z_g)) == pytest.approx(float(((z - z_g) ** 2).sum() / 20), rel=0, abs=F64_ATOL)
    assert float(reg.distillation(z, z, 3.0)) == pytest.approx(0.0, abs=F64_ATOL)
    kd = (
        sum(
            float(
                (
                    torch.softmax(z_g[b] / 3, 0) * (torch.log_softmax(z_g[b] / 3, 0) - torch.log_softmax(z[b] / 3, 0))
                ).sum()
            )
            for b in range(5)
        )
        * 9
        / 5
    )
    assert float(reg.distillation(z, z_g, 3.0)) == pytest.approx(kd, rel=0, abs=F64_ATOL)
    assert float(reg.not_true_distillation(z, z_g, y, 2.0)) == pytest.approx(
        ntd_by_hand(z, z_g, y, 2.0), rel=0, abs=F64_ATOL
    )
    shifted = z.clone()
    shifted[torch.arange(5), y] -= 7.0  # the student's true-class logit does not enter NTD either
    assert torch.equal(reg.not_true_distillation(shifted, z_g, y, 2.0), reg.not_true_distillation(z, z_g, y, 2.0))


@pytest.mark.usefixtures("float64")
def test_objective_combines_regularizers_convex_or_added():
    torch.manual_seed(7)
    x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
    params = {
        "regularizers": [
            {"name": "ld", "weight": 0.2},
            {"name": "prox", "weight": 0.5},
            {"name": "fd", "weight": 0.1, "combine": "add"},
        ]
    }
    algorithm = build_algorithm("fedavg", params)
    spec = make_spec("fedavg", params, model=LINEAR, optimizer={"lr": 0.1})
    model = LinearModel(3, (4,))
    server = fresh_server(model)
    ctx = client_context(algorithm, spec, model, server, TensorData(x, y, x, y), torch.arange(8), {})
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))  # move away from the teacher θ_g
        logits = algorithm.forward(ctx, x)
        teacher = ctx.global_model()
        prox = 0.5 * sum(((p - g) ** 2).sum() for p, g in zip(model.parameters(), teacher.parameters()))
        expected = (
            0.8 * F.cross_entropy(logits, y)
            + 0.2 * F.mse_loss(logits, teacher(x))
            + 0.5 * prox
            + 0.1 * F.mse_loss(x, x)
        )  # the linear model's features are its inputs
        assert float(algorithm.objective(ctx, x, y, logits)) == pytest.approx(float(expected), rel=0, abs=F64_ATOL)


@pytest.mark.usefixtures("head_mlp")
@pytest.mark.parametrize(
    "base,name",
    [
        ("fedavg", "prox"),
        ("fedavg", "kd"),
        ("fedavg", "ntd"),
        ("fedavg", "ld"),
        ("fedavg", "fd"),
        ("dot_regression", "fd"),
        ("scaffold", "kd"),
    ],
)
def test_regularizer_with_weight_zero_equals_its_base_method(tmp_path, base, name):
    model_params = {"classifier": "etf" if base == "dot_regression" else "linear"}
    setup = dict(
        rounds=2,
        clients_per_round=2,
        model=MLP,
        model_params=model_params,
        optimizer={"lr": 1.0 if base == "dot_regression" else 0.05, "momentum": 0.5},
    )
    _, plain_sink, plain = train(make_spec(base, **setup), tmp_path, "plain.pt")
    zero = {"regularizers": [{"name": name, "weight": 0.0}]}
    _, zero_sink, zeroed = train(make_spec(base, zero, **setup), tmp_path, "zero.pt")
    assert torch.equal(zeroed["server"]["params"], plain["server"]["params"])
    assert [r.train_loss for r in zero_sink.records] == [r.train_loss for r in plain_sink.records]
    some = {"regularizers": [{"name": name, "weight": 0.3}]}
    _, _, weighted = train(make_spec(base, some, **setup), tmp_path, "some.pt")
    assert not torch.allclose(weighted["server"]["params"], plain["server"]["params"], atol=1e-6)


# ------------------------------------------------------------------------------------------- resume
@pytest.mark.parametrize(
    "algorithm,params", [("scaffold", {}), ("feddyn", {"alpha": 0.1}), ("moon", {"mu": 1.0}), ("slowmo", {"beta": 0.9})]
)
def test_stateful_methods_resume_after_interrupt_exactly(tmp_path, algorithm, params):
    spec = make_spec(algorithm, params, rounds=4, num_clients=5, clients_per_round=3)
    _, straight, whole = train(spec, tmp_path, "whole.pt")
    sink = Sink()
    interrupt(spec, tmp_path, 2, "split.pt", sink=sink)
    result, _, split = train(spec, tmp_path, "split.pt", sink=sink)
    assert result.status == "done" and result.info["resumed_from"] == 2
    assert torch.equal(split["server"]["params"], whole["server"]["params"])
    for key, value in whole["server"]["state"].items():
        other = split["server"]["state"][key]
        assert torch.equal(other, value) if isinstance(value, torch.Tensor) else other.keys() == value.keys()
    assert whole["client_states"].keys() == split["client_states"].keys()
    for client, state in whole["client_states"].items():
        for key, value in state.items():
            if isinstance(value, torch.Tensor):
                assert torch.equal(split["client_states"][client][key], value), (client, key)
    assert [(r.round, r.test_acc, r.train_loss) for r in sink.records] == [
        (r.round, r.test_acc, r.train_loss) for r in straight.records
    ]


def test_spare_frozen_models_are_shared_not_copied_per_client(tmp_path):
    """MOON and the teacher regularizers use two spare instances for the whole run (no deep copies per
    client): the previous-model slot and the global-model slot."""
    created = []
    original = SpareModels.load

    def counting(self, slot, params, buffers):
        if slot not in self.slots:
            created.append(slot)
        return original(self, slot, params, buffers)

    SpareModels.load = counting
    try:
        train(make_spec("moon", {"regularizers": [{"name": "kd", "weight": 0.1}]}, rounds=2), tmp_path)
    finally:
        SpareModels.load = original
    assert sorted(created) == ["global", "moon_previous"]
