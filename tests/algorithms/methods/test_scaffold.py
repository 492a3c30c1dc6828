"""SCAFFOLD (Karimireddy et al., ICML 2020): the control variates (option II), the server step and its buffers, Adam's
step count, a client without samples, and the Table VIII cost and bytes; checked against the paper's formula written
out by hand in float64 (to within F64_ATOL) and against the method it must reduce to."""

from __future__ import annotations

import pytest
import torch

from algorithm_fixtures import (
    LINEAR,
    LinearModel,
    client_context,
    fresh_server,
    initial_model,
    make_spec,
    train,
)
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import weighted_average
from fedbench.algorithms.context import ClientUpdate, ServerState
from fedbench.data.store import TensorData
from global_formula_fixtures import (
    CLASSES,
    DIM,
    ce_grad,
    close,
    heavy_ball,
    problem,
    server_and_model,
    softmax_regression_grad,
    step_weight_norm,
)


@pytest.mark.usefixtures("linear_model")
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


# ------------------------------------------------------------------------------------------- SCAFFOLD
SCAFFOLD_OPTIONS = [
    {"server_lr": 0.5, "control_update": "paper", "momentum_corrected_steps": True},
    {"server_lr": 1.0, "control_update": "mean", "momentum_corrected_steps": False},
    {"server_lr": 1.7, "control_update": "paper", "momentum_corrected_steps": False},
    {"server_lr": 1.0, "control_update": "paper", "momentum_corrected_steps": True},
]


@pytest.mark.usefixtures("linear_model", "float64")
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


@pytest.mark.usefixtures("linear_model", "float64")
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
    # exact arithmetic on the float32 inputs (in float64, which holds their products and sums here exactly enough),
    # against the float32 step: each of its roundings (the weighted sum's three, η_g(ȳ − x)'s two and the final
    # addition) errs by at most half an ulp of a value no larger than (1 + 2η_g)·max|input|
    exact = x.double() + eta_g * (0.25 * updates[0].params.double() + 0.75 * updates[1].params.double() - x.double())
    largest = max(float(t.abs().max()) for t in (x, updates[0].params, updates[1].params))
    bound = 6 * 0.5 * torch.finfo(torch.float32).eps * (1 + 2 * eta_g) * largest
    assert torch.allclose(server.params.double(), exact, rtol=0, atol=bound)
    if eta_g == 1.0:  # FedAvg's own average, to the bit (not x + 1·(ȳ − x), which rounds differently)
        fedavg = weighted_average([u.params for u in updates], torch.tensor([0.25, 0.75], dtype=torch.float64))
        assert torch.equal(server.params, fedavg)
    assert torch.allclose(server.buffers["bn.running_var"], torch.tensor([0.25 * 3 + 0.75 * 6, 0.0]))


@pytest.mark.usefixtures("linear_model", "float64")
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


@pytest.mark.usefixtures("linear_model", "float64")
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


@pytest.mark.usefixtures("linear_model", "float64")
def test_scaffold_costs_follow_table_viii():
    """Table VIII: SCAFFOLD communicates 2|w| more per round (c down, Δc up); its attaching computation is
    2(K+1)|w| without option I's n(FP+BP) full-batch gradient (option II is implemented)."""
    algorithm = build_algorithm("scaffold", {})
    assert algorithm.extra_upload_floats(1234) == 1234 and algorithm.extra_download_floats(1234) == 1234
    flops = algorithm.attach_flops_per_round(
        steps=7, samples=300, batch_size=50, num_params=1234, forward_flops=11.0, backward_flops=13.0
    )
    assert flops == 2 * (7 + 1) * 1234


@pytest.mark.usefixtures("linear_model", "float64")
def test_engine_counts_the_bytes_of_scaffold_and_fedavg(tmp_path):
    """bytes_up/bytes_down per round = |S| × 4 bytes × (|w| + the method's extra floats)."""
    for name, extra in (("fedavg", 0), ("scaffold", 1)):
        spec = make_spec(name, rounds=1, clients_per_round=3)
        _, sink, _ = train(spec, tmp_path, f"{name}.pt")
        params = sum(p.numel() for p in initial_model(spec).parameters())
        (record,) = sink.records
        assert record.bytes_up == record.bytes_down == 3 * 4 * params * (1 + extra)
