"""Every defining formula of the global-FL methods, against a hand computation.

On softmax regression (a 2-layer MLP for MOON) with a few float64 samples and fixed weights, each test writes
the paper's equation in plain torch arithmetic (the gradient of the cross-entropy by hand, SGD with momentum by
hand) and compares it with what fedbench gives through its real hooks (``local_train``, ``aggregate``,
``payload``), in float64 to within F64_ATOL. Every option of each method is exercised in a setting where it
matters (η_g ≠ 1, momentum, unequal sizes and step counts, a client that skipped rounds), not only the
degenerate one where the method equals FedAvg.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from algorithm_fixtures import (  # noqa: F401  (linear_model: a fixture, used through usefixtures)
    LINEAR,
    HeadMLP,
    LinearModel,
    client_context,
    fresh_server,
    initial_model,
    linear_model,
    make_spec,
    train,
)
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import weighted_average
from fedbench.algorithms.context import ClientUpdate, ServerState, load_weights
from fedbench.data.store import TensorData

pytestmark = pytest.mark.usefixtures("linear_model", "float64")

CLASSES, DIM = 3, 4


# ------------------------------------------------------------------------------------------- by-hand pieces
def split(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(weight C×d, bias C) of softmax regression's flat vector (parameters_to_vector order)."""
    return w[: CLASSES * DIM].view(CLASSES, DIM), w[CLASSES * DIM :]


