"""The by-hand pieces of the global-FL formula tests (tests/algorithms/test_<method>.py): softmax regression in
float64, its cross-entropy value and gradient written out, SGD with heavy-ball momentum by hand, and the server and
model a test starts from."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from algorithm_fixtures import (
    LinearModel,
    fresh_server,
    initial_model,
    make_spec,
    named_slices,
    train,
)
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.context import ClientUpdate, ServerState
from fedbench.data.store import TensorData


def softmax_regression_grad(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, classes: int) -> torch.Tensor:
    """∇ of the mean cross-entropy of softmax regression, by hand, in the flat order (weight, bias)."""
    weight, bias = w[: classes * x.shape[1]].view(classes, -1), w[classes * x.shape[1] :]
    residual = torch.softmax(x @ weight.T + bias, dim=1) - F.one_hot(y, classes).to(w.dtype)
    return torch.cat([(residual.T @ x / len(y)).flatten(), residual.mean(0)])


def ntd_by_hand(student, teacher, y, tau):
    total = 0.0
    for b in range(len(y)):  # per sample on purpose: an independent reference
        keep = [c for c in range(student.shape[1]) if c != y[b]]
        p_t = torch.softmax(teacher[b, keep] / tau, 0)
        log_p_s = torch.log_softmax(student[b, keep] / tau, 0)
        total += float((p_t * (p_t.log() - log_p_s)).sum())
    return tau**2 * total / len(y)


def head_and_body(spec, flat):
    model = initial_model(spec)
    slices = named_slices(model, flat)
    head = set(model.head_parameter_names())
    return ({n: v for n, v in slices.items() if n in head}, {n: v for n, v in slices.items() if n not in head})


def split(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(weight C×d, bias C) of softmax regression's flat vector (parameters_to_vector order)."""
    return w[: CLASSES * DIM].view(CLASSES, DIM), w[CLASSES * DIM :]


CLASSES, DIM = 3, 4


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


def algorithm_flops(name: str, params: dict | None = None) -> float:
    return build_algorithm(name, params or {}).attach_flops_per_round(
        steps=5, samples=250, batch_size=50, num_params=1000, forward_flops=300.0, backward_flops=600.0
    )


def assert_packed_equals_sequential(spec, directory) -> None:
    """Train ``spec`` on the packed and on the sequential path (in float64: the caller's ``float64`` fixture) and
    check that the curves, the global weights and every server and client state tensor agree to within F64_ATOL."""
    sequential = train(spec, directory, "sequential.pt", packing="sequential")
    together = train(spec, directory, "packed.pt", packing="packed")
    assert together[0].settings["packing"] == {"executor": "packed", "reason": "requested"}
    (_, sink_a, final_a), (_, sink_b, final_b) = sequential, together
    assert close(final_a["server"]["params"], final_b["server"]["params"])
    for key, value in final_a["server"]["state"].items():
        assert close(value, final_b["server"]["state"][key]), key
    assert final_a["client_states"].keys() == final_b["client_states"].keys()
    for client, state in final_a["client_states"].items():
        for key, value in state.items():
            assert close(value, final_b["client_states"][client][key]), (client, key)
    for a, b in zip(sink_a.records, sink_b.records, strict=True):
        assert abs(a.train_loss - b.train_loss) <= F64_ATOL


def packing_spec(algorithm: str, params: dict | None = None, **overrides):
    """Dirichlet(0.3) over 5 clients, 3 per round for 3 rounds: unequal client sizes (unequal step counts, short last
    batches) and returning clients with their state, as ``tests/engine/test_packed.py``'s cases train."""
    setup = dict(
        num_clients=5, clients_per_round=3, rounds=3, batch_size=32, partition_params={"alpha": 0.3, "min_size": 5}
    )
    return make_spec(algorithm, params, **{**setup, **overrides})


def adaptive_rounds(name, params, second_moment, rounds=3):
    """Run ``rounds`` server steps of the adaptive optimizer ``name`` (Reddi et al. Alg. 2) and the same steps written
    out by hand with ``second_moment(v, Δ)`` on floats, one coordinate at a time; assert they agree every round (and
    that the buffers are FedAvg's average).
    Returns the (v^{t−1}, Δ) pairs met (a test can check which branches of its rule were taken)."""
    met = []
    algorithm = build_algorithm(name, params)
    torch.manual_seed(5)
    server = ServerState(torch.randn(10), {})
    algorithm.init_server(server)
    w, m, v = server.params.clone(), torch.zeros(10), torch.full((10,), params["tau"] ** 2)
    for round_index in range(1, rounds + 1):
        buffers = [{"running_mean": torch.full((2,), float(k))} for k in range(2)]
        updates = [ClientUpdate(k, w + 0.1 * torch.randn(10), buffers[k], n, 3, 0.0) for k, n in enumerate((10, 30))]
        algorithm.aggregate(server, updates, round_index)
        assert close(server.buffers["running_mean"], torch.full((2,), 0.75)), round_index  # FedAvg's buffer average
        delta = 0.25 * updates[0].params + 0.75 * updates[1].params - w
        m = params["beta1"] * m + (1 - params["beta1"]) * delta
        met += [(float(a), float(d)) for a, d in zip(v, delta)]
        v = torch.tensor([second_moment(float(a), float(d)) for a, d in zip(v, delta)])  # one coordinate at a time
        w = w + params["server_lr"] * m / (v.sqrt() + params["tau"])
        assert close(server.params, w), round_index
        assert close(server.state["first_moment"], m) and close(server.state["second_moment"], v), round_index
    return met


def sam_grad(grad, rho):
    """g̃ = ∇F(θ + ρ ∇F(θ)/‖∇F(θ)‖) for a gradient function ``grad``."""

    def at(theta):
        g = grad(theta)
        return grad(theta + rho * g / g.norm())

    return at
