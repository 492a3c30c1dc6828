"""FedProx (Li et al., MLSys 2020): the proximal term's value and gradient and a client's update, by hand in float64
(to within F64_ATOL), and μ = 0 reproducing FedAvg exactly."""

from __future__ import annotations

import pytest
import torch

from algorithm_fixtures import (
    BASE,
    LINEAR,
    client_context,
    final_params,
    make_spec,
)
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.context import load_weights
from fedbench.spec import RunSpec
from global_formula_fixtures import ce_grad, ce_value, close, heavy_ball, problem, server_and_model


# ------------------------------------------------------------------------------------------- FedProx
@pytest.mark.usefixtures("linear_model", "float64")
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


@pytest.mark.usefixtures("linear_model", "float64")
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


def test_fedprox_with_mu_zero_reproduces_fedavg_exactly(tmp_path, sink):
    from conftest import ListSink

    fedavg = RunSpec(algorithm="fedavg", **BASE)
    fedprox = RunSpec(algorithm="fedprox", algorithm_params={"mu": 0.0}, **BASE)
    _, a = final_params(fedavg, tmp_path, sink)
    other = ListSink()
    _, b = final_params(fedprox, tmp_path, other)
    assert torch.equal(a["server"]["params"], b["server"]["params"])
    assert [r.test_acc for r in sink.records] == [r.test_acc for r in other.records]
    # and a positive mu really changes the result
    _, c = final_params(RunSpec(algorithm="fedprox", algorithm_params={"mu": 1.0}, **BASE), tmp_path, ListSink())
    assert not torch.equal(a["server"]["params"], c["server"]["params"])