def ce_value(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of softmax regression: mean_b [log Σ_c e^{z_bc} − z_{b,y_b}]."""
    weight, bias = split(w)
    z = x @ weight.T + bias
    return (torch.logsumexp(z, dim=1) - z[torch.arange(len(y)), y]).mean()


def ce_grad(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """∇ of ``ce_value``: (softmax(z) − onehot(y))ᵀ x / B for the weight, its mean for the bias."""
    weight, bias = split(w)
    residual = torch.softmax(x @ weight.T + bias, dim=1) - F.one_hot(y, CLASSES).to(w.dtype)
    return torch.cat([(residual.T @ x / len(y)).flatten(), residual.mean(0)])


def heavy_ball(w: torch.Tensor, grad, steps: int, lr: float, momentum: float = 0.0) -> torch.Tensor:
    """``steps`` steps of SGD with heavy-ball momentum as torch.optim.SGD takes them (dampening 0):
    b ← g on the first step, b ← ρ·b + g after; w ← w − η·b. ``grad(w)`` is the (corrected) gradient."""
    buffer = None
    for _ in range(steps):
        g = grad(w)
        buffer = g.clone() if buffer is None else momentum * buffer + g
        w = w - lr * buffer
    return w


def step_weight_norm(steps: int, momentum: float) -> float:
    """Σ_{k=1..τ} Σ_{j=0..k−1} ρ^j: how far τ heavy-ball steps move along a constant unit gradient, in lr
    units (FedNova App., SCAFFOLD's effective K), summed term by term rather than in closed form."""
    return float(sum(sum(momentum**j for j in range(k)) for k in range(1, steps + 1)))


def problem(seed: int, samples: int = 10):
    torch.manual_seed(seed)
    x, y = torch.randn(samples, DIM), torch.randint(0, CLASSES, (samples,))
    y[:CLASSES] = torch.arange(CLASSES)  # every class present
    return x, y, TensorData(x, y, x, y)


def server_and_model(algorithm, spec, seed: int = 0):
    torch.manual_seed(seed)
    model = LinearModel(CLASSES, (DIM,))
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5)  # away from 0: w and −w differ (a sign error cannot hide)
    algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    algorithm.init_server(server)
    return model, server


def close(actual: torch.Tensor, expected: torch.Tensor) -> bool:
    return torch.allclose(actual, expected, rtol=0, atol=F64_ATOL)


# ------------------------------------------------------------------------------------------- FedProx
def test_fedprox_proximal_term_value_and_gradient_by_hand():
    """FedProx Eq. 2: h(w) = F(w) + (μ/2)‖w − w^t‖² — the ½, the square and the sign (towards w^t)."""
    mu = 0.3
    x, y, data = problem(0)
    spec = make_spec("fedprox", {"mu": mu}, model=LINEAR, local_steps=1, batch_size=64)
    algorithm = build_algorithm("fedprox", {"mu": mu})
    model, server = server_and_model(algorithm, spec)
    ctx = client_context(algorithm, spec, model, server, data, torch.arange(len(y)), {})
    algorithm.begin_local(ctx)
    delta = torch.linspace(-0.7, 0.9, server.params.numel())
    w = server.params + delta
    load_weights(model, w)
    loss = algorithm.loss(ctx, x, y, model(x))
    assert float(loss.detach()) == pytest.approx(
        float(ce_value(w, x, y) + 0.5 * mu * (delta**2).sum()), rel=0, abs=F64_ATOL
    )
    grad = torch.cat([g.flatten() for g in torch.autograd.grad(loss, list(model.parameters()))])
    assert close(grad, ce_grad(w, x, y) + mu * delta)  # ∇ = ∇F + μ(w − w^t)


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_fedprox_client_update_by_hand(momentum):
    mu, lr, steps = 0.5, 0.2, 4
    x, y, data = problem(1)
    spec = make_spec(
        "fedprox",
        {"mu": mu},
        model=LINEAR,
        local_steps=steps,
        batch_size=64,
        optimizer={"lr": lr, "momentum": momentum},
    )
    algorithm = build_algorithm("fedprox", {"mu": mu})
    model, server = server_and_model(algorithm, spec)
    w_global = server.params.clone()
    update = algorithm.local_train(client_context(algorithm, spec, model, server, data, torch.arange(len(y)), {}))
    expected = heavy_ball(w_global, lambda w: ce_grad(w, x, y) + mu * (w - w_global), steps, lr, momentum)
    assert close(update.params, expected)
    plain = heavy_ball(w_global, lambda w: ce_grad(w, x, y), steps, lr, momentum)
    assert (expected - w_global).norm() < (plain - w_global).norm()  # the term pulls towards w^t


# ------------------------------------------------------------------------------------------- SCAFFOLD
SCAFFOLD_OPTIONS = [
    {"server_lr": 0.5, "control_update": "paper", "momentum_corrected_steps": True},
    {"server_lr": 1.0, "control_update": "mean", "momentum_corrected_steps": False},
    {"server_lr": 1.7, "control_update": "paper", "momentum_corrected_steps": False},
    {"server_lr": 1.0, "control_update": "paper", "momentum_corrected_steps": True},
]


@pytest.mark.parametrize("options", SCAFFOLD_OPTIONS, ids=lambda o: "-".join(str(v) for v in o.values()))
def test_scaffold_two_rounds_by_hand(options):
    """SCAFFOLD Alg. 1 with client momentum ρ: local steps on g − c_i + c (through the momentum buffer),
    option II control c_i⁺ = c_i − c + (x − y_i)/(K·η) with K the heavy-ball step-weight norm when
    ``momentum_corrected_steps`` (else the step count), server x ← x + η_g(Σp_i y_i − x) and
    c ← c + f·mean_i Δc_i with f = |S|/N ("paper") or 1 ("mean"). N = 5, |S| = 2, unequal sizes."""
    lr, momentum, steps, num_clients = 0.1, 0.5, 3, 5
    x, y, data = problem(2, samples=12)
    clients = [torch.arange(0, 4), torch.arange(4, 12)]  # n = 4 and 8: p = 1/3, 2/3
    spec = make_spec(
        "scaffold",
        options,
        model=LINEAR,
        num_clients=num_clients,
        clients_per_round=2,
        local_steps=steps,
        batch_size=64,
        optimizer={"lr": lr, "momentum": momentum},
    )
    algorithm = build_algorithm("scaffold", options)
    model, server = server_and_model(algorithm, spec)
    states = [{}, {}]
    eta_g, fraction = options["server_lr"], (2 / num_clients if options["control_update"] == "paper" else 1.0)
    k_eff = step_weight_norm(steps, momentum) if options["momentum_corrected_steps"] else float(steps)

    w, c = server.params.clone(), torch.zeros_like(server.params)
    c_i = [torch.zeros_like(w), torch.zeros_like(w)]
    for round_index in (1, 2):
        updates = [
            algorithm.local_train(client_context(algorithm, spec, model, server, data, idx, states[k], k, round_index))
            for k, idx in enumerate(clients)
        ]
        algorithm.aggregate(server, updates, round_index)

        trained, deltas = [], []
        for k, idx in enumerate(clients):
            correction = c - c_i[k]
            y_k = heavy_ball(w, lambda v, i=idx, cc=correction: ce_grad(v, x[i], y[i]) + cc, steps, lr, momentum)
            new_c = c_i[k] - c + (w - y_k) / (k_eff * lr)
            deltas.append(new_c - c_i[k])
            c_i[k] = new_c
            trained.append(y_k)
            assert close(updates[k].params, y_k), (round_index, k)
        averaged = (1 / 3) * trained[0] + (2 / 3) * trained[1]
        w = w + eta_g * (averaged - w)
        c = c + fraction * (deltas[0] + deltas[1]) / 2
        assert close(server.params, w), round_index
        assert close(algorithm.payload(server, round_index + 1)["control"], c), round_index
    assert c.abs().max() > 1e-2  # the controls are not trivially zero


@pytest.mark.parametrize("eta_g", [1.0, 2.0])
def test_scaffold_server_step_and_buffers(eta_g):
    """Alg. 1 line 16 on fixed updates: x + η_g(Σ p_i y_i − x); with η_g = 1 exactly the weighted average (bit for
    bit in float32, so the default reproduces plain averaging); buffers are sample-weighted averages."""
    algorithm = build_algorithm("scaffold", {"server_lr": eta_g})
    spec = make_spec("scaffold", {"server_lr": eta_g}, model=LINEAR)
    algorithm.bind_model(spec, LinearModel(CLASSES, (DIM,)), (DIM,), CLASSES)
    generator = torch.Generator().manual_seed(11)
    x = torch.randn(40, generator=generator, dtype=torch.float32)
    server = ServerState(x.clone(), {"bn.running_var": torch.tensor([1.0, 2.0])})
    algorithm.init_server(server)
    updates = [
        ClientUpdate(
            k,
            x + torch.randn(40, generator=generator, dtype=torch.float32),
            {"bn.running_var": torch.tensor([3.0, 0.0]) * (k + 1)},
            n,
            2,
            0.0,
            {"control_delta": torch.zeros(40, dtype=torch.float32)},
        )
        for k, n in enumerate((10, 30))
    ]
    algorithm.aggregate(server, updates, 1)
    averaged = 0.25 * updates[0].params + 0.75 * updates[1].params
    assert torch.allclose(server.params, x + eta_g * (averaged - x), rtol=0, atol=1e-5)
    if eta_g == 1.0:  # FedAvg's own average, to the bit (not x + 1·(ȳ − x), which rounds differently)
        fedavg = weighted_average([u.params for u in updates], torch.tensor([0.25, 0.75], dtype=torch.float64))
        assert torch.equal(server.params, fedavg)
    assert torch.allclose(server.buffers["bn.running_var"], torch.tensor([0.25 * 3 + 0.75 * 6, 0.0]))


def test_scaffold_with_adam_divides_by_the_step_count():
    """The heavy-ball correction applies to SGD momentum only: under Adam, K is the number of steps.
    One step of Adam from zero moments moves each coordinate by −η·g/(|g| + ε') ≈ −η·sign(g)."""
    lr, steps = 0.01, 1
    x, y, data = problem(3)
    spec = make_spec(
        "scaffold", {}, model=LINEAR, local_steps=steps, batch_size=64, optimizer={"name": "adam", "lr": lr}
    )
    algorithm = build_algorithm("scaffold", {})
    model, server = server_and_model(algorithm, spec)
    w = server.params.clone()
    update = algorithm.local_train(client_context(algorithm, spec, model, server, data, torch.arange(len(y)), {}))
    g = ce_grad(w, x, y)
    m_hat, v_hat = g, g**2  # bias-corrected first and second moments after one step
    y_1 = w - lr * m_hat / (v_hat.sqrt() + 1e-8)
    assert close(update.params, y_1)
    algorithm.aggregate(server, [update], 1)
    # c = (1/N)·Δc with Δc = (w − y_1)/(1·η); N = 4 clients in make_spec
    assert close(algorithm.payload(server, 2)["control"], (1 / 4) * (w - y_1) / (steps * lr))


def test_scaffold_client_without_samples_keeps_its_control_and_sends_a_zero_delta():
    """Eq. (4)'s (x − y_i)/(Kη) is undefined for K = 0: a client with no training sample keeps c_i and counts as
    Δc_i = 0 in Alg. 1 line 17 (it was NaN, which then spread to c and every client)."""
    lr = 0.1
    x, y, data = problem(3)
    spec = make_spec("scaffold", {}, model=LINEAR, local_steps=1, batch_size=64, optimizer={"lr": lr})
    algorithm = build_algorithm("scaffold", {})
    model, server = server_and_model(algorithm, spec)
    w = server.params.clone()
    busy = algorithm.local_train(client_context(algorithm, spec, model, server, data, torch.arange(len(y)), {}))
    state: dict = {}
    idle = algorithm.local_train(client_context(algorithm, spec, model, server, data, torch.arange(0), state, 1))
    assert idle.num_steps == 0 and torch.equal(idle.params, w)
    assert torch.equal(idle.extra["control_delta"], torch.zeros_like(w))
    assert torch.equal(state["control"], torch.zeros_like(w))  # c_i as it was (its first round: 0)
    algorithm.aggregate(server, [busy, idle], 1)
    # c = (|S|/N)·mean(Δc_busy, 0) with Δc_busy = (w − y_1)/(1·η); |S| = 2 of N = 4 clients (make_spec)
    y_1 = w - lr * ce_grad(w, x, y)
    assert close(algorithm.payload(server, 2)["control"], (2 / 4) * 0.5 * (w - y_1) / lr)


def test_scaffold_costs_follow_table_viii():
    """Table VIII: SCAFFOLD communicates 2|w| more per round (c down, Δc up); its attaching computation is
    2(K+1)|w| without option I's n(FP+BP) full-batch gradient (option II is implemented)."""
    algorithm = build_algorithm("scaffold", {})
    assert algorithm.extra_upload_floats(1234) == 1234 and algorithm.extra_download_floats(1234) == 1234
    flops = algorithm.attach_flops_per_round(
        steps=7, samples=300, batch_size=50, num_params=1234, forward_flops=11.0, backward_flops=13.0
    )
    assert flops == 2 * (7 + 1) * 1234


def test_engine_counts_the_bytes_of_scaffold_and_fedavg(tmp_path):
    """bytes_up/bytes_down per round = |S| × 4 bytes × (|w| + the method's extra floats)."""
    for name, extra in (("fedavg", 0), ("scaffold", 1)):
        spec = make_spec(name, rounds=1, clients_per_round=3)
        _, sink, _ = train(spec, tmp_path, f"{name}.pt")
        params = sum(p.numel() for p in initial_model(spec).parameters())
        (record,) = sink.records
        assert record.bytes_up == record.bytes_down == 3 * 4 * params * (1 + extra)


# ------------------------------------------------------------------------------------------- FedTrip
FEDTRIP_OPTIONS = [
    {"mu": 0.4, "epoch_scaled": False, "xi_rule": "inverse_gap"},
    {"mu": 0.4, "epoch_scaled": True, "xi_rule": "inverse_gap"},
    {"mu": 0.6, "epoch_scaled": True, "xi_rule": "gap"},
    {"mu": 0.6, "epoch_scaled": False, "xi_rule": "const"},
    {"mu": 0.0, "epoch_scaled": False, "xi_rule": "inverse_gap"},
    {"mu": 1.0, "epoch_scaled": False, "xi_rule": "inverse_gap"},  # the MLP experiments' μ (spec §1.5)
    {"mu": 2.0, "epoch_scaled": True, "xi_rule": "inverse_gap"},  # μ/E = 1
]


@pytest.mark.parametrize("options", FEDTRIP_OPTIONS, ids=lambda o: "-".join(str(v) for v in o.values()))
def test_fedtrip_three_rounds_by_hand(options):
    """FedTrip Eq. 5 gradient ∇F(w) + μ'(w − w^t) − μ'ξ(w − w_hist), with μ' = μ/E when ``epoch_scaled``
    (E = 2 local epochs here), ξ from the gap t − τ_k, w_hist the client's last uploaded model (w^0 before its
    first participation). Client 0 trains in rounds 1 and 3 (gap 2), client 1 in rounds 1, 2 and 3."""
    lr, momentum, epochs = 0.1, 0.9, 2
    x, y, data = problem(4, samples=12)
    clients = [torch.arange(0, 5), torch.arange(5, 12)]
    spec = make_spec(
        "fedtrip", options, model=LINEAR, local_epochs=epochs, batch_size=64, optimizer={"lr": lr, "momentum": momentum}
    )
    algorithm = build_algorithm("fedtrip", options)
    model, server = server_and_model(algorithm, spec)
    mu = options["mu"] / epochs if options["epoch_scaled"] else options["mu"]

    def xi(gap: int) -> float:
        return {"inverse_gap": 1 / gap, "gap": float(gap), "const": 1.0}[options["xi_rule"]]

    w0 = server.params.clone()
    w, history, last = w0.clone(), [w0.clone(), w0.clone()], [0, 0]
    states = [{}, {}]
    for round_index, chosen in ((1, [0, 1]), (2, [1]), (3, [0, 1])):
        updates = [
            algorithm.local_train(
                client_context(algorithm, spec, model, server, data, clients[k], states[k], k, round_index)
            )
            for k in chosen
        ]
        algorithm.aggregate(server, updates, round_index)
        trained = []
        for update, k in zip(updates, chosen):
            idx, hist, coefficient = clients[k], history[k], xi(round_index - last[k])

            def grad(v, idx=idx, hist=hist, coefficient=coefficient, w_t=w):
                return ce_grad(v, x[idx], y[idx]) + mu * (v - w_t) - mu * coefficient * (v - hist)

            # full-batch: one step per epoch
            expected = heavy_ball(w, grad, epochs, lr, momentum)
            assert close(update.params, expected), (round_index, k)
            trained.append(expected)
            history[k], last[k] = expected, round_index
        sizes = torch.tensor([float(len(clients[k])) for k in chosen])
        w = sum((n / sizes.sum()) * t for n, t in zip(sizes, trained))
        assert close(server.params, w), round_index


@pytest.mark.parametrize("epochs, local_steps", [(1, None), (0, 3)])
def test_fedtrip_epoch_scaling_leaves_one_epoch_and_step_budgets_unscaled(epochs, local_steps):
    """μ/E with E = 1 is μ; a step budget with local_epochs = 0 divides by max(1, E) = 1, not by 0."""
    mu, lr = 0.8, 0.1
    x, y, data = problem(10)
    params = {"mu": mu, "epoch_scaled": True}
    spec = make_spec(
        "fedtrip", params, model=LINEAR, local_epochs=epochs, local_steps=local_steps, batch_size=64,
        optimizer={"lr": lr},
    )  # fmt: skip
    algorithm = build_algorithm("fedtrip", params)
    model, server = server_and_model(algorithm, spec)
    w = server.params.clone()
    server.params = w + 0.3  # another global model than w^0, the never-selected client's history
    update = algorithm.local_train(
        client_context(algorithm, spec, model, server, data, torch.arange(len(y)), {}, 0, 2)
    )  # round 2, first participation: gap 2, ξ = 1/2, w_hist = w^0
    w_t = server.params

    def grad(v):
        return ce_grad(v, x, y) + mu * (v - w_t) - mu * 0.5 * (v - w)

    assert close(update.params, heavy_ball(w_t, grad, local_steps or epochs, lr))


def test_fedtrip_costs_follow_table_viii():
    algorithm = build_algorithm("fedtrip", {"mu": 0.4})
    assert algorithm.extra_upload_floats(99) == 0 and algorithm.extra_download_floats(99) == 0
    assert algorithm.attach_flops_per_round(
        steps=12, samples=600, batch_size=50, num_params=79510, forward_flops=79400.0, backward_flops=1.0
    ) == pytest.approx(4 * 12 * 79510, rel=0, abs=0)


# ------------------------------------------------------------------------------------------- FedNova
@pytest.mark.parametrize("momentum", [0.0, 0.5])
def test_fednova_normalises_unequal_local_steps_by_hand(momentum):
    """FedNova Eq. 6–7 through the hooks: client 0 takes τ = 2 steps, client 1 τ = 5 (step budgets); each
    update is divided by its a_i (the ℓ1 norm of its heavy-ball step weights), the sum rescaled by
    τ_eff = Σ p_i a_i. With unequal τ the result is not FedAvg's average."""
    lr, taus = 0.1, (2, 5)
    x, y, data = problem(5, samples=12)
    clients = [torch.arange(0, 3), torch.arange(3, 12)]  # p = 1/4, 3/4
    algorithm = build_algorithm("fednova", {})
    specs = [
        make_spec("fednova", model=LINEAR, local_steps=tau, batch_size=64, optimizer={"lr": lr, "momentum": momentum})
        for tau in taus
    ]
    model, server = server_and_model(algorithm, specs[0])
    w = server.params.clone()
    updates = [
        algorithm.local_train(client_context(algorithm, specs[k], model, server, data, clients[k], {}, k))
        for k in range(2)
    ]
    algorithm.aggregate(server, updates, 1)
    trained = [
        heavy_ball(w, lambda v, i=idx: ce_grad(v, x[i], y[i]), tau, lr, momentum) for idx, tau in zip(clients, taus)
    ]
    p, a = [0.25, 0.75], [step_weight_norm(tau, momentum) for tau in taus]
    tau_eff = p[0] * a[0] + p[1] * a[1]
    expected = w - tau_eff * (p[0] * (w - trained[0]) / a[0] + p[1] * (w - trained[1]) / a[1])
    assert close(server.params, expected)
    assert not torch.allclose(server.params, p[0] * trained[0] + p[1] * trained[1], atol=1e-4)


def test_fednova_under_adam_normalises_by_the_step_counts():
    """Without SGD momentum (Adam) a_i = τ_i: the updates y_i the clients return are combined as
    w − τ_eff Σ p_i (w − y_i)/τ_i with τ_eff = Σ p_i τ_i."""
    x, y, data = problem(9, samples=12)
    clients, taus = [torch.arange(0, 6), torch.arange(6, 12)], (1, 3)
    algorithm = build_algorithm("fednova", {})
    specs = [
        make_spec("fednova", model=LINEAR, local_steps=tau, batch_size=64, optimizer={"name": "adam", "lr": 0.01})
        for tau in taus
    ]
    model, server = server_and_model(algorithm, specs[0])
    w = server.params.clone()
    updates = [
        algorithm.local_train(client_context(algorithm, specs[k], model, server, data, clients[k], {}, k))
        for k in range(2)
    ]
    algorithm.aggregate(server, updates, 1)
    tau_eff = 0.5 * taus[0] + 0.5 * taus[1]
    expected = w - tau_eff * sum(0.5 * (w - u.params) / tau for u, tau in zip(updates, taus))
    assert close(server.params, expected)


@pytest.mark.parametrize("normalize_buffers", [True, False])
def test_fednova_buffers_are_normalised_or_averaged(normalize_buffers):
    w = torch.zeros(3)
    current = {"bn.running_mean": torch.tensor([1.0, -2.0]), "bn.num_batches_tracked": torch.tensor(7)}
    server = ServerState(w.clone(), {k: v.clone() for k, v in current.items()})
    sizes, a = [10, 30], [2.0, 6.0]
    means = [torch.tensor([3.0, 0.5]), torch.tensor([-1.0, 4.0])]
    updates = [
        ClientUpdate(k, w + k + 1, {"bn.running_mean": m, "bn.num_batches_tracked": torch.tensor(9 + k)}, n, 1, 0.0)
        for k, (n, m) in enumerate(zip(sizes, means))
    ]
    for update, a_i in zip(updates, a):
        update.extra["a"] = a_i
    build_algorithm("fednova", {"normalize_buffers": normalize_buffers}).aggregate(server, updates, 1)
    p = [0.25, 0.75]
    if normalize_buffers:
        tau_eff = p[0] * a[0] + p[1] * a[1]
        expected = current["bn.running_mean"] - tau_eff * sum(
            p[k] * (current["bn.running_mean"] - means[k]) / a[k] for k in range(2)
        )
    else:
        expected = p[0] * means[0] + p[1] * means[1]
    assert close(server.buffers["bn.running_mean"], expected)
    assert int(server.buffers["bn.num_batches_tracked"]) == 9  # integer buffers: the first client's
    assert algorithm_flops("fednova") == 0.0


def algorithm_flops(name: str, params: dict | None = None) -> float:
    return build_algorithm(name, params or {}).attach_flops_per_round(
        steps=5, samples=250, batch_size=50, num_params=1000, forward_flops=300.0, backward_flops=600.0
    )


# ------------------------------------------------------------------------------------------- FedDyn
def test_feddyn_two_rounds_by_hand():
    """FedDyn Alg. 1: client objective L_k(θ) − ⟨g_k, θ⟩ + (α/2)‖θ − θ^{t−1}‖², g_k ← g_k − α(θ_k − θ^{t−1}),
    h ← h − α(|P|/N)(θ̄ − θ^{t−1}) with θ̄ = Σ p_k θ_k, θ^t = θ̄ − h/α. N = 4, |P| = 2, client 0 in both rounds
    (so its g_k ≠ 0 in round 2), unequal sizes."""
    alpha, lr, steps, num_clients = 0.3, 0.1, 3, 4
    x, y, data = problem(6, samples=12)
    clients = {0: torch.arange(0, 4), 1: torch.arange(4, 12), 2: torch.arange(2, 8)}
    spec = make_spec(
        "feddyn", {"alpha": alpha}, model=LINEAR, num_clients=num_clients, clients_per_round=2, local_steps=steps,
        batch_size=64, optimizer={"lr": lr},
    )  # fmt: skip
    algorithm = build_algorithm("feddyn", {"alpha": alpha})
    model, server = server_and_model(algorithm, spec)
    states: dict[int, dict] = {k: {} for k in clients}
    theta, h = server.params.clone(), torch.zeros_like(server.params)
    g = {k: torch.zeros_like(theta) for k in clients}
    for round_index, chosen in ((1, [0, 1]), (2, [0, 2])):
        if round_index == 2:  # the loss value: linear term (minus sign) and quadratic term (½α)
            ctx = client_context(algorithm, spec, model, server, data, clients[0], states[0], 0, 2)
            algorithm.begin_local(ctx)
            displaced = theta + torch.linspace(-0.4, 0.6, theta.numel())
            load_weights(model, displaced)
            value = algorithm.loss(ctx, x[clients[0]], y[clients[0]], model(x[clients[0]]))
            expected = (
                ce_value(displaced, x[clients[0]], y[clients[0]])
                - (g[0] * displaced).sum()
                + 0.5 * alpha * ((displaced - theta) ** 2).sum()
            )
            assert float(value.detach()) == pytest.approx(float(expected.detach()), rel=0, abs=F64_ATOL)
        updates = [
            algorithm.local_train(
                client_context(algorithm, spec, model, server, data, clients[k], states[k], k, round_index)
            )
            for k in chosen
        ]
        algorithm.aggregate(server, updates, round_index)
        trained = []
        for update, k in zip(updates, chosen):
            idx, g_k, start = clients[k], g[k], theta

            def grad(v, idx=idx, g_k=g_k, start=start):
                return ce_grad(v, x[idx], y[idx]) - g_k + alpha * (v - start)

            theta_k = heavy_ball(theta, grad, steps, lr)
            assert close(update.params, theta_k), (round_index, k)
            g[k] = g_k - alpha * (theta_k - theta)
            trained.append(theta_k)
        sizes = torch.tensor([float(len(clients[k])) for k in chosen])
        averaged = sum((n / sizes.sum()) * t for n, t in zip(sizes, trained))
        h = h - alpha * (len(chosen) / num_clients) * (averaged - theta)
        theta = averaged - h / alpha
        assert close(server.params, theta), round_index
    assert g[0].abs().max() > 1e-3 and h.abs().max() > 1e-3
    assert algorithm_flops("feddyn", {"alpha": 0.1}) == 4 * 5 * 1000  # Table VIII: 4K|w|


# ------------------------------------------------------------------------------------------- MOON
def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return (a * b).sum(1) / (a.norm(dim=1) * b.norm(dim=1))


def mlp_representation(model: HeadMLP, w: torch.Tensor, x: torch.Tensor, pre_activation: bool) -> torch.Tensor:
    """z of a HeadMLP at flat weights w: W₁x + b₁ (pre-activation) or ReLU of it (features)."""
    hidden = model.feature_dim
    w1, b1 = w[: hidden * DIM].view(hidden, DIM), w[hidden * DIM : hidden * DIM + hidden]
    z = x @ w1.T + b1
    return z if pre_activation else torch.relu(z)


@pytest.mark.parametrize("representation", ["features", "pre_activation"])
def test_moon_contrastive_loss_by_hand(representation):
    """MOON Eq. 3–4: ℓ = CE + μ·mean_b −log(e^{sim(z, z_glob)/τ} / (e^{sim(z, z_glob)/τ} + e^{sim(z, z_prev)/τ})),
    the positive pair with the round's global model, the negative with the client's previous local model (its
    round-1 upload, checked in round 2, after the server moved)."""
    mu, tau = 2.5, 0.7
    params = {"mu": mu, "tau": tau, "representation": representation}
    x, y, data = problem(7, samples=8)
    spec = make_spec("moon", params, optimizer={"lr": 0.3})
    algorithm = build_algorithm("moon", params)
    torch.manual_seed(7)
    model = HeadMLP(CLASSES, (DIM,), hidden=5)
    algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    algorithm.init_server(server)
    state: dict = {}
    indices = torch.arange(len(y))
    first = algorithm.local_train(client_context(algorithm, spec, model, server, data, indices, state, 0, 1))
    server.params = server.params + 0.2 * torch.randn_like(server.params)  # another global model in round 2

    ctx = client_context(algorithm, spec, model, server, data, indices, state, 0, 2)
    algorithm.begin_local(ctx)
    w = server.params + 0.1 * torch.randn_like(server.params)  # the local model mid-training
    load_weights(model, w)
    logits = algorithm.forward(ctx, x)
    loss = algorithm.loss(ctx, x, y, logits)

    pre = representation == "pre_activation"
    z_glob, z_prev = (mlp_representation(model, v, x, pre) for v in (server.params, first.params))
    hidden = model.feature_dim

    def by_hand(v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = mlp_representation(model, v, x, pre)
        positive, negative = cosine(z, z_glob) / tau, cosine(z, z_prev) / tau
        contrastive = -torch.log(positive.exp() / (positive.exp() + negative.exp())).mean()
        w2 = v[hidden * DIM + hidden : hidden * DIM + hidden + CLASSES * hidden].view(CLASSES, hidden)
        b2 = v[hidden * DIM + hidden + CLASSES * hidden :]
        logits_by_hand = torch.relu(mlp_representation(model, v, x, True)) @ w2.T + b2
        return F.cross_entropy(logits_by_hand, y) + mu * contrastive, contrastive

    w_leaf = w.clone().requires_grad_(True)
    expected, contrastive = by_hand(w_leaf)
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=0, abs=F64_ATOL)
    assert float(contrastive.detach()) > 0.01  # the term does not vanish here
    # the gradient flows through z only: the global and the previous model are fixed
    grad = torch.cat([g.flatten() for g in torch.autograd.grad(loss, list(model.parameters()))])
    assert close(grad, torch.autograd.grad(expected, [w_leaf])[0])


def test_moon_pre_activation_cuts_before_the_encoders_final_activation():
    """FedTrip's MOON representation is the encoder's output before its last ReLU/ReLU6 (a trailing Dropout or
    Identity may follow it); an encoder whose last layer is no activation has no such cut and is a user error."""
    from torch import nn

    from fedbench.algorithms.moon import activation_cut
    from fedbench.errors import ConfigError

    def with_encoder(*layers):
        model = nn.Module()
        model.encoder = nn.Sequential(*layers)
        return model

    assert activation_cut(with_encoder(nn.Linear(2, 2), nn.ReLU(), nn.Dropout(0.5), nn.Identity())) == 1
    assert activation_cut(with_encoder(nn.ReLU(), nn.Linear(2, 2), nn.ReLU6())) == 2
    for model in (
        with_encoder(nn.ReLU(), nn.Linear(2, 2)),
        with_encoder(nn.ReLU(), nn.Tanh(), nn.Dropout()),
        with_encoder(nn.Dropout()),
        with_encoder(),
        nn.Linear(2, 2),
    ):
        with pytest.raises(
            ConfigError,
            match=r"^moon: model \w+ has no final activation to cut before; use algorithm_params.representation = "
            r"'features'$",
        ):
            activation_cut(model)


class BatchNormNet(torch.nn.Module):
    """features = ReLU(BN(Linear(x))) (BN running statistics in eval mode), head = Linear."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.encoder = nn.Sequential(nn.Linear(DIM, 5), nn.BatchNorm1d(5), nn.ReLU())
        self.classifier = nn.Linear(5, CLASSES)
        self.feature_dim = 5
        with torch.no_grad():
            self.encoder[1].bias.fill_(2.0)  # no all-zero feature row: every cosine is defined

    def features(self, x):
        return self.encoder(x)

    def head(self, z):
        return self.classifier(z)

    def forward(self, x):
        return self.head(self.features(x))


def test_moon_negative_pair_is_the_previous_model_with_its_own_batchnorm_statistics():
    """MOON's z_prev comes from the client's previous local model — its round-1 upload, weights *and* BN running
    statistics (eval mode), not those of w^0 or of the global model."""
    mu, tau = 1.5, 0.5
    params = {"mu": mu, "tau": tau}
    x, y, data = problem(9, samples=8)
    spec = make_spec("moon", params, optimizer={"lr": 0.3})
    algorithm = build_algorithm("moon", params)
    torch.manual_seed(9)
    model = BatchNormNet()
    algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    algorithm.init_server(server)
    state: dict = {}
    first = algorithm.local_train(client_context(algorithm, spec, model, server, data, torch.arange(8), state, 0, 1))
    assert not torch.equal(first.buffers["encoder.1.running_mean"], server.buffers["encoder.1.running_mean"])
    previous = BatchNormNet()
    load_weights(previous, first.params, first.buffers)
    server.params = server.params + 0.2 * torch.randn_like(server.params)  # another global model in round 2
    ctx = client_context(algorithm, spec, model, server, data, torch.arange(8), state, 0, 2)
    teacher = BatchNormNet()  # w^t with the server's BN statistics (train-mode passes below update the model's)
    teacher.load_state_dict(model.state_dict())
    algorithm.begin_local(ctx)
    logits = algorithm.forward(ctx, x)
    loss = algorithm.loss(ctx, x, y, logits)
    z = model.features(x)
    with torch.no_grad():
        z_glob, z_prev = teacher.eval().features(x), previous.eval().features(x)
    positive, negative = cosine(z, z_glob) / tau, cosine(z, z_prev) / tau
    expected = F.cross_entropy(model(x), y) - mu * torch.log(positive.exp() / (positive.exp() + negative.exp())).mean()
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=0, abs=F64_ATOL)


def test_moon_features_need_no_final_activation():
    """The default representation is the features themselves: softmax regression (features = the input) trains."""
    params = {"mu": 1.0, "tau": 0.5}
    x, y, data = problem(10, samples=8)
    spec = make_spec("moon", params, model=LINEAR)
    algorithm = build_algorithm("moon", params)
    model, server = server_and_model(algorithm, spec)
    update = algorithm.local_train(client_context(algorithm, spec, model, server, data, torch.arange(8), {}))
    assert not torch.equal(update.params, server.params)


def test_moon_cost_follows_table_viii():
    """K·M·(1+p)·FP with p = 1 (one previous model)."""
    assert algorithm_flops("moon") == 5 * 50 * (1 + 1) * 300.0


# ------------------------------------------------------------------------------------------- SlowMo
def test_slowmo_slow_momentum_under_an_lr_schedule_by_hand():
    """SlowMo Alg. 1 lines 6–7 with γ_t the round's client lr (an exponential schedule, so it changes):
    u ← β·u + (w − w̄)/γ_t, w ← w − α·γ_t·u; w̄ sample-weighted."""
    beta, alpha, lr, gamma = 0.7, 1.3, 0.05, 0.5
    algorithm = build_algorithm("slowmo", {"beta": beta, "slow_lr": alpha})
    spec = make_spec("slowmo", {"beta": beta, "slow_lr": alpha}, optimizer={"lr": lr},
                     lr_schedule={"name": "exponential", "gamma": gamma})  # fmt: skip
    algorithm.bind_model(spec, LinearModel(CLASSES, (DIM,)), (DIM,), CLASSES)
    torch.manual_seed(8)
    server = ServerState(torch.randn(15), {})
    algorithm.init_server(server)
    w, u = server.params.clone(), torch.zeros(15)
    for round_index in (1, 2, 3):
        updates = [ClientUpdate(k, w + 0.1 * torch.randn(15), {}, n, 3, 0.0) for k, n in enumerate((10, 30))]
        algorithm.aggregate(server, updates, round_index)
        averaged = 0.25 * updates[0].params + 0.75 * updates[1].params
        gamma_t = lr * gamma ** (round_index - 1)
        u = beta * u + (w - averaged) / gamma_t
        w = w - alpha * gamma_t * u
        assert close(server.params, w), round_index
    assert algorithm_flops("slowmo") == 0.0 and algorithm_flops("fedavg") == 0.0


# ------------------------------------------------------------------------------------------- cost formulas
def test_attaching_flops_of_every_table_viii_method():
    """Table VIII with K = 5, M = 50, n = 250, |w| = 1000, FP = 300: FedProx 2K|w|, FedDyn and FedTrip 4K|w|,
    MOON K·M·(1+p)·FP, SCAFFOLD 2(K+1)|w| (option II), FedAvg and SlowMo 0."""
    K, M, w, FP = 5, 50, 1000, 300.0
    expected = {
        "fedavg": 0,
        "slowmo": 0,
        "fedprox": 2 * K * w,
        "feddyn": 4 * K * w,
        "fedtrip": 4 * K * w,
        "moon": K * M * 2 * FP,
        "scaffold": 2 * (K + 1) * w,
    }
    assert {name: algorithm_flops(name) for name in expected} == expected


@pytest.mark.parametrize(
    "setup,steps,processed",
    [
        ({"local_epochs": 2}, 2 * math.ceil(600 / 50), 600 * 2),
        ({"local_epochs": 1, "batch_size": 64}, math.ceil(600 / 64), 600),
        ({"local_epochs": 1, "batch_size": 64, "drop_last": True}, 600 // 64, 600),
        ({"local_steps": 7}, 7, 7 * 50),
    ],
)
def test_cost_per_round_is_forward_flops_of_the_samples_plus_the_attaching_operations(setup, steps, processed):
    """FedTrip §4: one client's round costs (samples processed)·FP + A_method, FP the forward MACs per sample,
    K = E·⌈n/B⌉ local iterations (⌊n/B⌋ with drop_last, the budget with local_steps); n = the mean client size."""
    from fedbench.cost import model_card
    from fedbench.report.table import cost_per_round_flops
    from fedbench.spec import RunSpec

    card = model_card("mlp", num_classes=10, input_shape=[1, 28, 28])
    setup = {"batch_size": 50, **setup}
    for name, attach in (("fedprox", 2 * steps * card["params"]), ("moon", steps * setup["batch_size"] * 2)):
        spec = RunSpec(algorithm=name, dataset="mnist", model="mlp", partition="iid", **setup)
        if name == "moon":
            attach *= card["macs_forward"]
        cost = cost_per_round_flops(spec, [500, 700])  # mean 600
        assert cost == pytest.approx(processed * card["macs_forward"] + attach, rel=1e-12)


# ------------------------------------------------------------------------------------------- defaults and bounds
@pytest.mark.parametrize(
    "name, defaults",
    [
        ("fedprox", {"mu": 0.01}),  # FedProx paper's smallest grid value; recipes set theirs
        ("scaffold", {"server_lr": 1.0, "control_update": "paper", "momentum_corrected_steps": True}),
        ("fedtrip", {"mu": 0.4, "xi_rule": "inverse_gap", "epoch_scaled": False}),  # FedTrip spec §1.3, §1.5
        ("fednova", {"normalize_buffers": True}),
        ("feddyn", {"alpha": 0.01}),
        ("moon", {"mu": 1.0, "tau": 0.5, "representation": "features"}),  # FedTrip [paper] μ = 1, τ = 0.5
        ("slowmo", {"beta": 0.9, "slow_lr": 1.0}),  # FedTrip [code] server_momentum
        ("fedntd", {"beta": 1.0, "tau": 3.0}),  # FedNTD's β = 1, τ = 3 (FedDr+ spec's baseline settings)
        ("fedetf", {"beta": 1.0}),  # balanced softmax with the plain class counts
    ],
)
def test_method_defaults_are_the_documented_ones(name, defaults):
    params = build_algorithm(name, {}).params
    assert {key: getattr(params, key) for key in defaults} == defaults


@pytest.mark.parametrize(
    "name, accepted, rejected",
    [
        ("fedprox", {"mu": 0.0}, {"mu": -1e-9}),
        ("scaffold", {"server_lr": 1e-9}, {"server_lr": 0.0}),
        ("fedtrip", {"mu": 0.0}, {"mu": -1e-9}),
        ("feddyn", {"alpha": 1e-9}, {"alpha": 0.0}),
        ("moon", {"mu": 0.0, "tau": 1e-9}, {"tau": 0.0}),
        ("moon", {"mu": 0.0}, {"mu": -1e-9}),
        ("slowmo", {"beta": 0.0, "slow_lr": 1e-9}, {"beta": 1.0}),
        ("slowmo", {"beta": 0.999}, {"beta": -1e-9}),
        ("slowmo", {"slow_lr": 1e-9}, {"slow_lr": 0.0}),
        ("fedntd", {"beta": 0.0, "tau": 1e-9}, {"tau": 0.0}),
        ("fedntd", {"beta": 0.0}, {"beta": -1e-9}),
        ("fedetf", {"beta": 0.0}, {"beta": -1e-9}),
    ],
)
def test_method_parameter_bounds(name, accepted, rejected):
    from fedbench.algorithms import validate_algorithm_params
    from fedbench.errors import ConfigError

    validate_algorithm_params(name, accepted)
    with pytest.raises(ConfigError, match=next(iter(rejected))):
        validate_algorithm_params(name, rejected)


# ------------------------------------------------------------------------------------------- catalogue
def algorithm_names(node) -> set[str]:
    """Every algorithm a recipe's runs name: the values of each ``algorithm`` key, at any depth (but not in a
    combination's ``match``, which names axis labels)."""
    found: set[str] = set()
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "match":
                continue
            if key == "algorithm":
                values = value if isinstance(value, list) else [value]
                found |= {v for v in values if isinstance(v, str)}
                found |= set().union(*(algorithm_names(v) for v in values if isinstance(v, dict)))
            else:
                found |= algorithm_names(value)
    elif isinstance(node, list):
        found |= set().union(*(algorithm_names(v) for v in node))
    return found


def test_every_method_a_paper_trains_is_listed_under_that_paper():
    """``fedbench algorithms`` lists each method with the papers whose recipes train it (the catalogue's
    ``papers``): a method missing there is missing from the paper's listing."""
    import tomllib
    from pathlib import Path

    from fedbench.algorithms import ALGORITHMS

    missing = []
    for path in sorted((Path(__file__).resolve().parents[2] / "recipes").glob("*.toml")):
        recipe = tomllib.loads(path.read_text())
        if recipe["paper"] == "quickstart":
            continue
        runs = {key: recipe.get(key, {}) for key in ("setup", "matrix", "overrides", "combination")}
        missing += [
            (path.name, name)
            for name in sorted(algorithm_names(runs))
            if recipe["paper"] not in ALGORITHMS.info(name)["papers"]
        ]
    assert missing == []
