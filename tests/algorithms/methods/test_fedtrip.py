"""FedTrip: defining properties of the method (its recipes and tables: tests/papers/test_fedtrip_tables.py)."""

from __future__ import annotations

import pytest
import torch

from algorithm_fixtures import (
    LINEAR,
    client_context,
    make_spec,
)
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.context import ClientContext, ServerState
from fedbench.checkpoint.format import load_checkpoint
from fedbench.engine import EngineOptions, run
from fedbench.spec import RunSpec
from global_formula_fixtures import ce_grad, close, heavy_ball, problem, server_and_model

BASE = dict(
    dataset="digits",
    model="digits_mlp",
    model_params={"hidden": 16},
    partition="dirichlet",
    partition_params={"alpha": 0.5, "min_size": 5},
    num_clients=5,
    clients_per_round=2,
    rounds=4,
    batch_size=32,
    optimizer={"lr": 0.05, "momentum": 0.9},
)


def final(spec, tmp_path, sink):
    path = tmp_path / f"{spec.spec_hash}.pt"
    run(spec, sink, EngineOptions(checkpoint_path=path))
    return load_checkpoint(path, spec.spec_hash, torch.device("cpu"))


def test_mu_zero_equals_fedavg(tmp_path, sink):
    from conftest import ListSink

    a = final(RunSpec(algorithm="fedavg", **BASE), tmp_path, sink)
    b = final(RunSpec(algorithm="fedtrip", algorithm_params={"mu": 0.0}, **BASE), tmp_path, ListSink())
    c = final(RunSpec(algorithm="fedtrip", algorithm_params={"mu": 0.4}, **BASE), tmp_path, ListSink())
    assert torch.equal(a["server"]["params"], b["server"]["params"])
    assert not torch.equal(a["server"]["params"], c["server"]["params"])


def _context(model, server, state, round_index, spec):
    from fedbench.data.store import TensorData

    empty = torch.zeros(0)
    return ClientContext(
        spec=spec,
        client_id=0,
        round_index=round_index,
        model=model,
        server=server,
        payload={"initial_params": server.state["initial_params"]},
        state=state,
        data=TensorData(empty, empty, empty, empty),
        indices=torch.arange(0),
        generator=torch.Generator(),
        device=torch.device("cpu"),
        lr=0.1,
    )


@pytest.mark.usefixtures("float64")
def test_regulariser_gradient_is_the_closed_form():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    spec = RunSpec(algorithm="fedtrip", dataset="digits", model="digits_mlp", local_epochs=1)
    algorithm = build_algorithm("fedtrip", {"mu": 0.7})
    w0 = torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone()
    server = ServerState(params=w0 + 0.3, buffers={})
    algorithm.init_server(server)
    historical = w0 - 0.5
    state = {"historical": historical, "last_round": torch.tensor(2)}
    ctx = _context(model, server, state, round_index=6, spec=spec)  # gap 4 → ξ = 1/4
    algorithm.begin_local(ctx)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    algorithm.adjust_gradients(ctx)
    grad = torch.cat([p.grad.flatten() for p in model.parameters()])
    w = w0
    expected = 0.7 * (w - server.params) - 0.7 * 0.25 * (w - historical)
    assert torch.allclose(grad, expected, rtol=0, atol=F64_ATOL)


def test_xi_follows_participation_gaps():
    algorithm = build_algorithm("fedtrip", {"mu": 0.4})
    model = torch.nn.Linear(2, 2)
    spec = RunSpec(algorithm="fedtrip", dataset="digits", model="digits_mlp")
    server = ServerState(params=torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone(), buffers={})
    algorithm.init_server(server)
    state: dict = {}
    seen = []
    for round_index in (3, 4, 9):  # first participation at round 3: ξ = 1/3 with w_hist = w^0
        ctx = _context(model, server, state, round_index, spec)
        algorithm.begin_local(ctx)
        seen.append(ctx.scratch["xi"])
        update = type("U", (), {"params": server.params + round_index})()
        algorithm.end_local(ctx, update)
    assert seen == pytest.approx([1 / 3, 1.0, 1 / 5])
    assert torch.equal(state["historical"], server.params + 9)
    assert build_algorithm("fedtrip", {"xi_rule": "gap"}).xi(4) == 4.0


def test_moon_pre_activation_representation_matches_fedtrips_code():
    """FedTrip's MOON takes z before the last ReLU; the forward output is unchanged."""
    from fedbench.algorithms.methods.moon import pre_activation
    from fedbench.models import build_model

    torch.manual_seed(0)
    for name, shape, width in (
        ("mlp", (1, 28, 28), 100),
        ("fedtrip_cnn", (1, 28, 28), 84),
        ("alexnet_cifar", (3, 32, 32), 1024),
    ):
        model = build_model(name, 10, shape).eval()
        x = torch.randn(3, *shape)
        z = pre_activation(model, x)
        assert z.shape == (3, width)
        assert torch.equal(torch.relu(z), model.features(x))  # the same layers: the same arithmetic
        assert (z < 0).any()  # really before the activation


def test_moon_pre_activation_runs(sink):
    spec = RunSpec(algorithm="moon", algorithm_params={"mu": 1.0, "representation": "pre_activation"}, **BASE)
    assert run(spec, sink).status == "done"


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


@pytest.mark.usefixtures("linear_model", "float64")
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


@pytest.mark.usefixtures("linear_model", "float64")
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


@pytest.mark.usefixtures("linear_model", "float64")
def test_fedtrip_costs_follow_table_viii():
    algorithm = build_algorithm("fedtrip", {"mu": 0.4})
    assert algorithm.extra_upload_floats(99) == 0 and algorithm.extra_download_floats(99) == 0
    assert algorithm.attach_flops_per_round(
        steps=12, samples=600, batch_size=50, num_params=79510, forward_flops=79400.0, backward_flops=1.0
    ) == pytest.approx(4 * 12 * 79510, rel=0, abs=0)
