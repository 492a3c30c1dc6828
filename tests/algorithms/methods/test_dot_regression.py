"""FedDr+'s dot-regression (``fedbench/algorithms/methods/dot_regression.py``): the loss L_DR and the FedDr+ objective,
against hand computations in float64."""

from __future__ import annotations

import pytest
import torch

from algorithm_fixtures import (
    MLP,
    client_context,
    fresh_server,
    make_spec,
)
from conftest import F64_ATOL
from fedbench.algorithms import build_algorithm
from fedbench.algorithms.methods.dot_regression import dot_regression_loss
from fedbench.algorithms.params import FEDDR_PLUS_PARAMS
from fedbench.data.store import TensorData
from pfl_formula_fixtures import CLASSES, DIM, etf_model


# ------------------------------------------------------------------------------------------- FedDr+ / Dot-Regression
@pytest.mark.usefixtures("float64")
def test_dot_regression_loss_is_half_the_mean_squared_cosine_gap():
    """FedDr+ Eq. 2: L_DR = ½·mean_b (cos(f_b, v_{y_b}) − 1)², the cosines being the etf head's logits."""
    logits = torch.tensor([[0.2, -0.5, 0.9], [0.7, 0.1, -0.3], [-0.4, 0.6, 0.0], [1.0, 0.3, 0.2]])
    y = torch.tensor([2, 0, 1, 1])
    by_hand = 0.5 * ((0.9 - 1) ** 2 + (0.7 - 1) ** 2 + (0.6 - 1) ** 2 + (0.3 - 1) ** 2) / 4
    assert float(dot_regression_loss(logits, y)) == pytest.approx(by_hand, rel=0, abs=F64_ATOL)


@pytest.mark.usefixtures("head_mlp", "float64")
@pytest.mark.parametrize("feddr_plus", [False, True], ids=["dot_regression", "feddr_plus"])
def test_feddrplus_objective_by_hand(feddr_plus):
    """FedDr+ Eq. 2–4 through the method's hooks: the etf head's logits are ⟨f/‖f‖, v_c⟩ with V the frozen simplex
    ETF; the objective is L_DR (β = 1) or 0.9·L_DR + 0.1·(1/d)‖f(x;θ) − f(x;θ_g)‖² (FedDr+, β = 0.9)."""
    params = FEDDR_PLUS_PARAMS if feddr_plus else {}
    spec = make_spec("dot_regression", params, model=MLP, model_params={"classifier": "etf"})
    algorithm = build_algorithm("dot_regression", params)
    model = etf_model()
    algorithm.bind_model(spec, model, (DIM,), CLASSES)
    server = fresh_server(model)
    algorithm.init_server(server)
    torch.manual_seed(1)
    x, y = torch.randn(7, DIM), torch.tensor([0, 1, 2, 3, 0, 1, 2])
    ctx = client_context(algorithm, spec, model, server, TensorData(x, y, x, y), torch.arange(7), {})
    algorithm.begin_local(ctx)
    teacher_features = model.encoder(x).detach()
    with torch.no_grad():
        for p in model.encoder.parameters():
            p.add_(0.2 * torch.randn_like(p))  # the client has moved away from θ_g
    logits = algorithm.forward(ctx, x)
    f = model.encoder(x)
    v = model.classifier.weight.detach()
    cosines = ((f / f.norm(dim=1, keepdim=True)) @ v.T).detach()
    assert torch.allclose(logits, cosines, rtol=0, atol=F64_ATOL)
    gram = v @ v.T  # simplex ETF: unit rows, pairwise inner products −1/(C−1)
    assert torch.allclose(gram, torch.full_like(gram, -1 / (CLASSES - 1)).fill_diagonal_(1.0), rtol=0, atol=F64_ATOL)
    l_dr = 0.5 * sum((float(cosines[b, y[b]]) - 1) ** 2 for b in range(7)) / 7
    l_fd = float(((f - teacher_features) ** 2).sum().detach()) / (7 * 5)
    assert l_fd > 0
    expected = 0.9 * l_dr + 0.1 * l_fd if feddr_plus else l_dr
    objective = algorithm.objective(ctx, x, y, logits)
    assert float(objective.detach()) == pytest.approx(expected, rel=0, abs=F64_ATOL)
