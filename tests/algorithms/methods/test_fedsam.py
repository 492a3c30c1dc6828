"""FedSAM (Qu et al., ICML 2022): each local step takes the gradient at θ + ρ g/‖g‖ (‖·‖ over every parameter), by
hand in float64 (to within F64_ATOL) on softmax regression, with and without momentum; ρ = 0 is FedAvg bit for bit;
the second pass includes the regularizers."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from algorithm_fixtures import LINEAR, client_context, make_spec, train
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.methods.fedsam import FedSAM
from global_formula_fixtures import (
    algorithm_flops,
    ce_grad,
    ce_value,
    close,
    heavy_ball,
    problem,
    sam_grad,
    server_and_model,
)


def local_update(name, params, momentum, regularizers=()):
    x, y, data = problem(4)
    spec = make_spec(
        name, params, model=LINEAR, local_steps=3, batch_size=64, optimizer={"lr": 0.3, "momentum": momentum}
    )
    algorithm = build_algorithm(name, params)
    model, server = server_and_model(algorithm, spec)
    w = server.params.clone()
    update = algorithm.local_train(client_context(algorithm, spec, model, server, data, torch.arange(len(y)), {}))
    return update, w, x, y


@pytest.mark.usefixtures("linear_model", "float64")
@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_fedsam_local_steps_by_hand(momentum):
    rho = 0.5  # large enough that g̃ and g differ clearly
    update, w, x, y = local_update("fedsam", {"rho": rho}, momentum)
    expected = heavy_ball(w, sam_grad(lambda t: ce_grad(t, x, y), rho), 3, 0.3, momentum)
    assert close(update.params, expected)
    assert not close(expected, heavy_ball(w, lambda t: ce_grad(t, x, y), 3, 0.3, momentum))  # SAM moves elsewhere
    # the loss a step records is the one at θ, not at θ + ε: the first step's is F(w^t)
    points = [heavy_ball(w, sam_grad(lambda t: ce_grad(t, x, y), rho), k, 0.3, momentum) for k in range(3)]
    mean_loss = sum(float(ce_value(p, x, y)) for p in points) / 3
    assert update.train_loss == pytest.approx(mean_loss, rel=0, abs=F64_ATOL)


@pytest.mark.usefixtures("linear_model", "float64")
def test_fedsam_ascends_on_the_whole_objective_regularizers_included():
    """With the prox regularizer (weight μ) the objective is F + (μ/2)‖θ − w‖²: ε and g̃ are both of that."""
    mu, rho = 0.7, 0.5
    params = {"rho": rho, "regularizers": [{"name": "prox", "weight": mu}]}
    update, w, x, y = local_update("fedsam", params, 0.0)
    expected = heavy_ball(w, sam_grad(lambda t: ce_grad(t, x, y) + mu * (t - w), rho), 3, 0.3)
    assert close(update.params, expected)


@pytest.mark.slow
def test_fedsam_with_zero_rho_trains_as_fedavg_bit_for_bit(tmp_path):
    _, _, fedavg = train(make_spec("fedavg", rounds=2), tmp_path, "a.pt")
    _, _, flat = train(make_spec("fedsam", {"rho": 0.0}, rounds=2), tmp_path, "s.pt")
    assert torch.equal(flat["server"]["params"], fedavg["server"]["params"])


@pytest.mark.usefixtures("linear_model", "float64")
@pytest.mark.parametrize(("rho", "passes"), [(0.0, 3), (0.5, 6)])
def test_each_step_takes_a_second_forward_pass_only_with_an_ascent(rho, passes, monkeypatch):
    """ρ = 0 skips the ascent altogether: one forward pass per step, as FedAvg (3 steps); ρ > 0 takes two."""
    calls = []
    forward = FedSAM.forward

    def counted(self, ctx, x):
        calls.append(x.shape[0])
        return forward(self, ctx, x)

    monkeypatch.setattr(FedSAM, "forward", counted)
    local_update("fedsam", {"rho": rho}, 0.0)
    assert len(calls) == passes


def test_a_zero_gradient_takes_no_ascent():
    """ε = 0 where g = 0: the parameters and their (zero) gradients stay as they are, and no batch is re-evaluated."""
    model = torch.nn.Linear(3, 2)
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    before = [p.detach().clone() for p in model.parameters()]
    build_algorithm("fedsam", {"rho": 0.5}).sharpness_aware_gradient(SimpleNamespace(model=model, scratch={}))
    assert all(
        torch.equal(p, b) and torch.equal(p.grad, torch.zeros_like(p)) for p, b in zip(model.parameters(), before)
    )


def test_the_ascent_costs_a_second_forward_and_backward_pass_and_four_vector_operations_per_step():
    # 5 steps of 50 samples, 300 forward and 600 backward FLOPs per sample, 1000 parameters
    assert algorithm_flops("fedsam") == 5 * (50 * (300 + 600) + 4 * 1000)
