"""FedNova (Wang et al., NeurIPS 2020): normalised averaging of unequal local step counts (with momentum, under Adam),
the buffers, the momentum-aware step count; checked against the paper's formula written out by hand in float64 (to
within F64_ATOL) and against the method it must reduce to."""

from __future__ import annotations

import pytest
import torch

from algorithm_fixtures import (
    LINEAR,
    client_context,
    make_spec,
    train,
)
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.base import weighted_average
from fedbench.algorithms.context import ClientUpdate, ServerState
from fedbench.algorithms.methods.fednova import normalizing_factor
from global_formula_fixtures import (
    algorithm_flops,
    ce_grad,
    close,
    heavy_ball,
    problem,
    server_and_model,
    step_weight_norm,
)


@pytest.mark.usefixtures("linear_model")
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
@pytest.mark.usefixtures("linear_model")
@pytest.mark.usefixtures("float64")
def test_fednova_with_equal_steps_and_no_momentum_equals_fedavg(tmp_path):
    # local_steps makes every client take the same number of steps (FedAvg epochs would not).
    _, fedavg, avg_ckpt = train(make_spec("fedavg", local_steps=4, rounds=3), tmp_path, "a.pt")
    _, fednova, nova_ckpt = train(make_spec("fednova", local_steps=4, rounds=3), tmp_path, "n.pt")
    assert torch.equal(nova_ckpt["server"]["params"], avg_ckpt["server"]["params"])  # FedAvg's average, bit for bit
    assert [r.test_acc for r in fednova.records] == pytest.approx([r.test_acc for r in fedavg.records], abs=0.01)


@pytest.mark.usefixtures("linear_model")
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


@pytest.mark.parametrize("normalize_buffers", [True, False])
def test_fednova_with_every_a_i_equal_returns_fedavgs_average_itself(normalize_buffers):
    """Equal a_i (equal step counts, here with momentum 0.5: its FedAvg setting): in float32 the weights and buffers
    are FedAvg's average bit for bit, where Eq. 7 written out, w − τ_eff Σ p_i (w − w_i)/a_i, rounds otherwise;
    one unequal a_i and Eq. 7 is taken as it reads."""
    torch.manual_seed(5)
    w, mean = torch.randn(200), torch.randn(4)
    sizes, p = [10, 30, 60], torch.tensor([0.1, 0.3, 0.6], dtype=torch.float64)
    algorithm = build_algorithm("fednova", {"normalize_buffers": normalize_buffers})
    for a in ([1.5, 1.5, 1.5], [1.5, 1.5, 2.0]):
        updates = [
            ClientUpdate(k, w + 0.1 * torch.randn(200), {"bn.mean": mean + torch.randn(4)}, n, 2, 0.0, {"a": a_k})
            for k, (n, a_k) in enumerate(zip(sizes, a))
        ]
        server = ServerState(w.clone(), {"bn.mean": mean.clone()})
        algorithm.aggregate(server, updates, 1)
        fedavg = weighted_average([u.params for u in updates], p)
        tau_eff = float((p * torch.tensor(a, dtype=torch.float64)).sum())
        eq_7 = w - tau_eff * weighted_average([(w - u.params) / a_k for u, a_k in zip(updates, a)], p)
        assert server.params.dtype == torch.float32 and not torch.equal(eq_7, fedavg)  # Eq. 7 rounds otherwise
        if len(set(a)) == 1:
            assert torch.equal(server.params, fedavg)
            assert torch.equal(server.buffers["bn.mean"], weighted_average([u.buffers["bn.mean"] for u in updates], p))
        else:
            assert torch.equal(server.params, eq_7)


# ------------------------------------------------------------------------------------------- FedNova
@pytest.mark.usefixtures("linear_model", "float64")
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


@pytest.mark.usefixtures("linear_model", "float64")
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


@pytest.mark.usefixtures("linear_model", "float64")
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
